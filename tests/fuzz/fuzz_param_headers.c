/* fuzz_param_headers.c: what a hostile HTTP upstream's tools/list can put
 * in a tool's input schema for its x-mcp-header marks, and the session id
 * it can hand out (pkg/upstream/upstream.h).
 *
 * The input is JSON (the schema) or, when it does not parse, a session id.
 * A schema that is offered must keep the promises of
 * upstream_param_headers_check: each mark an HTTP token of at most 64 bytes
 * on a string, integer or boolean parameter, none twice whatever the case,
 * at most 16; a refused one has a reason. A session id accepted must be 1
 * to UPSTREAM_SID_MAX visible ASCII bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "upstream/upstream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c))                                                                          \
			abort();                                                                   \
	} while (0)

static bool token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= 'A' && *s <= 'Z') || strchr("!#$%&'*+-.^_`|~", *s)))
			return false;
	return true;
}

static void schema_promises(const json_t *schema)
{
	const json_t *props = json_object_get(schema, "properties"), *v;
	const char *key, *seen[64];
	size_t n = 0;

	json_object_foreach((json_t *)props, key, v) {
		const char *name = json_string_value(json_object_get(v, "x-mcp-header"));
		const char *type = json_string_value(json_object_get(v, "type"));

		if (!json_object_get(v, "x-mcp-header"))
			continue;
		CHECK(name && token(name) && strlen(name) <= 64);
		CHECK(type && (!strcmp(type, "string") || !strcmp(type, "integer") ||
			       !strcmp(type, "boolean")));
		for (size_t i = 0; i < n; i++)
			CHECK(strcasecmp(seen[i], name) != 0);
		CHECK(n < 16);
		seen[n++] = name;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *schema = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
	char *sid;

	if (schema) {
		const char *why = upstream_param_headers_check(schema);

		if (!why)
			schema_promises(schema);
		else
			CHECK(*why);
		json_decref(schema);
		return 0;
	}
	if (!(sid = malloc(size + 1)))
		return 0;
	memcpy(sid, data, size);
	sid[size] = '\0';
	if (upstream_sid_ok(sid)) {
		size_t n = strlen(sid);

		CHECK(n >= 1 && n <= UPSTREAM_SID_MAX);
		for (size_t i = 0; i < n; i++)
			CHECK(sid[i] >= 0x21 && sid[i] <= 0x7e);
	}
	free(sid);
	return 0;
}
