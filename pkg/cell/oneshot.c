/* oneshot.c: one cell, start to finish (see oneshot.h). */
#define _GNU_SOURCE
#include "cell/oneshot.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cell/cell.h"
#include "image/image.h"
#include "loop/loop.h"
#include "sandbox/runsc.h"

struct oneshot_state {
	struct cell *cell;
	int signalled;
};

static void on_signal(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct oneshot_state *st = data;
	struct signalfd_siginfo si;
	(void)loop;
	(void)events;

	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		st->signalled = (int)si.ssi_signo;
}

static int signals_block(sigset_t *set, sigset_t *old)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	return sigprocmask(SIG_BLOCK, set, old) < 0 ? -errno : 0;
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

static int run_in(struct sandbox_rt *rt, const char *rootfs, const struct cell_oneshot *o,
		  uint64_t arrival, json_t **result, struct appl_err *err)
{
	struct oneshot_state st = {0};
	struct sandbox_oci_params p;
	struct cell_limits lim;
	struct sandbox *sb;
	sigset_t set, old;
	struct loop *loop;
	int sfd = -1, rc;

	if ((rc = signals_block(&set, &old)) < 0)
		return appl_err_errno(err, rc, -rc, "sigprocmask");
	loop = loop_new(err);
	if (!loop) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		return err->code;
	}
	sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	rc = sfd < 0 ? appl_err_errno(err, -errno, errno, "signalfd")
		     : loop_add(loop, sfd, EPOLLIN, on_signal, &st, err);
	p = o->oci;
	p.rootfs = rootfs;
	lim = o->lim;
	sb = rc == 0 ? sandbox_start(rt, &p, err) : NULL;
	if (sb)
		st.cell =
			cell_start(loop, sb, o->code, o->code_len, NULL, &lim, NULL, arrival, err);
	if (!st.cell)
		rc = err->code ? err->code : -EIO;
	if (st.cell && (rc = cell_loop(loop, &st)) == 0)
		*result = json_deep_copy(cell_result(st.cell));
	if (st.signalled && *result)
		json_object_set_new(*result, "reason", json_string("signal"));
	cell_free(st.cell);
	sandbox_rt_settle(rt); /* its teardown ran from this loop */
	if (sfd >= 0) {
		loop_del(loop, sfd);
		close(sfd);
	}
	loop_free(loop);
	sigprocmask(SIG_SETMASK, &old, NULL);
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
	char rootfs[PATH_MAX];
	struct sandbox_rt *rt;
	int rc;

	*result = NULL;
	if (o->lim.deadline_ms == 0 || o->lim.deadline_ms > APPL_DEADLINE_S_CEIL * 1000ull)
		return appl_err_set(err, -EINVAL, "deadline: 1 to %d seconds",
				    APPL_DEADLINE_S_CEIL);
	/* Orphaned sandbox processes become ours to reap, not init's. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	rt = sandbox_rt_open(&cfg, err);
	if (!rt)
		return err->code;
	rc = rootfs_prepare(o, rootfs, sizeof(rootfs), err);
	if (rc == 0 && o->on_started)
		rc = o->on_started(o->data, err);
	if (rc == 0)
		rc = run_in(rt, rootfs, o, arrival, result, err);
	sandbox_rt_close(rt);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}
