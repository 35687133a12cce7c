/* toy_server.c: a small MCP server over stdio, the appliance's test upstream.
 *
 * Newline-delimited JSON-RPC on stdin and stdout (pkg/jsonrpc), one thread,
 * one event loop (pkg/loop): a `sleep` call is a timerfd, so calls overlap
 * and are answered in the order their timers fire, and the server can tell
 * how many were in flight at once. Logs go to stderr only: stdout is the
 * protocol. See tests/toy/README.md for the tools and options.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json/json.h"
#include "jsonrpc/jsonrpc.h"
#include "loop/loop.h"

#define TOY_IN_LINE_MAX	 APPL_UPSTREAM_MESSAGE_MAX /* what the appliance may send */
#define TOY_OUT_LINE_MAX (32u * 1024 * 1024)	   /* room for `bytes` up to its cap */
/* A client that stops reading: room for 16 answers of the largest `bytes`
 * (the appliance's default slots per server) and 16 MiB more. */
#define TOY_OUT_QUEUE_MAX (17u * 16 * 1024 * 1024)
#define TOY_READ_BLOCK	  (64u * 1024)
#define TOY_PAGE_SIZE	  4
#define TOY_SLEEP_MS_MAX  60000
#define TOY_BYTES_MAX	  (16 * 1024 * 1024)
#define TOY_DEPTH_MAX	  1000
#define TOY_PROBE_ITEMS	  64   /* entries of each probe argument */
#define TOY_PROBE_ARG_MAX 4096 /* bytes of one entry */
#define TOY_PROBE_LINES	  256  /* lines kept of a /proc file */
#define TOY_CONNECT_MS	  2000 /* one TCP connect attempt */
#define TOY_DETACH_S	  600  /* how long a detached child lives */

static const char *const toy_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
					   NULL};

/* A sleep call waiting for its timer. */
struct call {
	struct call *next;
	json_t *id;
	int tfd;
	json_int_t ms;
};

/* A buffer several queued lines may point into (the cached result of
 * `bytes`), freed with its last reference. */
struct shared {
	unsigned refs;
	size_t len;
	char data[];
};

/* One queued output line: its own head (owned), then optionally a shared
 * body and a static tail, written straight from where they are. */
struct out_line {
	struct out_line *next;
	char *head;
	size_t head_len;
	struct shared *body;
	const char *tail;
	size_t tail_len;
	size_t off, len; /* written so far, in all */
	int answers_call;
};

struct toy {
	struct loop *loop;
	char *in; /* a partial line, TOY_IN_LINE_MAX at most */
	size_t in_len;
	int in_discard; /* skipping the rest of an over-long line */
	/* queued output, oldest first: each line written from its own buffer
	 * (writev), so queueing one never moves the others */
	struct out_line *out_head, **out_tail;
	size_t out_bytes; /* still to write, all lines */
	int initialized;  /* initialize answered */
	int stop;	  /* 0 running, 1 clean exit, 2 exit with status 3 */
	unsigned long calls;
	long die_after;		 /* -1: never */
	long list_changed_after; /* -1: never */
	int list_changed;	 /* the notification was sent: `late` is listed */
	int fail_init;
	struct call *sleeping;
	unsigned inflight, peak;
	/* calls read whose answer is not yet wholly written (or dropped by a
	 * cancel): what the server holds for its client; held_peak since the
	 * last `peak` call */
	unsigned held, held_peak;
	int line_answers_call; /* the line being queued answers a call */
	/* `bytes` answers are built once per size and written from here, so
	 * the server writes as fast as a pipe takes it and a bench measures its
	 * client, not the server */
	json_int_t bytes_n;
	struct shared *bytes; /* the encoded result object for bytes_n */
	json_t *tools;	      /* every tool, `late` last */
	char *note;
};

static void toy_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void toy_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("toy: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- the tools ---------------------------------------------------------------- */

#define OBJ_NO_EXTRA "\"type\":\"object\",\"additionalProperties\":false"
#define RO	     "\"annotations\":{\"readOnlyHint\":true}"
#define STR_LIST     "{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":64}"

/* Each tool as the JSON tools/list gives; parsed once at start. */
static const char *const tool_json[] = {
	"{\"name\":\"add\",\"description\":\"Add two integers.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"integer\"}},"
	"\"required\":[\"a\",\"b\"]},\"outputSchema\":{\"type\":\"object\",\"properties\":{"
	"\"sum\":{\"type\":\"integer\"}},\"required\":[\"sum\"]}," RO "}",
	"{\"name\":\"echo\",\"description\":\"Return the text.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]}," RO "}",
	"{\"name\":\"sleep\",\"description\":\"Answer after ms "
	"milliseconds.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"ms\":{\"type\":\"integer\",\"minimum\":0,"
	"\"maximum\":60000}},\"required\":[\"ms\"]}," RO "}",
	"{\"name\":\"peak\",\"description\":\"Most sleep calls in flight at once since the last "
	"peak call.\",\"inputSchema\":{" OBJ_NO_EXTRA ",\"properties\":{}}," RO "}",
	"{\"name\":\"bytes\",\"description\":\"A text of n bytes.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":16777216}},"
	"\"required\":[\"n\"]}," RO "}",
	"{\"name\":\"fail\",\"description\":\"Always a tool error.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{}}," RO "}",
	"{\"name\":\"write_note\",\"description\":\"Keep a note (a "
	"write).\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"]},"
	"\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false}}",
	"{\"name\":\"unsupported\",\"description\":\"Its schema uses unevaluatedProperties.\","
	"\"inputSchema\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},"
	"\"unevaluatedProperties\":false}," RO "}",
	"{\"name\":\"deep\",\"description\":\"A result nested depth "
	"levels.\",\"inputSchema\":{" OBJ_NO_EXTRA
	",\"properties\":{\"depth\":{\"type\":\"integer\",\"minimum\":1,"
	"\"maximum\":1000}},\"required\":[\"depth\"]}," RO "}",
	"{\"name\":\"probe\",\"description\":\"Report the server's identity, confinement and "
	"reach.\",\"inputSchema\":{" OBJ_NO_EXTRA ",\"properties\":{\"paths\":" STR_LIST
	",\"connect\":" STR_LIST ",\"unix\":" STR_LIST ",\"pids\":" STR_LIST "}}," RO "}",
	"{\"name\":\"detach\",\"description\":\"Leave a child behind in a session of its "
	"own.\",\"inputSchema\":{" OBJ_NO_EXTRA ",\"properties\":{}}," RO "}",
	"{\"name\":\"late\",\"description\":\"Listed once tools/list_changed was sent.\","
	"\"inputSchema\":{" OBJ_NO_EXTRA ",\"properties\":{}}," RO "}",
	NULL,
};

static json_t *text_content(const char *text, size_t len)
{
	return json_pack("[{s:s, s:s%}]", "type", "text", "text", text, len);
}

/* A result with structuredContent (stolen) and, as MCP asks of tools that
 * return structured content, the same JSON as a text block. */
static json_t *structured(json_t *sc)
{
	char *text = json_dumps(sc, JSON_COMPACT);
	json_t *r = NULL;

	if (text)
		r = json_pack("{s:o, s:o}", "content", text_content(text, strlen(text)),
			      "structuredContent", sc);
	else
		json_decref(sc);
	free(text);
	return r;
}

static json_t *text_result(const char *text)
{
	return json_pack("{s:o}", "content", text_content(text, strlen(text)));
}

/* A tool execution error: MCP reports these in the result, with isError,
 * so the model can read them. */
static json_t *tool_error(const char *text)
{
	return json_pack("{s:o, s:b}", "content", text_content(text, strlen(text)), "isError", 1);
}

static int arg_int(const json_t *args, const char *key, json_int_t lo, json_int_t hi,
		   json_int_t *out)
{
	json_t *v = json_object_get(args, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return -1;
	*out = json_integer_value(v);
	return 0;
}

static const char *arg_str(const json_t *args, const char *key)
{
	return json_string_value(json_object_get(args, key));
}

static void out_parts(struct toy *t, char *head, size_t head_len, struct shared *body,
		      const char *tail);

struct tool {
	const char *name;
	const char *const *keys; /* the arguments it takes */
	/* Returns the result (new), or NULL when the answer comes later (sleep,
	 * *deferred 1), was queued by the tool itself (bytes, *deferred 2), or
	 * memory ran out (*deferred 0). */
	json_t *(*run)(struct toy *t, const json_t *id, const json_t *args, int *deferred);
};

static json_t *run_add(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	json_int_t a, b, sum;

	(void)t, (void)id, (void)deferred;
	if (arg_int(args, "a", INT64_MIN, INT64_MAX, &a) < 0 ||
	    arg_int(args, "b", INT64_MIN, INT64_MAX, &b) < 0)
		return tool_error("add: a and b must be integers");
	if (__builtin_add_overflow(a, b, &sum))
		return tool_error("add: the sum overflows");
	return structured(json_pack("{s:I}", "sum", sum));
}

static json_t *run_echo(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	json_t *text = json_object_get(args, "text");

	(void)t, (void)id, (void)deferred;
	if (!json_is_string(text))
		return tool_error("echo: text must be a string");
	return json_pack("{s:o}", "content",
			 text_content(json_string_value(text), json_string_length(text)));
}

static void sleep_fired(struct loop *loop, int fd, uint32_t events, void *data);

/* A one-shot timerfd ms from now, watched with the call's own fd as key. */
static int sleep_timer(uint64_t ms)
{
	struct itimerspec its = {.it_value = {.tv_sec = (time_t)(ms / 1000),
					      .tv_nsec = (long)(ms % 1000) * 1000000L}};
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);

	if (fd >= 0 && timerfd_settime(fd, 0, &its, NULL) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static json_t *run_sleep(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	struct call *c;
	json_int_t ms;

	if (arg_int(args, "ms", 0, TOY_SLEEP_MS_MAX, &ms) < 0)
		return tool_error("sleep: ms must be an integer from 0 to 60000");
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = jsonrpc_id_copy(id);
	c->ms = ms;
	/* 0 would disarm the timer: a zero sleep fires after 1 ms instead. */
	c->tfd = sleep_timer(ms ? (uint64_t)ms : 1);
	if (!c->id || c->tfd < 0 || loop_add(t->loop, c->tfd, EPOLLIN, sleep_fired, t, NULL) < 0) {
		if (c->tfd >= 0)
			close(c->tfd);
		json_decref(c->id);
		free(c);
		return NULL;
	}
	c->next = t->sleeping;
	t->sleeping = c;
	if (++t->inflight > t->peak)
		t->peak = t->inflight;
	*deferred = 1;
	return NULL;
}

static void held_add(struct toy *t)
{
	if (++t->held > t->held_peak)
		t->held_peak = t->held;
}

static json_t *run_peak(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	unsigned peak = t->peak, held = t->held_peak;

	(void)id, (void)args, (void)deferred;
	t->peak = t->inflight;
	t->held_peak = t->held;
	return structured(json_pack("{s:i, s:i}", "peak", (int)peak, "held", (int)held));
}

static void shared_put(struct shared *b)
{
	if (b && --b->refs == 0)
		free(b);
}

/* The result object of `bytes` for n, encoded (cached for the last n);
 * borrowed. Written out directly: the pattern needs no escaping. */
static struct shared *bytes_result(struct toy *t, json_int_t n)
{
	static const char pattern[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":\"", tail[] = "\"}]}";
	struct shared *b;
	char *p;

	if (t->bytes && t->bytes_n == n)
		return t->bytes;
	shared_put(t->bytes);
	t->bytes = NULL;
	b = malloc(sizeof(*b) + sizeof(head) - 1 + (size_t)n + sizeof(tail) - 1);
	if (!b)
		return NULL;
	b->refs = 1;
	b->len = sizeof(head) - 1 + (size_t)n + sizeof(tail) - 1;
	memcpy(b->data, head, sizeof(head) - 1);
	p = b->data + sizeof(head) - 1;
	for (json_int_t i = 0; i < n; i++)
		p[i] = pattern[i % (json_int_t)(sizeof(pattern) - 1)];
	memcpy(p + n, tail, sizeof(tail) - 1);
	t->bytes = b;
	t->bytes_n = n;
	return b;
}

/* Answered here: the envelope, then the cached result as it is. */
static json_t *run_bytes(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":", mid[] = ",\"result\":";
	struct shared *body;
	char *idtext, *line;
	size_t ilen;
	json_int_t n;

	if (arg_int(args, "n", 0, TOY_BYTES_MAX, &n) < 0)
		return tool_error("bytes: n must be an integer from 0 to 16777216");
	if (!(body = bytes_result(t, n)) || !(idtext = json_dumps(id, JSON_ENCODE_ANY)))
		return NULL;
	ilen = strlen(idtext);
	line = malloc(sizeof(head) + ilen + sizeof(mid));
	if (line) {
		memcpy(line, head, sizeof(head) - 1);
		memcpy(line + sizeof(head) - 1, idtext, ilen);
		memcpy(line + sizeof(head) - 1 + ilen, mid, sizeof(mid));
		body->refs++;
		out_parts(t, line, strlen(line), body, "}\n");
		*deferred = 2;
	}
	free(idtext);
	return NULL;
}

static json_t *run_fail(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	(void)t, (void)id, (void)args, (void)deferred;
	return tool_error("fail: this tool always fails");
}

static json_t *run_write_note(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	const char *text = arg_str(args, "text");
	char msg[64];

	(void)id, (void)deferred;
	if (!text)
		return tool_error("write_note: text must be a string");
	free(t->note);
	t->note = strdup(text);
	if (!t->note)
		return NULL;
	snprintf(msg, sizeof(msg), "noted %zu bytes", strlen(text));
	return text_result(msg);
}

static json_t *run_unsupported(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	(void)t, (void)id, (void)args, (void)deferred;
	return text_result("unsupported: the call reached the server");
}

static json_t *run_deep(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	json_int_t depth;
	json_t *v;

	(void)t, (void)id, (void)deferred;
	if (arg_int(args, "depth", 1, TOY_DEPTH_MAX, &depth) < 0)
		return tool_error("deep: depth must be an integer from 1 to 1000");
	/* depth 1 is {"v":0}; each level more wraps it in {"d":...}. */
	v = json_pack("{s:i}", "v", 0);
	for (json_int_t i = 1; v && i < depth; i++)
		v = json_pack("{s:o}", "d", v);
	return v ? structured(v) : NULL;
}

static json_t *run_late(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	(void)t, (void)id, (void)args, (void)deferred;
	return text_result("late: listed after tools/list_changed");
}

/* ---- probe: what the server may do ------------------------------------------------ */

/* Each attempt below is harmless when it succeeds: what it makes (a mount,
 * a namespace, a tracee, a descriptor) is undone or dies with a child of
 * its own. Each returns 0 or the errno it got. */

static const char *errno_name(int e)
{
	const char *name = e ? strerrorname_np(e) : "ok";

	return name ? name : "EUNKNOWN";
}

static int errno_of(long rc)
{
	return rc < 0 ? errno : 0;
}

static int fd_result(long fd)
{
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

/* A child made by a clone-like call exits at once; the parent reaps it. */
static int child_result(long pid)
{
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, __WALL);
	return 0;
}

static int try_mount(void)
{
	char dir[] = "/tmp/toy-probe-XXXXXX";
	int rc;

	if (!mkdtemp(dir))
		return errno;
	rc = errno_of(mount("toy-probe", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k"));
	if (rc == 0)
		umount2(dir, MNT_DETACH);
	rmdir(dir);
	return rc;
}

/* A new user namespace is the one an unprivileged process may make. */
static int try_unshare(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) < 0 ? errno & 0xff : 0);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
}

/* Attach to a child of our own that waits on a pipe, then let it go. */
static int try_ptrace(void)
{
	int p[2], rc;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return errno;
	pid = fork();
	if (pid == 0) {
		char c;
		close(p[1]);
		_exit(read(p[0], &c, 1) < 0 ? 1 : 0);
	}
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return errno;
	}
	rc = errno_of(ptrace(PTRACE_ATTACH, pid, 0, 0));
	if (rc == 0 && waitpid(pid, NULL, __WALL) == pid)
		ptrace(PTRACE_DETACH, pid, 0, 0);
	close(p[1]);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, __WALL);
	return rc;
}

static int try_bpf(void)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = a.value_size = 4;
	a.max_entries = 1;
	return fd_result(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
}

static int try_keyctl(void)
{
	return errno_of(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}

static int try_io_uring(void)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	return fd_result(syscall(SYS_io_uring_setup, 4, &p));
}

static int try_netlink(void)
{
	return fd_result(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, 0));
}

static int try_packet(void)
{
	return fd_result(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0));
}

static int try_clone3(void)
{
	struct clone_args ca = {.exit_signal = SIGCHLD};

	return child_result(syscall(SYS_clone3, &ca, sizeof(ca)));
}

/* Joining the namespace we are in already changes nothing. */
static int try_setns(void)
{
	int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return errno;
	rc = errno_of(setns(fd, CLONE_NEWUTS));
	close(fd);
	return rc;
}

static int try_clone_newuser(void)
{
	return child_result(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
}

/* Flags no kernel takes: EINVAL once the call is reached, never a load. */
static int try_kexec_load(void)
{
	return errno_of(syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL));
}

/* An empty image: ENOEXEC once the call is reached. */
static int try_init_module(void)
{
	return errno_of(syscall(SYS_init_module, "", 0UL, ""));
}

static const struct {
	const char *name;
	int (*fn)(void);
} probe_attempts[] = {
	{"mount", try_mount},
	{"unshare", try_unshare},
	{"ptrace", try_ptrace},
	{"bpf", try_bpf},
	{"keyctl", try_keyctl},
	{"io_uring_setup", try_io_uring},
	{"socket_netlink", try_netlink},
	{"socket_packet", try_packet},
	{"clone3", try_clone3},
	{"setns", try_setns},
	{"clone_newuser", try_clone_newuser},
	{"kexec_load", try_kexec_load},
	{"init_module", try_init_module},
};

static json_t *probe_denied(void)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < sizeof(probe_attempts) / sizeof(probe_attempts[0]); i++)
		json_object_set_new(o, probe_attempts[i].name,
				    json_string(errno_name(probe_attempts[i].fn())));
	return o;
}

/* The lines of a small /proc file, without their newlines; NULL when it
 * cannot be read. */
static json_t *proc_lines(const char *path)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	json_t *a;

	if (!f)
		return NULL;
	a = json_array();
	while (a && json_array_size(a) < TOY_PROBE_LINES && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		json_array_append_new(a, json_string(line));
	}
	fclose(f);
	return a;
}

/* The limits of the cgroup it lives in, as read from inside: on cgroup v2
 * the appliance mounts the server's own cgroup on /sys/fs/cgroup. Each
 * file's first line, or its errno name. */
static json_t *probe_limits(void)
{
	static const char *const files[] = {"memory.max", "memory.swap.max", "pids.max"};
	json_t *o = json_object();

	for (size_t i = 0; o && i < sizeof(files) / sizeof(files[0]); i++) {
		char path[64];
		json_t *lines;

		snprintf(path, sizeof(path), "/sys/fs/cgroup/%s", files[i]);
		errno = 0;
		lines = proc_lines(path);
		if (lines && json_array_size(lines) > 0)
			json_object_set(o, files[i], json_array_get(lines, 0));
		else
			json_object_set_new(o, files[i],
					    json_string(errno_name(errno ? errno : ENODATA)));
		json_decref(lines);
	}
	return o;
}

/* The value of "key:\t..." in /proc/self/status, or NULL. */
static json_t *status_value(const char *key)
{
	json_t *lines = proc_lines("/proc/self/status"), *v = NULL, *line;
	size_t i, klen = strlen(key);

	json_array_foreach(lines, i, line) {
		const char *s = json_string_value(line);

		if (s && strncmp(s, key, klen) == 0 && s[klen] == ':') {
			v = json_string(s + klen + 1 + strspn(s + klen + 1, " \t"));
			break;
		}
	}
	json_decref(lines);
	return v;
}

static json_t *probe_groups(void)
{
	gid_t g[256];
	int n = getgroups(256, g);
	json_t *a = json_array();

	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(g[i]));
	return a;
}

extern char **environ;

static json_t *probe_env(void)
{
	json_t *o = json_object();

	for (char **e = environ; o && *e; e++) {
		const char *eq = strchr(*e, '=');
		char name[256];

		if (!eq || (size_t)(eq - *e) >= sizeof(name))
			continue;
		memcpy(name, *e, (size_t)(eq - *e));
		name[eq - *e] = '\0';
		json_object_set_new(o, name, json_string(eq + 1));
	}
	return o;
}

/* The interface names of /proc/net/dev (the first two lines are headers). */
static json_t *probe_interfaces(void)
{
	json_t *lines = proc_lines("/proc/net/dev"), *a = json_array(), *line;
	size_t i;

	json_array_foreach(lines, i, line) {
		const char *s = json_string_value(line), *colon = s ? strchr(s, ':') : NULL;
		size_t lead = s ? strspn(s, " ") : 0;

		if (i < 2 || !colon || !a)
			continue;
		json_array_append_new(a, json_stringn(s + lead, (size_t)(colon - s) - lead));
	}
	json_decref(lines);
	return a;
}

/* A directory with no entries but . and .. */
static int dir_empty(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int empty = 1;

	if (!d) {
		close(fd);
		return 0;
	}
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/* Only regular files and directories are opened: opening a device can
 * act (a watchdog starts counting), so the others are judged by access. */
static const char *path_judge(const char *path)
{
	struct stat st;
	int fd;

	if (stat(path, &st) < 0)
		return errno == ENOENT || errno == ENOTDIR ? "absent" : "denied";
	if (S_ISREG(st.st_mode)) {
		fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			return "writable";
		}
		fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return "denied";
		close(fd);
		return st.st_size == 0 ? "empty" : "readable";
	}
	if (faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0)
		return "writable";
	if (!S_ISDIR(st.st_mode))
		return faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) == 0 ? "readable" : "denied";
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return "denied";
	return dir_empty(fd) ? "empty" : "readable";
}

static const char *gai_name(int rc)
{
	static const struct {
		int rc;
		const char *name;
	} names[] = {
		{EAI_NONAME, "EAI_NONAME"},   {EAI_AGAIN, "EAI_AGAIN"},
		{EAI_FAIL, "EAI_FAIL"},	      {EAI_FAMILY, "EAI_FAMILY"},
		{EAI_SERVICE, "EAI_SERVICE"}, {EAI_MEMORY, "EAI_MEMORY"},
	};

	if (rc == EAI_SYSTEM)
		return errno_name(errno);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].rc == rc)
			return names[i].name;
	return "EAI_FAIL";
}

/* A TCP connect to host:port ("[::1]:80" for IPv6), waited on for at most
 * TOY_CONNECT_MS: "ok" or the errno's name (a name lookup's failure is
 * EAI_...). */
static const char *connect_judge(const char *spec)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
	const char *colon = strrchr(spec, ':');
	char host[256];
	size_t hlen;
	int rc, fd, err = 0;
	socklen_t elen = sizeof(err);

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		return "EINVAL";
	hlen = (size_t)(colon - spec);
	if (spec[0] == '[' && spec[hlen - 1] == ']')
		spec++, hlen -= 2;
	memcpy(host, spec, hlen);
	host[hlen] = '\0';
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0)
		return gai_name(rc);
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(ai);
		return errno_name(errno);
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		err = errno;
	freeaddrinfo(ai);
	if (err == EINPROGRESS) {
		struct pollfd pfd = {fd, POLLOUT, 0};

		err = poll(&pfd, 1, TOY_CONNECT_MS) == 1 ? 0 : ETIMEDOUT;
		if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			err = errno;
	}
	close(fd);
	return errno_name(err);
}

/* A unix socket connect; "@name" is an abstract name. A datagram socket
 * refuses a stream connect (EPROTOTYPE), so that is tried next. */
static const char *unix_judge(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	int type = SOCK_STREAM, fd, rc;

	if (len == 0 || len >= sizeof(sa.sun_path))
		return "ENAMETOOLONG";
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	do {
		fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return errno_name(errno);
		rc = errno_of(connect(fd, (struct sockaddr *)&sa, salen));
		close(fd);
		type = rc == EPROTOTYPE && type == SOCK_STREAM ? SOCK_DGRAM : 0;
	} while (type);
	return errno_name(rc);
}

/* args[key]: absent, or an array of at most TOY_PROBE_ITEMS strings. */
static int probe_list_ok(const json_t *args, const char *key)
{
	json_t *a = json_object_get(args, key), *v;
	size_t i;

	if (!a)
		return 1;
	if (!json_is_array(a) || json_array_size(a) > TOY_PROBE_ITEMS)
		return 0;
	json_array_foreach(a, i, v)
		if (!json_is_string(v) || json_string_length(v) > TOY_PROBE_ARG_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return 0;
	return 1;
}

static json_t *probe_each(const json_t *args, const char *key, const char *(*judge)(const char *))
{
	json_t *o = json_object(), *list = json_object_get(args, key), *v;
	size_t i;

	json_array_foreach(list, i, v) {
		const char *s = json_string_value(v);

		json_object_set_new(o, s, json_string(judge(s)));
	}
	return o;
}

static json_t *probe_identity(void)
{
	json_t *seccomp = status_value("Seccomp");
	const char *s = json_string_value(seccomp);
	json_t *o = json_pack("{s:I, s:I, s:o, s:o*, s:o*, s:i, s:i}", "uid", (json_int_t)getuid(),
			      "gid", (json_int_t)getgid(), "groups", probe_groups(), "cap_eff",
			      status_value("CapEff"), "cap_bnd", status_value("CapBnd"),
			      "no_new_privs", prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), "seccomp",
			      s ? (int)strtol(s, NULL, 10) : -1);

	json_decref(seccomp);
	return o;
}

/* What a hostile server would try against another process: read its
 * environment, map and memory, write its memory (through /proc/PID/mem,
 * which needs no ptrace call), and signal it. "ok" or the errno's name. */
static json_t *reach_one(pid_t pid)
{
	char path[64], line[256];
	unsigned long long start = 0;
	unsigned char word[8];
	json_t *o = json_object();
	FILE *f;
	int fd;

	snprintf(path, sizeof(path), "/proc/%ld/environ", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	json_object_set_new(o, "environ",
			    json_string(fd < 0				   ? errno_name(errno)
					: read(fd, line, sizeof(line)) > 0 ? "ok"
									   : errno_name(errno)));
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
	f = fopen(path, "re");
	json_object_set_new(
		o, "maps",
		json_string(!f ? errno_name(errno)
			    : fgets(line, sizeof(line), f) && sscanf(line, "%llx", &start) == 1
				    ? "ok"
				    : errno_name(errno ? errno : EIO)));
	if (f)
		fclose(f);
	snprintf(path, sizeof(path), "/proc/%ld/mem", (long)pid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	json_object_set_new(o, "mem", json_string(fd < 0 ? errno_name(errno) : "ok"));
	if (fd >= 0) {
		ssize_t n = start ? pread(fd, word, sizeof(word), (off_t)start) : -1;

		json_object_set_new(o, "mem_read", json_string(n == 8 ? "ok" : errno_name(errno)));
		n = n == 8 ? pwrite(fd, word, sizeof(word), (off_t)start) : -1;
		json_object_set_new(o, "mem_write", json_string(n == 8 ? "ok" : errno_name(errno)));
		close(fd);
	}
	json_object_set_new(o, "kill", json_string(errno_name(errno_of(kill(pid, 0)))));
	return o;
}

static json_t *probe_reach(const json_t *args)
{
	json_t *o = json_object(), *list = json_object_get(args, "pids"), *v;
	size_t i;

	json_array_foreach(list, i, v) {
		long pid = strtol(json_string_value(v), NULL, 10);

		if (pid > 0)
			json_object_set_new(o, json_string_value(v), reach_one((pid_t)pid));
	}
	return o;
}

/* Every process this server can see in /proc: its pid and command line
 * (NULs as spaces), or the errno reading it gave. */
static json_t *probe_processes(void)
{
	json_t *o = json_object();
	DIR *d = opendir("/proc");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[300], buf[512];
		ssize_t n;
		int fd;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
			json_object_set_new(o, de->d_name, json_string(errno_name(errno)));
			continue;
		}
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t k = 0; k < n; k++)
			if (buf[k] == '\0')
				buf[k] = ' ';
		json_object_set_new(o, de->d_name, json_stringn(buf, n > 0 ? (size_t)n : 0));
	}
	if (d)
		closedir(d);
	return o;
}

static json_t *run_probe(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	json_t *o;

	(void)t, (void)id, (void)deferred;
	if (!probe_list_ok(args, "paths") || !probe_list_ok(args, "connect") ||
	    !probe_list_ok(args, "unix") || !probe_list_ok(args, "pids"))
		return tool_error("probe: paths, connect, unix and pids must be arrays of at "
				  "most 64 strings");
	o = probe_identity();
	if (!o)
		return NULL;
	json_object_set_new(o, "cgroup", proc_lines("/proc/self/cgroup"));
	json_object_set_new(o, "limits", probe_limits());
	json_object_set_new(o, "env", probe_env());
	json_object_set_new(o, "interfaces", probe_interfaces());
	json_object_set_new(o, "denied", probe_denied());
	json_object_set_new(o, "paths", probe_each(args, "paths", path_judge));
	json_object_set_new(o, "connect", probe_each(args, "connect", connect_judge));
	json_object_set_new(o, "unix", probe_each(args, "unix", unix_judge));
	json_object_set_new(o, "reach", probe_reach(args));
	json_object_set_new(o, "processes", probe_processes());
	return structured(o);
}

/* ---- detach: a child that leaves the server's process group ----------------------- */

/* The child takes a session (and so a process group) of its own and no
 * descriptor of ours: killing the server's group misses it, and nothing
 * it holds tells the appliance it is there. Only what confines the whole
 * tree (a cgroup, a pid namespace) can end it. */
static json_t *run_detach(struct toy *t, const json_t *id, const json_t *args, int *deferred)
{
	pid_t pid;

	(void)t, (void)id, (void)args, (void)deferred;
	pid = fork();
	if (pid < 0)
		return tool_error("detach: fork failed");
	if (pid == 0) {
		setsid();
		syscall(SYS_close_range, 0U, ~0U, 0U);
		sleep(TOY_DETACH_S);
		_exit(0);
	}
	toy_log("detach: left pid %ld behind", (long)pid);
	return structured(json_pack("{s:I}", "pid", (json_int_t)pid));
}

static const char *const keys_none[] = {NULL};
static const char *const keys_add[] = {"a", "b", NULL};
static const char *const keys_text[] = {"text", NULL};
static const char *const keys_ms[] = {"ms", NULL};
static const char *const keys_n[] = {"n", NULL};
static const char *const keys_x[] = {"x", NULL};
static const char *const keys_depth[] = {"depth", NULL};
static const char *const keys_probe[] = {"paths", "connect", "unix", "pids", NULL};

/* In the order of tool_json. */
static const struct tool tools[] = {
	{"add", keys_add, run_add},
	{"echo", keys_text, run_echo},
	{"sleep", keys_ms, run_sleep},
	{"peak", keys_none, run_peak},
	{"bytes", keys_n, run_bytes},
	{"fail", keys_none, run_fail},
	{"write_note", keys_text, run_write_note},
	{"unsupported", keys_x, run_unsupported},
	{"deep", keys_depth, run_deep},
	{"probe", keys_probe, run_probe},
	{"detach", keys_none, run_detach},
	{"late", keys_none, run_late},
};
#define TOOLS_N		(sizeof(tools) / sizeof(tools[0]))
#define TOOLS_LISTED(t) ((t)->list_changed ? TOOLS_N : TOOLS_N - 1)

/* ---- output ------------------------------------------------------------------- */

/* A line wholly written: a call's answer is no longer held. */
static void out_line_done(struct toy *t)
{
	struct out_line *o = t->out_head;

	if (o->answers_call && t->held > 0)
		t->held--;
	t->out_head = o->next;
	if (!t->out_head)
		t->out_tail = &t->out_head;
	free(o->head);
	shared_put(o->body);
	free(o);
}

/* Forget what is queued (the reader is gone). */
static void out_drop(struct toy *t)
{
	while (t->out_head)
		out_line_done(t);
	t->out_bytes = 0;
}

#define TOY_IOV 96 /* parts per writev */

/* The parts of o not written yet, into iov; returns how many. */
static int out_iov(const struct out_line *o, struct iovec *iov)
{
	const char *p[3] = {o->head, o->body ? o->body->data : NULL, o->tail};
	size_t len[3] = {o->head_len, o->body ? o->body->len : 0, o->tail ? o->tail_len : 0};
	size_t skip = o->off;
	int k = 0;

	for (int i = 0; i < 3; i++) {
		if (skip >= len[i]) {
			skip -= len[i];
			continue;
		}
		iov[k].iov_base = (char *)p[i] + skip;
		iov[k++].iov_len = len[i] - skip;
		skip = 0;
	}
	return k;
}

static void out_flush(struct toy *t)
{
	while (t->out_head) {
		struct iovec iov[TOY_IOV];
		int k = 0;
		ssize_t n;

		for (struct out_line *o = t->out_head; o && k + 3 <= TOY_IOV; o = o->next)
			k += out_iov(o, iov + k);
		n = writev(STDOUT_FILENO, iov, k);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			toy_log("stdout: %s", n < 0 ? strerror(errno) : "closed");
			t->stop = 1;
			return;
		}
		t->out_bytes -= (size_t)n;
		while (n > 0) {
			struct out_line *o = t->out_head;
			size_t left = o->len - o->off, take = (size_t)n < left ? (size_t)n : left;

			o->off += take;
			n -= (ssize_t)take;
			if (o->off == o->len)
				out_line_done(t);
		}
	}
	loop_mod(t->loop, STDOUT_FILENO, t->out_head ? EPOLLOUT : 0);
}

/* Queue a line made of head (stolen), body (a reference stolen; may be
 * NULL) and tail (static; may be NULL), and write what the pipe takes now. */
static void out_parts(struct toy *t, char *head, size_t head_len, struct shared *body,
		      const char *tail)
{
	size_t len = head_len + (body ? body->len : 0) + (tail ? strlen(tail) : 0);
	struct out_line *o;

	if (t->out_bytes + len > TOY_OUT_QUEUE_MAX || !(o = calloc(1, sizeof(*o)))) {
		if (t->out_bytes + len > TOY_OUT_QUEUE_MAX)
			toy_log("the client does not read: %zu bytes queued", t->out_bytes);
		free(head);
		shared_put(body);
		t->stop = 1;
		return;
	}
	o->head = head;
	o->head_len = head_len;
	o->body = body;
	o->tail = tail;
	o->tail_len = tail ? strlen(tail) : 0;
	o->len = len;
	o->answers_call = t->line_answers_call;
	*t->out_tail = o;
	t->out_tail = &o->next;
	t->out_bytes += len;
	out_flush(t);
}

/* Queue line (stolen) and write what the pipe takes now. */
static void out_line(struct toy *t, char *line, size_t len)
{
	out_parts(t, line, len, NULL, NULL);
}

static void send_result(struct toy *t, const json_t *id, json_t *result)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (!result) {
		toy_log("out of memory");
		t->stop = 2;
		return;
	}
	if (jsonrpc_result_encode(id, result, TOY_OUT_LINE_MAX, &line, &len, &err) < 0)
		toy_log("result: %s", err.msg);
	else
		out_line(t, line, len);
	json_decref(result);
}

static void send_error(struct toy *t, const json_t *id, int code, const char *msg)
{
	struct appl_err err = {0};
	char *line;
	size_t len;

	if (jsonrpc_error_encode(id, code, msg, NULL, TOY_OUT_LINE_MAX, &line, &len, &err) < 0)
		toy_log("error: %s", err.msg);
	else
		out_line(t, line, len);
}

static void send_list_changed(struct toy *t)
{
	char *line;
	size_t len;

	if (jsonrpc_notification_encode("notifications/tools/list_changed", NULL, TOY_OUT_LINE_MAX,
					&line, &len, NULL) == 0)
		out_line(t, line, len);
	t->list_changed = 1;
	toy_log("sent notifications/tools/list_changed");
}

/* A call answered (or cancelled): once --list-changed-after N calls have
 * come in, announce the `late` tool. */
static void call_done(struct toy *t)
{
	if (t->list_changed_after >= 0 && !t->list_changed &&
	    t->calls >= (unsigned long)t->list_changed_after)
		send_list_changed(t);
}

/* ---- sleeping calls ----------------------------------------------------------- */

static struct call *call_unlink(struct toy *t, int tfd, const json_t *id)
{
	for (struct call **p = &t->sleeping; *p; p = &(*p)->next) {
		struct call *c = *p;

		if ((tfd >= 0 && c->tfd == tfd) || (tfd < 0 && jsonrpc_id_equal(c->id, id))) {
			*p = c->next;
			loop_del(t->loop, c->tfd);
			close(c->tfd);
			t->inflight--;
			return c;
		}
	}
	return NULL;
}

static void call_free(struct call *c)
{
	json_decref(c->id);
	free(c);
}

static void sleep_fired(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct toy *t = data;
	struct call *c = call_unlink(t, fd, NULL);
	char text[64];

	(void)loop, (void)events;
	if (!c)
		return;
	snprintf(text, sizeof(text), "slept %" PRId64 " ms", (int64_t)c->ms);
	t->line_answers_call = 1;
	send_result(t, c->id,
		    json_pack("{s:o, s:{s:I}}", "content", text_content(text, strlen(text)),
			      "structuredContent", "slept_ms", c->ms));
	t->line_answers_call = 0;
	call_free(c);
	call_done(t);
}

/* ---- methods ------------------------------------------------------------------ */

static const char *version_pick(const json_t *params)
{
	const char *want = json_string_value(json_object_get(params, "protocolVersion"));

	for (size_t i = 0; want && toy_versions[i]; i++)
		if (strcmp(want, toy_versions[i]) == 0)
			return toy_versions[i];
	/* MCP: a server that does not speak the client's version answers with
	 * one it does (its latest); the client then decides. */
	return toy_versions[0];
}

static void m_initialize(struct toy *t, const struct jsonrpc_msg *m)
{
	const json_t *p = m->params;

	if (t->fail_init) {
		send_error(t, m->id, JSONRPC_INTERNAL_ERROR, "initialize refused (--fail-init)");
		return;
	}
	if (t->initialized) {
		send_error(t, m->id, JSONRPC_INVALID_REQUEST, "already initialized");
		return;
	}
	if (!json_is_string(json_object_get(p, "protocolVersion"))) {
		send_error(t, m->id, JSONRPC_INVALID_PARAMS,
			   "initialize needs params.protocolVersion");
		return;
	}
	t->initialized = 1;
	toy_log("initialize: client asked %s, answering %s",
		json_string_value(json_object_get(p, "protocolVersion")), version_pick(p));
	send_result(t, m->id,
		    json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s}}", "protocolVersion",
			      version_pick(p), "capabilities", "tools", "listChanged", 1,
			      "serverInfo", "name", "toy", "version", "1.0.0"));
}

static void m_ping(struct toy *t, const struct jsonrpc_msg *m)
{
	send_result(t, m->id, json_object());
}

/* The cursor is the index of the page's first tool, as a decimal string:
 * opaque to the client, checked here. */
static void m_tools_list(struct toy *t, const struct jsonrpc_msg *m)
{
	json_t *cursor = json_object_get(m->params, "cursor");
	size_t start = 0, n = TOOLS_LISTED(t);
	json_t *page;
	char next[24];

	if (cursor) {
		const char *s = json_string_value(cursor);
		char *end;
		unsigned long v = s ? strtoul(s, &end, 10) : 0;

		if (!s || !*s || *end || v == 0 || v >= n) {
			send_error(t, m->id, JSONRPC_INVALID_PARAMS, "invalid cursor");
			return;
		}
		start = v;
	}
	page = json_array();
	for (size_t i = start; page && i < n && i < start + TOY_PAGE_SIZE; i++)
		json_array_append(page, json_array_get(t->tools, i));
	if (start + TOY_PAGE_SIZE >= n) {
		send_result(t, m->id, json_pack("{s:o}", "tools", page));
		return;
	}
	snprintf(next, sizeof(next), "%zu", start + TOY_PAGE_SIZE);
	send_result(t, m->id, json_pack("{s:o, s:s}", "tools", page, "nextCursor", next));
}

static const struct tool *tool_find(const struct toy *t, const char *name)
{
	for (size_t i = 0; name && i < TOOLS_LISTED(t); i++)
		if (strcmp(tools[i].name, name) == 0)
			return &tools[i];
	return NULL;
}

static void m_tools_call(struct toy *t, const struct jsonrpc_msg *m)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments");
	const struct tool *tool = tool_find(t, name);
	json_t *empty = NULL, *r;
	int deferred = 0;

	if (!json_is_object(m->params)) {
		send_error(t, m->id, JSONRPC_INVALID_PARAMS, "tools/call needs params");
		return;
	}
	if (t->die_after >= 0 && t->calls >= (unsigned long)t->die_after) {
		toy_log("--die-after %ld: exiting at call %lu", t->die_after, t->calls + 1);
		t->stop = 2;
		return;
	}
	t->calls++;
	held_add(t);
	t->line_answers_call = 1;
	/* MCP: an unknown tool is a protocol error, bad arguments a tool
	 * error the model can read. */
	if (!tool) {
		send_error(t, m->id, JSONRPC_INVALID_PARAMS, "unknown tool");
	} else {
		if (!args)
			args = empty = json_object();
		if (!json_is_object(args) ||
		    appl_json_keys_check(args, tool->keys, "arguments", NULL) < 0)
			r = tool_error("arguments: not an object, or an unknown argument");
		else
			r = tool->run(t, m->id, args, &deferred);
		json_decref(empty);
		if (deferred == 0)
			send_result(t, m->id, r);
	}
	t->line_answers_call = 0;
	if (deferred != 1)
		call_done(t);
}

static void n_initialized(struct toy *t, const struct jsonrpc_msg *m)
{
	(void)m;
	toy_log("client initialized");
	call_done(t); /* --list-changed-after 0 fires here */
}

static void n_cancelled(struct toy *t, const struct jsonrpc_msg *m)
{
	json_t *id = json_object_get(m->params, "requestId");
	struct call *c = jsonrpc_id_valid(id) ? call_unlink(t, -1, id) : NULL;

	/* MCP: the receiver does not answer a cancelled request; a cancel for
	 * something already answered or unknown is ignored. */
	if (!c) {
		toy_log("cancel for no call in flight");
		return;
	}
	toy_log("cancelled a sleep of %" PRId64 " ms", (int64_t)c->ms);
	call_free(c);
	if (t->held > 0)
		t->held--; /* never answered */
	call_done(t);
}

struct method {
	const char *name;
	int needs_init;
	void (*fn)(struct toy *t, const struct jsonrpc_msg *m);
};

static const struct method requests[] = {
	{"initialize", 0, m_initialize},
	{"ping", 0, m_ping},
	{"tools/list", 1, m_tools_list},
	{"tools/call", 1, m_tools_call},
};

static const struct method notifications[] = {
	{"notifications/initialized", 0, n_initialized},
	{"notifications/cancelled", 0, n_cancelled},
};

static const struct method *method_find(const struct method *table, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	return NULL;
}

static void handle_line(struct toy *t, const char *buf, size_t len)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};
	const struct method *h;

	if (jsonrpc_msg_parse(buf, len, TOY_IN_LINE_MAX, &m, &err) < 0) {
		toy_log("refused a line: %s", err.msg);
		send_error(t, m.id, m.fail, err.msg);
	} else if (m.kind == JSONRPC_REQUEST) {
		h = method_find(requests, sizeof(requests) / sizeof(requests[0]), m.method);
		if (!h)
			send_error(t, m.id, JSONRPC_METHOD_NOT_FOUND, "method not found");
		else if (h->needs_init && !t->initialized)
			send_error(t, m.id, JSONRPC_INVALID_REQUEST, "not initialized");
		else
			h->fn(t, &m);
	} else if (m.kind == JSONRPC_NOTIFICATION) {
		h = method_find(notifications, sizeof(notifications) / sizeof(notifications[0]),
				m.method);
		if (h)
			h->fn(t, &m);
	} else {
		toy_log("ignored a %s: the toy sends no requests", jsonrpc_kind_name(m.kind));
	}
	jsonrpc_msg_clear(&m);
}

/* ---- input -------------------------------------------------------------------- */

/* Take the complete lines out of t->in; a line past the cap is answered
 * once and its rest skipped up to its newline. */
static void in_lines(struct toy *t)
{
	size_t start = 0;

	for (size_t i = 0; i < t->in_len && t->stop == 0; i++) {
		if (t->in[i] != '\n')
			continue;
		if (!t->in_discard)
			handle_line(t, t->in + start, i - start);
		t->in_discard = 0;
		start = i + 1;
	}
	memmove(t->in, t->in + start, t->in_len - start);
	t->in_len -= start;
	if (t->in_len >= TOY_IN_LINE_MAX) {
		if (!t->in_discard)
			send_error(t, NULL, JSONRPC_INVALID_REQUEST, "message too long");
		t->in_discard = 1;
		t->in_len = 0;
	}
}

static void stdin_ready(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct toy *t = data;
	size_t room = TOY_IN_LINE_MAX + 1 - t->in_len;
	ssize_t n;

	(void)loop, (void)events;
	n = read(fd, t->in + t->in_len, room < TOY_READ_BLOCK ? room : TOY_READ_BLOCK);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* MCP stdio shutdown: the client closes our stdin. */
		toy_log("stdin closed");
		t->stop = 1;
		return;
	}
	t->in_len += (size_t)n;
	in_lines(t);
}

static void stdout_ready(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct toy *t = data;

	(void)loop, (void)fd;
	/* The reader is gone: epoll reports that even with no events asked
	 * for, so leaving now is also what keeps this from spinning. */
	if (events & (EPOLLERR | EPOLLHUP)) {
		toy_log("stdout closed");
		t->stop = 1;
		out_drop(t);
		return;
	}
	out_flush(t);
}

/* ---- start and stop ----------------------------------------------------------- */

static int opt_long(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	return (errno || !*s || *end || *out < 0) ? -1 : 0;
}

static int options_parse(struct toy *t, int argc, char **argv)
{
	t->die_after = t->list_changed_after = -1;
	for (int i = 1; i < argc; i++) {
		long *num = NULL;

		if (strcmp(argv[i], "--fail-init") == 0)
			t->fail_init = 1;
		else if (strcmp(argv[i], "--die-after") == 0)
			num = &t->die_after;
		else if (strcmp(argv[i], "--list-changed-after") == 0)
			num = &t->list_changed_after;
		else
			return -1;
		if (num && (i + 1 >= argc || opt_long(argv[++i], num) < 0))
			return -1;
	}
	return 0;
}

static int tools_load(struct toy *t)
{
	t->tools = json_array();
	for (size_t i = 0; t->tools && tool_json[i]; i++) {
		json_error_t jerr;
		json_t *v = json_loads(tool_json[i], 0, &jerr);

		if (!v || strcmp(json_string_value(json_object_get(v, "name")), tools[i].name)) {
			toy_log("tool %zu: %s", i, v ? "out of order" : jerr.text);
			json_decref(v);
			return -1;
		}
		json_array_append_new(t->tools, v);
	}
	return t->tools && json_array_size(t->tools) == TOOLS_N ? 0 : -1;
}

static int toy_start(struct toy *t)
{
	struct appl_err err = {0};

	signal(SIGPIPE, SIG_IGN);
	t->out_tail = &t->out_head;
	t->in = malloc(TOY_IN_LINE_MAX + 1);
	t->loop = loop_new(&err);
	if (!t->in || !t->loop || tools_load(t) < 0)
		return -1;
	/* stdin and stdout must be pipes or sockets (epoll refuses files). */
	if (fcntl(STDIN_FILENO, F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(STDOUT_FILENO, F_SETFL, O_NONBLOCK) < 0 ||
	    loop_add(t->loop, STDIN_FILENO, EPOLLIN, stdin_ready, t, &err) < 0 ||
	    loop_add(t->loop, STDOUT_FILENO, 0, stdout_ready, t, &err) < 0) {
		toy_log("start: %s", err.msg[0] ? err.msg : strerror(errno));
		return -1;
	}
	return 0;
}

/* Write what is still queued before leaving, blocking if need be: answers
 * given before --die-after fired must reach the client. */
static void toy_stop(struct toy *t)
{
	fcntl(STDOUT_FILENO, F_SETFL, 0);
	if (t->out_head)
		out_flush(t);
	out_drop(t);
	while (t->sleeping)
		call_free(call_unlink(t, t->sleeping->tfd, NULL));
	loop_free(t->loop);
	json_decref(t->tools);
	free(t->in);
	shared_put(t->bytes);
	free(t->note);
}

int main(int argc, char **argv)
{
	struct toy t = {0};
	int status;

	if (options_parse(&t, argc, argv) < 0) {
		fprintf(stderr, "usage: toy-server [--fail-init] [--die-after N] "
				"[--list-changed-after N]\n");
		return 2;
	}
	if (toy_start(&t) < 0)
		return 1;
	toy_log("ready");
	while (!t.stop) {
		int rc = loop_run_once(t.loop, -1);

		if (rc < 0) {
			toy_log("loop: %s", strerror(-rc));
			t.stop = 2;
		}
	}
	status = t.stop == 2 ? 3 : 0;
	toy_stop(&t);
	return status;
}
