/* client.c: the MCP client for one upstream server (see upstream.h,
 * core.h, docs/upstream.md): making and freeing one, over the transport
 * its kind of server takes, and what its owner asks of it: calls, resource
 * reads, their cancellation, its state and its tools. */
#define _GNU_SOURCE
#include "upstream/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "metrics/metrics.h"

/* The transport of each kind of server (policy_server.kind). */
static const struct upstream_transport *const transports[] = {
	[POLICY_SERVER_STDIO] = &upstream_stdio_transport,
	[POLICY_SERVER_HTTP] = &upstream_http_transport,
};

static int copy_opts(struct upstream *u, const struct policy_server *srv,
		     const struct upstream_opts *o)
{
	u->name = strdup(srv->name);
	u->client_version =
		strdup(o && o->client_version ? o->client_version : UPSTREAM_CLIENT_VERSION_DEF);
	u->init_timeout_ms =
		o && o->init_timeout_ms ? o->init_timeout_ms : APPL_UPSTREAM_INIT_TIMEOUT_MS;
	u->backoff_min_ms =
		o && o->backoff_min_ms ? o->backoff_min_ms : APPL_UPSTREAM_BACKOFF_MIN_MS;
	u->backoff_max_ms =
		o && o->backoff_max_ms ? o->backoff_max_ms : APPL_UPSTREAM_BACKOFF_MAX_MS;
	if (u->backoff_max_ms < u->backoff_min_ms)
		u->backoff_max_ms = u->backoff_min_ms;
	u->backoff_ms = u->backoff_min_ms;
	return u->name && u->client_version ? 0 : -ENOMEM;
}

static bool server_ok(const struct policy_server *srv)
{
	if (!srv || !srv->name)
		return false;
	if (srv->kind == POLICY_SERVER_HTTP)
		return srv->url != NULL;
	return srv->kind == POLICY_SERVER_STDIO && srv->argc >= 1 && srv->argv && srv->argv[0] &&
	       srv->argv[0][0] == '/';
}

struct upstream *upstream_new(struct loop *loop, const struct policy_server *srv,
			      const struct upstream_hooks *hooks, const struct upstream_opts *opts,
			      struct appl_err *err)
{
	struct up_link link = {.ev = &upstream_core_events};
	struct upstream *u;
	int rc;

	if (!loop || !server_ok(srv)) {
		appl_err_set(err, -EINVAL,
			     "upstream: a stdio server with an absolute command, or an HTTP "
			     "server with a URL");
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	u->loop = loop;
	u->tp = transports[srv->kind];
	u->next_id = 1;
	u->result_max = opts && opts->result_max ? opts->result_max : APPL_MAX_RESULT_BYTES_DEF;
	if (hooks)
		u->hooks = *hooks;
	if (copy_opts(u, srv, opts) < 0) {
		appl_err_set(err, -ENOMEM, "out of memory");
		upstream_free(u);
		return NULL;
	}
	link.core = u;
	link.view = &u->v;
	link.loop = loop;
	link.name = u->name;
	link.init_timeout_ms = u->init_timeout_ms;
	rc = u->tp->make(&link, srv, opts, &u->t, err);
	if (rc < 0 || !(u->timer = loop_timer_new(loop, upstream_timer_fire, u, err))) {
		upstream_free(u);
		return NULL;
	}
	upstream_run_start(u, NULL);
	return u;
}

void upstream_free(struct upstream *u)
{
	if (!u)
		return;
	u->v.closing = true;
	upstream_calls_fail(u, UPSTREAM_CANCELLED, UPSTREAM_REASON_CANCELLED);
	if (u->t && u->tp->drain)
		u->tp->drain(u->t);
	upstream_reqs_drop(u);
	u->v.run = UP_RUN_STOPPED;
	if (u->t) {
		u->tp->close(u->t, true);
		u->tp->destroy(u->t);
		u->t = NULL;
	}
	loop_timer_free(u->timer);
	upstream_listing_reset(&u->list);
	upstream_tools_free(u->tools, u->ntools);
	free(u->name);
	free(u->client_version);
	free(u);
}

enum upstream_state upstream_state(const struct upstream *u)
{
	if (u->v.run == UP_RUN_READY)
		return UPSTREAM_READY;
	if (u->v.run == UP_RUN_STARTING)
		return UPSTREAM_STARTING;
	return loop_now_ms() < u->retry_at_ms ? UPSTREAM_BACKOFF : UPSTREAM_DOWN;
}

int upstream_start(struct upstream *u, struct appl_err *err)
{
	if (u->v.closing || (u->v.run == UP_RUN_STOPPED && loop_now_ms() < u->retry_at_ms))
		return appl_err_set(err, -EAGAIN, "%s", UPSTREAM_REASON_UNAVAILABLE);
	if (u->v.run != UP_RUN_STOPPED)
		return 0;
	metrics_count(METRICS_UPSTREAM_RESTARTS, u->name); /* the policy's name of it */
	return upstream_run_start(u, err);
}

int upstream_wait_ready(struct upstream *u, unsigned timeout_ms, struct appl_err *err)
{
	uint64_t end = loop_now_ms() + timeout_ms;
	int rc = upstream_start(u, err);

	if (rc < 0)
		return appl_err_set(err, rc, "%s: %s", u->name,
				    u->last_error[0] ? u->last_error : "not available");
	while (u->v.run == UP_RUN_STARTING) {
		uint64_t now = loop_now_ms();

		if (now >= end)
			return appl_err_set(err, -ETIMEDOUT, "%s: not ready in time", u->name);
		rc = loop_run_once(u->loop, (int)(end - now));
		if (rc < 0)
			return appl_err_errno(err, rc, -rc, "event loop");
	}
	if (u->v.run == UP_RUN_READY)
		return 0;
	return appl_err_set(err, -EIO, "%s: %s", u->name, u->last_error);
}

const char *upstream_name(const struct upstream *u)
{
	return u->name;
}

const char *upstream_last_error(const struct upstream *u)
{
	return u->last_error;
}

const char *upstream_protocol_version(const struct upstream *u)
{
	return u->v.version;
}

unsigned long upstream_restarts(const struct upstream *u)
{
	return u->starts ? u->starts - 1 : 0;
}

pid_t upstream_pid(const struct upstream *u)
{
	return u->v.run == UP_RUN_STOPPED || !u->tp->pid ? 0 : u->tp->pid(u->t);
}

size_t upstream_tool_count(const struct upstream *u)
{
	return u->ntools;
}

const struct upstream_tool *upstream_tool_get(const struct upstream *u, size_t i)
{
	return i < u->ntools ? &u->tools[i] : NULL;
}

bool upstream_has_resources(const struct upstream *u)
{
	return u->resources;
}

/* How long a caller's request may take: timeout_ms, or the default when 0,
 * at most the ceiling. */
static uint64_t caller_timeout(unsigned timeout_ms)
{
	uint64_t t = timeout_ms ? timeout_ms : APPL_CALL_TIMEOUT_S_DEF * 1000ull;

	return t > APPL_CALL_TIMEOUT_S_CEIL * 1000ull ? APPL_CALL_TIMEOUT_S_CEIL * 1000ull : t;
}

/* The path of every caller's request, a call or a read: r (made, with its
 * method, params and, for a call, its tool; freed here on failure) is
 * encoded, linked and sent as soon as the server takes it. */
static int caller_submit(struct upstream *u, struct req *r, unsigned timeout_ms,
			 upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err)
{
	uint64_t t = caller_timeout(timeout_ms);
	int rc;

	if (u->ncalls >= APPL_UPSTREAM_PENDING_MAX)
		rc = appl_err_set(err, -EBUSY, "too many calls pending for %s", u->name);
	else
		rc = upstream_start(u, err);
	/* Encoded now, in the era known now, so a request over the cap is
	 * refused here; a call that waits for a probe is encoded again if
	 * the era turns out otherwise. */
	if (rc == 0)
		rc = upstream_request_encode(u, u->next_id, r->method, r->params, &r->line, &r->len,
					     err);
	if (rc < 0) {
		upstream_req_free(r);
		return rc;
	}
	r->modern = u->v.modern;
	r->kind = REQ_CALL;
	r->id = r->handle = u->next_id++;
	r->deadline_ms = loop_now_ms() + t;
	r->cb = cb;
	r->ctx = ctx;
	upstream_req_link(u, r);
	upstream_unsent_flush(u);
	upstream_timer_rearm(u);
	if (call_id)
		*call_id = r->id;
	return 0;
}

int upstream_call(struct upstream *u, const char *tool, const json_t *args, unsigned timeout_ms,
		  upstream_result_cb cb, void *ctx, uint64_t *call_id, struct appl_err *err)
{
	return upstream_call_traced(u, tool, args, timeout_ms, NULL, cb, ctx, call_id, err);
}

int upstream_call_traced(struct upstream *u, const char *tool, const json_t *args,
			 unsigned timeout_ms, const char *traceparent, upstream_result_cb cb,
			 void *ctx, uint64_t *call_id, struct appl_err *err)
{
	struct req *r;
	json_t *task;

	if (!tool || !*tool || strlen(tool) > APPL_UPSTREAM_TOOL_NAME_MAX || !cb ||
	    (args && !json_is_object(args)))
		return appl_err_set(err, -EINVAL,
				    "upstream_call: a tool name, object arguments "
				    "and a callback");
	r = calloc(1, sizeof(*r));
	if (!r || !(r->tool = strdup(tool)) || !(r->params = json_pack("{s:s}", "name", tool)) ||
	    (args && json_object_set(r->params, "arguments", (json_t *)args) < 0) ||
	    (traceparent &&
	     (!(r->traceparent = strdup(traceparent)) ||
	      json_object_set_new(r->params, "_meta",
				  json_pack("{s:s}", "traceparent", traceparent)) < 0))) {
		upstream_req_free(r);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	r->method = "tools/call";
	/* A tool that runs as a task: the call asks for one, as long as the
	 * call may wait. */
	task = upstream_task_param(u, tool, caller_timeout(timeout_ms));
	if (task && json_object_set_new(r->params, "task", task) < 0) {
		upstream_req_free(r);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	r->task = task != NULL;
	return caller_submit(u, r, timeout_ms, cb, ctx, call_id, err);
}

int upstream_read(struct upstream *u, const char *uri, unsigned timeout_ms, upstream_result_cb cb,
		  void *ctx, uint64_t *call_id)
{
	size_t len = uri ? strlen(uri) : 0;
	struct req *r;

	/* JSON carries only UTF-8: other bytes are the caller's mistake. */
	if (len == 0 || len > UPSTREAM_URI_MAX || appl_utf8_prefix(uri, len) != len || !cb)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r || !(r->params = json_pack("{s:s}", "uri", uri))) {
		upstream_req_free(r);
		return -ENOMEM;
	}
	r->method = "resources/read";
	return caller_submit(u, r, timeout_ms, cb, ctx, call_id, NULL);
}

void upstream_call_cancel(struct upstream *u, uint64_t call_id)
{
	struct req *r = upstream_call_find(u, call_id);

	if (!r)
		return;
	if (r->sent && !r->poll_at)
		u->tp->abandon(u->t, r->id, "cancelled by the caller");
	upstream_task_cancel(u, r);
	upstream_req_unlink(u, r);
	upstream_req_free(r);
	upstream_timer_rearm(u);
}