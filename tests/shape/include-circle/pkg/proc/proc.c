#include "proc/proc.h"
#include "proc/confine.h"

int proc_spawn(void)
{
	return 0;
}
