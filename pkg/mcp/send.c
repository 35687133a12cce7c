/* send.c: what the session core sends its clients: answers, errors and
 * notifications, each through the transport (see internal.h). */
#include <errno.h>
#include <stdlib.h>

#include "base/limits.h"
#include "base/version.h"
#include "jsonrpc/jsonrpc.h"
#include "mcp/internal.h"

/* ---- sending ---------------------------------------------------------------- */

void mcp_send_line(struct mcp_session *s, char *line, size_t len)
{
	if (!line)
		return;
	if (s->ended) {
		free(line);
		return;
	}
	s->t.send(s->t.t, line, len);
}

/* line belongs with the answer to related (may be NULL: anywhere). */
void mcp_send_line_for(struct mcp_session *s, const json_t *related, char *line, size_t len)
{
	if (!line)
		return;
	if (s->ended) {
		free(line);
		return;
	}
	if (related && s->t.send_for)
		s->t.send_for(s->t.t, related, line, len);
	else
		s->t.send(s->t.t, line, len);
}

void mcp_reply_error_data(struct mcp_session *s, const json_t *id, int code, const char *msg,
			  const json_t *data)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_error_encode(id, code, msg, data, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) == 0)
		mcp_send_line(s, line, len);
}

void mcp_reply_error(struct mcp_session *s, const json_t *id, int code, const char *msg)
{
	mcp_reply_error_data(s, id, code, msg, NULL);
}

json_t *mcp_server_info(void)
{
	return json_pack("{s:s,s:s}", "name", "appliance", "version", APPL_VERSION);
}

/* What rev puts on every result: resultType, serverInfo in _meta. */
static int result_shape(const struct mcp_revision *rev, json_t *result)
{
	int bad = 0;

	if (mcp_revision_has(rev, MCP_HAS_RESULT_TYPE) && !json_object_get(result, "resultType"))
		bad |= json_object_set_new(result, "resultType", json_string("complete"));
	if (mcp_revision_has(rev, MCP_HAS_RESULT_META_INFO))
		bad |= json_object_set_new(result, "_meta",
					   json_pack("{s:o}", META_SERVER_INFO, mcp_server_info()));
	return bad ? -ENOMEM : 0;
}

void mcp_reply(struct mcp_session *s, const json_t *id, const struct mcp_revision *rev,
	       json_t *result /* steals */)
{
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;

	if (!result || result_shape(rev, result) < 0) {
		json_decref(result);
		mcp_reply_error(s, id, JSONRPC_INTERNAL_ERROR, "out of memory");
		return;
	}
	/* A run's files may make an answer larger than any request. */
	if (jsonrpc_result_encode(id, result, APPL_RPC_ANSWER_MAX, &line, &len, &err) < 0)
		mcp_reply_error(s, id, JSONRPC_INTERNAL_ERROR,
				err.code == -EFBIG ? "answer too large" : "out of memory");
	else
		mcp_send_line(s, line, len);
	json_decref(result);
}

void mcp_notify_for(struct mcp_session *s, const json_t *related, const char *method,
		    const json_t *params)
{
	char *line = NULL;
	size_t len = 0;

	if (jsonrpc_notification_encode(method, params, APPL_RPC_MESSAGE_MAX, &line, &len, NULL) ==
	    0)
		mcp_send_line_for(s, related, line, len);
}

void mcp_notify(struct mcp_session *s, const char *method, const json_t *params)
{
	mcp_notify_for(s, NULL, method, params);
}
