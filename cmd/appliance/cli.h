/* cli.h: small helpers shared by the subcommands. */
#ifndef APPL_CMD_CLI_H
#define APPL_CMD_CLI_H

#include <getopt.h>
#include <limits.h>
#include <stdbool.h>

#include "base/err.h"
#include "policy/load.h"
#include "policy/trust.h"

/* getopt_long accepts any unambiguous prefix of a long option (`--trust`
 * for `--trust-dir`, `--root` for `--rootless`). For a security tool an
 * option must mean exactly what it says: this returns the first argument
 * before "--" that starts with "--" and is not exactly one of opts' names
 * (alone, or followed by '=' for options taking an argument), or NULL when
 * all are exact. Values of options that take one are skipped. */
const char *cli_inexact_option(int argc, char **argv, const struct option *opts);

/* Whether the command line asks for the command's own help text: an
 * argument before "--" that is exactly "--help" or "-h", and not the value
 * of an option of opts that takes one (opts may be NULL: a command without
 * options). Asked before anything else, so that `run --help` is never an
 * inexact option nor a missing --policy. */
bool cli_help_wanted(int argc, char **argv, const struct option *opts);

/* Print a help text on stdout; returns exit status 0 (1 when stdout could
 * not be written, say a closed pipe). */
int cli_help_print(const char *text);

/* Print "appliance: MESSAGE" on stderr; returns exit status 1. */
int cli_fail(const struct appl_err *err);

/* The same for subcommand cmd ("appliance: keygen: MESSAGE"), and its
 * usage error, which points at `appliance help` and returns 2. */
int cli_fail_cmd(const char *cmd, const struct appl_err *err);
int cli_usage_cmd(const char *cmd, const char *msg);

/* What the appliance itself requires of a policy before it uses it (say,
 * the rootless opt-in); 0 or a negative code with err filled. */
typedef int (*cli_policy_check)(const struct policy *p, const char *path, struct appl_err *err);

/* The rootless check every policy user needs: as an ordinary user, the
 * policy must opt in to the weaker rootless mode. */
int cli_policy_runnable(const struct policy *p, const char *path, struct appl_err *err);

/* What `run` requires of a policy on this machine before anything starts:
 * its approver program executable, and cli_policy_runnable. `check` judges
 * with it too. */
int cli_policy_supported(const struct policy *p, const char *path, struct appl_err *err);

/* What `run` requires before it says it serves: cli_policy_supported, and
 * an image layout that holds the pinned manifest (image_layout_check), so
 * a wrong digest is refused before the start, not at the first cell. */
int cli_policy_startable(const struct policy *p, const char *path, struct appl_err *err);

/* Make the process not dumpable, then take the values of the variables
 * the HTTP servers' headers name out of the environment into *out (new;
 * upstream_secrets_take, engine_env_take; NULL on failure). Before the
 * upstreams start; upstream_secrets_free when done. */
struct upstream_secrets;
int cli_secrets_take(const struct policy *p, struct upstream_secrets **out, struct appl_err *err);

/* Where a policy comes from and what it must pass. */
struct cli_policy_opts {
	const char *sig;	/* the signature file */
	const char *trust_file; /* --trust: one key file (verify and cell) */
	const char *trust_dir;	/* --trust-dir; NULL: the default */
	const char *state_dir;	/* --state-dir, refused as root; NULL: the default */
	cli_policy_check check; /* may be NULL */
};

/* A policy verified and checked, not yet committed to the floor. */
struct cli_policy {
	struct policy *policy; /* new; cli_policy_done frees it */
	struct policy_verified info;
	char state_dir[PATH_MAX];
	/* Only keys from the root-owned trust directory may raise the floor:
	 * a key file named on the command line is anyone's, so a policy it
	 * signed is held to the floor but never moves it. */
	bool may_commit;
};

/* The state directory to use: as root always POLICY_STATE_DIR, and a
 * state_dir argument is refused (-EPERM, saying why): whoever writes the
 * command line must not be able to name a fresh, empty floor. An ordinary
 * user's floor is that user's own, so there it may be moved. */
int cli_state_dir(const char *arg, char *out, size_t len, struct appl_err *err);

/* The mistakes a first start makes most, caught before any key is read,
 * each saying what to run: the unsigned policy (a name ending in .json)
 * named instead of its signature, a signature not made yet beside its
 * policy, a signature whose policy is not beside it. 0 when none of them
 * (anything else is policy_load's to find and word). */
int cli_policy_files_check(const char *sig, struct appl_err *err);

/* Load the keys: the one key file when file is given, else the trust
 * directory dir (NULL: the default). A directory that does not exist is
 * refused saying how to make it (make install, for the default) and that
 * --trust-dir names another. New *out. */
int cli_trust_load(const char *file, const char *dir, struct policy_trust **out,
		   struct appl_err *err);

/* After policy_load returned rc with the same file and dir: a signature by
 * a key not trusted (-ENOKEY) gets what to do appended. */
void cli_untrusted_hint(const char *file, const char *dir, int rc, struct appl_err *err);

/* Verify the signed policy and judge it: keys from o->trust_file when
 * given, else from the trust directory; expiry, and the rollback floor of
 * its deployment (read, not changed); then o->check. Nothing is recorded:
 * the caller commits with cli_policy_commit once everything it checks at
 * start has passed, so a policy that is refused never blocks the right one
 * at that serial. */
int cli_policy_accept(const struct cli_policy_opts *o, struct cli_policy *out,
		      struct appl_err *err);

/* Record the accepted policy's serial in the floor of its deployment, when
 * may_commit (else nothing, 0). Fails with -ESTALE when another appliance
 * has meanwhile accepted a higher serial. */
int cli_policy_commit(const struct cli_policy *cp, struct appl_err *err);

/* Free what cli_policy_accept made; safe on a zeroed one. */
void cli_policy_done(struct cli_policy *cp);

/* What the upstream servers must not see besides the defaults
 * (engine_confine_prepare): the policy (signed, and the text beside it it
 * was signed from), the trust directory (NULL: the default) and the state
 * directory. out[0..4] filled, NULL-ended; strings borrowed from the
 * arguments and h. */
struct cli_hide {
	char text[PATH_MAX];
	const char *v[5];
};
void cli_hide_paths(struct cli_hide *h, const char *policy, const char *trust_dir,
		    const char *state_dir);

#endif
