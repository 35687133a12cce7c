/* run.h: one run (one run_python call), from its admission to its answer,
 * owned by one object (DESIGN.md section 14).
 *
 * A run holds everything that is its own: its id (in every log line about
 * it), its code, its place in line and the admission timer that ends its
 * wait at its deadline (the deadline counts from arrival, waiting
 * included), its cell and its bridge run once it has a slot, its lines in
 * the audit log (run.start, run.end or run.refused), the questions its
 * calls put to the person at its client, and its answer. Cancelling it is
 * one function, run_cancel, in any state.
 *
 * A run tells the side that asked for it (the MCP session, or a command
 * waiting in process) what happens through struct run_client: that it
 * moved on, a question for the person there, and its answer. That side
 * knows nothing of sandboxes: the answer is the rendered result object.
 *
 * The runs of one appliance form a run_set: the admission queue (admit.h:
 * at most `cells` hold a slot, the clients taking turns), and the task
 * that answers and frees the runs that ended, at the end of the loop round
 * they ended in, never from inside their cell's handlers. Which sandbox and
 * bridge a run gets is its owner's (the engine's start hook): a run only
 * asks for them.
 */
#ifndef APPL_RUN_RUN_H
#define APPL_RUN_RUN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "bridge/bridge.h"
#include "cell/cell.h"
#include "loop/loop.h"

#define RUN_ID_BYTES 6 /* a run id: 12 hex digits, random */
#define RUN_ID_LEN   (2 * RUN_ID_BYTES)

struct run;
struct run_set;
struct audit;

/* A question for the person at a run's client: a write approval. The
 * answer comes through fn(token, outcome), outcome "approved", "declined",
 * "cancelled" or "unavailable", exactly once unless it was withdrawn. */
struct run_question {
	const char *text;	   /* what a person reads (borrowed) */
	const unsigned char *bind; /* 32 bytes: what it is about */
	const char *label;	   /* the run's id */
	unsigned timeout_ms;	   /* how long the answer is awaited */
	bridge_answer_fn fn;
	void *token;
};

/* The side that asked for a run. Copied by run_new; name is copied too,
 * role must outlive the run (the policy's). */
struct run_client {
	const char *name;     /* the principal, for the log and the audit log */
	const char *role;     /* its policy role; NULL: it may call nothing */
	const char *revision; /* its MCP revision, for the audit log; may be NULL */
	/* The run moved on (printed, called). May be NULL. */
	void (*progress)(void *c);
	/* Put q to the person at the client: a handle for withdraw, or NULL
	 * with why (cap bytes) when it cannot be asked. NULL: never. */
	void *(*ask)(void *c, const struct run_question *q, char *why, size_t cap);
	void (*withdraw)(void *c, void *handle);
	/* The answer, exactly once unless the run was cancelled first:
	 * result (borrowed for the call) the result object (cell.h) with
	 * is_error, or result NULL and text (borrowed) a failure. files
	 * (borrowed for the call; NULL: none) are the files the code left,
	 * their content included (cell_outcome.files): the result object
	 * lists them without it. */
	void (*answer)(void *c, const json_t *result, bool is_error, const char *text,
		       const json_t *files);
	void *c;
	/* A deadline shorter than every run's (cell_limits.deadline_ms), in
	 * ms; 0 or a longer one: every run's. */
	uint64_t deadline_ms;
	/* A run of a session (docs/sessions.md): its handle, given back in
	 * the answer, the handle's digest, in its audit lines, and the owner's
	 * session object. Borrowed: they must outlive the run. NULL: a run of
	 * its own. */
	const char *session, *session_digest;
	void *session_data;
	/* A code tool's run (docs/code-tools.md): the tool (borrowed from the
	 * policy the run was admitted under, which must outlive the run) whose
	 * program is the code, and its arguments (an object that passed its
	 * input schema; a reference is taken), the program's `args`. Its
	 * answer is the program's value, checked against the tool's output
	 * schema: answer gets it as result (is_error false), or a failure
	 * text naming the exception or the first mismatch. NULL: run_python. */
	const struct policy_code_tool *tool;
	const json_t *args;
	/* The run answers an MCP task (docs/tasks.md): its audit line says so. */
	bool task;
	/* The span of the request that asked for the run (copied; NULL: none):
	 * the run's span goes below it. */
	const struct trace_ctx *trace;
};

struct tracer;
struct trace_ctx;

struct run_set_config {
	struct loop *loop;		/* borrowed, as all of these */
	struct tracer *tracer;		/* each run's spans (trace.h); NULL: none */
	const struct cell_limits *cell; /* every run's cell limits */
	unsigned cells;			/* slots: runs with a cell at once */
	unsigned per_client;		/* slots one client may hold; 0: no cap */
	unsigned approval_timeout_ms;	/* how long a question waits */
	/* A run got a slot: give it a cell and a bridge (run_begin). 0, or
	 * negative with err: the run then ends without a cell. */
	int (*start)(struct run *r, void *data, struct appl_err *err);
	/* ended runs were answered and freed this round (n of them). May be
	 * NULL. */
	void (*reaped)(void *data, unsigned n);
	/* A run is freed: what it was made with (run_new's owner) is
	 * released, last. May be NULL. */
	void (*released)(void *data, void *owner);
	/* A run's cell ended with reason (from its on_done: only note it).
	 * May be NULL. */
	void (*cell_ended)(void *data, enum cell_reason reason);
	/* A session's run ended and is about to be answered: its owner keeps
	 * its cell (run_cell_keep) or says the session ended
	 * (run_session_ended). May be NULL. */
	void (*settle)(void *data, struct run *r);
	void *data;
};

/* NULL with err (-ENOMEM). */
struct run_set *run_set_new(const struct run_set_config *cfg, struct appl_err *err);

/* A reload: runs admitted from now on get these cell limits; cells and
 * per_client slots (a lower count holds as runs end: none is stopped), and
 * the wait of approval questions asked from now on. */
void run_set_limits(struct run_set *s, const struct cell_limits *cell, unsigned cells,
		    unsigned per_client, unsigned approval_timeout_ms);

/* The audit log the runs write to from now on (borrowed; NULL: none). */
void run_set_audit(struct run_set *s, struct audit *a);

/* Runs waiting for a slot: of client (NULL: of all). Runs listed (waiting,
 * running, or ended and not yet answered). */
unsigned run_set_waiting(const struct run_set *s, const char *client);
unsigned run_set_count(const struct run_set *s);

/* fn(data, client, waiting) for each run listed that has not ended yet
 * (client borrowed for the call): for counting runs by client in a
 * status. fn must not add or end runs. s may be NULL. */
typedef void (*run_set_each_fn)(void *data, const char *client, bool waiting);
void run_set_each(const struct run_set *s, run_set_each_fn fn, void *data);

/* The appliance stops: every cell is stopped now (the sandboxes go down
 * together); the runs are answered no more. */
void run_set_stop(struct run_set *s);

/* Every run still listed gets its last audit line (reason "shutdown",
 * not answered) and is freed, then s. Safe on NULL. */
void run_set_free(struct run_set *s);

/* A request that gets no run: its run.refused line (when there is an
 * audit log; naming client->tool when it has one) and client's answer,
 * the failure why. */
void run_set_refuse(struct run_set *s, const struct run_client *client, const char *why);

/* The same, with logged (borrowed) as the run.refused line's reason: why
 * without what the client sent (an argument's name). */
void run_set_refuse_logged(struct run_set *s, const struct run_client *client, const char *why,
			   const char *logged);

/* A run of code[0..len) (copied) for client, with the catalog cat (a
 * reference is taken; NULL: no tools) and owner (the caller's: run_owner
 * gives it back, the set's released hook gets it when the run is freed). It waits for a slot with its
 * deadline running, its run.start line written; it may start before this
 * returns. NULL with err (-ENOMEM): nothing was answered. */
struct run *run_new(struct run_set *s, const char *code, size_t len,
		    const struct run_client *client, struct bridge_catalog *cat, void *owner,
		    struct appl_err *err);

/* What the start hook reads (borrowed while r lives). */
const char *run_id(const struct run *r);
void *run_owner(const struct run *r);
/* r's cell once the start hook gave it one, else NULL (borrowed while r
 * lives): for reading which sandbox it runs in, never for using it. */
const struct cell *run_cell(const struct run *r);
const struct run_client *run_client(const struct run *r);
struct bridge_catalog *run_catalog(const struct run *r);

/* How the bridge reaches the person at r's client (bridge.h): through r,
 * which says "the client has gone" once it was cancelled. ask is NULL
 * when the client can never be asked. */
struct bridge_asker run_asker(struct run *r);

/* The start hook hands r its cell (a booted one, or one booting) and its
 * bridge run (may be NULL: every call is refused), both stolen, and r
 * gives the cell its code. 0, or negative with err: both were freed. */
int run_begin(struct run *r, struct cell *cell, struct bridge_run *br, struct appl_err *err);

/* The settle hook's: r's cell is the owner's from now on (r still reads
 * its outcome for the answer, and does not free it), or NULL when r got
 * none. */
struct cell *run_cell_keep(struct run *r);

/* The settle hook's: r's session ended with it, for why (a static word:
 * its answer says so). */
void run_session_ended(struct run *r, const char *why);

/* The client is gone or cancelled the request: r stops now, in whatever
 * state it is, and no answer goes out. */
void run_cancel(struct run *r);
/* run_cancel, and its audit line says who did it (copied; NULL: nobody
 * named). */
void run_cancel_by(struct run *r, const char *who);

/* r is stopped for the appliance's own reason (a stop signal), and still
 * answered: its result says stopped, reason "signal", error why (copied). */
void run_interrupt(struct run *r, const char *why);

/* r's span, which its tool calls go below (beside its wait for a sandbox
 * and its cell), or NULL when there are no spans. Borrowed while r
 * lives. */
const struct trace_ctx *run_trace(const struct run *r);

/* Where r is, for progress: waiting for a slot, the calls its code made
 * (the one counter: every call line, refused ones too), what it printed
 * so far (borrowed, *len bytes). */
bool run_waiting(const struct run *r);
unsigned long run_calls(const struct run *r);
const char *run_output(const struct run *r, size_t *len);

#endif
