/* internal.h: what the files of pkg/stubs share; not part of the API. */
#ifndef APPL_STUBS_INTERNAL_H
#define APPL_STUBS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"

/* ---- text.c: a bounded string builder and escaping ------------------------ */

/* A growing string that never holds more than max bytes of text. An append
 * that would pass max fails whole and sets `full`, and every later append
 * fails too, so one check at the end says whether the text is complete. */
struct sbuf {
	char *p;
	size_t len;
	size_t cap;
	size_t max;
	bool full;
	bool nomem;
};

void sb_init(struct sbuf *b, size_t max);
void sb_free(struct sbuf *b);
/* Back to len bytes (len <= b->len), clearing `full`: undo a partial piece. */
void sb_cut(struct sbuf *b, size_t len);
bool sb_putn(struct sbuf *b, const char *s, size_t n);
bool sb_puts(struct sbuf *b, const char *s);
bool sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The text as a new NUL-terminated string (b is emptied), or NULL when b ran
 * out of memory. A full b still gives its text so far. */
char *sb_steal(struct sbuf *b);

/* How upstream text is written:
 * ESC_DOC   inside a triple-quoted docstring: newlines kept (each following
 *           line indented), a backslash doubled, a quote after a quote
 *           escaped, so `"""` can never appear;
 * ESC_STR   inside a "..." literal: also quotes and newlines escaped;
 * ESC_LINE  plain display text on one line (the description): newlines and
 *           tabs become spaces, nothing else needs escaping.
 * In every mode, control characters and invisible or direction-changing
 * code points are written as Python escapes (\x1b, \u202e, \U000e0041), and
 * bytes that are not UTF-8 as U+FFFD. */
enum esc_mode { ESC_DOC, ESC_STR, ESC_LINE };

/* Append s[0..n) escaped for mode, at most budget bytes of output; indent
 * (ESC_DOC) starts each line after a newline. Returns true when all of s went
 * in, false when it was cut at a character boundary (or b is full). */
bool esc_put(struct sbuf *b, const char *s, size_t n, enum esc_mode mode, size_t budget,
	     const char *indent);

/* Decode the code point at s[0..n) (n > 0) into *cp and return its length;
 * a byte that starts no valid UTF-8 sequence is U+FFFD of length 1. */
size_t utf8_next(const char *s, size_t n, uint32_t *cp);

/* s[0..*n) without leading and trailing white space (space, tab, CR, LF). */
const char *text_trim(const char *s, size_t *n);

/* ---- names.c: Python names ------------------------------------------------ */

enum name_kind { NAME_NS, NAME_FN };

/* Write the mangled form of name (NUL-terminated) into out
 * (APPL_RUNNER_PY_NAME_MAX + 1 bytes): an identifier the runner accepts for
 * kind, before collisions are settled. */
void name_mangle(const char *name, enum name_kind kind, char *out);

/* 1 when s may be a keyword parameter in a signature: an ASCII identifier of
 * at most APPL_RUNNER_PY_NAME_MAX bytes, not a keyword. */
bool name_is_param(const char *s);

/* Settle collisions among n names: bases[i] (mangled) of originals[i].
 * Writes each final name into out[i] (APPL_RUNNER_PY_NAME_MAX + 1 bytes).
 * The names that equal their original claim them first, then the rest in
 * order of (base, original); a name already taken gets _2, _3, ...
 * Returns 0 or -ENOMEM. */
int names_settle(const char *const *originals, char (*bases)[APPL_RUNNER_PY_NAME_MAX + 1], size_t n,
		 enum name_kind kind, const char *ns, char (*out)[APPL_RUNNER_PY_NAME_MAX + 1]);

/* ---- types.c: schemas as Python types --------------------------------------- */

/* The schema s means, with local $ref followed from root (bounded); NULL when
 * a reference cannot be followed. */
const json_t *type_resolve(const json_t *root, const json_t *s);

/* The Python type of s (borrowed; root for $ref) into out
 * (APPL_STUBS_TYPE_MAX + 1 bytes): "int", "list[str]", "str | None",
 * "Literal[\"a\", \"b\"]", "Any". */
void type_render(const json_t *root, const json_t *s, char *out);

/* Append v as a short Python literal (None, True, 5, 2.5, "x", [1, 2],
 * {"k": 1}); false (b unchanged) when it has no form of at most
 * APPL_STUBS_LITERAL_MAX bytes. */
bool literal_put(struct sbuf *b, const json_t *v);

/* ---- stub.c: one tool ------------------------------------------------------- */

/* What stubs.c keeps for one tool. */
struct stub_entry {
	const struct stubs_tool *src; /* borrowed during stubs_build only */
	char ns[APPL_RUNNER_PY_NAME_MAX + 1];
	char fn[APPL_RUNNER_PY_NAME_MAX + 1];
	char *mcp;	 /* "server.name" */
	char *text;	 /* the stub */
	char *summary;	 /* first line of the description */
	char *signature; /* "ns.fn(...)" for the description */
	char *why_not;	 /* NULL: offered; else a stand-in, and why */
	char *returns;	 /* the return annotation, "" when none */
	unsigned level;	 /* detail level text was made at (STUB_LEVELS - 1 is least) */
};

#define STUB_LEVELS 5

/* (Re)make e->text at e->level, going to less detail until it fits
 * APPL_STUBS_TEXT_MAX; at the first call also e->summary and e->signature.
 * Returns 0 or -ENOMEM. */
int stub_make(struct stub_entry *e);

#endif
