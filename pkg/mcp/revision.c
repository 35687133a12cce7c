/* revision.c: the MCP revision table (see revision.h). */
#include "mcp/revision.h"

#include <string.h>

#define LEGACY_2025_06 (MCP_HAS_TOOL_ANNOTATIONS | MCP_HAS_PROGRESS_MESSAGE | MCP_HAS_STRUCTURED)
#define LEGACY	       MCP_HAS_SET_LEVEL

static const struct mcp_revision table[] = {
	{"2026-07-28", MCP_ERA_MODERN,
	 LEGACY_2025_06 | MCP_HAS_RESULT_TYPE | MCP_HAS_CACHE_HINTS | MCP_HAS_RESULT_META_INFO |
		 MCP_HAS_ELICIT_MODE | MCP_HAS_INPUT_REQUIRED},
	{"2025-11-25", MCP_ERA_LEGACY,
	 LEGACY | LEGACY_2025_06 | MCP_HAS_ELICITATION | MCP_HAS_ELICIT_MODE | MCP_HAS_TASKS},
	{"2025-06-18", MCP_ERA_LEGACY, LEGACY | LEGACY_2025_06 | MCP_HAS_ELICITATION},
	{"2025-03-26", MCP_ERA_LEGACY,
	 LEGACY | MCP_HAS_TOOL_ANNOTATIONS | MCP_HAS_PROGRESS_MESSAGE},
	{"2024-11-05", MCP_ERA_LEGACY, LEGACY},
};

#define NREV (sizeof(table) / sizeof(table[0]))

const struct mcp_revision *mcp_revision_find(const char *name, unsigned eras)
{
	for (size_t i = 0; name && i < NREV; i++)
		if ((table[i].era & eras) && strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

const struct mcp_revision *mcp_revision_latest(enum mcp_era era)
{
	for (size_t i = 0; i < NREV; i++)
		if (table[i].era == era)
			return &table[i];
	return NULL; /* not reached: every era has a revision */
}

json_t *mcp_revision_names(unsigned eras)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < NREV; i++)
		if ((table[i].era & eras) && json_array_append_new(a, json_string(table[i].name))) {
			json_decref(a);
			return NULL;
		}
	return a;
}
