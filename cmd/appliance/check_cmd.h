/* check_cmd.h: `appliance check`, the operator's self-test of a signed
 * policy on this machine (docs/check.md; the check is pkg/check).
 */
#ifndef APPL_CMD_CHECK_CMD_H
#define APPL_CMD_CHECK_CMD_H

/* check --policy P.sig [--trust-dir DIR] [--cache DIR] [--runtime-dir DIR]
 *       [--call SERVER.TOOL=JSON]...
 * argv[0] is the subcommand's name. Prints the report on stdout; returns
 * the exit status: 0 when nothing was wrong, 1 on any problem or surprise,
 * 2 on a usage error. */
int cmd_check(int argc, char **argv);

/* What `appliance help check` prints. */
void check_help(void);

#endif
