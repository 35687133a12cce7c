/* reload.c: the policy read again and taken (internal.h). Not built yet:
 * every reload is refused, saying so. */
#include "gateway/internal.h"

#include <errno.h>
#include <stdio.h>

int gateway_reload(struct gateway *gw, const char *who, char *why, size_t cap)
{
	(void)gw;
	log_line(LOG_WARN, NULL, "reload asked for by %s: reload is not built yet", who);
	snprintf(why, cap, "reload is not built yet");
	return -ENOSYS;
}
