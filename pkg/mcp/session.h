/* session.h: the MCP server the agents' clients talk to: a dispatch core
 * that knows no transport (docs/mcp-server.md).
 *
 * A struct mcp_server holds what every client shares: the owner's hooks,
 * the progress clock. A struct mcp_session is one client connection: it is
 * fed whole messages by its transport (stdio today: pkg/mcp/stdio.h) and
 * answers through the transport's send. The session is hostile input's
 * first stop after framing: every message is parsed strictly (pkg/jsonrpc),
 * refused with the right JSON-RPC error, and the session keeps serving.
 *
 * Two eras, decided per request (mcp/revision.h):
 *   - a request whose params._meta names io.modelcontextprotocol/
 *     protocolVersion is served under that revision (2026-07-28) with no
 *     handshake: server/discover, tools/list, tools/call,
 *     subscriptions/listen; every result carries resultType;
 *   - any other request is legacy: initialize picks the revision for the
 *     connection (2025-11-25 and before), then ping, tools/list, tools/call
 *     and the unsolicited notifications/tools/list_changed.
 * Both may arrive on one connection. Request ids are unique among the
 * requests in flight: a request reusing one is refused, never run.
 *
 * The one tool is run_python; what a run does is the owner's (hooks).
 * While a run whose request carried a progressToken is in flight, the
 * session sends notifications/progress at least every MCP_PROGRESS_EVERY_MS
 * and soon after the code prints or calls a tool, at most one per
 * MCP_PROGRESS_GAP_MS.
 */
#ifndef APPL_MCP_SESSION_H
#define APPL_MCP_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"
#include "mcp/revision.h"
#include "mcp/tool.h"
#include "trace/trace.h"

/* The _meta keys every 2026-07-28 request carries, and the error codes of
 * that revision (HTTP answers them with 400). */
#define META_VERSION		"io.modelcontextprotocol/protocolVersion"
#define META_CAPS		"io.modelcontextprotocol/clientCapabilities"
#define MCP_HEADER_MISMATCH	(-32020)
#define MCP_MISSING_CAPABILITY	(-32021)
#define MCP_UNSUPPORTED_VERSION (-32022)

#define MCP_PROGRESS_EVERY_MS 2000u /* a run with a token hears at least this often */
#define MCP_PROGRESS_GAP_MS   250u  /* and never more often than this */
#define MCP_LISTENS_MAX	      8u    /* open subscriptions/listen per session */

struct mcp_server;
struct mcp_session;
struct mcp_run; /* one tools/call of run_python in flight */

/* How a session reaches its client. */
struct mcp_transport {
	/* Queue line[0..len) (one message with its '\n'; steals line). 0, or
	 * negative when the transport cannot take it (a client that stopped
	 * reading): the transport then ends the connection itself. */
	int (*send)(void *t, char *line, size_t len);
	/* End the connection now (for a client that broke it): nothing more is
	 * read or written. */
	void (*close)(void *t, const char *why);
	void *t;
	/* Optional (NULL: send): queue line as part of the answer to the
	 * request whose id is related (borrowed): its progress, a question to
	 * the client about it, a subscription's notifications. A transport with
	 * a stream per request (HTTP) sends it there. Steals line, like send. */
	int (*send_for)(void *t, const json_t *related, char *line, size_t len);
};

/* Who is on the other end; borrowed by the session, so it must outlive it. */
struct mcp_principal {
	const char *client; /* a name for logs: "stdio" */
	const char *role;   /* its policy role; NULL: it may call nothing */
};

/* A code tool as MCP lists it (docs/code-tools.md); borrowed. */
struct mcp_code_tool {
	const char *name, *description;
	const json_t *input_schema;  /* an object schema */
	const json_t *output_schema; /* or NULL: none (no structuredContent) */
	bool read_only;		     /* its access is read */
};

/* What a role is shown besides run_python's description. */
struct mcp_listing {
	bool run_python; /* run_python is listed and may be called */
	const struct mcp_code_tool *tools;
	size_t ntools;
};

/* What one request carries, for the owner (every pointer borrowed for the
 * call). */
struct mcp_request {
	struct mcp_session *session;
	const struct mcp_principal *principal;
	const struct mcp_revision *rev; /* its revision; rev->era its era */
	const json_t *client_caps;	/* the client's capabilities, or NULL */
	const json_t *meta;		/* params._meta, or NULL */
	const json_t *progress_token;	/* a string or an integer, or NULL */
	const json_t *id;
	/* run_python's session arguments (on_run only): "new", a handle, or
	 * NULL (a cell of its own); end: end that session, with no code. */
	const char *run_session;
	bool end_session;
	/* A call of a code tool (on_run only): its name and its arguments
	 * (an object; borrowed for the call), and code NULL. NULL: run_python. */
	const char *tool;
	const json_t *args;
	/* on_run: the call runs as an MCP task (docs/tasks.md), its answer
	 * kept for the client's tasks/get or tasks/result; id is then the
	 * task's id (the request was answered with the task). */
	bool task;
	/* The request's span (on_run: the run's goes below it), or NULL. */
	const struct trace_ctx *trace;
	/* The legacy MCP session the request came in (initialize made it): a
	 * number no other session of this process has; 0 for a request of
	 * its own (2026-07-28) or before initialize. */
	uint64_t bind;
};

/* What MCP tasks may hold (docs/tasks.md), read as each task is made. */
struct mcp_task_limits {
	unsigned ttl_ms;     /* a task and its result are kept at most this long */
	unsigned min_ttl_ms; /* and at least this long (its run's deadline, and a spare) */
	unsigned per_client; /* tasks one client holds, working or kept */
};

struct mcp_server_hooks {
	/* A run_python call: code[0..len) (UTF-8, at most APPL_CELL_CODE_MAX
	 * bytes; borrowed for the call); or a code tool's call, req->tool set
	 * (code NULL). The owner answers later with mcp_run_finish or
	 * mcp_run_fail, exactly once, unless on_cancel came first. */
	void (*on_run)(struct mcp_run *run, const struct mcp_request *req, const char *code,
		       size_t len, void *data);
	/* run is over for the client (it cancelled it, its session is being
	 * freed, or it never came back with the input it was asked for): stop
	 * it; no answer goes out, and run is freed right after. */
	void (*on_cancel)(struct mcp_run *run, void *data);
	/* Fill *p for run (pointers borrowed until the hook returns). */
	void (*progress)(struct mcp_run *run, struct mcp_progress *p, void *data);
	/* The run_python description role sees (borrowed; valid until the next
	 * call). */
	const char *(*description)(const char *role, void *data);
	/* What else role is shown: fill *out (borrowed until the next call).
	 * May be NULL: run_python alone. */
	void (*listing)(const char *role, struct mcp_listing *out, void *data);
	/* The session's client broke the connection or went away. bind is
	 * what its requests carried (mcp_request.bind). */
	void (*on_closed)(struct mcp_session *s, const char *why, uint64_t bind, void *data);
	/* Whether a request that needs the tools (tools/list, tools/call) must
	 * wait, for an owner that starts them when they are first needed:
	 * true holds it, unanswered (mcp_session_input returns true), and the
	 * transport gives it again once the owner is ready, or refuses it
	 * (mcp_session_refuse). May be NULL: nothing waits. */
	bool (*hold)(void *data);
	/* run_python's outputSchema, where the revision has one: the schema
	 * of the result object mcp_run_finish is given (borrowed; may be
	 * NULL: none). */
	const json_t *output_schema;
	/* A span per request (trace.h; borrowed; NULL: none), below the
	 * client's params._meta.traceparent when it sent one; a run's lasts
	 * until it is answered. */
	struct tracer *tracer;
	/* Tasks (docs/tasks.md): a tools/call may run as one, its result kept
	 * for later; fill *out. NULL: no tasks are offered. */
	void (*task_limits)(struct mcp_task_limits *out, void *data);
	void *data;
};

/* New server in loop (borrowed), hooks copied. NULL with err. */
struct mcp_server *mcp_server_new(struct loop *loop, const struct mcp_server_hooks *hooks,
				  struct appl_err *err);
/* Every session must have been freed first. Safe on NULL. */
void mcp_server_free(struct mcp_server *srv);

/* Replicas (docs/scale-out.md): requestStates are keyed with key (32
 * bytes, copied), the one every replica holds, in place of this process's
 * own; a retry whose state names a run this server does not hold is then
 * replayed here, its answers given (the caller's bridge uses the ledger
 * for approved calls). Before the first session. */
void mcp_server_cluster_key(struct mcp_server *srv, const unsigned char key[32]);

/* Whether the requestState text names a run parked here (no check of it:
 * for where a retry is served, which checks it). */
bool mcp_server_state_here(struct mcp_server *srv, const char *text, size_t len);

/* A session for one client: t copied, p borrowed. NULL with err. */
struct mcp_session *mcp_session_new(struct mcp_server *srv, const struct mcp_transport *t,
				    const struct mcp_principal *p, struct appl_err *err);

/* One message from the client: line[0..len), without its newline; any
 * bytes. An empty line (or a lone '\r') is ignored. Returns true when it
 * was held (the hold hook): the transport keeps it and reads nothing more
 * until it gives it again. */
bool mcp_session_input(struct mcp_session *s, const char *line, size_t len);

/* Answer the request in line[0..len) (one the session held) with an
 * internal error whose message is why: for an owner that could not
 * start what it needs. */
void mcp_session_refuse(struct mcp_session *s, const char *line, size_t len, const char *why);

/* A message over the transport's cap: head[0..len) is its start, read for
 * its id; it is answered with an error and the session goes on. */
void mcp_session_overlong(struct mcp_session *s, const char *head, size_t len);

/* The transport ended (why for the log): nothing more is sent; the owner
 * hears on_closed. */
void mcp_session_ended(struct mcp_session *s, const char *why);

/* Runs still in flight are cancelled (on_cancel), then it is freed. Safe on
 * NULL. */
void mcp_session_free(struct mcp_session *s);

/* Answer run with its result object (borrowed): as structuredContent
 * (where the revision has it) and as its compact JSON text; isError as
 * is_error says (the code raised or was stopped). For a code tool's run,
 * result is the program's value: its text (a string as itself, anything
 * else as compact JSON), and structuredContent when the tool has an
 * output schema. files (borrowed; NULL:
 * none) are the files the code left, with their content, each returned one
 * a content item after the text (mcp_tool_result). Its reason, calls and
 * duration_ms, when it has them, go into the log message a client that set
 * a level hears. The owner is done with run; a run that waits for its
 * client's retry (2026-07-28) keeps the answer for it until its
 * requestState expires. */
void mcp_run_finish(struct mcp_run *run, const json_t *result, bool is_error, const json_t *files);

/* Answer run with a tool error text (isError: true), e.g. a refusal before
 * any cell ran. As mcp_run_finish. */
void mcp_run_fail(struct mcp_run *run, const char *text);

/* The run moved on (printed, called): a progress notification goes out
 * soon, when its request asked for them. */
void mcp_run_poke(struct mcp_run *run);

/* Who cancelled run, for on_cancel: the client's name (it cancelled the
 * request or its task), "ttl" (its task expired), or NULL (its client went
 * away, or the appliance stops). */
const char *mcp_run_cancelled_by(const struct mcp_run *run);

/* client is no longer one (its token left the policy): its tasks' runs
 * are cancelled (by: who, for on_cancel) and its tasks dropped, their ids
 * unknown from now on. How many there were. */
unsigned mcp_server_client_tasks_end(struct mcp_server *srv, const char *client, const char *by);

/* The appliance stops: every task's run is cancelled (on_cancel) and every
 * task dropped. Before mcp_server_free. */
void mcp_server_tasks_end(struct mcp_server *srv);

/* The owner's pointer for a run. */
void mcp_run_set_data(struct mcp_run *run, void *data);
void *mcp_run_data(const struct mcp_run *run);

/* ---- asking the person at the client (write approvals) --------------------- */

/* Cells of one client that may wait for its input at once (either era). */
#define MCP_INPUT_WAITING_MAX 4u

/* One question put to a run's client; the session's. */
struct mcp_ask;

/* The answer: "approved", "declined", "cancelled" or "unavailable". */
/* claim: with a cluster key, the ledger key of this approval (32 bytes,
 * the same on every replica for the same call of the same run chain);
 * NULL otherwise. */
typedef void (*mcp_answer_fn)(void *token, const char *outcome, const unsigned char *claim);

struct mcp_ask_spec {
	const char *text;	   /* what a person reads (borrowed) */
	const unsigned char *bind; /* 32 bytes: what the question is about */
	const char *label;	   /* the owner's name for the run (copied) */
	unsigned timeout_ms;	   /* how long the answer is awaited */
	mcp_answer_fn fn;
	void *token;
};

/* Ask run's client for a yes: a form elicitation with one boolean field,
 * approve (accept with approve true is the only yes). Legacy era: an
 * elicitation/create request to the client. 2026-07-28: the run's request
 * is answered with an InputRequiredResult carrying the elicitation and a
 * requestState (a MAC over the client, the run, the code's digest and the
 * questions' binds, with a key this server keeps); the run waits, without
 * a request, for the client's retry of the same call with inputResponses
 * and that requestState, which is single-use and expires after timeout_ms (and a grace
 * of 2 s, so the asker's own timeout comes first: a retry in between
 * collects the run's answer).
 * The answer comes through fn, from the loop, exactly once unless
 * mcp_ask_cancel came first. NULL when the client cannot be asked (its
 * revision or capabilities have no form elicitation, it is gone, or
 * MCP_INPUT_WAITING_MAX of its cells wait already), with why. */
struct mcp_ask *mcp_run_ask(struct mcp_run *run, const struct mcp_ask_spec *spec, char *why,
			    size_t cap);

/* Withdraw the question (the asker gave up waiting): fn is not called. */
void mcp_ask_cancel(struct mcp_ask *a);

/* What role sees changed (its run_python description): tell its clients
 * that asked to hear (legacy: initialized; modern: an open
 * subscriptions/listen for tools). */
void mcp_server_tools_changed(struct mcp_server *srv, const char *role);

#endif
