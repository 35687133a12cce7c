/* stdio.c: an MCP session over stdio (see stdio.h). */
#include "mcp/stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/limits.h"
#include "jsonrpc/jsonrpc.h"
#include "loop/lines.h"
#include "loop/loop.h"

/* Of a line over the cap, the first bytes are read for its id: clients
 * write "id" near the start, before params. */
#define MCP_OVERLONG_HEAD 4096u
/* The one answer a failed start writes: an id and a capped message. */
#define MCP_REFUSAL_QUEUE (16u * 1024)

_Static_assert(APPL_RPC_ANSWER_MAX <= MCP_STDIO_QUEUE_MAX,
	       "an answer must fit what a stdio client's queue holds");

struct mcp_stdio {
	struct lines *io;
	struct mcp_session *s;
	bool closed;
	bool from_file;
	void (*on_input_end)(void *data);
	void *data;
	char *held; /* the request the session held, until release or refusal */
	size_t held_len;
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

/* Keep line, which the session held, and read nothing more until the
 * owner releases it or refuses it. */
static void hold(struct mcp_stdio *st, const char *line, size_t len)
{
	if (!(st->held = malloc(len ? len : 1))) {
		mcp_session_refuse(st->s, line, len, "out of memory");
		return;
	}
	memcpy(st->held, line, len);
	st->held_len = len;
	lines_hold(st->io, true);
}

static void on_line(struct lines *io, const char *line, size_t len, void *data)
{
	struct mcp_stdio *st = data;
	(void)io;

	if (mcp_session_input(st->s, line, len))
		hold(st, line, len);
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

static void on_file_end(struct lines *io, void *data)
{
	struct mcp_stdio *st = data;
	(void)io;

	if (st->on_input_end)
		st->on_input_end(st->data);
}

/* Input the loop cannot watch, a regular file or /dev/null, is a script
 * read to its end, not a client that can go away. */
static bool input_is_file(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && (S_ISREG(sb.st_mode) || (S_ISCHR(sb.st_mode) && !isatty(fd)));
}

struct mcp_stdio *mcp_stdio_open(struct mcp_server *srv, struct loop *loop,
				 const struct mcp_stdio_config *c, struct appl_err *err)
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
	st->on_input_end = c->on_input_end;
	st->data = c->data;
	/* A script's end is the end of its requests, not of the client: the
	 * answers still go out, and a last line without its newline counts. */
	if (c->in_fd != c->out_fd && input_is_file(c->in_fd)) {
		st->from_file = true;
		lh.on_input_end = on_file_end;
		cfg.final_line = true;
	}
	t.t = st;
	lh.data = st;
	if (!(st->s = mcp_session_new(srv, &t, c->principal, err)) ||
	    !(st->io = lines_new(loop, c->in_fd, c->out_fd, &cfg, &lh, err))) {
		mcp_session_free(st->s);
		free(st);
		return NULL;
	}
	return st;
}

bool mcp_stdio_from_file(const struct mcp_stdio *st)
{
	return st->from_file;
}

bool mcp_stdio_holds(const struct mcp_stdio *st)
{
	return st && st->held;
}

void mcp_stdio_release(struct mcp_stdio *st)
{
	char *line = st->held;
	size_t len = st->held_len;

	if (!line)
		return;
	st->held = NULL;
	if (!st->closed && mcp_session_input(st->s, line, len)) {
		st->held = line; /* held again: still waiting */
		return;
	}
	free(line);
	lines_hold(st->io, false);
}

void mcp_stdio_refuse_held(struct mcp_stdio *st, const char *why)
{
	if (!st->held)
		return;
	mcp_session_refuse(st->s, st->held, st->held_len, why);
	free(st->held);
	st->held = NULL;
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
	free(st->held);
	free(st);
}

/* ---- before a session: a start that failed ------------------------------------ */

struct refusal {
	const char *why;
	int rc; /* 1 while waiting for a request; then 0 or a negative code */
};

/* head[0..len) is a line, or the start of one over the cap: a request gets
 * the error and nothing more is read; a notification or an answer is
 * passed over. */
static void refuse_judge(struct lines *l, const char *head, size_t len, void *data)
{
	struct refusal *r = data;
	char *line = NULL;
	size_t n;
	json_t *id;

	if (r->rc != 1 || !jsonrpc_method_sniffed(head, len) || !(id = jsonrpc_id_sniff(head, len)))
		return;
	r->rc = jsonrpc_error_encode(id, JSONRPC_INTERNAL_ERROR, r->why, NULL, MCP_REFUSAL_QUEUE,
				     &line, &n, NULL);
	json_decref(id);
	if (r->rc == 0)
		r->rc = lines_write(l, line, n);
	free(line);
	lines_hold(l, true);
}

static void refuse_end(struct lines *l, const char *why, void *data)
{
	struct refusal *r = data;
	(void)l;
	(void)why;

	if (r->rc == 1)
		r->rc = -EPIPE;
}

int mcp_stdio_refuse_first(int in_fd, int out_fd, const char *why, int timeout_ms)
{
	struct refusal r = {.why = why, .rc = 1};
	struct lines_hooks h = {.on_line = refuse_judge,
				.on_overlong = refuse_judge,
				.on_end = refuse_end,
				.data = &r};
	struct lines_config cfg = {.line_max = MCP_OVERLONG_HEAD,
				   .queue_max = MCP_REFUSAL_QUEUE,
				   .overlong = LINES_OVERLONG_SKIP,
				   .head_max = MCP_OVERLONG_HEAD};
	uint64_t until = loop_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0), now;
	/* lines makes both non-blocking; what comes after (stderr may share
	 * stdout's description) expects them as they were */
	int in_flags = fcntl(in_fd, F_GETFL), out_flags = fcntl(out_fd, F_GETFL);
	struct loop *loop;
	struct lines *l;

	if (isatty(in_fd))
		return -ENOTTY;
	if (!(loop = loop_new(NULL)))
		return -ENOMEM;
	if (!(l = lines_new(loop, in_fd, out_fd, &cfg, &h, NULL))) {
		loop_free(loop);
		return -EIO;
	}
	while (r.rc == 1 && (now = loop_now_ms()) < until)
		loop_run_once(loop, (int)(until - now));
	if (r.rc == 0 &&
	    lines_drain(l, (int)(until > loop_now_ms() ? until - loop_now_ms() : 0)) < 0)
		r.rc = -EPIPE;
	lines_free(l);
	loop_free(loop);
	fcntl(in_fd, F_SETFL, in_flags);
	fcntl(out_fd, F_SETFL, out_flags);
	return r.rc == 1 ? -ETIMEDOUT : r.rc;
}
