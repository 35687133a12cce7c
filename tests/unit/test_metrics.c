/* test_metrics.c: the registry (pkg/metrics): the text format, the fixed
 * label values, escaping, the bound on label combinations, the histogram
 * and the gauges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "metrics/metrics.h"

/* The page, rendered (free it). */
static char *page(void)
{
	struct appl_err err = {0};
	char *text = NULL;
	size_t len = 0;

	if (metrics_render(&text, &len, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(strlen(text), len);
	return text;
}

static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);

	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

static void want_line(const char *text, const char *line)
{
	if (!has_line(text, line))
		fail_msg("no line %s in:\n%s", line, text);
}

static int reset(void **state)
{
	(void)state;
	metrics_reset();
	return 0;
}

/* Every sample line is NAME[{...}] VALUE, after its family's HELP and
 * TYPE, and the page ends with a newline. */
static void shape_check(const char *text)
{
	char family[128] = "";

	assert_true(text[0] && text[strlen(text) - 1] == '\n');
	for (const char *p = text; *p;) {
		const char *end = strchr(p, '\n');
		size_t n = (size_t)(end - p);

		assert_non_null(end);
		if (strncmp(p, "# HELP ", 7) == 0) {
			size_t k = strcspn(p + 7, " ");
			snprintf(family, sizeof(family), "%.*s", (int)k, p + 7);
		} else if (strncmp(p, "# TYPE ", 7) == 0) {
			assert_memory_equal(p + 7, family, strlen(family));
		} else {
			assert_true(family[0]);
			assert_memory_equal(p, family, strlen(family));
			assert_non_null(memchr(p, ' ', n));
		}
		p = end + 1;
	}
}

static void test_an_empty_page(void **state)
{
	char *t;

	(void)state;
	t = page();
	shape_check(t);
	want_line(t, "# TYPE appliance_audit_lines_total counter");
	want_line(t, "appliance_audit_lines_total 0");
	want_line(t, "appliance_pool_boots_total 0");
	/* the families whose values are all known start at 0 */
	want_line(t, "appliance_reloads_total{outcome=\"ok\"} 0");
	want_line(t, "appliance_reloads_total{outcome=\"refused\"} 0");
	want_line(t, "appliance_approvals_total{outcome=\"declined\"} 0");
	want_line(t, "appliance_tool_refusals_total{reason=\"budget\"} 0");
	assert_null(strstr(t, "outcome=\"other\""));
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"+Inf\"} 0");
	want_line(t, "appliance_cell_duration_seconds_count 0");
	/* nothing counted yet, nothing set yet */
	assert_null(strstr(t, "appliance_cells_total"));
	assert_null(strstr(t, "appliance_tool_calls_total"));
	assert_null(strstr(t, "appliance_policy_serial"));
	assert_null(strstr(t, "appliance_pool_ready"));
	free(t);
}

static void test_counters_and_fixed_values(void **state)
{
	char *t;

	(void)state;
	metrics_cell("ok", "none", true, 40);
	metrics_cell("ok", "none", true, 60);
	metrics_cell("stopped", "deadline", true, 30000);
	metrics_cell("refused", "busy", false, 0);
	/* a value off the list is "other", never itself */
	metrics_cell("finished\"} 1\nappliance_x 9", "none", false, 0);
	metrics_count(METRICS_TOOL_CALLS, "toy", "add", "ok");
	metrics_add(METRICS_TOOL_CALLS, 2, METRICS_L("toy", "_other", "tool_error"));
	metrics_count(METRICS_TOOL_CALLS, "toy", "add", "whatever the server said");
	metrics_add(METRICS_AUDIT_LINES, 5, METRICS_L(NULL));
	metrics_add(METRICS_AUDIT_LINES, 2, METRICS_L(NULL));
	metrics_http(200);
	metrics_http(200);
	metrics_http(599);
	metrics_reload(true);
	metrics_reload(false);
	metrics_reload(false);
	t = page();
	shape_check(t);
	want_line(t, "appliance_cells_total{outcome=\"ok\",reason=\"none\"} 2");
	want_line(t, "appliance_cells_total{outcome=\"stopped\",reason=\"deadline\"} 1");
	want_line(t, "appliance_cells_total{outcome=\"refused\",reason=\"busy\"} 1");
	want_line(t, "appliance_cells_total{outcome=\"other\",reason=\"none\"} 1");
	assert_null(strstr(t, "finished"));
	assert_null(strstr(t, "appliance_x"));
	want_line(t, "appliance_tool_calls_total{server=\"toy\",tool=\"add\",outcome=\"ok\"} 1");
	want_line(t, "appliance_tool_calls_total{server=\"toy\",tool=\"_other\","
		     "outcome=\"tool_error\"} 2");
	want_line(t, "appliance_tool_calls_total{server=\"toy\",tool=\"add\",outcome=\"other\"} 1");
	want_line(t, "appliance_audit_lines_total 7");
	want_line(t, "appliance_http_requests_total{code=\"200\"} 2");
	want_line(t, "appliance_http_requests_total{code=\"other\"} 1");
	want_line(t, "appliance_reloads_total{outcome=\"ok\"} 1");
	want_line(t, "appliance_reloads_total{outcome=\"refused\"} 2");
	free(t);
}

static void test_the_histogram(void **state)
{
	char *t;

	(void)state;
	metrics_cell("ok", "none", true, 10);	 /* on a bound: counted in it */
	metrics_cell("error", "none", true, 11); /* just past it */
	metrics_cell("ok", "none", true, 1213);
	metrics_cell("not_run", "waited", false, 99999); /* did not run: not observed */
	metrics_cell("ok", "none", true, 700000);	 /* past the last bound */
	t = page();
	shape_check(t);
	want_line(t, "# TYPE appliance_cell_duration_seconds histogram");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"0.01\"} 1");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"0.025\"} 2");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"1\"} 2");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"2.5\"} 3");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"600\"} 3");
	want_line(t, "appliance_cell_duration_seconds_bucket{le=\"+Inf\"} 4");
	want_line(t, "appliance_cell_duration_seconds_sum 701.234");
	want_line(t, "appliance_cell_duration_seconds_count 4");
	free(t);
}

static void test_gauges(void **state)
{
	char *t;

	(void)state;
	metrics_policy(1765432100, 1799999999);
	metrics_set(METRICS_POOL_READY, 3);
	metrics_set(METRICS_POOL_READY, 2);
	/* the wrong kind does nothing */
	metrics_set(METRICS_AUDIT_LINES, 99);
	metrics_add(METRICS_POOL_READY, 5, METRICS_L(NULL));
	metrics_add(METRICS_CELL_SECONDS, 5, METRICS_L(NULL));
	metrics_count((enum metrics_family)1000, NULL);
	metrics_set((enum metrics_family) - 1, 1);
	t = page();
	shape_check(t);
	want_line(t, "# TYPE appliance_policy_serial gauge");
	want_line(t, "appliance_policy_serial 1765432100");
	want_line(t, "appliance_policy_expiry_timestamp_seconds 1799999999");
	want_line(t, "appliance_pool_ready 2");
	want_line(t, "appliance_audit_lines_total 0");
	want_line(t, "appliance_cell_duration_seconds_count 0");
	free(t);
	metrics_policy(UINT64_MAX, -5);
	t = page();
	want_line(t, "appliance_policy_serial 9223372036854775807");
	want_line(t, "appliance_policy_expiry_timestamp_seconds -5");
	free(t);
}

/* The bound: past APPL_METRICS_SERIES_MAX combinations a family counts
 * into one overflow series, and so does a count it cannot label. */
static void test_label_combinations_are_bounded(void **state)
{
	char name[32], line[256], *t;
	size_t len;

	(void)state;
	for (unsigned i = 0; i < APPL_METRICS_SERIES_MAX + 500; i++) {
		snprintf(name, sizeof(name), "s%u", i);
		metrics_count(METRICS_UPSTREAM_RESTARTS, name);
	}
	/* counting an existing one still works when the family is full */
	metrics_count(METRICS_UPSTREAM_RESTARTS, "s0");
	t = page();
	shape_check(t);
	want_line(t, "appliance_upstream_restarts_total{server=\"s0\"} 2");
	snprintf(line, sizeof(line), "appliance_upstream_restarts_total{server=\"s%u\"} 1",
		 APPL_METRICS_SERIES_MAX - 1);
	want_line(t, line);
	snprintf(line, sizeof(line), "appliance_upstream_restarts_total{server=\"s%u\"}",
		 APPL_METRICS_SERIES_MAX);
	assert_null(strstr(t, line));
	want_line(t, "appliance_upstream_restarts_total{server=\"_overflow\"} 500");
	len = strlen(t);
	free(t);
	/* more of the same grows nothing */
	for (unsigned i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "t%u", i);
		metrics_count(METRICS_UPSTREAM_RESTARTS, name);
	}
	t = page();
	assert_int_equal(strlen(t), len + 1); /* "500" became "5500" */
	want_line(t, "appliance_upstream_restarts_total{server=\"_overflow\"} 5500");
	free(t);
}

static void test_what_cannot_be_labelled_overflows(void **state)
{
	char longer[APPL_METRICS_LABEL_MAX + 2], *t;

	(void)state;
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	metrics_count(METRICS_TOOL_CALLS, "toy", longer, "ok"); /* too long */
	metrics_count(METRICS_TOOL_CALLS, "toy", "", "ok");	/* empty */
	metrics_count(METRICS_TOOL_CALLS, "toy", "add");	/* one missing */
	metrics_count(METRICS_CELLS, "ok", "none", "x");	/* one too many */
	metrics_count(METRICS_AUDIT_SEALS, "x");		/* no labels: its one series */
	longer[APPL_METRICS_LABEL_MAX] = '\0';			/* the most that fits */
	metrics_count(METRICS_TOOL_CALLS, "toy", longer, "ok");
	t = page();
	shape_check(t);
	want_line(t, "appliance_tool_calls_total{server=\"_overflow\",tool=\"_overflow\","
		     "outcome=\"_overflow\"} 3");
	want_line(t, "appliance_cells_total{outcome=\"_overflow\",reason=\"_overflow\"} 1");
	assert_non_null(strstr(t, longer));
	want_line(t, "appliance_audit_seals_total 1");
	free(t);
}

/* A label value is escaped as the format says, whatever reaches it: the
 * callers pass names from the policy, which cannot hold these. */
static void test_escaping(void **state)
{
	char *t;

	(void)state;
	metrics_count(METRICS_UPSTREAM_RESTARTS, "a\"b\\c\nd{e}f\tg\x7f\xc3\xa9");
	t = page();
	shape_check(t);
	want_line(t, "appliance_upstream_restarts_total{server=\"a\\\"b\\\\c\\nd{e}f?g???\"} 1");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_an_empty_page, reset),
		cmocka_unit_test_setup(test_counters_and_fixed_values, reset),
		cmocka_unit_test_setup(test_the_histogram, reset),
		cmocka_unit_test_setup(test_gauges, reset),
		cmocka_unit_test_setup(test_label_combinations_are_bounded, reset),
		cmocka_unit_test_setup(test_what_cannot_be_labelled_overflows, reset),
		cmocka_unit_test_setup(test_escaping, reset),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	metrics_reset();
	return rc;
}
