/* confine.h: what an upstream MCP server may touch (docs/upstream.md,
 * Confinement).
 *
 * A jail is one server's confinement, kept for as long as the server is
 * configured (restarts reuse it): the user it runs as (by default a uid of
 * its own, taken from a range for as long as the jail lives, so that no two
 * servers share one), a cgroup of its own
 * (memory and process limits, and the way its whole tree is killed, escapees
 * that called setsid included), a private directory for HOME and TMPDIR, and
 * what the child does between fork and exec (proc_spec.confine; the steps
 * are enter.h's).
 * Rootless (the appliance is not root) only steps 4 and 6 apply, and the
 * private directory: the appliance says so at start.
 */
#ifndef APPL_PROC_CONFINE_H
#define APPL_PROC_CONFINE_H

#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"
#include "proc/enter.h"

struct proc_jail_spec {
	const char *name; /* the server's name, in cgroup and directory names */
	/* NULL: a uid of its own from the range (proc_jail_uids_set), with the
	 * group APPL_UPSTREAM_USER (created when missing) besides its own. */
	const char *user;
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

/* The range of uids servers without a user named in the policy take one
 * of their own from, for the whole process: "FIRST-LAST" (decimal, within
 * APPL_SERVER_UID_MIN-APPL_SERVER_UID_MAX). 0 or -EINVAL with err. The
 * default is APPL_SERVER_UID_FIRST-APPL_SERVER_UID_LAST. */
int proc_jail_uids_set(const char *range, struct appl_err *err);

/* What proc_jail_probe found. */
enum proc_probe {
	PROC_PROBE_OK,		    /* the command can be run, the cwd entered */
	PROC_PROBE_COMMAND,	    /* the command (or its interpreter) cannot be run */
	PROC_PROBE_COMMAND_MISSING, /* ...because a part of its path does not exist */
	PROC_PROBE_CWD,		    /* the cwd cannot be entered */
	PROC_PROBE_CWD_MISSING,	    /* ...because a part of it does not exist */
	PROC_PROBE_BECOME,	    /* the probe could not become the user */
};

/* Try, as the jail's user (in a child that becomes it as the server will),
 * whether path can be executed (it exists, every directory on the way may
 * be searched, it may be executed, and a script's "#!" interpreter the
 * same, four deep) and cwd (may be NULL) entered. An enum proc_probe, with
 * why saying what stops it, or -errno when the probe could not run. */
int proc_jail_probe(const struct proc_jail *j, const char *path, const char *cwd, char *why,
		    size_t cap);

/* What proc_spec.confine should point at (borrowed from the jail). */
const struct proc_confine *proc_jail_confine(const struct proc_jail *j);

/* The private directory (HOME and TMPDIR). */
const char *proc_jail_home(const struct proc_jail *j);

/* Who it runs as, for the log: "uid 61234 (its own), group
 * appliance-upstream", or "appliance-upstream (uid 998)" for a user the
 * policy named. */
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
