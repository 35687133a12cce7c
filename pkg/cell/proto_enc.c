/* proto_enc.c: runner protocol v1, the host-to-runner lines (see proto.h).
 *
 * Every line is built as a jansson value and written by jansson: no string
 * pasting, so no code, tool text or error message can break out of its
 * string and add a field or a line of its own.
 */
#include "base/pyname.h"
#include "base/utf8.h"
#include "cell/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

static int is_ident(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
		if (!alpha && (i == 0 || c < '0' || c > '9'))
			return 0;
	}
	return len > 0;
}

/* ASCII only: Python would accept more, but look-alike letters in a name the
 * model reads are how a stub could pass for another tool. */
static int py_name_check(const char *what, const char *s, struct appl_err *err)
{
	size_t len = s ? strnlen(s, APPL_RUNNER_PY_NAME_MAX + 1) : 0;

	if (len == 0 || len > APPL_RUNNER_PY_NAME_MAX)
		return appl_err_set(err, -EINVAL, "tool %s: empty or longer than %u bytes", what,
				    APPL_RUNNER_PY_NAME_MAX);
	if (!is_ident(s, len))
		return appl_err_set(err, -EINVAL, "tool %s \"%.64s\": not an ASCII identifier",
				    what, s);
	if (appl_py_keyword(s))
		return appl_err_set(err, -EINVAL, "tool %s \"%s\": a Python keyword", what, s);
	if (strncmp(s, "__", 2) == 0)
		return appl_err_set(err, -EINVAL, "tool %s \"%s\": starts with __", what, s);
	return 0;
}

static int tool_fields_check(const char *tool, size_t tool_len, const char *ns, const char *fn,
			     const char *doc, size_t doc_len, struct appl_err *err)
{
	int rc;

	if (tool_len == 0 || tool_len > APPL_RUNNER_TOOL_NAME_MAX)
		return appl_err_set(err, -EINVAL, "tool name is %zu bytes, not 1 to %u", tool_len,
				    APPL_RUNNER_TOOL_NAME_MAX);
	if (memchr(tool, '\0', tool_len))
		return appl_err_set(err, -EINVAL, "tool name holds a NUL byte");
	rc = py_name_check("ns", ns, err);
	if (rc == 0)
		rc = py_name_check("fn", fn, err);
	if (rc < 0)
		return rc;
	if (appl_py_reserved(ns))
		return appl_err_set(err, -EINVAL, "tool ns \"%s\": a name the cell already has",
				    ns);
	if (strcmp(fn, CELL_PROTO_READ_FN) == 0)
		return appl_err_set(err, -EINVAL, "tool fn \"%s\": every namespace's own",
				    CELL_PROTO_READ_FN);
	if (!memchr(tool, '.', tool_len))
		return appl_err_set(err, -EINVAL, "tool name names no server (\"server.tool\")");
	if (doc && doc_len > APPL_RUNNER_DOC_MAX)
		return appl_err_set(err, -EINVAL, "tool doc is %zu bytes, more than %u", doc_len,
				    APPL_RUNNER_DOC_MAX);
	if (doc && memchr(doc, '\0', doc_len))
		return appl_err_set(err, -EINVAL, "tool doc holds a NUL byte");
	return 0;
}

json_t *cell_proto_tool_new(const char *tool, const char *ns, const char *fn, const char *doc,
			    struct appl_err *err)
{
	size_t tool_len = tool ? strnlen(tool, APPL_RUNNER_TOOL_NAME_MAX + 1) : 0;
	size_t doc_len = doc ? strnlen(doc, APPL_RUNNER_DOC_MAX + 1) : 0;
	json_t *o;

	if (tool_fields_check(tool ? tool : "", tool_len, ns, fn, doc, doc_len, err) < 0)
		return NULL;
	o = json_pack("{s:s, s:s, s:s}", "tool", tool, "ns", ns, "fn", fn);
	if (o && doc && json_object_set_new(o, "doc", json_string(doc)) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (!o)
		appl_err_set(err, -EINVAL, "tool name or doc: not UTF-8, or out of memory");
	return o;
}

static const char *const tool_entry_fields[] = {"tool", "ns", "fn", "doc", "off", NULL};
static const char *const server_entry_fields[] = {"server", "ns", NULL};

/* {"server", "ns"}: a namespace for a server with no tools listed. */
static int server_entry_check(const json_t *e, size_t i, struct appl_err *err)
{
	json_t *server = json_object_get(e, "server");
	json_t *ns = json_object_get(e, "ns");
	int rc;

	if (!json_is_string(server) || !json_is_string(ns))
		return appl_err_set(err, -EINVAL, "tools[%zu]: needs strings server and ns", i);
	rc = appl_json_keys_check(e, server_entry_fields, "tools[]", err);
	if (rc == 0 && (json_string_length(ns) != strlen(json_string_value(ns)) ||
			json_string_length(server) != strlen(json_string_value(server)) ||
			json_string_length(server) == 0 ||
			json_string_length(server) > APPL_POLICY_SERVER_NAME_MAX))
		rc = appl_err_set(err, -EINVAL, "a bad server name");
	if (rc == 0)
		rc = py_name_check("ns", json_string_value(ns), err);
	return rc < 0 ? appl_err_prefix(err, "tools[%zu]", i) : 0;
}

static int tool_entry_check(const json_t *e, size_t i, struct appl_err *err)
{
	json_t *tool = json_object_get(e, "tool");
	json_t *ns = json_object_get(e, "ns");
	json_t *fn = json_object_get(e, "fn");
	json_t *doc = json_object_get(e, "doc");
	json_t *off = json_object_get(e, "off");
	int rc;

	if (json_is_object(e) && json_object_get(e, "server"))
		return server_entry_check(e, i, err);
	if (!json_is_object(e) || !json_is_string(tool) || !json_is_string(ns) ||
	    !json_is_string(fn) || (doc && !json_is_string(doc)) || (off && !json_is_string(off)))
		return appl_err_set(err, -EINVAL,
				    "tools[%zu]: needs strings tool, ns, fn (and doc, off)", i);
	if (off && (json_string_length(off) > APPL_TOOL_ERROR_MAX ||
		    json_string_length(off) != strlen(json_string_value(off))))
		return appl_err_set(err, -EINVAL, "tools[%zu].off: over %u bytes, or a NUL byte", i,
				    APPL_TOOL_ERROR_MAX);
	rc = appl_json_keys_check(e, tool_entry_fields, "tools[]", err);
	if (rc == 0 && (json_string_length(ns) != strlen(json_string_value(ns)) ||
			json_string_length(fn) != strlen(json_string_value(fn))))
		rc = appl_err_set(err, -EINVAL, "a name holds a NUL byte");
	if (rc == 0)
		rc = tool_fields_check(json_string_value(tool), json_string_length(tool),
				       json_string_value(ns), json_string_value(fn),
				       doc ? json_string_value(doc) : NULL,
				       doc ? json_string_length(doc) : 0, err);
	return rc < 0 ? appl_err_prefix(err, "tools[%zu]", i) : 0;
}

/* Two entries of one Python name; a server entry's namespace is all its
 * own. */
static int same_name(const json_t *a, const json_t *b)
{
	const char *fa = json_string_value(json_object_get(a, "fn"));
	const char *fb = json_string_value(json_object_get(b, "fn"));

	return strcmp(json_string_value(json_object_get(a, "ns")),
		      json_string_value(json_object_get(b, "ns"))) == 0 &&
	       (!fa || !fb || strcmp(fa, fb) == 0);
}

static int tools_check(const json_t *tools, struct appl_err *err)
{
	size_t n = json_array_size(tools);

	if (!json_is_array(tools))
		return appl_err_set(err, -EINVAL, "tools is not an array");
	if (n > APPL_RUNNER_TOOLS_MAX)
		return appl_err_set(err, -EINVAL, "%zu tools, more than %u", n,
				    APPL_RUNNER_TOOLS_MAX);
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_array_get(tools, i);
		int rc = tool_entry_check(e, i, err);
		if (rc < 0)
			return rc;
		/* Quadratic, but n is capped at APPL_RUNNER_TOOLS_MAX. */
		for (size_t j = 0; j < i; j++)
			if (same_name(e, json_array_get(tools, j)))
				return appl_err_set(
					err, -EINVAL, "tools[%zu]: %s.%s given twice", i,
					json_string_value(json_object_get(e, "ns")),
					json_object_get(e, "fn")
						? json_string_value(json_object_get(e, "fn"))
						: "*");
	}
	return 0;
}

/* Write msg (stolen) as one line. The size is asked first, so a line over
 * the cap is refused before its buffer is allocated. */
static int line_write(json_t *msg, char **line, size_t *len, struct appl_err *err)
{
	size_t need;
	char *buf;

	*line = NULL;
	*len = 0;
	if (!msg)
		return appl_err_set(err, -ENOMEM, "runner message: out of memory");
	need = appl_json_size(msg);
	if (need == 0 || need + 1 > APPL_RUNNER_HOST_LINE_MAX) {
		json_decref(msg);
		return appl_err_set(err, -EFBIG, "runner message of %zu bytes, more than %u", need,
				    APPL_RUNNER_HOST_LINE_MAX);
	}
	buf = malloc(need + 2);
	if (!buf || json_dumpb(msg, buf, need, JSON_COMPACT) != need) {
		free(buf);
		json_decref(msg);
		return appl_err_set(err, -ENOMEM, "runner message: out of memory");
	}
	json_decref(msg);
	buf[need] = '\n';
	buf[need + 1] = '\0';
	*line = buf;
	*len = need + 1;
	return 0;
}

/* The runner's limits.files into *out (new), checked against the
 * ceilings: the runner trusts them to size what it reads. */
static int files_limits_new(const struct cell_files_limits *f, json_t **out, struct appl_err *err)
{
	if (!f || f->max_count > APPL_FILES_MAX_COUNT_CEIL || f->max_bytes < 1 ||
	    f->max_bytes > f->max_total || f->max_total > APPL_FILES_MAX_TOTAL_BYTES_CEIL)
		return appl_err_set(err, -EINVAL, "files limits out of range");
	*out = json_pack("{s:I, s:I, s:I}", "max_count", (json_int_t)f->max_count, "max_bytes",
			 (json_int_t)f->max_bytes, "max_total_bytes", (json_int_t)f->max_total);
	return *out ? 0 : appl_err_set(err, -ENOMEM, "runner message: out of memory");
}

/* A code tool's arguments: the runner binds them as the dict `args`, so an
 * object only; one level under the line's own, so that the whole line
 * stays within the depth both parsers take. Their size is the line cap's. */
static int args_check(const json_t *args, struct appl_err *err)
{
	if (!args)
		return 0;
	if (!json_is_object(args))
		return appl_err_set(err, -EINVAL, "args is not an object");
	if (!appl_json_depth_within(args, APPL_JSON_DEPTH_MAX - 1))
		return appl_err_set(err, -E2BIG, "args nested deeper than %u levels",
				    APPL_JSON_DEPTH_MAX - 1);
	return 0;
}

int cell_proto_cell_encode(const char *code, size_t code_len, const json_t *tools,
			   const struct cell_files_limits *files, const json_t *args, bool keep,
			   char **line, size_t *len, struct appl_err *err)
{
	json_t *jcode, *jfiles, *msg;
	int rc;

	*line = NULL;
	*len = 0;
	if (code_len > APPL_CELL_CODE_MAX)
		return appl_err_set(err, -EFBIG, "code of %zu bytes, more than %u", code_len,
				    APPL_CELL_CODE_MAX);
	if (memchr(code, '\0', code_len))
		return appl_err_set(err, -EINVAL, "code holds a NUL byte");
	rc = tools_check(tools, err);
	if (rc == 0)
		rc = args_check(args, err);
	if (rc < 0)
		return rc;
	rc = files_limits_new(files, &jfiles, err);
	if (rc < 0)
		return rc;
	jcode = json_stringn(code, code_len);
	if (!jcode) {
		json_decref(jfiles);
		return appl_err_set(err, -EINVAL, "code is not UTF-8");
	}
	/* json_pack "O" takes its own reference: tools stays the caller's. */
	msg = json_pack("{s:s, s:o, s:O, s:o}", "t", "cell", "code", jcode, "tools",
			(json_t *)tools, "files", jfiles);
	if (msg && ((args && json_object_set(msg, "args", (json_t *)args) < 0) ||
		    (keep && json_object_set_new(msg, "keep", json_true()) < 0))) {
		json_decref(msg);
		msg = NULL;
	}
	return line_write(msg, line, len, err);
}

int cell_proto_result_encode(json_int_t id, const json_t *value, char **line, size_t *len,
			     struct appl_err *err)
{
	*line = NULL;
	*len = 0;
	if (id < 0)
		return appl_err_set(err, -EINVAL, "result for a negative call id");
	if (!value)
		return appl_err_set(err, -EINVAL, "result without a value");
	if (!appl_json_depth_within(value, APPL_JSON_DEPTH_MAX - 1))
		return appl_err_set(err, -E2BIG, "result nested deeper than %u levels",
				    APPL_JSON_DEPTH_MAX - 1);
	return line_write(
		json_pack("{s:s, s:I, s:O}", "t", "result", "id", id, "ok", (json_t *)value), line,
		len, err);
}

const char *cell_error_kind_name(enum cell_error_kind kind)
{
	switch (kind) {
	case CELL_ERR_REFUSED:
		return "refused";
	case CELL_ERR_TIMEOUT:
		return "timeout";
	case CELL_ERR_UNAVAILABLE:
		return "unavailable";
	case CELL_ERR_DECLINED:
		return "declined";
	case CELL_ERR_ERROR:
		break;
	}
	return "error";
}

int cell_proto_error_encode(json_int_t id, enum cell_error_kind kind, const char *msg,
			    size_t msg_len, char **line, size_t *len, struct appl_err *err)
{
	size_t n = msg_len < APPL_TOOL_ERROR_MAX ? msg_len : APPL_TOOL_ERROR_MAX;
	char buf[APPL_TOOL_ERROR_MAX];
	json_t *jmsg;

	*line = NULL;
	*len = 0;
	if (id < 0)
		return appl_err_set(err, -EINVAL, "result for a negative call id");
	if (!msg && msg_len)
		return appl_err_set(err, -EINVAL, "error message missing");
	if (n < msg_len)
		n = appl_utf8_boundary(msg, n); /* cut at a character */
	if (n)
		memcpy(buf, msg, n);
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = '?';
	jmsg = json_stringn(buf, n);
	if (!jmsg)
		return appl_err_set(err, -EINVAL, "error message is not UTF-8");
	return line_write(json_pack("{s:s, s:I, s:o, s:s}", "t", "result", "id", id, "error", jmsg,
				    "kind", cell_error_kind_name(kind)),
			  line, len, err);
}
