/* front_admit.c: judging a request before its owner sees it (front.h's
 * order: path, method, Host, Origin, token, Accept, content type, body
 * size), reading its body, and the hooks MHD calls for each connection and
 * request.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/front_int.h"
#include "http/header.h"
#include "log/log.h"
#include "metrics/metrics.h"

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

	front_mhd.get_connection_values(mc, MHD_HEADER_KIND, count_one, &c);
	*many = c.n > 1;
	return front_mhd.lookup_connection_value(mc, MHD_HEADER_KIND, name);
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
	r->token_refused = MHD_HTTP_UNAUTHORIZED;
	if (many || http_header_bearer(v, strlen(v), &tok, &toklen))
		return false;
	if (cfg->token) {
		crypto_hash_sha256(h, (const unsigned char *)tok, toklen);
		r->principal = cfg->token(cfg->data, h);
		sodium_memzero(h, sizeof(h));
	}
	if (!r->principal && cfg->bearer)
		r->principal = cfg->bearer(cfg->data, tok, toklen, &r->token_refused);
	return r->principal != NULL;
}

/* Step 3 of the admission (front.h), for the endpoint and the probes
 * alike: whoever may not ask where they are may not ask how we are (a
 * page on a rebound name would read the answer). 0 or 403. */
static unsigned admit_place(struct http_req *r, const char **why)
{
	const struct http_front_config *cfg = &r->f->cfg;
	bool many, many_o;
	const char *host = header_one(r->mc, MHD_HTTP_HEADER_HOST, &many);
	const char *origin = header_one(r->mc, MHD_HTTP_HEADER_ORIGIN, &many_o);

	if (!host || many || !http_header_host_allowed(host, strlen(host), cfg->hosts, cfg->nhosts))
		return *why = "host", MHD_HTTP_FORBIDDEN;
	if (many_o || (origin && !http_header_origin_allowed(origin, strlen(origin), cfg->origins,
							     cfg->norigins)))
		return *why = "origin", MHD_HTTP_FORBIDDEN;
	return 0;
}

/* Steps 3 to 5 of the admission (front.h); 0 or the refusal's status. */
static unsigned admit_headers(struct http_req *r, const struct sockaddr *sa, const char **why)
{
	const struct http_front_config *cfg = &r->f->cfg;
	bool post = strcmp(r->method, "POST") == 0;
	const char *ct, *acc, *cl;
	unsigned accept, status = admit_place(r, why);

	if (status)
		return status;
	if (!auth_ok(r, sa))
		return r->token_refused == MHD_HTTP_FORBIDDEN
			       ? (*why = "role", MHD_HTTP_FORBIDDEN)
			       : (*why = "token", MHD_HTTP_UNAUTHORIZED);
	acc = front_mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	accept = acc ? http_header_accept(acc, strlen(acc)) : 0;
	if (cfg->page)
		return 0;
	if (strcmp(r->method, "GET") == 0 && !(accept & HTTP_ACCEPT_SSE))
		return *why = "accept", MHD_HTTP_NOT_ACCEPTABLE;
	if (!post)
		return 0;
	ct = front_mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND,
					       MHD_HTTP_HEADER_CONTENT_TYPE);
	if (!ct || !http_header_content_json(ct, strlen(ct)))
		return *why = "content type", MHD_HTTP_UNSUPPORTED_MEDIA_TYPE;
	if ((accept & (HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE)) != (HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE))
		return *why = "accept", MHD_HTTP_NOT_ACCEPTABLE;
	cl = front_mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND,
					       MHD_HTTP_HEADER_CONTENT_LENGTH);
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

/* Whether the target as sent, t, and MHD's reading of it, url, are path
 * byte for byte. MHD splits the request line in place: the target ends,
 * at the NUL that was the space, one byte before the version. A target
 * that ends sooner held a NUL byte of its own ("/mcp\0x"), which every
 * hook reads as "/mcp"; anything else in MHD's layout fails closed. */
static bool target_is(const char *t, const char *url, const char *version, const char *path)
{
	return strcmp(t, path) == 0 && strcmp(url, path) == 0 && version == t + strlen(path) + 1;
}

/* What the request's target, as the client sent it (on_target), names:
 * cfg.path first, then the probes' paths when the front answers them. */
static enum req_kind target_kind(struct http_req *r, const char *url, const char *version)
{
	const char *t = r->c->target;
	bool probes = r->f->cfg.unready != NULL;
	const struct http_front_resource *res =
		r->f->cfg.resource ? r->f->cfg.resource(r->f->cfg.data) : NULL;

	r->c->target = NULL;
	if (!t || !url || !version)
		return REQ_NOWHERE;
	if (target_is(t, url, version, r->f->cfg.path))
		return REQ_MCP;
	if (probes && target_is(t, url, version, HTTP_FRONT_HEALTHZ))
		return REQ_HEALTHZ;
	if (probes && target_is(t, url, version, HTTP_FRONT_READYZ))
		return REQ_READYZ;
	if (res)
		for (size_t i = 0; i < 2; i++)
			if (res->paths[i] && target_is(t, url, version, res->paths[i]))
				return REQ_RESOURCE;
	return REQ_NOWHERE;
}

/* A probe's admission (front.h): GET or HEAD, from an allowed Host and
 * Origin, without a body. No token: a load balancer has none, and the
 * answer is one word. A body would be held for nobody: 413 (a chunked one
 * when it comes, take_body). */
static void admit_probe(struct http_req *r, const char *cl, bool now)
{
	const char *why = NULL;
	unsigned status;

	if (strcmp(r->method, "GET") && strcmp(r->method, "HEAD"))
		return front_refuse(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method", now);
	if ((status = admit_place(r, &why)))
		return front_refuse(r, status, why, now);
	if (cl && cl[strspn(cl, "0")])
		return front_refuse(r, MHD_HTTP_CONTENT_TOO_LARGE, "body size", true);
}

/* Step 2: the endpoint's methods, or a page's. */
static bool method_allowed(const struct http_req *r)
{
	static const char *const endpoint[] = {"POST", "GET", "DELETE", NULL};
	static const char *const page[] = {"GET", "HEAD", NULL};

	for (const char *const *m = r->f->cfg.page ? page : endpoint; *m; m++)
		if (strcmp(r->method, *m) == 0)
			return true;
	return false;
}

/* The head has come: judge it (front.h's order). */
static void admit(struct http_req *r, const char *url, const char *version)
{
	const union MHD_ConnectionInfo *ci =
		front_mhd.get_connection_info(r->mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;
	const char *why = NULL;
	unsigned status;

	const char *cl = front_mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND,
							   MHD_HTTP_HEADER_CONTENT_LENGTH);
	/* A body too long to drop is not waited for. */
	bool now = cl && (strlen(cl) > 9 || strtoul(cl, NULL, 10) > HTTP_FRONT_DRAIN_MAX);

	peer_name(sa, r->peer, sizeof(r->peer));
	r->kind = target_kind(r, url, version);
	if (r->kind == REQ_NOWHERE)
		return front_refuse(r, MHD_HTTP_NOT_FOUND, "path", now);
	if (r->kind != REQ_MCP)
		return admit_probe(r, cl, now);
	if (!method_allowed(r))
		return front_refuse(r, MHD_HTTP_METHOD_NOT_ALLOWED, "method", now);
	if ((status = admit_headers(r, sa, &why)))
		/* 413 at once: no 100 Continue, not a byte of the body read */
		return front_refuse(r, status, why, now || status == MHD_HTTP_CONTENT_TOO_LARGE);
}

/* Keep body bytes up to the cap; past it, drop up to
 * HTTP_FRONT_DRAIN_MAX more so the 413 can follow the body (MHD takes an
 * answer only once the request is whole). Returns false to cut off. */
static bool take_body(struct http_req *r, const char *data, size_t n)
{
	size_t cap = r->f->cfg.body_bytes;

	if (r->too_big || r->state == REQ_REFUSED || r->kind != REQ_MCP || n > cap - r->len) {
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

/* ---- MHD's hooks -------------------------------------------------------- */

/* The whole request is in: to the owner, who may answer at once. */
static enum MHD_Result hand_over(struct http_req *r)
{
	if (r->too_big) {
		front_refuse(r, MHD_HTTP_CONTENT_TOO_LARGE, "body size", true);
		return MHD_YES;
	}
	if (r->kind != REQ_MCP)
		return front_probe_answer(r);
	front_conn_unlist(r->c);
	r->state = REQ_OWNER;
	r->owned = true;
	r->f->cfg.on_request(r, r->f->cfg.data);
	return front_deliver(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
				 const char *method, const char *version, const char *upload_data,
				 size_t *upload_data_size, void **req_cls)
{
	struct listener *l = cls;
	struct http_req *r = *req_cls;

	if (!r) {
		const union MHD_ConnectionInfo *ci =
			front_mhd.get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

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
			front_refusal_queue(r);
		return MHD_YES;
	}
	return front_deliver(r);
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
	if (r->status && !l->f->cfg.page)
		metrics_http(r->status);
	front_req_unwatch(r);
	if (r->owned) {
		r->owned = false;
		l->f->cfg.on_gone(r, l->f->cfg.data);
	}
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && r->c && !l->f->closing)
		front_conn_list(r->c);
	if (r->resp)
		front_mhd.destroy_response(r->resp);
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
		front_mhd.get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
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
			front_mhd.get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		/* Without its record the connection has no deadline; the
		 * access handler refuses it (socket_context NULL). */
		if (!ci || !(c = calloc(1, sizeof(*c))))
			return;
		c->f = l->f;
		c->fd = ci->connect_fd;
		*socket_context = c;
		front_conn_list(c);
		return;
	}
	if (c) {
		front_conn_unlist(c);
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
/* The daemon serving l's socket, with the front's limits, its hooks this
 * file's: every request is judged here before its owner sees it. NULL when
 * MHD refuses it (a bad TLS key or certificate). */
struct MHD_Daemon *front_daemon_start(struct listener *l, unsigned flags,
				      struct MHD_OptionItem *tls)
{
	const struct http_front_config *cfg = &l->f->cfg;

	return front_mhd.start_daemon(
		flags, 0, NULL, NULL, on_access, l, MHD_OPTION_LISTEN_SOCKET, l->lfd,
		MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->header_bytes,
		MHD_OPTION_CONNECTION_TIMEOUT, cfg->slow_s, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, l, MHD_OPTION_NOTIFY_CONNECTION, on_connection, l,
		MHD_OPTION_URI_LOG_CALLBACK, on_target, l, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
		l->f, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}
