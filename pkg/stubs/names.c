/* names.c: upstream names as Python identifiers (docs/stubs.md, "Names").
 *
 * A server or tool name can be anything an upstream or the policy says; the
 * code needs `await ns.fn(...)`. Mangling is a pure function of one name, and
 * collisions are settled from the set of names only, so the same tools always
 * get the same names whatever order an upstream lists them in.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pyname.h"
#include "cell/proto.h"
#include "stubs/stubs.h"
#include "stubs/internal.h"

#define NAME_CAP APPL_RUNNER_PY_NAME_MAX

/* The runner's own rules for ns and fn are asked of cell_proto_tool_new
 * (name_accepted) rather than copied here; keywords come from base/pyname. */
static bool is_keyword(const char *s)
{
	return appl_py_keyword(s);
}

static bool is_word_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static bool is_ascii_ident(const char *s)
{
	if (!*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!is_word_char((unsigned char)*s))
			return false;
	return true;
}

bool name_is_param(const char *s)
{
	return strlen(s) <= NAME_CAP && is_ascii_ident(s) && !is_keyword(s);
}

static bool name_accepted(const char *ns, const char *fn)
{
	json_t *t = cell_proto_tool_new("x.y", ns, fn, NULL, NULL);

	json_decref(t);
	return t != NULL;
}

/* Copy the word characters of name; every run of other code points (any
 * non-ASCII one included) becomes one '_', and runs at either end are
 * dropped: "get-sum" -> "get_sum", " a / b " -> "a_b", "café" -> "caf". */
static void mangle_chars(const char *name, char *out, size_t cap)
{
	size_t n = strnlen(name, APPL_RUNNER_TOOL_NAME_MAX), len = 0;
	bool pending = false;

	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t used = utf8_next(name + i, n - i, &c);

		i += used;
		if (!(c < 0x80 && is_word_char((unsigned char)c))) {
			pending = true;
			continue;
		}
		if (len + (pending && len > 0) + 1 > cap)
			break; /* a long name is cut */
		if (pending && len > 0)
			out[len++] = '_';
		pending = false;
		out[len++] = (char)c;
	}
	out[len] = '\0';
}

static bool has_alnum(const char *s)
{
	for (; *s; s++)
		if (*s != '_')
			return true;
	return false;
}

/* The runner refuses names starting with "__" (they would reach the
 * namespace object's own attributes): keep one leading underscore. */
static void drop_dunder(char *s)
{
	size_t k = strspn(s, "_");

	if (k >= 2)
		memmove(s + 1, s + k, strlen(s + k) + 1);
}

void name_mangle(const char *name, enum name_kind kind, char *out)
{
	char buf[NAME_CAP + 2];
	size_t len;

	/* buf[0] is room for a '_' before a leading digit */
	mangle_chars(name, buf + 1, NAME_CAP);
	if (!has_alnum(buf + 1))
		snprintf(buf + 1, sizeof(buf) - 1, "%s", kind == NAME_NS ? "server" : "tool");
	drop_dunder(buf + 1);
	if (buf[1] >= '0' && buf[1] <= '9') {
		buf[0] = '_';
		buf[NAME_CAP] = '\0';
		memcpy(out, buf, strlen(buf) + 1);
	} else {
		memcpy(out, buf + 1, strlen(buf + 1) + 1);
	}
	len = strlen(out);
	/* keywords, builtins, `tools`, `asyncio`, `ToolError`: a trailing '_' */
	if ((kind == NAME_NS ? !name_accepted(out, "f") : !name_accepted("n", out)) &&
	    len < NAME_CAP) {
		out[len] = '_';
		out[len + 1] = '\0';
	}
}

/* ---- collisions ------------------------------------------------------------ */

/* An open-addressing set of names, for "is this name taken". */
struct nameset {
	const char **slot;
	size_t mask;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int set_init(struct nameset *st, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n + 2)
		cap *= 2;
	st->slot = calloc(cap, sizeof(*st->slot));
	st->mask = cap - 1;
	return st->slot ? 0 : -ENOMEM;
}

/* Add s (borrowed; must outlive the set); false when it was there. */
static bool set_add(struct nameset *st, const char *s)
{
	size_t i = name_hash(s) & st->mask;

	for (; st->slot[i]; i = (i + 1) & st->mask)
		if (strcmp(st->slot[i], s) == 0)
			return false;
	st->slot[i] = s;
	return true;
}

static bool set_has(const struct nameset *st, const char *s)
{
	for (size_t i = name_hash(s) & st->mask; st->slot[i]; i = (i + 1) & st->mask)
		if (strcmp(st->slot[i], s) == 0)
			return true;
	return false;
}

struct claim {
	const char *orig;
	const char *base;
	size_t idx;
	bool exact;
};

static int claim_cmp(const void *a, const void *b)
{
	const struct claim *x = a, *y = b;
	int c = strcmp(x->base, y->base);

	if (c == 0)
		c = (int)y->exact - (int)x->exact;
	return c ? c : strcmp(x->orig, y->orig);
}

/* base with suffix _k, cut so that it fits the runner's cap. */
static void suffixed(const char *base, unsigned long k, char *out)
{
	char suf[24];
	int sn = snprintf(suf, sizeof(suf), "_%lu", k);
	size_t keep = strlen(base);

	if (keep + (size_t)sn > NAME_CAP)
		keep = NAME_CAP - (size_t)sn;
	memcpy(out, base, keep);
	memcpy(out + keep, suf, (size_t)sn + 1);
}

static bool suffix_ok(const char *cand, enum name_kind kind, const char *ns)
{
	return kind == NAME_NS ? name_accepted(cand, "f") : name_accepted(ns, cand);
}

/* Second pass: a name the first pass could not give gets the first free
 * base_2, base_3, ... Terminates: at most n names are taken. */
static void claim_suffix(struct nameset *st, const struct claim *c, enum name_kind kind,
			 const char *ns, char *out)
{
	for (unsigned long k = 2;; k++) {
		suffixed(c->base, k, out);
		if (suffix_ok(out, kind, ns) && !set_has(st, out)) {
			set_add(st, out);
			return;
		}
	}
}

int names_settle(const char *const *originals, char (*bases)[NAME_CAP + 1], size_t n,
		 enum name_kind kind, const char *ns, char (*out)[NAME_CAP + 1])
{
	struct claim *cl = calloc(n ? n : 1, sizeof(*cl));
	struct nameset st;

	if (!cl || set_init(&st, n) < 0) {
		free(cl);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		cl[i] = (struct claim){originals[i], bases[i], i,
				       strcmp(originals[i], bases[i]) == 0};
	qsort(cl, n, sizeof(*cl), claim_cmp);
	/* First pass: each base goes to the first in order (an exact name
	 * first), so no suffixed name can take another tool's own name. */
	for (size_t i = 0; i < n; i++)
		out[cl[i].idx][0] = '\0';
	for (size_t i = 0; i < n; i++)
		if (set_add(&st, cl[i].base))
			memcpy(out[cl[i].idx], cl[i].base, strlen(cl[i].base) + 1);
	for (size_t i = 0; i < n; i++)
		if (out[cl[i].idx][0] == '\0')
			claim_suffix(&st, &cl[i], kind, ns, out[cl[i].idx]);
	free(st.slot);
	free(cl);
	return 0;
}
