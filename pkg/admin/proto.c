/* proto.c: the admin socket's names, request and answer (see proto.h). */
#include "admin/proto.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "json/json.h"

/* A request nests nothing; an answer (a status) a few levels. */
#define REQUEST_DEPTH 1
#define ANSWER_DEPTH  8
#define PID_DIGITS    10 /* INT32_MAX */

static const struct {
	enum admin_op op;
	const char *name, *line;
} ops[] = {
	{ADMIN_OP_STATUS, "status", "{\"op\":\"status\"}\n"},
	{ADMIN_OP_RELOAD, "reload", "{\"op\":\"reload\"}\n"},
};

#define NOPS (sizeof(ops) / sizeof(ops[0]))

static bool name_char(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return !first && (c == '_' || c == '-');
}

bool admin_name_valid(const char *s, size_t len)
{
	if (!s || len == 0 || len > APPL_ADMIN_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!name_char(s[i], i == 0))
			return false;
	return true;
}

int admin_sock_name(char *out, size_t cap, const char *name, pid_t pid)
{
	int n;

	if (!admin_name_valid(name, strlen(name)) || pid < 1)
		return -EINVAL;
	n = snprintf(out, cap, "%s.%ld" ADMIN_SOCK_SUFFIX, name, (long)pid);
	return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

/* Digits without a leading zero, 1 to INT32_MAX: one spelling per pid, so
 * two files never name one process. */
static int pid_parse(const char *s, size_t len, pid_t *pid)
{
	uint64_t v = 0;

	if (len == 0 || len > PID_DIGITS || s[0] == '0')
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > INT32_MAX)
		return -EINVAL;
	*pid = (pid_t)v;
	return 0;
}

int admin_sock_name_parse(const char *file, char name[APPL_ADMIN_NAME_MAX + 1], pid_t *pid)
{
	size_t len = strlen(file), slen = strlen(ADMIN_SOCK_SUFFIX);
	const char *dot;

	if (len <= slen || strcmp(file + len - slen, ADMIN_SOCK_SUFFIX) != 0)
		return -EINVAL;
	len -= slen;
	dot = memchr(file, '.', len);
	if (!dot || !admin_name_valid(file, (size_t)(dot - file)) ||
	    pid_parse(dot + 1, len - (size_t)(dot + 1 - file), pid) < 0)
		return -EINVAL;
	memcpy(name, file, (size_t)(dot - file));
	name[dot - file] = '\0';
	return 0;
}

int admin_dir_default(char *out, size_t len, struct appl_err *err)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int rc;

	if (geteuid() == 0)
		rc = appl_path_join(out, len, ADMIN_DIR_ROOT, "", "");
	else if (xdg && xdg[0] == '/')
		rc = appl_path_join(out, len, xdg, "/appliance", "");
	else
		return appl_err_set(
			err, -ENOENT,
			"no directory for the admin socket: XDG_RUNTIME_DIR is not set "
			"(an ordinary user's sockets live in $XDG_RUNTIME_DIR/appliance); "
			"set it, or name one with --admin-dir");
	if (rc < 0)
		return appl_err_set(err, -ENAMETOOLONG, "admin directory path too long");
	return 0;
}

const char *admin_op_name(enum admin_op op)
{
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i].op == op)
			return ops[i].name;
	return "?";
}

const char *admin_request_line(enum admin_op op)
{
	for (size_t i = 0; i < NOPS; i++)
		if (ops[i].op == op)
			return ops[i].line;
	return "";
}

static int op_find(const char *name, enum admin_op *op)
{
	for (size_t i = 0; i < NOPS; i++)
		if (strcmp(ops[i].name, name) == 0) {
			*op = ops[i].op;
			return 0;
		}
	return -EINVAL;
}

int admin_request_parse(const char *buf, size_t len, enum admin_op *op, struct appl_err *err)
{
	static const char *const keys[] = {"op", NULL};
	struct appl_err e = {0};
	const json_t *v;
	json_t *o;
	int rc;

	/* The newline is the request's: what is left must fit without it. */
	if (len >= APPL_ADMIN_REQUEST_MAX)
		return appl_err_set(err, -E2BIG, "the request is over %d bytes",
				    APPL_ADMIN_REQUEST_MAX - 1);
	if (!(o = appl_json_load(buf, len, APPL_ADMIN_REQUEST_MAX, REQUEST_DEPTH, "the request",
				 &e)))
		rc = e.code ? e.code : appl_err_set(&e, -EINVAL, "the request is not JSON");
	else if (!json_is_object(o))
		rc = appl_err_set(&e, -EINVAL, "the request must be a JSON object");
	else if ((rc = appl_json_keys_check(o, keys, "the request", &e)) < 0)
		;
	else if (!json_is_string(v = json_object_get(o, "op")))
		rc = appl_err_set(&e, -EINVAL, "the request needs \"op\", a string");
	else if (op_find(json_string_value(v), op) < 0)
		rc = appl_err_set(&e, -EINVAL, "no op \"%.32s\" (the ops are status and reload)",
				  json_string_value(v));
	json_decref(o);
	if (rc < 0 && err)
		*err = e;
	return rc;
}

json_t *admin_answer_new(const enum admin_op *op, const char *why)
{
	json_t *o = json_object(), *name = op ? json_string(admin_op_name(*op)) : json_null();

	if (!o || !name || json_object_set_new(o, "ok", json_boolean(!why)) < 0 ||
	    json_object_set_new(o, "op", name) < 0 ||
	    (why && json_object_set_new(o, "error", json_string(why)) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int answer_check(const json_t *o, enum admin_op op, struct appl_err *err)
{
	const json_t *ok = json_object_get(o, "ok"), *name = json_object_get(o, "op");

	if (!json_is_boolean(ok))
		return appl_err_set(err, -EPROTO, "the answer has no \"ok\"");
	if (json_is_false(ok))
		return json_is_string(json_object_get(o, "error"))
			       ? 0
			       : appl_err_set(err, -EPROTO, "a refusal without \"error\"");
	if (!json_is_string(name) || strcmp(json_string_value(name), admin_op_name(op)) != 0)
		return appl_err_set(err, -EPROTO, "the answer is not to \"%s\"", admin_op_name(op));
	if (op == ADMIN_OP_STATUS && !json_is_object(json_object_get(o, "status")))
		return appl_err_set(err, -EPROTO, "a status answer without \"status\"");
	return 0;
}

int admin_answer_parse(const char *buf, size_t len, enum admin_op op, json_t **answer,
		       struct appl_err *err)
{
	struct appl_err e = {0};
	json_t *o;
	int rc;

	*answer = NULL;
	if (!(o = appl_json_load(buf, len, APPL_ADMIN_ANSWER_MAX, ANSWER_DEPTH, "the answer", &e)))
		rc = e.code ? e.code : appl_err_set(&e, -EPROTO, "the answer is not JSON");
	else if (!json_is_object(o))
		rc = appl_err_set(&e, -EPROTO, "the answer is not a JSON object");
	else
		rc = answer_check(o, op, &e);
	if (rc < 0) {
		json_decref(o);
		if (err)
			*err = e;
		return rc;
	}
	*answer = o;
	return 0;
}
