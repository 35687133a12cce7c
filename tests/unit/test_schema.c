/* test_schema.c: pkg/schema, keyword by keyword, every refusal and cap. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "schema/schema.h"

struct cse {
	const char *schema;
	const char *instance;
	int valid;
};

static json_t *parse(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (!v)
		fail_msg("test JSON does not parse: %s: %s", text, jerr.text);
	return v;
}

static struct schema *compile(const char *text)
{
	struct appl_err err = {0};
	struct schema *s = NULL;
	json_t *doc = parse(text);
	int rc = schema_new(doc, &s, &err);

	json_decref(doc);
	if (rc != 0)
		fail_msg("schema %s refused (%d): %s", text, rc, err.msg);
	return s;
}

/* Validate and return the code; err gets the message. */
static int check(const char *schema, const char *instance, struct appl_err *err)
{
	struct schema *s = compile(schema);
	json_t *inst = parse(instance);
	int rc = schema_validate(s, inst, err);

	json_decref(inst);
	schema_free(s);
	return rc;
}

static void run_cases(const struct cse *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct appl_err err = {0};
		int rc = check(c[i].schema, c[i].instance, &err);
		if ((rc == 0) != c[i].valid || (rc != 0 && rc != -EINVAL))
			fail_msg("%s against %s: want %s, got %d (%s)", c[i].instance, c[i].schema,
				 c[i].valid ? "valid" : "invalid", rc, err.msg);
	}
}

#define RUN(cases) run_cases(cases, sizeof(cases) / sizeof(cases[0]))

/* The message of an invalid instance. */
static void expect_msg(const char *schema, const char *instance, const char *msg)
{
	struct appl_err err = {0};

	assert_int_equal(check(schema, instance, &err), -EINVAL);
	assert_string_equal(err.msg, msg);
}

static void expect_refused(const char *schema, int code, const char *part)
{
	struct appl_err err = {0};
	struct schema *s = (struct schema *)1;
	json_t *doc = parse(schema);
	int rc = schema_new(doc, &s, &err);

	json_decref(doc);
	if (rc != code)
		fail_msg("schema %s: want %d, got %d (%s)", schema, code, rc, err.msg);
	assert_null(s);
	if (!strstr(err.msg, part))
		fail_msg("schema %s: message \"%s\" lacks \"%s\"", schema, err.msg, part);
}

/* ---- keywords ------------------------------------------------------------ */

static void test_type(void **state)
{
	static const struct cse c[] = {
		{"{\"type\": \"integer\"}", "1", 1},
		{"{\"type\": \"integer\"}", "1.0", 1},
		{"{\"type\": \"integer\"}", "1.5", 0},
		{"{\"type\": \"integer\"}", "\"1\"", 0},
		{"{\"type\": \"number\"}", "1", 1},
		{"{\"type\": \"number\"}", "-2.5e3", 1},
		{"{\"type\": \"string\"}", "\"\"", 1},
		{"{\"type\": \"string\"}", "null", 0},
		{"{\"type\": \"boolean\"}", "false", 1},
		{"{\"type\": \"boolean\"}", "0", 0},
		{"{\"type\": \"null\"}", "null", 1},
		{"{\"type\": \"object\"}", "{}", 1},
		{"{\"type\": \"object\"}", "[]", 0},
		{"{\"type\": \"array\"}", "[]", 1},
		{"{\"type\": [\"string\", \"null\"]}", "null", 1},
		{"{\"type\": [\"string\", \"null\"]}", "1", 0},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"properties\": {\"b\": {\"type\": \"number\"}}}", "{\"b\": \"x\"}",
		   "/b: expected number, got string");
	expect_msg("{\"type\": [\"string\", \"null\"]}", "1.5",
		   "(root): expected null or string, got number");
}

static void test_properties(void **state)
{
	static const struct cse c[] = {
		{"{\"properties\": {\"a\": {\"type\": \"string\"}}}", "{\"a\": \"x\"}", 1},
		{"{\"properties\": {\"a\": {\"type\": \"string\"}}}", "{\"a\": 1}", 0},
		{"{\"properties\": {\"a\": {\"type\": \"string\"}}}", "{\"b\": 1}", 1},
		{"{\"properties\": {\"a\": false}}", "{\"a\": 1}", 0},
		{"{\"properties\": {\"a\": {\"type\": \"string\"}}}", "[1]", 1},
	};
	(void)state;
	RUN(c);
}

static void test_required(void **state)
{
	static const struct cse c[] = {
		{"{\"required\": [\"a\", \"b\"]}", "{\"a\": 1, \"b\": 2}", 1},
		{"{\"required\": [\"a\", \"b\"]}", "{\"a\": 1}", 0},
		{"{\"required\": []}", "{}", 1},
		{"{\"required\": [\"a\"]}", "\"not an object\"", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"required\": [\"a\", \"b\"]}", "{\"a\": 1}",
		   "(root): required: missing property \"b\"");
}

static void test_additional_properties(void **state)
{
	static const struct cse c[] = {
		{"{\"properties\": {\"a\": {}}, \"additionalProperties\": false}", "{\"a\": 1}", 1},
		{"{\"properties\": {\"a\": {}}, \"additionalProperties\": false}",
		 "{\"a\": 1, \"b\": 2}", 0},
		{"{\"patternProperties\": {\"^x-\": {}}, \"additionalProperties\": false}",
		 "{\"x-1\": 1}", 1},
		{"{\"patternProperties\": {\"^x-\": {}}, \"additionalProperties\": false}",
		 "{\"y\": 1}", 0},
		{"{\"additionalProperties\": {\"type\": \"integer\"}}", "{\"a\": 1}", 1},
		{"{\"additionalProperties\": {\"type\": \"integer\"}}", "{\"a\": \"1\"}", 0},
		{"{\"additionalProperties\": true}", "{\"a\": 1}", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"properties\": {\"a\": {}}, \"additionalProperties\": false}",
		   "{\"a\": 1, \"evil\": 2}",
		   "(root): additionalProperties: property \"evil\" is not allowed");
}

static void test_pattern_properties(void **state)
{
	static const struct cse c[] = {
		{"{\"patternProperties\": {\"^n_\": {\"type\": \"number\"}}}", "{\"n_a\": 1}", 1},
		{"{\"patternProperties\": {\"^n_\": {\"type\": \"number\"}}}", "{\"n_a\": \"x\"}",
		 0},
		{"{\"patternProperties\": {\"^n_\": {\"type\": \"number\"}}}", "{\"s\": \"x\"}", 1},
		{"{\"patternProperties\": {\"a\": {\"minimum\": 2}, \"b\": {\"maximum\": 3}}}",
		 "{\"ab\": 4}", 0},
	};
	(void)state;
	RUN(c);
}

static void test_property_names(void **state)
{
	static const struct cse c[] = {
		{"{\"propertyNames\": {\"maxLength\": 3}}", "{\"abc\": 1}", 1},
		{"{\"propertyNames\": {\"maxLength\": 3}}", "{\"abcd\": 1}", 0},
		{"{\"propertyNames\": {\"pattern\": \"^[a-z]+$\"}}", "{\"A\": 1}", 0},
		{"{\"propertyNames\": false}", "{}", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"propertyNames\": {\"maxLength\": 3}}", "{\"abcd\": 1}",
		   "(root): propertyNames: property name \"abcd\" is not allowed");
}

static void test_min_max_properties(void **state)
{
	static const struct cse c[] = {
		{"{\"minProperties\": 1}", "{\"a\": 1}", 1},
		{"{\"minProperties\": 1}", "{}", 0},
		{"{\"maxProperties\": 1}", "{\"a\": 1, \"b\": 2}", 0},
		{"{\"maxProperties\": 1.0}", "{\"a\": 1}", 1},
	};
	(void)state;
	RUN(c);
}

static void test_items_2020(void **state)
{
	static const struct cse c[] = {
		{"{\"items\": {\"type\": \"integer\"}}", "[1, 2]", 1},
		{"{\"items\": {\"type\": \"integer\"}}", "[1, \"2\"]", 0},
		{"{\"prefixItems\": [{\"type\": \"string\"}], \"items\": {\"type\": \"integer\"}}",
		 "[\"a\", 1, 2]", 1},
		{"{\"prefixItems\": [{\"type\": \"string\"}], \"items\": {\"type\": \"integer\"}}",
		 "[1]", 0},
		{"{\"prefixItems\": [{}, {}], \"items\": false}", "[1, 2]", 1},
		{"{\"prefixItems\": [{}, {}], \"items\": false}", "[1, 2, 3]", 0},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"items\": {\"type\": \"integer\"}}", "[1, \"2\"]",
		   "/1: expected integer, got string");
}

static void test_items_draft07(void **state)
{
	static const char *d7 = "\"$schema\": \"http://json-schema.org/draft-07/schema#\"";
	char a[256], b[256], c2[256];
	(void)state;
	snprintf(a, sizeof(a), "{%s, \"items\": [{\"type\": \"string\"}]}", d7);
	snprintf(b, sizeof(b),
		 "{%s, \"items\": [{\"type\": \"string\"}], \"additionalItems\": false}", d7);
	snprintf(c2, sizeof(c2), "{%s, \"items\": {}, \"additionalItems\": false}", d7);
	const struct cse c[] = {
		{a, "[\"x\", 1]", 1}, {a, "[1]", 0},	    {b, "[\"x\"]", 1},
		{b, "[\"x\", 1]", 0}, {c2, "[1, 2, 3]", 1},
	};
	RUN(c);
}

static void test_contains(void **state)
{
	static const struct cse c[] = {
		{"{\"contains\": {\"const\": 1}}", "[0, 1]", 1},
		{"{\"contains\": {\"const\": 1}}", "[0, 2]", 0},
		{"{\"contains\": {\"const\": 1}}", "[]", 0},
		{"{\"contains\": {\"const\": 1}, \"minContains\": 2}", "[1, 0, 1]", 1},
		{"{\"contains\": {\"const\": 1}, \"minContains\": 2}", "[1, 0]", 0},
		{"{\"contains\": {\"const\": 1}, \"maxContains\": 1}", "[1, 1]", 0},
		{"{\"contains\": {\"const\": 1}, \"minContains\": 0}", "[]", 1},
		{"{\"maxContains\": 0}", "[1]", 1},
	};
	(void)state;
	RUN(c);
}

static void test_min_max_items_unique(void **state)
{
	static const struct cse c[] = {
		{"{\"minItems\": 2}", "[1]", 0},
		{"{\"minItems\": 2}", "[1, 2]", 1},
		{"{\"maxItems\": 1}", "[1, 2]", 0},
		{"{\"uniqueItems\": true}", "[1, 2]", 1},
		{"{\"uniqueItems\": true}", "[1, 1.0]", 0},
		{"{\"uniqueItems\": true}", "[{\"a\": 1, \"b\": 2}, {\"b\": 2, \"a\": 1.0}]", 0},
		{"{\"uniqueItems\": true}", "[[1], [true]]", 1},
		{"{\"uniqueItems\": true}", "[0, false, null, \"\"]", 1},
		{"{\"uniqueItems\": false}", "[1, 1]", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"uniqueItems\": true}", "[1, 2, 1]",
		   "(root): uniqueItems: items 0 and 2 are equal");
}

static void test_enum_const(void **state)
{
	static const struct cse c[] = {
		{"{\"enum\": [1, \"a\", null]}", "1.0", 1},
		{"{\"enum\": [1, \"a\", null]}", "\"a\"", 1},
		{"{\"enum\": [1, \"a\", null]}", "\"b\"", 0},
		{"{\"enum\": [1, \"a\", null]}", "true", 0},
		{"{\"enum\": [[1, 2]]}", "[1.0, 2]", 1},
		{"{\"enum\": []}", "1", 0},
		{"{\"const\": {\"a\": [1]}}", "{\"a\": [1.0]}", 1},
		{"{\"const\": {\"a\": [1]}}", "{\"a\": [1], \"b\": 1}", 0},
		{"{\"const\": false}", "0", 0},
		{"{\"const\": 0}", "-0.0", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"enum\": [\"x\"]}", "\"a long secret value\"",
		   "(root): enum: not one of the 1 allowed values");
}

static void test_combinators(void **state)
{
	static const struct cse c[] = {
		{"{\"allOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "3", 1},
		{"{\"allOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "1", 0},
		{"{\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 2}]}", "\"x\"", 1},
		{"{\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 2}]}", "1", 0},
		{"{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "1", 1},
		{"{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "3", 0},
		{"{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "1.5", 0},
		{"{\"not\": {\"type\": \"string\"}}", "1", 1},
		{"{\"not\": {\"type\": \"string\"}}", "\"x\"", 0},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"oneOf\": [{\"type\": \"integer\"}, {\"minimum\": 2}]}", "3",
		   "(root): oneOf: matches more than one of the 2 schemas, not exactly one");
	expect_msg("{\"anyOf\": [{\"type\": \"string\"}, {\"minimum\": 2}]}", "1",
		   "(root): anyOf: matches none of the 2 schemas");
	expect_msg("{\"not\": {}}", "1", "(root): not: must not match the schema");
}

static void test_if_then_else(void **state)
{
	static const char *s = "{\"if\": {\"type\": \"integer\"}, \"then\": {\"minimum\": 0},"
			       " \"else\": {\"type\": \"string\"}}";
	const struct cse c[] = {
		{s, "1", 1},
		{s, "-1", 0},
		{s, "\"x\"", 1},
		{s, "null", 0},
		{"{\"then\": false}", "1", 1},
		{"{\"else\": false}", "1", 1},
		{"{\"if\": false, \"then\": false}", "1", 1},
	};
	(void)state;
	RUN(c);
}

static void test_dependents(void **state)
{
	static const struct cse c[] = {
		{"{\"dependentRequired\": {\"a\": [\"b\"]}}", "{\"a\": 1, \"b\": 2}", 1},
		{"{\"dependentRequired\": {\"a\": [\"b\"]}}", "{\"a\": 1}", 0},
		{"{\"dependentRequired\": {\"a\": [\"b\"]}}", "{\"b\": 1}", 1},
		{"{\"dependentSchemas\": {\"a\": {\"required\": [\"b\"]}}}", "{\"a\": 1}", 0},
		{"{\"dependentSchemas\": {\"a\": {\"required\": [\"b\"]}}}", "{\"c\": 1}", 1},
		{"{\"$schema\": \"http://json-schema.org/draft-07/schema#\","
		 " \"dependencies\": {\"a\": [\"b\"], \"c\": {\"maxProperties\": 1}}}",
		 "{\"a\": 1}", 0},
		{"{\"$schema\": \"http://json-schema.org/draft-07/schema#\","
		 " \"dependencies\": {\"a\": [\"b\"], \"c\": {\"maxProperties\": 1}}}",
		 "{\"c\": 1, \"d\": 2}", 0},
		{"{\"$schema\": \"http://json-schema.org/draft-07/schema#\","
		 " \"dependencies\": {\"a\": [\"b\"], \"c\": {\"maxProperties\": 1}}}",
		 "{\"c\": 1}", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"dependentRequired\": {\"a\": [\"b\"]}}", "{\"a\": 1}",
		   "(root): dependentRequired: property \"a\" requires \"b\"");
}

static void test_numbers(void **state)
{
	static const struct cse c[] = {
		{"{\"minimum\": 2}", "2", 1},
		{"{\"minimum\": 2}", "1.99", 0},
		{"{\"exclusiveMinimum\": 2}", "2", 0},
		{"{\"exclusiveMinimum\": 2}", "2.01", 1},
		{"{\"maximum\": 2.5}", "2.5", 1},
		{"{\"maximum\": 2.5}", "3", 0},
		{"{\"exclusiveMaximum\": 2.5}", "2.5", 0},
		{"{\"maximum\": 9007199254740993}", "9007199254740992", 1},
		{"{\"maximum\": 9007199254740992}", "9007199254740993", 0},
		{"{\"minimum\": 1}", "\"0\"", 1},
		{"{\"multipleOf\": 2}", "4", 1},
		{"{\"multipleOf\": 2}", "5", 0},
		{"{\"multipleOf\": 0.01}", "0.07", 1},
		{"{\"multipleOf\": 0.0001}", "0.0075", 1},
		{"{\"multipleOf\": 0.0001}", "0.00751", 0},
		{"{\"multipleOf\": 0.123456789}", "1e308", 0},
		{"{\"multipleOf\": 1.5}", "4.5", 1},
		{"{\"multipleOf\": 1}", "-9223372036854775808", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"properties\": {\"n\": {\"exclusiveMaximum\": 0.1}}}", "{\"n\": 1}",
		   "/n: exclusiveMaximum: must be < 0.1");
	expect_msg("{\"multipleOf\": 3}", "4", "(root): multipleOf: must be a multiple of 3");
}

static void test_strings(void **state)
{
	static const struct cse c[] = {
		{"{\"minLength\": 2}", "\"ab\"", 1},
		{"{\"minLength\": 2}", "\"a\"", 0},
		{"{\"maxLength\": 2}", "\"abc\"", 0},
		/* code points, not bytes: two characters, four bytes */
		{"{\"maxLength\": 2}", "\"\\u00e9\\u00e9\"", 1},
		{"{\"minLength\": 3}", "\"\\u00e9\\u00e9\"", 0},
		{"{\"maxLength\": 1}", "\"\\ud83d\\ude00\"", 1},
		{"{\"pattern\": \"^[a-z]+$\"}", "\"abc\"", 1},
		{"{\"pattern\": \"^[a-z]+$\"}", "\"abC\"", 0},
		{"{\"pattern\": \"b\"}", "\"abc\"", 1},
		{"{\"pattern\": \"^a\"}", "1", 1},
		{"{\"format\": \"email\"}", "\"not an email\"", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"pattern\": \"^[a-z]+$\"}", "\"abC\"",
		   "(root): pattern: does not match \"^[a-z]+$\"");
}

/* ECMA-262 behaviour PCRE2 is set up for (docs/schema.md). */
static void test_regex_dialect(void **state)
{
	static const struct cse c[] = {
		{"{\"pattern\": \"^abc$\"}", "\"abc\\n\"", 0}, /* $ only at the end */
		{"{\"pattern\": \"^\\\\d+$\"}", "\"123\"", 1},
		{"{\"pattern\": \"^\\\\d+$\"}", "\"\\u0663\"", 0}, /* \d is ASCII */
		{"{\"pattern\": \"^\\\\w$\"}", "\"\\u00e9\"", 0},  /* \w is ASCII */
		{"{\"pattern\": \"^.$\"}", "\"\\n\"", 0},	   /* no DOTALL */
		{"{\"pattern\": \"^.$\"}", "\"\\u00e9\"", 1},	   /* one code point */
		{"{\"pattern\": \"^\\\\p{Letter}+$\"}", "\"\\u03c0x\"", 1},
		{"{\"pattern\": \"^\\\\p{Letter}+$\"}", "\"1\"", 0},
		{"{\"pattern\": \"^\\\\p{Script=Greek}$\"}", "\"\\u03c0\"", 1},
		{"{\"pattern\": \"^\\\\u0041$\"}", "\"A\"", 1},
		{"{\"pattern\": \"^[^]$\"}", "\"\\n\"", 1},
		{"{\"pattern\": \"[]\"}", "\"a\"", 0},
		{"{\"pattern\": \"^(a)?\\\\1b$\"}", "\"b\"", 1},
		/* '.' stops at ECMA-262 line terminators only */
		{"{\"pattern\": \"^.$\"}", "\"\\r\"", 0},
		{"{\"pattern\": \"^.$\"}", "\"\\u2028\"", 0},
		{"{\"pattern\": \"^.$\"}", "\"\\u000b\"", 1},
		{"{\"pattern\": \"^[.]$\"}", "\"a\"", 0},
		/* \s is Unicode white space */
		{"{\"pattern\": \"^\\\\s$\"}", "\"\\u00a0\"", 1},
		{"{\"pattern\": \"^\\\\s$\"}", "\"\\ufeff\"", 1},
		{"{\"pattern\": \"^\\\\S+$\"}", "\"a\\u3000b\"", 0},
		{"{\"pattern\": \"^[\\\\s,]+$\"}", "\", \\u2029\"", 1},
		/* no POSIX classes: [[:a] is a class of '[', ':' and 'a' */
		{"{\"pattern\": \"^[[:a]$\"}", "\"[\"", 1},
		{"{\"pattern\": \"^[[:alpha:]]$\"}", "\"a\"", 0},
		{"{\"pattern\": \"^[[:alpha:]]$\"}", "\"a]\"", 1},
		/* \Q is Q, not a quote */
		{"{\"pattern\": \"^\\\\Q.$\"}", "\"Qx\"", 1},
	};
	(void)state;
	RUN(c);
}

static void test_boolean_schemas(void **state)
{
	static const struct cse c[] = {
		{"true", "{\"a\": [1]}", 1},
		{"false", "null", 0},
		{"{}", "1", 1},
		{"{\"properties\": {\"x\": true, \"y\": false}}", "{\"x\": 1}", 1},
	};
	(void)state;
	RUN(c);
	expect_msg("false", "1", "(root): not allowed here (false schema)");
}

static void test_refs(void **state)
{
	static const struct cse c[] = {
		{"{\"$defs\": {\"n\": {\"type\": \"integer\"}}, \"properties\": {\"a\": {\"$ref\": "
		 "\"#/$defs/n\"}}}",
		 "{\"a\": \"x\"}", 0},
		{"{\"definitions\": {\"n\": {\"type\": \"integer\"}}, \"$ref\": "
		 "\"#/definitions/n\"}",
		 "1", 1},
		/* $ref beside other keywords (2020-12) */
		{"{\"$defs\": {\"n\": {\"type\": \"integer\"}}, \"$ref\": \"#/$defs/n\", "
		 "\"minimum\": "
		 "5}",
		 "3", 0},
		{"{\"$defs\": {\"a\": {\"$anchor\": \"num\", \"type\": \"number\"}}, \"$ref\": "
		 "\"#num\"}",
		 "\"x\"", 0},
		{"{\"$id\": \"http://example.com/root.json\", \"$defs\": {\"b\": {\"$id\": "
		 "\"b.json\", \"type\": \"string\"}}, \"$ref\": \"b.json\"}",
		 "\"x\"", 1},
		{"{\"$defs\": {\"tilde~field\": {\"type\": \"integer\"}}, \"$ref\": "
		 "\"#/$defs/tilde~0field\"}",
		 "1.5", 0},
		{"{\"$defs\": {\"a b\": {\"type\": \"integer\"}}, \"$ref\": \"#/$defs/a%20b\"}",
		 "1", 1},
		/* pointer into a place no keyword walks */
		{"{\"components\": {\"x\": {\"type\": \"null\"}}, \"$ref\": \"#/components/x\"}",
		 "null", 1},
		/* recursion that moves into the instance is fine */
		{"{\"properties\": {\"child\": {\"$ref\": \"#\"}}, \"additionalProperties\": "
		 "false}",
		 "{\"child\": {\"child\": {}}}", 1},
		{"{\"properties\": {\"child\": {\"$ref\": \"#\"}}, \"additionalProperties\": "
		 "false}",
		 "{\"child\": {\"child\": {\"x\": 1}}}", 0},
		/* draft-07: siblings of $ref are ignored, "$id": "#name" is an anchor */
		{"{\"$schema\": \"http://json-schema.org/draft-07/schema#\", \"definitions\": "
		 "{\"a\": {\"type\": \"array\"}}, \"properties\": {\"f\": {\"$ref\": "
		 "\"#/definitions/a\", \"maxItems\": 1}}}",
		 "{\"f\": [1, 2]}", 1},
		{"{\"$schema\": \"http://json-schema.org/draft-07/schema#\", \"allOf\": "
		 "[{\"$ref\": "
		 "\"#foo\"}], \"definitions\": {\"A\": {\"$id\": \"#foo\", \"type\": "
		 "\"integer\"}}}",
		 "\"a\"", 0},
	};
	(void)state;
	RUN(c);
	expect_msg("{\"$defs\": {\"n\": {\"type\": \"integer\"}}, \"properties\": {\"a\": "
		   "{\"items\": {\"$ref\": \"#/$defs/n\"}}}}",
		   "{\"a\": [1, \"x\"]}", "/a/1: expected integer, got string");
}

static void test_dialects(void **state)
{
	struct schema *s;
	(void)state;
	s = compile("{}");
	assert_int_equal(schema_draft_get(s), SCHEMA_DRAFT_2020_12);
	schema_free(s);
	s = compile("{\"$schema\": \"http://json-schema.org/draft-07/schema#\"}");
	assert_int_equal(schema_draft_get(s), SCHEMA_DRAFT_07);
	schema_free(s);
	s = compile("{\"$schema\": \"https://json-schema.org/draft/2020-12/schema\"}");
	assert_int_equal(schema_draft_get(s), SCHEMA_DRAFT_2020_12);
	schema_free(s);
}

static void test_annotations_ignored(void **state)
{
	static const struct cse c[] = {
		{"{\"title\": 1, \"description\": [], \"default\": {\"type\": \"x\"},"
		 " \"examples\": 5, \"format\": \"date\", \"x-vendor\": {}}",
		 "\"anything\"", 1},
		{"{\"contentMediaType\": \"application/json\", \"contentEncoding\": \"base64\"}",
		 "\"!!\"", 1},
	};
	(void)state;
	RUN(c);
}

/* ---- refusals ------------------------------------------------------------ */

static void test_refuse_unsupported(void **state)
{
	(void)state;
	expect_refused("{\"$ref\": \"https://example.com/other.json\"}", -ENOTSUP, "remote");
	expect_refused("{\"$ref\": \"other.json#/x\"}", -ENOTSUP, "remote");
	expect_refused("{\"$ref\": \"https://json-schema.org/draft/2020-12/schema\"}", -ENOTSUP,
		       "nothing is fetched");
	expect_refused("{\"$dynamicRef\": \"#meta\"}", -ENOTSUP, "$dynamicRef");
	expect_refused("{\"$recursiveRef\": \"#\"}", -ENOTSUP, "$recursiveRef");
	expect_refused("{\"unevaluatedProperties\": false}", -ENOTSUP, "unevaluatedProperties");
	expect_refused("{\"properties\": {\"a\": {\"unevaluatedItems\": false}}}", -ENOTSUP,
		       "schema at /properties/a/unevaluatedItems");
	expect_refused("{\"$schema\": \"http://json-schema.org/draft-04/schema#\"}", -ENOTSUP,
		       "$schema");
	expect_refused("{\"$schema\": \"http://localhost:1234/my-meta\"}", -ENOTSUP, "$schema");
	expect_refused("{\"properties\": {\"a\": {\"$schema\": "
		       "\"http://json-schema.org/draft-07/schema#\"}}}",
		       -ENOTSUP, "another dialect");
}

static void test_refuse_other_dialect_keywords(void **state)
{
	(void)state;
	expect_refused("{\"additionalItems\": false}", -ENOTSUP, "additionalItems");
	expect_refused("{\"dependencies\": {\"a\": [\"b\"]}}", -ENOTSUP, "dependencies");
	expect_refused("{\"$schema\": \"http://json-schema.org/draft-07/schema#\", "
		       "\"prefixItems\": [{}]}",
		       -ENOTSUP, "prefixItems");
	expect_refused("{\"$schema\": \"http://json-schema.org/draft-07/schema#\", "
		       "\"dependentRequired\": {}}",
		       -ENOTSUP, "dependentRequired");
	expect_refused("{\"$schema\": \"http://json-schema.org/draft-07/schema#\", "
		       "\"maxContains\": 1}",
		       -ENOTSUP, "maxContains");
}

static void test_refuse_ref_cycles(void **state)
{
	(void)state;
	expect_refused("{\"$ref\": \"#\"}", -ENOTSUP, "cycle");
	expect_refused("{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": "
		       "\"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}",
		       -ENOTSUP, "cycle");
	expect_refused("{\"anyOf\": [{\"type\": \"string\"}, {\"$ref\": \"#\"}]}", -ENOTSUP,
		       "cycle");
	expect_refused("{\"$defs\": {\"a\": {\"not\": {\"$ref\": \"#/$defs/a\"}}}}", -ENOTSUP,
		       "cycle");
}

static void test_refuse_regex(void **state)
{
	char big[2200];
	(void)state;
	expect_refused("{\"pattern\": \"(\"}", -ENOTSUP, "pattern");
	expect_refused("{\"patternProperties\": {\"[a-\": {}}}", -ENOTSUP, "pattern");
	expect_refused("{\"pattern\": \"\\\\C\"}", -ENOTSUP, "pattern");
	snprintf(big, sizeof(big), "{\"pattern\": \"%01100d\"}", 0);
	expect_refused(big, -E2BIG, "pattern");
}

static void test_refuse_malformed(void **state)
{
	(void)state;
	expect_refused("{\"type\": \"int\"}", -EINVAL, "type");
	expect_refused("{\"type\": []}", -EINVAL, "type");
	expect_refused("{\"minLength\": -1}", -EINVAL, "minLength");
	expect_refused("{\"minLength\": 1.5}", -EINVAL, "minLength");
	expect_refused("{\"maximum\": \"3\"}", -EINVAL, "maximum");
	expect_refused("{\"exclusiveMaximum\": true}", -EINVAL, "exclusiveMaximum");
	expect_refused("{\"multipleOf\": 0}", -EINVAL, "multipleOf");
	expect_refused("{\"required\": [1]}", -EINVAL, "required");
	expect_refused("{\"properties\": []}", -EINVAL, "properties");
	expect_refused("{\"properties\": {\"a\": 1}}", -EINVAL, "/properties/a");
	expect_refused("{\"allOf\": []}", -EINVAL, "allOf");
	expect_refused("{\"items\": [{}]}", -EINVAL, "items");
	expect_refused("{\"enum\": 1}", -EINVAL, "enum");
	expect_refused("{\"uniqueItems\": 1}", -EINVAL, "uniqueItems");
	expect_refused("{\"$ref\": \"#/$defs/missing\"}", -EINVAL, "points at nothing");
	expect_refused("{\"$ref\": \"#nowhere\"}", -EINVAL, "names no anchor");
	expect_refused("{\"$ref\": 1}", -EINVAL, "$ref");
	expect_refused("{\"$id\": \"http://a/b#frag\"}", -EINVAL, "$id");
	expect_refused("{\"$defs\": {\"a\": {\"$id\": \"http://x/1\"}, \"b\": {\"$id\": "
		       "\"http://x/1\"}}}",
		       -EINVAL, "twice");
	expect_refused("1", -EINVAL, "object or a boolean");
	/* a subschema cannot take the document's own URI */
	expect_refused("{\"$defs\": {\"a\": {\"$id\": \"\"}}}", -EINVAL, "twice");
}

static void test_new_buf(void **state)
{
	struct appl_err err = {0};
	struct schema *s = NULL;
	const char *good = "{\"type\": \"string\"}";
	const char *dup = "{\"type\": \"string\", \"type\": \"number\"}";
	(void)state;
	assert_int_equal(schema_new_buf(good, strlen(good), 1024, &s, &err), 0);
	schema_free(s);
	assert_int_equal(schema_new_buf(dup, strlen(dup), 1024, &s, &err), -EINVAL);
	assert_null(s);
	assert_int_equal(schema_new_buf(good, strlen(good), 4, &s, &err), -EFBIG);
	assert_int_equal(schema_new_buf("{\"type\": ", 9, 1024, &s, &err), -EINVAL);
}

/* ---- caps ---------------------------------------------------------------- */

/* {"properties": {"p0": {}, ..., "pN": {}}} */
static char *wide_schema(size_t n)
{
	size_t cap = 64 + n * 16, len = 0;
	char *s = malloc(cap);

	len += (size_t)snprintf(s + len, cap - len, "{\"properties\": {");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s\"p%zu\": {}", i ? ", " : "", i);
	snprintf(s + len, cap - len, "}}");
	return s;
}

static char *nested(const char *open, const char *mid, const char *close, size_t depth)
{
	size_t cap = depth * (strlen(open) + strlen(close)) + strlen(mid) + 1, len = 0;
	char *s = malloc(cap);

	for (size_t i = 0; i < depth; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s", open);
	len += (size_t)snprintf(s + len, cap - len, "%s", mid);
	for (size_t i = 0; i < depth; i++)
		len += (size_t)snprintf(s + len, cap - len, "%s", close);
	return s;
}

static void test_cap_nodes_and_depth(void **state)
{
	char *s;
	(void)state;
	s = wide_schema(APPL_SCHEMA_NODES_MAX - 10);
	schema_free(compile(s));
	free(s);
	s = wide_schema(APPL_SCHEMA_NODES_MAX + 1);
	expect_refused(s, -E2BIG, "subschemas");
	free(s);
	s = nested("{\"not\": ", "{}", "}", APPL_SCHEMA_DEPTH_MAX + 1);
	expect_refused(s, -E2BIG, "nested");
	free(s);
}

static void test_cap_instance_depth(void **state)
{
	struct appl_err err = {0};
	struct schema *sc = compile("{}");
	char *deep = nested("[", "1", "]", APPL_SCHEMA_DEPTH_MAX + 1);
	json_t *inst = parse(deep);
	(void)state;
	assert_int_equal(schema_validate(sc, inst, &err), -E2BIG);
	json_decref(inst);
	free(deep);
	schema_free(sc);
}

/* allOf: [a, a] at each of 20 levels is 2^20 evaluations of one instance. */
static void test_cap_visits(void **state)
{
	char buf[8192];
	size_t len = 0;
	struct appl_err err = {0};
	(void)state;
	len += (size_t)snprintf(buf + len, sizeof(buf) - len, "{\"$defs\": {");
	for (int i = 0; i < 20; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len,
					"\"d%d\": {\"allOf\": [{\"$ref\": \"#/$defs/d%d\"}, "
					"{\"$ref\": \"#/$defs/d%d\"}]},",
					i, i + 1, i + 1);
	snprintf(buf + len, sizeof(buf) - len, "\"d20\": {}}, \"$ref\": \"#/$defs/d0\"}");
	assert_int_equal(check(buf, "1", &err), -E2BIG);
	assert_non_null(strstr(err.msg, "subschemas evaluated"));
}

/* uniqueItems over distinct items compares every pair: n^2/2. */
static void test_cap_compares(void **state)
{
	size_t n = 2500, cap = n * 8 + 8, len = 0;
	char *arr = malloc(cap);
	struct appl_err err = {0};
	(void)state;
	len += (size_t)snprintf(arr + len, cap - len, "[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(arr + len, cap - len, "%s%zu", i ? "," : "", i);
	snprintf(arr + len, cap - len, "]");
	assert_int_equal(check("{\"uniqueItems\": true}", arr, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "comparisons"));
	/* 1000 distinct items are 500k comparisons: within the cap */
	len = 0;
	len += (size_t)snprintf(arr + len, cap - len, "[");
	for (size_t i = 0; i < 1000; i++)
		len += (size_t)snprintf(arr + len, cap - len, "%s%zu", i ? "," : "", i);
	snprintf(arr + len, cap - len, "]");
	assert_int_equal(check("{\"uniqueItems\": true}", arr, &err), 0);
	free(arr);
}

static void test_cap_regex_backtracking(void **state)
{
	char inst[128];
	struct appl_err err = {0};
	(void)state;
	memset(inst, 'a', sizeof(inst));
	inst[0] = '"';
	inst[sizeof(inst) - 3] = '!';
	inst[sizeof(inst) - 2] = '"';
	inst[sizeof(inst) - 1] = '\0';
	assert_int_equal(check("{\"pattern\": \"^(a+)+$\"}", inst, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "regex"));
}

/* ---- messages -------------------------------------------------------------- */

static void test_message_path_escaped(void **state)
{
	(void)state;
	expect_msg("{\"properties\": {\"a/b\": {\"properties\": {\"c~d\": {\"type\": "
		   "\"string\"}}}}}",
		   "{\"a/b\": {\"c~d\": 1}}", "/a~1b/c~0d: expected string, got integer");
}

static int utf8_ok(const char *s)
{
	json_t *v = json_string(s);

	json_decref(v);
	return v != NULL;
}

static void test_message_bounded(void **state)
{
	char schema[8192], inst[8192], key[600];
	size_t len = 0, ilen = 0;
	struct appl_err err = {0};
	(void)state;
	/* a key of 150 two-byte characters, nested 8 deep */
	for (size_t i = 0; i < 150; i++)
		memcpy(key + 2 * i, "\xc3\xa9", 2);
	key[300] = '\0';
	for (int i = 0; i < 8; i++) {
		len += (size_t)snprintf(schema + len, sizeof(schema) - len,
					"{\"properties\": {\"%s\": ", key);
		ilen += (size_t)snprintf(inst + ilen, sizeof(inst) - ilen, "{\"%s\": ", key);
	}
	len += (size_t)snprintf(schema + len, sizeof(schema) - len, "{\"type\": \"string\"}");
	ilen += (size_t)snprintf(inst + ilen, sizeof(inst) - ilen, "5");
	for (int i = 0; i < 8; i++) {
		len += (size_t)snprintf(schema + len, sizeof(schema) - len, "}}");
		ilen += (size_t)snprintf(inst + ilen, sizeof(inst) - ilen, "}");
	}
	assert_int_equal(check(schema, inst, &err), -EINVAL);
	assert_true(strlen(err.msg) <= APPL_TOOL_ERROR_MAX);
	assert_true(utf8_ok(err.msg));
	assert_non_null(strstr(err.msg, "expected string, got integer"));
	assert_non_null(strstr(err.msg, "..."));
	/* additionalProperties quotes the key, cut */
	snprintf(inst, sizeof(inst), "{\"%s\": 1}", key);
	assert_int_equal(check("{\"additionalProperties\": false}", inst, &err), -EINVAL);
	assert_true(strlen(err.msg) < 200);
	assert_true(utf8_ok(err.msg));
}

/* Compile errors too: a deep location of long multibyte names stays UTF-8. */
static void test_compile_message_bounded(void **state)
{
	char schema[8192], key[400];
	size_t len = 0;
	struct appl_err err = {0};
	struct schema *s = NULL;
	json_t *doc;
	(void)state;
	for (size_t i = 0; i < 100; i++)
		memcpy(key + 3 * i, "\xe2\x82\xac", 3);
	key[300] = '\0';
	for (int i = 0; i < 6; i++)
		len += (size_t)snprintf(schema + len, sizeof(schema) - len,
					"{\"properties\": {\"%s\": ", key);
	len += (size_t)snprintf(schema + len, sizeof(schema) - len, "{\"pattern\": \"%s(\"}", key);
	for (int i = 0; i < 6; i++)
		len += (size_t)snprintf(schema + len, sizeof(schema) - len, "}}");
	doc = parse(schema);
	assert_int_equal(schema_new(doc, &s, &err), -ENOTSUP);
	json_decref(doc);
	assert_true(utf8_ok(err.msg));
	assert_true(strlen(err.msg) <= APPL_TOOL_ERROR_MAX);
}

static void test_message_no_value_echo(void **state)
{
	struct appl_err err = {0};
	(void)state;
	assert_int_equal(check("{\"properties\": {\"k\": {\"maxLength\": 3, \"pattern\": \"^x\"}}}",
			       "{\"k\": \"TOPSECRETVALUE\"}", &err),
			 -EINVAL);
	assert_null(strstr(err.msg, "TOPSECRET"));
	assert_string_equal(err.msg, "/k: maxLength: must be at most 3 characters");
}

/* The keyword that failed, for a record that must hold nothing of the
 * instance (the bridge's audit line): the message's own keyword. */
static void test_failed_keyword_is_named(void **state)
{
	static const struct {
		const char *schema, *instance, *kw;
	} cases[] = {
		{"{\"properties\": {\"a\": {\"type\": \"number\"}}}", "{\"a\": \"x\"}", "type"},
		{"{\"required\": [\"a\"]}", "{}", "required"},
		{"{\"additionalProperties\": false}", "{\"SECRET\": 1}", "additionalProperties"},
		{"{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"number\"}]}", "[]", "anyOf"},
		{"{\"properties\": {\"a\": false}}", "{\"a\": 1}", "false"},
		{"{\"items\": {\"maxLength\": 1}}", "[\"ab\"]", "maxLength"},
		{"{\"properties\": {\"a\": {\"type\": \"number\"}}}", "{\"a\": 1}", NULL},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct appl_err err = {0};
		struct schema *s = compile(cases[i].schema);
		json_t *inst = parse(cases[i].instance);
		const char *kw = "unset";
		int rc = schema_validate_kw(s, inst, &err, &kw);

		assert_int_equal(rc, cases[i].kw ? -EINVAL : 0);
		if (cases[i].kw)
			assert_string_equal(kw, cases[i].kw);
		else
			assert_null(kw);
		assert_int_equal(schema_validate_kw(s, inst, NULL, NULL), rc);
		json_decref(inst);
		schema_free(s);
	}
}

/* Compile once, validate many times; the schema document may be freed. */
static void test_reuse(void **state)
{
	struct appl_err err = {0};
	struct schema *s = NULL;
	json_t *doc = parse("{\"properties\": {\"a\": {\"pattern\": \"^[0-9]+$\"}}}");
	(void)state;
	assert_int_equal(schema_new(doc, &s, &err), 0);
	json_decref(doc);
	for (int i = 0; i < 1000; i++) {
		json_t *inst = json_pack("{s:s}", "a", i % 2 ? "123" : "12x");
		int rc = schema_validate(s, inst, &err);
		assert_int_equal(rc, i % 2 ? 0 : -EINVAL);
		json_decref(inst);
	}
	schema_free(s);
	schema_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type),
		cmocka_unit_test(test_properties),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_additional_properties),
		cmocka_unit_test(test_pattern_properties),
		cmocka_unit_test(test_property_names),
		cmocka_unit_test(test_min_max_properties),
		cmocka_unit_test(test_items_2020),
		cmocka_unit_test(test_items_draft07),
		cmocka_unit_test(test_contains),
		cmocka_unit_test(test_min_max_items_unique),
		cmocka_unit_test(test_enum_const),
		cmocka_unit_test(test_combinators),
		cmocka_unit_test(test_if_then_else),
		cmocka_unit_test(test_dependents),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_regex_dialect),
		cmocka_unit_test(test_boolean_schemas),
		cmocka_unit_test(test_refs),
		cmocka_unit_test(test_dialects),
		cmocka_unit_test(test_annotations_ignored),
		cmocka_unit_test(test_refuse_unsupported),
		cmocka_unit_test(test_refuse_other_dialect_keywords),
		cmocka_unit_test(test_refuse_ref_cycles),
		cmocka_unit_test(test_refuse_regex),
		cmocka_unit_test(test_refuse_malformed),
		cmocka_unit_test(test_new_buf),
		cmocka_unit_test(test_cap_nodes_and_depth),
		cmocka_unit_test(test_cap_instance_depth),
		cmocka_unit_test(test_cap_visits),
		cmocka_unit_test(test_cap_compares),
		cmocka_unit_test(test_cap_regex_backtracking),
		cmocka_unit_test(test_message_path_escaped),
		cmocka_unit_test(test_message_bounded),
		cmocka_unit_test(test_compile_message_bounded),
		cmocka_unit_test(test_message_no_value_echo),
		cmocka_unit_test(test_failed_keyword_is_named),
		cmocka_unit_test(test_reuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
