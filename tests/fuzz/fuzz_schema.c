/* fuzz_schema.c: compile arbitrary schemas, validate arbitrary instances.
 *
 * Input: a schema, a NUL byte, an instance (JSON can hold no raw NUL, so the
 * split is unambiguous). Without a NUL the input is only a schema, and it is
 * validated against itself and a few fixed instances. The parity of the size
 * picks the default dialect. Besides ASan/UBSan findings, it traps when a
 * result breaks the contract of schema.h: an unexpected code, a message
 * longer than APPL_TOOL_ERROR_MAX, or one jansson could not carry as a JSON
 * string (invalid UTF-8). */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "json/json.h"
#include "schema/schema.h"

#define FUZZ_DOC_MAX (64u * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(const struct appl_err *err)
{
	json_t *s;

	if (strlen(err->msg) > APPL_TOOL_ERROR_MAX)
		__builtin_trap();
	s = json_string(err->msg);
	if (!s)
		__builtin_trap();
	json_decref(s);
}

static void validate_one(const struct schema *s, const json_t *inst)
{
	struct appl_err err = {0};
	int rc = schema_validate(s, inst, &err);

	if (rc != 0 && rc != -EINVAL && rc != -E2BIG && rc != -ENOMEM)
		__builtin_trap();
	if (rc != 0)
		check_message(&err);
}

static void validate_fixed(const struct schema *s, const json_t *doc)
{
	static const char *const fixed[] = {
		"null", "true",
		"0",	"-1.5",
		"\"\"", "\"abc\"",
		"[]",	"[1, \"a\", [1], {}]",
		"{}",	"{\"a\": 1, \"b\": \"x\", \"c\": [null], \"d\": {\"e\": 2}}",
	};

	validate_one(s, doc);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		json_t *v = json_loads(fixed[i], JSON_DECODE_ANY, NULL);
		if (v)
			validate_one(s, v);
		json_decref(v);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	const char *nul = memchr(buf, 0, size);
	size_t slen = nul ? (size_t)(nul - buf) : size;
	enum schema_draft draft = (size & 1) ? SCHEMA_DRAFT_07 : SCHEMA_DRAFT_2020_12;
	struct appl_err err = {0};
	struct schema *s = NULL;
	json_t *doc, *inst;
	int rc;

	doc = appl_json_load(buf, slen, FUZZ_DOC_MAX, APPL_JSON_DEPTH_MAX, "schema", &err);
	if (!doc)
		return 0;
	rc = schema_new_draft(doc, draft, &s, &err);
	if (rc != 0) {
		if ((rc != -EINVAL && rc != -ENOTSUP && rc != -E2BIG && rc != -ENOMEM) || s)
			__builtin_trap();
		check_message(&err);
		json_decref(doc);
		return 0;
	}
	if (nul) {
		inst = appl_json_load(nul + 1, size - slen - 1, FUZZ_DOC_MAX, APPL_JSON_DEPTH_MAX,
				      "instance", &err);
		if (inst)
			validate_one(s, inst);
		json_decref(inst);
	} else {
		validate_fixed(s, doc);
	}
	schema_free(s);
	json_decref(doc);
	return 0;
}
