/* http.h: MCP Streamable HTTP, the second transport of the session core
 * (docs/http.md), over the front door (pkg/http/front.h), which has already
 * refused what it must (path, method, Host, Origin, token, content type,
 * Accept, size) by the time a request gets here.
 *
 * One endpoint, both eras:
 *   - legacy (2025-11-25 and before): a POST of initialize makes a session
 *     of its own, named by a random Mcp-Session-Id the answer carries and
 *     bound to the principal (the token) that made it: every later request
 *     names it, and one naming an unknown or ended session, or another
 *     principal's, gets 404. GET opens the session's stream for what is
 *     about no request (tools/list_changed); DELETE ends the session and
 *     its runs. A session unused for idle_ms ends.
 *   - 2026-07-28: POSTs without a session: each principal has one session
 *     core of its own for them, so a requestState retry may come on any
 *     connection of the same principal and never another's.
 * A POST of a request is answered as JSON, except tools/call and
 * subscriptions/listen, which get an SSE stream at once: progress, the
 * questions to the client about the call (elicitation/create) and the
 * answer go there, and the stream ends with the answer. A POST of a
 * notification or a response gets 202. A client that goes away before its
 * answer cancels the request (its cell stops).
 */
#ifndef APPL_MCP_HTTP_H
#define APPL_MCP_HTTP_H

#include "base/err.h"
#include "http/front.h"
#include "loop/loop.h"
#include "mcp/session.h"

struct mcp_http_config {
	/* Listeners, path, hosts, origins, TLS and limits; the token check and
	 * the hooks are this transport's (set here). Copied. */
	struct http_front_config front;
	/* The principal the SHA-256 of a token names (borrowed; it must
	 * outlive the transport), or NULL: 401. */
	const struct mcp_principal *(*principal)(void *data, const unsigned char sha256[32]);
	/* Optional: a token principal does not know, whole (an OAuth access
	 * token): as the front's bearer hook (front.h). */
	const struct mcp_principal *(*bearer)(void *data, const char *tok, size_t len,
					      unsigned *status);
	/* Optional: the OAuth resource's metadata, as the front's (front.h). */
	const struct http_front_resource *(*resource)(void *data);
	/* Non-NULL: the principal of a loopback or unix peer that sends no
	 * token (tests; a policy must name it). */
	const struct mcp_principal *anonymous;
	/* Optional: each token check (p NULL: refused) and the peer. */
	void (*on_auth)(void *data, const struct mcp_principal *p, const char *peer);
	/* Optional: readiness for the front's /readyz (front.h: NULL when
	 * ready, else one word). NULL: no /healthz nor /readyz. */
	const char *(*unready)(void *data);
	void *data;
	unsigned sessions_per_principal; /* legacy sessions one principal may hold */
	unsigned idle_ms;		 /* a legacy session unused this long ends */
};

struct mcp_http;

/* Serve srv's sessions over HTTP in loop. 0 with *out, or -errno with err. */
int mcp_http_open(struct mcp_server *srv, struct loop *loop, const struct mcp_http_config *cfg,
		  struct mcp_http **out, struct appl_err *err);

/* Stop accepting, end every session (their runs cancelled) and
 * connection. Safe on NULL. */
void mcp_http_close(struct mcp_http *h);

/* Drain: from now on a request that would begin new work (an
 * `initialize`, a `tools/call` that is no retry of a run parked here)
 * is answered 503 with Retry-After, before any session sees it, so a
 * balancer can send it elsewhere; everything else is served as before.
 * Safe on NULL. */
void mcp_http_drain(struct mcp_http *h);

/* End every session of p now (its token was taken out of the policy):
 * their runs are cancelled and their streams closed; p is not used again
 * by them once the loop has turned. How many ended. */
unsigned mcp_http_principal_end(struct mcp_http *h, const struct mcp_principal *p, const char *why);

/* The legacy sessions p (borrowed: one of the principals the transport
 * hands out) holds open now; 0 for NULL h. For a status. */
unsigned mcp_http_sessions(const struct mcp_http *h, const struct mcp_principal *p);

/* The port listener i is bound to (0 for a unix socket). */
unsigned mcp_http_port(const struct mcp_http *h, size_t i);

#endif
