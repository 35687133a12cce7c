/* minisign.h: minisign's key and signature formats, and the signatures
 * themselves (Ed25519 over BLAKE2b-512, through libsodium). Pure: nothing
 * here opens a file; trust.c and load.c do the reading and writing.
 *
 * A signature file (detached, the policy beside it) has four lines:
 *
 *     untrusted comment: <anything, not covered by a signature>
 *     base64("ED" || key id[8] || Ed25519(BLAKE2b-512(policy bytes))[64])
 *     trusted comment: file:NAME serial:N signed:RFC3339
 *     base64(Ed25519(signature[64] || trusted comment)[64])
 *
 * A public key file has two lines, "untrusted comment: ..." and
 * base64("Ed" || key id[8] || public key[32]); a secret key file has two
 * too, the second base64 of minisign's 158-byte secret key structure
 * (docs/signing.md has the layout). Only unencrypted secret keys (minisign
 * -W, KDF algorithm none) are read and written.
 *
 * Lines end in "\n" (a "\r" before it is allowed); after the last line
 * only one line end may follow. A NUL byte anywhere is refused.
 *
 * libsodium is initialised once per process, by its main (cmd/appliance's
 * does it before any command runs), never here: the functions below
 * marked "Needs libsodium initialised" rely on that having been done.
 */
#ifndef APPL_POLICY_MINISIGN_H
#define APPL_POLICY_MINISIGN_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"

#define POLICY_KEYID_BYTES  8
#define POLICY_KEYID_HEX    17 /* 16 upper-case hex digits and a NUL */
#define POLICY_PUBKEY_BYTES 32
#define POLICY_SIG_BYTES    64
#define POLICY_TIME_STR	    21 /* "YYYY-MM-DDTHH:MM:SSZ" and a NUL */

/* A public key: plain memory, nothing secret. */
struct policy_pubkey {
	unsigned char keyid[POLICY_KEYID_BYTES];
	unsigned char pk[POLICY_PUBKEY_BYTES];
};

/* A parsed signature file (algorithm "ED" only). comment is the trusted
 * comment without its prefix, NUL-terminated, comment_len bytes. */
struct policy_sig {
	unsigned char keyid[POLICY_KEYID_BYTES];
	unsigned char sig[POLICY_SIG_BYTES];	    /* over BLAKE2b-512(file) */
	unsigned char global_sig[POLICY_SIG_BYTES]; /* over sig || comment */
	size_t comment_len;
	char comment[APPL_TRUSTED_COMMENT_MAX + 1];
};

/* The appliance's trusted comment: file:NAME serial:N signed:RFC3339. */
struct policy_comment {
	char file[APPL_POLICY_NAME_MAX + 1]; /* a base name: printable, no '/' or space */
	uint64_t serial;
	int64_t signed_at; /* unix seconds, UTC */
};

/* A secret key, kept in sodium_malloc memory (guarded, locked, wiped on
 * free). Opaque. */
struct policy_seckey;

/* Parse a public key file from buf[0..len) (untrusted, not NUL-terminated)
 * into out. Refuses anything but algorithm "Ed" and exact lengths. Pure. */
int policy_pubkey_parse(const char *buf, size_t len, struct policy_pubkey *out,
			struct appl_err *err);

/* Write pk as a public key file ("untrusted comment: minisign public key
 * HEX" and the base64 line) into out (len bytes, APPL_KEY_FILE_MAX is
 * enough); *written gets its length without the NUL. */
int policy_pubkey_format(const struct policy_pubkey *pk, char *out, size_t len, size_t *written,
			 struct appl_err *err);

/* Parse a signature file from buf[0..len) (untrusted) into out. Checks the
 * layout, the base64 and the algorithm: "Ed" (legacy, no prehash) is
 * refused with -EPROTONOSUPPORT, any other algorithm too. Verifies nothing:
 * see policy_sig_verify. Pure. */
int policy_sig_parse(const char *buf, size_t len, struct policy_sig *out, struct appl_err *err);

/* Verify sig against key over msg[0..msg_len), in minisign's order: the key
 * ids must match (-ENOKEY), the signature must cover BLAKE2b-512 of the
 * message (-EBADMSG: the file was changed or another key signed it), and
 * the global signature must cover the signature and the trusted comment
 * (-EBADMSG: the trusted comment was changed). All borrowed. Needs
 * libsodium initialised. */
int policy_sig_verify(const struct policy_sig *sig, const struct policy_pubkey *key,
		      const void *msg, size_t msg_len, struct appl_err *err);

/* Sign msg[0..msg_len) with sk and write a whole signature file (algorithm
 * "ED") carrying trusted_comment (one line, at most
 * APPL_TRUSTED_COMMENT_MAX bytes) into out (len bytes;
 * APPL_SIGNATURE_FILE_MAX is enough); *written gets its length. The
 * signature is verified once more before it is returned. Needs
 * libsodium initialised. */
int policy_sig_create(const struct policy_seckey *sk, const void *msg, size_t msg_len,
		      const char *trusted_comment, char *out, size_t len, size_t *written,
		      struct appl_err *err);

/* Parse the trusted comment buf[0..len) (verified, but still checked to
 * the letter: exactly "file:NAME serial:N signed:RFC3339", one space
 * between, N decimal without leading zeros, NAME a base name). */
int policy_comment_parse(const char *buf, size_t len, struct policy_comment *out,
			 struct appl_err *err);

/* Write "file:NAME serial:N signed:YYYY-MM-DDTHH:MM:SSZ" into out (len
 * bytes). Refuses a NAME that policy_comment_parse would refuse. */
int policy_comment_format(const char *name, uint64_t serial, int64_t signed_at, char *out,
			  size_t len, struct appl_err *err);

/* Parse an RFC 3339 date-time (s[0..len), "2025-01-31T12:00:00Z", with
 * optional fraction and "Z" or a "+HH:MM"/"-HH:MM" offset; years 1970 to
 * 9999) into unix seconds. Returns 0 or -EINVAL. */
int policy_sig_time_parse(const char *s, size_t len, int64_t *out);

/* Write t as "YYYY-MM-DDTHH:MM:SSZ" into out (at least POLICY_TIME_STR
 * bytes). Returns 0, or -ERANGE outside years 1970 to 9999. */
int policy_sig_time_format(int64_t t, char *out, size_t len);

/* The key id as minisign prints it: the 8 bytes read as a little-endian
 * integer, 16 upper-case hex digits. */
void policy_keyid_hex(const unsigned char keyid[POLICY_KEYID_BYTES], char out[POLICY_KEYID_HEX]);

/* Make a new key pair from the system's random source: *out is new (free
 * with policy_seckey_free), pk receives its public half. Needs
 * libsodium initialised. */
int policy_seckey_generate(struct policy_seckey **out, struct policy_pubkey *pk,
			   struct appl_err *err);

/* Parse a secret key file from buf[0..len) (borrowed; the caller should
 * keep it in sodium_malloc memory too) into a new *out. Refuses encrypted
 * keys (KDF "Sc": remove the password with `minisign -C -W` first), a
 * checksum that does not match (an all-zero one, as minisign 0.11 -W
 * writes, is allowed), and a key whose public half is not the one its seed
 * makes. Needs libsodium initialised. */
int policy_seckey_parse(const char *buf, size_t len, struct policy_seckey **out,
			struct appl_err *err);

/* Write sk as an unencrypted minisign secret key file, checksum included.
 * *out is new sodium_malloc memory of *len bytes plus a NUL: release it
 * with sodium_free(), which wipes it. */
int policy_seckey_format(const struct policy_seckey *sk, char **out, size_t *len,
			 struct appl_err *err);

/* The public half of sk (borrowed) into pk. */
void policy_seckey_pubkey(const struct policy_seckey *sk, struct policy_pubkey *pk);

/* Wipe and free sk (may be NULL). */
void policy_seckey_free(struct policy_seckey *sk);

#endif
