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

#include "base/limits.h"
#include "gateway/gateway.h"
#include "log/log.h"
#include "mcp/session.h"
#include "policy/load.h"
#include "policy/minisign.h"

struct admin;
struct engine;
struct loop;
struct mcp_http;
struct mcp_stdio;

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

struct gateway {
	const struct policy *policy;
	const struct gateway_config *cfg;
	struct engine *e;
	const struct policy_limits *lim; /* the engine's */
	struct policy_limits lim_copy;	 /* gateway_http_try's */
	struct loop *loop;
	struct mcp_server *srv;
	struct mcp_stdio *stdio;
	struct mcp_principal stdio_client;
	struct mcp_http *http;		  /* instead of stdio when the policy has `http` */
	struct mcp_principal *principals; /* one per token, in the policy's order */
	char *tls_cert, *tls_key;	  /* PEM, read at start */
	struct log_rate auth_rate;	  /* refused authentications audited */
	bool input_done;		  /* a script read from a file has ended */
	struct gateway_policy_info info;
	uint64_t started_ms; /* loop_now_ms() at start: the uptime */
	struct admin *admin; /* NULL until open */
	struct gateway_reloads reloads;
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

/* ---- reload.c ----------------------------------------------------------------- */

/* Read the policy again and take it where it may be taken; who says who
 * asked ("uid 0 pid 1234", "SIGHUP"). 0, or negative with why (cap
 * bytes). Between loop rounds. */
int gateway_reload(struct gateway *gw, const char *who, char *why, size_t cap);

#endif
