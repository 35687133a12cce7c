/* session.c: the MCP dispatch core (see session.h). */
#define _GNU_SOURCE
#include "mcp/session.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/utf8.h"
#include "base/version.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"
#include "mcp/tool.h"

/* The per-request _meta keys of 2026-07-28 (more in session.h). */
#define META_CLIENT_INFO  "io.modelcontextprotocol/clientInfo"
#define META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"

/* Caching hints (modern era): the discover result is the same for every
 * client; the tool list is the role's. Changes are pushed to a client that
 * listens, so a minute's staleness only touches one that does not. */
#define MCP_TTL_MS 60000
/* Of a requested version that is not ours, at most this much is echoed. */
#define MCP_REQUESTED_ECHO_MAX 64u

#define MCP_INSTRUCTIONS                                                                           \
	"Run Python with run_python; its description lists the tools a program can call. "         \
	"Only what the program prints comes back."

/* ---- methods ------------------------------------------------------------------ */

typedef void (*method_fn)(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req);

/* Tools, and lists of prompts and resources that are always empty (a
 * client that asks learns there are none); a legacy session can also set
 * the level of the log messages it hears about its runs. */
static json_t *capabilities(const struct mcp_server *srv, const struct mcp_revision *rev)
{
	json_t *c =
		json_pack("{s:{s:b},s:{},s:{}}", "tools", "listChanged", 1, "prompts", "resources");
	int bad = !c;

	if (!bad && mcp_revision_has(rev, MCP_HAS_SET_LEVEL))
		bad = json_object_set_new(c, "logging", json_object());
	/* Tasks (docs/tasks.md): 2025-11-25's capability, or 2026-07-28's
	 * extension. */
	if (!bad && srv->hooks.task_limits && mcp_revision_has(rev, MCP_HAS_TASKS))
		bad = json_object_set_new(c, "tasks",
					  json_pack("{s:{},s:{},s:{s:{s:{}}}}", "list", "cancel",
						    "requests", "tools", "call"));
	if (!bad && srv->hooks.task_limits && rev->era == MCP_ERA_MODERN)
		bad = json_object_set_new(c, "extensions", json_pack("{s:{}}", TASKS_EXTENSION));
	if (bad) {
		json_decref(c);
		return NULL;
	}
	return c;
}

static void m_set_level(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	const char *level = json_string_value(json_object_get(m->params, "level"));

	for (size_t i = 0; level && i < sizeof(mcp_log_levels) / sizeof(mcp_log_levels[0]); i++)
		if (strcmp(level, mcp_log_levels[i]) == 0) {
			s->log_level = (int)i;
			mcp_reply(s, m->id, req->rev, json_object());
			return;
		}
	mcp_reply_error(
		s, m->id, JSONRPC_INVALID_PARAMS,
		"level must be one of debug, info, notice, warning, error, critical, alert, "
		"emergency");
}

/* ttlMs and cacheScope on res (a list) where the revision has them. -1
 * (res freed) on out of memory. */
static int cache_hints(const struct mcp_request *req, json_t *res, const char *scope)
{
	if (res && mcp_revision_has(req->rev, MCP_HAS_CACHE_HINTS) &&
	    (json_object_set_new(res, "ttlMs", json_integer(MCP_TTL_MS)) ||
	     json_object_set_new(res, "cacheScope", json_string(scope)))) {
		json_decref(res);
		return -1;
	}
	return 0;
}

/* prompts/list, resources/list and resources/templates/list: always empty,
 * the same for every client. */
static void empty_list(struct mcp_session *s, const struct jsonrpc_msg *m,
		       const struct mcp_request *req, const char *key)
{
	json_t *res;

	if (json_object_get(m->params, "cursor")) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	res = json_pack("{s:[]}", key);
	mcp_reply(s, m->id, req->rev, cache_hints(req, res, "public") ? NULL : res);
}

static void m_prompts_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			   const struct mcp_request *req)
{
	empty_list(s, m, req, "prompts");
}

static void m_resources_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	empty_list(s, m, req, "resources");
}

static void m_templates_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	empty_list(s, m, req, "resourceTemplates");
}

static void m_prompts_get(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req)
{
	(void)req;
	mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			"Unknown prompt: the appliance offers none");
}

/* resources/read: there is none; the error names the URI asked for (cut
 * like any echo). */
static void m_resources_read(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	const char *uri = json_string_value(json_object_get(m->params, "uri"));
	json_t *data =
		uri ? json_pack("{s:s%}", "uri", uri,
				appl_utf8_boundary(uri, strnlen(uri, MCP_REQUESTED_ECHO_MAX)))
		    : NULL;
	(void)req;

	mcp_reply_error_data(s, m->id, JSONRPC_INVALID_PARAMS,
			     "Resource not found: the appliance offers none", data);
	json_decref(data);
}

static void m_initialize(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const json_t *asked = json_object_get(m->params, "protocolVersion");
	const json_t *caps = json_object_get(m->params, "capabilities");
	const struct mcp_revision *rev;
	(void)req;

	if (!json_is_object(m->params) || !json_is_string(asked)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"initialize needs protocolVersion");
		return;
	}
	if (s->legacy) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_REQUEST, "already initialized");
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
	mcp_reply(s, m->id, rev,
		  json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", rev->name, "capabilities",
			    capabilities(s->srv, rev), "serverInfo", mcp_server_info(),
			    "instructions", MCP_INSTRUCTIONS));
}

static void m_ping(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req)
{
	mcp_reply(s, m->id, req->rev, json_object());
}

static void m_discover(struct mcp_session *s, const struct jsonrpc_msg *m,
		       const struct mcp_request *req)
{
	mcp_reply(s, m->id, req->rev,
		  json_pack("{s:o,s:o,s:s,s:i,s:s}", "supportedVersions",
			    mcp_revision_names(MCP_ERA_MODERN | MCP_ERA_LEGACY), "capabilities",
			    capabilities(s->srv, req->rev), "instructions", MCP_INSTRUCTIONS,
			    "ttlMs", MCP_TTL_MS, "cacheScope", "public"));
}

static void m_tools_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	struct mcp_listing li = {.run_python = true};
	json_t *tools = json_array(), *res;
	int bad = !tools;

	/* One page: no cursor was ever given out. */
	if (json_object_get(m->params, "cursor")) {
		json_decref(tools);
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	if (h->listing)
		h->listing(s->p->role, &li, h->data);
	if (!bad && li.run_python)
		bad = json_array_append_new(
			tools,
			mcp_tool_object(req->rev,
					h->description ? h->description(s->p->role, h->data) : "",
					h->output_schema));
	for (size_t i = 0; !bad && i < li.ntools; i++) {
		const struct mcp_code_tool *t = &li.tools[i];

		bad = json_array_append_new(tools,
					    mcp_code_tool_object(req->rev, t->name, t->description,
								 t->input_schema, t->output_schema,
								 t->read_only));
	}
	res = bad ? NULL : json_pack("{s:o}", "tools", tools);
	if (bad)
		json_decref(tools);
	mcp_reply(s, m->id, req->rev, cache_hints(req, res, "private") ? NULL : res);
}

/* run_python's arguments: code, and a session's (docs/sessions.md):
 * session ("new" or a handle) and end. Why they are wrong (a tool error
 * the model can read and fix), or NULL with req's session fields set. */
static const char *run_args(const json_t *args, struct mcp_request *req)
{
	const json_t *code = json_object_get(args, "code");
	const json_t *sess = json_object_get(args, "session");
	const json_t *end = json_object_get(args, "end");
	size_t known = !!code + !!sess + !!end;

	if (!json_is_object(args) || json_object_size(args) != known)
		return "run_python takes code (a string), and optionally session (\"new\" or a "
		       "handle) and end (true); nothing else";
	if (sess && !json_is_string(sess))
		return "session must be a string: \"new\", or the handle a cell of the session "
		       "returned";
	if (end && !json_is_true(end))
		return "end must be true (it ends the session given), or left out";
	if (end && (!sess || strcmp(json_string_value(sess), "new") == 0))
		return "end needs the session's handle: {\"session\": HANDLE, \"end\": true}";
	if (end && code)
		return "end takes no code: send {\"session\": HANDLE, \"end\": true} alone";
	if (!end && !json_is_string(code))
		return "run_python needs code (a string)";
	if (code && json_string_length(code) > APPL_CELL_CODE_MAX)
		return "code is longer than the cap of 262144 bytes";
	req->run_session = sess ? json_string_value(sess) : NULL;
	req->end_session = end != NULL;
	return NULL;
}

/* The run for req's call: of a task when the client asked for one (the
 * client is answered with it now), else answering the request. NULL
 * when it was answered (refused, out of memory). */
static struct mcp_run *call_run(struct mcp_session *s, const struct jsonrpc_msg *m,
				const struct mcp_request *req, const char *code, size_t len)
{
	struct mcp_run *r;
	int task = mcp_task_asked(s, m, req);

	if (task < 0)
		return NULL;
	if (task)
		return mcp_task_start(s, m, req, code, len);
	if (!(r = mcp_run_new(s, req, code, len)))
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
	return r;
}

/* The code tool of role called name, or NULL. */
static const struct mcp_code_tool *code_tool_find(const struct mcp_listing *li, const char *name)
{
	for (size_t i = 0; i < li->ntools; i++)
		if (strcmp(li->tools[i].name, name) == 0)
			return &li->tools[i];
	return NULL;
}

/* A code tool's call: its arguments go to the owner, who checks them
 * against the tool's input schema. What a retry's requestState binds is
 * the tool's name and the arguments, as a cell's is its code. */
static void tool_call(struct mcp_session *s, const struct jsonrpc_msg *m,
		      const struct mcp_request *req, const struct mcp_code_tool *t,
		      const json_t *args)
{
	struct mcp_request call = *req;
	char *dump = args ? json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
	char *bound = NULL;
	struct mcp_state *replay = NULL;
	struct mcp_run *r;
	int len;

	if (args && !json_is_object(args)) {
		free(dump);
		mcp_reply(s, m->id, req->rev,
			  mcp_tool_text_result("arguments must be an object (the tool's "
					       "inputSchema says what it takes)",
					       1));
		return;
	}
	len = dump ? asprintf(&bound, "%s\n%s", t->name, dump) : -1;
	free(dump);
	if (len < 0) {
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (json_object_get(m->params, "requestState") &&
	    !(replay = mcp_ask_retry(s, m, req, bound, (size_t)len))) {
		free(bound);
		return;
	}
	r = call_run(s, m, req, bound, (size_t)len);
	free(bound);
	if (!r) {
		free(replay);
		return;
	}
	if (replay)
		mcp_run_replay(r, replay);
	r->tool = true;
	r->structured = t->output_schema != NULL;
	call.bind = s->legacy ? s->serial : 0;
	call.task = r->task != NULL;
	call.id = r->id; /* a task's run answers the task, under its id */
	call.tool = t->name;
	call.args = args;
	s->srv->hooks.on_run(r, &call, NULL, 0, s->srv->hooks.data);
}

/* tools/call: run_python, or a code tool of the role. An unknown tool is
 * a protocol error; bad arguments are a tool error the model can read and
 * fix (MCP asks for input errors as tool results). */
static void m_tools_call(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	struct mcp_listing li = {.run_python = true};
	const struct mcp_code_tool *t;
	const json_t *name = json_object_get(m->params, "name");
	const json_t *args = json_object_get(m->params, "arguments");
	const json_t *code = json_object_get(args, "code");
	const char *text = code ? json_string_value(code) : "";
	size_t len = code ? json_string_length(code) : 0;
	struct mcp_request call = *req;
	struct mcp_state *replay = NULL;
	const char *bad;
	struct mcp_run *r;

	if (!json_is_object(m->params) || !json_is_string(name)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "tools/call needs a tool name");
		return;
	}
	if (h->listing)
		h->listing(s->p->role, &li, h->data);
	if ((t = code_tool_find(&li, json_string_value(name)))) {
		tool_call(s, m, req, t, args);
		return;
	}
	if (!li.run_python || strcmp(json_string_value(name), MCP_TOOL_NAME) != 0) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"Unknown tool: tools/list names the tools this client may call");
		return;
	}
	if ((bad = run_args(args, &call))) {
		mcp_reply(s, m->id, req->rev, mcp_tool_text_result(bad, 1));
		return;
	}
	if (json_object_get(m->params, "requestState") &&
	    !(replay = mcp_ask_retry(s, m, req, text, len)))
		return;
	if (!(r = call_run(s, m, req, text, len))) {
		free(replay);
		return;
	}
	if (replay)
		mcp_run_replay(r, replay);
	call.bind = s->legacy ? s->serial : 0;
	call.task = r->task != NULL;
	call.id = r->id; /* a task's run answers the task, under its id */
	s->srv->hooks.on_run(r, &call, text, len, s->srv->hooks.data);
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
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"subscriptions/listen needs notifications (an object)");
		return;
	}
	if (s->nlistens >= MCP_LISTENS_MAX) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "too many open subscriptions");
		return;
	}
	l = calloc(1, sizeof(*l));
	if (!l || !(l->id = jsonrpc_id_copy(m->id))) {
		free(l);
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
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
		mcp_notify_for(s, l->id, "notifications/subscriptions/acknowledged", ack);
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
		mcp_run_cancel(r, s->p->client);
		return;
	}
	mcp_task_unwait(s->srv, s, id);
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
	bool tools;	 /* it needs the owner's tools (the hold hook) */
	method_fn fn;
	/* a tasks method: only where the server offers tasks (the task_limits
	 * hook) and the revision has them (2025-11-25, or 2026-07-28's
	 * extension); elsewhere it is not found */
	bool tasks;
} methods[] = {
	{"initialize", true, MCP_ERA_LEGACY, false, false, m_initialize, false},
	{"ping", true, MCP_ERA_LEGACY, false, false, m_ping, false},
	{"server/discover", true, MCP_ERA_MODERN, false, false, m_discover, false},
	{"tools/list", true, ERA_BOTH, true, true, m_tools_list, false},
	{"tools/call", true, ERA_BOTH, true, true, m_tools_call, false},
	{"subscriptions/listen", true, MCP_ERA_MODERN, false, false, m_listen, false},
	{"prompts/list", true, ERA_BOTH, true, false, m_prompts_list, false},
	{"prompts/get", true, ERA_BOTH, true, false, m_prompts_get, false},
	{"resources/list", true, ERA_BOTH, true, false, m_resources_list, false},
	{"resources/templates/list", true, ERA_BOTH, true, false, m_templates_list, false},
	{"resources/read", true, ERA_BOTH, true, false, m_resources_read, false},
	{"logging/setLevel", true, MCP_ERA_LEGACY, true, false, m_set_level, false},
	{"tasks/get", true, ERA_BOTH, true, false, mcp_m_tasks_get, true},
	{"tasks/result", true, MCP_ERA_LEGACY, true, false, mcp_m_tasks_result, true},
	{"tasks/list", true, MCP_ERA_LEGACY, true, false, mcp_m_tasks_list, true},
	{"tasks/cancel", true, ERA_BOTH, true, false, mcp_m_tasks_cancel, true},
	{"tasks/update", true, MCP_ERA_MODERN, true, false, mcp_m_tasks_update, true},
	{"notifications/initialized", false, MCP_ERA_LEGACY, false, false, n_initialized, false},
	{"notifications/cancelled", false, ERA_BOTH, false, false, n_cancelled, false},
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

	mcp_reply_error_data(s, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
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
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "_meta must be an object");
		return -1;
	}
	req->meta = meta;
	/* A token is kept while its run lasts and echoed in every report:
	 * capped like an id. */
	token = json_object_get(meta, "progressToken");
	if (token && !jsonrpc_id_valid(token)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
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
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"_meta needs " META_VERSION " (a string)");
		return -1;
	}
	if (!json_is_object(caps)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"_meta needs " META_CAPS " (an object)");
		return -1;
	}
	if (info && !json_is_object(info)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
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

/* The request's span, below the client's traceparent when its _meta has
 * one: named by its method and, for tools/call, a tool the client is
 * listed (names of ours or the policy's, never the client's text). */
static void request_span(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct method *meth, struct mcp_request *req)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	const char *tp = json_string_value(json_object_get(req->meta, "traceparent"));
	const char *tool = json_string_value(json_object_get(m->params, "name"));
	struct mcp_listing li = {.run_python = true};
	struct trace_ctx parent;
	char name[TRACE_NAME_MAX];
	bool has = tp && trace_parent_parse(tp, strlen(tp), &parent) == 0;

	if (!h->tracer)
		return;
	if (tool && meth->fn == m_tools_call && h->listing)
		h->listing(s->p->role, &li, h->data);
	if (tool && meth->fn == m_tools_call &&
	    ((li.run_python && strcmp(tool, MCP_TOOL_NAME) == 0) || code_tool_find(&li, tool)))
		snprintf(name, sizeof(name), "%s %s", meth->name, tool);
	else
		snprintf(name, sizeof(name), "%s", meth->name);
	s->span = trace_span_start(h->tracer, has ? &parent : NULL, name, TRACE_SERVER);
	trace_span_str(s->span, "mcp.method.name", meth->name);
	trace_span_str(s->span, "mcp.protocol.version", req->rev->name);
	trace_span_str(s->span, "appliance.client", s->p->client);
	req->trace = trace_span_ctx(s->span);
}

/* Returns true when m was held (the hold hook): nothing was answered. */
static bool on_request(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	const struct method *meth;
	struct mcp_request req;
	enum mcp_era era;
	char msg[160];

	/* One answer per id: a second request under an id still in flight is
	 * refused without its id, so the first keeps its own answer. */
	if (mcp_id_in_flight(s, m->id)) {
		log_line(LOG_WARN, NULL, "%s: refused a request reusing the id of one in flight",
			 s->p->client);
		mcp_reply_error(s, NULL, JSONRPC_INVALID_REQUEST,
				"the request's id is already used by a request in flight");
		return false;
	}
	if (classify(s, m, &req) < 0)
		return false;
	era = req.meta && json_object_get(req.meta, META_VERSION) ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	meth = method_find(m->method, true);
	if (!meth) {
		mcp_reply_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
		return false;
	}
	if (!(meth->eras & era)) {
		if (era == MCP_ERA_MODERN)
			snprintf(msg, sizeof(msg), "%s is not part of revision %s", meth->name,
				 req.rev->name);
		else
			snprintf(msg, sizeof(msg), "%s needs _meta with " META_VERSION, meth->name);
		mcp_reply_error(s, m->id,
				era == MCP_ERA_MODERN ? JSONRPC_METHOD_NOT_FOUND
						      : JSONRPC_INVALID_PARAMS,
				msg);
		return false;
	}
	if (era == MCP_ERA_LEGACY && meth->needs_init && !s->legacy) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"not initialized: send initialize first, or name the revision in "
				"_meta (" META_VERSION ")");
		return false;
	}
	if (meth->tools && h->hold && h->hold(h->data))
		return true;
	if (!req.rev) /* legacy, before initialize: ping */
		req.rev = mcp_revision_latest(MCP_ERA_LEGACY);
	if (meth->tasks && (!h->task_limits ||
			    (era == MCP_ERA_LEGACY && !mcp_revision_has(req.rev, MCP_HAS_TASKS)))) {
		mcp_reply_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
		return false;
	}
	request_span(s, m, meth, &req);
	meth->fn(s, m, &req);
	/* A run took it, or the request has been answered. */
	trace_span_end(s->span);
	s->span = NULL;
	return false;
}

static void on_notification(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct method *meth = method_find(m->method, false);
	struct mcp_request req = {.session = s, .principal = s->p};

	/* Unknown notifications are ignored, as JSON-RPC says. */
	if (meth)
		meth->fn(s, m, &req);
}

bool mcp_session_input(struct mcp_session *s, const char *line, size_t len)
{
	struct jsonrpc_msg m = {0};
	struct appl_err err = {0};
	bool held = false;

	if (s->ended || len == 0 || (len == 1 && line[0] == '\r'))
		return false;
	if (jsonrpc_msg_parse(line, len, APPL_RPC_MESSAGE_MAX, &m, &err) < 0)
		mcp_reply_error(s, m.id, m.fail ? m.fail : JSONRPC_INVALID_REQUEST, err.msg);
	else if (m.kind == JSONRPC_REQUEST)
		held = on_request(s, &m);
	else if (m.kind == JSONRPC_NOTIFICATION)
		on_notification(s, &m);
	else if (m.kind == JSONRPC_RESULT || m.kind == JSONRPC_ERROR)
		mcp_ask_response(s, &m); /* to a question it was asked; others are ignored */
	jsonrpc_msg_clear(&m);
	return held;
}

void mcp_session_refuse(struct mcp_session *s, const char *line, size_t len, const char *why)
{
	json_t *id = jsonrpc_id_sniff(line, len);

	mcp_reply_error(s, id, JSONRPC_INTERNAL_ERROR, why);
	json_decref(id);
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
	mcp_reply_error(s, id, JSONRPC_INVALID_REQUEST, msg);
	json_decref(id);
}

void mcp_session_ended(struct mcp_session *s, const char *why)
{
	if (s->ended)
		return;
	s->ended = true;
	if (s->srv->hooks.on_closed)
		s->srv->hooks.on_closed(s, why, s->legacy ? s->serial : 0, s->srv->hooks.data);
}

/* ---- lifetimes -------------------------------------------------------------------- */

struct mcp_server *mcp_server_new(struct loop *loop, const struct mcp_server_hooks *hooks,
				  struct appl_err *err)
{
	struct mcp_server *srv;

	if (!(srv = calloc(1, sizeof(*srv)))) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	srv->loop = loop;
	srv->hooks = *hooks;
	randombytes_buf(srv->key, sizeof(srv->key));
	if (!(srv->tick = loop_timer_new(loop, mcp_progress_tick, srv, err)) ||
	    !(srv->task_timer = loop_timer_new(loop, mcp_tasks_expire, srv, err))) {
		loop_timer_free(srv->tick);
		free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_cluster_key(struct mcp_server *srv, const unsigned char key[32])
{
	memcpy(srv->key, key, sizeof(srv->key));
	srv->cluster = true;
}

void mcp_server_free(struct mcp_server *srv)
{
	if (!srv)
		return;
	mcp_server_tasks_end(srv);
	loop_timer_free(srv->tick);
	loop_timer_free(srv->task_timer);
	sodium_memzero(srv->key, sizeof(srv->key));
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
	s->log_level = -1;
	s->serial = ++srv->sessions_made;
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
		if (!s->runs->owner_done && srv->hooks.on_cancel)
			srv->hooks.on_cancel(s->runs, srv->hooks.data);
		mcp_run_free(s->runs);
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
	mcp_tick_arm(srv);
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
			mcp_notify(s, "notifications/tools/list_changed", NULL);
		for (struct listen *l = s->listens; l; l = l->next) {
			json_t *params;

			if (!l->tools)
				continue;
			params = json_pack("{s:{s:O}}", "_meta", META_SUBSCRIPTION, l->id);
			if (params)
				mcp_notify_for(s, l->id, "notifications/tools/list_changed",
					       params);
			json_decref(params);
		}
	}
}
