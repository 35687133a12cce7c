/* format.c: hashes, seals and the state files of the audit log (see
 * format.h). */
#define _GNU_SOURCE
#include "audit/format.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"

#define RATCHET_TEXT "appliance-audit-ratchet 1"
#define KID_TEXT     "appliance-audit-kid 1"
#define SEAL_TEXT    "appliance-audit-seal 1\n"
#define HEAD_MAGIC   "appliance-audit-head 1 "
#define SEAL_MAGIC   "appliance-audit-seal 2\n"
#define SEAL_MAGIC_1 "appliance-audit-seal 1\n" /* read, never written */
#define HEAD_CHECK   8
#define INSTALL_KEY  "audit.key"

const char *const audit_events[] = {
	"log.open", "start",	"stop",	   "run.start",	    "run.refused", "call",
	"call.end", "run.file", "run.end", "auth",	    "approval",	   "torn",
	"resumed",  "seal",	"reload",  "session.start", "session.end", NULL,
};

void audit_hex(const unsigned char *b, size_t n, char *out)
{
	sodium_bin2hex(out, 2 * n + 1, b, n);
}

int audit_unhex(const char *s, unsigned char *out, size_t n)
{
	size_t got = 0;

	if (strlen(s) != 2 * n || strspn(s, "0123456789abcdef") != 2 * n)
		return -EINVAL;
	if (sodium_hex2bin(out, n, s, 2 * n, NULL, &got, NULL) != 0 || got != n)
		return -EINVAL;
	return 0;
}

void audit_line_hash(const char *line, size_t len, char out[AUDIT_HASH_HEX])
{
	unsigned char h[AUDIT_HASH_BYTES];

	crypto_generichash(h, sizeof(h), (const unsigned char *)line, len, NULL, 0);
	audit_hex(h, sizeof(h), out);
}

void audit_ratchet(unsigned char key[AUDIT_KEY_BYTES])
{
	unsigned char next[AUDIT_KEY_BYTES];

	crypto_generichash(next, sizeof(next), (const unsigned char *)RATCHET_TEXT,
			   strlen(RATCHET_TEXT), key, AUDIT_KEY_BYTES);
	memcpy(key, next, AUDIT_KEY_BYTES);
	sodium_memzero(next, sizeof(next));
}

void audit_key_at(const unsigned char k0[AUDIT_KEY_BYTES], uint64_t epoch,
		  unsigned char out[AUDIT_KEY_BYTES])
{
	memcpy(out, k0, AUDIT_KEY_BYTES);
	for (uint64_t e = 0; e < epoch; e++)
		audit_ratchet(out);
}

void audit_kid(const unsigned char k0[AUDIT_KEY_BYTES], char out[AUDIT_KID_HEX])
{
	unsigned char h[AUDIT_HASH_BYTES];

	crypto_generichash(h, sizeof(h), (const unsigned char *)KID_TEXT, strlen(KID_TEXT), k0,
			   AUDIT_KEY_BYTES);
	audit_hex(h, AUDIT_KID_BYTES, out);
}

void audit_seal_mac(const unsigned char key[AUDIT_KEY_BYTES], const char *kid, uint64_t epoch,
		    uint64_t n, const char *prev, const char *t, char out[AUDIT_HASH_HEX])
{
	crypto_generichash_state st;
	unsigned char h[AUDIT_HASH_BYTES];
	char num[64];

	crypto_generichash_init(&st, key, AUDIT_KEY_BYTES, sizeof(h));
	crypto_generichash_update(&st, (const unsigned char *)SEAL_TEXT, strlen(SEAL_TEXT));
	snprintf(num, sizeof(num), "%s\n%" PRIu64 "\n%" PRIu64 "\n", kid, epoch, n);
	crypto_generichash_update(&st, (const unsigned char *)num, strlen(num));
	crypto_generichash_update(&st, (const unsigned char *)prev, strlen(prev));
	crypto_generichash_update(&st, (const unsigned char *)"\n", 1);
	crypto_generichash_update(&st, (const unsigned char *)t, strlen(t));
	crypto_generichash_final(&st, h, sizeof(h));
	audit_hex(h, sizeof(h), out);
}

void audit_digest(const unsigned char key[AUDIT_KEY_BYTES], const void *data, size_t len,
		  char out[AUDIT_HASH_HEX])
{
	unsigned char h[AUDIT_HASH_BYTES];

	crypto_generichash(h, sizeof(h), data, len, key, AUDIT_KEY_BYTES);
	audit_hex(h, sizeof(h), out);
}

void audit_time(int64_t ms, char out[AUDIT_TIME_LEN + 1])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char buf[64];

	if (ms < 0)
		s = 0, ms = 0;
	gmtime_r(&s, &tm);
	snprintf(buf, sizeof(buf), "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ",
		 (unsigned)(tm.tm_year + 1900) % 10000u, (unsigned)(tm.tm_mon + 1) % 100u,
		 (unsigned)tm.tm_mday % 100u, (unsigned)tm.tm_hour % 100u,
		 (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u, (unsigned)(ms % 1000));
	memcpy(out, buf, AUDIT_TIME_LEN);
	out[AUDIT_TIME_LEN] = '\0';
}

void audit_state_id(const char *path, char out[AUDIT_ID_HEX])
{
	unsigned char h[AUDIT_HASH_BYTES];

	crypto_generichash(h, sizeof(h), (const unsigned char *)path, strlen(path), NULL, 0);
	audit_hex(h, AUDIT_ID_BYTES, out);
}

/* ---- the head -------------------------------------------------------------- */

static void head_check(const char *text, size_t len, char out[2 * HEAD_CHECK + 1])
{
	unsigned char h[AUDIT_HASH_BYTES];

	crypto_generichash(h, sizeof(h), (const unsigned char *)text, len, NULL, 0);
	audit_hex(h, HEAD_CHECK, out);
}

void audit_head_encode(const struct audit_head *h, char slot[AUDIT_HEAD_SLOT])
{
	char check[2 * HEAD_CHECK + 1], zero[AUDIT_HASH_HEX];
	int n;

	memset(zero, '0', AUDIT_HASH_HEX - 1);
	zero[AUDIT_HASH_HEX - 1] = '\0';
	memset(slot, 0, AUDIT_HEAD_SLOT);
	n = snprintf(slot, AUDIT_HEAD_SLOT,
		     HEAD_MAGIC "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %s %" PRIu64
				" %" PRIu64 " %s ",
		     h->gen, h->file, h->n, h->bytes, h->hash, h->pend_file,
		     h->pend_file ? h->pend_bytes : 0, h->pend_file ? h->pend_hash : zero);
	head_check(slot, (size_t)n, check);
	snprintf(slot + n, AUDIT_HEAD_SLOT - (size_t)n, "%s\n", check);
}

static int u64_take(const char **p, uint64_t *out)
{
	char *end;

	if (**p < '0' || **p > '9' || (**p == '0' && (*p)[1] != ' '))
		return -1;
	errno = 0;
	*out = strtoull(*p, &end, 10);
	if (errno || *end != ' ')
		return -1;
	*p = end + 1;
	return 0;
}

static int hash_take(const char **p, char out[AUDIT_HASH_HEX])
{
	if (strspn(*p, "0123456789abcdef") != AUDIT_HASH_HEX - 1 || (*p)[AUDIT_HASH_HEX - 1] != ' ')
		return -1;
	memcpy(out, *p, AUDIT_HASH_HEX - 1);
	out[AUDIT_HASH_HEX - 1] = '\0';
	*p += AUDIT_HASH_HEX;
	return 0;
}

int audit_head_decode(const char *slot, size_t len, struct audit_head *h)
{
	char text[AUDIT_HEAD_SLOT + 1], check[2 * HEAD_CHECK + 1];
	const char *p, *nl;
	size_t body;

	if (len > AUDIT_HEAD_SLOT)
		len = AUDIT_HEAD_SLOT;
	memcpy(text, slot, len);
	text[len] = '\0';
	nl = memchr(text, '\n', len);
	if (!nl || strncmp(text, HEAD_MAGIC, strlen(HEAD_MAGIC)) != 0)
		return -EINVAL;
	p = text + strlen(HEAD_MAGIC);
	if (u64_take(&p, &h->gen) < 0 || u64_take(&p, &h->file) < 0 || u64_take(&p, &h->n) < 0 ||
	    u64_take(&p, &h->bytes) < 0 || hash_take(&p, h->hash) < 0 ||
	    u64_take(&p, &h->pend_file) < 0 || u64_take(&p, &h->pend_bytes) < 0 ||
	    hash_take(&p, h->pend_hash) < 0)
		return -EINVAL;
	body = (size_t)(p - text);
	if (nl - p != 2 * HEAD_CHECK)
		return -EINVAL;
	head_check(text, body, check);
	if (memcmp(check, p, 2 * HEAD_CHECK) != 0)
		return -EINVAL;
	return 0;
}

int audit_head_parse(const char *buf, size_t len, struct audit_head *h)
{
	struct audit_head s[2];
	bool ok[2] = {false, false};

	if (len == 0)
		return -ENOENT;
	for (int i = 0; i < 2; i++) {
		size_t off = (size_t)i * AUDIT_HEAD_SLOT;

		if (len > off)
			ok[i] = audit_head_decode(buf + off, len - off, &s[i]) == 0;
	}
	if (!ok[0] && !ok[1])
		return -EINVAL;
	*h = (ok[0] && (!ok[1] || s[0].gen > s[1].gen)) ? s[0] : s[1];
	return 0;
}

int audit_head_read_fd(int fd, struct audit_head *h)
{
	char buf[2 * AUDIT_HEAD_SLOT];
	ssize_t got;

	do
		got = pread(fd, buf, sizeof(buf), 0);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	return audit_head_parse(buf, (size_t)got, h);
}

int audit_head_write_fd(int fd, const struct audit_head *h, bool sync)
{
	char slot[AUDIT_HEAD_SLOT];
	off_t off = (off_t)(h->gen % 2) * AUDIT_HEAD_SLOT;
	ssize_t put;

	audit_head_encode(h, slot);
	do
		put = pwrite(fd, slot, sizeof(slot), off);
	while (put < 0 && errno == EINTR);
	if (put < 0)
		return -errno;
	if (put != (ssize_t)sizeof(slot))
		return -EIO;
	if (sync && fdatasync(fd) < 0)
		return -errno;
	return 0;
}

/* ---- the sealing state ------------------------------------------------------ */

/* A private file of ours in dfd: not a symlink, owned by us, 0600. */
static int private_open(int dfd, const char *name, int *fd, struct appl_err *err)
{
	struct stat st;

	*fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return errno == ENOENT ? -ENOENT : appl_err_errno(err, -errno, errno, "%s", name);
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(*fd);
		*fd = -1;
		return appl_err_set(err, -EPERM,
				    "%s: must be a regular file of uid %u with mode 0600", name,
				    (unsigned)geteuid());
	}
	return 0;
}

/* Version 1 had no place of the last seal; it is read, and written
 * back as version 2 with the next seal. */
int audit_seal_parse(const char *buf, size_t len, struct audit_seal_state *s)
{
	char text[AUDIT_SEAL_FILE_MAX], kid[AUDIT_KID_HEX], key[AUDIT_HASH_HEX],
		hash[AUDIT_HASH_HEX];
	const char *p = text + strlen(SEAL_MAGIC);
	bool v2;
	int end = -1, rc = -EINVAL;

	_Static_assert(sizeof(SEAL_MAGIC) == sizeof(SEAL_MAGIC_1), "one magic length");
	if (len >= sizeof(text) || memchr(buf, '\0', len))
		return -EINVAL;
	memcpy(text, buf, len);
	text[len] = '\0';
	memset(s, 0, sizeof(*s));
	memset(hash, '0', AUDIT_HASH_HEX - 1);
	hash[AUDIT_HASH_HEX - 1] = '\0';
	v2 = strncmp(text, SEAL_MAGIC, strlen(SEAL_MAGIC)) == 0;
	if (v2 &&
	    sscanf(p,
		   "%16s %" SCNu64 " %64s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %64s%n",
		   kid, &s->epoch, key, &s->last_n, &s->last_ms, &s->last_file, &s->last_end, hash,
		   &end) != 8)
		end = -1;
	else if (!v2 && strncmp(text, SEAL_MAGIC_1, strlen(SEAL_MAGIC_1)) == 0 &&
		 sscanf(p, "%16s %" SCNu64 " %64s %" SCNu64 " %" SCNu64 "%n", kid, &s->epoch, key,
			&s->last_n, &s->last_ms, &end) != 5)
		end = -1;
	if (end > 0 && strcmp(p + end, "\n") == 0 && strlen(kid) == AUDIT_KID_HEX - 1 &&
	    strspn(kid, "0123456789abcdef") == AUDIT_KID_HEX - 1 &&
	    strlen(hash) == AUDIT_HASH_HEX - 1 &&
	    strspn(hash, "0123456789abcdef") == AUDIT_HASH_HEX - 1 &&
	    audit_unhex(key, s->key, AUDIT_KEY_BYTES) == 0) {
		memcpy(s->kid, kid, sizeof(kid));
		memcpy(s->last_hash, hash, sizeof(hash));
		rc = 0;
	}
	sodium_memzero(text, sizeof(text));
	sodium_memzero(key, sizeof(key));
	if (rc < 0)
		sodium_memzero(s, sizeof(*s));
	return rc;
}

int audit_seal_read(int dfd, const char *name, struct audit_seal_state *s, struct appl_err *err)
{
	char buf[AUDIT_SEAL_FILE_MAX];
	ssize_t got;
	int fd, rc;

	if ((rc = private_open(dfd, name, &fd, err)) < 0)
		return rc;
	got = read(fd, buf, sizeof(buf));
	close(fd);
	if (got < 0)
		return appl_err_errno(err, -errno, errno, "reading %s", name);
	rc = audit_seal_parse(buf, (size_t)got, s);
	sodium_memzero(buf, sizeof(buf));
	if (rc < 0)
		return appl_err_set(err, rc, "%s: not a sealing state", name);
	return 0;
}

int audit_seal_write(int dfd, const char *name, const struct audit_seal_state *s,
		     struct appl_err *err)
{
	char tmp[64], buf[AUDIT_SEAL_FILE_MAX], key[AUDIT_HASH_HEX];
	int fd, rc = 0, n;

	snprintf(tmp, sizeof(tmp), ".%.40s.new", name);
	audit_hex(s->key, AUDIT_KEY_BYTES, key);
	n = snprintf(buf, sizeof(buf),
		     SEAL_MAGIC "%s %" PRIu64 " %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
				" %s\n",
		     s->kid, s->epoch, key, s->last_n, s->last_ms, s->last_file, s->last_end,
		     s->last_hash);
	if (unlinkat(dfd, tmp, 0) < 0 && errno != ENOENT)
		rc = -errno;
	fd = rc ? -1 : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && rc == 0)
		rc = -errno;
	if (rc == 0) {
		rc = appl_fd_write_all(fd, buf, (size_t)n);
		if (rc == 0 && fsync(fd) < 0)
			rc = -errno;
		if (close(fd) < 0 && rc == 0)
			rc = -errno;
	}
	if (rc == 0 && renameat(dfd, tmp, dfd, name) < 0)
		rc = -errno;
	if (rc == 0 && fsync(dfd) < 0)
		rc = -errno;
	sodium_memzero(buf, sizeof(buf));
	sodium_memzero(key, sizeof(key));
	if (rc < 0) {
		unlinkat(dfd, tmp, 0);
		return appl_err_errno(err, rc, -rc, "writing the sealing state %s", name);
	}
	return 0;
}

int audit_state_open(const char *state_dir, bool create, int *fd, struct appl_err *err)
{
	char dir[4096];

	if (appl_path_join(dir, sizeof(dir), state_dir, "/audit", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	return appl_dir_open_strict(dir, geteuid(), create, "audit state directory", fd, err);
}

int audit_install_key(const char *state_dir, bool create, unsigned char key[AUDIT_KEY_BYTES],
		      struct appl_err *err)
{
	char hex[AUDIT_HASH_HEX + 1];
	int dfd, fd, rc;
	ssize_t got;

	if ((rc = appl_dir_open_strict(state_dir, geteuid(), create, "state directory", &dfd,
				       err)) < 0)
		return rc;
	rc = private_open(dfd, INSTALL_KEY, &fd, err);
	if (rc == -ENOENT && create) {
		randombytes_buf(key, AUDIT_KEY_BYTES);
		audit_hex(key, AUDIT_KEY_BYTES, hex);
		hex[AUDIT_HASH_HEX - 1] = '\n';
		fd = openat(dfd, INSTALL_KEY, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    0600);
		rc = fd < 0 ? -errno : appl_fd_write_all(fd, hex, AUDIT_HASH_HEX);
		if (rc == 0 && fsync(fd) < 0)
			rc = -errno;
		if (fd >= 0)
			close(fd);
		if (rc == -EEXIST) /* another appliance made it first: read theirs */
			rc = private_open(dfd, INSTALL_KEY, &fd, err);
		else {
			if (rc == 0 && fsync(dfd) < 0)
				rc = -errno;
			close(dfd);
			sodium_memzero(hex, sizeof(hex));
			return rc < 0 ? appl_err_errno(err, rc, -rc, "%s/" INSTALL_KEY, state_dir)
				      : 0;
		}
	}
	close(dfd);
	if (rc < 0)
		return rc == -ENOENT
			       ? appl_err_set(err, rc, "%s/" INSTALL_KEY ": missing", state_dir)
			       : rc;
	got = read(fd, hex, sizeof(hex));
	close(fd);
	rc = -EINVAL;
	if (got == AUDIT_HASH_HEX && hex[AUDIT_HASH_HEX - 1] == '\n') {
		hex[AUDIT_HASH_HEX - 1] = '\0';
		rc = audit_unhex(hex, key, AUDIT_KEY_BYTES);
	}
	sodium_memzero(hex, sizeof(hex));
	return rc < 0 ? appl_err_set(err, rc, "%s/" INSTALL_KEY ": malformed", state_dir) : 0;
}

int audit_seal_init(const char *state_dir, const char *path, unsigned char k0[AUDIT_KEY_BYTES],
		    char kid[AUDIT_KID_HEX], struct appl_err *err)
{
	struct audit_seal_state s;
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	int dfd, fd, rc;

	if (path[0] != '/')
		return appl_err_set(err, -EINVAL, "%s: the log's path must be absolute", path);
	if ((rc = audit_state_open(state_dir, true, &dfd, err)) < 0)
		return rc;
	audit_state_id(path, id);
	snprintf(name, sizeof(name), "%s.seal", id);
	rc = private_open(dfd, name, &fd, err);
	if (rc == 0) {
		close(fd);
		close(dfd);
		return appl_err_set(err, -EEXIST,
				    "%s: has a sealing key already (%s/audit/%s); it is never "
				    "replaced",
				    path, state_dir, name);
	}
	if (rc != -ENOENT) {
		close(dfd);
		return rc;
	}
	randombytes_buf(k0, AUDIT_KEY_BYTES);
	audit_kid(k0, kid);
	memcpy(s.kid, kid, AUDIT_KID_HEX);
	s.epoch = s.last_n = s.last_ms = s.last_file = s.last_end = 0;
	memset(s.last_hash, '0', AUDIT_HASH_HEX - 1);
	s.last_hash[AUDIT_HASH_HEX - 1] = '\0';
	memcpy(s.key, k0, AUDIT_KEY_BYTES);
	rc = audit_seal_write(dfd, name, &s, err);
	sodium_memzero(&s, sizeof(s));
	close(dfd);
	return rc;
}
