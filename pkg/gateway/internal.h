/* internal.h: `appliance run`'s state, shared by gateway.c (serving) and
 * reload.c (a new policy without a restart). Not for use outside
 * pkg/gateway. */
#ifndef APPL_GATEWAY_INTERNAL_H
#define APPL_GATEWAY_INTERNAL_H

#include <stdbool.h>
#include <time.h>

#include "gateway/gateway.h"
#include "log/log.h"
#include "mcp/session.h"

struct gateway_scrape;

#define GATEWAY_DRAIN_MS 2000 /* at shutdown, for answers still queued */

/* An HTTP client: one token of the policy. Its sessions point at it, so it
 * lives as long as the gateway: a reload that keeps the token (the same
 * name and hash) keeps it, pointing p.role at the new policy's role; one
 * that drops the token ends its sessions and retires it. */
struct gw_principal {
	struct mcp_principal p; /* p.client is client; p.role the current policy's */
	char *client;
	unsigned char sha256[32];
	struct gw_principal *next; /* retired ones */
};

struct gateway {
	const struct policy *policy; /* the current one */
	const struct policy_verified *verified;
	const char *policy_path;
	time_t loaded_at;
	const struct gateway_config *cfg;
	struct engine *e;
	const struct policy_limits *lim; /* the engine's */
	struct policy_limits lim_copy;	 /* gateway_http_try's */
	struct loop *loop;
	struct mcp_server *srv;
	struct mcp_stdio *stdio;
	struct mcp_principal stdio_client;
	struct mcp_http *http;		  /* instead of stdio when the policy has `http` */
	struct gateway_scrape *scrape;	  /* GET /metrics, when the policy says where */
	struct gw_principal **principals; /* one per token, in the policy's order */
	struct gw_principal *retired;	  /* tokens reloads dropped */
	char *tls_cert, *tls_key;	  /* PEM, read at start */
	struct log_rate auth_rate;	  /* refused authentications audited */
	const char *ready_said;		  /* readiness last answered (NULL: ready) */
	bool input_done;		  /* a script read from a file has ended */
	const char *reload_by;		  /* a reload was asked for, by whom */
	char reload_who[64];
};

/* reload.c */
/* The policy's tokens as principals (gw->policy's; kept ones reused). 0, or
 * -ENOMEM with err. */
int gateway_principals(struct gateway *gw, struct appl_err *err);
void gateway_principals_free(struct gateway *gw);

/* Read the policy file again and serve it, when it passes every check a
 * start makes (engine_reload); else nothing changes. who asked (the
 * admin peer's "uid U pid P", or "SIGHUP") goes to the log and the audit
 * log. 0, or negative with why (cap bytes) saying what refused it. */
int gateway_reload(struct gateway *gw, const char *who, char *why, size_t cap);

#endif
