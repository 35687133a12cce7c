/* front.c: the HTTP front door (see front.h, docs/http.md).
 *
 * libmicrohttpd runs in external-loop mode with its own epoll set: that
 * set's descriptor is watched by our loop, MHD_run is called when it is
 * readable, when MHD's timeout falls due and the round after a suspended
 * connection was resumed. A request the owner answers later is suspended
 * meanwhile; as MHD does not watch a suspended socket, we watch it for the
 * client's hang-up ourselves.
 *
 * This file opens the listeners and the front and closes them; running MHD
 * from the loop is front_drive.c's, judging requests front_admit.c's,
 * answering them front_answer.c's (front_int.h).
 */
#define _GNU_SOURCE
#include "http/front.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/front_int.h"

#define TLS_PRIORITIES "NORMAL:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1"

/* ---- listeners ---------------------------------------------------------- */

static int listen_unix(const char *path, int *out, struct appl_err *err)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (path[0] != '/' || strlen(path) >= sizeof(sun.sun_path))
		return appl_err_set(err, -EINVAL, "unix socket path must be absolute and short");
	memcpy(sun.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		/* Only a socket left by an earlier run is ours to remove. */
		if (!S_ISSOCK(st.st_mode))
			return appl_err_set(err, -EEXIST, "%s exists and is not a socket", path);
		if (unlink(path) < 0)
			return appl_err_errno(err, -errno, errno, "remove %s", path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "socket");
	/* Before listen() nobody can connect, so the mode is set before the
	 * socket is reachable, without touching the process umask. */
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 || chmod(path, 0660) < 0 ||
	    listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return appl_err_errno(err, -e, e, "listen on %s", path);
	}
	*out = fd;
	return 0;
}

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	unsigned long n;

	if (!*s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoul(s, &end, 10);
	if (errno || *end || n > 65535)
		return -EINVAL;
	*port = (uint16_t)n;
	return 0;
}

static int listen_inet(const char *addr, int *out, struct appl_err *err)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon = strrchr(addr, ':');
	size_t hlen = colon ? (size_t)(colon - addr) : 0;
	uint16_t port;
	int fd, one = 1;

	if (!colon || hlen == 0 || hlen >= sizeof(host) || parse_port(colon + 1, &port))
		return appl_err_set(err, -EINVAL, "listen address needs host:port");
	memcpy(host, addr, hlen);
	host[hlen] = '\0';
	if (host[0] == '[' && host[hlen - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return appl_err_set(err, -EINVAL, "bad IPv6 listen address");
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return appl_err_set(err, -EINVAL, "bad IPv4 listen address");
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		len = sizeof(*s4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
		int e = errno;

		close(fd);
		return appl_err_errno(err, -e, e, "listen on %s", addr);
	}
	*out = fd;
	return 0;
}

static unsigned bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static int listener_start(struct http_front *f, struct listener *l, const char *addr,
			  struct appl_err *err)
{
	const struct http_front_config *cfg = &f->cfg;
	unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	const union MHD_DaemonInfo *di;
	struct MHD_OptionItem tls[4] = {{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL},
					{MHD_OPTION_END, 0, NULL}};
	int rc;

	l->f = f;
	l->lfd = l->efd = -1;
	if (strncmp(addr, "unix:", 5) == 0) {
		rc = listen_unix(addr + 5, &l->lfd, err);
		if (rc == 0 && !(l->unix_path = strdup(addr + 5)))
			rc = appl_err_set(err, -ENOMEM, "out of memory");
	} else {
		rc = listen_inet(addr, &l->lfd, err);
	}
	if (rc)
		return rc;
	l->port = bound_port(l->lfd);
	if (cfg->tls_cert_pem) {
		flags |= MHD_USE_TLS;
		tls[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
						 (void *)cfg->tls_cert_pem};
		tls[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0,
						 (void *)cfg->tls_key_pem};
		tls[2] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
						 (void *)TLS_PRIORITIES};
	}
	l->d = front_daemon_start(l, flags, tls);
	l->failed = !l->d;
	if (!l->d)
		/* MHD may or may not have closed the socket it was given;
		 * leaking it beats closing a number someone reused. */
		return appl_err_set(err, -EINVAL, "cannot serve %s (bad TLS key or certificate?)",
				    addr);
	di = front_mhd.get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD);
	if (!di)
		return appl_err_set(err, -EINVAL, "libmicrohttpd has no epoll descriptor");
	l->efd = di->epoll_fd;
	return loop_add(f->loop, l->efd, EPOLLIN, front_on_epoll, f, err);
}

/* ---- the front ---------------------------------------------------------- */

static int config_check(const struct http_front_config *cfg, struct appl_err *err)
{
	if (!cfg->nlisten || cfg->nlisten > HTTP_FRONT_LISTEN_MAX || !cfg->listen)
		return appl_err_set(err, -EINVAL, "http: 1 to %u listen addresses",
				    HTTP_FRONT_LISTEN_MAX);
	if (!cfg->path || cfg->path[0] != '/')
		return appl_err_set(err, -EINVAL, "http: the path must start with /");
	if (!cfg->on_request || !cfg->on_gone)
		return appl_err_set(err, -EINVAL, "http: on_request and on_gone are required");
	if (!cfg->max_connections || !cfg->slow_s || !cfg->body_bytes || cfg->header_bytes < 1024)
		return appl_err_set(err, -EINVAL,
				    "http: connections, slow_s and body cap must be set, and at "
				    "least 1024 header bytes");
	if (!cfg->tls_cert_pem != !cfg->tls_key_pem)
		return appl_err_set(err, -EINVAL, "http: TLS needs both a certificate and a key");
	return 0;
}

int http_front_open(struct loop *loop, const struct http_front_config *cfg, struct http_front **out,
		    struct appl_err *err)
{
	struct http_front *f;
	struct appl_err le = {0};
	int rc = config_check(cfg, err);

	if (rc)
		return rc;
	if (http_front_load(&le) < 0)
		return appl_err_set(err, le.code, "http: %s", le.msg);
	if (!(f = calloc(1, sizeof(*f))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	f->loop = loop;
	f->cfg = *cfg;
	loop_task_init(&f->kick, front_on_kick, f);
	if (!(f->mhd_timer = loop_timer_new(loop, front_on_kick, f, err)) ||
	    !(f->slow_timer = loop_timer_new(loop, front_on_slow, f, err))) {
		http_front_close(f);
		return err ? err->code : -ENOMEM;
	}
	for (size_t i = 0; i < cfg->nlisten; i++) {
		f->nls++;
		if ((rc = listener_start(f, &f->ls[i], cfg->listen[i].addr, err))) {
			http_front_close(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

void http_front_close(struct http_front *f)
{
	if (!f)
		return;
	f->closing = true;
	/* MHD must not be stopped with a connection suspended: wake each with
	 * orders to abort, and let MHD close them in one more run. */
	for (struct http_req *r = f->reqs; r; r = r->lnext)
		if (r->suspended) {
			r->aborting = true;
			front_req_resume(r);
		}
	f->in_mhd++;
	for (size_t i = 0; i < f->nls; i++)
		if (f->ls[i].d)
			front_mhd.run(f->ls[i].d);
	f->in_mhd--;
	for (size_t i = 0; i < f->nls; i++) {
		struct listener *l = &f->ls[i];

		if (l->efd >= 0)
			loop_del(f->loop, l->efd);
		/* Stopping ends every connection (on_gone for those the owner
		 * holds) and closes the listening socket. */
		if (l->d)
			front_mhd.stop_daemon(l->d);
		else if (l->lfd >= 0 && !l->failed)
			close(l->lfd);
		if (l->unix_path) {
			unlink(l->unix_path);
			free(l->unix_path);
		}
	}
	loop_task_cancel(f->loop, &f->kick);
	loop_timer_free(f->mhd_timer);
	loop_timer_free(f->slow_timer);
	free(f);
}

unsigned http_front_port(const struct http_front *f, size_t i)
{
	return i < f->nls ? f->ls[i].port : 0;
}

const char *http_req_method(const struct http_req *r)
{
	return r->method;
}

const char *http_req_header(const struct http_req *r, const char *name)
{
	return front_mhd.lookup_connection_value(r->mc, MHD_HEADER_KIND, name);
}

const char *http_req_body(const struct http_req *r, size_t *len)
{
	*len = r->len;
	return r->body ? r->body : "";
}

const void *http_req_principal(const struct http_req *r)
{
	return r->principal;
}

const char *http_req_peer(const struct http_req *r)
{
	return r->peer;
}

void http_req_set_data(struct http_req *r, void *d)
{
	r->data = d;
}

void *http_req_data(const struct http_req *r)
{
	return r->data;
}
