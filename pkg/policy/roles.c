/* roles.c: the `tools` section (each tool's access, by pattern) and the
 * `roles` section (the patterns a role may call, and whether it writes).
 * Both name servers, so both are read after `servers`. */
#include "policy/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 2: pat names exactly server.tool; 1: pat is server.*; 0: neither. The
 * wildcard is tested first, so a tool an upstream calls "*" cannot pass for
 * an exact entry. */
int policy_pattern_match(const char *pat, const char *server, const char *tool)
{
	size_t n = strlen(server);

	if (strncmp(pat, server, n) != 0 || pat[n] != '.')
		return 0;
	if (strcmp(pat + n + 1, "*") == 0)
		return 1;
	return strcmp(pat + n + 1, tool) == 0 ? 2 : 0;
}

static const char *const access_names[] = {
	[POLICY_ACCESS_READ] = "read",
	[POLICY_ACCESS_WRITE] = "write",
};

int policy_access_parse(struct ctx *c, const json_t *v, const char *path, enum policy_access *out)
{
	for (size_t i = 0; json_is_string(v) && i < NELEM(access_names); i++) {
		if (strcmp(json_string_value(v), access_names[i]) == 0) {
			*out = (enum policy_access)i;
			return 0;
		}
	}
	return appl_err_set(c->err, -EINVAL, "%s: must be \"read\" or \"write\"", path);
}

static int access_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_access_parse(c, v, path, &((struct rule *)base)->access);
}

static const struct field rule_fields[] = {
	{.name = "access", .type = F_FN, .required = true, .parse = access_parse},
	{.name = "approval", .type = F_BOOL, .off = offsetof(struct rule, approval)},
};

int policy_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *pat;
	json_t *rv;
	int rc = policy_map_check(c, v, APPL_POLICY_TOOL_RULES_MAX, "entries", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->rules = calloc(json_object_size(v) + 1, sizeof(*p->rules));
	if (!p->rules)
		return policy_ctx_nomem(c);
	json_object_foreach((json_t *)v, pat, rv) {
		struct rule *r = &p->rules[p->nrules];
		policy_path_key(sub, path, pat);
		rc = policy_pattern_check(c, pat, sub);
		if (rc == 0)
			rc = policy_fields_parse(c, rv, rule_fields, NELEM(rule_fields), r, sub);
		if (rc < 0)
			return rc;
		r->pattern = pat;
		p->nrules++;
	}
	return 0;
}

static int role_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_role *r = base;
	const char **pats = NULL;
	int rc = policy_array_check(c, v, 0, APPL_POLICY_ROLE_TOOLS_MAX, "patterns", path);

	if (rc < 0)
		return rc;
	rc = policy_strings_parse(c, v, APPL_POLICY_SERVER_NAME_MAX + 1 + APPL_POLICY_TOOL_NAME_MAX,
				  NULL, NULL, path, &pats, &r->ntools);
	r->tools = pats;
	for (size_t i = 0; rc == 0 && i < r->ntools; i++) {
		policy_path_index(sub, path, i);
		rc = policy_pattern_check(c, pats[i], sub);
		for (size_t j = 0; rc == 0 && j < i; j++)
			if (strcmp(pats[i], pats[j]) == 0)
				rc = appl_err_set(c->err, -EINVAL, "%s: listed twice", sub);
	}
	return rc;
}

#define SESSION_FIELD(field, NAME)                                                                 \
	{                                                                                          \
		.name = #field, .type = F_UINT, .off = offsetof(struct policy_sessions, field),    \
		.min = APPL_SESSION_##NAME##_MIN, .max = APPL_SESSION_##NAME##_CEIL,               \
		.def = APPL_SESSION_##NAME##_DEF                                                   \
	}

static const struct field session_fields[] = {
	SESSION_FIELD(max, MAX),
	SESSION_FIELD(idle_s, IDLE_S),
	SESSION_FIELD(max_cells, MAX_CELLS),
	SESSION_FIELD(memory_mb, MEMORY_MB),
};

/* `sessions` inside a role: an object (empty: the defaults). */
static int role_sessions_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_role *r = base;

	if (!json_is_object(v))
		return appl_err_set(
			c->err, -EINVAL,
			"%s: must be an object, such as {\"max\": 4} ({} for the defaults)", path);
	policy_fields_default(session_fields, NELEM(session_fields), &r->sessions);
	return policy_fields_parse(c, v, session_fields, NELEM(session_fields), &r->sessions, path);
}

/* A role's `code_tools`: names of the policy's code tools, each once, or
 * "*" alone for all of them. */
static int role_code_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_role *r = base;
	const char **names = NULL;
	bool found;
	int rc = policy_array_check(c, v, 0, APPL_CODE_TOOLS_MAX, "code tool names", path);

	if (rc == 0)
		rc = policy_strings_parse(c, v, APPL_CODE_TOOL_NAME_MAX, NULL, NULL, path, &names,
					  &r->ncode_tools);
	r->code_tools = names;
	for (size_t i = 0; rc == 0 && i < r->ncode_tools; i++) {
		policy_path_index(sub, path, i);
		if (strcmp(names[i], "*") == 0) {
			if (r->ncode_tools > 1)
				return appl_err_set(c->err, -EINVAL,
						    "%s: \"*\" (every code tool) stands alone",
						    sub);
			continue;
		}
		found = false;
		for (size_t k = 0; k < c->p->ncode_tools; k++)
			found |= strcmp(c->p->code_tools[k].pub.name, names[i]) == 0;
		if (!found)
			return appl_err_set(c->err, -EINVAL, "%s: no code tool named %s", sub,
					    names[i]);
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[i], names[j]) == 0)
				return appl_err_set(c->err, -EINVAL, "%s: listed twice", sub);
	}
	return rc;
}

static const struct field role_fields[] = {
	{.name = "sessions", .type = F_FN, .parse = role_sessions_parse},
	{.name = "tools", .type = F_FN, .parse = role_tools_parse},
	{.name = "write", .type = F_BOOL, .off = offsetof(struct policy_role, write), .def = 0},
	{.name = "approve_writes",
	 .type = F_BOOL,
	 .off = offsetof(struct policy_role, approve_writes)},
	{.name = "inline",
	 .type = F_BOOL,
	 .off = offsetof(struct policy_role, run_python),
	 .def = 1},
	{.name = "code_tools", .type = F_FN, .parse = role_code_tools_parse},
};

/* What the role's fields say together: `tools` are its cells' (an
 * invoke-only role has none, and no sessions); a code tool named that
 * writes needs the role's write; an invoke-only role has a code tool. */
static int role_whole_check(struct ctx *c, const struct policy_role *r, const json_t *rv,
			    const char *path)
{
	bool tools = json_object_get(rv, "tools") != NULL;

	if (r->run_python && !tools)
		return appl_err_set(c->err, -EINVAL,
				    "%s.tools: missing (the tools its run_python cells may call; "
				    "[] for none)",
				    path);
	if (!r->run_python && r->ntools)
		return appl_err_set(c->err, -EINVAL,
				    "%s.tools: an invoke-only role (\"inline\": false) runs no "
				    "cell, so its tools would never be called; leave tools out",
				    path);
	if (!r->run_python && r->sessions.max)
		return appl_err_set(c->err, -EINVAL,
				    "%s.sessions: an invoke-only role (\"inline\": false) runs no "
				    "cell to keep; leave sessions out",
				    path);
	if (!r->run_python && r->ncode_tools == 0)
		return appl_err_set(c->err, -EINVAL,
				    "%s.code_tools: an invoke-only role (\"inline\": false) needs "
				    "code tools to call",
				    path);
	for (size_t i = 0; !r->write && i < r->ncode_tools; i++)
		for (size_t k = 0; k < c->p->ncode_tools; k++)
			if (strcmp(c->p->code_tools[k].pub.name, r->code_tools[i]) == 0 &&
			    c->p->code_tools[k].pub.access == POLICY_ACCESS_WRITE)
				return appl_err_set(
					c->err, -EINVAL,
					"%s.code_tools[%zu]: %s writes (\"access\": "
					"\"write\"), and the role has no \"write\": true",
					path, i, r->code_tools[i]);
	return 0;
}

static int role_cmp(const void *a, const void *b)
{
	return strcmp(((const struct policy_role *)a)->name, ((const struct policy_role *)b)->name);
}

int policy_roles_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *name;
	json_t *rv;
	int rc = policy_map_check(c, v, APPL_POLICY_ROLES_MAX, "roles", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->roles = calloc(json_object_size(v) + 1, sizeof(*p->roles));
	if (!p->roles)
		return policy_ctx_nomem(c);
	json_object_foreach((json_t *)v, name, rv) {
		struct policy_role *r = &p->roles[p->nroles++];
		policy_path_key(sub, path, name);
		r->name = name;
		policy_fields_default(role_fields, NELEM(role_fields), r);
		rc = policy_label_check(name, strlen(name), sub, c->err);
		if (rc == 0)
			rc = policy_fields_parse(c, rv, role_fields, NELEM(role_fields), r, sub);
		if (rc == 0)
			rc = role_whole_check(c, r, rv, sub);
		if (rc < 0)
			return rc;
	}
	qsort(p->roles, p->nroles, sizeof(*p->roles), role_cmp);
	return 0;
}

/* A kept sandbox waits frozen and is measured through its cgroup, which
 * a rootless appliance does not have: sessions there are refused, not
 * kept unfrozen and unmeasured. */
int policy_roles_sessions_check(const struct policy *p, struct appl_err *err)
{
	for (size_t i = 0; p->rootless && i < p->nroles; i++)
		if (p->roles[i].sessions.max)
			return appl_err_set(
				err, -EINVAL,
				"roles.%s.sessions: needs root (the policy is rootless: "
				"no cgroup can freeze or measure a kept sandbox); remove "
				"sessions or run as root",
				p->roles[i].name);
	return 0;
}

/* ---- accessors ----------------------------------------------------------- */

size_t policy_role_count(const struct policy *p)
{
	return p->nroles;
}

const struct policy_role *policy_role_get(const struct policy *p, size_t i)
{
	return i < p->nroles ? &p->roles[i] : NULL;
}

const struct policy_role *policy_role_find(const struct policy *p, const char *name)
{
	for (size_t i = 0; name && i < p->nroles; i++)
		if (strcmp(p->roles[i].name, name) == 0)
			return &p->roles[i];
	return NULL;
}
