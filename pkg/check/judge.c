/* judge.c: a probe cell's result against what was expected (judge.h). */
#define _GNU_SOURCE
#include "check/judge.h"

#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "check/text.h"
#include "json/json.h"

/* What a probe cell says it did: its last line of output. */
struct probe_facts {
	json_t *doc;
	bool reached;
	json_int_t n;
	const char *detail; /* borrowed from doc */
};

/* What a cell printed, for one line: each line break shown as a return
 * sign, the last one left out. */
static void output_show(const char *s, char *out, size_t cap)
{
	size_t len = strlen(s), o = 0;
	char line[200];

	if (len > 0 && s[len - 1] == '\n')
		len--;
	out[0] = '\0';
	while (len > 0 || o == 0) {
		const char *nl = memchr(s, '\n', len);
		size_t n = nl ? (size_t)(nl - s) : len;

		check_text_show(s, n, line, sizeof(line));
		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s", line,
				      nl ? " \xe2\x8f\x8e " : "");
		if (!nl || o >= cap)
			break;
		len -= n + 1;
		s = nl + 1;
	}
}

/* The traceback's last line: the exception and its message. */
static void error_tail(const char *error, char *out, size_t cap)
{
	size_t len = strlen(error);
	const char *start;

	while (len > 0 && (error[len - 1] == '\n' || error[len - 1] == ' '))
		len--;
	start = memrchr(error, '\n', len);
	start = start ? start + 1 : error;
	check_text_show(start, len - (size_t)(start - error), out, cap);
}

/* Whether the run ended by itself without raising; why says how it did
 * not. */
static bool result_clean(const json_t *result, char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	const char *error = json_string_value(json_object_get(result, "error"));
	char tail[256] = "";

	if (error)
		error_tail(error, tail, sizeof(tail));
	if (reason || json_is_true(json_object_get(result, "stopped"))) {
		snprintf(why, cap, "stopped (%s)%s%s", reason ? reason : "no reason given",
			 tail[0] ? ": " : "", tail);
		return false;
	}
	if (error) {
		snprintf(why, cap, "the cell raised %s", tail);
		return false;
	}
	return true;
}

static bool facts_valid(const json_t *doc)
{
	static const char *const keys[] = {"reached", "detail", "n", NULL};
	struct appl_err err = {0};

	return doc && json_is_object(doc) && appl_json_keys_check(doc, keys, "report", &err) >= 0 &&
	       json_is_boolean(json_object_get(doc, "reached")) &&
	       json_is_string(json_object_get(doc, "detail")) &&
	       json_is_integer(json_object_get(doc, "n"));
}

static int facts_parse(const json_t *result, struct probe_facts *f, char *why, size_t cap)
{
	const char *out = json_string_value(json_object_get(result, "stdout"));
	size_t len = out ? strlen(out) : 0;
	const char *line;
	struct appl_err err = {0};
	char shown[160];

	memset(f, 0, sizeof(*f));
	while (len > 0 && out[len - 1] == '\n')
		len--;
	line = out ? memrchr(out, '\n', len) : NULL;
	line = line ? line + 1 : out;
	if (line)
		f->doc = appl_json_load(line, len - (size_t)(line - out), CHECK_JUDGE_REPORT_MAX, 2,
					"report", &err);
	if (!facts_valid(f->doc)) {
		check_text_show(out ? out : "", len, shown, sizeof(shown));
		snprintf(why, cap, "no report from the cell (it printed \"%s\")", shown);
		json_decref(f->doc);
		f->doc = NULL;
		return -1;
	}
	f->reached = json_is_true(json_object_get(f->doc, "reached"));
	f->n = json_integer_value(json_object_get(f->doc, "n"));
	f->detail = json_string_value(json_object_get(f->doc, "detail"));
	return 0;
}

static bool judge_stdout(const struct check_judge_expect *e, const json_t *result, char *why,
			 size_t cap)
{
	const char *out = json_string_value(json_object_get(result, "stdout"));
	char got[200], want[200];

	if (!result_clean(result, why, cap))
		return false;
	output_show(out ? out : "", got, sizeof(got));
	output_show(e->expect, want, sizeof(want));
	if (out && strcmp(out, e->expect) == 0) {
		snprintf(why, cap, "printed %s", got);
		return true;
	}
	snprintf(why, cap, "printed \"%s\", not \"%s\"", got, want);
	return false;
}

static bool judge_deadline(const json_t *result, char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	json_int_t ms = json_integer_value(json_object_get(result, "duration_ms"));

	if (reason && strcmp(reason, "deadline") == 0 &&
	    json_is_true(json_object_get(result, "stopped"))) {
		snprintf(why, cap, "stopped at the deadline, after %.1f s", (double)ms / 1000.0);
		return true;
	}
	if (result_clean(result, why, cap))
		snprintf(why, cap, "ran to its end: never stopped at the deadline");
	return false;
}

static bool judge_fact(const struct check_judge_expect *e, const struct probe_facts *f,
		       unsigned arrivals, char *why, size_t cap)
{
	char detail[400];

	/* The cell's words reach the operator's terminal: escaped. */
	check_text_show(f->detail, strlen(f->detail), detail, sizeof(detail));
	switch (e->judge) {
	case CHECK_JUDGE_CALL:
		snprintf(why, cap, "%s%s", f->reached ? "returned " : "", detail);
		return f->reached;
	case CHECK_JUDGE_LIMIT:
		if (f->reached || f->n < 0 || (unsigned long long)f->n > e->limit) {
			snprintf(why, cap, "%s (the limit is %lu)", detail, e->limit);
			return false;
		}
		snprintf(why, cap, "%s", detail);
		return true;
	default:
		if (arrivals > 0) {
			snprintf(why, cap,
				 "check's listener on the host received %u; the cell said: %s",
				 arrivals, detail);
			return false;
		}
		snprintf(why, cap, "%s%s", f->reached ? "reached: " : "", detail);
		return !f->reached;
	}
}

bool check_judge_result(const struct check_judge_expect *e, const json_t *result, unsigned arrivals,
			char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	struct probe_facts f;
	bool ok;

	if (!json_is_object(result)) {
		snprintf(why, cap, "no result");
		return false;
	}
	if (e->judge == CHECK_JUDGE_STDOUT)
		return judge_stdout(e, result, why, cap);
	if (e->judge == CHECK_JUDGE_DEADLINE)
		return judge_deadline(result, why, cap);
	if (e->judge == CHECK_JUDGE_LIMIT && e->memory_stop && reason &&
	    strcmp(reason, "memory") == 0) {
		snprintf(why, cap, "the sandbox was stopped for memory");
		return true;
	}
	if (!result_clean(result, why, cap) || facts_parse(result, &f, why, cap) < 0)
		return false;
	ok = judge_fact(e, &f, arrivals, why, cap);
	json_decref(f.doc);
	return ok;
}
