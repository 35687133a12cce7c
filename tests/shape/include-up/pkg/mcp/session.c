#include "mcp/session.h"

int mcp_session_count(void)
{
	return 0;
}
