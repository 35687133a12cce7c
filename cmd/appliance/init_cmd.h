/* init_cmd.h: `appliance init`: write a starting policy from server
 * commands, after starting each server once (confined as run confines it)
 * to list its tools.
 *
 * Returns the exit status: 0 when the policy was written, 1 when it was not
 * (one line on stderr saying why), 2 on a usage error.
 */
#ifndef APPL_CMD_INIT_CMD_H
#define APPL_CMD_INIT_CMD_H

/* init --server NAME=PROGRAM[,ARG]... [--image DIR] [--output FILE]
 *      [--deployment NAME] [--server-uids FIRST-LAST] */
int cmd_init(int argc, char **argv);

/* What `appliance help init` and `appliance init --help` print. */
void init_help(void);

#endif
