/* test_json.c: strict JSON loading. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "json/json.h"

static json_t *load(const char *s, struct appl_err *err)
{
	return appl_json_load(s, strlen(s), 1024, 4, "doc", err);
}

static void test_valid_object(void **state)
{
	struct appl_err err = {0};
	json_t *v = load("{\"a\": [1, 2, {\"b\": null}]}", &err);
	(void)state;
	assert_non_null(v);
	assert_int_equal(json_array_size(json_object_get(v, "a")), 3);
	json_decref(v);
}

static void test_duplicate_key_refused(void **state)
{
	struct appl_err err = {0};
	(void)state;
	assert_null(load("{\"a\": 1, \"a\": 2}", &err));
	assert_int_equal(err.code, -EINVAL);
	assert_non_null(strstr(err.msg, "duplicate"));
}

static void test_depth_refused(void **state)
{
	struct appl_err err = {0};
	(void)state;
	json_t *ok = load("[[[[1]]]]", &err);
	assert_non_null(ok);
	json_decref(ok);
	assert_null(load("[[[[[1]]]]]", &err));
	assert_int_equal(err.code, -E2BIG);
	/* brackets inside strings do not count, escaped quotes do not end them */
	json_t *v = load("[\"[[[[[[\\\"[[[[\"]", &err);
	assert_non_null(v);
	json_decref(v);
}

static void test_size_refused_before_parse(void **state)
{
	struct appl_err err = {0};
	char big[2048];
	(void)state;
	memset(big, ' ', sizeof(big));
	big[0] = '1';
	assert_null(appl_json_load(big, sizeof(big), 1024, 4, "doc", &err));
	assert_int_equal(err.code, -EFBIG);
}

static void test_trailing_and_nul_refused(void **state)
{
	struct appl_err err = {0};
	(void)state;
	assert_null(load("{} {}", &err));
	assert_null(load("[\"a\\u0000b\"]", &err));
	assert_null(appl_json_load("[1]\0", 4, 1024, 4, "doc", &err));
	/* between tokens too, where jansson itself would step over it */
	assert_null(appl_json_load("{\"a\": 7\0, \"b\": 1}", 17, 1024, 4, "doc", &err));
	assert_string_equal(err.msg, "doc: a NUL byte at offset 7 (JSON text holds none)");
	assert_null(load("", &err));
}

static void test_keys_check(void **state)
{
	struct appl_err err = {0};
	static const char *const allowed[] = {"a", "b", NULL};
	json_t *v = load("{\"a\": 1, \"c\": 2}", &err);
	(void)state;
	assert_non_null(v);
	assert_int_equal(appl_json_keys_check(v, allowed, "top", &err), -EINVAL);
	assert_string_equal(err.msg, "top.c: unknown key");
	json_decref(v);
}

static void test_err_sanitizes_control_chars(void **state)
{
	struct appl_err err = {0};
	(void)state;
	appl_err_set(&err, -EINVAL, "name %s", "a\nb\x1b");
	assert_string_equal(err.msg, "name a?b?");
	/* valid UTF-8 stays; invalid bytes, overlongs, surrogates and a
	 * sequence cut at the end do not */
	appl_err_set(&err, -EINVAL, "%s", "h\xc3\xa9 \xff \xc0\xaf \xed\xa0\x80 \xe2\x82");
	assert_string_equal(err.msg, "h\xc3\xa9 ? ?? ??? ??");
}

static void size_is(const json_t *v)
{
	size_t want = json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);

	assert_true(want > 0);
	assert_int_equal(appl_json_size(v), want);
}

/* The size counted without encoding is the encoder's to the byte: every
 * escape, UTF-8, numbers of each kind, nesting, empty containers. */
static void test_size_matches_the_encoder(void **state)
{
	static const char *const docs[] = {
		"\"\"",
		"\"plain\"",
		"\"q\\\" b\\\\ s/ \\b\\f\\n\\r\\t \\u0001\\u001f \\u007f\"",
		"\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\u2028\"",
		"0",
		"-1",
		"9223372036854775807",
		"-9223372036854775808",
		"1.5",
		"1e300",
		"-0.0",
		"1e-7",
		"0.1",
		"true",
		"false",
		"null",
		"[]",
		"{}",
		"[[],{}]",
		"{\"a\":1,\"b\\n\":[true,false,null,\"x\"],\"\xc3\xa9\":{\"c\":{}}}",
		"[1,2.25,\"three\",[4,[5,[6]]],{\"k\":\"\\t\"}]",
	};
	char buf[256];
	json_t *v;
	(void)state;

	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		v = json_loads(docs[i], JSON_DECODE_ANY, NULL);
		assert_non_null(v);
		size_is(v);
		json_decref(v);
	}
	/* every byte value below 0x80 in a string and in a key */
	for (int c = 1; c < 0x80; c++) {
		buf[0] = (char)c;
		buf[1] = 'x';
		v = json_pack("{s:s#}", "k", buf, (int)2);
		size_is(v);
		json_decref(v);
		buf[2] = '\0';
		v = json_object();
		json_object_set_new(v, buf, json_integer(c));
		size_is(v);
		json_decref(v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_object),
		cmocka_unit_test(test_duplicate_key_refused),
		cmocka_unit_test(test_depth_refused),
		cmocka_unit_test(test_size_refused_before_parse),
		cmocka_unit_test(test_trailing_and_nul_refused),
		cmocka_unit_test(test_keys_check),
		cmocka_unit_test(test_err_sanitizes_control_chars),
		cmocka_unit_test(test_size_matches_the_encoder),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
