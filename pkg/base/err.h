/* err.h: the error object every library function fills.
 *
 * Library code never prints and never exits: it returns 0 on success or a
 * negative errno-style code, and on failure writes a one-line message into the
 * caller's struct appl_err. cmd/ decides what to print.
 */
#ifndef APPL_BASE_ERR_H
#define APPL_BASE_ERR_H

#include <stddef.h>

#include "base/limits.h"

struct appl_err {
	int code;		    /* negative errno-style code, 0 when unset */
	char msg[APPL_ERR_MSG_MAX]; /* NUL-terminated, one line */
};

/* Fill err (may be NULL) with code and a printf-style message; returns code so
 * callers can write `return appl_err_set(err, -EINVAL, "...")`. The message is
 * cut at APPL_ERR_MSG_MAX and control characters are replaced by '?', so a
 * message quoting untrusted text stays one printable line. */
int appl_err_set(struct appl_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like appl_err_set, with strerror(errnum) appended after ": ". */
int appl_err_errno(struct appl_err *err, int code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Prefix the message already in err with "prefix: " (for adding context). */
int appl_err_prefix(struct appl_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Add text to the end of the message already in err (what to do about
 * it, say); cut at APPL_ERR_MSG_MAX. Returns err->code. */
int appl_err_append(struct appl_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

void appl_err_clear(struct appl_err *err);

#endif
