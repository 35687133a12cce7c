/* front.h: the HTTP front door. Accepts connections inside the one event
 * loop (libmicrohttpd driven from pkg/loop: no threads), refuses what must
 * be refused before any MCP processing, and hands each admitted request,
 * its body whole, to the owner, who answers once, at once or later, as a
 * plain response or as a Server-Sent Events stream. docs/http.md has the
 * admission order, the statuses and the limits.
 *
 * Admission, in order, each refusal a short text/plain body:
 *   1 the request's target, as sent (no query, no %-escape, no NUL), is
 *     cfg.path byte for byte, else 404;
 *   2 the method is POST, GET or DELETE, else 405 with Allow;
 *   3 Host is one of cfg.hosts, else 403; Origin, when sent, one of
 *     cfg.origins, else 403 (DNS rebinding, cross-site pages);
 *   4 Authorization: Bearer TOKEN whose SHA-256 cfg.token maps to a
 *     principal, or else that cfg.bearer takes (an OAuth access token),
 *     else 401 with WWW-Authenticate: Bearer (or, with no Authorization
 *     from a loopback or unix peer, cfg.anonymous); cfg.bearer may answer
 *     403 instead (a valid token that may do nothing here). With
 *     cfg.resource, the challenge names its metadata (RFC 9728) and says
 *     invalid_token or insufficient_scope (RFC 6750) when a token came;
 *   5 POST: Content-Type application/json (415), Accept admits JSON and
 *     SSE (406), Content-Length at most cfg.body_bytes (413, before the
 *     body is read, so no 100 Continue); a chunked body past the cap 413;
 *     GET: Accept admits SSE (406).
 * A front with cfg.page serves a read-only page (GET /metrics) instead:
 * step 2 admits GET and HEAD only, and step 5 asks nothing of Accept.
 * Every answer but a page's is counted by status (metrics.h).
 *
 * With cfg.unready set, the front answers two probes itself, never
 * handing them to the owner: GET or HEAD of HTTP_FRONT_HEALTHZ (200 "ok":
 * the loop turns) and of HTTP_FRONT_READYZ (200 "ready", or 503 and
 * cfg.unready's word). Their admission: the target is the probe's path
 * byte for byte (cfg.path wins where they are equal), else 404; the method
 * GET or HEAD, else 405; Host and Origin as in step 3; no token (no
 * on_auth), no Accept; a body 413. No log line, no session.
 *
 * With cfg.resource answering, its paths serve its Protected Resource
 * Metadata document (200, application/json), admitted as the probes are.
 */
#ifndef APPL_HTTP_FRONT_H
#define APPL_HTTP_FRONT_H

#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"

#define HTTP_FRONT_LISTEN_MAX 16u
/* What one stream may hold queued for a client that does not read. */
#define HTTP_FRONT_STREAM_MAX (16u * 1024 * 1024)
/* Bytes of a chunked body read and dropped past the cap before the 413,
 * so the answer can be sent; a client sending more is cut off. */
#define HTTP_FRONT_DRAIN_MAX (64u * 1024)
/* The probes' paths, beside cfg.path when cfg.unready is set. */
#define HTTP_FRONT_HEALTHZ "/healthz"
#define HTTP_FRONT_READYZ  "/readyz"

struct http_front;
struct http_req;

/* "a.b.c.d:port", "[v6]:port" or "unix:/path" (created 0660; a stale
 * socket there is removed, anything else is refused). Port 0: any. */
struct http_front_listen {
	const char *addr;
};

/* What the front says of the OAuth resource it is (RFC 9728), read at
 * each request (borrowed until the next loop round). */
struct http_front_resource {
	const char *challenge; /* `resource_metadata="URL"`: after Bearer */
	const char *doc;       /* the metadata document, JSON */
	size_t doc_len;
	const char *paths[2]; /* where doc is served; NULL: none */
};

/* Every pointer is borrowed and must outlive the front. */
struct http_front_config {
	const struct http_front_listen *listen;
	size_t nlisten;
	const char *path;	  /* "/mcp" */
	const char *const *hosts; /* allowed Host host parts: "localhost", "[::1]" */
	size_t nhosts;
	const char *const *origins; /* allowed Origin values, exact */
	size_t norigins;
	const char *tls_cert_pem, *tls_key_pem; /* PEM text; NULL: plain HTTP */
	unsigned max_connections;		/* per listener */
	size_t header_bytes;			/* per-connection memory for the request head */
	size_t body_bytes;			/* the body cap */
	unsigned slow_s; /* a request's head and body must come within this */
	bool page;	 /* GET and HEAD of a read-only page (above) */
	/* The principal for the SHA-256 of a bearer token, or NULL (401).
	 * Compare in constant time (sodium_memcmp). NULL: every token is refused. */
	const void *(*token)(void *data, const unsigned char sha256[32]);
	/* Optional: a bearer token cfg.token does not know, whole (an OAuth
	 * access token): its principal, or NULL with *status 401 (not a valid
	 * token) or 403 (valid, but for nothing here). */
	const void *(*bearer)(void *data, const char *tok, size_t len, unsigned *status);
	/* Optional: the resource's metadata, or NULL (none now). */
	const struct http_front_resource *(*resource)(void *data);
	/* Non-NULL: a loopback or unix peer sending no Authorization gets it. */
	const void *anonymous;
	/* An admitted request: answer it once (reply, or stream then
	 * stream_end), now or later. */
	void (*on_request)(struct http_req *r, void *data);
	/* Optional: every token check's outcome, the principal (NULL:
	 * refused) and the peer ("127.0.0.1:5555", "unix"), for the audit log.
	 * Called before the request goes on or is refused. */
	void (*on_auth)(void *data, const void *principal, const char *peer);
	/* Optional: readiness for HTTP_FRONT_READYZ, NULL when ready, else one
	 * word (static). Unset: the probes' paths are 404 like any other. */
	const char *(*unready)(void *data);
	/* The client went away (or the stream overflowed, or the front is
	 * closing) before the answer ended: r must not be touched again. */
	void (*on_gone)(struct http_req *r, void *data);
	void *data;
};

/* Load libmicrohttpd now (the first http_front_open does otherwise): 0,
 * or -EIO with err naming what failed; the first answer holds. */
int http_front_load(struct appl_err *err);

/* libmicrohttpd's version into buf (loading it): 0, or -errno with err. */
int http_front_describe(char *buf, size_t n, struct appl_err *err);

/* Open every listener and serve in loop. New object in *out, or a
 * negative code with err filled (nothing left open). */
int http_front_open(struct loop *loop, const struct http_front_config *cfg, struct http_front **out,
		    struct appl_err *err);
/* Stop accepting and end every connection: on_gone for every request the
 * owner still holds. Removes unix socket files. Safe on NULL. */
void http_front_close(struct http_front *f);
/* The port listener i is bound to (0 for unix sockets). */
unsigned http_front_port(const struct http_front *f, size_t i);

/* A request's fields (borrowed, valid until the answer ends or on_gone). */
const char *http_req_method(const struct http_req *r);
/* The first header of that name (any case), or NULL. */
const char *http_req_header(const struct http_req *r, const char *name);
/* The body (NUL-terminated for convenience; *len may hold NULs). */
const char *http_req_body(const struct http_req *r, size_t *len);
const void *http_req_principal(const struct http_req *r);
/* "127.0.0.1:5555", "[::1]:5555" or "unix". */
const char *http_req_peer(const struct http_req *r);
void http_req_set_data(struct http_req *r, void *d);
void *http_req_data(const struct http_req *r);

/* Answer with body[0..len) (copied); headers are "Name: value" lines,
 * NULL-ended (borrowed, may be NULL). r is then no longer the owner's.
 * Returns 0, -EINVAL for a bad header (r stays the owner's), -EALREADY
 * when already answered. */
int http_req_reply(struct http_req *r, unsigned status, const char *content_type, const char *body,
		   size_t len, const char *const *headers);
/* Start a text/event-stream answer (chunked). Returns as http_req_reply. */
int http_req_stream(struct http_req *r, unsigned status, const char *const *headers);
/* Queue data[0..len) (copied) on the stream. Returns 0, -EPIPE when the
 * stream is not open, or -ENOBUFS when past HTTP_FRONT_STREAM_MAX: the
 * stream is then cut off and on_gone follows. */
int http_req_stream_send(struct http_req *r, const char *data, size_t len);
/* End the stream once what is queued is sent; r is no longer the owner's. */
int http_req_stream_end(struct http_req *r);

#endif
