#include "image/internal.h"

int image_b_two(int n)
{
	return n > 0 ? image_a_one(n - 1) : 1;
}
