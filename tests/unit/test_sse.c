/* test_sse.c: the event-stream reader (pkg/http/sse.h): every rule of the
 * WHATWG interpretation it follows (line ends, BOM, comments, fields,
 * dispatch, id and retry), the same events however the stream is cut, and
 * each cap: exactly at it passes, one byte past it fails for good. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "http/sse.h"

#define EV_MAX	    32u	 /* events one test records */
#define TYPE_MAX    64u	 /* bytes of a recorded type */
#define RANDOM_CUTS 200u /* random cuttings of the mixed stream */

struct ev {
	char type[TYPE_MAX];
	char *data;
	size_t len;
	char id[SSE_ID_MAX + 1];
};

/* What a parser dispatched: each event, and all of them in one log of
 * bytes that two runs can be compared by. */
struct rec {
	struct sse *p;
	size_t n;
	struct ev ev[EV_MAX];
	char *log;
	size_t log_len;
	bool reenter; /* the hook tries to feed and end its own parser */
};

static void log_add(struct rec *r, const void *b, size_t len)
{
	r->log = realloc(r->log, r->log_len + len);
	assert_non_null(r->log);
	memcpy(r->log + r->log_len, b, len);
	r->log_len += len;
}

static void on_event(void *ctx, const char *type, const char *data, size_t len, const char *last_id)
{
	struct rec *r = ctx;
	struct ev *e;

	/* The hook's view agrees with the parser's, and the data is ended. */
	assert_string_equal(last_id, sse_last_id(r->p));
	assert_int_equal(data[len], '\0');
	assert_true(type[0] != '\0');
	if (r->reenter) {
		assert_int_equal(sse_feed(r->p, "data: x\n\n", 9), -EBUSY);
		assert_int_equal(sse_end(r->p), -EBUSY);
	}
	log_add(r, type, strlen(type) + 1);
	log_add(r, &len, sizeof(len));
	log_add(r, data, len);
	log_add(r, last_id, strlen(last_id) + 1);
	assert_true(r->n < EV_MAX);
	e = &r->ev[r->n++];
	assert_true(strlen(type) < TYPE_MAX);
	memcpy(e->type, type, strlen(type) + 1);
	e->data = malloc(len + 1);
	assert_non_null(e->data);
	memcpy(e->data, data, len + 1);
	e->len = len;
	memcpy(e->id, last_id, strlen(last_id) + 1);
}

static void rec_init(struct rec *r, const struct sse_limits *lim)
{
	struct appl_err err = {0};

	memset(r, 0, sizeof(*r));
	assert_int_equal(sse_new(lim, on_event, r, &r->p, &err), 0);
	assert_non_null(r->p);
}

static void rec_free(struct rec *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->ev[i].data);
	free(r->log);
	sse_free(r->p);
	memset(r, 0, sizeof(*r));
}

/* Feed s[0..len) in chunks of chunk bytes (0: all at once); the first
 * failure, or 0. */
static int feed(struct rec *r, const char *s, size_t len, size_t chunk)
{
	size_t i = 0;
	int rc;

	if (chunk == 0)
		chunk = len ? len : 1;
	do {
		size_t n = len - i < chunk ? len - i : chunk;

		rc = sse_feed(r->p, s + i, n);
		if (rc < 0)
			return rc;
		i += n;
	} while (i < len);
	return 0;
}

static int feeds(struct rec *r, const char *s)
{
	return feed(r, s, strlen(s), 0);
}

static void assert_ev(const struct rec *r, size_t i, const char *type, const char *data,
		      const char *id)
{
	assert_true(i < r->n);
	assert_string_equal(r->ev[i].type, type);
	assert_int_equal(r->ev[i].len, strlen(data));
	assert_memory_equal(r->ev[i].data, data, strlen(data) + 1);
	assert_string_equal(r->ev[i].id, id);
}

/* One event with the given data from the whole of s, fed at once. */
static void assert_data_of(const char *s, size_t len, const char *data, size_t dlen)
{
	struct rec r;

	rec_init(&r, NULL);
	assert_int_equal(feed(&r, s, len, 0), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ev[0].len, dlen);
	assert_memory_equal(r.ev[0].data, data, dlen);
	rec_free(&r);
}

/* The same, for a literal stream and a literal of the data wanted. */
#define DATA_OF(s, want) assert_data_of(s, sizeof(s) - 1, want, sizeof(want) - 1)

/* How many events s makes, fed at once. */
static size_t events_of(const char *s)
{
	struct rec r;
	size_t n;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, s), 0);
	n = r.n;
	rec_free(&r);
	return n;
}

static void test_one_event(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "data: hello\n"), 0);
	assert_int_equal(r.n, 0); /* no empty line yet */
	assert_int_equal(feeds(&r, "\n"), 0);
	assert_int_equal(r.n, 1);
	assert_ev(&r, 0, "message", "hello", "");
	assert_string_equal(sse_last_id(r.p), "");
	assert_int_equal(sse_retry_ms(r.p), 0);
	assert_null(sse_why(r.p));
	rec_free(&r);
}

/* Every rule at once: BOM, each line end, comments, fields without a colon,
 * ids, retry, event types, NUL and multi-byte characters, invalid UTF-8. */
static const char mixed[] = "\xef\xbb\xbf: a comment\r\n"
			    "retry: 2500\r"
			    "id: one\r\n"
			    "data: first\n"
			    "data:second\r"
			    "\r\n"
			    "event: ping\n"
			    "data\n"
			    "\n"
			    "id\r"
			    "data: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xff \xe2\x82\r"
			    "\r"
			    "event: x\n"
			    "ignored: field\n"
			    "data: nul\0inside\n"
			    "\n"
			    "id: two\n"
			    "data: last, never ended\n";

static void check_mixed(const struct rec *r)
{
	assert_int_equal(r->n, 4);
	assert_ev(r, 0, "message", "first\nsecond", "one");
	assert_ev(r, 1, "ping", "", "one");
	assert_ev(r, 2, "message",
		  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbd \xef\xbf\xbd", "");
	assert_string_equal(r->ev[3].type, "x");
	assert_int_equal(r->ev[3].len, 10);
	assert_memory_equal(r->ev[3].data, "nul\0inside", 11);
	assert_int_equal(sse_retry_ms(r->p), 2500);
	assert_string_equal(sse_last_id(r->p), ""); /* "two" came with no empty line */
}

static void test_every_cut_gives_the_same_events(void **state)
{
	struct rec whole, cut;
	uint32_t seed = 12345;
	(void)state;

	rec_init(&whole, NULL);
	assert_int_equal(feed(&whole, mixed, sizeof(mixed) - 1, 0), 0);
	check_mixed(&whole);
	/* Every fixed chunk size, from byte by byte to all at once. */
	for (size_t chunk = 1; chunk <= sizeof(mixed) - 1; chunk++) {
		rec_init(&cut, NULL);
		assert_int_equal(feed(&cut, mixed, sizeof(mixed) - 1, chunk), 0);
		check_mixed(&cut);
		assert_int_equal(cut.log_len, whole.log_len);
		assert_memory_equal(cut.log, whole.log, whole.log_len);
		rec_free(&cut);
	}
	/* Chunks of random sizes (empty ones included). */
	for (unsigned k = 0; k < RANDOM_CUTS; k++) {
		size_t i = 0;

		rec_init(&cut, NULL);
		while (i < sizeof(mixed) - 1) {
			size_t n;

			seed = seed * 1103515245u + 12345u;
			n = (seed >> 16) % 9;
			if (n > sizeof(mixed) - 1 - i)
				n = sizeof(mixed) - 1 - i;
			assert_int_equal(sse_feed(cut.p, mixed + i, n), 0);
			i += n;
		}
		assert_int_equal(cut.log_len, whole.log_len);
		assert_memory_equal(cut.log, whole.log, whole.log_len);
		rec_free(&cut);
	}
	rec_free(&whole);
}

static void test_line_ends(void **state)
{
	struct rec r;
	(void)state;

	/* CR alone, LF alone, CRLF: each one line end. */
	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "data: a\r\rdata: b\n\ndata: c\r\n\r\ndata: d\n\r"), 0);
	assert_int_equal(r.n, 4);
	assert_ev(&r, 0, "message", "a", "");
	assert_ev(&r, 1, "message", "b", "");
	assert_ev(&r, 2, "message", "c", "");
	assert_ev(&r, 3, "message", "d", ""); /* LF then CR: two ends */
	rec_free(&r);

	/* A CR that ends a chunk and the LF that starts the next are one end:
	 * counted as two, "x" would be an event of its own. */
	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "data: x\r"), 0);
	assert_int_equal(feeds(&r, "\ndata: y\r"), 0);
	assert_int_equal(feeds(&r, "\n"), 0);
	assert_int_equal(r.n, 0);
	assert_int_equal(feeds(&r, "\r"), 0);
	assert_int_equal(feeds(&r, "\n"), 0);
	assert_int_equal(r.n, 1);
	assert_ev(&r, 0, "message", "x\ny", "");
	/* A CR at a chunk's end followed by anything else, then by a CR. */
	assert_int_equal(feeds(&r, "data: z\r"), 0);
	assert_int_equal(feeds(&r, "data: w\r"), 0);
	assert_int_equal(feeds(&r, "\r"), 0);
	assert_int_equal(r.n, 2);
	assert_ev(&r, 1, "message", "z\nw", "");
	rec_free(&r);

	/* CRLF CRLF, the LF of each in the next chunk. */
	rec_init(&r, NULL);
	assert_int_equal(feed(&r, "data: q\r\n\r\n", 11, 8), 0);
	assert_int_equal(r.n, 1);
	assert_ev(&r, 0, "message", "q", "");
	rec_free(&r);
}

static void test_bom(void **state)
{
	struct rec r;
	(void)state;

	/* Skipped at the start, even cut into three chunks. */
	rec_init(&r, NULL);
	assert_int_equal(feed(&r,
			      "\xef\xbb\xbf"
			      "data: a\n\n",
			      12, 1),
			 0);
	assert_int_equal(r.n, 1);
	assert_ev(&r, 0, "message", "a", "");
	/* Not skipped later: "\ufeffdata" is an unknown field. */
	assert_int_equal(feeds(&r, "\xef\xbb\xbf"
				   "data: b\n\n"),
			 0);
	assert_int_equal(r.n, 1);
	rec_free(&r);

	/* Only once: a second BOM is a character of the first line. */
	assert_int_equal(events_of("\xef\xbb\xbf\xef\xbb\xbf"
				   "data: a\n\n"),
			 0);
	/* A BOM cut short is not one: U+FFFD, then the line. */
	assert_int_equal(events_of("\xef\xbb"
				   "data: a\n\n"),
			 0);
	DATA_OF("\xef\xbb\xbf"
		"data:\xef\xbb\n\n",
		"\xef\xbf\xbd");
}

static void test_comments(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, ": hello\ndata: a\n:data: b\n\n"), 0);
	assert_int_equal(r.n, 1);
	assert_ev(&r, 0, "message", "a", "");
	/* A comment alone, then an empty line: nothing to dispatch. */
	assert_int_equal(feeds(&r, ":\n\n: keep-alive\r\n\r\n"), 0);
	assert_int_equal(r.n, 1);
	rec_free(&r);
}

static void test_field_parsing(void **state)
{
	(void)state;

	DATA_OF("data:nospace\n\n", "nospace");
	DATA_OF("data:  two\n\n", " two"); /* only one space goes */
	DATA_OF("data:\ttab\n\n", "\ttab");
	DATA_OF("data: a:b: c\n\n", "a:b: c");
	DATA_OF("data\n\n", ""); /* no colon: an empty value */
	DATA_OF("data:\n\n", "");
	DATA_OF("data\ndata\n\n", "\n");
	DATA_OF("unknown: x\ndata: y\nfoo\n\n", "y");
	/* Names are exact: case, a space before the colon. */
	assert_int_equal(events_of("DATA: x\n\n"), 0);
	assert_int_equal(events_of("data : x\n\n"), 0);
	assert_int_equal(events_of(" data: x\n\n"), 0);
	assert_int_equal(events_of("\n\n\n"), 0);
}

static void test_multiline_data(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "data: a\ndata: b\ndata:\ndata: c\n\ndata:\ndata:\n\n"), 0);
	assert_int_equal(r.n, 2);
	assert_ev(&r, 0, "message", "a\nb\n\nc", "");
	assert_ev(&r, 1, "message", "\n", "");
	rec_free(&r);
}

static void test_event_type(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "event: ping\ndata: 1\n\ndata: 2\n\n"), 0);
	assert_ev(&r, 0, "ping", "1", "");
	assert_ev(&r, 1, "message", "2", ""); /* the type is reset */
	/* An event with no data dispatches nothing and resets its type too. */
	assert_int_equal(feeds(&r, "event: lost\n\ndata: 3\n\n"), 0);
	assert_ev(&r, 2, "message", "3", "");
	/* The last event field wins; an empty one means "message". */
	assert_int_equal(feeds(&r, "event: a\nevent: b\ndata: 4\n\nevent\ndata: 5\n\n"), 0);
	assert_ev(&r, 3, "b", "4", "");
	assert_ev(&r, 4, "message", "5", "");
	assert_int_equal(r.n, 5);
	rec_free(&r);
}

static void test_nul_is_data(void **state)
{
	static const char s[] = "data: a\0b\n\nevent: message\0x\ndata: 1\n\ndata: 2\n\n";
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feed(&r, s, sizeof(s) - 1, 0), 0);
	/* The type with a NUL is not dispatched (cut there it would be
	 * "message"), and is reset like any other. */
	assert_int_equal(r.n, 2);
	assert_int_equal(r.ev[0].len, 3);
	assert_memory_equal(r.ev[0].data, "a\0b\0", 4);
	assert_ev(&r, 1, "message", "2", "");
	rec_free(&r);
}

static void test_utf8_replacement(void **state)
{
	(void)state;

	DATA_OF("data: \xff\n\n", "\xef\xbf\xbd");
	DATA_OF("data: \xe2\x82\n\n", "\xef\xbf\xbd"); /* cut by the LF */
	DATA_OF("data: \xe2\x82x\n\n", "\xef\xbf\xbdx");
	DATA_OF("data: \xc0\xaf\n\n", "\xef\xbf\xbd\xef\xbf\xbd"); /* overlong */
	DATA_OF("data: \xed\xa0\x80\n\n", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	DATA_OF("data: \xf4\x90\x80\x80\n\n",
		"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* > U+10FFFF */
	DATA_OF("data: \xf4\x8f\xbf\xbf\n\n", "\xf4\x8f\xbf\xbf");
	/* A character cut between chunks is whole again. */
	{
		struct rec r;

		rec_init(&r, NULL);
		assert_int_equal(feed(&r, "data: \xf0\x9f\x98\x80\n\n", 12, 1), 0);
		assert_int_equal(r.n, 1);
		assert_ev(&r, 0, "message", "\xf0\x9f\x98\x80", "");
		rec_free(&r);
	}
}

static void test_id_persists(void **state)
{
	static const char nul_id[] = "id: a\0b\ndata: e\n\n";
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n"), 0);
	assert_ev(&r, 0, "message", "a", "1");
	assert_ev(&r, 1, "message", "b", "1");
	assert_ev(&r, 2, "message", "c", "2");
	/* An id with no data: no event, but the last id is set. */
	assert_int_equal(feeds(&r, "id: 3\n\n"), 0);
	assert_int_equal(r.n, 3);
	assert_string_equal(sse_last_id(r.p), "3");
	/* An id with a NUL is ignored. */
	assert_int_equal(feed(&r, nul_id, sizeof(nul_id) - 1, 0), 0);
	assert_ev(&r, 3, "message", "e", "3");
	/* The id takes effect at the empty line, not before. */
	assert_int_equal(feeds(&r, "id: 4\ndata: f\n"), 0);
	assert_string_equal(sse_last_id(r.p), "3");
	assert_int_equal(feeds(&r, "\n"), 0);
	assert_ev(&r, 4, "message", "f", "4");
	/* An empty id (with or without a colon) resets it. */
	assert_int_equal(feeds(&r, "id\ndata: g\n\nid: 5\n\nid:\ndata: h\n\n"), 0);
	assert_ev(&r, 5, "message", "g", "");
	assert_ev(&r, 6, "message", "h", "");
	assert_int_equal(feeds(&r, "id:  sp\n\n"), 0); /* one space dropped */
	assert_string_equal(sse_last_id(r.p), " sp");
	rec_free(&r);
}

static void test_retry(void **state)
{
	static const struct {
		const char *line;
		uint64_t want;
	} cases[] = {
		{"retry: 1500\n", 1500},
		{"retry: 15x\n", 1500},
		{"retry:\n", 1500},
		{"retry\n", 1500},
		{"retry: -5\n", 1500},
		{"retry: +5\n", 1500},
		{"retry:  5\n", 1500},
		{"retry: 5 \n", 1500},
		{"retry: 0x10\n", 1500},
		{"retry:42\n", 42},
		{"retry: 18446744073709551614\n", UINT64_MAX - 1},
		{"retry: 0\n", 0},
		{"retry: 18446744073709551615\n", UINT64_MAX},
		{"retry: 007\n", 7},
		{"retry: 99999999999999999999999999\n", UINT64_MAX},
	};
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(sse_retry_ms(r.p), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(feeds(&r, cases[i].line), 0);
		assert_true(sse_retry_ms(r.p) == cases[i].want);
	}
	assert_int_equal(r.n, 0); /* retry alone dispatches nothing */
	rec_free(&r);
}

static void test_line_cap(void **state)
{
	const struct sse_limits lim = {.line_max = 16, .event_max = 100};
	struct rec r;
	(void)state;

	/* Exactly 16 bytes, in every line end, and a comment of 16. */
	rec_init(&r, &lim);
	assert_int_equal(feeds(&r, "data: 0123456789\n\n:012345678901234\r\n"), 0);
	assert_int_equal(feeds(&r, "data: 0123456789\r\r"), 0);
	assert_int_equal(r.n, 2);
	assert_ev(&r, 0, "message", "0123456789", "");
	/* 17 fails at its 17th byte, before any line end; the event before it
	 * in the chunk is dispatched, none after. */
	assert_int_equal(feeds(&r, "data: x\n\ndata: 01234567890"), -EMSGSIZE);
	assert_int_equal(r.n, 3);
	assert_ev(&r, 2, "message", "x", "");
	assert_non_null(sse_why(r.p));
	assert_int_equal(feeds(&r, "\n\ndata: y\n\n"), -EMSGSIZE);
	assert_int_equal(feeds(&r, ""), -EMSGSIZE);
	assert_int_equal(sse_end(r.p), -EMSGSIZE);
	assert_int_equal(r.n, 3);
	rec_free(&r);

	/* A comment is capped as well; so is a line of multi-byte characters
	 * (eight é are 16 bytes), byte by byte. */
	rec_init(&r, &lim);
	assert_int_equal(feed(&r,
			      "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\n",
			      17, 1),
			 0);
	assert_int_equal(feeds(&r, ":0123456789abcdef"), -EMSGSIZE);
	rec_free(&r);
}

static void test_event_cap(void **state)
{
	const struct sse_limits lim = {.line_max = 64, .event_max = 8};
	struct rec r;
	(void)state;

	rec_init(&r, &lim);
	/* 8 bytes in one line, and in two (4, the LF between, 3). */
	assert_int_equal(feeds(&r, "data: 12345678\n\ndata: 1234\ndata: 123\n\n"), 0);
	assert_int_equal(r.n, 2);
	assert_ev(&r, 0, "message", "12345678", "");
	assert_ev(&r, 1, "message", "1234\n123", "");
	/* Nine empty data lines are 8 LFs: at the cap. */
	assert_int_equal(feeds(&r, "data\ndata\ndata\ndata\ndata\ndata\ndata\ndata\ndata\n\n"), 0);
	assert_ev(&r, 2, "message", "\n\n\n\n\n\n\n\n", "");
	/* 9 fails at the line that passes the cap, before the empty line. */
	assert_int_equal(feeds(&r, "data: 1234\ndata: 1234\n"), -EMSGSIZE);
	assert_non_null(sse_why(r.p));
	assert_int_equal(feeds(&r, "\n"), -EMSGSIZE);
	assert_int_equal(r.n, 3);
	rec_free(&r);

	rec_init(&r, &lim);
	assert_int_equal(feeds(&r, "data: 123456789\n"), -EMSGSIZE);
	assert_int_equal(feeds(&r, "data: 1\n\n"), -EMSGSIZE);
	assert_int_equal(r.n, 0);
	rec_free(&r);
}

static void test_id_cap(void **state)
{
	char line[SSE_ID_MAX + 16];
	struct rec r;
	(void)state;

	memcpy(line, "id: ", 4);
	memset(line + 4, 'i', SSE_ID_MAX);
	memcpy(line + 4 + SSE_ID_MAX, "\n\n", 2);
	rec_init(&r, NULL);
	assert_int_equal(feed(&r, line, 4 + SSE_ID_MAX + 2, 0), 0);
	assert_int_equal(strlen(sse_last_id(r.p)), SSE_ID_MAX);
	assert_int_equal(sse_last_id(r.p)[0], 'i');
	/* One byte more fails, and the last id stays. */
	line[4 + SSE_ID_MAX] = 'j';
	memcpy(line + 5 + SSE_ID_MAX, "\n\n", 2);
	assert_int_equal(feed(&r, line, 5 + SSE_ID_MAX + 2, 7), -EMSGSIZE);
	assert_int_equal(strlen(sse_last_id(r.p)), SSE_ID_MAX);
	assert_int_equal(feeds(&r, "data: a\n\n"), -EMSGSIZE);
	assert_int_equal(r.n, 0);
	rec_free(&r);
}

/* The defaults: an event of a whole upstream message passes, one byte more
 * does not. */
static void test_default_caps(void **state)
{
	size_t len = 6 + SSE_EVENT_MAX_DEF + 2;
	char *s = malloc(len + 1);
	struct rec r;
	(void)state;

	assert_non_null(s);
	memcpy(s, "data: ", 6);
	memset(s + 6, 'd', SSE_EVENT_MAX_DEF + 1);
	memcpy(s + 6 + SSE_EVENT_MAX_DEF, "\n\n", 2);
	rec_init(&r, NULL);
	assert_int_equal(feed(&r, s, len, 65536), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.ev[0].len, SSE_EVENT_MAX_DEF);
	rec_free(&r);
	s[6 + SSE_EVENT_MAX_DEF] = 'd';
	s[6 + SSE_EVENT_MAX_DEF + 1] = '\n';
	rec_init(&r, NULL);
	assert_int_equal(feed(&r, s, len, 0), -EMSGSIZE);
	assert_int_equal(r.n, 0);
	rec_free(&r);
	free(s);
}

static void test_end_discards(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "id: 1\ndata: a\n\nid: 2\ndata: b\n"), 0);
	assert_int_equal(sse_end(r.p), 0);
	assert_int_equal(r.n, 1); /* b had no empty line */
	assert_string_equal(sse_last_id(r.p), "1");
	assert_int_equal(feeds(&r, "\n"), -EPIPE);
	assert_int_equal(sse_end(r.p), 0);
	assert_int_equal(r.n, 1);
	rec_free(&r);

	/* A last line with no end is not one either. */
	rec_init(&r, NULL);
	assert_int_equal(feeds(&r, "data: a\n\n\n"), 0);
	assert_int_equal(feeds(&r, "data: b"), 0);
	assert_int_equal(sse_end(r.p), 0);
	assert_int_equal(r.n, 1);
	rec_free(&r);
}

static void test_hook_cannot_reenter(void **state)
{
	struct rec r;
	(void)state;

	rec_init(&r, NULL);
	r.reenter = true;
	assert_int_equal(feeds(&r, "retry: 9\nid: k\ndata: a\n\ndata: b\n\n"), 0);
	assert_int_equal(r.n, 2); /* nothing the hook fed was read */
	assert_ev(&r, 1, "message", "b", "k");
	assert_int_equal(sse_retry_ms(r.p), 9);
	rec_free(&r);
}

static void test_new_refuses(void **state)
{
	const struct sse_limits big = {.line_max = SSE_LIMIT_CEIL + 1};
	const struct sse_limits ceil = {.line_max = SSE_LIMIT_CEIL, .event_max = SSE_LIMIT_CEIL};
	struct appl_err err = {0};
	struct sse *p;
	(void)state;

	memset(&p, 0xa5, sizeof(p)); /* garbage: a refusal must clear it */

	assert_int_equal(sse_new(NULL, NULL, NULL, &p, &err), -EINVAL);
	assert_null(p);
	assert_true(err.msg[0] != '\0');
	assert_int_equal(sse_new(&big, on_event, NULL, &p, &err), -EINVAL);
	assert_null(p);
	assert_int_equal(sse_new(&ceil, on_event, NULL, &p, &err), 0);
	assert_non_null(p);
	sse_free(p);
	sse_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_event),
		cmocka_unit_test(test_every_cut_gives_the_same_events),
		cmocka_unit_test(test_line_ends),
		cmocka_unit_test(test_bom),
		cmocka_unit_test(test_comments),
		cmocka_unit_test(test_field_parsing),
		cmocka_unit_test(test_multiline_data),
		cmocka_unit_test(test_event_type),
		cmocka_unit_test(test_nul_is_data),
		cmocka_unit_test(test_utf8_replacement),
		cmocka_unit_test(test_id_persists),
		cmocka_unit_test(test_retry),
		cmocka_unit_test(test_line_cap),
		cmocka_unit_test(test_event_cap),
		cmocka_unit_test(test_id_cap),
		cmocka_unit_test(test_default_caps),
		cmocka_unit_test(test_end_discards),
		cmocka_unit_test(test_hook_cannot_reenter),
		cmocka_unit_test(test_new_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
