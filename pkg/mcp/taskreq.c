/* taskreq.c: MCP tasks as the client sees them (docs/tasks.md): a
 * tools/call made a task, and the methods of both revisions that read,
 * wait for, cancel and answer it (see internal.h). A task is its client's:
 * every method looks it up by its id and the client's name together, so
 * another client's task is as unknown as one never made. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"
#include "mcp/tool.h"

/* ---- a tools/call as a task ---------------------------------------------------------- */

/* Whether req declares the 2026-07-28 tasks extension. */
static bool has_extension(const struct mcp_request *req)
{
	return json_is_object(
		json_object_get(json_object_get(req->client_caps, "extensions"), TASKS_EXTENSION));
}

int mcp_task_asked(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req)
{
	const json_t *task = json_object_get(m->params, "task");
	const json_t *ttl = json_object_get(task, "ttl");

	if (!s->srv->hooks.task_limits)
		return 0;
	if (req->rev->era == MCP_ERA_MODERN)
		return has_extension(req);
	if (!task || !mcp_revision_has(req->rev, MCP_HAS_TASKS))
		return 0;
	if (!json_is_object(task) || (ttl && !json_is_null(ttl) && !json_is_integer(ttl))) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"task must be an object, with ttl (milliseconds) if any");
		return -1;
	}
	return 1;
}

/* The task's ttl: what the client asked within what the policy allows. */
static uint64_t task_ttl(const struct jsonrpc_msg *m, const struct mcp_task_limits *lim)
{
	json_int_t asked =
		json_integer_value(json_object_get(json_object_get(m->params, "task"), "ttl"));
	uint64_t ttl = asked > 0 ? (uint64_t)asked : lim->ttl_ms;

	if (ttl < lim->min_ttl_ms)
		ttl = lim->min_ttl_ms;
	return ttl > lim->ttl_ms ? lim->ttl_ms : ttl;
}

/* Room for one more task of client: the oldest ended one gives way when
 * it holds per_client; false when all of them still work. */
static bool room_for(struct mcp_server *srv, const char *client, unsigned per_client)
{
	struct mcp_task *oldest = NULL, *oldest_gone = NULL;
	unsigned kept = 0, gone = 0;

	for (struct mcp_task *t = srv->tasks; t; t = t->next) {
		if (strcmp(t->client, client) != 0)
			continue;
		if (t->gone) {
			gone++;
			oldest_gone = t;
			continue;
		}
		kept++;
		if (t->status)
			oldest = t; /* the list is newest first */
	}
	/* The ids of tasks gone are kept as many as the tasks. */
	if (oldest_gone && gone >= per_client)
		mcp_task_free(oldest_gone);
	if (kept < per_client)
		return true;
	if (!oldest)
		return false;
	mcp_task_forget(oldest, "dropped");
	return true;
}

struct mcp_run *mcp_task_start(struct mcp_session *s, const struct jsonrpc_msg *m,
			       const struct mcp_request *req, const char *code, size_t len)
{
	struct mcp_server *srv = s->srv;
	struct mcp_task_limits lim = {0};
	struct mcp_request in = *req;
	struct mcp_task *t;
	struct mcp_run *r;
	json_t *id, *res;
	char msg[128];

	srv->hooks.task_limits(&lim, srv->hooks.data);
	if (!room_for(srv, s->p->client, lim.per_client)) {
		snprintf(msg, sizeof(msg),
			 "too many tasks: this client's %u tasks all still work; wait for one or "
			 "cancel one",
			 lim.per_client);
		mcp_reply_error(s, m->id, JSONRPC_INVALID_REQUEST, msg);
		return NULL;
	}
	if (!(t = mcp_task_new(s, req, task_ttl(m, &lim))) || !(id = json_string(t->id))) {
		if (t)
			mcp_task_free(t);
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return NULL;
	}
	/* The run answers its task, never a request: its id is the task's. */
	in.id = id;
	if (req->rev->era == MCP_ERA_MODERN)
		in.progress_token = NULL; /* no progress for tasks in that revision */
	t->hs->span = s->span;
	s->span = NULL;
	r = mcp_run_new(t->hs, &in, code, len);
	json_decref(id);
	if (!r) {
		mcp_task_free(t);
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return NULL;
	}
	r->task = t;
	t->run = r;
	res = mcp_task_json(t, req->rev, NULL, false);
	if (res && req->rev->era == MCP_ERA_MODERN)
		json_object_set_new(res, "resultType", json_string("task"));
	else if (res)
		res = json_pack("{s:o}", "task", res);
	log_line(LOG_INFO, NULL, "%s: task %.8s… made, ttl %llu s", s->p->client, t->id,
		 (unsigned long long)(t->ttl_ms / 1000u));
	mcp_reply(s, m->id, req->rev, res);
	return r;
}

/* ---- the methods ------------------------------------------------------------------------ */

/* The task m names for s's client; NULL with the error sent. A task gone
 * says why; modern methods need the extension declared. */
static struct mcp_task *named(struct mcp_session *s, const struct jsonrpc_msg *m,
			      const struct mcp_request *req)
{
	const char *id = json_string_value(json_object_get(m->params, "taskId"));
	struct mcp_task *t;

	if (req->rev->era == MCP_ERA_MODERN && !has_extension(req)) {
		json_t *data = json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
					 TASKS_EXTENSION);

		mcp_reply_error_data(s, m->id, MCP_MISSING_CAPABILITY,
				     "Missing required client capability: the tasks extension",
				     data);
		json_decref(data);
		return NULL;
	}
	if (!id) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "taskId (a string) is needed");
		return NULL;
	}
	if (!(t = mcp_task_find(s->srv, s->p->client, id))) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "Task not found");
		return NULL;
	}
	if (t->gone) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				strcmp(t->gone, "expired") == 0
					? "Task expired: it and its result were kept for its ttl "
					  "and are gone"
					: "Task dropped: its client made more tasks than it may "
					  "keep (limits.tasks_per_client), and this one had ended");
		return NULL;
	}
	return t;
}

/* What the run of t says it is doing, as its statusMessage (new text;
 * NULL: none). */
static char *working_message(struct mcp_task *t)
{
	const struct mcp_server_hooks *h = &t->srv->hooks;
	struct mcp_progress p = {0};

	if (!t->run || !h->progress)
		return NULL;
	h->progress(t->run, &p, h->data);
	if (t->run->tool) { /* a code tool's output is not its client's */
		p.out = NULL;
		p.out_len = 0;
	}
	return mcp_progress_message(&p);
}

void mcp_m_tasks_get(struct mcp_session *s, const struct jsonrpc_msg *m,
		     const struct mcp_request *req)
{
	struct mcp_task *t = named(s, m, req);
	bool modern = req->rev->era == MCP_ERA_MODERN;
	char *msg;
	json_t *res;

	if (!t)
		return;
	msg = working_message(t);
	res = mcp_task_json(t, req->rev, msg, modern);
	free(msg);
	if (res && modern && t->run && t->run->asks)
		json_object_set_new(res, "inputRequests", mcp_ask_requests(t->run));
	mcp_reply(s, m->id, req->rev, res);
}

void mcp_m_tasks_result(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	struct mcp_task *t = named(s, m, req);

	if (!t)
		return;
	switch (mcp_task_wait(t, s, m->id)) {
	case 0:
		break;
	case -EBUSY:
		mcp_reply_error(s, m->id, JSONRPC_INVALID_REQUEST,
				"too many tasks/result requests wait for this task already");
		return;
	default:
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (t->status) /* ended: answered at once */
		mcp_task_answer_waits(t);
}

void mcp_m_tasks_list(struct mcp_session *s, const struct jsonrpc_msg *m,
		      const struct mcp_request *req)
{
	json_t *tasks = json_array();

	/* One page: a client holds at most limits.tasks_per_client. */
	if (json_object_get(m->params, "cursor")) {
		json_decref(tasks);
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	for (struct mcp_task *t = s->srv->tasks; tasks && t; t = t->next)
		if (!t->gone && strcmp(t->client, s->p->client) == 0)
			json_array_append_new(tasks, mcp_task_json(t, req->rev, NULL, false));
	mcp_reply(s, m->id, req->rev, tasks ? json_pack("{s:o}", "tasks", tasks) : NULL);
}

void mcp_m_tasks_cancel(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	struct mcp_task *t = named(s, m, req);
	bool modern = req->rev->era == MCP_ERA_MODERN;

	if (!t)
		return;
	if (t->status && !modern) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"the task has ended already: it cannot be cancelled");
		return;
	}
	if (t->run) {
		log_line(LOG_INFO, t->run->label[0] ? t->run->label : NULL,
			 "%s: task %.8s… cancelled by its client", s->p->client, t->id);
		mcp_run_cancel(t->run, t->client);
	}
	mcp_reply(s, m->id, req->rev,
		  modern ? json_object() : mcp_task_json(t, req->rev, NULL, false));
}

void mcp_m_tasks_update(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	const json_t *responses = json_object_get(m->params, "inputResponses");
	struct mcp_task *t;

	if (!(t = named(s, m, req)))
		return;
	if (!json_is_object(responses)) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"inputResponses (an object) is needed");
		return;
	}
	/* Keys not open (answered, never asked, or the task ended) are
	 * ignored, as the extension says. */
	if (t->run)
		mcp_ask_update(t->run, responses);
	mcp_reply(s, m->id, req->rev, json_object());
}

/* ---- expiry ------------------------------------------------------------------------------- */

void mcp_tasks_expire(void *data)
{
	struct mcp_server *srv = data;
	uint64_t now = loop_now_ms();

	for (struct mcp_task *t = srv->tasks, *next; t; t = next) {
		next = t->next;
		if (t->expires > now)
			continue;
		if (t->gone) { /* its id has said so for a ttl more */
			mcp_task_free(t);
			continue;
		}
		if (t->run) /* its cell outlived the task: limits say it cannot */
			mcp_run_cancel(t->run, "ttl");
		mcp_task_forget(t, "expired");
		t->expires = now + t->ttl_ms;
	}
	mcp_task_timer_arm(srv);
}

unsigned mcp_server_client_tasks_end(struct mcp_server *srv, const char *client, const char *by)
{
	unsigned n = 0;

	for (struct mcp_task *t = srv->tasks, *next; t; t = next) {
		next = t->next;
		if (strcmp(t->client, client) != 0)
			continue;
		if (t->run)
			mcp_run_cancel(t->run, by);
		n += !t->gone;
		mcp_task_free(t);
		next = srv->tasks; /* a cancel may have changed the list */
	}
	return n;
}

void mcp_server_tasks_end(struct mcp_server *srv)
{
	while (srv->tasks) {
		struct mcp_task *t = srv->tasks;

		if (t->run)
			mcp_run_cancel(t->run, NULL);
		mcp_task_free(t);
	}
}
