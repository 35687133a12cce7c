/* lines.h: newline-delimited messages over a pair of non-blocking
 * descriptors in the loop: a reader that assembles capped lines and a
 * writer with a bounded queue. Every peer (an MCP client on stdio, an
 * upstream server's pipes) is hostile or can be: a line past the cap and a
 * queue past its cap are errors, never growth without end. */
#ifndef APPL_LOOP_LINES_H
#define APPL_LOOP_LINES_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"

struct lines;

struct lines_hooks {
	/* One complete line (without its '\n'), borrowed for the call. The
	 * callback may call lines_close or free the owner only by returning
	 * after setting its own flag: lines stops delivering once closed. */
	void (*on_line)(struct lines *l, const char *line, size_t len, void *data);
	/* End of input, a line over the cap, a read or write error, or the
	 * queue over its cap. why is a static string. Called once. */
	void (*on_end)(struct lines *l, const char *why, void *data);
	void *data;
};

/* Watch in_fd for lines of at most line_max bytes and queue writes to
 * out_fd (both borrowed; made non-blocking here) up to queue_max bytes.
 * New object, or NULL with err filled. */
struct lines *lines_new(struct loop *loop, int in_fd, int out_fd, size_t line_max, size_t queue_max,
			const struct lines_hooks *hooks, struct appl_err *err);

/* Queue data[0..len) (a whole line with its '\n'). Returns 0, or -ENOBUFS
 * (queue full: on_end follows) or -EPIPE (already ended). */
int lines_write(struct lines *l, const char *data, size_t len);

/* Bytes still queued. */
size_t lines_pending(const struct lines *l);

/* Stop watching; nothing more is delivered. Safe to call more than once. */
void lines_close(struct lines *l);
bool lines_closed(const struct lines *l);

/* Write what is still queued, waiting up to timeout_ms in all (for a clean
 * shutdown, outside the loop). Returns 0 when all was written. */
int lines_drain(struct lines *l, int timeout_ms);

void lines_free(struct lines *l);

#endif
