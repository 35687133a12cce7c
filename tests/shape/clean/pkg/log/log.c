/* Mentions that must not count: setenv( in a comment, waitpid(-1 too. */
#include "log/log.h"

// sodium_init( in a line comment
int log_line_put(const char *what)
{
	const char *s = "unsetenv( in a string";

	return what == s ? 1 : base_err_code();
}
