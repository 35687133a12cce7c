/* status_cmd.h: `appliance status` and `appliance reload`: the admin
 * sockets of the appliances running on this machine (docs/operating.md).
 */
#ifndef APPL_CMD_STATUS_CMD_H
#define APPL_CMD_STATUS_CMD_H

/* status [--name NAME] [--pid PID] [--json] [--admin-dir DIR] (argv[0]
 * "status"): each matching appliance's status, as text blocks or one
 * JSON array on stdout. Returns the exit status: 0 when every socket
 * that answered was read (a stale one is skipped, said on stderr), 1 when
 * none matches, none answered, or one refused (one line each on stderr),
 * 2 on a usage error. */
int cmd_status(int argc, char **argv);

/* reload [--name NAME] [--pid PID] [--admin-dir DIR]: ask each match to
 * reload its policy and print each outcome on stdout. 0 when every one
 * reloaded; 1 otherwise, or when none matches; 2 on a usage error. */
int cmd_reload(int argc, char **argv);

/* What `appliance help status` and `appliance help reload` print. */
void status_help(void);
void reload_help(void);

#endif
