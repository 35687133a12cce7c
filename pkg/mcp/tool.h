/* tool.h: run_python as MCP shows it, per revision: the tool object, its
 * result, and the text of a progress notification. Pure; exported for the
 * session and its tests.
 */
#ifndef APPL_MCP_TOOL_H
#define APPL_MCP_TOOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "mcp/revision.h"

#define MCP_TOOL_NAME	  "run_python"
#define MCP_PROGRESS_TAIL 512u /* bytes of output a progress message quotes */

/* How a run is doing, for a progress notification. */
struct mcp_progress {
	bool waiting;	     /* no sandbox yet: waiting for a free slot */
	unsigned long calls; /* tool calls made so far */
	const char *out;     /* what it printed so far (kept bytes); may be NULL */
	size_t out_len;
};

/* The tool object of tools/list under rev, with description (borrowed; NULL
 * as ""). inputSchema always; annotations, title and outputSchema
 * (output_schema, borrowed, copied in; NULL: none) where rev has them. New,
 * or NULL on out of memory. */
json_t *mcp_tool_object(const struct mcp_revision *rev, const char *description,
			const json_t *output_schema);

/* A code tool's object of tools/list under rev: name, description,
 * inputSchema; title, annotations (readOnlyHint as read_only says,
 * openWorldHint) and outputSchema (NULL: none) where rev has them. New,
 * or NULL on out of memory. */
json_t *mcp_code_tool_object(const struct mcp_revision *rev, const char *name,
			     const char *description, const json_t *input_schema,
			     const json_t *output_schema, bool read_only);

/* A code tool's tools/call result: value's text (a string as itself,
 * anything else as compact JSON), value as structuredContent when
 * structured and rev has it, then the files as mcp_tool_result adds them.
 * New, or NULL on out of memory. */
json_t *mcp_value_result(const struct mcp_revision *rev, const json_t *value, bool structured,
			 const json_t *files);

/* The URI a file returned by a run is given in its resource: the scheme
 * and the first part; the file's SHA-256 in hex and its name follow. */
#define MCP_FILE_URI_PREFIX "appliance://out/"

/* The tools/call result of a result object (borrowed) under rev: its JSON
 * text, and itself as structuredContent where rev has it; isError as given.
 * Then a content item for each file of files (borrowed, NULL: none; as
 * cell_outcome.files lists them) that was returned: an image as
 * ImageContent, text as an EmbeddedResource with its text, anything else
 * as one with its bytes (blob), its URI MCP_FILE_URI_PREFIX SHA256/NAME.
 * New, or NULL on out of memory. */
json_t *mcp_tool_result(const struct mcp_revision *rev, const json_t *result, bool is_error,
			const json_t *files);

/* {content: [{type: text, text}], isError}. New, or NULL. */
json_t *mcp_tool_text_result(const char *text, bool is_error);

/* The message of a progress notification: what the run is doing, its calls
 * and bytes printed, and the last bytes of its output (at most
 * MCP_PROGRESS_TAIL, starting at a character). New string (free()), or NULL
 * on out of memory. */
char *mcp_progress_message(const struct mcp_progress *p);

#endif
