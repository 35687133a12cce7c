/* transport.h: what the MCP client's core (core.h) and its transports
 * (stdio.c: a child on pipes; http.c: Streamable HTTP through libcurl) know
 * of each other, and nothing more.
 *
 * The calls go one way only. The core picks a transport from a table by
 * the server's kind (struct upstream_transport, one per transport file)
 * and calls it through that table. A transport never names a symbol of
 * the core: it is handed, when it is made, a link (struct up_link)
 * holding the core's callbacks, the pointer they take, and a read-only
 * view of the run. It hands each message the server sent to message(),
 * says when the run is over with lost(), and may fail one request with
 * refused(). It never frees a request: the core owns them.
 */
#ifndef APPL_UPSTREAM_TRANSPORT_H
#define APPL_UPSTREAM_TRANSPORT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "log/log.h"
#include "loop/loop.h"
#include "policy/policy.h"
#include "upstream/upstream.h"

/* One log line about the server called name: "upstream NAME: ...". Text
 * from the server reaches fmt only as an argument, escaped (log_escape)
 * or sanitized first. */
#define UP_LOG(name, lvl, fmt, ...)                                                                \
	log_line((lvl), NULL, "upstream %s: " fmt, (name), ##__VA_ARGS__)

enum up_run {
	UP_RUN_STOPPED,
	UP_RUN_STARTING,
	UP_RUN_READY,
};

enum up_req_kind {
	REQ_CALL,     /* a caller's: tools/call, or resources/read (no tool) */
	REQ_INIT,     /* initialize */
	REQ_LIST,     /* one tools/list page */
	REQ_DISCOVER, /* server/discover: the revision probe */
	REQ_LISTEN,   /* subscriptions/listen: the stream of list changes */
};

/* The run as the core keeps it: read, never written, by the transport. */
struct up_view {
	enum up_run run;
	uint64_t epoch; /* bumped when a run starts or ends: loops over its input stop */
	bool modern;	/* this run speaks 2026-07-28 (found by the probe) */
	bool closing;	/* upstream_free has begun */
	char version[16];
};

/* A request of the core's, as its transport is told of it. Every pointer
 * is borrowed for the call it is given to. */
struct up_req_info {
	uint64_t id;
	enum up_req_kind kind;
	const char *method; /* a static string: "tools/call", ... */
	/* What Mcp-Name carries for a caller's request (2026-07-28): a
	 * call's tool, a read's uri; NULL for one of the core's own. */
	const char *name;
	const char *tool;	 /* a call's tool; NULL for a read and the core's own */
	const json_t *args;	 /* a call's arguments (may be NULL) */
	size_t cap;		 /* the largest answer it may get */
	const char *traceparent; /* a call's W3C trace context, or NULL */
};

/* The core, for its transport; core is the link's. Those that report
 * what the server did (message to flush) are called from the loop, from
 * the transport's own watches, never from inside a call of the core into
 * the transport. cancelled, pending and tool_schema may be called from
 * anywhere, send and abandon included. */
struct up_events {
	/* One message from the server (an answer, a request, a notification). */
	void (*message)(void *core, const char *buf, size_t len);
	/* The run is over (why: for the log and on_down). */
	void (*lost)(void *core, const char *why);
	/* Request id's answer was refused or cannot come (why, for the caller). */
	void (*refused)(void *core, uint64_t id, const char *why);
	/* Request id's answer passed its cap. */
	void (*too_large)(void *core, uint64_t id);
	/* Over one stream that carries every answer (stdio): a message passed
	 * the largest cap (head: its first len bytes), and the rest of it is
	 * still to come and be dropped. An answer to a call keeps the call in
	 * its place, and so its caller's server slot, until dropped_end: the
	 * server is sent no more calls than its slots while it still writes
	 * an answer nobody will read, and its output is read at the pace it
	 * writes it. */
	void (*overlong)(void *core, const char *head, size_t len);
	/* The message being dropped has ended. */
	void (*dropped_end)(void *core);
	/* Call id's session ended before it was read (HTTP 404): it is sent
	 * again, once, after a new initialize. */
	void (*session_over)(void *core, uint64_t id);
	/* There is room again: the calls that wait are sent, in order, as
	 * far as the transport takes them. */
	void (*flush)(void *core);
	/* Send notifications/cancelled for request id (reason: for the
	 * server), through the transport's send. */
	void (*cancelled)(void *core, uint64_t id, const char *reason);
	/* Whether request id was sent and still waits for its answer; then
	 * *out (may be NULL) describes it. */
	bool (*pending)(void *core, uint64_t id, struct up_req_info *out);
	/* The input schema of the listed tool called name, or NULL. */
	const json_t *(*tool_schema)(void *core, const char *name);
};

/* What the core hands a transport when it makes it; the transport keeps a
 * copy. Every pointer outlives the transport. */
struct up_link {
	const struct up_events *ev;
	void *core;		    /* the first argument of every callback */
	const struct up_view *view; /* the core's run, kept current by the core */
	struct loop *loop;
	const char *name; /* the server's, for log lines */
	uint64_t init_timeout_ms;
};

/* A transport. t is the transport's own state, made by make. */
struct upstream_transport {
	const char *kind; /* "stdio", "http" */
	bool probe;	  /* try server/discover (2026-07-28) first */
	/* Make the state for srv into *t: 0, or -errno with err. On failure
	 * *t may hold what was made: the core closes and destroys it. */
	int (*make)(const struct up_link *link, const struct policy_server *srv,
		    const struct upstream_opts *o, void **t, struct appl_err *err);
	/* A run begins (spawn, or nothing to do): 0, or -errno with err. The
	 * core then probes (probe true) or sends initialize. */
	int (*open)(void *t, struct appl_err *err);
	/* Send one encoded message. r: the request it is, linked or about to
	 * be (NULL for a notification or an answer to the server). call: a
	 * caller's call, which may be told -ENOBUFS (no room now: it waits for
	 * flush). Other errors: the message could not go. */
	int (*send)(void *t, const struct up_req_info *r, const char *buf, size_t len, bool call);
	/* Request id (sent, still waiting) is given up (its timeout, or its
	 * caller): tell the server as the transport says. */
	void (*abandon)(void *t, uint64_t id, const char *reason);
	/* The run is over: release what it holds. block: outside the loop's
	 * hooks (upstream_free, a failed start). */
	void (*close)(void *t, bool block);
	/* Before close at a stop: take in what the server wrote meanwhile
	 * (may be NULL). */
	void (*drain)(void *t);
	/* The handshake is done and the tools are listed (may be NULL). */
	void (*ready)(void *t);
	/* The largest answer the server may send now changed (may be NULL). */
	void (*cap_changed)(void *t, size_t cap);
	pid_t (*pid)(const void *t); /* may be NULL: no process */
	/* Why tool t of a tools/list page may not be offered over this
	 * transport, or NULL (may be NULL). */
	const char *(*tool_check)(const void *t, const json_t *tool);
	void (*destroy)(void *t); /* after close(block); safe on NULL */
};

extern const struct upstream_transport upstream_stdio_transport;
extern const struct upstream_transport upstream_http_transport;

#endif
