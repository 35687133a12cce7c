/* report.c: the report's text, handed to the caller's print hook
 * (internal.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"
#include "check/text.h"

static void report_vprint(struct check *c, const char *prefix, const char *fmt, va_list ap,
			  const char *suffix) __attribute__((format(printf, 3, 0)));

static void report_vprint(struct check *c, const char *prefix, const char *fmt, va_list ap,
			  const char *suffix)
{
	char *body = NULL, *text = NULL;

	if (vasprintf(&body, fmt, ap) < 0)
		return;
	if (asprintf(&text, "%s%s%s", prefix, body, suffix) >= 0)
		c->o->hooks.print(c->o->hooks.data, text);
	free(text);
	free(body);
}

void check_report_say(struct check *c, enum check_mark m, const char *fmt, ...)
{
	static const char *const words[] = {"ok      ", "problem ", "warning "};
	va_list ap;

	if (m == CHECK_MARK_PROBLEM)
		c->n.problems++;
	if (m == CHECK_MARK_WARNING)
		c->n.warnings++;
	va_start(ap, fmt);
	report_vprint(c, words[m], fmt, ap, "\n");
	va_end(ap);
}

void check_report_print(struct check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	report_vprint(c, "", fmt, ap, "");
	va_end(ap);
}

const char *check_report_shown(const char *s, char *out, size_t cap)
{
	check_text_show(s ? s : "", s ? strlen(s) : 0, out, cap);
	return out;
}
