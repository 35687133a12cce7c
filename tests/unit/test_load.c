/* test_load.c: the whole pipeline, policy_load and policy_file_sign, on
 * real files with the real policy parser: the happy path, and each refusal
 * in the order load.h gives. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sigkit.h"

#include "policy/load.h"

#define NOW	1738324800 /* 2025-01-31T12:00:00Z */
#define LATER	"2099-01-01T00:00:00Z"
#define EARLIER "2025-01-01T00:00:00Z"
#define TC3	"file:policy.json serial:3 signed:2025-01-31T12:00:00Z"

struct fix {
	char *tmp;
	char state[4096];
	struct policy_seckey *a, *b; /* trusted, signing through policy_file_sign */
	struct policy_pubkey apk, bpk;
	struct kit_key c; /* trusted, for signatures our signer would not make */
	struct kit_key d; /* not trusted */
	struct policy_trust *trust;
};

static void pub_file(const char *path, const struct policy_pubkey *pk)
{
	struct appl_err err = {0};
	char text[APPL_KEY_FILE_MAX];
	size_t len;

	assert_int_equal(policy_pubkey_format(pk, text, sizeof(text), &len, &err), 0);
	kit_write(path, text, len, 0644);
}

static void trust_make(struct fix *f)
{
	struct appl_err err = {0};
	char dir[4096], text[256];
	size_t len;

	snprintf(dir, sizeof(dir), "%s/trusted.d", f->tmp);
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(chmod(dir, 0755), 0);
	pub_file(kit_path(dir, "a.pub"), &f->apk);
	pub_file(kit_path(dir, "b.pub"), &f->bpk);
	len = kit_pub_text(&f->c, text, sizeof(text));
	kit_write(kit_path(dir, "c.pub"), text, len, 0644);
	assert_int_equal(policy_trust_dir_load_owner(dir, geteuid(), &f->trust, &err), 0);
	assert_int_equal(policy_trust_count(f->trust), 3);
}

static int fix_setup(void **state)
{
	struct appl_err err = {0};
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->tmp = kit_tmpdir();
	snprintf(f->state, sizeof(f->state), "%s/state", f->tmp);
	assert_int_equal(policy_seckey_generate(&f->a, &f->apk, &err), 0);
	assert_int_equal(policy_seckey_generate(&f->b, &f->bpk, &err), 0);
	kit_key_new(&f->c);
	kit_key_new(&f->d);
	trust_make(f);
	*state = f;
	return 0;
}

static int fix_teardown(void **state)
{
	struct fix *f = *state;

	policy_trust_free(f->trust);
	policy_seckey_free(f->a);
	policy_seckey_free(f->b);
	kit_tmpdir_free(f->tmp);
	free(f);
	return 0;
}

/* tmp/name holds a minimal policy with this serial and expiry, and extra
 * spaces at its end (so two policies of one serial can differ). */
static void policy_file(struct fix *f, const char *name, uint64_t serial, const char *expires,
			int pad)
{
	char text[1024];
	size_t len = kit_policy(text, sizeof(text) - 8, serial, expires);

	memset(text + len, ' ', (size_t)pad);
	kit_write(kit_path(f->tmp, name), text, len + (size_t)pad, 0644);
}

static void sign(struct fix *f, const char *name, const struct policy_seckey *sk)
{
	struct appl_err err = {0};
	char sig[4096];

	assert_int_equal(
		policy_file_sign(kit_path(f->tmp, name), sk, NOW, sig, sizeof(sig), NULL, &err), 0);
}

/* Sign tmp/policy.json by hand with k, algorithm alg, comment tc. */
static void forge(struct fix *f, const struct kit_key *k, const char *alg, const char *tc)
{
	char *buf, text[4096];
	size_t len, n;
	struct appl_err err = {0};

	assert_int_equal(appl_file_read(kit_path(f->tmp, "policy.json"), APPL_POLICY_FILE_MAX, &buf,
					&len, &err),
			 0);
	n = kit_forge(text, sizeof(text), alg, k, buf, len, tc);
	free(buf);
	kit_write(kit_path(f->tmp, "policy.json.sig"), text, n, 0644);
}

static int load(struct fix *f, bool commit, struct policy_verified *info, struct appl_err *err)
{
	struct policy *p = NULL;
	int rc = policy_load(kit_path(f->tmp, "policy.json.sig"), f->trust, f->state, NOW, commit,
			     &p, info, err);

	assert_true((rc == 0) == (p != NULL));
	policy_free(p);
	return rc;
}

/* ---- accepted ---------------------------------------------------------------- */

static void test_signed_policy_loads(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_verified info;
	struct policy *p;
	struct policy_state st;
	char hex[POLICY_KEYID_HEX], layout[4096];
	unsigned char hash[32];
	char *buf;
	size_t len;
	policy_file(f, "policy.json", 3, LATER, 0);
	sign(f, "policy.json", f->a);
	/* verify only: the state directory is not even created */
	assert_int_equal(load(f, false, &info, &err), 0);
	assert_int_equal(access(f->state, F_OK), -1);
	policy_keyid_hex(f->apk.keyid, hex);
	assert_string_equal(info.keyid_hex, hex);
	assert_int_equal(info.serial, 3);
	assert_int_equal(info.signed_at, NOW);
	assert_int_equal(info.expires, 4070908800);
	assert_string_equal(info.file, "policy.json");
	assert_int_equal(appl_file_read(kit_path(f->tmp, "policy.json"), 4096, &buf, &len, &err),
			 0);
	crypto_hash_sha256(hash, (unsigned char *)buf, len);
	free(buf);
	assert_memory_equal(info.hash, hash, 32);
	/* commit: recorded; the policy comes back, image.layout made absolute */
	assert_int_equal(policy_load(kit_path(f->tmp, "policy.json.sig"), f->trust, f->state, NOW,
				     true, &p, NULL, &err),
			 0);
	snprintf(layout, sizeof(layout), "%s/image", f->tmp);
	assert_string_equal(policy_image_layout(p), layout);
	assert_int_equal(policy_serial(p), 3);
	policy_free(p);
	assert_int_equal(policy_state_read(f->state, "default", &st, &err), 0);
	assert_int_equal(st.serial, 3);
	assert_string_equal(st.keyid_hex, hex);
	/* again: same serial, same bytes */
	assert_int_equal(load(f, true, NULL, &err), 0);
	/* no state directory at all: no rollback check */
	assert_int_equal(policy_load(kit_path(f->tmp, "policy.json.sig"), f->trust, NULL, NOW, true,
				     NULL, NULL, &err),
			 0);
}

static void test_minisign_style_signature_loads(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	policy_file(f, "policy.json", 3, LATER, 0);
	forge(f, &f->c, "ED", TC3);
	assert_int_equal(load(f, true, NULL, &err), 0);
}

/* ---- refused, in the pipeline's order ---------------------------------------------- */

static void test_sizes_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char *big = malloc(APPL_POLICY_FILE_MAX + 1);
	assert_non_null(big);
	policy_file(f, "policy.json", 3, LATER, 0);
	sign(f, "policy.json", f->a);
	memset(big, ' ', APPL_POLICY_FILE_MAX + 1);
	kit_write(kit_path(f->tmp, "policy.json.sig"), big, APPL_SIGNATURE_FILE_MAX + 1, 0644);
	assert_int_equal(load(f, false, NULL, &err), -EFBIG);
	sign(f, "policy.json", f->a);
	kit_write(kit_path(f->tmp, "policy.json"), big, APPL_POLICY_FILE_MAX + 1, 0644);
	assert_int_equal(load(f, false, NULL, &err), -EFBIG);
	free(big);
}

static void test_truncated_and_bad_base64_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char *buf;
	size_t len;
	policy_file(f, "policy.json", 3, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(
		appl_file_read(kit_path(f->tmp, "policy.json.sig"), 4096, &buf, &len, &err), 0);
	kit_write(kit_path(f->tmp, "policy.json.sig"), buf, len - 10, 0644);
	assert_int_equal(load(f, false, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "policy.json.sig"));
	buf[60] = buf[60] == '*' ? '#' : '*';
	kit_write(kit_path(f->tmp, "policy.json.sig"), buf, len, 0644);
	assert_int_equal(load(f, false, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "base64"));
	free(buf);
}

static void test_legacy_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	policy_file(f, "policy.json", 3, LATER, 0);
	forge(f, &f->c, "Ed", TC3);
	assert_int_equal(load(f, false, NULL, &err), -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "legacy"));
}

static void test_unknown_key_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_verified info;
	char hex[POLICY_KEYID_HEX];
	policy_file(f, "policy.json", 3, LATER, 0);
	forge(f, &f->d, "ED", TC3);
	assert_int_equal(load(f, false, &info, &err), -ENOKEY);
	policy_keyid_hex(f->d.keyid, hex);
	assert_non_null(strstr(err.msg, hex));
	assert_non_null(strstr(err.msg, "not trusted"));
	assert_string_equal(info.keyid_hex, hex); /* shown even on refusal */
}

static void test_wrong_key_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct kit_key d = f->d;
	/* an untrusted key that claims a trusted key's id */
	memcpy(d.keyid, f->c.keyid, 8);
	policy_file(f, "policy.json", 3, LATER, 0);
	forge(f, &d, "ED", TC3);
	assert_int_equal(load(f, false, NULL, &err), -EBADMSG);
}

static void test_tampered_policy_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char *buf;
	size_t len;
	policy_file(f, "policy.json", 3, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(appl_file_read(kit_path(f->tmp, "policy.json"), 4096, &buf, &len, &err),
			 0);
	/* one byte, and a change that keeps the JSON valid */
	buf[len - 1] = ' ';
	kit_write(kit_path(f->tmp, "policy.json"), buf, len, 0644);
	assert_int_equal(load(f, false, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "does not match"));
	free(buf);
}

static void test_tampered_comment_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char *buf, *p;
	size_t len;
	policy_file(f, "policy.json", 4, LATER, 0);
	sign(f, "policy.json", f->a);
	/* serial 4 signed; the comment is edited to say 3 ... and so is the policy */
	assert_int_equal(
		appl_file_read(kit_path(f->tmp, "policy.json.sig"), 4096, &buf, &len, &err), 0);
	p = strstr(buf, "serial:4");
	assert_non_null(p);
	p[7] = '3';
	kit_write(kit_path(f->tmp, "policy.json.sig"), buf, len, 0644);
	free(buf);
	assert_int_equal(load(f, false, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "trusted comment"));
}

static void test_comment_serial_differs_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	policy_file(f, "policy.json", 3, LATER, 0);
	forge(f, &f->c, "ED", "file:policy.json serial:4 signed:2025-01-31T12:00:00Z");
	assert_int_equal(load(f, false, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "differs"));
	/* not of the fixed form at all (minisign's default comment) */
	forge(f, &f->c, "ED", "timestamp:1738324800\tfile:policy.json\thashed");
	assert_int_equal(load(f, false, NULL, &err), -EINVAL);
}

static void test_other_file_name_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	/* a validly signed staging.json put in policy.json's place */
	policy_file(f, "staging.json", 9, LATER, 0);
	sign(f, "staging.json", f->a);
	assert_int_equal(rename(kit_path(f->tmp, "staging.json"), kit_path(f->tmp, "policy.json")),
			 0);
	assert_int_equal(
		rename(kit_path(f->tmp, "staging.json.sig"), kit_path(f->tmp, "policy.json.sig")),
		0);
	assert_int_equal(load(f, false, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "staging.json"));
}

static void test_parsed_only_after_signature(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	/* not a policy at all: signed, it reaches the parser; unsigned, it does not */
	kit_write(kit_path(f->tmp, "policy.json"), "{\"serial\": 3}", 13, 0644);
	forge(f, &f->c, "ED", TC3);
	assert_int_equal(load(f, false, NULL, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "policy.json"));
	forge(f, &f->d, "ED", TC3);
	assert_int_equal(load(f, false, NULL, &err), -ENOKEY);
	kit_write(kit_path(f->tmp, "policy.json"), "{\"serial\": 33}", 14, 0644);
	assert_int_equal(load(f, false, NULL, &err), -ENOKEY);
}

static void test_expired_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	policy_file(f, "policy.json", 3, EARLIER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, NULL, &err), -EKEYEXPIRED);
	assert_non_null(strstr(err.msg, "expired at 2025-01-01T00:00:00Z"));
	assert_int_equal(policy_state_read(f->state, "default", &st, &err), 0);
	assert_false(st.present);
}

static void test_rollback_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	policy_file(f, "policy.json", 5, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, NULL, &err), 0);
	policy_file(f, "policy.json", 4, LATER, 0);
	sign(f, "policy.json", f->a);
	/* verify (no commit) says so too, and changes nothing */
	assert_int_equal(load(f, false, NULL, &err), -ESTALE);
	assert_int_equal(load(f, true, NULL, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "rollback"));
	assert_int_equal(policy_state_read(f->state, "default", &st, &err), 0);
	assert_int_equal(st.serial, 5);
}

/* tmp/policy.json with this serial and deployment. */
static void deployment_policy(struct fix *f, int serial, const char *deployment)
{
	char text[1024];
	int n = snprintf(text, sizeof(text),
			 "{\"policy_version\": 1, \"serial\": %d, \"expires\": \"%s\", "
			 "\"deployment\": \"%s\", \"image\": {\"layout\": \"image\", "
			 "\"digest\": \"sha256:%064d\"}}\n",
			 serial, LATER, deployment, 0);

	assert_true(n > 0 && (size_t)n < sizeof(text));
	kit_write(kit_path(f->tmp, "policy.json"), text, (size_t)n, 0644);
}

/* Each deployment is held to its own floor: a policy of another
 * deployment with a lower serial is accepted, and does not lower the
 * default one's. */
static void test_rollback_per_deployment(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	struct policy_state st;
	struct policy_verified info;
	char sig[4096];
	policy_file(f, "policy.json", 5, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, &info, &err), 0);
	assert_string_equal(info.deployment, "default");
	deployment_policy(f, 2, "staging-2");
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, &info, &err), 0);
	assert_string_equal(info.deployment, "staging-2");
	assert_int_equal(policy_state_read(f->state, "staging-2", &st, &err), 0);
	assert_int_equal(st.serial, 2);
	assert_int_equal(policy_state_read(f->state, "default", &st, &err), 0);
	assert_int_equal(st.serial, 5);
	/* a name a deployment may not have is refused, even for signing */
	deployment_policy(f, 9, "Staging");
	assert_int_equal(policy_file_sign(kit_path(f->tmp, "policy.json"), f->a, NOW, sig,
					  sizeof(sig), NULL, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "deployment: a deployment is [a-z][a-z0-9_-]*"));
}

static void test_same_serial_new_content_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	policy_file(f, "policy.json", 5, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, NULL, &err), 0);
	policy_file(f, "policy.json", 5, LATER, 1);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, NULL, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "different content"));
}

static void test_older_policy_second_key_refused(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	/* one serial across keys: b's old serial 4 cannot follow a's 5 */
	policy_file(f, "policy.json", 5, LATER, 0);
	sign(f, "policy.json", f->a);
	assert_int_equal(load(f, true, NULL, &err), 0);
	policy_file(f, "policy.json", 4, LATER, 0);
	sign(f, "policy.json", f->b);
	assert_int_equal(load(f, true, NULL, &err), -ESTALE);
	/* while a higher one by b is fine */
	policy_file(f, "policy.json", 6, LATER, 0);
	sign(f, "policy.json", f->b);
	assert_int_equal(load(f, true, NULL, &err), 0);
}

/* ---- signing and paths ------------------------------------------------------- */

static void test_sign_refusals(void **state)
{
	struct fix *f = *state;
	struct appl_err err = {0};
	char sig[4096];
	/* only what would load is signed */
	kit_write(kit_path(f->tmp, "bad.json"), "{}", 2, 0644);
	assert_int_equal(policy_file_sign(kit_path(f->tmp, "bad.json"), f->a, NOW, sig, sizeof(sig),
					  NULL, &err),
			 -EINVAL);
	assert_int_equal(access(kit_path(f->tmp, "bad.json.sig"), F_OK), -1);
	/* a name that cannot go in the comment */
	policy_file(f, "a b.json", 1, LATER, 0);
	assert_int_equal(policy_file_sign(kit_path(f->tmp, "a b.json"), f->a, NOW, sig, sizeof(sig),
					  NULL, &err),
			 -EINVAL);
}

static void test_sig_path_rules(void **state)
{
	struct appl_err err = {0};
	char out[64];
	(void)state;
	assert_int_equal(policy_sig_path_policy("/etc/p.json.sig", out, sizeof(out), &err), 0);
	assert_string_equal(out, "/etc/p.json");
	assert_int_equal(policy_sig_path_policy("p.json", out, sizeof(out), &err), -EINVAL);
	assert_int_equal(policy_sig_path_policy(".sig", out, sizeof(out), &err), -EINVAL);
	assert_int_equal(policy_sig_path_policy("/etc/.sig", out, sizeof(out), &err), -EINVAL);
	assert_int_equal(policy_sig_path_policy("p.json.minisig", out, sizeof(out), &err), -EINVAL);
	assert_int_equal(policy_sig_path_policy("p.json.sig", out, 4, &err), -ENAMETOOLONG);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fix_setup, fix_teardown)
	const struct CMUnitTest tests[] = {
		T(test_signed_policy_loads),
		T(test_minisign_style_signature_loads),
		T(test_sizes_refused),
		T(test_truncated_and_bad_base64_refused),
		T(test_legacy_refused),
		T(test_unknown_key_refused),
		T(test_wrong_key_refused),
		T(test_tampered_policy_refused),
		T(test_tampered_comment_refused),
		T(test_comment_serial_differs_refused),
		T(test_other_file_name_refused),
		T(test_parsed_only_after_signature),
		T(test_expired_refused),
		T(test_rollback_refused),
		T(test_rollback_per_deployment),
		T(test_same_serial_new_content_refused),
		T(test_older_policy_second_key_refused),
		T(test_sign_refusals),
		T(test_sig_path_rules),
	};
#undef T
	return cmocka_run_group_tests(tests, kit_sodium_setup, NULL);
}
