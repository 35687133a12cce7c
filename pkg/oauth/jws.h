/* jws.h: a compact JWS (RFC 7515) checked against a key set: steps 1 to 5
 * of oauth.h, everything but the claims. Internal to pkg/oauth (jwt.c),
 * and open to the unit test, which checks the RFCs' own examples with it
 * (their payloads are no access tokens). */
#ifndef APPL_OAUTH_JWS_H
#define APPL_OAUTH_JWS_H

#include <stddef.h>

#include "base/err.h"
#include "oauth/oauth.h"

/* A decoded header or payload segment, at its longest: base64url turns 4
 * characters into 3 bytes, and a segment is shorter than the token. */
#define OAUTH_SEGMENT_BYTES_MAX (OAUTH_TOKEN_MAX / 4 * 3)

/* Steps 1 to 5 of oauth.h on tok[0..len). 0 when a key of ks signed it,
 * with *payload and *payload_len the payload segment, still base64url,
 * inside tok (borrowed from it); else the codes of oauth_jwt_verify. */
int oauth_jws_verify(const struct oauth_jwks *ks, const char *tok, size_t len, const char **payload,
		     size_t *payload_len, struct appl_err *err);

#endif
