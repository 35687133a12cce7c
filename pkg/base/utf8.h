/* utf8.h: one strict UTF-8 decoder for every module that must tell valid
 * text from bytes (error messages, JSON-RPC messages, upstream stderr, stub
 * text). */
#ifndef APPL_BASE_UTF8_H
#define APPL_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the valid UTF-8 character at s, with avail bytes
 * there, and its code point in *cp (may be NULL); 0 when the bytes start no
 * valid character: overlong forms, surrogates, code points past U+10FFFF
 * and sequences cut by the end are invalid. avail must be at least 1. */
size_t appl_utf8_decode(const unsigned char *s, size_t avail, uint32_t *cp);

/* The bytes of the longest prefix of s[0..len) that is valid UTF-8 (len
 * when all of it is). */
size_t appl_utf8_prefix(const char *s, size_t len);

/* Where a text cut to at most n bytes should end: n, moved back to the start
 * of the character s[n] continues, so no character is left in halves.
 * s[n] must be readable (n less than the text's length). */
size_t appl_utf8_boundary(const char *s, size_t n);

/* Cut NUL-terminated s at its first byte that starts no valid character,
 * such as a character snprintf cut in halves at a byte count: what is left
 * can become a JSON string. */
void appl_utf8_trim(char *s);

#endif
