/* log.h: included by a package above it, includes one below. */
#include "base/err.h"

int log_line_put(const char *what);
