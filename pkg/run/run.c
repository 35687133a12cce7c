/* run.c: one run from admission to answer, and the set of them (see
 * run.h). */
#include "run/run.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "run/admit.h"
#include "schema/schema.h"
#include "trace/trace.h"

enum run_state {
	RUN_WAITING, /* in line for a slot, its admission timer set */
	RUN_RUNNING, /* its cell has its code */
	RUN_ENDED,   /* to be answered and freed at the end of the round */
};

struct run {
	struct run *next, *prev;
	struct run_set *set;
	enum run_state state;
	struct run_client client;
	bool live;  /* the client waits for the answer (not cancelled) */
	char *name; /* client.name's copy */
	struct bridge_catalog *cat;
	struct run_ticket *ticket; /* its place in line, then its slot */
	struct loop_timer *admit;  /* while waiting: fires at the deadline */
	struct cell *cell;	   /* NULL while waiting */
	struct bridge_run *br;
	uint64_t arrival;
	uint64_t deadline_ms; /* the cell's, counted from arrival */
	char *code;
	size_t code_len;
	const char *fail;	   /* why it never ran (static), or NULL */
	char *stopped;		   /* run_interrupt's why */
	char *cancelled_by;	   /* run_cancel_by's who */
	void *owner;		   /* run_new's, given back by run_owner and released */
	bool cell_kept;		   /* the cell is its session's (run_cell_keep) */
	const char *session_ended; /* run_session_ended's */
	const char *value_refused; /* a code tool's value not passed on: why (static) */
	/* Its spans (NULL: none): the run's, its wait for a sandbox, its cell. */
	struct trace_span *span, *wait, *cell_span;
	char id[RUN_ID_LEN + 1];
};

/* Why a run never ran (run.fail), each its own text so the metrics can
 * tell them apart. */
static const char FAIL_BOOT[] = "the run could not start: the sandbox failed to boot";
static const char FAIL_WAITED[] = "the run waited for a free slot until its deadline passed";
static const char FAIL_CANCELLED[] = "cancelled while it waited for a free slot";
static const char FAIL_STOPPED[] = "the appliance stopped before the run could start";

struct run_set {
	struct run_set_config cfg;
	struct cell_limits cell; /* cfg.cell's copy */
	struct run_queue *queue;
	struct run *runs; /* newest first */
	struct audit *audit;
	struct loop_task reap;
};

/* ---- the audit log's lines of a run ------------------------------------------ */

static void id_new(char out[RUN_ID_LEN + 1])
{
	unsigned char b[RUN_ID_BYTES];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, RUN_ID_LEN + 1, b, sizeof(b));
}

/* The first line, with a keyed digest of the code, never the code. */
static void audit_start(struct run *r)
{
	char digest[AUDIT_HASH_HEX];
	json_t *body;

	audit_digest_of(r->set->audit, r->code, r->code_len, digest);
	body = json_pack("{ss ss ss? ss? ss sI ss?}", "run", r->id, "client", r->name, "role",
			 r->client.role, "revision", r->client.revision, "code", digest,
			 "code_bytes", (json_int_t)r->code_len, "session",
			 r->client.session_digest);
	/* A code tool's program is the policy's: its plain SHA-256 is the
	 * one the policy pins it by. */
	if (body && r->client.tool &&
	    (json_object_set_new(body, "tool", json_string(r->client.tool->name)) < 0 ||
	     json_object_set_new(body, "program",
				 json_sprintf("sha256:%s", r->client.tool->sha256)) < 0)) {
		json_decref(body);
		body = NULL;
	}
	/* A run that answers an MCP task, not a request held open. */
	if (body && r->client.task)
		json_object_set_new(body, "task", json_true());
	audit_event(r->set->audit, "run.start", body);
	json_decref(body);
}

/* A run.file line for each file returned, before run.end: what left the
 * sandbox, by name, size, type and SHA-256 (a line each, since 64 of them
 * would not fit one line of the log). The number of them, for run.end. */
static json_int_t audit_files(struct run *r, const json_t *files)
{
	json_int_t n = 0;
	json_t *f, *body;
	size_t i;

	json_array_foreach(files, i, f) {
		if (json_object_get(f, "reason"))
			continue;
		body = json_pack("{ss sO sO sO sO}", "run", r->id, "name",
				 json_object_get(f, "name"), "bytes", json_object_get(f, "bytes"),
				 "type", json_object_get(f, "type"), "sha256",
				 json_object_get(f, "sha256"));
		audit_event(r->set->audit, "run.file", body);
		json_decref(body);
		n++;
	}
	return n;
}

/* The last line: run.end for a run that ran, run.refused for one that never
 * got a cell. On disk before the answer leaves: 0, or the log's failure. */
static int audit_end(struct run *r, const struct cell_outcome *o)
{
	struct audit *a = r->set->audit;
	const char *reason;
	json_t *body;
	int rc;

	if (!a)
		return 0;
	if (!o) {
		body = json_pack("{ss ss ss}", "run", r->id, "client", r->name, "reason",
				 r->fail ? r->fail : "it could not start");
		if (body && r->cancelled_by)
			json_object_set_new(body, "cancelled_by", json_string(r->cancelled_by));
		audit_event(a, "run.refused", body);
		json_decref(body);
		return audit_flush(a, false);
	}
	reason = cell_reason_name(o->reason);
	body = json_pack("{ss ss sI sI sI sI sb}", "run", r->id, "reason",
			 reason	    ? reason
			 : o->error ? "error"
				    : "done",
			 "ms", (json_int_t)(loop_now_ms() - r->arrival), "calls",
			 (json_int_t)o->calls, "out_bytes", (json_int_t)o->out_len, "files",
			 audit_files(r, o->files), "answered", r->live);
	if (body && r->client.session_digest)
		json_object_set_new(body, "session", json_string(r->client.session_digest));
	if (body && r->session_ended)
		json_object_set_new(body, "session_ended", json_string(r->session_ended));
	if (body && r->value_refused)
		json_object_set_new(body, "value_refused", json_string(r->value_refused));
	if (body && r->cancelled_by)
		json_object_set_new(body, "cancelled_by", json_string(r->cancelled_by));
	if (!r->live) {
		audit_event(a, "run.end", body);
		json_decref(body);
		return 0;
	}
	rc = audit_event_sync(a, "run.end", body);
	if (rc < 0) {
		/* Queued for when the log can be written again: not answered. */
		log_line(LOG_ERR, r->id, "the run's end could not be logged: %s", audit_why(a));
		json_object_set_new(body, "answered", json_false());
		json_object_set_new(body, "withheld", json_true());
		audit_event(a, "run.end", body);
	}
	json_decref(body);
	return rc;
}

/* A run the appliance's stop ended before it was answered. */
static void audit_shutdown(struct run *r)
{
	json_t *body;

	if (!r->set->audit)
		return;
	body = json_pack("{ss ss sI sI sI sb}", "run", r->id, "reason", "shutdown", "ms",
			 (json_int_t)(loop_now_ms() - r->arrival), "calls",
			 (json_int_t)run_calls(r), "out_bytes", (json_int_t)0, "answered", 0);
	audit_event(r->set->audit, "run.end", body);
	json_decref(body);
}

void run_set_refuse(struct run_set *s, const struct run_client *client, const char *why)
{
	run_set_refuse_logged(s, client, why, why);
}

void run_set_refuse_logged(struct run_set *s, const struct run_client *client, const char *why,
			   const char *logged)
{
	char id[RUN_ID_LEN + 1];
	json_t *body;

	if (s->audit) {
		id_new(id);
		body = json_pack("{ss ss ss ss?}", "run", id, "client", client->name, "reason",
				 logged, "tool", client->tool ? client->tool->name : NULL);
		audit_event(s->audit, "run.refused", body);
		json_decref(body);
	}
	client->answer(client->c, NULL, true, why, NULL);
}

/* ---- spans ------------------------------------------------------------------------ */

/* The run's span below its request's, and the wait for a sandbox below
 * it: names from the policy and numbers only. */
static void spans_start(struct run *r, const struct trace_ctx *parent)
{
	char name[TRACE_NAME_MAX];
	struct tracer *t = r->set->cfg.tracer;

	if (!t || !parent)
		return;
	snprintf(name, sizeof(name), "run %s",
		 r->client.tool ? r->client.tool->name : "run_python");
	r->span = trace_span_start(t, parent, name, TRACE_INTERNAL);
	trace_span_str(r->span, "appliance.run.id", r->id);
	trace_span_str(r->span, "appliance.client", r->name);
	trace_span_str(r->span, "appliance.role", r->client.role);
	if (r->client.tool)
		trace_span_str(r->span, "gen_ai.tool.name", r->client.tool->name);
	r->wait = trace_span_start(t, trace_span_ctx(r->span), "sandbox", TRACE_INTERNAL);
}

/* How it ended, on its spans, which end. */
static void spans_end(struct run *r, const char *outcome, const char *reason, bool is_error)
{
	trace_span_end(r->wait);
	r->wait = NULL;
	trace_span_end(r->cell_span);
	r->cell_span = NULL;
	trace_span_str(r->span, "appliance.run.outcome", outcome);
	trace_span_str(r->span, "appliance.run.reason", reason);
	trace_span_int(r->span, "appliance.run.calls", (int64_t)run_calls(r));
	if (is_error)
		trace_span_error(r->span);
	trace_span_end(r->span);
	r->span = NULL;
}

const struct trace_ctx *run_trace(const struct run *r)
{
	return trace_span_ctx(r->span);
}

/* ---- the answer ---------------------------------------------------------------- */

static void end_log(const struct run *r, const struct cell_outcome *o)
{
	const char *reason = cell_reason_name(o->reason);
	char text[512];

	/* Why a run was stopped is the host's own text (a violation quotes at
	 * most 32 printable bytes of the runner's), escaped all the same; the
	 * code's own traceback is not logged. */
	text[0] = '\0';
	if (reason && o->error)
		log_escape(o->error, strlen(o->error), text, sizeof(text), NULL);
	log_line(LOG_INFO, r->id, "ended: %s%s%s, %lu calls, %llu ms%s", reason ? reason : "done",
		 text[0] ? ": " : "", text, o->calls,
		 (unsigned long long)(loop_now_ms() - r->arrival), r->live ? "" : " (cancelled)");
}

/* Why r never ran, in the metrics' fixed words (metrics.h). */
static const char *not_run_reason(const struct run *r)
{
	static const struct {
		const char *fail, *reason;
	} fails[] = {{FAIL_WAITED, "waited"},
		     {FAIL_BOOT, "boot"},
		     {FAIL_CANCELLED, "cancelled"},
		     {FAIL_STOPPED, "signal"}};

	if (r->cell)
		return "no_result";
	for (size_t i = 0; i < sizeof(fails) / sizeof(fails[0]); i++)
		if (r->fail == fails[i].fail)
			return fails[i].reason;
	return "other";
}

/* How r ended, for the metrics: a run that ran by its cell's reason. */
/* How r ended, for the metrics and its spans: a run that ran by its
 * cell's reason. */
static void end_count(struct run *r, const struct cell_outcome *o)
{
	const char *reason = o ? cell_reason_name(o->reason) : NULL;
	const char *outcome = !o ? "not_run" : reason ? "stopped" : o->error ? "error" : "ok";

	if (!o)
		reason = not_run_reason(r);
	else if (!reason)
		reason = "none";
	metrics_cell(outcome, reason, o != NULL, o ? loop_now_ms() - r->arrival : 0);
	spans_end(r, outcome, reason, strcmp(outcome, "ok") != 0 || r->value_refused);
}

static void say(struct run *r, const json_t *result, bool is_error, const char *text,
		const json_t *files)
{
	r->live = false;
	r->client.answer(r->client.c, result, is_error, text, files);
}

/* The outcome as the client sees it: a run stopped by run_interrupt says
 * so rather than "cancelled". */
static void outcome_of(const struct run *r, struct cell_outcome *o)
{
	*o = *cell_outcome(r->cell);
	if (r->stopped && o->reason == CELL_CANCELLED) {
		o->reason = CELL_SIGNAL;
		o->error = r->stopped;
	}
}

static void answer_outcome(struct run *r, const struct cell_outcome *o)
{
	json_t *obj = cell_outcome_json(o);

	/* A session's run gives its handle back, and says when the session
	 * ended with it. */
	if (obj && r->client.session &&
	    (json_object_set_new(obj, "session", json_string(r->client.session)) < 0 ||
	     (r->session_ended &&
	      json_object_set_new(obj, "session_ended", json_string(r->session_ended)) < 0))) {
		json_decref(obj);
		obj = NULL;
	}

	if (!obj)
		say(r, NULL, true, "out of memory", NULL);
	else
		say(r, obj, cell_outcome_is_error(o), NULL, o->files);
	json_decref(obj);
}

/* A code tool's answer: its program's value, checked against its output
 * schema, or a failure (why, cap bytes) naming the exception, the stop or
 * the first mismatch. The value is never passed on when it does not
 * match. NULL when it failed. */
static const json_t *tool_value(struct run *r, const struct cell_outcome *o, char *why, size_t cap)
{
	const struct policy_code_tool *t = r->client.tool;
	const char *reason = cell_reason_name(o->reason);
	struct appl_err err = {0};

	if (reason || o->error) {
		/* The traceback's last line names the exception. */
		const char *e = o->error ? o->error : reason;
		size_t n = strlen(e), b;

		while (n && e[n - 1] == '\n')
			n--;
		for (b = n; b && e[b - 1] != '\n'; b--)
			;
		snprintf(why, cap, "%s: the program %s: %.*s", t->name,
			 reason ? "was stopped" : "raised", (int)(n - b), e + b);
		return NULL;
	}
	if (o->value_cut) {
		r->value_refused = "cap";
		snprintf(why, cap, "%s: the program's value is larger than the cap of %u bytes",
			 t->name, (unsigned)APPL_CELL_RESULT_MAX);
		return NULL;
	}
	if (t->output && schema_validate(t->output, o->value ? o->value : json_null(), &err) < 0) {
		r->value_refused = "output_schema";
		snprintf(why, cap, "%s: the program's value does not match its output_schema: %s",
			 t->name, err.msg);
		return NULL;
	}
	return o->value ? o->value : json_null();
}

/* Logged, recorded, answered: once, at the end of the round it ended in. */
static void answer(struct run *r)
{
	struct cell_outcome o;
	bool ran = r->cell && cell_outcome(r->cell);
	const json_t *v = NULL;
	char msg[640], why[640];

	if (ran) {
		outcome_of(r, &o);
		end_log(r, &o);
		/* A code tool's value is judged first: the log says when it was
		 * not passed on. */
		if (r->client.tool)
			v = tool_value(r, &o, why, sizeof(why));
	} else {
		log_line(LOG_INFO, r->id, "ended without a run: %s",
			 r->fail ? r->fail : "it could not start");
	}
	end_count(r, ran ? &o : NULL);
	if (audit_end(r, ran ? &o : NULL) < 0 && r->live && ran) {
		/* Fail closed: what the log does not hold, the client does not get. */
		snprintf(msg, sizeof(msg),
			 "the run's answer is withheld: the audit log cannot be written (%s)",
			 audit_why(r->set->audit));
		say(r, NULL, true, msg, NULL);
	}
	if (!r->live)
		return;
	if (ran && r->client.tool)
		say(r, v, !v, v ? NULL : why, v ? o.files : NULL);
	else if (ran)
		answer_outcome(r, &o);
	else
		say(r, NULL, true,
		    r->cell   ? "the run ended without a result"
		    : r->fail ? r->fail
			      : "the run could not start",
		    NULL);
}

/* ---- states ---------------------------------------------------------------------- */

/* r's place in line, or its slot, is free. */
static void release(struct run *r)
{
	run_queue_leave(r->set->queue, r->ticket);
	r->ticket = NULL;
}

/* r ended (or never started): answered and freed at the end of the round,
 * outside every handler of its cell. A run that never got a cell leaves
 * the line now, so it is never handed a slot; a cell's slot frees with
 * the cell. */
static void ended(struct run *r)
{
	if (r->state == RUN_ENDED)
		return;
	r->state = RUN_ENDED;
	loop_timer_set(r->admit, 0);
	if (!r->cell)
		release(r);
	loop_defer(r->set->cfg.loop, &r->set->reap);
}

static void run_unlink(struct run *r)
{
	struct run_set *s = r->set;

	if (r->prev)
		r->prev->next = r->next;
	else
		s->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
}

static void run_free(struct run *r)
{
	run_unlink(r);
	/* In-flight calls are cancelled upstream before the cell goes. */
	bridge_run_free(r->br);
	loop_timer_free(r->admit);
	if (!r->cell_kept)
		cell_free(r->cell);
	release(r);
	bridge_catalog_unref(r->cat);
	spans_end(r, "shutdown", "shutdown", true); /* those answer did not end */
	json_decref((json_t *)r->client.args);
	free(r->code);
	free(r->name);
	free(r->stopped);
	free(r->cancelled_by);
	/* Last: what the owner releases (the policy the run was admitted
	 * under) may hold what everything above used. */
	if (r->set->cfg.released)
		r->set->cfg.released(r->set->cfg.data, r->owner);
	free(r);
}

static void on_cell_done(struct cell *c, void *data)
{
	struct run *r = data;

	if (r->set->cfg.cell_ended && cell_outcome(c))
		r->set->cfg.cell_ended(r->set->cfg.data, cell_outcome(c)->reason);
	ended(r);
}

static void on_cell_progress(struct cell *c, void *data)
{
	struct run *r = data;
	(void)c;

	if (r->live && r->client.progress)
		r->client.progress(r->client.c);
}

/* Waiting runs start while there are free slots, the clients with runs
 * waiting taking turns (admit.h). */
static void advance(struct run_set *s)
{
	struct run_ticket *t;

	while ((t = run_queue_next(s->queue))) {
		struct run *r = run_ticket_data(t);
		struct appl_err err = {0};

		if (s->cfg.start(r, s->cfg.data, &err) < 0) {
			log_line(LOG_ERR, r->id, "starting a sandbox failed: %s", err.msg);
			r->fail = FAIL_BOOT;
			ended(r);
		}
	}
}

/* Answer and free every run that ended this round, then start the next. */
static void reap(void *data)
{
	struct run_set *s = data;
	unsigned n = 0;

	for (struct run *r = s->runs, *next; r; r = next) {
		next = r->next;
		if (r->state != RUN_ENDED)
			continue;
		if (r->client.session_data && s->cfg.settle)
			s->cfg.settle(s->cfg.data, r);
		answer(r);
		run_free(r);
		n++;
	}
	advance(s);
	if (s->cfg.reaped)
		s->cfg.reaped(s->cfg.data, n);
}

/* A run that waited for a slot until its deadline never starts. */
static void on_admit_timeout(void *data)
{
	struct run *r = data;

	if (r->state != RUN_WAITING)
		return;
	r->fail = FAIL_WAITED;
	ended(r);
}

int run_begin(struct run *r, struct cell *cell, struct bridge_run *br, struct appl_err *err)
{
	struct cell_hooks hooks = {
		.on_done = on_cell_done, .on_progress = on_cell_progress, .data = r};
	const json_t *tools = r->cat ? bridge_catalog_runner_tools(r->cat) : NULL;
	struct cell_limits lim = r->set->cell;

	r->cell = cell;
	r->br = br;
	lim.deadline_ms = r->deadline_ms;
	if ((r->client.args && cell_set_args(cell, r->client.args) < 0 &&
	     appl_err_set(err, -EINVAL, "a run's arguments are not an object") < 0) ||
	    cell_run(cell, r->code, r->code_len, tools, &lim, &hooks, r->arrival, err) < 0) {
		bridge_run_free(br);
		cell_free(cell);
		r->br = NULL;
		r->cell = NULL;
		return err->code;
	}
	r->state = RUN_RUNNING;
	loop_timer_set(r->admit, 0);
	trace_span_end(r->wait);
	r->wait = NULL;
	if (r->span)
		r->cell_span = trace_span_start(r->set->cfg.tracer, trace_span_ctx(r->span), "cell",
						TRACE_INTERNAL);
	log_line(LOG_INFO, r->id, "sandbox %s", cell_sandbox_id(cell));
	return 0;
}

struct cell *run_cell_keep(struct run *r)
{
	r->cell_kept = r->cell != NULL;
	return r->cell;
}

void run_session_ended(struct run *r, const char *why)
{
	r->session_ended = why;
}

void run_cancel_by(struct run *r, const char *who)
{
	if (who && !r->cancelled_by)
		r->cancelled_by = strdup(who);
	run_cancel(r);
}

void run_cancel(struct run *r)
{
	r->live = false; /* no answer goes out for a cancelled request */
	if (r->state == RUN_RUNNING)
		cell_cancel(r->cell);
	else if (r->state == RUN_WAITING)
		r->fail = FAIL_CANCELLED;
	ended(r);
}

void run_interrupt(struct run *r, const char *why)
{
	if (r->state == RUN_ENDED)
		return;
	free(r->stopped);
	r->stopped = strdup(why);
	if (r->state == RUN_RUNNING) {
		cell_cancel(r->cell);
		ended(r);
		return;
	}
	r->fail = FAIL_STOPPED;
	ended(r);
}

/* ---- approvals: the bridge asks the person at the client through the run ---------- */

static void *ask(void *a, const char *text, const unsigned char bind[32], bridge_answer_fn fn,
		 void *token, char *why, size_t cap)
{
	struct run *r = a;
	struct run_question q = {.text = text,
				 .bind = bind,
				 .label = r->id,
				 .timeout_ms = r->set->cfg.approval_timeout_ms,
				 .fn = fn,
				 .token = token};

	if (!r->live) {
		snprintf(why, cap, "the client has gone");
		return NULL;
	}
	/* The handle is the client's; q is copied there, not kept. */
	// cppcheck-suppress returnDanglingLifetime
	return r->client.ask(r->client.c, &q, why, cap);
}

static void withdraw(void *a, void *handle)
{
	struct run *r = a;

	r->client.withdraw(r->client.c, handle);
}

struct bridge_asker run_asker(struct run *r)
{
	if (!r->client.ask)
		return (struct bridge_asker){0};
	return (struct bridge_asker){ask, withdraw, r};
}

/* ---- a new run ------------------------------------------------------------------------ */

struct run *run_new(struct run_set *s, const char *code, size_t len,
		    const struct run_client *client, struct bridge_catalog *cat, void *owner,
		    struct appl_err *err)
{
	struct run *r = calloc(1, sizeof(*r));

	if (!r || !(r->code = malloc(len + 1)) || !(r->name = strdup(client->name)) ||
	    !(r->admit = loop_timer_new(s->cfg.loop, on_admit_timeout, r, err)) ||
	    !(r->ticket = run_queue_join(s->queue, client->name, r))) {
		if (r) {
			loop_timer_free(r->admit);
			free(r->name);
			free(r->code);
		}
		free(r);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	r->set = s;
	r->owner = owner;
	r->client = *client;
	r->client.name = r->name;
	r->live = true;
	r->cat = cat ? bridge_catalog_ref(cat) : NULL;
	json_incref((json_t *)client->args);
	memcpy(r->code, code, len);
	r->code[len] = '\0';
	r->code_len = len;
	r->arrival = loop_now_ms();
	id_new(r->id);
	spans_start(r, client->trace);
	r->client.trace = NULL; /* copied into the span: not kept */
	if (client->tool)
		log_line(LOG_INFO, r->id, "code tool %s: its program of %zu bytes (%s, %s)",
			 client->tool->name, len, r->name,
			 client->revision ? client->revision : "in process");
	else
		log_line(LOG_INFO, r->id, "run_python: %zu bytes of code (%s, %s)", len, r->name,
			 client->revision ? client->revision : "in process");
	if (s->audit)
		audit_start(r);
	r->deadline_ms = s->cell.deadline_ms;
	if (client->deadline_ms && client->deadline_ms < r->deadline_ms)
		r->deadline_ms = client->deadline_ms;
	loop_timer_set(r->admit, r->deadline_ms);
	r->next = s->runs;
	if (s->runs)
		s->runs->prev = r;
	s->runs = r;
	advance(s);
	return r;
}

/* ---- reading a run ------------------------------------------------------------------- */

const char *run_id(const struct run *r)
{
	return r->id;
}

const struct cell *run_cell(const struct run *r)
{
	return r->cell;
}

const struct run_client *run_client(const struct run *r)
{
	return &r->client;
}

struct bridge_catalog *run_catalog(const struct run *r)
{
	return r->cat;
}

bool run_waiting(const struct run *r)
{
	return !r->cell;
}

unsigned long run_calls(const struct run *r)
{
	return r->cell ? cell_calls(r->cell) : 0;
}

const char *run_output(const struct run *r, size_t *len)
{
	*len = 0;
	return r->cell ? cell_output(r->cell, len) : NULL;
}

/* ---- the set ---------------------------------------------------------------------------- */

struct run_set *run_set_new(const struct run_set_config *cfg, struct appl_err *err)
{
	struct run_set *s = calloc(1, sizeof(*s));

	if (!s || !(s->queue = run_queue_new(cfg->cells, cfg->per_client))) {
		free(s);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	s->cfg = *cfg;
	s->cell = *cfg->cell;
	loop_task_init(&s->reap, reap, s);
	return s;
}

void run_set_limits(struct run_set *s, const struct cell_limits *cell, unsigned cells,
		    unsigned per_client, unsigned approval_timeout_ms)
{
	s->cell = *cell;
	s->cfg.cells = cells;
	s->cfg.per_client = per_client;
	s->cfg.approval_timeout_ms = approval_timeout_ms;
	run_queue_limits(s->queue, cells, per_client);
	advance(s);
}

void *run_owner(const struct run *r)
{
	return r->owner;
}

void run_set_audit(struct run_set *s, struct audit *a)
{
	s->audit = a;
}

unsigned run_set_waiting(const struct run_set *s, const char *client)
{
	return run_queue_waiting(s->queue, client);
}

unsigned run_set_count(const struct run_set *s)
{
	unsigned n = 0;

	for (const struct run *r = s->runs; r; r = r->next)
		n++;
	return n;
}

void run_set_each(const struct run_set *s, run_set_each_fn fn, void *data)
{
	for (const struct run *r = s ? s->runs : NULL; r; r = r->next)
		if (r->state != RUN_ENDED)
			fn(data, r->name, r->state == RUN_WAITING);
}

void run_set_stop(struct run_set *s)
{
	for (struct run *r = s ? s->runs : NULL; r; r = r->next)
		if (r->state == RUN_RUNNING)
			cell_cancel(r->cell);
}

void run_set_free(struct run_set *s)
{
	if (!s)
		return;
	while (s->runs) {
		s->runs->live = false;
		audit_shutdown(s->runs);
		run_free(s->runs);
	}
	loop_task_cancel(s->cfg.loop, &s->reap);
	run_queue_free(s->queue);
	free(s);
}
