/* run.c: part 2's rounds: the probes started at most limits.cells at
 * once, as run would, the long-running ones first, each judged as soon as
 * its cell has ended (internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"
#include "loop/loop.h"

/* The stop signal's account ("signal N"), or NULL while none came. */
const char *check_stopped(const struct check *c)
{
	const char *why = NULL;

	return c->e && engine_stopping(c->e, &why) ? why : NULL;
}

/* The engine's answer: the probe's result object, or why it had none. */
static void probe_answer(void *data, const json_t *result, bool is_error, const char *text,
			 const json_t *files)
{
	struct check_probe *p = data;

	(void)is_error;
	(void)files;   /* the result object lists them: what a probe judges */
	p->run = NULL; /* freed by the engine once this returns */
	p->ended = true;
	if (result)
		p->result = json_incref((json_t *)result);
	else
		snprintf(p->why, sizeof(p->why), "%s",
			 text ? text : "the run ended without a result");
}

void check_run_release(struct check_probe *p)
{
	if (p->run)
		run_cancel(p->run); /* no answer comes after this */
	p->run = NULL;
	check_listen_close(&p->lis);
}

/* A probe is a run as a client's would be: the engine gives it a fresh
 * sandbox and, for a --call, a bridge run under the stdio client's role
 * (approvals by the policy's command alone: no person is at check). */
int check_run_start(struct check *c, struct check_probe *p)
{
	struct run_client client = {.name = CHECK_RUN_ID,
				    .role = p->call ? policy_client_default_role(c->cp.policy)
						    : NULL,
				    .answer = probe_answer,
				    .c = p,
				    .deadline_ms = p->deadline_ms};

	p->started = true;
	p->run = engine_run_new(c->e, p->code, strlen(p->code), &client, 0, APPL_RUNS_WAITING_MAX);
	if (!p->run && !p->ended) {
		snprintf(p->why, sizeof(p->why), "the run could not start");
		p->ended = true;
	}
	return 0;
}

static void probe_judge_now(struct check_probe *p)
{
	unsigned arrivals = check_listen_arrivals(&p->lis);

	if (p->result)
		p->ok = check_judge_result(&p->ex, p->result, arrivals, p->why, sizeof(p->why));
	else
		p->ok = false; /* why says why it had no result */
	p->judged = true;
	check_run_release(p);
}

/* The next probe to start: the long-running ones first. */
static struct check_probe *probe_next(struct check *c)
{
	for (int early = 1; early >= 0; early--)
		for (size_t i = 0; i < c->nprobes; i++) {
			struct check_probe *p = &c->probes[i];

			if (!p->started && (p->def ? p->def->early : false) == (bool)early)
				return p;
		}
	return NULL;
}

static unsigned probes_reap(struct check *c)
{
	unsigned running = 0;

	for (size_t i = 0; i < c->nprobes; i++) {
		struct check_probe *p = &c->probes[i];

		if (p->started && p->ended && !p->judged)
			probe_judge_now(p);
		else if (p->started && !p->judged)
			running++;
	}
	return running;
}

static void probes_cancel(struct check *c, const char *why)
{
	for (size_t i = 0; i < c->nprobes; i++) {
		struct check_probe *p = &c->probes[i];

		if (!p->started)
			check_prepare_surprise(p, "not run: stopped by %s", why);
		else if (p->run && !p->ended)
			run_interrupt(p->run, why);
	}
}

void check_run_probes(struct check *c)
{
	unsigned running = 0;
	struct check_probe *p;
	bool cancelled = false;

	for (;;) {
		running = probes_reap(c);
		while (!check_stopped(c) && running < c->lim.cells && (p = probe_next(c)))
			if (check_run_start(c, p) == 0)
				running++;
		if (check_stopped(c) && !cancelled) {
			probes_cancel(c, check_stopped(c));
			cancelled = true;
		}
		if (running == 0 && (check_stopped(c) || !probe_next(c)))
			break;
		if (loop_run_once(engine_loop(c->e), -1) < 0)
			break;
	}
}
