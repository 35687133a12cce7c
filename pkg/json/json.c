/* json.c: strict JSON loading (see json.h). */
#include "json/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* 0 when buf[0..len) nests arrays and objects at most max_depth deep (a
 * byte scan that skips strings), before jansson builds anything. */
static int appl_json_depth_check(const char *buf, size_t len, unsigned max_depth)
{
	unsigned depth = 0;
	int in_string = 0;
	int escaped = 0;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_string) {
			if (escaped)
				escaped = 0;
			else if (c == '\\')
				escaped = 1;
			else if (c == '"')
				in_string = 0;
			continue;
		}
		switch (c) {
		case '"':
			in_string = 1;
			break;
		case '[':
		case '{':
			if (++depth > max_depth)
				return -E2BIG;
			break;
		case ']':
		case '}':
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
	}
	return 0;
}

json_t *appl_json_load(const char *buf, size_t len, size_t max_len, unsigned max_depth,
		       const char *what, struct appl_err *err)
{
	json_error_t jerr;
	const char *nul;
	json_t *v;

	if (len > max_len) {
		appl_err_set(err, -EFBIG, "%s: %zu bytes, more than the cap of %zu", what, len,
			     max_len);
		return NULL;
	}
	/* No JSON text holds a raw NUL byte, yet jansson steps over one
	 * between tokens: a reader of the text and the parser would not agree
	 * on what it says. */
	if ((nul = memchr(buf, '\0', len))) {
		appl_err_set(err, -EINVAL, "%s: a NUL byte at offset %zu (JSON text holds none)",
			     what, (size_t)(nul - buf));
		return NULL;
	}
	if (appl_json_depth_check(buf, len, max_depth) < 0) {
		appl_err_set(err, -E2BIG, "%s: nested deeper than %u levels", what, max_depth);
		return NULL;
	}
	/* JSON_REJECT_DUPLICATES: two values for one key are how a reviewer and a
	 * parser come to disagree about what a document says. Without
	 * JSON_ALLOW_NUL, jansson refuses \u0000 inside strings. */
	v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!v) {
		appl_err_set(err, -EINVAL, "%s: invalid JSON at line %d column %d: %s", what,
			     jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	return v;
}

int appl_json_keys_check(const json_t *obj, const char *const *allowed, const char *path,
			 struct appl_err *err)
{
	const char *key;
	json_t *val;

	json_object_foreach((json_t *)obj, key, val) {
		size_t i;
		(void)val;
		for (i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				break;
		if (!allowed[i])
			return appl_err_set(err, -EINVAL, "%s%s%.64s: unknown key", path,
					    *path ? "." : "", key);
	}
	return 0;
}

const char *appl_json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

/* 1 when v nests at most `left` levels of arrays and objects. The recursion
 * is bounded by `left`, not by v. */
int appl_json_depth_within(const json_t *v, unsigned left)
{
	const char *key;
	json_t *x;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return 1;
	if (left == 0)
		return 0;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (!appl_json_depth_within(x, left - 1))
				return 0;
		return 1;
	}
	json_object_foreach((json_t *)v, key, x)
		if (!appl_json_depth_within(x, left - 1))
			return 0;
	return 1;
}

/* A string's length once quoted and escaped as jansson escapes it: '"' and
 * '\\' and the five short control escapes take two bytes, every other
 * control byte six (\u00XX); all else, UTF-8 included, passes as it is. */
static size_t string_size(const char *s, size_t n)
{
	size_t out = n + 2;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' ||
		    c == '\t')
			out += 1;
		else
			out += 5;
	}
	return out;
}

size_t appl_json_size(const json_t *v)
{
	const char *key;
	size_t n, i;
	json_t *x;

	switch (json_typeof(v)) {
	case JSON_STRING:
		return string_size(json_string_value(v), json_string_length(v));
	case JSON_TRUE:
	case JSON_NULL:
		return 4;
	case JSON_FALSE:
		return 5;
	case JSON_INTEGER:
	case JSON_REAL:
		return json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	case JSON_ARRAY:
		n = json_array_size(v) > 0 ? json_array_size(v) + 1 : 2; /* [ ] and commas */
		json_array_foreach(v, i, x)
			n += appl_json_size(x);
		return n;
	case JSON_OBJECT:
		n = json_object_size(v) > 0 ? 2 * json_object_size(v) + 1 : 2; /* {:,} */
		json_object_foreach((json_t *)v, key, x)
			n += string_size(key, strlen(key)) + appl_json_size(x);
		return n;
	}
	return 0;
}
