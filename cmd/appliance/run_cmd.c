/* run_cmd.c: `appliance run` (see run_cmd.h). */
#include "run_cmd.h"
#include "cli.h"
#include "proc/confine.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/proto.h"
#include "bridge/bridge.h"
#include "engine/engine.h"
#include "gateway/gateway.h"
#include "mcp/stdio.h"
#include "mcp/tool.h"
#include "policy/trust.h"
#include "stubs/stubs.h"
#include "upstream/upstream.h"

struct run_args {
	const char *policy, *trust_dir, *state_dir, *cache, *run_dir, *role;
	const char *name, *admin_dir; /* the admin socket's */
	const char *cluster_key;      /* a replica's: the key replicas share */
	const char *listen[APPL_POLICY_HTTP_LISTEN_MAX + 1];
	size_t nlisten;
	bool stubs; /* `appliance stubs`: --role instead of --cache/--runtime-dir */
	bool help;  /* --help: print the help text, do nothing else */
};

static bool stubs_mode;

static const char run_help_text[] =
	"usage: appliance run --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR]\n"
	"                     [--cache DIR] [--runtime-dir DIR]\n"
	"                     [--server-uids FIRST-LAST] [--name NAME] [--admin-dir DIR]\n"
	"                     [--cluster-key FILE] [--listen ADDR]...\n"
	"\n"
	"Serve the MCP tool run_python, as the verified policy allows: over\n"
	"newline-delimited JSON-RPC on stdin and stdout, or, when the policy has an\n"
	"http section, over Streamable HTTP to the clients of clients.tokens until\n"
	"SIGTERM. Each call runs its Python code in a fresh gVisor sandbox with the\n"
	"policy's image, runtime and limits; the policy's servers are started and\n"
	"their tools are functions of the code, every call checked by the bridge.\n"
	"Keys come only from the trust directory (there is no --trust), and the\n"
	"policy's serial is recorded once everything has started.\n"
	"Each run process serves an admin socket, DIR/NAME.PID.sock (mode 0600),\n"
	"for appliance status and appliance reload; only root (or, rootless, the\n"
	"appliance's own user) is served there.\n"
	"\n"
	"options:\n"
	"  --policy POLICY.sig  the signed policy to serve (required)\n"
	"  --trust-dir DIR      the trusted keys (default /etc/appliance/trusted.d)\n"
	"  --state-dir DIR      an ordinary user's rollback state (refused as root)\n"
	"  --cache DIR          where the image is unpacked (default as for image verify)\n"
	"  --runtime-dir DIR    runsc's state directory (default /run/appliance as root)\n"
	"  --server-uids FIRST-LAST\n"
	"                       the uids servers take one of their own from (default\n"
	"                       81920-86015; docs/upstream.md, Confinement)\n"
	"  --name NAME          the admin socket's NAME (default: the policy's\n"
	"                       deployment, else appliance): [A-Za-z0-9_-], at most\n"
	"                       64, starting with a letter or digit\n"
	"  --admin-dir DIR      where the admin socket goes (default /run/appliance as\n"
	"                       root, $XDG_RUNTIME_DIR/appliance as another user)\n"
	"  --cluster-key FILE   a replica's: the key every replica of the deployment\n"
	"                       holds (appliance cluster-key FILE makes one); needed\n"
	"                       with the policy's cluster section (docs/scale-out.md)\n"
	"  --listen ADDR        in place of the policy's http.listen, for this process\n"
	"                       (replicas on one host); may repeat; the policy must\n"
	"                       name http.allowed_hosts\n"
	"  --help, -h           print this text\n"
	"\n"
	"exit status: 0 after a clean end (the end of input, or a stop signal); 1\n"
	"when it could not start (one line on stderr saying why); 2 on a usage\n"
	"error.\n";

static const char stubs_help_text[] =
	"usage: appliance stubs --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR]\n"
	"                       [--role NAME] [--server-uids FIRST-LAST]\n"
	"\n"
	"Start the policy's servers, confined as run confines them, and print\n"
	"run_python's description and the stub of every tool as the role sees\n"
	"them, stand-ins included, then each tool not offered and why (not\n"
	"allowed, a write for a read-only role, a schema the validator cannot\n"
	"check, a tool that needs MCP tasks); then the code tools the role may\n"
	"call, each as tools/list shows it, with its access, program digest and\n"
	"uses. The policy is held to the rollback floor and never moves it.\n"
	"\n"
	"options:\n"
	"  --policy POLICY.sig  the signed policy (required)\n"
	"  --trust-dir DIR      the trusted keys (default /etc/appliance/trusted.d)\n"
	"  --state-dir DIR      an ordinary user's rollback state (refused as root)\n"
	"  --role NAME          whose view to print (default: clients.default_role)\n"
	"  --server-uids FIRST-LAST\n"
	"                       the uids servers take one of their own from, as for run\n"
	"  --help, -h           print this text\n"
	"\n"
	"exit status: 0 when the stubs were printed; 1 when the policy was refused\n"
	"or they could not be made, say for a role the policy does not have (one\n"
	"line on stderr saying why); 2 on a usage error.\n";

void run_help(void)
{
	fputs(run_help_text, stdout);
}

void stubs_help(void)
{
	fputs(stubs_help_text, stdout);
}

static int usage(const char *msg)
{
	if (stubs_mode)
		fprintf(stderr,
			"appliance stubs: %s\n"
			"usage: appliance stubs --policy POLICY.sig [--trust-dir DIR] "
			"[--state-dir DIR] [--role NAME] [--server-uids FIRST-LAST]\n",
			msg);
	else
		fprintf(stderr,
			"appliance run: %s\n"
			"usage: appliance run --policy POLICY.sig [--trust-dir DIR] [--state-dir "
			"DIR]\n"
			"                     [--cache DIR] [--runtime-dir DIR]\n"
			"                     [--server-uids FIRST-LAST] [--name NAME] "
			"[--admin-dir "
			"DIR]\n"
			"                     [--cluster-key FILE] [--listen ADDR]...\n",
			msg);
	return 2;
}

/* One option of run's (or stubs'): 0, or usage()'s exit status. */
static int arg_take(struct run_args *a, int c)
{
	struct appl_err uerr = {0};

	switch (c) {
	case 'p':
		a->policy = optarg;
		break;
	case 'D':
		a->trust_dir = optarg;
		break;
	case 'S':
		a->state_dir = optarg;
		break;
	case 'c':
		a->cache = optarg;
		break;
	case 's':
		a->run_dir = optarg;
		break;
	case 'r':
		a->role = optarg;
		break;
	case 'n':
		if (!admin_name_valid(optarg, strlen(optarg)))
			return usage("--name: a NAME is [A-Za-z0-9_-], at most 64 characters, "
				     "starting with a letter or digit");
		a->name = optarg;
		break;
	case 'A':
		a->admin_dir = optarg;
		break;
	case 'K':
		a->cluster_key = optarg;
		break;
	case 'L':
		if (a->nlisten >= APPL_POLICY_HTTP_LISTEN_MAX)
			return usage("--listen: at most 8 addresses");
		a->listen[a->nlisten++] = optarg;
		break;
	case 'u':
		if (proc_jail_uids_set(optarg, &uerr) < 0)
			return usage(uerr.msg);
		break;
	default:
		/* No --trust here: keys come only from a root-owned trust
		 * directory, so an agent that can edit its own MCP client
		 * configuration cannot point run at a key of its own. */
		return usage("unknown option (run takes keys only from --trust-dir)");
	}
	return 0;
}

static int args_parse(int argc, char **argv, struct run_args *a)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"trust-dir", required_argument, NULL, 'D'},
		{"state-dir", required_argument, NULL, 'S'},
		{"cache", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 's'},
		{"server-uids", required_argument, NULL, 'u'},
		{"name", required_argument, NULL, 'n'},
		{"admin-dir", required_argument, NULL, 'A'},
		{"cluster-key", required_argument, NULL, 'K'},
		{"listen", required_argument, NULL, 'L'},
		{NULL, 0, NULL, 0},
	};
	static const struct option stubs_opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"trust-dir", required_argument, NULL, 'D'},
		{"state-dir", required_argument, NULL, 'S'},
		{"role", required_argument, NULL, 'r'},
		{"server-uids", required_argument, NULL, 'u'},
		{NULL, 0, NULL, 0},
	};
	const struct option *o = a->stubs ? stubs_opts : opts;
	int c, rc;

	if (cli_help_wanted(argc, argv, o)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, o))
		return usage("options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", o, NULL)) != -1)
		if ((rc = arg_take(a, c)) != 0)
			return rc;
	if (!a->policy || optind != argc)
		return usage("needs --policy POLICY.sig and nothing else");
	return 0;
}

/* What `run` was started with, to read the policy again on a reload. */
struct run_state {
	struct cli_policy cp; /* the policy it started with */
	struct cli_policy_opts o;
};

static int on_started(void *data, struct appl_err *err)
{
	return cli_policy_commit(&((struct run_state *)data)->cp, err);
}

/* A reload: the file read again and held to what the start held it to,
 * the floor not yet moved. */
static int reload_load(void *data, void **handle, const struct policy **policy,
		       const struct policy_verified **verified, struct appl_err *err)
{
	struct run_state *st = data;
	struct cli_policy *cp = calloc(1, sizeof(*cp));

	if (!cp)
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (cli_policy_accept(&st->o, cp, err) < 0) {
		cli_policy_done(cp);
		free(cp);
		return err->code;
	}
	*handle = cp;
	*policy = cp->policy;
	*verified = &cp->info;
	return 0;
}

static int reload_commit(void *data, void *handle, struct appl_err *err)
{
	(void)data;
	return cli_policy_commit(handle, err);
}

static void reload_release(void *data, void *handle)
{
	(void)data;
	cli_policy_done(handle);
	free(handle);
}

/* A start refused before serving: the stdio client's first request gets
 * the reason as its error (else all it could show is a closed
 * connection), then the reason goes to stderr. Not for an appliance that
 * serves HTTP: its standard input is no client. */
static int start_fail(const struct appl_err *err, bool http)
{
	char why[sizeof(err->msg) + 64];

	if (!http) {
		snprintf(why, sizeof(why), "the appliance could not start: %s", err->msg);
		mcp_stdio_refuse_first(STDIN_FILENO, STDOUT_FILENO, why, APPL_START_REFUSE_WAIT_MS);
	}
	return cli_fail(err);
}

int cmd_run(int argc, char **argv)
{
	struct run_args a;
	struct run_state st;
	struct appl_err err = {0};
	struct gateway_config cfg;
	struct cli_hide hide;
	struct upstream_secrets *secrets = NULL;
	char admin_dir[PATH_MAX];
	bool http;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = args_parse(argc, argv, &a)) != 0)
		return rc;
	if (a.help)
		return cli_help_print(run_help_text);
	memset(&st, 0, sizeof(st));
	st.o = (struct cli_policy_opts){.sig = a.policy,
					.trust_dir = a.trust_dir,
					.state_dir = a.state_dir,
					.check = cli_policy_startable};
	if (cli_policy_accept(&st.o, &st.cp, &err) < 0)
		return start_fail(&err, false);
	http = policy_http(st.cp.policy) != NULL;
	/* Before anything starts: an ordinary user without a runtime
	 * directory is told so at once. */
	if ((!a.admin_dir && admin_dir_default(admin_dir, sizeof(admin_dir), &err) < 0) ||
	    cli_secrets_take(st.cp.policy, &secrets, &err) < 0) {
		cli_policy_done(&st.cp);
		return start_fail(&err, http);
	}
	fprintf(stderr,
		"appliance: serving run_python on stdio: policy %s serial %llu, deployment %s, "
		"key %s\n",
		a.policy, (unsigned long long)st.cp.info.serial, st.cp.info.deployment,
		st.cp.info.keyid_hex);
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = st.cp.policy;
	cfg.cache = a.cache;
	cfg.run_dir = a.run_dir;
	cfg.verified = &st.cp.info;
	cfg.state_dir = st.cp.state_dir;
	cfg.secrets = secrets;
	/* Hidden from the servers: the policy, the keys it is checked with,
	 * the floor and state. */
	cli_hide_paths(&hide, a.policy, a.trust_dir, st.cp.state_dir);
	cfg.hide = hide.v;
	cfg.in_fd = STDIN_FILENO;
	cfg.out_fd = STDOUT_FILENO;
	/* The serial is recorded only once the image, the runtime and the
	 * servers have passed: a policy that cannot start must not lock out
	 * the one that can. */
	cfg.on_started = on_started;
	/* SIGHUP and `appliance reload` read the file again. */
	cfg.load = reload_load;
	cfg.commit = reload_commit;
	cfg.release = reload_release;
	cfg.policy_path = a.policy;
	cfg.admin_dir = a.admin_dir ? a.admin_dir : admin_dir;
	cfg.admin_name = a.name;
	cfg.cluster_key = a.cluster_key;
	cfg.listen = a.listen;
	cfg.nlisten = a.nlisten;
	cfg.data = &st;
	rc = gateway_run(&cfg, &err);
	upstream_secrets_free(secrets);
	cli_policy_done(&st.cp);
	return rc < 0 ? cli_fail(&err) : 0;
}

/* What role sees, as out shows it: run_python's description, every stub,
 * and each tool not offered with why. */
/* The code tools role may call, each as tools/list shows it (the newest
 * revision), its access, program digest and uses. */
static void code_tools_write(FILE *out, const struct engine *e, const char *role)
{
	const struct policy_code_tool *t[APPL_CODE_TOOLS_MAX];
	size_t n = engine_role_code_tools(e, role, t, APPL_CODE_TOOLS_MAX);

	fprintf(out, "\n# %zu code tool%s:\n", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		json_t *o = mcp_code_tool_object(mcp_revision_latest(MCP_ERA_MODERN), t[i]->name,
						 t[i]->description, t[i]->input_schema,
						 t[i]->output_schema,
						 t[i]->access == POLICY_ACCESS_READ);
		char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

		fprintf(out, "\n# %s (%s, program sha256:%s%s%s)\n# uses:", t[i]->name,
			t[i]->access == POLICY_ACCESS_READ ? "read" : "write", t[i]->sha256,
			t[i]->file ? ", " : "", t[i]->file ? t[i]->file : "");
		for (size_t k = 0; k < t[i]->nuses; k++)
			fprintf(out, " %s", t[i]->uses[k]);
		fprintf(out, "%s\n%s\n", t[i]->nuses ? "" : " (none)",
			text ? text : "(out of memory)");
		free(text);
		json_decref(o);
	}
}

static int stubs_write(FILE *out, const char *role, const char *desc,
		       const struct bridge_catalog *cat, struct appl_err *err)
{
	const struct stubs *st = bridge_catalog_stubs(cat);
	struct bridge_tool_info info;

	fprintf(out, "# role: %s\n# run_python's description:\n\n%s\n", role ? role : "(none)",
		desc);
	fprintf(out, "\n# %zu tool stubs:\n", stubs_count(st));
	for (size_t i = 0; i < stubs_count(st); i++)
		fprintf(out, "\n# %s\n%s", stubs_mcp_name(st, i), stubs_text(st, i));
	for (size_t i = 0; bridge_catalog_info(cat, i, &info) == 0; i++)
		if (info.why_not)
			fprintf(out, "\n# not offered: %s.%s: %s", info.server, info.name,
				info.why_not);
	fputs("\n", out);
	return fflush(out) == 0 ? 0 : appl_err_errno(err, -EIO, errno, "writing the stubs");
}

/* Start the policy's servers (nothing else) and write role's view. */
static int stubs_print(const struct policy *p, const char *role, struct upstream_secrets *secrets,
		       struct appl_err *err)
{
	struct engine_config ec = {.parts = ENGINE_SERVERS, .policy = p, .secrets = secrets};
	struct bridge_catalog *cat = NULL;
	const char *desc = NULL;
	struct engine *e;
	int rc;

	role = role ? role : policy_client_default_role(p);
	if (role && !policy_role_find(p, role))
		return appl_err_set(err, -EINVAL, "the policy has no role \"%s\"", role);
	if (!(e = engine_open(&ec, err)))
		return err->code;
	rc = engine_start(e, err);
	if (rc == 0 && engine_role_inline(e, role) &&
	    !(desc = engine_role_view(e, role, &cat, err)))
		rc = err->code;
	if (rc == 0 && desc)
		rc = stubs_write(stdout, role, desc, cat, err);
	else if (rc == 0)
		printf("# role: %s\n# run_python: not shown to this role (\"inline\": false)\n",
		       role);
	if (rc == 0) {
		code_tools_write(stdout, e, role);
		if (fflush(stdout) != 0)
			rc = appl_err_errno(err, -EIO, errno, "writing the stubs");
	}
	engine_close(e);
	return rc;
}

/* stubs only reads the policy: it is held to the floor and never moves it. */
int cmd_stubs(int argc, char **argv)
{
	struct run_args a;
	struct cli_policy cp;
	struct appl_err err = {0};
	struct upstream_secrets *secrets = NULL;
	int rc;

	memset(&a, 0, sizeof(a));
	a.stubs = stubs_mode = true;
	if ((rc = args_parse(argc, argv, &a)) != 0)
		return rc;
	if (a.help)
		return cli_help_print(stubs_help_text);
	struct cli_policy_opts o = {.sig = a.policy,
				    .trust_dir = a.trust_dir,
				    .state_dir = a.state_dir,
				    .check = cli_policy_supported};
	if (cli_policy_accept(&o, &cp, &err) < 0)
		return cli_fail(&err);
	rc = cli_secrets_take(cp.policy, &secrets, &err);
	if (rc == 0)
		rc = stubs_print(cp.policy, a.role, secrets, &err);
	upstream_secrets_free(secrets);
	cli_policy_done(&cp);
	return rc < 0 ? cli_fail(&err) : 0;
}
