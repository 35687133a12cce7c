/* fuzz_http_headers.c: the front door's pure header judges
 * (pkg/http/header.h) on hostile bytes.
 *
 * The first byte picks a judge, the rest is the header value, handed over
 * as (buf, len) in a buffer of exactly that size so that reading past it
 * (trusting a NUL that is not there) is caught. A token found must lie
 * inside the value and hold only token68 bytes; a host the judges admit
 * must also be admitted with the port cut off.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const hosts[] = {"localhost", "127.0.0.1", "[::1]", ""};
static const char *const origins[] = {"http://localhost:3000", "null"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tok;
	size_t toklen;
	char *v;

	if (size < 1)
		return 0;
	v = malloc(size - 1 ? size - 1 : 1);
	if (!v)
		return 0;
	memcpy(v, data + 1, size - 1);
	switch (data[0] % 5) {
	case 0:
		if (http_header_bearer(v, size - 1, &tok, &toklen) == 0) {
			if (tok < v || tok + toklen > v + size - 1 || toklen == 0 ||
			    toklen > HTTP_TOKEN_MAX || memchr(tok, ' ', toklen))
				abort();
		}
		break;
	case 1:
		if (http_header_host_allowed(v, size - 1, hosts, 4)) {
			const char *colon = v[0] == '[' ? memchr(v, ']', size - 1) : v;

			colon = colon ? memchr(colon, ':', size - 1 - (size_t)(colon - v)) : NULL;
			if (colon && !http_header_host_allowed(v, (size_t)(colon - v), hosts, 4))
				abort();
		}
		break;
	case 2:
		(void)http_header_origin_allowed(v, size - 1, origins, 2);
		break;
	case 3:
		(void)http_header_content_json(v, size - 1);
		break;
	default:
		if (http_header_accept(v, size - 1) & ~(HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE))
			abort();
		break;
	}
	free(v);
	return 0;
}
