/* fuzz_stubs.c: names, stubs and the description from hostile tool lists.
 *
 * Input: a JSON array of tools, each {"server", "name", "description",
 * "inputSchema"} (any may be missing or of another type), or, when the
 * input is not such JSON, raw bytes split at '\n' into a server, a name, a
 * description (any bytes, not UTF-8 too) and a schema. Besides ASan/UBSan
 * findings it traps when a result breaks the contract of stubs.h: a code
 * outside it; text that is not UTF-8, holds a NUL or passes its cap; a stub
 * without exactly one docstring; names the runner's rules refuse (checked by
 * cell_proto_tool_new and a whole cell line); an order that is not sorted;
 * or a result that changes when the same tools come in the reverse order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cell/files.h"
#include "cell/proto.h"
#include "stubs/stubs.h"

#define FUZZ_TOOLS_MAX 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

static int utf8_ok(const char *s)
{
	json_t *j = json_string(s); /* jansson checks UTF-8 */

	json_decref(j);
	return j != NULL;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void check_tool(const struct stubs *s, size_t i)
{
	const char *t = stubs_text(s, i), *sum = stubs_summary(s, i), *sig = stubs_signature(s, i);
	json_t *e =
		cell_proto_tool_new(stubs_mcp_name(s, i), stubs_ns(s, i), stubs_fn(s, i), t, NULL);

	check(e != NULL);
	json_decref(e);
	check(strlen(t) <= APPL_STUBS_TEXT_MAX && utf8_ok(t) && count_of(t, "\"\"\"") == 2);
	check(strncmp(t, "async def ", 10) == 0);
	check(strlen(sum) <= APPL_STUBS_SUMMARY_MAX && utf8_ok(sum) && !strchr(sum, '\n'));
	check(strlen(sig) <= APPL_STUBS_LINE_MAX && utf8_ok(sig) && !strchr(sig, '\n'));
	if (i > 0) {
		int c = strcmp(stubs_ns(s, i - 1), stubs_ns(s, i));
		check(c < 0 || (c == 0 && strcmp(stubs_fn(s, i - 1), stubs_fn(s, i)) < 0));
	}
}

static void check_cell_line(const struct stubs *s)
{
	struct appl_err err;
	json_t *tools = stubs_runner_tools(s, &err);
	struct cell_files_limits files;
	size_t len, total = 0;
	char *line;

	cell_files_limits_init(&files);
	check(tools != NULL);
	check(cell_proto_cell_encode("1", 1, tools, &files, NULL, false, &line, &len, &err) == 0);
	free(line);
	json_decref(tools);
	for (size_t i = 0; i < stubs_count(s); i++)
		total += strlen(stubs_text(s, i));
	check(total <= APPL_STUBS_DOCS_TOTAL_MAX);
}

static void check_descriptions(const struct stubs *s)
{
	static const size_t caps[] = {0, APPL_STUBS_DESCRIPTION_MIN, 4096};
	struct appl_err err;

	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		struct stubs_limits lim = {90, 200, 8192, caps[k]};
		char *d = stubs_description(s, &lim, &err);
		check(d != NULL);
		check(strlen(d) <= (caps[k] ? caps[k] : APPL_STUBS_DESCRIPTION_DEF) && utf8_ok(d));
		free(d);
	}
}

static void check_same(const struct stubs *a, const struct stubs *b)
{
	check(stubs_count(a) == stubs_count(b));
	for (size_t i = 0; i < stubs_count(a); i++) {
		check(strcmp(stubs_ns(a, i), stubs_ns(b, i)) == 0);
		check(strcmp(stubs_fn(a, i), stubs_fn(b, i)) == 0);
		check(strcmp(stubs_mcp_name(a, i), stubs_mcp_name(b, i)) == 0);
		check(strcmp(stubs_text(a, i), stubs_text(b, i)) == 0);
	}
}

static void run(struct stubs_tool *t, size_t n)
{
	struct appl_err err = {0};
	struct stubs *s, *r;
	int rc = stubs_build(t, n, &s, &err);

	if (rc != 0) {
		check(rc == -EINVAL || rc == -E2BIG || rc == -ENOMEM);
		check(s == NULL && err.code == rc && utf8_ok(err.msg));
		return;
	}
	check(stubs_count(s) == n);
	for (size_t i = 0; i < n; i++)
		check_tool(s, i);
	check_cell_line(s);
	check_descriptions(s);
	for (size_t i = 0; i < n / 2; i++) {
		struct stubs_tool x = t[i];
		t[i] = t[n - 1 - i];
		t[n - 1 - i] = x;
	}
	check(stubs_build(t, n, &r, &err) == 0);
	check_same(s, r);
	stubs_free(r);
	stubs_free(s);
}

static void run_json(const json_t *arr)
{
	struct stubs_tool t[FUZZ_TOOLS_MAX];
	size_t n = 0, i;
	json_t *x;

	json_array_foreach(arr, i, x) {
		if (n == FUZZ_TOOLS_MAX)
			break;
		t[n++] = (struct stubs_tool){
			json_string_value(json_object_get(x, "server")),
			json_string_value(json_object_get(x, "name")),
			json_string_value(json_object_get(x, "description")),
			json_object_get(x, "inputSchema"),
			json_object_get(x, "outputSchema"),
			json_string_value(json_object_get(x, "whyNot")),
		};
	}
	run(t, n);
}

/* server \n name \n description \n schema: the description as raw bytes. */
static void run_raw(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *f[3] = {0};
	struct stubs_tool t;
	json_t *schema;
	char *p;

	if (!buf)
		return;
	memcpy(buf, data, size);
	buf[size] = '\0';
	p = buf;
	for (int k = 0; k < 3; k++) {
		char *nl = strchr(p, '\n');
		f[k] = p;
		if (!nl) {
			p += strlen(p);
			continue;
		}
		*nl = '\0';
		p = nl + 1;
	}
	schema = json_loads(p, JSON_DECODE_ANY, NULL);
	/* the same schema as what the tool returns too */
	t = (struct stubs_tool){f[0], f[1], f[2], schema, schema, NULL};
	run(&t, 1);
	json_decref(schema);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *v = json_loadb((const char *)data, size, 0, NULL);

	if (json_is_array(v))
		run_json(v);
	else
		run_raw(data, size);
	json_decref(v);
	return 0;
}
