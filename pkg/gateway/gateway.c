/* gateway.c: `appliance run`: the MCP transports and their sessions on
 * the engine (see gateway.h). */
#define _GNU_SOURCE
#include "gateway/internal.h"

#include <errno.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "audit/audit.h"
#include "base/fs.h"
#include "cell/cell.h"
#include "engine/engine.h"
#include "gateway/scrape.h"
#include "engine/ready.h"
#include "log/log.h"
#include "loop/loop.h"
#include "mcp/http.h"
#include "mcp/session.h"
#include "mcp/stdio.h"
#include "metrics/metrics.h"
#include "run/run.h"
#include "gateway/internal.h"

/* ---- a run's client: its MCP request ----------------------------------------------- */

static void client_progress(void *c)
{
	mcp_run_poke(c);
}

static void *client_ask(void *c, const struct run_question *q, char *why, size_t cap)
{
	struct mcp_ask_spec sp = {.text = q->text,
				  .bind = q->bind,
				  .label = q->label,
				  .timeout_ms = q->timeout_ms,
				  .fn = q->fn,
				  .token = q->token};

	return mcp_run_ask(c, &sp, why, cap);
}

static void client_withdraw(void *c, void *handle)
{
	(void)c;
	mcp_ask_cancel(handle);
}

static void client_answer(void *c, const json_t *result, bool is_error, const char *text,
			  const json_t *files)
{
	if (result)
		mcp_run_finish(c, result, is_error, files);
	else
		mcp_run_fail(c, text);
}

/* ---- the session's hooks ----------------------------------------------------------- */

static void on_run(struct mcp_run *mr, const struct mcp_request *req, const char *code, size_t len,
		   void *data)
{
	struct gateway *gw = data;
	struct run_client c = {.name = req->principal->client,
			       .role = req->principal->role,
			       .revision = req->rev->name,
			       .progress = client_progress,
			       .ask = client_ask,
			       .withdraw = client_withdraw,
			       .answer = client_answer,
			       .c = mr,
			       .task = req->task,
			       .trace = req->trace};
	struct engine_session_args sa = {
		.session = req->run_session, .end = req->end_session, .bind = req->bind};
	/* Only HTTP clients are held to a share of the waiting runs: stdio is
	 * one client. */
	unsigned waiting = gw->http ? gw->lim->http_waiting_per_client : 0;
	unsigned total = gw->http ? APPL_HTTP_RUNS_WAITING_MAX : APPL_RUNS_WAITING_MAX;
	struct run *r;

	if (req->tool)
		r = engine_run_tool(gw->e, req->tool, req->args, &c, waiting, total);
	else
		r = engine_run_session(gw->e, code, len, &c, waiting, total, &sa);
	if (r)
		mcp_run_set_data(mr, r);
}

static void on_cancel(struct mcp_run *mr, void *data)
{
	(void)data;
	run_cancel_by(mcp_run_data(mr), mcp_run_cancelled_by(mr));
}

/* What a client's tasks may hold: the policy in force says, read as each
 * task is made (a reload changes the next one's). */
static void task_limits(struct mcp_task_limits *out, void *data)
{
	struct gateway *gw = data;

	out->ttl_ms = gw->lim->task_ttl_s * 1000u;
	out->min_ttl_ms = (gw->lim->deadline_s + APPL_TASK_TTL_SPARE_S) * 1000u;
	if (out->min_ttl_ms > out->ttl_ms)
		out->min_ttl_ms = out->ttl_ms;
	out->per_client = gw->lim->tasks_per_client;
}

static void on_progress(struct mcp_run *mr, struct mcp_progress *p, void *data)
{
	const struct run *r = mcp_run_data(mr);
	(void)data;

	p->waiting = run_waiting(r);
	p->calls = run_calls(r);
	p->out = run_output(r, &p->out_len);
}

static void on_closed(struct mcp_session *s, const char *why, uint64_t bind, void *data)
{
	struct gateway *gw = data;
	(void)s;
	(void)why;

	/* The sessions (of cells) bound to it end with it. The stdio client is
	 * the one client: its end is the appliance's. An HTTP client's session
	 * ending ends nothing else. */
	if (bind)
		engine_sessions_closed(gw->e, bind);
	if (gw->stdio)
		engine_stop(gw->e, "client closed");
}

static const char *description(const char *role, void *data)
{
	struct gateway *gw = data;
	struct appl_err err = {0};
	const char *d = engine_role_view(gw->e, role, NULL, &err);

	return d ? d : "";
}

/* What role is shown besides run_python's description: the policy in
 * force says (its code tools, and whether the role sees run_python). */
static void listing(const char *role, struct mcp_listing *out, void *data)
{
	struct gateway *gw = data;
	size_t n = engine_role_code_tools(gw->e, role, gw->code_tools, APPL_CODE_TOOLS_MAX);

	for (size_t i = 0; i < n; i++) {
		const struct policy_code_tool *t = gw->code_tools[i];

		gw->listed[i] = (struct mcp_code_tool){
			.name = t->name,
			.description = t->description,
			.input_schema = t->input_schema,
			.output_schema = t->output_schema,
			.read_only = t->access == POLICY_ACCESS_READ,
		};
	}
	out->run_python = engine_role_inline(gw->e, role);
	out->tools = gw->listed;
	out->ntools = n;
}

/* Over stdio, a request that needs the tools waits until they have
 * started (serve starts them between loop rounds). */
static bool hold(void *data)
{
	return !engine_started(((struct gateway *)data)->e);
}

static void tools_changed(void *data, const char *role)
{
	struct gateway *gw = data;

	if (gw->srv)
		mcp_server_tools_changed(gw->srv, role);
}

/* A script read from a file has ended: its runs finish, then the
 * appliance stops (serve). */
static void on_input_end(void *data)
{
	struct gateway *gw = data;
	unsigned n = engine_runs(gw->e);

	log_line(LOG_INFO, NULL, "end of the input file: %u run%s in flight", n, n == 1 ? "" : "s");
	gw->input_done = true;
}

/* ---- serving over HTTP ----------------------------------------------------------- */

static const struct mcp_principal *token_principal(void *data, const unsigned char sha256[32])
{
	struct gateway *gw = data;
	const struct policy_token *t = policy_token_match(gw->policy, sha256);

	for (size_t i = 0; t && i < policy_token_count(gw->policy); i++)
		if (policy_token_get(gw->policy, i) == t)
			return &gw->principals[i]->p;
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

	if (!engine_audit(gw->e))
		return;
	if (!p && !log_rate_allow(&gw->auth_rate, loop_now_ms(), &dropped))
		return;
	o = json_pack("{ss? ss ss}", "client", p ? p->client : NULL, "peer", peer, "outcome",
		      p ? "accepted" : "refused");
	if (o && dropped)
		json_object_set_new(o, "refusals_dropped", json_integer(dropped));
	if (o)
		audit_event(engine_audit(gw->e), "auth", o);
	json_decref(o);
}

/* /readyz's answer (engine_unready), a log line when it changes, not
 * one per probe. */
static const char *unready(void *data)
{
	struct gateway *gw = data;
	const char *now = gw->e ? engine_unready(gw->e) : "starting";

	if (now != gw->ready_said)
		log_line(LOG_INFO, NULL, "readiness: %s", now ? now : "ready");
	gw->ready_said = now;
	return now;
}

/* The policy's http section as the transport's configuration: every
 * listener, the endpoint, the hosts and origins, TLS, the limits. */
static int http_open(struct gateway *gw, struct appl_err *err)
{
	const struct policy_http *ph = policy_http(gw->policy);
	struct http_front_listen listen[APPL_POLICY_HTTP_LISTEN_MAX];
	struct mcp_http_config c;
	size_t len;

	if (ph->nlisten > APPL_POLICY_HTTP_LISTEN_MAX)
		return appl_err_set(err, -E2BIG, "http.listen: too many");
	if (gateway_principals(gw, err) < 0 || gateway_oauth_open(gw, err) < 0)
		return err->code;
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
	for (size_t i = 0; i < gw->cfg->nlisten && i < APPL_POLICY_HTTP_LISTEN_MAX; i++) {
		if (policy_http_listen_check(gw->policy, gw->cfg->listen[i], err) < 0)
			return err->code;
		listen[i].addr = gw->cfg->listen[i];
	}
	memset(&c, 0, sizeof(c));
	c.front = (struct http_front_config){.listen = listen,
					     .nlisten = gw->cfg->nlisten ? gw->cfg->nlisten
									 : ph->nlisten,
					     .path = ph->path,
					     .hosts = ph->hosts,
					     .nhosts = ph->nhosts,
					     .origins = ph->origins,
					     .norigins = ph->norigins,
					     .tls_cert_pem = gw->tls_cert,
					     .tls_key_pem = gw->tls_key,
					     .max_connections = gw->lim->http_connections,
					     .header_bytes = APPL_HTTP_HEADER_BYTES,
					     .body_bytes = (size_t)gw->lim->http_body_kb * 1024u,
					     .slow_s = gw->lim->http_slow_s};
	c.principal = token_principal;
	c.bearer = gateway_oauth_bearer;
	c.resource = gateway_oauth_resource;
	c.on_auth = on_auth;
	c.unready = unready;
	c.data = gw;
	c.sessions_per_principal = gw->lim->http_sessions_per_token;
	c.idle_ms = gw->lim->http_idle_s * 1000u;
	if (mcp_http_open(gw->srv, gw->loop, &c, &gw->http, err) < 0)
		return err->code;
	return 0;
}

static void http_log(const struct gateway *gw)
{
	const struct policy_http *ph = policy_http(gw->policy);

	size_t n = gw->cfg->nlisten ? gw->cfg->nlisten : ph->nlisten;

	for (size_t i = 0; i < n; i++)
		log_line(LOG_INFO, NULL, "serving MCP over HTTP%s at %s%s", gw->tls_cert ? "S" : "",
			 gw->cfg->nlisten ? gw->cfg->listen[i] : ph->listen[i].text, ph->path);
}

static void http_release(struct gateway *gw)
{
	gateway_principals_free(gw);
	if (gw->tls_key) {
		sodium_memzero(gw->tls_key, strlen(gw->tls_key));
		free(gw->tls_key);
	}
	free(gw->tls_cert);
	gw->tls_cert = gw->tls_key = NULL;
}

int gateway_http_try(const struct policy *p, struct appl_err *err)
{
	static const struct gateway_config none; /* the policy's listeners, no replica */
	struct gateway gw;
	struct mcp_server_hooks hooks = {.data = &gw};
	int rc;

	memset(&gw, 0, sizeof(gw));
	gw.cfg = &none;
	gw.policy = p;
	policy_limits_get(p, &gw.lim_copy);
	gw.lim = &gw.lim_copy;
	if (!(gw.loop = loop_new(err)) || !(gw.srv = mcp_server_new(gw.loop, &hooks, err)))
		rc = err->code;
	else if ((rc = http_open(&gw, err)) == 0)
		rc = gateway_scrape_open(gw.loop, p, &gw.scrape, err);
	gateway_scrape_close(gw.scrape);
	mcp_http_close(gw.http);
	gateway_oauth_close(&gw);
	mcp_server_free(gw.srv);
	http_release(&gw);
	loop_free(gw.loop);
	return rc;
}

/* A policy the engine took on a reload is no longer needed. */
static void release(void *data, void *handle)
{
	const struct gateway_config *cfg = ((struct gateway *)data)->cfg;

	if (cfg->release)
		cfg->release(cfg->data, handle);
}

/* SIGHUP: a reload, between loop rounds (serve). */
static void hangup(void *data)
{
	struct gateway *gw = data;

	gw->reload_by = "SIGHUP";
}

/* The first SIGTERM over HTTP: no new work from now on (serve stops the
 * appliance once the runs in flight have ended). */
static void drain(void *data)
{
	struct gateway *gw = data;

	mcp_http_drain(gw->http);
}

/* Everything has started: the caller's hook (where `run` records the
 * serial). */
static int on_started(void *data, struct appl_err *err)
{
	const struct gateway_config *cfg = ((struct gateway *)data)->cfg;

	return cfg->on_started ? cfg->on_started(cfg->data, err) : 0;
}

static int engine_make(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct engine_config ec = {.parts = ENGINE_SANDBOX | ENGINE_SERVERS | ENGINE_POOL |
					    ENGINE_AUDIT | ENGINE_TRACES,
				   .policy = cfg->policy,
				   .cache = cfg->cache,
				   .run_dir = cfg->run_dir,
				   .verified = cfg->verified,
				   .state_dir = cfg->state_dir,
				   .hide = cfg->hide,
				   .secrets = cfg->secrets,
				   .on_started = on_started,
				   .tools_changed = tools_changed,
				   .release = release,
				   .hangup = hangup,
				   .drain = policy_http(cfg->policy) ? drain : NULL,
				   .start_role = true,
				   .name = cfg->admin_name,
				   .role = gw->stdio_client.role,
				   .data = gw};
	struct policy_limits l;

	policy_limits_get(cfg->policy, &l);
	/* Only HTTP clients are held to a share: stdio is one client. */
	ec.per_client = policy_http(cfg->policy) ? l.http_cells_per_client : 0;
	if (!(gw->e = engine_open(&ec, err)))
		return err->code;
	gw->loop = engine_loop(gw->e);
	gw->lim = engine_limits(gw->e);
	return 0;
}

static int gateway_open(struct gateway *gw, const struct gateway_config *cfg, struct appl_err *err)
{
	struct mcp_server_hooks hooks = {.on_run = on_run,
					 .on_cancel = on_cancel,
					 .task_limits = task_limits,
					 .progress = on_progress,
					 .description = description,
					 .listing = listing,
					 .on_closed = on_closed,
					 .hold = hold,
					 .output_schema = cell_outcome_schema(),
					 .data = gw};
	struct mcp_stdio_config sc = {.in_fd = cfg->in_fd,
				      .out_fd = cfg->out_fd,
				      .principal = &gw->stdio_client,
				      .on_input_end = on_input_end,
				      .data = gw};

	gw->cfg = cfg;
	gw->policy = cfg->policy;
	if (!policy_http(cfg->policy) && (cfg->nlisten || cfg->cluster_key))
		return appl_err_set(err, -EINVAL,
				    "%s: only for an appliance that serves HTTP (the policy has no "
				    "http section)",
				    cfg->nlisten ? "--listen" : "--cluster-key");
	gw->stdio_client = (struct mcp_principal){.client = "stdio",
						  .role = policy_client_default_role(cfg->policy)};
	if (engine_make(gw, cfg, err) < 0)
		return err->code;
	hooks.tracer = engine_tracer(gw->e);
	if (!(gw->srv = mcp_server_new(gw->loop, &hooks, err)))
		return err->code;
	gw->started_ms = loop_now_ms();
	gateway_policy_info_set(&gw->info, cfg->policy_path, cfg->verified, time(NULL));
	if (gateway_admin_open(gw, err) < 0)
		return err->code;
	if (policy_http(cfg->policy)) {
		/* Ready before the first client asks. */
		if (engine_start(gw->e, err) < 0 || gateway_cluster_open(gw, err) < 0 ||
		    http_open(gw, err) < 0 ||
		    gateway_scrape_open(gw->loop, gw->policy, &gw->scrape, err) < 0)
			return err->code;
		engine_ready_prepare(gw->e);
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
 * could not start (the held request is answered with why). A script read
 * from a file stops the appliance once its runs have been answered. */
static int serve(struct gateway *gw, struct appl_err *err)
{
	char why[sizeof(err->msg) + 64];

	while (!engine_stopping(gw->e, NULL)) {
		if (loop_run_once(gw->loop, -1) < 0)
			break;
		if (gw->reload_by) {
			const char *by = gw->reload_by;

			gw->reload_by = NULL;
			gateway_reload(gw, by, why, sizeof(why));
		}
		gateway_admin_reloads(gw);
		if (gw->input_done && engine_runs(gw->e) == 0)
			engine_stop(gw->e, "end of input");
		if (engine_draining(gw->e) && engine_runs(gw->e) == 0) {
			log_line(LOG_INFO, NULL, "drained: no run in flight");
			engine_stop(gw->e, engine_draining(gw->e));
		}
		if (engine_started(gw->e) || engine_stopping(gw->e, NULL) ||
		    !mcp_stdio_holds(gw->stdio))
			continue;
		log_line(LOG_INFO, NULL, "a request needs the tools: starting them");
		if (engine_start(gw->e, err) < 0) {
			snprintf(why, sizeof(why), "the appliance could not start: %s", err->msg);
			mcp_stdio_refuse_held(gw->stdio, why);
			return err->code;
		}
		log_line(LOG_INFO, NULL, "started");
		mcp_stdio_release(gw->stdio);
	}
	return 0;
}

/* Stop every cell (the answers would have nowhere to go), then the
 * transports, whose sessions cancel their runs still in flight, then the
 * engine. */
static void gateway_close(struct gateway *gw)
{
	gateway_admin_close(gw);
	if (gw->e)
		engine_runs_stop(gw->e);
	mcp_stdio_free(gw->stdio, GATEWAY_DRAIN_MS);
	gw->stdio = NULL;
	mcp_http_close(gw->http);
	gw->http = NULL;
	gateway_oauth_close(gw); /* its timer and fetch are the loop's */
	gateway_cluster_close(gw);
	gateway_scrape_close(gw->scrape);
	gw->scrape = NULL;
	mcp_server_free(gw->srv);
	gw->srv = NULL;
	engine_close(gw->e);
	gw->e = NULL;
	http_release(gw);
}

int gateway_run(const struct gateway_config *cfg, struct appl_err *err)
{
	struct gateway gw;
	int rc;

	memset(&gw, 0, sizeof(gw));
	rc = gateway_open(&gw, cfg, err);
	if (rc == 0) {
		metrics_policy(policy_serial(cfg->policy), policy_expires(cfg->policy));
		log_line(LOG_INFO, NULL, "serving");
		rc = serve(&gw, err);
	}
	gateway_close(&gw);
	return rc;
}
