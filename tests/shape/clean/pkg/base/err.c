#include "base/err.h"

int base_err_code(void)
{
	return 0;
}
