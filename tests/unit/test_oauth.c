/* test_oauth.c: OAuth access tokens checked against a JWK Set
 * (pkg/oauth): the RFCs' own signature examples, every claim rule on
 * Ed25519 tokens signed here with libsodium, ES256 and RS256 tokens signed
 * here with GnuTLS (loaded with dlopen, as the library does, so the build
 * links nothing more), the classic forgeries (alg none, HS256 keyed with
 * the public key, a key used for another type's algorithm), base64url and
 * framing refusals, and the JWK Set's refusals and skips. */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <sodium.h>

#include "oauth/b64.h"
#include "oauth/jws.h"
#include "oauth/key.h"
#include "oauth/oauth.h"
#include "oauth/sig.h"

#define ISS  "https://as.example"
#define AUD  "https://appliance.example/mcp"
#define ROLE "appliance_role"
#define NOW  1700000000
#define SKEW 60

/* ---- the RFCs' examples ------------------------------------------------ */

/* RFC 8037 A.1 and A.4: Ed25519 over "Example of Ed25519 signing". */
static const char rfc8037_jwk[] = "{\"kty\":\"OKP\",\"crv\":\"Ed25519\","
				  "\"x\":\"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo\"}";
static const char rfc8037_jws[] = "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
				  "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5"
				  "BhVsPt9g7sVvpAr_MuM0KAg";

/* RFC 7515 A.2 (RS256) and A.3 (ES256), over one payload: {"iss":"joe",
 * "exp":1300819380,"http://example.com/is_root":true} with CR LFs. */
#define RFC7515_PAYLOAD                                                                            \
	"eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0" \
	"cnVlfQ"
static const char rfc7515_rsa_jwk[] =
	"{\"kty\":\"RSA\",\"n\":\"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-"
	"Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_"
	"7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-"
	"UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qC"
	"o5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_"
	"h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXp"
	"oQ\",\"e\":\"AQAB\"}";
static const char rfc7515_rs256[] =
	"eyJhbGciOiJSUzI1NiJ9." RFC7515_PAYLOAD
	".cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2"
	"Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_"
	"nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBM"
	"Hlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-"
	"eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9"
	"QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw";
static const char rfc7515_ec_jwk[] = "{\"kty\":\"EC\",\"crv\":\"P-256\","
				     "\"x\":\"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU\","
				     "\"y\":\"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0\"}";
static const char rfc7515_es256[] =
	"eyJhbGciOiJFUzI1NiJ9." RFC7515_PAYLOAD
	".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q";

/* ---- helpers ------------------------------------------------------------ */

struct tok {
	char s[2 * OAUTH_TOKEN_MAX];
	size_t len;
};

static size_t b64u(const void *bin, size_t n, char *out, size_t cap)
{
	assert_true(cap >= sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING));
	sodium_bin2base64(out, cap, bin, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return strlen(out);
}

/* t = b64(header) "." b64(payload), the signing input. */
static void tok_input(struct tok *t, const char *header, const char *payload)
{
	size_t at = b64u(header, strlen(header), t->s, sizeof(t->s));

	t->s[at++] = '.';
	at += b64u(payload, strlen(payload), t->s + at, sizeof(t->s) - at);
	t->len = at;
}

static void tok_sig(struct tok *t, const unsigned char *sig, size_t n)
{
	t->s[t->len++] = '.';
	t->len += b64u(sig, n, t->s + t->len, sizeof(t->s) - t->len);
}

static struct oauth_jwks *set_of(const char *json)
{
	struct appl_err err = {0};
	struct oauth_jwks *ks = NULL;

	if (oauth_jwks_parse(json, strlen(json), &ks, &err) != 0)
		fail_msg("JWKS refused: %s", err.msg);
	return ks;
}

static int set_refused(const char *json, struct appl_err *err)
{
	struct oauth_jwks *ks = (struct oauth_jwks *)1;
	int rc = oauth_jwks_parse(json, strlen(json), &ks, err);

	assert_null(ks);
	return rc;
}

static struct oauth_rules rules_std(void)
{
	return (struct oauth_rules){
		.issuer = ISS, .audience = AUD, .role_claim = ROLE, .skew_s = SKEW, .now = NOW};
}

#define assert_refused(rc, err, what)                                                              \
	do {                                                                                       \
		assert_int_equal((rc), -EACCES);                                                   \
		if (!strstr((err).msg, (what)))                                                    \
			fail_msg("message \"%s\" does not say \"%s\"", (err).msg, (what));         \
	} while (0)

/* The standard claims of a valid token, without the claim named omit (or
 * NULL), with extra (",\"k\":v" or "") at the end. */
static void claims(char *out, size_t cap, const char *omit, const char *extra)
{
	static const char *const std[][2] = {
		{"iss", "\"" ISS "\""}, {"aud", "\"" AUD "\""}, {"sub", "\"alice@example\""},
		{"exp", "1700003600"},	{"iat", "1699999990"},	{"nbf", "1699999990"},
		{ROLE, "\"operator\""},
	};
	size_t at = 0;

	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (!omit || strcmp(omit, std[i][0]) != 0)
			at += (size_t)snprintf(out + at, cap - at, "%s\"%s\":%s", at ? "," : "{",
					       std[i][0], std[i][1]);
	at += (size_t)snprintf(out + at, cap - at, "%s}", extra);
	assert_true(at < cap);
}

/* ---- Ed25519 keys, made from fixed seeds ---------------------------------- */

struct ed {
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char sk[crypto_sign_SECRETKEYBYTES];
	char x[64];
};

static struct ed ed1, ed2, ed3; /* ed1 kid "ed1", ed2 no kid, ed3 in no set */
static struct oauth_jwks *edset;

static void ed_make(struct ed *k, unsigned char fill)
{
	unsigned char seed[crypto_sign_SEEDBYTES];

	memset(seed, fill, sizeof(seed));
	assert_int_equal(crypto_sign_seed_keypair(k->pk, k->sk, seed), 0);
	b64u(k->pk, sizeof(k->pk), k->x, sizeof(k->x));
}

static void tok_ed(struct tok *t, const struct ed *k, const char *header, const char *payload)
{
	unsigned char sig[crypto_sign_BYTES];

	tok_input(t, header, payload);
	crypto_sign_detached(sig, NULL, (const unsigned char *)t->s, t->len, k->sk);
	tok_sig(t, sig, sizeof(sig));
}

#define HDR_ED1 "{\"alg\":\"EdDSA\",\"kid\":\"ed1\",\"typ\":\"at+jwt\"}"

/* A token by ed1 of the standard claims changed by omit and extra,
 * checked against edset with the standard rules. */
static int ed_check(const char *omit, const char *extra, struct oauth_token *out,
		    struct appl_err *err)
{
	struct oauth_rules r = rules_std();
	char payload[2048];
	struct tok t;

	claims(payload, sizeof(payload), omit, extra);
	tok_ed(&t, &ed1, HDR_ED1, payload);
	return oauth_jwt_verify(edset, t.s, t.len, &r, out, err);
}

/* ---- GnuTLS, for signing ES256 and RS256 tokens here ------------------------ */

/* clang-format off */
#define TG_FNS(X) \
	X(privkey_init) \
	X(privkey_deinit) \
	X(privkey_generate) \
	X(privkey_sign_data) \
	X(privkey_export_rsa_raw2) \
	X(privkey_export_ecc_raw2) \
	X(decode_rs_value)
/* clang-format on */

static struct {
#define X(name) __typeof__(gnutls_##name) *name;
	TG_FNS(X)
#undef X
	gnutls_free_function *free;
} tg;

static gnutls_privkey_t rsa_key, ec_key;
static char rsa_n[1400], rsa_e[16], ec_x[64], ec_y[64];

static void tg_load(void)
{
	void *h = dlopen(OAUTH_GNUTLS_SONAME, RTLD_NOW | RTLD_LOCAL);

	assert_non_null(h);
#define X(name) assert_non_null(tg.name = (__typeof__(tg.name))dlsym(h, "gnutls_" #name));
	TG_FNS(X)
#undef X
	assert_non_null(tg.free = (gnutls_free_function *)dlsym(h, "gnutls_free"));
}

static void tg_b64(const gnutls_datum_t *d, size_t width, char *out, size_t cap)
{
	unsigned char buf[1100] = {0};
	const unsigned char *p = d->data;
	size_t n = d->size;

	while (n > 0 && *p == 0)
		p++, n--;
	if (!width)
		width = n;
	assert_true(n <= width && width <= sizeof(buf));
	memcpy(buf + width - n, p, n);
	b64u(buf, width, out, cap);
	(*tg.free)(d->data);
}

static void tg_keys(void)
{
	gnutls_datum_t m, e, x, y;
	gnutls_ecc_curve_t curve;

	assert_int_equal(tg.privkey_init(&rsa_key), 0);
	assert_int_equal(tg.privkey_generate(rsa_key, GNUTLS_PK_RSA, 2048, 0), 0);
	assert_int_equal(
		tg.privkey_export_rsa_raw2(rsa_key, &m, &e, NULL, NULL, NULL, NULL, NULL, NULL, 0),
		0);
	tg_b64(&m, 0, rsa_n, sizeof(rsa_n));
	tg_b64(&e, 0, rsa_e, sizeof(rsa_e));
	assert_int_equal(tg.privkey_init(&ec_key), 0);
	assert_int_equal(tg.privkey_generate(ec_key, GNUTLS_PK_ECDSA,
					     GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0),
			 0);
	assert_int_equal(tg.privkey_export_ecc_raw2(ec_key, &curve, &x, &y, NULL, 0), 0);
	assert_int_equal(curve, GNUTLS_ECC_CURVE_SECP256R1);
	tg_b64(&x, 32, ec_x, sizeof(ec_x));
	tg_b64(&y, 32, ec_y, sizeof(ec_y));
}

/* A token signed with GnuTLS: RS256 as it comes, ES256 from DER to r||s. */
static void tok_tg(struct tok *t, gnutls_privkey_t key, const char *header, const char *payload)
{
	gnutls_datum_t data, sig, r, s;
	unsigned char rs[64];
	char b64[100];
	size_t at;

	tok_input(t, header, payload);
	data = (gnutls_datum_t){(unsigned char *)t->s, (unsigned)t->len};
	assert_int_equal(tg.privkey_sign_data(key, GNUTLS_DIG_SHA256, 0, &data, &sig), 0);
	if (key == rsa_key) {
		tok_sig(t, sig.data, sig.size);
		(*tg.free)(sig.data);
		return;
	}
	assert_int_equal(tg.decode_rs_value(&sig, &r, &s), 0);
	(*tg.free)(sig.data);
	tg_b64(&r, 32, b64, sizeof(b64));
	assert_int_equal(oauth_b64url_decode(b64, strlen(b64), rs, 32, &at), 0);
	tg_b64(&s, 32, b64, sizeof(b64));
	assert_int_equal(oauth_b64url_decode(b64, strlen(b64), rs + 32, 32, &at), 0);
	tok_sig(t, rs, sizeof(rs));
}

static int setup(void **state)
{
	char json[1024];

	(void)state;
	if (sodium_init() < 0)
		return -1;
	ed_make(&ed1, 1);
	ed_make(&ed2, 2);
	ed_make(&ed3, 3);
	snprintf(json, sizeof(json),
		 "{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"ed1\",\"use\":\"sig\","
		 "\"alg\":\"EdDSA\",\"x\":\"%s\"},{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%"
		 "s\"}]}",
		 ed1.x, ed2.x);
	edset = set_of(json);
	tg_load();
	tg_keys();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	oauth_jwks_free(edset);
	tg.privkey_deinit(rsa_key);
	tg.privkey_deinit(ec_key);
	return 0;
}

/* ---- the RFCs' examples ------------------------------------------------------ */

static void rfc_case(const char *jwk, const char *jws, const char *want_payload_b64)
{
	char json[1024];
	struct appl_err err = {0};
	struct oauth_jwks *ks;
	const char *p;
	size_t plen;
	struct tok t;

	snprintf(json, sizeof(json), "{\"keys\":[%s]}", jwk);
	ks = set_of(json);
	assert_int_equal(oauth_jws_verify(ks, jws, strlen(jws), &p, &plen, &err), 0);
	assert_int_equal(plen, strlen(want_payload_b64));
	assert_memory_equal(p, want_payload_b64, plen);
	/* one bit of the signature changed */
	assert_true(strlen(jws) < sizeof(t.s));
	memcpy(t.s, jws, strlen(jws) + 1);
	t.s[strlen(jws) - 10] = t.s[strlen(jws) - 10] == 'A' ? 'B' : 'A';
	assert_refused(oauth_jws_verify(ks, t.s, strlen(jws), &p, &plen, &err), err,
		       "does not verify");
	oauth_jwks_free(ks);
}

static void test_rfc_examples_verify(void **state)
{
	(void)state;
	rfc_case(rfc8037_jwk, rfc8037_jws, "RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc");
	rfc_case(rfc7515_rsa_jwk, rfc7515_rs256, RFC7515_PAYLOAD);
	rfc_case(rfc7515_ec_jwk, rfc7515_es256, RFC7515_PAYLOAD);
}

/* Their claims are no access token's: the full check passes the signature,
 * then refuses a claim. */
static void test_rfc_examples_claims(void **state)
{
	struct oauth_rules r = {.issuer = "joe", .audience = AUD, .now = 1300819000};
	struct appl_err err = {0};
	struct oauth_token tk;
	struct oauth_jwks *ks;
	char json[1024];

	(void)state;
	snprintf(json, sizeof(json), "{\"keys\":[%s]}", rfc7515_rsa_jwk);
	ks = set_of(json);
	assert_refused(oauth_jwt_verify(ks, rfc7515_rs256, strlen(rfc7515_rs256), &r, &tk, &err),
		       err, "wrong audience");
	r.issuer = "jo";
	assert_refused(oauth_jwt_verify(ks, rfc7515_rs256, strlen(rfc7515_rs256), &r, &tk, &err),
		       err, "wrong issuer");
	oauth_jwks_free(ks);
}

/* ---- valid tokens ---------------------------------------------------------------- */

static void test_valid_token(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t;

	(void)state;
	assert_int_equal(ed_check(NULL, "", &tk, &err), 0);
	assert_string_equal(tk.subject, "alice@example");
	assert_string_equal(tk.role, "operator");
	assert_int_equal(tk.exp, 1700003600);
	/* without a kid each Ed25519 key is tried: ed2 has none */
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed2, "{\"alg\":\"EdDSA\"}", payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\"}", payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	/* unknown header members are no business of ours, a jwk among them */
	tok_ed(&t, &ed2, "{\"alg\":\"EdDSA\",\"x5u\":\"https://evil.example/k\",\"jwk\":{}}",
	       payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
}

static void test_typ(void **state)
{
	static const char *const ok[] = {
		"JWT", "jwt", "at+jwt", "AT+JWT", "application/at+jwt", "application/jwt"};
	static const char *const bad[] = {"JWS", "at+jwt ", "JWE", "application/json", ""};
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], hdr[128];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(hdr, sizeof(hdr), "{\"alg\":\"EdDSA\",\"typ\":\"%s\"}", ok[i]);
		tok_ed(&t, &ed1, hdr, payload);
		assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(hdr, sizeof(hdr), "{\"alg\":\"EdDSA\",\"typ\":\"%s\"}", bad[i]);
		tok_ed(&t, &ed1, hdr, payload);
		assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
			       "typ refused");
	}
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"typ\":1}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "typ refused");
}

/* ---- the claims -------------------------------------------------------------------- */

static void test_exp(void **state)
{
	struct appl_err err = {0};
	struct oauth_token tk;
	char extra[64];

	(void)state;
	assert_refused(ed_check("exp", "", &tk, &err), err, "no expiry");
	assert_refused(ed_check("exp", ",\"exp\":\"1700003600\"", &tk, &err), err, "exp malformed");
	assert_refused(ed_check("exp", ",\"exp\":null", &tk, &err), err, "exp malformed");
	/* now - skew < exp: the edge */
	snprintf(extra, sizeof(extra), ",\"exp\":%d", NOW - SKEW);
	assert_refused(ed_check("exp", extra, &tk, &err), err, "expired");
	snprintf(extra, sizeof(extra), ",\"exp\":%d", NOW - SKEW + 1);
	assert_int_equal(ed_check("exp", extra, &tk, &err), 0);
	assert_int_equal(tk.exp, NOW - SKEW + 1);
	/* reals, exact at the edge */
	snprintf(extra, sizeof(extra), ",\"exp\":%d.5", NOW - SKEW);
	assert_int_equal(ed_check("exp", extra, &tk, &err), 0);
	assert_int_equal(tk.exp, NOW - SKEW);
	snprintf(extra, sizeof(extra), ",\"exp\":%d.0", NOW - SKEW);
	assert_refused(ed_check("exp", extra, &tk, &err), err, "expired");
	snprintf(extra, sizeof(extra), ",\"exp\":%d.5", NOW - SKEW - 1);
	assert_refused(ed_check("exp", extra, &tk, &err), err, "expired");
	assert_int_equal(ed_check("exp", ",\"exp\":1e300", &tk, &err), 0);
	assert_int_equal(tk.exp, INT64_MAX);
	assert_refused(ed_check("exp", ",\"exp\":-1e300", &tk, &err), err, "expired");
	/* the subject is not left behind by a refusal */
	assert_string_equal(tk.subject, "");
}

static void test_nbf_and_iat(void **state)
{
	struct appl_err err = {0};
	struct oauth_token tk;
	char extra[64];

	(void)state;
	assert_int_equal(ed_check("nbf", "", &tk, &err), 0);
	assert_int_equal(ed_check("iat", "", &tk, &err), 0);
	snprintf(extra, sizeof(extra), ",\"nbf\":%d", NOW + SKEW);
	assert_int_equal(ed_check("nbf", extra, &tk, &err), 0);
	snprintf(extra, sizeof(extra), ",\"nbf\":%d", NOW + SKEW + 1);
	assert_refused(ed_check("nbf", extra, &tk, &err), err, "not yet valid");
	snprintf(extra, sizeof(extra), ",\"nbf\":%d.25", NOW + SKEW);
	assert_refused(ed_check("nbf", extra, &tk, &err), err, "not yet valid");
	assert_refused(ed_check("nbf", ",\"nbf\":true", &tk, &err), err, "nbf malformed");
	snprintf(extra, sizeof(extra), ",\"iat\":%d", NOW + SKEW);
	assert_int_equal(ed_check("iat", extra, &tk, &err), 0);
	snprintf(extra, sizeof(extra), ",\"iat\":%d", NOW + SKEW + 1);
	assert_refused(ed_check("iat", extra, &tk, &err), err, "issued in the future");
	assert_refused(ed_check("iat", ",\"iat\":[]", &tk, &err), err, "iat malformed");
}

static void test_skew_zero(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], extra[64];
	struct tok t;

	(void)state;
	r.skew_s = 0;
	snprintf(extra, sizeof(extra), ",\"exp\":%d", NOW);
	claims(payload, sizeof(payload), "exp", extra);
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "expired");
	snprintf(extra, sizeof(extra), ",\"nbf\":%d", NOW);
	claims(payload, sizeof(payload), "nbf", extra);
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	snprintf(extra, sizeof(extra), ",\"nbf\":%d", NOW + 1);
	claims(payload, sizeof(payload), "nbf", extra);
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "not yet valid");
	/* a skew as large as it gets does not wrap around */
	r.skew_s = UINT32_MAX;
	r.now = INT64_MIN + 5;
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "not yet valid");
	r.now = INT64_MAX - 5;
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "expired");
}

static void test_iss(void **state)
{
	struct appl_err err = {0};
	struct oauth_token tk;

	(void)state;
	assert_refused(ed_check("iss", "", &tk, &err), err, "wrong issuer");
	assert_refused(ed_check("iss", ",\"iss\":\"https://as.example.evil\"", &tk, &err), err,
		       "wrong issuer");
	assert_refused(ed_check("iss", ",\"iss\":\"https://as.exampl\"", &tk, &err), err,
		       "wrong issuer");
	assert_refused(ed_check("iss", ",\"iss\":\"HTTPS://AS.EXAMPLE\"", &tk, &err), err,
		       "wrong issuer");
	assert_refused(ed_check("iss", ",\"iss\":[\"" ISS "\"]", &tk, &err), err, "wrong issuer");
}

static void test_aud(void **state)
{
	struct appl_err err = {0};
	struct oauth_token tk;

	(void)state;
	assert_int_equal(ed_check("aud", ",\"aud\":[\"other\",\"" AUD "\"]", &tk, &err), 0);
	assert_int_equal(ed_check("aud", ",\"aud\":[\"" AUD "\"]", &tk, &err), 0);
	assert_refused(ed_check("aud", "", &tk, &err), err, "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":\"other\"", &tk, &err), err, "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":[\"other\"]", &tk, &err), err, "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":[]", &tk, &err), err, "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":[[\"" AUD "\"]]", &tk, &err), err,
		       "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":{\"" AUD "\":1}", &tk, &err), err,
		       "wrong audience");
	assert_refused(ed_check("aud", ",\"aud\":\"" AUD "/\"", &tk, &err), err, "wrong audience");
}

static void test_sub(void **state)
{
	struct appl_err err = {0};
	struct oauth_token tk;
	char extra[512], sub[OAUTH_SUBJECT_MAX + 2];

	(void)state;
	assert_refused(ed_check("sub", "", &tk, &err), err, "no subject");
	assert_refused(ed_check("sub", ",\"sub\":\"\"", &tk, &err), err, "subject malformed");
	assert_refused(ed_check("sub", ",\"sub\":42", &tk, &err), err, "subject malformed");
	assert_refused(ed_check("sub", ",\"sub\":\"alice bob\"", &tk, &err), err,
		       "subject malformed");
	assert_refused(ed_check("sub", ",\"sub\":\"alice\\nuser=root\"", &tk, &err), err,
		       "subject malformed");
	assert_refused(ed_check("sub", ",\"sub\":\"al\\u007fice\"", &tk, &err), err,
		       "subject malformed");
	assert_refused(ed_check("sub", ",\"sub\":\"al\\u00e9\"", &tk, &err), err,
		       "subject malformed");
	memset(sub, 'a', OAUTH_SUBJECT_MAX);
	sub[OAUTH_SUBJECT_MAX] = '\0';
	snprintf(extra, sizeof(extra), ",\"sub\":\"%s\"", sub);
	assert_int_equal(ed_check("sub", extra, &tk, &err), 0);
	assert_string_equal(tk.subject, sub);
	memset(sub, 'a', OAUTH_SUBJECT_MAX + 1);
	sub[OAUTH_SUBJECT_MAX + 1] = '\0';
	snprintf(extra, sizeof(extra), ",\"sub\":\"%s\"", sub);
	assert_refused(ed_check("sub", extra, &tk, &err), err, "subject malformed");
	assert_int_equal(ed_check("sub", ",\"sub\":\"!~\"", &tk, &err), 0);
	assert_string_equal(tk.subject, "!~");
}

static void test_role(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char extra[512], role[OAUTH_ROLE_MAX + 2], payload[1024];
	struct tok t;

	(void)state;
	assert_int_equal(ed_check(ROLE, "", &tk, &err), 0);
	assert_string_equal(tk.role, "");
	assert_int_equal(ed_check(ROLE, ",\"" ROLE "\":\"data.team-1_a\"", &tk, &err), 0);
	assert_string_equal(tk.role, "data.team-1_a");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":[\"admin\"]", &tk, &err), err,
		       "role claim malformed");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":7", &tk, &err), err, "role claim malformed");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":null", &tk, &err), err,
		       "role claim malformed");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":\"\"", &tk, &err), err,
		       "role claim malformed");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":\"admin role\"", &tk, &err), err,
		       "role claim malformed");
	assert_refused(ed_check(ROLE, ",\"" ROLE "\":\"../admin\"", &tk, &err), err,
		       "role claim malformed");
	memset(role, 'r', OAUTH_ROLE_MAX);
	role[OAUTH_ROLE_MAX] = '\0';
	snprintf(extra, sizeof(extra), ",\"" ROLE "\":\"%s\"", role);
	assert_int_equal(ed_check(ROLE, extra, &tk, &err), 0);
	assert_string_equal(tk.role, role);
	memset(role, 'r', OAUTH_ROLE_MAX + 1);
	role[OAUTH_ROLE_MAX + 1] = '\0';
	snprintf(extra, sizeof(extra), ",\"" ROLE "\":\"%s\"", role);
	assert_refused(ed_check(ROLE, extra, &tk, &err), err, "role claim malformed");
	/* no role claim named: none read, whatever the token holds */
	r.role_claim = NULL;
	claims(payload, sizeof(payload), ROLE, ",\"" ROLE "\":7");
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	assert_string_equal(tk.role, "");
}

static void test_payload_malformed(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	struct tok t;
	char deep[64];

	(void)state;
	tok_ed(&t, &ed1, HDR_ED1, "[1]");
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "payload malformed");
	tok_ed(&t, &ed1, HDR_ED1, "{\"sub\":\"a\",\"sub\":\"b\"}");
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "payload malformed");
	tok_ed(&t, &ed1, HDR_ED1, "{\"iss\":\"" ISS "\"} ");
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), -EACCES);
	memset(deep, '[', 9);
	deep[9] = '\0';
	snprintf(deep + 9, sizeof(deep) - 9, "%s", "]]]]]]]]]");
	tok_ed(&t, &ed1, HDR_ED1, deep);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "payload malformed");
	tok_ed(&t, &ed1, HDR_ED1, "");
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "payload malformed");
}

/* The messages are logged: none quotes the token. */
static void test_messages_quote_nothing(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	struct tok t;

	(void)state;
	assert_int_equal(ed_check("iss", ",\"iss\":\"EVIL-ISS\"", &tk, &err), -EACCES);
	assert_null(strstr(err.msg, "EVIL"));
	assert_int_equal(ed_check("sub", ",\"sub\":\"EVIL SUB\"", &tk, &err), -EACCES);
	assert_null(strstr(err.msg, "EVIL"));
	tok_ed(&t, &ed1, HDR_ED1, "{\"EVIL\":EVIL}");
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), -EACCES);
	assert_null(strstr(err.msg, "EVIL"));
	tok_ed(&t, &ed1, "{\"alg\":\"EVIL\"}", "{}");
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), -EACCES);
	assert_null(strstr(err.msg, "EVIL"));
	tok_ed(&t, &ed1, "{\"alg\":EVIL}", "{}");
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), -EACCES);
	assert_null(strstr(err.msg, "EVIL"));
}

/* ---- forgeries ------------------------------------------------------------------- */

static void test_alg_none_and_others_refused(void **state)
{
	static const char *const algs[] = {"none",  "None",  "NONE",   "HS256",	  "HS512", "ES384",
					   "RS512", "PS256", "ES256K", "Ed25519", "eddsa", ""};
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], hdr[128];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_input(&t, "{\"alg\":\"none\"}", payload);
	t.s[t.len++] = '.';
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "algorithm refused");
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++) {
		snprintf(hdr, sizeof(hdr), "{\"alg\":\"%s\",\"kid\":\"ed1\"}", algs[i]);
		tok_ed(&t, &ed1, hdr, payload);
		assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
			       "algorithm refused");
	}
	tok_ed(&t, &ed1, "{\"kid\":\"ed1\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "header malformed");
	tok_ed(&t, &ed1, "{\"alg\":[\"EdDSA\"]}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "header malformed");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"alg\":\"none\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "header malformed");
}

/* The classic forgery: HS256 keyed with the bytes of a published public
 * key, which a verifier that trusts the header's alg would check with
 * HMAC. */
static void test_hs256_with_the_public_key_refused(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	unsigned char mac[crypto_auth_hmacsha256_BYTES];
	char payload[1024], jwk[256];
	struct tok t;
	const char *keys[] = {(const char *)ed1.pk, ed1.x, jwk};
	size_t lens[] = {sizeof(ed1.pk), strlen(ed1.x), 0};

	(void)state;
	snprintf(jwk, sizeof(jwk), "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\"}", ed1.x);
	lens[2] = strlen(jwk);
	claims(payload, sizeof(payload), NULL, "");
	for (size_t i = 0; i < 3; i++) {
		crypto_auth_hmacsha256_state st;

		tok_input(&t, "{\"alg\":\"HS256\",\"kid\":\"ed1\"}", payload);
		crypto_auth_hmacsha256_init(&st, (const unsigned char *)keys[i], lens[i]);
		crypto_auth_hmacsha256_update(&st, (const unsigned char *)t.s, t.len);
		crypto_auth_hmacsha256_final(&st, mac);
		tok_sig(&t, mac, sizeof(mac));
		assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
			       "algorithm refused");
	}
}

static void test_alg_key_confusion_refused(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], json[2048];
	struct oauth_jwks *ks;
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	/* an ES256 header naming an Ed25519 key, signed with it */
	tok_ed(&t, &ed1, "{\"alg\":\"ES256\",\"kid\":\"ed1\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "does not match the key");
	/* RS256 and ES256 with no kid, against a set of Ed25519 keys only */
	tok_ed(&t, &ed1, "{\"alg\":\"RS256\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "no key for this algorithm");
	/* EdDSA naming the RSA key's kid */
	snprintf(json, sizeof(json),
		 "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa\",\"n\":\"%s\",\"e\":\"%s\"},"
		 "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"ed1\",\"x\":\"%s\"}]}",
		 rsa_n, rsa_e, ed1.x);
	ks = set_of(json);
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":\"rsa\"}", payload);
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err,
		       "does not match the key");
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"ed1\"}", payload);
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err,
		       "does not match the key");
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"rsa\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
	oauth_jwks_free(ks);
}

static void test_kid(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], hdr[512], kid[OAUTH_KID_MAX + 2];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":\"ed9\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "no key with this kid");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":\"ed\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "no key with this kid");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":\"\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "no key with this kid");
	memset(kid, 'k', sizeof(kid) - 1);
	kid[sizeof(kid) - 1] = '\0';
	snprintf(hdr, sizeof(hdr), "{\"alg\":\"EdDSA\",\"kid\":\"%s\"}", kid);
	tok_ed(&t, &ed1, hdr, payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "no key with this kid");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":1}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "header malformed");
	/* a kid picks its key alone: ed2's signature under ed1's kid fails */
	tok_ed(&t, &ed2, HDR_ED1, payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "signature does not verify");
}

static void test_tampering_refused(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024], other[1024], b64[2048];
	struct tok t, u;
	size_t dot1, dot2;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	/* another payload under the same signature */
	claims(other, sizeof(other), "sub", ",\"sub\":\"root\"");
	dot1 = strchr(t.s, '.') - t.s;
	dot2 = strchr(t.s + dot1 + 1, '.') - t.s;
	b64u(other, strlen(other), b64, sizeof(b64));
	u.len = (size_t)snprintf(u.s, sizeof(u.s), "%.*s.%s%s", (int)dot1, t.s, b64, t.s + dot2);
	assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err,
		       "signature does not verify");
	assert_string_equal(tk.subject, "");
	/* a signature by a key of no set */
	tok_ed(&t, &ed3, "{\"alg\":\"EdDSA\"}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "signature does not verify");
	/* a signature a byte short, or a byte long */
	for (size_t n = crypto_sign_BYTES - 1; n <= crypto_sign_BYTES + 1; n += 2) {
		unsigned char sig[crypto_sign_BYTES + 1] = {0};

		tok_input(&t, HDR_ED1, payload);
		crypto_sign_detached(sig, NULL, (const unsigned char *)t.s, t.len, ed1.sk);
		tok_sig(&t, sig, n);
		assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
			       "signature does not verify");
	}
}

static void test_crit_refused(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"kid\":\"ed1\",\"crit\":[\"exp\"],\"exp\":1}",
	       payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "crit");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"crit\":[\"b64\"],\"b64\":false}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "crit");
	tok_ed(&t, &ed1, "{\"alg\":\"EdDSA\",\"crit\":[]}", payload);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err, "crit");
}

/* A valid token padded to exactly len bytes with a claim "pad" (base64
 * skips a length in four: headers of three lengths fill the gaps). */
static void tok_of_len(struct tok *t, size_t len)
{
	static const char *const hdrs[] = {HDR_ED1, "{\"alg\":\"EdDSA\", \"kid\":\"ed1\"}",
					   "{\"alg\":\"EdDSA\",  \"kid\":\"ed1\"}"};
	char payload[OAUTH_TOKEN_MAX], extra[OAUTH_TOKEN_MAX];

	for (size_t pad = 5500; pad < 6500; pad++) {
		int n = snprintf(extra, sizeof(extra), ",\"pad\":\"%0*d\"", (int)pad, 0);

		assert_true(n > 0 && (size_t)n < sizeof(extra));
		claims(payload, sizeof(payload), NULL, extra);
		for (size_t h = 0; h < sizeof(hdrs) / sizeof(hdrs[0]); h++) {
			tok_ed(t, &ed1, hdrs[h], payload);
			if (t->len == len)
				return;
		}
	}
	fail_msg("no token of %zu bytes", len);
}

static void test_length_cap(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	struct tok t;

	(void)state;
	tok_of_len(&t, OAUTH_TOKEN_MAX);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), 0);
	tok_of_len(&t, OAUTH_TOKEN_MAX + 1);
	assert_refused(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), err,
		       "longer than the cap");
	assert_refused(oauth_jwt_verify(edset, t.s, 0, &r, &tk, &err), err, "malformed");
}

/* Framing and base64url: each a valid token with one change. */
static void test_framing_refused(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t, u;
	size_t dot1, sig_at;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed1, HDR_ED1, payload);
	dot1 = strchr(t.s, '.') - t.s;
	sig_at = strrchr(t.s, '.') - t.s + 1;
	/* the signature's 86 characters carry 4 bits that must be zero: 'A'
	 * to 'B' in the last spells the same bytes a second way */
	u = t;
	assert_non_null(strchr("AQgw", u.s[u.len - 1]));
	u.s[u.len - 1]++;
	assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err,
		       "signature malformed");
	/* padding, the standard alphabet, whitespace, a NUL */
	static const char *const subs[] = {"=", "+", "/", " ", "\n", "%", "\0"};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		size_t at[] = {dot1 - 1, sig_at + 3, t.len - 1};
		for (size_t j = 0; j < 3; j++) {
			u = t;
			u.s[at[j]] = subs[i][0];
			assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err,
				       "malformed");
		}
	}
	u = t;
	u.s[u.len++] = '=';
	assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err, "malformed");
	u = t;
	memcpy(u.s + u.len, ".AAAA", 5);
	u.len += 5;
	assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err, "malformed");
	assert_refused(oauth_jwt_verify(edset, t.s, sig_at - 1, &r, &tk, &err), err, "malformed");
	assert_refused(oauth_jwt_verify(edset, "..", 2, &r, &tk, &err), err, "header malformed");
	/* a header of 4n+1 characters is no base64 */
	u.len = (size_t)snprintf(u.s, sizeof(u.s), "eyJhbGciOiJFZERTQSJ9A%s", t.s + dot1);
	assert_refused(oauth_jwt_verify(edset, u.s, u.len, &r, &tk, &err), err, "header malformed");
	/* only len bytes are read: a valid token followed by junk */
	u = t;
	memcpy(u.s + u.len, "!!!!", 5);
	assert_int_equal(oauth_jwt_verify(edset, u.s, t.len, &r, &tk, &err), 0);
}

static void test_null_arguments(void **state)
{
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_ed(&t, &ed1, HDR_ED1, payload);
	assert_int_equal(oauth_jwt_verify(NULL, t.s, t.len, &r, &tk, &err), -EINVAL);
	assert_int_equal(oauth_jwt_verify(edset, NULL, t.len, &r, &tk, &err), -EINVAL);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, NULL, &tk, &err), -EINVAL);
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, NULL, &err), -EINVAL);
	r.issuer = NULL;
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, &err), -EINVAL);
	r = rules_std();
	r.audience = NULL;
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, NULL), -EINVAL);
	r = rules_std();
	assert_int_equal(oauth_jwt_verify(edset, t.s, t.len, &r, &tk, NULL), 0);
}

/* ---- ES256 and RS256 ---------------------------------------------------------------- */

static struct oauth_jwks *tg_set(void)
{
	char json[2048];

	snprintf(json, sizeof(json),
		 "{\"keys\":[{\"kty\":\"RSA\",\"kid\":\"rsa\",\"alg\":\"RS256\",\"use\":\"sig\","
		 "\"n\":\"%s\",\"e\":\"%s\"},{\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"ec\","
		 "\"key_ops\":[\"verify\"],\"x\":\"%s\",\"y\":\"%s\"}]}",
		 rsa_n, rsa_e, ec_x, ec_y);
	return set_of(json);
}

static void test_es256_and_rs256(void **state)
{
	struct oauth_jwks *ks = tg_set();
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	for (int i = 0; i < 20; i++) { /* r and s of every length */
		tok_tg(&t, ec_key, "{\"alg\":\"ES256\",\"kid\":\"ec\"}", payload);
		assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
		assert_string_equal(tk.subject, "alice@example");
	}
	tok_tg(&t, ec_key, "{\"alg\":\"ES256\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"rsa\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
	/* claims still apply */
	claims(payload, sizeof(payload), "aud", "");
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\"}", payload);
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err, "wrong audience");
	/* an ES256 signature under the RSA key's kid */
	tok_tg(&t, ec_key, "{\"alg\":\"ES256\",\"kid\":\"rsa\"}", payload);
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err,
		       "does not match the key");
	oauth_jwks_free(ks);
}

/* Signatures GnuTLS would find odd are a plain no (-EACCES), never a
 * server error a client could cause. */
static void test_es256_and_rs256_forged(void **state)
{
	struct oauth_jwks *ks = tg_set();
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	unsigned char junk[OAUTH_SIG_MAX];
	char payload[1024];
	struct tok t;

	(void)state;
	claims(payload, sizeof(payload), NULL, "");
	tok_tg(&t, ec_key, "{\"alg\":\"ES256\",\"kid\":\"ec\"}", payload);
	t.s[t.len - 5] = t.s[t.len - 5] == 'A' ? 'B' : 'A';
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err, "does not verify");
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"rsa\"}", payload);
	t.s[t.len - 5] = t.s[t.len - 5] == 'A' ? 'B' : 'A';
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err, "does not verify");
	for (int fill = 0; fill < 256; fill += 255) {
		static const char *const hdrs[] = {"{\"alg\":\"ES256\",\"kid\":\"ec\"}",
						   "{\"alg\":\"RS256\",\"kid\":\"rsa\"}"};
		static const size_t lens[] = {64, 256, 63, 65, 255, 257, 0, 1};
		memset(junk, fill, sizeof(junk));
		for (size_t h = 0; h < 2; h++)
			for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
				tok_input(&t, hdrs[h], payload);
				tok_sig(&t, junk, lens[l]);
				assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err,
					       "does not verify");
			}
	}
	/* r = n - 1 style junk: the top half set, the bottom clear */
	memset(junk, 0xff, 32);
	memset(junk + 32, 0, 32);
	tok_input(&t, "{\"alg\":\"ES256\"}", payload);
	tok_sig(&t, junk, 64);
	assert_refused(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), err, "does not verify");
	oauth_jwks_free(ks);
}

static void test_rsa_modulus_with_a_leading_zero(void **state)
{
	unsigned char n[300];
	char n_b64[500], json[2048];
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	struct oauth_jwks *ks;
	char payload[1024];
	size_t len;
	struct tok t;

	(void)state;
	n[0] = 0;
	assert_int_equal(oauth_b64url_decode(rsa_n, strlen(rsa_n), n + 1, sizeof(n) - 1, &len), 0);
	b64u(n, len + 1, n_b64, sizeof(n_b64));
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AAEAAQ\"}]}",
		 n_b64);
	ks = set_of(json);
	assert_int_equal(ks->keys[0].n_len, len);
	assert_int_equal(ks->keys[0].e_len, 3);
	claims(payload, sizeof(payload), NULL, "");
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), 0);
	oauth_jwks_free(ks);
}

/* Without GnuTLS an ES256 or RS256 key still parses; its tokens fail -EIO
 * with the package to install. The load's answer is kept in the set. */
static void test_gnutls_missing(void **state)
{
	struct oauth_jwks *ks = tg_set();
	struct oauth_rules r = rules_std();
	struct appl_err err = {0};
	struct oauth_token tk;
	char payload[1024];
	struct tok t;

	(void)state;
	assert_int_equal(ks->crypto_rc, 1);
	ks->crypto_rc = -EIO;
	snprintf(ks->crypto_why, sizeof(ks->crypto_why),
		 "libgnutls.so.30 could not be loaded: gone; install the Debian package "
		 "libgnutls30");
	claims(payload, sizeof(payload), NULL, "");
	tok_tg(&t, ec_key, "{\"alg\":\"ES256\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), -EIO);
	assert_non_null(strstr(err.msg, "libgnutls30"));
	tok_tg(&t, rsa_key, "{\"alg\":\"RS256\",\"kid\":\"rsa\"}", payload);
	assert_int_equal(oauth_jwt_verify(ks, t.s, t.len, &r, &tk, &err), -EIO);
	oauth_jwks_free(ks);
}

static void test_es256_der(void **state)
{
	unsigned char rs[64], der[OAUTH_ES256_DER_MAX];
	size_t n;

	(void)state;
	memset(rs, 0, sizeof(rs));
	n = oauth_sig_es256_der(rs, der);
	assert_int_equal(n, 8);
	assert_memory_equal(der, "\x30\x06\x02\x01\x00\x02\x01\x00", 8);
	memset(rs, 0xff, sizeof(rs));
	n = oauth_sig_es256_der(rs, der);
	assert_int_equal(n, OAUTH_ES256_DER_MAX);
	assert_memory_equal(der, "\x30\x46\x02\x21\x00\xff", 6);
	assert_memory_equal(der + 2 + 35, "\x02\x21\x00\xff", 4);
	memset(rs, 0, sizeof(rs));
	rs[31] = 0x80; /* r = 0x80: a zero byte first */
	rs[33] = 0x7f; /* s: leading zero dropped, 31 bytes, no pad */
	n = oauth_sig_es256_der(rs, der);
	assert_int_equal(n, 2 + 4 + 33);
	assert_memory_equal(der, "\x30\x25\x02\x02\x00\x80\x02\x1f\x7f", 9);
}

static void test_b64url(void **state)
{
	unsigned char out[8];
	size_t n;

	(void)state;
	assert_int_equal(oauth_b64url_decode("", 0, out, sizeof(out), &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(oauth_b64url_decode("_-8", 3, out, sizeof(out), &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(out, "\xff\xef", 2);
	assert_int_equal(oauth_b64url_decode("_-9", 3, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("_-8=", 4, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("/+8", 3, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("A", 1, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("AAAAA", 5, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("AA AA", 5, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("AAAAAAAAAAAA", 12, out, sizeof(out), &n), -EINVAL);
	assert_int_equal(oauth_b64url_decode("AAAAAAAAAAA", 11, out, sizeof(out), &n), 0);
	assert_int_equal(n, 8);
}

/* ---- the JWK Set ------------------------------------------------------------------- */

#define OKP(x)	 "{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"" x "\""
#define ED_X	 "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
#define GOOD_OKP OKP(ED_X) "}"
#define RSA_1024_N                                                                                 \
	"wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"   \
	"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE"

static void test_jwks_private_member_refused(void **state)
{
	static const char *const members[] = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"};
	char json[512];
	struct appl_err err = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
		snprintf(json, sizeof(json),
			 "{\"keys\":[" GOOD_OKP "," OKP(ED_X) ",\"%s\":\"AAAA\"}]}", members[i]);
		assert_int_equal(set_refused(json, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "private member"));
		assert_non_null(strstr(err.msg, "key 1"));
	}
	/* a shared secret is one too: an oct key with its k */
	assert_int_equal(
		set_refused("{\"keys\":[" GOOD_OKP ",{\"kty\":\"oct\",\"k\":\"AAAA\"}]}", &err),
		-EINVAL);
	assert_non_null(strstr(err.msg, "\"k\""));
}

/* Keys that cannot or must not be used are skipped and counted. */
static void test_jwks_skips(void **state)
{
	static const char *const skipped[] = {
		"{\"kty\":\"oct\",\"kid\":\"h\",\"alg\":\"HS256\"}",
		"{\"kty\":\"XYZ\"}",
		"{\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"" ED_X "\"}",
		"{\"kty\":\"OKP\",\"crv\":\"Ed448\",\"x\":\"" ED_X "\"}",
		"{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"AA\",\"y\":\"AA\"}",
		OKP(ED_X) ",\"use\":\"enc\"}",
		OKP(ED_X) ",\"key_ops\":[\"encrypt\"]}",
		OKP(ED_X) ",\"key_ops\":[]}",
		OKP(ED_X) ",\"alg\":\"ES256\"}",
		OKP(ED_X) ",\"alg\":\"none\"}",
		"{\"kty\":\"RSA\",\"alg\":\"RS512\",\"n\":\"" RSA_1024_N "\",\"e\":\"AQAB\"}",
		"{\"kty\":\"RSA\",\"n\":\"" RSA_1024_N "\",\"e\":\"AQAB\"}",
		OKP("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHUR") "}", /* 31 bytes */
		OKP("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo=") "}",
		OKP("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo") "}",
		OKP("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURp") "}", /* stray bits */
		OKP(ED_X) ",\"kid\":7}",
		OKP(ED_X) ",\"use\":[\"sig\"]}",
		"{\"kty\":\"OKP\",\"x\":\"" ED_X "\"}",
		"{\"crv\":\"Ed25519\",\"x\":\"" ED_X "\"}",
		"\"a key\"",
		"[]",
	};
	char json[1024];
	struct oauth_jwks *ks;
	struct appl_err err = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
		snprintf(json, sizeof(json), "{\"keys\":[%s," GOOD_OKP "]}", skipped[i]);
		ks = set_of(json);
		if (oauth_jwks_count(ks) != 1 || oauth_jwks_skipped(ks) != 1)
			fail_msg("case %zu: %zu kept, %zu skipped", i, oauth_jwks_count(ks),
				 oauth_jwks_skipped(ks));
		oauth_jwks_free(ks);
		snprintf(json, sizeof(json), "{\"keys\":[%s]}", skipped[i]);
		assert_int_equal(set_refused(json, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "no usable key, 1 skipped"));
	}
	/* what a usable key may say of itself */
	ks = set_of("{\"keys\":[" OKP(
		ED_X) ",\"use\":\"sig\",\"key_ops\":[\"sign\",\"verify\"],"
		      "\"alg\":\"EdDSA\",\"x5t\":\"abc\",\"ext\":true}],\"other\":1}");
	assert_int_equal(oauth_jwks_count(ks), 1);
	oauth_jwks_free(ks);
}

static void test_jwks_no_usable_key_says_why(void **state)
{
	struct appl_err err = {0};

	(void)state;
	assert_int_equal(set_refused("{\"keys\":[]}", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "holds no key"));
	assert_int_equal(
		set_refused("{\"keys\":[{\"kty\":\"oct\"},{\"kty\":\"RSA\",\"n\":\"" RSA_1024_N
			    "\",\"e\":\"AQAB\"}," OKP(ED_X) ",\"use\":\"enc\"},"
							    "{\"kty\":\"EC\"},{}]}",
			    &err),
		-EINVAL);
	assert_non_null(strstr(err.msg, "5 skipped"));
	assert_non_null(strstr(err.msg, "1 of an unsupported type"));
	assert_non_null(strstr(err.msg, "1 not for verifying"));
	assert_non_null(strstr(err.msg, "1 RSA keys under 2048"));
	assert_non_null(strstr(err.msg, "2 malformed"));
}

static void test_jwks_rsa_numbers(void **state)
{
	unsigned char n[1100];
	char n_b64[1500], json[3000];
	struct appl_err err = {0};
	struct oauth_jwks *ks;
	size_t len;
	static const char *const bad_e[] = {"AQ", "Ag", "AAAB", "AQAAAAE", "", "AAAAAAE"};

	(void)state;
	assert_int_equal(oauth_b64url_decode(rsa_n, strlen(rsa_n), n, sizeof(n), &len), 0);
	for (size_t i = 0; i < sizeof(bad_e) / sizeof(bad_e[0]); i++) {
		snprintf(json, sizeof(json),
			 "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"}]}", rsa_n,
			 bad_e[i]);
		if (set_refused(json, &err) != -EINVAL)
			fail_msg("e \"%s\" accepted", bad_e[i]);
	}
	/* e of 4 bytes is the most */
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"gAAAAQ\"}]}",
		 rsa_n);
	ks = set_of(json);
	oauth_jwks_free(ks);
	/* an even modulus */
	n[len - 1] &= 0xfe;
	b64u(n, len, n_b64, sizeof(n_b64));
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}]}",
		 n_b64);
	assert_int_equal(set_refused(json, &err), -EINVAL);
	/* 2047 bits, 8192 bits, 8193 bits */
	memset(n, 0xff, sizeof(n));
	n[0] = 0x7f;
	b64u(n, 256, n_b64, sizeof(n_b64));
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}]}",
		 n_b64);
	assert_int_equal(set_refused(json, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "under 2048"));
	n[0] = 0xff;
	b64u(n, 1024, n_b64, sizeof(n_b64));
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}]}",
		 n_b64);
	ks = set_of(json);
	oauth_jwks_free(ks);
	n[0] = 0x01;
	b64u(n, 1025, n_b64, sizeof(n_b64));
	snprintf(json, sizeof(json), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}]}",
		 n_b64);
	assert_int_equal(set_refused(json, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "over 8192"));
}

static void test_jwks_kids(void **state)
{
	char json[OAUTH_JWKS_MAX];
	char kid[OAUTH_KID_MAX + 2];
	struct appl_err err = {0};
	struct oauth_jwks *ks;
	size_t at;

	(void)state;
	assert_int_equal(set_refused("{\"keys\":[" OKP(ED_X) ",\"kid\":\"a\"}," OKP(
					     ED_X) ",\"kid\":\"a\"}]}",
				     &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "kid of an earlier key"));
	/* one kid on a usable key and on a skipped one is no clash */
	ks = set_of("{\"keys\":[" OKP(ED_X) ",\"kid\":\"a\"}," OKP(
		ED_X) ",\"kid\":\"a\",\"use\":\"enc\"}," OKP(ED_X) "}," OKP(ED_X) "}]}");
	assert_int_equal(oauth_jwks_count(ks), 3);
	assert_int_equal(oauth_jwks_skipped(ks), 1);
	oauth_jwks_free(ks);
	memset(kid, 'k', OAUTH_KID_MAX);
	kid[OAUTH_KID_MAX] = '\0';
	snprintf(json, sizeof(json), "{\"keys\":[" OKP(ED_X) ",\"kid\":\"%s\"}]}", kid);
	ks = set_of(json);
	oauth_jwks_free(ks);
	memset(kid, 'k', OAUTH_KID_MAX + 1);
	kid[OAUTH_KID_MAX + 1] = '\0';
	snprintf(json, sizeof(json), "{\"keys\":[" OKP(ED_X) ",\"kid\":\"%s\"}]}", kid);
	assert_int_equal(set_refused(json, &err), -EINVAL);
	/* 32 usable keys, then 33 */
	at = (size_t)snprintf(json, sizeof(json), "{\"keys\":[");
	for (int i = 0; i < OAUTH_JWKS_KEYS_MAX; i++)
		at += (size_t)snprintf(json + at, sizeof(json) - at,
				       "%s" OKP(ED_X) ",\"kid\":\"%d\"}", i ? "," : "", i);
	snprintf(json + at, sizeof(json) - at, "]}");
	ks = set_of(json);
	assert_int_equal(oauth_jwks_count(ks), OAUTH_JWKS_KEYS_MAX);
	oauth_jwks_free(ks);
	snprintf(json + at, sizeof(json) - at, "," GOOD_OKP "]}");
	assert_int_equal(set_refused(json, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "more than 32"));
}

static void test_jwks_not_a_set(void **state)
{
	static const char *const bad[] = {"[]",
					  "{}",
					  "{\"keys\":{}}",
					  "{\"keys\":null}",
					  "null",
					  "{\"keys\":[]",
					  "{\"keys\":[" GOOD_OKP "]} x",
					  "{\"keys\":[" GOOD_OKP "],\"keys\":[]}"};
	struct appl_err err = {0};
	char *big;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(set_refused(bad[i], &err), -EINVAL);
	assert_int_equal(set_refused("{\"keys\":[" OKP(ED_X) ",\"x5c\":[[[[[[1]]]]]]}]}", &err),
			 -E2BIG);
	big = malloc(OAUTH_JWKS_MAX + 2);
	assert_non_null(big);
	memset(big, ' ', OAUTH_JWKS_MAX + 1);
	memcpy(big, "{\"keys\":[" GOOD_OKP "]}", strlen("{\"keys\":[" GOOD_OKP "]}"));
	big[OAUTH_JWKS_MAX + 1] = '\0';
	assert_int_equal(set_refused(big, &err), -EFBIG);
	big[OAUTH_JWKS_MAX] = '\0';
	struct oauth_jwks *ks = set_of(big);
	oauth_jwks_free(ks);
	free(big);
	/* err may be NULL */
	ks = (struct oauth_jwks *)1;
	assert_int_equal(oauth_jwks_parse("[]", 2, &ks, NULL), -EINVAL);
	assert_null(ks);
}

/* GnuTLS vets ES256 and RS256 keys as the set is parsed: a point off the
 * curve, or one GnuTLS will not import, is a key skipped, not a verify
 * that fails later. */
static void test_jwks_ec_point_checked(void **state)
{
	char json[1024];
	struct appl_err err = {0};
	struct oauth_jwks *ks;

	(void)state;
	snprintf(json, sizeof(json),
		 "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", ec_y,
		 ec_x);
	assert_int_equal(set_refused(json, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "1 malformed"));
	assert_int_equal(set_refused("{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":"
				     "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\",\"y\":"
				     "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}]}",
				     &err),
			 -EINVAL);
	snprintf(json, sizeof(json),
		 "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}," GOOD_OKP
		 "]}",
		 ec_x, ec_y);
	ks = set_of(json);
	assert_int_equal(oauth_jwks_count(ks), 2);
	oauth_jwks_free(ks);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc_examples_verify),
		cmocka_unit_test(test_rfc_examples_claims),
		cmocka_unit_test(test_valid_token),
		cmocka_unit_test(test_typ),
		cmocka_unit_test(test_exp),
		cmocka_unit_test(test_nbf_and_iat),
		cmocka_unit_test(test_skew_zero),
		cmocka_unit_test(test_iss),
		cmocka_unit_test(test_aud),
		cmocka_unit_test(test_sub),
		cmocka_unit_test(test_role),
		cmocka_unit_test(test_payload_malformed),
		cmocka_unit_test(test_messages_quote_nothing),
		cmocka_unit_test(test_alg_none_and_others_refused),
		cmocka_unit_test(test_hs256_with_the_public_key_refused),
		cmocka_unit_test(test_alg_key_confusion_refused),
		cmocka_unit_test(test_kid),
		cmocka_unit_test(test_tampering_refused),
		cmocka_unit_test(test_crit_refused),
		cmocka_unit_test(test_length_cap),
		cmocka_unit_test(test_framing_refused),
		cmocka_unit_test(test_null_arguments),
		cmocka_unit_test(test_es256_and_rs256),
		cmocka_unit_test(test_es256_and_rs256_forged),
		cmocka_unit_test(test_rsa_modulus_with_a_leading_zero),
		cmocka_unit_test(test_gnutls_missing),
		cmocka_unit_test(test_jwks_ec_point_checked),
		cmocka_unit_test(test_es256_der),
		cmocka_unit_test(test_b64url),
		cmocka_unit_test(test_jwks_private_member_refused),
		cmocka_unit_test(test_jwks_skips),
		cmocka_unit_test(test_jwks_no_usable_key_says_why),
		cmocka_unit_test(test_jwks_rsa_numbers),
		cmocka_unit_test(test_jwks_kids),
		cmocka_unit_test(test_jwks_not_a_set),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
