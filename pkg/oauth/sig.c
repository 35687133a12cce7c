/* sig.c: see sig.h.
 *
 * The GnuTLS key object is made for each check (gnutls_pubkey_init, an
 * import of the raw numbers, deinit), not once when the set is parsed: the
 * parsed set then stays plain bytes that any number of threads may read at
 * once, and nothing of GnuTLS outlives a call. An import costs a few
 * microseconds; the verification dwarfs it.
 */
#include "oauth/sig.h"

#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <sodium.h>
#include <string.h>

#include "base/dl.h"

/* clang-format off */
#define GNUTLS_FNS(X) \
	X(pubkey_init) \
	X(pubkey_deinit) \
	X(pubkey_import_rsa_raw) \
	X(pubkey_import_ecc_raw) \
	X(pubkey_verify_params) \
	X(pubkey_verify_data2)
/* clang-format on */

static struct {
#define X(name) __typeof__(gnutls_##name) *name;
	GNUTLS_FNS(X)
#undef X
} gt;

static const struct appl_dl_sym gt_syms[] = {
#define X(name) {"gnutls_" #name, (void **)&gt.name},
	GNUTLS_FNS(X)
#undef X
};

static struct appl_dl_lib gt_lib = APPL_DL_LIB(OAUTH_GNUTLS_SONAME, OAUTH_GNUTLS_PACKAGE, gt_syms);

_Static_assert(OAUTH_ES256_DER_MAX - 2 < 128, "the SEQUENCE's length fits DER's short form");

int oauth_sig_load(struct appl_err *err)
{
	return appl_dl_load(&gt_lib, err);
}

static int refused(struct appl_err *err)
{
	return appl_err_set(err, -EACCES, "access token: signature does not verify");
}

/* One unsigned big-endian number v[0..n) as a DER INTEGER at out: its
 * shortest form (no leading zero byte, but one byte for zero), and a zero
 * byte first when its top bit is set, since DER integers are signed and r
 * or s would otherwise read as negative. At most 3 + n bytes. */
static size_t der_uint(unsigned char *out, const unsigned char *v, size_t n)
{
	size_t i = 0, len;
	unsigned pad;

	while (i + 1 < n && v[i] == 0)
		i++;
	len = n - i;
	pad = v[i] >> 7;
	out[0] = 0x02;
	out[1] = (unsigned char)(len + pad);
	out[2] = 0;
	memcpy(out + 2 + pad, v + i, len);
	return 2 + pad + len;
}

size_t oauth_sig_es256_der(const unsigned char rs[2 * OAUTH_P256_BYTES],
			   unsigned char der[OAUTH_ES256_DER_MAX])
{
	size_t r_len, s_len;

	r_len = der_uint(der + 2, rs, OAUTH_P256_BYTES);
	s_len = der_uint(der + 2 + r_len, rs + OAUTH_P256_BYTES, OAUTH_P256_BYTES);
	der[0] = 0x30;
	der[1] = (unsigned char)(r_len + s_len);
	return 2 + r_len + s_len;
}

static int import_key(gnutls_pubkey_t pk, const struct oauth_key *key)
{
	gnutls_datum_t a, b;

	if (key->kty == OAUTH_KTY_RSA) {
		a = (gnutls_datum_t){(unsigned char *)key->n, (unsigned)key->n_len};
		b = (gnutls_datum_t){(unsigned char *)key->e, (unsigned)key->e_len};
		return gt.pubkey_import_rsa_raw(pk, &a, &b);
	}
	a = (gnutls_datum_t){(unsigned char *)key->x, OAUTH_P256_BYTES};
	b = (gnutls_datum_t){(unsigned char *)key->y, OAUTH_P256_BYTES};
	return gt.pubkey_import_ecc_raw(pk, GNUTLS_ECC_CURVE_SECP256R1, &a, &b);
}

int oauth_sig_key_check(const struct oauth_key *key)
{
	gnutls_pubkey_t pk;
	int rc;

	if ((rc = gt.pubkey_init(&pk)) < 0)
		return rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
	/* An import takes any two numbers as a point; a point off the curve
	 * would fail every signature, and a key GnuTLS cannot import would
	 * fail every token with a server error. Found now, either is a key
	 * skipped, so the set's other keys still serve. */
	if ((rc = import_key(pk, key)) >= 0)
		rc = gt.pubkey_verify_params(pk);
	gt.pubkey_deinit(pk);
	if (rc < 0)
		return rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EINVAL;
	return 0;
}

/* RS256 or ES256 (sig already in the form GnuTLS takes) with GnuTLS. */
static int gnutls_check(const struct oauth_key *key, gnutls_sign_algorithm_t algo,
			const unsigned char *msg, size_t msg_len, const unsigned char *sig,
			size_t sig_len, struct appl_err *err)
{
	gnutls_datum_t data = {(unsigned char *)msg, (unsigned)msg_len};
	gnutls_datum_t sigd = {(unsigned char *)sig, (unsigned)sig_len};
	gnutls_pubkey_t pk;
	int rc;

	if ((rc = gt.pubkey_init(&pk)) < 0)
		return appl_err_set(err, rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EIO,
				    "GnuTLS could not make a public key object (error %d)", rc);
	if ((rc = import_key(pk, key)) < 0) {
		rc = appl_err_set(err, rc == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EIO,
				  "GnuTLS refused a key of the JWKS (error %d)", rc);
		goto out;
	}
	/* Any other answer than a yes is a no: the signature's bytes are the
	 * client's, so whatever GnuTLS finds wrong with them the token is
	 * unproven, and a client must not turn a bad signature into a
	 * server error. The key's own faults were caught by the import. */
	rc = gt.pubkey_verify_data2(pk, algo, 0, &data, &sigd);
	if (rc >= 0)
		rc = 0;
	else if (rc == GNUTLS_E_MEMORY_ERROR)
		rc = appl_err_set(err, -ENOMEM, "GnuTLS ran out of memory checking a signature");
	else
		rc = refused(err);
out:
	gt.pubkey_deinit(pk);
	return rc;
}

int oauth_sig_verify(const struct oauth_key *key, const unsigned char *msg, size_t msg_len,
		     const unsigned char *sig, size_t sig_len, struct appl_err *err)
{
	unsigned char der[OAUTH_ES256_DER_MAX];
	size_t der_len;

	switch (key->kty) {
	case OAUTH_KTY_ED25519:
		/* libsodium also refuses a non-canonical S and small-order
		 * points, so no second spelling of a signature verifies. */
		if (sig_len != crypto_sign_BYTES ||
		    crypto_sign_verify_detached(sig, msg, msg_len, key->x) != 0)
			return refused(err);
		return 0;
	case OAUTH_KTY_P256:
		if (sig_len != 2 * OAUTH_P256_BYTES)
			return refused(err);
		der_len = oauth_sig_es256_der(sig, der);
		return gnutls_check(key, GNUTLS_SIGN_ECDSA_SHA256, msg, msg_len, der, der_len, err);
	case OAUTH_KTY_RSA:
		/* RFC 8017 8.2.2: a signature is exactly as long as the
		 * modulus; a shorter one is not "the same number". */
		if (sig_len != key->n_len)
			return refused(err);
		return gnutls_check(key, GNUTLS_SIGN_RSA_SHA256, msg, msg_len, sig, sig_len, err);
	}
	return appl_err_set(err, -EINVAL, "oauth: a key of no known type");
}
