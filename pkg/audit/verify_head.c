/* verify_head.c: what the checker holds the log to besides its lines:
 * the head the writers recorded (the state's, or --head FILE) and, with
 * keys, the sealing state (the state's, or --seal FILE), read under the
 * log's lock together with the newest file's size, so that all three are
 * one writer's whole batch. */
#include "audit/verify_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* A shared lock on the log's ID.lock, when it can be opened (never made
 * here): writers hold it exclusively around each append, so under it the
 * head and the file's size are one writer's whole batch. -1: no lock. */
static int lock_take(int sdfd, const char *id)
{
	char name[AUDIT_ID_HEX + 8];
	int fd, rc;

	snprintf(name, sizeof(name), "%s.lock", id);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		rc = flock(fd, LOCK_SH);
	while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int newest_open(struct verifier *v)
{
	struct stat st;
	int e, rc;

	if (v->newest_fd >= 0)
		return 0;
	v->newest_fd = openat(v->dfd, v->names[0], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (v->newest_fd < 0) {
		e = errno;
		if (e == ELOOP && v->o->in_dir)
			return appl_err_set(v->err, -e, "%s%s: a symlink, not followed", v->dir,
					    v->names[0]);
		return appl_err_errno(v->err, -e, e, "%s%s%s", v->dir, v->names[0],
				      e == ELOOP ? ": a symlink (give the log's own path)" : "");
	}
	if (fstat(v->newest_fd, &st) < 0)
		return appl_err_errno(v->err, -errno, errno, "%s%s", v->dir, v->names[0]);
	if (!S_ISREG(st.st_mode))
		return appl_err_set(v->err, -EINVAL, "%s%s: not a regular file", v->dir,
				    v->names[0]);
	v->newest_size = (uint64_t)st.st_size;
	if ((rc = audit_seen_claim(v, v->newest_fd)) == 1)
		return appl_err_set(
			v->err, -EEXIST,
			"%s%s: a log before it in this directory read this file already "
			"(through previous, or under another name)",
			v->dir, v->names[0]);
	return rc;
}

/* --head FILE or --seal FILE (opt), opened as given; a log's NAME.head
 * or NAME.seal in a directory (in_dir) never through a symlink, and only
 * when it is a regular file: the directory is a collection of copies,
 * where a link would check one log against another's head, or against a
 * file outside it. An fd, or < 0. */
static int copy_open(struct verifier *v, const char *path, const char *opt)
{
	struct stat st;
	int fd, e;

	if (!v->o->in_dir) {
		fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		return fd >= 0 ? fd : appl_err_errno(v->err, -errno, errno, "%s %s", opt, path);
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		return e == ELOOP ? appl_err_set(v->err, -e, "%s: a symlink, not followed", path)
				  : appl_err_errno(v->err, -e, e, "%s", path);
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return appl_err_set(v->err, -EINVAL, "%s: not a regular file", path);
	}
	return fd;
}

/* The head in fd into v: found, bad, or (empty) missing or waived. */
static int head_take(struct verifier *v, int fd, enum head_state empty, const char *what)
{
	int rc = audit_head_read_fd(fd, &v->head);

	if (rc == 0)
		v->head_state = HEAD_FOUND;
	else if (rc == -ENOENT)
		v->head_state = empty;
	else if (rc == -EINVAL)
		v->head_state = HEAD_BAD;
	else
		return appl_err_errno(v->err, rc, -rc, "reading the head %s", what);
	return 0;
}

/* A sealing state's bytes from fd into v: found, bad, or when empty,
 * `empty`. */
static int seal_take(struct verifier *v, int fd, enum seal_source empty, const char *what)
{
	char buf[AUDIT_SEAL_FILE_MAX + 1];
	ssize_t got;

	do
		got = read(fd, buf, sizeof(buf));
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return appl_err_errno(v->err, -errno, errno, "reading the sealing state %s", what);
	if (got == 0)
		v->seal_src = empty;
	else
		v->seal_src =
			audit_seal_parse(buf, (size_t)got, v->sst) == 0 ? SEAL_FOUND : SEAL_BAD;
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

/* With keys: the state's sealing state beside the head id, read under
 * the same lock as the head, so that the two agree with each other. */
static int seal_load(struct verifier *v, int sdfd, const char *id)
{
	char name[AUDIT_ID_HEX + 8];
	int fd, rc;

	if (!v->nsealers || v->o->seal_file)
		return 0;
	snprintf(name, sizeof(name), "%s.seal", id);
	snprintf(v->seal_where, sizeof(v->seal_where), "%s/audit/%s", v->o->state_dir, name);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		v->seal_src = SEAL_MISSING;
		return 0;
	}
	if (fd < 0)
		return appl_err_errno(v->err, -errno, errno, "the sealing state %s", v->seal_where);
	rc = seal_take(v, fd, SEAL_BAD, v->seal_where);
	close(fd);
	return rc;
}

/* --seal FILE, with keys. */
int audit_seal_from_file(struct verifier *v)
{
	int fd, rc;

	if (!v->nsealers || !v->o->seal_file)
		return 0;
	snprintf(v->seal_where, sizeof(v->seal_where), "%s", v->o->seal_file);
	if ((fd = copy_open(v, v->o->seal_file, "--seal")) < 0)
		return fd;
	rc = seal_take(v, fd, SEAL_WAIVED, v->o->seal_file);
	close(fd);
	return rc;
}

/* The state's head of the log at path, read (and, with open_newest, the
 * newest file opened and its size taken, and the sealing state read)
 * under the log's lock: 1 when the state has a head file for path, 0 when
 * it has none, or < 0. */
static int head_load(struct verifier *v, int sdfd, const char *path, bool open_newest)
{
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	int fd, lfd, rc;

	audit_state_id(path, id);
	snprintf(name, sizeof(name), "%s.head", id);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
			       ? 0
			       : appl_err_errno(v->err, -errno, errno, "the head %s/audit/%s",
						v->o->state_dir, name);
	snprintf(v->head_where, sizeof(v->head_where), "%s/audit/%s", v->o->state_dir, name);
	lfd = lock_take(sdfd, id);
	rc = open_newest ? newest_open(v) : 0;
	if (rc == 0)
		rc = head_take(v, fd, HEAD_MISSING, v->head_where);
	if (rc == 0 && open_newest)
		rc = seal_load(v, sdfd, id);
	if (lfd >= 0)
		close(lfd);
	close(fd);
	return rc < 0 ? rc : 1;
}

/* The log's path: FILE as given when absolute (the writer keys the state
 * by the policy's path), and FILE with its directory resolved. */
static size_t head_paths(const struct verifier *v, const char *file, const char *paths[2])
{
	size_t n = 0;

	if (file[0] == '/')
		paths[n++] = file;
	if (n == 0 || strcmp(file, v->real) != 0)
		paths[n++] = v->real;
	return n;
}

/* --head FILE: read under the log's lock when the state has one. */
static int head_from_file(struct verifier *v, int sdfd, const char *file)
{
	const char *paths[2];
	char id[AUDIT_ID_HEX];
	int fd, lfd = -1, rc;

	for (size_t i = 0, n = head_paths(v, file, paths); sdfd >= 0 && lfd < 0 && i < n; i++) {
		audit_state_id(paths[i], id);
		lfd = lock_take(sdfd, id);
	}
	snprintf(v->head_where, sizeof(v->head_where), "%s", v->o->head_file);
	fd = copy_open(v, v->o->head_file, "--head");
	rc = fd < 0 ? fd : newest_open(v);
	if (rc == 0)
		rc = head_take(v, fd, HEAD_WAIVED, v->o->head_file);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return rc;
}

int audit_verify_state_open(struct verifier *v, int *sdfd)
{
	struct appl_err e = {0};
	int rc;

	*sdfd = -1;
	if (!v->o->state_dir)
		return 0;
	rc = audit_state_open(v->o->state_dir, false, sdfd, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		*v->err = e;
		return rc;
	}
	return 0;
}

/* Before anything is read: the head, and the newest file opened under its
 * lock. */
int audit_head_find(struct verifier *v, int sdfd, const char *file)
{
	const char *paths[2];
	int rc = 0;

	v->head_state = HEAD_MISSING;
	if (v->o->head_file)
		return head_from_file(v, sdfd, file);
	for (size_t i = 0, n = head_paths(v, file, paths); sdfd >= 0 && rc == 0 && i < n; i++)
		rc = head_load(v, sdfd, paths[i], true);
	if (rc < 0)
		return rc;
	return newest_open(v);
}

/* No head for FILE itself, and FILE is NAME.K, file K of its chain: a
 * rotated file of the log at NAME, whose head applies to it only while
 * it is that log's current file. */
int audit_head_of_rotated(struct verifier *v, int sdfd)
{
	char path[PATH_MAX], num[24];
	const char *dot = strrchr(v->real, '.');
	int rc;

	if (v->head_state != HEAD_MISSING || sdfd < 0 || v->o->head_file || !dot ||
	    v->newest_index == 0)
		return 0;
	snprintf(num, sizeof(num), "%" PRIu64, v->newest_index);
	if (strcmp(dot + 1, num) != 0 || (size_t)(dot - v->real) >= sizeof(path) || dot[-1] == '/')
		return 0;
	memcpy(path, v->real, (size_t)(dot - v->real));
	path[dot - v->real] = '\0';
	if ((rc = head_load(v, sdfd, path, false)) <= 0)
		return rc;
	if (v->head_state == HEAD_FOUND && v->head.file > v->newest_index) {
		v->head_state = HEAD_NOT_CURRENT;
		snprintf(v->head_where, sizeof(v->head_where), "%s", path);
	}
	return 0;
}
