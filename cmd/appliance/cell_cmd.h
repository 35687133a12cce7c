/* cell_cmd.h: `appliance cell`, one cell with no tools.
 *
 * argv[0] is the subcommand's name. Returns the exit status: 0 when the cell
 * ran (even if the code raised), 1 when it could not run (one line on
 * stderr), 2 on a usage error.
 */
#ifndef APPL_CMD_CELL_CMD_H
#define APPL_CMD_CELL_CMD_H

int cmd_cell(int argc, char **argv);

/* What `appliance help cell` and `appliance cell --help` print. */
void cell_help(void);

#endif
