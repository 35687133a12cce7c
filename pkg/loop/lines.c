/* lines.c: capped line reader and bounded writer (see lines.h). */
#include "loop/lines.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINES_READ_BLOCK  (64 * 1024)
#define LINES_READ_ROUNDS 16 /* blocks per wakeup, for fairness */

struct lines {
	struct loop *loop;
	int in_fd, out_fd;
	size_t line_max, queue_max;
	struct lines_hooks hooks;
	char *in;
	size_t in_len, in_cap;
	char *out;
	size_t out_len, out_off, out_cap;
	bool closed, ended, same_fd;
	bool out_blocking; /* out_fd cannot be watched (a regular file): plain writes */
};

static void end(struct lines *l, const char *why)
{
	if (l->ended)
		return;
	l->ended = true;
	lines_close(l);
	if (l->hooks.on_end)
		l->hooks.on_end(l, why, l->hooks.data);
}

static int grow(char **buf, size_t *cap, size_t need, size_t max)
{
	size_t c = *cap ? *cap : 4096;
	char *p;

	while (c < need)
		c *= 2;
	if (c > max)
		c = max;
	if (c < need)
		return -ENOBUFS;
	p = realloc(*buf, c);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = c;
	return 0;
}

static void lines_take(struct lines *l)
{
	size_t start = 0;

	for (size_t i = 0; i < l->in_len && !l->closed; i++) {
		if (l->in[i] != '\n')
			continue;
		l->hooks.on_line(l, l->in + start, i - start, l->hooks.data);
		start = i + 1;
	}
	if (l->closed)
		return;
	memmove(l->in, l->in + start, l->in_len - start);
	l->in_len -= start;
	if (l->in_len > l->line_max)
		end(l, "a line longer than the cap");
}

static void on_readable(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct lines *l = data;
	(void)loop;
	(void)events;

	for (int round = 0; round < LINES_READ_ROUNDS && !l->closed; round++) {
		ssize_t n;

		if (l->in_cap - l->in_len < LINES_READ_BLOCK &&
		    grow(&l->in, &l->in_cap, l->in_len + LINES_READ_BLOCK,
			 l->line_max + 1 + LINES_READ_BLOCK) < 0) {
			end(l, "out of memory");
			return;
		}
		n = read(fd, l->in + l->in_len, l->in_cap - l->in_len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			end(l, n == 0 ? "end of input" : "read error");
			return;
		}
		l->in_len += (size_t)n;
		lines_take(l);
	}
}

static void out_flush(struct lines *l)
{
	while (l->out_off < l->out_len) {
		ssize_t n = write(l->out_fd, l->out + l->out_off, l->out_len - l->out_off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			end(l, "write error");
			return;
		}
		l->out_off += (size_t)n;
	}
	if (l->out_off == l->out_len)
		l->out_off = l->out_len = 0;
	if (!l->closed && !l->same_fd && !l->out_blocking)
		loop_mod(l->loop, l->out_fd, l->out_len ? EPOLLOUT : 0);
}

static void on_writable(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)fd;
	(void)events;
	out_flush(data);
}

int lines_write(struct lines *l, const char *data, size_t len)
{
	if (l->ended)
		return -EPIPE;
	if (l->out_off > 0) {
		memmove(l->out, l->out + l->out_off, l->out_len - l->out_off);
		l->out_len -= l->out_off;
		l->out_off = 0;
	}
	if (grow(&l->out, &l->out_cap, l->out_len + len, l->queue_max) < 0) {
		/* A peer that stops reading is dropped, not buffered for. */
		end(l, "the peer stopped reading");
		return -ENOBUFS;
	}
	memcpy(l->out + l->out_len, data, len);
	l->out_len += len;
	out_flush(l);
	return 0;
}

size_t lines_pending(const struct lines *l)
{
	return l->out_len - l->out_off;
}

struct lines *lines_new(struct loop *loop, int in_fd, int out_fd, size_t line_max, size_t queue_max,
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
	l->line_max = line_max;
	l->queue_max = queue_max;
	l->hooks = *hooks;
	l->same_fd = in_fd == out_fd;
	fcntl(in_fd, F_SETFL, fcntl(in_fd, F_GETFL) | O_NONBLOCK);
	fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) | O_NONBLOCK);
	if (loop_add(loop, in_fd, EPOLLIN, on_readable, l, err) < 0) {
		appl_err_prefix(err, "input (it must be a pipe or a socket)");
		free(l);
		return NULL;
	}
	if (!l->same_fd && loop_add(loop, out_fd, 0, on_writable, l, err) < 0) {
		if (err && err->code != -EPERM) {
			loop_del(loop, in_fd);
			free(l);
			return NULL;
		}
		/* A regular file as output: it never blocks, so write it plainly. */
		fcntl(out_fd, F_SETFL, fcntl(out_fd, F_GETFL) & ~O_NONBLOCK);
		l->out_blocking = true;
	}
	return l;
}

void lines_close(struct lines *l)
{
	if (l->closed)
		return;
	l->closed = true;
	loop_del(l->loop, l->in_fd);
	if (!l->same_fd && !l->out_blocking)
		loop_del(l->loop, l->out_fd);
}

bool lines_closed(const struct lines *l)
{
	return l->closed;
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
	free(l->in);
	free(l->out);
	free(l);
}
