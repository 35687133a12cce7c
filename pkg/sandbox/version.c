/* version.c: which gVisor release a runsc binary is (see runsc.h). */
#define _GNU_SOURCE
#include "sandbox/runsc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/limits.h"
#include "proc/proc.h"

#define VERSION_PREFIX "runsc version "

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* YYYYMMDD.N at s[0..n) with s[0] a digit not preceded by one. */
static int release_take(const char *s, size_t n, struct sandbox_runsc_version *v)
{
	unsigned long date = 0, patch = 0;
	size_t i;

	for (i = 0; i < 8; i++) {
		if (i >= n || !is_digit(s[i]))
			return -1;
		date = date * 10 + (unsigned long)(s[i] - '0');
	}
	if (i >= n || s[i] != '.' || i + 1 >= n || !is_digit(s[i + 1]))
		return -1;
	for (i++; i < n && is_digit(s[i]); i++) {
		if (patch > 99999)
			return -1;
		patch = patch * 10 + (unsigned long)(s[i] - '0');
	}
	/* Followed by nothing that would make the date part of a longer number. */
	if (date < 20180101 || date > 29991231 || (i < n && is_digit(s[i])))
		return -1;
	v->date = (unsigned)date;
	v->patch = (unsigned)patch;
	return 0;
}

int sandbox_runsc_version_parse(const char *out, size_t len, struct sandbox_runsc_version *v)
{
	size_t plen = strlen(VERSION_PREFIX), n;
	const char *line, *nl;

	memset(v, 0, sizeof(*v));
	if (len < plen || memcmp(out, VERSION_PREFIX, plen) != 0)
		return -EINVAL;
	line = out + plen;
	nl = memchr(line, '\n', len - plen);
	n = nl ? (size_t)(nl - line) : len - plen;
	if (n == 0 || n >= sizeof(v->text))
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < 0x21 || (unsigned char)line[i] > 0x7e)
			return -EINVAL;
	memcpy(v->text, line, n);
	v->text[n] = '\0';
	/* Debian writes 0.0~YYYYMMDD.N, gVisor's own builds release-YYYYMMDD.N. */
	for (size_t i = 0; i + 10 <= n; i++)
		if (is_digit(line[i]) && (i == 0 || !is_digit(line[i - 1])) &&
		    release_take(line + i, n - i, v) == 0)
			return 0;
	return -EINVAL;
}

/* Read what fd (runsc's stdout) gives until its end, the cap or the
 * deadline. */
static int pipe_read(int fd, char *buf, size_t cap, size_t *len)
{
	struct timespec start;
	long waited;

	*len = 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		struct timespec now;
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		ssize_t r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		waited = (now.tv_sec - start.tv_sec) * 1000 +
			 (now.tv_nsec - start.tv_nsec) / 1000000;
		if (waited >= APPL_RUNSC_VERSION_TIMEOUT_MS)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)(APPL_RUNSC_VERSION_TIMEOUT_MS - waited)) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		r = read(fd, buf + *len, cap - *len);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		*len += (size_t)r;
		if (*len == cap)
			return -EFBIG;
	}
}

int sandbox_runsc_version_get(const char *runsc, struct sandbox_runsc_version *v,
			      struct appl_err *err)
{
	static char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
	char *argv[] = {(char *)runsc, "--version", NULL};
	char buf[APPL_RUNSC_VERSION_OUT_MAX];
	struct proc_spec spec = {.path = runsc, .argv = argv, .envp = env, .no_new_privs = true};
	int p[2], pidfd, rc;
	size_t len;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return appl_err_errno(err, -errno, errno, "pipe");
	spec.fds[0] = -1;
	spec.fds[1] = p[1];
	spec.fds[2] = -1;
	rc = proc_spawn(&spec, &pid, &pidfd, err);
	close(p[1]);
	if (rc < 0) {
		close(p[0]);
		return rc;
	}
	rc = pipe_read(p[0], buf, sizeof(buf), &len);
	close(p[0]);
	proc_kill_group(pid); /* it has said all it may say */
	proc_wait(pid);
	close(pidfd);
	if (rc < 0)
		return appl_err_errno(err, rc, -rc, "%s --version", runsc);
	if (sandbox_runsc_version_parse(buf, len, v) < 0)
		return appl_err_set(
			err, -EINVAL,
			"%s --version: no gVisor release (YYYYMMDD.N) in what it printed", runsc);
	return 0;
}

int sandbox_runsc_version_check(const struct sandbox_runsc_version *v, const char *runsc,
				struct appl_err *err)
{
	/* One number, so that a tested patch of 0 draws no always-true warning. */
	unsigned long long have = (unsigned long long)v->date * 1000000u + v->patch;
	unsigned long long want =
		(unsigned long long)APPL_RUNSC_TESTED_DATE * 1000000u + APPL_RUNSC_TESTED_PATCH;

	if (have >= want)
		return 0;
	return appl_err_set(
		err, -EPROTONOSUPPORT,
		"%s is version %s (gVisor %u.%u), older than %u.%u, the oldest this "
		"appliance was tested with: install a newer runsc (scripts/install-deps)",
		runsc, v->text, v->date, v->patch, APPL_RUNSC_TESTED_DATE, APPL_RUNSC_TESTED_PATCH);
}
