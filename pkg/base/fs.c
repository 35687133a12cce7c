/* fs.c: file-system helpers (see fs.h). */
#define _GNU_SOURCE
#include "base/fs.h"
#include "base/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int tree_unprotect(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D)
		chmod(path, (st->st_mode & 07777) | S_IRWXU);
	return 0;
}

static int tree_unlink(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void appl_tree_remove(const char *path)
{
	nftw(path, tree_unprotect, 16, FTW_PHYS | FTW_MOUNT);
	nftw(path, tree_unlink, 16, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
}

int appl_mkdir_parents(const char *path, mode_t mode)
{
	char buf[4096];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int appl_private_dir(const char *dir, const char *what, struct appl_err *err)
{
	struct stat st;
	int rc = appl_mkdir_parents(dir, 0700);

	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "%s %s", what, dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return appl_err_errno(err, -errno, errno, "%s %s", what, dir);
	if (lstat(dir, &st) < 0)
		return appl_err_errno(err, -errno, errno, "%s %s", what, dir);
	if (!S_ISDIR(st.st_mode))
		return appl_err_set(err, -ENOTDIR, "%s %s: not a directory", what, dir);
	if (st.st_uid != geteuid())
		return appl_err_set(err, -EPERM, "%s %s: owned by uid %u, not by us", what, dir,
				    (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return appl_err_set(err, -EPERM, "%s %s: writable by group or others", what, dir);
	return 0;
}

/* ---- strict directories ---------------------------------------------------- */

static int strict_mode_check(const struct stat *st, uid_t owner, bool parent, const char *what,
			     const char *path, int plen, struct appl_err *err)
{
	if (!S_ISDIR(st->st_mode))
		return appl_err_set(err, -ENOTDIR, "%s: %.*s is not a directory", what, plen, path);
	if (st->st_uid != owner && !(parent && st->st_uid == 0) && owner == 0)
		return appl_err_set(err, -EPERM,
				    "%s: %.*s is owned by uid %u, not root; chown root %.*s", what,
				    plen, path, (unsigned)st->st_uid, plen, path);
	if (st->st_uid != owner && !(parent && st->st_uid == 0))
		return appl_err_set(err, -EPERM,
				    "%s: %.*s is owned by uid %u, not the required owner", what,
				    plen, path, (unsigned)st->st_uid);
	/* A parent others may write to could have the directory renamed away
	 * and replaced, unless its sticky bit keeps them to their own entries. */
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(parent && (st->st_mode & S_ISVTX)))
		return appl_err_set(err, -EPERM,
				    "%s: %.*s is writable by group or others; chmod go-w %.*s",
				    what, plen, path, plen, path);
	return 0;
}

static int strict_open_fail(int at, const char *name, const char *what, const char *path, int plen,
			    struct appl_err *err)
{
	int e = errno;
	struct stat st;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
		return appl_err_set(err, -EPERM, "%s: %.*s is a symlink (refused)", what, plen,
				    path);
	return appl_err_errno(err, -e, e, "%s: %.*s", what, plen, path);
}

struct strict_walk {
	const char *abs, *what;
	uid_t owner;
	bool create;
};

/* One component below at: opened without following a symlink (made first
 * when asked to and missing), then judged; the new descriptor in *fd. */
static int strict_step(const struct strict_walk *w, int at, const char *comp, size_t clen,
		       bool last, int *fd, struct appl_err *err)
{
	char name[NAME_MAX + 1];
	int plen = (int)(comp + clen - w->abs), flags, rc;
	struct stat st;

	if (clen > NAME_MAX)
		return appl_err_set(err, -ENAMETOOLONG, "%s: name too long", w->what);
	if ((clen == 1 && comp[0] == '.') || (clen == 2 && comp[0] == '.' && comp[1] == '.'))
		return appl_err_set(err, -EINVAL, "%s %s: \".\" or \"..\" in the path", w->what,
				    w->abs);
	memcpy(name, comp, clen);
	name[clen] = '\0';
	/* O_PATH for parents: searching them is all we do. */
	flags = (last ? O_RDONLY : O_PATH) | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	*fd = openat(at, name, flags);
	if (*fd < 0 && errno == ENOENT && w->create) {
		if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
			return appl_err_errno(err, -errno, errno, "%s: creating %.*s", w->what,
					      plen, w->abs);
		*fd = openat(at, name, flags);
	}
	if (*fd < 0)
		return strict_open_fail(at, name, w->what, w->abs, plen, err);
	if (fstat(*fd, &st) < 0) {
		int e = errno;
		close(*fd);
		return appl_err_errno(err, -e, e, "%s: %.*s", w->what, plen, w->abs);
	}
	rc = strict_mode_check(&st, w->owner, !last, w->what, w->abs, plen, err);
	if (rc < 0)
		close(*fd);
	return rc;
}

static int strict_walk(const struct strict_walk *w, int *out, struct appl_err *err)
{
	const char *p = w->abs, *e;
	int fd, next = -1, rc, depth = 0;
	struct stat st;

	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s: /", w->what);
	if (fstat(fd, &st) < 0)
		rc = appl_err_errno(err, -errno, errno, "%s: /", w->what);
	else
		rc = strict_mode_check(&st, w->owner, true, w->what, "/", 1, err);
	while (*p == '/')
		p++;
	if (rc == 0 && *p == '\0')
		rc = appl_err_set(err, -EINVAL, "%s: / itself is refused", w->what);
	while (rc == 0 && *p) {
		for (e = p; *e && *e != '/'; e++)
			;
		size_t clen = (size_t)(e - p);
		while (*e == '/')
			e++;
		if (++depth > APPL_DIR_PATH_DEPTH_MAX)
			rc = appl_err_set(err, -ENAMETOOLONG, "%s: path too deep", w->what);
		else
			rc = strict_step(w, fd, p, clen, *e == '\0', &next, err);
		if (rc == 0) {
			close(fd);
			fd = next;
		}
		p = e;
	}
	if (rc < 0) {
		close(fd);
		return rc;
	}
	*out = fd;
	return 0;
}

int appl_dir_open_strict(const char *path, uid_t owner, bool create, const char *what, int *fd,
			 struct appl_err *err)
{
	struct strict_walk w = {.what = what, .owner = owner, .create = create};
	char abs[PATH_MAX], cwd[PATH_MAX];

	*fd = -1;
	if (create && owner != geteuid())
		return appl_err_set(err, -EPERM, "%s %s: would be created by uid %u, not its owner",
				    what, path, (unsigned)geteuid());
	if (path[0] == '/') {
		if (appl_path_join(abs, sizeof(abs), path, "", "") < 0)
			return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", what);
	} else if (!getcwd(cwd, sizeof(cwd))) {
		return appl_err_errno(err, -errno, errno, "%s: working directory", what);
	} else if (appl_path_join(abs, sizeof(abs), cwd, "/", path) < 0) {
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", what);
	}
	w.abs = abs;
	return strict_walk(&w, fd, err);
}

int appl_user_dir(char *out, size_t len, const char *xdg_var, const char *home_rel, const char *sub,
		  const char *what, const char *option, struct appl_err *err)
{
	const char *xdg = getenv(xdg_var);
	const char *home = getenv("HOME");
	int n;

	if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/%s", xdg, sub);
	else if (home && home[0] == '/')
		n = snprintf(out, len, "%s/%s/%s", home, home_rel, sub);
	else
		return appl_err_set(err, -ENOENT, "no %s: set HOME, %s or %s", what, xdg_var,
				    option);
	if (n < 0 || (size_t)n >= len)
		return appl_err_set(err, -ENAMETOOLONG, "%s path too long", what);
	return 0;
}

int appl_path_join(char *out, size_t len, const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);

	if (len == 0)
		return -ENAMETOOLONG;
	if (la >= len || lb >= len - la || lc >= len - la - lb) {
		out[0] = '\0';
		return -ENAMETOOLONG;
	}
	memcpy(out, a, la);
	memcpy(out + la, b, lb);
	memcpy(out + la + lb, c, lc);
	out[la + lb + lc] = '\0';
	return 0;
}

int appl_fd_read(int fd, size_t max_len, const char *what, char **out, size_t *len,
		 struct appl_err *err)
{
	size_t cap = max_len < 65536 ? max_len + 1 : 65536, have = 0;
	char *buf = malloc(cap), *bigger;

	*out = NULL;
	*len = 0;
	if (!buf)
		return appl_err_set(err, -ENOMEM, "%s: out of memory", what);
	for (;;) {
		ssize_t n;

		if (have == cap) {
			/* Grow only as the input really grows, never past the cap. */
			size_t next = cap * 2 > max_len + 1 ? max_len + 1 : cap * 2;
			if (next == cap) {
				free(buf);
				return appl_err_set(err, -EFBIG,
						    "%s: more than the cap of %zu bytes", what,
						    max_len);
			}
			bigger = realloc(buf, next);
			if (!bigger) {
				free(buf);
				return appl_err_set(err, -ENOMEM, "%s: out of memory", what);
			}
			buf = bigger;
			cap = next;
		}
		n = read(fd, buf + have, cap - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			free(buf);
			return appl_err_errno(err, -e, e, "%s", what);
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > max_len) {
			free(buf);
			return appl_err_set(err, -EFBIG, "%s: more than the cap of %zu bytes", what,
					    max_len);
		}
	}
	if (have == cap) {
		bigger = realloc(buf, have + 1);
		if (!bigger) {
			free(buf);
			return appl_err_set(err, -ENOMEM, "%s: out of memory", what);
		}
		buf = bigger;
	}
	buf[have] = '\0';
	*out = buf;
	*len = have;
	return 0;
}

int appl_fd_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

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

int appl_file_read(const char *path, size_t max_len, char **out, size_t *len, struct appl_err *err)
{
	struct stat st;
	int fd, rc;

	*out = NULL;
	*len = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return appl_err_set(err, -EINVAL, "%s: not a regular file", path);
	}
	rc = appl_fd_read(fd, max_len, path, out, len, err);
	close(fd);
	return rc;
}
