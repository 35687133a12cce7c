/* proto.c: runner protocol v1, host side (see proto.h). */
#include "cell/proto.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

/* ---- parsing one runner line ---------------------------------------------- */

typedef int (*msg_parse_fn)(json_t *root, struct cell_msg *msg, struct appl_err *err);

struct msg_kind {
	const char *name;
	enum cell_msg_type type;
	const char *const *fields; /* exactly these, `t` included */
	msg_parse_fn parse;
};

static const char *const ready_fields[] = {"t", "v", NULL};
static const char *const out_fields[] = {"t", "data", NULL};
static const char *const call_fields[] = {"t", "id", "tool", "args", NULL};
static const char *const read_fields[] = {"t", "id", "server", "uri", NULL};
static const char *const done_fields[] = {"t", "error", "result", NULL};
static const char *const file_fields[] = {"t", "name", "data", "more", NULL};
static const char *const skip_fields[] = {"t", "name", "why", NULL};
static const char *const fail_fields[] = {"t", "error", NULL};

static int parse_ready(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *v = json_object_get(root, "v");

	if (!json_is_integer(v))
		return appl_err_set(err, -EINVAL, "ready.v is %s, not an integer",
				    appl_json_type_name(v));
	/* A runner from another image speaking another protocol must not be
	 * half-understood. */
	if (json_integer_value(v) != CELL_PROTO_VERSION)
		return appl_err_set(err, -EINVAL, "ready.v is %lld, this host speaks version %d",
				    (long long)json_integer_value(v), CELL_PROTO_VERSION);
	msg->u.ready.version = CELL_PROTO_VERSION;
	return 0;
}

static int parse_out(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *data = json_object_get(root, "data");

	if (!json_is_string(data))
		return appl_err_set(err, -EINVAL, "out.data is %s, not a string",
				    appl_json_type_name(data));
	msg->u.out.data = json_incref(data);
	return 0;
}

/* A call's (or read's) id: an integer >= 0 (the order is checked later). */
static int id_take(const json_t *id, const char *what, json_int_t *out, struct appl_err *err)
{
	if (!json_is_integer(id) || json_integer_value(id) < 0)
		return appl_err_set(err, -EINVAL, "%s.id is not a non-negative integer", what);
	*out = json_integer_value(id);
	return 0;
}

/* A string of 1 to max bytes, named field in the message. */
static int text_take(const json_t *v, const char *field, size_t max, struct appl_err *err)
{
	size_t n;

	if (!json_is_string(v))
		return appl_err_set(err, -EINVAL, "%s is %s, not a string", field,
				    appl_json_type_name(v));
	n = json_string_length(v);
	if (n == 0 || n > max)
		return appl_err_set(err, -EINVAL, "%s is %zu bytes, not 1 to %zu", field, n, max);
	return 0;
}

/* Quote at most 32 bytes of untrusted text in a message as printable ASCII:
 * a cut through a UTF-8 sequence would make the message itself invalid
 * UTF-8, which a JSON log or reply could not carry. */
static const char *quote_ascii(char dst[static 33], const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && i < 32; i++)
		dst[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[i] = '\0';
	return dst;
}

static int parse_call(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *tool = json_object_get(root, "tool");
	json_t *args = json_object_get(root, "args");
	json_int_t id = 0;

	if (id_take(json_object_get(root, "id"), "call", &id, err) < 0 ||
	    text_take(tool, "call.tool", APPL_RUNNER_TOOL_NAME_MAX, err) < 0)
		return -EINVAL;
	/* Arguments are an object by MCP's rules; anything else is refused here
	 * rather than left for the bridge to guess at. */
	if (!json_is_object(args))
		return appl_err_set(err, -EINVAL, "call.args is %s, not an object",
				    appl_json_type_name(args));
	msg->u.call.id = id;
	msg->u.call.tool = json_incref(tool);
	msg->u.call.args = json_incref(args);
	return 0;
}

/* A resource read travels as a call: the same ids, order and answers; the
 * server name in tool, {"uri": uri} as its arguments, and read set. */
static int parse_read(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *server = json_object_get(root, "server");
	json_t *uri = json_object_get(root, "uri");
	json_int_t id = 0;

	if (id_take(json_object_get(root, "id"), "read", &id, err) < 0 ||
	    text_take(server, "read.server", APPL_RUNNER_TOOL_NAME_MAX, err) < 0 ||
	    text_take(uri, "read.uri", APPL_RUNNER_URI_MAX, err) < 0)
		return -EINVAL;
	msg->u.call.args = json_pack("{s:O}", "uri", uri);
	if (!msg->u.call.args)
		return appl_err_set(err, -ENOMEM, "out of memory");
	msg->u.call.id = id;
	msg->u.call.tool = json_incref(server);
	msg->u.call.read = true;
	return 0;
}

static int parse_done(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *error = json_object_get(root, "error");
	json_t *result = json_object_get(root, "result");

	if (!json_is_null(error) && !json_is_string(error))
		return appl_err_set(err, -EINVAL, "done.error is %s, not null or a string",
				    appl_json_type_name(error));
	if (json_is_string(error) && json_string_length(error) > APPL_RUNNER_ERROR_MAX)
		return appl_err_set(err, -EINVAL, "done.error is %zu bytes, more than %u",
				    json_string_length(error), APPL_RUNNER_ERROR_MAX);
	/* The runner sends a result only when the code did not raise, and
	 * never one deeper than its own cap for values: anything else is a
	 * forged line, and the client must not get both or a value the
	 * runner itself could not have made. */
	if (json_is_string(error) && !json_is_null(result))
		return appl_err_set(err, -EINVAL, "done carries both an error and a result");
	if (!appl_json_depth_within(result, APPL_RUNNER_VALUE_DEPTH_MAX))
		return appl_err_set(err, -EINVAL, "done.result nests deeper than %u levels",
				    APPL_RUNNER_VALUE_DEPTH_MAX);
	msg->u.done.error = json_is_string(error) ? json_incref(error) : NULL;
	msg->u.done.result = json_incref(result);
	return 0;
}

static int parse_fail(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *error = json_object_get(root, "error");

	if (!json_is_string(error))
		return appl_err_set(err, -EINVAL, "fail.error is %s, not a string",
				    appl_json_type_name(error));
	if (json_string_length(error) > APPL_RUNNER_FAIL_MAX)
		return appl_err_set(err, -EINVAL, "fail.error is %zu bytes, more than %u",
				    json_string_length(error), APPL_RUNNER_FAIL_MAX);
	msg->u.fail.error = json_incref(error);
	return 0;
}

/* ---- files out of /out ---------------------------------------------------- */

static const char *const why_names[CELL_FILE_WHY_N] = {
	[CELL_FILE_KEPT] = NULL,
	[CELL_FILE_SYMLINK] = "symlink",
	[CELL_FILE_DIRECTORY] = "directory",
	[CELL_FILE_DEVICE] = "device",
	[CELL_FILE_FIFO] = "fifo",
	[CELL_FILE_SOCKET] = "socket",
	[CELL_FILE_OTHER] = "other",
	[CELL_FILE_UNREADABLE] = "unreadable",
	[CELL_FILE_MAX_COUNT] = "max_count",
	[CELL_FILE_MAX_BYTES] = "max_bytes",
	[CELL_FILE_MAX_TOTAL] = "max_total_bytes",
	[CELL_FILE_MAX_ENTRIES] = "max_entries",
};

const char *cell_file_why_name(enum cell_file_why why)
{
	return (unsigned)why < CELL_FILE_WHY_N ? why_names[why] : NULL;
}

/* Base64 of a whole chunk, with its padding: 4 characters per 3 bytes. */
#define CHUNK_B64_MAX (4 * ((APPL_RUNNER_FILE_CHUNK_MAX + 2) / 3))

/* Strict base64 (the standard alphabet, padded, nothing else): a chunk
 * that decodes loosely could mean other bytes to another reader. */
static int chunk_decode(const json_t *data, struct cell_msg *msg, struct appl_err *err)
{
	const char *b64 = json_string_value(data), *end = NULL;
	size_t n = json_string_length(data), len = 0;

	if (n > CHUNK_B64_MAX)
		return appl_err_set(err, -EINVAL, "file.data is %zu characters, more than %u", n,
				    CHUNK_B64_MAX);
	if (n == 0)
		return 0;
	msg->u.file.data = malloc(APPL_RUNNER_FILE_CHUNK_MAX);
	if (!msg->u.file.data)
		return appl_err_set(err, -ENOMEM, "out of memory");
	if (sodium_base642bin(msg->u.file.data, APPL_RUNNER_FILE_CHUNK_MAX, b64, n, NULL, &len,
			      &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    end != b64 + n) {
		free(msg->u.file.data);
		msg->u.file.data = NULL;
		return appl_err_set(err, -EINVAL, "file.data is not base64");
	}
	msg->u.file.len = len;
	return 0;
}

static int parse_file(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *name = json_object_get(root, "name");
	json_t *data = json_object_get(root, "data");
	json_t *more = json_object_get(root, "more");
	int rc;

	if (text_take(name, "file.name", APPL_RUNNER_FILE_NAME_MAX, err) < 0)
		return -EINVAL;
	if (!json_is_string(data))
		return appl_err_set(err, -EINVAL, "file.data is %s, not a string",
				    appl_json_type_name(data));
	if (!json_is_boolean(more))
		return appl_err_set(err, -EINVAL, "file.more is %s, not true or false",
				    appl_json_type_name(more));
	rc = chunk_decode(data, msg, err);
	if (rc < 0)
		return rc;
	msg->u.file.more = json_is_true(more);
	msg->u.file.why = CELL_FILE_KEPT;
	msg->u.file.name = json_incref(name);
	return 0;
}

static int parse_skip(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	json_t *name = json_object_get(root, "name");
	json_t *why = json_object_get(root, "why");
	char quoted[33];

	if (text_take(name, "skip.name", APPL_RUNNER_FILE_NAME_MAX, err) < 0)
		return -EINVAL;
	if (!json_is_string(why))
		return appl_err_set(err, -EINVAL, "skip.why is %s, not a string",
				    appl_json_type_name(why));
	for (int w = CELL_FILE_KEPT + 1; w < CELL_FILE_WHY_N; w++)
		if (strcmp(why_names[w], json_string_value(why)) == 0) {
			msg->u.file.why = (enum cell_file_why)w;
			msg->u.file.name = json_incref(name);
			return 0;
		}
	return appl_err_set(err, -EINVAL, "skip.why \"%s\" is not a reason",
			    quote_ascii(quoted, json_string_value(why), json_string_length(why)));
}

static const struct msg_kind msg_kinds[] = {
	{"ready", CELL_MSG_READY, ready_fields, parse_ready},
	{"out", CELL_MSG_OUT, out_fields, parse_out},
	{"call", CELL_MSG_CALL, call_fields, parse_call},
	{"read", CELL_MSG_CALL, read_fields, parse_read},
	{"done", CELL_MSG_DONE, done_fields, parse_done},
	{"file", CELL_MSG_FILE, file_fields, parse_file},
	{"skip", CELL_MSG_FILE, skip_fields, parse_skip},
	{"fail", CELL_MSG_FAIL, fail_fields, parse_fail},
};

static const struct msg_kind *msg_kind_find(const json_t *t)
{
	const char *s = json_string_value(t);
	size_t n = json_string_length(t);

	for (size_t i = 0; i < sizeof(msg_kinds) / sizeof(msg_kinds[0]); i++)
		if (strlen(msg_kinds[i].name) == n && memcmp(msg_kinds[i].name, s, n) == 0)
			return &msg_kinds[i];
	return NULL;
}

/* Exactly the listed fields: a missing one is refused by name, and so is an
 * extra one, which could smuggle a second meaning past a reader that only
 * looks at the fields it knows. */
static int fields_check(const json_t *root, const struct msg_kind *kind, struct appl_err *err)
{
	size_t n;

	for (n = 0; kind->fields[n]; n++)
		if (!json_object_get(root, kind->fields[n]))
			return appl_err_set(err, -EINVAL, "%s: missing field \"%s\"", kind->name,
					    kind->fields[n]);
	if (json_object_size(root) == n)
		return 0;
	/* More keys than fields, all fields present: one is unknown; name it. */
	return appl_json_keys_check(root, kind->fields, kind->name, err);
}

static int root_parse(json_t *root, struct cell_msg *msg, struct appl_err *err)
{
	const struct msg_kind *kind;
	char quoted[33];
	json_t *t;
	int rc;

	if (!json_is_object(root))
		return appl_err_set(err, -EINVAL, "runner line is %s, not an object",
				    appl_json_type_name(root));
	t = json_object_get(root, "t");
	if (!t)
		return appl_err_set(err, -EINVAL, "runner line has no \"t\" field");
	if (!json_is_string(t))
		return appl_err_set(err, -EINVAL, "runner line \"t\" is %s, not a string",
				    appl_json_type_name(t));
	kind = msg_kind_find(t);
	if (!kind)
		return appl_err_set(
			err, -EINVAL, "unknown message type \"%s\"",
			quote_ascii(quoted, json_string_value(t), json_string_length(t)));
	rc = fields_check(root, kind, err);
	if (rc < 0)
		return rc;
	rc = kind->parse(root, msg, err);
	if (rc < 0)
		return rc;
	msg->type = kind->type;
	return 0;
}

int cell_proto_parse(const char *buf, size_t len, struct cell_msg *msg, struct appl_err *err)
{
	struct appl_err scratch;
	json_t *root;
	int rc;

	if (!err)
		err = &scratch; /* the code is read back from err below */
	memset(msg, 0, sizeof(*msg));
	/* The cap comes before anything else looks at the bytes: a runner that
	 * never sends a newline is stopped by the reader with the same cap. */
	if (len > APPL_RUNNER_LINE_MAX)
		return appl_err_set(err, -EFBIG,
				    "runner line of %zu bytes, more than the cap of %u", len,
				    APPL_RUNNER_LINE_MAX);
	/* A raw NUL is never valid JSON; refusing it by name keeps any C string
	 * handling downstream from seeing a truncated line. */
	if (memchr(buf, '\0', len))
		return appl_err_set(err, -EINVAL, "runner line holds a NUL byte");
	root = appl_json_load(buf, len, APPL_RUNNER_LINE_MAX, APPL_JSON_DEPTH_MAX, "runner line",
			      err);
	if (!root)
		return err->code;
	rc = root_parse(root, msg, err);
	json_decref(root);
	if (rc < 0)
		cell_proto_msg_clear(msg);
	return rc;
}

void cell_proto_msg_clear(struct cell_msg *msg)
{
	switch (msg->type) {
	case CELL_MSG_OUT:
		json_decref(msg->u.out.data);
		break;
	case CELL_MSG_CALL:
		json_decref(msg->u.call.tool);
		json_decref(msg->u.call.args);
		break;
	case CELL_MSG_DONE:
		json_decref(msg->u.done.error);
		json_decref(msg->u.done.result);
		break;
	case CELL_MSG_FILE:
		json_decref(msg->u.file.name);
		free(msg->u.file.data);
		break;
	case CELL_MSG_FAIL:
		json_decref(msg->u.fail.error);
		break;
	case CELL_MSG_NONE:
	case CELL_MSG_READY:
		break;
	}
	memset(msg, 0, sizeof(*msg));
}

/* ---- order of messages ----------------------------------------------------- */

struct cell_proto_state {
	enum cell_proto_phase phase;
	json_int_t last_id; /* -1 before the first call */
	unsigned long calls;
	/* The files: entries begun (files and skips), and the name of the
	 * file whose chunks say more follow (NULL: none is open). */
	unsigned files;
	json_t *file_open;
};

/* What each message does in each phase: the next phase, or why it is a
 * violation (why != NULL). */
struct transition {
	enum cell_proto_phase next;
	const char *why;
};

#define BAD(reason)                                                                                \
	{                                                                                          \
		CELL_PHASE_FAILED, reason                                                          \
	}
static const struct transition transitions[CELL_PHASE_FAILED][CELL_MSG_TYPES] = {
	[CELL_PHASE_BOOT] =
		{
			[CELL_MSG_READY] = {CELL_PHASE_IDLE, NULL},
			[CELL_MSG_OUT] = BAD("out before ready"),
			[CELL_MSG_CALL] = BAD("call before ready"),
			[CELL_MSG_DONE] = BAD("done before ready"),
			[CELL_MSG_FILE] = BAD("file before ready"),
			[CELL_MSG_FAIL] = {CELL_PHASE_DONE, NULL},
		},
	[CELL_PHASE_IDLE] =
		{
			[CELL_MSG_READY] = BAD("a second ready"),
			[CELL_MSG_OUT] = BAD("out before the cell was sent"),
			[CELL_MSG_CALL] = BAD("call before the cell was sent"),
			[CELL_MSG_DONE] = BAD("done before the cell was sent"),
			[CELL_MSG_FILE] = BAD("file before the cell was sent"),
			[CELL_MSG_FAIL] = BAD("fail after ready"),
		},
	[CELL_PHASE_RUNNING] =
		{
			[CELL_MSG_READY] = BAD("a second ready"),
			[CELL_MSG_OUT] = {CELL_PHASE_RUNNING, NULL},
			[CELL_MSG_CALL] = {CELL_PHASE_RUNNING, NULL},
			[CELL_MSG_DONE] = {CELL_PHASE_DONE, NULL},
			[CELL_MSG_FILE] = {CELL_PHASE_RUNNING, NULL},
			[CELL_MSG_FAIL] = BAD("fail after ready"),
		},
	[CELL_PHASE_DONE] =
		{
			[CELL_MSG_READY] = BAD("ready after done"),
			[CELL_MSG_OUT] = BAD("out after done"),
			[CELL_MSG_CALL] = BAD("call after done"),
			[CELL_MSG_DONE] = BAD("a second done"),
			[CELL_MSG_FILE] = BAD("file after done"),
			[CELL_MSG_FAIL] = BAD("fail after done"),
		},
};
#undef BAD

struct cell_proto_state *cell_proto_state_new(void)
{
	struct cell_proto_state *st = calloc(1, sizeof(*st));

	if (st) {
		st->phase = CELL_PHASE_BOOT;
		st->last_id = -1;
	}
	return st;
}

void cell_proto_state_free(struct cell_proto_state *st)
{
	if (st)
		json_decref(st->file_open);
	free(st);
}

static int state_fail(struct cell_proto_state *st, struct appl_err *err, const char *why)
{
	st->phase = CELL_PHASE_FAILED;
	return appl_err_set(err, -EINVAL, "%s", why);
}

int cell_proto_state_cell_sent(struct cell_proto_state *st, struct appl_err *err)
{
	if (st->phase != CELL_PHASE_IDLE)
		return state_fail(st, err, "cell sent to a runner that is not idle");
	st->phase = CELL_PHASE_RUNNING;
	return 0;
}

int cell_proto_state_again(struct cell_proto_state *st, struct appl_err *err)
{
	if (st->phase != CELL_PHASE_DONE)
		return state_fail(st, err, "a next cell before the last one was done");
	st->phase = CELL_PHASE_IDLE;
	return 0;
}

static int call_id_check(struct cell_proto_state *st, json_int_t id, struct appl_err *err)
{
	if (id <= st->last_id) {
		st->phase = CELL_PHASE_FAILED;
		return appl_err_set(err, -EINVAL,
				    "call id %lld reused or out of order "
				    "(the last was %lld)",
				    (long long)id, (long long)st->last_id);
	}
	st->last_id = id;
	st->calls++;
	return 0;
}

/* The file entries in order: a file's chunks one after the other, and
 * nothing else of the files (nor done) while one says more follow; a
 * bounded number of entries. */
static int files_check(struct cell_proto_state *st, const struct cell_msg *msg,
		       struct appl_err *err)
{
	const json_t *name = msg->type == CELL_MSG_FILE ? msg->u.file.name : NULL;
	bool chunk = name && msg->u.file.why == CELL_FILE_KEPT;
	json_t *next;

	if (st->file_open && (!chunk || !json_equal(name, st->file_open)))
		return state_fail(st, err,
				  msg->type == CELL_MSG_DONE
					  ? "done while a file's chunks said more follow"
					  : "a file entry while another file's chunks said more "
					    "follow");
	if (!name)
		return 0;
	if (!st->file_open && ++st->files > APPL_RUNNER_FILE_ENTRIES_MAX + 1)
		return state_fail(st, err, "more file entries than /out may report");
	next = chunk && msg->u.file.more ? json_incref((json_t *)name) : NULL;
	json_decref(st->file_open);
	st->file_open = next;
	return 0;
}

int cell_proto_state_feed(struct cell_proto_state *st, const struct cell_msg *msg,
			  struct appl_err *err)
{
	const struct transition *tr;

	if (st->phase == CELL_PHASE_FAILED)
		return appl_err_set(err, -EINVAL, "already failed");
	if (msg->type <= CELL_MSG_NONE || msg->type >= CELL_MSG_TYPES)
		return state_fail(st, err, "not a parsed message");
	tr = &transitions[st->phase][msg->type];
	if (tr->why)
		return state_fail(st, err, tr->why);
	if (msg->type == CELL_MSG_CALL && call_id_check(st, msg->u.call.id, err) < 0)
		return -EINVAL;
	if ((msg->type == CELL_MSG_FILE || msg->type == CELL_MSG_DONE) &&
	    files_check(st, msg, err) < 0)
		return -EINVAL;
	st->phase = tr->next;
	return 0;
}

enum cell_proto_phase cell_proto_state_phase(const struct cell_proto_state *st)
{
	return st->phase;
}

unsigned long cell_proto_state_calls(const struct cell_proto_state *st)
{
	return st->calls;
}
