/* cli.c: helpers shared by the subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const struct option *option_find(const char *arg, const struct option *opts)
{
	size_t len = strcspn(arg, "=");

	for (const struct option *o = opts; o->name; o++)
		if (strlen(o->name) == len && strncmp(arg, o->name, len) == 0 &&
		    (arg[len] == '\0' || o->has_arg != no_argument))
			return o;
	return NULL;
}

const char *cli_inexact_option(int argc, char **argv, const struct option *opts)
{
	for (int i = 1; i < argc; i++) {
		const struct option *o;

		if (strcmp(argv[i], "--") == 0)
			return NULL;
		if (strncmp(argv[i], "--", 2) != 0)
			continue;
		o = option_find(argv[i] + 2, opts);
		if (!o)
			return argv[i];
		if (o->has_arg == required_argument && !strchr(argv[i], '='))
			i++; /* its value, which may itself start with "--" */
	}
	return NULL;
}

int cli_fail(const struct appl_err *err)
{
	fprintf(stderr, "appliance: %s\n", err->msg[0] ? err->msg : "failed");
	return 1;
}

int cli_policy_runnable(const struct policy *p, const char *path, struct appl_err *err)
{
	if (geteuid() != 0 && !policy_runtime_rootless(p))
		return appl_err_set(
			err, -EPERM,
			"%s: not running as root, and the policy does not opt in to the "
			"weaker rootless mode (runtime.rootless)",
			path);
	return 0;
}

int cli_policy_accept(const char *sig, const char *trust_file, const char *trust_dir,
		      const char *state_dir, cli_policy_check check, struct policy **p,
		      struct policy_verified *info, struct appl_err *err)
{
	struct policy_trust *trust = NULL;
	struct policy_verified v;
	int64_t now = (int64_t)time(NULL);
	char state[PATH_MAX];
	int rc;

	*p = NULL;
	if (!state_dir) {
		if ((rc = policy_state_dir_default(state, sizeof(state), err)) < 0)
			return rc;
		state_dir = state;
	}
	if (trust_file)
		rc = policy_trust_file_load(trust_file, &trust, err);
	else
		rc = policy_trust_dir_load(trust_dir ? trust_dir : POLICY_TRUST_DIR_DEFAULT, &trust,
					   err);
	if (rc == 0)
		rc = policy_load(sig, trust, state_dir, now, false, p, &v, err);
	policy_trust_free(trust);
	if (rc == 0 && check)
		rc = check(*p, sig, err);
	if (rc == 0)
		rc = policy_state_commit(state_dir, v.serial, v.hash, v.keyid_hex, now, NULL, err);
	if (rc < 0) {
		policy_free(*p);
		*p = NULL;
		return rc;
	}
	if (info)
		*info = v;
	return 0;
}
