/* task.c: calls of tools that run only as MCP tasks, or may and the call
 * may take long (UPSTREAM_TASK_LONG_MS; docs/tasks.md). Such a call asks
 * tools/call for a task (2025-11-25: params.task); the
 * server answers at once with the task it made, whose status is then
 * asked for (tasks/get) at the interval the server suggests, held to
 * TASK_POLL_MIN_MS..TASK_POLL_MAX_MS, until it ended; then its result
 * (tasks/result) is the call's answer, through the usual path with its
 * cap. The call's deadline covers all of it; when it passes, or the
 * caller gives up, the task is cancelled at the server (tasks/cancel). A
 * task the server says it cancelled, or one whose status is not one of
 * the five, ends the call with an error. */
#define _GNU_SOURCE
#include "upstream/core.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc/jsonrpc.h"

#define TASK_POLL_MIN_MS 250u
#define TASK_POLL_MAX_MS 5000u
#define TASK_POLL_DEF_MS 1000u
#define TASK_ID_MAX	 256u /* a server's task id we keep and send back */

json_t *upstream_task_param(const struct upstream *u, const char *tool, uint64_t ttl_ms)
{
	if (!u->tasks || u->v.modern)
		return NULL;
	for (size_t i = 0; i < u->ntools; i++)
		if (strcmp(u->tools[i].name, tool) == 0 &&
		    (u->tools[i].task_required ||
		     (u->tools[i].task_optional && ttl_ms >= UPSTREAM_TASK_LONG_MS)))
			return json_pack("{s:I}", "ttl", (json_int_t)ttl_ms);
	return NULL;
}

/* The server's suggested interval (pollInterval; absent or bad: ours), held
 * to our bounds. */
static unsigned poll_ms(const json_t *task)
{
	const json_t *iv = json_object_get(task, "pollInterval");
	json_int_t ms = json_is_integer(iv) ? json_integer_value(iv) : TASK_POLL_DEF_MS;

	if (ms < TASK_POLL_MIN_MS)
		return TASK_POLL_MIN_MS;
	return ms > TASK_POLL_MAX_MS ? TASK_POLL_MAX_MS : (unsigned)ms;
}

/* A task id we send back: 1 to TASK_ID_MAX visible ASCII bytes. */
static bool task_id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > TASK_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (id[i] <= 0x20 || id[i] >= 0x7f)
			return false;
	return true;
}

/* r waits poll_ms for its next status: no request of it is in flight. */
static void poll_later(struct upstream *u, struct req *r)
{
	r->poll_at = loop_now_ms() + r->poll_ms;
	upstream_timer_rearm(u);
}

static void fail(struct upstream *u, struct req *r, const char *why)
{
	ulog(u, LOG_WARN, "task of %s: %s", r->tool ? r->tool : "a call", why);
	upstream_task_cancel(u, r);
	upstream_call_finish(u, r, UPSTREAM_ERROR, NULL, why);
}

/* tools/call's answer: the task the server made (CreateTaskResult), or
 * (false) a result the server gave directly. */
static bool created(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	const json_t *task = json_object_get(m->result, "task");
	const char *id = json_string_value(json_object_get(task, "taskId"));

	if (m->kind != JSONRPC_RESULT || !json_is_object(task))
		return false;
	if (!task_id_ok(id)) {
		fail(u, r, "the server's answer was refused: its task has no usable taskId");
		return true;
	}
	if (!(r->task_id = strdup(id))) {
		fail(u, r, "out of memory");
		return true;
	}
	r->poll_ms = poll_ms(task);
	poll_later(u, r);
	return true;
}

/* tasks/get's answer: ask again later, ask for the result, or end. */
static void status_answered(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	const char *st = json_string_value(json_object_get(m->result, "status"));
	json_t *p;
	int rc;

	if (m->kind == JSONRPC_ERROR || !st) {
		fail(u, r, "the server's answer about its task was refused, or an error");
		return;
	}
	r->poll_ms = poll_ms(m->result);
	/* input_required: the server would ask us, and we declared nothing
	 * to answer with; it stays until our deadline cancels it. */
	if (strcmp(st, "working") == 0 || strcmp(st, "input_required") == 0) {
		poll_later(u, r);
		return;
	}
	if (strcmp(st, "cancelled") == 0) {
		upstream_call_finish(u, r, UPSTREAM_ERROR, NULL, "the server cancelled its task");
		return;
	}
	if (strcmp(st, "completed") != 0 && strcmp(st, "failed") != 0) {
		fail(u, r, "the server's answer was refused: an unknown task status");
		return;
	}
	p = json_pack("{s:s}", "taskId", r->task_id);
	rc = p ? upstream_req_resend(u, r, "tasks/result", p) : -ENOMEM;
	json_decref(p);
	if (rc == -ENOBUFS)
		poll_later(u, r); /* asked again: it is still ended */
	else if (rc < 0)
		fail(u, r, UPSTREAM_REASON_UNAVAILABLE);
}

bool upstream_task_answer(struct upstream *u, struct req *r, const struct jsonrpc_msg *m)
{
	if (!r->task_id)
		return created(u, r, m);
	if (strcmp(r->method, "tasks/get") == 0) {
		status_answered(u, r, m);
		return true;
	}
	return false; /* tasks/result: the call's answer */
}

void upstream_task_polls(struct upstream *u)
{
	uint64_t now = loop_now_ms();

	for (struct req *r = u->head, *next; r; r = next) {
		json_t *p;
		int rc;

		next = r->next;
		if (!r->poll_at || r->poll_at > now || u->v.run != UP_RUN_READY)
			continue;
		r->poll_at = 0;
		p = json_pack("{s:s}", "taskId", r->task_id);
		rc = p ? upstream_req_resend(u, r, "tasks/get", p) : -ENOMEM;
		json_decref(p);
		if (rc == -ENOBUFS) {
			poll_later(u, r);
		} else if (rc < 0) {
			upstream_call_finish(u, r, UPSTREAM_UNAVAILABLE, NULL,
					     UPSTREAM_REASON_UNAVAILABLE);
			next = u->head; /* a callback may have changed the list */
		}
	}
}

void upstream_task_cancel(struct upstream *u, struct req *r)
{
	json_t *p;
	char *line = NULL;
	size_t len;

	if (!r->task_id || u->v.run != UP_RUN_READY)
		return;
	/* Its answer matches nothing pending, and is dropped. */
	p = json_pack("{s:s}", "taskId", r->task_id);
	if (!p ||
	    upstream_request_encode(u, u->next_id++, "tasks/cancel", p, &line, &len, NULL) < 0 ||
	    upstream_control_send(u, line, len) < 0)
		ulog(u, LOG_WARN, "could not send tasks/cancel for a task of %s", r->tool);
	else
		ulog(u, LOG_INFO, "cancelled the task of a call of %s", r->tool);
	json_decref(p);
	free(r->task_id);
	r->task_id = NULL;
}
