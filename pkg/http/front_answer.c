/* front_answer.c: the HTTP front's answers (see front.h): the owner's
 * reply or event stream, and the front's own refusals.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/front_int.h"
#include "log/log.h"

#define STREAM_BLOCK (16u * 1024)

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
		if (front_mhd.add_response_header(resp, name, colon) != MHD_YES)
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

/* The Bearer challenge of a 401, or of a 403 for a token's role: the
 * error only when a token came (RFC 6750 3.1), and where the resource's
 * metadata is (RFC 9728 5.1) when it has some. */
static void challenge_add(struct http_req *r, struct MHD_Response *resp)
{
	const struct http_front_config *cfg = &r->f->cfg;
	const struct http_front_resource *res = cfg->resource ? cfg->resource(cfg->data) : NULL;
	const char *err = !r->token_refused			   ? NULL
			  : r->token_refused == MHD_HTTP_FORBIDDEN ? "insufficient_scope"
								   : "invalid_token";
	char v[APPL_HTTP_CHALLENGE_MAX];
	int n;

	if (r->status == MHD_HTTP_FORBIDDEN && r->token_refused != MHD_HTTP_FORBIDDEN)
		return; /* Host or Origin: no token was judged */
	n = snprintf(v, sizeof(v), "Bearer%s%s%s%s%s", err ? " error=\"" : "", err ? err : "",
		     err ? "\"" : "", res && res->challenge ? (err ? ", " : " ") : "",
		     res && res->challenge ? res->challenge : "");
	if (n < 0 || (size_t)n >= sizeof(v) || strpbrk(v, "\r\n"))
		snprintf(v, sizeof(v), "Bearer");
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, v);
}

void front_refusal_queue(struct http_req *r)
{
	static const char *const allow[] = {"Allow: GET, POST, DELETE", NULL};
	static const char *const allow_get[] = {"Allow: GET, HEAD", NULL};
	const char *text = refusal_text(r->status);
	struct MHD_Response *resp = front_mhd.create_response_from_buffer(
		strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);

	r->queued = true;
	front_conn_unlist(r->c);
	if (!resp)
		return;
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				      "text/plain; charset=utf-8");
	if (r->status == MHD_HTTP_METHOD_NOT_ALLOWED)
		add_headers(resp, r->kind == REQ_MCP && !r->f->cfg.page ? allow : allow_get);
	if (r->status == MHD_HTTP_UNAUTHORIZED || r->status == MHD_HTTP_FORBIDDEN)
		challenge_add(r, resp);
	front_mhd.queue_response(r->mc, r->status, resp);
	front_mhd.destroy_response(resp);
}

/* Refuse r. The answer waits for the end of the body (read and dropped,
 * up to HTTP_FRONT_DRAIN_MAX), because MHD closes a connection answered
 * before its request is whole; now says answer at once (a body too big
 * to read: the connection closes after). */
void front_refuse(struct http_req *r, unsigned status, const char *why, bool now)
{
	r->state = REQ_REFUSED;
	r->status = status;
	refusal_log(r->f, status, why, r->peer);
	if (now)
		front_refusal_queue(r);
}

/* A probe's answer, from the access handler once the request is whole:
 * the loop turned to make it, so /healthz is 200 "ok"; /readyz is 200
 * "ready" or 503 and the owner's word. Not logged: a load balancer asks
 * every few seconds. HEAD gets the same head (MHD sends no body). */
/* The resource's metadata document, as a probe's answer is made. */
static enum MHD_Result resource_answer(struct http_req *r)
{
	const struct http_front_config *cfg = &r->f->cfg;
	const struct http_front_resource *res = cfg->resource ? cfg->resource(cfg->data) : NULL;
	struct MHD_Response *resp;
	enum MHD_Result ok;

	front_conn_unlist(r->c);
	r->state = REQ_DONE;
	r->queued = true;
	resp = res ? front_mhd.create_response_from_buffer(res->doc_len, (void *)res->doc,
							   MHD_RESPMEM_MUST_COPY)
		   : front_mhd.create_response_from_buffer(strlen("not found\n"), "not found\n",
							   MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				      res ? "application/json" : "text/plain; charset=utf-8");
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ok = front_mhd.queue_response(r->mc, res ? MHD_HTTP_OK : MHD_HTTP_NOT_FOUND, resp);
	front_mhd.destroy_response(resp);
	return ok;
}

enum MHD_Result front_probe_answer(struct http_req *r)
{
	const struct http_front_config *cfg = &r->f->cfg;
	const char *word = r->kind == REQ_READYZ ? cfg->unready(cfg->data) : NULL;
	const char *text = word ? word : r->kind == REQ_READYZ ? "ready" : "ok";
	char body[32];
	int n = snprintf(body, sizeof(body), "%s\n", text);
	struct MHD_Response *resp;
	enum MHD_Result ok;

	if (r->kind == REQ_RESOURCE)
		return resource_answer(r);
	front_conn_unlist(r->c);
	r->state = REQ_DONE;
	r->queued = true;
	resp = front_mhd.create_response_from_buffer(n > 0 ? (size_t)n : 0, body,
						     MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return MHD_NO;
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				      "text/plain; charset=utf-8");
	front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	ok = front_mhd.queue_response(r->mc, word ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK,
				      resp);
	front_mhd.destroy_response(resp);
	return ok;
}

/* Hand the owner's answer to MHD (from the access handler only, where
 * MHD allows it), or suspend until there is one. */
enum MHD_Result front_deliver(struct http_req *r)
{
	if (r->aborting)
		return MHD_NO;
	if (!r->resp) {
		front_req_suspend(r);
		return MHD_YES;
	}
	if (!r->queued) {
		enum MHD_Result ok = front_mhd.queue_response(r->mc, r->status, r->resp);

		r->queued = true;
		front_mhd.destroy_response(r->resp);
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
	resp = front_mhd.create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!resp)
		return -ENOMEM;
	if ((content_type && front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
							   content_type) != MHD_YES) ||
	    add_headers(resp, headers)) {
		front_mhd.destroy_response(resp);
		return -EINVAL;
	}
	r->resp = resp;
	r->status = status;
	r->owned = false;
	r->state = REQ_DONE;
	front_req_resume(r);
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
	front_req_suspend(r);
	return 0;
}

int http_req_stream(struct http_req *r, unsigned status, const char *const *headers)
{
	struct MHD_Response *resp;
	int rc = answer_check(r);

	if (rc)
		return rc;
	resp = front_mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read,
						       r, NULL);
	if (!resp)
		return -ENOMEM;
	if (front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					  "text/event-stream") != MHD_YES ||
	    front_mhd.add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") !=
		    MHD_YES ||
	    add_headers(resp, headers)) {
		front_mhd.destroy_response(resp);
		return -EINVAL;
	}
	r->resp = resp;
	r->status = status;
	r->stream = true;
	front_req_resume(r);
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
		front_req_resume(r);
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
	front_req_resume(r);
	return 0;
}

int http_req_stream_end(struct http_req *r)
{
	if (!r->owned || !r->stream || r->stream_end)
		return -EPIPE;
	r->stream_end = true;
	r->owned = false;
	r->state = REQ_DONE;
	front_req_resume(r);
	return 0;
}
