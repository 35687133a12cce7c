/* cell.c: one run of one cell (see cell.h). */
#include "cell/cell.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/utf8.h"
#include "cell/files.h"
#include "cell/proto.h"
#include "loop/lines.h"

enum cell_phase {
	PHASE_BOOT,    /* sandbox starting, waiting for ready */
	PHASE_IDLE,    /* ready, waiting for its code (a pooled sandbox) */
	PHASE_RUNNING, /* cell sent */
	PHASE_DRAIN,   /* done seen; anything more is a violation */
	PHASE_KEPT,    /* a kept cell's run is over: its runner waits for the next */
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
	struct loop_timer *deadline, *boot;
	bool watching_exit;
	bool keep;  /* the runner stays after done (cell_keep) */
	char *code; /* NULL until cell_run */
	size_t code_len;
	json_t *tools;
	json_t *args; /* the next cell line's `args` (cell_set_args); NULL: none */
	/* the runner's protocol: its lines in, ours out (pkg/loop/lines.h) */
	struct lines *io;
	unsigned long lines;	  /* protocol lines from the runner, against max_lines */
	struct loop_task drained; /* after done: the end of that round */
	/* what the code printed */
	char *stdout_buf;
	size_t stdout_len;
	size_t printed;
	bool truncated;
	bool value_cut; /* the final value was over its cap */
	unsigned long calls;
	cell_call_fn caller;
	void *caller_data;
	struct cell_files *files; /* made at the first file entry */
	json_t *done_error, *done_result;
	/* once ended */
	struct cell_outcome outcome;
	bool ended;
	json_t *value;	  /* outcome.value's reference */
	char *error_text; /* outcome.error's copy */
};

void cell_limits_init(struct cell_limits *lim)
{
	lim->deadline_ms = APPL_DEADLINE_S_DEF * 1000ull;
	lim->boot_ms = APPL_BOOT_S_DEF * 1000ull;
	lim->max_output = APPL_MAX_OUTPUT_BYTES_DEF;
	lim->stop_output = APPL_STOP_OUTPUT_BYTES_DEF;
	lim->max_lines = APPL_MAX_RUNNER_LINES_DEF;
	cell_files_limits_init(&lim->files);
}

static void unwatch(struct cell *c)
{
	if (c->io)
		lines_close(c->io);
	if (c->sb && c->watching_exit)
		loop_del(c->loop, sandbox_pidfd(c->sb));
	c->watching_exit = false;
	if (c->deadline)
		loop_timer_set(c->deadline, 0);
	if (c->boot)
		loop_timer_set(c->boot, 0);
	loop_task_cancel(c->loop, &c->drained);
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

/* The final expression's value, or a note when it is over the cap. */
static json_t *result_value(struct cell *c)
{
	char *dump;
	size_t n;

	if (!c->done_result)
		return NULL;
	dump = json_dumps(c->done_result, JSON_COMPACT | JSON_ENCODE_ANY);
	n = dump ? strlen(dump) : 0;
	free(dump);
	if (n > APPL_CELL_RESULT_MAX) {
		c->truncated = true;
		c->value_cut = true;
		return json_string("(result omitted: larger than the cap)");
	}
	return json_incref(c->done_result);
}

/* The outcome of the last run, for a kept cell's next run. */
static void outcome_clear(struct cell *c)
{
	json_decref(c->done_error);
	json_decref(c->done_result);
	json_decref(c->value);
	free(c->error_text);
	c->done_error = c->done_result = c->value = NULL;
	c->error_text = NULL;
	c->outcome = (struct cell_outcome){0};
	c->ended = false;
}

/* The outcome from what the run left (reason and error as finish got
 * them), and its owner told. */
static void outcome_make(struct cell *c, enum cell_reason reason, const char *error)
{
	struct cell_outcome *o = &c->outcome;

	if (error)
		c->error_text = strdup(error);
	else if (c->done_error)
		c->error_text = strdup(json_string_value(c->done_error));
	if ((error || c->done_error) && !c->error_text) { /* out of memory */
		reason = CELL_INTERNAL;
		error = "internal error";
	}
	c->value = reason == CELL_RAN ? result_value(c) : NULL;
	o->out = c->stdout_buf ? c->stdout_buf : "";
	o->out_len = c->stdout_len;
	o->truncated = c->truncated;
	o->value_cut = c->value_cut;
	o->error = c->error_text ? c->error_text : error;
	o->value = c->value;
	o->reason = reason;
	o->calls = c->calls;
	o->duration_ms = loop_now_ms() - c->arrival_ms;
	o->files = reason == CELL_RAN && c->files ? cell_files_list(c->files) : NULL;
	c->ended = true;
	if (c->hooks.on_done)
		c->hooks.on_done(c, c->hooks.data);
}

/* End the run: CELL_RAN for a normal end. The sandbox stays until
 * cell_free, so the answer is not held up by its teardown. */
static void finish(struct cell *c, enum cell_reason reason, const char *error)
{
	if (c->phase == PHASE_ENDED)
		return;
	if (c->phase == PHASE_KEPT) /* it died, or broke the protocol, between runs */
		outcome_clear(c);
	c->phase = PHASE_ENDED;
	unwatch(c);
	if (reason != CELL_RAN && c->sb)
		sandbox_kill(c->sb);
	outcome_make(c, reason, error);
}

/* A kept cell's run is over and its runner waits for the next: the
 * deadline stops, the pipes and the sandbox's exit stay watched (a line
 * now is a violation, an exit ends the cell). */
static void keep_waiting(struct cell *c)
{
	struct appl_err err = {0};

	if (cell_proto_state_again(c->proto, &err) < 0) {
		finish(c, CELL_INTERNAL, err.msg);
		return;
	}
	c->phase = PHASE_KEPT;
	loop_timer_set(c->deadline, 0);
	outcome_make(c, CELL_RAN, NULL);
}

static void violation(struct cell *c, const char *what)
{
	char msg[APPL_ERR_MSG_MAX + 32];

	snprintf(msg, sizeof(msg), "protocol violation: %s", what);
	finish(c, CELL_PROTOCOL, msg);
}

/* Queue a host-to-runner line (steals line). A runner that stops reading
 * while the code floods calls fills the queue: the run is stopped rather
 * than buffered without end. */
static void send_line(struct cell *c, char *line, size_t len)
{
	int rc = lines_write(c->io, line, len);

	free(line);
	if (rc == -ENOBUFS)
		violation(c, "the runner stopped reading its results");
}

/* Send the cell line: the runner is ready and the code is known. */
static void cell_send(struct cell *c)
{
	struct appl_err err = {0};
	char *line;
	size_t len;
	int rc;

	rc = cell_proto_cell_encode(c->code, c->code_len, c->tools, &c->lim.files, c->args, c->keep,
				    &line, &len, &err);
	/* For this line only: a kept cell's next run has none unless given. */
	json_decref(c->args);
	c->args = NULL;
	if (rc < 0) {
		finish(c, CELL_INTERNAL, err.msg);
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
	loop_timer_set(c->boot, 0);
	if (!c->code) {
		c->phase = PHASE_IDLE;
		if (c->hooks.on_ready)
			c->hooks.on_ready(c, c->hooks.data);
		return;
	}
	cell_send(c);
}

/* The runner cannot serve, and says why instead of ready: a failed boot,
 * its words (the image's, never a cell's: no code has run) kept to
 * printable ASCII and FAIL_SAID_MAX bytes for the log. */
#define FAIL_SAID_MAX 512
static void on_fail(struct cell *c, const json_t *error)
{
	char why[FAIL_SAID_MAX + 64], said[FAIL_SAID_MAX];
	const char *s = json_string_value(error);
	size_t n = 0;

	for (size_t i = 0; s[i] && n + 1 < sizeof(said); i++)
		said[n++] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f ? '?' : s[i];
	said[n] = '\0';
	snprintf(why, sizeof(why), "the runner could not get ready: %s", said);
	finish(c, CELL_BOOT, why);
}

static void on_out(struct cell *c, const json_t *data)
{
	size_t len = json_string_length(data);
	char why[128];

	c->printed += len;
	stdout_keep(c, json_string_value(data), len);
	if (c->printed < c->lim.stop_output) {
		if (len && c->hooks.on_progress)
			c->hooks.on_progress(c, c->hooks.data);
		return;
	}
	snprintf(why, sizeof(why),
		 "the cell was stopped when its output reached %zu bytes "
		 "(limits.stop_output_bytes): print less",
		 c->lim.stop_output);
	finish(c, CELL_OUTPUT, why);
}

static void on_call(struct cell *c, const struct cell_msg *m)
{
	json_int_t id = m->u.call.id;

	c->calls++; /* the run's one counter: the bridge's budget reads it */
	if (c->hooks.on_progress)
		c->hooks.on_progress(c, c->hooks.data);
	if (!c->caller) {
		cell_call_refuse(c, id, CELL_ERR_REFUSED, "no tools are available to this cell");
		return;
	}
	c->caller(c->caller_data, id, json_string_value(m->u.call.tool), m->u.call.args,
		  m->u.call.read);
}

/* A file of /out, or a chunk of one, or an entry the runner left out. */
static void on_file(struct cell *c, const struct cell_msg *m)
{
	struct appl_err err = {0};
	int rc = -ENOMEM;

	if (c->files || (c->files = cell_files_new(&c->lim.files)))
		rc = cell_files_feed(c->files, m, &err);
	if (rc == -ENOMEM)
		finish(c, CELL_INTERNAL, "out of memory");
	else if (rc < 0)
		violation(c, err.msg);
}

static void on_done(struct cell *c, const struct cell_msg *m)
{
	c->done_error = m->u.done.error ? json_incref(m->u.done.error) : NULL;
	c->done_result = json_incref(m->u.done.result);
	/* Lines after done are a violation: those that came with it, in this
	 * round, are judged, then the run ends at the round's end. The
	 * runner's exit is not waited for: its sandbox is destroyed anyway. */
	c->phase = PHASE_DRAIN;
	loop_defer(c->loop, &c->drained);
}

static void on_drained(void *data)
{
	struct cell *c = data;

	if (c->phase != PHASE_DRAIN)
		return;
	if (lines_buffered(c->io)) {
		violation(c, "an unfinished line after done");
	} else if (c->keep) {
		keep_waiting(c);
	} else {
		/* The runner exits right after done: runsc may end by itself. */
		sandbox_ending(c->sb);
		finish(c, CELL_RAN, NULL);
	}
}

static void line_handle(struct cell *c, const char *buf, size_t len)
{
	struct cell_msg m = {0};
	struct appl_err err = {0};
	char why[96];

	if (c->phase == PHASE_DRAIN || c->phase == PHASE_KEPT) {
		violation(c, c->phase == PHASE_KEPT ? "a message between cells"
						    : "a message after done");
		return;
	}
	/* Every line costs: one that counts toward no other cap (an empty
	 * `out`, a call refused at once) must not be free to send without
	 * end. */
	if (++c->lines > c->lim.max_lines) {
		snprintf(why, sizeof(why), "more than %lu protocol lines in one run",
			 (unsigned long)c->lim.max_lines);
		violation(c, why);
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
	case CELL_MSG_FILE:
		on_file(c, &m);
		break;
	case CELL_MSG_FAIL:
		on_fail(c, m.u.fail.error);
		break;
	default:
		violation(c, "unexpected message");
		break;
	}
	cell_proto_msg_clear(&m);
}

/* The runner's pipe closed, or the sandbox exited. */
static void ended(struct cell *c)
{
	if (c->phase == PHASE_ENDED)
		return;
	if (c->phase == PHASE_DRAIN && lines_buffered(c->io) == 0) {
		finish(c, CELL_RAN, NULL);
		return;
	}
	if (c->phase == PHASE_DRAIN) {
		violation(c, "an unfinished line after done");
		return;
	}
	if (sandbox_oom_killed(c->sb))
		finish(c, CELL_MEMORY, "the sandbox was killed: out of memory");
	else if (c->phase == PHASE_BOOT)
		finish(c, CELL_BOOT, "the sandbox ended before its runner was ready");
	else if (c->phase == PHASE_IDLE || c->phase == PHASE_KEPT)
		finish(c, CELL_EXIT, "the sandbox ended while it waited for a cell");
	else
		finish(c, CELL_EXIT, "the cell ended without finishing (the runner exited)");
}

static void on_line(struct lines *l, const char *line, size_t len, void *data)
{
	(void)l;
	line_handle(data, line, len);
}

static void on_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	(void)l;
	(void)head;
	(void)len;
	violation(data, "a line longer than the cap");
}

static void on_io_end(struct lines *l, const char *why, void *data)
{
	struct cell *c = data;
	(void)l;

	/* The runner closed its input while it had work: gone, or hostile. */
	if (strcmp(why, "write error") == 0 && c->phase == PHASE_RUNNING)
		violation(c, "the runner closed its input");
	else
		ended(c);
}

static void on_exit_event(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct cell *c = data;
	(void)loop;
	(void)fd;
	(void)events;

	/* Take what the runner wrote before it went (at most a pipe's worth
	 * and a line), then judge the end. */
	lines_pump(c->io, APPL_RUNNER_LINE_MAX + 1 + 64 * 1024);
	ended(c);
}

static void on_deadline(void *data)
{
	struct cell *c = data;
	unsigned long long ms = c->lim.deadline_ms;
	char why[160];

	snprintf(why, sizeof(why),
		 "the cell was stopped at its deadline, %llu %s after the request came "
		 "(limits.deadline_s): do less in one cell, or split the work across cells",
		 ms % 1000 ? ms : ms / 1000, ms % 1000 ? "ms" : "s");
	finish(c, CELL_DEADLINE, why);
}

static void on_boot_timer(void *data)
{
	struct cell *c = data;
	char why[160];

	if (c->phase != PHASE_BOOT)
		return;
	snprintf(why, sizeof(why),
		 "the sandbox did not become ready within %llu ms (limits.boot_s): a slow host "
		 "(nested virtualisation, emulation, the ptrace platform) may need more",
		 (unsigned long long)c->lim.boot_ms);
	finish(c, CELL_BOOT, why);
}

/* The deadline counts from arrival: what is left of it now. */
static void deadline_arm(struct cell *c)
{
	uint64_t now = loop_now_ms();
	uint64_t elapsed = now > c->arrival_ms ? now - c->arrival_ms : 0;

	loop_timer_set(c->deadline,
		       c->lim.deadline_ms > elapsed ? c->lim.deadline_ms - elapsed : 1);
}

static int watches_add(struct cell *c, struct appl_err *err)
{
	struct lines_config cfg = {.line_max = APPL_RUNNER_LINE_MAX,
				   .queue_max = APPL_RUNNER_OUTBUF_MAX,
				   .overlong = LINES_OVERLONG_STOP};
	struct lines_hooks hooks = {
		.on_line = on_line, .on_overlong = on_overlong, .on_end = on_io_end, .data = c};

	if (!(c->deadline = loop_timer_new(c->loop, on_deadline, c, err)) ||
	    !(c->boot = loop_timer_new(c->loop, on_boot_timer, c, err)))
		return err ? err->code : -ENOMEM;
	loop_timer_set(c->boot, c->lim.boot_ms);
	c->io = lines_new(c->loop, sandbox_fd_out(c->sb), sandbox_fd_in(c->sb), &cfg, &hooks, err);
	if (!c->io)
		return err ? err->code : -ENOMEM;
	if (loop_add(c->loop, sandbox_pidfd(c->sb), EPOLLIN, on_exit_event, c, err) < 0)
		return err ? err->code : -ENOMEM;
	c->watching_exit = true;
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
	loop_task_init(&c->drained, on_drained, c);
	c->proto = cell_proto_state_new();
	if (!c->proto) {
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

void cell_wake(struct cell *c)
{
	char *line = strdup(CELL_PROTO_WAKE_LINE);

	if (!line) {
		finish(c, CELL_INTERNAL, "out of memory");
		return;
	}
	send_line(c, line, strlen(line));
}

struct sandbox *cell_sandbox(const struct cell *c)
{
	return c->sb;
}

bool cell_idle(const struct cell *c)
{
	return c->phase == PHASE_IDLE;
}

void cell_keep(struct cell *c)
{
	c->keep = true;
}

bool cell_kept(const struct cell *c)
{
	return c->phase == PHASE_KEPT;
}

void cell_set_hooks(struct cell *c, const struct cell_hooks *hooks)
{
	c->hooks = hooks ? *hooks : (struct cell_hooks){0};
}

int cell_set_args(struct cell *c, const json_t *args)
{
	if (args && !json_is_object(args))
		return -EINVAL;
	json_decref(c->args);
	c->args = json_incref((json_t *)args);
	return 0;
}

/* What a kept cell's last run left, before its next. */
static void run_clear(struct cell *c)
{
	outcome_clear(c);
	free(c->code);
	free(c->stdout_buf);
	json_decref(c->tools);
	cell_files_free(c->files);
	c->code = c->stdout_buf = NULL;
	c->tools = NULL;
	c->files = NULL;
	c->code_len = c->stdout_len = c->printed = 0;
	c->truncated = false;
	c->value_cut = false;
	c->calls = c->lines = 0;
	c->phase = PHASE_IDLE;
}

int cell_run(struct cell *c, const char *code, size_t len, const json_t *tools,
	     const struct cell_limits *lim, const struct cell_hooks *hooks, uint64_t arrival_ms,
	     struct appl_err *err)
{
	if (c->phase == PHASE_KEPT)
		run_clear(c);
	if (c->code || (c->phase != PHASE_BOOT && c->phase != PHASE_IDLE))
		return appl_err_set(err, -EINVAL, "the cell is not waiting for code");
	c->lim.deadline_ms = lim->deadline_ms;
	c->lim.max_output = lim->max_output;
	c->lim.stop_output = lim->stop_output;
	c->lim.max_lines = lim->max_lines;
	c->lim.files = lim->files;
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
		cell_call_refuse(c, id, CELL_ERR_ERROR, "the tool's result could not be passed on");
		return;
	}
	send_line(c, line, len);
}

void cell_call_refuse(struct cell *c, json_int_t id, enum cell_error_kind kind, const char *msg)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (c->phase != PHASE_RUNNING)
		return;
	if (cell_proto_error_encode(id, kind, msg, strlen(msg), &line, &len, &err) < 0) {
		finish(c, CELL_INTERNAL, err.msg);
		return;
	}
	send_line(c, line, len);
}

void cell_cancel(struct cell *c)
{
	finish(c, CELL_CANCELLED, "the run was cancelled");
}

bool cell_finished(const struct cell *c)
{
	return c->phase == PHASE_ENDED;
}

const struct cell_outcome *cell_outcome(const struct cell *c)
{
	return c->ended ? &c->outcome : NULL;
}

unsigned long cell_calls(const struct cell *c)
{
	return c->calls;
}

const char *cell_output(const struct cell *c, size_t *len)
{
	*len = c->stdout_len;
	return c->stdout_buf ? c->stdout_buf : "";
}

void cell_set_caller(struct cell *c, cell_call_fn fn, void *data)
{
	c->caller = fn;
	c->caller_data = data;
}

const char *cell_sandbox_id(const struct cell *c)
{
	return c->sb ? sandbox_id(c->sb) : "";
}

void cell_free(struct cell *c)
{
	if (!c)
		return;
	unwatch(c);
	lines_free(c->io); /* before the sandbox's descriptors close */
	loop_timer_free(c->deadline);
	loop_timer_free(c->boot);
	sandbox_destroy_async(c->sb, c->loop);
	cell_proto_state_free(c->proto);
	cell_files_free(c->files);
	json_decref(c->tools);
	json_decref(c->args);
	json_decref(c->done_error);
	json_decref(c->done_result);
	json_decref(c->value);
	free(c->error_text);
	free(c->stdout_buf);
	free(c->code);
	free(c);
}
