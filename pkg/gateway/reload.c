/* reload.c: `appliance run` takes a new policy without a restart (see
 * internal.h): the file read again and held to what a start checks, then
 * the engine's reload, then the clients' side (tokens, roles). */
#define _GNU_SOURCE
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "engine/engine.h"
#include "gateway/internal.h"
#include "mcp/http.h"
#include "metrics/metrics.h"

/* ---- the clients: one principal per token ------------------------------------------- */

static struct gw_principal *principal_take(struct gateway *gw, const struct policy_token *t)
{
	for (size_t i = 0; gw->principals && gw->principals[i]; i++) {
		struct gw_principal *gp = gw->principals[i];

		if (strcmp(gp->client, t->name) == 0 &&
		    sodium_memcmp(gp->sha256, t->sha256, sizeof(gp->sha256)) == 0)
			return gp;
	}
	return NULL;
}

static struct gw_principal *principal_new(const struct policy_token *t)
{
	struct gw_principal *gp = calloc(1, sizeof(*gp));

	if (!gp || !(gp->client = strdup(t->name))) {
		free(gp);
		return NULL;
	}
	memcpy(gp->sha256, t->sha256, sizeof(gp->sha256));
	gp->p.client = gp->client;
	return gp;
}

static bool in(struct gw_principal *const *v, const struct gw_principal *gp)
{
	for (size_t i = 0; v && v[i]; i++)
		if (v[i] == gp)
			return true;
	return false;
}

/* now's principals that are not gw's too (a refused reload's). */
static void principals_drop(struct gateway *gw, struct gw_principal **now)
{
	for (size_t i = 0; now && now[i]; i++)
		if (!in(gw->principals, now[i])) {
			free(now[i]->client);
			free(now[i]);
		}
	free(now);
}

/* The principals of p's tokens (NULL-ended, new), the old ones reused
 * where the token is the same. */
static struct gw_principal **principals_make(struct gateway *gw, const struct policy *p)
{
	size_t n = policy_token_count(p);
	struct gw_principal **v = calloc(n + 1, sizeof(*v));

	for (size_t i = 0; v && i < n; i++) {
		const struct policy_token *t = policy_token_get(p, i);

		if (!(v[i] = principal_take(gw, t)) && !(v[i] = principal_new(t))) {
			principals_drop(gw, v);
			return NULL;
		}
	}
	return v;
}

/* The old principals the new list has not: their sessions end now. */
static void principals_retire(struct gateway *gw, struct gw_principal **now)
{
	for (size_t i = 0; gw->principals && gw->principals[i]; i++) {
		struct gw_principal *gp = gw->principals[i];
		unsigned ended, tasks;

		if (in(now, gp))
			continue;
		ended = mcp_http_principal_end(gw->http, &gp->p,
					       "the client's token was taken out of the policy");
		tasks = mcp_server_client_tasks_end(gw->srv, gp->client, "reload");
		log_line(LOG_INFO, NULL,
			 "%s: its token is no longer in the policy: %u session%s and %u task%s "
			 "ended",
			 gp->client, ended, ended == 1 ? "" : "s", tasks, tasks == 1 ? "" : "s");
		engine_sessions_end_client(gw->e, gp->client, "reload");
		gp->p.role = NULL;
		gp->next = gw->retired;
		gw->retired = gp;
	}
}

/* now (principals_make's for gw->policy) in place of the old ones. */
static void principals_use(struct gateway *gw, struct gw_principal **now)
{
	principals_retire(gw, now);
	free(gw->principals);
	gw->principals = now;
	/* A role changed applies from the next request; its sessions list
	 * again. */
	for (size_t i = 0; now[i]; i++) {
		const char *role = policy_token_get(gw->policy, i)->role, *was = now[i]->p.role;

		now[i]->p.role = role;
		if (was && strcmp(was, role) != 0)
			engine_sessions_end_client(gw->e, now[i]->client, "reload");
		if (was && strcmp(was, role) != 0 && gw->srv)
			mcp_server_tools_changed(gw->srv, role);
	}
}

int gateway_principals(struct gateway *gw, struct appl_err *err)
{
	struct gw_principal **now = principals_make(gw, gw->policy);

	if (!now)
		return appl_err_set(err, -ENOMEM, "out of memory");
	principals_use(gw, now);
	return 0;
}

void gateway_principals_free(struct gateway *gw)
{
	for (size_t i = 0; gw->principals && gw->principals[i]; i++) {
		free(gw->principals[i]->client);
		free(gw->principals[i]);
	}
	free(gw->principals);
	gw->principals = NULL;
	while (gw->retired) {
		struct gw_principal *gp = gw->retired;

		gw->retired = gp->next;
		free(gp->client);
		free(gp);
	}
}

/* ---- the reload -------------------------------------------------------------------- */

struct loaded {
	struct gateway *gw;
	const struct policy *policy;
	void *handle;
	struct gw_principal **principals; /* the new policy's, made before it is taken */
	struct gateway_oauth_conf *oauth; /* its http.oauth, its keys read */
};

/* Everything the engine checks has passed: what the gateway needs is
 * made (so nothing fails once it is taken), then the floor moves. */
static int commit(void *data, struct appl_err *err)
{
	struct loaded *l = data;

	if (l->gw->http && !(l->principals = principals_make(l->gw, l->policy)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (l->gw->oauth && gateway_oauth_conf_make(l->gw->oauth, l->policy, &l->oauth, err) < 0)
		return err->code;
	return l->gw->cfg->commit ? l->gw->cfg->commit(l->gw->cfg->data, l->handle, err) : 0;
}

/* The reload's audit line: who asked, what came of it, and the policy it
 * took (or the one it refused, when it was read). */
static void reload_audit(struct gateway *gw, const char *who, const struct policy_verified *v,
			 const struct engine_reload *rl, const char *why)
{
	struct audit *a = engine_audit(gw->e);
	char digest[8 + 2 * POLICY_HASH_BYTES + 1] = "sha256:";
	json_t *o;

	if (!a)
		return;
	if (v)
		sodium_bin2hex(digest + 7, sizeof(digest) - 7, v->hash, POLICY_HASH_BYTES);
	o = json_pack("{ss ss ss?}", "by", who, "outcome", why ? "refused" : "ok", "reason", why);
	if (o && v)
		json_object_update_new(o, json_pack("{sI ss ss}", "serial", (json_int_t)v->serial,
						    "policy", digest, "key", v->keyid_hex));
	if (o && !why)
		json_object_update_new(o, json_pack("{sI sI sb}", "servers_started",
						    (json_int_t)rl->started, "servers_retired",
						    (json_int_t)rl->retired, "pool", rl->pool));
	if (o && audit_event_sync(a, "reload", o) < 0)
		log_line(LOG_ERR, NULL, "the reload's audit line was not written: %s",
			 audit_why(a));
	json_decref(o);
}

/* The new policy is the engine's: the gateway's view follows. */
static void taken(struct gateway *gw, struct loaded *l, const struct policy_verified *v)
{
	gw->policy = l->policy;
	gateway_policy_info_set(&gw->info, gw->cfg->policy_path, v, time(NULL));
	gw->stdio_client.role = policy_client_default_role(l->policy);
	if (l->principals)
		principals_use(gw, l->principals);
	if (gw->oauth)
		gateway_oauth_conf_use(gw, l->oauth);
	l->oauth = NULL;
}

static int load(struct gateway *gw, struct loaded *l, const struct policy **p,
		const struct policy_verified **v, struct appl_err *err)
{
	if (!gw->cfg->load)
		return appl_err_set(err, -ENOTSUP, "this appliance does not reload its policy");
	if (!engine_started(gw->e))
		return appl_err_set(err, -EAGAIN,
				    "the appliance has not started yet (over stdio it starts at "
				    "the first request that needs the tools): nothing to reload");
	return gw->cfg->load(gw->cfg->data, &l->handle, p, v, err);
}

int gateway_reload(struct gateway *gw, const char *who, char *why, size_t cap)
{
	struct loaded l = {.gw = gw};
	struct engine_reload rl = {.commit = commit, .data = &l};
	const struct policy_verified *v = NULL;
	struct appl_err err = {0};

	log_line(LOG_INFO, NULL, "reload asked for by %s: %s", who, gw->info.path);
	if (load(gw, &l, &rl.policy, &v, &err) == 0) {
		rl.handle = l.handle;
		l.policy = rl.policy;
		if (engine_reload(gw->e, &rl, &err) == 0) {
			taken(gw, &l, v);
			log_line(LOG_INFO, NULL,
				 "reloaded: serial %llu, key %s; %zu server%s started, %zu "
				 "stopping as their runs end%s",
				 (unsigned long long)v->serial, v->keyid_hex, rl.started,
				 rl.started == 1 ? "" : "s", rl.retired,
				 rl.pool ? "; the pool is filled again" : "");
			reload_audit(gw, who, v, &rl, NULL);
			metrics_reload(true);
			metrics_policy(v->serial, policy_expires(rl.policy));
			return 0;
		}
	}
	log_line(LOG_WARN, NULL, "reload refused, the running policy stays: %s", err.msg);
	reload_audit(gw, who, v, &rl, err.msg);
	metrics_reload(false);
	principals_drop(gw, l.principals);
	gateway_oauth_conf_free(l.oauth);
	if (l.handle && gw->cfg->release)
		gw->cfg->release(gw->cfg->data, l.handle);
	snprintf(why, cap, "%s", err.msg);
	return err.code;
}
