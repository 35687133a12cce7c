/* fuzz_sse.c: the event-stream reader (pkg/http/sse.h) on hostile bytes.
 *
 * The first byte picks the chunk size (its low 5 bits, plus one) and the
 * caps (bit 5: caps small enough for the input to pass them); the rest is
 * the stream, fed in chunks of that size, each in a buffer of exactly its
 * size so that reading past one is caught. Every event must keep the
 * header's promises (data within the cap and NUL-terminated, a type that is
 * non-empty with no CR or LF, an id within its cap, all of it valid UTF-8),
 * and the stream fed all at once must give the same events (hashed), the
 * same outcome, the same last id and retry time. A failed parser must keep
 * refusing and dispatch nothing more.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "http/sse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SMALL_LINE_MAX	48u
#define SMALL_EVENT_MAX 96u
#define BIG_LINE_MAX	4096u
#define BIG_EVENT_MAX	8192u

struct run {
	struct sse *p;
	size_t event_max;
	uint64_t hash;
	size_t events;
};

static void mix(struct run *r, const void *b, size_t len)
{
	const unsigned char *s = b;

	for (size_t i = 0; i < len; i++)
		r->hash = (r->hash ^ s[i]) * 0x100000001b3ull; /* FNV-1a */
}

static void on_event(void *ctx, const char *type, const char *d, size_t len, const char *last_id)
{
	struct run *r = ctx;
	size_t tlen = strlen(type), idlen = strlen(last_id);

	if (len > r->event_max || d[len] != '\0' || memchr(d, '\r', len))
		abort();
	if (tlen == 0 || memchr(type, '\r', tlen) || memchr(type, '\n', tlen))
		abort();
	if (idlen > SSE_ID_MAX || memchr(last_id, '\r', idlen) || memchr(last_id, '\n', idlen) ||
	    strcmp(last_id, sse_last_id(r->p)) != 0)
		abort();
	if (appl_utf8_prefix(d, len) != len || appl_utf8_prefix(type, tlen) != tlen ||
	    appl_utf8_prefix(last_id, idlen) != idlen)
		abort();
	if (sse_feed(r->p, "\n", 1) != -EBUSY)
		abort();
	mix(r, type, tlen + 1);
	mix(r, &len, sizeof(len));
	mix(r, d, len);
	mix(r, last_id, idlen + 1);
	r->events++;
}

/* Feed s[0..len) in chunks of chunk bytes; the outcome, 0 or the failure. */
static int run(struct run *r, const struct sse_limits *lim, const uint8_t *s, size_t len,
	       size_t chunk)
{
	int rc = 0;

	r->hash = 0xcbf29ce484222325ull;
	r->events = 0;
	r->event_max = lim->event_max;
	if (sse_new(lim, on_event, r, &r->p, NULL) < 0)
		abort();
	for (size_t i = 0; i < len && rc == 0; i += chunk) {
		size_t n = len - i < chunk ? len - i : chunk;
		char *c = malloc(n);

		if (!c)
			abort();
		memcpy(c, s + i, n);
		rc = sse_feed(r->p, c, n);
		free(c);
	}
	if (rc < 0) {
		size_t before = r->events;

		if (rc != -EMSGSIZE || !sse_why(r->p) || sse_feed(r->p, "data: x\n\n", 9) != rc ||
		    sse_end(r->p) != rc || r->events != before)
			abort();
	} else if (sse_end(r->p) != 0 || sse_feed(r->p, "\n", 1) != -EPIPE) {
		abort();
	}
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sse_limits lim;
	struct run a, b;
	size_t chunk;
	int rca, rcb;

	if (size < 1)
		return 0;
	chunk = (size_t)(data[0] & 0x1f) + 1;
	lim.line_max = data[0] & 0x20 ? SMALL_LINE_MAX : BIG_LINE_MAX;
	lim.event_max = data[0] & 0x20 ? SMALL_EVENT_MAX : BIG_EVENT_MAX;
	rca = run(&a, &lim, data + 1, size - 1, chunk);
	rcb = run(&b, &lim, data + 1, size - 1, size);
	if (rca != rcb || a.events != b.events || a.hash != b.hash ||
	    strcmp(sse_last_id(a.p), sse_last_id(b.p)) != 0 ||
	    sse_retry_ms(a.p) != sse_retry_ms(b.p))
		abort();
	sse_free(a.p);
	sse_free(b.p);
	return 0;
}
