/* A package the layer list does not know. */
#include "base/err.h"

int widget_code(void);

int widget_code(void)
{
	return 1;
}
