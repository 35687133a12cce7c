/* session.c: the MCP dispatch core (see session.h). */
#include "mcp/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/utf8.h"
#include "base/version.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/tool.h"

/* The per-request _meta keys of 2026-07-28, and its error codes. */
#define META_VERSION		"io.modelcontextprotocol/protocolVersion"
#define META_CAPS		"io.modelcontextprotocol/clientCapabilities"
#define META_CLIENT_INFO	"io.modelcontextprotocol/clientInfo"
#define META_SERVER_INFO	"io.modelcontextprotocol/serverInfo"
#define META_SUBSCRIPTION	"io.modelcontextprotocol/subscriptionId"
#define MCP_UNSUPPORTED_VERSION (-32022)

/* Caching hints (modern era): the discover result is the same for every
 * client; the tool list is the role's. Changes are pushed to a client that
 * listens, so a minute's staleness only touches one that does not. */
#define MCP_TTL_MS 60000
/* Of a requested version that is not ours, at most this much is echoed. */
#define MCP_REQUESTED_ECHO_MAX 64u

#define MCP_INSTRUCTIONS                                                                           \
	"Run Python with run_python; its description lists the tools a program can call. "         \
	"Only what the program prints comes back."

struct mcp_run {
	struct mcp_run *next, *prev;
	struct mcp_session *s;
	json_t *id;
	const struct mcp_revision *rev;
	json_t *token;	/* progressToken, or NULL: no progress */
	uint64_t due;	/* when the next progress goes out */
	uint64_t last;	/* when the last one went */
	json_int_t seq; /* progress: rises by one each notification */
	void *data;
};

struct listen {
	struct listen *next;
	json_t *id;
	bool tools; /* notifications/tools/list_changed asked for */
};

struct mcp_session {
	struct mcp_session *next, *prev;
	struct mcp_server *srv;
	struct mcp_transport t;
	const struct mcp_principal *p;
	const struct mcp_revision *legacy; /* initialize's pick; NULL before */
	json_t *legacy_caps;		   /* initialize's capabilities */
	bool initialized;		   /* notifications/initialized seen */
	bool ended;
	struct mcp_run *runs;
	struct listen *listens;
	unsigned nlistens;
};

struct mcp_server {
	struct loop *loop;
	struct mcp_server_hooks hooks;
	struct mcp_session *sessions;
	struct loop_timer *tick; /* the next progress notification */
};

/* ---- sending ---------------------------------------------------------------- */

static void send_line(struct mcp_session *s, char *line, size_t len)
{
	if (!line)
		return;
	if (s->ended) {
		free(line);
		return;
	}
	s->t.send(s->t.t, line, len);
}

static void reply_error_data(struct mcp_session *s, const json_t *id, int code, const char *msg,
			     const json_t *data)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_error_encode(id, code, msg, data, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) == 0)
		send_line(s, line, len);
}

static void reply_error(struct mcp_session *s, const json_t *id, int code, const char *msg)
{
	reply_error_data(s, id, code, msg, NULL);
}

static json_t *server_info(void)
{
	return json_pack("{s:s,s:s}", "name", "appliance", "version", APPL_VERSION);
}

/* What rev puts on every result: resultType, serverInfo in _meta. */
static int result_shape(const struct mcp_revision *rev, json_t *result)
{
	int bad = 0;

	if (mcp_revision_has(rev, MCP_HAS_RESULT_TYPE))
		bad |= json_object_set_new(result, "resultType", json_string("complete"));
	if (mcp_revision_has(rev, MCP_HAS_RESULT_META_INFO))
		bad |= json_object_set_new(result, "_meta",
					   json_pack("{s:o}", META_SERVER_INFO, server_info()));
	return bad ? -ENOMEM : 0;
}

static void reply(struct mcp_session *s, const json_t *id, const struct mcp_revision *rev,
		  json_t *result /* steals */)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (!result || result_shape(rev, result) < 0) {
		json_decref(result);
		reply_error(s, id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (jsonrpc_result_encode(id, result, APPL_RPC_MESSAGE_MAX, &line, &len, &err) < 0)
		reply_error(s, id, JSONRPC_INTERNAL_ERROR,
			    err.code == -EFBIG ? "answer too large" : "out of memory");
	else
		send_line(s, line, len);
	json_decref(result);
}

static void notify(struct mcp_session *s, const char *method, const json_t *params)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_notification_encode(method, params, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) ==
	    0)
		send_line(s, line, len);
}

/* ---- progress ---------------------------------------------------------------- */

static void tick_arm(struct mcp_server *srv)
{
	uint64_t now = loop_now_ms(), next = 0;

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && (!next || r->due < next))
				next = r->due;
	if (srv->tick)
		loop_timer_set(srv->tick, next ? (next > now ? next - now : 1) : 0);
}

static void progress_send(struct mcp_run *r, uint64_t now)
{
	struct mcp_server *srv = r->s->srv;
	struct mcp_progress p = {0};
	json_t *params;
	char *msg = NULL;

	if (srv->hooks.progress)
		srv->hooks.progress(r, &p, srv->hooks.data);
	params = json_pack("{s:O,s:I}", "progressToken", r->token, "progress", ++r->seq);
	if (params && mcp_revision_has(r->rev, MCP_HAS_PROGRESS_MESSAGE) &&
	    (msg = mcp_progress_message(&p)))
		json_object_set_new(params, "message", json_string(msg));
	free(msg);
	if (params)
		notify(r->s, "notifications/progress", params);
	json_decref(params);
	r->last = now;
	r->due = now + MCP_PROGRESS_EVERY_MS;
}

static void on_tick(void *data)
{
	struct mcp_server *srv = data;
	uint64_t now = loop_now_ms();

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && r->due <= now)
				progress_send(r, now);
	tick_arm(srv);
}

void mcp_run_poke(struct mcp_run *r)
{
	uint64_t soon;

	if (!r->token)
		return;
	soon = r->last + MCP_PROGRESS_GAP_MS;
	if (soon < loop_now_ms())
		soon = loop_now_ms();
	if (soon < r->due) {
		r->due = soon;
		tick_arm(r->s->srv);
	}
}

/* ---- runs and subscriptions in flight ----------------------------------------- */

static struct mcp_run *run_new(struct mcp_session *s, const struct mcp_request *req)
{
	struct mcp_run *r = calloc(1, sizeof(*r));

	if (!r || !(r->id = jsonrpc_id_copy(req->id))) {
		free(r);
		return NULL;
	}
	r->s = s;
	r->rev = req->rev;
	if (req->progress_token) {
		r->token = json_deep_copy(req->progress_token);
		r->last = loop_now_ms();
		r->due = r->last + MCP_PROGRESS_EVERY_MS;
	}
	r->next = s->runs;
	if (s->runs)
		s->runs->prev = r;
	s->runs = r;
	if (r->token)
		tick_arm(s->srv);
	return r;
}

static void run_free(struct mcp_run *r)
{
	struct mcp_session *s = r->s;

	if (r->prev)
		r->prev->next = r->next;
	else
		s->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	json_decref(r->id);
	json_decref(r->token);
	free(r);
}

static bool id_in_flight(const struct mcp_session *s, const json_t *id)
{
	for (const struct mcp_run *r = s->runs; r; r = r->next)
		if (jsonrpc_id_equal(r->id, id))
			return true;
	for (const struct listen *l = s->listens; l; l = l->next)
		if (jsonrpc_id_equal(l->id, id))
			return true;
	return false;
}

/* ---- methods ------------------------------------------------------------------ */

typedef void (*method_fn)(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req);

static json_t *capabilities(void)
{
	return json_pack("{s:{s:b}}", "tools", "listChanged", 1);
}

static void m_initialize(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const json_t *asked = json_object_get(m->params, "protocolVersion");
	const json_t *caps = json_object_get(m->params, "capabilities");
	const struct mcp_revision *rev;
	(void)req;

	if (!json_is_object(m->params) || !json_is_string(asked)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "initialize needs protocolVersion");
		return;
	}
	if (s->legacy) {
		reply_error(s, m->id, JSONRPC_INVALID_REQUEST, "already initialized");
		return;
	}
	/* Not a legacy revision we speak: answer with the newest; the client
	 * decides. */
	rev = mcp_revision_find(json_string_value(asked), MCP_ERA_LEGACY);
	if (!rev)
		rev = mcp_revision_latest(MCP_ERA_LEGACY);
	s->legacy = rev;
	log_line(LOG_INFO, NULL, "%s: initialize: revision %s", s->p->client, rev->name);
	s->legacy_caps = json_is_object(caps) ? json_deep_copy(caps) : json_object();
	reply(s, m->id, rev,
	      json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", rev->name, "capabilities",
			capabilities(), "serverInfo", server_info(), "instructions",
			MCP_INSTRUCTIONS));
}

static void m_ping(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req)
{
	reply(s, m->id, req->rev, json_object());
}

static void m_discover(struct mcp_session *s, const struct jsonrpc_msg *m,
		       const struct mcp_request *req)
{
	reply(s, m->id, req->rev,
	      json_pack("{s:o,s:o,s:s,s:i,s:s}", "supportedVersions",
			mcp_revision_names(MCP_ERA_MODERN | MCP_ERA_LEGACY), "capabilities",
			capabilities(), "instructions", MCP_INSTRUCTIONS, "ttlMs", MCP_TTL_MS,
			"cacheScope", "public"));
}

static void m_tools_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	const char *desc = h->description ? h->description(s->p->role, h->data) : "";
	json_t *tool, *res;

	/* One page: no cursor was ever given out. */
	if (json_object_get(m->params, "cursor")) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	tool = mcp_tool_object(req->rev, desc);
	res = tool ? json_pack("{s:[o]}", "tools", tool) : NULL;
	if (res && mcp_revision_has(req->rev, MCP_HAS_CACHE_HINTS) &&
	    (json_object_set_new(res, "ttlMs", json_integer(MCP_TTL_MS)) ||
	     json_object_set_new(res, "cacheScope", json_string("private")))) {
		json_decref(res);
		res = NULL;
	}
	reply(s, m->id, req->rev, res);
}

/* tools/call: only run_python exists. An unknown tool is a protocol error;
 * bad arguments are a tool error the model can read and fix (MCP asks for
 * input errors as tool results). */
static void m_tools_call(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const json_t *name = json_object_get(m->params, "name");
	const json_t *args = json_object_get(m->params, "arguments");
	const json_t *code = json_object_get(args, "code");
	struct mcp_run *r;

	if (!json_is_object(m->params) || !json_is_string(name)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "tools/call needs a tool name");
		return;
	}
	if (strcmp(json_string_value(name), MCP_TOOL_NAME) != 0) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "Unknown tool: only run_python exists");
		return;
	}
	if (!json_is_object(args) || json_object_size(args) != 1 || !json_is_string(code)) {
		reply(s, m->id, req->rev,
		      mcp_tool_text_result("run_python takes exactly one argument, code (a string)",
					   1));
		return;
	}
	if (json_string_length(code) > APPL_CELL_CODE_MAX) {
		reply(s, m->id, req->rev,
		      mcp_tool_text_result("code is longer than the cap of 262144 bytes", 1));
		return;
	}
	if (!(r = run_new(s, req))) {
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	s->srv->hooks.on_run(r, req, json_string_value(code), json_string_length(code),
			     s->srv->hooks.data);
}

/* subscriptions/listen: the request stays open; its first message is the
 * acknowledgement of what is honoured (only the tool list changes here). */
static void m_listen(struct mcp_session *s, const struct jsonrpc_msg *m,
		     const struct mcp_request *req)
{
	const json_t *want = json_object_get(m->params, "notifications");
	struct listen *l;
	json_t *ack;
	(void)req;

	if (!json_is_object(want)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "subscriptions/listen needs notifications (an object)");
		return;
	}
	if (s->nlistens >= MCP_LISTENS_MAX) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "too many open subscriptions");
		return;
	}
	l = calloc(1, sizeof(*l));
	if (!l || !(l->id = jsonrpc_id_copy(m->id))) {
		free(l);
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	l->tools = json_is_true(json_object_get(want, "toolsListChanged"));
	l->next = s->listens;
	s->listens = l;
	s->nlistens++;
	ack = json_pack("{s:{s:O},s:{}}", "_meta", META_SUBSCRIPTION, l->id, "notifications");
	if (ack && l->tools)
		json_object_set_new(json_object_get(ack, "notifications"), "toolsListChanged",
				    json_true());
	if (ack)
		notify(s, "notifications/subscriptions/acknowledged", ack);
	json_decref(ack);
}

static void n_initialized(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req)
{
	(void)m;
	(void)req;
	if (s->legacy)
		s->initialized = true;
}

static void n_cancelled(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	const json_t *id = json_object_get(m->params, "requestId");
	(void)req;

	if (!id)
		return;
	for (struct mcp_run *r = s->runs; r; r = r->next) {
		if (!jsonrpc_id_equal(r->id, id))
			continue;
		if (s->srv->hooks.on_cancel)
			s->srv->hooks.on_cancel(r, s->srv->hooks.data);
		run_free(r);
		tick_arm(s->srv);
		return;
	}
	for (struct listen **pl = &s->listens; *pl; pl = &(*pl)->next) {
		struct listen *l = *pl;

		if (!jsonrpc_id_equal(l->id, id))
			continue;
		*pl = l->next;
		s->nlistens--;
		json_decref(l->id);
		free(l);
		return;
	}
}

#define ERA_BOTH (MCP_ERA_LEGACY | MCP_ERA_MODERN)

static const struct method {
	const char *name;
	bool request;	 /* a request (answered) or a notification */
	unsigned eras;	 /* the eras it belongs to */
	bool needs_init; /* legacy: only once initialized */
	method_fn fn;
} methods[] = {
	{"initialize", true, MCP_ERA_LEGACY, false, m_initialize},
	{"ping", true, MCP_ERA_LEGACY, false, m_ping},
	{"server/discover", true, MCP_ERA_MODERN, false, m_discover},
	{"tools/list", true, ERA_BOTH, true, m_tools_list},
	{"tools/call", true, ERA_BOTH, true, m_tools_call},
	{"subscriptions/listen", true, MCP_ERA_MODERN, false, m_listen},
	{"notifications/initialized", false, MCP_ERA_LEGACY, false, n_initialized},
	{"notifications/cancelled", false, ERA_BOTH, false, n_cancelled},
};

static const struct method *method_find(const char *name, bool request)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (methods[i].request == request && strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

/* ---- a request's era and revision ------------------------------------------------ */

static void unsupported_version(struct mcp_session *s, const json_t *id, const char *asked)
{
	size_t n = appl_utf8_boundary(asked, strnlen(asked, MCP_REQUESTED_ECHO_MAX));
	json_t *data = json_pack("{s:o,s:s%}", "supported",
				 mcp_revision_names(MCP_ERA_MODERN | MCP_ERA_LEGACY), "requested",
				 asked, n);

	reply_error_data(s, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
	json_decref(data);
}

/* Fill req for m: modern when its _meta carries the per-request keys,
 * legacy otherwise. 0, or -1 when m was refused (answered). */
static int classify(struct mcp_session *s, const struct jsonrpc_msg *m, struct mcp_request *req)
{
	const json_t *meta = json_is_object(m->params) ? json_object_get(m->params, "_meta") : NULL;
	const json_t *version, *caps, *info, *token;

	memset(req, 0, sizeof(*req));
	req->session = s;
	req->principal = s->p;
	req->id = m->id;
	if (meta && !json_is_object(meta)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "_meta must be an object");
		return -1;
	}
	req->meta = meta;
	/* A token is kept while its run lasts and echoed in every report:
	 * capped like an id. */
	token = json_object_get(meta, "progressToken");
	if (token && !jsonrpc_id_valid(token)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta.progressToken must be an integer or a string of at most 256 "
			    "bytes");
		return -1;
	}
	req->progress_token = token;
	version = json_object_get(meta, META_VERSION);
	caps = json_object_get(meta, META_CAPS);
	if (!version && !caps) {
		req->rev = s->legacy;
		req->client_caps = s->legacy_caps;
		return 0;
	}
	info = json_object_get(meta, META_CLIENT_INFO);
	if (!json_is_string(version)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta needs " META_VERSION " (a string)");
		return -1;
	}
	if (!json_is_object(caps)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta needs " META_CAPS " (an object)");
		return -1;
	}
	if (info && !json_is_object(info)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta's " META_CLIENT_INFO " must be an object");
		return -1;
	}
	req->rev = mcp_revision_find(json_string_value(version), MCP_ERA_MODERN);
	if (!req->rev) {
		unsupported_version(s, m->id, json_string_value(version));
		return -1;
	}
	req->client_caps = caps;
	return 0;
}

static void on_request(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct method *meth;
	struct mcp_request req;
	enum mcp_era era;
	char msg[160];

	/* One answer per id: a second request under an id still in flight is
	 * refused without its id, so the first keeps its own answer. */
	if (id_in_flight(s, m->id)) {
		log_line(LOG_WARN, NULL, "%s: refused a request reusing the id of one in flight",
			 s->p->client);
		reply_error(s, NULL, JSONRPC_INVALID_REQUEST,
			    "the request's id is already used by a request in flight");
		return;
	}
	if (classify(s, m, &req) < 0)
		return;
	era = req.meta && json_object_get(req.meta, META_VERSION) ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	meth = method_find(m->method, true);
	if (!meth) {
		reply_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
		return;
	}
	if (!(meth->eras & era)) {
		if (era == MCP_ERA_MODERN)
			snprintf(msg, sizeof(msg), "%s is not part of revision %s", meth->name,
				 req.rev->name);
		else
			snprintf(msg, sizeof(msg), "%s needs _meta with " META_VERSION, meth->name);
		reply_error(s, m->id,
			    era == MCP_ERA_MODERN ? JSONRPC_METHOD_NOT_FOUND
						  : JSONRPC_INVALID_PARAMS,
			    msg);
		return;
	}
	if (era == MCP_ERA_LEGACY && meth->needs_init && !s->legacy) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "not initialized: send initialize first, or name the revision in "
			    "_meta (" META_VERSION ")");
		return;
	}
	if (!req.rev) /* legacy, before initialize: ping */
		req.rev = mcp_revision_latest(MCP_ERA_LEGACY);
	meth->fn(s, m, &req);
}

static void on_notification(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct method *meth = method_find(m->method, false);
	struct mcp_request req = {.session = s, .principal = s->p};

	/* Unknown notifications are ignored, as JSON-RPC says. */
	if (meth)
		meth->fn(s, m, &req);
}

void mcp_session_input(struct mcp_session *s, const char *line, size_t len)
{
	struct jsonrpc_msg m = {0};
	struct appl_err err = {0};

	if (s->ended || len == 0 || (len == 1 && line[0] == '\r'))
		return;
	if (jsonrpc_msg_parse(line, len, APPL_RPC_MESSAGE_MAX, &m, &err) < 0)
		reply_error(s, m.id, m.fail ? m.fail : JSONRPC_INVALID_REQUEST, err.msg);
	else if (m.kind == JSONRPC_REQUEST)
		on_request(s, &m);
	else if (m.kind == JSONRPC_NOTIFICATION)
		on_notification(s, &m);
	/* responses are ignored: this server sends no requests */
	jsonrpc_msg_clear(&m);
}

/* A message over the cap is never held: its first bytes give the id (when
 * they hold one) for the error, and the session, the runs in flight
 * included, goes on. */
void mcp_session_overlong(struct mcp_session *s, const char *head, size_t len)
{
	json_t *id = jsonrpc_id_sniff(head, len);
	char msg[128];

	snprintf(msg, sizeof(msg), "message longer than the cap of %u bytes",
		 (unsigned)APPL_RPC_MESSAGE_MAX);
	log_line(LOG_WARN, NULL, "%s: dropped a %s, unread; answered with an error%s", s->p->client,
		 msg, id ? "" : " (no id before the cap)");
	reply_error(s, id, JSONRPC_INVALID_REQUEST, msg);
	json_decref(id);
}

void mcp_session_ended(struct mcp_session *s, const char *why)
{
	if (s->ended)
		return;
	s->ended = true;
	if (s->srv->hooks.on_closed)
		s->srv->hooks.on_closed(s, why, s->srv->hooks.data);
}

/* ---- lifetimes -------------------------------------------------------------------- */

struct mcp_server *mcp_server_new(struct loop *loop, const struct mcp_server_hooks *hooks,
				  struct appl_err *err)
{
	struct mcp_server *srv = calloc(1, sizeof(*srv));

	if (!srv) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	srv->loop = loop;
	srv->hooks = *hooks;
	if (!(srv->tick = loop_timer_new(loop, on_tick, srv, err))) {
		free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_free(struct mcp_server *srv)
{
	if (!srv)
		return;
	loop_timer_free(srv->tick);
	free(srv);
}

struct mcp_session *mcp_session_new(struct mcp_server *srv, const struct mcp_transport *t,
				    const struct mcp_principal *p, struct appl_err *err)
{
	struct mcp_session *s = calloc(1, sizeof(*s));

	if (!s) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	s->srv = srv;
	s->t = *t;
	s->p = p;
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	return s;
}

void mcp_session_free(struct mcp_session *s)
{
	struct mcp_server *srv;

	if (!s)
		return;
	srv = s->srv;
	s->ended = true;
	while (s->runs) {
		if (srv->hooks.on_cancel)
			srv->hooks.on_cancel(s->runs, srv->hooks.data);
		run_free(s->runs);
	}
	while (s->listens) {
		struct listen *l = s->listens;

		s->listens = l->next;
		json_decref(l->id);
		free(l);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	json_decref(s->legacy_caps);
	free(s);
	tick_arm(srv);
}

/* ---- answers ------------------------------------------------------------------------ */

void mcp_run_finish(struct mcp_run *run, const struct cell_outcome *o)
{
	struct mcp_session *s = run->s;

	reply(s, run->id, run->rev, mcp_tool_result(run->rev, o));
	run_free(run);
	tick_arm(s->srv);
}

void mcp_run_fail(struct mcp_run *run, const char *text)
{
	struct mcp_session *s = run->s;

	reply(s, run->id, run->rev, mcp_tool_text_result(text, 1));
	run_free(run);
	tick_arm(s->srv);
}

void mcp_run_set_data(struct mcp_run *run, void *data)
{
	run->data = data;
}

void *mcp_run_data(const struct mcp_run *run)
{
	return run->data;
}

static bool same_role(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

void mcp_server_tools_changed(struct mcp_server *srv, const char *role)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next) {
		if (s->ended || !same_role(s->p->role, role))
			continue;
		if (s->initialized)
			notify(s, "notifications/tools/list_changed", NULL);
		for (struct listen *l = s->listens; l; l = l->next) {
			json_t *params;

			if (!l->tools)
				continue;
			params = json_pack("{s:{s:O}}", "_meta", META_SUBSCRIPTION, l->id);
			if (params)
				notify(s, "notifications/tools/list_changed", params);
			json_decref(params);
		}
	}
}
