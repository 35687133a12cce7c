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
 * ASCII as in ECMA-262. No PCRE2_DOTALL: '.' stops at line terminators. \C is
 * refused, it could split a UTF-8 sequence. */
#define RE_OPTIONS                                                                                 \
	(PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_ALLOW_EMPTY_CLASS | PCRE2_MATCH_UNSET_BACKREF |  \
	 PCRE2_ALT_BSUX | PCRE2_NEVER_BACKSLASH_C)

static int regex_ctx(struct cc *cc)
{
	if (cc->pcc)
		return 0;
	cc->pcc = pcre2_compile_context_create(NULL);
	if (!cc->pcc)
		return schema_cc_fail(cc, -ENOMEM, "out of memory");
	pcre2_set_compile_extra_options(cc->pcc, PCRE2_EXTRA_ALT_BSUX);
	pcre2_set_parens_nest_limit(cc->pcc, APPL_SCHEMA_REGEX_NEST_MAX);
	pcre2_set_max_pattern_length(cc->pcc, APPL_SCHEMA_PATTERN_MAX);
	/* ECMA-262 line terminators are LF, CR, U+2028 and U+2029: ANY is the
	 * nearest PCRE2 convention ('.' also stops at VT, FF and NEL). */
	pcre2_set_newline(cc->pcc, PCRE2_NEWLINE_ANY);
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

/* Rewrite src into o; the output is never longer than the input. */
static int ecma_rewrite(const char *src, size_t len, struct out *o)
{
	size_t i = 0;

	while (i < len) {
		const char *close;
		if (src[i] != '\\' || i + 1 >= len) {
			if (out_put(o, src + i, 1) < 0)
				return -E2BIG;
			i++;
			continue;
		}
		if ((src[i + 1] == 'p' || src[i + 1] == 'P') && i + 2 < len && src[i + 2] == '{' &&
		    (close = memchr(src + i + 3, '}', len - i - 3))) {
			if (out_put(o, src + i, 3) < 0 ||
			    prop_put(o, src + i + 3, (size_t)(close - (src + i + 3))) < 0 ||
			    out_put(o, "}", 1) < 0)
				return -E2BIG;
			i = (size_t)(close - src) + 1;
			continue;
		}
		/* Any other escape, \\ included, is copied whole. */
		if (out_put(o, src + i, 2) < 0)
			return -E2BIG;
		i += 2;
	}
	return 0;
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
	char buf[APPL_SCHEMA_PATTERN_MAX];
	struct out o = {buf, 0, sizeof(buf)};
	int rc, code;

	if (len > APPL_SCHEMA_PATTERN_MAX)
		return schema_cc_fail(cc, -E2BIG, "pattern of %zu bytes, more than %d", len,
				      APPL_SCHEMA_PATTERN_MAX);
	rc = regex_ctx(cc);
	if (rc < 0)
		return rc;
	if (ecma_rewrite(src, len, &o) < 0)
		return schema_cc_fail(cc, -E2BIG, "pattern longer than %d bytes",
				      APPL_SCHEMA_PATTERN_MAX);
	re = pcre2_compile((PCRE2_SPTR)o.p, o.len, RE_OPTIONS, &code, &off, cc->pcc);
	if (!re) {
		pcre2_get_error_message(code, msg, sizeof(msg));
		schema_shown(shown, sizeof(shown), src, APPL_SCHEMA_NAME_SHOWN_MAX);
		return schema_cc_fail(cc, -ENOTSUP, "pattern \"%s\" is not supported: %s at %zu",
				      shown, (const char *)msg, (size_t)off);
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
