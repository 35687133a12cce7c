/* The one file that may change the process's environment. */
#include "engine/environ.h"

#include <stdlib.h>
#include <sys/wait.h>

#include "proc/proc.h"

int engine_environ_set(void)
{
	if (setenv("TZ", "UTC", 1) != 0 || unsetenv("LANG") != 0)
		return -1;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		continue;
	return proc_spawn();
}
