int mcp_session_count(void);
