/* test_proto.c: runner protocol v1, host side: every refusal of a runner
 * line, the order checker, and the host-to-runner encoders. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cell/proto.h"

/* limits.files as the cell line carries them */
static const struct cell_files_limits FILES = {
	.max_count = 8, .max_bytes = 1024 * 1024, .max_total = 4 * 1024 * 1024};

/* Parse a NUL-terminated line; expect code rc and (on failure) a message
 * containing `needle`. */
static void parse_fails(const char *line, int rc, const char *needle)
{
	struct cell_msg msg;
	struct appl_err err = {0};

	assert_int_equal(cell_proto_parse(line, strlen(line), &msg, &err), rc);
	assert_int_equal(msg.type, CELL_MSG_NONE);
	if (!strstr(err.msg, needle))
		fail_msg("line %s: message \"%s\" lacks \"%s\"", line, err.msg, needle);
}

static void parse_ok(const char *line, struct cell_msg *msg)
{
	struct appl_err err = {0};

	if (cell_proto_parse(line, strlen(line), msg, &err) != 0)
		fail_msg("line %s refused: %s", line, err.msg);
}

static void test_valid_messages(void **state)
{
	struct cell_msg msg;
	(void)state;

	parse_ok("{\"t\":\"ready\",\"v\":1}", &msg);
	assert_int_equal(msg.type, CELL_MSG_READY);
	assert_int_equal(msg.u.ready.version, 1);
	cell_proto_msg_clear(&msg);

	parse_ok(" {\"data\":\"h\\u00e9\\n\\u001b\",\"t\":\"out\"} ", &msg);
	assert_int_equal(msg.type, CELL_MSG_OUT);
	assert_string_equal(json_string_value(msg.u.out.data), "h\xc3\xa9\n\x1b");
	cell_proto_msg_clear(&msg);

	parse_ok("{\"t\":\"call\",\"id\":0,\"tool\":\"toy.add\",\"args\":{\"a\":1}}", &msg);
	assert_int_equal(msg.type, CELL_MSG_CALL);
	assert_int_equal(msg.u.call.id, 0);
	assert_string_equal(json_string_value(msg.u.call.tool), "toy.add");
	assert_int_equal(json_integer_value(json_object_get(msg.u.call.args, "a")), 1);
	cell_proto_msg_clear(&msg);

	/* a resource read is a call with read set */
	parse_ok("{\"t\":\"read\",\"id\":2,\"server\":\"files\",\"uri\":\"file:///a\"}", &msg);
	assert_int_equal(msg.type, CELL_MSG_CALL);
	assert_true(msg.u.call.read);
	assert_int_equal(msg.u.call.id, 2);
	assert_string_equal(json_string_value(msg.u.call.tool), "files");
	assert_string_equal(json_string_value(json_object_get(msg.u.call.args, "uri")),
			    "file:///a");
	assert_int_equal(json_object_size(msg.u.call.args), 1);
	cell_proto_msg_clear(&msg);

	parse_ok("{\"t\":\"done\",\"error\":null,\"result\":[1,\"x\",null]}", &msg);
	assert_int_equal(msg.type, CELL_MSG_DONE);
	assert_null(msg.u.done.error);
	assert_int_equal(json_array_size(msg.u.done.result), 3);
	cell_proto_msg_clear(&msg);

	parse_ok("{\"t\":\"done\",\"error\":\"ValueError: x\",\"result\":null}", &msg);
	assert_string_equal(json_string_value(msg.u.done.error), "ValueError: x");
	assert_true(json_is_null(msg.u.done.result));
	cell_proto_msg_clear(&msg);
	cell_proto_msg_clear(&msg); /* twice is harmless */
	assert_int_equal(msg.type, CELL_MSG_NONE);
}

static void test_file_messages(void **state)
{
	static const char *const words[] = {
		"symlink",   "directory",	"device",     "fifo",
		"socket",    "other",		"unreadable", "max_count",
		"max_bytes", "max_total_bytes", "max_entries"};
	struct cell_msg msg;
	char line[128];
	(void)state;

	parse_ok("{\"t\":\"file\",\"name\":\"../x.png\",\"data\":\"AAEC/w==\",\"more\":true}",
		 &msg);
	assert_int_equal(msg.type, CELL_MSG_FILE);
	assert_string_equal(json_string_value(msg.u.file.name), "../x.png");
	assert_int_equal(msg.u.file.len, 4);
	assert_memory_equal(msg.u.file.data, "\x00\x01\x02\xff", 4);
	assert_true(msg.u.file.more);
	assert_int_equal(msg.u.file.why, CELL_FILE_KEPT);
	cell_proto_msg_clear(&msg);

	/* an empty file is one empty chunk */
	parse_ok("{\"t\":\"file\",\"name\":\"e\",\"data\":\"\",\"more\":false}", &msg);
	assert_null(msg.u.file.data);
	assert_int_equal(msg.u.file.len, 0);
	assert_false(msg.u.file.more);
	cell_proto_msg_clear(&msg);

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		snprintf(line, sizeof(line), "{\"t\":\"skip\",\"name\":\"n\",\"why\":\"%s\"}",
			 words[i]);
		parse_ok(line, &msg);
		assert_int_equal(msg.type, CELL_MSG_FILE);
		assert_int_equal(msg.u.file.why, (int)i + 1);
		assert_string_equal(cell_file_why_name(msg.u.file.why), words[i]);
		assert_null(msg.u.file.data);
		cell_proto_msg_clear(&msg);
	}
	assert_null(cell_file_why_name(CELL_FILE_KEPT));
	assert_null(cell_file_why_name(CELL_FILE_WHY_N));
}

/* A file line whose data is n characters of c. */
static char *file_line(size_t n, char c)
{
	static const char head[] = "{\"t\":\"file\",\"name\":\"x\",\"more\":false,\"data\":\"";
	char *buf = malloc(sizeof(head) + n + 3);

	assert_non_null(buf);
	memcpy(buf, head, sizeof(head) - 1);
	memset(buf + sizeof(head) - 1, c, n);
	memcpy(buf + sizeof(head) - 1 + n, "\"}", 3);
	return buf;
}

static void test_file_refusals(void **state)
{
	char name[APPL_RUNNER_FILE_NAME_MAX + 80];
	char *big;
	(void)state;

	/* strict base64: alphabet, padding, canonical bits, nothing after */
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"QQ\",\"more\":false}", -EINVAL,
		    "not base64");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"QR==\",\"more\":false}", -EINVAL,
		    "not base64");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"QQ==QQ==\",\"more\":false}", -EINVAL,
		    "not base64");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"QQ==\\n\",\"more\":false}", -EINVAL,
		    "not base64");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"-_8=\",\"more\":false}", -EINVAL,
		    "not base64");
	/* a chunk of the most bytes, and one character more */
	big = file_line(4 * APPL_RUNNER_FILE_CHUNK_MAX / 3, 'A');
	{
		struct cell_msg msg;

		parse_ok(big, &msg);
		assert_int_equal(msg.u.file.len, APPL_RUNNER_FILE_CHUNK_MAX);
		cell_proto_msg_clear(&msg);
	}
	free(big);
	big = file_line(4 * APPL_RUNNER_FILE_CHUNK_MAX / 3 + 4, 'A');
	parse_fails(big, -EINVAL, "file.data is 65540 characters, more than 65536");
	free(big);

	parse_fails("{\"t\":\"file\",\"name\":\"\",\"data\":\"\",\"more\":false}", -EINVAL,
		    "file.name is 0 bytes");
	snprintf(name, sizeof(name), "{\"t\":\"skip\",\"why\":\"fifo\",\"name\":\"%0*d\"}",
		 APPL_RUNNER_FILE_NAME_MAX + 1, 0);
	parse_fails(name, -EINVAL, "skip.name is 1025 bytes");
	parse_fails("{\"t\":\"file\",\"name\":7,\"data\":\"\",\"more\":false}", -EINVAL,
		    "file.name is integer");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":null,\"more\":false}", -EINVAL,
		    "file.data is null, not a string");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"\",\"more\":1}", -EINVAL,
		    "file.more is integer");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"\"}", -EINVAL,
		    "missing field \"more\"");
	parse_fails("{\"t\":\"file\",\"name\":\"x\",\"data\":\"\",\"more\":false,\"type\":\"image/"
		    "png\"}",
		    -EINVAL, "type");
	parse_fails("{\"t\":\"skip\",\"name\":\"x\",\"why\":\"fifo\",\"data\":\"\"}", -EINVAL,
		    "data");
	parse_fails("{\"t\":\"skip\",\"name\":\"x\",\"why\":\"tired\"}", -EINVAL,
		    "skip.why \"tired\" is not a reason");
	parse_fails("{\"t\":\"skip\",\"name\":\"x\",\"why\":null}", -EINVAL,
		    "skip.why is null, not a string");
}

static void test_references_outlive_the_message(void **state)
{
	struct cell_msg msg;
	json_t *args;
	(void)state;

	parse_ok("{\"t\":\"call\",\"id\":3,\"tool\":\"a.b\",\"args\":{\"k\":[1,2]}}", &msg);
	args = json_incref(msg.u.call.args);
	cell_proto_msg_clear(&msg);
	assert_int_equal(json_array_size(json_object_get(args, "k")), 2);
	json_decref(args);
}

static char *line_of_size(size_t n)
{
	static const char head[] = "{\"t\":\"out\",\"data\":\"";
	char *buf = malloc(n);

	assert_non_null(buf);
	memset(buf, 'x', n);
	memcpy(buf, head, sizeof(head) - 1);
	memcpy(buf + n - 2, "\"}", 2);
	return buf;
}

static void test_line_cap(void **state)
{
	struct appl_err err = {0};
	struct cell_msg msg;
	char *buf = line_of_size(APPL_RUNNER_LINE_MAX);
	(void)state;

	assert_int_equal(cell_proto_parse(buf, APPL_RUNNER_LINE_MAX, &msg, &err), 0);
	cell_proto_msg_clear(&msg);
	free(buf);
	buf = line_of_size(APPL_RUNNER_LINE_MAX + 1);
	assert_int_equal(cell_proto_parse(buf, APPL_RUNNER_LINE_MAX + 1, &msg, &err), -EFBIG);
	assert_non_null(strstr(err.msg, "more than the cap"));
	free(buf);
}

static void test_not_json(void **state)
{
	(void)state;
	parse_fails("", -EINVAL, "invalid JSON");
	parse_fails("{", -EINVAL, "invalid JSON");
	parse_fails("garbage", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"ready\",\"v\":1} {}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"ready\",\"v\":1}\n{\"t\":\"ready\",\"v\":1}", -EINVAL,
		    "invalid JSON");
	parse_fails("{\"t\":\"out\",\"data\":\"\xff\"}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"out\",\"data\":\"\\ud800\"}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"done\",\"error\":null,\"result\":NaN}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"done\",\"error\":null,\"result\":1e999}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"call\",\"id\":99999999999999999999,\"tool\":\"a\",\"args\":{}}",
		    -EINVAL, "invalid JSON");
	parse_fails("{'t':'ready','v':1}", -EINVAL, "invalid JSON");
}

static void test_nul_bytes(void **state)
{
	static const char raw[] = "{\"t\":\"out\",\"data\":\"a\0b\"}";
	static const char trailing[] = "{\"t\":\"ready\",\"v\":1}\0";
	struct appl_err err = {0};
	struct cell_msg msg;
	(void)state;

	assert_int_equal(cell_proto_parse(raw, sizeof(raw) - 1, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "NUL"));
	assert_int_equal(cell_proto_parse(trailing, sizeof(trailing) - 1, &msg, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "NUL"));
	parse_fails("{\"t\":\"out\",\"data\":\"a\\u0000b\"}", -EINVAL, "invalid JSON");
	parse_fails("{\"t\":\"ready\\u0000\",\"v\":1}", -EINVAL, "invalid JSON");
}

static void test_not_an_object(void **state)
{
	(void)state;
	parse_fails("[]", -EINVAL, "is array, not an object");
	parse_fails("1", -EINVAL, "is integer, not an object");
	parse_fails("\"ready\"", -EINVAL, "is string, not an object");
	parse_fails("null", -EINVAL, "is null, not an object");
}

static void test_type_field(void **state)
{
	(void)state;
	parse_fails("{\"v\":1}", -EINVAL, "no \"t\"");
	parse_fails("{\"t\":1,\"v\":1}", -EINVAL, "\"t\" is integer");
	parse_fails("{\"t\":null}", -EINVAL, "\"t\" is null");
	parse_fails("{\"t\":\"result\",\"id\":1,\"ok\":1}", -EINVAL,
		    "unknown message type \"result\"");
	parse_fails("{\"t\":\"cell\",\"code\":\"\",\"tools\":[]}", -EINVAL, "unknown message type");
	parse_fails("{\"t\":\"Ready\",\"v\":1}", -EINVAL, "unknown message type");
	parse_fails("{\"t\":\"ready \",\"v\":1}", -EINVAL, "unknown message type");
	parse_fails("{\"t\":\"\",\"v\":1}", -EINVAL, "unknown message type");
	/* the message quotes the type cut and on one line */
	parse_fails("{\"t\":\"a\\nb\"}", -EINVAL, "unknown message type \"a?b\"");
	parse_fails("{\"t\":\"\xc3\xa9\"}", -EINVAL, "unknown message type \"??\"");
}

static void test_missing_fields(void **state)
{
	(void)state;
	parse_fails("{\"t\":\"ready\"}", -EINVAL, "ready: missing field \"v\"");
	parse_fails("{\"t\":\"out\"}", -EINVAL, "out: missing field \"data\"");
	parse_fails("{\"t\":\"call\",\"tool\":\"a\",\"args\":{}}", -EINVAL,
		    "call: missing field \"id\"");
	parse_fails("{\"t\":\"call\",\"id\":1,\"args\":{}}", -EINVAL,
		    "call: missing field \"tool\"");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\"}", -EINVAL,
		    "call: missing field \"args\"");
	parse_fails("{\"t\":\"done\",\"result\":1}", -EINVAL, "done: missing field \"error\"");
	parse_fails("{\"t\":\"done\",\"error\":null}", -EINVAL, "done: missing field \"result\"");
}

static void test_extra_fields(void **state)
{
	(void)state;
	parse_fails("{\"t\":\"ready\",\"v\":1,\"x\":1}", -EINVAL, "ready.x: unknown key");
	parse_fails("{\"t\":\"out\",\"data\":\"\",\"fd\":2}", -EINVAL, "out.fd: unknown key");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\",\"args\":{},\"role\":\"admin\"}",
		    -EINVAL, "call.role: unknown key");
	parse_fails("{\"t\":\"done\",\"error\":null,\"result\":1,\"stopped\":false}", -EINVAL,
		    "done.stopped: unknown key");
}

static void test_wrong_types(void **state)
{
	char *line;
	size_t n;
	(void)state;

	parse_fails("{\"t\":\"ready\",\"v\":\"1\"}", -EINVAL, "ready.v is string");
	parse_fails("{\"t\":\"ready\",\"v\":1.0}", -EINVAL, "ready.v is number");
	parse_fails("{\"t\":\"ready\",\"v\":true}", -EINVAL, "ready.v is boolean");
	parse_fails("{\"t\":\"ready\",\"v\":2}", -EINVAL, "speaks version 1");
	parse_fails("{\"t\":\"ready\",\"v\":0}", -EINVAL, "speaks version 1");
	parse_fails("{\"t\":\"out\",\"data\":1}", -EINVAL, "out.data is integer");
	parse_fails("{\"t\":\"out\",\"data\":null}", -EINVAL, "out.data is null");
	parse_fails("{\"t\":\"out\",\"data\":[\"a\"]}", -EINVAL, "out.data is array");
	parse_fails("{\"t\":\"call\",\"id\":-1,\"tool\":\"a\",\"args\":{}}", -EINVAL, "call.id");
	parse_fails("{\"t\":\"call\",\"id\":1.5,\"tool\":\"a\",\"args\":{}}", -EINVAL, "call.id");
	parse_fails("{\"t\":\"call\",\"id\":\"1\",\"tool\":\"a\",\"args\":{}}", -EINVAL, "call.id");
	parse_fails("{\"t\":\"call\",\"id\":null,\"tool\":\"a\",\"args\":{}}", -EINVAL, "call.id");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"\",\"args\":{}}", -EINVAL,
		    "call.tool is 0");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":7,\"args\":{}}", -EINVAL,
		    "call.tool is integer");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\",\"args\":[]}", -EINVAL,
		    "call.args is array");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\",\"args\":null}", -EINVAL,
		    "call.args is null");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\",\"args\":\"{}\"}", -EINVAL,
		    "call.args is string");
	parse_fails("{\"t\":\"done\",\"error\":1,\"result\":null}", -EINVAL,
		    "done.error is integer");
	parse_fails("{\"t\":\"done\",\"error\":false,\"result\":null}", -EINVAL,
		    "done.error is boolean");
	parse_fails("{\"t\":\"done\",\"error\":{},\"result\":null}", -EINVAL,
		    "done.error is object");

	parse_fails("{\"t\":\"read\",\"id\":1,\"server\":\"\",\"uri\":\"x\"}", -EINVAL,
		    "read.server");
	parse_fails("{\"t\":\"read\",\"id\":1,\"server\":\"s\",\"uri\":\"\"}", -EINVAL, "read.uri");
	parse_fails("{\"t\":\"read\",\"id\":1,\"server\":\"s\",\"uri\":{}}", -EINVAL, "read.uri");
	parse_fails("{\"t\":\"read\",\"id\":-3,\"server\":\"s\",\"uri\":\"x\"}", -EINVAL,
		    "read.id");
	parse_fails("{\"t\":\"read\",\"id\":1,\"server\":\"s\",\"uri\":\"x\",\"args\":{}}", -EINVAL,
		    "args");

	/* call.tool and done.error have their own caps */
	line = malloc(APPL_RUNNER_ERROR_MAX + 100);
	assert_non_null(line);
	n = (size_t)snprintf(line, 100, "{\"t\":\"call\",\"id\":1,\"tool\":\"");
	memset(line + n, 't', APPL_RUNNER_TOOL_NAME_MAX + 1);
	memcpy(line + n + APPL_RUNNER_TOOL_NAME_MAX + 1, "\",\"args\":{}}", 13);
	parse_fails(line, -EINVAL, "call.tool is 257 bytes");
	n = (size_t)snprintf(line, 100, "{\"t\":\"done\",\"result\":null,\"error\":\"");
	memset(line + n, 'e', APPL_RUNNER_ERROR_MAX + 1);
	memcpy(line + n + APPL_RUNNER_ERROR_MAX + 1, "\"}", 3);
	parse_fails(line, -EINVAL, "done.error is 8193 bytes");
	free(line);
	line = malloc(APPL_RUNNER_URI_MAX + 100);
	assert_non_null(line);
	n = (size_t)snprintf(line, 100, "{\"t\":\"read\",\"id\":1,\"server\":\"s\",\"uri\":\"");
	memset(line + n, 'u', APPL_RUNNER_URI_MAX + 1);
	memcpy(line + n + APPL_RUNNER_URI_MAX + 1, "\"}", 3);
	parse_fails(line, -EINVAL, "read.uri");
	free(line);
}

/* The runner never sends a value deeper than its own cap, nor a result
 * beside an error: a forged done that does is refused, so neither reaches
 * the client. */
static void test_done_forged_values(void **state)
{
	char line[512];
	size_t n, i;
	struct cell_msg msg;
	(void)state;

	for (unsigned levels = APPL_RUNNER_VALUE_DEPTH_MAX;
	     levels <= APPL_RUNNER_VALUE_DEPTH_MAX + 1; levels++) {
		n = (size_t)snprintf(line, sizeof(line),
				     "{\"t\":\"done\",\"error\":null,\"result\":");
		for (i = 0; i < levels; i++)
			line[n++] = '[';
		for (i = 0; i < levels; i++)
			line[n++] = ']';
		line[n++] = '}';
		line[n] = '\0';
		if (levels == APPL_RUNNER_VALUE_DEPTH_MAX) {
			parse_ok(line, &msg);
			cell_proto_msg_clear(&msg);
		} else {
			parse_fails(line, -EINVAL, "done.result nests deeper than 32 levels");
		}
	}
	parse_fails("{\"t\":\"done\",\"error\":\"ValueError\",\"result\":1}", -EINVAL,
		    "done carries both an error and a result");
	parse_fails("{\"t\":\"done\",\"error\":\"x\",\"result\":{}}", -EINVAL,
		    "done carries both an error and a result");
}

static void test_depth_bomb(void **state)
{
	char line[4096];
	size_t n, i;
	struct cell_msg msg;
	(void)state;

	/* the envelope and args are two levels: 62 more fit the cap of 64, 63
	 * do not */
	for (unsigned levels = 62; levels <= 63; levels++) {
		n = (size_t)snprintf(line, sizeof(line),
				     "{\"t\":\"call\",\"id\":1,\"tool\":\"a.b\",\"args\":{\"x\":");
		for (i = 0; i < levels; i++)
			line[n++] = '[';
		for (i = 0; i < levels; i++)
			line[n++] = ']';
		line[n++] = '}';
		line[n++] = '}';
		line[n] = '\0';
		if (levels == 62) {
			parse_ok(line, &msg);
			cell_proto_msg_clear(&msg);
		} else {
			parse_fails(line, -E2BIG, "nested deeper");
		}
	}
	/* a bomb that never closes is refused by the pre-scan, not by jansson */
	memset(line, '[', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\0';
	parse_fails(line, -E2BIG, "nested deeper");
}

static void test_duplicate_keys(void **state)
{
	(void)state;
	/* two readers of this line could disagree on what it is */
	parse_fails("{\"t\":\"out\",\"t\":\"done\",\"data\":\"x\"}", -EINVAL, "duplicate");
	parse_fails("{\"t\":\"out\",\"data\":\"a\",\"data\":\"b\"}", -EINVAL, "duplicate");
	parse_fails("{\"t\":\"call\",\"id\":1,\"tool\":\"a\",\"args\":{\"k\":1,\"k\":2}}", -EINVAL,
		    "duplicate");
}

/* ---- order of messages ----------------------------------------------------- */

static void feed(struct cell_proto_state *st, const char *line, int rc, const char *needle)
{
	struct appl_err err = {0};
	struct cell_msg msg;

	parse_ok(line, &msg);
	assert_int_equal(cell_proto_state_feed(st, &msg, &err), rc);
	if (needle && !strstr(err.msg, needle))
		fail_msg("after %s: \"%s\" lacks \"%s\"", line, err.msg, needle);
	cell_proto_msg_clear(&msg);
}

#define READY	 "{\"t\":\"ready\",\"v\":1}"
#define OUT	 "{\"t\":\"out\",\"data\":\"x\"}"
#define CALL(id) "{\"t\":\"call\",\"id\":" #id ",\"tool\":\"a.b\",\"args\":{}}"
#define DONE	 "{\"t\":\"done\",\"error\":null,\"result\":null}"

static struct cell_proto_state *running(void)
{
	struct cell_proto_state *st = cell_proto_state_new();

	assert_non_null(st);
	feed(st, READY, 0, NULL);
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_IDLE);
	assert_int_equal(cell_proto_state_cell_sent(st, NULL), 0);
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_RUNNING);
	return st;
}

static void test_state_happy_path(void **state)
{
	struct cell_proto_state *st = running();
	(void)state;

	feed(st, OUT, 0, NULL);
	feed(st, CALL(1), 0, NULL);
	feed(st, CALL(2), 0, NULL);
	feed(st, OUT, 0, NULL);
	feed(st, CALL(10), 0, NULL);
	feed(st, DONE, 0, NULL);
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_DONE);
	assert_int_equal(cell_proto_state_calls(st), 3);
	cell_proto_state_free(st);
}

/* A running state that saw call 4 and done, then was told its runner
 * waits for the next cell (a session's). */
static struct cell_proto_state *kept(void)
{
	struct cell_proto_state *st = running();

	feed(st, CALL(4), 0, NULL);
	feed(st, DONE, 0, NULL);
	assert_int_equal(cell_proto_state_again(st, NULL), 0);
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_IDLE);
	return st;
}

/* A session's runner: after done, the next cell (once the host said so),
 * its call ids still rising; nothing between the two. */
static void test_state_kept_runner(void **state)
{
	struct cell_proto_state *st = running();
	struct appl_err err = {0};
	(void)state;

	assert_int_equal(cell_proto_state_again(st, &err), -EINVAL); /* not done yet */
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_FAILED);
	cell_proto_state_free(st);
	st = kept();
	feed(st, OUT, -EINVAL, "before the cell was sent");
	cell_proto_state_free(st);
	st = kept();
	assert_int_equal(cell_proto_state_cell_sent(st, NULL), 0);
	feed(st, CALL(4), -EINVAL, "reused");
	cell_proto_state_free(st);
	st = kept();
	assert_int_equal(cell_proto_state_cell_sent(st, NULL), 0);
	feed(st, CALL(5), 0, NULL);
	feed(st, DONE, 0, NULL);
	assert_int_equal(cell_proto_state_calls(st), 2);
	cell_proto_state_free(st);
}

static void test_state_before_ready(void **state)
{
	const char *lines[] = {OUT, CALL(1), DONE};
	(void)state;

	for (size_t i = 0; i < 3; i++) {
		struct cell_proto_state *st = cell_proto_state_new();
		feed(st, lines[i], -EINVAL, "before ready");
		assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_FAILED);
		/* once failed, even a good line is refused */
		feed(st, READY, -EINVAL, "already failed");
		cell_proto_state_free(st);
	}
}

/* A runner that cannot serve says `fail` instead of ready, and only then:
 * its error is a bounded string; after ready (or a cell) it is a violation,
 * so no cell code can pass itself off as a failed boot. */
static void test_fail_message(void **state)
{
	struct cell_proto_state *st;
	struct cell_msg msg = {0};
	char big[APPL_RUNNER_FAIL_MAX + 64];
	int n;
	(void)state;

	parse_ok("{\"t\":\"fail\",\"error\":\"preload numpy: ModuleNotFoundError\"}", &msg);
	assert_int_equal(msg.type, CELL_MSG_FAIL);
	assert_string_equal(json_string_value(msg.u.fail.error),
			    "preload numpy: ModuleNotFoundError");
	cell_proto_msg_clear(&msg);
	parse_fails("{\"t\":\"fail\"}", -EINVAL, "");
	parse_fails("{\"t\":\"fail\",\"error\":null}", -EINVAL, "fail.error is null");
	parse_fails("{\"t\":\"fail\",\"error\":\"x\",\"v\":1}", -EINVAL, "");
	n = snprintf(big, sizeof(big), "{\"t\":\"fail\",\"error\":\"%0*d\"}",
		     (int)APPL_RUNNER_FAIL_MAX + 1, 0);
	assert_true(n > 0 && (size_t)n < sizeof(big));
	parse_fails(big, -EINVAL, "more than");

	st = cell_proto_state_new();
	feed(st, "{\"t\":\"fail\",\"error\":\"x\"}", 0, NULL);
	assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_DONE);
	feed(st, READY, -EINVAL, "ready after done");
	cell_proto_state_free(st);
	st = cell_proto_state_new();
	feed(st, READY, 0, NULL);
	feed(st, "{\"t\":\"fail\",\"error\":\"x\"}", -EINVAL, "fail after ready");
	cell_proto_state_free(st);
	st = running();
	feed(st, "{\"t\":\"fail\",\"error\":\"x\"}", -EINVAL, "fail after ready");
	cell_proto_state_free(st);
}

static void test_state_second_ready(void **state)
{
	struct cell_proto_state *st = cell_proto_state_new();
	(void)state;

	feed(st, READY, 0, NULL);
	feed(st, READY, -EINVAL, "a second ready");
	cell_proto_state_free(st);
	st = running();
	feed(st, OUT, 0, NULL);
	feed(st, READY, -EINVAL, "a second ready");
	cell_proto_state_free(st);
}

static void test_state_before_cell(void **state)
{
	struct cell_proto_state *st = cell_proto_state_new();
	struct appl_err err = {0};
	(void)state;

	/* nothing runs before the cell, so nothing may speak */
	feed(st, READY, 0, NULL);
	feed(st, OUT, -EINVAL, "before the cell was sent");
	cell_proto_state_free(st);
	st = cell_proto_state_new();
	assert_int_equal(cell_proto_state_cell_sent(st, &err), -EINVAL);
	cell_proto_state_free(st);
	st = running();
	assert_int_equal(cell_proto_state_cell_sent(st, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not idle"));
	cell_proto_state_free(st);
}

static void test_state_call_id_reuse(void **state)
{
	struct cell_proto_state *st = running();
	(void)state;

	feed(st, CALL(0), 0, NULL);
	feed(st, CALL(1), 0, NULL);
	feed(st, CALL(1), -EINVAL, "call id 1 reused");
	cell_proto_state_free(st);
	st = running();
	feed(st, CALL(5), 0, NULL);
	feed(st, CALL(4), -EINVAL, "reused or out of order");
	cell_proto_state_free(st);
	/* reads and calls share one count of ids */
	st = running();
	feed(st, CALL(1), 0, NULL);
	feed(st, "{\"t\":\"read\",\"id\":2,\"server\":\"s\",\"uri\":\"x\"}", 0, NULL);
	feed(st, "{\"t\":\"read\",\"id\":2,\"server\":\"s\",\"uri\":\"x\"}", -EINVAL,
	     "call id 2 reused");
	cell_proto_state_free(st);
}

static void test_state_after_done(void **state)
{
	const char *lines[] = {OUT, CALL(9), DONE, READY};
	const char *why[] = {"out after done", "call after done", "a second done",
			     "ready after done"};
	(void)state;

	for (size_t i = 0; i < 4; i++) {
		struct cell_proto_state *st = running();
		feed(st, DONE, 0, NULL);
		feed(st, lines[i], -EINVAL, why[i]);
		assert_int_equal(cell_proto_state_phase(st), CELL_PHASE_FAILED);
		cell_proto_state_free(st);
	}
}

#define FILE(name, data, more)                                                                     \
	"{\"t\":\"file\",\"name\":\"" name "\",\"data\":\"" data "\",\"more\":" #more "}"
#define SKIP(name, why) "{\"t\":\"skip\",\"name\":\"" name "\",\"why\":\"" why "\"}"

static void test_state_files(void **state)
{
	struct cell_proto_state *st = cell_proto_state_new();
	char line[128];
	(void)state;

	/* only while a cell runs */
	feed(st, FILE("a", "", false), -EINVAL, "file before ready");
	cell_proto_state_free(st);
	st = cell_proto_state_new();
	feed(st, READY, 0, NULL);
	feed(st, SKIP("a", "fifo"), -EINVAL, "file before the cell was sent");
	cell_proto_state_free(st);
	st = running();
	feed(st, DONE, 0, NULL);
	feed(st, FILE("a", "", false), -EINVAL, "file after done");
	cell_proto_state_free(st);

	/* a file's chunks one after the other; output and calls may come
	 * between them (a thread of the code's may still print) */
	st = running();
	feed(st, FILE("a", "QQ==", true), 0, NULL);
	feed(st, OUT, 0, NULL);
	feed(st, CALL(1), 0, NULL);
	feed(st, FILE("a", "QQ==", false), 0, NULL);
	feed(st, SKIP("d", "directory"), 0, NULL);
	feed(st, FILE("a", "", false), 0, NULL); /* the same name again: another file */
	feed(st, DONE, 0, NULL);
	cell_proto_state_free(st);

	/* nothing else of the files, nor done, while one is open */
	st = running();
	feed(st, FILE("a", "QQ==", true), 0, NULL);
	feed(st, SKIP("b", "fifo"), -EINVAL, "while another file's chunks said more follow");
	cell_proto_state_free(st);
	st = running();
	feed(st, FILE("a", "QQ==", true), 0, NULL);
	feed(st, FILE("b", "QQ==", false), -EINVAL, "while another file's");
	cell_proto_state_free(st);
	st = running();
	feed(st, FILE("a", "QQ==", true), 0, NULL);
	feed(st, DONE, -EINVAL, "done while a file's chunks said more follow");
	cell_proto_state_free(st);

	/* at most one more entry than the runner looks at; chunks of one
	 * file count once */
	st = running();
	feed(st, FILE("big", "QQ==", true), 0, NULL);
	feed(st, FILE("big", "QQ==", true), 0, NULL);
	feed(st, FILE("big", "QQ==", false), 0, NULL);
	for (unsigned i = 1; i <= APPL_RUNNER_FILE_ENTRIES_MAX; i++) {
		snprintf(line, sizeof(line), SKIP("f%u", "max_count"), i);
		feed(st, line, 0, NULL);
	}
	feed(st, SKIP("z", "max_entries"), -EINVAL, "more file entries than /out may report");
	cell_proto_state_free(st);
}

static void test_state_refuses_unparsed(void **state)
{
	struct cell_proto_state *st = running();
	struct cell_msg msg = {0};
	(void)state;

	assert_int_equal(cell_proto_state_feed(st, &msg, NULL), -EINVAL);
	cell_proto_state_free(st);
}

/* ---- encoders -------------------------------------------------------------- */

static json_t *line_json(const char *line, size_t len)
{
	json_error_t jerr;
	json_t *v;

	/* one line: the only newline is the last byte */
	assert_true(len > 1);
	assert_int_equal(line[len - 1], '\n');
	assert_null(memchr(line, '\n', len - 1));
	assert_int_equal(line[len], '\0');
	v = json_loadb(line, len - 1, JSON_REJECT_DUPLICATES, &jerr);
	assert_non_null(v);
	return v;
}

static void test_tool_new(void **state)
{
	struct appl_err err = {0};
	json_t *t;
	(void)state;

	t = cell_proto_tool_new("toy.add", "toy", "add", NULL, &err);
	assert_non_null(t);
	assert_int_equal(json_object_size(t), 3);
	assert_string_equal(json_string_value(json_object_get(t, "fn")), "add");
	json_decref(t);
	t = cell_proto_tool_new("my-server.get-thing", "my_server", "get_thing", "get_thing(id)",
				&err);
	assert_non_null(t);
	assert_string_equal(json_string_value(json_object_get(t, "doc")), "get_thing(id)");
	json_decref(t);
}

static void tool_refused(const char *tool, const char *ns, const char *fn, const char *doc,
			 const char *needle)
{
	struct appl_err err = {0};

	assert_null(cell_proto_tool_new(tool, ns, fn, doc, &err));
	assert_int_equal(err.code, -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("%s/%s/%s: \"%s\" lacks \"%s\"", tool, ns, fn, err.msg, needle);
}

static void test_tool_new_refusals(void **state)
{
	char big[APPL_RUNNER_DOC_MAX + 2];
	(void)state;

	tool_refused("", "a", "b", NULL, "tool name is 0 bytes");
	tool_refused(NULL, "a", "b", NULL, "tool name is 0 bytes");
	tool_refused("a.b", "class", "b", NULL, "a Python keyword");
	tool_refused("a.b", "a", "yield", NULL, "a Python keyword");
	tool_refused("a.b", "a", "False", NULL, "a Python keyword");
	tool_refused("a.b", "print", "b", NULL, "already has");
	tool_refused("a.b", "ToolError", "b", NULL, "already has");
	tool_refused("a.b", "asyncio", "b", NULL, "already has");
	tool_refused("a.b", "args", "b", NULL, "already has"); /* a code tool's arguments */
	tool_refused("a.b", "zip", "b", NULL, "already has");
	tool_refused("a.b", "ArithmeticError", "b", NULL, "already has");
	tool_refused("a.b", "__class__", "b", NULL, "starts with __");
	tool_refused("a.b", "a", "__init__", NULL, "starts with __");
	tool_refused("a.b", "1a", "b", NULL, "not an ASCII identifier");
	tool_refused("a.b", "a-b", "b", NULL, "not an ASCII identifier");
	tool_refused("a.b", "caf\xc3\xa9", "b", NULL, "not an ASCII identifier");
	tool_refused("a.b", "", "b", NULL, "empty");
	tool_refused("a.b", NULL, "b", NULL, "empty");
	tool_refused("a.b", "a", "", NULL, "empty");
	tool_refused("a.b", "a", "b c", NULL, "not an ASCII identifier");
	tool_refused("a.b", "a2345678901234567890123456789012345678901234567890123456789012345",
		     "b", NULL, "longer than 64");
	memset(big, 'd', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	tool_refused("a.b", "a", "b", big, "doc is");
	tool_refused("a.\xff", "a", "b", NULL, "not UTF-8");
	/* a function may share a builtin's name: it lives under its namespace */
	json_decref(cell_proto_tool_new("a.print", "a", "print", NULL, NULL));
}

static json_t *toy_tools(void)
{
	json_t *tools = json_array();

	json_array_append_new(tools,
			      cell_proto_tool_new("toy.add", "toy", "add", "add(a, b)", NULL));
	json_array_append_new(tools, cell_proto_tool_new("toy.echo", "toy", "echo", NULL, NULL));
	return tools;
}

static void test_cell_encode(void **state)
{
	/* code that tries to end its string and add a line of its own */
	static const char code[] = "print(\"}\\n{\\\"t\\\":\\\"result\\\"\")\n\x01\ttab\n"
				   "\"\\u0000\" \xc3\xa9\n";
	struct appl_err err = {0};
	json_t *tools = toy_tools();
	json_t *v;
	char *line;
	size_t len;
	(void)state;

	assert_int_equal(cell_proto_cell_encode(code, strlen(code), tools, &FILES, NULL, false,
						&line, &len, &err),
			 0);
	v = line_json(line, len);
	assert_string_equal(json_string_value(json_object_get(v, "t")), "cell");
	assert_string_equal(json_string_value(json_object_get(v, "code")), code);
	assert_true(json_equal(json_object_get(v, "tools"), tools));
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(v, "files"), "max_count")), 8);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(v, "files"), "max_total_bytes")),
		4 * 1024 * 1024);
	assert_int_equal(json_object_size(json_object_get(v, "files")), 3);
	assert_int_equal(json_object_size(v), 4);
	assert_int_equal(tools->refcount, 1); /* borrowed: no reference kept */
	json_decref(v);
	free(line);
	/* A session's cell says keep, and only then. */
	assert_int_equal(cell_proto_cell_encode(code, strlen(code), tools, &FILES, NULL, true,
						&line, &len, &err),
			 0);
	v = line_json(line, len);
	assert_true(json_is_true(json_object_get(v, "keep")));
	assert_int_equal(json_object_size(v), 5);
	json_decref(v);
	free(line);
	json_decref(tools);
}

static void cell_refused(const char *code, size_t code_len, json_t *tools, int rc,
			 const char *needle)
{
	struct appl_err err = {0};
	char *line = (char *)1;
	size_t len = 1;

	assert_int_equal(cell_proto_cell_encode(code, code_len, tools, &FILES, NULL, false, &line,
						&len, &err),
			 rc);
	assert_null(line);
	assert_int_equal(len, 0);
	if (!strstr(err.msg, needle))
		fail_msg("\"%s\" lacks \"%s\"", err.msg, needle);
}

static void test_cell_encode_refusals(void **state)
{
	json_t *tools = toy_tools();
	json_t *bad;
	char *big = malloc(APPL_CELL_CODE_MAX + 1);
	(void)state;

	assert_non_null(big);
	memset(big, '#', APPL_CELL_CODE_MAX + 1);
	cell_refused(big, APPL_CELL_CODE_MAX + 1, tools, -EFBIG, "code of");
	free(big);
	cell_refused("a\0b", 3, tools, -EINVAL, "NUL");
	cell_refused("\xff", 1, tools, -EINVAL, "not UTF-8");
	bad = json_object();
	cell_refused("1", 1, bad, -EINVAL, "not an array");
	json_decref(bad);

	bad = json_deep_copy(tools);
	json_array_append_new(bad, cell_proto_tool_new("toy.add2", "toy", "add", NULL, NULL));
	cell_refused("1", 1, bad, -EINVAL, "tools[2]: toy.add given twice");
	json_decref(bad);

	bad = json_deep_copy(tools);
	json_object_set_new(json_array_get(bad, 1), "schema", json_object());
	cell_refused("1", 1, bad, -EINVAL, "tools[1]: tools[].schema: unknown key");
	json_decref(bad);

	bad = json_deep_copy(tools);
	json_object_set_new(json_array_get(bad, 0), "ns", json_string("open"));
	cell_refused("1", 1, bad, -EINVAL, "tools[0]: tool ns \"open\"");
	json_decref(bad);

	bad = json_deep_copy(tools);
	json_object_set_new(json_array_get(bad, 0), "fn", json_stringn("a\0b", 3));
	cell_refused("1", 1, bad, -EINVAL, "NUL");
	json_decref(bad);

	bad = json_deep_copy(tools);
	json_object_del(json_array_get(bad, 0), "tool");
	cell_refused("1", 1, bad, -EINVAL, "needs strings");
	json_decref(bad);

	bad = json_array();
	json_array_append_new(bad, json_string("toy.add"));
	cell_refused("1", 1, bad, -EINVAL, "needs strings");
	json_decref(bad);

	/* a server with no tools: a namespace of its own, or nothing */
	bad = json_deep_copy(tools);
	json_array_append_new(bad, json_pack("{s:s, s:s}", "server", "toy", "ns", "toy"));
	cell_refused("1", 1, bad, -EINVAL, "tools[2]: toy.* given twice");
	json_decref(bad);
	bad = json_pack("[{s:s, s:s}]", "server", "x", "ns", "def");
	cell_refused("1", 1, bad, -EINVAL, "tools[0]");
	json_decref(bad);
	bad = json_pack("[{s:s, s:s, s:s}]", "server", "x", "ns", "x", "fn", "y");
	cell_refused("1", 1, bad, -EINVAL, "unknown key");
	json_decref(bad);
	bad = json_pack("[{s:s, s:i}]", "server", "x", "ns", 1);
	cell_refused("1", 1, bad, -EINVAL, "needs strings server and ns");
	json_decref(bad);
	json_decref(tools);
}

static void test_cell_encode_files_refused(void **state)
{
	const struct cell_files_limits bad[] = {
		{.max_count = APPL_FILES_MAX_COUNT_CEIL + 1, .max_bytes = 1, .max_total = 1},
		{.max_count = 1, .max_bytes = 0, .max_total = 1},
		{.max_count = 1, .max_bytes = 2, .max_total = 1},
		{.max_count = 1, .max_bytes = 1, .max_total = APPL_FILES_MAX_TOTAL_BYTES_CEIL + 1},
	};
	struct appl_err err = {0};
	json_t *tools = json_array();
	char *line = NULL;
	size_t len = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(cell_proto_cell_encode("1", 1, tools, &bad[i], NULL, false, &line,
							&len, &err),
				 -EINVAL);
		assert_non_null(strstr(err.msg, "files limits out of range"));
		assert_null(line);
	}
	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, NULL, NULL, false, &line, &len, &err),
		-EINVAL);
	json_decref(tools);
}

static void test_cell_encode_server_entries(void **state)
{
	json_t *tools = json_pack("[{s:s, s:s}]", "server", "dead", "ns", "dead");
	struct appl_err err = {0};
	char *line = NULL;
	size_t len = 0;
	(void)state;

	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, NULL, false, &line, &len, &err), 0);
	assert_non_null(strstr(line, "{\"server\":\"dead\",\"ns\":\"dead\"}"));
	free(line);
	json_decref(tools);
}

/* A code tool's arguments: an object, as the line's `args`, and only when
 * given. */
static void test_cell_encode_args(void **state)
{
	struct appl_err err = {0};
	json_t *tools = toy_tools();
	json_t *args = json_pack("{s:i, s:[f, s, n, b], s:{s:s}}", "a", 1, "b", 2.5, "\"}\n", 1,
				 "c", "d\xc3\xa9", "e");
	json_t *v;
	char *line;
	size_t len;
	(void)state;

	assert_int_equal(cell_proto_cell_encode("args['a']", 9, tools, &FILES, args, false, &line,
						&len, &err),
			 0);
	v = line_json(line, len);
	assert_true(json_equal(json_object_get(v, "args"), args));
	assert_int_equal(json_object_size(v), 5);
	assert_int_equal(args->refcount, 1); /* borrowed: no reference kept */
	json_decref(v);
	free(line);
	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, args, true, &line, &len, &err), 0);
	v = line_json(line, len);
	assert_true(json_equal(json_object_get(v, "args"), args));
	assert_true(json_is_true(json_object_get(v, "keep")));
	assert_int_equal(json_object_size(v), 6);
	json_decref(v);
	free(line);
	/* none given: no member at all, not null */
	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, NULL, false, &line, &len, &err), 0);
	assert_null(strstr(line, "\"args\""));
	free(line);
	/* an empty object is still args */
	json_decref(args);
	args = json_object();
	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, args, false, &line, &len, &err), 0);
	assert_non_null(strstr(line, ",\"args\":{}"));
	free(line);
	json_decref(args);
	json_decref(tools);
}

static void args_refused(const json_t *args, int rc, const char *needle)
{
	struct appl_err err = {0};
	json_t *tools = json_array();
	char *line = (char *)1;
	size_t len = 1;

	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, args, false, &line, &len, &err), rc);
	assert_null(line);
	assert_int_equal(len, 0);
	if (!strstr(err.msg, needle))
		fail_msg("\"%s\" lacks \"%s\"", err.msg, needle);
	json_decref(tools);
}

/* Nested objects, levels deep: {"a":{"a":...{}}}. */
static json_t *nested(unsigned levels)
{
	json_t *v = json_object();

	for (unsigned i = 1; i < levels; i++)
		v = json_pack("{s:o}", "a", v);
	return v;
}

static void test_cell_encode_args_refused(void **state)
{
	json_t *bad[] = {json_array(), json_string("a"), json_integer(1), json_null(), json_true()};
	size_t n = APPL_RUNNER_HOST_LINE_MAX;
	char *big = malloc(n);
	json_t *args, *v;
	struct appl_err err = {0};
	json_t *tools = json_array();
	char *line;
	size_t len;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		args_refused(bad[i], -EINVAL, "args is not an object");
		json_decref(bad[i]);
	}
	/* as deep as a result's value may be, and no deeper: the line is one
	 * level more, which both parsers must take */
	args = nested(APPL_JSON_DEPTH_MAX - 1);
	assert_int_equal(
		cell_proto_cell_encode("1", 1, tools, &FILES, args, false, &line, &len, &err), 0);
	v = line_json(line, len);
	assert_true(json_equal(json_object_get(v, "args"), args));
	json_decref(v);
	free(line);
	json_decref(args);
	args = nested(APPL_JSON_DEPTH_MAX);
	args_refused(args, -E2BIG, "args nested deeper");
	json_decref(args);
	/* the line cap holds with args too: refused, never cut */
	assert_non_null(big);
	memset(big, 'x', n);
	args = json_pack("{s:s%}", "a", big, n - 64);
	free(big);
	args_refused(args, -EFBIG, "more than");
	json_decref(args);
	json_decref(tools);
}

static void test_result_encode(void **state)
{
	struct appl_err err = {0};
	json_t *value = json_pack("{s:[i,s,n], s:f}", "a", 1, "x\n\"}", "b", 2.5);
	json_t *v, *deep;
	char *line;
	size_t len;
	(void)state;

	assert_int_equal(cell_proto_result_encode(42, value, &line, &len, &err), 0);
	v = line_json(line, len);
	assert_int_equal(json_object_size(v), 3);
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 42);
	assert_true(json_equal(json_object_get(v, "ok"), value));
	json_decref(v);
	free(line);
	json_decref(value);

	/* 63 levels fit inside the envelope under the depth cap, 64 do not */
	deep = json_array();
	for (int i = 1; i < 63; i++) {
		json_t *outer = json_array();
		json_array_append_new(outer, deep);
		deep = outer;
	}
	assert_int_equal(cell_proto_result_encode(1, deep, &line, &len, &err), 0);
	free(line);
	value = json_array();
	json_array_append_new(value, deep);
	assert_int_equal(cell_proto_result_encode(1, value, &line, &len, &err), -E2BIG);
	assert_null(line);
	json_decref(value);

	assert_int_equal(cell_proto_result_encode(-1, json_null(), &line, &len, &err), -EINVAL);
	assert_int_equal(cell_proto_result_encode(1, NULL, &line, &len, &err), -EINVAL);
}

static void test_host_line_cap(void **state)
{
	struct appl_err err = {0};
	size_t n = APPL_RUNNER_HOST_LINE_MAX;
	char *big = malloc(n);
	json_t *value;
	char *line;
	size_t len;
	(void)state;

	assert_non_null(big);
	memset(big, 'x', n);
	value = json_stringn(big, n);
	free(big);
	assert_int_equal(cell_proto_result_encode(1, value, &line, &len, &err), -EFBIG);
	assert_null(line);
	json_decref(value);
}

static void test_error_encode(void **state)
{
	struct appl_err err = {0};
	char msg[1200];
	json_t *v;
	char *line;
	size_t len, n;
	(void)state;

	assert_int_equal(cell_proto_error_encode(7, CELL_ERR_REFUSED, "not \"allowed\"\n", 14,
						 &line, &len, &err),
			 0);
	v = line_json(line, len);
	assert_string_equal(json_string_value(json_object_get(v, "error")), "not \"allowed\"\n");
	assert_int_equal(json_integer_value(json_object_get(v, "id")), 7);
	assert_string_equal(json_string_value(json_object_get(v, "kind")), "refused");
	assert_int_equal(json_object_size(v), 4);
	json_decref(v);
	free(line);

	/* two-byte characters from an odd offset: byte 500 is mid-character, so
	 * the cut backs off to 499 bytes rather than split it */
	msg[0] = 'x';
	for (n = 1; n + 1 < sizeof(msg); n += 2)
		memcpy(msg + n, "\xc3\xa9", 2);
	msg[sizeof(msg) - 1] = 'z';
	assert_int_equal(
		cell_proto_error_encode(8, CELL_ERR_REFUSED, msg, sizeof(msg), &line, &len, &err),
		0);
	v = line_json(line, len);
	assert_int_equal(json_string_length(json_object_get(v, "error")), APPL_TOOL_ERROR_MAX - 1);
	json_decref(v);
	free(line);

	assert_int_equal(
		cell_proto_error_encode(8, CELL_ERR_DECLINED, "a\0b", 3, &line, &len, &err), 0);
	v = line_json(line, len);
	assert_string_equal(json_string_value(json_object_get(v, "error")), "a?b");
	assert_string_equal(json_string_value(json_object_get(v, "kind")), "declined");
	json_decref(v);
	free(line);

	assert_int_equal(cell_proto_error_encode(8, CELL_ERR_REFUSED, "\xff", 1, &line, &len, &err),
			 -EINVAL);
	assert_int_equal(cell_proto_error_encode(-2, CELL_ERR_REFUSED, "x", 1, &line, &len, &err),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_messages),
		cmocka_unit_test(test_file_messages),
		cmocka_unit_test(test_file_refusals),
		cmocka_unit_test(test_references_outlive_the_message),
		cmocka_unit_test(test_line_cap),
		cmocka_unit_test(test_not_json),
		cmocka_unit_test(test_nul_bytes),
		cmocka_unit_test(test_not_an_object),
		cmocka_unit_test(test_type_field),
		cmocka_unit_test(test_missing_fields),
		cmocka_unit_test(test_extra_fields),
		cmocka_unit_test(test_wrong_types),
		cmocka_unit_test(test_depth_bomb),
		cmocka_unit_test(test_done_forged_values),
		cmocka_unit_test(test_duplicate_keys),
		cmocka_unit_test(test_state_happy_path),
		cmocka_unit_test(test_state_kept_runner),
		cmocka_unit_test(test_state_before_ready),
		cmocka_unit_test(test_state_second_ready),
		cmocka_unit_test(test_fail_message),
		cmocka_unit_test(test_state_before_cell),
		cmocka_unit_test(test_state_call_id_reuse),
		cmocka_unit_test(test_state_after_done),
		cmocka_unit_test(test_state_files),
		cmocka_unit_test(test_state_refuses_unparsed),
		cmocka_unit_test(test_tool_new),
		cmocka_unit_test(test_tool_new_refusals),
		cmocka_unit_test(test_cell_encode),
		cmocka_unit_test(test_cell_encode_refusals),
		cmocka_unit_test(test_cell_encode_files_refused),
		cmocka_unit_test(test_cell_encode_server_entries),
		cmocka_unit_test(test_cell_encode_args),
		cmocka_unit_test(test_cell_encode_args_refused),
		cmocka_unit_test(test_result_encode),
		cmocka_unit_test(test_host_line_cap),
		cmocka_unit_test(test_error_encode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
