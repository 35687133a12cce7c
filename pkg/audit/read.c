/* read.c: an audit log's lines, capped (see read.h). */
#define _GNU_SOURCE
#include "audit/read.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log/log.h"

int audit_reader_init(struct audit_reader *r, int fd, uint64_t limit)
{
	r->fd = fd;
	r->left = limit;
	r->off = r->lineno = 0;
	r->pos = r->len = r->line_len = 0;
	r->eof = r->nl = false;
	return lseek(fd, 0, SEEK_SET) < 0 ? -errno : 0;
}

/* 1 when buf holds bytes, 0 at the end, or -errno. */
static int reader_fill(struct audit_reader *r)
{
	size_t want = sizeof(r->buf);
	ssize_t got;

	if (r->pos < r->len)
		return 1;
	if (r->eof)
		return 0;
	if (r->left < want)
		want = (size_t)r->left;
	do
		got = want ? read(r->fd, r->buf, want) : 0;
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return -errno;
	if (got == 0) {
		r->eof = true;
		return 0;
	}
	r->pos = 0;
	r->len = (size_t)got;
	r->left -= (uint64_t)got;
	return 1;
}

int audit_reader_next(struct audit_reader *r)
{
	int rc;

	r->line_len = 0;
	r->nl = false;
	while ((rc = reader_fill(r)) > 0) {
		const char *p = r->buf + r->pos, *nl = memchr(p, '\n', r->len - r->pos);
		size_t take = nl ? (size_t)(nl - p) : r->len - r->pos;

		/* Nothing past the cap is kept: a line that long is no
		 * writer's, and is reported as such. */
		if (take > sizeof(r->line) - r->line_len) {
			r->lineno++;
			return AUDIT_LINE_LONG;
		}
		memcpy(r->line + r->line_len, p, take);
		r->line_len += take;
		r->pos += take + (nl != NULL);
		r->off += take + (nl != NULL);
		if (nl) {
			r->nl = true;
			r->lineno++;
			return AUDIT_LINE_OK;
		}
	}
	if (rc < 0)
		return rc;
	if (r->line_len == 0)
		return AUDIT_LINE_EOF;
	r->lineno++;
	return AUDIT_LINE_OK;
}

int audit_reader_skip(struct audit_reader *r)
{
	int rc;

	while ((rc = reader_fill(r)) > 0) {
		const char *p = r->buf + r->pos, *nl = memchr(p, '\n', r->len - r->pos);
		size_t take = nl ? (size_t)(nl - p) + 1 : r->len - r->pos;

		r->pos += take;
		r->off += take;
		if (nl)
			return 0;
	}
	return rc;
}

bool audit_time_valid(const char *s)
{
	static const char form[] = "dddd-dd-ddTdd:dd:dd.dddZ";

	_Static_assert(sizeof(form) == AUDIT_TIME_LEN + 1, "the form is a time's length");
	if (!s || strlen(s) != AUDIT_TIME_LEN)
		return false;
	for (size_t i = 0; i < AUDIT_TIME_LEN; i++)
		if (form[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != form[i])
			return false;
	return true;
}

int audit_time_ms(const char *s, int64_t *ms)
{
	struct tm tm = {0};
	unsigned y, mo, d, h, mi, sec, milli;
	time_t t;

	if (!audit_time_valid(s) ||
	    sscanf(s, "%4u-%2u-%2uT%2u:%2u:%2u.%3u", &y, &mo, &d, &h, &mi, &sec, &milli) != 7 ||
	    mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -EINVAL;
	tm.tm_year = (int)y - 1900;
	tm.tm_mon = (int)mo - 1;
	tm.tm_mday = (int)d;
	tm.tm_hour = (int)h;
	tm.tm_min = (int)mi;
	tm.tm_sec = (int)sec;
	t = timegm(&tm);
	*ms = (int64_t)t * 1000 + (int64_t)milli;
	return 0;
}

const char *audit_escape(const char *s, char out[AUDIT_SHOWN_MAX])
{
	bool cut;
	size_t n = log_escape(s, strlen(s), out, AUDIT_SHOWN_MAX - 3, &cut);

	if (cut)
		memcpy(out + n, "...", 4);
	return out;
}
