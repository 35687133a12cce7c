#define _GNU_SOURCE
/* test_lines.c: the framing primitive (pkg/loop/lines.h): lines across
 * reads, the cap and each over-long policy, end of input mid-line, the
 * per-round share and fairness between peers, the bounded writer, input
 * from a file, holding. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "loop/lines.h"
#include "loop/loop.h"

struct peer {
	struct loop *loop;
	struct lines *l;
	int p[2]; /* we write p[1]; lines reads p[0] */
	char last[256];
	size_t last_len;
	unsigned lines, overlongs, skipped;
	char head[64];
	size_t head_len;
	const char *ended;
	unsigned flushed, input_ends;
	bool destroy_on_line;
	bool hold_on_line; /* lines_hold after each line */
};

static void on_line(struct lines *l, const char *line, size_t len, void *data)
{
	struct peer *p = data;

	p->lines++;
	p->last_len = len < sizeof(p->last) - 1 ? len : sizeof(p->last) - 1;
	memcpy(p->last, line, p->last_len);
	p->last[p->last_len] = '\0';
	if (p->destroy_on_line) {
		lines_destroy(l);
		p->l = NULL;
	}
	if (p->hold_on_line)
		lines_hold(l, true);
}

static void on_input_end(struct lines *l, void *data)
{
	(void)l;
	((struct peer *)data)->input_ends++;
}

static void on_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	struct peer *p = data;
	(void)l;

	p->overlongs++;
	p->head_len = len < sizeof(p->head) ? len : sizeof(p->head);
	memcpy(p->head, head, p->head_len);
}

static void on_skipped(struct lines *l, void *data)
{
	struct peer *p = data;
	(void)l;

	p->skipped++;
	/* the line ended: every over-long line announced has ended once */
	assert_int_equal(p->skipped, p->overlongs);
}

static void on_end(struct lines *l, const char *why, void *data)
{
	(void)l;
	((struct peer *)data)->ended = why;
}

static void on_flushed(struct lines *l, void *data)
{
	(void)l;
	((struct peer *)data)->flushed++;
}

static struct lines_hooks peer_hooks(struct peer *p)
{
	return (struct lines_hooks){.on_line = on_line,
				    .on_overlong = on_overlong,
				    .on_skipped = on_skipped,
				    .on_end = on_end,
				    .on_flushed = on_flushed,
				    .data = p};
}

static void peer_open(struct peer *p, struct loop *loop, const struct lines_config *cfg)
{
	struct lines_hooks h = peer_hooks(p);
	struct appl_err err = {0};

	memset(p, 0, sizeof(*p));
	p->loop = loop;
	assert_int_equal(pipe2(p->p, O_CLOEXEC), 0);
	p->l = lines_new(loop, p->p[0], -1, cfg, &h, &err);
	assert_non_null(p->l);
}

static void peer_close(struct peer *p)
{
	lines_free(p->l);
	close(p->p[0]);
	if (p->p[1] >= 0)
		close(p->p[1]);
}

static void put(struct peer *p, const char *s)
{
	assert_int_equal(write(p->p[1], s, strlen(s)), (ssize_t)strlen(s));
}

static void rounds(struct loop *l, int n)
{
	for (int i = 0; i < n; i++)
		loop_run_once(l, 20);
}

static struct loop *loop_make(void)
{
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);

	assert_non_null(l);
	return l;
}

static void test_lines_across_reads_and_the_cap(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 8};
	struct peer p = {0};
	(void)state;
	peer_open(&p, loop, &cfg);
	put(&p, "ab");
	rounds(loop, 2);
	assert_int_equal(p.lines, 0);
	put(&p, "c\n12345678\n\n");
	rounds(loop, 2);
	assert_int_equal(p.lines, 3); /* "abc", exactly the cap, and an empty line */
	assert_int_equal(p.last_len, 0);
	assert_null(p.ended);
	/* one byte over the cap: the default policy ends the peer */
	put(&p, "123456789");
	rounds(loop, 2);
	assert_string_equal(p.ended, "a line longer than the cap");
	assert_true(lines_closed(p.l));
	peer_close(&p);
	loop_free(loop);
}

static void test_skip_drops_without_holding(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 16, .overlong = LINES_OVERLONG_SKIP, .head_max = 6};
	struct peer p = {0};
	char *big = malloc(1 << 20);
	(void)state;
	peer_open(&p, loop, &cfg);
	fcntl(p.p[1], F_SETFL, O_NONBLOCK);
	memset(big, 'x', 1 << 20);
	memcpy(big, "{\"id\":7", 7);
	/* a line of 4 MiB, written as the reader keeps up, then a good one */
	size_t sent = 0, total = 4u << 20;
	while (sent < total) {
		size_t n = total - sent < (1u << 20) ? total - sent : (1u << 20);
		ssize_t w = write(p.p[1], big, n);
		if (w > 0)
			sent += (size_t)w;
		loop_run_once(loop, 0);
		/* never more than a line and one read held */
		assert_true(lines_buffered(p.l) <= 16 + 64 * 1024);
		memset(big, 'x', 7);
	}
	fcntl(p.p[1], F_SETFL, 0);
	rounds(loop, 200);
	assert_int_equal(p.overlongs, 1);
	assert_int_equal(p.skipped, 0); /* its end has not come */
	put(&p, "\nafter\n");
	rounds(loop, 200);
	assert_int_equal(p.overlongs, 1);
	assert_int_equal(p.skipped, 1);
	assert_int_equal(p.head_len, 6);
	assert_memory_equal(p.head, "{\"id\":", 6);
	assert_int_equal(p.lines, 1);
	assert_string_equal(p.last, "after");
	assert_null(p.ended);
	/* a complete over-long line in one read is dropped the same way */
	put(&p, "0123456789abcdefXYZ\nok\n");
	rounds(loop, 3);
	assert_int_equal(p.overlongs, 2);
	assert_int_equal(p.skipped, 2);
	assert_string_equal(p.last, "ok");
	/* input that ends inside one: no end of the line, the end of input */
	put(&p, "0123456789abcdefXYZ-and-more");
	close(p.p[1]);
	p.p[1] = -1;
	rounds(loop, 3);
	assert_int_equal(p.overlongs, 3);
	assert_int_equal(p.skipped, 2);
	assert_string_equal(p.ended, "end of input");
	free(big);
	peer_close(&p);
	loop_free(loop);
}

static void test_stop_delivers_nothing_more(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 4, .overlong = LINES_OVERLONG_STOP};
	struct peer p = {0};
	(void)state;
	peer_open(&p, loop, &cfg);
	put(&p, "ok\n123456\nnever\n");
	rounds(loop, 3);
	assert_int_equal(p.lines, 1);
	assert_int_equal(p.overlongs, 1);
	assert_true(lines_closed(p.l));
	assert_null(p.ended);
	peer_close(&p);
	loop_free(loop);
}

static void test_end_of_input_mid_line(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64};
	struct peer p = {0}, q = {0};
	(void)state;
	peer_open(&p, loop, &cfg);
	put(&p, "one\npartial");
	close(p.p[1]);
	p.p[1] = -1;
	rounds(loop, 3);
	assert_int_equal(p.lines, 1);
	assert_string_equal(p.ended, "end of input");
	peer_close(&p);
	/* final_line: a log that ends without its newline keeps its last line */
	cfg.final_line = true;
	peer_open(&q, loop, &cfg);
	put(&q, "one\npartial");
	close(q.p[1]);
	q.p[1] = -1;
	rounds(loop, 3);
	assert_int_equal(q.lines, 2);
	assert_string_equal(q.last, "partial");
	assert_string_equal(q.ended, "end of input");
	peer_close(&q);
	loop_free(loop);
}

/* Lines read in one round beyond the share wait for the next rounds, even
 * with nothing more on the descriptor. */
static void test_share_per_round(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .round_lines = 10};
	struct peer p = {0};
	char buf[4000];
	(void)state;
	peer_open(&p, loop, &cfg);
	for (int i = 0; i < 100; i++)
		memcpy(buf + 4 * i, "ab\n\n", 4);
	assert_int_equal(write(p.p[1], buf, 400), 400); /* 200 lines */
	loop_run_once(loop, 100);
	assert_int_equal(p.lines, 10);
	for (int r = 2; r <= 20; r++) {
		assert_int_equal(loop_run_once(loop, 100) > 0, 1);
		assert_int_equal(p.lines, 10u * (unsigned)r);
	}
	assert_int_equal(lines_buffered(p.l), 0);
	peer_close(&p);
	loop_free(loop);
}

/* A flooding peer gets its share; a quiet one is served in the same round. */
static void test_fairness_between_peers(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .round_lines = 8};
	struct peer flood = {0}, quiet = {0};
	char buf[60000];
	(void)state;
	peer_open(&flood, loop, &cfg);
	peer_open(&quiet, loop, &cfg);
	for (size_t i = 0; i + 2 <= sizeof(buf); i += 2)
		memcpy(buf + i, "x\n", 2);
	assert_int_equal(write(flood.p[1], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	put(&quiet, "hello\n");
	loop_run_once(loop, 100);
	assert_int_equal(quiet.lines, 1);
	assert_true(flood.lines <= 8);
	peer_close(&flood);
	peer_close(&quiet);
	loop_free(loop);
}

static void test_writer_bounded_and_flushed(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .queue_max = 100 * 1024};
	struct lines_hooks h;
	struct appl_err err = {0};
	struct peer p = {0};
	int w[2];
	char chunk[32 * 1024], sink[1 << 16];
	int full = 0;
	(void)state;
	memset(chunk, 'y', sizeof(chunk));
	chunk[sizeof(chunk) - 1] = '\n';
	h = peer_hooks(&p);
	assert_int_equal(pipe2(w, O_CLOEXEC), 0);
	p.l = lines_new(loop, -1, w[1], &cfg, &h, &err);
	assert_non_null(p.l);
	/* the pipe takes 64 KiB, the queue 100 KiB more: then -ENOBUFS, and l goes on */
	for (int i = 0; i < 20 && !full; i++)
		full = lines_write(p.l, chunk, sizeof(chunk)) == -ENOBUFS;
	assert_true(full);
	assert_null(p.ended);
	assert_true(lines_pending(p.l) <= cfg.queue_max);
	/* the peer reads everything: the queue empties, on_flushed says so */
	for (int i = 0; i < 50 && lines_pending(p.l); i++) {
		assert_true(read(w[0], sink, sizeof(sink)) > 0);
		loop_run_once(loop, 20);
	}
	assert_int_equal(lines_pending(p.l), 0);
	assert_int_equal(p.flushed, 1);
	/* the peer goes: a write error, told from the loop, not from the write */
	close(w[0]);
	assert_int_equal(lines_write(p.l, "z\n", 2), 0);
	assert_null(p.ended);
	loop_run_once(loop, 20);
	assert_string_equal(p.ended, "write error");
	assert_int_equal(lines_write(p.l, "z\n", 2), -EPIPE);
	lines_free(p.l);
	close(w[1]);
	loop_free(loop);
}

/* A write error reads what the peer said before it went, first. */
static void test_write_error_reads_the_last_words(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .queue_max = 1024};
	struct lines_hooks h;
	struct appl_err err = {0};
	struct peer p = {0};
	int in[2], out[2];
	(void)state;
	h = peer_hooks(&p);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	p.l = lines_new(loop, in[0], out[1], &cfg, &h, &err);
	assert_non_null(p.l);
	assert_int_equal(write(in[1], "last words\n", 11), 11);
	close(out[0]);
	assert_int_equal(lines_write(p.l, "x\n", 2), 0);
	assert_int_equal(p.lines, 0); /* not from inside lines_write */
	loop_run_once(loop, 20);
	assert_int_equal(p.lines, 1);
	assert_string_equal(p.last, "last words");
	assert_string_equal(p.ended, "write error");
	lines_free(p.l);
	close(in[0]);
	close(in[1]);
	close(out[1]);
	loop_free(loop);
}

static void test_cap_lowered_and_destroy_from_a_hook(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .overlong = LINES_OVERLONG_SKIP};
	struct peer p = {0};
	(void)state;
	peer_open(&p, loop, &cfg);
	put(&p, "0123456789\n");
	rounds(loop, 2);
	assert_int_equal(p.lines, 1);
	lines_set_line_max(p.l, 4);
	put(&p, "0123456789\nabcd\n");
	rounds(loop, 2);
	assert_int_equal(p.overlongs, 1);
	assert_string_equal(p.last, "abcd");
	/* lines_destroy from inside on_line: nothing more, freed after the round */
	p.destroy_on_line = true;
	put(&p, "a\nb\n");
	rounds(loop, 2);
	assert_int_equal(p.lines, 3);
	assert_null(p.l);
	close(p.p[0]);
	close(p.p[1]);
	loop_free(loop);
}

static void test_pump_takes_everything(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .round_lines = 2};
	struct peer p = {0};
	(void)state;
	peer_open(&p, loop, &cfg);
	put(&p, "1\n2\n3\n4\n5\n");
	close(p.p[1]);
	p.p[1] = -1;
	assert_int_equal(lines_pump(p.l, 1 << 20), 1);
	assert_int_equal(p.lines, 5);
	assert_string_equal(p.ended, "end of input");
	peer_close(&p);
	loop_free(loop);
}

/* A regular file as input (epoll refuses it): read a share a round to its
 * end; with on_input_end the end leaves the output open. */
static void test_file_input_read_to_its_end(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {
		.line_max = 64, .queue_max = 64, .round_lines = 2, .final_line = true};
	struct peer p = {0};
	struct lines_hooks h = peer_hooks(&p);
	struct appl_err err = {0};
	char path[] = "/tmp/appl-lines-file.XXXXXX";
	int fd = mkstemp(path), out[2];
	char buf[16];
	(void)state;

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(write(fd, "a\nb\nc\nd\nlast", 13), 13);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	h.on_input_end = on_input_end;
	p.loop = loop;
	p.l = lines_new(loop, fd, out[1], &cfg, &h, &err);
	assert_non_null(p.l);
	rounds(loop, 1);
	assert_int_equal(p.lines, 2); /* its share, no more */
	rounds(loop, 5);
	assert_int_equal(p.lines, 5);
	assert_string_equal(p.last, "last");
	assert_int_equal(p.input_ends, 1);
	assert_null(p.ended);
	/* the output goes on after the input's end */
	assert_int_equal(lines_write(p.l, "x\n", 2), 0);
	assert_int_equal(read(out[0], buf, sizeof(buf)), 2);
	lines_free(p.l);
	close(fd);
	close(out[0]);
	close(out[1]);
	/* /dev/null: an empty input; without on_input_end its end is the peer's */
	memset(&p, 0, sizeof(p));
	h = peer_hooks(&p);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	p.l = lines_new(loop, fd, -1, &cfg, &h, &err);
	assert_non_null(p.l);
	rounds(loop, 2);
	assert_int_equal(p.lines, 0);
	assert_string_equal(p.ended, "end of input");
	lines_free(p.l);
	close(fd);
	loop_free(loop);
}

/* Held from a line's hook: nothing more is read or delivered, the end of
 * input included, until it goes on; then the rest comes in order. */
static void test_hold_and_go_on(void **state)
{
	struct loop *loop = loop_make();
	struct lines_config cfg = {.line_max = 64, .final_line = true};
	struct peer p = {0};
	(void)state;

	peer_open(&p, loop, &cfg);
	p.hold_on_line = true;
	put(&p, "one\ntwo\nthree");
	close(p.p[1]);
	p.p[1] = -1;
	rounds(loop, 3);
	assert_int_equal(p.lines, 1);
	assert_string_equal(p.last, "one");
	assert_null(p.ended);
	lines_hold(p.l, false);
	rounds(loop, 3);
	assert_int_equal(p.lines, 2);
	assert_string_equal(p.last, "two");
	p.hold_on_line = false;
	lines_hold(p.l, false);
	rounds(loop, 3);
	assert_int_equal(p.lines, 3);
	assert_string_equal(p.last, "three");
	assert_string_equal(p.ended, "end of input");
	peer_close(&p);
	/* the last line without its newline, held: the end waits for it */
	peer_open(&p, loop, &cfg);
	put(&p, "only");
	close(p.p[1]);
	p.p[1] = -1;
	p.hold_on_line = true;
	rounds(loop, 3);
	assert_int_equal(p.lines, 1);
	assert_null(p.ended);
	p.hold_on_line = false;
	lines_hold(p.l, false);
	rounds(loop, 3);
	assert_int_equal(p.lines, 1);
	assert_string_equal(p.ended, "end of input");
	peer_close(&p);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines_across_reads_and_the_cap),
		cmocka_unit_test(test_skip_drops_without_holding),
		cmocka_unit_test(test_stop_delivers_nothing_more),
		cmocka_unit_test(test_end_of_input_mid_line),
		cmocka_unit_test(test_share_per_round),
		cmocka_unit_test(test_fairness_between_peers),
		cmocka_unit_test(test_writer_bounded_and_flushed),
		cmocka_unit_test(test_write_error_reads_the_last_words),
		cmocka_unit_test(test_cap_lowered_and_destroy_from_a_hook),
		cmocka_unit_test(test_pump_takes_everything),
		cmocka_unit_test(test_file_input_read_to_its_end),
		cmocka_unit_test(test_hold_and_go_on),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
