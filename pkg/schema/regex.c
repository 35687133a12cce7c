/* regex.c: "pattern" and "patternProperties" on PCRE2, as close to ECMA-262
 * as PCRE2 goes (the differences are listed in docs/schema.md). Patterns are
 * compiled once, with the schema; every match runs under match, depth and
 * heap limits so a pattern chosen by a hostile upstream cannot stall the
 * gateway on a hostile argument (catastrophic backtracking). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "schema/internal.h"

/* ECMA-262 without flags: UTF code points; '$' only at the very end (PCRE2
 * would also match before a final newline); '[]' matches nothing and '[^]'
 * anything; a backreference to an unset group matches the empty string;
 * \uHHHH and \u{H...} are code points. No PCRE2_UCP: \d, \w and \b stay
 * ASCII as in ECMA-262. No PCRE2_DOTALL, and '.' and \s are rewritten to
 * ECMA-262's sets (below). \C is refused, it could split a UTF-8 sequence. */
#define RE_OPTIONS                                                                                 \
	(PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_MATCH_UNSET_BACKREF |  \
	 PCRE2_ALT_BSUX | PCRE2_NEVER_BACKSLASH_C)

/* ECMA-262 classes PCRE2 spells otherwise. '.' stops at LF, CR, U+2028 and
 * U+2029 only; \s is Unicode white space and line terminators, which is
 * PCRE2's \p{Xsp} (Z, and tab to CR) plus U+FEFF. */
#define ECMA_DOT	  "[^\\n\\r\\u2028\\u2029]"
#define ECMA_SPACE_IN	  "\\p{Xsp}\\ufeff"
#define ECMA_SPACE	  "[" ECMA_SPACE_IN "]"
#define ECMA_NOT_SPACE	  "[^" ECMA_SPACE_IN "]"
#define ECMA_NOT_SPACE_IN "\\P{Xsp}"
/* The longest rewrite of one input byte ('.'), for sizing the output. */
#define REWRITE_GROWTH (sizeof(ECMA_DOT) - 1)

static int regex_ctx(struct cc *cc)
{
	if (cc->pcc)
		return 0;
	cc->pcc = pcre2_compile_context_create(NULL);
	if (!cc->pcc)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	pcre2_set_compile_extra_options(cc->pcc, PCRE2_EXTRA_ALT_BSUX);
	pcre2_set_parens_nest_limit(cc->pcc, APPL_SCHEMA_REGEX_NEST_MAX);
	pcre2_set_max_pattern_length(cc->pcc, APPL_SCHEMA_PATTERN_MAX * REWRITE_GROWTH);
	return 0;
}

/* ECMA-262 spells Unicode properties the long way (\p{Letter},
 * \p{Script=Greek}); PCRE2 10.42 knows the short names (\p{L},
 * \p{sc:Greek}). Long general category names, and the gc=, sc= and scx=
 * prefixes, are rewritten; everything else is copied as written. */
static const struct {
	const char *ecma, *pcre;
} gc_names[] = {
	{"Letter", "L"},
	{"Cased_Letter", "L&"},
	{"Uppercase_Letter", "Lu"},
	{"Lowercase_Letter", "Ll"},
	{"Titlecase_Letter", "Lt"},
	{"Modifier_Letter", "Lm"},
	{"Other_Letter", "Lo"},
	{"Mark", "M"},
	{"Combining_Mark", "M"},
	{"Nonspacing_Mark", "Mn"},
	{"Spacing_Mark", "Mc"},
	{"Enclosing_Mark", "Me"},
	{"Number", "N"},
	{"Decimal_Number", "Nd"},
	{"digit", "Nd"},
	{"Letter_Number", "Nl"},
	{"Other_Number", "No"},
	{"Punctuation", "P"},
	{"punct", "P"},
	{"Connector_Punctuation", "Pc"},
	{"Dash_Punctuation", "Pd"},
	{"Open_Punctuation", "Ps"},
	{"Close_Punctuation", "Pe"},
	{"Initial_Punctuation", "Pi"},
	{"Final_Punctuation", "Pf"},
	{"Other_Punctuation", "Po"},
	{"Symbol", "S"},
	{"Math_Symbol", "Sm"},
	{"Currency_Symbol", "Sc"},
	{"Modifier_Symbol", "Sk"},
	{"Other_Symbol", "So"},
	{"Separator", "Z"},
	{"Space_Separator", "Zs"},
	{"Line_Separator", "Zl"},
	{"Paragraph_Separator", "Zp"},
	{"Other", "C"},
	{"Control", "Cc"},
	{"cntrl", "Cc"},
	{"Format", "Cf"},
	{"Unassigned", "Cn"},
	{"Private_Use", "Co"},
	{"Surrogate", "Cs"},
};

struct out {
	char *p;
	size_t len, cap;
};

static int out_put(struct out *o, const char *s, size_t n)
{
	if (n > o->cap - o->len)
		return -E2BIG;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	return 0;
}

static int prop_put(struct out *o, const char *name, size_t n)
{
	static const struct {
		const char *ecma, *pcre;
	} prefixes[] = {
		{"General_Category=", ""},
		{"gc=", ""},
		{"Script=", "sc:"},
		{"sc=", "sc:"},
		{"Script_Extensions=", "scx:"},
		{"scx=", "scx:"},
	};

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i].ecma);
		if (n > pl && !memcmp(name, prefixes[i].ecma, pl)) {
			if (out_put(o, prefixes[i].pcre, strlen(prefixes[i].pcre)) < 0)
				return -E2BIG;
			name += pl;
			n -= pl;
			break;
		}
	}
	for (size_t i = 0; i < sizeof(gc_names) / sizeof(gc_names[0]); i++)
		if (strlen(gc_names[i].ecma) == n && !memcmp(name, gc_names[i].ecma, n))
			return out_put(o, gc_names[i].pcre, strlen(gc_names[i].pcre));
	return out_put(o, name, n);
}

static int put_str(struct out *o, const char *s)
{
	return out_put(o, s, strlen(s));
}

/* One escape at src[*i] (a backslash with a byte after it). */
static int rewrite_escape(const char *src, size_t len, size_t *i, bool in_class, struct out *o)
{
	const char *p = src + *i, *close;
	char c = p[1];

	if ((c == 'p' || c == 'P') && *i + 2 < len && p[2] == '{' &&
	    (close = memchr(p + 3, '}', len - *i - 3))) {
		*i = (size_t)(close - src) + 1;
		if (out_put(o, p, 3) < 0 || prop_put(o, p + 3, (size_t)(close - (p + 3))) < 0)
			return -E2BIG;
		return out_put(o, "}", 1);
	}
	*i += 2;
	if (c == 's')
		return put_str(o, in_class ? ECMA_SPACE_IN : ECMA_SPACE);
	if (c == 'S')
		return put_str(o, in_class ? ECMA_NOT_SPACE_IN : ECMA_NOT_SPACE);
	/* \Q...\E would quote the rewrites above; ECMA-262 reads \Q as Q. */
	if (c == 'Q' || c == 'E')
		return out_put(o, &c, 1);
	return out_put(o, p, 2);
}

/* Rewrite src into o, tracking character classes: there '.' is literal, and
 * a '[' is escaped so that PCRE2 does not read "[:alpha:]" as a POSIX class
 * (ECMA-262 has none). "[]" and "[^]" close at once, as in ECMA-262. */
static int ecma_rewrite(const char *src, size_t len, struct out *o)
{
	bool in_class = false;
	size_t i = 0;
	int rc = 0;

	while (i < len && rc == 0) {
		char c = src[i];
		if (c == '\\' && i + 1 < len) {
			rc = rewrite_escape(src, len, &i, in_class, o);
			continue;
		}
		i++;
		if (in_class) {
			in_class = c != ']';
			rc = c == '[' ? put_str(o, "\\[") : out_put(o, &c, 1);
		} else if (c == '.') {
			rc = put_str(o, ECMA_DOT);
		} else if (c == '[') {
			size_t start = i;
			if (i < len && src[i] == '^')
				i++;
			in_class = !(i < len && src[i] == ']');
			if (!in_class)
				i++;
			rc = out_put(o, src + start - 1, i - start + 1);
		} else {
			rc = out_put(o, &c, 1);
		}
	}
	return rc;
}

static int codes_add(struct cc *cc, pcre2_code *re)
{
	struct schema *s = cc->s;
	pcre2_code **grown;

	if (s->n_codes >= APPL_SCHEMA_REGEXES_MAX) {
		pcre2_code_free(re);
		return schema_cc_fail(cc, -E2BIG, "more than %d patterns", APPL_SCHEMA_REGEXES_MAX);
	}
	grown = realloc(s->codes, (s->n_codes + 1) * sizeof(*grown));
	if (!grown) {
		pcre2_code_free(re);
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	}
	s->codes = grown;
	s->codes[s->n_codes++] = re;
	return 0;
}

int schema_regex_compile(struct cc *cc, const char *src, size_t len, pcre2_code **out)
{
	PCRE2_UCHAR msg[128];
	PCRE2_SIZE off;
	pcre2_code *re;
	char shown[APPL_SCHEMA_NAME_SHOWN_MAX * 4 + 1];
	struct out o = {NULL, 0, 0};
	int rc, code;

	if (len > APPL_SCHEMA_PATTERN_MAX)
		return schema_cc_fail(cc, -E2BIG, "pattern of %zu bytes, more than %d", len,
				      APPL_SCHEMA_PATTERN_MAX);
	rc = regex_ctx(cc);
	if (rc < 0)
		return rc;
	o.cap = len * REWRITE_GROWTH + 1;
	o.p = malloc(o.cap);
	if (!o.p)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	if (ecma_rewrite(src, len, &o) < 0) {
		free(o.p);
		return schema_cc_fail(cc, -E2BIG, "pattern too long once rewritten");
	}
	re = pcre2_compile((PCRE2_SPTR)o.p, o.len, RE_OPTIONS, &code, &off, cc->pcc);
	free(o.p);
	if (!re) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		schema_shown(shown, sizeof(shown), src, APPL_SCHEMA_NAME_SHOWN_MAX);
		/* No offset: it would count in the rewritten pattern. */
		return schema_cc_fail(cc, -ENOTSUP, "pattern \"%s\" is not supported: %s", shown,
				      (const char *)msg);
	}
	rc = codes_add(cc, re);
	if (rc < 0)
		return rc;
	*out = re;
	return 0;
}

int schema_regex_match(struct vc *vc, const pcre2_code *re, const char *subj, size_t len)
{
	int rc;

	if (++vc->regex_calls > APPL_SCHEMA_REGEX_CALLS_MAX)
		return schema_cap(vc, "regex matches");
	rc = pcre2_match(re, (PCRE2_SPTR)subj, len, 0, 0, vc->md, vc->mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
	    rc == PCRE2_ERROR_HEAPLIMIT)
		return schema_cap(vc, "regex work");
	if (rc == PCRE2_ERROR_NOMEMORY)
		return appl_err_set(vc->err, -ENOMEM, "out of memory");
	/* Bad UTF-8 in a string cannot come from jansson's parser; if it comes
	 * from elsewhere, refuse rather than guess. */
	return appl_err_set(vc->err, -EINVAL, "string is not valid UTF-8");
}
