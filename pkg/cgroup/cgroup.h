/* cgroup.h: the host's cgroup hierarchy and the appliance's place in it.
 *
 * cgroup v1 (a hierarchy per controller below /sys/fs/cgroup): the
 * appliance's cgroups live below "appliance" at the root of each
 * hierarchy, as they always have (pkg/sandbox, pkg/proc).
 *
 * cgroup v2 (/sys/fs/cgroup is one unified hierarchy, cgroup2fs): they live
 * below the cgroup the appliance was started in, its subtree, never at
 * the root of the hierarchy. Under systemd that is the unit's own cgroup,
 * handed to the appliance by Delegate=yes, so systemd accounts for every
 * sandbox and server and kills what is left when the unit stops. The
 * kernel lets a cgroup hand controllers down only while it holds no
 * process itself, so the appliance first moves itself into a leaf:
 *
 *   SUBTREE/supervisor                     the appliance, and the runsc
 *                                          commands it runs
 *   SUBTREE/cells/INSTANCE/ID              a sandbox's, with its limit
 *   SUBTREE/cells/INSTANCE/ID/sandbox      runsc's own, below it
 *   SUBTREE/servers/upstream-NAME-PID-SEQ  a confined server's
 *
 * A start cgroup that holds other processes too (a login shell's scope)
 * cannot be made a subtree without moving them: the start is refused and
 * the message says how to get a cgroup of one's own. Started in the root
 * cgroup itself (a host without a cgroup manager), the subtree is
 * /appliance, made there.
 *
 * Rootless, or not root, nothing is settled: runsc --rootless makes no
 * cgroup and the servers' jails make none without root.
 */
#ifndef APPL_CGROUP_CGROUP_H
#define APPL_CGROUP_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"

#define CG_MOUNT "/sys/fs/cgroup"
/* The controllers a subtree must have (v2): a limit the appliance cannot
 * set refuses the start. cpu is handed down too when the subtree has it
 * (runsc sets a sandbox's CPU quota with it). */
#define CG_NEEDED "memory pids"

enum cg_kind { CG_NONE = 0, CG_V1 = 1, CG_V2 = 2 };

struct cg_host {
	enum cg_kind kind;
	char mount[128];	/* where the hierarchies are mounted */
	char start[PATH_MAX];	/* v2: the cgroup we started in ("/system.slice/x.service") */
	char subtree[PATH_MAX]; /* v2: ours, from the mount ("/system.slice/x.service") */
	bool settled;		/* v2: we live in SUBTREE/supervisor, controllers handed down */
};

/* The unified hierarchy's path in the text of /proc/self/cgroup (its "0::"
 * line) into out. -ENOENT when there is no such line, -EINVAL when it is
 * not an absolute path, -ENAMETOOLONG. Pure. */
int cg_self_parse(const char *text, char *out, size_t cap);

/* Decide the layout from what was read of this host: the mount point,
 * whether it is the unified hierarchy (cgroup2fs), whether a v1 memory
 * hierarchy is there, and /proc/self/cgroup's text. Pure. */
int cg_host_decide(struct cg_host *h, const char *mount, bool unified, bool v1_memory,
		   const char *self, struct appl_err *err);

/* This process's host, read once (statfs of CG_MOUNT, /proc/self/cgroup);
 * kind CG_NONE when neither hierarchy can be read. */
struct cg_host *cg_host(void);

/* Whether the appliance makes cgroups of its own below h's subtree: on
 * cgroup v2, as root. Not root (rootless), runsc --rootless and the
 * servers' jails make none, and nothing is moved or settled. Pure. */
bool cg_ours(const struct cg_host *h, uid_t euid);

/* v2: make h's subtree the appliance's: check it has CG_NEEDED, move pid
 * into SUBTREE/supervisor, hand the controllers down. Once; a no-op on v1
 * and when done. 0, or -errno with err saying what to do. */
int cg_settle(struct cg_host *h, pid_t pid, struct appl_err *err);

/* The directory of rel ("cells/x") below h's subtree (v2) into out. */
int cg_path(const struct cg_host *h, char out[PATH_MAX], const char *rel);

/* Make the cgroup rel below h's settled subtree (v2) and every missing one
 * above it, each handing its controllers down, so the last one can take
 * limits; a parent hands them down too, for a child made by another
 * (runsc's below a sandbox's), a leaf does not, so a process may join it.
 * Its directory in dir. */
int cg_make(const struct cg_host *h, const char *rel, bool parent, char dir[PATH_MAX],
	    struct appl_err *err);

/* The control file dir/file read into buf (at most cap - 1 bytes, then a
 * NUL): 0 or -errno. */
int cg_read(const char *dir, const char *file, char *buf, size_t cap);

/* Write val to the control file dir/file. */
int cg_write(const char *dir, const char *file, const char *val, struct appl_err *err);

/* The value of key in the text of a flat keyed file (memory.events:
 * "oom_kill 3\n..."). Pure. 0, -ENOENT (no such key) or -EINVAL (no
 * number after it). */
int cg_key_parse(const char *text, const char *key, unsigned long long *val);

/* The value of key in a flat keyed file (memory.events: "oom_kill 3"). 0,
 * or -errno (-ENOENT: no file or no key). */
int cg_read_key(const char *dir, const char *file, const char *key, unsigned long long *val);

/* Kill every process in the cgroup at dir: cgroup.kill where the kernel
 * has it (v2, Linux 5.14: the cgroups below too, and what forks
 * meanwhile), else SIGKILL to each pid cgroup.procs lists, again while
 * new ones appear, up to rounds times (left: some were still there). How
 * many were listed and signalled. */
int cg_kill(const char *dir, int rounds, bool *left);

/* Remove the cgroup directory dir and every one below it, deepest first
 * (rmdir succeeds only on an empty cgroup). */
void cg_remove_tree(const char *dir);

#endif
