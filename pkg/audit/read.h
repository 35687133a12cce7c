/* read.h: reading an audit log's lines, for the checker (verify_*.c) and
 * the printer (show.c): a line reader with a cap, and the form of a
 * line's time.
 *
 * The log is untrusted: a line is at most AUDIT_LINE_MAX bytes before its
 * newline, and a longer one is reported, never buffered; a file is read
 * no further than a limit (the size seen under the log's lock), so bytes
 * a writer appends meanwhile are not half-read.
 */
#ifndef APPL_AUDIT_READ_H
#define APPL_AUDIT_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "audit/format.h"

#define AUDIT_READ_CHUNK 65536

enum audit_line { AUDIT_LINE_EOF, AUDIT_LINE_OK, AUDIT_LINE_LONG };

struct audit_reader {
	int fd;		 /* borrowed */
	uint64_t left;	 /* bytes still to read */
	uint64_t off;	 /* the offset after the last line returned */
	uint64_t lineno; /* the physical number of the last line returned */
	size_t pos, len;
	bool eof;
	bool nl;	 /* the last line ended in a newline */
	size_t line_len; /* the last line, without its newline */
	char line[AUDIT_LINE_MAX];
	char buf[AUDIT_READ_CHUNK];
};

/* Read fd (borrowed, a regular file) from its start, at most limit
 * bytes. 0 or -errno. */
int audit_reader_init(struct audit_reader *r, int fd, uint64_t limit);

/* The next line into r->line: AUDIT_LINE_OK (r->nl false for a last line
 * with no newline), AUDIT_LINE_EOF, AUDIT_LINE_LONG (more than
 * AUDIT_LINE_MAX bytes before a newline; r->line holds what was read of
 * it and r->lineno counts it), or -errno. */
int audit_reader_next(struct audit_reader *r);

/* Pass over the rest of a long line, through its newline: 0 or -errno. */
int audit_reader_skip(struct audit_reader *r);

#define AUDIT_SHOWN_MAX 256 /* bytes of a string from the log shown in a message */

/* Text from the log, fit for a message or a terminal: escaped, cut with
 * "..." to AUDIT_SHOWN_MAX bytes; returns out. */
const char *audit_escape(const char *s, char out[AUDIT_SHOWN_MAX]);

/* s is a time as the writer puts it: YYYY-MM-DDTHH:MM:SS.mmmZ. */
bool audit_time_valid(const char *s);

/* Such a time as unix ms: 0, or -EINVAL when s is not one. */
int audit_time_ms(const char *s, int64_t *ms);

#endif
