/* session.h: sessions, the interpreters kept between cells
 * (docs/sessions.md).
 *
 * A session is a sandbox whose runner stays after its cell (cell_keep) so
 * that the next cell of the same principal runs in the same interpreter,
 * with its variables, imports and files. Its handle is 128 random bits in
 * hex, minted here; it is bound to the principal that made it (the client
 * name, and the legacy MCP session when there was one): any other
 * principal presenting it is told what it would be told of a handle that
 * never existed. One run at a time holds a session. Between runs its
 * sandbox is frozen, and a timer ends it after the role's idle_s.
 *
 * A session ends, with a reason word its next cell is told: `end` (asked
 * for), `idle`, `max_cells`, `memory` (its sandbox died of memory, or holds
 * more than the role's memory_mb after a cell), `died` (the sandbox died
 * or was stopped), `reload` (a reload changed the image or its role, or
 * its principal's role), `closed` (its legacy MCP session ended). Ended
 * handles are remembered for APPL_SESSIONS_ENDED_S, at most
 * APPL_SESSIONS_ENDED_MAX of them, and then answered as unknown ones.
 *
 * The engine owns the set: it asks for a session when a run names one
 * (session_open), gives a run its kept cell (session_take), and hands
 * the run back when it ended, before it is answered (session_settle).
 */
#ifndef APPL_SESSION_SESSION_H
#define APPL_SESSION_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "cell/cell.h"
#include "loop/loop.h"
#include "policy/policy.h"
#include "run/run.h"

#define SESSION_HANDLE_BYTES 16
#define SESSION_HANDLE_LEN   (2 * SESSION_HANDLE_BYTES)

struct session_set;
struct session;
struct audit;

/* NULL on -ENOMEM. */
struct session_set *session_set_new(struct loop *loop);

/* The audit log session lines go to from now on (borrowed; NULL: none). */
void session_set_audit(struct session_set *ss, struct audit *a);

/* Every session ends (reason "shutdown", for the audit log: no client
 * hears it) and is freed. Runs holding one must have been freed first.
 * Safe on NULL. */
void session_set_free(struct session_set *ss);

/* What a run_python call asks of sessions. */
struct session_ask {
	const char *arg;		   /* "new", or a handle */
	bool end;			   /* end the session named, with no code */
	const char *client;		   /* the principal */
	const char *role;		   /* its role now; NULL: none */
	uint64_t bind;			   /* its legacy MCP session; 0: none */
	const struct policy_sessions *lim; /* the role's; NULL or max 0: no sessions */
};

/* The session a run of a asks for: a new one (busy from now on, its start
 * in the audit log), or the idle one a's handle names (busy from now on).
 * NULL with why (cap bytes; a tool error the model reads) when it cannot
 * be had: sessions not allowed to the role, its max or the appliance's
 * reached, a handle unknown (or another principal's), ended (why says
 * `ended` and the reason), or busy. Not for a->end. */
struct session *session_open(struct session_set *ss, const struct session_ask *a, char *why,
			     size_t cap);

/* a->end: end the idle session a's handle names. 0 with text (cap bytes)
 * saying it ended; -1 with text saying why not (as session_open). */
int session_end_ask(struct session_set *ss, const struct session_ask *a, char *text, size_t cap);

/* s was opened for a run that could not be made (out of memory): it is
 * idle again, or, new, ends ("died"). */
void session_unused(struct session *s);

/* The handle (a's to give back) and its digest for the audit log (keyed
 * with the log's key when there is one); borrowed while s lives. */
const char *session_handle(const struct session *s);
const char *session_digest(const struct session *s);

/* A run of s got its slot: s's kept cell, thawed, its hooks cleared (the
 * run sets its own); or NULL when s has none yet (its first run: the
 * caller takes one from the pool and calls cell_keep) or with err when
 * the kept one could not be thawed (s then ended, "died"). */
struct cell *session_take(struct session *s, struct appl_err *err);

/* s's run r ended and is about to be answered: s keeps r's cell (frozen,
 * its idle timer set) when the cell waits for another run and s may go
 * on, or ends and tells r why (run_session_ended). */
void session_settle(struct session *s, struct run *r);

/* End the sessions: of the legacy MCP session bind ("closed"); of client
 * (why); all (why). A busy one's run keeps going and is told when it is
 * answered. */
void session_end_bind(struct session_set *ss, uint64_t bind);
void session_end_client(struct session_set *ss, const char *client, const char *why);
void session_end_all(struct session_set *ss, const char *why);

/* A reload: sessions of a role that p no longer has, or whose entry
 * (tools, write, approvals, sessions) changed from old's, end ("reload"). */
void session_end_roles_changed(struct session_set *ss, const struct policy *old,
			       const struct policy *p);

/* Sessions open now (not ended), and of them frozen, for a status. */
void session_counts(const struct session_set *ss, unsigned *open, unsigned *frozen);

#endif
