/* proc.c: fork and exec with a clean slate (see proc.h). */
#define _GNU_SOURCE
#include "proc/proc.h"

#include "proc/enter.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a child that could not start writes to its report pipe. */
struct proc_report {
	int err;
	long num;	/* a number the step was about (a uid), or -1 */
	char step[64];	/* its words: "changing to its directory" */
	char arg[1024]; /* a path it was about, or "" */
};

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The children proc_spawn started and nobody has reaped yet: everything
 * else that turns into a zombie child of ours is an orphan we adopted. One
 * thread owns the process, so a plain array serves. */
#define PROC_TRACK_MAX 4096
static pid_t tracked[PROC_TRACK_MAX];
static size_t ntracked;

static void track(pid_t pid)
{
	if (ntracked < PROC_TRACK_MAX)
		tracked[ntracked++] = pid;
}

static void untrack(pid_t pid)
{
	for (size_t i = 0; i < ntracked; i++) {
		if (tracked[i] == pid) {
			tracked[i] = tracked[--ntracked];
			return;
		}
	}
}

static int is_tracked(pid_t pid)
{
	for (size_t i = 0; i < ntracked; i++)
		if (tracked[i] == pid)
			return 1;
	return 0;
}

static int sys_pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_close_range(unsigned first, unsigned last)
{
	return (int)syscall(SYS_close_range, first, last, 0);
}

/* The kernel's struct sigaction, for the raw call below. */
struct kernel_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	unsigned long mask;
};

/* Every signal back to its default. glibc's sigaction refuses the two
 * real-time signals it reserves, so the raw system call is used: a parent
 * that ignores them (make does) must not pass that on. */
static void signals_default(void)
{
	struct kernel_sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
}

/* Copy src into dst (cap bytes, ended); only plain stores. */
static void text_put(char *dst, size_t cap, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = src[i];
	dst[i] = '\0';
}

/* Write which step failed and its errno to the report pipe and leave; only
 * async-signal-safe calls. One write of less than PIPE_BUF: whole or not
 * at all. */
static void __attribute__((noreturn)) child_fail_step(int report, const struct proc_fail *f)
{
	struct proc_report r;
	ssize_t n;

	memset(&r, 0, sizeof(r));
	r.err = f->err ? f->err : EIO;
	r.num = f->num;
	text_put(r.step, sizeof(r.step), f->step);
	text_put(r.arg, sizeof(r.arg), f->arg);
	n = write(report, &r, sizeof(r));
	(void)n;
	_exit(127);
}

static void __attribute__((noreturn))
child_fail(int report, const char *step, const char *arg, int e)
{
	struct proc_fail f = {.err = e, .step = step, .arg = arg, .num = -1};

	child_fail_step(report, &f);
}

/* Move the given descriptors to 0, 1, 2. They are first moved above the
 * report pipe and the three targets, so a source that is itself 0, 1 or 2
 * is not overwritten before it is used. */
static int child_fds(const int fds[3], int report)
{
	int high[3];
	int devnull = -1;

	for (int i = 0; i < 3; i++) {
		int src = fds[i];
		if (src < 0) {
			if (devnull < 0)
				devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (devnull < 0)
				return -1;
			src = devnull;
		}
		high[i] = fcntl(src, F_DUPFD_CLOEXEC, report + 3 > 10 ? report + 3 : 10);
		if (high[i] < 0)
			return -1;
	}
	for (int i = 0; i < 3; i++)
		if (dup2(high[i], i) < 0)
			return -1;
	return 0;
}

/* The parent is gone (its pidfd readable), or the parent-death signal
 * could not be asked for: this child must not live on. */
static bool orphaned(int parent_pidfd)
{
	struct pollfd p = {.fd = parent_pidfd, .events = POLLIN};

	return prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || poll(&p, 1, 0) != 0;
}

static void __attribute__((noreturn)) child_exec(const struct proc_spec *spec, int report)
{
	if (spec->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(report, "setting no_new_privs", NULL, errno);
	if (chdir(spec->cwd ? spec->cwd : "/") < 0)
		child_fail(report, "changing to its directory", spec->cwd ? spec->cwd : "/", errno);
	execve(spec->path, spec->argv, spec->envp);
	child_fail(report, "executing", spec->path, errno);
}

/* The name the init of a server's PID namespace runs under: main() sees it
 * in argv[0] and runs engine_init_main. */
#define INIT_NAME "appliance-server-init"

void proc_init_signals(sigset_t *set)
{
	static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

	sigemptyset(set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(set, sigs[i]);
}

/* Pid 1 of a server's own PID namespace (proc_confine.pid_ns), first as
 * the appliance's copy: start the server as its child, then become the
 * init, a fresh image of the appliance's own binary (engine_init_main), so
 * that nothing of the appliance's memory stays in the namespace. It keeps
 * uid 0 with no capability (the bounding set is empty and no_new_privs is
 * on before the exec), so a server of another uid can neither read nor
 * trace it, and SIGKILL from inside the namespace does not reach an init. */
static void __attribute__((noreturn)) child_init(const struct proc_spec *spec, int report)
{
	struct proc_fail f = {.num = -1};
	char server_arg[24], *argv[] = {INIT_NAME, server_arg, NULL}, *envp[] = {NULL};
	sigset_t set, none;
	pid_t server;

	proc_init_signals(&set);
	sigemptyset(&none);
	sigprocmask(SIG_BLOCK, &set, NULL);
	server = fork();
	if (server < 0)
		child_fail(report, "starting it under its init", NULL, errno);
	if (server == 0) {
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (proc_confine_become(spec->confine, &f) < 0)
			child_fail_step(report, &f);
		/* Its parent is this namespace's init, pid 1. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 1)
			child_fail(report, "watching its init", NULL, ESRCH);
		child_exec(spec, report);
	}
	for (int fd = 0; fd < 3; fd++)
		close(fd);
	snprintf(server_arg, sizeof(server_arg), "%ld", (long)server);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(report, "setting no_new_privs on its init", NULL, errno);
	/* The report pipe closes on exec; the server holds its own end. */
	execve("/proc/self/exe", argv, envp);
	child_fail(report, "starting its init", "/proc/self/exe", errno);
}

bool proc_init_wanted(const char *argv0)
{
	return argv0 && strcmp(argv0, INIT_NAME) == 0;
}

static void __attribute__((noreturn))
child_run(const struct proc_spec *spec, int parent_pidfd, int report)
{
	struct proc_fail f = {.num = -1};
	sigset_t none;

	/* Kill us if the appliance dies, and catch the race where it died
	 * before the request was made. */
	if (orphaned(parent_pidfd))
		child_fail(report, "watching the appliance", NULL, ESRCH);
	if (setpgid(0, 0) < 0)
		child_fail(report, "becoming a process group", NULL, errno);
	/* Ignored signals and the mask survive exec: a child must not inherit
	 * the appliance's SIGPIPE ignore or its blocked SIGTERM. */
	signals_default();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (child_fds(spec->fds, report) < 0)
		child_fail(report, "setting up its standard descriptors", NULL, errno);
	/* Nothing but 0, 1, 2 and the report pipe (close-on-exec) stays open. */
	if (sys_close_range(3, (unsigned)report - 1) < 0 && report > 3)
		child_fail(report, "closing the appliance's descriptors", NULL, errno);
	if (sys_close_range((unsigned)report + 1, ~0U) < 0)
		child_fail(report, "closing the appliance's descriptors", NULL, errno);
	if (spec->confine) {
		pid_t parent = getppid();

		if (proc_confine_enter(spec->confine, &f) < 0)
			child_fail_step(report, &f);
		if (spec->confine->pid_ns)
			child_init(spec, report);
		if (proc_confine_become(spec->confine, &f) < 0)
			child_fail_step(report, &f);
		/* A change of user clears the parent-death signal: set it again,
		 * and catch a parent that died meanwhile. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			child_fail(report, "watching the appliance", NULL, ESRCH);
	}
	child_exec(spec, report);
}

/* fork, or, for a server with a PID namespace of its own, a fork into a
 * new one (the child is its pid 1). clone, not clone3: systemd's
 * RestrictNamespaces= answers clone3 with ENOSYS, since a filter cannot read
 * its flags. With no new stack the child runs on a copy of this one, as
 * after fork. */
static pid_t spawn_fork(const struct proc_spec *spec)
{
	if (!spec->confine || !spec->confine->pid_ns)
		return fork();
	return (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_NEWPID | SIGCHLD), 0UL, 0UL, 0UL,
			      0UL);
}

/* "STEP ARG NUM: strerror" into err. */
static int report_err(struct appl_err *err, const struct proc_report *r)
{
	char num[24] = "";

	if (r->num >= 0)
		snprintf(num, sizeof(num), " %ld", r->num);
	return appl_err_errno(err, -r->err, r->err, "%s%s%s%s", r->step, r->arg[0] ? " " : "",
			      r->arg, num);
}

int proc_spawn(const struct proc_spec *spec, pid_t *pid, int *pidfd, struct appl_err *err)
{
	struct proc_report r;
	int report[2], self;
	pid_t child;
	ssize_t n;

	if (!spec->path || spec->path[0] != '/')
		return appl_err_set(err, -EINVAL, "program path must be absolute");
	if ((self = sys_pidfd_open(getpid())) < 0)
		return appl_err_errno(err, -errno, errno, "pidfd_open");
	if (pipe2(report, O_CLOEXEC) < 0) {
		int e = errno;

		close(self);
		return appl_err_errno(err, -e, e, "pipe");
	}
	child = spawn_fork(spec);
	if (child < 0) {
		int e = errno;
		close(report[0]);
		close(report[1]);
		close(self);
		return appl_err_errno(err, -e, e,
				      spec->confine && spec->confine->pid_ns
					      ? "making its PID namespace"
					      : "starting a process");
	}
	if (child == 0) {
		close(report[0]);
		child_run(spec, self, report[1]);
	}
	close(self);
	close(report[1]);
	/* EOF means exec succeeded (the pipe closed on exec); a report means a
	 * step failed, and which. */
	memset(&r, 0, sizeof(r));
	do
		n = read(report[0], &r, sizeof(r));
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n > 0) {
		waitpid(child, NULL, 0);
		if (n != (ssize_t)sizeof(r))
			return appl_err_set(err, -EIO, "starting %s: a short report", spec->path);
		r.step[sizeof(r.step) - 1] = r.arg[sizeof(r.arg) - 1] = '\0';
		return report_err(err, &r);
	}
	*pidfd = sys_pidfd_open(child);
	if (*pidfd < 0) {
		int e = errno;
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return appl_err_errno(err, -e, e, "pidfd_open");
	}
	*pid = child;
	track(child);
	return 0;
}

int proc_kill_group(pid_t pid)
{
	if (pid <= 1)
		return -EINVAL;
	if (kill(-pid, SIGKILL) < 0)
		return -errno;
	return 0;
}

int proc_reap(pid_t pid, int *status)
{
	pid_t r;

	do
		r = waitpid(pid, status, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == pid)
		untrack(pid);
	return r == pid ? 1 : 0;
}

int proc_wait(pid_t pid)
{
	int status;
	pid_t r;

	do
		r = waitpid(pid, &status, 0);
	while (r < 0 && errno == EINTR);
	untrack(pid);
	return r == pid ? status : -1;
}

/* Parent pid and state of /proc/PID/stat; -1 when unreadable. */
static int stat_read(const char *pid, pid_t *ppid, char *state)
{
	char path[64], buf[512], *close_paren;
	FILE *fp;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	fp = fopen(path, "re");
	if (!fp)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* the command name may hold anything, so parse after the last ')' */
	close_paren = strrchr(buf, ')');
	if (!close_paren || sscanf(close_paren + 1, " %c %d", state, ppid) != 2)
		return -1;
	return 0;
}

int proc_reap_orphans(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();
	int reaped = 0;

	while (d && (de = readdir(d))) {
		pid_t ppid, pid;
		char state;

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (stat_read(de->d_name, &ppid, &state) < 0 || ppid != self || state != 'Z')
			continue;
		pid = (pid_t)strtol(de->d_name, NULL, 10);
		if (!is_tracked(pid) && waitpid(pid, NULL, WNOHANG) == pid)
			reaped++;
	}
	if (d)
		closedir(d);
	return reaped;
}

int proc_wait_exit(int pidfd, int timeout_ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r > 0;
}

/* The signals a serving appliance takes through its loop's signalfd. */
static void proc_signals_set(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGCHLD);
}

int proc_process_setup(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	proc_signals_set(&set);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -errno;
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		return -errno;
	return 0;
}

int proc_signals_check(struct appl_err *err)
{
	sigset_t want, cur;

	proc_signals_set(&want);
	if (sigprocmask(SIG_BLOCK, NULL, &cur) < 0)
		return appl_err_errno(err, -errno, errno, "sigprocmask");
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&want, s) == 1 && sigismember(&cur, s) != 1)
			return appl_err_set(err, -EINVAL,
					    "signal %d is not blocked: a serving command blocks "
					    "SIGTERM, SIGINT, SIGHUP and SIGCHLD first "
					    "(proc_process_setup)",
					    s);
	return 0;
}
