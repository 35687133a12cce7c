#define _GNU_SOURCE
/* test_mcp_http.c: MCP over Streamable HTTP (pkg/mcp/http.h) with a real
 * client: the loop runs here, libcurl in a second thread; every wait is on
 * the client's done pipe or a hook having run. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <curl/curl.h>
#include <sodium.h>
#include <cmocka.h>

#include "loop/loop.h"
#include "mcp/http.h"
#include "mcp/session.h"
#include "cell/cell.h"

/* The owner's answer, as the run renders it: the outcome's result object. */
static void finish_outcome(struct mcp_run *run, const struct cell_outcome *o)
{
	json_t *obj = cell_outcome_json(o);

	mcp_run_finish(run, obj, cell_outcome_is_error(o), o->files);
	json_decref(obj);
}

#define WAIT_MS 15000u
#define MODERN_META                                                                                \
	"\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                   \
	"\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define INIT                                                                                       \
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":" \
	"\"2025-11-25\",\"capabilities\":{}}}"

static const char *const hosts[] = {"127.0.0.1"};
static const struct mcp_principal alpha = {.client = "alpha", .role = "reader"};
static const struct mcp_principal beta = {.client = "beta", .role = "ops"};

struct fx {
	struct loop *loop;
	struct mcp_server *srv;
	struct mcp_http *h;
	struct mcp_run *run; /* the run handed off, until answered */
	int runs, cancels;
	bool answer_runs; /* finish each run in the next round */
	int auth_ok, auth_refused;
	char auth_peer[64];
	struct loop_timer *timer;
};

static const struct mcp_principal *principal(void *data, const unsigned char sha[32])
{
	unsigned char a[32], b[32];
	(void)data;

	crypto_hash_sha256(a, (const unsigned char *)"token-alpha", 11);
	crypto_hash_sha256(b, (const unsigned char *)"token-beta", 10);
	if (sodium_memcmp(a, sha, 32) == 0)
		return &alpha;
	return sodium_memcmp(b, sha, 32) == 0 ? &beta : NULL;
}

static void on_auth(void *data, const struct mcp_principal *p, const char *peer)
{
	struct fx *fx = data;

	if (p)
		fx->auth_ok++;
	else
		fx->auth_refused++;
	snprintf(fx->auth_peer, sizeof(fx->auth_peer), "%s", peer);
}

static void on_timer(void *data)
{
	struct fx *fx = data;
	struct cell_outcome o = {.out = "hi\n", .out_len = 3};

	if (fx->run) {
		finish_outcome(fx->run, &o);
		fx->run = NULL;
	}
}

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct fx *fx = data;
	(void)req;
	(void)code;
	(void)len;

	fx->runs++;
	fx->run = run;
	if (fx->answer_runs)
		loop_timer_set(fx->timer, 1);
}

static void on_cancel(struct mcp_run *run, void *data)
{
	struct fx *fx = data;

	assert_ptr_equal(run, fx->run);
	fx->run = NULL;
	fx->cancels++;
}

static const char *description(const char *role, void *data)
{
	(void)data;
	return role && strcmp(role, "ops") == 0 ? "the ops description" : "the reader description";
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .description = description,
					 .output_schema = cell_outcome_schema(),
					 .data = fx};
	static const struct http_front_listen listen[] = {{"127.0.0.1:0"}};
	struct mcp_http_config cfg = {.front = {.listen = listen,
						.nlisten = 1,
						.path = "/mcp",
						.hosts = hosts,
						.nhosts = 1,
						.max_connections = 16,
						.header_bytes = 16384,
						.body_bytes = 1 << 20,
						.slow_s = 10},
				      .principal = principal,
				      .on_auth = on_auth,
				      .data = fx,
				      .sessions_per_principal = 2,
				      .idle_ms = 60000};
	struct appl_err err = {0};

	assert_int_equal(sodium_init() < 0, 0);
	assert_non_null(fx->loop = loop_new(&err));
	assert_non_null(fx->srv = mcp_server_new(fx->loop, &hooks, &err));
	assert_non_null(fx->timer = loop_timer_new(fx->loop, on_timer, fx, &err));
	if (mcp_http_open(fx->srv, fx->loop, &cfg, &fx->h, &err) < 0)
		fail_msg("%s", err.msg);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	mcp_http_close(fx->h);
	assert_null(fx->run); /* closing ended (cancelled) what ran */
	loop_timer_free(fx->timer);
	mcp_server_free(fx->srv);
	loop_free(fx->loop);
	free(fx);
	return 0;
}

/* ---- the client ------------------------------------------------------------- */

struct call {
	const char *method, *token, *sid, *body;
	/* Headers to send: NULL-ended. Without any, a 2026-07-28 body gets the
	 * standard headers that agree with it (MCP-Protocol-Version, Mcp-Method,
	 * Mcp-Name). */
	const char *extra[4];
	bool abort_early; /* hang up as soon as the answer starts */
	char head[4096], resp[16384];
	size_t head_len, resp_len;
	long status;
	int done[2];
	bool finished;
	unsigned port;
};

static size_t on_data(char *p, size_t sz, size_t n, void *data)
{
	struct call *c = data;
	size_t len = sz * n, room = sizeof(c->resp) - 1 - c->resp_len;

	memcpy(c->resp + c->resp_len, p, len < room ? len : room);
	c->resp_len += len < room ? len : room;
	c->resp[c->resp_len] = '\0';
	return len;
}

static size_t on_head(char *p, size_t sz, size_t n, void *data)
{
	struct call *c = data;
	size_t len = sz * n, room = sizeof(c->head) - 1 - c->head_len;

	memcpy(c->head + c->head_len, p, len < room ? len : room);
	c->head_len += len < room ? len : room;
	c->head[c->head_len] = '\0';
	/* hang up once the head is in (the stream is open) */
	return c->abort_early && len == 2 && p[0] == '\r' ? 0 : len;
}

/* The standard headers of body when it is a 2026-07-28 request, in bufs. */
static struct curl_slist *standard_headers(struct curl_slist *hl, const char *body,
					   char bufs[][160], size_t n)
{
	json_t *v = body ? json_loads(body, 0, NULL) : NULL;
	const json_t *params = json_object_get(v, "params");
	const char *pv = json_string_value(json_object_get(
		json_object_get(params, "_meta"), "io.modelcontextprotocol/protocolVersion"));
	const char *name = json_string_value(json_object_get(params, "name"));

	if (pv && n >= 3) {
		snprintf(bufs[0], sizeof(bufs[0]), "MCP-Protocol-Version: %s", pv);
		snprintf(bufs[1], sizeof(bufs[1]), "Mcp-Method: %s",
			 json_string_value(json_object_get(v, "method")));
		hl = curl_slist_append(curl_slist_append(hl, bufs[0]), bufs[1]);
		if (name) {
			snprintf(bufs[2], sizeof(bufs[2]), "Mcp-Name: %s", name);
			hl = curl_slist_append(hl, bufs[2]);
		}
	}
	json_decref(v);
	return hl;
}

static void *client(void *data)
{
	struct call *c = data;
	CURL *h = curl_easy_init();
	struct curl_slist *hl = NULL;
	char url[64], auth[64], sid[96], std[3][160];

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", c->port);
	hl = curl_slist_append(hl, "Content-Type: application/json");
	hl = curl_slist_append(hl, "Accept: application/json, text/event-stream");
	if (c->token) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
		hl = curl_slist_append(hl, auth);
	}
	if (c->sid) {
		snprintf(sid, sizeof(sid), "Mcp-Session-Id: %s", c->sid);
		hl = curl_slist_append(hl, sid);
	}
	for (size_t i = 0; i < 4 && c->extra[i]; i++)
		hl = curl_slist_append(hl, c->extra[i]);
	if (!c->extra[0])
		hl = standard_headers(hl, c->body, std, sizeof(std));
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_head);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (strcmp(c->method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ? c->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)(c->body ? strlen(c->body) : 0));
	} else
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
	curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(h);
	if (write(c->done[1], "x", 1) != 1)
		abort();
	return NULL;
}

static void on_done(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct call *c = data;
	char b;
	(void)events;

	if (read(fd, &b, 1) == 1)
		c->finished = true;
	loop_del(loop, fd);
}

/* Run c from a thread while the loop serves it, until it is done. */
static void call_run(struct fx *fx, struct call *c)
{
	uint64_t end = loop_now_ms() + WAIT_MS;
	pthread_t t;

	/* a call copied from another starts afresh */
	c->finished = false;
	c->status = 0;
	c->head_len = c->resp_len = 0;
	c->head[0] = c->resp[0] = '\0';
	c->port = mcp_http_port(fx->h, 0);
	assert_int_equal(pipe2(c->done, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(loop_add(fx->loop, c->done[0], EPOLLIN, on_done, c, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, client, c), 0);
	while (!c->finished) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 100);
	}
	pthread_join(t, NULL);
	close(c->done[0]);
	close(c->done[1]);
}

/* The Mcp-Session-Id the answer carried (static), or NULL. */
static const char *sid_of(const struct call *c)
{
	static char sid[64];
	const char *at = strcasestr(c->head, "mcp-session-id: ");

	if (!at)
		return NULL;
	at += strlen("mcp-session-id: ");
	snprintf(sid, sizeof(sid), "%.*s", (int)strcspn(at, "\r\n"), at);
	return sid;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_a_legacy_session_is_bound_to_its_token(void **state)
{
	struct fx *fx = *state;
	struct call init = {.method = "POST", .token = "token-alpha", .body = INIT};
	struct call list = {.method = "POST",
			    .token = "token-alpha",
			    .body = "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}"};
	struct call foreign = list, del = {.method = "DELETE", .token = "token-alpha"};
	struct call after = list, none = {.method = "POST", .body = INIT};
	char sid[64];

	call_run(fx, &none);
	assert_int_equal(none.status, 401);
	/* every authentication is told, with the peer */
	assert_int_equal(fx->auth_refused, 1);
	assert_true(strncmp(fx->auth_peer, "127.0.0.1:", 10) == 0);
	call_run(fx, &init);
	assert_int_equal(init.status, 200);
	assert_int_equal(fx->auth_ok, 1);
	assert_non_null(strstr(init.resp, "\"protocolVersion\":\"2025-11-25\""));
	assert_non_null(sid_of(&init));
	snprintf(sid, sizeof(sid), "%s", sid_of(&init));
	assert_int_equal(strlen(sid), 32);
	list.sid = sid;
	call_run(fx, &list);
	assert_int_equal(list.status, 200);
	assert_non_null(strstr(list.resp, "the reader description"));
	/* another token naming the session: as if it did not exist */
	foreign.token = "token-beta";
	foreign.sid = sid;
	call_run(fx, &foreign);
	assert_int_equal(foreign.status, 404);
	/* a session id nobody was given */
	foreign.token = "token-alpha";
	foreign.sid = "00000000000000000000000000000000";
	call_run(fx, &foreign);
	assert_int_equal(foreign.status, 404);
	del.sid = sid;
	call_run(fx, &del);
	assert_int_equal(del.status, 200);
	after.sid = sid;
	call_run(fx, &after);
	assert_int_equal(after.status, 404);
}

static void test_roles_see_their_own_tools_and_sessions_are_capped(void **state)
{
	struct fx *fx = *state;
	const char *body =
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{" MODERN_META
		"}}";
	struct call a = {.method = "POST", .token = "token-alpha", .body = body};
	struct call b = {.method = "POST", .token = "token-beta", .body = body};
	struct call inits[3];

	call_run(fx, &a);
	call_run(fx, &b);
	assert_int_equal(a.status, 200);
	assert_non_null(strstr(a.resp, "the reader description"));
	assert_non_null(strstr(b.resp, "the ops description"));
	assert_null(sid_of(&a)); /* 2026-07-28: no session */
	for (int i = 0; i < 3; i++) {
		inits[i] = (struct call){.method = "POST", .token = "token-beta", .body = INIT};
		call_run(fx, &inits[i]);
	}
	assert_int_equal(inits[0].status, 200);
	assert_int_equal(inits[1].status, 200);
	assert_int_equal(inits[2].status, 503); /* two per principal here */
	assert_non_null(strcasestr(inits[2].head, "retry-after:"));
}

/* What the standard headers of a request without a session must say, and
 * the statuses its refusals get (2026-07-28 over HTTP). */
static void test_headers_must_agree_with_the_body(void **state)
{
	struct fx *fx = *state;
	const char *list =
		"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\",\"params\":{" MODERN_META
		"}}";
	const char *run =
		"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{"
		"\"name\":\"run_python\",\"arguments\":{\"code\":\"x\"}," MODERN_META "}}";
	const char *unknown =
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":{" MODERN_META "}}";
	const char *bare = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}";
	static const char pv[] = "MCP-Protocol-Version: 2026-07-28";
	const struct {
		const char *body;
		const char *hdr[3];
		long status;
		const char *code; /* in the JSON body; NULL: plain text */
	} cases[] = {
		{list, {"X-None: 1"}, 400, "-32020"},		       /* none of them */
		{list, {"Mcp-Method: tools/list"}, 400, "-32020"},     /* no version */
		{list, {pv}, 400, "-32020"},			       /* no method */
		{list, {pv, "Mcp-Method: tools/call"}, 400, "-32020"}, /* another method */
		{list, {pv, "Mcp-Method: TOOLS/LIST"}, 400, "-32020"}, /* exact, not folded */
		{list,
		 {"MCP-Protocol-Version: 1999-01-01", "Mcp-Method: tools/list"},
		 400,
		 "-32020"},
		{run, {pv, "Mcp-Method: tools/call"}, 400, "-32020"}, /* no name */
		{run, {pv, "Mcp-Method: tools/call", "Mcp-Name: other"}, 400, "-32020"},
		{unknown, {pv, "Mcp-Method: ping"}, 404, "-32601"},	/* not of 2026-07-28 */
		{bare, {pv, "Mcp-Method: tools/list"}, 400, "-32602"},	/* no _meta */
		{list, {pv, "Mcp-Method: \t tools/list  "}, 200, NULL}, /* white space trimmed */
		{list, {"Mcp-Session-Id: not-a-session"}, 404, NULL},
	};
	struct call c;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		c = (struct call){.method = "POST", .token = "token-alpha", .body = cases[i].body};
		memcpy(c.extra, cases[i].hdr, sizeof(cases[i].hdr));
		call_run(fx, &c);
		if (c.status != cases[i].status)
			fail_msg("case %zu: status %ld, want %ld: %s", i, c.status, cases[i].status,
				 c.resp);
		if (cases[i].code) {
			assert_non_null(strstr(c.resp, cases[i].code));
			assert_non_null(strcasestr(c.head, "content-type: application/json"));
		}
	}
}

/* A POST must carry one request, notification or response, in a legacy
 * session (2025-11-25) and without one (2026-07-28) alike: an empty body
 * gets a parse error, a message that is none of the three an invalid
 * request echoing its id, each with 400, never 202. */
static void test_a_body_that_is_no_message_gets_400(void **state)
{
	struct fx *fx = *state;
	struct call init = {.method = "POST", .token = "token-alpha", .body = INIT};
	const struct {
		const char *body;
		long status;
		const char *code, *id; /* in the answer; NULL: no body */
	} cases[] = {
		{"", 400, "-32700", "\"id\":null"},
		{"\r", 400, "-32700", "\"id\":null"},
		{" \r\n\t", 400, "-32700", "\"id\":null"},
		{"{\"jsonrpc\":\"2.0\",\"id\":5}", 400, "-32600", "\"id\":5"},
		{"{\"jsonrpc\":\"2.0\",\"id\":\"five\"}", 400, "-32600", "\"id\":\"five\""},
		{"{\"jsonrpc\":\"2.0\"}", 400, "-32600", "\"id\":null"},
		{"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", 400, "-32600",
		 "\"id\":null"},
		{"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{},\"error\":{\"code\":1,"
		 "\"message\":\"m\"}}",
		 400, "-32600", "\"id\":5"},
		{"not json", 400, "-32700", "\"id\":null"},
		/* what is accepted still gets 202 and no body */
		{"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", 202, NULL, NULL},
		{"{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", 202, NULL, NULL},
	};
	static const char *const modern[] = {"MCP-Protocol-Version: 2026-07-28", NULL};
	static const char *const legacy[] = {"MCP-Protocol-Version: 2025-11-25", NULL};
	char sid[64];
	struct call c;

	call_run(fx, &init);
	assert_int_equal(init.status, 200);
	snprintf(sid, sizeof(sid), "%s", sid_of(&init));
	for (int era = 0; era < 2; era++)
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			c = (struct call){.method = "POST",
					  .token = "token-alpha",
					  .body = cases[i].body,
					  .sid = era ? sid : NULL};
			memcpy(c.extra, era ? legacy : modern, sizeof(modern));
			call_run(fx, &c);
			if (c.status != cases[i].status)
				fail_msg("%s case %zu: status %ld, want %ld: %s",
					 era ? "legacy" : "2026-07-28", i, c.status,
					 cases[i].status, c.resp);
			if (!cases[i].code) {
				assert_int_equal(c.resp_len, 0);
				continue;
			}
			assert_non_null(strcasestr(c.head, "content-type: application/json"));
			if (!strstr(c.resp, cases[i].code) || !strstr(c.resp, cases[i].id))
				fail_msg("%s case %zu: %s", era ? "legacy" : "2026-07-28", i,
					 c.resp);
		}
	assert_int_equal(fx->runs, 0);
}

static void test_a_run_answers_on_its_stream(void **state)
{
	struct fx *fx = *state;
	struct call c = {
		.method = "POST",
		.token = "token-alpha",
		.body = "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{"
			"\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1)\"}," MODERN_META
			"}}"};

	fx->answer_runs = true;
	call_run(fx, &c);
	assert_int_equal(c.status, 200);
	assert_non_null(strcasestr(c.head, "content-type: text/event-stream"));
	assert_non_null(strstr(c.resp, "event: message\ndata: {"));
	assert_non_null(strstr(c.resp, "\"id\":9"));
	assert_non_null(strstr(c.resp, "\"resultType\":\"complete\""));
	assert_int_equal(fx->runs, 1);
}

static void test_a_client_that_hangs_up_cancels_its_run(void **state)
{
	struct fx *fx = *state;
	struct call c = {
		.method = "POST",
		.token = "token-alpha",
		.abort_early = false,
		.body = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
			"\"name\":\"run_python\",\"arguments\":{\"code\":\"x\"}," MODERN_META "}}"};
	struct call junk = {.method = "POST", .token = "token-alpha", .body = "{not json"};
	uint64_t end;
	pthread_t t;

	/* bytes that are no JSON: the session's parse error, as the answer */
	call_run(fx, &junk);
	assert_int_equal(junk.status, 400);
	assert_non_null(strstr(junk.resp, "-32700"));
	/* a run nobody answers: the client gives up after the stream opened */
	c.port = mcp_http_port(fx->h, 0);
	c.abort_early = true;
	assert_int_equal(pipe2(c.done, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(loop_add(fx->loop, c.done[0], EPOLLIN, on_done, &c, NULL), 0);
	assert_int_equal(pthread_create(&t, NULL, client, &c), 0);
	end = loop_now_ms() + WAIT_MS;
	while (fx->runs < 1 || !c.finished) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 100);
	}
	pthread_join(t, NULL);
	close(c.done[0]);
	close(c.done[1]);
	/* the stream's first bytes may be all it got: hang-up noticed, run cancelled */
	end = loop_now_ms() + WAIT_MS;
	while (fx->cancels == 0) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 100);
	}
	assert_int_equal(fx->cancels, 1);
	assert_null(fx->run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_legacy_session_is_bound_to_its_token, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_roles_see_their_own_tools_and_sessions_are_capped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_headers_must_agree_with_the_body, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_body_that_is_no_message_gets_400, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_run_answers_on_its_stream, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_client_that_hangs_up_cancels_its_run, setup,
						teardown),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	/* main's duty in the appliance: the library relies on it. */
	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
