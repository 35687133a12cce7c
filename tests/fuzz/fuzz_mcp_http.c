/* fuzz_mcp_http.c: what the HTTP transport decides about a POST before the
 * session core sees it (pkg/mcp/http_check.h), on hostile bytes.
 *
 * The input is four header lines (MCP-Protocol-Version, Mcp-Method,
 * Mcp-Name, Mcp-Session-Id; a line of one '-' is a header not sent) and
 * the body after them; each header value sits in a buffer of its own
 * exact size. Whatever the bytes: a verdict that goes on has no code and
 * an empty text, a refusal has a 4xx status and a text, a session it lets
 * through has our id's form, a request without a session goes on only
 * with every standard header agreeing with its body, an empty body never
 * goes on (a parse error), and the status of any answer is one the
 * transport uses.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/http_check.h"
#include "mcp/session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next line of [*p, end) as a new NUL-terminated string, or NULL for
 * "-" or when the input ends first. */
static char *line(const uint8_t **p, const uint8_t *end, int *ended)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n;
	char *s;

	if (!nl) {
		*ended = 1;
		return NULL;
	}
	n = (size_t)(nl - *p);
	s = memchr(*p, '\0', n) || (n == 1 && **p == '-') ? NULL : malloc(n + 1);
	if (s) {
		memcpy(s, *p, n);
		s[n] = '\0';
	}
	*p = nl + 1;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	char *h[4] = {NULL, NULL, NULL, NULL};
	int ended = 0;
	struct mcp_post in;
	struct mcp_post_verdict vd;
	json_t *body;
	unsigned st;

	for (int i = 0; i < 4 && !ended; i++)
		h[i] = line(&p, end, &ended);
	body = json_loadb((const char *)p, (size_t)(end - p), 0, NULL);
	in = (struct mcp_post){.protocol_version = h[0],
			       .method = h[1],
			       .name = h[2],
			       .session = h[3],
			       .body = body,
			       .raw = (const char *)p,
			       .raw_len = (size_t)(end - p)};
	mcp_post_check(&in, &vd);
	if (memchr(vd.msg, '\0', sizeof(vd.msg)) == NULL)
		abort();
	if (vd.status == 0 && (vd.code || vd.msg[0]))
		abort();
	if (vd.status && (vd.status < 400 || vd.status > 499 || !vd.msg[0]))
		abort();
	if (vd.status == 0 && vd.kind == MCP_POST_SESSION && !mcp_sid_valid(h[3]))
		abort();
	if (vd.status == 0 && vd.kind == MCP_POST_MODERN && (!h[0] || !h[1]))
		abort();
	if ((vd.kind == MCP_POST_SESSION) != (h[3] != NULL))
		abort();
	if (p == end && vd.status != 404 && (vd.status != 400 || vd.code != JSONRPC_PARSE_ERROR))
		abort();
	st = mcp_answer_status(body, vd.kind == MCP_POST_MODERN);
	if (st != 200 && st != 400 && st != 404)
		abort();
	json_decref(body);
	for (int i = 0; i < 4; i++)
		free(h[i]);
	return 0;
}
