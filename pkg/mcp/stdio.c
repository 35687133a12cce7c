/* stdio.c: an MCP session over stdio (see stdio.h). */
#include "mcp/stdio.h"

#include <errno.h>
#include <stdlib.h>

#include "base/limits.h"
#include "loop/lines.h"

/* Of a line over the cap, the first bytes are read for its id: clients
 * write "id" near the start, before params. */
#define MCP_OVERLONG_HEAD 4096u

struct mcp_stdio {
	struct lines *io;
	struct mcp_session *s;
	bool closed;
};

static int t_send(void *t, char *line, size_t len)
{
	struct mcp_stdio *st = t;
	int rc = st->closed ? -EPIPE : lines_write(st->io, line, len);

	free(line);
	/* A client that stops reading its answers is dropped, not buffered
	 * for without end. */
	if (rc == -ENOBUFS)
		lines_end(st->io, "the client stopped reading");
	return rc;
}

static void t_close(void *t, const char *why)
{
	struct mcp_stdio *st = t;

	if (!st->closed)
		lines_end(st->io, why);
}

static void on_line(struct lines *io, const char *line, size_t len, void *data)
{
	(void)io;
	mcp_session_input(((struct mcp_stdio *)data)->s, line, len);
}

static void on_overlong(struct lines *io, const char *head, size_t len, void *data)
{
	(void)io;
	mcp_session_overlong(((struct mcp_stdio *)data)->s, head, len);
}

static void on_end(struct lines *io, const char *why, void *data)
{
	struct mcp_stdio *st = data;
	(void)io;

	st->closed = true;
	mcp_session_ended(st->s, why);
}

struct mcp_stdio *mcp_stdio_open(struct mcp_server *srv, struct loop *loop, int in_fd, int out_fd,
				 const struct mcp_principal *p, struct appl_err *err)
{
	struct mcp_stdio *st = calloc(1, sizeof(*st));
	struct lines_hooks lh = {.on_line = on_line, .on_overlong = on_overlong, .on_end = on_end};
	struct lines_config cfg = {.line_max = APPL_RPC_MESSAGE_MAX,
				   .queue_max = MCP_STDIO_QUEUE_MAX,
				   .overlong = LINES_OVERLONG_SKIP,
				   .head_max = MCP_OVERLONG_HEAD};
	struct mcp_transport t = {.send = t_send, .close = t_close};

	if (!st) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	t.t = st;
	lh.data = st;
	if (!(st->s = mcp_session_new(srv, &t, p, err)) ||
	    !(st->io = lines_new(loop, in_fd, out_fd, &cfg, &lh, err))) {
		mcp_session_free(st->s);
		free(st);
		return NULL;
	}
	return st;
}

void mcp_stdio_free(struct mcp_stdio *st, int timeout_ms)
{
	if (!st)
		return;
	lines_close(st->io);
	lines_drain(st->io, timeout_ms);
	st->closed = true;
	mcp_session_free(st->s);
	lines_free(st->io);
	free(st);
}
