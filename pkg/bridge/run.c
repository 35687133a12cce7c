/* run.c: one run's tool calls: the budget, the in-flight cap and its FIFO,
 * the upstream's answer (see bridge.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/utf8.h"
#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "cell/cell.h"
#include "log/log.h"
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
	bool sent;
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
	int rc;

	list_del(&r->inflight, c);
	switch (status) {
	case UPSTREAM_OK:
		rc = bridge_result_value(result, r->lim.max_result_bytes, &value, msg, sizeof(msg));
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
	call_free(c);
	pump(r);
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

void bridge_run_call(struct bridge_run *r, json_int_t id, const char *tool, const json_t *args)
{
	char msg[APPL_TOOL_ERROR_MAX + 1];
	const char *server, *name;
	struct bridge_call *c;

	r->calls++;
	if (bridge_check(r->cat, tool, args, r->lim.max_args_bytes, &server, &name, msg,
			 sizeof(msg)) < 0) {
		say_no(r, id, msg);
		return;
	}
	if (r->calls > r->lim.max_calls) {
		snprintf(msg, sizeof(msg), "refused: %s: call budget exhausted (%u calls per run)",
			 tool, r->lim.max_calls);
		say_no(r, id, msg);
		return;
	}
	if (r->waiting.n >= APPL_BRIDGE_WAITING_MAX) {
		snprintf(msg, sizeof(msg), "refused: %s: %u calls are already waiting", tool,
			 APPL_BRIDGE_WAITING_MAX);
		say_no(r, id, msg);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c || !(c->tool = strdup(tool)) || !(c->args = json_incref((json_t *)args))) {
		if (c)
			free(c->tool);
		free(c);
		snprintf(msg, sizeof(msg), "%s: host fault: MemoryError", tool);
		say_no(r, id, msg);
		return;
	}
	c->run = r;
	c->id = id;
	c->server = server;
	c->name = name;
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
		call_free(c);
	}
	while (r->waiting.head) {
		struct bridge_call *c = r->waiting.head;

		list_del(&r->waiting, c);
		call_free(c);
	}
	bridge_catalog_unref(r->cat);
	free(r);
}
