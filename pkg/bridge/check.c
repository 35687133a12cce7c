/* check.c: a call's checks before it leaves, and a result's turn into the
 * code's value (see bridge.h). Pure code. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/limits.h"
#include "base/utf8.h"
#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "json/json.h"

/* Longest piece of the code's own text (a tool or argument name) quoted back. */
#define QUOTE_MAX 64

static int say(char *msg, size_t cap, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, cap, fmt, ap);
	va_end(ap);
	appl_utf8_trim(msg); /* a cut may have split a character */
	return rc;
}

/* Copy s into out, cut at a character to QUOTE_MAX bytes ("..." marks a cut). */
static const char *quote(const char *s, char *out, size_t cap)
{
	size_t n = strlen(s);

	if (n < cap && n <= QUOTE_MAX)
		return s;
	n = appl_utf8_boundary(s, QUOTE_MAX < cap - 4 ? QUOTE_MAX : cap - 4);
	memcpy(out, s, n);
	memcpy(out + n, "...", 4);
	return out;
}

/* The audit log's copy of a refusal whose text holds nothing of the
 * arguments: msg as it is. */
static int same(char *log, size_t log_cap, const char *msg, int rc)
{
	if (log && log_cap)
		snprintf(log, log_cap, "%s", msg);
	return rc;
}

/* msg is the code's refusal, which may quote the arguments (a name, the
 * schema's error); log the audit log's, which never does. */
static int args_check(const struct bridge_entry *e, const char *tool, const json_t *args,
		      size_t max_args_bytes, char *msg, size_t cap, char *log, size_t log_cap)
{
	struct appl_err verr = {0};
	char q[QUOTE_MAX + 4];
	const char *kw;
	size_t size;
	const char *key;
	json_t *v;
	int rc;

	if (!json_is_object(args))
		return same(log, log_cap, msg,
			    say(msg, cap, -EINVAL, "refused: %s: the arguments must be an object",
				tool));
	size = appl_json_size(args);
	if (size > max_args_bytes)
		return same(log, log_cap, msg,
			    say(msg, cap, -EINVAL,
				"refused: %s: the arguments are %zu bytes as JSON, over the cap of "
				"%zu",
				tool, size, max_args_bytes));
	if (e->strict) {
		const json_t *props = json_object_get(e->input_schema, "properties");

		json_object_foreach((json_t *)args, key, v)
			if (!json_object_get(props, key)) {
				if (log && log_cap)
					say(log, log_cap, 0,
					    "refused: %s: an argument's name is not a parameter of "
					    "this tool",
					    tool);
				return say(msg, cap, -EINVAL,
					   "refused: %s: '%s' is not a parameter of this tool",
					   tool, quote(key, q, sizeof(q)));
			}
	}
	rc = schema_validate_kw(e->schema, args, &verr, &kw);
	if (rc == -ENOMEM)
		return same(log, log_cap, msg,
			    say(msg, cap, -ENOMEM, "refused: %s: host fault: MemoryError", tool));
	if (rc < 0 && log && log_cap) {
		if (rc == -E2BIG)
			say(log, log_cap, 0,
			    "refused: %s: the arguments could not be checked against the tool's "
			    "input schema within the gateway's caps",
			    tool);
		else
			say(log, log_cap, 0,
			    "refused: %s: the arguments do not match the tool's input schema%s%s%s",
			    tool, kw ? " (" : "", kw ? kw : "", kw ? ")" : "");
	}
	if (rc < 0)
		return say(msg, cap, -EINVAL, "refused: %s: invalid arguments: %s", tool, verr.msg);
	return 0;
}

int bridge_check(const struct bridge_catalog *c, const char *tool, const json_t *args,
		 size_t max_args_bytes, const char **server, const char **name, char *msg,
		 size_t cap, char *log, size_t log_cap)
{
	char srv[APPL_POLICY_SERVER_NAME_MAX + 1], q[QUOTE_MAX + 4];
	const struct bridge_entry *e = NULL;
	const char *dot = strchr(tool, '.');
	const char *why;

	*server = *name = NULL;
	if (dot && (size_t)(dot - tool) < sizeof(srv)) {
		memcpy(srv, tool, (size_t)(dot - tool));
		srv[dot - tool] = '\0';
		e = bridge_catalog_find(c, srv, dot + 1);
	}
	/* These quote the tool's name only, which the log has anyway. */
	if (!e && dot && (size_t)(dot - tool) < sizeof(srv) && bridge_catalog_absent(c, srv))
		return same(log, log_cap, msg,
			    say(msg, cap, -EAGAIN,
				"upstream_unavailable: the server of %s is not available",
				quote(tool, q, sizeof(q))));
	if (!e)
		return same(log, log_cap, msg,
			    say(msg, cap, -EPERM, "refused: %s: no such tool",
				quote(tool, q, sizeof(q))));
	/* the code's name for it from here on: what it called */
	if (e->pyname)
		tool = e->pyname;
	why = bridge_entry_why_not(e);
	if (why)
		return same(
			log, log_cap, msg,
			say(msg, cap, e->schema ? -EPERM : -ENOTSUP, "refused: %s: %s", tool, why));
	if (args_check(e, tool, args, max_args_bytes, msg, cap, log, log_cap) < 0)
		return -EINVAL;
	*server = e->server;
	*name = e->name;
	return 0;
}

int bridge_output_check(const struct bridge_entry *e, const json_t *value, char *msg, size_t cap)
{
	struct appl_err verr = {0};
	int rc;

	if (!e->out_schema)
		return 0;
	rc = schema_validate(e->out_schema, value, &verr);
	if (rc == -ENOMEM)
		return say(msg, cap, -ENOMEM, "could not be checked: host fault: MemoryError");
	if (rc < 0)
		return say(msg, cap, -EINVAL, "does not match the tool's output schema: %s",
			   verr.msg);
	return 0;
}

/* Standard base64 (RFC 4648, padded) as resources/read blobs are. */
static bool is_base64(const char *s, size_t n)
{
	size_t pad = 0;

	if (n % 4)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '=' && i >= n - 2) {
			pad++;
			continue;
		}
		if (pad || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     (c >= '0' && c <= '9') || c == '+' || c == '/'))
			return false;
	}
	return true;
}

int bridge_resource_value(const json_t *result, size_t max_bytes, json_t **value, char *msg,
			  size_t cap)
{
	const json_t *contents = json_object_get(result, "contents"), *c;
	size_t size, i;
	json_t *out;

	*value = NULL;
	if (!json_is_object(result) || !json_is_array(contents))
		return say(msg, cap, -EINVAL, "the server's answer is not a resource");
	size = appl_json_size(result);
	if (size > max_bytes)
		return say(msg, cap, -EFBIG, "the resource is %zu bytes, over the cap of %zu", size,
			   max_bytes);
	if (json_array_size(contents) == 0)
		return say(msg, cap, -EINVAL, "the server sent no contents");
	if (!(out = json_array()))
		return say(msg, cap, -ENOMEM, "host fault: MemoryError");
	json_array_foreach(contents, i, c) {
		const json_t *text = json_object_get(c, "text"), *blob = json_object_get(c, "blob");
		json_t *item = NULL;

		if (json_is_string(text) && !blob)
			item = json_pack("{s:O}", "text", text);
		else if (json_is_string(blob) && !text &&
			 is_base64(json_string_value(blob), json_string_length(blob)))
			item = json_pack("{s:O}", "blob", blob);
		else {
			json_decref(out);
			return say(msg, cap, -EINVAL,
				   "content %zu of the resource is neither text nor base64", i);
		}
		if (!item || json_array_append_new(out, item) < 0) {
			json_decref(out);
			return say(msg, cap, -ENOMEM, "host fault: MemoryError");
		}
	}
	*value = out;
	return 0;
}

/* The texts of the text blocks of content, joined by newlines, as a new
 * string; NULL when there is no text block. all_text says whether every
 * block was text. */
static json_t *texts_join(const json_t *content, bool *all_text)
{
	json_t *b, *out = NULL;
	size_t i;

	*all_text = json_is_array(content) && json_array_size(content) > 0;
	json_array_foreach(content, i, b) {
		const json_t *text = json_object_get(b, "text");
		const char *type = json_string_value(json_object_get(b, "type"));

		if (!type || strcmp(type, "text") != 0 || !json_is_string(text)) {
			*all_text = false;
			continue;
		}
		if (!out) {
			out = json_stringn(json_string_value(text), json_string_length(text));
		} else {
			size_t a = json_string_length(out), n = json_string_length(text);
			char *buf = malloc(a + 1 + n);
			json_t *joined;

			if (!buf) {
				json_decref(out);
				return NULL;
			}
			memcpy(buf, json_string_value(out), a);
			buf[a] = '\n';
			memcpy(buf + a + 1, json_string_value(text), n);
			joined = json_stringn_nocheck(buf, a + 1 + n);
			free(buf);
			json_decref(out);
			out = joined;
		}
		if (!out)
			return NULL;
	}
	return out;
}

int bridge_result_value(const json_t *result, size_t max_bytes, json_t **value, char *msg,
			size_t cap)
{
	const json_t *sc = json_object_get(result, "structuredContent");
	const json_t *content = json_object_get(result, "content");
	size_t size;
	bool all_text;
	json_t *v;

	*value = NULL;
	if (!json_is_object(result))
		return say(msg, cap, -EINVAL, "the server's answer is not a tool result");
	size = appl_json_size(result);
	if (size > max_bytes)
		return say(msg, cap, -EFBIG, "the tool's result is %zu bytes, over the cap of %zu",
			   size, max_bytes);
	if (json_is_true(json_object_get(result, "isError"))) {
		v = texts_join(content, &all_text);
		if (v && json_string_value(v)[0])
			say(msg, cap, 1, "%s", json_string_value(v));
		else
			say(msg, cap, 1, "the tool reported an error and gave no text");
		json_decref(v);
		return 1;
	}
	if (json_is_object(sc)) {
		v = json_incref((json_t *)sc);
	} else {
		v = texts_join(content, &all_text);
		if (!all_text) {
			json_decref(v);
			v = json_is_array(content) ? json_incref((json_t *)content) : json_array();
		}
	}
	if (!v)
		return say(msg, cap, -ENOMEM, "host fault: MemoryError");
	if (!appl_json_depth_within(v, APPL_TOOL_RESULT_DEPTH_MAX)) {
		json_decref(v);
		return say(msg, cap, -E2BIG, "the tool's result nests deeper than %u levels",
			   APPL_TOOL_RESULT_DEPTH_MAX);
	}
	*value = v;
	return 0;
}
