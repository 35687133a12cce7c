/* key.h: the parsed keys of a JWK Set, shared by the files of pkg/oauth
 * (jwks.c fills them; jws.c and sig.c read them). Not for other packages. */
#ifndef APPL_OAUTH_KEY_H
#define APPL_OAUTH_KEY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "oauth/oauth.h"

#define OAUTH_ED25519_BYTES 32			     /* an Ed25519 public key, x */
#define OAUTH_P256_BYTES    32			     /* one P-256 coordinate, and r and s */
#define OAUTH_SIG_MAX	    (OAUTH_RSA_BITS_MAX / 8) /* the longest signature, RS256's */

/* A key's type, which is also its one algorithm. */
enum oauth_kty {
	OAUTH_KTY_ED25519 = 1, /* EdDSA */
	OAUTH_KTY_P256,	       /* ES256 */
	OAUTH_KTY_RSA,	       /* RS256 */
};

struct oauth_key {
	enum oauth_kty kty;
	bool has_kid;
	size_t kid_len;
	char kid[OAUTH_KID_MAX + 1];
	unsigned char x[OAUTH_P256_BYTES]; /* Ed25519: the key; P-256: x */
	unsigned char y[OAUTH_P256_BYTES]; /* P-256: y */
	size_t n_len, e_len;		   /* RSA: no leading zero byte in either */
	unsigned char n[OAUTH_RSA_BITS_MAX / 8];
	unsigned char e[OAUTH_RSA_E_MAX];
};

struct oauth_jwks {
	size_t count, skipped;
	/* GnuTLS, for a set with an ES256 or RS256 key: 0 not needed, 1
	 * loaded, -EIO not loaded, with the reason (naming the package). */
	int crypto_rc;
	char crypto_why[APPL_ERR_MSG_MAX];
	struct oauth_key keys[OAUTH_JWKS_KEYS_MAX];
};

#endif
