/* loop.c: epoll dispatch (see loop.h). */
#include "loop/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_BATCH 64

struct watch {
	loop_cb cb;
	void *data;
	uint32_t gen; /* bumped on every add and del, so stale events are dropped */
	int active;
};

struct loop {
	int epfd;
	size_t cap; /* watches indexed by fd */
	struct watch *watches;
};

struct loop *loop_new(struct appl_err *err)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		appl_err_errno(err, -errno, errno, "epoll_create1");
		free(l);
		return NULL;
	}
	return l;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
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

int loop_run_once(struct loop *l, int timeout_ms)
{
	struct epoll_event evs[LOOP_BATCH];
	int n, ran = 0;

	n = epoll_wait(l->epfd, evs, LOOP_BATCH, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
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

uint64_t loop_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int loop_timer_new(struct appl_err *err)
{
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "timerfd_create");
	return fd;
}

int loop_timer_arm(int tfd, uint64_t ms)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = (time_t)(ms / 1000);
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	if (ms == 0)
		its.it_value.tv_nsec = 0;
	return timerfd_settime(tfd, 0, &its, NULL) < 0 ? -errno : 0;
}
