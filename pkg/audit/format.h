/* format.h: what the writer (audit.h) and the checker (verify.h) of the
 * audit log agree on: how a line is hashed, how a seal is computed and its
 * key ratcheted, and the files kept in the appliance's state directory for
 * each log (docs/audit.md gives all of it in prose, for other tools).
 *
 * For a log at the absolute path P, the state directory holds
 *
 *     audit.key             the installation's digest key (hex, 0600)
 *     audit/ID.head         the chain's head: two checksummed slots
 *     audit/ID.seal         the sealing key of the current epoch (0600)
 *     audit/ID.lock         flock'ed by every writer around each append
 *
 * with ID the first 16 bytes of BLAKE2b-256(P), in hex.
 */
#ifndef APPL_AUDIT_FORMAT_H
#define APPL_AUDIT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define AUDIT_HASH_BYTES    32 /* BLAKE2b-256 */
#define AUDIT_HASH_HEX	    (2 * AUDIT_HASH_BYTES + 1)
#define AUDIT_KEY_BYTES	    32
#define AUDIT_KID_BYTES	    8
#define AUDIT_KID_HEX	    (2 * AUDIT_KID_BYTES + 1)
#define AUDIT_ID_BYTES	    16
#define AUDIT_ID_HEX	    (2 * AUDIT_ID_BYTES + 1)
#define AUDIT_TIME_LEN	    24 /* YYYY-MM-DDTHH:MM:SS.mmmZ */
#define AUDIT_HEAD_SLOT	    512
#define AUDIT_LINE_MAX	    8192 /* no line the writer makes is longer */
#define AUDIT_SEAL_FILE_MAX 320	 /* a sealing state file is shorter */

/* Every event the writer puts in a log (docs/audit.md, "Lines"), NULL
 * at the end: `audit show` has a form for each, and a unit test holds
 * the events the sources write to this list. */
extern const char *const audit_events[];

/* BLAKE2b-256 of line[0..len) (without its newline), as lower-case hex. */
void audit_line_hash(const char *line, size_t len, char out[AUDIT_HASH_HEX]);

/* Lower-case hex of b[0..n); out holds 2n+1. */
void audit_hex(const unsigned char *b, size_t n, char *out);

/* Exactly 2n lower-case hex digits into out[0..n): 0, else -EINVAL. */
int audit_unhex(const char *s, unsigned char *out, size_t n);

/* The epoch keys: k(e+1) = BLAKE2b-256 keyed with k(e) of a fixed text,
 * in place (the old key is gone). audit_key_at derives k(epoch) from k0. */
void audit_ratchet(unsigned char key[AUDIT_KEY_BYTES]);
void audit_key_at(const unsigned char k0[AUDIT_KEY_BYTES], uint64_t epoch,
		  unsigned char out[AUDIT_KEY_BYTES]);

/* The key's public name, in every seal line: 8 bytes of a hash keyed
 * with k0, in hex. */
void audit_kid(const unsigned char k0[AUDIT_KEY_BYTES], char out[AUDIT_KID_HEX]);

/* A seal's MAC: BLAKE2b-256 keyed with the epoch's key over
 * "appliance-audit-seal 1\n" kid "\n" epoch "\n" n "\n" prev "\n" t,
 * where n, prev and t are the seal line's own fields. */
void audit_seal_mac(const unsigned char key[AUDIT_KEY_BYTES], const char *kid, uint64_t epoch,
		    uint64_t n, const char *prev, const char *t, char out[AUDIT_HASH_HEX]);

/* The keyed digest of data (code, arguments) recorded instead of it. */
void audit_digest(const unsigned char key[AUDIT_KEY_BYTES], const void *data, size_t len,
		  char out[AUDIT_HASH_HEX]);

/* The UTC time ms (unix milliseconds) as YYYY-MM-DDTHH:MM:SS.mmmZ. */
void audit_time(int64_t ms, char out[AUDIT_TIME_LEN + 1]);

/* ---- the state directory ------------------------------------------------- */

/* The ID of the log at path (absolute). */
void audit_state_id(const char *path, char out[AUDIT_ID_HEX]);

/* The chain's head as the writers keep it: where the chain ends on disk,
 * and what the batch being written will make of it (pend_file 0: none).
 * A writer announces each batch before writing it, so that lines past the
 * head are taken for a dead writer's only when they are what it announced
 * (docs/audit.md). */
struct audit_head {
	uint64_t gen;			/* rises with every write of the head */
	uint64_t file;			/* the current file's index (1 for the first) */
	uint64_t n;			/* the last line's number; 0: nothing written yet */
	uint64_t bytes;			/* the current file's size after it */
	char hash[AUDIT_HASH_HEX];	/* the last line's hash (64 zeros for n 0) */
	uint64_t pend_file;		/* the file the announced batch ends in; 0: none */
	uint64_t pend_bytes;		/* that file's size after it */
	char pend_hash[AUDIT_HASH_HEX]; /* its last line's hash */
};

/* One slot's text, and its reading: "appliance-audit-head 1 GEN FILE N
 * BYTES HASH PFILE PBYTES PHASH CHECK\n", CHECK the first 8 bytes of
 * BLAKE2b-256 of what comes before it, zero-padded to AUDIT_HEAD_SLOT
 * bytes (PHASH is 64 zeros when PFILE is 0). */
void audit_head_encode(const struct audit_head *h, char slot[AUDIT_HEAD_SLOT]);
int audit_head_decode(const char *slot, size_t len, struct audit_head *h);

/* The head from a head file's bytes (both slots, or one): the valid slot
 * with the higher gen. 0, -ENOENT (len 0), -EINVAL (no valid slot). */
int audit_head_parse(const char *buf, size_t len, struct audit_head *h);

/* The head file fd: read it (as audit_head_parse), or write h into the
 * slot its gen picks (gen % 2), fdatasync'ed when sync. 0 or -errno. */
int audit_head_read_fd(int fd, struct audit_head *h);
int audit_head_write_fd(int fd, const struct audit_head *h, bool sync);

/* The sealing state: the key of the epoch to seal next, and where the
 * last seal was (its line's n, and when: unix ms; both 0 before the
 * first), so that every writer of the log seals on one schedule; and
 * the last seal line itself (the index of its file, the file's size
 * after it, its hash), so that a start can check that the log still
 * holds it: a log cut back past its last seal is refused, never sealed
 * on (docs/audit.md). A state written before those were kept has
 * last_file 0. */
struct audit_seal_state {
	char kid[AUDIT_KID_HEX];
	uint64_t epoch;
	unsigned char key[AUDIT_KEY_BYTES];
	uint64_t last_n;
	uint64_t last_ms;
	uint64_t last_file;
	uint64_t last_end;
	char last_hash[AUDIT_HASH_HEX];
};

/* A sealing state from its file's bytes (untrusted: a copy an auditor
 * gives verify), "appliance-audit-seal 2\nKID EPOCH KEY LAST_N LAST_MS
 * LAST_FILE LAST_END LAST_HASH\n", or version 1 without the last three:
 * 0, or -EINVAL. */
int audit_seal_parse(const char *buf, size_t len, struct audit_seal_state *st);

/* Read it from dfd/name (0600, ours, not a symlink): 0, -ENOENT, -EPERM
 * (wrong owner or mode), -EINVAL (malformed). */
int audit_seal_read(int dfd, const char *name, struct audit_seal_state *st, struct appl_err *err);

/* Replace it whole and durably (a temporary file, fsync, rename, fsync of
 * the directory). */
int audit_seal_write(int dfd, const char *name, const struct audit_seal_state *st,
		     struct appl_err *err);

/* Open (creating with 0700 what is missing, judged as the rollback state
 * is) the state directory's audit subdirectory: *fd is new. */
int audit_state_open(const char *state_dir, bool create, int *fd, struct appl_err *err);

/* The installation's digest key, STATE/audit.key, made on first use when
 * create. 0, -ENOENT (absent and not create), -EPERM, -EINVAL. */
int audit_install_key(const char *state_dir, bool create, unsigned char key[AUDIT_KEY_BYTES],
		      struct appl_err *err);

/* `appliance audit init`: a new k0 for the log at path, its sealing state
 * (epoch 0) written; -EEXIST when the log has one already. k0 is the
 * auditor's to keep; the caller prints it and wipes it. */
int audit_seal_init(const char *state_dir, const char *path, unsigned char k0[AUDIT_KEY_BYTES],
		    char kid[AUDIT_KID_HEX], struct appl_err *err);

#endif
