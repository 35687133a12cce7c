/* cgroup.c: a sandbox's cgroups (see runsc.h, runsc_int.h): the memory
 * cgroup of ours with its limit, the freezer, and their removal; on cgroup
 * v1 at the root of each hierarchy, on v2 below the appliance's subtree
 * (pkg/cgroup). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/limits.h"
#include "cgroup/cgroup.h"
#include "sandbox/runsc_int.h"

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
void cgroup_tree_remove(const char *rel)
{
	char path[PATH_MAX];

	for (size_t i = 0; cgroup_roots[i]; i++)
		if (appl_path_join(path, sizeof(path), cgroup_roots[i], "/", rel) == 0)
			cgroup_rmdir_tree(path, 0);
}

/* Thaw every freezer cgroup at or below path: a frozen task cannot die, so
 * a crashed instance's frozen sandboxes are thawed before they are killed. */
void cgroup_freezer_thaw_tree(const char *path, int depth)
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
			cgroup_freezer_thaw_tree(sub, depth + 1);
	closedir(d);
}

int cgroup_cells_rel(const char *name, char *out, size_t cap)
{
	const struct cg_host *h = cg_host();
	int n = h->kind == CG_V2 ? snprintf(out, cap, "%s/cells/%s", h->subtree + 1, name)
				 : snprintf(out, cap, CGROUP_BASE "/%s", name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int cgroup_memcg_dir(const struct sandbox *sb, char out[PATH_MAX])
{
	const struct cg_host *h = cg_host();

	return appl_path_join(out, PATH_MAX, h->kind == CG_V2 ? h->mount : MEMCG_V1, sb->cgroup,
			      "");
}

/* v2: ours below the subtree, handing memory (and cpu) down to runsc's. */
static int memcg_make_v2(struct sandbox *sb, const char *limit, struct appl_err *err)
{
	const struct cg_host *h = cg_host();
	char dir[PATH_MAX];
	size_t skip = strlen(h->subtree) + 1;

	if (strncmp(sb->cgroup, h->subtree, skip - 1) != 0 || sb->cgroup[skip - 1] != '/')
		return appl_err_set(err, -EINVAL, "the sandbox's cgroup is outside the subtree");
	if (cg_make(h, sb->cgroup + skip, true, dir, err) < 0 ||
	    cg_write(dir, "memory.max", limit, err) < 0 ||
	    cg_write(dir, "memory.swap.max", "0", err) < 0)
		return err->code;
	sb->memcg = 1;
	return 0;
}

/* As root, each sandbox gets a memory cgroup of ours, with the limit, and
 * runsc makes its own below it. runsc removes its cgroup when the sandbox
 * ends; ours stays until sandbox_destroy, so what happened (the limit was
 * hit) can still be read after an OOM kill took the sandbox down. On v2
 * there is no swap either: the limit is the limit. */
int cgroup_memcg_make(struct sandbox *sb, unsigned memory_mb, struct appl_err *err)
{
	char dir[PATH_MAX], file[PATH_MAX], val[32];
	unsigned long long limit = ((unsigned long long)memory_mb + APPL_GVISOR_ALLOWANCE_MB) << 20;
	int fd, n, rc;

	n = snprintf(val, sizeof(val), "%llu", limit);
	if (cg_host()->kind == CG_V2)
		return memcg_make_v2(sb, val, err);
	if (access(MEMCG_V1 "/memory.limit_in_bytes", F_OK) < 0)
		return 0; /* no v1 memory hierarchy: runsc's own cgroup still limits */
	if (appl_path_join(dir, sizeof(dir), MEMCG_V1, sb->cgroup, "") < 0 ||
	    appl_path_join(file, sizeof(file), dir, "/memory.limit_in_bytes", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
	rc = appl_mkdir_parents(dir, 0755);
	if (rc < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return appl_err_errno(err, rc < 0 ? rc : -errno, rc < 0 ? -rc : errno,
				      "creating cgroup %s", dir);
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

/* v1's freezer.state words, in enum sandbox_freezer_state's order. */
static const char *const freezer_words[] = {"THAWED", "FREEZING", "FROZEN"};

int sandbox_freezer_parse(const char *text, bool v2, enum sandbox_freezer_state *state)
{
	unsigned long long frozen;

	if (v2) {
		if (cg_key_parse(text, "frozen", &frozen) < 0 || frozen > 1)
			return -EINVAL;
		*state = frozen ? SANDBOX_FROZEN : SANDBOX_THAWED;
		return 0;
	}
	for (size_t i = 0; i < sizeof(freezer_words) / sizeof(freezer_words[0]); i++) {
		size_t n = strlen(freezer_words[i]);

		if (strncmp(text, freezer_words[i], n) == 0 &&
		    strcmp(text + n, text[n] ? "\n" : "") == 0) {
			*state = (enum sandbox_freezer_state)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* v2's cgroup.events says frozen only once every task stopped; until
 * then dir's cgroup.freeze tells a freeze asked for from none. */
static void v2_freezing(const char *dir, struct sandbox_freezer *out)
{
	char asked[16];

	if (out->state == SANDBOX_THAWED &&
	    cg_read(dir, "cgroup.freeze", asked, sizeof(asked)) == 0 && asked[0] == '1')
		out->state = SANDBOX_FREEZING;
}

int sandbox_freezer_read(const struct sandbox *sb, struct sandbox_freezer *out,
			 struct appl_err *err)
{
	char dir[PATH_MAX], ctl[PATH_MAX], text[256];
	bool v2;
	int rc = freezer_find(sb, dir, ctl, &v2);

	if (rc < 0)
		return appl_err_set(err, rc,
				    "sandbox %s has no freezer: neither %s%s/sandbox/freezer.state "
				    "nor /sys/fs/cgroup%s/sandbox/cgroup.freeze can be written",
				    sb->id, FREEZER_V1, sb->cgroup, sb->cgroup);
	if (appl_path_join(out->path, sizeof(out->path), dir,
			   v2 ? "/cgroup.events" : "/freezer.state", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
	if ((rc = cg_read(dir, v2 ? "cgroup.events" : "freezer.state", text, sizeof(text))) < 0)
		return appl_err_errno(err, rc, -rc, "reading %s", out->path);
	if (sandbox_freezer_parse(text, v2, &out->state) < 0)
		return appl_err_set(err, -EINVAL, "%s says neither frozen nor thawed", out->path);
	if (!v2) {
		snprintf(out->said, sizeof(out->said), "freezer.state %s",
			 freezer_words[out->state]);
		return 0;
	}
	v2_freezing(dir, out);
	snprintf(out->said, sizeof(out->said), "cgroup.events frozen %d%s",
		 out->state == SANDBOX_FROZEN,
		 out->state == SANDBOX_FREEZING ? " (cgroup.freeze 1)" : "");
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
void cgroup_thaw(struct sandbox *sb)
{
	if (sb->frozen)
		(void)sandbox_freeze(sb, false, NULL);
}

/* Our memory cgroup counts every time the sandbox hit its limit
 * (memory.failcnt on v1, memory.events' max on v2); a sandbox that died
 * after that died of memory. */
int sandbox_oom_killed(const struct sandbox *sb)
{
	char dir[PATH_MAX], path[PATH_MAX];
	unsigned long long hits = 0;
	FILE *fp;

	if (!sb->memcg || cgroup_memcg_dir(sb, dir) < 0)
		return 0;
	if (cg_host()->kind == CG_V2)
		return cg_read_key(dir, "memory.events", "max", &hits) == 0 && hits > 0;
	if (appl_path_join(path, sizeof(path), dir, "/memory.failcnt", "") < 0 ||
	    !(fp = fopen(path, "re")))
		return 0;
	if (fscanf(fp, "%llu", &hits) != 1)
		hits = 0;
	fclose(fp);
	return hits > 0;
}

/* What the sandbox holds in memory now: its processes' anonymous and
 * shared pages (gVisor keeps the cell's memory in a shared file, so most
 * of it is shmem), from our memory cgroup's hierarchical counters; the
 * page cache is left out, as the kernel may drop it. -ENOENT without a
 * memory cgroup of ours. */
int sandbox_memory_bytes(const struct sandbox *sb, uint64_t *out)
{
	bool v2 = cg_host()->kind == CG_V2;
	unsigned long long anon = 0, shmem = 0;
	char dir[PATH_MAX];

	if (!sb->memcg || cgroup_memcg_dir(sb, dir) < 0)
		return -ENOENT;
	if (cg_read_key(dir, "memory.stat", v2 ? "anon" : "total_rss", &anon) < 0 ||
	    cg_read_key(dir, "memory.stat", v2 ? "shmem" : "total_shmem", &shmem) < 0)
		return -EIO;
	*out = anon + shmem;
	return 0;
}
