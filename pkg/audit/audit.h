/* audit.h: the writer of the audit log (docs/audit.md gives the format).
 *
 * Events are queued as they happen and appended once per loop round: the
 * lock taken, the head read (another appliance may have written since),
 * the lines chained and written in one write, the head written, the lock
 * let go. audit_flush(sync) does the same at once and fdatasync's the log:
 * for a write tool's call line before the call goes upstream, and a run's
 * end before its answer leaves. A write that fails leaves nothing of its
 * batch behind and puts the log in failure (audit_ok false) until a later
 * write succeeds; callers fail closed on it.
 */
#ifndef APPL_AUDIT_AUDIT_H
#define APPL_AUDIT_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/format.h"
#include "base/err.h"

struct loop;

struct audit_config {
	const char *path;      /* absolute; the policy's audit.path */
	const char *state_dir; /* the appliance's state directory */
	bool seal;	       /* seal lines, with the state `audit init` made */
	unsigned seal_lines;   /* a seal at least every this many lines */
	unsigned seal_s;       /* and every this many seconds with lines to seal */
	uint64_t rotate_bytes; /* a new file before one would grow past this */
};

struct audit;

/* What audit_open judges before it writes anything, and nothing written
 * or made: the log's path and directory, the state directory and the
 * installation key where they exist, the log against its recorded head and
 * sealing state (a log that was cut, removed, or continued by someone
 * else), the sealing key a sealing policy needs, and that the log can be
 * appended to, or made in its directory. For `appliance check`: 0 when
 * audit_open would start on the log as it is now, else its refusal. */
int audit_check(const struct audit_config *cfg, struct appl_err *err);

/* Open the log for appending: the state directory's files made where
 * missing, the install key read or made, the head read and the log judged
 * against it under the lock. A log that is missing or shorter than its
 * head, lines past the head that do not continue the chain, or a sealing
 * log without its sealing state are refused (-ENOENT, -ESTALE, -EINVAL,
 * -ENOKEY) saying why; a torn tail left by a writer that died is ended
 * and recorded with a `torn` line. loop (may be NULL: then only
 * audit_flush writes) runs the batches and the seal timer. */
struct audit *audit_open(struct loop *loop, const struct audit_config *cfg, struct appl_err *err);

/* Write what is queued (the stop line and a last seal are the caller's to
 * queue first), then free. Safe on NULL. */
void audit_free(struct audit *a);

/* Queue event ev with the members of body (borrowed; an object, may be
 * NULL), which follow the five every line has. Never fails: when the queue
 * is full the event is counted as dropped. */
void audit_event(struct audit *a, const char *ev, const json_t *body);

/* Queue ev and write the queue at once, fdatasync'ed: 0 once it is on
 * disk. On failure the event is taken back out of the queue (what it
 * records must then not happen) and the code is returned. */
int audit_event_sync(struct audit *a, const char *ev, const json_t *body);

/* Write the queue now, fdatasync'ed when sync. 0, or the negative code of
 * the failure (the log is then in failure; audit_why says why). */
int audit_flush(struct audit *a, bool sync);

/* Queue a seal line (when the log seals) to go with the next batch. */
void audit_seal_now(struct audit *a);

/* False while the log cannot be written; audit_why is the reason, for
 * the client and the log ("/var/log/x: No space left on device"). */
bool audit_ok(const struct audit *a);
const char *audit_why(const struct audit *a);

/* What the writer has done, for a status: the log's path (borrowed), the
 * lines this writer appended, the time of the log's newest seal as last
 * seen under the lock (unix ms; 0: none, or a log that does not seal),
 * and audit_ok. */
struct audit_stats {
	const char *path;
	uint64_t lines;
	uint64_t seal_ms;
	bool ok;
};
void audit_stats(const struct audit *a, struct audit_stats *out);

/* The keyed digest of data (format.h), with this installation's key. */
void audit_digest_of(const struct audit *a, const void *data, size_t len, char out[AUDIT_HASH_HEX]);

#endif
