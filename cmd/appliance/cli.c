/* cli.c: helpers shared by the subcommands (see cli.h). */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "engine/process.h"
#include "image/image.h"
#include "policy/trust.h"
#include "upstream/upstream.h"

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

bool cli_help_wanted(int argc, char **argv, const struct option *opts)
{
	for (int i = 1; i < argc; i++) {
		const struct option *o;

		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
		if (!opts || strncmp(argv[i], "--", 2) != 0)
			continue;
		o = option_find(argv[i] + 2, opts);
		if (o && o->has_arg == required_argument && !strchr(argv[i], '='))
			i++; /* its value: `--state-dir --help` names a directory */
	}
	return false;
}

int cli_help_print(const char *text)
{
	if (fputs(text, stdout) == EOF || fflush(stdout) == EOF)
		return 1;
	return 0;
}

int cli_fail(const struct appl_err *err)
{
	fprintf(stderr, "appliance: %s\n", err->msg[0] ? err->msg : "failed");
	return 1;
}

int cli_fail_cmd(const char *cmd, const struct appl_err *err)
{
	fprintf(stderr, "appliance: %s: %s\n", cmd, err->msg[0] ? err->msg : "failed");
	return 1;
}

int cli_usage_cmd(const char *cmd, const char *msg)
{
	fprintf(stderr, "appliance: %s: %s\n(see appliance help)\n", cmd, msg);
	return 2;
}

int cli_policy_runnable(const struct policy *p, const char *path, struct appl_err *err)
{
	if (geteuid() != 0 && !policy_runtime_rootless(p))
		return appl_err_set(
			err, -EPERM,
			"%s: not running as root, and the policy does not opt in to the "
			"weaker rootless mode (runtime.rootless); run it as root, or set "
			"runtime.rootless to true and sign it again (SECURITY.md says what "
			"that mode gives up)",
			path);
	return 0;
}

int cli_policy_supported(const struct policy *p, const char *path, struct appl_err *err)
{
	if (policy_approvals_command(p) && access(policy_approvals_command(p), X_OK) < 0) {
		appl_err_errno(err, -errno, errno, "%s: approvals.command %s", path,
			       policy_approvals_command(p));
		return appl_err_append(err, "; install the approver there, or name the one meant "
					    "and sign the policy again");
	}
	return cli_policy_runnable(p, path, err);
}

int cli_policy_startable(const struct policy *p, const char *path, struct appl_err *err)
{
	int rc = cli_policy_supported(p, path, err);

	if (rc == 0 &&
	    (rc = image_layout_check(policy_image_layout(p), policy_image_digest(p), err)) < 0)
		appl_err_prefix(err, "%s", path);
	return rc;
}

/* The header values come from the appliance's environment, and leave it. */
static int secret_from_env(void *data, const char *name, char **value, size_t *len)
{
	(void)data;
	return engine_env_take(name, value, len);
}

int cli_secrets_take(const struct policy *p, struct upstream_secrets **out, struct appl_err *err)
{
	*out = NULL;
	/* No core dump, and no ptrace or /proc/PID/mem for another process of
	 * the same user: the values of the HTTP servers' headers are in this
	 * memory. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return appl_err_errno(err, -errno, errno, "prctl(PR_SET_DUMPABLE)");
	return upstream_secrets_take(p, secret_from_env, NULL, out, err);
}

int cli_state_dir(const char *arg, char *out, size_t len, struct appl_err *err)
{
	if (arg && geteuid() == 0)
		return appl_err_set(err, -EPERM,
				    "--state-dir is refused as root: the rollback floor is always "
				    "%s, so that no command line can point the appliance at a "
				    "fresh, empty one; leave --state-dir out",
				    POLICY_STATE_DIR);
	if (!arg)
		return policy_state_dir_default(out, len, err);
	if (appl_path_join(out, len, arg, "", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "--state-dir: path too long");
	return 0;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n > t && strcmp(s + n - t, tail) == 0;
}

int cli_policy_files_check(const char *sig, struct appl_err *err)
{
	char other[PATH_MAX];
	struct stat st;

	if (!ends_with(sig, ".sig")) {
		if (!ends_with(sig, ".json") || stat(sig, &st) < 0)
			return 0;
		if (appl_path_join(other, sizeof(other), sig, ".sig", "") == 0 &&
		    stat(other, &st) == 0)
			return appl_err_set(err, -EINVAL,
					    "%s is the unsigned policy; pass its signature, %s",
					    sig, other);
		return appl_err_set(err, -EINVAL,
				    "%s is the unsigned policy; sign it with `appliance sign "
				    "--secret KEY %s`, which writes %s.sig, and pass that",
				    sig, sig, sig);
	}
	if (policy_sig_path_policy(sig, other, sizeof(other), NULL) < 0)
		return 0;
	if (stat(sig, &st) < 0 && errno == ENOENT)
		return stat(other, &st) < 0
			       ? 0
			       : appl_err_set(err, -ENOENT,
					      "%s: no such file; sign the policy with `appliance "
					      "sign --secret KEY %s`",
					      sig, other);
	if (stat(other, &st) < 0 && errno == ENOENT)
		return appl_err_set(err, -ENOENT,
				    "%s: no such file; the policy %s signs must be beside it, "
				    "under the name it was signed with",
				    other, sig);
	return 0;
}

int cli_trust_load(const char *file, const char *dir, struct policy_trust **out,
		   struct appl_err *err)
{
	int rc;

	if (file)
		return policy_trust_file_load(file, out, err);
	rc = policy_trust_dir_load(dir ? dir : POLICY_TRUST_DIR_DEFAULT, out, err);
	if (rc == -ENOENT && !dir)
		return appl_err_set(err, rc,
				    "trust directory %s does not exist: `make install` makes it; "
				    "put the public key of the policy's signer there, or name "
				    "another directory with --trust-dir DIR",
				    POLICY_TRUST_DIR_DEFAULT);
	if (rc == -ENOENT)
		return appl_err_set(err, rc,
				    "trust directory %s does not exist: check --trust-dir, or make "
				    "it (root's, not writable by group or others) and put the "
				    "public key of the policy's signer there",
				    dir);
	return rc;
}

void cli_untrusted_hint(const char *file, const char *dir, int rc, struct appl_err *err)
{
	if (rc != -ENOKEY)
		return;
	if (file)
		appl_err_append(err, "; name the signer's public key with --trust");
	else
		appl_err_append(err,
				"; put the signer's public key in %s, or sign with a key that is "
				"there",
				dir ? dir : POLICY_TRUST_DIR_DEFAULT);
}

int cli_policy_accept(const struct cli_policy_opts *o, struct cli_policy *out, struct appl_err *err)
{
	struct policy_trust *trust = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = cli_state_dir(o->state_dir, out->state_dir, sizeof(out->state_dir), err)) < 0 ||
	    (rc = cli_policy_files_check(o->sig, err)) < 0)
		return rc;
	rc = cli_trust_load(o->trust_file, o->trust_dir, &trust, err);
	if (rc == 0) {
		rc = policy_load(o->sig, trust, out->state_dir, (int64_t)time(NULL), false,
				 &out->policy, &out->info, err);
		cli_untrusted_hint(o->trust_file, o->trust_dir, rc, err);
	}
	policy_trust_free(trust);
	if (rc == 0 && o->check)
		rc = o->check(out->policy, o->sig, err);
	if (rc < 0) {
		cli_policy_done(out);
		return rc;
	}
	out->may_commit = !o->trust_file;
	return 0;
}

int cli_policy_commit(const struct cli_policy *cp, struct appl_err *err)
{
	const struct policy_verified *v = &cp->info;
	int rc;

	if (!cp->may_commit)
		return 0;
	rc = policy_state_commit(cp->state_dir, v->deployment, v->serial, v->hash, v->keyid_hex,
				 (int64_t)time(NULL), NULL, err);
	if (rc < 0)
		appl_err_prefix(err, "%s", v->file);
	return rc;
}

void cli_policy_done(struct cli_policy *cp)
{
	policy_free(cp->policy);
	cp->policy = NULL;
}

void cli_hide_paths(struct cli_hide *h, const char *policy, const char *trust_dir,
		    const char *state_dir)
{
	size_t n = strlen(policy);

	memset(h, 0, sizeof(*h));
	if (n > 4 && strcmp(policy + n - 4, ".sig") == 0 && n - 4 < sizeof(h->text))
		snprintf(h->text, sizeof(h->text), "%.*s", (int)(n - 4), policy);
	h->v[0] = policy;
	h->v[1] = h->text[0] ? h->text : policy;
	h->v[2] = trust_dir ? trust_dir : POLICY_TRUST_DIR_DEFAULT;
	h->v[3] = state_dir;
	h->v[4] = NULL;
}
