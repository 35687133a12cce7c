/* minisign.c: minisign's formats and signatures (see minisign.h). */
#include "policy/minisign.h"

#include <errno.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define ALG_HASHED     "ED" /* Ed25519 over BLAKE2b-512 of the file */
#define ALG_LEGACY     "Ed" /* Ed25519 over the file itself; also the key algorithm */
#define KDF_SCRYPT     "Sc"
#define CHK_BLAKE2     "B2"
#define COMMENT_PREFIX "untrusted comment: "
#define TRUSTED_PREFIX "trusted comment: "

#define HASH_BYTES crypto_generichash_BYTES_MAX /* 64: BLAKE2b-512 */
#define CHK_BYTES  crypto_generichash_BYTES	/* 32: the secret key checksum */
#define SK_BYTES   crypto_sign_ed25519_SECRETKEYBYTES

/* The binary structures minisign base64-encodes, as byte offsets. */
#define SIG_RAW_BYTES (2 + POLICY_KEYID_BYTES + POLICY_SIG_BYTES)    /* 74 */
#define PUB_RAW_BYTES (2 + POLICY_KEYID_BYTES + POLICY_PUBKEY_BYTES) /* 42 */
#define SEC_OFF_KDF   2
#define SEC_OFF_CHKA  4
#define SEC_OFF_KEYID 54 /* after a 32-byte salt and two 8-byte KDF limits */
#define SEC_OFF_SK    (SEC_OFF_KEYID + POLICY_KEYID_BYTES)
#define SEC_OFF_CHK   (SEC_OFF_SK + SK_BYTES)
#define SEC_RAW_BYTES (SEC_OFF_CHK + CHK_BYTES) /* 158 */

#define B64_LEN(n) (sodium_base64_ENCODED_LEN((n), sodium_base64_VARIANT_ORIGINAL) - 1)

#define TIME_MAX 253402300799 /* 9999-12-31T23:59:59Z */

struct policy_seckey {
	unsigned char keyid[POLICY_KEYID_BYTES];
	unsigned char sk[SK_BYTES]; /* libsodium layout: seed || public key */
};

/* Working memory for secret key files, so no secret byte touches the
 * ordinary heap or stays on the stack. */
struct sec_scratch {
	unsigned char raw[SEC_RAW_BYTES];
	unsigned char chk_in[2 + POLICY_KEYID_BYTES + SK_BYTES];
	unsigned char chk[CHK_BYTES];
	unsigned char sk[SK_BYTES];
	unsigned char pk[POLICY_PUBKEY_BYTES];
	char b64[B64_LEN(SEC_RAW_BYTES) + 1];
};

/* ---- lines ---------------------------------------------------------------- */

struct lines {
	const char *buf;
	size_t len, pos;
};

/* The next line, without its "\n" or "\r\n"; -1 once the input is used up. */
static int line_next(struct lines *l, const char **s, size_t *n)
{
	const char *nl;

	if (l->pos >= l->len)
		return -1;
	*s = l->buf + l->pos;
	nl = memchr(*s, '\n', l->len - l->pos);
	*n = nl ? (size_t)(nl - *s) : l->len - l->pos;
	l->pos += *n + (nl ? 1 : 0);
	if (*n > 0 && (*s)[*n - 1] == '\r')
		(*n)--;
	return 0;
}

/* Common checks on a whole file before its lines are looked at: a NUL
 * would let a C string and the bytes disagree about where the file ends. */
static int file_check(const char *buf, size_t len, size_t max, const char *what,
		      struct appl_err *err)
{
	if (len > max)
		return appl_err_set(err, -EFBIG, "%s: more than the cap of %zu bytes", what, max);
	if (memchr(buf, '\0', len))
		return appl_err_set(err, -EINVAL, "%s: holds a NUL byte", what);
	return 0;
}

static int line_take(struct lines *l, const char **s, size_t *n, const char *what, const char *line,
		     struct appl_err *err)
{
	if (line_next(l, s, n) < 0)
		return appl_err_set(err, -EINVAL, "%s: truncated, no %s line", what, line);
	return 0;
}

static int prefix_check(const char *s, size_t n, const char *prefix, size_t max, const char *what,
			struct appl_err *err)
{
	size_t plen = strlen(prefix);

	if (n < plen || memcmp(s, prefix, plen) != 0)
		return appl_err_set(err, -EINVAL, "%s: a line does not start with \"%s\"", what,
				    prefix);
	if (n - plen > max)
		return appl_err_set(err, -EFBIG, "%s: comment longer than %zu bytes", what, max);
	return 0;
}

/* Decode exactly bin_len bytes from s[0..n): the length is checked before
 * decoding, and libsodium refuses bad characters, missing padding and
 * non-zero trailing bits, so each key or signature has one spelling. */
static int b64_take(const char *s, size_t n, unsigned char *bin, size_t bin_len, const char *what,
		    struct appl_err *err)
{
	size_t got = 0;

	if (n != B64_LEN(bin_len))
		return appl_err_set(err, -EINVAL, "%s: base64 line of %zu characters, expected %zu",
				    what, n, (size_t)B64_LEN(bin_len));
	if (sodium_base642bin(bin, bin_len, s, n, NULL, &got, NULL,
			      sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    got != bin_len)
		return appl_err_set(err, -EINVAL, "%s: bad base64", what);
	return 0;
}

/* Encode bin into out (sized with B64_LEN + 1); -1 if libsodium says no. */
static int b64_put(char *out, size_t out_len, const unsigned char *bin, size_t n)
{
	return sodium_bin2base64(out, out_len, bin, n, sodium_base64_VARIANT_ORIGINAL) ? 0 : -1;
}

static int end_check(const struct lines *l, const char *what, struct appl_err *err)
{
	if (l->pos != l->len)
		return appl_err_set(err, -EINVAL, "%s: unexpected bytes after the last line", what);
	return 0;
}

/* ---- key ids and times ---------------------------------------------------- */

void policy_keyid_hex(const unsigned char keyid[POLICY_KEYID_BYTES], char out[POLICY_KEYID_HEX])
{
	static const char digits[] = "0123456789ABCDEF";

	for (size_t i = 0; i < POLICY_KEYID_BYTES; i++) {
		unsigned char b = keyid[POLICY_KEYID_BYTES - 1 - i];
		out[2 * i] = digits[b >> 4];
		out[2 * i + 1] = digits[b & 15];
	}
	out[2 * POLICY_KEYID_BYTES] = '\0';
}

static int num_take(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;

	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return 0;
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar. */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static unsigned month_days(unsigned y, unsigned m)
{
	static const unsigned days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : days[m - 1];
}

/* The zone after the seconds (and fraction): "Z" or "+HH:MM"/"-HH:MM". */
static int zone_take(const char *s, size_t n, int64_t *offset)
{
	unsigned h, m;

	if (n == 1 && s[0] == 'Z') {
		*offset = 0;
		return 0;
	}
	if (n != 6 || (s[0] != '+' && s[0] != '-') || s[3] != ':' || num_take(s + 1, 2, &h) ||
	    num_take(s + 4, 2, &m) || h > 23 || m > 59)
		return -1;
	*offset = (s[0] == '-' ? -1 : 1) * (int64_t)(h * 3600 + m * 60);
	return 0;
}

int policy_sig_time_parse(const char *s, size_t len, int64_t *out)
{
	unsigned y, mo, d, h, mi, sec;
	size_t pos = 19;
	int64_t offset, t;

	if (len < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
	    s[16] != ':' || num_take(s, 4, &y) || num_take(s + 5, 2, &mo) ||
	    num_take(s + 8, 2, &d) || num_take(s + 11, 2, &h) || num_take(s + 14, 2, &mi) ||
	    num_take(s + 17, 2, &sec))
		return -EINVAL;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo) || h > 23 || mi > 59 ||
	    sec > 59)
		return -EINVAL;
	if (s[pos] == '.') {
		size_t start = ++pos;
		while (pos < len && pos - start < 9 && s[pos] >= '0' && s[pos] <= '9')
			pos++;
		if (pos == start)
			return -EINVAL;
	}
	if (zone_take(s + pos, len - pos, &offset) < 0)
		return -EINVAL;
	t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset;
	if (t < 0 || t > TIME_MAX)
		return -EINVAL;
	*out = t;
	return 0;
}

int policy_sig_time_format(int64_t t, char *out, size_t len)
{
	struct tm tm;
	time_t tt = (time_t)t;

	if (t < 0 || t > TIME_MAX || len < POLICY_TIME_STR)
		return -ERANGE;
	if (!gmtime_r(&tt, &tm) || strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		return -ERANGE;
	return 0;
}

/* ---- public keys ---------------------------------------------------------- */

int policy_pubkey_parse(const char *buf, size_t len, struct policy_pubkey *out,
			struct appl_err *err)
{
	static const char what[] = "public key file";
	struct lines l = {buf, len, 0};
	unsigned char raw[PUB_RAW_BYTES];
	const char *s;
	size_t n;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_check(buf, len, APPL_KEY_FILE_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "comment", err)) < 0 ||
	    (rc = prefix_check(s, n, COMMENT_PREFIX, APPL_SIG_COMMENT_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "key", err)) < 0 ||
	    (rc = b64_take(s, n, raw, sizeof(raw), what, err)) < 0 ||
	    (rc = end_check(&l, what, err)) < 0)
		return rc;
	if (memcmp(raw, ALG_LEGACY, 2) != 0)
		return appl_err_set(err, -EPROTONOSUPPORT, "%s: unsupported key algorithm", what);
	memcpy(out->keyid, raw + 2, POLICY_KEYID_BYTES);
	memcpy(out->pk, raw + 2 + POLICY_KEYID_BYTES, POLICY_PUBKEY_BYTES);
	return 0;
}

int policy_pubkey_format(const struct policy_pubkey *pk, char *out, size_t len, size_t *written,
			 struct appl_err *err)
{
	unsigned char raw[PUB_RAW_BYTES];
	char b64[B64_LEN(PUB_RAW_BYTES) + 1], hex[POLICY_KEYID_HEX];
	int n;

	memcpy(raw, ALG_LEGACY, 2);
	memcpy(raw + 2, pk->keyid, POLICY_KEYID_BYTES);
	memcpy(raw + 2 + POLICY_KEYID_BYTES, pk->pk, POLICY_PUBKEY_BYTES);
	if (b64_put(b64, sizeof(b64), raw, sizeof(raw)) < 0)
		return appl_err_set(err, -EIO, "base64 encoding failed");
	policy_keyid_hex(pk->keyid, hex);
	n = snprintf(out, len, COMMENT_PREFIX "minisign public key %s\n%s\n", hex, b64);
	if (n < 0 || (size_t)n >= len)
		return appl_err_set(err, -ENOSPC, "public key file: buffer too small");
	*written = (size_t)n;
	return 0;
}

/* ---- signatures ----------------------------------------------------------- */

static int sig_alg_check(const unsigned char alg[2], struct appl_err *err)
{
	if (memcmp(alg, ALG_HASHED, 2) == 0)
		return 0;
	/* Legacy signatures sign the whole file unhashed; minisign -H refuses
	 * them too. One algorithm means no downgrade to choose. */
	if (memcmp(alg, ALG_LEGACY, 2) == 0)
		return appl_err_set(err, -EPROTONOSUPPORT,
				    "signature file: legacy signature (algorithm Ed, not "
				    "prehashed) refused; sign without minisign -l");
	return appl_err_set(err, -EPROTONOSUPPORT, "signature file: unknown signature algorithm");
}

int policy_sig_parse(const char *buf, size_t len, struct policy_sig *out, struct appl_err *err)
{
	static const char what[] = "signature file";
	struct lines l = {buf, len, 0};
	unsigned char raw[SIG_RAW_BYTES];
	const char *s;
	size_t n, plen = strlen(TRUSTED_PREFIX);
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = file_check(buf, len, APPL_SIGNATURE_FILE_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "untrusted comment", err)) < 0 ||
	    (rc = prefix_check(s, n, COMMENT_PREFIX, APPL_SIG_COMMENT_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "signature", err)) < 0 ||
	    (rc = b64_take(s, n, raw, sizeof(raw), what, err)) < 0 ||
	    (rc = sig_alg_check(raw, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "trusted comment", err)) < 0 ||
	    (rc = prefix_check(s, n, TRUSTED_PREFIX, APPL_TRUSTED_COMMENT_MAX, what, err)) < 0)
		return rc;
	out->comment_len = n - plen;
	memcpy(out->comment, s + plen, out->comment_len);
	out->comment[out->comment_len] = '\0';
	if ((rc = line_take(&l, &s, &n, what, "global signature", err)) < 0 ||
	    (rc = b64_take(s, n, out->global_sig, POLICY_SIG_BYTES, what, err)) < 0 ||
	    (rc = end_check(&l, what, err)) < 0)
		return rc;
	memcpy(out->keyid, raw + 2, POLICY_KEYID_BYTES);
	memcpy(out->sig, raw + 2 + POLICY_KEYID_BYTES, POLICY_SIG_BYTES);
	return 0;
}

int policy_sig_verify(const struct policy_sig *sig, const struct policy_pubkey *key,
		      const void *msg, size_t msg_len, struct appl_err *err)
{
	unsigned char hash[HASH_BYTES];
	unsigned char covered[POLICY_SIG_BYTES + APPL_TRUSTED_COMMENT_MAX];
	char want[POLICY_KEYID_HEX], have[POLICY_KEYID_HEX];

	if (memcmp(sig->keyid, key->keyid, POLICY_KEYID_BYTES) != 0) {
		policy_keyid_hex(sig->keyid, want);
		policy_keyid_hex(key->keyid, have);
		return appl_err_set(err, -ENOKEY, "signed by key id %s, not by key id %s", want,
				    have);
	}
	if (sig->comment_len > APPL_TRUSTED_COMMENT_MAX)
		return appl_err_set(err, -EINVAL, "trusted comment too long");
	if (crypto_generichash(hash, sizeof(hash), msg, msg_len, NULL, 0) != 0)
		return appl_err_set(err, -EIO, "BLAKE2b failed");
	if (crypto_sign_ed25519_verify_detached(sig->sig, hash, sizeof(hash), key->pk) != 0)
		return appl_err_set(err, -EBADMSG,
				    "signature does not match the file: it was changed, or "
				    "another key with the same key id signed it; a policy must be "
				    "signed again after every change");
	/* The trusted comment carries the serial: without this check anyone
	 * could edit it on a good signature. */
	memcpy(covered, sig->sig, POLICY_SIG_BYTES);
	memcpy(covered + POLICY_SIG_BYTES, sig->comment, sig->comment_len);
	if (crypto_sign_ed25519_verify_detached(sig->global_sig, covered,
						POLICY_SIG_BYTES + sig->comment_len, key->pk) != 0)
		return appl_err_set(err, -EBADMSG,
				    "the trusted comment's signature does not verify: the "
				    "comment was changed");
	return 0;
}

static int comment_line_check(const char *tc, size_t *len, struct appl_err *err)
{
	*len = strnlen(tc, APPL_TRUSTED_COMMENT_MAX + 1);
	if (*len > APPL_TRUSTED_COMMENT_MAX)
		return appl_err_set(err, -EINVAL, "trusted comment longer than %u bytes",
				    APPL_TRUSTED_COMMENT_MAX);
	for (size_t i = 0; i < *len; i++)
		if ((unsigned char)tc[i] < 0x20 || tc[i] == 0x7f)
			return appl_err_set(err, -EINVAL,
					    "trusted comment holds a control character");
	return 0;
}

static int sig_text(const unsigned char raw[SIG_RAW_BYTES], const unsigned char global[64],
		    const char *tc, char *out, size_t len, size_t *written, struct appl_err *err)
{
	char b64sig[B64_LEN(SIG_RAW_BYTES) + 1], b64global[B64_LEN(POLICY_SIG_BYTES) + 1];
	int n;

	if (b64_put(b64sig, sizeof(b64sig), raw, SIG_RAW_BYTES) < 0 ||
	    b64_put(b64global, sizeof(b64global), global, POLICY_SIG_BYTES) < 0)
		return appl_err_set(err, -EIO, "base64 encoding failed");
	n = snprintf(out, len,
		     COMMENT_PREFIX "signature from appliance secret key\n%s\n" TRUSTED_PREFIX
				    "%s\n%s\n",
		     b64sig, tc, b64global);
	if (n < 0 || (size_t)n >= len)
		return appl_err_set(err, -ENOSPC, "signature file: buffer too small");
	*written = (size_t)n;
	return 0;
}

/* Parse the text we are about to hand out and verify it with the public
 * half: a fault while signing must not produce a file that only fails
 * later, on the appliance. */
static int sig_selfcheck(const struct policy_seckey *sk, const char *text, size_t text_len,
			 const void *msg, size_t msg_len, struct appl_err *err)
{
	struct policy_sig sig;
	struct policy_pubkey pk;
	int rc;

	policy_seckey_pubkey(sk, &pk);
	if ((rc = policy_sig_parse(text, text_len, &sig, err)) < 0 ||
	    (rc = policy_sig_verify(&sig, &pk, msg, msg_len, err)) < 0) {
		appl_err_prefix(err, "signature just made does not verify");
		return rc;
	}
	return 0;
}

int policy_sig_create(const struct policy_seckey *sk, const void *msg, size_t msg_len,
		      const char *trusted_comment, char *out, size_t len, size_t *written,
		      struct appl_err *err)
{
	unsigned char raw[SIG_RAW_BYTES], hash[HASH_BYTES], global[POLICY_SIG_BYTES];
	unsigned char covered[POLICY_SIG_BYTES + APPL_TRUSTED_COMMENT_MAX];
	unsigned char *sig = raw + 2 + POLICY_KEYID_BYTES;
	size_t tc_len;
	int rc;

	if ((rc = comment_line_check(trusted_comment, &tc_len, err)))
		return rc;
	memcpy(raw, ALG_HASHED, 2);
	memcpy(raw + 2, sk->keyid, POLICY_KEYID_BYTES);
	if (crypto_generichash(hash, sizeof(hash), msg, msg_len, NULL, 0) != 0 ||
	    crypto_sign_ed25519_detached(sig, NULL, hash, sizeof(hash), sk->sk) != 0)
		return appl_err_set(err, -EIO, "signing failed");
	memcpy(covered, sig, POLICY_SIG_BYTES);
	memcpy(covered + POLICY_SIG_BYTES, trusted_comment, tc_len);
	if (crypto_sign_ed25519_detached(global, NULL, covered, POLICY_SIG_BYTES + tc_len,
					 sk->sk) != 0)
		return appl_err_set(err, -EIO, "signing the trusted comment failed");
	if ((rc = sig_text(raw, global, trusted_comment, out, len, written, err)) < 0)
		return rc;
	return sig_selfcheck(sk, out, *written, msg, msg_len, err);
}

/* ---- the trusted comment -------------------------------------------------- */

/* A base name that stays one token: printable ASCII, no space or '/'. */
static bool name_ok(const char *s, size_t n)
{
	if (n == 0 || n > APPL_POLICY_NAME_MAX || (n == 1 && s[0] == '.') ||
	    (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '/')
			return false;
	return true;
}

/* Decimal, no sign, no leading zero, no overflow: one spelling per number. */
static int serial_take(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned digit = (unsigned)(s[i] - '0');
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - digit) / 10)
			return -1;
		v = v * 10 + digit;
	}
	*out = v;
	return 0;
}

/* Take "key:" and the value up to the next space (or the end) from
 * s[*pos..len); the value must end the comment when last is set. */
static int field_take(const char *s, size_t len, size_t *pos, const char *key, bool last,
		      const char **val, size_t *n)
{
	size_t klen = strlen(key);
	const char *sp;

	if (len - *pos < klen || memcmp(s + *pos, key, klen) != 0)
		return -1;
	*pos += klen;
	*val = s + *pos;
	sp = memchr(*val, ' ', len - *pos);
	*n = sp ? (size_t)(sp - *val) : len - *pos;
	*pos += *n;
	if (last)
		return *pos == len ? 0 : -1;
	if (*pos == len)
		return -1;
	(*pos)++; /* the one space */
	return 0;
}

int policy_comment_parse(const char *buf, size_t len, struct policy_comment *out,
			 struct appl_err *err)
{
	const char *name, *serial, *when;
	size_t pos = 0, name_n, serial_n, when_n;

	memset(out, 0, sizeof(*out));
	if (len > APPL_TRUSTED_COMMENT_MAX || memchr(buf, '\0', len) ||
	    field_take(buf, len, &pos, "file:", false, &name, &name_n) < 0 ||
	    field_take(buf, len, &pos, "serial:", false, &serial, &serial_n) < 0 ||
	    field_take(buf, len, &pos, "signed:", true, &when, &when_n) < 0)
		return appl_err_set(err, -EINVAL,
				    "trusted comment \"%.*s\" is not of the form \"file:NAME "
				    "serial:N signed:RFC3339\"",
				    (int)(len > 200 ? 200 : len), buf);
	if (!name_ok(name, name_n))
		return appl_err_set(err, -EINVAL,
				    "trusted comment: file name must be printable, without "
				    "spaces or '/'");
	if (serial_take(serial, serial_n, &out->serial) < 0)
		return appl_err_set(err, -EINVAL,
				    "trusted comment: serial must be a decimal integer without "
				    "leading zeros, at most 2^64-1");
	if (policy_sig_time_parse(when, when_n, &out->signed_at) < 0)
		return appl_err_set(err, -EINVAL,
				    "trusted comment: signed: is not an RFC 3339 date-time "
				    "(e.g. 2025-01-31T12:00:00Z)");
	memcpy(out->file, name, name_n);
	out->file[name_n] = '\0';
	return 0;
}

int policy_comment_format(const char *name, uint64_t serial, int64_t signed_at, char *out,
			  size_t len, struct appl_err *err)
{
	char when[POLICY_TIME_STR];
	size_t name_n = strnlen(name, APPL_POLICY_NAME_MAX + 1);
	int n;

	if (!name_ok(name, name_n))
		return appl_err_set(err, -EINVAL,
				    "file name \"%.64s\" cannot go in a trusted comment: it must "
				    "be printable ASCII without spaces, at most %u bytes",
				    name, APPL_POLICY_NAME_MAX);
	if (policy_sig_time_format(signed_at, when, sizeof(when)) < 0)
		return appl_err_set(err, -ERANGE, "signing time out of range");
	n = snprintf(out, len, "file:%s serial:%" PRIu64 " signed:%s", name, serial, when);
	if (n < 0 || (size_t)n >= len)
		return appl_err_set(err, -ENOSPC, "trusted comment: buffer too small");
	return 0;
}

/* ---- secret keys ---------------------------------------------------------- */

void policy_seckey_pubkey(const struct policy_seckey *sk, struct policy_pubkey *pk)
{
	memcpy(pk->keyid, sk->keyid, POLICY_KEYID_BYTES);
	/* libsodium's secret key is seed || public key. */
	memcpy(pk->pk, sk->sk + SK_BYTES - POLICY_PUBKEY_BYTES, POLICY_PUBKEY_BYTES);
}

void policy_seckey_free(struct policy_seckey *sk)
{
	if (sk)
		sodium_free(sk);
}

int policy_seckey_generate(struct policy_seckey **out, struct policy_pubkey *pk,
			   struct appl_err *err)
{
	unsigned char pub[POLICY_PUBKEY_BYTES];
	struct policy_seckey *sk;

	*out = NULL;
	sk = sodium_malloc(sizeof(*sk));
	if (!sk)
		return appl_err_set(err, -ENOMEM, "no memory for a secret key");
	randombytes_buf(sk->keyid, sizeof(sk->keyid));
	if (crypto_sign_ed25519_keypair(pub, sk->sk) != 0) {
		sodium_free(sk);
		return appl_err_set(err, -EIO, "key generation failed");
	}
	policy_seckey_pubkey(sk, pk);
	*out = sk;
	return 0;
}

/* minisign's checksum: BLAKE2b-256 of the algorithm, key id and key. */
static int seckey_chk(struct sec_scratch *x, const unsigned char *keyid, const unsigned char *sk)
{
	memcpy(x->chk_in, ALG_LEGACY, 2);
	memcpy(x->chk_in + 2, keyid, POLICY_KEYID_BYTES);
	memcpy(x->chk_in + 2 + POLICY_KEYID_BYTES, sk, SK_BYTES);
	return crypto_generichash(x->chk, CHK_BYTES, x->chk_in, sizeof(x->chk_in), NULL, 0);
}

static int seckey_fields_check(const unsigned char *raw, struct appl_err *err)
{
	static const unsigned char kdf_none[2] = {0, 0};

	if (memcmp(raw, ALG_LEGACY, 2) != 0)
		return appl_err_set(err, -EPROTONOSUPPORT,
				    "secret key file: unsupported key algorithm");
	if (memcmp(raw + SEC_OFF_CHKA, CHK_BLAKE2, 2) != 0)
		return appl_err_set(err, -EPROTONOSUPPORT,
				    "secret key file: unsupported checksum algorithm");
	if (memcmp(raw + SEC_OFF_KDF, KDF_SCRYPT, 2) == 0)
		return appl_err_set(err, -ENOTSUP,
				    "secret key file: the key is encrypted with a password; "
				    "remove it with `minisign -C -W -s FILE` first");
	if (memcmp(raw + SEC_OFF_KDF, kdf_none, 2) != 0)
		return appl_err_set(err, -EPROTONOSUPPORT,
				    "secret key file: unsupported key derivation algorithm");
	return 0;
}

/* The checksum (when there is one) and the public half must both match:
 * a damaged key would sign with a public key nobody trusts. */
static int seckey_consistent(struct sec_scratch *x, struct appl_err *err)
{
	const unsigned char *sk = x->raw + SEC_OFF_SK;

	if (seckey_chk(x, x->raw + SEC_OFF_KEYID, sk) != 0)
		return appl_err_set(err, -EIO, "BLAKE2b failed");
	if (!sodium_is_zero(x->raw + SEC_OFF_CHK, CHK_BYTES) &&
	    sodium_memcmp(x->chk, x->raw + SEC_OFF_CHK, CHK_BYTES) != 0)
		return appl_err_set(err, -EINVAL, "secret key file: checksum does not match");
	if (crypto_sign_ed25519_seed_keypair(x->pk, x->sk, sk) != 0)
		return appl_err_set(err, -EIO, "key derivation failed");
	if (sodium_memcmp(x->sk, sk, SK_BYTES) != 0)
		return appl_err_set(err, -EINVAL,
				    "secret key file: public half does not match the seed");
	return 0;
}

static int seckey_decode(const char *buf, size_t len, struct sec_scratch *x, struct appl_err *err)
{
	static const char what[] = "secret key file";
	struct lines l = {buf, len, 0};
	const char *s;
	size_t n;
	int rc;

	if ((rc = file_check(buf, len, APPL_KEY_FILE_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "comment", err)) < 0 ||
	    (rc = prefix_check(s, n, COMMENT_PREFIX, APPL_SIG_COMMENT_MAX, what, err)) < 0 ||
	    (rc = line_take(&l, &s, &n, what, "key", err)) < 0 ||
	    (rc = b64_take(s, n, x->raw, SEC_RAW_BYTES, what, err)) < 0 ||
	    (rc = end_check(&l, what, err)) < 0)
		return rc;
	return 0;
}

int policy_seckey_parse(const char *buf, size_t len, struct policy_seckey **out,
			struct appl_err *err)
{
	struct sec_scratch *x;
	struct policy_seckey *sk = NULL;
	int rc;

	*out = NULL;
	x = sodium_malloc(sizeof(*x));
	if (!x)
		return appl_err_set(err, -ENOMEM, "no memory for a secret key");
	if ((rc = seckey_decode(buf, len, x, err)) < 0 ||
	    (rc = seckey_fields_check(x->raw, err)) < 0 || (rc = seckey_consistent(x, err)) < 0)
		goto out;
	sk = sodium_malloc(sizeof(*sk));
	if (!sk) {
		rc = appl_err_set(err, -ENOMEM, "no memory for a secret key");
		goto out;
	}
	memcpy(sk->keyid, x->raw + SEC_OFF_KEYID, POLICY_KEYID_BYTES);
	memcpy(sk->sk, x->raw + SEC_OFF_SK, SK_BYTES);
	*out = sk;
out:
	sodium_free(x);
	return rc;
}

/* Algorithm, KDF none (salt and limits stay zero), checksum algorithm, key
 * id, key, checksum, into x->b64: what minisign -G -W writes. */
static int seckey_encode(const struct policy_seckey *sk, struct sec_scratch *x)
{
	memset(x->raw, 0, SEC_RAW_BYTES);
	memcpy(x->raw, ALG_LEGACY, 2);
	memcpy(x->raw + SEC_OFF_CHKA, CHK_BLAKE2, 2);
	memcpy(x->raw + SEC_OFF_KEYID, sk->keyid, POLICY_KEYID_BYTES);
	memcpy(x->raw + SEC_OFF_SK, sk->sk, SK_BYTES);
	if (seckey_chk(x, sk->keyid, sk->sk) != 0)
		return -1;
	memcpy(x->raw + SEC_OFF_CHK, x->chk, CHK_BYTES);
	return b64_put(x->b64, sizeof(x->b64), x->raw, SEC_RAW_BYTES);
}

int policy_seckey_format(const struct policy_seckey *sk, char **out, size_t *len,
			 struct appl_err *err)
{
	static const char head[] = COMMENT_PREFIX "appliance secret key (unencrypted)\n";
	size_t b64_len = B64_LEN(SEC_RAW_BYTES), total = sizeof(head) - 1 + b64_len + 1;
	struct sec_scratch *x = sodium_malloc(sizeof(*x));
	char *text = sodium_malloc(total + 1);
	int rc = 0;

	*out = NULL;
	*len = 0;
	if (!x || !text)
		rc = appl_err_set(err, -ENOMEM, "no memory for a secret key");
	else if (seckey_encode(sk, x) < 0)
		rc = appl_err_set(err, -EIO, "encoding the secret key failed");
	if (rc == 0) {
		memcpy(text, head, sizeof(head) - 1);
		memcpy(text + sizeof(head) - 1, x->b64, b64_len);
		text[total - 1] = '\n';
		text[total] = '\0';
		*out = text;
		*len = total;
	} else if (text) {
		sodium_free(text);
	}
	if (x)
		sodium_free(x);
	return rc;
}
