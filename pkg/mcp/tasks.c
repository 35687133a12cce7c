/* tasks.c: the tasks a server keeps (docs/tasks.md): each task's record,
 * its Task object in either revision, the session its run lives in and
 * where what that run sends goes (see internal.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"
#include "metrics/metrics.h"

/* How often a client is asked to poll, in ms: often while a task is
 * young, so a short cell's result comes soon; less once it has run a
 * while, so a long one costs little. */
#define TASK_POLL_SOON_MS  500u
#define TASK_POLL_LATER_MS 2000u
#define TASK_YOUNG_MS	   10000u

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ms as ISO 8601 in UTC, with milliseconds. */
static json_t *iso_time(uint64_t ms)
{
	time_t sec = (time_t)(ms / 1000u);
	struct tm tm;
	char buf[40], out[48];

	if (!gmtime_r(&sec, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm))
		return json_string("1970-01-01T00:00:00Z");
	snprintf(out, sizeof(out), "%s.%03uZ", buf, (unsigned)(ms % 1000u));
	return json_string(out);
}

/* The gauges: tasks kept, and the bytes of their results (as compact
 * JSON, counted once when kept). */
static void gauges(const struct mcp_server *srv)
{
	int64_t n = 0, bytes = 0;

	for (const struct mcp_task *t = srv->tasks; t; t = t->next) {
		n += !t->gone;
		bytes += (int64_t)t->result_bytes;
	}
	metrics_set(METRICS_TASKS, n);
	metrics_set(METRICS_TASK_BYTES, bytes);
}

/* ---- where a task's run's messages go ------------------------------------------ */

static struct mcp_session *session_of(struct mcp_server *srv, uint64_t serial)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		if (s->serial == serial && !s->ended)
			return s;
	return NULL;
}

/* The first tasks/result still waiting in a live session, its session in
 * *out; NULL: none. */
static struct task_wait *live_wait(struct mcp_task *t, struct mcp_session **out)
{
	for (struct task_wait *w = t->waits; w; w = w->next)
		if ((*out = session_of(t->srv, w->serial)))
			return w;
	return NULL;
}

/* What the run sends (progress, a log message, a question withdrawn): with
 * a tasks/result that waits, on its stream; else to the session that made
 * the task, as about no request; else nowhere. */
static void route(struct mcp_task *t, char *line, size_t len)
{
	struct mcp_session *s = NULL;
	struct task_wait *w = live_wait(t, &s);

	if (w)
		mcp_send_line_for(s, w->id, line, len);
	else if ((s = session_of(t->srv, t->origin)))
		mcp_send_line(s, line, len);
	else
		free(line);
}

static int task_send(void *tp, char *line, size_t len)
{
	route(tp, line, len);
	return 0;
}

static int task_send_for(void *tp, const json_t *related, char *line, size_t len)
{
	(void)related;
	route(tp, line, len);
	return 0;
}

static void task_close(void *tp, const char *why)
{
	(void)tp;
	(void)why;
}

void mcp_task_send_request(struct mcp_task *t, char *line, size_t len, const char *key)
{
	struct mcp_session *s = NULL;
	struct task_wait *w = live_wait(t, &s);
	struct task_line *l, **end;

	if (w) {
		mcp_send_line_for(s, w->id, line, len);
		return;
	}
	if (!(l = calloc(1, sizeof(*l)))) {
		free(line);
		return;
	}
	l->line = line;
	l->len = len;
	snprintf(l->key, sizeof(l->key), "%s", key);
	for (end = &t->lines; *end; end = &(*end)->next)
		;
	*end = l;
}

bool mcp_task_unsend(struct mcp_task *t, const char *key)
{
	for (struct task_line **pl = &t->lines; *pl; pl = &(*pl)->next) {
		struct task_line *l = *pl;

		if (strcmp(l->key, key) != 0)
			continue;
		*pl = l->next;
		free(l->line);
		free(l);
		return true;
	}
	return false;
}

/* ---- a task's life -------------------------------------------------------------- */

/* The session t's run lives in: like a client's, but it answers nobody
 * (route). */
static struct mcp_session *run_session(struct mcp_task *t, const struct mcp_session *from)
{
	struct mcp_session *hs = calloc(1, sizeof(*hs));
	struct mcp_server *srv = t->srv;

	if (!hs)
		return NULL;
	hs->srv = srv;
	hs->t = (struct mcp_transport){
		.send = task_send, .close = task_close, .send_for = task_send_for, .t = t};
	hs->p = &t->p;
	hs->legacy = from->legacy;
	hs->initialized = from->initialized;
	hs->log_level = from->log_level;
	if (from->legacy_caps && !(hs->legacy_caps = json_deep_copy(from->legacy_caps))) {
		free(hs);
		return NULL;
	}
	hs->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = hs;
	srv->sessions = hs;
	return hs;
}

static void run_session_free(struct mcp_session *hs)
{
	struct mcp_server *srv;

	if (!hs)
		return;
	srv = hs->srv;
	if (hs->prev)
		hs->prev->next = hs->next;
	else
		srv->sessions = hs->next;
	if (hs->next)
		hs->next->prev = hs->prev;
	json_decref(hs->legacy_caps);
	free(hs);
}

struct mcp_task *mcp_task_new(struct mcp_session *s, const struct mcp_request *req, uint64_t ttl_ms)
{
	struct mcp_server *srv = s->srv;
	struct mcp_task *t = calloc(1, sizeof(*t));
	unsigned char raw[MCP_TASK_ID_LEN / 2];

	if (!t)
		return NULL;
	t->srv = srv;
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(t->id, sizeof(t->id), raw, sizeof(raw));
	t->client = strdup(s->p->client);
	t->role = s->p->role ? strdup(s->p->role) : NULL;
	t->p.client = t->client;
	t->p.role = t->role;
	t->rev = req->rev;
	t->origin = s->serial;
	t->created = t->updated = wall_ms();
	t->ttl_ms = ttl_ms;
	t->expires = loop_now_ms() + ttl_ms;
	if (!t->client || (s->p->role && !t->role) || !(t->hs = run_session(t, s))) {
		free(t->client);
		free(t->role);
		free(t);
		return NULL;
	}
	t->next = srv->tasks;
	srv->tasks = t;
	mcp_task_timer_arm(srv);
	gauges(srv);
	return t;
}

struct mcp_task *mcp_task_find(struct mcp_server *srv, const char *client, const char *id)
{
	size_t n = strlen(id);

	if (n != MCP_TASK_ID_LEN)
		return NULL;
	/* Another client's task is as unknown as one never made. */
	for (struct mcp_task *t = srv->tasks; t; t = t->next)
		if (sodium_memcmp(t->id, id, n) == 0 && strcmp(t->client, client) == 0)
			return t;
	return NULL;
}

const char *mcp_task_status(const struct mcp_task *t)
{
	if (t->status)
		return t->status;
	return t->run && t->run->asks ? "input_required" : "working";
}

void mcp_task_touch(struct mcp_task *t)
{
	t->updated = wall_ms();
}

json_t *mcp_task_meta(const struct mcp_task *t)
{
	return json_pack("{s:{s:s}}", META_RELATED_TASK, "taskId", t->id);
}

json_t *mcp_task_json(const struct mcp_task *t, const struct mcp_revision *rev, const char *message,
		      bool detailed)
{
	bool modern = rev->era == MCP_ERA_MODERN;
	const char *status = mcp_task_status(t);
	json_t *o =
		json_pack("{s:s,s:s,s:o,s:o,s:I}", "taskId", t->id, "status", status, "createdAt",
			  iso_time(t->created), "lastUpdatedAt", iso_time(t->updated),
			  modern ? "ttlMs" : "ttl", (json_int_t)t->ttl_ms);
	int bad = !o;

	if (!bad && !t->status)
		bad = json_object_set_new(o, modern ? "pollIntervalMs" : "pollInterval",
					  json_integer(wall_ms() - t->created < TASK_YOUNG_MS
							       ? TASK_POLL_SOON_MS
							       : TASK_POLL_LATER_MS));
	if (!bad && (t->status ? t->message : message))
		bad = json_object_set_new(o, "statusMessage",
					  json_string(t->status ? t->message : message));
	if (!bad && detailed && t->result)
		bad = json_object_set_new(o, "result", json_deep_copy(t->result));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* What a legacy tasks/result gets for t, ended: its result with the
 * related-task _meta, or (cancelled) an error. */
static void answer_wait(struct mcp_task *t, struct mcp_session *s, const json_t *id)
{
	json_t *res, *meta;

	if (!t->result) {
		mcp_reply_error(s, id, JSONRPC_INVALID_PARAMS,
				t->message ? t->message
					   : "the task was cancelled: it has no result");
		return;
	}
	res = json_deep_copy(t->result);
	meta = res ? json_object_get(res, "_meta") : NULL;
	if (res && !meta && json_object_set_new(res, "_meta", json_object()) == 0)
		meta = json_object_get(res, "_meta");
	if (meta)
		json_object_set_new(meta, META_RELATED_TASK, json_pack("{s:s}", "taskId", t->id));
	mcp_reply(s, id, t->rev, res);
}

static void waits_free(struct mcp_task *t, bool answer)
{
	while (t->waits) {
		struct task_wait *w = t->waits;
		struct mcp_session *s = session_of(t->srv, w->serial);

		t->waits = w->next;
		if (answer && s)
			answer_wait(t, s, w->id);
		json_decref(w->id);
		free(w);
	}
}

static void lines_free(struct mcp_task *t)
{
	while (t->lines) {
		struct task_line *l = t->lines;

		t->lines = l->next;
		free(l->line);
		free(l);
	}
}

void mcp_task_answer_waits(struct mcp_task *t)
{
	waits_free(t, true);
}

void mcp_task_end(struct mcp_task *t, json_t *result, const char *by)
{
	char msg[160];

	if (t->status) { /* cancelled already: it stays so */
		json_decref(result);
		return;
	}
	t->run = NULL;
	t->result = result;
	t->result_bytes = result ? json_dumpb(result, NULL, 0, JSON_COMPACT) : 0;
	t->status = result ? "completed" : "cancelled";
	gauges(t->srv);
	if (!result) {
		snprintf(msg, sizeof(msg), "cancelled%s%s", by ? " by " : "", by ? by : "");
		t->message = strdup(msg);
	}
	mcp_task_touch(t);
	lines_free(t); /* a question it asked went with its run */
	waits_free(t, true);
	log_line(LOG_INFO, NULL, "%s: task %.8s… %s", t->client, t->id, t->status);
}

int mcp_task_wait(struct mcp_task *t, struct mcp_session *s, const json_t *id)
{
	struct task_wait *w, **pw;
	unsigned n = 0;

	/* Those of sessions gone wait for nothing: they make room. */
	for (pw = &t->waits; (w = *pw);) {
		if (!session_of(t->srv, w->serial)) {
			*pw = w->next;
			json_decref(w->id);
			free(w);
			continue;
		}
		n++;
		pw = &w->next;
	}
	if (n >= MCP_TASK_WAITS_MAX)
		return -EBUSY;
	w = calloc(1, sizeof(*w));
	if (!w || !(w->id = jsonrpc_id_copy(id))) {
		free(w);
		return -ENOMEM;
	}
	w->serial = s->serial;
	w->next = t->waits;
	t->waits = w;
	while (t->lines) {
		struct task_line *l = t->lines;

		t->lines = l->next;
		mcp_send_line_for(s, w->id, l->line, l->len);
		free(l);
	}
	return 0;
}

bool mcp_task_waits_id(const struct mcp_server *srv, const struct mcp_session *s, const json_t *id)
{
	for (const struct mcp_task *t = srv->tasks; t; t = t->next)
		for (const struct task_wait *w = t->waits; w; w = w->next)
			if (w->serial == s->serial && jsonrpc_id_equal(w->id, id))
				return true;
	return false;
}

void mcp_task_unwait(struct mcp_server *srv, struct mcp_session *s, const json_t *id)
{
	for (struct mcp_task *t = srv->tasks; t; t = t->next)
		for (struct task_wait **pw = &t->waits; *pw; pw = &(*pw)->next) {
			struct task_wait *w = *pw;

			if (w->serial != s->serial || !jsonrpc_id_equal(w->id, id))
				continue;
			*pw = w->next;
			json_decref(w->id);
			free(w);
			return;
		}
}

void mcp_task_forget(struct mcp_task *t, const char *why)
{
	struct mcp_session *s;
	struct task_wait *w;

	/* A tasks/result still waiting hears why. */
	while ((w = live_wait(t, &s))) {
		mcp_reply_error(
			s, w->id, JSONRPC_INVALID_PARAMS,
			strcmp(why, "expired") == 0
				? "task expired: its result was kept for its ttl and is gone"
				: "task dropped: its client holds too many tasks");
		t->waits = w->next;
		json_decref(w->id);
		free(w);
	}
	waits_free(t, false);
	lines_free(t);
	t->gone = why;
	json_decref(t->result);
	t->result = NULL;
	t->result_bytes = 0;
	gauges(t->srv);
	run_session_free(t->hs);
	t->hs = NULL;
	if (!t->status)
		t->status = "cancelled";
	log_line(LOG_INFO, NULL, "%s: task %.8s… %s", t->client, t->id, why);
}

void mcp_task_free(struct mcp_task *t)
{
	struct mcp_server *srv = t->srv;

	for (struct mcp_task **pt = &srv->tasks; *pt; pt = &(*pt)->next)
		if (*pt == t) {
			*pt = t->next;
			break;
		}
	waits_free(t, false);
	lines_free(t);
	json_decref(t->result);
	run_session_free(t->hs);
	free(t->message);
	free(t->client);
	free(t->role);
	free(t);
	gauges(srv);
}

void mcp_task_timer_arm(struct mcp_server *srv)
{
	uint64_t now = loop_now_ms(), next = 0;

	if (!srv->task_timer)
		return;
	for (const struct mcp_task *t = srv->tasks; t; t = t->next)
		if (!next || t->expires < next)
			next = t->expires;
	loop_timer_set(srv->task_timer, next ? (next > now ? next - now : 1) : 0);
}
