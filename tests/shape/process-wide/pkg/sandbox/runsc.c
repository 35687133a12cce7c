/* Sets up libsodium itself: every caller's process is changed behind it. */
#include <sodium.h>

int sandbox_prepare(void);

int sandbox_prepare(void)
{
	/* setenv( here would be in a comment and not count */
	return sodium_init() < 0 ? -1 : 0;
}
