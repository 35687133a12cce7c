/* stub.c: one tool's stub text, summary and one-line signature
 * (docs/stubs.md, "Stubs").
 *
 *     async def get_sum(*, a: int, b: int = 5):
 *         """Adds two numbers.
 *
 *         MCP tool "everything.get-sum", called as: await everything.get_sum(...)
 *
 *         Args:
 *             a: The first number.
 *         """
 *
 * Every piece of upstream text goes through esc_put into a docstring or a
 * string literal, so it can never end them. A stub that does not fit
 * APPL_STUBS_TEXT_MAX is made again with less detail (STUB_LEVELS levels; the
 * last one is a bare `**kwargs` stub that always fits).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stubs/stubs.h"
#include "stubs/internal.h"

#define NAME_CAP  APPL_RUNNER_PY_NAME_MAX
#define PIECE_CAP (NAME_CAP + APPL_STUBS_TYPE_MAX + APPL_STUBS_LITERAL_MAX + 8)
#define IND_DOC	  "    "
#define IND_ARG	  "        "
#define IND_MORE  "            "

/* Detail levels: what each one shows. */
static const struct level {
	size_t desc_max;  /* description body; 0: none */
	size_t param_max; /* one parameter's description; 0: none */
	bool extras;	  /* keys, allowed values, constraints */
	bool args;	  /* the Args section */
	bool signature;	  /* the typed signature (else **kwargs: Any) */
	bool summary;	  /* the first line of the description */
} levels[STUB_LEVELS] = {
	{APPL_STUBS_DOC_DESC_MAX, APPL_STUBS_PARAM_DESC_MAX, true, true, true, true},
	{1024, 160, false, true, true, true},
	{0, 0, false, true, true, true},
	{0, 0, false, false, false, true},
	{0, 0, false, false, false, false},
};

/* One property of the input schema. */
struct param {
	const char *name;     /* borrowed from the schema */
	const json_t *raw;    /* the property's schema as written (may be NULL) */
	const json_t *schema; /* raw with $ref followed (may be NULL) */
	bool required;
	bool named; /* in the signature; else passed through **kwargs */
	char type[APPL_STUBS_TYPE_MAX + 1];
	char piece[PIECE_CAP]; /* "a: int = 5" */
};

struct view {
	const struct stub_entry *e;
	const json_t *root; /* the input schema */
	const json_t *obj;  /* root with $ref followed */
	struct param *p;    /* required first, then optional; each in schema order */
	size_t np;
	size_t unread; /* properties past APPL_STUBS_PROPS_MAX */
	bool kwargs;
	char kw_name[NAME_CAP + 1];
	char kw_type[APPL_STUBS_TYPE_MAX + 1];
	const char *first, *rest; /* the description's first line and the rest */
	size_t first_len, rest_len;
};

/* ---- parameters ------------------------------------------------------------------ */

static bool in_required(const json_t *req, const char *name)
{
	size_t i;
	json_t *x;

	json_array_foreach(req, i, x) {
		if (i >= APPL_STUBS_PROPS_MAX)
			break;
		if (json_is_string(x) && strcmp(json_string_value(x), name) == 0)
			return true;
	}
	return false;
}

static void param_add(struct view *v, const char *name, const json_t *raw, bool required)
{
	struct param *p = &v->p[v->np++];

	p->name = name;
	p->raw = raw;
	p->schema = type_resolve(v->root, raw);
	p->required = required;
	p->named = name_is_param(name);
	type_render(v->root, raw, p->type);
}

static bool in_required_before(const json_t *req, size_t i)
{
	const char *name = json_string_value(json_array_get(req, i));

	for (size_t j = 0; j < i; j++)
		if (json_is_string(json_array_get(req, j)) &&
		    strcmp(json_string_value(json_array_get(req, j)), name) == 0)
			return true;
	return false;
}

/* Required properties first, then the names `required` lists that have no
 * property, then the optional ones: each group in the order written. */
static void params_order(struct view *v, const json_t *props, const json_t *req)
{
	const char *k;
	json_t *x;
	size_t i, seen = 0;

	json_object_foreach((json_t *)props, k, x)
		if (seen++ < APPL_STUBS_PROPS_MAX && in_required(req, k))
			param_add(v, k, x, true);
	json_array_foreach(req, i, x)
		if (i < APPL_STUBS_PROPS_MAX && json_is_string(x) &&
		    !json_object_get(props, json_string_value(x)) && !in_required_before(req, i))
			param_add(v, json_string_value(x), NULL, true);
	seen = 0;
	json_object_foreach((json_t *)props, k, x)
		if (seen++ < APPL_STUBS_PROPS_MAX && !in_required(req, k))
			param_add(v, k, x, false);
}

static const json_t *param_default(const struct param *p)
{
	const json_t *d = json_object_get(p->raw, "default");

	return d ? d : json_object_get(p->schema, "default");
}

/* "a: int", "b: str = \"x\"", "c: list[int] = ..." */
static void param_piece(struct param *p)
{
	const json_t *d = param_default(p);
	struct sbuf b;
	char *s;

	sb_init(&b, PIECE_CAP - 1);
	sb_puts(&b, p->name);
	sb_puts(&b, ": ");
	sb_puts(&b, p->type);
	if (!p->required && (sb_puts(&b, " = "), !(d && literal_put(&b, d))))
		sb_puts(&b, "...");
	s = sb_steal(&b);
	snprintf(p->piece, sizeof(p->piece), "%s", s ? s : "");
	free(s);
}

/* The input schema leaves room for names it does not list. */
static bool schema_open(const struct view *v)
{
	const json_t *ap = json_object_get(v->obj, "additionalProperties");

	if (!json_is_object(v->obj) || v->unread || json_object_get(v->obj, "patternProperties"))
		return true;
	if (!json_object_get(v->obj, "properties"))
		return !json_is_false(ap);
	return json_is_true(ap) || json_is_object(ap);
}

/* Which parameters the signature names (as many as fit
 * APPL_STUBS_SIGNATURE_MAX), and whether it ends in **kwargs. */
static void sig_decide(struct view *v)
{
	const json_t *ap = json_object_get(v->obj, "additionalProperties");
	size_t used = 2 * NAME_CAP + APPL_STUBS_TYPE_MAX + 16; /* room for **kwargs */
	bool clash = true;

	v->kwargs = schema_open(v);
	for (size_t i = 0; i < v->np; i++) {
		struct param *p = &v->p[i];
		if (p->named && used + strlen(p->piece) + 2 > APPL_STUBS_SIGNATURE_MAX)
			p->named = false;
		used += p->named ? strlen(p->piece) + 2 : 0;
		v->kwargs = v->kwargs || !p->named;
	}
	snprintf(v->kw_name, sizeof(v->kw_name), "kwargs");
	for (size_t len = 6; clash && len < NAME_CAP; len++) {
		clash = false;
		for (size_t i = 0; i < v->np && !clash; i++)
			clash = v->p[i].named && strcmp(v->p[i].name, v->kw_name) == 0;
		if (clash)
			v->kw_name[len] = '_', v->kw_name[len + 1] = '\0';
	}
	if (json_is_object(ap))
		type_render(v->root, ap, v->kw_type);
	else
		snprintf(v->kw_type, sizeof(v->kw_type), "Any");
}

static int params_collect(struct view *v)
{
	const json_t *props = json_object_get(v->obj, "properties");
	const json_t *req = json_object_get(v->obj, "required");
	size_t np = json_is_object(props) ? json_object_size(props) : 0;
	size_t nr = json_array_size(req);

	if (!json_is_object(props))
		props = NULL;
	v->unread = np > APPL_STUBS_PROPS_MAX ? np - APPL_STUBS_PROPS_MAX : 0;
	np = np > APPL_STUBS_PROPS_MAX ? APPL_STUBS_PROPS_MAX : np;
	nr = nr > APPL_STUBS_PROPS_MAX ? APPL_STUBS_PROPS_MAX : nr;
	v->p = calloc(np + nr + 1, sizeof(*v->p));
	if (!v->p)
		return -ENOMEM;
	params_order(v, props, req);
	for (size_t i = 0; i < v->np; i++)
		param_piece(&v->p[i]);
	sig_decide(v);
	return 0;
}

/* ---- the description ------------------------------------------------------------- */

static void desc_split(struct view *v)
{
	const char *d = v->e->src->description;
	size_t n = d ? strnlen(d, APPL_STUBS_DESC_READ_MAX) : 0;
	size_t line;

	d = text_trim(d, &n);
	line = strcspn(d ? d : "", "\r\n");
	line = line < n ? line : n;
	v->first = d;
	v->first_len = line;
	v->first = text_trim(v->first, &v->first_len);
	v->rest = d ? d + line : NULL;
	v->rest_len = n - line;
	v->rest = text_trim(v->rest, &v->rest_len);
}

static int view_build(const struct stub_entry *e, struct view *v)
{
	memset(v, 0, sizeof(*v));
	v->e = e;
	v->root = e->src->input_schema;
	v->obj = type_resolve(v->root, v->root);
	desc_split(v);
	return params_collect(v);
}

/* ---- one-liners: summary and signature ------------------------------------------- */

static char *summary_make(const struct view *v)
{
	struct sbuf b;

	sb_init(&b, APPL_STUBS_SUMMARY_MAX);
	if (!esc_put(&b, v->first, v->first_len, ESC_LINE, APPL_STUBS_SUMMARY_MAX - 3, NULL))
		sb_puts(&b, "...");
	return sb_steal(&b);
}

/* Append piece unless the line would then leave no room for ", ...)". */
static bool line_piece(struct sbuf *b, const char *piece, bool *first)
{
	if (b->len + strlen(piece) + 2 + 6 > b->max)
		return false;
	if (!*first)
		sb_puts(b, ", ");
	sb_puts(b, piece);
	*first = false;
	return true;
}

static char *signature_make(const struct view *v)
{
	size_t ret = *v->e->returns ? strlen(v->e->returns) + 4 : 0;
	struct sbuf b;
	char kw[PIECE_CAP];
	bool first = true, fit = true;

	sb_init(&b, APPL_STUBS_LINE_MAX - ret);
	sb_printf(&b, "%s.%s(", v->e->ns, v->e->fn);
	for (size_t i = 0; i < v->np && fit; i++)
		if (v->p[i].named)
			fit = line_piece(&b, v->p[i].piece, &first);
	snprintf(kw, sizeof(kw), "**%s: %s", v->kw_name, v->kw_type);
	if (fit && v->kwargs)
		fit = line_piece(&b, kw, &first);
	if (!fit)
		sb_puts(&b, first ? "..." : ", ...");
	sb_puts(&b, ")");
	b.max += ret;
	if (ret)
		sb_printf(&b, " -> %s", v->e->returns);
	return sb_steal(&b);
}

/* ---- the stub: signature ---------------------------------------------------------- */

static void sig_write(const struct view *v, const struct level *lv, struct sbuf *b)
{
	bool first = true;

	sb_printf(b, "async def %s(", v->e->fn);
	if (!lv->signature) {
		sb_printf(b, "**kwargs: Any)%s%s:\n", *v->e->returns ? " -> " : "", v->e->returns);
		return;
	}
	for (size_t i = 0; i < v->np; i++) {
		if (!v->p[i].named)
			continue;
		sb_puts(b, first ? "*, " : ", ");
		sb_puts(b, v->p[i].piece);
		first = false;
	}
	if (v->kwargs)
		sb_printf(b, "%s**%s: %s", first ? "" : ", ", v->kw_name, v->kw_type);
	sb_puts(b, ")");
	if (*v->e->returns)
		sb_printf(b, " -> %s", v->e->returns);
	sb_puts(b, ":\n");
}

/* ---- the stub: docstring ---------------------------------------------------------- */

static void para(struct sbuf *b, bool *started)
{
	if (*started)
		sb_puts(b, "\n\n" IND_DOC);
	*started = true;
}

static void mcp_line(const struct view *v, struct sbuf *b)
{
	const char *m = v->e->mcp;

	sb_puts(b, "MCP tool \"");
	if (!esc_put(b, m, strlen(m), ESC_STR, APPL_STUBS_NAME_SHOWN_MAX, NULL))
		sb_puts(b, "...");
	sb_printf(b, "\", called as: await %s.%s(...)", v->e->ns, v->e->fn);
}

/* The first line (cut like the summary); returns false when it was cut. */
static bool first_line(const struct view *v, struct sbuf *b)
{
	if (esc_put(b, v->first, v->first_len, ESC_DOC, APPL_STUBS_SUMMARY_MAX - 3, NULL))
		return true;
	sb_puts(b, "...");
	return false;
}

/* The description after its first line, or all of it when that line was cut. */
static void body(const struct view *v, const struct level *lv, bool whole, struct sbuf *b,
		 bool *started)
{
	const char *s = whole ? v->first : v->rest;
	size_t n = whole ? (size_t)(v->rest + v->rest_len - v->first) : v->rest_len;

	if (!lv->desc_max || !s || !n)
		return;
	if (whole && !v->rest_len)
		n = v->first_len;
	para(b, started);
	if (!esc_put(b, s, n, ESC_DOC, lv->desc_max - 6, IND_DOC))
		sb_puts(b, " [...]");
}

/* ---- the stub: Args --------------------------------------------------------------- */

static const json_t *param_desc(const struct param *p)
{
	const json_t *d = json_object_get(p->raw, "description");

	if (!json_is_string(d))
		d = json_object_get(p->schema, "description");
	if (!json_is_string(d))
		d = json_object_get(p->schema, "title");
	return json_is_string(d) && json_string_length(d) ? d : NULL;
}

/* A name as written: bare when it is a parameter name, else quoted. */
static void name_put(struct sbuf *b, const char *name, bool *quoted)
{
	if (name_is_param(name)) {
		sb_puts(b, name);
		return;
	}
	sb_puts(b, "\"");
	if (!esc_put(b, name, strlen(name), ESC_STR, 2 * NAME_CAP, NULL))
		sb_puts(b, "...");
	sb_puts(b, "\"");
	*quoted = true;
}

/* A default the signature does not show (the parameter is required, or not
 * in the signature, or the value is too long for it). */
static void default_note(const struct param *p, struct sbuf *b)
{
	const json_t *d = param_default(p);
	struct sbuf probe;
	bool shown;

	if (!d)
		return;
	sb_init(&probe, APPL_STUBS_LITERAL_MAX);
	shown = literal_put(&probe, d);
	sb_free(&probe);
	if (p->named && !p->required && shown)
		return;
	if (shown) {
		sb_puts(b, " Default: ");
		literal_put(b, d);
		sb_puts(b, ".");
	} else {
		sb_puts(b, " Has a default too long to show.");
	}
}

/* Allowed values that did not fit a Literal[...] in the type. */
static void values_note(const struct param *p, struct sbuf *b)
{
	const json_t *vals = json_object_get(p->schema, "enum");
	size_t n = json_array_size(vals), start = b->len;

	if (!n || strstr(p->type, "Literal["))
		return;
	sb_puts(b, " One of:");
	for (size_t i = 0; i < n; i++) {
		size_t mark = b->len;
		if (!sb_puts(b, i ? ", " : " ") || !literal_put(b, json_array_get(vals, i)) ||
		    b->len - start > 240) {
			sb_cut(b, mark);
			sb_puts(b, ", ...");
			break;
		}
	}
	sb_printf(b, " (%zu values).", n);
}

/* The keys of an object parameter (or of its array's items), one level. */
static void keys_note(const struct view *v, const struct param *p, struct sbuf *b)
{
	const json_t *s = p->schema, *items = type_resolve(v->root, json_object_get(s, "items"));
	const json_t *props, *req, *x;
	const char *k, *label = " Keys:";
	size_t start, mark;
	bool first = true, quoted = false;

	if (!json_is_object(json_object_get(s, "properties")) && json_is_object(items))
		s = items, label = " Items have keys:";
	props = json_object_get(s, "properties");
	req = json_object_get(s, "required");
	if (!json_is_object(props) || json_object_size(props) == 0)
		return;
	start = b->len;
	sb_puts(b, label);
	json_object_foreach((json_t *)props, k, x) {
		char type[APPL_STUBS_TYPE_MAX + 1];
		mark = b->len;
		type_render(v->root, x, type);
		sb_puts(b, first ? " " : ", ");
		name_put(b, k, &quoted);
		sb_printf(b, ": %s%s", type, in_required(req, k) ? " (required)" : "");
		if (b->len - start > 300) {
			sb_cut(b, mark);
			sb_puts(b, ", ...");
			break;
		}
		first = false;
	}
	sb_puts(b, ".");
}

/* Constraints worth knowing before a call is refused. */
static const struct {
	const char *key;
	const char *label;
} constraints[] = {
	{"format", "format"},
	{"pattern", "pattern"},
	{"minimum", ">="},
	{"exclusiveMinimum", ">"},
	{"maximum", "<="},
	{"exclusiveMaximum", "<"},
	{"minLength", "min length"},
	{"maxLength", "max length"},
	{"minItems", "min items"},
	{"maxItems", "max items"},
	{"uniqueItems", "unique items"},
};

static void constraints_note(const struct param *p, struct sbuf *b)
{
	bool first = true;

	for (size_t i = 0; i < sizeof(constraints) / sizeof(constraints[0]); i++) {
		const json_t *c = json_object_get(p->schema, constraints[i].key);
		size_t mark = b->len;
		if (!c || json_is_object(c) || json_is_array(c))
			continue;
		sb_printf(b, "%s%s ", first ? " Constraints: " : ", ", constraints[i].label);
		if (!literal_put(b, c))
			sb_cut(b, mark);
		else
			first = false;
	}
	if (!first)
		sb_puts(b, ".");
}

static void param_head(const struct param *p, struct sbuf *b, bool *quoted)
{
	sb_puts(b, "\n" IND_ARG);
	name_put(b, p->name, quoted);
	if (!p->named)
		sb_printf(b, " (%s%s)", p->type, p->required ? ", required" : "");
	sb_puts(b, ":");
}

/* Default, allowed values, keys, constraints: what the schema says beside
 * the description. */
static void notes_write(const struct view *v, const struct param *p, const struct level *lv,
			struct sbuf *notes)
{
	if (lv->param_max)
		default_note(p, notes);
	if (lv->extras) {
		values_note(p, notes);
		keys_note(v, p, notes);
		constraints_note(p, notes);
	}
}

/* One entry of Args; false when there is nothing to say about p. */
static bool param_entry(const struct view *v, const struct param *p, const struct level *lv,
			struct sbuf *b, bool *quoted)
{
	const json_t *d = lv->param_max ? param_desc(p) : NULL;
	size_t mark = b->len, head, n = json_string_length(d);
	const char *text = text_trim(json_string_value(d), &n);
	struct sbuf notes;

	param_head(p, b, quoted);
	head = b->len;
	if (n && sb_puts(b, " ") && !esc_put(b, text, n, ESC_DOC, lv->param_max - 6, IND_MORE))
		sb_puts(b, " [...]");
	sb_init(&notes, APPL_STUBS_TEXT_MAX);
	notes_write(v, p, lv, &notes);
	/* the notes are sentences: end the description's own first */
	if (notes.len && b->len > head && !strchr(".!?:;", b->p[b->len - 1]))
		sb_puts(b, ".");
	sb_putn(b, notes.p ? notes.p : "", notes.len);
	b->nomem = b->nomem || notes.nomem;
	sb_free(&notes);
	if (b->len == head && !b->full) {
		/* nothing after the name: a named one needs no entry at all */
		sb_cut(b, p->named ? mark : head - 1);
		return !p->named;
	}
	return true;
}

static void args_write(const struct view *v, const struct level *lv, struct sbuf *b)
{
	size_t mark = b->len;
	bool any = false, quoted = false;

	sb_puts(b, "\n\n" IND_DOC "Args:");
	for (size_t i = 0; i < v->np; i++)
		any = param_entry(v, &v->p[i], lv, b, &quoted) || any;
	if (v->unread) {
		sb_printf(b, "\n" IND_ARG "(%zu more properties not shown)", v->unread);
		any = true;
	}
	if (!any && !b->full) {
		sb_cut(b, mark);
		return;
	}
	if (quoted)
		sb_puts(b, "\n\n" IND_DOC "Names in quotes are not Python names: pass them as "
			   "**{\"name\": value}.");
}

/* What the result holds: the keys of an object, one level, with the types
 * the annotation may not have had room for. */
static void returns_write(const struct view *v, const struct level *lv, struct sbuf *b)
{
	const json_t *root = v->e->src->output_schema;
	struct view rv = {.e = v->e, .root = root, .obj = type_resolve(root, root)};
	struct param p = {.schema = rv.obj};
	size_t mark;

	if (!root || !lv->args)
		return;
	sb_puts(b, "\n\n" IND_DOC "Returns: ");
	sb_puts(b, v->e->returns);
	sb_puts(b, ", the tool's structured result.");
	mark = b->len;
	keys_note(&rv, &p, b);
	if (b->full)
		sb_cut(b, mark);
}

static void doc_write(const struct view *v, const struct level *lv, struct sbuf *b)
{
	bool started = false, whole = false;

	sb_puts(b, IND_DOC "\"\"\"");
	if (lv->summary && v->first_len) {
		whole = !first_line(v, b);
		started = true;
	}
	para(b, &started);
	mcp_line(v, b);
	body(v, lv, whole, b, &started);
	if (lv->args)
		args_write(v, lv, b);
	returns_write(v, lv, b);
	sb_puts(b, "\n" IND_DOC "\"\"\"\n");
}

/* ---- what a tool returns ---------------------------------------------------------- */

/* `{"a": int, "b": list[str]}` for an object schema whose keys are named
 * (each key quoted and escaped, so the annotation parses as Python), when
 * it fits; else the type as for a parameter. */
static char *returns_make(const json_t *root)
{
	const json_t *obj = type_resolve(root, root), *props = json_object_get(obj, "properties");
	char type[APPL_STUBS_TYPE_MAX + 1];
	struct sbuf b;
	const char *k;
	json_t *x;
	bool first = true;

	sb_init(&b, APPL_STUBS_RETURNS_MAX);
	if (!root)
		return sb_steal(&b);
	if (json_is_object(props) && json_object_size(props) > 0) {
		sb_puts(&b, "{");
		json_object_foreach((json_t *)props, k, x) {
			type_render(root, x, type);
			sb_puts(&b, first ? "\"" : ", \"");
			if (!esc_put(&b, k, strlen(k), ESC_STR, APPL_STUBS_RETURNS_MAX, NULL))
				b.full = true;
			sb_printf(&b, "\": %s", type);
			first = false;
		}
		sb_puts(&b, "}");
		if (!b.full && !b.nomem)
			return sb_steal(&b);
		sb_cut(&b, 0);
	}
	type_render(root, root, type);
	sb_puts(&b, type);
	return sb_steal(&b);
}

/* ---- a stand-in --------------------------------------------------------------------- */

/* A tool the cell may not call: a name, a reason, nothing of its schema
 * or description. */
static int standin_make(struct stub_entry *e)
{
	char why[APPL_STUBS_SUMMARY_MAX + 1];
	struct sbuf b;

	/* one line: the reason's own line breaks become spaces */
	snprintf(why, sizeof(why), "%s", e->why_not);
	for (char *p = why; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	free(e->text);
	sb_init(&b, APPL_STUBS_TEXT_MAX);
	sb_printf(&b,
		  "async def %s(**kwargs: Any) -> NoReturn:\n" IND_DOC "\"\"\"Not offered here: ",
		  e->fn);
	if (!esc_put(&b, why, strlen(why), ESC_DOC, APPL_STUBS_SUMMARY_MAX, NULL))
		sb_puts(&b, "...");
	sb_puts(&b, ".\n\n" IND_DOC "MCP tool \"");
	if (!esc_put(&b, e->mcp, strlen(e->mcp), ESC_STR, APPL_STUBS_NAME_SHOWN_MAX, NULL))
		sb_puts(&b, "...");
	sb_printf(&b,
		  "\"; a call of %s.%s raises ToolError (kind \"refused\").\n" IND_DOC "\"\"\"\n",
		  e->ns, e->fn);
	e->text = sb_steal(&b);
	if (!e->summary) {
		sb_init(&b, APPL_STUBS_SUMMARY_MAX);
		sb_puts(&b, "not offered: ");
		if (!esc_put(&b, e->why_not, strlen(e->why_not), ESC_LINE,
			     APPL_STUBS_SUMMARY_MAX - 16, NULL))
			sb_puts(&b, "...");
		e->summary = sb_steal(&b);
		sb_init(&b, APPL_STUBS_LINE_MAX);
		sb_printf(&b, "%s.%s(...)", e->ns, e->fn);
		e->signature = sb_steal(&b);
	}
	e->level = STUB_LEVELS - 1;
	return e->text && e->summary && e->signature ? 0 : -ENOMEM;
}

/* ---- levels ------------------------------------------------------------------------- */

static char *text_make(const struct view *v, unsigned level, int *rc)
{
	struct sbuf b;

	sb_init(&b, APPL_STUBS_TEXT_MAX);
	sig_write(v, &levels[level], &b);
	doc_write(v, &levels[level], &b);
	if (b.nomem)
		*rc = -ENOMEM;
	if (b.full || b.nomem) {
		sb_free(&b);
		return NULL;
	}
	return sb_steal(&b);
}

int stub_make(struct stub_entry *e)
{
	struct view v;
	int rc;

	if (e->why_not)
		return standin_make(e);
	if (!e->returns && !(e->returns = returns_make(e->src->output_schema)))
		return -ENOMEM;
	rc = view_build(e, &v);

	if (rc == 0 && !e->summary) {
		e->summary = summary_make(&v);
		e->signature = signature_make(&v);
		if (!e->summary || !e->signature)
			rc = -ENOMEM;
	}
	free(e->text);
	e->text = NULL;
	for (; rc == 0 && e->level < STUB_LEVELS; e->level++) {
		e->text = text_make(&v, e->level, &rc);
		if (e->text)
			break;
	}
	if (rc == 0 && !e->text)
		rc = -E2BIG; /* the last level always fits: not reached */
	free(v.p);
	return rc;
}
