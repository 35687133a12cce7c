#define _GNU_SOURCE
/* test_http_client.c: HTTP requests on the loop (pkg/http/client.h)
 * against a real server: libmicrohttpd on loopback in its own thread,
 * each path a behaviour (an answer, a huge body, a huge head, a redirect,
 * a server that never answers). Every wait is on a done hook having run. */
#include <errno.h>
#include <microhttpd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "http/client.h"
#include "loop/loop.h"
#include "certkit.h"

#define WAIT_MS 15000u

struct fx {
	struct loop *loop;
	struct http_client *c;
	struct MHD_Daemon *d;
	unsigned port;
	int hits; /* requests the server saw */
};

/* What one call saw. */
struct seen {
	bool done;
	int rc;
	long status;
	char type[64], echo[256];
	char body[256];
	size_t len;
};

static ssize_t stall_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)cls;
	(void)pos;
	(void)buf;
	(void)max;
	usleep(200 * 1000); /* a server that never gets round to sending */
	return 0;
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *conn, const char *url,
			     const char *method, const char *version, const char *data,
			     size_t *size, void **state)
{
	struct fx *fx = cls;
	struct MHD_Response *r;
	enum MHD_Result ok;
	unsigned status = 200;
	const char *auth;
	static char big[1 << 20], echo[300];
	(void)method;
	(void)version;
	(void)data;

	if (!*state) { /* the head: come back for the body */
		*state = fx;
		return MHD_YES;
	}
	if (*size) {
		*size = 0;
		return MHD_YES;
	}
	__atomic_add_fetch(&fx->hits, 1, __ATOMIC_SEQ_CST);
	if (strcmp(url, "/big") == 0) {
		memset(big, 'x', sizeof(big));
		r = MHD_create_response_from_buffer(sizeof(big), big, MHD_RESPMEM_PERSISTENT);
	} else if (strcmp(url, "/stall") == 0) {
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16, stall_reader, NULL,
						      NULL);
	} else {
		auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
		snprintf(echo, sizeof(echo), "{\"auth\":\"%s\"}", auth ? auth : "");
		r = MHD_create_response_from_buffer(strlen(echo), echo, MHD_RESPMEM_MUST_COPY);
		MHD_add_response_header(r, "Content-Type", "application/json");
		if (strcmp(url, "/redirect") == 0) {
			status = 302;
			MHD_add_response_header(r, "Location", "/elsewhere");
		} else if (strcmp(url, "/bighead") == 0) {
			char *v = malloc(40000);

			memset(v, 'h', 39999);
			v[39999] = '\0';
			MHD_add_response_header(r, "X-Huge", v);
			free(v);
		}
	}
	ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));
	const union MHD_DaemonInfo *info;

	fx->loop = loop_new(NULL);
	assert_non_null(fx->loop);
	assert_int_equal(http_client_new(fx->loop, &fx->c, NULL), 0);
	fx->d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
				 NULL, NULL, serve, fx, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				 (size_t)(256 * 1024), MHD_OPTION_END);
	assert_non_null(fx->d);
	info = MHD_get_daemon_info(fx->d, MHD_DAEMON_INFO_BIND_PORT);
	fx->port = info->port;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	http_client_free(fx->c);
	loop_free(fx->loop);
	MHD_stop_daemon(fx->d);
	free(fx);
	return 0;
}

static int on_head(void *ctx, const struct http_head *h)
{
	struct seen *s = ctx;
	const char *t = http_head_get(h, "content-type");

	s->status = h->status;
	snprintf(s->type, sizeof(s->type), "%s", t ? t : "");
	return 0;
}

static int on_data(void *ctx, const char *buf, size_t len)
{
	struct seen *s = ctx;
	size_t room = sizeof(s->body) - 1 - s->len;

	memcpy(s->body + s->len, buf, len < room ? len : room);
	s->len += len < room ? len : room;
	s->body[s->len] = '\0';
	return 0;
}

static void done(void *ctx, int rc, const char *why)
{
	struct seen *s = ctx;

	assert_non_null(why);
	s->done = true;
	s->rc = rc;
}

static const struct http_call_hooks hooks = {.on_head = on_head, .on_data = on_data, .done = done};

/* Start req at path (NULL: req's url as it is) and run the loop until done. */
static void run(struct fx *fx, struct http_request *req, const char *path, struct seen *s)
{
	char url[128];
	struct http_call *call;
	uint64_t end = loop_now_ms() + WAIT_MS;

	if (path) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", fx->port, path);
		req->url = url;
	}
	memset(s, 0, sizeof(*s));
	assert_int_equal(http_call_start(fx->c, req, &hooks, s, &call, NULL), 0);
	while (!s->done) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 100);
	}
	assert_int_equal(http_client_calls(fx->c), 0);
}

static void test_a_post_sends_its_headers_and_reads_the_answer(void **state)
{
	struct fx *fx = *state;
	static const char *const hdr[] = {"Authorization: Bearer t0k",
					  "Content-Type: application/json", NULL};
	struct http_request req = {
		.method = "POST", .headers = hdr, .body = "{\"a\":1}", .body_len = 7};
	struct seen s;

	/* a proxy named in the environment is not used */
	setenv("http_proxy", "http://127.0.0.1:1", 1);
	setenv("ALL_PROXY", "http://127.0.0.1:1", 1);
	run(fx, &req, "/json", &s);
	unsetenv("http_proxy");
	unsetenv("ALL_PROXY");
	assert_int_equal(s.rc, 0);
	assert_int_equal(s.status, 200);
	assert_string_equal(s.type, "application/json");
	assert_string_equal(s.body, "{\"auth\":\"Bearer t0k\"}");
}

static void test_redirects_are_not_followed(void **state)
{
	struct fx *fx = *state;
	struct http_request req = {.method = "GET"};
	struct seen s;

	run(fx, &req, "/redirect", &s);
	assert_int_equal(s.rc, 0);
	assert_int_equal(s.status, 302);
	assert_int_equal(fx->hits, 1); /* and /elsewhere was never asked for */
}

static void test_a_body_past_its_cap_is_cut_off(void **state)
{
	struct fx *fx = *state;
	struct http_request req = {.method = "GET", .body_max = 64 * 1024};
	struct seen s;

	run(fx, &req, "/big", &s);
	assert_int_equal(s.rc, -EMSGSIZE);
	req.body_max = 2u << 20; /* with room, it comes whole */
	run(fx, &req, "/big", &s);
	assert_int_equal(s.rc, 0);
}

static void test_a_head_past_its_cap_is_cut_off(void **state)
{
	struct fx *fx = *state;
	struct http_request req = {.method = "GET"};
	struct seen s;

	run(fx, &req, "/bighead", &s);
	assert_int_equal(s.rc, -EMSGSIZE);
	assert_int_equal(s.status, 0); /* on_head never ran */
}

static void test_timeouts_and_refusals(void **state)
{
	struct fx *fx = *state;
	struct http_request req = {.method = "GET", .timeout_ms = 300};
	struct seen s;

	run(fx, &req, "/stall", &s);
	assert_int_equal(s.rc, -ETIMEDOUT);
	/* a port nobody listens on */
	req = (struct http_request){.method = "GET", .url = "http://127.0.0.1:1/"};
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, -ECONNREFUSED);
	/* protocols other than http and https are refused */
	req = (struct http_request){.method = "GET", .url = "file:///etc/hostname"};
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, -EPROTO);
	assert_int_equal(s.len, 0);
	/* a TLS server that is not one: the handshake fails */
	{
		char url[64];

		snprintf(url, sizeof(url), "https://127.0.0.1:%u/json", fx->port);
		req = (struct http_request){.method = "GET", .url = url};
		run(fx, &req, NULL, &s);
		assert_int_equal(s.rc, -EPROTO);
	}
}

static void test_a_cancelled_call_is_never_told(void **state)
{
	struct fx *fx = *state;
	char url[64];
	struct http_request req = {.method = "GET", .url = url};
	struct http_call *call;
	struct seen s = {0}, other;
	uint64_t end;

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/stall", fx->port);
	assert_int_equal(http_call_start(fx->c, &req, &hooks, &s, &call, NULL), 0);
	end = loop_now_ms() + WAIT_MS;
	while (__atomic_load_n(&fx->hits, __ATOMIC_SEQ_CST) < 1) { /* the server has it */
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
	}
	http_call_cancel(call);
	assert_int_equal(http_client_calls(fx->c), 0);
	/* a second call, run to its end, gives the first every round it could
	 * have been told in */
	run(fx, &(struct http_request){.method = "GET"}, "/json", &other);
	assert_int_equal(other.rc, 0);
	assert_false(s.done);
}

/* TLS with verification always on: a server whose certificate chains to
 * the CA file given is taken, under the name it was made for; the system's
 * roots, another CA, or another name is refused. */
static void test_tls_is_verified(void **state)
{
	struct fx *fx = *state;
	char dir[] = "/tmp/test_http_client.XXXXXX", cert[128], key[128], other[128], okey[128];
	char url[128], pin[64], *cert_pem, *key_pem;
	const char *resolve[] = {pin, NULL};
	struct MHD_Daemon *d;
	struct http_request req;
	struct seen s;
	unsigned port;

	assert_non_null(mkdtemp(dir));
	make_cert_named(dir, "server", cert, key, sizeof(cert));
	make_cert_named(dir, "other", other, okey, sizeof(other));
	cert_pem = slurp(cert);
	key_pem = slurp(key);
	d = MHD_start_daemon(MHD_USE_TLS | MHD_USE_THREAD_PER_CONNECTION |
				     MHD_USE_INTERNAL_POLLING_THREAD,
			     0, NULL, NULL, serve, fx, MHD_OPTION_HTTPS_MEM_KEY, key_pem,
			     MHD_OPTION_HTTPS_MEM_CERT, cert_pem, MHD_OPTION_END);
	assert_non_null(d);
	port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
	snprintf(pin, sizeof(pin), "localhost:%u:127.0.0.1", port);
	snprintf(url, sizeof(url), "https://localhost:%u/json", port);
	req = (struct http_request){
		.method = "GET", .url = url, .ca_file = cert, .resolve = resolve};
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, 0);
	assert_int_equal(s.status, 200);
	req.ca_file = NULL; /* the system's roots know no such CA */
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, -EPROTO);
	req.ca_file = other; /* nor does another CA */
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, -EPROTO);
	snprintf(url, sizeof(url), "https://127.0.0.1:%u/json", port);
	req.ca_file = cert; /* the right CA, but not the name it certifies */
	run(fx, &req, NULL, &s);
	assert_int_equal(s.rc, -EPROTO);
	assert_int_equal(s.len, 0);
	MHD_stop_daemon(d);
	free(cert_pem);
	free(key_pem);
	unlink(cert);
	unlink(key);
	unlink(other);
	unlink(okey);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_post_sends_its_headers_and_reads_the_answer,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_redirects_are_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_body_past_its_cap_is_cut_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_head_past_its_cap_is_cut_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_timeouts_and_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_cancelled_call_is_never_told, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tls_is_verified, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
