/* resp.h: a check of the server's bytes before hiredis parses them (pure).
 *
 * The Redis server may be hostile, and hiredis 0.14 trusts it: an array
 * header "*2147483647" makes it calloc 16 GiB, a bulk header of a few
 * gigabytes makes it buffer until they come, and a reply to no command
 * trips an assert() (the process aborts). The ledger never asks for an
 * aggregate, so its replies are one item each: a status (+), an error
 * (-), an integer (:) or a bulk string ($, or $-1 for nil). The scanner
 * goes through the stream as it comes, chunk by chunk, and refuses
 *   - any other type byte (arrays, RESP3 types, garbage);
 *   - a line over LEDGER_LINE_MAX, a line holding CR or LF, a number
 *     that is not one (sign, digits, no leading zero);
 *   - a bulk longer than LEDGER_BULK_MAX, as soon as its header is read
 *     (nothing of it is buffered), or one not ended by CRLF;
 * and counts the replies completed, which the caller compares with the
 * commands it is owed answers for.
 */
#ifndef APPL_LEDGER_RESP_H
#define APPL_LEDGER_RESP_H

#include <stddef.h>
#include <stdint.h>

struct ledger_resp {
	int state;     /* where in an item (resp.c) */
	char type;     /* the item's type byte */
	size_t line;   /* bytes of its header line so far */
	uint64_t num;  /* the number read so far ($ and :) */
	int sign;      /* 1, or -1 after a '-' */
	int digits;    /* digits read */
	uint64_t left; /* bulk bytes still to come, CRLF included */
};

/* Start (or restart, for a new connection). */
void ledger_resp_init(struct ledger_resp *s);

/* Go over len bytes of buf; *done is the number of replies they completed.
 * 0, or -EPROTO with *why a fixed text; after that s is unusable (the
 * connection must be dropped). */
int ledger_resp_scan(struct ledger_resp *s, const char *buf, size_t len, size_t *done,
		     const char **why);

#endif
