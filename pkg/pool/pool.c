/* pool.c: warm sandboxes (see pool.h). */
#include "pool/pool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log/log.h"

struct slot {
	struct slot *next;
	struct pool *pool;
	struct cell *cell;
	bool ready, dead;
};

struct pool {
	struct loop *loop;
	struct sandbox_rt *rt;
	const struct sandbox_oci_params *oci;
	struct cell_limits lim;
	unsigned size;
	struct slot *slots;
	unsigned failures;
	uint64_t retry_at;
	struct loop_timer *timer; /* the end of a backoff */
	struct loop_task tend;	  /* a slot died: replace it after the round */
};

static void on_slot_ready(struct cell *c, void *data)
{
	struct slot *s = data;
	(void)c;

	s->ready = true;
	s->pool->failures = 0;
}

static void on_slot_done(struct cell *c, void *data)
{
	struct slot *s = data;
	(void)c;

	/* This runs inside the cell's own handler: it is freed, and replaced,
	 * at the end of the round. */
	s->dead = true;
	loop_defer(s->pool->loop, &s->pool->tend);
}

static void on_timer(void *data)
{
	pool_fill(data);
}

static void on_tend(void *data)
{
	pool_fill(data);
}

struct pool *pool_new(struct loop *loop, struct sandbox_rt *rt,
		      const struct sandbox_oci_params *oci, const struct cell_limits *lim,
		      unsigned size, struct appl_err *err)
{
	struct pool *p = calloc(1, sizeof(*p));

	if (!p) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	p->loop = loop;
	p->rt = rt;
	p->oci = oci;
	p->lim = *lim;
	p->size = size;
	loop_task_init(&p->tend, on_tend, p);
	p->timer = loop_timer_new(loop, on_timer, p, err);
	if (!p->timer) {
		free(p);
		return NULL;
	}
	return p;
}

/* A boot failed: wait longer before the next, up to the cap. */
static void backoff(struct pool *p, const char *why)
{
	uint64_t wait = APPL_POOL_BACKOFF_MIN_MS;

	p->failures++;
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
		if (!s->ready)
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

static int boot_one(struct pool *p)
{
	struct cell_hooks hooks = {.on_ready = on_slot_ready, .on_done = on_slot_done};
	struct appl_err err = {0};
	struct slot *s = calloc(1, sizeof(*s));
	struct sandbox *sb;

	if (!s)
		return -ENOMEM;
	s->pool = p;
	hooks.data = s;
	sb = sandbox_start(p->rt, p->oci, &err);
	if (sb)
		s->cell = cell_boot(p->loop, sb, &p->lim, &hooks, &err);
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
	while (held(p) < p->size)
		if (boot_one(p) < 0)
			break;
}

struct cell *pool_take(struct pool *p)
{
	struct slot **pp;

	if (!p)
		return NULL;
	for (pp = &p->slots; *pp; pp = &(*pp)->next) {
		struct slot *s = *pp;
		struct cell *c;

		if (!s->ready || s->dead || !cell_idle(s->cell))
			continue;
		*pp = s->next;
		c = s->cell;
		free(s);
		return c;
	}
	return NULL;
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
	loop_timer_free(p->timer);
	loop_task_cancel(p->loop, &p->tend);
	free(p);
}
