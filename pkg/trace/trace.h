/* trace.h: spans of what the appliance does, exported to an OpenTelemetry
 * collector over OTLP/HTTP with the JSON encoding (POST ENDPOINT/v1/traces).
 *
 * A tracer holds the spans that ended until they are sent, in batches,
 * from the event loop through the HTTP client (http/client.h): never a
 * blocking write, never a thread of ours. A collector that is down, slow
 * or answers with an error loses the spans of that batch, counted; a queue
 * that is full drops new spans, counted; nothing a cell waits for depends
 * on either. Every span function takes NULL (no tracer, no span) and then
 * does nothing, so callers need no branch for "tracing is off".
 *
 * A span carries only what its caller gives it: callers pass names from
 * the policy and numbers, never arguments, results, code or output.
 * Trace context comes from and goes to W3C traceparent strings.
 */
#ifndef APPL_TRACE_TRACE_H
#define APPL_TRACE_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "loop/loop.h"

#define TRACE_ID_BYTES	   16
#define TRACE_SPAN_BYTES   8
#define TRACE_PARENT_LEN   55  /* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TRACE_ATTRS_MAX	   32  /* attributes kept on one span; more are dropped */
#define TRACE_VALUE_MAX	   256 /* bytes of a string attribute kept */
#define TRACE_NAME_MAX	   128 /* bytes of a span's name kept */
#define TRACE_BATCH_DEF	   256 /* spans per export */
#define TRACE_QUEUE_DEF	   2048
#define TRACE_INTERVAL_DEF 1000 /* ms a span waits at most before its batch goes */

/* Where a span sits: its trace, its own id, and whether it is sampled. */
struct trace_ctx {
	unsigned char trace_id[TRACE_ID_BYTES];
	unsigned char span_id[TRACE_SPAN_BYTES];
	bool sampled;
};

/* s[0..len) as a W3C traceparent: "VV-TRACE-SPAN-FLAGS", lower-case hex;
 * version 00 exactly as long as its four fields, a later version (not ff)
 * read by its first four (followed by "-" or nothing); neither id all
 * zeros. 0 with *out, or -EINVAL. Pure. */
int trace_parent_parse(const char *s, size_t len, struct trace_ctx *out);

/* c as a version 00 traceparent, into out (NUL-terminated). Pure. */
void trace_parent_format(const struct trace_ctx *c, char out[TRACE_PARENT_LEN + 1]);

enum trace_kind {
	TRACE_INTERNAL = 1,
	TRACE_SERVER = 2, /* a request the appliance serves */
	TRACE_CLIENT = 3, /* a request it makes */
};

struct trace_config {
	const char *endpoint;	  /* http:// or https://, without /v1/traces (copied) */
	const char *service_name; /* the resource's service.name (copied) */
	unsigned batch_max;	  /* 0: TRACE_BATCH_DEF */
	unsigned queue_max;	  /* 0: TRACE_QUEUE_DEF */
	unsigned interval_ms;	  /* 0: TRACE_INTERVAL_DEF */
};

struct tracer;
struct trace_span;

/* A tracer on loop (borrowed; it must outlive the tracer). 0 with *out, or
 * negative with err (libcurl could not be loaded, out of memory). */
int tracer_new(struct loop *loop, const struct trace_config *cfg, struct tracer **out,
	       struct appl_err *err);

/* Send what is held, running loop rounds for at most ms: for a clean exit,
 * from outside any loop callback. What is still held after is dropped. */
void tracer_flush(struct tracer *t, unsigned ms);

/* Stop the export in flight and free; what is held is dropped. Safe on
 * NULL. */
void tracer_free(struct tracer *t);

/* Spans sent and acknowledged with a 2xx; spans lost (queue full, a failed
 * export, dropped at the end). */
uint64_t tracer_exported(const struct tracer *t);
uint64_t tracer_dropped(const struct tracer *t);

/* A span named name (cut to TRACE_NAME_MAX) under parent (NULL: the root of
 * a new trace), started now. NULL when t is NULL or on out of memory. */
struct trace_span *trace_span_start(struct tracer *t, const struct trace_ctx *parent,
				    const char *name, enum trace_kind kind);

/* s's context, for its children and for a traceparent; NULL for NULL. */
const struct trace_ctx *trace_span_ctx(const struct trace_span *s);

/* An attribute (key a constant of the caller's; value cut to
 * TRACE_VALUE_MAX at a character). A key set twice keeps both. */
void trace_span_str(struct trace_span *s, const char *key, const char *value);
void trace_span_int(struct trace_span *s, const char *key, int64_t value);

/* The span's status is an error (it is "unset" otherwise). */
void trace_span_error(struct trace_span *s);

/* End s now: it is queued for export and freed. Safe on NULL. */
void trace_span_end(struct trace_span *s);

#endif
