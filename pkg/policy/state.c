/* state.c: the rollback floor (see state.h). */
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
#include "policy/policy.h"

#define STATE_FILE  "policy.state"
#define STATE_TMP   ".policy.state.new"
#define LOCK_FILE   "policy.lock"
#define MAGIC_V1    "appliance-policy-state 1\n"
#define MAGIC_V2    "appliance-policy-state 2\n"
#define DEFAULT_DEP "default" /* the deployment a format-1 file speaks of */

int policy_state_dir_default(char *out, size_t len, struct appl_err *err)
{
	if (geteuid() != 0)
		return appl_user_dir(out, len, "XDG_STATE_HOME", ".local/state", "appliance",
				     "state directory", "--state-dir", err);
	if (appl_path_join(out, len, POLICY_STATE_DIR, "", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	return 0;
}

/* ---- the file's text ------------------------------------------------------ */

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

static bool hex_is(const char *s, size_t n, const char *digits, size_t want)
{
	if (n != want)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\0' || !strchr(digits, s[i]))
			return false;
	return true;
}

/* The next field of a line: the bytes up to sep, which must come before
 * end; *p moves past sep. */
static int field_next(const char **p, const char *end, char sep, const char **f, size_t *n)
{
	const char *at = memchr(*p, sep, (size_t)(end - *p));

	if (!at)
		return -1;
	*f = *p;
	*n = (size_t)(at - *p);
	*p = at + 1;
	return 0;
}

/* Each value of an entry, from its text. */
static int serial_take(const char *v, size_t n, struct policy_state *st)
{
	return dec_take(v, n, &st->serial);
}

static int hash_take(const char *v, size_t n, struct policy_state *st)
{
	if (!hex_is(v, n, "0123456789abcdef", 2 * POLICY_HASH_BYTES) ||
	    sodium_hex2bin(st->hash, sizeof(st->hash), v, n, NULL, NULL, NULL) != 0)
		return -1;
	return 0;
}

static int key_take(const char *v, size_t n, struct policy_state *st)
{
	if (!hex_is(v, n, "0123456789ABCDEF", POLICY_KEYID_HEX - 1))
		return -1;
	memcpy(st->keyid_hex, v, n);
	st->keyid_hex[n] = '\0';
	return 0;
}

static int time_take(const char *v, size_t n, struct policy_state *st)
{
	return policy_sig_time_parse(v, n, &st->accepted_at) < 0 ? -1 : 0;
}

typedef int (*value_take_fn)(const char *v, size_t n, struct policy_state *st);

static const struct {
	const char *v1_key; /* its name in a format-1 file */
	value_take_fn take;
} entry_fields[] = {
	{"serial", serial_take},
	{"sha256", hash_take},
	{"key", key_take},
	{"accepted", time_take},
};

#define ENTRY_FIELDS (sizeof(entry_fields) / sizeof(entry_fields[0]))

/* The values after a deployment's name in a format-2 line, each followed
 * by a space, the last by the line's end. */
static int entry_values(const char **p, const char *end, struct policy_state *st)
{
	const char *v;
	size_t n;

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < ENTRY_FIELDS; i++)
		if (field_next(p, end, i + 1 < ENTRY_FIELDS ? ' ' : '\n', &v, &n) ||
		    entry_fields[i].take(v, n, st) < 0)
			return -1;
	st->present = true;
	return 0;
}

/* A format-1 file after its magic: "KEY VALUE" lines in the fixed order. */
static int entry_values_v1(const char *p, const char *end, struct policy_state *st)
{
	const char *v;
	size_t n, k;

	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < ENTRY_FIELDS; i++) {
		k = strlen(entry_fields[i].v1_key);
		if ((size_t)(end - p) < k + 1 || memcmp(p, entry_fields[i].v1_key, k) != 0 ||
		    p[k] != ' ')
			return -1;
		p += k + 1;
		if (field_next(&p, end, '\n', &v, &n) || entry_fields[i].take(v, n, st) < 0)
			return -1;
	}
	st->present = true;
	return p == end ? 0 : -1;
}

/* Bytewise order of two names (a prefix first). */
static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : an < bn ? -1 : an > bn ? 1 : 0;
}

static int entry_format(const char *name, const struct policy_state *st, char *out, size_t len)
{
	char hex[2 * POLICY_HASH_BYTES + 1], when[POLICY_TIME_STR];
	int n;

	sodium_bin2hex(hex, sizeof(hex), st->hash, sizeof(st->hash));
	if (policy_sig_time_format(st->accepted_at, when, sizeof(when)) < 0)
		return -ERANGE;
	n = snprintf(out, len, "%s %" PRIu64 " %s %s %s\n", name, st->serial, hex, st->keyid_hex,
		     when);
	return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

/* Where one deployment stands in a format-2 text: its line is [at, end)
 * (at == end: not there, and at is where it would go). */
struct floor_scan {
	const char *deployment;
	size_t lines, at, end;
	struct policy_state found;
};

/* Check every line of a format-2 text (names in strictly increasing order,
 * so each appears once) and find fs->deployment. -1 when malformed. */
static int floor_scan(const char *buf, size_t len, struct floor_scan *fs)
{
	const char *p = buf + strlen(MAGIC_V2), *end = buf + len, *name, *prev = NULL;
	size_t dlen = strlen(fs->deployment), n, prev_n = 0;
	struct policy_state st;

	memset(&fs->found, 0, sizeof(fs->found));
	fs->lines = 0;
	fs->at = fs->end = len;
	while (p < end) {
		size_t line_at = (size_t)(p - buf);
		int cmp;

		if (++fs->lines > APPL_POLICY_DEPLOYMENTS_MAX ||
		    field_next(&p, end, ' ', &name, &n) || !policy_deployment_valid(name, n) ||
		    entry_values(&p, end, &st) < 0 ||
		    (prev && name_cmp(prev, prev_n, name, n) >= 0))
			return -1;
		prev = name;
		prev_n = n;
		cmp = name_cmp(name, n, fs->deployment, dlen);
		if (cmp == 0) {
			fs->found = st;
			fs->at = line_at;
			fs->end = (size_t)(p - buf);
		} else if (cmp > 0 && fs->at == len) {
			fs->at = fs->end = line_at; /* the first name after ours */
		}
	}
	return 0;
}

/* A format-1 file as the equivalent format-2 text, new in *out. */
static int floor_from_v1(const char *buf, size_t len, char **out, size_t *out_len)
{
	size_t m = strlen(MAGIC_V2);
	struct policy_state st;
	int w;

	if (entry_values_v1(buf + strlen(MAGIC_V1), buf + len, &st) < 0)
		return -1;
	if (!(*out = malloc(m + APPL_POLICY_FLOOR_LINE_MAX + 1)))
		return -ENOMEM;
	memcpy(*out, MAGIC_V2, m);
	w = entry_format(DEFAULT_DEP, &st, *out + m, APPL_POLICY_FLOOR_LINE_MAX + 1);
	if (w < 0) {
		free(*out);
		*out = NULL;
		return -1;
	}
	*out_len = m + (size_t)w;
	return 0;
}

/* The floor's text in format 2 (a format-1 file converted), new in *text:
 * NULL and 0 when there is no file. -EINVAL when malformed. */
static int floor_normalise(char *buf, size_t len, char **text, size_t *text_len)
{
	*text = NULL;
	*text_len = 0;
	if (!buf)
		return 0;
	if (len >= strlen(MAGIC_V2) && memcmp(buf, MAGIC_V2, strlen(MAGIC_V2)) == 0) {
		*text = buf;
		*text_len = len;
		return 0;
	}
	if (len >= strlen(MAGIC_V1) && memcmp(buf, MAGIC_V1, strlen(MAGIC_V1)) == 0) {
		int rc = floor_from_v1(buf, len, text, text_len);
		free(buf);
		return rc == -ENOMEM ? -ENOMEM : rc < 0 ? -EINVAL : 0;
	}
	free(buf);
	return -EINVAL;
}

/* ---- reading -------------------------------------------------------------- */

/* Ours or root's, and nobody else may write: anyone who could would reset
 * the floor and reopen the door to an old policy. */
static int file_check(int fd, const char *dir, struct appl_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return appl_err_errno(err, -errno, errno, "state file %s/" STATE_FILE, dir);
	if (!S_ISREG(st.st_mode))
		return appl_err_set(err, -EPERM, "state file %s/" STATE_FILE ": not a regular file",
				    dir);
	if (st.st_uid != geteuid() && st.st_uid != 0)
		return appl_err_set(err, -EPERM, "state file %s/" STATE_FILE ": owned by uid %u",
				    dir, (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return appl_err_set(err, -EPERM,
				    "state file %s/" STATE_FILE ": writable by group or others",
				    dir);
	return 0;
}

/* The floor's text in format 2 from the directory dfd, new in *text (NULL
 * when there is no file yet). */
static int floor_load(int dfd, const char *dir, char **text, size_t *len, struct appl_err *err)
{
	char *buf = NULL;
	size_t n = 0;
	int fd, rc;

	*text = NULL;
	*len = 0;
	fd = openat(dfd, STATE_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0 && errno == ELOOP)
		return appl_err_set(err, -EPERM,
				    "state file %s/" STATE_FILE ": a symlink (refused)", dir);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "state file %s/" STATE_FILE, dir);
	rc = file_check(fd, dir, err);
	if (rc == 0)
		rc = appl_fd_read(fd, APPL_POLICY_STATE_FILE_MAX, "state file", &buf, &n, err);
	close(fd);
	if (rc < 0)
		return rc;
	rc = floor_normalise(buf, n, text, len);
	if (rc == -ENOMEM)
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (rc < 0)
		return appl_err_set(err, -EINVAL, "state file %s/" STATE_FILE ": malformed", dir);
	return 0;
}

/* Find deployment in text (NULL: no file). */
static int floor_find(const char *text, size_t len, const char *dir, struct floor_scan *fs,
		      struct appl_err *err)
{
	if (!policy_deployment_valid(fs->deployment, strlen(fs->deployment)))
		return appl_err_set(err, -EINVAL, "state: bad deployment name");
	if (!text) {
		memset(&fs->found, 0, sizeof(fs->found));
		fs->lines = 0;
		fs->at = fs->end = strlen(MAGIC_V2);
		return 0;
	}
	if (floor_scan(text, len, fs) < 0)
		return appl_err_set(err, -EINVAL, "state file %s/" STATE_FILE ": malformed", dir);
	return 0;
}

static int dir_open(const char *dir, bool create, int *dfd, struct appl_err *err)
{
	return appl_dir_open_strict(dir, geteuid(), create, "state directory", dfd, err);
}

int policy_state_read(const char *dir, const char *deployment, struct policy_state *st,
		      struct appl_err *err)
{
	struct floor_scan fs = {.deployment = deployment};
	char *text = NULL;
	size_t len = 0;
	int dfd, rc;

	memset(st, 0, sizeof(*st));
	if ((rc = dir_open(dir, false, &dfd, err)) == -ENOENT)
		return 0; /* nothing was ever accepted there */
	if (rc < 0)
		return rc;
	rc = floor_load(dfd, dir, &text, &len, err);
	close(dfd);
	if (rc == 0 && (rc = floor_find(text, len, dir, &fs, err)) == 0)
		*st = fs.found;
	free(text);
	return rc;
}

int policy_state_check(const struct policy_state *st, uint64_t serial,
		       const unsigned char hash[POLICY_HASH_BYTES], struct appl_err *err)
{
	if (!st->present || serial > st->serial)
		return 0;
	if (serial < st->serial)
		return appl_err_set(err, -ESTALE,
				    "rollback refused: serial %" PRIu64
				    " is lower than serial %" PRIu64
				    ", already accepted; sign the policy again with a higher "
				    "serial",
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

static int tmp_write(int fd, const void *data, size_t len, mode_t mode)
{
	int rc = fchmod(fd, mode) < 0 ? -errno : 0;

	if (rc == 0)
		rc = appl_fd_write_all(fd, data, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* The directory of path, for fsync after a rename in it. */
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

/* A temporary file beside path, written and synced, then renamed over path
 * or (replace false) linked to it, which fails when path exists. */
static int file_put(const char *path, const void *data, size_t len, mode_t mode, bool replace,
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
	if (rc == 0 && (replace ? rename(tmp, path) : link(tmp, path)) < 0)
		rc = -errno;
	if (rc < 0 || !replace)
		unlink(tmp);
	if (rc == -EEXIST)
		return appl_err_set(err, rc, "%s exists", path);
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "writing %s", path);
	/* The rename is durable only once the directory is on disk too. */
	if ((rc = dir_sync(path)) < 0)
		return appl_err_errno(err, rc, -rc, "syncing the directory of %s", path);
	return 0;
}

int policy_file_replace(const char *path, const void *data, size_t len, mode_t mode,
			struct appl_err *err)
{
	return file_put(path, data, len, mode, true, err);
}

int policy_file_create(const char *path, const void *data, size_t len, mode_t mode,
		       struct appl_err *err)
{
	return file_put(path, data, len, mode, false, err);
}

/* Replace the floor in dfd, whose lock the caller holds (so the temporary
 * name is ours alone; one a crash left behind is removed first). */
static int floor_store(int dfd, const char *dir, const char *a, size_t alen, const char *b,
		       size_t blen, const char *c, size_t clen, struct appl_err *err)
{
	int fd, rc;

	if (unlinkat(dfd, STATE_TMP, 0) < 0 && errno != ENOENT)
		return appl_err_errno(err, -errno, errno, "state file %s/" STATE_TMP, dir);
	fd = openat(dfd, STATE_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "state file %s/" STATE_TMP, dir);
	rc = appl_fd_write_all(fd, a, alen);
	if (rc == 0)
		rc = appl_fd_write_all(fd, b, blen);
	if (rc == 0)
		rc = tmp_write(fd, c, clen, 0600);
	else
		close(fd);
	if (rc == 0 && renameat(dfd, STATE_TMP, dfd, STATE_FILE) < 0)
		rc = -errno;
	if (rc == 0 && fsync(dfd) < 0)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dfd, STATE_TMP, 0);
		return appl_err_errno(err, rc, -rc, "writing the state file in %s", dir);
	}
	return 0;
}

static int lock_take(int dfd, const char *dir, int *fd, struct appl_err *err)
{
	*fd = openat(dfd, LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0600);
	if (*fd < 0)
		return appl_err_errno(err, -errno, errno, "state lock %s/" LOCK_FILE, dir);
	while (flock(*fd, LOCK_EX) < 0) {
		int e = errno;
		if (e == EINTR)
			continue;
		close(*fd);
		return appl_err_errno(err, -e, e, "state lock %s/" LOCK_FILE, dir);
	}
	return 0;
}

/* Write text with fs's line replaced by (or, when absent, the new line
 * inserted at its place). */
static int floor_update(int dfd, const char *dir, const char *text, size_t len,
			const struct floor_scan *fs, const struct policy_state *next,
			struct appl_err *err)
{
	char line[APPL_POLICY_FLOOR_LINE_MAX + 1];
	int n = entry_format(fs->deployment, next, line, sizeof(line));

	if (n < 0)
		return appl_err_set(err, -ERANGE, "state: cannot format the entry");
	if (!fs->found.present && fs->lines >= APPL_POLICY_DEPLOYMENTS_MAX)
		return appl_err_set(err, -ENOSPC,
				    "state file %s/" STATE_FILE ": full, %u deployments recorded; "
				    "remove the lines of deployments no longer in use (as its "
				    "owner, while no appliance starts)",
				    dir, APPL_POLICY_DEPLOYMENTS_MAX);
	if (!text)
		return floor_store(dfd, dir, MAGIC_V2, strlen(MAGIC_V2), line, (size_t)n, "", 0,
				   err);
	return floor_store(dfd, dir, text, fs->at, line, (size_t)n, text + fs->end, len - fs->end,
			   err);
}

int policy_state_commit(const char *dir, const char *deployment, uint64_t serial,
			const unsigned char hash[POLICY_HASH_BYTES], const char *keyid_hex,
			int64_t now, struct policy_state *prev, struct appl_err *err)
{
	struct policy_state next = {.present = true, .serial = serial, .accepted_at = now};
	struct floor_scan fs = {.deployment = deployment};
	char *text = NULL;
	size_t len = 0;
	int dfd = -1, lock = -1, rc;

	if (prev)
		memset(prev, 0, sizeof(*prev));
	if (!hex_is(keyid_hex, strlen(keyid_hex), "0123456789ABCDEF", POLICY_KEYID_HEX - 1))
		return appl_err_set(err, -EINVAL, "state: bad key id");
	memcpy(next.hash, hash, POLICY_HASH_BYTES);
	memcpy(next.keyid_hex, keyid_hex, POLICY_KEYID_HEX);
	if ((rc = dir_open(dir, true, &dfd, err)) < 0)
		return rc;
	if ((rc = lock_take(dfd, dir, &lock, err)) < 0) {
		close(dfd);
		return rc;
	}
	/* Read again under the lock: another appliance may have gone ahead. */
	if ((rc = floor_load(dfd, dir, &text, &len, err)) == 0 &&
	    (rc = floor_find(text, len, dir, &fs, err)) == 0 &&
	    (rc = policy_state_check(&fs.found, serial, hash, err)) == 0 &&
	    (!fs.found.present || serial > fs.found.serial))
		rc = floor_update(dfd, dir, text, len, &fs, &next, err);
	free(text);
	close(lock);
	close(dfd);
	if (prev)
		*prev = fs.found;
	return rc;
}
