/* cell.c: one run of one cell (see cell.h). */
#include "cell/cell.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/utf8.h"
#include "cell/proto.h"

#define CELL_READ_ROUNDS 16 /* blocks read per wakeup */

enum cell_phase {
	PHASE_BOOT,    /* sandbox starting, waiting for ready */
	PHASE_IDLE,    /* ready, waiting for its code (a pooled sandbox) */
	PHASE_RUNNING, /* cell sent */
	PHASE_DRAIN,   /* done seen; anything more is a violation */
	PHASE_ENDED,
};

struct cell {
	struct loop *loop;
	struct sandbox *sb;
	struct cell_limits lim;
	struct cell_hooks hooks;
	struct cell_proto_state *proto;
	enum cell_phase phase;
	uint64_t arrival_ms;
	int deadline_fd, boot_fd;
	char *code; /* NULL until cell_run */
	size_t code_len;
	json_t *tools;
	/* runner to host: one line being assembled */
	char *in;
	size_t in_len;
	/* host to runner: bytes queued */
	char *out;
	size_t out_len, out_off, out_cap;
	/* what the code printed */
	char *stdout_buf;
	size_t stdout_len;
	size_t printed;
	bool truncated;
	unsigned long calls;
	json_t *done_error, *done_result;
	json_t *result;
};

void cell_limits_init(struct cell_limits *lim)
{
	lim->deadline_ms = APPL_DEADLINE_S_DEF * 1000ull;
	lim->boot_ms = APPL_BOOT_TIMEOUT_MS;
	lim->max_output = APPL_MAX_OUTPUT_BYTES_DEF;
	lim->stop_output = APPL_STOP_OUTPUT_BYTES_DEF;
}

static void unwatch(struct cell *c)
{
	if (c->sb) {
		loop_del(c->loop, sandbox_fd_in(c->sb));
		loop_del(c->loop, sandbox_fd_out(c->sb));
		loop_del(c->loop, sandbox_pidfd(c->sb));
	}
	loop_del(c->loop, c->deadline_fd);
	loop_del(c->loop, c->boot_fd);
}

/* Keep what the code printed up to the cap, cut at a UTF-8 boundary. */
static void stdout_keep(struct cell *c, const char *s, size_t len)
{
	size_t room = c->lim.max_output - c->stdout_len;

	if (len > room) {
		len = appl_utf8_boundary(s, room);
		c->truncated = true;
	}
	memcpy(c->stdout_buf + c->stdout_len, s, len);
	c->stdout_len += len;
}

static json_t *result_value(struct cell *c)
{
	char *dump;
	size_t n;

	if (!c->done_result)
		return json_null();
	dump = json_dumps(c->done_result, JSON_COMPACT | JSON_ENCODE_ANY);
	n = dump ? strlen(dump) : 0;
	free(dump);
	if (n > APPL_CELL_RESULT_MAX) {
		c->truncated = true;
		return json_pack("s", "(result omitted: larger than the cap)");
	}
	return json_incref(c->done_result);
}

/* End the run: reason NULL for a normal end. The sandbox stays until
 * cell_free, so the answer is not held up by its teardown. */
static void finish(struct cell *c, const char *reason, const char *error)
{
	json_t *err_v;

	if (c->phase == PHASE_ENDED)
		return;
	c->phase = PHASE_ENDED;
	unwatch(c);
	if (reason && c->sb)
		sandbox_kill(c->sb);
	if (error)
		err_v = json_string(error);
	else if (c->done_error)
		err_v = json_incref(c->done_error);
	else
		err_v = json_null();
	c->result = json_pack(
		"{s:s%,s:o,s:o,s:b,s:b,s:o,s:I,s:I}", "stdout", c->stdout_buf ? c->stdout_buf : "",
		c->stdout_len, "error", err_v ? err_v : json_null(), "result",
		reason ? json_null() : result_value(c), "truncated", c->truncated, "stopped",
		reason != NULL, "reason", reason ? json_string(reason) : json_null(), "calls",
		(json_int_t)c->calls, "duration_ms", (json_int_t)(loop_now_ms() - c->arrival_ms));
	if (!c->result) /* only when out of memory */
		c->result = json_pack("{s:s,s:s,s:n,s:b,s:b,s:s,s:I,s:I}", "stdout", "", "error",
				      "internal error", "result", "truncated", 1, "stopped", 1,
				      "reason", "internal", "calls", (json_int_t)c->calls,
				      "duration_ms", (json_int_t)(loop_now_ms() - c->arrival_ms));
	if (c->hooks.on_done)
		c->hooks.on_done(c, c->hooks.data);
}

static void violation(struct cell *c, const char *what)
{
	char msg[APPL_ERR_MSG_MAX + 32];

	snprintf(msg, sizeof(msg), "protocol violation: %s", what);
	finish(c, "protocol", msg);
}

/* Grow the queue to hold need bytes (need <= APPL_RUNNER_OUTBUF_MAX). */
static int out_grow(struct cell *c, size_t need)
{
	size_t cap = c->out_cap ? c->out_cap : 64 * 1024;
	char *p;

	while (cap < need)
		cap *= 2;
	if (cap > APPL_RUNNER_OUTBUF_MAX)
		cap = APPL_RUNNER_OUTBUF_MAX;
	p = realloc(c->out, cap);
	if (!p)
		return -ENOMEM;
	c->out = p;
	c->out_cap = cap;
	return 0;
}

/* Queue a host-to-runner line (steals line). A runner that stops reading
 * while the code floods calls fills the queue: the run is stopped rather
 * than buffered without end. */
static void send_line(struct cell *c, char *line, size_t len)
{
	size_t pending = c->out_len - c->out_off;

	if (pending + len > APPL_RUNNER_OUTBUF_MAX) {
		free(line);
		violation(c, "the runner stopped reading its results");
		return;
	}
	if (c->out_off > 0) {
		memmove(c->out, c->out + c->out_off, pending);
		c->out_len = pending;
		c->out_off = 0;
	}
	if (c->out_len + len > c->out_cap && out_grow(c, c->out_len + len) < 0) {
		free(line);
		finish(c, "internal", "out of memory");
		return;
	}
	memcpy(c->out + c->out_len, line, len);
	c->out_len += len;
	free(line);
	loop_mod(c->loop, sandbox_fd_in(c->sb), EPOLLOUT);
}

static void on_writable(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct cell *c = data;
	(void)loop;

	while (c->out_off < c->out_len) {
		ssize_t n = write(fd, c->out + c->out_off, c->out_len - c->out_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0 || (events & EPOLLERR)) {
			/* The runner closed its input: it is gone or hostile. */
			if (c->phase == PHASE_RUNNING)
				violation(c, "the runner closed its input");
			return;
		}
		c->out_off += (size_t)n;
	}
	loop_mod(c->loop, fd, 0);
}

/* Send the cell line: the runner is ready and the code is known. */
static void cell_send(struct cell *c)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (cell_proto_cell_encode(c->code, c->code_len, c->tools, &line, &len, &err) < 0) {
		finish(c, "internal", err.msg);
		return;
	}
	if (cell_proto_state_cell_sent(c->proto, &err) < 0) {
		free(line);
		violation(c, err.msg);
		return;
	}
	c->phase = PHASE_RUNNING;
	send_line(c, line, len);
}

static void on_ready(struct cell *c)
{
	loop_timer_arm(c->boot_fd, 0);
	if (!c->code) {
		c->phase = PHASE_IDLE;
		if (c->hooks.on_ready)
			c->hooks.on_ready(c, c->hooks.data);
		return;
	}
	cell_send(c);
}

static void on_out(struct cell *c, const json_t *data)
{
	size_t len = json_string_length(data);

	c->printed += len;
	stdout_keep(c, json_string_value(data), len);
	if (c->printed >= c->lim.stop_output)
		finish(c, "output", NULL);
}

static void on_call(struct cell *c, const struct cell_msg *m)
{
	json_int_t id = m->u.call.id;

	c->calls++; /* the budget is the owner's (pkg/bridge) */
	if (!c->hooks.on_call) {
		cell_call_refuse(c, id, "no tools are available to this cell");
		return;
	}
	c->hooks.on_call(c, id, json_string_value(m->u.call.tool), m->u.call.args, c->hooks.data);
}

static void on_done(struct cell *c, const struct cell_msg *m)
{
	c->done_error = m->u.done.error ? json_incref(m->u.done.error) : NULL;
	c->done_result = json_incref(m->u.done.result);
	/* Lines after done are a violation: those that came in the same read
	 * are judged (lines_take), then the run ends at once. The runner's
	 * exit is not waited for: its sandbox is destroyed anyway. */
	c->phase = PHASE_DRAIN;
}

static void line_handle(struct cell *c, const char *buf, size_t len)
{
	struct cell_msg m = {0};
	struct appl_err err = {0};

	if (c->phase == PHASE_DRAIN) {
		violation(c, "a message after done");
		return;
	}
	if (cell_proto_parse(buf, len, &m, &err) < 0 ||
	    cell_proto_state_feed(c->proto, &m, &err) < 0) {
		cell_proto_msg_clear(&m);
		violation(c, err.msg);
		return;
	}
	switch (m.type) {
	case CELL_MSG_READY:
		on_ready(c);
		break;
	case CELL_MSG_OUT:
		on_out(c, m.u.out.data);
		break;
	case CELL_MSG_CALL:
		on_call(c, &m);
		break;
	case CELL_MSG_DONE:
		on_done(c, &m);
		break;
	default:
		violation(c, "unexpected message");
		break;
	}
	cell_proto_msg_clear(&m);
}

/* Split what arrived into lines; a line longer than the cap, without its
 * newline yet, is already a violation. */
static void lines_take(struct cell *c)
{
	size_t start = 0;

	for (size_t i = 0; i < c->in_len && c->phase != PHASE_ENDED; i++) {
		if (c->in[i] != '\n')
			continue;
		line_handle(c, c->in + start, i - start);
		start = i + 1;
	}
	if (c->phase == PHASE_ENDED)
		return;
	memmove(c->in, c->in + start, c->in_len - start);
	c->in_len -= start;
	if (c->phase == PHASE_DRAIN) {
		if (c->in_len)
			violation(c, "an unfinished line after done");
		else
			finish(c, NULL, NULL);
		return;
	}
	if (c->in_len > APPL_RUNNER_LINE_MAX)
		violation(c, "a line longer than the cap");
}

/* Read until the pipe is empty, or for a bounded number of blocks: a runner
 * that writes without pause must not keep the loop from its timers and the
 * other cells (epoll is level-triggered: the rest comes next round).
 * Returns 1 at end of file. */
static int input_read(struct cell *c, int fd)
{
	for (int rounds = 0; c->phase != PHASE_ENDED && rounds < CELL_READ_ROUNDS; rounds++) {
		size_t room = APPL_RUNNER_LINE_MAX + 1 - c->in_len;
		ssize_t n;

		if (room > APPL_RUNNER_READ_BLOCK)
			room = APPL_RUNNER_READ_BLOCK;
		n = read(fd, c->in + c->in_len, room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 0;
		if (n == 0)
			return 1;
		c->in_len += (size_t)n;
		lines_take(c);
	}
	return 0;
}

/* The runner's pipe closed, or the sandbox exited. */
static void ended(struct cell *c)
{
	if (c->phase == PHASE_ENDED)
		return;
	if (c->phase == PHASE_DRAIN && c->in_len == 0) {
		finish(c, NULL, NULL);
		return;
	}
	if (c->phase == PHASE_DRAIN) {
		violation(c, "an unfinished line after done");
		return;
	}
	if (sandbox_oom_killed(c->sb))
		finish(c, "memory", "the sandbox was killed: out of memory");
	else if (c->phase == PHASE_BOOT)
		finish(c, "boot", "the sandbox ended before its runner was ready");
	else if (c->phase == PHASE_IDLE)
		finish(c, "exit", "the sandbox ended while it waited for a cell");
	else
		finish(c, "exit", "the cell ended without finishing (the runner exited)");
}

static void on_readable(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct cell *c = data;
	(void)loop;
	(void)events;

	if (input_read(c, fd))
		ended(c);
}

static void on_exit_event(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct cell *c = data;
	(void)loop;
	(void)fd;
	(void)events;

	/* Take what the runner wrote before it went. */
	input_read(c, sandbox_fd_out(c->sb));
	ended(c);
}

/* Consume a timerfd's expiry; 0 when it really fired. */
static int timer_ack(int fd)
{
	uint64_t ticks;

	return read(fd, &ticks, sizeof(ticks)) == (ssize_t)sizeof(ticks) ? 0 : -1;
}

static void on_deadline(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)events;
	if (timer_ack(fd) == 0)
		finish(data, "deadline", "the cell ran past its deadline");
}

static void on_boot_timer(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct cell *c = data;
	(void)loop;
	(void)events;

	if (timer_ack(fd) < 0)
		return;
	if (c->phase == PHASE_BOOT)
		finish(c, "boot", "the sandbox did not become ready in time");
}

/* The deadline counts from arrival: what is left of it now. */
static void deadline_arm(struct cell *c)
{
	uint64_t now = loop_now_ms();
	uint64_t elapsed = now > c->arrival_ms ? now - c->arrival_ms : 0;

	loop_timer_arm(c->deadline_fd,
		       c->lim.deadline_ms > elapsed ? c->lim.deadline_ms - elapsed : 1);
}

static int watches_add(struct cell *c, struct appl_err *err)
{
	int rc;

	c->deadline_fd = loop_timer_new(err);
	if (c->deadline_fd < 0)
		return c->deadline_fd;
	c->boot_fd = loop_timer_new(err);
	if (c->boot_fd < 0)
		return c->boot_fd;
	loop_timer_arm(c->boot_fd, c->lim.boot_ms);
	if ((rc = loop_add(c->loop, c->deadline_fd, EPOLLIN, on_deadline, c, err)) < 0 ||
	    (rc = loop_add(c->loop, c->boot_fd, EPOLLIN, on_boot_timer, c, err)) < 0 ||
	    (rc = loop_add(c->loop, sandbox_fd_out(c->sb), EPOLLIN, on_readable, c, err)) < 0 ||
	    (rc = loop_add(c->loop, sandbox_fd_in(c->sb), 0, on_writable, c, err)) < 0 ||
	    (rc = loop_add(c->loop, sandbox_pidfd(c->sb), EPOLLIN, on_exit_event, c, err)) < 0)
		return rc;
	return 0;
}

struct cell *cell_boot(struct loop *loop, struct sandbox *sb, const struct cell_limits *lim,
		       const struct cell_hooks *hooks, struct appl_err *err)
{
	struct cell *c = calloc(1, sizeof(*c));

	if (!c) {
		sandbox_destroy(sb);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	c->loop = loop;
	c->sb = sb;
	c->lim = *lim;
	if (hooks)
		c->hooks = *hooks;
	c->arrival_ms = loop_now_ms();
	c->deadline_fd = c->boot_fd = -1;
	c->proto = cell_proto_state_new();
	c->in = malloc(APPL_RUNNER_LINE_MAX + 1);
	if (!c->proto || !c->in) {
		appl_err_set(err, -ENOMEM, "out of memory");
		cell_free(c);
		return NULL;
	}
	if (watches_add(c, err) < 0) {
		cell_free(c);
		return NULL;
	}
	return c;
}

bool cell_idle(const struct cell *c)
{
	return c->phase == PHASE_IDLE;
}

int cell_run(struct cell *c, const char *code, size_t len, const json_t *tools,
	     const struct cell_limits *lim, const struct cell_hooks *hooks, uint64_t arrival_ms,
	     struct appl_err *err)
{
	if (c->code || (c->phase != PHASE_BOOT && c->phase != PHASE_IDLE))
		return appl_err_set(err, -EINVAL, "the cell is not waiting for code");
	c->lim.deadline_ms = lim->deadline_ms;
	c->lim.max_output = lim->max_output;
	c->lim.stop_output = lim->stop_output;
	c->hooks = hooks ? *hooks : (struct cell_hooks){0};
	c->arrival_ms = arrival_ms;
	c->stdout_buf = malloc(c->lim.max_output + 1);
	c->code = malloc(len + 1);
	c->tools = tools ? json_deep_copy(tools) : json_array();
	if (!c->stdout_buf || !c->code || !c->tools) {
		free(c->code);
		c->code = NULL;
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	memcpy(c->code, code, len);
	c->code[len] = '\0';
	c->code_len = len;
	deadline_arm(c);
	if (c->phase == PHASE_IDLE)
		cell_send(c);
	return 0;
}

struct cell *cell_start(struct loop *loop, struct sandbox *sb, const char *code, size_t len,
			const json_t *tools, const struct cell_limits *lim,
			const struct cell_hooks *hooks, uint64_t arrival_ms, struct appl_err *err)
{
	struct cell *c = cell_boot(loop, sb, lim, NULL, err);

	if (!c)
		return NULL;
	if (cell_run(c, code, len, tools, lim, hooks, arrival_ms, err) < 0) {
		cell_free(c);
		return NULL;
	}
	return c;
}

void cell_call_answer(struct cell *c, json_int_t id, const json_t *value)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (c->phase != PHASE_RUNNING)
		return;
	if (cell_proto_result_encode(id, value, &line, &len, &err) < 0) {
		cell_call_refuse(c, id, "the tool's result could not be passed on");
		return;
	}
	send_line(c, line, len);
}

void cell_call_refuse(struct cell *c, json_int_t id, const char *msg)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (c->phase != PHASE_RUNNING)
		return;
	if (cell_proto_error_encode(id, msg, strlen(msg), &line, &len, &err) < 0) {
		finish(c, "internal", err.msg);
		return;
	}
	send_line(c, line, len);
}

void cell_cancel(struct cell *c)
{
	finish(c, "cancelled", "the run was cancelled");
}

bool cell_finished(const struct cell *c)
{
	return c->phase == PHASE_ENDED;
}

const json_t *cell_result(const struct cell *c)
{
	return c->result;
}

void cell_free(struct cell *c)
{
	if (!c)
		return;
	unwatch(c);
	sandbox_destroy_async(c->sb, c->loop);
	if (c->deadline_fd >= 0)
		close(c->deadline_fd);
	if (c->boot_fd >= 0)
		close(c->boot_fd);
	cell_proto_state_free(c->proto);
	json_decref(c->tools);
	json_decref(c->done_error);
	json_decref(c->done_result);
	json_decref(c->result);
	free(c->in);
	free(c->out);
	free(c->stdout_buf);
	free(c->code);
	free(c);
}
