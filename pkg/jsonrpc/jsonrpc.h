/* jsonrpc.h: JSON-RPC 2.0 envelopes, one message per line (docs/jsonrpc.md).
 *
 * Pure code, no system calls. The parser takes one line from a peer (an MCP
 * client downstream, an upstream MCP server) as hostile bytes: capped before
 * allocation, strict JSON (appl_json_load: depth, duplicate keys, NUL), the
 * exact member set of each kind, checked types. On refusal it says which
 * JSON-RPC error a server must answer and with which id. The encoders build
 * every line with jansson (no string pasting, so no text can add a member or
 * a line) and refuse a line over the caller's cap before allocating it.
 *
 * Batches (a top-level array) are refused with -32600: MCP 2025-03-26 allowed
 * them, 2025-06-18 removed them, and a batch would let several tool calls
 * ride past checks that look at one message at a time.
 */
#ifndef APPL_JSONRPC_JSONRPC_H
#define APPL_JSONRPC_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

/* The error codes JSON-RPC 2.0 reserves. */
#define JSONRPC_PARSE_ERROR	 (-32700) /* not JSON; answered with id null */
#define JSONRPC_INVALID_REQUEST	 (-32600) /* JSON, but not a valid message */
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS	 (-32602)
#define JSONRPC_INTERNAL_ERROR	 (-32603)

enum jsonrpc_kind {
	JSONRPC_NONE = 0,     /* cleared, or refused by the parser */
	JSONRPC_REQUEST,      /* id, method, params? */
	JSONRPC_NOTIFICATION, /* method, params? */
	JSONRPC_RESULT,	      /* id, result */
	JSONRPC_ERROR,	      /* id (may be null), error {code, message, data?} */
};

/* One parsed line. msg owns root and id (released by jsonrpc_msg_clear);
 * method, params, result, error_message and error_data point into root and
 * live as long as it does: take a json_incref (or copy the string) to keep
 * one longer. */
struct jsonrpc_msg {
	enum jsonrpc_kind kind;
	/* A string (at most APPL_JSONRPC_ID_MAX bytes) or an integer. NULL for
	 * a notification, for an error response whose id is null, and after a
	 * refusal whose id could not be read. */
	json_t *id;
	const char *method;	   /* 1 to APPL_JSONRPC_METHOD_MAX bytes, UTF-8 */
	size_t method_len;	   /* method may hold no NUL (jansson refuses \u0000) */
	json_t *params;		   /* object or array; NULL when absent */
	json_t *result;		   /* any value */
	json_int_t error_code;	   /* error.code */
	const char *error_message; /* error.message, UTF-8 */
	json_t *error_data;	   /* error.data; NULL when absent */
	/* After a refusal: the code to answer (JSONRPC_PARSE_ERROR or
	 * JSONRPC_INVALID_REQUEST) with id above (NULL: null). 0 otherwise. */
	int fail;
	json_t *root;
};

/* Parse buf[0..len) (one line without its '\n'; not NUL-terminated, may hold
 * any bytes) into *msg, which must be zeroed or cleared. max_len is the cap
 * for the line (APPL_RPC_MESSAGE_MAX, APPL_UPSTREAM_MESSAGE_MAX), checked
 * before anything is allocated. Returns 0, or with err filled and msg->kind
 * JSONRPC_NONE:
 *   -EFBIG  longer than max_len                  fail -32600, id null
 *   -E2BIG  nested deeper than APPL_JSON_DEPTH_MAX fail -32600, id null
 *   -EINVAL not JSON (or a duplicate key)        fail -32700, id null
 *   -EINVAL a batch, or a bad envelope           fail -32600, id echoed when
 *           the line is an object whose "id" is a valid id, else null.
 * A response whose envelope is bad is refused too; a server does not answer
 * a response, so callers that read responses only log the refusal. */
int jsonrpc_msg_parse(const char *buf, size_t len, size_t max_len, struct jsonrpc_msg *msg,
		      struct appl_err *err);

/* Release what msg owns and zero it; safe on a zeroed or cleared message. */
void jsonrpc_msg_clear(struct jsonrpc_msg *msg);

/* "request", "notification", "result", "error" or "none"; static. */
const char *jsonrpc_kind_name(enum jsonrpc_kind kind);

/* The standard message of a reserved code ("Parse error", "Invalid
 * Request", "Method not found", "Invalid params", "Internal error"), or
 * "Server error" for any other code; static. */
const char *jsonrpc_code_message(int code);

/* ---- ids ------------------------------------------------------------------ */

/* 1 when id (borrowed) may be a request id: an integer (0 included) or a
 * string of at most APPL_JSONRPC_ID_MAX bytes. Reals, booleans, null,
 * arrays and objects are not. */
int jsonrpc_id_valid(const json_t *id);

/* 1 when a and b (borrowed, either may be NULL) are the same id: both NULL,
 * or same type and same value (integer 1 and string "1" differ). */
int jsonrpc_id_equal(const json_t *a, const json_t *b);

/* A new reference to a copy of id (borrowed), independent of the message it
 * came from; NULL when id is NULL, not a valid id, or memory ran out. */
json_t *jsonrpc_id_copy(const json_t *id);

/* The id of a message that was not parsed (over its cap, or cut): a byte
 * scan of buf[0..len), which may end anywhere, that tracks nesting and
 * strings only, for the top-level key "id" written plainly and a value that
 * is an integer or a string with no escapes (jsonrpc_id_valid). A new
 * reference, or NULL when none is found before buf ends. Pure. Callers use
 * it to answer or fail the request it belongs to, never to trust it: a
 * hostile peer could have sent that id in a well-formed message anyway. */
json_t *jsonrpc_id_sniff(const char *buf, size_t len);

/* Whether buf[0..len), scanned the same way, has a top-level "method" key
 * (a request or a notification, not an answer). Pure. */
int jsonrpc_method_sniffed(const char *buf, size_t len);

/* ---- encoders ---------------------------------------------------------------
 * Each builds the message with jansson and writes it with JSON_COMPACT into
 * *line (new, malloc'ed; free() it): the JSON text, a '\n', and a NUL after
 * it; *len counts the newline, not the NUL. A line of more than max_len
 * bytes (newline included) is refused with -EFBIG before its buffer is
 * allocated. Every json_t argument is borrowed. Returns 0, or -EINVAL
 * (bad argument), -EFBIG, -ENOMEM with err filled and *line NULL. */

/* {"jsonrpc":"2.0","id":id,"result":result}; id valid, result not NULL. */
int jsonrpc_result_encode(const json_t *id, const json_t *result, size_t max_len, char **line,
			  size_t *len, struct appl_err *err);

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message,"data":data}}
 * id NULL is written as null (the answer to a line whose id was unreadable);
 * data NULL leaves "data" out. message (NUL-terminated) is cut at a
 * character boundary to APPL_JSONRPC_ERROR_MESSAGE_MAX bytes, and a byte
 * that is not valid UTF-8 becomes '?', so any text can be sent. */
int jsonrpc_error_encode(const json_t *id, int code, const char *message, const json_t *data,
			 size_t max_len, char **line, size_t *len, struct appl_err *err);

/* {"jsonrpc":"2.0","id":id,"method":method,"params":params}; id valid,
 * method non-empty (at most APPL_JSONRPC_METHOD_MAX bytes), params an
 * object or array, or NULL to leave it out. */
int jsonrpc_request_encode(const json_t *id, const char *method, const json_t *params,
			   size_t max_len, char **line, size_t *len, struct appl_err *err);

/* {"jsonrpc":"2.0","method":method,"params":params}; as above, no id. */
int jsonrpc_notification_encode(const char *method, const json_t *params, size_t max_len,
				char **line, size_t *len, struct appl_err *err);

#endif
