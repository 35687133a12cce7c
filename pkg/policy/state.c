/* state.c: the rollback state (see state.h). */
#define _GNU_SOURCE
#include "policy/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

#define STATE_FILE  "/policy.state"
#define LOCK_FILE   "/policy.lock"
#define STATE_MAGIC "appliance-policy-state 1"

int policy_state_dir_default(char *out, size_t len, struct appl_err *err)
{
	if (geteuid() != 0)
		return appl_user_dir(out, len, "XDG_STATE_HOME", ".local/state", "appliance",
				     "state directory", "--state-dir", err);
	if (appl_path_join(out, len, "/var/lib/appliance", "", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	return 0;
}

/* ---- the file's text ------------------------------------------------------ */

/* "key value\n" at *p; the value is everything up to the line end. */
static int field_take(const char **p, const char *end, const char *key, const char **val, size_t *n)
{
	size_t klen = strlen(key);
	const char *nl;

	if ((size_t)(end - *p) < klen + 1 || memcmp(*p, key, klen) != 0 || (*p)[klen] != ' ')
		return -1;
	*val = *p + klen + 1;
	nl = memchr(*val, '\n', (size_t)(end - *val));
	if (!nl)
		return -1;
	*n = (size_t)(nl - *val);
	*p = nl + 1;
	return 0;
}

static int dec_take(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int hex_take(const char *s, size_t n, const char *digits, size_t want)
{
	if (n != want)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!strchr(digits, s[i]) || s[i] == '\0')
			return -1;
	return 0;
}

static int state_parse(const char *buf, size_t len, struct policy_state *st)
{
	const char *p = buf, *end = buf + len, *v;
	size_t n, mlen = strlen(STATE_MAGIC);

	memset(st, 0, sizeof(*st));
	if (len < mlen + 1 || memcmp(p, STATE_MAGIC "\n", mlen + 1) != 0)
		return -1;
	p += mlen + 1;
	if (field_take(&p, end, "serial", &v, &n) || dec_take(v, n, &st->serial))
		return -1;
	if (field_take(&p, end, "sha256", &v, &n) || hex_take(v, n, "0123456789abcdef", 64) ||
	    sodium_hex2bin(st->hash, sizeof(st->hash), v, n, NULL, NULL, NULL) != 0)
		return -1;
	if (field_take(&p, end, "key", &v, &n) ||
	    hex_take(v, n, "0123456789ABCDEF", POLICY_KEYID_HEX - 1))
		return -1;
	memcpy(st->keyid_hex, v, n);
	if (field_take(&p, end, "accepted", &v, &n) ||
	    policy_sig_time_parse(v, n, &st->accepted_at) < 0 || p != end)
		return -1;
	st->present = true;
	return 0;
}

static int state_format(const struct policy_state *st, char *out, size_t len, size_t *written)
{
	char hex[2 * POLICY_HASH_BYTES + 1], when[POLICY_TIME_STR];
	int n;

	sodium_bin2hex(hex, sizeof(hex), st->hash, sizeof(st->hash));
	if (policy_sig_time_format(st->accepted_at, when, sizeof(when)) < 0)
		return -ERANGE;
	n = snprintf(out, len, STATE_MAGIC "\nserial %" PRIu64 "\nsha256 %s\nkey %s\naccepted %s\n",
		     st->serial, hex, st->keyid_hex, when);
	if (n < 0 || (size_t)n >= len)
		return -ENOSPC;
	*written = (size_t)n;
	return 0;
}

/* ---- reading -------------------------------------------------------------- */

/* Ours or root's, and nobody else may write: anyone who could would reset
 * the serial and reopen the door to an old policy. */
static int owner_check(const struct stat *st, const char *what, const char *path,
		       struct appl_err *err)
{
	if (st->st_uid != geteuid() && st->st_uid != 0)
		return appl_err_set(err, -EPERM, "%s %s: owned by uid %u", what, path,
				    (unsigned)st->st_uid);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return appl_err_set(err, -EPERM, "%s %s: writable by group or others", what, path);
	return 0;
}

static int state_dir_check(const char *dir, bool *exists, struct appl_err *err)
{
	struct stat st;

	*exists = false;
	if (lstat(dir, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return appl_err_errno(err, -errno, errno, "state directory %s", dir);
	}
	if (!S_ISDIR(st.st_mode))
		return appl_err_set(err, -EPERM,
				    "state directory %s: not a directory (or a symlink)", dir);
	*exists = true;
	return owner_check(&st, "state directory", dir, err);
}

static int state_file_load(const char *path, char **buf, size_t *len, struct appl_err *err)
{
	struct stat st;
	int fd, rc;

	*buf = NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 && errno == ELOOP)
		return appl_err_set(err, -EPERM, "state file %s: a symlink (refused)", path);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "state file %s", path);
	if (fstat(fd, &st) < 0)
		rc = appl_err_errno(err, -errno, errno, "state file %s", path);
	else if (!S_ISREG(st.st_mode))
		rc = appl_err_set(err, -EPERM, "state file %s: not a regular file", path);
	else
		rc = owner_check(&st, "state file", path, err);
	if (rc == 0)
		rc = appl_fd_read(fd, APPL_POLICY_STATE_FILE_MAX, path, buf, len, err);
	close(fd);
	return rc;
}

int policy_state_read(const char *dir, struct policy_state *st, struct appl_err *err)
{
	char path[PATH_MAX], *buf;
	size_t len = 0;
	bool exists;
	int rc;

	memset(st, 0, sizeof(*st));
	if ((rc = state_dir_check(dir, &exists, err)) < 0 || !exists)
		return rc;
	if (appl_path_join(path, sizeof(path), dir, STATE_FILE, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	if ((rc = state_file_load(path, &buf, &len, err)) < 0 || !buf)
		return rc;
	rc = state_parse(buf, len, st);
	free(buf);
	if (rc < 0) {
		memset(st, 0, sizeof(*st));
		return appl_err_set(err, -EINVAL, "state file %s: malformed", path);
	}
	return 0;
}

int policy_state_check(const struct policy_state *st, uint64_t serial,
		       const unsigned char hash[POLICY_HASH_BYTES], struct appl_err *err)
{
	if (!st->present || serial > st->serial)
		return 0;
	if (serial < st->serial)
		return appl_err_set(err, -ESTALE,
				    "rollback refused: serial %" PRIu64
				    " is lower than serial %" PRIu64 ", already accepted",
				    serial, st->serial);
	/* One serial, one document: otherwise a signer's two versions of a
	 * serial could be swapped for each other at will. */
	if (sodium_memcmp(hash, st->hash, POLICY_HASH_BYTES) != 0)
		return appl_err_set(err, -ESTALE,
				    "serial %" PRIu64 " was already accepted with different "
				    "content; a changed policy needs a higher serial",
				    serial);
	return 0;
}

/* ---- writing -------------------------------------------------------------- */

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int dir_sync(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, rc = 0;

	if (appl_path_join(dir, sizeof(dir), path, "", "") < 0)
		return -ENAMETOOLONG;
	slash = strrchr(dir, '/');
	if (!slash)
		memcpy(dir, ".", 2);
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int tmp_write(int fd, const void *data, size_t len, mode_t mode)
{
	int rc = fchmod(fd, mode) < 0 ? -errno : 0;

	if (rc == 0)
		rc = write_all(fd, data, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

int policy_file_replace(const char *path, const void *data, size_t len, mode_t mode,
			struct appl_err *err)
{
	char tmp[PATH_MAX];
	int fd, rc;

	if (appl_path_join(tmp, sizeof(tmp), path, ".tmp.XXXXXX", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", tmp);
	rc = tmp_write(fd, data, len, mode);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		return appl_err_errno(err, rc, -rc, "writing %s", path);
	}
	/* The rename is durable only once the directory is on disk too. */
	if ((rc = dir_sync(path)) < 0)
		return appl_err_errno(err, rc, -rc, "syncing the directory of %s", path);
	return 0;
}

static int lock_take(const char *dir, int *fd, struct appl_err *err)
{
	char path[PATH_MAX];

	if (appl_path_join(path, sizeof(path), dir, LOCK_FILE, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	*fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	if (*fd < 0)
		return appl_err_errno(err, -errno, errno, "state lock %s", path);
	while (flock(*fd, LOCK_EX) < 0) {
		int e = errno;
		if (e == EINTR)
			continue;
		close(*fd);
		return appl_err_errno(err, -e, e, "state lock %s", path);
	}
	return 0;
}

static int state_write(const char *dir, const struct policy_state *st, struct appl_err *err)
{
	char path[PATH_MAX], text[APPL_POLICY_STATE_FILE_MAX];
	size_t len;
	int rc;

	if (appl_path_join(path, sizeof(path), dir, STATE_FILE, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	if ((rc = state_format(st, text, sizeof(text), &len)) < 0)
		return appl_err_set(err, rc, "state file %s: cannot format the state", path);
	return policy_file_replace(path, text, len, 0600, err);
}

int policy_state_commit(const char *dir, uint64_t serial,
			const unsigned char hash[POLICY_HASH_BYTES], const char *keyid_hex,
			int64_t now, struct policy_state *prev, struct appl_err *err)
{
	struct policy_state cur, next = {.present = true, .serial = serial, .accepted_at = now};
	int lock = -1, rc;

	if (strlen(keyid_hex) != POLICY_KEYID_HEX - 1)
		return appl_err_set(err, -EINVAL, "state: bad key id");
	memcpy(next.hash, hash, POLICY_HASH_BYTES);
	memcpy(next.keyid_hex, keyid_hex, POLICY_KEYID_HEX);
	if ((rc = appl_private_dir(dir, "state directory", err)) < 0 ||
	    (rc = lock_take(dir, &lock, err)) < 0)
		return rc;
	/* Read again under the lock: another appliance may have gone ahead. */
	if ((rc = policy_state_read(dir, &cur, err)) == 0 &&
	    (rc = policy_state_check(&cur, serial, hash, err)) == 0 &&
	    (!cur.present || serial > cur.serial))
		rc = state_write(dir, &next, err);
	close(lock);
	if (prev)
		*prev = cur;
	return rc;
}
