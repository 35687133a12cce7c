/* admin.h: the admin socket of one appliance process (docs/operating.md).
 *
 * A unix stream socket at DIR/NAME.PID.sock, mode 0600, served on the
 * appliance's event loop: every descriptor non-blocking, nothing waited
 * for inside a callback. Each connection is judged first by its peer's
 * credentials (SO_PEERCRED, taken when it connected): only uid 0, and the
 * appliance's own effective uid (a rootless appliance's user), is served;
 * any other peer gets one line saying so and is closed, whatever the
 * socket's mode says. A served peer sends one request line (proto.h)
 * within APPL_ADMIN_TIMEOUT_MS and gets one answer line, then the
 * connection ends. At most APPL_ADMIN_CONNECTIONS_MAX peers are served at
 * once; one more is told "busy".
 *
 * status is answered at once from the owner's status hook. reload is
 * asynchronous: the owner's reload hook is given a ticket, and the answer
 * goes out when the owner calls admin_reload_done with it (a peer that
 * went away meanwhile is simply not answered). The owner runs the reload
 * itself, outside the callback (between loop rounds).
 */
#ifndef APPL_ADMIN_ADMIN_H
#define APPL_ADMIN_ADMIN_H

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "admin/proto.h"
#include "base/err.h"
#include "loop/loop.h"

struct admin;

/* Who asked, from SO_PEERCRED. */
struct admin_peer {
	uid_t uid;
	pid_t pid;
};

struct admin_hooks {
	/* What a status says besides name and pid: an object, new
	 * reference; NULL when it could not be made (the peer is told). */
	json_t *(*status)(void *data);
	/* peer (borrowed for the call) asks for a reload: answer with
	 * admin_reload_done(ticket) later, or from inside this hook. */
	void (*reload)(void *data, uint64_t ticket, const struct admin_peer *peer);
	void *data;
};

struct admin_config {
	const char
		*dir; /* where the socket goes, made 0700 when missing; NULL: admin_dir_default */
	const char *name; /* NAME (admin_name_valid) */
	struct admin_hooks hooks;
	unsigned timeout_ms; /* 0: APPL_ADMIN_TIMEOUT_MS (tests shorten it) */
};

/* Make the socket and serve it in loop (borrowed; it must outlive the
 * admin): the directory judged (appl_private_dir: ours, not writable by
 * group or others), a stale socket of the same NAME.PID replaced, the new
 * one bound under a temporary name, made 0600 and renamed into place. 0
 * with *out (new), or negative with err saying why. */
int admin_open(struct loop *loop, const struct admin_config *cfg, struct admin **out,
	       struct appl_err *err);

/* The socket's path (borrowed). */
const char *admin_path(const struct admin *a);

/* The reload of ticket is over: rc 0 (done) or negative with why
 * (borrowed; NULL: strerror). Unknown tickets (a peer that left, an
 * answer given already) are ignored. Safe from inside the reload hook. */
void admin_reload_done(struct admin *a, uint64_t ticket, int rc, const char *why);

/* Stop serving: each answer still unsent is tried once more, every peer
 * closed, the socket removed. Safe on NULL. */
void admin_close(struct admin *a);

#endif
