/* ledger.c: claims and values in Redis, for the replicas (see ledger.h). */
#include "ledger/ledger.h"

#include <errno.h>
#include <hiredis/hiredis.h> /* redisReply and its types only */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ledger/conn.h"
#include "ledger/url.h"

#define KEY_PREFIX     "appliance:ledger:"
#define KEY_PREFIX_LEN (sizeof(KEY_PREFIX) - 1)
#define KEY_TEXT_MAX   (KEY_PREFIX_LEN + 2 * LEDGER_KEY_MAX)
/* Not hex after the prefix: never a caller's key. */
#define PROBE_KEY	"appliance:ledger:probe"
#define TOKEN_LEN	16u
#define MARK_LEN	(1u + TOKEN_LEN) /* 'C' and the token */
#define TAG_CLAIM	'C'
#define TAG_VALUE	'V'
#define SERVER_TEXT_MAX 80u /* of an error reply, quoted to the caller */

enum kind { K_CLAIM, K_PUT, K_PROBE };
enum where { W_NONE, W_FLIGHT, W_DONE };

struct ledger_req {
	struct ledger_req *prev, *next; /* on l->flight or l->done */
	enum kind kind;
	enum where where;
	bool in_redis; /* hiredis holds it (as its command's tag) */
	bool over;     /* the caller is done with it: answered or cancelled */
	bool counted;  /* in l->count */
	uint64_t deadline;
	size_t put_bytes; /* in l->put_bytes while in_redis */
	ledger_claim_cb claim_cb;
	ledger_put_cb put_cb;
	void *data;
	/* the answer, until it is delivered */
	enum ledger_claim outcome;
	bool ok;
	unsigned char *value; /* TAKEN's value, a copy; NULL: none */
	size_t vlen;
	char why[LEDGER_WHY_MAX];
};

struct rlist {
	struct ledger_req *head, *tail;
};

struct ledger {
	struct loop *loop;
	struct ledger_conn *conn;
	/* Sent, by deadline: every command has the same timeout, so the order
	 * they were sent in is the order they expire in. */
	struct rlist flight;
	struct rlist done; /* answered, waiting for the deliver task */
	struct loop_timer *deadline_timer, *probe_timer;
	struct loop_task deliver;
	struct ledger_req *probe; /* the probe in flight, or NULL */
	bool probe_armed;
	unsigned count;	  /* callers' commands hiredis holds, timed out ones too */
	size_t put_bytes; /* of values hiredis holds */
	bool last_ok;
	bool delivering, free_asked, closing;
	unsigned char mark[MARK_LEN]; /* what our claims store */
};

/* ---- lists ------------------------------------------------------------------ */

static void list_push(struct rlist *q, struct ledger_req *r)
{
	r->next = NULL;
	r->prev = q->tail;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
}

static void list_unlink(struct rlist *q, struct ledger_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		q->head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		q->tail = r->prev;
	r->prev = r->next = NULL;
}

static void req_unlink(struct ledger *l, struct ledger_req *r)
{
	if (r->where == W_FLIGHT)
		list_unlink(&l->flight, r);
	else if (r->where == W_DONE)
		list_unlink(&l->done, r);
	r->where = W_NONE;
}

static void req_free(struct ledger *l, struct ledger_req *r)
{
	if (r->counted)
		l->count--;
	free(r->value);
	free(r);
}

/* ---- answers ------------------------------------------------------------------ */

static void fail(struct ledger_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct ledger_req *r, const char *fmt, ...)
{
	va_list ap;

	r->outcome = LEDGER_ERROR;
	r->ok = false;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
}

static void done_push(struct ledger *l, struct ledger_req *r)
{
	r->where = W_DONE;
	list_push(&l->done, r);
	loop_defer(l->loop, &l->deliver);
}

/* An error reply's text is the server's: quoted short, printable only. */
static void server_refused(struct ledger_req *r, const redisReply *rep)
{
	char text[SERVER_TEXT_MAX + 1];
	size_t n = 0;

	for (; rep->str && n < rep->len && n < SERVER_TEXT_MAX; n++)
		text[n] = rep->str[n] >= 0x20 && rep->str[n] < 0x7f ? rep->str[n] : '?';
	text[n] = '\0';
	fail(r, "the server refused: %s", text);
}

/* A claim's reply: true when it was one a Redis gives (the server works). */
static bool claim_reply(struct ledger_req *r, const redisReply *rep)
{
	if (rep->type == REDIS_REPLY_NIL) {
		r->outcome = LEDGER_CLAIMED;
		return true;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		server_refused(r, rep);
		return false;
	}
	if (rep->type != REDIS_REPLY_STRING || !rep->str) {
		fail(r, "an answer of the wrong type");
		return false;
	}
	/* resp.c capped it; a length is checked where it is used all the same */
	if (rep->len > LEDGER_BULK_MAX)
		fail(r, "a value over the ledger's cap (LEDGER_VALUE_MAX)");
	else if (rep->len == MARK_LEN && rep->str[0] == TAG_CLAIM)
		r->outcome = LEDGER_TAKEN; /* claimed, no value yet */
	else if (rep->len >= 1 && rep->str[0] == TAG_VALUE) {
		if (!(r->value = malloc(rep->len))) {
			fail(r, "out of memory");
			return true;
		}
		r->vlen = rep->len - 1;
		memcpy(r->value, rep->str + 1, r->vlen);
		r->value[r->vlen] = '\0';
		r->outcome = LEDGER_TAKEN;
	} else
		fail(r, "the key holds what this ledger did not write");
	return true;
}

static bool put_reply(struct ledger *l, struct ledger_req *r, const redisReply *rep)
{
	r->ok = false;
	if (rep->type == REDIS_REPLY_NIL) {
		snprintf(r->why, sizeof(r->why),
			 "the key was gone (its claim expired): not stored");
		return true;
	}
	if (rep->type == REDIS_REPLY_ERROR) {
		server_refused(r, rep);
		return false;
	}
	if (rep->type != REDIS_REPLY_STRING || !rep->str) {
		fail(r, "an answer of the wrong type");
		return false;
	}
	if (rep->len == MARK_LEN && !memcmp(rep->str, l->mark, MARK_LEN)) {
		r->ok = true;
		snprintf(r->why, sizeof(r->why), "stored");
	} else if (rep->len == MARK_LEN && rep->str[0] == TAG_CLAIM)
		snprintf(r->why, sizeof(r->why),
			 "another replica had claimed the key (ours had expired): overwritten");
	else if (rep->len >= 1 && rep->str[0] == TAG_VALUE)
		snprintf(r->why, sizeof(r->why), "the key held a value already: overwritten");
	else
		snprintf(r->why, sizeof(r->why),
			 "the key held what this ledger did not write: overwritten");
	return true;
}

/* ---- readiness: the probe --------------------------------------------------- */

static void arm_probe(struct ledger *l)
{
	if (l->probe || l->probe_armed || l->closing || !ledger_conn_open(l->conn))
		return;
	l->probe_armed = loop_timer_set(l->probe_timer, LEDGER_PROBE_MS) == 0;
}

static void set_ok(struct ledger *l, bool ok)
{
	l->last_ok = ok;
	if (!ok)
		arm_probe(l);
}

static void arm_deadline(struct ledger *l)
{
	uint64_t now = loop_now_ms();
	struct ledger_req *r = l->flight.head;

	loop_timer_set(l->deadline_timer, !r ? 0 : r->deadline > now ? r->deadline - now : 1);
}

/* Send r's command; on the flight list, its deadline set. */
static int req_send(struct ledger *l, struct ledger_req *r, int argc, const char **argv,
		    const size_t *lens)
{
	int rc = ledger_conn_send(l->conn, argc, argv, lens, r);

	if (rc < 0)
		return rc;
	r->in_redis = true;
	r->deadline = loop_now_ms() + LEDGER_TIMEOUT_MS;
	r->where = W_FLIGHT;
	list_push(&l->flight, r);
	if (l->flight.head == r)
		arm_deadline(l);
	return 0;
}

static void send_probe(struct ledger *l)
{
	const char *argv[5] = {"SET", PROBE_KEY, (const char *)l->mark, "PX", NULL};
	size_t lens[5] = {3, sizeof(PROBE_KEY) - 1, MARK_LEN, 2, 0};
	char ttl[16];
	struct ledger_req *r;

	if (l->probe || l->closing || !ledger_conn_open(l->conn))
		return;
	lens[4] = (size_t)snprintf(ttl, sizeof(ttl), "%u", LEDGER_PROBE_TTL_MS);
	argv[4] = ttl;
	if ((r = calloc(1, sizeof(*r))))
		r->kind = K_PROBE;
	if (!r || req_send(l, r, 5, argv, lens) < 0) {
		free(r);
		arm_probe(l);
		return;
	}
	l->probe = r;
}

static void probe_reply(struct ledger *l, struct ledger_req *r, const redisReply *rep)
{
	bool over = r->over;

	if (l->probe == r)
		l->probe = NULL;
	req_unlink(l, r);
	req_free(l, r);
	if (over || !rep) /* timed out (being dropped), closing, or the connection is gone */
		return;
	if (rep->type == REDIS_REPLY_STATUS && rep->len == 2 && !memcmp(rep->str, "OK", 2)) {
		l->last_ok = true;
		ledger_conn_good(l->conn);
		return;
	}
	set_ok(l, false); /* a read-only replica, a full server, one loading */
}

static void on_probe_timer(void *data)
{
	struct ledger *l = data;

	l->probe_armed = false;
	if (!l->last_ok)
		send_probe(l);
}

/* ---- the connection's hooks ---------------------------------------------------- */

static void conn_up(void *data)
{
	struct ledger *l = data;

	l->last_ok = false;
	send_probe(l); /* the handshake: ready once it is answered */
}

static void conn_down(void *data, const char *why)
{
	struct ledger *l = data;
	(void)why;

	l->last_ok = false;
	l->probe_armed = false;
	loop_timer_set(l->probe_timer, 0); /* the next connection probes at once */
}

/* Inside hiredis: lists and flags only; callers hear of it from deliver. */
static void conn_reply(void *data, void *tag, const struct redisReply *rep, const char *why)
{
	struct ledger *l = data;
	struct ledger_req *r = tag;
	bool good;

	r->in_redis = false;
	l->put_bytes -= r->put_bytes;
	r->put_bytes = 0;
	if (r->kind == K_PROBE) {
		probe_reply(l, r, rep);
		return;
	}
	if (r->over) { /* cancelled, or answered "timed out" already: dropped */
		req_free(l, r);
		return;
	}
	if (r->where == W_DONE) /* timed out, not delivered yet: this reply is dropped */
		return;
	req_unlink(l, r);
	if (!rep) {
		fail(r, "connection lost: %s", why ? why : "closed");
	} else {
		good = r->kind == K_CLAIM ? claim_reply(r, rep) : put_reply(l, r, rep);
		set_ok(l, good);
	}
	done_push(l, r);
}

static const struct ledger_conn_hooks conn_hooks = {
	.up = conn_up,
	.down = conn_down,
	.reply = conn_reply,
};

/* ---- timeouts, delivery -------------------------------------------------------- */

static void on_deadline(void *data)
{
	struct ledger *l = data;
	uint64_t now = loop_now_ms();
	struct ledger_req *r;
	bool stuck = false;

	while ((r = l->flight.head) && r->deadline <= now) {
		req_unlink(l, r);
		if (r->kind == K_PROBE) { /* hiredis keeps it until the drop below */
			r->over = true;
			l->probe = NULL;
			stuck = true;
			continue;
		}
		fail(r, "timed out");
		done_push(l, r);
		l->last_ok = false;
	}
	/* A server that answers not even the probe is hung, or the path to it
	 * is: a new connection is tried (the drop answers the rest). */
	if (stuck)
		ledger_conn_drop(l->conn, "the server did not answer in time");
	else if (!l->last_ok)
		arm_probe(l);
	arm_deadline(l);
}

static void deliver_one(struct ledger_req *r)
{
	if (r->kind == K_PUT) {
		if (r->put_cb)
			r->put_cb(r->data, r->ok, r->why);
	} else if (r->outcome == LEDGER_ERROR) {
		r->claim_cb(r->data, LEDGER_ERROR, r->why, strlen(r->why));
	} else {
		r->claim_cb(r->data, r->outcome, r->value, r->vlen);
	}
}

static void free_now(struct ledger *l);

static void deliver(void *data)
{
	struct ledger *l = data;
	struct ledger_req *r;

	l->delivering = true;
	while (!l->free_asked && (r = l->done.head)) {
		req_unlink(l, r);
		r->over = true; /* a cancel from its own callback does nothing */
		deliver_one(r);
		if (!r->in_redis) /* else freed when hiredis lets it go */
			req_free(l, r);
	}
	l->delivering = false;
	if (l->free_asked)
		free_now(l);
}

/* ---- the API -------------------------------------------------------------------- */

int ledger_new(struct loop *loop, const char *url, struct ledger **out, struct appl_err *err)
{
	struct ledger_url u;
	struct ledger *l;
	int rc;

	if ((rc = ledger_url_parse(url, &u, err)) < 0)
		return rc;
	if (!(l = calloc(1, sizeof(*l))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	l->loop = loop;
	l->mark[0] = TAG_CLAIM;
	/* The token only tells our claims from others'; GRND_NONBLOCK: never
	 * wait on the loop (the pool is ready long before the appliance). */
	if (getrandom(l->mark + 1, TOKEN_LEN, GRND_NONBLOCK) != (ssize_t)TOKEN_LEN) {
		rc = appl_err_errno(err, -EAGAIN, errno, "ledger: no random bytes for its token");
		goto fail;
	}
	loop_task_init(&l->deliver, deliver, l);
	rc = -ENOMEM;
	if (!(l->deadline_timer = loop_timer_new(loop, on_deadline, l, err)) ||
	    !(l->probe_timer = loop_timer_new(loop, on_probe_timer, l, err)))
		goto fail;
	if ((rc = ledger_conn_new(loop, &u, &conn_hooks, l, &l->conn, err)) < 0)
		goto fail;
	*out = l;
	ledger_conn_start(l->conn);
	return 0;
fail:
	loop_timer_free(l->deadline_timer);
	loop_timer_free(l->probe_timer);
	free(l);
	return rc;
}

static void free_now(struct ledger *l)
{
	struct rlist *lists[2] = {&l->flight, &l->done};
	struct ledger_req *r;

	l->closing = true;
	loop_task_cancel(l->loop, &l->deliver);
	for (int i = 0; i < 2; i++)
		while ((r = lists[i]->head)) {
			req_unlink(l, r);
			r->over = true;
			if (!r->in_redis)
				req_free(l, r);
		}
	ledger_conn_free(l->conn); /* hiredis lets go of the rest: freed in conn_reply */
	loop_timer_free(l->deadline_timer);
	loop_timer_free(l->probe_timer);
	free(l);
}

void ledger_free(struct ledger *l)
{
	if (!l)
		return;
	if (l->delivering) { /* from a callback: deliver finishes the job */
		l->free_asked = true;
		return;
	}
	free_now(l);
}

bool ledger_ready(const struct ledger *l)
{
	return l && ledger_conn_open(l->conn) && l->last_ok;
}

/* "appliance:ledger:" and key in lowercase hex, into out; its length. */
static size_t key_text(const unsigned char *key, size_t klen, char out[KEY_TEXT_MAX + 1])
{
	static const char hex[] = "0123456789abcdef";
	size_t n = KEY_PREFIX_LEN;

	memcpy(out, KEY_PREFIX, KEY_PREFIX_LEN);
	for (size_t i = 0; i < klen; i++) {
		out[n++] = hex[key[i] >> 4];
		out[n++] = hex[key[i] & 15];
	}
	out[n] = '\0';
	return n;
}

static struct ledger_req *req_new(enum kind kind, void *data, struct appl_err *err)
{
	struct ledger_req *r = calloc(1, sizeof(*r));

	if (!r) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	r->kind = kind;
	r->data = data;
	return r;
}

/* Send r, or answer it at once (from the loop, later) with why not. */
static void req_start(struct ledger *l, struct ledger_req *r, int argc, const char **argv,
		      const size_t *lens)
{
	const char *why;
	int rc;

	if (l->count >= LEDGER_INFLIGHT_MAX)
		fail(r, "too many in flight (at most %u)", LEDGER_INFLIGHT_MAX);
	else if (l->put_bytes + r->put_bytes > LEDGER_PUT_BYTES_MAX)
		fail(r, "too many bytes in flight (at most %u)", LEDGER_PUT_BYTES_MAX);
	else if ((rc = req_send(l, r, argc, argv, lens)) == 0) {
		r->counted = true;
		l->count++;
		l->put_bytes += r->put_bytes;
		return;
	} else if (rc == -ENOTCONN) {
		why = ledger_conn_why(l->conn);
		fail(r, "not connected: %s", why[0] ? why : "connecting");
	} else {
		fail(r, "out of memory");
	}
	r->put_bytes = 0;
	done_push(l, r);
}

static int check_key(const unsigned char *key, size_t klen, struct appl_err *err)
{
	if (!key || klen == 0 || klen > LEDGER_KEY_MAX)
		return appl_err_set(err, -EINVAL, "ledger: a key of 1 to %u bytes", LEDGER_KEY_MAX);
	return 0;
}

int ledger_claim(struct ledger *l, const unsigned char *key, size_t klen, unsigned ttl_ms,
		 ledger_claim_cb cb, void *data, struct ledger_req **req, struct appl_err *err)
{
	char ktext[KEY_TEXT_MAX + 1], ttl[16];
	const char *argv[7] = {"SET", ktext, NULL, "NX", "PX", ttl, "GET"};
	size_t lens[7] = {3, 0, MARK_LEN, 2, 2, 0, 3};
	struct ledger_req *r;
	int rc;

	if (!l || !cb)
		return appl_err_set(err, -EINVAL, "ledger: no ledger or no callback");
	if ((rc = check_key(key, klen, err)) < 0)
		return rc;
	if (ttl_ms == 0 || ttl_ms > LEDGER_TTL_MS_MAX)
		return appl_err_set(err, -EINVAL, "ledger: a ttl of 1 to %u ms", LEDGER_TTL_MS_MAX);
	if (!(r = req_new(K_CLAIM, data, err)))
		return -ENOMEM;
	r->claim_cb = cb;
	argv[2] = (const char *)l->mark;
	lens[1] = key_text(key, klen, ktext);
	lens[5] = (size_t)snprintf(ttl, sizeof(ttl), "%u", ttl_ms);
	req_start(l, r, 7, argv, lens);
	if (req)
		*req = r;
	return 0;
}

int ledger_put(struct ledger *l, const unsigned char *key, size_t klen, const void *value,
	       size_t vlen, ledger_put_cb cb, void *data, struct ledger_req **req,
	       struct appl_err *err)
{
	char ktext[KEY_TEXT_MAX + 1];
	const char *argv[6] = {"SET", ktext, NULL, "XX", "KEEPTTL", "GET"};
	size_t lens[6] = {3, 0, 0, 2, 7, 3};
	struct ledger_req *r;
	char *tagged;
	int rc;

	if (!l || (!value && vlen))
		return appl_err_set(err, -EINVAL, "ledger: no ledger or no value");
	if ((rc = check_key(key, klen, err)) < 0)
		return rc;
	if (vlen > LEDGER_VALUE_MAX)
		return appl_err_set(err, -EMSGSIZE, "ledger: a value of %zu bytes, over %u", vlen,
				    LEDGER_VALUE_MAX);
	if (!(tagged = malloc(1 + vlen)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (!(r = req_new(K_PUT, data, err))) {
		free(tagged);
		return -ENOMEM;
	}
	r->put_cb = cb;
	r->put_bytes = vlen;
	tagged[0] = TAG_VALUE;
	if (vlen)
		memcpy(tagged + 1, value, vlen);
	argv[2] = tagged;
	lens[1] = key_text(key, klen, ktext);
	lens[2] = 1 + vlen;
	req_start(l, r, 6, argv, lens); /* hiredis copies the command */
	free(tagged);
	if (req)
		*req = r;
	return 0;
}

void ledger_req_cancel(struct ledger *l, struct ledger_req *r)
{
	if (!l || !r || r->over)
		return;
	r->over = true;
	req_unlink(l, r);
	if (!r->in_redis) /* else freed when hiredis lets it go */
		req_free(l, r);
}
