/* test_run.c: one run from admission to answer (pkg/run/run.h): the
 * admission timeout, cancelling in each state, the one call counter,
 * progress and questions reaching the client, a stop that still answers.
 *
 * The cell is a fake defined here (the linker then leaves pkg/cell/cell.c
 * out): the run only hands it its code and hears back from it, and the
 * test plays the sandbox's part. Waits are for events on a real loop
 * (timers, deferred tasks), never for a time.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "bridge/bridge.h"
#include "cell/cell.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "run/run.h"
#include "schema/schema.h"

/* ---- the fake cell ---------------------------------------------------------- */

struct cell {
	struct cell_hooks hooks;
	struct cell_outcome outcome;
	bool given, ended, cancelled, freed;
	unsigned long calls;  /* the one counter */
	uint64_t deadline_ms; /* what cell_run was given */
	char out[64];
	size_t out_len;
	const json_t *files; /* the files its outcome hands back */
	const json_t *value; /* the final value it hands back */
	const char *error;   /* the traceback it hands back */
	bool value_cut;
	json_t *args; /* what cell_set_args gave it */
};

int cell_set_args(struct cell *c, const json_t *args)
{
	json_decref(c->args);
	c->args = json_deep_copy(args);
	return json_is_object(args) ? 0 : -EINVAL;
}

int cell_run(struct cell *c, const char *code, size_t len, const json_t *tools,
	     const struct cell_limits *lim, const struct cell_hooks *hooks, uint64_t arrival_ms,
	     struct appl_err *err)
{
	(void)code;
	(void)len;
	(void)tools;
	(void)arrival_ms;
	(void)err;
	c->given = true;
	c->deadline_ms = lim->deadline_ms;
	c->hooks = *hooks;
	return 0;
}

static void cell_end(struct cell *c, enum cell_reason reason)
{
	c->ended = true;
	c->outcome = (struct cell_outcome){.out = c->out,
					   .out_len = c->out_len,
					   .reason = reason,
					   .calls = c->calls,
					   .files = c->files,
					   .value = c->value,
					   .error = c->error,
					   .value_cut = c->value_cut};
	c->hooks.on_done(c, c->hooks.data);
}

void cell_cancel(struct cell *c)
{
	c->cancelled = true;
	if (!c->ended)
		cell_end(c, CELL_CANCELLED);
}

void cell_free(struct cell *c)
{
	if (c)
		c->freed = true;
}

const struct cell_outcome *cell_outcome(const struct cell *c)
{
	return c->ended ? &c->outcome : NULL;
}

const char *cell_sandbox_id(const struct cell *c)
{
	(void)c;
	return "fake";
}

unsigned long cell_calls(const struct cell *c)
{
	return c->calls;
}

const char *cell_output(const struct cell *c, size_t *len)
{
	*len = c->out_len;
	return c->out;
}

/* What pkg/bridge's run.c links against; no bridge run is made here. */
void cell_set_caller(struct cell *c, cell_call_fn fn, void *data)
{
	(void)c;
	(void)fn;
	(void)data;
}

void cell_call_answer(struct cell *c, json_int_t id, const json_t *value)
{
	(void)c;
	(void)id;
	(void)value;
}

void cell_call_refuse(struct cell *c, json_int_t id, enum cell_error_kind kind, const char *msg)
{
	(void)c;
	(void)id;
	(void)kind;
	(void)msg;
}

/* ---- the client and the owner ------------------------------------------------ */

#define CELLS_MAX 8

struct fx {
	struct loop *loop;
	struct run_set *set;
	struct cell_limits lim;
	struct cell cells[CELLS_MAX];
	size_t ncells;
	bool fail_start;
	unsigned reaped;
	unsigned cells_ended; /* the owner heard how a cell ended */
	enum cell_reason ended_reason;
	/* the client */
	unsigned answers, progress;
	bool is_error;
	json_t *result;
	json_t *files; /* as the answer gave them */
	char text[256];
	struct run_question asked;
	bool withdrawn;
};

static void c_progress(void *c)
{
	((struct fx *)c)->progress++;
}

static void *c_ask(void *c, const struct run_question *q, char *why, size_t cap)
{
	struct fx *fx = c;
	(void)why;
	(void)cap;

	fx->asked = *q;
	return fx;
}

static void c_withdraw(void *c, void *handle)
{
	assert_ptr_equal(c, handle);
	((struct fx *)c)->withdrawn = true;
}

static void c_answer(void *c, const json_t *result, bool is_error, const char *text,
		     const json_t *files)
{
	struct fx *fx = c;

	fx->answers++;
	fx->is_error = is_error;
	json_decref(fx->result);
	fx->result = result ? json_deep_copy(result) : NULL;
	json_decref(fx->files);
	fx->files = files ? json_deep_copy(files) : NULL;
	snprintf(fx->text, sizeof(fx->text), "%s", text ? text : "");
}

static int start(struct run *r, void *data, struct appl_err *err)
{
	struct fx *fx = data;

	if (fx->fail_start)
		return appl_err_set(err, -EIO, "no sandbox today");
	assert_true(fx->ncells < CELLS_MAX);
	return run_begin(r, &fx->cells[fx->ncells++], NULL, err);
}

static void reaped(void *data, unsigned n)
{
	((struct fx *)data)->reaped += n;
}

static void cell_ended(void *data, enum cell_reason reason)
{
	struct fx *fx = data;

	fx->cells_ended++;
	fx->ended_reason = reason;
}

static struct fx *fx_new(unsigned cells, uint64_t deadline_ms)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct appl_err err = {0};
	struct run_set_config cfg = {.cell = &fx->lim,
				     .cells = cells,
				     .approval_timeout_ms = 7000,
				     .start = start,
				     .reaped = reaped,
				     .cell_ended = cell_ended,
				     .data = fx};

	fx->lim.deadline_ms = deadline_ms;
	fx->loop = loop_new(&err);
	assert_non_null(fx->loop);
	cfg.loop = fx->loop;
	fx->set = run_set_new(&cfg, &err);
	assert_non_null(fx->set);
	return fx;
}

static void fx_free(struct fx *fx)
{
	run_set_free(fx->set);
	loop_free(fx->loop);
	for (size_t i = 0; i < CELLS_MAX; i++)
		json_decref(fx->cells[i].args);
	json_decref(fx->result);
	json_decref(fx->files);
	free(fx);
}

static struct run *run_within(struct fx *fx, const char *code, uint64_t deadline_ms)
{
	struct run_client c = {.name = "client-a",
			       .role = "reader",
			       .revision = "2025-11-25",
			       .progress = c_progress,
			       .ask = c_ask,
			       .withdraw = c_withdraw,
			       .answer = c_answer,
			       .c = fx,
			       .deadline_ms = deadline_ms};
	struct appl_err err = {0};
	struct run *r = run_new(fx->set, code, strlen(code), &c, NULL, NULL, &err);

	assert_non_null(r);
	return r;
}

static struct run *run_of(struct fx *fx, const char *code)
{
	return run_within(fx, code, 0);
}

/* Loop rounds until n answers have come (each round ends with its
 * deferred tasks: the reap). A run that never answers fails the test at
 * the bound, which counts rounds, not time. */
static void until_answers(struct fx *fx, unsigned n)
{
	for (int i = 0; i < 10000 && fx->answers < n; i++)
		assert_true(loop_run_once(fx->loop, 1000) >= 0);
	assert_int_equal(fx->answers, n);
}

/* One round with nothing pending: what ended is answered and freed. */
static void one_round(struct fx *fx)
{
	assert_true(loop_run_once(fx->loop, 0) >= 0);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_a_run_that_ends_is_answered_with_its_result(void **state)
{
	struct fx *fx = fx_new(2, 60000);
	struct run *r = run_of(fx, "print(1)");
	(void)state;

	assert_false(run_waiting(r));
	assert_true(fx->cells[0].given);
	memcpy(fx->cells[0].out, "1\n", 2);
	fx->cells[0].out_len = 2;
	cell_end(&fx->cells[0], CELL_RAN);
	assert_int_equal(fx->answers, 0); /* never from inside the cell's hook */
	/* the owner hears how the cell ended (the pool: whether it booted) */
	assert_int_equal(fx->cells_ended, 1);
	assert_int_equal(fx->ended_reason, CELL_RAN);
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_false(fx->is_error);
	assert_non_null(fx->result);
	assert_string_equal(json_string_value(json_object_get(fx->result, "stdout")), "1\n");
	assert_true(fx->cells[0].freed);
	assert_int_equal(fx->reaped, 1);
	assert_int_equal(run_set_count(fx->set), 0);
	fx_free(fx);
}

/* The files the code left reach the client with their content; the
 * result object lists them without it. */
static void test_the_files_reach_the_client(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	json_t *files =
		json_pack("[{s:s,s:i,s:s,s:s,s:s},{s:s,s:s}]", "name", "a.txt", "bytes", 2, "type",
			  "text/plain", "sha256",
			  "0000000000000000000000000000000000000000000000000000000000000000",
			  "text", "hi", "name", "d", "reason", "directory");
	const json_t *listed;
	(void)state;

	run_of(fx, "open('/out/a.txt', 'w').write('hi')");
	fx->cells[0].files = files;
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_true(json_equal(fx->files, files));
	listed = json_object_get(fx->result, "files");
	assert_int_equal(json_array_size(listed), 2);
	assert_null(json_object_get(json_array_get(listed, 0), "text"));
	assert_true(json_is_true(json_object_get(json_array_get(listed, 0), "returned")));
	assert_string_equal(json_string_value(json_object_get(json_array_get(listed, 1), "reason")),
			    "directory");
	json_decref(files);
	fx_free(fx);
}

/* A run that finds no slot waits with its deadline running; past it, it
 * ends without a cell, and its place in line is given up. */
static void test_a_waiting_run_ends_at_its_deadline(void **state)
{
	struct fx *fx = fx_new(1, 30);
	struct run *first = run_of(fx, "first");
	struct run *second;
	(void)state;

	second = run_of(fx, "second");
	assert_false(run_waiting(first));
	assert_true(run_waiting(second));
	assert_int_equal(run_set_waiting(fx->set, "client-a"), 1);
	until_answers(fx, 1);
	assert_true(fx->is_error);
	assert_null(fx->result);
	assert_string_equal(fx->text, "the run waited for a free slot until its deadline passed");
	assert_int_equal(run_set_waiting(fx->set, NULL), 0);
	assert_int_equal(fx->ncells, 1); /* it was never given a cell */
	fx_free(fx);
}

/* A client may ask for a shorter deadline than every run's, never a
 * longer one: the cell gets the shorter of the two, and a run that waits
 * for a slot gives up at it. */
static void test_a_client_may_only_shorten_the_deadline(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *waiting;
	(void)state;

	run_within(fx, "short", 2000);
	assert_int_equal(fx->cells[0].deadline_ms, 2000);
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	run_within(fx, "long", 90000);
	assert_int_equal(fx->cells[1].deadline_ms, 60000);
	waiting = run_within(fx, "waits", 20);
	assert_true(run_waiting(waiting));
	until_answers(fx, 2);
	assert_string_equal(fx->text, "the run waited for a free slot until its deadline passed");
	cell_end(&fx->cells[1], CELL_RAN);
	until_answers(fx, 3);
	fx_free(fx);
}

/* A slot that frees goes to the run waiting: the second starts when the
 * first has been answered. */
static void test_a_freed_slot_starts_the_next_run(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *second;
	(void)state;

	run_of(fx, "first");
	second = run_of(fx, "second");
	assert_true(run_waiting(second));
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_false(run_waiting(second));
	assert_true(fx->cells[1].given);
	fx_free(fx);
}

static void test_cancel_while_waiting(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *second;
	(void)state;

	run_of(fx, "first");
	second = run_of(fx, "second");
	run_cancel(second);
	assert_int_equal(run_set_waiting(fx->set, NULL), 0);
	one_round(fx);
	assert_int_equal(fx->answers, 0); /* a cancelled request gets no answer */
	assert_int_equal(run_set_count(fx->set), 1);
	assert_int_equal(fx->ncells, 1);
	fx_free(fx);
}

static void test_cancel_while_running(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "running");
	(void)state;

	run_cancel(r);
	assert_true(fx->cells[0].cancelled);
	one_round(fx);
	assert_int_equal(fx->answers, 0);
	assert_true(fx->cells[0].freed);
	assert_int_equal(run_set_count(fx->set), 0);
	fx_free(fx);
}

/* Ended but not yet answered (the answer goes out at the round's end): a
 * cancel then still means no answer. */
static void test_cancel_after_it_ended(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "ended");
	(void)state;

	cell_end(&fx->cells[0], CELL_RAN);
	run_cancel(r);
	assert_false(fx->cells[0].cancelled);
	one_round(fx);
	assert_int_equal(fx->answers, 0);
	assert_int_equal(run_set_count(fx->set), 0);
	fx_free(fx);
}

/* Every call line counts once, in the cell; the run's count, its
 * progress and its result all read that one counter. */
static void test_one_call_counter(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "calls");
	(void)state;

	assert_int_equal(run_calls(r), 0);
	fx->cells[0].calls = 3;
	assert_int_equal(run_calls(r), 3);
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	assert_int_equal(json_integer_value(json_object_get(fx->result, "calls")), 3);
	fx_free(fx);
}

static void test_progress_reaches_the_client_until_it_cancels(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "progress");
	struct cell *c = &fx->cells[0];
	size_t len;
	(void)state;

	memcpy(c->out, "abc", 3);
	c->out_len = 3;
	c->hooks.on_progress(c, c->hooks.data);
	assert_int_equal(fx->progress, 1);
	assert_memory_equal(run_output(r, &len), "abc", 3);
	assert_int_equal(len, 3);
	run_cancel(r);
	c->hooks.on_progress(c, c->hooks.data);
	assert_int_equal(fx->progress, 1);
	one_round(fx);
	fx_free(fx);
}

/* The bridge's questions reach the client through the run, labelled with
 * its id and the approval timeout; once cancelled, nobody is asked. */
static void test_questions_reach_the_client_through_the_run(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "asks");
	struct bridge_asker k = run_asker(r);
	unsigned char bind[32] = {1};
	char why[64] = "";
	void *h;
	(void)state;

	assert_non_null(k.ask);
	h = k.ask(k.a, "may it write?", bind, NULL, NULL, why, sizeof(why));
	assert_ptr_equal(h, fx);
	assert_string_equal(fx->asked.text, "may it write?");
	assert_string_equal(fx->asked.label, run_id(r));
	assert_int_equal(strlen(run_id(r)), RUN_ID_LEN);
	assert_int_equal(fx->asked.timeout_ms, 7000);
	k.cancel(k.a, h);
	assert_true(fx->withdrawn);
	run_cancel(r);
	assert_null(k.ask(k.a, "again?", bind, NULL, NULL, why, sizeof(why)));
	assert_string_equal(why, "the client has gone");
	one_round(fx);
	fx_free(fx);
}

static void metrics_want(const char *line)
{
	struct appl_err err = {0};
	char *text, want[256];
	size_t len;

	assert_int_equal(metrics_render(&text, &len, &err), 0);
	snprintf(want, sizeof(want), "\n%s\n", line);
	if (!strstr(text, want))
		fail_msg("no %s in:\n%s", line, text);
	free(text);
}

/* Every end is counted once, in the metrics' words: a run that ran by its
 * cell's reason, one that did not by why. */
static void test_every_end_is_counted(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r;
	(void)state;

	metrics_reset();
	run_of(fx, "ok");
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	r = run_of(fx, "interrupted");
	run_interrupt(r, "the run was stopped: test got signal 15");
	one_round(fx);
	run_of(fx, "past its deadline");
	r = run_of(fx, "cancelled while waiting");
	run_cancel(r);
	fx->fail_start = true;
	run_of(fx, "no sandbox");
	cell_end(&fx->cells[2], CELL_DEADLINE);
	one_round(fx);
	fx->fail_start = false;
	run_of(fx, "holds the slot");
	run_within(fx, "waits past its deadline", 20);
	until_answers(fx, 5);
	metrics_want("appliance_cells_total{outcome=\"ok\",reason=\"none\"} 1");
	metrics_want("appliance_cells_total{outcome=\"stopped\",reason=\"signal\"} 1");
	metrics_want("appliance_cells_total{outcome=\"stopped\",reason=\"deadline\"} 1");
	metrics_want("appliance_cells_total{outcome=\"not_run\",reason=\"cancelled\"} 1");
	metrics_want("appliance_cells_total{outcome=\"not_run\",reason=\"boot\"} 1");
	metrics_want("appliance_cells_total{outcome=\"not_run\",reason=\"waited\"} 1");
	metrics_want("appliance_cell_duration_seconds_count 3");
	fx_free(fx);
	metrics_reset();
}

/* The appliance's own stop still answers, saying why. */
static void test_interrupt_answers_with_the_reason(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run *r = run_of(fx, "stop");
	(void)state;

	run_interrupt(r, "the run was stopped: test got signal 15");
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_true(fx->is_error);
	assert_string_equal(json_string_value(json_object_get(fx->result, "reason")), "signal");
	assert_string_equal(json_string_value(json_object_get(fx->result, "error")),
			    "the run was stopped: test got signal 15");
	fx_free(fx);
}

static void test_a_start_that_fails_answers_why(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	(void)state;

	fx->fail_start = true;
	run_of(fx, "no sandbox");
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_true(fx->is_error);
	assert_string_equal(fx->text, "the run could not start: the sandbox failed to boot");
	fx_free(fx);
}

static void test_a_refused_request_is_answered(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	struct run_client c = {.name = "client-a", .answer = c_answer, .c = fx};
	(void)state;

	run_set_refuse(fx->set, &c, "too many runs are waiting");
	assert_int_equal(fx->answers, 1);
	assert_string_equal(fx->text, "too many runs are waiting");
	fx_free(fx);
}

/* The appliance stops: every cell is stopped, and the runs still listed
 * are freed without an answer. */
static void test_stop_frees_without_answers(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	(void)state;

	run_of(fx, "one");
	run_of(fx, "two");
	run_set_stop(fx->set);
	assert_true(fx->cells[0].cancelled);
	run_set_free(fx->set);
	fx->set = NULL;
	assert_int_equal(fx->answers, 0);
	assert_true(fx->cells[0].freed);
	fx_free(fx);
}

/* ---- a code tool's run -------------------------------------------------------- */

/* A code tool with an output schema {"total": integer}, its program code. */
struct tool_fx {
	struct policy_code_tool t;
	struct schema *out;
	json_t *schema;
};

static void tool_fx_init(struct tool_fx *tf)
{
	struct appl_err err = {0};

	memset(tf, 0, sizeof(*tf));
	tf->schema = json_pack("{s:s,s:{s:{s:s}},s:[s]}", "type", "object", "properties", "total",
			       "type", "integer", "required", "total");
	assert_int_equal(schema_new(tf->schema, &tf->out, &err), 0);
	tf->t.name = "weekly";
	tf->t.output_schema = tf->schema;
	tf->t.output = tf->out;
	tf->t.code = "{'total': args['a']}";
	tf->t.code_len = strlen(tf->t.code);
}

static void tool_fx_clear(struct tool_fx *tf)
{
	schema_free(tf->out);
	json_decref(tf->schema);
}

static void tool_run(struct fx *fx, struct tool_fx *tf, const json_t *args)
{
	struct run_client c = {.name = "client-a",
			       .role = "reader",
			       .answer = c_answer,
			       .c = fx,
			       .tool = &tf->t,
			       .args = args};
	struct appl_err err = {0};

	assert_non_null(run_new(fx->set, tf->t.code, tf->t.code_len, &c, NULL, NULL, &err));
}

/* The program's value is the answer when it matches the output schema;
 * the arguments reached the cell. */
static void test_a_code_tool_answers_its_value(void **state)
{
	struct fx *fx = fx_new(1, 60000);
	json_t *args = json_pack("{s:i}", "a", 7), *value = json_pack("{s:i}", "total", 7);
	struct tool_fx tf;
	(void)state;

	tool_fx_init(&tf);
	tool_run(fx, &tf, args);
	json_decref(args); /* the run holds its own reference */
	assert_non_null(fx->cells[0].args);
	assert_int_equal(json_integer_value(json_object_get(fx->cells[0].args, "a")), 7);
	fx->cells[0].value = value;
	cell_end(&fx->cells[0], CELL_RAN);
	one_round(fx);
	assert_int_equal(fx->answers, 1);
	assert_false(fx->is_error);
	assert_true(json_equal(fx->result, value));
	json_decref(value);
	tool_fx_clear(&tf);
	fx_free(fx);
}

/* A value that does not match, one over the cap, and a program that
 * raised: a failure naming why, never the value. */
static void test_a_code_tool_failure_is_named(void **state)
{
	static const struct {
		const char *value, *error;
		bool cut;
		const char *want;
	} cases[] = {
		{"{\"total\": \"seven\"}", NULL, false,
		 "weekly: the program's value does not match its output_schema: /total: expected "
		 "integer, got string"},
		{"[1]", NULL, false,
		 "weekly: the program's value does not match its output_schema:"},
		{"null", NULL, false,
		 "weekly: the program's value does not match its output_schema:"},
		{"\"(result omitted)\"", NULL, true,
		 "weekly: the program's value is larger than the cap"},
		{NULL,
		 "Traceback (most recent call last):\n  File \"<cell>\", line 1\nValueError: no "
		 "week\n",
		 false, "weekly: the program raised: ValueError: no week"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fx *fx = fx_new(1, 60000);
		json_t *v =
			cases[i].value ? json_loads(cases[i].value, JSON_DECODE_ANY, NULL) : NULL;
		struct tool_fx tf;

		tool_fx_init(&tf);
		tool_run(fx, &tf, NULL);
		fx->cells[0].value = v;
		fx->cells[0].error = cases[i].error;
		fx->cells[0].value_cut = cases[i].cut;
		cell_end(&fx->cells[0], CELL_RAN);
		one_round(fx);
		assert_int_equal(fx->answers, 1);
		assert_true(fx->is_error);
		assert_null(fx->result);
		if (strncmp(fx->text, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: %s", i, fx->text);
		json_decref(v);
		tool_fx_clear(&tf);
		fx_free(fx);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_run_that_ends_is_answered_with_its_result),
		cmocka_unit_test(test_the_files_reach_the_client),
		cmocka_unit_test(test_a_waiting_run_ends_at_its_deadline),
		cmocka_unit_test(test_a_client_may_only_shorten_the_deadline),
		cmocka_unit_test(test_a_freed_slot_starts_the_next_run),
		cmocka_unit_test(test_cancel_while_waiting),
		cmocka_unit_test(test_cancel_while_running),
		cmocka_unit_test(test_cancel_after_it_ended),
		cmocka_unit_test(test_one_call_counter),
		cmocka_unit_test(test_progress_reaches_the_client_until_it_cancels),
		cmocka_unit_test(test_questions_reach_the_client_through_the_run),
		cmocka_unit_test(test_interrupt_answers_with_the_reason),
		cmocka_unit_test(test_every_end_is_counted),
		cmocka_unit_test(test_a_start_that_fails_answers_why),
		cmocka_unit_test(test_a_refused_request_is_answered),
		cmocka_unit_test(test_stop_frees_without_answers),
		cmocka_unit_test(test_a_code_tool_answers_its_value),
		cmocka_unit_test(test_a_code_tool_failure_is_named),
	};

	/* main's duty in the appliance (run ids are random). */
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
