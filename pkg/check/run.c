/* run.c: part 2's rounds: the probes started at most limits.cells at
 * once, as run would, the long-running ones first, each judged as soon as
 * its cell has ended (internal.h). */
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"

static void on_probe_done(void *data)
{
	((struct check_probe *)data)->ended = true;
}

void check_run_release(struct check_probe *p)
{
	check_cells_end(p->cell);
	p->cell = NULL;
	check_listen_close(&p->lis);
}

static int probe_start(struct check *c, struct check_probe *p)
{
	struct cell_limits lim = c->cell_lim;
	struct bridge_approvals ap = {.command = policy_approvals_command(c->cp.policy),
				      .timeout_ms = c->lim.approval_timeout_s * 1000u,
				      .max = c->lim.max_approvals,
				      .client = CHECK_RUN_ID};
	struct check_cell_spec spec = {.oci = &c->oci,
				       .lim = &lim,
				       .code = p->code,
				       .catalog = p->call ? c->client : NULL,
				       .blim = &c->blim,
				       .ups = c->ups,
				       .approvals = &ap,
				       .run_id = CHECK_RUN_ID,
				       .on_done = on_probe_done,
				       .data = p};

	lim.deadline_ms = p->deadline_ms;
	p->started = true;
	if (check_cells_start(c->cells, &spec, &p->cell, p->why, sizeof(p->why)) < 0) {
		/* why already says which step failed */
		p->ended = p->judged = true;
		p->ok = false;
		check_listen_close(&p->lis);
		return -1;
	}
	return 0;
}

static void probe_judge_now(struct check_probe *p)
{
	unsigned arrivals = check_listen_arrivals(&p->lis);
	json_t *result = check_cells_result(p->cell);

	p->ok = check_judge_result(&p->ex, result, arrivals, p->why, sizeof(p->why));
	p->judged = true;
	json_decref(result);
	check_run_release(p);
}

/* The next probe to start: the long-running ones first. */
static struct check_probe *probe_next(struct check *c)
{
	for (int early = 1; early >= 0; early--)
		for (size_t i = 0; i < c->nprobes; i++) {
			struct check_probe *p = &c->probes[i];

			if (!p->started && (p->def ? p->def->early : false) == (bool)early)
				return p;
		}
	return NULL;
}

static unsigned probes_reap(struct check *c)
{
	unsigned running = 0;

	for (size_t i = 0; i < c->nprobes; i++) {
		struct check_probe *p = &c->probes[i];

		if (p->started && p->ended && !p->judged)
			probe_judge_now(p);
		else if (p->started && !p->judged)
			running++;
	}
	return running;
}

static void probes_cancel(struct check *c, int signo)
{
	for (size_t i = 0; i < c->nprobes; i++) {
		struct check_probe *p = &c->probes[i];

		if (!p->started)
			check_prepare_surprise(p, "not run: stopped by signal %d", signo);
		else if (p->cell && !p->ended)
			check_cells_cancel(p->cell);
	}
}

void check_run_probes(struct check *c)
{
	unsigned running = 0;
	struct check_probe *p;
	bool cancelled = false;

	for (;;) {
		running = probes_reap(c);
		while (!check_cells_stopped(c->cells) && running < c->lim.cells &&
		       (p = probe_next(c)))
			if (probe_start(c, p) == 0)
				running++;
		if (check_cells_stopped(c->cells) && !cancelled) {
			probes_cancel(c, check_cells_stopped(c->cells));
			cancelled = true;
		}
		if (running == 0 && (check_cells_stopped(c->cells) || !probe_next(c)))
			break;
		if (check_cells_wait(c->cells) < 0)
			break;
	}
}
