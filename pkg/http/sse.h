/* sse.h: an incremental reader of a text/event-stream body (Server-Sent
 * Events), as a remote MCP server sends it over Streamable HTTP.
 *
 * The stream is read as the WHATWG HTML standard says an EventSource reads
 * it ("Interpreting an event stream"): the bytes are decoded as UTF-8 (a
 * leading BOM dropped once, each invalid sequence replaced by U+FFFD); lines
 * end with CRLF, LF or CR; an empty line dispatches the event; a line that
 * starts with ':' is a comment; any other line is a field, "name:value" (one
 * space after the colon dropped) or "name" alone (an empty value). The fields
 * read are data, event, id and retry; others are ignored. Bytes may come in
 * chunks of any size, cut anywhere (mid-line, between CR and LF, inside a
 * character): the events are the same however the stream is cut.
 *
 * The server is untrusted, so everything it can make us hold is capped, and
 * a stream past a cap is refused, not cut: a line longer than line_max, an
 * event whose data would pass event_max, or an id longer than SSE_ID_MAX
 * fails the parser (-EMSGSIZE). A failed parser dispatches nothing more and
 * refuses every later feed with the same code. Buffers grow as needed, never
 * past the caps: at most 2 * line_max + event_max bytes are held, besides
 * two ids of SSE_ID_MAX bytes and a few more.
 *
 * Re-entrancy: on_event is called from inside sse_feed and may call only
 * sse_last_id, sse_retry_ms and sse_why on its parser (sse_feed and sse_end
 * from it return -EBUSY; sse_free from it is not allowed).
 */
#ifndef APPL_HTTP_SSE_H
#define APPL_HTTP_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"

/* An event's data holds one JSON-RPC message; its line also holds "data: ". */
#define SSE_EVENT_MAX_DEF APPL_UPSTREAM_MESSAGE_MAX
#define SSE_LINE_SLACK	  64u /* the field name, colon and space before a value */
#define SSE_LINE_MAX_DEF  (APPL_UPSTREAM_MESSAGE_MAX + SSE_LINE_SLACK)
#define SSE_LIMIT_CEIL	  (64u * 1024 * 1024) /* the most either cap may be raised to */
/* An id is sent back as Last-Event-ID: room for composite ids (a stream's
 * and an event's UUID), no more. */
#define SSE_ID_MAX 512u

struct sse;

/* Caps in bytes; 0 takes the default. line_max bounds a line without its
 * end; event_max the data an event dispatches (without the final LF). */
struct sse_limits {
	size_t line_max;  /* 0: SSE_LINE_MAX_DEF */
	size_t event_max; /* 0: SSE_EVENT_MAX_DEF */
};

/* One dispatched event, all borrowed for the call. type is the event field's
 * value, or "message" when the event had none: never empty, never with a CR,
 * LF or NUL in it (an event whose type holds a NUL is not dispatched: C
 * cannot name it, and cutting it there would turn "message\0x" into
 * "message"). data[0..len) may hold any byte, NUL included, and data[len] is
 * NUL. last_id is the last event ID ("" when none), as sse_last_id. */
typedef void (*sse_event_fn)(void *ctx, const char *type, const char *data, size_t len,
			     const char *last_id);

/* A parser at the start of a stream, calling on_event with ctx for each
 * event; lim (copied) may be NULL for the defaults. 0 with *out (new; free
 * with sse_free), or -EINVAL (no on_event, a cap above SSE_LIMIT_CEIL) or
 * -ENOMEM, with err filled. */
int sse_new(const struct sse_limits *lim, sse_event_fn on_event, void *ctx, struct sse **out,
	    struct appl_err *err);

/* Release p; never from its on_event. Safe on NULL. */
void sse_free(struct sse *p);

/* Read buf[0..len) (borrowed; any bytes), the stream's next chunk, calling
 * on_event for each event it completes. Returns 0; -EMSGSIZE when a cap was
 * passed or -ENOMEM when a buffer could not grow (either fails p: events
 * completed before are dispatched, none after, and every later call returns
 * the same code); -EPIPE after sse_end; -EBUSY from on_event. */
int sse_feed(struct sse *p, const char *buf, size_t len);

/* The stream ended: an event not yet ended by an empty line, and a line not
 * yet ended, are discarded, as the standard says. Later feeds return -EPIPE
 * (a reconnection is a new parser, told nothing: send the old one's
 * sse_last_id as Last-Event-ID). Returns 0, or the code p failed with, or
 * -EBUSY from on_event. */
int sse_end(struct sse *p);

/* The last event ID: the id field's value at the last empty line, "" before
 * any (or after an empty id). Borrowed until p next reads or is freed. At
 * most SSE_ID_MAX bytes of UTF-8 without CR, LF or NUL, but it may hold other
 * control characters: check it before it goes into a header. */
const char *sse_last_id(const struct sse *p);

/* The reconnection time the server asked for (retry, in ms; a value too big
 * for 64 bits saturates), 0 when it never did (or asked for 0). */
uint64_t sse_retry_ms(const struct sse *p);

/* Why p failed, a short fixed text ("a line longer than the cap", ...), or
 * NULL while it has not. */
const char *sse_why(const struct sse *p);

#endif
