/* client.c: the MCP client for one upstream server, over its transport
 * (see upstream.h, core.h, docs/upstream.md): ids, the handshake
 * (server/discover or initialize), tools/list, calls (and resource reads)
 * and their timeouts. */
#define _GNU_SOURCE
#include "upstream/core.h"
#include "base/utf8.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc/jsonrpc.h"

#define META_PROTOCOL		     "io.modelcontextprotocol/protocolVersion"
#define META_CLIENT_INFO	     "io.modelcontextprotocol/clientInfo"
#define META_CLIENT_CAPS	     "io.modelcontextprotocol/clientCapabilities"
#define MCP_UNSUPPORTED_VERSION_CODE (-32022)

static void run_end(struct upstream *u, const char *why);
static void list_begin(struct upstream *u, bool initial);
static void listen_send(struct upstream *u);

/* One log line, "upstream NAME: ...". Text from the server reaches fmt
 * only as an argument, escaped (log_escape) or sanitized first. */
void ulog(const struct upstream *u, enum log_level lvl, const char *fmt, ...)
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

/* A server's text for a caller: one line, controls and bytes that are not
 * UTF-8 as '?', cut at a character to cap - 1. */
static void up_reason_clean(const char *in, char *out, size_t cap)
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

/* ---- requests ----------------------------------------------------------------- */

static void req_free(struct req *r)
{
	if (!r)
		return;
	free(r->line);
	free(r->tool);
	json_decref(r->params);
	free(r);
}

/* A call's answer: its result and the envelope, within the message cap. */
static size_t call_cap(const struct upstream *u)
{
	size_t cap = u->result_max + UP_ENVELOPE_MAX;

	return cap > APPL_UPSTREAM_MESSAGE_MAX ? APPL_UPSTREAM_MESSAGE_MAX : cap;
}

size_t up_answer_cap(const struct upstream *u, const struct req *r)
{
	return r && r->kind == REQ_CALL ? call_cap(u) : APPL_UPSTREAM_MESSAGE_MAX;
}

/* The longest message the server may send now, for a transport that has
 * one stream for every answer: while only calls wait, an answer longer
 * than a call's result can be (and its envelope) is over the result cap,
 * and is dropped as soon as it passes it, unread; the handshake and
 * tools/list may need the whole message cap. */
static void cap_update(struct upstream *u)
{
	size_t cap = call_cap(u);

	for (const struct req *r = u->head; r; r = r->next)
		if (up_answer_cap(u, r) > cap)
			cap = up_answer_cap(u, r);
	if (u->tp->cap_changed)
		u->tp->cap_changed(u, cap);
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

struct req *up_req_find(const struct upstream *u, uint64_t id)
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
	if (u->relisten_at_ms && u->relisten_at_ms < first)
		first = u->relisten_at_ms;
	if (first == UINT64_MAX) {
		loop_timer_set(u->timer, 0);
		return;
	}
	now = loop_now_ms();
	loop_timer_set(u->timer, first > now ? first - now : 1);
}

/* ---- output -------------------------------------------------------------------- */

/* params (borrowed; NULL for none) as this run sends them: in the
 * 2026-07-28 era every request carries the revision, who we are and what
 * we can do (nothing: no sampling, roots or elicitation) in _meta. A new
 * reference, or NULL when out of memory. */
static json_t *params_for(const struct upstream *u, const json_t *params)
{
	json_t *p, *meta;

	if (!u->modern)
		return params ? json_incref((json_t *)params) : json_null();
	p = params ? json_copy((json_t *)params) : json_object();
	meta = json_pack("{s:s, s:{s:s, s:s}, s:{}}", META_PROTOCOL,
			 mcp_revision_latest(MCP_ERA_MODERN)->name, META_CLIENT_INFO, "name",
			 UPSTREAM_CLIENT_NAME, "version", u->client_version, META_CLIENT_CAPS);
	if (!p || !meta || json_object_set_new(p, "_meta", meta) < 0) {
		json_decref(p);
		return NULL;
	}
	return p;
}

/* Encode request id (method, params) for this run into *line. */
static int request_encode(const struct upstream *u, uint64_t id, const char *method,
			  const json_t *params, char **line, size_t *len, struct appl_err *err)
{
	json_t *jid = json_integer((json_int_t)id);
	json_t *p = params_for(u, params);
	int rc;

	if (!jid || !p)
		rc = appl_err_set(err, -ENOMEM, "out of memory");
	else
		rc = jsonrpc_request_encode(jid, method, json_is_null(p) ? NULL : p,
					    APPL_UPSTREAM_MESSAGE_MAX, line, len, err);
	json_decref(jid);
	json_decref(p);
	return rc;
}

/* Send one of our own lines (freed here). */
static int send_control(struct upstream *u, char *line, size_t len)
{
	int rc = line ? u->tp->send(u, NULL, line, len, false) : -ENOMEM;

	free(line);
	return rc;
}

void up_send_cancelled(struct upstream *u, uint64_t id, const char *reason)
{
	json_t *p = json_pack("{s:I, s:s}", "requestId", (json_int_t)id, "reason", reason);
	char *line = NULL;
	size_t len;

	if (!p ||
	    jsonrpc_notification_encode("notifications/cancelled", p, APPL_UPSTREAM_MESSAGE_MAX,
					&line, &len, NULL) < 0 ||
	    send_control(u, line, len) < 0)
		ulog(u, LOG_WARN, "could not send notifications/cancelled for request %" PRIu64,
		     id);
	json_decref(p);
}

/* A call that waits, sent now: 0, -ENOBUFS (no room: it waits on), or
 * another error (it cannot go). */
static int call_send(struct upstream *u, struct req *r)
{
	int rc;

	if (r->modern != u->modern || !r->line) {
		char *line = NULL;
		size_t len;

		if ((rc = request_encode(u, r->id, r->method, r->params, &line, &len, NULL)) < 0)
			return rc;
		free(r->line);
		r->line = line;
		r->len = len;
		r->modern = u->modern;
	}
	if ((rc = u->tp->send(u, r, r->line, r->len, true)) < 0)
		return rc;
	free(r->line);
	r->line = NULL;
	r->sent = true;
	return 0;
}

void up_unsent_flush(struct upstream *u)
{
	uint64_t epoch = u->epoch;

	if (u->run != RUN_READY)
		return;
	for (struct req *r = u->head, *next; r && u->epoch == epoch; r = next) {
		int rc;

		next = r->next;
		if (r->kind != REQ_CALL || r->sent)
			continue;
		if ((rc = call_send(u, r)) == -ENOBUFS)
			return;
		if (rc < 0) {
			if (r->tool)
				ulog(u, LOG_WARN, "could not send a call of %s", r->tool);
			else
				ulog(u, LOG_WARN, "could not send a %s", r->method);
			up_call_finish(u, r, UPSTREAM_UNAVAILABLE, NULL,
				       UPSTREAM_REASON_UNAVAILABLE);
			next = u->head; /* a callback may have changed the list */
		}
	}
}

/* A request of ours (new, linked), sent now. */
static struct req *req_send(struct upstream *u, enum req_kind kind, const char *method,
			    const json_t *params, uint64_t deadline_ms)
{
	struct req *r = calloc(1, sizeof(*r));
	char *line = NULL;
	size_t len;

	if (!r || request_encode(u, u->next_id, method, params, &line, &len, NULL) < 0) {
		free(r);
		return NULL;
	}
	r->kind = kind;
	r->method = method;
	r->id = u->next_id++;
	r->deadline_ms = deadline_ms;
	r->modern = u->modern;
	if (u->tp->send(u, r, line, len, false) < 0) {
		free(line);
		free(r);
		return NULL;
	}
	free(line);
	r->sent = true;
	req_link(u, r);
	timer_rearm(u);
	return r;
}

/* ---- calls ------------------------------------------------------------------ */

void up_call_finish(struct upstream *u, struct req *r, int status, const json_t *result,
		    const char *reason)
{
	req_unlink(u, r);
	timer_rearm(u);
	r->cb(r->ctx, status, result, reason);
	req_free(r);
}

struct req *up_oldest_sent_call(const struct upstream *u)
{
	for (struct req *r = u->head; r; r = r->next)
		if (r->kind == REQ_CALL && r->sent)
			return r;
	return NULL;
}

static void call_answered(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	char reason[APPL_TOOL_ERROR_MAX + 1];
	const char *rt = json_string_value(json_object_get(m->result, "resultType"));

	if (r != up_oldest_sent_call(u))
		u->in_order = false;
	if (m->kind == JSONRPC_ERROR) {
		up_reason_clean(m->error_message, reason, sizeof(reason));
		up_call_finish(u, r, UPSTREAM_ERROR, NULL,
			       reason[0] ? reason : "the server returned an error");
	} else if (!json_is_object(m->result)) {
		up_call_finish(u, r, UPSTREAM_ERROR, NULL,
			       "the server's answer was refused: the result is not an object");
	} else if (rt && strcmp(rt, "complete") != 0) {
		/* input_required (2026-07-28): we declared no capability to
		 * answer with, so the server had no business asking. */
		up_call_finish(u, r, UPSTREAM_ERROR, NULL,
			       "the server's answer was refused: it asked for input");
	} else {
		up_call_finish(u, r, UPSTREAM_OK, m->result, NULL);
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
		up_call_finish(u, r, status, NULL, reason);
	}
}

/* Drop our own requests (handshake, list pages, listen): nobody waits. */
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
		json_decref((json_t *)t[i].output_schema);
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
			run_end(u, "could not send tools/list");
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
		run_end(u, e.msg);
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

/* Tool t's outputSchema when it is an object, else NULL: one that is
 * something else (but null, which is none) is logged and left out, the
 * tool taken without it. */
static const json_t *tool_output_schema(const struct upstream *u, const json_t *t, size_t idx)
{
	const json_t *os = json_object_get(t, "outputSchema");

	if (json_is_object(os))
		return os;
	if (os && !json_is_null(os))
		ulog(u, LOG_WARN,
		     "tools/list: tool %zu of page %u: outputSchema is not an object; ignored", idx,
		     u->list.pages);
	return NULL;
}

/* MCP tasks: a tool the server runs only as a task says so. */
static bool tool_task_required(const json_t *t)
{
	const char *ts =
		json_string_value(json_object_get(json_object_get(t, "execution"), "taskSupport"));

	return ts && strcmp(ts, "required") == 0;
}

/* Add tool t of the page to the listing: 0 (taken or skipped), or -1 when
 * the whole list must be refused (why set). */
static int tool_take(struct upstream *u, const json_t *t, size_t idx, const char **why)
{
	struct listing *l = &u->list;
	const char *bad = tool_check(t), *name, *desc;

	if (!bad && u->tp->tool_check)
		bad = u->tp->tool_check(u, t);
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
	tool->output_schema = json_incref((json_t *)tool_output_schema(u, t, idx));
	tool->read_only_hint =
		json_is_true(json_object_get(json_object_get(t, "annotations"), "readOnlyHint"));
	tool->task_required = tool_task_required(t);
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
		if (u->tp->ready)
			u->tp->ready(u);
		if (u->modern && u->list_changed)
			listen_send(u);
		up_unsent_flush(u);
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
		up_reason_clean(m->error_message, msg, sizeof(msg));
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
	struct req *r;

	u->modern = false;
	r = p ? req_send(u, REQ_INIT, "initialize", p, u->hs_deadline_ms) : NULL;
	json_decref(p);
	return r ? 0 : -ENOMEM;
}

/* The probe: a 2026-07-28 server answers server/discover; any other answer
 * (an error, a refusal, a result without the revision) means a legacy one,
 * which initialize is tried with. */
static int discover_send(struct upstream *u)
{
	struct req *r;

	u->modern = true;
	r = req_send(u, REQ_DISCOVER, "server/discover", NULL, u->hs_deadline_ms);
	return r ? 0 : -ENOMEM;
}

static bool tools_list_changes(const json_t *caps)
{
	return json_is_true(json_object_get(json_object_get(caps, "tools"), "listChanged"));
}

/* What the handshake's capabilities say of the server (caps may be NULL). */
static void caps_take(struct upstream *u, const json_t *caps)
{
	u->list_changed = tools_list_changes(caps);
	u->resources = json_is_object(json_object_get(caps, "resources"));
}

static bool names_modern(const json_t *versions)
{
	const char *want = mcp_revision_latest(MCP_ERA_MODERN)->name;
	const json_t *v;
	size_t i;

	json_array_foreach(versions, i, v) {
		if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
			return true;
	}
	return false;
}

static void discover_answered(struct upstream *u, const struct jsonrpc_msg *m)
{
	const json_t *res = m->kind == JSONRPC_ERROR ? NULL : m->result;

	/* -32022 naming 2026-07-28 among what it serves: ask once more (a
	 * server may refuse a first choice it has not seen yet). */
	if (m->kind == JSONRPC_ERROR && m->error_code == MCP_UNSUPPORTED_VERSION_CODE &&
	    names_modern(json_object_get(m->error_data, "supported")) && !u->probe_retried) {
		u->probe_retried = true;
		ulog(u, LOG_INFO, "server/discover: the server asks again for 2026-07-28");
		if (discover_send(u) < 0)
			run_end(u, "could not send server/discover");
		return;
	}
	if (!names_modern(json_object_get(res, "supportedVersions"))) {
		ulog(u, LOG_DEBUG, "server/discover: not a 2026-07-28 server; initialize");
		if (initialize_send(u) < 0)
			run_end(u, "could not send initialize");
		return;
	}
	snprintf(u->version, sizeof(u->version), "%s", mcp_revision_latest(MCP_ERA_MODERN)->name);
	caps_take(u, json_object_get(res, "capabilities"));
	list_begin(u, true);
}

/* Upstream servers are spoken to in the legacy era after initialize. */
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
		run_end(u, e.msg);
		return;
	}
	v = version_known(json_object_get(m->result, "protocolVersion"));
	if (!v) {
		/* MCP: a client that does not speak the version the server
		 * offers disconnects. */
		run_end(u, "initialize: the server offers no protocol version we speak");
		return;
	}
	snprintf(u->version, sizeof(u->version), "%s", v);
	caps_take(u, json_object_get(m->result, "capabilities"));
	if (jsonrpc_notification_encode("notifications/initialized", NULL,
					APPL_UPSTREAM_MESSAGE_MAX, &line, &len, NULL) < 0 ||
	    send_control(u, line, len) < 0) {
		run_end(u, "could not send notifications/initialized");
		return;
	}
	list_begin(u, true);
}

/* 2026-07-28: changes to the tool list come on a subscriptions/listen
 * stream, opened when the server says the list may change and opened
 * again (after the backoff) when it ends. */
static void listen_send(struct upstream *u)
{
	json_t *p = json_pack("{s:{s:b}}", "notifications", "toolsListChanged", 1);

	u->relisten_at_ms = 0;
	if (!p || !req_send(u, REQ_LISTEN, "subscriptions/listen", p, UINT64_MAX))
		ulog(u, LOG_WARN, "could not open subscriptions/listen; list changes go unheard");
	json_decref(p);
}

static void listen_ended(struct upstream *u)
{
	if (u->run != RUN_READY || u->closing)
		return;
	u->relisten_at_ms = loop_now_ms() + u->backoff_min_ms;
	timer_rearm(u);
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
		run_end(u, "does not read its input");
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

/* Our own request r (unlinked, freed here) got its answer m, or (m NULL)
 * none it could use (why). */
static void internal_done(struct upstream *u, struct req *r, const struct jsonrpc_msg *m,
			  size_t len, const char *why)
{
	enum req_kind kind = r->kind;
	struct jsonrpc_msg none = {.kind = JSONRPC_ERROR, .error_message = why};

	req_unlink(u, r);
	req_free(r);
	timer_rearm(u);
	switch (kind) {
	case REQ_DISCOVER:
		discover_answered(u, m ? m : &none);
		break;
	case REQ_INIT:
		if (m)
			init_answered(u, m);
		else
			run_end(u, why);
		break;
	case REQ_LIST:
		if (m && u->list.active)
			page_answered(u, m, len);
		else if (!m)
			list_fail(u, "%s", why);
		break;
	case REQ_LISTEN:
		listen_ended(u);
		break;
	case REQ_CALL:
		break;
	}
}

void up_req_refused(struct upstream *u, uint64_t id, const char *why)
{
	struct req *r = up_req_find(u, id);
	char reason[APPL_ERR_MSG_MAX];

	if (!r || !r->sent)
		return;
	snprintf(reason, sizeof(reason), "the server's answer was refused: %s", why);
	if (r->kind == REQ_CALL)
		up_call_finish(u, r, UPSTREAM_ERROR, NULL, reason);
	else
		internal_done(u, r, NULL, 0, reason);
}

void up_req_too_large(struct upstream *u, uint64_t id)
{
	struct req *r = up_req_find(u, id);

	if (r && r->sent && r->kind == REQ_CALL)
		up_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
	else if (r && r->sent)
		up_req_refused(u, id, "larger than the cap");
}

void up_call_dropping(struct upstream *u, struct req *r)
{
	(void)u;
	if (r->kind == REQ_CALL && r->sent)
		r->dropping = true;
}

void up_dropped_end(struct upstream *u)
{
	for (;;) {
		struct req *r = u->head;

		while (r && !r->dropping)
			r = r->next;
		if (!r)
			return;
		up_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
	}
}

static void server_answer(struct upstream *u, const struct jsonrpc_msg *m, size_t len)
{
	struct req *r;

	if (!m->id) {
		ulog(u, LOG_WARN,
		     "the server reported error %" PRId64 " for a message it could not read",
		     (int64_t)m->error_code);
		return;
	}
	/* Our ids are positive integers; anything else, and any id no longer
	 * pending (a call that timed out or was cancelled), is dropped. */
	if (!json_is_integer(m->id) || json_integer_value(m->id) <= 0)
		return;
	r = up_req_find(u, (uint64_t)json_integer_value(m->id));
	if (!r || !r->sent)
		return;
	if (r->kind == REQ_CALL)
		call_answered(u, r, m);
	else
		internal_done(u, r, m, len, NULL);
}

static void message_refused(struct upstream *u, const char *buf, size_t len, int rc,
			    const struct jsonrpc_msg *m, const struct appl_err *e)
{
	json_t *id = NULL;

	ulog(u, LOG_WARN, "refused a message: %s", e->msg);
	if (json_is_integer(m->id) && json_integer_value(m->id) > 0)
		id = json_incref(m->id);
	else
		id = jsonrpc_id_sniff(buf, len);
	if (json_is_integer(id) && json_integer_value(id) > 0)
		up_req_refused(u, (uint64_t)json_integer_value(id),
			       rc == -E2BIG ? "nested too deeply" : "not valid JSON-RPC");
	json_decref(id);
}

void up_message(struct upstream *u, const char *buf, size_t len)
{
	struct jsonrpc_msg m = {0};
	struct appl_err e = {0};
	int rc = jsonrpc_msg_parse(buf, len, APPL_UPSTREAM_MESSAGE_MAX, &m, &e);

	if (rc < 0)
		message_refused(u, buf, len, rc, &m, &e);
	else if (m.kind == JSONRPC_REQUEST)
		server_request(u, &m);
	else if (m.kind == JSONRPC_NOTIFICATION)
		server_notification(u, &m);
	else
		server_answer(u, &m, len);
	jsonrpc_msg_clear(&m);
}

/* ---- runs ------------------------------------------------------------------------ */

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

/* The run is over (why: for the log and on_down): stop the transport, fail
 * what waits, and allow a restart after the backoff. */
static void run_end(struct upstream *u, const char *why)
{
	uint64_t now = loop_now_ms();

	if (u->run == RUN_STOPPED)
		return;
	if (why != u->last_error)
		snprintf(u->last_error, sizeof(u->last_error), "%s", why);
	u->run = RUN_STOPPED;
	u->epoch++;
	u->relisten_at_ms = 0;
	if (u->tp->drain)
		u->tp->drain(u);
	u->tp->close(u, false);
	listing_reset(&u->list);
	backoff_set(u, now);
	ulog(u, LOG_WARN, "down: %s (restart allowed in %" PRIu64 " ms)", u->last_error,
	     u->retry_at_ms - now);
	reqs_drop_internal(u);
	up_dropped_end(u); /* answered, over the cap, before the server went */
	calls_fail(u, UPSTREAM_UNAVAILABLE, UPSTREAM_REASON_UNAVAILABLE);
	timer_rearm(u);
	if (u->hooks.on_down)
		u->hooks.on_down(u, u->last_error, u->hooks.data);
}

void up_lost(struct upstream *u, const char *why)
{
	run_end(u, why);
}

void up_session_over(struct upstream *u, struct req *r)
{
	if (r->resent) {
		up_call_finish(u, r, UPSTREAM_UNAVAILABLE, NULL, UPSTREAM_REASON_UNAVAILABLE);
		return;
	}
	r->resent = true;
	r->sent = false;
	if (u->run != RUN_READY)
		return; /* a new handshake is under way: r waits for it */
	ulog(u, LOG_INFO, "the server ended the session: initialize again");
	u->run = RUN_STARTING;
	u->hs_deadline_ms = loop_now_ms() + u->init_timeout_ms;
	if (initialize_send(u) < 0)
		run_end(u, "could not send initialize");
}

/* Open the transport and start the handshake. On failure the upstream
 * waits out a backoff like after a death (no hook: this runs inside the
 * caller). */
static int run_start(struct upstream *u, struct appl_err *err)
{
	struct appl_err e = {0};
	uint64_t now = loop_now_ms();

	u->started_ms = now;
	u->hs_deadline_ms = now + u->init_timeout_ms;
	u->in_order = true;
	u->probe_retried = false;
	if (u->tp->open(u, &e) == 0) {
		u->run = RUN_STARTING;
		u->epoch++;
		cap_update(u);
		if ((u->tp->probe ? discover_send(u) : initialize_send(u)) == 0)
			return 0;
		appl_err_set(&e, -ENOMEM, "could not send the handshake");
		u->run = RUN_STOPPED;
		u->tp->close(u, true);
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
	if (r->dropping) {
		/* Its answer came, over the cap: that is how it ended. */
		up_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
		return;
	}
	if (r->kind == REQ_CALL) {
		/* MCP: the sender of a request that timed out cancels it. */
		if (r->sent)
			u->tp->abandon(u, r, UPSTREAM_REASON_TIMEOUT);
		up_call_finish(u, r, UPSTREAM_TIMEOUT, NULL, UPSTREAM_REASON_TIMEOUT);
		return;
	}
	switch (r->kind) {
	case REQ_INIT:
		/* initialize may not be cancelled (MCP): the server goes. */
		internal_done(u, r, NULL, 0, "initialize: no answer in time");
		break;
	case REQ_DISCOVER:
		req_unlink(u, r);
		req_free(r);
		run_end(u, "server/discover: no answer in time");
		break;
	default:
		if (!u->list.initial)
			u->tp->abandon(u, r, UPSTREAM_REASON_TIMEOUT);
		req_unlink(u, r);
		req_free(r);
		if (u->list.initial)
			run_end(u, "tools/list: no answer in time");
		else
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
	if (u->relisten_at_ms && u->relisten_at_ms <= loop_now_ms() && u->run == RUN_READY)
		listen_send(u);
	timer_rearm(u);
}

/* ---- the interface ---------------------------------------------------------- */

static int copy_opts(struct upstream *u, const struct policy_server *srv,
		     const struct upstream_opts *o)
{
	u->name = strdup(srv->name);
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
	return u->name && u->client_version ? 0 : -ENOMEM;
}

static bool server_ok(const struct policy_server *srv)
{
	if (!srv || !srv->name)
		return false;
	if (srv->kind == POLICY_SERVER_HTTP)
		return srv->url != NULL;
	return srv->kind == POLICY_SERVER_STDIO && srv->argc >= 1 && srv->argv && srv->argv[0] &&
	       srv->argv[0][0] == '/';
}

struct upstream *upstream_new(struct loop *loop, const struct policy_server *srv,
			      const struct upstream_hooks *hooks, const struct upstream_opts *opts,
			      struct appl_err *err)
{
	struct upstream *u;
	int rc;

	if (!loop || !server_ok(srv)) {
		appl_err_set(err, -EINVAL,
			     "upstream: a stdio server with an absolute command, or an HTTP "
			     "server with a URL");
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	u->loop = loop;
	u->tp = &up_stdio_transport;
	u->next_id = 1;
	u->result_max = opts && opts->result_max ? opts->result_max : APPL_MAX_RESULT_BYTES_DEF;
	if (hooks)
		u->hooks = *hooks;
	if (copy_opts(u, srv, opts) < 0) {
		appl_err_set(err, -ENOMEM, "out of memory");
		upstream_free(u);
		return NULL;
	}
	rc = srv->kind == POLICY_SERVER_HTTP ? up_http_new(u, srv, opts, err)
					     : up_stdio_new(u, srv, opts, err);
	if (rc < 0 || !(u->timer = loop_timer_new(loop, on_timer, u, err))) {
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
	if (u->t && u->tp->drain)
		u->tp->drain(u);
	reqs_drop_internal(u);
	u->run = RUN_STOPPED;
	if (u->t) {
		u->tp->close(u, true);
		u->tp->destroy(u);
	}
	loop_timer_free(u->timer);
	listing_reset(&u->list);
	tools_free(u->tools, u->ntools);
	free(u->name);
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

const json_t *up_tool_schema(const struct upstream *u, const char *name)
{
	for (size_t i = 0; i < u->ntools; i++)
		if (strcmp(u->tools[i].name, name) == 0)
			return u->tools[i].input_schema;
	return NULL;
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
	return u->run == RUN_STOPPED || !u->tp->pid ? 0 : u->tp->pid(u);
}

size_t upstream_tool_count(const struct upstream *u)
{
	return u->ntools;
}

const struct upstream_tool *upstream_tool_get(const struct upstream *u, size_t i)
{
	return i < u->ntools ? &u->tools[i] : NULL;
}

bool upstream_has_resources(const struct upstream *u)
{
	return u->resources;
}

const char *up_req_name(const struct req *r)
{
	return r->tool ? r->tool : json_string_value(json_object_get(r->params, "uri"));
}

/* The path of every caller's request, a call or a read: r (made, with its
 * method, params and, for a call, its tool; freed here on failure) is
 * encoded, linked and sent as soon as the server takes it. */
static int caller_submit(struct upstream *u, struct req *r, unsigned timeout_ms,
			 upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err)
{
	uint64_t t = timeout_ms ? timeout_ms : APPL_CALL_TIMEOUT_S_DEF * 1000ull;
	int rc;

	if (u->ncalls >= APPL_UPSTREAM_PENDING_MAX)
		rc = appl_err_set(err, -EBUSY, "too many calls pending for %s", u->name);
	else
		rc = upstream_start(u, err);
	/* Encoded now, in the era known now, so a request over the cap is
	 * refused here; a call that waits for a probe is encoded again if
	 * the era turns out otherwise. */
	if (rc == 0)
		rc = request_encode(u, u->next_id, r->method, r->params, &r->line, &r->len, err);
	if (rc < 0) {
		req_free(r);
		return rc;
	}
	if (t > APPL_CALL_TIMEOUT_S_CEIL * 1000ull)
		t = APPL_CALL_TIMEOUT_S_CEIL * 1000ull;
	r->modern = u->modern;
	r->kind = REQ_CALL;
	r->id = u->next_id++;
	r->deadline_ms = loop_now_ms() + t;
	r->cb = cb;
	r->ctx = ctx;
	req_link(u, r);
	up_unsent_flush(u);
	timer_rearm(u);
	if (call_id)
		*call_id = r->id;
	return 0;
}

int upstream_call(struct upstream *u, const char *tool, const json_t *args, unsigned timeout_ms,
		  upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err)
{
	struct req *r;

	if (!tool || !*tool || strlen(tool) > APPL_UPSTREAM_TOOL_NAME_MAX || !cb ||
	    (args && !json_is_object(args)))
		return appl_err_set(err, -EINVAL,
				    "upstream_call: a tool name, object arguments "
				    "and a callback");
	r = calloc(1, sizeof(*r));
	if (!r || !(r->tool = strdup(tool)) || !(r->params = json_pack("{s:s}", "name", tool)) ||
	    (args && json_object_set(r->params, "arguments", (json_t *)args) < 0)) {
		req_free(r);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	r->method = "tools/call";
	return caller_submit(u, r, timeout_ms, cb, ctx, call_id, err);
}

int upstream_read(struct upstream *u, const char *uri, unsigned timeout_ms, upstream_result_cb cb,
		  void *ctx, uint64_t *call_id)
{
	size_t len = uri ? strlen(uri) : 0;
	struct req *r;

	/* JSON carries only UTF-8: other bytes are the caller's mistake. */
	if (len == 0 || len > UPSTREAM_URI_MAX || appl_utf8_prefix(uri, len) != len || !cb)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->params = json_pack("{s:s}", "uri", uri))) {
		req_free(r);
		return -ENOMEM;
	}
	r->method = "resources/read";
	return caller_submit(u, r, timeout_ms, cb, ctx, call_id, NULL);
}

void upstream_call_cancel(struct upstream *u, uint64_t call_id)
{
	struct req *r = up_req_find(u, call_id);

	if (!r || r->kind != REQ_CALL)
		return;
	if (r->sent)
		u->tp->abandon(u, r, "cancelled by the caller");
	req_unlink(u, r);
	req_free(r);
	timer_rearm(u);
}
