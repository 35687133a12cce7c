/* proto.h: what the admin socket's two ends agree on (docs/operating.md),
 * pure: the socket's file name NAME.PID.sock, the one request line, and
 * the answer's envelope.
 *
 * A request is one line of JSON, {"op":"status"} or {"op":"reload"}, at
 * most APPL_ADMIN_REQUEST_MAX bytes with its newline; the answer is one
 * line, {"ok":true,"op":OP,...} or {"ok":false,"op":OP,"error":WHY} (op
 * null when the request was not understood). There is no other op: the
 * socket reads and reloads, and changes nothing a signed policy does not
 * say.
 */
#ifndef APPL_ADMIN_PROTO_H
#define APPL_ADMIN_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

enum admin_op {
	ADMIN_OP_STATUS,
	ADMIN_OP_RELOAD,
};

#define ADMIN_SOCK_SUFFIX ".sock"
/* The default directory as root (an ordinary user's: $XDG_RUNTIME_DIR/appliance). */
#define ADMIN_DIR_ROOT "/run/appliance"

/* Whether s[0..len) may be NAME: 1 to APPL_ADMIN_NAME_MAX bytes of
 * [A-Za-z0-9_-], the first a letter or digit. No '.', so NAME.PID.sock
 * reads back one way, and no '/', so it is one file name. */
bool admin_name_valid(const char *s, size_t len);

/* "NAME.PID.sock" into out (cap bytes): 0, or -EINVAL for a name that is
 * not valid or a pid below 1, -ENAMETOOLONG. */
int admin_sock_name(char *out, size_t cap, const char *name, pid_t pid);

/* Read a directory entry's name back: 0 with name (NUL-ended) and *pid
 * when file is NAME.PID.sock with a valid name and a pid of 1 to
 * INT32_MAX written without a leading zero; -EINVAL for anything else
 * (another file that lives there). */
int admin_sock_name_parse(const char *file, char name[APPL_ADMIN_NAME_MAX + 1], pid_t *pid);

/* The directory of the sockets when none is named: ADMIN_DIR_ROOT as root,
 * else $XDG_RUNTIME_DIR/appliance when that is an absolute path; an
 * ordinary user without one is refused (-ENOENT) saying to set it or name
 * a directory with --admin-dir. Reads the environment; nothing is made. */
int admin_dir_default(char *out, size_t len, struct appl_err *err);

/* Parse one request: buf[0..len) is the line without its newline
 * (untrusted: any bytes; no NUL expected). An object whose only key is
 * "op", a string naming an op. 0 with *op, or -EINVAL (-E2BIG past the
 * cap) with err saying why in a line fit for the peer. */
int admin_request_parse(const char *buf, size_t len, enum admin_op *op, struct appl_err *err);

/* The op's name ("status", "reload"). */
const char *admin_op_name(enum admin_op op);

/* The request line for op, newline included (static). */
const char *admin_request_line(enum admin_op op);

/* An answer for op (NULL: none understood): {"ok":false,"op":...,
 * "error":why} when why is non-NULL, else {"ok":true,"op":...}. New
 * reference, NULL on out of memory. */
json_t *admin_answer_new(const enum admin_op *op, const char *why);

/* Judge an answer line from an appliance (untrusted: another process
 * wrote it): buf[0..len) without its newline, at most
 * APPL_ADMIN_ANSWER_MAX, an object with a boolean "ok", "op" the op asked
 * for, a string "error" when ok is false, an object "status" for a status
 * that is ok. 0 with *answer (new reference), or negative with err. */
int admin_answer_parse(const char *buf, size_t len, enum admin_op op, json_t **answer,
		       struct appl_err *err);

#endif
