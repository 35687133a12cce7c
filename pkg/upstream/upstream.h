/* upstream.h: the appliance's MCP client for one upstream server, over
 * stdio or Streamable HTTP (docs/upstream.md).
 *
 * One struct upstream per stdio server of the policy, living in the one event
 * loop (loop.h): a child process spoken to over its stdin and stdout, one
 * JSON-RPC message per line, with every descriptor non-blocking, the timeouts
 * on a timerfd and the child's exit on a pidfd. The server is hostile input:
 * every line is capped (APPL_UPSTREAM_MESSAGE_MAX) and parsed strictly
 * (jsonrpc_msg_parse, JSON depth capped), the tool list is bounded (pages,
 * tools, bytes, repeated cursors, duplicate names), and what we queue for it
 * is bounded (APPL_UPSTREAM_OUTBUF_MAX).
 *
 * Request ids are ours: a counter per upstream, never reused, so an answer
 * can only reach the call it belongs to, and an answer to an id that is no
 * longer pending (a call that timed out or was cancelled) is dropped.
 *
 * The child gets an explicit environment (upstream_env_build), its own
 * process group (killed as a group), a parent-death signal, no other
 * descriptor than its three pipes (proc.h). Its stderr is relayed to the
 * appliance's stderr, one log line per line, escaped and capped.
 *
 * The process using this must ignore SIGPIPE (cmd/appliance does): a server
 * may close its stdin at any time.
 *
 * Re-entrancy: every hook and callback runs from the loop, never from inside
 * upstream_new, upstream_start, upstream_call or upstream_read. Hooks and
 * callbacks may call upstream_call, upstream_read, upstream_call_cancel and
 * the accessors; they must not call upstream_free or run the loop
 * (upstream_wait_ready).
 */
#ifndef APPL_UPSTREAM_UPSTREAM_H
#define APPL_UPSTREAM_UPSTREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/version.h"
#include "loop/loop.h"
#include "policy/policy.h"

struct upstream; /* opaque */

/* initialize asks for the newest legacy revision of mcp/revision.h; the
 * server's answer is accepted when it names any legacy revision there, and
 * anything else fails the handshake. */

/* A call of a tool that may run as an MCP task ("optional") asks for one
 * when its timeout is at least this long: a task is polled in short
 * requests, so no connection idles for the length of the call. */
#define UPSTREAM_TASK_LONG_MS 60000u

/* clientInfo is {"name": "appliance", "version": ...}. */
#define UPSTREAM_CLIENT_NAME	    "appliance"
#define UPSTREAM_CLIENT_VERSION_DEF APPL_VERSION

enum upstream_state {
	UPSTREAM_STARTING, /* spawned: initialize and the first tools/list under way */
	UPSTREAM_READY,	   /* tool list known, calls are sent */
	UPSTREAM_DOWN,	   /* not running; the next call (or upstream_start) restarts it */
	UPSTREAM_BACKOFF,  /* not running, too soon to restart: calls fail at once */
};

/* What a call's callback is told. The reason texts of TIMEOUT, UNAVAILABLE
 * and CANCELLED are fixed codes with no host detail in them. */
enum upstream_status {
	UPSTREAM_OK = 0,
	UPSTREAM_TIMEOUT = -1,	   /* UPSTREAM_REASON_TIMEOUT */
	UPSTREAM_UNAVAILABLE = -2, /* UPSTREAM_REASON_UNAVAILABLE: died, or could not start */
	/* The server answered with a JSON-RPC error (reason: its message, control
	 * characters as '?', cut at a character to APPL_TOOL_ERROR_MAX bytes), or
	 * its answer was refused (reason: "the server's answer was refused: ...",
	 * too large, too deep, malformed, or a result that is not an object). */
	UPSTREAM_ERROR = -3,
	UPSTREAM_CANCELLED = -4, /* UPSTREAM_REASON_CANCELLED: upstream_free ran first */
	/* The answer passed the result cap (upstream_opts.result_max and its
	 * envelope): dropped unread, UPSTREAM_REASON_TOO_LARGE. */
	UPSTREAM_TOO_LARGE = -5,
};

#define UPSTREAM_REASON_TIMEOUT	    "timeout"
#define UPSTREAM_REASON_UNAVAILABLE "upstream_unavailable"
#define UPSTREAM_REASON_CANCELLED   "cancelled"
#define UPSTREAM_REASON_TOO_LARGE   "result_too_large"

/* One tool from tools/list. Every pointer is owned by the upstream (name and
 * description are copies, input_schema and output_schema new references the
 * upstream holds) and borrowed by the caller: valid until the list is
 * replaced (just before on_ready after a restart, or on_tools_changed) or
 * upstream_free. Take a json_incref or a copy to keep one longer. */
struct upstream_tool {
	const char *name;	    /* 1 to APPL_UPSTREAM_TOOL_NAME_MAX bytes, UTF-8, no controls */
	const char *description;    /* NULL when the server gave none */
	const json_t *input_schema; /* an object */
	/* outputSchema when it is an object; NULL when the server gave none,
	 * or something else (logged; the tool is taken all the same). */
	const json_t *output_schema;
	bool read_only_hint; /* annotations.readOnlyHint is exactly true */
	/* execution.taskSupport is exactly "required": the server runs the
	 * tool only as an MCP task, so each call of it asks for one (task.c). */
	bool task_required;
	/* execution.taskSupport is exactly "optional": a call that may take
	 * long (UPSTREAM_TASK_LONG_MS) asks for a task too. */
	bool task_optional;
};

/* Told to the owner, from the loop. Each may be NULL. */
struct upstream_hooks {
	/* A (re)start completed: handshake done, tool list read. */
	void (*on_ready)(struct upstream *u, void *data);
	/* The list was read again after notifications/tools/list_changed and
	 * replaced (a refresh that fails keeps the old list, and is logged). */
	void (*on_tools_changed)(struct upstream *u, void *data);
	/* The server stopped: it exited, closed a pipe, broke the protocol, or
	 * failed its handshake. why (borrowed for the call) is for the log:
	 * it may quote the server, sanitized. Pending calls have been failed
	 * with UPSTREAM_UNAVAILABLE before this is called. */
	void (*on_down)(struct upstream *u, const char *why, void *data);
	void *data;
};

/* Tunables; a zero field takes the default. */
struct proc_filter;
struct upstream_secrets; /* below */

struct upstream_opts {
	const char *client_version; /* clientInfo.version: UPSTREAM_CLIENT_VERSION_DEF */
	unsigned
		init_timeout_ms; /* initialize + every tools/list page: APPL_UPSTREAM_INIT_TIMEOUT_MS */
	unsigned backoff_min_ms; /* first wait after a death: APPL_UPSTREAM_BACKOFF_MIN_MS */
	unsigned backoff_max_ms; /* doubling stops here: APPL_UPSTREAM_BACKOFF_MAX_MS */
	/* A call's result, in bytes: an answer line longer than this and room
	 * for its envelope is over the cap (UPSTREAM_TOO_LARGE) as soon as it
	 * is that long. APPL_MAX_RESULT_BYTES_DEF. */
	size_t result_max;
	/* Confine the server (proc/confine.h): its user, cgroup, hidden paths
	 * hide (NULL-ended; borrowed), network, and the system call filter
	 * (borrowed; NULL: none). false: a plain child (tests). */
	bool confine;
	const char *const *hide;
	const struct proc_filter *filter;
	/* The values of the HTTP servers' headers (upstream_secrets_take;
	 * borrowed, read while upstream_new runs). NULL, or a variable it
	 * does not hold: read from the environment. */
	const struct upstream_secrets *secrets;
};

/* A new upstream for srv (a stdio server; copied, so the policy may go
 * first), started at once: spawned, then initialize and tools/list run from
 * the loop. hooks and opts (either may be NULL) are copied; loop is borrowed
 * and must outlive the upstream. A server that cannot be spawned does not
 * make this fail: the upstream is returned in UPSTREAM_BACKOFF with
 * upstream_last_error saying why (and no hook called). NULL with err filled
 * only for a bad srv (-EINVAL) or a local failure (-ENOMEM, -EMFILE). */
struct upstream *upstream_new(struct loop *loop, const struct policy_server *srv,
			      const struct upstream_hooks *hooks, const struct upstream_opts *opts,
			      struct appl_err *err);

/* Kill the server's process group, reap it, and release everything. Calls
 * still pending get their callback with UPSTREAM_CANCELLED first. Safe on
 * NULL. Never from a hook or callback. */
void upstream_free(struct upstream *u);

enum upstream_state upstream_state(const struct upstream *u);

/* Restart a server that is DOWN (0: starting, or already STARTING/READY).
 * -EAGAIN (err "upstream_unavailable") in BACKOFF or when the spawn fails;
 * upstream_last_error has the detail. */
int upstream_start(struct upstream *u, struct appl_err *err);

/* Run the loop until u is READY (0), stops (-EIO, err holding why), or
 * timeout_ms passes (-ETIMEDOUT). Restarts a DOWN upstream first; -EAGAIN in
 * BACKOFF. Other watches of the loop run meanwhile. For a CLI that lists
 * tools; the server itself never blocks on one upstream. */
int upstream_wait_ready(struct upstream *u, unsigned timeout_ms, struct appl_err *err);

/* The server's name from the policy; borrowed. */
const char *upstream_name(const struct upstream *u);

/* Why the server last stopped or failed to start ("" when it never did);
 * borrowed, overwritten by the next failure. For logs, not for the code. */
const char *upstream_last_error(const struct upstream *u);

/* The negotiated protocol version ("" before the first handshake); borrowed. */
const char *upstream_protocol_version(const struct upstream *u);

/* How often the server was started again after its first start (after a
 * death, a failed handshake, or a spawn that failed). */
unsigned long upstream_restarts(const struct upstream *u);

/* The running server's pid (its process group), 0 when none runs. */
pid_t upstream_pid(const struct upstream *u);

/* The last tool list read (kept while the server is down or restarting:
 * the owner decides what to offer meanwhile). i < count; NULL past it. */
size_t upstream_tool_count(const struct upstream *u);
const struct upstream_tool *upstream_tool_get(const struct upstream *u, size_t i);

/* A call's answer. status UPSTREAM_OK: result is the tools/call result
 * object (or, for upstream_read, the resources/read one; borrowed for the
 * callback: json_incref to keep it; isError inside it is the caller's
 * business) and reason is NULL. Else result is NULL and reason (borrowed
 * for the callback) says why. */
typedef void (*upstream_result_cb)(void *ctx, int status, const json_t *result, const char *reason);

/* Call tool (borrowed; 1 to APPL_UPSTREAM_TOOL_NAME_MAX bytes) with args
 * (borrowed; an object, or NULL for none) within timeout_ms (0: the default
 * APPL_CALL_TIMEOUT_S_DEF, at most APPL_CALL_TIMEOUT_S_CEIL). On 0 the call is
 * pending and *call_id (may be NULL) names it: cb is called exactly once,
 * later, from the loop, unless upstream_call_cancel comes first. A DOWN
 * server is restarted and the call waits for it (its timeout running).
 * Errors (cb is then never called):
 *   -EAGAIN  BACKOFF, closing, or the restart failed; err->msg is exactly
 *            UPSTREAM_REASON_UNAVAILABLE
 *   -EBUSY   APPL_UPSTREAM_PENDING_MAX calls pending already
 *   -EINVAL  bad tool, args or cb;  -EFBIG  the request is over
 *            APPL_UPSTREAM_MESSAGE_MAX;  -ENOMEM */
int upstream_call(struct upstream *u, const char *tool, const json_t *args, unsigned timeout_ms,
		  upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err);

/* upstream_call with the caller's W3C trace context (a traceparent,
 * borrowed; NULL: none): the request's params._meta carries it, and over
 * HTTP a traceparent header too, so the server's spans hang below the
 * caller's. */
int upstream_call_traced(struct upstream *u, const char *tool, const json_t *args,
			 unsigned timeout_ms, const char *traceparent, upstream_result_cb cb,
			 void *ctx, uint64_t *call_id, struct appl_err *err);

/* The longest resource URI upstream_read sends, in bytes. */
#define UPSTREAM_URI_MAX 4096u

/* Read the resource at uri (borrowed; 1 to UPSTREAM_URI_MAX bytes of UTF-8)
 * with resources/read {"uri": uri}: a call in every other respect, as
 * upstream_call says (its timeout, the result cap, the pending cap and the
 * queue before the server is ready, a restart of a DOWN server, the
 * callback, upstream_call_cancel with *call_id). cb's result is the
 * resources/read result object ({"contents": [...]}, not checked further).
 * Returns 0, or -EAGAIN, -EBUSY, -EINVAL (a bad uri or no cb), -EFBIG or
 * -ENOMEM as upstream_call does (cb is then never called). */
int upstream_read(struct upstream *u, const char *uri, unsigned timeout_ms, upstream_result_cb cb,
		  void *ctx, uint64_t *call_id);

/* Whether the server declared a capabilities.resources object in its last
 * handshake (initialize, or server/discover in 2026-07-28); false before
 * the first one. */
bool upstream_has_resources(const struct upstream *u);

/* Forget a pending call or read: notifications/cancelled goes to the server
 * (if the request was sent), its answer will be dropped, and cb is NOT
 * called. An id that is not pending (answered, timed out, never given) is
 * ignored. */
void upstream_call_cancel(struct upstream *u, uint64_t call_id);

/* ---- HTTP servers ------------------------------------------------------- */

/* The longest Mcp-Session-Id a server may give; it must be visible ASCII. */
#define UPSTREAM_SID_MAX 256u

/* struct upstream_secrets (opaque): the values of the variables the
 * policy's HTTP headers name ({env:NAME}), taken once at start and kept
 * in guarded memory (sodium_malloc) until wiped. */

/* Hand over the value of variable name (data: upstream_secrets_take's): on
 * 0, *value is a new NUL-terminated copy in sodium_malloc memory (stolen by
 * the secrets, freed with sodium_free) of *len bytes, and the source no
 * longer holds it; -ENOENT when there is no such variable; -ENOMEM. The
 * caller decides where values come from and how they are removed there
 * (cmd/appliance: the environment, engine/process.h). */
typedef int (*upstream_secret_take_fn)(void *data, const char *name, char **value, size_t *len);

/* Take the value of each variable p's HTTP servers' headers name, once
 * each, through take, before any HTTP upstream is made: 0 and *out (new;
 * upstream_secrets_free), for upstream_opts.secrets. Else *out is NULL,
 * what was taken is wiped, and err says why: -ENOENT naming a variable
 * (never a value) that take does not have, -ENOMEM. */
int upstream_secrets_take(const struct policy *p, upstream_secret_take_fn take, void *data,
			  struct upstream_secrets **out, struct appl_err *err);
/* Wipe and free every value; s stays, empty (the upstreams made with it
 * keep their own filled copies). Safe on NULL. */
void upstream_secrets_wipe(struct upstream_secrets *s);
/* upstream_secrets_wipe, then free s. Safe on NULL. */
void upstream_secrets_free(struct upstream_secrets *s);

/* Why a tool's input schema (2026-07-28 over HTTP) cannot be offered, or
 * NULL: each parameter marked "x-mcp-header" must name an HTTP token (at
 * most 64 bytes), unique whatever the case, on a string, integer or boolean
 * parameter; at most 16 of them. Calls then carry Mcp-Param-NAME headers. */
const char *upstream_param_headers_check(const json_t *schema);

/* Whether sid may be sent back: 1 to UPSTREAM_SID_MAX visible ASCII bytes. */
bool upstream_sid_ok(const char *sid);

/* ---- pure helpers, exported for their unit tests ------------------------- */

/* The server's environment, as a new NULL-terminated array of new
 * "NAME=value" strings (free with upstream_env_free): PATH
 * (/usr/local/bin:/usr/bin:/bin), HOME (the appliance's, or "/" when unset),
 * then each of names[0..n) that is set in the appliance's environment, with
 * its value (one that is unset is left out; a listed PATH or HOME that is
 * set replaces the default). Nothing else of the appliance's environment,
 * which may hold credentials, reaches the server. A name that is empty or
 * holds '=' is skipped. Returns 0, or -ENOMEM with err filled. */
int upstream_env_build(const char *const *names, size_t n, char ***envp, struct appl_err *err);
void upstream_env_free(char **envp);

#endif
