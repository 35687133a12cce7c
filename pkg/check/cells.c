/* cells.c: the loop, the signals, the runtime and the probe cells
 * (cells.h). */
#include "check/cells.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/bridge.h"
#include "cell/cell.h"
#include "engine/process.h"
#include "loop/loop.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"

struct check_cells {
	struct loop *loop;
	struct sandbox_rt *rt;
	int stop_signal;
	const char *env_name; /* set in the environment; NULL: nothing */
};

struct check_cell {
	struct cell *cell;
	struct bridge_run *br;
	void (*on_done)(void *data);
	void *data;
};

struct check_cells *check_cells_new(void)
{
	return calloc(1, sizeof(struct check_cells));
}

int check_cells_runtime_open(struct check_cells *s, const struct sandbox_rt_config *cfg,
			     struct appl_err *err)
{
	if (!(s->rt = sandbox_rt_open(cfg, err)))
		return err->code < 0 ? err->code : -EIO;
	return 0;
}

struct sandbox_rt *check_cells_runtime(const struct check_cells *s)
{
	return s->rt;
}

static void on_stop_signal(int signo, void *data)
{
	struct check_cells *s = data;

	/* The probe rounds cancel the running cells once the round is over. */
	s->stop_signal = signo;
}

static void on_sigchld(int signo, void *data)
{
	(void)signo;
	(void)data;
	proc_reap_orphans();
}

int check_cells_loop_open(struct check_cells *s, struct appl_err *err)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP};
	int rc;

	if ((rc = proc_signals_check(err)) < 0)
		return rc;
	if (!(s->loop = loop_new(err)))
		return err->code < 0 ? err->code : -ENOMEM;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if ((rc = loop_signal(s->loop, stops[i], on_stop_signal, s, err)) < 0)
			return rc;
	return loop_signal(s->loop, SIGCHLD, on_sigchld, s, err);
}

struct loop *check_cells_loop(const struct check_cells *s)
{
	return s->loop;
}

int check_cells_stopped(const struct check_cells *s)
{
	return s->stop_signal;
}

int check_cells_wait(struct check_cells *s)
{
	return loop_run_once(s->loop, -1);
}

int check_cells_env_set(struct check_cells *s, const char *name, const char *value)
{
	s->env_name = name;
	return engine_env_set(name, value);
}

static void on_cell_done(struct cell *cell, void *data)
{
	struct check_cell *c = data;

	(void)cell;
	c->on_done(c->data);
}

/* The bridge as the cell's caller, before any code runs. */
static int bridge_open(struct check_cells *s, const struct check_cell_spec *spec,
		       struct check_cell *c, char *why, size_t cap)
{
	struct bridge_approvals ap = *spec->approvals;
	struct appl_err err = {0};

	ap.loop = s->loop;
	if (!(c->br = bridge_run_new(spec->catalog, spec->blim, spec->ups, c->cell, spec->run_id,
				     &err))) {
		snprintf(why, cap, "%s", err.msg);
		return -1;
	}
	bridge_run_approvals(c->br, &ap);
	return 0;
}

int check_cells_start(struct check_cells *s, const struct check_cell_spec *spec,
		      struct check_cell **out, char *why, size_t cap)
{
	struct check_cell *c = calloc(1, sizeof(*c));
	struct cell_hooks hooks = {.on_done = on_cell_done, .data = c};
	struct appl_err err = {0};
	uint64_t arrival = loop_now_ms();
	struct sandbox *sb;

	*out = NULL;
	if (!c) {
		snprintf(why, cap, "out of memory");
		return -ENOMEM;
	}
	c->on_done = spec->on_done;
	c->data = spec->data;
	if (!(sb = sandbox_start(s->rt, spec->oci, &err)) ||
	    !(c->cell = cell_boot(s->loop, sb, spec->lim, NULL, &err))) {
		snprintf(why, cap, "the sandbox did not start: %s", err.msg);
		free(c);
		return -1;
	}
	if (spec->catalog && bridge_open(s, spec, c, why, cap) < 0) {
		check_cells_end(c);
		return -1;
	}
	if (cell_run(c->cell, spec->code, strlen(spec->code),
		     spec->catalog ? bridge_catalog_runner_tools(spec->catalog) : NULL, spec->lim,
		     &hooks, arrival, &err) < 0) {
		snprintf(why, cap, "the cell did not start: %s", err.msg);
		check_cells_end(c);
		return -1;
	}
	*out = c;
	return 0;
}

json_t *check_cells_result(const struct check_cell *c)
{
	return c && c->cell ? cell_outcome_json(cell_outcome(c->cell)) : NULL;
}

void check_cells_cancel(struct check_cell *c)
{
	cell_cancel(c->cell);
}

void check_cells_end(struct check_cell *c)
{
	if (!c)
		return;
	bridge_run_free(c->br);
	cell_free(c->cell);
	free(c);
}

void check_cells_free(struct check_cells *s)
{
	if (!s)
		return;
	if (s->rt && s->loop)
		sandbox_rt_settle(s->rt);
	sandbox_rt_close(s->rt); /* before the loop: it finishes teardowns from it */
	loop_free(s->loop);
	engine_reap_children();
	if (s->env_name)
		engine_env_unset(s->env_name);
	free(s);
}
