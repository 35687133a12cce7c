/* run_cmd.h: `appliance run --policy POLICY.sig`, the MCP server on stdio.
 * Returns the exit status: 0 after a clean end, 1 when it could not start
 * (one line on stderr), 2 on a usage error. */
#ifndef APPL_CMD_RUN_CMD_H
#define APPL_CMD_RUN_CMD_H

int cmd_run(int argc, char **argv);

/* `appliance stubs --policy POLICY.sig [--role NAME]`: start the policy's
 * servers and print run_python's description and every tool's stub, as the
 * role (default: the stdio client's) sees them. */
int cmd_stubs(int argc, char **argv);

/* What `appliance help run|stubs` and `appliance run|stubs --help` print. */
void run_help(void);
void stubs_help(void);

#endif
