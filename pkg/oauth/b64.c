/* b64.c: see b64.h. */
#include "oauth/b64.h"

#include <errno.h>
#include <sodium.h>

int oauth_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap, size_t *out_len)
{
	/* No ignore set and no end pointer: libsodium then refuses any byte
	 * outside the alphabet, and refuses non-zero leftover bits. */
	*out_len = 0;
	if (sodium_base642bin(out, cap, s, n, NULL, out_len, NULL,
			      sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0) {
		*out_len = 0;
		return -EINVAL;
	}
	return 0;
}
