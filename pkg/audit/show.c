/* show.c: `appliance audit show`: an audit log's lines, readably (see
 * verify.h). Nothing is checked here, that is verify's; every line is
 * taken as it comes, and what is printed from it is escaped, so a log
 * cannot write to the terminal what it likes. */
#include "audit/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/read.h"
#include "log/log.h"
#include "policy/policy.h"

static const char *str_member(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* What each event looks like: {key} is that member ("a.b": member b of
 * object a), [ ... ] is printed only when every member it names is there
 * and not null. */
static const struct {
	const char *ev, *text;
} shown_events[] = {
	{"log.open", "log file {file}[, continuing {previous.name} after line {previous.n}]"},
	{"start", "appliance start: pid {pid}, deployment {deployment}, serial {serial}, version "
		  "{version}, seal {seal}"},
	{"stop", "appliance stop: pid {pid}, {reason}, {runs} runs"},
	{"run.start",
	 "run {run}: client {client}, role {role}, revision {revision}, code "
	 "{code_bytes} bytes[, session {session}][, tool {tool}][ (program {program})]"},
	{"run.refused", "run {run} refused: client {client}[, tool {tool}]: {reason}"},
	{"auth", "auth {outcome}: [client {client}, ]peer {peer}[, {refusals_dropped} refusals "
		 "not written before]"},
	{"call", "  run {run} call {id}: {tool} ({access}), {args_bytes} argument bytes: "
		 "{outcome}[: {reason}]"},
	{"call.end", "  run {run} call {id}: {tool}: {outcome} in {ms} ms, {result_bytes} result "
		     "bytes"},
	{"run.file", "  run {run} file {name}: {bytes} bytes, {type}, sha256 {sha256}"},
	{"run.end",
	 "run {run} end: {reason} after {ms} ms, {calls} calls, {out_bytes} output "
	 "bytes[, {files} files][, answered {answered}][, value refused: {value_refused}]"},
	{"approval", "  run {run} call {id}: {tool}: approval {outcome} ({by}) after {ms} ms"},
	{"torn", "torn: the line before is a fragment of {bytes} bytes"},
	{"resumed", "writing resumed after {failed_ms} ms ({error}), {dropped} events dropped"},
	{"seal", "seal: kid {kid}, epoch {epoch}"},
	{"reload", "policy reload by {by}: {outcome}[, serial {serial}][: {reason}][, "
		   "{servers_started} servers started, {servers_retired} retired]"},
	{"session.start", "session {session} start: client {client}, role {role}"},
	{"session.end", "session {session} end: {reason} after {cells} cells"},
};

/* The parts of a run's summary line. */
static const char RUN_WHO[] = "client {client}, role {role}, {revision}, {code_bytes} code bytes";
static const char RUN_END[] = "{reason} after {ms} ms, {out_bytes} output bytes[, answered "
			      "{answered}][, value refused: {value_refused}]";
static const char RUN_REFUSED[] = "refused: {reason}";

static const json_t *member_at(const json_t *o, const char *key, size_t len)
{
	const char *dot = memchr(key, '.', len);
	char k[32];

	if (len >= sizeof(k))
		return NULL;
	if (dot) {
		memcpy(k, key, (size_t)(dot - key));
		k[dot - key] = '\0';
		o = json_object_get(o, k);
		len -= (size_t)(dot - key) + 1;
		key = dot + 1;
	}
	memcpy(k, key, len);
	k[len] = '\0';
	return json_object_get(o, k); /* NULL when o is not an object */
}

static void value_put(FILE *out, const json_t *m)
{
	char shown[AUDIT_SHOWN_MAX];

	if (json_is_string(m))
		fputs(audit_escape(json_string_value(m), shown), out);
	else if (json_is_integer(m))
		fprintf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(m));
	else if (json_is_boolean(m))
		fputs(json_is_true(m) ? "yes" : "no", out);
	else if (json_is_null(m))
		fputs("none", out);
	else
		fputs("?", out);
}

/* Print s..end (a template above) with o's members; with dry, print
 * nothing and say whether every member named is there. */
static bool text_put(FILE *out, const json_t *o, const char *s, const char *end, bool dry)
{
	while (s < end) {
		const char *close = memchr(s, *s == '[' ? ']' : '}', (size_t)(end - s));

		if (*s == '[' && close) {
			if (text_put(out, o, s + 1, close, true) && !dry)
				text_put(out, o, s + 1, close, false);
		} else if (*s == '{' && close) {
			const json_t *m = member_at(o, s + 1, (size_t)(close - s - 1));

			if (dry && (!m || json_is_null(m)))
				return false;
			if (!dry)
				value_put(out, m);
		} else {
			if (!dry)
				fputc(*s, out);
			close = s;
		}
		s = close + 1;
	}
	return true;
}

/* ev's form, or NULL. */
static const char *form_of(const char *ev)
{
	for (size_t i = 0; i < sizeof(shown_events) / sizeof(shown_events[0]); i++)
		if (strcmp(ev, shown_events[i].ev) == 0)
			return shown_events[i].text;
	return NULL;
}

bool audit_show_knows(const char *ev)
{
	return form_of(ev) != NULL;
}

/* ---- the lines of one code tool's runs ------------------------------------ */

#define SHOW_RUNS_MAX 100000 /* runs summed up or followed; more are counted, not shown */
#define SHOW_ID_MAX   64     /* bytes of a run id followed (the writer's have 12) */

/* --tool: which lines are the tool's. A run is the tool's when its
 * run.start names it; the run's later lines are known by its id, kept
 * here for at most SHOW_RUNS_MAX runs of at most SHOW_ID_MAX bytes each,
 * so a log cannot make this grow much. A run.start of another tool, or of
 * none, ends whatever run had its id before. */
struct tool_filter {
	const char *tool; /* NULL: every line is shown */
	json_t *runs;	  /* the tool's run ids -> true */
	size_t lost;	  /* runs of the tool whose later lines are not shown */
};

static bool names_tool(const json_t *o, const char *tool)
{
	const char *t = str_member(o, "tool");

	return t && strcmp(t, tool) == 0;
}

/* Whether line o is to be shown; a run.start of the tool starts following
 * its run. */
static bool filter_keep(struct tool_filter *f, const json_t *o)
{
	const char *ev, *id;
	bool mine;

	if (!f->tool)
		return true;
	ev = str_member(o, "ev");
	id = str_member(o, "run");
	if (!ev)
		return false;
	if (strcmp(ev, "run.start") == 0) {
		mine = names_tool(o, f->tool);
		if (id && !mine)
			json_object_del(f->runs, id);
		if (mine &&
		    !(id && strlen(id) <= SHOW_ID_MAX &&
		      (json_object_get(f->runs, id) || json_object_size(f->runs) < SHOW_RUNS_MAX) &&
		      json_object_set_new(f->runs, id, json_true()) == 0))
			f->lost++;
		return mine;
	}
	if (strcmp(ev, "run.refused") == 0 && names_tool(o, f->tool))
		return true;
	return id && json_object_get(f->runs, id);
}

static void filter_end(const struct tool_filter *f, FILE *out)
{
	char shown[AUDIT_SHOWN_MAX];

	if (f->lost)
		fprintf(out,
			"(%zu runs of %s past the first %d, or with a run id longer than %d "
			"bytes: their later lines not shown)\n",
			f->lost, audit_escape(f->tool, shown), SHOW_RUNS_MAX, SHOW_ID_MAX);
}

bool audit_tool_name_valid(const char *name)
{
	return policy_code_tool_name_valid(name, strlen(name));
}

/* ---- a line per event ----------------------------------------------------- */

static void show_line(FILE *out, const struct audit_reader *r, const json_t *o)
{
	const char *ev = json_is_object(o) ? str_member(o, "ev") : NULL, *t, *text;

	if (!ev) {
		fprintf(out, "line %" PRIu64 ": not a log line (%zu bytes)\n", r->lineno,
			r->line_len);
		return;
	}
	if (!(text = form_of(ev)))
		text = "{ev} (an event this version does not know)";
	t = str_member(o, "t");
	fprintf(out, "%s  ", audit_time_valid(t) ? t : "(no time)               ");
	text_put(out, o, text, text + strlen(text), false);
	fputc('\n', out);
}

/* With --tool, a line that is not a log line, or too long to be read,
 * is no line of a run: it is left out with the rest. */
static int show_lines(struct audit_reader *r, struct tool_filter *f, FILE *out)
{
	int got, rc;

	for (;;) {
		json_t *o;
		bool keep;

		got = audit_reader_next(r);
		if (got <= 0)
			return got;
		if (got == AUDIT_LINE_LONG) {
			if (!f->tool)
				fprintf(out, "line %" PRIu64 ": longer than %d bytes, not shown\n",
					r->lineno, AUDIT_LINE_MAX);
			if ((rc = audit_reader_skip(r)) < 0)
				return rc;
			continue;
		}
		o = json_loadb(r->line, r->line_len, JSON_REJECT_DUPLICATES, NULL);
		keep = f->tool ? json_is_object(o) && filter_keep(f, o) : true;
		if (keep)
			show_line(out, r, o);
		json_decref(o);
		if (keep && !r->nl)
			fprintf(out,
				"line %" PRIu64 ": no newline at the end: an appliance stopped "
				"mid-write\n",
				r->lineno);
	}
}

/* ---- one line per run ------------------------------------------------------- */

#define SHOW_TOOLS_MAX 8 /* tools named per run */

struct runs {
	json_t *by_id; /* run id -> {start, end, tools: {tool: n}, refused, failed} */
	json_t *order; /* run ids, as they came */
	size_t dropped;
};

static json_t *run_entry(struct runs *rs, const json_t *o)
{
	const char *id = str_member(o, "run");
	json_t *e;

	if (!id)
		return NULL;
	if ((e = json_object_get(rs->by_id, id)))
		return e;
	if (json_array_size(rs->order) >= SHOW_RUNS_MAX) {
		rs->dropped++;
		return NULL;
	}
	e = json_pack("{s{}sisi}", "tools", "refused", 0, "failed", 0);
	if (!e || json_object_set_new(rs->by_id, id, e) < 0 ||
	    json_array_append_new(rs->order, json_string(id)) < 0)
		return NULL;
	return e;
}

static void count(json_t *obj, const char *key)
{
	json_object_set_new(obj, key,
			    json_integer(json_integer_value(json_object_get(obj, key)) + 1));
}

static void run_take(struct runs *rs, json_t *o)
{
	const char *ev = str_member(o, "ev"), *tool = str_member(o, "tool");
	const char *outcome = str_member(o, "outcome");
	json_t *e;

	if (!ev || (strncmp(ev, "run.", 4) != 0 && strncmp(ev, "call", 4) != 0))
		return;
	if (!(e = run_entry(rs, o)))
		return;
	if (strcmp(ev, "run.start") == 0)
		json_object_set(e, "start", o);
	else if (strcmp(ev, "run.end") == 0 || strcmp(ev, "run.refused") == 0)
		json_object_set(e, "end", o);
	else if (strcmp(ev, "call") == 0 && tool) {
		count(json_object_get(e, "tools"), tool);
		if (outcome && strcmp(outcome, "refused") == 0)
			count(e, "refused");
	} else if (strcmp(ev, "call.end") == 0 && outcome && strcmp(outcome, "ok") != 0)
		count(e, "failed");
}

static void run_put(FILE *out, const char *id, const json_t *e)
{
	const json_t *st = json_object_get(e, "start"), *end = json_object_get(e, "end");
	const json_t *first = st ? st : end;
	const char *t = first ? str_member(first, "t") : NULL, *tool;
	char shown[AUDIT_SHOWN_MAX];
	const json_t *n;
	size_t k = 0;

	fprintf(out, "%s  run %s", t && audit_time_valid(t) ? t : "(no time)               ",
		audit_escape(id, shown));
	/* a code tool's run: named by its start, or by its refusal */
	if (first && (tool = str_member(first, "tool")))
		fprintf(out, " (tool %s)", audit_escape(tool, shown));
	fputs(": ", out);
	if (st)
		text_put(out, st, RUN_WHO, RUN_WHO + strlen(RUN_WHO), false);
	else
		fputs("(no start recorded)", out);
	fputs(": ", out);
	json_object_foreach((json_t *)json_object_get(e, "tools"), tool, n) {
		if (k == SHOW_TOOLS_MAX) {
			fputs(", ...", out);
			break;
		}
		fprintf(out, "%s%s x%" JSON_INTEGER_FORMAT, k++ ? ", " : "",
			audit_escape(tool, shown), json_integer_value(n));
	}
	fprintf(out, "%s; %" JSON_INTEGER_FORMAT " refused, %" JSON_INTEGER_FORMAT " failed; ",
		k ? "" : "no calls", json_integer_value(json_object_get(e, "refused")),
		json_integer_value(json_object_get(e, "failed")));
	if (!end)
		fputs("no end recorded", out);
	else if (strcmp(json_string_value(json_object_get(end, "ev")), "run.refused") == 0)
		text_put(out, end, RUN_REFUSED, RUN_REFUSED + strlen(RUN_REFUSED), false);
	else
		text_put(out, end, RUN_END, RUN_END + strlen(RUN_END), false);
	fputc('\n', out);
}

static int runs_lines(struct audit_reader *r, struct tool_filter *f, FILE *out)
{
	struct runs rs = {json_object(), json_array(), 0};
	int got;

	if (!rs.by_id || !rs.order) {
		json_decref(rs.by_id);
		json_decref(rs.order);
		return -ENOMEM;
	}
	while ((got = audit_reader_next(r)) > 0) {
		json_t *o;

		if (got == AUDIT_LINE_LONG) {
			if ((got = audit_reader_skip(r)) < 0)
				break;
			continue;
		}
		o = json_loadb(r->line, r->line_len, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(o) && filter_keep(f, o))
			run_take(&rs, o);
		json_decref(o);
	}
	for (size_t i = 0; got == 0 && i < json_array_size(rs.order); i++) {
		const char *id = json_string_value(json_array_get(rs.order, i));

		run_put(out, id, json_object_get(rs.by_id, id));
	}
	if (got == 0 && rs.dropped)
		fprintf(out, "(%zu more lines of runs past the first %d runs, not shown)\n",
			rs.dropped, SHOW_RUNS_MAX);
	json_decref(rs.by_id);
	json_decref(rs.order);
	return got;
}

int audit_show_with(const char *file, const struct audit_show_opts *opts, FILE *out,
		    struct appl_err *err)
{
	struct tool_filter f = {opts->tool, NULL, 0};
	struct audit_reader *r;
	struct stat st;
	int fd, rc;

	if (f.tool && !audit_tool_name_valid(f.tool))
		return appl_err_set(err, -EINVAL, "not a code tool's name");
	fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", file);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return appl_err_set(err, -EINVAL, "%s: not a regular file", file);
	}
	r = malloc(sizeof(*r));
	if (f.tool)
		f.runs = json_object();
	if (!r || (f.tool && !f.runs)) {
		free(r);
		close(fd);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	rc = audit_reader_init(r, fd, UINT64_MAX);
	if (rc == 0)
		rc = opts->runs ? runs_lines(r, &f, out) : show_lines(r, &f, out);
	if (rc == 0)
		filter_end(&f, out);
	json_decref(f.runs);
	free(r);
	close(fd);
	return rc < 0 ? appl_err_errno(err, rc, -rc, "reading %s", file) : 0;
}

int audit_show(const char *file, FILE *out, struct appl_err *err)
{
	const struct audit_show_opts o = {.runs = false};

	return audit_show_with(file, &o, out, err);
}

int audit_show_runs(const char *file, FILE *out, struct appl_err *err)
{
	const struct audit_show_opts o = {.runs = true};

	return audit_show_with(file, &o, out, err);
}
