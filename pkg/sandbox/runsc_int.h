/* runsc_int.h: what the files behind runsc.h share. runsc.c opens an
 * instance and starts sandboxes; teardown.c ends them; cgroup.c holds a
 * sandbox's cgroups (memory limit, freezer, removal); invoke.c runs runsc
 * commands. They call one way only: runsc.c uses the three others,
 * teardown.c uses cgroup.c and invoke.c. Not part of the API.
 */
#ifndef APPL_SANDBOX_RUNSC_INT_H
#define APPL_SANDBOX_RUNSC_INT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"
#include "loop/loop.h"
#include "sandbox/runsc.h"

#define RUNSC_DELETE_TIMEOUT_MS 5000
/* A restored sandbox whose runsc ended by itself leaves runsc state behind
 * (runsc restore, unlike runsc run, does not delete its container). Such
 * dead sandboxes are deleted together, by one runsc delete for up to this
 * many, started when that many wait or RUNSC_DELETE_BATCH_MS after the
 * first (teardown.c): one Go process start per batch instead of per cell. */
#define RUNSC_DELETE_BATCH 16
#define CGROUP_BASE	   "appliance" /* v1: below the root of each hierarchy */
#define MEMCG_V1	   "/sys/fs/cgroup/memory"
#define FREEZER_V1	   "/sys/fs/cgroup/freezer"

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
	char cgroup[256]; /* from the hierarchy's root: "/appliance/INSTANCE/ID" on
			   * v1, "SUBTREE/cells/INSTANCE/ID" on v2; "" rootless */
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

/* ---- invoke.c ---- */

/* runsc gets this environment and nothing else: the appliance's own may
 * hold credentials for the upstream servers. */
extern char *const runsc_env[];

/* Start `runsc --root=ROOT [--rootless] A1 -force A2`. */
int runsc_spawn(const char *runsc, const char *root, bool rootless, const char *a1, const char *a2,
		pid_t *pid, int *pidfd);
/* Start one runsc delete for the sandboxes chained from first through
 * ->batch (a batch holds at most RUNSC_DELETE_BATCH). */
int runsc_spawn_delete(const struct sandbox_rt *rt, struct sandbox *first, pid_t *pid, int *pidfd);
/* Wait for the runsc command (pid, pidfd) at most RUNSC_DELETE_TIMEOUT_MS,
 * reaping orphans meanwhile; kill its group if it did not end in time.
 * Reaps it and closes pidfd. Its status, and *ended (may be NULL) whether
 * it ended within the bound. */
int runsc_finish(pid_t pid, int pidfd, bool *ended);
/* Run `runsc --root=ROOT [--rootless] A1 -force A2` and wait for it,
 * bounded. 0, or -1 when it could not start. */
int runsc_call(const char *runsc, const char *root, bool rootless, const char *a1, const char *a2);

/* ---- cgroup.c ---- */

/* The cgroup of an instance's sandboxes (name: its directory's), from the
 * hierarchy's root without the leading '/': "appliance/NAME" on cgroup v1,
 * "SUBTREE/cells/NAME" on v2 (pkg/cgroup). */
int cgroup_cells_rel(const char *name, char *out, size_t cap);
/* The directory of sb's memory cgroup of ours. */
int cgroup_memcg_dir(const struct sandbox *sb, char out[PATH_MAX]);
/* Remove the cgroups at rel ("appliance/i-...") in every controller. */
void cgroup_tree_remove(const char *rel);
/* Thaw every freezer cgroup at or below path (depth: 0). */
void cgroup_freezer_thaw_tree(const char *path, int depth);
/* As root, sb's memory cgroup of ours with the limit (memory_mb and gVisor's
 * allowance): 0 or -errno with err. */
int cgroup_memcg_make(struct sandbox *sb, unsigned memory_mb, struct appl_err *err);
/* Thaw sb if sandbox_freeze froze it (best effort: a kill follows). */
void cgroup_thaw(struct sandbox *sb);

/* ---- teardown.c ---- */

/* Delete every deferred sandbox of rt now, with one runsc delete, and wait. */
void teardown_flush_sync(struct sandbox_rt *rt);

#endif
