/* internal.h: what the files of pkg/schema share. Not part of the API; only
 * the module's own sources include it. */
#ifndef APPL_SCHEMA_INTERNAL_H
#define APPL_SCHEMA_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "schema/schema.h"

/* Instance types, as a mask: what "type" allows and what a keyword applies to. */
enum {
	T_NULL = 1u << 0,
	T_BOOL = 1u << 1,
	T_OBJ = 1u << 2,
	T_ARR = 1u << 3,
	T_STR = 1u << 4,
	T_INT = 1u << 5, /* "integer": a JSON integer, or a real with no fraction */
	T_NUM = 1u << 6, /* "number" */
	T_ANY = 0x7f,
};

/* Dialects a keyword belongs to, as a mask of enum schema_draft bits. */
#define D_2020 (1u << SCHEMA_DRAFT_2020_12)
#define D_07   (1u << SCHEMA_DRAFT_07)
#define D_ALL  (D_2020 | D_07)

struct node;
struct kw;
struct cc;
struct vc;

/* One keyword of the dispatch table (keywords.c). */
struct kw_def {
	const char *name;
	unsigned drafts;      /* dialects where it is a keyword */
	unsigned types;	      /* instance types it looks at; others pass */
	bool inplace;	      /* its subschemas apply to the same instance */
	bool foreign_refused; /* present in the other dialect: refuse, do not ignore */
	int (*compile)(struct cc *cc, struct node *n, const json_t *obj, struct kw *kw);
	/* 1 valid, 0 invalid (message set unless quiet), < 0 error */
	int (*validate)(struct vc *vc, const struct kw *kw, const json_t *inst);
};

/* One compiled keyword. A generic record rather than one struct per keyword:
 * each keyword uses the fields it needs. */
struct kw {
	const struct kw_def *def;
	const json_t *val;	 /* the keyword's value in the schema (borrowed) */
	struct node *one;	 /* a single subschema */
	struct node **many;	 /* a list of subschemas (entries may be NULL) */
	const char **names;	 /* keys matching many[] (properties, ...) */
	pcre2_code **res;	 /* patterns matching many[], or res[0] for pattern */
	size_t n;		 /* entries in many/names/res */
	size_t min, max;	 /* counts (lengths, sizes, contains bounds) */
	unsigned mask;		 /* "type" */
	const struct kw *aux[2]; /* sibling keywords consulted (properties, ...) */
	const char *ref;	 /* "$ref": the absolute URI, until resolved */
	const char *ref_where;	 /* "$ref": where it is written, for messages */
};

struct node {
	const json_t *json; /* the schema value (borrowed from the document) */
	const char *base;   /* base URI that relative references resolve against */
	struct kw *kws;
	size_t n_kws;
	signed char boolean; /* -1 an object schema, else the boolean schema */
	unsigned char mark;  /* cycle check colour */
};

struct chunk;

struct schema {
	json_t *doc; /* owned deep copy of the document */
	struct node *root;
	enum schema_draft draft;
	struct chunk *chunks; /* arena for nodes, keywords, strings */
	size_t arena_bytes;
	pcre2_code **codes; /* every compiled pattern, to free */
	size_t n_codes;
	size_t n_nodes;
};

/* Compile-time state (compile.c). */
struct cc {
	struct schema *s;
	struct appl_err *err;
	int rc;					    /* first error, 0 while none */
	char where[APPL_SCHEMA_PATH_SHOWN_MAX + 1]; /* schema location, for messages */
	size_t where_len;
	struct res {
		const char *uri;
		struct node *node;
	} * res;
	size_t n_res, cap_res;
	struct anc {
		const char *base;
		const char *name;
		struct node *node;
	} * anc;
	size_t n_anc, cap_anc;
	struct kw **pending; /* "$ref" keywords to resolve */
	size_t n_pending, cap_pending;
	struct map_ent {
		const json_t *key;
		struct node *node;
	} * map;
	size_t map_cap, map_used;
	pcre2_compile_context *pcc;
	unsigned depth;
	/* The keyword dispatch table (keywords.c), set by schema.c: compile.c
	 * reaches the keywords only through it. */
	const struct kw_def *table;
	size_t n_table;
};

/* Validation-time state (validate.c). */
struct vc {
	const struct schema *s;
	struct appl_err *err;
	pcre2_match_data *md;
	pcre2_match_context *mctx;
	size_t visits, compares, regex_calls;
	unsigned depth;
	unsigned quiet;	    /* > 0: failures are expected, no message */
	const char *failed; /* the keyword of the message (static); NULL: none */
	unsigned n_path;
	struct seg {
		const char *key;
		size_t idx;
	} path[APPL_SCHEMA_EVAL_DEPTH_MAX + 1];
};

/* Whether d has no fraction, without libm: past 2^53 every double is whole. */
static inline bool schema_dbl_integral(double d)
{
	double a = d < 0 ? -d : d;

	if (a >= 9007199254740992.0)
		return a == a && a - a == 0; /* not NaN, not infinite */
	return (double)(long long)d == d;
}

/* value.c */
bool schema_json_depth_ok(const json_t *v, unsigned depth);
void schema_shown(char *out, size_t outsz, const char *s, size_t max);

/* compile.c */
void *schema_arena_alloc(struct cc *cc, size_t size);
void schema_arena_free(struct schema *s);
struct node *schema_node_compile(struct cc *cc, const json_t *v, const char *base, const char *key);
size_t schema_where_push(struct cc *cc, const char *key);
void schema_where_pop(struct cc *cc, size_t mark);
int schema_ref_add(struct cc *cc, struct kw *kw, const char *base, const char *ref);
int schema_cc_fail(struct cc *cc, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Compile cc->s->doc (cc->table set) under dflt unless it names its own
 * dialect; then release what only compiling needed. */
int schema_compile_all(struct cc *cc, enum schema_draft dflt);
void schema_cc_release(struct cc *cc);

/* keywords.c */
extern const struct kw_def schema_kw_table[];
extern const size_t schema_kw_count;

/* uri.c: RFC 3986 reference resolution into out (NUL-terminated). */
int schema_uri_resolve(const char *base, const char *ref, char *out, size_t outsz);
int schema_pct_decode(const char *in, size_t len, char *out, size_t outsz);
const json_t *schema_pointer_get(const json_t *root, const char *ptr);

/* regex.c */
int schema_regex_compile(struct cc *cc, const char *src, size_t len, pcre2_code **out);
int schema_regex_match(struct vc *vc, const pcre2_code *re, const char *subj, size_t len);

/* validate.c */
int schema_node_validate(struct vc *vc, const struct node *n, const json_t *inst);
int schema_fail(struct vc *vc, const char *kw, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int schema_cap(struct vc *vc, const char *what);
int schema_json_equal(struct vc *vc, const json_t *a, const json_t *b);
unsigned schema_type_of(const json_t *v);
void schema_path_push_key(struct vc *vc, const char *key);
void schema_path_push_idx(struct vc *vc, size_t idx);
void schema_path_pop(struct vc *vc);
int schema_num_cmp(const json_t *a, const json_t *b);
void schema_num_show(char *out, size_t outsz, const json_t *v);

#endif
