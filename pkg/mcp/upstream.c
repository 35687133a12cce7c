/* upstream.c: the MCP client for one stdio upstream server (see upstream.h,
 * docs/upstream.md). */
#define _GNU_SOURCE
#include "mcp/upstream.h"
#include "base/utf8.h"
#include "mcp/revision.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "loop/lines.h"
#include "proc/confine.h"
#include "proc/proc.h"

#define UP_CONTROL_RESERVE (64u * 1024) /* queue room only our own small lines may use */
#define UP_DRAIN_BYTES	   (APPL_UPSTREAM_MESSAGE_MAX + 64u * 1024) /* read when a server went */
/* Of an answer over the cap, the first bytes are read for its id. */
#define UP_OVERLONG_HEAD 4096u
/* Room in a call's answer line besides the result itself: the envelope
 * (jsonrpc, id) and a server's stray whitespace. */
#define UP_ENVELOPE_MAX (16u * 1024)
#define UP_PATH		"/usr/local/bin:/usr/bin:/bin"

enum req_kind {
	REQ_CALL, /* a caller's tools/call */
	REQ_INIT, /* initialize */
	REQ_LIST, /* one tools/list page */
};

/* One request of ours that awaits its answer (or, for a call, its turn). */
struct req {
	struct req *prev, *next;
	enum req_kind kind;
	uint64_t id;
	uint64_t deadline_ms;
	bool sent;
	char *line; /* a call not queued yet (server starting, or queue full) */
	size_t len;
	upstream_result_cb cb;
	void *ctx;
};

/* A killed process not reaped yet: its pidfd is watched until it is. */
struct corpse {
	struct corpse *next;
	struct upstream *u;
	pid_t pid;
	int pidfd;
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

enum run_state {
	RUN_STOPPED,
	RUN_STARTING,
	RUN_READY,
};

struct upstream {
	struct loop *loop;
	struct upstream_hooks hooks;
	/* the policy's server, copied */
	char *name;
	char **argv;
	char **env_names;
	size_t nenv;
	char *cwd;
	char *client_version;
	uint64_t init_timeout_ms, backoff_min_ms, backoff_max_ms;

	enum run_state run;
	uint64_t epoch; /* bumped when a process starts or ends: loops over its input stop */
	bool closing;
	pid_t pid;
	int pidfd, fd_in, fd_out, fd_err;
	bool watching_pid;
	struct loop_timer *timer;
	uint64_t started_ms, retry_at_ms, backoff_ms, hs_deadline_ms;
	size_t result_max; /* a call's result; its answer line may be this and the envelope */

	/* its stdout and stdin: JSON-RPC lines (pkg/loop/lines.h) */
	struct lines *io;
	/* its stderr, relayed to the log line by line, cut at the cap */
	struct lines *errio;
	struct log_rate err_rate;
	/* Has every answer so far come for the oldest call sent? Then an
	 * over-long answer whose id could not be read is that call's. */
	bool in_order;

	struct req *head, *tail; /* in the order they were made */
	size_t ncalls;
	uint64_t next_id;
	struct listing list;
	struct upstream_tool *tools;
	size_t ntools;
	struct corpse *corpses;
	struct proc_jail *jail; /* its confinement (NULL: none asked) */
	char version[16];
	char last_error[APPL_ERR_MSG_MAX];
};

static void proc_end(struct upstream *u, const char *why);
static void proc_lost(struct upstream *u, const char *why);

/* One log line, "upstream NAME: ...". Text from the server reaches fmt
 * only as an argument, escaped (log_escape) or sanitized first. */
static void ulog(const struct upstream *u, enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ulog(const struct upstream *u, enum log_level lvl, const char *fmt, ...)
{
	char text[APPL_LOG_LINE_MAX];
	va_list ap;

	if (!log_enabled(lvl))
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_line(lvl, NULL, "upstream %s: %s", u->name, text);
}

/* ---- text ------------------------------------------------------------------ */

/* A server's text for a caller (an error message): one line, controls as
 * '?', bytes that are not UTF-8 as '?', cut at a character to cap - 1. */
static void reason_clean(const char *in, char *out, size_t cap)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t len = strlen(in), o = 0, i = 0;

	while (i < len) {
		size_t n = appl_utf8_decode(s + i, len - i, NULL);
		bool bad = n == 0 || s[i] < 0x20 || s[i] == 0x7f;
		size_t take = bad ? 1 : n;

		if (take > cap - 1 - o)
			break;
		if (bad)
			out[o++] = '?';
		else
			memcpy(out + o, s + i, n), o += n;
		i += take;
	}
	out[o] = '\0';
}

/* ---- environment ------------------------------------------------------------ */

static char *kv_new(const char *name, const char *value)
{
	size_t a = strlen(name), b = strlen(value);
	char *s = malloc(a + b + 2);

	if (!s)
		return NULL;
	memcpy(s, name, a);
	s[a] = '=';
	memcpy(s + a + 1, value, b + 1);
	return s;
}

/* Put NAME=value into env (n entries so far), replacing an entry of the
 * same name. Returns the new count, or 0 when out of memory. */
static size_t env_put(char **env, size_t n, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *kv = kv_new(name, value);

	if (!kv)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=') {
			free(env[i]);
			env[i] = kv;
			return n;
		}
	}
	env[n] = kv;
	return n + 1;
}

int upstream_env_build(const char *const *names, size_t n, char ***envp, struct appl_err *err)
{
	const char *home = getenv("HOME");
	char **env = calloc(n + 4, sizeof(*env)); /* room for TMPDIR (env_private) */
	size_t k;

	*envp = NULL;
	if (!env)
		return appl_err_set(err, -ENOMEM, "out of memory");
	k = env_put(env, 0, "PATH", UP_PATH);
	k = k ? env_put(env, k, "HOME", home ? home : "/") : 0;
	for (size_t i = 0; k && i < n; i++) {
		const char *v =
			names[i] && *names[i] && !strchr(names[i], '=') ? getenv(names[i]) : NULL;

		if (v)
			k = env_put(env, k, names[i], v);
	}
	if (!k) {
		upstream_env_free(env);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	*envp = env;
	return 0;
}

/* HOME and TMPDIR to the server's private directory, whatever the policy
 * passed through: upstream_env_build left room for one more entry. */
static int env_private(char **env, const char *dir)
{
	size_t n = 0;

	while (env[n])
		n++;
	return (n = env_put(env, n, "HOME", dir)) && env_put(env, n, "TMPDIR", dir) ? 0 : -ENOMEM;
}

void upstream_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* ---- requests ----------------------------------------------------------------- */

static void req_free(struct req *r)
{
	if (!r)
		return;
	free(r->line);
	free(r);
}

/* The longest line the server may send now: while only calls wait, an
 * answer longer than a call's result can be (and its envelope) is over the
 * result cap, and is dropped as soon as it passes it, unread; the
 * handshake and tools/list may need the whole message cap. */
static void cap_update(struct upstream *u)
{
	size_t cap = u->result_max + UP_ENVELOPE_MAX;

	for (const struct req *r = u->head; r; r = r->next)
		if (r->kind != REQ_CALL)
			cap = APPL_UPSTREAM_MESSAGE_MAX;
	if (cap > APPL_UPSTREAM_MESSAGE_MAX)
		cap = APPL_UPSTREAM_MESSAGE_MAX;
	if (u->io)
		lines_set_line_max(u->io, cap);
}

static void req_link(struct upstream *u, struct req *r)
{
	r->prev = u->tail;
	r->next = NULL;
	if (u->tail)
		u->tail->next = r;
	else
		u->head = r;
	u->tail = r;
	if (r->kind == REQ_CALL)
		u->ncalls++;
	else
		cap_update(u);
}

static void req_unlink(struct upstream *u, struct req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		u->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		u->tail = r->prev;
	r->prev = r->next = NULL;
	if (r->kind == REQ_CALL)
		u->ncalls--;
	else
		cap_update(u);
}

static struct req *req_find(const struct upstream *u, uint64_t id)
{
	for (struct req *r = u->head; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

/* One timer for every deadline: armed for the earliest. */
static void timer_rearm(struct upstream *u)
{
	uint64_t first = UINT64_MAX, now;

	for (const struct req *r = u->head; r; r = r->next)
		if (r->deadline_ms < first)
			first = r->deadline_ms;
	if (first == UINT64_MAX) {
		loop_timer_set(u->timer, 0);
		return;
	}
	now = loop_now_ms();
	loop_timer_set(u->timer, first > now ? first - now : 1);
}

/* ---- output -------------------------------------------------------------------- */

/* Copy buf into the queue for the server's stdin. A caller's call may fill
 * it to the cap less a reserve; our own lines (answers to the server's
 * requests, cancellations, the handshake) may use the reserve too, so a
 * flood of calls cannot keep them out. -ENOBUFS when it does not fit. */
static int queue_put(struct upstream *u, const char *buf, size_t len, bool call)
{
	size_t limit =
		call ? APPL_UPSTREAM_OUTBUF_MAX - UP_CONTROL_RESERVE : APPL_UPSTREAM_OUTBUF_MAX;
	size_t pending;

	if (u->run == RUN_STOPPED || !u->io)
		return -EPIPE;
	pending = lines_pending(u->io);
	if (len > limit || pending > limit - len)
		return -ENOBUFS;
	return lines_write(u->io, buf, len);
}

/* Queue one of our own lines (freed here). */
static int send_control(struct upstream *u, char *line, size_t len)
{
	int rc = line ? queue_put(u, line, len, false) : -ENOMEM;

	free(line);
	return rc;
}

/* Queue the calls that wait, in order, as far as the queue takes them. */
static void unsent_flush(struct upstream *u)
{
	if (u->run != RUN_READY)
		return;
	for (struct req *r = u->head; r; r = r->next) {
		if (r->kind != REQ_CALL || r->sent)
			continue;
		if (queue_put(u, r->line, r->len, true) < 0)
			return;
		free(r->line);
		r->line = NULL;
		r->sent = true;
	}
}

static void send_cancelled(struct upstream *u, uint64_t id, const char *reason)
{
	json_t *p = json_pack("{s:I, s:s}", "requestId", (json_int_t)id, "reason", reason);
	char *line = NULL;
	size_t len;

	if (p &&
	    jsonrpc_notification_encode("notifications/cancelled", p, APPL_UPSTREAM_MESSAGE_MAX,
					&line, &len, NULL) == 0 &&
	    send_control(u, line, len) == 0) {
		json_decref(p);
		return;
	}
	json_decref(p);
	ulog(u, LOG_WARN, "could not send notifications/cancelled for request %" PRIu64, id);
}

/* A request of ours (new, linked), its line queued now. */
static struct req *req_send(struct upstream *u, enum req_kind kind, const char *method,
			    const json_t *params, uint64_t deadline_ms)
{
	struct req *r = calloc(1, sizeof(*r));
	json_t *id = json_integer((json_int_t)u->next_id);
	char *line = NULL;
	size_t len;

	if (!r || !id ||
	    jsonrpc_request_encode(id, method, params, APPL_UPSTREAM_MESSAGE_MAX, &line, &len,
				   NULL) < 0 ||
	    send_control(u, line, len) < 0) {
		json_decref(id);
		free(r);
		return NULL;
	}
	json_decref(id);
	r->kind = kind;
	r->id = u->next_id++;
	r->deadline_ms = deadline_ms;
	r->sent = true;
	req_link(u, r);
	timer_rearm(u);
	return r;
}

/* ---- calls ------------------------------------------------------------------ */

/* Take call r out (unlinked) and tell its caller. */
static void call_finish(struct upstream *u, struct req *r, int status, const json_t *result,
			const char *reason)
{
	req_unlink(u, r);
	timer_rearm(u);
	r->cb(r->ctx, status, result, reason);
	req_free(r);
}

/* The call sent first of those still waiting. */
static struct req *oldest_sent_call(const struct upstream *u)
{
	for (struct req *r = u->head; r; r = r->next)
		if (r->kind == REQ_CALL && r->sent)
			return r;
	return NULL;
}

static void call_answered(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	char reason[APPL_TOOL_ERROR_MAX + 1];

	if (r != oldest_sent_call(u))
		u->in_order = false;
	if (m->kind == JSONRPC_ERROR) {
		reason_clean(m->error_message, reason, sizeof(reason));
		call_finish(u, r, UPSTREAM_ERROR, NULL,
			    reason[0] ? reason : "the server returned an error");
	} else if (!json_is_object(m->result)) {
		call_finish(u, r, UPSTREAM_ERROR, NULL,
			    "the server's answer was refused: the result is not an object");
	} else {
		call_finish(u, r, UPSTREAM_OK, m->result, NULL);
	}
}

/* Fail every call, one at a time from the head, so a callback that cancels
 * another call or makes a new one sees a consistent list. */
static void calls_fail(struct upstream *u, int status, const char *reason)
{
	for (;;) {
		struct req *r = u->head;

		while (r && r->kind != REQ_CALL)
			r = r->next;
		if (!r)
			return;
		call_finish(u, r, status, NULL, reason);
	}
}

/* Drop our own requests (handshake, list pages): nobody waits for them. */
static void reqs_drop_internal(struct upstream *u)
{
	struct req *r = u->head, *next;

	for (; r; r = next) {
		next = r->next;
		if (r->kind != REQ_CALL) {
			req_unlink(u, r);
			req_free(r);
		}
	}
}

/* ---- the tool list -------------------------------------------------------------- */

static void tools_free(struct upstream_tool *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++) {
		free((char *)t[i].name);
		free((char *)t[i].description);
		json_decref((json_t *)t[i].input_schema);
	}
	free(t);
}

static void listing_reset(struct listing *l)
{
	tools_free(l->tools, l->n);
	for (unsigned i = 0; i < l->pages && i < APPL_UPSTREAM_PAGES_MAX; i++)
		free(l->cursors[i]);
	memset(l, 0, sizeof(*l));
}

static int list_request(struct upstream *u, const char *cursor)
{
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL;
	struct req *r;

	if (cursor && !params)
		return -ENOMEM;
	r = req_send(u, REQ_LIST, "tools/list", params, u->list.deadline_ms);
	json_decref(params);
	return r ? 0 : -ENOMEM;
}

static void list_begin(struct upstream *u, bool initial)
{
	listing_reset(&u->list);
	u->list.active = true;
	u->list.initial = initial;
	u->list.deadline_ms = initial ? u->hs_deadline_ms : loop_now_ms() + u->init_timeout_ms;
	if (list_request(u, NULL) < 0) {
		if (initial)
			proc_end(u, "could not send tools/list");
		else
			listing_reset(&u->list);
	}
}

/* The listing failed: during a start, the server is stopped; a refresh
 * keeps the list in use. */
static void list_fail(struct upstream *u, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void list_fail(struct upstream *u, const char *fmt, ...)
{
	struct appl_err e = {0};
	char why[APPL_ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	appl_err_set(&e, -EPROTO, "tools/list: %s", why); /* one printable line */
	if (u->list.initial) {
		proc_end(u, e.msg);
		return;
	}
	ulog(u, LOG_WARN, "%s; the previous list is kept", e.msg);
	listing_reset(&u->list);
}

/* Why tool t cannot be taken, or NULL. */
static const char *tool_check(const json_t *t)
{
	const char *name = json_string_value(json_object_get(t, "name"));
	const json_t *desc = json_object_get(t, "description");
	size_t len = name ? strlen(name) : 0;

	if (!json_is_object(t))
		return "not an object";
	if (!name || len == 0 || len > APPL_UPSTREAM_TOOL_NAME_MAX)
		return "no name, or a name longer than the cap";
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return "a control character in its name";
	if (!json_is_object(json_object_get(t, "inputSchema")))
		return "inputSchema is not an object";
	if (desc && !json_is_string(desc) && !json_is_null(desc))
		return "description is not a string";
	return NULL;
}

/* Add tool t of the page to the listing: 0 (taken or skipped), or -1 when
 * the whole list must be refused (why set). */
static int tool_take(struct upstream *u, const json_t *t, size_t idx, const char **why)
{
	struct listing *l = &u->list;
	const char *bad = tool_check(t), *name, *desc;
	struct upstream_tool *tool;

	if (bad) {
		ulog(u, LOG_WARN, "tools/list: skipped tool %zu of page %u: %s", idx, l->pages,
		     bad);
		return 0;
	}
	name = json_string_value(json_object_get(t, "name"));
	/* Two tools of one name: which schema and which policy entry would
	 * apply is anybody's guess, so the list is refused. */
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->tools[i].name, name) == 0)
			return *why = "two tools have the same name", -1;
	if (l->n == APPL_UPSTREAM_TOOLS_MAX)
		return *why = "more tools than the cap", -1;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct upstream_tool *p = realloc(l->tools, cap * sizeof(*p));

		if (!p)
			return *why = "out of memory", -1;
		l->tools = p;
		l->cap = cap;
	}
	tool = &l->tools[l->n];
	desc = json_string_value(json_object_get(t, "description"));
	tool->name = strdup(name);
	tool->description = desc ? strdup(desc) : NULL;
	tool->input_schema = json_incref(json_object_get(t, "inputSchema"));
	tool->read_only_hint =
		json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint"));
	l->n++;
	if (!tool->name || (desc && !tool->description))
		return *why = "out of memory", -1;
	return 0;
}

/* Swap the finished listing in and tell the owner. */
static void list_commit(struct upstream *u)
{
	bool initial = u->list.initial, again = u->list.again;
	uint64_t epoch = u->epoch;

	tools_free(u->tools, u->ntools);
	u->tools = u->list.tools;
	u->ntools = u->list.n;
	u->list.tools = NULL;
	u->list.n = 0;
	listing_reset(&u->list);
	if (initial) {
		u->run = RUN_READY;
		ulog(u, LOG_INFO, "ready: protocol %s, %zu tools", u->version, u->ntools);
		unsent_flush(u);
		if (u->hooks.on_ready)
			u->hooks.on_ready(u, u->hooks.data);
	} else {
		ulog(u, LOG_INFO, "tool list changed: %zu tools", u->ntools);
		if (u->hooks.on_tools_changed)
			u->hooks.on_tools_changed(u, u->hooks.data);
	}
	if (again && u->epoch == epoch && u->run == RUN_READY && !u->list.active)
		list_begin(u, false);
}

/* The next cursor: 0 and *next (NULL at the end), or -1 with *why. */
static int cursor_take(struct upstream *u, const json_t *c, const char **next, const char **why)
{
	struct listing *l = &u->list;
	const char *s = json_string_value(c);

	*next = NULL;
	if (!c || json_is_null(c))
		return 0;
	if (!s || json_string_length(c) > APPL_UPSTREAM_CURSOR_MAX)
		return *why = "nextCursor is not a string, or longer than the cap", -1;
	if (l->pages >= APPL_UPSTREAM_PAGES_MAX)
		return *why = "more pages than the cap", -1;
	/* A server that hands back a cursor it gave before would page for
	 * ever: refuse the loop rather than count on the page cap alone. */
	for (unsigned i = 0; i < l->pages - 1; i++)
		if (strcmp(l->cursors[i], s) == 0)
			return *why = "a cursor came back", -1;
	l->cursors[l->pages - 1] = strdup(s);
	if (!l->cursors[l->pages - 1])
		return *why = "out of memory", -1;
	*next = l->cursors[l->pages - 1];
	return 0;
}

static void page_answered(struct upstream *u, const struct jsonrpc_msg *m, size_t len)
{
	struct listing *l = &u->list;
	const json_t *tools = json_object_get(m->result, "tools");
	const char *why = NULL, *next;
	char msg[APPL_TOOL_ERROR_MAX + 1];
	size_t i;
	json_t *t;

	if (m->kind == JSONRPC_ERROR) {
		reason_clean(m->error_message, msg, sizeof(msg));
		list_fail(u, "the server answered error %" PRId64 ": %s", (int64_t)m->error_code,
			  msg);
		return;
	}
	l->pages++;
	l->bytes += len;
	if (l->bytes > APPL_UPSTREAM_LIST_BYTES_MAX)
		why = "the pages are larger than the cap";
	else if (!json_is_array(tools))
		why = "the result has no tools array";
	json_array_foreach(tools, i, t) {
		if (why || tool_take(u, t, i, &why) < 0)
			break;
	}
	if (!why && cursor_take(u, json_object_get(m->result, "nextCursor"), &next, &why) == 0) {
		if (!next)
			list_commit(u);
		else if (list_request(u, next) < 0)
			list_fail(u, "could not ask for the next page");
		return;
	}
	list_fail(u, "%s", why);
}

/* ---- handshake ----------------------------------------------------------------- */

static int initialize_send(struct upstream *u)
{
	json_t *p =
		json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
			  mcp_revision_latest(MCP_ERA_LEGACY)->name, "capabilities", "clientInfo",
			  "name", UPSTREAM_CLIENT_NAME, "version", u->client_version);
	struct req *r = p ? req_send(u, REQ_INIT, "initialize", p, u->hs_deadline_ms) : NULL;

	json_decref(p);
	return r ? 0 : -ENOMEM;
}

/* Upstream servers are spoken to in the legacy era (initialize). */
static const char *version_known(const json_t *v)
{
	const struct mcp_revision *r = mcp_revision_find(json_string_value(v), MCP_ERA_LEGACY);

	return r ? r->name : NULL;
}

static void init_answered(struct upstream *u, const struct jsonrpc_msg *m)
{
	struct appl_err e = {0};
	const char *v;
	char *line = NULL;
	size_t len;

	if (m->kind == JSONRPC_ERROR) {
		appl_err_set(&e, -EPROTO,
			     "initialize: the server answered error %" PRId64 ": %.200s",
			     (int64_t)m->error_code, m->error_message);
		proc_end(u, e.msg);
		return;
	}
	v = version_known(json_object_get(m->result, "protocolVersion"));
	if (!v) {
		/* MCP: a client that does not speak the version the server
		 * offers disconnects. */
		proc_end(u, "initialize: the server offers no protocol version we speak");
		return;
	}
	snprintf(u->version, sizeof(u->version), "%s", v);
	if (jsonrpc_notification_encode("notifications/initialized", NULL,
					APPL_UPSTREAM_MESSAGE_MAX, &line, &len, NULL) < 0 ||
	    send_control(u, line, len) < 0) {
		proc_end(u, "could not send notifications/initialized");
		return;
	}
	list_begin(u, true);
}

/* ---- the server's messages --------------------------------------------------- */

/* ping is answered {}; anything else the server asks of us (roots/list,
 * sampling/createMessage, elicitation/create, ...) is a capability we did
 * not declare: -32601. */
static void server_request(struct upstream *u, const struct jsonrpc_msg *m)
{
	json_t *empty = json_object();
	char *line = NULL;
	size_t len;
	int rc;

	if (strcmp(m->method, "ping") == 0)
		rc = jsonrpc_result_encode(m->id, empty, APPL_UPSTREAM_MESSAGE_MAX, &line, &len,
					   NULL);
	else
		rc = jsonrpc_error_encode(m->id, JSONRPC_METHOD_NOT_FOUND,
					  jsonrpc_code_message(JSONRPC_METHOD_NOT_FOUND), NULL,
					  APPL_UPSTREAM_MESSAGE_MAX, &line, &len, NULL);
	json_decref(empty);
	/* Only a server that asks and never reads our answers fills the
	 * reserve: it is stopped rather than buffered without end. */
	if (rc < 0 || send_control(u, line, len) < 0)
		proc_end(u, "does not read its input");
}

static void n_list_changed(struct upstream *u, const struct jsonrpc_msg *m)
{
	(void)m;
	if (u->list.active)
		u->list.again = true;
	else if (u->run == RUN_READY)
		list_begin(u, false);
}

struct notification {
	const char *method;
	void (*fn)(struct upstream *u, const struct jsonrpc_msg *m);
};

/* Other notifications (progress, logging, resources) are not ours to act on. */
static const struct notification notifications[] = {
	{"notifications/tools/list_changed", n_list_changed},
};

static void server_notification(struct upstream *u, const struct jsonrpc_msg *m)
{
	for (size_t i = 0; i < sizeof(notifications) / sizeof(notifications[0]); i++)
		if (strcmp(m->method, notifications[i].method) == 0)
			notifications[i].fn(u, m);
}

/* An answer to request id arrived but was refused (why). */
static void answer_refused(struct upstream *u, uint64_t id, const char *why)
{
	struct req *r = req_find(u, id);
	char reason[APPL_ERR_MSG_MAX];

	enum req_kind kind;

	if (!r || !r->sent)
		return;
	snprintf(reason, sizeof(reason), "the server's answer was refused: %s", why);
	if (r->kind == REQ_CALL) {
		call_finish(u, r, UPSTREAM_ERROR, NULL, reason);
		return;
	}
	kind = r->kind;
	req_unlink(u, r);
	req_free(r);
	timer_rearm(u);
	if (kind == REQ_LIST)
		list_fail(u, "%s", reason);
	else
		proc_end(u, reason);
}

static void server_answer(struct upstream *u, const struct jsonrpc_msg *m, size_t len)
{
	enum req_kind kind;
	struct req *r;

	if (!m->id) {
		ulog(u, LOG_WARN,
		     "the server reported error %" PRId64 " for a line it could not read",
		     (int64_t)m->error_code);
		return;
	}
	/* Our ids are positive integers; anything else, and any id no longer
	 * pending (a call that timed out or was cancelled), is dropped. */
	if (!json_is_integer(m->id) || json_integer_value(m->id) <= 0)
		return;
	r = req_find(u, (uint64_t)json_integer_value(m->id));
	if (!r || !r->sent)
		return;
	if (r->kind == REQ_CALL) {
		call_answered(u, r, m);
		return;
	}
	kind = r->kind;
	req_unlink(u, r);
	req_free(r);
	timer_rearm(u);
	if (kind == REQ_INIT)
		init_answered(u, m);
	else if (u->list.active)
		page_answered(u, m, len);
}

/* ---- reading the server's stdout ------------------------------------------- */

static void line_refused(struct upstream *u, const char *buf, size_t len, int rc,
			 const struct jsonrpc_msg *m, const struct appl_err *e)
{
	json_t *id = NULL;

	ulog(u, LOG_WARN, "refused a message: %s", e->msg);
	if (json_is_integer(m->id) && json_integer_value(m->id) > 0)
		id = json_incref(m->id);
	else
		id = jsonrpc_id_sniff(buf, len);
	if (json_is_integer(id) && json_integer_value(id) > 0)
		answer_refused(u, (uint64_t)json_integer_value(id),
			       rc == -E2BIG ? "nested too deeply" : "not valid JSON-RPC");
	json_decref(id);
}

static void line_handle(struct upstream *u, const char *buf, size_t len)
{
	struct jsonrpc_msg m = {0};
	struct appl_err e = {0};
	int rc = jsonrpc_msg_parse(buf, len, APPL_UPSTREAM_MESSAGE_MAX, &m, &e);

	if (rc < 0)
		line_refused(u, buf, len, rc, &m, &e);
	else if (m.kind == JSONRPC_REQUEST)
		server_request(u, &m);
	else if (m.kind == JSONRPC_NOTIFICATION)
		server_notification(u, &m);
	else
		server_answer(u, &m, len);
	jsonrpc_msg_clear(&m);
}

static void on_line(struct lines *l, const char *line, size_t len, void *data)
{
	(void)l;
	line_handle(data, line, len);
}

/* A call's answer past the cap fails the call at once with the result-cap
 * refusal; the rest of the line is dropped as it comes, never kept or
 * parsed, so reading keeps pace with the server. The call is the one whose
 * id the answer's first bytes name; with no id there, the oldest call sent
 * when the server has answered in order so far, else every call sent (any
 * of them could be it). A message that is not an answer is only dropped. */
static void on_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	struct upstream *u = data;
	json_t *id = jsonrpc_id_sniff(head, len);
	struct req *r;
	(void)l;

	ulog(u, LOG_INFO, "dropped a message longer than its cap (%zu bytes seen)", len);
	if (json_is_integer(id) && json_integer_value(id) > 0) {
		r = req_find(u, (uint64_t)json_integer_value(id));
		json_decref(id);
		if (r && r->sent && r->kind == REQ_CALL)
			call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
		else if (r && r->sent)
			answer_refused(u, r->id, "larger than the cap");
		return;
	}
	json_decref(id);
	if (jsonrpc_method_sniffed(head, len) || !(r = oldest_sent_call(u)))
		return;
	if (u->in_order) {
		call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
		return;
	}
	while ((r = oldest_sent_call(u)))
		call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
}

/* The end of its stdout, or its stdin broken: the server is gone or of no
 * more use (what it wrote before has been read). */
static void on_io_end(struct lines *l, const char *why, void *data)
{
	struct upstream *u = data;
	bool exited = proc_wait_exit(u->pidfd, 0) == 1;
	(void)l;

	if (strcmp(why, "write error") == 0)
		proc_end(u, exited ? "exited" : "closed its input");
	else if (strcmp(why, "end of input") == 0)
		proc_end(u, exited ? "exited" : "closed its output");
	else
		proc_end(u, why);
}

/* What waited for room in its stdin goes now. */
static void on_io_flushed(struct lines *l, void *data)
{
	(void)l;
	unsent_flush(data);
}

/* ---- the server's stderr ----------------------------------------------------- */

/* One line of its stderr to the log, escaped, cut at the cap, and no more
 * than the log rate allows: a server must not be able to flood the log. */
static void err_emit(struct upstream *u, const char *line, size_t len, bool cut)
{
	char text[APPL_UPSTREAM_STDERR_LINE_MAX * 4 + 1];
	unsigned dropped;
	bool cut2;

	if (len > 0 && line[len - 1] == '\r' && !cut)
		len--;
	if (!log_rate_allow(&u->err_rate, loop_now_ms(), &dropped))
		return;
	if (dropped)
		ulog(u, LOG_WARN, "stderr: %u lines left out (more than %u in %u s)", dropped,
		     LOG_RATE_BURST, LOG_RATE_WINDOW_MS / 1000);
	log_escape(line, len, text, sizeof(text), &cut2);
	ulog(u, LOG_INFO, "stderr: %s%s", text, cut || cut2 ? " [cut]" : "");
}

static void on_err_line(struct lines *l, const char *line, size_t len, void *data)
{
	(void)l;
	err_emit(data, line, len, false);
}

static void on_err_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	(void)l;
	err_emit(data, head, len, true);
}

static void on_err_end(struct lines *l, const char *why, void *data)
{
	(void)why;
	(void)data;
	lines_close(l); /* the stderr pipe alone says nothing about the server */
}

/* ---- the process -------------------------------------------------------------- */

/* The server went, or broke a pipe. Take what it wrote before: answers
 * sent just before an exit still reach their callers, whichever of the
 * pidfd, the broken stdin or the end of stdout the loop reports first. */
static void proc_lost(struct upstream *u, const char *why)
{
	if (u->io)
		lines_pump(u->io, UP_DRAIN_BYTES);
	proc_end(u, proc_wait_exit(u->pidfd, 0) == 1 ? "exited" : why);
}

static void on_pidfd(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)fd;
	(void)events;
	proc_lost(data, "exited");
}

static void corpse_free(struct upstream *u, struct corpse *c)
{
	for (struct corpse **p = &u->corpses; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	loop_del(u->loop, c->pidfd);
	close(c->pidfd);
	free(c);
}

static void on_corpse(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct corpse *c = data;
	int status;

	(void)loop;
	(void)fd;
	(void)events;
	if (proc_reap(c->pid, &status) != 0)
		corpse_free(c->u, c);
}

static void exit_log(struct upstream *u, int status)
{
	if (WIFEXITED(status))
		ulog(u, LOG_INFO, "process %d exited with status %d", (int)u->pid,
		     WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		ulog(u, LOG_INFO, "process %d ended by signal %d", (int)u->pid, WTERMSIG(status));
}

/* Kill the process group and reap the leader now, or (block false) watch
 * its pidfd until it can be reaped. The group is killed before the leader
 * is reaped: while it is unreaped its pid, and so the group id, cannot be
 * reused, so the kill cannot reach a stranger. */
static void proc_release(struct upstream *u, bool block)
{
	struct corpse *c = NULL;
	int status = 0, *fds[] = {&u->fd_in, &u->fd_out, &u->fd_err, &u->pidfd};

	/* From inside one of their hooks (proc_end from a line): freed at the
	 * round's end. A blocking release runs outside them (upstream_free, a
	 * failed start), and may be the last thing before the loop goes. */
	if (block) {
		lines_free(u->io);
		lines_free(u->errio);
	} else {
		lines_destroy(u->io);
		lines_destroy(u->errio);
	}
	u->io = u->errio = NULL;
	if (u->watching_pid)
		loop_del(u->loop, u->pidfd);
	u->watching_pid = false;
	for (size_t i = 0; i < 3; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	if (u->pid <= 0)
		return;
	proc_kill_group(u->pid);
	proc_jail_kill(u->jail); /* the tree, escapees from the group included */
	if (block)
		proc_wait_exit(u->pidfd, APPL_UPSTREAM_KILL_WAIT_MS);
	if (proc_reap(u->pid, &status) == 1) {
		exit_log(u, status);
		close(u->pidfd);
	} else if (!block && (c = calloc(1, sizeof(*c))) &&
		   loop_add(u->loop, u->pidfd, EPOLLIN, on_corpse, c, NULL) == 0) {
		c->u = u;
		c->pid = u->pid;
		c->pidfd = u->pidfd;
		c->next = u->corpses;
		u->corpses = c;
	} else {
		free(c);
		close(u->pidfd); /* reaped by nobody: it stays a zombie until we exit */
	}
	u->pid = 0;
	u->pidfd = -1;
}

/* The next restart may come after the current wait, which doubles with
 * each failure up to the cap; a run that lasted resets it. */
static void backoff_set(struct upstream *u, uint64_t now)
{
	if (u->started_ms && now - u->started_ms >= APPL_UPSTREAM_STABLE_MS)
		u->backoff_ms = u->backoff_min_ms;
	u->retry_at_ms = now + u->backoff_ms;
	u->backoff_ms =
		u->backoff_ms * 2 > u->backoff_max_ms ? u->backoff_max_ms : u->backoff_ms * 2;
}

/* What the server said on stderr before it went (at most a pipe's worth). */
static void err_drain(struct upstream *u)
{
	const char *part;
	size_t n;

	if (!u->errio)
		return;
	if (!lines_closed(u->errio))
		lines_pump(u->errio, 64 * 1024);
	/* a last line without its newline */
	if ((n = lines_partial(u->errio, &part)) > 0)
		err_emit(u, part, n, false);
}

/* The run is over (why: for the log and on_down): stop the process, fail
 * what waits, and allow a restart after the backoff. */
static void proc_end(struct upstream *u, const char *why)
{
	uint64_t now = loop_now_ms();

	if (u->run == RUN_STOPPED)
		return;
	if (why != u->last_error)
		snprintf(u->last_error, sizeof(u->last_error), "%s", why);
	u->run = RUN_STOPPED;
	u->epoch++;
	err_drain(u);
	proc_release(u, false);
	listing_reset(&u->list);
	backoff_set(u, now);
	ulog(u, LOG_WARN, "down: %s (restart allowed in %" PRIu64 " ms)", u->last_error,
	     u->retry_at_ms - now);
	reqs_drop_internal(u);
	calls_fail(u, UPSTREAM_UNAVAILABLE, UPSTREAM_REASON_UNAVAILABLE);
	timer_rearm(u);
	if (u->hooks.on_down)
		u->hooks.on_down(u, u->last_error, u->hooks.data);
}

static void fds_close(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int watches_add(struct upstream *u, struct appl_err *err)
{
	struct lines_config io_cfg = {.line_max = APPL_UPSTREAM_MESSAGE_MAX,
				      .queue_max = APPL_UPSTREAM_OUTBUF_MAX,
				      .overlong = LINES_OVERLONG_SKIP,
				      .head_max = UP_OVERLONG_HEAD};
	struct lines_hooks io_hooks = {.on_line = on_line,
				       .on_overlong = on_overlong,
				       .on_end = on_io_end,
				       .on_flushed = on_io_flushed,
				       .data = u};
	struct lines_config err_cfg = {.line_max = APPL_UPSTREAM_STDERR_LINE_MAX,
				       .overlong = LINES_OVERLONG_SKIP,
				       .head_max = APPL_UPSTREAM_STDERR_LINE_MAX,
				       .final_line = true};
	struct lines_hooks err_hooks = {.on_line = on_err_line,
					.on_overlong = on_err_overlong,
					.on_end = on_err_end,
					.data = u};

	if (!(u->io = lines_new(u->loop, u->fd_out, u->fd_in, &io_cfg, &io_hooks, err)) ||
	    !(u->errio = lines_new(u->loop, u->fd_err, -1, &err_cfg, &err_hooks, err)) ||
	    loop_add(u->loop, u->pidfd, EPOLLIN, on_pidfd, u, err) < 0)
		return err ? err->code : -ENOMEM;
	u->watching_pid = true;
	u->in_order = true;
	cap_update(u);
	return 0;
}

/* Pipes for the child's 0, 1, 2; ours are the other ends, non-blocking. */
static int pipes_open(int p[3][2], struct appl_err *err)
{
	for (int i = 0; i < 3; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return appl_err_errno(err, -errno, errno, "pipe");
	}
	if (fcntl(p[0][1], F_SETFL, O_NONBLOCK) < 0 || fcntl(p[1][0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(p[2][0], F_SETFL, O_NONBLOCK) < 0)
		return appl_err_errno(err, -errno, errno, "fcntl");
	return 0;
}

static int proc_start(struct upstream *u, struct appl_err *err)
{
	int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	struct proc_spec spec = {.path = u->argv[0], .argv = u->argv, .no_new_privs = true};
	char **envp = NULL;
	int rc;

	spec.cwd = u->cwd ? u->cwd : "/";
	if ((rc = upstream_env_build((const char *const *)u->env_names, u->nenv, &envp, err)) < 0)
		goto fail;
	if (u->jail) {
		spec.confine = proc_jail_confine(u->jail);
		/* What the last run left behind (an escapee) goes before the next. */
		proc_jail_kill(u->jail);
		if (env_private(envp, proc_jail_home(u->jail)) < 0) {
			rc = appl_err_set(err, -ENOMEM, "out of memory");
			goto fail;
		}
	}
	if ((rc = pipes_open(p, err)) < 0)
		goto fail;
	spec.envp = envp;
	spec.fds[0] = p[0][0];
	spec.fds[1] = p[1][1];
	spec.fds[2] = p[2][1];
	if ((rc = proc_spawn(&spec, &u->pid, &u->pidfd, err)) < 0)
		goto fail;
	close(p[0][0]);
	close(p[1][1]);
	close(p[2][1]);
	u->fd_in = p[0][1];
	u->fd_out = p[1][0];
	u->fd_err = p[2][0];
	upstream_env_free(envp);
	if ((rc = watches_add(u, err)) < 0)
		proc_release(u, true);
	return rc;
fail:
	upstream_env_free(envp);
	fds_close(&p[0][0], 6);
	u->pid = 0;
	u->pidfd = -1;
	return rc;
}

/* Spawn and start the handshake. On failure the upstream waits out a
 * backoff like after a death (no hook: this runs inside the caller). */
static int run_start(struct upstream *u, struct appl_err *err)
{
	struct appl_err e = {0};
	uint64_t now = loop_now_ms();

	u->started_ms = now;
	u->hs_deadline_ms = now + u->init_timeout_ms;
	if (proc_start(u, &e) == 0) {
		u->run = RUN_STARTING;
		u->epoch++;
		if (initialize_send(u) == 0)
			return 0;
		appl_err_set(&e, -ENOMEM, "could not send initialize");
		u->run = RUN_STOPPED;
		proc_release(u, true);
	}
	appl_err_prefix(&e, "could not start");
	memcpy(u->last_error, e.msg, sizeof(u->last_error));
	backoff_set(u, now);
	ulog(u, LOG_WARN, "%s", u->last_error);
	return appl_err_set(err, -EAGAIN, "%s", UPSTREAM_REASON_UNAVAILABLE);
}

/* ---- timeouts ----------------------------------------------------------------- */

static void req_expired(struct upstream *u, struct req *r)
{
	enum req_kind kind = r->kind;
	uint64_t id = r->id;

	if (kind == REQ_CALL) {
		/* MCP: the sender of a request that timed out cancels it. */
		if (r->sent)
			send_cancelled(u, id, UPSTREAM_REASON_TIMEOUT);
		call_finish(u, r, UPSTREAM_TIMEOUT, NULL, UPSTREAM_REASON_TIMEOUT);
		return;
	}
	req_unlink(u, r);
	req_free(r);
	if (kind == REQ_INIT) {
		/* initialize may not be cancelled (MCP): the server goes. */
		proc_end(u, "initialize: no answer in time");
	} else if (u->list.initial) {
		proc_end(u, "tools/list: no answer in time");
	} else {
		send_cancelled(u, id, UPSTREAM_REASON_TIMEOUT);
		list_fail(u, "no answer in time");
	}
}

static void on_timer(void *data)
{
	struct upstream *u = data;

	/* One at a time from the head: a callback may change the list. */
	for (;;) {
		uint64_t now = loop_now_ms();
		struct req *r = u->head;

		while (r && r->deadline_ms > now)
			r = r->next;
		if (!r)
			break;
		req_expired(u, r);
	}
	timer_rearm(u);
}

/* ---- the interface ---------------------------------------------------------- */

static char **strv_dup(const char *const *v, size_t n)
{
	char **out = calloc(n + 1, sizeof(*out));

	for (size_t i = 0; out && i < n; i++) {
		out[i] = strdup(v[i]);
		if (!out[i]) {
			upstream_env_free(out);
			return NULL;
		}
	}
	return out;
}

static int copy_server(struct upstream *u, const struct policy_server *srv,
		       const struct upstream_opts *o)
{
	u->name = strdup(srv->name);
	u->argv = strv_dup(srv->argv, srv->argc);
	u->env_names = strv_dup(srv->env, srv->nenv);
	u->nenv = srv->nenv;
	u->cwd = srv->cwd ? strdup(srv->cwd) : NULL;
	u->client_version =
		strdup(o && o->client_version ? o->client_version : UPSTREAM_CLIENT_VERSION_DEF);
	u->init_timeout_ms =
		o && o->init_timeout_ms ? o->init_timeout_ms : APPL_UPSTREAM_INIT_TIMEOUT_MS;
	u->backoff_min_ms =
		o && o->backoff_min_ms ? o->backoff_min_ms : APPL_UPSTREAM_BACKOFF_MIN_MS;
	u->backoff_max_ms =
		o && o->backoff_max_ms ? o->backoff_max_ms : APPL_UPSTREAM_BACKOFF_MAX_MS;
	if (u->backoff_max_ms < u->backoff_min_ms)
		u->backoff_max_ms = u->backoff_min_ms;
	u->backoff_ms = u->backoff_min_ms;
	if (!u->name || !u->argv || !u->env_names || (srv->cwd && !u->cwd) || !u->client_version)
		return -ENOMEM;
	return 0;
}

/* A path under one of the hidden ones would not exist for the server. */
static const char *under_mask(const char *path, const char *const *masks)
{
	for (size_t i = 0; path && masks && masks[i]; i++) {
		size_t n = strlen(masks[i]);

		if (strncmp(path, masks[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
			return masks[i];
	}
	return NULL;
}

static int jail_make(struct upstream *u, const struct policy_server *srv,
		     const struct upstream_opts *o, struct appl_err *err)
{
	struct proc_jail_spec js = {.name = srv->name,
				    .user = srv->user,
				    .memory_mb = srv->memory_mb,
				    .pids = srv->pids,
				    .network = srv->network,
				    .masks = o->hide,
				    .filter = o->filter};
	const char *m;

	if ((m = under_mask(srv->argv[0], o->hide)) || (m = under_mask(srv->cwd, o->hide)))
		return appl_err_set(
			err, -EINVAL, "servers.%s: %s lies under %s, which is hidden from servers",
			srv->name, under_mask(srv->argv[0], o->hide) ? srv->argv[0] : srv->cwd, m);
	if (proc_jail_new(&js, &u->jail, err) < 0)
		return err->code;
	if (srv->user && strcmp(srv->user, "root") == 0)
		ulog(u, LOG_WARN, "runs as root (servers.%s.user), with no capabilities",
		     srv->name);
	ulog(u, LOG_INFO, "confined: runs as %s, memory %u MiB, %u processes, network %s",
	     proc_jail_who(u->jail), srv->memory_mb, srv->pids,
	     srv->network ? "the host's" : "loopback only");
	return 0;
}

struct upstream *upstream_new(struct loop *loop, const struct policy_server *srv,
			      const struct upstream_hooks *hooks, const struct upstream_opts *opts,
			      struct appl_err *err)
{
	struct upstream *u;

	if (!loop || !srv || srv->kind != POLICY_SERVER_STDIO || !srv->name || srv->argc < 1 ||
	    !srv->argv || !srv->argv[0] || srv->argv[0][0] != '/') {
		appl_err_set(err, -EINVAL, "upstream: a stdio server with an absolute command");
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	u->loop = loop;
	u->fd_in = u->fd_out = u->fd_err = u->pidfd = -1;
	u->next_id = 1;
	u->result_max = opts && opts->result_max ? opts->result_max : APPL_MAX_RESULT_BYTES_DEF;
	if (hooks)
		u->hooks = *hooks;
	if (copy_server(u, srv, opts) < 0) {
		appl_err_set(err, -ENOMEM, "out of memory");
		upstream_free(u);
		return NULL;
	}
	if (opts && opts->confine && jail_make(u, srv, opts, err) < 0) {
		upstream_free(u);
		return NULL;
	}
	u->timer = loop_timer_new(loop, on_timer, u, err);
	if (!u->timer) {
		upstream_free(u);
		return NULL;
	}
	run_start(u, NULL);
	return u;
}

void upstream_free(struct upstream *u)
{
	if (!u)
		return;
	u->closing = true;
	calls_fail(u, UPSTREAM_CANCELLED, UPSTREAM_REASON_CANCELLED);
	err_drain(u);
	reqs_drop_internal(u);
	u->run = RUN_STOPPED;
	proc_release(u, true);
	while (u->corpses) {
		struct corpse *c = u->corpses;
		int status;

		proc_wait_exit(c->pidfd, APPL_UPSTREAM_KILL_WAIT_MS);
		proc_reap(c->pid, &status);
		corpse_free(u, c);
	}
	loop_timer_free(u->timer);
	proc_jail_free(u->jail);
	listing_reset(&u->list);
	tools_free(u->tools, u->ntools);
	free(u->name);
	upstream_env_free(u->argv);
	upstream_env_free(u->env_names);
	free(u->cwd);
	free(u->client_version);
	free(u);
}

enum upstream_state upstream_state(const struct upstream *u)
{
	if (u->run == RUN_READY)
		return UPSTREAM_READY;
	if (u->run == RUN_STARTING)
		return UPSTREAM_STARTING;
	return loop_now_ms() < u->retry_at_ms ? UPSTREAM_BACKOFF : UPSTREAM_DOWN;
}

int upstream_start(struct upstream *u, struct appl_err *err)
{
	if (u->closing || (u->run == RUN_STOPPED && loop_now_ms() < u->retry_at_ms))
		return appl_err_set(err, -EAGAIN, "%s", UPSTREAM_REASON_UNAVAILABLE);
	if (u->run != RUN_STOPPED)
		return 0;
	return run_start(u, err);
}

int upstream_wait_ready(struct upstream *u, unsigned timeout_ms, struct appl_err *err)
{
	uint64_t end = loop_now_ms() + timeout_ms;
	int rc = upstream_start(u, err);

	if (rc < 0)
		return appl_err_set(err, rc, "%s: %s", u->name,
				    u->last_error[0] ? u->last_error : "not available");
	while (u->run == RUN_STARTING) {
		uint64_t now = loop_now_ms();

		if (now >= end)
			return appl_err_set(err, -ETIMEDOUT, "%s: not ready in time", u->name);
		rc = loop_run_once(u->loop, (int)(end - now));
		if (rc < 0)
			return appl_err_errno(err, rc, -rc, "event loop");
	}
	if (u->run == RUN_READY)
		return 0;
	return appl_err_set(err, -EIO, "%s: %s", u->name, u->last_error);
}

const char *upstream_name(const struct upstream *u)
{
	return u->name;
}

const char *upstream_last_error(const struct upstream *u)
{
	return u->last_error;
}

const char *upstream_protocol_version(const struct upstream *u)
{
	return u->version;
}

pid_t upstream_pid(const struct upstream *u)
{
	return u->run == RUN_STOPPED ? 0 : u->pid;
}

size_t upstream_tool_count(const struct upstream *u)
{
	return u->ntools;
}

const struct upstream_tool *upstream_tool_get(const struct upstream *u, size_t i)
{
	return i < u->ntools ? &u->tools[i] : NULL;
}

static char *call_encode(uint64_t id, const char *tool, const json_t *args, size_t *len,
			 struct appl_err *err)
{
	json_t *jid = json_integer((json_int_t)id);
	json_t *p = json_pack("{s:s}", "name", tool);
	char *line = NULL;

	if (!jid || !p || (args && json_object_set(p, "arguments", (json_t *)args) < 0))
		appl_err_set(err, -ENOMEM, "out of memory");
	else
		jsonrpc_request_encode(jid, "tools/call", p, APPL_UPSTREAM_MESSAGE_MAX, &line, len,
				       err);
	json_decref(jid);
	json_decref(p);
	return line;
}

int upstream_call(struct upstream *u, const char *tool, const json_t *args, unsigned timeout_ms,
		  upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err)
{
	uint64_t t = timeout_ms ? timeout_ms : APPL_CALL_TIMEOUT_S_DEF * 1000ull;
	size_t len = 0;
	struct req *r;
	int rc;

	if (!tool || !*tool || strlen(tool) > APPL_UPSTREAM_TOOL_NAME_MAX || !cb ||
	    (args && !json_is_object(args)))
		return appl_err_set(err, -EINVAL,
				    "upstream_call: a tool name, object arguments "
				    "and a callback");
	if (u->ncalls >= APPL_UPSTREAM_PENDING_MAX)
		return appl_err_set(err, -EBUSY, "too many calls pending for %s", u->name);
	if ((rc = upstream_start(u, err)) < 0)
		return rc;
	if (t > APPL_CALL_TIMEOUT_S_CEIL * 1000ull)
		t = APPL_CALL_TIMEOUT_S_CEIL * 1000ull;
	r = calloc(1, sizeof(*r));
	if (!r)
		return appl_err_set(err, -ENOMEM, "out of memory");
	r->line = call_encode(u->next_id, tool, args, &len, err);
	if (!r->line) {
		free(r);
		return err ? err->code : -ENOMEM;
	}
	r->len = len;
	r->kind = REQ_CALL;
	r->id = u->next_id++;
	r->deadline_ms = loop_now_ms() + t;
	r->cb = cb;
	r->ctx = ctx;
	req_link(u, r);
	unsent_flush(u);
	timer_rearm(u);
	if (call_id)
		*call_id = r->id;
	return 0;
}

void upstream_call_cancel(struct upstream *u, uint64_t call_id)
{
	struct req *r = req_find(u, call_id);

	if (!r || r->kind != REQ_CALL)
		return;
	req_unlink(u, r);
	if (r->sent)
		send_cancelled(u, r->id, "cancelled by the caller");
	req_free(r);
	timer_rearm(u);
}
