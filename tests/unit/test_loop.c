#define _GNU_SOURCE
/* test_loop.c: the event loop: dispatch, removal during a batch, timers. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>
#include <cmocka.h>

#include "loop/loop.h"

struct seen {
	int calls;
	int fds[2]; /* the first callback to run removes the other one */
	int removing;
	struct loop *loop;
};

static void count_cb(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct seen *s = data;
	char buf[16];
	(void)loop;
	(void)events;
	s->calls++;
	if (read(fd, buf, sizeof(buf)) < 0)
		fail();
	if (s->removing) {
		loop_del(s->loop, fd == s->fds[0] ? s->fds[1] : s->fds[0]);
		s->removing = 0;
	}
}

static void test_dispatch_and_removal_in_batch(void **state)
{
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	struct seen s = {0};
	int a[2], b[2];
	(void)state;
	assert_non_null(l);
	assert_int_equal(pipe2(a, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(pipe2(b, O_NONBLOCK | O_CLOEXEC), 0);
	s.loop = l;
	s.fds[0] = a[0];
	s.fds[1] = b[0];
	assert_int_equal(loop_add(l, a[0], EPOLLIN, count_cb, &s, &err), 0);
	assert_int_equal(loop_add(l, b[0], EPOLLIN, count_cb, &s, &err), 0);
	/* nothing ready: times out with no callback */
	assert_int_equal(loop_run_once(l, 10), 0);
	assert_int_equal(s.calls, 0);
	/* both ready; the first callback removes the other: it must not run */
	assert_int_equal(write(a[1], "x", 1), 1);
	assert_int_equal(write(b[1], "y", 1), 1);
	s.removing = 1;
	int ran = loop_run_once(l, 100);
	assert_int_equal(ran, 1);
	assert_int_equal(s.calls, 1);
	/* removing twice and modifying a removed fd are harmless */
	loop_del(l, a[0]);
	loop_del(l, a[0]);
	loop_del(l, b[0]);
	assert_int_equal(loop_mod(l, a[0], EPOLLIN), -EBADF);
	loop_free(l);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

static void timer_cb(struct loop *loop, int fd, uint32_t events, void *data)
{
	uint64_t ticks;
	(void)loop;
	(void)events;
	if (read(fd, &ticks, sizeof(ticks)) == sizeof(ticks))
		*(int *)data += 1;
}

static void test_timer_fires_once_and_disarms(void **state)
{
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	int fired = 0, tfd = loop_timer_new(&err);
	(void)state;
	assert_true(tfd >= 0);
	assert_int_equal(loop_add(l, tfd, EPOLLIN, timer_cb, &fired, &err), 0);
	uint64_t t0 = loop_now_ms();
	assert_int_equal(loop_timer_arm(tfd, 30), 0);
	while (!fired && loop_now_ms() - t0 < 2000)
		loop_run_once(l, 100);
	assert_int_equal(fired, 1);
	assert_true(loop_now_ms() - t0 >= 30);
	/* armed then disarmed: never fires */
	assert_int_equal(loop_timer_arm(tfd, 20), 0);
	assert_int_equal(loop_timer_arm(tfd, 0), 0);
	assert_int_equal(loop_run_once(l, 60), 0);
	assert_int_equal(fired, 1);
	loop_del(l, tfd);
	close(tfd);
	loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch_and_removal_in_batch),
		cmocka_unit_test(test_timer_fires_once_and_disarms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
