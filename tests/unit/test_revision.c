/* test_revision.c: the MCP revision table: eras kept apart, newest first,
 * what each revision has. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "mcp/revision.h"

#define BOTH (MCP_ERA_LEGACY | MCP_ERA_MODERN)

static void test_find_keeps_the_eras_apart(void **state)
{
	(void)state;
	assert_non_null(mcp_revision_find("2026-07-28", MCP_ERA_MODERN));
	assert_null(mcp_revision_find("2026-07-28", MCP_ERA_LEGACY));
	assert_null(mcp_revision_find("2025-11-25", MCP_ERA_MODERN));
	for (const char *const *v = (const char *const[]){"2025-11-25", "2025-06-18", "2025-03-26",
							  "2024-11-05", NULL};
	     *v; v++)
		assert_int_equal(mcp_revision_find(*v, BOTH)->era, MCP_ERA_LEGACY);
	assert_null(mcp_revision_find("2024-10-07", BOTH));
	assert_null(mcp_revision_find("2026-07-28 ", BOTH));
	assert_null(mcp_revision_find("", BOTH));
	assert_null(mcp_revision_find(NULL, BOTH));
}

static void test_latest_and_names_are_newest_first(void **state)
{
	json_t *all = mcp_revision_names(BOTH), *legacy = mcp_revision_names(MCP_ERA_LEGACY);
	(void)state;

	assert_string_equal(mcp_revision_latest(MCP_ERA_MODERN)->name, "2026-07-28");
	assert_string_equal(mcp_revision_latest(MCP_ERA_LEGACY)->name, "2025-11-25");
	assert_int_equal(json_array_size(all), 5);
	assert_int_equal(json_array_size(legacy), 4);
	assert_string_equal(json_string_value(json_array_get(all, 0)), "2026-07-28");
	for (size_t i = 1; i < json_array_size(all); i++)
		assert_true(strcmp(json_string_value(json_array_get(all, i - 1)),
				   json_string_value(json_array_get(all, i))) > 0);
	json_decref(all);
	json_decref(legacy);
}

static void test_what_each_revision_has(void **state)
{
	const struct mcp_revision *m = mcp_revision_find("2026-07-28", BOTH);
	const struct mcp_revision *l25 = mcp_revision_find("2025-06-18", BOTH);
	const struct mcp_revision *l24 = mcp_revision_find("2024-11-05", BOTH);
	(void)state;

	assert_true(mcp_revision_has(m, MCP_HAS_RESULT_TYPE | MCP_HAS_CACHE_HINTS |
						MCP_HAS_RESULT_META_INFO | MCP_HAS_STRUCTURED));
	assert_true(mcp_revision_has(l25, MCP_HAS_STRUCTURED | MCP_HAS_TOOL_ANNOTATIONS));
	assert_false(mcp_revision_has(l25, MCP_HAS_RESULT_TYPE));
	assert_false(mcp_revision_has(l25, MCP_HAS_CACHE_HINTS));
	assert_false(mcp_revision_has(mcp_revision_find("2025-03-26", BOTH), MCP_HAS_STRUCTURED));
	assert_false(mcp_revision_has(l24, MCP_HAS_TOOL_ANNOTATIONS));
	assert_false(mcp_revision_has(l24, MCP_HAS_PROGRESS_MESSAGE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_keeps_the_eras_apart),
		cmocka_unit_test(test_latest_and_names_are_newest_first),
		cmocka_unit_test(test_what_each_revision_has),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
