/* version_cmd.h: `appliance version` (also `--version` and `-V`): what
 * this appliance is and what it runs with.
 */
#ifndef APPL_CMD_VERSION_CMD_H
#define APPL_CMD_VERSION_CMD_H

/* argv[0] is the name it was called by. Prints on stdout
 *
 *     appliance VERSION
 *     runsc PATH: RELEASE, platform PLATFORM
 *     LIBRARY VERSION                (one line per library)
 *
 * PATH the runsc a policy uses when it names none, PLATFORM the one it uses
 * unless runtime.platform says otherwise; a runsc that is missing, says no
 * release or is older than the tested one is said so on its line. The
 * libraries' versions are those loaded at run time, asked of each library.
 * Returns the exit status: 0 (also without a usable runsc), 1 when stdout
 * could not be written, 2 on a usage error (any argument but --help). */
int cmd_version(int argc, char **argv);

/* What `appliance help version` and `appliance version --help` print. */
void version_help(void);

#endif
