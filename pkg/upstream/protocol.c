/* protocol.c: the MCP client protocol with one upstream server (see
 * core.h, docs/upstream.md): the handshake (server/discover or
 * initialize), the tool list and its refreshes, what the server sends,
 * runs and their restarts, deadlines; and the callbacks its transport
 * reaches it by (upstream_core_events). */
#define _GNU_SOURCE
#include "upstream/core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "jsonrpc/jsonrpc.h"
#include "mcp/revision.h"

#define MCP_UNSUPPORTED_VERSION_CODE (-32022)

static void run_end(struct upstream *u, const char *why);
static void list_begin(struct upstream *u, bool initial);
static void listen_send(struct upstream *u);

/* A server's text for a caller: one line, controls and bytes that are not
 * UTF-8 as '?', cut at a character to cap - 1. */
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

static void call_answered(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	char reason[APPL_TOOL_ERROR_MAX + 1];
	const char *rt = json_string_value(json_object_get(m->result, "resultType"));

	if (r != upstream_call_oldest(u))
		u->in_order = false;
	if (r->task && upstream_task_answer(u, r, m))
		return;
	if (m->kind == JSONRPC_ERROR) {
		reason_clean(m->error_message, reason, sizeof(reason));
		upstream_call_finish(u, r, UPSTREAM_ERROR, NULL,
				     reason[0] ? reason : "the server returned an error");
	} else if (!json_is_object(m->result)) {
		upstream_call_finish(
			u, r, UPSTREAM_ERROR, NULL,
			"the server's answer was refused: the result is not an object");
	} else if (rt && strcmp(rt, "complete") != 0) {
		/* input_required (2026-07-28): we declared no capability to
		 * answer with, so the server had no business asking. */
		upstream_call_finish(u, r, UPSTREAM_ERROR, NULL,
				     "the server's answer was refused: it asked for input");
	} else {
		upstream_call_finish(u, r, UPSTREAM_OK, m->result, NULL);
	}
}

static int list_request(struct upstream *u, const char *cursor)
{
	json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL;
	struct req *r;

	if (cursor && !params)
		return -ENOMEM;
	r = upstream_req_send(u, REQ_LIST, "tools/list", params, u->list.deadline_ms);
	json_decref(params);
	return r ? 0 : -ENOMEM;
}

static void list_begin(struct upstream *u, bool initial)
{
	upstream_listing_reset(&u->list);
	u->list.active = true;
	u->list.initial = initial;
	u->list.deadline_ms = initial ? u->hs_deadline_ms : loop_now_ms() + u->init_timeout_ms;
	if (list_request(u, NULL) < 0) {
		if (initial)
			run_end(u, "could not send tools/list");
		else
			upstream_listing_reset(&u->list);
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
	upstream_listing_reset(&u->list);
}

/* Swap the finished listing in and tell the owner. */
static void list_commit(struct upstream *u)
{
	bool initial = u->list.initial, again = u->list.again;
	uint64_t epoch = u->v.epoch;

	upstream_tools_free(u->tools, u->ntools);
	u->tools = u->list.tools;
	u->ntools = u->list.n;
	u->list.tools = NULL;
	u->list.n = 0;
	upstream_listing_reset(&u->list);
	if (initial) {
		u->v.run = UP_RUN_READY;
		ulog(u, LOG_INFO, "ready: protocol %s, %zu tools", u->v.version, u->ntools);
		if (u->tp->ready)
			u->tp->ready(u->t);
		if (u->v.modern && u->list_changed)
			listen_send(u);
		upstream_unsent_flush(u);
		if (u->hooks.on_ready)
			u->hooks.on_ready(u, u->hooks.data);
	} else {
		ulog(u, LOG_INFO, "tool list changed: %zu tools", u->ntools);
		if (u->hooks.on_tools_changed)
			u->hooks.on_tools_changed(u, u->hooks.data);
	}
	if (again && u->v.epoch == epoch && u->v.run == UP_RUN_READY && !u->list.active)
		list_begin(u, false);
}

static void page_answered(struct upstream *u, const struct jsonrpc_msg *m, size_t len)
{
	const char *why, *next;
	char msg[APPL_TOOL_ERROR_MAX + 1];

	if (m->kind == JSONRPC_ERROR) {
		reason_clean(m->error_message, msg, sizeof(msg));
		list_fail(u, "the server answered error %" PRId64 ": %s", (int64_t)m->error_code,
			  msg);
	} else if (upstream_list_page(u, m->result, len, &next, &why) < 0) {
		list_fail(u, "%s", why);
	} else if (!next) {
		list_commit(u);
	} else if (list_request(u, next) < 0) {
		list_fail(u, "could not ask for the next page");
	}
}

/* ---- handshake ----------------------------------------------------------------- */

static int initialize_send(struct upstream *u)
{
	json_t *p =
		json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
			  mcp_revision_latest(MCP_ERA_LEGACY)->name, "capabilities", "clientInfo",
			  "name", UPSTREAM_CLIENT_NAME, "version", u->client_version);
	struct req *r;

	u->v.modern = false;
	r = p ? upstream_req_send(u, REQ_INIT, "initialize", p, u->hs_deadline_ms) : NULL;
	json_decref(p);
	return r ? 0 : -ENOMEM;
}

/* The probe: a 2026-07-28 server answers server/discover; any other answer
 * (an error, a refusal, a result without the revision) means a legacy one,
 * which initialize is tried with. */
static int discover_send(struct upstream *u)
{
	struct req *r;

	u->v.modern = true;
	r = upstream_req_send(u, REQ_DISCOVER, "server/discover", NULL, u->hs_deadline_ms);
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
	u->tasks = json_is_object(json_object_get(
		json_object_get(json_object_get(json_object_get(caps, "tasks"), "requests"),
				"tools"),
		"call"));
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
	snprintf(u->v.version, sizeof(u->v.version), "%s",
		 mcp_revision_latest(MCP_ERA_MODERN)->name);
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
	snprintf(u->v.version, sizeof(u->v.version), "%s", v);
	caps_take(u, json_object_get(m->result, "capabilities"));
	if (jsonrpc_notification_encode("notifications/initialized", NULL,
					APPL_UPSTREAM_MESSAGE_MAX, &line, &len, NULL) < 0 ||
	    upstream_control_send(u, line, len) < 0) {
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
	if (!p || !upstream_req_send(u, REQ_LISTEN, "subscriptions/listen", p, UINT64_MAX))
		ulog(u, LOG_WARN, "could not open subscriptions/listen; list changes go unheard");
	json_decref(p);
}

static void listen_ended(struct upstream *u)
{
	if (u->v.run != UP_RUN_READY || u->v.closing)
		return;
	u->relisten_at_ms = loop_now_ms() + u->backoff_min_ms;
	upstream_timer_rearm(u);
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
	if (rc < 0 || upstream_control_send(u, line, len) < 0)
		run_end(u, "does not read its input");
}

static void n_list_changed(struct upstream *u, const struct jsonrpc_msg *m)
{
	(void)m;
	if (u->list.active)
		u->list.again = true;
	else if (u->v.run == UP_RUN_READY)
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
	enum up_req_kind kind = r->kind;
	struct jsonrpc_msg none = {.kind = JSONRPC_ERROR, .error_message = why};

	upstream_req_unlink(u, r);
	upstream_req_free(r);
	upstream_timer_rearm(u);
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

/* Request id's answer was refused or cannot come (why, for the caller). */
static void req_refused(void *core, uint64_t id, const char *why)
{
	struct upstream *u = core;
	struct req *r = upstream_req_find(u, id);
	char reason[APPL_ERR_MSG_MAX];

	if (!r || !r->sent)
		return;
	snprintf(reason, sizeof(reason), "the server's answer was refused: %s", why);
	if (r->kind == REQ_CALL)
		upstream_call_finish(u, r, UPSTREAM_ERROR, NULL, reason);
	else
		internal_done(u, r, NULL, 0, reason);
}

/* Request id's answer passed its cap. */
static void req_too_large(void *core, uint64_t id)
{
	struct upstream *u = core;
	struct req *r = upstream_req_find(u, id);

	if (r && r->sent && r->kind == REQ_CALL)
		upstream_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
	else if (r && r->sent)
		req_refused(u, id, "larger than the cap");
}

static void call_dropping(struct req *r)
{
	if (r->kind == REQ_CALL && r->sent)
		r->dropping = true;
}

/* Over one stream that carries every answer: a message past the cap, of
 * which head is the start, is being dropped. A call's answer ends the
 * call over the cap once the rest of it has been read and dropped
 * (upstream_dropped_end): it is never kept or parsed, and the call holds
 * its server slot until then, so a cell gathering huge answers cannot
 * have the server make more of them than its slots while reading keeps
 * pace with what it writes. The call is the one whose id the answer's
 * first bytes name; with no id there, the oldest call sent when the
 * server has answered in order so far, else every call sent (any of them
 * could be it). A message that is not an answer is only dropped. */
static void answer_overlong(void *core, const char *head, size_t len)
{
	struct upstream *u = core;
	json_t *id = jsonrpc_id_sniff(head, len);
	struct req *r;

	if (json_is_integer(id) && json_integer_value(id) > 0) {
		uint64_t n = (uint64_t)json_integer_value(id);

		json_decref(id);
		if ((r = upstream_req_find(u, n)) && r->kind == REQ_CALL)
			call_dropping(r);
		else
			req_too_large(u, n);
		return;
	}
	json_decref(id);
	if (jsonrpc_method_sniffed(head, len) || !(r = upstream_call_oldest(u)))
		return;
	if (u->in_order) {
		call_dropping(r);
		return;
	}
	for (; r; r = r->next)
		call_dropping(r);
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
	r = upstream_req_find(u, (uint64_t)json_integer_value(m->id));
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
		req_refused(u, (uint64_t)json_integer_value(id),
			    rc == -E2BIG ? "nested too deeply" : "not valid JSON-RPC");
	json_decref(id);
}

/* One message from the server (an answer, a request, a notification). */
static void server_message(void *core, const char *buf, size_t len)
{
	struct upstream *u = core;
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

	if (u->v.run == UP_RUN_STOPPED)
		return;
	if (why != u->last_error)
		snprintf(u->last_error, sizeof(u->last_error), "%s", why);
	u->v.run = UP_RUN_STOPPED;
	u->v.epoch++;
	u->relisten_at_ms = 0;
	if (u->tp->drain)
		u->tp->drain(u->t);
	u->tp->close(u->t, false);
	upstream_listing_reset(&u->list);
	backoff_set(u, now);
	ulog(u, LOG_WARN, "down: %s (restart allowed in %" PRIu64 " ms)", u->last_error,
	     u->retry_at_ms - now);
	upstream_reqs_drop(u);
	upstream_dropped_end(u); /* answered, over the cap, before the server went */
	upstream_calls_fail(u, UPSTREAM_UNAVAILABLE, UPSTREAM_REASON_UNAVAILABLE);
	upstream_timer_rearm(u);
	if (u->hooks.on_down)
		u->hooks.on_down(u, u->last_error, u->hooks.data);
}

static void run_lost(void *core, const char *why)
{
	run_end(core, why);
}

/* Call id's session ended before it was read (HTTP 404): it is sent
 * again, once, after a new initialize. */
static void session_over(void *core, uint64_t id)
{
	struct upstream *u = core;
	struct req *r = upstream_req_find(u, id);

	if (!r)
		return;
	/* A task lives in the session that made it: it went with it. */
	if (r->resent || r->task_id) {
		upstream_call_finish(u, r, UPSTREAM_UNAVAILABLE, NULL, UPSTREAM_REASON_UNAVAILABLE);
		return;
	}
	r->resent = true;
	r->sent = false;
	if (u->v.run != UP_RUN_READY)
		return; /* a new handshake is under way: r waits for it */
	ulog(u, LOG_INFO, "the server ended the session: initialize again");
	u->v.run = UP_RUN_STARTING;
	u->hs_deadline_ms = loop_now_ms() + u->init_timeout_ms;
	if (initialize_send(u) < 0)
		run_end(u, "could not send initialize");
}

/* Open the transport and start the handshake. On failure the upstream
 * waits out a backoff like after a death (no hook: this runs inside the
 * caller). */
int upstream_run_start(struct upstream *u, struct appl_err *err)
{
	struct appl_err e = {0};
	uint64_t now = loop_now_ms();

	u->started_ms = now;
	u->starts++;
	u->hs_deadline_ms = now + u->init_timeout_ms;
	u->in_order = true;
	u->probe_retried = false;
	if (u->tp->open(u->t, &e) == 0) {
		u->v.run = UP_RUN_STARTING;
		u->v.epoch++;
		upstream_cap_update(u);
		if ((u->tp->probe ? discover_send(u) : initialize_send(u)) == 0)
			return 0;
		appl_err_set(&e, -ENOMEM, "could not send the handshake");
		u->v.run = UP_RUN_STOPPED;
		u->tp->close(u->t, true);
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
		upstream_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
		return;
	}
	if (r->kind == REQ_CALL) {
		/* MCP: the sender of a request that timed out cancels it, and
		 * its task. */
		if (r->sent && !r->poll_at)
			u->tp->abandon(u->t, r->id, UPSTREAM_REASON_TIMEOUT);
		upstream_task_cancel(u, r);
		upstream_call_finish(u, r, UPSTREAM_TIMEOUT, NULL, UPSTREAM_REASON_TIMEOUT);
		return;
	}
	switch (r->kind) {
	case REQ_INIT:
		/* initialize may not be cancelled (MCP): the server goes. */
		internal_done(u, r, NULL, 0, "initialize: no answer in time");
		break;
	case REQ_DISCOVER:
		upstream_req_unlink(u, r);
		upstream_req_free(r);
		run_end(u, "server/discover: no answer in time");
		break;
	default:
		if (!u->list.initial)
			u->tp->abandon(u->t, r->id, UPSTREAM_REASON_TIMEOUT);
		upstream_req_unlink(u, r);
		upstream_req_free(r);
		if (u->list.initial)
			run_end(u, "tools/list: no answer in time");
		else
			list_fail(u, "no answer in time");
	}
}

void upstream_timer_fire(void *data)
{
	struct upstream *u = data;

	upstream_task_polls(u);
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
	if (u->relisten_at_ms && u->relisten_at_ms <= loop_now_ms() && u->v.run == UP_RUN_READY)
		listen_send(u);
	upstream_timer_rearm(u);
}

/* The input schema of the listed tool called name, or NULL. */
static const json_t *tool_schema(void *core, const char *name)
{
	const struct upstream *u = core;

	for (size_t i = 0; i < u->ntools; i++)
		if (strcmp(u->tools[i].name, name) == 0)
			return u->tools[i].input_schema;
	return NULL;
}

static bool req_pending(void *core, uint64_t id, struct up_req_info *out)
{
	const struct req *r = upstream_req_find(core, id);

	if (!r || !r->sent)
		return false;
	if (out)
		upstream_req_describe(core, r, out);
	return true;
}

static void dropped_end(void *core)
{
	upstream_dropped_end(core);
}

static void unsent_flush(void *core)
{
	upstream_unsent_flush(core);
}

static void cancelled_send(void *core, uint64_t id, const char *reason)
{
	upstream_cancelled_send(core, id, reason);
}

const struct up_events upstream_core_events = {
	.message = server_message,
	.lost = run_lost,
	.refused = req_refused,
	.too_large = req_too_large,
	.overlong = answer_overlong,
	.dropped_end = dropped_end,
	.session_over = session_over,
	.flush = unsent_flush,
	.cancelled = cancelled_send,
	.pending = req_pending,
	.tool_schema = tool_schema,
};
