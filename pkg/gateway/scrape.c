/* scrape.c: GET /metrics on its own listener (see scrape.h). */
#include "gateway/scrape.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "http/front.h"
#include "log/log.h"
#include "metrics/metrics.h"

#define SCRAPE_PATH "/metrics"
#define SCRAPE_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct gateway_scrape {
	struct http_front *front;
	struct http_front_listen listen;
	/* The loopback names and the listener's own address, on any port. */
	const char *hosts[4];
};

/* Every scrape's principal: the listener is local, its peers too. */
static const char scraper[] = "metrics";

static void on_request(struct http_req *r, void *data)
{
	static const char *const headers[] = {"Cache-Control: no-store", NULL};
	static const char fault[] = "the metrics could not be rendered\n";
	struct appl_err err = {0};
	size_t len;
	char *text;

	(void)data;
	if (metrics_render(&text, &len, &err) < 0) {
		log_line(LOG_ERR, NULL, "%s", err.msg);
		http_req_reply(r, 500, "text/plain; charset=utf-8", fault, strlen(fault), NULL);
		return;
	}
	http_req_reply(r, 200, SCRAPE_TYPE, text, len, headers);
	free(text);
}

/* Answered at once, never held: nothing to let go of. */
static void on_gone(struct http_req *r, void *data)
{
	(void)r;
	(void)data;
}

static size_t hosts_fill(struct gateway_scrape *s, const struct policy_listen *l)
{
	size_t n = 0;

	s->hosts[n++] = "localhost";
	s->hosts[n++] = "127.0.0.1";
	s->hosts[n++] = "[::1]";
	if (l->kind == POLICY_LISTEN_INET4 && strcmp(l->address, "127.0.0.1") != 0)
		s->hosts[n++] = l->address;
	return n;
}

int gateway_scrape_open(struct loop *loop, const struct policy *p, struct gateway_scrape **out,
			struct appl_err *err)
{
	const struct policy_http *h = policy_http(p);
	const struct policy_listen *l = h ? h->metrics : NULL;
	struct http_front_config c;
	struct gateway_scrape *s;

	*out = NULL;
	if (!l)
		return 0;
	if (!(s = calloc(1, sizeof(*s))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	s->listen.addr = l->text;
	c = (struct http_front_config){.listen = &s->listen,
				       .nlisten = 1,
				       .path = SCRAPE_PATH,
				       .hosts = s->hosts,
				       .nhosts = hosts_fill(s, l),
				       .max_connections = APPL_METRICS_CONNECTIONS,
				       .header_bytes = APPL_HTTP_HEADER_BYTES,
				       .body_bytes = APPL_METRICS_BODY_MAX,
				       .slow_s = APPL_METRICS_SLOW_S,
				       .page = true,
				       .anonymous = scraper,
				       .on_request = on_request,
				       .on_gone = on_gone,
				       .data = s};
	if (http_front_open(loop, &c, &s->front, err) < 0) {
		free(s);
		return appl_err_prefix(err, "http.metrics_listen");
	}
	log_line(LOG_INFO, NULL, "serving metrics at %s%s", l->text, SCRAPE_PATH);
	*out = s;
	return 0;
}

void gateway_scrape_close(struct gateway_scrape *s)
{
	if (!s)
		return;
	http_front_close(s->front);
	free(s);
}
