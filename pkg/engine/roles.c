/* roles.c: what each role sees (see roles.h). */
#include "engine/roles.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"
#include "upstream/set.h"
#include "upstream/upstream.h"
#include "stubs/stubs.h"

struct role {
	struct role *next;
	const char *name; /* the policy's; NULL: a role that may call nothing */
	/* A code tool's view: what its program may call when name's clients
	 * call it (no description). NULL: the role's own cells. */
	const struct policy_code_tool *tool;
	struct bridge_catalog *cat;
	char *description;
};

struct engine_roles {
	struct engine_roles_config cfg;
	struct upstream_set *ups;
	struct role *list;
};

static void catalog_log(const struct role *ro)
{
	struct bridge_tool_info info;

	for (size_t i = 0; bridge_catalog_info(ro->cat, i, &info) == 0; i++)
		if (info.why_not)
			log_line(LOG_INFO, NULL, "role %s: tool %s.%s is not offered: %s",
				 ro->name ? ro->name : "(none)", info.server, info.name,
				 info.why_not);
}

/* Every server's last tool list, as the bridge takes it (new array, n
 * entries borrowed from the servers). */
static struct bridge_tool_in *tools_gather(const struct upstream_set *ups, size_t *n)
{
	size_t nups = ups ? upstream_set_count(ups) : 0, total = 0, k = 0;
	struct bridge_tool_in *in;

	for (size_t i = 0; i < nups; i++)
		total += upstream_tool_count(upstream_set_get(ups, i));
	if (!(in = calloc(total ? total : 1, sizeof(*in))))
		return NULL;
	for (size_t i = 0; i < nups; i++) {
		const struct upstream *u = upstream_set_get(ups, i);

		for (size_t j = 0; j < upstream_tool_count(u); j++) {
			const struct upstream_tool *t = upstream_tool_get(u, j);

			in[k++] = (struct bridge_tool_in){upstream_name(u),  t->name,
							  t->description,    t->input_schema,
							  t->read_only_hint, t->output_schema};
		}
	}
	*n = k;
	return in;
}

/* Build ro's catalog and description again; tell its clients when the
 * description changed. Runs already admitted keep the catalog they had. */
static int rebuild(struct engine_roles *r, struct role *ro, struct appl_err *err)
{
	const struct policy_limits *l = r->cfg.lim;
	struct stubs_limits sl = {.deadline_s = l->deadline_s,
				  .max_calls = l->max_calls,
				  .max_output_bytes = l->max_output_bytes};
	const struct policy_role *pr = ro->name ? policy_role_find(r->cfg.policy, ro->name) : NULL;
	struct bridge_catalog *cat = NULL;
	struct bridge_tool_in *in;
	size_t n = 0;
	char *desc;
	int rc;

	struct policy_caller who = {.role = ro->name, .tool = ro->tool};

	sl.sessions_idle_s = pr && pr->sessions.max ? pr->sessions.idle_s : 0;

	if (!(in = tools_gather(r->ups, &n)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	rc = bridge_catalog_for(r->cfg.policy, &who, in, n, &cat, err);
	free(in);
	if (rc < 0)
		return rc;
	desc = ro->tool ? strdup("") : stubs_description(bridge_catalog_stubs(cat), &sl, err);
	if (!desc && ro->tool)
		appl_err_set(err, -ENOMEM, "out of memory");
	if (!desc) {
		bridge_catalog_unref(cat);
		return err->code;
	}
	bridge_catalog_unref(ro->cat);
	ro->cat = cat;
	catalog_log(ro);
	if (!ro->tool && ro->description && strcmp(ro->description, desc) != 0 && r->cfg.changed)
		r->cfg.changed(r->cfg.data, ro->name);
	free(ro->description);
	ro->description = desc;
	return 0;
}

static bool same_name(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* role's view, or the view of tool's program called by role (tool not
 * NULL), built on first use. */
static struct role *view_of(struct engine_roles *r, const char *role,
			    const struct policy_code_tool *tool, struct appl_err *err)
{
	struct role *ro;

	for (ro = r->list; ro && (!same_name(ro->name, role) || ro->tool != tool); ro = ro->next)
		;
	if (!ro) {
		if (!(ro = calloc(1, sizeof(*ro)))) {
			appl_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
		ro->name = role;
		ro->tool = tool;
		if (rebuild(r, ro, err) < 0) {
			free(ro);
			return NULL;
		}
		ro->next = r->list;
		r->list = ro;
	}
	return ro;
}

const char *engine_roles_view(struct engine_roles *r, const char *role, struct bridge_catalog **cat,
			      struct appl_err *err)
{
	struct role *ro = view_of(r, role, NULL, err);

	if (ro && cat)
		*cat = ro->cat;
	return ro ? ro->description : NULL;
}

struct bridge_catalog *engine_roles_tool_view(struct engine_roles *r, const char *role,
					      const struct policy_code_tool *tool,
					      struct appl_err *err)
{
	struct role *ro = view_of(r, role, tool, err);

	return ro ? ro->cat : NULL;
}

void engine_roles_changed(void *data, const char *why)
{
	struct engine_roles *r = data;

	for (struct role *ro = r->list; ro; ro = ro->next) {
		struct appl_err err = {0};

		if (rebuild(r, ro, &err) < 0)
			log_line(LOG_ERR, NULL, "the tool list was not rebuilt after %s: %s", why,
				 err.msg);
	}
}

void engine_roles_servers(struct engine_roles *r, struct upstream_set *ups)
{
	r->ups = ups;
}

struct engine_roles *engine_roles_new(const struct engine_roles_config *cfg, struct appl_err *err)
{
	struct engine_roles *r = calloc(1, sizeof(*r));

	if (!r) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	r->cfg = *cfg;
	return r;
}

void engine_roles_free(struct engine_roles *r)
{
	if (!r)
		return;
	while (r->list) {
		struct role *ro = r->list;

		r->list = ro->next;
		bridge_catalog_unref(ro->cat);
		free(ro->description);
		free(ro);
	}
	free(r);
}

int engine_roles_build(struct engine_roles *r, struct appl_err *err)
{
	const struct policy *p = r->cfg.policy;

	if (!engine_roles_view(r, NULL, NULL, err))
		return err->code;
	for (size_t i = 0; i < policy_role_count(p); i++) {
		const char *name = policy_role_get(p, i)->name;
		const struct policy_code_tool *t;

		if (!engine_roles_view(r, name, NULL, err))
			return appl_err_prefix(err, "roles.%s", name);
		for (size_t k = 0; k < policy_code_tool_count(p); k++)
			if (policy_code_tool_allowed(p, name, policy_code_tool_get(p, k)->name,
						     &t) == POLICY_OK &&
			    !engine_roles_tool_view(r, name, t, err))
				return appl_err_prefix(err, "roles.%s, code tool %s", name,
						       t->name);
	}
	return 0;
}

static bool json_same(const json_t *a, const json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

static bool tool_same(const struct policy_code_tool *a, const struct policy_code_tool *b)
{
	return strcmp(a->name, b->name) == 0 && strcmp(a->description, b->description) == 0 &&
	       a->access == b->access && json_same(a->input_schema, b->input_schema) &&
	       json_same(a->output_schema, b->output_schema);
}

/* Whether role is shown the same tools under both policies: run_python or
 * not, and the same code tools, each as MCP lists it. */
static bool listing_same(const struct policy *a, const struct policy *b, const char *role)
{
	const struct policy_role *ra = policy_role_find(a, role), *rb = policy_role_find(b, role);
	size_t ka = 0, kb = 0;

	if (!ra || !rb)
		return !ra && !rb;
	if (ra->run_python != rb->run_python)
		return false;
	for (;;) {
		const struct policy_code_tool *ta = NULL, *tb = NULL;

		for (; ka < policy_code_tool_count(a) && !ta; ka++)
			if (policy_code_tool_allowed(a, role, policy_code_tool_get(a, ka)->name,
						     &ta) != POLICY_OK)
				ta = NULL;
		for (; kb < policy_code_tool_count(b) && !tb; kb++)
			if (policy_code_tool_allowed(b, role, policy_code_tool_get(b, kb)->name,
						     &tb) != POLICY_OK)
				tb = NULL;
		if (!ta || !tb)
			return !ta && !tb;
		if (!tool_same(ta, tb))
			return false;
	}
}

void engine_roles_compare(const struct engine_roles *old, struct engine_roles *now)
{
	for (const struct role *ro = old->list; ro && now->cfg.changed; ro = ro->next) {
		struct appl_err err = {0};
		const char *d = NULL;

		if (ro->tool)
			continue;
		/* A role the new policy has not is not built (its name would be
		 * the old policy's): its clients are told, and refused. */
		if (!ro->name || policy_role_find(now->cfg.policy, ro->name))
			d = engine_roles_view(now, ro->name, NULL, &err);
		if (!d || strcmp(d, ro->description) != 0 ||
		    !listing_same(old->cfg.policy, now->cfg.policy, ro->name))
			now->cfg.changed(now->cfg.data, ro->name);
	}
}
