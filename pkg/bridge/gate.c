/* gate.c: the per-server slots every run's calls share (see bridge.h).
 *
 * Each server of the policy has servers.NAME.concurrency slots. A run that
 * finds its call's server full keeps the call waiting; when a slot frees,
 * the runs are offered it in turn, starting after the one served last, and
 * the first with a call waiting for that server (and room under its own
 * concurrency) sends one. Nothing here calls an upstream: run.c does,
 * through the send function each run joins with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/bridge.h"
#include "bridge/internal.h"

struct gate_server {
	char *name; /* the policy's, copied: a reload frees the policy */
	unsigned cap, inflight;
	size_t next; /* the run offered a free slot first */
};

struct gate_member {
	struct bridge_run *run;
	gate_send_fn *send_for;
};

struct bridge_gate {
	struct gate_server *s;
	size_t n;
	struct gate_member *runs; /* in the order they joined */
	size_t nruns, capruns;
	bool handing; /* inside gate_give's loop */
	bool again;   /* a slot freed while handing: look once more */
};

struct bridge_gate *bridge_gate_new(const struct policy *p)
{
	struct bridge_gate *g = calloc(1, sizeof(*g));

	if (!g || bridge_gate_update(g, p) < 0) {
		bridge_gate_free(g);
		return NULL;
	}
	return g;
}

void bridge_gate_free(struct bridge_gate *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		free(g->s[i].name);
	free(g->s);
	free(g->runs);
	free(g);
}

static struct gate_server *server_find(const struct bridge_gate *g, const char *name)
{
	for (size_t i = 0; g && name && i < g->n; i++)
		if (strcmp(g->s[i].name, name) == 0)
			return &g->s[i];
	return NULL;
}

unsigned bridge_gate_inflight(const struct bridge_gate *g, const char *server)
{
	const struct gate_server *s = server_find(g, server);

	return s ? s->inflight : 0;
}

int gate_join(struct bridge_gate *g, struct bridge_run *r, gate_send_fn *send_for)
{
	if (g->nruns == g->capruns) {
		size_t cap = g->capruns ? g->capruns * 2 : 8;
		struct gate_member *p = realloc(g->runs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		g->runs = p;
		g->capruns = cap;
	}
	g->runs[g->nruns++] = (struct gate_member){r, send_for};
	return 0;
}

void gate_leave(struct bridge_gate *g, struct bridge_run *r)
{
	for (size_t i = 0; i < g->nruns; i++) {
		if (g->runs[i].run != r)
			continue;
		memmove(&g->runs[i], &g->runs[i + 1], (g->nruns - i - 1) * sizeof(*g->runs));
		g->nruns--;
		/* the turn stays with the run that was next */
		for (size_t k = 0; k < g->n; k++)
			if (g->s[k].next > i)
				g->s[k].next--;
		return;
	}
}

bool gate_take(struct bridge_gate *g, const char *server)
{
	struct gate_server *s = server_find(g, server);

	if (!s)
		return true; /* not a server of the policy: the upstream set refuses it */
	if (s->inflight >= s->cap)
		return false;
	s->inflight++;
	return true;
}

/* Offer s's free slots to the runs in turn until none is free or a whole
 * round sent nothing. */
static void hand_out(struct bridge_gate *g, struct gate_server *s)
{
	size_t idle = 0;

	while (s->inflight < s->cap && g->nruns && idle < g->nruns) {
		size_t i = s->next % g->nruns;

		s->next = i + 1;
		/* send_for takes the slot (gate_take) when it sends */
		if (g->runs[i].send_for(g->runs[i].run, s->name))
			idle = 0;
		else
			idle++;
	}
}

void gate_give(struct bridge_gate *g, const char *server)
{
	struct gate_server *s = server_find(g, server);

	if (!s)
		return;
	if (s->inflight)
		s->inflight--;
	if (g->handing) {
		g->again = true;
		return;
	}
	g->handing = true;
	do {
		g->again = false;
		for (size_t i = 0; i < g->n; i++)
			hand_out(g, &g->s[i]);
	} while (g->again);
	g->handing = false;
}

int bridge_gate_update(struct bridge_gate *g, const struct policy *p)
{
	size_t n = policy_server_count(p), add = 0;
	struct gate_server *s;

	for (size_t i = 0; i < n; i++)
		add += !server_find(g, policy_server_get(p, i)->name);
	if (add) {
		if (!(s = realloc(g->s, (g->n + add) * sizeof(*s))))
			return -ENOMEM;
		g->s = s;
	}
	for (size_t i = 0; i < n; i++) {
		const struct policy_server *srv = policy_server_get(p, i);
		struct gate_server *gs = server_find(g, srv->name);

		if (!gs) {
			gs = &g->s[g->n];
			*gs = (struct gate_server){.name = strdup(srv->name)};
			if (!gs->name)
				return -ENOMEM;
			g->n++;
		}
		/* A lower cap holds from the next call: those in flight finish. */
		gs->cap = srv->concurrency ? srv->concurrency : 1;
	}
	/* A higher one frees slots now. */
	for (size_t i = 0; !g->handing && i < g->n; i++)
		hand_out(g, &g->s[i]);
	return 0;
}
