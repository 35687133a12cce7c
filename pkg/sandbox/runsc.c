/* runsc.c: the runsc side of a cell sandbox (see runsc.h): opening and
 * closing an instance, starting, restoring and checkpointing sandboxes.
 * Ending them is teardown.c's, their cgroups cgroup.c's, running runsc
 * commands invoke.c's (runsc_int.h). */
#define _GNU_SOURCE
#include "sandbox/runsc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "base/fs.h"
#include "loop/loop.h"
#include "proc/proc.h"
#include "sandbox/runsc_int.h"

#define INSTANCE_PREFIX "i-"

/* The platforms this appliance accepts. Any other runsc flag is fixed by
 * the code below; none comes from configuration. */
static const char *const platforms[] = {"systrap", "ptrace", "kvm", NULL};

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
	/* A v1 frozen task cannot die; a v2 one can. */
	if (!rootless && access(FREEZER_V1, F_OK) == 0 &&
	    appl_path_join(cg, sizeof(cg), FREEZER_V1 "/" CGROUP_BASE "/", name, "") == 0)
		cgroup_freezer_thaw_tree(cg, 0);
	d = opendir(bundles);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			runsc_call(runsc, root, rootless, "delete", de->d_name);
	if (d)
		closedir(d);
	if (!rootless && cgroup_cells_rel(name, cg, sizeof(cg)) == 0)
		cgroup_tree_remove(cg);
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
	char cg[PATH_MAX];

	if (!rt)
		return;
	teardown_flush_sync(rt);
	loop_timer_free(rt->def_timer);
	while (rt->all)
		sandbox_destroy(rt->all); /* also finishes those torn down from a loop */
	if (!rt->rootless && cgroup_cells_rel(rt->name, cg, sizeof(cg)) == 0)
		cgroup_tree_remove(cg);
	appl_tree_remove(rt->dir);
	close(rt->lock);
	free(rt);
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
		int made = cgroup_memcg_make(sb, p->memory_mb, err);
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
	if (!rt->rootless) {
		char cells[PATH_MAX];

		if (cgroup_cells_rel(rt->name, cells, sizeof(cells)) < 0 ||
		    snprintf(sb->cgroup, sizeof(sb->cgroup), "/%s/%s", cells, sb->id) >=
			    (int)sizeof(sb->cgroup)) {
			appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
			free(sb);
			return NULL;
		}
	}
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
