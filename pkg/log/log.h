/* log.h: the one log sink.
 *
 * Every module logs through here, never by printing: one line per event,
 *
 *     2026-12-01T12:26:16.123Z appliance[4242] warn run=3f2a9c1e07b4: text
 *
 * with a UTC timestamp to the millisecond, the process, a level, and the
 * run id when the event belongs to one run_python call (so one grep follows
 * one run: its sandbox, its tool calls, its end). cmd/appliance decides
 * where lines go and from which level on (log_setup); by default they go
 * to stderr, which in stdio mode is never the protocol stream.
 *
 * Text from a hostile source (a server's stderr, a cell's error, a
 * client's method name) reaches a line only as an argument, escaped with
 * log_escape first, and a source that could flood the log is held to a
 * rate (log_rate_allow). The format string is always a constant.
 */
#ifndef APPL_LOG_LOG_H
#define APPL_LOG_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_ERR,
	LOG_WARN,
	LOG_INFO,
	LOG_DEBUG,
};

/* Lines go to fd (borrowed; -1: nowhere), those at level min or more
 * severe. Process-wide; cmd/appliance calls it once, first. */
void log_setup(int fd, enum log_level min);

/* Whether a line at lvl would be written (to skip costly formatting). */
bool log_enabled(enum log_level lvl);

/* One line; run may be NULL. Cut at APPL_LOG_LINE_MAX (a cut line ends in
 * "[cut]"); a newline in the result becomes a space, so one call is one
 * line whatever the arguments hold. Never fails, never blocks for long:
 * a sink that cannot take the line loses it. */
void log_line(enum log_level lvl, const char *run, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Escape in[0..len) (any bytes) for a log line: C0 controls, DEL, C1
 * controls (U+0080..U+009F), the Unicode bidirectional controls (which can
 * make a line read as another) and line separators, the backslash and every byte that is not
 * part of valid UTF-8 become \xNN (per byte, lower-case hex); other UTF-8
 * passes. Writes at most cap - 1 bytes and a NUL to out (cap > 0), never
 * cutting an escape or a character in two. Returns the bytes written; *cut
 * (may be NULL) says whether input was left out. Pure. */
size_t log_escape(const char *in, size_t len, char *out, size_t cap, bool *cut);

/* A budget for one hostile source: at most burst lines per window. */
struct log_rate {
	uint64_t window_start_ms;
	unsigned used;
	unsigned dropped; /* lines refused in the window that ended */
};

#define LOG_RATE_BURST	   50u
#define LOG_RATE_WINDOW_MS 10000u

/* Whether the source may log one more line now. When a new window begins
 * after lines were dropped, *dropped (may be NULL) receives how many, for
 * the caller to say so, and is otherwise 0. */
bool log_rate_allow(struct log_rate *r, uint64_t now_ms, unsigned *dropped);

#endif
