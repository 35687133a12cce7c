/* export.c: the tracer: spans held until their batch goes to the collector
 * as one OTLP/HTTP JSON request, one request in flight at a time (see
 * trace.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/version.h"
#include "http/client.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "trace/internal.h"

#define EXPORT_TIMEOUT_MS   10000u	 /* one request, whole */
#define EXPORT_ANSWER_MAX   (64u * 1024) /* what a collector may answer */
#define EXPORT_LOG_EVERY_MS 60000u	 /* a failing collector is logged this often */

struct tracer {
	struct loop *loop;
	struct http_client *http;
	struct trace_config cfg;
	char *url, *service;
	json_t *held;	/* spans waiting, oldest first */
	size_t sending; /* spans of the request in flight */
	struct http_call *call;
	long status; /* the answer's */
	struct loop_timer *timer;
	bool timer_set;
	uint64_t exported, dropped;
	uint64_t logged_ms; /* when a lost batch was last logged; 0: never */
};

static void send_batch(struct tracer *t);

/* n spans went (the collector took them), or were lost: counted here and
 * in the metrics. */
static void spans_sent(struct tracer *t, size_t n)
{
	t->exported += n;
	metrics_add(METRICS_SPANS, n, METRICS_L("sent"));
}

static void spans_lost(struct tracer *t, size_t n)
{
	t->dropped += n;
	if (n)
		metrics_add(METRICS_SPANS, n, METRICS_L("lost"));
}

/* ---- the request ------------------------------------------------------------ */

static int on_head(void *ctx, const struct http_head *h)
{
	((struct tracer *)ctx)->status = h->status;
	return 0;
}

static int on_data(void *ctx, const char *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
	return 0; /* a collector's answer is not read: only its status counts */
}

static void on_done(void *ctx, int rc, const char *why)
{
	struct tracer *t = ctx;
	size_t n = t->sending;
	uint64_t now = loop_now_ms();

	t->call = NULL;
	t->sending = 0;
	if (rc == 0 && t->status >= 200 && t->status < 300) {
		spans_sent(t, n);
	} else {
		spans_lost(t, n);
		if (!t->logged_ms || now - t->logged_ms >= EXPORT_LOG_EVERY_MS) {
			t->logged_ms = now;
			log_line(LOG_WARN, NULL,
				 "traces: %zu spans lost: the collector at %s %s%s (status %ld)", n,
				 t->url, rc ? "could not be reached: " : "refused them",
				 rc ? why : "", t->status);
		}
	}
	if (json_array_size(t->held))
		send_batch(t);
}

/* {"resourceSpans": [{resource, scopeSpans: [{scope, spans}]}]} of spans
 * (stolen), as text; NULL on out of memory. */
static char *batch_text(const struct tracer *t, json_t *spans)
{
	json_t *doc = json_pack("{s:[{s:{s:[{s:s,s:{s:s}}]},s:[{s:{s:s,s:s},s:o}]}]}",
				"resourceSpans", "resource", "attributes", "key", "service.name",
				"value", "stringValue", t->service, "scopeSpans", "scope", "name",
				"appliance", "version", APPL_VERSION, "spans", spans);
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

	json_decref(doc);
	return text;
}

/* The oldest batch_max spans held go, when nothing is in flight. */
static void send_batch(struct tracer *t)
{
	static const char *const headers[] = {"Content-Type: application/json", NULL};
	size_t n = json_array_size(t->held);
	json_t *spans = json_array();
	struct appl_err err = {0};
	char *body;
	int rc;

	if (t->call || !n || !spans) {
		json_decref(spans);
		return;
	}
	if (n > t->cfg.batch_max)
		n = t->cfg.batch_max;
	for (size_t i = 0; i < n; i++)
		json_array_append(spans, json_array_get(t->held, i));
	for (size_t i = 0; i < n; i++)
		json_array_remove(t->held, 0);
	body = batch_text(t, spans);
	struct http_request req = {.method = "POST",
				   .url = t->url,
				   .headers = headers,
				   .body = body,
				   .body_len = body ? strlen(body) : 0,
				   .timeout_ms = EXPORT_TIMEOUT_MS,
				   .body_max = EXPORT_ANSWER_MAX};
	t->status = 0;
	rc = body ? http_call_start(t->http, &req,
				    &(struct http_call_hooks){on_head, on_data, on_done}, t,
				    &t->call, &err)
		  : -ENOMEM;
	free(body);
	if (rc < 0) {
		spans_lost(t, n);
		log_line(LOG_WARN, NULL, "traces: %zu spans lost: %s", n,
			 rc == -ENOMEM ? "out of memory" : err.msg);
		return;
	}
	t->sending = n;
}

/* ---- the queue --------------------------------------------------------------- */

static void on_timer(void *data)
{
	struct tracer *t = data;

	t->timer_set = false;
	send_batch(t);
}

void tracer_queue(struct tracer *t, json_t *span)
{
	if (json_array_size(t->held) + t->sending >= t->cfg.queue_max ||
	    json_array_append(t->held, span) < 0) {
		spans_lost(t, 1);
		return;
	}
	if (json_array_size(t->held) >= t->cfg.batch_max)
		send_batch(t);
	else if (!t->timer_set && loop_timer_set(t->timer, t->cfg.interval_ms) == 0)
		t->timer_set = true;
}

void tracer_lost(struct tracer *t, unsigned n)
{
	spans_lost(t, n);
}

/* ---- the tracer -------------------------------------------------------------- */

int tracer_new(struct loop *loop, const struct trace_config *cfg, struct tracer **out,
	       struct appl_err *err)
{
	struct tracer *t = calloc(1, sizeof(*t));
	const char *ep = cfg->endpoint;
	size_t n = strlen(ep);

	*out = NULL;
	if (!t ||
	    asprintf(&t->url, "%.*s/v1/traces", (int)(n && ep[n - 1] == '/' ? n - 1 : n), ep) < 0) {
		free(t);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	t->loop = loop;
	t->cfg = *cfg;
	t->cfg.batch_max = cfg->batch_max ? cfg->batch_max : TRACE_BATCH_DEF;
	t->cfg.queue_max = cfg->queue_max ? cfg->queue_max : TRACE_QUEUE_DEF;
	t->cfg.interval_ms = cfg->interval_ms ? cfg->interval_ms : TRACE_INTERVAL_DEF;
	t->service = strdup(cfg->service_name ? cfg->service_name : "appliance");
	t->held = json_array();
	if (!t->service || !t->held || !(t->timer = loop_timer_new(loop, on_timer, t, err)) ||
	    http_client_new(loop, &t->http, err) < 0) {
		if (!err->code)
			appl_err_set(err, -ENOMEM, "out of memory");
		tracer_free(t);
		return err->code;
	}
	*out = t;
	return 0;
}

void tracer_flush(struct tracer *t, unsigned ms)
{
	uint64_t until = loop_now_ms() + ms;

	if (!t)
		return;
	send_batch(t);
	while ((t->call || json_array_size(t->held)) && loop_now_ms() < until)
		if (loop_run_once(t->loop, (int)(until - loop_now_ms())) < 0)
			break;
	if (t->call) {
		http_call_cancel(t->call);
		t->call = NULL;
		spans_lost(t, t->sending);
		t->sending = 0;
	}
	spans_lost(t, json_array_size(t->held));
	json_array_clear(t->held);
}

void tracer_free(struct tracer *t)
{
	if (!t)
		return;
	if (t->call)
		http_call_cancel(t->call);
	http_client_free(t->http);
	loop_timer_free(t->timer);
	json_decref(t->held);
	free(t->url);
	free(t->service);
	free(t);
}

uint64_t tracer_exported(const struct tracer *t)
{
	return t ? t->exported : 0;
}

uint64_t tracer_dropped(const struct tracer *t)
{
	return t ? t->dropped : 0;
}
