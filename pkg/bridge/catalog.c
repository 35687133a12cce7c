/* catalog.c: what one role may see and call (see bridge.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "base/pyname.h"
#include "schema/schema.h"

static int entry_cmp(const void *a, const void *b)
{
	const struct bridge_entry *x = a, *y = b;
	int d = strcmp(x->server, y->server);

	return d ? d : strcmp(x->name, y->name);
}

/* The same order, ties broken by arrival, so the first of twins leads. */
static int entry_cmp_order(const void *a, const void *b)
{
	const struct bridge_entry *x = a, *y = b;
	int d = entry_cmp(a, b);

	if (d)
		return d;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Whether undeclared argument names are refused: the root is a plain object
 * schema with `properties` and says nothing else about names. With
 * additionalProperties or patternProperties it allows what it says (the
 * validator judges); with composition or a $ref at the root the names may be
 * declared elsewhere, so the validator alone decides. */
static bool strict_names(const json_t *schema)
{
	static const char *const open[] = {
		"additionalProperties",
		"patternProperties",
		"unevaluatedProperties",
		"allOf",
		"anyOf",
		"oneOf",
		"not",
		"if",
		"$ref",
		"$dynamicRef",
		"dependentSchemas",
		"dependencies",
		"propertyNames",
		NULL,
	};

	if (!json_is_object(schema) || !json_is_object(json_object_get(schema, "properties")))
		return false;
	for (size_t i = 0; open[i]; i++)
		if (json_object_get(schema, open[i]))
			return false;
	return true;
}

static int entry_fill(struct bridge_entry *e, const struct policy *p,
		      const struct policy_caller *who, const struct bridge_tool_in *t)
{
	struct appl_err serr = {0};
	int rc;

	e->server = strdup(t->server);
	e->name = strdup(t->name);
	e->description = t->description ? strdup(t->description) : NULL;
	if (!e->server || !e->name || (t->description && !e->description))
		return -ENOMEM;
	e->verdict = policy_call_check(p, who, t->server, t->name, t->read_only_hint, &e->access);
	e->metric_tool = policy_tool_named(p, t->server, t->name);
	if (t->output_schema) {
		e->output_schema = json_incref((json_t *)t->output_schema);
		/* A schema the validator cannot read only means results go
		 * unchecked: the tool is still offered. */
		if (schema_new(t->output_schema, &e->out_schema, &serr) == -ENOMEM)
			return -ENOMEM;
	}
	/* A code tool's writes ask as its caller's role's would. */
	e->approval = e->verdict == POLICY_OK &&
		      policy_tool_approval(p, t->server, t->name, who->role, e->access);
	if (!t->input_schema) {
		e->schema_why = strdup("the tool has no input schema");
		return e->schema_why ? 0 : -ENOMEM;
	}
	e->input_schema = json_incref((json_t *)t->input_schema);
	rc = schema_new(t->input_schema, &e->schema, &serr);
	if (rc == -ENOMEM)
		return -ENOMEM;
	if (rc < 0) {
		if (asprintf(&e->schema_why, "its input schema cannot be checked (%s): %s",
			     rc == -ENOTSUP ? "unsupported" : "invalid", serr.msg) < 0) {
			e->schema_why = NULL;
			return -ENOMEM;
		}
		return 0;
	}
	e->strict = strict_names(t->input_schema);
	return 0;
}

static void entry_clear(struct bridge_entry *e)
{
	free(e->server);
	free(e->name);
	free(e->description);
	free(e->schema_why);
	free(e->pyname);
	json_decref(e->input_schema);
	json_decref(e->output_schema);
	schema_free(e->schema);
	schema_free(e->out_schema);
}

/* Each stub's "ns.fn" on its entry, for the messages the code reads. */
static int pynames_set(struct bridge_catalog *c)
{
	for (size_t i = 0; i < stubs_count(c->stubs); i++) {
		const char *mcp = stubs_mcp_name(c->stubs, i), *dot = strchr(mcp, '.');
		char server[APPL_RUNNER_TOOL_NAME_MAX + 1];
		struct bridge_entry *e;

		/* server names have no dot: the first one ends it */
		snprintf(server, sizeof(server), "%.*s", (int)(dot - mcp), mcp);
		e = (struct bridge_entry *)bridge_catalog_find(c, server, dot + 1);
		if (e && asprintf(&e->pyname, "%s.%s", stubs_ns(c->stubs, i),
				  stubs_fn(c->stubs, i)) < 0) {
			e->pyname = NULL;
			return -ENOMEM;
		}
	}
	return 0;
}

/* Offered: allowed, schema compiled, no tasks needed, and names stubs can
 * take. Stand-ins: the rest whose names stubs can take, while there is
 * room beside the offered. */
static int stubs_make(struct bridge_catalog *c, struct appl_err *err)
{
	struct stubs_tool *st = calloc(c->n ? c->n : 1, sizeof(*st));
	size_t k = 0;
	int rc;

	if (!st)
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < c->n; i++) {
			struct bridge_entry *e = &c->e[i];
			struct stubs_tool t = {.server = e->server,
					       .name = e->name,
					       .description = e->description,
					       .input_schema = e->input_schema,
					       .output_schema = e->output_schema,
					       .why_not = bridge_entry_why_not(e)};
			struct appl_err terr = {0};

			if ((pass == 0) != !t.why_not)
				continue;
			if (stubs_tool_check(&t, &terr) < 0) {
				e->name_bad = true;
				continue;
			}
			if (pass == 1 && k >= APPL_RUNNER_TOOLS_MAX)
				continue; /* no room for more stand-ins */
			st[k++] = t;
		}
	rc = stubs_build(st, k, &c->stubs, err);
	free(st);
	if (rc < 0)
		return rc;
	if (pynames_set(c) < 0)
		return appl_err_set(err, -ENOMEM, "out of memory");
	c->runner_tools = stubs_runner_tools(c->stubs, err);
	return c->runner_tools ? 0 : err->code;
}

static bool has_entries(const struct bridge_catalog *c, const char *server)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->e[i].server, server) == 0)
			return true;
	return false;
}

static bool ns_taken(const json_t *runner_tools, const char *ns)
{
	const json_t *t;
	size_t i;

	json_array_foreach(runner_tools, i, t) {
		if (strcmp(json_string_value(json_object_get(t, "ns")), ns) == 0)
			return true;
	}
	return false;
}

/* Each server with no tool here gets a namespace in the cell all the same
 * (a runner "server" entry): its calls reach the bridge, which says the
 * server is not available, rather than the code failing on a name. */
static int absent_add(struct bridge_catalog *c, const struct policy *p, struct appl_err *err)
{
	size_t n = policy_server_count(p);

	if (!(c->absent = calloc(n ? n : 1, sizeof(*c->absent))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *name = policy_server_get(p, i)->name;
		json_t *e;

		if (has_entries(c, name))
			continue;
		if (!(c->absent[c->nabsent] = strdup(name)))
			return appl_err_set(err, -ENOMEM, "out of memory");
		c->nabsent++;
		if (appl_py_keyword(name) || appl_py_reserved(name) ||
		    ns_taken(c->runner_tools, name))
			continue; /* no namespace of that name: its calls cannot be written */
		e = json_pack("{s:s, s:s}", "server", name, "ns", name);
		if (!e || json_array_append_new(c->runner_tools, e) < 0)
			return appl_err_set(err, -ENOMEM, "out of memory");
	}
	if (stubs_set_unavailable(c->stubs, (const char *const *)c->absent, c->nabsent) < 0)
		return appl_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int readable_add(struct bridge_catalog *c, const struct policy *p,
			const struct policy_caller *who, struct appl_err *err)
{
	size_t n = policy_server_count(p);

	if (!(c->readable = calloc(n ? n : 1, sizeof(*c->readable))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const char *name = policy_server_get(p, i)->name;

		if (!policy_call_resources(p, who, name))
			continue;
		if (!(c->readable[c->nreadable] = strdup(name)))
			return appl_err_set(err, -ENOMEM, "out of memory");
		c->nreadable++;
	}
	return 0;
}

const char *bridge_catalog_reader(const struct bridge_catalog *c, const char *server)
{
	for (size_t i = 0; server && i < c->nreadable; i++)
		if (strcmp(c->readable[i], server) == 0)
			return c->readable[i];
	return NULL;
}

const char *bridge_catalog_ns(const struct bridge_catalog *c, const char *server)
{
	size_t n = strlen(server);

	for (size_t i = 0; i < stubs_count(c->stubs); i++) {
		const char *mcp = stubs_mcp_name(c->stubs, i);
		if (strncmp(mcp, server, n) == 0 && mcp[n] == '.')
			return stubs_ns(c->stubs, i);
	}
	return NULL;
}

const char *bridge_catalog_pyname(const struct bridge_catalog *c, const char *server,
				  const char *name)
{
	const struct bridge_entry *e = bridge_catalog_find(c, server, name);

	return e ? e->pyname : NULL;
}

bool bridge_catalog_absent(const struct bridge_catalog *c, const char *server)
{
	for (size_t i = 0; i < c->nabsent; i++)
		if (strcmp(c->absent[i], server) == 0)
			return true;
	return false;
}

int bridge_catalog_new(const struct policy *p, const char *role, const struct bridge_tool_in *tools,
		       size_t n, struct bridge_catalog **out, struct appl_err *err)
{
	struct policy_caller who = {.role = role};

	return bridge_catalog_for(p, &who, tools, n, out, err);
}

int bridge_catalog_for(const struct policy *p, const struct policy_caller *who,
		       const struct bridge_tool_in *tools, size_t n, struct bridge_catalog **out,
		       struct appl_err *err)
{
	struct bridge_catalog *c = calloc(1, sizeof(*c));
	size_t k = 0;

	*out = NULL;
	if (!c || !(c->e = calloc(n ? n : 1, sizeof(*c->e)))) {
		free(c);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	c->refs = 1;
	for (size_t i = 0; i < n; i++) {
		if (!tools[i].server || !tools[i].name)
			continue;
		c->e[k].order = i;
		if (entry_fill(&c->e[k], p, who, &tools[i]) < 0) {
			c->n = k + 1;
			bridge_catalog_unref(c);
			return appl_err_set(err, -ENOMEM, "out of memory");
		}
		k++;
	}
	c->n = k;
	qsort(c->e, c->n, sizeof(*c->e), entry_cmp_order);
	/* A (server, name) given twice: keep the first given. */
	k = c->n ? 1 : 0;
	for (size_t i = 1; i < c->n; i++) {
		if (entry_cmp(&c->e[i], &c->e[k - 1]) == 0)
			entry_clear(&c->e[i]);
		else
			c->e[k++] = c->e[i];
	}
	c->n = k;
	if (stubs_make(c, err) < 0 || absent_add(c, p, err) < 0 ||
	    readable_add(c, p, who, err) < 0) {
		bridge_catalog_unref(c);
		return err->code;
	}
	*out = c;
	return 0;
}

struct bridge_catalog *bridge_catalog_ref(struct bridge_catalog *c)
{
	if (c)
		c->refs++;
	return c;
}

void bridge_catalog_unref(struct bridge_catalog *c)
{
	if (!c || --c->refs > 0)
		return;
	for (size_t i = 0; i < c->n; i++)
		entry_clear(&c->e[i]);
	free(c->e);
	stubs_free(c->stubs);
	json_decref(c->runner_tools);
	for (size_t i = 0; i < c->nabsent; i++)
		free(c->absent[i]);
	free(c->absent);
	for (size_t i = 0; i < c->nreadable; i++)
		free(c->readable[i]);
	free(c->readable);
	free(c);
}

const struct stubs *bridge_catalog_stubs(const struct bridge_catalog *c)
{
	return c->stubs;
}

const json_t *bridge_catalog_runner_tools(const struct bridge_catalog *c)
{
	return c->runner_tools;
}

size_t bridge_catalog_count(const struct bridge_catalog *c)
{
	return c->n;
}

const char *bridge_entry_why_not(const struct bridge_entry *e)
{
	if (e->verdict != POLICY_OK)
		return policy_verdict_text(e->verdict);
	if (!e->schema)
		return e->schema_why;
	if (e->name_bad)
		return "its name cannot become a Python name";
	return NULL;
}

int bridge_catalog_info(const struct bridge_catalog *c, size_t i, struct bridge_tool_info *out)
{
	if (i >= c->n)
		return -ENOENT;
	out->server = c->e[i].server;
	out->name = c->e[i].name;
	out->why_not = bridge_entry_why_not(&c->e[i]);
	return 0;
}

const struct bridge_entry *bridge_catalog_find(const struct bridge_catalog *c, const char *server,
					       const char *name)
{
	struct bridge_entry key = {.server = (char *)server, .name = (char *)name};

	if (!c->n)
		return NULL;
	return bsearch(&key, c->e, c->n, sizeof(*c->e), entry_cmp);
}
