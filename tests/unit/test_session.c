/* test_session.c: the MCP dispatch core with a fake transport: both eras
 * and their mix, _meta and version errors, request ids in flight,
 * server/discover, result shapes per revision (the run result against its
 * outputSchema), progress, cancellation, subscriptions, roles. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "base/limits.h"
#include "mcp/session.h"
#include "mcp/tool.h"
#include "schema/schema.h"
#include "cell/cell.h"
#include "cell/files.h"

/* The owner's answer, as the run renders it: the outcome's result object. */
static void finish_outcome(struct mcp_run *run, const struct cell_outcome *o)
{
	json_t *obj = cell_outcome_json(o);

	mcp_run_finish(run, obj, cell_outcome_is_error(o), o->files);
	json_decref(obj);
}

#define MODERN_META                                                                                \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
	"\"io.modelcontextprotocol/clientCapabilities\":{},"                                       \
	"\"io.modelcontextprotocol/clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}"

#define OUT_MAX 64

/* One client: what the session sent it. */
struct client {
	struct mcp_principal p;
	struct mcp_session *s;
	json_t *out[OUT_MAX];
	json_t *related[OUT_MAX]; /* what send_for named, per message (NULL: send) */
	size_t nout, next;
	int closes;
};

struct env {
	struct loop *loop;
	struct mcp_server *srv;
	struct client a, b;
	struct mcp_run *runs[8];
	size_t nruns;
	char code[64];
	char req_rev[16];
	char req_role[16];
	bool had_token;
	bool holding; /* the hold hook's answer */
	int cancels;
	/* what progress reports */
	struct mcp_progress prog;
};

static int t_send(void *t, char *line, size_t len)
{
	struct client *c = t;
	json_error_t je;
	json_t *v;

	assert_true(len > 0 && line[len - 1] == '\n');
	assert_null(memchr(line, '\n', len - 1)); /* one line, one message */
	v = json_loadb(line, len - 1, 0, &je);
	free(line);
	assert_non_null(v);
	assert_true(c->nout < OUT_MAX);
	c->out[c->nout++] = v;
	return 0;
}

/* The same, for a message that belongs with the answer to related. */
static int t_send_for(void *t, const json_t *related, char *line, size_t len)
{
	struct client *c = t;
	size_t at = c->nout;
	int rc = t_send(t, line, len);

	c->related[at] = json_deep_copy(related);
	return rc;
}

static void t_close(void *t, const char *why)
{
	(void)why;
	((struct client *)t)->closes++;
}

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct env *e = data;

	assert_true(e->nruns < 8);
	e->runs[e->nruns++] = run;
	snprintf(e->code, sizeof(e->code), "%.*s", (int)len, code);
	snprintf(e->req_rev, sizeof(e->req_rev), "%s", req->rev->name);
	snprintf(e->req_role, sizeof(e->req_role), "%s", req->principal->role);
	e->had_token = req->progress_token != NULL;
}

static void forget(struct env *e, struct mcp_run *run)
{
	for (size_t i = 0; i < e->nruns; i++)
		if (e->runs[i] == run) {
			e->runs[i] = e->runs[--e->nruns];
			return;
		}
	fail_msg("an unknown run");
}

static void on_cancel(struct mcp_run *run, void *data)
{
	struct env *e = data;

	forget(e, run);
	e->cancels++;
}

static void progress(struct mcp_run *run, struct mcp_progress *p, void *data)
{
	(void)run;
	*p = ((struct env *)data)->prog;
}

static const char *description(const char *role, void *data)
{
	(void)data;
	return role && strcmp(role, "ops") == 0 ? "the ops description" : "a test description";
}

static bool hold(void *data)
{
	return ((struct env *)data)->holding;
}

static void client_open(struct env *e, struct client *c, const char *role)
{
	struct mcp_transport t = {.send = t_send, .close = t_close, .t = c};
	struct appl_err err = {0};

	c->p = (struct mcp_principal){.client = "test", .role = role};
	c->s = mcp_session_new(e->srv, &t, &c->p, &err);
	assert_non_null(c->s);
}

static void client_clear(struct client *c)
{
	for (size_t i = 0; i < c->nout; i++) {
		json_decref(c->out[i]);
		json_decref(c->related[i]);
		c->related[i] = NULL;
	}
	c->nout = c->next = 0;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct appl_err err = {0};
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .progress = progress,
					 .description = description,
					 .hold = hold,
					 .output_schema = cell_outcome_schema(),
					 .data = e};

	e->loop = loop_new(&err);
	assert_non_null(e->loop);
	e->srv = mcp_server_new(e->loop, &hooks, &err);
	assert_non_null(e->srv);
	client_open(e, &e->a, "reader");
	client_open(e, &e->b, "ops");
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	mcp_session_free(e->a.s);
	mcp_session_free(e->b.s);
	assert_int_equal(e->nruns, 0); /* freeing a session cancels its runs */
	client_clear(&e->a);
	client_clear(&e->b);
	mcp_server_free(e->srv);
	loop_free(e->loop);
	free(e);
	return 0;
}

static void in(struct client *c, const char *line)
{
	mcp_session_input(c->s, line, strlen(line));
}

/* The next message the client got (borrowed until client_clear). */
static json_t *out(struct client *c)
{
	if (c->next >= c->nout)
		fail_msg("no message");
	return c->out[c->next++];
}

static void none(struct client *c)
{
	if (c->next < c->nout) {
		char *s = json_dumps(c->out[c->next], 0);
		fail_msg("unexpected message: %s", s);
	}
}

static json_t *result_of(json_t *v)
{
	json_t *r = json_object_get(v, "result");

	assert_non_null(r);
	return r;
}

static json_int_t code_of(json_t *v)
{
	json_t *err = json_object_get(v, "error");

	assert_non_null(err);
	return json_integer_value(json_object_get(err, "code"));
}

static const char *str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}

static void legacy_init(struct client *c, const char *version)
{
	char line[256];
	json_t *r;

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
		 "{\"protocolVersion\":\"%s\",\"capabilities\":{}}}",
		 version);
	in(c, line);
	r = result_of(out(c));
	assert_string_equal(str(r, "protocolVersion"), version);
	assert_null(json_object_get(r, "resultType"));
	in(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* A run_python call of code under id (a JSON id), with extra _meta text. */
static void call(struct client *c, const char *id, const char *meta)
{
	char line[512];

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":"
		 "{\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1)\"}%s%s}}",
		 id, meta ? "," : "", meta ? meta : "");
	in(c, line);
}

/* ---- the legacy era ------------------------------------------------------------------ */

static void test_legacy_tools_need_initialize(void **state)
{
	struct env *e = *state;
	json_t *v;

	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	call(&e->a, "2", NULL);
	assert_int_equal(code_of(out(&e->a)), -32602);
	assert_int_equal(e->nruns, 0);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}");
	v = result_of(out(&e->a));
	assert_true(json_is_object(v));
	legacy_init(&e->a, "2025-06-18");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/list\"}");
	assert_non_null(json_object_get(result_of(out(&e->a)), "tools"));
	/* once is enough */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":"
		  "{\"protocolVersion\":\"2025-06-18\"}}");
	assert_int_equal(code_of(out(&e->a)), -32600);
	none(&e->a);
}

static void test_legacy_unknown_version_gets_the_latest(void **state)
{
	struct env *e = *state;
	json_t *r;

	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	/* 2026-07-28 is not negotiated by initialize either */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":"
		  "{\"protocolVersion\":\"2026-07-28\"}}");
	r = result_of(out(&e->a));
	assert_string_equal(str(r, "protocolVersion"), "2025-11-25");
	assert_true(json_is_true(json_object_get(
		json_object_get(json_object_get(r, "capabilities"), "tools"), "listChanged")));
	assert_string_equal(str(json_object_get(r, "serverInfo"), "name"), "appliance");
}

/* What a tools/list and a run result hold, per legacy revision. */
static void test_legacy_shapes_per_revision(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = "1\n", .out_len = 2, .calls = 0, .duration_ms = 5};
	json_t *tool, *r;

	legacy_init(&e->a, "2024-11-05");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	r = result_of(out(&e->a));
	tool = json_array_get(json_object_get(r, "tools"), 0);
	assert_string_equal(str(tool, "name"), "run_python");
	assert_string_equal(str(tool, "description"), "a test description");
	assert_non_null(json_object_get(tool, "inputSchema"));
	assert_null(json_object_get(tool, "annotations"));
	assert_null(json_object_get(tool, "outputSchema"));
	assert_null(json_object_get(r, "ttlMs"));
	assert_null(json_object_get(r, "resultType"));
	call(&e->a, "2", NULL);
	assert_int_equal(e->nruns, 1);
	assert_string_equal(e->req_rev, "2024-11-05");
	finish_outcome(e->runs[0], &o);
	e->nruns = 0;
	r = result_of(out(&e->a));
	assert_null(json_object_get(r, "structuredContent"));
	assert_non_null(strstr(str(json_array_get(json_object_get(r, "content"), 0), "text"),
			       "\"stdout\":\"1\\n\""));

	mcp_session_free(e->a.s);
	client_clear(&e->a);
	client_open(e, &e->a, "reader");
	legacy_init(&e->a, "2025-11-25");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	tool = json_array_get(json_object_get(result_of(out(&e->a)), "tools"), 0);
	assert_non_null(json_object_get(tool, "annotations"));
	assert_non_null(json_object_get(tool, "outputSchema"));
	assert_string_equal(str(tool, "title"), "Run Python");
	call(&e->a, "2", NULL);
	finish_outcome(e->runs[0], &o);
	e->nruns = 0;
	r = result_of(out(&e->a));
	assert_non_null(json_object_get(r, "structuredContent"));
	assert_null(json_object_get(r, "resultType"));
	assert_true(json_is_false(json_object_get(r, "isError")));
}

static void test_errors_and_serving_goes_on(void **state)
{
	struct env *e = *state;
	json_t *v;

	legacy_init(&e->a, "2025-06-18");
	in(&e->a, "{not json");
	assert_int_equal(code_of(out(&e->a)), -32700);
	in(&e->a, "[]");
	assert_int_equal(code_of(out(&e->a)), -32600);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/nope\"}");
	assert_int_equal(code_of(out(&e->a)), -32601);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"exec\",\"arguments\":{}}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
		  "{\"name\":\"run_python\",\"arguments\":{\"code\":1}}}");
	v = json_object_get(result_of(out(&e->a)), "isError");
	assert_true(json_is_true(v));
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":"
		  "{\"cursor\":\"4\"}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	/* notifications are never answered, known or not; responses neither */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");
	in(&e->a, "");
	in(&e->a, "\r");
	none(&e->a);
	assert_int_equal(e->nruns, 0);
}

/* ---- the modern era --------------------------------------------------------------------- */

static void check_modern_result(json_t *r)
{
	assert_string_equal(str(r, "resultType"), "complete");
	assert_string_equal(str(json_object_get(json_object_get(r, "_meta"),
						"io.modelcontextprotocol/serverInfo"),
				"name"),
			    "appliance");
}

static void test_modern_needs_no_handshake(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = "", .error = "Traceback: boom", .calls = 2};
	json_t *r, *tool;

	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/list\",\"params\":{" MODERN_META "}}");
	r = result_of(out(&e->a));
	check_modern_result(r);
	assert_int_equal(json_integer_value(json_object_get(r, "ttlMs")), 60000);
	assert_string_equal(str(r, "cacheScope"), "private");
	tool = json_array_get(json_object_get(r, "tools"), 0);
	assert_non_null(json_object_get(tool, "outputSchema"));
	assert_string_equal(str(json_object_get(tool, "inputSchema"), "type"), "object");
	call(&e->a, "1", MODERN_META);
	assert_int_equal(e->nruns, 1);
	assert_string_equal(e->req_rev, "2026-07-28");
	assert_string_equal(e->req_role, "reader");
	finish_outcome(e->runs[0], &o);
	e->nruns = 0;
	r = result_of(out(&e->a));
	check_modern_result(r);
	assert_true(json_is_true(json_object_get(r, "isError")));
	assert_string_equal(str(json_object_get(r, "structuredContent"), "error"),
			    "Traceback: boom");
	/* a run that never ran: a tool error, shaped all the same */
	call(&e->a, "2", MODERN_META);
	mcp_run_fail(e->runs[0], "too many runs are waiting");
	e->nruns = 0;
	r = result_of(out(&e->a));
	check_modern_result(r);
	assert_true(json_is_true(json_object_get(r, "isError")));
	/* legacy-only methods are not part of this revision */
	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{" MODERN_META "}}");
	assert_int_equal(code_of(out(&e->a)), -32601);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
		  "\"protocolVersion\":\"2025-11-25\"," MODERN_META "}}");
	assert_int_equal(code_of(out(&e->a)), -32601);
	none(&e->a);
}

static void check_discover(json_t *v)
{
	json_t *r = result_of(v), *sv = json_object_get(r, "supportedVersions");
	bool modern = false, legacy = false;
	size_t i;
	json_t *x;

	check_modern_result(r);
	json_array_foreach(sv, i, x) {
		modern |= strcmp(json_string_value(x), "2026-07-28") == 0;
		legacy |= strcmp(json_string_value(x), "2025-11-25") == 0;
	}
	assert_true(modern && legacy);
	assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
	assert_true(json_is_integer(json_object_get(r, "ttlMs")));
	assert_string_equal(str(r, "cacheScope"), "public");
	assert_non_null(str(r, "instructions"));
	/* identity is in _meta, not beside the result's fields */
	assert_null(json_object_get(r, "serverInfo"));
}

static void test_discover_before_and_after_initialize(void **state)
{
	struct env *e = *state;

	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":\"server-discover-probe-1\",\"method\":"
		  "\"server/discover\",\"params\":{" MODERN_META "}}");
	check_discover(out(&e->a));
	/* without _meta it is malformed, before and after initialize */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\"}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	legacy_init(&e->a, "2025-11-25");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server/discover\",\"params\":{}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"server/discover\",\"params\":{" MODERN_META
	   "}}");
	check_discover(out(&e->a));
	none(&e->a);
}

/* An owner that starts its tools on first use: what needs them is held,
 * unanswered, and everything else is answered meanwhile. */
static void test_requests_for_the_tools_are_held(void **state)
{
	struct env *e = *state;
	const char *list = "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}";
	const char *run = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":"
			  "{\"name\":\"run_python\",\"arguments\":{\"code\":\"1\"}}}";
	json_t *v;

	e->holding = true;
	legacy_init(&e->a, "2025-11-25");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	result_of(out(&e->a));
	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"server/discover\",\"params\":{" MODERN_META
	   "}}");
	check_discover(out(&e->a));
	assert_true(mcp_session_input(e->a.s, list, strlen(list)));
	assert_true(mcp_session_input(e->a.s, run, strlen(run)));
	none(&e->a);
	assert_int_equal(e->nruns, 0);
	/* refused: the reason is the error's message, under the request's id */
	mcp_session_refuse(e->a.s, run, strlen(run), "could not start: no runtime");
	v = out(&e->a);
	assert_int_equal(code_of(v), -32603);
	assert_string_equal(str(json_object_get(v, "error"), "message"),
			    "could not start: no runtime");
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 6);
	/* ready: given again, it is answered */
	e->holding = false;
	assert_false(mcp_session_input(e->a.s, list, strlen(list)));
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 5);
	result_of(v);
	none(&e->a);
}

static void expect_invalid_meta(struct env *e, const char *meta, const char *words)
{
	char line[1024];
	json_t *v;

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/"
		 "list\",\"params\":{\"_meta\":%s}}",
		 meta);
	in(&e->a, line);
	v = out(&e->a);
	assert_int_equal(code_of(v), -32602);
	assert_non_null(strstr(str(json_object_get(v, "error"), "message"), words));
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 7);
}

static void test_meta_must_be_whole(void **state)
{
	struct env *e = *state;

	expect_invalid_meta(e, "[]", "_meta must be an object");
	expect_invalid_meta(e, "{\"io.modelcontextprotocol/clientCapabilities\":{}}",
			    "protocolVersion");
	expect_invalid_meta(e,
			    "{\"io.modelcontextprotocol/protocolVersion\":20260728,"
			    "\"io.modelcontextprotocol/clientCapabilities\":{}}",
			    "protocolVersion");
	expect_invalid_meta(e, "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}",
			    "clientCapabilities");
	expect_invalid_meta(e,
			    "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
			    "\"io.modelcontextprotocol/clientCapabilities\":[]}",
			    "clientCapabilities");
	expect_invalid_meta(e,
			    "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
			    "\"io.modelcontextprotocol/clientCapabilities\":{},"
			    "\"io.modelcontextprotocol/clientInfo\":\"me\"}",
			    "clientInfo");
	expect_invalid_meta(e,
			    "{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
			    "\"io.modelcontextprotocol/clientCapabilities\":{},"
			    "\"progressToken\":true}",
			    "progressToken");
	{
		char meta[600];
		char big[300];

		memset(big, 't', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		snprintf(meta, sizeof(meta), "{\"progressToken\":\"%s\"}", big);
		expect_invalid_meta(e, meta, "progressToken");
		expect_invalid_meta(e, "{\"progressToken\":1.5}", "progressToken");
	}
	none(&e->a);
	assert_int_equal(e->nruns, 0);
}

static void test_unsupported_versions(void **state)
{
	struct env *e = *state;
	static const char *const asked[] = {"1900-01-01", "2025-11-25", "2026-07-29"};
	char line[1024], longv[200];
	json_t *v, *data;

	for (size_t i = 0; i < 3; i++) {
		snprintf(
			line, sizeof(line),
			"{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"server/discover\",\"params\":"
			"{\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"%s\","
			"\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
			i, asked[i]);
		in(&e->a, line);
		v = out(&e->a);
		assert_int_equal(code_of(v), -32022);
		data = json_object_get(json_object_get(v, "error"), "data");
		assert_string_equal(str(data, "requested"), asked[i]);
		assert_string_equal(
			json_string_value(json_array_get(json_object_get(data, "supported"), 0)),
			"2026-07-28");
		assert_true(json_array_size(json_object_get(data, "supported")) >= 2);
	}
	/* what is echoed of a long one is capped */
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
		 "\"run_python\",\"arguments\":{\"code\":\"1\"},\"_meta\":{"
		 "\"io.modelcontextprotocol/protocolVersion\":\"%s\","
		 "\"io.modelcontextprotocol/clientCapabilities\":{}}}}",
		 longv);
	in(&e->a, line);
	v = out(&e->a);
	assert_int_equal(code_of(v), -32022);
	assert_int_equal(
		strlen(str(json_object_get(json_object_get(v, "error"), "data"), "requested")), 64);
	assert_int_equal(e->nruns, 0);
}

/* Both eras on one connection, each request served by its own rules. */
static void test_mixed_eras_on_one_connection(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = "1\n", .out_len = 2};
	json_t *r;

	legacy_init(&e->a, "2025-11-25");
	call(&e->a, "1", MODERN_META);
	call(&e->a, "2", NULL);
	assert_int_equal(e->nruns, 2);
	finish_outcome(e->runs[1], &o); /* id 2: legacy */
	r = result_of(out(&e->a));
	assert_null(json_object_get(r, "resultType"));
	finish_outcome(e->runs[0], &o); /* id 1: modern */
	e->nruns = 0;
	r = result_of(out(&e->a));
	assert_string_equal(str(r, "resultType"), "complete");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}");
	assert_null(json_object_get(result_of(out(&e->a)), "ttlMs"));
	none(&e->a);
}

/* ---- request ids -------------------------------------------------------------------------- */

static void test_ids_in_flight_are_unique(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = ""};
	json_t *v;

	call(&e->a, "\"r\"", MODERN_META);
	assert_int_equal(e->nruns, 1);
	/* the same id again, either era: refused, never run, and not answered
	 * under that id (the first keeps its one answer) */
	call(&e->a, "\"r\"", MODERN_META);
	v = out(&e->a);
	assert_int_equal(code_of(v), -32600);
	assert_true(json_is_null(json_object_get(v, "id")));
	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"tools/list\",\"params\":{" MODERN_META
	   "}}");
	assert_int_equal(code_of(out(&e->a)), -32600);
	assert_int_equal(e->nruns, 1);
	/* 1 and "1" differ */
	call(&e->a, "1", MODERN_META);
	call(&e->a, "\"1\"", MODERN_META);
	assert_int_equal(e->nruns, 3);
	finish_outcome(e->runs[0], &o);
	forget(e, e->runs[0]);
	v = out(&e->a);
	assert_string_equal(json_string_value(json_object_get(v, "id")), "r");
	/* answered: the id is free again */
	call(&e->a, "\"r\"", MODERN_META);
	assert_int_equal(e->nruns, 3);
	/* a subscription in flight holds its id too */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":\"listen:0\",\"method\":\"subscriptions/listen\","
		  "\"params\":{\"notifications\":{}," MODERN_META "}}");
	assert_string_equal(str(out(&e->a), "method"), "notifications/subscriptions/acknowledged");
	call(&e->a, "\"listen:0\"", MODERN_META);
	assert_int_equal(code_of(out(&e->a)), -32600);
	assert_int_equal(e->nruns, 3);
	none(&e->a);
}

/* ---- the run result and its schema ------------------------------------------------------------ */

static void test_run_result_validates_against_its_output_schema(void **state)
{
	struct env *e = *state;
	json_t *value = json_pack("{s:[i,i],s:s}", "k", 1, 2, "s", "x");
	const struct cell_outcome outcomes[] = {
		{.out = "hello\n", .out_len = 6, .value = value, .calls = 3, .duration_ms = 12},
		{.out = "", .error = "Traceback: ValueError", .calls = 0},
		{.out = "partial",
		 .out_len = 7,
		 .truncated = true,
		 .reason = CELL_OUTPUT,
		 .error = NULL},
		{.out = "",
		 .reason = CELL_DEADLINE,
		 .error = "the cell was stopped at its deadline, 20 s after the request came"},
		{.out = "", .reason = CELL_CANCELLED, .error = "the run was cancelled"},
		{.out = "", .reason = CELL_SIGNAL},
	};
	struct appl_err err = {0};
	struct schema *sc = NULL;
	json_t *tool, *schema_doc, *bad;

	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"tools/list\",\"params\":{" MODERN_META "}}");
	tool = json_array_get(json_object_get(result_of(out(&e->a)), "tools"), 0);
	schema_doc = json_object_get(tool, "outputSchema");
	assert_int_equal(schema_new(schema_doc, &sc, &err), 0);
	for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
		json_t *r;

		call(&e->a, "1", MODERN_META);
		finish_outcome(e->runs[0], &outcomes[i]);
		e->nruns = 0;
		r = result_of(out(&e->a));
		if (schema_validate(sc, json_object_get(r, "structuredContent"), &err) != 0)
			fail_msg("outcome %zu does not validate: %s", i, err.msg);
		assert_int_equal(json_is_true(json_object_get(r, "isError")),
				 cell_outcome_is_error(&outcomes[i]));
	}
	/* and the schema is not one that takes anything */
	bad = json_pack("{s:s}", "stdout", "x");
	assert_int_not_equal(schema_validate(sc, bad, &err), 0);
	json_object_set_new(bad, "stdout", json_integer(1));
	assert_int_not_equal(schema_validate(sc, bad, &err), 0);
	json_decref(bad);
	schema_free(sc);
	json_decref(value);
}

/* A file of the run, as its runner sends it. */
static void file_put(struct cell_files *f, const char *name, const char *data, size_t len)
{
	struct cell_msg m = {.type = CELL_MSG_FILE};

	m.u.file.name = json_string(name);
	m.u.file.data = (unsigned char *)data;
	m.u.file.len = len;
	assert_int_equal(cell_files_feed(f, &m, NULL), 0);
	json_decref(m.u.file.name);
}

/* The files returned follow the text item: an image as one, text as a
 * resource's text, other bytes as a resource's blob; one left out only
 * in the result object. In the oldest revision and the newest alike. */
static void test_run_files_become_content_items(void **state)
{
	static const char *const metas[] = {NULL, MODERN_META};
	struct env *e = *state;
	struct cell_files_limits lim = {.max_count = 3, .max_bytes = 64, .max_total = 64};
	struct cell_files *f = cell_files_new(&lim);
	struct cell_outcome o = {.out = "", .calls = 0};
	json_t *r, *content, *item, *res;
	char uri[128];

	file_put(f, "../../x.png", "\x89PNG\r\n\x1a\n", 8);
	file_put(f, "t.csv", "a,b\n1,2\n", 8);
	file_put(f, "prog",
		 "\x7f"
		 "ELF\x02\x01",
		 6);
	file_put(f, "four", "x", 1); /* over max_count */
	o.files = cell_files_list(f);
	legacy_init(&e->a, "2024-11-05");
	for (size_t i = 0; i < 2; i++) {
		call(&e->a, "7", metas[i]);
		finish_outcome(e->runs[0], &o);
		e->nruns = 0;
		r = result_of(out(&e->a));
		content = json_object_get(r, "content");
		assert_int_equal(json_array_size(content), 4);
		assert_string_equal(str(json_array_get(content, 0), "type"), "text");

		item = json_array_get(content, 1);
		assert_string_equal(str(item, "type"), "image");
		assert_string_equal(str(item, "mimeType"), "image/png");
		assert_string_equal(str(item, "data"), "iVBORw0KGgo=");
		assert_int_equal(json_object_size(item), 3);

		item = json_array_get(content, 2);
		assert_string_equal(str(item, "type"), "resource");
		res = json_object_get(item, "resource");
		assert_string_equal(str(res, "mimeType"), "text/csv");
		assert_string_equal(str(res, "text"), "a,b\n1,2\n");
		snprintf(uri, sizeof(uri), "appliance://out/%s/t.csv",
			 str(json_array_get(o.files, 1), "sha256"));
		assert_string_equal(str(res, "uri"), uri);
		assert_null(json_object_get(res, "blob"));

		res = json_object_get(json_array_get(content, 3), "resource");
		assert_string_equal(str(res, "mimeType"), "application/octet-stream");
		assert_string_equal(str(res, "blob"), "f0VMRgIB");
		assert_non_null(strstr(str(res, "uri"), "/prog"));
		assert_null(json_object_get(res, "text"));
		/* structuredContent where the revision has it, and the text
		 * item: the list, never the content */
		assert_true((json_object_get(r, "structuredContent") != NULL) == (i == 1));
		assert_null(strstr(str(json_array_get(content, 0), "text"), "f0VMRgIB"));
		assert_non_null(strstr(str(json_array_get(content, 0), "text"), "\"max_count\""));
	}
	cell_files_free(f);
}

/* ---- logging, prompts and resources --------------------------------------------------- */

/* logging/setLevel (legacy only): nothing is logged until a level is set;
 * then each run's end is, at info (warning when it failed), about the
 * run's request, and a level above it keeps it quiet. */
static void test_set_level_decides_what_runs_log(void **state)
{
	struct env *e = *state;
	const struct cell_outcome ok = {.out = "1\n", .out_len = 2, .calls = 2, .duration_ms = 5};
	const struct cell_outcome bad = {.out = "", .error = "Traceback: ValueError"};
	struct mcp_transport t = {
		.send = t_send, .close = t_close, .t = &e->a, .send_for = t_send_for};
	struct appl_err err = {0};
	json_t *v, *params;

	mcp_session_free(e->a.s); /* one whose transport hears what a message is about */
	client_clear(&e->a);
	e->a.s = mcp_session_new(e->srv, &t, &e->a.p, &err);
	assert_non_null(e->a.s);
	legacy_init(&e->a, "2025-11-25");
	call(&e->a, "1", NULL);
	finish_outcome(e->runs[0], &ok);
	e->nruns = 0;
	result_of(out(&e->a)); /* the answer alone */
	none(&e->a);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\","
		  "\"params\":{\"level\":\"loud\"}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"logging/setLevel\","
		  "\"params\":{\"level\":\"info\"}}");
	assert_int_equal(json_object_size(result_of(out(&e->a))), 0);
	call(&e->a, "4", NULL);
	finish_outcome(e->runs[0], &ok);
	e->nruns = 0;
	v = out(&e->a);
	assert_string_equal(str(v, "method"), "notifications/message");
	assert_int_equal(json_integer_value(e->a.related[e->a.next - 1]), 4);
	params = json_object_get(v, "params");
	assert_string_equal(str(params, "level"), "info");
	assert_string_equal(str(params, "logger"), "appliance");
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(params, "data"), "calls")), 2);
	result_of(out(&e->a));
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"logging/setLevel\","
		  "\"params\":{\"level\":\"warning\"}}");
	result_of(out(&e->a));
	call(&e->a, "6", NULL);
	finish_outcome(e->runs[0], &ok); /* info: below the level */
	e->nruns = 0;
	result_of(out(&e->a));
	call(&e->a, "7", NULL);
	finish_outcome(e->runs[0], &bad);
	e->nruns = 0;
	assert_string_equal(str(json_object_get(out(&e->a), "params"), "level"), "warning");
	result_of(out(&e->a));
	none(&e->a);
	/* 2026-07-28 has no logging/setLevel, and its runs never log */
	in(&e->b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\","
		  "\"params\":{\"level\":\"debug\"," MODERN_META "}}");
	assert_int_equal(code_of(out(&e->b)), -32601);
}

/* Prompts and resources: declared, always empty, with cache hints in
 * 2026-07-28; reading or getting one is an error naming what was asked. */
static void test_prompts_and_resources_are_empty(void **state)
{
	struct env *e = *state;
	static const char *const lists[][2] = {{"prompts/list", "prompts"},
					       {"resources/list", "resources"},
					       {"resources/templates/list", "resourceTemplates"}};
	char line[512];
	json_t *r, *err;

	for (size_t i = 0; i < 3; i++) {
		snprintf(
			line, sizeof(line),
			"{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"%s\",\"params\":{" MODERN_META
			"}}",
			i + 1, lists[i][0]);
		in(&e->a, line);
		r = result_of(out(&e->a));
		assert_string_equal(str(r, "resultType"), "complete");
		assert_int_equal(json_array_size(json_object_get(r, lists[i][1])), 0);
		assert_non_null(json_object_get(r, lists[i][1]));
		assert_string_equal(str(r, "cacheScope"), "public");
		assert_true(json_is_integer(json_object_get(r, "ttlMs")));
	}
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/read\",\"params\":{"
		  "\"uri\":\"test://nothing\"," MODERN_META "}}");
	err = json_object_get(out(&e->a), "error");
	assert_int_equal(json_integer_value(json_object_get(err, "code")), -32602);
	assert_string_equal(str(json_object_get(err, "data"), "uri"), "test://nothing");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"prompts/get\",\"params\":{"
		  "\"name\":\"p\"," MODERN_META "}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	/* the legacy era declares them, with logging */
	legacy_init(&e->b, "2025-11-25");
	in(&e->b, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"prompts/list\"}");
	r = result_of(out(&e->b));
	assert_null(json_object_get(r, "ttlMs"));
	assert_null(json_object_get(r, "resultType"));
	assert_int_equal(json_array_size(json_object_get(r, "prompts")), 0);
}

/* ---- progress ------------------------------------------------------------------------------ */

/* Run the loop until the client got a message past those seen, at most
 * ms; return it or NULL. */
static json_t *wait_msg(struct env *e, struct client *c, unsigned ms)
{
	uint64_t end = loop_now_ms() + ms;

	while (c->next >= c->nout && loop_now_ms() < end)
		loop_run_once(e->loop, 20);
	return c->next < c->nout ? out(c) : NULL;
}

static void test_progress_while_a_run_goes_on(void **state)
{
	struct env *e = *state;
	char big[2000];
	struct cell_outcome o = {.out = ""};
	json_t *v, *p;
	uint64_t t1, t2;
	const char *msg;

	call(&e->a, "5",
	     "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
	     "\"io.modelcontextprotocol/clientCapabilities\":{},\"progressToken\":\"tok\"}");
	assert_int_equal(e->nruns, 1);
	assert_true(e->had_token);
	/* waiting for a slot: the heartbeat says so, unasked */
	e->prog = (struct mcp_progress){.waiting = true};
	v = wait_msg(e, &e->a, 30000);
	assert_non_null(v);
	assert_string_equal(str(v, "method"), "notifications/progress");
	p = json_object_get(v, "params");
	assert_string_equal(str(p, "progressToken"), "tok");
	assert_int_equal(json_integer_value(json_object_get(p, "progress")), 1);
	assert_string_equal(str(p, "message"), "waiting for a free sandbox");
	/* it printed: a report soon, quoting the end of the output */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[sizeof(big) - 4] = 'Z';
	e->prog = (struct mcp_progress){.calls = 2, .out = big, .out_len = strlen(big)};
	mcp_run_poke(e->runs[0]);
	v = wait_msg(e, &e->a, 30000);
	t1 = loop_now_ms();
	assert_non_null(v);
	p = json_object_get(v, "params");
	assert_int_equal(json_integer_value(json_object_get(p, "progress")), 2);
	msg = str(p, "message");
	assert_non_null(strstr(msg, "2 calls, 1999 bytes printed"));
	assert_non_null(strstr(msg, "aZaa"));
	assert_true(strlen(msg) < MCP_PROGRESS_TAIL + 100);
	/* pokes in a burst: one report, and not before the gap */
	for (int i = 0; i < 50; i++)
		mcp_run_poke(e->runs[0]);
	v = wait_msg(e, &e->a, 30000);
	t2 = loop_now_ms();
	assert_non_null(v);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(v, "params"), "progress")), 3);
	assert_true(t2 - t1 >= MCP_PROGRESS_GAP_MS - 5);
	/* answered: no report after the answer */
	finish_outcome(e->runs[0], &o);
	e->nruns = 0;
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 5);
	assert_null(wait_msg(e, &e->a, MCP_PROGRESS_EVERY_MS + 500));
}

static void test_progress_per_revision_and_only_when_asked(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = ""};
	json_t *v, *p;

	legacy_init(&e->a, "2024-11-05");
	call(&e->a, "1", "\"_meta\":{\"progressToken\":7}");
	call(&e->a, "2", NULL);
	assert_int_equal(e->nruns, 2);
	e->prog = (struct mcp_progress){.calls = 1};
	mcp_run_poke(e->runs[0]);
	mcp_run_poke(e->runs[1]);
	v = wait_msg(e, &e->a, 30000);
	assert_non_null(v);
	p = json_object_get(v, "params");
	assert_int_equal(json_integer_value(json_object_get(p, "progressToken")), 7);
	/* 2024-11-05 has no message */
	assert_null(json_object_get(p, "message"));
	finish_outcome(e->runs[0], &o);
	finish_outcome(e->runs[1], &o);
	e->nruns = 0;
	assert_int_equal(json_integer_value(json_object_get(out(&e->a), "id")), 1);
	assert_int_equal(json_integer_value(json_object_get(out(&e->a), "id")), 2);
	none(&e->a);
}

/* ---- cancellation --------------------------------------------------------------------------- */

static void test_cancel_in_both_eras(void **state)
{
	struct env *e = *state;

	legacy_init(&e->a, "2025-06-18");
	call(&e->a, "9", NULL);
	call(&e->a, "10",
	     "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","
	     "\"io.modelcontextprotocol/clientCapabilities\":{},\"progressToken\":1}");
	assert_int_equal(e->nruns, 2);
	/* a cancel for another id, or none, changes nothing */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		  "{\"requestId\":\"9\"}}");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\"}");
	assert_int_equal(e->cancels, 0);
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		  "{\"requestId\":9}}");
	assert_int_equal(e->cancels, 1);
	/* modern: with its _meta */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		  "{\"requestId\":10,\"reason\":\"timeout\"," MODERN_META "}}");
	assert_int_equal(e->cancels, 2);
	assert_int_equal(e->nruns, 0);
	/* nothing more for either: no answer, no progress */
	assert_null(wait_msg(e, &e->a, MCP_PROGRESS_EVERY_MS + 500));
}

/* ---- asking the client (write approvals) --------------------------------------------------- */

#define ELICIT_META                                                                                \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
	"\"io.modelcontextprotocol/clientCapabilities\":{\"elicitation\":{\"form\":{}}}}"

/* What the askers heard. */
static const char *answers[16];
static size_t nanswers;

static void on_answer(void *token, const char *outcome, const unsigned char *claim)
{
	(void)token;
	assert_null(claim); /* no cluster key: no ledger */
	assert_true(nanswers < 16);
	answers[nanswers++] = outcome;
}

static struct mcp_ask *ask(struct mcp_run *run, unsigned timeout_ms, char *why, size_t cap)
{
	static const unsigned char bind[32] = {1, 2, 3};
	struct mcp_ask_spec sp = {.text = "fs.write_file\n  path: \"/x\"",
				  .bind = bind,
				  .label = "run-1",
				  .timeout_ms = timeout_ms,
				  .fn = on_answer};

	return mcp_run_ask(run, &sp, why, cap);
}

static void legacy_init_caps(struct client *c, const char *version, const char *caps)
{
	char line[256];

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":"
		 "{\"protocolVersion\":\"%s\",\"capabilities\":%s}}",
		 version, caps);
	in(c, line);
	assert_non_null(result_of(out(c)));
	in(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* The elicitation/create the client was sent: its id (borrowed). */
static const char *elicit_request(struct client *c, bool mode)
{
	json_t *v = out(c), *params = json_object_get(v, "params");
	json_t *approve = json_object_get(
		json_object_get(json_object_get(params, "requestedSchema"), "properties"),
		"approve");

	assert_string_equal(str(v, "method"), "elicitation/create");
	assert_true(strncmp(str(params, "message"), "fs.write_file\n", 14) == 0);
	assert_string_equal(str(approve, "type"), "boolean");
	if (mode)
		assert_string_equal(str(params, "mode"), "form");
	else
		assert_null(json_object_get(params, "mode"));
	return str(v, "id");
}

static void test_legacy_elicitation_answers(void **state)
{
	static const char *const replies[][2] = {
		{"\"result\":{\"action\":\"accept\",\"content\":{\"approve\":true}}", "approved"},
		{"\"result\":{\"action\":\"accept\",\"content\":{\"approve\":false}}", "declined"},
		{"\"result\":{\"action\":\"accept\",\"content\":{\"approve\":\"yes\"}}",
		 "declined"},
		{"\"result\":{\"action\":\"decline\"}", "declined"},
		{"\"result\":{\"action\":\"cancel\"}", "cancelled"},
		{"\"result\":{\"action\":\"maybe\"}", "declined"},
		{"\"result\":7", "declined"},
		{"\"error\":{\"code\":-32601,\"message\":\"no\"}", "unavailable"},
	};
	struct env *e = *state;
	struct cell_outcome o = {.out = ""};
	char why[160], line[256];

	nanswers = 0;
	legacy_init_caps(&e->a, "2025-11-25", "{\"elicitation\":{}}");
	call(&e->a, "1", NULL);
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		const char *id;

		assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
		id = elicit_request(&e->a, true);
		/* an answer to an id never asked changes nothing */
		in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":\"appliance-ask-999\",\"result\":{}}");
		assert_int_equal(nanswers, i);
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",%s}", id,
			 replies[i][0]);
		in(&e->a, line);
		assert_int_equal(nanswers, i + 1);
		assert_string_equal(answers[i], replies[i][1]);
		/* answered once: the same answer again is ignored */
		in(&e->a, line);
		assert_int_equal(nanswers, i + 1);
	}
	/* withdrawn: the client hears notifications/cancelled for it */
	mcp_ask_cancel(ask(e->runs[0], 60000, why, sizeof(why)));
	{
		const char *id = elicit_request(&e->a, true);
		json_t *n = out(&e->a);

		assert_string_equal(str(n, "method"), "notifications/cancelled");
		assert_string_equal(str(json_object_get(n, "params"), "requestId"), id);
	}
	/* the run ending answers what is still open: cancelled */
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	(void)elicit_request(&e->a, true);
	finish_outcome(e->runs[0], &o);
	forget(e, e->runs[0]);
	assert_string_equal(answers[nanswers - 1], "cancelled");
	assert_non_null(result_of(out(&e->a)));
	none(&e->a);
}

static void test_legacy_elicitation_needs_the_capability(void **state)
{
	struct env *e = *state;
	char why[160];

	/* declared none */
	legacy_init(&e->a, "2025-11-25");
	call(&e->a, "1", NULL);
	assert_null(ask(e->runs[0], 1000, why, sizeof(why)));
	assert_non_null(strstr(why, "no form elicitation"));
	/* url only */
	legacy_init_caps(&e->b, "2025-11-25", "{\"elicitation\":{\"url\":{}}}");
	call(&e->b, "1", NULL);
	assert_null(ask(e->runs[1], 1000, why, sizeof(why)));
	none(&e->a);
	none(&e->b);
	mcp_session_free(e->a.s);
	mcp_session_free(e->b.s);
	client_clear(&e->a);
	client_clear(&e->b);
	/* a revision before elicitation; and 2025-06-18, which has it without
	 * a mode */
	client_open(e, &e->a, "reader");
	client_open(e, &e->b, "ops");
	legacy_init_caps(&e->a, "2025-03-26", "{\"elicitation\":{}}");
	call(&e->a, "1", NULL);
	assert_null(ask(e->runs[0], 1000, why, sizeof(why)));
	legacy_init_caps(&e->b, "2025-06-18", "{\"elicitation\":{}}");
	call(&e->b, "1", NULL);
	assert_non_null(ask(e->runs[1], 1000, why, sizeof(why)));
	(void)elicit_request(&e->b, false);
}

static void test_cells_waiting_for_input_are_capped(void **state)
{
	struct env *e = *state;
	char why[160], id[8];

	nanswers = 0;
	legacy_init_caps(&e->a, "2025-11-25", "{\"elicitation\":{}}");
	for (unsigned i = 0; i <= MCP_INPUT_WAITING_MAX; i++) {
		snprintf(id, sizeof(id), "%u", i + 1);
		call(&e->a, id, NULL);
	}
	for (unsigned i = 0; i < MCP_INPUT_WAITING_MAX; i++) {
		assert_non_null(ask(e->runs[i], 60000, why, sizeof(why)));
		(void)elicit_request(&e->a, true);
	}
	/* a cell already waiting may ask again; a new one may not */
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	(void)elicit_request(&e->a, true);
	assert_null(ask(e->runs[MCP_INPUT_WAITING_MAX], 60000, why, sizeof(why)));
	assert_non_null(strstr(why, "wait for its input already"));
	none(&e->a);
}

/* The requestState of an input_required answer (borrowed), checked. */
static const char *input_required(json_t *v, const char **key)
{
	json_t *r = result_of(v), *reqs = json_object_get(r, "inputRequests");
	const char *k;
	json_t *q;

	assert_string_equal(str(r, "resultType"), "input_required");
	assert_int_equal(json_object_size(reqs), 1);
	json_object_foreach(reqs, k, q) {
		assert_string_equal(str(q, "method"), "elicitation/create");
		assert_string_equal(str(json_object_get(q, "params"), "mode"), "form");
		*key = k;
	}
	assert_non_null(str(r, "requestState"));
	return str(r, "requestState");
}

/* A retry of run_python with code, state and responses (JSON text). */
static void retry(struct client *c, const char *id, const char *code, const char *state,
		  const char *responses)
{
	char line[1024];

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"tools/call\",\"params\":"
		 "{\"name\":\"run_python\",\"arguments\":{\"code\":\"%s\"},\"requestState\":\"%s\","
		 "\"inputResponses\":%s," ELICIT_META "}}",
		 id, code, state, responses);
	in(c, line);
}

static void yes_for(char *out, size_t cap, const char *key, const char *answer)
{
	snprintf(out, cap, "{\"%s\":%s}", key, answer);
}

#define YES "{\"action\":\"accept\",\"content\":{\"approve\":true}}"

static void test_modern_input_required_round_trip(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = "done"};
	char why[160], state1[512], state2[512], resp[160], key1[32];
	const char *key;
	json_t *v;

	nanswers = 0;
	call(&e->a, "1", ELICIT_META);
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	snprintf(state1, sizeof(state1), "%s", input_required(out(&e->a), &key));
	snprintf(key1, sizeof(key1), "%s", key);
	/* a second question while it waits goes out on the retry's answer; a
	 * response under its key is no answer to it */
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	none(&e->a);
	snprintf(resp, sizeof(resp),
		 "{\"jsonrpc\":\"2.0\",\"id\":\"approve-%lu\",\"result\":" YES "}",
		 strtoul(key1 + strlen("approve-"), NULL, 10) + 1);
	in(&e->a, resp);
	assert_int_equal(nanswers, 0);
	/* an answer missing: refused, and the state stays good */
	retry(&e->a, "2", "print(1)", state1, "{}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	assert_int_equal(nanswers, 0);
	yes_for(resp, sizeof(resp), key1, YES);
	retry(&e->a, "3", "print(1)", state1, resp);
	assert_int_equal(nanswers, 1);
	assert_string_equal(answers[0], "approved");
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 3);
	snprintf(state2, sizeof(state2), "%s", input_required(v, &key));
	assert_string_not_equal(state1, state2);
	/* the first state again: used up */
	retry(&e->a, "4", "print(1)", state1, resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	yes_for(resp, sizeof(resp), key, "{\"action\":\"decline\"}");
	retry(&e->a, "5", "print(1)", state2, resp);
	assert_int_equal(nanswers, 2);
	assert_string_equal(answers[1], "declined");
	none(&e->a); /* the run goes on, attached to 5 */
	finish_outcome(e->runs[0], &o);
	forget(e, e->runs[0]);
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 5);
	assert_string_equal(str(result_of(v), "resultType"), "complete");
	none(&e->a);
}

/* Change the character at i of a state to another of base64url's. */
static void flip(char *state, size_t i)
{
	state[i] = state[i] == 'A' ? 'B' : 'A';
}

static void test_request_state_is_authentic_and_bound(void **state)
{
	struct env *e = *state;
	struct cell_outcome o = {.out = "kept"};
	char why[160], st[512], bad[512], resp[160];
	const char *key;
	json_t *v;

	nanswers = 0;
	call(&e->a, "1", ELICIT_META);
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	snprintf(st, sizeof(st), "%s", input_required(out(&e->a), &key));
	yes_for(resp, sizeof(resp), key, YES);
	/* its MAC, its expiry, its nonce changed; cut; not base64 */
	snprintf(bad, sizeof(bad), "%s", st);
	flip(bad, strlen(bad) - 3);
	retry(&e->a, "2", "print(1)", bad, resp);
	v = out(&e->a);
	assert_int_equal(code_of(v), -32602);
	assert_non_null(strstr(str(json_object_get(v, "error"), "message"), "does not verify"));
	snprintf(bad, sizeof(bad), "%s", st);
	flip(bad, 23);
	retry(&e->a, "3", "print(1)", bad, resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	/* the nonce too is under the MAC: checked before it is looked up */
	snprintf(bad, sizeof(bad), "%s", st);
	flip(bad, 2);
	retry(&e->a, "4", "print(1)", bad, resp);
	v = out(&e->a);
	assert_non_null(strstr(str(json_object_get(v, "error"), "message"), "does not verify"));
	snprintf(bad, sizeof(bad), "%.*s", (int)strlen(st) - 4, st);
	retry(&e->a, "5", "print(1)", bad, resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	retry(&e->a, "6", "print(1)", "!!!!", resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	/* other code, or another client's connection: refused */
	retry(&e->a, "7", "print(2)", st, resp);
	assert_non_null(
		strstr(str(json_object_get(out(&e->a), "error"), "message"), "does not verify"));
	retry(&e->b, "7", "print(1)", st, resp);
	assert_int_equal(code_of(out(&e->b)), -32602);
	/* a legacy request carrying one */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
		  "\"run_python\",\"arguments\":{\"code\":\"print(1)\"},\"requestState\":\"x\"}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	assert_int_equal(nanswers, 0);
	/* the run ends while it waits: its answer is kept for the retry */
	finish_outcome(e->runs[0], &o);
	forget(e, e->runs[0]);
	assert_string_equal(answers[0], "cancelled");
	none(&e->a);
	retry(&e->a, "9", "print(1)", st, resp);
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 9);
	assert_string_equal(str(result_of(v), "resultType"), "complete");
	/* and only once */
	retry(&e->a, "10", "print(1)", st, resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	none(&e->a);
	none(&e->b);
}

static void test_a_client_that_never_comes_back(void **state)
{
	struct env *e = *state;
	char why[160], st[512], resp[160];
	const char *key;

	/* no elicitation declared: nobody to ask */
	call(&e->a, "1", MODERN_META);
	assert_null(ask(e->runs[0], 50, why, sizeof(why)));
	assert_non_null(strstr(why, "no form elicitation"));
	/* asked, and never retried: stopped when its state expires */
	call(&e->a, "2", ELICIT_META);
	assert_non_null(ask(e->runs[1], 50, why, sizeof(why)));
	snprintf(st, sizeof(st), "%s", input_required(out(&e->a), &key));
	for (int i = 0; i < 1000 && e->cancels == 0; i++)
		assert_true(loop_run_once(e->loop, 10) >= 0);
	assert_int_equal(e->cancels, 1);
	assert_int_equal(e->nruns, 1);
	yes_for(resp, sizeof(resp), key, YES);
	retry(&e->a, "3", "print(1)", st, resp);
	assert_int_equal(code_of(out(&e->a)), -32602);
	none(&e->a);
}

static void test_messages_about_a_request_name_it(void **state)
{
	struct env *e = *state;
	struct mcp_transport t = {
		.send = t_send, .close = t_close, .t = &e->a, .send_for = t_send_for};
	struct appl_err err = {0};
	char why[160];
	json_t *v;

	/* a transport with a stream per request hears which request each
	 * message is about */
	mcp_session_free(e->a.s);
	client_clear(&e->a);
	e->a.s = mcp_session_new(e->srv, &t, &e->a.p, &err);
	assert_non_null(e->a.s);
	legacy_init_caps(&e->a, "2025-11-25", "{\"elicitation\":{}}");
	assert_null(e->a.related[0]); /* an answer is routed by its own id */
	call(&e->a, "7", "\"_meta\":{\"progressToken\":\"p\"}");
	assert_non_null(ask(e->runs[0], 60000, why, sizeof(why)));
	v = out(&e->a);
	assert_string_equal(str(v, "method"), "elicitation/create");
	assert_int_equal(json_integer_value(e->a.related[e->a.next - 1]), 7);
	mcp_run_poke(e->runs[0]);
	v = wait_msg(e, &e->a, MCP_PROGRESS_EVERY_MS + 1000);
	assert_non_null(v);
	assert_string_equal(str(v, "method"), "notifications/progress");
	assert_int_equal(json_integer_value(e->a.related[e->a.next - 1]), 7);
}

/* ---- subscriptions and roles --------------------------------------------------------------- */

static void test_tool_changes_reach_who_asked(void **state)
{
	struct env *e = *state;
	json_t *v, *want;

	/* a legacy client before initialized hears nothing */
	mcp_server_tools_changed(e->srv, "reader");
	none(&e->a);
	legacy_init(&e->b, "2025-11-25");
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":\"l\",\"method\":\"subscriptions/listen\","
		  "\"params\":{\"notifications\":{\"toolsListChanged\":true,"
		  "\"promptsListChanged\":true}," MODERN_META "}}");
	v = out(&e->a);
	assert_string_equal(str(v, "method"), "notifications/subscriptions/acknowledged");
	assert_string_equal(str(json_object_get(json_object_get(v, "params"), "_meta"),
				"io.modelcontextprotocol/subscriptionId"),
			    "l");
	/* only what is honoured is acknowledged */
	want = json_pack("{s:b}", "toolsListChanged", 1);
	assert_true(
		json_equal(json_object_get(json_object_get(v, "params"), "notifications"), want));
	json_decref(want);
	/* the reader role changed: a hears it on its stream; b (ops) does not */
	mcp_server_tools_changed(e->srv, "reader");
	v = out(&e->a);
	assert_string_equal(str(v, "method"), "notifications/tools/list_changed");
	assert_string_equal(str(json_object_get(json_object_get(v, "params"), "_meta"),
				"io.modelcontextprotocol/subscriptionId"),
			    "l");
	none(&e->b);
	mcp_server_tools_changed(e->srv, "ops");
	none(&e->a);
	v = out(&e->b);
	assert_string_equal(str(v, "method"), "notifications/tools/list_changed");
	assert_null(json_object_get(v, "params"));
	/* the role's own description */
	in(&e->b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	assert_string_equal(str(json_array_get(json_object_get(result_of(out(&e->b)), "tools"), 0),
				"description"),
			    "the ops description");
	/* the stream ends when the client cancels it */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
		  "{\"requestId\":\"l\"}}");
	mcp_server_tools_changed(e->srv, "reader");
	none(&e->a);
}

static void test_listen_is_bounded_and_checked(void **state)
{
	struct env *e = *state;
	char line[512];

	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"subscriptions/listen\","
		  "\"params\":{" MODERN_META "}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	for (unsigned i = 1; i <= MCP_LISTENS_MAX + 1; i++) {
		snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"subscriptions/listen\","
			 "\"params\":{\"notifications\":{\"toolsListChanged\":true}," MODERN_META
			 "}}",
			 i);
		in(&e->a, line);
		if (i <= MCP_LISTENS_MAX)
			assert_string_equal(str(out(&e->a), "method"),
					    "notifications/subscriptions/acknowledged");
		else
			assert_int_equal(code_of(out(&e->a)), -32602);
	}
	/* legacy: it needs the modern _meta */
	in(&e->a, "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"subscriptions/listen\","
		  "\"params\":{\"notifications\":{}}}");
	assert_int_equal(code_of(out(&e->a)), -32602);
	none(&e->a);
}

static void test_overlong_gets_its_error(void **state)
{
	struct env *e = *state;
	const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"tools/call\",\"params\":{";
	json_t *v;

	mcp_session_overlong(e->a.s, head, sizeof(head) - 1);
	v = out(&e->a);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 77);
	assert_int_equal(code_of(v), -32600);
	mcp_session_overlong(e->a.s, "{\"params\":", 10);
	v = json_object_get(out(&e->a), "id");
	assert_true(json_is_null(v));
}

static void test_ended_session_sends_nothing(void **state)
{
	struct env *e = *state;

	call(&e->a, "1", MODERN_META);
	mcp_session_ended(e->a.s, "end of input");
	mcp_run_fail(e->runs[0], "x");
	e->nruns = 0;
	in(&e->a,
	   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{" MODERN_META "}}");
	none(&e->a);
	assert_int_equal(e->a.closes, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_legacy_tools_need_initialize, setup, teardown),
		cmocka_unit_test_setup_teardown(test_legacy_unknown_version_gets_the_latest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_legacy_shapes_per_revision, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors_and_serving_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_modern_needs_no_handshake, setup, teardown),
		cmocka_unit_test_setup_teardown(test_requests_for_the_tools_are_held, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_discover_before_and_after_initialize, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_meta_must_be_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unsupported_versions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mixed_eras_on_one_connection, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ids_in_flight_are_unique, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_files_become_content_items, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_run_result_validates_against_its_output_schema,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_progress_while_a_run_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_progress_per_revision_and_only_when_asked,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_in_both_eras, setup, teardown),
		cmocka_unit_test_setup_teardown(test_legacy_elicitation_answers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_legacy_elicitation_needs_the_capability, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cells_waiting_for_input_are_capped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_modern_input_required_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_request_state_is_authentic_and_bound, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_client_that_never_comes_back, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_messages_about_a_request_name_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tool_changes_reach_who_asked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listen_is_bounded_and_checked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_overlong_gets_its_error, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ended_session_sends_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_level_decides_what_runs_log, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_prompts_and_resources_are_empty, setup,
						teardown),
	};
	/* main's duty in the appliance: the library relies on it. */
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
