/* b64.h: base64url as JOSE writes it (RFC 7515 section 2): the URL-safe
 * alphabet, no padding, no whitespace. Internal to pkg/oauth. */
#ifndef APPL_OAUTH_B64_H
#define APPL_OAUTH_B64_H

#include <stddef.h>

/* Decode s[0..n) into out[0..cap): 0 with *out_len set, or -EINVAL when s
 * holds anything but [A-Za-z0-9_-] ('=', '+', '/' included), its length
 * cannot be base64 (n % 4 == 1), its unused last bits are not zero (one
 * value, one spelling: no second encoding of the same bytes), or the bytes
 * would not fit in cap. */
int oauth_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap, size_t *out_len);

#endif
