/* servers.c: the `servers` section: stdio servers (a command, the
 * environment they may have, their confinement) and HTTP servers (a URL,
 * headers filled from the environment, roots and a proxy), kept sorted by
 * name; and what the document as a whole must hold of them. */
#include "policy/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int command_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_server *s = base;
	const char **argv = NULL;
	int rc = policy_array_check(c, v, 1, APPL_POLICY_ARGV_MAX, "strings", path);

	if (rc < 0)
		return rc;
	rc = policy_strings_parse(c, v, APPL_POLICY_ARG_MAX, policy_abs_path_check, NULL, path,
				  &argv, &s->argc);
	s->argv = argv;
	return rc;
}

static int env_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_server *s = base;
	const char **env = NULL;
	int rc = policy_array_check(c, v, 0, APPL_POLICY_ENV_MAX, "names", path);

	if (rc < 0)
		return rc;
	rc = policy_strings_parse(c, v, APPL_POLICY_ENV_NAME_MAX, NULL, policy_env_name_check, path,
				  &env, &s->nenv);
	s->env = env;
	if (rc < 0)
		return rc;
	for (size_t i = 1; i < s->nenv; i++) {
		for (size_t j = 0; j < i; j++) {
			if (strcmp(env[i], env[j]) == 0) {
				policy_path_index(sub, path, i);
				return appl_err_set(c->err, -EINVAL, "%s: %s is listed twice", sub,
						    env[i]);
			}
		}
	}
	return 0;
}

static int headers_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_server *s = base;
	struct policy_header *h;
	const char *name;
	json_t *val;
	int rc = policy_map_check(c, v, APPL_POLICY_HEADERS_MAX, "headers", path);

	if (rc < 0)
		return rc;
	h = calloc(json_object_size(v) + 1, sizeof(*h));
	if (!h)
		return policy_ctx_nomem(c);
	s->headers = h;
	json_object_foreach((json_t *)v, name, val) {
		policy_path_key(sub, path, name);
		rc = policy_header_name_check(name, strlen(name), sub, c->err);
		if (rc == 0)
			rc = policy_header_reserved_check(name, sub, c->err);
		if (rc < 0)
			return rc;
		/* HTTP names are case-insensitive; JSON keys are not. */
		for (size_t j = 0; j < s->nheaders; j++)
			if (strcasecmp(name, h[j].name) == 0)
				return appl_err_set(c->err, -EINVAL, "%s: the same header as %s",
						    sub, h[j].name);
		if (!json_is_string(val))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", sub);
		if (json_string_length(val) > APPL_POLICY_HEADER_VALUE_MAX)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %d bytes", sub,
					    APPL_POLICY_HEADER_VALUE_MAX);
		rc = policy_header_value_check(json_string_value(val), json_string_length(val), sub,
					       c->err);
		if (rc < 0)
			return rc;
		h[s->nheaders].name = name;
		h[s->nheaders].value = json_string_value(val);
		s->nheaders++;
	}
	return 0;
}

/* The fields both kinds of server have, in both tables alike. */
#define SERVER_RESOURCES_FIELD                                                                     \
	{                                                                                          \
		.name = "resources", .type = F_BOOL,                                               \
		.off = offsetof(struct policy_server, resources)                                   \
	}
#define SERVER_CONCURRENCY_FIELD                                                                   \
	{                                                                                          \
		.name = "concurrency", .type = F_UINT,                                             \
		.off = offsetof(struct policy_server, concurrency),                                \
		.min = APPL_SERVER_CONCURRENCY_MIN, .max = APPL_SERVER_CONCURRENCY_CEIL,           \
		.def = APPL_SERVER_CONCURRENCY_DEF                                                 \
	}

static const struct field stdio_fields[] = {
	{.name = "command", .type = F_FN, .required = true, .parse = command_parse},
	{.name = "env", .type = F_FN, .parse = env_parse},
	{.name = "cwd",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, cwd),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
	{.name = "user",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, user),
	 .maxlen = APPL_POLICY_USER_MAX,
	 .check = policy_user_check},
	{.name = "memory_mb",
	 .type = F_UINT,
	 .off = offsetof(struct policy_server, memory_mb),
	 .min = APPL_UPSTREAM_MEMORY_MB_MIN,
	 .max = APPL_UPSTREAM_MEMORY_MB_MAX,
	 .def = APPL_UPSTREAM_MEMORY_MB_DEF},
	{.name = "pids",
	 .type = F_UINT,
	 .off = offsetof(struct policy_server, pids),
	 .min = APPL_UPSTREAM_PIDS_MIN,
	 .max = APPL_UPSTREAM_PIDS_MAX,
	 .def = APPL_UPSTREAM_PIDS_DEF},
	{.name = "network",
	 .type = F_BOOL,
	 .off = offsetof(struct policy_server, network),
	 .def = 1},
	SERVER_RESOURCES_FIELD,
	SERVER_CONCURRENCY_FIELD,
};

static const struct field http_fields[] = {
	{.name = "url",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_server, url),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = policy_server_url_check},
	{.name = "headers", .type = F_FN, .parse = headers_parse},
	{.name = "ca_file",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, ca_file),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
	{.name = "proxy",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, proxy),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = policy_url_check},
	SERVER_RESOURCES_FIELD,
	SERVER_CONCURRENCY_FIELD,
};

static int server_parse(struct ctx *c, const char *name, const json_t *v, struct policy_server *s,
			const char *path)
{
	bool cmd, url;
	int rc = policy_server_name_check(name, path, c->err);

	if (rc < 0)
		return rc;
	if (!json_is_object(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object", path);
	cmd = json_object_get(v, "command") != NULL;
	url = json_object_get(v, "url") != NULL;
	if (cmd && url)
		return appl_err_set(c->err, -EINVAL,
				    "%s: command (stdio) and url (HTTP) exclude each other", path);
	if (!cmd && !url)
		return appl_err_set(c->err, -EINVAL, "%s: needs command (stdio) or url (HTTP)",
				    path);
	s->name = name;
	if (cmd) {
		s->kind = POLICY_SERVER_STDIO;
		policy_fields_default(stdio_fields, NELEM(stdio_fields), s);
		return policy_fields_parse(c, v, stdio_fields, NELEM(stdio_fields), s, path);
	}
	s->kind = POLICY_SERVER_HTTP;
	c->p->http = true;
	policy_fields_default(http_fields, NELEM(http_fields), s);
	return policy_fields_parse(c, v, http_fields, NELEM(http_fields), s, path);
}

static int server_cmp(const void *a, const void *b)
{
	return strcmp(((const struct policy_server *)a)->name,
		      ((const struct policy_server *)b)->name);
}

/* Does template t name variable var as {env:var}? */
static bool tmpl_names(const char *t, const char *var)
{
	size_t n = strlen(var);

	for (const char *q = t; (q = strstr(q, "{env:")); q++)
		if (strncmp(q + 5, var, n) == 0 && q[5 + n] == '}')
			return true;
	return false;
}

/* A variable an HTTP server's header takes is a credential of that server:
 * the appliance takes it out of its environment at start, so a stdio
 * server's env may not name it too. */
static int secrets_private(struct ctx *c)
{
	const struct policy *p = c->p;

	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *a = &p->servers[i];

		for (size_t k = 0; a->kind == POLICY_SERVER_STDIO && k < a->nenv; k++)
			for (size_t j = 0; j < p->nservers; j++) {
				const struct policy_server *b = &p->servers[j];

				for (size_t h = 0; b->kind == POLICY_SERVER_HTTP && h < b->nheaders;
				     h++)
					if (tmpl_names(b->headers[h].value, a->env[k]))
						return appl_err_set(
							c->err, -EINVAL,
							"servers.%s.env: %s is taken by "
							"servers.%s.headers.%s, and only that "
							"server may have it",
							a->name, a->env[k], b->name,
							b->headers[h].name);
			}
	}
	return 0;
}

int policy_servers_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *name;
	json_t *sv;
	int rc = policy_map_check(c, v, APPL_POLICY_SERVERS_MAX, "servers", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->servers = calloc(json_object_size(v) + 1, sizeof(*p->servers));
	if (!p->servers)
		return policy_ctx_nomem(c);
	json_object_foreach((json_t *)v, name, sv) {
		/* Counted first, so policy_free sees what a failed parse allocated. */
		struct policy_server *s = &p->servers[p->nservers++];
		policy_path_key(sub, path, name);
		rc = server_parse(c, name, sv, s, sub);
		if (rc < 0)
			return rc;
	}
	qsort(p->servers, p->nservers, sizeof(*p->servers), server_cmp);
	return secrets_private(c);
}

/* ---- what the document holds of its servers ------------------------------ */

/* Rootless, the appliance cannot change a server's user or give it a
 * network namespace: a policy asking for either is refused, not ignored. */
static int rootless_check(const struct policy *p, struct appl_err *err)
{
	if (!p->rootless)
		return 0;
	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *s = &p->servers[i];

		if (s->kind == POLICY_SERVER_STDIO && !s->network)
			return appl_err_set(err, -EINVAL,
					    "servers.%s.network: false needs root (the policy is "
					    "rootless)",
					    s->name);
		if (s->kind == POLICY_SERVER_STDIO && s->user)
			return appl_err_set(err, -EINVAL,
					    "servers.%s.user: needs root (the policy is rootless)",
					    s->name);
	}
	return 0;
}

/* Two servers that name one user run as one uid: each could read the
 * other's memory and signal it. A policy that asks for that is refused;
 * leaving user out gives each a uid of its own. */
static int users_apart_check(const struct policy *p, struct appl_err *err)
{
	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *a = &p->servers[i];

		for (size_t k = 0; a->kind == POLICY_SERVER_STDIO && a->user && k < i; k++) {
			const struct policy_server *b = &p->servers[k];

			if (b->kind == POLICY_SERVER_STDIO && b->user &&
			    strcmp(a->user, b->user) == 0)
				return appl_err_set(
					err, -EINVAL,
					"servers.%s.user and servers.%s.user both name %s: servers "
					"that share a user are not apart (each may read the "
					"other's memory); leave user out to give each a user of "
					"its own",
					b->name, a->name, a->user);
		}
	}
	return 0;
}

int policy_servers_confine_check(const struct policy *p, struct appl_err *err)
{
	int rc = rootless_check(p, err);

	return rc < 0 ? rc : users_apart_check(p, err);
}

/* ---- accessors ----------------------------------------------------------- */

size_t policy_server_count(const struct policy *p)
{
	return p->nservers;
}

const struct policy_server *policy_server_get(const struct policy *p, size_t i)
{
	return i < p->nservers ? &p->servers[i] : NULL;
}

const struct policy_server *policy_server_find(const struct policy *p, const char *name)
{
	for (size_t i = 0; name && i < p->nservers; i++)
		if (p->servers[i].name && strcmp(p->servers[i].name, name) == 0)
			return &p->servers[i];
	return NULL;
}

bool policy_http_used(const struct policy *p)
{
	return p->http;
}

/* "server.tool" or "server.*", the server declared in `servers`. */
int policy_pattern_check(struct ctx *c, const char *pat, const char *path)
{
	const char *dot = strchr(pat, '.');
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	size_t n = dot ? (size_t)(dot - pat) : 0;

	if (!dot || n == 0)
		return appl_err_set(c->err, -EINVAL, "%s: must be server.tool or server.*", path);
	if (n > APPL_POLICY_SERVER_NAME_MAX)
		return appl_err_set(c->err, -EINVAL, "%s: no server named %.*s", path,
				    APPL_POLICY_SERVER_NAME_MAX, pat);
	memcpy(server, pat, n);
	server[n] = '\0';
	if (!policy_server_find(c->p, server))
		return appl_err_set(c->err, -EINVAL, "%s: no server named %s", path, server);
	if (strcmp(dot + 1, "*") != 0 && !policy_tool_name_valid(dot + 1))
		return appl_err_set(c->err, -EINVAL,
				    "%s: the tool must be * or 1 to %d of A-Z a-z 0-9 _ - . /",
				    path, APPL_POLICY_TOOL_NAME_MAX);
	return 0;
}
