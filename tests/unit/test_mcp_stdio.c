/* test_mcp_stdio.c: an MCP session over its stdio transport, a pipe pair,
 * with a fake owner: lines in and out, a run handed off and answered, a
 * line over the cap, the end of input. The rules of the session itself
 * are test_session.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "base/limits.h"
#include "mcp/stdio.h"
#include "cell/cell.h"

/* The owner's answer, as the run renders it: the outcome's result object. */
static void finish_outcome(struct mcp_run *run, const struct cell_outcome *o)
{
	json_t *obj = cell_outcome_json(o);

	mcp_run_finish(run, obj, cell_outcome_is_error(o), o->files);
	json_decref(obj);
}

struct fake {
	struct mcp_server *srv;
	struct mcp_stdio *st;
	struct mcp_run *run;
	char code[256];
	int cancels, closes;
};

struct env {
	struct loop *loop;
	struct fake f;
	int to_srv, from_srv;
	char buf[65536];
	size_t have;
};

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct fake *f = data;
	(void)req;
	f->run = run;
	snprintf(f->code, sizeof(f->code), "%.*s", (int)len, code);
}

static void on_cancel(struct mcp_run *run, void *data)
{
	struct fake *f = data;
	if (run == f->run)
		f->run = NULL;
	f->cancels++;
}

static void on_closed(struct mcp_session *s, const char *why, uint64_t bind, void *data)
{
	(void)s;
	(void)why;
	(void)bind;
	((struct fake *)data)->closes++;
}

static const char *description(const char *role, void *data)
{
	(void)role;
	(void)data;
	return "a test description";
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct appl_err err = {0};
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .description = description,
					 .on_closed = on_closed,
					 .output_schema = cell_outcome_schema()};
	static const struct mcp_principal p = {.client = "stdio", .role = "r"};
	int in[2], out[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	e->loop = loop_new(&err);
	hooks.data = &e->f;
	e->f.srv = mcp_server_new(e->loop, &hooks, &err);
	assert_non_null(e->f.srv);
	struct mcp_stdio_config sc = {.in_fd = in[0], .out_fd = out[1], .principal = &p};
	e->f.st = mcp_stdio_open(e->f.srv, e->loop, &sc, &err);
	assert_non_null(e->f.st);
	e->to_srv = in[1];
	e->from_srv = out[0];
	fcntl(e->from_srv, F_SETFL, O_NONBLOCK);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	mcp_stdio_free(e->f.st, 100);
	mcp_server_free(e->f.srv);
	loop_free(e->loop);
	close(e->to_srv);
	close(e->from_srv);
	free(e);
	return 0;
}

static void send_line(struct env *e, const char *line)
{
	size_t n = strlen(line);
	assert_int_equal(write(e->to_srv, line, n), (ssize_t)n);
	assert_int_equal(write(e->to_srv, "\n", 1), 1);
}

/* Run the loop until one answer line arrives; return it parsed. */
static json_t *answer(struct env *e)
{
	for (int i = 0; i < 200; i++) {
		char *nl = memchr(e->buf, '\n', e->have);
		if (nl) {
			json_t *v = json_loadb(e->buf, (size_t)(nl - e->buf), 0, NULL);
			size_t used = (size_t)(nl - e->buf) + 1;
			memmove(e->buf, nl + 1, e->have - used);
			e->have -= used;
			assert_non_null(v);
			return v;
		}
		loop_run_once(e->loop, 10);
		ssize_t n = read(e->from_srv, e->buf + e->have, sizeof(e->buf) - e->have);
		if (n > 0)
			e->have += (size_t)n;
	}
	fail_msg("no answer");
	return NULL;
}

static void init(struct env *e)
{
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
		     "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}");
	json_t *v = answer(e);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(v, "result"), "protocolVersion")),
		"2025-06-18");
	assert_true(json_integer_value(json_object_get(v, "id")) == 0);
	json_decref(v);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

static void test_run_is_handed_off_and_answered(void **state)
{
	struct env *e = *state;
	init(e);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1)\"}}}");
	for (int i = 0; i < 100 && !e->f.run; i++)
		loop_run_once(e->loop, 10);
	assert_non_null(e->f.run);
	assert_string_equal(e->f.code, "print(1)");
	struct cell_outcome o = {.out = "1\n", .out_len = 2, .calls = 1};
	finish_outcome(e->f.run, &o);
	e->f.run = NULL;
	json_t *v = answer(e);
	json_t *r = json_object_get(v, "result");
	assert_string_equal(json_string_value(json_object_get(v, "id")), "r");
	assert_string_equal(json_string_value(json_object_get(
				    json_object_get(r, "structuredContent"), "stdout")),
			    "1\n");
	assert_true(json_is_false(json_object_get(r, "isError")));
	json_decref(v);
}

static void send_big(struct env *e, const char *prefix, size_t total)
{
	static char chunk[65536];
	size_t sent = 0, plen = strlen(prefix);

	memset(chunk, 'x', sizeof(chunk));
	fcntl(e->to_srv, F_SETFL, O_NONBLOCK);
	while (sent < plen) {
		ssize_t n = write(e->to_srv, prefix + sent, plen - sent);
		if (n > 0)
			sent += (size_t)n;
		loop_run_once(e->loop, 0);
	}
	while (sent < total) {
		size_t want = total - sent < sizeof(chunk) ? total - sent : sizeof(chunk);
		ssize_t n = write(e->to_srv, chunk, want);
		if (n > 0)
			sent += (size_t)n;
		loop_run_once(e->loop, 0);
	}
	while (write(e->to_srv, "\n", 1) != 1)
		loop_run_once(e->loop, 0);
	fcntl(e->to_srv, F_SETFL, 0);
}

/* A line over the cap is dropped as it comes, never held; it is answered
 * with an error carrying its id when its start had one (else null), and
 * the session goes on: the run in flight still gets its answer. */
static void test_overlong_line_gets_its_error(void **state)
{
	struct env *e = *state;
	json_t *v;
	init(e);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1)\"}}}");
	for (int i = 0; i < 100 && !e->f.run; i++)
		loop_run_once(e->loop, 10);
	assert_non_null(e->f.run);
	send_big(e,
		 "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{\"name\":"
		 "\"run_python\",\"arguments\":{\"code\":\"",
		 APPL_RPC_MESSAGE_MAX + 1024 * 1024);
	v = answer(e);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 77);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "error"), "code")),
			 -32600);
	assert_non_null(
		strstr(json_string_value(json_object_get(json_object_get(v, "error"), "message")),
		       "longer than the cap"));
	json_decref(v);
	/* no id before the cap: id null */
	send_big(e, "{\"jsonrpc\":\"2.0\",\"params\":{\"pad\":\"", APPL_RPC_MESSAGE_MAX + 10);
	v = answer(e);
	assert_true(json_is_null(json_object_get(v, "id")));
	json_decref(v);
	assert_int_equal(e->f.closes, 0);
	/* the run in flight is answered, and the session serves on */
	finish_outcome(e->f.run, &(struct cell_outcome){.out = "1\n", .out_len = 2});
	e->f.run = NULL;
	v = answer(e);
	assert_string_equal(json_string_value(json_object_get(v, "id")), "r");
	json_decref(v);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"ping\"}");
	v = answer(e);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 78);
	json_decref(v);
}

static void test_end_of_input_is_reported(void **state)
{
	struct env *e = *state;
	close(e->to_srv);
	e->to_srv = open("/dev/null", O_WRONLY | O_CLOEXEC);
	for (int i = 0; i < 100 && !e->f.closes; i++)
		loop_run_once(e->loop, 10);
	assert_int_equal(e->f.closes, 1);
}

/* A start that failed before any session: the first request, past
 * notifications and a notification longer than any head, gets the reason;
 * nothing after it is read. The end of input, and a terminal, get nothing. */
static void test_a_failed_start_answers_the_first_request(void **state)
{
	static const char why[] = "the appliance could not start: expired";
	char big[6000], got[512];
	int in[2], out[2];
	ssize_t n;
	(void)state;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	memset(big, 'x', sizeof(big));
	memcpy(big, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":\"", 54);
	big[sizeof(big) - 1] = '\n';
	assert_int_equal(write(in[1],
			       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
			       55),
			 55);
	assert_int_equal(write(in[1], big, sizeof(big)), (ssize_t)sizeof(big));
	assert_int_equal(write(in[1],
			       "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\"}\n"
			       "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n",
			       88),
			 88);
	assert_int_equal(mcp_stdio_refuse_first(in[0], out[1], why, 5000), 0);
	n = read(out[0], got, sizeof(got) - 1);
	assert_true(n > 0);
	got[n] = '\0';
	assert_string_equal(got,
			    "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32603,\"message\":"
			    "\"the appliance could not start: expired\"}}\n");
	close(in[0]);
	close(in[1]);
	/* the end of input before any request: nothing to answer */
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(write(in[1],
			       "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
			       55),
			 55);
	close(in[1]);
	assert_int_equal(mcp_stdio_refuse_first(in[0], out[1], why, 5000), -EPIPE);
	close(in[0]);
	close(out[1]);
	assert_int_equal(read(out[0], got, sizeof(got)), 0);
	close(out[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_is_handed_off_and_answered, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_overlong_line_gets_its_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_end_of_input_is_reported, setup, teardown),
		cmocka_unit_test(test_a_failed_start_answers_the_first_request),
	};
	/* main's duty in the appliance: the library relies on it. */
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
