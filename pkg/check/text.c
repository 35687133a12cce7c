/* text.c: text for the report's lines and columns (text.h). */
#include "check/text.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "log/log.h"

void check_text_show(const char *s, size_t len, char *out, size_t cap)
{
	bool cut = false;
	size_t n = log_escape(s, len, out, cap, &cut);

	if (cut && n + sizeof(CHECK_TEXT_ELLIPSIS) <= cap)
		memcpy(out + n, CHECK_TEXT_ELLIPSIS, sizeof(CHECK_TEXT_ELLIPSIS));
}

size_t check_text_cols(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

void check_text_cut(const char *s, size_t cols, char *out, size_t cap)
{
	size_t n = 0, keep = 0, i;

	for (i = 0; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (n == cols - 1)
			keep = i; /* the bytes of the first cols - 1 characters */
		n++;
	}
	if (n <= cols || keep + sizeof(CHECK_TEXT_ELLIPSIS) > cap) {
		snprintf(out, cap, "%s", s);
		return;
	}
	memcpy(out, s, keep);
	memcpy(out + keep, CHECK_TEXT_ELLIPSIS, sizeof(CHECK_TEXT_ELLIPSIS));
}
