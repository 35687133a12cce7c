/* stdio.c: the stdio transport of the upstream client (see upstream.h,
 * transport.h): a child process, one JSON-RPC message per line on its
 * stdin and stdout, its stderr relayed to the log. */
#define _GNU_SOURCE
#include "upstream/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loop/lines.h"
#include "proc/confine.h"
#include "proc/proc.h"

#define UP_CONTROL_RESERVE (64u * 1024) /* queue room only our own small lines may use */
#define UP_DRAIN_BYTES	   (APPL_UPSTREAM_MESSAGE_MAX + 64u * 1024) /* read when a server went */
/* Of an answer over the cap, the first bytes are read for its id. */
#define UP_OVERLONG_HEAD 4096u
#define UP_PATH		 "/usr/local/bin:/usr/bin:/bin"

/* A killed process not reaped yet: its pidfd is watched until it is. */
struct corpse {
	struct corpse *next;
	struct up_stdio *s;
	pid_t pid;
	int pidfd;
};

struct up_stdio {
	struct up_link link;
	char **argv;
	char **env_names;
	size_t nenv;
	char *cwd;
	pid_t pid;
	int pidfd, fd_in, fd_out, fd_err;
	bool watching_pid;
	/* its stdout and stdin: JSON-RPC lines (pkg/loop/lines.h) */
	struct lines *io;
	/* its stderr, relayed to the log line by line, cut at the cap */
	struct lines *errio;
	struct log_rate err_rate;
	struct corpse *corpses;
	struct proc_jail *jail; /* its confinement (NULL: none asked) */
};

/* ---- environment ------------------------------------------------------------ */

static char *kv_new(const char *name, const char *value)
{
	size_t a = strlen(name), b = strlen(value);
	char *s = malloc(a + b + 2);

	if (!s)
		return NULL;
	memcpy(s, name, a);
	s[a] = '=';
	memcpy(s + a + 1, value, b + 1);
	return s;
}

/* Put NAME=value into env (n entries so far), replacing an entry of the
 * same name. Returns the new count, or 0 when out of memory. */
static size_t env_put(char **env, size_t n, const char *name, const char *value)
{
	size_t len = strlen(name);
	char *kv = kv_new(name, value);

	if (!kv)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=') {
			free(env[i]);
			env[i] = kv;
			return n;
		}
	}
	env[n] = kv;
	return n + 1;
}

int upstream_env_build(const char *const *names, size_t n, char ***envp, struct appl_err *err)
{
	const char *home = getenv("HOME");
	char **env = calloc(n + 4, sizeof(*env)); /* room for TMPDIR (env_private) */
	size_t k;

	*envp = NULL;
	if (!env)
		return appl_err_set(err, -ENOMEM, "out of memory");
	k = env_put(env, 0, "PATH", UP_PATH);
	k = k ? env_put(env, k, "HOME", home ? home : "/") : 0;
	for (size_t i = 0; k && i < n; i++) {
		const char *v =
			names[i] && *names[i] && !strchr(names[i], '=') ? getenv(names[i]) : NULL;

		if (v)
			k = env_put(env, k, names[i], v);
	}
	if (!k) {
		upstream_env_free(env);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	*envp = env;
	return 0;
}

/* HOME and TMPDIR to the server's private directory, whatever the policy
 * passed through: upstream_env_build left room for one more entry. */
static int env_private(char **env, const char *dir)
{
	size_t n = 0;

	while (env[n])
		n++;
	return (n = env_put(env, n, "HOME", dir)) && env_put(env, n, "TMPDIR", dir) ? 0 : -ENOMEM;
}

void upstream_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		free(envp[i]);
	free(envp);
}

/* ---- output -------------------------------------------------------------------- */

/* Copy buf into the queue for the server's stdin. A caller's call may fill
 * it to the cap less a reserve; our own lines (answers to the server's
 * requests, cancellations, the handshake) may use the reserve too, so a
 * flood of calls cannot keep them out. -ENOBUFS when it does not fit. */
static int st_send(void *t, const struct up_req_info *r, const char *buf, size_t len, bool call)
{
	struct up_stdio *s = t;
	size_t limit =
		call ? APPL_UPSTREAM_OUTBUF_MAX - UP_CONTROL_RESERVE : APPL_UPSTREAM_OUTBUF_MAX;
	size_t pending;

	(void)r;
	if (s->link.view->run == UP_RUN_STOPPED || !s->io)
		return -EPIPE;
	pending = lines_pending(s->io);
	if (len > limit || pending > limit - len)
		return -ENOBUFS;
	return lines_write(s->io, buf, len);
}

/* MCP over stdio: the sender of a request it gives up cancels it. */
static void st_abandon(void *t, uint64_t id, const char *reason)
{
	struct up_stdio *s = t;

	s->link.ev->cancelled(s->link.core, id, reason);
}

static void st_cap_changed(void *t, size_t cap)
{
	struct up_stdio *s = t;

	if (s->io)
		lines_set_line_max(s->io, cap);
}

/* ---- reading the server's stdout ------------------------------------------- */

static void on_line(struct lines *l, const char *line, size_t len, void *data)
{
	struct up_stdio *s = data;

	(void)l;
	s->link.ev->message(s->link.core, line, len);
}

/* A message past the cap: dropped as it is read, never kept or parsed;
 * the core decides, from its first bytes, whose answer it was. */
static void on_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	struct up_stdio *s = data;

	(void)l;
	UP_LOG(s->link.name, LOG_INFO, "dropping a message longer than its cap (%zu bytes seen)",
	       len);
	s->link.ev->overlong(s->link.core, head, len);
}

static void on_skipped(struct lines *l, void *data)
{
	struct up_stdio *s = data;

	(void)l;
	s->link.ev->dropped_end(s->link.core);
}

/* The end of its stdout, or its stdin broken: the server is gone or of no
 * more use (what it wrote before has been read). */
static void on_io_end(struct lines *l, const char *why, void *data)
{
	struct up_stdio *s = data;
	/* A server's output ends as it exits; a confined one's pidfd (its
	 * namespace's init) shows that a moment later: a short wait names the
	 * exit, once, for a server that is lost either way. */
	bool exited = proc_wait_exit(s->pidfd, strcmp(why, "end of input") == 0 ? 200 : 0) == 1;
	(void)l;

	if (strcmp(why, "write error") == 0)
		s->link.ev->lost(s->link.core, exited ? "exited" : "closed its input");
	else if (strcmp(why, "end of input") == 0)
		s->link.ev->lost(s->link.core, exited ? "exited" : "closed its output");
	else
		s->link.ev->lost(s->link.core, why);
}

/* What waited for room in its stdin goes now. */
static void on_io_flushed(struct lines *l, void *data)
{
	struct up_stdio *s = data;

	(void)l;
	s->link.ev->flush(s->link.core);
}

/* ---- the server's stderr ----------------------------------------------------- */

/* One line of its stderr to the log, escaped, cut at the cap, and no more
 * than the log rate allows: a server must not be able to flood the log. */
static void err_emit(struct up_stdio *s, const char *line, size_t len, bool cut)
{
	char text[APPL_UPSTREAM_STDERR_LINE_MAX * 4 + 1];
	unsigned dropped;
	bool cut2;

	if (len > 0 && line[len - 1] == '\r' && !cut)
		len--;
	if (!log_rate_allow(&s->err_rate, loop_now_ms(), &dropped))
		return;
	if (dropped)
		UP_LOG(s->link.name, LOG_WARN, "stderr: %u lines left out (more than %u in %u s)",
		       dropped, LOG_RATE_BURST, LOG_RATE_WINDOW_MS / 1000);
	log_escape(line, len, text, sizeof(text), &cut2);
	UP_LOG(s->link.name, LOG_INFO, "stderr: %s%s", text, cut || cut2 ? " [cut]" : "");
}

static void on_err_line(struct lines *l, const char *line, size_t len, void *data)
{
	(void)l;
	err_emit(data, line, len, false);
}

static void on_err_overlong(struct lines *l, const char *head, size_t len, void *data)
{
	(void)l;
	err_emit(data, head, len, true);
}

static void on_err_end(struct lines *l, const char *why, void *data)
{
	(void)why;
	(void)data;
	lines_close(l); /* the stderr pipe alone says nothing about the server */
}

/* What the server said on stderr before it went (at most a pipe's worth). */
static void st_drain(void *t)
{
	struct up_stdio *s = t;
	const char *part;
	size_t n;

	if (!s->errio)
		return;
	if (!lines_closed(s->errio))
		lines_pump(s->errio, 64 * 1024);
	/* a last line without its newline */
	if ((n = lines_partial(s->errio, &part)) > 0)
		err_emit(s, part, n, false);
}

/* ---- the process -------------------------------------------------------------- */

/* The server went, or broke a pipe. Take what it wrote before: answers
 * sent just before an exit still reach their callers, whichever of the
 * pidfd, the broken stdin or the end of stdout the loop reports first. */
static void on_pidfd(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct up_stdio *s = data;

	(void)loop;
	(void)fd;
	(void)events;
	if (s->io)
		lines_pump(s->io, UP_DRAIN_BYTES);
	s->link.ev->lost(s->link.core, "exited");
}

static void corpse_free(struct up_stdio *s, struct loop *loop, struct corpse *c)
{
	for (struct corpse **p = &s->corpses; *p; p = &(*p)->next) {
		if (*p == c) {
			*p = c->next;
			break;
		}
	}
	loop_del(loop, c->pidfd);
	close(c->pidfd);
	free(c);
}

static void on_corpse(struct loop *loop, int fd, uint32_t events, void *data)
{
	struct corpse *c = data;
	int status;

	(void)fd;
	(void)events;
	if (proc_reap(c->pid, &status) != 0)
		corpse_free(c->s, loop, c);
}

static void exit_log(const struct up_stdio *s, int status)
{
	if (WIFEXITED(status))
		UP_LOG(s->link.name, LOG_INFO, "process %d exited with status %d", (int)s->pid,
		       WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		UP_LOG(s->link.name, LOG_INFO, "process %d ended by signal %d", (int)s->pid,
		       WTERMSIG(status));
}

/* Kill the process group and reap the leader now, or (block false) watch
 * its pidfd until it can be reaped. The group is killed before the leader
 * is reaped: while it is unreaped its pid, and so the group id, cannot be
 * reused, so the kill cannot reach a stranger. */
static void st_close(void *t, bool block)
{
	struct up_stdio *s = t;
	struct corpse *c = NULL;
	int status = 0, *fds[] = {&s->fd_in, &s->fd_out, &s->fd_err, &s->pidfd};

	/* From inside one of their hooks (a stop from a line): freed at the
	 * round's end. A blocking release runs outside them (upstream_free, a
	 * failed start), and may be the last thing before the loop goes. */
	if (block) {
		lines_free(s->io);
		lines_free(s->errio);
	} else {
		lines_destroy(s->io);
		lines_destroy(s->errio);
	}
	s->io = s->errio = NULL;
	if (s->watching_pid)
		loop_del(s->link.loop, s->pidfd);
	s->watching_pid = false;
	for (size_t i = 0; i < 3; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
	if (s->pid <= 0)
		return;
	proc_kill_group(s->pid);
	proc_jail_kill(s->jail); /* the tree, escapees from the group included */
	if (block)
		proc_wait_exit(s->pidfd, APPL_UPSTREAM_KILL_WAIT_MS);
	if (proc_reap(s->pid, &status) == 1) {
		exit_log(s, status);
		close(s->pidfd);
	} else if (!block && (c = calloc(1, sizeof(*c))) &&
		   loop_add(s->link.loop, s->pidfd, EPOLLIN, on_corpse, c, NULL) == 0) {
		c->s = s;
		c->pid = s->pid;
		c->pidfd = s->pidfd;
		c->next = s->corpses;
		s->corpses = c;
	} else {
		free(c);
		close(s->pidfd); /* reaped by nobody: it stays a zombie until we exit */
	}
	s->pid = 0;
	s->pidfd = -1;
}

static void fds_close(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static int watches_add(struct up_stdio *s, struct appl_err *err)
{
	struct lines_config io_cfg = {.line_max = APPL_UPSTREAM_MESSAGE_MAX,
				      .queue_max = APPL_UPSTREAM_OUTBUF_MAX,
				      .overlong = LINES_OVERLONG_SKIP,
				      .head_max = UP_OVERLONG_HEAD};
	struct lines_hooks io_hooks = {.on_line = on_line,
				       .on_overlong = on_overlong,
				       .on_skipped = on_skipped,
				       .on_end = on_io_end,
				       .on_flushed = on_io_flushed,
				       .data = s};
	struct lines_config err_cfg = {.line_max = APPL_UPSTREAM_STDERR_LINE_MAX,
				       .overlong = LINES_OVERLONG_SKIP,
				       .head_max = APPL_UPSTREAM_STDERR_LINE_MAX,
				       .final_line = true};
	struct lines_hooks err_hooks = {.on_line = on_err_line,
					.on_overlong = on_err_overlong,
					.on_end = on_err_end,
					.data = s};

	if (!(s->io = lines_new(s->link.loop, s->fd_out, s->fd_in, &io_cfg, &io_hooks, err)) ||
	    !(s->errio = lines_new(s->link.loop, s->fd_err, -1, &err_cfg, &err_hooks, err)) ||
	    loop_add(s->link.loop, s->pidfd, EPOLLIN, on_pidfd, s, err) < 0)
		return err ? err->code : -ENOMEM;
	s->watching_pid = true;
	return 0;
}

/* Pipes for the child's 0, 1, 2; ours are the other ends, non-blocking. */
static int pipes_open(int p[3][2], struct appl_err *err)
{
	for (int i = 0; i < 3; i++) {
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return appl_err_errno(err, -errno, errno, "pipe");
	}
	if (fcntl(p[0][1], F_SETFL, O_NONBLOCK) < 0 || fcntl(p[1][0], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(p[2][0], F_SETFL, O_NONBLOCK) < 0)
		return appl_err_errno(err, -errno, errno, "fcntl");
	/* A large answer passes in fewer, larger steps, and the server waits
	 * on us less: its own output queue is what grows while it waits. Best
	 * effort: above fs.pipe-max-size an unprivileged caller is refused,
	 * and the default size still works. */
	(void)fcntl(p[1][0], F_SETPIPE_SZ, (int)APPL_UPSTREAM_PIPE_BYTES);
	return 0;
}

static int st_open(void *t, struct appl_err *err)
{
	struct up_stdio *s = t;
	int p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	struct proc_spec spec = {.path = s->argv[0], .argv = s->argv, .no_new_privs = true};
	char **envp = NULL;
	int rc;

	spec.cwd = s->cwd ? s->cwd : "/";
	if ((rc = upstream_env_build((const char *const *)s->env_names, s->nenv, &envp, err)) < 0)
		goto fail;
	if (s->jail) {
		spec.confine = proc_jail_confine(s->jail);
		/* What the last run left behind (an escapee) goes before the next. */
		proc_jail_kill(s->jail);
		if (env_private(envp, proc_jail_home(s->jail)) < 0) {
			rc = appl_err_set(err, -ENOMEM, "out of memory");
			goto fail;
		}
	}
	if ((rc = pipes_open(p, err)) < 0)
		goto fail;
	spec.envp = envp;
	spec.fds[0] = p[0][0];
	spec.fds[1] = p[1][1];
	spec.fds[2] = p[2][1];
	if ((rc = proc_spawn(&spec, &s->pid, &s->pidfd, err)) < 0)
		goto fail;
	close(p[0][0]);
	close(p[1][1]);
	close(p[2][1]);
	s->fd_in = p[0][1];
	s->fd_out = p[1][0];
	s->fd_err = p[2][0];
	upstream_env_free(envp);
	if ((rc = watches_add(s, err)) < 0)
		st_close(s, true);
	return rc;
fail:
	upstream_env_free(envp);
	fds_close(&p[0][0], 6);
	s->pid = 0;
	s->pidfd = -1;
	return rc;
}

static pid_t st_pid(const void *t)
{
	const struct up_stdio *s = t;

	return s->pid;
}

static void st_destroy(void *t)
{
	struct up_stdio *s = t;

	if (!s)
		return;
	while (s->corpses) {
		struct corpse *c = s->corpses;
		int status;

		proc_wait_exit(c->pidfd, APPL_UPSTREAM_KILL_WAIT_MS);
		proc_reap(c->pid, &status);
		corpse_free(s, s->link.loop, c);
	}
	proc_jail_free(s->jail);
	upstream_env_free(s->argv);
	upstream_env_free(s->env_names);
	free(s->cwd);
	free(s);
}

/* ---- making one ---------------------------------------------------------------- */

static char **strv_dup(const char *const *v, size_t n)
{
	char **out = calloc(n + 1, sizeof(*out));

	for (size_t i = 0; out && i < n; i++) {
		out[i] = strdup(v[i]);
		if (!out[i]) {
			upstream_env_free(out);
			return NULL;
		}
	}
	return out;
}

/* A path under one of the hidden ones would not exist for the server. */
static const char *under_mask(const char *path, const char *const *masks)
{
	for (size_t i = 0; path && masks && masks[i]; i++) {
		size_t n = strlen(masks[i]);

		if (strncmp(path, masks[i], n) == 0 && (path[n] == '/' || path[n] == '\0'))
			return masks[i];
	}
	return NULL;
}

static int jail_make(struct up_stdio *s, const struct policy_server *srv,
		     const struct upstream_opts *o, struct appl_err *err)
{
	struct proc_jail_spec js = {.name = srv->name,
				    .user = srv->user,
				    .memory_mb = srv->memory_mb,
				    .pids = srv->pids,
				    .network = srv->network,
				    .masks = o->hide,
				    .filter = o->filter};
	char why[APPL_ERR_MSG_MAX];
	const char *m;
	int probe;

	if ((m = under_mask(srv->argv[0], o->hide)) || (m = under_mask(srv->cwd, o->hide)))
		return appl_err_set(
			err, -EINVAL, "servers.%s: %s lies under %s, which is hidden from servers",
			srv->name, under_mask(srv->argv[0], o->hide) ? srv->argv[0] : srv->cwd, m);
	if (proc_jail_new(&js, &s->jail, err) < 0)
		return err->code;
	/* What would start nothing is refused now, not found by the first
	 * call: the program and its cwd tried as the user it runs as. */
	switch ((probe = proc_jail_probe(s->jail, srv->argv[0], srv->cwd, why, sizeof(why)))) {
	case PROC_PROBE_OK:
		break;
	case PROC_PROBE_COMMAND_MISSING:
	case PROC_PROBE_COMMAND:
		return appl_err_set(
			err, -EACCES, "servers.%s: %s cannot be run as %s: %s; %s", srv->name,
			srv->argv[0], proc_jail_who(s->jail), why,
			probe == PROC_PROBE_COMMAND_MISSING
				? "install it there, or correct the command"
				: "give that user access (the group appliance-upstream, "
				  "or o+x on the directories), or install it where that "
				  "user may run it");
	case PROC_PROBE_CWD_MISSING:
	case PROC_PROBE_CWD:
		return appl_err_set(err, -EACCES,
				    "servers.%s: its cwd %s cannot be entered as %s: %s; %s, or "
				    "change servers.%s.cwd",
				    srv->name, srv->cwd, proc_jail_who(s->jail), why,
				    probe == PROC_PROBE_CWD_MISSING ? "create it"
								    : "give that user access",
				    srv->name);
	case PROC_PROBE_BECOME:
		return appl_err_set(err, -EPERM,
				    "servers.%s: could not become %s to try its command: %s (the "
				    "appliance needs CAP_SETUID and CAP_SETGID)",
				    srv->name, proc_jail_who(s->jail), why);
	default:
		return appl_err_set(err, -EIO, "servers.%s: could not try its command as its user",
				    srv->name);
	}
	if (srv->user && strcmp(srv->user, "root") == 0)
		UP_LOG(s->link.name, LOG_WARN,
		       "runs as root (servers.%s.user), with no capabilities", srv->name);
	UP_LOG(s->link.name, LOG_INFO,
	       "confined: runs as %s, memory %u MiB, %u processes, network %s",
	       proc_jail_who(s->jail), srv->memory_mb, srv->pids,
	       srv->network ? "the host's" : "loopback only");
	return 0;
}

static int st_make(const struct up_link *link, const struct policy_server *srv,
		   const struct upstream_opts *o, void **t, struct appl_err *err)
{
	struct up_stdio *s = calloc(1, sizeof(*s));

	if (!s)
		return appl_err_set(err, -ENOMEM, "out of memory");
	*t = s;
	s->link = *link;
	s->fd_in = s->fd_out = s->fd_err = s->pidfd = -1;
	s->argv = strv_dup(srv->argv, srv->argc);
	s->env_names = strv_dup(srv->env, srv->nenv);
	s->nenv = srv->nenv;
	s->cwd = srv->cwd ? strdup(srv->cwd) : NULL;
	if (!s->argv || !s->env_names || (srv->cwd && !s->cwd))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (o && o->confine)
		return jail_make(s, srv, o, err);
	return 0;
}

const struct upstream_transport upstream_stdio_transport = {
	.kind = "stdio",
	.make = st_make,
	.open = st_open,
	.send = st_send,
	.abandon = st_abandon,
	.close = st_close,
	.drain = st_drain,
	.cap_changed = st_cap_changed,
	.pid = st_pid,
	.destroy = st_destroy,
};
