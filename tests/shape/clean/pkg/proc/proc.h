#include "log/log.h"

int proc_spawn(void);
