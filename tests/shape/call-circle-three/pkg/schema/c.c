#include "schema/internal.h"

int schema_c(int n)
{
	return n > 0 ? schema_a(n - 1) : 0;
}
