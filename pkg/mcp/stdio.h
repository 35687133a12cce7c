/* stdio.h: the stdio transport of an MCP session: one JSON-RPC message per
 * line on a pair of descriptors, read through pkg/loop/lines (every line
 * capped at APPL_RPC_MESSAGE_MAX; a longer one is answered and skipped, the
 * session kept), answers queued up to MCP_STDIO_QUEUE_MAX for a slow
 * client, which is dropped past that rather than buffered for. */
#ifndef APPL_MCP_STDIO_H
#define APPL_MCP_STDIO_H

#include "base/err.h"
#include "loop/loop.h"
#include "mcp/session.h"

#define MCP_STDIO_QUEUE_MAX (64u * 1024 * 1024)

struct mcp_stdio;

/* Serve one session of srv for principal p (borrowed) on in_fd/out_fd
 * (borrowed). NULL with err. */
struct mcp_stdio *mcp_stdio_open(struct mcp_server *srv, struct loop *loop, int in_fd, int out_fd,
				 const struct mcp_principal *p, struct appl_err *err);

/* Stop reading, flush what is queued (at most timeout_ms), then free the
 * session (its runs are cancelled) and the transport. Safe on NULL. */
void mcp_stdio_free(struct mcp_stdio *st, int timeout_ms);

#endif
