/* ledger.h: the small ledger the appliance's replicas share, in Redis.
 *
 * A person's approval of a tool call is used at most once over every
 * replica: the replica about to make the call first claims the call's key
 * here, and makes it only when the claim is its own. Once the call is
 * made, its result is stored under the key, so a replica replaying the
 * cell gets that result back instead of making the call again.
 *
 * The server: Redis 7.0 or later (Debian 12's redis-server), at
 * "redis://HOST:PORT[/DB]" (HOST a name, an IPv4 address or [an IPv6
 * one]) or "unix:/PATH". There is no password and no TLS: keep the ledger
 * on a Unix socket or a private network that only the replicas reach. A
 * URL with user:password@ is refused (a secret in a URL ends up in logs
 * and process listings); AUTH, if it is ever added, reads the password
 * from a file named by its path. The server decides who owns a claim, so
 * one that lies can grant a claim twice; what a hostile or broken server
 * cannot do is crash the appliance or make it hold more than the caps of
 * ledger/limits.h (resp.h lists the checks on its bytes).
 *
 * The commands (keys are "appliance:ledger:" and the key's bytes in
 * lowercase hex; values begin with a tag byte, 'C' for a claim and 'V' for
 * a stored value, so the two are never confused):
 *   claim  SET key C<token> NX PX ttl GET   one round trip, atomic: nil
 *          means the key was free and is ours now; a string is what the
 *          key held, and the claim was not made. (NX with GET is Redis
 *          7.0's, checked on Debian 12's 7.0.15; an older server answers
 *          with an error, and every claim fails with LEDGER_ERROR.) Never
 *          GET then SET: two replicas could both see the key free. token
 *          is 16 random bytes of this ledger object: it tells a put
 *          whether the claim was its own.
 *   put    SET key V<value> XX KEEPTTL GET  only onto a key that still
 *          exists (XX), keeping its expiry (KEEPTTL); the old value says
 *          whether the claim was still ours.
 *   probe  SET appliance:ledger:probe C<token> PX 60000  on every new
 *          connection, and every LEDGER_PROBE_MS while not ready: a write,
 *          so a read-only replica, a full server or one still loading is
 *          not taken for a working one.
 *   SELECT db  first, when the URL names a database other than 0; nothing
 *          else is sent on a connection before it is answered (behind a
 *          refused one a claim would land in database 0), and one not
 *          answered within LEDGER_TIMEOUT_MS drops the connection.
 *
 * Timing: everything runs on the loop, nothing blocks it (hiredis's async
 * API, a connect that does not wait, names looked up in a thread). A
 * callback is never called from inside the function that started its
 * command: always from the loop, later, even for a refusal at once ("not
 * connected", "too many in flight"). Each command is answered within
 * LEDGER_TIMEOUT_MS or told "timed out" (its reply, when it comes, is
 * dropped); a command that timed out or failed may still have been done
 * by the server (a claim may be held: it expires after its ttl), so
 * LEDGER_ERROR means "not known", and the caller must not make the call.
 *
 * Connection: made by ledger_new, remade after a loss with a wait that
 * doubles from 100 ms to 5 s, one attempt at a time. Commands given while
 * there is no connection are answered LEDGER_ERROR "not connected: why".
 */
#ifndef APPL_LEDGER_LEDGER_H
#define APPL_LEDGER_LEDGER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "ledger/limits.h"
#include "loop/loop.h"

struct ledger;
struct ledger_req; /* a command in flight: a claim or a put */

enum ledger_claim {
	LEDGER_CLAIMED, /* the key was free: ours now, for ttl_ms */
	LEDGER_TAKEN,	/* claimed before (by any replica, this one too) */
	LEDGER_ERROR,	/* unreachable, timed out, refused: not known */
};

/* A claim's answer. TAKEN: value is what ledger_put stored under the key
 * (an empty value is not NULL), NULL (len 0) when none yet. ERROR: value
 * is a short reason text (NUL-terminated, len its length), also when the
 * key holds what no ledger_put wrote. value is borrowed for the call. */
typedef void (*ledger_claim_cb)(void *data, enum ledger_claim outcome, const void *value,
				size_t len);

/* A put's answer: ok when the value is stored under our own claim; else
 * why (borrowed for the call) says what happened. */
typedef void (*ledger_put_cb)(void *data, bool ok, const char *why);

/* A ledger on loop (borrowed; it must outlive the ledger) for url
 * (borrowed). Loads libhiredis.so.0.14 (Debian package libhiredis0.14)
 * the first time, starts connecting, and returns without waiting: 0 with
 * *out (new), or -EINVAL (a bad URL), -EIO (no hiredis), -errno, with err
 * filled. */
int ledger_new(struct loop *loop, const char *url, struct ledger **out, struct appl_err *err);

/* Close the connection and free everything. Callbacks still owed are NOT
 * called (as loop_free drops its tasks): every ledger_req becomes invalid.
 * Safe on NULL, and from inside a callback of l's (the rest of l's
 * callbacks are then not called). */
void ledger_free(struct ledger *l);

/* Ready: connected, and the last command (a caller's, or the probe)
 * answered as it should, in time. */
bool ledger_ready(const struct ledger *l);

/* Claim key (klen bytes, 1 to LEDGER_KEY_MAX) for ttl_ms (1 to
 * LEDGER_TTL_MS_MAX); cb(data, ...) answers later, from the loop, once.
 * 0 with *req (may be NULL: no handle wanted) valid until cb has been
 * called or the request cancelled; or -EINVAL (bad arguments: cb is never
 * called), -ENOMEM, with err filled. */
int ledger_claim(struct ledger *l, const unsigned char *key, size_t klen, unsigned ttl_ms,
		 ledger_claim_cb cb, void *data, struct ledger_req **req, struct appl_err *err);

/* Store value (vlen bytes, copied, at most LEDGER_VALUE_MAX) under key,
 * which this ledger claimed, keeping the claim's expiry. cb may be NULL
 * (no answer wanted). Answers not ok when the key is gone (its ttl ran
 * out: nothing is stored) or held another replica's claim or a value
 * (then overwritten). 0 with *req (may be NULL), or -EINVAL, -EMSGSIZE
 * (value over the cap: cb is never called), -ENOMEM, with err filled. */
int ledger_put(struct ledger *l, const unsigned char *key, size_t klen, const void *value,
	       size_t vlen, ledger_put_cb cb, void *data, struct ledger_req **req,
	       struct appl_err *err);

/* The caller no longer wants req's answer (its object is going away): its
 * callback is never called. The command itself may still reach the
 * server. Not after the callback ran (req is freed then); inside req's own
 * callback it does nothing. */
void ledger_req_cancel(struct ledger *l, struct ledger_req *req);

#endif
