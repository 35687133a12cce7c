/* lines.c: the framing primitive (see lines.h). */
#include "loop/lines.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINES_READ_CHUNK (64u * 1024) /* one read() */
#define LINES_HEAD_DEF	 256u

struct lines {
	struct loop *loop;
	int in_fd, out_fd;
	struct lines_config cfg;
	struct lines_hooks hooks;
	/* input: in[start..in_len) not delivered yet; no '\n' in
	 * in[start..scan) that has not been delivered */
	char *in;
	size_t in_len, in_cap, start, scan;
	bool skipping; /* inside an over-long line, dropping to its newline */
	/* this round's share */
	uint64_t round;
	size_t used_bytes;
	unsigned used_lines;
	struct loop_task more;	 /* lines left for the next round */
	struct loop_task reap;	 /* lines_destroy */
	struct loop_task broken; /* a write error, handled from the loop */
	/* output: out[out_off..out_len) to write */
	char *out;
	size_t out_len, out_off, out_cap;
	bool closed, ended, same_fd, watching_out, write_failed;
	bool out_blocking; /* out_fd cannot be watched (a regular file): plain writes */
	/* in_fd cannot be watched (a regular file, /dev/null): it never
	 * blocks, so it is read a share a round, driven by the more task */
	bool in_nopoll;
	bool held;    /* lines_hold: nothing read or delivered */
	bool in_done; /* on_input_end: the input ended, the output goes on */
};

static void service(struct lines *l, bool pump, size_t pump_max);

static void end(struct lines *l, const char *why)
{
	if (l->ended || l->closed)
		return;
	l->ended = true;
	lines_close(l);
	if (l->hooks.on_end)
		l->hooks.on_end(l, why, l->hooks.data);
}

void lines_end(struct lines *l, const char *why)
{
	end(l, why);
}

static int grow(char **buf, size_t *cap, size_t need, size_t max)
{
	size_t c = *cap ? *cap : 4096;
	char *p;

	if (need > max)
		return -ENOBUFS;
	while (c < need)
		c = c > max / 2 ? max : c * 2;
	p = realloc(*buf, c);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = c;
	return 0;
}

/* ---- input ---------------------------------------------------------------- */

static void share_reset(struct lines *l)
{
	uint64_t r = loop_round(l->loop);

	if (r != l->round) {
		l->round = r;
		l->used_bytes = 0;
		l->used_lines = 0;
	}
}

static bool share_left(const struct lines *l, bool pump)
{
	return pump || (l->used_bytes < l->cfg.round_bytes && l->used_lines < l->cfg.round_lines);
}

/* An over-long line whose first bytes are at head: the policy decides.
 * Returns false when reading stops. */
static bool overlong(struct lines *l, const char *head, size_t have)
{
	size_t n = have < l->cfg.head_max ? have : l->cfg.head_max;

	if (n > l->cfg.line_max)
		n = l->cfg.line_max;
	if (l->cfg.overlong == LINES_OVERLONG_END) {
		end(l, "a line longer than the cap");
		return false;
	}
	if (l->hooks.on_overlong)
		l->hooks.on_overlong(l, head, n, l->hooks.data);
	if (l->cfg.overlong == LINES_OVERLONG_STOP) {
		lines_close(l);
		return false;
	}
	return !l->closed;
}

/* The over-long line being skipped has ended. */
static void skipped(struct lines *l)
{
	if (!l->closed && l->hooks.on_skipped)
		l->hooks.on_skipped(l, l->hooks.data);
}

/* Deliver the complete lines in the buffer, within the share. */
static void deliver(struct lines *l, bool pump)
{
	if (!l->in)
		return; /* nothing read yet */
	while (!l->closed && !l->held && (pump || l->used_lines < l->cfg.round_lines)) {
		char *nl = memchr(l->in + l->scan, '\n', l->in_len - l->scan);
		size_t len;

		if (!nl) {
			l->scan = l->in_len;
			break;
		}
		len = (size_t)(nl - (l->in + l->start));
		l->used_lines++;
		if (len > l->cfg.line_max) {
			const char *head = l->in + l->start;

			l->start = l->scan = (size_t)(nl - l->in) + 1;
			if (!overlong(l, head, len))
				return;
			skipped(l); /* it came whole */
			continue;
		}
		l->start = l->scan = (size_t)(nl - l->in) + 1;
		l->hooks.on_line(l, l->in + l->start - len - 1, len, l->hooks.data);
	}
	if (l->start == l->in_len)
		l->start = l->scan = l->in_len = 0;
}

/* Whether a complete line waits in the buffer. */
static bool line_waiting(const struct lines *l)
{
	return l->in && memchr(l->in + l->scan, '\n', l->in_len - l->scan) != NULL;
}

/* The partial line at the buffer's end, once it is past the cap. Returns
 * false when reading stops. */
static bool partial_check(struct lines *l)
{
	size_t have = l->in_len - l->start;

	if (have <= l->cfg.line_max)
		return true;
	if (!overlong(l, l->in + l->start, have))
		return false;
	/* SKIP: what was read of it goes; the rest is dropped as it comes. */
	l->start = l->scan = l->in_len = 0;
	l->skipping = true;
	return true;
}

/* Bytes just read at in[in_len - n..in_len) while skipping: keep what
 * follows the over-long line's newline, if it came. */
static void skip_take(struct lines *l, size_t n)
{
	char *from = l->in + l->in_len - n;
	char *nl = memchr(from, '\n', n);

	if (!nl) {
		l->in_len -= n;
		return;
	}
	l->skipping = false;
	l->start = l->scan = (size_t)(nl - l->in) + 1;
	skipped(l);
}

/* Make room for one read; compacting first. 0, or -1 when out of memory. */
static int room_make(struct lines *l, size_t want)
{
	if (l->start > 0) {
		memmove(l->in, l->in + l->start, l->in_len - l->start);
		l->in_len -= l->start;
		l->scan -= l->start;
		l->start = 0;
	}
	if (l->in_cap - l->in_len >= want)
		return 0;
	return grow(&l->in, &l->in_cap, l->in_len + want, l->cfg.line_max + 1 + LINES_READ_CHUNK);
}

/* One read. Returns the bytes read, 0 when there is nothing (EAGAIN), -1 at
 * end of input (ended). */
/* The input ended and the owner keeps the output (on_input_end): the
 * input is no longer watched or read. */
static void input_done(struct lines *l)
{
	l->in_done = true;
	loop_task_cancel(l->loop, &l->more);
	if (!l->in_nopoll)
		loop_del(l->loop, l->in_fd);
	l->hooks.on_input_end(l, l->hooks.data);
}

static ssize_t read_once(struct lines *l, bool pump, size_t pump_left)
{
	size_t want = LINES_READ_CHUNK;
	ssize_t n;

	if (!pump && l->cfg.round_bytes - l->used_bytes < want)
		want = l->cfg.round_bytes - l->used_bytes;
	if (pump && pump_left < want)
		want = pump_left;
	if (room_make(l, want) < 0) {
		end(l, "out of memory");
		return -1;
	}
	do
		n = read(l->in_fd, l->in + l->in_len, want);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n == 0 && l->cfg.final_line && !l->skipping && l->in_len > l->start &&
	    !line_waiting(l)) {
		/* A last line without its newline (a log that ends mid-line). */
		size_t len = l->in_len - l->start, at = l->start;

		l->start = l->scan = l->in_len = 0;
		if (len > l->cfg.line_max)
			overlong(l, l->in + at, len);
		else
			l->hooks.on_line(l, l->in + at, len, l->hooks.data);
		/* Held by it: the end is read again once reading goes on. */
		if (l->held && !l->closed)
			return 0;
	}
	if (n == 0 && l->hooks.on_input_end && !l->same_fd) {
		input_done(l);
		return -1;
	}
	if (n <= 0) {
		end(l, n == 0 ? "end of input" : "read error");
		return -1;
	}
	l->in_len += (size_t)n;
	l->used_bytes += (size_t)n;
	return n;
}

static void service(struct lines *l, bool pump, size_t pump_max)
{
	size_t pumped = 0;

	share_reset(l);
	deliver(l, pump);
	/* A partial line left from a round that ran out of its share. */
	if (!l->closed && !l->held && !l->skipping && !line_waiting(l) && !partial_check(l))
		return;
	while (!l->closed && !l->held && !l->in_done && share_left(l, pump) && !line_waiting(l) &&
	       (!pump || pumped < pump_max)) {
		ssize_t n = read_once(l, pump, pump_max - pumped);

		if (n <= 0)
			break;
		pumped += (size_t)n;
		if (l->skipping)
			skip_take(l, (size_t)n);
		deliver(l, pump);
		/* Only once every complete line is out is the rest one partial
		 * line, to be judged against the cap. */
		if (!l->closed && !l->skipping && !line_waiting(l) && !partial_check(l))
			return;
	}
	/* Lines read and not delivered: the next round goes on with them even
	 * when the descriptor has nothing new to say. An input the loop cannot
	 * watch is read on in the next round, until its end. */
	if (!l->closed && !l->held && (line_waiting(l) || (l->in_nopoll && !l->in_done)))
		loop_next(l->loop, &l->more);
}

static void on_more(void *data)
{
	service(data, false, 0);
}

int lines_pump(struct lines *l, size_t max_bytes)
{
	if (l->closed)
		return l->ended;
	service(l, true, max_bytes);
	return l->ended;
}

/* ---- output --------------------------------------------------------------- */

static void watch_update(struct lines *l)
{
	uint32_t ev;
	bool want_out = l->out_len > l->out_off;

	if (l->closed || l->out_blocking || l->out_fd < 0 || want_out == l->watching_out)
		return;
	l->watching_out = want_out;
	ev = (want_out ? EPOLLOUT : 0) | (l->same_fd && !l->held ? EPOLLIN : 0);
	loop_mod(l->loop, l->out_fd, ev);
}

void lines_hold(struct lines *l, bool hold)
{
	if (l->closed || l->held == hold)
		return;
	l->held = hold;
	if (hold)
		loop_task_cancel(l->loop, &l->more);
	else
		loop_next(l->loop, &l->more); /* what waits in the buffer, then more */
	if (l->in_fd < 0 || l->in_nopoll || l->in_done)
		return;
	loop_mod(l->loop, l->in_fd,
		 (hold ? 0 : EPOLLIN) | (l->same_fd && l->watching_out ? EPOLLOUT : 0));
}

/* The peer stopped reading for good: what it wrote before still counts
 * (an answer sent just before it went), so its input is read first. From
 * the loop, never inside lines_write: the owner's hooks must not run in
 * the middle of the owner's own call. */
static void on_broken(void *data)
{
	struct lines *l = data;

	if (l->closed)
		return;
	if (l->in_fd >= 0)
		service(l, true, l->cfg.line_max + 1 + LINES_READ_CHUNK);
	end(l, "write error");
}

/* Write what the queue holds, as far as the peer takes it. Returns true
 * when it emptied a queue that held something. */
static bool out_flush(struct lines *l)
{
	bool had = l->out_off < l->out_len;

	while (l->out_off < l->out_len) {
		ssize_t n = write(l->out_fd, l->out + l->out_off, l->out_len - l->out_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			l->write_failed = true;
			l->out_off = l->out_len = 0;
			watch_update(l);
			loop_defer(l->loop, &l->broken);
			return false;
		}
		l->out_off += (size_t)n;
	}
	if (l->out_off == l->out_len)
		l->out_off = l->out_len = 0;
	watch_update(l);
	return had && l->out_len == 0;
}

int lines_write(struct lines *l, const char *data, size_t len)
{
	if (l->ended || l->closed || l->out_fd < 0 || l->write_failed)
		return -EPIPE;
	if (l->out_off > 0) {
		memmove(l->out, l->out + l->out_off, l->out_len - l->out_off);
		l->out_len -= l->out_off;
		l->out_off = 0;
	}
	if (len > l->cfg.queue_max - l->out_len)
		return -ENOBUFS;
	if (grow(&l->out, &l->out_cap, l->out_len + len, l->cfg.queue_max) < 0)
		return -ENOBUFS;
	memcpy(l->out + l->out_len, data, len);
	l->out_len += len;
	out_flush(l);
	return 0;
}

size_t lines_pending(const struct lines *l)
{
	return l->out_len - l->out_off;
}

/* ---- the watches ---------------------------------------------------------- */

static void on_event(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct lines *l = data;
	(void)loop;

	/* on_flushed only from here: from inside lines_write the owner is in
	 * the middle of its own work and knows the queue's state. */
	if (fd == l->out_fd && (events & (EPOLLOUT | EPOLLERR)) && l->out_len > l->out_off &&
	    out_flush(l) && l->hooks.on_flushed && !l->closed)
		l->hooks.on_flushed(l, l->hooks.data);
	if (fd == l->in_fd && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !l->closed &&
	    !l->held && !l->in_done)
		service(l, false, 0);
}

static void on_reap(void *data)
{
	lines_free(data);
}

static void config_fill(struct lines_config *c)
{
	if (c->line_max == 0)
		c->line_max = 1;
	if (c->head_max == 0)
		c->head_max = LINES_HEAD_DEF;
	if (c->round_bytes == 0)
		c->round_bytes = LINES_ROUND_BYTES;
	if (c->round_lines == 0)
		c->round_lines = LINES_ROUND_LINES;
}

static int watches_add(struct lines *l, struct appl_err *err)
{
	if (l->in_fd >= 0 && loop_add(l->loop, l->in_fd, EPOLLIN, on_event, l, err) < 0) {
		if (!err || err->code != -EPERM) {
			appl_err_prefix(err, "input");
			return -1;
		}
		/* A regular file or /dev/null: always ready, never blocking. */
		l->in_nopoll = true;
		if (l->same_fd)
			l->out_blocking = true;
		loop_next(l->loop, &l->more);
	}
	if (l->out_fd < 0 || l->same_fd)
		return 0;
	if (loop_add(l->loop, l->out_fd, 0, on_event, l, err) < 0) {
		if (err && err->code != -EPERM) {
			if (l->in_fd >= 0)
				loop_del(l->loop, l->in_fd);
			return -1;
		}
		/* A regular file as output: it never blocks, so write it plainly. */
		fcntl(l->out_fd, F_SETFL, fcntl(l->out_fd, F_GETFL) & ~O_NONBLOCK);
		l->out_blocking = true;
	}
	return 0;
}

struct lines *lines_new(struct loop *loop, int in_fd, int out_fd, const struct lines_config *cfg,
			const struct lines_hooks *hooks, struct appl_err *err)
{
	struct lines *l = calloc(1, sizeof(*l));

	if (!l) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	l->loop = loop;
	l->in_fd = in_fd;
	l->out_fd = out_fd;
	l->cfg = *cfg;
	config_fill(&l->cfg);
	l->hooks = *hooks;
	l->same_fd = in_fd >= 0 && in_fd == out_fd;
	l->round = loop_round(loop);
	loop_task_init(&l->more, on_more, l);
	loop_task_init(&l->reap, on_reap, l);
	loop_task_init(&l->broken, on_broken, l);
	if (in_fd >= 0)
		fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
	if (out_fd >= 0)
		fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
	if (watches_add(l, err) < 0) {
		loop_task_cancel(loop, &l->more);
		free(l);
		return NULL;
	}
	return l;
}

void lines_set_line_max(struct lines *l, size_t line_max)
{
	l->cfg.line_max = line_max ? line_max : 1;
}

void lines_close(struct lines *l)
{
	if (l->closed)
		return;
	l->closed = true;
	loop_task_cancel(l->loop, &l->more);
	loop_task_cancel(l->loop, &l->broken);
	if (l->in_fd >= 0 && !l->in_nopoll && !l->in_done)
		loop_del(l->loop, l->in_fd);
	if (l->out_fd >= 0 && !l->same_fd && !l->out_blocking)
		loop_del(l->loop, l->out_fd);
}

bool lines_closed(const struct lines *l)
{
	return l->closed;
}

size_t lines_buffered(const struct lines *l)
{
	return l->in_len - l->start;
}

size_t lines_partial(const struct lines *l, const char **line)
{
	if (!l->in || l->skipping || line_waiting(l))
		return 0;
	*line = l->in + l->start;
	return l->in_len - l->start;
}

int lines_drain(struct lines *l, int timeout_ms)
{
	uint64_t until = loop_now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	while (l->out_off < l->out_len) {
		struct pollfd p = {.fd = l->out_fd, .events = POLLOUT};
		uint64_t now = loop_now_ms();
		ssize_t n;

		if (now >= until || poll(&p, 1, (int)(until - now)) <= 0)
			return -ETIMEDOUT;
		n = write(l->out_fd, l->out + l->out_off, l->out_len - l->out_off);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0)
			return -EPIPE;
		l->out_off += (size_t)n;
	}
	return 0;
}

void lines_free(struct lines *l)
{
	if (!l)
		return;
	lines_close(l);
	loop_task_cancel(l->loop, &l->reap);
	free(l->in);
	free(l->out);
	free(l);
}

void lines_destroy(struct lines *l)
{
	if (!l)
		return;
	lines_close(l);
	loop_defer(l->loop, &l->reap);
}
