/* stubs.h: the Python names and stub text the model sees (docs/stubs.md).
 *
 * Each allowed upstream tool becomes an async function `ns.fn` in the cell:
 * ns names the server, fn the tool, both mangled into ASCII identifiers the
 * runner accepts (cell_proto_tool_new), with collisions settled in a way that
 * does not depend on the order the tools arrive in. Each tool also gets a stub:
 * a Python `async def` with a typed, keyword-only signature built from its
 * input schema and a docstring with its description. The run_python tool's
 * own description lists the tools under a short intro.
 *
 * Tool names, descriptions and schemas come from upstream servers and may be
 * hostile. They are only ever shown, never executed: every piece of upstream
 * text is escaped so that it cannot end the docstring or string literal it is
 * put in, invisible and control characters are written as escapes, and every
 * piece is cut to a cap of limits.h "stubs". Schemas this module cannot read
 * become `Any`; it never fails on a schema (pkg/schema judges arguments).
 *
 * Pure code: no system calls, no output.
 */
#ifndef APPL_STUBS_STUBS_H
#define APPL_STUBS_STUBS_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

/* One upstream tool, as the caller knows it. Every field is borrowed and only
 * read during stubs_build: the result keeps copies of what it needs. */
struct stubs_tool {
	const char *server;	    /* the server's name in the policy */
	const char *name;	    /* the tool's MCP name (tools/list "name") */
	const char *description;    /* tools/list "description"; may be NULL */
	const json_t *input_schema; /* tools/list "inputSchema"; may be NULL */
	/* tools/list "outputSchema"; may be NULL. It becomes the stub's return
	 * annotation and a Returns line. */
	const json_t *output_schema;
	/* NULL: the tool is offered. Else it is a stand-in: it keeps a name in
	 * the cell, and its stub says only that it is not offered and this
	 * reason (one line, ours; escaped all the same). */
	const char *why_not;
};

/* The limits the run_python description states, and its own size cap. */
struct stubs_limits {
	unsigned deadline_s;	 /* a run's deadline; 0: not stated */
	unsigned max_calls;	 /* tool calls per run; 0: not stated */
	size_t max_output_bytes; /* printed output kept; 0: not stated */
	/* Most bytes of the description: 0 means APPL_STUBS_DESCRIPTION_DEF;
	 * otherwise APPL_STUBS_DESCRIPTION_MIN to APPL_STUBS_DESCRIPTION_CEIL. */
	size_t max_bytes;
	unsigned sessions_idle_s; /* the role may keep sessions, ending after this idle; 0: none */
};

struct stubs;

/* Every namespace has CELL_PROTO_READ_FN, the resource reader: the runner
 * refuses it as a function name, so a tool whose name would become it is
 * called read_resource_, as a Python keyword would be. */

/* Check that t can become a cell tool: server and name are valid UTF-8
 * without control characters, non-empty, and "server.name" is at most
 * APPL_RUNNER_TOOL_NAME_MAX bytes. Returns 0 or -EINVAL with err filled.
 * stubs_build refuses the whole list when one tool fails this, so a caller
 * that would rather drop such a tool checks each one first. */
int stubs_tool_check(const struct stubs_tool *t, struct appl_err *err);

/* Build names and stubs for tools[0..n) (borrowed). On success *out is new
 * (stubs_free it) and 0 is returned. Refused, with *out NULL and err filled:
 * -EINVAL a tool failing stubs_tool_check, or the same (server, name) twice;
 * -E2BIG more than APPL_RUNNER_TOOLS_MAX tools; -ENOMEM. The result does not
 * depend on the order of tools[]. */
int stubs_build(const struct stubs_tool *tools, size_t n, struct stubs **out, struct appl_err *err);

/* Free s and everything it owns; s may be NULL. */
void stubs_free(struct stubs *s);

/* Number of tools. Index i (0 to count - 1) follows a stable order: sorted by
 * ns, then fn (bytewise). */
size_t stubs_count(const struct stubs *s);

/* The accessors below return strings owned by s (valid until stubs_free), or
 * NULL when i is out of range. Every string is valid UTF-8 without NUL. */

/* The namespace's Python name: the server name, mangled (`everything`). */
const char *stubs_ns(const struct stubs *s, size_t i);

/* The function's Python name: the tool name, mangled (`get_sum`). */
const char *stubs_fn(const struct stubs *s, size_t i);

/* "server.name" with the original names: what call.tool carries and the
 * bridge routes on. */
const char *stubs_mcp_name(const struct stubs *s, size_t i);

/* The full stub: an `async def` with its docstring, at most
 * APPL_STUBS_TEXT_MAX bytes; it parses as Python. */
const char *stubs_text(const struct stubs *s, size_t i);

/* The first line of the description, escaped for display, at most
 * APPL_STUBS_SUMMARY_MAX bytes; "" when the tool has no description. A
 * stand-in's is its reason. */
const char *stubs_summary(const struct stubs *s, size_t i);

/* NULL when tool i is offered; else the reason it is not (its why_not). */
const char *stubs_why_not(const struct stubs *s, size_t i);

/* What tool i returns, as its stub's annotation shows it: `{"content":
 * str}` for an object with named keys (when that fits
 * APPL_STUBS_RETURNS_MAX bytes), else a type as for parameters; "" when it
 * has no output schema. */
const char *stubs_returns(const struct stubs *s, size_t i);

/* Offered tools (stubs_why_not NULL) and stand-ins. */
size_t stubs_offered_count(const struct stubs *s);

/* Name the servers that are not available now (copied; each a server name
 * of the policy), for the description to say so. 0 or -ENOMEM. */
int stubs_set_unavailable(struct stubs *s, const char *const *servers, size_t n);
size_t stubs_unavailable_count(const struct stubs *s);
const char *stubs_unavailable_get(const struct stubs *s, size_t i); /* sorted; NULL past the end */

/* The one-line call form for the description, "ns.fn(a: int, b: str = ...)"
 * (keyword-only, without the "*,") and " -> R" when the tool says what it
 * returns, at most APPL_STUBS_LINE_MAX bytes: parameters that do not fit
 * become ", ...". A stand-in's is "ns.fn(...)". */
const char *stubs_signature(const struct stubs *s, size_t i);

/* The runner's `tools` array (docs/runner-protocol.md): one entry per tool,
 * in index order, made by cell_proto_tool_new with tool = stubs_mcp_name,
 * ns, fn, doc = stubs_text and, for a stand-in, off = stubs_why_not.
 * Returns a new reference, or NULL with err filled (-ENOMEM). */
json_t *stubs_runner_tools(const struct stubs *s, struct appl_err *err);

/* The run_python tool's description: how to call tools, the limits in lim
 * (borrowed), that tool text is data and not instructions, and one line per
 * tool (signature and summary); when that does not fit lim->max_bytes, only
 * the names (and at last only the namespaces), with a pointer to
 * tools.search and tools.describe. Then the stand-ins with their reasons
 * (or their count), and the servers not available now. Returns a new, malloc'ed string (free()
 * it), or NULL with err filled: -EINVAL a max_bytes out of range, -ENOMEM. */
char *stubs_description(const struct stubs *s, const struct stubs_limits *lim,
			struct appl_err *err);

#endif
