/* teardown.c: ending sandboxes (see runsc.h): at once (sandbox_destroy), or
 * from the loop without blocking it (sandbox_destroy_async), dead ones
 * deleted in batches by one runsc delete. */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "proc/proc.h"
#include "sandbox/runsc_int.h"

#define RUNSC_EXIT_TIMEOUT_MS 2000
/* After its runner ended by itself, runsc run (or restore) exits on its
 * own: this long at most, then it is killed like any other. */
#define RUNSC_CLEAN_EXIT_MS   500
#define RUNSC_DELETE_BATCH_MS 2000

void sandbox_kill(struct sandbox *sb)
{
	if (sb && sb->pid > 0) {
		cgroup_thaw(sb);
		proc_kill_group(sb->pid);
	}
}

/* The last of a teardown: nothing of the sandbox runs any more. */
static void teardown_finish(struct sandbox *sb)
{
	struct sandbox_rt *rt = sb->rt;

	if (sb->cgroup[0])
		cgroup_tree_remove(sb->cgroup + 1);
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
void teardown_flush_sync(struct sandbox_rt *rt)
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
	cgroup_thaw(sb);
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
		teardown_flush_sync(rt);
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

	if (!sb->memcg || cgroup_memcg_dir(sb, dir) < 0 || cgroup_busy(dir, 0))
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
	teardown_flush_sync(rt);
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
	cgroup_thaw(sb);
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
