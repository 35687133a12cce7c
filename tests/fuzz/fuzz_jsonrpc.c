/* fuzz_jsonrpc.c: JSON-RPC envelopes on hostile bytes.
 *
 * The input is split at '\n' into lines, as a stdio peer's stream is. Each
 * line is parsed; a refusal is answered the way a server answers it (an
 * error line with the echoed id and the parser's message), and an accepted
 * message is written back out by the matching encoder and parsed again,
 * which must give the same kind, id and method. So whatever the parser lets
 * through, the encoders handle, and what the encoders write, the parser
 * reads.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "jsonrpc/jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A small cap, so the fuzzer reaches the size refusal too. */
#define FUZZ_LINE_MAX (16u * 1024)
#define FUZZ_OUT_MAX  (64u * 1024)

static int encode(const struct jsonrpc_msg *m, char **line, size_t *len)
{
	switch (m->kind) {
	case JSONRPC_REQUEST:
		return jsonrpc_request_encode(m->id, m->method, m->params, FUZZ_OUT_MAX, line, len,
					      NULL);
	case JSONRPC_NOTIFICATION:
		return jsonrpc_notification_encode(m->method, m->params, FUZZ_OUT_MAX, line, len,
						   NULL);
	case JSONRPC_RESULT:
		return jsonrpc_result_encode(m->id, m->result, FUZZ_OUT_MAX, line, len, NULL);
	case JSONRPC_ERROR:
		return jsonrpc_error_encode(m->id, (int)m->error_code, m->error_message,
					    m->error_data, FUZZ_OUT_MAX, line, len, NULL);
	default:
		__builtin_trap();
	}
}

/* The size counted without encoding is the encoder's, to the byte. */
static void size_check(const json_t *v)
{
	if (v && appl_json_size(v) != json_dumpb(v, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY))
		__builtin_trap();
}

static void round_trip(const struct jsonrpc_msg *m)
{
	struct jsonrpc_msg again;
	char *line;
	size_t len;

	size_check(m->params);
	size_check(m->result);
	size_check(m->id);
	size_check(m->error_data);

	if (encode(m, &line, &len) < 0)
		return; /* e.g. bigger than FUZZ_OUT_MAX once re-escaped */
	if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1))
		__builtin_trap();
	if (jsonrpc_msg_parse(line, len - 1, FUZZ_OUT_MAX, &again, NULL) != 0)
		__builtin_trap();
	if (again.kind != m->kind || !jsonrpc_id_equal(again.id, m->id))
		__builtin_trap();
	if (m->method && strcmp(again.method, m->method) != 0)
		__builtin_trap();
	jsonrpc_msg_clear(&again);
	free(line);
}

static void answer_refusal(const struct jsonrpc_msg *m, const struct appl_err *err)
{
	char *line;
	size_t len;

	if (m->kind != JSONRPC_NONE ||
	    (m->fail != JSONRPC_PARSE_ERROR && m->fail != JSONRPC_INVALID_REQUEST))
		__builtin_trap();
	if (m->id && !jsonrpc_id_valid(m->id))
		__builtin_trap();
	if (jsonrpc_error_encode(m->id, m->fail, err->msg, NULL, FUZZ_OUT_MAX, &line, &len, NULL) !=
	    0)
		__builtin_trap();
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *end = p + size;

	while (p <= end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		struct jsonrpc_msg m;
		struct appl_err err = {0};

		if (jsonrpc_msg_parse(p, len, FUZZ_LINE_MAX, &m, &err) == 0)
			round_trip(&m);
		else
			answer_refusal(&m, &err);
		jsonrpc_msg_clear(&m);
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
}
