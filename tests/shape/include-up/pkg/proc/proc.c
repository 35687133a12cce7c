/* proc is below mcp: it must not know it. */
#include "mcp/session.h"

int proc_sessions(void);

int proc_sessions(void)
{
	return mcp_session_count();
}
