/* process.c: the process-wide state the engine keeps (see process.h). */
#include "engine/process.h"

#include <stddef.h>
#include <sys/wait.h>

void engine_reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}
