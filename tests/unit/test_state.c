/* test_state.c: the rollback floor: reading without change, committing per
 * deployment, refusals, the file's form, the earlier format, the cap, and
 * the protection of the directory, its parents and the file. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sigkit.h"

#include "policy/state.h"

#define KEY "0123456789ABCDEF"
#define NOW 1738324800 /* 2025-01-31T12:00:00Z */
#define H1  "0101010101010101010101010101010101010101010101010101010101010101"
#define DEP "default"

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

static int commit_dep(struct fix *f, const char *dep, uint64_t serial, const unsigned char *h,
		      struct appl_err *err)
{
	return policy_state_commit(f->dir, dep, serial, h, KEY, NOW, NULL, err);
}

static int commit(struct fix *f, uint64_t serial, const unsigned char *h, struct appl_err *err)
{
	return commit_dep(f, DEP, serial, h, err);
}

static uint64_t serial_of(struct fix *f, const char *dep)
{
	struct appl_err err = {0};
	struct policy_state st;

	assert_int_equal(policy_state_read(f->dir, dep, &st, &err), 0);
	return st.present ? st.serial : 0;
}

static void file_is(struct fix *f, const char *want)
{
	struct appl_err err = {0};
	char *buf;
	size_t len;

	assert_int_equal(
		appl_file_read(kit_path(f->dir, "policy.state"), 1 << 20, &buf, &len, &err), 0);
	if (len != strlen(want) || memcmp(buf, want, len) != 0)
		fail_msg("state file is\n%s\nnot\n%s", buf, want);
	free(buf);
}

static void test_read_missing_changes_nothing(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), 0);
	assert_false(st.present);
	assert_int_equal(access(f->dir, F_OK), -1); /* not created */
	assert_int_equal(policy_state_check(&st, 1, f->h1, &err), 0);
	/* nor are missing parents */
	assert_int_equal(policy_state_read(kit_path(f->tmp, "a/b/c"), DEP, &st, &err), 0);
	assert_int_equal(access(kit_path(f->tmp, "a"), F_OK), -1);
}

static void test_commit_and_read(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st, prev;
	struct stat sb;
	assert_int_equal(policy_state_commit(f->dir, DEP, 5, f->h1, KEY, NOW, &prev, &err), 0);
	assert_false(prev.present);
	assert_int_equal(stat(f->dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), 0);
	assert_true(st.present);
	assert_int_equal(st.serial, 5);
	assert_memory_equal(st.hash, f->h1, POLICY_HASH_BYTES);
	assert_string_equal(st.keyid_hex, KEY);
	assert_int_equal(st.accepted_at, NOW);
	/* the form documented */
	file_is(f, "appliance-policy-state 2\ndefault 5 " H1 " " KEY " 2025-01-31T12:00:00Z\n");
	/* the same policy again (a restart) is fine, and a higher serial */
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	assert_int_equal(policy_state_commit(f->dir, DEP, 6, f->h2, KEY, NOW, &prev, &err), 0);
	assert_int_equal(prev.serial, 5);
	assert_int_equal(serial_of(f, DEP), 6);
	assert_int_equal(stat(kit_path(f->dir, "policy.state"), &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	/* missing parents are made too, each 0700 */
	snprintf(f->dir, sizeof(f->dir), "%s/x/y/state", f->tmp);
	assert_int_equal(commit(f, 1, f->h1, &err), 0);
	assert_int_equal(stat(kit_path(f->tmp, "x"), &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0700);
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
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), 0);
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
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), 0);
	assert_memory_equal(st.hash, f->h1, POLICY_HASH_BYTES);
}

/* Two deployments on one host do not block each other, and each keeps its
 * own floor; the lines stay in order whatever order they came in. */
static void test_deployments_are_apart(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	assert_int_equal(commit_dep(f, "prod", 900, f->h1, &err), 0);
	assert_int_equal(commit_dep(f, "b-staging", 3, f->h1, &err), 0);
	assert_int_equal(commit_dep(f, "a", 7, f->h1, &err), 0);
	assert_int_equal(commit_dep(f, "prod-2", 1, f->h1, &err), 0);
	assert_int_equal(commit_dep(f, "b-staging", 4, f->h2, &err), 0);
	assert_int_equal(commit_dep(f, "prod", 899, f->h2, &err), -ESTALE);
	assert_int_equal(commit_dep(f, "b-staging", 3, f->h1, &err), -ESTALE);
	assert_int_equal(serial_of(f, "prod"), 900);
	assert_int_equal(serial_of(f, "b-staging"), 4);
	assert_int_equal(serial_of(f, "a"), 7);
	assert_int_equal(serial_of(f, "prod-2"), 1);
	assert_int_equal(serial_of(f, "pro"), 0);
	assert_int_equal(serial_of(f, DEP), 0);
	{
		const char *want =
			"appliance-policy-state 2\n"
			"a 7 " H1 " " KEY " 2025-01-31T12:00:00Z\n"
			"b-staging 4 "
			"0202020202020202020202020202020202020202020202020202020202020202 " KEY
			" 2025-01-31T12:00:00Z\n"
			"prod 900 " H1 " " KEY " 2025-01-31T12:00:00Z\n"
			"prod-2 1 " H1 " " KEY " 2025-01-31T12:00:00Z\n";
		file_is(f, want);
	}
	/* a name the policy could not carry is refused, not recorded */
	assert_int_equal(commit_dep(f, "Prod", 1, f->h1, &err), -EINVAL);
	assert_int_equal(commit_dep(f, "", 1, f->h1, &err), -EINVAL);
	assert_int_equal(commit_dep(f, "a b", 1, f->h1, &err), -EINVAL);
}

/* A floor of the earlier format (one serial) is the default deployment's:
 * it still holds, and the next commit rewrites it in format 2. */
static void test_format_1_is_the_default_deployment(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	static const char v1[] = "appliance-policy-state 1\nserial 42\nsha256 " H1 "\nkey " KEY
				 "\naccepted 2025-01-31T12:00:00Z\n";
	assert_int_equal(mkdir(f->dir, 0700), 0);
	kit_write(kit_path(f->dir, "policy.state"), v1, strlen(v1), 0600);
	assert_int_equal(serial_of(f, DEP), 42);
	assert_int_equal(serial_of(f, "other"), 0);
	assert_int_equal(commit(f, 41, f->h1, &err), -ESTALE);
	assert_int_equal(commit(f, 42, f->h2, &err), -ESTALE);
	file_is(f, v1); /* refusals change nothing */
	assert_int_equal(commit_dep(f, "other", 1, f->h1, &err), 0);
	file_is(f, "appliance-policy-state 2\n"
		   "default 42 " H1 " " KEY " 2025-01-31T12:00:00Z\n"
		   "other 1 " H1 " " KEY " 2025-01-31T12:00:00Z\n");
	assert_int_equal(commit(f, 41, f->h1, &err), -ESTALE);
}

static void test_malformed_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
#define LINE(name) name " 5 " H1 " " KEY " 2025-01-31T12:00:00Z\n"
	static const char *const bad[] = {
		"",
		"appliance-policy-state 3\n",
		"appliance-policy-state 2",
		"appliance-policy-state 2\n" LINE("b") LINE("a"), /* out of order */
		"appliance-policy-state 2\n" LINE("a") LINE("a"), /* twice */
		"appliance-policy-state 2\n" LINE("A"),		  /* not a deployment name */
		"appliance-policy-state 2\n" LINE("a") "extra\n", /* a stray line */
		"appliance-policy-state 2\na 05 " H1 " " KEY " 2025-01-31T12:00:00Z\n",
		"appliance-policy-state 2\na 5 " H1 " 0123456789abcdef 2025-01-31T12:00:00Z\n",
		"appliance-policy-state 2\na 5 " H1 " " KEY " 2025-01-31T12:00:00Z",
		"appliance-policy-state 2\na 5 " H1 " " KEY " 2025-01-31T12:00:00Z extra\n",
		"appliance-policy-state 2\na  5 " H1 " " KEY " 2025-01-31T12:00:00Z\n",
		"appliance-policy-state 1\nserial 05\n",
		"appliance-policy-state 1\nserial 5\nsha256 " H1 "\nkey " KEY
		"\naccepted 2025-01-31T12:00:00Z\nextra\n",
		"appliance-policy-state 1\nserial 5\nsha256 " H1
		"\nkey 0123456789abcdef\naccepted 2025-01-31T12:00:00Z\n",
		"appliance-policy-state 1\nserial 5\nsha256 " H1 "\nkey " KEY
		"\naccepted 2025-01-31T12:00:00Z",
	};
#undef LINE
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		kit_write(kit_path(f->dir, "policy.state"), bad[i], strlen(bad[i]), 0600);
		assert_int_equal(policy_state_read(f->dir, "a", &st, &err), -EINVAL);
		assert_false(st.present);
		assert_non_null(strstr(err.msg, "malformed"));
		/* a broken floor is never taken for "nothing accepted yet" */
		assert_int_equal(commit(f, 1, f->h1, &err), -EINVAL);
		assert_int_equal(commit_dep(f, "zz", 1, f->h1, &err), -EINVAL);
	}
}

/* The floor has room for APPL_POLICY_DEPLOYMENTS_MAX deployments; one more
 * is a clear error, and those recorded can still move on. */
static void test_full_floor(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	size_t cap = 32 + (size_t)APPL_POLICY_DEPLOYMENTS_MAX * APPL_POLICY_FLOOR_LINE_MAX, n;
	char *text = malloc(cap);
	assert_non_null(text);
	n = (size_t)snprintf(text, cap, "appliance-policy-state 2\n");
	for (unsigned i = 0; i < APPL_POLICY_DEPLOYMENTS_MAX; i++)
		n += (size_t)snprintf(text + n, cap - n,
				      "d%05u 7 " H1 " " KEY " 2025-01-31T12:00:00Z\n", i);
	assert_int_equal(mkdir(f->dir, 0700), 0);
	kit_write(kit_path(f->dir, "policy.state"), text, n, 0600);
	free(text);
	assert_int_equal(serial_of(f, "d65535"), 7);
	assert_int_equal(commit_dep(f, "e", 1, f->h1, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "full, 65536 deployments"));
	assert_int_equal(serial_of(f, "e"), 0);
	assert_int_equal(commit_dep(f, "d00000", 8, f->h1, &err), 0);
	assert_int_equal(commit_dep(f, "d65535", 8, f->h1, &err), 0);
	assert_int_equal(serial_of(f, "d00000"), 8);
	assert_int_equal(serial_of(f, "d65535"), 8);
	assert_int_equal(serial_of(f, "d32768"), 7);
}

static void test_protection(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	char link[4096];
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	/* a floor others could write could be reset to serial 0 */
	assert_int_equal(chmod(f->dir, 0770), 0);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
	assert_int_equal(commit(f, 6, f->h1, &err), -EPERM);
	assert_int_equal(chmod(f->dir, 0700), 0);
	assert_int_equal(chmod(kit_path(f->dir, "policy.state"), 0606), 0);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
	assert_int_equal(chmod(kit_path(f->dir, "policy.state"), 0600), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(kit_path(f->dir, "policy.state"), 65534, 65534), 0);
		assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
		assert_non_null(strstr(err.msg, "owned by uid 65534"));
		assert_int_equal(chown(kit_path(f->dir, "policy.state"), 0, 0), 0);
	}
	/* symlinks: the directory, the file */
	snprintf(link, sizeof(link), "%s/link", f->tmp);
	assert_int_equal(symlink(f->dir, link), 0);
	assert_int_equal(policy_state_read(link, DEP, &st, &err), -EPERM);
	assert_non_null(strstr(err.msg, "symlink"));
	assert_int_equal(rename(kit_path(f->dir, "policy.state"), kit_path(f->tmp, "real")), 0);
	assert_int_equal(symlink(kit_path(f->tmp, "real"), kit_path(f->dir, "policy.state")), 0);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
	assert_non_null(strstr(err.msg, "symlink"));
}

/* A parent of the floor that someone else owns, or may write to, could
 * have the floor renamed away and an empty one put in its place. */
static void test_parents_are_checked(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	char parent[4096], link[4096];
	snprintf(parent, sizeof(parent), "%s/p", f->tmp);
	snprintf(f->dir, sizeof(f->dir), "%s/p/state", f->tmp);
	assert_int_equal(commit(f, 5, f->h1, &err), 0);
	/* writable by others, without the sticky bit */
	assert_int_equal(chmod(parent, 0777), 0);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
	assert_non_null(strstr(err.msg, "writable by group or others"));
	assert_non_null(strstr(err.msg, parent));
	assert_int_equal(commit(f, 6, f->h1, &err), -EPERM);
	/* with it (like /tmp), others cannot rename our entries */
	assert_int_equal(chmod(parent, 01777), 0);
	assert_int_equal(serial_of(f, DEP), 5);
	assert_int_equal(chmod(parent, 0755), 0);
	if (geteuid() == 0) {
		/* owned by an ordinary user, who could rename the floor away */
		assert_int_equal(chown(parent, 65534, 65534), 0);
		assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
		assert_non_null(strstr(err.msg, "owned by uid 65534"));
		assert_int_equal(commit(f, 6, f->h1, &err), -EPERM);
		assert_int_equal(chown(parent, 0, 0), 0);
	}
	/* a symlink on the way */
	snprintf(link, sizeof(link), "%s/plink", f->tmp);
	assert_int_equal(symlink(parent, link), 0);
	snprintf(f->dir, sizeof(f->dir), "%s/plink/state", f->tmp);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EPERM);
	assert_non_null(strstr(err.msg, "symlink"));
	assert_int_equal(commit(f, 6, f->h1, &err), -EPERM);
	/* and no ".." to step around the checks */
	snprintf(f->dir, sizeof(f->dir), "%s/p/../p/state", f->tmp);
	assert_int_equal(policy_state_read(f->dir, DEP, &st, &err), -EINVAL);
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

/* init's --output: never over a file that is there, nothing left behind. */
static void test_file_create(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char p[4096], *buf;
	size_t len;
	struct stat st;
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(p, sizeof(p), "%s", kit_path(f->tmp, "made"));
	assert_int_equal(policy_file_create(p, "first", 5, 0644, &err), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(policy_file_create(p, "second", 6, 0644, &err), -EEXIST);
	assert_string_equal(err.msg, kit_path(f->tmp, "made exists"));
	assert_int_equal(appl_file_read(p, 64, &buf, &len, &err), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(buf, "first", 5);
	free(buf);
	/* a dangling symlink is there too */
	assert_int_equal(symlink(kit_path(f->tmp, "nowhere"), kit_path(f->tmp, "dangling")), 0);
	assert_int_equal(policy_file_create(kit_path(f->tmp, "dangling"), "x", 1, 0644, &err),
			 -EEXIST);
	assert_int_equal(access(kit_path(f->tmp, "nowhere"), F_OK), -1);
	/* no temporary file stays */
	assert_non_null(d = opendir(f->tmp));
	while ((e = readdir(d)))
		n += strstr(e->d_name, ".tmp.") != NULL;
	closedir(d);
	assert_int_equal(n, 0);
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
		T(test_deployments_are_apart),
		T(test_format_1_is_the_default_deployment),
		T(test_malformed_refused),
		T(test_full_floor),
		T(test_protection),
		T(test_parents_are_checked),
		T(test_file_replace),
		T(test_file_create),
		T(test_default_dir),
	};
#undef T
	return cmocka_run_group_tests(tests, kit_sodium_setup, NULL);
}
