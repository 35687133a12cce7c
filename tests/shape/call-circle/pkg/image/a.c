#include "image/internal.h"

int image_a_one(int n)
{
	return n > 0 ? image_b_two(n - 1) : 0;
}
