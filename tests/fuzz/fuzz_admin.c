/* fuzz_admin.c: the admin socket's parsers on hostile bytes.
 *
 * The input is split at '\n' into lines, as a peer's connection is read.
 * Each line is a request (admin_request_parse), an answer to each op
 * (admin_answer_parse) and, cut at its first NUL, a directory entry's
 * name (admin_sock_name_parse) and a NAME (admin_name_valid). What each
 * accepts must hold up: a request names an op whose own request line
 * parses back to it; a socket name is written back by admin_sock_name to
 * the same bytes; a refusal's message is one line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAME_CAP 512

static void request_check(const char *p, size_t len)
{
	struct appl_err err = {0};
	enum admin_op op, again;
	const char *line;

	if (admin_request_parse(p, len, &op, &err) != 0) {
		if (err.code >= 0 || !err.msg[0] || strchr(err.msg, '\n'))
			__builtin_trap();
		return;
	}
	if (len >= APPL_ADMIN_REQUEST_MAX)
		__builtin_trap();
	line = admin_request_line(op);
	if (admin_request_parse(line, strlen(line) - 1, &again, NULL) != 0 || again != op)
		__builtin_trap();
}

static void answer_check(const char *p, size_t len)
{
	for (enum admin_op op = ADMIN_OP_STATUS; op <= ADMIN_OP_RELOAD; op++) {
		json_t *a = NULL;

		if (admin_answer_parse(p, len, op, &a, NULL) == 0) {
			if (!json_is_boolean(json_object_get(a, "ok")))
				__builtin_trap();
			json_decref(a);
		} else if (a) {
			__builtin_trap();
		}
	}
}

static void name_check(const char *p, size_t len)
{
	char file[NAME_CAP + 1], name[APPL_ADMIN_NAME_MAX + 1], again[NAME_CAP + 1];
	size_t n = strnlen(p, len < NAME_CAP ? len : NAME_CAP);
	pid_t pid;

	memcpy(file, p, n);
	file[n] = '\0';
	if (admin_name_valid(file, n) && (memchr(file, '.', n) || memchr(file, '/', n)))
		__builtin_trap();
	if (admin_sock_name_parse(file, name, &pid) != 0)
		return;
	if (!admin_name_valid(name, strlen(name)) || pid < 1 ||
	    admin_sock_name(again, sizeof(again), name, pid) != 0 || strcmp(again, file) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *end = p + size;

	while (p <= end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		request_check(p, len);
		answer_check(p, len);
		name_check(p, len);
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
}
