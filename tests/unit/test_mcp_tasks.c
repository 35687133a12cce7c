#define _GNU_SOURCE
/* test_mcp_tasks.c: MCP tasks in the session core (pkg/mcp/tasks.c,
 * taskreq.c): two clients on a transport that keeps what it is sent, the
 * owner a fake that hands runs back when the test says. What a task is,
 * whose it is, how long it is kept, and what a client that sends the wrong
 * thing hears. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "loop/loop.h"
#include "mcp/session.h"
#include "metrics/metrics.h"

#define MODERN_CAPS(ext)                                                                           \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
	"\"io.modelcontextprotocol/clientCapabilities\":{" ext "}}"
#define EXT "\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}"

static const struct mcp_principal alpha = {.client = "alpha", .role = "r"};
static const struct mcp_principal beta = {.client = "beta", .role = "r"};

/* One client connection: every line it was sent. */
struct conn {
	struct mcp_session *s;
	json_t *got; /* array of messages */
};

struct fx {
	struct loop *loop;
	struct mcp_server *srv;
	struct conn a, b;
	struct mcp_run *runs[8];
	int nruns;
	const char *cancelled_by[8];
	int ncancels;
	unsigned ttl_ms, per_client;
};

static int t_send(void *t, char *line, size_t len)
{
	struct conn *c = t;
	json_t *m = json_loadb(line, len, 0, NULL);

	assert_non_null(m);
	json_array_append_new(c->got, m);
	free(line);
	return 0;
}

static void t_close(void *t, const char *why)
{
	(void)t;
	(void)why;
}

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct fx *fx = data;
	(void)code;
	(void)len;

	assert_true(req->task);
	fx->runs[fx->nruns++] = run;
}

static void on_cancel(struct mcp_run *run, void *data)
{
	struct fx *fx = data;

	for (int i = 0; i < fx->nruns; i++)
		if (fx->runs[i] == run)
			fx->runs[i] = NULL;
	fx->cancelled_by[fx->ncancels++] = mcp_run_cancelled_by(run);
}

static void task_limits(struct mcp_task_limits *out, void *data)
{
	struct fx *fx = data;

	out->ttl_ms = fx->ttl_ms;
	out->min_ttl_ms = 0;
	out->per_client = fx->per_client;
}

static void conn_open(struct fx *fx, struct conn *c, const struct mcp_principal *p)
{
	struct mcp_transport t = {.send = t_send, .close = t_close, .t = c};
	struct appl_err err = {0};

	c->got = json_array();
	assert_non_null(c->s = mcp_session_new(fx->srv, &t, p, &err));
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct mcp_server_hooks h = {
		.on_run = on_run, .on_cancel = on_cancel, .task_limits = task_limits, .data = fx};
	struct appl_err err = {0};

	fx->loop = loop_new(&err);
	fx->ttl_ms = 60000;
	fx->per_client = 2;
	assert_non_null(fx->srv = mcp_server_new(fx->loop, &h, &err));
	conn_open(fx, &fx->a, &alpha);
	conn_open(fx, &fx->b, &beta);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	mcp_session_free(fx->a.s);
	mcp_session_free(fx->b.s);
	mcp_server_tasks_end(fx->srv);
	mcp_server_free(fx->srv);
	json_decref(fx->a.got);
	json_decref(fx->b.got);
	loop_free(fx->loop);
	free(fx);
	return 0;
}

/* Send line to c; the answer to id (a copy; NULL when none came). */
static json_t *ask(struct conn *c, int id, const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	size_t i;
	json_t *m;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	mcp_session_input(c->s, line, strlen(line));
	json_array_foreach(c->got, i, m) {
		if (json_integer_value(json_object_get(m, "id")) == id &&
		    !json_object_get(m, "method"))
			return json_incref(m);
	}
	return NULL;
}

static void legacy_init(struct conn *c)
{
	json_decref(ask(c, 1,
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
			"{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}"));
}

/* A legacy task of run_python by c: its id (new). */
static char *legacy_task(struct conn *c, int id)
{
	json_t *r = ask(c, id,
			"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{"
			"\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1)\"},"
			"\"task\":{\"ttl\":1000000}}}",
			id);
	const json_t *task = json_object_get(json_object_get(r, "result"), "task");
	char *tid;

	assert_non_null(task);
	assert_string_equal(json_string_value(json_object_get(task, "status")), "working");
	tid = strdup(json_string_value(json_object_get(task, "taskId")));
	json_decref(r);
	return tid;
}

static const char *err_msg(const json_t *r)
{
	return json_string_value(json_object_get(json_object_get(r, "error"), "message"));
}

static json_int_t err_code(const json_t *r)
{
	return json_integer_value(json_object_get(json_object_get(r, "error"), "code"));
}

static json_t *get(struct conn *c, int id, const char *tid)
{
	return ask(c, id,
		   "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tasks/get\",\"params\":{"
		   "\"taskId\":\"%s\"}}",
		   id, tid);
}

/* The value of the unlabelled gauge name on the metrics page. */
static long long gauge(const char *name)
{
	struct appl_err err = {0};
	char *text = NULL, want[96], *at;
	size_t len;
	long long v;

	assert_int_equal(metrics_render(&text, &len, &err), 0);
	snprintf(want, sizeof(want), "\n%s ", name);
	at = strstr(text, want);
	assert_non_null(at);
	v = strtoll(at + strlen(want), NULL, 10);
	free(text);
	return v;
}

static void finish(struct mcp_run *run, const char *out)
{
	json_t *o = json_pack("{s:s}", "stdout", out);

	mcp_run_finish(run, o, false, NULL);
	json_decref(o);
}

/* A task is its client's: the other client's get, result, cancel and list
 * see nothing, as for an id never made; its own see the task and its
 * result, which carries the related-task _meta; the ttl asked for is
 * capped by the limit. */
static void test_a_task_is_its_clients(void **state)
{
	struct fx *fx = *state;
	char *tid;
	json_t *r;

	legacy_init(&fx->a);
	legacy_init(&fx->b);
	tid = legacy_task(&fx->a, 2);
	assert_int_equal(fx->nruns, 1);
	r = get(&fx->a, 3, tid);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "result"), "status")),
		"working");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "result"), "ttl")),
			 60000);
	json_decref(r);
	/* beta: not found, every way */
	r = get(&fx->b, 3, tid);
	assert_int_equal(err_code(r), -32602);
	assert_string_equal(err_msg(r), "Task not found");
	json_decref(r);
	r = ask(&fx->b, 4,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/cancel\",\"params\":{"
		"\"taskId\":\"%s\"}}",
		tid);
	assert_string_equal(err_msg(r), "Task not found");
	json_decref(r);
	r = ask(&fx->b, 5,
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/result\",\"params\":{"
		"\"taskId\":\"%s\"}}",
		tid);
	assert_string_equal(err_msg(r), "Task not found");
	json_decref(r);
	r = ask(&fx->b, 6, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/list\"}");
	assert_int_equal(json_array_size(json_object_get(json_object_get(r, "result"), "tasks")),
			 0);
	json_decref(r);
	assert_int_equal(fx->ncancels, 0);
	/* alpha waits for the result, which comes when the run ends */
	assert_null(ask(&fx->a, 7,
			"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/result\","
			"\"params\":{\"taskId\":\"%s\"}}",
			tid));
	finish(fx->runs[0], "done\n");
	r = ask(&fx->a, 7, "{}");
	assert_non_null(r);
	assert_string_equal(
		json_string_value(json_object_get(
			json_object_get(json_object_get(json_object_get(r, "result"), "_meta"),
					"io.modelcontextprotocol/related-task"),
			"taskId")),
		tid);
	json_decref(r);
	r = get(&fx->a, 8, tid);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "result"), "status")),
		"completed");
	json_decref(r);
	/* ended: it cannot be cancelled */
	r = ask(&fx->a, 9,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/cancel\",\"params\":{"
		"\"taskId\":\"%s\"}}",
		tid);
	assert_int_equal(err_code(r), -32602);
	json_decref(r);
	free(tid);
}

/* A client holds at most per_client tasks: the oldest ended one gives way
 * (its id then says it was dropped), and while all of them work a new one
 * is refused. */
static void test_the_count_limit_drops_the_oldest_ended(void **state)
{
	struct fx *fx = *state;
	char *t1, *t2, *t3;
	json_t *r;

	legacy_init(&fx->a);
	t1 = legacy_task(&fx->a, 2);
	t2 = legacy_task(&fx->a, 3);
	finish(fx->runs[0], "one\n");
	assert_int_equal(gauge("appliance_tasks"), 2);
	assert_true(gauge("appliance_task_result_bytes") > 0);
	t3 = legacy_task(&fx->a, 4); /* t1 ended: it goes, and its result */
	assert_int_equal(gauge("appliance_tasks"), 2);
	assert_int_equal(gauge("appliance_task_result_bytes"), 0);
	r = get(&fx->a, 5, t1);
	assert_int_equal(err_code(r), -32602);
	assert_non_null(strstr(err_msg(r), "Task dropped"));
	json_decref(r);
	r = ask(&fx->a, 6,
		"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{"
		"\"name\":\"run_python\",\"arguments\":{\"code\":\"1\"},\"task\":{}}}");
	assert_non_null(strstr(err_msg(r), "too many tasks"));
	json_decref(r);
	assert_int_equal(fx->nruns, 3);
	free(t1);
	free(t2);
	free(t3);
}

/* Past its ttl a task is gone, its id saying so; one still working is
 * cancelled, by "ttl". */
static void test_a_task_past_its_ttl_is_gone(void **state)
{
	struct fx *fx = *state;
	char *done, *working;
	json_t *r;
	uint64_t t0;

	fx->ttl_ms = 150;
	legacy_init(&fx->a);
	done = legacy_task(&fx->a, 2);
	working = legacy_task(&fx->a, 3);
	finish(fx->runs[0], "x\n");
	t0 = loop_now_ms();
	while (fx->ncancels == 0 && loop_now_ms() - t0 < 5000)
		loop_run_once(fx->loop, 50);
	assert_int_equal(fx->ncancels, 1);
	assert_string_equal(fx->cancelled_by[0], "ttl");
	r = get(&fx->a, 4, done);
	assert_non_null(strstr(err_msg(r), "Task expired"));
	json_decref(r);
	r = get(&fx->a, 5, working);
	assert_non_null(strstr(err_msg(r), "Task expired"));
	json_decref(r);
	free(done);
	free(working);
}

/* What a client sends wrong is refused with what to do; the modern
 * methods need the extension, and a cancel there is acknowledged. */
static void test_wrong_requests_and_the_modern_methods(void **state)
{
	struct fx *fx = *state;
	const char *tid;
	json_t *r, *made;

	legacy_init(&fx->a);
	r = ask(&fx->a, 2,
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
		"\"name\":\"run_python\",\"arguments\":{\"code\":\"1\"},\"task\":5}}");
	assert_int_equal(err_code(r), -32602);
	json_decref(r);
	r = ask(&fx->a, 3,
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/list\",\"params\":{"
		"\"cursor\":\"x\"}}");
	assert_string_equal(err_msg(r), "invalid cursor");
	json_decref(r);
	r = ask(&fx->a, 4,
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":{"
		"\"taskId\":7}}");
	assert_int_equal(err_code(r), -32602);
	json_decref(r);
	assert_int_equal(fx->nruns, 0);
	/* 2026-07-28: without the extension a call is answered plainly (a
	 * run, no task), and tasks/get is -32021 */
	r = ask(&fx->b, 5,
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/get\",\"params\":{"
		"\"taskId\":\"x\"," MODERN_CAPS("") "}}");
	assert_int_equal(err_code(r), -32021);
	json_decref(r);
	made = ask(&fx->b, 6,
		   "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{"
		   "\"name\":\"run_python\",\"arguments\":{\"code\":\"1\"}," MODERN_CAPS(EXT) "}}");
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(made, "result"), "resultType")),
		"task");
	tid = json_string_value(json_object_get(json_object_get(made, "result"), "taskId"));
	r = ask(&fx->b, 7,
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/cancel\",\"params\":{"
		"\"taskId\":\"%s\"," MODERN_CAPS(EXT) "}}",
		tid);
	assert_non_null(json_object_get(r, "result"));
	json_decref(r);
	assert_int_equal(fx->ncancels, 1);
	assert_string_equal(fx->cancelled_by[0], "beta");
	r = ask(&fx->b, 8,
		"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tasks/get\",\"params\":{"
		"\"taskId\":\"%s\"," MODERN_CAPS(EXT) "}}",
		tid);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(r, "result"), "status")),
		"cancelled");
	json_decref(r);
	/* the extension has no tasks/result */
	r = ask(&fx->b, 9,
		"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/result\",\"params\":{"
		"\"taskId\":\"%s\"," MODERN_CAPS(EXT) "}}",
		tid);
	assert_int_equal(err_code(r), -32601);
	json_decref(r);
	json_decref(made);
}

/* At most 8 tasks/result wait for one task; those of a session that ended
 * make room. */
static void test_waiting_results_are_bounded(void **state)
{
	struct fx *fx = *state;
	char *tid;
	json_t *r;

	legacy_init(&fx->a);
	tid = legacy_task(&fx->a, 2);
	for (int id = 10; id < 18; id++)
		assert_null(ask(&fx->a, id,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tasks/result\","
				"\"params\":{\"taskId\":\"%s\"}}",
				id, tid));
	r = ask(&fx->a, 18,
		"{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"tasks/result\","
		"\"params\":{\"taskId\":\"%s\"}}",
		tid);
	assert_non_null(strstr(err_msg(r), "too many tasks/result"));
	json_decref(r);
	/* those of a session that ended make room */
	{
		struct conn c;

		conn_open(fx, &c, &alpha);
		legacy_init(&c);
		mcp_session_free(fx->a.s);
		fx->a.s = NULL;
		r = ask(&c, 19,
			"{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"tasks/result\","
			"\"params\":{\"taskId\":\"%s\"}}",
			tid);
		assert_null(r); /* waits */
		finish(fx->runs[0], "done\n");
		r = ask(&c, 19, "{}");
		assert_non_null(json_object_get(r, "result"));
		json_decref(r);
		mcp_session_free(c.s);
		json_decref(c.got);
	}
	free(tid);
}

/* A request reusing the id of a tasks/result that waits is refused, and
 * the waiting one keeps its answer. */
static void test_a_waiting_result_keeps_its_id(void **state)
{
	struct fx *fx = *state;
	char *tid;
	json_t *r;
	size_t i;
	int answered = 0;

	legacy_init(&fx->a);
	tid = legacy_task(&fx->a, 2);
	for (int id = 10; id < 12; id++)
		assert_null(ask(&fx->a, id,
				"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tasks/result\","
				"\"params\":{\"taskId\":\"%s\"}}",
				id, tid));
	/* id 10 waits: a ping under it is refused without its id */
	assert_null(ask(&fx->a, 10, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"ping\"}"));
	finish(fx->runs[0], "done\n");
	json_array_foreach(fx->a.got, i, r) {
		json_int_t id = json_integer_value(json_object_get(r, "id"));

		if (id >= 10 && id < 12 && json_object_get(r, "result"))
			answered++;
	}
	assert_int_equal(answered, 2);
	free(tid);
}

/* A server that offers no tasks (no task_limits hook), and a revision
 * before 2025-11-25: the tasks methods are not found. */
static void test_no_tasks_where_none_are_offered(void **state)
{
	struct fx *fx = *state;
	struct mcp_server_hooks h = {.on_run = on_run, .on_cancel = on_cancel, .data = fx};
	struct mcp_transport t = {.send = t_send, .close = t_close};
	struct appl_err err = {0};
	struct mcp_server *plain = mcp_server_new(fx->loop, &h, &err);
	struct conn c = {.got = json_array()};
	json_t *r;

	assert_non_null(plain);
	t.t = &c;
	assert_non_null(c.s = mcp_session_new(plain, &t, &alpha, &err));
	legacy_init(&c);
	r = ask(&c, 2, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tasks/list\"}");
	assert_int_equal(err_code(r), -32601);
	json_decref(r);
	mcp_session_free(c.s);
	mcp_server_free(plain);
	json_decref(c.got);
	json_decref(ask(&fx->a, 1,
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
			"\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}"));
	r = ask(&fx->a, 3,
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/get\","
		"\"params\":{\"taskId\":\"x\"}}");
	assert_int_equal(err_code(r), -32601);
	json_decref(r);
}

/* A client whose token left the policy: its tasks are cancelled and gone. */
static void test_a_clients_tasks_end_with_it(void **state)
{
	struct fx *fx = *state;
	char *tid;
	json_t *r;

	legacy_init(&fx->a);
	tid = legacy_task(&fx->a, 2);
	assert_int_equal(mcp_server_client_tasks_end(fx->srv, "beta", "reload"), 0);
	assert_int_equal(mcp_server_client_tasks_end(fx->srv, "alpha", "reload"), 1);
	assert_int_equal(fx->ncancels, 1);
	assert_string_equal(fx->cancelled_by[0], "reload");
	r = get(&fx->a, 3, tid);
	assert_string_equal(err_msg(r), "Task not found");
	json_decref(r);
	free(tid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_task_is_its_clients, setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_count_limit_drops_the_oldest_ended, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_task_past_its_ttl_is_gone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_requests_and_the_modern_methods, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_clients_tasks_end_with_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_tasks_where_none_are_offered, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_waiting_results_are_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_waiting_result_keeps_its_id, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
