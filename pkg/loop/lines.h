/* lines.h: the one framing primitive. Newline-delimited messages over a
 * pair of non-blocking descriptors in the loop: a reader that assembles
 * capped lines and a bounded writer. The MCP client connection, every cell
 * and every upstream server read and write through it.
 *
 * Every peer is hostile or can be. So:
 *  - a line is at most line_max bytes (without its newline); what happens
 *    to a longer one is the instance's overlong policy (below), decided as
 *    soon as the cap is passed: the bytes past it are never kept;
 *  - the writer queues at most queue_max bytes; lines_write refuses more
 *    (-ENOBUFS) and the owner decides (a peer that stops reading is
 *    dropped, not buffered for);
 *  - each instance gets a bounded share of every loop round: at most
 *    round_bytes read and round_lines delivered (skipped bytes count too).
 *    What is left waits for the next round (loop_next), after every other
 *    peer had its turn, so a peer that floods cannot slow the others more
 *    than its share.
 */
#ifndef APPL_LOOP_LINES_H
#define APPL_LOOP_LINES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"

/* Per round, unless the config says otherwise. */
#define LINES_ROUND_BYTES (256u * 1024)
#define LINES_ROUND_LINES 32u

struct lines;

/* A line longer than line_max. */
enum lines_overlong {
	/* The peer is ended: on_end(l, "a line longer than the cap"). */
	LINES_OVERLONG_END,
	/* on_overlong gets the line's first bytes; the rest of it is read and
	 * dropped up to its newline, and reading goes on after it. */
	LINES_OVERLONG_SKIP,
	/* on_overlong gets the line's first bytes, and nothing more is read or
	 * delivered: the owner treats it as the peer's violation. */
	LINES_OVERLONG_STOP,
};

struct lines_hooks {
	/* One complete line (without its '\n'), borrowed for the call. It may
	 * call lines_close or lines_destroy on l (delivery then stops), but not
	 * lines_free. */
	void (*on_line)(struct lines *l, const char *line, size_t len, void *data);
	/* An over-long line (SKIP and STOP): head[0..len) is its first bytes,
	 * len = min(line_max, head_max). May be NULL for SKIP. */
	void (*on_overlong)(struct lines *l, const char *head, size_t len, void *data);
	/* SKIP: the over-long line on_overlong announced has ended (its
	 * newline was read; what came of it was dropped as it came, one read
	 * at a time, never gathered). Not called when the input ends inside
	 * it (on_end is). May be NULL. */
	void (*on_skipped)(struct lines *l, void *data);
	/* End of input ("end of input"), a read error ("read error"), a write
	 * error ("write error": the peer stopped reading for good; what it
	 * wrote before is delivered first), or (END) a line over the cap. why
	 * is a static string. Called once, from the loop (never from inside
	 * lines_write); never after lines_close. */
	void (*on_end)(struct lines *l, const char *why, void *data);
	/* The write queue, which had to wait for the peer, has just become
	 * empty (never called from inside lines_write). May be NULL. */
	void (*on_flushed)(struct lines *l, void *data);
	/* May be NULL. When set, the end of input (not a read error) is not
	 * the peer's end: nothing more is read, the output goes on, and this
	 * is called instead of on_end (once, from the loop): for input read
	 * from a file. Not with in_fd == out_fd. */
	void (*on_input_end)(struct lines *l, void *data);
	void *data;
};

struct lines_config {
	size_t line_max;	      /* longest line kept (at least 1) */
	size_t queue_max;	      /* bytes queued for out_fd */
	enum lines_overlong overlong; /* LINES_OVERLONG_END by default */
	size_t head_max;	      /* bytes of an over-long line shown: 0 = 256 */
	size_t round_bytes;	      /* 0: LINES_ROUND_BYTES */
	unsigned round_lines;	      /* 0: LINES_ROUND_LINES */
	bool final_line;	      /* at end of input, a last line without '\n' is delivered */
};

/* Read lines from in_fd and queue writes to out_fd (both borrowed and made
 * non-blocking here; either may be -1: no reading, or no writing; they may
 * be the same descriptor). An out_fd the loop cannot watch (a regular
 * file) is written plainly; an in_fd it cannot watch (a regular file,
 * /dev/null) never blocks, and is read a round's share at a time until its
 * end. New object, or NULL with err filled. */
struct lines *lines_new(struct loop *loop, int in_fd, int out_fd, const struct lines_config *cfg,
			const struct lines_hooks *hooks, struct appl_err *err);

/* Hold (true) or go on (false): while held nothing is read or delivered,
 * the line being delivered when it was called being the last; writing
 * goes on. For an owner that must do something before the next line. */
void lines_hold(struct lines *l, bool hold);

/* Change the cap for lines from now on (the line being read included: one
 * already past the new cap is over-long at once). */
void lines_set_line_max(struct lines *l, size_t line_max);

/* Queue data[0..len) (whole lines with their '\n'). Returns 0, -ENOBUFS
 * when the queue would pass queue_max (nothing is queued; l goes on), or
 * -EPIPE when l has ended or is closed. */
int lines_write(struct lines *l, const char *data, size_t len);

/* Bytes still queued. */
size_t lines_pending(const struct lines *l);

/* Read and deliver now, past the round's share, until the input is empty
 * (EAGAIN), ends, or max_bytes were read: for a peer that exited, whose
 * last words are still in the pipe. Returns 1 at end of input. */
int lines_pump(struct lines *l, size_t max_bytes);

/* End l as if its peer had gone: on_end(l, why) (once), nothing more read
 * or written. */
void lines_end(struct lines *l, const char *why);

/* Stop watching; nothing more is delivered, on_end is not called. Safe to
 * call more than once, and from a hook. */
void lines_close(struct lines *l);
bool lines_closed(const struct lines *l);

/* Bytes of input read and not yet delivered (a partial line, or lines
 * left for the next round). */
size_t lines_buffered(const struct lines *l);

/* The start of a line still without its newline (borrowed until l reads
 * again), when nothing else waits: for a peer that is being stopped, whose
 * last words are worth a log line. Returns its length, 0 when none. */
size_t lines_partial(const struct lines *l, const char **line);

/* Write what is still queued, waiting up to timeout_ms in all (for a clean
 * shutdown, outside the loop). Returns 0 when all was written. */
int lines_drain(struct lines *l, int timeout_ms);

/* Free now; never from one of l's hooks (use lines_destroy). Safe on NULL. */
void lines_free(struct lines *l);

/* Close now and free at the end of the loop round: safe from anywhere,
 * its own hooks included. Safe on NULL. */
void lines_destroy(struct lines *l);

#endif
