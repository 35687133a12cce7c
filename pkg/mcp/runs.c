/* runs.c: the runs of run_python in flight in a session: their requests,
 * progress notifications, and answers (see internal.h). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"
#include "trace/trace.h"
#include "mcp/tool.h"

/* ---- progress ---------------------------------------------------------------- */

void mcp_tick_arm(struct mcp_server *srv)
{
	uint64_t now = loop_now_ms(), next = 0;

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && (!next || r->due < next))
				next = r->due;
	if (srv->tick)
		loop_timer_set(srv->tick, next ? (next > now ? next - now : 1) : 0);
}

static void progress_send(struct mcp_run *r, uint64_t now)
{
	struct mcp_server *srv = r->s->srv;
	struct mcp_progress p = {0};
	json_t *params;
	char *msg = NULL;

	if (srv->hooks.progress)
		srv->hooks.progress(r, &p, srv->hooks.data);
	/* A code tool answers with its value: what its program prints is
	 * not the client's, in progress either. */
	if (r->tool) {
		p.out = NULL;
		p.out_len = 0;
	}
	params = json_pack("{s:O,s:I}", "progressToken", r->token, "progress", ++r->seq);
	if (params && mcp_revision_has(r->rev, MCP_HAS_PROGRESS_MESSAGE) &&
	    (msg = mcp_progress_message(&p)))
		json_object_set_new(params, "message", json_string(msg));
	if (params && r->task) /* its token lasts as long as its task */
		json_object_set_new(params, "_meta", mcp_task_meta(r->task));
	free(msg);
	if (params)
		mcp_notify_for(r->s, r->id, "notifications/progress", params);
	json_decref(params);
	r->last = now;
	r->due = now + MCP_PROGRESS_EVERY_MS;
}

void mcp_progress_tick(void *data)
{
	struct mcp_server *srv = data;
	uint64_t now = loop_now_ms();

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && r->due <= now)
				progress_send(r, now);
	mcp_tick_arm(srv);
}

void mcp_run_poke(struct mcp_run *r)
{
	uint64_t soon;

	if (!r->token)
		return;
	soon = r->last + MCP_PROGRESS_GAP_MS;
	if (soon < loop_now_ms())
		soon = loop_now_ms();
	if (soon < r->due) {
		r->due = soon;
		mcp_tick_arm(r->s->srv);
	}
}

/* ---- runs and subscriptions in flight ----------------------------------------- */

/* Whether caps (a client's capabilities) offer form elicitation: an
 * elicitation object that names neither mode means form. */
bool mcp_can_form_elicit(const json_t *caps)
{
	const json_t *e = json_object_get(caps, "elicitation");

	if (!json_is_object(e))
		return false;
	if (!json_object_get(e, "form") && !json_object_get(e, "url"))
		return true;
	return json_is_object(json_object_get(e, "form"));
}

/* r answers req from now on: its id, revision, progress token. */
int mcp_run_attach(struct mcp_run *r, const struct mcp_request *req)
{
	if (!(r->id = jsonrpc_id_copy(req->id)))
		return -ENOMEM;
	r->rev = req->rev;
	r->can_elicit = mcp_can_form_elicit(req->client_caps);
	json_decref(r->token);
	r->token = NULL;
	if (req->progress_token) {
		r->token = json_deep_copy(req->progress_token);
		r->last = loop_now_ms();
		r->due = r->last + MCP_PROGRESS_EVERY_MS;
	}
	return 0;
}

void mcp_code_digest(const char *code, size_t len, unsigned char out[32])
{
	crypto_generichash(out, 32, (const unsigned char *)code, len, NULL, 0);
}

struct mcp_run *mcp_run_new(struct mcp_session *s, const struct mcp_request *req, const char *code,
			    size_t len)
{
	struct mcp_run *r = calloc(1, sizeof(*r));

	if (!r || mcp_run_attach(r, req) < 0) {
		free(r);
		return NULL;
	}
	r->s = s;
	r->span = s->span;
	s->span = NULL;
	mcp_code_digest(code, len, r->code_digest);
	r->next = s->runs;
	if (s->runs)
		s->runs->prev = r;
	s->runs = r;
	if (r->token)
		mcp_tick_arm(s->srv);
	return r;
}

void mcp_ask_free(struct mcp_ask *a)
{
	json_decref(a->params);
	free(a);
}

/* Take a off its run's list. */
void mcp_ask_unlink(struct mcp_ask *a)
{
	for (struct mcp_ask **pa = &a->run->asks; *pa; pa = &(*pa)->next)
		if (*pa == a) {
			*pa = a->next;
			return;
		}
}

/* Every question r still has open is answered (outcome) and dropped. */
void mcp_asks_end(struct mcp_run *r, const char *outcome)
{
	while (r->asks) {
		struct mcp_ask *a = r->asks;

		r->asks = a->next;
		if (a->pre)
			loop_task_cancel(r->s->srv->loop, &a->pre_task);
		a->fn(a->token, outcome, NULL);
		mcp_ask_free(a);
	}
}

void mcp_run_free(struct mcp_run *r)
{
	struct mcp_session *s = r->s;

	mcp_asks_end(r, "cancelled");
	free(r->answered);
	free(r->pre);
	loop_timer_free(r->expiry);
	json_decref(r->result);
	if (r->prev)
		r->prev->next = r->next;
	else
		s->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	json_decref(r->id);
	json_decref(r->token);
	trace_span_end(r->span);
	free(r);
}

bool mcp_id_in_flight(const struct mcp_session *s, const json_t *id)
{
	for (const struct mcp_run *r = s->runs; r; r = r->next)
		if (r->id && jsonrpc_id_equal(r->id, id))
			return true;
	for (const struct listen *l = s->listens; l; l = l->next)
		if (jsonrpc_id_equal(l->id, id))
			return true;
	return mcp_task_waits_id(s->srv, s, id);
}

/* The levels of logging/setLevel, least severe first. */
const char *const mcp_log_levels[MCP_LOG_LEVELS] = {"debug", "info",	 "notice", "warning",
						    "error", "critical", "alert",  "emergency"};

/* What run r came to, as a log message to its client (about r's request)
 * when the client set a level that lets it through. */
static void run_log(struct mcp_run *r, const json_t *o, bool is_error, const char *failure)
{
	struct mcp_session *s = r->s;
	int level = failure || is_error ? MCP_LOG_LEVEL_WARNING : MCP_LOG_LEVEL_INFO;
	json_t *params;

	if (s->log_level < 0 || level < s->log_level ||
	    !mcp_revision_has(r->rev, MCP_HAS_SET_LEVEL))
		return;
	params = o ? json_pack("{s:s,s:s,s:{s:s,s:s?,s:I,s:I}}", "level", mcp_log_levels[level],
			       "logger", "appliance", "data", "run", r->label, "reason",
			       json_string_value(json_object_get(o, "reason")), "calls",
			       json_integer_value(json_object_get(o, "calls")), "duration_ms",
			       json_integer_value(json_object_get(o, "duration_ms")))
		   : json_pack("{s:s,s:s,s:{s:s,s:s?}}", "level", mcp_log_levels[level], "logger",
			       "appliance", "data", "run", r->label, "failure", failure);
	if (params && r->task)
		json_object_set_new(params, "_meta", mcp_task_meta(r->task));
	if (params)
		mcp_notify_for(s, r->id, "notifications/message", params);
	json_decref(params);
}

/* ---- answers ------------------------------------------------------------------------ */

/* The owner's answer for run: sent, or kept for the retry of a parked
 * run. */
static void run_answer(struct mcp_run *run, json_t *result /* steals */)
{
	struct mcp_session *s = run->s;

	if (run->task) { /* kept for the client's tasks/get or tasks/result */
		mcp_task_end(run->task, result, NULL);
		mcp_run_free(run);
		mcp_tick_arm(s->srv);
		return;
	}
	if (run->parked) {
		mcp_asks_end(run, "cancelled");
		run->owner_done = true;
		json_decref(run->result);
		run->result = result;
		return;
	}
	mcp_reply(s, run->id, run->rev, result);
	mcp_run_free(run);
	mcp_tick_arm(s->srv);
}

void mcp_run_finish(struct mcp_run *run, const json_t *result, bool is_error, const json_t *files)
{
	if (is_error)
		trace_span_error(run->span);
	/* A code tool's value holds none of a result object's members. */
	run_log(run, run->tool ? NULL : result, is_error, NULL);
	if (run->tool)
		run_answer(run, mcp_value_result(run->rev, result, run->structured, files));
	else
		run_answer(run, mcp_tool_result(run->rev, result, is_error, files));
}

void mcp_run_fail(struct mcp_run *run, const char *text)
{
	trace_span_error(run->span);
	run_log(run, NULL, true, text);
	run_answer(run, mcp_tool_text_result(text, 1));
}

void mcp_run_cancel(struct mcp_run *r, const char *by)
{
	struct mcp_server *srv = r->s->srv;

	r->cancelled_by = by;
	if (!r->owner_done && srv->hooks.on_cancel)
		srv->hooks.on_cancel(r, srv->hooks.data);
	if (r->task)
		mcp_task_end(r->task, NULL, by);
	mcp_run_free(r);
	mcp_tick_arm(srv);
}

const char *mcp_run_cancelled_by(const struct mcp_run *run)
{
	return run->cancelled_by;
}

void mcp_run_set_data(struct mcp_run *run, void *data)
{
	run->data = data;
}

void *mcp_run_data(const struct mcp_run *run)
{
	return run->data;
}
