/* status_cmd.c: `appliance status` and `appliance reload` (see
 * status_cmd.h). */
#include "status_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/client.h"
#include "cli.h"
#include "log/log.h"

#define TEXT_MAX 512 /* one value as printed, escaped */

struct status_args {
	const char *name, *dir;
	pid_t pid;
	bool json;
	bool help;
};

static const char status_help_text[] =
	"usage: appliance status [--name NAME] [--pid PID] [--json] [--admin-dir DIR]\n"
	"\n"
	"Show every appliance running on this machine (each appliance run process\n"
	"serves an admin socket, DIR/NAME.PID.sock), or those with that NAME or\n"
	"PID: the policy it serves (path, serial, deployment, key, expiry, when it\n"
	"was loaded), its uptime, each server (state, MCP revision, tools,\n"
	"restarts, last error), its cells (in flight, waiting, by client), its\n"
	"warm pool, its HTTP sessions per token name and its audit log. A socket\n"
	"nobody answers (an appliance that died) is skipped, said on stderr. Only\n"
	"root, or a rootless appliance's own user, is answered.\n"
	"\n"
	"options:\n"
	"  --name NAME      only the appliances run with that NAME (run --name;\n"
	"                   by default a policy's deployment)\n"
	"  --pid PID        only the appliance with that process id\n"
	"  --json           one JSON array on stdout, an object per appliance with\n"
	"                   name, pid, policy, uptime_s, servers, cells, pool,\n"
	"                   http and audit (docs/operating.md)\n"
	"  --admin-dir DIR  where the sockets are (default /run/appliance as root,\n"
	"                   $XDG_RUNTIME_DIR/appliance as another user)\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when the status of each appliance that answered was\n"
	"printed; 1 when none matches, none answered, or one refused (a user who\n"
	"is not root: one line on stderr saying why); 2 on a usage error.\n";

static const char reload_help_text[] =
	"usage: appliance reload [--name NAME] [--pid PID] [--admin-dir DIR]\n"
	"\n"
	"Ask every appliance running on this machine (or those with that NAME or\n"
	"PID) to read its policy again, through its admin socket, and print each\n"
	"outcome, one line each: NAME[PID]: reloaded, or NAME[PID]: not reloaded:\n"
	"why. Each reload is written to the appliance's audit log. Only root, or\n"
	"a rootless appliance's own user, is answered.\n"
	"\n"
	"options:\n"
	"  --name NAME      only the appliances run with that NAME\n"
	"  --pid PID        only the appliance with that process id\n"
	"  --admin-dir DIR  where the sockets are (default as for status)\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when every appliance asked reloaded; 1 when one did not,\n"
	"none matches, or a socket refused (one line on stderr saying why); 2 on\n"
	"a usage error.\n";

void status_help(void)
{
	fputs(status_help_text, stdout);
}

void reload_help(void)
{
	fputs(reload_help_text, stdout);
}

/* 1 to INT32_MAX in decimal, nothing else. */
static int pid_arg(const char *s, pid_t *pid)
{
	char *end;
	long long v;

	if (s[0] < '1' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v > INT32_MAX)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

static int args_parse(int argc, char **argv, const char *cmd, struct status_args *a)
{
	static const struct option status_opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"pid", required_argument, NULL, 'p'},
		{"json", no_argument, NULL, 'j'},
		{"admin-dir", required_argument, NULL, 'A'},
		{NULL, 0, NULL, 0},
	};
	static const struct option reload_opts[] = {
		{"name", required_argument, NULL, 'n'},
		{"pid", required_argument, NULL, 'p'},
		{"admin-dir", required_argument, NULL, 'A'},
		{NULL, 0, NULL, 0},
	};
	const struct option *o = strcmp(cmd, "status") == 0 ? status_opts : reload_opts;
	int c;

	memset(a, 0, sizeof(*a));
	if (cli_help_wanted(argc, argv, o)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, o))
		return cli_usage_cmd(cmd, "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", o, NULL)) != -1) {
		if (c == 'n' && !admin_name_valid(optarg, strlen(optarg)))
			return cli_usage_cmd(cmd, "--name: a NAME is [A-Za-z0-9_-], at most 64 "
						  "characters, starting with a letter or digit");
		if (c == 'p' && pid_arg(optarg, &a->pid) < 0)
			return cli_usage_cmd(cmd, "--pid: a process id, 1 or more");
		if (c == 'n')
			a->name = optarg;
		else if (c == 'A')
			a->dir = optarg;
		else if (c == 'j')
			a->json = true;
		else if (c != 'p')
			return cli_usage_cmd(cmd, "unknown option");
	}
	if (optind != argc)
		return cli_usage_cmd(cmd, "takes no arguments besides its options");
	return 0;
}

/* The sockets that match, or the exit status when there are none (said
 * on stderr). */
static int targets_find(const char *cmd, const struct status_args *a, char *dir, size_t cap,
			struct admin_target **t, size_t *n)
{
	struct appl_err err = {0};

	if (a->dir)
		snprintf(dir, cap, "%s", a->dir);
	else if (admin_dir_default(dir, cap, &err) < 0)
		return cli_fail_cmd(cmd, &err);
	if (admin_targets_list(dir, a->name, a->pid, t, n, &err) < 0)
		return cli_fail_cmd(cmd, &err);
	if (*n)
		return 0;
	free(*t);
	*t = NULL;
	fprintf(stderr, "appliance: %s: no appliance is running with its admin socket in %s", cmd,
		dir);
	if (a->name)
		fprintf(stderr, " named %s", a->name);
	if (a->pid)
		fprintf(stderr, " with pid %ld", (long)a->pid);
	fputs("\n", stderr);
	return 1;
}

/* ---- status as text ----------------------------------------------------------------- */

/* A string of the answer, escaped for a terminal (the appliance is not
 * trusted to have done it), or "-". */
static const char *esc(const char *s, size_t len, char buf[TEXT_MAX])
{
	log_escape(s, len, buf, TEXT_MAX, NULL);
	return buf;
}

static const char *txt(const json_t *v, char buf[TEXT_MAX])
{
	return json_is_string(v) ? esc(json_string_value(v), json_string_length(v), buf) : "-";
}

static long long num(const json_t *o, const char *key)
{
	return (long long)json_integer_value(json_object_get(o, key));
}

static void policy_print(FILE *f, const json_t *p)
{
	char b[5][TEXT_MAX];

	fprintf(f, "  policy   %s: serial %lld, deployment %s, key %s\n",
		txt(json_object_get(p, "path"), b[0]), num(p, "serial"),
		txt(json_object_get(p, "deployment"), b[1]),
		txt(json_object_get(p, "key_id"), b[2]));
	fprintf(f, "           expires %s, loaded %s\n", txt(json_object_get(p, "expires"), b[3]),
		txt(json_object_get(p, "loaded_at"), b[4]));
}

static void servers_print(FILE *f, const json_t *servers)
{
	char b[4][TEXT_MAX];
	const json_t *s;
	size_t i;

	if (!json_array_size(servers))
		fprintf(f, "  servers  none running\n");
	json_array_foreach(servers, i, s) {
		fprintf(f, "  server   %s: %s, revision %s, %lld tools, %lld restarts",
			txt(json_object_get(s, "name"), b[0]),
			txt(json_object_get(s, "state"), b[1]),
			txt(json_object_get(s, "revision"), b[2]), num(s, "tools"),
			num(s, "restarts"));
		if (json_is_string(json_object_get(s, "last_error")))
			fprintf(f, ", last error: %s", txt(json_object_get(s, "last_error"), b[3]));
		fputs("\n", f);
	}
}

static void cells_print(FILE *f, const json_t *c)
{
	char b[TEXT_MAX];
	const char *client;
	const json_t *v;

	fprintf(f, "  cells    %lld in flight, %lld waiting, %lld slots\n", num(c, "in_flight"),
		num(c, "waiting"), num(c, "slots"));
	json_object_foreach((json_t *)json_object_get(c, "by_client"), client, v) {
		fprintf(f, "  client   %s: %lld in flight, %lld waiting\n",
			esc(client, strlen(client), b), num(v, "in_flight"), num(v, "waiting"));
	}
}

static void http_print(FILE *f, const json_t *h)
{
	char b[TEXT_MAX];
	const char *token;
	const json_t *v;
	size_t i;

	if (!json_is_object(h))
		return;
	fprintf(f, "  http    ");
	json_array_foreach(json_object_get(h, "listen"), i, v) {
		fprintf(f, " %s", txt(v, b));
	}
	fprintf(f, "; sessions:");
	json_object_foreach((json_t *)json_object_get(h, "sessions"), token, v) {
		fprintf(f, " %s %lld", esc(token, strlen(token), b),
			(long long)json_integer_value(v));
	}
	fputs("\n", f);
}

static void status_print(FILE *f, const json_t *st)
{
	const json_t *pool = json_object_get(st, "pool"), *audit = json_object_get(st, "audit");
	const json_t *kept = json_object_get(st, "sessions");
	long long up = num(st, "uptime_s");
	char b[2][TEXT_MAX];

	fprintf(f, "%s[%lld]: up %lldh%02lldm%02llds\n", txt(json_object_get(st, "name"), b[0]),
		num(st, "pid"), up / 3600, up / 60 % 60, up % 60);
	policy_print(f, json_object_get(st, "policy"));
	servers_print(f, json_object_get(st, "servers"));
	cells_print(f, json_object_get(st, "cells"));
	fprintf(f, "  pool     %lld ready (%lld frozen), %lld booting, of %lld\n",
		num(pool, "ready"), num(pool, "frozen"), num(pool, "booting"), num(pool, "size"));
	if (json_is_object(kept))
		fprintf(f, "  sessions %lld open (%lld frozen)\n", num(kept, "open"),
			num(kept, "frozen"));
	http_print(f, json_object_get(st, "http"));
	if (json_is_object(audit))
		fprintf(f, "  audit    %s: %lld lines written, last seal %s%s\n",
			txt(json_object_get(audit, "path"), b[0]), num(audit, "lines"),
			json_is_string(json_object_get(audit, "last_seal"))
				? txt(json_object_get(audit, "last_seal"), b[1])
				: "none",
			json_is_true(json_object_get(audit, "ok")) ? "" : ", NOT WRITABLE");
}

/* ---- asking ------------------------------------------------------------------------- */

/* What one socket said. 0: an answer in *answer (ok true or false); 1:
 * stale, skipped (said); -1: it failed (said). */
static int ask_one(const char *cmd, const struct admin_target *t, enum admin_op op,
		   unsigned timeout_ms, json_t **answer)
{
	struct appl_err err = {0};
	int rc = admin_ask(t->path, op, timeout_ms, answer, &err);

	if (rc == -ECONNREFUSED) {
		fprintf(stderr,
			"appliance: %s: %s[%ld]: nobody answers at %s (it is gone): skipped\n", cmd,
			t->name, (long)t->pid, t->path);
		return 1;
	}
	if (rc < 0) {
		fprintf(stderr, "appliance: %s: %s[%ld]: %s\n", cmd, t->name, (long)t->pid,
			err.msg);
		return -1;
	}
	return 0;
}

/* An answer that refuses (ok false): said on stderr, as one line. */
static bool refused(const char *cmd, const struct admin_target *t, const json_t *answer)
{
	char b[TEXT_MAX];

	if (json_is_true(json_object_get(answer, "ok")))
		return false;
	fprintf(stderr, "appliance: %s: %s[%ld]: %s\n", cmd, t->name, (long)t->pid,
		txt(json_object_get(answer, "error"), b));
	return true;
}

static int statuses_print(const struct status_args *a, json_t *all)
{
	if (a->json) {
		if (json_dumpf(all, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
			return 1;
		fputs("\n", stdout);
	} else {
		for (size_t i = 0; i < json_array_size(all); i++) {
			if (i)
				fputs("\n", stdout);
			status_print(stdout, json_array_get(all, i));
		}
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

int cmd_status(int argc, char **argv)
{
	struct status_args a;
	struct admin_target *t = NULL;
	char dir[PATH_MAX];
	size_t n = 0, skipped = 0, failed = 0;
	json_t *all;
	int rc;

	if ((rc = args_parse(argc, argv, "status", &a)) != 0 || a.help)
		return a.help ? cli_help_print(status_help_text) : rc;
	if ((rc = targets_find("status", &a, dir, sizeof(dir), &t, &n)) != 0)
		return rc;
	all = json_array();
	for (size_t i = 0; all && i < n; i++) {
		json_t *answer = NULL;

		rc = ask_one("status", &t[i], ADMIN_OP_STATUS, APPL_ADMIN_TIMEOUT_MS, &answer);
		skipped += rc > 0;
		failed += rc < 0 || (rc == 0 && refused("status", &t[i], answer));
		if (rc == 0 && json_is_true(json_object_get(answer, "ok")))
			json_array_append(all, json_object_get(answer, "status"));
		json_decref(answer);
	}
	free(t);
	if (skipped == n)
		fprintf(stderr, "appliance: status: none of the %zu sockets in %s answered\n", n,
			dir);
	rc = all ? statuses_print(&a, all) : 1;
	json_decref(all);
	return rc || failed || skipped == n ? 1 : 0;
}

/* One reload's outcome on stdout: 1 reloaded, 0 not, -1 a stale socket
 * (skipped). */
static int reload_one(const struct admin_target *t)
{
	json_t *answer = NULL;
	bool ok = false;
	char b[TEXT_MAX];
	int rc = ask_one("reload", t, ADMIN_OP_RELOAD, APPL_ADMIN_RELOAD_WAIT_MS, &answer);

	if (rc != 0)
		return rc > 0 ? -1 : 0;
	if (json_is_null(json_object_get(answer, "op")))
		refused("reload", t, answer); /* the socket's own refusal */
	else if ((ok = json_is_true(json_object_get(answer, "ok"))))
		printf("%s[%ld]: reloaded\n", t->name, (long)t->pid);
	else
		printf("%s[%ld]: not reloaded: %s\n", t->name, (long)t->pid,
		       txt(json_object_get(answer, "error"), b));
	fflush(stdout);
	json_decref(answer);
	return ok;
}

int cmd_reload(int argc, char **argv)
{
	struct status_args a;
	struct admin_target *t = NULL;
	char dir[PATH_MAX];
	size_t n = 0, done = 0, skipped = 0;
	int rc;

	if ((rc = args_parse(argc, argv, "reload", &a)) != 0 || a.help)
		return a.help ? cli_help_print(reload_help_text) : rc;
	if ((rc = targets_find("reload", &a, dir, sizeof(dir), &t, &n)) != 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		rc = reload_one(&t[i]);
		done += rc > 0;
		skipped += rc < 0;
	}
	free(t);
	if (skipped == n)
		fprintf(stderr, "appliance: reload: none of the %zu sockets in %s answered\n", n,
			dir);
	return done + skipped == n && skipped < n ? 0 : 1;
}
