/* fuzz_bridge.c: the bridge's checks and result handling on hostile bytes.
 *
 * The first byte picks what the rest is:
 *   0: a tools/call result from an upstream, turned into the code's value;
 *   1: "SCHEMA\nARGS": a tool with that input schema, then a call of it
 *      with those arguments, checked;
 *   2: "TOOL\nARGS": a call by that name against a fixed catalog;
 *   3: a resources/read result, turned into the code's contents.
 * Whatever the outcome, a refusal must be short whole-character text, and an
 * accepted value must nest no deeper than the cap.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "bridge/bridge.h"
#include "json/json.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char POLICY[] =
	"{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
	"\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:"
	"0000000000000000000000000000000000000000000000000000000000000000\"},"
	"\"servers\":{\"s\":{\"command\":[\"/bin/true\"]}},"
	"\"tools\":{\"s.*\":{\"access\":\"read\"},\"s.w\":{\"access\":\"write\"}},"
	"\"roles\":{\"r\":{\"tools\":[\"s.*\"],\"write\":false}}}";

static struct policy *pol;
static struct bridge_catalog *fixed;

static void msg_check(const char *msg)
{
	size_t n = strlen(msg);

	if (n == 0 || n > APPL_TOOL_ERROR_MAX || appl_utf8_prefix(msg, n) != n)
		__builtin_trap();
}

static struct bridge_catalog *catalog_of(const json_t *schema)
{
	static const char *const names[] = {"a", "b", "w", "x.y", "\xc3\xa9"};
	struct bridge_tool_in in[5];
	struct bridge_catalog *c = NULL;
	struct appl_err err = {0};

	for (size_t i = 0; i < 5; i++)
		in[i] = (struct bridge_tool_in){"s", names[i], "d", schema, i != 2, schema};
	if (bridge_catalog_new(pol, "r", in, 5, &c, &err) < 0)
		return NULL;
	return c;
}

static void init(void)
{
	struct appl_err err = {0};
	json_t *schema;

	if (pol)
		return;
	if (policy_parse(POLICY, strlen(POLICY), "/", &pol, &err) < 0)
		__builtin_trap();
	schema = json_loads("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},"
			    "\"s\":{\"type\":\"string\",\"maxLength\":8}},\"required\":[\"n\"]}",
			    0, NULL);
	fixed = catalog_of(schema);
	json_decref(schema);
	if (!fixed)
		__builtin_trap();
}

static void check(const struct bridge_catalog *c, const char *tool, const uint8_t *args, size_t len)
{
	char msg[APPL_TOOL_ERROR_MAX + 1], logged[APPL_TOOL_ERROR_MAX + 1];
	const char *server, *name;
	json_t *a = appl_json_load((const char *)args, len, 64 * 1024, APPL_JSON_DEPTH_MAX, "args",
				   NULL);

	if (!a)
		return;
	msg[0] = logged[0] = '\0';
	if (bridge_check(c, tool, a, 4096, &server, &name, msg, sizeof(msg), logged,
			 sizeof(logged)) < 0) {
		msg_check(msg);
		msg_check(logged);
	} else if (!server || !name || !json_is_object(a))
		__builtin_trap();
	json_decref(a);
}

/* An upstream's answer, as a tools/call result or (resource) a
 * resources/read one, turned into the code's value. */
static void result_case(const uint8_t *data, size_t size, bool resource)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];
	json_t *doc = appl_json_load((const char *)data, size, 64 * 1024, APPL_JSON_DEPTH_MAX,
				     "result", NULL);
	json_t *value = NULL;
	int rc;

	if (!doc)
		return;
	msg[0] = '\0';
	rc = resource ? bridge_resource_value(doc, 4096, &value, msg, sizeof(msg))
		      : bridge_result_value(doc, 4096, &value, msg, sizeof(msg));
	if (rc == 0 && (!value || !appl_json_depth_within(value, APPL_TOOL_RESULT_DEPTH_MAX) ||
			(resource && (!json_is_array(value) || json_array_size(value) == 0))))
		__builtin_trap();
	if (rc != 0)
		msg_check(msg);
	json_decref(value);
	json_decref(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl;
	json_t *doc;

	init();
	if (size < 1)
		return 0;
	switch (data[0] % 4) {
	case 0:
	case 3:
		result_case(data + 1, size - 1, data[0] % 4 == 3);
		return 0;
	case 1:
		nl = memchr(data + 1, '\n', size - 1);
		if (!nl)
			return 0;
		doc = appl_json_load((const char *)data + 1, (size_t)(nl - data - 1), 64 * 1024,
				     APPL_JSON_DEPTH_MAX, "schema", NULL);
		if (doc) {
			struct bridge_catalog *c = catalog_of(doc);

			if (c) {
				check(c, "s.a", nl + 1, size - (size_t)(nl + 1 - data));
				check(c, "s.w", nl + 1, size - (size_t)(nl + 1 - data));
			}
			bridge_catalog_unref(c);
			json_decref(doc);
		}
		return 0;
	default: {
		char tool[300];
		size_t n;

		nl = memchr(data + 1, '\n', size - 1);
		if (!nl)
			return 0;
		n = (size_t)(nl - data - 1);
		if (n >= sizeof(tool) || memchr(data + 1, '\0', n))
			return 0;
		memcpy(tool, data + 1, n);
		tool[n] = '\0';
		check(fixed, tool, nl + 1, size - (size_t)(nl + 1 - data));
		return 0;
	}
	}
}
