/* resolve.c: a name looked up off the loop (see resolve.h). */
#include "ledger/resolve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ledger/limits.h"

struct ledger_resolve {
	int refs;     /* atomic: the loop's side and the thread's */
	int finished; /* atomic: the thread's answer is written */
	int efd;      /* the thread writes it once, the loop watches it */
	struct loop *loop;
	ledger_resolve_cb cb;
	void *data;
	char host[LEDGER_HOST_MAX + 1];
	/* the answer, written by the thread before finished */
	int rc;
	char addr[INET6_ADDRSTRLEN];
	char why[LEDGER_WHY_MAX];
};

static void job_put(struct ledger_resolve *r)
{
	if (__atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		close(r->efd);
		free(r);
	}
}

/* The first IPv4 address of res, else the first IPv6 one, as text. */
static int pick(const struct addrinfo *res, char *out, size_t n)
{
	for (int fam = AF_INET;; fam = AF_INET6) {
		for (const struct addrinfo *a = res; a; a = a->ai_next) {
			const void *in;
			if (a->ai_family != fam)
				continue;
			if (fam == AF_INET)
				in = &((const struct sockaddr_in *)(const void *)a->ai_addr)
					      ->sin_addr;
			else
				in = &((const struct sockaddr_in6 *)(const void *)a->ai_addr)
					      ->sin6_addr;
			return inet_ntop(fam, in, out, (socklen_t)n) ? 0 : -EHOSTUNREACH;
		}
		if (fam == AF_INET6)
			return -EHOSTUNREACH;
	}
}

static void *lookup(void *arg)
{
	struct ledger_resolve *r = arg;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
	uint64_t one = 1;
	int g = getaddrinfo(r->host, NULL, &hints, &res);

	if (g != 0) {
		r->rc = -EHOSTUNREACH;
		snprintf(r->why, sizeof(r->why), "the name did not resolve: %s", gai_strerror(g));
	} else if ((r->rc = pick(res, r->addr, sizeof(r->addr))) < 0) {
		snprintf(r->why, sizeof(r->why), "the name has no IPv4 or IPv6 address");
	}
	if (res)
		freeaddrinfo(res);
	__atomic_store_n(&r->finished, 1, __ATOMIC_RELEASE);
	if (write(r->efd, &one, sizeof(one)) < 0) {
		/* an eventfd write fails only on overflow: never, once */
	}
	job_put(r);
	return NULL;
}

static void on_done(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct ledger_resolve *r = data;
	char addr[INET6_ADDRSTRLEN], why[LEDGER_WHY_MAX];
	ledger_resolve_cb cb = r->cb;
	void *cb_data = r->data;
	uint64_t v;
	int rc;
	(void)events;

	if (read(fd, &v, sizeof(v)) < 0 || !__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE))
		return; /* not yet */
	loop_del(loop, fd);
	rc = r->rc;
	memcpy(addr, r->addr, sizeof(addr));
	memcpy(why, r->why, sizeof(why));
	job_put(r);
	cb(cb_data, rc, addr, why);
}

static int spawn(struct ledger_resolve *r, struct appl_err *err)
{
	pthread_attr_t attr;
	pthread_t t;
	sigset_t all, old;
	int rc;

	if ((rc = pthread_attr_init(&attr)) != 0)
		return appl_err_errno(err, -rc, rc, "ledger: pthread_attr_init");
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, LEDGER_RESOLVER_STACK);
	/* The thread inherits this mask: no signal is ever delivered to it. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, lookup, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return appl_err_errno(err, -rc, rc, "ledger: no thread to look the name up");
	return 0;
}

int ledger_resolve_start(struct loop *loop, const char *host, ledger_resolve_cb cb, void *data,
			 struct ledger_resolve **out, struct appl_err *err)
{
	struct ledger_resolve *r;
	size_t n = strlen(host);
	int rc;

	if (n > LEDGER_HOST_MAX)
		return appl_err_set(err, -EINVAL, "ledger: a host name over %u bytes",
				    LEDGER_HOST_MAX);
	if (!(r = calloc(1, sizeof(*r))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	r->loop = loop;
	r->cb = cb;
	r->data = data;
	memcpy(r->host, host, n + 1);
	r->refs = 2; /* the loop's side, and the thread's */
	if ((r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		rc = appl_err_errno(err, -errno, errno, "ledger: eventfd");
		free(r);
		return rc;
	}
	if ((rc = loop_add(loop, r->efd, EPOLLIN, on_done, r, err)) < 0 ||
	    (rc = spawn(r, err)) < 0) {
		loop_del(loop, r->efd);
		close(r->efd);
		free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void ledger_resolve_cancel(struct ledger_resolve *r)
{
	if (!r)
		return;
	loop_del(r->loop, r->efd);
	job_put(r);
}
