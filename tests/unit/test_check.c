/* test_check.c: pkg/check's public face (check.h): the report goes to the
 * print hook and nowhere else, and a policy the accept hook refuses ends
 * the check at once, counted as a problem, before anything starts.
 * Everything past the signature needs runsc and a cell image:
 * tests/integration/test_check.py. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "check/check.h"

struct seen {
	char text[1024];
	size_t len;
	unsigned accepts;
};

static void on_print(void *data, const char *text)
{
	struct seen *s = data;
	size_t n = strlen(text);

	assert_true(s->len + n < sizeof(s->text));
	memcpy(s->text + s->len, text, n + 1);
	s->len += n;
}

static int on_refuse(void *data, struct check_policy *out, struct appl_err *err)
{
	(void)out;
	((struct seen *)data)->accepts++;
	return appl_err_set(err, -EKEYREJECTED, "signed by a key not trusted");
}

static void test_refused(void **state)
{
	struct seen s = {.len = 0};
	struct check_options o = {.policy = "/nowhere/p.json.sig",
				  .hooks = {.data = &s, .print = on_print, .accept = on_refuse}};
	struct check_report r = {.problems = 9};
	struct appl_err err = {0};
	struct check *c;

	(void)state;
	assert_int_equal(check_new(&o, &c, &err), 0);
	check_run(c, &r);
	check_free(c);
	assert_string_equal(s.text, "check of /nowhere/p.json.sig\n\n"
				    "problem signature: signed by a key not trusted\n");
	assert_int_equal(s.accepts, 1);
	assert_int_equal(r.problems, 1);
	assert_int_equal(r.warnings, 0);
	assert_int_equal(r.surprises, 0);
	check_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
