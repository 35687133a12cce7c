/* invoke.c: running runsc commands for the sandboxes (see runsc_int.h):
 * with an environment of their own, bounded in time, reaping the orphans
 * runsc waits for. */
#define _GNU_SOURCE
#include <errno.h>
#include <unistd.h>

#include "base/fs.h"
#include "proc/proc.h"
#include "sandbox/runsc_int.h"

#define RUNSC_POLL_MS 20

char *const runsc_env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};

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
int runsc_spawn(const char *runsc, const char *root, bool rootless, const char *a1, const char *a2,
		pid_t *pid, int *pidfd)
{
	char *ids[] = {(char *)a2};

	return runsc_spawn_ids(runsc, root, rootless, a1, ids, 1, pid, pidfd);
}

/* Start one runsc delete for the sandboxes chained from first through
 * ->batch (a batch holds at most RUNSC_DELETE_BATCH). */
int runsc_spawn_delete(const struct sandbox_rt *rt, struct sandbox *first, pid_t *pid, int *pidfd)
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
int runsc_finish(pid_t pid, int pidfd, bool *ended)
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
int runsc_call(const char *runsc, const char *root, bool rootless, const char *a1, const char *a2)
{
	int pidfd;
	pid_t pid;

	if (runsc_spawn(runsc, root, rootless, a1, a2, &pid, &pidfd) < 0)
		return -1;
	runsc_finish(pid, pidfd, NULL);
	return 0;
}
