/* engine.c: what every command that runs cells or starts servers builds,
 * once (see engine.h). */
#define _GNU_SOURCE
#include "engine/engine.h"
#include "engine/internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <time.h>

#include "audit/audit.h"
#include "base/version.h"
#include "engine/confine.h"
#include "engine/process.h"
#include "engine/roles.h"
#include "image/image.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "upstream/set.h"
#include "pool/pool.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"
#include "schema/schema.h"
#include "session/session.h"
#include "trace/trace.h"

void engine_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
			 struct cell_limits *cell)
{
	const char *rootfs = oci->rootfs, *image = oci->rootfs_image;

	sandbox_oci_params_init(oci);
	oci->rootfs = rootfs;
	oci->rootfs_image = image;
	oci->memory_mb = l->memory_mb;
	oci->pids = l->pids;
	oci->nofile = l->nofile;
	oci->tmpfs_mb = l->tmpfs_mb;
	cell_limits_init(cell);
	cell->deadline_ms = l->deadline_s * 1000ull;
	cell->boot_ms = l->boot_s * 1000ull;
	cell->max_output = l->max_output_bytes;
	cell->stop_output = l->stop_output_bytes;
	cell->max_lines = l->max_runner_lines;
	cell->files.max_count = l->files.max_count;
	cell->files.max_bytes = l->files.max_bytes;
	cell->files.max_total = l->files.max_total_bytes;
}

/* ---- signals ----------------------------------------------------------------- */

/* The drain's time is up: the runs still in flight are stopped. */
static void on_drain_end(void *data)
{
	struct engine *e = data;

	log_line(LOG_WARN, NULL,
		 "drain: %u runs still in flight after limits.http_drain_s: stopping",
		 engine_runs(e));
	engine_stop(e, e->drain_why);
}

/* A drain, the first SIGTERM's, when the owner wants one, the policy
 * gives it time and a run is in flight (else there is nothing to wait
 * for): true when it began. */
static bool drain_begin(struct engine *e, int signo, const char *why)
{
	unsigned s = engine_limits(e)->http_drain_s;
	struct appl_err err = {0};

	if (signo != SIGTERM || !e->cfg.drain || e->drain_why[0] || !s || !engine_runs(e))
		return false;
	if (!e->drain_timer && !(e->drain_timer = loop_timer_new(e->loop, on_drain_end, e, &err))) {
		log_line(LOG_WARN, NULL, "no drain: %s", err.msg);
		return false;
	}
	loop_timer_set(e->drain_timer, (uint64_t)s * 1000u);
	log_line(LOG_INFO, NULL,
		 "signal %d: draining: not ready, no new runs; stopping when the %u in flight "
		 "have ended, within %u s (another SIGTERM, or SIGINT, stops at once)",
		 signo, engine_runs(e), s);
	snprintf(e->drain_why, sizeof(e->drain_why), "%s", why);
	e->cfg.drain(e->cfg.data);
	return true;
}

static void on_stop_signal(int signo, void *data)
{
	struct engine *e = data;
	char why[32];

	/* `run` reloads its policy on SIGHUP (between loop rounds); the
	 * commands that do not, stop. */
	if (signo == SIGHUP && e->cfg.hangup) {
		log_line(LOG_INFO, NULL, "SIGHUP: the policy is read again");
		e->cfg.hangup(e->cfg.data);
		return;
	}
	snprintf(why, sizeof(why), "signal %d", signo);
	if (drain_begin(e, signo, why))
		return;
	log_line(LOG_INFO, NULL, "signal %d: stopping", signo);
	engine_stop(e, why);
}

/* Orphaned sandbox processes are ours to reap (we are a subreaper): runsc
 * delete waits for them to vanish. */
static void on_sigchld(int signo, void *data)
{
	(void)signo;
	(void)data;
	proc_reap_orphans();
}

/* The stop signals were blocked before anything started (main): one that
 * came while servers and sandboxes were starting is pending, and the
 * signalfd delivers it now. */
static int signals_watch(struct engine *e, struct appl_err *err)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP};

	if (proc_signals_check(err) < 0)
		return err->code;
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (loop_signal(e->loop, stops[i], on_stop_signal, e, err) < 0)
			return err->code;
	return loop_signal(e->loop, SIGCHLD, on_sigchld, e, err);
}

void engine_stop(struct engine *e, const char *why)
{
	if (!e->stop)
		snprintf(e->stop_why, sizeof(e->stop_why), "%s", why);
	e->stop = true;
}

void engine_ledger(struct engine *e, const struct bridge_ledger *l)
{
	e->ledger = l;
}

const char *engine_draining(const struct engine *e)
{
	return e->drain_why[0] ? e->drain_why : NULL;
}

bool engine_stopping(const struct engine *e, const char **why)
{
	if (why)
		*why = e->stop_why;
	return e->stop;
}

/* ---- the audit log ------------------------------------------------------------ */

/* The audit log's configuration from the policy, its path path (the
 * policy's for this appliance's name, or NULL): for start and check alike. */
static struct audit_config audit_config_of(const struct policy *p, const struct policy_limits *l,
					   const char *state_dir, const char *path)
{
	return (struct audit_config){.path = path,
				     .state_dir = state_dir,
				     .seal = policy_audit_seal(p),
				     .seal_lines = l->audit_seal_lines,
				     .seal_s = l->audit_seal_s,
				     .rotate_bytes = (uint64_t)l->audit_rotate_kb * 1024u};
}

int engine_audit_check(const struct policy *p, const char *state_dir, struct appl_err *err)
{
	struct policy_limits l;
	struct audit_config ac;
	char path[PATH_MAX];

	policy_limits_get(p, &l);
	if (policy_audit_path(p) && policy_audit_path_for(p, NULL, path, sizeof(path)) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "audit.path: too long with the name");
	ac = audit_config_of(p, &l, state_dir, policy_audit_path(p) ? path : NULL);
	if (!ac.path)
		return 0;
	if (!ac.state_dir)
		return appl_err_set(err, -EINVAL, "audit: no state directory");
	return audit_check(&ac, err);
}

static int audit_start(struct engine *e, struct appl_err *err)
{
	char path[PATH_MAX];
	struct audit_config ac;

	if (policy_audit_path(e->policy) &&
	    policy_audit_path_for(e->policy, e->cfg.name, path, sizeof(path)) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "audit.path: too long with the name");
	ac = audit_config_of(e->policy, &e->lim, e->cfg.state_dir,
			     policy_audit_path(e->policy) ? path : NULL);

	if (!ac.path) {
		log_line(LOG_WARN, NULL, "no audit log: the policy has no audit.path");
		return 0;
	}
	if (!ac.state_dir)
		return appl_err_set(err, -EINVAL, "audit: no state directory");
	e->audit = audit_open(e->loop, &ac, err);
	if (!e->audit)
		return appl_err_prefix(err, "audit log");
	run_set_audit(e->runs, e->audit);
	session_set_audit(e->sessions, e->audit);
	log_line(LOG_INFO, NULL, "audit log %s%s", ac.path, ac.seal ? " (sealed)" : "");
	return 0;
}

/* The start line, on disk before the first request is served. */
static int audit_started(struct engine *e, struct appl_err *err)
{
	const struct policy_verified *v = e->cfg.verified;
	char policy_digest[8 + 2 * POLICY_HASH_BYTES + 1] = "sha256:";
	json_t *body;
	int rc;

	if (!e->audit)
		return 0;
	if (v)
		sodium_bin2hex(policy_digest + 7, sizeof(policy_digest) - 7, v->hash,
			       POLICY_HASH_BYTES);
	/* seal_s tells an auditor how old the newest seal of a log being
	 * written may be (docs/audit.md, the age of the newest seal). */
	body = json_pack("{ss? ss? sI ss ss ss ss sb sI}", "deployment", v ? v->deployment : NULL,
			 "key", v ? v->keyid_hex : NULL, "serial", (json_int_t)(v ? v->serial : 0),
			 "policy", v ? policy_digest : "", "image", policy_image_digest(e->policy),
			 "runsc", sandbox_rt_version(e->rt), "version", APPL_VERSION, "seal",
			 policy_audit_seal(e->policy), "seal_s", (json_int_t)e->lim.audit_seal_s);
	rc = audit_event_sync(e->audit, "start", body);
	json_decref(body);
	if (rc < 0)
		return appl_err_set(err, rc, "audit log: %s", audit_why(e->audit));
	return 0;
}

/* The stop line and a last seal, then the log closed. */
static void audit_stop(struct engine *e)
{
	json_t *body;

	if (!e->audit)
		return;
	body = json_pack("{ss sI}", "reason", e->stop_why[0] ? e->stop_why : "start failed", "runs",
			 (json_int_t)e->served);
	audit_event(e->audit, "stop", body);
	json_decref(body);
	audit_seal_now(e->audit);
	if (audit_flush(e->audit, true) < 0)
		log_line(LOG_ERR, NULL, "the audit log's stop line was not written: %s",
			 audit_why(e->audit));
	audit_free(e->audit);
	e->audit = NULL;
}

/* ---- starting ------------------------------------------------------------------- */

/* A server (re)started or changed its list: the current policy's views
 * again (runs of an older one keep the catalogs they hold). */
static void on_servers_changed(void *data, const char *why)
{
	struct engine *e = data;

	engine_roles_changed(e->roles, why);
}

int engine_servers_open(struct engine *e, struct appl_err *err)
{
	/* An answer past the result cap is dropped as it is read (upstream.h). */
	struct upstream_opts opts = {.result_max = e->lim.max_result_bytes,
				     .secrets = e->cfg.secrets};

	if (e->ups)
		return 0;
	if (engine_confine_prepare(&e->confine, e->policy, e->cfg.name, e->cfg.hide, e->cfg.run_dir,
				   err) < 0)
		return err->code;
	engine_confine_opts(&e->confine, &opts);
	if (!e->gate && !(e->gate = bridge_gate_new(e->policy)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	e->ups = upstream_set_open(e->loop, e->policy, &opts, on_servers_changed, e, err);
	upstream_secrets_wipe(e->cfg.secrets); /* each HTTP upstream holds its own filled copy */
	if (!e->ups)
		return err->code;
	e->gen->ups = e->ups;
	engine_roles_servers(e->roles, e->ups);
	return 0;
}

int engine_image_needs(const struct policy *p, struct appl_err *err)
{
	struct image_config info;
	struct policy_limits l;

	if (image_layout_config(policy_image_layout(p), policy_image_digest(p), &info, err) < 0)
		return err->code;
	policy_limits_get(p, &l);
	if (l.memory_mb < info.memory_mb_min)
		return appl_err_set(err, -EINVAL,
				    "limits.memory_mb: %u MiB is less than the %u MiB a sandbox of "
				    "this image needs (the image's config says so, label %s): "
				    "raise limits.memory_mb to %u or more",
				    l.memory_mb, info.memory_mb_min, IMAGE_LABEL_MEMORY_MIN,
				    info.memory_mb_min);
	return 0;
}

int engine_image_verify(struct engine *e, struct appl_err *err)
{
	const char *image = e->cfg.image, *digest = e->cfg.digest, *dir = e->cfg.cache;
	char cache[PATH_MAX];

	if (e->rootfs[0])
		return 0;
	if (e->policy) {
		image = policy_image_layout(e->policy);
		digest = policy_image_digest(e->policy);
	}
	if (!dir && image_cache_default(cache, sizeof(cache), err) < 0)
		return err->code;
	if (image_layout_verify(image, digest, dir ? dir : cache, e->rootfs, sizeof(e->rootfs),
				err) < 0) {
		e->rootfs[0] = '\0';
		return err->code;
	}
	return 0;
}

int engine_runtime_open(struct engine *e, struct appl_err *err)
{
	struct sandbox_rt_config rc = {.runsc = e->cfg.runsc,
				       .state_dir = e->cfg.run_dir,
				       .platform = e->cfg.platform,
				       .rootless = e->cfg.rootless};

	if (e->rt)
		return 0;
	if (e->policy) {
		rc.runsc = policy_runtime_runsc(e->policy);
		rc.platform = policy_runtime_platform(e->policy);
		rc.rootless = policy_runtime_rootless(e->policy);
	}
	if (!rc.rootless && engine_cgroups_settle(err) < 0)
		return err->code;
	return (e->rt = sandbox_rt_open(&rc, err)) ? 0 : err->code;
}

int engine_rootfs_mount(struct engine *e, struct appl_err *err)
{
	if (!e->rootfs[0] || !e->rt)
		return appl_err_set(err, -EINVAL, "the image and the runtime come first");
	if (e->mounted)
		return 0;
	if (sandbox_rootfs_image(e->rt, e->rootfs, e->rootfs_image, sizeof(e->rootfs_image), err) <
	    0)
		return err->code;
	e->mounted = true;
	e->oci.rootfs = e->rootfs;
	e->oci.rootfs_image = e->rootfs_image[0] ? e->rootfs_image : NULL;
	return 0;
}

int engine_cells_open(struct engine *e, struct appl_err *err)
{
	/* Restored from a checkpoint only where sandboxes are made ahead. */
	bool ahead = e->cfg.parts & ENGINE_POOL;
	bool restore = ahead && e->policy && policy_runtime_restore(e->policy);

	if (e->pool)
		return 0;
	if (engine_rootfs_mount(e, err) < 0)
		return err->code;
	if (!(e->pool = pool_new(e->loop, e->rt, &e->oci, &e->cell_lim, ahead ? e->lim.pool : 0,
				 restore, err)))
		return err->code;
	pool_fill(e->pool);
	return 0;
}

void engine_pool_keep(struct engine *e, unsigned n)
{
	pool_resize(e->pool, n);
	pool_fill(e->pool);
}

const struct sandbox *engine_pool_ready(const struct engine *e)
{
	return pool_ready(e->pool);
}

const char *engine_pool_failed(const struct engine *e)
{
	if (pool_last_boot(e->pool) != POOL_BOOT_FAILED)
		return NULL;
	return pool_last_failure(e->pool) ? pool_last_failure(e->pool) : "it did not boot";
}

/* With image.preload, the start waits for the pool's first boot: a module
 * that does not import in the image (or a sandbox too small to import it)
 * refuses the start, rather than failing every warm boot after it. */
static int preload_prove(struct engine *e, struct appl_err *err)
{
	const char *names = e->oci.preload;
	int rc = 0;

	if (!names || !e->pool)
		return 0;
	log_line(LOG_INFO, NULL, "start: a warm sandbox imports image.preload (%s) first", names);
	while (pool_last_boot(e->pool) == POOL_BOOT_NONE && !e->stop && rc >= 0)
		rc = loop_run_once(e->loop, -1);
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "the event loop");
	if (e->stop)
		return appl_err_set(err, -EINTR, "stopped (%s) before a warm sandbox was ready",
				    e->stop_why);
	if (engine_pool_failed(e))
		return appl_err_set(err, -EINVAL,
				    "image.preload: the first warm sandbox failed: %s",
				    engine_pool_failed(e));
	return 0;
}

int engine_start(struct engine *e, struct appl_err *err)
{
	unsigned parts = e->cfg.parts;

	if ((parts & ENGINE_SANDBOX) && (engine_image_verify(e, err) < 0 ||
					 (e->policy && engine_image_needs(e->policy, err) < 0)))
		return err->code;
	/* The audit log before the runtime: as run has always opened them. */
	if ((parts & ENGINE_AUDIT) && audit_start(e, err) < 0)
		return err->code;
	if ((parts & ENGINE_SANDBOX) &&
	    (engine_runtime_open(e, err) < 0 || engine_rootfs_mount(e, err) < 0))
		return err->code;
	if ((parts & ENGINE_SERVERS) &&
	    (engine_servers_open(e, err) < 0 ||
	     (e->cfg.start_role && !engine_role_view(e, e->cfg.role, NULL, err))))
		return err->code;
	if ((parts & ENGINE_SANDBOX) && engine_cells_open(e, err) < 0)
		return err->code;
	if ((parts & ENGINE_SANDBOX) && (parts & ENGINE_POOL) && preload_prove(e, err) < 0)
		return err->code;
	/* The serial is recorded only once all of this has passed: a policy
	 * that cannot start must not lock out the one that can. */
	if ((e->cfg.on_started && e->cfg.on_started(e->cfg.data, err) < 0) ||
	    audit_started(e, err) < 0)
		return err->code;
	e->started = true;
	return 0;
}

bool engine_started(const struct engine *e)
{
	return e->started;
}

/* ---- runs ------------------------------------------------------------------------ */

/* The one place a run gets its cell and its bridge: a warm sandbox when
 * one is ready, else one made for it; the bridge takes the cell's calls
 * before any code runs. */
static int run_start(struct run *r, void *data, struct appl_err *err)
{
	struct engine *e = data;
	const struct run_client *rc = run_client(r);
	const struct engine_gen *g = run_owner(r);
	struct bridge_run *br = NULL;
	struct cell *cell = NULL;

	if (!e->pool)
		return appl_err_set(err, -EINVAL, "no sandbox runtime was started for runs");
	/* A session's interpreter, kept from its last run; else a sandbox of
	 * the pool's, kept afterwards when it is a new session's first run. */
	if (rc->session_data && !(cell = session_take(rc->session_data, err)) && err->code)
		return err->code;
	if (!cell && !(cell = pool_take(e->pool)) && !(cell = pool_cold(e->pool, err)))
		return err->code;
	if (rc->session_data)
		cell_keep(cell);
	/* The policy the run was admitted under: its approver, its limits,
	 * its servers. */
	if (g->ups && run_catalog(r)) {
		struct bridge_approvals ap = {.loop = e->loop,
					      .command = policy_approvals_command(g->policy),
					      .asker = run_asker(r),
					      .timeout_ms = g->lim.approval_timeout_s * 1000u,
					      .max = g->lim.max_approvals,
					      .client = rc->name,
					      .ledger = e->ledger};

		if (!(br = bridge_run_new(run_catalog(r), &g->blim, g->ups, cell, run_id(r),
					  err))) {
			cell_free(cell);
			return err->code;
		}
		bridge_run_audit(br, e->audit, rc->role);
		bridge_run_trace(br, e->tracer, run_trace(r));
		bridge_run_approvals(br, &ap);
		bridge_run_gate(br, e->gate);
	}
	return run_begin(r, cell, br, err);
}

/* Replacements boot once a run has ended and its answer is out, not while
 * that run's own sandbox still runs its code (other runs may). */
static void on_reaped(void *data, unsigned n)
{
	struct engine *e = data;

	if (n)
		pool_fill(e->pool);
}

/* A session's run ended: the session keeps its cell, or ends. */
static void on_settle(void *data, struct run *r)
{
	(void)data;
	session_settle(run_client(r)->session_data, r);
}

/* How a run's cell ended tells the pool whether its boot worked. */
static void on_cell_ended(void *data, enum cell_reason reason)
{
	pool_cell_ended(((struct engine *)data)->pool, reason);
}

/* A run was freed: an older policy no run holds any more goes, and with
 * it the servers only it had (a server a reload removed or changed stops
 * once the last run that could call it has ended). */
static void on_released(void *data, void *owner)
{
	struct engine *e = data;
	struct engine_gen *g = owner, **pp;

	if (--g->runs || g == e->gen)
		return;
	for (pp = &e->old; *pp && *pp != g; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = g->next;
	engine_gen_free(e, g);
}

/* Why a run must not start now, or NULL; *reason the metrics' word. */
const char *engine_run_refusal(struct engine *e, const struct run_client *client,
			       unsigned waiting_cap, unsigned total_cap, const char **reason,
			       char *why, size_t cap)
{
	*reason = "busy";
	if (e->policy && (int64_t)time(NULL) >= policy_expires(e->policy))
		return *reason = "expired", "the appliance's policy has expired: no new cells run";
	/* Fail closed: no cell runs that the log could not record. */
	if (e->audit && !audit_ok(e->audit) && audit_flush(e->audit, false) < 0) {
		snprintf(why, cap, "the run could not start: the audit log cannot be written (%s)",
			 audit_why(e->audit));
		log_line(LOG_ERR, NULL, "%s", why);
		return *reason = "audit", why;
	}
	if (waiting_cap && run_set_waiting(e->runs, client->name) >= waiting_cap) {
		log_line(LOG_WARN, NULL, "%s: refused a run: %u of its runs wait already",
			 client->name, waiting_cap);
		return "too many of this client's runs are waiting: try again later";
	}
	if (run_set_waiting(e->runs, NULL) >= total_cap)
		return "too many runs are waiting: try again when some have ended";
	return NULL;
}

/* An end asked for ({session, end: true}): answered at once, no run. */
static void session_end_answer(struct engine *e, const struct run_client *client,
			       const struct session_ask *ask)
{
	char text[512];
	json_t *obj;

	if (session_end_ask(e->sessions, ask, text, sizeof(text)) < 0) {
		client->answer(client->c, NULL, true, text, NULL);
		return;
	}
	obj = json_pack("{s:s,s:n,s:n,s:b,s:b,s:n,s:i,s:i,s:[],s:s,s:s}", "stdout", text, "error",
			"result", "truncated", 0, "stopped", 0, "reason", "calls", 0, "duration_ms",
			0, "files", "session", ask->arg, "session_ended", "end");
	if (obj)
		client->answer(client->c, obj, false, NULL, NULL);
	else
		client->answer(client->c, NULL, true, "out of memory", NULL);
	json_decref(obj);
}

/* The session sa asks for, and c made a session's run client; NULL when
 * there is none to have (answered: refused, or ended as asked). */
static struct session *session_for(struct engine *e, const struct run_client *client,
				   const struct engine_session_args *sa, struct run_client *c)
{
	const struct policy_role *role =
		e->policy ? policy_role_find(e->policy, client->role) : NULL;
	struct session_ask ask = {.arg = sa->session,
				  .end = sa->end,
				  .client = client->name,
				  .role = client->role,
				  .bind = sa->bind,
				  .lim = role ? &role->sessions : NULL};
	struct session *s;
	char why[512];

	if (sa->end) {
		session_end_answer(e, client, &ask);
		return NULL;
	}
	if (!(s = session_open(e->sessions, &ask, why, sizeof(why)))) {
		metrics_cell("refused", "session", false, 0);
		run_set_refuse(e->runs, client, why);
		return NULL;
	}
	*c = *client;
	c->session = session_handle(s);
	c->session_digest = session_digest(s);
	c->session_data = s;
	return s;
}

struct run *engine_run_session(struct engine *e, const char *code, size_t len,
			       const struct run_client *client, unsigned waiting_cap,
			       unsigned total_cap, const struct engine_session_args *sa)
{
	struct bridge_catalog *cat = NULL;
	struct appl_err err = {0};
	const char *no, *reason;
	struct run_client sc;
	struct run *r;
	char why[640];

	e->served++;
	if (!engine_role_inline(e, client->role)) {
		reason = "not_allowed";
		no = "this client's role runs no code of its own (\"inline\": false): call its "
		     "code tools";
	} else {
		no = engine_run_refusal(e, client, waiting_cap, total_cap, &reason, why,
					sizeof(why));
	}
	if (no) {
		metrics_cell("refused", reason, false, 0);
		run_set_refuse(e->runs, client, no);
		return NULL;
	}
	if (e->ups && !engine_role_view(e, client->role, &cat, &err)) {
		log_line(LOG_ERR, NULL, "the tool list of a role could not be built: %s", err.msg);
		metrics_cell("refused", "host_fault", false, 0);
		run_set_refuse(e->runs, client, "the run could not start: host fault");
		return NULL;
	}
	if (sa && sa->session) {
		if (!session_for(e, client, sa, &sc))
			return NULL;
		client = &sc;
	}
	if (e->ups)
		upstream_set_wake(e->ups);
	/* Counted before run_new, which may start it (run_start reads it). */
	e->gen->runs++;
	if (!(r = run_new(e->runs, code, len, client, cat, e->gen, &err))) {
		e->gen->runs--;
		if (client->session_data)
			session_unused(client->session_data);
		client->answer(client->c, NULL, true, "out of memory", NULL);
	}
	return r;
}

struct run *engine_run_new(struct engine *e, const char *code, size_t len,
			   const struct run_client *client, unsigned waiting_cap,
			   unsigned total_cap)
{
	return engine_run_session(e, code, len, client, waiting_cap, total_cap, NULL);
}

void engine_sessions_closed(struct engine *e, uint64_t bind)
{
	session_end_bind(e->sessions, bind);
}

void engine_sessions_end_client(struct engine *e, const char *client, const char *why)
{
	session_end_client(e->sessions, client, why);
}

/* The answer of a run waited for in process. */
struct waited {
	bool answered;
	json_t *result;
	char fail[APPL_ERR_MSG_MAX];
};

/* The result object, which lists the files: a command in process prints
 * it and never their content. */
static void waited_answer(void *c, const json_t *result, bool is_error, const char *text,
			  const json_t *files)
{
	struct waited *w = c;
	(void)is_error;
	(void)files;

	w->answered = true;
	if (result)
		w->result = json_deep_copy(result);
	else
		snprintf(w->fail, sizeof(w->fail), "%s", text);
}

int engine_run_wait(struct engine *e, const char *code, size_t len, const char *who,
		    json_t **result, struct appl_err *err)
{
	struct waited w = {0};
	struct run_client c = {.name = who, .answer = waited_answer, .c = &w};
	struct run *r = engine_run_new(e, code, len, &c, 0, APPL_RUNS_WAITING_MAX);
	char why[96];
	bool stopped = false;
	int rc = 0;

	*result = NULL;
	while (!w.answered && rc >= 0) {
		if (r && e->stop && !stopped) {
			snprintf(why, sizeof(why), "the run was stopped: %s got %s", who,
				 e->stop_why);
			run_interrupt(r, why);
			stopped = true;
		}
		rc = loop_run_once(e->loop, -1);
	}
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "the event loop");
	if (!w.result)
		return appl_err_set(err, -EIO, "%s", w.fail[0] ? w.fail : "out of memory");
	*result = w.result;
	return 0;
}

unsigned engine_runs(const struct engine *e)
{
	return run_set_count(e->runs);
}

void engine_runs_stop(struct engine *e)
{
	run_set_stop(e->runs);
}

const char *engine_role_view(struct engine *e, const char *role, struct bridge_catalog **cat,
			     struct appl_err *err)
{
	return engine_roles_view(e->roles, role, cat, err);
}

bool engine_role_inline(const struct engine *e, const char *role)
{
	const struct policy_role *r = e->policy ? policy_role_find(e->policy, role) : NULL;

	return !r || r->run_python;
}

/* ---- lifetime -------------------------------------------------------------------- */

/* A policy's part of the engine: its limits and its roles (the servers
 * come when they start). NULL on -ENOMEM. */
struct engine_gen *engine_gen_new(struct engine *e, const struct policy *p, void *handle)
{
	struct engine_gen *g = calloc(1, sizeof(*g));
	struct appl_err err = {0};

	if (!g)
		return NULL;
	g->policy = p;
	g->handle = handle;
	if (p)
		policy_limits_get(p, &g->lim);
	else
		policy_limits_default(&g->lim);
	bridge_limits_from_policy(&g->lim, &g->blim);
	if (p) {
		struct engine_roles_config ro = {.policy = p,
						 .lim = &g->lim,
						 .changed = e->cfg.tools_changed,
						 .data = e->cfg.data};

		if (!(g->roles = engine_roles_new(&ro, &err))) {
			free(g);
			return NULL;
		}
	}
	return g;
}

/* Safe on NULL. The servers only g held stop (never from a callback). */
void engine_gen_free(struct engine *e, struct engine_gen *g)
{
	if (!g)
		return;
	engine_roles_free(g->roles);
	upstream_set_free(g->ups);
	if (g->handle && e->cfg.release)
		e->cfg.release(e->cfg.data, g->handle);
	free(g);
}

/* g is the current policy: what the engine's readers see (the sandbox
 * limits split again; the rootfs kept). */
void engine_gen_use(struct engine *e, struct engine_gen *g)
{
	e->gen = g;
	e->policy = g->policy;
	e->lim = g->lim;
	e->blim = g->blim;
	e->roles = g->roles;
	e->ups = g->ups;
	if (g->policy) {
		engine_limits_split(&e->lim, &e->oci, &e->cell_lim);
		e->oci.preload = policy_image_preload(g->policy);
	}
}

/* The limits, the run set and the roles: what needs no loop round. */
/* With TRACES and a policy that names a collector: the tracer, before
 * anything that makes spans. */
static int tracer_make(struct engine *e, struct appl_err *err)
{
	const struct policy *p = e->cfg.policy;
	struct trace_config tc = {.endpoint = p ? policy_telemetry_endpoint(p) : NULL,
				  .service_name = p ? policy_telemetry_service(p) : NULL};

	if (!(e->cfg.parts & ENGINE_TRACES) || !tc.endpoint)
		return 0;
	if (tracer_new(e->loop, &tc, &e->tracer, err) < 0)
		return appl_err_prefix(err, "telemetry");
	log_line(LOG_INFO, NULL, "traces: spans go to %s/v1/traces", tc.endpoint);
	return 0;
}

static int parts_make(struct engine *e, struct appl_err *err)
{
	struct run_set_config rc = {.cell = &e->cell_lim,
				    .start = run_start,
				    .reaped = on_reaped,
				    .released = on_released,
				    .cell_ended = on_cell_ended,
				    .settle = on_settle,
				    .data = e};

	if (tracer_make(e, err) < 0)
		return err->code;
	if (!(e->gen = engine_gen_new(e, e->cfg.policy, NULL)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (!e->cfg.policy) {
		e->oci = e->cfg.oci;
		e->cell_lim = e->cfg.cell;
	}
	engine_gen_use(e, e->gen);
	rc.loop = e->loop;
	rc.tracer = e->tracer;
	rc.cells = e->lim.cells;
	rc.per_client = e->cfg.per_client;
	rc.approval_timeout_ms = e->lim.approval_timeout_s * 1000u;
	if (!(e->runs = run_set_new(&rc, err)))
		return err->code;
	if (!(e->sessions = session_set_new(e->loop)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

struct engine *engine_open(const struct engine_config *cfg, struct appl_err *err)
{
	struct engine *e = calloc(1, sizeof(*e));

	if (!e) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	e->cfg = *cfg;
	if (!(e->loop = loop_new(err)) || signals_watch(e, err) < 0 || parts_make(e, err) < 0) {
		engine_close(e);
		return NULL;
	}
	return e;
}

struct tracer *engine_tracer(const struct engine *e)
{
	return e->tracer;
}

struct loop *engine_loop(const struct engine *e)
{
	return e->loop;
}

const struct policy *engine_policy(const struct engine *e)
{
	return e->policy;
}

const struct policy_limits *engine_limits(const struct engine *e)
{
	return &e->lim;
}

struct audit *engine_audit(const struct engine *e)
{
	return e->audit;
}

const char *engine_rootfs(const struct engine *e, const char **image)
{
	if (image)
		*image = e->rootfs_image[0] ? e->rootfs_image : NULL;
	return e->rootfs[0] ? e->rootfs : NULL;
}

struct sandbox_rt *engine_runtime(const struct engine *e)
{
	return e->rt;
}

struct upstream_set *engine_servers(const struct engine *e)
{
	return e->ups;
}

void engine_close(struct engine *e)
{
	if (!e)
		return;
	loop_timer_free(e->drain_timer);
	run_set_stop(e->runs);
	run_set_free(e->runs); /* each run's last line */
	e->runs = NULL;
	/* The spans still held go, for at most ENGINE_TRACES_FLUSH_MS. */
	tracer_flush(e->tracer, ENGINE_TRACES_FLUSH_MS);
	if (e->tracer)
		log_line(LOG_INFO, NULL, "traces: %llu spans sent, %llu lost",
			 (unsigned long long)tracer_exported(e->tracer),
			 (unsigned long long)tracer_dropped(e->tracer));
	session_set_free(e->sessions); /* their sandboxes, before the runtime goes */
	e->sessions = NULL;
	pool_free(e->pool);
	while (e->old) { /* none: each went with its last run */
		struct engine_gen *g = e->old;

		e->old = g->next;
		engine_gen_free(e, g);
	}
	engine_gen_free(e, e->gen);
	bridge_gate_free(e->gate);
	audit_stop(e);
	sandbox_rt_close(e->rt); /* before the loop: it finishes teardowns from it */
	engine_confine_release(&e->confine);
	tracer_free(e->tracer);
	loop_free(e->loop);
	engine_reap_children();
	free(e);
}
