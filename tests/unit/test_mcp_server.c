/* test_mcp_server.c: the downstream MCP server over a pipe pair, with a
 * fake owner: lifecycle, errors, run_python hand-off, cancellation. */
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

#include "base/limits.h"
#include "mcp/server.h"

struct fake {
	struct mcp_server *srv;
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

static void on_run(struct mcp_server *s, struct mcp_run *run, const char *code, size_t len,
		   void *data)
{
	struct fake *f = data;
	(void)s;
	f->run = run;
	snprintf(f->code, sizeof(f->code), "%.*s", (int)len, code);
}

static void on_cancel(struct mcp_server *s, struct mcp_run *run, void *data)
{
	struct fake *f = data;
	(void)s;
	if (run == f->run)
		f->run = NULL;
	f->cancels++;
}

static void on_closed(struct mcp_server *s, const char *why, void *data)
{
	(void)s;
	(void)why;
	((struct fake *)data)->closes++;
}

static const char *description(void *data)
{
	(void)data;
	return "a test description";
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct appl_err err = {0};
	struct mcp_server_hooks hooks = {on_run, on_cancel, on_closed, description, NULL};
	int in[2], out[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	e->loop = loop_new(&err);
	hooks.data = &e->f;
	e->f.srv = mcp_server_new(e->loop, in[0], out[1], &hooks, &err);
	assert_non_null(e->f.srv);
	e->to_srv = in[1];
	e->from_srv = out[0];
	fcntl(e->from_srv, F_SETFL, O_NONBLOCK);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	mcp_server_free(e->f.srv, 100);
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

static json_int_t error_code(json_t *v)
{
	json_int_t c = json_integer_value(json_object_get(json_object_get(v, "error"), "code"));
	json_decref(v);
	return c;
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

static void test_tools_need_initialize(void **state)
{
	struct env *e = *state;
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	assert_int_equal(error_code(answer(e)), -32600);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	json_t *v = answer(e);
	assert_true(json_is_object(json_object_get(v, "result")));
	json_decref(v);
}

static void test_unknown_version_gets_the_latest(void **state)
{
	struct env *e = *state;
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":"
		     "{\"protocolVersion\":\"1999-01-01\"}}");
	json_t *v = answer(e);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(v, "result"), "protocolVersion")),
		"2025-11-25");
	json_decref(v);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
	assert_int_equal(error_code(answer(e)), -32602);
}

static void test_errors_and_serving_goes_on(void **state)
{
	struct env *e = *state;
	init(e);
	send_line(e, "{not json");
	assert_int_equal(error_code(answer(e)), -32700);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/nope\"}");
	assert_int_equal(error_code(answer(e)), -32601);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"exec\",\"arguments\":{}}}");
	assert_int_equal(error_code(answer(e)), -32602);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"run_python\",\"arguments\":{\"code\":1}}}");
	json_t *v = answer(e);
	assert_true(json_is_true(json_object_get(json_object_get(v, "result"), "isError")));
	json_decref(v);
	assert_null(e->f.run);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\"}");
	v = answer(e);
	json_t *tool = json_array_get(json_object_get(json_object_get(v, "result"), "tools"), 0);
	assert_string_equal(json_string_value(json_object_get(tool, "name")), "run_python");
	assert_string_equal(json_string_value(json_object_get(tool, "description")),
			    "a test description");
	json_decref(v);
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
	json_t *res = json_pack("{s:s,s:n,s:b}", "stdout", "1\n", "error", "stopped", 0);
	mcp_run_finish(e->f.srv, e->f.run, res, false);
	e->f.run = NULL;
	json_t *v = answer(e);
	json_t *r = json_object_get(v, "result");
	assert_string_equal(json_string_value(json_object_get(v, "id")), "r");
	assert_true(json_equal(json_object_get(r, "structuredContent"), res));
	assert_true(json_is_false(json_object_get(r, "isError")));
	json_decref(res);
	json_decref(v);
}

static void test_cancel_drops_the_answer(void **state)
{
	struct env *e = *state;
	init(e);
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":"
		     "{\"name\":\"run_python\",\"arguments\":{\"code\":\"x\"}}}");
	for (int i = 0; i < 100 && !e->f.run; i++)
		loop_run_once(e->loop, 10);
	assert_non_null(e->f.run);
	/* a cancel for another id changes nothing; for this one, the owner hears */
	send_line(e, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		     "{\"requestId\":\"9\"}}");
	send_line(e, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		     "{\"requestId\":9}}");
	send_line(e, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}");
	json_t *v = answer(e);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 10);
	json_decref(v);
	assert_int_equal(e->f.cancels, 1);
	assert_null(e->f.run);
}

/* Write prefix, then x's up to total bytes, then a newline, running the
 * loop while the pipe is full (the server must read as it comes). */
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
	json_t *v, *res;
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
	res = json_pack("{s:s}", "stdout", "1\n");
	mcp_run_finish(e->f.srv, e->f.run, res, false);
	e->f.run = NULL;
	json_decref(res);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tools_need_initialize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_version_gets_the_latest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_errors_and_serving_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_is_handed_off_and_answered, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_drops_the_answer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_overlong_line_gets_its_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_end_of_input_is_reported, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
