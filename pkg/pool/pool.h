/* pool.h: warm sandboxes, booted ahead of need (docs/pool.md).
 *
 * A pooled sandbox is a cell booted without code (cell_boot): runsc has
 * started, the runner has imported what it needs, warmed up and then said
 * `ready` (it was started pooled), and it waits for its one cell line. It
 * has run no code. While it waits it is frozen (its cgroup's freezer, where
 * there is one), so it uses no CPU. A run takes one, uses it once, and
 * frees it (its sandbox destroyed); the pool never gets it back.
 *
 * The pool keeps `size` sandboxes ready or booting. It boots replacements
 * when its owner calls pool_fill (after a run ended: the cores are then
 * free), at once at start, and when an idle one died. A boot that fails
 * (the sandbox never said ready within the boot timeout, or died first)
 * counts toward a backoff: 0.5 s, doubling to 30 s, logged, reset by the
 * next success. pool_free destroys every sandbox it holds.
 *
 * The pool also keeps the outcome of the last boot it saw (its own, and
 * those of the cells it handed out, as their owner reports them), for
 * readiness: whether a sandbox can be had now.
 */
#ifndef APPL_POOL_POOL_H
#define APPL_POOL_POOL_H

#include "base/err.h"
#include "cell/cell.h"
#include "loop/loop.h"
#include "sandbox/ociconfig.h"
#include "sandbox/runsc.h"

struct pool;

/* A pool of size (0: none; every take misses) sandboxes made by rt with oci
 * and booted with lim's boot timeout (all borrowed: they must outlive the
 * pool). With restore (root only; ignored rootless), the first pool_fill
 * boots a template instead, checkpoints it once it is warm, and every
 * sandbox after that (pooled or cold) is restored from the checkpoint; if
 * the template or a restored sandbox fails, the pool logs it and boots
 * from then on. Nothing boots until pool_fill. NULL with err on -ENOMEM. */
struct pool *pool_new(struct loop *loop, struct sandbox_rt *rt,
		      const struct sandbox_oci_params *oci, const struct cell_limits *lim,
		      unsigned size, bool restore, struct appl_err *err);

/* A ready cell (the caller owns it: cell_run, then cell_free), thawed, or
 * NULL when none is ready. */
struct cell *pool_take(struct pool *p);

/* The sandbox of the ready cell pool_take would hand out first (borrowed:
 * until the next pool_take, pool_fill or loop round), or NULL when none is
 * ready. For reading its state, never for using it. */
const struct sandbox *pool_ready(const struct pool *p);

/* What the pool holds now, for a status: the size it keeps, its
 * sandboxes ready (of them frozen) and booting (those that died and wait
 * to be freed left out; the template of restored sandboxes is not one of
 * them). p may be NULL (no pool: all 0). */
struct pool_counts {
	unsigned size, ready, booting, frozen;
};
void pool_counts(const struct pool *p, struct pool_counts *out);

/* From now on keep size sandboxes ready or booting: the next pool_fill
 * boots up to it. A smaller size frees none: those held are still taken. */
void pool_resize(struct pool *p, unsigned size);

/* A cell for a run that found no ready one: restored from the template
 * when there is one, else booted (without warm-up: its code is sent as
 * soon as the runner is ready). The caller owns it (cell_run, cell_free).
 * NULL with err filled. */
struct cell *pool_cold(struct pool *p, struct appl_err *err);

/* Free what died, then boot until size are ready or booting, unless a
 * backoff is running (its timer calls this when it ends). From the loop,
 * never from inside a cell's hook. */
void pool_fill(struct pool *p);

/* A sandbox of the pool that dies is freed and replaced at the end of the
 * round it died in (a deferred task of the pool's). */

/* The last boot seen: none yet, one that became ready, one that failed
 * (it never said ready within the boot timeout, died first, or could not
 * be started). */
enum pool_boot {
	POOL_BOOT_NONE,
	POOL_BOOT_OK,
	POOL_BOOT_FAILED,
};

enum pool_boot pool_last_boot(const struct pool *p);

/* Why the last of the pool's own boots that failed failed (the cell's
 * words: a timeout, a death, the runner's `fail`), or NULL when none has.
 * Borrowed, until the next loop round. */
const char *pool_last_failure(const struct pool *p);

/* A cell the pool handed out (pool_take, pool_cold) ended with reason
 * (its owner tells, from the cell's on_done): CELL_BOOT is a failed boot,
 * CELL_RAN a good one (its code ran), any other says nothing of the boot. */
void pool_cell_ended(struct pool *p, enum cell_reason reason);

/* With size 0, prove that a sandbox can be booted: one boot at the next
 * pool_fill, and again (after the backoff) whenever the last boot failed,
 * each destroyed once ready; no sandbox is kept. For a pool whose
 * readiness is asked (`run` over HTTP), so that it has a boot to go by. */
void pool_probe(struct pool *p, bool on);

/* Destroy every sandbox held. Safe on NULL. */
void pool_free(struct pool *p);

#endif
