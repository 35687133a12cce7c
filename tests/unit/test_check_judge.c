/* test_check_judge.c: check's verdict on a probe cell (pkg/check/judge.h),
 * from the cell's result object and what check's listeners received; the
 * listeners themselves (listen.h) and the report's text (text.h).
 *
 * Every kind of surprise must be one: output other than expected, a run
 * that raised or was stopped, a report line that is not exactly the
 * report, a denied probe that got through or that a host listener heard,
 * a count past its limit, a deadline that never stopped the cell.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "check/judge.h"
#include "check/listen.h"
#include "check/text.h"

#define WHY_MAX 640

/* A cell's result object, as cell_outcome_json makes it. */
static json_t *result(const char *out, const char *error, const char *reason, int duration_ms)
{
	json_t *r = json_pack("{s:s, s:o, s:n, s:b, s:b, s:o, s:i, s:i}", "stdout", out, "error",
			      error ? json_string(error) : json_null(), "result", "truncated", 0,
			      "stopped", reason != NULL, "reason",
			      reason ? json_string(reason) : json_null(), "calls", 0, "duration_ms",
			      duration_ms);

	assert_non_null(r);
	return r;
}

/* A probe's report line, as its report() prints it. */
static char *report(int reached, const char *detail, long n)
{
	json_t *doc = json_pack("{s:b, s:s, s:I}", "reached", reached, "detail", detail, "n",
				(json_int_t)n);
	char *text = json_dumps(doc, JSON_COMPACT), *line;

	assert_non_null(text);
	assert_true(asprintf(&line, "%s\n", text) > 0);
	free(text);
	json_decref(doc);
	return line;
}

struct judge_case {
	bool verdict;
	const char *words; /* what the account must hold */
	struct check_judge_expect e;
	unsigned arrivals;
	json_t *result; /* new; NULL: no result at all */
};

static void judge_one(const struct judge_case *k)
{
	char why[WHY_MAX];
	bool ok = check_judge_result(&k->e, k->result, k->arrivals, why, sizeof(why));

	if (ok != k->verdict || !strstr(why, k->words))
		fail_msg("expected %d \"%s\", got %d \"%s\"", k->verdict, k->words, ok, why);
	json_decref(k->result);
}

/* A result whose stdout is the concatenation of the given lines. */
static json_t *reported(const char *before, int reached, const char *detail, long n,
			const char *reason)
{
	char *line = report(reached, detail, n), *out;
	json_t *r;

	assert_true(asprintf(&out, "%s%s", before, line) > 0);
	r = result(out, NULL, reason, 100);
	free(out);
	free(line);
	return r;
}

#define EXPECT(kind)                                                                               \
	{                                                                                          \
		.judge = CHECK_JUDGE_##kind                                                        \
	}

static void test_expected_output(void **state)
{
	struct check_judge_expect e = {.judge = CHECK_JUDGE_STDOUT, .expect = "42\n"};
	struct check_judge_expect two = {.judge = CHECK_JUDGE_STDOUT,
					 .expect = "hello from a cell\ncaf\xc3\xa9, 2, None .\n"};
	char why[WHY_MAX];
	json_t *r;

	(void)state;
	judge_one(&(struct judge_case){true, "printed 42", e, 0, result("42\n", NULL, NULL, 9)});
	judge_one(&(struct judge_case){false, "printed \"41\", not \"42\"", e, 0,
				       result("41\n", NULL, NULL, 9)});
	judge_one(&(struct judge_case){false, "printed \"\", not \"42\"", e, 0,
				       result("", NULL, NULL, 9)});
	/* the right output, but the run did not end by itself */
	judge_one(&(struct judge_case){false, "stopped (output)", e, 0,
				       result("42\n", NULL, "output", 9)});
	/* lines shown on one line, each break a return sign */
	r = result(two.expect, NULL, NULL, 9);
	assert_true(check_judge_result(&two, r, 0, why, sizeof(why)));
	assert_string_equal(why, "printed hello from a cell \xe2\x8f\x8e caf\xc3\xa9, 2, None .");
	json_decref(r);
}

static void test_dirty_result(void **state)
{
	struct check_judge_expect out = {.judge = CHECK_JUDGE_STDOUT, .expect = "42\n"};
	char why[WHY_MAX];
	json_t *r;

	(void)state;
	judge_one(&(struct judge_case){false, "raised ZeroDivisionError", out, 0,
				       result("",
					      "Traceback (most recent call last):\n  "
					      "x\nZeroDivisionError: division by zero\n",
					      NULL, 9)});
	judge_one(&(struct judge_case){
		false, "raised PermissionError", EXPECT(DENIED), 0,
		result("", "Traceback:\nPermissionError: [Errno 1]\n", NULL, 9)});
	judge_one(&(struct judge_case){false, "stopped (deadline)", EXPECT(DENIED), 0,
				       reported("", 0, "x", 0, "deadline")});
	judge_one(&(struct judge_case){false, "no result", EXPECT(DENIED), 0, NULL});
	judge_one(&(struct judge_case){false, "no result", EXPECT(STDOUT), 0, json_string("x")});
	/* stopped with a traceback: both said, the traceback's last line only */
	r = result("", "Traceback:\n  y\nMemoryError\n", "memory", 9);
	assert_false(check_judge_result(&out, r, 0, why, sizeof(why)));
	assert_string_equal(why, "stopped (memory): MemoryError");
	json_decref(r);
	/* stopped without a reason */
	r = json_pack("{s:s, s:b}", "stdout", "", "stopped", 1);
	assert_false(check_judge_result(&out, r, 0, why, sizeof(why)));
	assert_string_equal(why, "stopped (no reason given)");
	json_decref(r);
}

static void test_call(void **state)
{
	(void)state;
	judge_one(&(struct judge_case){true, "returned {\"sum\":5}", EXPECT(CALL), 0,
				       reported("", 1, "{\"sum\":5}", 0, NULL)});
	judge_one(&(struct judge_case){false, "ToolError: refused", EXPECT(CALL), 0,
				       reported("", 0, "ToolError: refused", 0, NULL)});
}

static void test_denied(void **state)
{
	char why[WHY_MAX];
	struct check_judge_expect e = EXPECT(DENIED);
	json_t *r;

	(void)state;
	/* denied, and said so */
	r = reported("", 0, "ConnectionRefusedError: Connection refused", 0, NULL);
	assert_true(check_judge_result(&e, r, 0, why, sizeof(why)));
	assert_string_equal(why, "ConnectionRefusedError: Connection refused");
	json_decref(r);
	/* got through: a surprise */
	judge_one(&(struct judge_case){false, "reached: connected", e, 0,
				       reported("", 1, "connected", 0, NULL)});
	/* the last line is the report: earlier output does not count */
	judge_one(&(struct judge_case){true, "refused", e, 0,
				       reported("noise\n", 0, "refused", 0, NULL)});
	{
		char *first = report(0, "x", 0);

		judge_one(&(struct judge_case){false, "reached: y", e, 0,
					       reported(first, 1, "y", 0, NULL)});
		free(first);
	}
}

/* The cell cannot always tell (a datagram is sent either way): what the
 * host's listeners received decides. */
static void test_arrivals(void **state)
{
	char why[WHY_MAX];
	struct check_judge_expect e = EXPECT(DENIED);
	json_t *r = reported("", 0, "sent", 0, NULL);

	(void)state;
	assert_false(check_judge_result(&e, r, 1, why, sizeof(why)));
	assert_string_equal(why, "check's listener on the host received 1; the cell said: sent");
	assert_false(check_judge_result(&e, r, 3, why, sizeof(why)));
	assert_non_null(strstr(why, "received 3"));
	assert_true(check_judge_result(&e, r, 0, why, sizeof(why)));
	assert_string_equal(why, "sent");
	json_decref(r);
}

static void test_malformed_report(void **state)
{
	static const char *const outs[] = {
		"denied\n",
		"{\"reached\": false, \"detail\": \"\", \"n\": 0, \"ok\": true}\n", /* a field more */
		"{\"reached\": 0, \"detail\": \"\", \"n\": 0}\n", /* not a boolean */
		"{\"reached\": false, \"detail\": 1, \"n\": 0}\n",
		"{\"reached\": false, \"detail\": \"\", \"n\": 0.5}\n",
		"{\"reached\": false, \"detail\": \"\"}\n",
		"{\"reached\": false, \"reached\": false, \"detail\": \"\", \"n\": 0}\n",
		"[false, \"\", 0]\n",
		"{\"reached\": false, \"detail\": \"\", \"n\": 0\n",
		"",
	};
	char why[WHY_MAX];
	struct check_judge_expect kinds[] = {
		EXPECT(DENIED), EXPECT(CALL), {.judge = CHECK_JUDGE_LIMIT, .limit = 64}};

	(void)state;
	for (size_t i = 0; i < sizeof(outs) / sizeof(outs[0]); i++)
		for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
			json_t *r = result(outs[i], NULL, NULL, 9);

			assert_false(check_judge_result(&kinds[k], r, 0, why, sizeof(why)));
			if (strncmp(why, "no report from the cell (it printed \"", 37) != 0)
				fail_msg("%s: %s", outs[i], why);
			json_decref(r);
		}
	/* no stdout at all */
	{
		json_t *r = json_pack("{s:n}", "error");

		assert_false(check_judge_result(&kinds[0], r, 0, why, sizeof(why)));
		assert_string_equal(why, "no report from the cell (it printed \"\")");
		json_decref(r);
	}
}

static void test_limit(void **state)
{
	struct check_judge_expect e = {.judge = CHECK_JUDGE_LIMIT, .limit = 64};
	struct check_judge_expect mem = {
		.judge = CHECK_JUDGE_LIMIT, .limit = 256, .memory_stop = true};

	(void)state;
	judge_one(&(struct judge_case){true, "at most 64 tasks", e, 0,
				       reported("", 0, "at most 64 tasks", 64, NULL)});
	judge_one(&(struct judge_case){false, "at most 65 tasks (the limit is 64)", e, 0,
				       reported("", 0, "at most 65 tasks", 65, NULL)});
	judge_one(&(struct judge_case){false, "never refused (the limit is 64)", e, 0,
				       reported("", 1, "never refused", 30, NULL)});
	judge_one(&(struct judge_case){false, "the limit is 64", e, 0,
				       reported("", 0, "?", -1, NULL)});
	/* a stop for memory is the memory probe's refusal, nobody else's */
	judge_one(&(struct judge_case){true, "the sandbox was stopped for memory", mem, 0,
				       result("", "killed", "memory", 9)});
	judge_one(&(struct judge_case){false, "stopped (memory)", e, 0,
				       result("", "killed", "memory", 9)});
	judge_one(&(struct judge_case){false, "stopped (deadline)", mem, 0,
				       result("", NULL, "deadline", 9)});
}

static void test_deadline(void **state)
{
	struct check_judge_expect e = EXPECT(DEADLINE);
	char why[WHY_MAX];
	json_t *r = result("", NULL, "deadline", 3004);

	(void)state;
	assert_true(check_judge_result(&e, r, 0, why, sizeof(why)));
	assert_string_equal(why, "stopped at the deadline, after 3.0 s");
	json_decref(r);
	judge_one(&(struct judge_case){false, "ran to its end: never stopped at the deadline", e, 0,
				       result("", NULL, NULL, 9)});
	judge_one(&(struct judge_case){false, "stopped (memory)", e, 0,
				       result("", NULL, "memory", 9)});
	judge_one(&(struct judge_case){false, "the cell raised KeyError", e, 0,
				       result("", "Traceback:\nKeyError\n", NULL, 9)});
	/* a deadline reason without the stop is no stop */
	r = json_pack("{s:s, s:s, s:b}", "stdout", "", "reason", "deadline", "stopped", 0);
	assert_false(check_judge_result(&e, r, 0, why, sizeof(why)));
	json_decref(r);
}

/* A cell's words reach the operator's terminal: escaped, and cut. */
static void test_hostile_words(void **state)
{
	struct check_judge_expect e = EXPECT(DENIED);
	char why[WHY_MAX], big[2000];
	json_t *r = reported("", 0, "a\x1b[2Jb\ncd", 0, NULL);

	(void)state;
	assert_true(check_judge_result(&e, r, 0, why, sizeof(why)));
	assert_string_equal(why, "a\\x1b[2Jb\\x0acd");
	json_decref(r);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	r = reported("", 0, big, 0, NULL);
	assert_true(check_judge_result(&e, r, 0, why, sizeof(why)));
	assert_true(strlen(why) < 400 && strncmp(why, "xxxx", 4) == 0);
	json_decref(r);
	/* a tiny buffer still ends in a NUL */
	r = reported("", 1, "connected", 0, NULL);
	assert_false(check_judge_result(&e, r, 0, why, 8));
	assert_string_equal(why, "reached");
	json_decref(r);
}

static void test_text(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(check_text_cols("caf\xc3\xa9 \xe2\x9c\x94"), 6);
	check_text_cut("abcdef", 4, out, sizeof(out));
	assert_string_equal(out, "abc" CHECK_TEXT_ELLIPSIS);
	check_text_cut("abcd", 4, out, sizeof(out));
	assert_string_equal(out, "abcd");
	check_text_cut("\xc3\xa9\xc3\xa9\xc3\xa9", 2, out, sizeof(out));
	assert_string_equal(out, "\xc3\xa9" CHECK_TEXT_ELLIPSIS);
	check_text_show("a\tb", 3, out, sizeof(out));
	assert_string_equal(out, "a\\x09b");
	/* cut: an ellipsis where the escape that did not fit would have gone */
	check_text_show("ab\x01", 3, out, 6);
	assert_string_equal(out, "ab" CHECK_TEXT_ELLIPSIS);
	check_text_show("abcdefghij", 10, out, 8);
	assert_string_equal(out, "abcdefg");
}

/* What the cell sent to the host's own sockets is counted once it ended:
 * every datagram, every connection, and nothing when nothing came. */
static void test_listeners(void **state)
{
	struct check_listeners l = {.n = 0};
	struct sockaddr_in to = {.sin_family = AF_INET};
	int udp, tcp, s, c;

	(void)state;
	udp = check_listen_open(&l, AF_INET, SOCK_DGRAM, "127.0.0.1");
	tcp = check_listen_open(&l, AF_INET, SOCK_STREAM, "127.0.0.1");
	assert_true(udp > 0 && tcp > 0);
	assert_int_equal(check_listen_open(&l, AF_INET, SOCK_DGRAM, "not an address"), -1);
	assert_int_equal(check_listen_arrivals(&l), 0);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	s = socket(AF_INET, SOCK_DGRAM, 0);
	to.sin_port = htons((uint16_t)udp);
	assert_int_equal(sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	assert_int_equal(sendto(s, "y", 1, 0, (struct sockaddr *)&to, sizeof(to)), 1);
	close(s);
	c = socket(AF_INET, SOCK_STREAM, 0);
	to.sin_port = htons((uint16_t)tcp);
	assert_int_equal(connect(c, (struct sockaddr *)&to, sizeof(to)), 0);
	assert_int_equal(check_listen_arrivals(&l), 3);
	assert_int_equal(check_listen_arrivals(&l), 0); /* each counted once */
	close(c);
	check_listen_close(&l);
	assert_int_equal(l.n, 0);
}

/* Every host address gets a listener of its own; none is loopback. */
static void test_listen_hosts(void **state)
{
	struct check_listeners l = {.n = 0};
	json_t *addrs, *a;
	size_t i;

	(void)state;
	assert_int_equal(check_listen_hosts(&l, SOCK_DGRAM, &addrs), 0);
	assert_true(json_is_array(addrs));
	assert_int_equal(json_array_size(addrs), l.n);
	json_array_foreach(addrs, i, a) {
		const char *text = json_string_value(json_array_get(a, 1));

		assert_non_null(text);
		assert_true(strcmp(text, "127.0.0.1") != 0 && strcmp(text, "::1") != 0);
		assert_true(json_integer_value(json_array_get(a, 2)) > 0);
	}
	json_decref(addrs);
	check_listen_close(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_expected_output),
		cmocka_unit_test(test_dirty_result),
		cmocka_unit_test(test_call),
		cmocka_unit_test(test_denied),
		cmocka_unit_test(test_arrivals),
		cmocka_unit_test(test_malformed_report),
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_hostile_words),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_listeners),
		cmocka_unit_test(test_listen_hosts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
