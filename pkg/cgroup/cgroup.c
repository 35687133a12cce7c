/* cgroup.c: which hierarchy, where the appliance's subtree is, and the
 * control files of one cgroup (see cgroup.h). */
#define _GNU_SOURCE
#include "cgroup/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"

#define CTL_MAX 4096 /* a control file read whole: cgroup.procs of a subtree root */

int cg_self_parse(const char *text, char *out, size_t cap)
{
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);

		if (n >= 3 && memcmp(line, "0::", 3) == 0) {
			if (n == 3 || line[3] != '/')
				return -EINVAL;
			if (n - 3 >= cap)
				return -ENAMETOOLONG;
			memcpy(out, line + 3, n - 3);
			out[n - 3] = '\0';
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

int cg_host_decide(struct cg_host *h, const char *mount, bool unified, bool v1_memory,
		   const char *self, struct appl_err *err)
{
	int rc;

	memset(h, 0, sizeof(*h));
	if (snprintf(h->mount, sizeof(h->mount), "%s", mount) >= (int)sizeof(h->mount))
		return appl_err_set(err, -ENAMETOOLONG, "cgroup mount path too long");
	if (!unified) {
		h->kind = v1_memory ? CG_V1 : CG_NONE;
		return 0;
	}
	rc = cg_self_parse(self ? self : "", h->start, sizeof(h->start));
	if (rc < 0)
		return appl_err_set(err, rc,
				    "cgroup v2 at %s, but /proc/self/cgroup names no unified "
				    "cgroup for this process",
				    mount);
	/* In the root cgroup (nothing manages the hierarchy) the subtree is
	 * made below it; anywhere else it is the start cgroup itself. */
	snprintf(h->subtree, sizeof(h->subtree), "%s",
		 strcmp(h->start, "/") == 0 ? "/appliance" : h->start);
	h->kind = CG_V2;
	return 0;
}

bool cg_ours(const struct cg_host *h, uid_t euid)
{
	return h->kind == CG_V2 && euid == 0;
}

struct cg_host *cg_host(void)
{
	static struct cg_host host;
	static bool read;
	struct statfs sf;
	char *self = NULL;
	size_t len;
	bool unified;

	if (read)
		return &host;
	read = true;
	unified = statfs(CG_MOUNT, &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
	if (unified)
		(void)appl_file_read("/proc/self/cgroup", CTL_MAX, &self, &len, NULL);
	if (cg_host_decide(&host, CG_MOUNT, unified,
			   access(CG_MOUNT "/memory/memory.limit_in_bytes", F_OK) == 0, self,
			   NULL) < 0)
		host.kind = CG_NONE;
	free(self);
	return &host;
}

int cg_path(const struct cg_host *h, char out[PATH_MAX], const char *rel)
{
	int n;

	if (h->kind != CG_V2)
		return -ENOTSUP;
	n = rel && rel[0] ? snprintf(out, PATH_MAX, "%s%s/%s", h->mount, h->subtree, rel)
			  : snprintf(out, PATH_MAX, "%s%s", h->mount, h->subtree);
	return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int cg_write(const char *dir, const char *file, const char *val, struct appl_err *err)
{
	char path[PATH_MAX];
	int fd, rc;

	if (appl_path_join(path, sizeof(path), dir, "/", file) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cgroup path too long");
	if ((fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return appl_err_errno(err, -errno, errno, "opening %s", path);
	rc = appl_fd_write_all(fd, val, strlen(val));
	close(fd);
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "writing %s to %s", val, path);
	return 0;
}

int cg_read(const char *dir, const char *file, char *buf, size_t cap)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd;

	if (appl_path_join(path, sizeof(path), dir, "/", file) < 0)
		return -ENAMETOOLONG;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* Whether the space-separated list holds word. */
static bool has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += n)
		if ((p == list || p[-1] == ' ' || p[-1] == '\n') &&
		    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

/* The pids cgroup.procs lists into pids (at most cap): how many, or -errno. */
static int procs_read(const char *dir, long *pids, int cap)
{
	char buf[CTL_MAX], *p, *end;
	int n = 0, rc = cg_read(dir, "cgroup.procs", buf, sizeof(buf));

	if (rc < 0)
		return rc;
	for (p = buf; *p && n < cap; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v > 1)
			pids[n++] = v;
		while (*end == '\n')
			end++;
	}
	return n;
}

/* "+memory +pids [+cpu]" for dir's subtree_control, from what dir has:
 * -ENOENT with the missing one named in err when a needed one is absent. */
static int handdown(const char *dir, char *out, size_t cap, struct appl_err *err)
{
	static const char *const needed[] = {"memory", "pids"};
	char have[512];
	int rc = cg_read(dir, "cgroup.controllers", have, sizeof(have));

	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "reading %s/cgroup.controllers", dir);
	have[strcspn(have, "\n")] = '\0';
	for (size_t i = 0; i < 2; i++)
		if (!has_word(have, needed[i]))
			return appl_err_set(err, -ENOENT,
					    "cgroup v2: %s was given no %s controller (it has: "
					    "%s); the appliance sets memory and pids limits on "
					    "what it starts: run it as a systemd service with "
					    "Delegate=yes (the unit it ships has it), or from a "
					    "shell as systemd-run --scope -p Delegate=yes -- "
					    "appliance ...",
					    dir, needed[i], have[0] ? have : "none");
	snprintf(out, cap, "+memory +pids%s", has_word(have, "cpu") ? " +cpu" : "");
	return 0;
}

/* How many processes dir's cgroup.procs lists besides pid. */
static int others_in(const char *dir, pid_t pid, struct appl_err *err)
{
	long pids[CTL_MAX / 2];
	int n = procs_read(dir, pids, (int)(sizeof(pids) / sizeof(pids[0]))), others = 0;

	if (n < 0)
		return appl_err_errno(err, n, -n, "reading %s/cgroup.procs", dir);
	for (int i = 0; i < n; i++)
		others += pids[i] != (long)pid;
	return others;
}

static int settle_root(struct cg_host *h, struct appl_err *err)
{
	char dir[PATH_MAX], ctl[64];
	int rc;

	if ((rc = handdown(h->mount, ctl, sizeof(ctl), err)) < 0 ||
	    (rc = cg_write(h->mount, "cgroup.subtree_control", ctl, err)) < 0 ||
	    (rc = cg_path(h, dir, NULL)) < 0)
		return rc < 0 ? rc : 0;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return appl_err_errno(err, -errno, errno, "creating the cgroup %s", dir);
	return cg_write(dir, "cgroup.subtree_control", ctl, err);
}

int cg_settle(struct cg_host *h, pid_t pid, struct appl_err *err)
{
	char dir[PATH_MAX], leaf[PATH_MAX], ctl[64], num[24];
	int rc;

	if (h->kind != CG_V2 || h->settled)
		return 0;
	if (strcmp(h->start, "/") == 0) {
		if ((rc = settle_root(h, err)) < 0)
			return rc;
		h->settled = true;
		return 0;
	}
	if ((rc = cg_path(h, dir, NULL)) < 0 || (rc = cg_path(h, leaf, "supervisor")) < 0)
		return appl_err_set(err, rc, "cgroup path too long");
	if ((rc = handdown(dir, ctl, sizeof(ctl), err)) < 0 || (rc = others_in(dir, pid, err)) < 0)
		return rc;
	if (rc > 0)
		return appl_err_set(err, -EBUSY,
				    "cgroup v2: the cgroup the appliance started in, %s, holds "
				    "%d other process%s; limits can be handed down only from a "
				    "cgroup with no process of its own: run the appliance as a "
				    "systemd service with Delegate=yes (the unit it ships has "
				    "it), or from a shell as systemd-run --scope -p Delegate=yes "
				    "-- appliance ...",
				    h->start, rc, rc == 1 ? "" : "es");
	if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
		return appl_err_errno(err, -errno, errno, "creating the cgroup %s", leaf);
	snprintf(num, sizeof(num), "%ld", (long)pid);
	if ((rc = cg_write(leaf, "cgroup.procs", num, err)) < 0 ||
	    (rc = cg_write(dir, "cgroup.subtree_control", ctl, err)) < 0)
		return rc;
	h->settled = true;
	return 0;
}

int cg_make(const struct cg_host *h, const char *rel, bool parent, char dir[PATH_MAX],
	    struct appl_err *err)
{
	char ctl[64];
	size_t base;
	int rc;

	if (!h->settled)
		return appl_err_set(err, -ENOTSUP, "the cgroup v2 subtree is not settled");
	if ((rc = cg_path(h, dir, NULL)) < 0)
		return appl_err_set(err, rc, "cgroup path too long");
	if ((rc = handdown(dir, ctl, sizeof(ctl), err)) < 0)
		return rc;
	base = strlen(dir);
	if ((rc = cg_path(h, dir, rel)) < 0)
		return appl_err_set(err, rc, "cgroup path too long");
	/* Each level below the subtree, top down: made, then its controllers
	 * handed to the next; the last one's only for a parent (a process may
	 * not join a cgroup that hands controllers down). */
	for (char *p = dir + base + 1;; p++) {
		bool last = *p == '\0';

		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			rc = appl_err_errno(err, -errno, errno, "creating the cgroup %s", dir);
		else if (!last || parent)
			rc = cg_write(dir, "cgroup.subtree_control", ctl, err);
		if (!last)
			*p = '/';
		if (rc < 0 || last)
			return rc;
	}
}

int cg_key_parse(const char *text, const char *key, unsigned long long *val)
{
	size_t n = strlen(key);

	for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line)
		if (strncmp(line, key, n) == 0 && line[n] == ' ')
			return sscanf(line + n + 1, "%llu", val) == 1 ? 0 : -EINVAL;
	return -ENOENT;
}

int cg_read_key(const char *dir, const char *file, const char *key, unsigned long long *val)
{
	char buf[CTL_MAX];
	int rc = cg_read(dir, file, buf, sizeof(buf));

	return rc < 0 ? rc : cg_key_parse(buf, key, val);
}

int cg_kill(const char *dir, int rounds, bool *left)
{
	struct timespec ms = {0, 1000000};
	long pids[CTL_MAX / 2];
	int killed = 0;

	*left = false;
	for (int round = 0; round < rounds; round++) {
		int n = procs_read(dir, pids, (int)(sizeof(pids) / sizeof(pids[0]))), found = 0;

		if (n <= 0)
			return killed;
		/* The kernel's own kill reaches a tree that forks meanwhile. */
		if (round == 0 && cg_write(dir, "cgroup.kill", "1", NULL) == 0)
			return n;
		for (int i = 0; i < n; i++)
			found += kill((pid_t)pids[i], SIGKILL) == 0;
		if (!found)
			return killed;
		killed += found;
		nanosleep(&ms, NULL);
	}
	*left = true;
	return killed;
}

static void remove_tree(const char *dir, int depth)
{
	DIR *d = depth < 8 ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char sub[PATH_MAX];

		if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
		    appl_path_join(sub, sizeof(sub), dir, "/", de->d_name) == 0)
			remove_tree(sub, depth + 1);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

void cg_remove_tree(const char *dir)
{
	remove_tree(dir, 0);
}
