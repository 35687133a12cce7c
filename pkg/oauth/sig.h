/* sig.h: the three signature checks of pkg/oauth, over a key of key.h:
 * EdDSA with libsodium, ES256 and RS256 with GnuTLS (loaded with dlopen:
 * the appliance maps it only when a key set needs it). Internal to
 * pkg/oauth. */
#ifndef APPL_OAUTH_SIG_H
#define APPL_OAUTH_SIG_H

#include <stddef.h>

#include "base/err.h"
#include "oauth/key.h"

#define OAUTH_GNUTLS_SONAME  "libgnutls.so.30"
#define OAUTH_GNUTLS_PACKAGE "libgnutls30"

/* An ECDSA-Sig-Value in DER, at its longest: SEQUENCE { INTEGER r,
 * INTEGER s }, each 32 bytes plus a zero byte when the top bit is set. */
#define OAUTH_ES256_DER_MAX (2 + 2 * (2 + 1 + OAUTH_P256_BYTES))

/* Load GnuTLS once (appl_dl_load: one thread only): 0, or -EIO with err
 * naming the package to install, on this and every later call. */
int oauth_sig_load(struct appl_err *err);

/* 0 when GnuTLS takes key (P-256 or RSA) and finds its numbers sound
 * (gnutls_pubkey_verify_params: for P-256, a point on the curve); -EINVAL
 * when it does not; -ENOMEM. GnuTLS is loaded (oauth_sig_load). */
int oauth_sig_key_check(const struct oauth_key *key);

/* Check sig[0..sig_len) over msg[0..msg_len) with key (borrowed). 0 when it
 * verifies; -EACCES when it does not (a wrong length included); -ENOMEM;
 * -EIO when GnuTLS refused the key itself (oauth_sig_key_check passed it,
 * so only a failing library). For a P-256 or RSA key the caller has
 * loaded GnuTLS (oauth_sig_load) first. Allocates only inside
 * GnuTLS, for the duration of the call. */
int oauth_sig_verify(const struct oauth_key *key, const unsigned char *msg, size_t msg_len,
		     const unsigned char *sig, size_t sig_len, struct appl_err *err);

/* The JWS form of an ES256 signature, r || s (32 bytes each, big-endian),
 * as the DER ECDSA-Sig-Value GnuTLS takes, into der; returns its length
 * (8 to OAUTH_ES256_DER_MAX). */
size_t oauth_sig_es256_der(const unsigned char rs[2 * OAUTH_P256_BYTES],
			   unsigned char der[OAUTH_ES256_DER_MAX]);

#endif
