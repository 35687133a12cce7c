/* loop.h: the one event loop. epoll over non-blocking descriptors; timers
 * are timerfds and children are pidfds, so everything is a descriptor and
 * nothing blocks. One thread owns a loop and everything registered in it.
 */
#ifndef APPL_LOOP_LOOP_H
#define APPL_LOOP_LOOP_H

#include <stdint.h>
#include <sys/epoll.h>

#include "base/err.h"

struct loop;

/* Called with the epoll events (EPOLLIN, EPOLLOUT, EPOLLHUP, EPOLLERR). A
 * callback may add or remove any watch, its own included. */
typedef void (*loop_cb)(struct loop *loop, int fd, uint32_t events, void *data);

/* New loop; NULL with err filled on failure. */
struct loop *loop_new(struct appl_err *err);
void loop_free(struct loop *loop);

/* Watch fd (borrowed: the caller closes it, after loop_del) for events. */
int loop_add(struct loop *loop, int fd, uint32_t events, loop_cb cb, void *data,
	     struct appl_err *err);
int loop_mod(struct loop *loop, int fd, uint32_t events);
/* Stop watching fd; events already collected for it are not delivered. */
void loop_del(struct loop *loop, int fd);

/* Wait up to timeout_ms (-1: no limit) and dispatch what is ready. Returns the
 * number of callbacks run, or -errno. */
int loop_run_once(struct loop *loop, int timeout_ms);

/* Monotonic milliseconds. */
uint64_t loop_now_ms(void);

/* A one-shot timer: a timerfd armed for ms from now (0 disarms). */
int loop_timer_new(struct appl_err *err);
int loop_timer_arm(int tfd, uint64_t ms);

#endif
