/* test_log.c: the log sink: escaping hostile text, one line per call, the
 * cut, the rate for hostile sources. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/limits.h"
#include "log/log.h"

static void test_escape(void **state)
{
	char out[64];
	bool cut;
	size_t n;
	(void)state;

	n = log_escape("plain é €", strlen("plain é €"), out, sizeof(out), &cut);
	assert_string_equal(out, "plain é €");
	assert_int_equal(n, strlen("plain é €"));
	assert_false(cut);
	log_escape("a\x1b[1m\x01\x7f\\b", 9, out, sizeof(out), &cut);
	assert_string_equal(out, "a\\x1b[1m\\x01\\x7f\\x5cb");
	/* invalid UTF-8 (a lone continuation, an overlong, a surrogate, a cut
	 * sequence) and C1 controls are escaped byte by byte */
	log_escape("\x80|\xc0\xaf|\xed\xa0\x80|\xc2\x9b|\xe2\x82", 14, out, sizeof(out), &cut);
	assert_string_equal(out, "\\x80|\\xc0\\xaf|\\xed\\xa0\\x80|\\xc2\\x9b|\\xe2\\x82");
	/* a NUL in the middle is a byte like any other */
	log_escape("a\0b", 3, out, sizeof(out), &cut);
	assert_string_equal(out, "a\\x00b");
	/* the cap never splits an escape or a character */
	n = log_escape("ab\x01", 3, out, 6, &cut);
	assert_string_equal(out, "ab");
	assert_true(cut);
	n = log_escape("ab\xc3\xa9", 4, out, 4, &cut);
	assert_string_equal(out, "ab");
	assert_true(cut);
	n = log_escape("abc", 3, out, 4, &cut);
	assert_string_equal(out, "abc");
	assert_false(cut);
	n = log_escape("abc", 3, out, 1, &cut);
	assert_int_equal(n, 0);
	assert_string_equal(out, "");
	assert_true(cut);
}

/* The Unicode controls that reorder what a reader sees, or break a line in
 * some viewers, are escaped too. */
static void test_escape_bidi_and_separators(void **state)
{
	static const char *const bad[] = {"\xe2\x80\xae", "\xe2\x80\xaa", "\xe2\x81\xa6",
					  "\xe2\x81\xa9", "\xe2\x80\x8f", "\xd8\x9c",
					  "\xe2\x80\xa8", "\xe2\x80\xa9"};
	char out[64];
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		log_escape(bad[i], strlen(bad[i]), out, sizeof(out), NULL);
		assert_true(out[0] == '\\' && out[1] == 'x');
	}
	/* their neighbours are ordinary text */
	log_escape("\xe2\x80\x94", 3, out, sizeof(out), NULL);
	assert_string_equal(out, "\xe2\x80\x94");
}

/* Read back what log_line wrote through a pipe. */
static char *capture(int rfd)
{
	static char buf[3 * APPL_LOG_LINE_MAX];
	ssize_t n = read(rfd, buf, sizeof(buf) - 1);

	assert_true(n > 0);
	buf[n] = '\0';
	return buf;
}

static void test_one_line_per_call(void **state)
{
	int p[2];
	char *out, big[APPL_LOG_LINE_MAX * 2];
	(void)state;
	assert_int_equal(pipe(p), 0);
	log_setup(p[1], LOG_INFO);
	log_line(LOG_INFO, "abc123", "hello %s", "there\nforged line");
	out = capture(p[0]);
	assert_non_null(strstr(out, " info run=abc123: hello there forged line\n"));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
	assert_true(out[4] == '-' && out[10] == 'T'); /* a timestamp first */
	/* below the level: nothing */
	log_line(LOG_DEBUG, NULL, "quiet");
	assert_false(log_enabled(LOG_DEBUG));
	/* too long: cut, marked, still one line */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	log_line(LOG_WARN, NULL, "%s", big);
	out = capture(p[0]);
	assert_true(strlen(out) <= APPL_LOG_LINE_MAX);
	assert_non_null(strstr(out, "a [cut]\n"));
	assert_null(strstr(out, "quiet"));
	log_setup(2, LOG_INFO);
	close(p[0]);
	close(p[1]);
}

static void test_rate_for_hostile_sources(void **state)
{
	struct log_rate r = {0};
	unsigned dropped = 99, allowed = 0;
	(void)state;
	for (unsigned i = 0; i < LOG_RATE_BURST + 30; i++)
		allowed += log_rate_allow(&r, 1000, &dropped);
	assert_int_equal(allowed, LOG_RATE_BURST);
	assert_int_equal(dropped, 0);
	/* the next window says how many were left out */
	assert_true(log_rate_allow(&r, 1000 + LOG_RATE_WINDOW_MS, &dropped));
	assert_int_equal(dropped, 30);
	assert_true(log_rate_allow(&r, 1000 + LOG_RATE_WINDOW_MS + 1, &dropped));
	assert_int_equal(dropped, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_escape_bidi_and_separators),
		cmocka_unit_test(test_one_line_per_call),
		cmocka_unit_test(test_rate_for_hostile_sources),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
