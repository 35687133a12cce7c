/* confine.c: an upstream server's jail (see confine.h). */
#define _GNU_SOURCE
#include "proc/confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/limits.h"
#include "cgroup/cgroup.h"
#include "log/log.h"
#include "proc/proc.h"

#define CG_ROOT	    "/sys/fs/cgroup"
#define CG_V1_MEM   CG_ROOT "/memory"
#define CG_V1_PID   CG_ROOT "/pids"
#define CG_BASE	    "appliance" /* v1: below each hierarchy's root */
#define MASKS_MAX   64
#define KILL_ROUNDS 1000 /* of at most 1 ms each: a tree that forks is bounded by pids */

struct proc_jail {
	struct proc_confine c;
	char dir[PATH_MAX]; /* root's 0755: home (the user's 0700) and empty (0444) */
	char home[PATH_MAX];
	char empty[PATH_MAX];
	char cg[2][PATH_MAX];	/* the cgroups made ("" none): v1 memory and pids, or v2 */
	char join[2][PATH_MAX]; /* their cgroup.procs, joined by the child */
	char killdir[PATH_MAX]; /* the cgroup whose processes are killed */
	char *masks[MASKS_MAX + 1];
	char who[96];
	int uid_lock; /* the lock held on a uid of its own, or -1 */
};

/* ---- the user ------------------------------------------------------------------ */

static int user_add(const char *name, struct appl_err *err)
{
	char *argv[] = {"/usr/sbin/useradd", "--system",
			"--user-group",	     "--no-create-home",
			"--home-dir",	     "/nonexistent",
			"--shell",	     "/usr/sbin/nologin",
			(char *)name,	     NULL};
	char *envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	struct proc_spec spec = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
	pid_t pid;
	int pidfd, status;

	if (proc_spawn(&spec, &pid, &pidfd, err) < 0)
		return err->code;
	close(pidfd);
	status = proc_wait(pid);
	if (status != 0)
		return appl_err_set(err, -EIO, "useradd %s failed (status %d)", name, status);
	log_line(LOG_INFO, NULL, "created the system user %s for upstream servers", name);
	return 0;
}

static int user_find(struct proc_jail *j, const char *name, struct appl_err *err)
{
	struct passwd pw, *got = NULL;
	char buf[4096];
	int rc;

	rc = getpwnam_r(name, &pw, buf, sizeof(buf), &got);
	if (!got && rc == 0 && strcmp(name, APPL_UPSTREAM_USER) == 0) {
		if (user_add(name, err) < 0)
			return err->code;
		rc = getpwnam_r(name, &pw, buf, sizeof(buf), &got);
	}
	if (!got)
		return appl_err_set(err, rc ? -rc : -ENOENT, "no user %s on this machine", name);
	j->c.uid = pw.pw_uid;
	j->c.gid = pw.pw_gid;
	snprintf(j->who, sizeof(j->who), "%s (uid %u)", name, (unsigned)pw.pw_uid);
	return 0;
}

/* The group every server with a user of its own has besides its own: what
 * an operator gives a directory to for servers to read or write it. */
static int group_find(struct proc_jail *j, struct appl_err *err)
{
	struct group gr, *got = NULL;
	char buf[4096];
	int rc = getgrnam_r(APPL_UPSTREAM_USER, &gr, buf, sizeof(buf), &got);

	if (!got && rc == 0) {
		if (user_add(APPL_UPSTREAM_USER, err) < 0)
			return err->code;
		rc = getgrnam_r(APPL_UPSTREAM_USER, &gr, buf, sizeof(buf), &got);
	}
	if (!got)
		return appl_err_set(err, rc ? -rc : -ENOENT, "no group %s on this machine",
				    APPL_UPSTREAM_USER);
	j->c.groups[0] = gr.gr_gid;
	j->c.ngroups = 1;
	return 0;
}

/* ---- a user of its own --------------------------------------------------------- */

static uid_t uids_first = APPL_SERVER_UID_FIRST, uids_last = APPL_SERVER_UID_LAST;

int proc_jail_uids_set(const char *range, struct appl_err *err)
{
	unsigned long long first, last;
	char *end;

	errno = 0;
	first = strtoull(range, &end, 10);
	if (end == range || *end != '-' || range[0] == '-' || end[1] < '0' || end[1] > '9')
		goto bad;
	last = strtoull(end + 1, &end, 10);
	if (*end || errno)
		goto bad;
	if (first < APPL_SERVER_UID_MIN || last > APPL_SERVER_UID_MAX || last < first ||
	    last - first >= APPL_SERVER_UIDS_MAX)
		return appl_err_set(err, -EINVAL,
				    "--server-uids %s: the range must lie within %u-%u and hold "
				    "at most %u ids",
				    range, APPL_SERVER_UID_MIN, APPL_SERVER_UID_MAX,
				    APPL_SERVER_UIDS_MAX);
	uids_first = (uid_t)first;
	uids_last = (uid_t)last;
	return 0;
bad:
	return appl_err_set(err, -EINVAL, "--server-uids %s: give FIRST-LAST, as in %u-%u", range,
			    APPL_SERVER_UID_FIRST, APPL_SERVER_UID_LAST);
}

/* An account or group of the machine has this id: not ours to give. */
static bool uid_named(uid_t u)
{
	struct passwd pw, *pgot = NULL;
	struct group gr, *ggot = NULL;
	char buf[4096];

	getpwuid_r(u, &pw, buf, sizeof(buf), &pgot);
	getgrgid_r((gid_t)u, &gr, buf, sizeof(buf), &ggot);
	return pgot || ggot;
}

/* Some process runs with this uid (real, effective, saved or file system):
 * one left behind by a killed appliance, or someone else's. */
static bool uid_running(uid_t u)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	bool found = false;

	while (d && !found && (de = readdir(d))) {
		char path[64], line[256];
		FILE *f;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/status", de->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long id[4];

			if (strncmp(line, "Uid:", 4) != 0)
				continue;
			if (sscanf(line + 4, "%lu %lu %lu %lu", &id[0], &id[1], &id[2], &id[3]) ==
			    4)
				for (int i = 0; i < 4; i++)
					found = found || id[i] == (unsigned long)u;
			break;
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

/* Where a server's name starts its search: the same server tends to get
 * the same uid from one start to the next (FNV-1a). */
static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

/* Take a uid of the range for this jail: one no account or group has, no
 * process runs as, and no other jail holds (its lock file under
 * APPL_SERVER_UID_DIR, locked for as long as the jail lives; a killed
 * appliance's locks go with it). */
static int uid_take(struct proc_jail *j, const char *name, struct appl_err *err)
{
	uint64_t count = (uint64_t)uids_last - uids_first + 1;
	uint64_t start = name_hash(name) % count;
	char path[PATH_MAX];

	if ((appl_mkdir_parents(APPL_SERVER_UID_DIR, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(APPL_SERVER_UID_DIR, 0700) < 0 && errno != EEXIST))
		return appl_err_errno(err, -errno, errno, "creating %s", APPL_SERVER_UID_DIR);
	for (uint64_t i = 0; i < count; i++) {
		uid_t u = (uid_t)(uids_first + (start + i) % count);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
		int fd;

		if (u == 65534 || u == 65535 || uid_named(u))
			continue;
		snprintf(path, sizeof(path), "%s/%u", APPL_SERVER_UID_DIR, (unsigned)u);
		if ((fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
			return appl_err_errno(err, -errno, errno, "opening %s", path);
		if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
			int e = errno;

			close(fd);
			if (e == EAGAIN || e == EACCES)
				continue;
			return appl_err_errno(err, -e, e, "locking %s", path);
		}
		if (uid_running(u)) {
			close(fd);
			continue;
		}
		j->uid_lock = fd;
		j->c.uid = u;
		j->c.gid = (gid_t)u;
		snprintf(j->who, sizeof(j->who), "uid %u (its own), group %s", (unsigned)u,
			 APPL_UPSTREAM_USER);
		return 0;
	}
	return appl_err_set(err, -EAGAIN,
			    "servers.%s: no free uid in %u-%u, the range servers take a user of "
			    "their own from (every server of every running appliance holds one): "
			    "give a wider one with --server-uids FIRST-LAST",
			    name, (unsigned)uids_first, (unsigned)uids_last);
}

/* ---- what a server is started from --------------------------------------------- */

/* For the probe below: 0, or -ENOENT when a part of path does not exist
 * and -EACCES for anything else, with why = "PATH does not exist" and the
 * like. */
static int path_dirs_ok(const char *path, char *why, size_t cap)
{
	char prefix[PATH_MAX];
	struct stat st;

	for (const char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		size_t n = (size_t)(p - path);

		if (n >= sizeof(prefix))
			break;
		memcpy(prefix, path, n);
		prefix[n] = '\0';
		if (stat(prefix, &st) < 0) {
			int e = errno;

			snprintf(why, cap, "%.300s %s", prefix,
				 e == ENOENT ? "does not exist" : strerror(e));
			return e == ENOENT ? -ENOENT : -EACCES;
		}
		if (!S_ISDIR(st.st_mode)) {
			snprintf(why, cap, "%.300s is not a directory", prefix);
			return -EACCES;
		}
		if (access(prefix, X_OK) < 0) {
			snprintf(why, cap,
				 "it may not search %.300s (owner uid %u, group %u, mode %04o)",
				 prefix, (unsigned)st.st_uid, (unsigned)st.st_gid,
				 (unsigned)(st.st_mode & 07777));
			return -EACCES;
		}
	}
	return 0;
}

static int leaf_ok(const char *path, bool dir, char *why, size_t cap)
{
	struct stat st;
	int rc = path_dirs_ok(path, why, cap);

	if (rc < 0)
		return rc;
	if (stat(path, &st) < 0) {
		int e = errno;

		snprintf(why, cap, "%.300s %s", path, e == ENOENT ? "does not exist" : strerror(e));
		return e == ENOENT ? -ENOENT : -EACCES;
	}
	if (dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
		snprintf(why, cap, "%.300s is not a %s", path, dir ? "directory" : "regular file");
		return -EACCES;
	}
	if (access(path, X_OK) < 0) {
		snprintf(why, cap, "it may not %s %.300s (owner uid %u, group %u, mode %04o)",
			 dir ? "search" : "execute", path, (unsigned)st.st_uid, (unsigned)st.st_gid,
			 (unsigned)(st.st_mode & 07777));
		return -EACCES;
	}
	return 0;
}

/* The interpreter a "#!" first line names (read as root, before the
 * probe becomes the server's user), or "" when it is no script. */
static void shebang(const char *path, char *interp, size_t cap)
{
	char line[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof(line) - 1);
	size_t at = 2, len;

	interp[0] = '\0';
	if (fd >= 0)
		close(fd);
	if (n < 2 || line[0] != '#' || line[1] != '!')
		return;
	line[n] = '\0';
	at += strspn(line + at, " \t");
	len = strcspn(line + at, " \t\n");
	snprintf(interp, cap, "%.*s", (int)len, line + at);
}

/* In the probe's child, as the server's user (become as the server will,
 * without the system call filter): what stops the command or its cwd,
 * with why. Scripts are followed to their interpreter, four deep, as the
 * kernel does. */
static enum proc_probe probe_as_user(const struct proc_confine *c, const char *path,
				     const char *cwd, char *why, size_t cap)
{
	struct proc_confine as = *c;
	struct proc_fail f = {.num = -1};
	char chain[4][PATH_MAX], detail[APPL_ERR_MSG_MAX];
	int depth, rc;

	snprintf(chain[0], sizeof(chain[0]), "%s", path);
	for (depth = 0; depth < 3; depth++) {
		shebang(chain[depth], chain[depth + 1], sizeof(chain[depth + 1]));
		if (chain[depth + 1][0] != '/')
			break;
	}
	as.filter = NULL;
	if (proc_confine_become(&as, &f) < 0) {
		char num[24] = "";

		if (f.num >= 0)
			snprintf(num, sizeof(num), " %ld", f.num);
		snprintf(why, cap, "%s%s: %s", f.step, num, strerror(f.err));
		return PROC_PROBE_BECOME;
	}
	for (int i = 0; i <= depth; i++) {
		if ((rc = leaf_ok(chain[i], false, detail, sizeof(detail))) < 0) {
			if (i == 0)
				snprintf(why, cap, "%s", detail);
			else
				snprintf(why, cap,
					 "the interpreter its first line (#!) names: %.*s",
					 (int)(cap > 64 ? cap - 64 : 0), detail);
			return rc == -ENOENT ? PROC_PROBE_COMMAND_MISSING : PROC_PROBE_COMMAND;
		}
		if (i < 3 && chain[i + 1][0] == '/' && access(chain[i], R_OK) < 0) {
			snprintf(why, cap, "%.300s is a script (#!) it may not read", chain[i]);
			return PROC_PROBE_COMMAND;
		}
	}
	if (cwd && (rc = leaf_ok(cwd, true, why, cap)) < 0)
		return rc == -ENOENT ? PROC_PROBE_CWD_MISSING : PROC_PROBE_CWD;
	return PROC_PROBE_OK;
}

int proc_jail_probe(const struct proc_jail *j, const char *path, const char *cwd, char *why,
		    size_t cap)
{
	char msg[APPL_ERR_MSG_MAX] = "";
	int p[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	if ((pid = fork()) < 0) {
		int e = errno;

		close(p[0]);
		close(p[1]);
		return -e;
	}
	if (pid == 0) {
		int rc;

		close(p[0]);
		rc = probe_as_user(&j->c, path, cwd, msg, sizeof(msg));
		n = write(p[1], msg, strlen(msg));
		(void)n;
		_exit(rc);
	}
	close(p[1]);
	do
		n = read(p[0], msg, sizeof(msg) - 1);
	while (n < 0 && errno == EINTR);
	close(p[0]);
	msg[n > 0 ? n : 0] = '\0';
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return -EIO;
	snprintf(why, cap, "%s", msg);
	return WEXITSTATUS(status);
}

/* ---- cgroups ------------------------------------------------------------------- */

/* root/leaf, made with its parents (v1). */
static int cg_dir_make(char *out, const char *root, const char *leaf, struct appl_err *err)
{
	if (appl_path_join(out, PATH_MAX, root, "/", leaf) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
	if (appl_mkdir_parents(out, 0755) < 0 || (mkdir(out, 0755) < 0 && errno != EEXIST)) {
		int e = errno;

		out[0] = '\0';
		return appl_err_errno(err, -e, e, "creating the cgroup %s/%s", root, leaf);
	}
	return 0;
}

/* The jail's cgroups: on cgroup v2 one below the appliance's subtree
 * (pkg/cgroup: settled by the engine before any server starts), else the
 * v1 memory and pids hierarchies. A limit that cannot be set is an error:
 * a server is not started with a limit the policy gave and nobody
 * enforces. */
static int cgroups_make(struct proc_jail *j, const struct proc_jail_spec *s, struct appl_err *err)
{
	static unsigned seq;
	const struct cg_host *h = cg_host();
	char leaf[128], mem[32], pids[16];

	snprintf(leaf, sizeof(leaf), "upstream-%s-%ld-%u", s->name, (long)getpid(), ++seq);
	snprintf(mem, sizeof(mem), "%llu", (unsigned long long)s->memory_mb << 20);
	snprintf(pids, sizeof(pids), "%u", s->pids);
	if (h->kind == CG_V2) {
		char rel[160];

		snprintf(rel, sizeof(rel), "servers/%s", leaf);
		/* Readable by the server, whatever the umask (the unit's is
		 * 077): it reads its limits from inside (enter.h). */
		if (cg_make(h, rel, false, j->cg[0], err) < 0 ||
		    (chmod(j->cg[0], 0755) < 0 &&
		     appl_err_errno(err, -errno, errno, "%s", j->cg[0]) < 0) ||
		    cg_write(j->cg[0], "memory.max", mem, err) < 0 ||
		    cg_write(j->cg[0], "memory.swap.max", "0", err) < 0 ||
		    cg_write(j->cg[0], "pids.max", pids, err) < 0)
			return err->code;
		snprintf(j->killdir, sizeof(j->killdir), "%s", j->cg[0]);
		j->c.cgroup_ns = true;
	} else {
		char sub[256];

		snprintf(sub, sizeof(sub), CG_BASE "/%s", leaf);
		if (cg_dir_make(j->cg[0], CG_V1_MEM, sub, err) < 0 ||
		    cg_write(j->cg[0], "memory.limit_in_bytes", mem, err) < 0 ||
		    cg_dir_make(j->cg[1], CG_V1_PID, sub, err) < 0 ||
		    cg_write(j->cg[1], "pids.max", pids, err) < 0)
			return err->code;
		snprintf(j->killdir, sizeof(j->killdir), "%s", j->cg[1]);
	}
	for (int i = 0; i < 2; i++) {
		if (!j->cg[i][0])
			continue;
		if (appl_path_join(j->join[i], sizeof(j->join[i]), j->cg[i], "/cgroup.procs", "") <
		    0)
			return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
		j->c.cgroup_procs[i] = j->join[i];
	}
	return 0;
}

int proc_jail_kill(struct proc_jail *j)
{
	bool left;
	int killed;

	if (!j || !j->killdir[0])
		return 0;
	killed = cg_kill(j->killdir, KILL_ROUNDS, &left);
	if (left)
		log_line(LOG_WARN, NULL,
			 "a server's cgroup still had processes after %d rounds of kills",
			 KILL_ROUNDS);
	return killed;
}

/* ---- the masks and the private directory ----------------------------------------- */

/* Each path that exists, as its real path (a mount on a symlink would land
 * on its target), once. */
static int masks_resolve(struct proc_jail *j, const char *const *in, struct appl_err *err)
{
	size_t n = 0;

	for (size_t i = 0; in && in[i]; i++) {
		char *real = realpath(in[i], NULL);
		bool dup = false;

		if (!real)
			continue;
		for (size_t k = 0; k < n && !dup; k++)
			dup = strcmp(j->masks[k], real) == 0;
		if (dup || strcmp(real, "/") == 0) {
			free(real);
			continue;
		}
		if (n == MASKS_MAX) {
			free(real);
			return appl_err_set(err, -E2BIG, "more than %d paths to hide from servers",
					    MASKS_MAX);
		}
		j->masks[n++] = real;
	}
	j->masks[n] = NULL;
	return 0;
}

static int dirs_make(struct proc_jail *j, const char *name, bool root, struct appl_err *err)
{
	const char *tmp = root ? "/tmp" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd;

	snprintf(j->dir, sizeof(j->dir), "%s/appliance-upstream-%s.XXXXXX", tmp, name);
	if (!mkdtemp(j->dir)) {
		int e = errno;

		j->dir[0] = '\0';
		return appl_err_errno(err, -e, e, "creating a private directory in %s", tmp);
	}
	if (chmod(j->dir, 0755) < 0 ||
	    appl_path_join(j->home, sizeof(j->home), j->dir, "/home", "") < 0 ||
	    appl_path_join(j->empty, sizeof(j->empty), j->dir, "/empty", "") < 0 ||
	    mkdir(j->home, 0700) < 0 || (root && chown(j->home, j->c.uid, j->c.gid) < 0) ||
	    (fd = open(j->empty, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444)) < 0)
		return appl_err_errno(err, -errno, errno, "preparing %s", j->dir);
	close(fd);
	return 0;
}

/* ---- the jail ------------------------------------------------------------------- */

int proc_jail_new(const struct proc_jail_spec *s, struct proc_jail **out, struct appl_err *err)
{
	bool root = geteuid() == 0;
	struct proc_jail *j;
	int rc;

	*out = NULL;
	if (!root && (s->user || !s->network))
		return appl_err_set(
			err, -EPERM,
			"servers.%s: a user or network: false needs the appliance to run "
			"as root",
			s->name);
	if (!(j = calloc(1, sizeof(*j))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	j->uid_lock = -1;
	j->c.nofile = APPL_UPSTREAM_NOFILE;
	j->c.filter = s->filter;
	snprintf(j->who, sizeof(j->who), "the appliance's own user (rootless)");
	if (root) {
		j->c.drop_caps = true;
		j->c.ids = true;
		j->c.mount_ns = true;
		j->c.pid_ns = true;
		j->c.net_ns = !s->network;
		rc = s->user ? user_find(j, s->user, err)
			     : (group_find(j, err) < 0 ? err->code : uid_take(j, s->name, err));
		if (rc < 0 || (rc = cgroups_make(j, s, err)) < 0 ||
		    (rc = masks_resolve(j, s->masks, err)) < 0)
			goto fail;
		j->c.masks = (const char *const *)j->masks;
	}
	if ((rc = dirs_make(j, s->name, root, err)) < 0)
		goto fail;
	j->c.empty_file = j->empty;
	*out = j;
	return 0;
fail:
	proc_jail_free(j);
	return rc;
}

const struct proc_confine *proc_jail_confine(const struct proc_jail *j)
{
	return &j->c;
}

const char *proc_jail_home(const struct proc_jail *j)
{
	return j->home;
}

const char *proc_jail_who(const struct proc_jail *j)
{
	return j->who;
}

/* The appliance pid in a jail's cgroup name, "upstream-NAME-PID-SEQ" (NAME
 * may hold '-'), or 0 when the name is not one. */
static long jail_cgroup_pid(const char *name)
{
	const char *seq, *pid;
	char *end;
	long v;

	if (strncmp(name, "upstream-", 9) != 0 || !(seq = strrchr(name, '-')) || seq <= name + 9)
		return 0;
	for (pid = seq - 1; pid > name + 9 && pid[-1] != '-'; pid--)
		;
	if (pid <= name + 9 || pid == seq)
		return 0;
	errno = 0;
	v = strtol(pid, &end, 10);
	if (errno || end != seq || v <= 0)
		return 0;
	return v;
}

static int reclaim_in(const char *base)
{
	char path[PATH_MAX];
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(base);

	while (d && (de = readdir(d))) {
		long pid = jail_cgroup_pid(de->d_name);

		if (de->d_type != DT_DIR || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (appl_path_join(path, sizeof(path), base, "/", de->d_name) == 0 &&
		    rmdir(path) == 0)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

int proc_jail_reclaim(void)
{
	if (geteuid() != 0)
		return 0;
	char v2[PATH_MAX];

	if (cg_host()->kind == CG_V2)
		return cg_path(cg_host(), v2, "servers") == 0 ? reclaim_in(v2) : 0;
	return reclaim_in(CG_V1_MEM "/" CG_BASE) + reclaim_in(CG_V1_PID "/" CG_BASE);
}

void proc_jail_free(struct proc_jail *j)
{
	struct timespec ms = {0, 1000000};

	if (!j)
		return;
	proc_jail_kill(j);
	for (int i = 0; i < 2; i++) {
		/* A killed process leaves its cgroup a moment after it dies. */
		for (int t = 0; j->cg[i][0] && t < 200 && rmdir(j->cg[i]) < 0 && errno == EBUSY;
		     t++)
			nanosleep(&ms, NULL);
	}
	if (j->dir[0])
		appl_tree_remove(j->dir);
	for (size_t i = 0; j->masks[i]; i++)
		free(j->masks[i]);
	if (j->uid_lock >= 0)
		close(j->uid_lock);
	free(j);
}

const char *const *proc_jail_default_masks(void)
{
	static const char *const masks[] = {"/etc/appliance",
					    "/run/appliance",
					    "/var/lib/appliance",
					    "/run/runsc",
					    "/var/run/runsc",
					    "/run/docker.sock",
					    "/var/run/docker.sock",
					    "/run/docker",
					    "/run/containerd",
					    "/var/run/containerd",
					    "/run/dbus",
					    "/var/run/dbus",
					    "/run/systemd/private",
					    "/run/systemd/journal",
					    "/run/podman",
					    "/run/crio",
					    "/run/snapd.socket",
					    "/run/user",
					    NULL};

	return masks;
}
