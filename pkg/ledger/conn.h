/* conn.h: the ledger's one connection to Redis, through hiredis's async API
 * on the appliance's loop.
 *
 * hiredis (libhiredis.so.0.14, loaded with dlopen when the first ledger is
 * made) formats commands, keeps their callbacks in order and parses
 * replies; this file gives it an event adapter of its own: hiredis's
 * addRead/delRead/addWrite/delWrite become the EPOLLIN and EPOLLOUT the
 * loop watches on its socket, and its cleanup (called whenever hiredis
 * frees a context: a failed connect, a broken connection, a drop of ours)
 * is the one place a connection is known to be gone. Reading is ours, not
 * hiredis's: each chunk goes through the reply check (resp.h) before
 * hiredis sees it, so a hostile server's bytes never reach the parser
 * unchecked.
 *
 * One connection at a time, one attempt at a time: a failed attempt or a
 * lost connection is retried after a wait that doubles from
 * LEDGER_BACKOFF_MIN_MS to LEDGER_BACKOFF_MAX_MS, and starts again from
 * the first once ledger_conn_good says the server answered as it should.
 * A name is looked up off the loop (resolve.h) before each attempt;
 * hiredis is given only addresses, for its own lookup blocks.
 */
#ifndef APPL_LEDGER_CONN_H
#define APPL_LEDGER_CONN_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "ledger/url.h"
#include "loop/loop.h"

struct ledger_conn;
struct redisReply;

/* What the owner is told, always from the loop. */
struct ledger_conn_hooks {
	/* A new connection (its connect may still be under way; its SELECT,
	 * when the URL names a database, answered): commands may be sent,
	 * and are written once it is made. */
	void (*up)(void *data);
	/* An attempt failed, or the connection is gone (every command sent
	 * on it was answered first, with a NULL reply). why: a fixed or
	 * local text, never the server's bytes. */
	void (*down)(void *data, const char *why);
	/* The answer to the command sent with tag: reply (borrowed, for the
	 * call), or NULL with why when the connection went first. Runs inside
	 * hiredis: it may not call ledger_conn_send, _drop or _free. */
	void (*reply)(void *data, void *tag, const struct redisReply *reply, const char *why);
};

/* Load hiredis (once) and make a connection object for url (copied) on
 * loop (borrowed, outlives it); hooks copied. No attempt is made before
 * ledger_conn_start. 0 with *out, or -errno with err. */
int ledger_conn_new(struct loop *loop, const struct ledger_url *url,
		    const struct ledger_conn_hooks *hooks, void *data, struct ledger_conn **out,
		    struct appl_err *err);

/* The first attempt, now (up or down may be called before it returns). */
void ledger_conn_start(struct ledger_conn *c);

/* Drop the connection (the reply hook is called with NULL for every
 * command on it; down is not called) and free. Safe on NULL. Not from a
 * hook. */
void ledger_conn_free(struct ledger_conn *c);

/* Send the command argv (argc arguments of lens bytes, copied). 0, or
 * -ENOTCONN (no connection now), -ENOMEM. Not from a hook. */
int ledger_conn_send(struct ledger_conn *c, int argc, const char **argv, const size_t *lens,
		     void *tag);

/* Drop the connection now, for why (copied), and try again later. Not
 * from a hook. */
void ledger_conn_drop(struct ledger_conn *c, const char *why);

/* The server answered as a Redis should: the next wait is the first. */
void ledger_conn_good(struct ledger_conn *c);

/* A connection exists (made, or being made) and takes commands. */
bool ledger_conn_open(const struct ledger_conn *c);

/* Why the last attempt or connection ended ("" before any did). */
const char *ledger_conn_why(const struct ledger_conn *c);

#endif
