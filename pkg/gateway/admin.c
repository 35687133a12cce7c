/* admin.c: the gateway's side of the admin socket (admin/admin.h,
 * docs/operating.md): what its status says, and the reloads it is asked
 * for, queued and run between loop rounds (internal.h). */
#include "gateway/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "admin/admin.h"
#include "engine/engine.h"
#include "loop/loop.h"
#include "mcp/http.h"

/* NAME when none was given: the policy's deployment, or "appliance" for
 * a policy that names none. */
#define GATEWAY_ADMIN_NAME_DEF "appliance"

/* ---- the status --------------------------------------------------------------------- */

/* Each token's name and its legacy sessions open now: never the token,
 * nor its hash. null over stdio. */
static json_t *http_json(const struct gateway *gw)
{
	const struct policy_http *ph = policy_http(gw->policy);
	json_t *listen = json_array(), *sessions = json_object();

	if (!gw->http || !ph) {
		json_decref(listen);
		json_decref(sessions);
		return json_null();
	}
	for (size_t i = 0; listen && i < ph->nlisten; i++)
		json_array_append_new(listen, json_string(ph->listen[i].text));
	for (size_t i = 0; sessions && i < policy_token_count(gw->policy); i++) {
		const char *name = gw->principals[i]->client;
		json_int_t had = json_integer_value(json_object_get(sessions, name));

		json_object_set_new(
			sessions, name,
			json_integer(had + mcp_http_sessions(gw->http, &gw->principals[i]->p)));
	}
	return json_pack("{so so}", "listen", listen, "sessions", sessions);
}

/* policy, uptime_s, servers, cells, pool, sessions, http, audit (the admin socket
 * puts name and pid first). */
static json_t *status_of(void *data)
{
	static const char *const engine_keys[] = {"servers", "cells", "pool", "sessions"};
	struct gateway *gw = data;
	json_t *eng = engine_status(gw->e), *o;

	o = eng ? json_pack("{so sI}", "policy", gateway_policy_info_json(&gw->info), "uptime_s",
			    (json_int_t)((loop_now_ms() - gw->started_ms) / 1000u))
		: NULL;
	for (size_t i = 0; o && i < sizeof(engine_keys) / sizeof(engine_keys[0]); i++)
		json_object_set(o, engine_keys[i], json_object_get(eng, engine_keys[i]));
	if (o && (json_object_set_new(o, "http", http_json(gw)) < 0 ||
		  json_object_set(o, "audit", json_object_get(eng, "audit")) < 0)) {
		json_decref(o);
		o = NULL;
	}
	json_decref(eng);
	return o;
}

/* ---- reloads ------------------------------------------------------------------------ */

static void reload_asked(void *data, uint64_t ticket, const struct admin_peer *peer)
{
	struct gateway *gw = data;
	struct gateway_reloads *q = &gw->reloads;

	if (q->n == GATEWAY_RELOADS_MAX) {
		admin_reload_done(gw->admin, ticket, -EBUSY,
				  "too many reloads asked for at once: try again");
		return;
	}
	if (q->n == 0)
		snprintf(q->who, sizeof(q->who), "uid %u pid %d", (unsigned)peer->uid,
			 (int)peer->pid);
	q->tickets[q->n++] = ticket;
}

void gateway_admin_reloads(struct gateway *gw)
{
	/* A copy: asks that come while it runs (it may turn the loop) wait
	 * for the next one. */
	struct gateway_reloads q = gw->reloads;
	char who[GATEWAY_WHO_MAX + 32], why[APPL_ERR_MSG_MAX] = "";
	int rc;

	if (q.n == 0)
		return;
	gw->reloads.n = 0;
	if (q.n == 1)
		snprintf(who, sizeof(who), "%s", q.who);
	else
		snprintf(who, sizeof(who), "%s (and %zu more)", q.who, q.n - 1);
	rc = gateway_reload(gw, who, why, sizeof(why));
	if (rc < 0 && !why[0])
		snprintf(why, sizeof(why), "%s", strerror(-rc));
	for (size_t i = 0; i < q.n; i++)
		admin_reload_done(gw->admin, q.tickets[i], rc, rc < 0 ? why : NULL);
}

/* ---- the socket --------------------------------------------------------------------- */

int gateway_admin_open(struct gateway *gw, struct appl_err *err)
{
	const char *dep = policy_deployment(gw->policy);
	struct admin_config c = {
		.dir = gw->cfg->admin_dir,
		.name = gw->cfg->admin_name,
		.hooks = {.status = status_of, .reload = reload_asked, .data = gw},
	};

	if (!c.name)
		c.name = strcmp(dep, POLICY_DEPLOYMENT_DEFAULT) != 0 &&
					 admin_name_valid(dep, strlen(dep))
				 ? dep
				 : GATEWAY_ADMIN_NAME_DEF;
	if (admin_open(gw->loop, &c, &gw->admin, err) < 0)
		return err->code;
	log_line(LOG_INFO, NULL, "admin socket: %s", admin_path(gw->admin));
	return 0;
}

void gateway_admin_close(struct gateway *gw)
{
	for (size_t i = 0; i < gw->reloads.n; i++)
		admin_reload_done(gw->admin, gw->reloads.tickets[i], -ECANCELED,
				  "the appliance is stopping: no reload");
	gw->reloads.n = 0;
	admin_close(gw->admin);
	gw->admin = NULL;
}
