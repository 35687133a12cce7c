/* jwt.c: oauth_jwt_verify (see oauth.h): the signature by jws.c, then the
 * claims of the payload, which is decoded only once the signature holds.
 *
 * Every refusal's message names the check, never a claim's value: the
 * caller logs it, and a token's claims are the client's text. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "json/json.h"
#include "oauth/b64.h"
#include "oauth/jws.h"

static int deny(struct appl_err *err, const char *why)
{
	return appl_err_set(err, -EACCES, "access token: %s", why);
}

static int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

/* floor(v) of a JSON number, clamped to int64_t. */
static int64_t num_floor(const json_t *v)
{
	double d;
	int64_t i;

	if (json_is_integer(v))
		return json_integer_value(v);
	d = json_real_value(v);
	if (d >= 9223372036854775808.0)
		return INT64_MAX;
	if (d < -9223372036854775808.0)
		return INT64_MIN;
	i = (int64_t)d; /* toward zero; in range, so defined */
	return (double)i > d ? i - 1 : i;
}

/* v (a JSON number) compared with t: negative, zero or positive. Exact for
 * reals too: t is never rounded to a double. */
static int num_cmp(const json_t *v, int64_t t)
{
	int64_t i = num_floor(v);

	if (i != t)
		return i < t ? -1 : 1;
	/* equal floors: a real with a fraction is above t */
	return json_is_real(v) && json_real_value(v) > (double)i ? 1 : 0;
}

static bool str_eq(const json_t *v, const char *want)
{
	return json_is_string(v) && json_string_length(v) == strlen(want) &&
	       memcmp(json_string_value(v), want, json_string_length(v)) == 0;
}

typedef int (*claim_check)(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
			   struct appl_err *err);

static int iss_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	(void)out;
	return str_eq(json_object_get(c, "iss"), r->issuer) ? 0 : deny(err, "wrong issuer");
}

/* A token minted for another resource server must not open this one
 * (RFC 9068 4, RFC 8707): aud is required and must name this audience. */
static int aud_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	const json_t *aud = json_object_get(c, "aud"), *one;
	size_t i;

	(void)out;
	if (str_eq(aud, r->audience))
		return 0;
	if (!json_is_array(aud))
		return deny(err, "wrong audience");
	json_array_foreach(aud, i, one) {
		if (str_eq(one, r->audience))
			return 0;
	}
	return deny(err, "wrong audience");
}

static int exp_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	const json_t *exp = json_object_get(c, "exp");

	/* No exp is a token that never ends: refused. */
	if (!exp)
		return deny(err, "no expiry (exp)");
	if (!json_is_number(exp))
		return deny(err, "exp malformed");
	if (num_cmp(exp, sat_add(r->now, -(int64_t)r->skew_s)) <= 0)
		return deny(err, "expired");
	out->exp = num_floor(exp);
	return 0;
}

static int nbf_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	const json_t *nbf = json_object_get(c, "nbf");

	(void)out;
	if (!nbf)
		return 0;
	if (!json_is_number(nbf))
		return deny(err, "nbf malformed");
	if (num_cmp(nbf, sat_add(r->now, r->skew_s)) > 0)
		return deny(err, "not yet valid");
	return 0;
}

/* A token from the future was minted on a clock that is wrong, or minted
 * ahead to outlive a key's rotation. */
static int iat_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	const json_t *iat = json_object_get(c, "iat");

	(void)out;
	if (!iat)
		return 0;
	if (!json_is_number(iat))
		return deny(err, "iat malformed");
	if (num_cmp(iat, sat_add(r->now, r->skew_s)) > 0)
		return deny(err, "issued in the future");
	return 0;
}

/* s[0..len) holds only bytes for which ok() holds. */
static bool all(const char *s, size_t len, bool (*ok)(unsigned char))
{
	for (size_t i = 0; i < len; i++)
		if (!ok((unsigned char)s[i]))
			return false;
	return true;
}

static bool printable(unsigned char c)
{
	return c >= 0x21 && c <= 0x7e;
}

static bool role_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* The subject goes into logs and audit records: no spaces, controls or
 * bytes beyond ASCII, so it can forge no field or line there. */
static int sub_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		     struct appl_err *err)
{
	const json_t *sub = json_object_get(c, "sub");
	size_t len;

	(void)r;
	if (!sub)
		return deny(err, "no subject (sub)");
	if (!json_is_string(sub) || (len = json_string_length(sub)) == 0 ||
	    len > OAUTH_SUBJECT_MAX || !all(json_string_value(sub), len, printable))
		return deny(err, "subject malformed");
	memcpy(out->subject, json_string_value(sub), len);
	out->subject[len] = '\0';
	return 0;
}

/* The role names a policy role: a narrow alphabet, so no value can be
 * read as two, or as a path. */
static int role_check(const json_t *c, const struct oauth_rules *r, struct oauth_token *out,
		      struct appl_err *err)
{
	const json_t *role = r->role_claim ? json_object_get(c, r->role_claim) : NULL;
	size_t len;

	if (!role)
		return 0;
	if (!json_is_string(role) || (len = json_string_length(role)) == 0 ||
	    len > OAUTH_ROLE_MAX || !all(json_string_value(role), len, role_char))
		return deny(err, "role claim malformed");
	memcpy(out->role, json_string_value(role), len);
	out->role[len] = '\0';
	return 0;
}

static const claim_check checks[] = {iss_check, aud_check, exp_check, nbf_check,
				     iat_check, sub_check, role_check};

static int claims_parse(const char *seg, size_t n, json_t **claims, struct appl_err *err)
{
	unsigned char buf[OAUTH_SEGMENT_BYTES_MAX];
	size_t blen;
	json_t *c;

	/* No message of the JSON parser is passed on: it quotes the bytes. */
	if (oauth_b64url_decode(seg, n, buf, sizeof(buf), &blen) < 0 ||
	    !(c = appl_json_load((const char *)buf, blen, sizeof(buf), OAUTH_CLAIMS_DEPTH, "claims",
				 NULL)))
		return deny(err, "payload malformed");
	if (!json_is_object(c)) {
		json_decref(c);
		return deny(err, "payload malformed");
	}
	*claims = c;
	return 0;
}

int oauth_jwt_verify(const struct oauth_jwks *ks, const char *tok, size_t len,
		     const struct oauth_rules *rules, struct oauth_token *out, struct appl_err *err)
{
	const char *payload;
	size_t payload_len;
	json_t *claims;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if (!ks || !tok || !rules || !rules->issuer || !rules->audience || !out)
		return appl_err_set(err, -EINVAL, "oauth_jwt_verify: a required argument is NULL");
	if ((rc = oauth_jws_verify(ks, tok, len, &payload, &payload_len, err)) < 0 ||
	    (rc = claims_parse(payload, payload_len, &claims, err)) < 0)
		return rc;
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]) && rc == 0; i++)
		rc = checks[i](claims, rules, out, err);
	json_decref(claims);
	if (rc < 0)
		memset(out, 0, sizeof(*out));
	return rc;
}
