/* session.c: sessions, the interpreters kept between cells (see
 * session.h). */
#include "session/session.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit/audit.h"
#include "base/limits.h"
#include "log/log.h"
#include "sandbox/runsc.h"

struct session {
	struct session *next;
	struct session_set *set;
	char handle[SESSION_HANDLE_LEN + 1];
	char digest[AUDIT_HASH_HEX];
	char *client, *role;
	uint64_t bind;
	struct policy_sessions lim;
	struct cell *cell;	 /* kept between runs; NULL while a run has it */
	bool busy;		 /* a run holds it */
	bool frozen;		 /* its kept sandbox is frozen */
	const char *why;	 /* the reason word once ended; NULL while open */
	uint64_t ended_ms;	 /* when */
	unsigned cells;		 /* runs it finished */
	struct loop_timer *idle; /* set while it waits */
	struct loop_task lost;	 /* its kept cell ended by itself */
};

struct session_set {
	struct loop *loop;
	struct audit *audit;
	struct session *list; /* newest first; the ended ones too, for a while */
};

/* A handle is never written back in a refusal: the refusal goes to the
 * audit log too, which keeps only the handle's digest. */
static const char REFUSED_UNKNOWN[] =
	"no such session: the handle never existed, is another client's, or ended long ago; "
	"start one with session: \"new\"";

struct session_set *session_set_new(struct loop *loop)
{
	struct session_set *ss = calloc(1, sizeof(*ss));

	if (ss)
		ss->loop = loop;
	return ss;
}

void session_set_audit(struct session_set *ss, struct audit *a)
{
	ss->audit = a;
}

const char *session_handle(const struct session *s)
{
	return s->handle;
}

const char *session_digest(const struct session *s)
{
	return s->digest;
}

/* ---- ending ----------------------------------------------------------------------- */

static void audit_line(struct session *s, const char *ev)
{
	json_t *body;

	if (!s->set->audit)
		return;
	if (strcmp(ev, "session.start") == 0)
		body = json_pack("{ss ss ss?}", "session", s->digest, "client", s->client, "role",
				 s->role);
	else
		body = json_pack("{ss ss sI}", "session", s->digest, "reason", s->why, "cells",
				 (json_int_t)s->cells);
	audit_event(s->set->audit, ev, body);
	json_decref(body);
}

/* s ends for why (a static word): its kept sandbox goes, its handle is
 * remembered as ended. */
static void session_end(struct session *s, const char *why)
{
	if (s->why)
		return;
	s->why = why;
	s->ended_ms = loop_now_ms();
	loop_timer_set(s->idle, 0);
	loop_task_cancel(s->set->loop, &s->lost);
	cell_free(s->cell); /* thawed and destroyed */
	s->cell = NULL;
	s->frozen = false;
	log_line(LOG_INFO, NULL, "session %.8s of %s ended: %s after %u cells", s->digest,
		 s->client, why, s->cells);
	audit_line(s, "session.end");
}

static void session_free(struct session *s)
{
	cell_free(s->cell);
	loop_timer_free(s->idle);
	loop_task_cancel(s->set->loop, &s->lost);
	free(s->client);
	free(s->role);
	free(s);
}

/* Ended handles are answered for a while: those past APPL_SESSIONS_ENDED_S,
 * and the oldest past APPL_SESSIONS_ENDED_MAX, go (never one a run still
 * holds). */
static void prune(struct session_set *ss)
{
	uint64_t now = loop_now_ms();
	unsigned kept = 0;

	for (struct session **pp = &ss->list, *s; (s = *pp);) {
		bool old = s->why && !s->busy &&
			   (now - s->ended_ms >= APPL_SESSIONS_ENDED_S * 1000ull ||
			    kept >= APPL_SESSIONS_ENDED_MAX);

		if (s->why && !old)
			kept++;
		if (!old) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		session_free(s);
	}
}

void session_set_free(struct session_set *ss)
{
	if (!ss)
		return;
	while (ss->list) {
		struct session *s = ss->list;

		ss->list = s->next;
		session_end(s, "shutdown");
		session_free(s);
	}
	free(ss);
}

/* ---- waiting between runs ------------------------------------------------------------ */

static void on_idle(void *data)
{
	session_end(data, "idle");
}

/* The kept cell ended by itself (its sandbox died, or its runner spoke
 * between cells): judged at the round's end, outside the cell's handlers. */
static void on_lost(void *data)
{
	struct session *s = data;
	const struct cell_outcome *o;

	if (!s->cell || !cell_finished(s->cell))
		return;
	o = cell_outcome(s->cell);
	session_end(s, o && o->reason == CELL_MEMORY ? "memory" : "died");
}

static void on_kept_done(struct cell *c, void *data)
{
	struct session *s = data;
	(void)c;

	loop_defer(s->set->loop, &s->lost);
}

/* ---- finding and making ---------------------------------------------------------------- */

static bool handle_well_formed(const char *h)
{
	size_t n = strlen(h);

	if (n != SESSION_HANDLE_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return false;
	return true;
}

/* The session a's handle names, if it is a's principal's: compared in
 * constant time, all of them looked at. */
static struct session *find(struct session_set *ss, const struct session_ask *a)
{
	struct session *found = NULL;

	if (!handle_well_formed(a->arg))
		return NULL;
	for (struct session *s = ss->list; s; s = s->next)
		if (sodium_memcmp(s->handle, a->arg, SESSION_HANDLE_LEN) == 0)
			found = s;
	if (found && (strcmp(found->client, a->client) != 0 || found->bind != a->bind))
		return NULL;
	return found;
}

static unsigned open_count(const struct session_set *ss, const char *role)
{
	unsigned n = 0;

	for (const struct session *s = ss->list; s; s = s->next)
		n += !s->why && (!role || (s->role && strcmp(s->role, role) == 0));
	return n;
}

static struct session *make(struct session_set *ss, const struct session_ask *a)
{
	struct session *s = calloc(1, sizeof(*s));
	unsigned char raw[SESSION_HANDLE_BYTES];

	if (!s || !(s->client = strdup(a->client)) || (a->role && !(s->role = strdup(a->role))) ||
	    !(s->idle = loop_timer_new(ss->loop, on_idle, s, NULL))) {
		if (s) {
			free(s->client);
			free(s->role);
		}
		free(s);
		return NULL;
	}
	s->set = ss;
	s->bind = a->bind;
	s->lim = *a->lim;
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(s->handle, sizeof(s->handle), raw, sizeof(raw));
	if (ss->audit) {
		audit_digest_of(ss->audit, s->handle, SESSION_HANDLE_LEN, s->digest);
	} else {
		unsigned char d[16];

		crypto_generichash(d, sizeof(d), (const unsigned char *)s->handle,
				   SESSION_HANDLE_LEN, NULL, 0);
		sodium_bin2hex(s->digest, sizeof(s->digest), d, sizeof(d));
	}
	loop_task_init(&s->lost, on_lost, s);
	s->next = ss->list;
	ss->list = s;
	return s;
}

static struct session *open_new(struct session_set *ss, const struct session_ask *a, char *why,
				size_t cap)
{
	struct session *s;

	if (!a->lim || !a->lim->max) {
		snprintf(
			why, cap,
			"sessions are not allowed to role %s: run the cell without session (a "
			"fresh sandbox), or ask the policy's owner to add \"sessions\" to the role",
			a->role ? a->role : "(none)");
		return NULL;
	}
	if (open_count(ss, a->role) >= a->lim->max) {
		snprintf(why, cap,
			 "role %s holds its most sessions already (sessions.max %u): end one with "
			 "{session: HANDLE, end: true}, or wait until one ends",
			 a->role, a->lim->max);
		return NULL;
	}
	if (open_count(ss, NULL) >= APPL_SESSIONS_MAX) {
		snprintf(why, cap,
			 "the appliance holds its most sessions already (%u): end one, or try "
			 "again later",
			 APPL_SESSIONS_MAX);
		return NULL;
	}
	if (!(s = make(ss, a))) {
		snprintf(why, cap, "out of memory");
		return NULL;
	}
	s->busy = true;
	log_line(LOG_INFO, NULL, "session %.8s of %s started", s->digest, s->client);
	audit_line(s, "session.start");
	return s;
}

/* The open, idle session a names, or NULL with why. */
static struct session *named(struct session_set *ss, const struct session_ask *a, char *why,
			     size_t cap)
{
	struct session *s = find(ss, a);

	if (s && !s->why && (s->role ? !a->role || strcmp(s->role, a->role) != 0 : !!a->role))
		session_end(s, "reload"); /* its principal's role changed since */
	if (!s)
		snprintf(why, cap, REFUSED_UNKNOWN);
	else if (s->why)
		snprintf(why, cap,
			 "the session ended (%s): its variables and files are gone; start a new "
			 "one with session: \"new\"",
			 s->why);
	else if (s->busy)
		snprintf(why, cap,
			 "the session is busy with another cell: a session runs one cell at a "
			 "time; send this one after that one's answer");
	else
		return s;
	return NULL;
}

struct session *session_open(struct session_set *ss, const struct session_ask *a, char *why,
			     size_t cap)
{
	struct session *s;

	prune(ss);
	if (strcmp(a->arg, "new") == 0)
		return open_new(ss, a, why, cap);
	if ((s = named(ss, a, why, cap))) {
		s->busy = true;
		loop_timer_set(s->idle, 0);
	}
	return s;
}

int session_end_ask(struct session_set *ss, const struct session_ask *a, char *text, size_t cap)
{
	struct session *s;

	prune(ss);
	if (!(s = named(ss, a, text, cap)))
		return -1;
	session_end(s, "end");
	snprintf(text, cap, "session %s ended after %u cells", s->handle, s->cells);
	return 0;
}

/* ---- runs -------------------------------------------------------------------------- */

void session_unused(struct session *s)
{
	s->busy = false;
	if (s->cell)
		loop_timer_set(s->idle, (uint64_t)s->lim.idle_s * 1000u);
	else
		session_end(s, "died");
}

struct cell *session_take(struct session *s, struct appl_err *err)
{
	struct cell *c = s->cell;

	if (!c)
		return NULL;
	s->cell = NULL;
	cell_set_hooks(c, NULL);
	if (s->frozen && sandbox_freeze(cell_sandbox(c), false, err) < 0) {
		log_line(LOG_ERR, NULL, "session %.8s: its sandbox could not be thawed: %s",
			 s->digest, err->msg);
		s->cell = c;
		session_end(s, "died");
		return NULL;
	}
	s->frozen = false;
	return c;
}

/* Whether the sandbox of c holds more than s may keep; *mb what it holds. */
static bool over_memory(const struct session *s, const struct cell *c, uint64_t *mb)
{
	uint64_t bytes = 0;

	*mb = 0;
	if (sandbox_memory_bytes(cell_sandbox(c), &bytes) < 0)
		return false; /* none to read: the sandbox's own limit still holds */
	*mb = bytes >> 20;
	return bytes > (uint64_t)s->lim.memory_mb << 20;
}

/* s keeps c (r's), frozen, until its next run or its idle timer. */
static void keep(struct session *s, struct run *r, struct cell *c)
{
	struct cell_hooks hooks = {.on_done = on_kept_done, .data = s};
	struct appl_err err = {0};

	s->cell = run_cell_keep(r);
	cell_set_hooks(c, &hooks);
	if (sandbox_freeze(cell_sandbox(c), true, &err) < 0) {
		/* A session waits frozen or not at all. */
		log_line(LOG_ERR, NULL, "session %.8s: its sandbox could not be frozen: %s",
			 s->digest, err.msg);
		session_end(s, "died");
		return;
	}
	s->frozen = true;
	loop_timer_set(s->idle, (uint64_t)s->lim.idle_s * 1000u);
}

void session_settle(struct session *s, struct run *r)
{
	const struct cell *rc = run_cell(r);
	struct cell *c = (struct cell *)rc;
	const struct cell_outcome *o = rc ? cell_outcome(rc) : NULL;
	uint64_t mb;

	s->busy = false;
	if (!s->why && !c && s->cell) {
		/* It never got a slot: the kept sandbox was not touched. */
		loop_timer_set(s->idle, (uint64_t)s->lim.idle_s * 1000u);
		return;
	}
	if (!s->why && c && cell_kept(c)) {
		s->cells++;
		if (over_memory(s, c, &mb)) {
			log_line(LOG_INFO, NULL, "session %.8s holds %llu MiB, more than %u",
				 s->digest, (unsigned long long)mb, s->lim.memory_mb);
			session_end(s, "memory");
		} else if (s->cells >= s->lim.max_cells) {
			session_end(s, "max_cells");
		} else {
			keep(s, r, c);
		}
	} else if (!s->why) {
		if (c)
			s->cells++;
		session_end(s, o && o->reason == CELL_MEMORY ? "memory" : "died");
	}
	if (s->why)
		run_session_ended(r, s->why);
}

/* ---- ending many ------------------------------------------------------------------- */

void session_end_bind(struct session_set *ss, uint64_t bind)
{
	for (struct session *s = ss->list; bind && s; s = s->next)
		if (s->bind == bind)
			session_end(s, "closed");
}

void session_end_client(struct session_set *ss, const char *client, const char *why)
{
	for (struct session *s = ss->list; s; s = s->next)
		if (strcmp(s->client, client) == 0)
			session_end(s, why);
}

void session_end_all(struct session_set *ss, const char *why)
{
	for (struct session *s = ss->list; s; s = s->next)
		session_end(s, why);
}

static bool strings_same(const char *const *a, size_t na, const char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

static bool role_same(const struct policy_role *a, const struct policy_role *b)
{
	return a && b && a->write == b->write && a->approve_writes == b->approve_writes &&
	       memcmp(&a->sessions, &b->sessions, sizeof(a->sessions)) == 0 &&
	       strings_same(a->tools, a->ntools, b->tools, b->ntools);
}

void session_end_roles_changed(struct session_set *ss, const struct policy *old,
			       const struct policy *p)
{
	for (struct session *s = ss->list; s; s = s->next)
		if (!s->why && (!s->role || !role_same(policy_role_find(old, s->role),
						       policy_role_find(p, s->role))))
			session_end(s, "reload");
}

void session_counts(const struct session_set *ss, unsigned *open, unsigned *frozen)
{
	*open = *frozen = 0;
	for (const struct session *s = ss ? ss->list : NULL; s; s = s->next) {
		*open += !s->why;
		*frozen += !s->why && s->frozen;
	}
}
