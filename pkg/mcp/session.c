/* session.c: the MCP dispatch core (see session.h). */
#include "mcp/session.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/utf8.h"
#include "base/version.h"
#include "jsonrpc/jsonrpc.h"
#include "log/log.h"
#include "mcp/tool.h"

/* The per-request _meta keys of 2026-07-28 (more in session.h). */
#define META_CLIENT_INFO  "io.modelcontextprotocol/clientInfo"
#define META_SERVER_INFO  "io.modelcontextprotocol/serverInfo"
#define META_SUBSCRIPTION "io.modelcontextprotocol/subscriptionId"

/* Caching hints (modern era): the discover result is the same for every
 * client; the tool list is the role's. Changes are pushed to a client that
 * listens, so a minute's staleness only touches one that does not. */
#define MCP_TTL_MS 60000
/* Of a requested version that is not ours, at most this much is echoed. */
#define MCP_REQUESTED_ECHO_MAX 64u

/* A requestState: base64url (no padding) of nonce, expiry, MAC. */
#define STATE_NONCE 16u
#define STATE_MAC   32u
#define STATE_RAW   (STATE_NONCE + 8u + STATE_MAC)
#define STATE_TEXT  80u /* its text, unpadded base64url of STATE_RAW bytes, fits */
#define STATE_LABEL "appliance-request-state 1"
/* A parked run outlives its questions' timeout by this much, so that the
 * asker's refusal comes first and a retry in between still collects the
 * run's answer. */
#define STATE_GRACE_MS 2000u

#define MCP_INSTRUCTIONS                                                                           \
	"Run Python with run_python; its description lists the tools a program can call. "         \
	"Only what the program prints comes back."

struct mcp_ask {
	struct mcp_ask *next; /* the run's, oldest first */
	struct mcp_run *run;
	char key[32];	/* legacy: the request's id; modern: its inputRequests key */
	json_t *params; /* elicitation/create's */
	unsigned char bind[32];
	bool sent;   /* modern: in the InputRequiredResult the client holds */
	bool legacy; /* an elicitation/create request, answered by its id */
	mcp_answer_fn fn;
	void *token;
};

struct mcp_run {
	struct mcp_run *next, *prev;
	struct mcp_session *s;
	json_t *id; /* NULL while parked */
	const struct mcp_revision *rev;
	json_t *token;	/* progressToken, or NULL: no progress */
	uint64_t due;	/* when the next progress goes out */
	uint64_t last;	/* when the last one went */
	json_int_t seq; /* progress: rises by one each notification */
	void *data;
	unsigned char code_digest[32];
	bool can_elicit;      /* modern: the request's client has form elicitation */
	struct mcp_ask *asks; /* questions open, oldest first */
	char label[48];	      /* the owner's name for it, bound into requestState */
	unsigned timeout_ms;  /* how long a requestState lives */
	/* Parked (2026-07-28): the request was answered with input_required,
	 * and the run waits for the retry that carries requestState. */
	bool parked;
	unsigned char nonce[STATE_NONCE];
	unsigned char asks_digest[32]; /* the questions that state asked */
	uint64_t expires;
	struct loop_timer *expiry;
	bool owner_done; /* answered by the owner: result (when parked) waits */
	json_t *result;
};

struct listen {
	struct listen *next;
	json_t *id;
	bool tools; /* notifications/tools/list_changed asked for */
};

struct mcp_session {
	struct mcp_session *next, *prev;
	struct mcp_server *srv;
	struct mcp_transport t;
	const struct mcp_principal *p;
	const struct mcp_revision *legacy; /* initialize's pick; NULL before */
	json_t *legacy_caps;		   /* initialize's capabilities */
	bool initialized;		   /* notifications/initialized seen */
	int log_level; /* logging/setLevel's (an index of log_levels); -1: none */
	bool ended;
	struct mcp_run *runs;
	struct listen *listens;
	unsigned nlistens;
};

struct mcp_server {
	struct loop *loop;
	struct mcp_server_hooks hooks;
	struct mcp_session *sessions;
	struct loop_timer *tick;			/* the next progress notification */
	unsigned char key[crypto_generichash_KEYBYTES]; /* requestState's MAC key */
	uint64_t asks;					/* questions ever asked */
};

/* ---- sending ---------------------------------------------------------------- */

static void send_line(struct mcp_session *s, char *line, size_t len)
{
	if (!line)
		return;
	if (s->ended) {
		free(line);
		return;
	}
	s->t.send(s->t.t, line, len);
}

/* line belongs with the answer to related (may be NULL: anywhere). */
static void send_line_for(struct mcp_session *s, const json_t *related, char *line, size_t len)
{
	if (!line)
		return;
	if (s->ended) {
		free(line);
		return;
	}
	if (related && s->t.send_for)
		s->t.send_for(s->t.t, related, line, len);
	else
		s->t.send(s->t.t, line, len);
}

static void reply_error_data(struct mcp_session *s, const json_t *id, int code, const char *msg,
			     const json_t *data)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_error_encode(id, code, msg, data, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) == 0)
		send_line(s, line, len);
}

static void reply_error(struct mcp_session *s, const json_t *id, int code, const char *msg)
{
	reply_error_data(s, id, code, msg, NULL);
}

static json_t *server_info(void)
{
	return json_pack("{s:s,s:s}", "name", "appliance", "version", APPL_VERSION);
}

/* What rev puts on every result: resultType, serverInfo in _meta. */
static int result_shape(const struct mcp_revision *rev, json_t *result)
{
	int bad = 0;

	if (mcp_revision_has(rev, MCP_HAS_RESULT_TYPE) && !json_object_get(result, "resultType"))
		bad |= json_object_set_new(result, "resultType", json_string("complete"));
	if (mcp_revision_has(rev, MCP_HAS_RESULT_META_INFO))
		bad |= json_object_set_new(result, "_meta",
					   json_pack("{s:o}", META_SERVER_INFO, server_info()));
	return bad ? -ENOMEM : 0;
}

static void reply(struct mcp_session *s, const json_t *id, const struct mcp_revision *rev,
		  json_t *result /* steals */)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (!result || result_shape(rev, result) < 0) {
		json_decref(result);
		reply_error(s, id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	if (jsonrpc_result_encode(id, result, APPL_RPC_MESSAGE_MAX, &line, &len, &err) < 0)
		reply_error(s, id, JSONRPC_INTERNAL_ERROR,
			    err.code == -EFBIG ? "answer too large" : "out of memory");
	else
		send_line(s, line, len);
	json_decref(result);
}

static void notify_for(struct mcp_session *s, const json_t *related, const char *method,
		       const json_t *params)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_notification_encode(method, params, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) ==
	    0)
		send_line_for(s, related, line, len);
}

static void notify(struct mcp_session *s, const char *method, const json_t *params)
{
	notify_for(s, NULL, method, params);
}

/* ---- progress ---------------------------------------------------------------- */

static void tick_arm(struct mcp_server *srv)
{
	uint64_t now = loop_now_ms(), next = 0;

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && (!next || r->due < next))
				next = r->due;
	if (srv->tick)
		loop_timer_set(srv->tick, next ? (next > now ? next - now : 1) : 0);
}

static void progress_send(struct mcp_run *r, uint64_t now)
{
	struct mcp_server *srv = r->s->srv;
	struct mcp_progress p = {0};
	json_t *params;
	char *msg = NULL;

	if (srv->hooks.progress)
		srv->hooks.progress(r, &p, srv->hooks.data);
	params = json_pack("{s:O,s:I}", "progressToken", r->token, "progress", ++r->seq);
	if (params && mcp_revision_has(r->rev, MCP_HAS_PROGRESS_MESSAGE) &&
	    (msg = mcp_progress_message(&p)))
		json_object_set_new(params, "message", json_string(msg));
	free(msg);
	if (params)
		notify_for(r->s, r->id, "notifications/progress", params);
	json_decref(params);
	r->last = now;
	r->due = now + MCP_PROGRESS_EVERY_MS;
}

static void on_tick(void *data)
{
	struct mcp_server *srv = data;
	uint64_t now = loop_now_ms();

	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->token && r->due <= now)
				progress_send(r, now);
	tick_arm(srv);
}

void mcp_run_poke(struct mcp_run *r)
{
	uint64_t soon;

	if (!r->token)
		return;
	soon = r->last + MCP_PROGRESS_GAP_MS;
	if (soon < loop_now_ms())
		soon = loop_now_ms();
	if (soon < r->due) {
		r->due = soon;
		tick_arm(r->s->srv);
	}
}

/* ---- runs and subscriptions in flight ----------------------------------------- */

/* Whether caps (a client's capabilities) offer form elicitation: an
 * elicitation object that names neither mode means form. */
static bool can_form_elicit(const json_t *caps)
{
	const json_t *e = json_object_get(caps, "elicitation");

	if (!json_is_object(e))
		return false;
	if (!json_object_get(e, "form") && !json_object_get(e, "url"))
		return true;
	return json_is_object(json_object_get(e, "form"));
}

/* r answers req from now on: its id, revision, progress token. */
static int run_attach(struct mcp_run *r, const struct mcp_request *req)
{
	if (!(r->id = jsonrpc_id_copy(req->id)))
		return -ENOMEM;
	r->rev = req->rev;
	r->can_elicit = can_form_elicit(req->client_caps);
	json_decref(r->token);
	r->token = NULL;
	if (req->progress_token) {
		r->token = json_deep_copy(req->progress_token);
		r->last = loop_now_ms();
		r->due = r->last + MCP_PROGRESS_EVERY_MS;
	}
	return 0;
}

static void code_digest(const char *code, size_t len, unsigned char out[32])
{
	crypto_generichash(out, 32, (const unsigned char *)code, len, NULL, 0);
}

static struct mcp_run *run_new(struct mcp_session *s, const struct mcp_request *req,
			       const char *code, size_t len)
{
	struct mcp_run *r = calloc(1, sizeof(*r));

	if (!r || run_attach(r, req) < 0) {
		free(r);
		return NULL;
	}
	r->s = s;
	code_digest(code, len, r->code_digest);
	r->next = s->runs;
	if (s->runs)
		s->runs->prev = r;
	s->runs = r;
	if (r->token)
		tick_arm(s->srv);
	return r;
}

static void ask_free(struct mcp_ask *a)
{
	json_decref(a->params);
	free(a);
}

/* Take a off its run's list. */
static void ask_unlink(struct mcp_ask *a)
{
	for (struct mcp_ask **pa = &a->run->asks; *pa; pa = &(*pa)->next)
		if (*pa == a) {
			*pa = a->next;
			return;
		}
}

/* Every question r still has open is answered (outcome) and dropped. */
static void asks_end(struct mcp_run *r, const char *outcome)
{
	while (r->asks) {
		struct mcp_ask *a = r->asks;

		r->asks = a->next;
		a->fn(a->token, outcome);
		ask_free(a);
	}
}

static void run_free(struct mcp_run *r)
{
	struct mcp_session *s = r->s;

	asks_end(r, "cancelled");
	loop_timer_free(r->expiry);
	json_decref(r->result);
	if (r->prev)
		r->prev->next = r->next;
	else
		s->runs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	json_decref(r->id);
	json_decref(r->token);
	free(r);
}

static bool id_in_flight(const struct mcp_session *s, const json_t *id)
{
	for (const struct mcp_run *r = s->runs; r; r = r->next)
		if (r->id && jsonrpc_id_equal(r->id, id))
			return true;
	for (const struct listen *l = s->listens; l; l = l->next)
		if (jsonrpc_id_equal(l->id, id))
			return true;
	return false;
}

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
	memcpy(raw, r->nonce, STATE_NONCE);
	for (int i = 0; i < 8; i++)
		raw[STATE_NONCE + i] = (unsigned char)(r->expires >> (56 - 8 * i));
	memcpy(raw + STATE_NONCE + 8, mac, STATE_MAC);
	sodium_bin2base64(text, sizeof(text), raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	res = reqs ? json_pack("{ss so ss}", "resultType", "input_required", "inputRequests", reqs,
			       "requestState", text)
		   : NULL;
	reply(r->s, r->id, r->rev, res);
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
	tick_arm(srv);
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
	run_free(r);
	tick_arm(srv);
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
			     !can_form_elicit(s->legacy_caps)) {
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
	if (modern) {
		if (!r->parked)
			park(r);
		return a;
	}
	{
		json_t *id = json_string(a->key);
		char *line = NULL;
		size_t len = 0;

		if (id && jsonrpc_request_encode(id, "elicitation/create", a->params,
						 APPL_RPC_MESSAGE_MAX, &line, &len, NULL) == 0)
			send_line_for(s, r->id, line, len);
		json_decref(id);
	}
	return a;
}

void mcp_ask_cancel(struct mcp_ask *a)
{
	struct mcp_run *r = a->run;

	ask_unlink(a);
	if (a->legacy) {
		json_t *params =
			json_pack("{ss ss}", "requestId", a->key, "reason", "no answer in time");

		if (params)
			notify_for(r->s, r->id, "notifications/cancelled", params);
		json_decref(params);
	}
	ask_free(a);
}

/* A legacy client's answer to one of its elicitation/create requests. */
static void on_response(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const char *id = json_string_value(m->id);

	if (!id)
		return;
	for (struct mcp_run *r = s->runs; r; r = r->next)
		for (struct mcp_ask *a = r->asks; a; a = a->next) {
			if (!a->legacy || strcmp(a->key, id) != 0)
				continue;
			ask_unlink(a);
			a->fn(a->token, m->kind == JSONRPC_RESULT ? answer_outcome(m->result)
								  : "unavailable");
			ask_free(a);
			return;
		}
}

/* The parked run whose state text names, or NULL. */
static struct mcp_run *parked_find(struct mcp_server *srv, const unsigned char *nonce)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next)
		for (struct mcp_run *r = s->runs; r; r = r->next)
			if (r->parked && sodium_memcmp(r->nonce, nonce, STATE_NONCE) == 0)
				return r;
	return NULL;
}

/* A retry of a parked run (2026-07-28): params carry requestState and
 * inputResponses. Verified, single-use; then the run answers this request. */
static void on_retry(struct mcp_session *s, const struct jsonrpc_msg *m,
		     const struct mcp_request *req, const char *code, size_t len)
{
	const json_t *state = json_object_get(m->params, "requestState");
	const json_t *responses = json_object_get(m->params, "inputResponses");
	unsigned char raw[STATE_RAW], mac[STATE_MAC], digest[32];
	uint64_t expires = 0;
	size_t n = 0;
	struct mcp_run *r;

	if (!mcp_revision_has(req->rev, MCP_HAS_INPUT_REQUIRED)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "requestState belongs to revision 2026-07-28");
		return;
	}
	if (!json_is_string(state) || json_string_length(state) >= STATE_TEXT ||
	    sodium_base642bin(raw, sizeof(raw), json_string_value(state), json_string_length(state),
			      NULL, &n, NULL, sodium_base64_VARIANT_URLSAFE_NO_PADDING) < 0 ||
	    n != sizeof(raw)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "requestState refused: malformed");
		return;
	}
	if (responses && !json_is_object(responses)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "inputResponses must be an object");
		return;
	}
	if (!(r = parked_find(s->srv, raw))) {
		log_line(LOG_WARN, NULL,
			 "%s: refused a requestState that is unknown, used or expired",
			 s->p->client);
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "requestState refused: unknown, already used, or expired");
		return;
	}
	for (int i = 0; i < 8; i++)
		expires = expires << 8 | raw[STATE_NONCE + i];
	code_digest(code, len, digest);
	state_mac(r, s->p->client, digest, expires, mac);
	if (r->s != s || expires != r->expires ||
	    sodium_memcmp(mac, raw + STATE_NONCE + 8, STATE_MAC) != 0) {
		log_line(LOG_WARN, r->label[0] ? r->label : NULL,
			 "%s: refused a requestState that does not verify", s->p->client);
		reply_error(
			s, m->id, JSONRPC_INVALID_PARAMS,
			"requestState refused: it does not verify for this client and this code");
		return;
	}
	if (loop_now_ms() >= r->expires) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "requestState refused: expired");
		return;
	}
	for (struct mcp_ask *a = r->asks; a; a = a->next)
		if (a->sent && !json_is_object(json_object_get(responses, a->key))) {
			char msg[96];

			snprintf(msg, sizeof(msg), "inputResponses has no answer for %s", a->key);
			reply_error(s, m->id, JSONRPC_INVALID_PARAMS, msg);
			return;
		}
	/* Verified: used up now, whatever follows. */
	r->parked = false;
	sodium_memzero(r->nonce, sizeof(r->nonce));
	loop_timer_set(r->expiry, 0);
	if (run_attach(r, req) < 0) {
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		r->parked = true; /* nobody to answer: it ends at its expiry */
		return;
	}
	if (r->owner_done) { /* it ended while it waited: its answer was kept */
		json_t *res = r->result;

		r->result = NULL;
		reply(s, r->id, r->rev, res);
		run_free(r);
		tick_arm(s->srv);
		return;
	}
	for (struct mcp_ask *a = r->asks, *next; a; a = next) {
		next = a->next;
		if (!a->sent)
			continue;
		ask_unlink(a);
		a->fn(a->token, answer_outcome(json_object_get(responses, a->key)));
		ask_free(a);
	}
	log_line(LOG_INFO, r->label[0] ? r->label : NULL, "%s: input received; the run goes on",
		 s->p->client);
	if (r->asks) { /* asked again while it waited */
		if (r->can_elicit)
			park(r);
		else
			asks_end(r, "unavailable");
	}
	tick_arm(s->srv);
}

/* ---- methods ------------------------------------------------------------------ */

typedef void (*method_fn)(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req);

/* Tools, and lists of prompts and resources that are always empty (a
 * client that asks learns there are none); a legacy session can also set
 * the level of the log messages it hears about its runs. */
static json_t *capabilities(const struct mcp_revision *rev)
{
	json_t *c =
		json_pack("{s:{s:b},s:{},s:{}}", "tools", "listChanged", 1, "prompts", "resources");

	if (c && mcp_revision_has(rev, MCP_HAS_SET_LEVEL) &&
	    json_object_set_new(c, "logging", json_object())) {
		json_decref(c);
		return NULL;
	}
	return c;
}

/* The levels of logging/setLevel, least severe first. */
static const char *const log_levels[] = {"debug", "info",     "notice", "warning",
					 "error", "critical", "alert",	"emergency"};
#define LOG_LEVEL_INFO	  1
#define LOG_LEVEL_WARNING 3

/* What run r came to, as a log message to its client (about r's request)
 * when the client set a level that lets it through. */
static void run_log(struct mcp_run *r, const struct cell_outcome *o, const char *failure)
{
	struct mcp_session *s = r->s;
	int level = failure || (o && cell_outcome_is_error(o)) ? LOG_LEVEL_WARNING : LOG_LEVEL_INFO;
	json_t *params;

	if (s->log_level < 0 || level < s->log_level ||
	    !mcp_revision_has(r->rev, MCP_HAS_SET_LEVEL))
		return;
	params = o ? json_pack("{s:s,s:s,s:{s:s,s:s?,s:I,s:I}}", "level", log_levels[level],
			       "logger", "appliance", "data", "run", r->label, "reason",
			       cell_reason_name(o->reason), "calls", (json_int_t)o->calls,
			       "duration_ms", (json_int_t)o->duration_ms)
		   : json_pack("{s:s,s:s,s:{s:s,s:s}}", "level", log_levels[level], "logger",
			       "appliance", "data", "run", r->label, "failure", failure);
	if (params)
		notify_for(s, r->id, "notifications/message", params);
	json_decref(params);
}

static void m_set_level(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	const char *level = json_string_value(json_object_get(m->params, "level"));

	for (size_t i = 0; level && i < sizeof(log_levels) / sizeof(log_levels[0]); i++)
		if (strcmp(level, log_levels[i]) == 0) {
			s->log_level = (int)i;
			reply(s, m->id, req->rev, json_object());
			return;
		}
	reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
		    "level must be one of debug, info, notice, warning, error, critical, alert, "
		    "emergency");
}

/* ttlMs and cacheScope on res (a list) where the revision has them. -1
 * (res freed) on out of memory. */
static int cache_hints(const struct mcp_request *req, json_t *res, const char *scope)
{
	if (res && mcp_revision_has(req->rev, MCP_HAS_CACHE_HINTS) &&
	    (json_object_set_new(res, "ttlMs", json_integer(MCP_TTL_MS)) ||
	     json_object_set_new(res, "cacheScope", json_string(scope)))) {
		json_decref(res);
		return -1;
	}
	return 0;
}

/* prompts/list, resources/list and resources/templates/list: always empty,
 * the same for every client. */
static void empty_list(struct mcp_session *s, const struct jsonrpc_msg *m,
		       const struct mcp_request *req, const char *key)
{
	json_t *res;

	if (json_object_get(m->params, "cursor")) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	res = json_pack("{s:[]}", key);
	reply(s, m->id, req->rev, cache_hints(req, res, "public") ? NULL : res);
}

static void m_prompts_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			   const struct mcp_request *req)
{
	empty_list(s, m, req, "prompts");
}

static void m_resources_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	empty_list(s, m, req, "resources");
}

static void m_templates_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	empty_list(s, m, req, "resourceTemplates");
}

static void m_prompts_get(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req)
{
	(void)req;
	reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "Unknown prompt: the appliance offers none");
}

/* resources/read: there is none; the error names the URI asked for (cut
 * like any echo). */
static void m_resources_read(struct mcp_session *s, const struct jsonrpc_msg *m,
			     const struct mcp_request *req)
{
	const char *uri = json_string_value(json_object_get(m->params, "uri"));
	json_t *data =
		uri ? json_pack("{s:s%}", "uri", uri,
				appl_utf8_boundary(uri, strnlen(uri, MCP_REQUESTED_ECHO_MAX)))
		    : NULL;
	(void)req;

	reply_error_data(s, m->id, JSONRPC_INVALID_PARAMS,
			 "Resource not found: the appliance offers none", data);
	json_decref(data);
}

static void m_initialize(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const json_t *asked = json_object_get(m->params, "protocolVersion");
	const json_t *caps = json_object_get(m->params, "capabilities");
	const struct mcp_revision *rev;
	(void)req;

	if (!json_is_object(m->params) || !json_is_string(asked)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "initialize needs protocolVersion");
		return;
	}
	if (s->legacy) {
		reply_error(s, m->id, JSONRPC_INVALID_REQUEST, "already initialized");
		return;
	}
	/* Not a legacy revision we speak: answer with the newest; the client
	 * decides. */
	rev = mcp_revision_find(json_string_value(asked), MCP_ERA_LEGACY);
	if (!rev)
		rev = mcp_revision_latest(MCP_ERA_LEGACY);
	s->legacy = rev;
	log_line(LOG_INFO, NULL, "%s: initialize: revision %s", s->p->client, rev->name);
	s->legacy_caps = json_is_object(caps) ? json_deep_copy(caps) : json_object();
	reply(s, m->id, rev,
	      json_pack("{s:s,s:o,s:o,s:s}", "protocolVersion", rev->name, "capabilities",
			capabilities(rev), "serverInfo", server_info(), "instructions",
			MCP_INSTRUCTIONS));
}

static void m_ping(struct mcp_session *s, const struct jsonrpc_msg *m,
		   const struct mcp_request *req)
{
	reply(s, m->id, req->rev, json_object());
}

static void m_discover(struct mcp_session *s, const struct jsonrpc_msg *m,
		       const struct mcp_request *req)
{
	reply(s, m->id, req->rev,
	      json_pack("{s:o,s:o,s:s,s:i,s:s}", "supportedVersions",
			mcp_revision_names(MCP_ERA_MODERN | MCP_ERA_LEGACY), "capabilities",
			capabilities(req->rev), "instructions", MCP_INSTRUCTIONS, "ttlMs",
			MCP_TTL_MS, "cacheScope", "public"));
}

static void m_tools_list(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	const char *desc = h->description ? h->description(s->p->role, h->data) : "";
	json_t *tool, *res;

	/* One page: no cursor was ever given out. */
	if (json_object_get(m->params, "cursor")) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
		return;
	}
	tool = mcp_tool_object(req->rev, desc);
	res = tool ? json_pack("{s:[o]}", "tools", tool) : NULL;
	reply(s, m->id, req->rev, cache_hints(req, res, "private") ? NULL : res);
}

/* tools/call: only run_python exists. An unknown tool is a protocol error;
 * bad arguments are a tool error the model can read and fix (MCP asks for
 * input errors as tool results). */
static void m_tools_call(struct mcp_session *s, const struct jsonrpc_msg *m,
			 const struct mcp_request *req)
{
	const json_t *name = json_object_get(m->params, "name");
	const json_t *args = json_object_get(m->params, "arguments");
	const json_t *code = json_object_get(args, "code");
	struct mcp_run *r;

	if (!json_is_object(m->params) || !json_is_string(name)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "tools/call needs a tool name");
		return;
	}
	if (strcmp(json_string_value(name), MCP_TOOL_NAME) != 0) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "Unknown tool: only run_python exists");
		return;
	}
	if (!json_is_object(args) || json_object_size(args) != 1 || !json_is_string(code)) {
		reply(s, m->id, req->rev,
		      mcp_tool_text_result("run_python takes exactly one argument, code (a string)",
					   1));
		return;
	}
	if (json_string_length(code) > APPL_CELL_CODE_MAX) {
		reply(s, m->id, req->rev,
		      mcp_tool_text_result("code is longer than the cap of 262144 bytes", 1));
		return;
	}
	if (json_object_get(m->params, "requestState")) {
		on_retry(s, m, req, json_string_value(code), json_string_length(code));
		return;
	}
	if (!(r = run_new(s, req, json_string_value(code), json_string_length(code)))) {
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	s->srv->hooks.on_run(r, req, json_string_value(code), json_string_length(code),
			     s->srv->hooks.data);
}

/* subscriptions/listen: the request stays open; its first message is the
 * acknowledgement of what is honoured (only the tool list changes here). */
static void m_listen(struct mcp_session *s, const struct jsonrpc_msg *m,
		     const struct mcp_request *req)
{
	const json_t *want = json_object_get(m->params, "notifications");
	struct listen *l;
	json_t *ack;
	(void)req;

	if (!json_is_object(want)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "subscriptions/listen needs notifications (an object)");
		return;
	}
	if (s->nlistens >= MCP_LISTENS_MAX) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "too many open subscriptions");
		return;
	}
	l = calloc(1, sizeof(*l));
	if (!l || !(l->id = jsonrpc_id_copy(m->id))) {
		free(l);
		reply_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	l->tools = json_is_true(json_object_get(want, "toolsListChanged"));
	l->next = s->listens;
	s->listens = l;
	s->nlistens++;
	ack = json_pack("{s:{s:O},s:{}}", "_meta", META_SUBSCRIPTION, l->id, "notifications");
	if (ack && l->tools)
		json_object_set_new(json_object_get(ack, "notifications"), "toolsListChanged",
				    json_true());
	if (ack)
		notify_for(s, l->id, "notifications/subscriptions/acknowledged", ack);
	json_decref(ack);
}

static void n_initialized(struct mcp_session *s, const struct jsonrpc_msg *m,
			  const struct mcp_request *req)
{
	(void)m;
	(void)req;
	if (s->legacy)
		s->initialized = true;
}

static void n_cancelled(struct mcp_session *s, const struct jsonrpc_msg *m,
			const struct mcp_request *req)
{
	const json_t *id = json_object_get(m->params, "requestId");
	(void)req;

	if (!id)
		return;
	for (struct mcp_run *r = s->runs; r; r = r->next) {
		if (!jsonrpc_id_equal(r->id, id))
			continue;
		if (s->srv->hooks.on_cancel)
			s->srv->hooks.on_cancel(r, s->srv->hooks.data);
		run_free(r);
		tick_arm(s->srv);
		return;
	}
	for (struct listen **pl = &s->listens; *pl; pl = &(*pl)->next) {
		struct listen *l = *pl;

		if (!jsonrpc_id_equal(l->id, id))
			continue;
		*pl = l->next;
		s->nlistens--;
		json_decref(l->id);
		free(l);
		return;
	}
}

#define ERA_BOTH (MCP_ERA_LEGACY | MCP_ERA_MODERN)

static const struct method {
	const char *name;
	bool request;	 /* a request (answered) or a notification */
	unsigned eras;	 /* the eras it belongs to */
	bool needs_init; /* legacy: only once initialized */
	bool tools;	 /* it needs the owner's tools (the hold hook) */
	method_fn fn;
} methods[] = {
	{"initialize", true, MCP_ERA_LEGACY, false, false, m_initialize},
	{"ping", true, MCP_ERA_LEGACY, false, false, m_ping},
	{"server/discover", true, MCP_ERA_MODERN, false, false, m_discover},
	{"tools/list", true, ERA_BOTH, true, true, m_tools_list},
	{"tools/call", true, ERA_BOTH, true, true, m_tools_call},
	{"subscriptions/listen", true, MCP_ERA_MODERN, false, false, m_listen},
	{"prompts/list", true, ERA_BOTH, true, false, m_prompts_list},
	{"prompts/get", true, ERA_BOTH, true, false, m_prompts_get},
	{"resources/list", true, ERA_BOTH, true, false, m_resources_list},
	{"resources/templates/list", true, ERA_BOTH, true, false, m_templates_list},
	{"resources/read", true, ERA_BOTH, true, false, m_resources_read},
	{"logging/setLevel", true, MCP_ERA_LEGACY, true, false, m_set_level},
	{"notifications/initialized", false, MCP_ERA_LEGACY, false, false, n_initialized},
	{"notifications/cancelled", false, ERA_BOTH, false, false, n_cancelled},
};

static const struct method *method_find(const char *name, bool request)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (methods[i].request == request && strcmp(methods[i].name, name) == 0)
			return &methods[i];
	return NULL;
}

/* ---- a request's era and revision ------------------------------------------------ */

static void unsupported_version(struct mcp_session *s, const json_t *id, const char *asked)
{
	size_t n = appl_utf8_boundary(asked, strnlen(asked, MCP_REQUESTED_ECHO_MAX));
	json_t *data = json_pack("{s:o,s:s%}", "supported",
				 mcp_revision_names(MCP_ERA_MODERN | MCP_ERA_LEGACY), "requested",
				 asked, n);

	reply_error_data(s, id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version", data);
	json_decref(data);
}

/* Fill req for m: modern when its _meta carries the per-request keys,
 * legacy otherwise. 0, or -1 when m was refused (answered). */
static int classify(struct mcp_session *s, const struct jsonrpc_msg *m, struct mcp_request *req)
{
	const json_t *meta = json_is_object(m->params) ? json_object_get(m->params, "_meta") : NULL;
	const json_t *version, *caps, *info, *token;

	memset(req, 0, sizeof(*req));
	req->session = s;
	req->principal = s->p;
	req->id = m->id;
	if (meta && !json_is_object(meta)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS, "_meta must be an object");
		return -1;
	}
	req->meta = meta;
	/* A token is kept while its run lasts and echoed in every report:
	 * capped like an id. */
	token = json_object_get(meta, "progressToken");
	if (token && !jsonrpc_id_valid(token)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta.progressToken must be an integer or a string of at most 256 "
			    "bytes");
		return -1;
	}
	req->progress_token = token;
	version = json_object_get(meta, META_VERSION);
	caps = json_object_get(meta, META_CAPS);
	if (!version && !caps) {
		req->rev = s->legacy;
		req->client_caps = s->legacy_caps;
		return 0;
	}
	info = json_object_get(meta, META_CLIENT_INFO);
	if (!json_is_string(version)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta needs " META_VERSION " (a string)");
		return -1;
	}
	if (!json_is_object(caps)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta needs " META_CAPS " (an object)");
		return -1;
	}
	if (info && !json_is_object(info)) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "_meta's " META_CLIENT_INFO " must be an object");
		return -1;
	}
	req->rev = mcp_revision_find(json_string_value(version), MCP_ERA_MODERN);
	if (!req->rev) {
		unsupported_version(s, m->id, json_string_value(version));
		return -1;
	}
	req->client_caps = caps;
	return 0;
}

/* Returns true when m was held (the hold hook): nothing was answered. */
static bool on_request(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct mcp_server_hooks *h = &s->srv->hooks;
	const struct method *meth;
	struct mcp_request req;
	enum mcp_era era;
	char msg[160];

	/* One answer per id: a second request under an id still in flight is
	 * refused without its id, so the first keeps its own answer. */
	if (id_in_flight(s, m->id)) {
		log_line(LOG_WARN, NULL, "%s: refused a request reusing the id of one in flight",
			 s->p->client);
		reply_error(s, NULL, JSONRPC_INVALID_REQUEST,
			    "the request's id is already used by a request in flight");
		return false;
	}
	if (classify(s, m, &req) < 0)
		return false;
	era = req.meta && json_object_get(req.meta, META_VERSION) ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	meth = method_find(m->method, true);
	if (!meth) {
		reply_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
		return false;
	}
	if (!(meth->eras & era)) {
		if (era == MCP_ERA_MODERN)
			snprintf(msg, sizeof(msg), "%s is not part of revision %s", meth->name,
				 req.rev->name);
		else
			snprintf(msg, sizeof(msg), "%s needs _meta with " META_VERSION, meth->name);
		reply_error(s, m->id,
			    era == MCP_ERA_MODERN ? JSONRPC_METHOD_NOT_FOUND
						  : JSONRPC_INVALID_PARAMS,
			    msg);
		return false;
	}
	if (era == MCP_ERA_LEGACY && meth->needs_init && !s->legacy) {
		reply_error(s, m->id, JSONRPC_INVALID_PARAMS,
			    "not initialized: send initialize first, or name the revision in "
			    "_meta (" META_VERSION ")");
		return false;
	}
	if (meth->tools && h->hold && h->hold(h->data))
		return true;
	if (!req.rev) /* legacy, before initialize: ping */
		req.rev = mcp_revision_latest(MCP_ERA_LEGACY);
	meth->fn(s, m, &req);
	return false;
}

static void on_notification(struct mcp_session *s, const struct jsonrpc_msg *m)
{
	const struct method *meth = method_find(m->method, false);
	struct mcp_request req = {.session = s, .principal = s->p};

	/* Unknown notifications are ignored, as JSON-RPC says. */
	if (meth)
		meth->fn(s, m, &req);
}

bool mcp_session_input(struct mcp_session *s, const char *line, size_t len)
{
	struct jsonrpc_msg m = {0};
	struct appl_err err = {0};
	bool held = false;

	if (s->ended || len == 0 || (len == 1 && line[0] == '\r'))
		return false;
	if (jsonrpc_msg_parse(line, len, APPL_RPC_MESSAGE_MAX, &m, &err) < 0)
		reply_error(s, m.id, m.fail ? m.fail : JSONRPC_INVALID_REQUEST, err.msg);
	else if (m.kind == JSONRPC_REQUEST)
		held = on_request(s, &m);
	else if (m.kind == JSONRPC_NOTIFICATION)
		on_notification(s, &m);
	else if (m.kind == JSONRPC_RESULT || m.kind == JSONRPC_ERROR)
		on_response(s, &m); /* to a question it was asked; others are ignored */
	jsonrpc_msg_clear(&m);
	return held;
}

void mcp_session_refuse(struct mcp_session *s, const char *line, size_t len, const char *why)
{
	json_t *id = jsonrpc_id_sniff(line, len);

	reply_error(s, id, JSONRPC_INTERNAL_ERROR, why);
	json_decref(id);
}

/* A message over the cap is never held: its first bytes give the id (when
 * they hold one) for the error, and the session, the runs in flight
 * included, goes on. */
void mcp_session_overlong(struct mcp_session *s, const char *head, size_t len)
{
	json_t *id = jsonrpc_id_sniff(head, len);
	char msg[128];

	snprintf(msg, sizeof(msg), "message longer than the cap of %u bytes",
		 (unsigned)APPL_RPC_MESSAGE_MAX);
	log_line(LOG_WARN, NULL, "%s: dropped a %s, unread; answered with an error%s", s->p->client,
		 msg, id ? "" : " (no id before the cap)");
	reply_error(s, id, JSONRPC_INVALID_REQUEST, msg);
	json_decref(id);
}

void mcp_session_ended(struct mcp_session *s, const char *why)
{
	if (s->ended)
		return;
	s->ended = true;
	if (s->srv->hooks.on_closed)
		s->srv->hooks.on_closed(s, why, s->srv->hooks.data);
}

/* ---- lifetimes -------------------------------------------------------------------- */

struct mcp_server *mcp_server_new(struct loop *loop, const struct mcp_server_hooks *hooks,
				  struct appl_err *err)
{
	struct mcp_server *srv;

	if (sodium_init() < 0) {
		appl_err_set(err, -EIO, "libsodium could not start");
		return NULL;
	}
	if (!(srv = calloc(1, sizeof(*srv)))) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	srv->loop = loop;
	srv->hooks = *hooks;
	randombytes_buf(srv->key, sizeof(srv->key));
	if (!(srv->tick = loop_timer_new(loop, on_tick, srv, err))) {
		free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_free(struct mcp_server *srv)
{
	if (!srv)
		return;
	loop_timer_free(srv->tick);
	sodium_memzero(srv->key, sizeof(srv->key));
	free(srv);
}

struct mcp_session *mcp_session_new(struct mcp_server *srv, const struct mcp_transport *t,
				    const struct mcp_principal *p, struct appl_err *err)
{
	struct mcp_session *s = calloc(1, sizeof(*s));

	if (!s) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	s->srv = srv;
	s->t = *t;
	s->p = p;
	s->log_level = -1;
	s->next = srv->sessions;
	if (srv->sessions)
		srv->sessions->prev = s;
	srv->sessions = s;
	return s;
}

void mcp_session_free(struct mcp_session *s)
{
	struct mcp_server *srv;

	if (!s)
		return;
	srv = s->srv;
	s->ended = true;
	while (s->runs) {
		if (!s->runs->owner_done && srv->hooks.on_cancel)
			srv->hooks.on_cancel(s->runs, srv->hooks.data);
		run_free(s->runs);
	}
	while (s->listens) {
		struct listen *l = s->listens;

		s->listens = l->next;
		json_decref(l->id);
		free(l);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		srv->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	json_decref(s->legacy_caps);
	free(s);
	tick_arm(srv);
}

/* ---- answers ------------------------------------------------------------------------ */

/* The owner's answer for run: sent, or kept for the retry of a parked
 * run. */
static void run_answer(struct mcp_run *run, json_t *result /* steals */)
{
	struct mcp_session *s = run->s;

	if (run->parked) {
		asks_end(run, "cancelled");
		run->owner_done = true;
		json_decref(run->result);
		run->result = result;
		return;
	}
	reply(s, run->id, run->rev, result);
	run_free(run);
	tick_arm(s->srv);
}

void mcp_run_finish(struct mcp_run *run, const struct cell_outcome *o)
{
	run_log(run, o, NULL);
	run_answer(run, mcp_tool_result(run->rev, o));
}

void mcp_run_fail(struct mcp_run *run, const char *text)
{
	run_log(run, NULL, text);
	run_answer(run, mcp_tool_text_result(text, 1));
}

void mcp_run_set_data(struct mcp_run *run, void *data)
{
	run->data = data;
}

void *mcp_run_data(const struct mcp_run *run)
{
	return run->data;
}

static bool same_role(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

void mcp_server_tools_changed(struct mcp_server *srv, const char *role)
{
	for (struct mcp_session *s = srv->sessions; s; s = s->next) {
		if (s->ended || !same_role(s->p->role, role))
			continue;
		if (s->initialized)
			notify(s, "notifications/tools/list_changed", NULL);
		for (struct listen *l = s->listens; l; l = l->next) {
			json_t *params;

			if (!l->tools)
				continue;
			params = json_pack("{s:{s:O}}", "_meta", META_SUBSCRIPTION, l->id);
			if (params)
				notify_for(s, l->id, "notifications/tools/list_changed", params);
			json_decref(params);
		}
	}
}
