/* http_check.c: a POST's headers against its body (see http_check.h). */
#include "mcp/http_check.h"

#include <stdio.h>
#include <string.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/revision.h"
#include "mcp/session.h"

#define VERSION_MAX 64 /* a protocol version longer than this is none of ours */

static bool ows(char c)
{
	return c == ' ' || c == '\t';
}

/* v with the white space around it cut off: *len bytes from the result. */
static const char *trim(const char *v, size_t *len)
{
	size_t n;

	while (ows(*v))
		v++;
	n = strlen(v);
	while (n && ows(v[n - 1]))
		n--;
	*len = n;
	return v;
}

/* Whether header value v (trimmed) is want, byte for byte. */
static bool value_is(const char *v, const char *want)
{
	size_t n;
	const char *t = trim(v, &n);

	return want && strlen(want) == n && memcmp(t, want, n) == 0;
}

static void refuse(struct mcp_post_verdict *out, unsigned status, int code, const char *msg)
{
	out->status = status;
	out->code = code;
	snprintf(out->msg, sizeof(out->msg), "%s", msg);
}

/* The body's name for what it is about, for the Mcp-Name check: the tool
 * or prompt named, the resource's URI, or the task's id. */
static const char *body_name(const json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));

	if (!name)
		name = json_string_value(json_object_get(params, "taskId"));
	return name ? name : json_string_value(json_object_get(params, "uri"));
}

/* The tasks extension's methods name their task in Mcp-Name; checked when
 * given, since clients that predate it leave it out. */
static bool names_a_task(const char *method)
{
	return method && (strcmp(method, "tasks/get") == 0 || strcmp(method, "tasks/update") == 0 ||
			  strcmp(method, "tasks/cancel") == 0);
}

static bool names_a_target(const char *method)
{
	return method && (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0 ||
			  strcmp(method, "resources/read") == 0);
}

/* Mcp-Method and Mcp-Name (of tools/call, prompts/get and resources/read):
 * when given, they must say what the body says; a 2026-07-28 request must
 * give them. 1 when refused. */
static int routing_refused(const struct mcp_post *in, const char *method, const json_t *params,
			   bool required, struct mcp_post_verdict *out)
{
	const char *name = body_name(params);

	if (in->method ? !value_is(in->method, method) : required) {
		refuse(out, 400, MCP_HEADER_MISMATCH,
		       in->method ? "Mcp-Method does not match the body's method"
				  : "a 2026-07-28 request needs the Mcp-Method header");
		return 1;
	}
	if (names_a_task(method) && in->name && !value_is(in->name, name)) {
		refuse(out, 400, MCP_HEADER_MISMATCH, "Mcp-Name does not match the body's taskId");
		return 1;
	}
	if (!names_a_target(method)) /* Mcp-Name is about these only: elsewhere ignored */
		return 0;
	if (in->name ? !value_is(in->name, name) : required) {
		refuse(out, 400, MCP_HEADER_MISMATCH,
		       in->name ? "Mcp-Name does not match the body"
				: "a 2026-07-28 request of this method needs the Mcp-Name header");
		return 1;
	}
	return 0;
}

/* A 2026-07-28 request: its version header agrees with its _meta, which
 * has what every such request carries. 1 when refused. */
static int modern_refused(const struct mcp_post *in, const json_t *meta,
			  struct mcp_post_verdict *out)
{
	const char *version = json_string_value(json_object_get(meta, META_VERSION));

	if (!json_is_object(meta) || !version) {
		refuse(out, 400, JSONRPC_INVALID_PARAMS,
		       "a request without a session needs _meta with " META_VERSION);
		return 1;
	}
	if (!json_is_object(json_object_get(meta, META_CAPS))) {
		refuse(out, 400, JSONRPC_INVALID_PARAMS, "_meta needs " META_CAPS " (an object)");
		return 1;
	}
	if (!in->protocol_version || !value_is(in->protocol_version, version)) {
		refuse(out, 400, MCP_HEADER_MISMATCH,
		       in->protocol_version
			       ? "MCP-Protocol-Version does not match _meta's protocol version"
			       : "a 2026-07-28 request needs the MCP-Protocol-Version header");
		return 1;
	}
	return 0;
}

/* Whether the body holds nothing but JSON's white space: no message at
 * all, which the session core would pass over as a line transport's
 * empty line. */
static bool blank(const char *raw, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!memchr(" \t\r\n", raw[i], 4))
			return false;
	return true;
}

/* A version header outside a 2026-07-28 request names a revision we
 * serve. */
static bool version_known(const char *v)
{
	char buf[VERSION_MAX + 1];
	size_t n;
	const char *t = trim(v, &n);

	if (n > VERSION_MAX)
		return false;
	memcpy(buf, t, n);
	buf[n] = '\0';
	return mcp_revision_find(buf, MCP_ERA_LEGACY | MCP_ERA_MODERN) != NULL;
}

void mcp_post_check(const struct mcp_post *in, struct mcp_post_verdict *out)
{
	const char *method = json_string_value(json_object_get(in->body, "method"));
	const json_t *id = json_object_get(in->body, "id");
	const json_t *params = json_object_get(in->body, "params");
	const json_t *meta = json_object_get(params, "_meta");
	/* with an id that is no valid one, it is the session's invalid request */
	bool request = method && jsonrpc_id_valid(id);

	memset(out, 0, sizeof(*out));
	if (in->session)
		out->kind = MCP_POST_SESSION;
	else if (request && strcmp(method, "initialize") == 0 &&
		 !json_object_get(meta, META_VERSION))
		out->kind = MCP_POST_INIT;
	else
		out->kind = request ? MCP_POST_MODERN : MCP_POST_OTHER;

	if (out->kind == MCP_POST_SESSION && !mcp_sid_valid(in->session)) {
		refuse(out, 404, 0, "no such session");
		return;
	}
	if (blank(in->raw, in->raw_len)) {
		refuse(out, 400, JSONRPC_PARSE_ERROR,
		       "the body is empty: a POST carries one JSON-RPC message");
		return;
	}
	if (out->kind == MCP_POST_MODERN) {
		if (modern_refused(in, meta, out))
			return;
	} else if (in->protocol_version && !version_known(in->protocol_version)) {
		refuse(out, 400, 0, "unsupported MCP-Protocol-Version");
		return;
	}
	routing_refused(in, method, params, out->kind == MCP_POST_MODERN, out);
}

unsigned mcp_answer_status(const json_t *answer, bool modern)
{
	json_int_t code =
		json_integer_value(json_object_get(json_object_get(answer, "error"), "code"));

	switch (code) {
	case JSONRPC_PARSE_ERROR:
	case JSONRPC_INVALID_REQUEST:
	case MCP_HEADER_MISMATCH:
	case MCP_MISSING_CAPABILITY:
	case MCP_UNSUPPORTED_VERSION:
		return 400;
	case JSONRPC_METHOD_NOT_FOUND:
		return modern ? 404 : 200;
	default:
		return 200;
	}
}

bool mcp_sid_valid(const char *sid)
{
	size_t i;

	for (i = 0; sid[i]; i++)
		if (i >= 2 * MCP_SID_BYTES || !strchr("0123456789abcdef", sid[i]))
			return false;
	return i == 2 * MCP_SID_BYTES;
}
