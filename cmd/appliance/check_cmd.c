/* check_cmd.c: `appliance check` (docs/check.md): its arguments, the
 * command line's part of judging the policy (the keys it trusts, what run
 * requires, the servers' secrets), the report on stdout and the exit
 * status. The check itself is pkg/check.
 */
#define _GNU_SOURCE
#include "check_cmd.h"
#include "cli.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check.h"
#include "json/json.h"
#include "log/log.h"
#include "loop/loop.h"
#include "proc/confine.h"

static const char check_usage_text[] =
	"usage: appliance check --policy POLICY.sig [--trust-dir DIR] [--cache DIR]\n"
	"                       [--runtime-dir DIR] [--call SERVER.TOOL=JSON]...\n"
	"                       [--server-uids FIRST-LAST]\n"
	"\n"
	"The operator's self-test of a signed policy on this machine, before an MCP\n"
	"client depends on it (docs/check.md). Part 1 checks the signature, trust,\n"
	"expiry and rollback floor as `run` does, without recording the serial; the\n"
	"image against its digest; runsc, its version and platform; the cgroups;\n"
	"then starts every server and checks each tool pattern and role against\n"
	"the tools they list. Part 2 proves that a warm sandbox (limits.pool) waits\n"
	"frozen and runs its cell once thawed, the kernel's freezer state read back,\n"
	"then runs real cells in fresh sandboxes under the policy's limits: what\n"
	"must work (arithmetic, printing, asyncio, and each --call, a tool called\n"
	"from a cell through the bridge with those arguments, as the stdio\n"
	"client's role) and what must be denied (the host's network, raw sockets,\n"
	"host files and environment, writes outside /tmp, exec from /tmp, more\n"
	"processes or memory than the limits, running past a 3 s deadline). Then\n"
	"each code tool's program runs once with the policy's example, making no\n"
	"write call (a write stops it), its value checked against output_schema;\n"
	"one without an example is only compiled. Prints one line per problem,\n"
	"naming the field, and a table with a row per cell. Exit 1 on any problem\n"
	"or surprise.\n"
	"\n"
	"options:\n"
	"  --policy POLICY.sig      the signed policy to check (required)\n"
	"  --trust-dir DIR          the trusted keys (default /etc/appliance/trusted.d)\n"
	"  --cache DIR              where the image is unpacked (see image verify)\n"
	"  --runtime-dir DIR        runsc's state directory (/run/appliance as root)\n"
	"  --call SERVER.TOOL=JSON  call a tool from a cell with these arguments\n"
	"  --server-uids FIRST-LAST the uids servers take one of their own from, as\n"
	"                           for run (default 81920-86015)\n"
	"  --help, -h               print this text\n"
	"\n"
	"exit status: 0 when nothing was wrong (warnings or not); 1 on any problem\n"
	"or surprise; 2 on a usage error.\n";

void check_help(void)
{
	fputs(check_usage_text, stdout);
}

static int usage(const char *msg)
{
	fprintf(stderr, "appliance check: %s\n%s", msg, check_usage_text);
	return 2;
}

/* ---- arguments ------------------------------------------------------------------ */

struct check_args {
	const char *policy, *trust_dir, *cache, *run_dir;
	struct check_call calls[CHECK_CALLS_MAX];
	size_t ncalls;
	bool help;
};

static void args_free(struct check_args *a)
{
	for (size_t i = 0; i < a->ncalls; i++) {
		free(a->calls[i].tool);
		json_decref(a->calls[i].args);
	}
	a->ncalls = 0;
}

/* SERVER.TOOL=JSON, the JSON an object. */
static int call_parse(const char *arg, struct check_call *c)
{
	const char *eq = strchr(arg, '='), *dot = strchr(arg, '.');
	struct appl_err err = {0};

	if (!eq || !dot || dot > eq || dot == arg || dot + 1 == eq ||
	    (size_t)(dot - arg) > APPL_POLICY_SERVER_NAME_MAX ||
	    (size_t)(eq - dot - 1) > APPL_UPSTREAM_TOOL_NAME_MAX)
		return usage("--call takes SERVER.TOOL=JSON");
	memcpy(c->server, arg, (size_t)(dot - arg));
	c->server[dot - arg] = '\0';
	c->args = appl_json_load(eq + 1, strlen(eq + 1), APPL_MAX_ARGS_BYTES_CEIL,
				 APPL_RUNNER_VALUE_DEPTH_MAX, "--call", &err);
	if (!c->args)
		fprintf(stderr, "appliance check: %s\n", err.msg);
	if (!c->args || !json_is_object(c->args)) {
		json_decref(c->args);
		c->args = NULL;
		return usage("--call: the arguments must be a JSON object");
	}
	if (!(c->tool = strndup(dot + 1, (size_t)(eq - dot - 1)))) {
		json_decref(c->args);
		c->args = NULL;
		return usage("out of memory");
	}
	return 0;
}

static int option_take(struct check_args *a, int opt)
{
	switch (opt) {
	case 'p':
		a->policy = optarg;
		return 0;
	case 'D':
		a->trust_dir = optarg;
		return 0;
	case 'c':
		a->cache = optarg;
		return 0;
	case 's':
		a->run_dir = optarg;
		return 0;
	case 'h':
		a->help = true;
		return 0;
	case 'u': {
		struct appl_err err = {0};

		if (proc_jail_uids_set(optarg, &err) < 0)
			return usage(err.msg);
		return 0;
	}
	case 'C':
		if (a->ncalls == CHECK_CALLS_MAX)
			return usage("at most 32 --call options");
		if (call_parse(optarg, &a->calls[a->ncalls]) != 0)
			return 2;
		a->ncalls++;
		return 0;
	default:
		/* As for run: keys only from a trust directory, no --trust. */
		return usage("unknown option (check takes keys only from --trust-dir)");
	}
}

static int args_parse(int argc, char **argv, struct check_args *a)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"trust-dir", required_argument, NULL, 'D'},
		{"cache", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 's'},
		{"call", required_argument, NULL, 'C'},
		{"server-uids", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt, rc;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return usage("options must be spelled out in full");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if ((rc = option_take(a, opt)) != 0)
			return rc;
	if (a->help)
		return 0;
	if (!a->policy || optind != argc)
		return usage("needs --policy POLICY.sig and nothing else");
	return 0;
}

/* ---- the command line's part of the check --------------------------------------- */

struct check_cli {
	const struct check_args *a;
	struct cli_policy cp;
	bool accepted;
	struct cli_hide hide;
};

static void on_print(void *data, const char *text)
{
	(void)data;
	fputs(text, stdout);
	fflush(stdout);
}

/* Accept exactly as run does, and never commit: check is not a use. */
static int on_accept(void *data, struct check_policy *out, struct appl_err *err)
{
	struct check_cli *k = data;
	struct cli_policy_opts o = {.sig = k->a->policy, .trust_dir = k->a->trust_dir};
	int rc;

	if ((rc = cli_policy_accept(&o, &k->cp, err)) < 0)
		return rc;
	k->accepted = true;
	cli_hide_paths(&k->hide, k->a->policy, k->a->trust_dir, k->cp.state_dir);
	*out = (struct check_policy){.policy = k->cp.policy,
				     .info = &k->cp.info,
				     .state_dir = k->cp.state_dir,
				     .hide = k->hide.v};
	return 0;
}

static int check_summary(const struct check_report *r, uint64_t t0)
{
	double s = (double)(loop_now_ms() - t0) / 1000.0;
	bool bad = r->problems || r->surprises;

	printf("\ncheck %s: %u problem%s, %u surprise%s, %u warning%s; took %.1f s\n",
	       bad ? "failed" : "passed", r->problems, r->problems == 1 ? "" : "s", r->surprises,
	       r->surprises == 1 ? "" : "s", r->warnings, r->warnings == 1 ? "" : "s", s);
	return bad ? 1 : 0;
}

static int check_main(const struct check_args *a)
{
	struct check_cli k = {.a = a};
	struct check_options o = {.policy = a->policy,
				  .trust_dir = a->trust_dir,
				  .cache = a->cache,
				  .run_dir = a->run_dir,
				  .calls = a->calls,
				  .ncalls = a->ncalls,
				  .hooks = {.data = &k,
					    .print = on_print,
					    .accept = on_accept,
					    .supported = cli_policy_supported,
					    .secrets_take = cli_secrets_take}};
	struct check_report r = {0};
	struct appl_err err = {0};
	uint64_t t0 = loop_now_ms();
	struct check *c;
	int rc;

	/* The report is the product: only warnings and errors of the parts
	 * go to stderr. */
	log_setup(STDERR_FILENO, LOG_WARN);
	if (check_new(&o, &c, &err) < 0)
		return cli_fail_cmd("check", &err);
	check_run(c, &r);
	rc = check_summary(&r, t0);
	check_free(c);
	if (k.accepted)
		cli_policy_done(&k.cp);
	return rc;
}

int cmd_check(int argc, char **argv)
{
	struct check_args a;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = args_parse(argc, argv, &a)) != 0 || a.help) {
		if (a.help && rc == 0)
			check_help();
		args_free(&a);
		return rc;
	}
	rc = check_main(&a);
	args_free(&a);
	return rc;
}
