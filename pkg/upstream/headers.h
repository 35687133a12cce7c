/* headers.h: the header lines of an HTTP upstream's requests (headers.c),
 * for http.c: the policy's, filled from the secrets (upstream.h), and our
 * own, among them the tool parameters 2026-07-28 mirrors into headers.
 */
#ifndef APPL_UPSTREAM_HEADERS_H
#define APPL_UPSTREAM_HEADERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "policy/policy.h"
#include "upstream/upstream.h"

#define UP_HTTP_LINE_MAX       (8u * 1024) /* one header line */
#define UP_HTTP_PARAMS_MAX     16u	   /* x-mcp-header parameters of one tool */
#define UP_HTTP_PARAM_NAME_MAX 64u
#define UP_HTTP_OWN_MAX	       (8u + UP_HTTP_PARAMS_MAX) /* our header lines of a request */

/* "Name: value" of server's header h (the policy's template), each
 * {env:NAME} filled from s, or from the environment for a name s does not
 * hold (s may be NULL), in new memory of UP_HTTP_LINE_MAX bytes that
 * upstream_header_free wipes. NULL with err: -ENOENT naming a variable
 * (never a value) that neither has, -EINVAL when the filled value is too
 * long or holds a line break (its bytes are not quoted), -ENOMEM. */
char *upstream_header_fill(const struct upstream_secrets *s, const char *server,
			   const struct policy_header *h, struct appl_err *err);
/* Wipe line (from upstream_header_fill) and free it. Safe on NULL. */
void upstream_header_free(char *line);

/* Our own header lines of one request, made as needed. */
struct up_hdrs {
	char *v[UP_HTTP_OWN_MAX];
	size_t n;
	bool bad; /* out of memory, too many, or a line over UP_HTTP_LINE_MAX */
};

/* Add "name: value" (both borrowed; value NULL: out of memory) to o; o->bad
 * says when it could not be. */
void upstream_hdrs_add(struct up_hdrs *o, const char *name, const char *value);
void upstream_hdrs_free(struct up_hdrs *o);

/* v[0..n) as MCP carries a header value: as it is when it is visible ASCII
 * and spaces with no white space at either end, else (and when it looks
 * like the escape itself) =?base64?...?= of its bytes. A new string, or
 * NULL. */
char *upstream_header_value(const char *v, size_t n);

/* Mcp-Param-NAME into o for each argument of args (borrowed; a call's
 * arguments, may be NULL) that schema (its tool's input schema; may be
 * NULL) marks with x-mcp-header; null or absent ones are left out. */
void upstream_param_headers_add(const json_t *schema, const json_t *args, struct up_hdrs *o);

#endif
