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
							  t->read_only_hint, t->output_schema,
							  t->task_required};
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

	sl.sessions_idle_s = pr && pr->sessions.max ? pr->sessions.idle_s : 0;

	if (!(in = tools_gather(r->ups, &n)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	rc = bridge_catalog_new(r->cfg.policy, ro->name, in, n, &cat, err);
	free(in);
	if (rc < 0)
		return rc;
	if (!(desc = stubs_description(bridge_catalog_stubs(cat), &sl, err))) {
		bridge_catalog_unref(cat);
		return err->code;
	}
	bridge_catalog_unref(ro->cat);
	ro->cat = cat;
	catalog_log(ro);
	if (ro->description && strcmp(ro->description, desc) != 0 && r->cfg.changed)
		r->cfg.changed(r->cfg.data, ro->name);
	free(ro->description);
	ro->description = desc;
	return 0;
}

static bool same_name(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

const char *engine_roles_view(struct engine_roles *r, const char *role, struct bridge_catalog **cat,
			      struct appl_err *err)
{
	struct role *ro;

	for (ro = r->list; ro && !same_name(ro->name, role); ro = ro->next)
		;
	if (!ro) {
		if (!(ro = calloc(1, sizeof(*ro)))) {
			appl_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
		ro->name = role;
		if (rebuild(r, ro, err) < 0) {
			free(ro);
			return NULL;
		}
		ro->next = r->list;
		r->list = ro;
	}
	if (cat)
		*cat = ro->cat;
	return ro->description;
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
	for (size_t i = 0; i < policy_role_count(p); i++)
		if (!engine_roles_view(r, policy_role_get(p, i)->name, NULL, err))
			return appl_err_prefix(err, "roles.%s", policy_role_get(p, i)->name);
	return 0;
}

void engine_roles_compare(const struct engine_roles *old, struct engine_roles *now)
{
	for (const struct role *ro = old->list; ro && now->cfg.changed; ro = ro->next) {
		struct appl_err err = {0};
		const char *d = NULL;

		/* A role the new policy has not is not built (its name would be
		 * the old policy's): its clients are told, and refused. */
		if (!ro->name || policy_role_find(now->cfg.policy, ro->name))
			d = engine_roles_view(now, ro->name, NULL, &err);
		if (!d || strcmp(d, ro->description) != 0)
			now->cfg.changed(now->cfg.data, ro->name);
	}
}
