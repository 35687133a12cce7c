/* stdio.h: the stdio transport of an MCP session: one JSON-RPC message per
 * line on a pair of descriptors, read through pkg/loop/lines (every line
 * capped at APPL_RPC_MESSAGE_MAX; a longer one is answered and skipped, the
 * session kept), answers queued up to MCP_STDIO_QUEUE_MAX for a slow
 * client, which is dropped past that rather than buffered for. */
#ifndef APPL_MCP_STDIO_H
#define APPL_MCP_STDIO_H

#include <stdbool.h>

#include "base/err.h"
#include "loop/loop.h"
#include "mcp/session.h"

#define MCP_STDIO_QUEUE_MAX (64u * 1024 * 1024)

struct mcp_stdio;

struct mcp_stdio_config {
	int in_fd, out_fd;		       /* borrowed */
	const struct mcp_principal *principal; /* borrowed */
	/* Input the loop cannot watch (a regular file, /dev/null) is a script
	 * read to its end: at its end the session goes on answering, and this
	 * is called (may be NULL). Any other input's end is the client's
	 * (on_closed). */
	void (*on_input_end)(void *data);
	void *data;
};

/* Serve one session of srv on c's descriptors. NULL with err. */
struct mcp_stdio *mcp_stdio_open(struct mcp_server *srv, struct loop *loop,
				 const struct mcp_stdio_config *c, struct appl_err *err);

/* Whether the input is a script read from a file (mcp_stdio_config). */
bool mcp_stdio_from_file(const struct mcp_stdio *st);

/* Whether a request the session held waits (safe on NULL: false). */
bool mcp_stdio_holds(const struct mcp_stdio *st);

/* The request the session held (its hold hook) is given to it again, and
 * reading goes on. Nothing when none is held. */
void mcp_stdio_release(struct mcp_stdio *st);

/* The request the session held is answered with an internal error saying
 * why (nothing more is read). Nothing when none is held. */
void mcp_stdio_refuse_held(struct mcp_stdio *st, const char *why);

/* Stop reading, flush what is queued (at most timeout_ms), then free the
 * session (its runs are cancelled) and the transport. Safe on NULL. */
void mcp_stdio_free(struct mcp_stdio *st, int timeout_ms);

/* For a start that failed before any session: wait up to timeout_ms for
 * the client's first request on in_fd (notifications and answers are
 * passed over) and answer it on out_fd with an internal error whose message
 * is why, so the client can show the reason instead of a closed
 * connection. 0 when it was answered; -ENOTTY for a terminal (nothing is
 * waited for), -EPIPE at the end of input, -ETIMEDOUT. Blocking. */
int mcp_stdio_refuse_first(int in_fd, int out_fd, const char *why, int timeout_ms);

#endif
