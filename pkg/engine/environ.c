/* environ.c: taking secrets out of the process's environment (see
 * environ.h). */
#include "engine/environ.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

int engine_env_take(const char *name, char **value, size_t *len)
{
	char *v = getenv(name), *copy;
	size_t n;

	*value = NULL;
	*len = 0;
	if (!v)
		return -ENOENT;
	n = strlen(v);
	if (!(copy = sodium_malloc(n + 1)))
		return -ENOMEM;
	memcpy(copy, v, n + 1);
	/* Gone from the environment block too, bytes and all: unsetenv only
	 * drops the pointer, and /proc/PID/environ reads the block the
	 * process started with. */
	sodium_memzero(v, n);
	unsetenv(name);
	*value = copy;
	*len = n;
	return 0;
}
