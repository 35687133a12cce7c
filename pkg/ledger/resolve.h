/* resolve.h: a name looked up off the loop.
 *
 * getaddrinfo blocks (for seconds, when a DNS server is slow or gone), and
 * hiredis 0.14 calls it inside its connect: the ledger hands hiredis only
 * addresses, and looks a name up here first, in a thread of its own. The
 * thread blocks every signal (the loop takes them from a signalfd: one
 * delivered to this thread instead would kill the process), is detached,
 * and tells the loop through an eventfd. A lookup that is cancelled runs
 * on to its end (glibc's resolver has its own timeouts) and its answer is
 * dropped; the thread frees what it shares with the loop when both are
 * done with it.
 *
 * The address kept is the first IPv4 one, else the first IPv6 one (the
 * order hiredis itself tries).
 */
#ifndef APPL_LEDGER_RESOLVE_H
#define APPL_LEDGER_RESOLVE_H

#include "base/err.h"
#include "loop/loop.h"

struct ledger_resolve;

/* rc 0 with addr (a numeric address) or -EHOSTUNREACH with why; both
 * borrowed for the call. */
typedef void (*ledger_resolve_cb)(void *data, int rc, const char *addr, const char *why);

/* Look host (copied) up; cb is called once, from loop, unless cancelled
 * first. 0 with *out, or -errno with err. */
int ledger_resolve_start(struct loop *loop, const char *host, ledger_resolve_cb cb, void *data,
			 struct ledger_resolve **out, struct appl_err *err);

/* cb is not called; r is invalid afterwards. */
void ledger_resolve_cancel(struct ledger_resolve *r);

#endif
