/* run.c: one run's tool calls: the budget, the in-flight cap and its FIFO,
 * the upstream's answer (see bridge.h). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "base/limits.h"
#include "base/utf8.h"
#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "cell/cell.h"
#include "log/log.h"
#include "loop/loop.h"
#include "mcp/upstream_set.h"

#define RUN_LOG_ID_MAX 32

struct bridge_call {
	struct bridge_call *next, *prev; /* on the waiting or the in-flight list */
	struct bridge_run *run;
	json_int_t id;
	const char *server, *name; /* borrowed from the catalog the run holds */
	char *tool;		   /* "server.name", for messages */
	json_t *args;
	uint64_t up_id;
	uint64_t sent_ms;
	bool sent;
	struct bridge_ask *ask; /* while a person is asked */
	uint64_t ask_ms;
	const char *by; /* who was asked: "program" or "client" */
};

struct call_list {
	struct bridge_call *head, *tail;
	unsigned n;
};

struct bridge_run {
	struct bridge_catalog *cat;
	struct bridge_limits lim;
	struct upstream_set *ups;
	struct cell *cell;
	char log_id[RUN_LOG_ID_MAX + 1];
	unsigned long calls; /* every call the code made */
	struct call_list waiting, inflight;
	unsigned peak;
	bool pumping;
	struct audit *audit; /* NULL: no audit log */
	const char *role;    /* for the log; borrowed from the policy */
	struct bridge_approvals ap;
	unsigned asked;		 /* questions this run asked */
	struct call_list asking; /* calls waiting for a yes */
};

void bridge_limits_from_policy(const struct policy_limits *l, struct bridge_limits *out)
{
	out->max_calls = l->max_calls;
	out->concurrency = l->concurrency;
	out->call_timeout_ms = l->call_timeout_s * 1000u;
	out->max_args_bytes = l->max_args_bytes;
	out->max_result_bytes = l->max_result_bytes;
}

static void list_push(struct call_list *l, struct bridge_call *c)
{
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
	l->n++;
}

static void list_del(struct call_list *l, struct bridge_call *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->next = c->prev = NULL;
	l->n--;
}

static void call_free(struct bridge_call *c)
{
	json_decref(c->args);
	free(c->tool);
	free(c);
}

/* ---- the audit log's lines of a call -------------------------------------- */

#define AUDIT_TOOL_MAX 128 /* of a tool name the code made up */

static const char *access_name(const struct bridge_run *r, const char *server, const char *name)
{
	const struct bridge_entry *e = server ? bridge_catalog_find(r->cat, server, name) : NULL;

	if (!e)
		return NULL;
	return e->access == POLICY_ACCESS_WRITE ? "write" : "read";
}

/* The call's line: outcome "sent" or "refused" (with reason). The tool
 * name is the code's and may be anything: cut, and made valid UTF-8. */
static json_t *call_line(struct bridge_run *r, json_int_t id, const char *tool, const char *access,
			 const json_t *args, const char *outcome, const char *reason)
{
	char name[AUDIT_TOOL_MAX + 1], digest[AUDIT_HASH_HEX];
	char *a = args ? json_dumps(args, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	size_t alen = a ? strlen(a) : 0;
	json_t *o;

	snprintf(name, sizeof(name), "%s", tool);
	appl_utf8_trim(name);
	audit_digest_of(r->audit, a ? a : "", alen, digest);
	free(a);
	o = json_pack("{ss sI ss ss? ss? ss sI ss}", "run", r->log_id, "id", id, "tool", name,
		      "role", r->role, "access", access, "args", digest, "args_bytes",
		      (json_int_t)alen, "outcome", outcome);
	if (o && reason)
		json_object_set_new(o, "reason", json_string(reason));
	return o;
}

static void audit_refusal(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args,
			  const char *msg)
{
	json_t *o;

	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	const char *dot = strchr(tool, '.');
	const char *access = NULL;

	if (!r->audit)
		return;
	if (dot && (size_t)(dot - tool) < sizeof(server)) {
		memcpy(server, tool, (size_t)(dot - tool));
		server[dot - tool] = '\0';
		access = access_name(r, server, dot + 1);
	}
	o = call_line(r, id, tool, access, args, "refused", msg);
	audit_event(r->audit, "call", o);
	json_decref(o);
}

static void audit_end(struct bridge_run *r, const struct bridge_call *c, const char *outcome,
		      size_t result_bytes)
{
	json_t *o;

	if (!r->audit)
		return;
	o = json_pack("{ss sI ss ss sI sI}", "run", r->log_id, "id", c->id, "tool", c->tool,
		      "outcome", outcome, "result_bytes", (json_int_t)result_bytes, "ms",
		      (json_int_t)(loop_now_ms() - c->sent_ms));
	audit_event(r->audit, "call.end", o);
	json_decref(o);
}

/* Every refusal reaches the cell here, and the log. The text may quote a
 * server: escaped for the log. */
static void say_no(struct bridge_run *r, json_int_t id, const char *msg)
{
	char text[APPL_TOOL_ERROR_MAX * 4 + 1];

	if (log_enabled(LOG_INFO)) {
		log_escape(msg, strlen(msg), text, sizeof(text), NULL);
		log_line(LOG_INFO, r->log_id[0] ? r->log_id : NULL, "call %lld: %s", (long long)id,
			 text);
	}
	cell_call_refuse(r->cell, id, msg);
}

/* A refusal that names the tool: before, the tool, after, detail. */
struct say {
	const char *before, *after;
};

static void refuse(struct bridge_run *r, json_int_t id, struct say s, const char *tool,
		   const char *detail)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];

	if (snprintf(msg, sizeof(msg), "%s%s%s%s", s.before, tool, s.after, detail ? detail : "") >=
	    (int)sizeof(msg))
		appl_utf8_trim(msg); /* the cut may have split a character */
	say_no(r, id, msg);
}

static const struct say SAY_UNAVAILABLE = {"upstream_unavailable: the server of ",
					   " is not available"};

static void pump(struct bridge_run *r);

static void on_result(void *ctx, int status, const json_t *result, const char *reason)
{
	struct bridge_call *c = ctx;
	struct bridge_run *r = c->run;
	char msg[APPL_TOOL_ERROR_MAX + 1];
	json_t *value = NULL;
	const char *outcome;
	int rc;

	list_del(&r->inflight, c);
	outcome = status == UPSTREAM_TIMEOUT	 ? "timeout"
		  : status == UPSTREAM_ERROR	 ? "error"
		  : status == UPSTREAM_CANCELLED ? "cancelled"
		  : status == UPSTREAM_TOO_LARGE ? "too_large"
						 : "unavailable";
	switch (status) {
	case UPSTREAM_OK:
		rc = bridge_result_value(result, r->lim.max_result_bytes, &value, msg, sizeof(msg));
		outcome = rc == 0	 ? "ok"
			  : rc == 1	 ? "tool_error"
			  : rc == -EFBIG ? "too_large"
					 : "malformed";
		/* Its size is measured again only for the log. */
		audit_end(r, c, outcome, r->audit ? json_dumpb(result, NULL, 0, JSON_COMPACT) : 0);
		if (rc == 0)
			cell_call_answer(r->cell, c->id, value);
		else if (rc == 1) /* the tool's own error: its text, as it is */
			say_no(r, c->id, msg);
		else
			refuse(r, c->id, (struct say){"refused: ", ": "}, c->tool, msg);
		json_decref(value);
		break;
	case UPSTREAM_TIMEOUT:
		snprintf(msg, sizeof(msg), "timeout: %s did not answer within %u ms", c->tool,
			 r->lim.call_timeout_ms);
		say_no(r, c->id, msg);
		break;
	case UPSTREAM_ERROR:
		refuse(r, c->id, (struct say){"", ": the server answered with an error: "}, c->tool,
		       reason);
		break;
	case UPSTREAM_CANCELLED:
		refuse(r, c->id, (struct say){"cancelled: ", ""}, c->tool, NULL);
		break;
	case UPSTREAM_TOO_LARGE:
		snprintf(msg, sizeof(msg), "the tool's result is over the cap of %zu bytes",
			 r->lim.max_result_bytes);
		refuse(r, c->id, (struct say){"refused: ", ": "}, c->tool, msg);
		break;
	default:
		refuse(r, c->id, SAY_UNAVAILABLE, c->tool, NULL);
		break;
	}
	if (status != UPSTREAM_OK)
		audit_end(r, c, outcome, 0);
	call_free(c);
	pump(r);
}

static const struct say SAY_NO_AUDIT = {"refused: ",
					": the audit log cannot be written, so no call goes out"};

static const char *send_outcome(int rc)
{
	return rc == -EAGAIN  ? "unavailable"
	       : rc == -EBUSY ? "busy"
	       : rc == -EFBIG ? "too_large"
			      : "host_fault";
}

/* The call's line before it goes out: a write's on disk first. false when
 * the log cannot take it, and the call must not go. */
static bool audit_sent(struct bridge_run *r, struct bridge_call *c)
{
	const char *access = access_name(r, c->server, c->name);
	json_t *o;
	int rc = 0;

	if (!audit_ok(r->audit) && audit_flush(r->audit, false) < 0)
		return false;
	o = call_line(r, c->id, c->tool, access, c->args, "sent", NULL);
	if (access && strcmp(access, "write") == 0)
		rc = audit_event_sync(r->audit, "call", o);
	else
		audit_event(r->audit, "call", o);
	json_decref(o);
	return rc == 0;
}

static struct say send_error(int rc)
{
	switch (rc) {
	case -EAGAIN:
		return SAY_UNAVAILABLE;
	case -EBUSY:
		return (struct say){"refused: ", ": too many calls are pending at its server"};
	case -EFBIG:
		return (struct say){"refused: ", ": the request is too large for its server"};
	case -ENOMEM:
		return (struct say){"", ": host fault: MemoryError"};
	default:
		return (struct say){"", ": host fault: OSError"};
	}
}

static void send_one(struct bridge_run *r, struct bridge_call *c)
{
	int rc;

	if (r->audit && !audit_sent(r, c)) {
		char msg[APPL_TOOL_ERROR_MAX + 1];

		snprintf(msg, sizeof(msg), "%s%s%s", SAY_NO_AUDIT.before, c->tool,
			 SAY_NO_AUDIT.after);
		audit_refusal(r, c->id, c->tool, c->args, msg);
		refuse(r, c->id, SAY_NO_AUDIT, c->tool, NULL);
		call_free(c);
		return;
	}
	c->sent_ms = loop_now_ms();
	list_push(&r->inflight, c);
	if (r->inflight.n > r->peak)
		r->peak = r->inflight.n;
	rc = upstream_set_call(r->ups, c->server, c->name, c->args, r->lim.call_timeout_ms,
			       on_result, c, &c->up_id, r->log_id[0] ? r->log_id : NULL);
	if (rc == 0) {
		c->sent = true;
		json_decref(c->args);
		c->args = NULL;
		return;
	}
	list_del(&r->inflight, c);
	audit_end(r, c, send_outcome(rc), 0);
	refuse(r, c->id, send_error(rc), c->tool, NULL);
	call_free(c);
}

/* Send what waits while there is room. Not re-entered: a refusal inside it
 * goes to the cell, never back here. */
static void pump(struct bridge_run *r)
{
	if (r->pumping)
		return;
	r->pumping = true;
	while (r->waiting.head && r->inflight.n < r->lim.concurrency) {
		struct bridge_call *c = r->waiting.head;

		list_del(&r->waiting, c);
		send_one(r, c);
	}
	r->pumping = false;
}

static void on_cell_call(void *data, json_int_t id, const char *tool, const json_t *args)
{
	bridge_run_call(data, id, tool, args);
}

struct bridge_run *bridge_run_new(struct bridge_catalog *c, const struct bridge_limits *lim,
				  struct upstream_set *ups, struct cell *cell, const char *log_id,
				  struct appl_err *err)
{
	struct bridge_run *r = calloc(1, sizeof(*r));

	if (!r) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	r->cat = bridge_catalog_ref(c);
	r->lim = *lim;
	if (r->lim.concurrency == 0)
		r->lim.concurrency = 1;
	r->ups = ups;
	r->cell = cell;
	snprintf(r->log_id, sizeof(r->log_id), "%s", log_id ? log_id : "");
	cell_set_caller(cell, on_cell_call, r);
	return r;
}

/* ---- approvals ------------------------------------------------------------- */

static void audit_approval(struct bridge_run *r, const struct bridge_call *c, const char *outcome,
			   uint64_t ms)
{
	json_t *o;

	if (!r->audit)
		return;
	o = json_pack("{ss sI ss ss? ss? ss sI}", "run", r->log_id, "id", c->id, "tool", c->tool,
		      "role", r->role, "by", c->by, "outcome", outcome, "ms", (json_int_t)ms);
	audit_event(r->audit, "approval", o);
	json_decref(o);
}

static void approval_no(struct bridge_run *r, struct bridge_call *c, const char *outcome,
			const char *why)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];

	audit_approval(r, c, outcome, c->ask_ms ? loop_now_ms() - c->ask_ms : 0);
	snprintf(msg, sizeof(msg), "refused: %s: no approval: %s", c->tool, why);
	audit_refusal(r, c->id, c->tool, c->args, msg);
	say_no(r, c->id, msg);
	call_free(c);
}

static void on_approval(void *data, const char *outcome)
{
	struct bridge_call *c = data;
	struct bridge_run *r = c->run;
	bool program = strcmp(c->by, "program") == 0;
	char why[64];

	list_del(&r->asking, c);
	bridge_ask_free(c->ask);
	c->ask = NULL;
	if (strcmp(outcome, "approved") == 0) {
		audit_approval(r, c, outcome, loop_now_ms() - c->ask_ms);
		list_push(&r->waiting, c);
		pump(r);
		return;
	}
	if (strcmp(outcome, "timeout") == 0)
		snprintf(why, sizeof(why), "no answer within %u s", r->ap.timeout_ms / 1000);
	else if (strcmp(outcome, "cancelled") == 0)
		snprintf(why, sizeof(why), "the question was cancelled");
	else if (strcmp(outcome, "unavailable") == 0)
		snprintf(why, sizeof(why), "the client could not ask");
	else
		snprintf(why, sizeof(why), "%s said no",
			 program ? "the approver" : "the person asked");
	approval_no(r, c, outcome, why);
}

/* What binds a question to its call: the call's id, tool and arguments. */
static void call_bind(const struct bridge_call *c, unsigned char out[32])
{
	crypto_generichash_state st;
	char *args = json_dumps(c->args, JSON_COMPACT | JSON_SORT_KEYS);
	char id[24];

	snprintf(id, sizeof(id), "%lld", (long long)c->id);
	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const unsigned char *)id, strlen(id) + 1);
	crypto_generichash_update(&st, (const unsigned char *)c->tool, strlen(c->tool) + 1);
	if (args)
		crypto_generichash_update(&st, (const unsigned char *)args, strlen(args));
	crypto_generichash_final(&st, out, 32);
	free(args);
}

/* c needs a person's yes before it may wait its turn: the approver program
 * when the policy names one, else the person at the client. */
static void approval_ask(struct bridge_run *r, struct bridge_call *c)
{
	struct appl_err err = {0};
	unsigned char bind[32];
	char why[160] = "";
	json_t *q;

	if (!r->ap.loop || (!r->ap.command && !r->ap.asker.ask)) {
		approval_no(r, c, "unavailable", "nobody can be asked (no approver program)");
		return;
	}
	c->by = r->ap.command ? "program" : "client";
	if (r->asked >= r->ap.max) {
		snprintf(why, sizeof(why), "this run has asked %u times, its limit", r->ap.max);
		approval_no(r, c, "unavailable", why);
		return;
	}
	r->asked++;
	c->ask_ms = loop_now_ms();
	q = bridge_question_obj(r->log_id, r->ap.client, r->role, c->server, c->name, c->args);
	if (q && r->ap.command) {
		char *text = json_dumps(q, JSON_COMPACT);

		c->ask = text ? bridge_ask_start(r->ap.loop, r->ap.command, r->ap.timeout_ms, text,
						 strlen(text), on_approval, c, &err)
			      : NULL;
		free(text);
		if (!c->ask)
			snprintf(why, sizeof(why), "the approver could not be asked");
	} else if (q) {
		call_bind(c, bind);
		c->ask = bridge_ask_client(r->ap.loop, &r->ap.asker, r->ap.timeout_ms,
					   json_string_value(json_object_get(q, "text")), bind,
					   on_approval, c, why, sizeof(why));
	}
	json_decref(q);
	if (!c->ask) {
		if (err.msg[0] || !q)
			log_line(LOG_ERR, r->log_id[0] ? r->log_id : NULL, "approver: %s",
				 err.msg[0] ? err.msg : "out of memory");
		approval_no(r, c, "unavailable", why[0] ? why : "out of memory");
		return;
	}
	list_push(&r->asking, c);
}

void bridge_run_approvals(struct bridge_run *r, const struct bridge_approvals *ap)
{
	r->ap = *ap;
}

/* A refusal before the call is sent: the cell's answer and the log's line.
 * Past the budget only the first refusal gets a line: a cell that goes on
 * calling must not fill the log's disk (run.end counts every call). */
static void call_refuse(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args,
			const char *msg)
{
	if (r->calls <= (unsigned long)r->lim.max_calls + 1)
		audit_refusal(r, id, tool, args, msg);
	say_no(r, id, msg);
}

void bridge_run_call(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];
	const struct bridge_entry *entry;
	const char *server, *name;
	struct bridge_call *c;

	r->calls++;
	if (bridge_check(r->cat, tool, args, r->lim.max_args_bytes, &server, &name, msg,
			 sizeof(msg)) < 0) {
		call_refuse(r, id, tool, args, msg);
		return;
	}
	if (r->calls > r->lim.max_calls) {
		snprintf(msg, sizeof(msg), "refused: %s: call budget exhausted (%u calls per run)",
			 tool, r->lim.max_calls);
		call_refuse(r, id, tool, args, msg);
		return;
	}
	if (r->waiting.n >= APPL_BRIDGE_WAITING_MAX) {
		snprintf(msg, sizeof(msg), "refused: %s: %u calls are already waiting", tool,
			 APPL_BRIDGE_WAITING_MAX);
		call_refuse(r, id, tool, args, msg);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->tool = strdup(tool)) || !(c->args = json_incref((json_t *)args))) {
		if (c)
			free(c->tool);
		free(c);
		snprintf(msg, sizeof(msg), "%s: host fault: MemoryError", tool);
		call_refuse(r, id, tool, args, msg);
		return;
	}
	c->run = r;
	c->id = id;
	c->server = server;
	c->name = name;
	entry = bridge_catalog_find(r->cat, server, name);
	if (entry && entry->approval) {
		approval_ask(r, c);
		return;
	}
	list_push(&r->waiting, c);
	pump(r);
}

unsigned bridge_run_inflight(const struct bridge_run *r)
{
	return r->inflight.n;
}

unsigned bridge_run_peak(const struct bridge_run *r)
{
	return r->peak;
}

void bridge_run_audit(struct bridge_run *r, struct audit *a, const char *role)
{
	r->audit = a;
	r->role = role;
}

void bridge_run_free(struct bridge_run *r)
{
	if (!r)
		return;
	cell_set_caller(r->cell, NULL, NULL);
	while (r->inflight.head) {
		struct bridge_call *c = r->inflight.head;

		list_del(&r->inflight, c);
		if (c->sent)
			upstream_set_cancel(r->ups, c->server, c->up_id);
		audit_end(r, c, "abandoned", 0); /* the run ended first */
		call_free(c);
	}
	while (r->waiting.head) {
		struct bridge_call *c = r->waiting.head;

		list_del(&r->waiting, c);
		audit_refusal(r, c->id, c->tool, c->args, "the run ended before the call could go");
		call_free(c);
	}
	while (r->asking.head) {
		struct bridge_call *c = r->asking.head;

		list_del(&r->asking, c);
		bridge_ask_free(c->ask);
		audit_approval(r, c, "cancelled", loop_now_ms() - c->ask_ms);
		call_free(c);
	}
	bridge_catalog_unref(r->cat);
	free(r);
}
