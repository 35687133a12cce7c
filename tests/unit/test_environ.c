/* test_environ.c: taking a secret out of the environment (pkg/engine/
 * process.c): the value handed over in guarded memory, the variable gone,
 * its bytes zeroed where it was, so /proc/PID/environ (the block the
 * process started with) no longer shows it; a variable that is not set is
 * -ENOENT. The /proc check runs in a child started with the variable in
 * its first environment (this program again, `--take-and-look`). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "engine/process.h"

#define SECRET_NAME  "APPL_TEST_SECRET"
#define SECRET_VALUE "hunter2-correct-horse"

static void test_take_hands_over_and_wipes(void **state)
{
	char *value = NULL, *was;
	size_t len = 0, n = strlen(SECRET_VALUE);
	(void)state;

	assert_int_equal(setenv(SECRET_NAME, SECRET_VALUE, 1), 0);
	was = getenv(SECRET_NAME);
	assert_non_null(was);
	assert_int_equal(engine_env_take(SECRET_NAME, &value, &len), 0);
	assert_non_null(value);
	assert_int_equal(len, n);
	assert_string_equal(value, SECRET_VALUE);
	assert_null(getenv(SECRET_NAME));
	/* where the value stood, nothing of it is left */
	for (size_t i = 0; i < n; i++)
		assert_int_equal(was[i], 0);
	sodium_free(value);
}

static void test_take_of_an_unset_variable(void **state)
{
	char *value = (char *)"untouched";
	size_t len = 7;
	(void)state;

	unsetenv(SECRET_NAME);
	assert_int_equal(engine_env_take(SECRET_NAME, &value, &len), -ENOENT);
	assert_null(value);
	assert_int_equal(len, 0);
}

/* The child: take the variable, then read its own /proc/self/environ. */
static int take_and_look(void)
{
	char buf[64 * 1024], *value = NULL;
	size_t len, got = 0;
	ssize_t r;
	int fd;

	if (engine_env_take(SECRET_NAME, &value, &len) != 0 || strcmp(value, SECRET_VALUE) != 0)
		return 2;
	if ((fd = open("/proc/self/environ", O_RDONLY | O_CLOEXEC)) < 0)
		return 3;
	while (got < sizeof(buf) && (r = read(fd, buf + got, sizeof(buf) - got)) > 0)
		got += (size_t)r;
	close(fd);
	sodium_free(value);
	return memmem(buf, got, SECRET_VALUE, strlen(SECRET_VALUE)) ? 1 : 0;
}

static void test_proc_environ_no_longer_shows_it(void **state)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int status;
	pid_t pid;
	(void)state;

	assert_true(n > 0);
	self[n] = '\0';
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *const argv[] = {self, (char *)"--take-and-look", NULL};
		char *const envp[] = {(char *)"PATH=/usr/bin", (char *)SECRET_NAME "=" SECRET_VALUE,
				      NULL};

		execve(self, argv, envp);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_take_hands_over_and_wipes),
		cmocka_unit_test(test_take_of_an_unset_variable),
		cmocka_unit_test(test_proc_environ_no_longer_shows_it),
	};

	if (sodium_init() < 0)
		return 1;
	if (argc == 2 && strcmp(argv[1], "--take-and-look") == 0)
		return take_and_look();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
