/* cells.h: everything check does to the process and to the sandbox
 * runtime, in one place: the event loop and the signals it watches, the
 * runtime instance, starting a probe cell (a fresh sandbox, the bridge as
 * the cell's caller for a --call, then the code), the marker in check's own
 * environment, and reaping what is left at the end. Internal to pkg/check:
 * the rest of the package prepares probes and judges them, and only comes
 * here to run them.
 */
#ifndef APPL_CHECK_CELLS_H
#define APPL_CHECK_CELLS_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

struct bridge_approvals;
struct bridge_catalog;
struct bridge_limits;
struct cell_limits;
struct loop;
struct sandbox_oci_params;
struct sandbox_rt;
struct sandbox_rt_config;
struct upstream_set;

/* The loop, its signals, the runtime instance, the marker variable. */
struct check_cells;
/* One probe cell that started: its sandbox, its cell, its bridge run. */
struct check_cell;

/* New, nothing opened yet; NULL on out of memory. */
struct check_cells *check_cells_new(void);

/* Open the runtime instance (sandbox_rt_open) with cfg; 0 or negative with
 * err. The runtime (borrowed; NULL until opened) answers queries. */
int check_cells_runtime_open(struct check_cells *s, const struct sandbox_rt_config *cfg,
			     struct appl_err *err);
struct sandbox_rt *check_cells_runtime(const struct check_cells *s);

/* Open the loop and watch SIGTERM, SIGINT and SIGHUP (a stop: recorded for
 * check_cells_stopped) and SIGCHLD (orphans reaped). The caller has
 * blocked them for the signalfd (proc_signals_check says so otherwise).
 * The loop (borrowed; NULL until opened) is for the servers and cells. */
int check_cells_loop_open(struct check_cells *s, struct appl_err *err);
struct loop *check_cells_loop(const struct check_cells *s);

/* The stop signal that came, or 0. */
int check_cells_stopped(const struct check_cells *s);

/* One round of the loop, waiting as long as it takes; negative on a
 * failure of the loop. */
int check_cells_wait(struct check_cells *s);

/* Put name=value into check's own environment, where no cell may see it
 * (the host environment probe); taken out by check_cells_free. name must
 * outlive s. 0 or negative errno. */
int check_cells_env_set(struct check_cells *s, const char *name, const char *value);

/* What one probe cell is started with; all borrowed for the call, except
 * that catalog, ups and blim must outlive the cell. */
struct check_cell_spec {
	const struct sandbox_oci_params *oci;
	const struct cell_limits *lim;
	const char *code;
	/* A cell that calls tools: catalog (NULL: none) offers them through a
	 * bridge run to ups, under blim, with approvals (its loop is set
	 * here). */
	struct bridge_catalog *catalog;
	const struct bridge_limits *blim;
	struct upstream_set *ups;
	const struct bridge_approvals *approvals;
	const char *run_id;
	/* Called once the run ended (from the cell's own handlers). */
	void (*on_done)(void *data);
	void *data;
};

/* As the gateway starts a run: a fresh sandbox, the bridge as the cell's
 * caller before any code runs, then the code. New *out, or negative with
 * why (cap bytes) saying which step failed and how. */
int check_cells_start(struct check_cells *s, const struct check_cell_spec *spec,
		      struct check_cell **out, char *why, size_t cap);

/* The result object of a cell that ended (new reference; NULL when none). */
json_t *check_cells_result(const struct check_cell *c);

/* Stop a cell that still runs; its on_done follows. */
void check_cells_cancel(struct check_cell *c);

/* Free the cell, its bridge run and its sandbox. Safe on NULL. */
void check_cells_end(struct check_cell *c);

/* Settle and close the runtime, free the loop, reap every child left and
 * take the marker out of the environment. Safe on NULL. */
void check_cells_free(struct check_cells *s);

#endif
