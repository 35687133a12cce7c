/* conn.c: the ledger's connection to Redis (see conn.h). */
#include "ledger/conn.h"

#include <errno.h>
#include <fcntl.h>
#include <hiredis/async.h> /* types and flags only: every call goes through hr */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/dl.h"
#include "ledger/resolve.h"
#include "ledger/resp.h"

/* Exported by libhiredis.so.0.14 (async.c), absent from its headers: the
 * half of redisAsyncHandleRead after the read, which we do ourselves. */
void redisProcessCallbacks(redisAsyncContext *ac);

#define LEDGER_HIREDIS_SONAME  "libhiredis.so.0.14"
#define LEDGER_HIREDIS_PACKAGE "libhiredis0.14" /* debian/control recommends it */
/* clang-format off */
#define HR_FNS(X) \
	X(AsyncConnect) \
	X(AsyncConnectUnix) \
	X(AsyncSetConnectCallback) \
	X(AsyncCommandArgv) \
	X(AsyncHandleWrite) \
	X(AsyncFree) \
	X(ProcessCallbacks) \
	X(ReaderFeed) \
	X(EnableKeepAlive)
/* clang-format on */

static struct {
#define X(name) __typeof__(redis##name) *name;
	HR_FNS(X)
#undef X
} hr;

static const struct appl_dl_sym hr_syms[] = {
#define X(name) {"redis" #name, (void **)&hr.name},
	HR_FNS(X)
#undef X
};

static struct appl_dl_lib hr_lib =
	APPL_DL_LIB(LEDGER_HIREDIS_SONAME, LEDGER_HIREDIS_PACKAGE, hr_syms);

struct ledger_conn {
	struct loop *loop;
	struct ledger_url url;
	struct ledger_conn_hooks hooks;
	void *data;
	redisAsyncContext *ac;	    /* the connection, or NULL */
	struct ledger_resolve *job; /* a lookup under way, or NULL */
	struct loop_timer *retry;   /* the next attempt */
	struct loop_task drop_task; /* a drop asked for from inside hiredis */
	struct loop_task up_task;   /* hooks.up, once SELECT was answered */
	bool usable;		    /* commands may be sent (after SELECT) */
	unsigned backoff_ms;	    /* the wait before the next attempt */
	uint32_t watched;	    /* events the loop watches on ac's socket */
	bool reading, writing;	    /* what hiredis asked for */
	bool closing;
	size_t owed; /* replies the server owes on this connection */
	struct ledger_resp scan;
	char select_tag;	       /* its address tags the SELECT */
	char drop_why[LEDGER_WHY_MAX]; /* set when we drop the connection */
	char why[LEDGER_WHY_MAX];      /* why the last one ended */
	char rbuf[LEDGER_READ_CHUNK];
};

/* hiredis's error strings come from strerror and its own texts; copied as
 * one printable line all the same. */
static void set_why(char *dst, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i < LEDGER_WHY_MAX - 1; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
	dst[i] = '\0';
}

static const char *reason(const struct ledger_conn *c, const redisAsyncContext *ac)
{
	if (c->drop_why[0])
		return c->drop_why;
	return ac->c.errstr[0] ? ac->c.errstr : "the connection closed";
}

static void retry_later(struct ledger_conn *c)
{
	loop_timer_set(c->retry, c->backoff_ms);
	c->backoff_ms = c->backoff_ms * 2 > LEDGER_BACKOFF_MAX_MS ? LEDGER_BACKOFF_MAX_MS
								  : c->backoff_ms * 2;
}

/* An attempt failed before a connection existed. */
static void attempt_failed(struct ledger_conn *c, const char *why)
{
	set_why(c->why, why);
	retry_later(c);
	c->hooks.down(c->data, c->why);
}

/* Drop from a place hiredis may be under: at the end of the round. */
static void drop_later(struct ledger_conn *c, const char *why)
{
	if (!c->drop_why[0])
		set_why(c->drop_why, why);
	loop_defer(c->loop, &c->drop_task);
}

static void drop_task_run(void *data)
{
	struct ledger_conn *c = data;

	if (c->ac)
		hr.AsyncFree(c->ac);
}

void ledger_conn_drop(struct ledger_conn *c, const char *why)
{
	if (!c->ac)
		return;
	if (!c->drop_why[0])
		set_why(c->drop_why, why);
	hr.AsyncFree(c->ac); /* every command gets a NULL reply, then ev_cleanup */
}

/* ---- reading: checked before hiredis parses -------------------------------- */

static void drop_broken(struct ledger_conn *c, const char *what)
{
	char why[LEDGER_WHY_MAX];

	snprintf(why, sizeof(why), "the server broke the protocol: %s", what);
	ledger_conn_drop(c, why);
}

static void read_some(struct ledger_conn *c)
{
	redisAsyncContext *ac = c->ac;
	const char *why;
	size_t done;
	ssize_t n = read(ac->c.fd, c->rbuf, sizeof(c->rbuf));

	if (n == 0) {
		ledger_conn_drop(c, "the server closed the connection");
		return;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			ledger_conn_drop(c, strerror(errno));
		return;
	}
	if (ledger_resp_scan(&c->scan, c->rbuf, (size_t)n, &done, &why) < 0) {
		drop_broken(c, why);
		return;
	}
	/* hiredis asserts (aborts the process) on a reply to no command */
	if (done > c->owed) {
		drop_broken(c, "an answer to no command");
		return;
	}
	if (hr.ReaderFeed(ac->c.reader, c->rbuf, (size_t)n) != REDIS_OK) {
		ledger_conn_drop(c, "out of memory");
		return;
	}
	hr.ProcessCallbacks(ac); /* the reply hooks; may free ac */
}

static void on_io(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct ledger_conn *c = data;
	redisAsyncContext *ac = c->ac;
	(void)loop;
	(void)fd;

	if (!ac)
		return;
	if (!(ac->c.flags & REDIS_CONNECTED)) { /* hiredis checks the connect's end */
		hr.AsyncHandleWrite(ac);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		read_some(c);
		if (c->ac != ac)
			return; /* dropped */
	}
	if (events & EPOLLOUT)
		hr.AsyncHandleWrite(ac);
}

/* ---- the event adapter ----------------------------------------------------- */

/* Watch what hiredis asked for; nothing at all when it asked for nothing
 * (EPOLLHUP would otherwise come back every round). */
static void ev_apply(struct ledger_conn *c)
{
	uint32_t want = (c->reading ? EPOLLIN : 0) | (c->writing ? EPOLLOUT : 0);
	int rc = 0;

	if (!c->ac || want == c->watched)
		return;
	if (!want)
		loop_del(c->loop, c->ac->c.fd);
	else if (c->watched)
		rc = loop_mod(c->loop, c->ac->c.fd, want);
	else
		rc = loop_add(c->loop, c->ac->c.fd, want, on_io, c, NULL);
	if (rc < 0) {
		drop_later(c, "the loop could not watch the socket");
		return;
	}
	c->watched = want;
}

static void ev_add_read(void *p)
{
	struct ledger_conn *c = p;

	c->reading = true;
	ev_apply(c);
}

static void ev_del_read(void *p)
{
	struct ledger_conn *c = p;

	c->reading = false;
	ev_apply(c);
}

static void ev_add_write(void *p)
{
	struct ledger_conn *c = p;

	c->writing = true;
	ev_apply(c);
}

static void ev_del_write(void *p)
{
	struct ledger_conn *c = p;

	c->writing = false;
	ev_apply(c);
}

/* hiredis is freeing the context (after answering every command with
 * NULL): the connection is gone, whatever the cause. */
static void ev_cleanup(void *p)
{
	struct ledger_conn *c = p;
	redisAsyncContext *ac = c->ac;

	if (c->watched)
		loop_del(c->loop, ac->c.fd);
	c->watched = 0;
	c->reading = c->writing = false;
	set_why(c->why, reason(c, ac));
	c->ac = NULL;
	c->usable = false;
	loop_task_cancel(c->loop, &c->drop_task);
	loop_task_cancel(c->loop, &c->up_task);
	if (c->closing)
		return;
	retry_later(c);
	c->hooks.down(c->data, c->why);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	/* A failure is seen in ev_cleanup, which hiredis calls next. */
	(void)ac;
	(void)status;
}

static void on_reply(redisAsyncContext *ac, void *reply, void *tag)
{
	struct ledger_conn *c = ac->data;
	const redisReply *r = reply;

	if (r)
		c->owed--;
	if (tag == &c->select_tag) {
		if (r && r->type == REDIS_REPLY_STATUS && r->len == 2 && !memcmp(r->str, "OK", 2)) {
			loop_timer_set(c->retry, 0);
			c->usable = true;
			loop_defer(c->loop, &c->up_task); /* not from inside hiredis */
		} else if (r) {
			drop_later(c, "the server refused SELECT (no such database)");
		}
		return;
	}
	c->hooks.reply(c->data, tag, r, r ? NULL : reason(c, ac));
}

/* ---- connecting -------------------------------------------------------------- */

static void select_db(struct ledger_conn *c)
{
	char num[16];
	const char *argv[2] = {"SELECT", num};
	size_t lens[2] = {6, 0};

	lens[1] = (size_t)snprintf(num, sizeof(num), "%u", c->url.db);
	if (hr.AsyncCommandArgv(c->ac, on_reply, &c->select_tag, 2, argv, lens) != REDIS_OK) {
		drop_later(c, "out of memory");
		return;
	}
	c->owed++;
	/* the retry timer, while there is a connection: SELECT's deadline */
	loop_timer_set(c->retry, LEDGER_TIMEOUT_MS);
}

/* Take a context hiredis made (its connect under way) as the connection. */
static void attach(struct ledger_conn *c, redisAsyncContext *ac)
{
	char why[LEDGER_WHY_MAX];

	if (!ac) {
		attempt_failed(c, "out of memory");
		return;
	}
	if (ac->err) { /* refused at once (no such socket, say) */
		set_why(why, ac->errstr ? ac->errstr : "could not connect");
		hr.AsyncFree(ac);
		attempt_failed(c, why);
		return;
	}
	/* hiredis makes its socket without close-on-exec: the children the
	 * appliance starts must not inherit the ledger's connection. */
	(void)fcntl(ac->c.fd, F_SETFD, FD_CLOEXEC);
	/* TCP keepalive every REDIS_KEEPALIVE_INTERVAL (15 s): a peer that
	 * vanished is noticed on a quiet connection too. */
	if (!c->url.unix_socket)
		(void)hr.EnableKeepAlive(&ac->c);
	c->ac = ac;
	c->owed = 0;
	c->drop_why[0] = '\0';
	ledger_resp_init(&c->scan);
	ac->data = c;
	ac->ev.data = c;
	ac->ev.addRead = ev_add_read;
	ac->ev.delRead = ev_del_read;
	ac->ev.addWrite = ev_add_write;
	ac->ev.delWrite = ev_del_write;
	ac->ev.cleanup = ev_cleanup;
	hr.AsyncSetConnectCallback(ac, on_connect); /* hiredis asks for EPOLLOUT */
	/* Nothing else is sent before SELECT is answered: behind a refused
	 * one, a claim would go to database 0. */
	if (c->url.db) {
		select_db(c);
		return;
	}
	c->usable = true;
	c->hooks.up(c->data);
}

static void up_task_run(void *data)
{
	struct ledger_conn *c = data;

	if (c->ac && c->usable)
		c->hooks.up(c->data);
}

static void on_resolved(void *data, int rc, const char *addr, const char *why)
{
	struct ledger_conn *c = data;

	c->job = NULL;
	if (rc < 0)
		attempt_failed(c, why);
	else
		attach(c, hr.AsyncConnect(addr, (int)c->url.port));
}

static void attempt(struct ledger_conn *c)
{
	struct appl_err err = {0};

	if (c->ac || c->job || c->closing) /* one attempt at a time */
		return;
	if (c->url.unix_socket)
		attach(c, hr.AsyncConnectUnix(c->url.path));
	else if (c->url.literal) /* hiredis's getaddrinfo of an address: no lookup */
		attach(c, hr.AsyncConnect(c->url.host, (int)c->url.port));
	else if (ledger_resolve_start(c->loop, c->url.host, on_resolved, c, &c->job, &err) < 0)
		attempt_failed(c, err.msg);
}

static void on_retry(void *data)
{
	struct ledger_conn *c = data;

	if (!c->ac)
		attempt(c);
	else if (!c->usable) /* a hung server, or a path to it that went dark */
		ledger_conn_drop(c, "the server did not answer SELECT in time");
}

/* ---- the rest of the API ------------------------------------------------------ */

int ledger_conn_new(struct loop *loop, const struct ledger_url *url,
		    const struct ledger_conn_hooks *hooks, void *data, struct ledger_conn **out,
		    struct appl_err *err)
{
	struct ledger_conn *c;

	if (appl_dl_load(&hr_lib, err) < 0)
		return -EIO;
	if (!(c = calloc(1, sizeof(*c))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	c->loop = loop;
	c->url = *url;
	c->hooks = *hooks;
	c->data = data;
	c->backoff_ms = LEDGER_BACKOFF_MIN_MS;
	loop_task_init(&c->drop_task, drop_task_run, c);
	loop_task_init(&c->up_task, up_task_run, c);
	if (!(c->retry = loop_timer_new(loop, on_retry, c, err))) {
		free(c);
		return err ? err->code : -ENOMEM;
	}
	*out = c;
	return 0;
}

void ledger_conn_start(struct ledger_conn *c)
{
	attempt(c);
}

void ledger_conn_free(struct ledger_conn *c)
{
	if (!c)
		return;
	c->closing = true;
	ledger_resolve_cancel(c->job);
	c->job = NULL;
	if (c->ac)
		ledger_conn_drop(c, "the ledger was closed");
	loop_task_cancel(c->loop, &c->drop_task);
	loop_task_cancel(c->loop, &c->up_task);
	loop_timer_free(c->retry);
	free(c);
}

int ledger_conn_send(struct ledger_conn *c, int argc, const char **argv, const size_t *lens,
		     void *tag)
{
	if (!ledger_conn_open(c))
		return -ENOTCONN;
	if (hr.AsyncCommandArgv(c->ac, on_reply, tag, argc, argv, lens) != REDIS_OK)
		return -ENOMEM;
	c->owed++;
	return 0;
}

void ledger_conn_good(struct ledger_conn *c)
{
	c->backoff_ms = LEDGER_BACKOFF_MIN_MS;
}

bool ledger_conn_open(const struct ledger_conn *c)
{
	return c->ac && c->usable && !c->drop_why[0];
}

const char *ledger_conn_why(const struct ledger_conn *c)
{
	return c->why;
}
