/* status.c: what the engine is doing, as the admin socket's status shows
 * it (engine.h, docs/operating.md): its servers, its cells, its pool and
 * its audit log. Read only; built each time from the parts themselves. */
#include "engine/internal.h"

#include <jansson.h>

#include "audit/audit.h"
#include "pool/pool.h"
#include "session/session.h"
#include "upstream/set.h"

static const char *const state_names[] = {
	[UPSTREAM_STARTING] = "starting",
	[UPSTREAM_READY] = "ready",
	[UPSTREAM_DOWN] = "down",
	[UPSTREAM_BACKOFF] = "backoff",
};

/* One server: its state, the revision it speaks ("" before its first
 * handshake: null), its tools, its restarts and why it last stopped. */
static json_t *server_json(const struct upstream *u)
{
	const char *rev = upstream_protocol_version(u), *last = upstream_last_error(u);

	return json_pack("{ss ss ss? sI sI ss?}", "name", upstream_name(u), "state",
			 state_names[upstream_state(u)], "revision", rev[0] ? rev : NULL, "tools",
			 (json_int_t)upstream_tool_count(u), "restarts",
			 (json_int_t)upstream_restarts(u), "last_error", last[0] ? last : NULL);
}

static json_t *servers_json(const struct engine *e)
{
	json_t *a = json_array();

	for (size_t i = 0; a && e->ups && i < upstream_set_count(e->ups); i++)
		if (json_array_append_new(a, server_json(upstream_set_get(e->ups, i))) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* Runs counted by client: {"in_flight": N, "waiting": N} each. */
struct cells_count {
	json_t *by_client;
	json_int_t in_flight, waiting;
	bool failed;
};

static void cell_count(void *data, const char *client, bool waiting)
{
	struct cells_count *cc = data;
	const char *key = waiting ? "waiting" : "in_flight";
	json_t *c = json_object_get(cc->by_client, client);

	if (!c && (!(c = json_pack("{si si}", "in_flight", 0, "waiting", 0)) ||
		   json_object_set_new(cc->by_client, client, c) < 0)) {
		cc->failed = true;
		return;
	}
	json_object_set_new(c, key, json_integer(json_integer_value(json_object_get(c, key)) + 1));
	if (waiting)
		cc->waiting++;
	else
		cc->in_flight++;
}

static json_t *cells_json(const struct engine *e)
{
	struct cells_count cc = {.by_client = json_object()};

	if (!cc.by_client)
		return NULL;
	run_set_each(e->runs, cell_count, &cc);
	if (cc.failed) {
		json_decref(cc.by_client);
		return NULL;
	}
	return json_pack("{sI sI sI so}", "in_flight", cc.in_flight, "waiting", cc.waiting, "slots",
			 (json_int_t)e->lim.cells, "by_client", cc.by_client);
}

static json_t *pool_json(const struct engine *e)
{
	struct pool_counts pc;

	pool_counts(e->pool, &pc);
	/* Before the pool is made: the size it will keep. */
	if (!e->pool && (e->cfg.parts & ENGINE_POOL))
		pc.size = e->lim.pool;
	return json_pack("{sI sI sI sI}", "size", (json_int_t)pc.size, "ready",
			 (json_int_t)pc.ready, "booting", (json_int_t)pc.booting, "frozen",
			 (json_int_t)pc.frozen);
}

/* null without an audit log (or before it opened). */
static json_t *audit_json(const struct engine *e)
{
	char t[AUDIT_TIME_LEN + 1];
	struct audit_stats st;

	if (!e->audit)
		return json_null();
	audit_stats(e->audit, &st);
	if (st.seal_ms)
		audit_time((int64_t)st.seal_ms, t);
	return json_pack("{ss sI ss? sb}", "path", st.path, "lines", (json_int_t)st.lines,
			 "last_seal", st.seal_ms ? t : NULL, "ok", st.ok);
}

json_t *engine_status(struct engine *e)
{
	/* A part that could not be made (out of memory) fails the whole. */
	unsigned open, frozen;

	session_counts(e->sessions, &open, &frozen);
	return json_pack("{so so so so s{sI sI}}", "servers", servers_json(e), "cells",
			 cells_json(e), "pool", pool_json(e), "audit", audit_json(e), "sessions",
			 "open", (json_int_t)open, "frozen", (json_int_t)frozen);
}
