/* fuzz_lines.c: the framing primitive (pkg/loop/lines.h) on hostile bytes.
 *
 * The first bytes choose a configuration (the cap, the over-long policy,
 * the head shown, the share per round, whether a final line counts); the
 * rest is the peer's stream, written into a pipe in chunks whose sizes the
 * input also chooses, with loop rounds and pumps in between, then closed.
 * Every line delivered must be at most the cap and hold no newline, every
 * head at most the head size and the cap; nothing may be held past a line
 * and a read; nothing is delivered while the reader is held (it may be, after
 * any line, and go on after any chunk); and at the end every byte is
 * accounted for. The id sniffer
 * runs on every head, as the client and upstream readers run it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonrpc/jsonrpc.h"
#include "loop/lines.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	struct lines_config cfg;
	int ended;
	bool hold; /* hold after a line that starts with an odd byte */
	bool held;
};

static void on_line(struct lines *l, const char *line, size_t len, void *data)
{
	struct seen *s = data;

	if (len > s->cfg.line_max || memchr(line, '\n', len) || s->held)
		abort(); /* nothing is delivered while held */
	if (s->hold && len && (line[0] & 1)) {
		lines_hold(l, true);
		s->held = true;
	}
}

static void on_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	struct seen *s = data;
	json_t *id;
	(void)l;

	if (len > s->cfg.head_max || len > s->cfg.line_max)
		abort();
	id = jsonrpc_id_sniff(head, len);
	if (id && !jsonrpc_id_valid(id))
		abort();
	json_decref(id);
	(void)jsonrpc_method_sniffed(head, len);
}

static void on_end(struct lines *l, const char *why, void *data)
{
	struct seen *s = data;
	(void)l;
	(void)why;

	if (s->ended++)
		abort(); /* at most once */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum lines_overlong policies[] = {LINES_OVERLONG_END, LINES_OVERLONG_SKIP,
						       LINES_OVERLONG_STOP};
	struct seen s = {0};
	struct lines_hooks h = {
		.on_line = on_line, .on_overlong = on_overlong, .on_end = on_end, .data = &s};
	struct loop *loop;
	struct lines *l;
	int p[2];
	size_t at = 6;

	if (size < at)
		return 0;
	s.cfg.line_max = 1 + data[0] % 200;
	s.cfg.overlong = policies[data[1] % 3];
	s.cfg.head_max = 1 + data[2] % 64;
	s.cfg.round_lines = 1 + data[3] % 8;
	s.cfg.round_bytes = 1 + (size_t)data[4] * 16;
	s.cfg.final_line = data[5] & 1;
	s.hold = data[5] & 2;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return 0;
	loop = loop_new(NULL);
	l = loop ? lines_new(loop, p[0], -1, &s.cfg, &h, NULL) : NULL;
	while (l && at < size) {
		size_t chunk = 1 + data[at] % 97;
		at++;
		if (chunk > size - at)
			chunk = size - at;
		if (chunk && write(p[1], data + at, chunk) < 0)
			break;
		at += chunk;
		if (s.held && (chunk & 2)) {
			s.held = false;
			lines_hold(l, false);
		}
		if (chunk & 1)
			loop_run_once(loop, 0);
		else
			lines_pump(l, 64);
		if (lines_buffered(l) > s.cfg.line_max + 65536)
			abort();
	}
	close(p[1]);
	for (int i = 0; l && i < 64 && !lines_closed(l); i++) {
		if (s.held) {
			s.held = false;
			lines_hold(l, false);
		}
		loop_run_once(loop, 0);
	}
	lines_free(l);
	loop_free(loop);
	close(p[0]);
	return 0;
}
