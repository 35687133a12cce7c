/* erofs.c: the verified rootfs directory as one EROFS image, for a Sentry
 * that mounts its root itself instead of asking a gofer process. */
#define _GNU_SOURCE
#include "sandbox/runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/limits.h"
#include "proc/proc.h"

static char *const mkfs_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

/* mkfs.erofs writes the image of dir into fd (an unnamed file), reopened
 * by the child as its standard input's /proc path. */
static int mkfs_run(const char *dir, int fd, struct appl_err *err)
{
	/* -Enoinline_data: the Sentry maps file data page by page, and a tail
	 * packed into its inode cannot be mapped (the interpreter would not
	 * load). --preserve-mtime: every file's own mtime. --all-root: the
	 * owners of the layers, not of whoever unpacked them. -x-1: no xattrs
	 * of the host's. */
	char *argv[] = {SANDBOX_MKFS_EROFS, "--quiet",		"-Enoinline_data",
			"--all-root",	    "--preserve-mtime", "-x-1",
			"/proc/self/fd/0",  (char *)dir,	NULL};
	struct proc_spec spec = {
		.path = SANDBOX_MKFS_EROFS, .argv = argv, .envp = mkfs_env, .fds = {fd, -1, -1}};
	int pidfd, status, rc;
	pid_t pid;

	if (access(SANDBOX_MKFS_EROFS, X_OK) < 0)
		return appl_err_errno(err, -errno, errno,
				      "%s: needed to give cells the image as one file "
				      "(install erofs-utils: scripts/install-deps)",
				      SANDBOX_MKFS_EROFS);
	if ((rc = proc_spawn(&spec, &pid, &pidfd, err)) < 0)
		return rc;
	if (proc_wait_exit(pidfd, APPL_MKFS_EROFS_TIMEOUT_MS) != 1) {
		proc_kill_group(pid);
		proc_wait(pid);
		close(pidfd);
		return appl_err_set(err, -ETIMEDOUT, "%s did not finish in %d ms",
				    SANDBOX_MKFS_EROFS, APPL_MKFS_EROFS_TIMEOUT_MS);
	}
	status = proc_wait(pid);
	close(pidfd);
	if (status != 0)
		return appl_err_set(err, -EIO, "%s %s failed (status %d)", SANDBOX_MKFS_EROFS, dir,
				    status);
	return 0;
}

int sandbox_rootfs_image(const struct sandbox_rt *rt, const char *rootfs, char *image, size_t len,
			 struct appl_err *err)
{
	char parent[PATH_MAX], self[64];
	struct stat st;
	int fd, rc;

	if (len)
		image[0] = '\0';
	if (!sandbox_rt_erofs(rt))
		return 0;
	if (snprintf(image, len, "%s.erofs", rootfs) >= (int)len ||
	    snprintf(parent, sizeof(parent), "%s", rootfs) >= (int)sizeof(parent))
		return appl_err_set(err, -ENAMETOOLONG, "rootfs path too long");
	if (lstat(image, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return appl_err_set(err, -EINVAL, "%s: not a regular file", image);
		return 0;
	}
	/* An unnamed file in the cache directory, linked in under its final
	 * name only once complete: a crash leaves nothing half-written, and
	 * two instances building at once each link a whole image (the second
	 * finds the name taken and uses the first's). */
	*strrchr(parent, '/') = '\0';
	fd = open(parent, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s: an unnamed file for the image",
				      parent);
	rc = mkfs_run(rootfs, fd, err);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	if (rc == 0 && linkat(AT_FDCWD, self, AT_FDCWD, image, AT_SYMLINK_FOLLOW) < 0 &&
	    errno != EEXIST)
		rc = appl_err_errno(err, -errno, errno, "%s", image);
	close(fd);
	return rc;
}
