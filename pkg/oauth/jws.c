/* jws.c: see jws.h. The token is the client's, so nothing here trusts it:
 * its length and alphabet are checked before anything is decoded, the
 * header only picks an algorithm and a key among those the operator
 * published, and the payload is not even decoded before the signature
 * holds (that is jwt.c's, after this). */
#include "oauth/jws.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "json/json.h"
#include "oauth/b64.h"
#include "oauth/key.h"
#include "oauth/sig.h"

/* What the token's framing and header said. */
struct jws {
	size_t dot1, dot2;  /* where the two dots are */
	enum oauth_kty kty; /* the key type alg requires */
	bool has_kid;
	size_t kid_len;
	char kid[OAUTH_KID_MAX + 1];
	size_t sig_len;
	unsigned char sig[OAUTH_SIG_MAX];
};

/* The only algorithms, each bound to its one key type: an RSA or EC key
 * can never be used as an HMAC secret, nor a key of one type for another
 * type's algorithm. */
static const struct {
	const char *name;
	enum oauth_kty kty;
} algs[] = {
	{"EdDSA", OAUTH_KTY_ED25519},
	{"ES256", OAUTH_KTY_P256},
	{"RS256", OAUTH_KTY_RSA},
};

/* RFC 7515 4.1.9 lets "application/" be left out; RFC 9068 names at+jwt. */
static const char *const typs[] = {"jwt", "application/jwt", "at+jwt", "application/at+jwt"};

static int deny(struct appl_err *err, const char *why)
{
	return appl_err_set(err, -EACCES, "access token: %s", why);
}

static bool is_b64url(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

/* Step 1: the size cap, then three segments of the base64url alphabet.
 * Whitespace, padding and a fourth segment (a JWE has five) all stop
 * here, before any decoder sees them. */
static int split(const char *tok, size_t len, struct jws *j, struct appl_err *err)
{
	unsigned dots = 0;

	if (len > OAUTH_TOKEN_MAX)
		return deny(err, "longer than the cap");
	for (size_t i = 0; i < len; i++) {
		if (tok[i] == '.') {
			if (++dots > 2)
				return deny(err, "malformed");
			*(dots == 1 ? &j->dot1 : &j->dot2) = i;
		} else if (!is_b64url((unsigned char)tok[i])) {
			return deny(err, "malformed");
		}
	}
	return dots == 2 ? 0 : deny(err, "malformed");
}

/* s[0..len) equals want (lower case) but for the case of ASCII letters;
 * by hand, as strcasecmp folds by the locale. */
static bool ascii_case_eq(const char *s, size_t len, const char *want)
{
	if (len != strlen(want))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		if (c != (unsigned char)want[i])
			return false;
	}
	return true;
}

static bool typ_ok(const json_t *typ)
{
	if (!json_is_string(typ))
		return false;
	for (size_t i = 0; i < sizeof(typs) / sizeof(typs[0]); i++)
		if (ascii_case_eq(json_string_value(typ), json_string_length(typ), typs[i]))
			return true;
	return false;
}

static int alg_pick(const json_t *alg, struct jws *j, struct appl_err *err)
{
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		if (json_string_length(alg) == strlen(algs[i].name) &&
		    strcmp(json_string_value(alg), algs[i].name) == 0) {
			j->kty = algs[i].kty;
			return 0;
		}
	return deny(err, "algorithm refused");
}

/* Step 2 and 3 on the parsed header h. */
static int header_check(const json_t *h, struct jws *j, struct appl_err *err)
{
	const json_t *alg = json_object_get(h, "alg"), *typ = json_object_get(h, "typ");
	const json_t *kid = json_object_get(h, "kid");

	if (!json_is_string(alg))
		return deny(err, "header malformed (alg)");
	if (typ && !typ_ok(typ))
		return deny(err, "typ refused");
	/* crit lists extensions the signer requires the reader to apply
	 * (RFC 7515 4.1.11): none is understood here, so none may be
	 * required, b64:false (RFC 7797) among them. */
	if (json_object_get(h, "crit"))
		return deny(err, "crit header refused");
	if (kid && !json_is_string(kid))
		return deny(err, "header malformed (kid)");
	if (kid) {
		/* A kid longer than any kept matches none: refused below. */
		j->has_kid = true;
		j->kid_len = json_string_length(kid);
		if (j->kid_len <= OAUTH_KID_MAX)
			memcpy(j->kid, json_string_value(kid), j->kid_len);
	}
	return alg_pick(alg, j, err);
}

static int header_parse(const char *seg, size_t n, struct jws *j, struct appl_err *err)
{
	unsigned char buf[OAUTH_SEGMENT_BYTES_MAX];
	size_t blen;
	json_t *h;
	int rc;

	/* No message of the JSON parser is passed on: it quotes the bytes. */
	if (oauth_b64url_decode(seg, n, buf, sizeof(buf), &blen) < 0 ||
	    !(h = appl_json_load((const char *)buf, blen, sizeof(buf), OAUTH_HEADER_DEPTH, "header",
				 NULL)))
		return deny(err, "header malformed");
	rc = json_is_object(h) ? header_check(h, j, err) : deny(err, "header malformed");
	json_decref(h);
	return rc;
}

static int key_try(const struct oauth_jwks *ks, const struct oauth_key *k, const char *tok,
		   const struct jws *j, struct appl_err *err)
{
	if (k->kty != OAUTH_KTY_ED25519 && ks->crypto_rc < 0)
		return appl_err_set(err, -EIO, "access token: cannot check its signature: %s",
				    ks->crypto_why);
	/* The signing input is the first two segments as received: never a
	 * re-encoding of what was decoded. */
	return oauth_sig_verify(k, (const unsigned char *)tok, j->dot2, j->sig, j->sig_len, err);
}

/* Step 4 and 5: with a kid, its key alone; without, each key of alg's
 * type until one verifies (at most OAUTH_JWKS_KEYS_MAX checks). */
static int keys_try(const struct oauth_jwks *ks, const char *tok, const struct jws *j,
		    struct appl_err *err)
{
	bool any = false;
	int rc;

	for (size_t i = 0; i < ks->count; i++) {
		const struct oauth_key *k = &ks->keys[i];

		if (j->has_kid) {
			if (!k->has_kid || k->kid_len != j->kid_len ||
			    memcmp(k->kid, j->kid, j->kid_len) != 0)
				continue;
			/* Algorithm confusion: the header may not use a key
			 * for another type's algorithm. */
			if (k->kty != j->kty)
				return deny(err, "algorithm does not match the key of this kid");
			return key_try(ks, k, tok, j, err);
		}
		if (k->kty != j->kty)
			continue;
		any = true;
		if ((rc = key_try(ks, k, tok, j, err)) != -EACCES)
			return rc; /* it verified, or the library failed */
	}
	if (j->has_kid)
		return deny(err, "no key with this kid");
	return any ? deny(err, "signature does not verify")
		   : deny(err, "no key for this algorithm");
}

int oauth_jws_verify(const struct oauth_jwks *ks, const char *tok, size_t len, const char **payload,
		     size_t *payload_len, struct appl_err *err)
{
	struct jws j;
	int rc;

	memset(&j, 0, sizeof(j));
	if ((rc = split(tok, len, &j, err)) < 0 || (rc = header_parse(tok, j.dot1, &j, err)) < 0)
		return rc;
	if (oauth_b64url_decode(tok + j.dot2 + 1, len - j.dot2 - 1, j.sig, sizeof(j.sig),
				&j.sig_len) < 0)
		return deny(err, "signature malformed");
	if ((rc = keys_try(ks, tok, &j, err)) < 0)
		return rc;
	*payload = tok + j.dot1 + 1;
	*payload_len = j.dot2 - j.dot1 - 1;
	return 0;
}
