/* ask.c: questions put to a run's client (write approvals): legacy
 * elicitation/create requests, and the 2026-07-28 InputRequiredResult with
 * its requestState, the run parked until the client's retry (see
 * session.h, mcp_run_ask). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"

/* A parked run outlives its questions' timeout by this much, so that the
 * asker's refusal comes first and a retry in between still collects the
 * run's answer. */
#define STATE_GRACE_MS 2000u

/* ---- questions to the client (write approvals) ------------------------------------- */

/* A run is waiting for its client's input: it has a question open. */
static bool run_waits(const struct mcp_run *r)
{
	return r->asks || r->parked;
}

/* How many cells of client wait for its input, over every session. */
static unsigned waiting_of(const struct mcp_server *srv, const char *client)
{
	unsigned n = 0;

	for (const struct mcp_session *s = srv->sessions; s; s = s->next)
		if (strcmp(s->p->client, client) == 0)
			for (const struct mcp_run *r = s->runs; r; r = r->next)
				n += run_waits(r); /* an ended run's kept answer counts */
	return n;
}

static json_t *elicit_params(const struct mcp_revision *rev, const char *text)
{
	json_t *p =
		json_pack("{ss s{ss s{s{ss ss ss sb}} s[s]}}", "message", text, "requestedSchema",
			  "type", "object", "properties", "approve", "type", "boolean", "title",
			  "Approve", "description", "Yes lets this one call reach its server.",
			  "default", 0, "required", "approve");

	if (p && mcp_revision_has(rev, MCP_HAS_ELICIT_MODE) &&
	    json_object_set_new(p, "mode", json_string("form"))) {
		json_decref(p);
		return NULL;
	}
	return p;
}

/* A client's answer to an elicitation: only accept with approve true is a
 * yes; an answer that is not one of the three actions is a no. */
static const char *answer_outcome(const json_t *res)
{
	const char *action = json_string_value(json_object_get(res, "action"));

	if (!action || !json_is_object(res))
		return "declined";
	if (strcmp(action, "accept") == 0)
		return json_is_true(json_object_get(json_object_get(res, "content"), "approve"))
			       ? "approved"
			       : "declined";
	if (strcmp(action, "cancel") == 0)
		return "cancelled";
	return "declined";
}

/* Wall-clock milliseconds: a state's expiry, judged by any replica. */
static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* What became of a question, in a state's words. */
static unsigned char was_of(const char *outcome)
{
	return strcmp(outcome, "approved") == 0 ? MCP_STATE_APPROVED : MCP_STATE_DECLINED;
}

/* a's answer (outcome) to its asker, kept in its run's chain: a later
 * state carries it, so a replay elsewhere gives the same answer. With a
 * cluster key, an approval comes with its ledger key. */
static void answer(struct mcp_ask *a, const char *outcome)
{
	struct mcp_run *r = a->run;
	unsigned char claim[32];
	bool keyed =
		r->s->srv->cluster && r->chained && !a->legacy && strcmp(outcome, "approved") == 0;

	if (!a->legacy && r->chained && r->answered && r->nanswered < MCP_STATE_Q_MAX) {
		struct mcp_state_q *q = &r->answered[r->nanswered++];

		memcpy(q->bind, a->bind, sizeof(q->bind));
		q->was = was_of(outcome);
		snprintf(q->key, sizeof(q->key), "%s", a->key);
	}
	if (keyed)
		mcp_state_claim_key(r->chain, a->bind, claim);
	a->fn(a->token, outcome, keyed ? claim : NULL);
}

static void on_expiry(void *data);

/* A legacy question: an elicitation/create request to r's client; a
 * task's goes with its tasks/result, and says which task it is about. */
static void ask_send(struct mcp_run *r, struct mcp_ask *a)
{
	json_t *id = json_string(a->key);
	char *line = NULL;
	size_t len = 0;

	if (r->task)
		json_object_set_new(a->params, "_meta", mcp_task_meta(r->task));
	if (id && jsonrpc_request_encode(id, "elicitation/create", a->params, APPL_RPC_MESSAGE_MAX,
					 &line, &len, NULL) == 0) {
		if (r->task)
			mcp_task_send_request(r->task, line, len, a->key);
		else
			mcp_send_line_for(r->s, r->id, line, len);
	}
	json_decref(id);
}

/* The state of r's park: its chain's answers so far, then the questions
 * not yet sent (marked sent now, listed in reqs). */
static int state_make(struct mcp_run *r, json_t *reqs, char *text, size_t cap)
{
	struct mcp_server *srv = r->s->srv;
	struct mcp_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return -ENOMEM;
	memcpy(st->nonce, r->nonce, MCP_STATE_NONCE);
	memcpy(st->chain, r->chain, MCP_STATE_CHAIN);
	st->expires_ms = wall_ms() + r->timeout_ms + STATE_GRACE_MS;
	for (size_t i = 0; i < r->nanswered && st->n < MCP_STATE_Q_MAX; i++)
		st->q[st->n++] = r->answered[i];
	for (struct mcp_ask *a = r->asks; a && st->n < MCP_STATE_Q_MAX; a = a->next) {
		struct mcp_state_q *q = &st->q[st->n];

		if (a->sent)
			continue;
		st->n++;
		a->sent = true;
		json_object_set_new(
			reqs, a->key,
			json_pack("{ss sO}", "method", "elicitation/create", "params", a->params));
		memcpy(q->bind, a->bind, sizeof(q->bind));
		q->was = MCP_STATE_ASKED;
		snprintf(q->key, sizeof(q->key), "%s", a->key);
	}
	rc = mcp_state_encode(st, srv->key, r->s->p->client, r->code_digest, text, cap);
	free(st);
	return rc;
}

/* Answer r's request with input_required for every question not yet sent,
 * and park r: it has no request until the retry. Its first park makes
 * its chain. */
static void park(struct mcp_run *r)
{
	struct mcp_server *srv = r->s->srv;
	char *text = malloc(MCP_STATE_TEXT_MAX + 1);
	json_t *reqs = json_object(), *res = NULL;
	struct appl_err err = {0};

	if (!r->chained && (r->answered = calloc(MCP_STATE_Q_MAX, sizeof(*r->answered)))) {
		randombytes_buf(r->chain, sizeof(r->chain));
		r->chained = true;
	}
	randombytes_buf(r->nonce, sizeof(r->nonce));
	r->expires = loop_now_ms() + r->timeout_ms + STATE_GRACE_MS;
	if (r->chained && text && reqs && state_make(r, reqs, text, MCP_STATE_TEXT_MAX + 1) == 0)
		res = json_pack("{ss sO ss}", "resultType", "input_required", "inputRequests", reqs,
				"requestState", text);
	free(text);
	json_decref(reqs);
	mcp_reply(r->s, r->id, r->rev, res);
	json_decref(r->id);
	r->id = NULL;
	json_decref(r->token); /* progress belongs to a request */
	r->token = NULL;
	r->parked = true;
	if (!r->expiry)
		r->expiry = loop_timer_new(srv->loop, on_expiry, r, &err);
	if (r->expiry)
		loop_timer_set(r->expiry, r->timeout_ms + STATE_GRACE_MS);
	log_line(LOG_INFO, r->label[0] ? r->label : NULL,
		 "%s: asked for input; the run waits for the retry", r->s->p->client);
	mcp_tick_arm(srv);
}

/* A parked run whose client never came back: stopped, or (when it had
 * ended) its kept answer dropped. */
static void on_expiry(void *data)
{
	struct mcp_run *r = data;
	struct mcp_server *srv = r->s->srv;

	if (!r->parked)
		return;
	log_line(LOG_WARN, r->label[0] ? r->label : NULL,
		 "%s: the client did not come back with its input within %u s: %s", r->s->p->client,
		 (r->timeout_ms + STATE_GRACE_MS) / 1000,
		 r->owner_done ? "answer dropped" : "stopped");
	if (!r->owner_done && srv->hooks.on_cancel)
		srv->hooks.on_cancel(r, srv->hooks.data);
	mcp_run_free(r);
	mcp_tick_arm(srv);
}

/* A replay's question whose answer its state carries: given from a loop
 * task, as a client's would come later. */
static void on_pre(void *data)
{
	struct mcp_ask *a = data;

	mcp_ask_unlink(a);
	answer(a, a->pre);
	mcp_ask_free(a);
}

/* The answer r's replayed state holds for bind (used up now), or NULL. */
static const char *pre_take(struct mcp_run *r, const unsigned char bind[32])
{
	for (size_t i = 0; r->pre && i < r->pre->n; i++) {
		struct mcp_state_q *q = &r->pre->q[i];

		if (q->was != MCP_STATE_ASKED && sodium_memcmp(q->bind, bind, 32) == 0) {
			const char *outcome =
				q->was == MCP_STATE_APPROVED ? "approved" : "declined";

			q->was = MCP_STATE_ASKED; /* used */
			memset(q->bind, 0, sizeof(q->bind));
			return outcome;
		}
	}
	return NULL;
}

/* How many questions r's next state would carry with one more. */
static size_t chain_size(const struct mcp_run *r)
{
	size_t n = r->nanswered + 1;

	for (const struct mcp_ask *a = r->asks; a; a = a->next)
		n++;
	return n;
}

static struct mcp_ask *ask_new(struct mcp_run *r, const struct mcp_ask_spec *sp, bool modern,
			       char *why, size_t cap)
{
	struct mcp_ask *a = calloc(1, sizeof(*a));
	struct mcp_ask **end;

	if (!a || !(a->params = elicit_params(r->rev, sp->text))) {
		free(a);
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	a->run = r;
	a->fn = sp->fn;
	a->token = sp->token;
	memcpy(a->bind, sp->bind, sizeof(a->bind));
	a->legacy = !modern;
	snprintf(a->key, sizeof(a->key), "%s-%llu", modern ? "approve" : "appliance-ask",
		 (unsigned long long)++r->s->srv->asks);
	snprintf(r->label, sizeof(r->label), "%s", sp->label ? sp->label : "");
	r->timeout_ms = sp->timeout_ms;
	for (end = &r->asks; *end; end = &(*end)->next)
		;
	*end = a;
	return a;
}

struct mcp_ask *mcp_run_ask(struct mcp_run *r, const struct mcp_ask_spec *sp, char *why, size_t cap)
{
	struct mcp_session *s = r->s;
	bool modern = mcp_revision_has(r->rev, MCP_HAS_INPUT_REQUIRED);
	const char *pre = modern ? pre_take(r, sp->bind) : NULL;
	struct mcp_ask *a;

	if (s->ended || r->owner_done) {
		snprintf(why, cap, "the client has gone");
		return NULL;
	}
	if (pre) { /* answered already, in the state this run replays */
		if (!(a = ask_new(r, sp, modern, why, cap)))
			return NULL;
		a->sent = true;
		a->pre = pre;
		loop_task_init(&a->pre_task, on_pre, a);
		loop_defer(s->srv->loop, &a->pre_task);
		return a;
	}
	if (modern && !r->task && chain_size(r) > MCP_STATE_Q_MAX) {
		snprintf(why, cap, "this run has asked its client %u questions, its most",
			 MCP_STATE_Q_MAX);
		return NULL;
	}
	if (modern ? !r->can_elicit
		   : !mcp_revision_has(r->rev, MCP_HAS_ELICITATION) ||
			     !mcp_can_form_elicit(s->legacy_caps)) {
		snprintf(why, cap,
			 "the client cannot be asked (it declared no form elicitation) and no "
			 "approver program is set");
		return NULL;
	}
	if (!run_waits(r) && waiting_of(s->srv, s->p->client) >= MCP_INPUT_WAITING_MAX) {
		snprintf(why, cap, "%u cells of this client wait for its input already",
			 MCP_INPUT_WAITING_MAX);
		return NULL;
	}
	if (!(a = ask_new(r, sp, modern, why, cap)))
		return NULL;
	if (r->task) /* a task's question waits in it: the client polls for it */
		mcp_task_touch(r->task);
	if (modern && r->task) {
		a->sent = true; /* listed by tasks/get, answered by tasks/update */
		return a;
	}
	if (modern) {
		if (!r->parked)
			park(r);
		return a;
	}
	ask_send(r, a);
	return a;
}

void mcp_ask_cancel(struct mcp_ask *a)
{
	struct mcp_run *r = a->run;

	mcp_ask_unlink(a);
	if (a->pre) { /* its answer was not given yet: it never will be */
		loop_task_cancel(r->s->srv->loop, &a->pre_task);
		mcp_ask_free(a);
		return;
	}
	if (r->task)
		mcp_task_touch(r->task);
	/* A task's question its client never got is dropped unheard. */
	if (a->legacy && !(r->task && mcp_task_unsend(r->task, a->key))) {
		json_t *params =
			json_pack("{ss ss}", "requestId", a->key, "reason", "no answer in time");

		if (params)
			mcp_notify_for(r->s, r->id, "notifications/cancelled", params);
		json_decref(params);
	}
	mcp_ask_free(a);
}

/* A legacy client's answer to one of its elicitation/create requests. */
void mcp_ask_response(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const char *id = json_string_value(m->id);

	if (!id)
		return;
	/* A task's runs live in sessions of their own, of the same client. */
	for (struct mcp_session *o = s->srv->sessions; o; o = o->next) {
		if (o != s && (!o->p || strcmp(o->p->client, s->p->client) != 0 || o->serial))
			continue;
		for (struct mcp_run *r = o->runs; r; r = r->next)
			for (struct mcp_ask *a = r->asks; a; a = a->next) {
				if (!a->legacy || strcmp(a->key, id) != 0)
					continue;
				mcp_ask_unlink(a);
				if (r->task)
					mcp_task_touch(r->task);
				answer(a, m->kind == JSONRPC_RESULT ? answer_outcome(m->result)
								    : "unavailable");
				mcp_ask_free(a);
				return;
			}
	}
}

void mcp_ask_update(struct mcp_run *r, const json_t *responses)
{
	for (struct mcp_ask *a = r->asks, *next; a; a = next) {
		const json_t *res = json_object_get(responses, a->key);

		next = a->next;
		if (!res) /* a partial answer: the rest stay open */
			continue;
		mcp_ask_unlink(a);
		mcp_task_touch(r->task);
		answer(a, answer_outcome(res));
		mcp_ask_free(a);
	}
}

json_t *mcp_ask_requests(const struct mcp_run *r)
{
	json_t *reqs = json_object();

	for (const struct mcp_ask *a = r->asks; reqs && a; a = a->next)
		if (json_object_set_new(reqs, a->key,
					json_pack("{ss sO}", "method", "elicitation/create",
						  "params", a->params)) < 0) {
			json_decref(reqs);
			return NULL;
		}
	return reqs;
}

/* The parked run of nonce, or NULL. */
static struct mcp_run *parked_find(struct mcp_server *srv, const unsigned char *nonce)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->parked && sodium_memcmp(r->nonce, nonce, MCP_STATE_NONCE) == 0)
				return r;
	return NULL;
}

bool mcp_server_state_here(struct mcp_server *srv, const char *text, size_t len)
{
	unsigned char raw[1 + MCP_STATE_NONCE];
	size_t n = 0;

	/* Only for where a retry is served: the state is verified there. */
	sodium_base642bin(raw, sizeof(raw), text, len, NULL, &n, NULL,
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return n == sizeof(raw) && parked_find(srv, raw + 1) != NULL;
}

/* The retry's state, verified for this client and this code and not
 * expired, into st; else the error is sent (and logged) and false. */
static bool retry_state(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req, const char *code, size_t len,
			struct mcp_state *st)
{
	const json_t *state = json_object_get(m->params, "requestState");
	const json_t *responses = json_object_get(m->params, "inputResponses");
	unsigned char digest[32];
	const char *no = NULL;
	int rc;

	mcp_code_digest(code, len, digest);
	if (!mcp_revision_has(req->rev, MCP_HAS_INPUT_REQUIRED))
		no = "requestState belongs to revision 2026-07-28";
	else if (!json_is_string(state))
		no = "requestState refused: malformed";
	else if (responses && !json_is_object(responses))
		no = "inputResponses must be an object";
	else if ((rc = mcp_state_decode(json_string_value(state), json_string_length(state),
					s->srv->key, s->p->client, digest, st)) == -EACCES) {
		log_line(LOG_WARN, NULL, "%s: refused a requestState that does not verify",
			 s->p->client);
		no = "requestState refused: it does not verify for this client and this code";
	} else if (rc < 0)
		no = "requestState refused: malformed";
	else if (wall_ms() >= st->expires_ms)
		no = "requestState refused: expired";
	if (no)
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, no);
	return !no;
}

/* Whether responses answers every question st asked now; else the
 * error is sent. The state is not used up by a retry refused here. */
static bool retry_answered(struct mcp_session *s, const struct jsonrpc_msg *m, struct mcp_state *st)
{
	const json_t *responses = json_object_get(m->params, "inputResponses");
	char msg[96];

	for (size_t i = 0; i < st->n; i++) {
		struct mcp_state_q *q = &st->q[i];
		const json_t *res = json_object_get(responses, q->key);

		if (q->was != MCP_STATE_ASKED)
			continue;
		if (!json_is_object(res)) {
			snprintf(msg, sizeof(msg), "inputResponses has no answer for %s", q->key);
			mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, msg);
			return false;
		}
		q->was = was_of(answer_outcome(res));
	}
	return true;
}

/* The verified retry's answers go to the questions they answer; a run
 * that asked again meanwhile is parked again. */
static void retry_answers(struct mcp_run *r, const json_t *responses)
{
	for (struct mcp_ask *a = r->asks, *next; a; a = next) {
		next = a->next;
		if (!a->sent || a->pre)
			continue;
		mcp_ask_unlink(a);
		answer(a, answer_outcome(json_object_get(responses, a->key)));
		mcp_ask_free(a);
	}
	log_line(LOG_INFO, r->label[0] ? r->label : NULL, "%s: input received; the run goes on",
		 r->s->p->client);
	if (r->asks) { /* asked again while it waited */
		if (r->can_elicit)
			park(r);
		else
			mcp_asks_end(r, "unavailable");
	}
}

/* The parked run r resumes under the retry's request. */
static void resume(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req, struct mcp_run *r)
{
	/* Verified: used up now, whatever follows. */
	r->parked = false;
	sodium_memzero(r->nonce, sizeof(r->nonce));
	loop_timer_set(r->expiry, 0);
	if (mcp_run_attach(r, req) < 0) {
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		r->parked = true; /* nobody to answer: it ends at its expiry */
		return;
	}
	if (r->owner_done) { /* it ended while it waited: its answer was kept */
		json_t *res = r->result;

		r->result = NULL;
		mcp_reply(s, r->id, r->rev, res);
		mcp_run_free(r);
	} else {
		retry_answers(r, json_object_get(m->params, "inputResponses"));
	}
	mcp_tick_arm(s->srv);
}

struct mcp_state *mcp_ask_retry(struct mcp_session *s, const struct jsonrpc_msg *m,
				const struct mcp_request *req, const char *code, size_t len)
{
	struct mcp_state *st = calloc(1, sizeof(*st));
	struct mcp_run *r;

	if (!st) {
		mcp_reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return NULL;
	}
	if (!retry_state(s, m, req, code, len, st)) {
		free(st);
		return NULL;
	}
	r = parked_find(s->srv, st->nonce);
	if (r && r->s == s) {
		if (retry_answered(s, m, st))
			resume(s, m, req, r);
		free(st);
		return NULL;
	}
	/* Not here: another replica's (with the shared key), or used or
	 * expired here. A replica runs the code anew, its answers given. */
	if (r || !s->srv->cluster) {
		log_line(LOG_WARN, NULL, "%s: refused a requestState that is unknown or used",
			 s->p->client);
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
				"requestState refused: unknown, already used, or expired");
		free(st);
		return NULL;
	}
	if (!retry_answered(s, m, st)) {
		free(st);
		return NULL;
	}
	log_line(LOG_INFO, NULL, "%s: a requestState made elsewhere: the run is replayed here",
		 s->p->client);
	return st;
}

void mcp_run_replay(struct mcp_run *r, struct mcp_state *st)
{
	if (!(r->answered = calloc(MCP_STATE_Q_MAX, sizeof(*r->answered)))) {
		free(st); /* its questions are asked again */
		return;
	}
	memcpy(r->chain, st->chain, sizeof(r->chain));
	r->chained = true;
	r->pre = st;
}
