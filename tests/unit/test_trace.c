/* test_trace.c: trace context and the OTLP/HTTP JSON export (pkg/trace).
 *
 * A collector stand-in (libmicrohttpd on a thread of its own) keeps each
 * POST it receives; the tracer runs on the test's loop. The spans it gets
 * must be one trace with the right parent links and attributes, ids in
 * hex and numbers as strings, as OTLP's JSON encoding says; a collector
 * that is down or answers 500 loses the batch, counted, and a full queue
 * drops spans, counted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <microhttpd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>
#include <sodium.h>

#include "loop/loop.h"
#include "trace/trace.h"

#define BODIES_MAX 8

struct collector {
	struct MHD_Daemon *d;
	unsigned port;
	unsigned status; /* what it answers */
	char *bodies[BODIES_MAX];
	int nbodies;
	char *path, *type;
	char *in;
	size_t in_len;
};

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
			      const char *method, const char *version, const char *data,
			      size_t *size, void **con_cls)
{
	struct collector *c = cls;
	struct MHD_Response *r;
	enum MHD_Result ok;
	(void)version;

	if (!*con_cls) { /* the head: wait for the body */
		*con_cls = c;
		free(c->in);
		c->in = NULL;
		c->in_len = 0;
		return MHD_YES;
	}
	if (*size) {
		c->in = realloc(c->in, c->in_len + *size + 1);
		memcpy(c->in + c->in_len, data, *size);
		c->in_len += *size;
		c->in[c->in_len] = '\0';
		*size = 0;
		return MHD_YES;
	}
	if (strcmp(method, "POST") == 0 && c->nbodies < BODIES_MAX) {
		const char *type =
			MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");

		free(c->path);
		free(c->type);
		c->path = strdup(url);
		c->type = strdup(type ? type : "");
		c->bodies[c->nbodies] = c->in ? c->in : strdup("");
		c->in = NULL;
		__atomic_add_fetch(&c->nbodies, 1, __ATOMIC_SEQ_CST);
	}
	r = MHD_create_response_from_buffer(2, "{}", MHD_RESPMEM_PERSISTENT);
	ok = MHD_queue_response(conn, c->status, r);
	MHD_destroy_response(r);
	return ok;
}

struct fx {
	struct loop *loop;
	struct collector c;
	struct tracer *t;
	char endpoint[64];
};

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	const union MHD_DaemonInfo *info;
	struct trace_config cfg = {.endpoint = fx->endpoint, .service_name = "svc-test"};

	fx->loop = loop_new(NULL);
	assert_non_null(fx->loop);
	fx->c.status = 200;
	fx->c.d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
				   0, NULL, NULL, handle, &fx->c, MHD_OPTION_END);
	assert_non_null(fx->c.d);
	info = MHD_get_daemon_info(fx->c.d, MHD_DAEMON_INFO_BIND_PORT);
	fx->c.port = info->port;
	snprintf(fx->endpoint, sizeof(fx->endpoint), "http://127.0.0.1:%u/", fx->c.port);
	assert_int_equal(tracer_new(fx->loop, &cfg, &fx->t, NULL), 0);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	tracer_free(fx->t);
	MHD_stop_daemon(fx->c.d);
	for (int i = 0; i < fx->c.nbodies; i++)
		free(fx->c.bodies[i]);
	free(fx->c.path);
	free(fx->c.type);
	free(fx->c.in);
	loop_free(fx->loop);
	free(fx);
	return 0;
}

static const json_t *attr(const json_t *span, const char *key)
{
	const json_t *a;
	size_t i;

	json_array_foreach(json_object_get(span, "attributes"), i, a)
		if (strcmp(json_string_value(json_object_get(a, "key")), key) == 0)
			return json_object_get(a, "value");
	return NULL;
}

/* The first span of the first scope of the first resource of doc. */
static const json_t *first_span(const json_t *doc)
{
	const json_t *rs = json_array_get(json_object_get(doc, "resourceSpans"), 0);
	const json_t *ss = json_array_get(json_object_get(rs, "scopeSpans"), 0);

	return json_array_get(json_object_get(ss, "spans"), 0);
}

/* ---- traceparent -------------------------------------------------------------- */

static void test_traceparent(void **state)
{
	static const char good[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
	static const char *const bad[] = {
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* upper case */
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* zero trace */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* zero span */
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version ff */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00, longer */
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",  /* no dash after */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
		"",
	};
	struct trace_ctx c;
	char out[TRACE_PARENT_LEN + 1];
	const char *later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-what-next";
	(void)state;

	assert_int_equal(trace_parent_parse(good, strlen(good), &c), 0);
	assert_true(c.sampled);
	assert_int_equal(c.trace_id[0], 0x4b);
	assert_int_equal(c.span_id[7], 0xb7);
	trace_parent_format(&c, out);
	assert_string_equal(out, good);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (trace_parent_parse(bad[i], strlen(bad[i]), &c) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
	/* a later version is read by its first four fields */
	assert_int_equal(trace_parent_parse(later, strlen(later), &c), 0);
	assert_false(c.sampled);
}

/* ---- the export ---------------------------------------------------------------- */

static void until_bodies(struct fx *fx, int n)
{
	uint64_t end = loop_now_ms() + 10000;

	while (__atomic_load_n(&fx->c.nbodies, __ATOMIC_SEQ_CST) < n && loop_now_ms() < end)
		loop_run_once(fx->loop, 50);
	assert_int_equal(__atomic_load_n(&fx->c.nbodies, __ATOMIC_SEQ_CST), n);
}

/* A client's span as the parent, a child with attributes, a grandchild
 * that failed: one batch of one trace, linked, in OTLP's JSON. */
static void test_one_trace_exported(void **state)
{
	struct fx *fx = *state;
	struct trace_ctx client;
	const char *tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
	struct trace_span *req, *run, *call;
	json_t *doc, *spans, *rs;
	char traceid[33], reqid[17], runid[17];

	assert_int_equal(trace_parent_parse(tp, strlen(tp), &client), 0);
	req = trace_span_start(fx->t, &client, "tools/call run_python", TRACE_SERVER);
	run = trace_span_start(fx->t, trace_span_ctx(req), "run", TRACE_INTERNAL);
	call = trace_span_start(fx->t, trace_span_ctx(run), "call toy.add", TRACE_CLIENT);
	trace_span_str(call, "appliance.server", "toy");
	trace_span_int(call, "appliance.result_bytes", 1234567890123LL);
	trace_span_error(call);
	sodium_bin2hex(reqid, sizeof(reqid), trace_span_ctx(req)->span_id, TRACE_SPAN_BYTES);
	sodium_bin2hex(runid, sizeof(runid), trace_span_ctx(run)->span_id, TRACE_SPAN_BYTES);
	trace_span_end(call);
	trace_span_end(run);
	trace_span_end(req);
	assert_int_equal(fx->c.nbodies, 0); /* held until the interval or a flush */
	tracer_flush(fx->t, 5000);
	assert_int_equal(fx->c.nbodies, 1);
	assert_string_equal(fx->c.path, "/v1/traces");
	assert_string_equal(fx->c.type, "application/json");
	assert_int_equal(tracer_exported(fx->t), 3);
	assert_int_equal(tracer_dropped(fx->t), 0);

	doc = json_loads(fx->c.bodies[0], 0, NULL);
	assert_non_null(doc);
	rs = json_array_get(json_object_get(doc, "resourceSpans"), 0);
	assert_string_equal(
		json_string_value(json_object_get(
			attr(json_object_get(rs, "resource"), "service.name"), "stringValue")),
		"svc-test");
	spans = json_object_get(json_array_get(json_object_get(rs, "scopeSpans"), 0), "spans");
	assert_int_equal(json_array_size(spans), 3);
	/* in the order they ended: call, run, request */
	sodium_bin2hex(traceid, sizeof(traceid), client.trace_id, TRACE_ID_BYTES);
	for (size_t i = 0; i < 3; i++) {
		const json_t *s = json_array_get(spans, i);

		assert_string_equal(json_string_value(json_object_get(s, "traceId")), traceid);
		assert_int_equal(strlen(json_string_value(json_object_get(s, "spanId"))), 16);
		assert_true(json_is_string(json_object_get(s, "startTimeUnixNano")));
		assert_true(json_is_string(json_object_get(s, "endTimeUnixNano")));
	}
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(spans, 2), "parentSpanId")),
		"b7ad6b7169203331");
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(spans, 1), "parentSpanId")),
		reqid);
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(spans, 0), "parentSpanId")),
		runid);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(spans, 0), "kind")), 3);
	assert_string_equal(
		json_string_value(json_object_get(
			attr(json_array_get(spans, 0), "appliance.result_bytes"), "intValue")),
		"1234567890123");
	assert_int_equal(json_integer_value(json_object_get(
				 json_object_get(json_array_get(spans, 0), "status"), "code")),
			 2);
	assert_null(json_object_get(json_array_get(spans, 1), "status"));
	json_decref(doc);
}

/* A span with no parent starts a trace; spans go by themselves once the
 * interval passed. */
static void test_root_and_interval(void **state)
{
	struct fx *fx = *state;
	struct trace_span *s = trace_span_start(fx->t, NULL, "root", TRACE_SERVER);
	const json_t *span;
	json_t *doc;

	assert_non_null(s);
	trace_span_end(s);
	until_bodies(fx, 1); /* no flush: the interval timer sent it */
	doc = json_loads(fx->c.bodies[0], 0, NULL);
	span = first_span(doc);
	assert_null(json_object_get(span, "parentSpanId"));
	assert_int_equal(strlen(json_string_value(json_object_get(span, "traceId"))), 32);
	json_decref(doc);
}

/* A collector that answers 500, and one that is not there: the batch is
 * lost and counted, nothing waits on it. */
static void test_failed_exports_are_counted(void **state)
{
	struct fx *fx = *state;
	struct trace_config cfg = {.endpoint = "http://127.0.0.1:1"};
	struct tracer *down;

	fx->c.status = 500;
	trace_span_end(trace_span_start(fx->t, NULL, "a", TRACE_INTERNAL));
	trace_span_end(trace_span_start(fx->t, NULL, "b", TRACE_INTERNAL));
	tracer_flush(fx->t, 5000);
	assert_int_equal(fx->c.nbodies, 1);
	assert_int_equal(tracer_exported(fx->t), 0);
	assert_int_equal(tracer_dropped(fx->t), 2);

	assert_int_equal(tracer_new(fx->loop, &cfg, &down, NULL), 0);
	trace_span_end(trace_span_start(down, NULL, "c", TRACE_INTERNAL));
	tracer_flush(down, 5000);
	assert_int_equal(tracer_dropped(down), 1);
	assert_int_equal(tracer_exported(down), 0);
	tracer_free(down);
}

/* A full queue drops the newest, counted; a batch goes as soon as it is
 * full. */
static void test_queue_and_batches(void **state)
{
	struct fx *fx = *state;
	struct trace_config cfg = {
		.endpoint = fx->endpoint, .batch_max = 2, .queue_max = 3, .interval_ms = 60000};
	struct tracer *t;

	assert_int_equal(tracer_new(fx->loop, &cfg, &t, NULL), 0);
	for (int i = 0; i < 2; i++) /* a full batch: sent at once */
		trace_span_end(trace_span_start(t, NULL, "x", TRACE_INTERNAL));
	for (int i = 0; i < 3; i++) /* 2 in flight + 1 held = 3: the last is dropped */
		trace_span_end(trace_span_start(t, NULL, "y", TRACE_INTERNAL));
	assert_int_equal(tracer_dropped(t), 2);
	tracer_flush(t, 5000);
	assert_int_equal(tracer_exported(t), 3);
	assert_int_equal(fx->c.nbodies, 2);
	tracer_free(t);
}

/* No tracer: nothing happens, nothing crashes. */
static void test_null_tracer(void **state)
{
	struct trace_span *s = trace_span_start(NULL, NULL, "n", TRACE_SERVER);
	(void)state;

	assert_null(s);
	assert_null(trace_span_ctx(s));
	trace_span_str(s, "k", "v");
	trace_span_int(s, "k", 1);
	trace_span_error(s);
	trace_span_end(s);
	tracer_flush(NULL, 10);
	tracer_free(NULL);
	assert_int_equal(tracer_dropped(NULL), 0);
}

/* Long names and values are cut at a character, never split one. */
static void test_values_are_cut(void **state)
{
	struct fx *fx = *state;
	char name[400], value[600];
	struct trace_span *s;
	json_t *doc;
	const json_t *span;

	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	for (size_t i = 0; i + 2 < sizeof(value); i += 2)
		memcpy(value + i, "\xc3\xa9", 2);
	value[sizeof(value) - 2] = '\0';
	s = trace_span_start(fx->t, NULL, name, TRACE_INTERNAL);
	trace_span_str(s, "v", value);
	for (int i = 0; i < TRACE_ATTRS_MAX + 5; i++)
		trace_span_int(s, "n", i);
	trace_span_end(s);
	tracer_flush(fx->t, 5000);
	doc = json_loads(fx->c.bodies[0], 0, NULL);
	span = first_span(doc);
	assert_int_equal(strlen(json_string_value(json_object_get(span, "name"))), TRACE_NAME_MAX);
	assert_int_equal(strlen(json_string_value(json_object_get(attr(span, "v"), "stringValue"))),
			 TRACE_VALUE_MAX);
	assert_int_equal(json_array_size(json_object_get(span, "attributes")), TRACE_ATTRS_MAX);
	json_decref(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_traceparent),
		cmocka_unit_test(test_null_tracer),
		cmocka_unit_test_setup_teardown(test_one_trace_exported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_root_and_interval, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_exports_are_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_queue_and_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_values_are_cut, setup, teardown),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
