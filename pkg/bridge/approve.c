/* approve.c: asking the approver program whether a call may go (see
 * internal.h). The program is the administrator's; what it is shown is
 * the code's, so the question is escaped and bounded before it is sent. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "log/log.h"
#include "loop/loop.h"
#include "proc/proc.h"

#define ASK_ANSWER_MAX 64	   /* bytes of the program's answer read */
#define ASK_VALUE_MAX  200	   /* bytes of one argument's value shown */
#define ASK_ARGS_MAX   16	   /* arguments shown; the rest counted */
#define ASK_MAX	       (48 * 1024) /* a question, well inside a pipe's 64 KiB */

struct bridge_ask {
	struct loop *loop;
	struct loop_timer *timer;
	struct loop_task done; /* the answer, delivered from the loop */
	int out;	       /* the program's stdout */
	pid_t pid;
	int pidfd;
	char answer[ASK_ANSWER_MAX + 1];
	size_t got;
	const char *outcome;
	unsigned char claim[32]; /* the client's answer's ledger key, when keyed */
	bool keyed;
	bridge_ask_cb cb;
	void *data;
	const struct bridge_asker *k; /* a client's question: k's, handle while open */
	void *handle;
};

/* One argument's value for a person: compact JSON, escaped, cut. */
static char *value_shown(const json_t *v)
{
	char *raw = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	char esc[4 * ASK_VALUE_MAX + 1], digest[65], *out = NULL;
	unsigned char h[32];
	size_t len;
	bool cut;

	if (!raw)
		return NULL;
	len = strlen(raw);
	log_escape(raw, len < ASK_VALUE_MAX ? len : ASK_VALUE_MAX, esc, sizeof(esc), &cut);
	if (len > ASK_VALUE_MAX) {
		crypto_generichash(h, sizeof(h), (const unsigned char *)raw, len, NULL, 0);
		sodium_bin2hex(digest, sizeof(digest), h, 8);
		if (asprintf(&out, "%s... (%zu bytes, blake2b %s)", esc, len, digest) < 0)
			out = NULL;
	} else
		out = strdup(esc);
	free(raw);
	return out;
}

json_t *bridge_question_obj(const char *run, const char *client, const char *role,
			    const char *server, const char *tool, const json_t *args)
{
	json_t *shown = json_object(), *q;
	char *text = NULL, *line, name[4 * 64 + 1];
	const char *key;
	json_t *v;
	size_t n = 0;

	if (!shown || asprintf(&text, "%s.%s", server, tool) < 0) {
		json_decref(shown);
		return NULL;
	}
	json_object_foreach((json_t *)args, key, v) {
		char *val;

		if (n++ == ASK_ARGS_MAX)
			break;
		log_escape(key, strlen(key), name, sizeof(name), NULL);
		if (!(val = value_shown(v)) ||
		    asprintf(&line, "%s\n  %s: %s", text, name, val) < 0) {
			free(val);
			free(text);
			json_decref(shown);
			return NULL;
		}
		json_object_set_new(shown, name, json_string(val));
		free(val);
		free(text);
		text = line;
	}
	if (n > ASK_ARGS_MAX && asprintf(&line, "%s\n  (%zu more arguments)", text,
					 json_object_size(args) - ASK_ARGS_MAX) >= 0) {
		free(text);
		text = line;
	}
	q = json_pack("{ss ss ss? ss ss ss so}", "run", run, "client", client, "role", role,
		      "server", server, "tool", tool, "text", text, "arguments", shown);
	free(text);
	return q;
}

char *bridge_question(const char *run, const char *client, const char *role, const char *server,
		      const char *tool, const json_t *args)
{
	json_t *q = bridge_question_obj(run, client, role, server, tool, args);
	char *res = q ? json_dumps(q, JSON_COMPACT) : NULL;

	json_decref(q);
	return res;
}

static void ask_end(struct bridge_ask *q, const char *outcome)
{
	if (q->outcome)
		return;
	q->outcome = outcome;
	loop_timer_set(q->timer, 0);
	if (q->out >= 0)
		loop_del(q->loop, q->out);
	if (q->handle) { /* withdrawn: the client's answer would come too late */
		q->k->cancel(q->k->a, q->handle);
		q->handle = NULL;
	}
	loop_defer(q->loop, &q->done);
}

static void on_done(void *data)
{
	struct bridge_ask *q = data;

	q->cb(q->data, q->outcome, q->keyed ? q->claim : NULL);
}

static void on_timeout(void *data)
{
	ask_end(data, "timeout");
}

static void on_answer(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct bridge_ask *q = data;
	ssize_t n;
	(void)loop;
	(void)events;

	n = read(fd, q->answer + q->got, ASK_ANSWER_MAX - q->got);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		q->got += (size_t)n;
	q->answer[q->got] = '\0';
	/* The first line decides; its end, the program's end or a full
	 * buffer ends the wait. */
	if (n > 0 && !strchr(q->answer, '\n') && q->got < ASK_ANSWER_MAX)
		return;
	q->answer[strcspn(q->answer, "\n")] = '\0';
	ask_end(q, strcmp(q->answer, "approve") == 0 ? "approved" : "declined");
}

/* Both ends of a pipe; ours non-blocking. */
static int pipe_make(int fds[2], int ours, struct appl_err *err)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return appl_err_errno(err, -errno, errno, "approver pipe");
	if (fcntl(fds[ours], F_SETFL, O_NONBLOCK) < 0) {
		close(fds[0]);
		close(fds[1]);
		return appl_err_errno(err, -errno, errno, "approver pipe");
	}
	return 0;
}

struct bridge_ask *bridge_ask_start(struct loop *loop, const char *command, unsigned timeout_ms,
				    const char *question, size_t len, bridge_ask_cb cb, void *data,
				    struct appl_err *err)
{
	char *argv[] = {(char *)command, NULL}, *envp[] = {NULL};
	int in[2] = {-1, -1}, out[2] = {-1, -1};
	struct bridge_ask *q = calloc(1, sizeof(*q));
	struct proc_spec spec;
	ssize_t put;

	if (!q) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if (len > ASK_MAX) {
		free(q);
		appl_err_set(err, -E2BIG, "the question is over %d bytes", ASK_MAX);
		return NULL;
	}
	q->loop = loop;
	q->out = q->pidfd = -1;
	q->cb = cb;
	q->data = data;
	loop_task_init(&q->done, on_done, q);
	if (pipe_make(in, 1, err) < 0 || pipe_make(out, 0, err) < 0)
		goto fail;
	spec = (struct proc_spec){.path = command,
				  .argv = argv,
				  .envp = envp,
				  .fds = {in[0], out[1], -1},
				  .no_new_privs = true};
	if (proc_spawn(&spec, &q->pid, &q->pidfd, err) < 0)
		goto fail;
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	q->out = out[0];
	out[0] = -1;
	/* The question fits the pipe (bridge_question bounds it), so one write
	 * of it never blocks; a program that does not read it loses nothing. */
	put = write(in[1], question, len);
	close(in[1]);
	in[1] = -1;
	if (put != (ssize_t)len)
		log_line(LOG_WARN, NULL, "approver %s: the question was not taken whole", command);
	if (!(q->timer = loop_timer_new(loop, on_timeout, q, err)) ||
	    loop_timer_set(q->timer, timeout_ms) < 0 ||
	    loop_add(loop, q->out, EPOLLIN, on_answer, q, err) < 0)
		goto fail;
	return q;
fail:
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	bridge_ask_free(q);
	return NULL;
}

static void on_client_answer(void *token, const char *outcome, const unsigned char *claim)
{
	struct bridge_ask *q = token;

	if (claim && !q->outcome) {
		memcpy(q->claim, claim, sizeof(q->claim));
		q->keyed = true;
	}
	q->handle = NULL; /* answered: the client's side is gone */
	ask_end(q, outcome);
}

struct bridge_ask *bridge_ask_client(struct loop *loop, const struct bridge_asker *k,
				     unsigned timeout_ms, const char *text,
				     const unsigned char bind[32], bridge_ask_cb cb, void *data,
				     char *why, size_t cap)
{
	struct bridge_ask *q = calloc(1, sizeof(*q));
	struct appl_err err = {0};

	if (!q || !(q->timer = loop_timer_new(loop, on_timeout, q, &err)) ||
	    loop_timer_set(q->timer, timeout_ms) < 0) {
		snprintf(why, cap, "out of memory");
		if (q)
			loop_timer_free(q->timer);
		free(q);
		return NULL;
	}
	q->loop = loop;
	q->out = q->pidfd = -1;
	q->cb = cb;
	q->data = data;
	q->k = k;
	loop_task_init(&q->done, on_done, q);
	if (!(q->handle = k->ask(k->a, text, bind, on_client_answer, q, why, cap))) {
		loop_timer_free(q->timer);
		free(q);
		return NULL;
	}
	return q;
}

void bridge_ask_free(struct bridge_ask *q)
{
	if (!q)
		return;
	if (q->handle)
		q->k->cancel(q->k->a, q->handle);
	loop_task_cancel(q->loop, &q->done);
	loop_timer_free(q->timer);
	if (q->out >= 0) {
		if (!q->outcome)
			loop_del(q->loop, q->out);
		close(q->out);
	}
	if (q->pidfd >= 0) {
		proc_kill_group(q->pid);
		proc_wait(q->pid);
		close(q->pidfd);
	}
	free(q);
}
