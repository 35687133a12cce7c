/* serial.c: a policy's serial rewritten in its own text (see serial.h). */
#include "policy/serial.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "json/json.h"
#include "policy/policy.h"
#include "policy/state.h"

/* The text is known to be one JSON object (jansson read it first), so the
 * scan only has to step over values, never to judge them. */
static size_t ws_skip(const char *buf, size_t len, size_t i)
{
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
		i++;
	return i;
}

/* From the opening quote at i to just after the closing one. */
static size_t string_skip(const char *buf, size_t len, size_t i)
{
	for (i++; i < len; i++) {
		if (buf[i] == '\\')
			i++;
		else if (buf[i] == '"')
			return i + 1;
	}
	return len;
}

/* A byte of a number, true, false or null. */
static bool scalar_byte(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
	       ch == '-' || ch == '+' || ch == '.';
}

static size_t value_skip(const char *buf, size_t len, size_t i)
{
	size_t depth = 0;

	while (i < len) {
		char ch = buf[i];

		if (ch == '"') {
			i = string_skip(buf, len, i);
		} else if (ch == '{' || ch == '[') {
			depth++;
			i++;
		} else if (ch == '}' || ch == ']') {
			if (depth == 0)
				return i; /* the end of the enclosing object */
			i++;
			if (--depth == 0)
				return i;
		} else if (depth == 0 && !scalar_byte(ch)) {
			return i; /* jansson steps over a raw NUL after a number too */
		} else {
			i++;
		}
		if (depth == 0 && ch == '"')
			return i;
	}
	return len;
}

/* The bytes of the value of the top-level key written exactly "serial". */
static bool serial_span(const char *buf, size_t len, size_t *off, size_t *n)
{
	size_t i = ws_skip(buf, len, 0);

	if (i >= len || buf[i] != '{')
		return false;
	for (i = ws_skip(buf, len, i + 1); i < len && buf[i] == '"';) {
		size_t key = i + 1, end = string_skip(buf, len, i);
		bool is_serial =
			end - key == sizeof("serial") && memcmp(buf + key, "serial\"", 7) == 0;

		i = ws_skip(buf, len, end);
		if (i >= len || buf[i] != ':')
			return false;
		i = ws_skip(buf, len, i + 1);
		*off = i;
		i = value_skip(buf, len, i);
		if (is_serial) {
			*n = i - *off;
			return true;
		}
		i = ws_skip(buf, len, i);
		if (i >= len || buf[i] != ',')
			return false;
		i = ws_skip(buf, len, i + 1);
	}
	return false;
}

/* Whether s[0..n) is the decimal of v, digits only. */
static bool decimal_is(const char *s, size_t n, uint64_t v)
{
	char num[24];
	int k = snprintf(num, sizeof(num), "%" PRIu64, v);

	return n == (size_t)k && memcmp(s, num, n) == 0;
}

int policy_serial_find(const char *buf, size_t len, size_t *off, size_t *n, uint64_t *value,
		       struct appl_err *err)
{
	json_t *root = appl_json_load(buf, len, APPL_POLICY_FILE_MAX, APPL_POLICY_DEPTH_MAX,
				      "policy", err);
	const json_t *v;
	json_int_t serial;

	if (!root)
		return err ? err->code : -EINVAL;
	v = json_is_object(root) ? json_object_get(root, "serial") : NULL;
	serial = json_is_integer(v) ? json_integer_value(v) : 0;
	json_decref(root);
	if (!v)
		return appl_err_set(err, -EINVAL,
				    "no top-level serial to replace; add \"serial\": 1 to the "
				    "policy");
	if (serial < 1)
		return appl_err_set(err, -EINVAL,
				    "serial: must be an integer of 1 to %" PRIu64 " to be replaced",
				    POLICY_SERIAL_MAX);
	/* jansson decodes escapes in keys; the rewrite needs the key as
	 * written, so "seri\u0061l" is found by the one and not the other.
	 * The bytes found must be the decimal jansson read, or nothing is
	 * replaced. */
	if (!serial_span(buf, len, off, n) || !decimal_is(buf + *off, *n, (uint64_t)serial))
		return appl_err_set(
			err, -EINVAL,
			"serial: its key is not written plainly as \"serial\"; write it "
			"so to have it replaced");
	*value = (uint64_t)serial;
	return 0;
}

int policy_serial_pick(enum policy_serial_how how, uint64_t cur, int64_t now, uint64_t given,
		       uint64_t *out, struct appl_err *err)
{
	if (how == POLICY_SERIAL_SET) {
		if (given < 1 || given > POLICY_SERIAL_MAX)
			return appl_err_set(err, -ERANGE, "serial: must be 1 to %" PRIu64,
					    POLICY_SERIAL_MAX);
		*out = given;
		return 0;
	}
	if (cur >= POLICY_SERIAL_MAX)
		return appl_err_set(err, -ERANGE,
				    "serial: %" PRIu64 " is the highest there is; none follows it",
				    cur);
	*out = cur + 1;
	/* Two signings in one second must not get one serial: the file's
	 * own + 1 wins where it is higher. */
	if (how == POLICY_SERIAL_NOW && now > 0 && (uint64_t)now > *out)
		*out = (uint64_t)now;
	return 0;
}

/* buf with its bytes [off, off + n) replaced by the decimal of serial, in a
 * new malloc'ed *out; checked to read back as that serial. */
static int serial_splice(const char *buf, size_t len, size_t off, size_t n, uint64_t serial,
			 char **out, size_t *out_len, struct appl_err *err)
{
	char num[24], *text;
	int k = snprintf(num, sizeof(num), "%" PRIu64, serial);
	size_t at, span, got_n;
	struct policy *p = NULL;
	uint64_t got;
	int rc;

	if (!(text = malloc(len - n + (size_t)k + 1)))
		return appl_err_set(err, -ENOMEM, "out of memory");
	memcpy(text, buf, off);
	memcpy(text + off, num, (size_t)k);
	memcpy(text + off + (size_t)k, buf + off + n, len - off - n);
	got_n = len - n + (size_t)k;
	if (policy_serial_find(text, got_n, &at, &span, &got, err) < 0 || got != serial) {
		free(text);
		return appl_err_set(err, -EINVAL, "serial: the rewritten text does not read back");
	}
	/* Only a policy that will be signed is rewritten: the parser's
	 * refusal comes before any byte of the file changes. The base
	 * directory only resolves image.layout, and the policy is dropped. */
	if ((rc = policy_parse(text, got_n, "/", &p, err)) < 0) {
		free(text);
		return rc;
	}
	policy_free(p);
	*out = text;
	*out_len = got_n;
	return 0;
}

int policy_serial_write(const char *path, enum policy_serial_how how, uint64_t given, int64_t now,
			uint64_t *old, uint64_t *new, struct appl_err *err)
{
	char *buf = NULL, *text = NULL;
	size_t len, off, n, text_len;
	uint64_t cur, next;
	struct stat st;
	int rc;

	if (lstat(path, &st) < 0)
		return appl_err_errno(err, -errno, errno, "%s", path);
	if (S_ISLNK(st.st_mode))
		return appl_err_set(err, -EINVAL,
				    "%s: a symlink; name the file itself to have its serial "
				    "rewritten",
				    path);
	if ((rc = appl_file_read(path, APPL_POLICY_FILE_MAX, &buf, &len, err)) < 0)
		return rc;
	if ((rc = policy_serial_find(buf, len, &off, &n, &cur, err)) < 0 ||
	    (rc = policy_serial_pick(how, cur, now, given, &next, err)) < 0 ||
	    (next != cur &&
	     (rc = serial_splice(buf, len, off, n, next, &text, &text_len, err)) < 0)) {
		appl_err_prefix(err, "%s", path);
		goto out;
	}
	if (text)
		rc = policy_file_replace(path, text, text_len, st.st_mode & 07777, err);
	if (rc == 0 && old)
		*old = cur;
	if (rc == 0 && new)
		*new = next;
out:
	free(buf);
	free(text);
	return rc;
}
