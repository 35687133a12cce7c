/* fs.h: small file-system helpers shared by the modules. */
#ifndef APPL_BASE_FS_H
#define APPL_BASE_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* Remove the tree at path: never follows a symlink, never leaves its file
 * system, makes read-only directories writable first. Best effort. */
void appl_tree_remove(const char *path);

/* Create every missing parent directory of path (not path itself) with
 * mode. Returns 0 or -errno. */
int appl_mkdir_parents(const char *path, mode_t mode);

/* Make sure dir exists (created with mode 0700 and missing parents), is a
 * directory (not a symlink), belongs to the effective uid and cannot be
 * written by group or others: a directory someone else could write to would
 * let them swap what we keep there. what names it in messages. */
int appl_private_dir(const char *dir, const char *what, struct appl_err *err);

/* Open the directory at path (absolute, or relative to the working
 * directory) the way sshd's StrictModes judges a directory: walked from "/"
 * one component at a time with O_NOFOLLOW, so no component may be a
 * symlink, and no "." or ".." may appear. Every parent must belong to root
 * or to owner and must not be writable by group or others unless its
 * sticky bit keeps them to their own entries (like /tmp); the directory
 * itself must belong to owner and must not be writable by group or others.
 * Whoever could write any of them could swap what it holds. With create, a
 * missing component is made (mode 0700, by the effective uid, which must
 * then be owner) and judged like the others. *fd is a new O_RDONLY
 * descriptor of the directory; what names it in messages ("trust
 * directory: /x is owned by uid 5, not root"). -EPERM for a rule broken,
 * -ENOENT, -ENAMETOOLONG (over APPL_DIR_PATH_DEPTH_MAX components),
 * -EINVAL. */
int appl_dir_open_strict(const char *path, uid_t owner, bool create, const char *what, int *fd,
			 struct appl_err *err);

/* An ordinary user's own directory: $xdg_var/sub when that variable holds an
 * absolute path, else $HOME/home_rel/sub ("~/.cache/appliance/images" for
 * xdg_var XDG_CACHE_HOME, home_rel ".cache", sub "appliance/images"). Both
 * live below a directory only that user can create, unlike a name in /tmp,
 * which any user can take first. -ENOENT, naming option, when neither
 * variable is set; what names the directory in messages. */
int appl_user_dir(char *out, size_t len, const char *xdg_var, const char *home_rel, const char *sub,
		  const char *what, const char *option, struct appl_err *err);

/* out = a + b + c (any may be ""), NUL-terminated. Returns 0, or
 * -ENAMETOOLONG (out then holds "") when it does not fit in len bytes. */
int appl_path_join(char *out, size_t len, const char *a, const char *b, const char *c);

/* Read fd (borrowed) to its end, at most max_len bytes (else -EFBIG), into a
 * new malloc'ed buffer with a NUL after *len bytes (callers use *len; the
 * bytes may hold NULs). what names the input in messages. */
int appl_fd_read(int fd, size_t max_len, const char *what, char **out, size_t *len,
		 struct appl_err *err);

/* Write all of buf[0..len) to fd (borrowed), going on after short writes
 * and EINTR. Returns 0 or -errno. */
int appl_fd_write_all(int fd, const void *buf, size_t len);

/* The same for the regular file at path (a fifo or device is refused). */
int appl_file_read(const char *path, size_t max_len, char **out, size_t *len, struct appl_err *err);

#endif
