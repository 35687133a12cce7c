#define _GNU_SOURCE
/* test_http_front.c: the HTTP front door (pkg/http/front.h) with a real
 * client: the loop runs in this thread, libcurl in a second one (or a raw
 * socket driven from the loop), and every wait is on something observable
 * (the client's done pipe, an owner hook, a socket's end). */
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <curl/curl.h>
#include <sodium.h>
#include <cmocka.h>

#include "http/front.h"
#include "http/header.h"
#include "log/log.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "certkit.h"

#define TOKEN	  "s3cret-token-abc"
#define BAD_TOKEN "wrong-token-xyz"
#define BODY_CAP  1024u
#define WAIT_MS	  15000u
#define RESP_MAX  8192u

static const char *const hosts[] = {"127.0.0.1", "localhost"};
static const char *const origins[] = {"http://localhost:3000"};
static const int principal_a = 1, principal_anon = 2;
static int log_fd = -1;

enum mode { ANSWER_LATER, ANSWER_NOW, STREAM, HOLD };

struct fx {
	struct loop *loop;
	struct http_front *f;
	struct http_front_config cfg;
	struct http_front_listen listen[1];
	struct loop_timer *timer;
	enum mode mode;
	struct http_req *held;
	unsigned requests, gone, step;
	const void *principal;
	char body[256];
	size_t body_len;
	char peer[64];
};

static const void *check_token(void *data, const unsigned char sha[32])
{
	unsigned char want[32];
	(void)data;
	crypto_hash_sha256(want, (const unsigned char *)TOKEN, strlen(TOKEN));
	return sodium_memcmp(want, sha, 32) == 0 ? &principal_a : NULL;
}

static void answer_json(struct http_req *r)
{
	static const char *const hdrs[] = {"X-Test: later", NULL};
	static const char json[] = "{\"ok\":true}";

	assert_int_equal(http_req_reply(r, 200, "application/json", json, strlen(json), hdrs), 0);
	/* answered: a second answer is refused */
	assert_int_equal(http_req_reply(r, 200, NULL, "", 0, NULL), -EALREADY);
}

static void on_request(struct http_req *r, void *data)
{
	struct fx *fx = data;
	size_t len;
	const char *b = http_req_body(r, &len);

	fx->requests++;
	fx->principal = http_req_principal(r);
	fx->body_len = len < sizeof(fx->body) ? len : sizeof(fx->body) - 1;
	memcpy(fx->body, b, fx->body_len);
	snprintf(fx->peer, sizeof(fx->peer), "%s", http_req_peer(r));
	if (fx->mode == ANSWER_NOW) {
		answer_json(r);
		return;
	}
	fx->held = r;
	fx->step = 0;
	if (fx->mode != HOLD)
		loop_timer_set(fx->timer, 1);
}

static void on_gone(struct http_req *r, void *data)
{
	struct fx *fx = data;

	assert_ptr_equal(r, fx->held);
	fx->held = NULL;
	fx->gone++;
}

static void on_timer(void *data)
{
	struct fx *fx = data;
	char ev[64];

	if (!fx->held)
		return;
	if (fx->mode == ANSWER_LATER) {
		answer_json(fx->held);
		fx->held = NULL;
		return;
	}
	/* STREAM: start, three events, end, each in its own round */
	if (fx->step == 0) {
		assert_int_equal(http_req_stream(fx->held, 200, NULL), 0);
	} else if (fx->step <= 3) {
		int n = snprintf(ev, sizeof(ev), "data: event %u\n\n", fx->step);

		assert_int_equal(http_req_stream_send(fx->held, ev, (size_t)n), 0);
	} else {
		assert_int_equal(http_req_stream_end(fx->held), 0);
		fx->held = NULL;
		return;
	}
	fx->step++;
	loop_timer_set(fx->timer, 1);
}

static void fx_config(struct fx *fx, const char *addr)
{
	fx->listen[0].addr = addr;
	fx->cfg = (struct http_front_config){
		.listen = fx->listen,
		.nlisten = 1,
		.path = "/mcp",
		.hosts = hosts,
		.nhosts = 2,
		.origins = origins,
		.norigins = 1,
		.max_connections = 16,
		.header_bytes = 8192,
		.body_bytes = BODY_CAP,
		.slow_s = 2,
		.token = check_token,
		.on_request = on_request,
		.on_gone = on_gone,
		.data = fx,
	};
}

static int fx_open(struct fx *fx)
{
	struct appl_err err = {0};

	if (!fx->loop) {
		fx->loop = loop_new(&err);
		assert_non_null(fx->loop);
		fx->timer = loop_timer_new(fx->loop, on_timer, fx, &err);
		assert_non_null(fx->timer);
	}
	return http_front_open(fx->loop, &fx->cfg, &fx->f, &err);
}

static void fx_close(struct fx *fx)
{
	http_front_close(fx->f);
	loop_timer_free(fx->timer);
	loop_free(fx->loop);
}

/* ---- the client ---------------------------------------------------------- */

struct call {
	const char *url, *method, *unix_path, *cainfo;
	const char *headers[8];
	const char *body;
	size_t body_len;
	bool chunked, no_body;
	long status;
	char resp[RESP_MAX];
	size_t resp_len;
	char head[RESP_MAX];
	size_t head_len;
	bool saw_100;
	size_t body_given;
	long connects;
	CURLcode rc;
	CURL *reuse; /* the handle of the call before, to see its connection kept */
	int done[2];
	bool finished;
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

	if (len >= 12 && strncmp(p, "HTTP/1.1 100", 12) == 0)
		c->saw_100 = true;
	memcpy(c->head + c->head_len, p, len < room ? len : room);
	c->head_len += len < room ? len : room;
	c->head[c->head_len] = '\0';
	return len;
}

static size_t on_read(char *buf, size_t sz, size_t n, void *data)
{
	struct call *c = data;
	size_t left = c->body_len - c->body_given, want = sz * n;

	if (want > left)
		want = left;
	memset(buf, 'x', want);
	c->body_given += want;
	return want;
}

static void *client(void *data)
{
	struct call *c = data;
	CURL *h = c->reuse ? c->reuse : curl_easy_init();
	struct curl_slist *hl = NULL;

	for (size_t i = 0; i < 8 && c->headers[i]; i++)
		hl = curl_slist_append(hl, c->headers[i]);
	curl_easy_setopt(h, CURLOPT_URL, c->url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_head);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (c->unix_path)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
	if (c->cainfo)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->cainfo);
	if (c->method && strcmp(c->method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		if (c->chunked || c->no_body) {
			curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
			curl_easy_setopt(h, CURLOPT_READDATA, c);
			if (!c->chunked)
				curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
						 (curl_off_t)c->body_len);
		} else {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, c->body ? c->body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE,
					 (long)(c->body ? strlen(c->body) : 0));
		}
	} else if (c->method && strcmp(c->method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (c->method) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
	}
	c->rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &c->connects);
	curl_slist_free_all(hl);
	if (!c->reuse)
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

/* Run the loop until *flag, failing after WAIT_MS (a bound, not a wait). */
static void run_until(struct loop *l, const bool *flag)
{
	uint64_t end = loop_now_ms() + WAIT_MS;

	while (!*flag) {
		assert_true(loop_now_ms() < end);
		loop_run_once(l, 100);
	}
}

static void call_start(struct fx *fx, struct call *c, pthread_t *t)
{
	assert_int_equal(pipe2(c->done, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(loop_add(fx->loop, c->done[0], EPOLLIN, on_done, c, NULL), 0);
	assert_int_equal(pthread_create(t, NULL, client, c), 0);
}

static void call_finish(struct fx *fx, struct call *c, pthread_t t)
{
	run_until(fx->loop, &c->finished);
	pthread_join(t, NULL);
	close(c->done[0]);
	close(c->done[1]);
}

static void call_run(struct fx *fx, struct call *c)
{
	pthread_t t;

	call_start(fx, c, &t);
	call_finish(fx, c, t);
}

static char url[128];

static const char *fx_url(struct fx *fx, const char *path)
{
	snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", http_front_port(fx->f, 0), path);
	return url;
}

#define AUTH   "Authorization: Bearer " TOKEN
#define JSON   "Content-Type: application/json"
#define ACCEPT "Accept: application/json, text/event-stream"

/* ---- tests --------------------------------------------------------------- */

static void test_post_answered_later(void **state)
{
	struct fx fx = {.mode = ANSWER_LATER};
	struct call c = {.method = "POST",
			 .headers = {AUTH, "Content-Type: application/json; charset=utf-8", ACCEPT},
			 .body = "{\"jsonrpc\":\"2.0\"}"};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	assert_true(http_front_port(fx.f, 0) > 0);
	c.url = fx_url(&fx, "/mcp");
	call_run(&fx, &c);
	assert_int_equal(c.rc, CURLE_OK);
	assert_int_equal(c.status, 200);
	assert_string_equal(c.resp, "{\"ok\":true}");
	assert_non_null(strcasestr(c.head, "content-type: application/json"));
	assert_non_null(strcasestr(c.head, "x-test: later"));
	assert_int_equal(fx.requests, 1);
	assert_int_equal(fx.gone, 0);
	assert_ptr_equal(fx.principal, &principal_a);
	assert_string_equal(fx.body, "{\"jsonrpc\":\"2.0\"}");
	assert_memory_equal(fx.peer, "127.0.0.1:", 10);
	fx_close(&fx);
}

static void test_stream_three_events(void **state)
{
	struct fx fx = {.mode = STREAM};
	struct call c = {.method = "GET", .headers = {AUTH, "Accept: text/event-stream"}};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	c.url = fx_url(&fx, "/mcp");
	call_run(&fx, &c);
	assert_int_equal(c.rc, CURLE_OK);
	assert_int_equal(c.status, 200);
	assert_string_equal(c.resp, "data: event 1\n\ndata: event 2\n\ndata: event 3\n\n");
	assert_non_null(strcasestr(c.head, "content-type: text/event-stream"));
	assert_non_null(strcasestr(c.head, "transfer-encoding: chunked"));
	assert_int_equal(fx.gone, 0);
	fx_close(&fx);
}

struct refusal {
	const char *name, *method, *path;
	const char *headers[6];
	unsigned status;
	const char *must_header; /* a header the refusal carries */
};

static const struct refusal refusals[] = {
	{"path", "POST", "/other", {AUTH, JSON, ACCEPT}, 404, NULL},
	{"path prefix", "POST", "/mcp/x", {AUTH, JSON, ACCEPT}, 404, NULL},
	{"method", "PUT", "/mcp", {AUTH, JSON, ACCEPT}, 405, "allow: get, post, delete"},
	{"host", "POST", "/mcp", {"Host: evil.example", AUTH, JSON, ACCEPT}, 403, NULL},
	{"host with our name as a prefix",
	 "POST",
	 "/mcp",
	 {"Host: localhost.evil.example", AUTH, JSON, ACCEPT},
	 403,
	 NULL},
	{"origin", "POST", "/mcp", {"Origin: http://evil.example", AUTH, JSON, ACCEPT}, 403, NULL},
	{"null origin", "POST", "/mcp", {"Origin: null", AUTH, JSON, ACCEPT}, 403, NULL},
	{"no token", "POST", "/mcp", {JSON, ACCEPT}, 401, "www-authenticate: bearer"},
	{"unknown token",
	 "POST",
	 "/mcp",
	 {"Authorization: Bearer " BAD_TOKEN, JSON, ACCEPT},
	 401,
	 "www-authenticate: bearer"},
	{"basic scheme", "POST", "/mcp", {"Authorization: Basic " TOKEN, JSON, ACCEPT}, 401, NULL},
	{"two tokens", "POST", "/mcp", {AUTH, AUTH, JSON, ACCEPT}, 401, NULL},
	{"content type", "POST", "/mcp", {AUTH, "Content-Type: text/plain", ACCEPT}, 415, NULL},
	{"no content type", "POST", "/mcp", {AUTH, "Content-Type:", ACCEPT}, 415, NULL},
	{"accept json only", "POST", "/mcp", {AUTH, JSON, "Accept: application/json"}, 406, NULL},
	{"accept q=0",
	 "POST",
	 "/mcp",
	 {AUTH, JSON, "Accept: application/json, text/event-stream;q=0"},
	 406,
	 NULL},
	{"get without sse", "GET", "/mcp", {AUTH, "Accept: application/json"}, 406, NULL},
};

static void test_refusals(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *rf = &refusals[i];
		struct call c = {.method = rf->method, .body = "{}"};

		memcpy(c.headers, rf->headers, sizeof(rf->headers));
		c.url = fx_url(&fx, rf->path);
		call_run(&fx, &c);
		print_message("refusal %s: %ld\n", rf->name, c.status);
		assert_int_equal(c.rc, CURLE_OK);
		assert_int_equal(c.status, rf->status);
		assert_non_null(strcasestr(c.head, "content-type: text/plain"));
		if (rf->must_header)
			assert_non_null(strcasestr(c.head, rf->must_header));
	}
	assert_int_equal(fx.requests, 0);
	/* the same request with everything right is served */
	{
		struct call c = {
			.method = "POST", .headers = {AUTH, JSON, "Accept: */*"}, .body = "{}"};

		c.url = fx_url(&fx, "/mcp");
		call_run(&fx, &c);
		assert_int_equal(c.status, 200);
		assert_int_equal(fx.requests, 1);
	}
	fx_close(&fx);
}

static void test_refusal_keeps_connection(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	struct call a = {.method = "GET", .headers = {AUTH, "Accept: text/event-stream"}};
	struct call b = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	CURL *h = curl_easy_init();
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	a.reuse = b.reuse = h;
	a.url = fx_url(&fx, "/nowhere");
	call_run(&fx, &a);
	assert_int_equal(a.status, 404);
	assert_int_equal(a.connects, 1);
	b.url = fx_url(&fx, "/mcp");
	call_run(&fx, &b);
	assert_int_equal(b.status, 200);
	/* no new connection: the refusal left the first one usable */
	assert_int_equal(b.connects, 0);
	/* nor does a refused POST, its body read and dropped */
	{
		struct call c = {.method = "POST", .headers = {JSON, ACCEPT}, .body = "{\"a\":1}"};
		struct call d = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};

		c.reuse = d.reuse = h;
		c.url = d.url = fx_url(&fx, "/mcp");
		call_run(&fx, &c);
		assert_int_equal(c.status, 401);
		call_run(&fx, &d);
		assert_int_equal(d.status, 200);
		assert_int_equal(d.connects, 0);
	}
	curl_easy_cleanup(h);
	fx_close(&fx);
}

static void test_body_caps(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	struct call big = {.method = "POST",
			   .headers = {AUTH, JSON, ACCEPT, "Expect: 100-continue"},
			   .no_body = true,
			   .body_len = BODY_CAP + 1};
	struct call chunked = {.method = "POST",
			       .headers = {AUTH, JSON, ACCEPT, "Transfer-Encoding: chunked"},
			       .chunked = true,
			       .body_len = 4 * BODY_CAP};
	struct call fits = {.method = "POST",
			    .headers = {AUTH, JSON, ACCEPT, "Transfer-Encoding: chunked"},
			    .chunked = true,
			    .body_len = BODY_CAP};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	big.url = chunked.url = fits.url = fx_url(&fx, "/mcp");
	call_run(&fx, &big);
	assert_int_equal(big.status, 413);
	/* refused before the body: no 100 Continue, no body byte sent */
	assert_false(big.saw_100);
	assert_int_equal(big.body_given, 0);
	call_run(&fx, &chunked);
	assert_int_equal(chunked.status, 413);
	assert_int_equal(fx.requests, 0);
	/* exactly the cap, chunked, is whole */
	call_run(&fx, &fits);
	assert_int_equal(fits.status, 200);
	assert_int_equal(fx.requests, 1);
	fx_close(&fx);
}

static void test_huge_headers(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	static char big[16 * 1024 + 16];
	struct call c = {.method = "POST", .headers = {AUTH, JSON, ACCEPT, big}, .body = "{}"};
	(void)state;
	memcpy(big, "X-Big: ", 7);
	memset(big + 7, 'a', sizeof(big) - 8);
	big[sizeof(big) - 1] = '\0';
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	c.url = fx_url(&fx, "/mcp");
	call_run(&fx, &c);
	print_message("huge headers: %ld\n", c.status);
	assert_int_equal(c.status, 431);
	assert_int_equal(fx.requests, 0);
	fx_close(&fx);
}

/* ---- raw sockets driven from the loop ----------------------------------- */

struct raw {
	int fd;
	const char *text;
	size_t sent, len;
	bool ended;
	uint64_t ended_ms;
	struct loop_timer *t;
};

static void raw_ended(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct raw *r = data;
	char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf));
	(void)events;
	if (n > 0 || (n < 0 && errno == EAGAIN))
		return;
	r->ended = true;
	r->ended_ms = loop_now_ms();
	loop_del(loop, fd);
}

static int raw_connect(unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

static void trickle(void *data)
{
	struct raw *r = data;

	if (r->ended || r->sent == r->len)
		return;
	if (write(r->fd, r->text + r->sent, 1) == 1)
		r->sent++;
	loop_timer_set(r->t, 1000);
}

static void test_slow_client_dropped(void **state)
{
	struct fx fx = {.mode = ANSWER_LATER};
	struct raw slow = {.text = "POST /mcp HTTP/1.1\r\nHost: localhost\r\n"
				   "Authorization: Bearer " TOKEN "\r\n\r\n"};
	struct call c = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	pthread_t t;
	uint64_t start;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	slow.len = strlen(slow.text);
	slow.fd = raw_connect(http_front_port(fx.f, 0));
	slow.t = loop_timer_new(fx.loop, trickle, &slow, NULL);
	assert_int_equal(loop_add(fx.loop, slow.fd, EPOLLIN | EPOLLRDHUP, raw_ended, &slow, NULL),
			 0);
	start = loop_now_ms();
	trickle(&slow);
	/* a normal client beside it is served meanwhile */
	c.url = fx_url(&fx, "/mcp");
	call_start(&fx, &c, &t);
	call_finish(&fx, &c, t);
	assert_int_equal(c.status, 200);
	assert_false(slow.ended);
	run_until(fx.loop, &slow.ended);
	print_message("slow client dropped after %llu ms, %zu bytes sent\n",
		      (unsigned long long)(slow.ended_ms - start), slow.sent);
	assert_true(slow.ended_ms - start >= 1900);
	assert_true(slow.sent < slow.len);
	assert_int_equal(fx.requests, 1);
	close(slow.fd);
	loop_timer_free(slow.t);
	fx_close(&fx);
}

static int raw_request(struct fx *fx)
{
	char req[256];
	int fd = raw_connect(http_front_port(fx->f, 0));
	int n = snprintf(req, sizeof(req),
			 "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
			 "Content-Type: application/json\r\nAccept: application/json, "
			 "text/event-stream\r\nContent-Length: 2\r\n\r\n{}",
			 TOKEN);

	assert_int_equal(write(fd, req, (size_t)n), n);
	return fd;
}

static const char *probe_word; /* what unready says */
static unsigned probe_auths;   /* token checks told to on_auth */

static const char *unready(void *data)
{
	(void)data;
	return probe_word;
}

static void count_auth(void *data, const void *principal, const char *peer)
{
	(void)data;
	(void)principal;
	(void)peer;
	probe_auths++;
}

/* The probes come through the same door: they wait with the rest. */
static void test_connection_limit(void **state)
{
	struct fx fx = {.mode = HOLD};
	struct call over = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	struct call probe = {.method = "GET"};
	pthread_t t, tp;
	char probe_url[128];
	int fd;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.max_connections = 1;
	fx.cfg.unready = unready;
	assert_int_equal(fx_open(&fx), 0);
	/* one connection, its request held by the owner, takes the only place */
	fd = raw_request(&fx);
	{
		uint64_t end = loop_now_ms() + WAIT_MS;

		while (!fx.requests) {
			assert_true(loop_now_ms() < end);
			loop_run_once(fx.loop, 100);
		}
	}
	/* over the limit MHD accepts nothing: the next client waits in the
	 * backlog, unserved for as long as we look (half a second of rounds) */
	over.url = fx_url(&fx, "/mcp");
	call_start(&fx, &over, &t);
	snprintf(probe_url, sizeof(probe_url), "http://127.0.0.1:%u/healthz",
		 http_front_port(fx.f, 0));
	probe.url = probe_url; /* fx_url's buffer is over's */
	call_start(&fx, &probe, &tp);
	for (uint64_t end = loop_now_ms() + 500; loop_now_ms() < end;)
		loop_run_once(fx.loop, 50);
	assert_false(over.finished);
	assert_false(probe.finished);
	assert_int_equal(fx.requests, 1);
	/* once the place is free, they are served */
	fx.mode = ANSWER_NOW;
	close(fd);
	call_finish(&fx, &over, t);
	call_finish(&fx, &probe, tp);
	assert_int_equal(fx.gone, 1);
	assert_int_equal(over.status, 200);
	assert_int_equal(probe.status, 200);
	assert_int_equal(fx.requests, 2);
	fx_close(&fx);
}

/* Send req[0..len) on fd and read until the status line of its answer
 * is in; the status. */
static unsigned raw_status(struct fx *fx, int fd, const char *req, size_t len)
{
	char got[1024];
	size_t n = 0;
	uint64_t end = loop_now_ms() + WAIT_MS;
	unsigned status = 0;

	assert_int_equal(write(fd, req, len), (ssize_t)len);
	while (!memmem(got, n, "\r\n", 2)) {
		ssize_t k;

		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
		k = read(fd, got + n, sizeof(got) - 1 - n);
		if (k > 0)
			n += (size_t)k;
		else
			assert_true(k < 0 && errno == EAGAIN);
	}
	got[n] = '\0';
	assert_int_equal(sscanf(got, "HTTP/1.1 %u", &status), 1);
	/* the answer's body, if any, is read with the next request's head */
	return status;
}

/* Send a POST to target (tlen bytes: it may hold a NUL) on fd; the
 * status of its answer. */
static unsigned raw_target(struct fx *fx, int fd, const char *target, size_t tlen)
{
	static const char tail[] = " HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " TOKEN
				   "\r\nContent-Type: application/json\r\nAccept: "
				   "application/json, text/event-stream\r\nContent-Length: "
				   "2\r\n\r\n{}";
	char req[512];
	size_t len = 5 + tlen + sizeof(tail) - 1;

	assert_true(len < sizeof(req));
	memcpy(req, "POST ", 5);
	memcpy(req + 5, target, tlen);
	memcpy(req + 5 + tlen, tail, sizeof(tail) - 1);
	return raw_status(fx, fd, req, len);
}

/* The endpoint is the target as the client sent it, byte for byte: MHD
 * decodes %xx and cuts the query before the access handler sees the URL,
 * so judged on that URL each of these would reach the owner as "/mcp". */
static void test_path_is_the_target_as_sent(void **state)
{
	static const struct {
		const char *target;
		size_t len;
	} refused[] = {
#define T(s) {s, sizeof(s) - 1}
		T("/mcp%00"),	T("/mcp%00x"), T("/mcp%2F"),
		T("/mcp%2f"),	T("/%6dcp"),   T("/%6Dcp"),
		T("/mcp%20"),	T("/MCP"),     T("/Mcp"),
		T("/mcp/"),	T("//mcp"),    T("/./mcp"),
		T("/x/../mcp"), T("/mcp?"),    T("/mcp?x"),
		T("/mcp?x=1"),	T("/mcp#x"),   T("/mcp;x"),
		T("mcp"),	T("*"),	       T("http://localhost/mcp"),
		T("/mcp\0"),	T("/mcp\0/x"),
#undef T
	};
	struct fx fx = {.mode = ANSWER_NOW};
	int fd;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		unsigned st;

		fd = raw_connect(http_front_port(fx.f, 0));
		st = raw_target(&fx, fd, refused[i].target, refused[i].len);
		print_message("target %zu (%zu bytes): %u\n", i, refused[i].len, st);
		if (st != 404 && st != 400)
			fail_msg("target %zu: %u, not refused", i, st);
		close(fd);
	}
	assert_int_equal(fx.requests, 0);
	/* the verdict is each request's own on a kept connection: refused,
	 * served, refused */
	fd = raw_connect(http_front_port(fx.f, 0));
	assert_int_equal(raw_target(&fx, fd, "/mcp%00", 7), 404);
	assert_int_equal(raw_target(&fx, fd, "/mcp", 4), 200);
	assert_int_equal(raw_target(&fx, fd, "/mcp?x", 6), 404);
	close(fd);
	assert_int_equal(fx.requests, 1);
	fx_close(&fx);
}

/* ---- the probes ---------------------------------------------------------- */

static void fx_probes(struct fx *fx)
{
	fx_config(fx, "127.0.0.1:0");
	fx->cfg.unready = unready;
	fx->cfg.on_auth = count_auth;
	assert_int_equal(fx_open(fx), 0);
}

/* One request of method to path with header (may be NULL): c holds the
 * answer. */
static void probe(struct fx *fx, struct call *c, const char *method, const char *path,
		  const char *header)
{
	*c = (struct call){.method = method, .headers = {header}};
	c->url = fx_url(fx, path);
	call_run(fx, c);
	assert_int_equal(c->rc, CURLE_OK);
}

/* /healthz and /readyz: answered by the front itself, without a token
 * (none is checked, none told to on_auth), never handed to the owner;
 * GET or HEAD from an allowed Host and Origin only. Without cfg.unready
 * they are paths like any other: 404. */
static void test_probes_answered_by_the_front(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	struct call c;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	probe(&fx, &c, "GET", "/healthz", NULL);
	assert_int_equal(c.status, 404);
	fx_close(&fx);

	fx = (struct fx){.mode = ANSWER_NOW};
	probe_word = NULL;
	probe_auths = 0;
	fx_probes(&fx);
	probe(&fx, &c, "GET", "/healthz", NULL);
	assert_int_equal(c.status, 200);
	assert_string_equal(c.resp, "ok\n");
	assert_non_null(strcasestr(c.head, "content-type: text/plain"));
	assert_non_null(strcasestr(c.head, "cache-control: no-store"));
	probe(&fx, &c, "GET", "/readyz", NULL);
	assert_int_equal(c.status, 200);
	assert_string_equal(c.resp, "ready\n");
	probe_word = "servers";
	probe(&fx, &c, "GET", "/readyz", NULL);
	assert_int_equal(c.status, 503);
	assert_string_equal(c.resp, "servers\n");
	probe(&fx, &c, "HEAD", "/readyz", NULL);
	assert_int_equal(c.status, 503);
	assert_int_equal(c.resp_len, 0);
	probe(&fx, &c, "GET", "/healthz", "Authorization: Bearer " BAD_TOKEN);
	assert_int_equal(c.status, 200);
	probe(&fx, &c, "POST", "/healthz", NULL);
	assert_int_equal(c.status, 405);
	assert_non_null(strcasestr(c.head, "allow: get, head"));
	probe(&fx, &c, "DELETE", "/readyz", NULL);
	assert_int_equal(c.status, 405);
	probe(&fx, &c, "GET", "/readyz", "Host: evil.example");
	assert_int_equal(c.status, 403);
	probe(&fx, &c, "GET", "/healthz", "Origin: http://evil.example");
	assert_int_equal(c.status, 403);
	probe(&fx, &c, "GET", "/readyz?x", NULL);
	assert_int_equal(c.status, 404);
	assert_int_equal(fx.requests, 0);
	assert_int_equal(probe_auths, 0);
	/* the endpoint still asks for its token */
	probe(&fx, &c, "GET", "/mcp", "Accept: text/event-stream");
	assert_int_equal(c.status, 401);
	assert_int_equal(probe_auths, 1);
	fx_close(&fx);
}

/* ---- OAuth: the bearer hook and the resource's metadata ---------------------- */

static const int principal_jwt = 3;
static unsigned bearer_calls;
static char bearer_seen[64];

/* "jwt-ok" is a principal, "jwt-role" a valid token for nothing here,
 * anything else not a token. */
static const void *check_bearer(void *data, const char *tok, size_t len, unsigned *status)
{
	(void)data;
	bearer_calls++;
	snprintf(bearer_seen, sizeof(bearer_seen), "%.*s", (int)len, tok);
	*status = len == 8 && memcmp(tok, "jwt-role", 8) == 0 ? 403 : 401;
	return len == 6 && memcmp(tok, "jwt-ok", 6) == 0 ? &principal_jwt : NULL;
}

static const char resource_doc[] = "{\"resource\":\"http://127.0.0.1/mcp\"}";
static const struct http_front_resource the_resource = {
	.challenge =
		"resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\"",
	.doc = resource_doc,
	.doc_len = sizeof(resource_doc) - 1,
	.paths = {"/.well-known/oauth-protected-resource/mcp",
		  "/.well-known/oauth-protected-resource"}};
static bool resource_on;

static const struct http_front_resource *resource_now(void *data)
{
	(void)data;
	return resource_on ? &the_resource : NULL;
}

/* A static token is found by its digest and never reaches the bearer
 * hook; any other goes there whole; the hook's 401 or 403 is the answer,
 * with the challenge of RFC 6750 and 9728. The metadata is served like a
 * probe (no token, Host checked), and only while the owner has some. */
static void test_bearer_hook_and_resource_metadata(void **state)
{
#define RM "resource_metadata=\"http://127.0.0.1/.well-known/oauth-protected-resource/mcp\""
	struct fx fx = {.mode = ANSWER_NOW};
	struct call c;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.bearer = check_bearer;
	fx.cfg.resource = resource_now;
	resource_on = true;
	bearer_calls = 0;
	assert_int_equal(fx_open(&fx), 0);
	probe(&fx, &c, "GET", "/mcp", "Authorization: Bearer jwt-ok");
	assert_int_equal(c.status, 200);
	assert_ptr_equal(fx.principal, &principal_jwt);
	probe(&fx, &c, "POST", "/mcp", "Authorization: Bearer " TOKEN);
	assert_int_equal(bearer_calls, 1);
	assert_string_equal(bearer_seen, "jwt-ok");
	probe(&fx, &c, "GET", "/mcp", "Authorization: Bearer jwt-bad");
	assert_int_equal(c.status, 401);
	assert_non_null(strstr(c.head, "WWW-Authenticate: Bearer error=\"invalid_token\", " RM));
	probe(&fx, &c, "GET", "/mcp", "Authorization: Bearer jwt-role");
	assert_int_equal(c.status, 403);
	assert_non_null(
		strstr(c.head, "WWW-Authenticate: Bearer error=\"insufficient_scope\", " RM));
	probe(&fx, &c, "GET", "/mcp", NULL);
	assert_int_equal(c.status, 401);
	assert_non_null(strstr(c.head, "WWW-Authenticate: Bearer " RM "\r\n"));
	assert_int_equal(bearer_calls, 3);
	/* a Host refusal is 403 with no challenge */
	probe(&fx, &c, "GET", "/mcp", "Host: evil.example");
	assert_int_equal(c.status, 403);
	assert_null(strcasestr(c.head, "www-authenticate"));
	for (size_t i = 0; i < 2; i++) {
		probe(&fx, &c, "GET", the_resource.paths[i], NULL);
		assert_int_equal(c.status, 200);
		assert_string_equal(c.resp, resource_doc);
		assert_non_null(strcasestr(c.head, "content-type: application/json"));
		probe(&fx, &c, "POST", the_resource.paths[i], NULL);
		assert_int_equal(c.status, 405);
		probe(&fx, &c, "GET", the_resource.paths[i], "Host: evil.example");
		assert_int_equal(c.status, 403);
	}
	probe(&fx, &c, "GET", "/.well-known/oauth-protected-resource/", NULL);
	assert_int_equal(c.status, 404);
	/* without metadata now: the paths are 404, the challenge bare */
	resource_on = false;
	probe(&fx, &c, "GET", the_resource.paths[0], NULL);
	assert_int_equal(c.status, 404);
	probe(&fx, &c, "GET", "/mcp", NULL);
	assert_non_null(strstr(c.head, "WWW-Authenticate: Bearer\r\n"));
	assert_int_equal(fx.requests, 1);
	fx_close(&fx);
#undef RM
}

/* A probe's body is held for nobody: 413, whether announced or chunked.
 * A probe answered leaves its connection open for the next request. */
static void test_probe_body_and_kept_connection(void **state)
{
	static const char sized[] = "GET /readyz HTTP/1.1\r\nHost: localhost\r\n"
				    "Content-Length: 2\r\n\r\n{}";
	static const char chunked[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
				      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
	static const char plain[] = "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n";
	struct fx fx = {.mode = ANSWER_NOW};
	int fd;
	(void)state;
	probe_word = NULL;
	fx_probes(&fx);
	fd = raw_connect(http_front_port(fx.f, 0));
	assert_int_equal(raw_status(&fx, fd, sized, sizeof(sized) - 1), 413);
	close(fd);
	fd = raw_connect(http_front_port(fx.f, 0));
	assert_int_equal(raw_status(&fx, fd, chunked, sizeof(chunked) - 1), 413);
	close(fd);
	fd = raw_connect(http_front_port(fx.f, 0));
	assert_int_equal(raw_status(&fx, fd, plain, sizeof(plain) - 1), 200);
	assert_int_equal(raw_target(&fx, fd, "/mcp", 4), 200);
	assert_int_equal(raw_status(&fx, fd, plain, sizeof(plain) - 1), 200);
	close(fd);
	assert_int_equal(fx.requests, 1);
	fx_close(&fx);
}

static void test_client_gone_before_answer(void **state)
{
	struct fx fx = {.mode = HOLD};
	char req[256];
	int fd, n;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	fd = raw_connect(http_front_port(fx.f, 0));
	n = snprintf(req, sizeof(req),
		     "POST /mcp HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer %s\r\n"
		     "Content-Type: application/json\r\nAccept: application/json, "
		     "text/event-stream\r\nContent-Length: 2\r\n\r\n{}",
		     TOKEN);
	assert_int_equal(write(fd, req, (size_t)n), n);
	while (!fx.requests)
		loop_run_once(fx.loop, 100);
	assert_non_null(fx.held);
	close(fd);
	{
		uint64_t end = loop_now_ms() + WAIT_MS;

		while (!fx.gone) {
			assert_true(loop_now_ms() < end);
			loop_run_once(fx.loop, 100);
		}
	}
	assert_int_equal(fx.gone, 1);
	assert_null(fx.held);
	fx_close(&fx);
}

static void test_close_ends_held_requests(void **state)
{
	struct fx fx = {.mode = HOLD};
	struct call c = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	pthread_t t;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	c.url = fx_url(&fx, "/mcp");
	call_start(&fx, &c, &t);
	while (!fx.requests)
		loop_run_once(fx.loop, 100);
	http_front_close(fx.f);
	fx.f = NULL;
	assert_int_equal(fx.gone, 1);
	run_until(fx.loop, &c.finished);
	pthread_join(t, NULL);
	close(c.done[0]);
	close(c.done[1]);
	assert_int_not_equal(c.rc, CURLE_OK);
	fx_close(&fx);
}

static void test_unix_listener(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	char dir[] = "/tmp/test_http_front.XXXXXX", path[128], addr[160];
	struct call c = {.method = "POST", .headers = {JSON, ACCEPT}, .body = "{}"};
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	snprintf(addr, sizeof(addr), "unix:%s", path);
	/* a regular file at the path is never removed */
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	fx_config(&fx, addr);
	fx.cfg.anonymous = &principal_anon;
	assert_int_equal(fx_open(&fx), -EEXIST);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	unlink(path);
	/* a stale socket left behind is */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(sun.sun_path, path, strlen(path) + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	close(fd);
	assert_int_equal(fx_open(&fx), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0660);
	assert_int_equal(http_front_port(fx.f, 0), 0);
	/* no token from a unix peer: the anonymous principal */
	c.url = "http://localhost/mcp";
	c.unix_path = path;
	call_run(&fx, &c);
	assert_int_equal(c.status, 200);
	assert_ptr_equal(fx.principal, &principal_anon);
	assert_string_equal(fx.peer, "unix");
	fx_close(&fx);
	assert_int_not_equal(stat(path, &st), 0);
	rmdir(dir);
}

static void test_anonymous_needs_no_token_but_checks_one(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	struct call none = {.method = "POST", .headers = {JSON, ACCEPT}, .body = "{}"};
	struct call bad = {.method = "POST",
			   .headers = {"Authorization: Bearer " BAD_TOKEN, JSON, ACCEPT},
			   .body = "{}"};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.anonymous = &principal_anon;
	assert_int_equal(fx_open(&fx), 0);
	none.url = bad.url = fx_url(&fx, "/mcp");
	call_run(&fx, &none);
	assert_int_equal(none.status, 200);
	assert_ptr_equal(fx.principal, &principal_anon);
	/* a token sent is a token checked, loopback or not */
	call_run(&fx, &bad);
	assert_int_equal(bad.status, 401);
	fx_close(&fx);
}

/* A page (cfg.page): GET and HEAD, any Accept or none; the rest refused
 * as the endpoint refuses it. */
static void test_page_get_and_head_only(void **state)
{
	static const struct {
		const char *method, *path;
		long status;
	} cases[] = {
		{"GET", "/metrics", 200},    {"HEAD", "/metrics", 200}, {"POST", "/metrics", 405},
		{"DELETE", "/metrics", 405}, {"PUT", "/metrics", 405},	{"GET", "/metrics/x", 404},
		{"GET", "/mcp", 404},
	};
	struct fx fx = {.mode = ANSWER_NOW};
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.path = "/metrics";
	fx.cfg.page = true;
	fx.cfg.token = NULL;
	fx.cfg.anonymous = &principal_anon;
	assert_int_equal(fx_open(&fx), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct call c = {.method = cases[i].method, .headers = {JSON}, .body = "{}"};

		c.url = fx_url(&fx, cases[i].path);
		call_run(&fx, &c);
		print_message("page %s %s: %ld\n", cases[i].method, cases[i].path, c.status);
		assert_int_equal(c.rc, CURLE_OK);
		assert_int_equal(c.status, cases[i].status);
		if (c.status == 405)
			assert_non_null(strcasestr(c.head, "allow: get, head"));
		if (strcmp(cases[i].method, "HEAD") == 0)
			assert_int_equal(c.resp_len, 0);
		else if (c.status == 200)
			assert_string_equal(c.resp, "{\"ok\":true}");
	}
	assert_int_equal(fx.requests, 2);
	assert_ptr_equal(fx.principal, &principal_anon);
	fx_close(&fx);
}

/* The endpoint's answers are counted by status, a page's are not. */
static void test_answers_counted_by_status(void **state)
{
	struct fx fx = {.mode = ANSWER_NOW};
	struct call ok = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	struct call lost = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	struct appl_err err = {0};
	char *text;
	size_t len;
	(void)state;
	metrics_reset();
	fx_config(&fx, "127.0.0.1:0");
	assert_int_equal(fx_open(&fx), 0);
	ok.url = fx_url(&fx, "/mcp");
	call_run(&fx, &ok);
	lost.url = fx_url(&fx, "/elsewhere");
	call_run(&fx, &lost);
	assert_int_equal(ok.status, 200);
	assert_int_equal(lost.status, 404);
	assert_int_equal(metrics_render(&text, &len, &err), 0);
	assert_non_null(strstr(text, "appliance_http_requests_total{code=\"200\"} 1\n"));
	assert_non_null(strstr(text, "appliance_http_requests_total{code=\"404\"} 1\n"));
	free(text);
	fx_close(&fx);
	metrics_reset();
}

static void test_tls(void **state)
{
	struct fx fx = {.mode = ANSWER_LATER};
	char dir[] = "/tmp/test_http_tls.XXXXXX", cert[128], key[128], u[128];
	struct call c = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	struct call plain = {.method = "POST", .headers = {AUTH, JSON, ACCEPT}, .body = "{}"};
	char *cert_pem, *key_pem;
	(void)state;
	assert_non_null(mkdtemp(dir));
	make_cert(dir, cert, key, sizeof(cert));
	cert_pem = slurp(cert);
	key_pem = slurp(key);
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.tls_cert_pem = cert_pem;
	fx.cfg.tls_key_pem = key_pem;
	assert_int_equal(fx_open(&fx), 0);
	snprintf(u, sizeof(u), "https://localhost:%u/mcp", http_front_port(fx.f, 0));
	c.url = u;
	c.cainfo = cert;
	call_run(&fx, &c);
	assert_int_equal(c.rc, CURLE_OK);
	assert_int_equal(c.status, 200);
	assert_string_equal(c.resp, "{\"ok\":true}");
	/* plain HTTP to the TLS port gets no answer */
	plain.url = fx_url(&fx, "/mcp");
	call_run(&fx, &plain);
	assert_int_not_equal(plain.status, 200);
	assert_int_equal(fx.requests, 1);
	fx_close(&fx);
	unlink(cert);
	unlink(key);
	rmdir(dir);
	free(cert_pem);
	free(key_pem);
}

static void test_bad_config(void **state)
{
	struct fx fx = {0};
	struct appl_err err = {0};
	struct http_front *f;
	(void)state;
	fx_config(&fx, "127.0.0.1:0");
	fx.loop = loop_new(&err);
	fx.cfg.path = "mcp";
	assert_int_equal(http_front_open(fx.loop, &fx.cfg, &f, &err), -EINVAL);
	fx_config(&fx, "not-an-address");
	assert_int_equal(http_front_open(fx.loop, &fx.cfg, &f, &err), -EINVAL);
	fx_config(&fx, "127.0.0.1:99999");
	assert_int_equal(http_front_open(fx.loop, &fx.cfg, &f, &err), -EINVAL);
	fx_config(&fx, "127.0.0.1:0");
	fx.cfg.tls_cert_pem = "not a certificate";
	fx.cfg.tls_key_pem = "not a key";
	assert_int_not_equal(http_front_open(fx.loop, &fx.cfg, &f, &err), 0);
	loop_free(fx.loop);
}

/* Last: every test above sent the token; none of it reached the log. */
static void test_no_token_in_log(void **state)
{
	static char buf[1 << 20];
	ssize_t n;
	(void)state;
	n = pread(log_fd, buf, sizeof(buf) - 1, 0);
	assert_true(n > 0);
	buf[n] = '\0';
	/* the refusals were logged, so the check looked at real lines */
	assert_non_null(strstr(buf, "http: refused 401"));
	assert_null(strstr(buf, TOKEN));
	assert_null(strstr(buf, BAD_TOKEN));
}

/* ---- the pure judges ---------------------------------------------------- */

static void test_headers_pure(void **state)
{
	const char *tok;
	size_t len;
	static const char *const l[] = {"localhost", "[::1]"};
	(void)state;
	assert_int_equal(http_header_bearer("Bearer abc", 10, &tok, &len), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(tok, "abc", 3);
	assert_int_equal(http_header_bearer("bearer  a.b-c~/+==  ", 20, &tok, &len), 0);
	assert_int_equal(len, 10);
	assert_int_equal(http_header_bearer("Bearer ", 7, &tok, &len), -EINVAL);
	assert_int_equal(http_header_bearer("Bearer a b", 10, &tok, &len), -EINVAL);
	assert_int_equal(http_header_bearer("Bearer a=b", 10, &tok, &len), -EINVAL);
	assert_int_equal(http_header_bearer("Basic abc", 9, &tok, &len), -EINVAL);
	assert_int_equal(http_header_bearer("Bearerabc", 9, &tok, &len), -EINVAL);
	assert_int_equal(http_header_bearer("Bearer a\0b", 10, &tok, &len), -EINVAL);
	assert_true(http_header_host_allowed("LOCALHOST:8080", 14, l, 2));
	assert_true(http_header_host_allowed("localhost", 9, l, 2));
	assert_true(http_header_host_allowed("[::1]:1", 7, l, 2));
	assert_false(http_header_host_allowed("localhost:", 10, l, 2));
	assert_false(http_header_host_allowed("localhost:123456", 16, l, 2));
	assert_false(http_header_host_allowed("localhost:80:80", 15, l, 2));
	assert_false(http_header_host_allowed("localhost.evil", 14, l, 2));
	assert_false(http_header_host_allowed("local", 5, l, 2));
	assert_false(http_header_host_allowed("[::1", 4, l, 2));
	assert_false(http_header_host_allowed("", 0, l, 2));
	{
		/* an entry with a port is the whole value as sent */
		static const char *const ported[] = {"example.test:8443", "[::1]:9"};

		assert_true(http_header_host_allowed("EXAMPLE.test:8443", 17, ported, 2));
		assert_false(http_header_host_allowed("example.test:8444", 17, ported, 2));
		assert_false(http_header_host_allowed("example.test", 12, ported, 2));
		assert_true(http_header_host_allowed("[::1]:9", 7, ported, 2));
		assert_false(http_header_host_allowed("[::1]:90", 8, ported, 2));
	}
	assert_true(http_header_origin_allowed("HTTP://LOCALHOST:3000", 21, origins, 1));
	assert_false(http_header_origin_allowed("http://localhost:3001", 21, origins, 1));
	assert_true(http_header_content_json("application/json", 16));
	assert_true(http_header_content_json(" Application/JSON ; charset=utf-8", 33));
	assert_false(http_header_content_json("application/json-seq", 20));
	assert_false(http_header_content_json("text/json", 9));
	assert_int_equal(http_header_accept("*/*", 3), HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE);
	assert_int_equal(http_header_accept("application/*, text/event-stream", 32),
			 HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE);
	assert_int_equal(http_header_accept("application/json;q=0.000, text/*;q=0.5", 38),
			 HTTP_ACCEPT_SSE);
	assert_int_equal(http_header_accept("application/json;q=0.01", 23), HTTP_ACCEPT_JSON);
	assert_int_equal(http_header_accept("image/png", 9), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_headers_pure),
		cmocka_unit_test(test_post_answered_later),
		cmocka_unit_test(test_stream_three_events),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_refusal_keeps_connection),
		cmocka_unit_test(test_body_caps),
		cmocka_unit_test(test_huge_headers),
		cmocka_unit_test(test_slow_client_dropped),
		cmocka_unit_test(test_connection_limit),
		cmocka_unit_test(test_path_is_the_target_as_sent),
		cmocka_unit_test(test_probes_answered_by_the_front),
		cmocka_unit_test(test_bearer_hook_and_resource_metadata),
		cmocka_unit_test(test_probe_body_and_kept_connection),
		cmocka_unit_test(test_client_gone_before_answer),
		cmocka_unit_test(test_close_ends_held_requests),
		cmocka_unit_test(test_unix_listener),
		cmocka_unit_test(test_anonymous_needs_no_token_but_checks_one),
		cmocka_unit_test(test_page_get_and_head_only),
		cmocka_unit_test(test_answers_counted_by_status),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_no_token_in_log),
	};

	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() < 0 || curl_global_init(CURL_GLOBAL_DEFAULT))
		return 1;
	log_fd = memfd_create("log", MFD_CLOEXEC);
	log_setup(log_fd, LOG_DEBUG);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
