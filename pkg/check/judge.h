/* judge.h: whether a probe cell did what check expects of it, from the
 * cell's result object and from what check's own listeners on the host
 * received while it ran. Pure: no I/O, no clock, so every kind of
 * surprise is tested without a sandbox (tests/unit/test_check_judge.c).
 */
#ifndef APPL_CHECK_JUDGE_H
#define APPL_CHECK_JUDGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The line a probe cell prints about itself is at most this long. */
#define CHECK_JUDGE_REPORT_MAX 4096

enum check_judge_kind {
	CHECK_JUDGE_STDOUT,   /* must work: ran to its end and printed exactly expect */
	CHECK_JUDGE_CALL,     /* must work: the tool call returned a value */
	CHECK_JUDGE_DENIED,   /* must be denied: reached nothing, and the host saw nothing */
	CHECK_JUDGE_LIMIT,    /* must be denied: refused before passing limit */
	CHECK_JUDGE_DEADLINE, /* must be denied: stopped at the deadline */
};

struct check_judge_expect {
	enum check_judge_kind judge;
	const char *expect;  /* CHECK_JUDGE_STDOUT */
	unsigned long limit; /* CHECK_JUDGE_LIMIT: the most the cell may have reached */
	bool memory_stop;    /* CHECK_JUDGE_LIMIT: a stop for memory is a refusal too */
};

/* Whether result (a cell's result object, borrowed; anything else is "no
 * result") is what e expects of it, arrivals being how many connections
 * and datagrams check's own listeners received while it ran. A probe that
 * reports facts does so in its last line of output, exactly
 * {"reached": BOOL, "detail": STR, "n": INT} (at most
 * CHECK_JUDGE_REPORT_MAX bytes); anything else is a surprise, never read as
 * a denial. why (cap > 0) gets a short account, the cell's words escaped:
 * what happened when as expected, what was surprising when not. */
bool check_judge_result(const struct check_judge_expect *e, const json_t *result, unsigned arrivals,
			char *why, size_t cap);

#endif
