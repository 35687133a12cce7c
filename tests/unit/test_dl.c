/* test_dl.c: a library loaded when first needed (pkg/base/dl.c): its
 * functions filled in, and a missing library or function refused with one
 * line saying which (and the Debian package to install), on the first call
 * and every later one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/dl.h"

static void test_a_library_and_its_functions_are_filled_in(void **state)
{
	pid_t (*my_getpid)(void) = NULL;
	size_t (*my_strlen)(const char *) = NULL;
	const struct appl_dl_sym syms[] = {{"getpid", (void **)&my_getpid},
					   {"strlen", (void **)&my_strlen}};
	struct appl_dl_lib lib = APPL_DL_LIB("libc.so.6", NULL, syms);
	struct appl_err err = {0};

	(void)state;
	assert_int_equal(appl_dl_load(&lib, &err), 0);
	assert_int_equal(err.code, 0);
	assert_int_equal(my_getpid(), getpid());
	assert_int_equal(my_strlen("four"), 4);
	/* loaded once: a second call keeps what the first filled in */
	my_getpid = NULL;
	assert_int_equal(appl_dl_load(&lib, &err), 0);
	assert_null(my_getpid);
}

static void test_a_missing_library_is_named_every_time(void **state)
{
	void (*f)(void) = NULL;
	const struct appl_dl_sym syms[] = {{"nothing", (void **)&f}};
	struct appl_dl_lib lib =
		APPL_DL_LIB("libappliance-no-such-library.so.1", "libappliance-nothing1", syms);
	struct appl_err err = {0}, again = {0};
	const char *tail = "; install the Debian package libappliance-nothing1";

	(void)state;
	assert_int_equal(appl_dl_load(&lib, &err), -EIO);
	assert_int_equal(err.code, -EIO);
	assert_non_null(strstr(err.msg, "libappliance-no-such-library.so.1 could not be loaded: "));
	/* the dlerror() text first, then the package to install, last */
	assert_true(strlen(err.msg) > strlen(tail));
	assert_string_equal(err.msg + strlen(err.msg) - strlen(tail), tail);
	assert_int_equal(appl_dl_load(&lib, &again), -EIO);
	assert_string_equal(again.msg, err.msg);
	assert_int_equal(appl_dl_load(&lib, NULL), -EIO);
	assert_null(f);
}

static void test_no_package_is_named_when_none_is_given(void **state)
{
	void (*f)(void) = NULL;
	const struct appl_dl_sym syms[] = {{"nothing", (void **)&f}};
	struct appl_dl_lib lib = APPL_DL_LIB("libappliance-no-such-library.so.1", NULL, syms);
	struct appl_err err = {0};

	(void)state;
	assert_int_equal(appl_dl_load(&lib, &err), -EIO);
	assert_null(strstr(err.msg, "Debian package"));
	assert_non_null(strstr(err.msg, "could not be loaded: "));
}

static void test_a_missing_function_is_named(void **state)
{
	pid_t (*my_getpid)(void) = NULL;
	void (*f)(void) = NULL;
	const struct appl_dl_sym syms[] = {{"getpid", (void **)&my_getpid},
					   {"appl_no_such_function", (void **)&f}};
	struct appl_dl_lib lib = APPL_DL_LIB("libc.so.6", NULL, syms);
	struct appl_err err = {0};

	(void)state;
	assert_int_equal(appl_dl_load(&lib, &err), -EIO);
	assert_string_equal(err.msg, "libc.so.6 has no appl_no_such_function");
	assert_null(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_library_and_its_functions_are_filled_in),
		cmocka_unit_test(test_a_missing_library_is_named_every_time),
		cmocka_unit_test(test_no_package_is_named_when_none_is_given),
		cmocka_unit_test(test_a_missing_function_is_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
