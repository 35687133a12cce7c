/* gateway.c: run_python over MCP stdio (see gateway.h). */
#define _GNU_SOURCE
#include "gateway/gateway.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bridge/bridge.h"
#include "cell/cell.h"
#include "image/image.h"
#include "log/log.h"
#include "loop/loop.h"
#include "mcp/server.h"
#include "mcp/upstream.h"
#include "pool/pool.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"
#include "stubs/stubs.h"

#define GATEWAY_DRAIN_MS     2000 /* at shutdown, for answers still queued */
#define GATEWAY_RUN_ID_BYTES 6	  /* a run id: 12 hex digits, random */

/* The upstream's answer codes reach the bridge as they are. */
_Static_assert((int)BRIDGE_UP_TOO_LARGE == (int)UPSTREAM_TOO_LARGE &&
		       (int)BRIDGE_UP_CANCELLED == (int)UPSTREAM_CANCELLED &&
		       (int)BRIDGE_UP_ERROR == (int)UPSTREAM_ERROR &&
		       (int)BRIDGE_UP_TIMEOUT == (int)UPSTREAM_TIMEOUT,
	       "bridge and upstream agree on answer codes");

struct gw_run {
	struct gw_run *next, *prev;
	struct gateway *gw;
	struct mcp_run *run; /* NULL once the client cancelled it */
	struct cell *cell;   /* NULL while waiting for a slot */
	struct bridge_run *br;
	uint64_t arrival;
	char *code;
	size_t code_len;
	bool done;
	const char *fail;		       /* why it never ran (static), or NULL */
	char id[2 * GATEWAY_RUN_ID_BYTES + 1]; /* in every log line of the run */
};

struct gateway {
	const struct policy *policy;
	struct policy_limits lim;
	struct sandbox_oci_params oci; /* every sandbox's, rootfs included */
	struct cell_limits cell_lim;   /* every run's */
	struct loop *loop;
	struct mcp_server *srv;
	struct sandbox_rt *rt;
	struct pool *pool; /* warm sandboxes; size limits.pool */
	char rootfs[PATH_MAX];
	const char *role;      /* the stdio client's; NULL: none */
	struct upstream **ups; /* one per stdio server, policy order */
	size_t nups;
	struct bridge_catalog *cat; /* current; each run holds its own */
	struct bridge_limits blim;
	char *description;
	struct gw_run *runs; /* waiting and running, oldest last */
	unsigned running;
	unsigned waiting;
	struct loop_task reap; /* runs that ended: answered and freed after the round */
	bool stop;
};

void gateway_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
			  struct cell_limits *cell)
{
	const char *rootfs = oci->rootfs;

	sandbox_oci_params_init(oci);
	oci->rootfs = rootfs;
	oci->memory_mb = l->memory_mb;
	oci->pids = l->pids;
	oci->nofile = l->nofile;
	oci->tmpfs_mb = l->tmpfs_mb;
	cell_limits_init(cell);
	cell->deadline_ms = l->deadline_s * 1000ull;
	cell->max_output = l->max_output_bytes;
	cell->stop_output = l->stop_output_bytes;
	cell->max_lines = l->max_runner_lines;
}

/* ---- the catalog: what the client's role may call -------------------------- */

static void catalog_log(const struct bridge_catalog *c)
{
	struct bridge_tool_info info;

	for (size_t i = 0; bridge_catalog_info(c, i, &info) == 0; i++)
		if (info.why_not)
			log_line(LOG_INFO, NULL, "tool %s.%s is not offered: %s", info.server,
				 info.name, info.why_not);
}

/* Build the catalog from every upstream's last tool list, and the
 * run_python description from it; tell the client when the description
 * changed. Runs already started keep the catalog they began with. */
static int catalog_rebuild(struct gateway *gw, struct appl_err *err)
{
	struct stubs_limits sl = {.deadline_s = gw->lim.deadline_s,
				  .max_calls = gw->lim.max_calls,
				  .max_output_bytes = gw->lim.max_output_bytes};
	struct bridge_tool_in *in;
	struct bridge_catalog *cat = NULL;
	size_t n = 0, k = 0;
	char *desc;
	int rc;

	for (size_t i = 0; i < gw->nups; i++)
		n += upstream_tool_count(gw->ups[i]);
	if (!(in = calloc(n ? n : 1, sizeof(*in))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < gw->nups; i++)
		for (size_t j = 0; j < upstream_tool_count(gw->ups[i]); j++) {
			const struct upstream_tool *t = upstream_tool_get(gw->ups[i], j);

			in[k++] = (struct bridge_tool_in){upstream_name(gw->ups[i]), t->name,
							  t->description, t->input_schema,
							  t->read_only_hint};
		}
	rc = bridge_catalog_new(gw->policy, gw->role, in, k, &cat, err);
	free(in);
	if (rc < 0)
		return rc;
	if (!(desc = stubs_description(bridge_catalog_stubs(cat), &sl, err))) {
		bridge_catalog_unref(cat);
		return err->code;
	}
	catalog_log(cat);
	bridge_catalog_unref(gw->cat);
	gw->cat = cat;
	if (gw->description && strcmp(gw->description, desc) != 0 && gw->srv)
		mcp_server_tools_changed(gw->srv);
	free(gw->description);
	gw->description = desc;
	return 0;
}

static void catalog_refresh(struct gateway *gw, const char *why)
{
	struct appl_err err = {0};

	if (catalog_rebuild(gw, &err) < 0)
		log_line(LOG_ERR, NULL, "the tool list was not rebuilt after %s: %s", why, err.msg);
}

static void on_upstream_ready(struct upstream *u, void *data)
{
	struct gateway *gw = data;
	(void)u;

	/* At startup the catalog is built once, after every server had its
	 * chance; later, a server that (re)started changes it. */
	if (gw->srv)
		catalog_refresh(gw, "a server (re)started");
}

static void on_upstream_tools_changed(struct upstream *u, void *data)
{
	struct gateway *gw = data;
	(void)u;

	if (gw->srv)
		catalog_refresh(gw, "a server's tool list changed");
}

static void on_upstream_down(struct upstream *u, const char *why, void *data)
{
	(void)data;
	log_line(LOG_WARN, NULL, "upstream %s stopped: %s", upstream_name(u), why);
}

/* Start every stdio server of the policy and give each its handshake time:
 * they start together, so the wait is the slowest one's. A server that does
 * not come up is logged and offers no tools until it does (it is started
 * again when a run arrives). */
static int upstreams_open(struct gateway *gw, struct appl_err *err)
{
	struct upstream_hooks hooks = {.on_ready = on_upstream_ready,
				       .on_tools_changed = on_upstream_tools_changed,
				       .on_down = on_upstream_down,
				       .data = gw};
	/* An answer past the result cap is dropped as it is read (upstream.h). */
	struct upstream_opts opts = {.result_max = gw->lim.max_result_bytes};
	size_t n = policy_server_count(gw->policy);

	if (!(gw->ups = calloc(n ? n : 1, sizeof(*gw->ups))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		const struct policy_server *srv = policy_server_get(gw->policy, i);

		if (srv->kind != POLICY_SERVER_STDIO)
			continue;
		if (!(gw->ups[gw->nups] = upstream_new(gw->loop, srv, &hooks, &opts, err)))
			return err->code;
		gw->nups++;
	}
	for (size_t i = 0; i < gw->nups; i++) {
		struct appl_err werr = {0};

		if (upstream_wait_ready(gw->ups[i], APPL_UPSTREAM_INIT_TIMEOUT_MS, &werr) < 0)
			log_line(LOG_WARN, NULL, "upstream %s is not available: %s%s%s",
				 upstream_name(gw->ups[i]), werr.msg,
				 *upstream_last_error(gw->ups[i]) ? ": " : "",
				 upstream_last_error(gw->ups[i]));
	}
	return catalog_rebuild(gw, err);
}

/* A server that is down offers nothing: try it again when work arrives. */
static void upstreams_wake(struct gateway *gw)
{
	for (size_t i = 0; i < gw->nups; i++)
		if (upstream_state(gw->ups[i]) == UPSTREAM_DOWN) {
			struct appl_err err = {0};

			upstream_start(gw->ups[i], &err);
		}
}

static void upstreams_close(struct gateway *gw)
{
	for (size_t i = 0; i < gw->nups; i++)
		upstream_free(gw->ups[i]);
	free(gw->ups);
	gw->ups = NULL;
	gw->nups = 0;
}

static void run_unlink(struct gateway *gw, struct gw_run *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		gw->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
}

static void run_free(struct gw_run *r)
{
	/* In-flight calls are cancelled upstream before the cell goes. */
	bridge_run_free(r->br);
	if (!r->cell)
		r->gw->waiting--; /* it never left the queue */
	if (r->cell) {
		cell_free(r->cell);
		r->gw->running--;
	}
	free(r->code);
	free(r);
}

/* A run is an error for the model when the code raised or it was stopped. */
static bool result_is_error(const json_t *res)
{
	return !json_is_null(json_object_get(res, "error")) ||
	       json_is_true(json_object_get(res, "stopped"));
}

/* r ended (or never started): answered and freed at the end of the round,
 * outside every handler of its cell. */
static void run_ended(struct gw_run *r)
{
	r->done = true;
	loop_defer(r->gw->loop, &r->gw->reap);
}

static void on_cell_done(struct cell *c, void *data)
{
	(void)c;
	run_ended(data);
}

/* ---- tool calls: the bridge's ops --------------------------------------- */

static struct upstream *upstream_of(struct gateway *gw, const char *server)
{
	for (size_t i = 0; i < gw->nups; i++)
		if (strcmp(upstream_name(gw->ups[i]), server) == 0)
			return gw->ups[i];
	return NULL;
}

static int op_send(void *data, const char *server, const char *tool, const json_t *args,
		   unsigned timeout_ms, bridge_result_fn cb, void *ctx, uint64_t *call_id)
{
	struct gw_run *r = data;
	struct upstream *u = upstream_of(r->gw, server);
	struct appl_err err = {0};
	int rc;

	if (!u)
		return -EAGAIN;
	rc = upstream_call(u, tool, args, timeout_ms, cb, ctx, call_id, &err);
	if (rc < 0 && rc != -EAGAIN)
		log_line(LOG_WARN, r->id, "calling %s.%s: %s", server, tool, err.msg);
	else if (rc == 0)
		log_line(LOG_DEBUG, r->id, "call %s.%s sent", server, tool);
	return rc;
}

static void op_cancel(void *data, const char *server, uint64_t call_id)
{
	struct gw_run *r = data;
	struct upstream *u = upstream_of(r->gw, server);

	if (u)
		upstream_call_cancel(u, call_id);
}

static void op_answer(void *data, json_int_t id, const json_t *value)
{
	struct gw_run *r = data;

	cell_call_answer(r->cell, id, value);
}

static void op_refuse(void *data, json_int_t id, const char *msg)
{
	struct gw_run *r = data;
	char text[APPL_TOOL_ERROR_MAX * 4 + 1];

	/* The text may quote a server: escaped for the log. */
	if (log_enabled(LOG_INFO)) {
		log_escape(msg, strlen(msg), text, sizeof(text), NULL);
		log_line(LOG_INFO, r->id, "call %lld: %s", (long long)id, text);
	}
	cell_call_refuse(r->cell, id, msg);
}

static const struct bridge_ops gateway_ops = {op_send, op_cancel, op_answer, op_refuse};

static void on_cell_call(struct cell *c, json_int_t id, const char *tool, json_t *args, void *data)
{
	struct gw_run *r = data;
	(void)c;

	bridge_run_call(r->br, id, tool, args);
}

static int cell_begin(struct gateway *gw, struct gw_run *r, struct appl_err *err)
{
	struct cell_hooks hooks = {.on_call = on_cell_call, .on_done = on_cell_done, .data = r};
	struct sandbox *sb;

	r->br = bridge_run_new(gw->cat, &gw->blim, &gateway_ops, r, err);
	if (!r->br)
		return err->code;
	/* A warm sandbox when one is ready, else one booted for this run. */
	r->cell = pool_take(gw->pool);
	if (!r->cell) {
		if (!(sb = sandbox_start(gw->rt, &gw->oci, err)) ||
		    !(r->cell = cell_boot(gw->loop, sb, &gw->cell_lim, NULL, err)))
			return err->code;
	}
	if (cell_run(r->cell, r->code, r->code_len, bridge_catalog_runner_tools(gw->cat),
		     &gw->cell_lim, &hooks, r->arrival, err) < 0) {
		cell_free(r->cell);
		r->cell = NULL;
		return err->code;
	}
	gw->running++;
	gw->waiting--;
	log_line(LOG_INFO, r->id, "sandbox %s", cell_sandbox_id(r->cell));
	return 0;
}

/* Start waiting runs, oldest first, while there are free slots. */
static void queue_advance(struct gateway *gw)
{
	struct gw_run *r = gw->runs;

	while (r && r->next)
		r = r->next;
	for (; r && gw->running < gw->lim.cells; r = r->prev) {
		struct appl_err err = {0};

		if (r->cell || r->done)
			continue;
		if (loop_now_ms() - r->arrival >= gw->lim.deadline_s * 1000ull) {
			r->fail = "the run waited for a free slot until its deadline passed";
			run_ended(r);
			continue;
		}
		if (cell_begin(gw, r, &err) < 0) {
			log_line(LOG_ERR, r->id, "starting a sandbox failed: %s", err.msg);
			r->fail = "the run could not start: the sandbox failed to boot";
			run_ended(r);
		}
	}
}

static void run_end_log(const struct gw_run *r, const json_t *res)
{
	const char *reason = json_string_value(json_object_get(res, "reason"));
	const char *why = json_string_value(json_object_get(res, "error"));
	char text[512];

	/* Why a run was stopped is the host's own text (a violation quotes at
	 * most 32 printable bytes of the runner's), escaped all the same; the
	 * code's own traceback is not logged. */
	text[0] = '\0';
	if (reason && why)
		log_escape(why, strlen(why), text, sizeof(text), NULL);
	log_line(LOG_INFO, r->id, "ended: %s%s%s, %lld calls, %llu ms%s", reason ? reason : "done",
		 text[0] ? ": " : "", text,
		 (long long)json_integer_value(json_object_get(res, "calls")),
		 (unsigned long long)(loop_now_ms() - r->arrival), r->run ? "" : " (cancelled)");
}

static void run_answer(struct gateway *gw, struct gw_run *r)
{
	const json_t *res = r->cell ? cell_result(r->cell) : NULL;

	if (res)
		run_end_log(r, res);
	else
		log_line(LOG_INFO, r->id, "ended without a run: %s",
			 r->fail ? r->fail : "it could not start");
	if (!r->run)
		return;
	if (res)
		mcp_run_finish(gw->srv, r->run, res, result_is_error(res));
	else if (r->cell)
		mcp_run_fail(gw->srv, r->run, "the run ended without a result");
	else
		mcp_run_fail(gw->srv, r->run, r->fail ? r->fail : "the run could not start");
	r->run = NULL;
}

/* Answer and free every run that ended this round (the gateway's reap
 * task, at the end of the round). */
static void runs_reap(void *data)
{
	struct gateway *gw = data;
	struct gw_run *r = gw->runs, *next;
	bool ended = false;

	for (; r; r = next) {
		next = r->next;
		if (!r->done)
			continue;
		run_answer(gw, r);
		run_unlink(gw, r);
		run_free(r);
		ended = true;
	}
	queue_advance(gw);
	/* Replacements boot once a run has ended and its answer is out, not
	 * while a taken sandbox runs its code. */
	if (ended)
		pool_fill(gw->pool);
}

static void run_id_new(char out[2 * GATEWAY_RUN_ID_BYTES + 1])
{
	unsigned char b[GATEWAY_RUN_ID_BYTES];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 2 * GATEWAY_RUN_ID_BYTES + 1, b, sizeof(b));
}

static void on_run(struct mcp_server *s, struct mcp_run *run, const char *code, size_t len,
		   void *data)
{
	struct gateway *gw = data;
	struct gw_run *r;

	if ((int64_t)time(NULL) >= policy_expires(gw->policy)) {
		mcp_run_fail(s, run, "the appliance's policy has expired: no new cells run");
		return;
	}
	if (gw->waiting >= APPL_RUNS_WAITING_MAX) {
		mcp_run_fail(s, run, "too many runs are waiting: try again when some have ended");
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->code = malloc(len + 1))) {
		free(r);
		mcp_run_fail(s, run, "out of memory");
		return;
	}
	upstreams_wake(gw);
	run_id_new(r->id);
	log_line(LOG_INFO, r->id, "run_python: %zu bytes of code", len);
	memcpy(r->code, code, len);
	r->code[len] = '\0';
	r->code_len = len;
	r->gw = gw;
	r->run = run;
	r->arrival = loop_now_ms();
	mcp_run_set_data(run, r);
	r->next = gw->runs;
	if (gw->runs)
		gw->runs->prev = r;
	gw->runs = r;
	gw->waiting++;
	queue_advance(gw);
}

static void on_cancel(struct mcp_server *s, struct mcp_run *run, void *data)
{
	struct gw_run *r = mcp_run_data(run);
	(void)s;
	(void)data;

	r->run = NULL; /* no answer goes out for a cancelled request */
	if (r->cell)
		cell_cancel(r->cell);
	run_ended(r);
}

static void on_closed(struct mcp_server *s, const char *why, void *data)
{
	struct gateway *gw = data;
	(void)s;
	(void)why;

	gw->stop = true;
}

static const char *description(void *data)
{
	return ((struct gateway *)data)->description;
}

static void on_stop_signal(int signo, void *data)
{
	struct gateway *gw = data;

	log_line(LOG_INFO, NULL, "signal %d: stopping", signo);
	gw->stop = true;
}

/* Orphaned sandbox processes are ours to reap (we are a subreaper): runsc
 * delete waits for them to vanish. */
static void on_sigchld(int signo, void *data)
{
	(void)signo;
	(void)data;
	proc_reap_orphans();
}

/* The stop signals were blocked before anything started (cmd/appliance):
 * one that came while upstreams and the pool were starting is pending,
 * and the signalfd delivers it now. */
static int signals_watch(struct gateway *gw, struct appl_err *err)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP};

	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (loop_signal(gw->loop, stops[i], on_stop_signal, gw, err) < 0)
			return err->code;
	return loop_signal(gw->loop, SIGCHLD, on_sigchld, gw, err);
}

static void serve(struct gateway *gw)
{
	while (!gw->stop)
		if (loop_run_once(gw->loop, -1) < 0)
			break;
	/* Stop every cell; the answers would have nowhere to go. Kill them all
	 * first, so the sandboxes go down together, then clean up. */
	for (struct gw_run *r = gw->runs; r; r = r->next)
		if (r->cell)
			cell_cancel(r->cell);
	while (gw->runs) {
		struct gw_run *r = gw->runs;
		r->run = NULL;
		run_unlink(gw, r);
		run_free(r);
	}
	pool_free(gw->pool);
	gw->pool = NULL;
}

static int gateway_open(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct sandbox_rt_config rc = {.runsc = policy_runtime_runsc(cfg->policy),
				       .state_dir = cfg->run_dir,
				       .platform = policy_runtime_platform(cfg->policy),
				       .rootless = policy_runtime_rootless(cfg->policy)};
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .on_closed = on_closed,
					 .description = description,
					 .data = gw};
	char cache[PATH_MAX];
	const char *dir = cfg->cache;

	gw->policy = cfg->policy;
	gw->role = policy_client_default_role(cfg->policy);
	policy_limits_get(cfg->policy, &gw->lim);
	gateway_limits_split(&gw->lim, &gw->oci, &gw->cell_lim);
	bridge_limits_from_policy(&gw->lim, &gw->blim);
	gw->oci.rootfs = gw->rootfs;
	if (!dir && image_cache_default(cache, sizeof(cache), err) < 0)
		return err->code;
	if (image_layout_verify(policy_image_layout(cfg->policy), policy_image_digest(cfg->policy),
				dir ? dir : cache, gw->rootfs, sizeof(gw->rootfs), err) < 0)
		return err->code;
	if (!(gw->loop = loop_new(err)) || !(gw->rt = sandbox_rt_open(&rc, err)))
		return err->code;
	if (upstreams_open(gw, err) < 0)
		return err->code;
	if (!(gw->pool = pool_new(gw->loop, gw->rt, &gw->oci, &gw->cell_lim, gw->lim.pool, err)))
		return err->code;
	pool_fill(gw->pool);
	gw->srv = mcp_server_new(gw->loop, cfg->in_fd, cfg->out_fd, &hooks, err);
	return gw->srv ? 0 : err->code;
}

int gateway_run(const struct gateway_config *cfg, struct appl_err *err)
{
	struct gateway gw;
	int rc;

	memset(&gw, 0, sizeof(gw));
	loop_task_init(&gw.reap, runs_reap, &gw);
	/* Blocked from the start (cmd/appliance): a signal while servers and
	 * sandboxes start must not kill the appliance before it can clean up
	 * after them. */
	if ((rc = proc_signals_check(err)) < 0)
		return rc;
	rc = gateway_open(&gw, cfg, err);
	if (rc == 0)
		rc = signals_watch(&gw, err);
	if (rc == 0 && cfg->on_started)
		rc = cfg->on_started(cfg->data, err);
	if (rc == 0) {
		log_line(LOG_INFO, NULL, "serving");
		serve(&gw);
	}
	mcp_server_free(gw.srv, GATEWAY_DRAIN_MS);
	if (gw.loop)
		loop_task_cancel(gw.loop, &gw.reap);
	pool_free(gw.pool);
	upstreams_close(&gw);
	bridge_catalog_unref(gw.cat);
	sandbox_rt_close(gw.rt); /* before the loop: it finishes teardowns from it */
	loop_free(gw.loop);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	free(gw.description);
	return rc;
}

int gateway_stubs(const struct policy *policy, const char *role, FILE *out, struct appl_err *err)
{
	struct gateway gw;
	const struct stubs *st;
	struct bridge_tool_info info;
	int rc;

	memset(&gw, 0, sizeof(gw));
	gw.policy = policy;
	gw.role = role ? role : policy_client_default_role(policy);
	policy_limits_get(policy, &gw.lim);
	if (gw.role && !policy_role_find(policy, gw.role)) {
		rc = appl_err_set(err, -EINVAL, "the policy has no role \"%s\"", gw.role);
		goto out;
	}
	if (!(gw.loop = loop_new(err))) {
		rc = err->code;
		goto out;
	}
	if ((rc = upstreams_open(&gw, err)) < 0)
		goto out;
	st = bridge_catalog_stubs(gw.cat);
	fprintf(out, "# role: %s\n# run_python's description:\n\n%s\n",
		gw.role ? gw.role : "(none)", gw.description);
	fprintf(out, "\n# %zu tool stubs:\n", stubs_count(st));
	for (size_t i = 0; i < stubs_count(st); i++)
		fprintf(out, "\n# %s\n%s", stubs_mcp_name(st, i), stubs_text(st, i));
	for (size_t i = 0; bridge_catalog_info(gw.cat, i, &info) == 0; i++)
		if (info.why_not)
			fprintf(out, "\n# not offered: %s.%s: %s", info.server, info.name,
				info.why_not);
	fputs("\n", out);
	rc = fflush(out) == 0 ? 0 : appl_err_errno(err, -EIO, errno, "writing the stubs");
out:
	upstreams_close(&gw);
	bridge_catalog_unref(gw.cat);
	free(gw.description);
	loop_free(gw.loop);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}
