/* keywords.c: the dispatch table. For each keyword: the dialects it belongs
 * to, the instance types it looks at, how its value is checked and compiled,
 * and how an instance is validated against it. A keyword's value of the
 * wrong form is an error at compile time (-EINVAL), never skipped: a
 * misread constraint would let arguments through unchecked. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json/json.h"
#include "schema/internal.h"

#define T_NUMS (T_INT | T_NUM)
#define SHOWN  (APPL_SCHEMA_NAME_SHOWN_MAX * 4 + 1)

/* ======================================================================= */
/* compile helpers                                                          */

static int bad(struct cc *cc, const char *what)
{
	return schema_cc_fail(cc, -EINVAL, "expected %s", what);
}

/* A keyword of the same node compiled before this one (table order). */
static const struct kw *sibling(const struct node *n, const char *name)
{
	for (size_t i = 0; i < n->n_kws; i++)
		if (!strcmp(n->kws[i].def->name, name))
			return &n->kws[i];
	return NULL;
}

/* A non-negative integer; 2.0 counts, as the specification allows. */
static bool count_of(const json_t *v, size_t *out)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);
		if (i < 0)
			return false;
		*out = (unsigned long long)i > SIZE_MAX ? SIZE_MAX : (size_t)i;
		return true;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (!(d >= 0) || !schema_dbl_integral(d))
			return false;
		*out = d >= (double)SIZE_MAX ? SIZE_MAX : (size_t)d;
		return true;
	}
	return false;
}

static int kc_count(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	return count_of(kw->val, &kw->min) ? 0 : bad(cc, "a non-negative integer");
}

static int kc_number(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	return json_is_number(kw->val) ? 0 : bad(cc, "a number");
}

static int kc_multiple(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	if (!json_is_number(kw->val) || !(json_number_value(kw->val) > 0))
		return bad(cc, "a number greater than 0");
	return 0;
}

static int kc_bool(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	if (!json_is_boolean(kw->val))
		return bad(cc, "true or false");
	kw->min = json_is_true(kw->val);
	return 0;
}

static int kc_any(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)cc, (void)n, (void)obj, (void)kw;
	return 0;
}

static int kc_array(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	return json_is_array(kw->val) ? 0 : bad(cc, "an array");
}

static bool strings_only(const json_t *arr)
{
	size_t i;
	json_t *v;

	if (!json_is_array(arr))
		return false;
	json_array_foreach(arr, i, v)
		if (!json_is_string(v))
			return false;
	return true;
}

static int kc_strings(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	return strings_only(kw->val) ? 0 : bad(cc, "an array of strings");
}

static int kc_one(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)obj;
	kw->one = schema_node_compile(cc, kw->val, n->base, NULL);
	return kw->one ? 0 : cc->rc;
}

static int compile_list(struct cc *cc, struct node *n, struct kw *kw, bool may_be_empty)
{
	size_t len = json_array_size(kw->val);

	if (!json_is_array(kw->val) || (len == 0 && !may_be_empty))
		return bad(cc, "a non-empty array of schemas");
	kw->n = len;
	kw->many = schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->many));
	if (!kw->many)
		return cc->rc;
	for (size_t i = 0; i < len; i++) {
		char key[24];
		snprintf(key, sizeof(key), "%zu", i);
		kw->many[i] = schema_node_compile(cc, json_array_get(kw->val, i), n->base, key);
		if (!kw->many[i])
			return cc->rc;
	}
	return 0;
}

static int kc_list(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)obj;
	return compile_list(cc, n, kw, false);
}

/* An object of subschemas by name; with_re: the names are patterns. */
static int compile_map(struct cc *cc, struct node *n, struct kw *kw, bool with_re)
{
	size_t len = json_object_size(kw->val), i = 0;
	const char *key;
	json_t *sub;

	if (!json_is_object(kw->val))
		return bad(cc, "an object of schemas");
	kw->n = len;
	kw->many = schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->many));
	kw->names = schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->names));
	kw->res = with_re ? schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->res)) : NULL;
	if (!kw->many || !kw->names || (with_re && !kw->res))
		return cc->rc;
	json_object_foreach((json_t *)kw->val, key, sub) {
		size_t mark = schema_where_push(cc, key);
		if (with_re && schema_regex_compile(cc, key, strlen(key), &kw->res[i]) < 0)
			return cc->rc;
		kw->names[i] = key;
		kw->many[i] = schema_node_compile(cc, sub, n->base, NULL);
		if (!kw->many[i])
			return cc->rc;
		schema_where_pop(cc, mark);
		i++;
	}
	return 0;
}

static int kc_map(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)obj;
	return compile_map(cc, n, kw, false);
}

static int kc_pattern_props(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)obj;
	return compile_map(cc, n, kw, true);
}

static int kc_pattern(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	if (!json_is_string(kw->val))
		return bad(cc, "a string (a regular expression)");
	kw->res = schema_arena_alloc(cc, sizeof(*kw->res));
	if (!kw->res)
		return cc->rc;
	return schema_regex_compile(cc, json_string_value(kw->val), json_string_length(kw->val),
				    &kw->res[0]);
}

static const struct {
	const char *name;
	unsigned bits;
} type_names[] = {
	{"null", T_NULL},   {"boolean", T_BOOL}, {"object", T_OBJ}, {"array", T_ARR},
	{"number", T_NUMS}, {"integer", T_INT},	 {"string", T_STR},
};

static bool type_bits(const json_t *v, unsigned *mask)
{
	const char *s = json_string_value(v);

	for (size_t i = 0; s && i < sizeof(type_names) / sizeof(type_names[0]); i++) {
		if (!strcmp(s, type_names[i].name)) {
			*mask |= type_names[i].bits;
			return true;
		}
	}
	return false;
}

static int kc_type(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	size_t i;
	json_t *v;

	(void)n, (void)obj;
	if (json_is_string(kw->val))
		return type_bits(kw->val, &kw->mask) ? 0 : bad(cc, "a JSON Schema type name");
	if (!json_is_array(kw->val) || json_array_size(kw->val) == 0)
		return bad(cc, "a type name or a non-empty array of them");
	json_array_foreach(kw->val, i, v)
		if (!type_bits(v, &kw->mask))
			return bad(cc, "an array of JSON Schema type names");
	return 0;
}

static int kc_dep_required(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	const char *key;
	json_t *v;

	(void)n, (void)obj;
	if (!json_is_object(kw->val))
		return bad(cc, "an object of arrays of strings");
	json_object_foreach((json_t *)kw->val, key, v)
		if (!strings_only(v))
			return bad(cc, "an object of arrays of strings");
	return 0;
}

/* draft-07 "dependencies": each value is a list of names or a subschema. */
static int kc_dependencies(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	size_t len = json_object_size(kw->val), i = 0;
	const char *key;
	json_t *v;

	(void)obj;
	if (!json_is_object(kw->val))
		return bad(cc, "an object");
	kw->n = len;
	kw->many = schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->many));
	kw->names = schema_arena_alloc(cc, (len ? len : 1) * sizeof(*kw->names));
	if (!kw->many || !kw->names)
		return cc->rc;
	json_object_foreach((json_t *)kw->val, key, v) {
		kw->names[i] = key;
		if (json_is_array(v) && !strings_only(v))
			return bad(cc, "arrays of strings or schemas");
		if (!json_is_array(v)) {
			kw->many[i] = schema_node_compile(cc, v, n->base, key);
			if (!kw->many[i])
				return cc->rc;
		}
		i++;
	}
	return 0;
}

static int kc_items(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	const struct kw *prefix = sibling(n, "prefixItems");

	(void)obj;
	/* draft-07's array form is a tuple; in 2020-12 an array is not a
	 * schema, and compiling it as one fails (prefixItems is the tuple). */
	if (cc->s->draft == SCHEMA_DRAFT_07 && json_is_array(kw->val))
		return compile_list(cc, n, kw, true);
	kw->min = prefix ? prefix->n : 0;
	kw->one = schema_node_compile(cc, kw->val, n->base, NULL);
	return kw->one ? 0 : cc->rc;
}

static int kc_additional_items(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	kw->aux[0] = sibling(n, "items");
	return kc_one(cc, n, obj, kw);
}

static int kc_contains(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	const struct kw *lo = sibling(n, "minContains"), *hi = sibling(n, "maxContains");

	kw->min = lo ? lo->min : 1;
	kw->max = hi ? hi->min : SIZE_MAX;
	return kc_one(cc, n, obj, kw);
}

static int kc_additional_props(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	kw->aux[0] = sibling(n, "properties");
	kw->aux[1] = sibling(n, "patternProperties");
	return kc_one(cc, n, obj, kw);
}

static int kc_if(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	const struct kw *then = sibling(n, "then"), *els = sibling(n, "else");

	kw->many = schema_arena_alloc(cc, 2 * sizeof(*kw->many));
	if (!kw->many)
		return cc->rc;
	kw->n = 2;
	kw->many[0] = then ? then->one : NULL;
	kw->many[1] = els ? els->one : NULL;
	return kc_one(cc, n, obj, kw);
}

static int kc_ref(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)obj;
	if (!json_is_string(kw->val))
		return bad(cc, "a string (a URI reference)");
	return schema_ref_add(cc, kw, n->base, json_string_value(kw->val));
}

/* Keywords whose meaning depends on evaluation order or on documents this
 * validator never loads: refusing them is the only way not to pass
 * arguments it did not really check. */
static int kc_refuse(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw)
{
	(void)n, (void)obj;
	return schema_cc_fail(cc, -ENOTSUP, "\"%s\" is not supported", kw->def->name);
}

/* ======================================================================= */
/* validation helpers                                                       */

static int sub_key(struct vc *vc, const struct node *n, const char *key, const json_t *v)
{
	int r;

	schema_path_push_key(vc, key);
	r = schema_node_validate(vc, n, v);
	schema_path_pop(vc);
	return r;
}

static int sub_idx(struct vc *vc, const struct node *n, size_t idx, const json_t *v)
{
	int r;

	schema_path_push_idx(vc, idx);
	r = schema_node_validate(vc, n, v);
	schema_path_pop(vc);
	return r;
}

/* Evaluate where failing is expected (anyOf, not, if, contains): no message. */
static int quietly(struct vc *vc, const struct node *n, const json_t *v)
{
	int r;

	vc->quiet++;
	r = schema_node_validate(vc, n, v);
	vc->quiet--;
	return r;
}

/* Characters, not bytes: JSON Schema counts code points. */
static size_t utf8_length(const char *s, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xc0) != 0x80;
	return n;
}

/* ======================================================================= */
/* validate: any type                                                       */

static int kv_type(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	char want[128] = "";
	size_t len = 0;

	if (schema_type_of(inst) & kw->mask)
		return 1;
	if (vc->quiet)
		return 0;
	for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
		unsigned b = type_names[i].bits;
		if ((kw->mask & b) != b || (b == T_INT && (kw->mask & T_NUM)))
			continue;
		len += (size_t)snprintf(want + len, sizeof(want) - len, "%s%s", len ? " or " : "",
					type_names[i].name);
	}
	return schema_fail(vc, NULL, "expected %s, got %s", want, appl_json_type_name(inst));
}

static int kv_enum(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	size_t i;
	json_t *v;

	json_array_foreach(kw->val, i, v) {
		int r = schema_json_equal(vc, inst, v);
		if (r != 0)
			return r;
	}
	return schema_fail(vc, "enum", "not one of the %zu allowed values",
			   json_array_size(kw->val));
}

static int kv_const(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	int r = schema_json_equal(vc, inst, kw->val);

	return r != 0 ? r : schema_fail(vc, "const", "not the allowed value");
}

static int kv_all_of(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	for (size_t i = 0; i < kw->n; i++) {
		int r = schema_node_validate(vc, kw->many[i], inst);
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_any_of(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	for (size_t i = 0; i < kw->n; i++) {
		int r = quietly(vc, kw->many[i], inst);
		if (r != 0)
			return r;
	}
	return schema_fail(vc, "anyOf", "matches none of the %zu schemas", kw->n);
}

static int kv_one_of(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	size_t hits = 0;

	for (size_t i = 0; i < kw->n && hits < 2; i++) {
		int r = quietly(vc, kw->many[i], inst);
		if (r < 0)
			return r;
		hits += (size_t)r;
	}
	if (hits == 1)
		return 1;
	return schema_fail(vc, "oneOf", "matches %s of the %zu schemas, not exactly one",
			   hits ? "more than one" : "none", kw->n);
}

static int kv_not(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	int r = quietly(vc, kw->one, inst);

	if (r < 0)
		return r;
	return r ? schema_fail(vc, "not", "must not match the schema") : 1;
}

static int kv_if(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	int r = quietly(vc, kw->one, inst);
	const struct node *branch;

	if (r < 0)
		return r;
	branch = kw->many[r ? 0 : 1];
	return branch ? schema_node_validate(vc, branch, inst) : 1;
}

static int kv_ref(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return schema_node_validate(vc, kw->one, inst);
}

/* ======================================================================= */
/* validate: numbers and strings                                            */

static int bound(struct vc *vc, const struct kw *kw, const json_t *inst, int sign, bool strict)
{
	char shown[64];
	int c = schema_num_cmp(inst, kw->val) * sign;

	if (c > 0 || (c == 0 && !strict))
		return 1;
	if (vc->quiet)
		return 0;
	schema_num_show(shown, sizeof(shown), kw->val);
	return schema_fail(vc, kw->def->name, "must be %s %s",
			   sign > 0 ? (strict ? ">" : ">=") : (strict ? "<" : "<="), shown);
}

static int kv_minimum(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return bound(vc, kw, inst, 1, false);
}

static int kv_maximum(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return bound(vc, kw, inst, -1, false);
}

static int kv_ex_minimum(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return bound(vc, kw, inst, 1, true);
}

static int kv_ex_maximum(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return bound(vc, kw, inst, -1, true);
}

static bool is_multiple(const json_t *inst, const json_t *of)
{
	double q, r, diff;

	if (json_is_integer(inst) && json_is_integer(of))
		return json_integer_value(inst) % json_integer_value(of) == 0;
	/* In doubles, as the instance and the bound are: an infinite quotient
	 * is no multiple; else allow the rounding of decimal fractions that
	 * binary cannot hold (0.0075 / 0.0001 is 74.99999999999999). */
	q = json_number_value(inst) / json_number_value(of);
	if (!isfinite(q))
		return false;
	if (schema_dbl_integral(q))
		return true;
	r = (double)(long long)(q + (q < 0 ? -0.5 : 0.5));
	diff = q - r < 0 ? r - q : q - r;
	return diff <= (q < 0 ? -q : q) * 4 * DBL_EPSILON;
}

static int kv_multiple_of(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	char shown[64];

	if (is_multiple(inst, kw->val))
		return 1;
	if (vc->quiet)
		return 0;
	schema_num_show(shown, sizeof(shown), kw->val);
	return schema_fail(vc, "multipleOf", "must be a multiple of %s", shown);
}

static int kv_min_length(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (utf8_length(json_string_value(inst), json_string_length(inst)) >= kw->min)
		return 1;
	return schema_fail(vc, "minLength", "must be at least %zu characters", kw->min);
}

static int kv_max_length(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (utf8_length(json_string_value(inst), json_string_length(inst)) <= kw->min)
		return 1;
	return schema_fail(vc, "maxLength", "must be at most %zu characters", kw->min);
}

static int kv_pattern(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	char shown[SHOWN];
	int r = schema_regex_match(vc, kw->res[0], json_string_value(inst),
				   json_string_length(inst));

	if (r != 0 || vc->quiet)
		return r;
	schema_shown(shown, sizeof(shown), json_string_value(kw->val), APPL_SCHEMA_NAME_SHOWN_MAX);
	return schema_fail(vc, "pattern", "does not match \"%s\"", shown);
}

/* ======================================================================= */
/* validate: arrays                                                         */

static int kv_min_items(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (json_array_size(inst) >= kw->min)
		return 1;
	return schema_fail(vc, "minItems", "must have at least %zu items", kw->min);
}

static int kv_max_items(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (json_array_size(inst) <= kw->min)
		return 1;
	return schema_fail(vc, "maxItems", "must have at most %zu items", kw->min);
}

static int kv_unique(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	size_t len = json_array_size(inst);

	if (!kw->min)
		return 1;
	/* Quadratic, so every comparison counts against
	 * APPL_SCHEMA_COMPARES_MAX. */
	for (size_t i = 0; i < len; i++) {
		for (size_t j = i + 1; j < len; j++) {
			int r = schema_json_equal(vc, json_array_get(inst, i),
						  json_array_get(inst, j));
			if (r < 0)
				return r;
			if (r)
				return schema_fail(vc, "uniqueItems", "items %zu and %zu are equal",
						   i, j);
		}
	}
	return 1;
}

static int tuple(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	size_t len = json_array_size(inst);

	for (size_t i = 0; i < kw->n && i < len; i++) {
		int r = sub_idx(vc, kw->many[i], i, json_array_get(inst, i));
		if (r <= 0)
			return r;
	}
	return 1;
}

static int rest(struct vc *vc, const struct node *n, size_t from, const json_t *inst)
{
	size_t len = json_array_size(inst);

	for (size_t i = from; i < len; i++) {
		int r = sub_idx(vc, n, i, json_array_get(inst, i));
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_prefix_items(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return tuple(vc, kw, inst);
}

static int kv_items(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return kw->many ? tuple(vc, kw, inst) : rest(vc, kw->one, kw->min, inst);
}

static int kv_additional_items(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	const struct kw *items = kw->aux[0];

	/* draft-07: without a tuple "items", "additionalItems" does nothing. */
	if (!items || !items->many)
		return 1;
	return rest(vc, kw->one, items->n, inst);
}

static int kv_contains(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	size_t len = json_array_size(inst), hits = 0;

	for (size_t i = 0; i < len && hits <= kw->max; i++) {
		if (hits >= kw->min && kw->max == SIZE_MAX)
			break;
		int r = quietly(vc, kw->one, json_array_get(inst, i));
		if (r < 0)
			return r;
		hits += (size_t)r;
	}
	if (hits < kw->min)
		return schema_fail(vc, "contains", "%zu items match, at least %zu must", hits,
				   kw->min);
	if (hits > kw->max)
		return schema_fail(vc, "maxContains", "more than %zu items match", kw->max);
	return 1;
}

/* ======================================================================= */
/* validate: objects                                                        */

static int kv_min_props(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (json_object_size(inst) >= kw->min)
		return 1;
	return schema_fail(vc, "minProperties", "must have at least %zu properties", kw->min);
}

static int kv_max_props(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	if (json_object_size(inst) <= kw->min)
		return 1;
	return schema_fail(vc, "maxProperties", "must have at most %zu properties", kw->min);
}

static int need_all(struct vc *vc, const char *kwname, const char *because, const json_t *names,
		    const json_t *inst)
{
	char a[SHOWN], b[SHOWN];
	size_t i;
	json_t *v;

	json_array_foreach(names, i, v) {
		if (json_object_get(inst, json_string_value(v)))
			continue;
		if (vc->quiet)
			return 0;
		schema_shown(a, sizeof(a), json_string_value(v), APPL_SCHEMA_NAME_SHOWN_MAX);
		if (!because)
			return schema_fail(vc, kwname, "missing property \"%s\"", a);
		schema_shown(b, sizeof(b), because, APPL_SCHEMA_NAME_SHOWN_MAX);
		return schema_fail(vc, kwname, "property \"%s\" requires \"%s\"", b, a);
	}
	return 1;
}

static int kv_required(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	return need_all(vc, "required", NULL, kw->val, inst);
}

static int kv_dep_required(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	const char *key;
	json_t *names;

	json_object_foreach((json_t *)kw->val, key, names) {
		if (!json_object_get(inst, key))
			continue;
		int r = need_all(vc, "dependentRequired", key, names, inst);
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_dep_schemas(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	for (size_t i = 0; i < kw->n; i++) {
		if (!json_object_get(inst, kw->names[i]))
			continue;
		int r = kw->many[i] ? schema_node_validate(vc, kw->many[i], inst)
				    : need_all(vc, kw->def->name, kw->names[i],
					       json_object_get(kw->val, kw->names[i]), inst);
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_properties(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	for (size_t i = 0; i < kw->n; i++) {
		const json_t *v = json_object_get(inst, kw->names[i]);
		if (!v)
			continue;
		int r = sub_key(vc, kw->many[i], kw->names[i], v);
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_pattern_props(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)inst, key, v) {
		for (size_t i = 0; i < kw->n; i++) {
			int r = schema_regex_match(vc, kw->res[i], key, strlen(key));
			if (r == 0)
				continue;
			if (r > 0)
				r = sub_key(vc, kw->many[i], key, v);
			if (r <= 0)
				return r;
		}
	}
	return 1;
}

/* 1 when key is declared by "properties" or matched by "patternProperties". */
static int declared(struct vc *vc, const struct kw *kw, const char *key)
{
	const struct kw *props = kw->aux[0], *pats = kw->aux[1];

	if (props && json_object_get(props->val, key))
		return 1;
	for (size_t i = 0; pats && i < pats->n; i++) {
		int r = schema_regex_match(vc, pats->res[i], key, strlen(key));
		if (r != 0)
			return r;
	}
	return 0;
}

static int kv_additional_props(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	char shown[SHOWN];
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)inst, key, v) {
		int r = declared(vc, kw, key);
		if (r != 0) {
			if (r < 0)
				return r;
			continue;
		}
		if (kw->one->boolean == 0) {
			if (vc->quiet)
				return 0;
			schema_shown(shown, sizeof(shown), key, APPL_SCHEMA_NAME_SHOWN_MAX);
			return schema_fail(vc, "additionalProperties",
					   "property \"%s\" is not allowed", shown);
		}
		r = sub_key(vc, kw->one, key, v);
		if (r <= 0)
			return r;
	}
	return 1;
}

static int kv_property_names(struct vc *vc, const struct kw *kw, const json_t *inst)
{
	char shown[SHOWN];
	const char *key;
	json_t *v;

	json_object_foreach((json_t *)inst, key, v) {
		json_t *name = json_stringn_nocheck(key, strlen(key));
		int r;
		if (!name)
			return appl_err_set(vc->err, -ENOMEM, "out of memory");
		r = quietly(vc, kw->one, name);
		json_decref(name);
		if (r != 0) {
			if (r < 0)
				return r;
			continue;
		}
		if (vc->quiet)
			return 0;
		schema_shown(shown, sizeof(shown), key, APPL_SCHEMA_NAME_SHOWN_MAX);
		return schema_fail(vc, "propertyNames", "property name \"%s\" is not allowed",
				   shown);
	}
	return 1;
}

/* ======================================================================= */
/* the table                                                                */

/* Order matters: a keyword that consults a sibling (additionalProperties,
 * items, contains, if) comes after it. */
const struct kw_def schema_kw_table[] = {
	{"$ref", D_ALL, T_ANY, true, false, kc_ref, kv_ref},
	{"$defs", D_ALL, T_ANY, false, false, kc_map, NULL},
	{"definitions", D_ALL, T_ANY, false, false, kc_map, NULL},
	{"type", D_ALL, T_ANY, false, false, kc_type, kv_type},
	{"enum", D_ALL, T_ANY, false, false, kc_array, kv_enum},
	{"const", D_ALL, T_ANY, false, false, kc_any, kv_const},
	{"minimum", D_ALL, T_NUMS, false, false, kc_number, kv_minimum},
	{"maximum", D_ALL, T_NUMS, false, false, kc_number, kv_maximum},
	{"exclusiveMinimum", D_ALL, T_NUMS, false, false, kc_number, kv_ex_minimum},
	{"exclusiveMaximum", D_ALL, T_NUMS, false, false, kc_number, kv_ex_maximum},
	{"multipleOf", D_ALL, T_NUMS, false, false, kc_multiple, kv_multiple_of},
	{"minLength", D_ALL, T_STR, false, false, kc_count, kv_min_length},
	{"maxLength", D_ALL, T_STR, false, false, kc_count, kv_max_length},
	{"pattern", D_ALL, T_STR, false, false, kc_pattern, kv_pattern},
	{"minItems", D_ALL, T_ARR, false, false, kc_count, kv_min_items},
	{"maxItems", D_ALL, T_ARR, false, false, kc_count, kv_max_items},
	{"uniqueItems", D_ALL, T_ARR, false, false, kc_bool, kv_unique},
	{"prefixItems", D_2020, T_ARR, false, true, kc_list, kv_prefix_items},
	{"items", D_ALL, T_ARR, false, false, kc_items, kv_items},
	{"additionalItems", D_07, T_ARR, false, true, kc_additional_items, kv_additional_items},
	{"minContains", D_2020, T_ARR, false, true, kc_count, NULL},
	{"maxContains", D_2020, T_ARR, false, true, kc_count, NULL},
	{"contains", D_ALL, T_ARR, false, false, kc_contains, kv_contains},
	{"minProperties", D_ALL, T_OBJ, false, false, kc_count, kv_min_props},
	{"maxProperties", D_ALL, T_OBJ, false, false, kc_count, kv_max_props},
	{"required", D_ALL, T_OBJ, false, false, kc_strings, kv_required},
	{"properties", D_ALL, T_OBJ, false, false, kc_map, kv_properties},
	{"patternProperties", D_ALL, T_OBJ, false, false, kc_pattern_props, kv_pattern_props},
	{"additionalProperties", D_ALL, T_OBJ, false, false, kc_additional_props,
	 kv_additional_props},
	{"propertyNames", D_ALL, T_OBJ, false, false, kc_one, kv_property_names},
	{"dependentRequired", D_2020, T_OBJ, false, true, kc_dep_required, kv_dep_required},
	{"dependentSchemas", D_2020, T_OBJ, true, true, kc_map, kv_dep_schemas},
	{"dependencies", D_07, T_OBJ, true, true, kc_dependencies, kv_dep_schemas},
	{"allOf", D_ALL, T_ANY, true, false, kc_list, kv_all_of},
	{"anyOf", D_ALL, T_ANY, true, false, kc_list, kv_any_of},
	{"oneOf", D_ALL, T_ANY, true, false, kc_list, kv_one_of},
	{"not", D_ALL, T_ANY, true, false, kc_one, kv_not},
	{"then", D_ALL, T_ANY, false, false, kc_one, NULL},
	{"else", D_ALL, T_ANY, false, false, kc_one, NULL},
	{"if", D_ALL, T_ANY, true, false, kc_if, kv_if},
	{"$dynamicRef", D_ALL, T_ANY, false, false, kc_refuse, NULL},
	{"$recursiveRef", D_ALL, T_ANY, false, false, kc_refuse, NULL},
	{"unevaluatedProperties", D_ALL, T_ANY, false, false, kc_refuse, NULL},
	{"unevaluatedItems", D_ALL, T_ANY, false, false, kc_refuse, NULL},
};

const size_t schema_kw_count = sizeof(schema_kw_table) / sizeof(schema_kw_table[0]);
