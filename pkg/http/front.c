/* front.c: the HTTP front door (see front.h, docs/http.md).
 *
 * libmicrohttpd runs in external-loop mode with its own epoll set: that
 * set's descriptor is watched by our loop, MHD_run is called when it is
 * readable, when MHD's timeout falls due and the round after a suspended
 * connection was resumed. A request the owner answers later is suspended
 * meanwhile; as MHD does not watch a suspended socket, we watch it for the
 * client's hang-up ourselves.
 */
#define _GNU_SOURCE
#include "http/front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/dl.h"
#include "http/header.h"
#include "log/log.h"

/* libmicrohttpd is loaded by the first front, not at exec: an appliance
 * serving stdio never maps it and GnuTLS behind it (about 2.5 MiB of
 * resident pages at start, and GnuTLS's start-up code). Every function
 * this file calls is reached through this table. */
#define MHD_SONAME "libmicrohttpd.so.12"
/* clang-format off */
#define MHD_FNS(X) \
	X(add_response_header) \
	X(create_response_from_buffer) \
	X(create_response_from_callback) \
	X(destroy_response) \
	X(get_connection_info) \
	X(get_connection_values) \
	X(get_daemon_info) \
	X(get_timeout) \
	X(lookup_connection_value) \
	X(queue_response) \
	X(resume_connection) \
	X(run) \
	X(start_daemon) \
	X(stop_daemon) \
	X(suspend_connection) \
	X(get_version)
/* clang-format on */

static struct {
#define X(name) __typeof__(MHD_##name) *name;
	MHD_FNS(X)
#undef X
} mhd;

static const struct appl_dl_sym mhd_syms[] = {
#define X(name) {"MHD_" #name, (void **)&mhd.name},
	MHD_FNS(X)
#undef X
};

static struct appl_dl_lib mhd_lib = APPL_DL_LIB(MHD_SONAME, mhd_syms);

int http_front_load(struct appl_err *err)
{
	return appl_dl_load(&mhd_lib, err);
}

int http_front_describe(char *buf, size_t n, struct appl_err *err)
{
	if (http_front_load(err) < 0)
		return err ? err->code : -EIO;
	snprintf(buf, n, "%s", mhd.get_version());
	return 0;
}

#define TLS_PRIORITIES "NORMAL:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1"
#define STREAM_BLOCK   (16u * 1024)
#define PEER_MAX       64u

struct listener {
	struct http_front *f;
	struct MHD_Daemon *d;
	int lfd, efd;
	unsigned port;
	char *unix_path; /* removed at close */
	bool failed;	 /* MHD refused it: the socket may be gone */
};

/* One client connection, from MHD's accept to its close. Connections are
 * kept in the order of their deadline (start + slow_s), which is also the
 * order they were put in, so one timer serves them all. */
struct conn {
	struct http_front *f;
	int fd;
	uint64_t deadline;
	bool listed;
	/* The request line's target as sent, from on_target to the access
	 * handler's first call: MHD's bytes, valid for that request only. */
	const char *target;
	struct conn *prev, *next;
};

enum req_state {
	REQ_READING, /* head admitted, body coming */
	REQ_REFUSED, /* a refusal is queued */
	REQ_OWNER,   /* the owner holds it */
	REQ_DONE,    /* the owner let go (answered); MHD finishes it */
};

struct http_req {
	struct http_front *f;
	struct conn *c;
	struct MHD_Connection *mc;
	enum req_state state;
	const char *method;
	char peer[PEER_MAX];
	const void *principal;
	void *data;
	char *body;
	size_t len, cap, dropped;
	bool too_big;
	bool suspended, watching, aborting, owned;
	/* The answer, made by the owner, queued by the access handler. */
	struct MHD_Response *resp;
	unsigned status;
	bool queued;
	/* A stream's pending bytes: out[off..olen). */
	bool stream, stream_end, stream_cut;
	char *out;
	size_t off, olen, ocap;
	struct http_req *lprev, *lnext; /* the front's live requests */
};

struct http_front {
	struct loop *loop;
	struct http_front_config cfg;
	struct listener ls[HTTP_FRONT_LISTEN_MAX];
	size_t nls;
	struct loop_timer *mhd_timer, *slow_timer;
	struct loop_task kick;
	struct conn *head, *tail;
	struct http_req *reqs;
	struct log_rate rate;
	bool closing;
	unsigned in_mhd; /* inside MHD_run (its callbacks may call us back) */
};

static void refusal_log(struct http_front *f, unsigned status, const char *why, const char *peer)
{
	unsigned dropped = 0;

	if (!log_rate_allow(&f->rate, loop_now_ms(), &dropped))
		return;
	if (dropped)
		log_line(LOG_WARN, NULL, "http: %u refusal lines dropped", dropped);
	/* Only our own words and the peer's address: a header (a token
	 * above all) never reaches the log. */
	log_line(LOG_INFO, NULL, "http: refused %u (%s) from %s", status, why, peer);
}

/* ---- driving MHD from the loop ------------------------------------------ */

static void pump(struct http_front *f)
{
	uint64_t soonest = 0;
	bool any = false;

	f->in_mhd++;
	for (size_t i = 0; i < f->nls; i++)
		mhd.run(f->ls[i].d);
	f->in_mhd--;
	for (size_t i = 0; i < f->nls; i++) {
		MHD_UNSIGNED_LONG_LONG t;

		if (mhd.get_timeout(f->ls[i].d, &t) != MHD_YES)
			continue;
		if (!any || t < soonest)
			soonest = t;
		any = true;
	}
	/* 0 means MHD has work it could not finish (edge-triggered sockets
	 * still readable): come back next round, not through a timerfd. */
	if (any && soonest == 0)
		loop_next(f->loop, &f->kick);
	loop_timer_set(f->mhd_timer, any && soonest ? soonest : 0);
}

static void on_kick(void *data)
{
	pump(data);
}

static void on_epoll(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)fd;
	(void)events;
	pump(data);
}

/* ---- the slow-client deadline ------------------------------------------- */

static void slow_rearm(struct http_front *f)
{
	uint64_t now = loop_now_ms();

	if (!f->head) {
		loop_timer_set(f->slow_timer, 0);
		return;
	}
	loop_timer_set(f->slow_timer, f->head->deadline > now ? f->head->deadline - now : 1);
}

static void conn_unlist(struct conn *c)
{
	struct http_front *f = c->f;

	if (!c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		f->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		f->tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

/* Start c's clock: its next request's head and body must come within
 * slow_s, however steadily it trickles (MHD's own timeout restarts on
 * every byte). */
static void conn_list(struct conn *c)
{
	struct http_front *f = c->f;

	conn_unlist(c);
	c->deadline = loop_now_ms() + (uint64_t)f->cfg.slow_s * 1000u;
	c->prev = f->tail;
	if (f->tail)
		f->tail->next = c;
	else
		f->head = c;
	f->tail = c;
	c->listed = true;
	if (f->head == c)
		slow_rearm(f);
}

static void on_slow(void *data)
{
	struct http_front *f = data;
	uint64_t now = loop_now_ms();

	while (f->head && f->head->deadline <= now) {
		struct conn *c = f->head;

		conn_unlist(c);
		/* MHD owns the descriptor; shutting it down makes MHD see the
		 * end of the connection and close it the usual way. */
		shutdown(c->fd, SHUT_RDWR);
		if (log_rate_allow(&f->rate, now, NULL))
			log_line(LOG_INFO, NULL, "http: dropped a client slower than %u s",
				 f->cfg.slow_s);
	}
	slow_rearm(f);
	loop_next(f->loop, &f->kick);
}

/* ---- suspension and the client's hang-up ------------------------------ */

static void req_unwatch(struct http_req *r)
{
	if (r->watching)
		loop_del(r->f->loop, r->c->fd);
	r->watching = false;
}

/* Wake r's connection: an answer or a stream's bytes are ready, or it is
 * to be closed. Outside MHD's callbacks MHD runs at once, so the bytes
 * leave now rather than after whatever else this round of the loop does
 * (a used sandbox torn down, the next one started); inside, next round. */
static void req_resume(struct http_req *r)
{
	struct http_front *f = r->f;

	if (!r->suspended)
		return;
	req_unwatch(r);
	r->suspended = false;
	mhd.resume_connection(r->mc);
	if (f->in_mhd || f->closing)
		loop_next(f->loop, &f->kick);
	else
		pump(f);
}

static void on_hangup(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct http_req *r = data;
	(void)loop;
	(void)fd;
	(void)events;
	/* Resumed and told to abort, MHD closes the connection, and the
	 * completion callback tells the owner. */
	r->aborting = true;
	req_resume(r);
}

static void req_suspend(struct http_req *r)
{
	mhd.suspend_connection(r->mc);
	r->suspended = true;
	if (loop_add(r->f->loop, r->c->fd, EPOLLRDHUP, on_hangup, r, NULL) == 0)
		r->watching = true;
}

/* ---- answers ------------------------------------------------------------ */

static int add_headers(struct MHD_Response *resp, const char *const *headers)
{
	for (size_t i = 0; headers && headers[i]; i++) {
		const char *h = headers[i], *colon = strchr(h, ':');
		char name[128];
		size_t nlen;

		if (!colon || colon == h || (size_t)(colon - h) >= sizeof(name) ||
		    strpbrk(h, "\r\n"))
			return -EINVAL;
		nlen = (size_t)(colon - h);
		memcpy(name, h, nlen);
		name[nlen] = '\0';
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		if (mhd.add_response_header(resp, name, colon) != MHD_YES)
			return -EINVAL;
	}
	return 0;
}

static const char *refusal_text(unsigned status)
{
	switch (status) {
	case MHD_HTTP_NOT_FOUND:
		return "not found\n";
	case MHD_HTTP_METHOD_NOT_ALLOWED:
		return "method not allowed\n";
	case MHD_HTTP_FORBIDDEN:
		return "forbidden\n";
	case MHD_HTTP_UNAUTHORIZED:
		return "unauthorized\n";
	case MHD_HTTP_NOT_ACCEPTABLE:
		return "not acceptable\n";
	case MHD_HTTP_CONTENT_TOO_LARGE:
		return "body too large\n";
	default:
		return "unsupported media type\n";
	}
}

static void refusal_queue(struct http_req *r)
{
	static const char *const allow[] = {"Allow: GET, POST, DELETE", NULL};
	static const char *const bearer[] = {"WWW-Authenticate: Bearer", NULL};
	const char *text = refusal_text(r->status);
	struct MHD_Response *resp =
		mhd.create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);

	r->queued = true;
	conn_unlist(r->c);
	if (!resp)
		return;
	mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
	if (r->status == MHD_HTTP_METHOD_NOT_ALLOWED)
		add_headers(resp, allow);
	if (r->status == MHD_HTTP_UNAUTHORIZED)
		add_headers(resp, bearer);
	mhd.queue_response(r->mc, r->status, resp);
	mhd.destroy_response(resp);
}

/* Refuse r. The answer waits for the end of the body (read and dropped,
 * up to HTTP_FRONT_DRAIN_MAX), because MHD closes a connection answered
 * before its request is whole; now says answer at once (a body too big
 * to read: the connection closes after). */
static void refuse(struct http_req *r, unsigned status, const char *why, bool now)
{
	r->state = REQ_REFUSED;
	r->status = status;
	refusal_log(r->f, status, why, r->peer);
	if (now)
		refusal_queue(r);
}

/* Hand the owner's answer to MHD (from the access handler only, where
 * MHD allows it), or suspend until there is one. */
static enum MHD_Result deliver(struct http_req *r)
{
	if (r->aborting)
		return MHD_NO;
	if (!r->resp) {
		req_suspend(r);
		return MHD_YES;
	}
	if (!r->queued) {
		enum MHD_Result ok = mhd.queue_response(r->mc, r->status, r->resp);

		r->queued = true;
		mhd.destroy_response(r->resp);
		r->resp = NULL;
		return ok;
	}
	return MHD_YES;
}

static int answer_check(const struct http_req *r)
{
	if (!r->owned || r->resp || r->stream)
		return -EALREADY;
	return 0;
}

int http_req_reply(struct http_req *r, unsigned status, const char *content_type, const char *body,
		   size_t len, const char *const *headers)
{
	struct MHD_Response *resp;
	int rc = answer_check(r);

	if (rc)
		return rc;
	resp = mhd.create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return -ENOMEM;
	if ((content_type && mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
						     content_type) != MHD_YES) ||
	    add_headers(resp, headers)) {
		mhd.destroy_response(resp);
		return -EINVAL;
	}
	r->resp = resp;
	r->status = status;
	r->owned = false;
	r->state = REQ_DONE;
	req_resume(r);
	return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_req *r = cls;
	size_t n = r->olen - r->off;
	(void)pos;

	if (r->aborting || r->stream_cut)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (n) {
		if (n > max)
			n = max;
		memcpy(buf, r->out + r->off, n);
		r->off += n;
		if (r->off == r->olen)
			r->off = r->olen = 0;
		return (ssize_t)n;
	}
	if (r->stream_end)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Nothing yet: 0 would have MHD ask again at once, so wait
	 * suspended until the owner sends. */
	req_suspend(r);
	return 0;
}

int http_req_stream(struct http_req *r, unsigned status, const char *const *headers)
{
	struct MHD_Response *resp;
	int rc = answer_check(r);

	if (rc)
		return rc;
	resp = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, r,
						 NULL);
	if (!resp)
		return -ENOMEM;
	if (mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream") !=
		    MHD_YES ||
	    mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES ||
	    add_headers(resp, headers)) {
		mhd.destroy_response(resp);
		return -EINVAL;
	}
	r->resp = resp;
	r->status = status;
	r->stream = true;
	req_resume(r);
	return 0;
}

int http_req_stream_send(struct http_req *r, const char *data, size_t len)
{
	if (!r->owned || !r->stream || r->stream_end || r->stream_cut)
		return -EPIPE;
	if (len > HTTP_FRONT_STREAM_MAX - (r->olen - r->off)) {
		/* A client that stops reading is cut off, not buffered for
		 * without end; the owner hears of it through on_gone. */
		r->stream_cut = true;
		req_resume(r);
		return -ENOBUFS;
	}
	if (r->off && r->olen + len > r->ocap) {
		memmove(r->out, r->out + r->off, r->olen - r->off);
		r->olen -= r->off;
		r->off = 0;
	}
	if (r->olen + len > r->ocap) {
		size_t cap = r->ocap ? r->ocap : 4096;
		char *n;

		while (cap < r->olen + len)
			cap *= 2;
		if (!(n = realloc(r->out, cap)))
			return -ENOMEM;
		r->out = n;
		r->ocap = cap;
	}
	memcpy(r->out + r->olen, data, len);
	r->olen += len;
	req_resume(r);
	return 0;
}

int http_req_stream_end(struct http_req *r)
{
	if (!r->owned || !r->stream || r->stream_end)
		return -EPIPE;
	r->stream_end = true;
	r->owned = false;
	r->state = REQ_DONE;
	req_resume(r);
	return 0;
}

/* ---- admission ---------------------------------------------------------- */

struct count {
	const char *name;
	unsigned n;
};

static enum MHD_Result count_one(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct count *c = cls;
	(void)kind;
	(void)value;
	if (strcasecmp(key, c->name) == 0)
		c->n++;
	return MHD_YES;
}

/* The value of the one header called name; NULL when absent. *many says
 * it came more than once, which is refused: two Hosts or two tokens leave
 * it open which one a proxy in front of us checked. */
static const char *header_one(struct MHD_Connection *mc, const char *name, bool *many)
{
	struct count c = {.name = name};

	mhd.get_connection_values(mc, MHD_HEADER_KIND, count_one, &c);
	*many = c.n > 1;
	return mhd.lookup_connection_value(mc, MHD_HEADER_KIND, name);
}

static bool peer_local(const struct sockaddr *sa)
{
	if (!sa || sa->sa_family == AF_UNIX)
		return sa != NULL;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
	return false;
}

static void peer_name(const struct sockaddr *sa, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (!sa) {
		snprintf(out, cap, "?");
	} else if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, a, sizeof(a));
		snprintf(out, cap, "%s:%u", a, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &s6->sin6_addr, a, sizeof(a));
		snprintf(out, cap, "[%s]:%u", a, ntohs(s6->sin6_port));
	} else {
		snprintf(out, cap, "unix");
	}
}

static bool auth_check(struct http_req *r, const struct sockaddr *sa);

/* The token step, told to the owner (for its audit log) either way. */
static bool auth_ok(struct http_req *r, const struct sockaddr *sa)
{
	const struct http_front_config *cfg = &r->f->cfg;
	bool ok = auth_check(r, sa);

	if (cfg->on_auth) {
		char peer[64];

		peer_name(sa, peer, sizeof(peer));
		cfg->on_auth(cfg->data, ok ? r->principal : NULL, peer);
	}
	return ok;
}

static bool auth_check(struct http_req *r, const struct sockaddr *sa)
{
	const struct http_front_config *cfg = &r->f->cfg;
	bool many;
	const char *v = header_one(r->mc, MHD_HTTP_HEADER_AUTHORIZATION, &many), *tok;
	size_t toklen;
	unsigned char h[crypto_hash_sha256_BYTES];

	if (!v) {
		r->principal = cfg->anonymous && peer_local(sa) ? cfg->anonymous : NULL;
		return r->principal != NULL;
	}
	if (many || !cfg->token || http_header_bearer(v, strlen(v), &tok, &toklen))
		return false;
	crypto_hash_sha256(h, (const unsigned char *)tok, toklen);
	r->principal = cfg->token(cfg->data, h);
	sodium_memzero(h, sizeof(h));
	return r->principal != NULL;
}

/* Steps 3 to 5 of the admission (front.h); 0 or the refusal's status. */
static unsigned admit_headers(struct http_req *r, const struct sockaddr *sa, const char **why)
{
	const struct http_front_config *cfg = &r->f->cfg;
	bool many, many_o, post = strcmp(r->method, "POST") == 0;
	const char *host = header_one(r->mc, MHD_HTTP_HEADER_HOST, &many);
	const char *origin = header_one(r->mc, MHD_HTTP_HEADER_ORIGIN, &many_o);
	const char *ct, *acc, *cl;
	unsigned accept;

	if (!host || many || !http_header_host_allowed(host, strlen(host), cfg->hosts, cfg->nhosts))
		return *why = "host", MHD_HTTP_FORBIDDEN;
	if (many_o || (origin && !http_header_origin_allowed(origin, strlen(origin), cfg->origins,
							     cfg->norigins)))
		return *why = "origin", MHD_HTTP_FORBIDDEN;
	if (!auth_ok(r, sa))
		return *why = "token", MHD_HTTP_UNAUTHORIZED;
	acc = mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	accept = acc ? http_header_accept(acc, strlen(acc)) : 0;
	if (strcmp(r->method, "GET") == 0 && !(accept & HTTP_ACCEPT_SSE))
		return *why = "accept", MHD_HTTP_NOT_ACCEPTABLE;
	if (!post)
		return 0;
	ct = mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (!ct || !http_header_content_json(ct, strlen(ct)))
		return *why = "content type", MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
	if ((accept & (HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE)) != (HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE))
		return *why = "accept", MHD_HTTP_NOT_ACCEPTABLE;
	cl = mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl) {
		char *end;
		unsigned long long n;

		errno = 0;
		n = strtoull(cl, &end, 10);
		/* MHD has parsed it already; this only compares with the cap,
		 * before a byte of the body is read (and before 100 Continue). */
		if (errno || *end || n > cfg->body_bytes)
			return *why = "body size", MHD_HTTP_CONTENT_TOO_LARGE;
	}
	return 0;
}

/* Whether the request's target, as the client sent it, is cfg.path byte
 * for byte (on_target). MHD splits the request line in place: the target
 * ends, at the NUL that was the space, one byte before the version. A
 * target that ends sooner held a NUL byte of its own ("/mcp\0x"), which
 * every hook reads as "/mcp"; anything else in MHD's layout fails closed. */
static bool target_is_path(struct http_req *r, const char *url, const char *version)
{
	const char *t = r->c->target, *path = r->f->cfg.path;

	r->c->target = NULL;
	return t && url && version && strcmp(t, path) == 0 && strcmp(url, path) == 0 &&
	       version == t + strlen(path) + 1;
}

/* The head has come: judge it (front.h's order). */
static void admit(struct http_req *r, const char *url, const char *version)
{
	const union MHD_ConnectionInfo *ci =
		mhd.get_connection_info(r->mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const char *why = NULL;
	unsigned status;

	const char *cl =
		mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	/* A body too long to drop is not waited for. */
	bool now = cl && (strlen(cl) > 9 || strtoul(cl, NULL, 10) > HTTP_FRONT_DRAIN_MAX);

	peer_name(sa, r->peer, sizeof(r->peer));
	if (!target_is_path(r, url, version))
		return refuse(r, MHD_HTTP_NOT_FOUND, "path", now);
	if (strcmp(r->method, "POST") && strcmp(r->method, "GET") && strcmp(r->method, "DELETE"))
		return refuse(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method", now);
	if ((status = admit_headers(r, sa, &why)))
		/* 413 at once: no 100 Continue, not a byte of the body read */
		return refuse(r, status, why, now || status == MHD_HTTP_CONTENT_TOO_LARGE);
}

/* Keep body bytes up to the cap; past it, drop up to
 * HTTP_FRONT_DRAIN_MAX more so the 413 can follow the body (MHD takes an
 * answer only once the request is whole). Returns false to cut off. */
static bool take_body(struct http_req *r, const char *data, size_t n)
{
	size_t cap = r->f->cfg.body_bytes;

	if (r->too_big || r->state == REQ_REFUSED || n > cap - r->len) {
		r->too_big = r->too_big || r->state != REQ_REFUSED;
		r->dropped += n;
		return r->dropped <= HTTP_FRONT_DRAIN_MAX;
	}
	if (r->len + n + 1 > r->cap) {
		size_t ncap = r->cap ? r->cap : 1024;
		char *b;

		while (ncap < r->len + n + 1)
			ncap *= 2;
		if (!(b = realloc(r->body, ncap)))
			return false;
		r->body = b;
		r->cap = ncap;
	}
	memcpy(r->body + r->len, data, n);
	r->len += n;
	r->body[r->len] = '\0';
	return true;
}

/* The whole request is in: to the owner, who may answer at once. */
static enum MHD_Result hand_over(struct http_req *r)
{
	if (r->too_big) {
		refuse(r, MHD_HTTP_CONTENT_TOO_LARGE, "body size", true);
		return MHD_YES;
	}
	conn_unlist(r->c);
	r->state = REQ_OWNER;
	r->owned = true;
	r->f->cfg.on_request(r, r->f->cfg.data);
	return deliver(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **req_cls)
{
	struct listener *l = cls;
	struct http_req *r = *req_cls;

	if (!r) {
		const union MHD_ConnectionInfo *ci =
			mhd.get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

		if (l->f->closing || !ci || !ci->socket_context || !(r = calloc(1, sizeof(*r))))
			return MHD_NO;
		r->f = l->f;
		r->c = ci->socket_context;
		r->mc = mc;
		r->method = method;
		r->lnext = l->f->reqs;
		if (r->lnext)
			r->lnext->lprev = r;
		l->f->reqs = r;
		*req_cls = r;
		admit(r, url, version);
		return MHD_YES;
	}
	if (*upload_data_size) {
		bool ok = take_body(r, upload_data, *upload_data_size);

		*upload_data_size = 0;
		return ok ? MHD_YES : MHD_NO;
	}
	if (r->state == REQ_READING)
		return hand_over(r);
	if (r->state == REQ_REFUSED) {
		if (!r->queued)
			refusal_queue(r);
		return MHD_YES;
	}
	return deliver(r);
}

/* The request ended, answered or not: the owner hears if it still held
 * it, and the connection's clock starts for the next request. */
static void on_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct listener *l = cls;
	struct http_req *r = *req_cls;
	(void)mc;

	if (!r)
		return;
	*req_cls = NULL;
	req_unwatch(r);
	if (r->owned) {
		r->owned = false;
		l->f->cfg.on_gone(r, l->f->cfg.data);
	}
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && r->c && !l->f->closing)
		conn_list(r->c);
	if (r->resp)
		mhd.destroy_response(r->resp);
	if (r->lprev)
		r->lprev->lnext = r->lnext;
	else
		l->f->reqs = r->lnext;
	if (r->lnext)
		r->lnext->lprev = r->lprev;
	free(r->body);
	free(r->out);
	free(r);
}

/* MHD gives the access handler the target with its query cut off and its
 * %xx decoded, a %00 ending it: "/mcp%00", "/mcp?x" and "/%6dcp" would all
 * arrive as "/mcp", one endpoint under many spellings for a proxy or a
 * log to read differently. This hook sees the target as the client sent
 * it, before MHD changes it (MHD_OPTION_URI_LOG_CALLBACK); only cfg.path,
 * byte for byte, is the endpoint (target_is_path). It runs once per
 * request, after the request line and before the access handler; a
 * connection carries one request at a time, so the target waits on the
 * connection. */
static void *on_target(void *cls, const char *uri, struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		mhd.get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *c = ci ? ci->socket_context : NULL;

	(void)cls;
	if (c)
		c->target = uri;
	return NULL; /* the access handler makes the request's record */
}

static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct listener *l = cls;
	struct conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			mhd.get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		/* Without its record the connection has no deadline; the
		 * access handler refuses it (socket_context NULL). */
		if (!ci || !(c = calloc(1, sizeof(*c))))
			return;
		c->f = l->f;
		c->fd = ci->connect_fd;
		*socket_context = c;
		conn_list(c);
		return;
	}
	if (c) {
		conn_unlist(c);
		free(c);
		*socket_context = NULL;
	}
}

__attribute__((format(printf, 2, 0))) static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_front *f = cls;
	char msg[256], esc[512];
	int n;

	if (!log_rate_allow(&f->rate, loop_now_ms(), NULL))
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	/* MHD's messages can quote what a client sent. */
	log_escape(msg, strnlen(msg, sizeof(msg)), esc, sizeof(esc), NULL);
	log_line(LOG_DEBUG, NULL, "http: libmicrohttpd: %s", esc);
}

/* ---- listeners ---------------------------------------------------------- */

static int listen_unix(const char *path, int *out, struct appl_err *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (path[0] != '/' || strlen(path) >= sizeof(sun.sun_path))
		return appl_err_set(err, -EINVAL, "unix socket path must be absolute and short");
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		/* Only a socket left by an earlier run is ours to remove. */
		if (!S_ISSOCK(st.st_mode))
			return appl_err_set(err, -EEXIST, "%s exists and is not a socket", path);
		if (unlink(path) < 0)
			return appl_err_errno(err, -errno, errno, "remove %s", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "socket");
	/* Before listen() nobody can connect, so the mode is set before the
	 * socket is reachable, without touching the process umask. */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || chmod(path, 0660) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return appl_err_errno(err, -e, e, "listen on %s", path);
	}
	*out = fd;
	return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	unsigned long n;

	if (!*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || *end || n > 65535)
		return -EINVAL;
	*port = (uint16_t)n;
	return 0;
}

static int listen_inet(const char *addr, int *out, struct appl_err *err)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(addr, ':');
	size_t hlen = colon ? (size_t)(colon - addr) : 0;
	uint16_t port;
	int fd, one = 1;

	if (!colon || hlen == 0 || hlen >= sizeof(host) || parse_port(colon + 1, &port))
		return appl_err_set(err, -EINVAL, "listen address needs host:port");
	memcpy(host, addr, hlen);
	host[hlen] = '\0';
	if (host[0] == '[' && host[hlen - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return appl_err_set(err, -EINVAL, "bad IPv6 listen address");
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return appl_err_set(err, -EINVAL, "bad IPv4 listen address");
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return appl_err_errno(err, -e, e, "listen on %s", addr);
	}
	*out = fd;
	return 0;
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int listener_start(struct http_front *f, struct listener *l, const char *addr,
			  struct appl_err *err)
{
	const struct http_front_config *cfg = &f->cfg;
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *di;
	struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL}};
	int rc;

	l->f = f;
	l->lfd = l->efd = -1;
	if (strncmp(addr, "unix:", 5) == 0) {
		rc = listen_unix(addr + 5, &l->lfd, err);
		if (rc == 0 && !(l->unix_path = strdup(addr + 5)))
			rc = appl_err_set(err, -ENOMEM, "out of memory");
	} else {
		rc = listen_inet(addr, &l->lfd, err);
	}
	if (rc)
		return rc;
	l->port = bound_port(l->lfd);
	if (cfg->tls_cert_pem) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
						 (void *)cfg->tls_cert_pem};
		tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
						 (void *)cfg->tls_key_pem};
		tls[2] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
						 (void *)TLS_PRIORITIES};
	}
	l->d = mhd.start_daemon(
		flags, 0, NULL, NULL, on_access, l, MHD_OPTION_LISTEN_SOCKET, l->lfd,
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->header_bytes,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->slow_s, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, l, MHD_OPTION_NOTIFY_CONNECTION, on_connection, l,
		MHD_OPTION_URI_LOG_CALLBACK, on_target, l, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
		f, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
	l->failed = !l->d;
	if (!l->d)
		/* MHD may or may not have closed the socket it was given;
		 * leaking it beats closing a number someone reused. */
		return appl_err_set(err, -EINVAL, "cannot serve %s (bad TLS key or certificate?)",
				    addr);
	di = mhd.get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		return appl_err_set(err, -EINVAL, "libmicrohttpd has no epoll descriptor");
	l->efd = di->epoll_fd;
	return loop_add(f->loop, l->efd, EPOLLIN, on_epoll, f, err);
}

/* ---- the front ---------------------------------------------------------- */

static int config_check(const struct http_front_config *cfg, struct appl_err *err)
{
	if (!cfg->nlisten || cfg->nlisten > HTTP_FRONT_LISTEN_MAX || !cfg->listen)
		return appl_err_set(err, -EINVAL, "http: 1 to %u listen addresses",
				    HTTP_FRONT_LISTEN_MAX);
	if (!cfg->path || cfg->path[0] != '/')
		return appl_err_set(err, -EINVAL, "http: the path must start with /");
	if (!cfg->on_request || !cfg->on_gone)
		return appl_err_set(err, -EINVAL, "http: on_request and on_gone are required");
	if (!cfg->max_connections || !cfg->slow_s || !cfg->body_bytes || cfg->header_bytes < 1024)
		return appl_err_set(err, -EINVAL,
				    "http: connections, slow_s and body cap must be set, and at "
				    "least 1024 header bytes");
	if (!cfg->tls_cert_pem != !cfg->tls_key_pem)
		return appl_err_set(err, -EINVAL, "http: TLS needs both a certificate and a key");
	return 0;
}

int http_front_open(struct loop *loop, const struct http_front_config *cfg, struct http_front **out,
		    struct appl_err *err)
{
	struct http_front *f;
	struct appl_err le = {0};
	int rc = config_check(cfg, err);

	if (rc)
		return rc;
	if (http_front_load(&le) < 0)
		return appl_err_set(err, le.code, "http: %s", le.msg);
	if (!(f = calloc(1, sizeof(*f))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	f->loop = loop;
	f->cfg = *cfg;
	loop_task_init(&f->kick, on_kick, f);
	if (!(f->mhd_timer = loop_timer_new(loop, on_kick, f, err)) ||
	    !(f->slow_timer = loop_timer_new(loop, on_slow, f, err))) {
		http_front_close(f);
		return err ? err->code : -ENOMEM;
	}
	for (size_t i = 0; i < cfg->nlisten; i++) {
		f->nls++;
		if ((rc = listener_start(f, &f->ls[i], cfg->listen[i].addr, err))) {
			http_front_close(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

void http_front_close(struct http_front *f)
{
	if (!f)
		return;
	f->closing = true;
	/* MHD must not be stopped with a connection suspended: wake each with
	 * orders to abort, and let MHD close them in one more run. */
	for (struct http_req *r = f->reqs; r; r = r->lnext)
		if (r->suspended) {
			r->aborting = true;
			req_resume(r);
		}
	f->in_mhd++;
	for (size_t i = 0; i < f->nls; i++)
		if (f->ls[i].d)
			mhd.run(f->ls[i].d);
	f->in_mhd--;
	for (size_t i = 0; i < f->nls; i++) {
		struct listener *l = &f->ls[i];

		if (l->efd >= 0)
			loop_del(f->loop, l->efd);
		/* Stopping ends every connection (on_gone for those the owner
		 * holds) and closes the listening socket. */
		if (l->d)
			mhd.stop_daemon(l->d);
		else if (l->lfd >= 0 && !l->failed)
			close(l->lfd);
		if (l->unix_path) {
			unlink(l->unix_path);
			free(l->unix_path);
		}
	}
	loop_task_cancel(f->loop, &f->kick);
	loop_timer_free(f->mhd_timer);
	loop_timer_free(f->slow_timer);
	free(f);
}

unsigned http_front_port(const struct http_front *f, size_t i)
{
	return i < f->nls ? f->ls[i].port : 0;
}

const char *http_req_method(const struct http_req *r)
{
	return r->method;
}

const char *http_req_header(const struct http_req *r, const char *name)
{
	return mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, name);
}

const char *http_req_body(const struct http_req *r, size_t *len)
{
	*len = r->len;
	return r->body ? r->body : "";
}

const void *http_req_principal(const struct http_req *r)
{
	return r->principal;
}

const char *http_req_peer(const struct http_req *r)
{
	return r->peer;
}

void http_req_set_data(struct http_req *r, void *d)
{
	r->data = d;
}

void *http_req_data(const struct http_req *r)
{
	return r->data;
}
