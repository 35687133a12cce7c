/* core.h: inside struct upstream (upstream.h), for the files of the MCP
 * client's core: client.c (the interface), protocol.c (the handshake, the
 * tool list, the server's messages, runs and timeouts), request.c (our
 * requests: encoding, sending, their queue) and list.c (tools/list pages).
 * The transports never include this: they know the core only through
 * transport.h.
 */
#ifndef APPL_UPSTREAM_CORE_H
#define APPL_UPSTREAM_CORE_H

#include "upstream/transport.h"
#include "upstream/upstream.h"

struct jsonrpc_msg;

/* Room in a call's answer besides the result itself: the envelope
 * (jsonrpc, id) and a server's stray whitespace. */
#define UP_ENVELOPE_MAX (16u * 1024)

/* One request of ours that awaits its answer (or, for a call, its turn). */
struct req {
	struct req *prev, *next;
	enum up_req_kind kind;
	const char *method; /* a static string: "tools/call", ... */
	uint64_t id;
	uint64_t deadline_ms; /* UINT64_MAX: none (a listen stream) */
	bool sent;
	bool modern; /* line was encoded with the 2026-07-28 _meta */
	bool resent; /* sent again once after its session ended (HTTP 404) */
	/* its answer passed the cap and the rest of it is being read and
	 * dropped: it ends, over the cap, when that is done */
	bool dropping;
	char *line; /* a call not sent yet (server starting, or no room) */
	size_t len;
	char *tool;	   /* a call's tool; NULL for a read */
	char *traceparent; /* a call's trace context (its _meta and, over HTTP,
			    * its header), or NULL */
	json_t *params;	   /* a call's params, kept to encode it again */
	/* A call of a tool that runs only as an MCP task (task.c): its params
	 * ask for one; once the server made it, its id, and the status is
	 * asked for (tasks/get) every poll_ms until it ended, then its result
	 * (tasks/result). handle is the caller's name for the call (its first
	 * id: the ids of the requests after it are new). */
	bool task;
	char *task_id;
	uint64_t poll_at; /* when to ask next; 0: a request of it is in flight */
	unsigned poll_ms;
	uint64_t handle;
	upstream_result_cb cb;
	void *ctx;
};

/* A tools/list in progress; the list in use is replaced only when the last
 * page has been read and checked. */
struct listing {
	bool active;
	bool initial; /* part of a (re)start: its failure stops the server */
	bool again;   /* list_changed came meanwhile: read once more afterwards */
	struct upstream_tool *tools;
	size_t n, cap;
	char *cursors[APPL_UPSTREAM_PAGES_MAX];
	unsigned pages;
	size_t bytes;
	uint64_t deadline_ms;
};

struct upstream {
	struct loop *loop;
	struct upstream_hooks hooks;
	const struct upstream_transport *tp;
	void *t; /* the transport's own */
	char *name;
	char *client_version;
	uint64_t init_timeout_ms, backoff_min_ms, backoff_max_ms;

	struct up_view v; /* the run, as its transport may read it */
	struct loop_timer *timer;
	uint64_t started_ms, retry_at_ms, backoff_ms, hs_deadline_ms;
	size_t result_max;  /* a call's result; its answer may be this and the envelope */
	bool list_changed;  /* the server says its tool list may change */
	bool resources;	    /* its last handshake declared capabilities.resources */
	bool tasks;	    /* and capabilities.tasks.requests.tools.call (2025-11-25) */
	bool probe_retried; /* server/discover asked twice this start */
	/* Has every answer so far come for the oldest call sent? Then an
	 * over-long answer whose id could not be read is that call's. */
	bool in_order;
	uint64_t relisten_at_ms; /* when to open subscriptions/listen again (0: not) */

	/* Runs begun, the first included (upstream_restarts). */
	unsigned long starts;

	struct req *head, *tail; /* in the order they were made */
	size_t ncalls;
	uint64_t next_id;
	struct listing list;
	struct upstream_tool *tools;
	size_t ntools;
	char last_error[APPL_ERR_MSG_MAX];
};

#define ulog(u, lvl, fmt, ...) UP_LOG((u)->name, lvl, fmt, ##__VA_ARGS__)

/* ---- request.c: our requests ---------------------------------------------- */

void upstream_req_free(struct req *r); /* safe on NULL */
/* Into the queue's tail (r: new, now the queue's), and out of it (r: the
 * caller's again). */
void upstream_req_link(struct upstream *u, struct req *r);
void upstream_req_unlink(struct upstream *u, struct req *r);
struct req *upstream_req_find(const struct upstream *u, uint64_t id); /* borrowed, or NULL */
/* The call sent first of those still waiting (borrowed), or NULL. */
struct req *upstream_call_oldest(const struct upstream *u);
/* r as its transport is told of it (out borrows from r). */
void upstream_req_describe(const struct upstream *u, const struct req *r, struct up_req_info *out);
/* The largest answer request r may get. */
size_t upstream_answer_cap(const struct upstream *u, const struct req *r);
/* Tell the transport the largest answer the server may send now. */
void upstream_cap_update(struct upstream *u);
/* Arm the timer for the earliest deadline (or none). */
void upstream_timer_rearm(struct upstream *u);

/* Encode request id (method, params: borrowed, may be NULL) for this run
 * into *line (new) and *len: 0, or -ENOMEM, -EFBIG with err. */
int upstream_request_encode(const struct upstream *u, uint64_t id, const char *method,
			    const json_t *params, char **line, size_t *len, struct appl_err *err);
/* Send one of our own lines (stolen: freed here; NULL: out of memory). */
int upstream_control_send(struct upstream *u, char *line, size_t len);
/* Send notifications/cancelled for request id (reason: for the server). */
void upstream_cancelled_send(struct upstream *u, uint64_t id, const char *reason);
/* A request of ours (params borrowed), sent now: the new request, linked
 * (the queue's), or NULL when it could not go. */
struct req *upstream_req_send(struct upstream *u, enum up_req_kind kind, const char *method,
			      const json_t *params, uint64_t deadline_ms);
/* Send the calls that wait, in order, as far as the transport takes them. */
void upstream_unsent_flush(struct upstream *u);

/* Take call r out, tell its caller, and free it. */
void upstream_call_finish(struct upstream *u, struct req *r, int status, const json_t *result,
			  const char *reason);
/* Fail every call, one at a time from the head, so a callback that cancels
 * another call or makes a new one sees a consistent list. */
void upstream_calls_fail(struct upstream *u, int status, const char *reason);
/* Drop our own requests (handshake, list pages, listen): nobody waits. */
void upstream_reqs_drop(struct upstream *u);
/* The answer being dropped has ended: every call marked dropping ends over
 * the cap. */
void upstream_dropped_end(struct upstream *u);

/* Send r again as method (a static string) with params (borrowed), under
 * a new id: 0, -ENOBUFS (no room now), or another error. */
int upstream_req_resend(struct upstream *u, struct req *r, const char *method,
			const json_t *params);
/* The call whose caller's handle is handle (borrowed), or NULL. */
struct req *upstream_call_find(const struct upstream *u, uint64_t handle);

/* ---- task.c: calls run as MCP tasks ----------------------------------------- */

/* The task a call of tool should ask for: {"ttl": ttl_ms}, new; NULL when
 * the call goes plainly (the tool neither requires tasks nor may run as
 * one with a call this long, or the server does not offer them, or it
 * speaks 2026-07-28). */
json_t *upstream_task_param(const struct upstream *u, const char *tool, uint64_t ttl_ms);
/* Call r (a task's) got its answer m: taken (true), or (false) it is the
 * call's final answer, for the usual path. */
bool upstream_task_answer(struct upstream *u, struct req *r, const struct jsonrpc_msg *m);
/* Ask for the status of every task whose turn it is. */
void upstream_task_polls(struct upstream *u);
/* Call r is given up (its deadline, its caller): its task is cancelled at
 * the server (tasks/cancel), when it has one. */
void upstream_task_cancel(struct upstream *u, struct req *r);

/* ---- list.c: tools/list pages ----------------------------------------------- */

void upstream_tools_free(struct upstream_tool *t, size_t n);
void upstream_listing_reset(struct listing *l);
/* Take one tools/list page (result borrowed; len: the length of its
 * message) into u->list: 0 and *next (the cursor of the next page,
 * borrowed from the listing; NULL: that was the last), or -1 with *why
 * (the whole list is refused). A tool that cannot be offered is skipped
 * and logged. */
int upstream_list_page(struct upstream *u, const json_t *result, size_t len, const char **next,
		       const char **why);

/* ---- protocol.c: the protocol ------------------------------------------------- */

/* What the transport reaches the core by (transport.h). */
extern const struct up_events upstream_core_events;
/* Open the transport and start the handshake. On failure the upstream
 * waits out a backoff like after a death (no hook: this runs inside the
 * caller): -EAGAIN with err "upstream_unavailable". */
int upstream_run_start(struct upstream *u, struct appl_err *err);
/* The deadlines' timer fired (data: the upstream). */
void upstream_timer_fire(void *data);

#endif
