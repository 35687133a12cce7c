/* cmd/ may include any package. */
#include "engine/environ.h"
#include "base/err.h"

int main(void)
{
	return engine_environ_set() + base_err_code();
}
