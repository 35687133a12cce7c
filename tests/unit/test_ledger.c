#define _GNU_SOURCE
/* test_ledger.c: the ledger replicas share (pkg/ledger/ledger.h) against a
 * real redis-server the test starts on a Unix socket of its own (and one on
 * loopback TCP, for a name and a database), and against a fake server on
 * the loop that answers what no Redis would. Every wait is on something
 * the loop shows (a callback, readiness), with a deadline; none sleeps a
 * fixed time. Without redis-server the tests skip, and fail when CI=true.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ledger/ledger.h"
#include "loop/loop.h"

#define WAIT_MS	 15000u
#define KEY(s)	 (const unsigned char *)(s), sizeof(s) - 1
#define TTL_LONG 60000u

struct fx {
	struct loop *loop;
	const char *redis_bin;
	char dir[64], sock[128], url[160];
	pid_t redis;
	struct ledger *l;
};

/* What one callback saw. */
struct seen {
	int n; /* callbacks */
	enum ledger_claim outcome;
	bool ok;
	unsigned char *value; /* a copy, NULL when none */
	size_t len;
	char why[256];
	struct ledger *free_me; /* ledger_free from inside the callback */
};

static void on_claim(void *data, enum ledger_claim o, const void *v, size_t len)
{
	struct seen *s = data;

	s->n++;
	s->outcome = o;
	free(s->value);
	s->value = NULL;
	s->len = len;
	if (v) {
		s->value = malloc(len + 1);
		memcpy(s->value, v, len);
		s->value[len] = '\0';
	}
	if (o == LEDGER_ERROR)
		snprintf(s->why, sizeof(s->why), "%s", (const char *)v);
	if (s->free_me)
		ledger_free(s->free_me);
}

static void on_put(void *data, bool ok, const char *why)
{
	struct seen *s = data;

	s->n++;
	s->ok = ok;
	snprintf(s->why, sizeof(s->why), "%s", why);
}

static void seen_clear(struct seen *s)
{
	free(s->value);
	memset(s, 0, sizeof(*s));
}

/* ---- the servers ------------------------------------------------------------ */

static const char *redis_find(void)
{
	static const char *const where[] = {"/usr/bin/redis-server", "/usr/sbin/redis-server",
					    "/usr/local/bin/redis-server"};

	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (access(where[i], X_OK) == 0)
			return where[i];
	return NULL;
}

static void need_redis(const struct fx *fx)
{
	if (fx->redis_bin)
		return;
	if (getenv("CI") && strcmp(getenv("CI"), "true") == 0)
		fail_msg("redis-server is missing (scripts/install-deps installs it)");
	skip();
}

static bool unix_connects(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	memcpy(sa.sun_path, path, strnlen(path, sizeof(sa.sun_path) - 1));
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static bool tcp_connects(unsigned port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* redis-server on fx->sock (port 0: no TCP), or on loopback port when
 * port is not 0; returns once it takes connections. */
static pid_t redis_start(struct fx *fx, unsigned port)
{
	char portarg[16], log[160];
	uint64_t end = loop_now_ms() + WAIT_MS;
	pid_t pid;

	snprintf(portarg, sizeof(portarg), "%u", port);
	snprintf(log, sizeof(log), "%s/redis-%u.log", fx->dir, port);
	if (!port)
		unlink(fx->sock);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (port)
			execl(fx->redis_bin, "redis-server", "--port", portarg, "--bind",
			      "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", fx->dir,
			      "--loglevel", "warning", (char *)NULL);
		else
			execl(fx->redis_bin, "redis-server", "--port", "0", "--unixsocket",
			      fx->sock, "--unixsocketperm", "700", "--save", "", "--appendonly",
			      "no", "--dir", fx->dir, "--loglevel", "warning", (char *)NULL);
		_exit(127);
	}
	while (!(port ? tcp_connects(port) : unix_connects(fx->sock))) {
		assert_true(loop_now_ms() < end);
		assert_int_equal(waitpid(pid, NULL, WNOHANG), 0); /* still running */
		loop_run_once(fx->loop, 10);			  /* a short wait, no fixed sleep */
	}
	return pid;
}

static void redis_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A loopback port nobody listens on now (for the TCP server). */
static unsigned free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t n = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &n), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static int setup(void **state)
{
	struct fx *fx = calloc(1, sizeof(*fx));

	fx->loop = loop_new(NULL);
	assert_non_null(fx->loop);
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/appl-ledger-XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	snprintf(fx->sock, sizeof(fx->sock), "%s/redis.sock", fx->dir);
	snprintf(fx->url, sizeof(fx->url), "unix:%s", fx->sock);
	fx->redis_bin = redis_find();
	if (fx->redis_bin)
		fx->redis = redis_start(fx, 0);
	*state = fx;
	return 0;
}

/* The temporary directory holds files only (sockets, logs). */
static void rm_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[600];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			unlink(path);
		}
	closedir(d);
	rmdir(dir);
}

static int teardown(void **state)
{
	struct fx *fx = *state;

	ledger_free(fx->l);
	loop_free(fx->loop);
	redis_kill(fx->redis);
	rm_dir(fx->dir);
	free(fx);
	return 0;
}

/* ---- waiting on the loop ---------------------------------------------------- */

static void run_until_count(struct fx *fx, const int *n, int want)
{
	uint64_t end = loop_now_ms() + WAIT_MS;

	while (*n < want) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
	}
}

static void wait_ready(struct fx *fx, struct ledger *l, bool want)
{
	uint64_t end = loop_now_ms() + WAIT_MS;

	while (ledger_ready(l) != want) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
	}
}

static struct ledger *open_ready(struct fx *fx, const char *url)
{
	struct ledger *l = NULL;
	struct appl_err err = {0};

	assert_int_equal(ledger_new(fx->loop, url, &l, &err), 0);
	assert_non_null(l);
	wait_ready(fx, l, true);
	return l;
}

/* Claim key, run until answered; the callback never runs inside the call. */
static enum ledger_claim claim(struct fx *fx, struct ledger *l, const unsigned char *key,
			       size_t klen, unsigned ttl, struct seen *s)
{
	seen_clear(s);
	assert_int_equal(ledger_claim(l, key, klen, ttl, on_claim, s, NULL, NULL), 0);
	assert_int_equal(s->n, 0);
	run_until_count(fx, &s->n, 1);
	return s->outcome;
}

static bool put(struct fx *fx, struct ledger *l, const unsigned char *key, size_t klen,
		const void *v, size_t vlen, struct seen *s)
{
	seen_clear(s);
	assert_int_equal(ledger_put(l, key, klen, v, vlen, on_put, s, NULL, NULL), 0);
	assert_int_equal(s->n, 0);
	run_until_count(fx, &s->n, 1);
	return s->ok;
}

/* ---- real Redis --------------------------------------------------------------- */

/* claim -> CLAIMED; again -> TAKEN, no value; put; again -> TAKEN, the value. */
static void test_claim_then_taken_then_the_value(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	assert_int_equal(claim(fx, fx->l, KEY("call-1"), TTL_LONG, &s), LEDGER_CLAIMED);
	assert_int_equal(claim(fx, fx->l, KEY("call-1"), TTL_LONG, &s), LEDGER_TAKEN);
	assert_null(s.value);
	assert_int_equal(s.len, 0);
	assert_true(put(fx, fx->l, KEY("call-1"), "{\"result\":42}", 13, &s));
	assert_int_equal(claim(fx, fx->l, KEY("call-1"), TTL_LONG, &s), LEDGER_TAKEN);
	assert_non_null(s.value);
	assert_int_equal(s.len, 13);
	assert_memory_equal(s.value, "{\"result\":42}", 13);
	/* an empty value is a value, not "none yet" */
	assert_int_equal(claim(fx, fx->l, KEY("call-2"), TTL_LONG, &s), LEDGER_CLAIMED);
	assert_true(put(fx, fx->l, KEY("call-2"), "", 0, &s));
	assert_int_equal(claim(fx, fx->l, KEY("call-2"), TTL_LONG, &s), LEDGER_TAKEN);
	assert_non_null(s.value);
	assert_int_equal(s.len, 0);
	/* a put onto a key nobody claimed stores nothing */
	assert_false(put(fx, fx->l, KEY("never-claimed"), "x", 1, &s));
	assert_non_null(strstr(s.why, "gone"));
	assert_int_equal(claim(fx, fx->l, KEY("never-claimed"), TTL_LONG, &s), LEDGER_CLAIMED);
	assert_true(ledger_ready(fx->l));
	seen_clear(&s);
}

/* Two replicas claim the same keys at the same moment: one wins each. */
static void test_two_replicas_one_claim_each(void **state)
{
	enum { N = 32 };
	struct fx *fx = *state;
	struct ledger *other, *first, *second, *loser;
	struct seen a[N], b[N], p = {0};
	unsigned char key[8] = "race-";
	int answered = 0;
	uint64_t end;

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	other = open_ready(fx, fx->url);
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	for (int i = 0; i < N; i++) { /* both ask in the same round */
		key[5] = (unsigned char)i;
		/* who asks first alternates: a[i] is first's answer */
		first = i % 2 ? fx->l : other;
		second = i % 2 ? other : fx->l;
		assert_int_equal(ledger_claim(first, key, 6, TTL_LONG, on_claim, &a[i], NULL, NULL),
				 0);
		assert_int_equal(
			ledger_claim(second, key, 6, TTL_LONG, on_claim, &b[i], NULL, NULL), 0);
	}
	end = loop_now_ms() + WAIT_MS;
	while (answered < 2 * N) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
		answered = 0;
		for (int i = 0; i < N; i++)
			answered += a[i].n + b[i].n;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(a[i].n, 1);
		assert_int_equal(b[i].n, 1);
		assert_true((a[i].outcome == LEDGER_CLAIMED) != (b[i].outcome == LEDGER_CLAIMED));
		assert_true(a[i].outcome != LEDGER_ERROR && b[i].outcome != LEDGER_ERROR);
	}
	/* the loser's put does not take the winner's claim quietly */
	key[5] = 0;
	loser = a[0].outcome == LEDGER_CLAIMED ? fx->l : other; /* key 0: other asked first */
	assert_false(put(fx, loser, key, 6, "v", 1, &p));
	assert_non_null(strstr(p.why, "another replica"));
	ledger_free(other);
	for (int i = 0; i < N; i++) {
		seen_clear(&a[i]);
		seen_clear(&b[i]);
	}
	seen_clear(&p);
}

/* A claim lives for its ttl: polled from the loop until it is free again. */
static void test_a_claim_expires_after_its_ttl(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};
	uint64_t start, end;

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	start = loop_now_ms();
	assert_int_equal(claim(fx, fx->l, KEY("short"), 200, &s), LEDGER_CLAIMED);
	assert_int_equal(claim(fx, fx->l, KEY("short"), 200, &s), LEDGER_TAKEN);
	end = loop_now_ms() + WAIT_MS;
	while (claim(fx, fx->l, KEY("short"), 200, &s) == LEDGER_TAKEN) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 20); /* a pause between tries, on the loop */
	}
	assert_int_equal(s.outcome, LEDGER_CLAIMED);
	assert_true(loop_now_ms() - start >= 150); /* not before (about) its ttl */
	/* a put keeps the claim's expiry (KEEPTTL): the value goes with it */
	assert_true(put(fx, fx->l, KEY("short"), "r", 1, &s));
	end = loop_now_ms() + WAIT_MS;
	while (claim(fx, fx->l, KEY("short"), 200, &s) == LEDGER_TAKEN) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 20);
	}
	seen_clear(&s);
}

/* Redis dies with a claim in flight: ERROR; it comes back: ready, claims work. */
static void test_redis_killed_then_back(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	assert_int_equal(ledger_claim(fx->l, KEY("mid-way"), TTL_LONG, on_claim, &s, NULL, NULL),
			 0);
	redis_kill(fx->redis);
	fx->redis = 0;
	run_until_count(fx, &s.n, 1);
	assert_int_equal(s.outcome, LEDGER_ERROR);
	wait_ready(fx, fx->l, false);
	/* while it is down: refused, from the loop */
	assert_int_equal(claim(fx, fx->l, KEY("while-down"), TTL_LONG, &s), LEDGER_ERROR);
	assert_non_null(strstr(s.why, "not connected"));
	fx->redis = redis_start(fx, 0);
	wait_ready(fx, fx->l, true);
	assert_int_equal(claim(fx, fx->l, KEY("mid-way"), TTL_LONG, &s), LEDGER_CLAIMED);
	seen_clear(&s);
}

/* A server that stops answering: "timed out" after LEDGER_TIMEOUT_MS, not
 * ready; answering again: ready, claims work, the late reply dropped. */
static void test_a_stopped_server_times_out(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0}, late = {0};
	uint64_t t0;

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	assert_int_equal(kill(fx->redis, SIGSTOP), 0);
	t0 = loop_now_ms();
	assert_int_equal(claim(fx, fx->l, KEY("stalled"), TTL_LONG, &s), LEDGER_ERROR);
	assert_string_equal(s.why, "timed out");
	assert_true(loop_now_ms() - t0 >= LEDGER_TIMEOUT_MS - 50);
	assert_false(ledger_ready(fx->l));
	/* one more in the queue behind it, to be answered late or dropped */
	assert_int_equal(ledger_claim(fx->l, KEY("late"), TTL_LONG, on_claim, &late, NULL, NULL),
			 0);
	assert_int_equal(kill(fx->redis, SIGCONT), 0);
	wait_ready(fx, fx->l, true);
	run_until_count(fx, &late.n, 1);
	assert_int_equal(late.n, 1); /* one answer, whatever it was */
	assert_int_equal(claim(fx, fx->l, KEY("after"), TTL_LONG, &s), LEDGER_CLAIMED);
	seen_clear(&s);
	seen_clear(&late);
}

/* Caps: refused at once (no callback, ever); a value at the cap goes round. */
static void test_caps(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};
	struct appl_err err = {0};
	unsigned char longkey[LEDGER_KEY_MAX + 1];
	char *big = malloc(LEDGER_VALUE_MAX + 1);

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	memset(longkey, 'k', sizeof(longkey));
	assert_int_equal(
		ledger_put(fx->l, KEY("cap"), big, LEDGER_VALUE_MAX + 1, on_put, &s, NULL, &err),
		-EMSGSIZE);
	assert_int_equal(
		ledger_claim(fx->l, longkey, sizeof(longkey), TTL_LONG, on_claim, &s, NULL, &err),
		-EINVAL);
	assert_int_equal(ledger_claim(fx->l, longkey, 0, TTL_LONG, on_claim, &s, NULL, &err),
			 -EINVAL);
	assert_int_equal(ledger_claim(fx->l, KEY("cap"), 0, on_claim, &s, NULL, &err), -EINVAL);
	assert_int_equal(
		ledger_claim(fx->l, KEY("cap"), LEDGER_TTL_MS_MAX + 1, on_claim, &s, NULL, &err),
		-EINVAL);
	/* the longest key and the largest value work */
	assert_int_equal(claim(fx, fx->l, longkey, LEDGER_KEY_MAX, TTL_LONG, &s), LEDGER_CLAIMED);
	for (size_t i = 0; i < LEDGER_VALUE_MAX; i++)
		big[i] = (char)(i * 7);
	assert_true(put(fx, fx->l, longkey, LEDGER_KEY_MAX, big, LEDGER_VALUE_MAX, &s));
	assert_int_equal(claim(fx, fx->l, longkey, LEDGER_KEY_MAX, TTL_LONG, &s), LEDGER_TAKEN);
	assert_int_equal(s.len, LEDGER_VALUE_MAX);
	assert_memory_equal(s.value, big, LEDGER_VALUE_MAX);
	assert_int_equal(s.n, 1); /* the refusals above never called back */
	free(big);
	seen_clear(&s);
}

/* A cancelled request's callback is never called; ledger_free from inside
 * a callback stops the rest. */
static void test_cancel_and_free_from_a_callback(void **state)
{
	struct fx *fx = *state;
	struct seen gone = {0}, gone_put = {0}, after = {0}, x = {0}, y = {0};
	struct ledger_req *r, *rp;
	struct ledger *l2;

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	assert_int_equal(ledger_claim(fx->l, KEY("cancelled"), TTL_LONG, on_claim, &gone, &r, NULL),
			 0);
	assert_int_equal(ledger_put(fx->l, KEY("cancelled"), "v", 1, on_put, &gone_put, &rp, NULL),
			 0);
	ledger_req_cancel(fx->l, r);
	ledger_req_cancel(fx->l, rp);
	/* Redis answers in order: once this one is answered, those were too */
	assert_int_equal(claim(fx, fx->l, KEY("after"), TTL_LONG, &after), LEDGER_CLAIMED);
	assert_int_equal(gone.n, 0);
	assert_int_equal(gone_put.n, 0);
	/* the cancelled claim did reach the server */
	assert_int_equal(claim(fx, fx->l, KEY("cancelled"), TTL_LONG, &after), LEDGER_TAKEN);

	l2 = open_ready(fx, fx->url);
	x.free_me = l2;
	assert_int_equal(ledger_claim(l2, KEY("x"), TTL_LONG, on_claim, &x, NULL, NULL), 0);
	assert_int_equal(ledger_claim(l2, KEY("y"), TTL_LONG, on_claim, &y, NULL, NULL), 0);
	run_until_count(fx, &x.n, 1);
	assert_int_equal(claim(fx, fx->l, KEY("z"), TTL_LONG, &after), LEDGER_CLAIMED);
	assert_int_equal(y.n, 0);
	seen_clear(&after);
	seen_clear(&x);
	seen_clear(&y);
}

/* Past LEDGER_INFLIGHT_MAX: ERROR "too many in flight", from the loop. */
static void test_too_many_in_flight(void **state)
{
	enum { N = LEDGER_INFLIGHT_MAX + 1 };
	struct fx *fx = *state;
	struct seen *s = calloc(N, sizeof(*s));
	unsigned char key[8] = "many-";
	int answered = 0, errors = 0;
	uint64_t end;

	need_redis(fx);
	fx->l = open_ready(fx, fx->url);
	for (int i = 0; i < N; i++) {
		key[5] = (unsigned char)(i >> 8);
		key[6] = (unsigned char)i;
		assert_int_equal(ledger_claim(fx->l, key, 7, TTL_LONG, on_claim, &s[i], NULL, NULL),
				 0);
		assert_int_equal(s[i].n, 0);
	}
	end = loop_now_ms() + WAIT_MS;
	while (answered < N) {
		assert_true(loop_now_ms() < end);
		loop_run_once(fx->loop, 50);
		answered = 0;
		for (int i = 0; i < N; i++)
			answered += s[i].n;
	}
	for (int i = 0; i < N; i++) {
		if (s[i].outcome == LEDGER_ERROR) {
			errors++;
			assert_non_null(strstr(s[i].why, "too many in flight"));
		}
		seen_clear(&s[i]);
	}
	assert_int_equal(errors, 1);
	free(s);
}

/* A name is looked up off the loop; a database is selected; one that does
 * not exist is refused (never ready). */
static void test_tcp_a_name_and_a_database(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};
	struct ledger *named, *db3, *nodb;
	char url[96];
	unsigned port;
	uint64_t end;
	pid_t tcp;

	need_redis(fx);
	port = free_port();
	tcp = redis_start(fx, port);
	snprintf(url, sizeof(url), "redis://localhost:%u", port);
	named = open_ready(fx, url);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%u/3", port);
	db3 = open_ready(fx, url);
	assert_int_equal(claim(fx, named, KEY("db"), TTL_LONG, &s), LEDGER_CLAIMED);
	/* another database: another key space */
	assert_int_equal(claim(fx, db3, KEY("db"), TTL_LONG, &s), LEDGER_CLAIMED);
	assert_int_equal(claim(fx, db3, KEY("db"), TTL_LONG, &s), LEDGER_TAKEN);
	snprintf(url, sizeof(url), "redis://127.0.0.1:%u/999", port);
	assert_int_equal(ledger_new(fx->loop, url, &nodb, NULL), 0);
	/* nothing goes before SELECT is answered: the claim is not made in
	 * database 0 (where it would be TAKEN) */
	end = loop_now_ms() + WAIT_MS;
	do {
		assert_true(loop_now_ms() < end);
		assert_int_equal(claim(fx, nodb, KEY("db"), TTL_LONG, &s), LEDGER_ERROR);
		assert_non_null(strstr(s.why, "not connected"));
		assert_false(ledger_ready(nodb));
		loop_run_once(fx->loop, 20);
	} while (!strstr(s.why, "SELECT"));
	ledger_free(nodb);
	ledger_free(named);
	ledger_free(db3);
	redis_kill(tcp);
	seen_clear(&s);
}

/* ---- without Redis ------------------------------------------------------------- */

static void test_bad_urls_are_refused(void **state)
{
	static const char *const bad[] = {
		"http://127.0.0.1:6379",
		"redis://127.0.0.1",
		"redis://user:pw@127.0.0.1:6379",
		"rediss://127.0.0.1:6379",
		"unix:relative/path",
		"redis://127.0.0.1:0",
		"redis://127.0.0.1:65536",
		"redis://127.0.0.1:6379/x",
		"redis://[::1:6379",
		"redis://127.0.0.1:06379",
		"redis://127.0.0.1:6379/70000",
		"redis://:6379",
		"redis://[nothex]:6379",
		"",
		NULL,
	};
	struct fx *fx = *state;
	struct ledger *l;
	struct appl_err err = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		l = NULL;
		assert_int_equal(ledger_new(fx->loop, bad[i], &l, &err), -EINVAL);
		assert_null(l);
		/* the URL is never quoted: it might hold a secret */
		if (bad[i] && bad[i][0])
			assert_null(strstr(err.msg, bad[i]));
	}
	/* an IPv6 literal parses */
	assert_int_equal(ledger_new(fx->loop, "redis://[::1]:1", &l, &err), 0);
	ledger_free(l);
}

/* No server: not ready, and a claim is refused from the loop, never inside. */
static void test_no_server(void **state)
{
	struct fx *fx = *state;
	struct seen s = {0};
	char url[160];

	snprintf(url, sizeof(url), "unix:%s/nobody.sock", fx->dir);
	assert_int_equal(ledger_new(fx->loop, url, &fx->l, NULL), 0);
	assert_false(ledger_ready(fx->l));
	assert_int_equal(claim(fx, fx->l, KEY("k"), TTL_LONG, &s), LEDGER_ERROR);
	assert_non_null(strstr(s.why, "not connected"));
	seen_clear(&s);
}

/* ---- a hostile server ------------------------------------------------------------ */

/* A fake server on the loop: on each connection it answers the first SET
 * (the ledger's probe) with probe and the second (the claim) with claim,
 * bytes no Redis would send. */
struct fake {
	struct loop *loop;
	int lfd;
	const char *probe, *claim;
	size_t claim_len;
	int conns;
	int fds[16];
	int sets[16];
};

static void fake_read(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct fake *f = data;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));
	int i = 0;
	(void)events;

	while (f->fds[i] != fd)
		i++;
	if (n <= 0) {
		loop_del(loop, fd);
		close(fd);
		f->fds[i] = -1;
		return;
	}
	for (char *p = buf; (p = memmem(p, (size_t)(buf + n - p), "$3\r\nSET\r\n", 9)); p += 9) {
		f->sets[i]++;
		if (f->sets[i] == 1)
			assert_true(write(fd, f->probe, strlen(f->probe)) >= 0);
		else if (f->sets[i] == 2)
			assert_true(write(fd, f->claim, f->claim_len) >= 0);
	}
}

static void fake_accept(struct loop *loop, int lfd, uint32_t events, void *data)
{
	struct fake *f = data;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	(void)events;

	if (fd < 0)
		return;
	assert_true(f->conns < 16);
	f->fds[f->conns] = fd;
	f->sets[f->conns++] = 0;
	assert_int_equal(loop_add(loop, fd, EPOLLIN, fake_read, f, NULL), 0);
}

static void fake_listen(struct fx *fx, struct fake *f)
{
	assert_true(f->lfd >= 0);
	assert_int_equal(listen(f->lfd, 16), 0);
	assert_int_equal(loop_add(fx->loop, f->lfd, EPOLLIN, fake_accept, f, NULL), 0);
}

static void fake_start(struct fx *fx, struct fake *f, char *url, size_t n)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(f, 0, sizeof(*f));
	memset(f->fds, -1, sizeof(f->fds));
	f->loop = fx->loop;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/fake.sock", fx->dir);
	unlink(sa.sun_path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	fake_listen(fx, f);
	snprintf(url, n, "unix:%s", sa.sun_path);
}

/* The same on loopback TCP, for a URL with a database: url names db. */
static void fake_start_tcp(struct fx *fx, struct fake *f, unsigned db, char *url, size_t n)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	memset(f, 0, sizeof(*f));
	memset(f->fds, -1, sizeof(f->fds));
	f->loop = fx->loop;
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&sa, &len), 0);
	fake_listen(fx, f);
	snprintf(url, n, "redis://127.0.0.1:%u/%u", ntohs(sa.sin_port), db);
}

static void fake_stop(struct fake *f)
{
	for (int i = 0; i < f->conns; i++)
		if (f->fds[i] >= 0) {
			loop_del(f->loop, f->fds[i]);
			close(f->fds[i]);
		}
	loop_del(f->loop, f->lfd);
	close(f->lfd);
}

/* Each answer to the claim, and what the caller is told. */
static void test_a_hostile_server(void **state)
{
	static const struct {
		const char *claim;
		size_t len;
		const char *want;
	} cases[] = {
		/* hiredis 0.14 would calloc 16 GiB for this array */
		{"*2147483647\r\n", 13, "never asks for"},
		/* and wait for (buffer) 100 GB of this bulk */
		{"$99999999999\r\n", 14, "over the ledger's cap"},
		{"$4\r\nVabcdef\r\n", 13, "longer than it said"},
		{"$-2\r\n", 5, "not one"},
		{":12\r\n", 5, "wrong type"},
		{"+OK\r\n", 5, "wrong type"},
		{"$3\r\nXYZ\r\n", 9, "did not write"},
		{"$5\r\nCabcd\r\n", 11, "did not write"}, /* a claim mark of the wrong size */
		{"-ERR boom\x01\x7f\r\n", 13, "the server refused: ERR boom??"},
		{"-ERR\r\n+OK\r\n", 11, "answer to no command"},
	};
	struct fx *fx = *state;
	struct fake f;
	char url[160];
	struct seen s = {0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fake_start(fx, &f, url, sizeof(url));
		f.probe = "+OK\r\n";
		f.claim = cases[i].claim;
		f.claim_len = cases[i].len;
		fx->l = open_ready(fx, url);
		assert_int_equal(claim(fx, fx->l, KEY("k"), TTL_LONG, &s), LEDGER_ERROR);
		if (!strstr(s.why, cases[i].want))
			fail_msg("case %zu: \"%s\", not \"%s\"", i, s.why, cases[i].want);
		ledger_free(fx->l);
		fx->l = NULL;
		fake_stop(&f);
	}
	seen_clear(&s);
}

/* A server that answers more than it was asked: the connection is dropped
 * (hiredis would abort the process), and it is never ready. */
static void test_unasked_answers_drop_the_connection(void **state)
{
	struct fx *fx = *state;
	struct fake f;
	char url[160];
	uint64_t end;

	fake_start(fx, &f, url, sizeof(url));
	f.probe = "+OK\r\n+OK\r\n";
	f.claim = "";
	assert_int_equal(ledger_new(fx->loop, url, &fx->l, NULL), 0);
	end = loop_now_ms() + WAIT_MS;
	while (f.conns < 3) { /* dropped, and tried again (after its waits) */
		assert_true(loop_now_ms() < end);
		assert_false(ledger_ready(fx->l));
		loop_run_once(fx->loop, 50);
	}
	ledger_free(fx->l);
	fx->l = NULL;
	fake_stop(&f);
}

/* A probe refused (a read-only replica): connected, not ready. */
static void test_a_refused_probe_is_not_ready(void **state)
{
	struct fx *fx = *state;
	struct fake f;
	char url[160];
	uint64_t end;

	fake_start(fx, &f, url, sizeof(url));
	f.probe = "-READONLY You can't write against a read only replica.\r\n";
	f.claim = "-READONLY You can't write against a read only replica.\r\n";
	f.claim_len = strlen(f.claim);
	assert_int_equal(ledger_new(fx->loop, url, &fx->l, NULL), 0);
	end = loop_now_ms() + WAIT_MS;
	while (f.sets[0] < 2) { /* the handshake's probe, then the next one */
		assert_true(loop_now_ms() < end);
		assert_false(ledger_ready(fx->l));
		loop_run_once(fx->loop, 50);
	}
	assert_int_equal(f.conns, 1);
	ledger_free(fx->l);
	fx->l = NULL;
	fake_stop(&f);
}

/* A SELECT never answered: the connection is dropped after
 * LEDGER_TIMEOUT_MS and made again; nothing else was ever sent on it. */
static void test_an_unanswered_select_is_dropped(void **state)
{
	struct fx *fx = *state;
	struct fake f;
	struct seen s = {0};
	char url[160];
	uint64_t t0 = loop_now_ms(), end = t0 + WAIT_MS;

	fake_start_tcp(fx, &f, 5, url, sizeof(url));
	f.probe = f.claim = "";
	assert_int_equal(ledger_new(fx->loop, url, &fx->l, NULL), 0);
	while (f.conns < 2) {
		assert_true(loop_now_ms() < end);
		assert_false(ledger_ready(fx->l));
		loop_run_once(fx->loop, 50);
	}
	assert_true(loop_now_ms() - t0 >= LEDGER_TIMEOUT_MS - 50);
	assert_int_equal(f.sets[0], 0); /* no probe, no claim behind the SELECT */
	assert_int_equal(claim(fx, fx->l, KEY("k"), TTL_LONG, &s), LEDGER_ERROR);
	assert_non_null(strstr(s.why, "not connected"));
	ledger_free(fx->l);
	fx->l = NULL;
	fake_stop(&f);
	seen_clear(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_claim_then_taken_then_the_value, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_two_replicas_one_claim_each, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_claim_expires_after_its_ttl, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_redis_killed_then_back, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_stopped_server_times_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_caps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_and_free_from_a_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_too_many_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tcp_a_name_and_a_database, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_urls_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_server, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_hostile_server, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unasked_answers_drop_the_connection, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_refused_probe_is_not_ready, setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_unanswered_select_is_dropped, setup,
						teardown),
	};

	signal(SIGPIPE, SIG_IGN); /* a write to a server that died is an error, not a death */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
