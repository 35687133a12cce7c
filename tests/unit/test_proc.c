/* test_proc.c: children start clean: environment, descriptors, signals,
 * process group, no_new_privs; failed execs are reported. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "proc/proc.h"

static char *const clean_env[] = {"PATH=/usr/bin:/bin", "ONLY=this", NULL};

/* Run argv with stdout to a pipe; return what it printed (static buffer). */
static const char *run_capture(char *const argv[], int *status)
{
	static char out[65536];
	struct appl_err err = {0};
	struct proc_spec spec = {.path = argv[0],
				 .argv = argv,
				 .envp = clean_env,
				 .fds = {-1, -1, -1},
				 .no_new_privs = true};
	int p[2], pidfd;
	pid_t pid;
	size_t have = 0;
	ssize_t n;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	spec.fds[1] = p[1];
	if (proc_spawn(&spec, &pid, &pidfd, &err) < 0)
		fail_msg("spawn: %s", err.msg);
	close(p[1]);
	while ((n = read(p[0], out + have, sizeof(out) - 1 - have)) > 0)
		have += (size_t)n;
	out[have] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, status, 0), pid);
	close(pidfd);
	return out;
}

static void test_env_is_exactly_the_given_one(void **state)
{
	char *const argv[] = {"/usr/bin/env", NULL};
	int status;
	(void)state;
	setenv("APPLIANCE_TEST_SECRET", "hunter2", 1);
	const char *out = run_capture(argv, &status);
	assert_string_equal(out, "PATH=/usr/bin:/bin\nONLY=this\n");
	assert_null(strstr(out, "hunter2"));
}

static void test_no_descriptor_leaks(void **state)
{
	char *const argv[] = {"/bin/ls", "/proc/self/fd", NULL};
	int status;
	(void)state;
	/* a descriptor opened without O_CLOEXEC must not reach the child */
	int leaky = open("/dev/null", O_RDONLY);
	assert_true(leaky > 2);
	const char *out = run_capture(argv, &status);
	close(leaky);
	/* 0, 1, 2 and the one ls opens to read the directory */
	assert_string_equal(out, "0\n1\n2\n3\n");
}

static void test_signals_mask_nnp_and_group(void **state)
{
	char *const argv[] = {"/bin/grep", "-E", "^(SigIgn|SigBlk|NoNewPrivs)", "/proc/self/status",
			      NULL};
	int status;
	sigset_t block, old;
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	const char *out = run_capture(argv, &status);
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (!strstr(out, "SigIgn:\t0000000000000000") ||
	    !strstr(out, "SigBlk:\t0000000000000000") || !strstr(out, "NoNewPrivs:\t1"))
		fail_msg("child status:\n%s", out);
}

static void test_own_group_killed_whole(void **state)
{
	char *const argv[] = {"/bin/sh", "-c", "sleep 300 & echo $!; wait", NULL};
	struct appl_err err = {0};
	struct proc_spec spec = {
		.path = argv[0], .argv = argv, .envp = clean_env, .fds = {-1, -1, -1}};
	int p[2], pidfd, status;
	pid_t pid, grandchild;
	char buf[32] = {0};
	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	spec.fds[1] = p[1];
	assert_int_equal(proc_spawn(&spec, &pid, &pidfd, &err), 0);
	close(p[1]);
	assert_true(read(p[0], buf, sizeof(buf) - 1) > 0);
	close(p[0]);
	grandchild = (pid_t)strtol(buf, NULL, 10);
	assert_true(grandchild > 1);
	assert_int_equal(getpgid(pid), pid);
	assert_int_equal(getpgid(grandchild), pid);
	assert_int_equal(proc_kill_group(pid), 0);
	assert_int_equal(proc_wait_exit(pidfd, 5000), 1);
	assert_int_equal(proc_reap(pid, &status), 1);
	assert_true(WIFSIGNALED(status));
	/* the grandchild went with it (it is reparented and reaped by init) */
	for (int i = 0; i < 100 && kill(grandchild, 0) == 0; i++)
		usleep(10000);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", grandchild);
	FILE *fp = fopen(path, "r");
	if (fp) {
		char st[256] = {0};
		assert_non_null(fgets(st, sizeof(st), fp));
		fclose(fp);
		/* only a zombie awaiting its new parent may remain */
		assert_non_null(strstr(st, ") Z "));
	}
	close(pidfd);
}

static void test_failed_exec_reported(void **state)
{
	char *const argv[] = {"/nonexistent/program", NULL};
	struct appl_err err = {0};
	struct proc_spec spec = {
		.path = argv[0], .argv = argv, .envp = clean_env, .fds = {-1, -1, -1}};
	pid_t pid;
	int pidfd;
	(void)state;
	assert_int_equal(proc_spawn(&spec, &pid, &pidfd, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/nonexistent/program"));
	spec.path = "relative";
	assert_int_equal(proc_spawn(&spec, &pid, &pidfd, &err), -EINVAL);
}

static void test_orphans_reaped_tracked_children_kept(void **state)
{
	char *const argv[] = {"/bin/true", NULL};
	struct appl_err err = {0};
	struct proc_spec spec = {
		.path = argv[0], .argv = argv, .envp = clean_env, .fds = {-1, -1, -1}};
	pid_t mine, stray;
	int pidfd, status;
	(void)state;
	/* a child we did not start through proc_spawn stands for an adopted
	 * orphan; both exit and become zombies */
	stray = fork();
	if (stray == 0)
		_exit(0);
	assert_int_equal(proc_spawn(&spec, &mine, &pidfd, &err), 0);
	assert_int_equal(proc_wait_exit(pidfd, 5000), 1);
	for (int i = 0; i < 100 && kill(stray, 0) == 0; i++) {
		if (proc_reap_orphans() == 1)
			break;
		usleep(10000);
	}
	/* the stray one is gone; ours is still ours to reap */
	assert_int_equal(waitpid(stray, &status, WNOHANG), -1);
	assert_int_equal(proc_reap(mine, &status), 1);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(pidfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_is_exactly_the_given_one),
		cmocka_unit_test(test_no_descriptor_leaks),
		cmocka_unit_test(test_signals_mask_nnp_and_group),
		cmocka_unit_test(test_own_group_killed_whole),
		cmocka_unit_test(test_failed_exec_reported),
		cmocka_unit_test(test_orphans_reaped_tracked_children_kept),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
