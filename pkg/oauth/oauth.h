/* oauth.h: OAuth 2.1 access tokens (JWTs, RFC 9068) checked against the
 * authorization server's public keys (a JWK Set, RFC 7517).
 *
 * The key set may come from a URL, the token from any client: both are
 * untrusted bytes, parsed from (buf, len) under the caps below. Only three
 * signature algorithms exist here, each bound to one key type: EdDSA
 * (Ed25519, libsodium), ES256 (P-256) and RS256 (RSA, 2048 to 8192 bits),
 * the last two through GnuTLS, loaded when a key set first holds such a key.
 * No shared-secret key is ever kept, so no token can be checked with HMAC:
 * that is what stops the old "HS256 signed with the public key" forgery.
 *
 * oauth_jwt_verify checks a token in this order, cheapest and safest first,
 * and reads nothing of the claims before the signature holds:
 *
 *  1. at most OAUTH_TOKEN_MAX bytes, three base64url segments and two dots,
 *     nothing else (no padding, no '+' or '/', no whitespace);
 *  2. the header: a JSON object; "alg" required; "typ", when present, JWT
 *     or at+jwt (either with "application/", any case); "kid", when
 *     present, a string; "crit" refused whatever it holds (no extension is
 *     understood, so none may be required); other members ignored, and
 *     never used to find a key ("jwk", "jku", "x5u", "x5c": a token must
 *     not bring its own key);
 *  3. "alg" exactly "EdDSA", "ES256" or "RS256" ("none", "HS256" and the
 *     rest refused);
 *  4. the key: with a kid, the key of that kid, whose type must be alg's;
 *     without one, each key of alg's type in turn;
 *  5. the signature over the token's first two segments, byte for byte as
 *     received;
 *  6. only now the payload: a JSON object whose claims must hold: "iss"
 *     equal to the issuer; "aud" equal to the audience, or an array of
 *     strings holding it; "exp" a number, now - skew < exp; "nbf", when
 *     present, now + skew >= nbf; "iat", when present, iat <= now + skew;
 *     "sub" 1..OAUTH_SUBJECT_MAX bytes of 0x21..0x7e; the role claim, when
 *     present, 1..OAUTH_ROLE_MAX bytes of [A-Za-z0-9_.-].
 *
 * Every refusal is -EACCES with a short message that is safe to log: it
 * names what failed, never a byte of the token or a claim's value.
 */
#ifndef APPL_OAUTH_OAUTH_H
#define APPL_OAUTH_OAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* ---- the key set ------------------------------------------------------ */
#define OAUTH_JWKS_MAX	    (64u * 1024) /* a JWK Set document */
#define OAUTH_JWKS_DEPTH    6		 /* its JSON nesting */
#define OAUTH_JWKS_KEYS_MAX 32		 /* usable keys in one set */
#define OAUTH_KID_MAX	    128		 /* a key id, in bytes */
#define OAUTH_RSA_BITS_MIN  2048	 /* smaller RSA keys are skipped as weak */
#define OAUTH_RSA_BITS_MAX  8192	 /* larger ones are skipped: verify cost */
/* The RSA public exponent, in bytes: every verify is an exponentiation by
 * it, so a huge one makes each token cost as much as a private-key
 * operation. Issuers use 65537 (3 bytes). */
#define OAUTH_RSA_E_MAX 4

/* ---- the token -------------------------------------------------------- */
#define OAUTH_TOKEN_MAX	   (8u * 1024) /* a compact JWT, all three segments */
#define OAUTH_HEADER_DEPTH 4	       /* the header's JSON nesting */
#define OAUTH_CLAIMS_DEPTH 8	       /* the payload's JSON nesting */
#define OAUTH_SUBJECT_MAX  128	       /* "sub", in bytes */
#define OAUTH_ROLE_MAX	   64	       /* the role claim's value, in bytes */

/* A parsed JWK Set: immutable once parsed, and plain data (the GnuTLS key
 * objects are made per verify), so any number of threads may verify
 * against one set at once. */
struct oauth_jwks;

/* Parse buf[0..len) (not NUL-terminated; untrusted) as a JWK Set,
 * {"keys": [...]}. Keys kept: kty "OKP" crv "Ed25519" (x), kty "EC" crv
 * "P-256" (x, y of 32 bytes each), kty "RSA" (n of OAUTH_RSA_BITS_MIN to
 * OAUTH_RSA_BITS_MAX bits, e odd, > 1, at most OAUTH_RSA_E_MAX bytes),
 * base64url without padding. Skipped and counted, as RFC 7517 section 5
 * asks: an unknown kty or crv, kty "oct" (a shared secret: never used), a
 * "use" other than "sig", "key_ops" without "verify", an "alg" other than
 * the key type's (EdDSA, ES256, RS256), a weak RSA key, a key whose members
 * are malformed (kid over OAUTH_KID_MAX bytes among them), an ES256 or
 * RS256 key GnuTLS refuses (a point off the curve). Errors for the
 * whole set (-EINVAL): a key holding a private or secret member (d, p, q,
 * dp, dq, qi, oth, k: the server published what must stay secret), two
 * usable keys with one kid, more than OAUTH_JWKS_KEYS_MAX usable keys, no
 * usable key at all (the message says how many were skipped and why), JSON
 * that is not a set (or not JSON, or with a member twice). -EFBIG over
 * OAUTH_JWKS_MAX, -E2BIG nested deeper than OAUTH_JWKS_DEPTH, -ENOMEM.
 *
 * When the set holds an ES256 or RS256 key, GnuTLS (libgnutls.so.30) is
 * loaded here, once per process (appl_dl_load: call this from one thread,
 * as the appliance does from its loop), and such keys are checked with
 * it. If it cannot be loaded, the set still parses, those keys unchecked;
 * a token checked with one of them then fails -EIO naming the package to
 * install.
 *
 * On success *out is new (oauth_jwks_free); on failure it is NULL. */
int oauth_jwks_parse(const char *buf, size_t len, struct oauth_jwks **out, struct appl_err *err);

void oauth_jwks_free(struct oauth_jwks *ks);

/* The usable keys kept, and the keys skipped. */
size_t oauth_jwks_count(const struct oauth_jwks *ks);
size_t oauth_jwks_skipped(const struct oauth_jwks *ks);

/* ---- verification ----------------------------------------------------- */

/* What a token must say; all borrowed. */
struct oauth_rules {
	const char *issuer;	/* exact match of iss; required */
	const char *audience;	/* aud (string) equals it, or aud (array of strings) holds it;
				   required */
	const char *role_claim; /* the claim holding the role, e.g. "appliance_role"; NULL: none */
	unsigned skew_s;	/* leeway for exp and nbf (and iat in the future) */
	int64_t now;		/* seconds since the epoch */
};

/* What a verified token says. */
struct oauth_token {
	char subject[OAUTH_SUBJECT_MAX + 1]; /* sub: 1..128 bytes of 0x21..0x7e */
	char role[OAUTH_ROLE_MAX + 1]; /* role_claim's value, [A-Za-z0-9_.-]; "" when absent */
	int64_t exp;		       /* exp, rounded down when it was not an integer */
};

/* Verify tok[0..len) (not NUL-terminated; untrusted) against ks and rules
 * (both borrowed), in the order at the top of this file. Returns 0 with
 * *out filled; -EACCES with err saying why, safe to log (the caller answers
 * HTTP 401); -ENOMEM; -EIO when GnuTLS is missing (the message names the
 * package) or fails; -EINVAL when ks, tok, rules, rules->issuer,
 * rules->audience or out is NULL (a caller's bug, never the token's).
 * *out is zeroed on every failure. Allocates only while it runs (jansson's
 * values, GnuTLS's key objects) and changes no global state: thread-safe
 * for any number of callers on one ks. Needs libsodium initialised (the
 * process's main does it). */
int oauth_jwt_verify(const struct oauth_jwks *ks, const char *tok, size_t len,
		     const struct oauth_rules *rules, struct oauth_token *out,
		     struct appl_err *err);

#endif
