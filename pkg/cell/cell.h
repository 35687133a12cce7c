/* cell.h: one run of one cell, from a booting sandbox to its result.
 *
 * A cell is a small state machine inside the event loop: it reads the
 * runner's lines (each hostile: capped, strictly parsed, checked against the
 * protocol's order), sends the code once the runner is ready, keeps what the
 * code prints up to a cap and stops it past a larger one, hands each tool
 * call to its owner, and ends on `done`, at the deadline, on a protocol
 * violation, or when the sandbox dies. Its sandbox is destroyed with it.
 */
#ifndef APPL_CELL_CELL_H
#define APPL_CELL_CELL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "cell/proto.h"
#include "loop/loop.h"
#include "sandbox/runsc.h"

struct cell;

struct cell_limits {
	uint64_t deadline_ms;		/* from arrival; the sandbox is killed then */
	uint64_t boot_ms;		/* from start, for the runner to say ready */
	size_t max_output;		/* printed bytes kept; more sets truncated */
	size_t stop_output;		/* printed bytes that stop the run */
	unsigned long max_lines;	/* protocol lines from the runner; more is a violation */
	struct cell_files_limits files; /* what comes back from /out */
};

/* Defaults of limits.h. */
void cell_limits_init(struct cell_limits *lim);

struct cell_hooks {
	/* The run ended (or, for a cell not yet given its code, the sandbox
	 * died or never became ready); cell_outcome() holds how. It runs
	 * inside the cell's own handlers: free the cell from a task deferred
	 * to the round's end (loop_defer), not here. */
	void (*on_done)(struct cell *c, void *data);
	/* A cell booted without code (cell_boot) is ready for it. */
	void (*on_ready)(struct cell *c, void *data);
	/* The code printed or made a call (cell_calls and cell_output have
	 * moved on): for progress reports. May be NULL. */
	void (*on_progress)(struct cell *c, void *data);
	void *data;
};

/* Why a run ended. */
enum cell_reason {
	CELL_RAN = 0,	/* the code ran to its end (it may have raised) */
	CELL_DEADLINE,	/* past limits.deadline_s, counted from arrival */
	CELL_OUTPUT,	/* printed limits.stop_output_bytes */
	CELL_PROTOCOL,	/* the runner broke the protocol */
	CELL_MEMORY,	/* the sandbox was killed for memory */
	CELL_BOOT,	/* the sandbox never became ready */
	CELL_EXIT,	/* the runner ended without finishing */
	CELL_CANCELLED, /* the client cancelled the run */
	CELL_INTERNAL,	/* a host fault */
	CELL_SIGNAL,	/* `appliance cell` got a stop signal */
	CELL_REASON_N
};

/* The reason's name in the result object ("deadline", ...), NULL for
 * CELL_RAN; static. */
const char *cell_reason_name(enum cell_reason r);

/* How a run ended: the typed result, read by the gateway (logs, the MCP
 * answer) and turned into the result object once (cell_outcome_json). */
struct cell_outcome {
	const char *out; /* what the code printed, kept up to max_output */
	size_t out_len;
	bool truncated;	     /* output or the final value was cut */
	const char *error;   /* the code's traceback tail or why it stopped; NULL */
	const json_t *value; /* the final expression's value; NULL: none */
	bool value_cut;	     /* it was over APPL_CELL_RESULT_MAX: value is a note */
	enum cell_reason reason;
	unsigned long calls;  /* tool calls the code made */
	uint64_t duration_ms; /* from arrival */
	/* The files the code left in /out, returned and left out, as
	 * cell_files_list gives them (their content included); NULL: none.
	 * Only a run that ran to its end has them. */
	const json_t *files;
};

/* true when the model should see the run as failed: the code raised, or
 * the run was stopped. */
bool cell_outcome_is_error(const struct cell_outcome *o);

/* The result object: {stdout, error, result, truncated, stopped, reason,
 * calls, duration_ms, files}, files without their content (name, bytes,
 * type, sha256, returned, and reason when left out); new, or NULL on out of
 * memory. It always validates against cell_outcome_schema(). */
json_t *cell_outcome_json(const struct cell_outcome *o);

/* The JSON Schema of the result object (borrowed; static, built once):
 * run_python's outputSchema. */
const json_t *cell_outcome_schema(void);

/* A tool call of the code goes to fn(data) (pkg/bridge): tool and args are
 * borrowed for the call. A resource read comes the same way with read true,
 * tool the server's name and args {"uri": uri}. fn NULL: every call is
 * refused. Answered with cell_call_answer or cell_call_refuse. */
typedef void (*cell_call_fn)(void *data, json_int_t id, const char *tool, const json_t *args,
			     bool read);
void cell_set_caller(struct cell *c, cell_call_fn fn, void *data);

/* cell_boot and cell_run at once: start a cell on sb (steals: destroyed
 * with the cell, or at once on failure). code[0..len) is the program; tools (borrowed, may be NULL) the
 * runner's `tools` array. arrival_ms (loop_now_ms) is when the request
 * arrived: the deadline counts from it. New object, or NULL with err
 * filled. */
struct cell *cell_start(struct loop *loop, struct sandbox *sb, const char *code, size_t len,
			const json_t *tools, const struct cell_limits *lim,
			const struct cell_hooks *hooks, uint64_t arrival_ms, struct appl_err *err);

/* Boot a cell on sb (steals it) without code: the runner starts and, once
 * it says ready, waits for its cell line (a pooled sandbox: it has run no
 * code). The boot timer (lim->boot_ms) runs; no deadline yet. hooks
 * (on_ready, on_done) say when it is ready or died. New object, or NULL
 * with err filled. */
struct cell *cell_boot(struct loop *loop, struct sandbox *sb, const struct cell_limits *lim,
		       const struct cell_hooks *hooks, struct appl_err *err);

/* Tell the runner of a cell booted on a restored sandbox (sandbox_restore)
 * to reseed and say ready again (the wake line): the ready it said before
 * the checkpoint was to another host object. Call once, after cell_boot. */
void cell_wake(struct cell *c);

/* Keep c after its run (before cell_run): the runner is told to wait for
 * another cell after done, and c then waits for it (cell_kept), its
 * sandbox alive, on_done called with the run's outcome. cell_run gives it
 * the next code, in the same interpreter. A line from the runner between
 * runs is a violation, and an exit ends it (on_done again, with
 * cell_finished true): set the hooks the waiting owner wants
 * (cell_set_hooks). A session's cell (docs/sessions.md). */
void cell_keep(struct cell *c);
bool cell_kept(const struct cell *c);
void cell_set_hooks(struct cell *c, const struct cell_hooks *hooks);

/* The sandbox of c (borrowed: it lives as long as c). */
struct sandbox *cell_sandbox(const struct cell *c);

/* Whether a booted cell is ready and waiting for its code. */
bool cell_idle(const struct cell *c);

/* Give a booted cell its code (once): sent at once when it is ready, else
 * as soon as it is. lim's deadline and output caps apply from now, the
 * deadline counting from arrival_ms; hooks replace the boot hooks. 0, or
 * -EINVAL (already given, or the cell ended) / -ENOMEM with err. */
int cell_run(struct cell *c, const char *code, size_t len, const json_t *tools,
	     const struct cell_limits *lim, const struct cell_hooks *hooks, uint64_t arrival_ms,
	     struct appl_err *err);

/* A code tool's arguments (docs/runner-protocol.md): the cell line of the
 * next cell_run carries args, an object the code sees as its global `args`
 * (a dict). Call it before that cell_run. A reference is taken (a caller
 * that changes args after gives that change), dropped once the line is sent
 * or when c is freed; a later call replaces it, NULL drops it (no args:
 * the code has no `args` at all). A kept cell's next run has no args unless
 * it is set again. 0, or -EINVAL when args is not an object. */
int cell_set_args(struct cell *c, const json_t *args);

/* Answer call id with value (borrowed) / with an error message shown to the
 * code as ToolError. Ignored after the cell ended. */
void cell_call_answer(struct cell *c, json_int_t id, const json_t *value);
void cell_call_refuse(struct cell *c, json_int_t id, enum cell_error_kind kind, const char *msg);

/* Stop the run now (a client cancelled it): reason "cancelled". */
void cell_cancel(struct cell *c);

bool cell_finished(const struct cell *c);

/* How the run ended (borrowed; valid until cell_free), NULL until it did. */
const struct cell_outcome *cell_outcome(const struct cell *c);

/* While it runs: the calls made (every call line, refused ones too: the
 * one counter of a run, which the bridge's budget and the run's progress
 * read) and what was printed so far (borrowed, *len bytes, kept up to
 * max_output). */
unsigned long cell_calls(const struct cell *c);
const char *cell_output(const struct cell *c, size_t *len);

/* The id of the cell's sandbox (borrowed), for log lines. */
const char *cell_sandbox_id(const struct cell *c);

/* Destroy the sandbox (if not yet) and free. Safe on NULL. */
void cell_free(struct cell *c);

#endif
