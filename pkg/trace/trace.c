/* trace.c: trace context and spans (see trace.h). A span is built as the
 * OTLP JSON object it will be sent as, and handed to its tracer when it
 * ends (export.c). */
#include "trace/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/utf8.h"
#include "trace/internal.h"

struct trace_span {
	struct tracer *t;
	struct trace_ctx ctx;
	bool has_parent;
	unsigned char parent[TRACE_SPAN_BYTES];
	json_t *obj;   /* the OTLP span object, but its end */
	json_t *attrs; /* its attributes array */
	unsigned nattrs;
};

/* ---- traceparent -------------------------------------------------------------- */

static int hex_value(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* n bytes from 2n lower-case hex digits at s; -1 on anything else. */
static int hex_bytes(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

static bool all_zero(const unsigned char *b, size_t n)
{
	unsigned char any = 0;

	for (size_t i = 0; i < n; i++)
		any |= b[i];
	return any == 0;
}

int trace_parent_parse(const char *s, size_t len, struct trace_ctx *out)
{
	unsigned char version, flags;

	/* 00-<32>-<16>-<2>: the fields at fixed places */
	if (len < TRACE_PARENT_LEN || s[2] != '-' || s[35] != '-' || s[52] != '-' ||
	    hex_bytes(s, &version, 1) < 0 || version == 0xff)
		return -EINVAL;
	if ((version == 0 && len != TRACE_PARENT_LEN) ||
	    (version != 0 && len > TRACE_PARENT_LEN && s[TRACE_PARENT_LEN] != '-'))
		return -EINVAL;
	if (hex_bytes(s + 3, out->trace_id, TRACE_ID_BYTES) < 0 ||
	    hex_bytes(s + 36, out->span_id, TRACE_SPAN_BYTES) < 0 ||
	    hex_bytes(s + 53, &flags, 1) < 0 || all_zero(out->trace_id, TRACE_ID_BYTES) ||
	    all_zero(out->span_id, TRACE_SPAN_BYTES))
		return -EINVAL;
	out->sampled = flags & 1;
	return 0;
}

void trace_parent_format(const struct trace_ctx *c, char out[TRACE_PARENT_LEN + 1])
{
	char trace[2 * TRACE_ID_BYTES + 1], span[2 * TRACE_SPAN_BYTES + 1];

	sodium_bin2hex(trace, sizeof(trace), c->trace_id, TRACE_ID_BYTES);
	sodium_bin2hex(span, sizeof(span), c->span_id, TRACE_SPAN_BYTES);
	snprintf(out, TRACE_PARENT_LEN + 1, "00-%s-%s-%s", trace, span, c->sampled ? "01" : "00");
}

/* ---- spans -------------------------------------------------------------------- */

/* Nanoseconds since the epoch as OTLP JSON writes a fixed64: a decimal
 * string. */
static json_t *now_ns(void)
{
	struct timespec ts;
	char buf[24];

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(buf, sizeof(buf), "%" PRIu64,
		 (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
	return json_string(buf);
}

static json_t *hex_string(const unsigned char *b, size_t n)
{
	char buf[2 * TRACE_ID_BYTES + 1];

	sodium_bin2hex(buf, sizeof(buf), b, n);
	return json_string(buf);
}

/* s cut to at most max bytes, at a character, as a JSON string (invalid
 * UTF-8 ends it where it starts). */
static json_t *cut_string(const char *s, size_t max)
{
	size_t n = appl_utf8_prefix(s, strnlen(s, max + 1));

	if (n > max)
		n = appl_utf8_boundary(s, max);
	return json_stringn(s, n);
}

struct trace_span *trace_span_start(struct tracer *t, const struct trace_ctx *parent,
				    const char *name, enum trace_kind kind)
{
	struct trace_span *s;

	if (!t || !(s = calloc(1, sizeof(*s))))
		return NULL;
	s->t = t;
	if (parent) {
		memcpy(s->ctx.trace_id, parent->trace_id, TRACE_ID_BYTES);
		memcpy(s->parent, parent->span_id, TRACE_SPAN_BYTES);
		s->ctx.sampled = parent->sampled;
		s->has_parent = true;
	} else {
		do
			randombytes_buf(s->ctx.trace_id, TRACE_ID_BYTES);
		while (all_zero(s->ctx.trace_id, TRACE_ID_BYTES));
		s->ctx.sampled = true;
	}
	do
		randombytes_buf(s->ctx.span_id, TRACE_SPAN_BYTES);
	while (all_zero(s->ctx.span_id, TRACE_SPAN_BYTES));
	s->attrs = json_array();
	s->obj = json_pack(
		"{s:o,s:o,s:o,s:i,s:o}", "traceId", hex_string(s->ctx.trace_id, TRACE_ID_BYTES),
		"spanId", hex_string(s->ctx.span_id, TRACE_SPAN_BYTES), "name",
		cut_string(name, TRACE_NAME_MAX), "kind", (int)kind, "startTimeUnixNano", now_ns());
	if (!s->obj || !s->attrs ||
	    (s->has_parent && json_object_set_new(s->obj, "parentSpanId",
						  hex_string(s->parent, TRACE_SPAN_BYTES)))) {
		json_decref(s->obj);
		json_decref(s->attrs);
		free(s);
		return NULL;
	}
	return s;
}

const struct trace_ctx *trace_span_ctx(const struct trace_span *s)
{
	return s ? &s->ctx : NULL;
}

static void attr_add(struct trace_span *s, const char *key, json_t *value)
{
	if (!value || s->nattrs >= TRACE_ATTRS_MAX ||
	    json_array_append_new(s->attrs, json_pack("{s:s,s:o}", "key", key, "value", value))) {
		json_decref(value);
		return;
	}
	s->nattrs++;
}

void trace_span_str(struct trace_span *s, const char *key, const char *value)
{
	if (s && key && value)
		attr_add(s, key,
			 json_pack("{s:o}", "stringValue", cut_string(value, TRACE_VALUE_MAX)));
}

void trace_span_int(struct trace_span *s, const char *key, int64_t value)
{
	char buf[24];

	if (!s || !key)
		return;
	/* int64 as OTLP JSON writes it: a decimal string */
	snprintf(buf, sizeof(buf), "%" PRId64, value);
	attr_add(s, key, json_pack("{s:s}", "intValue", buf));
}

void trace_span_error(struct trace_span *s)
{
	if (s)
		json_object_set_new(s->obj, "status", json_pack("{s:i}", "code", 2));
}

void trace_span_end(struct trace_span *s)
{
	if (!s)
		return;
	if (json_object_set_new(s->obj, "endTimeUnixNano", now_ns()) == 0 &&
	    json_object_set(s->obj, "attributes", s->attrs) == 0)
		tracer_queue(s->t, s->obj);
	else
		tracer_lost(s->t, 1);
	json_decref(s->obj);
	json_decref(s->attrs);
	free(s);
}
