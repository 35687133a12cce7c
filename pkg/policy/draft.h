/* draft.h: a policy written from scratch, for `appliance init`: the fields
 * every policy must have, stdio servers with their commands, one exact
 * `tools` entry per tool (never a wildcard) with its access, and two roles:
 * POLICY_DRAFT_READER may call every read tool and no write,
 * POLICY_DRAFT_WRITER every tool; the stdio client's role is the reader.
 *
 * Pure: nothing is looked up, and the text is JSON for an administrator to
 * read, change and sign. The draft checks nothing the parser checks;
 * policy_draft_text parses what it wrote and fails with the parser's
 * message, so a text it returns is one policy_parse accepts.
 */
#ifndef APPL_POLICY_DRAFT_H
#define APPL_POLICY_DRAFT_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "policy/policy.h"

#define POLICY_DRAFT_READER "reader"
#define POLICY_DRAFT_WRITER "writer"

/* What every policy must say. Strings are copied. */
struct policy_draft_head {
	uint64_t serial;
	int64_t expires; /* unix seconds, UTC */
	const char *deployment;
	const char *layout; /* image.layout: absolute */
	const char *digest; /* image.digest: sha256:HEX */
};

struct policy_draft; /* opaque */

/* A new draft (policy_draft_free), or NULL when memory ran out. */
struct policy_draft *policy_draft_new(const struct policy_draft_head *h);
void policy_draft_free(struct policy_draft *d); /* safe on NULL */

/* servers.NAME.command = argv[0..argc) (copied). 0 or -ENOMEM. */
int policy_draft_server_add(struct policy_draft *d, const char *name, const char *const *argv,
			    size_t argc);

/* Take servers.NAME out again, with every tools entry of it. */
void policy_draft_server_remove(struct policy_draft *d, const char *name);

/* tools."SERVER.TOOL" with access, in the order added; the roles follow.
 * 0 or -ENOMEM. */
int policy_draft_tool_add(struct policy_draft *d, const char *server, const char *tool,
			  enum policy_access access);

/* Take tools."SERVER.TOOL" out again (nothing when there is none). */
void policy_draft_tool_remove(struct policy_draft *d, const char *server, const char *tool);

/* The document as indented JSON ending in a newline, new (free), its
 * length in *len (a NUL follows), parsed once to be sure (and, when p is not NULL, the
 * parsed policy in *p, new: policy_free). NULL with err: -ENOMEM, or the
 * parser's refusal. */
char *policy_draft_text(const struct policy_draft *d, size_t *len, struct policy **p,
			struct appl_err *err);

#endif
