/* admit.c: cell slots handed to waiting runs in turn (see admit.h).
 *
 * The principals with a run waiting or holding a slot form a ring; `last`
 * is the one served last, and the next slot is offered starting after it.
 * A principal with nothing left leaves the ring, so the ring holds at most
 * the clients with work in the appliance.
 */
#include "run/admit.h"

#include <stdlib.h>
#include <string.h>

struct principal {
	struct principal *next, *prev; /* the ring */
	char *name;
	struct run_ticket *head, *tail; /* waiting, oldest first */
	unsigned waiting, running;
};

struct run_ticket {
	struct run_ticket *next; /* in its principal's line while waiting */
	struct principal *p;
	void *data;
	bool running;
};

struct run_queue {
	unsigned cells, per_principal;
	unsigned waiting, running;
	struct principal *ring; /* any member; NULL: no principal has work */
	struct principal *last; /* served last; NULL: none yet */
};

struct run_queue *run_queue_new(unsigned cells, unsigned per_principal)
{
	struct run_queue *q = calloc(1, sizeof(*q));

	if (q) {
		q->cells = cells ? cells : 1;
		q->per_principal = per_principal;
	}
	return q;
}

void run_queue_free(struct run_queue *q)
{
	free(q);
}

static struct principal *principal_find(const struct run_queue *q, const char *name)
{
	struct principal *p = q->ring;

	if (p)
		do {
			if (strcmp(p->name, name) == 0)
				return p;
			p = p->next;
		} while (p != q->ring);
	return NULL;
}

/* Insert p at the end of the round: just before the principal served
 * last, so everyone already waiting is offered a slot before it. */
static void ring_insert(struct run_queue *q, struct principal *p)
{
	struct principal *before = q->last ? q->last : q->ring;

	if (!before) {
		p->next = p->prev = p;
		q->ring = p;
		return;
	}
	p->next = before;
	p->prev = before->prev;
	before->prev->next = p;
	before->prev = p;
}

static void ring_remove(struct run_queue *q, struct principal *p)
{
	bool alone = p->next == p;

	/* the turn stays where it was: after p's predecessor comes p's
	 * successor */
	if (q->last == p)
		q->last = alone ? NULL : p->prev;
	if (q->ring == p)
		q->ring = alone ? NULL : p->next;
	p->prev->next = p->next;
	p->next->prev = p->prev;
	free(p->name);
	free(p);
}

static struct principal *principal_get(struct run_queue *q, const char *name)
{
	struct principal *p = principal_find(q, name);

	if (p)
		return p;
	if (!(p = calloc(1, sizeof(*p))) || !(p->name = strdup(name))) {
		free(p);
		return NULL;
	}
	ring_insert(q, p);
	return p;
}

struct run_ticket *run_queue_join(struct run_queue *q, const char *principal, void *data)
{
	struct run_ticket *t = calloc(1, sizeof(*t));
	struct principal *p = t ? principal_get(q, principal) : NULL;

	if (!p) {
		free(t);
		return NULL;
	}
	t->p = p;
	t->data = data;
	if (p->tail)
		p->tail->next = t;
	else
		p->head = t;
	p->tail = t;
	p->waiting++;
	q->waiting++;
	return t;
}

/* Whether p has a run waiting and room under its own cap. */
static bool may_start(const struct run_queue *q, const struct principal *p)
{
	return p->head && (!q->per_principal || p->running < q->per_principal);
}

static struct run_ticket *start(struct run_queue *q, struct principal *p)
{
	struct run_ticket *t = p->head;

	p->head = t->next;
	if (!p->head)
		p->tail = NULL;
	t->next = NULL;
	t->running = true;
	p->waiting--;
	p->running++;
	q->waiting--;
	q->running++;
	q->last = p;
	return t;
}

struct run_ticket *run_queue_next(struct run_queue *q)
{
	struct principal *first, *p;

	if (q->running >= q->cells || !q->waiting || !q->ring)
		return NULL;
	first = q->last ? q->last->next : q->ring;
	p = first;
	do {
		if (may_start(q, p))
			return start(q, p);
		p = p->next;
	} while (p != first);
	return NULL;
}

/* Take waiting t out of its principal's line. */
static void line_remove(struct principal *p, const struct run_ticket *t)
{
	struct run_ticket *prev = NULL;

	for (struct run_ticket *it = p->head; it; prev = it, it = it->next) {
		if (it != t)
			continue;
		if (prev)
			prev->next = it->next;
		else
			p->head = it->next;
		if (p->tail == it)
			p->tail = prev;
		return;
	}
}

void run_queue_leave(struct run_queue *q, struct run_ticket *t)
{
	struct principal *p;

	if (!t)
		return;
	p = t->p;
	if (t->running) {
		p->running--;
		q->running--;
	} else {
		line_remove(p, t);
		p->waiting--;
		q->waiting--;
	}
	free(t);
	if (!p->waiting && !p->running)
		ring_remove(q, p);
}

/* principal's runs waiting or running (principal NULL: everyone's). */
static unsigned count_of(const struct run_queue *q, const char *principal, bool running)
{
	const struct principal *p;

	if (!principal)
		return running ? q->running : q->waiting;
	p = principal_find(q, principal);
	return !p ? 0 : running ? p->running : p->waiting;
}

unsigned run_queue_waiting(const struct run_queue *q, const char *principal)
{
	return count_of(q, principal, false);
}

unsigned run_queue_running(const struct run_queue *q, const char *principal)
{
	return count_of(q, principal, true);
}

void *run_ticket_data(const struct run_ticket *t)
{
	return t->data;
}

bool run_ticket_running(const struct run_ticket *t)
{
	return t->running;
}

void run_queue_limits(struct run_queue *q, unsigned cells, unsigned per_principal)
{
	q->cells = cells ? cells : 1;
	q->per_principal = per_principal;
}
