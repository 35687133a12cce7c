#include "schema/internal.h"

int schema_a(int n)
{
	return n > 0 ? schema_b(n - 1) : 0;
}
