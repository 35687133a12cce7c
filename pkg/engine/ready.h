/* ready.h: whether the appliance can serve a run now (readiness, for the
 * HTTP front's /readyz: docs/http.md, "Health and readiness").
 *
 * Read on every probe, from the engine as it is then (its policy, servers,
 * audit log and pool), never from what an earlier call saw: the policy
 * may change under it. Nothing here starts, restarts or boots anything.
 */
#ifndef APPL_ENGINE_READY_H
#define APPL_ENGINE_READY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"
#include "pool/pool.h"

/* NULL when a run could be served now, else one word (static) for the
 * first thing missing, in this order:
 *   "stopping"  a stop came;
 *   "starting"  the start has not finished, or no sandbox boot has yet;
 *   "policy"    there is none (`cell --image`);
 *   "expired"   the policy has expired: no new cell runs;
 *   "image"     the image is not verified;
 *   "audit"     the audit log cannot be written: no cell runs;
 *   "servers"   a server of the policy is not ready (down, restarting,
 *               backing off);
 *   "sandbox"   no sandbox is ready and the last boot failed.
 * The word names a part, never a server, a count or a version. */
const char *engine_unready(struct engine *e);

/* Readiness will be asked (`run` over HTTP, once engine_start passed):
 * with limits.pool 0 and the pool part started, the pool boots one
 * sandbox now, and again after a failed boot, to show that one can be
 * (pool_probe); otherwise nothing would boot before a run, and readiness
 * would have no boot to go by. */
void engine_ready_prepare(struct engine *e);

/* What readiness is judged on. */
struct engine_ready_facts {
	bool stopping, started, policy, image, audit_ok;
	int64_t now, expires;	       /* seconds since the epoch */
	size_t servers, servers_ready; /* the policy's; those ready */
	bool sandbox_ready;	       /* the pool holds one ready */
	enum pool_boot last_boot;
};

/* engine_unready's judgement of f (borrowed): pure, for the unit test. */
const char *engine_ready_judge(const struct engine_ready_facts *f);

#endif
