/* prepare.c: part 2's preparation: the markers no cell may see, and each
 * probe given its program, its parameters and its expectation
 * (internal.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "check/internal.h"
#include "engine/process.h"
#include "stubs/stubs.h"

void check_prepare_surprise(struct check_probe *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	p->started = p->ended = p->judged = true;
	p->ok = false;
}

static void probe_def_init(struct check *c, struct check_probe *p, const struct check_probe_def *d)
{
	json_t *params = d->setup ? json_object() : NULL;
	int rc = params ? 0 : -ENOMEM;

	p->def = d;
	p->deny = d->deny;
	p->ex.judge = d->judge;
	p->ex.expect = d->expect;
	p->deadline_ms = c->lim.deadline_s * 1000ull;
	snprintf(p->label, sizeof(p->label), "%s", d->label);
	if (d->setup && (rc < 0 || (rc = d->setup(c, p, params)) != 0)) {
		check_prepare_surprise(p, "could not be set up: %s",
				       strerror(rc < 0 ? -rc : ENOMEM));
	} else if (!(p->code = check_probes_code(params, d->code))) {
		check_prepare_surprise(p, "out of memory");
	}
	json_decref(params);
}

/* A Python identifier, so a name from a server can be pasted into the
 * call's program without becoming code of its own. */
static bool ident_ok(const char *s)
{
	if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/* Why server.tool is not among what the stdio client may call. */
static void call_why_not(const struct check *c, const struct check_call *k, char *out, size_t cap)
{
	struct bridge_tool_info info;
	const char *role = policy_client_default_role(c->cp.policy);

	if (!policy_server_find(c->cp.policy, k->server)) {
		snprintf(out, cap, "the policy has no server %s", k->server);
		return;
	}
	if (!check_servers_up(c, k->server)) {
		snprintf(out, cap, "server %s is not running", k->server);
		return;
	}
	for (size_t i = 0; c->client && bridge_catalog_info(c->client, i, &info) == 0; i++)
		if (strcmp(info.server, k->server) == 0 && strcmp(info.name, k->tool) == 0) {
			snprintf(out, cap, "not offered to the stdio client (role %s): %s",
				 role ? role : "none", info.why_not ? info.why_not : "?");
			return;
		}
	snprintf(out, cap, "server %s lists no tool %s", k->server, k->tool);
}

/* The program of a call of name (server.tool) through its stub, or NULL
 * when the stdio client has no such function. */
static char *call_body(const struct check *c, const char *name)
{
	const struct stubs *st = c->client ? bridge_catalog_stubs(c->client) : NULL;
	char *body = NULL;

	for (size_t i = 0; st && i < stubs_count(st) && !body; i++)
		if (strcmp(stubs_mcp_name(st, i), name) == 0 && !stubs_why_not(st, i) &&
		    ident_ok(stubs_ns(st, i)) && ident_ok(stubs_fn(st, i)) &&
		    asprintf(&body,
			     "try:\n"
			     "    v = await %s.%s(**P[\"args\"])\n"
			     "    report(True, json.dumps(v, ensure_ascii=False))\n"
			     "except ToolError as e:\n"
			     "    report(False, \"ToolError: %%s\" %% e)\n",
			     stubs_ns(st, i), stubs_fn(st, i)) < 0)
			body = NULL;
	return body;
}

static void probe_call_init(struct check *c, struct check_probe *p, const struct check_call *k)
{
	char name[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2], args[96];
	char *text = json_dumps(k->args, JSON_COMPACT), *body;
	json_t *params = json_pack("{sO}", "args", k->args);

	snprintf(name, sizeof(name), "%s.%s", k->server, k->tool);
	p->call = k;
	p->ex.judge = CHECK_JUDGE_CALL;
	p->deadline_ms = c->lim.deadline_s * 1000ull;
	snprintf(p->label, sizeof(p->label), "%s %s", name,
		 text ? check_report_shown(text, args, sizeof(args)) : "");
	if (!(body = call_body(c, name))) {
		char why[CHECK_WHY_MAX];

		call_why_not(c, k, why, sizeof(why));
		check_prepare_surprise(p, "%s", why);
	} else if (!params || !(p->code = check_probes_code(params, body)))
		check_prepare_surprise(p, "out of memory");
	free(body);
	free(text);
	json_decref(params);
}

/* A host file and a variable of check's own environment that no cell may
 * see. */
int check_prepare_markers(struct check *c)
{
	unsigned char raw[CHECK_TOKEN_BYTES];
	int fd, rc;

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(c->token, sizeof(c->token), raw, sizeof(raw));
	if ((rc = engine_env_set(CHECK_MARKER_ENV, c->token)) < 0)
		return rc;
	c->marker_set = true;
	snprintf(c->marker_dir, sizeof(c->marker_dir), "%s",
		 access("/var/tmp", W_OK) == 0 ? "/var/tmp/appliance-check.XXXXXX"
					       : "/tmp/appliance-check.XXXXXX");
	if (!mkdtemp(c->marker_dir)) {
		c->marker_dir[0] = '\0';
		return -errno;
	}
	chmod(c->marker_dir, 0755);
	snprintf(c->marker_path, sizeof(c->marker_path), "%s/marker", c->marker_dir);
	fd = open(c->marker_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || appl_fd_write_all(fd, c->token, strlen(c->token)) < 0) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

int check_prepare_probes(struct check *c)
{
	size_t n = check_probes_count() + c->o->ncalls, k = 0;

	if (!(c->probes = calloc(n, sizeof(*c->probes))))
		return -ENOMEM;
	c->nprobes = n;
	/* The rows of the "must work" column: the fixed ones, then the calls. */
	for (size_t i = 0; i < check_probes_count(); i++)
		if (!check_probes_get(i)->deny)
			probe_def_init(c, &c->probes[k++], check_probes_get(i));
	for (size_t i = 0; i < c->o->ncalls; i++)
		probe_call_init(c, &c->probes[k++], &c->o->calls[i]);
	for (size_t i = 0; i < check_probes_count(); i++)
		if (check_probes_get(i)->deny)
			probe_def_init(c, &c->probes[k++], check_probes_get(i));
	return 0;
}
