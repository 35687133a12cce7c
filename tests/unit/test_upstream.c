/* test_upstream.c: the upstream MCP client against build/toy-server and a
 * scripted fake server (this program, run again as `--fake-server MODE`):
 * handshake and paging, calls, concurrency, timeouts and cancellation, late
 * answers, errors, refused answers, death and restart, failed handshakes,
 * list refresh, server-to-client requests, the environment, the stderr
 * relay and its escaping, output schemas and tasks, resource reads (and
 * their 2026-07-28 HTTP headers, against a libmicrohttpd server in a
 * thread). Run from the top of the tree (make unit). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "log/log.h"
#include "loop/loop.h"
#include "upstream/upstream.h"
#include "upstream/set.h"

static char self_exe[PATH_MAX];
static char toy_path[PATH_MAX];

/* ---- the fake server ---------------------------------------------------------- */

extern char **environ;

static void fake_send(json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	fputs(s, stdout);
	fputc('\n', stdout);
	fflush(stdout);
	free(s);
	json_decref(msg);
}

static void fake_result(json_t *id, json_t *result)
{
	fake_send(json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result));
}

static json_t *fake_tool(const char *name, const char *desc)
{
	return json_pack("{s:s, s:s, s:{s:s}}", "name", name, "description", desc, "inputSchema",
			 "type", "object");
}

/* What the server was started with: its environment and working directory. */
static json_t *fake_env_tool(void)
{
	char buf[8192], cwd[PATH_MAX];
	size_t n = 0;

	buf[0] = '\0';
	for (char **e = environ; *e; e++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\n", *e);
	snprintf(buf + n, sizeof(buf) - n, "cwd=%s", getcwd(cwd, sizeof(cwd)) ? cwd : "?");
	return fake_tool("env", buf);
}

static void fake_initialize(const char *mode, json_t *id)
{
	json_t *caps = json_pack("{s:{}}", "tools");

	if (strcmp(mode, "silent") == 0) {
		json_decref(caps);
		return;
	}
	/* "resources": the server declares resources; "resstring": a
	 * capabilities.resources that is not an object */
	if (strcmp(mode, "resources") == 0)
		json_object_set_new(caps, "resources", json_object());
	else if (strcmp(mode, "resstring") == 0)
		json_object_set_new(caps, "resources", json_string("yes"));
	else if (strcmp(mode, "tasks") == 0)
		json_object_set_new(caps, "tasks",
				    json_pack("{s:{s:{s:{}}}}", "requests", "tools", "call"));
	fake_result(id,
		    json_pack("{s:s, s:o, s:{s:s, s:s}}", "protocolVersion",
			      strcmp(mode, "version") == 0 ? "1999-01-01"
			      : strcmp(mode, "tasks") == 0 ? "2025-11-25"
							   : "2025-06-18",
			      "capabilities", caps, "serverInfo", "name", "fake", "version", "1"));
}

/* One tools/list page for mode; page counts from 0. */
static json_t *fake_page(const char *mode, int page)
{
	json_t *tools = json_array(), *r;
	char name[32], next[32];

	snprintf(next, sizeof(next), "c%d", page + 1);
	if (strcmp(mode, "env") == 0) {
		json_array_append_new(tools, fake_env_tool());
	} else if (strcmp(mode, "dup") == 0) {
		json_array_append_new(tools, fake_tool("a", "one"));
		json_array_append_new(tools, fake_tool("a", "two"));
	} else if (strcmp(mode, "schemas") == 0) {
		/* an output schema and a task-only tool; an output schema that is
		 * not an object; a null one; a task that is only optional */
		json_array_append_new(
			tools, json_pack("{s:s, s:{s:s}, s:{s:s, s:{s:{s:s}}}, s:{s:s}}", "name",
					 "typed", "inputSchema", "type", "object", "outputSchema",
					 "type", "object", "properties", "n", "type", "integer",
					 "execution", "taskSupport", "required"));
		json_array_append_new(tools, json_pack("{s:s, s:{}, s:s, s:{s:s}}", "name", "loose",
						       "inputSchema", "outputSchema", "object",
						       "execution", "taskSupport", "optional"));
		json_array_append_new(tools, json_pack("{s:s, s:{}, s:n, s:{s:b}}", "name",
						       "nulled", "inputSchema", "outputSchema",
						       "execution", "taskSupport", 1));
		json_array_append_new(tools, fake_tool("plain", "a tool"));
	} else if (strcmp(mode, "tasks") == 0) {
		/* t runs only as a task; report and plain are plain tools */
		json_array_append_new(tools,
				      json_pack("{s:s, s:{}, s:{s:s}}", "name", "t", "inputSchema",
						"execution", "taskSupport", "required"));
		json_array_append_new(tools, fake_tool("report", "what the server saw"));
		json_array_append_new(tools, fake_tool("plain", "a tool"));
		/* opt may run as a task: the fake makes one when asked */
		json_array_append_new(tools, json_pack("{s:s, s:{}, s:{s:s}}", "name", "opt",
						       "inputSchema", "execution", "taskSupport",
						       "optional"));
	} else if (strcmp(mode, "skip") == 0) {
		json_array_append_new(tools, json_pack("{s:s}", "description", "no name"));
		json_array_append_new(tools, json_pack("{s:s}", "name", "no_schema"));
		json_array_append_new(tools, fake_tool("bad\x01name", "control"));
		json_array_append_new(tools, json_pack("{s:s, s:i, s:{}}", "name", "baddesc",
						       "description", 3, "inputSchema"));
		json_array_append_new(tools, json_string("not an object"));
		json_array_append_new(tools,
				      json_pack("{s:s, s:{}, s:{s:b}}", "name", "good",
						"inputSchema", "annotations", "readOnlyHint", 1));
	} else {
		int each = strcmp(mode, "toomany") == 0 ? 300 : 1;

		for (int i = 0; i < each; i++) {
			snprintf(name, sizeof(name), "t%d_%d", page, i);
			json_array_append_new(tools, fake_tool(name, "a tool"));
		}
	}
	r = json_pack("{s:o}", "tools", tools);
	if (strcmp(mode, "cursor") == 0)
		json_object_set_new(r, "nextCursor", json_string("same"));
	else if (strcmp(mode, "pages") == 0 || (strcmp(mode, "toomany") == 0 && page < 3))
		json_object_set_new(r, "nextCursor", json_string(next));
	return r;
}

/* Requests a server may send its client; only ping is answered with a
 * result. Then a line that is not JSON and a notification. */
static void fake_requests(void)
{
	fake_send(json_pack("{s:s, s:s, s:s}", "jsonrpc", "2.0", "id", "s1", "method", "ping"));
	fake_send(
		json_pack("{s:s, s:s, s:s}", "jsonrpc", "2.0", "id", "s2", "method", "roots/list"));
	fake_send(json_pack("{s:s, s:i, s:s, s:{}}", "jsonrpc", "2.0", "id", 3, "method",
			    "sampling/createMessage", "params"));
	fputs("this is not json\n", stdout);
	fake_send(json_pack("{s:s, s:s, s:{s:s, s:s}}", "jsonrpc", "2.0", "method",
			    "notifications/message", "params", "level", "info", "data", "hi"));
}

static void fake_error(json_t *id)
{
	char msg[4096] = "bad\001thing ";
	size_t n = strlen(msg);

	while (n + 2 < sizeof(msg) - 1) {
		memcpy(msg + n, "\xc3\xa9", 2); /* e acute: cutting must not split it */
		n += 2;
	}
	msg[n] = '\0';
	fake_send(json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code",
			    -32000, "message", msg));
}

struct fake {
	const char *mode;
	int page;
	json_t *held;	 /* a call left unanswered */
	json_t *answers; /* what the client answered our requests */
	/* mode "tasks": each task made (by the argument "mode" of its call:
	 * ok, forever, cancelled, badid), the tasks/get it had, and every
	 * tasks method's params */
	json_t *tasks;
	json_t *seen;
};

static void fake_call(struct fake *f, json_t *id, json_t *params)
{
	const char *tool = json_string_value(json_object_get(params, "name"));
	const char *arg =
		json_string_value(json_object_get(json_object_get(params, "arguments"), "mode"));

	if (strcmp(f->mode, "error") == 0) {
		fake_error(id);
	} else if (strcmp(tool, "report") == 0) {
		fake_result(id, json_pack("{s:[], s:{s:O, s:O}}", "content", "structuredContent",
					  "answers", f->answers, "seen", f->seen));
	} else if ((strcmp(tool, "t") == 0 || strcmp(tool, "opt") == 0) &&
		   json_object_get(params, "task")) {
		/* a task: "badid" names it with a control character */
		char tid[32];

		snprintf(tid, sizeof(tid), "%s-%zu", arg, json_object_size(f->tasks));
		json_object_set_new(f->tasks, tid, json_pack("{s:s, s:i}", "mode", arg, "gets", 0));
		if (strcmp(arg, "badid") == 0)
			tid[0] = '\x01';
		fake_result(id, json_pack("{s:{s:s, s:s, s:i}}", "task", "taskId", tid, "status",
					  "working", "pollInterval", 10));
	} else if (arg && strcmp(arg, "tail") == 0) {
		/* 200 KiB of result, and the id only at the end of the line */
		char *id_text = json_dumps(id, JSON_ENCODE_ANY);
		fputs("{\"jsonrpc\":\"2.0\",\"result\":{\"content\":[{\"type\":\"text\","
		      "\"text\":\"",
		      stdout);
		for (int i = 0; i < 200 * 1024; i++)
			fputc('t', stdout);
		printf("\"}]},\"id\":%s}\n", id_text);
		fflush(stdout);
		free(id_text);
	} else if (arg && strcmp(arg, "split") == 0) {
		/* an answer past the cap, its id first; its end waits for a
		 * call "finish" (or "die": the server exits inside it) */
		char *id_text = json_dumps(id, JSON_ENCODE_ANY);
		printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":"
		       "\"text\",\"text\":\"",
		       id_text);
		for (int i = 0; i < 200 * 1024; i++)
			fputc('s', stdout);
		fflush(stdout);
		free(id_text);
	} else if (arg && strcmp(arg, "finish") == 0) {
		fputs("\"}]}}\n", stdout);
		fake_result(id, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
					  "finished"));
	} else if (arg && strcmp(arg, "die") == 0) {
		exit(0);
	} else if (arg && strcmp(arg, "hold") == 0) {
		json_decref(f->held);
		f->held = json_incref(id);
	} else {
		fake_result(id, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
					  arg ? arg : "done"));
	}
}

/* resources/read: the uri given back with a text; "test://hold" is left
 * unanswered, "test://big" is over the default result cap. */
static void fake_read(struct fake *f, json_t *id, json_t *params)
{
	const char *uri = json_string_value(json_object_get(params, "uri"));
	char *big;

	if (!uri) {
		fake_error(id);
	} else if (strcmp(uri, "test://hold") == 0) {
		json_decref(f->held);
		f->held = json_incref(id);
	} else if (strcmp(uri, "test://big") == 0) {
		big = malloc(200 * 1024 + 1);
		memset(big, 'b', 200 * 1024);
		big[200 * 1024] = '\0';
		fake_result(id, json_pack("{s:[{s:s, s:s}]}", "contents", "uri", uri, "text", big));
		free(big);
	} else {
		fake_result(id, json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri,
					  "mimeType", "text/plain", "text", "the text"));
	}
}

/* A cancelled call is answered anyway (late), and so are ids nobody asked. */
static void fake_cancelled(struct fake *f)
{
	if (!f->held)
		return;
	fake_result(f->held,
		    json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "late"));
	fake_send(json_pack("{s:s, s:i, s:{s:[]}}", "jsonrpc", "2.0", "id", 999999, "result",
			    "content"));
	fake_send(json_pack("{s:s, s:s, s:{s:[]}}", "jsonrpc", "2.0", "id", "1", "result",
			    "content"));
	fake_send(json_pack("{s:s, s:n, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", "error", "code",
			    -32700, "message", "parse error"));
	json_decref(f->held);
	f->held = NULL;
}

/* tasks/get, tasks/result and tasks/cancel of mode "tasks": a task "ok"
 * works for two polls, "forever" never ends, "cancelled" says so. */
static void fake_task(struct fake *f, json_t *id, const char *method, json_t *params)
{
	const char *tid = json_string_value(json_object_get(params, "taskId"));
	json_t *t = tid ? json_object_get(f->tasks, tid) : NULL;
	const char *mode = json_string_value(json_object_get(t, "mode"));
	json_int_t gets = json_integer_value(json_object_get(t, "gets"));

	json_array_append_new(f->seen, json_pack("{s:s, s:O}", "method", method, "params", params));
	if (!t) {
		fake_error(id);
	} else if (strcmp(method, "tasks/get") == 0) {
		json_object_set_new(t, "gets", json_integer(gets + 1));
		fake_result(id, json_pack("{s:s, s:s, s:i}", "taskId", tid, "status",
					  strcmp(mode, "cancelled") == 0	 ? "cancelled"
					  : strcmp(mode, "ok") == 0 && gets >= 2 ? "completed"
										 : "working",
					  "pollInterval", 10));
	} else if (strcmp(method, "tasks/result") == 0) {
		fake_result(id, json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text",
					  "task done"));
	} else {
		fake_result(id, json_pack("{s:s, s:s}", "taskId", tid, "status", "cancelled"));
	}
}

static void fake_line(struct fake *f, json_t *m)
{
	const char *method = json_string_value(json_object_get(m, "method"));
	json_t *id = json_object_get(m, "id");

	if (!method)
		json_array_append(f->answers, m);
	else if (strcmp(method, "initialize") == 0)
		fake_initialize(f->mode, id);
	else if (strcmp(method, "notifications/initialized") == 0 &&
		 strcmp(f->mode, "requests") == 0)
		fake_requests();
	else if (strcmp(method, "tools/list") == 0)
		fake_result(id, fake_page(f->mode, f->page++));
	else if (strcmp(method, "tools/call") == 0)
		fake_call(f, id, json_object_get(m, "params"));
	else if (strcmp(method, "resources/read") == 0)
		fake_read(f, id, json_object_get(m, "params"));
	else if (strcmp(method, "notifications/cancelled") == 0)
		fake_cancelled(f);
	else if (strncmp(method, "tasks/", 6) == 0)
		fake_task(f, id, method, json_object_get(m, "params"));
}

static int fake_main(const char *mode)
{
	struct fake f = {.mode = mode,
			 .answers = json_array(),
			 .tasks = json_object(),
			 .seen = json_array()};
	char *line = NULL;
	size_t cap = 0;

	if (strcmp(mode, "stderr") == 0) {
		fputs("plain line\n", stderr);
		fputs("esc \x1b[31m red \x01 \\ \xff\xfe \xc3\xa9 \xc2\x9b\r\n", stderr);
		for (int i = 0; i < 3000; i++)
			fputc('x', stderr);
		fputs("\nno newline at the end", stderr);
		fflush(stderr);
	}
	while (getline(&line, &cap, stdin) > 0) {
		json_t *m = json_loads(line, 0, NULL);

		if (m)
			fake_line(&f, m);
		json_decref(m);
	}
	free(line);
	json_decref(f.held);
	json_decref(f.answers);
	json_decref(f.tasks);
	json_decref(f.seen);
	return 0;
}

/* ---- helpers ------------------------------------------------------------------ */

struct srvbuf {
	const char *argv[8];
	const char *env[8];
	struct policy_server srv;
};

static const struct policy_server *srv_make(struct srvbuf *b, const char *name,
					    const char *const *argv, const char *const *env,
					    const char *cwd)
{
	memset(b, 0, sizeof(*b));
	for (size_t i = 0; argv[i]; i++)
		b->argv[b->srv.argc++] = argv[i];
	for (size_t i = 0; env && env[i]; i++)
		b->env[b->srv.nenv++] = env[i];
	b->srv.name = name;
	b->srv.kind = POLICY_SERVER_STDIO;
	b->srv.argv = b->argv;
	b->srv.env = b->env;
	b->srv.cwd = cwd;
	return &b->srv;
}

static const struct policy_server *toy(struct srvbuf *b, const char *opt, const char *val)
{
	const char *argv[] = {toy_path, opt, val, NULL};

	return srv_make(b, "toy", argv, NULL, NULL);
}

static const struct policy_server *fake(struct srvbuf *b, const char *mode)
{
	const char *argv[] = {self_exe, "--fake-server", mode, NULL};

	return srv_make(b, "fake", argv, NULL, NULL);
}

struct hookrec {
	int ready, changed, down;
	char why[APPL_ERR_MSG_MAX];
};

static void h_ready(struct upstream *u, void *data)
{
	(void)u;
	((struct hookrec *)data)->ready++;
}

static void h_changed(struct upstream *u, void *data)
{
	(void)u;
	((struct hookrec *)data)->changed++;
}

static void h_down(struct upstream *u, const char *why, void *data)
{
	struct hookrec *h = data;

	(void)u;
	h->down++;
	snprintf(h->why, sizeof(h->why), "%s", why);
}

struct cap {
	int done, status, seq;
	json_t *result;
	char reason[APPL_ERR_MSG_MAX];
};

static int g_seq;

static void cap_cb(void *ctx, int status, const json_t *result, const char *reason)
{
	struct cap *c = ctx;

	c->done++;
	c->status = status;
	c->seq = ++g_seq;
	json_decref(c->result);
	c->result = result ? json_incref((json_t *)result) : NULL;
	snprintf(c->reason, sizeof(c->reason), "%s", reason ? reason : "");
}

static int caps_done(const struct cap *c, int n)
{
	int done = 0;

	for (int i = 0; i < n; i++)
		done += c[i].done;
	return done;
}

static void cap_clear(struct cap *c)
{
	json_decref(c->result);
	memset(c, 0, sizeof(*c));
}

#define RUN_UNTIL(l, cond, ms)                                                                     \
	do {                                                                                       \
		uint64_t t0_ = loop_now_ms();                                                      \
		while (!(cond) && loop_now_ms() - t0_ < (ms))                                      \
			loop_run_once((l), 20);                                                    \
	} while (0)

struct env_t {
	struct loop *loop;
	struct upstream *u;
	struct hookrec h;
};

static void start(struct env_t *e, const struct policy_server *srv,
		  const struct upstream_opts *opts)
{
	struct upstream_hooks hooks = {h_ready, h_changed, h_down, &e->h};
	struct appl_err err = {0};

	memset(e, 0, sizeof(*e));
	e->loop = loop_new(&err);
	assert_non_null(e->loop);
	hooks.data = &e->h;
	e->u = upstream_new(e->loop, srv, &hooks, opts, &err);
	if (!e->u)
		fail_msg("upstream_new: %s", err.msg);
}

static void start_ready(struct env_t *e, const struct policy_server *srv,
			const struct upstream_opts *opts)
{
	struct appl_err err = {0};

	start(e, srv, opts);
	if (upstream_wait_ready(e->u, 5000, &err) < 0)
		fail_msg("wait_ready: %s", err.msg);
	assert_int_equal(upstream_state(e->u), UPSTREAM_READY);
}

static void stop(struct env_t *e)
{
	upstream_free(e->u);
	loop_free(e->loop);
}

/* Call and wait for the answer. */
static void call_wait(struct env_t *e, const char *tool, json_t *args, unsigned timeout_ms,
		      struct cap *c)
{
	struct appl_err err = {0};

	if (upstream_call(e->u, tool, args, timeout_ms, cap_cb, c, NULL, &err) < 0)
		fail_msg("upstream_call %s: %s", tool, err.msg);
	json_decref(args);
	RUN_UNTIL(e->loop, c->done, 10000);
	assert_int_equal(c->done, 1);
}

static json_int_t sc_int(const struct cap *c, const char *key)
{
	return json_integer_value(
		json_object_get(json_object_get(c->result, "structuredContent"), key));
}

static const char *text0(const struct cap *c)
{
	return json_string_value(
		json_object_get(json_array_get(json_object_get(c->result, "content"), 0), "text"));
}

/* ---- escaping and the environment (pure) ---------------------------------------- */

/* SEP-2243: which x-mcp-header marks a tool may carry. */
static void test_param_headers_check(void **state)
{
	static const struct {
		const char *schema, *why; /* why NULL: offered */
	} cases[] = {
		{"{}", NULL},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"Region\"},"
		 "\"n\":{\"type\":\"integer\",\"x-mcp-header\":\"N\"},"
		 "\"b\":{\"type\":\"boolean\",\"x-mcp-header\":\"B-2\"}}}",
		 NULL},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"\"}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"A B\"}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"A:B\"}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"\u00e9\"}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":\"A\\r\\nX: y\"}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"string\",\"x-mcp-header\":7}}}",
		 "not a header"},
		{"{\"properties\":{\"r\":{\"type\":\"number\",\"x-mcp-header\":\"R\"}}}",
		 "not a string"},
		{"{\"properties\":{\"r\":{\"type\":\"object\",\"x-mcp-header\":\"R\"}}}",
		 "not a string"},
		{"{\"properties\":{\"r\":{\"x-mcp-header\":\"R\"}}}", "not a string"},
		{"{\"properties\":{\"r\":{\"type\":[\"string\"],\"x-mcp-header\":\"R\"}}}",
		 "not a string"},
		{"{\"properties\":{\"a\":{\"type\":\"string\",\"x-mcp-header\":\"Same\"},"
		 "\"b\":{\"type\":\"string\",\"x-mcp-header\":\"sAME\"}}}",
		 "same x-mcp-header"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *schema = json_loads(cases[i].schema, 0, NULL);
		const char *why;

		assert_non_null(schema);
		why = upstream_param_headers_check(schema);
		if (!cases[i].why)
			assert_null(why);
		else if (!why || !strstr(why, cases[i].why))
			fail_msg("case %zu: %s", i, why ? why : "(offered)");
		json_decref(schema);
	}
}

static void test_sid_ok(void **state)
{
	char big[UPSTREAM_SID_MAX + 2];
	(void)state;

	assert_true(upstream_sid_ok("abc-123_XYZ~!"));
	assert_false(upstream_sid_ok(""));
	assert_false(upstream_sid_ok("a b"));
	assert_false(upstream_sid_ok("a\tb"));
	assert_false(upstream_sid_ok("a\x7f"));
	assert_false(upstream_sid_ok("\xc3\xa9"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_false(upstream_sid_ok(big));
	big[UPSTREAM_SID_MAX] = '\0';
	assert_true(upstream_sid_ok(big));
}

static void test_env_build(void **state)
{
	const char *names[] = {"APPL_T_SET", "APPL_T_UNSET", "", "A=B", "APPL_T_EMPTY"};
	char **env = NULL;
	struct appl_err err = {0};
	(void)state;

	setenv("APPL_T_SET", "yes", 1);
	setenv("APPL_T_EMPTY", "", 1);
	setenv("APPL_T_SECRET", "hunter2", 1);
	unsetenv("APPL_T_UNSET");
	setenv("HOME", "/home/someone", 1);
	assert_int_equal(upstream_env_build(names, 5, &env, &err), 0);
	assert_string_equal(env[0], "PATH=/usr/local/bin:/usr/bin:/bin");
	assert_string_equal(env[1], "HOME=/home/someone");
	assert_string_equal(env[2], "APPL_T_SET=yes");
	assert_string_equal(env[3], "APPL_T_EMPTY=");
	assert_null(env[4]);
	upstream_env_free(env);

	/* no HOME: "/"; a listed PATH that is set replaces the default */
	const char *path[] = {"PATH"};
	unsetenv("HOME");
	setenv("PATH", "/opt/bin", 1);
	assert_int_equal(upstream_env_build(path, 1, &env, &err), 0);
	assert_string_equal(env[0], "PATH=/opt/bin");
	assert_string_equal(env[1], "HOME=/");
	assert_null(env[2]);
	upstream_env_free(env);
	setenv("PATH", "/usr/bin:/bin", 1);
	assert_int_equal(upstream_env_build(NULL, 0, &env, &err), 0);
	assert_null(env[2]);
	upstream_env_free(env);
}

/* ---- the toy ------------------------------------------------------------------- */

static void test_handshake_and_paging(void **state)
{
	static const char *const names[] = {"add",   "echo",  "sleep",	    "peak",
					    "bytes", "fail",  "write_note", "unsupported",
					    "deep",  "probe", "detach"};
	struct srvbuf b;
	struct env_t e;
	(void)state;

	start(&e, toy(&b, NULL, NULL), NULL);
	assert_int_equal(upstream_state(e.u), UPSTREAM_STARTING);
	assert_true(upstream_pid(e.u) > 0);
	assert_int_equal(upstream_tool_count(e.u), 0);
	assert_string_equal(upstream_protocol_version(e.u), "");
	assert_int_equal(upstream_wait_ready(e.u, 5000, NULL), 0);
	assert_int_equal(e.h.ready, 1);
	/* 11 tools on pages of 4: three pages followed */
	assert_int_equal(upstream_tool_count(e.u), 11);
	for (size_t i = 0; i < 11; i++)
		assert_string_equal(upstream_tool_get(e.u, i)->name, names[i]);
	assert_null(upstream_tool_get(e.u, 11));
	assert_string_equal(upstream_tool_get(e.u, 0)->description, "Add two integers.");
	assert_true(upstream_tool_get(e.u, 0)->read_only_hint);
	assert_false(upstream_tool_get(e.u, 6)->read_only_hint);
	assert_non_null(json_object_get(upstream_tool_get(e.u, 0)->input_schema, "properties"));
	assert_string_equal(upstream_protocol_version(e.u), "2025-11-25");
	assert_string_equal(upstream_name(e.u), "toy");
	stop(&e);
}

static void test_calls_add_echo(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	call_wait(&e, "add", json_pack("{s:i, s:i}", "a", 2, "b", 3), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_int_equal(sc_int(&c, "sum"), 5);
	cap_clear(&c);
	call_wait(&e, "echo", json_pack("{s:s}", "text", "héllo\nworld"), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "héllo\nworld");
	cap_clear(&c);
	/* a tool error is a result: isError is the caller's business */
	call_wait(&e, "fail", NULL, 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_true(json_is_true(json_object_get(c.result, "isError")));
	cap_clear(&c);
	stop(&e);
}

/* 20 sleeps in flight at once, answered in reverse order of asking: each
 * answer reaches the caller that asked for it. */
static void test_concurrent_out_of_order(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c[20] = {0}, peak = {0};
	uint64_t ids[20];
	struct appl_err err = {0};
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	for (int i = 0; i < 20; i++) {
		json_t *args = json_pack("{s:i}", "ms", 50 + 20 * (20 - i));

		assert_int_equal(upstream_call(e.u, "sleep", args, 0, cap_cb, &c[i], &ids[i], &err),
				 0);
		json_decref(args);
		if (i > 0)
			assert_true(ids[i] > ids[i - 1]);
	}
	RUN_UNTIL(e.loop, caps_done(c, 20) == 20, 10000);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(c[i].done, 1);
		assert_int_equal(c[i].status, UPSTREAM_OK);
		assert_int_equal(sc_int(&c[i], "slept_ms"), 50 + 20 * (20 - i));
		if (i > 0)
			assert_true(c[i].seq < c[i - 1].seq); /* out of order */
	}
	for (int i = 0; i < 20; i++)
		cap_clear(&c[i]);
	call_wait(&e, "peak", NULL, 0, &peak);
	assert_int_equal(sc_int(&peak, "peak"), 20);
	cap_clear(&peak);
	stop(&e);
}

/* The toy's peak: after a call, peak resets to the sleeps in flight now, so
 * a second peak tells whether a cancelled sleep is still running. */
static json_int_t toy_inflight(struct env_t *e)
{
	struct cap c = {0};
	json_int_t v;

	call_wait(e, "peak", NULL, 0, &c);
	cap_clear(&c);
	call_wait(e, "peak", NULL, 0, &c);
	v = sc_int(&c, "peak");
	cap_clear(&c);
	return v;
}

static void test_timeout_sends_cancelled(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	uint64_t t0;
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	t0 = loop_now_ms();
	call_wait(&e, "sleep", json_pack("{s:i}", "ms", 5000), 150, &c);
	assert_int_equal(c.status, UPSTREAM_TIMEOUT);
	assert_string_equal(c.reason, "timeout");
	assert_null(c.result);
	assert_true(loop_now_ms() - t0 >= 150);
	assert_true(loop_now_ms() - t0 < 2000);
	/* the toy dropped the sleep: notifications/cancelled reached it */
	assert_int_equal(toy_inflight(&e), 0);
	cap_clear(&c);
	stop(&e);
}

static void test_cancel_by_caller(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	struct appl_err err = {0};
	uint64_t id;
	json_t *args = json_pack("{s:i}", "ms", 300);
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	assert_int_equal(upstream_call(e.u, "sleep", args, 0, cap_cb, &c, &id, &err), 0);
	json_decref(args);
	upstream_call_cancel(e.u, id);
	upstream_call_cancel(e.u, id);	   /* twice: ignored */
	upstream_call_cancel(e.u, 123456); /* never given: ignored */
	assert_int_equal(toy_inflight(&e), 0);
	RUN_UNTIL(e.loop, 0, 450);
	assert_int_equal(c.done, 0);
	stop(&e);
}

static void test_jsonrpc_error_passes_message(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	call_wait(&e, "no_such_tool", json_object(), 0, &c);
	assert_int_equal(c.status, UPSTREAM_ERROR);
	assert_string_equal(c.reason, "unknown tool");
	cap_clear(&c);
	stop(&e);
}

/* Answers the parser refuses fail their call at once, not at its timeout,
 * and the server stays usable. */
static void test_refused_answers(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	uint64_t t0;
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	t0 = loop_now_ms();
	/* past the result cap (the default 64 KiB and its envelope): dropped
	 * as it is read, the call failing as soon as the cap is passed */
	call_wait(&e, "bytes", json_pack("{s:i}", "n", 5 * 1024 * 1024), 20000, &c);
	assert_int_equal(c.status, UPSTREAM_TOO_LARGE);
	assert_string_equal(c.reason, UPSTREAM_REASON_TOO_LARGE);
	cap_clear(&c);
	call_wait(&e, "deep", json_pack("{s:i}", "depth", 100), 20000, &c);
	assert_int_equal(c.status, UPSTREAM_ERROR);
	assert_string_equal(c.reason, "the server's answer was refused: nested too deeply");
	cap_clear(&c);
	assert_true(loop_now_ms() - t0 < 10000);
	call_wait(&e, "add", json_pack("{s:i, s:i}", "a", 1, "b", 1), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_int_equal(sc_int(&c, "sum"), 2);
	cap_clear(&c);
	stop(&e);
}

static void test_die_after_and_restart(void **state)
{
	struct upstream_opts opts = {.backoff_min_ms = 300};
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0}, s = {0}, d = {0};
	struct appl_err err = {0};
	json_t *args = json_pack("{s:i, s:i}", "a", 2, "b", 2);
	json_t *sleep = json_pack("{s:i}", "ms", 5000);
	pid_t first;
	(void)state;

	start_ready(&e, toy(&b, "--die-after", "1"), &opts);
	first = upstream_pid(e.u);
	call_wait(&e, "add", json_incref(args), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	cap_clear(&c);
	/* the second call kills it: both pending calls fail, with no detail */
	assert_int_equal(upstream_call(e.u, "sleep", sleep, 0, cap_cb, &s, NULL, &err), 0);
	assert_int_equal(upstream_call(e.u, "add", args, 0, cap_cb, &d, NULL, &err), 0);
	RUN_UNTIL(e.loop, s.done && d.done, 5000);
	assert_int_equal(s.status, UPSTREAM_UNAVAILABLE);
	assert_string_equal(s.reason, "upstream_unavailable");
	assert_int_equal(d.status, UPSTREAM_UNAVAILABLE);
	assert_int_equal(e.h.down, 1);
	/* the pipe may close a moment before the process is seen to exit */
	assert_true(strcmp(e.h.why, "exited") == 0 || strcmp(e.h.why, "closed its output") == 0);
	assert_int_equal(upstream_state(e.u), UPSTREAM_BACKOFF);
	assert_int_equal(upstream_pid(e.u), 0);
	/* reaped (at once, or from the loop once the process is fully gone) */
	RUN_UNTIL(e.loop, kill(first, 0) == -1, 2000);
	assert_int_equal(kill(first, 0), -1);
	/* the tool list is kept while it is down */
	assert_int_equal(upstream_tool_count(e.u), 11);
	/* during the backoff a call fails at once */
	cap_clear(&c);
	assert_int_equal(upstream_call(e.u, "add", args, 0, cap_cb, &c, NULL, &err), -EAGAIN);
	assert_string_equal(err.msg, "upstream_unavailable");
	RUN_UNTIL(e.loop, upstream_state(e.u) == UPSTREAM_DOWN, 2000);
	assert_int_equal(upstream_state(e.u), UPSTREAM_DOWN);
	/* the next call restarts it and waits for the handshake */
	assert_int_equal(upstream_call(e.u, "add", args, 0, cap_cb, &c, NULL, &err), 0);
	assert_int_equal(upstream_state(e.u), UPSTREAM_STARTING);
	assert_true(upstream_pid(e.u) > 0 && upstream_pid(e.u) != first);
	RUN_UNTIL(e.loop, c.done, 5000);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_int_equal(sc_int(&c, "sum"), 4);
	assert_int_equal(e.h.ready, 2);
	cap_clear(&c);
	cap_clear(&s);
	cap_clear(&d);
	json_decref(args);
	json_decref(sleep);
	stop(&e);
}

static void test_fail_init(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct appl_err err = {0};
	pid_t pid;
	(void)state;

	start(&e, toy(&b, "--fail-init", NULL), NULL);
	pid = upstream_pid(e.u);
	assert_true(pid > 0);
	assert_int_equal(upstream_wait_ready(e.u, 5000, &err), -EIO);
	assert_non_null(strstr(err.msg, "initialize"));
	assert_non_null(strstr(err.msg, "-32603"));
	assert_int_equal(e.h.down, 1);
	assert_int_equal(e.h.ready, 0);
	assert_int_equal(upstream_state(e.u), UPSTREAM_BACKOFF);
	assert_int_equal(upstream_tool_count(e.u), 0);
	/* killed, then reaped from the loop */
	RUN_UNTIL(e.loop, kill(pid, 0) < 0, 2000);
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(upstream_wait_ready(e.u, 100, &err), -EAGAIN);
	stop(&e);
}

static void test_list_changed_refresh(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	(void)state;

	start_ready(&e, toy(&b, "--list-changed-after", "1"), NULL);
	assert_int_equal(upstream_tool_count(e.u), 11);
	call_wait(&e, "add", json_pack("{s:i, s:i}", "a", 1, "b", 2), 0, &c);
	cap_clear(&c);
	RUN_UNTIL(e.loop, e.h.changed, 5000);
	assert_int_equal(e.h.changed, 1);
	assert_int_equal(e.h.ready, 1);
	assert_int_equal(upstream_tool_count(e.u), 12);
	assert_string_equal(upstream_tool_get(e.u, 11)->name, "late");
	call_wait(&e, "late", NULL, 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	cap_clear(&c);
	stop(&e);
}

static void test_free_cancels_pending(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	struct appl_err err = {0};
	json_t *args = json_pack("{s:i}", "ms", 5000);
	pid_t pid;
	(void)state;

	start_ready(&e, toy(&b, NULL, NULL), NULL);
	pid = upstream_pid(e.u);
	assert_int_equal(upstream_call(e.u, "sleep", args, 0, cap_cb, &c, NULL, &err), 0);
	json_decref(args);
	upstream_free(e.u);
	assert_int_equal(c.done, 1);
	assert_int_equal(c.status, UPSTREAM_CANCELLED);
	assert_string_equal(c.reason, "cancelled");
	assert_int_equal(kill(pid, 0), -1);
	loop_free(e.loop);
}

/* ---- refusals ---------------------------------------------------------------- */

static void test_bad_arguments(void **state)
{
	const char *rel[] = {"build/toy-server", NULL}, *none[] = {"/nonexistent/server", NULL};
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	json_t *arr = json_array();
	(void)state;

	assert_null(upstream_new(l, srv_make(&b, "x", rel, NULL, NULL), NULL, NULL, &err));
	assert_int_equal(err.code, -EINVAL);
	b.srv.kind = POLICY_SERVER_HTTP;
	assert_null(upstream_new(l, &b.srv, NULL, NULL, &err));
	loop_free(l);

	/* a program that cannot start: the upstream exists, in backoff */
	start(&e, srv_make(&b, "gone", none, NULL, NULL), NULL);
	assert_int_equal(upstream_state(e.u), UPSTREAM_BACKOFF);
	assert_non_null(strstr(upstream_last_error(e.u), "could not start"));
	assert_int_equal(e.h.down, 0);
	assert_int_equal(upstream_call(e.u, "t", NULL, 0, cap_cb, &c, NULL, &err), -EAGAIN);
	assert_string_equal(err.msg, "upstream_unavailable");
	stop(&e);

	start(&e, toy(&b, NULL, NULL), NULL);
	assert_int_equal(upstream_call(e.u, "add", arr, 0, cap_cb, &c, NULL, &err), -EINVAL);
	assert_int_equal(upstream_call(e.u, "", NULL, 0, cap_cb, &c, NULL, &err), -EINVAL);
	assert_int_equal(upstream_call(e.u, "add", NULL, 0, NULL, &c, NULL, &err), -EINVAL);
	json_decref(arr);
	stop(&e);
	assert_int_equal(c.done, 0);
}

/* Calls made while the server starts wait for it; past the cap they are
 * refused, and upstream_free cancels the ones that wait. */
static void test_pending_cap(void **state)
{
	static struct cap c[APPL_UPSTREAM_PENDING_MAX + 1];
	struct srvbuf b;
	struct env_t e;
	struct appl_err err = {0};
	int cancelled = 0;
	(void)state;

	start(&e, toy(&b, NULL, NULL), NULL);
	for (int i = 0; i < APPL_UPSTREAM_PENDING_MAX; i++)
		assert_int_equal(upstream_call(e.u, "add", NULL, 0, cap_cb, &c[i], NULL, &err), 0);
	assert_int_equal(upstream_call(e.u, "add", NULL, 0, cap_cb, &c[APPL_UPSTREAM_PENDING_MAX],
				       NULL, &err),
			 -EBUSY);
	stop(&e);
	for (int i = 0; i <= APPL_UPSTREAM_PENDING_MAX; i++)
		cancelled += c[i].done == 1 && c[i].status == UPSTREAM_CANCELLED;
	assert_int_equal(cancelled, APPL_UPSTREAM_PENDING_MAX);
}

/* ---- the fake server ---------------------------------------------------------- */

/* A cancelled call answered anyway, answers to ids never given, string ids
 * and null ids: all dropped; the next call gets its own answer. */
static void test_late_answer_dropped(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0}, d = {0};
	(void)state;

	start_ready(&e, fake(&b, "late"), NULL);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "hold"), 150, &c);
	assert_int_equal(c.status, UPSTREAM_TIMEOUT);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "now"), 0, &d);
	assert_int_equal(d.status, UPSTREAM_OK);
	assert_string_equal(text0(&d), "now");
	RUN_UNTIL(e.loop, 0, 200);
	assert_int_equal(c.done, 1);
	assert_int_equal(d.done, 1);
	assert_int_equal(e.h.down, 0);
	cap_clear(&c);
	cap_clear(&d);
	stop(&e);
}

static void test_server_requests(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	json_t *answers, *a;
	(void)state;

	start_ready(&e, fake(&b, "requests"), NULL);
	RUN_UNTIL(e.loop, 0, 100);
	call_wait(&e, "report", NULL, 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	answers = json_object_get(json_object_get(c.result, "structuredContent"), "answers");
	assert_int_equal(json_array_size(answers), 3);
	/* ping: {} */
	a = json_array_get(answers, 0);
	assert_string_equal(json_string_value(json_object_get(a, "id")), "s1");
	assert_true(json_is_object(json_object_get(a, "result")));
	assert_int_equal(json_object_size(json_object_get(a, "result")), 0);
	/* roots/list and sampling: method not found, with their ids */
	a = json_array_get(answers, 1);
	assert_string_equal(json_string_value(json_object_get(a, "id")), "s2");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
			 -32601);
	a = json_array_get(answers, 2);
	assert_int_equal(json_integer_value(json_object_get(a, "id")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "error"), "code")),
			 -32601);
	assert_int_equal(e.h.down, 0);
	cap_clear(&c);
	stop(&e);
}

static void test_error_message_cleaned(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	size_t len;
	(void)state;

	start_ready(&e, fake(&b, "error"), NULL);
	call_wait(&e, "t", NULL, 0, &c);
	assert_int_equal(c.status, UPSTREAM_ERROR);
	len = strlen(c.reason);
	assert_true(len <= APPL_TOOL_ERROR_MAX && len >= APPL_TOOL_ERROR_MAX - 1);
	assert_memory_equal(c.reason, "bad?thing \xc3\xa9", 12);
	assert_memory_equal(c.reason + len - 2, "\xc3\xa9", 2); /* not cut inside */
	cap_clear(&c);
	stop(&e);
}

static void handshake_fails(const char *mode, const char *expect, unsigned init_ms)
{
	struct upstream_opts opts = {.init_timeout_ms = init_ms};
	struct srvbuf b;
	struct env_t e;
	struct appl_err err = {0};

	start(&e, fake(&b, mode), &opts);
	assert_int_equal(upstream_wait_ready(e.u, 5000, &err), -EIO);
	if (!strstr(err.msg, expect))
		fail_msg("%s: %s does not say %s", mode, err.msg, expect);
	assert_int_equal(e.h.down, 1);
	assert_int_equal(upstream_tool_count(e.u), 0);
	stop(&e);
}

static void test_bad_handshakes(void **state)
{
	(void)state;
	handshake_fails("version", "no protocol version we speak", 0);
	handshake_fails("silent", "initialize: no answer in time", 200);
	handshake_fails("dup", "two tools have the same name", 0);
	handshake_fails("cursor", "a cursor came back", 0);
	handshake_fails("pages", "more pages than the cap", 0);
	handshake_fails("toomany", "more tools than the cap", 0);
}

static void test_bad_tools_skipped(void **state)
{
	struct srvbuf b;
	struct env_t e;
	(void)state;

	start_ready(&e, fake(&b, "skip"), NULL);
	assert_int_equal(upstream_tool_count(e.u), 1);
	assert_string_equal(upstream_tool_get(e.u, 0)->name, "good");
	assert_null(upstream_tool_get(e.u, 0)->description);
	assert_true(upstream_tool_get(e.u, 0)->read_only_hint);
	stop(&e);
}

/* The server sees PATH, HOME and the listed names that are set, nothing
 * else, in the working directory the policy names. */
static void test_env_passed(void **state)
{
	const char *argv[] = {self_exe, "--fake-server", "env", NULL};
	const char *names[] = {"APPL_T_PASSED", "APPL_T_UNSET", NULL};
	struct srvbuf b;
	struct env_t e;
	(void)state;

	setenv("APPL_T_PASSED", "yes it is", 1);
	unsetenv("APPL_T_UNSET");
	setenv("APPL_T_SECRET", "hunter2", 1);
	setenv("HOME", "/home/appliance", 1);
	start_ready(&e, srv_make(&b, "fake", argv, names, "/tmp"), NULL);
	assert_string_equal(upstream_tool_get(e.u, 0)->description,
			    "PATH=/usr/local/bin:/usr/bin:/bin\nHOME=/home/appliance\n"
			    "APPL_T_PASSED=yes it is\ncwd=/tmp");
	stop(&e);
	/* no cwd in the policy: "/" */
	start_ready(&e, srv_make(&b, "fake", argv, NULL, NULL), NULL);
	assert_non_null(strstr(upstream_tool_get(e.u, 0)->description, "\ncwd=/"));
	assert_null(strstr(upstream_tool_get(e.u, 0)->description, "hunter2"));
	stop(&e);
}

/* Run fn with the process's stderr going to a pipe; return what came. */
static char *stderr_capture(void (*fn)(void))
{
	static char out[65536];
	int p[2], saved = dup(STDERR_FILENO);
	size_t have = 0;
	ssize_t n;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(stderr);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	fn();
	dup2(saved, STDERR_FILENO);
	close(saved);
	while ((n = read(p[0], out + have, sizeof(out) - 1 - have)) > 0)
		have += (size_t)n;
	close(p[0]);
	out[have] = '\0';
	return out;
}

static void relay_run(void)
{
	struct srvbuf b;
	struct env_t e;

	start_ready(&e, fake(&b, "stderr"), NULL);
	RUN_UNTIL(e.loop, 0, 200);
	stop(&e);
}

/* An answer over the cap whose id comes after the cap: the server has
 * answered in order, so it is the oldest call's; two at once fail one each,
 * and the server goes on answering. */
static void test_overlong_answer_without_its_id(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c1 = {0}, c2 = {0}, c3 = {0};
	struct appl_err err = {0};
	json_t *tail = json_pack("{s:s}", "mode", "tail");
	(void)state;

	start_ready(&e, fake(&b, "plain"), NULL);
	assert_int_equal(upstream_call(e.u, "t", tail, 10000, cap_cb, &c1, NULL, &err), 0);
	assert_int_equal(upstream_call(e.u, "t", tail, 10000, cap_cb, &c2, NULL, &err), 0);
	json_decref(tail);
	RUN_UNTIL(e.loop, c1.done && c2.done, 10000);
	assert_int_equal(c1.status, UPSTREAM_TOO_LARGE);
	assert_int_equal(c2.status, UPSTREAM_TOO_LARGE);
	cap_clear(&c1);
	cap_clear(&c2);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "fine"), 10000, &c3);
	assert_int_equal(c3.status, UPSTREAM_OK);
	assert_int_equal(upstream_state(e.u), UPSTREAM_READY);
	cap_clear(&c3);
	stop(&e);
}

/* ---- tool metadata and resources ---------------------------------------------- */

/* Read uri and wait for the answer. */
static void read_wait(struct env_t *e, const char *uri, unsigned timeout_ms, struct cap *c)
{
	int rc = upstream_read(e->u, uri, timeout_ms, cap_cb, c, NULL);

	if (rc < 0)
		fail_msg("upstream_read %s: %d", uri, rc);
	RUN_UNTIL(e->loop, c->done, 10000);
	assert_int_equal(c->done, 1);
}

static const char *content0(const struct cap *c, const char *key)
{
	return json_string_value(
		json_object_get(json_array_get(json_object_get(c->result, "contents"), 0), key));
}

/* outputSchema when it is an object (else NULL, the tool kept), and
 * execution.taskSupport "required" exactly. */
static void test_tool_output_schema_and_tasks(void **state)
{
	struct srvbuf b;
	struct env_t e;
	const struct upstream_tool *t;
	(void)state;

	start_ready(&e, fake(&b, "schemas"), NULL);
	assert_int_equal(upstream_tool_count(e.u), 4);
	t = upstream_tool_get(e.u, 0);
	assert_string_equal(t->name, "typed");
	assert_non_null(t->output_schema);
	assert_string_equal(json_string_value(json_object_get(t->output_schema, "type")), "object");
	assert_non_null(json_object_get(json_object_get(t->output_schema, "properties"), "n"));
	assert_true(t->task_required);
	assert_false(t->task_optional);
	t = upstream_tool_get(e.u, 1);
	assert_string_equal(t->name, "loose");
	assert_null(t->output_schema);
	assert_false(t->task_required);
	assert_true(t->task_optional);
	t = upstream_tool_get(e.u, 2);
	assert_string_equal(t->name, "nulled");
	assert_null(t->output_schema);
	assert_false(t->task_required);
	assert_false(t->task_optional); /* taskSupport true: neither */
	t = upstream_tool_get(e.u, 3);
	assert_string_equal(t->name, "plain");
	assert_null(t->output_schema);
	assert_false(t->task_required);
	stop(&e);
}

/* capabilities.resources: an object declares them; none, or something
 * else, does not; nothing is known before the handshake. */
/* The tasks methods the fake saw, in order ("tasks/get", ...), as one
 * space-separated string (new). */
static char *tasks_seen(struct env_t *e)
{
	struct cap c = {0};
	const json_t *seen, *v;
	size_t i;
	char *out = calloc(1, 4096);

	call_wait(e, "report", NULL, 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	seen = json_object_get(json_object_get(c.result, "structuredContent"), "seen");
	json_array_foreach(seen, i, v) {
		const char *m = json_string_value(json_object_get(v, "method"));

		strncat(out, m + 6, 4095 - strlen(out));
		strncat(out, " ", 4095 - strlen(out));
	}
	cap_clear(&c);
	return out;
}

/* A call of a tool that runs only as a task asks for one, polls its status
 * at the server's interval until it completed, then takes its result; a
 * plain tool of the same server is called plainly, and so is one that may
 * run as a task, unless the call may take a minute or more. */
static void test_task_call_polls_to_its_result(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	char *seen;
	(void)state;

	start_ready(&e, fake(&b, "tasks"), NULL);
	assert_true(upstream_tool_get(e.u, 0)->task_required);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "ok"), 5000, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "task done");
	cap_clear(&c);
	call_wait(&e, "plain", json_pack("{s:s}", "mode", "direct"), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "direct");
	cap_clear(&c);
	seen = tasks_seen(&e);
	assert_string_equal(seen, "get get get result ");
	free(seen);
	/* a tool that may run as a task: plainly for a short call, as a task
	 * for one that may take a minute */
	call_wait(&e, "opt", json_pack("{s:s}", "mode", "short"), 5000, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "short");
	cap_clear(&c);
	call_wait(&e, "opt", json_pack("{s:s}", "mode", "ok"), UPSTREAM_TASK_LONG_MS, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "task done");
	cap_clear(&c);
	seen = tasks_seen(&e);
	assert_string_equal(seen, "get get get result get get get result ");
	free(seen);
	stop(&e);
}

/* A call given up, by its timeout or its caller, cancels its task at the
 * server; a task the server cancelled, or one it names with bytes we would
 * not send back, ends the call with an error. */
static void test_task_cancelled_both_ways(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	struct appl_err err = {0};
	json_t *args = json_pack("{s:s}", "mode", "forever");
	uint64_t id;
	char *seen;
	(void)state;

	start_ready(&e, fake(&b, "tasks"), NULL);
	call_wait(&e, "t", json_incref(args), 300, &c);
	assert_int_equal(c.status, UPSTREAM_TIMEOUT);
	cap_clear(&c);
	assert_int_equal(upstream_call(e.u, "t", args, 5000, cap_cb, &c, &id, &err), 0);
	RUN_UNTIL(e.loop, 0, 400); /* made, and polled once at least */
	upstream_call_cancel(e.u, id);
	assert_int_equal(c.done, 0);
	json_decref(args);
	seen = tasks_seen(&e);
	/* each was polled, then ended with tasks/cancel */
	assert_non_null(strstr(seen, "get cancel "));
	assert_non_null(strstr(strstr(seen, "cancel ") + 7, "get cancel "));
	assert_null(strstr(strstr(strstr(seen, "cancel ") + 7, "cancel ") + 7, "cancel"));
	assert_string_equal(seen + strlen(seen) - 7, "cancel ");
	free(seen);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "cancelled"), 5000, &c);
	assert_int_equal(c.status, UPSTREAM_ERROR);
	assert_string_equal(c.reason, "the server cancelled its task");
	cap_clear(&c);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "badid"), 5000, &c);
	assert_int_equal(c.status, UPSTREAM_ERROR);
	assert_non_null(strstr(c.reason, "no usable taskId"));
	cap_clear(&c);
	stop(&e);
}

static void test_has_resources(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct appl_err err = {0};
	(void)state;

	start(&e, fake(&b, "resources"), NULL);
	assert_false(upstream_has_resources(e.u));
	assert_int_equal(upstream_wait_ready(e.u, 5000, &err), 0);
	assert_true(upstream_has_resources(e.u));
	stop(&e);
	start_ready(&e, fake(&b, "plain"), NULL);
	assert_false(upstream_has_resources(e.u));
	stop(&e);
	start_ready(&e, fake(&b, "resstring"), NULL);
	assert_false(upstream_has_resources(e.u));
	stop(&e);
}

/* The log goes to a file of its own for a while: returns it. */
static int log_divert(void)
{
	int fd = memfd_create("log", MFD_CLOEXEC);

	assert_true(fd >= 0);
	log_setup(fd, LOG_INFO);
	return fd;
}

static void log_restore(int fd)
{
	log_setup(STDERR_FILENO, LOG_INFO);
	close(fd);
}

static void log_clear(int fd)
{
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
}

static bool log_has(int fd, const char *needle)
{
	static char buf[65536];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return strstr(buf, needle) != NULL;
}

#define DROPPING "a message longer than its cap"

static void split_call(struct env_t *e, struct cap *c, unsigned timeout_ms, int logfd)
{
	struct appl_err err = {0};
	json_t *args = json_pack("{s:s}", "mode", "split");

	assert_int_equal(upstream_call(e->u, "t", args, timeout_ms, cap_cb, c, NULL, &err), 0);
	json_decref(args);
	RUN_UNTIL(e->loop, log_has(logfd, DROPPING), 10000);
	assert_true(log_has(logfd, DROPPING));
}

/* An answer past the cap ends its call only once the rest of it has been
 * read and dropped, so the call holds its place (and its caller's server
 * slot) while the server still writes it; a timeout meanwhile, or the
 * server's exit inside it, ends the call over the cap all the same. */
static void test_overlong_answer_ends_its_call_at_its_end(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap a = {0}, f = {0};
	int logfd = log_divert();
	(void)state;

	start_ready(&e, fake(&b, "plain"), NULL);
	split_call(&e, &a, 10000, logfd);
	RUN_UNTIL(e.loop, 0, 100);
	assert_int_equal(a.done, 0); /* its head was dropped; its end has not come */
	call_wait(&e, "t", json_pack("{s:s}", "mode", "finish"), 10000, &f);
	assert_int_equal(a.done, 1);
	assert_int_equal(a.status, UPSTREAM_TOO_LARGE);
	assert_int_equal(f.status, UPSTREAM_OK);
	assert_true(a.seq < f.seq);
	cap_clear(&a);
	cap_clear(&f);
	/* its timeout while the rest is still coming: over the cap */
	log_clear(logfd);
	split_call(&e, &a, 300, logfd);
	RUN_UNTIL(e.loop, a.done, 10000);
	assert_int_equal(a.status, UPSTREAM_TOO_LARGE);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "finish"), 10000, &f);
	assert_int_equal(f.status, UPSTREAM_OK);
	cap_clear(&a);
	cap_clear(&f);
	/* the server exits inside it: over the cap, not unavailable */
	log_clear(logfd);
	split_call(&e, &a, 10000, logfd);
	call_wait(&e, "t", json_pack("{s:s}", "mode", "die"), 10000, &f);
	assert_int_equal(a.status, UPSTREAM_TOO_LARGE);
	assert_int_equal(f.status, UPSTREAM_UNAVAILABLE);
	cap_clear(&a);
	cap_clear(&f);
	stop(&e);
	log_restore(logfd);
}

/* resources/read {"uri"}: the result object reaches the callback; a read
 * made while the server starts waits for it; the result cap applies. */
static void test_read_round_trip(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	(void)state;

	start(&e, fake(&b, "resources"), NULL);
	assert_int_equal(upstream_state(e.u), UPSTREAM_STARTING);
	read_wait(&e, "test://notes/a b.txt", 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(content0(&c, "uri"), "test://notes/a b.txt");
	assert_string_equal(content0(&c, "text"), "the text");
	assert_string_equal(content0(&c, "mimeType"), "text/plain");
	assert_int_equal(json_array_size(json_object_get(c.result, "contents")), 1);
	cap_clear(&c);
	read_wait(&e, "test://big", 10000, &c);
	assert_int_equal(c.status, UPSTREAM_TOO_LARGE);
	assert_string_equal(c.reason, UPSTREAM_REASON_TOO_LARGE);
	cap_clear(&c);
	/* calls and reads side by side */
	call_wait(&e, "t", json_pack("{s:s}", "mode", "still"), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(text0(&c), "still");
	cap_clear(&c);
	stop(&e);
}

/* A read times out as a call does (notifications/cancelled, its late
 * answer dropped), and upstream_call_cancel forgets one. */
static void test_read_timeout_and_cancel(void **state)
{
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0}, d = {0};
	uint64_t id, t0;
	(void)state;

	start_ready(&e, fake(&b, "resources"), NULL);
	t0 = loop_now_ms();
	read_wait(&e, "test://hold", 150, &c);
	assert_int_equal(c.status, UPSTREAM_TIMEOUT);
	assert_string_equal(c.reason, UPSTREAM_REASON_TIMEOUT);
	assert_null(c.result);
	assert_true(loop_now_ms() - t0 >= 150);
	read_wait(&e, "test://after", 0, &d);
	assert_int_equal(d.status, UPSTREAM_OK);
	assert_string_equal(content0(&d, "uri"), "test://after");
	cap_clear(&d);
	assert_int_equal(upstream_read(e.u, "test://hold", 0, cap_cb, &d, &id), 0);
	upstream_call_cancel(e.u, id);
	RUN_UNTIL(e.loop, 0, 200);
	assert_int_equal(c.done, 1);
	assert_int_equal(d.done, 0);
	assert_int_equal(e.h.down, 0);
	cap_clear(&c);
	stop(&e);
}

/* A uri must be 1 to UPSTREAM_URI_MAX bytes of UTF-8, with a callback. */
static void test_read_bad_uri(void **state)
{
	static char uri[UPSTREAM_URI_MAX + 2];
	struct srvbuf b;
	struct env_t e;
	struct cap c = {0};
	(void)state;

	start_ready(&e, fake(&b, "resources"), NULL);
	memcpy(uri, "test://", 7);
	memset(uri + 7, 'u', UPSTREAM_URI_MAX - 6);
	uri[UPSTREAM_URI_MAX + 1] = '\0';
	assert_int_equal(upstream_read(e.u, uri, 0, cap_cb, &c, NULL), -EINVAL);
	assert_int_equal(upstream_read(e.u, "", 0, cap_cb, &c, NULL), -EINVAL);
	assert_int_equal(upstream_read(e.u, NULL, 0, cap_cb, &c, NULL), -EINVAL);
	assert_int_equal(upstream_read(e.u, "test://\xff", 0, cap_cb, &c, NULL), -EINVAL);
	assert_int_equal(upstream_read(e.u, "test://a", 0, NULL, &c, NULL), -EINVAL);
	assert_int_equal(c.done, 0);
	/* exactly the cap: sent */
	uri[UPSTREAM_URI_MAX] = '\0';
	read_wait(&e, uri, 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_int_equal(strlen(content0(&c, "uri")), UPSTREAM_URI_MAX);
	cap_clear(&c);
	stop(&e);
}

/* upstream_set_read by server name (-EAGAIN for a name it does not have),
 * and upstream_set_cancel of a read. */
static void test_set_read(void **state)
{
	char text[PATH_MAX + 1024];
	struct policy *p = NULL;
	struct upstream_set *set;
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	struct cap c = {0}, d = {0};
	uint64_t id;
	(void)state;

	snprintf(text, sizeof(text),
		 "{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
		 "\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:%064d\"},"
		 "\"servers\":{\"fake\":{\"command\":[\"%s\",\"--fake-server\","
		 "\"resources\"]}},\"tools\":{\"fake.*\":{\"access\":\"read\"}},"
		 "\"roles\":{\"reader\":{\"tools\":[\"fake.*\"],\"write\":false}}}",
		 0, self_exe);
	if (policy_parse(text, strlen(text), "/", &p, &err) != 0)
		fail_msg("policy: %s", err.msg);
	set = upstream_set_open(l, p, NULL, NULL, NULL, &err);
	if (!set)
		fail_msg("upstream_set_open: %s", err.msg);
	assert_true(upstream_has_resources(upstream_set_get(set, 0)));
	assert_int_equal(upstream_set_read(set, "nope", "test://a", 0, cap_cb, &c, NULL, "r1"),
			 -EAGAIN);
	assert_int_equal(upstream_set_read(set, "fake", "", 0, cap_cb, &c, NULL, "r1"), -EINVAL);
	assert_int_equal(upstream_set_read(set, "fake", "test://hold", 0, cap_cb, &d, &id, "r1"),
			 0);
	upstream_set_cancel(set, "fake", id);
	assert_int_equal(upstream_set_read(set, "fake", "test://a", 0, cap_cb, &c, NULL, "r1"), 0);
	RUN_UNTIL(l, c.done, 5000);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(content0(&c, "uri"), "test://a");
	RUN_UNTIL(l, 0, 100);
	assert_int_equal(d.done, 0);
	cap_clear(&c);
	upstream_set_free(set);
	policy_free(p);
	loop_free(l);
}

/* ---- a 2026-07-28 HTTP server (libmicrohttpd, in its own thread) ------------------ */

/* The metadata headers of the last request of one method. */
struct hseen {
	int n;
	char method[64], name[UPSTREAM_URI_MAX * 2], version[32];
	int params;		   /* Mcp-Param-* headers */
	char auth[128], both[128]; /* Authorization, X-Both: the policy's */
};

struct hsrv {
	struct MHD_Daemon *d;
	unsigned port;
	pthread_mutex_t mu;
	struct hseen read, call;
};

struct hbody {
	char *buf;
	size_t len;
};

static enum MHD_Result h_count_param(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	(void)kind;
	(void)value;
	if (strncasecmp(key, "Mcp-Param-", 10) == 0)
		(*(int *)cls)++;
	return MHD_YES;
}

static void h_record(struct MHD_Connection *conn, struct hseen *h)
{
	const char *m = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Method");
	const char *n = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Name");
	const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "MCP-Protocol-Version");
	const char *a = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	const char *x = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Both");

	h->n++;
	snprintf(h->auth, sizeof(h->auth), "%s", a ? a : "");
	snprintf(h->both, sizeof(h->both), "%s", x ? x : "");
	snprintf(h->method, sizeof(h->method), "%s", m ? m : "");
	snprintf(h->name, sizeof(h->name), "%s", n ? n : "");
	snprintf(h->version, sizeof(h->version), "%s", v ? v : "");
	h->params = 0;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, h_count_param, &h->params);
}

/* The answer to one JSON-RPC request of ours (a new reference), or NULL
 * for a method the server does not have. */
static json_t *h_answer(struct hsrv *hs, struct MHD_Connection *conn, const char *method,
			const json_t *params)
{
	if (strcmp(method, "server/discover") == 0)
		return json_pack("{s:[s], s:{s:{}, s:{}}, s:{s:s, s:s}}", "supportedVersions",
				 "2026-07-28", "capabilities", "tools", "resources", "serverInfo",
				 "name", "h", "version", "1");
	if (strcmp(method, "tools/list") == 0)
		return json_pack("{s:[{s:s, s:{s:s, s:{s:{s:s, s:s}}}}]}", "tools", "name", "t",
				 "inputSchema", "type", "object", "properties", "region", "type",
				 "string", "x-mcp-header", "Region");
	pthread_mutex_lock(&hs->mu);
	if (strcmp(method, "resources/read") == 0)
		h_record(conn, &hs->read);
	else if (strcmp(method, "tools/call") == 0)
		h_record(conn, &hs->call);
	pthread_mutex_unlock(&hs->mu);
	if (strcmp(method, "resources/read") == 0)
		return json_pack("{s:[{s:O, s:s}]}", "contents", "uri",
				 json_object_get(params, "uri"), "text", "over http");
	if (strcmp(method, "tools/call") == 0)
		return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "called");
	return NULL;
}

static enum MHD_Result h_serve(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *data,
			       size_t *size, void **state)
{
	struct hsrv *hs = cls;
	struct hbody *b = *state;
	struct MHD_Response *r;
	json_t *m, *res, *out;
	unsigned status = 200;
	enum MHD_Result ok;
	char *text;
	(void)url;
	(void)method;
	(void)version;

	if (!b) { /* the head: come back for the body */
		*state = calloc(1, sizeof(*b));
		return *state ? MHD_YES : MHD_NO;
	}
	if (*size) {
		char *nb = realloc(b->buf, b->len + *size + 1);

		if (!nb)
			return MHD_NO;
		memcpy(nb + b->len, data, *size);
		b->buf = nb;
		b->len += *size;
		*size = 0;
		return MHD_YES;
	}
	m = b->len ? json_loadb(b->buf, b->len, 0, NULL) : NULL;
	res = m ? h_answer(hs, conn, json_string_value(json_object_get(m, "method")),
			   json_object_get(m, "params"))
		: NULL;
	if (res) {
		out = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", json_object_get(m, "id"),
				"result", res);
	} else {
		status = 404;
		out = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
				json_object_get(m, "id"), "error", "code", -32601, "message",
				"Method not found");
	}
	text = json_dumps(out, JSON_COMPACT);
	r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	json_decref(out);
	json_decref(m);
	return ok;
}

static void h_completed(void *cls, struct MHD_Connection *conn, void **state,
			enum MHD_RequestTerminationCode toe)
{
	struct hbody *b = *state;
	(void)cls;
	(void)conn;
	(void)toe;

	if (b)
		free(b->buf);
	free(b);
	*state = NULL;
}

static void hsrv_start(struct hsrv *hs)
{
	memset(hs, 0, sizeof(*hs));
	pthread_mutex_init(&hs->mu, NULL);
	hs->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
				 NULL, NULL, h_serve, hs, MHD_OPTION_NOTIFY_COMPLETED, h_completed,
				 NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 * 1024),
				 MHD_OPTION_END);
	assert_non_null(hs->d);
	hs->port = MHD_get_daemon_info(hs->d, MHD_DAEMON_INFO_BIND_PORT)->port;
}

static void hsrv_stop(struct hsrv *hs)
{
	MHD_stop_daemon(hs->d);
	pthread_mutex_destroy(&hs->mu);
}

/* 2026-07-28 over HTTP: a read carries Mcp-Method resources/read and
 * Mcp-Name its uri (base64 when it is not plain ASCII), and no
 * Mcp-Param-* header, which only a tool's marks make. */
static void test_http_read_headers(void **state)
{
	struct policy_server srv = {.name = "web", .kind = POLICY_SERVER_HTTP};
	struct hsrv hs;
	struct env_t e;
	struct cap c = {0};
	struct hseen seen;
	char url[64];
	(void)state;

	hsrv_start(&hs);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", hs.port);
	srv.url = url;
	start_ready(&e, &srv, NULL);
	assert_string_equal(upstream_protocol_version(e.u), "2026-07-28");
	assert_true(upstream_has_resources(e.u));
	assert_int_equal(upstream_tool_count(e.u), 1);

	read_wait(&e, "file:///projects/app/config.json", 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	assert_string_equal(content0(&c, "uri"), "file:///projects/app/config.json");
	assert_string_equal(content0(&c, "text"), "over http");
	cap_clear(&c);
	pthread_mutex_lock(&hs.mu);
	seen = hs.read;
	pthread_mutex_unlock(&hs.mu);
	assert_int_equal(seen.n, 1);
	assert_string_equal(seen.method, "resources/read");
	assert_string_equal(seen.name, "file:///projects/app/config.json");
	assert_string_equal(seen.version, "2026-07-28");
	assert_int_equal(seen.params, 0);

	read_wait(&e, "file:///caf\xc3\xa9", 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	cap_clear(&c);
	pthread_mutex_lock(&hs.mu);
	seen = hs.read;
	pthread_mutex_unlock(&hs.mu);
	assert_int_equal(seen.n, 2);
	assert_string_equal(seen.name, "=?base64?ZmlsZTovLy9jYWbDqQ==?=");

	/* a call of the marked tool, for contrast: its name and its parameter */
	call_wait(&e, "t", json_pack("{s:s}", "region", "eu-1"), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	cap_clear(&c);
	pthread_mutex_lock(&hs.mu);
	seen = hs.call;
	pthread_mutex_unlock(&hs.mu);
	assert_string_equal(seen.method, "tools/call");
	assert_string_equal(seen.name, "t");
	assert_int_equal(seen.params, 1);
	stop(&e);
	hsrv_stop(&hs);
}

/* ---- the secrets of HTTP headers ------------------------------------------------ */

/* A source of values that is not the environment: a table, and how often
 * each name was asked for. */
struct fake_src {
	const char *names[4], *values[4];
	int asked[4];
};

static int fake_take(void *data, const char *name, char **value, size_t *len)
{
	struct fake_src *src = data;

	for (size_t i = 0; i < 4 && src->names[i]; i++) {
		if (strcmp(src->names[i], name) != 0)
			continue;
		src->asked[i]++;
		*len = strlen(src->values[i]);
		if (!(*value = sodium_malloc(*len + 1)))
			return -ENOMEM;
		memcpy(*value, src->values[i], *len + 1);
		return 0;
	}
	return -ENOENT;
}

static struct policy *web_policy(unsigned port)
{
	char text[2048];
	struct policy *p = NULL;
	struct appl_err err = {0};

	snprintf(text, sizeof(text),
		 "{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
		 "\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:%064d\"},"
		 "\"servers\":{\"web\":{\"url\":\"http://127.0.0.1:%u/mcp\",\"headers\":"
		 "{\"Authorization\":\"Bearer {env:UPT_TOK}\","
		 "\"X-Both\":\"{env:UPT_TOK}-{env:UPT_TWO}\"}}},"
		 "\"tools\":{\"web.*\":{\"access\":\"read\"}},"
		 "\"roles\":{\"reader\":{\"tools\":[\"web.*\"],\"write\":false}}}",
		 0, port);
	if (policy_parse(text, strlen(text), "/", &p, &err) != 0)
		fail_msg("policy: %s", err.msg);
	return p;
}

/* A call of the HTTP server made with opts; what its headers said. */
static struct hseen web_call(struct hsrv *hs, const struct policy *p,
			     const struct upstream_opts *opts, struct upstream_secrets *wipe)
{
	struct env_t e;
	struct cap c = {0};
	struct hseen seen;

	start_ready(&e, policy_server_get(p, 0), opts);
	/* the upstream keeps its own filled copy: the taken values may go */
	upstream_secrets_wipe(wipe);
	call_wait(&e, "t", json_pack("{s:s}", "region", "eu-1"), 0, &c);
	assert_int_equal(c.status, UPSTREAM_OK);
	cap_clear(&c);
	stop(&e);
	pthread_mutex_lock(&hs->mu);
	seen = hs->call;
	pthread_mutex_unlock(&hs->mu);
	return seen;
}

/* A value that would end the header line, or make it longer than its cap,
 * is refused when the upstream is made: its bytes are not quoted. */
static void bad_values_refused(const struct policy *p)
{
	static char big[9 * 1024];
	const char *bad[] = {"a\r\nX-Evil: 1", "a\nb", big};
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);

	memset(big, 'x', sizeof(big) - 1);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fake_src src = {{"UPT_TOK", "UPT_TWO"}, {bad[i], "two"}, {0}};
		struct upstream_secrets *s = NULL;
		struct upstream_opts opts = {0};

		assert_int_equal(upstream_secrets_take(p, fake_take, &src, &s, &err), 0);
		opts.secrets = s;
		assert_null(upstream_new(l, policy_server_get(p, 0), NULL, &opts, &err));
		assert_int_equal(err.code, -EINVAL);
		assert_string_equal(err.msg, "servers.web.headers.Authorization: the filled value "
					     "is too long or holds a line break");
		upstream_secrets_free(s);
	}
	loop_free(l);
}

/* Each variable the headers name is taken once, through the caller's
 * function, and fills every header that names it; one the source does not
 * have is refused, naming it; without secrets, the environment fills. */
static void test_secrets_take(void **state)
{
	struct fake_src src = {{"UPT_TOK", "UPT_TWO"}, {"s3cret", "two"}, {0}};
	struct fake_src lacking = {{"UPT_TOK"}, {"s3cret"}, {0}};
	struct upstream_secrets *s = NULL;
	struct upstream_opts opts = {0};
	struct appl_err err = {0};
	struct policy *p;
	struct hsrv hs;
	struct hseen seen;
	(void)state;

	assert_true(sodium_init() >= 0);
	hsrv_start(&hs);
	p = web_policy(hs.port);
	assert_int_equal(upstream_secrets_take(p, fake_take, &src, &s, &err), 0);
	assert_non_null(s);
	assert_int_equal(src.asked[0], 1);
	assert_int_equal(src.asked[1], 1);
	opts.secrets = s;
	seen = web_call(&hs, p, &opts, s);
	assert_string_equal(seen.auth, "Bearer s3cret");
	assert_string_equal(seen.both, "s3cret-two");
	upstream_secrets_free(s);

	/* s still holds the freed pointer: a failure must set it to NULL */
	assert_int_equal(upstream_secrets_take(p, fake_take, &lacking, &s, &err), -ENOENT);
	assert_null(s);
	assert_string_equal(err.msg,
			    "servers.web.headers.X-Both: the environment has no UPT_TWO; set it "
			    "where the appliance starts (for the systemd unit, in an "
			    "EnvironmentFile)");
	assert_int_equal(lacking.asked[0], 1);

	bad_values_refused(p);

	setenv("UPT_TOK", "from-env", 1);
	setenv("UPT_TWO", "2", 1);
	seen = web_call(&hs, p, NULL, NULL);
	assert_string_equal(seen.auth, "Bearer from-env");
	assert_string_equal(seen.both, "from-env-2");
	unsetenv("UPT_TOK");
	unsetenv("UPT_TWO");
	upstream_secrets_free(NULL);
	policy_free(p);
	hsrv_stop(&hs);
}

static void test_stderr_relay(void **state)
{
	char cut[APPL_UPSTREAM_STDERR_LINE_MAX + 64];
	const char *out;
	(void)state;

	out = stderr_capture(relay_run);
	assert_non_null(strstr(out, " upstream fake: stderr: plain line\n"));
	assert_non_null(strstr(out, " upstream fake: stderr: esc \\x1b[31m red \\x01 "
				    "\\x5c \\xff\\xfe \xc3\xa9 \\xc2\\x9b\n"));
	memset(cut, 'x', APPL_UPSTREAM_STDERR_LINE_MAX);
	snprintf(cut + APPL_UPSTREAM_STDERR_LINE_MAX, 64, " [cut]\n");
	assert_non_null(strstr(out, cut));
	assert_non_null(strstr(out, " upstream fake: stderr: no newline at the end\n"));
	/* one log line per line: no x-run longer than the cap */
	memset(cut, 'x', APPL_UPSTREAM_STDERR_LINE_MAX + 1);
	cut[APPL_UPSTREAM_STDERR_LINE_MAX + 1] = '\0';
	assert_null(strstr(out, cut));
}

/* ---- main --------------------------------------------------------------------- */

static int paths_find(void)
{
	char dir[PATH_MAX], cand[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	const char *env = getenv("TOY_SERVER");

	if (n <= 0)
		return -1;
	self_exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s", self_exe);
	/* build/tests/test_upstream -> build/toy-server; the same under
	 * BUILD=build/asan; else the top of the tree's build/. */
	snprintf(cand, sizeof(cand), "%s/../toy-server", dirname(dir));
	if (env && realpath(env, toy_path))
		return 0;
	if (realpath(cand, toy_path) && access(toy_path, X_OK) == 0)
		return 0;
	if (realpath("build/toy-server", toy_path) && access(toy_path, X_OK) == 0)
		return 0;
	fprintf(stderr, "test_upstream: no toy server: make build/toy-server\n");
	return -1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_build),
		cmocka_unit_test(test_param_headers_check),
		cmocka_unit_test(test_sid_ok),
		cmocka_unit_test(test_handshake_and_paging),
		cmocka_unit_test(test_calls_add_echo),
		cmocka_unit_test(test_concurrent_out_of_order),
		cmocka_unit_test(test_timeout_sends_cancelled),
		cmocka_unit_test(test_cancel_by_caller),
		cmocka_unit_test(test_jsonrpc_error_passes_message),
		cmocka_unit_test(test_refused_answers),
		cmocka_unit_test(test_die_after_and_restart),
		cmocka_unit_test(test_fail_init),
		cmocka_unit_test(test_list_changed_refresh),
		cmocka_unit_test(test_free_cancels_pending),
		cmocka_unit_test(test_bad_arguments),
		cmocka_unit_test(test_pending_cap),
		cmocka_unit_test(test_late_answer_dropped),
		cmocka_unit_test(test_server_requests),
		cmocka_unit_test(test_error_message_cleaned),
		cmocka_unit_test(test_bad_handshakes),
		cmocka_unit_test(test_bad_tools_skipped),
		cmocka_unit_test(test_env_passed),
		cmocka_unit_test(test_overlong_answer_without_its_id),
		cmocka_unit_test(test_overlong_answer_ends_its_call_at_its_end),
		cmocka_unit_test(test_tool_output_schema_and_tasks),
		cmocka_unit_test(test_has_resources),
		cmocka_unit_test(test_task_call_polls_to_its_result),
		cmocka_unit_test(test_task_cancelled_both_ways),
		cmocka_unit_test(test_read_round_trip),
		cmocka_unit_test(test_read_timeout_and_cancel),
		cmocka_unit_test(test_read_bad_uri),
		cmocka_unit_test(test_set_read),
		cmocka_unit_test(test_http_read_headers),
		cmocka_unit_test(test_secrets_take),
		cmocka_unit_test(test_stderr_relay),
	};

	if (argc == 3 && strcmp(argv[1], "--fake-server") == 0)
		return fake_main(argv[2]);
	signal(SIGPIPE, SIG_IGN);
	if (paths_find() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
