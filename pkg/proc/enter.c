/* enter.c: a confined child's steps before exec (see enter.h). */
#define _GNU_SOURCE
#include "proc/enter.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proc/seccomp.h"

/* Bring loopback up in a new network namespace. */
static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		rc = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0 && ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int mask_one(const char *path, const char *empty)
{
	const unsigned long ro = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY;
	struct stat st;

	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno; /* gone since: nothing to hide */
	if (S_ISDIR(st.st_mode))
		return mount("tmpfs", path, "tmpfs", ro, "size=4k,nr_inodes=2,mode=0555") < 0
			       ? -errno
			       : 0;
	if (mount(empty, path, NULL, MS_BIND, NULL) < 0 ||
	    mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | ro, NULL) < 0)
		return -errno;
	return 0;
}

static int caps_drop_bounding(void)
{
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -errno;
	return 0;
}

static int caps_clear(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

static int failed(struct proc_fail *f, const char *step, const char *arg, long num)
{
	f->err = errno ? errno : EIO;
	f->step = step;
	f->arg = arg;
	f->num = num;
	return -f->err;
}

int proc_confine_enter(const struct proc_confine *c, struct proc_fail *f)
{
	const unsigned long nosuid = MS_NOSUID | MS_NODEV | MS_NOEXEC;
	struct rlimit none = {0, 0};
	int flags = (c->mount_ns ? CLONE_NEWNS : 0) | (c->net_ns ? CLONE_NEWNET : 0) |
		    (c->pid_ns ? CLONE_NEWIPC : 0) | (c->cgroup_ns ? CLONE_NEWCGROUP : 0),
	    rc;

	for (int i = 0; i < 2; i++) {
		int fd;

		if (!c->cgroup_procs[i])
			continue;
		if ((fd = open(c->cgroup_procs[i], O_WRONLY | O_CLOEXEC)) < 0)
			return failed(f, "joining its cgroup", c->cgroup_procs[i], -1);
		if (write(fd, "0", 1) != 1) {
			rc = failed(f, "joining its cgroup", c->cgroup_procs[i], -1);
			close(fd);
			return rc;
		}
		close(fd);
	}
	if (flags && unshare(flags) < 0)
		return failed(f, "making its namespaces", NULL, -1);
	if (c->mount_ns) {
		if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			return failed(f, "making its mounts private", NULL, -1);
		/* This process is pid 1 of the new PID namespace: the /proc
		 * mounted now shows that namespace alone. */
		if (c->pid_ns && mount("proc", "/proc", "proc", nosuid, NULL) < 0)
			return failed(f, "mounting its own", "/proc", -1);
		/* Mounted in its cgroup namespace, cgroup2 shows the cgroup it
		 * joined above as its root: its own limits, nobody else's. The
		 * host's mount goes first (the same filesystem cannot be
		 * mounted twice on one place). */
		if (c->cgroup_ns &&
		    (umount2("/sys/fs/cgroup", MNT_DETACH) < 0 ||
		     mount("cgroup2", "/sys/fs/cgroup", "cgroup2", nosuid | MS_RDONLY, NULL) < 0))
			return failed(f, "mounting its own", "/sys/fs/cgroup", -1);
		for (size_t i = 0; c->masks && c->masks[i]; i++)
			if ((rc = mask_one(c->masks[i], c->empty_file)) < 0) {
				errno = -rc;
				return failed(f, "hiding", c->masks[i], -1);
			}
	}
	if (c->net_ns && (rc = lo_up()) < 0) {
		errno = -rc;
		return failed(f, "bringing up its loopback", NULL, -1);
	}
	if (setrlimit(RLIMIT_CORE, &none) < 0)
		return failed(f, "setting its limits", NULL, -1);
	if (c->nofile) {
		struct rlimit n = {c->nofile, c->nofile};

		if (setrlimit(RLIMIT_NOFILE, &n) < 0)
			return failed(f, "setting its limits", NULL, -1);
	}
	if (c->drop_caps && (rc = caps_drop_bounding()) < 0) {
		errno = -rc;
		return failed(f, "dropping its capabilities", NULL, -1);
	}
	return 0;
}

int proc_confine_become(const struct proc_confine *c, struct proc_fail *f)
{
	int rc;

	if (c->ids) {
		if (setgroups(c->ngroups, c->ngroups ? c->groups : NULL) < 0)
			return failed(f, "setting its groups", NULL, -1);
		if (setresgid(c->gid, c->gid, c->gid) < 0)
			return failed(f, "changing to gid", NULL, (long)c->gid);
		if (setresuid(c->uid, c->uid, c->uid) < 0)
			return failed(f, "changing to uid", NULL, (long)c->uid);
		/* A uid of its own may be another one at the next start: what
		 * it makes in a directory given to the servers' group stays
		 * that group's to write (and no one else's to read). */
		if (c->ngroups)
			umask(S_IRWXO);
	}
	if (c->drop_caps && (rc = caps_clear()) < 0) {
		errno = -rc;
		return failed(f, "dropping its capabilities", NULL, -1);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return failed(f, "setting no_new_privs", NULL, -1);
	if (c->filter && (rc = proc_filter_install(c->filter)) < 0) {
		errno = -rc;
		return failed(f, "installing the system call filter", NULL, -1);
	}
	return 0;
}
