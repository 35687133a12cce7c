/* internal.h: the gateway's state, shared by its own files: gateway.c
 * (the transports, their sessions, the loop), admin.c (the admin socket's
 * status and its queue of reloads), reload.c (the reload itself) and
 * policy_info.c (the policy a status shows). Calls go gateway.c -> admin.c
 * -> reload.c, and each may call policy_info.c; never back. Not for use
 * outside pkg/gateway.
 */
#ifndef APPL_GATEWAY_INTERNAL_H
#define APPL_GATEWAY_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/limits.h"
#include "gateway/gateway.h"
#include "log/log.h"
#include "mcp/session.h"
#include "policy/load.h"
#include "policy/minisign.h"

struct admin;
struct engine;
struct gateway_scrape;
struct loop;
struct mcp_http;
struct mcp_stdio;

#define GATEWAY_DRAIN_MS 2000 /* at shutdown, for answers still queued */

/* The policy being served, as a status shows it: filled at start and by
 * every reload that takes effect (gateway_policy_info_set), read each
 * time a status is asked for. */
struct gateway_policy_info {
	char path[PATH_MAX]; /* the signature file, absolute where it could be made so */
	uint64_t serial;
	char deployment[APPL_POLICY_DEPLOYMENT_MAX + 1];
	char key_id[POLICY_KEYID_HEX];
	int64_t expires;   /* unix seconds */
	int64_t loaded_at; /* unix seconds: when it was verified and taken */
};

/* Reloads asked for over the admin socket, run together between two loop
 * rounds. A ticket whose peer left stays until then (its answer goes
 * nowhere), so there may be more than there are connections. */
#define GATEWAY_RELOADS_MAX (2 * APPL_ADMIN_CONNECTIONS_MAX)
#define GATEWAY_WHO_MAX	    96

struct gateway_reloads {
	uint64_t tickets[GATEWAY_RELOADS_MAX];
	size_t n;
	char who[GATEWAY_WHO_MAX]; /* the first asker's "uid U pid P" */
};

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
	struct gateway_oauth *oauth;	  /* over HTTP: JWT access tokens (oauth.c) */
	struct gateway_cluster *cluster;  /* a replica: the shared key, the ledger */
	char *tls_cert, *tls_key;	  /* PEM, read at start */
	struct log_rate auth_rate;	  /* refused authentications audited */
	const char *ready_said;		  /* readiness last answered (NULL: ready) */
	bool input_done;		  /* a script read from a file has ended */
	const char *reload_by;		  /* SIGHUP asked for a reload */
	struct gateway_policy_info info;
	uint64_t started_ms; /* loop_now_ms() at start: the uptime */
	struct admin *admin; /* NULL until open */
	struct gateway_reloads reloads;
	/* The last listing handed to the MCP server (its hook's): a role's
	 * code tools as MCP lists them. */
	const struct policy_code_tool *code_tools[APPL_CODE_TOOLS_MAX];
	struct mcp_code_tool listed[APPL_CODE_TOOLS_MAX];
};

/* ---- policy_info.c ------------------------------------------------------------ */

/* Fill info from a verified policy: path (the signature file; made
 * absolute when it can be), what v says, loaded_at. */
void gateway_policy_info_set(struct gateway_policy_info *info, const char *path,
			     const struct policy_verified *v, int64_t loaded_at);

/* {path, serial, deployment, key_id, expires, loaded_at} (times as
 * RFC 3339 UTC): new reference, NULL on out of memory. */
json_t *gateway_policy_info_json(const struct gateway_policy_info *info);

/* ---- admin.c ------------------------------------------------------------------ */

/* Open the admin socket (cfg->admin_dir, cfg->admin_name; docs/operating.md)
 * on the gateway's loop: 0, or negative with err. */
int gateway_admin_open(struct gateway *gw, struct appl_err *err);

/* Between two loop rounds (never inside a callback): when reloads were
 * asked for, run one (gateway_reload) and answer every asker with its
 * outcome. */
void gateway_admin_reloads(struct gateway *gw);

/* Answer reloads still queued (the appliance is stopping), then close the
 * socket and remove it. Safe when it never opened. */
void gateway_admin_close(struct gateway *gw);

/* ---- oauth.c ------------------------------------------------------------------ */

/* What one policy's http.oauth says, its keys read (docs/http.md, OAuth). */
struct gateway_oauth_conf;
struct gateway_oauth;
struct http_front_resource;

/* The OAuth side of the front (gw->oauth): its principals, and p's
 * configuration in force. 0, or negative with err (a key set that cannot
 * be read or fetched). */
int gateway_oauth_open(struct gateway *gw, struct appl_err *err);
void gateway_oauth_close(struct gateway *gw);

/* p's configuration (*out new; NULL when p has no http.oauth), made
 * against o's (may be NULL): its keys read now, or kept from o's when
 * the jwks_url is the same. 0, or negative with err. */
int gateway_oauth_conf_make(const struct gateway_oauth *o, const struct policy *p,
			    struct gateway_oauth_conf **out, struct appl_err *err);
void gateway_oauth_conf_free(struct gateway_oauth_conf *c);
/* c (steals; NULL: none) in force from now on; gw->policy is already
 * its policy. Principals whose role left it end their sessions. */
void gateway_oauth_conf_use(struct gateway *gw, struct gateway_oauth_conf *c);

/* The front's hooks (mcp/http.h), data the gateway. */
const struct mcp_principal *gateway_oauth_bearer(void *data, const char *tok, size_t len,
						 unsigned *status);
const struct http_front_resource *gateway_oauth_resource(void *data);

/* ---- cluster.c ---------------------------------------------------------------- */

/* A replica, when the policy has a cluster section (it then needs
 * cfg->cluster_key, and cfg->cluster_key needs it): the key to the MCP
 * server, the ledger opened, the engine's runs given it. 0, or negative
 * with err. */
struct gateway_cluster;
int gateway_cluster_open(struct gateway *gw, struct appl_err *err);
void gateway_cluster_close(struct gateway *gw);

/* ---- reload.c ----------------------------------------------------------------- */

/* The policy's tokens as principals (gw->policy's; kept ones reused). 0, or
 * -ENOMEM with err. */
int gateway_principals(struct gateway *gw, struct appl_err *err);
void gateway_principals_free(struct gateway *gw);

/* Read the policy file again and serve it, when it passes every check a
 * start makes (engine_reload); else nothing changes. who asked (the
 * admin peer's "uid U pid P", or "SIGHUP") goes to the log and the audit
 * log. 0, or negative with why (cap bytes) saying what refused it.
 * Between loop rounds, never inside a callback. */
int gateway_reload(struct gateway *gw, const char *who, char *why, size_t cap);

#endif
