#include <stdlib.h>

int engine_environ_set(void);

int engine_environ_set(void)
{
	return setenv("TZ", "UTC", 1);
}
