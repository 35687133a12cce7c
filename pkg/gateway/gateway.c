/* gateway.c: run_python over MCP stdio (see gateway.h). */
#define _GNU_SOURCE
#include "gateway/gateway.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/cell.h"
#include "image/image.h"
#include "loop/loop.h"
#include "mcp/server.h"
#include "sandbox/runsc.h"

#define GATEWAY_DRAIN_MS 2000 /* at shutdown, for answers still queued */

struct gw_run {
	struct gw_run *next, *prev;
	struct gateway *gw;
	struct mcp_run *run; /* NULL once the client cancelled it */
	struct cell *cell;   /* NULL while waiting for a slot */
	uint64_t arrival;
	char *code;
	size_t code_len;
	bool done;
	const char *fail; /* why it never ran (static), or NULL */
};

struct gateway {
	const struct policy *policy;
	struct policy_limits lim;
	struct sandbox_oci_params oci; /* every sandbox's, rootfs included */
	struct cell_limits cell_lim;   /* every run's */
	struct loop *loop;
	struct mcp_server *srv;
	struct sandbox_rt *rt;
	char rootfs[PATH_MAX];
	char *description;
	struct gw_run *runs; /* waiting and running, oldest last */
	unsigned running;
	unsigned waiting;
	bool stop;
};

void gateway_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
			  struct cell_limits *cell)
{
	const char *rootfs = oci->rootfs;

	sandbox_oci_params_init(oci);
	oci->rootfs = rootfs;
	oci->memory_mb = l->memory_mb;
	oci->pids = l->pids;
	oci->nofile = l->nofile;
	oci->tmpfs_mb = l->tmpfs_mb;
	cell_limits_init(cell);
	cell->deadline_ms = l->deadline_s * 1000ull;
	cell->max_calls = l->max_calls;
	cell->max_output = l->max_output_bytes;
	cell->stop_output = l->stop_output_bytes;
}

static void run_unlink(struct gateway *gw, struct gw_run *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		gw->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
}

static void run_free(struct gw_run *r)
{
	if (!r->cell)
		r->gw->waiting--; /* it never left the queue */
	if (r->cell) {
		cell_free(r->cell);
		r->gw->running--;
	}
	free(r->code);
	free(r);
}

/* A run is an error for the model when the code raised or it was stopped. */
static bool result_is_error(const json_t *res)
{
	return !json_is_null(json_object_get(res, "error")) ||
	       json_is_true(json_object_get(res, "stopped"));
}

static void on_cell_done(struct cell *c, void *data)
{
	struct gw_run *r = data;
	(void)c;
	/* Answered after the loop round: the cell is inside its own callback. */
	r->done = true;
}

static int cell_begin(struct gateway *gw, struct gw_run *r, struct appl_err *err)
{
	struct cell_hooks hooks = {.on_done = on_cell_done, .data = r};
	struct sandbox *sb;

	sb = sandbox_start(gw->rt, &gw->oci, err);
	if (!sb)
		return err->code;
	r->cell = cell_start(gw->loop, sb, r->code, r->code_len, NULL, &gw->cell_lim, &hooks,
			     r->arrival, err);
	if (!r->cell)
		return err->code;
	gw->running++;
	gw->waiting--;
	return 0;
}

/* Start waiting runs, oldest first, while there are free slots. */
static void queue_advance(struct gateway *gw)
{
	struct gw_run *r = gw->runs;

	while (r && r->next)
		r = r->next;
	for (; r && gw->running < gw->lim.cells; r = r->prev) {
		struct appl_err err = {0};

		if (r->cell || r->done)
			continue;
		if (loop_now_ms() - r->arrival >= gw->lim.deadline_s * 1000ull) {
			r->fail = "the run waited for a free slot until its deadline passed";
			r->done = true;
			continue;
		}
		if (cell_begin(gw, r, &err) < 0) {
			fprintf(stderr, "appliance: starting a sandbox failed: %s\n", err.msg);
			r->fail = "the run could not start: the sandbox failed to boot";
			r->done = true;
		}
	}
}

static void run_answer(struct gateway *gw, struct gw_run *r)
{
	const json_t *res = r->cell ? cell_result(r->cell) : NULL;

	if (!r->run)
		return;
	if (res)
		mcp_run_finish(gw->srv, r->run, res, result_is_error(res));
	else if (r->cell)
		mcp_run_fail(gw->srv, r->run, "the run ended without a result");
	else
		mcp_run_fail(gw->srv, r->run, r->fail ? r->fail : "the run could not start");
	r->run = NULL;
}

/* Answer and free every run that ended this round. */
static void runs_reap(struct gateway *gw)
{
	struct gw_run *r = gw->runs, *next;

	for (; r; r = next) {
		next = r->next;
		if (!r->done)
			continue;
		run_answer(gw, r);
		run_unlink(gw, r);
		run_free(r);
	}
	queue_advance(gw);
}

static void on_run(struct mcp_server *s, struct mcp_run *run, const char *code, size_t len,
		   void *data)
{
	struct gateway *gw = data;
	struct gw_run *r;

	if ((int64_t)time(NULL) >= policy_expires(gw->policy)) {
		mcp_run_fail(s, run, "the appliance's policy has expired: no new cells run");
		return;
	}
	if (gw->waiting >= APPL_RUNS_WAITING_MAX) {
		mcp_run_fail(s, run, "too many runs are waiting: try again when some have ended");
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->code = malloc(len + 1))) {
		free(r);
		mcp_run_fail(s, run, "out of memory");
		return;
	}
	memcpy(r->code, code, len);
	r->code[len] = '\0';
	r->code_len = len;
	r->gw = gw;
	r->run = run;
	r->arrival = loop_now_ms();
	mcp_run_set_data(run, r);
	r->next = gw->runs;
	if (gw->runs)
		gw->runs->prev = r;
	gw->runs = r;
	gw->waiting++;
	queue_advance(gw);
}

static void on_cancel(struct mcp_server *s, struct mcp_run *run, void *data)
{
	struct gw_run *r = mcp_run_data(run);
	(void)s;
	(void)data;

	r->run = NULL; /* no answer goes out for a cancelled request */
	if (r->cell)
		cell_cancel(r->cell);
	r->done = true;
}

static void on_closed(struct mcp_server *s, const char *why, void *data)
{
	struct gateway *gw = data;
	(void)s;
	(void)why;

	gw->stop = true;
}

static const char *description(void *data)
{
	return ((struct gateway *)data)->description;
}

static char *description_new(const struct policy_limits *l)
{
	char *d = NULL;

	if (asprintf(&d,
		     "Run a Python 3.11 program in a fresh, isolated sandbox (gVisor; no "
		     "network, no host files) and get back what it printed. Top-level await "
		     "works. The value of a final expression is returned as the result. Print "
		     "only what you need: at most %u bytes of output are kept, and the run is "
		     "stopped after %u seconds or %u bytes of output. No upstream tools are "
		     "available to this appliance's programs.",
		     l->max_output_bytes, l->deadline_s, l->stop_output_bytes) < 0)
		return NULL;
	return d;
}

static int on_signal_setup(struct gateway *gw, sigset_t *old, int *sfd, struct appl_err *err);

static void on_signal(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct gateway *gw = data;
	struct signalfd_siginfo si;
	(void)loop;
	(void)events;

	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		gw->stop = true;
}

static int on_signal_setup(struct gateway *gw, sigset_t *old, int *sfd, struct appl_err *err)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, old) < 0)
		return appl_err_errno(err, -errno, errno, "sigprocmask");
	*sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (*sfd < 0)
		return appl_err_errno(err, -errno, errno, "signalfd");
	return loop_add(gw->loop, *sfd, EPOLLIN, on_signal, gw, err);
}

static void serve(struct gateway *gw)
{
	while (!gw->stop) {
		if (loop_run_once(gw->loop, -1) < 0)
			break;
		runs_reap(gw);
	}
	/* Stop every cell; the answers would have nowhere to go. Kill them all
	 * first, so the sandboxes go down together, then clean up. */
	for (struct gw_run *r = gw->runs; r; r = r->next)
		if (r->cell)
			cell_cancel(r->cell);
	while (gw->runs) {
		struct gw_run *r = gw->runs;
		r->run = NULL;
		run_unlink(gw, r);
		run_free(r);
	}
}

static int gateway_open(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct sandbox_rt_config rc = {.runsc = policy_runtime_runsc(cfg->policy),
				       .state_dir = cfg->run_dir,
				       .platform = policy_runtime_platform(cfg->policy),
				       .rootless = policy_runtime_rootless(cfg->policy)};
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .on_closed = on_closed,
					 .description = description,
					 .data = gw};
	char cache[PATH_MAX];
	const char *dir = cfg->cache;

	gw->policy = cfg->policy;
	policy_limits_get(cfg->policy, &gw->lim);
	gateway_limits_split(&gw->lim, &gw->oci, &gw->cell_lim);
	gw->oci.rootfs = gw->rootfs;
	if (!(gw->description = description_new(&gw->lim)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (!dir && image_cache_default(cache, sizeof(cache), err) < 0)
		return err->code;
	if (image_layout_verify(policy_image_layout(cfg->policy), policy_image_digest(cfg->policy),
				dir ? dir : cache, gw->rootfs, sizeof(gw->rootfs), err) < 0)
		return err->code;
	if (!(gw->rt = sandbox_rt_open(&rc, err)) || !(gw->loop = loop_new(err)))
		return err->code;
	gw->srv = mcp_server_new(gw->loop, cfg->in_fd, cfg->out_fd, &hooks, err);
	return gw->srv ? 0 : err->code;
}

int gateway_run(const struct gateway_config *cfg, struct appl_err *err)
{
	struct gateway gw;
	sigset_t old;
	int sfd = -1, rc;

	memset(&gw, 0, sizeof(gw));
	/* Orphaned sandbox processes become ours to reap, not init's. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	sigprocmask(SIG_SETMASK, NULL, &old);
	rc = gateway_open(&gw, cfg, err);
	if (rc == 0)
		rc = on_signal_setup(&gw, &old, &sfd, err);
	if (rc == 0)
		serve(&gw);
	mcp_server_free(gw.srv, GATEWAY_DRAIN_MS);
	if (sfd >= 0) {
		loop_del(gw.loop, sfd);
		close(sfd);
	}
	loop_free(gw.loop);
	sandbox_rt_close(gw.rt);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(gw.description);
	return rc;
}
