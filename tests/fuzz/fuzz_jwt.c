/* fuzz_jwt.c: the OAuth access token verifier (pkg/oauth) on arbitrary
 * bytes. The input is a JWK Set, a NUL byte, then a token; with no NUL the
 * whole input is a token. The set is parsed, and the token checked against
 * it and against a fixed set of one Ed25519 key (made from a fixed seed,
 * kid "fz": tests/fuzz/corpus/fuzz_jwt/ holds tokens it signed). And since
 * a mutated token rarely keeps a valid signature, an input with a 0x01
 * byte and no NUL is also read as a header's JSON, 0x01, a payload's JSON:
 * both are encoded and signed here with the fixed key, so the header and
 * claim checks behind the signature are fuzzed too. Each part is copied
 * into a buffer of its exact length, so a read past len is an ASan report.
 * What verifies must hold the claims' invariants; what does not must be a
 * plain refusal, never a server error. */
#include <errno.h>
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oauth/oauth.h"

#define FZ_ISS "https://as.example"
#define FZ_AUD "https://appliance.example/mcp"
#define FZ_NOW 1700000000

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct oauth_jwks *fixed;
static unsigned char fixed_sk[crypto_sign_SECRETKEYBYTES];

static const struct oauth_rules rules = {
	.issuer = FZ_ISS,
	.audience = FZ_AUD,
	.role_claim = "role",
	.skew_s = 60,
	.now = FZ_NOW,
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	unsigned char seed[crypto_sign_SEEDBYTES], pk[crypto_sign_PUBLICKEYBYTES];
	char x[64], json[256];
	struct appl_err err = {0};
	int n;

	(void)argc;
	(void)argv;
	if (sodium_init() < 0)
		__builtin_trap();
	memset(seed, 0x42, sizeof(seed));
	crypto_sign_seed_keypair(pk, fixed_sk, seed);
	sodium_bin2base64(x, sizeof(x), pk, sizeof(pk), sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	n = snprintf(
		json, sizeof(json),
		"{\"keys\":[{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"kid\":\"fz\",\"x\":\"%s\"}]}",
		x);
	if (n < 0 || (size_t)n >= sizeof(json) || oauth_jwks_parse(json, (size_t)n, &fixed, &err))
		__builtin_trap();
	return 0;
}

static int charset(const char *s, size_t max, int (*ok)(unsigned char))
{
	size_t len = strnlen(s, max + 1);

	if (len > max)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!ok((unsigned char)s[i]))
			return 0;
	return 1;
}

static int sub_char(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

static int role_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

static void check(const struct oauth_jwks *ks, const char *tok, size_t len)
{
	struct appl_err err = {0};
	struct oauth_token t;
	int rc;

	memset(&t, 0x5a, sizeof(t));
	rc = oauth_jwt_verify(ks, tok, len, &rules, &t, &err);
	if (rc == 0) {
		if (t.subject[0] == '\0' || !charset(t.subject, OAUTH_SUBJECT_MAX, sub_char) ||
		    !charset(t.role, OAUTH_ROLE_MAX, role_char) || t.exp <= FZ_NOW - 60 - 1)
			__builtin_trap();
		return;
	}
	/* a refusal: one line that says so, and nothing left in *out; -EIO
	 * would be a server error a client could cause */
	if (rc != -EACCES && rc != -ENOMEM)
		__builtin_trap();
	if (rc == -EACCES && strncmp(err.msg, "access token: ", 14) != 0)
		__builtin_trap();
	if (t.subject[0] != '\0' || t.role[0] != '\0' || t.exp != 0)
		__builtin_trap();
}

static char *copy(const uint8_t *p, size_t n)
{
	char *c = malloc(n ? n : 1);

	if (!c)
		__builtin_trap();
	if (n)
		memcpy(c, p, n);
	return c;
}

/* header, 0x01, payload: both base64url'ed and signed with the fixed key.
 * Parts too long for a token are cut: the verifier refuses those anyway. */
static void signed_case(const uint8_t *data, size_t size, const uint8_t *soh)
{
	size_t hlen = (size_t)(soh - data), plen = size - hlen - 1;
	size_t cap = 2 * OAUTH_TOKEN_MAX, at;
	unsigned char sig[crypto_sign_BYTES];
	char *tok = malloc(cap);

	if (!tok)
		__builtin_trap();
	if (hlen > OAUTH_TOKEN_MAX / 2)
		hlen = OAUTH_TOKEN_MAX / 2;
	if (plen > OAUTH_TOKEN_MAX / 2)
		plen = OAUTH_TOKEN_MAX / 2;
	sodium_bin2base64(tok, cap, data, hlen, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	at = strlen(tok);
	tok[at++] = '.';
	sodium_bin2base64(tok + at, cap - at, soh + 1, plen,
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	at += strlen(tok + at);
	crypto_sign_detached(sig, NULL, (const unsigned char *)tok, at, fixed_sk);
	tok[at++] = '.';
	sodium_bin2base64(tok + at, cap - at, sig, sizeof(sig),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	at += strlen(tok + at);
	check(fixed, tok, at);
	free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size), *soh;
	size_t jlen = nul ? (size_t)(nul - data) : 0;
	size_t off = nul ? jlen + 1 : 0;
	char *tok = copy(data + off, size - off);
	struct appl_err err = {0};
	struct oauth_jwks *ks;

	if (nul) {
		char *jwks = copy(data, jlen);

		if (oauth_jwks_parse(jwks, jlen, &ks, &err) == 0) {
			if (oauth_jwks_count(ks) == 0 || oauth_jwks_count(ks) > OAUTH_JWKS_KEYS_MAX)
				__builtin_trap();
			check(ks, tok, size - off);
			oauth_jwks_free(ks);
		} else if (ks || err.code == 0) {
			__builtin_trap();
		}
		free(jwks);
	}
	check(fixed, tok, size - off);
	free(tok);
	if (!nul && (soh = memchr(data, 1, size)))
		signed_case(data, size, soh);
	return 0;
}
