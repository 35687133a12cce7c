/* test_state.c: the rollback state: reading without change, committing,
 * refusals, the file's form and its protection. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sigkit.h"

#include "policy/state.h"

#define KEY "0123456789ABCDEF"
#define NOW 1738324800

struct fix {
	char *tmp;
	char dir[4096]; /* tmp/state, not created */
	unsigned char h1[POLICY_HASH_BYTES], h2[POLICY_HASH_BYTES];
};

static int fix_setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->tmp = kit_tmpdir();
	snprintf(f->dir, sizeof(f->dir), "%s/state", f->tmp);
	memset(f->h1, 1, sizeof(f->h1));
	memset(f->h2, 2, sizeof(f->h2));
	*state = f;
	return 0;
}

static int fix_teardown(void **state)
{
	struct fix *f = *state;

	kit_tmpdir_free(f->tmp);
	free(f);
	return 0;
}

static int commit(struct fix *f, uint64_t serial, const unsigned char *h, struct appl_err *err)
{
	return policy_state_commit(f->dir, serial, h, KEY, NOW, NULL, err);
}

static void test_read_missing_changes_nothing(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	assert_int_equal(policy_state_read(f->dir, &st, &err), 0);
	assert_false(st.present);
	assert_int_equal(access(f->dir, F_OK), -1); /* not created */
	assert_int_equal(policy_state_check(&st, 1, f->h1, &err), 0);
}

static void test_commit_and_read(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st, prev;
	struct stat sb;
	assert_int_equal(policy_state_commit(f->dir, 5, f->h1, KEY, NOW, &prev, &err), 0);
	assert_false(prev.present);
	assert_int_equal(stat(f->dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(policy_state_read(f->dir, &st, &err), 0);
	assert_true(st.present);
	assert_int_equal(st.serial, 5);
	assert_memory_equal(st.hash, f->h1, POLICY_HASH_BYTES);
	assert_string_equal(st.keyid_hex, KEY);
	assert_int_equal(st.accepted_at, NOW);
	/* the same policy again (a restart) is fine, and a higher serial */
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	assert_int_equal(policy_state_commit(f->dir, 6, f->h2, KEY, NOW, &prev, &err), 0);
	assert_int_equal(prev.serial, 5);
	assert_int_equal(policy_state_read(f->dir, &st, &err), 0);
	assert_int_equal(st.serial, 6);
	assert_int_equal(stat(kit_path(f->dir, "policy.state"), &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
}

static void test_rollback_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	assert_int_equal(commit(f, 4, f->h2, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "rollback"));
	assert_non_null(strstr(err.msg, "serial 4"));
	assert_int_equal(policy_state_read(f->dir, &st, &err), 0);
	assert_int_equal(st.serial, 5); /* unchanged */
	assert_int_equal(policy_state_check(&st, 4, f->h1, &err), -ESTALE);
}

static void test_same_serial_new_content_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	assert_int_equal(commit(f, 5, f->h2, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "different content"));
	assert_int_equal(policy_state_read(f->dir, &st, &err), 0);
	assert_memory_equal(st.hash, f->h1, POLICY_HASH_BYTES);
}

static void test_malformed_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	char good[512];
	static const char *const bad[] = {
		"",
		"appliance-policy-state 2\n",
		"appliance-policy-state 1\nserial 05\n",
		"appliance-policy-state 1\nserial 5\nsha256 "
		"0101010101010101010101010101010101010101010101010101010101010101\nkey "
		"0123456789ABCDEF\naccepted 2025-01-31T12:00:00Z\nextra\n",
		"appliance-policy-state 1\nserial 5\nsha256 "
		"0101010101010101010101010101010101010101010101010101010101010101\nkey "
		"0123456789abcdef\naccepted 2025-01-31T12:00:00Z\n",
		"appliance-policy-state 1\nserial 5\nsha256 "
		"0101010101010101010101010101010101010101010101010101010101010101\nkey "
		"0123456789ABCDEF\naccepted 2025-01-31T12:00:00Z",
	};
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	/* what commit wrote is the form documented */
	snprintf(good, sizeof(good),
		 "appliance-policy-state 1\nserial 5\nsha256 "
		 "0101010101010101010101010101010101010101010101010101010101010101\nkey "
		 "0123456789ABCDEF\naccepted 2025-01-31T12:00:00Z\n");
	{
		char *buf;
		size_t len;
		assert_int_equal(
			appl_file_read(kit_path(f->dir, "policy.state"), 4096, &buf, &len, &err),
			0);
		assert_int_equal(len, strlen(good));
		assert_memory_equal(buf, good, len);
		free(buf);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kit_write(kit_path(f->dir, "policy.state"), bad[i], strlen(bad[i]), 0600);
		assert_int_equal(policy_state_read(f->dir, &st, &err), -EINVAL);
		assert_false(st.present);
		/* a broken state is never taken for "nothing accepted yet" */
		assert_int_equal(commit(f, 1, f->h1, &err), -EINVAL);
	}
}

static void test_protection(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	char link[4096];
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	/* a state others could write could be reset to serial 0 */
	assert_int_equal(chmod(f->dir, 0770), 0);
	assert_int_equal(policy_state_read(f->dir, &st, &err), -EPERM);
	assert_int_equal(commit(f, 6, f->h1, &err), -EPERM);
	assert_int_equal(chmod(f->dir, 0700), 0);
	assert_int_equal(chmod(kit_path(f->dir, "policy.state"), 0606), 0);
	assert_int_equal(policy_state_read(f->dir, &st, &err), -EPERM);
	assert_int_equal(chmod(kit_path(f->dir, "policy.state"), 0600), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(kit_path(f->dir, "policy.state"), 65534, 65534), 0);
		assert_int_equal(policy_state_read(f->dir, &st, &err), -EPERM);
		assert_non_null(strstr(err.msg, "owned by uid 65534"));
		assert_int_equal(chown(kit_path(f->dir, "policy.state"), 0, 0), 0);
	}
	/* symlinks: the directory, the file */
	snprintf(link, sizeof(link), "%s/link", f->tmp);
	assert_int_equal(symlink(f->dir, link), 0);
	assert_int_equal(policy_state_read(link, &st, &err), -EPERM);
	assert_int_equal(rename(kit_path(f->dir, "policy.state"), kit_path(f->tmp, "real")), 0);
	assert_int_equal(symlink(kit_path(f->tmp, "real"), kit_path(f->dir, "policy.state")), 0);
	assert_int_equal(policy_state_read(f->dir, &st, &err), -EPERM);
	assert_non_null(strstr(err.msg, "symlink"));
}

static void test_file_replace(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	const char *p = kit_path(f->tmp, "x");
	char *buf;
	size_t len;
	struct stat st;
	kit_write(p, "old", 3, 0600);
	assert_int_equal(policy_file_replace(p, "new!", 4, 0644, &err), 0);
	assert_int_equal(appl_file_read(p, 64, &buf, &len, &err), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(buf, "new!", 4);
	free(buf);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(policy_file_replace(kit_path(f->tmp, "no/such/x"), "x", 1, 0644, &err),
			 -ENOENT);
}

static void test_default_dir(void **state)
{
	struct appl_err err = {0};
	char out[4096];
	(void)state;
	assert_int_equal(policy_state_dir_default(out, sizeof(out), &err), 0);
	if (geteuid() == 0)
		assert_string_equal(out, "/var/lib/appliance");
	else
		assert_non_null(strstr(out, "appliance"));
	assert_int_equal(policy_state_dir_default(out, 4, &err), -ENAMETOOLONG);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fix_setup, fix_teardown)
	const struct CMUnitTest tests[] = {
		T(test_read_missing_changes_nothing),
		T(test_commit_and_read),
		T(test_rollback_refused),
		T(test_same_serial_new_content_refused),
		T(test_malformed_refused),
		T(test_protection),
		T(test_file_replace),
		T(test_default_dir),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
