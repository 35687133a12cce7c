/* test_minisign.c: minisign formats, signatures and the trusted comment. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sigkit.h"

#include "policy/minisign.h"

/* Made by Debian's minisign 0.11: `minisign -G -W`, then `minisign -S -t
 * "file:p.json serial:7 signed:2025-01-31T12:00:00Z"` and the same with -l
 * (legacy) over the message below. A throwaway key. */
static const char vec_pub[] = "untrusted comment: minisign public key 1D622CD256275162\n"
			      "RWRiUSdW0ixiHV2hyGTbj9AHyyhxkRiqau+vpenVSRD6Yr6443xxlhza\n";
static const char vec_key[] =
	"untrusted comment: minisign encrypted secret key\n"
	"RWQAAEIyAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAYlEnVtIsYh19WItRCB"
	"+BcWS4CssaiuXiDVT7H99Vn1gaZErSsRFICl2hyGTbj9AHyyhxkRiqau+vpenVSRD6Yr6443xxlhzaAAAAAAAAAAAA"
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n";
static const char vec_msg[] = "{\"policy_version\": 1}\n";
static const char vec_sig[] = "untrusted comment: signature from minisign secret key\n"
			      "RURiUSdW0ixiHcN4nU6qTks794SM2aEUC8bmqDRLshG2Mjxt1ck7zVNQW3Y9Rsln2+"
			      "K0EKNW4wFpMcRiztJNDWwbaLQ"
			      "GMQoRuQU=\n"
			      "trusted comment: file:p.json serial:7 signed:2025-01-31T12:00:00Z\n"
			      "VVCKue4TgSrBofSW0/C19+Q4ktzW/"
			      "ht+igpi7ELZq9Fnt2P2OQ4HdpejQ947F6eS8+nR2E1Vk4Ud9HgD/uJ+BQ==\n";
static const char vec_legacy[] =
	"untrusted comment: signature from minisign secret key\n"
	"RWRiUSdW0ixiHTBswweL81DeGJY/BEaDqCATWksWx2EP8ZD/7AlpJuuxBqgVOkvKxztg/"
	"BDJ775qOlefn7bV9x2ErM+"
	"UhPbR9gA=\n"
	"trusted comment: file:p.json serial:7 signed:2025-01-31T12:00:00Z\n"
	"xrIeRdL1h8zuj8CSgM+tmgp7R7wgaJXsEWvIfHFt8Vg1dbQrgdB5+tovW8sY5QsBplQ3nL5eDxrOwPAxJZnFCA=="
	"\n";

#define TC "file:p.json serial:7 signed:2025-01-31T12:00:00Z"

static int sig_of(const char *text, struct policy_sig *sig, struct appl_err *err)
{
	return policy_sig_parse(text, strlen(text), sig, err);
}

static void vec_pubkey(struct policy_pubkey *pk)
{
	struct appl_err err = {0};
	assert_int_equal(policy_pubkey_parse(vec_pub, strlen(vec_pub), pk, &err), 0);
}

/* ---- interoperability: minisign's own files ------------------------------ */

static void test_minisign_vector_verifies(void **state)
{
	struct appl_err err = {0};
	struct policy_pubkey pk;
	struct policy_sig sig;
	struct policy_comment tc;
	char hex[POLICY_KEYID_HEX];
	(void)state;
	vec_pubkey(&pk);
	policy_keyid_hex(pk.keyid, hex);
	assert_string_equal(hex, "1D622CD256275162"); /* what minisign's comment says */
	assert_int_equal(sig_of(vec_sig, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &pk, vec_msg, strlen(vec_msg), &err), 0);
	assert_string_equal(sig.comment, TC);
	assert_int_equal(policy_comment_parse(sig.comment, sig.comment_len, &tc, &err), 0);
	assert_string_equal(tc.file, "p.json");
	assert_int_equal(tc.serial, 7);
	assert_int_equal(tc.signed_at, 1738324800);
}

static void test_minisign_seckey_vector(void **state)
{
	struct appl_err err = {0};
	struct policy_seckey *sk;
	struct policy_pubkey pk, want;
	struct policy_sig sig;
	char text[APPL_SIGNATURE_FILE_MAX];
	size_t len;
	(void)state;
	/* minisign 0.11 -W leaves the checksum all zero; the key is used all the same */
	assert_int_equal(policy_seckey_parse(vec_key, strlen(vec_key), &sk, &err), 0);
	policy_seckey_pubkey(sk, &pk);
	vec_pubkey(&want);
	assert_memory_equal(&pk, &want, sizeof(pk));
	assert_int_equal(policy_sig_create(sk, "x", 1, TC, text, sizeof(text), &len, &err), 0);
	assert_int_equal(policy_sig_parse(text, len, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &want, "x", 1, &err), 0);
	policy_seckey_free(sk);
}

/* ---- signing and verifying ------------------------------------------------- */

struct made {
	struct policy_seckey *sk;
	struct policy_pubkey pk;
	char text[APPL_SIGNATURE_FILE_MAX];
	size_t len;
};

static void made_new(struct made *m, const char *msg, const char *tc)
{
	struct appl_err err = {0};
	assert_int_equal(policy_seckey_generate(&m->sk, &m->pk, &err), 0);
	assert_int_equal(policy_sig_create(m->sk, msg, strlen(msg), tc, m->text, sizeof(m->text),
					   &m->len, &err),
			 0);
}

static void test_sign_verify_roundtrip(void **state)
{
	struct appl_err err = {0};
	struct made m;
	struct policy_sig sig;
	(void)state;
	made_new(&m, "policy bytes", TC);
	assert_int_equal(policy_sig_parse(m.text, m.len, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &m.pk, "policy bytes", 12, &err), 0);
	assert_string_equal(sig.comment, TC);
	policy_seckey_free(m.sk);
}

static void test_tampered_message_refused(void **state)
{
	struct appl_err err = {0};
	struct made m;
	struct policy_sig sig;
	(void)state;
	made_new(&m, "policy bytes", TC);
	assert_int_equal(policy_sig_parse(m.text, m.len, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &m.pk, "policy bytez", 12, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "does not match the file"));
	assert_int_equal(policy_sig_verify(&sig, &m.pk, "policy byte", 11, &err), -EBADMSG);
	policy_seckey_free(m.sk);
}

static void test_tampered_comment_refused(void **state)
{
	struct appl_err err = {0};
	struct made m;
	struct policy_sig sig;
	char *p;
	(void)state;
	made_new(&m, "policy bytes", TC);
	/* serial:7 becomes serial:9 in the file: the global signature breaks */
	p = strstr(m.text, "serial:7");
	assert_non_null(p);
	p[7] = '9';
	assert_int_equal(policy_sig_parse(m.text, m.len, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &m.pk, "policy bytes", 12, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "trusted comment"));
	policy_seckey_free(m.sk);
}

static void test_wrong_key_refused(void **state)
{
	struct appl_err err = {0};
	struct made m, other;
	struct policy_sig sig;
	(void)state;
	made_new(&m, "msg", TC);
	made_new(&other, "msg", TC);
	assert_int_equal(policy_sig_parse(m.text, m.len, &sig, &err), 0);
	/* same key id, another key: a key id is no proof */
	memcpy(other.pk.keyid, m.pk.keyid, POLICY_KEYID_BYTES);
	assert_int_equal(policy_sig_verify(&sig, &other.pk, "msg", 3, &err), -EBADMSG);
	policy_seckey_free(m.sk);
	policy_seckey_free(other.sk);
}

static void test_unknown_keyid_refused(void **state)
{
	struct appl_err err = {0};
	struct made m, other;
	struct policy_sig sig;
	char hex[POLICY_KEYID_HEX];
	(void)state;
	made_new(&m, "msg", TC);
	made_new(&other, "msg", TC);
	assert_int_equal(policy_sig_parse(m.text, m.len, &sig, &err), 0);
	assert_int_equal(policy_sig_verify(&sig, &other.pk, "msg", 3, &err), -ENOKEY);
	policy_keyid_hex(m.pk.keyid, hex);
	assert_non_null(strstr(err.msg, hex));
	policy_seckey_free(m.sk);
	policy_seckey_free(other.sk);
}

static void test_legacy_refused(void **state)
{
	struct appl_err err = {0};
	struct policy_sig sig;
	struct kit_key k;
	char text[APPL_SIGNATURE_FILE_MAX];
	(void)state;
	assert_int_equal(sig_of(vec_legacy, &sig, &err), -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "legacy"));
	kit_key_new(&k);
	kit_forge(text, sizeof(text), "Ed", &k, "m", 1, TC);
	assert_int_equal(sig_of(text, &sig, &err), -EPROTONOSUPPORT);
	kit_forge(text, sizeof(text), "EE", &k, "m", 1, TC);
	assert_int_equal(sig_of(text, &sig, &err), -EPROTONOSUPPORT);
	assert_non_null(strstr(err.msg, "unknown"));
	kit_forge(text, sizeof(text), "ED", &k, "m", 1, TC);
	assert_int_equal(sig_of(text, &sig, &err), 0);
}

/* ---- the signature file's form --------------------------------------------- */

static void test_truncated_refused(void **state)
{
	struct appl_err err = {0};
	struct policy_sig sig;
	size_t full = strlen(vec_sig);
	(void)state;
	/* every cut short of the last line's end is refused */
	for (size_t n = 0; n < full - 1; n++)
		assert_int_equal(policy_sig_parse(vec_sig, n, &sig, &err) < 0, 1);
	assert_int_equal(policy_sig_parse(vec_sig, full - 1, &sig, &err), 0);
	assert_int_equal(policy_sig_parse(vec_sig, full, &sig, &err), 0);
}

static void test_oversized_refused(void **state)
{
	struct appl_err err = {0};
	struct policy_sig sig;
	char *big = malloc(APPL_SIGNATURE_FILE_MAX + 1);
	(void)state;
	assert_non_null(big);
	memset(big, 'A', APPL_SIGNATURE_FILE_MAX + 1);
	memcpy(big, vec_sig, strlen(vec_sig));
	assert_int_equal(policy_sig_parse(big, APPL_SIGNATURE_FILE_MAX + 1, &sig, &err), -EFBIG);
	free(big);
}

static int sig_edit(const char *find, const char *repl, struct appl_err *err)
{
	char text[APPL_SIGNATURE_FILE_MAX];
	struct policy_sig sig;
	const char *at = strstr(vec_sig, find);
	size_t pre = (size_t)(at - vec_sig);
	int n;

	assert_non_null(at);
	n = snprintf(text, sizeof(text), "%.*s%s%s", (int)pre, vec_sig, repl, at + strlen(find));
	assert_true(n > 0);
	return policy_sig_parse(text, (size_t)n, &sig, err);
}

static void test_bad_form_refused(void **state)
{
	struct appl_err err = {0};
	(void)state;
	/* bad base64: a character outside the alphabet, a lost padding, a
	 * character too many, non-zero trailing bits */
	assert_int_equal(sig_edit("RURiUSdW", "RURi!SdW", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "base64"));
	assert_int_equal(sig_edit("RuQU=\n", "RuQU\n", &err), -EINVAL);
	assert_int_equal(sig_edit("BQ==\n", "BQ==A\n", &err), -EINVAL);
	assert_int_equal(sig_edit("BQ==\n", "BR==\n", &err), -EINVAL);
	/* the prefixes */
	assert_int_equal(sig_edit("untrusted comment:", "untrusted-comment:", &err), -EINVAL);
	assert_int_equal(sig_edit("trusted comment: file", "trusted comment:file", &err), -EINVAL);
	/* a line more, a NUL inside */
	assert_int_equal(sig_edit("BQ==\n", "BQ==\n\n", &err), -EINVAL);
	assert_int_equal(sig_edit("BQ==\n", "BQ==\nextra\n", &err), -EINVAL);
	assert_int_equal(sig_edit("p.json", "p\x01json", &err), 0); /* parse only: verify refuses */
	{
		struct policy_sig sig;
		char text[sizeof(vec_sig)];
		memcpy(text, vec_sig, sizeof(vec_sig));
		text[5] = '\0';
		assert_int_equal(policy_sig_parse(text, sizeof(vec_sig) - 1, &sig, &err), -EINVAL);
	}
	/* CRLF line ends are accepted */
	assert_int_equal(sig_edit("BQ==\n", "BQ==\r\n", &err), 0);
}

static void test_comment_too_long_refused(void **state)
{
	struct appl_err err = {0};
	struct policy_sig sig;
	char *text = malloc(APPL_SIGNATURE_FILE_MAX);
	char tc[APPL_TRUSTED_COMMENT_MAX + 2];
	int n;
	(void)state;
	assert_non_null(text);
	memset(tc, 'a', sizeof(tc) - 1);
	tc[sizeof(tc) - 1] = '\0';
	/* the signature line of the vector, then a comment one byte too long */
	n = snprintf(text, APPL_SIGNATURE_FILE_MAX, "%.155strusted comment: %s\nAAAA\n", vec_sig,
		     tc);
	assert_true(n > 0 && n < APPL_SIGNATURE_FILE_MAX);
	assert_int_equal(policy_sig_parse(text, (size_t)n, &sig, &err), -EFBIG);
	free(text);
}

/* ---- keys ------------------------------------------------------------------ */

static void test_pubkey_form(void **state)
{
	struct appl_err err = {0};
	struct policy_pubkey pk, back;
	char text[APPL_KEY_FILE_MAX];
	size_t len;
	(void)state;
	vec_pubkey(&pk);
	assert_int_equal(policy_pubkey_format(&pk, text, sizeof(text), &len, &err), 0);
	assert_string_equal(text, vec_pub);
	assert_int_equal(policy_pubkey_parse(text, len, &back, &err), 0);
	assert_memory_equal(&pk, &back, sizeof(pk));
	/* no comment line, a key line too short, a line after it, a signature in its place */
	assert_int_equal(policy_pubkey_parse(text + 56, len - 56, &back, &err), -EINVAL);
	assert_int_equal(policy_pubkey_parse(text, len - 3, &back, &err), -EINVAL);
	memcpy(text + len, "x\n", 3);
	assert_int_equal(policy_pubkey_parse(text, len + 2, &back, &err), -EINVAL);
	assert_int_equal(policy_pubkey_parse(vec_sig, strlen(vec_sig), &back, &err), -EINVAL);
}

static void test_pubkey_algorithm_refused(void **state)
{
	struct appl_err err = {0};
	struct policy_pubkey pk;
	/* "ED" || key id || key: a signature algorithm, not a key algorithm */
	static const char bad[] = "untrusted comment: x\n"
				  "RURiUSdW0ixiHV2hyGTbj9AHyyhxkRiqau+vpenVSRD6Yr6443xxlhza\n";
	(void)state;
	assert_int_equal(policy_pubkey_parse(bad, strlen(bad), &pk, &err), -EPROTONOSUPPORT);
}

/* The vector secret key, decoded, changed by edit, encoded again. */
static int seckey_edited(void (*edit)(unsigned char *raw), struct appl_err *err)
{
	unsigned char raw[158];
	char b64[sodium_base64_ENCODED_LEN(158, sodium_base64_VARIANT_ORIGINAL)];
	char text[APPL_KEY_FILE_MAX];
	const char *line = strchr(vec_key, '\n') + 1;
	struct policy_seckey *sk = NULL;
	size_t got;
	int n, rc;

	assert_int_equal(sodium_base642bin(raw, sizeof(raw), line, strlen(line) - 1, NULL, &got,
					   NULL, sodium_base64_VARIANT_ORIGINAL),
			 0);
	assert_int_equal(got, sizeof(raw));
	edit(raw);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw), sodium_base64_VARIANT_ORIGINAL);
	n = snprintf(text, sizeof(text), "untrusted comment: k\n%s\n", b64);
	rc = policy_seckey_parse(text, (size_t)n, &sk, err);
	policy_seckey_free(sk);
	return rc;
}

static void edit_encrypted(unsigned char *raw)
{
	memcpy(raw + 2, "Sc", 2);
}
static void edit_kdf_unknown(unsigned char *raw)
{
	memcpy(raw + 2, "Xx", 2);
}
static void edit_bad_chk(unsigned char *raw)
{
	raw[157] = 1;
}
static void edit_pk_half(unsigned char *raw)
{
	raw[54 + 8 + 63] ^= 1;
}
static void edit_nothing(unsigned char *raw)
{
	(void)raw;
}

static void test_seckey_refusals(void **state)
{
	struct appl_err err = {0};
	(void)state;
	assert_int_equal(seckey_edited(edit_nothing, &err), 0);
	assert_int_equal(seckey_edited(edit_encrypted, &err), -ENOTSUP);
	assert_non_null(strstr(err.msg, "minisign -C -W"));
	assert_int_equal(seckey_edited(edit_kdf_unknown, &err), -EPROTONOSUPPORT);
	assert_int_equal(seckey_edited(edit_bad_chk, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "checksum"));
	assert_int_equal(seckey_edited(edit_pk_half, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "public half"));
}

static void test_seckey_format_roundtrip(void **state)
{
	struct appl_err err = {0};
	struct policy_seckey *sk, *back;
	struct policy_pubkey pk, pk2;
	char *text;
	size_t len;
	(void)state;
	assert_int_equal(policy_seckey_generate(&sk, &pk, &err), 0);
	assert_int_equal(policy_seckey_format(sk, &text, &len, &err), 0);
	assert_int_equal(strlen(text), len);
	assert_int_equal(policy_seckey_parse(text, len, &back, &err), 0);
	policy_seckey_pubkey(back, &pk2);
	assert_memory_equal(&pk, &pk2, sizeof(pk));
	sodium_free(text);
	policy_seckey_free(sk);
	policy_seckey_free(back);
}

/* ---- the trusted comment and times ----------------------------------------- */

static int tc_parse(const char *s, struct policy_comment *tc)
{
	struct appl_err err = {0};
	return policy_comment_parse(s, strlen(s), tc, &err);
}

static void test_comment_forms(void **state)
{
	struct policy_comment tc;
	char out[APPL_TRUSTED_COMMENT_MAX + 1];
	struct appl_err err = {0};
	(void)state;
	assert_int_equal(
		tc_parse("file:a serial:18446744073709551615 signed:2025-01-31T12:00:00Z", &tc), 0);
	assert_true(tc.serial == UINT64_MAX);
	static const char *const bad[] = {
		"",
		"file:a serial:1",
		"file:a serial:1 signed:2025-01-31T12:00:00Z ",
		"file:a  serial:1 signed:2025-01-31T12:00:00Z",
		"file:a serial:01 signed:2025-01-31T12:00:00Z",
		"file:a serial:-1 signed:2025-01-31T12:00:00Z",
		"file:a serial:18446744073709551616 signed:2025-01-31T12:00:00Z",
		"file:a serial:1 signed:2025-01-31",
		"file: serial:1 signed:2025-01-31T12:00:00Z",
		"file:a/b serial:1 signed:2025-01-31T12:00:00Z",
		"file:.. serial:1 signed:2025-01-31T12:00:00Z",
		"file:a\tb serial:1 signed:2025-01-31T12:00:00Z",
		"serial:1 file:a signed:2025-01-31T12:00:00Z",
		"timestamp:1738324800\tfile:p.json\thashed",
		"file:a serial:1 signed:2025-01-31T12:00:00Z extra:1",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tc_parse(bad[i], &tc), -EINVAL);
	assert_int_equal(
		policy_comment_format("policy.json", 42, 1738324800, out, sizeof(out), &err), 0);
	assert_string_equal(out, "file:policy.json serial:42 signed:2025-01-31T12:00:00Z");
	assert_int_equal(policy_comment_format("a b", 1, 0, out, sizeof(out), &err), -EINVAL);
	assert_int_equal(policy_comment_format("a/b", 1, 0, out, sizeof(out), &err), -EINVAL);
}

static void test_time_forms(void **state)
{
	int64_t t;
	char out[POLICY_TIME_STR];
	(void)state;
#define T(s) policy_sig_time_parse(s, strlen(s), &t)
	assert_int_equal(T("1970-01-01T00:00:00Z"), 0);
	assert_int_equal(t, 0);
	assert_int_equal(T("2025-01-31T12:00:00Z"), 0);
	assert_int_equal(t, 1738324800);
	assert_int_equal(T("2025-01-31T12:00:00.123456789Z"), 0);
	assert_int_equal(t, 1738324800);
	assert_int_equal(T("2024-02-29T23:59:59+01:00"), 0);
	assert_int_equal(t, 1709247599);
	assert_int_equal(T("9999-12-31T23:59:59Z"), 0);
	assert_int_equal(T("2023-02-29T00:00:00Z"), -EINVAL);
	assert_int_equal(T("2025-04-31T00:00:00Z"), -EINVAL);
	assert_int_equal(T("2025-01-31T24:00:00Z"), -EINVAL);
	assert_int_equal(T("2025-01-31T12:00:60Z"), -EINVAL);
	assert_int_equal(T("2025-01-31t12:00:00Z"), -EINVAL);
	assert_int_equal(T("2025-01-31T12:00:00"), -EINVAL);
	assert_int_equal(T("2025-01-31T12:00:00.Z"), -EINVAL);
	assert_int_equal(T("2025-01-31T12:00:00.1234567890Z"), -EINVAL);
	assert_int_equal(T("2025-01-31T12:00:00+1:00"), -EINVAL);
	assert_int_equal(T("1969-12-31T23:59:59Z"), -EINVAL);
	assert_int_equal(T("1970-01-01T00:00:00+01:00"), -EINVAL);
	assert_int_equal(T("+025-01-31T12:00:00Z"), -EINVAL);
#undef T
	assert_int_equal(policy_sig_time_format(1738324800, out, sizeof(out)), 0);
	assert_string_equal(out, "2025-01-31T12:00:00Z");
	assert_int_equal(policy_sig_time_format(-1, out, sizeof(out)), -ERANGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_minisign_vector_verifies),
		cmocka_unit_test(test_minisign_seckey_vector),
		cmocka_unit_test(test_sign_verify_roundtrip),
		cmocka_unit_test(test_tampered_message_refused),
		cmocka_unit_test(test_tampered_comment_refused),
		cmocka_unit_test(test_wrong_key_refused),
		cmocka_unit_test(test_unknown_keyid_refused),
		cmocka_unit_test(test_legacy_refused),
		cmocka_unit_test(test_truncated_refused),
		cmocka_unit_test(test_oversized_refused),
		cmocka_unit_test(test_bad_form_refused),
		cmocka_unit_test(test_comment_too_long_refused),
		cmocka_unit_test(test_pubkey_form),
		cmocka_unit_test(test_pubkey_algorithm_refused),
		cmocka_unit_test(test_seckey_refusals),
		cmocka_unit_test(test_seckey_format_roundtrip),
		cmocka_unit_test(test_comment_forms),
		cmocka_unit_test(test_time_forms),
	};
	return cmocka_run_group_tests(tests, kit_sodium_setup, NULL);
}
