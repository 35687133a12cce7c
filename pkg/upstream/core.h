/* core.h: inside struct upstream (upstream.h). The MCP client
 * protocol (client.c: ids, the handshake, tools/list, calls, timeouts)
 * speaks to its server through a transport: stdio.c (a child on
 * pipes) or http.c (Streamable HTTP through libcurl). Only those
 * three files include this.
 *
 * A transport hands each message the server sent to up_message, says when
 * the run is over with up_lost, and may fail one request with
 * up_req_refused. It never frees a request: the core owns them.
 */
#ifndef APPL_UPSTREAM_CORE_H
#define APPL_UPSTREAM_CORE_H

#include "mcp/revision.h"
#include "upstream/upstream.h"

#include "log/log.h"

/* Room in a call's answer besides the result itself: the envelope
 * (jsonrpc, id) and a server's stray whitespace. */
#define UP_ENVELOPE_MAX (16u * 1024)

enum req_kind {
	REQ_CALL,     /* a caller's: tools/call, or resources/read (tool NULL) */
	REQ_INIT,     /* initialize */
	REQ_LIST,     /* one tools/list page */
	REQ_DISCOVER, /* server/discover: the revision probe */
	REQ_LISTEN,   /* subscriptions/listen: the stream of list changes */
};

/* One request of ours that awaits its answer (or, for a call, its turn). */
struct req {
	struct req *prev, *next;
	enum req_kind kind;
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
	char *tool;	/* a call's tool; NULL for a read */
	json_t *params; /* a call's params, kept to encode it again */
	upstream_result_cb cb;
	void *ctx;
};

struct up_transport {
	const char *kind; /* "stdio", "http" */
	/* A run begins (spawn, or nothing to do): 0, or -errno with err. The
	 * core then probes (probe true) or sends initialize. */
	int (*open)(struct upstream *u, struct appl_err *err);
	/* Send one encoded message. r: the request it is, linked or about to
	 * be (NULL for a notification or an answer to the server). call: a
	 * caller's call, which may be told -ENOBUFS (no room now: it waits for
	 * up_unsent_flush). Other errors: the message could not go. */
	int (*send)(struct upstream *u, const struct req *r, const char *buf, size_t len,
		    bool call);
	/* r (sent, still linked) is given up (its timeout, or its caller):
	 * tell the server as its transport says. */
	void (*abandon)(struct upstream *u, const struct req *r, const char *reason);
	/* The run is over: release what it holds. block: outside the loop's
	 * hooks (upstream_free, a failed start). */
	void (*close)(struct upstream *u, bool block);
	/* Before close at a stop: take in what the server wrote meanwhile. */
	void (*drain)(struct upstream *u);
	/* The handshake is done and the tools are listed. */
	void (*ready)(struct upstream *u);
	/* The largest answer the server may send now changed. */
	void (*cap_changed)(struct upstream *u, size_t cap);
	pid_t (*pid)(const struct upstream *u);
	/* Why tool t of a tools/list page may not be offered over this
	 * transport, or NULL (may be NULL). */
	const char *(*tool_check)(const struct upstream *u, const json_t *t);
	void (*destroy)(struct upstream *u); /* after close(block) */
	bool probe;			     /* try server/discover (2026-07-28) first */
};

extern const struct up_transport up_stdio_transport;

/* Make the transport's state (u->t) for srv. */
int up_stdio_new(struct upstream *u, const struct policy_server *srv, const struct upstream_opts *o,
		 struct appl_err *err);
int up_http_new(struct upstream *u, const struct policy_server *srv, const struct upstream_opts *o,
		struct appl_err *err);

enum run_state {
	RUN_STOPPED,
	RUN_STARTING,
	RUN_READY,
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
	const struct up_transport *tp;
	void *t; /* the transport's own */
	char *name;
	char *client_version;
	uint64_t init_timeout_ms, backoff_min_ms, backoff_max_ms;

	enum run_state run;
	uint64_t epoch; /* bumped when a run starts or ends: loops over its input stop */
	bool closing;
	struct loop_timer *timer;
	uint64_t started_ms, retry_at_ms, backoff_ms, hs_deadline_ms;
	size_t result_max;  /* a call's result; its answer may be this and the envelope */
	bool modern;	    /* this run speaks 2026-07-28 (found by the probe) */
	bool list_changed;  /* the server says its tool list may change */
	bool resources;	    /* its last handshake declared capabilities.resources */
	bool probe_retried; /* server/discover asked twice this start */
	/* Has every answer so far come for the oldest call sent? Then an
	 * over-long answer whose id could not be read is that call's. */
	bool in_order;
	uint64_t relisten_at_ms; /* when to open subscriptions/listen again (0: not) */

	struct req *head, *tail; /* in the order they were made */
	size_t ncalls;
	uint64_t next_id;
	struct listing list;
	struct upstream_tool *tools;
	size_t ntools;
	char version[16];
	char last_error[APPL_ERR_MSG_MAX];
};

/* ---- the core, for its transports ----------------------------------------- */

void ulog(const struct upstream *u, enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* One message from the server (an answer, a request, a notification). */
void up_message(struct upstream *u, const char *buf, size_t len);
/* The run is over (why: for the log and on_down). */
void up_lost(struct upstream *u, const char *why);
/* Request id's answer was refused or cannot come (why, for the caller). */
void up_req_refused(struct upstream *u, uint64_t id, const char *why);
/* Call r's session ended before it was read (HTTP 404): r is sent again,
 * once, after a new initialize. */
void up_session_over(struct upstream *u, struct req *r);
/* Request id's answer passed its cap. */
void up_req_too_large(struct upstream *u, uint64_t id);
/* Over one stream that carries every answer (stdio): call r's answer passed
 * its cap, and the rest of it is still to come and be dropped. r keeps its
 * place, and so its caller's server slot, until up_dropped_end: the server
 * is sent no more calls than its slots while it still writes an answer
 * nobody will read, and its output is read at the pace it writes it. */
void up_call_dropping(struct upstream *u, struct req *r);
/* The answer being dropped has ended: every call marked dropping ends over
 * the cap. */
void up_dropped_end(struct upstream *u);

struct req *up_req_find(const struct upstream *u, uint64_t id);
/* The call sent first of those still waiting. */
struct req *up_oldest_sent_call(const struct upstream *u);
/* Take call r out and tell its caller. */
void up_call_finish(struct upstream *u, struct req *r, int status, const json_t *result,
		    const char *reason);
/* Send notifications/cancelled for request id (reason: for the server). */
void up_send_cancelled(struct upstream *u, uint64_t id, const char *reason);
/* Send the calls that wait, in order, as far as the transport takes them. */
void up_unsent_flush(struct upstream *u);
/* The largest answer request r may get. */
size_t up_answer_cap(const struct upstream *u, const struct req *r);

/* What Mcp-Name carries for a caller's request r (2026-07-28): a call's
 * tool, a read's uri. Borrowed from r. */
const char *up_req_name(const struct req *r);

/* The input schema of the listed tool called name, or NULL. */
const json_t *up_tool_schema(const struct upstream *u, const char *name);

#endif
