/* table.c: part 2's table, a row per cell in two columns ("must work",
 * "must be denied"), then every row it had to cut and every surprise in
 * full (internal.h). */
#include <stdio.h>
#include <string.h>

#include "check/internal.h"
#include "check/text.h"

#define CHECK_ROW_MAX	    (CHECK_WHY_MAX + 288) /* a mark, a label and an account */
#define CHECK_LEFT_COLS	    54			  /* the "must work" column, in characters */
#define CHECK_RIGHT_COLS    78			  /* the "must be denied" column */
#define CHECK_LINE_MAX	    (2 * CHECK_ROW_MAX + CHECK_LEFT_COLS + 8)
#define CHECK_SIGN_OK	    "\xe2\x9c\x94" /* ✔ */
#define CHECK_SIGN_SURPRISE "\xe2\x9c\x98" /* ✘ */

static void row_text(const struct check_probe *p, char *out, size_t cap)
{
	snprintf(out, cap, "%s %s: %s", p->ok ? CHECK_SIGN_OK : CHECK_SIGN_SURPRISE, p->label,
		 p->why);
}

/* The i-th probe of one column, or NULL. */
static const struct check_probe *column_get(const struct check *c, bool deny, size_t i)
{
	for (size_t k = 0; k < c->nprobes; k++)
		if (c->probes[k].deny == deny && i-- == 0)
			return &c->probes[k];
	return NULL;
}

static size_t left_width(const struct check *c)
{
	char text[CHECK_ROW_MAX];
	const struct check_probe *p;
	size_t w = strlen("must work");

	for (size_t i = 0; (p = column_get(c, false, i)); i++) {
		row_text(p, text, sizeof(text));
		if (check_text_cols(text) > w)
			w = check_text_cols(text);
	}
	return w < CHECK_LEFT_COLS ? w : CHECK_LEFT_COLS;
}

/* p's row (none: nothing) cut to cols characters, padded to them with
 * pad, appended to line at *o. */
static void cell_put(const struct check_probe *p, size_t cols, bool pad, char *line, size_t *o)
{
	char text[CHECK_ROW_MAX], cut[CHECK_ROW_MAX] = "";
	size_t len;

	if (p) {
		row_text(p, text, sizeof(text));
		check_text_cut(text, cols, cut, sizeof(cut));
	}
	len = strlen(cut);
	memcpy(line + *o, cut, len);
	*o += len;
	for (size_t n = check_text_cols(cut); pad && n < cols; n++)
		line[(*o)++] = ' ';
	line[*o] = '\0';
}

static void rule_print(struct check *c, size_t w)
{
	char line[CHECK_LEFT_COLS + CHECK_RIGHT_COLS + 8];
	size_t o = 0;

	for (size_t i = 0; i < w; i++)
		line[o++] = '-';
	memcpy(line + o, "-+-", 3);
	o += 3;
	for (size_t i = 0; i < CHECK_RIGHT_COLS; i++)
		line[o++] = '-';
	line[o++] = '\n';
	line[o] = '\0';
	check_report_print(c, "%s", line);
}

void check_table_print(struct check *c)
{
	size_t w = left_width(c);
	const struct check_probe *l, *r;
	char line[CHECK_LINE_MAX];

	check_report_print(c, "\n%-*s | %s\n", (int)w, "must work", "must be denied");
	rule_print(c, w);
	for (size_t i = 0;; i++) {
		size_t o = 0;

		l = column_get(c, false, i);
		r = column_get(c, true, i);
		if (!l && !r)
			break;
		cell_put(l, w, true, line, &o);
		memcpy(line + o, " | ", 4);
		o += 3;
		cell_put(r, CHECK_RIGHT_COLS, false, line, &o);
		check_report_print(c, "%s\n", line);
	}
}

void check_table_details(struct check *c)
{
	char text[CHECK_ROW_MAX];
	bool head = false;

	for (size_t i = 0; i < c->nprobes; i++) {
		const struct check_probe *p = &c->probes[i];

		if (!p->ok)
			c->n.surprises++;
		row_text(p, text, sizeof(text));
		if (p->ok && check_text_cols(text) <= (p->deny ? CHECK_RIGHT_COLS : left_width(c)))
			continue;
		if (!head)
			check_report_print(c, "\nin full:\n");
		head = true;
		check_report_print(c, "%s %s: %s\n", p->ok ? CHECK_SIGN_OK : CHECK_SIGN_SURPRISE,
				   p->label, p->why);
	}
}
