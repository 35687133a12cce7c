/* revision.h: the MCP revisions the appliance speaks, in one table shared by
 * the server its clients talk to (pkg/mcp/session.c) and the client it talks
 * to upstream servers with (pkg/upstream).
 *
 * Two eras. A legacy revision (2025-11-25 and before) is chosen once per
 * connection by initialize; the modern one (2026-07-28) is named in every
 * request's _meta, with no handshake. Each revision says what it has; the
 * server shapes every result by these bits, never by comparing names.
 */
#ifndef APPL_MCP_REVISION_H
#define APPL_MCP_REVISION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum mcp_era {
	MCP_ERA_LEGACY = 1, /* initialize, then a session */
	MCP_ERA_MODERN = 2, /* per-request _meta, stateless */
};

/* What a revision has, as bits of mcp_revision.has. */
enum {
	MCP_HAS_TOOL_ANNOTATIONS = 1u << 0, /* Tool.annotations (2025-03-26) */
	MCP_HAS_PROGRESS_MESSAGE = 1u << 1, /* notifications/progress message (2025-03-26) */
	MCP_HAS_STRUCTURED = 1u << 2,  /* outputSchema, structuredContent, title (2025-06-18) */
	MCP_HAS_RESULT_TYPE = 1u << 3, /* resultType on every result (2026-07-28) */
	MCP_HAS_CACHE_HINTS = 1u << 4, /* ttlMs and cacheScope on lists (2026-07-28) */
	MCP_HAS_RESULT_META_INFO = 1u << 5, /* serverInfo in each result's _meta (2026-07-28) */
	MCP_HAS_ELICITATION = 1u << 6,	    /* elicitation/create, server to client (2025-06-18) */
	MCP_HAS_ELICIT_MODE = 1u << 7,	    /* elicitation params.mode (2025-11-25) */
	MCP_HAS_INPUT_REQUIRED = 1u << 8,   /* InputRequiredResult, requestState (2026-07-28) */
	MCP_HAS_SET_LEVEL = 1u << 9,	    /* logging/setLevel (2024-11-05 to 2025-11-25) */
	MCP_HAS_TASKS = 1u << 10, /* params.task, tasks/get, result, list, cancel (2025-11-25) */
};

struct mcp_revision {
	const char *name; /* "2026-07-28" */
	enum mcp_era era;
	unsigned has;
};

/* The revision named name (NUL-terminated), or NULL: unknown, or not of an
 * era in eras (a mask of enum mcp_era). */
const struct mcp_revision *mcp_revision_find(const char *name, unsigned eras);

/* The newest revision of era. */
const struct mcp_revision *mcp_revision_latest(enum mcp_era era);

/* A new array of the names of every revision of the eras in mask, newest
 * first (the "supported" lists of discover and of version errors). NULL on
 * out of memory. */
json_t *mcp_revision_names(unsigned eras);

static inline bool mcp_revision_has(const struct mcp_revision *r, unsigned bits)
{
	return (r->has & bits) == bits;
}

#endif
