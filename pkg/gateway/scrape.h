/* scrape.h: GET /metrics on the policy's http.metrics_listen
 * (docs/metrics.md): the process's registry (metrics/metrics.h) in the
 * Prometheus text format 0.0.4, on a listener of its own that is loopback
 * or a unix socket (the policy allows nothing else) and asks for no
 * token. It is the HTTP front as a page (http/front.h): any other path
 * 404, any method but GET and HEAD 405, a Host that is not a loopback
 * name or the listener's own address 403 (a page of another site,
 * rebound to this host, reads nothing), an Origin 403. The address is
 * read at start only.
 */
#ifndef APPL_GATEWAY_SCRAPE_H
#define APPL_GATEWAY_SCRAPE_H

#include "base/err.h"
#include "loop/loop.h"
#include "policy/policy.h"

struct gateway_scrape;

/* Serve p's metrics listener in loop (both borrowed: they must outlive
 * it): 0 with *out a new object, or NULL when p names none; else a
 * negative code with err (nothing left open). */
int gateway_scrape_open(struct loop *loop, const struct policy *p, struct gateway_scrape **out,
			struct appl_err *err);

/* Stop serving, removing a unix socket. Safe on NULL. */
void gateway_scrape_close(struct gateway_scrape *s);

#endif
