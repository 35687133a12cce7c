/* outcome.c: a run's typed outcome as the result object, and that
 * object's JSON Schema (see cell.h). */
#include <stdlib.h>

#include "cell/cell.h"

static const char *const reason_names[CELL_REASON_N] = {
	[CELL_RAN] = NULL,
	[CELL_DEADLINE] = "deadline",
	[CELL_OUTPUT] = "output",
	[CELL_PROTOCOL] = "protocol",
	[CELL_MEMORY] = "memory",
	[CELL_BOOT] = "boot",
	[CELL_EXIT] = "exit",
	[CELL_CANCELLED] = "cancelled",
	[CELL_INTERNAL] = "internal",
	[CELL_SIGNAL] = "signal",
};

const char *cell_reason_name(enum cell_reason r)
{
	return (unsigned)r < CELL_REASON_N ? reason_names[r] : "internal";
}

bool cell_outcome_is_error(const struct cell_outcome *o)
{
	return o->error != NULL || o->reason != CELL_RAN;
}

json_t *cell_outcome_json(const struct cell_outcome *o)
{
	const char *reason = cell_reason_name(o->reason);

	return json_pack("{s:s%,s:s?,s:O?,s:b,s:b,s:s?,s:I,s:I}", "stdout", o->out, o->out_len,
			 "error", o->error, "result", o->value, "truncated", o->truncated,
			 "stopped", o->reason != CELL_RAN, "reason", reason, "calls",
			 (json_int_t)o->calls, "duration_ms", (json_int_t)o->duration_ms);
}

static json_t *schema_build(void)
{
	json_t *reasons = json_array();
	json_t *s;

	for (int r = 0; reasons && r < CELL_REASON_N; r++)
		json_array_append_new(reasons,
				      reason_names[r] ? json_string(reason_names[r]) : json_null());
	s = json_pack("{s:s,s:{"
		      "s:{s:s,s:s},s:{s:[ss],s:s},s:{s:s},s:{s:s},s:{s:s},"
		      "s:{s:o,s:s},s:{s:s,s:i},s:{s:s,s:i}},"
		      "s:[ssssssss],s:b}",
		      "type", "object", "properties", "stdout", "type", "string", "description",
		      "what the program printed", "error", "type", "string", "null", "description",
		      "the traceback tail when the code raised, the fix for a tool call it "
		      "did not await, or why the run was stopped",
		      "result", "description", "the value of a final expression, or null",
		      "truncated", "type", "boolean", "stopped", "type", "boolean", "reason",
		      "enum", reasons, "description", "null, or why the run was stopped", "calls",
		      "type", "integer", "minimum", 0, "duration_ms", "type", "integer", "minimum",
		      0, "required", "stdout", "error", "result", "truncated", "stopped", "reason",
		      "calls", "duration_ms", "additionalProperties", 0);
	return s;
}

/* A session's run adds its handle, and why the session ended with it
 * (docs/sessions.md); neither is there for a cell of its own. */
static void schema_session_add(json_t *s)
{
	json_t *props = json_object_get(s, "properties");

	json_object_set_new(
		props, "session",
		json_pack("{s:s,s:s}", "type", "string", "description",
			  "the session's handle: pass it as session to run the next cell in the "
			  "same interpreter"));
	json_object_set_new(props, "session_ended",
			    json_pack("{s:[sssssss],s:s}", "enum", "idle", "end", "max_cells",
				      "memory", "died", "reload", "closed", "description",
				      "the session ended with this cell, and why"));
}

const json_t *cell_outcome_schema(void)
{
	/* Built on first use, from the one loop's thread, and kept. */
	static json_t *schema;

	if (!schema && (schema = schema_build()))
		schema_session_add(schema);
	return schema;
}
