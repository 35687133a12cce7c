/* server.h: the MCP server the agent's client talks to, over stdio.
 *
 * Newline-delimited JSON-RPC 2.0 (pkg/jsonrpc): every line capped
 * (APPL_RPC_MESSAGE_MAX) and strictly parsed; malformed input gets the
 * right JSON-RPC error and the server keeps serving. The lifecycle of the
 * MCP revisions 2025-11-25 and 2025-06-18 (2025-03-26 and 2024-11-05 are
 * accepted too): initialize with version negotiation, initialized, ping,
 * tools/list, tools/call, notifications/cancelled, and
 * notifications/tools/list_changed sent when the tool set changes. The one
 * tool is run_python; what a run does is the owner's business (hooks).
 */
#ifndef APPL_MCP_SERVER_H
#define APPL_MCP_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "loop/loop.h"

struct mcp_server;
struct mcp_run; /* one tools/call of run_python in flight */

struct mcp_server_hooks {
	/* A run_python call: code[0..len) (UTF-8, at most APPL_CELL_CODE_MAX
	 * bytes; borrowed for the call). The owner answers later with
	 * mcp_run_finish, exactly once, unless on_cancel came first. */
	void (*on_run)(struct mcp_server *s, struct mcp_run *run, const char *code, size_t len,
		       void *data);
	/* The client cancelled run: stop it; no answer is sent for it. */
	void (*on_cancel)(struct mcp_server *s, struct mcp_run *run, void *data);
	/* The client went away (end of input) or broke the connection. */
	void (*on_closed)(struct mcp_server *s, const char *why, void *data);
	/* The run_python description (borrowed; valid until the next call). */
	const char *(*description)(void *data);
	void *data;
};

/* Serve on in_fd/out_fd (borrowed). New object, or NULL with err. */
struct mcp_server *mcp_server_new(struct loop *loop, int in_fd, int out_fd,
				  const struct mcp_server_hooks *hooks, struct appl_err *err);

/* Answer run with the cell's result object (borrowed): structuredContent
 * and the same as text; isError when is_error. Frees run. */
void mcp_run_finish(struct mcp_server *s, struct mcp_run *run, const json_t *result, bool is_error);

/* Answer run with a tool error text (isError: true), e.g. a refusal before
 * any cell ran. Frees run. */
void mcp_run_fail(struct mcp_server *s, struct mcp_run *run, const char *text);

/* The owner's pointer for a run (set with mcp_run_set_data). */
void mcp_run_set_data(struct mcp_run *run, void *data);
void *mcp_run_data(const struct mcp_run *run);

/* Tell the client the tool set changed (only once it is initialized). */
void mcp_server_tools_changed(struct mcp_server *s);

/* The negotiated protocol version, or NULL before initialize. */
const char *mcp_server_version(const struct mcp_server *s);

/* Flush what is queued (at most timeout_ms) and free. Runs not finished
 * are dropped without an answer. */
void mcp_server_free(struct mcp_server *s, int timeout_ms);

#endif
