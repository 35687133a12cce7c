/* test_stubs.c: Python names, types, stubs and the run_python description
 * (pkg/stubs): mangling, collisions that do not depend on order, every type
 * mapping, defaults, parameter order, hostile text, caps, and what the cell
 * line can carry.
 *
 * With STUBS_SAMPLE_OUT=FILE set, test_sample also writes the stubs of a big
 * varied sample to FILE (one JSON object per line) for
 * tests/integration/test_stubs_python.py, which parses each with Python.
 */
/* The tools here are listed positionally: the fields after input_schema
 * (output schema, stand-in reason) are left out where a test does not need
 * them. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/pyname.h"
#include "cell/proto.h"
#include "stubs/stubs.h"

/* ---- helpers ------------------------------------------------------------------------ */

static json_t *load(const char *text)
{
	json_error_t jerr;
	json_t *v;

	if (!text)
		return NULL;
	v = json_loads(text, JSON_DECODE_ANY, &jerr);
	if (!v)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

/* Build one tool; the schema is freed before the result is read, which also
 * shows that stubs keeps nothing borrowed. */
static struct stubs *build1(const char *server, const char *name, const char *desc,
			    const char *schema)
{
	struct appl_err err = {0};
	json_t *js = load(schema);
	struct stubs_tool t = {server, name, desc, js};
	struct stubs *s = NULL;

	if (stubs_build(&t, 1, &s, &err) != 0)
		fail_msg("build %s.%s: %s", server, name, err.msg);
	json_decref(js);
	assert_int_equal(stubs_count(s), 1);
	return s;
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/* Valid UTF-8 (jansson checks), no NUL, no control byte but newline (and
 * tab where allowed). */
static void text_clean(const char *s, bool tabs)
{
	json_t *j = json_string(s);

	if (!j)
		fail_msg("not UTF-8: %.200s", s);
	json_decref(j);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if ((*p < 0x20 && *p != '\n' && !(tabs && *p == '\t')) || *p == 0x7f)
			fail_msg("control byte 0x%02x in %.200s", *p, s);
}

/* Invariants every stub keeps. */
static void stub_ok(const struct stubs *s, size_t i)
{
	const char *t = stubs_text(s, i);
	char head[200];

	assert_non_null(t);
	assert_true(strlen(t) <= APPL_STUBS_TEXT_MAX);
	text_clean(t, true);
	if (count_of(t, "\"\"\"") != 2)
		fail_msg("stub with %zu triple quotes:\n%s", count_of(t, "\"\"\""), t);
	snprintf(head, sizeof(head), "async def %s(", stubs_fn(s, i));
	assert_true(strncmp(t, head, strlen(head)) == 0);
	assert_true(strlen(stubs_summary(s, i)) <= APPL_STUBS_SUMMARY_MAX);
	assert_null(strchr(stubs_summary(s, i), '\n'));
	text_clean(stubs_summary(s, i), false);
	assert_true(strlen(stubs_signature(s, i)) <= APPL_STUBS_LINE_MAX);
	text_clean(stubs_signature(s, i), false);
}

static void names_ok(const struct stubs *s)
{
	struct appl_err err = {0};

	for (size_t i = 0; i < stubs_count(s); i++) {
		json_t *t = cell_proto_tool_new(stubs_mcp_name(s, i), stubs_ns(s, i),
						stubs_fn(s, i), stubs_text(s, i), &err);
		if (!t)
			fail_msg("%s.%s refused by the runner's rules: %s", stubs_ns(s, i),
				 stubs_fn(s, i), err.msg);
		json_decref(t);
		stub_ok(s, i);
	}
}

/* ---- names -------------------------------------------------------------------------- */

struct name_case {
	const char *in;
	const char *fn; /* as a tool name */
	const char *ns; /* as a server name */
};

static const struct name_case name_cases[] = {
	{"get-sum", "get_sum", "get_sum"},
	{"  get  sum  ", "get_sum", "get_sum"},
	{"get--sum", "get_sum", "get_sum"},
	{"get_-sum", "get__sum", "get__sum"},
	{"-get-", "get", "get"},
	{"a.b/c:d", "a_b_c_d", "a_b_c_d"},
	{"2fa", "_2fa", "_2fa"},
	{"9", "_9", "_9"},
	{"class", "class_", "class_"},
	{"None", "None_", "None_"},
	{"async", "async_", "async_"},
	{"match", "match", "match"},
	{"__init__", "_init__", "_init__"},
	{"___x", "_x", "_x"},
	{"_private", "_private", "_private"},
	{"_", "tool", "server"},
	{"__", "tool", "server"},
	{"-", "tool", "server"},
	{"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "tool", "server"}, /* 日本語 */
	{"caf\xc3\xa9", "caf", "caf"},
	{"na\xc3\xafve_x", "na_ve_x", "na_ve_x"},
	{"a\xe2\x80\x8b"
	 "b",
	 "a_b", "a_b"}, /* zero-width space */
	{"a\xe2\x80\xae"
	 "b",
	 "a_b", "a_b"}, /* right-to-left override */
	{"print", "print", "print_"},
	{"len", "len", "len_"},
	{"help", "help", "help_"},
	{"tools", "tools", "tools_"},
	{"args", "args", "args_"}, /* a code tool's arguments */
	{"asyncio", "asyncio", "asyncio_"},
	{"ToolError", "ToolError", "ToolError_"},
	{"Tools", "Tools", "Tools"},
	{"everything", "everything", "everything"},
	{"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
	{"1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	 "_1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	 "_1xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
	{"ab-cdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk-lm",
	 "ab_cdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk",
	 "ab_cdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijk"},
};

static void test_mangling_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(name_cases) / sizeof(name_cases[0]); i++) {
		const struct name_case *c = &name_cases[i];
		struct stubs *s = build1("srv", c->in, NULL, NULL);
		if (strcmp(stubs_fn(s, 0), c->fn) != 0)
			fail_msg("tool \"%s\" became %s, not %s", c->in, stubs_fn(s, 0), c->fn);
		names_ok(s);
		stubs_free(s);
		s = build1(c->in, "t", NULL, NULL);
		if (strcmp(stubs_ns(s, 0), c->ns) != 0)
			fail_msg("server \"%s\" became %s, not %s", c->in, stubs_ns(s, 0), c->ns);
		names_ok(s);
		stubs_free(s);
	}
}

static void test_tools_is_reserved_by_the_runner_rules(void **state)
{
	struct appl_err err = {0};
	(void)state;

	assert_null(cell_proto_tool_new("tools.x", "tools", "x", NULL, &err));
	assert_non_null(strstr(err.msg, "already has"));
}

/* A code tool's arguments are the global `args`: a server of that name gets
 * another namespace rather than hide them, while a tool (or parameter) may
 * still be called args, under its namespace. */
static void test_args_is_reserved_for_code_tools(void **state)
{
	static const struct stubs_tool t[] = {
		{"args", "x", NULL, NULL},
		{"args_", "y", NULL, NULL},
		{"s", "args", NULL, NULL},
	};
	struct appl_err err = {0};
	struct stubs *s = NULL;
	(void)state;

	assert_true(appl_py_reserved("args"));
	assert_false(appl_py_reserved("args_"));
	assert_null(cell_proto_tool_new("args.x", "args", "x", NULL, &err));
	assert_non_null(strstr(err.msg, "already has"));
	assert_int_equal(stubs_build(t, 3, &s, &err), 0);
	names_ok(s);
	for (size_t i = 0; i < stubs_count(s); i++) {
		assert_string_not_equal(stubs_ns(s, i), "args");
		if (strcmp(stubs_mcp_name(s, i), "s.args") == 0)
			assert_string_equal(stubs_fn(s, i), "args");
	}
	stubs_free(s);
}

/* A tool list full of collisions, in a fixed original order. */
static const struct stubs_tool collide[] = {
	{"s", "a_b", "exact", NULL},	    {"s", "a-b", "dash", NULL},
	{"s", "a b", "space", NULL},	    {"s", "a_b_2", "natural a_b_2", NULL},
	{"s", "A_B", "upper", NULL},	    {"s", "a__b", "double", NULL},
	{"s", "a.b", "dot", NULL},	    {"print", "x", NULL, NULL},
	{"print_", "x", NULL, NULL},	    {"print_", "y", NULL, NULL},
	{"tools", "search", NULL, NULL},    {"tools_", "search", NULL, NULL},
	{"s2", "\xe6\x97\xa5", NULL, NULL}, {"s2", "\xe6\x9c\xac", NULL, NULL},
	{"s2", "tool", NULL, NULL},	    {"s2", "-tool-", NULL, NULL},
};
#define NCOLLIDE (sizeof(collide) / sizeof(collide[0]))

static const char *const collide_expect[][2] = {
	{"s.a_b", "s.a_b"},
	{"s.a-b", "s.a_b_4"},
	{"s.a b", "s.a_b_3"},
	{"s.a_b_2", "s.a_b_2"},
	{"s.A_B", "s.A_B"},
	{"s.a__b", "s.a__b"},
	{"s.a.b", "s.a_b_5"},
	{"print.x", "print__2.x"},
	{"print_.x", "print_.x"},
	{"print_.y", "print_.y"},
	{"tools.search", "tools__2.search"},
	{"tools_.search", "tools_.search"},
	{"s2.tool", "s2.tool"},
	{"s2.-tool-", "s2.tool_2"},
	{"s2.\xe6\x97\xa5", "s2.tool_3"},
	{"s2.\xe6\x9c\xac", "s2.tool_4"},
};

static char *python_name(const struct stubs *s, const char *mcp)
{
	static char buf[200];

	for (size_t i = 0; i < stubs_count(s); i++)
		if (strcmp(stubs_mcp_name(s, i), mcp) == 0) {
			snprintf(buf, sizeof(buf), "%s.%s", stubs_ns(s, i), stubs_fn(s, i));
			return buf;
		}
	fail_msg("no tool %s", mcp);
	return NULL;
}

typedef const char *(*accessor)(const struct stubs *, size_t);

static const accessor accessors[] = {
	stubs_ns, stubs_fn, stubs_mcp_name, stubs_text, stubs_summary, stubs_signature,
};

static void same_result(const struct stubs *a, const struct stubs *b)
{

	assert_int_equal(stubs_count(a), stubs_count(b));
	for (size_t i = 0; i < stubs_count(a); i++)
		for (size_t k = 0; k < sizeof(accessors) / sizeof(accessors[0]); k++)
			assert_string_equal(accessors[k](a, i), accessors[k](b, i));
}

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void shuffle(struct stubs_tool *t, size_t n)
{
	for (size_t i = n; i > 1; i--) {
		size_t j = rnd() % i;
		struct stubs_tool x = t[i - 1];
		t[i - 1] = t[j];
		t[j] = x;
	}
}

static void test_collisions_stable_under_reordering(void **state)
{
	struct stubs_tool t[NCOLLIDE];
	struct stubs *first, *again;
	struct appl_err err = {0};
	(void)state;

	assert_int_equal(stubs_build(collide, NCOLLIDE, &first, &err), 0);
	names_ok(first);
	for (size_t i = 0; i < NCOLLIDE; i++)
		if (strcmp(python_name(first, collide_expect[i][0]), collide_expect[i][1]) != 0)
			fail_msg("%s became %s, not %s", collide_expect[i][0],
				 python_name(first, collide_expect[i][0]), collide_expect[i][1]);
	for (int round = 0; round < 30; round++) {
		memcpy(t, collide, sizeof(t));
		if (round == 0)
			for (size_t i = 0; i < NCOLLIDE / 2; i++) {
				struct stubs_tool x = t[i];
				t[i] = t[NCOLLIDE - 1 - i];
				t[NCOLLIDE - 1 - i] = x;
			}
		else
			shuffle(t, NCOLLIDE);
		assert_int_equal(stubs_build(t, NCOLLIDE, &again, &err), 0);
		same_result(first, again);
		stubs_free(again);
	}
	/* index order: by ns, then fn */
	for (size_t i = 1; i < stubs_count(first); i++) {
		int c = strcmp(stubs_ns(first, i - 1), stubs_ns(first, i));
		assert_true(c < 0 ||
			    (c == 0 && strcmp(stubs_fn(first, i - 1), stubs_fn(first, i)) < 0));
	}
	stubs_free(first);
}

/* ---- refusals ------------------------------------------------------------------------ */

static void refused(const char *server, const char *name, int code, const char *needle)
{
	struct stubs_tool t = {server, name, NULL, NULL};
	struct appl_err err = {0};
	struct stubs *s = (struct stubs *)1;

	assert_int_equal(stubs_tool_check(&t, &err), code);
	assert_int_equal(stubs_build(&t, 1, &s, &err), code);
	assert_null(s);
	if (!strstr(err.msg, needle))
		fail_msg("%s.%s: \"%s\" lacks \"%s\"", server ? server : "(null)",
			 name ? name : "(null)", err.msg, needle);
}

static void test_refusals(void **state)
{
	char longname[APPL_RUNNER_TOOL_NAME_MAX + 1];
	struct stubs_tool many[APPL_RUNNER_TOOLS_MAX + 1];
	struct stubs_tool dup[] = {
		{"s", "t", NULL, NULL}, {"s", "u", NULL, NULL}, {"s", "t", "again", NULL}};
	struct appl_err err = {0};
	struct stubs *s;
	(void)state;

	refused(NULL, "t", -EINVAL, "server: empty");
	refused("", "t", -EINVAL, "server: empty");
	refused("s", NULL, -EINVAL, "name: empty");
	refused("s", "", -EINVAL, "name: empty");
	refused("s", "a\nb", -EINVAL, "control character");
	refused("s", "a\x1b[2Jb", -EINVAL, "control character");
	refused("s", "a\xc2\x85", -EINVAL, "control character"); /* NEL, C1 */
	refused("s\t", "t", -EINVAL, "control character");
	refused("s", "a\xff", -EINVAL, "not UTF-8");
	refused("s", "a\xed\xa0\x80", -EINVAL, "not UTF-8"); /* a surrogate */
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	refused("s", longname, -EINVAL, "longer than 256");
	longname[APPL_RUNNER_TOOL_NAME_MAX - 2] = '\0'; /* "s." + 254 bytes = 256: fits */
	s = build1("s", longname, NULL, NULL);
	stubs_free(s);
	longname[APPL_RUNNER_TOOL_NAME_MAX - 2] = 'n';
	longname[APPL_RUNNER_TOOL_NAME_MAX - 1] = '\0';
	refused("s", longname, -EINVAL, "longer than 256");

	assert_int_equal(stubs_build(dup, 3, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "\"s.t\" given twice"));
	assert_null(s);
	for (size_t i = 0; i < APPL_RUNNER_TOOLS_MAX + 1; i++)
		many[i] = (struct stubs_tool){"s", "t", NULL, NULL};
	assert_int_equal(stubs_build(many, APPL_RUNNER_TOOLS_MAX + 1, &s, &err), -E2BIG);
	assert_int_equal(stubs_build(NULL, 0, &s, &err), 0);
	assert_int_equal(stubs_count(s), 0);
	assert_null(stubs_ns(s, 0));
	stubs_free(s);
	stubs_free(NULL);
}

/* ---- types ---------------------------------------------------------------------------- */

#define DEFS                                                                                       \
	"\"$defs\":{\"Int\":{\"type\":\"integer\"},"                                               \
	"\"Node\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"array\",\"items\":{\"$ref\":"      \
	"\"#/$defs/Node\"}}]},"                                                                    \
	"\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{\"$ref\":\"#/$defs/A\"},"                           \
	"\"Deep\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Deep\"}},"                     \
	"\"a/b\":{\"type\":\"boolean\"},\"t~\":{\"type\":\"number\"},"                             \
	"\"Wrap\":{\"allOf\":[{\"$ref\":\"#/$defs/Int\"}]}},"                                      \
	"\"definitions\":{\"Old\":{\"type\":\"string\"}}"

struct type_case {
	const char *schema;
	const char *type;
};

static const struct type_case type_cases[] = {
	{"{\"type\":\"string\"}", "str"},
	{"{\"type\":\"integer\"}", "int"},
	{"{\"type\":\"number\"}", "float"},
	{"{\"type\":\"boolean\"}", "bool"},
	{"{\"type\":\"null\"}", "None"},
	{"{\"type\":\"array\",\"items\":{\"type\":\"integer\"}}", "list[int]"},
	{"{\"type\":\"array\"}", "list[Any]"},
	{"{\"type\":\"array\",\"items\":[{\"type\":\"integer\"}]}", "list[Any]"},
	{"{\"type\":\"array\",\"items\":{\"type\":[\"string\",\"null\"]}}", "list[str | None]"},
	{"{\"type\":\"object\"}", "dict[str, Any]"},
	{"{\"type\":\"object\",\"properties\":{\"x\":{}}}", "dict[str, Any]"},
	{"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", "dict[str, int]"},
	{"{}", "Any"},
	{"true", "Any"},
	{"false", "Never"},
	{"{\"type\":\"foo\"}", "Any"},
	{"{\"type\":5}", "Any"},
	{"{\"type\":[]}", "Any"},
	{"{\"type\":[\"string\",\"null\"]}", "str | None"},
	{"{\"type\":[\"null\",\"string\"]}", "str | None"},
	{"{\"type\":[\"integer\",\"number\",\"integer\"]}", "int | float"},
	{"{\"type\":\"string\",\"nullable\":true}", "str | None"},
	{"{\"enum\":[\"a\",\"b\"]}", "Literal[\"a\", \"b\"]"},
	{"{\"type\":\"string\",\"enum\":[\"a\"]}", "Literal[\"a\"]"},
	{"{\"enum\":[\"a\",null]}", "Literal[\"a\"] | None"},
	{"{\"enum\":[1,\"x\",true,false]}", "Literal[1, \"x\", True, False]"},
	{"{\"enum\":[1.5,2.5]}", "float"},
	{"{\"enum\":[\"a\",[1],{\"k\":1}]}", "Literal[\"a\"] | list[Any] | dict[str, Any]"},
	{"{\"enum\":[]}", "Never"},
	{"{\"enum\":\"a\"}", "Any"},
	{"{\"enum\":[\"q\\\"uote\",\"back\\\\slash\",\"nl\\n\"]}",
	 "Literal[\"q\\\"uote\", \"back\\\\slash\", \"nl\\n\"]"},
	{"{\"enum\":[\"a1\",\"a2\",\"a3\",\"a4\",\"a5\",\"a6\",\"a7\",\"a8\",\"a9\",\"b1\",\"b2\","
	 "\"b3\",\"b4\",\"b5\",\"b6\",\"b7\",\"b8\"]}",
	 "str"},
	{"{\"enum\":[\"aaaaaaaaaaaa\",\"bbbbbbbbbbbb\",\"cccccccccccc\",\"dddddddddddd\","
	 "\"eeeeeeeeeeee\",\"ffffffffffff\",\"gggggggggggg\",\"hhhhhhhhhhhh\",\"iiiiiiiiiiii\","
	 "\"jjjjjjjjjjjj\",\"kkkkkkkkkkkk\"]}",
	 "str"},
	{"{\"const\":\"x\"}", "Literal[\"x\"]"},
	{"{\"const\":null}", "None"},
	{"{\"const\":2.5}", "float"},
	{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"}]}", "str | int"},
	{"{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]}", "str | None"},
	{"{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"string\"},{\"type\":\"string\"}]}",
	 "str | None"},
	{"{\"anyOf\":[{\"type\":\"string\"},{}]}", "Any"},
	{"{\"anyOf\":[{\"type\":\"string\"},false]}", "str"},
	{"{\"anyOf\":[{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"null\"}]},{\"type\":"
	 "\"integer\"}]}",
	 "str | int | None"},
	{"{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"number\"},{\"type\":"
	 "\"boolean\"},{\"type\":\"array\"},{\"type\":\"object\"},{\"const\":\"a\"},{\"const\":"
	 "\"b\"}]}",
	 "str | int | float | bool | list[Any] | dict[str, Any] | Literal[\"a\"] | Literal[\"b\"]"},
	{"{\"anyOf\":[{\"const\":1},{\"const\":2},{\"const\":3},{\"const\":4},{\"const\":5},"
	 "{\"const\":6},{\"const\":7},{\"const\":8},{\"const\":9}]}",
	 "Any"},
	{"{\"anyOf\":{\"type\":\"string\"}}", "Any"},
	{"{\"type\":\"object\",\"anyOf\":[{\"required\":[\"a\"]}]}", "dict[str, Any]"},
	{"{\"allOf\":[{\"$ref\":\"#/$defs/Int\"}]}", "int"},
	{"{\"allOf\":[{\"minimum\":1},{\"type\":\"integer\"}]}", "int"},
	{"{\"allOf\":[{}]}", "Any"},
	{"{\"properties\":{\"a\":{}}}", "dict[str, Any]"},
	{"{\"items\":{\"type\":\"string\"}}", "list[str]"},
	{"{\"$ref\":\"#/$defs/Int\"}", "int"},
	{"{\"$ref\":\"#/$defs/Wrap\"}", "int"},
	{"{\"$ref\":\"#/$defs/%49nt\"}", "int"},
	{"{\"$ref\":\"#/$defs/a~1b\"}", "bool"},
	{"{\"$ref\":\"#/$defs/t~0\"}", "float"},
	{"{\"$ref\":\"#/definitions/Old\"}", "str"},
	{"{\"$ref\":\"#/$defs/Node\"}", "str | list[Any]"},
	{"{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/Node\"}}", "list[str | list[Any]]"},
	{"{\"$ref\":\"#/$defs/A\"}", "Any"},
	{"{\"$ref\":\"#/$defs/Deep\"}", "list[Any]"},
	{"{\"$ref\":\"#/$defs/Nope\"}", "Any"},
	{"{\"$ref\":\"#/$defs/%00\"}", "Any"},
	{"{\"$ref\":\"#\"}", "dict[str, Any]"},
	{"{\"$ref\":\"#/properties/p\"}", "Any"},
	{"{\"$ref\":\"https://example.com/s.json\"}", "Any"},
	{"{\"$ref\":\"#anchor\"}", "Any"},
	{"{\"$ref\":5}", "Any"},
	{"{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":"
	 "{\"type\":\"integer\"}}}}}}}}}}}}}}}}}}}",
	 "list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list[list["
	 "Any]]]]]]]]]]]]]]]]]"},
	{"{\"anyOf\":[{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"enum\":["
	 "\"aaaaaaaaaaaaaaaa\"]}}},{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{"
	 "\"enum\":[\"bbbbbbbbbbbbbbbb\"]}}},{\"type\":\"array\",\"items\":{\"type\":\"array\","
	 "\"items\":{\"enum\":[\"cccccccccccccccc\"]}}},{\"type\":\"array\",\"items\":{\"type\":"
	 "\"array\",\"items\":{\"enum\":[\"dddddddddddddddd\"]}}}]}",
	 "Any"},
};

static void test_type_mapping(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(type_cases) / sizeof(type_cases[0]); i++) {
		char schema[4096], want[512];
		struct stubs *s;

		snprintf(schema, sizeof(schema),
			 "{\"type\":\"object\",\"properties\":{\"p\":%s},\"required\":[\"p\"]," DEFS
			 "}",
			 type_cases[i].schema);
		snprintf(want, sizeof(want), "s.t(p: %s)", type_cases[i].type);
		s = build1("s", "t", NULL, schema);
		if (strcmp(stubs_signature(s, 0), want) != 0)
			fail_msg("schema %s\n  gave %s\n  want %s", type_cases[i].schema,
				 stubs_signature(s, 0), want);
		names_ok(s);
		stubs_free(s);
	}
}

/* A schema of the whole input that is a $ref, or a cycle at the top. */
static void test_root_reference_and_cycles(void **state)
{
	struct stubs *s;
	(void)state;

	s = build1("s", "t", NULL,
		   "{\"$ref\":\"#/$defs/Args\",\"$defs\":{\"Args\":{\"type\":\"object\","
		   "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"],"
		   "\"additionalProperties\":false}}}");
	assert_string_equal(stubs_signature(s, 0), "s.t(a: int)");
	stubs_free(s);
	s = build1("s", "t", NULL, "{\"$ref\":\"#\"}");
	assert_string_equal(stubs_signature(s, 0), "s.t(**kwargs: Any)");
	stubs_free(s);
	s = build1("s", "t", NULL,
		   "{\"type\":\"object\",\"properties\":{\"tree\":{\"$ref\":\"#/$defs/T\"}},"
		   "\"$defs\":{\"T\":{\"type\":\"object\",\"properties\":{\"kids\":{\"type\":"
		   "\"array\",\"items\":{\"$ref\":\"#/$defs/T\"}}}}}}");
	assert_string_equal(stubs_signature(s, 0), "s.t(tree: dict[str, Any] = ...)");
	assert_non_null(strstr(stubs_text(s, 0), "tree: Keys: kids: list[dict[str, Any]]."));
	names_ok(s);
	stubs_free(s);
}

/* ---- signatures: defaults, order, odd names ---------------------------------------------- */

struct default_case {
	const char *prop;
	const char *piece;
};

static const struct default_case default_cases[] = {
	{"{\"type\":\"integer\",\"default\":5}", "p: int = 5"},
	{"{\"type\":\"integer\",\"default\":-7}", "p: int = -7"},
	{"{\"type\":\"string\",\"default\":\"x\"}", "p: str = \"x\""},
	{"{\"type\":\"string\",\"default\":\"a\\\"b\\\\c\\n\"}", "p: str = \"a\\\"b\\\\c\\n\""},
	{"{\"type\":\"string\",\"default\":\"\\u202e\\u0001\"}", "p: str = \"\\u202e\\x01\""},
	{"{\"type\":\"boolean\",\"default\":true}", "p: bool = True"},
	{"{\"type\":\"boolean\",\"default\":false}", "p: bool = False"},
	{"{\"type\":[\"string\",\"null\"],\"default\":null}", "p: str | None = None"},
	{"{\"type\":\"number\",\"default\":2.5}", "p: float = 2.5"},
	{"{\"type\":\"number\",\"default\":3.0}", "p: float = 3.0"},
	{"{\"type\":\"number\",\"default\":0.1}", "p: float = 0.1"},
	{"{\"type\":\"number\",\"default\":1e300}", "p: float = 1e+300"},
	{"{\"type\":\"array\",\"default\":[]}", "p: list[Any] = []"},
	{"{\"type\":\"array\",\"default\":[1,\"a\",null]}", "p: list[Any] = [1, \"a\", None]"},
	{"{\"type\":\"object\",\"default\":{}}", "p: dict[str, Any] = {}"},
	{"{\"type\":\"object\",\"default\":{\"k\":[1]}}", "p: dict[str, Any] = {\"k\": [1]}"},
	{"{\"default\":[[[1]]]}", "p: Any = ..."},
	{"{\"type\":\"string\",\"default\":"
	 "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
	 "p: str = ..."},
	{"{\"type\":\"string\"}", "p: str = ..."},
	{"{\"$ref\":\"#/$defs/Int\",\"default\":4}", "p: int = 4"},
	{"{\"$ref\":\"#/$defs/D\"}", "p: int = 9"},
};

static void test_defaults(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(default_cases) / sizeof(default_cases[0]); i++) {
		char schema[1024], want[512];
		struct stubs *s;

		snprintf(schema, sizeof(schema),
			 "{\"properties\":{\"p\":%s},\"additionalProperties\":false,\"$defs\":{"
			 "\"Int\":{\"type\":\"integer\"},\"D\":{\"type\":\"integer\",\"default\":9}"
			 "}}",
			 default_cases[i].prop);
		snprintf(want, sizeof(want), "s.t(%s)", default_cases[i].piece);
		s = build1("s", "t", NULL, schema);
		if (strcmp(stubs_signature(s, 0), want) != 0)
			fail_msg("property %s\n  gave %s\n  want %s", default_cases[i].prop,
				 stubs_signature(s, 0), want);
		names_ok(s);
		stubs_free(s);
	}
}

static void test_required_first_and_kwargs(void **state)
{
	struct stubs *s;
	const char *t;
	(void)state;

	s = build1("s", "t", NULL,
		   "{\"type\":\"object\",\"properties\":{\"z\":{\"type\":\"string\"},"
		   "\"a\":{\"type\":\"integer\",\"default\":1},\"m\":{\"type\":\"boolean\","
		   "\"default\":true},\"b\":{\"type\":\"number\"}},\"required\":[\"b\",\"x\",\"a\","
		   "\"x\",5],\"additionalProperties\":false}");
	assert_string_equal(stubs_signature(s, 0),
			    "s.t(a: int, b: float, x: Any, z: str = ..., m: bool = True)");
	t = stubs_text(s, 0);
	assert_non_null(strstr(t, "async def t(*, a: int, b: float, x: Any, z: str = ..., "
				  "m: bool = True):\n"));
	assert_non_null(strstr(t, "        a: Default: 1.\n")); /* required: shown in the doc */
	names_ok(s);
	stubs_free(s);

	/* what the schema leaves open becomes **kwargs */
	s = build1("s", "t", NULL, "{\"type\":\"object\"}");
	assert_string_equal(stubs_signature(s, 0), "s.t(**kwargs: Any)");
	stubs_free(s);
	s = build1("s", "t", NULL, "{\"type\":\"object\",\"properties\":{}}");
	assert_string_equal(stubs_signature(s, 0), "s.t()");
	assert_non_null(strstr(stubs_text(s, 0), "async def t():\n"));
	stubs_free(s);
	s = build1("s", "t", NULL, "{\"type\":\"object\",\"additionalProperties\":false}");
	assert_string_equal(stubs_signature(s, 0), "s.t()");
	stubs_free(s);
	s = build1("s", "t", NULL,
		   "{\"properties\":{\"a\":{}},\"additionalProperties\":{\"type\":\"string\"}}");
	assert_string_equal(stubs_signature(s, 0), "s.t(a: Any = ..., **kwargs: str)");
	stubs_free(s);
	s = build1("s", "t", NULL, "{\"properties\":{\"a\":{}},\"patternProperties\":{}}");
	assert_string_equal(stubs_signature(s, 0), "s.t(a: Any = ..., **kwargs: Any)");
	stubs_free(s);
	s = build1("s", "t", NULL, "[1]");
	assert_string_equal(stubs_signature(s, 0), "s.t(**kwargs: Any)");
	stubs_free(s);
}

static void test_non_identifier_properties(void **state)
{
	struct stubs *s;
	const char *t;
	(void)state;

	s = build1("s", "t", NULL,
		   "{\"type\":\"object\",\"properties\":{\"odd-name\":{\"type\":\"string\","
		   "\"description\":\"An odd one.\"},\"from\":{\"type\":\"integer\"},"
		   "\"caf\\u00e9\":{\"type\":\"boolean\"},\"kwargs\":{\"type\":\"string\"},"
		   "\"__x\":{\"type\":\"string\"},\"q\\\"\\\"\\\"z\":{},\"nl\\nx\":{}},"
		   "\"required\":[\"odd-name\",\"kwargs\"],\"additionalProperties\":false}");
	t = stubs_text(s, 0);
	assert_string_equal(stubs_signature(s, 0),
			    "s.t(kwargs: str, __x: str = ..., **kwargs_: Any)");
	assert_non_null(strstr(t, "async def t(*, kwargs: str, __x: str = ..., **kwargs_: Any):"));
	assert_non_null(strstr(t, "        \"odd-name\" (str, required): An odd one.\n"));
	assert_non_null(strstr(t, "        \"from\" (int)\n"));
	assert_non_null(strstr(t, "        \"caf\xc3\xa9\" (bool)\n"));
	assert_non_null(strstr(t, "        \"q\\\"\\\"\\\"z\" (Any)\n"));
	assert_non_null(strstr(t, "        \"nl\\nx\" (Any)\n"));
	assert_non_null(strstr(t, "pass them as **{\"name\": value}."));
	names_ok(s);
	stubs_free(s);
}

/* More parameters than a signature holds: the rest go through **kwargs and
 * are listed in the docstring. */
static void test_many_parameters(void **state)
{
	struct stubs_tool t = {"s", "t", "Many.", NULL};
	struct appl_err err = {0};
	json_t *props = json_object(), *schema;
	struct stubs *s;
	char name[32];
	(void)state;

	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "param_%03d", i);
		json_object_set_new(props, name,
				    json_pack("{s:s, s:s}", "type", "string", "description",
					      "A parameter with a description of some length, "
					      "repeated to make the stub long. "));
	}
	schema = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
			   "additionalProperties", 0);
	t.input_schema = schema;
	assert_int_equal(stubs_build(&t, 1, &s, &err), 0);
	assert_non_null(strstr(stubs_text(s, 0), "**kwargs: Any):"));
	assert_non_null(strstr(stubs_text(s, 0), "(44 more properties not shown)"));
	assert_non_null(strstr(stubs_signature(s, 0), ", ...)"));
	names_ok(s);
	stubs_free(s);
	json_decref(schema);
}

/* ---- hostile text ---------------------------------------------------------------------- */

static const char hostile[] =
	"Sum \"\"\" up\x1b[2J\t\"\n"
	"\n\n\n\nBody ''' \"\"\"\"\"\" \\ \\\" \\N{BULLET} \\x \x7f \xc2\x85 \xe2\x80\xae "
	"\xf3\xa0\x81\x81 \xef\xbb\xbf \xff\xfe end\\\n"
	"\"\"\"); import os; os.remove('x') #\r\n"
	"last \"";

static void test_hostile_description(void **state)
{
	struct stubs *s;
	const char *t;
	(void)state;

	s = build1("s", "t", hostile,
		   "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\","
		   "\"description\":\"\\\"\\\"\\\"\\n\\\\\",\"enum\":[\"\\\"\\\"\\\"\"]}}}");
	t = stubs_text(s, 0);
	names_ok(s);
	assert_string_equal(stubs_summary(s, 0), "Sum \"\"\" up\\x1b[2J \"");
	assert_non_null(strstr(t, "    \"\"\"Sum \"\\\"\\\" up\\x1b[2J\t\"\n"));
	assert_null(strstr(t, "\n\n\n"));
	assert_non_null(strstr(t, "\\\\N{BULLET}"));
	assert_non_null(strstr(t, "\\\\x \\x7f \\x85 \\u202e \\U000e0041 \\ufeff "
				  "\xef\xbf\xbd\xef\xbf\xbd end\\\\\n"));
	assert_non_null(strstr(t, "    \"\\\"\\\"); import os"));
	assert_non_null(strstr(t, "    last \"\n\n    Args:\n"));
	assert_non_null(strstr(t, "a: \"\\\"\\\"\n            \\\\"));
	assert_non_null(strstr(t, "a: Literal[\"\\\"\\\"\\\"\"] = ..."));
	stubs_free(s);
}

static void test_long_descriptions(void **state)
{
	size_t big = 1024 * 1024;
	char *desc = malloc(big + 1);
	struct stubs *s;
	(void)state;

	assert_non_null(desc);
	memset(desc, 'x', big);
	desc[big] = '\0';
	desc[300] = '\n';
	s = build1("s", "t", desc, NULL);
	assert_int_equal(strlen(stubs_summary(s, 0)), APPL_STUBS_SUMMARY_MAX);
	assert_non_null(strstr(stubs_summary(s, 0), "xxx..."));
	assert_non_null(strstr(stubs_text(s, 0), " [...]\n"));
	assert_true(strlen(stubs_text(s, 0)) < APPL_STUBS_DOC_DESC_MAX + 1024);
	names_ok(s);
	stubs_free(s);
	/* every byte a control character: escapes are cut whole */
	memset(desc, '\x01', big);
	s = build1("s", "t", desc, NULL);
	assert_true(strlen(stubs_summary(s, 0)) <= APPL_STUBS_SUMMARY_MAX);
	assert_non_null(strstr(stubs_summary(s, 0), "\\x01..."));
	names_ok(s);
	stubs_free(s);
	/* a first line too long for the summary: the body shows all of it */
	memset(desc, 'y', 500);
	memcpy(desc + 500, "\nsecond", 8);
	s = build1("s", "t", desc, NULL);
	assert_non_null(strstr(stubs_text(s, 0), "yyy...\n"));
	assert_non_null(strstr(stubs_text(s, 0), "yyyy\n    second\n"));
	names_ok(s);
	stubs_free(s);
	free(desc);
}

/* ---- the cell line, the description ----------------------------------------------------- */

static json_t *heavy_schema(int props)
{
	json_t *p = json_object();
	char name[32];

	for (int i = 0; i < props; i++) {
		snprintf(name, sizeof(name), "p\"%d-\\", i);
		json_object_set_new(
			p, name,
			json_pack("{s:s, s:s}", "type", "string", "description",
				  "\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\\"\\"));
	}
	return json_pack("{s:o}", "properties", p);
}

/* 1024 tools with the longest names and stubs still fit one cell line with
 * the largest code of the worst characters. */
static void test_runner_tools_fit_a_cell_line(void **state)
{
	struct stubs_tool *t = calloc(APPL_RUNNER_TOOLS_MAX, sizeof(*t));
	char(*names)[APPL_RUNNER_TOOL_NAME_MAX] = calloc(APPL_RUNNER_TOOLS_MAX, sizeof(*names));
	char *desc = malloc(20000), *code = malloc(APPL_CELL_CODE_MAX), *line;
	json_t *schema = heavy_schema(40), *tools;
	struct cell_files_limits files = {.max_count = APPL_FILES_MAX_COUNT_CEIL,
					  .max_bytes = APPL_FILES_MAX_BYTES_CEIL,
					  .max_total = APPL_FILES_MAX_TOTAL_BYTES_CEIL};
	struct appl_err err = {0};
	size_t total = 0, len;
	struct stubs *s;
	(void)state;

	for (size_t i = 0; i < 20000; i++)
		desc[i] = "\"\\\n"[i % 3];
	desc[19999] = '\0';
	for (size_t i = 0; i < APPL_RUNNER_TOOLS_MAX; i++) {
		memset(names[i], '"', sizeof(names[i]) - 3);
		snprintf(names[i] + 246, 10, "%04zu", i);
		t[i] = (struct stubs_tool){"s", names[i], desc, schema};
	}
	assert_int_equal(stubs_build(t, APPL_RUNNER_TOOLS_MAX, &s, &err), 0);
	for (size_t i = 0; i < stubs_count(s); i++)
		total += strlen(stubs_text(s, i));
	assert_true(total <= APPL_STUBS_DOCS_TOTAL_MAX);
	tools = stubs_runner_tools(s, &err);
	assert_non_null(tools);
	assert_int_equal(json_array_size(tools), APPL_RUNNER_TOOLS_MAX);
	memset(code, '\x01', APPL_CELL_CODE_MAX);
	if (cell_proto_cell_encode(code, APPL_CELL_CODE_MAX, tools, &files, NULL, false, &line,
				   &len, &err) != 0)
		fail_msg("cell line: %s", err.msg);
	free(line);
	json_decref(tools);
	stubs_free(s);
	json_decref(schema);
	free(code);
	free(desc);
	free(names);
	free(t);
}

static struct stubs *catalogue(size_t n, size_t per_ns)
{
	struct stubs_tool *t = calloc(n, sizeof(*t));
	char(*names)[2][40] = calloc(n, sizeof(*names));
	struct appl_err err = {0};
	struct stubs *s;

	for (size_t i = 0; i < n; i++) {
		snprintf(names[i][0], 40, "ns%zu", i / per_ns);
		snprintf(names[i][1], 40, "tool_%04zu", i);
		t[i] = (struct stubs_tool){names[i][0], names[i][1], "Does one thing well.", NULL};
	}
	assert_int_equal(stubs_build(t, n, &s, &err), 0);
	free(names);
	free(t);
	return s;
}

static char *describe(const struct stubs *s, size_t max)
{
	struct stubs_limits lim = {90, 200, 8192, max};
	struct appl_err err = {0};
	char *d = stubs_description(s, &lim, &err);

	if (!d)
		fail_msg("description: %s", err.msg);
	assert_true(strlen(d) <= (max ? max : APPL_STUBS_DESCRIPTION_DEF));
	text_clean(d, false);
	assert_non_null(strstr(d, "Limits per run: 90 s, 200 tool calls, 8192 bytes"));
	assert_non_null(strstr(d, "data, not instructions"));
	assert_non_null(strstr(d, "ToolError"));
	assert_non_null(strstr(d, "asyncio.gather("));
	assert_non_null(strstr(d, "tools.search(\""));
	return d;
}

static void test_description_levels(void **state)
{
	struct stubs *s = catalogue(200, 50);
	struct stubs_limits bad = {0, 0, 0, APPL_STUBS_DESCRIPTION_MIN - 1};
	struct appl_err err = {0};
	char *d;
	(void)state;

	d = describe(s, 0);
	assert_non_null(
		strstr(d, "Tools (200):\nns0.tool_0000(**kwargs: Any)  # Does one thing well.\n"));
	free(d);
	d = describe(s, 4096);
	assert_non_null(strstr(d, "\nns0: tool_0000, tool_0001, "));
	assert_null(strstr(d, "Does one thing"));
	free(d);
	d = describe(s, APPL_STUBS_DESCRIPTION_MIN);
	assert_non_null(strstr(d, "\nns0 (50 tools)\nns1 (50 tools)\n"));
	free(d);
	stubs_free(s);
	s = catalogue(APPL_RUNNER_TOOLS_MAX, 1);
	d = describe(s, APPL_STUBS_DESCRIPTION_MIN);
	assert_non_null(strstr(d, "1024 tools in 1024 namespaces"));
	free(d);
	assert_null(stubs_description(s, &bad, &err));
	assert_int_equal(err.code, -EINVAL);
	bad.max_bytes = APPL_STUBS_DESCRIPTION_CEIL + 1;
	assert_null(stubs_description(s, &bad, &err));
	stubs_free(s);
	s = catalogue(0, 1);
	d = stubs_description(s, NULL, &err);
	assert_non_null(strstr(d, "No tools are available."));
	assert_null(strstr(d, "Limits per run"));
	free(d);
	stubs_free(s);
}

static void test_description_example(void **state)
{
	struct stubs_tool t[] = {
		{"everything", "get-sum", "Adds two numbers.\nMore detail.",
		 load("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
		      "\"b\":{\"type\":\"integer\",\"default\":5}},\"required\":[\"a\"]}")},
		{"everything", "echo", "Echoes \x1b[1mtext\x1b[0m\nback.",
		 load("{\"type\":\"object\",\"properties\":{\"message\":{\"type\":\"string\"}},"
		      "\"required\":[\"message\"]}")},
	};
	struct appl_err err = {0};
	struct stubs *s;
	char *d;
	(void)state;

	assert_int_equal(stubs_build(t, 2, &s, &err), 0);
	d = describe(s, 0);
	assert_non_null(strstr(d, "    r = await everything.echo(...)\n"));
	assert_non_null(strstr(d, "Tools (2):\n"
				  "everything.echo(message: str)  # Echoes \\x1b[1mtext\\x1b[0m\n"
				  "everything.get_sum(a: int, b: int = 5)  # Adds two numbers.\n"));
	assert_null(strstr(d, "session"));
	free(d);
	/* a role with sessions is told how to keep and end one */
	{
		struct stubs_limits lim = {90, 200, 8192, 0, 600};

		d = stubs_description(s, &lim, &err);
		assert_non_null(d);
		assert_non_null(strstr(d, "pass session: \"new\""));
		assert_non_null(strstr(d, "{session: HANDLE, end: true}"));
		assert_non_null(strstr(d, "after 600 s without a cell"));
		free(d);
	}
	stubs_free(s);
	json_decref((json_t *)t[0].input_schema);
	json_decref((json_t *)t[1].input_schema);
}

/* The longest names fit every line the description writes about them. */
static void test_description_long_names(void **state)
{
	static const char n64[] =
		"n123456789012345678901234567890123456789012345678901234567890123";
	struct stubs_tool t[] = {{n64, n64, "First.", NULL}, {n64, "b", "Second.", NULL}};
	struct appl_err err = {0};
	struct stubs *s;
	char want[300];
	char *d;
	(void)state;

	assert_int_equal(stubs_build(t, 2, &s, &err), 0);
	d = describe(s, 0);
	snprintf(want, sizeof(want), "asyncio.gather(%s.b(...), %s.%s(...))", n64, n64, n64);
	assert_non_null(strstr(d, want));
	snprintf(want, sizeof(want), "\n%s.%s(**kwargs: Any)  # First.\n", n64, n64);
	assert_non_null(strstr(d, want));
	free(d);
	stubs_free(s);
}

/* ---- a big varied sample ------------------------------------------------------------------ */

static const char *const name_bits[] = {
	"a",
	"get-sum",
	"from",
	"class",
	"__init__",
	"\xe6\x97\xa5",
	"odd name",
	"x\"y",
	"back\\slash",
	"kwargs",
	"9lives",
	"caf\xc3\xa9",
	"tools",
	"print",
	"_",
	"a.b",
	"\xe2\x80\xae",
	"Ab",
	"async",
	"None",
	"self",
	"\xf3\xa0\x81\x81",
	"'",
	"\"\"\"",
};

static const char *const text_bits[] = {
	"Plain text.",
	"\"\"\"",
	"'''",
	"\\",
	"\\N{",
	"\n",
	"\r\n",
	"\t",
	"\x01",
	"\x1b[31m",
	"\xe2\x80\xae",
	"\xf3\xa0\x81\x81",
	"\xff",
	"\"",
	"\n\n\n\n",
	"# comment",
	"\"\"\"); import os #",
	"\xc3\xa9",
	"x\\",
	"\\\"",
	"    indented",
	"{}",
	"%s%n",
};

static const char *pick(const char *const *bits, size_t n)
{
	return bits[rnd() % n];
}

#define PICK(a) pick(a, sizeof(a) / sizeof(a[0]))

/* Text made of hostile bits. Tool descriptions are C strings and may be
 * any bytes (utf8 false); strings inside a schema come from a JSON parser
 * and are always UTF-8. */
static json_t *random_text(int parts, bool utf8)
{
	char buf[2048] = "";

	for (int i = 0; i < parts; i++) {
		size_t len = strlen(buf);
		const char *bit = PICK(text_bits);
		if (!utf8 || (unsigned char)bit[0] != 0xff)
			snprintf(buf + len, sizeof(buf) - len, "%s", bit);
	}
	return json_stringn_nocheck(buf, strlen(buf));
}

static json_t *random_value(int depth)
{
	switch (rnd() % (depth > 1 ? 6 : 8)) {
	case 0:
		return json_null();
	case 1:
		return json_boolean(rnd() % 2);
	case 2:
		return json_integer((json_int_t)(rnd() % 2001) - 1000);
	case 3:
		return json_real((double)(rnd() % 100000) / 64.0);
	case 4:
	case 5:
		return json_string(PICK(name_bits));
	case 6:
		return json_pack("[oo]", random_value(depth + 1), random_value(depth + 1));
	default:
		return json_pack("{so}", PICK(name_bits), random_value(depth + 1));
	}
}

static json_t *random_schema(int depth);

static json_t *random_props(int depth, json_t *s)
{
	json_t *props = json_object(), *req = json_array();
	int n = (int)(rnd() % 6);

	for (int i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "%s%s", PICK(name_bits),
			 rnd() % 2 ? "" : PICK(name_bits));
		json_object_set_new(props, name, random_schema(depth + 1));
		if (rnd() % 2)
			json_array_append_new(req, json_string(name));
	}
	json_object_set_new(s, "properties", props);
	json_object_set_new(s, "required", req);
	if (rnd() % 3 == 0)
		json_object_set_new(s, "additionalProperties",
				    rnd() % 2 ? json_false() : random_schema(depth + 1));
	return s;
}

static const char *const simple[] = {"string", "integer", "number", "boolean", "null"};
static const char *const refs[] = {"#/$defs/Int",  "#/$defs/Node", "#/$defs/A",
				   "#/$defs/Deep", "#/$defs/none", "#",
				   "http://x/y",   "#/$defs/a~1b"};

static json_t *random_shape(int depth)
{
	switch (rnd() % (depth > 4 ? 3 : 10)) {
	case 0:
		return json_pack("{ss}", "type", PICK(simple));
	case 1:
		return json_pack("{s[ss]}", "type", PICK(simple), PICK(simple));
	case 2:
		return json_pack("{s[ooo]}", "enum", random_value(2), random_value(2),
				 random_value(2));
	case 3:
		return json_pack("{sss:o}", "type", "array", "items", random_schema(depth + 1));
	case 4:
		return random_props(depth, json_pack("{ss}", "type", "object"));
	case 5:
		return json_pack("{s[oo]}", rnd() % 2 ? "anyOf" : "oneOf", random_schema(depth + 1),
				 random_schema(depth + 1));
	case 6:
		return json_pack("{ss}", "$ref", PICK(refs));
	case 7:
		return json_pack("{s[o]}", "allOf", random_schema(depth + 1));
	case 8:
		return json_pack("{so}", "const", random_value(1));
	default:
		return rnd() % 2 ? json_object() : json_boolean(rnd() % 2);
	}
}

static json_t *random_schema(int depth)
{
	json_t *s = random_shape(depth);

	if (!json_is_object(s))
		return s;
	if (rnd() % 3 == 0)
		json_object_set_new(s, "description", random_text(1 + (int)(rnd() % 6), true));
	if (rnd() % 4 == 0)
		json_object_set_new(s, "default", random_value(0));
	if (rnd() % 6 == 0)
		json_object_set_new(s, "format", json_string(PICK(name_bits)));
	if (rnd() % 6 == 0)
		json_object_set_new(s, "minimum", json_integer((json_int_t)(rnd() % 10)));
	if (rnd() % 8 == 0)
		json_object_set_new(s, "nullable", json_true());
	return s;
}

static json_t *random_input_schema(void)
{
	json_t *s = random_props(0, json_pack("{ss}", "type", "object"));
	json_t *defs = load("{" DEFS "}");

	json_object_update(s, defs); /* "$defs" and "definitions" */
	json_decref(defs);
	return s;
}

static void sample_write(const struct stubs *s, json_t **schemas, json_t **descs,
			 const struct stubs_tool *t, size_t n, FILE *f)
{
	for (size_t i = 0; i < stubs_count(s); i++) {
		size_t k = 0;
		json_t *rec, *valid;
		while (k < n &&
		       strcmp(stubs_mcp_name(s, i) + strlen(t[k].server) + 1, t[k].name) != 0)
			k++;
		assert_true(k < n);
		rec = json_pack("{ss ss ss ss ss ss ss ss?}", "mcp", stubs_mcp_name(s, i), "ns",
				stubs_ns(s, i), "fn", stubs_fn(s, i), "text", stubs_text(s, i),
				"summary", stubs_summary(s, i), "signature", stubs_signature(s, i),
				"returns", stubs_returns(s, i), "why_not", stubs_why_not(s, i));
		assert_non_null(rec);
		json_object_set_new(rec, "output",
				    t[k].output_schema ? json_incref((json_t *)t[k].output_schema)
						       : json_null());
		json_object_set(rec, "schema", schemas[k] ? schemas[k] : json_null());
		/* a description that is not UTF-8 is tested here, not in Python */
		valid = descs[k] ? json_string(json_string_value(descs[k])) : NULL;
		json_object_set_new(rec, "description", valid ? valid : json_null());
		assert_int_equal(json_dumpf(rec, f, JSON_COMPACT), 0);
		fputc('\n', f);
		json_decref(rec);
	}
}

#define NSAMPLE 600

static void test_sample(void **state)
{
	struct stubs_tool *t = calloc(NSAMPLE, sizeof(*t));
	json_t **schemas = calloc(NSAMPLE, sizeof(*schemas));
	json_t **descs = calloc(NSAMPLE, sizeof(*descs));
	char(*names)[80] = calloc(NSAMPLE, sizeof(*names));
	json_t **outputs = calloc(NSAMPLE, sizeof(*outputs));
	const char *out = getenv("STUBS_SAMPLE_OUT");
	struct appl_err err = {0};
	struct stubs *s;
	(void)state;

	for (size_t i = 0; i < NSAMPLE; i++) {
		snprintf(names[i], sizeof(names[i]), "%s%s%zu", PICK(name_bits), PICK(name_bits),
			 i);
		schemas[i] = i % 10 == 9 ? NULL : random_input_schema();
		descs[i] = i % 7 == 6 ? NULL : random_text(1 + (int)(rnd() % 12), false);
		t[i] = (struct stubs_tool){i % 3 == 0	? "everything"
					   : i % 3 == 1 ? "print"
							: "t\xc3\xa9",
					   names[i], json_string_value(descs[i]), schemas[i]};
		/* some say what they return (a schema as random as the inputs'),
		 * some are stand-ins with a hostile reason */
		if (i % 4 == 1)
			t[i].output_schema = outputs[i] = random_input_schema();
		if (i % 11 == 5)
			t[i].why_not = "not \"allowed\"\n\"\"\" + os.system('x') \u202e";
	}
	json_decref(schemas[0]);
	t[0].input_schema = schemas[0] = heavy_schema(300);
	assert_int_equal(stubs_build(t, NSAMPLE, &s, &err), 0);
	names_ok(s);
	if (out) {
		FILE *f = fopen(out, "w");
		assert_non_null(f);
		sample_write(s, schemas, descs, t, NSAMPLE, f);
		assert_int_equal(fclose(f), 0);
	}
	stubs_free(s);
	for (size_t i = 0; i < NSAMPLE; i++) {
		json_decref(schemas[i]);
		json_decref(descs[i]);
		json_decref(outputs[i]);
	}
	free(outputs);
	free(names);
	free(descs);
	free(schemas);
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mangling_table),
		cmocka_unit_test(test_tools_is_reserved_by_the_runner_rules),
		cmocka_unit_test(test_args_is_reserved_for_code_tools),
		cmocka_unit_test(test_collisions_stable_under_reordering),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_type_mapping),
		cmocka_unit_test(test_root_reference_and_cycles),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_required_first_and_kwargs),
		cmocka_unit_test(test_non_identifier_properties),
		cmocka_unit_test(test_many_parameters),
		cmocka_unit_test(test_hostile_description),
		cmocka_unit_test(test_long_descriptions),
		cmocka_unit_test(test_runner_tools_fit_a_cell_line),
		cmocka_unit_test(test_description_levels),
		cmocka_unit_test(test_description_example),
		cmocka_unit_test(test_description_long_names),
		cmocka_unit_test(test_sample),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
