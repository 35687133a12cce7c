/* loop.c: epoll dispatch, tasks, timers and signals (see loop.h). */
#define _GNU_SOURCE
#include "loop/loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_BATCH 64
/* Deferred tasks run in one round's end at most: one that keeps deferring
 * itself must not hold the loop for ever. */
#define LOOP_DEFER_RUNS_MAX 4096

enum { Q_NONE, Q_DEFER, Q_NEXT, Q_NOW };

struct watch {
	loop_cb cb;
	void *data;
	uint32_t gen; /* bumped on every add and del, so stale events are dropped */
	int active;
};

struct tlist {
	struct loop_task *head, *tail;
};

struct sigwatch {
	void (*fn)(int signo, void *data);
	void *data;
};

struct loop {
	int epfd;
	size_t cap; /* watches indexed by fd */
	struct watch *watches;
	struct tlist defer, next, now;
	bool in_round;
	uint64_t round;
	int sigfd;
	sigset_t sigmask;
	struct sigwatch sigs[NSIG];
};

struct loop *loop_new(struct appl_err *err)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	l->sigfd = -1;
	sigemptyset(&l->sigmask);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		appl_err_errno(err, -errno, errno, "epoll_create1");
		free(l);
		return NULL;
	}
	return l;
}

static struct tlist *tlist_of(struct loop *l, int where)
{
	return where == Q_DEFER ? &l->defer : where == Q_NEXT ? &l->next : &l->now;
}

static void tlist_drop(struct loop *l, int where)
{
	struct tlist *q = tlist_of(l, where);

	for (struct loop_task *t = q->head, *n; t; t = n) {
		n = t->next;
		t->prev = t->next = NULL;
		t->where = Q_NONE;
	}
	q->head = q->tail = NULL;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	tlist_drop(l, Q_DEFER);
	tlist_drop(l, Q_NEXT);
	tlist_drop(l, Q_NOW);
	if (l->sigfd >= 0)
		close(l->sigfd);
	close(l->epfd);
	free(l->watches);
	free(l);
}

static int watches_grow(struct loop *l, int fd)
{
	size_t cap = l->cap ? l->cap : 64;
	struct watch *w;

	while (cap <= (size_t)fd)
		cap *= 2;
	if (cap == l->cap)
		return 0;
	w = realloc(l->watches, cap * sizeof(*w));
	if (!w)
		return -ENOMEM;
	memset(w + l->cap, 0, (cap - l->cap) * sizeof(*w));
	l->watches = w;
	l->cap = cap;
	return 0;
}

static uint64_t pack(int fd, uint32_t gen)
{
	return ((uint64_t)gen << 32) | (uint32_t)fd;
}

int loop_add(struct loop *l, int fd, uint32_t events, loop_cb cb, void *data, struct appl_err *err)
{
	struct epoll_event ev = {.events = events};
	struct watch *w;

	if (fd < 0 || watches_grow(l, fd) < 0)
		return appl_err_set(err, -ENOMEM, "out of memory");
	w = &l->watches[fd];
	w->gen++;
	ev.data.u64 = pack(fd, w->gen);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return appl_err_errno(err, -errno, errno, "epoll_ctl");
	w->cb = cb;
	w->data = data;
	w->active = 1;
	return 0;
}

int loop_mod(struct loop *l, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events};

	if (fd < 0 || (size_t)fd >= l->cap || !l->watches[fd].active)
		return -EBADF;
	ev.data.u64 = pack(fd, l->watches[fd].gen);
	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void loop_del(struct loop *l, int fd)
{
	if (fd < 0 || (size_t)fd >= l->cap || !l->watches[fd].active)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->watches[fd].active = 0;
	l->watches[fd].gen++;
}

/* ---- tasks ------------------------------------------------------------- */

void loop_task_init(struct loop_task *t, void (*fn)(void *data), void *data)
{
	memset(t, 0, sizeof(*t));
	t->fn = fn;
	t->data = data;
}

bool loop_task_queued(const struct loop_task *t)
{
	return t->where != Q_NONE;
}

static void task_push(struct loop *l, struct loop_task *t, int where)
{
	struct tlist *q = tlist_of(l, where);

	t->where = where;
	t->next = NULL;
	t->prev = q->tail;
	if (q->tail)
		q->tail->next = t;
	else
		q->head = t;
	q->tail = t;
}

void loop_task_cancel(struct loop *l, struct loop_task *t)
{
	struct tlist *q;

	if (t->where == Q_NONE)
		return;
	q = tlist_of(l, t->where);
	if (t->prev)
		t->prev->next = t->next;
	else
		q->head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		q->tail = t->prev;
	t->prev = t->next = NULL;
	t->where = Q_NONE;
}

void loop_defer(struct loop *l, struct loop_task *t)
{
	if (t->where == Q_DEFER)
		return;
	loop_task_cancel(l, t);
	task_push(l, t, Q_DEFER);
}

void loop_next(struct loop *l, struct loop_task *t)
{
	if (t->where != Q_NONE)
		return; /* already to run, this round or the next */
	task_push(l, t, Q_NEXT);
}

/* Run (and unqueue) the tasks of list where, at most max of them. */
static int tasks_run(struct loop *l, int where, int max)
{
	struct tlist *q = tlist_of(l, where);
	int ran = 0;

	while (q->head && ran < max) {
		struct loop_task *t = q->head;

		loop_task_cancel(l, t);
		t->fn(t->data);
		ran++;
	}
	return ran;
}

/* ---- the round ---------------------------------------------------------- */

static int events_dispatch(struct loop *l, const struct epoll_event *evs, int n)
{
	int ran = 0;

	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)evs[i].data.u64;
		uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);
		struct watch *w;

		if ((size_t)fd >= l->cap)
			continue;
		w = &l->watches[fd];
		/* Removed (or removed and re-added) by an earlier callback of
		 * this batch: the event belongs to a watch that is gone. */
		if (!w->active || w->gen != gen)
			continue;
		w->cb(l, fd, evs[i].events, w->data);
		ran++;
	}
	return ran;
}

int loop_run_once(struct loop *l, int timeout_ms)
{
	struct epoll_event evs[LOOP_BATCH];
	int n, ran;

	/* What was queued for this round runs in it, beside its events; what
	 * is queued meanwhile waits for the round after. */
	l->now = l->next;
	l->next.head = l->next.tail = NULL;
	for (struct loop_task *t = l->now.head; t; t = t->next)
		t->where = Q_NOW;
	if (l->now.head || l->defer.head)
		timeout_ms = 0;
	n = epoll_wait(l->epfd, evs, LOOP_BATCH, timeout_ms);
	if (n < 0 && errno != EINTR) {
		/* Not a round: the tasks wait for the next call. */
		struct tlist keep = l->now;
		int e = errno;

		l->now.head = l->now.tail = NULL;
		for (struct loop_task *t = keep.head, *nx; t; t = nx) {
			nx = t->next;
			t->where = Q_NONE;
			loop_next(l, t);
		}
		return -e;
	}
	l->in_round = true;
	l->round++;
	ran = n > 0 ? events_dispatch(l, evs, n) : 0;
	ran += tasks_run(l, Q_NOW, LOOP_DEFER_RUNS_MAX);
	ran += tasks_run(l, Q_DEFER, LOOP_DEFER_RUNS_MAX);
	l->in_round = false;
	return ran;
}

uint64_t loop_round(const struct loop *l)
{
	return l->round;
}

uint64_t loop_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- timers ------------------------------------------------------------- */

struct loop_timer {
	struct loop *loop;
	int fd;
	void (*fn)(void *data);
	void *data;
};

static void on_timer(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct loop_timer *t = data;
	uint64_t ticks;
	(void)loop;
	(void)events;

	/* A timer set again after it expired, before this round: no expiry
	 * left to read, nothing to call. */
	if (read(fd, &ticks, sizeof(ticks)) == (ssize_t)sizeof(ticks))
		t->fn(t->data);
}

struct loop_timer *loop_timer_new(struct loop *loop, void (*fn)(void *data), void *data,
				  struct appl_err *err)
{
	struct loop_timer *t = calloc(1, sizeof(*t));

	if (!t) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	t->loop = loop;
	t->fn = fn;
	t->data = data;
	t->fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (t->fd < 0) {
		appl_err_errno(err, -errno, errno, "timerfd_create");
		free(t);
		return NULL;
	}
	if (loop_add(loop, t->fd, EPOLLIN, on_timer, t, err) < 0) {
		close(t->fd);
		free(t);
		return NULL;
	}
	return t;
}

int loop_timer_set(struct loop_timer *t, uint64_t ms)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	return timerfd_settime(t->fd, 0, &its, NULL) < 0 ? -errno : 0;
}

void loop_timer_free(struct loop_timer *t)
{
	if (!t)
		return;
	loop_del(t->loop, t->fd);
	close(t->fd);
	free(t);
}

/* ---- signals ------------------------------------------------------------ */

static void on_signals(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct signalfd_siginfo si[8];
	ssize_t n;
	(void)events;
	(void)data;

	/* A few at a time: one round, then the next gets the rest. */
	n = read(fd, si, sizeof(si));
	for (ssize_t i = 0; n > 0 && i < n / (ssize_t)sizeof(si[0]); i++) {
		int signo = (int)si[i].ssi_signo;

		if (signo > 0 && signo < NSIG && loop->sigs[signo].fn)
			loop->sigs[signo].fn(signo, loop->sigs[signo].data);
	}
}

int loop_signal(struct loop *l, int signo, void (*fn)(int signo, void *data), void *data,
		struct appl_err *err)
{
	sigset_t mask = l->sigmask;
	int fd;

	if (signo <= 0 || signo >= NSIG || !fn)
		return appl_err_set(err, -EINVAL, "signal %d: not one to watch", signo);
	sigaddset(&mask, signo);
	fd = signalfd(l->sigfd, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "signalfd");
	if (l->sigfd < 0 && loop_add(l, fd, EPOLLIN, on_signals, NULL, err) < 0) {
		close(fd);
		return err ? err->code : -ENOMEM;
	}
	l->sigfd = fd;
	l->sigmask = mask;
	l->sigs[signo].fn = fn;
	l->sigs[signo].data = data;
	return 0;
}

void loop_signal_del(struct loop *l, int signo)
{
	if (signo <= 0 || signo >= NSIG || l->sigfd < 0)
		return;
	sigdelset(&l->sigmask, signo);
	signalfd(l->sigfd, &l->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
	l->sigs[signo].fn = NULL;
	l->sigs[signo].data = NULL;
}
