/* header.h: the pure judges of the HTTP front door's request headers
 * (pkg/http/front.h applies them). Each takes a header value as (buf, len),
 * never trusts a NUL, and allocates nothing, so the fuzz target
 * (tests/fuzz/fuzz_http_headers.c) can feed them any bytes.
 */
#ifndef APPL_HTTP_HEADER_H
#define APPL_HTTP_HEADER_H

#include <stdbool.h>
#include <stddef.h>

/* A bearer token longer than this is refused before it is hashed. */
#define HTTP_TOKEN_MAX 4096u

/* Authorization: "Bearer" (any case), one or more spaces, then a token68
 * (RFC 7235: letters, digits, "-._~+/", then only "="), optional trailing
 * spaces and tabs. On success *tok points into v (borrowed) and *toklen is
 * its length; returns 0, or -EINVAL for anything else (another scheme, an
 * empty or over-long token, a byte outside token68). */
int http_header_bearer(const char *v, size_t len, const char **tok, size_t *toklen);

/* Whether a Host value is allowed by list[0..n), ignoring ASCII case: an
 * entry with a port ("localhost:8080", "[::1]:8080") must equal the whole
 * value; an entry without one must equal its host part (the value before
 * ":port"; for "[v6]:port" the bracketed address, brackets included). A port must be 1 to 5 digits; anything
 * else (empty, spaces, controls, a second colon outside brackets) is not
 * allowed. Stops DNS rebinding: a page on evil.example whose name now
 * resolves to us still sends Host: evil.example. */
bool http_header_host_allowed(const char *v, size_t len, const char *const *list, size_t n);

/* Whether an Origin value equals one of list[0..n) ignoring ASCII case
 * (whole value, no normalisation: "null" matches only a listed "null"). */
bool http_header_origin_allowed(const char *v, size_t len, const char *const *list, size_t n);

/* Whether a Content-Type is application/json (any case), alone or with
 * parameters after ';' (charset=utf-8). "application/json-seq" is not. */
bool http_header_content_json(const char *v, size_t len);

#define HTTP_ACCEPT_JSON 1u /* application/json, application/[*], [*]/[*] */
#define HTTP_ACCEPT_SSE	 2u /* text/event-stream, text/[*], [*]/[*] */

/* The media types an Accept value admits, as HTTP_ACCEPT_* bits: a
 * comma-separated list of ranges with optional parameters; a range with
 * q=0 (q=0, 0.0, 0.00, 0.000) admits nothing. Malformed entries are
 * skipped. */
unsigned http_header_accept(const char *v, size_t len);

#endif
