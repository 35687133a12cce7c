/* client.c: finding and asking admin sockets (see client.h). */
#define _GNU_SOURCE
#include "admin/client.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"

#define ANSWER_CHUNK 4096

/* ---- listing ----------------------------------------------------------------------- */

static int target_cmp(const void *x, const void *y)
{
	const struct admin_target *a = x, *b = y;
	int c = strcmp(a->name, b->name);

	return c ? c : (a->pid > b->pid) - (a->pid < b->pid);
}

static int dir_open_err(const char *dir, int e, struct appl_err *err)
{
	if (e == ENOENT)
		return appl_err_set(err, -ENOENT,
				    "%s does not exist: no appliance has made its "
				    "admin socket there",
				    dir);
	if (e == EACCES)
		return appl_err_set(
			err, -EACCES,
			"%s: permission denied: only root (or a rootless appliance's own "
			"user) may use its admin sockets",
			dir);
	return appl_err_errno(err, -e, e, "reading %s", dir);
}

/* Add entry file of dir when it is a socket name that matches. */
static int target_add(struct admin_target *t, size_t *n, const char *dir, const char *file,
		      const char *name, pid_t pid)
{
	struct admin_target *x = &t[*n];

	if (admin_sock_name_parse(file, x->name, &x->pid) < 0)
		return 0;
	if ((name && strcmp(name, x->name) != 0) || (pid && pid != x->pid))
		return 0;
	if (appl_path_join(x->path, sizeof(x->path), dir, "/", file) < 0)
		return 0;
	(*n)++;
	return 0;
}

int admin_targets_list(const char *dir, const char *name, pid_t pid, struct admin_target **out,
		       size_t *n, struct appl_err *err)
{
	struct admin_target *t;
	struct dirent *de;
	DIR *d;

	*out = NULL;
	*n = 0;
	if (!(d = opendir(dir)))
		return dir_open_err(dir, errno, err);
	if (!(t = calloc(APPL_ADMIN_SOCKETS_MAX, sizeof(*t)))) {
		closedir(d);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	while (*n < APPL_ADMIN_SOCKETS_MAX && (de = readdir(d)))
		target_add(t, n, dir, de->d_name, name, pid);
	closedir(d);
	qsort(t, *n, sizeof(*t), target_cmp);
	*out = t;
	return 0;
}

/* ---- asking ------------------------------------------------------------------------ */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for events on fd until deadline: 0, or -ETIMEDOUT, -errno. */
static int wait_for(int fd, short events, uint64_t deadline)
{
	struct pollfd p = {.fd = fd, .events = events};

	for (;;) {
		uint64_t now = now_ms();
		int rc;

		if (now >= deadline)
			return -ETIMEDOUT;
		rc = poll(&p, 1, (int)(deadline - now < INT32_MAX ? deadline - now : INT32_MAX));
		if (rc > 0)
			return 0;
		if (rc < 0 && errno != EINTR)
			return -errno;
	}
}

static int sock_connect(const char *path, int *fd, struct appl_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);

	if (len >= sizeof(sa.sun_path))
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long for a socket", path);
	memcpy(sa.sun_path, path, len + 1);
	if ((*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return appl_err_errno(err, -errno, errno, "socket");
	if (connect(*fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	if (errno == EACCES || errno == EPERM)
		return appl_err_set(
			err, -EACCES,
			"%s: permission denied: only root (or a rootless appliance's own "
			"user) may use it",
			path);
	if (errno == ECONNREFUSED || errno == ENOENT)
		return appl_err_set(err, -ECONNREFUSED, "%s: nobody answers (a stale socket)",
				    path);
	if (errno == EAGAIN)
		return appl_err_set(err, -EAGAIN, "%s: busy, try again", path);
	return appl_err_errno(err, -errno, errno, "connecting to %s", path);
}

/* The answer line, up to its newline, into *buf (new) and *len. */
static int line_read(int fd, uint64_t deadline, char **buf, size_t *len, struct appl_err *err)
{
	size_t cap = 0;
	char *nl = NULL;
	int rc;

	*buf = NULL;
	*len = 0;
	while (!nl) {
		ssize_t n;

		if (*len == cap) {
			char *b;

			if (cap >= APPL_ADMIN_ANSWER_MAX)
				return appl_err_set(err, -EPROTO, "the answer is over %u bytes",
						    APPL_ADMIN_ANSWER_MAX);
			cap = cap ? 2 * cap : ANSWER_CHUNK;
			if (!(b = realloc(*buf, cap)))
				return appl_err_set(err, -ENOMEM, "out of memory");
			*buf = b;
		}
		if ((rc = wait_for(fd, POLLIN, deadline)) < 0)
			return appl_err_set(err, rc, "no answer in time");
		n = recv(fd, *buf + *len, cap - *len, 0);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return appl_err_errno(err, -errno, errno, "reading the answer");
		if (n == 0)
			return appl_err_set(err, -EPROTO,
					    *len ? "the answer was cut off"
						 : "it closed without an answer");
		nl = memchr(*buf + *len, '\n', (size_t)n);
		*len += (size_t)n;
	}
	*len = (size_t)(nl - *buf);
	return 0;
}

static int request_send(int fd, enum admin_op op, uint64_t deadline, struct appl_err *err)
{
	const char *line = admin_request_line(op);
	size_t len = strlen(line), off = 0;

	while (off < len) {
		ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);
		int rc;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return appl_err_errno(err, -errno, errno, "sending the request");
		if ((rc = wait_for(fd, POLLOUT, deadline)) < 0)
			return appl_err_set(err, rc, "the request could not be sent in time");
	}
	return 0;
}

int admin_ask(const char *path, enum admin_op op, unsigned timeout_ms, json_t **answer,
	      struct appl_err *err)
{
	uint64_t deadline = now_ms() + timeout_ms;
	char *buf = NULL;
	size_t len = 0;
	int fd = -1, rc;

	*answer = NULL;
	rc = sock_connect(path, &fd, err);
	if (rc == 0)
		rc = request_send(fd, op, deadline, err);
	/* A peer the appliance does not serve gets its line and the end at
	 * once, perhaps before the request went: read that line anyway. */
	if (rc == 0 || rc == -EPIPE || rc == -ECONNRESET) {
		struct appl_err e = {0};
		int rc2 = line_read(fd, deadline, &buf, &len, rc ? &e : err);

		rc = rc == 0 || rc2 == 0 ? rc2 : rc;
	}
	if (rc == 0)
		rc = admin_answer_parse(buf, len, op, answer, err);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}
