/* oneshot.c: one cell, start to finish (see oneshot.h). */
#define _GNU_SOURCE
#include "cell/oneshot.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/cell.h"
#include "image/image.h"
#include "loop/loop.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"

struct oneshot_state {
	struct cell *cell;
	int signalled;
};

static void on_stop_signal(int signo, void *data)
{
	((struct oneshot_state *)data)->signalled = signo;
}

/* Orphaned sandbox processes are ours to reap: runsc delete waits for them. */
static void on_sigchld(int signo, void *data)
{
	(void)signo;
	(void)data;
	proc_reap_orphans();
}

/* The signals were blocked before anything started (cmd/appliance). */
static int signals_watch(struct loop *loop, struct oneshot_state *st, struct appl_err *err)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP};

	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (loop_signal(loop, stops[i], on_stop_signal, st, err) < 0)
			return err->code;
	return loop_signal(loop, SIGCHLD, on_sigchld, st, err);
}

static int cell_loop(struct loop *loop, struct oneshot_state *st)
{
	while (!cell_finished(st->cell) && !st->signalled) {
		int rc = loop_run_once(loop, -1);
		if (rc < 0)
			return rc;
	}
	if (!cell_finished(st->cell))
		cell_cancel(st->cell);
	return 0;
}

static int rootfs_prepare(const struct cell_oneshot *o, char *rootfs, size_t len,
			  struct appl_err *err)
{
	char cache[PATH_MAX];
	const char *dir = o->cache;

	if (!dir) {
		if (image_cache_default(cache, sizeof(cache), err) < 0)
			return err->code;
		dir = cache;
	}
	return image_layout_verify(o->image, o->digest, dir, rootfs, len, err);
}

static int run_in(struct sandbox_rt *rt, const char *rootfs, const char *image,
		  const struct cell_oneshot *o, uint64_t arrival, json_t **result,
		  struct appl_err *err)
{
	struct oneshot_state st = {0};
	struct sandbox_oci_params p;
	struct cell_limits lim;
	struct sandbox *sb;
	struct loop *loop;
	int rc;

	loop = loop_new(err);
	if (!loop)
		return err->code;
	rc = signals_watch(loop, &st, err);
	p = o->oci;
	p.rootfs = rootfs;
	p.rootfs_image = image[0] ? image : NULL;
	lim = o->lim;
	sb = rc == 0 ? sandbox_start(rt, &p, err) : NULL;
	if (sb)
		st.cell =
			cell_start(loop, sb, o->code, o->code_len, NULL, &lim, NULL, arrival, err);
	if (!st.cell)
		rc = err->code ? err->code : -EIO;
	if (st.cell && (rc = cell_loop(loop, &st)) == 0) {
		struct cell_outcome out = *cell_outcome(st.cell);
		char why[64];

		/* Cancelled by the signal; a run that ended by itself first keeps
		 * its own outcome. */
		if (st.signalled && out.reason == CELL_CANCELLED) {
			snprintf(why, sizeof(why),
				 "the run was stopped: appliance cell got signal %d", st.signalled);
			out.reason = CELL_SIGNAL;
			out.error = why;
		}
		if (!(*result = cell_outcome_json(&out)))
			rc = appl_err_set(err, -ENOMEM, "out of memory");
	}
	cell_free(st.cell);
	sandbox_rt_settle(rt); /* its teardown ran from this loop */
	loop_free(loop);
	return rc;
}

void cell_oneshot_init(struct cell_oneshot *o)
{
	memset(o, 0, sizeof(*o));
	sandbox_oci_params_init(&o->oci);
	cell_limits_init(&o->lim);
}

int cell_oneshot_run(const struct cell_oneshot *o, json_t **result, struct appl_err *err)
{
	struct sandbox_rt_config cfg = {.runsc = o->runsc,
					.state_dir = o->run_dir,
					.platform = o->platform,
					.rootless = o->rootless};
	uint64_t arrival = loop_now_ms();
	char rootfs[PATH_MAX], image[PATH_MAX];
	struct sandbox_rt *rt;
	int rc;

	*result = NULL;
	if (o->lim.deadline_ms == 0 || o->lim.deadline_ms > APPL_DEADLINE_S_CEIL * 1000ull)
		return appl_err_set(err, -EINVAL, "deadline: 1 to %d seconds",
				    APPL_DEADLINE_S_CEIL);
	/* Blocked from the start (cmd/appliance), so a signal during the boot
	 * cannot leave the sandbox behind. */
	if (proc_signals_check(err) < 0)
		return err->code;
	rt = sandbox_rt_open(&cfg, err);
	if (!rt)
		return err->code;
	rc = rootfs_prepare(o, rootfs, sizeof(rootfs), err);
	if (rc == 0)
		rc = sandbox_rootfs_image(rt, rootfs, image, sizeof(image), err);
	if (rc == 0 && o->on_started)
		rc = o->on_started(o->data, err);
	if (rc == 0)
		rc = run_in(rt, rootfs, image, o, arrival, result, err);
	sandbox_rt_close(rt);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}
