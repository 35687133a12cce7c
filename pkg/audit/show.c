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
	{"run.start", "run {run}: client {client}, role {role}, revision {revision}, code "
		      "{code_bytes} bytes"},
	{"run.refused", "run {run} refused: client {client}: {reason}"},
	{"call", "  run {run} call {id}: {tool} ({access}), {args_bytes} argument bytes: "
		 "{outcome}[: {reason}]"},
	{"call.end", "  run {run} call {id}: {tool}: {outcome} in {ms} ms, {result_bytes} result "
		     "bytes"},
	{"run.end", "run {run} end: {reason} after {ms} ms, {calls} calls, {out_bytes} output "
		    "bytes[, answered {answered}]"},
	{"torn", "torn: the line before is a fragment of {bytes} bytes"},
	{"resumed", "writing resumed after {failed_ms} ms ({error}), {dropped} events dropped"},
	{"seal", "seal: kid {kid}, epoch {epoch}"},
};

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

static void show_line(FILE *out, const struct audit_reader *r)
{
	json_t *o = json_loadb(r->line, r->line_len, JSON_REJECT_DUPLICATES, NULL);
	const char *ev = json_is_object(o) ? str_member(o, "ev") : NULL, *t;
	const char *text = "{ev} (an event this version does not know)";

	if (!ev) {
		fprintf(out, "line %" PRIu64 ": not a log line (%zu bytes)\n", r->lineno,
			r->line_len);
		json_decref(o);
		return;
	}
	for (size_t i = 0; i < sizeof(shown_events) / sizeof(shown_events[0]); i++)
		if (strcmp(ev, shown_events[i].ev) == 0)
			text = shown_events[i].text;
	t = str_member(o, "t");
	fprintf(out, "%s  ", audit_time_valid(t) ? t : "(no time)               ");
	text_put(out, o, text, text + strlen(text), false);
	fputc('\n', out);
	json_decref(o);
}

static int show_lines(struct audit_reader *r, FILE *out)
{
	int got, rc;

	for (;;) {
		got = audit_reader_next(r);
		if (got <= 0)
			return got;
		if (got == AUDIT_LINE_LONG) {
			fprintf(out, "line %" PRIu64 ": longer than %d bytes, not shown\n",
				r->lineno, AUDIT_LINE_MAX);
			if ((rc = audit_reader_skip(r)) < 0)
				return rc;
			continue;
		}
		show_line(out, r);
		if (!r->nl)
			fprintf(out,
				"line %" PRIu64 ": no newline at the end: an appliance stopped "
				"mid-write\n",
				r->lineno);
	}
}

int audit_show(const char *file, FILE *out, struct appl_err *err)
{
	struct audit_reader *r;
	struct stat st;
	int fd, rc;

	fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", file);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return appl_err_set(err, -EINVAL, "%s: not a regular file", file);
	}
	if (!(r = malloc(sizeof(*r)))) {
		close(fd);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	rc = audit_reader_init(r, fd, UINT64_MAX);
	if (rc == 0)
		rc = show_lines(r, out);
	free(r);
	close(fd);
	return rc < 0 ? appl_err_errno(err, rc, -rc, "reading %s", file) : 0;
}
