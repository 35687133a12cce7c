/* client.c: HTTP requests on the event loop through libcurl (see client.h). */
#include "http/client.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#include "base/dl.h"

#define CONNECT_TIMEOUT_MS_DEF 10000u
#define BODY_MAX_DEF	       (4u * 1024 * 1024)

struct http_call {
	struct http_call *next, *prev;
	struct http_client *c;
	CURL *easy;
	struct curl_slist *headers, *resolve;
	char *body;
	struct http_call_hooks hooks;
	void *ctx;
	size_t body_max, got;
	/* The head as it comes: lines packed NUL-terminated in head_buf. */
	char head_buf[HTTP_CLIENT_HEAD_MAX];
	size_t head_len;
	struct http_head head;
	bool head_told;
	int abort_rc; /* why we stopped it: a hook's value, or -EMSGSIZE */
	bool dead;    /* cancelled: released at the next reap */
};

struct http_client {
	struct loop *loop;
	CURLM *multi;
	struct loop_timer *timer;
	struct loop_task kick; /* curl asked for a timeout of 0: act next round */
	struct loop_task reap; /* cancelled calls to release */
	struct http_call *calls;
};

/* libcurl is loaded by the first client or request, not at exec: an
 * appliance with no HTTP upstream never maps it and what it pulls in
 * (about 3 MiB of resident pages at start). The table holds every libcurl
 * function this file calls; they are reached only through it. */
#define CURL_SONAME  "libcurl.so.4"
#define CURL_PACKAGE "libcurl4" /* debian/control recommends it */
/* clang-format off */
#define CURL_FNS(X) \
	X(global_init) \
	X(version_info) \
	X(easy_init) \
	X(easy_setopt) \
	X(easy_getinfo) \
	X(easy_perform) \
	X(easy_cleanup) \
	X(multi_init) \
	X(multi_setopt) \
	X(multi_add_handle) \
	X(multi_remove_handle) \
	X(multi_assign) \
	X(multi_info_read) \
	X(multi_socket_action) \
	X(multi_cleanup) \
	X(slist_append) \
	X(slist_free_all)
/* clang-format on */

static struct {
#define X(name) __typeof__(curl_##name) *name;
	CURL_FNS(X)
#undef X
} cu;

static const struct appl_dl_sym cu_syms[] = {
#define X(name) {"curl_" #name, (void **)&cu.name},
	CURL_FNS(X)
#undef X
};

static struct appl_dl_lib cu_lib = APPL_DL_LIB(CURL_SONAME, CURL_PACKAGE, cu_syms);

/* Load and start libcurl once; later calls give the first one's answer. */
static int curl_global(struct appl_err *err)
{
	static int rc = 1; /* 1: not started yet */

	if (appl_dl_load(&cu_lib, err) < 0)
		return -EIO;
	if (rc > 0)
		rc = cu.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
	if (rc < 0)
		appl_err_set(err, rc, "libcurl would not start");
	return rc;
}

int http_client_load(struct appl_err *err)
{
	return curl_global(err);
}

int http_client_describe(char *buf, size_t n, struct appl_err *err)
{
	const curl_version_info_data *v;

	if (curl_global(err) < 0)
		return err ? err->code : -EIO;
	if (!(v = cu.version_info(CURLVERSION_NOW)))
		return appl_err_set(err, -EIO, "libcurl gave no version");
	snprintf(buf, n, "%s (%s)", v->version, v->ssl_version ? v->ssl_version : "no TLS");
	return 0;
}

const char *http_head_get(const struct http_head *h, const char *name)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcasecmp(h->name[i], name) == 0)
			return h->value[i];
	return NULL;
}

/* ---- finishing ------------------------------------------------------------ */

/* Header lines may hold a credential (a policy's {env:NAME}): wiped before
 * they go back to the allocator. */
static void slist_wipe_free(struct curl_slist *l)
{
	for (struct curl_slist *i = l; i; i = i->next)
		explicit_bzero(i->data, strlen(i->data));
	cu.slist_free_all(l);
}

static void call_release(struct http_call *call)
{
	struct http_client *c = call->c;

	if (c)
		cu.multi_remove_handle(c->multi, call->easy);
	cu.easy_cleanup(call->easy);
	slist_wipe_free(call->headers);
	cu.slist_free_all(call->resolve);
	free(call->body);
	if (!c) {
		free(call);
		return;
	}
	if (call->prev)
		call->prev->next = call->next;
	else
		c->calls = call->next;
	if (call->next)
		call->next->prev = call->prev;
	free(call);
}

static int result_errno(CURLcode res, const char **why)
{
	switch (res) {
	case CURLE_OK:
		*why = "ok";
		return 0;
	case CURLE_OPERATION_TIMEDOUT:
		*why = "timed out";
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		*why = "could not connect";
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		*why = "the name did not resolve";
		return -EHOSTUNREACH;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
		*why = "TLS failed (the certificate or the handshake was refused)";
		return -EPROTO;
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
		*why = "a URL this client does not take";
		return -EPROTO;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
		*why = "the connection broke or the server's HTTP was broken";
		return -EPROTO;
	default:
		*why = "the request failed";
		return -EIO;
	}
}

/* Tell the owners of finished calls, after libcurl has returned. */
static void check_done(struct http_client *c)
{
	CURLMsg *m;
	int left;

	while ((m = cu.multi_info_read(c->multi, &left))) {
		struct http_call *call = NULL;
		const char *why;
		int rc;

		if (m->msg != CURLMSG_DONE)
			continue;
		cu.easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&call);
		if (!call || call->dead)
			continue;
		rc = result_errno(m->data.result, &why);
		if (call->abort_rc) {
			rc = call->abort_rc;
			why = rc == -EMSGSIZE ? "the response passed its cap"
					      : "stopped by its reader";
		}
		call->dead = true; /* its hooks are done with */
		if (call->hooks.done)
			call->hooks.done(call->ctx, rc, why);
		call_release(call);
	}
}

static void on_reap(void *data)
{
	struct http_client *c = data;

	for (struct http_call *call = c->calls, *next; call; call = next) {
		next = call->next;
		if (call->dead)
			call_release(call);
	}
}

/* ---- libcurl on our loop ---------------------------------------------------- */

static void act(struct http_client *c, curl_socket_t fd, int flags)
{
	int running; /* what libcurl reports; the list of calls is ours */

	cu.multi_socket_action(c->multi, fd, flags, &running);
	check_done(c);
}

static void on_socket(struct loop *loop, int fd, uint32_t events, void *data)
{
	int flags = 0;
	(void)loop;

	if (events & EPOLLIN)
		flags |= CURL_CSELECT_IN;
	if (events & EPOLLOUT)
		flags |= CURL_CSELECT_OUT;
	if (events & (EPOLLERR | EPOLLHUP))
		flags |= CURL_CSELECT_ERR;
	act(data, fd, flags);
}

static void on_timer(void *data)
{
	act(data, CURL_SOCKET_TIMEOUT, 0);
}

/* libcurl's CURLMOPT_SOCKETFUNCTION: watch s for what it wants. Whether
 * s is watched already is kept as its socketp (any non-NULL value). */
static int sock_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct http_client *c = userp;
	uint32_t ev = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	(void)easy;

	if (what == CURL_POLL_REMOVE) {
		if (socketp)
			loop_del(c->loop, s);
		cu.multi_assign(c->multi, s, NULL);
		return 0;
	}
	if (socketp)
		return loop_mod(c->loop, s, ev) < 0 ? -1 : 0;
	if (loop_add(c->loop, s, ev, on_socket, c, NULL) < 0)
		return -1;
	cu.multi_assign(c->multi, s, c);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION: come back in ms (-1: never; 0: at once, which
 * must not be from inside this callback). */
static int timer_cb(CURLM *multi, long ms, void *userp)
{
	struct http_client *c = userp;
	(void)multi;

	if (ms < 0)
		return loop_timer_set(c->timer, 0) < 0 ? -1 : 0;
	if (ms == 0) {
		loop_next(c->loop, &c->kick);
		return 0;
	}
	return loop_timer_set(c->timer, (uint64_t)ms) < 0 ? -1 : 0;
}

static void on_kick(void *data)
{
	on_timer(data);
}

/* ---- one call's bytes --------------------------------------------------------- */

/* A header line (CURLOPT_HEADERFUNCTION): kept within the cap; the blank
 * line that ends a final head tells on_head. */
static size_t head_cb(char *buf, size_t size, size_t n, void *data)
{
	struct http_call *call = data;
	size_t len = size * n, k = len;
	char *line, *colon;
	long status = 0;

	if (call->dead)
		return 0;
	while (k && (buf[k - 1] == '\n' || buf[k - 1] == '\r'))
		k--;
	if (k == 0) { /* the end of a head */
		cu.easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status >= 200 && !call->head_told) {
			call->head.status = status;
			call->head_told = true;
			if (call->hooks.on_head &&
			    (call->abort_rc = call->hooks.on_head(call->ctx, &call->head)))
				return 0;
		}
		return len;
	}
	if (strncmp(buf, "HTTP/", 5) == 0) { /* a status line: a new head begins */
		call->head.n = 0;
		call->head_len = 0;
		return len;
	}
	if (call->head_len + k + 1 > sizeof(call->head_buf)) {
		call->abort_rc = -EMSGSIZE;
		return 0;
	}
	line = call->head_buf + call->head_len;
	memcpy(line, buf, k);
	line[k] = '\0';
	call->head_len += k + 1;
	colon = strchr(line, ':');
	if (!colon || call->head.n >= HTTP_CLIENT_HEADERS_MAX)
		return len; /* a folded or an extra line: not kept */
	*colon++ = '\0';
	while (*colon == ' ' || *colon == '\t')
		colon++;
	call->head.name[call->head.n] = line;
	call->head.value[call->head.n++] = colon;
	return len;
}

static size_t data_cb(char *buf, size_t size, size_t n, void *data)
{
	struct http_call *call = data;
	size_t len = size * n;

	if (call->dead)
		return 0;
	if (len > call->body_max - call->got) {
		call->abort_rc = -EMSGSIZE;
		return 0;
	}
	call->got += len;
	if (call->hooks.on_data && (call->abort_rc = call->hooks.on_data(call->ctx, buf, len)))
		return 0;
	return len;
}

/* ---- starting ------------------------------------------------------------------- */

static int easy_setup(struct http_call *call, const struct http_request *req)
{
	CURL *e = call->easy;
	CURLcode rc = CURLE_OK;

#define SET(opt, val)                                                                              \
	do {                                                                                       \
		if (rc == CURLE_OK)                                                                \
			rc = cu.easy_setopt(e, opt, val);                                          \
	} while (0)
	SET(CURLOPT_URL, req->url);
	SET(CURLOPT_PRIVATE, (char *)call);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	SET(CURLOPT_PROXY, req->proxy ? req->proxy : ""); /* "": none, the environment ignored */
	SET(CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	SET(CURLOPT_CONNECTTIMEOUT_MS,
	    (long)(req->connect_timeout_ms ? req->connect_timeout_ms : CONNECT_TIMEOUT_MS_DEF));
	if (req->timeout_ms)
		SET(CURLOPT_TIMEOUT_MS, (long)req->timeout_ms);
	if (req->stall_s) {
		SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
		SET(CURLOPT_LOW_SPEED_TIME, (long)req->stall_s);
	}
	if (req->ca_file) {
		SET(CURLOPT_CAINFO, req->ca_file);
		SET(CURLOPT_CAPATH, (char *)NULL);
	}
	SET(CURLOPT_HEADERFUNCTION, head_cb);
	SET(CURLOPT_HEADERDATA, call);
	SET(CURLOPT_WRITEFUNCTION, data_cb);
	SET(CURLOPT_WRITEDATA, call);
	SET(CURLOPT_HTTPHEADER, call->headers);
	if (call->resolve)
		SET(CURLOPT_RESOLVE, call->resolve);
	if (strcmp(req->method, "POST") == 0) {
		SET(CURLOPT_POST, 1L);
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
		SET(CURLOPT_POSTFIELDS, call->body ? call->body : "");
	} else if (strcmp(req->method, "GET") != 0)
		SET(CURLOPT_CUSTOMREQUEST, req->method);
#undef SET
	return rc == CURLE_OK ? 0 : -EINVAL;
}

static struct curl_slist *slist_of(const char *const *lines, int *bad)
{
	struct curl_slist *l = NULL, *n;

	for (size_t i = 0; lines && lines[i]; i++) {
		if (!(n = cu.slist_append(l, lines[i]))) {
			*bad = 1;
			break;
		}
		l = n;
	}
	return l;
}

int http_call_start(struct http_client *c, const struct http_request *req,
		    const struct http_call_hooks *hooks, void *ctx, struct http_call **out,
		    struct appl_err *err)
{
	struct http_call *call;
	int bad = 0;

	if (!req->url || !req->method || (req->body_len && !req->body)) {
		appl_err_set(err, -EINVAL, "an HTTP request needs a method and a URL");
		return -EINVAL;
	}
	if (!(call = calloc(1, sizeof(*call))) || !(call->easy = cu.easy_init())) {
		free(call);
		appl_err_set(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	call->c = c;
	call->hooks = *hooks;
	call->ctx = ctx;
	call->body_max = req->body_max ? req->body_max : BODY_MAX_DEF;
	call->headers = slist_of(req->headers, &bad);
	call->resolve = slist_of(req->resolve, &bad);
	if (req->body_len && (call->body = malloc(req->body_len)))
		memcpy(call->body, req->body, req->body_len);
	call->next = c->calls;
	if (c->calls)
		c->calls->prev = call;
	c->calls = call;
	if (bad || (req->body_len && !call->body) || easy_setup(call, req) < 0 ||
	    cu.multi_add_handle(c->multi, call->easy) != CURLM_OK) {
		call_release(call);
		appl_err_set(err, -ENOMEM, "could not set up the HTTP request");
		return -ENOMEM;
	}
	*out = call;
	return 0;
}

void http_call_cancel(struct http_call *call)
{
	if (!call || call->dead)
		return;
	/* Never removed from inside libcurl: the next round releases it. */
	call->dead = true;
	loop_next(call->c->loop, &call->c->reap);
}

/* A fetched body, growing as it comes (http_fetch_once). */
struct once_body {
	char *buf;
	size_t len, cap;
};

static int once_data(void *ctx, const char *buf, size_t len)
{
	struct once_body *b = ctx;

	if (b->len + len + 1 > b->cap) {
		size_t ncap = b->cap ? b->cap : 4096;
		char *nb;

		while (ncap < b->len + len + 1)
			ncap *= 2;
		if (!(nb = realloc(b->buf, ncap)))
			return -ENOMEM;
		b->buf = nb;
		b->cap = ncap;
	}
	memcpy(b->buf + b->len, buf, len);
	b->len += len;
	b->buf[b->len] = '\0';
	return 0;
}

static int request_once(const struct http_request *req, long *status, struct once_body *body,
			struct appl_err *err)
{
	struct http_call *call;
	int bad = 0, rc;
	const char *why;
	CURLcode res;

	*status = 0;
	if (curl_global(err) < 0)
		return err ? err->code : -EIO;
	if (!req->url || !req->method || req->body_len)
		return appl_err_set(err, -EINVAL, "a request with a method, a URL and no body");
	if (!(call = calloc(1, sizeof(*call))) || !(call->easy = cu.easy_init())) {
		free(call);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	call->body_max = req->body_max ? req->body_max : BODY_MAX_DEF;
	call->headers = slist_of(req->headers, &bad);
	call->resolve = slist_of(req->resolve, &bad);
	call->hooks.on_data = body ? once_data : NULL;
	call->ctx = body;
	if (bad || easy_setup(call, req) < 0) {
		call_release(call);
		return appl_err_set(err, -ENOMEM, "could not set up the HTTP request");
	}
	res = cu.easy_perform(call->easy);
	rc = call->abort_rc ? call->abort_rc : result_errno(res, &why);
	if (call->abort_rc)
		why = rc == -EMSGSIZE ? "the response is over its size cap" : "out of memory";
	*status = call->head.status;
	call_release(call);
	return rc < 0 ? appl_err_set(err, rc, "%s", why) : 0;
}

int http_request_once(const struct http_request *req, long *status, struct appl_err *err)
{
	return request_once(req, status, NULL, err);
}

int http_fetch_once(const struct http_request *req, long *status, char **body, size_t *len,
		    struct appl_err *err)
{
	struct once_body b = {0};
	int rc = request_once(req, status, &b, err);

	if (rc < 0 || (!b.buf && !(b.buf = calloc(1, 1)))) {
		free(b.buf);
		return rc < 0 ? rc : appl_err_set(err, -ENOMEM, "out of memory");
	}
	*body = b.buf;
	*len = b.len;
	return 0;
}

size_t http_client_calls(const struct http_client *c)
{
	size_t n = 0;

	for (const struct http_call *call = c->calls; call; call = call->next)
		n += !call->dead;
	return n;
}

int http_client_new(struct loop *loop, struct http_client **out, struct appl_err *err)
{
	struct http_client *c;

	if (curl_global(err) < 0)
		return err ? err->code : -EIO;
	if (!(c = calloc(1, sizeof(*c)))) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return -ENOMEM;
	}
	c->loop = loop;
	loop_task_init(&c->kick, on_kick, c);
	loop_task_init(&c->reap, on_reap, c);
	if (!(c->timer = loop_timer_new(loop, on_timer, c, err)) || !(c->multi = cu.multi_init()) ||
	    cu.multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, sock_cb) != CURLM_OK ||
	    cu.multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
	    cu.multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb) != CURLM_OK ||
	    cu.multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK) {
		if (!err || !err->code)
			appl_err_set(err, -ENOMEM, "could not set up libcurl");
		http_client_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void http_client_free(struct http_client *c)
{
	if (!c)
		return;
	while (c->calls)
		call_release(c->calls);
	if (c->multi)
		cu.multi_cleanup(c->multi);
	loop_task_cancel(c->loop, &c->kick);
	loop_task_cancel(c->loop, &c->reap);
	loop_timer_free(c->timer);
	free(c);
}
