/* loop.h: the one event loop. epoll over non-blocking descriptors, tasks
 * run after a round's events or in the next round, timers on timerfds and
 * signals on one signalfd, so everything is a descriptor and nothing
 * blocks. One thread owns a loop and everything registered in it.
 *
 * A round is one loop_run_once: wait for events (not at all when tasks are
 * queued for the round), dispatch each ready descriptor once, run the
 * tasks queued for this round with loop_next in the last round, then the
 * tasks deferred with loop_defer, until none is left. A peer that used up
 * its share of a round (pkg/loop/lines.h) goes on in the next one with
 * loop_next, after every other peer had its turn; work that must not run
 * inside a callback (freeing the object the callback belongs to, answering
 * once a round's lines are all read) is deferred to the round's end.
 */
#ifndef APPL_LOOP_LOOP_H
#define APPL_LOOP_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "base/err.h"

struct loop;

/* Called with the epoll events (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). A
 * callback may add or remove any watch, its own included. */
typedef void (*loop_cb)(struct loop *loop, int fd, uint32_t events, void *data);

/* New loop; NULL with err filled on failure. */
struct loop *loop_new(struct appl_err *err);
/* Safe on NULL. Tasks still queued are dropped (not run). */
void loop_free(struct loop *loop);

/* Watch fd (borrowed: the caller closes it, after loop_del) for events. */
int loop_add(struct loop *loop, int fd, uint32_t events, loop_cb cb, void *data,
	     struct appl_err *err);
int loop_mod(struct loop *loop, int fd, uint32_t events);
/* Stop watching fd; events already collected for it are not delivered. */
void loop_del(struct loop *loop, int fd);

/* Wait up to timeout_ms (-1: no limit) and run one round. Returns the
 * number of callbacks and tasks run, or -errno. */
int loop_run_once(struct loop *loop, int timeout_ms);

/* Monotonic milliseconds. */
uint64_t loop_now_ms(void);

/* The number of the current round (it rises by one each loop_run_once):
 * for shares counted per round. */
uint64_t loop_round(const struct loop *loop);

/* ---- tasks ------------------------------------------------------------- */

/* A task lives inside its owner (no allocation): loop_task_init once, then
 * queue it as often as needed. A queued task is queued once: queuing it
 * again before it ran does nothing. The owner must loop_task_cancel it
 * before freeing it. */
struct loop_task {
	struct loop_task *prev, *next;
	void (*fn)(void *data);
	void *data;
	int where; /* 0: not queued; else which list */
};

void loop_task_init(struct loop_task *t, void (*fn)(void *data), void *data);
/* Run t at the end of this round, after its events (from inside a round),
 * or at the end of the next one (from outside). */
void loop_defer(struct loop *loop, struct loop_task *t);
/* Run t in the next round, beside that round's events; that round does not
 * wait for events. */
void loop_next(struct loop *loop, struct loop_task *t);
/* Unqueue t (safe when it is not queued). */
void loop_task_cancel(struct loop *loop, struct loop_task *t);
bool loop_task_queued(const struct loop_task *t);

/* ---- timers ------------------------------------------------------------- */

struct loop_timer; /* one timerfd, watched by the loop */

/* A disarmed timer that calls fn(data) from the loop each time it expires.
 * New object, or NULL with err filled. */
struct loop_timer *loop_timer_new(struct loop *loop, void (*fn)(void *data), void *data,
				  struct appl_err *err);
/* Fire once, ms from now (0: disarm). Returns 0 or -errno. */
int loop_timer_set(struct loop_timer *t, uint64_t ms);
/* Safe on NULL; the callback is not called afterwards. */
void loop_timer_free(struct loop_timer *t);

/* ---- signals ------------------------------------------------------------ */

/* Call fn(signo, data) from the loop when signo arrives: one signalfd per
 * loop serves every watched signal. The process must have blocked signo in
 * every thread (cmd/appliance does so first thing), or it is delivered the
 * usual way instead. One watcher per signal: a second replaces the first.
 * Returns 0, or a negative code with err filled. */
int loop_signal(struct loop *loop, int signo, void (*fn)(int signo, void *data), void *data,
		struct appl_err *err);
/* Stop watching signo (it stays blocked). */
void loop_signal_del(struct loop *loop, int signo);

#endif
