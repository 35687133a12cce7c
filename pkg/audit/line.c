/* line.c: the audit log's lines as the writer makes them: the five
 * members every line has, then the event's own, each line hashed into the
 * chain as it is put in a batch's buffer. */
#define _GNU_SOURCE
#include "audit/writer_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/metrics.h"

int64_t audit_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int audit_buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap)))
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* The members of body after the five every line has. */
char *audit_rest_make(const json_t *body)
{
	char *s, *r;
	size_t n;

	if (!body || json_object_size(body) == 0)
		return strdup("}");
	s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!s)
		return NULL;
	n = strlen(s);
	if (n > AUDIT_BODY_MAX) { /* callers cap what they give; this is the backstop */
		free(s);
		if (asprintf(&r, ",\"oversize\":%zu}", n) < 0)
			return NULL;
		return r;
	}
	s[0] = ',';
	return s;
}

/* Append one line for ev to b, chained after h, and move h on. */
int audit_line_put(struct audit *a, struct buf *b, struct audit_head *h, const char *ev, int64_t ms,
		   const char *rest)
{
	char t[AUDIT_TIME_LEN + 1], head[256];
	size_t start = b->len;
	int n;

	audit_time(ms, t);
	n = snprintf(head, sizeof(head),
		     "{\"n\":%" PRIu64 ",\"prev\":\"%s\",\"t\":\"%s\",\"ev\":\"%s\",\"pid\":%ld",
		     h->n + 1, h->hash, t, ev, (long)a->pid);
	if (audit_buf_add(b, head, (size_t)n) < 0 || audit_buf_add(b, rest, strlen(rest)) < 0)
		return -ENOMEM;
	audit_line_hash(b->p + start, b->len - start, h->hash);
	h->n++;
	h->bytes += b->len - start + 1;
	return audit_buf_add(b, "\n", 1);
}

int audit_line_put_json(struct audit *a, struct buf *b, struct audit_head *h, const char *ev,
			int64_t ms, json_t *body)
{
	char *rest = audit_rest_make(body);
	int rc = rest ? audit_line_put(a, b, h, ev, ms, rest) : -ENOMEM;

	free(rest);
	json_decref(body);
	return rc;
}

/* Record why writing failed (for audit_why) and fill err too. */
int audit_fail(struct audit *a, int rc, struct appl_err *err, const char *fmt, ...)
{
	va_list ap;

	metrics_count(METRICS_AUDIT_FAILURES, NULL);
	va_start(ap, fmt);
	vsnprintf(a->why, sizeof(a->why), fmt, ap);
	va_end(ap);
	if (err)
		appl_err_set(err, rc, "%s", a->why);
	return rc;
}
