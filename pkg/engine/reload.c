/* reload.c: a new policy without a restart (see engine.h, engine_reload):
 * checked whole, then taken whole. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/ready.h"
#include "engine/roles.h"
#include "image/image.h"
#include "log/log.h"
#include "session/session.h"
#include "pool/pool.h"
#include "sandbox/runsc.h"
#include "upstream/set.h"

/* What a reload made before it takes effect. */
struct staged {
	struct engine_gen *gen;
	char rootfs[PATH_MAX], rootfs_image[PATH_MAX];
};

/* The image of p verified against its digest (every blob hashed again)
 * and made one EROFS file where runsc mounts one. */
static int image_stage(struct engine *e, const struct policy *p, struct staged *st,
		       struct appl_err *err)
{
	char cache[PATH_MAX];
	const char *dir = e->cfg.cache;

	if (!e->rt)
		return 0;
	if (!dir && image_cache_default(cache, sizeof(cache), err) < 0)
		return err->code;
	if (image_layout_verify(policy_image_layout(p), policy_image_digest(p), dir ? dir : cache,
				st->rootfs, sizeof(st->rootfs), err) < 0)
		return appl_err_prefix(err, "image");
	if (engine_image_needs(p, err) < 0)
		return err->code;
	if (sandbox_rootfs_image(e->rt, st->rootfs, st->rootfs_image, sizeof(st->rootfs_image),
				 err) < 0)
		return appl_err_prefix(err, "image");
	return 0;
}

/* The servers and the roles of p, started and built beside the current
 * ones. */
static int servers_stage(struct engine *e, const struct policy *p, struct staged *st,
			 struct appl_err *err)
{
	struct upstream_opts opts = {.result_max = st->gen->lim.max_result_bytes};

	if (!e->ups)
		return 0;
	engine_confine_opts(&e->confine, &opts);
	st->gen->ups = upstream_set_derive(e->ups, e->policy, p, &opts, e->loop, err);
	if (!st->gen->ups)
		return err->code;
	engine_roles_servers(st->gen->roles, st->gen->ups);
	return engine_roles_build(st->gen->roles, err);
}

static int stage(struct engine *e, struct engine_reload *rl, struct staged *st,
		 struct appl_err *err)
{
	const struct policy *p = rl->policy;
	const char *restart = policy_reload_restart(e->policy, p);

	if (restart)
		return appl_err_set(err, -EINVAL,
				    "%s differs from the running policy's, and it is read only at "
				    "start: restart the appliance to change it",
				    restart);
	if (!(st->gen = engine_gen_new(e, p, NULL)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (image_stage(e, p, st, err) < 0 || servers_stage(e, p, st, err) < 0)
		return err->code;
	return 0;
}

static bool cell_limits_same(const struct cell_limits *a, const struct cell_limits *b)
{
	return a->deadline_ms == b->deadline_ms && a->boot_ms == b->boot_ms &&
	       a->max_output == b->max_output && a->stop_output == b->stop_output &&
	       a->max_lines == b->max_lines;
}

/* The pool drained and filled again when what its sandboxes were made
 * with changed: the image, a sandbox or cell limit, its size. */
static bool pool_renew(struct engine *e, const struct staged *st, const struct engine_gen *old)
{
	struct sandbox_oci_params oci = e->oci;
	struct cell_limits cl;
	bool same;

	engine_limits_split(&st->gen->lim, &oci, &cl);
	same = strcmp(st->rootfs, e->rootfs) == 0 &&
	       strcmp(st->rootfs_image, e->rootfs_image) == 0 &&
	       oci.memory_mb == e->oci.memory_mb && oci.pids == e->oci.pids &&
	       oci.nofile == e->oci.nofile && oci.tmpfs_mb == e->oci.tmpfs_mb &&
	       cell_limits_same(&cl, &e->cell_lim) && st->gen->lim.pool == old->lim.pool;
	return e->pool && !same;
}

/* Take the staged policy: from here nothing fails that could undo it. */
static void take(struct engine *e, struct engine_reload *rl, struct staged *st)
{
	struct engine_gen *old = e->gen;
	bool renew = pool_renew(e, st, old);
	struct appl_err err = {0};

	st->gen->handle = rl->handle;
	/* A session's interpreter was made from the old image, under its
	 * role's old rules: either changed, it ends. */
	if (strcmp(st->rootfs, e->rootfs) != 0 || strcmp(st->rootfs_image, e->rootfs_image) != 0)
		session_end_all(e->sessions, "reload");
	else
		session_end_roles_changed(e->sessions, old->policy, st->gen->policy);
	rl->started = upstream_set_started(st->gen->ups, old->ups);
	rl->retired = upstream_set_count(old->ups) + rl->started - upstream_set_count(st->gen->ups);
	engine_gen_use(e, st->gen);
	if (e->rt) {
		snprintf(e->rootfs, sizeof(e->rootfs), "%s", st->rootfs);
		snprintf(e->rootfs_image, sizeof(e->rootfs_image), "%s", st->rootfs_image);
		e->oci.rootfs_image = e->rootfs_image[0] ? e->rootfs_image : NULL;
	}
	run_set_limits(e->runs, &e->cell_lim, e->lim.cells,
		       e->cfg.per_client ? e->lim.http_cells_per_client : 0,
		       e->lim.approval_timeout_s * 1000u);
	if (e->gate && bridge_gate_update(e->gate, e->policy) < 0)
		log_line(LOG_ERR, NULL, "out of memory: a server's slots keep their old count");
	if ((rl->pool = renew)) {
		pool_free(e->pool);
		e->pool = NULL;
		if (engine_cells_open(e, &err) < 0)
			log_line(LOG_ERR, NULL, "the pool was not made again: %s", err.msg);
		else if (e->ready_asked)
			engine_ready_prepare(e);
	}
	if (old->roles && e->roles)
		engine_roles_compare(old->roles, e->roles);
	e->reloads++;
	if (old->runs) {
		old->next = e->old;
		e->old = old;
	} else {
		engine_gen_free(e, old);
	}
}

int engine_reload(struct engine *e, struct engine_reload *rl, struct appl_err *err)
{
	struct staged st = {0};

	if (!e->started || !e->policy)
		return appl_err_set(err, -EINVAL, "nothing has started to reload");
	if (stage(e, rl, &st, err) < 0 || (rl->commit && rl->commit(rl->data, err) < 0)) {
		/* The servers it started stop again; the policy is the
		 * caller's still. */
		engine_gen_free(e, st.gen);
		return err->code;
	}
	take(e, rl, &st);
	return 0;
}
