/* engine.h: what every command that runs cells or starts servers builds,
 * built once, in one place (DESIGN.md section 14).
 *
 * engine_open makes the event loop and watches the stop signals and
 * SIGCHLD on it (the signals were blocked by main before anything
 * started, so one that came early is pending and delivered now);
 * engine_start then starts the parts the command asked for, in this
 * order: the image verified against its digest, the audit log opened,
 * the sandbox runtime opened (and the image made an EROFS file when runsc
 * can mount one), the servers started confined and their tool lists
 * awaited, the warm pool, and last the caller's on_started (where `run`
 * records the policy's serial) and the audit log's start line. Runs are
 * the engine's clients: engine_run_new admits one (or refuses it with
 * the reason), and engine's start hook is the one place a run gets its
 * cell and its bridge. engine_close stops every run, writes the audit
 * log's stop line and a last seal, stops the servers and the sandboxes,
 * and reaps every child left.
 *
 * `run` (pkg/gateway), `cell`, `stubs` and `check` use it; cmd/ parses
 * arguments, calls it and prints.
 */
#ifndef APPL_ENGINE_ENGINE_H
#define APPL_ENGINE_ENGINE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "bridge/bridge.h"
#include "cell/cell.h"
#include "loop/loop.h"
#include "policy/load.h"
#include "policy/policy.h"
#include "run/run.h"
#include "sandbox/ociconfig.h"

struct engine;
struct audit;
struct upstream_set;
struct upstream_secrets;
struct sandbox_rt;
struct sandbox;

/* The parts engine_start starts. */
#define ENGINE_SANDBOX 0x1u  /* the image and the sandbox runtime: runs get cells */
#define ENGINE_SERVERS 0x2u  /* the policy's servers: runs get their tools */
#define ENGINE_POOL    0x4u  /* limits.pool sandboxes made ahead (with SANDBOX) */
#define ENGINE_AUDIT   0x8u  /* the policy's audit log, when it has one */
#define ENGINE_TRACES  0x10u /* spans to the policy's telemetry collector, when it names one */

/* How long engine_close waits for the last spans to go. */
#define ENGINE_TRACES_FLUSH_MS 5000u

struct engine_config {
	unsigned parts;
	/* Verified; borrowed. NULL only for `cell --image`: then image,
	 * digest, the runtime's fields, oci and cell below say it all. */
	const struct policy *policy;
	const char *image, *digest;    /* without a policy */
	const char *runsc, *platform;  /* without a policy; NULL: defaults */
	bool rootless;		       /* without a policy */
	struct sandbox_oci_params oci; /* without a policy (rootfs set here) */
	struct cell_limits cell;       /* without a policy */
	const char *cache;	       /* the image cache; NULL: the default */
	const char *run_dir;	       /* runsc instances; NULL: the default */
	/* For the audit log: what was verified, and the state directory
	 * that holds the log's head and keys. */
	const struct policy_verified *verified;
	const char *state_dir;
	/* Paths hidden from the servers besides the defaults and the audit
	 * log: the policy file, the trust and state directories. NULL-ended;
	 * may be NULL. */
	const char *const *hide;
	/* The values of the HTTP servers' headers (upstream_secrets_take;
	 * borrowed; may be NULL), wiped once the servers are made. */
	struct upstream_secrets *secrets;
	/* Called last in engine_start, once everything else has passed.
	 * Non-zero stops the start with err. May be NULL. */
	int (*on_started)(void *data, struct appl_err *err);
	/* role's view changed (a server's tool list): its clients are told.
	 * May be NULL. */
	void (*tools_changed)(void *data, const char *role);
	/* With SERVERS: the role whose view (engine_role_view) is built as
	 * part of the start, so that one that cannot be built fails it (the
	 * stdio client's; NULL: a role that may call nothing). */
	bool start_role;
	const char *role;
	/* Admission: only HTTP clients are held to a share of the slots. */
	unsigned per_client;
	/* A policy engine_reload took is no longer needed (handle is
	 * engine_reload's). May be NULL. */
	void (*release)(void *data, void *handle);
	/* SIGHUP came: instead of a stop, this is called (from the loop).
	 * May be NULL: SIGHUP stops, as SIGTERM does. */
	void (*hangup)(void *data);
	/* The first SIGTERM: instead of a stop, the appliance drains (it is
	 * not ready from now on) and this is called (from the loop); the
	 * owner stops it once its runs have ended. A second SIGTERM, or
	 * SIGINT, stops at once. May be NULL: SIGTERM stops. */
	void (*drain)(void *data);
	void *data;
	/* The appliance's name (run --name; NULL: the policy's default): it
	 * replaces {name} in the policy's audit.path. */
	const char *name;
};

/* Split a policy's limits into what the sandbox gets (oci; rootfs left as
 * it was) and what the cell gets: the one mapping from policy limits to
 * the running parts. */
void engine_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
			 struct cell_limits *cell);

/* The loop and the signals (nothing started yet). cfg is copied; what it
 * points to is borrowed and must outlive the engine. NULL with err. */
struct engine *engine_open(const struct engine_config *cfg, struct appl_err *err);

/* Start cfg->parts (above). 0, or negative with err saying what failed;
 * the engine is then only good for engine_close. */
int engine_start(struct engine *e, struct appl_err *err);
bool engine_started(const struct engine *e);

/* engine_start's steps one by one, for a caller that reports each
 * (`check`): the image verified against its digest and unpacked; the
 * sandbox runtime opened; the rootfs handed to it (as one image where
 * runsc mounts one; image and runtime first); the servers started,
 * confined; the sandboxes for runs (the rootfs first). Each is done once:
 * called again after it passed, it returns 0 at once. 0, or negative with
 * err. No audit log, no on_started: those are engine_start's alone. */
int engine_image_verify(struct engine *e, struct appl_err *err);

/* What p's image says it needs (its config's labels) against p: a
 * limits.memory_mb below the image's least is refused, naming both.
 * engine_start calls it after engine_image_verify, as `check` does and a
 * reload's check of a new image. */
int engine_image_needs(const struct policy *p, struct appl_err *err);
int engine_runtime_open(struct engine *e, struct appl_err *err);
int engine_rootfs_mount(struct engine *e, struct appl_err *err);
int engine_servers_open(struct engine *e, struct appl_err *err);
int engine_cells_open(struct engine *e, struct appl_err *err);

/* What the steps made (borrowed; NULL until made): the verified rootfs
 * directory and, in *image (may be NULL), its one-image form or NULL when
 * it is served as a directory; the runtime; the servers. */
const char *engine_rootfs(const struct engine *e, const char **image);
struct sandbox_rt *engine_runtime(const struct engine *e);
struct upstream_set *engine_servers(const struct engine *e);

struct loop *engine_loop(const struct engine *e);
/* The policy in force (borrowed: read it again after a loop round rather
 * than keeping it), or NULL for `cell --image`. */
const struct policy *engine_policy(const struct engine *e);
/* The policy's limits (the defaults without a policy). */
const struct policy_limits *engine_limits(const struct engine *e);
/* The tracer (trace.h), or NULL: no traces (made by engine_open with
 * ENGINE_TRACES when the policy names a collector). */
struct tracer;
struct tracer *engine_tracer(const struct engine *e);

/* The ledger replicas share (bridge.h; borrowed, it must outlive the
 * runs; NULL: none): the bridges of runs started from now on use it. */
struct bridge_ledger;
void engine_ledger(struct engine *e, const struct bridge_ledger *l);

/* The audit log, or NULL (none, or not started). */
struct audit *engine_audit(const struct engine *e);

/* A stop: a signal came (why "signal N"), or the caller asked (why copied,
 * the first reason kept). engine_stopping says whether one came, and why. */
void engine_stop(struct engine *e, const char *why);
bool engine_stopping(const struct engine *e, const char **why);
/* A drain began (engine_config.drain), why "signal 15"; NULL: none. */
const char *engine_draining(const struct engine *e);

/* The run_python description role (NULL: a role that may call nothing)
 * sees, and its catalog (borrowed; valid until the servers' tool lists
 * change). NULL with err when it could not be built. */
const char *engine_role_view(struct engine *e, const char *role, struct bridge_catalog **cat,
			     struct appl_err *err);

/* A run of code[0..len) for client (run.h; with client->args, the code
 * has them as `args`). Refused, answered through
 * client->answer at once and NULL returned, when the policy has expired,
 * the audit log cannot be written, too many runs wait (of client's:
 * waiting_cap, 0 none; of all: total_cap), or its role's view cannot be
 * built; NULL too on out of memory (answered). */
struct run *engine_run_new(struct engine *e, const char *code, size_t len,
			   const struct run_client *client, unsigned waiting_cap,
			   unsigned total_cap);

/* The code tools role may call under the policy in force
 * (policy_code_tool_allowed), in name order, at most cap of them into out
 * (borrowed: read them again after a loop round); how many. */
size_t engine_role_code_tools(const struct engine *e, const char *role,
			      const struct policy_code_tool **out, size_t cap);

/* Whether role's clients see run_python: false only for a role of the
 * policy in force with "inline": false (a NULL role, one that may call
 * nothing, sees it and is refused every tool). */
bool engine_role_inline(const struct engine *e, const char *role);

/* A call of the code tool name with args (borrowed; NULL: {}) for client
 * (run.h; its tool and args are set here): refused, answered at once and
 * NULL returned, as engine_run_new refuses, and when the client's role
 * may not call it or args do not pass its input schema, before any
 * sandbox is taken; else a run of its program with args, under the
 * tool's uses (engine_roles_tool_view). */
struct run *engine_run_tool(struct engine *e, const char *name, const json_t *args,
			    const struct run_client *client, unsigned waiting_cap,
			    unsigned total_cap);

/* `check`'s run of code tool t's program with args (NULL: {}) for client,
 * its calls through cat (a reference is taken; check's own, which lets no
 * write through) rather than a role's view: refused only for args that
 * do not pass t's input schema. NULL when refused (answered). */
struct run *engine_run_program(struct engine *e, const struct policy_code_tool *t,
			       const json_t *args, const struct run_client *client,
			       struct bridge_catalog *cat);

/* run_python's session arguments (docs/sessions.md): session "new" or a
 * handle (NULL: a cell of its own), end (end that session: no code), and
 * the legacy MCP session the request came in (0: none), which the session
 * is bound to. */
struct engine_session_args {
	const char *session;
	bool end;
	uint64_t bind;
};

/* engine_run_new with sa (may be NULL: engine_run_new). A session the
 * client may not have (sa's refusals: session.h) is answered at once as
 * a failure, as is an end (answered with a result object saying the
 * session ended); NULL is returned for both. */
struct run *engine_run_session(struct engine *e, const char *code, size_t len,
			       const struct run_client *client, unsigned waiting_cap,
			       unsigned total_cap, const struct engine_session_args *sa);

/* The sessions of the legacy MCP session bind end ("closed"); those of
 * client end (why: a reload removed it or changed its role). */
void engine_sessions_closed(struct engine *e, uint64_t bind);
void engine_sessions_end_client(struct engine *e, const char *client, const char *why);

/* One run of code[0..len) for this call alone (`appliance cell`), waited
 * for: 0 with *result its result object (new reference), or negative with
 * err when it could not run (why). A stop signal stops it, and its result
 * says so: reason "signal", error "the run was stopped: WHO got signal N". */
int engine_run_wait(struct engine *e, const char *code, size_t len, const char *who,
		    json_t **result, struct appl_err *err);

/* Runs listed (waiting, running, or ended and not yet answered). */
unsigned engine_runs(const struct engine *e);

/* What the engine is doing, for the admin socket's status (new
 * reference; NULL on out of memory), read from the parts each time:
 *   servers  [{name, state (starting, ready, down, backoff), revision
 *            (the MCP revision it speaks; null before its first
 *            handshake), tools (count), restarts, last_error (or null)}]
 *            ([] until the servers started)
 *   cells    {in_flight (holding a slot), waiting, slots (limits.cells),
 *            by_client: {CLIENT: {in_flight, waiting}}}
 *   pool     {size, ready, booting, frozen}
 *   audit    {path, lines (written by this appliance), last_seal (the
 *            log's newest seal as last seen, or null), ok}, or null
 *   sessions {open, frozen} (docs/sessions.md) */
json_t *engine_status(struct engine *e);

/* Stop every run now: their sandboxes go down together, and no run is
 * answered any more (the clients are going). */
void engine_runs_stop(struct engine *e);

/* Everything down (above), every child reaped. reason goes into the audit
 * log's stop line (NULL: the stop's why, or "start failed"). Safe on
 * NULL. */
void engine_close(struct engine *e);

/* ---- a new policy without a restart ------------------------------------------ */

/* What a reload takes, and what came of it. */
struct engine_reload {
	const struct policy *policy; /* verified, not expired; held from a 0 return */
	void *handle;		     /* given to cfg.release once the engine is done */
	/* Called once every check has passed and before anything changes
	 * (the rollback floor is committed here). Non-zero refuses the
	 * reload with err. May be NULL. */
	int (*commit)(void *data, struct appl_err *err);
	void *data;
	/* Out: servers started (added or changed), servers the new policy
	 * no longer runs (they stop once the runs that may call them end),
	 * and whether the warm pool was drained to be filled again. */
	size_t started, retired;
	bool pool;
};

/* Serve rl->policy from now on (after engine_start). Everything a start
 * checks is checked first: nothing read only at start changed
 * (policy_reload_restart), a new image verified against its digest and
 * mounted, every added or changed server started and ready, every role's
 * view built; then rl->commit. Only when all passed does it take effect:
 * new runs get its roles, limits and servers, runs already admitted keep
 * theirs (and the servers only they may call run until they end), the
 * gate and the run slots take its counts, the pool is drained and filled
 * again when the image or a sandbox limit changed, and each role whose
 * view changed is told (cfg.tools_changed). 0; or negative with err, and
 * nothing changed (the started servers stopped again). Not from a loop
 * callback: servers are waited for on the loop. */
int engine_reload(struct engine *e, struct engine_reload *rl, struct appl_err *err);

/* ---- one-off uses ------------------------------------------------------------ */

/* `appliance check`'s proof of the pool (after engine_cells_open).
 * engine_pool_keep: the runs' pool keeps n sandboxes warm from now on
 * (booted, never restored: only run restores), booting at once; n = 0
 * boots no more, and those held are still taken by the next runs.
 * engine_pool_ready: the sandbox the next run would take, once one is
 * ready (frozen, where the pool could freeze it), or NULL; borrowed, for
 * reading its state, until a run takes it or the loop turns. */
void engine_pool_keep(struct engine *e, unsigned n);
const struct sandbox *engine_pool_ready(const struct engine *e);
/* Why the pool's last boot failed, or NULL when it did not (borrowed,
 * until the next loop round). */
const char *engine_pool_failed(const struct engine *e);

/* `appliance check`: judge the policy's audit log (state_dir holds its
 * head and keys) as engine_start judges it, writing nothing. 0 without an
 * audit log. */
int engine_audit_check(const struct policy *p, const char *state_dir, struct appl_err *err);

#endif
