/* check_cmd.h: `appliance check`, the operator's self-test of a signed
 * policy on this machine (docs/check.md), and the findings about a policy
 * that need no server and no sandbox, which `sign` prints as warnings.
 */
#ifndef APPL_CMD_CHECK_CMD_H
#define APPL_CMD_CHECK_CMD_H

#include "base/err.h"
#include "policy/state.h"

/* check --policy P.sig [--trust-dir DIR] [--cache DIR] [--runtime-dir DIR]
 *       [--call SERVER.TOOL=JSON]...
 * argv[0] is the subcommand's name. Prints the report on stdout; returns
 * the exit status: 0 when nothing was wrong, 1 on any problem or surprise,
 * 2 on a usage error. */
int cmd_check(int argc, char **argv);

/* What `appliance help check` prints. */
void check_help(void);

/* What can be seen in a policy without starting anything. */
enum check_note {
	CHECK_NOTE_NO_CLIENT,	/* no clients.default_role and no token: nobody may call */
	CHECK_NOTE_ROLE_IDLE,	/* a role whose patterns reach no `tools` entry it may use */
	CHECK_NOTE_RULE_UNUSED, /* a `tools` entry through which no role may call */
};

/* Told once per finding; text (borrowed for the call) is one line that
 * starts with the path of the field it is about ("roles.analyst: ..."). */
typedef void (*check_note_fn)(void *data, enum check_note kind, const char *text);

/* Read the policy at path (at most APPL_POLICY_FILE_MAX bytes), make sure
 * it is the document whose SHA-256 is hash (what was just signed or
 * verified: a file changed since is refused with -ESTALE, so the findings
 * are always about the signed bytes), parse it and tell fn(data) each
 * finding: the clients first, then the roles by name, then the `tools`
 * entries by pattern. Whether a role may call through an entry is asked of
 * policy_tool_check itself, with every tool name the role's patterns could
 * mean, so the answer is the bridge's own. A wildcard entry that admits
 * only the tools a server marks read-only counts as usable: that mark is
 * known only once the server runs (check tells). 0, or negative with
 * err. */
int check_policy_notes(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		       check_note_fn fn, void *data, struct appl_err *err);

#endif
