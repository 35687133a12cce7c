/* log.c: the log sink (see log.h). */
#include "log/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/limits.h"
#include "base/utf8.h"

static int sink_fd = 2;
static enum log_level sink_min = LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_setup(int fd, enum log_level min)
{
	sink_fd = fd;
	sink_min = min;
}

bool log_enabled(enum log_level lvl)
{
	return sink_fd >= 0 && lvl <= sink_min;
}

static void sink_write(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(sink_fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static size_t stamp(char *out, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	if (n == 0)
		return 0;
	int k = snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
	return k < 0 ? n : n + (size_t)k;
}

void log_line(enum log_level lvl, const char *run, const char *fmt, ...)
{
	static const char cut_mark[] = " [cut]";
	char line[APPL_LOG_LINE_MAX];
	size_t n, body;
	va_list ap;
	int k;

	if (!log_enabled(lvl))
		return;
	n = stamp(line, sizeof(line));
	k = snprintf(line + n, sizeof(line) - n, " appliance[%ld] %s %s%s%s", (long)getpid(),
		     level_names[lvl], run ? "run=" : "", run ? run : "", run ? ": " : "");
	n += k < 0 ? 0 : (size_t)k;
	if (n > sizeof(line) - 1)
		n = sizeof(line) - 1;
	body = n;
	va_start(ap, fmt);
	k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (k < 0)
		k = 0;
	if ((size_t)k >= sizeof(line) - n) {
		/* Cut at a character, then mark it. */
		n = sizeof(line) - sizeof(cut_mark) - 1;
		n = body + appl_utf8_boundary(line + body, n - body);
		memcpy(line + n, cut_mark, sizeof(cut_mark) - 1);
		n += sizeof(cut_mark) - 1;
	} else {
		n += (size_t)k;
	}
	for (size_t i = body; i < n; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[n++] = '\n';
	sink_write(line, n);
}

/* ---- escaping ------------------------------------------------------------- */

/* The character s[0..n) (one UTF-8 sequence, or n == 0 for a bad byte):
 * could a terminal or a reader take it for something else? Controls could
 * move the cursor or forge a line, bidirectional controls reorder what is
 * shown, and the backslash is escaped so that an escape in the log is
 * always ours. */
static bool needs_escape(const unsigned char *s, size_t n)
{
	if (n == 0 || s[0] < 0x20 || s[0] == 0x7f || s[0] == '\\')
		return true;
	if (n == 2)
		return (s[0] == 0xC2 && s[1] < 0xA0) || (s[0] == 0xD8 && s[1] == 0x9C);
	if (n == 3 && s[0] == 0xE2 && s[1] == 0x80)
		return s[2] == 0x8E || s[2] == 0x8F || (s[2] >= 0xA8 && s[2] <= 0xAE);
	if (n == 3 && s[0] == 0xE2 && s[1] == 0x81)
		return s[2] >= 0xA6 && s[2] <= 0xA9;
	return false;
}

size_t log_escape(const char *in, size_t len, char *out, size_t cap, bool *cut)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0, i = 0;

	if (cut)
		*cut = false;
	if (cap == 0)
		return 0;
	while (i < len) {
		size_t n = appl_utf8_decode(s + i, len - i, NULL);
		bool esc = needs_escape(s + i, n);
		size_t take = n ? n : 1;
		size_t need = esc ? 4 * take : take;

		if (need > cap - 1 - o) {
			if (cut)
				*cut = true;
			break;
		}
		for (size_t k = 0; esc && k < take; k++) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[s[i + k] >> 4];
			out[o++] = hex[s[i + k] & 0xF];
		}
		if (!esc) {
			memcpy(out + o, s + i, take);
			o += take;
		}
		i += take;
	}
	out[o] = '\0';
	return o;
}

bool log_rate_allow(struct log_rate *r, uint64_t now_ms, unsigned *dropped)
{
	if (dropped)
		*dropped = 0;
	if (now_ms - r->window_start_ms >= LOG_RATE_WINDOW_MS || r->window_start_ms == 0) {
		if (dropped)
			*dropped = r->dropped;
		r->window_start_ms = now_ms ? now_ms : 1;
		r->used = 0;
		r->dropped = 0;
	}
	if (r->used >= LOG_RATE_BURST) {
		r->dropped++;
		return false;
	}
	r->used++;
	return true;
}
