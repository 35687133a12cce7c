/* test_trust.c: trust directories (owner, modes, symlinks), key files and
 * key pairs on disk. Some refusals need another owner: as root the files
 * are given to uid 65534; otherwise the root-only loader is used, which
 * refuses our own files for the same reason. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sigkit.h"

#include "policy/trust.h"

#define NOBODY 65534

struct fix {
	char *tmp;	     /* 0700, ours */
	char dir[4096];	     /* tmp/trusted.d, 0755 */
	struct kit_key a, b; /* a.pub and b.pub in dir */
};

static void key_file(const char *path, const struct kit_key *k, mode_t mode)
{
	char text[256];
	size_t len = kit_pub_text(k, text, sizeof(text));
	kit_write(path, text, len, mode);
}

static int fix_setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->tmp = kit_tmpdir();
	snprintf(f->dir, sizeof(f->dir), "%s/trusted.d", f->tmp);
	assert_int_equal(mkdir(f->dir, 0755), 0);
	assert_int_equal(chmod(f->dir, 0755), 0);
	kit_key_new(&f->a);
	kit_key_new(&f->b);
	key_file(kit_path(f->dir, "a.pub"), &f->a, 0644);
	key_file(kit_path(f->dir, "b.pub"), &f->b, 0644);
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

/* Load f->dir with us as the owner (as root: exactly policy_trust_dir_load). */
static int load(const char *dir, struct policy_trust **t, struct appl_err *err)
{
	return policy_trust_dir_load_owner(dir, geteuid(), t, err);
}

static void test_dir_loads(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	const struct policy_pubkey *k;
	/* ignored: not *.pub, hidden */
	kit_write(kit_path(f->dir, "README"), "x", 1, 0644);
	kit_write(kit_path(f->dir, ".old.pub"), "x", 1, 0644);
	assert_int_equal(load(f->dir, &t, &err), 0);
	assert_int_equal(policy_trust_count(t), 2);
	k = policy_trust_find(t, f->a.keyid);
	assert_non_null(k);
	assert_memory_equal(k->pk, f->a.pk, 32);
	assert_non_null(policy_trust_find(t, f->b.keyid));
	policy_trust_free(t);
	if (geteuid() == 0) {
		assert_int_equal(policy_trust_dir_load(f->dir, &t, &err), 0);
		policy_trust_free(t);
	}
}

static void test_dir_relative_path(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->tmp), 0);
	assert_int_equal(load("trusted.d", &t, &err), 0);
	policy_trust_free(t);
	assert_int_equal(load("trusted.d/../trusted.d", &t, &err), -EINVAL);
	assert_int_equal(chdir(cwd), 0);
}

static void test_dir_writable_by_others_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	assert_int_equal(chmod(f->dir, 0757), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	assert_null(t);
	assert_non_null(strstr(err.msg, f->dir));
	assert_non_null(strstr(err.msg, "writable by group or others"));
	assert_int_equal(chmod(f->dir, 0775), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	/* the sticky bit excuses a parent, never the directory itself */
	assert_int_equal(chmod(f->dir, 01777), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
}

static void test_dir_not_root_owned_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	if (geteuid() == 0)
		assert_int_equal(chown(f->dir, NOBODY, NOBODY), 0);
	assert_int_equal(policy_trust_dir_load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "owned by uid"));
	assert_non_null(strstr(err.msg, "not root"));
	/* as root: trusted.d; else already its parent, which is ours */
	assert_non_null(strstr(err.msg, f->tmp));
}

static void test_parent_writable_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	/* whoever may write the parent may swap the directory for their own */
	assert_int_equal(chmod(f->tmp, 0777), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, f->tmp));
	assert_null(strstr(err.msg, "trusted.d"));
	/* with the sticky bit (like /tmp) others cannot rename our entries */
	assert_int_equal(chmod(f->tmp, 01777), 0);
	assert_int_equal(load(f->dir, &t, &err), 0);
	policy_trust_free(t);
	assert_int_equal(chmod(f->tmp, 0700), 0);
}

static void test_key_writable_by_others_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	assert_int_equal(chmod(kit_path(f->dir, "b.pub"), 0646), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "b.pub"));
	assert_non_null(strstr(err.msg, "writable by group or others"));
	assert_int_equal(chmod(kit_path(f->dir, "b.pub"), 0664), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
}

static void test_key_not_root_owned_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	if (geteuid() != 0)
		skip(); /* the directory refusal above covers the non-root case */
	assert_int_equal(chown(kit_path(f->dir, "a.pub"), NOBODY, NOBODY), 0);
	assert_int_equal(policy_trust_dir_load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "a.pub"));
	assert_non_null(strstr(err.msg, "owned by uid 65534"));
}

static void test_symlinks_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	char link[4096];
	/* the directory through a symlink */
	snprintf(link, sizeof(link), "%s/link.d", f->tmp);
	assert_int_equal(symlink(f->dir, link), 0);
	assert_int_equal(load(link, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "symlink"));
	assert_non_null(strstr(err.msg, "link.d"));
	/* a parent that is a symlink */
	snprintf(link, sizeof(link), "%s/link.d/../trusted.d", f->tmp);
	assert_int_equal(load(link, &t, &err), -EPERM);
	/* a key that is a symlink (to a good key elsewhere) */
	key_file(kit_path(f->tmp, "c.key"), &f->a, 0644);
	assert_int_equal(symlink(kit_path(f->tmp, "c.key"), kit_path(f->dir, "c.pub")), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "c.pub"));
	assert_non_null(strstr(err.msg, "symlink"));
}

static void test_not_regular_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	/* a fifo must not hang the start; a directory is no key */
	assert_int_equal(mkfifo(kit_path(f->dir, "f.pub"), 0644), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(unlink(kit_path(f->dir, "f.pub")), 0);
	assert_int_equal(mkdir(kit_path(f->dir, "d.pub"), 0755), 0);
	assert_int_equal(load(f->dir, &t, &err), -EPERM);
}

static void test_duplicate_keyid_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	char hex[POLICY_KEYID_HEX];
	struct kit_key c;
	kit_key_new(&c);
	memcpy(c.keyid, f->a.keyid, 8);
	key_file(kit_path(f->dir, "c.pub"), &c, 0644);
	assert_int_equal(load(f->dir, &t, &err), -EEXIST);
	policy_keyid_hex(f->a.keyid, hex);
	assert_non_null(strstr(err.msg, hex));
}

static void test_empty_and_bad_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	assert_int_equal(unlink(kit_path(f->dir, "a.pub")), 0);
	assert_int_equal(unlink(kit_path(f->dir, "b.pub")), 0);
	assert_int_equal(load(f->dir, &t, &err), -ENOKEY);
	assert_non_null(strstr(err.msg, "no key"));
	kit_write(kit_path(f->dir, "x.pub"), "untrusted comment: x\nnot base64\n", 32, 0644);
	assert_int_equal(load(f->dir, &t, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "x.pub"));
	assert_int_equal(load(kit_path(f->tmp, "missing"), &t, &err), -ENOENT);
}

static void test_file_load(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_trust *t;
	/* --trust FILE: no ownership rules (verify and cell only) */
	assert_int_equal(chmod(kit_path(f->dir, "a.pub"), 0666), 0);
	assert_int_equal(policy_trust_file_load(kit_path(f->dir, "a.pub"), &t, &err), 0);
	assert_int_equal(policy_trust_count(t), 1);
	assert_non_null(policy_trust_find(t, f->a.keyid));
	assert_null(policy_trust_find(t, f->b.keyid));
	policy_trust_free(t);
	assert_int_equal(policy_trust_file_load(f->dir, &t, &err), -EINVAL);
}

/* ---- key pairs -------------------------------------------------------------- */

static void test_keypair_write_and_read(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_pubkey pk, back;
	struct policy_seckey *sk;
	struct policy_trust *t;
	const char *pub = kit_path(f->tmp, "k.pub"), *sec = kit_path(f->tmp, "k.key");
	struct stat st;
	umask(0);
	assert_int_equal(policy_keypair_write(pub, sec, &pk, &err), 0);
	umask(022);
	assert_int_equal(stat(sec, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(stat(pub, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(policy_seckey_file_read(sec, &sk, &err), 0);
	policy_seckey_pubkey(sk, &back);
	assert_memory_equal(&pk, &back, sizeof(pk));
	policy_seckey_free(sk);
	assert_int_equal(policy_trust_file_load(pub, &t, &err), 0);
	assert_non_null(policy_trust_find(t, pk.keyid));
	policy_trust_free(t);
	/* never replaced */
	assert_int_equal(policy_keypair_write(pub, kit_path(f->tmp, "k2.key"), NULL, &err),
			 -EEXIST);
	assert_int_equal(access(kit_path(f->tmp, "k2.key"), F_OK), -1);
	assert_int_equal(policy_keypair_write(kit_path(f->tmp, "k2.pub"), sec, NULL, &err),
			 -EEXIST);
	assert_int_equal(access(kit_path(f->tmp, "k2.pub"), F_OK), -1);
	assert_int_equal(policy_keypair_write(pub, pub, NULL, &err), -EINVAL);
}

static void test_seckey_file_refusals(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_seckey *sk;
	const char *sec = kit_path(f->tmp, "k.key");
	char *big;
	assert_int_equal(policy_keypair_write(kit_path(f->tmp, "k.pub"), sec, NULL, &err), 0);
	/* a secret others may read is no secret */
	assert_int_equal(chmod(sec, 0640), 0);
	assert_int_equal(policy_seckey_file_read(sec, &sk, &err), -EPERM);
	assert_non_null(strstr(err.msg, "chmod 600"));
	assert_int_equal(chmod(sec, 0604), 0);
	assert_int_equal(policy_seckey_file_read(sec, &sk, &err), -EPERM);
	/* over the cap */
	big = calloc(1, APPL_KEY_FILE_MAX + 1);
	assert_non_null(big);
	memset(big, 'A', APPL_KEY_FILE_MAX + 1);
	kit_write(sec, big, APPL_KEY_FILE_MAX + 1, 0600);
	free(big);
	assert_int_equal(policy_seckey_file_read(sec, &sk, &err), -EFBIG);
	/* a public key is no secret key */
	assert_int_equal(chmod(kit_path(f->tmp, "k.pub"), 0600), 0);
	assert_int_equal(policy_seckey_file_read(kit_path(f->tmp, "k.pub"), &sk, &err), -EINVAL);
	assert_null(sk);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fix_setup, fix_teardown)
	const struct CMUnitTest tests[] = {
		T(test_dir_loads),
		T(test_dir_relative_path),
		T(test_dir_writable_by_others_refused),
		T(test_dir_not_root_owned_refused),
		T(test_parent_writable_refused),
		T(test_key_writable_by_others_refused),
		T(test_key_not_root_owned_refused),
		T(test_symlinks_refused),
		T(test_not_regular_refused),
		T(test_duplicate_keyid_refused),
		T(test_empty_and_bad_refused),
		T(test_file_load),
		T(test_keypair_write_and_read),
		T(test_seckey_file_refusals),
	};
#undef T
	return cmocka_run_group_tests(tests, kit_sodium_setup, NULL);
}
