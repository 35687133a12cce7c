/* enter.h: what a confined child does between fork and exec, the half of
 * a server's jail (confine.h) that runs in the child, apart from the jail so
 * that proc.c, which forks, needs nothing of the jail's. The steps:
 *   1. join the jail's cgroups;
 *   2. a PID namespace of its own (as its pid 1, a small init that starts
 *      the server and reaps), an IPC namespace, and a mount namespace of
 *      its own with a /proc of that PID namespace, in which each masked path (the
 *      appliance's secrets: its configuration, trust, state, audit log,
 *      policy, runtime directories, the host daemons' sockets) is covered,
 *      a directory by an empty read-only tmpfs, anything else by an empty
 *      read-only file; nothing else moves;
 *      On cgroup v2 also a cgroup namespace rooted at its own cgroup,
 *      which alone is mounted read-only on /sys/fs/cgroup;
 *   3. optionally a network namespace with only loopback, up;
 *   4. rlimits (open files, no core dumps);
 *   5. the capability bounding and ambient sets emptied, then the jail's
 *      gid, its one supplementary group (appliance-upstream, for a user of
 *      its own) or none, and uid (which empties the others); for "root"
 *      every capability is dropped all the same;
 *   6. no_new_privs, then the system call filter (seccomp.h), last, since it
 *      refuses the calls of steps 1-5.
 * Rootless (the appliance is not root) only steps 4 and 6 apply.
 */
#ifndef APPL_PROC_ENTER_H
#define APPL_PROC_ENTER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct proc_filter;

/* What the child does before exec (all borrowed; built by a jail). */
struct proc_confine {
	const char *cgroup_procs[2]; /* cgroup.procs files to join; NULL: none */
	bool mount_ns;		     /* a mount namespace of its own, masks[] covered */
	const char *const *masks;    /* NULL-ended real paths; each exists */
	const char *empty_file;	     /* bound over a masked non-directory */
	bool net_ns;		     /* a network namespace with only loopback */
	/* A PID namespace of its own with its /proc, and an IPC namespace: the
	 * child forked into it is its pid 1, a small init (proc.c) that starts
	 * the server and then only reaps and passes signals on. Needs
	 * mount_ns. */
	bool pid_ns;
	/* cgroup v2: a cgroup namespace rooted at the cgroup joined, and that
	 * cgroup alone mounted read-only on /sys/fs/cgroup, so the server
	 * reads its own limits (memory.max, pids.max) and nothing of the
	 * host's hierarchy. Needs mount_ns and cgroup_procs[0]. */
	bool cgroup_ns;
	unsigned nofile; /* RLIMIT_NOFILE; 0 leaves it */
	bool drop_caps;	 /* every capability set emptied */
	bool ids;	 /* change to uid and gid, with groups[] as the only others */
	uid_t uid;
	gid_t gid;
	gid_t groups[1];
	size_t ngroups;
	const struct proc_filter *filter; /* NULL: none */
};

/* Which step of starting a confined child failed, in its own words, and
 * what it was about: "changing to uid" 61234, "hiding" "/etc/appliance". */
struct proc_fail {
	int err; /* errno */
	const char *step;
	const char *arg; /* a path, or NULL */
	long num;	 /* a number (a uid), or -1 */
};

/* In the forked child, steps 1-4 and the bounding set (as root, before
 * the server's own process exists in a PID namespace): 0 or -errno with f
 * naming the step. Only system calls: no allocation, safe between fork and
 * exec. */
int proc_confine_enter(const struct proc_confine *c, struct proc_fail *f);

/* Then, in the process that execs the server, steps 5 and 6: its groups,
 * gid and uid, no capability, no_new_privs and the system call filter.
 * 0 or -errno with f. */
int proc_confine_become(const struct proc_confine *c, struct proc_fail *f);

#endif
