/* ask.c: questions put to a run's client (write approvals): legacy
 * elicitation/create requests, and the 2026-07-28 InputRequiredResult with
 * its requestState, the run parked until the client's retry (see
 * session.h, mcp_run_ask). */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/internal.h"

/* A requestState: base64url (no padding) of nonce, expiry, MAC. */
#define STATE_RAW   (MCP_STATE_NONCE + 8u + STATE_MAC)
#define STATE_MAC   32u
#define STATE_TEXT  80u /* its text, unpadded base64url of STATE_RAW bytes, fits */
#define STATE_LABEL "appliance-request-state 1"
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

/* The MAC of a parked run's state, for the client and code digest given
 * (the retry's), over what the run keeps. */
static void state_mac(const struct mcp_run *r, const char *client, const unsigned char code[32],
		      uint64_t expires, unsigned char out[STATE_MAC])
{
	crypto_generichash_state st;
	unsigned char exp[8];

	for (int i = 0; i < 8; i++)
		exp[i] = (unsigned char)(expires >> (56 - 8 * i));
	crypto_generichash_init(&st, r->s->srv->key, sizeof(r->s->srv->key), STATE_MAC);
	crypto_generichash_update(&st, (const unsigned char *)STATE_LABEL, sizeof(STATE_LABEL));
	crypto_generichash_update(&st, r->nonce, sizeof(r->nonce));
	crypto_generichash_update(&st, exp, sizeof(exp));
	crypto_generichash_update(&st, (const unsigned char *)client, strlen(client) + 1);
	crypto_generichash_update(&st, (const unsigned char *)r->label, strlen(r->label) + 1);
	crypto_generichash_update(&st, code, 32);
	crypto_generichash_update(&st, r->asks_digest, sizeof(r->asks_digest));
	crypto_generichash_final(&st, out, STATE_MAC);
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

/* Answer r's request with input_required for every question not yet sent,
 * and park r: it has no request until the retry. */
static void park(struct mcp_run *r)
{
	struct mcp_server *srv = r->s->srv;
	unsigned char raw[STATE_RAW], mac[STATE_MAC];
	char text[STATE_TEXT];
	crypto_generichash_state st;
	json_t *reqs = json_object(), *res;
	struct appl_err err = {0};

	crypto_generichash_init(&st, NULL, 0, sizeof(r->asks_digest));
	for (struct mcp_ask *a = r->asks; a; a = a->next) {
		if (a->sent)
			continue;
		a->sent = true;
		json_object_set_new(
			reqs, a->key,
			json_pack("{ss sO}", "method", "elicitation/create", "params", a->params));
		crypto_generichash_update(&st, (const unsigned char *)a->key, strlen(a->key) + 1);
		crypto_generichash_update(&st, a->bind, sizeof(a->bind));
	}
	crypto_generichash_final(&st, r->asks_digest, sizeof(r->asks_digest));
	randombytes_buf(r->nonce, sizeof(r->nonce));
	r->expires = loop_now_ms() + r->timeout_ms + STATE_GRACE_MS;
	state_mac(r, r->s->p->client, r->code_digest, r->expires, mac);
	memcpy(raw, r->nonce, MCP_STATE_NONCE);
	for (int i = 0; i < 8; i++)
		raw[MCP_STATE_NONCE + i] = (unsigned char)(r->expires >> (56 - 8 * i));
	memcpy(raw + MCP_STATE_NONCE + 8, mac, STATE_MAC);
	sodium_bin2base64(text, sizeof(text), raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	res = reqs ? json_pack("{ss so ss}", "resultType", "input_required", "inputRequests", reqs,
			       "requestState", text)
		   : NULL;
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

struct mcp_ask *mcp_run_ask(struct mcp_run *r, const struct mcp_ask_spec *sp, char *why, size_t cap)
{
	struct mcp_session *s = r->s;
	bool modern = mcp_revision_has(r->rev, MCP_HAS_INPUT_REQUIRED);
	struct mcp_ask *a, **end;

	if (s->ended || r->owner_done) {
		snprintf(why, cap, "the client has gone");
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
	if (!(a = calloc(1, sizeof(*a))) || !(a->params = elicit_params(r->rev, sp->text))) {
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
		 (unsigned long long)++s->srv->asks);
	snprintf(r->label, sizeof(r->label), "%s", sp->label ? sp->label : "");
	r->timeout_ms = sp->timeout_ms;
	for (end = &r->asks; *end; end = &(*end)->next)
		;
	*end = a;
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
				a->fn(a->token, m->kind == JSONRPC_RESULT
							? answer_outcome(m->result)
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
		a->fn(a->token, answer_outcome(res));
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

/* The parked run whose state text names, or NULL. */
static struct mcp_run *parked_find(struct mcp_server *srv, const unsigned char *nonce)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->parked && sodium_memcmp(r->nonce, nonce, MCP_STATE_NONCE) == 0)
				return r;
	return NULL;
}

/* The parked run a retry's params name, checked for form, or NULL with the
 * error sent (why). */
static struct mcp_run *retry_find(struct mcp_session *s, const struct jsonrpc_msg *m,
				  const struct mcp_request *req, unsigned char raw[STATE_RAW])
{
	const json_t *state = json_object_get(m->params, "requestState");
	const json_t *responses = json_object_get(m->params, "inputResponses");
	const char *no = NULL;
	struct mcp_run *r = NULL;
	size_t n = 0;

	if (!mcp_revision_has(req->rev, MCP_HAS_INPUT_REQUIRED))
		no = "requestState belongs to revision 2026-07-28";
	else if (!json_is_string(state) || json_string_length(state) >= STATE_TEXT ||
		 sodium_base642bin(raw, STATE_RAW, json_string_value(state),
				   json_string_length(state), NULL, &n, NULL,
				   sodium_base64_VARIANT_URLSAFE_NO_PADDING) < 0 ||
		 n != STATE_RAW)
		no = "requestState refused: malformed";
	else if (responses && !json_is_object(responses))
		no = "inputResponses must be an object";
	else if (!(r = parked_find(s->srv, raw))) {
		log_line(LOG_WARN, NULL,
			 "%s: refused a requestState that is unknown, used or expired",
			 s->p->client);
		no = "requestState refused: unknown, already used, or expired";
	}
	if (no)
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, no);
	return no ? NULL : r;
}

/* Whether raw is r's state for this client and this code, unexpired, and
 * responses answers every question it asked; else the error is sent. */
static bool retry_verify(struct mcp_run *r, struct mcp_session *s, const struct jsonrpc_msg *m,
			 const unsigned char raw[STATE_RAW], const char *code, size_t len)
{
	const json_t *responses = json_object_get(m->params, "inputResponses");
	unsigned char mac[STATE_MAC], digest[32];
	uint64_t expires = 0;
	char msg[96];

	for (int i = 0; i < 8; i++)
		expires = expires << 8 | raw[MCP_STATE_NONCE + i];
	mcp_code_digest(code, len, digest);
	state_mac(r, s->p->client, digest, expires, mac);
	if (r->s != s || expires != r->expires ||
	    sodium_memcmp(mac, raw + MCP_STATE_NONCE + 8, STATE_MAC) != 0) {
		log_line(LOG_WARN, r->label[0] ? r->label : NULL,
			 "%s: refused a requestState that does not verify", s->p->client);
		mcp_reply_error(
			s, m->id, JSONRPC_INVALID_PARAMS,
			"requestState refused: it does not verify for this client and this code");
		return false;
	}
	if (loop_now_ms() >= r->expires) {
		mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "requestState refused: expired");
		return false;
	}
	for (struct mcp_ask *a = r->asks; a; a = a->next)
		if (a->sent && !json_is_object(json_object_get(responses, a->key))) {
			snprintf(msg, sizeof(msg), "inputResponses has no answer for %s", a->key);
			mcp_reply_error(s, m->id, JSONRPC_INVALID_PARAMS, msg);
			return false;
		}
	return true;
}

/* The verified retry's answers go to the questions they answer; a run
 * that asked again meanwhile is parked again. */
static void retry_answers(struct mcp_run *r, const json_t *responses)
{
	for (struct mcp_ask *a = r->asks, *next; a; a = next) {
		next = a->next;
		if (!a->sent)
			continue;
		mcp_ask_unlink(a);
		a->fn(a->token, answer_outcome(json_object_get(responses, a->key)));
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

void mcp_ask_retry(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req, const char *code, size_t len)
{
	unsigned char raw[STATE_RAW];
	struct mcp_run *r;

	if (!(r = retry_find(s, m, req, raw)) || !retry_verify(r, s, m, raw, code, len))
		return;
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
