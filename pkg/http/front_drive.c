/* front_drive.c: driving libmicrohttpd from the loop for the HTTP front
 * (see front.c): the library's function table, MHD_run when its epoll set
 * is readable or its timeout falls due, the slow-client deadline, and the
 * suspension of a request the owner answers later, with the client's
 * hang-up watched meanwhile (MHD does not watch a suspended socket).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>

#include "http/front_int.h"
#include "log/log.h"

#define MHD_SONAME  "libmicrohttpd.so.12"
#define MHD_PACKAGE "libmicrohttpd12" /* debian/control recommends it */

struct front_mhd_fns front_mhd;

static const struct appl_dl_sym mhd_syms[] = {
#define X(name) {"MHD_" #name, (void **)&front_mhd.name},
	MHD_FNS(X)
#undef X
};

static struct appl_dl_lib mhd_lib = APPL_DL_LIB(MHD_SONAME, MHD_PACKAGE, mhd_syms);

int http_front_load(struct appl_err *err)
{
	return appl_dl_load(&mhd_lib, err);
}

int http_front_describe(char *buf, size_t n, struct appl_err *err)
{
	if (http_front_load(err) < 0)
		return err ? err->code : -EIO;
	snprintf(buf, n, "%s", front_mhd.get_version());
	return 0;
}

/* ---- driving MHD from the loop ------------------------------------------ */

static void pump(struct http_front *f)
{
	uint64_t soonest = 0;
	bool any = false;

	f->in_mhd++;
	for (size_t i = 0; i < f->nls; i++)
		front_mhd.run(f->ls[i].d);
	f->in_mhd--;
	for (size_t i = 0; i < f->nls; i++) {
		MHD_UNSIGNED_LONG_LONG t;

		if (front_mhd.get_timeout(f->ls[i].d, &t) != MHD_YES)
			continue;
		if (!any || t < soonest)
			soonest = t;
		any = true;
	}
	/* 0 means MHD has work it could not finish (edge-triggered sockets
	 * still readable): come back next round, not through a timerfd. */
	if (any && soonest == 0)
		loop_next(f->loop, &f->kick);
	loop_timer_set(f->mhd_timer, any && soonest ? soonest : 0);
}

void front_on_kick(void *data)
{
	pump(data);
}

void front_on_epoll(struct loop *loop, int fd, uint32_t events, void *data)
{
	(void)loop;
	(void)fd;
	(void)events;
	pump(data);
}

/* ---- the slow-client deadline ------------------------------------------- */

static void slow_rearm(struct http_front *f)
{
	uint64_t now = loop_now_ms();

	if (!f->head) {
		loop_timer_set(f->slow_timer, 0);
		return;
	}
	loop_timer_set(f->slow_timer, f->head->deadline > now ? f->head->deadline - now : 1);
}

void front_conn_unlist(struct conn *c)
{
	struct http_front *f = c->f;

	if (!c->listed)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		f->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		f->tail = c->prev;
	c->prev = c->next = NULL;
	c->listed = false;
}

/* Start c's clock: its next request's head and body must come within
 * slow_s, however steadily it trickles (MHD's own timeout restarts on
 * every byte). */
void front_conn_list(struct conn *c)
{
	struct http_front *f = c->f;

	front_conn_unlist(c);
	c->deadline = loop_now_ms() + (uint64_t)f->cfg.slow_s * 1000u;
	c->prev = f->tail;
	if (f->tail)
		f->tail->next = c;
	else
		f->head = c;
	f->tail = c;
	c->listed = true;
	if (f->head == c)
		slow_rearm(f);
}

void front_on_slow(void *data)
{
	struct http_front *f = data;
	uint64_t now = loop_now_ms();

	while (f->head && f->head->deadline <= now) {
		struct conn *c = f->head;

		front_conn_unlist(c);
		/* MHD owns the descriptor; shutting it down makes MHD see the
		 * end of the connection and close it the usual way. */
		shutdown(c->fd, SHUT_RDWR);
		if (log_rate_allow(&f->rate, now, NULL))
			log_line(LOG_INFO, NULL, "http: dropped a client slower than %u s",
				 f->cfg.slow_s);
	}
	slow_rearm(f);
	loop_next(f->loop, &f->kick);
}

/* ---- suspension and the client's hang-up -------------------------------- */

void front_req_unwatch(struct http_req *r)
{
	if (r->watching)
		loop_del(r->f->loop, r->c->fd);
	r->watching = false;
}

/* Wake r's connection: an answer or a stream's bytes are ready, or it is
 * to be closed. Outside MHD's callbacks MHD runs at once, so the bytes
 * leave now rather than after whatever else this round of the loop does
 * (a used sandbox torn down, the next one started); inside, next round. */
void front_req_resume(struct http_req *r)
{
	struct http_front *f = r->f;

	if (!r->suspended)
		return;
	front_req_unwatch(r);
	r->suspended = false;
	front_mhd.resume_connection(r->mc);
	if (f->in_mhd || f->closing)
		loop_next(f->loop, &f->kick);
	else
		pump(f);
}

static void on_hangup(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct http_req *r = data;
	(void)loop;
	(void)fd;
	(void)events;
	/* Resumed and told to abort, MHD closes the connection, and the
	 * completion callback tells the owner. */
	r->aborting = true;
	front_req_resume(r);
}

void front_req_suspend(struct http_req *r)
{
	front_mhd.suspend_connection(r->mc);
	r->suspended = true;
	if (loop_add(r->f->loop, r->c->fd, EPOLLRDHUP, on_hangup, r, NULL) == 0)
		r->watching = true;
}
