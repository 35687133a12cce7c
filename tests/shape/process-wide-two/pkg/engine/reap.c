#include <stddef.h>
#include <sys/wait.h>

int engine_reap(void);

int engine_reap(void)
{
	return waitpid(-1, NULL, WNOHANG);
}
