#include "schema/internal.h"

int schema_b(int n)
{
	return n > 0 ? schema_c(n - 1) : 0;
}
