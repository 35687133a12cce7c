#define _GNU_SOURCE
/* test_loop.c: the event loop: dispatch, removal during a batch, timers. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <time.h>
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

static void timer_cb(void *data)
{
	*(int *)data += 1;
}

static void test_timer_fires_once_and_disarms(void **state)
{
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	int fired = 0;
	struct loop_timer *t = loop_timer_new(l, timer_cb, &fired, &err);
	(void)state;
	assert_non_null(t);
	uint64_t t0 = loop_now_ms();
	assert_int_equal(loop_timer_set(t, 30), 0);
	while (!fired && loop_now_ms() - t0 < 2000)
		loop_run_once(l, 100);
	assert_int_equal(fired, 1);
	assert_true(loop_now_ms() - t0 >= 30);
	/* armed then disarmed: never fires */
	assert_int_equal(loop_timer_set(t, 20), 0);
	assert_int_equal(loop_timer_set(t, 0), 0);
	assert_int_equal(loop_run_once(l, 60), 0);
	assert_int_equal(fired, 1);
	/* freed while armed: its callback never runs */
	assert_int_equal(loop_timer_set(t, 1), 0);
	loop_timer_free(t);
	assert_int_equal(loop_run_once(l, 30), 0);
	assert_int_equal(fired, 1);
	loop_free(l);
}

/* ---- tasks ------------------------------------------------------------- */

struct order {
	struct loop *loop;
	char seen[32];
	size_t n;
	struct loop_task a, b, c;
	int rfd, wfd;
};

static void mark(struct order *o, char ch)
{
	assert_true(o->n < sizeof(o->seen) - 1);
	o->seen[o->n++] = ch;
	o->seen[o->n] = '\0';
}

static void task_a(void *data)
{
	mark(data, 'a');
}

static void task_b(void *data)
{
	struct order *o = data;

	mark(o, 'b');
	/* deferred from inside the round's end: it still runs in it */
	loop_defer(o->loop, &o->c);
}

static void task_c(void *data)
{
	mark(data, 'c');
}

static void event_cb(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct order *o = data;
	char buf[8];
	(void)loop;
	(void)events;
	if (read(fd, buf, sizeof(buf)) < 0)
		fail();
	mark(o, 'e');
	loop_defer(o->loop, &o->b);
}

static void test_tasks_run_after_events_and_next_round(void **state)
{
	struct appl_err err = {0};
	struct order o = {0};
	int p[2];
	(void)state;
	o.loop = loop_new(&err);
	assert_non_null(o.loop);
	loop_task_init(&o.a, task_a, &o);
	loop_task_init(&o.b, task_b, &o);
	loop_task_init(&o.c, task_c, &o);
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	assert_int_equal(loop_add(o.loop, p[0], EPOLLIN, event_cb, &o, &err), 0);
	/* a task for the next round: that round does not wait for events */
	loop_next(o.loop, &o.a);
	loop_next(o.loop, &o.a); /* queued once */
	assert_true(loop_task_queued(&o.a));
	uint64_t r0 = loop_round(o.loop);
	assert_int_equal(loop_run_once(o.loop, 5000), 1);
	assert_string_equal(o.seen, "a");
	assert_int_equal(loop_round(o.loop), r0 + 1);
	assert_false(loop_task_queued(&o.a));
	/* an event defers b, b defers c: all in the same round, in order */
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(loop_run_once(o.loop, 1000), 3);
	assert_string_equal(o.seen, "aebc");
	/* cancelled: never runs */
	loop_next(o.loop, &o.a);
	loop_defer(o.loop, &o.c);
	loop_task_cancel(o.loop, &o.a);
	loop_task_cancel(o.loop, &o.c);
	loop_task_cancel(o.loop, &o.c);
	assert_int_equal(loop_run_once(o.loop, 10), 0);
	assert_string_equal(o.seen, "aebc");
	loop_del(o.loop, p[0]);
	close(p[0]);
	close(p[1]);
	loop_free(o.loop);
}

/* A task that puts itself back for the next round runs once per round,
 * so it can never keep a round from ending. */
static int again_runs;
static struct loop *again_loop;
static struct loop_task again_task;

static void again(void *data)
{
	(void)data;
	again_runs++;
	loop_next(again_loop, &again_task);
}

static void test_next_round_is_bounded(void **state)
{
	struct appl_err err = {0};
	(void)state;
	again_loop = loop_new(&err);
	loop_task_init(&again_task, again, NULL);
	loop_next(again_loop, &again_task);
	for (int i = 0; i < 5; i++)
		assert_int_equal(loop_run_once(again_loop, -1), 1);
	assert_int_equal(again_runs, 5);
	loop_task_cancel(again_loop, &again_task);
	loop_free(again_loop);
}

/* ---- signals ------------------------------------------------------------ */

static void sig_cb(int signo, void *data)
{
	*(int *)data = signo;
}

static void test_signals_through_the_loop(void **state)
{
	struct appl_err err = {0};
	struct loop *l = loop_new(&err);
	sigset_t set, old;
	int got = 0;
	(void)state;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	assert_int_equal(sigprocmask(SIG_BLOCK, &set, &old), 0);
	assert_int_equal(loop_signal(l, SIGUSR1, sig_cb, &got, &err), 0);
	assert_int_equal(loop_signal(l, SIGUSR2, sig_cb, &got, &err), 0);
	assert_int_equal(loop_signal(l, 0, sig_cb, &got, &err), -EINVAL);
	assert_int_equal(kill(getpid(), SIGUSR2), 0);
	for (int i = 0; i < 20 && !got; i++)
		loop_run_once(l, 100);
	assert_int_equal(got, SIGUSR2);
	got = 0;
	loop_signal_del(l, SIGUSR2);
	assert_int_equal(kill(getpid(), SIGUSR1), 0);
	for (int i = 0; i < 20 && !got; i++)
		loop_run_once(l, 100);
	assert_int_equal(got, SIGUSR1);
	loop_free(l);
	/* SIGUSR2 is still pending for the process: take it before unblocking */
	{
		struct timespec zero = {0};
		sigset_t two;
		sigemptyset(&two);
		sigaddset(&two, SIGUSR2);
		sigtimedwait(&two, NULL, &zero);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch_and_removal_in_batch),
		cmocka_unit_test(test_timer_fires_once_and_disarms),
		cmocka_unit_test(test_tasks_run_after_events_and_next_round),
		cmocka_unit_test(test_next_round_is_bounded),
		cmocka_unit_test(test_signals_through_the_loop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
