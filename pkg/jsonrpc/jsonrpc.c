/* jsonrpc.c: JSON-RPC 2.0 envelopes (see jsonrpc.h). */
#include "jsonrpc/jsonrpc.h"
#include "base/utf8.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

/* ---- parsing --------------------------------------------------------------- */

static const char *const envelope_keys[] = {"jsonrpc", "id",	"method", "params",
					    "result",  "error", NULL};
static const char *const error_keys[] = {"code", "message", "data", NULL};

/* Record a refusal: msg keeps only the id it could read (if any) and the
 * JSON-RPC code to answer. Returns rc. */
static int msg_refuse(struct jsonrpc_msg *msg, int rpc_code, int rc)
{
	json_t *id = msg->id;

	json_decref(msg->root);
	memset(msg, 0, sizeof(*msg));
	msg->id = id;
	msg->fail = rpc_code;
	return rc;
}

static int is_version_2(const json_t *v)
{
	return json_is_string(v) && json_string_length(v) == 3 &&
	       memcmp(json_string_value(v), "2.0", 3) == 0;
}

static int method_check(struct jsonrpc_msg *msg, const json_t *method, struct appl_err *err)
{
	size_t n;

	if (!json_is_string(method))
		return appl_err_set(err, -EINVAL, "method is a %s, not a string",
				    appl_json_type_name(method));
	n = json_string_length(method);
	if (n == 0 || n > APPL_JSONRPC_METHOD_MAX)
		return appl_err_set(err, -EINVAL, "method of %zu bytes (1 to %u allowed)", n,
				    APPL_JSONRPC_METHOD_MAX);
	msg->method = json_string_value(method);
	msg->method_len = n;
	return 0;
}

/* A request or a notification: method, params?, id? and nothing of a
 * response. */
static int call_check(struct jsonrpc_msg *msg, struct appl_err *err)
{
	json_t *root = msg->root;
	json_t *id = json_object_get(root, "id");
	json_t *params = json_object_get(root, "params");
	int rc;

	if (json_object_get(root, "result") || json_object_get(root, "error"))
		return appl_err_set(err, -EINVAL, "a request cannot carry result or error");
	rc = method_check(msg, json_object_get(root, "method"), err);
	if (rc < 0)
		return rc;
	/* JSON-RPC allows any structured value or none; null is neither. */
	if (params && !json_is_object(params) && !json_is_array(params))
		return appl_err_set(err, -EINVAL, "params is a %s, not an object or array",
				    appl_json_type_name(params));
	msg->params = params;
	if (!id) {
		msg->kind = JSONRPC_NOTIFICATION;
		return 0;
	}
	/* MCP: a request id is a string or an integer, never null (a null id
	 * cannot be told apart from the answer to an unreadable line). */
	if (!msg->id)
		return appl_err_set(err, -EINVAL, "id is a %s, not a string or integer%s",
				    appl_json_type_name(id),
				    json_is_string(id) ? " of a readable length" : "");
	msg->kind = JSONRPC_REQUEST;
	return 0;
}

static int error_object_check(struct jsonrpc_msg *msg, const json_t *e, struct appl_err *err)
{
	json_t *code, *message;
	int rc;

	if (!json_is_object(e))
		return appl_err_set(err, -EINVAL, "error is a %s, not an object",
				    appl_json_type_name(e));
	rc = appl_json_keys_check(e, error_keys, "error", err);
	if (rc < 0)
		return rc;
	code = json_object_get(e, "code");
	message = json_object_get(e, "message");
	if (!json_is_integer(code))
		return appl_err_set(err, -EINVAL, "error.code missing or not an integer");
	if (!json_is_string(message))
		return appl_err_set(err, -EINVAL, "error.message missing or not a string");
	msg->error_code = json_integer_value(code);
	msg->error_message = json_string_value(message);
	msg->error_data = json_object_get(e, "data");
	return 0;
}

/* A response: id and exactly one of result and error. */
static int response_check(struct jsonrpc_msg *msg, struct appl_err *err)
{
	json_t *root = msg->root;
	json_t *id = json_object_get(root, "id");
	json_t *result = json_object_get(root, "result");
	json_t *error = json_object_get(root, "error");

	if (json_object_get(root, "params"))
		return appl_err_set(err, -EINVAL, "params without a method");
	if (result && error)
		return appl_err_set(err, -EINVAL, "a response carries both result and error");
	if (!result && !error)
		return appl_err_set(err, -EINVAL, "a message needs a method, a result or an error");
	if (!id)
		return appl_err_set(err, -EINVAL, "a response needs an id");
	/* Only an error may answer with id null: it answers a line whose id
	 * could not be read. */
	if (!msg->id && !(error && json_is_null(id)))
		return appl_err_set(err, -EINVAL, "response id is a %s, not a string or integer",
				    appl_json_type_name(id));
	if (result) {
		msg->result = result;
		msg->kind = JSONRPC_RESULT;
		return 0;
	}
	if (error_object_check(msg, error, err) < 0)
		return -EINVAL;
	msg->kind = JSONRPC_ERROR;
	return 0;
}

static int envelope_check(struct jsonrpc_msg *msg, struct appl_err *err)
{
	int rc = appl_json_keys_check(msg->root, envelope_keys, "", err);

	if (rc < 0)
		return rc;
	if (!is_version_2(json_object_get(msg->root, "jsonrpc")))
		return appl_err_set(err, -EINVAL, "\"jsonrpc\" must be \"2.0\"");
	if (json_object_get(msg->root, "method"))
		return call_check(msg, err);
	return response_check(msg, err);
}

int jsonrpc_msg_parse(const char *buf, size_t len, size_t max_len, struct jsonrpc_msg *msg,
		      struct appl_err *err)
{
	struct appl_err lerr = {0};
	json_t *root, *id;
	int rc;

	memset(msg, 0, sizeof(*msg));
	/* The size is refused before jansson sees a byte; nothing of such a
	 * line is read, so its id is not either. */
	if (len > max_len)
		return msg_refuse(msg, JSONRPC_INVALID_REQUEST,
				  appl_err_set(err, -EFBIG, "message of %zu bytes, more than %zu",
					       len, max_len));
	root = appl_json_load(buf, len, max_len, APPL_JSON_DEPTH_MAX, "message", &lerr);
	if (!root) {
		if (err)
			*err = lerr;
		return msg_refuse(
			msg, lerr.code == -E2BIG ? JSONRPC_INVALID_REQUEST : JSONRPC_PARSE_ERROR,
			lerr.code);
	}
	msg->root = root;
	if (json_is_array(root))
		return msg_refuse(msg, JSONRPC_INVALID_REQUEST,
				  appl_err_set(err, -EINVAL, "batches are not supported"));
	if (!json_is_object(root))
		return msg_refuse(msg, JSONRPC_INVALID_REQUEST,
				  appl_err_set(err, -EINVAL, "message is a %s, not an object",
					       appl_json_type_name(root)));
	/* Read the id first, so that a refusal can still name the request it
	 * refuses; only an id that is itself valid is echoed. */
	id = json_object_get(root, "id");
	if (jsonrpc_id_valid(id))
		msg->id = json_incref(id);
	rc = envelope_check(msg, err);
	if (rc < 0)
		return msg_refuse(msg, JSONRPC_INVALID_REQUEST, rc);
	return 0;
}

void jsonrpc_msg_clear(struct jsonrpc_msg *msg)
{
	if (!msg)
		return;
	json_decref(msg->id);
	json_decref(msg->root);
	memset(msg, 0, sizeof(*msg));
}

const char *jsonrpc_kind_name(enum jsonrpc_kind kind)
{
	static const char *const names[] = {
		[JSONRPC_NONE] = "none",
		[JSONRPC_REQUEST] = "request",
		[JSONRPC_NOTIFICATION] = "notification",
		[JSONRPC_RESULT] = "result",
		[JSONRPC_ERROR] = "error",
	};

	if ((unsigned)kind >= sizeof(names) / sizeof(names[0]))
		return "none";
	return names[kind];
}

const char *jsonrpc_code_message(int code)
{
	switch (code) {
	case JSONRPC_PARSE_ERROR:
		return "Parse error";
	case JSONRPC_INVALID_REQUEST:
		return "Invalid Request";
	case JSONRPC_METHOD_NOT_FOUND:
		return "Method not found";
	case JSONRPC_INVALID_PARAMS:
		return "Invalid params";
	case JSONRPC_INTERNAL_ERROR:
		return "Internal error";
	default:
		return "Server error";
	}
}

/* ---- ids ------------------------------------------------------------------- */

int jsonrpc_id_valid(const json_t *id)
{
	if (json_is_integer(id))
		return 1;
	return json_is_string(id) && json_string_length(id) <= APPL_JSONRPC_ID_MAX;
}

int jsonrpc_id_equal(const json_t *a, const json_t *b)
{
	if (!a || !b)
		return !a && !b;
	if (json_is_integer(a) && json_is_integer(b))
		return json_integer_value(a) == json_integer_value(b);
	if (json_is_string(a) && json_is_string(b))
		return json_string_length(a) == json_string_length(b) &&
		       memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) ==
			       0;
	return 0;
}

json_t *jsonrpc_id_copy(const json_t *id)
{
	if (!jsonrpc_id_valid(id))
		return NULL;
	if (json_is_integer(id))
		return json_integer(json_integer_value(id));
	return json_stringn(json_string_value(id), json_string_length(id));
}

/* ---- encoding -------------------------------------------------------------- */

/* Write msg (stolen) as one line. The size is asked first, so a line over
 * the cap is refused before its buffer is allocated. */
static int line_write(json_t *msg, size_t max_len, char **line, size_t *len, struct appl_err *err)
{
	size_t need;
	char *buf;

	if (!msg)
		return appl_err_set(err, -ENOMEM, "jsonrpc message: out of memory");
	need = appl_json_size(msg);
	if (need == 0 || need >= max_len) {
		json_decref(msg);
		return appl_err_set(err, -EFBIG, "jsonrpc message of %zu bytes, more than %zu",
				    need + 1, max_len);
	}
	buf = malloc(need + 2);
	if (!buf || json_dumpb(msg, buf, need, JSON_COMPACT) != need) {
		free(buf);
		json_decref(msg);
		return appl_err_set(err, -ENOMEM, "jsonrpc message: out of memory");
	}
	json_decref(msg);
	buf[need] = '\n';
	buf[need + 1] = '\0';
	*line = buf;
	*len = need + 1;
	return 0;
}

/* A JSON string of at most APPL_JSONRPC_ERROR_MESSAGE_MAX bytes from text
 * that may be anything: invalid bytes become '?' and the cut falls between
 * characters (jansson refuses a string that is not UTF-8). New reference. */
static json_t *message_string(const char *text)
{
	char out[APPL_JSONRPC_ERROR_MESSAGE_MAX];
	const unsigned char *s = (const unsigned char *)text;
	size_t n = strlen(text), i = 0, o = 0;

	while (i < n) {
		size_t k = appl_utf8_decode(s + i, n - i, NULL);

		if (o + (k ? k : 1) > sizeof(out))
			break;
		if (k == 0) {
			out[o++] = '?';
			i++;
			continue;
		}
		memcpy(out + o, s + i, k);
		o += k;
		i += k;
	}
	return json_stringn(out, o);
}

static int method_arg_check(const char *method, const json_t *params, struct appl_err *err)
{
	size_t n = method ? strlen(method) : 0;

	if (n == 0 || n > APPL_JSONRPC_METHOD_MAX)
		return appl_err_set(err, -EINVAL, "method of %zu bytes (1 to %u allowed)", n,
				    APPL_JSONRPC_METHOD_MAX);
	if (params && !json_is_object(params) && !json_is_array(params))
		return appl_err_set(err, -EINVAL, "params must be an object or an array");
	return 0;
}

/* The method as a JSON string (new reference), or NULL when it is not
 * UTF-8: json_pack would fail on it too, but say why. */
static json_t *method_string(const char *method, struct appl_err *err)
{
	json_t *m = json_string(method);

	if (!m)
		appl_err_set(err, -EINVAL, "method is not UTF-8");
	return m;
}

/* Every encoder starts here: outputs cleared, so a failure leaves no stale
 * pointer for the caller to free twice. */
static void out_clear(char **line, size_t *len)
{
	*line = NULL;
	*len = 0;
}

int jsonrpc_result_encode(const json_t *id, const json_t *result, size_t max_len, char **line,
			  size_t *len, struct appl_err *err)
{
	out_clear(line, len);
	if (!jsonrpc_id_valid(id))
		return appl_err_set(err, -EINVAL, "result for an invalid id");
	if (!result)
		return appl_err_set(err, -EINVAL, "result without a value");
	/* json_pack "O" takes its own reference: the arguments stay the
	 * caller's. */
	return line_write(json_pack("{s:s, s:O, s:O}", "jsonrpc", "2.0", "id", (json_t *)id,
				    "result", (json_t *)result),
			  max_len, line, len, err);
}

int jsonrpc_error_encode(const json_t *id, int code, const char *message, const json_t *data,
			 size_t max_len, char **line, size_t *len, struct appl_err *err)
{
	json_t *error;

	out_clear(line, len);
	if (id && !jsonrpc_id_valid(id))
		return appl_err_set(err, -EINVAL, "error for an invalid id");
	error = json_pack("{s:i, s:o, s:O*}", "code", code, "message",
			  message_string(message ? message : ""), "data", (json_t *)data);
	if (!error)
		return appl_err_set(err, -ENOMEM, "jsonrpc message: out of memory");
	return line_write(
		json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", (json_t *)id, "error", error),
		max_len, line, len, err);
}

int jsonrpc_request_encode(const json_t *id, const char *method, const json_t *params,
			   size_t max_len, char **line, size_t *len, struct appl_err *err)
{
	json_t *m;
	int rc;

	out_clear(line, len);
	if (!jsonrpc_id_valid(id))
		return appl_err_set(err, -EINVAL, "request with an invalid id");
	rc = method_arg_check(method, params, err);
	if (rc < 0)
		return rc;
	m = method_string(method, err);
	if (!m)
		return -EINVAL;
	return line_write(json_pack("{s:s, s:O, s:o, s:O*}", "jsonrpc", "2.0", "id", (json_t *)id,
				    "method", m, "params", (json_t *)params),
			  max_len, line, len, err);
}

int jsonrpc_notification_encode(const char *method, const json_t *params, size_t max_len,
				char **line, size_t *len, struct appl_err *err)
{
	json_t *m;
	int rc;

	out_clear(line, len);
	rc = method_arg_check(method, params, err);
	if (rc < 0)
		return rc;
	m = method_string(method, err);
	if (!m)
		return -EINVAL;
	return line_write(json_pack("{s:s, s:o, s:O*}", "jsonrpc", "2.0", "method", m, "params",
				    (json_t *)params),
			  max_len, line, len, err);
}

/* ---- ids of messages not parsed ------------------------------------------- */

static size_t sniff_ws(const char *b, size_t len, size_t i)
{
	while (i < len && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n'))
		i++;
	return i;
}

/* The value after "id" at b[i] (just past the key): an integer or a plain
 * string, complete before len. */
static json_t *sniff_value(const char *b, size_t len, size_t i)
{
	size_t start;
	json_t *v;

	i = sniff_ws(b, len, i);
	if (i >= len || b[i] != ':')
		return NULL;
	i = sniff_ws(b, len, i + 1);
	start = i;
	if (i < len && b[i] == '"') {
		for (i++; i < len && b[i] != '"' && b[i] != '\\' && (unsigned char)b[i] >= 0x20;
		     i++)
			;
		if (i >= len || b[i] != '"' || i - start - 1 > APPL_JSONRPC_ID_MAX)
			return NULL;
		i++;
	} else {
		if (i < len && b[i] == '-')
			i++;
		while (i < len && b[i] >= '0' && b[i] <= '9' && i - start < 19)
			i++;
		/* the number must visibly end before the buffer does */
		if (i >= len || (b[i] >= '0' && b[i] <= '9') || b[i] == '.' || b[i] == 'e' ||
		    b[i] == 'E')
			return NULL;
	}
	v = json_loadb(b + start, i - start, JSON_DECODE_ANY, NULL);
	if (v && !jsonrpc_id_valid(v)) {
		json_decref(v);
		v = NULL;
	}
	return v;
}

/* The position just past the top-level key "key" (plain, no escapes) in
 * b[0..len), or 0 when it is not found before len. */
static size_t sniff_key(const char *b, size_t len, const char *key)
{
	size_t i = sniff_ws(b, len, 0), klen = strlen(key);
	unsigned depth = 0;
	bool at_key = false;

	if (i >= len || b[i] != '{')
		return 0;
	for (; i < len; i++) {
		if (b[i] == '"') {
			size_t s = i;

			for (i++; i < len && b[i] != '"'; i++)
				if (b[i] == '\\')
					i++;
			if (i >= len)
				return 0;
			if (depth == 1 && at_key && i - s - 1 == klen &&
			    memcmp(b + s + 1, key, klen) == 0)
				return i + 1;
			at_key = false;
		} else if (b[i] == '{' || b[i] == '[') {
			at_key = ++depth == 1;
		} else if (b[i] == '}' || b[i] == ']') {
			if (depth-- <= 1)
				return 0;
		} else if (b[i] == ',' && depth == 1) {
			at_key = true;
		}
	}
	return 0;
}

json_t *jsonrpc_id_sniff(const char *b, size_t len)
{
	size_t at = sniff_key(b, len, "id");

	return at ? sniff_value(b, len, at) : NULL;
}

int jsonrpc_method_sniffed(const char *b, size_t len)
{
	return sniff_key(b, len, "method") != 0;
}
