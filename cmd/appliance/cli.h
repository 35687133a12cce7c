/* cli.h: small helpers shared by the subcommands. */
#ifndef APPL_CMD_CLI_H
#define APPL_CMD_CLI_H

#include <getopt.h>

#include "base/err.h"
#include "policy/load.h"

/* getopt_long accepts any unambiguous prefix of a long option (`--trust`
 * for `--trust-dir`, `--root` for `--rootless`). For a security tool an
 * option must mean exactly what it says: this returns the first argument
 * before "--" that starts with "--" and is not exactly one of opts' names
 * (alone, or followed by '=' for options taking an argument), or NULL when
 * all are exact. Values of options that take one are skipped. */
const char *cli_inexact_option(int argc, char **argv, const struct option *opts);

/* Print "appliance: MESSAGE" on stderr; returns exit status 1. */
int cli_fail(const struct appl_err *err);

/* What the appliance itself requires of a policy before it uses it (say,
 * the rootless opt-in); 0 or a negative code with err filled. */
typedef int (*cli_policy_check)(const struct policy *p, const char *path, struct appl_err *err);

/* The rootless check every policy user needs: as an ordinary user, the
 * policy must opt in to the weaker rootless mode. */
int cli_policy_runnable(const struct policy *p, const char *path, struct appl_err *err);

/* Verify the signed policy at sig and accept it for use: keys from
 * trust_file when given, else from trust_dir (NULL: the default); expiry
 * and rollback against state_dir (NULL: the default); then check (may be
 * NULL); and only then record its serial, so a policy that is refused never
 * blocks the right one at that serial. On success *p is the policy (new)
 * and info (may be NULL) what was verified. */
int cli_policy_accept(const char *sig, const char *trust_file, const char *trust_dir,
		      const char *state_dir, cli_policy_check check, struct policy **p,
		      struct policy_verified *info, struct appl_err *err);

#endif
