/* init_cmd.c: `appliance init` (see init_cmd.h): argument parsing, the
 * report, and the wiring of pkg/image (the image's digest), pkg/engine
 * (the servers started as run starts them), pkg/bridge (which tools a cell
 * could be offered) and pkg/policy/draft.h (the document). */
#include "init_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/stat.h>

#include "base/err.h"
#include "bridge/bridge.h"
#include "cli.h"
#include "engine/confine.h"
#include "engine/engine.h"
#include "image/image.h"
#include "log/log.h"
#include "policy/draft.h"
#include "policy/state.h"
#include "proc/confine.h"
#include "upstream/upstream.h"

#define INIT_EXPIRES_S (30 * 86400) /* a starting policy is good for 30 days */

static const char init_help_text[] =
	"usage: appliance init --server NAME=PROGRAM[,ARG]... [--server ...]\n"
	"                      [--image DIR] [--output FILE] [--deployment NAME]\n"
	"                      [--server-uids FIRST-LAST]\n"
	"\n"
	"Write a starting policy for the servers named. Each is started once,\n"
	"confined as run confines it, and its tools listed; the policy names each\n"
	"server's command, every tool it listed by its own name (a read when the\n"
	"server marks it readOnlyHint: true, else a write), a role \"reader\" that\n"
	"may call the reads, a role \"writer\" that may call every tool, and\n"
	"\"reader\" as the stdio client's role; its serial is the time now in\n"
	"seconds since 1970, and it expires in 30 days. It is not signed: read\n"
	"it, change what it should say otherwise, then sign it (appliance sign).\n"
	"A server that does not start or list its tools, and a tool a cell could\n"
	"not be offered, are left out, each said on stderr with the reason.\n"
	"\n"
	"options:\n"
	"  --server NAME=PROGRAM[,ARG]...\n"
	"                   a server: its name in the policy, then its command, the\n"
	"                   program's absolute path and its arguments, split at\n"
	"                   commas; \\, is a comma inside an argument, \\\\ a\n"
	"                   backslash. Once per server\n"
	"  --image DIR      the cell image (an OCI layout), its digest read from its\n"
	"                   index.json and checked (default: the installed image,\n"
	"                   ../share/appliance/image beside this binary, and the\n"
	"                   digest in its image.digest)\n"
	"  --output FILE    write the policy to FILE, which must not exist (default:\n"
	"                   standard output)\n"
	"  --deployment NAME\n"
	"                   the policy's deployment (default: default)\n"
	"  --server-uids FIRST-LAST\n"
	"                   the uids servers take one of their own from, as for run\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when the policy was written; 1 when it was not, say when\n"
	"no server started (one line on stderr saying why); 2 on a usage error.\n";

void init_help(void)
{
	fputs(init_help_text, stdout);
}

struct init_server {
	char *name;
	char **argv; /* argc strings, then NULL */
	size_t argc;
};

struct init_args {
	struct init_server servers[APPL_POLICY_SERVERS_MAX];
	size_t nservers;
	const char *image, *output, *deployment;
	bool help;
};

/* One tool a server listed, kept after its server stops. */
struct init_tool {
	char *server, *name, *description;
	json_t *input_schema, *output_schema;
	bool read_only_hint;
	bool out; /* left out: a cell could not be offered it */
};

struct init {
	struct init_args *a;
	struct policy_draft *draft;
	struct init_tool *tools;
	size_t ntools, cap, started;
	int rc; /* -ENOMEM when a tool could not be kept */
};

static void args_free(struct init_args *a)
{
	for (size_t i = 0; i < a->nservers; i++) {
		for (size_t k = 0; k < a->servers[i].argc; k++)
			free(a->servers[i].argv[k]);
		free(a->servers[i].argv);
		free(a->servers[i].name);
	}
}

/* One argument of spec from *p to the next unescaped comma or the end,
 * into a new string; *p is left on the comma or the end. NULL with why. */
static char *arg_take(const char **p, const char **why)
{
	const char *s = *p;
	char *out = malloc(strlen(s) + 1);
	size_t n = 0;

	if (!out) {
		*why = "out of memory";
		return NULL;
	}
	for (; *s && *s != ','; s++) {
		if (*s == '\\' && (s[1] == ',' || s[1] == '\\'))
			s++;
		else if (*s == '\\') {
			*why = "a backslash escapes only a comma (\\,) or a backslash (\\\\)";
			free(out);
			return NULL;
		}
		out[n++] = *s;
	}
	out[n] = '\0';
	if (n == 0) {
		*why = "an empty argument (two commas in a row, or one at either end)";
		free(out);
		return NULL;
	}
	*p = s;
	return out;
}

/* NAME=PROGRAM[,ARG]...: the name is whatever comes before the first '=';
 * the policy parser judges it and the command. */
static int server_parse(const char *spec, struct init_server *srv, struct appl_err *err)
{
	const char *eq = strchr(spec, '='), *p, *why = NULL;

	if (!eq || eq == spec)
		return appl_err_set(err, -EINVAL, "--server %.64s: must be NAME=PROGRAM[,ARG]...",
				    spec);
	if (!(srv->name = strndup(spec, (size_t)(eq - spec))) ||
	    !(srv->argv = calloc(APPL_POLICY_ARGV_MAX + 1, sizeof(*srv->argv))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	p = eq + 1;
	do {
		if (srv->argc == APPL_POLICY_ARGV_MAX)
			return appl_err_set(err, -EINVAL, "--server %s: more than %d arguments",
					    srv->name, APPL_POLICY_ARGV_MAX);
		if (!(srv->argv[srv->argc] = arg_take(&p, &why)))
			return appl_err_set(err, -EINVAL, "--server %s: %s", srv->name, why);
		srv->argc++;
	} while (*p++ == ',');
	return 0;
}

static int server_add(struct init_args *a, const char *spec, struct appl_err *err)
{
	if (a->nservers == APPL_POLICY_SERVERS_MAX)
		return appl_err_set(err, -EINVAL, "at most %d servers", APPL_POLICY_SERVERS_MAX);
	if (server_parse(spec, &a->servers[a->nservers++], err) < 0)
		return err->code;
	for (size_t i = 0; i + 1 < a->nservers; i++)
		if (strcmp(a->servers[i].name, a->servers[a->nservers - 1].name) == 0)
			return appl_err_set(err, -EINVAL, "--server %s: named twice",
					    a->servers[i].name);
	return 0;
}

static int args_parse(int argc, char **argv, struct init_args *a)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"image", required_argument, NULL, 'i'},
		{"output", required_argument, NULL, 'o'},
		{"deployment", required_argument, NULL, 'd'},
		{"server-uids", required_argument, NULL, 'u'},
		{NULL, 0, NULL, 0},
	};
	struct appl_err err = {0};
	int c;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("init", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((c == 's' && server_add(a, optarg, &err) < 0) ||
		    (c == 'u' && proc_jail_uids_set(optarg, &err) < 0))
			return cli_usage_cmd("init", err.msg);
		if (c == 'i')
			a->image = optarg;
		else if (c == 'o')
			a->output = optarg;
		else if (c == 'd')
			a->deployment = optarg;
		else if (c != 's' && c != 'u')
			return cli_usage_cmd("init", "unknown option");
	}
	if (a->nservers == 0 || optind != argc)
		return cli_usage_cmd("init", "needs --server NAME=PROGRAM[,ARG]... and no other "
					     "arguments");
	if (!a->deployment)
		a->deployment = POLICY_DEPLOYMENT_DEFAULT;
	return 0;
}

/* "appliance: init: MESSAGE" on stderr; exit status 1. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("appliance: init: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* The image's canonical layout path and its manifest digest; the exit
 * status. */
static int image_resolve(const char *arg, char *layout, char digest[IMAGE_DIGEST_STR])
{
	struct appl_err err = {0};

	if (!arg) {
		if (image_installed_find(layout, digest, &err) < 0)
			return fail("%s; name an image layout with --image", err.msg);
		return 0;
	}
	if (!realpath(arg, layout))
		return fail("--image %s: %s", arg, strerror(errno));
	if (image_layout_digest(layout, digest, &err) < 0)
		return cli_fail_cmd("init", &err);
	return 0;
}

/* A server's name or a tool's, as the server wrote it, fit for one line. */
static const char *shown(const char *s, char *out, size_t cap)
{
	log_escape(s, strlen(s), out, cap, NULL);
	return out;
}

static void left_out(const char *what, const char *server, const char *tool, const char *why)
{
	char name[2 * APPL_UPSTREAM_TOOL_NAME_MAX];

	fprintf(stderr, "appliance: init: left out %s %s%s%s: %s\n", what, server, tool ? "." : "",
		tool ? shown(tool, name, sizeof(name)) : "", why);
}

static int tool_keep(struct init *in, const char *server, const struct upstream_tool *t)
{
	struct init_tool *k;

	if (in->ntools == in->cap) {
		size_t cap = in->cap ? 2 * in->cap : 64;
		struct init_tool *v = realloc(in->tools, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		in->tools = v;
		in->cap = cap;
	}
	k = &in->tools[in->ntools];
	memset(k, 0, sizeof(*k));
	k->server = strdup(server);
	k->name = strdup(t->name);
	k->description = t->description ? strdup(t->description) : NULL;
	k->input_schema = json_incref((json_t *)t->input_schema);
	k->output_schema = json_incref((json_t *)t->output_schema);
	k->read_only_hint = t->read_only_hint;
	in->ntools++;
	if (!k->server || !k->name || (t->description && !k->description))
		return -ENOMEM;
	return 0;
}

/* The tools entries, server by server in the order of the command line,
 * each server's tools in the order it listed them. */
static int tools_add(struct init *in)
{
	for (size_t i = 0; i < in->a->nservers; i++)
		for (size_t k = 0; k < in->ntools; k++) {
			const struct init_tool *t = &in->tools[k];

			if (strcmp(t->server, in->a->servers[i].name) == 0 &&
			    policy_draft_tool_add(in->draft, t->server, t->name,
						  t->read_only_hint ? POLICY_ACCESS_READ
								    : POLICY_ACCESS_WRITE) < 0)
				return -ENOMEM;
		}
	return 0;
}

static void on_found(void *data, const char *name, const struct upstream *u, const char *why)
{
	struct init *in = data;

	if (!u) {
		left_out("server", name, NULL, why);
		policy_draft_server_remove(in->draft, name);
		return;
	}
	in->started++;
	for (size_t i = 0; i < upstream_tool_count(u) && in->rc == 0; i++) {
		const struct upstream_tool *t = upstream_tool_get(u, i);

		if (!policy_tool_name_valid(t->name))
			left_out("tool", name, t->name,
				 "a policy cannot name it (1 to 128 of A-Z a-z 0-9 _ - . /)");
		else
			in->rc = tool_keep(in, name, t);
	}
}

static void tool_out(struct init *in, const char *server, const char *name)
{
	for (size_t i = 0; i < in->ntools; i++)
		if (strcmp(in->tools[i].server, server) == 0 &&
		    strcmp(in->tools[i].name, name) == 0)
			in->tools[i].out = true;
}

/* Leave out what a cell could not be offered even by the writing role, so
 * that every entry of the policy names a tool that can be called: a schema
 * the validator cannot check, a name that
 * cannot become Python. */
static int tools_judge(struct init *in, struct appl_err *err)
{
	struct bridge_tool_in *v = calloc(in->ntools ? in->ntools : 1, sizeof(*v));
	struct bridge_catalog *cat = NULL;
	struct bridge_tool_info info;
	struct policy *p = NULL;
	size_t len;
	char *text;
	int rc;

	if (!v)
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < in->ntools; i++) {
		const struct init_tool *t = &in->tools[i];

		v[i] = (struct bridge_tool_in){t->server,	  t->name,
					       t->description,	  t->input_schema,
					       t->read_only_hint, t->output_schema};
	}
	text = policy_draft_text(in->draft, &len, &p, err);
	free(text);
	rc = text ? bridge_catalog_new(p, POLICY_DRAFT_WRITER, v, in->ntools, &cat, err)
		  : err->code;
	for (size_t i = 0; rc == 0 && bridge_catalog_info(cat, i, &info) == 0; i++)
		if (info.why_not) {
			left_out("tool", info.server, info.name, info.why_not);
			policy_draft_tool_remove(in->draft, info.server, info.name);
			tool_out(in, info.server, info.name);
		}
	bridge_catalog_unref(cat);
	policy_free(p);
	free(v);
	return rc;
}

static void init_free(struct init *in)
{
	for (size_t i = 0; i < in->ntools; i++) {
		free(in->tools[i].server);
		free(in->tools[i].name);
		free(in->tools[i].description);
		json_decref(in->tools[i].input_schema);
		json_decref(in->tools[i].output_schema);
	}
	free(in->tools);
	policy_draft_free(in->draft);
}

/* The draft with every server named, parsed once: the names and commands
 * are the command line's, so a refusal is a usage error (2). */
static int draft_start(struct init *in, const char *layout, const char *digest, struct policy **p)
{
	int64_t now = (int64_t)time(NULL);
	struct policy_draft_head h = {.serial = (uint64_t)now,
				      .expires = now + INIT_EXPIRES_S,
				      .deployment = in->a->deployment,
				      .layout = layout,
				      .digest = digest};
	struct appl_err err = {0};
	size_t len;
	char *text;

	if (!(in->draft = policy_draft_new(&h)))
		return fail("out of memory");
	for (size_t i = 0; i < in->a->nservers; i++) {
		const struct init_server *s = &in->a->servers[i];

		if (policy_draft_server_add(in->draft, s->name, (const char *const *)s->argv,
					    s->argc) < 0)
			return fail("out of memory");
	}
	if (!(text = policy_draft_text(in->draft, &len, p, &err)))
		return err.code == -ENOMEM ? cli_fail_cmd("init", &err)
					   : cli_usage_cmd("init", err.msg);
	free(text);
	return 0;
}

static int output_exists(const char *path)
{
	return fail("%s exists, and init never replaces a file: name another with --output, or "
		    "move it away",
		    path);
}

static int policy_write(const struct init *in, const char *text, size_t len)
{
	struct appl_err err = {0};
	size_t reads = 0, n = 0;

	if (!in->a->output) {
		if (fwrite(text, 1, len, stdout) != len || fflush(stdout) == EOF)
			return fail("writing the policy to standard output: %s", strerror(errno));
	} else if (policy_file_create(in->a->output, text, len, 0644, &err) < 0) {
		if (err.code == -EEXIST)
			return output_exists(in->a->output);
		return cli_fail_cmd("init", &err);
	}
	for (size_t i = 0; i < in->ntools; i++)
		if (!in->tools[i].out) {
			n++;
			reads += in->tools[i].read_only_hint;
		}
	fprintf(stderr,
		"appliance: init: wrote a policy of %zu servers and %zu tools (%zu reads, %zu "
		"writes) to %s; read it, then sign it with appliance sign\n",
		in->started, n, reads, n - reads,
		in->a->output ? in->a->output : "standard output");
	return 0;
}

int cmd_init(int argc, char **argv)
{
	struct init_args a;
	struct init in = {.a = &a};
	struct appl_err err = {0};
	struct policy *p = NULL;
	struct stat st;
	char layout[PATH_MAX], digest[IMAGE_DIGEST_STR], *text = NULL;
	size_t len;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = args_parse(argc, argv, &a)) != 0 || a.help) {
		args_free(&a);
		return rc == 0 ? cli_help_print(init_help_text) : rc;
	}
	/* The report is the product: the servers' own lines stay out of it. */
	log_setup(STDERR_FILENO, LOG_ERR);
	/* Said before the servers start; the link at the end refuses one
	 * made meanwhile. */
	if (a.output && lstat(a.output, &st) == 0) {
		rc = output_exists(a.output);
		goto out;
	}
	if ((rc = image_resolve(a.image, layout, digest)) != 0 ||
	    (rc = draft_start(&in, layout, digest, &p)) != 0)
		goto out;
	if (engine_servers_try(p, NULL, on_found, &in, &err) < 0) {
		rc = cli_fail_cmd("init", &err);
		goto out;
	}
	if (in.rc < 0 || tools_add(&in) < 0) {
		rc = fail("out of memory");
		goto out;
	}
	if (in.started == 0) {
		rc = fail("no server started, so no policy was written; correct what is said "
			  "above and try again");
		goto out;
	}
	if (tools_judge(&in, &err) < 0 || !(text = policy_draft_text(in.draft, &len, NULL, &err)))
		rc = cli_fail_cmd("init", &err);
	else
		rc = policy_write(&in, text, len);
out:
	free(text);
	policy_free(p);
	init_free(&in);
	args_free(&a);
	return rc;
}
