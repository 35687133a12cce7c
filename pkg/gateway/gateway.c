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

#include "audit/audit.h"
#include "base/version.h"
#include "bridge/bridge.h"
#include "cell/cell.h"
#include "gateway/admit.h"
#include "image/image.h"
#include "log/log.h"
#include "loop/loop.h"
#include "mcp/session.h"
#include "mcp/http.h"
#include "mcp/stdio.h"
#include "upstream/set.h"
#include "pool/pool.h"
#include "base/fs.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"
#include "stubs/stubs.h"

#define GATEWAY_DRAIN_MS     2000 /* at shutdown, for answers still queued */
#define GATEWAY_RUN_ID_BYTES 6	  /* a run id: 12 hex digits, random */

struct gw_run {
	struct gw_run *next, *prev;
	struct gateway *gw;
	struct mcp_run *run;	       /* NULL once the client cancelled it */
	struct gw_role *role;	       /* what its client may call */
	struct cell *cell;	       /* NULL while waiting for a slot */
	struct gateway_ticket *ticket; /* its place in line, then its slot */
	struct bridge_run *br;
	struct loop_timer *admit; /* while waiting: fires at the deadline */
	uint64_t arrival;
	char *code;
	size_t code_len;
	const char *client; /* the principal's name; borrowed from the session */
	bool done;
	const char *fail;		       /* why it never ran (static), or NULL */
	char id[2 * GATEWAY_RUN_ID_BYTES + 1]; /* in every log line of the run */
};

/* What one role sees: its catalog (each run holds its own reference) and
 * run_python's description built from it. */
struct gw_role {
	struct gw_role *next;
	const char *name; /* the policy's; NULL: a role that may call nothing */
	struct bridge_catalog *cat;
	char *description;
};

struct gateway {
	const struct policy *policy;
	struct gateway_confine confine;
	struct policy_limits lim;
	struct sandbox_oci_params oci; /* every sandbox's, rootfs included */
	struct cell_limits cell_lim;   /* every run's */
	struct loop *loop;
	struct mcp_server *srv;
	struct mcp_stdio *stdio;
	struct mcp_principal stdio_client;
	struct mcp_http *http;		  /* instead of stdio when the policy has `http` */
	struct mcp_principal *principals; /* one per token, in the policy's order */
	char *tls_cert, *tls_key;	  /* PEM, read at start */
	struct log_rate auth_rate;	  /* refused authentications audited */
	struct sandbox_rt *rt;
	struct pool *pool; /* warm sandboxes; size limits.pool */
	char rootfs[PATH_MAX];
	char rootfs_image[PATH_MAX]; /* "" when the rootfs is served as a directory */
	struct upstream_set *ups;
	struct upstream_secrets *secrets; /* borrowed; wiped once the servers are made */
	struct bridge_gate *gate;	  /* each server's slots, shared by every run */
	struct gw_role *roles;		  /* one per role a client has */
	struct bridge_limits blim;
	struct gw_run *runs;	     /* waiting and running, oldest last */
	struct gateway_queue *admit; /* who gets the next free cell slot */
	struct loop_task reap;	     /* runs that ended: answered and freed after the round */
	struct audit *audit;	     /* NULL: the policy has no audit log */
	unsigned long served;	     /* requests to run, for the stop line */
	const struct gateway_config *cfg;
	char stop_why[32];
	bool stop;
	bool started;	 /* the image, runtime, servers and pool (engine_start) */
	bool input_done; /* a script read from a file has ended */
};

void gateway_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
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
	cell->max_output = l->max_output_bytes;
	cell->stop_output = l->stop_output_bytes;
	cell->max_lines = l->max_runner_lines;
}

/* ---- the catalogs: what each role may call ---------------------------------- */

static void catalog_log(const struct gw_role *ro)
{
	struct bridge_tool_info info;

	for (size_t i = 0; bridge_catalog_info(ro->cat, i, &info) == 0; i++)
		if (info.why_not)
			log_line(LOG_INFO, NULL, "role %s: tool %s.%s is not offered: %s",
				 ro->name ? ro->name : "(none)", info.server, info.name,
				 info.why_not);
}

/* Build ro's catalog from every upstream's last tool list, and the
 * run_python description from it; tell its clients when the description
 * changed. Runs already started keep the catalog they began with. */
static int role_rebuild(struct gateway *gw, struct gw_role *ro, struct appl_err *err)
{
	struct stubs_limits sl = {.deadline_s = gw->lim.deadline_s,
				  .max_calls = gw->lim.max_calls,
				  .max_output_bytes = gw->lim.max_output_bytes};
	size_t nups = upstream_set_count(gw->ups);
	struct bridge_tool_in *in;
	struct bridge_catalog *cat = NULL;
	size_t n = 0, k = 0;
	char *desc;
	int rc;

	for (size_t i = 0; i < nups; i++)
		n += upstream_tool_count(upstream_set_get(gw->ups, i));
	if (!(in = calloc(n ? n : 1, sizeof(*in))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < nups; i++) {
		const struct upstream *u = upstream_set_get(gw->ups, i);

		for (size_t j = 0; j < upstream_tool_count(u); j++) {
			const struct upstream_tool *t = upstream_tool_get(u, j);

			in[k++] = (struct bridge_tool_in){upstream_name(u),  t->name,
							  t->description,    t->input_schema,
							  t->read_only_hint, t->output_schema,
							  t->task_required};
		}
	}
	rc = bridge_catalog_new(gw->policy, ro->name, in, k, &cat, err);
	free(in);
	if (rc < 0)
		return rc;
	if (!(desc = stubs_description(bridge_catalog_stubs(cat), &sl, err))) {
		bridge_catalog_unref(cat);
		return err->code;
	}
	bridge_catalog_unref(ro->cat);
	ro->cat = cat;
	catalog_log(ro);
	if (ro->description && strcmp(ro->description, desc) != 0 && gw->srv)
		mcp_server_tools_changed(gw->srv, ro->name);
	free(ro->description);
	ro->description = desc;
	return 0;
}

/* The entry of role name, built on first use. NULL with err. */
static struct gw_role *role_get(struct gateway *gw, const char *name, struct appl_err *err)
{
	struct gw_role *ro;

	for (ro = gw->roles; ro; ro = ro->next)
		if ((!name && !ro->name) || (name && ro->name && strcmp(name, ro->name) == 0))
			return ro;
	if (!(ro = calloc(1, sizeof(*ro)))) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	ro->name = name;
	if (role_rebuild(gw, ro, err) < 0) {
		free(ro);
		return NULL;
	}
	ro->next = gw->roles;
	gw->roles = ro;
	return ro;
}

static void roles_free(struct gateway *gw)
{
	while (gw->roles) {
		struct gw_role *ro = gw->roles;

		gw->roles = ro->next;
		bridge_catalog_unref(ro->cat);
		free(ro->description);
		free(ro);
	}
}

/* A server (re)started or changed its list: every role's view again. */
static void on_upstreams_changed(void *data, const char *why)
{
	struct gateway *gw = data;

	for (struct gw_role *ro = gw->roles; ro; ro = ro->next) {
		struct appl_err err = {0};

		if (role_rebuild(gw, ro, &err) < 0)
			log_line(LOG_ERR, NULL, "the tool list was not rebuilt after %s: %s", why,
				 err.msg);
	}
}

static int upstreams_open(struct gateway *gw, struct appl_err *err)
{
	/* An answer past the result cap is dropped as it is read (upstream.h). */
	struct upstream_opts opts = {.result_max = gw->lim.max_result_bytes,
				     .secrets = gw->secrets};

	gateway_confine_opts(&gw->confine, &opts);
	if (!(gw->gate = bridge_gate_new(gw->policy)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	gw->ups = upstream_set_open(gw->loop, gw->policy, &opts, on_upstreams_changed, gw, err);
	upstream_secrets_wipe(gw->secrets); /* each HTTP upstream holds its own filled copy */
	return gw->ups ? 0 : err->code;
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

/* r's place in line, or its slot, is free. */
static void run_release(struct gw_run *r)
{
	gateway_queue_leave(r->gw->admit, r->ticket);
	r->ticket = NULL;
}

static void run_free(struct gw_run *r)
{
	/* In-flight calls are cancelled upstream before the cell goes. */
	bridge_run_free(r->br);
	loop_timer_free(r->admit);
	cell_free(r->cell);
	run_release(r);
	free(r->code);
	free(r);
}

/* r ended (or never started): answered and freed at the end of the round,
 * outside every handler of its cell. A run that never got a cell leaves
 * the line now, so it is never handed a slot; a cell's slot frees with
 * the cell. */
static void run_ended(struct gw_run *r)
{
	r->done = true;
	if (!r->cell)
		run_release(r);
	loop_defer(r->gw->loop, &r->gw->reap);
}

static void on_cell_done(struct cell *c, void *data)
{
	(void)c;
	run_ended(data);
}

static void on_cell_progress(struct cell *c, void *data)
{
	struct gw_run *r = data;
	(void)c;

	if (r->run)
		mcp_run_poke(r->run);
}

/* The bridge asks the person at r's client through its session. */
static void *ask_client(void *a, const char *text, const unsigned char bind[32],
			bridge_answer_fn answer, void *token, char *why, size_t cap)
{
	struct gw_run *r = a;
	struct mcp_ask_spec sp = {.text = text,
				  .bind = bind,
				  .label = r->id,
				  .timeout_ms = r->gw->lim.approval_timeout_s * 1000u,
				  .fn = answer,
				  .token = token};

	if (!r->run) {
		snprintf(why, cap, "the client has gone");
		return NULL;
	}
	return mcp_run_ask(r->run, &sp, why, cap);
}

static void ask_withdraw(void *a, void *handle)
{
	(void)a;
	mcp_ask_cancel(handle);
}

static int cell_begin(struct gateway *gw, struct gw_run *r, struct appl_err *err)
{
	struct cell_hooks hooks = {
		.on_done = on_cell_done, .on_progress = on_cell_progress, .data = r};
	struct bridge_catalog *cat = r->role->cat;

	/* A warm sandbox when one is ready, else one made for this run. */
	r->cell = pool_take(gw->pool);
	if (!r->cell && !(r->cell = pool_cold(gw->pool, err)))
		return err->code;
	/* The bridge takes the cell's calls itself, before any code runs. */
	if ((r->br = bridge_run_new(cat, &gw->blim, gw->ups, r->cell, r->id, err))) {
		struct bridge_approvals ap = {.loop = gw->loop,
					      .command = policy_approvals_command(gw->policy),
					      .asker = {ask_client, ask_withdraw, r},
					      .timeout_ms = gw->lim.approval_timeout_s * 1000u,
					      .max = gw->lim.max_approvals,
					      .client = r->client};

		bridge_run_audit(r->br, gw->audit, r->role->name);
		bridge_run_approvals(r->br, &ap);
		bridge_run_gate(r->br, gw->gate);
	}
	if (!r->br || cell_run(r->cell, r->code, r->code_len, bridge_catalog_runner_tools(cat),
			       &gw->cell_lim, &hooks, r->arrival, err) < 0) {
		bridge_run_free(r->br);
		r->br = NULL;
		cell_free(r->cell);
		r->cell = NULL;
		return err->code;
	}
	loop_timer_free(r->admit);
	r->admit = NULL;
	log_line(LOG_INFO, r->id, "sandbox %s", cell_sandbox_id(r->cell));
	return 0;
}

/* Start waiting runs while there are free slots, the clients with runs
 * waiting taking turns (admit.h): one client's burst cannot make the
 * others wait behind all of it. */
static void queue_advance(struct gateway *gw)
{
	struct gateway_ticket *t;

	while ((t = gateway_queue_next(gw->admit))) {
		struct gw_run *r = gateway_ticket_data(t);
		struct appl_err err = {0};

		if (cell_begin(gw, r, &err) < 0) {
			log_line(LOG_ERR, r->id, "starting a sandbox failed: %s", err.msg);
			r->fail = "the run could not start: the sandbox failed to boot";
			run_ended(r);
		}
	}
}

static void run_end_log(const struct gw_run *r, const struct cell_outcome *o)
{
	const char *reason = cell_reason_name(o->reason);
	char text[512];

	/* Why a run was stopped is the host's own text (a violation quotes at
	 * most 32 printable bytes of the runner's), escaped all the same; the
	 * code's own traceback is not logged. */
	text[0] = '\0';
	if (reason && o->error)
		log_escape(o->error, strlen(o->error), text, sizeof(text), NULL);
	log_line(LOG_INFO, r->id, "ended: %s%s%s, %lu calls, %llu ms%s", reason ? reason : "done",
		 text[0] ? ": " : "", text, o->calls,
		 (unsigned long long)(loop_now_ms() - r->arrival), r->run ? "" : " (cancelled)");
}

/* The run's last line: a run that ran ends with run.end, one that never
 * got a cell with run.refused. On disk before the answer leaves: 0, or the
 * log's failure. */
static int run_end_audit(struct gw_run *r, const struct cell_outcome *o)
{
	struct audit *a = r->gw->audit;
	const char *reason;
	json_t *body;
	int rc;

	if (!a)
		return 0;
	if (!o) {
		body = json_pack("{ss ss ss}", "run", r->id, "client", r->client, "reason",
				 r->fail ? r->fail : "it could not start");
		audit_event(a, "run.refused", body);
		json_decref(body);
		return audit_flush(a, false);
	}
	reason = cell_reason_name(o->reason);
	body = json_pack("{ss ss sI sI sI sb}", "run", r->id, "reason",
			 reason	    ? reason
			 : o->error ? "error"
				    : "done",
			 "ms", (json_int_t)(loop_now_ms() - r->arrival), "calls",
			 (json_int_t)o->calls, "out_bytes", (json_int_t)o->out_len, "answered",
			 r->run != NULL);
	if (!r->run) {
		audit_event(a, "run.end", body);
		json_decref(body);
		return 0;
	}
	rc = audit_event_sync(a, "run.end", body);
	if (rc < 0) {
		/* Queued for when the log can be written again: it was not
		 * answered. */
		log_line(LOG_ERR, r->id, "the run's end could not be logged: %s", audit_why(a));
		json_object_set_new(body, "answered", json_false());
		json_object_set_new(body, "withheld", json_true());
		audit_event(a, "run.end", body);
	}
	json_decref(body);
	return rc;
}

/* A run the appliance's stop ended before it was answered (every run
 * still listed): its last line says so. */
static void run_shutdown_audit(struct gw_run *r)
{
	json_t *body;

	if (!r->gw->audit)
		return;
	body = json_pack("{ss ss sI sI sI sb}", "run", r->id, "reason", "shutdown", "ms",
			 (json_int_t)(loop_now_ms() - r->arrival), "calls",
			 (json_int_t)(r->cell ? cell_calls(r->cell) : 0), "out_bytes",
			 (json_int_t)0, "answered", 0);
	audit_event(r->gw->audit, "run.end", body);
	json_decref(body);
}

static void run_answer(struct gw_run *r)
{
	const struct cell_outcome *o = r->cell ? cell_outcome(r->cell) : NULL;
	char msg[640];

	if (o)
		run_end_log(r, o);
	else
		log_line(LOG_INFO, r->id, "ended without a run: %s",
			 r->fail ? r->fail : "it could not start");
	if (run_end_audit(r, o) < 0 && r->run && o) {
		/* Fail closed: what the log does not hold, the client does not get. */
		snprintf(msg, sizeof(msg),
			 "the run's answer is withheld: the audit log cannot be written (%s)",
			 audit_why(r->gw->audit));
		mcp_run_fail(r->run, msg);
		r->run = NULL;
	}
	if (!r->run)
		return;
	if (o)
		mcp_run_finish(r->run, o);
	else if (r->cell)
		mcp_run_fail(r->run, "the run ended without a result");
	else
		mcp_run_fail(r->run, r->fail ? r->fail : "the run could not start");
	r->run = NULL;
}

/* A script read from a file has ended: its runs finish, then the
 * appliance stops. */
static void stop_if_drained(struct gateway *gw)
{
	if (!gw->input_done || gw->runs || gw->stop)
		return;
	snprintf(gw->stop_why, sizeof(gw->stop_why), "end of input");
	gw->stop = true;
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
		run_answer(r);
		run_unlink(gw, r);
		run_free(r);
		ended = true;
	}
	queue_advance(gw);
	/* Replacements boot once a run has ended and its answer is out, not
	 * while that run's own sandbox still runs its code (other runs may). */
	if (ended)
		pool_fill(gw->pool);
	stop_if_drained(gw);
}

static void run_id_new(char out[2 * GATEWAY_RUN_ID_BYTES + 1])
{
	unsigned char b[GATEWAY_RUN_ID_BYTES];

	randombytes_buf(b, sizeof(b));
	sodium_bin2hex(out, 2 * GATEWAY_RUN_ID_BYTES + 1, b, sizeof(b));
}

/* A run that waited for a slot until its deadline: it never starts. The
 * deadline counts from arrival, waiting included. */
static void on_admit_timeout(void *data)
{
	struct gw_run *r = data;

	if (r->cell || r->done)
		return;
	r->fail = "the run waited for a free slot until its deadline passed";
	run_ended(r);
}

/* A request that gets no run at all: the client's error, and the log's
 * line when the log can take one. */
static void run_refuse(struct gateway *gw, struct mcp_run *run, const struct mcp_request *req,
		       const char *why)
{
	char id[2 * GATEWAY_RUN_ID_BYTES + 1];
	json_t *body;

	if (gw->audit) {
		run_id_new(id);
		body = json_pack("{ss ss ss}", "run", id, "client", req->principal->client,
				 "reason", why);
		audit_event(gw->audit, "run.refused", body);
		json_decref(body);
	}
	mcp_run_fail(run, why);
}

/* The run's first line, with a keyed digest of its code, never the code. */
static void run_start_audit(struct gateway *gw, struct gw_run *r, const struct mcp_request *req)
{
	char digest[AUDIT_HASH_HEX];
	json_t *body;

	audit_digest_of(gw->audit, r->code, r->code_len, digest);
	body = json_pack("{ss ss ss? ss ss sI}", "run", r->id, "client", req->principal->client,
			 "role", req->principal->role, "revision", req->rev->name, "code", digest,
			 "code_bytes", (json_int_t)r->code_len);
	audit_event(gw->audit, "run.start", body);
	json_decref(body);
}

static void on_run(struct mcp_run *run, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct gateway *gw = data;
	struct appl_err err = {0};
	struct gw_role *role;
	struct gw_run *r;
	char why[640];

	gw->served++;
	if ((int64_t)time(NULL) >= policy_expires(gw->policy)) {
		run_refuse(gw, run, req, "the appliance's policy has expired: no new cells run");
		return;
	}
	/* Fail closed: no cell runs that the log could not record. */
	if (gw->audit && !audit_ok(gw->audit) && audit_flush(gw->audit, false) < 0) {
		snprintf(why, sizeof(why),
			 "the run could not start: the audit log cannot be written (%s)",
			 audit_why(gw->audit));
		log_line(LOG_ERR, NULL, "%s", why);
		run_refuse(gw, run, req, why);
		return;
	}
	if (gw->http && gateway_queue_waiting(gw->admit, req->principal->client) >=
				gw->lim.http_waiting_per_client) {
		log_line(LOG_WARN, NULL, "%s: refused a run: %u of its runs wait already",
			 req->principal->client, gw->lim.http_waiting_per_client);
		run_refuse(gw, run, req,
			   "too many of this client's runs are waiting: try again later");
		return;
	}
	if (gateway_queue_waiting(gw->admit, NULL) >=
	    (gw->http ? APPL_HTTP_RUNS_WAITING_MAX : APPL_RUNS_WAITING_MAX)) {
		run_refuse(gw, run, req,
			   "too many runs are waiting: try again when some have ended");
		return;
	}
	if (!(role = role_get(gw, req->principal->role, &err))) {
		log_line(LOG_ERR, NULL, "the tool list of a role could not be built: %s", err.msg);
		run_refuse(gw, run, req, "the run could not start: host fault");
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r || !(r->code = malloc(len + 1)) ||
	    !(r->admit = loop_timer_new(gw->loop, on_admit_timeout, r, &err)) ||
	    !(r->ticket = gateway_queue_join(gw->admit, req->principal->client, r))) {
		if (r) {
			loop_timer_free(r->admit);
			free(r->code);
		}
		free(r);
		mcp_run_fail(run, "out of memory");
		return;
	}
	upstream_set_wake(gw->ups);
	run_id_new(r->id);
	log_line(LOG_INFO, r->id, "run_python: %zu bytes of code (%s, %s)", len,
		 req->principal->client, req->rev->name);
	memcpy(r->code, code, len);
	r->code[len] = '\0';
	r->code_len = len;
	r->gw = gw;
	r->run = run;
	r->role = role;
	r->client = req->principal->client;
	r->arrival = loop_now_ms();
	if (gw->audit)
		run_start_audit(gw, r, req);
	loop_timer_set(r->admit, gw->lim.deadline_s * 1000ull);
	mcp_run_set_data(run, r);
	r->next = gw->runs;
	if (gw->runs)
		gw->runs->prev = r;
	gw->runs = r;
	queue_advance(gw);
}

static void on_cancel(struct mcp_run *run, void *data)
{
	struct gw_run *r = mcp_run_data(run);
	(void)data;

	r->run = NULL; /* no answer goes out for a cancelled request */
	if (r->cell)
		cell_cancel(r->cell);
	else if (!r->done)
		r->fail = "cancelled while it waited for a free slot";
	run_ended(r);
}

static void on_progress(struct mcp_run *run, struct mcp_progress *p, void *data)
{
	struct gw_run *r = mcp_run_data(run);
	(void)data;

	p->waiting = !r->cell;
	if (r->cell) {
		p->calls = cell_calls(r->cell);
		p->out = cell_output(r->cell, &p->out_len);
	}
}

static void on_closed(struct mcp_session *s, const char *why, void *data)
{
	struct gateway *gw = data;
	(void)s;
	(void)why;

	/* The stdio client is the one client: its end is the appliance's. An
	 * HTTP client's session ending ends nothing else. */
	if (!gw->stdio)
		return;
	if (!gw->stop)
		snprintf(gw->stop_why, sizeof(gw->stop_why), "client closed");
	gw->stop = true;
}

static const char *description(const char *role, void *data)
{
	struct appl_err err = {0};
	struct gw_role *ro = role_get(data, role, &err);

	return ro ? ro->description : "";
}

static void on_stop_signal(int signo, void *data)
{
	struct gateway *gw = data;

	log_line(LOG_INFO, NULL, "signal %d: stopping", signo);
	if (!gw->stop)
		snprintf(gw->stop_why, sizeof(gw->stop_why), "signal %d", signo);
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

/* ---- the audit log ------------------------------------------------------------ */

/* The audit log's configuration from the policy: for run and check alike. */
static struct audit_config audit_config_of(const struct policy *p, const struct policy_limits *l,
					   const char *state_dir)
{
	return (struct audit_config){.path = policy_audit_path(p),
				     .state_dir = state_dir,
				     .seal = policy_audit_seal(p),
				     .seal_lines = l->audit_seal_lines,
				     .seal_s = l->audit_seal_s,
				     .rotate_bytes = (uint64_t)l->audit_rotate_kb * 1024u};
}

int gateway_audit_check(const struct policy *p, const char *state_dir, struct appl_err *err)
{
	struct policy_limits l;
	struct audit_config ac;

	policy_limits_get(p, &l);
	ac = audit_config_of(p, &l, state_dir);
	if (!ac.path)
		return 0;
	if (!ac.state_dir)
		return appl_err_set(err, -EINVAL, "audit: no state directory");
	return audit_check(&ac, err);
}

static int audit_start(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct audit_config ac = audit_config_of(cfg->policy, &gw->lim, cfg->state_dir);

	if (!ac.path) {
		log_line(LOG_WARN, NULL, "no audit log: the policy has no audit.path");
		return 0;
	}
	if (!ac.state_dir)
		return appl_err_set(err, -EINVAL, "audit: no state directory");
	gw->audit = audit_open(gw->loop, &ac, err);
	if (!gw->audit)
		return appl_err_prefix(err, "audit log");
	log_line(LOG_INFO, NULL, "audit log %s%s", ac.path, ac.seal ? " (sealed)" : "");
	return 0;
}

/* The start line, on disk before the first request is read. */
static int audit_started(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	const struct policy_verified *v = cfg->verified;
	char policy_digest[8 + 2 * POLICY_HASH_BYTES + 1] = "sha256:";
	json_t *body;
	int rc;

	if (!gw->audit)
		return 0;
	if (v)
		sodium_bin2hex(policy_digest + 7, sizeof(policy_digest) - 7, v->hash,
			       POLICY_HASH_BYTES);
	/* seal_s tells an auditor how old the newest seal of a log being
	 * written may be (docs/audit.md, the age of the newest seal). */
	body = json_pack("{ss? ss? sI ss ss ss ss sb sI}", "deployment", v ? v->deployment : NULL,
			 "key", v ? v->keyid_hex : NULL, "serial", (json_int_t)(v ? v->serial : 0),
			 "policy", v ? policy_digest : "", "image",
			 policy_image_digest(cfg->policy), "runsc", sandbox_rt_version(gw->rt),
			 "version", APPL_VERSION, "seal", policy_audit_seal(cfg->policy), "seal_s",
			 (json_int_t)gw->lim.audit_seal_s);
	rc = audit_event_sync(gw->audit, "start", body);
	json_decref(body);
	if (rc < 0)
		return appl_err_set(err, rc, "audit log: %s", audit_why(gw->audit));
	return 0;
}

/* The stop line and a last seal, then the log closed. */
static void audit_stop(struct gateway *gw)
{
	json_t *body;

	if (!gw->audit)
		return;
	body = json_pack("{ss sI}", "reason", gw->stop_why[0] ? gw->stop_why : "start failed",
			 "runs", (json_int_t)gw->served);
	audit_event(gw->audit, "stop", body);
	json_decref(body);
	audit_seal_now(gw->audit);
	if (audit_flush(gw->audit, true) < 0)
		log_line(LOG_ERR, NULL, "the audit log's stop line was not written: %s",
			 audit_why(gw->audit));
	audit_free(gw->audit);
	gw->audit = NULL;
}

/* Stop every cell; the answers would have nowhere to go. Kill them all
 * first, so the sandboxes go down together, then flush what the client is
 * owed and clean up. */
static void shutdown_all(struct gateway *gw)
{
	for (struct gw_run *r = gw->runs; r; r = r->next)
		if (r->cell)
			cell_cancel(r->cell);
	/* The session cancels its runs still in flight (on_cancel). */
	mcp_stdio_free(gw->stdio, GATEWAY_DRAIN_MS);
	gw->stdio = NULL;
	mcp_http_close(gw->http);
	gw->http = NULL;
	while (gw->runs) {
		struct gw_run *r = gw->runs;

		r->run = NULL;
		run_shutdown_audit(r);
		run_unlink(gw, r);
		run_free(r);
	}
	if (gw->loop)
		loop_task_cancel(gw->loop, &gw->reap);
	gateway_queue_free(gw->admit);
	gw->admit = NULL;
	pool_free(gw->pool);
	gw->pool = NULL;
	mcp_server_free(gw->srv);
	gw->srv = NULL;
	upstream_set_free(gw->ups);
	gw->ups = NULL;
	bridge_gate_free(gw->gate);
	gw->gate = NULL;
	roles_free(gw);
	audit_stop(gw);
}

/* ---- serving over HTTP ----------------------------------------------------------- */

static const struct mcp_principal *token_principal(void *data, const unsigned char sha256[32])
{
	struct gateway *gw = data;
	const struct policy_token *t = policy_token_match(gw->policy, sha256);

	for (size_t i = 0; t && i < policy_token_count(gw->policy); i++)
		if (policy_token_get(gw->policy, i) == t)
			return &gw->principals[i];
	return NULL;
}

/* Every authentication is an audit event with the client's name and
 * address; refusals are rate-limited, so a stream of bad tokens cannot
 * flood the log (their count is kept). */
static void on_auth(void *data, const struct mcp_principal *p, const char *peer)
{
	struct gateway *gw = data;
	unsigned dropped = 0;
	json_t *o;

	if (!gw->audit)
		return;
	if (!p && !log_rate_allow(&gw->auth_rate, loop_now_ms(), &dropped))
		return;
	o = json_pack("{ss? ss ss}", "client", p ? p->client : NULL, "peer", peer, "outcome",
		      p ? "accepted" : "refused");
	if (o && dropped)
		json_object_set_new(o, "refusals_dropped", json_integer(dropped));
	if (o)
		audit_event(gw->audit, "auth", o);
	json_decref(o);
}

/* The policy's http section as the transport's configuration: every
 * listener, the endpoint, the hosts and origins, TLS, the limits. */
static int http_open(struct gateway *gw, struct appl_err *err)
{
	const struct policy_http *ph = policy_http(gw->policy);
	struct http_front_listen listen[APPL_POLICY_HTTP_LISTEN_MAX];
	size_t n = policy_token_count(gw->policy), len;
	struct mcp_http_config c;

	if (ph->nlisten > APPL_POLICY_HTTP_LISTEN_MAX)
		return appl_err_set(err, -E2BIG, "http.listen: too many");
	if (!(gw->principals = calloc(n ? n : 1, sizeof(*gw->principals))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		gw->principals[i] =
			(struct mcp_principal){.client = policy_token_get(gw->policy, i)->name,
					       .role = policy_token_get(gw->policy, i)->role};
	if (ph->tls_cert) {
		if (policy_http_tls_check(gw->policy, err) < 0 ||
		    appl_file_read(ph->tls_cert, APPL_HTTP_TLS_FILE_MAX, &gw->tls_cert, &len, err) <
			    0 ||
		    appl_file_read(ph->tls_key, APPL_HTTP_TLS_FILE_MAX, &gw->tls_key, &len, err) <
			    0)
			return err->code;
	}
	for (size_t i = 0; i < ph->nlisten; i++)
		listen[i].addr = ph->listen[i].text;
	memset(&c, 0, sizeof(c));
	c.front = (struct http_front_config){.listen = listen,
					     .nlisten = ph->nlisten,
					     .path = ph->path,
					     .hosts = ph->hosts,
					     .nhosts = ph->nhosts,
					     .origins = ph->origins,
					     .norigins = ph->norigins,
					     .tls_cert_pem = gw->tls_cert,
					     .tls_key_pem = gw->tls_key,
					     .max_connections = gw->lim.http_connections,
					     .header_bytes = APPL_HTTP_HEADER_BYTES,
					     .body_bytes = (size_t)gw->lim.http_body_kb * 1024u,
					     .slow_s = gw->lim.http_slow_s};
	c.principal = token_principal;
	c.on_auth = on_auth;
	c.data = gw;
	c.sessions_per_principal = gw->lim.http_sessions_per_token;
	c.idle_ms = gw->lim.http_idle_s * 1000u;
	if (mcp_http_open(gw->srv, gw->loop, &c, &gw->http, err) < 0)
		return err->code;
	return 0;
}

static void http_log(const struct gateway *gw)
{
	const struct policy_http *ph = policy_http(gw->policy);

	for (size_t i = 0; i < ph->nlisten; i++)
		log_line(LOG_INFO, NULL, "serving MCP over HTTP%s at %s%s", gw->tls_cert ? "S" : "",
			 ph->listen[i].text, ph->path);
}

static void http_release(struct gateway *gw)
{
	free(gw->principals);
	gw->principals = NULL;
	if (gw->tls_key) {
		sodium_memzero(gw->tls_key, strlen(gw->tls_key));
		free(gw->tls_key);
	}
	free(gw->tls_cert);
	gw->tls_cert = gw->tls_key = NULL;
}

int gateway_http_try(const struct policy *p, struct appl_err *err)
{
	struct gateway gw;
	struct mcp_server_hooks hooks = {.data = &gw};
	int rc;

	memset(&gw, 0, sizeof(gw));
	gw.policy = p;
	policy_limits_get(p, &gw.lim);
	if (!(gw.loop = loop_new(err)) || !(gw.srv = mcp_server_new(gw.loop, &hooks, err)))
		rc = err->code;
	else
		rc = http_open(&gw, err);
	mcp_http_close(gw.http);
	mcp_server_free(gw.srv);
	http_release(&gw);
	loop_free(gw.loop);
	return rc;
}

/* What runs need: the image, the audit log, the sandbox runtime, the
 * servers and their tool lists, the warm pool; then the policy's serial
 * recorded and the audit log's start line written. At start when serving
 * HTTP; over stdio when the first request needs the tools (hold), so that
 * a process that only answers initialize or server/discover costs little. */
static int engine_start(struct gateway *gw, struct appl_err *err)
{
	const struct gateway_config *cfg = gw->cfg;
	struct sandbox_rt_config rc = {.runsc = policy_runtime_runsc(cfg->policy),
				       .state_dir = cfg->run_dir,
				       .platform = policy_runtime_platform(cfg->policy),
				       .rootless = policy_runtime_rootless(cfg->policy)};
	char cache[PATH_MAX];
	const char *dir = cfg->cache;

	if (!dir && image_cache_default(cache, sizeof(cache), err) < 0)
		return err->code;
	if (image_layout_verify(policy_image_layout(cfg->policy), policy_image_digest(cfg->policy),
				dir ? dir : cache, gw->rootfs, sizeof(gw->rootfs), err) < 0)
		return err->code;
	if (audit_start(gw, cfg, err) < 0 || !(gw->rt = sandbox_rt_open(&rc, err)) ||
	    sandbox_rootfs_image(gw->rt, gw->rootfs, gw->rootfs_image, sizeof(gw->rootfs_image),
				 err) < 0 ||
	    gateway_confine_prepare(&gw->confine, cfg->policy, cfg->hide, cfg->run_dir, err) < 0)
		return err->code;
	gw->oci.rootfs_image = gw->rootfs_image[0] ? gw->rootfs_image : NULL;
	if (upstreams_open(gw, err) < 0 || !role_get(gw, gw->stdio_client.role, err))
		return err->code;
	if (!(gw->pool = pool_new(gw->loop, gw->rt, &gw->oci, &gw->cell_lim, gw->lim.pool,
				  policy_runtime_restore(cfg->policy), err)))
		return err->code;
	pool_fill(gw->pool);
	/* The serial is recorded only once all of this has passed: a policy
	 * that cannot start must not lock out the one that can. */
	if ((cfg->on_started && cfg->on_started(cfg->data, err) < 0) ||
	    audit_started(gw, cfg, err) < 0)
		return err->code;
	gw->started = true;
	return 0;
}

/* Over stdio, a request that needs the tools waits until they have
 * started (serve starts them between loop rounds). */
static bool hold(void *data)
{
	return !((struct gateway *)data)->started;
}

static void on_input_end(void *data)
{
	struct gateway *gw = data;
	size_t n = 0;

	for (struct gw_run *r = gw->runs; r; r = r->next)
		n++;
	log_line(LOG_INFO, NULL, "end of the input file: %zu run%s in flight", n,
		 n == 1 ? "" : "s");
	gw->input_done = true;
	stop_if_drained(gw);
}

static int gateway_open(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .progress = on_progress,
					 .description = description,
					 .on_closed = on_closed,
					 .hold = hold,
					 .data = gw};
	struct mcp_stdio_config sc = {.in_fd = cfg->in_fd,
				      .out_fd = cfg->out_fd,
				      .principal = &gw->stdio_client,
				      .on_input_end = on_input_end,
				      .data = gw};

	gw->cfg = cfg;
	gw->policy = cfg->policy;
	gw->secrets = cfg->secrets;
	gw->stdio_client = (struct mcp_principal){.client = "stdio",
						  .role = policy_client_default_role(cfg->policy)};
	policy_limits_get(cfg->policy, &gw->lim);
	gateway_limits_split(&gw->lim, &gw->oci, &gw->cell_lim);
	bridge_limits_from_policy(&gw->lim, &gw->blim);
	gw->oci.rootfs = gw->rootfs;
	/* Only HTTP clients are held to a share: stdio is one client. */
	if (!(gw->admit = gateway_queue_new(
		      gw->lim.cells, policy_http(cfg->policy) ? gw->lim.http_cells_per_client : 0)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (!(gw->loop = loop_new(err)) || !(gw->srv = mcp_server_new(gw->loop, &hooks, err)))
		return err->code;
	if (policy_http(cfg->policy)) {
		/* Ready before the first client asks. */
		if (engine_start(gw, err) < 0 || http_open(gw, err) < 0)
			return err->code;
		http_log(gw);
		return 0;
	}
	if (!(gw->stdio = mcp_stdio_open(gw->srv, gw->loop, &sc, err)))
		return err->code;
	log_line(LOG_INFO, NULL,
		 "the image, the sandbox runtime and the servers start when the first request "
		 "needs them");
	return 0;
}

/* The loop until a stop; over stdio, the tools started between rounds
 * when a request held for them asks. 0, or negative with err when they
 * could not start (the held request is answered with why). */
static int serve(struct gateway *gw, struct appl_err *err)
{
	char why[sizeof(err->msg) + 64];

	while (!gw->stop) {
		if (loop_run_once(gw->loop, -1) < 0)
			break;
		if (gw->started || gw->stop || !mcp_stdio_holds(gw->stdio))
			continue;
		log_line(LOG_INFO, NULL, "a request needs the tools: starting them");
		if (engine_start(gw, err) < 0) {
			snprintf(why, sizeof(why), "the appliance could not start: %s", err->msg);
			mcp_stdio_refuse_held(gw->stdio, why);
			return err->code;
		}
		log_line(LOG_INFO, NULL, "started");
		mcp_stdio_release(gw->stdio);
	}
	return 0;
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
	if (rc == 0) {
		log_line(LOG_INFO, NULL, "serving");
		rc = serve(&gw, err);
	}
	shutdown_all(&gw);
	sandbox_rt_close(gw.rt); /* before the loop: it finishes teardowns from it */
	gateway_confine_release(&gw.confine);
	http_release(&gw);
	loop_free(gw.loop);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}

int gateway_stubs(const struct policy *policy, const char *role, struct upstream_secrets *secrets,
		  FILE *out, struct appl_err *err)
{
	struct gateway gw;
	const struct stubs *st;
	struct bridge_tool_info info;
	struct gw_role *ro;
	int rc;

	memset(&gw, 0, sizeof(gw));
	gw.policy = policy;
	gw.secrets = secrets;
	role = role ? role : policy_client_default_role(policy);
	policy_limits_get(policy, &gw.lim);
	if (role && !policy_role_find(policy, role)) {
		rc = appl_err_set(err, -EINVAL, "the policy has no role \"%s\"", role);
		goto out;
	}
	if (!(gw.loop = loop_new(err))) {
		rc = err->code;
		goto out;
	}
	if ((rc = gateway_confine_prepare(&gw.confine, policy, NULL, NULL, err)) < 0 ||
	    (rc = upstreams_open(&gw, err)) < 0)
		goto out;
	if (!(ro = role_get(&gw, role, err))) {
		rc = err->code;
		goto out;
	}
	st = bridge_catalog_stubs(ro->cat);
	fprintf(out, "# role: %s\n# run_python's description:\n\n%s\n", role ? role : "(none)",
		ro->description);
	fprintf(out, "\n# %zu tool stubs:\n", stubs_count(st));
	for (size_t i = 0; i < stubs_count(st); i++)
		fprintf(out, "\n# %s\n%s", stubs_mcp_name(st, i), stubs_text(st, i));
	for (size_t i = 0; bridge_catalog_info(ro->cat, i, &info) == 0; i++)
		if (info.why_not)
			fprintf(out, "\n# not offered: %s.%s: %s", info.server, info.name,
				info.why_not);
	fputs("\n", out);
	rc = fflush(out) == 0 ? 0 : appl_err_errno(err, -EIO, errno, "writing the stubs");
out:
	upstream_set_free(gw.ups);
	bridge_gate_free(gw.gate);
	roles_free(&gw);
	gateway_confine_release(&gw.confine);
	loop_free(gw.loop);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return rc;
}
