/* proc.c: fork and exec with a clean slate (see proc.h). */
#define _GNU_SOURCE
#include "proc/proc.h"

#include "proc/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* Write errno to the report pipe and leave; only async-signal-safe calls. */
static void __attribute__((noreturn)) child_fail(int report, int e)
{
	ssize_t n = write(report, &e, sizeof(e));
	(void)n;
	_exit(127);
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

static void __attribute__((noreturn))
child_run(const struct proc_spec *spec, pid_t parent, int report)
{
	sigset_t none;

	/* Kill us if the appliance dies, and catch the race where it died
	 * before the request was made. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		child_fail(report, ESRCH);
	if (setpgid(0, 0) < 0)
		child_fail(report, errno);
	/* Ignored signals and the mask survive exec: a child must not inherit
	 * the appliance's SIGPIPE ignore or its blocked SIGTERM. */
	signals_default();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (child_fds(spec->fds, report) < 0)
		child_fail(report, errno);
	/* Nothing but 0, 1, 2 and the report pipe (close-on-exec) stays open. */
	if (sys_close_range(3, (unsigned)report - 1) < 0 && report > 3)
		child_fail(report, errno);
	if (sys_close_range((unsigned)report + 1, ~0U) < 0)
		child_fail(report, errno);
	if (spec->confine) {
		int rc = proc_confine_child(spec->confine);

		if (rc < 0)
			child_fail(report, -rc);
		/* A change of user clears the parent-death signal: set it again,
		 * and catch a parent that died meanwhile. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			child_fail(report, ESRCH);
	}
	if (spec->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(report, errno);
	if (chdir(spec->cwd ? spec->cwd : "/") < 0)
		child_fail(report, errno);
	execve(spec->path, spec->argv, spec->envp);
	child_fail(report, errno);
}

int proc_spawn(const struct proc_spec *spec, pid_t *pid, int *pidfd, struct appl_err *err)
{
	int report[2], child_errno = 0;
	pid_t parent = getpid(), child;
	ssize_t n;

	if (!spec->path || spec->path[0] != '/')
		return appl_err_set(err, -EINVAL, "program path must be absolute");
	if (pipe2(report, O_CLOEXEC) < 0)
		return appl_err_errno(err, -errno, errno, "pipe");
	child = fork();
	if (child < 0) {
		int e = errno;
		close(report[0]);
		close(report[1]);
		return appl_err_errno(err, -e, e, "fork");
	}
	if (child == 0) {
		close(report[0]);
		child_run(spec, parent, report[1]);
	}
	close(report[1]);
	/* EOF means exec succeeded (the pipe closed on exec); an int means it
	 * failed with that errno. */
	do
		n = read(report[0], &child_errno, sizeof(child_errno));
	while (n < 0 && errno == EINTR);
	close(report[0]);
	if (n > 0) {
		waitpid(child, NULL, 0);
		return appl_err_errno(err, -child_errno, child_errno, "starting %s", spec->path);
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
