/* validate.c: running a compiled schema over an instance (see schema.h).
 *
 * Each subschema evaluation returns 1 (valid), 0 (invalid) or a negative
 * code (a cap was reached, out of memory). Evaluation stops at the first
 * failure that decides the result, so exactly one message is written: the
 * deepest failure on the path that decided it. Inside anyOf, oneOf, not, if,
 * contains and propertyNames a failure is expected, and no message is made
 * there ("quiet"); caps and errors always stop everything. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "schema/internal.h"

unsigned schema_type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return T_OBJ;
	case JSON_ARRAY:
		return T_ARR;
	case JSON_STRING:
		return T_STR;
	case JSON_INTEGER:
		return T_INT;
	case JSON_REAL:
		/* 1.0 is an integer for JSON Schema. */
		return schema_dbl_integral(json_real_value(v)) ? T_INT : T_NUM;
	case JSON_TRUE:
	case JSON_FALSE:
		return T_BOOL;
	case JSON_NULL:
		return T_NULL;
	}
	return 0;
}

/* Exact for two integers; else in long double, which holds every int64
 * exactly where it is wider than double (x86-64, aarch64). */
int schema_num_cmp(const json_t *a, const json_t *b)
{
	long double x, y;

	if (json_is_integer(a) && json_is_integer(b)) {
		json_int_t i = json_integer_value(a), j = json_integer_value(b);
		return (i > j) - (i < j);
	}
	x = json_is_integer(a) ? (long double)json_integer_value(a) : json_real_value(a);
	y = json_is_integer(b) ? (long double)json_integer_value(b) : json_real_value(b);
	return (x > y) - (x < y);
}

void schema_num_show(char *out, size_t outsz, const json_t *v)
{
	if (json_is_integer(v)) {
		snprintf(out, outsz, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return;
	}
	snprintf(out, outsz, "%.15g", json_real_value(v));
	/* Shortest form that reads back the same. */
	if (strtod(out, NULL) != json_real_value(v))
		snprintf(out, outsz, "%.17g", json_real_value(v));
}

/* ---- instance path ----------------------------------------------------- */

void schema_path_push_key(struct vc *vc, const char *key)
{
	if (vc->n_path < sizeof(vc->path) / sizeof(vc->path[0]))
		vc->path[vc->n_path] = (struct seg){key, 0};
	vc->n_path++;
}

void schema_path_push_idx(struct vc *vc, size_t idx)
{
	if (vc->n_path < sizeof(vc->path) / sizeof(vc->path[0]))
		vc->path[vc->n_path] = (struct seg){NULL, idx};
	vc->n_path++;
}

void schema_path_pop(struct vc *vc)
{
	vc->n_path--;
}

/* One segment as a JSON pointer token (~ is ~0, / is ~1), name cut. */
#define SEG_BUF	 (APPL_SCHEMA_NAME_SHOWN_MAX * 2 + 16)
#define PATH_BUF (APPL_SCHEMA_PATH_SHOWN_MAX + SEG_BUF + 8)

static size_t seg_render(const struct seg *g, char *out, size_t outsz)
{
	char shown[APPL_SCHEMA_NAME_SHOWN_MAX + 4];
	size_t o = 0;

	if (!g->key)
		return (size_t)snprintf(out, outsz, "/%zu", g->idx);
	schema_shown(shown, sizeof(shown), g->key, APPL_SCHEMA_NAME_SHOWN_MAX);
	out[o++] = '/';
	for (const char *p = shown; *p && o + 3 < outsz; p++) {
		if (*p == '~' || *p == '/') {
			out[o++] = '~';
			out[o++] = *p == '~' ? '0' : '1';
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
	return o;
}

/* The instance path; when longer than the cap, the segments nearest the
 * failure are kept. */
static void path_render(const struct vc *vc, char *out, size_t outsz)
{
	char full[PATH_BUF], seg[SEG_BUF];
	size_t cap = sizeof(vc->path) / sizeof(vc->path[0]);
	size_t n = vc->n_path < cap ? vc->n_path : cap, first = n, total = 0, len = 0;

	if (n == 0) {
		snprintf(out, outsz, "(root)");
		return;
	}
	while (first > 0) {
		size_t l = seg_render(&vc->path[first - 1], seg, sizeof(seg));
		if (first != n && total + l > APPL_SCHEMA_PATH_SHOWN_MAX)
			break;
		total += l;
		first--;
	}
	full[0] = '\0';
	for (size_t i = first; i < n; i++)
		len += seg_render(&vc->path[i], full + len, sizeof(full) - len);
	snprintf(out, outsz, "%s%s", first > 0 ? "..." : "", full);
}

/* ---- failures ---------------------------------------------------------- */

/* Append s to line, cut at its size: a message has a fixed cap. */
static void line_put(char *line, size_t size, const char *s)
{
	size_t len = strlen(line), n = strlen(s);

	if (n > size - 1 - len)
		n = size - 1 - len;
	memcpy(line + len, s, n);
	line[len + n] = '\0';
}

int schema_fail(struct vc *vc, const char *kw, const char *fmt, ...)
{
	char path[PATH_BUF + 4];
	char msg[APPL_ERR_MSG_MAX];
	char line[APPL_TOOL_ERROR_MAX + 1];
	va_list ap;

	if (vc->quiet || !vc->err)
		return 0;
	vc->failed = kw ? kw : "type"; /* shown without one: a type (or a false schema) */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	appl_utf8_trim(msg);
	path_render(vc, path, sizeof(path));
	line[0] = '\0';
	line_put(line, sizeof(line), path);
	line_put(line, sizeof(line), ": ");
	if (kw) {
		line_put(line, sizeof(line), kw);
		line_put(line, sizeof(line), ": ");
	}
	line_put(line, sizeof(line), msg);
	appl_utf8_trim(line);
	appl_err_set(vc->err, -EINVAL, "%s", line);
	return 0;
}

int schema_cap(struct vc *vc, const char *what)
{
	return appl_err_set(vc->err, -E2BIG,
			    "validation stopped: too many %s (a cap of the gateway)", what);
}

/* ---- JSON Schema equality: 1 and 1.0 are equal, key order is not ------ */

static int arrays_equal(struct vc *vc, const json_t *a, const json_t *b)
{
	size_t len = json_array_size(a);

	if (len != json_array_size(b))
		return 0;
	for (size_t i = 0; i < len; i++) {
		int r = schema_json_equal(vc, json_array_get(a, i), json_array_get(b, i));
		if (r != 1)
			return r;
	}
	return 1;
}

static int objects_equal(struct vc *vc, const json_t *a, const json_t *b)
{
	const char *key;
	json_t *va;

	if (json_object_size(a) != json_object_size(b))
		return 0;
	json_object_foreach((json_t *)a, key, va) {
		const json_t *vb = json_object_get(b, key);
		int r = vb ? schema_json_equal(vc, va, vb) : 0;
		if (r != 1)
			return r;
	}
	return 1;
}

int schema_json_equal(struct vc *vc, const json_t *a, const json_t *b)
{
	if (++vc->compares > APPL_SCHEMA_COMPARES_MAX)
		return schema_cap(vc, "value comparisons");
	if (json_is_number(a) && json_is_number(b))
		return schema_num_cmp(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return 0;
	switch (json_typeof(a)) {
	case JSON_STRING:
		return json_string_length(a) == json_string_length(b) &&
		       !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
	case JSON_ARRAY:
		return arrays_equal(vc, a, b);
	case JSON_OBJECT:
		return objects_equal(vc, a, b);
	default:
		return 1;
	}
}

/* ---- the engine -------------------------------------------------------- */

int schema_node_validate(struct vc *vc, const struct node *n, const json_t *inst)
{
	unsigned type;
	int r = 1;

	if (++vc->visits > APPL_SCHEMA_VISITS_MAX)
		return schema_cap(vc, "subschemas evaluated");
	if (vc->depth >= APPL_SCHEMA_EVAL_DEPTH_MAX)
		return schema_cap(vc, "nested subschemas");
	if (n->boolean >= 0) {
		if (n->boolean)
			return 1;
		schema_fail(vc, NULL, "not allowed here (false schema)");
		if (!vc->quiet)
			vc->failed = "false";
		return 0;
	}
	type = schema_type_of(inst);
	vc->depth++;
	for (size_t i = 0; i < n->n_kws && r > 0; i++) {
		const struct kw *kw = &n->kws[i];
		if (kw->def->validate && (kw->def->types & type))
			r = kw->def->validate(vc, kw, inst);
	}
	vc->depth--;
	return r;
}

static int vc_regex_setup(struct vc *vc)
{
	vc->md = pcre2_match_data_create(1, NULL);
	vc->mctx = pcre2_match_context_create(NULL);
	if (!vc->md || !vc->mctx)
		return appl_err_set(vc->err, -ENOMEM, "out of memory");
	pcre2_set_match_limit(vc->mctx, APPL_SCHEMA_REGEX_MATCH_LIMIT);
	pcre2_set_depth_limit(vc->mctx, APPL_SCHEMA_REGEX_DEPTH_LIMIT);
	pcre2_set_heap_limit(vc->mctx, APPL_SCHEMA_REGEX_HEAP_KIB);
	return 0;
}

int schema_validate_kw(const struct schema *s, const json_t *instance, struct appl_err *err,
		       const char **keyword)
{
	struct appl_err local = {0};
	struct vc vc = {.s = s, .err = err ? err : &local};
	int r;

	if (keyword)
		*keyword = NULL;
	appl_err_clear(vc.err);
	if (!s || !instance)
		return appl_err_set(err, -EINVAL, "no schema or no instance");
	/* The evaluation and the comparisons recurse on the instance. */
	if (!schema_json_depth_ok(instance, 0))
		return appl_err_set(err, -E2BIG, "(root): nested deeper than %d levels",
				    APPL_SCHEMA_DEPTH_MAX);
	r = s->n_codes ? vc_regex_setup(&vc) : 0;
	if (r == 0)
		r = schema_node_validate(&vc, s->root, instance);
	pcre2_match_data_free(vc.md);
	pcre2_match_context_free(vc.mctx);
	if (r == 1)
		return 0;
	if (r == 0 && vc.err->code == 0)
		appl_err_set(vc.err, -EINVAL, "(root): does not validate");
	if (r == 0 && keyword)
		*keyword = vc.failed;
	return r == 0 ? -EINVAL : r;
}

int schema_validate(const struct schema *s, const json_t *instance, struct appl_err *err)
{
	return schema_validate_kw(s, instance, err, NULL);
}
