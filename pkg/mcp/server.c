/* server.c: the downstream MCP server (see server.h). */
#include "mcp/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/version.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "loop/lines.h"

#define MCP_TOOL_NAME	  "run_python"
#define MCP_OUT_QUEUE_MAX (64u * 1024 * 1024) /* answers queued for a slow client */
/* Of a line over the cap, the first bytes are read for its id: clients
 * write "id" near the start, before params. */
#define MCP_OVERLONG_HEAD 4096u

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
				       NULL};

struct mcp_run {
	struct mcp_run *next, *prev;
	json_t *id;
	void *data;
};

struct mcp_server {
	struct loop *loop;
	struct lines *io;
	struct mcp_server_hooks hooks;
	const char *version; /* static; NULL before initialize */
	bool initialized;
	bool closed;
	struct mcp_run *runs;
};

typedef void (*method_fn)(struct mcp_server *s, const struct jsonrpc_msg *m);

static void send_line(struct mcp_server *s, char *line, size_t len)
{
	/* A client that stops reading its answers is dropped, not buffered
	 * for without end. */
	if (line && !s->closed && lines_write(s->io, line, len) == -ENOBUFS)
		lines_end(s->io, "the client stopped reading");
	free(line);
}

static void reply(struct mcp_server *s, const json_t *id, json_t *result /* steals */)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_result_encode(id, result, APPL_RPC_MESSAGE_MAX, &line, &len, &err) < 0) {
		json_decref(result);
		if (jsonrpc_error_encode(id, JSONRPC_INTERNAL_ERROR, "answer too large", NULL,
					 APPL_RPC_MESSAGE_MAX, &line, &len, &err) < 0)
			return;
	} else {
		json_decref(result);
	}
	send_line(s, line, len);
}

static void reply_error(struct mcp_server *s, const json_t *id, int code, const char *msg)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_error_encode(id, code, msg, NULL, APPL_RPC_MESSAGE_MAX, &line, &len, &err) == 0)
		send_line(s, line, len);
}

static const char *version_pick(const json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));

	for (size_t i = 0; asked && versions[i]; i++)
		if (strcmp(asked, versions[i]) == 0)
			return versions[i];
	/* Not one we speak: answer with the latest; the client decides. */
	return versions[0];
}

static void m_initialize(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	if (!json_is_object(m->params) ||
	    !json_is_string(json_object_get(m->params, "protocolVersion"))) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "initialize needs protocolVersion");
		return;
	}
	s->version = version_pick(m->params);
	reply(s, m->id,
	      json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s},s:s}", "protocolVersion", s->version,
			"capabilities", "tools", "listChanged", 1, "serverInfo", "name",
			"appliance", "version", APPL_VERSION, "instructions",
			"Run Python with run_python; its description lists the tools a program "
			"can call. Only what the program prints comes back."));
}

static void m_ping(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	reply(s, m->id, json_object());
}

static json_t *tool_object(struct mcp_server *s)
{
	const char *desc = s->hooks.description ? s->hooks.description(s->hooks.data) : "";

	return json_pack("{s:s,s:s,s:{s:s,s:{s:{s:s,s:s,s:I}},s:[s],s:b},s:{s:s,s:b,s:b}}", "name",
			 MCP_TOOL_NAME, "description", desc ? desc : "", "inputSchema", "type",
			 "object", "properties", "code", "type", "string", "description",
			 "The Python program to run (top-level await works).", "maxLength",
			 (json_int_t)APPL_CELL_CODE_MAX, "required", "code", "additionalProperties",
			 0, "annotations", "title", "Run Python", "readOnlyHint", 0,
			 "openWorldHint", 1);
}

static void m_tools_list(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	json_t *tool = tool_object(s);

	if (!tool) {
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	reply(s, m->id, json_pack("{s:[o]}", "tools", tool));
}

static json_t *text_result(const char *text, bool is_error)
{
	return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", text, "isError",
			 is_error);
}

static struct mcp_run *run_new(struct mcp_server *s, const json_t *id)
{
	struct mcp_run *r = calloc(1, sizeof(*r));

	if (!r || !(r->id = jsonrpc_id_copy(id))) {
		free(r);
		return NULL;
	}
	r->next = s->runs;
	if (s->runs)
		s->runs->prev = r;
	s->runs = r;
	return r;
}

static void run_free(struct mcp_server *s, struct mcp_run *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		s->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	json_decref(r->id);
	free(r);
}

/* tools/call: only run_python exists. An unknown tool is a protocol error;
 * bad arguments are a tool error the model can read and fix (MCP
 * 2025-11-25 asks for input errors as tool results). */
static void m_tools_call(struct mcp_server *s, const struct jsonrpc_msg *m)
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
		reply(s, m->id,
		      text_result("run_python takes exactly one argument, code (a string)", 1));
		return;
	}
	if (json_string_length(code) > APPL_CELL_CODE_MAX) {
		reply(s, m->id, text_result("code is longer than the cap of 262144 bytes", 1));
		return;
	}
	r = run_new(s, m->id);
	if (!r) {
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	s->hooks.on_run(s, r, json_string_value(code), json_string_length(code), s->hooks.data);
}

static void n_initialized(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	(void)m;
	s->initialized = true;
}

static void n_cancelled(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	const json_t *id = json_object_get(m->params, "requestId");

	for (struct mcp_run *r = s->runs; r; r = r->next) {
		if (!jsonrpc_id_equal(r->id, id))
			continue;
		if (s->hooks.on_cancel)
			s->hooks.on_cancel(s, r, s->hooks.data);
		run_free(s, r);
		return;
	}
}

static const struct {
	const char *method;
	bool request; /* a request (answered) or a notification */
	bool before_init;
	method_fn fn;
} methods[] = {
	{"initialize", true, true, m_initialize},
	{"ping", true, true, m_ping},
	{"tools/list", true, false, m_tools_list},
	{"tools/call", true, false, m_tools_call},
	{"notifications/initialized", false, true, n_initialized},
	{"notifications/cancelled", false, true, n_cancelled},
};

static void dispatch(struct mcp_server *s, const struct jsonrpc_msg *m)
{
	bool request = m->kind == JSONRPC_REQUEST;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (methods[i].request != request || strcmp(methods[i].method, m->method) != 0)
			continue;
		if (!methods[i].before_init && !s->version) {
			reply_error(s, m->id, JSONRPC_INVALID_REQUEST, "not initialized");
			return;
		}
		methods[i].fn(s, m);
		return;
	}
	if (request)
		reply_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
	/* unknown notifications and responses are ignored, as JSON-RPC says */
}

static void on_line(struct lines *io, const char *line, size_t len, void *data)
{
	struct mcp_server *s = data;
	struct jsonrpc_msg m = {0};
	struct appl_err err = {0};
	(void)io;

	if (len == 0 || (len == 1 && line[0] == '\r'))
		return;
	if (jsonrpc_msg_parse(line, len, APPL_RPC_MESSAGE_MAX, &m, &err) < 0)
		reply_error(s, m.id, m.fail ? m.fail : JSONRPC_INVALID_REQUEST, err.msg);
	else if (m.kind == JSONRPC_REQUEST || m.kind == JSONRPC_NOTIFICATION)
		dispatch(s, &m);
	jsonrpc_msg_clear(&m);
}

/* A line over the cap is never held: its first bytes give the id (when
 * they hold one) for the error, the rest is dropped as it comes, and the
 * session, the runs in flight included, goes on. */
static void on_overlong(struct lines *io, const char *head, size_t len, void *data)
{
	struct mcp_server *s = data;
	json_t *id = jsonrpc_id_sniff(head, len);
	char msg[128];
	(void)io;

	snprintf(msg, sizeof(msg), "message longer than the cap of %u bytes",
		 (unsigned)APPL_RPC_MESSAGE_MAX);
	log_line(LOG_WARN, NULL, "client: dropped a %s, unread; answered with an error%s", msg,
		 id ? "" : " (no id before the cap)");
	reply_error(s, id, JSONRPC_INVALID_REQUEST, msg);
	json_decref(id);
}

static void on_end(struct lines *io, const char *why, void *data)
{
	struct mcp_server *s = data;
	(void)io;

	s->closed = true;
	if (s->hooks.on_closed)
		s->hooks.on_closed(s, why, s->hooks.data);
}

struct mcp_server *mcp_server_new(struct loop *loop, int in_fd, int out_fd,
				  const struct mcp_server_hooks *hooks, struct appl_err *err)
{
	struct mcp_server *s = calloc(1, sizeof(*s));
	struct lines_hooks lh = {.on_line = on_line, .on_overlong = on_overlong, .on_end = on_end};
	struct lines_config cfg = {.line_max = APPL_RPC_MESSAGE_MAX,
				   .queue_max = MCP_OUT_QUEUE_MAX,
				   .overlong = LINES_OVERLONG_SKIP,
				   .head_max = MCP_OVERLONG_HEAD};

	if (!s) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	s->loop = loop;
	s->hooks = *hooks;
	lh.data = s;
	s->io = lines_new(loop, in_fd, out_fd, &cfg, &lh, err);
	if (!s->io) {
		free(s);
		return NULL;
	}
	return s;
}

void mcp_run_finish(struct mcp_server *s, struct mcp_run *run, const json_t *result, bool is_error)
{
	char *text = json_dumps(result, JSON_COMPACT);
	json_t *res = json_pack("{s:[{s:s}],s:O,s:b}", "content", "type", "text",
				"structuredContent", result, "isError", is_error);

	if (res && text)
		json_object_set_new(json_array_get(json_object_get(res, "content"), 0), "text",
				    json_string(text));
	free(text);
	if (res)
		reply(s, run->id, res);
	else
		reply_error(s, run->id, JSONRPC_INTERNAL_ERROR, "out of memory");
	run_free(s, run);
}

void mcp_run_fail(struct mcp_server *s, struct mcp_run *run, const char *text)
{
	reply(s, run->id, text_result(text, 1));
	run_free(s, run);
}

void mcp_run_set_data(struct mcp_run *run, void *data)
{
	run->data = data;
}

void *mcp_run_data(const struct mcp_run *run)
{
	return run->data;
}

void mcp_server_tools_changed(struct mcp_server *s)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (!s->initialized)
		return;
	if (jsonrpc_notification_encode("notifications/tools/list_changed", NULL,
					APPL_RPC_MESSAGE_MAX, &line, &len, &err) == 0)
		send_line(s, line, len);
}

const char *mcp_server_version(const struct mcp_server *s)
{
	return s->version;
}

void mcp_server_free(struct mcp_server *s, int timeout_ms)
{
	if (!s)
		return;
	lines_close(s->io);
	lines_drain(s->io, timeout_ms);
	while (s->runs)
		run_free(s, s->runs);
	lines_free(s->io);
	free(s);
}
