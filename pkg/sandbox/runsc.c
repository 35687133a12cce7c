/* runsc.c: the runsc side of a cell sandbox (see runsc.h). */
#define _GNU_SOURCE
#include "sandbox/runsc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "base/fs.h"
#include "loop/loop.h"
#include "proc/proc.h"

#define INSTANCE_PREFIX		"i-"
#define CGROUP_BASE		"appliance"
#define RUNSC_DELETE_TIMEOUT_MS 5000
#define RUNSC_EXIT_TIMEOUT_MS	2000
#define RUNSC_POLL_MS		20
/* After its runner ended by itself, runsc run (or restore) exits on its
 * own: this long at most, then it is killed like any other. */
#define RUNSC_CLEAN_EXIT_MS 500
/* A restored sandbox whose runsc ended by itself leaves runsc state behind
 * (runsc restore, unlike runsc run, does not delete its container). Such
 * dead sandboxes are deleted together, by one runsc delete for up to this
 * many, started when that many wait or this long after the first: one Go
 * process start per batch instead of per cell. */
#define RUNSC_DELETE_BATCH    16
#define RUNSC_DELETE_BATCH_MS 2000
#define MEMCG_V1	      "/sys/fs/cgroup/memory"
#define FREEZER_V1	      "/sys/fs/cgroup/freezer"

/* runsc gets this environment and nothing else: the appliance's own may
 * hold credentials for the upstream servers. */
static char *const runsc_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

/* The platforms this appliance accepts. Any other runsc flag is fixed by
 * the code below; none comes from configuration. */
static const char *const platforms[] = {"systrap", "ptrace", "kvm", NULL};

/* Every controller a cgroups v1 runsc may populate, for cleaning up. */
static const char *const cgroup_roots[] = {
	"/sys/fs/cgroup/memory",
	"/sys/fs/cgroup/cpu",
	"/sys/fs/cgroup/cpuacct",
	"/sys/fs/cgroup/cpuset",
	"/sys/fs/cgroup/devices",
	"/sys/fs/cgroup/freezer",
	"/sys/fs/cgroup/blkio",
	"/sys/fs/cgroup/pids",
	"/sys/fs/cgroup/net_cls",
	"/sys/fs/cgroup/net_prio",
	"/sys/fs/cgroup/perf_event",
	"/sys/fs/cgroup/hugetlb",
	"/sys/fs/cgroup/systemd",
	"/sys/fs/cgroup/unified",
	"/sys/fs/cgroup",
	NULL,
};

struct sandbox_rt {
	char runsc[PATH_MAX];
	char platform[16];
	char version[64]; /* as `runsc --version` names it */
	unsigned release; /* its date, YYYYMMDD */
	bool rootless;
	char dir[PATH_MAX];  /* this instance */
	char name[64];	     /* its directory name */
	int lock;	     /* flock held for our whole life */
	unsigned long next;  /* sandbox counter */
	struct sandbox *all; /* running sandboxes */
	/* dead sandboxes waiting for one runsc delete together (batch_defer) */
	struct sandbox *deferred;
	struct loop *def_loop;	      /* the loop their teardowns run from */
	struct loop_timer *def_timer; /* starts the delete of a batch not full */
};

struct sandbox {
	struct sandbox_rt *rt;
	struct sandbox *next, *prev;
	char id[48];
	char bundle[PATH_MAX];
	char cgroup[128]; /* "/appliance/INSTANCE/ID", "" when rootless */
	int memcg;	  /* 1 when we made its memory cgroup */
	bool frozen;	  /* sandbox_freeze froze it */
	bool ending;	  /* its runner ended by itself (sandbox_ending) */
	pid_t pid;
	int pidfd, fd_in, fd_out;
	int reaped;
	/* teardown from the loop (sandbox_destroy_async) */
	struct loop *td_loop;	     /* NULL: not being torn down */
	struct loop_timer *td_timer; /* bounds each step */
	pid_t del_pid;		     /* runsc delete, once started */
	int del_pidfd;
	/* a batched delete: deferred, the next in rt->deferred; once started,
	 * the next in the batch whose runsc delete its leader runs */
	bool deferred;
	struct sandbox *batch, *leader;
};

static void deferred_flush_sync(struct sandbox_rt *rt);

static int runsc_check(const char *path, struct appl_err *err)
{
	struct stat st;

	if (!path || path[0] != '/')
		return appl_err_set(err, -EINVAL, "runsc path must be absolute");
	if (stat(path, &st) < 0)
		return appl_err_errno(err, -errno, errno, "runsc %s", path);
	if (!S_ISREG(st.st_mode) || access(path, X_OK) < 0)
		return appl_err_set(err, -EACCES, "runsc %s: not an executable file", path);
	return 0;
}

/* The kvm platform needs /dev/kvm, a character device we can open: refused
 * here rather than by sandboxes that never boot. */
static int kvm_check(struct appl_err *err)
{
	struct stat st;
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return appl_err_errno(err, -errno, errno,
				      "runtime platform kvm: /dev/kvm is not usable");
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
		close(fd);
		return appl_err_set(err, -ENODEV,
				    "runtime platform kvm: /dev/kvm is not a character device");
	}
	close(fd);
	return 0;
}

static int platform_check(const char *p, struct appl_err *err)
{
	for (size_t i = 0; platforms[i]; i++)
		if (strcmp(p, platforms[i]) == 0)
			return strcmp(p, "kvm") == 0 ? kvm_check(err) : 0;
	return appl_err_set(err, -EINVAL, "runtime platform %.32s: not one of systrap, ptrace, kvm",
			    p);
}

/* An ordinary user's instances live below $XDG_RUNTIME_DIR, else in the
 * user's own state directory: never under a predictable name in /tmp, which
 * another user could create first and so keep the appliance from starting
 * (or, were its checks weaker, hand it a directory they control). */
static int state_dir_default(char *out, size_t len, struct appl_err *err)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int rc;

	if (geteuid() == 0)
		rc = appl_path_join(out, len, "/run/appliance", "", "");
	else if (xdg && xdg[0] == '/')
		rc = appl_path_join(out, len, xdg, "/appliance", "");
	else
		return appl_user_dir(out, len, "XDG_STATE_HOME", ".local/state", "appliance/run",
				     "runtime directory", "--runtime-dir", err);
	if (rc < 0)
		return appl_err_set(err, -ENAMETOOLONG, "runtime directory path too long");
	return 0;
}

/* Start `runsc --root=ROOT [--rootless] A1 -force ID...`, n ids (at most
 * RUNSC_DELETE_BATCH). */
static int runsc_spawn_ids(const char *runsc, const char *root, bool rootless, const char *a1,
			   char *const *ids, size_t n, pid_t *pid, int *pidfd)
{
	char rootarg[PATH_MAX + 16];
	char *argv[RUNSC_DELETE_BATCH + 6];
	size_t k = 0;
	struct proc_spec spec = {.path = runsc, .envp = runsc_env, .fds = {-1, -1, -1}};

	if (n > RUNSC_DELETE_BATCH)
		return -E2BIG;
	if (appl_path_join(rootarg, sizeof(rootarg), "--root=", root, "") < 0)
		return -ENAMETOOLONG;
	argv[k++] = (char *)runsc;
	argv[k++] = rootarg;
	if (rootless)
		argv[k++] = "--rootless";
	argv[k++] = (char *)a1;
	argv[k++] = "-force";
	for (size_t i = 0; i < n; i++)
		argv[k++] = ids[i];
	argv[k] = NULL;
	spec.argv = argv;
	return proc_spawn(&spec, pid, pidfd, NULL);
}

/* Start `runsc --root=ROOT [--rootless] A1 -force A2`. */
static int runsc_spawn(const char *runsc, const char *root, bool rootless, const char *a1,
		       const char *a2, pid_t *pid, int *pidfd)
{
	char *ids[] = {(char *)a2};

	return runsc_spawn_ids(runsc, root, rootless, a1, ids, 1, pid, pidfd);
}

/* Start one runsc delete for the sandboxes chained from first through
 * ->batch (a batch holds at most RUNSC_DELETE_BATCH). */
static int runsc_spawn_delete(const struct sandbox_rt *rt, struct sandbox *first, pid_t *pid,
			      int *pidfd)
{
	char root[PATH_MAX + 8];
	char *ids[RUNSC_DELETE_BATCH];
	size_t n = 0;

	if (appl_path_join(root, sizeof(root), rt->dir, "/runsc", "") < 0)
		return -ENAMETOOLONG;
	for (struct sandbox *sb = first; sb && n < RUNSC_DELETE_BATCH; sb = sb->batch)
		ids[n++] = sb->id;
	return runsc_spawn_ids(rt->runsc, root, rt->rootless, "delete", ids, n, pid, pidfd);
}

/* Wait up to RUNSC_DELETE_TIMEOUT_MS for the runsc command behind pidfd.
 * runsc waits for the sandbox process to vanish; orphaned, that process is
 * our zombie, so such orphans are reaped while waiting. Whether it ended. */
static bool wait_reaping(int pidfd)
{
	for (int waited = 0; waited < RUNSC_DELETE_TIMEOUT_MS; waited += RUNSC_POLL_MS) {
		proc_reap_orphans();
		if (proc_wait_exit(pidfd, RUNSC_POLL_MS) == 1)
			return true;
	}
	return proc_wait_exit(pidfd, 0) == 1;
}

/* Wait for the runsc command (pid, pidfd) as wait_reaping does; kill its
 * group if it did not end in time. Reaps it and closes pidfd. Its status
 * (proc_wait's), and *ended whether it ended within the bound. */
static int runsc_finish(pid_t pid, int pidfd, bool *ended)
{
	bool in_time = wait_reaping(pidfd);
	int status;

	if (!in_time)
		proc_kill_group(pid);
	status = proc_wait(pid);
	close(pidfd);
	if (ended)
		*ended = in_time;
	return status;
}

/* Run `runsc --root=ROOT [--rootless] A1 -force A2` and wait for it, bounded. */
static int runsc_call(const char *runsc, const char *root, bool rootless, const char *a1,
		      const char *a2)
{
	int pidfd;
	pid_t pid;

	if (runsc_spawn(runsc, root, rootless, a1, a2, &pid, &pidfd) < 0)
		return -1;
	runsc_finish(pid, pidfd, NULL);
	return 0;
}

/* Remove the cgroup directory path and every one below it, deepest first.
 * rmdir only succeeds on a cgroup with no tasks left. */
static void cgroup_rmdir_tree(const char *path, int depth)
{
	DIR *d = depth < 8 ? opendir(path) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		if (appl_path_join(sub, sizeof(sub), path, "/", de->d_name) == 0)
			cgroup_rmdir_tree(sub, depth + 1);
	}
	if (d)
		closedir(d);
	rmdir(path);
}

/* Remove the cgroups at rel ("appliance/i-...") in every controller. */
static void cgroups_remove(const char *rel)
{
	char path[PATH_MAX];

	for (size_t i = 0; cgroup_roots[i]; i++)
		if (appl_path_join(path, sizeof(path), cgroup_roots[i], "/", rel) == 0)
			cgroup_rmdir_tree(path, 0);
}

/* Thaw every freezer cgroup at or below path: a frozen task cannot die, so
 * a crashed instance's frozen sandboxes are thawed before they are killed. */
static void freezer_thaw_tree(const char *path, int depth)
{
	char sub[PATH_MAX];
	DIR *d;
	struct dirent *de;
	int fd;

	if (depth > 8 || appl_path_join(sub, sizeof(sub), path, "/freezer.state", "") < 0)
		return;
	fd = open(sub, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		(void)appl_fd_write_all(fd, "THAWED", 6); /* best effort: the kill follows */
		close(fd);
	}
	if (!(d = opendir(path)))
		return;
	while ((de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    appl_path_join(sub, sizeof(sub), path, "/", de->d_name) == 0)
			freezer_thaw_tree(sub, depth + 1);
	closedir(d);
}

/* Remove what a crashed instance left: its sandboxes' runsc state, its
 * cgroups, its directory. The caller holds its lock. */
static void instance_reclaim(const char *runsc, const char *dir, const char *name, bool rootless)
{
	char bundles[PATH_MAX], root[PATH_MAX], cg[PATH_MAX];
	DIR *d;
	struct dirent *de;

	if (appl_path_join(bundles, sizeof(bundles), dir, "/bundles", "") < 0 ||
	    appl_path_join(root, sizeof(root), dir, "/runsc", "") < 0)
		return;
	if (!rootless &&
	    appl_path_join(cg, sizeof(cg), FREEZER_V1 "/" CGROUP_BASE "/", name, "") == 0)
		freezer_thaw_tree(cg, 0);
	d = opendir(bundles);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			runsc_call(runsc, root, rootless, "delete", de->d_name);
	if (d)
		closedir(d);
	if (appl_path_join(cg, sizeof(cg), CGROUP_BASE "/", name, "") == 0)
		cgroups_remove(cg);
	appl_tree_remove(dir);
}

/* An instance directory whose lock we can take belongs to an appliance that
 * is gone; one whose lock is held belongs to a live sibling: leave it. */
static void instances_reclaim(const char *runsc, const char *state, bool rootless)
{
	DIR *d = opendir(state);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char dir[PATH_MAX], lock[PATH_MAX];
		int fd;

		if (strncmp(de->d_name, INSTANCE_PREFIX, strlen(INSTANCE_PREFIX)) != 0)
			continue;
		if (appl_path_join(dir, sizeof(dir), state, "/", de->d_name) < 0 ||
		    appl_path_join(lock, sizeof(lock), dir, "/lock", "") < 0)
			continue;
		fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			instance_reclaim(runsc, dir, de->d_name, rootless);
		close(fd);
	}
	if (d)
		closedir(d);
}

/* Make our directory under a temporary name, lock it, then give it its
 * real name: a sibling cleaning up never sees it unlocked. */
static int instance_create(struct sandbox_rt *rt, const char *state, struct appl_err *err)
{
	unsigned char rnd[6];
	char hex[13], tmp[PATH_MAX], path[PATH_MAX * 2];
	int rc = 0;

	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(hex, sizeof(hex), rnd, sizeof(rnd));
	snprintf(rt->name, sizeof(rt->name), INSTANCE_PREFIX "%d-%s", (int)getpid(), hex);
	if (appl_path_join(tmp, sizeof(tmp), state, "/.new-", rt->name) < 0 ||
	    appl_path_join(rt->dir, sizeof(rt->dir), state, "/", rt->name) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	if (mkdir(tmp, 0700) < 0)
		return appl_err_errno(err, -errno, errno, "creating %s", tmp);
	if (appl_path_join(path, sizeof(path), tmp, "/lock", "") < 0) {
		appl_tree_remove(tmp);
		return appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
	}
	rt->lock = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (rt->lock < 0 || flock(rt->lock, LOCK_EX | LOCK_NB) < 0)
		rc = appl_err_errno(err, -errno, errno, "locking %s", path);
	static const char *const subdirs[] = {"/runsc", "/bundles"};
	for (size_t i = 0; rc == 0 && i < 2; i++) {
		if (appl_path_join(path, sizeof(path), tmp, subdirs[i], "") < 0)
			rc = appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
		else if (mkdir(path, 0700) < 0)
			rc = appl_err_errno(err, -errno, errno, "creating %s", path);
	}
	if (rc == 0 && rename(tmp, rt->dir) < 0)
		rc = appl_err_errno(err, -errno, errno, "creating %s", rt->dir);
	if (rc < 0)
		appl_tree_remove(tmp);
	return rc;
}

struct sandbox_rt *sandbox_rt_open(const struct sandbox_rt_config *cfg, struct appl_err *err)
{
	char state[PATH_MAX];
	struct sandbox_rt *rt;
	const char *runsc = cfg->runsc ? cfg->runsc : SANDBOX_RUNSC_DEFAULT;
	const char *platform = cfg->platform ? cfg->platform : SANDBOX_PLATFORM_DEFAULT;
	struct sandbox_runsc_version v;

	if (geteuid() != 0 && !cfg->rootless) {
		appl_err_set(err, -EPERM,
			     "not running as root: the sandbox needs root for its cgroups and "
			     "its privilege separation; the weaker rootless mode must be asked "
			     "for explicitly (--rootless, or runtime.rootless in the policy)");
		return NULL;
	}
	if (runsc_check(runsc, err) < 0 || platform_check(platform, err) < 0 ||
	    sandbox_runsc_version_get(runsc, &v, err) < 0 ||
	    sandbox_runsc_version_check(&v, runsc, err) < 0)
		return NULL;
	if (cfg->state_dir)
		snprintf(state, sizeof(state), "%s", cfg->state_dir);
	else if (state_dir_default(state, sizeof(state), err) < 0)
		return NULL;
	if (appl_private_dir(state, "runtime directory", err) < 0)
		return NULL;
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(rt->runsc, sizeof(rt->runsc), "%s", runsc);
	snprintf(rt->platform, sizeof(rt->platform), "%s", platform);
	snprintf(rt->version, sizeof(rt->version), "%s", v.text);
	rt->release = v.date;
	rt->rootless = cfg->rootless;
	rt->lock = -1;
	instances_reclaim(rt->runsc, state, rt->rootless);
	if (instance_create(rt, state, err) < 0) {
		if (rt->lock >= 0)
			close(rt->lock);
		free(rt);
		return NULL;
	}
	return rt;
}

const char *sandbox_rt_dir(const struct sandbox_rt *rt)
{
	return rt->dir;
}

const char *sandbox_rt_version(const struct sandbox_rt *rt)
{
	return rt->version;
}

bool sandbox_rt_erofs(const struct sandbox_rt *rt)
{
	return rt->release >= APPL_RUNSC_EROFS_DATE;
}

void sandbox_rt_close(struct sandbox_rt *rt)
{
	char cg[128];

	if (!rt)
		return;
	deferred_flush_sync(rt);
	loop_timer_free(rt->def_timer);
	while (rt->all)
		sandbox_destroy(rt->all); /* also finishes those torn down from a loop */
	if (!rt->rootless && appl_path_join(cg, sizeof(cg), CGROUP_BASE "/", rt->name, "") == 0)
		cgroups_remove(cg);
	appl_tree_remove(rt->dir);
	close(rt->lock);
	free(rt);
}

/* As root, each sandbox gets a memory cgroup of ours, with the limit, and
 * runsc makes its own below it. runsc removes its cgroup when the sandbox
 * ends; ours stays until sandbox_destroy, so what happened (the limit was
 * hit) can still be read after an OOM kill took the sandbox down. */
static int memcg_make(struct sandbox *sb, unsigned memory_mb, struct appl_err *err)
{
	char dir[PATH_MAX], file[PATH_MAX], val[32];
	unsigned long long limit = ((unsigned long long)memory_mb + APPL_GVISOR_ALLOWANCE_MB) << 20;
	int fd, n, rc;

	if (access(MEMCG_V1 "/memory.limit_in_bytes", F_OK) < 0)
		return 0; /* no v1 memory hierarchy: runsc's own cgroup still limits */
	if (appl_path_join(dir, sizeof(dir), MEMCG_V1, sb->cgroup, "") < 0 ||
	    appl_path_join(file, sizeof(file), dir, "/memory.limit_in_bytes", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
	rc = appl_mkdir_parents(dir, 0755);
	if (rc < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return appl_err_errno(err, rc < 0 ? rc : -errno, rc < 0 ? -rc : errno,
				      "creating cgroup %s", dir);
	n = snprintf(val, sizeof(val), "%llu", limit);
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n) {
		rc = appl_err_errno(err, -errno, errno, "setting %s", file);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	sb->memcg = 1;
	return 0;
}

static int bundle_write(struct sandbox *sb, struct sandbox_oci_params *p, struct appl_err *err)
{
	char leaf[sizeof(sb->cgroup) + 16];
	char path[PATH_MAX + 16], *text;
	json_t *cfg;
	int fd, rc = 0;

	if (mkdir(sb->bundle, 0700) < 0)
		return appl_err_errno(err, -errno, errno, "creating %s", sb->bundle);
	p->rootless = sb->rt->rootless;
	p->cgroups_path = NULL;
	if (sb->cgroup[0]) {
		int made = memcg_make(sb, p->memory_mb, err);
		if (made < 0)
			return made;
		if (appl_path_join(leaf, sizeof(leaf), sb->cgroup, "/sandbox", "") < 0)
			return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
		p->cgroups_path = leaf;
	}
	cfg = sandbox_ociconfig_new(p, err);
	if (!cfg)
		return err ? err->code : -EINVAL;
	/* One write of the whole text: json_dumpfd writes each token with a
	 * system call of its own, hundreds of them, inside the event loop. */
	text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	if (!text)
		return appl_err_set(err, -ENOMEM, "config.json: out of memory");
	if (appl_path_join(path, sizeof(path), sb->bundle, "/config.json", "") < 0) {
		free(text);
		return appl_err_set(err, -ENAMETOOLONG, "bundle path too long");
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		rc = appl_err_errno(err, -errno, errno, "%s", path);
	else if ((rc = appl_fd_write_all(fd, text, strlen(text))) < 0)
		rc = appl_err_errno(err, rc, -rc, "%s: write failed", path);
	if (fd >= 0)
		close(fd);
	free(text);
	return rc;
}

/* Start `runsc run`: the runner's stdin and stdout are our pipes, stderr and
 * runsc's own log (--log; by default runsc would log to stdout, which is the
 * protocol stream) go to a file in the bundle. */
static int runsc_run(struct sandbox *sb, int child_in, int child_out, const char *image,
		     struct appl_err *err)
{
	struct sandbox_rt *rt = sb->rt;
	char root[PATH_MAX + 16], log[PATH_MAX + 16], platform[32], logpath[PATH_MAX + 16];
	char imgarg[PATH_MAX + 16];
	char *argv[16];
	int n = 0, logfd, rc;
	struct proc_spec spec = {.path = rt->runsc, .envp = runsc_env, .no_new_privs = true};

	if (appl_path_join(root, sizeof(root), "--root=", rt->dir, "/runsc") < 0 ||
	    appl_path_join(logpath, sizeof(logpath), sb->bundle, "/runsc.log", "") < 0 ||
	    appl_path_join(log, sizeof(log), "--log=", logpath, "") < 0 ||
	    (image && appl_path_join(imgarg, sizeof(imgarg), "--image-path=", image, "") < 0))
		return appl_err_set(err, -ENAMETOOLONG, "bundle path too long");
	snprintf(platform, sizeof(platform), "--platform=%s", rt->platform);
	argv[n++] = rt->runsc;
	argv[n++] = root;
	argv[n++] = "--network=none";
	if (rt->release >= APPL_RUNSC_NO_DIRECTFS_DATE)
		argv[n++] = "--directfs=false";
	argv[n++] = platform;
	argv[n++] = log;
	argv[n++] = "--log-format=text";
	if (rt->rootless)
		argv[n++] = "--rootless";
	if (image) {
		argv[n++] = "restore";
		argv[n++] = imgarg;
	} else {
		argv[n++] = "run";
	}
	argv[n++] = "--bundle";
	argv[n++] = sb->bundle;
	argv[n++] = sb->id;
	argv[n] = NULL;
	spec.argv = argv;
	logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (logfd < 0)
		return appl_err_errno(err, -errno, errno, "%s", logpath);
	spec.fds[0] = child_in;
	spec.fds[1] = child_out;
	spec.fds[2] = logfd;
	rc = proc_spawn(&spec, &sb->pid, &sb->pidfd, err);
	close(logfd);
	return rc;
}

static int pipes_open(struct sandbox *sb, int child[2], struct appl_err *err)
{
	int in[2], out[2];

	if (pipe2(in, O_CLOEXEC) < 0)
		return appl_err_errno(err, -errno, errno, "pipe");
	if (pipe2(out, O_CLOEXEC) < 0) {
		int e = errno;
		close(in[0]);
		close(in[1]);
		return appl_err_errno(err, -e, e, "pipe");
	}
	/* Our ends never block the loop; the runner's ends stay blocking. */
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	sb->fd_in = in[1];
	sb->fd_out = out[0];
	child[0] = in[0];
	child[1] = out[1];
	return 0;
}

static struct sandbox *sandbox_boot(struct sandbox_rt *rt, const struct sandbox_oci_params *params,
				    const char *image, struct appl_err *err)
{
	struct sandbox_oci_params p = *params;
	struct sandbox *sb = calloc(1, sizeof(*sb));
	unsigned char rnd[4];
	char hex[9];
	int child[2] = {-1, -1}, rc;

	if (!sb) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	sb->rt = rt;
	sb->pid = -1;
	sb->pidfd = sb->fd_in = sb->fd_out = -1;
	sb->del_pidfd = -1;
	randombytes_buf(rnd, sizeof(rnd));
	sodium_bin2hex(hex, sizeof(hex), rnd, sizeof(rnd));
	snprintf(sb->id, sizeof(sb->id), "cell-%lu-%s", ++rt->next, hex);
	if (appl_path_join(sb->bundle, sizeof(sb->bundle), rt->dir, "/bundles/", sb->id) < 0) {
		appl_err_set(err, -ENAMETOOLONG, "state directory path too long");
		free(sb);
		return NULL;
	}
	if (!rt->rootless)
		snprintf(sb->cgroup, sizeof(sb->cgroup), "/" CGROUP_BASE "/%s/%s", rt->name,
			 sb->id);
	sb->next = rt->all;
	if (rt->all)
		rt->all->prev = sb;
	rt->all = sb;
	rc = bundle_write(sb, &p, err);
	if (rc == 0)
		rc = pipes_open(sb, child, err);
	if (rc == 0)
		rc = runsc_run(sb, child[0], child[1], image, err);
	if (child[0] >= 0)
		close(child[0]);
	if (child[1] >= 0)
		close(child[1]);
	if (rc < 0) {
		sandbox_destroy(sb);
		return NULL;
	}
	return sb;
}

struct sandbox *sandbox_start(struct sandbox_rt *rt, const struct sandbox_oci_params *p,
			      struct appl_err *err)
{
	return sandbox_boot(rt, p, NULL, err);
}

struct sandbox *sandbox_restore(struct sandbox_rt *rt, const struct sandbox_oci_params *p,
				const char *image, struct appl_err *err)
{
	if (rt->rootless || !image || image[0] != '/') {
		appl_err_set(err, -ENOTSUP, "restoring a sandbox needs root and an image path");
		return NULL;
	}
	return sandbox_boot(rt, p, image, err);
}

int sandbox_checkpoint(struct sandbox *sb, const char *image, struct appl_err *err)
{
	struct sandbox_rt *rt = sb->rt;
	char root[PATH_MAX + 16], imgarg[PATH_MAX + 16], logpath[PATH_MAX + 16], log[PATH_MAX + 16];
	char *argv[10];
	int n = 0, pidfd, status, rc;
	bool ended;
	pid_t pid;
	struct proc_spec spec = {
		.path = rt->runsc, .envp = runsc_env, .fds = {-1, -1, -1}, .no_new_privs = true};

	if (rt->rootless)
		return appl_err_set(err, -ENOTSUP, "a rootless sandbox cannot be checkpointed");
	if (appl_path_join(root, sizeof(root), "--root=", rt->dir, "/runsc") < 0 ||
	    appl_path_join(imgarg, sizeof(imgarg), "--image-path=", image, "") < 0 ||
	    appl_path_join(logpath, sizeof(logpath), sb->bundle, "/checkpoint.log", "") < 0 ||
	    appl_path_join(log, sizeof(log), "--log=", logpath, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "checkpoint path too long");
	if (mkdir(image, 0700) < 0)
		return appl_err_errno(err, -errno, errno, "creating %s", image);
	argv[n++] = rt->runsc;
	argv[n++] = root;
	argv[n++] = log;
	argv[n++] = "--log-format=text";
	argv[n++] = "checkpoint";
	argv[n++] = "--compression=none";
	argv[n++] = "--exclude-committed-zero-pages";
	argv[n++] = imgarg;
	argv[n++] = sb->id;
	argv[n] = NULL;
	spec.argv = argv;
	if ((rc = proc_spawn(&spec, &pid, &pidfd, err)) < 0)
		return rc;
	status = runsc_finish(pid, pidfd, &ended);
	if (!ended)
		return appl_err_set(err, -ETIMEDOUT, "runsc checkpoint did not finish in %d ms",
				    RUNSC_DELETE_TIMEOUT_MS);
	if (status != 0)
		return appl_err_set(err, -EIO, "runsc checkpoint failed (status %d; see %s)",
				    status, logpath);
	return 0;
}

/* runsc's cgroup of sb with a freezer (v1 first, else v2), in dir, and
 * its control file in ctl (freezer.state or cgroup.freeze); -ENOTSUP when
 * there is neither. */
static int freezer_find(const struct sandbox *sb, char dir[PATH_MAX], char ctl[PATH_MAX], bool *v2)
{
	static const char *const roots[] = {FREEZER_V1, "/sys/fs/cgroup"};
	static const char *const files[] = {"/freezer.state", "/cgroup.freeze"};

	for (size_t i = 0; sb->cgroup[0] && i < 2; i++) {
		if (appl_path_join(dir, PATH_MAX, roots[i], sb->cgroup, "/sandbox") < 0 ||
		    appl_path_join(ctl, PATH_MAX, dir, files[i], "") < 0)
			return -ENAMETOOLONG;
		if (access(ctl, W_OK) == 0) {
			*v2 = i == 1;
			return 0;
		}
	}
	return -ENOTSUP;
}

int sandbox_freeze(struct sandbox *sb, bool frozen, struct appl_err *err)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *val;
	bool v2;
	int fd, rc = freezer_find(sb, dir, path, &v2);

	if (rc < 0)
		return appl_err_set(err, rc, "no freezer for sandbox %s", sb->id);
	val = v2 ? (frozen ? "1" : "0") : (frozen ? "FROZEN" : "THAWED");
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", path);
	rc = appl_fd_write_all(fd, val, strlen(val));
	close(fd);
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "writing %s to %s", val, path);
	sb->frozen = frozen;
	return 0;
}

/* Whether the status text of a process (/proc/PID/status) shows SIGKILL
 * pending, for the thread (SigPnd) or the process (ShdPnd). */
static bool kill_pending(const char *status)
{
	static const char *const keys[] = {"\nSigPnd:", "\nShdPnd:"};

	for (size_t i = 0; i < 2; i++) {
		const char *at = strstr(status, keys[i]);
		unsigned long long mask;

		if (at && sscanf(at + strlen(keys[i]), "%llx", &mask) == 1 &&
		    (mask & (1ull << (SIGKILL - 1))))
			return true;
	}
	return false;
}

bool sandbox_doomed(const struct sandbox *sb)
{
	char dir[PATH_MAX], path[PATH_MAX], text[2048];
	bool v2, doomed = false;
	FILE *procs;
	int pid;

	if (!sb->frozen || freezer_find(sb, dir, path, &v2) < 0 ||
	    appl_path_join(path, sizeof(path), dir, "/cgroup.procs", "") < 0 ||
	    !(procs = fopen(path, "re")))
		return false;
	while (!doomed && fscanf(procs, "%d", &pid) == 1) {
		char st[64];
		FILE *f;
		size_t n;

		snprintf(st, sizeof(st), "/proc/%d/status", pid);
		if (!(f = fopen(st, "re")))
			continue;
		n = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[n] = '\0';
		doomed = kill_pending(text);
	}
	fclose(procs);
	return doomed;
}

/* A frozen sandbox is thawed before it is killed (best effort: the kill
 * follows either way). */
static void thaw(struct sandbox *sb)
{
	if (sb->frozen)
		(void)sandbox_freeze(sb, false, NULL);
}

int sandbox_fd_in(const struct sandbox *sb)
{
	return sb->fd_in;
}

int sandbox_fd_out(const struct sandbox *sb)
{
	return sb->fd_out;
}

int sandbox_pidfd(const struct sandbox *sb)
{
	return sb->pidfd;
}

const char *sandbox_id(const struct sandbox *sb)
{
	return sb->id;
}

/* Our memory cgroup counts every time the sandbox hit its limit
 * (memory.failcnt); a sandbox that died after that died of memory. */
int sandbox_oom_killed(const struct sandbox *sb)
{
	char path[PATH_MAX];
	unsigned long long failcnt = 0;
	FILE *fp;

	if (!sb->memcg ||
	    appl_path_join(path, sizeof(path), MEMCG_V1, sb->cgroup, "/memory.failcnt") < 0)
		return 0;
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	if (fscanf(fp, "%llu", &failcnt) != 1)
		failcnt = 0;
	fclose(fp);
	return failcnt > 0;
}

void sandbox_kill(struct sandbox *sb)
{
	if (sb && sb->pid > 0) {
		thaw(sb);
		proc_kill_group(sb->pid);
	}
}

/* The last of a teardown: nothing of the sandbox runs any more. */
static void teardown_finish(struct sandbox *sb)
{
	struct sandbox_rt *rt = sb->rt;

	if (sb->cgroup[0])
		cgroups_remove(sb->cgroup + 1);
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->fd_in >= 0)
		close(sb->fd_in);
	if (sb->fd_out >= 0)
		close(sb->fd_out);
	appl_tree_remove(sb->bundle);
	if (sb->prev)
		sb->prev->next = sb->next;
	else
		rt->all = sb->next;
	if (sb->next)
		sb->next->prev = sb->prev;
	free(sb);
}

/* Stop watching: what is left of a loop teardown is done here and now. */
static void teardown_unwatch(struct sandbox *sb)
{
	if (!sb->td_loop)
		return;
	if (sb->pidfd >= 0)
		loop_del(sb->td_loop, sb->pidfd);
	if (sb->del_pidfd >= 0)
		loop_del(sb->td_loop, sb->del_pidfd);
	loop_timer_free(sb->td_timer);
	sb->td_timer = NULL;
	sb->td_loop = NULL;
}

/* Take sb out of rt->deferred. */
static void deferred_unlink(struct sandbox *sb)
{
	struct sandbox_rt *rt = sb->rt;

	for (struct sandbox **at = &rt->deferred; *at; at = &(*at)->batch)
		if (*at == sb) {
			*at = sb->batch;
			break;
		}
	sb->batch = NULL;
	sb->deferred = false;
	if (!rt->deferred && rt->def_timer)
		loop_timer_set(rt->def_timer, 0);
}

/* Take sb, a member of a batch whose delete runs, out of its leader's chain. */
static void batch_unlink(struct sandbox *sb)
{
	for (struct sandbox **at = &sb->leader->batch; *at; at = &(*at)->batch)
		if (*at == sb) {
			*at = sb->batch;
			break;
		}
	sb->batch = NULL;
	sb->leader = NULL;
}

/* The delete of leader's batch is over: finish every member, then it. */
static void batch_finish(struct sandbox *leader)
{
	struct sandbox *m = leader->batch, *next;

	leader->batch = NULL;
	for (; m; m = next) {
		next = m->batch;
		m->batch = NULL;
		m->leader = NULL;
		teardown_unwatch(m);
		teardown_finish(m);
	}
	teardown_finish(leader);
}

/* Delete every deferred sandbox now, with one runsc delete, and wait. */
static void deferred_flush_sync(struct sandbox_rt *rt)
{
	struct sandbox *first = rt->deferred;
	pid_t pid;
	int pidfd;

	if (!first)
		return;
	rt->deferred = NULL;
	if (rt->def_timer)
		loop_timer_set(rt->def_timer, 0);
	if (runsc_spawn_delete(rt, first, &pid, &pidfd) == 0)
		runsc_finish(pid, pidfd, NULL);
	teardown_unwatch(first);
	batch_finish(first); /* first leads the rest, as in a batch from the loop */
}

void sandbox_destroy(struct sandbox *sb)
{
	struct sandbox_rt *rt;
	char root[PATH_MAX + 8];

	if (!sb)
		return;
	rt = sb->rt;
	thaw(sb);
	teardown_unwatch(sb);
	if (sb->deferred) {
		/* dead, waiting for a batch: its own delete, now */
		deferred_unlink(sb);
		if (appl_path_join(root, sizeof(root), rt->dir, "/runsc", "") == 0)
			runsc_call(rt->runsc, root, rt->rootless, "delete", sb->id);
	} else if (sb->leader) {
		/* its delete runs in the leader's batch, which finishes without it */
		batch_unlink(sb);
	} else if (sb->del_pid > 0) {
		/* a loop teardown was waiting for runsc delete: finish it, and
		 * the rest of its batch with it */
		runsc_finish(sb->del_pid, sb->del_pidfd, NULL);
		sb->del_pid = 0;
		sb->del_pidfd = -1;
		batch_finish(sb);
		return;
	} else if (sb->pid > 0) {
		/* runsc run and its gofer share its process group; the sandbox
		 * process (its own session) dies with runsc run, which started
		 * it attached. delete -force then clears what remains. */
		proc_kill_group(sb->pid);
		if (proc_wait_exit(sb->pidfd, RUNSC_EXIT_TIMEOUT_MS) != 1)
			kill(sb->pid, SIGKILL);
		proc_wait(sb->pid);
		if (appl_path_join(root, sizeof(root), rt->dir, "/runsc", "") == 0)
			runsc_call(rt->runsc, root, rt->rootless, "delete", sb->id);
	}
	teardown_finish(sb);
}

static void on_delete_exit(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct sandbox *sb = data;
	(void)loop;
	(void)fd;
	(void)events;

	teardown_unwatch(sb);
	proc_wait(sb->del_pid);
	close(sb->del_pidfd);
	sb->del_pid = 0;
	sb->del_pidfd = -1;
	batch_finish(sb);
}

/* Whether runsc still keeps state of sb in its root (a runsc run that
 * ended by itself has deleted its container, state and all). */
static bool runsc_state_left(const struct sandbox *sb)
{
	char root[PATH_MAX];
	DIR *d;
	struct dirent *de;
	bool left = false;

	if (appl_path_join(root, sizeof(root), sb->rt->dir, "/runsc", "") < 0 ||
	    !(d = opendir(root)))
		return true;
	while (!left && (de = readdir(d)))
		left = strstr(de->d_name, sb->id) != NULL;
	closedir(d);
	return left;
}

/* Whether the cgroup dir or one below it (runsc's own, depth 1) holds a
 * process; true when it cannot be read. */
static bool cgroup_busy(const char *dir, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool busy;
	FILE *fp;
	DIR *d;
	int pid;

	if (appl_path_join(path, sizeof(path), dir, "/cgroup.procs", "") < 0 ||
	    !(fp = fopen(path, "re")))
		return true;
	busy = fscanf(fp, "%d", &pid) == 1;
	fclose(fp);
	if (busy || depth > 0)
		return busy;
	if (!(d = opendir(dir)))
		return true;
	while (!busy && (de = readdir(d)))
		if (de->d_type == DT_DIR && de->d_name[0] != '.')
			busy = appl_path_join(path, sizeof(path), dir, "/", de->d_name) < 0 ||
			       cgroup_busy(path, depth + 1);
	closedir(d);
	return busy;
}

/* A batch is due: one runsc delete for every deferred sandbox, watched
 * from the loop through the first of them (the leader); the others are
 * finished with it. When it cannot start, each is deleted here and now. */
static void deferred_flush(struct sandbox_rt *rt)
{
	struct sandbox *leader = rt->deferred, *m;

	if (!leader)
		return;
	if (runsc_spawn_delete(rt, leader, &leader->del_pid, &leader->del_pidfd) < 0 ||
	    loop_add(rt->def_loop, leader->del_pidfd, EPOLLIN, on_delete_exit, leader, NULL) < 0) {
		if (leader->del_pid > 0) {
			runsc_finish(leader->del_pid, leader->del_pidfd, NULL);
			leader->del_pid = 0;
			leader->del_pidfd = -1;
		}
		deferred_flush_sync(rt);
		return;
	}
	rt->deferred = NULL;
	loop_timer_set(rt->def_timer, 0);
	for (m = leader; m; m = m->batch) {
		m->deferred = false;
		if (m != leader)
			m->leader = leader;
	}
	loop_timer_set(leader->td_timer, RUNSC_DELETE_TIMEOUT_MS);
}

static void on_deferred_timer(void *data)
{
	deferred_flush(data);
}

/* Defer the delete of sb, dead (its runsc ended by itself and no process
 * is left in its cgroups) but with runsc state left, to a batch. false
 * when it cannot wait: rootless or without a memory cgroup of ours (we
 * could not tell it is dead), or its loop is not the batch's. */
static bool batch_defer(struct sandbox *sb)
{
	struct sandbox_rt *rt = sb->rt;
	struct sandbox **at = &rt->deferred;
	unsigned waiting = 1;
	char dir[PATH_MAX];

	if (!sb->memcg || appl_path_join(dir, sizeof(dir), MEMCG_V1, sb->cgroup, "") < 0 ||
	    cgroup_busy(dir, 0))
		return false;
	if (rt->def_loop != sb->td_loop) {
		if (rt->deferred)
			return false;
		loop_timer_free(rt->def_timer);
		rt->def_timer = loop_timer_new(sb->td_loop, on_deferred_timer, rt, NULL);
		rt->def_loop = rt->def_timer ? sb->td_loop : NULL;
		if (!rt->def_timer)
			return false;
	}
	loop_timer_set(sb->td_timer, 0); /* the leader's timer bounds the batch */
	sb->deferred = true;
	sb->batch = NULL;
	for (; *at; at = &(*at)->batch) /* in order: the first is the oldest */
		waiting++;
	*at = sb;
	if (waiting >= RUNSC_DELETE_BATCH)
		deferred_flush(rt);
	else if (waiting == 1)
		loop_timer_set(rt->def_timer, RUNSC_DELETE_BATCH_MS);
	return true;
}

/* runsc run has exited: reap it and start runsc delete, unless it ended
 * by itself and left nothing to delete, or it can wait for a batch. */
static void teardown_delete(struct sandbox *sb)
{
	struct sandbox_rt *rt = sb->rt;
	char root[PATH_MAX + 8];
	struct loop *loop = sb->td_loop;

	loop_del(loop, sb->pidfd);
	proc_wait(sb->pid);
	sb->pid = 0;
	if (sb->ending && !runsc_state_left(sb)) {
		teardown_unwatch(sb);
		teardown_finish(sb);
		return;
	}
	if (sb->ending && batch_defer(sb))
		return;
	if (appl_path_join(root, sizeof(root), rt->dir, "/runsc", "") < 0 ||
	    runsc_spawn(rt->runsc, root, rt->rootless, "delete", sb->id, &sb->del_pid,
			&sb->del_pidfd) < 0 ||
	    loop_add(loop, sb->del_pidfd, EPOLLIN, on_delete_exit, sb, NULL) < 0) {
		sandbox_destroy(sb); /* the slow way, as a last resort */
		return;
	}
	/* runsc delete waits for the sandbox process, our zombie once
	 * orphaned: the owner's SIGCHLD watch reaps it (proc_reap_orphans);
	 * the timer only bounds the wait. */
	loop_timer_set(sb->td_timer, RUNSC_DELETE_TIMEOUT_MS);
}

static void on_run_exit(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)fd;
	(void)events;
	teardown_delete(data);
}

static void on_teardown_timer(void *data)
{
	struct sandbox *sb = data;

	if (sb->del_pid <= 0 && sb->ending) {
		/* its runner ended, but runsc did not within RUNSC_CLEAN_EXIT_MS */
		sb->ending = false;
		proc_kill_group(sb->pid);
		loop_timer_set(sb->td_timer, RUNSC_EXIT_TIMEOUT_MS);
		return;
	}
	if (sb->del_pid <= 0) {
		/* runsc run did not go within RUNSC_EXIT_TIMEOUT_MS */
		kill(sb->pid, SIGKILL);
		return;
	}
	/* runsc delete did not finish within RUNSC_DELETE_TIMEOUT_MS; its exit
	 * ends the teardown. */
	proc_reap_orphans();
	proc_kill_group(sb->del_pid);
}

void sandbox_rt_settle(struct sandbox_rt *rt)
{
	struct sandbox *sb;

	if (!rt)
		return;
	deferred_flush_sync(rt);
	loop_timer_free(rt->def_timer); /* its loop is about to go */
	rt->def_timer = NULL;
	rt->def_loop = NULL;
	/* from the start again after each: a batch's leader takes its members */
	for (sb = rt->all; sb;) {
		if (sb->td_loop) {
			sandbox_destroy(sb);
			sb = rt->all;
		} else {
			sb = sb->next;
		}
	}
}

void sandbox_destroy_async(struct sandbox *sb, struct loop *loop)
{
	if (!sb)
		return;
	if (sb->pid <= 0 || sb->td_loop) {
		if (!sb->td_loop)
			sandbox_destroy(sb);
		return;
	}
	thaw(sb);
	/* Nothing more is read from or written to it. */
	if (sb->fd_in >= 0) {
		close(sb->fd_in);
		sb->fd_in = -1;
	}
	if (sb->fd_out >= 0) {
		close(sb->fd_out);
		sb->fd_out = -1;
	}
	/* A runner that ended by itself lets runsc clean up: one runsc process
	 * (runsc delete) fewer per cell. Any other is killed now. */
	if (!sb->ending)
		proc_kill_group(sb->pid);
	sb->td_timer = loop_timer_new(loop, on_teardown_timer, sb, NULL);
	if (!sb->td_timer) {
		sandbox_destroy(sb);
		return;
	}
	sb->td_loop = loop;
	if (loop_add(loop, sb->pidfd, EPOLLIN, on_run_exit, sb, NULL) < 0) {
		sandbox_destroy(sb);
		return;
	}
	loop_timer_set(sb->td_timer, sb->ending ? RUNSC_CLEAN_EXIT_MS : RUNSC_EXIT_TIMEOUT_MS);
}

void sandbox_ending(struct sandbox *sb)
{
	sb->ending = true;
}
