/* http.c: MCP Streamable HTTP over the front door (see http.h). */
#include "mcp/http.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/http_check.h"

#define SID_HEADER "Mcp-Session-Id"

/* The largest answer goes out as one event ("event: message\ndata: ",
 * the line, two newlines): a stream must be able to queue it. */
_Static_assert(APPL_RPC_ANSWER_MAX + 32 <= HTTP_FRONT_STREAM_MAX,
	       "an answer must fit an HTTP stream's queue");

struct hsess;

/* A POSTed request waiting for its answer. */
struct pending {
	struct pending *next;
	struct hsess *hs;
	struct http_req *r;
	json_t *id;   /* a request's id; NULL for a POST that is no request */
	json_t *echo; /* the id such a POST carries, when valid: an error about it is its answer */
	bool stream;  /* may be answered on an SSE stream (tools/call, subscriptions/listen,
			 tasks/result) */
	bool opened;  /* the stream is open: the first message about the request opened it */
	bool init;    /* initialize: the answer names the session */
	bool modern;  /* a 2026-07-28 request: its error answers get their HTTP status */
};

/* What a front-door request of ours is: a pending POST, or a GET stream. */
struct tag {
	struct pending *p; /* NULL: the GET stream of hs */
	struct hsess *hs;
};

/* One session core: a legacy session (sid set), or a principal's own for
 * 2026-07-28 requests (sid ""). */
struct hsess {
	struct hsess *next;
	struct mcp_http *h;
	struct mcp_session *s;
	const struct mcp_principal *p;
	char sid[2 * MCP_SID_BYTES + 1];
	struct http_req *get; /* its GET stream */
	struct tag get_tag;
	struct pending *pend;
	struct pending *current; /* the request being fed: an answer without an id is its */
	struct loop_timer *idle;
	bool dead; /* ended: freed at the end of the round */
};

struct mcp_http {
	struct mcp_server *srv;
	struct loop *loop;
	struct mcp_http_config cfg;
	struct http_front *front;
	struct hsess *sessions;
	struct loop_task reap; /* sessions that ended */
	bool draining;	       /* mcp_http_drain */
};

/* ---- answers -------------------------------------------------------------------- */

static void tag_free(struct http_req *r)
{
	free(http_req_data(r));
	http_req_set_data(r, NULL);
}

static struct tag *tag_new(struct http_req *r, struct hsess *hs, struct pending *p)
{
	struct tag *t = calloc(1, sizeof(*t));

	if (t) {
		t->hs = hs;
		t->p = p;
		http_req_set_data(r, t);
	}
	return t;
}

static void event_send(struct http_req *r, const char *line, size_t len)
{
	size_t n = len && line[len - 1] == '\n' ? len - 1 : len;
	char *ev = malloc(n + 32);
	int k;

	if (!ev)
		return;
	k = snprintf(ev, 32, "event: message\ndata: ");
	memcpy(ev + k, line, n);
	memcpy(ev + k + n, "\n\n", 2);
	http_req_stream_send(r, ev, (size_t)k + n + 2);
	free(ev);
}

static void pending_unlink(struct pending *p)
{
	for (struct pending **pp = &p->hs->pend; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	if (p->hs->current == p)
		p->hs->current = NULL;
}

/* Forget p's request before it is answered: after the answer the front
 * owns it. */
static void pending_detach(struct pending *p)
{
	if (p->r)
		tag_free(p->r);
}

static void pending_free(struct pending *p)
{
	json_decref(p->id);
	json_decref(p->echo);
	free(p);
}

/* A pending answer for r (id copied; NULL for what is no request), on hs's
 * list. NULL when out of memory. */
static struct pending *pending_new(struct hsess *hs, struct http_req *r, const json_t *id)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p || (id && !(p->id = jsonrpc_id_copy(id))) || !tag_new(r, hs, p)) {
		if (p)
			json_decref(p->id);
		free(p);
		return NULL;
	}
	p->hs = hs;
	p->r = r;
	p->next = hs->pend;
	hs->pend = p;
	return p;
}

/* The headers of an answer naming hs's session (none for the sessions of
 * 2026-07-28 requests), written in buf: a NULL-ended list in hdr. */
static const char *const *sid_headers(const struct hsess *hs, char *buf, size_t cap,
				      const char *hdr[2])
{
	hdr[0] = hdr[1] = NULL;
	if (hs->sid[0]) {
		snprintf(buf, cap, SID_HEADER ": %s", hs->sid);
		hdr[0] = buf;
	}
	return hdr;
}

/* A message about p's request (progress, a question) on its stream, which
 * the first one opens (line NULL: only open it). An answer that comes
 * before any goes out as JSON, with the status its error may call for. */
static void pending_event(struct pending *p, const char *line, size_t len)
{
	const char *hdr[2];
	char sid[64];

	if (!p->opened) {
		if (http_req_stream(p->r, 200, sid_headers(p->hs, sid, sizeof(sid), hdr)) < 0)
			return;
		p->opened = true;
	}
	if (line)
		event_send(p->r, line, len);
}

/* The HTTP status of p's JSON answer. A POST that is no request is
 * answered only when it was not accepted (bytes that are no message, a bad
 * notification or response): an error status whatever the code, as both
 * revisions require; else it gets 202 with no body. */
static unsigned pending_status(const struct pending *p, const json_t *answer)
{
	unsigned st = mcp_answer_status(answer, p->modern);

	return !p->id && st < 400 ? 400 : st;
}

/* The answer to p (answer is line parsed): the end of its stream, or its
 * JSON reply. */
static void pending_answer(struct pending *p, const json_t *answer, const char *line, size_t len)
{
	static const char *const none[] = {NULL};
	const char *hdr[2];
	char sid[64];

	pending_unlink(p);
	pending_detach(p);
	if (p->r && p->opened) {
		event_send(p->r, line, len);
		http_req_stream_end(p->r);
	} else if (p->r) /* only initialize's answer, and a stream's, name the session */
		http_req_reply(p->r, pending_status(p, answer), "application/json", line,
			       len && line[len - 1] == '\n' ? len - 1 : len,
			       p->init || p->stream ? sid_headers(p->hs, sid, sizeof(sid), hdr)
						    : none);
	pending_free(p);
}

static struct pending *pending_find(struct hsess *hs, const json_t *id)
{
	for (struct pending *p = hs->pend; p; p = p->next)
		if (id && jsonrpc_id_equal(p->id, id))
			return p;
	return NULL;
}

/* What is about no request: the GET stream, when open; else dropped. */
static void to_stream(struct hsess *hs, const char *line, size_t len)
{
	if (hs->get)
		event_send(hs->get, line, len);
}

/* Whether an error with id answers the POST being fed (cur): one refused
 * before its id could be read (id null), or one that is no request and
 * carries id (a message with neither method nor result: an invalid
 * request, not something to accept with 202). */
static bool about_current(const struct pending *cur, const json_t *id)
{
	return cur &&
	       (json_is_null(id) || (!cur->id && cur->echo && jsonrpc_id_equal(cur->echo, id)));
}

static int t_send(void *t, char *line, size_t len)
{
	struct hsess *hs = t;
	json_t *v = json_loadb(line, len, 0, NULL);
	const json_t *id = json_object_get(v, "id");
	bool answer = v && (json_object_get(v, "result") || json_object_get(v, "error")) &&
		      !json_object_get(v, "method");
	struct pending *p = answer ? pending_find(hs, id) : NULL;

	if (!p && answer && json_object_get(v, "error") && about_current(hs->current, id))
		p = hs->current;
	if (p)
		pending_answer(p, v, line, len);
	else
		to_stream(hs, line, len);
	json_decref(v);
	free(line);
	return 0;
}

static int t_send_for(void *t, const json_t *related, char *line, size_t len)
{
	struct hsess *hs = t;
	struct pending *p = pending_find(hs, related);

	if (p && p->stream && p->r)
		pending_event(p, line, len);
	else
		to_stream(hs, line, len);
	free(line);
	return 0;
}

/* ---- sessions ------------------------------------------------------------------- */

static void hsess_end(struct hsess *hs, const char *why);

static void t_close(void *t, const char *why)
{
	hsess_end(t, why);
}

static void on_idle(void *data)
{
	struct hsess *hs = data;

	if (hs->pend || hs->get) { /* in use: idle counts from its last request */
		loop_timer_set(hs->idle, hs->h->cfg.idle_ms);
		return;
	}
	log_line(LOG_INFO, NULL, "%s: session ended: idle for %u s", hs->p->client,
		 hs->h->cfg.idle_ms / 1000);
	hsess_end(hs, "idle");
}

static struct hsess *hsess_new(struct mcp_http *h, const struct mcp_principal *p, bool legacy)
{
	struct hsess *hs = calloc(1, sizeof(*hs));
	struct mcp_transport t = {.send = t_send, .close = t_close, .send_for = t_send_for};
	struct appl_err err = {0};
	unsigned char raw[MCP_SID_BYTES];

	if (!hs)
		return NULL;
	hs->h = h;
	hs->p = p;
	t.t = hs;
	if (legacy) {
		randombytes_buf(raw, sizeof(raw));
		sodium_bin2hex(hs->sid, sizeof(hs->sid), raw, sizeof(raw));
		if (!(hs->idle = loop_timer_new(h->loop, on_idle, hs, &err)) ||
		    loop_timer_set(hs->idle, h->cfg.idle_ms) < 0) {
			loop_timer_free(hs->idle);
			free(hs);
			return NULL;
		}
	}
	if (!(hs->s = mcp_session_new(h->srv, &t, p, &err))) {
		loop_timer_free(hs->idle);
		free(hs);
		return NULL;
	}
	hs->next = h->sessions;
	h->sessions = hs;
	return hs;
}

/* End hs now (its runs cancelled, its requests answered 404 or cut), and
 * free it at the end of the round, outside the session's own callbacks. */
static void hsess_end(struct hsess *hs, const char *why)
{
	if (hs->dead)
		return;
	hs->dead = true;
	(void)why;
	mcp_session_ended(hs->s, why);
	while (hs->pend) {
		struct pending *p = hs->pend;

		pending_unlink(p);
		pending_detach(p);
		if (p->r && p->stream)
			http_req_stream_end(p->r);
		else if (p->r)
			http_req_reply(p->r, 404, "text/plain", "session ended\n", 14, NULL);
		pending_free(p);
	}
	if (hs->get) {
		http_req_stream_end(hs->get);
		http_req_set_data(hs->get, NULL);
		hs->get = NULL;
	}
	loop_defer(hs->h->loop, &hs->h->reap);
}

static void hsess_free(struct hsess *hs)
{
	mcp_session_free(hs->s);
	loop_timer_free(hs->idle);
	free(hs);
}

static void on_reap(void *data)
{
	struct mcp_http *h = data;

	for (struct hsess **ph = &h->sessions; *ph;) {
		struct hsess *hs = *ph;

		if (!hs->dead) {
			ph = &hs->next;
			continue;
		}
		*ph = hs->next;
		hsess_free(hs);
	}
}

static struct hsess *legacy_find(struct mcp_http *h, const char *sid)
{
	for (struct hsess *hs = h->sessions; hs; hs = hs->next)
		if (!hs->dead && hs->sid[0] && strlen(sid) == strlen(hs->sid) &&
		    sodium_memcmp(hs->sid, sid, strlen(sid)) == 0)
			return hs;
	return NULL;
}

static struct hsess *own_find(struct mcp_http *h, const struct mcp_principal *p)
{
	for (struct hsess *hs = h->sessions; hs; hs = hs->next)
		if (!hs->dead && !hs->sid[0] && hs->p == p)
			return hs;
	return hsess_new(h, p, false);
}

static unsigned legacy_count(const struct mcp_http *h, const struct mcp_principal *p)
{
	unsigned n = 0;

	for (const struct hsess *hs = h->sessions; hs; hs = hs->next)
		n += !hs->dead && hs->sid[0] && hs->p == p;
	return n;
}

/* ---- requests --------------------------------------------------------------------- */

static void plain(struct http_req *r, unsigned status, const char *text)
{
	http_req_reply(r, status, "text/plain", text, strlen(text), NULL);
}

/* The session a request names: 404 (answered, NULL) when it is unknown,
 * ended, or another principal's. */
static struct hsess *named(struct mcp_http *h, struct http_req *r, const struct mcp_principal *p,
			   const char *sid)
{
	struct hsess *hs = legacy_find(h, sid);

	if (!hs || hs->p != p) {
		plain(r, 404, "no such session\n");
		return NULL;
	}
	loop_timer_set(hs->idle, h->cfg.idle_ms);
	return hs;
}

static void on_get(struct mcp_http *h, struct http_req *r, const struct mcp_principal *p,
		   const char *sid)
{
	struct hsess *hs;

	if (!sid) {
		plain(r, 405, "no stream without a session\n");
		return;
	}
	if (!(hs = named(h, r, p, sid)))
		return;
	if (hs->get) {
		plain(r, 409, "the session's stream is open already\n");
		return;
	}
	if (http_req_stream(r, 200, NULL) < 0) {
		plain(r, 500, "out of memory\n");
		return;
	}
	hs->get = r;
	hs->get_tag.hs = hs;
	http_req_set_data(r, &hs->get_tag);
}

/* A refusal of the POST: a JSON-RPC error (with the request's id) when
 * the verdict has a code, else plain text. */
static void refused(struct http_req *r, const json_t *body, const struct mcp_post_verdict *vd)
{
	const json_t *id = json_object_get(body, "id");
	json_t *e;
	char *text;

	if (!vd->code) {
		char line[sizeof(vd->msg) + 1];

		snprintf(line, sizeof(line), "%s\n", vd->msg);
		plain(r, vd->status, line);
		return;
	}
	e = json_pack("{ss sO s{si ss}}", "jsonrpc", "2.0", "id",
		      jsonrpc_id_valid(id) ? (json_t *)id : json_null(), "error", "code", vd->code,
		      "message", vd->msg);
	text = e ? json_dumps(e, JSON_COMPACT) : NULL;
	if (text)
		http_req_reply(r, vd->status, "application/json", text, strlen(text), NULL);
	else
		plain(r, 500, "out of memory\n");
	free(text);
	json_decref(e);
}

/* The session an admitted POST goes to, by its kind (named, a new legacy
 * one, or the principal's own 2026-07-28 core); NULL when r was answered
 * instead. */
static struct hsess *post_session(struct mcp_http *h, struct http_req *r,
				  const struct mcp_principal *p, const char *sid,
				  enum mcp_post_kind kind)
{
	struct hsess *hs;

	if (kind == MCP_POST_SESSION)
		return named(h, r, p, sid);
	if (kind == MCP_POST_INIT && legacy_count(h, p) >= h->cfg.sessions_per_principal) {
		log_line(LOG_WARN, NULL, "%s: refused a session: %u open already", p->client,
			 h->cfg.sessions_per_principal);
		http_req_reply(r, 503, "text/plain", "too many sessions\n", 18,
			       (const char *const[]){"Retry-After: 10", NULL});
		return NULL;
	}
	if (!(hs = kind == MCP_POST_INIT ? hsess_new(h, p, true) : own_find(h, p)))
		plain(r, 503, "out of memory\n");
	return hs;
}

/* While draining: whether body asks for new work (mcp_http_drain): a
 * retry resumes a run only when its state names one parked here (with a
 * cluster key, another replica's state would be replayed here anew). */
static bool new_work(struct mcp_http *h, const json_t *body, const char *method)
{
	const json_t *state = json_object_get(json_object_get(body, "params"), "requestState");

	if (strcmp(method, "initialize") == 0)
		return true;
	return strcmp(method, "tools/call") == 0 &&
	       !(json_is_string(state) && mcp_server_state_here(h->srv, json_string_value(state),
								json_string_length(state)));
}

static void on_post(struct mcp_http *h, struct http_req *r, const struct mcp_principal *p,
		    const char *sid)
{
	size_t len;
	const char *body = http_req_body(r, &len);
	json_t *v = json_loadb(body, len, 0, NULL);
	const char *method = json_string_value(json_object_get(v, "method"));
	const json_t *id = json_object_get(v, "id");
	/* an id that is no valid one makes the message the session's invalid
	 * request, answered with id null */
	bool request = method && jsonrpc_id_valid(id);
	struct mcp_post in = {.protocol_version = http_req_header(r, "MCP-Protocol-Version"),
			      .method = http_req_header(r, "Mcp-Method"),
			      .name = http_req_header(r, "Mcp-Name"),
			      .session = sid,
			      .body = v,
			      .raw = body,
			      .raw_len = len};
	struct mcp_post_verdict vd;
	struct hsess *hs;
	struct pending *pd;

	mcp_post_check(&in, &vd);
	if (vd.status) {
		refused(r, v, &vd);
		hs = NULL;
	} else if (h->draining && request && new_work(h, v, method)) {
		http_req_reply(r, 503, "text/plain", "draining\n", 9,
			       (const char *const[]){"Retry-After: 1", NULL});
		hs = NULL;
	} else
		hs = post_session(h, r, p, sid, vd.kind);
	if (!hs) {
		json_decref(v);
		return;
	}
	/* A request is answered by the session; a notification or a response
	 * it takes gets 202. What it refuses (bytes that are no message, a
	 * message that is neither request, notification nor response) gets
	 * the session's error, id null or the message's own, with 400
	 * (about_current, pending_status). */
	if (!(pd = pending_new(hs, r, request ? id : NULL)) ||
	    (!request && jsonrpc_id_valid(id) && !(pd->echo = jsonrpc_id_copy(id)))) {
		if (pd) {
			pending_unlink(pd);
			pending_detach(pd);
			pending_free(pd);
		}
		plain(r, 500, "out of memory\n");
		json_decref(v);
		return;
	}
	pd->modern = vd.kind == MCP_POST_MODERN;
	if (request) {
		pd->init = vd.kind == MCP_POST_INIT;
		/* tasks/result waits for its task, and carries its questions */
		pd->stream = strcmp(method, "tools/call") == 0 ||
			     strcmp(method, "subscriptions/listen") == 0 ||
			     strcmp(method, "tasks/result") == 0;
	}
	hs->current = pd;
	mcp_session_input(hs->s, body, len);
	if (hs->current == pd) { /* not answered yet */
		hs->current = NULL;
		if (!request) {
			pending_unlink(pd);
			pending_detach(pd);
			pending_free(pd);
			plain(r, 202, "");
		} else if (pd->stream && !pd->opened) {
			/* A run or a subscription goes on: its stream opens now,
			 * so the client hears at once that it was taken. */
			pending_event(pd, NULL, 0);
		}
	}
	json_decref(v);
}

static void on_request(struct http_req *r, void *data)
{
	struct mcp_http *h = data;
	const struct mcp_principal *p = http_req_principal(r);
	const char *method = http_req_method(r), *sid = http_req_header(r, SID_HEADER);
	struct hsess *hs;

	if (strcmp(method, "POST") == 0)
		on_post(h, r, p, sid);
	else if (strcmp(method, "GET") == 0)
		on_get(h, r, p, sid);
	else if (!sid)
		plain(r, 405, "no session to end\n");
	else if ((hs = named(h, r, p, sid))) {
		log_line(LOG_INFO, NULL, "%s: session ended by the client", p->client);
		hsess_end(hs, "ended by the client");
		plain(r, 200, "");
	}
}

/* The client went away before the answer: a run it asked for is cancelled. */
static void on_gone(struct http_req *r, void *data)
{
	struct tag *t = http_req_data(r);
	(void)data;

	if (!t)
		return;
	if (!t->p) { /* the GET stream */
		t->hs->get = NULL;
		return;
	}
	{
		struct pending *p = t->p;
		struct hsess *hs = p->hs;
		json_t *cancel = json_pack("{ss ss s{sO}}", "jsonrpc", "2.0", "method",
					   "notifications/cancelled", "params", "requestId", p->id);
		char *text = cancel ? json_dumps(cancel, JSON_COMPACT) : NULL;

		p->r = NULL;
		free(t); /* r is the front's again */
		pending_unlink(p);
		if (text && !hs->dead)
			mcp_session_input(hs->s, text, strlen(text));
		free(text);
		json_decref(cancel);
		pending_free(p);
	}
}

static void auth_of(void *data, const void *principal, const char *peer)
{
	struct mcp_http *h = data;

	if (h->cfg.on_auth)
		h->cfg.on_auth(h->cfg.data, principal, peer);
}

static const char *unready_of(void *data)
{
	struct mcp_http *h = data;

	return h->cfg.unready(h->cfg.data);
}

static const void *token_of(void *data, const unsigned char sha256[32])
{
	struct mcp_http *h = data;

	return h->cfg.principal ? h->cfg.principal(h->cfg.data, sha256) : NULL;
}

static const void *bearer_of(void *data, const char *tok, size_t len, unsigned *status)
{
	struct mcp_http *h = data;

	return h->cfg.bearer(h->cfg.data, tok, len, status);
}

static const struct http_front_resource *resource_of(void *data)
{
	struct mcp_http *h = data;

	return h->cfg.resource(h->cfg.data);
}

int mcp_http_open(struct mcp_server *srv, struct loop *loop, const struct mcp_http_config *cfg,
		  struct mcp_http **out, struct appl_err *err)
{
	struct mcp_http *h = calloc(1, sizeof(*h));
	struct http_front_config fc;

	if (!h)
		return appl_err_set(err, -ENOMEM, "out of memory");
	h->srv = srv;
	h->loop = loop;
	h->cfg = *cfg;
	if (!h->cfg.sessions_per_principal)
		h->cfg.sessions_per_principal = 1;
	if (!h->cfg.idle_ms)
		h->cfg.idle_ms = 600000;
	loop_task_init(&h->reap, on_reap, h);
	fc = cfg->front;
	fc.token = token_of;
	fc.anonymous = cfg->anonymous;
	fc.on_request = on_request;
	fc.on_gone = on_gone;
	fc.on_auth = auth_of;
	fc.unready = cfg->unready ? unready_of : NULL;
	fc.bearer = cfg->bearer ? bearer_of : NULL;
	fc.resource = cfg->resource ? resource_of : NULL;
	fc.data = h;
	if (http_front_open(loop, &fc, &h->front, err) < 0) {
		free(h);
		return err->code;
	}
	*out = h;
	return 0;
}

unsigned mcp_http_sessions(const struct mcp_http *h, const struct mcp_principal *p)
{
	return h ? legacy_count(h, p) : 0;
}

unsigned mcp_http_port(const struct mcp_http *h, size_t i)
{
	return http_front_port(h->front, i);
}

unsigned mcp_http_principal_end(struct mcp_http *h, const struct mcp_principal *p, const char *why)
{
	unsigned n = 0;

	for (struct hsess *hs = h ? h->sessions : NULL; hs; hs = hs->next)
		if (hs->p == p && !hs->dead) {
			hsess_end(hs, why);
			n++;
		}
	return n;
}

void mcp_http_drain(struct mcp_http *h)
{
	if (h)
		h->draining = true;
}

void mcp_http_close(struct mcp_http *h)
{
	if (!h)
		return;
	for (struct hsess *hs = h->sessions; hs; hs = hs->next)
		hsess_end(hs, "the appliance is stopping");
	http_front_close(h->front);
	loop_task_cancel(h->loop, &h->reap);
	on_reap(h);
	free(h);
}
