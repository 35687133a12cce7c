/* fs.c: file-system helpers (see fs.h). */
#define _GNU_SOURCE
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
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
