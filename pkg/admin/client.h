/* client.h: the other end of the admin socket, for `appliance status` and
 * `appliance reload`: find the sockets in a directory, ask one. Blocking
 * with a deadline (a command, not the loop).
 */
#ifndef APPL_ADMIN_CLIENT_H
#define APPL_ADMIN_CLIENT_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "admin/proto.h"
#include "base/err.h"

/* One socket found: NAME.PID.sock in the directory. */
struct admin_target {
	char name[APPL_ADMIN_NAME_MAX + 1];
	pid_t pid;
	char path[PATH_MAX];
};

/* The sockets in dir whose NAME is name (NULL: any) and whose PID is pid
 * (0: any), sorted by name, then pid: *out new (free), *n of them (0
 * when none matches). Other files are passed over; at most
 * APPL_ADMIN_SOCKETS_MAX are looked at. A directory that cannot be read
 * is refused with why (-ENOENT: no appliance has made it; -EACCES: only
 * root, or the appliance's own user, may look). */
int admin_targets_list(const char *dir, const char *name, pid_t pid, struct admin_target **out,
		       size_t *n, struct appl_err *err);

/* Send op's request to the socket at path and read its one answer line
 * within timeout_ms: 0 with *answer (new reference: admin_answer_parse's;
 * its "ok" may be false, a refusal with "error"), or negative with err:
 * -ECONNREFUSED for a socket nobody serves (a stale one), -EACCES when
 * the socket's mode keeps this user out, -ETIMEDOUT, -EPROTO for an
 * answer that is not one. */
int admin_ask(const char *path, enum admin_op op, unsigned timeout_ms, json_t **answer,
	      struct appl_err *err);

#endif
