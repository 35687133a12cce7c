/* certkit.h: a throwaway TLS certificate for the HTTP tests
 * (test_http_front.c, test_http_client.c), made by the openssl command the
 * test machine has (scripts/install-deps). Included after cmocka.h. */
#ifndef APPL_TESTS_CERTKIT_H
#define APPL_TESTS_CERTKIT_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define CERTKIT_UNUSED __attribute__((unused))

/* A new NUL-terminated copy of the file at path (at most 64 KiB). */
static CERTKIT_UNUSED char *slurp(const char *path)
{
	FILE *fp = fopen(path, "re");
	char *buf = calloc(1, 65536);
	size_t n;

	assert_non_null(fp);
	assert_non_null(buf);
	n = fread(buf, 1, 65535, fp);
	buf[n] = '\0';
	fclose(fp);
	return buf;
}

/* A self-signed certificate for localhost (its own CA) and its key, as
 * dir/NAME-cert.pem and dir/NAME-key.pem (paths in cert and key). */
static CERTKIT_UNUSED void make_cert_named(const char *dir, const char *name, char *cert, char *key,
					   size_t cap)
{
	pid_t pid;
	int status;

	snprintf(cert, cap, "%s/%s-cert.pem", dir, name);
	snprintf(key, cap, "%s/%s-key.pem", dir, name);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execlp("openssl", "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
		       "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
		       "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-keyout", key,
		       "-out", cert, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static CERTKIT_UNUSED void make_cert(const char *dir, char *cert, char *key, size_t cap)
{
	make_cert_named(dir, "server", cert, key, cap);
}

#endif
