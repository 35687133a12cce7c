/* fuzz_session.c: the MCP dispatch core on hostile lines.
 *
 * The input is split at newlines; each piece goes to a session as one
 * client message, in either era or none. Runs the session hands off are
 * answered, failed, poked or left in flight by turns, and the session is
 * freed at the end (cancelling what is left). Whatever comes in:
 *   - every message the session sends is one line of JSON, an object with
 *     "jsonrpc": "2.0", and either a method (a notification, or an
 *     elicitation/create request with a string id) or an id with exactly
 *     one of result and error;
 *   - no run is handed off under an id another run in flight has;
 *   - every run handed off is answered or cancelled exactly once;
 *   - every question put to the client (mcp_run_ask) is answered or
 *     withdrawn exactly once;
 *   - every result to a 2026-07-28 request carries resultType "complete"
 *     (or "input_required", with its requestState, or "task", with its
 *     taskId), and no result to a legacy one carries a resultType.
 * A line's "@S@" is replaced by the last requestState the session gave
 * out, so retries reach past the MAC, and "@T@" by the last task id, so
 * the tasks methods reach a task (runs become tasks as clients ask).
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc/jsonrpc.h"
#include "mcp/session.h"
#include "cell/cell.h"

/* The owner's answer, as the run renders it: the outcome's result object. */
static void finish_outcome(struct mcp_run *run, const struct cell_outcome *o)
{
	json_t *obj = cell_outcome_json(o);

	mcp_run_finish(run, obj, cell_outcome_is_error(o), o->files);
	json_decref(obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define RUNS_MAX 64
#define ASKS_MAX 64

struct state {
	struct mcp_run *runs[RUNS_MAX];
	json_t *ids[RUNS_MAX];	 /* each run's request id */
	unsigned eras[RUNS_MAX]; /* each run's era */
	size_t nruns;
	unsigned long handed, ended;
	struct mcp_ask *asks[ASKS_MAX]; /* open questions */
	bool open[ASKS_MAX];
	unsigned long asked, answered;
	char state[128]; /* the last requestState */
	char task[64];	 /* the last taskId */
	unsigned era;	 /* of the request being answered now; 0: not known */
};

static struct state st;

static int t_send(void *t, char *line, size_t len)
{
	json_error_t je;
	json_t *v;
	(void)t;

	if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1))
		__builtin_trap();
	v = json_loadb(line, len - 1, 0, &je);
	if (!json_is_object(v) || !json_is_string(json_object_get(v, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(v, "jsonrpc")), "2.0") != 0)
		__builtin_trap();
	if (json_object_get(v, "method")) {
		if (json_object_get(v, "id") &&
		    (strcmp(json_string_value(json_object_get(v, "method")),
			    "elicitation/create") != 0 ||
		     !json_is_string(json_object_get(v, "id"))))
			__builtin_trap(); /* the one request it sends */
	} else if (!json_object_get(v, "id") ||
		   !json_object_get(v, "result") == !json_object_get(v, "error")) {
		__builtin_trap();
	}
	{
		const char *rs = json_string_value(
			json_object_get(json_object_get(v, "result"), "requestState"));

		if (rs) { /* answered: the parked run's id is free again */
			snprintf(st.state, sizeof(st.state), "%s", rs);
			for (size_t i = 0; i < st.nruns; i++)
				if (st.ids[i] &&
				    jsonrpc_id_equal(st.ids[i], json_object_get(v, "id"))) {
					json_decref(st.ids[i]);
					st.ids[i] = NULL;
				}
		}
	}
	{
		const json_t *res = json_object_get(v, "result");
		const char *rt = json_string_value(json_object_get(res, "resultType"));

		const char *tid = json_string_value(json_object_get(res, "taskId"));

		if (!tid)
			tid = json_string_value(
				json_object_get(json_object_get(res, "task"), "taskId"));
		if (tid)
			snprintf(st.task, sizeof(st.task), "%s", tid);
		if (res && st.era == MCP_ERA_MODERN &&
		    (!rt || (strcmp(rt, "complete") != 0 &&
			     (strcmp(rt, "task") != 0 ||
			      !json_is_string(json_object_get(res, "taskId"))) &&
			     (strcmp(rt, "input_required") != 0 ||
			      !json_is_string(json_object_get(res, "requestState"))))))
			__builtin_trap(); /* a modern result that does not say what it is */
		if (res && st.era == MCP_ERA_LEGACY && json_object_get(res, "resultType"))
			__builtin_trap();
	}
	json_decref(v);
	free(line);
	return 0;
}

/* The era of the request line[0..len), told apart as the session does (a
 * _meta with the version key is modern), or 0 when it is no request. */
static unsigned line_era(const char *line, size_t len)
{
	json_t *v = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	const json_t *meta = json_object_get(json_object_get(v, "params"), "_meta");
	unsigned era = 0;

	if (json_is_object(v) && json_object_get(v, "method") && json_object_get(v, "id"))
		era = json_object_get(meta, META_VERSION) ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	json_decref(v);
	return era;
}

static void on_answer(void *token, const char *outcome)
{
	size_t i = (size_t)(uintptr_t)token;
	(void)outcome;

	if (i >= ASKS_MAX || !st.open[i])
		__builtin_trap(); /* answered twice, or after it was withdrawn */
	st.open[i] = false;
	st.answered++;
}

static void t_close(void *t, const char *why)
{
	(void)t;
	(void)why;
}

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	(void)len;
	(void)data;
	if (!req->rev || !req->principal)
		__builtin_trap();
	/* a code tool's call: its name, arguments an object or none, no code */
	if (req->tool &&
	    (code || strcmp(req->tool, "sum") != 0 || (req->args && !json_is_object(req->args))))
		__builtin_trap();
	if (!req->tool && !code)
		__builtin_trap();
	st.handed++;
	for (size_t i = 0; i < st.nruns; i++)
		if (st.ids[i] && jsonrpc_id_equal(st.ids[i], req->id))
			__builtin_trap();
	if (st.nruns == RUNS_MAX) {
		mcp_run_fail(run, "full");
		st.ended++;
		return;
	}
	st.ids[st.nruns] = json_deep_copy(req->id);
	st.eras[st.nruns] = req->rev->era;
	st.runs[st.nruns++] = run;
}

static void drop(size_t i)
{
	json_decref(st.ids[i]);
	st.runs[i] = st.runs[st.nruns - 1];
	st.ids[i] = st.ids[st.nruns - 1];
	st.eras[i] = st.eras[st.nruns - 1];
	st.nruns--;
	st.ended++;
}

static void on_cancel(struct mcp_run *run, void *data)
{
	(void)data;
	for (size_t i = 0; i < st.nruns; i++)
		if (st.runs[i] == run) {
			drop(i);
			return;
		}
	__builtin_trap(); /* a run not in flight */
}

static void progress(struct mcp_run *run, struct mcp_progress *p, void *data)
{
	(void)run;
	(void)data;
	p->calls = 3;
	p->out = "out\xc3\xa9";
	p->out_len = 5;
}

static void task_limits(struct mcp_task_limits *out, void *data)
{
	(void)data;
	out->ttl_ms = 60000;
	out->min_ttl_ms = 0;
	out->per_client = 3;
}

static const char *description(const char *role, void *data)
{
	(void)role;
	(void)data;
	return "d";
}

/* One code tool besides run_python; its schemas as MCP lists them. */
static void listing(const char *role, struct mcp_listing *out, void *data)
{
	static json_t *in, *outs;
	static struct mcp_code_tool t;

	(void)role;
	(void)data;
	if (!in) {
		in = json_pack("{s:s,s:{s:{s:s}}}", "type", "object", "properties", "a", "type",
			       "integer");
		outs = json_pack("{s:s}", "type", "object");
		t = (struct mcp_code_tool){.name = "sum",
					   .description = "s",
					   .input_schema = in,
					   .output_schema = outs,
					   .read_only = true};
	}
	out->run_python = true;
	out->tools = &t;
	out->ntools = 1;
}

/* Act on the oldest run in flight, by the byte b. */
static void act(uint8_t b)
{
	static const struct cell_outcome o = {.out = "x", .out_len = 1, .calls = 1};

	if (!st.nruns)
		return;
	st.era = st.eras[b % 6 == 4 ? st.nruns - 1 : 0]; /* the run acted on */
	switch (b % 6) {
	case 0:
		finish_outcome(st.runs[0], &o);
		drop(0);
		break;
	case 1:
		mcp_run_fail(st.runs[0], "no");
		drop(0);
		break;
	case 2:
		mcp_run_poke(st.runs[0]);
		break;
	case 4: {
		static const unsigned char bind[32] = {7};
		char why[128];
		size_t i;
		struct mcp_ask_spec sp = {.text = "t.w\n  x: 1",
					  .bind = bind,
					  .label = "run",
					  .timeout_ms = 1000,
					  .fn = on_answer};

		for (i = 0; i < ASKS_MAX && st.open[i]; i++)
			;
		if (i == ASKS_MAX)
			break;
		sp.token = (void *)(uintptr_t)i;
		if ((st.asks[i] = mcp_run_ask(st.runs[st.nruns - 1], &sp, why, sizeof(why)))) {
			st.open[i] = true;
			st.asked++;
		}
		break;
	}
	case 5:
		for (size_t i = 0; i < ASKS_MAX; i++)
			if (st.open[i]) {
				mcp_ask_cancel(st.asks[i]);
				st.open[i] = false;
				st.answered++;
				break;
			}
		break;
	default:
		break; /* left in flight */
	}
	st.era = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct loop *loop;
	static const struct mcp_principal p = {.client = "fuzz", .role = "r"};
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .progress = progress,
					 .description = description,
					 .listing = listing,
					 .task_limits = task_limits,
					 .output_schema = cell_outcome_schema()};
	struct mcp_transport t = {.send = t_send, .close = t_close};
	struct appl_err err = {0};
	struct mcp_server *srv;
	struct mcp_session *s;
	size_t at = 0;

	if (!loop && sodium_init() < 0)
		return 0;
	if (!loop && !(loop = loop_new(&err)))
		return 0;
	memset(&st, 0, sizeof(st));
	if (!(srv = mcp_server_new(loop, &hooks, &err)))
		return 0;
	if (!(s = mcp_session_new(srv, &t, &p, &err))) {
		mcp_server_free(srv);
		return 0;
	}
	while (at < size) {
		const uint8_t *nl = memchr(data + at, '\n', size - at);
		size_t len = nl ? (size_t)(nl - (data + at)) : size - at;
		const char *line = (const char *)data + at;
		const char *mark = len >= 3 ? memmem(line, len, "@S@", 3) : NULL;
		const char *with = st.state;

		if (!mark && len >= 3 && (mark = memmem(line, len, "@T@", 3)))
			with = st.task;
		if (mark) {
			size_t head = (size_t)(mark - line), n = strlen(with);
			char *buf = malloc(len - 3 + n + 1);

			if (buf) {
				memcpy(buf, line, head);
				memcpy(buf + head, with, n);
				memcpy(buf + head + n, mark + 3, len - head - 3);
				st.era = line_era(buf, len - 3 + n);
				mcp_session_input(s, buf, len - 3 + n);
				free(buf);
			}
		} else {
			st.era = line_era(line, len);
			mcp_session_input(s, line, len);
		}
		st.era = 0;
		act(len ? (uint8_t)(data[at] + len) : 0); /* what follows the line */
		if (len > 2 && data[at + 1] == 'X')
			mcp_server_tools_changed(srv, "r");
		at += len + 1;
	}
	mcp_session_free(s);
	mcp_server_tasks_end(srv); /* the tasks outlive their session */
	if (st.nruns || st.ended != st.handed || st.asked != st.answered)
		__builtin_trap();
	mcp_server_free(srv);
	return 0;
}
