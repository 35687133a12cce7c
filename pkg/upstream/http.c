/* http.c: the Streamable HTTP transport of the upstream client (see
 * upstream.h, transport.h, docs/upstream.md): every request of ours is a
 * POST whose response, JSON or an SSE stream, carries its answer; libcurl
 * runs on the loop (pkg/http/client.h). */
#define _GNU_SOURCE
#include "upstream/transport.h"
#include "upstream/headers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/client.h"
#include "http/sse.h"
#include "jsonrpc/jsonrpc.h"
#include "mcp/revision.h"

/* Calls whose POST is in flight at once; the others wait in the core. */
#define UP_HTTP_CALLS_MAX    32u
#define UP_HTTP_SMALL_BODY   (64u * 1024) /* an answer to a notification, a GET's events */
#define UP_HTTP_GET_RETRY_MS 2000u	  /* the legacy event stream, opened again after */
#define UP_HTTP_DELETE_MS    1000u	  /* DELETE of the session at shutdown */
#define UP_HTTP_RESUMES_MAX  3u		  /* resumptions of one request's stream */
#define UP_HTTP_RETRY_MAX_MS 10000u	  /* the longest retry a server may ask */
#define UP_HTTP_RETRY_DEF_MS 1000u

enum body_kind { BODY_NONE, BODY_JSON, BODY_SSE };

/* A message read from an SSE stream inside libcurl, delivered from the loop. */
struct qmsg {
	struct qmsg *next;
	size_t len;
	char buf[];
};

/* One request in flight: a POST (a request of ours, a notification, an
 * answer) or the legacy GET event stream. */
struct post {
	struct post *prev, *next;
	struct up_http *h;
	struct http_call *call;
	uint64_t id; /* the request it carries; 0: none */
	enum up_req_kind kind;
	bool is_get;
	bool call_req; /* a caller's call: counts against UP_HTTP_CALLS_MAX */
	enum body_kind body;
	char *json;
	size_t len, max;
	struct sse *sse;
	long status;
	const char *why;  /* set by on_head when it refused the response */
	bool gone;	  /* 404 with our session: the session is over */
	bool error_body;  /* a 4xx with JSON: its body may hold the JSON-RPC error */
	unsigned resumed; /* how many times this request's stream was resumed */
};

/* A legacy request whose SSE stream ended before its answer, with an event
 * id: resumed by a GET with Last-Event-ID once the server's retry time has
 * passed. */
struct resume {
	struct resume *next;
	uint64_t id;
	uint64_t at_ms;
	unsigned resumed;
	char last_id[SSE_ID_MAX + 1];
};

struct up_http {
	struct up_link link;
	struct http_client *client;
	char *url;
	char **headers; /* "Name: value" of the policy, filled; wiped when freed */
	size_t nheaders;
	char *ca_file;
	char *proxy;
	char *resolve[2]; /* localhost pinned to 127.0.0.1 */
	char sid[UPSTREAM_SID_MAX + 1];
	struct post *posts;
	size_t ncalls;
	struct post *get;
	bool get_refused; /* 405: the server has no such stream */
	struct loop_timer *get_timer;
	struct qmsg *qhead, *qtail;
	struct loop_task deliver;
	struct resume *resumes;
	struct loop_timer *resume_timer;
};

static void headers_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		upstream_header_free(v[i]);
	free(v);
}

/* ---- the server's session id ---------------------------------------------------- */

bool upstream_sid_ok(const char *sid)
{
	size_t n = 0;

	for (; sid[n]; n++)
		if ((unsigned char)sid[n] < 0x21 || (unsigned char)sid[n] > 0x7e ||
		    n >= UPSTREAM_SID_MAX)
			return false;
	return n > 0;
}

/* ---- delivering ------------------------------------------------------------------ */

static void queue_clear(struct up_http *h)
{
	while (h->qhead) {
		struct qmsg *m = h->qhead;

		h->qhead = m->next;
		free(m);
	}
	h->qtail = NULL;
}

/* The messages read inside libcurl, one at a time: a message may end the
 * run (the queue is then cleared) or start calls. */
static void deliver(struct up_http *h)
{
	while (h->qhead) {
		struct qmsg *m = h->qhead;

		h->qhead = m->next;
		if (!h->qhead)
			h->qtail = NULL;
		h->link.ev->message(h->link.core, m->buf, m->len);
		free(m);
	}
}

static void on_deliver(void *data)
{
	deliver(data);
}

static void on_event(void *ctx, const char *type, const char *data, size_t len, const char *last_id)
{
	struct post *p = ctx;
	struct up_http *h = p->h;
	struct qmsg *m;

	(void)last_id;
	/* Only "message" events carry JSON-RPC; an empty one is a priming
	 * event, or a keep-alive. */
	if (strcmp(type, "message") != 0 || len == 0)
		return;
	if (!(m = malloc(sizeof(*m) + len + 1)))
		return;
	m->next = NULL;
	m->len = len;
	memcpy(m->buf, data, len);
	m->buf[len] = '\0';
	if (h->qtail)
		h->qtail->next = m;
	else
		h->qhead = m;
	h->qtail = m;
	loop_next(p->h->link.loop, &h->deliver);
}

/* ---- responses ------------------------------------------------------------------- */

static void post_unlink(struct up_http *h, struct post *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else if (h->posts == p)
		h->posts = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->prev = p->next = NULL;
	if (p->call_req) {
		h->ncalls--;
		p->call_req = false;
	}
	if (h->get == p)
		h->get = NULL;
}

static void post_free(struct post *p)
{
	if (!p)
		return;
	sse_free(p->sse);
	free(p->json);
	free(p);
}

/* The media type of a Content-Type value, without parameters. */
static bool media_is(const char *v, const char *type)
{
	size_t n = strlen(type);

	if (!v)
		return false;
	while (*v == ' ' || *v == '\t')
		v++;
	return strncasecmp(v, type, n) == 0 && (v[n] == '\0' || v[n] == ';' || v[n] == ' ');
}

static int on_head(void *ctx, const struct http_head *hd)
{
	struct post *p = ctx;
	struct up_http *h = p->h;
	const char *ct = http_head_get(hd, "Content-Type");
	const char *sid = http_head_get(hd, "Mcp-Session-Id");
	struct sse_limits lim = {.event_max = p->max, .line_max = p->max + SSE_LINE_SLACK};

	p->status = hd->status;
	/* MCP says 404 for a session the server no longer knows; some servers
	 * (server-everything among them) say 400. Either way, with our session
	 * in the request, initialize again and send the call once more. */
	if ((hd->status == 404 || hd->status == 400) && h->sid[0] && !p->is_get &&
	    p->kind != REQ_INIT)
		return p->gone = true, p->why = "the server no longer knows the session", -ENOENT;
	if (hd->status >= 300 && hd->status < 400)
		return p->why = "a redirect (redirects are not followed)", -EPROTO;
	if (hd->status == 401 || hd->status == 403)
		return p->why = "the server refused our credentials (HTTP 401 or 403)", -EPROTO;
	if (hd->status == 202 && !p->id)
		return 0;
	/* 2026-07-28 sends a JSON-RPC error with its 4xx (an unsupported
	 * revision, a method not found): read it, within a small cap, for what
	 * it says; it answers only as an error. */
	if (hd->status >= 400 && hd->status < 500 && p->id && media_is(ct, "application/json")) {
		p->why = "the server answered with an HTTP error status";
		p->error_body = true;
		p->body = BODY_JSON;
		if (p->max > UP_HTTP_SMALL_BODY)
			p->max = UP_HTTP_SMALL_BODY;
		return 0;
	}
	if (hd->status != 200)
		return p->why = "the server answered with an HTTP error status", -EPROTO;
	if (p->kind == REQ_INIT && p->id && sid) {
		if (!upstream_sid_ok(sid))
			return p->why = "a session id that is not visible ASCII, or too long",
			       -EPROTO;
		snprintf(h->sid, sizeof(h->sid), "%s", sid);
	}
	if (media_is(ct, "text/event-stream")) {
		p->body = BODY_SSE;
		if (sse_new(&lim, on_event, p, &p->sse, NULL) < 0)
			return p->why = "out of memory", -ENOMEM;
		return 0;
	}
	if (media_is(ct, "application/json") && !p->is_get) {
		p->body = BODY_JSON;
		return 0;
	}
	if (!p->id)
		return 0; /* an answer to a notification: its body is not read */
	return p->why = "a Content-Type that is neither JSON nor an event stream", -EPROTO;
}

static int on_data(void *ctx, const char *buf, size_t len)
{
	struct post *p = ctx;

	if (p->body == BODY_SSE)
		return sse_feed(p->sse, buf, len) < 0 ? -EMSGSIZE : 0;
	if (p->body != BODY_JSON)
		return 0;
	if (len > p->max - p->len)
		return -EMSGSIZE;
	if (!p->json && !(p->json = malloc(p->max + 1)))
		return -ENOMEM;
	memcpy(p->json + p->len, buf, len);
	p->len += len;
	return 0;
}

static void post_start_get(struct up_http *h);

/* Is buf a JSON-RPC error answer (what a 4xx may carry)? */
static bool is_error_answer(const char *buf, size_t len)
{
	struct jsonrpc_msg m = {0};
	bool yes = jsonrpc_msg_parse(buf, len, UP_HTTP_SMALL_BODY, &m, NULL) == 0 &&
		   m.kind == JSONRPC_ERROR;

	jsonrpc_msg_clear(&m);
	return yes;
}

static void get_done(struct up_http *h, struct post *p, int rc)
{
	if (p->status == 405 || (rc == 0 && p->body != BODY_SSE)) {
		h->get_refused = true;
		UP_LOG(h->link.name, LOG_DEBUG,
		       "no event stream (HTTP %ld): list changes go unheard", p->status);
		return;
	}
	if (h->link.view->run == UP_RUN_READY)
		loop_timer_set(h->get_timer, UP_HTTP_GET_RETRY_MS);
}

static void resume_rearm(struct up_http *h);

static void resumes_drop_one(struct up_http *h, struct resume *one)
{
	for (struct resume **pp = &h->resumes; *pp; pp = &(*pp)->next)
		if (*pp == one) {
			*pp = one->next;
			return;
		}
}

static void resume_rearm(struct up_http *h)
{
	uint64_t first = UINT64_MAX, now = loop_now_ms();

	for (struct resume *rs = h->resumes; rs; rs = rs->next)
		if (rs->at_ms < first)
			first = rs->at_ms;
	loop_timer_set(h->resume_timer, first == UINT64_MAX ? 0 : first > now ? first - now : 1);
}

static void resumes_drop(struct up_http *h, uint64_t id, bool all)
{
	for (struct resume **pp = &h->resumes; *pp;) {
		struct resume *rs = *pp;

		if (all || rs->id == id) {
			*pp = rs->next;
			free(rs);
		} else {
			pp = &rs->next;
		}
	}
}

static int post_start(struct up_http *h, const struct up_req_info *r, bool get, const char *buf,
		      size_t len, const char *last_id);

/* The resumptions that are due: a GET each, with Last-Event-ID. */
static void on_resume_timer(void *data)
{
	struct up_http *h = data;
	uint64_t now = loop_now_ms();

	for (;;) {
		struct resume *rs = h->resumes;
		struct up_req_info r;
		bool pending;
		struct post *p;

		while (rs && rs->at_ms > now)
			rs = rs->next;
		if (!rs)
			break;
		resumes_drop_one(h, rs);
		pending = h->link.ev->pending(h->link.core, rs->id, &r);
		if (pending && post_start(h, &r, true, NULL, 0, rs->last_id) == 0) {
			p = h->posts; /* the one just started */
			p->resumed = rs->resumed;
		} else if (pending) {
			h->link.ev->refused(h->link.core, rs->id,
					    "its stream could not be resumed");
		}
		free(rs);
	}
	resume_rearm(h);
}

/* Resume p's stream later (legacy, with our session, an event id that may
 * be sent back, and resumptions left): 0, else -1 (the request fails). */
static int resume_add(struct up_http *h, struct post *p)
{
	const char *id = sse_last_id(p->sse);
	uint64_t retry = sse_retry_ms(p->sse);
	struct resume *rs;

	if (h->link.view->modern || !h->sid[0] || !*id || !upstream_sid_ok(id) ||
	    p->resumed >= UP_HTTP_RESUMES_MAX || !(rs = calloc(1, sizeof(*rs))))
		return -1;
	rs->id = p->id;
	rs->resumed = p->resumed + 1;
	snprintf(rs->last_id, sizeof(rs->last_id), "%s", id);
	retry = retry ? retry : UP_HTTP_RETRY_DEF_MS;
	rs->at_ms = loop_now_ms() + (retry > UP_HTTP_RETRY_MAX_MS ? UP_HTTP_RETRY_MAX_MS : retry);
	rs->next = h->resumes;
	h->resumes = rs;
	UP_LOG(h->link.name, LOG_DEBUG,
	       "request %llu: its stream ended before its answer; resumed in %llu ms",
	       (unsigned long long)p->id, (unsigned long long)(rs->at_ms - loop_now_ms()));
	resume_rearm(h);
	return 0;
}

/* Did the failure say the server cannot be reached (rather than a bad
 * answer to one request)? */
static bool unreachable(int rc)
{
	return rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ETIMEDOUT || rc == -EIO ||
	       rc == -EPROTO;
}

/* Request p carried ended without its answer (rc, why: libcurl's word):
 * the core is told what became of it. */
static void answer_missed(struct up_http *h, const struct post *p, enum up_req_kind kind, int rc,
			  const char *why)
{
	void *core = h->link.core;

	if (p->gone && kind == REQ_CALL)
		h->link.ev->session_over(core, p->id);
	else if (p->gone)
		h->link.ev->lost(core, p->why);
	else if (rc == -EMSGSIZE)
		h->link.ev->too_large(core, p->id);
	else if (p->why)
		h->link.ev->refused(core, p->id, p->why);
	else if (rc < 0 && unreachable(rc))
		h->link.ev->lost(core, why);
	else
		h->link.ev->refused(core, p->id,
				    rc < 0 ? why : "the response ended without an answer");
}

static void on_done(void *ctx, int rc, const char *why)
{
	struct post *p = ctx;
	struct up_http *h = p->h;
	uint64_t epoch = h->link.view->epoch;
	struct up_req_info r;

	post_unlink(h, p);
	p->call = NULL;
	deliver(h);
	if (h->link.view->epoch != epoch) {
		post_free(p);
		return;
	}
	if (p->is_get) {
		get_done(h, p, rc);
	} else if (rc == 0 && p->body == BODY_JSON && p->len && p->error_body) {
		if (is_error_answer(p->json, p->len))
			h->link.ev->message(h->link.core, p->json, p->len);
	} else if (rc == 0 && p->body == BODY_JSON && p->len) {
		h->link.ev->message(h->link.core, p->json, p->len);
	} else if (rc == 0 && p->body == BODY_SSE) {
		sse_end(p->sse);
		deliver(h);
	}
	/* A notification or an answer of ours that failed is only lost: the
	 * next request finds out whether the server is there. */
	if (h->link.view->epoch != epoch || p->is_get || !p->id) {
		if (!p->is_get && rc < 0 && h->link.view->epoch == epoch)
			UP_LOG(h->link.name, LOG_DEBUG, "a notification of ours was not taken: %s",
			       p->why ? p->why : why);
		post_free(p);
		h->link.ev->flush(h->link.core);
		return;
	}
	if (h->link.ev->pending(h->link.core, p->id, &r)) {
		if (rc == 0 && p->body == BODY_SSE && resume_add(h, p) == 0) {
			post_free(p);
			return;
		}
		answer_missed(h, p, r.kind, rc, why);
	}
	post_free(p);
	if (h->link.view->epoch == epoch)
		h->link.ev->flush(h->link.core);
}

/* Our header lines of a request of this run, into o. */
static void own_headers(struct up_http *h, const struct up_req_info *r, bool get, struct up_hdrs *o)
{
	char *name;

	upstream_hdrs_add(o, "Accept",
			  get ? "text/event-stream" : "application/json, text/event-stream");
	if (!get)
		upstream_hdrs_add(o, "Content-Type", "application/json");
	if (r && r->traceparent)
		upstream_hdrs_add(o, "traceparent", r->traceparent);
	if (h->link.view->modern) {
		upstream_hdrs_add(o, "MCP-Protocol-Version",
				  h->link.view->version[0]
					  ? h->link.view->version
					  : mcp_revision_latest(MCP_ERA_MODERN)->name);
		if (r)
			upstream_hdrs_add(o, "Mcp-Method", r->method);
		/* Mcp-Name: a call's tool, a read's uri; x-mcp-header marks
		 * are a tool's alone. */
		if (r && r->kind == REQ_CALL) {
			const char *what = r->name;

			name = what ? upstream_header_value(what, strlen(what)) : NULL;
			upstream_hdrs_add(o, "Mcp-Name", name);
			free(name);
			if (r->tool)
				upstream_param_headers_add(
					h->link.ev->tool_schema(h->link.core, r->tool), r->args, o);
		}
		return;
	}
	if (h->link.view->version[0] && (!r || r->kind != REQ_INIT))
		upstream_hdrs_add(o, "MCP-Protocol-Version", h->link.view->version);
	if (h->sid[0] && (!r || r->kind != REQ_INIT))
		upstream_hdrs_add(o, "Mcp-Session-Id", h->sid);
}

/* Every header line of a request: ours (in o), then the policy's. A new
 * NULL-ended array of borrowed lines, or NULL. */
static const char **lines_make(struct up_http *h, const struct up_req_info *r, bool get,
			       const char *last_id, struct up_hdrs *o)
{
	const char **lines;
	size_t n = 0;

	own_headers(h, r, get, o);
	if (last_id)
		upstream_hdrs_add(o, "Last-Event-ID", last_id);
	if (o->bad || !(lines = calloc(o->n + h->nheaders + 1, sizeof(*lines))))
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		lines[n++] = o->v[i];
	for (size_t i = 0; i < h->nheaders; i++)
		lines[n++] = h->headers[i];
	return lines;
}

static int post_start(struct up_http *h, const struct up_req_info *r, bool get, const char *buf,
		      size_t len, const char *last_id)
{
	struct up_hdrs own = {0};
	const char **lines = lines_make(h, r, get, last_id, &own);
	struct post *p = calloc(1, sizeof(*p));
	struct http_call_hooks hooks = {.on_head = on_head, .on_data = on_data, .done = on_done};
	struct http_request req = {
		.method = get ? "GET" : "POST",
		.url = h->url,
		.body = buf,
		.body_len = len,
		.ca_file = h->ca_file,
		.proxy = h->proxy,
		.resolve = h->resolve[0] ? (const char *const *)h->resolve : NULL,
		.connect_timeout_ms = (unsigned)h->link.init_timeout_ms,
	};
	int rc;

	if (!lines || !p) {
		free(lines);
		free(p);
		rc = own.bad && own.n < UP_HTTP_OWN_MAX ? -E2BIG : -ENOMEM;
		upstream_hdrs_free(&own);
		return rc;
	}
	req.headers = lines;
	p->h = h;
	p->is_get = get && !last_id; /* a resumed request's GET is that request's */
	if (r) {
		p->id = r->id;
		p->kind = r->kind;
		p->call_req = r->kind == REQ_CALL;
		p->max = r->cap;
		/* A stream may carry notifications beside its answer; its whole
		 * is capped too. A listen stream lives long: past its cap it is
		 * opened again. */
		req.body_max = p->max * 2;
	} else {
		p->max = UP_HTTP_SMALL_BODY;
		req.body_max = get ? APPL_UPSTREAM_MESSAGE_MAX : UP_HTTP_SMALL_BODY;
		/* Nobody's deadline covers a notification or an answer of ours:
		 * a server that never answers it must not hold its connection. */
		if (!get)
			req.timeout_ms = (unsigned)h->link.init_timeout_ms;
	}
	rc = http_call_start(h->client, &req, &hooks, p, &p->call, NULL);
	free(lines);
	upstream_hdrs_free(&own);
	if (rc < 0) {
		free(p);
		return rc;
	}
	p->next = h->posts;
	if (h->posts)
		h->posts->prev = p;
	h->posts = p;
	if (p->call_req)
		h->ncalls++;
	if (p->is_get)
		h->get = p;
	return 0;
}

static int ht_send(void *t, const struct up_req_info *r, const char *buf, size_t len, bool call)
{
	struct up_http *h = t;

	if (h->link.view->run == UP_RUN_STOPPED)
		return -EPIPE;
	/* 2026-07-28 has nothing that goes from client to server but requests:
	 * no notifications, and no requests of the server to answer. */
	if (!r && h->link.view->modern)
		return 0;
	if (call && h->ncalls >= UP_HTTP_CALLS_MAX)
		return -ENOBUFS;
	return post_start(h, r, false, buf, len, NULL);
}

static struct post *post_of(struct up_http *h, uint64_t id)
{
	for (struct post *p = h->posts; p; p = p->next)
		if (p->id == id && !p->is_get)
			return p;
	return NULL;
}

/* 2026-07-28: closing the response is the cancellation. Before it, a
 * disconnect is not one: notifications/cancelled goes as its own POST. */
static void ht_abandon(void *t, uint64_t id, const char *reason)
{
	struct up_http *h = t;
	struct post *p = post_of(h, id);

	if (p) {
		http_call_cancel(p->call);
		post_unlink(h, p);
		post_free(p);
	}
	resumes_drop(h, id, false);
	if (!h->link.view->modern)
		h->link.ev->cancelled(h->link.core, id, reason);
}

static void post_start_get(struct up_http *h)
{
	if (h->link.view->run != UP_RUN_READY || h->link.view->modern || h->get || h->get_refused ||
	    !h->sid[0])
		return;
	if (post_start(h, NULL, true, NULL, 0, NULL) < 0)
		loop_timer_set(h->get_timer, UP_HTTP_GET_RETRY_MS);
}

static void on_get_timer(void *data)
{
	post_start_get(data);
}

/* The legacy era's notifications come on a GET stream of the session. */
static void ht_ready(void *t)
{
	post_start_get(t);
}

static int ht_open(void *t, struct appl_err *err)
{
	struct up_http *h = t;

	h->sid[0] = '\0';
	h->get_refused = false;
	if (!h->client && http_client_new(h->link.loop, &h->client, err) < 0)
		return err ? err->code : -ENOMEM;
	return 0;
}

/* DELETE ends the session (legacy): at shutdown, once, briefly. */
static void session_delete(struct up_http *h)
{
	struct up_hdrs own = {0};
	const char **lines = lines_make(h, NULL, true, NULL, &own);
	struct http_request req = {
		.method = "DELETE",
		.url = h->url,
		.ca_file = h->ca_file,
		.proxy = h->proxy,
		.resolve = h->resolve[0] ? (const char *const *)h->resolve : NULL,
		.connect_timeout_ms = UP_HTTP_DELETE_MS,
		.timeout_ms = UP_HTTP_DELETE_MS,
		.body_max = UP_HTTP_SMALL_BODY,
	};
	long status;

	if (lines) {
		req.headers = lines;
		if (http_request_once(&req, &status, NULL) == 0)
			UP_LOG(h->link.name, LOG_DEBUG, "session ended (DELETE: HTTP %ld)", status);
	}
	free(lines);
	upstream_hdrs_free(&own);
}

static void ht_close(void *t, bool block)
{
	struct up_http *h = t;

	if (block && h->link.view->closing && !h->link.view->modern && h->sid[0])
		session_delete(h);
	while (h->posts) {
		struct post *p = h->posts;

		http_call_cancel(p->call);
		post_unlink(h, p);
		post_free(p);
	}
	h->ncalls = 0;
	h->get = NULL;
	queue_clear(h);
	loop_task_cancel(h->link.loop, &h->deliver);
	loop_timer_set(h->get_timer, 0);
	resumes_drop(h, 0, true);
	loop_timer_set(h->resume_timer, 0);
	h->sid[0] = '\0';
}

static void ht_destroy(void *t)
{
	struct up_http *h = t;

	if (!h)
		return;
	http_client_free(h->client);
	loop_timer_free(h->get_timer);
	loop_timer_free(h->resume_timer);
	headers_free(h->headers, h->nheaders);
	free(h->url);
	free(h->ca_file);
	free(h->proxy);
	free(h->resolve[0]);
	free(h);
}

/* 2026-07-28: a tool whose x-mcp-header marks cannot be honoured is not
 * offered (MCP: the client excludes it). */
static const char *ht_tool_check(const void *t, const json_t *tool)
{
	const struct up_http *h = t;

	return h->link.view->modern
		       ? upstream_param_headers_check(json_object_get(tool, "inputSchema"))
		       : NULL;
}

/* ---- making one ---------------------------------------------------------------- */

/* http://localhost[:port]/...: the name is pinned to 127.0.0.1, so no
 * resolver (nor /etc/hosts) decides where plain HTTP goes. */
static int localhost_pin(struct up_http *h)
{
	static const char pre[] = "http://localhost";
	const char *rest = h->url + sizeof(pre) - 1;
	long port = 80;
	char *end;

	if (strncasecmp(h->url, pre, sizeof(pre) - 1) != 0)
		return 0;
	if (*rest == ':') {
		port = strtol(rest + 1, &end, 10);
		if (end == rest + 1 || port < 1 || port > 65535)
			return -EINVAL;
	} else if (*rest && *rest != '/') {
		return 0; /* localhost.example: a name like any other (refused by the policy) */
	}
	if (asprintf(&h->resolve[0], "localhost:%ld:127.0.0.1", port) < 0) {
		h->resolve[0] = NULL;
		return -ENOMEM;
	}
	return 0;
}

static int ht_make(const struct up_link *link, const struct policy_server *srv,
		   const struct upstream_opts *o, void **t, struct appl_err *err)
{
	struct up_http *h = calloc(1, sizeof(*h));
	struct appl_err le = {0};

	if (!h)
		return appl_err_set(err, -ENOMEM, "out of memory");
	*t = h;
	h->link = *link;
	loop_task_init(&h->deliver, on_deliver, h);
	if (!(h->get_timer = loop_timer_new(h->link.loop, on_get_timer, h, err)) ||
	    !(h->resume_timer = loop_timer_new(h->link.loop, on_resume_timer, h, err)))
		return err ? err->code : -ENOMEM;
	h->url = strdup(srv->url);
	h->ca_file = srv->ca_file ? strdup(srv->ca_file) : NULL;
	h->proxy = srv->proxy ? strdup(srv->proxy) : NULL;
	h->headers = calloc(srv->nheaders + 1, sizeof(*h->headers));
	if (!h->url || !h->headers || (srv->ca_file && !h->ca_file) || (srv->proxy && !h->proxy))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < srv->nheaders; i++) {
		if (!(h->headers[i] = upstream_header_fill(o ? o->secrets : NULL, srv->name,
							   &srv->headers[i], err)))
			return err ? err->code : -EINVAL;
		h->nheaders++;
	}
	/* A CA file that cannot be read would fail every request: refused at
	 * start instead. */
	if (h->ca_file && access(h->ca_file, R_OK) < 0)
		return appl_err_errno(err, -errno, errno, "servers.%s.ca_file %s", srv->name,
				      h->ca_file);
	if (localhost_pin(h) < 0)
		return appl_err_set(err, -EINVAL, "servers.%s.url: a bad port", srv->name);
	/* libcurl is loaded at start, not at the first request, so a machine
	 * without it is told at once. */
	if (http_client_load(&le) < 0)
		return appl_err_set(err, le.code, "servers.%s: %s", srv->name, le.msg);
	return 0;
}

const struct upstream_transport upstream_http_transport = {
	.kind = "http",
	.probe = true,
	.make = ht_make,
	.open = ht_open,
	.send = ht_send,
	.abandon = ht_abandon,
	.close = ht_close,
	.ready = ht_ready,
	.tool_check = ht_tool_check,
	.destroy = ht_destroy,
};
