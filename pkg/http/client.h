/* client.h: HTTP requests from the one event loop, through libcurl's multi
 * socket interface (the client side of remote upstream servers).
 *
 * libcurl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION: they go
 * on our epoll loop) and when to come back (CURLMOPT_TIMERFUNCTION: one
 * loop timer); no thread of ours, no polling. Every request is made as if
 * the server were hostile:
 *   - http and https only, no redirects, no cookies, no netrc, no
 *     compressed bodies (nothing is decoded: no decompression bombs);
 *   - TLS 1.2 or later, the peer and its name always verified, against the
 *     system's roots or, when given, a CA file of the caller's alone;
 *   - proxies named in the environment ignored: a proxy only when the
 *     caller names one;
 *   - a connect timeout, a whole-request timeout (0: none, for streams),
 *     and a timeout for a response that stops sending bytes;
 *   - the response's head capped (HTTP_CLIENT_HEAD_MAX), and its body
 *     capped (body_max): past a cap the request is aborted at once, its
 *     bytes unread, and done is told -EMSGSIZE.
 * libcurl's own resolver may use a thread for a name it must look up (a
 * literal address or a pinned name needs none).
 *
 * Re-entrancy: on_head and on_data run from inside libcurl and must not
 * call into this client except http_call_cancel (of any call, theirs
 * included: the call is stopped at the next return to the loop); done runs
 * from the loop and may start or cancel calls.
 */
#ifndef APPL_HTTP_CLIENT_H
#define APPL_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"

#define HTTP_CLIENT_HEAD_MAX	(32u * 1024) /* a response's status line and headers */
#define HTTP_CLIENT_HEADERS_MAX 64u	     /* header lines kept of one response */

struct http_client;
struct http_call;

/* A response's head: its status and its headers, names compared without
 * regard to case; values as received, without the line end. */
struct http_head {
	long status;
	size_t n;
	const char *name[HTTP_CLIENT_HEADERS_MAX];
	const char *value[HTTP_CLIENT_HEADERS_MAX];
};

/* The value of header name (the first such), or NULL. */
const char *http_head_get(const struct http_head *h, const char *name);

struct http_request {
	const char *method; /* "GET", "POST", "DELETE" */
	const char *url;    /* http:// or https:// */
	/* "Name: value" lines, NULL-ended (borrowed: copied at start). */
	const char *const *headers;
	const char *body; /* copied; NULL with body_len 0 for none */
	size_t body_len;
	const char *ca_file; /* PEM roots replacing the system's; NULL: the system's */
	const char *proxy;   /* NULL: none, whatever the environment says */
	/* "HOST:PORT:ADDRESS" entries pinning names (CURLOPT_RESOLVE), NULL-ended. */
	const char *const *resolve;
	unsigned connect_timeout_ms; /* 0: 10 s */
	unsigned timeout_ms;	     /* the whole request; 0: none */
	unsigned stall_s;	     /* abort when no byte came for this long; 0: never */
	size_t body_max;	     /* the response body; 0: 4 MiB */
};

struct http_call_hooks {
	/* The head came (for a final status; 1xx are skipped). < 0 aborts the
	 * call, and done is told that value. */
	int (*on_head)(void *ctx, const struct http_head *h);
	/* Bytes of the body, as they come. < 0 aborts, as above. */
	int (*on_data)(void *ctx, const char *buf, size_t len);
	/* The end: 0 when the whole response came, else -errno: -ETIMEDOUT,
	 * -ECONNREFUSED (could not connect), -EPROTO (TLS or HTTP broken, a
	 * certificate refused), -EMSGSIZE (over a cap), -EHOSTUNREACH (the
	 * name did not resolve), -EIO (anything else), or a hook's value. why
	 * is a short fixed text (no server bytes in it). Not called after
	 * http_call_cancel. */
	void (*done)(void *ctx, int rc, const char *why);
};

/* Load libcurl now (it is loaded by the first client or request
 * otherwise): 0, or -EIO with err naming what failed. The first answer
 * holds for the process's life. */
int http_client_load(struct appl_err *err);

/* libcurl's version and TLS library, as "8.14.1 (OpenSSL/3.0.17)", into
 * buf (loading it): 0, or -errno with err. */
int http_client_describe(char *buf, size_t n, struct appl_err *err);

/* A client on loop (borrowed, must outlive it). 0 with *out, or -errno. */
int http_client_new(struct loop *loop, struct http_client **out, struct appl_err *err);

/* Stop every call (no done is called) and release everything. Safe on NULL. */
void http_client_free(struct http_client *c);

/* Start req; hooks (copied) are told of it with ctx. 0 with *out (the
 * call, valid until done ran or it is cancelled), or -errno with err. */
int http_call_start(struct http_client *c, const struct http_request *req,
		    const struct http_call_hooks *hooks, void *ctx, struct http_call **out,
		    struct appl_err *err);

/* Stop call: its hooks are not called again. */
void http_call_cancel(struct http_call *call);

/* req at once, blocking for at most its timeouts (a body is not sent and
 * the response's is dropped): for a last word at shutdown, when the loop
 * no longer runs. 0 with *status, or -errno as done is told. */
int http_request_once(const struct http_request *req, long *status, struct appl_err *err);

/* As http_request_once, keeping the response's body (at most
 * req->body_max): *body new (NUL-terminated, free it) and *len. For a
 * small document needed before the loop serves (a key set at start). */
int http_fetch_once(const struct http_request *req, long *status, char **body, size_t *len,
		    struct appl_err *err);

/* Calls in flight. */
size_t http_client_calls(const struct http_client *c);

#endif
