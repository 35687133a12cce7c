/* request.c: the requests of the upstream client (see core.h): their
 * queue, the one timer for their deadlines, their encoding for the run's
 * revision, sending them through the transport, and ending a call. */
#define _GNU_SOURCE
#include "upstream/core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/revision.h"

#define META_PROTOCOL	 "io.modelcontextprotocol/protocolVersion"
#define META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define META_CLIENT_CAPS "io.modelcontextprotocol/clientCapabilities"

void upstream_req_free(struct req *r)
{
	if (!r)
		return;
	free(r->line);
	free(r->tool);
	free(r->traceparent);
	free(r->task_id);
	json_decref(r->params);
	free(r);
}

/* A call's answer: its result and the envelope, within the message cap. */
static size_t call_cap(const struct upstream *u)
{
	size_t cap = u->result_max + UP_ENVELOPE_MAX;

	return cap > APPL_UPSTREAM_MESSAGE_MAX ? APPL_UPSTREAM_MESSAGE_MAX : cap;
}

size_t upstream_answer_cap(const struct upstream *u, const struct req *r)
{
	return r && r->kind == REQ_CALL ? call_cap(u) : APPL_UPSTREAM_MESSAGE_MAX;
}

/* The longest message the server may send now, for a transport that has
 * one stream for every answer: while only calls wait, an answer longer
 * than a call's result can be (and its envelope) is over the result cap,
 * and is dropped as soon as it passes it, unread; the handshake and
 * tools/list may need the whole message cap. */
void upstream_cap_update(struct upstream *u)
{
	size_t cap = call_cap(u);

	for (const struct req *r = u->head; r; r = r->next)
		if (upstream_answer_cap(u, r) > cap)
			cap = upstream_answer_cap(u, r);
	if (u->tp->cap_changed)
		u->tp->cap_changed(u->t, cap);
}

void upstream_req_link(struct upstream *u, struct req *r)
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
		upstream_cap_update(u);
}

void upstream_req_unlink(struct upstream *u, struct req *r)
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
		upstream_cap_update(u);
}

struct req *upstream_req_find(const struct upstream *u, uint64_t id)
{
	/* A task between two requests has none in flight. */
	for (struct req *r = u->head; r; r = r->next)
		if (r->id == id && !r->poll_at)
			return r;
	return NULL;
}

/* One timer for every deadline: armed for the earliest. */
void upstream_timer_rearm(struct upstream *u)
{
	uint64_t first = UINT64_MAX, now;

	for (const struct req *r = u->head; r; r = r->next) {
		if (r->deadline_ms < first)
			first = r->deadline_ms;
		if (r->poll_at && r->poll_at < first) /* a task's next status */
			first = r->poll_at;
	}
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

	if (!u->v.modern)
		return params ? json_incref((json_t *)params) : json_null();
	p = params ? json_copy((json_t *)params) : json_object();
	meta = json_pack("{s:s, s:{s:s, s:s}, s:{}}", META_PROTOCOL,
			 mcp_revision_latest(MCP_ERA_MODERN)->name, META_CLIENT_INFO, "name",
			 UPSTREAM_CLIENT_NAME, "version", u->client_version, META_CLIENT_CAPS);
	/* the caller's own _meta (a call's traceparent) goes along */
	if (!p || !meta ||
	    (json_object_get(p, "_meta") &&
	     json_object_update_missing(meta, json_object_get(p, "_meta")) < 0) ||
	    json_object_set_new(p, "_meta", meta) < 0) {
		json_decref(p);
		return NULL;
	}
	return p;
}

/* Encode request id (method, params) for this run into *line. */
int upstream_request_encode(const struct upstream *u, uint64_t id, const char *method,
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

/* What Mcp-Name carries for a caller's request r (2026-07-28): a call's
 * tool, a read's uri. Borrowed from r. */
static const char *req_name(const struct req *r)
{
	return r->tool ? r->tool : json_string_value(json_object_get(r->params, "uri"));
}

void upstream_req_describe(const struct upstream *u, const struct req *r, struct up_req_info *out)
{
	*out = (struct up_req_info){.id = r->id,
				    .kind = r->kind,
				    .method = r->method,
				    .name = r->kind == REQ_CALL ? req_name(r) : NULL,
				    .tool = r->tool,
				    .args = json_object_get(r->params, "arguments"),
				    .cap = upstream_answer_cap(u, r),
				    .traceparent = r->traceparent};
}

/* Send line as request r (NULL: a notification or an answer of ours)
 * through the transport, which is told what r is. */
static int tp_send(struct upstream *u, const struct req *r, const char *line, size_t len, bool call)
{
	struct up_req_info info;

	if (!r)
		return u->tp->send(u->t, NULL, line, len, call);
	upstream_req_describe(u, r, &info);
	return u->tp->send(u->t, &info, line, len, call);
}

/* Send one of our own lines (freed here). */
int upstream_control_send(struct upstream *u, char *line, size_t len)
{
	int rc = line ? tp_send(u, NULL, line, len, false) : -ENOMEM;

	free(line);
	return rc;
}

void upstream_cancelled_send(struct upstream *u, uint64_t id, const char *reason)
{
	json_t *p = json_pack("{s:I, s:s}", "requestId", (json_int_t)id, "reason", reason);
	char *line = NULL;
	size_t len;

	if (!p ||
	    jsonrpc_notification_encode("notifications/cancelled", p, APPL_UPSTREAM_MESSAGE_MAX,
					&line, &len, NULL) < 0 ||
	    upstream_control_send(u, line, len) < 0)
		ulog(u, LOG_WARN, "could not send notifications/cancelled for request %" PRIu64,
		     id);
	json_decref(p);
}

/* A call that waits, sent now: 0, -ENOBUFS (no room: it waits on), or
 * another error (it cannot go). */
static int call_send(struct upstream *u, struct req *r)
{
	int rc;

	if (r->modern != u->v.modern || !r->line) {
		char *line = NULL;
		size_t len;

		if ((rc = upstream_request_encode(u, r->id, r->method, r->params, &line, &len,
						  NULL)) < 0)
			return rc;
		free(r->line);
		r->line = line;
		r->len = len;
		r->modern = u->v.modern;
	}
	if ((rc = tp_send(u, r, r->line, r->len, true)) < 0)
		return rc;
	free(r->line);
	r->line = NULL;
	r->sent = true;
	return 0;
}

void upstream_unsent_flush(struct upstream *u)
{
	uint64_t epoch = u->v.epoch;

	if (u->v.run != UP_RUN_READY)
		return;
	for (struct req *r = u->head, *next; r && u->v.epoch == epoch; r = next) {
		int rc;

		next = r->next;
		if (r->kind != REQ_CALL || r->sent || r->task_id)
			continue;
		if ((rc = call_send(u, r)) == -ENOBUFS)
			return;
		if (rc < 0) {
			if (r->tool)
				ulog(u, LOG_WARN, "could not send a call of %s", r->tool);
			else
				ulog(u, LOG_WARN, "could not send a %s", r->method);
			upstream_call_finish(u, r, UPSTREAM_UNAVAILABLE, NULL,
					     UPSTREAM_REASON_UNAVAILABLE);
			next = u->head; /* a callback may have changed the list */
		}
	}
}

/* A request of ours (new, linked), sent now. */
struct req *upstream_req_send(struct upstream *u, enum up_req_kind kind, const char *method,
			      const json_t *params, uint64_t deadline_ms)
{
	struct req *r = calloc(1, sizeof(*r));
	char *line = NULL;
	size_t len;

	if (!r || upstream_request_encode(u, u->next_id, method, params, &line, &len, NULL) < 0) {
		free(r);
		return NULL;
	}
	r->kind = kind;
	r->method = method;
	r->id = u->next_id++;
	r->deadline_ms = deadline_ms;
	r->modern = u->v.modern;
	if (tp_send(u, r, line, len, false) < 0) {
		free(line);
		free(r);
		return NULL;
	}
	free(line);
	r->sent = true;
	upstream_req_link(u, r);
	upstream_timer_rearm(u);
	return r;
}

/* ---- calls ------------------------------------------------------------------ */

void upstream_call_finish(struct upstream *u, struct req *r, int status, const json_t *result,
			  const char *reason)
{
	upstream_req_unlink(u, r);
	upstream_timer_rearm(u);
	r->cb(r->ctx, status, result, reason);
	upstream_req_free(r);
}

struct req *upstream_call_oldest(const struct upstream *u)
{
	for (struct req *r = u->head; r; r = r->next)
		if (r->kind == REQ_CALL && r->sent && !r->poll_at)
			return r;
	return NULL;
}

struct req *upstream_call_find(const struct upstream *u, uint64_t handle)
{
	for (struct req *r = u->head; r; r = r->next)
		if (r->kind == REQ_CALL && r->handle == handle)
			return r;
	return NULL;
}

int upstream_req_resend(struct upstream *u, struct req *r, const char *method, const json_t *params)
{
	char *line = NULL;
	size_t len;
	int rc;

	if ((rc = upstream_request_encode(u, u->next_id, method, params, &line, &len, NULL)) < 0)
		return rc;
	r->id = u->next_id++;
	r->method = method;
	r->sent = false;
	rc = tp_send(u, r, line, len, true);
	free(line);
	if (rc == 0)
		r->sent = true;
	return rc;
}

/* Fail every call, one at a time from the head, so a callback that cancels
 * another call or makes a new one sees a consistent list. */
void upstream_calls_fail(struct upstream *u, int status, const char *reason)
{
	for (;;) {
		struct req *r = u->head;

		while (r && r->kind != REQ_CALL)
			r = r->next;
		if (!r)
			return;
		upstream_call_finish(u, r, status, NULL, reason);
	}
}

/* Drop our own requests (handshake, list pages, listen): nobody waits. */
void upstream_reqs_drop(struct upstream *u)
{
	struct req *r = u->head, *next;

	for (; r; r = next) {
		next = r->next;
		if (r->kind != REQ_CALL) {
			upstream_req_unlink(u, r);
			upstream_req_free(r);
		}
	}
}

void upstream_dropped_end(struct upstream *u)
{
	for (;;) {
		struct req *r = u->head;

		while (r && !r->dropping)
			r = r->next;
		if (!r)
			return;
		upstream_call_finish(u, r, UPSTREAM_TOO_LARGE, NULL, UPSTREAM_REASON_TOO_LARGE);
	}
}
