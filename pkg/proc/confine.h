/* confine.h: what an upstream MCP server may touch (docs/upstream.md,
 * Confinement).
 *
 * A jail is one server's confinement, kept for as long as the server is
 * configured (restarts reuse it): the user it runs as, a cgroup of its own
 * (memory and process limits, and the way its whole tree is killed, escapees
 * that called setsid included), a private directory for HOME and TMPDIR, and
 * what the child does between fork and exec (proc_spec.confine):
 *   1. join the jail's cgroups;
 *   2. a mount namespace of its own in which each masked path (the
 *      appliance's secrets: its configuration, trust, state, audit log,
 *      policy, runtime directories, the host daemons' sockets) is covered,
 *      a directory by an empty read-only tmpfs, anything else by an empty
 *      read-only file; nothing else moves;
 *   3. optionally a network namespace with only loopback, up;
 *   4. rlimits (open files, no core dumps);
 *   5. the capability bounding and ambient sets emptied, then the jail's
 *      gid, no supplementary groups, and uid (which empties the others);
 *      for "root" every capability is dropped all the same;
 *   6. no_new_privs, then the system call filter (seccomp.h), last, since it
 *      refuses the calls of steps 1-5.
 * Rootless (the appliance is not root) only steps 4 and 6 apply, and the
 * private directory: the appliance says so at start.
 */
#ifndef APPL_PROC_CONFINE_H
#define APPL_PROC_CONFINE_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"

struct proc_filter;

/* What the child does before exec (all borrowed; built by a jail). */
struct proc_confine {
	const char *cgroup_procs[2]; /* cgroup.procs files to join; NULL: none */
	bool mount_ns;		     /* a mount namespace of its own, masks[] covered */
	const char *const *masks;    /* NULL-ended real paths; each exists */
	const char *empty_file;	     /* bound over a masked non-directory */
	bool net_ns;		     /* a network namespace with only loopback */
	unsigned nofile;	     /* RLIMIT_NOFILE; 0 leaves it */
	bool drop_caps;		     /* every capability set emptied */
	bool ids;		     /* change to uid and gid */
	uid_t uid;
	gid_t gid;
	const struct proc_filter *filter; /* NULL: none */
};

/* In the forked child, steps 1-6; 0 or -errno. Only system calls: no
 * allocation, safe between fork and exec. */
int proc_confine_child(const struct proc_confine *c);

struct proc_jail_spec {
	const char *name;	  /* the server's name, in cgroup and directory names */
	const char *user;	  /* NULL: APPL_UPSTREAM_USER (created when missing) */
	unsigned memory_mb, pids; /* its cgroup's limits */
	bool network;		  /* false: loopback only (root only) */
	const char *const *masks; /* NULL-ended paths to hide; missing ones skipped */
	const struct proc_filter *filter;
};

struct proc_jail;

/* Make the jail: resolve (or create) the user, the cgroups, the private
 * directory (owned by the user, 0700), the list of masks that exist (their
 * real paths). As root only the full jail; not root, a rootless one (NULL
 * user and network true, else -EPERM). 0 with *out, or -errno with err. */
int proc_jail_new(const struct proc_jail_spec *s, struct proc_jail **out, struct appl_err *err);

/* What proc_spec.confine should point at (borrowed from the jail). */
const struct proc_confine *proc_jail_confine(const struct proc_jail *j);

/* The private directory (HOME and TMPDIR). */
const char *proc_jail_home(const struct proc_jail *j);

/* Who it runs as, for the log: "appliance-upstream (uid 998)". */
const char *proc_jail_who(const struct proc_jail *j);

/* SIGKILL every process in the jail's cgroup until none is left (a tree
 * that forks meanwhile included); without a cgroup, nothing. Returns how
 * many were killed. */
int proc_jail_kill(struct proc_jail *j);

/* Kill what is left, remove the cgroups and the private directory. Safe on
 * NULL. */
void proc_jail_free(struct proc_jail *j);

/* Remove the cgroups that jails of appliances no longer running left (a
 * SIGKILLed appliance cannot remove its servers' cgroups): those named
 * for a process id that is gone. Only empty ones go (rmdir); those of a
 * live appliance are never touched. Root only; returns how many went. */
int proc_jail_reclaim(void);

/* The paths every jail hides besides the ones the appliance adds (its
 * configuration, runtime and the host daemons' sockets), NULL-ended. */
const char *const *proc_jail_default_masks(void);

#endif
