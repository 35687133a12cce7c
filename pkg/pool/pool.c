/* pool.c: warm sandboxes (see pool.h). */
#include "pool/pool.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/fs.h"
#include "log/log.h"
#include "metrics/metrics.h"

struct slot {
	struct slot *next;
	struct pool *pool;
	struct cell *cell;
	bool ready, dead, frozen;
	bool restored; /* from the template */
	bool probe;    /* pool_probe's: destroyed once ready */
};

/* The template of restored sandboxes (root only; see pool.h). */
enum template_state {
	TPL_OFF,     /* not wanted (rootless, or the policy says no) */
	TPL_WANTED,  /* wanted, not booted yet */
	TPL_BOOTING, /* booting; slots wait for it */
	TPL_READY,   /* the checkpoint is in image: slots are restored from it */
	TPL_FAILED,  /* it could not be made: slots boot */
};

struct pool {
	struct loop *loop;
	struct sandbox_rt *rt;
	const struct sandbox_oci_params *oci;
	struct sandbox_oci_params pooled; /* oci, with the runner told it is pooled */
	struct cell_limits lim;
	unsigned size;
	struct slot *slots;
	unsigned failures;
	uint64_t retry_at;
	struct loop_timer *timer; /* the end of a backoff */
	struct loop_task tend;	  /* a slot died: replace it after the round */
	enum template_state tpl;
	struct cell *tpl_cell;
	struct loop_task ttpl; /* the template is ready: checkpoint it after the round */
	uint64_t tpl_start;
	char image[PATH_MAX];
	bool unfrozen_said;  /* a failed freeze was logged (once) */
	enum pool_boot last; /* the last boot seen */
	char last_why[512];  /* why the last of its own boots failed ("" none yet) */
	bool probe;	     /* pool_probe */
};

/* The metrics' gauge of the sandboxes ready to be taken, said again
 * whenever one is ready, taken or gone. */
static void ready_say(const struct pool *p)
{
	int64_t n = 0;

	for (const struct slot *s = p->slots; s; s = s->next)
		n += s->ready && !s->dead;
	metrics_set(METRICS_POOL_READY, n);
}

static void template_failed(struct pool *p, const char *why)
{
	p->tpl = TPL_FAILED;
	log_line(LOG_WARN, NULL, "pool: no checkpoint to restore sandboxes from (%s); they boot",
		 why);
}

static void on_slot_ready(struct cell *c, void *data)
{
	struct slot *s = data;
	struct appl_err err = {0};

	s->ready = true;
	s->pool->failures = 0;
	s->pool->last = POOL_BOOT_OK;
	if (s->probe) {
		/* It proved the boot; the pool keeps none (reap frees it). */
		s->dead = true;
		loop_defer(s->pool->loop, &s->pool->tend);
		return;
	}
	/* Warm and waiting: frozen, it costs no CPU until it is taken. */
	s->frozen = sandbox_freeze(cell_sandbox(c), true, &err) == 0;
	if (!s->frozen && !s->pool->unfrozen_said && err.code != -ENOTSUP) {
		s->pool->unfrozen_said = true;
		log_line(LOG_WARN, NULL, "pool: idle sandboxes are not frozen (%s)", err.msg);
	}
	ready_say(s->pool);
}

static void on_slot_done(struct cell *c, void *data)
{
	struct slot *s = data;
	(void)c;

	/* This runs inside the cell's own handler: it is freed, and replaced,
	 * at the end of the round. */
	s->dead = true;
	ready_say(s->pool);
	loop_defer(s->pool->loop, &s->pool->tend);
}

static void on_timer(void *data)
{
	pool_fill(data);
}

/* A boot failed: wait longer before the next, up to the cap. */
static void backoff(struct pool *p, const char *why)
{
	uint64_t wait = APPL_POOL_BACKOFF_MIN_MS;

	p->failures++;
	p->last = POOL_BOOT_FAILED;
	snprintf(p->last_why, sizeof(p->last_why), "%s", why);
	for (unsigned i = 1; i < p->failures && wait < APPL_POOL_BACKOFF_MAX_MS; i++)
		wait *= 2;
	if (wait > APPL_POOL_BACKOFF_MAX_MS)
		wait = APPL_POOL_BACKOFF_MAX_MS;
	p->retry_at = loop_now_ms() + wait;
	loop_timer_set(p->timer, wait);
	log_line(LOG_WARN, NULL,
		 "pool: a warm sandbox failed to boot (%u in a row): %s; next try in %llu ms",
		 p->failures, why, (unsigned long long)wait);
}

static const char *death_reason(struct cell *c)
{
	const struct cell_outcome *o = cell_outcome(c);

	return o && o->error ? o->error : "it ended";
}

static void on_tpl_ready(struct cell *c, void *data)
{
	struct pool *p = data;
	(void)c;

	p->last = POOL_BOOT_OK;
	loop_defer(p->loop, &p->ttpl);
}

static void on_tpl_done(struct cell *c, void *data)
{
	struct pool *p = data;

	/* Only a template that died before its checkpoint gets here (the
	 * checkpoint task frees it). */
	if (p->tpl == TPL_BOOTING) {
		const char *why = death_reason(c);

		/* A failed boot like any other: the slots wait for the backoff. */
		template_failed(p, why);
		backoff(p, why);
		loop_defer(p->loop, &p->tend); /* freed, and slots booted, after the round */
	}
}

/* The template said ready (it has warmed up): save it, then restore the
 * slots from that. */
static void on_ttpl(void *data)
{
	struct pool *p = data;
	struct appl_err err = {0};

	if (p->tpl != TPL_BOOTING || !p->tpl_cell)
		return;
	if (sandbox_checkpoint(cell_sandbox(p->tpl_cell), p->image, &err) < 0) {
		template_failed(p, err.msg);
	} else {
		p->tpl = TPL_READY;
		log_line(LOG_INFO, NULL,
			 "pool: a warm sandbox checkpointed in %llu ms; "
			 "sandboxes are restored from it",
			 (unsigned long long)(loop_now_ms() - p->tpl_start));
	}
	cell_free(p->tpl_cell);
	p->tpl_cell = NULL;
	pool_fill(p);
}

/* Boot the template: a pooled sandbox like any other, which is saved once
 * it is ready instead of being taken. */
static void template_boot(struct pool *p)
{
	struct cell_hooks hooks = {.on_ready = on_tpl_ready, .on_done = on_tpl_done, .data = p};
	struct appl_err err = {0};
	struct sandbox *sb;

	p->tpl = TPL_BOOTING;
	p->tpl_start = loop_now_ms();
	sb = sandbox_start(p->rt, &p->pooled, &err);
	if (sb)
		metrics_count(METRICS_POOL_BOOTS, NULL);
	if (!sb || !(p->tpl_cell = cell_boot(p->loop, sb, &p->lim, &hooks, &err)))
		template_failed(p, err.msg);
}

static void on_tend(void *data)
{
	struct pool *p = data;

	if (p->tpl == TPL_FAILED && p->tpl_cell) {
		cell_free(p->tpl_cell);
		p->tpl_cell = NULL;
	}
	pool_fill(p);
}

struct pool *pool_new(struct loop *loop, struct sandbox_rt *rt,
		      const struct sandbox_oci_params *oci, const struct cell_limits *lim,
		      unsigned size, bool restore, struct appl_err *err)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (!p) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	p->loop = loop;
	p->rt = rt;
	p->oci = oci;
	p->pooled = *oci;
	p->pooled.pooled = true;
	p->lim = *lim;
	p->size = size;
	if (restore && !oci->rootless &&
	    appl_path_join(p->image, sizeof(p->image), sandbox_rt_dir(rt), "/checkpoint", "") == 0)
		p->tpl = TPL_WANTED;
	loop_task_init(&p->tend, on_tend, p);
	loop_task_init(&p->ttpl, on_ttpl, p);
	p->timer = loop_timer_new(loop, on_timer, p, err);
	if (!p->timer) {
		free(p);
		return NULL;
	}
	return p;
}

/* Free the slots whose sandbox died; a death before ready is a failed boot. */
static void reap(struct pool *p)
{
	struct slot **pp = &p->slots;

	while (*pp) {
		struct slot *s = *pp;

		if (!s->dead) {
			pp = &s->next;
			continue;
		}
		if (s->probe && s->ready) {
			log_line(LOG_INFO, NULL,
				 "pool: a sandbox booted to show that one can be (limits.pool "
				 "is 0), and destroyed");
		} else if (!s->ready && s->restored && p->tpl == TPL_READY) {
			/* Restoring does not work here: boot from now on. */
			p->last = POOL_BOOT_FAILED;
			template_failed(p, death_reason(s->cell));
		} else if (!s->ready)
			backoff(p, death_reason(s->cell));
		else
			log_line(LOG_WARN, NULL, "pool: an idle sandbox ended (%s); replacing it",
				 death_reason(s->cell));
		*pp = s->next;
		cell_free(s->cell);
		free(s);
	}
}

static unsigned held(const struct pool *p)
{
	unsigned n = 0;

	for (const struct slot *s = p->slots; s; s = s->next)
		n++;
	return n;
}

/* A new cell without code: restored from the template when there is one
 * (the runner is told to reseed and say ready), else booted. */
static struct cell *cell_new(struct pool *p, bool pooled, const struct cell_hooks *hooks,
			     struct appl_err *err)
{
	bool restore = p->tpl == TPL_READY;
	/* A restored sandbox's bundle says what the template's said. */
	const struct sandbox_oci_params *oci = pooled || restore ? &p->pooled : p->oci;
	struct sandbox *sb = restore ? sandbox_restore(p->rt, oci, p->image, err)
				     : sandbox_start(p->rt, oci, err);
	struct cell *c = sb ? cell_boot(p->loop, sb, &p->lim, hooks, err) : NULL;

	if (sb)
		metrics_count(restore ? METRICS_POOL_RESTORES : METRICS_POOL_BOOTS, NULL);
	if (c && restore)
		cell_wake(c);
	return c;
}

static int boot_one(struct pool *p)
{
	struct cell_hooks hooks = {.on_ready = on_slot_ready, .on_done = on_slot_done};
	struct appl_err err = {0};
	struct slot *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->pool = p;
	hooks.data = s;
	s->restored = p->tpl == TPL_READY;
	s->cell = cell_new(p, true, &hooks, &err);
	if (!s->cell) {
		free(s);
		backoff(p, err.msg);
		return err.code ? err.code : -EIO;
	}
	s->next = p->slots;
	p->slots = s;
	return 0;
}

void pool_fill(struct pool *p)
{
	if (!p)
		return;
	loop_task_cancel(p->loop, &p->tend);
	reap(p);
	if (p->retry_at && loop_now_ms() < p->retry_at)
		return;
	p->retry_at = 0;
	if (p->tpl == TPL_WANTED)
		template_boot(p);
	if (p->tpl == TPL_BOOTING)
		return; /* the slots are restored from it once it is saved */
	while (held(p) < p->size)
		if (boot_one(p) < 0)
			break;
	if (p->probe && !p->size && p->last != POOL_BOOT_OK && !held(p) && boot_one(p) == 0)
		p->slots->probe = true;
}

/* Ready, alive, and waiting for its code: a run may have it. */
static bool takable(const struct slot *s)
{
	return s->ready && !s->dead && cell_idle(s->cell);
}

struct cell *pool_take(struct pool *p)
{
	struct slot **pp;

	if (!p)
		return NULL;
	for (pp = &p->slots; *pp; pp = &(*pp)->next) {
		struct slot *s = *pp;
		struct appl_err err = {0};
		struct cell *c;

		if (!takable(s))
			continue;
		*pp = s->next;
		c = s->cell;
		if (s->frozen && (sandbox_doomed(cell_sandbox(c)) ||
				  sandbox_freeze(cell_sandbox(c), false, &err) < 0)) {
			/* Killed while it was frozen (it dies once thawed), or it
			 * stays frozen: either would fail its cell. */
			log_line(LOG_WARN, NULL, "pool: an idle sandbox ended (%s); replacing it",
				 err.msg[0] ? err.msg : "it was killed while frozen");
			free(s);
			cell_free(c);
			loop_defer(p->loop, &p->tend);
			return pool_take(p);
		}
		free(s);
		ready_say(p);
		return c;
	}
	ready_say(p);
	return NULL;
}

const struct sandbox *pool_ready(const struct pool *p)
{
	for (const struct slot *s = p ? p->slots : NULL; s; s = s->next)
		if (takable(s))
			return cell_sandbox(s->cell);
	return NULL;
}

void pool_counts(const struct pool *p, struct pool_counts *out)
{
	*out = (struct pool_counts){.size = p ? p->size : 0};
	for (const struct slot *s = p ? p->slots : NULL; s; s = s->next) {
		if (s->dead)
			continue;
		out->ready += s->ready;
		out->booting += !s->ready;
		out->frozen += s->ready && s->frozen;
	}
}

void pool_resize(struct pool *p, unsigned size)
{
	if (p)
		p->size = size;
}

struct cell *pool_cold(struct pool *p, struct appl_err *err)
{
	return cell_new(p, false, NULL, err);
}

enum pool_boot pool_last_boot(const struct pool *p)
{
	return p ? p->last : POOL_BOOT_NONE;
}

const char *pool_last_failure(const struct pool *p)
{
	return p && p->last_why[0] ? p->last_why : NULL;
}

void pool_cell_ended(struct pool *p, enum cell_reason reason)
{
	if (p && reason == CELL_BOOT)
		p->last = POOL_BOOT_FAILED;
	else if (p && reason == CELL_RAN)
		p->last = POOL_BOOT_OK;
}

void pool_probe(struct pool *p, bool on)
{
	if (p)
		p->probe = on;
}

void pool_free(struct pool *p)
{
	if (!p)
		return;
	/* Kill them all first, so they go down together, then clean up. */
	for (struct slot *s = p->slots; s; s = s->next)
		cell_cancel(s->cell);
	while (p->slots) {
		struct slot *s = p->slots;

		p->slots = s->next;
		cell_free(s->cell);
		free(s);
	}
	cell_free(p->tpl_cell);
	metrics_set(METRICS_POOL_READY, 0);
	loop_timer_free(p->timer);
	loop_task_cancel(p->loop, &p->tend);
	loop_task_cancel(p->loop, &p->ttpl);
	free(p);
}
