/* verify_rec.c: one line of an audit log, parsed for the checker: JSON
 * with duplicate keys refused, an object, the five members every line has
 * each of its type; and the members of a log.open line. The line is
 * untrusted: nothing of it is used before it is checked. */
#include "audit/verify_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- small checks ---------------------------------------------------------- */

bool audit_hex_valid(const char *s, size_t want)
{
	return s && strlen(s) == want && strspn(s, "0123456789abcdef") == want;
}

/* A name in the log's directory: never a path, so a log cannot make the
 * checker read outside that directory. */
bool audit_name_plain(const char *s)
{
	return s && s[0] && strlen(s) <= NAME_MAX && !strchr(s, '/') && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0;
}

const char *audit_member_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* A non-negative integer member: 0, or -1 when missing or of another type. */
int audit_member_u64(const json_t *o, const char *key, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* ---- one line, parsed ------------------------------------------------------- */

void audit_rec_clear(struct rec *c)
{
	json_decref(c->obj);
	c->obj = NULL;
}

__attribute__((format(printf, 2, 3))) static int rec_fail(struct rec *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	audit_rec_clear(c);
	return -1;
}

/* The five members every line has, each of its type. */
static int rec_common(struct rec *c)
{
	uint64_t pid;

	if (audit_member_u64(c->obj, "n", &c->n) < 0 || c->n == 0)
		return rec_fail(c, "n: missing, or not a positive integer");
	c->prev = audit_member_str(c->obj, "prev");
	if (!audit_hex_valid(c->prev, AUDIT_HASH_HEX - 1))
		return rec_fail(c, "prev: missing, or not 64 lower-case hex digits");
	c->t = audit_member_str(c->obj, "t");
	if (!audit_time_valid(c->t))
		return rec_fail(c, "t: missing, or not a time YYYY-MM-DDTHH:MM:SS.mmmZ");
	c->ev = audit_member_str(c->obj, "ev");
	if (!c->ev || !c->ev[0])
		return rec_fail(c, "ev: missing, or not a string");
	if (audit_member_u64(c->obj, "pid", &pid) < 0 || pid == 0)
		return rec_fail(c, "pid: missing, or not a positive integer");
	return 0;
}

/* Parse the reader's current line into c: 0, or -1 with c->why. */
int audit_rec_parse(struct rec *c, const struct audit_reader *r)
{
	char shown[AUDIT_SHOWN_MAX];
	json_error_t jerr;

	c->lineno = r->lineno;
	c->end = r->off;
	c->len = r->line_len;
	c->nl = r->nl;
	c->obj = NULL;
	audit_line_hash(r->line, r->line_len, c->hash);
	/* Duplicate keys are refused: a reader and the writer must never
	 * disagree about what a line says. No JSON_DECODE_ANY: an object or
	 * an array only, and the array is refused below. */
	c->obj = json_loadb(r->line, r->line_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!c->obj)
		return rec_fail(c, "not a log line: not JSON (column %d: %s)", jerr.column,
				audit_escape(jerr.text, shown));
	if (!json_is_object(c->obj))
		return rec_fail(c, "not a log line: not a JSON object");
	return rec_common(c);
}

/* ---- log.open --------------------------------------------------------------- */

int audit_open_info_parse(const json_t *o, struct open_info *oi, char why[WHY_MAX])
{
	const json_t *p = json_object_get(o, "previous");

	memset(oi, 0, sizeof(*oi));
	if (audit_member_u64(o, "file", &oi->file) < 0 || oi->file == 0)
		return snprintf(why, WHY_MAX, "log.open: file: missing, or not a positive integer"),
		       -1;
	if (json_is_null(p))
		return 0;
	if (!json_is_object(p))
		return snprintf(why, WHY_MAX,
				"log.open: previous: missing, or not null or an object"),
		       -1;
	oi->name = audit_member_str(p, "name");
	oi->hash = audit_member_str(p, "hash");
	if (!audit_name_plain(oi->name))
		return snprintf(why, WHY_MAX,
				"log.open: previous.name: missing, or not a plain file name (no "
				"'/', not . or ..)"),
		       -1;
	if (audit_member_u64(p, "n", &oi->n) < 0 || oi->n == 0)
		return snprintf(why, WHY_MAX,
				"log.open: previous.n: missing, or not a positive integer"),
		       -1;
	if (!audit_hex_valid(oi->hash, AUDIT_HASH_HEX - 1))
		return snprintf(
			       why, WHY_MAX,
			       "log.open: previous.hash: missing, or not 64 lower-case hex digits"),
		       -1;
	oi->has_prev = true;
	return 0;
}
