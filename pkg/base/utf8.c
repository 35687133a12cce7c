/* utf8.c: the strict UTF-8 decoder (see utf8.h). */
#include "base/utf8.h"

#include <string.h>

size_t appl_utf8_decode(const unsigned char *s, size_t avail, uint32_t *cp)
{
	uint32_t c = s[0], v;
	size_t n;

	if (c < 0x80) {
		if (cp)
			*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF)
		n = 2, v = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 3, v = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 4, v = c & 0x07;
	else
		return 0;
	if (n > avail)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	if ((n == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) ||
	    (n == 4 && (v < 0x10000 || v > 0x10FFFF)))
		return 0;
	if (cp)
		*cp = v;
	return n;
}

size_t appl_utf8_prefix(const char *s, size_t len)
{
	size_t i = 0, n;

	while (i < len && (n = appl_utf8_decode((const unsigned char *)s + i, len - i, NULL)))
		i += n;
	return i;
}

size_t appl_utf8_boundary(const char *s, size_t n)
{
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

void appl_utf8_trim(char *s)
{
	s[appl_utf8_prefix(s, strlen(s))] = '\0';
}
