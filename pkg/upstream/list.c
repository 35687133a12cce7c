/* list.c: the pages of a tools/list (see core.h): each tool checked and
 * copied, the pages, their bytes and their cursors bounded, so a hostile
 * server can neither page for ever nor hand over a list that would be
 * anybody's guess. */
#define _GNU_SOURCE
#include "upstream/core.h"

#include <stdlib.h>
#include <string.h>

void upstream_tools_free(struct upstream_tool *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free((char *)t[i].name);
		free((char *)t[i].description);
		json_decref((json_t *)t[i].input_schema);
		json_decref((json_t *)t[i].output_schema);
	}
	free(t);
}

void upstream_listing_reset(struct listing *l)
{
	upstream_tools_free(l->tools, l->n);
	for (unsigned i = 0; i < l->pages && i < APPL_UPSTREAM_PAGES_MAX; i++)
		free(l->cursors[i]);
	memset(l, 0, sizeof(*l));
}

/* Why tool t cannot be taken, or NULL. */
static const char *tool_check(const json_t *t)
{
	const char *name = json_string_value(json_object_get(t, "name"));
	const json_t *desc = json_object_get(t, "description");
	size_t len = name ? strlen(name) : 0;

	if (!json_is_object(t))
		return "not an object";
	if (!name || len == 0 || len > APPL_UPSTREAM_TOOL_NAME_MAX)
		return "no name, or a name longer than the cap";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return "a control character in its name";
	if (!json_is_object(json_object_get(t, "inputSchema")))
		return "inputSchema is not an object";
	if (desc && !json_is_string(desc) && !json_is_null(desc))
		return "description is not a string";
	return NULL;
}

/* Tool t's outputSchema when it is an object, else NULL: one that is
 * something else (but null, which is none) is logged and left out, the
 * tool taken without it. */
static const json_t *tool_output_schema(const struct upstream *u, const json_t *t, size_t idx)
{
	const json_t *os = json_object_get(t, "outputSchema");

	if (json_is_object(os))
		return os;
	if (os && !json_is_null(os))
		ulog(u, LOG_WARN,
		     "tools/list: tool %zu of page %u: outputSchema is not an object; ignored", idx,
		     u->list.pages);
	return NULL;
}

/* MCP tasks: what a tool says of them (execution.taskSupport), or NULL. */
static const char *task_support(const json_t *t)
{
	return json_string_value(json_object_get(json_object_get(t, "execution"), "taskSupport"));
}

/* MCP tasks: a tool the server runs only as a task says so. */
static bool tool_task_required(const json_t *t)
{
	const char *ts = task_support(t);

	return ts && strcmp(ts, "required") == 0;
}

/* Add tool t of the page to the listing: 0 (taken or skipped), or -1 when
 * the whole list must be refused (why set). */
static int tool_take(struct upstream *u, const json_t *t, size_t idx, const char **why)
{
	struct listing *l = &u->list;
	const char *bad = tool_check(t), *name, *desc;

	if (!bad && u->tp->tool_check)
		bad = u->tp->tool_check(u->t, t);
	struct upstream_tool *tool;

	if (bad) {
		ulog(u, LOG_WARN, "tools/list: skipped tool %zu of page %u: %s", idx, l->pages,
		     bad);
		return 0;
	}
	name = json_string_value(json_object_get(t, "name"));
	/* Two tools of one name: which schema and which policy entry would
	 * apply is anybody's guess, so the list is refused. */
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->tools[i].name, name) == 0)
			return *why = "two tools have the same name", -1;
	if (l->n == APPL_UPSTREAM_TOOLS_MAX)
		return *why = "more tools than the cap", -1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct upstream_tool *p = realloc(l->tools, cap * sizeof(*p));

		if (!p)
			return *why = "out of memory", -1;
		l->tools = p;
		l->cap = cap;
	}
	tool = &l->tools[l->n];
	desc = json_string_value(json_object_get(t, "description"));
	tool->name = strdup(name);
	tool->description = desc ? strdup(desc) : NULL;
	tool->input_schema = json_incref(json_object_get(t, "inputSchema"));
	tool->output_schema = json_incref((json_t *)tool_output_schema(u, t, idx));
	tool->read_only_hint =
		json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint"));
	tool->task_required = tool_task_required(t);
	tool->task_optional = task_support(t) && strcmp(task_support(t), "optional") == 0;
	l->n++;
	if (!tool->name || (desc && !tool->description))
		return *why = "out of memory", -1;
	return 0;
}

/* The next cursor: 0 and *next (NULL at the end), or -1 with *why. */
static int cursor_take(struct upstream *u, const json_t *c, const char **next, const char **why)
{
	struct listing *l = &u->list;
	const char *s = json_string_value(c);

	*next = NULL;
	if (!c || json_is_null(c))
		return 0;
	if (!s || json_string_length(c) > APPL_UPSTREAM_CURSOR_MAX)
		return *why = "nextCursor is not a string, or longer than the cap", -1;
	if (l->pages >= APPL_UPSTREAM_PAGES_MAX)
		return *why = "more pages than the cap", -1;
	/* A server that hands back a cursor it gave before would page for
	 * ever: refuse the loop rather than count on the page cap alone. */
	for (unsigned i = 0; i < l->pages - 1; i++)
		if (strcmp(l->cursors[i], s) == 0)
			return *why = "a cursor came back", -1;
	l->cursors[l->pages - 1] = strdup(s);
	if (!l->cursors[l->pages - 1])
		return *why = "out of memory", -1;
	*next = l->cursors[l->pages - 1];
	return 0;
}

int upstream_list_page(struct upstream *u, const json_t *result, size_t len, const char **next,
		       const char **why)
{
	struct listing *l = &u->list;
	const json_t *tools = json_object_get(result, "tools");
	size_t i;
	json_t *t;

	*why = NULL;
	l->pages++;
	l->bytes += len;
	if (l->bytes > APPL_UPSTREAM_LIST_BYTES_MAX)
		*why = "the pages are larger than the cap";
	else if (!json_is_array(tools))
		*why = "the result has no tools array";
	json_array_foreach(tools, i, t) {
		if (*why || tool_take(u, t, i, why) < 0)
			break;
	}
	if (*why)
		return -1;
	return cursor_take(u, json_object_get(result, "nextCursor"), next, why);
}
