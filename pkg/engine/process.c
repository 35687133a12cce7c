/* process.c: the process-wide state of the appliance (see process.h). */
#include "engine/process.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "base/err.h"
#include "cgroup/cgroup.h"
#include "proc/proc.h"

int engine_process_setup(bool serves, char *why, size_t cap)
{
	int rc;

	/* A closed pipe must come back as EPIPE, not kill us mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() < 0) {
		snprintf(why, cap, "libsodium failed to initialise");
		return -1;
	}
	if (!serves)
		return 0;
	/* Stop signals and SIGCHLD wait for the event loop's signalfd from
	 * this moment; orphaned sandbox processes become ours to reap. */
	if ((rc = proc_process_setup()) < 0) {
		snprintf(why, cap, "process setup: %s", strerror(-rc));
		return -1;
	}
	return 0;
}

int engine_cgroups_settle(struct appl_err *err)
{
	if (!cg_ours(cg_host(), geteuid()))
		return 0;
	return cg_settle(cg_host(), getpid(), err);
}

int engine_env_take(const char *name, char **value, size_t *len)
{
	char *v = getenv(name), *copy;
	size_t n;

	*value = NULL;
	*len = 0;
	if (!v)
		return -ENOENT;
	n = strlen(v);
	if (!(copy = sodium_malloc(n + 1)))
		return -ENOMEM;
	memcpy(copy, v, n + 1);
	/* Gone from the environment block too, bytes and all: unsetenv only
	 * drops the pointer, and /proc/PID/environ reads the block the
	 * process started with. */
	sodium_memzero(v, n);
	unsetenv(name);
	*value = copy;
	*len = n;
	return 0;
}

int engine_env_set(const char *name, const char *value)
{
	return setenv(name, value, 1) < 0 ? -errno : 0;
}

void engine_env_unset(const char *name)
{
	unsetenv(name);
}

void engine_reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

int engine_init_main(int argc, char **argv)
{
	pid_t server = argc == 2 ? (pid_t)strtol(argv[1], NULL, 10) : 0;
	sigset_t set;
	int status;

	if (getpid() != 1 || server <= 1) {
		fputs("appliance-server-init: the appliance starts this itself, as pid 1 of a "
		      "server's PID namespace\n",
		      stderr);
		return 2;
	}
	proc_init_signals(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		siginfo_t si;
		pid_t got;
		int sig = sigwaitinfo(&set, &si);

		if (sig > 0 && sig != SIGCHLD) {
			kill(server, sig);
			continue;
		}
		/* As pid 1 of the namespace it reaps every orphan in it, not
		 * only the server. */
		while ((got = waitpid(-1, &status, WNOHANG)) > 0)
			if (got == server)
				return WIFEXITED(status) ? WEXITSTATUS(status)
							 : 128 + WTERMSIG(status);
	}
}
