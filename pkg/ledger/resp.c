/* resp.c: the check of the server's bytes (see resp.h). */
#include "ledger/resp.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "ledger/limits.h"

enum {
	S_TYPE,	   /* the next byte starts an item */
	S_LINE,	   /* in the item's header line */
	S_LF,	   /* after the line's CR */
	S_BODY,	   /* in a bulk's bytes */
	S_BODY_CR, /* after them: CR */
	S_BODY_LF, /* then LF */
	S_BROKEN,  /* refused: nothing more is read */
};

void ledger_resp_init(struct ledger_resp *s)
{
	memset(s, 0, sizeof(*s));
	s->state = S_TYPE;
}

static int refuse(struct ledger_resp *s, const char **why, const char *text)
{
	s->state = S_BROKEN;
	*why = text;
	return -EPROTO;
}

/* One byte of a ':' or '$' line: an optional '-', then digits, no leading
 * zero (what hiredis's string2ll takes). A bulk's length is checked as
 * its digits come, so a huge one is refused before its line even ends. */
static int number_byte(struct ledger_resp *s, char c, const char **why)
{
	if (c == '-' && s->line == 1) { /* the line's first byte */
		s->sign = -1;
		return 0;
	}
	if (c < '0' || c > '9')
		return refuse(s, why, "a number that is not one");
	if (s->digits > 0 && s->num == 0)
		return refuse(s, why, "a number with a leading zero");
	if (s->digits == 0 && c == '0' && s->sign < 0)
		return refuse(s, why, "a number that is not one");
	if (++s->digits > 19) /* past int64: hiredis could not take it either */
		return refuse(s, why, "a number that is not one");
	s->num = s->num * 10 + (uint64_t)(c - '0');
	if (s->type == '$' && s->sign > 0 && s->num > LEDGER_BULK_MAX)
		return refuse(s, why, "a value over the ledger's cap (LEDGER_VALUE_MAX)");
	if (s->type == '$' && s->sign < 0 && s->num > 1)
		return refuse(s, why, "a bulk length that is not one");
	return 0;
}

/* The header line ended: a whole item, or a bulk's bytes to come. */
static void line_end(struct ledger_resp *s, size_t *done)
{
	if (s->type != '$' || s->sign < 0) { /* status, error, integer, nil */
		(*done)++;
		s->state = S_TYPE;
		return;
	}
	s->left = s->num;
	s->state = s->left ? S_BODY : S_BODY_CR;
}

static int type_byte(struct ledger_resp *s, char c, const char **why)
{
	if (c != '+' && c != '-' && c != ':' && c != '$')
		return refuse(s, why, "a reply of a type the ledger never asks for");
	s->type = c;
	s->line = 0;
	s->num = 0;
	s->sign = 1;
	s->digits = 0;
	s->state = S_LINE;
	return 0;
}

static int line_byte(struct ledger_resp *s, char c, const char **why)
{
	if (c == '\r') {
		if ((s->type == ':' || s->type == '$') && s->digits == 0)
			return refuse(s, why, "a number that is not one");
		s->state = S_LF;
		return 0;
	}
	if (c == '\n')
		return refuse(s, why, "a line ended by LF alone");
	if (++s->line > LEDGER_LINE_MAX)
		return refuse(s, why, "a reply line over LEDGER_LINE_MAX");
	if (s->type == ':' || s->type == '$')
		return number_byte(s, c, why);
	return 0;
}

int ledger_resp_scan(struct ledger_resp *s, const char *buf, size_t len, size_t *done,
		     const char **why)
{
	size_t i = 0, take;
	int rc = 0;

	*done = 0;
	while (i < len && rc == 0) {
		char c = buf[i];
		switch (s->state) {
		case S_TYPE:
			rc = type_byte(s, c, why);
			break;
		case S_LINE:
			rc = line_byte(s, c, why);
			break;
		case S_LF:
			if (c != '\n')
				return refuse(s, why, "a CR not followed by LF");
			line_end(s, done);
			break;
		case S_BODY: /* the bytes themselves are the caller's to judge */
			take = len - i < s->left ? len - i : (size_t)s->left;
			s->left -= take;
			i += take;
			if (!s->left)
				s->state = S_BODY_CR;
			continue;
		case S_BODY_CR:
			if (c != '\r')
				return refuse(s, why, "a bulk longer than it said");
			s->state = S_BODY_LF;
			break;
		case S_BODY_LF:
			if (c != '\n')
				return refuse(s, why, "a bulk longer than it said");
			(*done)++;
			s->state = S_TYPE;
			break;
		default:
			return refuse(s, why, "the stream was refused before");
		}
		i++;
	}
	return rc;
}
