/* http_check.h: what the HTTP transport decides from a POST's headers and
 * body before the session core sees it, and the status an answer goes out
 * with. Pure functions of their input (fuzzed by fuzz_mcp_http).
 *
 * A POST is one of:
 *   - SESSION: it names a legacy session (Mcp-Session-Id);
 *   - INIT: initialize without a session and without the 2026-07-28 _meta:
 *     it makes a legacy session;
 *   - MODERN: any other request without a session: a 2026-07-28 request,
 *     which must carry the standard headers (MCP-Protocol-Version,
 *     Mcp-Method, and Mcp-Name for tools/call, prompts/get and
 *     resources/read) agreeing with the body, and its _meta;
 *   - OTHER: a notification, a response, or bytes that are no message
 *     (a request whose id is no string or integer among them), without a
 *     session.
 * A body that is empty (or only white space) is no message in any of
 * them: 400 with a parse error, as the session core would skip it.
 * Header values are compared with the optional white space around them
 * trimmed, as HTTP says; the comparison itself is exact.
 */
#ifndef APPL_MCP_HTTP_CHECK_H
#define APPL_MCP_HTTP_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define MCP_SID_BYTES 16 /* a session id: this many random bytes, as lowercase hex */

enum mcp_post_kind { MCP_POST_SESSION, MCP_POST_INIT, MCP_POST_MODERN, MCP_POST_OTHER };

struct mcp_post {
	const char *protocol_version; /* header values as received; NULL: absent */
	const char *method;	      /* Mcp-Method */
	const char *name;	      /* Mcp-Name */
	const char *session;	      /* Mcp-Session-Id */
	const json_t *body;	      /* the parsed body; NULL when it is not JSON */
	const char *raw;	      /* the body's bytes (raw_len of them; may be NULL when 0) */
	size_t raw_len;
};

struct mcp_post_verdict {
	enum mcp_post_kind kind;
	unsigned status; /* 0: go on; else refuse with this HTTP status */
	int code;	 /* the refusal as a JSON-RPC error with this code; 0: plain text */
	char msg[96];	 /* the refusal's text */
};

/* Decide about in: out->status 0 when it goes on to the session core. */
void mcp_post_check(const struct mcp_post *in, struct mcp_post_verdict *out);

/* The HTTP status of answer sent as a JSON body: 200, except a JSON-RPC
 * error that the transport reserves a status for (400 for a message that
 * is not one, a header mismatch, a missing capability or an unsupported
 * version; 404 for an unknown method of a 2026-07-28 request). */
unsigned mcp_answer_status(const json_t *answer, bool modern);

/* Whether sid has the form of our session ids (before any look-up). */
bool mcp_sid_valid(const char *sid);

#endif
