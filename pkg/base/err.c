/* err.c: filling struct appl_err. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Messages may quote untrusted names (a blob digest from a manifest, a tar
 * entry name); keep them on one printable line so a log cannot be forged. */
static void err_sanitize(char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c < 0x20 || c == 0x7f)
			*s = '?';
	}
}

static void err_vset(struct appl_err *err, int code, const char *fmt, va_list ap)
{
	err->code = code;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int appl_err_set(struct appl_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return code;
	va_start(ap, fmt);
	err_vset(err, code, fmt, ap);
	va_end(ap);
	err_sanitize(err->msg);
	return code;
}

int appl_err_errno(struct appl_err *err, int code, int errnum, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!err)
		return code;
	va_start(ap, fmt);
	err_vset(err, code, fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	if (n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
	err_sanitize(err->msg);
	return code;
}

int appl_err_prefix(struct appl_err *err, const char *fmt, ...)
{
	char prefix[APPL_ERR_MSG_MAX];
	char old[APPL_ERR_MSG_MAX];
	va_list ap;

	if (!err)
		return 0;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';
	/* Truncation is wanted here: the message has a fixed cap. */
	size_t n = strnlen(prefix, sizeof(err->msg) - 1);
	memcpy(err->msg, prefix, n);
	if (n + 2 < sizeof(err->msg)) {
		memcpy(err->msg + n, ": ", 2);
		n += 2;
		size_t m = strnlen(old, sizeof(err->msg) - 1 - n);
		memcpy(err->msg + n, old, m);
		n += m;
	}
	err->msg[n] = '\0';
	err_sanitize(err->msg);
	return err->code;
}

void appl_err_clear(struct appl_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}
