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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
