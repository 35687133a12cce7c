/* audit_cmd.h: `appliance audit init|verify|show` (docs/audit.md).
 *
 * Takes argv with argv[0] "audit" and returns the exit status: 0 on
 * success, 1 on a problem found in a log or a failure (said on stdout or
 * stderr), 2 on a usage error.
 */
#ifndef APPL_CMD_AUDIT_CMD_H
#define APPL_CMD_AUDIT_CMD_H

/* audit init [--state-dir DIR] PATH
 * audit verify [--key HEX|@FILE]... [--head FILE] [--state-dir DIR] FILE...
 * audit show [--runs] [--tool NAME] FILE */
int cmd_audit(int argc, char **argv);

/* What `appliance help audit [init|verify|show]` and `appliance audit
 * [init|verify|show] --help` print. */
void audit_help(void);
void audit_init_help(void);
void audit_verify_help(void);
void audit_show_help(void);

#endif
