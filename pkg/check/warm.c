/* warm.c: part 2's proof of the warm pool (internal.h; docs/check.md).
 * One pooled sandbox is booted on the engine's runtime, as run's pool
 * boots one; while it waits, the kernel's own freezer state of it is read
 * back and must say frozen; a run then takes it, which thaws it, the state
 * is read again and must say thawed, and the run's cell must print 42.
 * It runs before the probes and the pool keeps no sandbox after it, so no
 * probe ever takes the warm sandbox and this run takes no probe's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check/internal.h"
#include "loop/loop.h"
#include "sandbox/runsc.h"

#define WARM_POLL_MS 20 /* between two reads of a freezer still freezing */
#define WARM_CODE    "print(6*7)\n"

struct warm {
	struct check *c;
	uint64_t until; /* the end of the current wait (loop_now_ms) */
	char id[128];	/* the warm sandbox's */
	struct sandbox_freezer frozen, thawed;
	struct check_probe probe; /* the run that takes it, judged like a probe */
	char code[sizeof(WARM_CODE)];
};

/* One loop round, at most ms long and never past the wait's end. */
static int turn(struct warm *w, uint64_t ms)
{
	uint64_t now = loop_now_ms(), left = w->until > now ? w->until - now : 0;

	return loop_run_once(engine_loop(w->c->e), (int)(left < ms ? left : ms));
}

/* limits.boot_s: what run gives a sandbox to say ready. */
static uint64_t boot_ms(const struct warm *w)
{
	return w->c->lim.boot_s * 1000ull;
}

static bool waiting(const struct warm *w)
{
	return !check_stopped(w->c) && loop_now_ms() < w->until;
}

/* The pool's one sandbox, once it said ready: NULL when it did not
 * within the boot timeout (the pool logs why), or a signal came. */
static const struct sandbox *warm_boot(struct warm *w)
{
	struct engine *e = w->c->e;

	w->until = loop_now_ms() + boot_ms(w);
	engine_pool_keep(e, 1);
	while (!engine_pool_ready(e) && !engine_pool_failed(e) && waiting(w) &&
	       turn(w, boot_ms(w)) >= 0)
		;
	/* None after it: the probes boot their own, as they always have. */
	engine_pool_keep(e, 0);
	return engine_pool_ready(e);
}

/* Why the waiting sandbox's freezer state could not be read, and what to
 * do. */
static void say_unread(struct warm *w, const struct appl_err *err)
{
	if (err->code == -ENOTSUP)
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: a warm sandbox cannot wait frozen: %s; it would use CPU "
				 "while it waits: mount the cgroup v1 freezer hierarchy at "
				 "/sys/fs/cgroup/freezer, or use cgroup v2",
				 err->msg);
	else
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: the warm sandbox's freezer state could not be read: %s; "
				 "check that /sys/fs/cgroup is the host's cgroup mount",
				 err->msg);
}

/* The freezer of the waiting sandbox read until it is no longer freezing
 * (bounded by the boot timeout too). 0, or -1 with a problem said (none
 * when a signal came). */
static int warm_frozen(struct warm *w)
{
	struct appl_err err = {0};
	const struct sandbox *sb;

	w->until = loop_now_ms() + boot_ms(w);
	do {
		/* Read afresh each round: one that died meanwhile is freed. */
		if (!(sb = engine_pool_ready(w->c->e))) {
			check_report_say(w->c, CHECK_MARK_PROBLEM,
					 "pool: the warm sandbox ended while it froze; the log on "
					 "stderr says why");
			return -1;
		}
		if (sandbox_freezer_read(sb, &w->frozen, &err) < 0) {
			say_unread(w, &err);
			return -1;
		}
	} while (w->frozen.state == SANDBOX_FREEZING && waiting(w) && turn(w, WARM_POLL_MS) >= 0);
	if (check_stopped(w->c))
		return -1;
	if (w->frozen.state != SANDBOX_FROZEN) {
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: a warm sandbox did not wait frozen: %s says %s%s; it uses "
				 "CPU while it waits: the log on stderr says why it was not frozen",
				 w->frozen.path, w->frozen.said,
				 w->frozen.state == SANDBOX_FREEZING ? " after the boot timeout"
								     : "");
		return -1;
	}
	snprintf(w->id, sizeof(w->id), "%s", sandbox_id(sb));
	return 0;
}

/* Whether the run took the warm sandbox (it starts at once: no other run
 * holds a slot), and its freezer says thawed. */
static int warm_thawed(struct warm *w, const struct cell *cell)
{
	struct appl_err err = {0};

	if (!cell) {
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: a run could not start in the warm sandbox: %s",
				 w->probe.ended ? w->probe.why : "the log on stderr says why");
		return -1;
	}
	if (strcmp(cell_sandbox_id(cell), w->id) != 0) {
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: the run was given sandbox %s, not the warm one (%s): the "
				 "pool gave that up, and the log on stderr says why",
				 cell_sandbox_id(cell), w->id);
		return -1;
	}
	if (sandbox_freezer_read(cell_sandbox(cell), &w->thawed, &err) < 0) {
		check_report_say(w->c, CHECK_MARK_PROBLEM, "pool: once taken: %s", err.msg);
		return -1;
	}
	if (w->thawed.state != SANDBOX_THAWED) {
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: a run took the warm sandbox, but %s says %s: its cell "
				 "cannot run until its deadline kills it",
				 w->thawed.path, w->thawed.said);
		return -1;
	}
	return 0;
}

/* A run of WARM_CODE takes the warm sandbox (pool_take thaws it) and is
 * waited for, within its deadline; then judged. 0, or -1 with a problem
 * said (none when a signal came). */
static int warm_run(struct warm *w)
{
	struct check_probe *p = &w->probe;
	char why[CHECK_WHY_MAX];

	memcpy(w->code, WARM_CODE, sizeof(w->code));
	*p = (struct check_probe){.code = w->code,
				  .deadline_ms = boot_ms(w),
				  .ex = {.judge = CHECK_JUDGE_STDOUT, .expect = "42\n"}};
	check_run_start(w->c, p);
	if (warm_thawed(w, p->run ? run_cell(p->run) : NULL) < 0)
		return -1;
	while (!p->ended && !check_stopped(w->c))
		if (loop_run_once(engine_loop(w->c->e), -1) < 0)
			break;
	if (!p->ended)
		return -1;
	if (!p->result || !check_judge_result(&p->ex, p->result, 0, why, sizeof(why))) {
		check_report_say(w->c, CHECK_MARK_PROBLEM,
				 "pool: the cell in the thawed warm sandbox did not print 42: %s",
				 p->result ? why : p->why);
		return -1;
	}
	return 0;
}

/* What there is to prove: nothing without a pool or a freezer. */
static bool warm_wanted(struct check *c)
{
	/* Not a finding: run would freeze nothing, so nothing is judged. */
	if (c->lim.pool == 0) {
		check_report_print(c, "        pool: none (limits.pool is 0): every cell boots "
				      "cold, and no sandbox waits frozen\n");
		return false;
	}
	if (policy_runtime_rootless(c->cp.policy)) {
		check_report_say(c, CHECK_MARK_WARNING,
				 "runtime.rootless: no cgroups, so no freezer: warm sandboxes "
				 "(limits.pool %u) wait unfrozen, each using CPU (docs/pool.md)",
				 c->lim.pool);
		return false;
	}
	return true;
}

void check_warm_part(struct check *c)
{
	struct warm w = {.c = c};

	if (!warm_wanted(c))
		return;
	if (!warm_boot(&w)) {
		const char *failed = engine_pool_failed(c->e);
		const char *preload = policy_image_preload(c->cp.policy);

		if (check_stopped(c))
			;
		else if (failed && preload)
			check_report_say(c, CHECK_MARK_PROBLEM,
					 "image.preload: a warm sandbox importing %s failed: %s",
					 preload, failed);
		else if (failed)
			check_report_say(c, CHECK_MARK_PROBLEM,
					 "pool: a warm sandbox failed to boot: %s", failed);
		else
			check_report_say(c, CHECK_MARK_PROBLEM,
					 "pool: no warm sandbox was ready within the boot timeout "
					 "(limits.boot_s, %u s); the log on stderr says why",
					 c->lim.boot_s);
	} else if (warm_frozen(&w) == 0 && warm_run(&w) == 0) {
		check_report_say(c, CHECK_MARK_OK,
				 "pool: a warm sandbox waited frozen (%s) and ran its cell once "
				 "thawed (%s)",
				 w.frozen.said, w.thawed.said);
	}
	check_run_release(&w.probe); /* stopped: no answer comes after this */
	json_decref(w.probe.result);
}
