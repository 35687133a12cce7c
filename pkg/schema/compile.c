/* compile.c: compiling a schema document into a graph of nodes (schema.c
 * starts it).
 *
 * Compiling walks every subschema once: each gets a node with its base URI,
 * "$id" and anchors are registered, every keyword of the dispatch table
 * (keywords.c, reached only through the table schema.c puts in the compile
 * state, since the keywords call back into this file for their subschemas)
 * checks its own form, and each "$ref" is queued. Then the
 * queued references are resolved inside the document only, and the graph is
 * checked for cycles that would loop without consuming the instance. */
#include <errno.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"
#include "schema/internal.h"

/* Base URI of a document without "$id": hierarchical, so relative references
 * resolve to something, and in a scheme nothing real uses. */
#define ROOT_BASE "appliance:///schema.json"
#define CHUNK_MIN (4u * 1024)
#define CHUNK_MAX (64u * 1024)

_Static_assert(APPL_TOOL_ERROR_MAX < APPL_ERR_MSG_MAX, "a ToolError fits an error message");

struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

int schema_cc_fail(struct cc *cc, int code, const char *fmt, ...)
{
	char msg[APPL_ERR_MSG_MAX];
	va_list ap;

	if (cc->rc)
		return cc->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	appl_utf8_trim(msg);
	cc->rc = code;
	appl_err_set(cc->err, code, "schema at %s: %s", cc->where_len ? cc->where : "(root)", msg);
	/* Cut to what a ToolError may carry, and still UTF-8 so it can travel
	 * as a JSON string. */
	if (cc->err) {
		cc->err->msg[APPL_TOOL_ERROR_MAX] = '\0';
		appl_utf8_trim(cc->err->msg);
	}
	return code;
}

size_t schema_where_push(struct cc *cc, const char *key)
{
	char shown[APPL_SCHEMA_NAME_SHOWN_MAX + 4];
	size_t mark = cc->where_len;

	if (!key)
		return mark;
	schema_shown(shown, sizeof(shown), key, APPL_SCHEMA_NAME_SHOWN_MAX);
	/* A deep location is cut, not overflowed: it only feeds messages. */
	snprintf(cc->where + cc->where_len, sizeof(cc->where) - cc->where_len, "/%s", shown);
	appl_utf8_trim(cc->where);
	cc->where_len = strlen(cc->where);
	return mark;
}

void schema_where_pop(struct cc *cc, size_t mark)
{
	cc->where_len = mark;
	cc->where[mark] = '\0';
}

void *schema_arena_alloc(struct cc *cc, size_t size)
{
	struct schema *s = cc->s;
	struct chunk *c = s->chunks;
	size_t align = alignof(max_align_t);

	if (size > APPL_SCHEMA_MEMORY_MAX) {
		schema_cc_fail(cc, -E2BIG, "compiled form larger than %u bytes",
			       APPL_SCHEMA_MEMORY_MAX);
		return NULL;
	}
	size = (size + align - 1) & ~(align - 1);
	if (!c || c->cap - c->used < size) {
		/* Chunks double from 4 KiB: a gateway holds one schema per tool,
		 * most of them small. */
		size_t grow = s->arena_bytes < CHUNK_MIN   ? CHUNK_MIN
			      : s->arena_bytes > CHUNK_MAX ? CHUNK_MAX
							   : s->arena_bytes;
		size_t cap = size > grow ? size : grow;
		if (s->arena_bytes + cap > APPL_SCHEMA_MEMORY_MAX) {
			schema_cc_fail(cc, -E2BIG, "compiled form larger than %u bytes",
				       APPL_SCHEMA_MEMORY_MAX);
			return NULL;
		}
		c = calloc(1, sizeof(*c) + cap);
		if (!c) {
			schema_cc_fail(cc, -ENOMEM, "out of memory");
			return NULL;
		}
		c->cap = cap;
		c->next = s->chunks;
		s->chunks = c;
		s->arena_bytes += cap;
	}
	void *p = (char *)c->data + c->used;
	c->used += size;
	return p;
}

void schema_arena_free(struct schema *s)
{
	while (s->chunks) {
		struct chunk *next = s->chunks->next;
		free(s->chunks);
		s->chunks = next;
	}
}

static const char *schema_arena_strdup(struct cc *cc, const char *str, size_t len)
{
	char *p = schema_arena_alloc(cc, len + 1);

	if (!p)
		return NULL;
	memcpy(p, str, len);
	p[len] = '\0';
	return p;
}

/* ---- json value -> node, so each subschema is compiled once ------------- */

static size_t map_slot(const struct cc *cc, const json_t *key)
{
	uintptr_t h = (uintptr_t)key;

	h ^= h >> 17;
	h *= (uintptr_t)0x9e3779b97f4a7c15ull;
	h ^= h >> 29;
	return (size_t)h & (cc->map_cap - 1);
}

static struct node *map_get(const struct cc *cc, const json_t *key)
{
	if (!cc->map_cap)
		return NULL;
	for (size_t i = map_slot(cc, key);; i = (i + 1) & (cc->map_cap - 1)) {
		if (!cc->map[i].key)
			return NULL;
		if (cc->map[i].key == key)
			return cc->map[i].node;
	}
}

static int map_grow(struct cc *cc)
{
	struct map_ent *old = cc->map;
	size_t old_cap = cc->map_cap;
	size_t cap = old_cap ? old_cap * 2 : 64;

	cc->map = calloc(cap, sizeof(*cc->map));
	if (!cc->map) {
		cc->map = old;
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	}
	cc->map_cap = cap;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i].key)
			continue;
		size_t j = map_slot(cc, old[i].key);
		while (cc->map[j].key)
			j = (j + 1) & (cap - 1);
		cc->map[j] = old[i];
	}
	free(old);
	return 0;
}

static int map_put(struct cc *cc, const json_t *key, struct node *node)
{
	if ((cc->map_used + 1) * 2 > cc->map_cap && map_grow(cc) < 0)
		return cc->rc;
	size_t i = map_slot(cc, key);
	while (cc->map[i].key)
		i = (i + 1) & (cc->map_cap - 1);
	cc->map[i] = (struct map_ent){key, node};
	cc->map_used++;
	return 0;
}

/* ---- registries: resources ("$id") and anchors ------------------------- */

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

static struct res *res_find(struct cc *cc, const char *uri, size_t len)
{
	for (size_t i = 0; i < cc->n_res; i++)
		if (strlen(cc->res[i].uri) == len && !memcmp(cc->res[i].uri, uri, len))
			return &cc->res[i];
	return NULL;
}

static int res_add(struct cc *cc, const char *uri, struct node *n)
{
	if (res_find(cc, uri, strlen(uri)))
		return schema_cc_fail(cc, -EINVAL, "\"$id\" names a resource twice");
	if (grow((void **)&cc->res, &cc->cap_res, cc->n_res + 1, sizeof(*cc->res)) < 0)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	cc->res[cc->n_res++] = (struct res){uri, n};
	return 0;
}

static struct node *anc_find(struct cc *cc, const char *base, const char *name)
{
	for (size_t i = 0; i < cc->n_anc; i++)
		if (!strcmp(cc->anc[i].base, base) && !strcmp(cc->anc[i].name, name))
			return cc->anc[i].node;
	return NULL;
}

static int anc_add(struct cc *cc, const char *base, const char *name, struct node *n)
{
	struct node *had = anc_find(cc, base, name);

	if (had == n)
		return 0;
	if (had)
		return schema_cc_fail(cc, -EINVAL, "anchor defined twice in one resource");
	if (grow((void **)&cc->anc, &cc->cap_anc, cc->n_anc + 1, sizeof(*cc->anc)) < 0)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	cc->anc[cc->n_anc++] = (struct anc){base, name, n};
	return 0;
}

/* ---- "$id", anchors, "$schema" of one node ----------------------------- */

/* "$id" (and draft-07's "#name" form of it, an anchor) changes the base URI
 * of this node and its subschemas. */
static int node_id(struct cc *cc, struct node *n, const json_t *id)
{
	char uri[APPL_SCHEMA_URI_MAX];
	const char *s = json_string_value(id), *hash;
	bool is_07 = cc->s->draft == SCHEMA_DRAFT_07;

	if (!s)
		return schema_cc_fail(cc, -EINVAL, "\"$id\" must be a string");
	if (schema_uri_resolve(n->base, s, uri, sizeof(uri)) < 0)
		return schema_cc_fail(cc, -E2BIG, "\"$id\" longer than %d bytes",
				      APPL_SCHEMA_URI_MAX);
	hash = strchr(uri, '#');
	if (hash && hash[1] && !is_07)
		return schema_cc_fail(cc, -EINVAL, "\"$id\" must not have a fragment");
	if (s[0] != '#') {
		n->base = schema_arena_strdup(cc, uri, hash ? (size_t)(hash - uri) : strlen(uri));
		if (!n->base || res_add(cc, n->base, n) < 0)
			return cc->rc;
	}
	if (hash && hash[1] && hash[1] != '/') {
		const char *name = schema_arena_strdup(cc, hash + 1, strlen(hash + 1));
		if (!name)
			return cc->rc;
		return anc_add(cc, n->base, name, n);
	}
	return 0;
}

static int node_anchor(struct cc *cc, struct node *n, const char *key)
{
	const json_t *v = json_object_get(n->json, key);
	const char *name = json_string_value(v);

	if (!v)
		return 0;
	if (!name || !name[0])
		return schema_cc_fail(cc, -EINVAL, "\"%s\" must be a non-empty string", key);
	return anc_add(cc, n->base, name, n);
}

static int dialect_of(struct cc *cc, const json_t *v, enum schema_draft *out)
{
	static const struct {
		const char *uri;
		enum schema_draft draft;
	} known[] = {
		{"https://json-schema.org/draft/2020-12/schema", SCHEMA_DRAFT_2020_12},
		{"https://json-schema.org/draft/2020-12/schema#", SCHEMA_DRAFT_2020_12},
		{"http://json-schema.org/draft/2020-12/schema", SCHEMA_DRAFT_2020_12},
		{"http://json-schema.org/draft/2020-12/schema#", SCHEMA_DRAFT_2020_12},
		{"http://json-schema.org/draft-07/schema#", SCHEMA_DRAFT_07},
		{"http://json-schema.org/draft-07/schema", SCHEMA_DRAFT_07},
		{"https://json-schema.org/draft-07/schema#", SCHEMA_DRAFT_07},
		{"https://json-schema.org/draft-07/schema", SCHEMA_DRAFT_07},
	};
	const char *s = json_string_value(v);
	char shown[APPL_SCHEMA_NAME_SHOWN_MAX * 4 + 1];

	if (!s)
		return schema_cc_fail(cc, -EINVAL, "\"$schema\" must be a string");
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (!strcmp(s, known[i].uri)) {
			*out = known[i].draft;
			return 0;
		}
	}
	/* Another dialect (draft-04's boolean exclusiveMaximum, a custom
	 * vocabulary) would be checked by rules it does not follow. */
	schema_shown(shown, sizeof(shown), s, APPL_SCHEMA_NAME_SHOWN_MAX);
	return schema_cc_fail(cc, -ENOTSUP,
			      "\"$schema\" \"%s\" is not supported (2020-12 and draft-07 are)",
			      shown);
}

static int node_ids(struct cc *cc, struct node *n)
{
	const json_t *obj = n->json, *v;
	bool is_07 = cc->s->draft == SCHEMA_DRAFT_07;
	int rc;

	v = json_object_get(obj, "$schema");
	if (v && obj != cc->s->doc) {
		enum schema_draft d;
		if (dialect_of(cc, v, &d) < 0)
			return cc->rc;
		if (d != cc->s->draft)
			return schema_cc_fail(cc, -ENOTSUP, "a subschema in another dialect");
	}
	/* draft-07: "$ref" makes every sibling, "$id" included, ignored. */
	v = json_object_get(obj, "$id");
	if (v && !(is_07 && json_object_get(obj, "$ref"))) {
		rc = node_id(cc, n, v);
		if (rc < 0)
			return rc;
	}
	/* The document is a resource even without "$id"; registered before its
	 * subschemas, so one of them cannot take its URI ("$id": ""). */
	if (obj == cc->s->doc && !res_find(cc, n->base, strlen(n->base))) {
		rc = res_add(cc, n->base, n);
		if (rc < 0)
			return rc;
	}
	if (is_07)
		return 0;
	rc = node_anchor(cc, n, "$anchor");
	if (rc < 0)
		return rc;
	/* With "$dynamicRef" refused, "$dynamicAnchor" is a plain anchor. */
	return node_anchor(cc, n, "$dynamicAnchor");
}

/* ---- keywords of one node ---------------------------------------------- */

/* Names that stay beside a draft-07 "$ref": containers of subschemas, which
 * "$ref" may point into. */
static bool kept_beside_ref(const struct kw_def *def)
{
	return !strcmp(def->name, "$ref") || !strcmp(def->name, "definitions") ||
	       !strcmp(def->name, "$defs");
}

/* Which table entries apply to obj; -ENOTSUP for a keyword of the other
 * dialect that would change what validates. Returns the count. */
static long node_kw_scan(struct cc *cc, const json_t *obj, bool d07_ref, bool *use)
{
	unsigned draft = 1u << cc->s->draft;
	long count = 0;

	for (size_t i = 0; i < cc->n_table; i++) {
		const struct kw_def *def = &cc->table[i];
		use[i] = false;
		if (!json_object_get(obj, def->name) || (d07_ref && !kept_beside_ref(def)))
			continue;
		if (!(def->drafts & draft)) {
			if (def->foreign_refused)
				return schema_cc_fail(cc, -ENOTSUP,
						      "\"%s\" is not a keyword of this dialect "
						      "(%s); declare \"$schema\"",
						      def->name,
						      draft == D_07 ? "draft-07" : "2020-12");
			continue;
		}
		use[i] = true;
		count++;
	}
	return count;
}

static int node_keywords(struct cc *cc, struct node *n)
{
	bool use[64];
	bool d07_ref = cc->s->draft == SCHEMA_DRAFT_07 && json_object_get(n->json, "$ref");
	long count;

	if (cc->n_table > sizeof(use) / sizeof(use[0]))
		return schema_cc_fail(cc, -EINVAL, "keyword table too large");
	count = node_kw_scan(cc, n->json, d07_ref, use);
	if (count <= 0)
		return (int)count;
	n->kws = schema_arena_alloc(cc, (size_t)count * sizeof(*n->kws));
	if (!n->kws)
		return cc->rc;
	for (size_t i = 0; i < cc->n_table; i++) {
		const struct kw_def *def = &cc->table[i];
		struct kw *kw;
		size_t mark;
		int rc;

		if (!use[i])
			continue;
		kw = &n->kws[n->n_kws++];
		kw->def = def;
		kw->val = json_object_get(n->json, def->name);
		mark = schema_where_push(cc, def->name);
		rc = def->compile(cc, n, n->json, kw);
		schema_where_pop(cc, mark);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static struct node *node_compile(struct cc *cc, const json_t *v, const char *base)
{
	struct node *n;
	int rc;

	if (!json_is_object(v) && !json_is_boolean(v)) {
		schema_cc_fail(cc, -EINVAL, "a schema must be an object or a boolean");
		return NULL;
	}
	n = map_get(cc, v);
	if (n)
		return n;
	if (cc->s->n_nodes >= APPL_SCHEMA_NODES_MAX || cc->depth >= APPL_SCHEMA_DEPTH_MAX) {
		schema_cc_fail(cc, -E2BIG, "more than %d subschemas, or nested deeper than %d",
			       APPL_SCHEMA_NODES_MAX, APPL_SCHEMA_DEPTH_MAX);
		return NULL;
	}
	n = schema_arena_alloc(cc, sizeof(*n));
	if (!n || map_put(cc, v, n) < 0)
		return NULL;
	cc->s->n_nodes++;
	n->json = v;
	n->base = base;
	n->boolean = json_is_boolean(v) ? (signed char)json_is_true(v) : -1;
	if (n->boolean >= 0)
		return n;
	cc->depth++;
	rc = node_ids(cc, n);
	if (rc == 0)
		rc = node_keywords(cc, n);
	cc->depth--;
	return rc < 0 ? NULL : n;
}

struct node *schema_node_compile(struct cc *cc, const json_t *v, const char *base, const char *key)
{
	size_t mark = schema_where_push(cc, key);
	struct node *n = node_compile(cc, v, base);

	schema_where_pop(cc, mark);
	return n;
}

/* ---- "$ref" ------------------------------------------------------------ */

int schema_ref_add(struct cc *cc, struct kw *kw, const char *base, const char *ref)
{
	char uri[APPL_SCHEMA_URI_MAX];

	if (schema_uri_resolve(base, ref, uri, sizeof(uri)) < 0)
		return schema_cc_fail(cc, -E2BIG, "\"$ref\" longer than %d bytes",
				      APPL_SCHEMA_URI_MAX);
	kw->ref = schema_arena_strdup(cc, uri, strlen(uri));
	kw->ref_where = schema_arena_strdup(cc, cc->where, cc->where_len);
	if (!kw->ref || !kw->ref_where)
		return cc->rc;
	if (grow((void **)&cc->pending, &cc->cap_pending, cc->n_pending + 1, sizeof(*cc->pending)) <
	    0)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	cc->pending[cc->n_pending++] = kw;
	return 0;
}

static struct node *ref_target(struct cc *cc, const struct res *r, const char *frag,
			       const char *shown)
{
	const json_t *t;
	struct node *n;

	if (!frag[0])
		return r->node;
	if (frag[0] != '/') {
		n = anc_find(cc, r->uri, frag);
		if (!n)
			schema_cc_fail(cc, -EINVAL, "\"$ref\" \"%s\" names no anchor", shown);
		return n;
	}
	t = schema_pointer_get(r->node->json, frag);
	if (!t) {
		schema_cc_fail(cc, -EINVAL, "\"$ref\" \"%s\" points at nothing", shown);
		return NULL;
	}
	/* A pointer may lead where no keyword walk went ("#/components/x"):
	 * compile it now, located by the pointer in messages. */
	schema_where_pop(cc, 0);
	return schema_node_compile(cc, t, r->node->base, frag + 1);
}

static int ref_resolve(struct cc *cc, struct kw *kw)
{
	char frag[APPL_SCHEMA_URI_MAX], shown[APPL_SCHEMA_NAME_SHOWN_MAX * 4 + 1];
	const char *hash = strchr(kw->ref, '#');
	size_t blen = hash ? (size_t)(hash - kw->ref) : strlen(kw->ref);
	const struct res *r = res_find(cc, kw->ref, blen);

	/* Messages name the reference where it is, and as it is written. */
	cc->where_len = strlen(kw->ref_where);
	memcpy(cc->where, kw->ref_where, cc->where_len + 1);
	schema_shown(shown, sizeof(shown), json_string_value(kw->val), APPL_SCHEMA_NAME_SHOWN_MAX);
	if (!r) {
		/* Fetching would let an upstream point the gateway anywhere;
		 * and an unresolved reference must not pass as "anything". */
		return schema_cc_fail(
			cc, -ENOTSUP,
			"remote \"$ref\" \"%s\" is not supported (nothing is fetched)", shown);
	}
	if (schema_pct_decode(hash ? hash + 1 : "", hash ? strlen(hash + 1) : 0, frag,
			      sizeof(frag)) < 0)
		return schema_cc_fail(cc, -EINVAL, "\"$ref\" \"%s\" has a malformed fragment",
				      shown);
	kw->one = ref_target(cc, r, frag, shown);
	return kw->one ? 0 : cc->rc;
}

/* ---- cycles that make no progress -------------------------------------- */

struct frame {
	const struct node *n;
	size_t ki, ci;
};

/* The next subschema applied to the same instance as f->n, or NULL. */
static struct node *inplace_next(struct frame *f)
{
	for (; f->ki < f->n->n_kws; f->ki++, f->ci = 0) {
		const struct kw *kw = &f->n->kws[f->ki];
		if (!kw->def->inplace)
			continue;
		while (f->ci <= kw->n) {
			size_t c = f->ci++;
			struct node *child = c == 0 ? kw->one : kw->many[c - 1];
			if (child)
				return child;
		}
	}
	return NULL;
}

/* Depth-first search over in-place edges ($ref, allOf, not, if, ...): a
 * back edge is a loop the validator would run round without ever moving
 * into the instance ({"$ref": "#"}, or two definitions naming each other). */
static int cycle_check_from(struct cc *cc, struct node *start, struct frame *stack)
{
	size_t sp = 0;

	start->mark = 1;
	stack[sp++] = (struct frame){start, 0, 0};
	while (sp) {
		struct frame *f = &stack[sp - 1];
		struct node *c = inplace_next(f);
		if (!c) {
			((struct node *)f->n)->mark = 2;
			sp--;
			continue;
		}
		if (c->mark == 1)
			return schema_cc_fail(
				cc, -ENOTSUP,
				"a \"$ref\" cycle that never moves into the instance");
		if (c->mark == 0) {
			c->mark = 1;
			stack[sp++] = (struct frame){c, 0, 0};
		}
	}
	return 0;
}

static int cycle_check(struct cc *cc)
{
	struct frame *stack = calloc(cc->s->n_nodes + 1, sizeof(*stack));
	int rc = 0;

	if (!stack)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	schema_where_pop(cc, 0);
	for (size_t i = 0; i < cc->map_cap && rc == 0; i++)
		if (cc->map[i].node && cc->map[i].node->mark == 0)
			rc = cycle_check_from(cc, cc->map[i].node, stack);
	free(stack);
	return rc;
}

/* ---- the whole document ------------------------------------------------ */

int schema_compile_all(struct cc *cc, enum schema_draft dflt)
{
	struct schema *s = cc->s;
	const json_t *sv = json_is_object(s->doc) ? json_object_get(s->doc, "$schema") : NULL;

	s->draft = dflt;
	if (sv && dialect_of(cc, sv, &s->draft) < 0)
		return cc->rc;
	s->root = schema_node_compile(cc, s->doc, ROOT_BASE, NULL);
	if (!s->root)
		return cc->rc;
	/* Resolving may compile subschemas only reachable by pointer, which
	 * may queue more references: n_pending grows inside the loop. */
	for (size_t i = 0; i < cc->n_pending; i++)
		if (ref_resolve(cc, cc->pending[i]) < 0)
			return cc->rc;
	return cycle_check(cc);
}

void schema_cc_release(struct cc *cc)
{
	free(cc->res);
	free(cc->anc);
	free(cc->pending);
	free(cc->map);
	pcre2_compile_context_free(cc->pcc);
}
