#define _GNU_SOURCE
/* test_admin.c: the admin socket: names, the request parser, the answer
 * check, the listing of sockets, and the server on a loop (a status, a
 * reload answered later, refusals of bad requests, of a silent peer, of
 * one peer too many, of a user who is not root whatever the socket's
 * mode, a stale socket replaced). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "admin/admin.h"
#include "admin/client.h"
#include "base/fs.h"

/* ---- names ------------------------------------------------------------------------ */

static void test_names(void **state)
{
	char long_name[APPL_ADMIN_NAME_MAX + 2];
	(void)state;

	for (const char *const *s =
		     (const char *const[]){"appliance", "t-0123", "A_b-9", "7", NULL};
	     *s; s++)
		assert_true(admin_name_valid(*s, strlen(*s)));
	for (const char *const *s = (const char *const[]){"", "-a", "_a", "a.b", "a/b", "..", "a b",
							  "a\n", "caf\xc3\xa9", NULL};
	     *s; s++)
		assert_false(admin_name_valid(*s, strlen(*s)));
	assert_false(admin_name_valid("a\0b", 3));
	memset(long_name, 'a', sizeof(long_name));
	assert_true(admin_name_valid(long_name, APPL_ADMIN_NAME_MAX));
	assert_false(admin_name_valid(long_name, APPL_ADMIN_NAME_MAX + 1));
}

static void test_socket_names(void **state)
{
	char buf[128], name[APPL_ADMIN_NAME_MAX + 1];
	pid_t pid;
	(void)state;

	assert_int_equal(admin_sock_name(buf, sizeof(buf), "prod", 4242), 0);
	assert_string_equal(buf, "prod.4242.sock");
	assert_int_equal(admin_sock_name_parse(buf, name, &pid), 0);
	assert_string_equal(name, "prod");
	assert_int_equal(pid, 4242);
	assert_int_equal(admin_sock_name_parse("a.2147483647.sock", name, &pid), 0);
	assert_int_equal(admin_sock_name(buf, sizeof(buf), "a.b", 1), -EINVAL);
	assert_int_equal(admin_sock_name(buf, sizeof(buf), "a", 0), -EINVAL);
	assert_int_equal(admin_sock_name(buf, 6, "prod", 4242), -ENAMETOOLONG);
	for (const char *const *s =
		     (const char *const[]){"prod.sock", ".1.sock", "a.01.sock", "a.0.sock",
					   "a.-1.sock", "a.1x.sock", "a.2147483648.sock",
					   "a.b.1.sock", "a.1.sockx", "a.1.sock.new", "a.1.new",
					   "a..sock", "a.1", "-a.1.sock", "a.99999999999.sock",
					   NULL};
	     *s; s++)
		assert_int_equal(admin_sock_name_parse(*s, name, &pid), -EINVAL);
}

/* ---- the request and the answer ------------------------------------------------------- */

static int parse(const char *s, enum admin_op *op, struct appl_err *err)
{
	appl_err_clear(err);
	return admin_request_parse(s, strlen(s), op, err);
}

static void test_request_parse(void **state)
{
	struct appl_err err = {0};
	enum admin_op op = ADMIN_OP_RELOAD;
	char big[APPL_ADMIN_REQUEST_MAX + 8];
	(void)state;

	assert_int_equal(parse("{\"op\":\"status\"}", &op, &err), 0);
	assert_int_equal(op, ADMIN_OP_STATUS);
	assert_int_equal(parse(" { \"op\" : \"reload\" } ", &op, &err), 0);
	assert_int_equal(op, ADMIN_OP_RELOAD);
	/* the request lines the client sends, without their newline */
	for (enum admin_op o = ADMIN_OP_STATUS; o <= ADMIN_OP_RELOAD; o++) {
		const char *line = admin_request_line(o);

		assert_int_equal(admin_request_parse(line, strlen(line) - 1, &op, &err), 0);
		assert_int_equal(op, o);
	}
	static const char *const bad[] = {
		"",
		"status",
		"[\"status\"]",
		"\"status\"",
		"{}",
		"{\"op\":1}",
		"{\"op\":null}",
		"{\"op\":[\"status\"]}",
		"{\"op\":\"Status\"}",
		"{\"op\":\"exec\"}",
		"{\"op\":\"status\",\"as\":\"root\"}",
		"{\"op\":\"status\",\"op\":\"reload\"}",
		"{\"op\":\"status\"} {}",
		"{\"op\":\"status\\u0000\"}",
		"{\"op\":{\"op\":\"status\"}}",
		NULL,
	};
	for (size_t i = 0; bad[i]; i++) {
		assert_int_not_equal(parse(bad[i], &op, &err), 0);
		assert_true(err.msg[0] != '\0');
		assert_null(strchr(err.msg, '\n'));
	}
	assert_string_equal((parse("{\"op\":\"exec\"}", &op, &err), err.msg),
			    "no op \"exec\" (the ops are status and reload)");
	/* a raw NUL inside the bytes */
	assert_int_equal(admin_request_parse("{\"op\":\"status\"}\0", 16, &op, &err), -EINVAL);
	/* the size is checked before anything is parsed */
	memset(big, ' ', sizeof(big));
	assert_int_equal(admin_request_parse(big, APPL_ADMIN_REQUEST_MAX, &op, &err), -E2BIG);
	assert_int_equal(admin_request_parse(big, APPL_ADMIN_REQUEST_MAX, &op, NULL), -E2BIG);
	assert_int_not_equal(admin_request_parse("x", 1, &op, NULL), 0);
}

static int answer(const char *s, enum admin_op op)
{
	json_t *a = NULL;
	struct appl_err err = {0};
	int rc = admin_answer_parse(s, strlen(s), op, &a, &err);

	assert_true(rc == 0 ? a != NULL : a == NULL);
	json_decref(a);
	return rc;
}

static void test_answer_parse(void **state)
{
	enum admin_op st = ADMIN_OP_STATUS;
	json_t *o;
	char *s;
	(void)state;

	assert_int_equal(answer("{\"ok\":true,\"op\":\"status\",\"status\":{}}", st), 0);
	assert_int_equal(answer("{\"ok\":true,\"op\":\"reload\"}", ADMIN_OP_RELOAD), 0);
	assert_int_equal(answer("{\"ok\":false,\"op\":null,\"error\":\"no\"}", st), 0);
	assert_int_equal(answer("{\"ok\":true,\"op\":\"status\"}", st), -EPROTO);
	assert_int_equal(answer("{\"ok\":true,\"op\":\"reload\"}", st), -EPROTO);
	assert_int_equal(answer("{\"ok\":false}", st), -EPROTO);
	assert_int_equal(answer("{\"ok\":1,\"op\":\"status\",\"status\":{}}", st), -EPROTO);
	assert_int_equal(answer("[]", st), -EPROTO);
	assert_int_not_equal(answer("{\"ok\":true", st), 0);
	/* what the server writes, the client reads */
	o = admin_answer_new(&st, "why");
	s = json_dumps(o, JSON_COMPACT);
	assert_string_equal(s, "{\"ok\":false,\"op\":\"status\",\"error\":\"why\"}");
	assert_int_equal(answer(s, st), 0);
	free(s);
	json_decref(o);
	o = admin_answer_new(NULL, "bad");
	s = json_dumps(o, JSON_COMPACT);
	assert_string_equal(s, "{\"ok\":false,\"op\":null,\"error\":\"bad\"}");
	free(s);
	json_decref(o);
}

/* ---- listing sockets -------------------------------------------------------------- */

static char *tmpdir(void)
{
	char *d = strdup("/tmp/test_admin.XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void touch(const char *dir, const char *name)
{
	char p[PATH_MAX];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
}

static void test_targets_list(void **state)
{
	char *d = tmpdir();
	struct admin_target *t;
	struct appl_err err = {0};
	size_t n;
	(void)state;

	for (const char *const *s = (const char *const[]){"b.2.sock", "a.30.sock", "a.4.sock",
							  "junk", "a.04.sock", "a.5.new", NULL};
	     *s; s++)
		touch(d, *s);
	assert_int_equal(admin_targets_list(d, NULL, 0, &t, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(t[0].name, "a");
	assert_int_equal(t[0].pid, 4);
	assert_int_equal(t[1].pid, 30);
	assert_string_equal(t[2].name, "b");
	assert_non_null(strstr(t[2].path, "/b.2.sock"));
	free(t);
	assert_int_equal(admin_targets_list(d, "a", 0, &t, &n, &err), 0);
	assert_int_equal(n, 2);
	free(t);
	assert_int_equal(admin_targets_list(d, NULL, 2, &t, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(t[0].name, "b");
	free(t);
	assert_int_equal(admin_targets_list(d, "c", 0, &t, &n, &err), 0);
	assert_int_equal(n, 0);
	free(t);
	appl_tree_remove(d);
	assert_int_equal(admin_targets_list(d, NULL, 0, &t, &n, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "does not exist"));
	free(d);
}

/* ---- the server ------------------------------------------------------------------ */

struct srv {
	char *dir;
	struct loop *loop;
	struct admin *a;
	uint64_t ticket; /* the last reload asked for */
	struct admin_peer peer;
	int reloads;
	bool answer_inside; /* answer the reload from inside the hook */
};

static json_t *status_hook(void *data)
{
	(void)data;
	return json_pack("{si}", "uptime_s", 7);
}

static void reload_hook(void *data, uint64_t ticket, const struct admin_peer *peer)
{
	struct srv *s = data;

	s->ticket = ticket;
	s->peer = *peer;
	s->reloads++;
	if (s->answer_inside)
		admin_reload_done(s->a, ticket, 0, NULL);
}

static void srv_open(struct srv *s, unsigned timeout_ms)
{
	struct appl_err err = {0};
	struct admin_config c = {.name = "unit",
				 .hooks = {.status = status_hook, .reload = reload_hook, .data = s},
				 .timeout_ms = timeout_ms};

	memset(s, 0, sizeof(*s));
	s->dir = tmpdir();
	c.dir = s->dir;
	assert_non_null(s->loop = loop_new(&err));
	assert_int_equal(admin_open(s->loop, &c, &s->a, &err), 0);
}

static void srv_close(struct srv *s)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s", admin_path(s->a));
	admin_close(s->a);
	assert_int_equal(access(path, F_OK), -1); /* removed at the end */
	loop_free(s->loop);
	appl_tree_remove(s->dir);
	free(s->dir);
}

static int peer_connect(struct srv *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", admin_path(s->a));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Turn the loop until fd has a whole line or its end; the line (new). */
static char *line_wait(struct srv *s, int fd)
{
	char *buf = calloc(1, APPL_ADMIN_ANSWER_MAX);
	size_t len = 0;

	for (int i = 0; i < 500; i++) {
		ssize_t n = recv(fd, buf + len, APPL_ADMIN_ANSWER_MAX - 1 - len, MSG_DONTWAIT);

		if (n == 0 || (n > 0 && memchr(buf + len, '\n', (size_t)n)))
			return buf;
		if (n > 0)
			len += (size_t)n;
		loop_run_once(s->loop, 20);
	}
	fail_msg("no answer");
	return NULL;
}

static char *ask(struct srv *s, const char *req, size_t len)
{
	int fd = peer_connect(s);
	char *line;

	assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
	line = line_wait(s, fd);
	close(fd);
	return line;
}

static void test_status_answer(void **state)
{
	struct srv s;
	struct stat st;
	char want[128], *line;
	(void)state;

	srv_open(&s, 0);
	snprintf(want, sizeof(want), "%s/unit.%d.sock", s.dir, (int)getpid());
	assert_string_equal(admin_path(s.a), want);
	assert_int_equal(lstat(want, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	line = ask(&s, "{\"op\":\"status\"}\n", 16);
	snprintf(want, sizeof(want),
		 "{\"ok\":true,\"op\":\"status\",\"status\":{\"name\":\"unit\",\"pid\":%d,"
		 "\"uptime_s\":7}}\n",
		 (int)getpid());
	assert_string_equal(line, want);
	free(line);
	srv_close(&s);
}

static void test_bad_requests_refused(void **state)
{
	struct srv s;
	char big[APPL_ADMIN_REQUEST_MAX + 16], *line;
	(void)state;

	srv_open(&s, 0);
	line = ask(&s, "{\"op\":\"exec\"}\n", 14);
	assert_string_equal(line,
			    "{\"ok\":false,\"op\":null,\"error\":\"no op \\\"exec\\\" (the ops "
			    "are status and reload)\"}\n");
	free(line);
	line = ask(&s, "{\"op\":\"status\"}\n{\"op\":\"reload\"}\n", 32);
	assert_non_null(strstr(line, "one request per connection"));
	free(line);
	memset(big, ' ', sizeof(big));
	line = ask(&s, big, sizeof(big));
	assert_non_null(strstr(line, "too long"));
	free(line);
	/* a request without its newline, then the end */
	{
		int fd = peer_connect(&s);

		assert_int_equal(send(fd, "{\"op\":\"status\"}", 15, MSG_NOSIGNAL), 15);
		shutdown(fd, SHUT_WR);
		line = line_wait(&s, fd);
		assert_non_null(strstr(line, "must end with a newline"));
		free(line);
		close(fd);
	}
	assert_int_equal(s.reloads, 0);
	srv_close(&s);
}

static void test_reload_is_answered_later(void **state)
{
	struct srv s;
	char *line;
	int fd;
	(void)state;

	srv_open(&s, 0);
	fd = peer_connect(&s);
	assert_int_equal(send(fd, "{\"op\":\"reload\"}\n", 16, MSG_NOSIGNAL), 16);
	for (int i = 0; i < 100 && !s.reloads; i++)
		loop_run_once(s.loop, 20);
	assert_int_equal(s.reloads, 1);
	assert_int_equal(s.peer.uid, geteuid());
	assert_int_equal(s.peer.pid, getpid());
	/* nothing until the owner answers; a ticket not asked for is ignored */
	admin_reload_done(s.a, s.ticket + 100, 0, NULL);
	loop_run_once(s.loop, 50);
	assert_int_equal(recv(fd, (char[8]){0}, 8, MSG_DONTWAIT), -1);
	admin_reload_done(s.a, s.ticket, -ENOSYS, "not built");
	line = line_wait(&s, fd);
	assert_string_equal(line, "{\"ok\":false,\"op\":\"reload\",\"error\":\"not built\"}\n");
	free(line);
	close(fd);
	/* answered from inside the hook */
	s.answer_inside = true;
	line = ask(&s, "{\"op\":\"reload\"}\n", 16);
	assert_string_equal(line, "{\"ok\":true,\"op\":\"reload\"}\n");
	free(line);
	/* a peer that went away before its answer: nothing breaks */
	s.answer_inside = false;
	fd = peer_connect(&s);
	assert_int_equal(send(fd, "{\"op\":\"reload\"}\n", 16, MSG_NOSIGNAL), 16);
	for (int i = 0; i < 100 && s.reloads < 3; i++)
		loop_run_once(s.loop, 20);
	close(fd);
	loop_run_once(s.loop, 50);
	admin_reload_done(s.a, s.ticket, 0, NULL);
	srv_close(&s);
}

static void test_silent_peers_and_one_too_many(void **state)
{
	struct srv s;
	int fds[APPL_ADMIN_CONNECTIONS_MAX], extra;
	char *line;
	(void)state;

	srv_open(&s, 300);
	for (int i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++)
		fds[i] = peer_connect(&s);
	for (int i = 0; i < 10; i++)
		loop_run_once(s.loop, 5);
	extra = peer_connect(&s);
	line = line_wait(&s, extra);
	assert_non_null(strstr(line, "busy"));
	free(line);
	close(extra);
	/* the silent ones are closed at their deadline */
	for (int i = 0; i < APPL_ADMIN_CONNECTIONS_MAX; i++) {
		line = line_wait(&s, fds[i]);
		assert_string_equal(line, "");
		free(line);
		close(fds[i]);
	}
	/* and their slots serve again */
	line = ask(&s, "{\"op\":\"status\"}\n", 16);
	assert_non_null(strstr(line, "\"ok\":true"));
	free(line);
	srv_close(&s);
}

/* A user who is not root, on a socket anyone may open: refused by the
 * server, with a line saying so. */
static void test_other_users_are_refused(void **state)
{
	struct srv s;
	int status, p[2];
	char got[256] = "";
	pid_t child;
	(void)state;

	if (geteuid() != 0)
		skip();
	srv_open(&s, 0);
	assert_int_equal(chmod(s.dir, 0755), 0);
	assert_int_equal(chmod(admin_path(s.a), 0666), 0);
	assert_int_equal(pipe(p), 0);
	child = fork();
	if (child == 0) {
		struct admin_target t = {.name = "unit", .pid = getpid()};
		json_t *a = NULL;
		struct appl_err err = {0};

		close(p[0]);
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		snprintf(t.path, sizeof(t.path), "%s", admin_path(s.a));
		if (admin_ask(t.path, ADMIN_OP_STATUS, 5000, &a, &err) < 0)
			_exit(3);
		dprintf(p[1], "%s", json_string_value(json_object_get(a, "error")));
		_exit(json_is_false(json_object_get(a, "ok")) ? 0 : 4);
	}
	close(p[1]);
	while (waitpid(child, &status, WNOHANG) == 0)
		loop_run_once(s.loop, 20);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(read(p[0], got, sizeof(got) - 1) > 0);
	close(p[0]);
	assert_string_equal(got, "refused: uid 65534 may not use this admin socket (only root)");
	srv_close(&s);
}

static void test_stale_socket_replaced_other_file_refused(void **state)
{
	struct srv s;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct appl_err err = {0};
	struct admin_config c = {.name = "stale"};
	struct admin *a;
	json_t *ans = NULL;
	int fd;
	(void)state;

	srv_open(&s, 0);
	/* a socket of an earlier process with our pid, nobody behind it */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/stale.%d.sock", s.dir, (int)getpid());
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_int_equal(admin_ask(sa.sun_path, ADMIN_OP_STATUS, 1000, &ans, &err), -ECONNREFUSED);
	c.dir = s.dir;
	assert_int_equal(admin_open(s.loop, &c, &a, &err), 0);
	admin_close(a);
	/* something else at the name is left alone */
	touch(s.dir, strrchr(sa.sun_path, '/') + 1);
	assert_int_equal(admin_open(s.loop, &c, &a, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "is not a socket"));
	assert_int_equal(access(sa.sun_path, F_OK), 0);
	/* a bad name never makes a file */
	c.name = "../x";
	assert_int_equal(admin_open(s.loop, &c, &a, &err), -EINVAL);
	srv_close(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_socket_names),
		cmocka_unit_test(test_request_parse),
		cmocka_unit_test(test_answer_parse),
		cmocka_unit_test(test_targets_list),
		cmocka_unit_test(test_status_answer),
		cmocka_unit_test(test_bad_requests_refused),
		cmocka_unit_test(test_reload_is_answered_later),
		cmocka_unit_test(test_silent_peers_and_one_too_many),
		cmocka_unit_test(test_other_users_are_refused),
		cmocka_unit_test(test_stale_socket_replaced_other_file_refused),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
