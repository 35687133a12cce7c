/* tool.c: run_python's tool object, results and progress text (see tool.h). */
#define _GNU_SOURCE
#include "mcp/tool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"

/* What rev adds to tool object t (stolen): annotations, title and
 * outputSchema (NULL: none). t, or NULL on out of memory. */
static json_t *tool_dress(json_t *t, const struct mcp_revision *rev, const char *title,
			  bool read_only, const json_t *output_schema)
{
	int bad = !t;

	if (!bad && mcp_revision_has(rev, MCP_HAS_TOOL_ANNOTATIONS))
		bad |= json_object_set_new(t, "annotations",
					   json_pack("{s:s,s:b,s:b}", "title", title,
						     "readOnlyHint", read_only, "openWorldHint",
						     1));
	if (!bad && mcp_revision_has(rev, MCP_HAS_STRUCTURED)) {
		bad |= json_object_set_new(t, "title", json_string(title));
		if (output_schema)
			bad |= json_object_set_new(t, "outputSchema",
						   json_deep_copy(output_schema));
	}
	/* Every tool may run as a task (docs/tasks.md); the 2026-07-28
	 * extension has the server decide, so says nothing per tool. */
	if (!bad && mcp_revision_has(rev, MCP_HAS_TASKS))
		bad |= json_object_set_new(t, "execution",
					   json_pack("{s:s}", "taskSupport", "optional"));
	if (bad) {
		json_decref(t);
		return NULL;
	}
	return t;
}

json_t *mcp_tool_object(const struct mcp_revision *rev, const char *description,
			const json_t *output_schema)
{
	json_t *t = json_pack(
		"{s:s,s:s,s:{s:s,s:{s:{s:s,s:s,s:I},s:{s:s,s:s},s:{s:s,s:s}},s:b}}", "name",
		MCP_TOOL_NAME, "description", description ? description : "", "inputSchema", "type",
		"object", "properties", "code", "type", "string", "description",
		"The Python program to run (top-level await works).", "maxLength",
		(json_int_t)APPL_CELL_CODE_MAX, "session", "type", "string", "description",
		"Where the role allows sessions: \"new\" keeps this cell's interpreter and "
		"returns its handle; a handle runs the cell in that interpreter, with its "
		"variables, imports and files. Left out: a fresh sandbox.",
		"end", "type", "boolean", "description",
		"With a session's handle and no code: end that session.", "additionalProperties",
		0);

	return tool_dress(t, rev, "Run Python", false, output_schema);
}

json_t *mcp_code_tool_object(const struct mcp_revision *rev, const char *name,
			     const char *description, const json_t *input_schema,
			     const json_t *output_schema, bool read_only)
{
	json_t *t = json_pack("{s:s,s:s,s:O}", "name", name, "description", description,
			      "inputSchema", input_schema);

	return tool_dress(t, rev, name, read_only, output_schema);
}

json_t *mcp_tool_text_result(const char *text, bool is_error)
{
	return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError",
			 is_error);
}

/* A session's handle, in a line the model reads: how to go on. */
static int session_line(json_t *res, const json_t *result)
{
	const char *h = json_string_value(json_object_get(result, "session"));
	const char *ended = json_string_value(json_object_get(result, "session_ended"));
	char line[320];

	if (!h)
		return 0;
	if (ended)
		snprintf(line, sizeof(line),
			 "Session %s has ended (%s); start another with session: \"new\".", h,
			 ended);
	else
		snprintf(line, sizeof(line),
			 "Session %s is kept: pass session: \"%s\" to run the next cell in this "
			 "interpreter, or {session: \"%s\", end: true} to end it.",
			 h, h, h);
	return json_array_append_new(json_object_get(res, "content"),
				     json_pack("{s:s,s:s}", "type", "text", "text", line));
}

/* A file returned, as a content item. Its type was judged on the host
 * from its bytes: an image is shown as one, text is given as text (an SVG
 * or an HTML page among it, never rendered), the rest as bytes. */
static json_t *file_item(const json_t *f)
{
	const char *type = json_string_value(json_object_get(f, "type"));
	const json_t *text = json_object_get(f, "text"), *data = json_object_get(f, "data");
	char *uri;
	json_t *item;

	if (data && strncmp(type, "image/", 6) == 0)
		return json_pack("{s:s,s:O,s:s}", "type", "image", "data", data, "mimeType", type);
	/* The content's hash keeps a URI from naming two different files. */
	if (asprintf(&uri, "%s%s/%s", MCP_FILE_URI_PREFIX,
		     json_string_value(json_object_get(f, "sha256")),
		     json_string_value(json_object_get(f, "name"))) < 0)
		return NULL;
	item = json_pack("{s:s,s:{s:s,s:s,s:O}}", "type", "resource", "resource", "uri", uri,
			 "mimeType", type, text ? "text" : "blob", text ? text : data);
	free(uri);
	return item;
}

/* After the text item, an item for each file returned (a file left out
 * has a reason, and only its line in the result object). */
static int file_items(json_t *content, const json_t *files)
{
	const json_t *f;
	size_t i;

	json_array_foreach(files, i, f) {
		if (json_object_get(f, "reason"))
			continue;
		if (json_array_append_new(content, file_item(f)) < 0)
			return -1;
	}
	return 0;
}

/* What every tools/call result of ours ends with: structured (NULL: none)
 * as structuredContent where rev has it, then the files. res (stolen), or
 * NULL on out of memory. */
static json_t *result_end(json_t *res, const struct mcp_revision *rev, const json_t *structured,
			  const json_t *files)
{
	if (res &&
	    ((structured && mcp_revision_has(rev, MCP_HAS_STRUCTURED) &&
	      json_object_set_new(res, "structuredContent", json_deep_copy(structured)) < 0) ||
	     file_items(json_object_get(res, "content"), files) < 0)) {
		json_decref(res);
		res = NULL;
	}
	return res;
}

json_t *mcp_tool_result(const struct mcp_revision *rev, const json_t *result, bool is_error,
			const json_t *files)
{
	char *text = json_dumps(result, JSON_COMPACT);
	json_t *res = text ? mcp_tool_text_result(text, is_error) : NULL;

	free(text);
	if (res && session_line(res, result) < 0) {
		json_decref(res);
		return NULL;
	}
	return result_end(res, rev, result, files);
}

json_t *mcp_value_result(const struct mcp_revision *rev, const json_t *value, bool structured,
			 const json_t *files)
{
	char *dump =
		json_is_string(value) ? NULL : json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
	const char *text = json_is_string(value) ? json_string_value(value) : dump;
	json_t *res = text ? mcp_tool_text_result(text, 0) : NULL;

	free(dump);
	return result_end(res, rev, structured ? value : NULL, files);
}

char *mcp_progress_message(const struct mcp_progress *p)
{
	const char *tail = p->out ? p->out : "";
	size_t n = p->out ? p->out_len : 0;
	char *msg;

	if (p->waiting)
		return strdup("waiting for a free sandbox");
	if (n > MCP_PROGRESS_TAIL) {
		tail += n - MCP_PROGRESS_TAIL;
		n = MCP_PROGRESS_TAIL;
	}
	/* Start at a character: skip continuation bytes the cut left. */
	while (n && ((unsigned char)*tail & 0xc0) == 0x80) {
		tail++;
		n--;
	}
	if (asprintf(&msg, "running: %lu call%s, %zu bytes printed%s%.*s", p->calls,
		     p->calls == 1 ? "" : "s", p->out ? p->out_len : 0,
		     n ? (n < p->out_len ? "; output so far ends: " : "; output so far: ") : "",
		     (int)n, tail) < 0)
		return NULL;
	return msg;
}
