/* cell_cmd.c: `appliance cell` (see cell_cmd.h). */
#include "cell_cmd.h"
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "engine/engine.h"

struct cell_args {
	struct engine_config o;
	const char *policy, *trust_file, *trust_dir, *state_dir;
	bool dev_flags; /* --image, --digest, --deadline, --rootless or --runsc given */
	bool help;	/* --help: print help_text, do nothing else */
};

static const char help_text[] =
	"usage: appliance cell --policy POLICY.sig [--trust PUBKEY | --trust-dir DIR]\n"
	"                      [--state-dir DIR] [--cache DIR] [--runtime-dir DIR] FILE|-\n"
	"       appliance cell --image DIR --digest sha256:HEX [--deadline SECONDS]\n"
	"                      [--rootless] [--runsc PATH] [--cache DIR]\n"
	"                      [--runtime-dir DIR] FILE|-\n"
	"\n"
	"Run the Python code in FILE (- for standard input) as one cell, with no\n"
	"tools, in a fresh gVisor sandbox, and print its result object as one line\n"
	"of JSON. With --policy the image, runtime and limits are the verified\n"
	"policy's, and its serial is recorded as run records it (a policy with an\n"
	"audit log is refused: cell writes none). With --image and --digest the\n"
	"same without a policy, for development; these and --deadline, --rootless\n"
	"and --runsc are refused with --policy, which no flag may widen.\n"
	"\n"
	"options:\n"
	"  --policy POLICY.sig  take image, runtime and limits from this signed policy\n"
	"  --trust PUBKEY       check with this one key (it never moves the floor)\n"
	"  --trust-dir DIR      the trusted keys (default /etc/appliance/trusted.d)\n"
	"  --state-dir DIR      an ordinary user's rollback state (refused as root)\n"
	"  --image DIR          without a policy: the OCI image layout to run\n"
	"  --digest sha256:HEX  without a policy: the image's manifest digest\n"
	"  --deadline SECONDS   without a policy: deadline, 1 to 3600 (default 90)\n"
	"  --rootless           without a policy: runsc's weaker rootless mode\n"
	"  --runsc PATH         without a policy: the runsc (default /usr/bin/runsc)\n"
	"  --cache DIR          where the image is unpacked (default as for image verify)\n"
	"  --runtime-dir DIR    runsc's state directory (default /run/appliance as root)\n"
	"  --help, -h           print this text\n"
	"\n"
	"exit status: 0 when the cell ran, even if its code raised; 1 when it could\n"
	"not run (one line on stderr saying why); 2 on a usage error.\n";

void cell_help(void)
{
	fputs(help_text, stdout);
}

static int usage(const char *msg)
{
	fprintf(stderr,
		"appliance cell: %s\n"
		"usage: appliance cell --policy POLICY.sig [--trust PUBKEY | --trust-dir DIR]\n"
		"                      [--state-dir DIR] [--cache DIR] [--runtime-dir DIR] FILE|-\n"
		"       appliance cell --image DIR --digest sha256:HEX [--deadline SECONDS]\n"
		"                      [--rootless] [--runsc PATH] [--cache DIR] [--runtime-dir "
		"DIR]\n"
		"                      FILE|-\n",
		msg);
	return 2;
}

static int code_read(const char *arg, char **code, size_t *len, struct appl_err *err)
{
	if (strcmp(arg, "-") == 0)
		return appl_fd_read(STDIN_FILENO, APPL_CELL_CODE_MAX, "standard input", code, len,
				    err);
	return appl_file_read(arg, APPL_CELL_CODE_MAX, code, len, err);
}

static int deadline_parse(const char *s, uint64_t *ms)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < 1 || v > APPL_DEADLINE_S_CEIL)
		return -1;
	*ms = v * 1000ull;
	return 0;
}

static int cell_print(json_t *result)
{
	if (json_dumpf(result, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF ||
	    fflush(stdout) == EOF) {
		fprintf(stderr, "appliance: writing the result failed\n");
		return 1;
	}
	return 0;
}

static int option_take(struct cell_args *a, int c)
{
	switch (c) {
	case 'i':
		a->o.image = optarg;
		break;
	case 'd':
		a->o.digest = optarg;
		break;
	case 't':
		if (deadline_parse(optarg, &a->o.cell.deadline_ms) < 0)
			return usage("--deadline takes whole seconds, 1 to 3600");
		break;
	case 'r':
		a->o.rootless = true;
		break;
	case 'x':
		a->o.runsc = optarg;
		break;
	case 'c':
		a->o.cache = optarg;
		return 0;
	case 's':
		a->o.run_dir = optarg;
		return 0;
	case 'p':
		a->policy = optarg;
		return 0;
	case 'T':
		a->trust_file = optarg;
		return 0;
	case 'D':
		a->trust_dir = optarg;
		return 0;
	case 'S':
		a->state_dir = optarg;
		return 0;
	default:
		return usage("unknown option");
	}
	a->dev_flags = true;
	return 0;
}

static int args_parse(int argc, char **argv, struct cell_args *a)
{
	static const struct option opts[] = {
		{"image", required_argument, NULL, 'i'},
		{"digest", required_argument, NULL, 'd'},
		{"deadline", required_argument, NULL, 't'},
		{"rootless", no_argument, NULL, 'r'},
		{"runsc", required_argument, NULL, 'x'},
		{"cache", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 's'},
		{"policy", required_argument, NULL, 'p'},
		{"trust", required_argument, NULL, 'T'},
		{"trust-dir", required_argument, NULL, 'D'},
		{"state-dir", required_argument, NULL, 'S'},
		{NULL, 0, NULL, 0},
	};
	int c, rc;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return usage("options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if ((rc = option_take(a, c)) != 0)
			return rc;
	if (optind != argc - 1)
		return usage("needs one FILE, or - for standard input");
	if (a->policy) {
		/* Everything the run may do comes from the signed policy: no flag
		 * may widen or swap it. */
		if (a->dev_flags)
			return usage("--policy excludes --image, --digest, --deadline, --rootless, "
				     "--runsc");
		if (a->trust_file && a->trust_dir)
			return usage("--trust and --trust-dir exclude each other");
	} else if (!a->o.image || !a->o.digest) {
		return usage("needs --policy POLICY.sig, or --image DIR and --digest sha256:HEX");
	} else if (a->trust_file || a->trust_dir || a->state_dir) {
		return usage("--trust, --trust-dir and --state-dir go with --policy");
	}
	return 0;
}

static int on_started(void *data, struct appl_err *err)
{
	return cli_policy_commit(data, err);
}

/* A run the audit log does not record must not happen under a policy that
 * has one: `cell` writes none, so it refuses such a policy. */
static int cell_policy_check(const struct policy *p, const char *path, struct appl_err *err)
{
	if (policy_audit_path(p))
		return appl_err_set(err, -ENOTSUP,
				    "%s: has an audit log, which `appliance cell` does not write: "
				    "run its cells through `appliance run`",
				    path);
	return cli_policy_runnable(p, path, err);
}

/* The engine with one sandbox, one run of code, everything down. */
static int cell_run_one(const struct engine_config *cfg, const char *code, size_t len,
			json_t **result, struct appl_err *err)
{
	struct engine *e = engine_open(cfg, err);
	int rc = e ? engine_start(e, err) : err->code;

	if (rc == 0)
		rc = engine_run_wait(e, code, len, "appliance cell", result, err);
	engine_close(e);
	return rc;
}

int cmd_cell(int argc, char **argv)
{
	struct cell_args a;
	struct appl_err err = {0};
	struct cli_policy cp = {0};
	json_t *result = NULL;
	char *code = NULL;
	size_t len = 0;
	int rc;

	memset(&a, 0, sizeof(a));
	/* No servers, no pool, no audit log: one sandbox for this code. */
	a.o.parts = ENGINE_SANDBOX;
	sandbox_oci_params_init(&a.o.oci);
	cell_limits_init(&a.o.cell);
	if ((rc = args_parse(argc, argv, &a)) != 0)
		return rc;
	if (a.help)
		return cli_help_print(help_text);
	if (a.policy) {
		struct cli_policy_opts o = {.sig = a.policy,
					    .trust_file = a.trust_file,
					    .trust_dir = a.trust_dir,
					    .state_dir = a.state_dir,
					    .check = cell_policy_check};
		if (cli_policy_accept(&o, &cp, &err) < 0)
			return cli_fail(&err);
		/* Image, runtime and limits are the policy's. Recorded once the
		 * image has verified: see run. */
		a.o.policy = cp.policy;
		a.o.on_started = on_started;
		a.o.data = &cp;
	}
	rc = code_read(argv[optind], &code, &len, &err);
	if (rc == 0)
		rc = cell_run_one(&a.o, code, len, &result, &err);
	free(code);
	rc = rc < 0 ? cli_fail(&err) : cell_print(result);
	json_decref(result);
	cli_policy_done(&cp);
	return rc;
}
