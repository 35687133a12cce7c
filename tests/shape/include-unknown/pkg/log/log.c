/* A known package including one that does not exist. */
#include "gadget/gadget.h"
