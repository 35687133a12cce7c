/* internal.h: the engine's state, shared by its own files (engine.c
 * builds and runs it; the others read it for status and readiness). Not
 * for use outside pkg/engine. */
#ifndef APPL_ENGINE_INTERNAL_H
#define APPL_ENGINE_INTERNAL_H

#include <limits.h>
#include <stdbool.h>

#include "engine/confine.h"
#include "engine/engine.h"

struct pool;
struct engine_roles;
struct run_set;
struct session_set;

/* One policy the engine serves or served: the current one, and each older
 * one still held by a run admitted under it (its roles, tools, limits and
 * servers are that run's until it ends). */
struct engine_gen {
	struct engine_gen *next; /* the older ones, in e->old */
	const struct policy *policy;
	void *handle; /* engine_reload's; released through cfg.release */
	struct engine_roles *roles;
	struct upstream_set *ups;
	struct policy_limits lim;
	struct bridge_limits blim;
	unsigned runs; /* admitted under it and not yet freed */
};

struct engine {
	struct engine_config cfg;
	/* The current policy's: gen, and what it holds, kept here too for
	 * the code that reads the engine (policy NULL: `cell --image`). */
	struct engine_gen *gen;
	struct engine_gen *old;
	const struct policy *policy;
	struct policy_limits lim;
	struct sandbox_oci_params oci; /* every sandbox's, rootfs included */
	struct cell_limits cell_lim;   /* every run's */
	struct bridge_limits blim;
	struct loop *loop;
	struct engine_confine confine;
	struct sandbox_rt *rt;
	struct pool *pool; /* warm sandboxes; size limits.pool */
	char rootfs[PATH_MAX];
	char rootfs_image[PATH_MAX]; /* "" when the rootfs is served as a directory */
	bool mounted;		     /* engine_rootfs_mount passed: oci names the rootfs */
	struct upstream_set *ups;
	struct bridge_gate *gate; /* each server's slots, shared by every run */
	struct engine_roles *roles;
	struct run_set *runs;
	struct session_set *sessions; /* interpreters kept between cells */
	struct audit *audit;	      /* NULL: none */
	struct tracer *tracer;
	const struct bridge_ledger *ledger;
	/* replicas' (engine_ledger); NULL: none */ /* NULL: no traces */
	unsigned long served;			    /* runs asked for, for the stop line */
	char stop_why[32];
	char drain_why[32];		/* "" until a drain began */
	struct loop_timer *drain_timer; /* its end: limits.http_drain_s */
	bool stop;
	bool started;
	unsigned long reloads; /* taken, for the log */
	bool ready_asked;      /* engine_ready_prepare was called */
};

/* engine.c, for tools.c: why a run of client must not start now (the
 * policy expired, the audit log cannot be written, too many wait), or
 * NULL; *reason the metrics' word, why (cap bytes) room for the text. */
const char *engine_run_refusal(struct engine *e, const struct run_client *client,
			       unsigned waiting_cap, unsigned total_cap, const char **reason,
			       char *why, size_t cap);

/* engine.c, for reload.c */
struct engine_gen *engine_gen_new(struct engine *e, const struct policy *p, void *handle);
void engine_gen_free(struct engine *e, struct engine_gen *g);
void engine_gen_use(struct engine *e, struct engine_gen *g);

#endif
