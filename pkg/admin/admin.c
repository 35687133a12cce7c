/* admin.c: the admin socket on the event loop (see admin.h). */
#define _GNU_SOURCE
#include "admin/admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/fs.h"
#include "log/log.h"

#define SUN_PATH_MAX  sizeof(((struct sockaddr_un *)0)->sun_path)
#define ADMIN_BACKLOG (2 * APPL_ADMIN_CONNECTIONS_MAX)
#define ACCEPTS_ROUND (2 * APPL_ADMIN_CONNECTIONS_MAX) /* per round: the loop's share */
#define TMP_SUFFIX    ".new"

/* One peer being served. fd -1: a free slot. */
struct conn {
	struct admin *a;
	int fd;
	struct admin_peer peer;
	char in[APPL_ADMIN_REQUEST_MAX];
	size_t in_len;
	char *out; /* the answer line, once there is one */
	size_t out_len, out_off;
	uint64_t ticket;      /* the reload it waits for; 0: none */
	uint64_t deadline_ms; /* 0: none (its answer is the owner's to give) */
};

struct admin {
	struct loop *loop;
	struct admin_hooks hooks;
	unsigned timeout_ms;
	int lfd;
	bool named; /* the socket is at path: removed at the end */
	char path[SUN_PATH_MAX];
	char name[APPL_ADMIN_NAME_MAX + 1];
	uint64_t next_ticket;
	struct loop_timer *timer;
	struct log_rate refused; /* refused peers, logged at a rate */
	struct conn conns[APPL_ADMIN_CONNECTIONS_MAX];
};

/* ---- one connection ------------------------------------------------------------ */

static void conn_close(struct conn *c)
{
	loop_del(c->a->loop, c->fd);
	close(c->fd);
	free(c->out);
	memset(&c->peer, 0, sizeof(c->peer));
	c->fd = -1;
	c->out = NULL;
	c->in_len = c->out_len = c->out_off = 0;
	c->ticket = c->deadline_ms = 0;
}

/* The timer fires at the earliest deadline of a peer. */
static void timer_rearm(struct admin *a)
{
	uint64_t now = loop_now_ms(), first = 0;

	for (size_t i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++) {
		uint64_t d = a->conns[i].deadline_ms;

		if (a->conns[i].fd >= 0 && d && (!first || d < first))
			first = d;
	}
	loop_timer_set(a->timer, !first ? 0 : first > now ? first - now : 1);
}

static void deadline_set(struct conn *c)
{
	c->deadline_ms = loop_now_ms() + c->a->timeout_ms;
	timer_rearm(c->a);
}

/* As much of the answer as the peer takes now; the rest when it can take
 * more. The connection ends with the answer. */
static void conn_send(struct conn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (loop_mod(c->a->loop, c->fd, EPOLLOUT) < 0)
				break;
			return;
		}
		if (n <= 0)
			break;
		c->out_off += (size_t)n;
	}
	conn_close(c);
}

/* Answer with o (stolen; NULL: out of memory), one line. */
static void conn_answer(struct conn *c, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	size_t len = s ? strlen(s) : 0;

	json_decref(o);
	if (s && len + 1 > APPL_ADMIN_ANSWER_MAX) {
		free(s);
		o = admin_answer_new(NULL, "the answer is too large");
		s = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		len = s ? strlen(s) : 0;
	}
	if (!s) {
		conn_close(c);
		return;
	}
	s[len] = '\n'; /* json_dumps leaves room only for the NUL: it becomes the newline */
	c->out = s;
	c->out_len = len + 1;
	c->ticket = 0;
	deadline_set(c);
	conn_send(c);
}

static void conn_refuse(struct conn *c, const enum admin_op *op, const char *why)
{
	conn_answer(c, admin_answer_new(op, why));
}

static void status_answer(struct conn *c)
{
	static const enum admin_op op = ADMIN_OP_STATUS;
	json_t *st = c->a->hooks.status ? c->a->hooks.status(c->a->hooks.data) : json_object();
	json_t *o = admin_answer_new(&op, NULL), *body = json_object();

	log_line(LOG_DEBUG, NULL, "admin: status for uid %u pid %d", (unsigned)c->peer.uid,
		 (int)c->peer.pid);
	if (!st || !o || !body || json_object_set_new(body, "name", json_string(c->a->name)) < 0 ||
	    json_object_set_new(body, "pid", json_integer(getpid())) < 0 ||
	    json_object_update(body, st) < 0 || json_object_set(o, "status", body) < 0) {
		json_decref(o);
		o = admin_answer_new(&op, "out of memory");
	}
	json_decref(st);
	json_decref(body);
	conn_answer(c, o);
}

/* The owner answers later (admin_reload_done), perhaps from inside its
 * hook: c is not touched after the hook. Meanwhile only the peer's hangup
 * is watched, and no deadline runs: the wait is the reload's. */
static void reload_ask(struct conn *c)
{
	struct admin *a = c->a;
	struct admin_peer peer = c->peer;

	log_line(LOG_INFO, NULL, "admin: uid %u pid %d asks for a reload", (unsigned)peer.uid,
		 (int)peer.pid);
	if (!a->hooks.reload) {
		static const enum admin_op op = ADMIN_OP_RELOAD;

		conn_refuse(c, &op, "this appliance does not reload");
		return;
	}
	c->ticket = ++a->next_ticket;
	c->deadline_ms = 0;
	loop_mod(a->loop, c->fd, 0);
	timer_rearm(a);
	a->hooks.reload(a->hooks.data, c->ticket, &peer);
}

/* The request line is in[0..len): one request, and nothing after it. */
static void conn_request(struct conn *c, size_t len)
{
	struct appl_err err = {0};
	enum admin_op op;

	if (len + 1 < c->in_len)
		conn_refuse(c, NULL, "one request per connection, and nothing after its newline");
	else if (admin_request_parse(c->in, len, &op, &err) < 0)
		conn_refuse(c, NULL, err.msg);
	else if (op == ADMIN_OP_STATUS)
		status_answer(c);
	else
		reload_ask(c);
}

static void conn_read(struct conn *c)
{
	ssize_t n;
	char *nl;

	do
		n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n < 0) {
		conn_close(c);
		return;
	}
	if (n == 0) {
		conn_refuse(c, NULL, "the request must end with a newline");
		return;
	}
	c->in_len += (size_t)n;
	if ((nl = memchr(c->in, '\n', c->in_len)))
		conn_request(c, (size_t)(nl - c->in));
	else if (c->in_len == sizeof(c->in))
		conn_refuse(c, NULL, "the request line is too long");
}

static void on_conn(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct conn *c = data;
	(void)loop;
	(void)fd;

	if (c->out)
		conn_send(c);
	else if (c->ticket)
		conn_close(c); /* only a hangup or an error is watched now */
	else if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		conn_read(c);
}

static void on_timer(void *data)
{
	struct admin *a = data;
	uint64_t now = loop_now_ms();

	for (size_t i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++) {
		struct conn *c = &a->conns[i];

		if (c->fd >= 0 && c->deadline_ms && c->deadline_ms <= now) {
			log_line(LOG_INFO, NULL,
				 c->out ? "admin: uid %u pid %d did not read its answer in %u ms"
					: "admin: uid %u pid %d sent no request in %u ms",
				 (unsigned)c->peer.uid, (int)c->peer.pid, a->timeout_ms);
			conn_close(c);
		}
	}
	timer_rearm(a);
}

/* ---- accepting ------------------------------------------------------------------ */

/* One line to a peer that is not served, then its end. The socket's
 * buffer is empty, so the line goes at once or not at all: nothing waits.
 * What the peer sent already is read and dropped first (a bounded read
 * that does not wait): a socket closed with bytes unread resets the
 * connection instead of ending it. */
static void refuse_fd(int fd, const char *why)
{
	json_t *o = admin_answer_new(NULL, why);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	char sink[APPL_ADMIN_REQUEST_MAX];

	if (s) {
		size_t len = strlen(s);

		s[len] = '\n';
		(void)!send(fd, s, len + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	free(s);
	json_decref(o);
	(void)!recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
	close(fd);
}

/* SO_PEERCRED: who connected, as the kernel saw it at connect(). Only
 * root, and the appliance's own user (a rootless appliance), are served:
 * whoever could loosen the socket's mode must still not be let in. */
static bool peer_allowed(struct admin *a, int fd, struct admin_peer *peer)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char why[160];
	unsigned dropped = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || len != sizeof(cr)) {
		refuse_fd(fd, "refused: the peer's credentials could not be read");
		return false;
	}
	*peer = (struct admin_peer){.uid = cr.uid, .pid = cr.pid};
	if (cr.uid == 0 || cr.uid == geteuid())
		return true;
	if (geteuid() == 0)
		snprintf(why, sizeof(why),
			 "refused: uid %u may not use this admin socket (only root)",
			 (unsigned)cr.uid);
	else
		snprintf(why, sizeof(why),
			 "refused: uid %u may not use this admin socket (only root and uid %u)",
			 (unsigned)cr.uid, (unsigned)geteuid());
	if (!log_rate_allow(&a->refused, loop_now_ms(), &dropped))
		;
	else if (dropped)
		log_line(LOG_WARN, NULL, "admin: %s (pid %d; %u more were refused, not logged)",
			 why, (int)cr.pid, dropped);
	else
		log_line(LOG_WARN, NULL, "admin: %s (pid %d)", why, (int)cr.pid);
	refuse_fd(fd, why);
	return false;
}

static struct conn *slot_free(struct admin *a)
{
	for (size_t i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++)
		if (a->conns[i].fd < 0)
			return &a->conns[i];
	return NULL;
}

static void accept_one(struct admin *a, int fd)
{
	struct admin_peer peer;
	struct conn *c;

	if (!peer_allowed(a, fd, &peer))
		return;
	if (!(c = slot_free(a))) {
		refuse_fd(fd, "busy: too many admin connections, try again");
		return;
	}
	c->fd = fd;
	c->peer = peer;
	if (loop_add(a->loop, fd, EPOLLIN, on_conn, c, NULL) < 0) {
		c->fd = -1;
		close(fd);
		return;
	}
	deadline_set(c);
}

static void on_listen(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct admin *a = data;
	(void)loop;
	(void)events;

	for (int i = 0; i < ACCEPTS_ROUND; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0 && errno == EINTR)
			continue;
		if (cfd < 0)
			return; /* EAGAIN; or EMFILE: the next round tries again */
		accept_one(a, cfd);
	}
}

/* ---- the socket ------------------------------------------------------------------ */

static int sock_paths(struct admin *a, const char *dir, const char *name, char *tmp,
		      struct appl_err *err)
{
	char file[APPL_ADMIN_NAME_MAX + 32];

	if (admin_sock_name(file, sizeof(file), name, getpid()) < 0)
		return appl_err_set(err, -EINVAL, "admin socket name \"%.*s\": not a name",
				    APPL_ADMIN_NAME_MAX + 8, name);
	if (appl_path_join(a->path, sizeof(a->path), dir, "/", file) < 0 ||
	    appl_path_join(tmp, SUN_PATH_MAX, a->path, TMP_SUFFIX, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG,
				    "the admin socket's path %s/%s is too long (at most %zu "
				    "bytes with \"%s\"): name a shorter --admin-dir",
				    dir, file, SUN_PATH_MAX - 1 - strlen(TMP_SUFFIX), TMP_SUFFIX);
	return 0;
}

/* Bound under a temporary name and made 0600 there, then renamed over
 * the path: the socket is never reachable at its name with another mode,
 * and a stale one of this NAME.PID (an earlier process with this pid) is
 * replaced in the same step. Anything but a socket at the path is left
 * alone and refused. */
static int sock_bind(struct admin *a, const char *tmp, struct appl_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;

	memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
	if (lstat(a->path, &st) == 0 && !S_ISSOCK(st.st_mode))
		return appl_err_set(err, -EEXIST, "%s exists and is not a socket: remove it",
				    a->path);
	if (unlink(tmp) < 0 && errno != ENOENT)
		return appl_err_errno(err, -errno, errno, "removing %s", tmp);
	a->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->lfd < 0)
		return appl_err_errno(err, -errno, errno, "admin socket");
	if (bind(a->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return appl_err_errno(err, -errno, errno, "binding %s", tmp);
	if (chmod(tmp, 0600) < 0 || listen(a->lfd, ADMIN_BACKLOG) < 0 || rename(tmp, a->path) < 0) {
		int e = errno;

		unlink(tmp);
		return appl_err_errno(err, -e, e, "making the admin socket %s", a->path);
	}
	a->named = true;
	return 0;
}

int admin_open(struct loop *loop, const struct admin_config *cfg, struct admin **out,
	       struct appl_err *err)
{
	char dir[SUN_PATH_MAX], tmp[SUN_PATH_MAX];
	struct appl_err e = {0};
	struct admin *a;
	int rc;

	*out = NULL;
	if (!(a = calloc(1, sizeof(*a))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	a->loop = loop;
	a->hooks = cfg->hooks;
	a->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : APPL_ADMIN_TIMEOUT_MS;
	a->lfd = -1;
	for (size_t i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++)
		a->conns[i] = (struct conn){.a = a, .fd = -1};
	if (cfg->dir)
		rc = appl_path_join(dir, sizeof(dir), cfg->dir, "", "") < 0
			     ? appl_err_set(&e, -ENAMETOOLONG, "admin directory path too long")
			     : 0;
	else
		rc = admin_dir_default(dir, sizeof(dir), &e);
	if (rc == 0)
		rc = appl_private_dir(dir, "admin directory", &e);
	if (rc == 0 && (rc = sock_paths(a, dir, cfg->name, tmp, &e)) == 0 &&
	    (rc = sock_bind(a, tmp, &e)) == 0)
		snprintf(a->name, sizeof(a->name), "%s", cfg->name);
	if (rc == 0 && (!(a->timer = loop_timer_new(loop, on_timer, a, &e)) ||
			loop_add(loop, a->lfd, EPOLLIN, on_listen, a, &e) < 0))
		rc = e.code;
	if (rc < 0) {
		admin_close(a);
		if (err)
			*err = e;
		return rc;
	}
	*out = a;
	return 0;
}

const char *admin_path(const struct admin *a)
{
	return a->path;
}

void admin_reload_done(struct admin *a, uint64_t ticket, int rc, const char *why)
{
	static const enum admin_op op = ADMIN_OP_RELOAD;

	for (size_t i = 0; a && ticket && i < APPL_ADMIN_CONNECTIONS_MAX; i++) {
		struct conn *c = &a->conns[i];

		if (c->fd < 0 || c->ticket != ticket)
			continue;
		if (rc == 0)
			conn_answer(c, admin_answer_new(&op, NULL));
		else
			conn_refuse(c, &op, why ? why : strerror(-rc));
		return;
	}
}

void admin_close(struct admin *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++) {
		struct conn *c = &a->conns[i];

		if (c->fd < 0)
			continue;
		if (c->out)
			conn_send(c); /* once more; it closes c once all went */
		if (c->fd >= 0)
			conn_close(c);
	}
	if (a->lfd >= 0) {
		loop_del(a->loop, a->lfd);
		close(a->lfd);
	}
	if (a->named)
		unlink(a->path);
	loop_timer_free(a->timer);
	free(a);
}
