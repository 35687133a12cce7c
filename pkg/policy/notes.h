/* notes.h: what can be seen in a signed policy without starting anything:
 * a policy under which no client may call, a role that can call nothing,
 * a `tools` entry no role can call through. `sign` prints them as
 * warnings; `check` prints them too and keeps the document's `tools`
 * patterns (sorted, which no accessor of policy.h lists) to judge them
 * against what the servers really list.
 */
#ifndef APPL_POLICY_NOTES_H
#define APPL_POLICY_NOTES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "policy/policy.h"
#include "policy/state.h"

/* What can be seen in a policy without starting anything. */
enum policy_note {
	POLICY_NOTE_NO_CLIENT,	 /* no clients.default_role and no token: nobody may call */
	POLICY_NOTE_ROLE_IDLE,	 /* a role whose patterns reach no `tools` entry it may use */
	POLICY_NOTE_RULE_UNUSED, /* a `tools` entry through which no role may call */
};

/* Told once per finding; text (borrowed for the call) is one line that
 * starts with the path of the field it is about ("roles.analyst: ..."). */
typedef void (*policy_note_fn)(void *data, enum policy_note kind, const char *text);

/* A policy read for its notes: the parsed policy and its `tools` patterns. */
struct policy_notes;

/* Read the policy at path (at most APPL_POLICY_FILE_MAX bytes), make sure
 * it is the document whose SHA-256 is hash (what was just signed or
 * verified: a file changed since is refused with -ESTALE, so the findings
 * are always about the signed bytes, never about what someone wrote into
 * the file afterwards) and parse it. New *out; 0, or negative with err. */
int policy_notes_load(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		      struct policy_notes **out, struct appl_err *err);

/* Safe on NULL. */
void policy_notes_free(struct policy_notes *n);

/* Tell fn(data) each finding of n: the clients first, then the roles by
 * name, then the `tools` entries by pattern. Whether a role may call
 * through an entry is asked of policy_tool_check itself, with every tool
 * name the role's patterns could mean, so the answer is the bridge's own.
 * A wildcard entry that admits only the tools a server marks read-only
 * counts as usable: that mark is known only once the server runs (check
 * tells). */
void policy_notes_emit(const struct policy_notes *n, policy_note_fn fn, void *data);

/* policy_notes_load, policy_notes_emit and policy_notes_free in one: what
 * `sign` asks for. 0, or negative with err (nothing told). */
int policy_notes_check(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		       policy_note_fn fn, void *data, struct appl_err *err);

/* The `tools` entries, sorted by pattern (strcmp): how many, the i-th
 * pattern (borrowed from n), whether its access is "read", and whether
 * pat is exactly one of them. */
size_t policy_notes_rule_count(const struct policy_notes *n);
const char *policy_notes_rule_get(const struct policy_notes *n, size_t i);
bool policy_notes_rule_read(const struct policy_notes *n, size_t i);
bool policy_notes_rule_has(const struct policy_notes *n, const char *pat);

/* A pattern "server.tool" or "server.*" taken apart: the server part into
 * out (cap bytes; false when there is no dot or it does not fit), the tool
 * part (borrowed from pat; "" without a dot), whether the tool part is the
 * wildcard, and whether the pattern is about server. */
bool policy_notes_pattern_server(const char *pat, char *out, size_t cap);
const char *policy_notes_pattern_tool(const char *pat);
bool policy_notes_pattern_wild(const char *pat);
bool policy_notes_pattern_on(const char *pat, const char *server);

#endif
