/* oauth.c: the `http.oauth` section: the authorization server whose JWT
 * access tokens the HTTP front takes beside (or instead of) the static
 * bearer tokens of `clients` (docs/http.md, OAuth). Only what the policy
 * says is parsed here; the keys are read by `run` (pkg/gateway/oauth.c). */
#include "policy/internal.h"

#include <errno.h>
#include <string.h>

/* A URL that goes into a quoted header parameter and into a JSON document
 * a client reads: no quote or backslash, which would end or escape the
 * quoted string (a header injection), and no query or fragment, which an
 * audience or an issuer does not have (RFC 8707, RFC 8414). */
static int quotable_url_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	int rc = policy_server_url_check(s, len, path, err);

	if (rc < 0)
		return rc;
	if (strcspn(s, "\"\\?#") != len)
		return appl_err_set(err, -EINVAL,
				    "%s: must have no quote, backslash, query or fragment", path);
	return 0;
}

/* The claim's name as the token carries it: a short plain name, never a
 * nested path (one member of the claims object is read, nothing else). */
static int claim_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	bool ok = len >= 1 && len <= APPL_POLICY_OAUTH_CLAIM_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = is_alpha(s[i]) || is_digit(s[i]) || strchr("_-.:/", s[i]);
	if (!ok)
		return appl_err_set(err, -EINVAL, "%s: must be 1 to %d of A-Z a-z 0-9 _ - . : /",
				    path, APPL_POLICY_OAUTH_CLAIM_MAX);
	return 0;
}

static const struct field oauth_fields[] = {
	{.name = "issuer",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_oauth, issuer),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = quotable_url_check},
	{.name = "audience",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_oauth, audience),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = quotable_url_check},
	{.name = "jwks_path",
	 .type = F_STR,
	 .off = offsetof(struct policy_oauth, jwks_path),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
	{.name = "jwks_url",
	 .type = F_STR,
	 .off = offsetof(struct policy_oauth, jwks_url),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = policy_server_url_check},
	{.name = "role_claim",
	 .type = F_STR,
	 .off = offsetof(struct policy_oauth, role_claim),
	 .sdef = POLICY_OAUTH_ROLE_CLAIM_DEFAULT,
	 .maxlen = APPL_POLICY_OAUTH_CLAIM_MAX,
	 .check = claim_check},
	{.name = "skew_s",
	 .type = F_UINT,
	 .off = offsetof(struct policy_oauth, skew_s),
	 .min = 0,
	 .max = APPL_POLICY_OAUTH_SKEW_S_CEIL,
	 .def = APPL_POLICY_OAUTH_SKEW_S_DEF},
	{.name = "jwks_refresh_s",
	 .type = F_UINT,
	 .off = offsetof(struct policy_oauth, jwks_refresh_s),
	 .min = APPL_POLICY_OAUTH_REFRESH_S_MIN,
	 .max = APPL_POLICY_OAUTH_REFRESH_S_CEIL,
	 .def = APPL_POLICY_OAUTH_REFRESH_S_DEF},
};

/* The keys come from one place: a file the operator keeps, or the
 * authorization server's URL; a refresh period only means something for
 * the URL, and a setting the appliance would not honour is refused. */
int policy_oauth_parse(struct ctx *c, struct policy_oauth *o, const json_t *v, const char *path)
{
	int rc;

	policy_fields_default(oauth_fields, NELEM(oauth_fields), o);
	if ((rc = policy_fields_parse(c, v, oauth_fields, NELEM(oauth_fields), o, path)) < 0)
		return rc;
	if (!o->jwks_path == !o->jwks_url)
		return appl_err_set(c->err, -EINVAL,
				    "%s: needs exactly one of jwks_path (a JWK Set file) and "
				    "jwks_url (the authorization server's jwks_uri)",
				    path);
	if (o->jwks_path && json_object_get(v, "jwks_refresh_s"))
		return appl_err_set(c->err, -EINVAL,
				    "%s.jwks_refresh_s: only with jwks_url (a jwks_path is read at "
				    "start and at each reload)",
				    path);
	return 0;
}
