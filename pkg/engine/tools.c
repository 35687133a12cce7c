/* tools.c: the code tools (docs/code-tools.md): what a role is listed, and
 * a call of one, a run of its program under its uses. */
#include "engine/engine.h"
#include "engine/internal.h"

#include <stdio.h>

#include "engine/roles.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "schema/schema.h"
#include "upstream/set.h"

size_t engine_role_code_tools(const struct engine *e, const char *role,
			      const struct policy_code_tool **out, size_t cap)
{
	const struct policy *p = e->policy;
	size_t n = 0;

	for (size_t i = 0; p && i < policy_code_tool_count(p) && n < cap; i++)
		if (policy_code_tool_allowed(p, role, policy_code_tool_get(p, i)->name, &out[n]) ==
		    POLICY_OK)
			n++;
	return n;
}

/* Why client may not call the code tool name with args now (answered
 * with it), or NULL with *t the tool and *cat its program's catalog. */
static const char *tool_refusal(struct engine *e, const char *name, const json_t *args,
				const struct run_client *client, const struct policy_code_tool **t,
				struct bridge_catalog **cat, const char **reason, char *why,
				char *logged, size_t cap)
{
	enum policy_verdict v = policy_code_tool_allowed(e->policy, client->role, name, t);
	struct appl_err err = {0};
	const char *kw = NULL;
	size_t size;

	*reason = v == POLICY_OK ? "arguments" : "not_allowed";
	if (v != POLICY_OK) {
		snprintf(why, cap, "%s: %s", name, policy_verdict_text(v));
		return why;
	}
	/* Before any sandbox: arguments the program was not written for
	 * never reach it, nor more than one of its calls may carry. */
	size = json_dumpb(args, NULL, 0, JSON_COMPACT);
	if (size > e->lim.max_args_bytes) {
		snprintf(why, cap,
			 "%s: the arguments are %zu bytes of JSON, over the cap of %u "
			 "(limits.max_args_bytes)",
			 name, size, e->lim.max_args_bytes);
		return why;
	}
	if (schema_validate_kw((*t)->input, args, &err, &kw) < 0) {
		snprintf(why, cap, "%s: the arguments do not match its input_schema: %s", name,
			 err.msg);
		/* The audit log gets the keyword, never a name the client sent. */
		snprintf(logged, cap, "%s: the arguments do not match its input_schema (%s)", name,
			 kw ? kw : "a cap");
		return why;
	}
	if (e->ups && !(*cat = engine_roles_tool_view(e->roles, client->role, *t, &err))) {
		log_line(LOG_ERR, NULL, "the tool list of code tool %s could not be built: %s",
			 name, err.msg);
		*reason = "host_fault";
		return "the run could not start: host fault";
	}
	return NULL;
}

/* A run of t's program with args, its calls through cat. */
static struct run *program_run(struct engine *e, const struct policy_code_tool *t,
			       const struct run_client *c, struct bridge_catalog *cat)
{
	struct appl_err err = {0};
	struct run *r;

	if (e->ups)
		upstream_set_wake(e->ups);
	e->gen->runs++;
	if (!(r = run_new(e->runs, t->code, t->code_len, c, cat, e->gen, &err))) {
		e->gen->runs--;
		c->answer(c->c, NULL, true, "out of memory", NULL);
	}
	return r;
}

struct run *engine_run_tool(struct engine *e, const char *name, const json_t *args,
			    const struct run_client *client, unsigned waiting_cap,
			    unsigned total_cap)
{
	const struct policy_code_tool *t = NULL;
	struct bridge_catalog *cat = NULL;
	struct run_client c = *client;
	const char *no, *reason = "host_fault";
	json_t *empty = NULL;
	char why[640], logged[640] = "";
	struct run *r = NULL;

	e->served++;
	if (!args)
		args = empty = json_object();
	if (!args || !e->policy)
		no = "the run could not start: host fault";
	else if (!(no = engine_run_refusal(e, client, waiting_cap, total_cap, &reason, why,
					   sizeof(why))))
		no = tool_refusal(e, name, args, client, &t, &cat, &reason, why, logged,
				  sizeof(why));
	c.tool = t;
	c.args = args;
	if (no) {
		metrics_cell("refused", reason, false, 0);
		run_set_refuse_logged(e->runs, &c, no, logged[0] ? logged : no);
	} else {
		r = program_run(e, t, &c, cat);
	}
	json_decref(empty);
	return r;
}

struct run *engine_run_program(struct engine *e, const struct policy_code_tool *t,
			       const json_t *args, const struct run_client *client,
			       struct bridge_catalog *cat)
{
	struct appl_err err = {0};
	struct run_client c = *client;
	json_t *empty = args ? NULL : json_object();
	struct run *r = NULL;

	c.tool = t;
	c.args = args ? args : empty;
	e->served++;
	if (!c.args || schema_validate(t->input, c.args, &err) < 0)
		run_set_refuse(e->runs, &c, c.args ? err.msg : "out of memory");
	else
		r = program_run(e, t, &c, cat);
	json_decref(empty);
	return r;
}
