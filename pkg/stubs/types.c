/* types.c: a JSON Schema as a Python type, for display (docs/stubs.md,
 * "Types").
 *
 * The schema comes from an upstream and may be hostile: nesting, $ref hops
 * and the subschemas read for one type are all capped, a $ref cycle is found
 * by keeping the references being expanded, and whatever is past a cap, not
 * understood or too long to show becomes `Any`. Nothing here can fail.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stubs/stubs.h"
#include "stubs/internal.h"

#define TYPE_CAP APPL_STUBS_TYPE_MAX

/* A union being collected, flattened: `int | str | None`. */
struct atoms {
	unsigned n;
	bool null; /* None is a member (always shown last) */
	bool any;  /* a member is Any, so the whole union is */
	char a[APPL_STUBS_UNION_MAX][TYPE_CAP + 1];
};

struct tctx {
	const json_t *root;
	const json_t *refs[APPL_STUBS_SCHEMA_DEPTH_MAX]; /* $ref targets being expanded */
	unsigned nrefs;
	unsigned visits;
};

static void schema_atoms(struct tctx *c, const json_t *s, struct atoms *t, unsigned depth);

static void atoms_add(struct atoms *t, const char *s)
{
	if (t->any)
		return;
	if (strlen(s) > TYPE_CAP || strcmp(s, "Any") == 0) {
		t->any = true;
		return;
	}
	for (unsigned i = 0; i < t->n; i++)
		if (strcmp(t->a[i], s) == 0)
			return;
	if (t->n == APPL_STUBS_UNION_MAX) {
		t->any = true;
		return;
	}
	memcpy(t->a[t->n++], s, strlen(s) + 1);
}

/* The union as text into out (TYPE_CAP + 1 bytes). */
static void atoms_join(const struct atoms *t, char *out)
{
	struct sbuf b;
	bool full;
	char *s;

	if (t->any || (t->n == 0 && !t->null)) {
		snprintf(out, TYPE_CAP + 1, "%s", t->any ? "Any" : "Never");
		return;
	}
	sb_init(&b, TYPE_CAP);
	for (unsigned i = 0; i < t->n; i++) {
		if (i)
			sb_puts(&b, " | ");
		sb_puts(&b, t->a[i]);
	}
	if (t->null)
		sb_puts(&b, t->n ? " | None" : "None");
	full = b.full; /* sb_steal clears b */
	s = sb_steal(&b);
	snprintf(out, TYPE_CAP + 1, "%s", (s && !full) ? s : "Any");
	free(s);
}

/* ---- $ref --------------------------------------------------------------------- */

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* One JSON-pointer segment at p into seg (~0, ~1 and %XX decoded); returns
 * the end of the segment, or NULL when it is too long or holds a NUL. */
static const char *pointer_seg(const char *p, char *seg, size_t cap)
{
	size_t n = 0;

	for (; *p && *p != '/'; p++) {
		char c = *p;

		if (c == '~' && (p[1] == '0' || p[1] == '1')) {
			c = *++p == '0' ? '~' : '/';
		} else if (c == '%' && hex_val(p[1]) >= 0 && hex_val(p[2]) >= 0) {
			c = (char)(hex_val(p[1]) * 16 + hex_val(p[2]));
			p += 2;
		}
		if (c == '\0' || n + 1 >= cap)
			return NULL;
		seg[n++] = c;
	}
	seg[n] = '\0';
	return p;
}

static const json_t *pointer_step(const json_t *cur, const char *seg)
{
	char *end;
	unsigned long i;

	if (json_is_object(cur))
		return json_object_get(cur, seg);
	if (!json_is_array(cur) || !*seg || (seg[0] == '0' && seg[1]) || seg[0] < '0' ||
	    seg[0] > '9')
		return NULL;
	i = strtoul(seg, &end, 10);
	return *end ? NULL : json_array_get(cur, i);
}

/* A local reference ("#", "#/$defs/x"); anything else (a remote document,
 * an anchor) is not followed. */
static const json_t *pointer_get(const json_t *root, const char *ref)
{
	const json_t *cur = root;
	char seg[256];

	if (ref[0] != '#' || (ref[1] && ref[1] != '/'))
		return NULL;
	for (const char *p = ref + 1; cur && *p == '/';) {
		p = pointer_seg(p + 1, seg, sizeof(seg));
		if (!p)
			return NULL;
		cur = pointer_step(cur, seg);
	}
	return cur;
}

static const char *ref_of(const json_t *s)
{
	return json_string_value(json_object_get(s, "$ref"));
}

const json_t *type_resolve(const json_t *root, const json_t *s)
{
	for (unsigned hops = 0; json_is_object(s) && ref_of(s); hops++) {
		if (hops == APPL_STUBS_SCHEMA_DEPTH_MAX)
			return NULL;
		s = pointer_get(root, ref_of(s));
	}
	return s;
}

static void ref_atoms(struct tctx *c, const char *ref, struct atoms *t, unsigned depth)
{
	const json_t *target = pointer_get(c->root, ref);

	if (!target || c->nrefs == APPL_STUBS_SCHEMA_DEPTH_MAX) {
		t->any = true;
		return;
	}
	/* a cycle (a tree whose nodes hold nodes) is shown as Any where it closes */
	for (unsigned i = 0; i < c->nrefs; i++)
		if (c->refs[i] == target) {
			t->any = true;
			return;
		}
	c->refs[c->nrefs++] = target;
	schema_atoms(c, target, t, depth + 1);
	c->nrefs--;
}

/* ---- literals ----------------------------------------------------------------- */

/* The shortest %g form that reads back as d, with ".0" when it looks like
 * an integer (Python's repr). */
static bool real_put(struct sbuf *b, double d)
{
	char buf[40];

	if (!isfinite(d))
		return false;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".e"))
		return sb_printf(b, "%s.0", buf);
	return sb_puts(b, buf);
}

static bool lit_value(struct sbuf *b, const json_t *v, unsigned depth);

static bool lit_string(struct sbuf *b, const char *s, size_t n)
{
	return sb_puts(b, "\"") && esc_put(b, s, n, ESC_STR, APPL_STUBS_LITERAL_MAX, NULL) &&
	       sb_puts(b, "\"");
}

static bool lit_array(struct sbuf *b, const json_t *v, unsigned depth)
{
	size_t i;
	json_t *x;

	sb_puts(b, "[");
	json_array_foreach(v, i, x)
		if ((i && !sb_puts(b, ", ")) || !lit_value(b, x, depth + 1))
			return false;
	return sb_puts(b, "]");
}

static bool lit_object(struct sbuf *b, const json_t *v, unsigned depth)
{
	const char *k;
	json_t *x;
	bool first = true;

	sb_puts(b, "{");
	json_object_foreach((json_t *)v, k, x) {
		if ((!first && !sb_puts(b, ", ")) || !lit_string(b, k, strlen(k)) ||
		    !sb_puts(b, ": ") || !lit_value(b, x, depth + 1))
			return false;
		first = false;
	}
	return sb_puts(b, "}");
}

static bool lit_value(struct sbuf *b, const json_t *v, unsigned depth)
{
	switch (json_typeof(v)) {
	case JSON_NULL:
		return sb_puts(b, "None");
	case JSON_TRUE:
		return sb_puts(b, "True");
	case JSON_FALSE:
		return sb_puts(b, "False");
	case JSON_INTEGER:
		return sb_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	case JSON_REAL:
		return real_put(b, json_real_value(v));
	case JSON_STRING:
		return lit_string(b, json_string_value(v), json_string_length(v));
	case JSON_ARRAY:
		return depth < 2 && lit_array(b, v, depth);
	case JSON_OBJECT:
		return depth < 2 && lit_object(b, v, depth);
	}
	return false;
}

bool literal_put(struct sbuf *b, const json_t *v)
{
	struct sbuf tmp;
	bool ok;

	if (!v)
		return false;
	sb_init(&tmp, APPL_STUBS_LITERAL_MAX);
	ok = lit_value(&tmp, v, 0) && !tmp.full && !tmp.nomem;
	if (ok)
		ok = sb_putn(b, tmp.p, tmp.len);
	sb_free(&tmp);
	return ok;
}

/* ---- enum and const ------------------------------------------------------------- */

static const char *value_type(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		return "str";
	case JSON_INTEGER:
		return "int";
	case JSON_REAL:
		return "float";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	case JSON_ARRAY:
		return "list[Any]";
	case JSON_OBJECT:
		return "dict[str, Any]";
	case JSON_NULL:
		break;
	}
	return "None";
}

static bool is_literal_kind(const json_t *v)
{
	return json_is_string(v) || json_is_integer(v) || json_is_boolean(v);
}

/* The values of an enum (arr) or of a const (one). */
struct values {
	const json_t *arr;
	const json_t *one;
	size_t n;
};

static const json_t *value_at(const struct values *vs, size_t i)
{
	return vs->one ? vs->one : json_array_get(vs->arr, i);
}

/* Values as Literal["a", 1, True]; false when there are too many or the
 * text is too long, and then each value stands for its type. */
static bool literal_atom(const struct values *vs, struct atoms *t)
{
	struct sbuf b;
	size_t count = 0;
	char *s;
	bool ok = true;

	sb_init(&b, TYPE_CAP);
	sb_puts(&b, "Literal[");
	for (size_t i = 0; i < vs->n && ok; i++) {
		const json_t *v = value_at(vs, i);
		if (!is_literal_kind(v))
			continue;
		ok = ++count <= APPL_STUBS_ENUM_MAX && (count == 1 || sb_puts(&b, ", ")) &&
		     literal_put(&b, v);
	}
	ok = ok && sb_puts(&b, "]");
	s = sb_steal(&b);
	if (ok && s && count)
		atoms_add(t, s);
	free(s);
	return ok && s;
}

static void values_atoms(const struct values *vs, struct atoms *t)
{
	bool lit;

	if (vs->n > APPL_STUBS_VALUES_READ_MAX) {
		t->any = true;
		return;
	}
	lit = literal_atom(vs, t);
	for (size_t i = 0; i < vs->n; i++) {
		const json_t *v = value_at(vs, i);
		if (json_is_null(v))
			t->null = true;
		else if (!lit || !is_literal_kind(v))
			atoms_add(t, value_type(v));
	}
}

static void enum_atoms(const json_t *arr, struct atoms *t)
{
	struct values vs = {arr, NULL, json_array_size(arr)};

	if (!json_is_array(arr))
		t->any = true;
	else
		values_atoms(&vs, t);
}

static void const_atoms(const json_t *v, struct atoms *t)
{
	struct values vs = {NULL, v, 1};

	values_atoms(&vs, t);
}

/* ---- type ------------------------------------------------------------------------ */

static void items_atom(struct tctx *c, const json_t *s, struct atoms *t, unsigned depth)
{
	const json_t *items = json_object_get(s, "items");
	struct atoms in = {0};
	char inner[TYPE_CAP + 1];
	char buf[TYPE_CAP + 16];

	if (!json_is_object(items) && !json_is_boolean(items)) {
		atoms_add(t, "list[Any]"); /* no items, or draft-07's tuple form */
		return;
	}
	schema_atoms(c, items, &in, depth + 1);
	atoms_join(&in, inner);
	snprintf(buf, sizeof(buf), "list[%s]", inner);
	atoms_add(t, buf);
}

static void object_atom(struct tctx *c, const json_t *s, struct atoms *t, unsigned depth)
{
	const json_t *ap = json_object_get(s, "additionalProperties");
	struct atoms in = {0};
	char inner[TYPE_CAP + 1];
	char buf[TYPE_CAP + 24];

	/* a map with typed values and no named keys: dict[str, int] */
	if (!json_is_object(ap) || json_object_get(s, "properties")) {
		atoms_add(t, "dict[str, Any]");
		return;
	}
	schema_atoms(c, ap, &in, depth + 1);
	atoms_join(&in, inner);
	snprintf(buf, sizeof(buf), "dict[str, %s]", inner);
	atoms_add(t, buf);
}

static const struct {
	const char *json;
	const char *py;
} simple_types[] = {
	{"string", "str"},
	{"integer", "int"},
	{"number", "float"},
	{"boolean", "bool"},
};

static void one_type(struct tctx *c, const json_t *s, const char *name, struct atoms *t,
		     unsigned depth)
{
	for (size_t i = 0; i < sizeof(simple_types) / sizeof(simple_types[0]); i++)
		if (strcmp(name, simple_types[i].json) == 0) {
			atoms_add(t, simple_types[i].py);
			return;
		}
	if (strcmp(name, "null") == 0)
		t->null = true;
	else if (strcmp(name, "array") == 0)
		items_atom(c, s, t, depth);
	else if (strcmp(name, "object") == 0)
		object_atom(c, s, t, depth);
	else
		t->any = true;
}

static void type_atoms(struct tctx *c, const json_t *s, const json_t *type, struct atoms *t,
		       unsigned depth)
{
	size_t i;
	json_t *x;

	if (json_is_string(type)) {
		one_type(c, s, json_string_value(type), t, depth);
		return;
	}
	if (!json_is_array(type) || json_array_size(type) == 0) {
		t->any = true;
		return;
	}
	json_array_foreach(type, i, x) {
		if (!json_is_string(x) || i >= APPL_STUBS_UNION_MAX) {
			t->any = true;
			return;
		}
		one_type(c, s, json_string_value(x), t, depth);
	}
}

/* ---- combinators ------------------------------------------------------------------ */

static void union_atoms(struct tctx *c, const json_t *members, struct atoms *t, unsigned depth)
{
	size_t i;
	json_t *x;

	if (!json_is_array(members) || json_array_size(members) > APPL_STUBS_UNION_MAX) {
		t->any = true;
		return;
	}
	json_array_foreach(members, i, x) {
		schema_atoms(c, x, t, depth + 1);
	}
}

/* An intersection has no Python spelling: the first member that says
 * something is shown (allOf: [{"$ref": ...}] is how many generators wrap one
 * schema). */
static void all_atoms(struct tctx *c, const json_t *members, struct atoms *t, unsigned depth)
{
	size_t i;
	json_t *x;

	if (!json_is_array(members) || json_array_size(members) > APPL_STUBS_UNION_MAX) {
		t->any = true;
		return;
	}
	json_array_foreach(members, i, x) {
		struct atoms one = {0};
		schema_atoms(c, x, &one, depth + 1);
		if (!one.any && (one.n || one.null)) {
			for (unsigned k = 0; k < one.n; k++)
				atoms_add(t, one.a[k]);
			t->null = t->null || one.null;
			return;
		}
	}
	t->any = true;
}

static void shape_atoms(struct tctx *c, const json_t *s, struct atoms *t, unsigned depth)
{
	const json_t *v;

	if ((v = json_object_get(s, "const")))
		const_atoms(v, t);
	else if ((v = json_object_get(s, "enum")))
		enum_atoms(v, t);
	else if ((v = json_object_get(s, "type")))
		type_atoms(c, s, v, t, depth);
	else if ((v = json_object_get(s, "anyOf")) || (v = json_object_get(s, "oneOf")))
		union_atoms(c, v, t, depth);
	else if ((v = json_object_get(s, "allOf")))
		all_atoms(c, v, t, depth);
	else if (json_object_get(s, "properties"))
		atoms_add(t, "dict[str, Any]");
	else if (json_object_get(s, "items"))
		items_atom(c, s, t, depth);
	else
		t->any = true;
}

static void schema_atoms(struct tctx *c, const json_t *s, struct atoms *t, unsigned depth)
{
	const char *ref;

	if (++c->visits > APPL_STUBS_TYPE_VISITS_MAX || depth > APPL_STUBS_SCHEMA_DEPTH_MAX || !s ||
	    json_is_true(s) || (!json_is_object(s) && !json_is_false(s))) {
		t->any = true;
		return;
	}
	if (json_is_false(s))
		return; /* nothing is valid: adds no member */
	if (json_is_true(json_object_get(s, "nullable")))
		t->null = true; /* OpenAPI's spelling */
	ref = ref_of(s);
	if (ref)
		ref_atoms(c, ref, t, depth);
	else
		shape_atoms(c, s, t, depth);
}

void type_render(const json_t *root, const json_t *s, char *out)
{
	struct tctx c = {.root = root};
	struct atoms t = {0};

	schema_atoms(&c, s, &t, 0);
	atoms_join(&t, out);
}
