/* jwks.c: a JWK Set (RFC 7517) to the keys of key.h (see oauth.h).
 *
 * A JWKS is fetched from the authorization server, maybe over a network
 * the appliance does not control, so it is parsed like any hostile input:
 * size and depth capped before jansson sees it, duplicate members refused
 * (appl_json_load), exact lengths for every key number. Keys this code
 * cannot or must not use are skipped and counted, as RFC 7517 section 5
 * asks, so a server that also publishes, say, an encryption key still
 * works; a published private key, by contrast, refuses the whole set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "oauth/b64.h"
#include "oauth/key.h"
#include "oauth/sig.h"

/* Why a key was skipped; KEEP: it was not. */
enum skip {
	KEEP = 0,
	SKIP_TYPE,	/* kty or crv unknown, or "oct" */
	SKIP_PURPOSE,	/* use, key_ops or alg say it is not for these signatures */
	SKIP_SIZE,	/* an RSA modulus or exponent out of range */
	SKIP_MALFORMED, /* a member missing, of the wrong type, or of the wrong length */
	SKIP_N,
};

static const char *const skip_what[SKIP_N] = {
	[SKIP_TYPE] = "of an unsupported type or curve (kty oct, a shared secret, is never used)",
	[SKIP_PURPOSE] = "not for verifying signatures with their type's algorithm (use, key_ops "
			 "or alg)",
	[SKIP_SIZE] = "RSA keys under 2048 bits, over 8192, or with an exponent over 4 bytes",
	[SKIP_MALFORMED] = "malformed",
};

/* Members that only a private or secret key has (RFC 7518 section 6):
 * their presence means the server published what must stay secret, and
 * anyone may now sign tokens with it. */
static const char *const private_members[] = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"};

struct kty_def {
	const char *kty;
	const char *crv; /* NULL: the type has no curve */
	enum oauth_kty type;
	const char *alg; /* its one algorithm */
	int (*parse)(const json_t *jwk, struct oauth_key *k);
};

/* The string member name of obj: 1 with *s and *len, 0 when absent, -1
 * when it is not a string. */
static int str_member(const json_t *obj, const char *name, const char **s, size_t *len)
{
	const json_t *v = json_object_get(obj, name);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return -1;
	*s = json_string_value(v);
	*len = json_string_length(v);
	return 1;
}

static bool str_is(const char *s, size_t len, const char *want)
{
	return len == strlen(want) && memcmp(s, want, len) == 0;
}

/* The base64url member name of jwk into out[0..cap): 0 with *len, -1 when
 * absent or malformed. */
static int b64_member(const json_t *jwk, const char *name, unsigned char *out, size_t cap,
		      size_t *len)
{
	const char *s;
	size_t n;

	if (str_member(jwk, name, &s, &n) != 1)
		return -1;
	return oauth_b64url_decode(s, n, out, cap, len) < 0 ? -1 : 0;
}

static int okp_parse(const json_t *jwk, struct oauth_key *k)
{
	size_t len;

	if (b64_member(jwk, "x", k->x, sizeof(k->x), &len) < 0 || len != OAUTH_ED25519_BYTES)
		return SKIP_MALFORMED;
	return KEEP;
}

static int ec_parse(const json_t *jwk, struct oauth_key *k)
{
	size_t xl, yl;

	/* Exactly 32 bytes each (RFC 7518 6.2.1.2): a shorter coordinate
	 * is a different encoding of a number, refused so each key has one. */
	if (b64_member(jwk, "x", k->x, sizeof(k->x), &xl) < 0 || xl != OAUTH_P256_BYTES ||
	    b64_member(jwk, "y", k->y, sizeof(k->y), &yl) < 0 || yl != OAUTH_P256_BYTES)
		return SKIP_MALFORMED;
	return KEEP;
}

/* Drop the leading zero bytes of v[0..*len) (RFC 7518 6.3.1.1 says there
 * are none, yet some libraries write one): the size checks below then
 * count the number's real bits, not its spelling. */
static void strip_zeros(unsigned char *v, size_t *len)
{
	size_t i = 0;

	while (i < *len && v[i] == 0)
		i++;
	memmove(v, v + i, *len - i);
	*len -= i;
}

static unsigned bits_of(const unsigned char *v, size_t len)
{
	unsigned top = 8;

	while (top > 0 && !(v[0] & (1u << (top - 1))))
		top--;
	return (unsigned)(len - 1) * 8 + top;
}

static int rsa_parse(const json_t *jwk, struct oauth_key *k)
{
	unsigned char n[OAUTH_RSA_BITS_MAX / 8 + 1], e[OAUTH_RSA_E_MAX + 1];
	size_t n_len, e_len, b64_len;
	const char *s;
	unsigned bits;

	if (str_member(jwk, "n", &s, &b64_len) != 1)
		return SKIP_MALFORMED;
	if (b64_len / 4 * 3 > sizeof(n))
		return SKIP_SIZE; /* over 8192 bits, before decoding it */
	if (oauth_b64url_decode(s, b64_len, n, sizeof(n), &n_len) < 0)
		return SKIP_MALFORMED;
	strip_zeros(n, &n_len);
	if (n_len == 0 || !(n[n_len - 1] & 1))
		return SKIP_MALFORMED; /* an RSA modulus is odd */
	bits = bits_of(n, n_len);
	if (bits < OAUTH_RSA_BITS_MIN || bits > OAUTH_RSA_BITS_MAX)
		return SKIP_SIZE;
	if (str_member(jwk, "e", &s, &b64_len) != 1)
		return SKIP_MALFORMED;
	if (b64_len / 4 * 3 > sizeof(e))
		return SKIP_SIZE;
	if (oauth_b64url_decode(s, b64_len, e, sizeof(e), &e_len) < 0)
		return SKIP_MALFORMED;
	strip_zeros(e, &e_len);
	/* e = 1 makes every message its own signature; an even e is no RSA
	 * key at all. */
	if (e_len == 0 || !(e[e_len - 1] & 1) || (e_len == 1 && e[0] == 1))
		return SKIP_MALFORMED;
	if (e_len > OAUTH_RSA_E_MAX)
		return SKIP_SIZE;
	memcpy(k->n, n, n_len);
	k->n_len = n_len;
	memcpy(k->e, e, e_len);
	k->e_len = e_len;
	return KEEP;
}

static const struct kty_def ktys[] = {
	{"OKP", "Ed25519", OAUTH_KTY_ED25519, "EdDSA", okp_parse},
	{"EC", "P-256", OAUTH_KTY_P256, "ES256", ec_parse},
	{"RSA", NULL, OAUTH_KTY_RSA, "RS256", rsa_parse},
};

/* The kind of key jwk is, or NULL with *why. */
static const struct kty_def *kty_find(const json_t *jwk, int *why)
{
	const char *kty, *crv;
	size_t kty_len, crv_len;

	if (str_member(jwk, "kty", &kty, &kty_len) != 1) {
		*why = SKIP_MALFORMED;
		return NULL;
	}
	for (size_t i = 0; i < sizeof(ktys) / sizeof(ktys[0]); i++) {
		if (!str_is(kty, kty_len, ktys[i].kty))
			continue;
		if (!ktys[i].crv)
			return &ktys[i];
		if (str_member(jwk, "crv", &crv, &crv_len) != 1) {
			*why = SKIP_MALFORMED;
			return NULL;
		}
		if (str_is(crv, crv_len, ktys[i].crv))
			return &ktys[i];
		break;
	}
	*why = SKIP_TYPE;
	return NULL;
}

/* use, key_ops and alg (RFC 7517 4.2 to 4.4), each optional: a key meant
 * for encryption, or for another algorithm, is not used to verify. */
static int purpose_check(const json_t *jwk, const struct kty_def *def)
{
	const json_t *ops = json_object_get(jwk, "key_ops"), *op;
	const char *s;
	size_t len, i;
	bool verify = false;
	int r;

	if ((r = str_member(jwk, "use", &s, &len)) < 0)
		return SKIP_MALFORMED;
	if (r == 1 && !str_is(s, len, "sig"))
		return SKIP_PURPOSE;
	if ((r = str_member(jwk, "alg", &s, &len)) < 0)
		return SKIP_MALFORMED;
	if (r == 1 && !str_is(s, len, def->alg))
		return SKIP_PURPOSE;
	if (!ops)
		return KEEP;
	if (!json_is_array(ops))
		return SKIP_MALFORMED;
	json_array_foreach(ops, i, op) {
		if (!json_is_string(op))
			return SKIP_MALFORMED;
		if (str_is(json_string_value(op), json_string_length(op), "verify"))
			verify = true;
	}
	return verify ? KEEP : SKIP_PURPOSE;
}

static int kid_parse(const json_t *jwk, struct oauth_key *k)
{
	const char *s;
	size_t len;
	int r;

	if ((r = str_member(jwk, "kid", &s, &len)) < 0 || (r == 1 && len > OAUTH_KID_MAX))
		return SKIP_MALFORMED;
	if (r == 1) {
		memcpy(k->kid, s, len);
		k->kid[len] = '\0';
		k->kid_len = len;
		k->has_kid = true;
	}
	return KEEP;
}

/* Key idx of the set into *k: KEEP, a SKIP_ reason, or a negative code for
 * the whole set. */
static int key_parse(const json_t *jwk, size_t idx, struct oauth_key *k, struct appl_err *err)
{
	const struct kty_def *def;
	int why;

	if (!json_is_object(jwk))
		return SKIP_MALFORMED;
	for (size_t i = 0; i < sizeof(private_members) / sizeof(private_members[0]); i++)
		if (json_object_get(jwk, private_members[i]))
			return appl_err_set(
				err, -EINVAL,
				"JWKS: key %zu holds the private member \"%s\": the "
				"authorization server published a secret key; the whole "
				"set is refused",
				idx, private_members[i]);
	if (!(def = kty_find(jwk, &why)))
		return why;
	if ((why = purpose_check(jwk, def)) != KEEP || (why = kid_parse(jwk, k)) != KEEP)
		return why;
	k->kty = def->type;
	return def->parse(jwk, k);
}

static bool kid_taken(const struct oauth_jwks *ks, const struct oauth_key *k)
{
	for (size_t i = 0; i < ks->count; i++)
		if (ks->keys[i].has_kid && ks->keys[i].kid_len == k->kid_len &&
		    memcmp(ks->keys[i].kid, k->kid, k->kid_len) == 0)
			return true;
	return false;
}

/* An ES256 or RS256 key as GnuTLS sees it: KEEP, SKIP_MALFORMED, or
 * -ENOMEM. GnuTLS is loaded here, at the first such key, so a verify never
 * loads it; when it cannot be, the key is kept unchecked (its tokens will
 * fail -EIO, naming the package). */
static int key_vet(struct oauth_jwks *ks, const struct oauth_key *k, struct appl_err *err)
{
	struct appl_err e = {0};
	int r;

	if (ks->crypto_rc == 0) {
		ks->crypto_rc = oauth_sig_load(&e) < 0 ? -EIO : 1;
		snprintf(ks->crypto_why, sizeof(ks->crypto_why), "%s", e.msg);
	}
	if (ks->crypto_rc < 0)
		return KEEP;
	if ((r = oauth_sig_key_check(k)) == -ENOMEM)
		return appl_err_set(err, -ENOMEM, "JWKS: out of memory");
	return r < 0 ? SKIP_MALFORMED : KEEP;
}

static int key_add(struct oauth_jwks *ks, const json_t *jwk, size_t idx, size_t *why,
		   struct appl_err *err)
{
	struct oauth_key k;
	int r;

	memset(&k, 0, sizeof(k));
	if ((r = key_parse(jwk, idx, &k, err)) == KEEP && k.kty != OAUTH_KTY_ED25519)
		r = key_vet(ks, &k, err);
	if (r < 0)
		return r;
	if (r != KEEP) {
		why[r]++;
		ks->skipped++;
		return 0;
	}
	if (ks->count == OAUTH_JWKS_KEYS_MAX)
		return appl_err_set(err, -EINVAL, "JWKS: more than %d usable keys",
				    OAUTH_JWKS_KEYS_MAX);
	/* One kid, one key: otherwise which key a token's kid picks would
	 * depend on the order of the set. */
	if (k.has_kid && kid_taken(ks, &k))
		return appl_err_set(err, -EINVAL, "JWKS: key %zu has the kid of an earlier key",
				    idx);
	ks->keys[ks->count++] = k;
	return 0;
}

static int none_usable(const size_t *why, size_t skipped, struct appl_err *err)
{
	char msg[APPL_ERR_MSG_MAX];
	size_t at;

	if (skipped == 0)
		return appl_err_set(err, -EINVAL, "JWKS: the set holds no key");
	at = (size_t)snprintf(msg, sizeof(msg), "JWKS: no usable key, %zu skipped:", skipped);
	for (int r = KEEP + 1; r < SKIP_N && at < sizeof(msg); r++)
		if (why[r])
			at += (size_t)snprintf(msg + at, sizeof(msg) - at, "%s %zu %s",
					       at > 0 && msg[at - 1] != ':' ? ";" : "", why[r],
					       skip_what[r]);
	return appl_err_set(err, -EINVAL, "%s", msg);
}

int oauth_jwks_parse(const char *buf, size_t len, struct oauth_jwks **out, struct appl_err *err)
{
	size_t why[SKIP_N] = {0}, i;
	struct appl_err local = {0};
	struct oauth_jwks *ks = NULL;
	json_t *root, *keys, *jwk;
	int rc = 0;

	*out = NULL;
	if (!err)
		err = &local;
	if (!(root = appl_json_load(buf, len, OAUTH_JWKS_MAX, OAUTH_JWKS_DEPTH, "JWKS", err)))
		return err->code < 0 ? err->code : -EINVAL;
	keys = json_object_get(root, "keys");
	if (!json_is_array(keys)) {
		rc = appl_err_set(err, -EINVAL, "JWKS: not a JWK Set (no \"keys\" array)");
		goto out;
	}
	if (!(ks = calloc(1, sizeof(*ks)))) {
		rc = appl_err_set(err, -ENOMEM, "JWKS: out of memory");
		goto out;
	}
	json_array_foreach(keys, i, jwk) {
		if ((rc = key_add(ks, jwk, i, why, err)) < 0)
			goto out;
	}
	if (ks->count == 0) {
		rc = none_usable(why, ks->skipped, err);
		goto out;
	}
	*out = ks;
	ks = NULL;
out:
	free(ks);
	json_decref(root);
	return rc;
}

void oauth_jwks_free(struct oauth_jwks *ks)
{
	free(ks);
}

size_t oauth_jwks_count(const struct oauth_jwks *ks)
{
	return ks ? ks->count : 0;
}

size_t oauth_jwks_skipped(const struct oauth_jwks *ks)
{
	return ks ? ks->skipped : 0;
}
