/* bridge.h: every tool call a cell makes passes here before any upstream
 * sees it (docs/bridge.md).
 *
 * A catalog is what one role may see and call: built from the upstreams'
 * tool lists and the policy, immutable, shared by reference. Each cell gets
 * the catalog that was current when it started, so a tool list that changes
 * under a running cell changes nothing for it.
 *
 * A call's checks, in order, each a refusal the code sees as ToolError:
 *   1. the tool exists and the role may call it (policy_tool_check: the
 *      allowlist, write tools only for a role with write);
 *   2. its input schema could be compiled (a schema the validator reports
 *      unsupported or malformed refuses every call); the arguments are an
 *      object of at most max_args_bytes (compact JSON) that validates, and
 *      names the schema does not declare are refused unless it allows them;
 *   3. the run has calls left (every call counts, refused ones too);
 *      a tool the policy gates waits for the approver's yes (approve.c);
 *      calls beyond `concurrency` in flight wait their turn (FIFO);
 *   4. the upstream answers within the per-call timeout, with a result of at
 *      most max_result_bytes (refused, not cut) that nests at most
 *      APPL_RUNNER_VALUE_DEPTH_MAX levels once turned into a value.
 * Refusals are at most APPL_TOOL_ERROR_MAX bytes and carry no host detail: a
 * host-side fault reaches the code only as a type name.
 */
#ifndef APPL_BRIDGE_BRIDGE_H
#define APPL_BRIDGE_BRIDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "policy/policy.h"
#include "stubs/stubs.h"

/* One tool of one upstream's list, as the caller has it; borrowed, and only
 * read during bridge_catalog_new. */
struct bridge_tool_in {
	const char *server;
	const char *name;
	const char *description;    /* may be NULL */
	const json_t *input_schema; /* may be NULL: then every call is refused */
	bool read_only_hint;
	/* outputSchema (may be NULL): the stub's return type, and what every
	 * structured result of the tool is checked against. */
	const json_t *output_schema;
};

struct bridge_catalog;

/* Build the catalog of role (borrowed; NULL: a role that may call nothing)
 * from tools[0..n) under policy p (borrowed; it must outlive the catalog).
 * Every tool is kept with its verdict; those allowed whose schema compiles,
 * that do not need MCP tasks, and whose names can become Python names are
 * offered (stubs). The others whose names can, as many as fit beside the
 * offered ones in APPL_RUNNER_TOOLS_MAX, are stand-ins: a name in the cell
 * whose calls the bridge refuses saying why. Servers of the policy with no
 * tool here are named unavailable. A (server, name) given twice keeps the
 * first. *out is new with one reference; 0, or -ENOMEM / -E2BIG (more than
 * APPL_RUNNER_TOOLS_MAX offered) with err. */
int bridge_catalog_new(const struct policy *p, const char *role, const struct bridge_tool_in *tools,
		       size_t n, struct bridge_catalog **out, struct appl_err *err);

/* The same for a caller: a role's cells, or the program of a code tool
 * (policy_call_check decides each tool; a call that needs a person's yes
 * is asked as the caller's role's would be). who is borrowed for the
 * call. */
int bridge_catalog_for(const struct policy *p, const struct policy_caller *who,
		       const struct bridge_tool_in *tools, size_t n, struct bridge_catalog **out,
		       struct appl_err *err);

struct bridge_catalog *bridge_catalog_ref(struct bridge_catalog *c);
void bridge_catalog_unref(struct bridge_catalog *c); /* safe on NULL */

/* The offered tools' names and stubs (stubs.h); borrowed. */
const struct stubs *bridge_catalog_stubs(const struct bridge_catalog *c);

/* The runner's `tools` array for a cell; borrowed. */
const json_t *bridge_catalog_runner_tools(const struct bridge_catalog *c);

/* Every tool given, sorted by server then name, with why it is not offered
 * (NULL when it is): for the log and `appliance stubs`. */
struct bridge_tool_info {
	const char *server, *name;
	const char *why_not; /* static or owned by the catalog */
};
size_t bridge_catalog_count(const struct bridge_catalog *c);
int bridge_catalog_info(const struct bridge_catalog *c, size_t i, struct bridge_tool_info *out);

/* "ns.fn", the name the code calls server.name by, or NULL when the cell has
 * no function for it; borrowed. */
const char *bridge_catalog_pyname(const struct bridge_catalog *c, const char *server,
				  const char *name);

/* ---- per-server slots, shared by every run -------------------------------- */

/* At most servers.NAME.concurrency calls in flight to each server, whatever
 * the cells: a call past that waits in its run, and a slot that frees goes
 * to the next run in turn (round robin) that has a call waiting for that
 * server, so one run with many calls cannot make another wait behind all
 * of them. Waiting for a slot counts toward the cell's deadline, not the
 * call's timeout (which starts when the call is sent). */
struct bridge_gate;

/* A gate for the servers of p (borrowed for the call). NULL on -ENOMEM. */
struct bridge_gate *bridge_gate_new(const struct policy *p);
/* A reload: each server of p gets p's slots (a new one its own; one p no
 * longer has keeps its slots for the calls of runs that still may make
 * them). A higher count frees slots at once; a lower one holds from the
 * next call. 0, or -ENOMEM. */
int bridge_gate_update(struct bridge_gate *g, const struct policy *p);
/* Safe on NULL; every run using it must be freed first. */
void bridge_gate_free(struct bridge_gate *g);
/* Calls of all runs in flight to server now (0 for an unknown name). */
unsigned bridge_gate_inflight(const struct bridge_gate *g, const char *server);

/* ---- one run's calls ------------------------------------------------------ */

struct bridge_limits {
	unsigned max_calls;   /* calls per run */
	unsigned concurrency; /* in flight at once; the rest wait */
	unsigned call_timeout_ms;
	size_t max_args_bytes;
	size_t max_result_bytes;
};

void bridge_limits_from_policy(const struct policy_limits *l, struct bridge_limits *out);

struct bridge_run;
struct cell;
struct upstream_set;

/* A run of catalog c (a reference is taken) under lim for cell (borrowed;
 * it must outlive the run): the run becomes the cell's caller
 * (cell_set_caller), sends what passes to ups (borrowed) and answers the
 * cell itself. log_id (copied; may be NULL) names the run in log lines.
 * NULL with err on -ENOMEM. */
struct bridge_run *bridge_run_new(struct bridge_catalog *c, const struct bridge_limits *lim,
				  struct upstream_set *ups, struct cell *cell, const char *log_id,
				  struct appl_err *err);

/* Record every call of r in the audit log a (borrowed; NULL: none), with
 * role (borrowed; NULL: none) as the caller's: a refusal as one line, a
 * call sent as its line before it goes (on disk first for a write tool)
 * and another with its outcome. While a cannot be written, no call goes
 * out (audit.h). */
struct audit;
void bridge_run_audit(struct bridge_run *r, struct audit *a, const char *role);

/* The person at the run's MCP client, asked through the client
 * (elicitation; the gateway's). ask puts text (what a person reads;
 * borrowed) to the client for the call whose binding digest is bind (its
 * id, tool and arguments); it answers later, from the loop and never from
 * inside ask, through answer(token, outcome, claim), outcome one of
 * "approved", "declined", "cancelled" or "unavailable", exactly once unless
 * cancel(a, handle) came first; claim, with replicas, the approval's key
 * in their ledger (32 bytes; NULL: none). NULL when this client cannot be
 * asked, with why (cap bytes) saying so. */
typedef void (*bridge_answer_fn)(void *token, const char *outcome, const unsigned char *claim);
struct bridge_asker {
	void *(*ask)(void *a, const char *text, const unsigned char bind[32],
		     bridge_answer_fn answer, void *token, char *why, size_t cap);
	void (*cancel)(void *a, void *handle);
	void *a;
};

/* Who is asked before a call of a tool that needs a person's yes
 * (policy_tool_approval): the approver program command when there is one;
 * else the client through asker (ask NULL: nobody, and such calls are
 * refused as unavailable). Each question waits at most timeout_ms, at most
 * max questions per run. loop runs the program and the timers; client
 * names the caller in the question. All borrowed. */
struct loop;

/* The ledger replicas share (docs/scale-out.md): an approved call that
 * comes with a claim key goes out only once the key is claimed here, so
 * one approval makes at most one call over every replica; another's
 * claim gives back the result it stored. claim answers later, from the
 * loop, through cb (result borrowed, for BRIDGE_CLAIM_DONE), unless
 * cancel came first; NULL: refused at once. put keeps a call's result
 * (borrowed) under its key. */
enum bridge_claim {
	BRIDGE_CLAIM_OURS,    /* claimed here: the call goes out */
	BRIDGE_CLAIM_DONE,    /* made before (another replica, an earlier try): its result */
	BRIDGE_CLAIM_UNKNOWN, /* claimed before, no result kept: it is not made again */
	BRIDGE_CLAIM_ERROR,   /* the ledger did not answer: not made */
};
typedef void (*bridge_claim_cb)(void *data, enum bridge_claim outcome, const json_t *result);
struct bridge_ledger {
	void *(*claim)(void *l, const unsigned char key[32], bridge_claim_cb cb, void *data);
	void (*cancel)(void *l, void *handle);
	void (*put)(void *l, const unsigned char key[32], const json_t *result);
	void *l;
};

struct bridge_approvals {
	struct loop *loop;
	const char *command;
	struct bridge_asker asker;
	unsigned timeout_ms;
	unsigned max;
	const char *client;
	const struct bridge_ledger *ledger; /* NULL: one appliance alone */
};
void bridge_run_approvals(struct bridge_run *r, const struct bridge_approvals *ap);

/* Give each call of r a span (trace.h) of tracer t (borrowed; it must
 * outlive r) below parent (copied; NULL: no spans): named by its method
 * and the policy's names of the server and the tool, with its outcome and
 * result bytes, an approval's wait as a child; a call that goes upstream
 * carries the span's traceparent. Before the first call. */
struct tracer;
struct trace_ctx;
void bridge_run_trace(struct bridge_run *r, struct tracer *t, const struct trace_ctx *parent);

/* Take r's calls through the per-server slots of g (borrowed; it must
 * outlive r). Without one, only the run's own concurrency applies. Before
 * the first call. */
void bridge_run_gate(struct bridge_run *r, struct bridge_gate *g);

/* A call from the code (the cell calls this): id (the runner's), tool
 * ("server.tool" as call.tool carries it) and args (borrowed; a reference
 * is taken when the call has to wait). Answered or refused to the cell
 * (cell_call_answer, cell_call_refuse), at once or later. */
void bridge_run_call(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args);

/* A resource read from the code: server's resource uri, checked like a
 * call (the role may read the server's resources; the budget, the caps,
 * the slots, the audit log) and answered with the contents as a list of
 * {"text": s} or {"blob": base64} (bridge_resource_value). */
void bridge_run_read(struct bridge_run *r, json_int_t id, const char *server, const char *uri);

/* Calls in flight now, and the most ever in flight at once. */
unsigned bridge_run_inflight(const struct bridge_run *r);
unsigned bridge_run_peak(const struct bridge_run *r);

/* Cancel what is in flight upstream (no answer), drop what waits, stop
 * taking the cell's calls, free. Safe on NULL. Not from inside a result
 * callback. */
void bridge_run_free(struct bridge_run *r);

/* ---- pure steps, exported for their tests --------------------------------- */

/* Steps 1 and 2 for tool and args: 0 when the call may go on, with *server
 * and *name (borrowed from c) set; else -EPERM (not allowed or unknown),
 * -EINVAL (arguments refused) or -ENOTSUP (schema unusable), with msg
 * (cap bytes, cap > 0) the refusal for the code, and log (log_cap bytes;
 * NULL: none) the same refusal for the audit log, which holds no text of
 * the arguments: where msg quotes a name or the schema's error, log says
 * only that they do not match, and which keyword failed. */
int bridge_check(const struct bridge_catalog *c, const char *tool, const json_t *args,
		 size_t max_args_bytes, const char **server, const char **name, char *msg,
		 size_t cap, char *log, size_t log_cap);

/* Turn a resources/read result into the code's value: its contents, each
 * as {"text": s} or {"blob": base64}, in order. 0 with *value new; -EFBIG
 * / -EINVAL / -ENOMEM refused (over max_bytes, not a read result, no
 * contents, a content with neither or a blob that is not base64) with msg
 * saying why. */
int bridge_resource_value(const json_t *result, size_t max_bytes, json_t **value, char *msg,
			  size_t cap);

/* Turn a tools/call result object into the code's value: structuredContent
 * (an object) as it is; else, when every content block is text (at least
 * one), their texts joined by newlines; else the content array. 0 with
 * *value new; 1 when the result has isError: true (msg has the tool's text,
 * or a fixed text when it has none); -EFBIG / -E2BIG / -EINVAL / -ENOMEM
 * refused (too large, too deep, not a result) with msg saying why, to be
 * put after "refused: server.tool: ". */
int bridge_result_value(const json_t *result, size_t max_bytes, json_t **value, char *msg,
			size_t cap);

#endif
