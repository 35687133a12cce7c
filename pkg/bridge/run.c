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
#include "json/json.h"
#include "log/log.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "trace/trace.h"
#include "upstream/set.h"

#define RUN_LOG_ID_MAX 32

struct bridge_call {
	struct bridge_call *next, *prev; /* on the waiting or the in-flight list */
	struct bridge_run *run;
	json_int_t id;
	const char *server, *name; /* borrowed from the catalog the run holds */
	char *tool;		   /* "server.name" (a read: "server"), for the log */
	char *label;		   /* what the code called: "ns.fn", for messages */
	bool read;		   /* a resource read: name NULL, args {"uri": ...} */
	bool slot;		   /* holds one of the gate's slots for server */
	json_t *args;
	uint64_t up_id;
	uint64_t sent_ms;
	bool sent;
	struct bridge_ask *ask; /* while a person is asked */
	void *claiming;		/* while its ledger key is claimed */
	bool keyed;		/* claim holds its ledger key */
	unsigned char claim[32];
	uint64_t ask_ms;
	const char *by;		    /* who was asked: "program" or "client" */
	struct trace_span *span;    /* its span, NULL: none */
	struct trace_span *waiting; /* the approval's, while a person is asked */
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
	struct call_list waiting, inflight;
	unsigned peak;
	bool pumping;
	struct audit *audit; /* NULL: no audit log */
	const char *role;    /* for the log; borrowed from the policy */
	struct bridge_approvals ap;
	unsigned asked;		  /* questions this run asked */
	struct call_list asking;  /* calls waiting for a yes */
	struct bridge_gate *gate; /* per-server slots; NULL: none */
	bool joined;		  /* takes turns at the gate */
	struct tracer *tracer;	  /* NULL: no spans */
	struct trace_ctx parent;  /* the run's span, its calls' parent */
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
	trace_span_end(c->waiting);
	trace_span_end(c->span);
	json_decref(c->args);
	free(c->tool);
	free(c->label);
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
			 const json_t *args, const char *outcome, const char *reason, bool read)
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
	if (o && read)
		json_object_set_new(o, "method", json_string("resources/read"));
	return o;
}

static void audit_refusal(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args,
			  const char *msg, bool read)
{
	json_t *o;

	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	const char *dot = read ? NULL : strchr(tool, '.');
	const char *access = read ? "read" : NULL;

	if (!r->audit)
		return;
	if (dot && (size_t)(dot - tool) < sizeof(server)) {
		memcpy(server, tool, (size_t)(dot - tool));
		server[dot - tool] = '\0';
		access = access_name(r, server, dot + 1);
	}
	o = call_line(r, id, tool, access, args, "refused", msg, read);
	audit_event(r->audit, "call", o);
	json_decref(o);
}

/* The tool's name in the metrics: the policy's own text when it names the
 * tool, never the server's ("_other" for one a wildcard let in). */
static const char *metric_tool(const struct bridge_run *r, const struct bridge_call *c)
{
	const struct bridge_entry *e =
		c->read ? NULL : bridge_catalog_find(r->cat, c->server, c->name);

	return c->read ? "_read" : e && e->metric_tool ? e->metric_tool : "_other";
}

/* Every call's end passes here: its line, and its count. */
static void audit_end(struct bridge_run *r, const struct bridge_call *c, const char *outcome,
		      size_t result_bytes)
{
	json_t *o;

	metrics_count(METRICS_TOOL_CALLS, c->server, metric_tool(r, c), outcome);
	trace_span_str(c->span, "appliance.call.outcome", outcome);
	trace_span_int(c->span, "appliance.call.result_bytes", (int64_t)result_bytes);
	if (strcmp(outcome, "ok") != 0)
		trace_span_error(c->span);
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
static void say_no(struct bridge_run *r, json_int_t id, enum cell_error_kind kind, const char *msg)
{
	char text[APPL_TOOL_ERROR_MAX * 4 + 1];

	if (log_enabled(LOG_INFO)) {
		log_escape(msg, strlen(msg), text, sizeof(text), NULL);
		log_line(LOG_INFO, r->log_id[0] ? r->log_id : NULL, "call %lld: %s", (long long)id,
			 text);
	}
	cell_call_refuse(r->cell, id, kind, msg);
}

/* A refusal that names the tool: before, the tool, after, detail. */
struct say {
	const char *before, *after;
};

static void refuse(struct bridge_run *r, json_int_t id, enum cell_error_kind kind, struct say s,
		   const char *tool, const char *detail)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];

	if (snprintf(msg, sizeof(msg), "%s%s%s%s", s.before, tool, s.after, detail ? detail : "") >=
	    (int)sizeof(msg))
		appl_utf8_trim(msg); /* the cut may have split a character */
	say_no(r, id, kind, msg);
}

static const struct say SAY_UNAVAILABLE = {"upstream_unavailable: the server of ",
					   " is not available"};
static const struct say SAY_REFUSED = {"refused: ", ": "};

static void pump(struct bridge_run *r);

/* The code's value of a tool's result, or the refusal's kind and text. */
static int tool_value(struct bridge_run *r, const struct bridge_call *c, const json_t *result,
		      json_t **value, char *msg, size_t cap)
{
	const struct bridge_entry *e = bridge_catalog_find(r->cat, c->server, c->name);
	char detail[APPL_TOOL_ERROR_MAX - 16];
	int rc = bridge_result_value(result, r->lim.max_result_bytes, value, msg, cap);

	if (rc != 0 || !e || !e->output_schema)
		return rc;
	/* A tool that declares what it returns must return that. */
	if (!json_is_object(json_object_get(result, "structuredContent"))) {
		snprintf(msg, cap,
			 "the tool declares an output schema but its result has no "
			 "structured content");
	} else if (bridge_output_check(e, *value, detail, sizeof(detail)) < 0) {
		snprintf(msg, cap, "the result %s", detail);
		appl_utf8_trim(msg);
	} else {
		return 0;
	}
	json_decref(*value);
	*value = NULL;
	return -EPROTO;
}

/* The call left the in-flight list: its slot goes to the next run in turn. */
static void slot_give(struct bridge_run *r, struct bridge_call *c)
{
	if (c->slot) {
		c->slot = false;
		gate_give(r->gate, c->server);
	}
}

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
		rc = c->read ? bridge_resource_value(result, r->lim.max_result_bytes, &value, msg,
						     sizeof(msg))
			     : tool_value(r, c, result, &value, msg, sizeof(msg));
		outcome = rc == 0	  ? "ok"
			  : rc == 1	  ? "tool_error"
			  : rc == -EFBIG  ? "too_large"
			  : rc == -EPROTO ? "bad_output"
					  : "malformed";
		/* Its size is measured again only for the log. */
		audit_end(r, c, outcome, r->audit || c->span ? appl_json_size(result) : 0);
		if (c->keyed && c->sent && r->ap.ledger) /* for a replay elsewhere */
			r->ap.ledger->put(r->ap.ledger->l, c->claim, result);
		if (rc == 0)
			cell_call_answer(r->cell, c->id, value);
		else if (rc == 1) /* the tool's own error: its text, as it is */
			say_no(r, c->id, CELL_ERR_ERROR, msg);
		else if (rc == -EFBIG || rc == -E2BIG)
			refuse(r, c->id, CELL_ERR_REFUSED, SAY_REFUSED, c->label, msg);
		else
			refuse(r, c->id, CELL_ERR_ERROR, (struct say){"error: ", ": "}, c->label,
			       msg);
		json_decref(value);
		break;
	case UPSTREAM_TIMEOUT:
		snprintf(msg, sizeof(msg), "timeout: %s did not answer within %u ms", c->label,
			 r->lim.call_timeout_ms);
		appl_utf8_trim(msg);
		say_no(r, c->id, CELL_ERR_TIMEOUT, msg);
		break;
	case UPSTREAM_ERROR:
		refuse(r, c->id, CELL_ERR_ERROR,
		       (struct say){"", ": the server answered with an error: "}, c->label, reason);
		break;
	case UPSTREAM_CANCELLED:
		refuse(r, c->id, CELL_ERR_UNAVAILABLE, (struct say){"cancelled: ", ""}, c->label,
		       NULL);
		break;
	case UPSTREAM_TOO_LARGE:
		snprintf(msg, sizeof(msg), "the tool's result is over the cap of %zu bytes",
			 r->lim.max_result_bytes);
		refuse(r, c->id, CELL_ERR_REFUSED, SAY_REFUSED, c->label, msg);
		break;
	default:
		refuse(r, c->id, CELL_ERR_UNAVAILABLE, SAY_UNAVAILABLE, c->label, NULL);
		break;
	}
	if (status != UPSTREAM_OK)
		audit_end(r, c, outcome, 0);
	slot_give(r, c);
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
	const char *access = c->read ? "read" : access_name(r, c->server, c->name);
	json_t *o;
	int rc = 0;

	if (!audit_ok(r->audit) && audit_flush(r->audit, false) < 0)
		return false;
	o = call_line(r, c->id, c->tool, access, c->args, "sent", NULL, c->read);
	if (access && strcmp(access, "write") == 0)
		rc = audit_event_sync(r->audit, "call", o);
	else
		audit_event(r->audit, "call", o);
	json_decref(o);
	return rc == 0;
}

static struct say send_error(int rc, enum cell_error_kind *kind)
{
	*kind = CELL_ERR_REFUSED;
	switch (rc) {
	case -EAGAIN:
		*kind = CELL_ERR_UNAVAILABLE;
		return SAY_UNAVAILABLE;
	case -EBUSY:
		return (struct say){"refused: ", ": too many calls are pending at its server"};
	case -EFBIG:
		return (struct say){"refused: ", ": the request is too large for its server"};
	case -ENOMEM:
		*kind = CELL_ERR_ERROR;
		return (struct say){"", ": host fault: MemoryError"};
	default:
		*kind = CELL_ERR_ERROR;
		return (struct say){"", ": host fault: OSError"};
	}
}

static void send_one(struct bridge_run *r, struct bridge_call *c)
{
	enum cell_error_kind kind;
	struct say why;
	int rc;

	if (r->audit && !audit_sent(r, c)) {
		char msg[APPL_TOOL_ERROR_MAX + 1];

		snprintf(msg, sizeof(msg), "%s%s%s", SAY_NO_AUDIT.before, c->label,
			 SAY_NO_AUDIT.after);
		audit_refusal(r, c->id, c->tool, c->args, msg, c->read);
		metrics_count(METRICS_REFUSALS, "audit");
		refuse(r, c->id, CELL_ERR_REFUSED, SAY_NO_AUDIT, c->label, NULL);
		slot_give(r, c);
		call_free(c);
		return;
	}
	c->sent_ms = loop_now_ms();
	list_push(&r->inflight, c);
	if (r->inflight.n > r->peak)
		r->peak = r->inflight.n;
	if (c->read)
		rc = upstream_set_read(r->ups, c->server,
				       json_string_value(json_object_get(c->args, "uri")),
				       r->lim.call_timeout_ms, on_result, c, &c->up_id,
				       r->log_id[0] ? r->log_id : NULL);
	else {
		char tp[TRACE_PARENT_LEN + 1];

		if (c->span)
			trace_parent_format(trace_span_ctx(c->span), tp);
		rc = upstream_set_call(r->ups, c->server, c->name, c->args, r->lim.call_timeout_ms,
				       c->span ? tp : NULL, on_result, c, &c->up_id,
				       r->log_id[0] ? r->log_id : NULL);
	}
	if (rc == 0) {
		c->sent = true;
		json_decref(c->args);
		c->args = NULL;
		return;
	}
	list_del(&r->inflight, c);
	audit_end(r, c, send_outcome(rc), 0);
	why = send_error(rc, &kind);
	refuse(r, c->id, kind, why, c->label, NULL);
	slot_give(r, c);
	call_free(c);
}

static bool room(const struct bridge_run *r)
{
	return r->inflight.n < r->lim.concurrency;
}

/* Send what waits while there is room: the run's own, and a slot of the
 * call's server. A call whose server is full stays, and those behind it
 * for other servers may go. Not re-entered: a refusal inside it goes to
 * the cell, never back here. */
static void pump(struct bridge_run *r)
{
	struct bridge_call *c, *next;

	if (r->pumping)
		return;
	r->pumping = true;
	for (c = r->waiting.head; c && room(r); c = next) {
		next = c->next;
		if (r->gate && !gate_take(r->gate, c->server))
			continue;
		c->slot = r->gate != NULL;
		list_del(&r->waiting, c);
		send_one(r, c);
	}
	r->pumping = false;
}

static bool run_send_for(struct bridge_run *r, const char *server)
{
	struct bridge_call *c;

	if (r->pumping || !room(r))
		return false;
	for (c = r->waiting.head; c && strcmp(c->server, server) != 0; c = c->next)
		;
	if (!c || !gate_take(r->gate, server))
		return false;
	c->slot = true;
	r->pumping = true;
	list_del(&r->waiting, c);
	send_one(r, c);
	r->pumping = false;
	return true;
}

static void on_cell_call(void *data, json_int_t id, const char *tool, const json_t *args, bool read)
{
	if (read)
		bridge_run_read(data, id, tool, json_string_value(json_object_get(args, "uri")));
	else
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

static void audit_approval(struct bridge_run *r, struct bridge_call *c, const char *outcome,
			   uint64_t ms)
{
	json_t *o;

	metrics_count(METRICS_APPROVALS, outcome);
	trace_span_str(c->waiting, "appliance.approval.outcome", outcome);
	trace_span_end(c->waiting);
	c->waiting = NULL;
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
	metrics_count(METRICS_REFUSALS, "approval");
	snprintf(msg, sizeof(msg), "declined: %s: no approval: %s", c->label, why);
	appl_utf8_trim(msg);
	audit_refusal(r, c->id, c->tool, c->args, msg, c->read);
	say_no(r, c->id, CELL_ERR_DECLINED, msg);
	call_free(c);
}

/* The ledger's word on an approved call's key (bridge_ledger). */
static void on_claim(void *data, enum bridge_claim outcome, const json_t *result)
{
	static const char *const words[] = {"ours", "done", "unknown", "error"};
	struct bridge_call *c = data;
	struct bridge_run *r = c->run;

	metrics_count(METRICS_LEDGER_CLAIMS, words[outcome]);
	c->claiming = NULL;
	list_del(&r->asking, c);
	if (outcome == BRIDGE_CLAIM_OURS) {
		list_push(&r->waiting, c);
		pump(r);
		return;
	}
	if (outcome == BRIDGE_CLAIM_DONE) { /* its answer, as if it came now */
		log_line(LOG_INFO, r->log_id[0] ? r->log_id : NULL,
			 "%s: approved and made before (the ledger): its result again", c->label);
		list_push(&r->inflight, c);
		on_result(c, UPSTREAM_OK, result, NULL);
		return;
	}
	metrics_count(METRICS_REFUSALS, "approval");
	refuse(r, c->id, CELL_ERR_UNAVAILABLE,
	       outcome == BRIDGE_CLAIM_UNKNOWN
		       ? (struct say){"refused: ", ": approved and made before by a try of this "
						   "run whose answer was lost; not made again"}
		       : (struct say){"upstream_unavailable: ",
				      ": approved, but the ledger the "
				      "replicas share did not answer; not made"},
	       c->label, NULL);
	audit_refusal(r, c->id, c->tool, c->args,
		      outcome == BRIDGE_CLAIM_UNKNOWN ? "approved and made before; not made again"
						      : "the ledger did not answer; not made",
		      c->read);
	call_free(c);
}

static void on_approval(void *data, const char *outcome, const unsigned char *claim)
{
	struct bridge_call *c = data;
	struct bridge_run *r = c->run;
	bool program = strcmp(c->by, "program") == 0;
	const struct bridge_ledger *led = r->ap.ledger;
	char why[64];

	if (claim) { /* it lives in the ask, freed below */
		memcpy(c->claim, claim, sizeof(c->claim));
		c->keyed = true;
	}
	bridge_ask_free(c->ask);
	c->ask = NULL;
	if (strcmp(outcome, "approved") == 0) {
		audit_approval(r, c, outcome, loop_now_ms() - c->ask_ms);
		if (c->keyed && led) { /* one call for this yes over every replica */
			/* on the asking list while the ledger answers */
			if (!(c->claiming = led->claim(led->l, c->claim, on_claim, c)))
				on_claim(c, BRIDGE_CLAIM_ERROR, NULL);
			return;
		}
		list_del(&r->asking, c);
		list_push(&r->waiting, c);
		pump(r);
		return;
	}
	list_del(&r->asking, c);
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
	c->waiting =
		trace_span_start(r->tracer, trace_span_ctx(c->span), "approval", TRACE_INTERNAL);
	trace_span_str(c->waiting, "appliance.approval.by", c->by);
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

/* A refusal before the call is sent: the cell's answer and the log's line,
 * whose reason is logged (NULL: msg, which must then hold nothing of the
 * arguments), and the metrics' count by why (metrics.h's word). Past the
 * budget only the first refusal gets a line: a cell that goes on calling
 * must not fill the log's disk (run.end counts every call). */
static void call_refuse_as(struct bridge_run *r, json_int_t id, const char *tool,
			   const json_t *args, bool read, enum cell_error_kind kind,
			   const char *msg, const char *logged, const char *why)
{
	metrics_count(METRICS_REFUSALS, why);
	if (cell_calls(r->cell) <= (unsigned long)r->lim.max_calls + 1)
		audit_refusal(r, id, tool, args, logged ? logged : msg, read);
	say_no(r, id, kind, msg);
}

static void call_refuse(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args,
			bool read, enum cell_error_kind kind, const char *msg, const char *why)
{
	call_refuse_as(r, id, tool, args, read, kind, msg, NULL, why);
}

/* bridge_check's refusal, in the metrics' words. */
static const char *check_why(int rc)
{
	return rc == -EAGAIN	? "unavailable"
	       : rc == -EPERM	? "not_allowed"
	       : rc == -ENOTSUP ? "schema"
				: "arguments";
}

/* The checks every call and read pass after their own: the budget and the
 * waiting cap. false when refused (the refusal is sent). */
static bool run_admits(struct bridge_run *r, json_int_t id, const char *tool, const char *label,
		       const json_t *args, bool read)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];

	/* The cell counts every call line (the run's one counter); this one
	 * is among them. */
	if (cell_calls(r->cell) > r->lim.max_calls)
		snprintf(msg, sizeof(msg), "refused: %s: call budget exhausted (%u calls per run)",
			 label, r->lim.max_calls);
	else if (r->waiting.n >= APPL_BRIDGE_WAITING_MAX)
		snprintf(msg, sizeof(msg), "refused: %s: %u calls are already waiting", label,
			 APPL_BRIDGE_WAITING_MAX);
	else
		return true;
	appl_utf8_trim(msg);
	call_refuse(r, id, tool, args, read, CELL_ERR_REFUSED, msg,
		    cell_calls(r->cell) > r->lim.max_calls ? "budget" : "waiting");
	return false;
}

static struct bridge_call *call_new(struct bridge_run *r, json_int_t id, const char *tool,
				    const char *label, const json_t *args)
{
	struct bridge_call *c = calloc(1, sizeof(*c));

	if (!c || !(c->tool = strdup(tool)) || !(c->label = strdup(label)) ||
	    !(c->args = json_incref((json_t *)args))) {
		if (c) {
			free(c->tool);
			free(c->label);
		}
		free(c);
		return NULL;
	}
	c->run = r;
	c->id = id;
	return c;
}

/* c's span, below the run's: its method and what the policy calls the
 * tool, never what the code sent. */
static void call_span(struct bridge_run *r, struct bridge_call *c, const char *method)
{
	char name[TRACE_NAME_MAX];

	if (!r->tracer)
		return;
	if (c->read)
		snprintf(name, sizeof(name), "%s %s", method, c->server);
	else
		snprintf(name, sizeof(name), "%s %s.%s", method, c->server, metric_tool(r, c));
	c->span = trace_span_start(r->tracer, &r->parent, name, TRACE_CLIENT);
	trace_span_str(c->span, "mcp.method.name", method);
	trace_span_str(c->span, "appliance.server", c->server);
	if (!c->read)
		trace_span_str(c->span, "gen_ai.tool.name", metric_tool(r, c));
	trace_span_int(c->span, "appliance.call.id", (int64_t)c->id);
}

void bridge_run_call(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args)
{
	char msg[APPL_TOOL_ERROR_MAX + 1], logged[APPL_TOOL_ERROR_MAX + 1];
	const struct bridge_entry *entry;
	const char *server, *name, *label;
	struct bridge_call *c;
	int rc;

	rc = bridge_check(r->cat, tool, args, r->lim.max_args_bytes, &server, &name, msg,
			  sizeof(msg), logged, sizeof(logged));
	if (rc < 0) {
		call_refuse_as(r, id, tool, args, false,
			       rc == -EAGAIN ? CELL_ERR_UNAVAILABLE : CELL_ERR_REFUSED, msg, logged,
			       check_why(rc));
		return;
	}
	entry = bridge_catalog_find(r->cat, server, name);
	label = entry && entry->pyname ? entry->pyname : tool;
	if (!run_admits(r, id, tool, label, args, false))
		return;
	if (!(c = call_new(r, id, tool, label, args))) {
		snprintf(msg, sizeof(msg), "%s: host fault: MemoryError", label);
		call_refuse(r, id, tool, args, false, CELL_ERR_ERROR, msg, "host_fault");
		return;
	}
	c->server = server;
	c->name = name;
	call_span(r, c, "tools/call");
	if (entry && entry->approval) {
		approval_ask(r, c);
		return;
	}
	list_push(&r->waiting, c);
	pump(r);
}

/* A URI is passed on as it is: no control characters (they could forge a
 * line of a log or a header), valid UTF-8 (the runner line was). */
static bool uri_ok(const char *uri)
{
	size_t n = uri ? strlen(uri) : 0;

	if (n == 0 || n > APPL_RUNNER_URI_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)uri[i] < 0x20 || uri[i] == 0x7f)
			return false;
	return true;
}

void bridge_run_read(struct bridge_run *r, json_int_t id, const char *server, const char *uri)
{
	char msg[APPL_TOOL_ERROR_MAX + 1], label[APPL_RUNNER_TOOL_NAME_MAX + 32];
	const char *owned = bridge_catalog_reader(r->cat, server);
	const char *ns = bridge_catalog_ns(r->cat, server);
	json_t *args = json_pack("{s:s?}", "uri", uri);
	struct bridge_call *c;

	snprintf(label, sizeof(label), "%.*s.%s", APPL_RUNNER_TOOL_NAME_MAX, ns ? ns : server,
		 CELL_PROTO_READ_FN);
	appl_utf8_trim(label);
	if (!args) {
		snprintf(msg, sizeof(msg), "%s: host fault: MemoryError", label);
		call_refuse(r, id, server, NULL, true, CELL_ERR_ERROR, msg, "host_fault");
		return;
	}
	if (bridge_catalog_absent(r->cat, server)) {
		snprintf(msg, sizeof(msg), "%s%s%s", SAY_UNAVAILABLE.before, label,
			 SAY_UNAVAILABLE.after);
		call_refuse(r, id, server, args, true, CELL_ERR_UNAVAILABLE, msg, "unavailable");
	} else if (!owned) {
		snprintf(msg, sizeof(msg),
			 "refused: %s: the policy does not let this role read the resources of "
			 "this server",
			 label);
		call_refuse(r, id, server, args, true, CELL_ERR_REFUSED, msg, "not_allowed");
	} else if (!uri_ok(uri)) {
		snprintf(msg, sizeof(msg), "refused: %s: the URI holds a control character", label);
		call_refuse(r, id, server, args, true, CELL_ERR_REFUSED, msg, "arguments");
	} else if (run_admits(r, id, server, label, args, true)) {
		if (!(c = call_new(r, id, server, label, args))) {
			snprintf(msg, sizeof(msg), "%s: host fault: MemoryError", label);
			call_refuse(r, id, server, args, true, CELL_ERR_ERROR, msg, "host_fault");
		} else {
			c->server = owned;
			c->read = true;
			call_span(r, c, "resources/read");
			list_push(&r->waiting, c);
			pump(r);
		}
	}
	json_decref(args);
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

void bridge_run_trace(struct bridge_run *r, struct tracer *t, const struct trace_ctx *parent)
{
	r->tracer = parent ? t : NULL;
	if (parent)
		r->parent = *parent;
}

void bridge_run_gate(struct bridge_run *r, struct bridge_gate *g)
{
	r->gate = g;
	/* Out of memory: the run still takes free slots, only not its turn
	 * when one frees. */
	r->joined = g && gate_join(g, r, run_send_for) == 0;
}

void bridge_run_free(struct bridge_run *r)
{
	if (!r)
		return;
	cell_set_caller(r->cell, NULL, NULL);
	if (r->joined)
		gate_leave(r->gate, r);
	r->pumping = true; /* nothing more of this run goes out */
	while (r->inflight.head) {
		struct bridge_call *c = r->inflight.head;

		list_del(&r->inflight, c);
		if (c->sent)
			upstream_set_cancel(r->ups, c->server, c->up_id);
		audit_end(r, c, "abandoned", 0); /* the run ended first */
		slot_give(r, c);
		call_free(c);
	}
	while (r->waiting.head) {
		struct bridge_call *c = r->waiting.head;

		list_del(&r->waiting, c);
		audit_refusal(r, c->id, c->tool, c->args, "the run ended before the call could go",
			      c->read);
		call_free(c);
	}
	while (r->asking.head) {
		struct bridge_call *c = r->asking.head;

		list_del(&r->asking, c);
		if (c->claiming) /* approved: its line is written */
			r->ap.ledger->cancel(r->ap.ledger->l, c->claiming);
		else
			audit_approval(r, c, "cancelled", loop_now_ms() - c->ask_ms);
		bridge_ask_free(c->ask);
		call_free(c);
	}
	bridge_catalog_unref(r->cat);
	free(r);
}
