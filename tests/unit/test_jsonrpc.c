/* test_jsonrpc.c: JSON-RPC 2.0 envelopes, every refusal and every encoder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "jsonrpc/jsonrpc.h"

#define CAP (64u * 1024)

static int parse(const char *s, struct jsonrpc_msg *m, struct appl_err *err)
{
	return jsonrpc_msg_parse(s, strlen(s), CAP, m, err);
}

/* A refusal: rc, the code to answer, and the id to answer with (a JSON text,
 * or NULL for null). */
static void refused(const char *s, int rc, int rpc, const char *id_json)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};

	assert_int_equal(parse(s, &m, &err), rc);
	assert_int_equal(err.code, rc);
	assert_int_equal(m.kind, JSONRPC_NONE);
	assert_int_equal(m.fail, rpc);
	assert_null(m.root);
	assert_null(m.method);
	if (!id_json) {
		assert_null(m.id);
	} else {
		json_t *want = json_loads(id_json, JSON_DECODE_ANY, NULL);
		assert_non_null(m.id);
		assert_true(jsonrpc_id_equal(m.id, want));
		json_decref(want);
	}
	jsonrpc_msg_clear(&m);
}

static void invalid(const char *s, const char *id_json)
{
	refused(s, -EINVAL, JSONRPC_INVALID_REQUEST, id_json);
}

/* The refusal's message says what is wrong with the line. */
static void message_has(const char *s, const char *needle)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};

	assert_int_equal(parse(s, &m, &err), -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("%s: message \"%s\" lacks \"%s\"", s, err.msg, needle);
	jsonrpc_msg_clear(&m);
}

/* ---- accepted ---------------------------------------------------------------- */

static void test_request(void **state)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};
	(void)state;
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\","
			       "\"params\":{\"name\":\"add\"}}",
			       &m, &err),
			 0);
	assert_int_equal(m.kind, JSONRPC_REQUEST);
	assert_int_equal(json_integer_value(m.id), 7);
	assert_string_equal(m.method, "tools/call");
	assert_int_equal(m.method_len, 10);
	assert_true(json_is_object(m.params));
	assert_int_equal(m.fail, 0);
	jsonrpc_msg_clear(&m);
	assert_null(m.root);
	assert_null(m.id);
	jsonrpc_msg_clear(&m); /* twice is harmless */
}

static void test_request_ids(void **state)
{
	struct jsonrpc_msg m;
	(void)state;
	/* 0 is a valid id: a check written `if (!id)` would lose it */
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"}", &m, NULL), 0);
	assert_int_equal(m.kind, JSONRPC_REQUEST);
	assert_non_null(m.id);
	assert_int_equal(json_integer_value(m.id), 0);
	assert_null(m.params);
	jsonrpc_msg_clear(&m);
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":-5,\"method\":\"ping\"}", &m, NULL), 0);
	assert_int_equal(json_integer_value(m.id), -5);
	jsonrpc_msg_clear(&m);
	assert_int_equal(parse("{\"id\":\"\",\"method\":\"ping\",\"jsonrpc\":\"2.0\"}", &m, NULL),
			 0);
	assert_string_equal(json_string_value(m.id), "");
	jsonrpc_msg_clear(&m);
	assert_int_equal(
		parse("{\"jsonrpc\":\"2.0\",\"id\":\"a-b\",\"method\":\"x\",\"params\":[1]}", &m,
		      NULL),
		0);
	assert_string_equal(json_string_value(m.id), "a-b");
	assert_true(json_is_array(m.params));
	jsonrpc_msg_clear(&m);
}

static void test_notification(void **state)
{
	struct jsonrpc_msg m;
	(void)state;
	assert_int_equal(
		parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, NULL),
		0);
	assert_int_equal(m.kind, JSONRPC_NOTIFICATION);
	assert_null(m.id);
	assert_string_equal(m.method, "notifications/initialized");
	jsonrpc_msg_clear(&m);
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":3}}",
			       &m, NULL),
			 0);
	assert_int_equal(m.kind, JSONRPC_NOTIFICATION);
	assert_true(json_is_object(m.params));
	jsonrpc_msg_clear(&m);
}

static void test_responses(void **state)
{
	struct jsonrpc_msg m;
	(void)state;
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", &m, NULL), 0);
	assert_int_equal(m.kind, JSONRPC_RESULT);
	assert_true(json_is_object(m.result));
	jsonrpc_msg_clear(&m);
	/* JSON-RPC allows any result value; MCP's own checks come later */
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":null}", &m, NULL), 0);
	assert_int_equal(m.kind, JSONRPC_RESULT);
	assert_true(json_is_null(m.result));
	jsonrpc_msg_clear(&m);
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-32601,"
			       "\"message\":\"Method not found\",\"data\":[1]}}",
			       &m, NULL),
			 0);
	assert_int_equal(m.kind, JSONRPC_ERROR);
	assert_int_equal(json_integer_value(m.id), 2);
	assert_int_equal(m.error_code, -32601);
	assert_string_equal(m.error_message, "Method not found");
	assert_true(json_is_array(m.error_data));
	jsonrpc_msg_clear(&m);
	/* the answer to a line whose id could not be read */
	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
			       "\"message\":\"Parse error\"}}",
			       &m, NULL),
			 0);
	assert_int_equal(m.kind, JSONRPC_ERROR);
	assert_null(m.id);
	assert_null(m.error_data);
	jsonrpc_msg_clear(&m);
}

/* ---- refused: not JSON, caps ------------------------------------------------ */

static void test_parse_errors(void **state)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};
	(void)state;
	refused("", -EINVAL, JSONRPC_PARSE_ERROR, NULL);
	refused("   ", -EINVAL, JSONRPC_PARSE_ERROR, NULL);
	refused("{", -EINVAL, JSONRPC_PARSE_ERROR, NULL);
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"", -EINVAL, JSONRPC_PARSE_ERROR,
		NULL);
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} {}", -EINVAL, JSONRPC_PARSE_ERROR,
		NULL);
	refused("{'jsonrpc':'2.0'}", -EINVAL, JSONRPC_PARSE_ERROR, NULL);
	refused("hello", -EINVAL, JSONRPC_PARSE_ERROR, NULL);
	/* which id would we echo? */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"x\"}", -EINVAL,
		JSONRPC_PARSE_ERROR, NULL);
	/* past int64: jansson refuses the number, so the line is not JSON to us */
	refused("{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"x\"}", -EINVAL,
		JSONRPC_PARSE_ERROR, NULL);
	/* \u0000 and invalid UTF-8 inside strings */
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", -EINVAL,
		JSONRPC_PARSE_ERROR, NULL);
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", -EINVAL, JSONRPC_PARSE_ERROR,
		NULL);
	/* a raw NUL byte inside the line: the message, then NUL, then 1 */
	static const char nul_line[] = "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\0 1";
	assert_int_equal(jsonrpc_msg_parse(nul_line, sizeof(nul_line) - 1, CAP, &m, &err), -EINVAL);
	assert_int_equal(m.fail, JSONRPC_PARSE_ERROR);
	jsonrpc_msg_clear(&m);
}

static void test_caps(void **state)
{
	struct jsonrpc_msg m;
	struct appl_err err = {0};
	const char *ok = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"}";
	char deep[256];
	size_t n;
	(void)state;
	/* the cap is the caller's, and refused before parsing */
	assert_int_equal(jsonrpc_msg_parse(ok, strlen(ok), strlen(ok), &m, &err), 0);
	jsonrpc_msg_clear(&m);
	assert_int_equal(jsonrpc_msg_parse(ok, strlen(ok), strlen(ok) - 1, &m, &err), -EFBIG);
	assert_int_equal(m.fail, JSONRPC_INVALID_REQUEST);
	assert_null(m.id);
	jsonrpc_msg_clear(&m);
	/* deeper than APPL_JSON_DEPTH_MAX: refused by the pre-scan */
	memset(deep, 0, sizeof(deep));
	n = (size_t)snprintf(deep, sizeof(deep),
			     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":");
	memset(deep + n, '[', APPL_JSON_DEPTH_MAX);
	assert_int_equal(parse(deep, &m, &err), -E2BIG);
	assert_int_equal(m.fail, JSONRPC_INVALID_REQUEST);
	assert_null(m.id);
	jsonrpc_msg_clear(&m);
}

/* ---- refused: envelopes ------------------------------------------------------ */

static void test_batch_and_non_objects(void **state)
{
	(void)state;
	invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", NULL);
	invalid("[]", NULL);
	invalid("1", NULL);
	invalid("\"ping\"", NULL);
	invalid("null", NULL);
	invalid("true", NULL);
}

static void test_version(void **state)
{
	(void)state;
	/* the id was readable: the refusal names it */
	invalid("{\"id\":1,\"method\":\"x\"}", "1");
	invalid("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"x\"}", "1");
	invalid("{\"jsonrpc\":2.0,\"id\":\"a\",\"method\":\"x\"}", "\"a\"");
	invalid("{\"jsonrpc\":\"2.0 \",\"id\":0,\"method\":\"x\"}", "0");
	invalid("{\"jsonrpc\":null,\"method\":\"x\"}", NULL);
}

static void test_unknown_member(void **state)
{
	(void)state;
	invalid("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"x\",\"extra\":1}", "4");
	invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"Method\":\"y\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"meta\":{}}", "1");
}

static void test_bad_ids(void **state)
{
	char s[APPL_JSONRPC_ID_MAX + 64];
	size_t n;
	(void)state;
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1.0,\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1e3,\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":false,\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"x\"}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"x\"}", NULL);
	/* a string id longer than the cap is neither accepted nor echoed */
	n = (size_t)snprintf(s, sizeof(s), "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":\"");
	memset(s + n, 'i', APPL_JSONRPC_ID_MAX + 1);
	n += APPL_JSONRPC_ID_MAX + 1;
	snprintf(s + n, sizeof(s) - n, "\"}");
	invalid(s, NULL);
}

static void test_bad_methods_and_params(void **state)
{
	char s[APPL_JSONRPC_METHOD_MAX + 64];
	size_t n;
	(void)state;
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":null}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":[\"x\"]}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"a\"}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":3}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":null}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":true}", NULL);
	n = (size_t)snprintf(s, sizeof(s), "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"");
	memset(s + n, 'm', APPL_JSONRPC_METHOD_MAX + 1);
	n += APPL_JSONRPC_METHOD_MAX + 1;
	snprintf(s + n, sizeof(s) - n, "\"}");
	invalid(s, "2");
}

static void test_mixed_kinds(void **state)
{
	(void)state;
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"result\":{}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"error\":{\"code\":1,\"message\":\"m\"}}",
		NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,\"message\":"
		"\"m\"}}",
		"1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1}", "1");
	invalid("{\"jsonrpc\":\"2.0\"}", NULL);
	message_has("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,"
		    "\"message\":\"m\"}}",
		    "carries both result and error");
	message_has("{\"jsonrpc\":\"2.0\",\"id\":1}", "needs a method, a result or an error");
	invalid("{}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"params\":{}}", "1");
}

static void test_bad_responses(void **state)
{
	(void)state;
	invalid("{\"jsonrpc\":\"2.0\",\"result\":{}}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"result\":{}}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"error\":{\"code\":1,\"message\":\"m\"}}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":true,\"error\":{\"code\":1,\"message\":\"m\"}}", NULL);
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":null}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"bad\"}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"message\":\"m\"}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1.5,\"message\":\"m\"}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"1\",\"message\":\"m\"}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":2}}", "1");
	invalid("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"m\",\"x\":0}}",
		"1");
}

/* ---- names, ids -------------------------------------------------------------- */

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(jsonrpc_kind_name(JSONRPC_REQUEST), "request");
	assert_string_equal(jsonrpc_kind_name(JSONRPC_ERROR), "error");
	assert_string_equal(jsonrpc_kind_name((enum jsonrpc_kind)99), "none");
	assert_string_equal(jsonrpc_code_message(JSONRPC_PARSE_ERROR), "Parse error");
	assert_string_equal(jsonrpc_code_message(JSONRPC_INVALID_REQUEST), "Invalid Request");
	assert_string_equal(jsonrpc_code_message(JSONRPC_METHOD_NOT_FOUND), "Method not found");
	assert_string_equal(jsonrpc_code_message(JSONRPC_INVALID_PARAMS), "Invalid params");
	assert_string_equal(jsonrpc_code_message(JSONRPC_INTERNAL_ERROR), "Internal error");
	assert_string_equal(jsonrpc_code_message(-32000), "Server error");
}

static void test_ids(void **state)
{
	json_t *i0 = json_integer(0), *i1 = json_integer(1), *s1 = json_string("1");
	json_t *s1b = json_string("1"), *r = json_real(1.0), *n = json_null();
	json_t *c;
	(void)state;
	assert_true(jsonrpc_id_valid(i0));
	assert_true(jsonrpc_id_valid(s1));
	assert_false(jsonrpc_id_valid(r));
	assert_false(jsonrpc_id_valid(n));
	assert_false(jsonrpc_id_valid(NULL));
	assert_true(jsonrpc_id_equal(NULL, NULL));
	assert_false(jsonrpc_id_equal(i0, NULL));
	assert_false(jsonrpc_id_equal(NULL, i0));
	assert_false(jsonrpc_id_equal(i0, i1));
	assert_false(jsonrpc_id_equal(i1, s1));
	assert_true(jsonrpc_id_equal(s1, s1b));
	assert_false(jsonrpc_id_equal(r, r));
	c = jsonrpc_id_copy(i0);
	assert_non_null(c);
	assert_true(c != i0);
	assert_true(jsonrpc_id_equal(c, i0));
	json_decref(c);
	c = jsonrpc_id_copy(s1);
	assert_true(c != s1);
	assert_true(jsonrpc_id_equal(c, s1));
	json_decref(c);
	assert_null(jsonrpc_id_copy(r));
	assert_null(jsonrpc_id_copy(NULL));
	json_decref(i0);
	json_decref(i1);
	json_decref(s1);
	json_decref(s1b);
	json_decref(r);
	json_decref(n);
}

/* ---- encoders ---------------------------------------------------------------- */

static void test_encode_result(void **state)
{
	json_t *id = json_integer(0), *res = json_pack("{s:i}", "sum", 5);
	char *line;
	size_t len;
	struct appl_err err = {0};
	struct jsonrpc_msg m;
	(void)state;
	assert_int_equal(jsonrpc_result_encode(id, res, CAP, &line, &len, &err), 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"sum\":5}}\n");
	assert_int_equal(len, strlen(line));
	/* what we write, we read back */
	assert_int_equal(jsonrpc_msg_parse(line, len - 1, CAP, &m, &err), 0);
	assert_int_equal(m.kind, JSONRPC_RESULT);
	assert_true(jsonrpc_id_equal(m.id, id));
	assert_true(json_equal(m.result, res));
	jsonrpc_msg_clear(&m);
	free(line);
	/* exactly the cap fits; one byte less does not */
	assert_int_equal(jsonrpc_result_encode(id, res, len, &line, &len, &err), 0);
	free(line);
	assert_int_equal(jsonrpc_result_encode(id, res, len - 1, &line, &len, &err), -EFBIG);
	assert_null(line);
	assert_int_equal(len, 0);
	assert_int_equal(jsonrpc_result_encode(NULL, res, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_result_encode(id, NULL, CAP, &line, &len, &err), -EINVAL);
	json_decref(id);
	json_decref(res);
}

static void test_encode_error(void **state)
{
	json_t *id = json_string("r1"), *data = json_pack("{s:s}", "why", "x");
	json_t *bad = json_real(2.5);
	char *line;
	size_t len;
	struct appl_err err = {0};
	(void)state;
	assert_int_equal(jsonrpc_error_encode(NULL, JSONRPC_PARSE_ERROR, "Parse error", NULL, CAP,
					      &line, &len, &err),
			 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
				  "\"message\":\"Parse error\"}}\n");
	free(line);
	assert_int_equal(jsonrpc_error_encode(id, JSONRPC_INVALID_PARAMS, "bad \"a\"\n", data, CAP,
					      &line, &len, &err),
			 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":\"r1\",\"error\":{\"code\":-32602,"
				  "\"message\":\"bad \\\"a\\\"\\n\",\"data\":{\"why\":\"x\"}}}\n");
	free(line);
	assert_int_equal(jsonrpc_error_encode(bad, -1, "m", NULL, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_error_encode(id, -1, "m", NULL, 10, &line, &len, &err), -EFBIG);
	assert_null(line);
	json_decref(id);
	json_decref(data);
	json_decref(bad);
}

/* Any text may become a message: invalid UTF-8 becomes '?', and a long one
 * is cut at the cap between characters. */
static void test_encode_error_message_text(void **state)
{
	char big[APPL_JSONRPC_ERROR_MESSAGE_MAX + 16];
	char *line;
	size_t len;
	struct jsonrpc_msg m;
	(void)state;
	assert_int_equal(jsonrpc_error_encode(NULL, 1,
					      "a\xff"
					      "b\xc3\xa9\xe2\x82",
					      NULL, CAP, &line, &len, NULL),
			 0);
	assert_int_equal(jsonrpc_msg_parse(line, len - 1, CAP, &m, NULL), 0);
	assert_string_equal(m.error_message, "a?b\xc3\xa9??");
	jsonrpc_msg_clear(&m);
	free(line);
	/* 'x' then two-byte characters: the last one would straddle the cap */
	memset(big, 0, sizeof(big));
	big[0] = 'x';
	for (size_t i = 1; i + 2 < sizeof(big); i += 2) {
		big[i] = (char)0xc3;
		big[i + 1] = (char)0xa9;
	}
	assert_int_equal(jsonrpc_error_encode(NULL, 1, big, NULL, CAP, &line, &len, NULL), 0);
	assert_int_equal(jsonrpc_msg_parse(line, len - 1, CAP, &m, NULL), 0);
	assert_int_equal(strlen(m.error_message), APPL_JSONRPC_ERROR_MESSAGE_MAX - 1);
	jsonrpc_msg_clear(&m);
	free(line);
	assert_int_equal(jsonrpc_error_encode(NULL, 1, NULL, NULL, CAP, &line, &len, NULL), 0);
	assert_non_null(strstr(line, "\"message\":\"\""));
	free(line);
}

static void test_encode_request(void **state)
{
	json_t *id = json_integer(42), *params = json_pack("{s:s}", "name", "add");
	json_t *str = json_string("p");
	char *line;
	size_t len;
	struct appl_err err = {0};
	char longm[APPL_JSONRPC_METHOD_MAX + 2];
	(void)state;
	assert_int_equal(jsonrpc_request_encode(id, "tools/call", params, CAP, &line, &len, &err),
			 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"tools/call\","
				  "\"params\":{\"name\":\"add\"}}\n");
	free(line);
	assert_int_equal(jsonrpc_request_encode(id, "ping", NULL, CAP, &line, &len, &err), 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"ping\"}\n");
	free(line);
	assert_int_equal(jsonrpc_request_encode(NULL, "ping", NULL, CAP, &line, &len, &err),
			 -EINVAL);
	assert_int_equal(jsonrpc_request_encode(id, "", NULL, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_request_encode(id, NULL, NULL, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_request_encode(id, "x", str, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_request_encode(id, "\xff", NULL, CAP, &line, &len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "UTF-8"));
	memset(longm, 'm', sizeof(longm) - 1);
	longm[sizeof(longm) - 1] = '\0';
	assert_int_equal(jsonrpc_request_encode(id, longm, NULL, CAP, &line, &len, &err), -EINVAL);
	assert_int_equal(jsonrpc_request_encode(id, "ping", params, 20, &line, &len, &err), -EFBIG);
	assert_null(line);
	json_decref(id);
	json_decref(params);
	json_decref(str);
}

static void test_encode_notification(void **state)
{
	json_t *params = json_pack("{s:i}", "requestId", 0);
	json_t *arr = json_array();
	char *line;
	size_t len;
	struct jsonrpc_msg m;
	(void)state;
	assert_int_equal(jsonrpc_notification_encode("notifications/cancelled", params, CAP, &line,
						     &len, NULL),
			 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
				  "\"params\":{\"requestId\":0}}\n");
	assert_int_equal(jsonrpc_msg_parse(line, len - 1, CAP, &m, NULL), 0);
	assert_int_equal(m.kind, JSONRPC_NOTIFICATION);
	jsonrpc_msg_clear(&m);
	free(line);
	assert_int_equal(jsonrpc_notification_encode("n", arr, CAP, &line, &len, NULL), 0);
	assert_string_equal(line, "{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":[]}\n");
	free(line);
	assert_int_equal(jsonrpc_notification_encode("", NULL, CAP, &line, &len, NULL), -EINVAL);
	assert_int_equal(jsonrpc_notification_encode("n", NULL, 5, &line, &len, NULL), -EFBIG);
	json_decref(params);
	json_decref(arr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_request_ids),
		cmocka_unit_test(test_notification),
		cmocka_unit_test(test_responses),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_batch_and_non_objects),
		cmocka_unit_test(test_version),
		cmocka_unit_test(test_unknown_member),
		cmocka_unit_test(test_bad_ids),
		cmocka_unit_test(test_bad_methods_and_params),
		cmocka_unit_test(test_mixed_kinds),
		cmocka_unit_test(test_bad_responses),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_encode_result),
		cmocka_unit_test(test_encode_error),
		cmocka_unit_test(test_encode_error_message_text),
		cmocka_unit_test(test_encode_request),
		cmocka_unit_test(test_encode_notification),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
