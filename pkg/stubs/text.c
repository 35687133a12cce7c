/* text.c: a bounded string builder, UTF-8 decoding, and the escaping of
 * upstream text for the places a stub puts it (see internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stubs/stubs.h"
#include "base/utf8.h"
#include "stubs/internal.h"

void sb_init(struct sbuf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void sb_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void sb_cut(struct sbuf *b, size_t len)
{
	if (len <= b->len) {
		b->len = len;
		if (b->p)
			b->p[len] = '\0';
	}
	b->full = false;
}

/* Room for len + n bytes and a NUL, growing by doubling; the cap is known
 * before anything is allocated, so growth never passes max + 1. */
static bool sb_room(struct sbuf *b, size_t n)
{
	size_t need = b->len + n + 1;
	size_t cap = b->cap ? b->cap : 256;
	char *p;

	if (need <= b->cap)
		return true;
	while (cap < need)
		cap *= 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	p = realloc(b->p, cap);
	if (!p) {
		b->nomem = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

bool sb_putn(struct sbuf *b, const char *s, size_t n)
{
	if (b->full || b->nomem)
		return false;
	if (n > b->max - b->len) {
		b->full = true;
		return false;
	}
	if (!sb_room(b, n))
		return false;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return true;
}

bool sb_puts(struct sbuf *b, const char *s)
{
	return sb_putn(b, s, strlen(s));
}

bool sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[256], *big;
	va_list ap, again;
	bool ok;
	int n;

	va_start(ap, fmt);
	va_copy(again, ap);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n > b->max - b->len) {
		va_end(again);
		b->full = true;
		return false;
	}
	if ((size_t)n < sizeof(tmp)) {
		va_end(again);
		return sb_putn(b, tmp, (size_t)n);
	}
	/* longer than tmp, and within the cap (checked first) */
	big = malloc((size_t)n + 1);
	if (!big) {
		va_end(again);
		b->nomem = true;
		return false;
	}
	vsnprintf(big, (size_t)n + 1, fmt, again);
	va_end(again);
	ok = sb_putn(b, big, (size_t)n);
	free(big);
	return ok;
}

char *sb_steal(struct sbuf *b)
{
	char *p;

	if (b->nomem) {
		sb_free(b);
		return NULL;
	}
	p = b->p ? b->p : strdup("");
	memset(b, 0, sizeof(*b));
	return p;
}

size_t utf8_next(const char *str, size_t n, uint32_t *cp)
{
	size_t len = appl_utf8_decode((const unsigned char *)str, n, cp);

	if (len == 0) {
		*cp = 0xFFFD; /* one bad byte stands for one replacement character */
		return 1;
	}
	return len;
}

const char *text_trim(const char *s, size_t *n)
{
	while (*n && strchr(" \t\r\n", s[0]))
		s++, (*n)--;
	while (*n && strchr(" \t\r\n", s[*n - 1]))
		(*n)--;
	return s;
}

/* Code points written as escapes wherever upstream text is shown: controls,
 * and the invisible ones that can hide text from a reader or smuggle it past
 * one (zero-width and joiner characters, bidirectional overrides of
 * "Trojan Source", line separators, tag characters and variation selectors
 * that can carry a hidden ASCII message to a model). Sorted ranges. */
static const uint32_t hidden_ranges[][2] = {
	{0x0000, 0x001F}, {0x007F, 0x009F},   {0x00AD, 0x00AD},	  {0x034F, 0x034F},
	{0x061C, 0x061C}, {0x115F, 0x1160},   {0x17B4, 0x17B5},	  {0x180B, 0x180F},
	{0x200B, 0x200F}, {0x2028, 0x202E},   {0x2060, 0x206F},	  {0x3164, 0x3164},
	{0xFE00, 0xFE0F}, {0xFEFF, 0xFEFF},   {0xFFA0, 0xFFA0},	  {0xFFF0, 0xFFFB},
	{0xFFFE, 0xFFFF}, {0x1BCA0, 0x1BCA3}, {0x1D173, 0x1D17A}, {0xE0000, 0xE0FFF},
};

static bool cp_hidden(uint32_t c)
{
	for (size_t i = 0; i < sizeof(hidden_ranges) / sizeof(hidden_ranges[0]); i++) {
		if (c < hidden_ranges[i][0])
			return false;
		if (c <= hidden_ranges[i][1])
			return true;
	}
	return false;
}

/* The bytes one code point becomes in mode; *tmp holds escapes. */
struct piece {
	char tmp[16];
	const char *s;
	size_t n;
	bool newline; /* ESC_DOC: start a new (indented) line */
};

static void piece_escape(struct piece *p, uint32_t c)
{
	int n;

	if (c < 0x100)
		n = snprintf(p->tmp, sizeof(p->tmp), "\\x%02x", (unsigned)c);
	else if (c < 0x10000)
		n = snprintf(p->tmp, sizeof(p->tmp), "\\u%04x", (unsigned)c);
	else
		n = snprintf(p->tmp, sizeof(p->tmp), "\\U%08x", (unsigned)c);
	p->s = p->tmp;
	p->n = (size_t)n;
}

static void piece_lit(struct piece *p, const char *s)
{
	p->s = s;
	p->n = strlen(s);
}

/* Control characters with a meaning in each mode; false when c has none. */
static bool piece_control(struct piece *p, uint32_t c, enum esc_mode mode)
{
	if (c == '\n' || c == '\r') {
		if (mode == ESC_DOC)
			p->newline = true, p->n = 0;
		else
			piece_lit(p, mode == ESC_STR ? (c == '\n' ? "\\n" : "\\r") : " ");
		return true;
	}
	if (c == '\t') {
		piece_lit(p, mode == ESC_STR ? "\\t" : mode == ESC_LINE ? " " : "\t");
		return true;
	}
	return false;
}

static void piece_make(struct piece *p, uint32_t c, const char *src, size_t len, enum esc_mode mode,
		       bool after_quote)
{
	p->newline = false;
	if (piece_control(p, c, mode))
		return;
	if (cp_hidden(c) || c == 0xFFFD) {
		if (c == 0xFFFD)
			piece_lit(p, "\xEF\xBF\xBD");
		else
			piece_escape(p, c);
		return;
	}
	if (c == '\\' && mode != ESC_LINE)
		piece_lit(p, "\\\\");
	else if (c == '"' && (mode == ESC_STR || (mode == ESC_DOC && after_quote)))
		piece_lit(p, "\\\"");
	else
		p->s = src, p->n = len;
}

struct esc_state {
	struct sbuf *b;
	size_t used, budget;
	const char *indent;
	unsigned newlines; /* newlines just seen, not yet written (ESC_DOC) */
};

/* Write pending newlines (at most one blank line) and the indent. */
static bool esc_flush_lines(struct esc_state *st)
{
	size_t ind = strlen(st->indent);
	unsigned nl = st->newlines > 2 ? 2 : st->newlines;
	size_t need = nl + ind;

	if (st->newlines == 0)
		return true;
	if (st->used + need > st->budget)
		return false;
	for (unsigned i = 0; i < nl; i++)
		if (!sb_putn(st->b, "\n", 1))
			return false;
	if (!sb_puts(st->b, st->indent))
		return false;
	st->used += need;
	st->newlines = 0;
	return true;
}

static bool esc_piece(struct esc_state *st, const struct piece *p)
{
	if (p->newline) {
		st->newlines++;
		return true;
	}
	if (!esc_flush_lines(st))
		return false;
	if (st->used + p->n > st->budget || !sb_putn(st->b, p->s, p->n))
		return false;
	st->used += p->n;
	return true;
}

bool esc_put(struct sbuf *b, const char *s, size_t n, enum esc_mode mode, size_t budget,
	     const char *indent)
{
	struct esc_state st = {b, 0, budget, indent ? indent : "", 0};
	size_t i = 0;

	while (i < n) {
		struct piece p;
		uint32_t c;
		size_t len = utf8_next(s + i, n - i, &c);
		bool after_quote = b->len > 0 && b->p[b->len - 1] == '"';

		/* CR LF is one line end */
		if (c == '\r' && i + 1 < n && s[i + 1] == '\n')
			len = 2;
		piece_make(&p, c, s + i, len, mode, after_quote);
		if (!esc_piece(&st, &p))
			return false;
		i += len;
	}
	return !b->full;
}
