/* ready.c: readiness (see ready.h). */
#include "engine/ready.h"

#include <time.h>

#include "audit/audit.h"
#include "engine/internal.h"
#include "upstream/set.h"

const char *engine_ready_judge(const struct engine_ready_facts *f)
{
	if (f->stopping)
		return "stopping";
	if (!f->started)
		return "starting";
	if (!f->policy)
		return "policy";
	if (f->now >= f->expires)
		return "expired";
	if (!f->image)
		return "image";
	if (!f->audit_ok)
		return "audit";
	if (f->servers_ready < f->servers)
		return "servers";
	/* A ready sandbox, or the last boot worked: a run gets one (a pool
	 * emptied by runs is refilling, not failing). */
	if (f->sandbox_ready || f->last_boot == POOL_BOOT_OK)
		return NULL;
	return f->last_boot == POOL_BOOT_NONE ? "starting" : "sandbox";
}

static size_t servers_ready(const struct upstream_set *s)
{
	size_t n = 0;

	for (size_t i = 0; i < upstream_set_count(s); i++)
		n += upstream_state(upstream_set_get(s, i)) == UPSTREAM_READY;
	return n;
}

void engine_ready_prepare(struct engine *e)
{
	e->ready_asked = true; /* a reload's new pool is prepared again */
	if (!e->pool || !(e->cfg.parts & ENGINE_POOL) || engine_limits(e)->pool)
		return;
	pool_probe(e->pool, true);
	pool_fill(e->pool);
}

const char *engine_unready(struct engine *e)
{
	const struct policy *p = engine_policy(e);
	const struct audit *a = engine_audit(e);
	struct engine_ready_facts f = {.stopping = engine_stopping(e, NULL) || engine_draining(e),
				       .started = engine_started(e),
				       .policy = p != NULL,
				       .image = engine_rootfs(e, NULL) != NULL,
				       .audit_ok = !a || audit_ok(a),
				       .now = (int64_t)time(NULL),
				       .expires = p ? policy_expires(p) : 0,
				       .servers = p ? policy_server_count(p) : 0,
				       .servers_ready = servers_ready(engine_servers(e)),
				       .sandbox_ready = pool_ready(e->pool) != NULL,
				       .last_boot = pool_last_boot(e->pool)};

	/* A server down past its backoff is started again: an appliance a
	 * balancer took out for it gets no runs, which would wake it, and
	 * would stay out. The backoff (up to APPL_UPSTREAM_BACKOFF_MAX_MS)
	 * bounds how often probes can make a failing server start. */
	if (f.started && !f.stopping && f.servers_ready < f.servers)
		upstream_set_wake(engine_servers(e));
	return engine_ready_judge(&f);
}
