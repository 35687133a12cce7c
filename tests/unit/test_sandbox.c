/* test_sandbox.c: which runsc releases the appliance accepts
 * (sandbox_runsc_version_parse and _check, pkg/sandbox/version.c), and
 * what a freezer's state file says (sandbox_freezer_parse,
 * pkg/sandbox/cgroup.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sandbox/runsc.h"

static void parses(const char *out, unsigned date, unsigned patch, const char *text)
{
	struct sandbox_runsc_version v;

	if (sandbox_runsc_version_parse(out, strlen(out), &v) != 0)
		fail_msg("refused: %s", out);
	assert_int_equal(v.date, date);
	assert_int_equal(v.patch, patch);
	assert_string_equal(v.text, text);
}

static void refuses(const char *out)
{
	struct sandbox_runsc_version v;

	if (sandbox_runsc_version_parse(out, strlen(out), &v) != -EINVAL)
		fail_msg("accepted: %s", out);
}

static void test_version_forms(void **state)
{
	(void)state;
	/* Debian's builds, gVisor's own, and a bare one */
	parses("runsc version 0.0~20240729.0\nspec: 1.0.2-dev\n", 20240729, 0, "0.0~20240729.0");
	parses("runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", 20221219, 0, "0.0~20221219.0");
	parses("runsc version release-20250512.0\nspec: 1.1.0\n", 20250512, 0,
	       "release-20250512.0");
	parses("runsc version release-20240729.12-dirty\n", 20240729, 12,
	       "release-20240729.12-dirty");
	parses("runsc version 20260101.3", 20260101, 3, "20260101.3");
}

static void test_version_refusals(void **state)
{
	(void)state;
	refuses("");
	refuses("runsc version \n");
	refuses("version 0.0~20240729.0\n");
	refuses("runsc  version 0.0~20240729.0\n");
	refuses("runsc version 0.0~2024072.0\n");	 /* seven digits */
	refuses("runsc version 0.0~120240729.0\n");	 /* nine */
	refuses("runsc version 0.0~20240729\n");	 /* no patch */
	refuses("runsc version 0.0~20240729.\n");	 /* an empty one */
	refuses("runsc version 0.0~10240729.0\n");	 /* not a date of gVisor's */
	refuses("runsc version 0.0~20240729.0 extra\n"); /* a space in it */
	refuses("runsc version 0.0~2024\x01"
		"0729.0\n");				 /* a control character */
	refuses("runsc version 0.0~20240729.1234567\n"); /* a patch beyond reason */
	refuses("spec: 1.0.2-dev\nrunsc version 0.0~20240729.0\n");
}

static void test_version_check(void **state)
{
	struct appl_err err = {0};
	struct sandbox_runsc_version v = {.date = APPL_RUNSC_TESTED_DATE,
					  .patch = APPL_RUNSC_TESTED_PATCH};
	(void)state;
	snprintf(v.text, sizeof(v.text), "the tested one");
	assert_int_equal(sandbox_runsc_version_check(&v, "/usr/bin/runsc", &err), 0);
	v.patch++;
	assert_int_equal(sandbox_runsc_version_check(&v, "/usr/bin/runsc", &err), 0);
	v.date++;
	v.patch = 0;
	assert_int_equal(sandbox_runsc_version_check(&v, "/usr/bin/runsc", &err), 0);
	/* the release Debian 12 itself ships: refused, naming both */
	v.date = 20221219;
	snprintf(v.text, sizeof(v.text), "0.0~20221219.0");
	assert_int_equal(sandbox_runsc_version_check(&v, "/usr/bin/runsc", &err), -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "/usr/bin/runsc is version 0.0~20221219.0"));
	assert_non_null(strstr(err.msg, "older than 20240729.0"));
}

static enum sandbox_freezer_state freezer_says(const char *text, bool v2)
{
	enum sandbox_freezer_state st = (enum sandbox_freezer_state) - 1;

	if (sandbox_freezer_parse(text, v2, &st) != 0)
		fail_msg("refused: %s", text);
	return st;
}

static void freezer_refuses(const char *text, bool v2)
{
	enum sandbox_freezer_state st;

	if (sandbox_freezer_parse(text, v2, &st) != -EINVAL)
		fail_msg("accepted: %s", text);
}

static void test_freezer_v1(void **state)
{
	(void)state;
	/* freezer.state as the kernel writes it, and without its newline */
	assert_int_equal(freezer_says("FROZEN\n", false), SANDBOX_FROZEN);
	assert_int_equal(freezer_says("FREEZING\n", false), SANDBOX_FREEZING);
	assert_int_equal(freezer_says("THAWED\n", false), SANDBOX_THAWED);
	assert_int_equal(freezer_says("FROZEN", false), SANDBOX_FROZEN);
	freezer_refuses("", false);
	freezer_refuses("\n", false);
	freezer_refuses("frozen\n", false);
	freezer_refuses("FROZENX\n", false);
	freezer_refuses("FROZEN\n\n", false);
	freezer_refuses("FROZEN \n", false);
	freezer_refuses(" FROZEN\n", false);
	freezer_refuses("THAW\n", false);
	/* v2's file is not v1's */
	freezer_refuses("populated 1\nfrozen 1\n", false);
}

static void test_freezer_v2(void **state)
{
	(void)state;
	/* cgroup.events: the frozen key, wherever it is */
	assert_int_equal(freezer_says("populated 1\nfrozen 1\n", true), SANDBOX_FROZEN);
	assert_int_equal(freezer_says("populated 1\nfrozen 0\n", true), SANDBOX_THAWED);
	assert_int_equal(freezer_says("frozen 1\npopulated 0\n", true), SANDBOX_FROZEN);
	assert_int_equal(freezer_says("populated 0\nfrozen 0", true), SANDBOX_THAWED);
	/* no key, another key with the name inside it, a value that is no bit */
	freezer_refuses("populated 1\n", true);
	freezer_refuses("", true);
	freezer_refuses("unfrozen 1\npopulated 1\n", true);
	freezer_refuses("populated 1\nfrozen 2\n", true);
	freezer_refuses("populated 1\nfrozen x\n", true);
	freezer_refuses("populated 1\nfrozen\n", true);
	/* v1's word is not v2's */
	freezer_refuses("FROZEN\n", true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_version_forms), cmocka_unit_test(test_version_refusals),
		cmocka_unit_test(test_version_check), cmocka_unit_test(test_freezer_v1),
		cmocka_unit_test(test_freezer_v2),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
