/* proc.h: starting child processes the one safe way.
 *
 * Every child of the appliance (runsc, upstream MCP servers) is started with
 * an explicit environment (never the appliance's own, which may hold
 * credentials), only the three descriptors it is given (everything else is
 * closed with close_range before exec), default signal dispositions and an
 * empty signal mask, no_new_privs, a parent-death signal, and its own
 * process group so that it and everything it starts can be killed together.
 */
#ifndef APPL_PROC_PROC_H
#define APPL_PROC_PROC_H

#include <signal.h>
#include <stdbool.h>
#include <sys/types.h>

#include "base/err.h"

struct proc_confine;

struct proc_spec {
	const char *path;  /* absolute path of the program; borrowed */
	char *const *argv; /* NULL-terminated; borrowed */
	char *const *envp; /* NULL-terminated, explicit; borrowed */
	int fds[3];	   /* become the child's 0, 1, 2; -1 means /dev/null */
	const char *cwd;   /* NULL means "/" */
	bool no_new_privs; /* PR_SET_NO_NEW_PRIVS before exec */
	/* Confinement applied before exec (enter.h), or NULL; borrowed. */
	const struct proc_confine *confine;
};

/* Start spec. On success *pid is the child (its own process group leader)
 * and *pidfd a pidfd for it (O_CLOEXEC; the caller closes it), and the
 * program has been exec'ed: a failed exec is reported here, with errno, not
 * as a child that exits 127. The caller's fds in spec are not closed. */
int proc_spawn(const struct proc_spec *spec, pid_t *pid, int *pidfd, struct appl_err *err);

/* SIGKILL the child's whole process group (the child and what it started
 * without leaving the group). Returns 0 or -errno (-ESRCH when gone). */
int proc_kill_group(pid_t pid);

/* Reap pid if it has exited (WNOHANG); 1 when reaped (*status filled), 0 when
 * still running, -errno on error. */
int proc_reap(pid_t pid, int *status);

/* Reap pid (blocking) and forget it; returns its status, or -1. */
int proc_wait(pid_t pid);

/* The appliance is a child subreaper (sandbox processes that runsc leaves
 * orphaned become its children). Reap every zombie child that proc_spawn
 * did not start itself: runsc waits for its sandbox process to vanish,
 * which it cannot while it is our unreaped zombie. Returns how many. */
int proc_reap_orphans(void);

/* The process-wide setup of a serving command (cmd/appliance, first
 * thing): block the stop signals and SIGCHLD (so they wait for the loop, and
 * one that comes while servers and sandboxes start cannot kill the
 * appliance before it cleans up), ignore SIGPIPE (a closed pipe comes back
 * as EPIPE), and become a child subreaper (orphaned sandbox processes are
 * ours to reap, not init's). Children get a clean signal state anyway
 * (proc_spawn). Returns 0 or -errno. */
int proc_process_setup(void);

/* 0 when proc_process_setup's signals are blocked in this thread, else
 * -EINVAL with err saying so: library code that relies on its signalfd
 * checks rather than changes the process's state. */
int proc_signals_check(struct appl_err *err);

/* Wait up to timeout_ms for pidfd to become readable (the child exited).
 * Returns 1 when it did, 0 on timeout, -errno on error. */
int proc_wait_exit(int pidfd, int timeout_ms);

/* The init of a server's PID namespace (proc_confine.pid_ns) is the
 * appliance's own binary started again as "appliance-server-init SERVER":
 * main() asks proc_init_wanted(argv[0]) first thing and then runs
 * engine_init_main (engine/process.h). proc_init_signals fills set with
 * the signals it waits for: SIGCHLD, and those it passes on to the server
 * (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2). */
bool proc_init_wanted(const char *argv0);
void proc_init_signals(sigset_t *set);

#endif
