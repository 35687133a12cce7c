/* test_bridge.c: every refusal of the bridge (pkg/bridge), the result's turn
 * into a value, and a run's budget, in-flight cap, queue and teardown, with
 * a fake upstream that records what it was sent. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "audit/audit.h"
#include "base/fs.h"
#include "base/utf8.h"
#include "bridge/bridge.h"
#include "bridge/internal.h"
#include "cell/cell.h"
#include "loop/loop.h"
#include "metrics/metrics.h"
#include "policy/policy.h"
#include "upstream/set.h"

/* Server a: its read tools, plus a.put as a write. Server b: everything.
 * reader may call a's tools and never write; writer may call all. */
static const char POLICY[] =
	"{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
	"\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:"
	"0000000000000000000000000000000000000000000000000000000000000000\"},"
	"\"servers\":{\"a\":{\"command\":[\"/bin/true\"]},\"b\":{\"command\":[\"/bin/true\"]},"
	"\"down\":{\"command\":[\"/bin/true\"]}},"
	"\"tools\":{\"a.*\":{\"access\":\"read\"},\"a.put\":{\"access\":\"write\"},"
	"\"b.*\":{\"access\":\"write\"}},"
	"\"roles\":{\"reader\":{\"tools\":[\"a.*\"],\"write\":false},"
	"\"writer\":{\"tools\":[\"a.*\",\"b.*\"],\"write\":true}}}";

static const char SUM_SCHEMA[] = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\"},"
				 "\"b\":{\"type\":\"number\"}},\"required\":[\"a\",\"b\"]}";

static struct policy *pol;

static json_t *load(const char *text)
{
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY, &jerr);

	if (!v)
		fail_msg("bad test JSON %s: %s", text, jerr.text);
	return v;
}

static int setup(void **state)
{
	struct appl_err err = {0};
	(void)state;

	if (policy_parse(POLICY, strlen(POLICY), "/", &pol, &err) != 0)
		fail_msg("policy: %s", err.msg);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	policy_free(pol);
	return 0;
}

/* The catalog every test uses, for role. */
static struct bridge_catalog *catalog(const char *role)
{
	json_t *sum = load(SUM_SCHEMA);
	json_t *open = load("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}},"
			    "\"additionalProperties\":true}");
	json_t *bare = load("{\"type\":\"object\"}");
	json_t *unsup = load("{\"type\":\"object\",\"unevaluatedProperties\":false}");
	json_t *bad = load("{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#/nowhere\"}}}");
	struct bridge_tool_in t[] = {
		{"a", "sum", "Add.", sum, true, NULL},
		{"a", "open", "Open.", open, true, NULL},
		{"a", "bare", NULL, bare, true, NULL},
		{"a", "put", "Write.", sum, false, NULL},
		{"a", "hidden", "Not read-only, not listed.", sum, false, NULL},
		{"a", "unsup", NULL, unsup, true, NULL},
		{"a", "bad", NULL, bad, true, NULL},
		{"a", "noschema", NULL, NULL, true, NULL},
		{"b", "echo", "Echo.", open, false, NULL},
		{"a", "sum", "A twin: dropped.", bare, true, NULL},
		{"c", "x", "A server the policy does not name.", bare, true, NULL},
	};
	struct bridge_catalog *c = NULL;
	struct appl_err err = {0};

	if (bridge_catalog_new(pol, role, t, sizeof(t) / sizeof(t[0]), &c, &err) != 0)
		fail_msg("catalog: %s", err.msg);
	json_decref(sum);
	json_decref(open);
	json_decref(bare);
	json_decref(unsup);
	json_decref(bad);
	return c;
}

static const char *why_not(const struct bridge_catalog *c, const char *server, const char *name)
{
	struct bridge_tool_info info;

	for (size_t i = 0; bridge_catalog_info(c, i, &info) == 0; i++)
		if (!strcmp(info.server, server) && !strcmp(info.name, name))
			return info.why_not ? info.why_not : "offered";
	return "absent";
}

static void test_catalog_offers_only_allowed_checkable_tools(void **state)
{
	struct bridge_catalog *r = catalog("reader"), *w = catalog("writer"), *n = catalog(NULL);
	const struct stubs *s = bridge_catalog_stubs(r);
	(void)state;

	assert_int_equal(bridge_catalog_count(r), 10); /* the twin is gone */
	assert_string_equal(why_not(r, "a", "sum"), "offered");
	assert_string_equal(why_not(r, "a", "bare"), "offered");
	assert_string_equal(why_not(r, "a", "put"), policy_verdict_text(POLICY_DENY_WRITE));
	assert_string_equal(why_not(w, "a", "put"), "offered");
	assert_string_equal(why_not(r, "a", "hidden"), policy_verdict_text(POLICY_DENY_UNLISTED));
	assert_string_equal(why_not(r, "b", "echo"), policy_verdict_text(POLICY_DENY_ROLE));
	assert_string_equal(why_not(w, "b", "echo"), "offered");
	assert_string_equal(why_not(r, "c", "x"), policy_verdict_text(POLICY_DENY_UNLISTED));
	assert_string_equal(why_not(n, "a", "sum"), policy_verdict_text(POLICY_DENY_NO_ROLE));
	assert_non_null(strstr(why_not(r, "a", "unsup"), "unsupported"));
	assert_non_null(strstr(why_not(r, "a", "bad"), "invalid"));
	assert_non_null(strstr(why_not(r, "a", "noschema"), "no input schema"));
	/* reader: a.bare, a.open, a.sum offered; the other seven are stand-ins */
	assert_int_equal(stubs_count(s), 10);
	assert_int_equal(stubs_offered_count(s), 3);
	assert_string_equal(stubs_mcp_name(s, 6), "a.sum");
	assert_null(stubs_why_not(s, 6));
	assert_non_null(strstr(stubs_text(s, 6), "Add.")); /* the first of the twins */
	assert_string_equal(stubs_mcp_name(s, 5), "a.put");
	assert_string_equal(stubs_why_not(s, 5), policy_verdict_text(POLICY_DENY_WRITE));
	/* a stand-in shows nothing of the tool but its name and the reason */
	assert_null(strstr(stubs_text(s, 5), "Write."));
	assert_non_null(strstr(stubs_text(s, 5), "Not offered here: a write tool"));
	assert_string_equal(bridge_catalog_pyname(r, "a", "put"), "a.put");
	/* and the namespace of server down, which listed nothing */
	assert_int_equal(json_array_size(bridge_catalog_runner_tools(r)), 11);
	assert_int_equal(stubs_unavailable_count(s), 1);
	assert_string_equal(stubs_unavailable_get(s, 0), "down");
	assert_int_equal(stubs_offered_count(bridge_catalog_stubs(w)), 5);
	assert_int_equal(stubs_offered_count(bridge_catalog_stubs(n)), 0);
	assert_int_equal(stubs_count(bridge_catalog_stubs(n)), 10);
	bridge_catalog_unref(r);
	bridge_catalog_unref(w);
	bridge_catalog_unref(n);
}

/* Append text to buf (of cap bytes), which must have room. */
static void append(char *buf, size_t cap, const char *text)
{
	size_t n = strlen(buf), t = strlen(text);

	assert_true(n + t < cap);
	memcpy(buf + n, text, t + 1);
}

/* Check tool(args) as role; returns the code and leaves the refusal in msg,
 * and the audit log's in logged. */
static char msg[APPL_TOOL_ERROR_MAX + 1], logged[APPL_TOOL_ERROR_MAX + 1];

static int check(const char *role, const char *tool, const char *args, size_t cap)
{
	struct bridge_catalog *c = catalog(role);
	json_t *a = load(args);
	const char *server, *name;
	int rc;

	msg[0] = logged[0] = '\0';
	rc = bridge_check(c, tool, a, cap, &server, &name, msg, sizeof(msg), logged,
			  sizeof(logged));
	if (rc == 0) {
		assert_non_null(server);
		assert_non_null(name);
	} else {
		assert_null(server);
		assert_true(strlen(msg) > 0 && strlen(msg) <= APPL_TOOL_ERROR_MAX);
		assert_int_equal(appl_utf8_prefix(msg, strlen(msg)), strlen(msg));
		assert_true(strlen(logged) > 0 && strlen(logged) <= APPL_TOOL_ERROR_MAX);
	}
	json_decref(a);
	bridge_catalog_unref(c);
	return rc;
}

/* A server that listed nothing: a namespace in the cell, and every name
 * of it answered with the fixed unavailable text. */
static void test_a_server_with_no_tools_is_unavailable(void **state)
{
	struct bridge_catalog *c = catalog("writer");
	const json_t *rt = bridge_catalog_runner_tools(c), *e;
	size_t i, servers = 0;
	(void)state;

	json_array_foreach(rt, i, e) {
		if (json_object_get(e, "server")) {
			servers++;
			assert_string_equal(json_string_value(json_object_get(e, "server")),
					    "down");
			assert_string_equal(json_string_value(json_object_get(e, "ns")), "down");
		}
	}
	assert_int_equal(servers, 1);
	bridge_catalog_unref(c);
	assert_int_equal(check("writer", "down.never_listed", "{}", 16384), -EAGAIN);
	assert_string_equal(
		msg, "upstream_unavailable: the server of down.never_listed is not available");
	/* a server that listed tools: an unknown name is still no such tool */
	assert_int_equal(check("writer", "a.nope", "{}", 16384), -EPERM);
	assert_non_null(strstr(msg, "no such tool"));
}

static void test_check_allows_a_good_call(void **state)
{
	(void)state;
	assert_int_equal(check("reader", "a.sum", "{\"a\":1,\"b\":2.5}", 16384), 0);
	assert_int_equal(check("reader", "a.open", "{\"x\":\"s\",\"y\":[1]}", 16384), 0);
	assert_int_equal(check("reader", "a.bare", "{\"anything\":1}", 16384), 0);
	assert_int_equal(check("writer", "a.put", "{\"a\":1,\"b\":2}", 16384), 0);
}

static void test_check_refuses_unknown_tools(void **state)
{
	(void)state;
	assert_int_equal(check("writer", "nodot", "{}", 16384), -EPERM);
	assert_non_null(strstr(msg, "no such tool"));
	assert_int_equal(check("writer", "z.sum", "{}", 16384), -EPERM);
	assert_int_equal(check("writer", "a.nope", "{}", 16384), -EPERM);
	assert_int_equal(check("writer", ".sum", "{}", 16384), -EPERM);
	assert_int_equal(check("writer", "a.", "{}", 16384), -EPERM);
	/* a server part longer than any server name */
	assert_int_equal(
		check("writer", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sum", "{}", 16384),
		-EPERM);
}

static void test_check_refuses_by_policy(void **state)
{
	(void)state;
	assert_int_equal(check("reader", "a.put", "{\"a\":1,\"b\":2}", 16384), -EPERM);
	assert_non_null(strstr(msg, policy_verdict_text(POLICY_DENY_WRITE)));
	assert_int_equal(check("reader", "b.echo", "{}", 16384), -EPERM);
	assert_non_null(strstr(msg, policy_verdict_text(POLICY_DENY_ROLE)));
	assert_int_equal(check("writer", "a.hidden", "{\"a\":1,\"b\":2}", 16384), -EPERM);
	assert_int_equal(check("nobody", "a.sum", "{\"a\":1,\"b\":2}", 16384), -EPERM);
	assert_int_equal(check("writer", "c.x", "{}", 16384), -EPERM);
}

static void test_check_refuses_unusable_schemas(void **state)
{
	(void)state;
	assert_int_equal(check("reader", "a.unsup", "{}", 16384), -ENOTSUP);
	assert_non_null(strstr(msg, "unsupported"));
	assert_int_equal(check("reader", "a.bad", "{}", 16384), -ENOTSUP);
	assert_int_equal(check("reader", "a.noschema", "{}", 16384), -ENOTSUP);
}

static void test_check_refuses_bad_arguments(void **state)
{
	(void)state;
	/* wrong type */
	assert_int_equal(check("reader", "a.sum", "{\"a\":\"1\",\"b\":2}", 16384), -EINVAL);
	assert_non_null(strstr(msg, "invalid arguments"));
	/* missing */
	assert_int_equal(check("reader", "a.sum", "{\"a\":1}", 16384), -EINVAL);
	/* undeclared name, in a schema that says nothing of others */
	assert_int_equal(check("reader", "a.sum", "{\"a\":1,\"b\":2,\"c\":3}", 16384), -EINVAL);
	assert_non_null(strstr(msg, "'c' is not a parameter"));
	/* not an object */
	assert_int_equal(check("reader", "a.sum", "[1,2]", 16384), -EINVAL);
	/* too large: {"a":1,"b":2} is 13 bytes */
	assert_int_equal(check("reader", "a.sum", "{\"a\":1,\"b\":2}", 12), -EINVAL);
	assert_non_null(strstr(msg, "13 bytes"));
	assert_int_equal(check("reader", "a.sum", "{\"a\":1,\"b\":2}", 13), 0);
}

/* The code is told which name or value failed; the audit log only that
 * the arguments did not match, and by which keyword. */
static void test_the_logged_refusal_holds_nothing_of_the_arguments(void **state)
{
	static const struct {
		const char *tool, *args, *shown, *logged;
	} cases[] = {
		{"a.sum", "{\"a\":1,\"b\":2,\"MARKER\":3}", "'MARKER' is not a parameter",
		 "refused: a.sum: an argument's name is not a parameter of this tool"},
		{"a.sum", "{\"a\":\"MARKER\",\"b\":2}", "/a: expected number, got string",
		 "refused: a.sum: the arguments do not match the tool's input schema (type)"},
		{"a.sum", "{\"a\":1}", "missing property \"b\"",
		 "refused: a.sum: the arguments do not match the tool's input schema (required)"},
		{"a.open", "{\"MARKER\":1,\"x\":{\"MARKER\":\"MARKER\"}}", "/x: expected string",
		 "refused: a.open: the arguments do not match the tool's input schema (type)"},
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(check("reader", cases[i].tool, cases[i].args, 16384), -EINVAL);
		assert_non_null(strstr(msg, cases[i].shown));
		assert_string_equal(logged, cases[i].logged);
	}
	/* a refusal that quotes nothing of them is logged as the code sees it */
	assert_int_equal(check("reader", "a.sum", "{\"a\":1,\"b\":2}", 12), -EINVAL);
	assert_string_equal(logged, msg);
	assert_int_equal(check("reader", "a.put", "{\"a\":1,\"b\":2}", 16384), -EPERM);
	assert_string_equal(logged, msg);
	assert_int_equal(check("reader", "a.nope", "{}", 16384), -EPERM);
	assert_string_equal(logged, msg);
}

static void test_refusals_are_capped_and_whole_characters(void **state)
{
	char tool[1200], args[1200];
	(void)state;

	/* a long undeclared name of three-byte characters */
	args[0] = '\0';
	append(args, sizeof(args), "{\"a\":1,\"b\":2,\"");
	for (int i = 0; i < 300; i++)
		append(args, sizeof(args), "\xe2\x82\xac");
	append(args, sizeof(args), "\":1}");
	assert_int_equal(check("reader", "a.sum", args, 16384), -EINVAL);
	assert_true(strlen(msg) < 200);
	/* a long unknown tool name */
	memset(tool, 'x', 1000);
	tool[1000] = '\0';
	assert_int_equal(check("reader", tool, "{}", 16384), -EPERM);
	assert_true(strlen(msg) <= 100);
}

/* ---- results -------------------------------------------------------------------- */

static int value_of(const char *result, size_t cap, json_t **v)
{
	json_t *r = load(result);
	int rc;

	msg[0] = '\0';
	rc = bridge_result_value(r, cap, v, msg, sizeof(msg));
	json_decref(r);
	if (rc != 0)
		assert_null(*v);
	return rc;
}

static void test_result_values(void **state)
{
	json_t *v = NULL;
	(void)state;

	assert_int_equal(value_of("{\"content\":[{\"type\":\"text\",\"text\":\"t\"}],"
				  "\"structuredContent\":{\"k\":1}}",
				  65536, &v),
			 0);
	assert_int_equal(json_integer_value(json_object_get(v, "k")), 1);
	json_decref(v);
	assert_int_equal(
		value_of("{\"content\":[{\"type\":\"text\",\"text\":\"one\"}]}", 65536, &v), 0);
	assert_string_equal(json_string_value(v), "one");
	json_decref(v);
	assert_int_equal(value_of("{\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
				  "{\"type\":\"text\",\"text\":\"b\"}]}",
				  65536, &v),
			 0);
	assert_string_equal(json_string_value(v), "a\nb");
	json_decref(v);
	assert_int_equal(
		value_of("{\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
			 "{\"type\":\"image\",\"data\":\"AA==\",\"mimeType\":\"image/png\"}]}",
			 65536, &v),
		0);
	assert_int_equal(json_array_size(v), 2);
	json_decref(v);
	assert_int_equal(value_of("{\"content\":[]}", 65536, &v), 0);
	assert_int_equal(json_array_size(v), 0);
	json_decref(v);
	assert_int_equal(value_of("{}", 65536, &v), 0);
	assert_true(json_is_array(v));
	json_decref(v);
}

static void test_result_errors_and_refusals(void **state)
{
	char deep[400] = "{\"structuredContent\":";
	json_t *v = NULL;
	(void)state;

	assert_int_equal(value_of("{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":"
				  "\"it broke\"}],\"structuredContent\":{\"k\":1}}",
				  65536, &v),
			 1);
	assert_string_equal(msg, "it broke");
	assert_int_equal(value_of("{\"isError\":true,\"content\":[]}", 65536, &v), 1);
	assert_non_null(strstr(msg, "no text"));
	/* an empty text is no text either (found by fuzz_bridge) */
	assert_int_equal(
		value_of("{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":\"\"}]}",
			 65536, &v),
		1);
	assert_non_null(strstr(msg, "no text"));
	/* refused, not cut: the result is 49 bytes */
	assert_int_equal(
		value_of("{\"content\":[{\"type\":\"text\",\"text\":\"0123456789\"}]}", 48, &v),
		-EFBIG);
	assert_non_null(strstr(msg, "49 bytes"));
	assert_int_equal(
		value_of("{\"content\":[{\"type\":\"text\",\"text\":\"0123456789\"}]}", 49, &v), 0);
	json_decref(v);
	/* 33 levels of value: refused; 32: passed */
	for (int i = 0; i < 33; i++)
		append(deep, sizeof(deep), "{\"k\":");
	append(deep, sizeof(deep), "1");
	for (int i = 0; i < 33; i++)
		append(deep, sizeof(deep), "}");
	append(deep, sizeof(deep), "}");
	assert_int_equal(value_of(deep, 65536, &v), -E2BIG);
	assert_non_null(strstr(msg, "deeper"));
	memmove(deep + 21, deep + 26, strlen(deep + 26) + 1);
	deep[strlen(deep) - 1] = '\0';
	assert_int_equal(value_of(deep, 65536, &v), 0);
	json_decref(v);
	assert_int_equal(value_of("[1]", 65536, &v), -EINVAL);
}

static void test_tool_error_text_is_cut_at_a_character(void **state)
{
	char big[2000] = "{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":\"";
	json_t *v = NULL;
	(void)state;

	for (int i = 0; i < 300; i++)
		append(big, sizeof(big), "\xe2\x82\xac");
	append(big, sizeof(big), "\"}]}");
	assert_int_equal(value_of(big, 65536, &v), 1);
	assert_true(strlen(msg) <= APPL_TOOL_ERROR_MAX);
	assert_true(strlen(msg) >= APPL_TOOL_ERROR_MAX - 3);
	assert_int_equal(appl_utf8_prefix(msg, strlen(msg)), strlen(msg));
}

/* ---- runs ----------------------------------------------------------------------------- */

/* The run talks to its cell and to the upstream set directly: this test
 * links its own cell_* and upstream_set_* (so cell.o and upstream_set.o
 * are not pulled from the library), recording what the run did. */

struct sent {
	char server[32], tool[32];
	json_int_t a; /* the call's argument a, to tell whose call it is */
	upstream_result_cb cb;
	void *ctx;
	uint64_t id;
	bool cancelled, done;
};

struct fake {
	struct sent sent[2048];
	size_t nsent;
	int send_rc;
	json_int_t answered[2048], refused[2048];
	size_t nanswered, nrefused;
	char last_refusal[APPL_TOOL_ERROR_MAX + 1];
	enum cell_error_kind last_kind;
	json_t *last_value;
};

struct cell {
	struct fake *f;
	cell_call_fn caller;
	void *caller_data;
	unsigned long calls; /* the one counter, as the real cell keeps it */
};

struct upstream_set {
	struct cell *c;
};

/* With an audit log: a write's call line must be in the file (not only
 * queued) when the call reaches the upstream. */
static const char *audit_watch;

static void write_logged_before_sent(void)
{
	char *data;
	size_t len;
	struct appl_err err = {0};

	assert_int_equal(appl_file_read(audit_watch, 1u << 20, &data, &len, &err), 0);
	assert_non_null(
		strstr(data, "\"tool\":\"a.put\",\"role\":\"writer\",\"access\":\"write\""));
	free(data);
}

int upstream_set_call(struct upstream_set *set, const char *server, const char *tool,
		      const json_t *args, unsigned timeout_ms, const char *traceparent,
		      upstream_result_cb cb, void *ctx, uint64_t *call_id, const char *log_id)
{
	struct fake *f = set->c->f;
	struct sent *s = &f->sent[f->nsent];

	(void)traceparent;
	assert_string_equal(log_id, "run-1");
	assert_true(json_is_object(args));
	assert_int_equal(timeout_ms, 30000);
	if (audit_watch && strcmp(tool, "put") == 0)
		write_logged_before_sent();
	if (f->send_rc)
		return f->send_rc;
	snprintf(s->server, sizeof(s->server), "%s", server);
	snprintf(s->tool, sizeof(s->tool), "%s", tool);
	s->a = json_integer_value(json_object_get(args, "a"));
	s->cb = cb;
	s->ctx = ctx;
	s->id = 1000 + f->nsent;
	*call_id = s->id;
	f->nsent++;
	return 0;
}

int upstream_set_read(struct upstream_set *set, const char *server, const char *uri,
		      unsigned timeout_ms, upstream_result_cb cb, void *ctx, uint64_t *call_id,
		      const char *log_id)
{
	struct fake *f = set->c->f;
	struct sent *s = &f->sent[f->nsent];

	assert_string_equal(log_id, "run-1");
	assert_int_equal(timeout_ms, 30000);
	if (f->send_rc)
		return f->send_rc;
	snprintf(s->server, sizeof(s->server), "%s", server);
	snprintf(s->tool, sizeof(s->tool), "read %s", uri);
	s->cb = cb;
	s->ctx = ctx;
	s->id = 1000 + f->nsent;
	*call_id = s->id;
	f->nsent++;
	return 0;
}

void upstream_set_cancel(struct upstream_set *set, const char *server, uint64_t call_id)
{
	struct fake *f = set->c->f;
	(void)server;

	assert_true(call_id >= 1000 && call_id < 1000 + f->nsent);
	assert_false(f->sent[call_id - 1000].done);
	f->sent[call_id - 1000].cancelled = true;
}

void cell_call_answer(struct cell *c, json_int_t id, const json_t *value)
{
	struct fake *f = c->f;

	f->answered[f->nanswered++] = id;
	json_decref(f->last_value);
	f->last_value = json_deep_copy(value);
}

void cell_call_refuse(struct cell *c, json_int_t id, enum cell_error_kind kind, const char *m)
{
	struct fake *f = c->f;

	assert_true(strlen(m) <= APPL_TOOL_ERROR_MAX);
	f->refused[f->nrefused++] = id;
	f->last_kind = kind;
	snprintf(f->last_refusal, sizeof(f->last_refusal), "%s", m);
}

unsigned long cell_calls(const struct cell *c)
{
	return c->calls;
}

/* A call line of the code: counted, then handed to the caller, as the
 * cell does. */
static void cell_line(struct cell *c, json_int_t id, const char *tool, const json_t *args,
		      bool read)
{
	c->calls++;
	c->caller(c->caller_data, id, tool, args, read);
}

void cell_set_caller(struct cell *c, cell_call_fn fn, void *data)
{
	c->caller = fn;
	c->caller_data = data;
}

static struct cell the_cell;
static struct upstream_set the_set = {&the_cell};

static struct bridge_run *run_new(struct fake *f, const char *role, unsigned max_calls,
				  unsigned concurrency)
{
	struct bridge_catalog *c = catalog(role);
	struct bridge_limits lim = {.max_calls = max_calls,
				    .concurrency = concurrency,
				    .call_timeout_ms = 30000,
				    .max_args_bytes = 16384,
				    .max_result_bytes = 65536};
	struct appl_err err = {0};
	struct bridge_run *r;

	memset(f, 0, sizeof(*f));
	memset(&the_cell, 0, sizeof(the_cell));
	the_cell.f = f;
	r = bridge_run_new(c, &lim, &the_set, &the_cell, "run-1", &err);
	assert_non_null(r);
	/* the run is the cell's caller from now on */
	assert_ptr_equal(the_cell.caller_data, r);
	bridge_catalog_unref(c); /* the run holds its own reference */
	return r;
}

static void call(struct bridge_run *r, json_int_t id, const char *tool, const char *args)
{
	json_t *a = load(args);

	/* as the cell does: through the caller it was given */
	assert_ptr_equal(the_cell.caller_data, r);
	cell_line(&the_cell, id, tool, a, false);
	json_decref(a);
}

static void finish(struct fake *f, size_t i, int status, const char *result, const char *reason)
{
	json_t *res = result ? load(result) : NULL;

	assert_false(f->sent[i].done);
	f->sent[i].done = true;
	f->sent[i].cb(f->sent[i].ctx, status, res, reason);
	json_decref(res);
}

static void test_run_caps_calls_in_flight(void **state)
{
	struct fake f;
	struct bridge_run *r = run_new(&f, "reader", 200, 16);
	(void)state;

	for (int i = 1; i <= 20; i++)
		call(r, i, "a.sum", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 16);
	assert_int_equal(bridge_run_inflight(r), 16);
	/* the oldest waiting call goes when one ends, in order */
	finish(&f, 3, UPSTREAM_OK, "{\"content\":[{\"type\":\"text\",\"text\":\"3\"}]}", NULL);
	assert_int_equal(f.nanswered, 1);
	assert_int_equal(f.answered[0], 4);
	assert_string_equal(json_string_value(f.last_value), "3");
	assert_int_equal(f.nsent, 17);
	for (size_t i = 0; i < 20; i++)
		if (i != 3 && !f.sent[i].done && i < f.nsent)
			finish(&f, i, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	for (size_t i = 17; i < f.nsent; i++)
		if (!f.sent[i].done)
			finish(&f, i, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	assert_int_equal(f.nsent, 20);
	assert_int_equal(f.nanswered, 20);
	assert_int_equal(bridge_run_peak(r), 16);
	assert_int_equal(bridge_run_inflight(r), 0);
	assert_string_equal(f.sent[0].server, "a");
	assert_string_equal(f.sent[0].tool, "sum");
	bridge_run_free(r);
	json_decref(f.last_value);
}

/* Whether the metrics page holds line (a whole sample). */
static bool metrics_has(const char *line)
{
	struct appl_err err = {0};
	char *text, want[256];
	size_t len;
	bool found;

	assert_int_equal(metrics_render(&text, &len, &err), 0);
	snprintf(want, sizeof(want), "\n%s\n", line);
	found = strstr(text, want) != NULL;
	if (!found)
		print_message("no %s in:\n%s", line, text);
	free(text);
	return found;
}

/* Calls are counted by server, by the tool's name only where the policy
 * writes it (a.put), and by how they ended; refusals by why. */
static void test_calls_are_counted_under_policy_names(void **state)
{
	struct fake f;
	struct bridge_run *r;
	(void)state;

	metrics_reset();
	r = run_new(&f, "writer", 200, 16);
	call(r, 1, "a.sum", "{\"a\":1,\"b\":2}");
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}");
	call(r, 3, "a.nope", "{}");
	call(r, 4, "a.sum", "{\"a\":\"x\",\"b\":2}");
	call(r, 5, "a.sum", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 3);
	finish(&f, 0, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	finish(&f, 1, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	finish(&f, 2, UPSTREAM_TIMEOUT, NULL, "timeout");
	assert_true(metrics_has("appliance_tool_calls_total{server=\"a\",tool=\"_other\","
				"outcome=\"ok\"} 1"));
	assert_true(metrics_has("appliance_tool_calls_total{server=\"a\",tool=\"put\","
				"outcome=\"ok\"} 1"));
	assert_true(metrics_has("appliance_tool_calls_total{server=\"a\",tool=\"_other\","
				"outcome=\"timeout\"} 1"));
	assert_true(metrics_has("appliance_tool_refusals_total{reason=\"not_allowed\"} 1"));
	assert_true(metrics_has("appliance_tool_refusals_total{reason=\"arguments\"} 1"));
	{
		struct appl_err err = {0};
		char *text;
		size_t len;

		/* a.sum came in by a.*: its name is the server's, never a label */
		assert_int_equal(metrics_render(&text, &len, &err), 0);
		assert_null(strstr(text, "tool=\"sum\""));
		free(text);
	}
	bridge_run_free(r);
	json_decref(f.last_value);
	metrics_reset();
}

static void test_run_budget_counts_every_call(void **state)
{
	struct fake f;
	struct bridge_run *r;
	(void)state;

	metrics_reset();
	r = run_new(&f, "reader", 3, 16);

	call(r, 1, "a.nope", "{}");		  /* refused, and counted */
	call(r, 2, "a.sum", "{\"a\":1,\"b\":2}"); /* sent */
	call(r, 3, "a.sum", "{\"a\":1,\"b\":2}"); /* sent */
	call(r, 4, "a.sum", "{\"a\":1,\"b\":2}"); /* over budget */
	assert_int_equal(f.nsent, 2);
	assert_int_equal(f.nrefused, 2);
	assert_int_equal(f.refused[1], 4);
	assert_non_null(strstr(f.last_refusal, "budget exhausted"));
	assert_true(metrics_has("appliance_tool_refusals_total{reason=\"budget\"} 1"));
	bridge_run_free(r);
}

static void test_run_upstream_failures_become_refusals(void **state)
{
	struct fake f;
	struct bridge_run *r = run_new(&f, "reader", 200, 16);
	(void)state;

	for (int i = 1; i <= 6; i++)
		call(r, i, "a.sum", "{\"a\":1,\"b\":2}");
	finish(&f, 0, UPSTREAM_TIMEOUT, NULL, "timeout");
	assert_non_null(strstr(f.last_refusal, "timeout"));
	assert_int_equal(f.last_kind, CELL_ERR_TIMEOUT);
	finish(&f, 1, UPSTREAM_UNAVAILABLE, NULL, "upstream_unavailable");
	assert_non_null(strstr(f.last_refusal, "upstream_unavailable"));
	assert_int_equal(f.last_kind, CELL_ERR_UNAVAILABLE);
	finish(&f, 2, UPSTREAM_ERROR, NULL, "Unknown tool: sum");
	assert_non_null(strstr(f.last_refusal, "Unknown tool: sum"));
	assert_int_equal(f.last_kind, CELL_ERR_ERROR);
	/* a tool's own error text is its, even when it reads like ours: the
	 * kind says what it is */
	finish(&f, 3, UPSTREAM_OK,
	       "{\"isError\":true,\"content\":[{\"type\":\"text\",\"text\":"
	       "\"refused: bad input\"}]}",
	       NULL);
	assert_string_equal(f.last_refusal, "refused: bad input");
	assert_int_equal(f.last_kind, CELL_ERR_ERROR);
	finish(&f, 4, UPSTREAM_OK, "{\"content\":[{\"type\":\"text\",\"text\":\"0123456789\"}]}",
	       NULL);
	assert_int_equal(f.nanswered, 1);
	assert_int_equal(f.nrefused, 4);
	/* the sixth is cancelled by the teardown, and answered never */
	bridge_run_free(r);
	assert_true(f.sent[5].cancelled);
	assert_false(f.sent[4].cancelled);
	json_decref(f.last_value);
}

static void test_run_result_refusals_name_the_tool(void **state)
{
	char deep[400] = "{\"structuredContent\":";
	struct fake f;
	struct bridge_run *r = run_new(&f, "reader", 200, 16);
	(void)state;

	for (int i = 0; i < 40; i++)
		append(deep, sizeof(deep), "{\"k\":");
	append(deep, sizeof(deep), "1");
	for (int i = 0; i < 41; i++)
		append(deep, sizeof(deep), "}");
	call(r, 1, "a.sum", "{\"a\":1,\"b\":2}");
	finish(&f, 0, UPSTREAM_OK, deep, NULL);
	assert_int_equal(f.nanswered, 0);
	assert_string_equal(f.last_refusal,
			    "refused: a.sum: the tool's result nests deeper than 32 levels");
	assert_int_equal(f.last_kind, CELL_ERR_REFUSED);
	bridge_run_free(r);
}

static void test_run_send_failures(void **state)
{
	static const struct {
		int rc;
		const char *says;
		enum cell_error_kind kind;
	} cases[] = {{-EAGAIN, "upstream_unavailable", CELL_ERR_UNAVAILABLE},
		     {-EBUSY, "too many calls", CELL_ERR_REFUSED},
		     {-EFBIG, "too large", CELL_ERR_REFUSED},
		     {-ENOMEM, "host fault: MemoryError", CELL_ERR_ERROR},
		     {-EIO, "host fault: OSError", CELL_ERR_ERROR}};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fake f;
		struct bridge_run *r = run_new(&f, "reader", 200, 1);

		f.send_rc = cases[i].rc;
		call(r, 1, "a.sum", "{\"a\":1,\"b\":2}");
		call(r, 2, "a.sum", "{\"a\":1,\"b\":2}"); /* the slot was given back */
		assert_int_equal(f.nrefused, 2);
		assert_non_null(strstr(f.last_refusal, cases[i].says));
		assert_int_equal(f.last_kind, cases[i].kind);
		assert_null(strstr(f.last_refusal, "/"));
		assert_int_equal(bridge_run_inflight(r), 0);
		bridge_run_free(r);
	}
}

static void test_run_waiting_is_bounded_and_freed(void **state)
{
	struct fake f;
	struct bridge_run *r = run_new(&f, "reader", 5000, 1);
	(void)state;

	for (json_int_t i = 1; i <= (json_int_t)APPL_BRIDGE_WAITING_MAX + 3; i++)
		call(r, i, "a.sum", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 1);
	assert_int_equal(f.nrefused, 2);
	assert_non_null(strstr(f.last_refusal, "already waiting"));
	bridge_run_free(r); /* one cancelled, the rest dropped without a word */
	assert_true(f.sent[0].cancelled);
	assert_int_equal(f.nanswered, 0);
	assert_int_equal(f.nrefused, 2);
}

/* The lines of the log at path, as parsed objects. */
static json_t *log_lines(const char *path)
{
	json_t *all = json_array();
	char *data, *p, *nl;
	size_t len;
	struct appl_err err = {0};

	assert_int_equal(appl_file_read(path, 1u << 20, &data, &len, &err), 0);
	for (p = data; (nl = strchr(p, '\n')); p = nl + 1)
		json_array_append_new(all, json_loadb(p, (size_t)(nl - p), 0, NULL));
	free(data);
	return all;
}

static const char *member(json_t *lines, size_t i, const char *key)
{
	return json_string_value(json_object_get(json_array_get(lines, i), key));
}

static void test_audit_lines_of_calls(void **state)
{
	char dir[] = "/tmp/appliance-bridge-audit.XXXXXX", path[64], away[80], st[64];
	struct appl_err err = {0};
	struct audit_config cfg = {.path = path,
				   .state_dir = st,
				   .seal_lines = 1000,
				   .seal_s = 3600,
				   .rotate_bytes = 1u << 30};
	struct fake f;
	struct bridge_run *r;
	struct audit *a;
	json_t *lines;
	char *data;
	size_t len;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/log", dir);
	snprintf(st, sizeof(st), "%s/state", dir);
	snprintf(away, sizeof(away), "%s/away", dir);
	assert_int_equal(mkdir(st, 0700), 0);
	a = audit_open(NULL, &cfg, &err);
	assert_non_null(a);
	audit_watch = path;
	r = run_new(&f, "writer", 4, 16);
	bridge_run_audit(r, a, "writer");
	call(r, 1, "a.sum", "{\"a\":1,\"b\":2}"); /* a read: queued, sent */
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}"); /* a write: on disk first */
	assert_int_equal(f.nsent, 2);
	finish(&f, 0, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	call(r, 3, "a.nope", "{}");
	call(r, 4, "a.sum", "{\"a\":\"MARKER\",\"b\":2}");		/* refused by its schema */
	assert_non_null(strstr(f.last_refusal, "/a: expected number")); /* the code is told */
	for (int i = 5; i < 60; i++) /* over the budget: one line, not 55 */
		call(r, i, "a.sum", "{\"a\":1,\"b\":2}");
	bridge_run_free(r);			    /* call 2 still upstream: abandoned */
	assert_int_equal(audit_flush(a, false), 0); /* the loop's round, as in the gateway */
	assert_int_equal(audit_flush(a, false), 0); /* the loop's round, as the gateway has it */
	json_decref(f.last_value);
	/* The log cannot be written: the write is refused before it goes,
	 * then every call. */
	r = run_new(&f, "writer", 10, 16);
	bridge_run_audit(r, a, "writer");
	assert_int_equal(rename(path, away), 0);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	call(r, 2, "a.sum", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 0);
	assert_int_equal(f.nrefused, 2);
	assert_non_null(strstr(f.last_refusal, "the audit log cannot be written"));
	assert_false(audit_ok(a));
	assert_int_equal(rename(away, path), 0);
	bridge_run_free(r);
	assert_int_equal(audit_flush(a, true), 0);
	audit_free(a);
	audit_watch = NULL;
	lines = log_lines(path);
	/* log.open; run 1: sent 1, sent 2, end 1, refused 3, 4, 5 (the budget's
	 * first), end 2 abandoned; resumed; run 2: refused 1, refused 2. */
	assert_int_equal(json_array_size(lines), 11);
	assert_string_equal(member(lines, 1, "outcome"), "sent");
	assert_string_equal(member(lines, 1, "access"), "read");
	assert_string_equal(member(lines, 2, "tool"), "a.put");
	assert_string_equal(member(lines, 2, "access"), "write");
	assert_string_equal(member(lines, 3, "ev"), "call.end");
	assert_string_equal(member(lines, 3, "outcome"), "ok");
	assert_string_equal(member(lines, 4, "outcome"), "refused");
	assert_true(json_is_null(json_object_get(json_array_get(lines, 4), "access")));
	assert_string_equal(member(lines, 5, "reason"),
			    "refused: a.sum: the arguments do not match the tool's input schema "
			    "(type)");
	assert_non_null(strstr(member(lines, 6, "reason"), "budget exhausted"));
	assert_string_equal(member(lines, 7, "outcome"), "abandoned");
	assert_string_equal(member(lines, 8, "ev"), "resumed");
	assert_string_equal(member(lines, 9, "tool"), "a.put");
	assert_string_equal(member(lines, 9, "outcome"), "refused");
	assert_string_equal(member(lines, 10, "tool"), "a.sum");
	assert_string_equal(member(lines, 10, "outcome"), "refused");
	json_decref(lines);
	/* and nothing of the arguments is in the file, but as a digest */
	assert_int_equal(appl_file_read(path, 1u << 20, &data, &len, &err), 0);
	assert_null(strstr(data, "MARKER"));
	assert_null(strstr(data, "expected number"));
	free(data);
	appl_tree_remove(dir);
}

/* ---- approvals ------------------------------------------------------------ */

static const char GATED[] =
	"{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
	"\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:"
	"0000000000000000000000000000000000000000000000000000000000000000\"},"
	"\"servers\":{\"a\":{\"command\":[\"/bin/true\"]}},"
	"\"tools\":{\"a.*\":{\"access\":\"read\"},\"a.put\":{\"access\":\"write\","
	"\"approval\":true}},\"roles\":{\"writer\":{\"tools\":[\"a.*\"],\"write\":true}}}";

/* A run of the gated policy: a.sum a read, a.put a write that needs a yes. */
static struct bridge_run *gated_run(struct fake *f, struct policy **gp)
{
	json_t *sum = load(SUM_SCHEMA);
	struct bridge_tool_in t[] = {{"a", "sum", "Add.", sum, true, NULL},
				     {"a", "put", "Put.", sum, false, NULL}};
	struct bridge_limits lim = {.max_calls = 50,
				    .concurrency = 4,
				    .call_timeout_ms = 30000,
				    .max_args_bytes = 16384,
				    .max_result_bytes = 65536};
	struct appl_err err = {0};
	struct bridge_catalog *c = NULL;
	struct bridge_run *r;

	if (policy_parse(GATED, strlen(GATED), "/", gp, &err) != 0 ||
	    bridge_catalog_new(*gp, "writer", t, 2, &c, &err) != 0)
		fail_msg("%s", err.msg);
	json_decref(sum);
	memset(f, 0, sizeof(*f));
	memset(&the_cell, 0, sizeof(the_cell));
	the_cell.f = f;
	r = bridge_run_new(c, &lim, &the_set, &the_cell, "run-1", &err);
	assert_non_null(r);
	bridge_catalog_unref(c);
	return r;
}

/* A program that answers answer (NULL: never) to any question. */
static void approver_write(const char *path, const char *answer)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	if (answer)
		fprintf(f, "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n'\n", answer);
	else
		fprintf(f, "#!/bin/sh\nexec sleep 60\n");
	fclose(f);
	assert_int_equal(chmod(path, 0755), 0);
}

/* Run the loop until the fake has sent or refused n calls in all. */
static void settle(struct loop *loop, struct fake *f, size_t n)
{
	for (int i = 0; i < 2000 && f->nsent + f->nrefused < n; i++)
		assert_true(loop_run_once(loop, 10) >= 0);
	assert_int_equal(f->nsent + f->nrefused, n);
}

static void test_approvals_gate_the_call(void **state)
{
	char dir[] = "/tmp/appliance-bridge-approve.XXXXXX", yes[64], no[64], mute[64];
	struct appl_err err = {0};
	struct loop *loop;
	struct policy *gp;
	struct fake f;
	struct bridge_run *r;
	struct bridge_approvals ap;
	(void)state;

	assert_non_null(mkdtemp(dir));
	snprintf(yes, sizeof(yes), "%s/yes", dir);
	snprintf(no, sizeof(no), "%s/no", dir);
	snprintf(mute, sizeof(mute), "%s/mute", dir);
	approver_write(yes, "approve");
	approver_write(no, "deny");
	approver_write(mute, NULL);
	metrics_reset();
	assert_non_null(loop = loop_new(&err));
	/* Nobody to ask: refused, never sent; a read is not gated. */
	r = gated_run(&f, &gp);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	call(r, 2, "a.sum", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 1);
	assert_string_equal(f.sent[0].tool, "sum");
	assert_non_null(
		strstr(f.last_refusal, "declined: a.put: no approval: nobody can be asked"));
	bridge_run_free(r);
	policy_free(gp);
	/* A yes: the call goes once the program answered. */
	r = gated_run(&f, &gp);
	ap = (struct bridge_approvals){loop, yes, {0}, 5000, 2, "tester", NULL};
	bridge_run_approvals(r, &ap);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nsent, 0); /* waiting for the answer */
	settle(loop, &f, 1);
	assert_int_equal(f.nsent, 1);
	assert_string_equal(f.sent[0].tool, "put");
	/* The limit: two questions per run here. */
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}");
	settle(loop, &f, 2);
	call(r, 3, "a.put", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nrefused, 1);
	assert_non_null(strstr(f.last_refusal, "this run has asked 2 times, its limit"));
	bridge_run_free(r);
	policy_free(gp);
	/* A no, and no answer in time. */
	r = gated_run(&f, &gp);
	ap = (struct bridge_approvals){loop, no, {0}, 5000, 10, "tester", NULL};
	bridge_run_approvals(r, &ap);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	settle(loop, &f, 1);
	assert_int_equal(f.nsent, 0);
	assert_non_null(strstr(f.last_refusal, "no approval: the approver said no"));
	bridge_run_free(r);
	policy_free(gp);
	r = gated_run(&f, &gp);
	ap = (struct bridge_approvals){loop, mute, {0}, 300, 10, "tester", NULL};
	bridge_run_approvals(r, &ap);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	settle(loop, &f, 1);
	assert_int_equal(f.nsent, 0);
	assert_non_null(strstr(f.last_refusal, "no approval: no answer within 0 s"));
	/* The run ending while a question waits: the program is stopped, and
	 * no answer comes for a call that is gone. */
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}");
	bridge_run_free(r);
	for (int i = 0; i < 30; i++)
		assert_true(loop_run_once(loop, 10) >= 0);
	assert_int_equal(f.nrefused, 1);
	/* each question by its answer; each call without a yes a refusal */
	assert_true(metrics_has("appliance_approvals_total{outcome=\"approved\"} 2"));
	assert_true(metrics_has("appliance_approvals_total{outcome=\"declined\"} 1"));
	assert_true(metrics_has("appliance_approvals_total{outcome=\"timeout\"} 1"));
	assert_true(metrics_has("appliance_approvals_total{outcome=\"unavailable\"} 2"));
	assert_true(metrics_has("appliance_approvals_total{outcome=\"cancelled\"} 1"));
	assert_true(metrics_has("appliance_tool_refusals_total{reason=\"approval\"} 4"));
	policy_free(gp);
	loop_free(loop);
	appl_tree_remove(dir);
}

/* A client asker the test drives: it records the question and answers
 * when told to. */
struct fake_asker {
	bool refuse; /* "cannot be asked" */
	int asks, cancels;
	char text[256];
	unsigned char bind[32];
	bridge_answer_fn answer;
	void *token;
	int handle;
};

static void *fake_ask(void *a, const char *text, const unsigned char bind[32],
		      bridge_answer_fn answer, void *token, char *why, size_t cap)
{
	struct fake_asker *k = a;

	if (k->refuse) {
		snprintf(why, cap, "the client cannot be asked (test)");
		return NULL;
	}
	k->asks++;
	snprintf(k->text, sizeof(k->text), "%s", text);
	memcpy(k->bind, bind, 32);
	k->answer = answer;
	k->token = token;
	return &k->handle;
}

static void fake_cancel(void *a, void *handle)
{
	struct fake_asker *k = a;

	assert_ptr_equal(handle, &k->handle);
	k->cancels++;
	k->answer = NULL;
}

/* A ledger the test answers itself (bridge_ledger). */
struct fake_ledger {
	unsigned claims, cancels, puts;
	unsigned char key[32], put_key[32];
	bridge_claim_cb cb;
	void *data;
	char put[256];
	int handle;
	bool refuse;
};

static void *fl_claim(void *l, const unsigned char key[32], bridge_claim_cb cb, void *data)
{
	struct fake_ledger *fl = l;

	if (fl->refuse)
		return NULL;
	fl->claims++;
	memcpy(fl->key, key, 32);
	fl->cb = cb;
	fl->data = data;
	return &fl->handle;
}

static void fl_cancel(void *l, void *handle)
{
	struct fake_ledger *fl = l;

	assert_ptr_equal(handle, &fl->handle);
	fl->cancels++;
}

static void fl_put(void *l, const unsigned char key[32], const json_t *result)
{
	struct fake_ledger *fl = l;
	char *s = json_dumps(result, JSON_COMPACT | JSON_SORT_KEYS);

	fl->puts++;
	memcpy(fl->put_key, key, 32);
	snprintf(fl->put, sizeof(fl->put), "%s", s ? s : "");
	free(s);
}

/* Until the ledger has had n claims (the answer reaches the bridge from
 * the loop). */
static void claims_wait(struct loop *loop, struct fake_ledger *fl, unsigned n)
{
	for (int i = 0; i < 2000 && fl->claims < n; i++)
		assert_true(loop_run_once(loop, 10) >= 0);
	assert_int_equal(fl->claims, n);
}

/* With replicas, an approval with a claim key goes out only once the key
 * is claimed here; its result is kept under it; a key claimed before gives
 * the stored result back (no call), or refuses when none was stored or the
 * ledger did not answer. */
static void test_approvals_claimed_in_the_ledger(void **state)
{
	static const unsigned char claim[32] = {9, 8, 7};
	struct appl_err err = {0};
	struct fake_asker k = {0};
	struct fake_ledger fl = {0};
	struct bridge_ledger led = {fl_claim, fl_cancel, fl_put, &fl};
	struct bridge_approvals ap;
	struct loop *loop;
	struct policy *gp;
	struct bridge_run *r;
	struct fake f;
	json_t *stored;
	(void)state;

	assert_non_null(loop = loop_new(&err));
	ap = (struct bridge_approvals){loop,	 NULL, {fake_ask, fake_cancel, &k}, 5000, 10,
				       "tester", &led};
	r = gated_run(&f, &gp);
	bridge_run_approvals(r, &ap);
	/* ours: the call goes, and its result is kept under the key */
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	claims_wait(loop, &fl, 1);
	assert_memory_equal(fl.key, claim, 32);
	assert_int_equal(f.nsent, 0); /* not before the ledger said so */
	fl.cb(fl.data, BRIDGE_CLAIM_OURS, NULL);
	settle(loop, &f, 1);
	finish(&f, 0, UPSTREAM_OK, "{\"content\":[{\"type\":\"text\",\"text\":\"put\"}]}", NULL);
	assert_int_equal(fl.puts, 1);
	assert_memory_equal(fl.put_key, claim, 32);
	assert_non_null(strstr(fl.put, "\"put\""));
	/* made before: its stored result, and nothing sent */
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	claims_wait(loop, &fl, 2);
	stored = load("{\"content\":[{\"type\":\"text\",\"text\":\"kept\"}]}");
	fl.cb(fl.data, BRIDGE_CLAIM_DONE, stored);
	json_decref(stored);
	assert_int_equal(f.nsent, 1);
	assert_int_equal(f.nanswered, 2);
	assert_int_equal(f.answered[1], 2);
	assert_int_equal(fl.puts, 1); /* not kept again */
	/* claimed before with no result, and a ledger that did not answer */
	call(r, 3, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	claims_wait(loop, &fl, 3);
	fl.cb(fl.data, BRIDGE_CLAIM_UNKNOWN, NULL);
	assert_non_null(strstr(f.last_refusal, "made before by a try of this run"));
	call(r, 4, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	claims_wait(loop, &fl, 4);
	fl.cb(fl.data, BRIDGE_CLAIM_ERROR, NULL);
	assert_non_null(strstr(f.last_refusal, "the ledger the replicas share did not answer"));
	fl.refuse = true; /* a claim that cannot even start */
	call(r, 5, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	settle(loop, &f, 4);
	assert_int_equal(f.nsent, 1);
	assert_int_equal(f.nrefused, 3);
	fl.refuse = false;
	/* no claim key (one appliance alone): no ledger */
	call(r, 6, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", NULL);
	settle(loop, &f, 5);
	assert_int_equal(fl.claims, 4);
	/* the run ending while a claim is out withdraws it */
	call(r, 7, "a.put", "{\"a\":1,\"b\":2}");
	k.answer(k.token, "approved", claim);
	claims_wait(loop, &fl, 5);
	bridge_run_free(r);
	assert_int_equal(fl.cancels, 1);
	assert_true(metrics_has("appliance_ledger_claims_total{outcome=\"ours\"} 1"));
	assert_true(metrics_has("appliance_ledger_claims_total{outcome=\"done\"} 1"));
	assert_true(metrics_has("appliance_ledger_claims_total{outcome=\"unknown\"} 1"));
	assert_true(metrics_has("appliance_ledger_claims_total{outcome=\"error\"} 2"));
	assert_string_equal(json_string_value(f.last_value), "kept");
	json_decref(f.last_value);
	policy_free(gp);
	loop_free(loop);
}

static void test_approvals_through_the_client(void **state)
{
	static const char *const nos[][2] = {{"declined", "the person asked said no"},
					     {"cancelled", "the question was cancelled"},
					     {"unavailable", "the client could not ask"}};
	struct appl_err err = {0};
	struct fake_asker k = {0};
	struct bridge_approvals ap;
	unsigned char first[32];
	struct loop *loop;
	struct policy *gp;
	struct bridge_run *r;
	struct fake f;
	(void)state;

	assert_non_null(loop = loop_new(&err));
	ap = (struct bridge_approvals){loop,	 NULL, {fake_ask, fake_cancel, &k}, 5000, 10,
				       "tester", NULL};
	/* A yes: the question names the call first; the call goes after. */
	r = gated_run(&f, &gp);
	bridge_run_approvals(r, &ap);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	assert_int_equal(k.asks, 1);
	assert_int_equal(f.nsent, 0);
	assert_true(strncmp(k.text, "a.put\n", 6) == 0);
	memcpy(first, k.bind, 32);
	k.answer(k.token, "approved", NULL);
	settle(loop, &f, 1);
	assert_int_equal(f.nsent, 1);
	/* Another call's question binds to another call. */
	call(r, 2, "a.put", "{\"a\":1,\"b\":3}");
	assert_int_equal(k.asks, 2);
	assert_memory_not_equal(first, k.bind, 32);
	/* Each no refuses the call, and the upstream never sees it. */
	for (size_t i = 0; i < 3; i++) {
		if (i)
			call(r, (json_int_t)(2 + i), "a.put", "{\"a\":1,\"b\":2}");
		k.answer(k.token, nos[i][0], NULL);
		settle(loop, &f, 2 + i);
		assert_int_equal(f.nsent, 1);
		assert_non_null(strstr(f.last_refusal, nos[i][1]));
	}
	bridge_run_free(r);
	policy_free(gp);
	/* No answer in time: the question is withdrawn, the call refused. */
	r = gated_run(&f, &gp);
	ap.timeout_ms = 200;
	bridge_run_approvals(r, &ap);
	k.cancels = 0;
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	settle(loop, &f, 1);
	assert_int_equal(k.cancels, 1);
	assert_non_null(strstr(f.last_refusal, "no approval: no answer within 0 s"));
	/* The run ending while the client is asked withdraws the question. */
	call(r, 2, "a.put", "{\"a\":1,\"b\":2}");
	bridge_run_free(r);
	assert_int_equal(k.cancels, 2);
	policy_free(gp);
	/* A client that cannot be asked: unavailable, with its reason. */
	r = gated_run(&f, &gp);
	k.refuse = true;
	bridge_run_approvals(r, &ap);
	call(r, 1, "a.put", "{\"a\":1,\"b\":2}");
	assert_int_equal(f.nrefused, 1);
	assert_non_null(strstr(f.last_refusal, "no approval: the client cannot be asked (test)"));
	bridge_run_free(r);
	policy_free(gp);
	loop_free(loop);
}

static void test_question_is_escaped_and_bounded(void **state)
{
	json_t *args = json_object(), *q;
	char key[16], *text;
	const char *t, *content;
	(void)state;

	json_object_set_new(args, "path\x1b", json_string("/x\xe2\x80\xae"));
	json_object_set_new(args, "content", json_string(""));
	{
		char big[1001];

		memset(big, 'y', 1000);
		big[1000] = '\0';
		json_object_set_new(args, "content", json_string(big));
	}
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "k%02d", i);
		json_object_set_new(args, key, json_integer(i));
	}
	text = bridge_question("run-1", "alice", NULL, "fs", "write_file", args);
	assert_non_null(text);
	q = json_loads(text, 0, NULL);
	t = json_string_value(json_object_get(q, "text"));
	assert_true(strncmp(t, "fs.write_file\n", 14) == 0);
	assert_null(strchr(t, '\x1b'));
	assert_null(strstr(t, "\xe2\x80\xae"));
	assert_non_null(strstr(t, "path\\x1b: \"/x\\xe2\\x80\\xae\""));
	content = json_string_value(json_object_get(json_object_get(q, "arguments"), "content"));
	assert_non_null(strstr(content, "... (1002 bytes, blake2b "));
	assert_true(strlen(content) < 300);
	assert_non_null(strstr(t, "(6 more arguments)"));
	assert_true(json_is_null(json_object_get(q, "role")));
	json_decref(q);
	free(text);
	json_decref(args);
}

/* ---- the per-server slots, reads, output schemas ----------------------------------- */

/* Server a: two slots, its resources readable by those with "a.*". b: the
 * default, resources off. */
static const char SLOTS[] =
	"{\"policy_version\":1,\"serial\":1,\"expires\":\"2099-01-01T00:00:00Z\","
	"\"image\":{\"layout\":\"/img\",\"digest\":\"sha256:"
	"0000000000000000000000000000000000000000000000000000000000000000\"},"
	"\"servers\":{\"a\":{\"command\":[\"/bin/true\"],\"concurrency\":2,\"resources\":true},"
	"\"b\":{\"command\":[\"/bin/true\"]},\"down\":{\"command\":[\"/bin/true\"]}},"
	"\"tools\":{\"a.*\":{\"access\":\"read\"},\"b.*\":{\"access\":\"read\"}},"
	"\"roles\":{\"r\":{\"tools\":[\"a.*\",\"b.*\"]},\"only\":{\"tools\":[\"a.sum\"]}}}";

static const char TYPED_OUT[] =
	"{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},"
	"\"required\":[\"n\"]}";

static struct policy *slots_policy(void)
{
	struct appl_err err = {0};
	struct policy *p;

	if (policy_parse(SLOTS, strlen(SLOTS), "/", &p, &err) != 0)
		fail_msg("policy: %s", err.msg);
	return p;
}

static struct bridge_run *slots_run(struct policy *p, const char *role, struct fake *f,
				    struct cell *cell, unsigned concurrency)
{
	json_t *sum = load(SUM_SCHEMA), *out = load(TYPED_OUT);
	struct bridge_tool_in t[] = {{"a", "sum", "Add.", sum, true, NULL},
				     {"a", "typed", "Typed.", sum, true, out},
				     {"a", "get-sum", "Dashed.", sum, true, NULL},
				     {"b", "sum", "Add.", sum, true, NULL}};
	struct bridge_limits lim = {.max_calls = 50,
				    .concurrency = concurrency,
				    .call_timeout_ms = 30000,
				    .max_args_bytes = 16384,
				    .max_result_bytes = 65536};
	struct bridge_catalog *c = NULL;
	struct appl_err err = {0};
	struct bridge_run *r;

	assert_int_equal(bridge_catalog_new(p, role, t, 4, &c, &err), 0);
	json_decref(sum);
	json_decref(out);
	memset(cell, 0, sizeof(*cell));
	cell->f = f;
	r = bridge_run_new(c, &lim, &the_set, cell, "run-1", &err);
	assert_non_null(r);
	bridge_catalog_unref(c);
	return r;
}

/* One run of the SLOTS policy, its cell and its fake upstream. */
struct fx {
	struct policy *p;
	struct cell c;
	struct fake f;
};

static struct bridge_run *fx_begin(struct fx *x, const char *role, unsigned concurrency)
{
	x->p = slots_policy();
	memset(&x->f, 0, sizeof(x->f));
	the_set.c = &x->c; /* every send is recorded in x->f */
	return slots_run(x->p, role, &x->f, &x->c, concurrency);
}

static void fx_end(struct fx *x)
{
	policy_free(x->p);
	the_set.c = &the_cell;
	json_decref(x->f.last_value);
}

static void call_a(struct bridge_run *r, struct cell *cell, json_int_t id, const char *tool,
		   json_int_t a)
{
	json_t *args = json_pack("{s:I, s:i}", "a", a, "b", 0);

	assert_ptr_equal(cell->caller_data, r);
	cell_line(cell, id, tool, args, false);
	json_decref(args);
}

/* Two runs share a's two slots: a run with many calls waiting gets a freed
 * slot only in its turn, so the other's call goes next. */
static void test_gate_shares_slots_in_turn(void **state)
{
	struct policy *p = slots_policy();
	struct bridge_gate *g = bridge_gate_new(p);
	struct cell c1, c2;
	struct fake f;
	struct bridge_run *r1, *r2;
	(void)state;

	memset(&f, 0, sizeof(f));
	the_set.c = &c1; /* every send is recorded in f */
	r1 = slots_run(p, "r", &f, &c1, 16);
	r2 = slots_run(p, "r", &f, &c2, 16);
	bridge_run_gate(r1, g);
	bridge_run_gate(r2, g);
	for (int i = 1; i <= 6; i++)
		call_a(r1, &c1, i, "a.sum", 100 + i);
	assert_int_equal(f.nsent, 2); /* a's two slots */
	assert_int_equal(bridge_gate_inflight(g, "a"), 2);
	call_a(r2, &c2, 1, "a.sum", 201);
	call_a(r2, &c2, 2, "b.sum", 202); /* another server: not held up */
	assert_int_equal(f.nsent, 3);
	assert_int_equal(f.sent[2].a, 202);
	/* the turns alternate: r1, r2, then r1 again */
	finish(&f, 0, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	assert_int_equal(f.nsent, 4);
	assert_int_equal(f.sent[3].a, 103);
	finish(&f, 1, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	assert_int_equal(f.nsent, 5);
	assert_int_equal(f.sent[4].a, 201);
	finish(&f, 3, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	assert_int_equal(f.sent[5].a, 104);
	assert_int_equal(bridge_gate_inflight(g, "a"), 2);
	/* a run that ends gives its slots back to the others */
	call_a(r2, &c2, 3, "a.sum", 203);
	bridge_run_free(r1);
	assert_int_equal(bridge_gate_inflight(g, "a"), 2);
	assert_int_equal(f.sent[f.nsent - 1].a, 203);
	bridge_run_free(r2);
	assert_int_equal(bridge_gate_inflight(g, "a"), 0);
	bridge_gate_free(g);
	policy_free(p);
	the_set.c = &the_cell;
	json_decref(f.last_value);
}

/* A run's own cap still holds under the gate, and a refused send gives the
 * slot back. */
static void test_gate_and_own_cap(void **state)
{
	static struct fx x;
	struct bridge_run *r = fx_begin(&x, "r", 1);
	struct bridge_gate *g = bridge_gate_new(x.p);
	(void)state;

	bridge_run_gate(r, g);
	call_a(r, &x.c, 1, "a.sum", 1);
	call_a(r, &x.c, 2, "a.sum", 2);
	assert_int_equal(x.f.nsent, 1);
	assert_int_equal(bridge_gate_inflight(g, "a"), 1);
	x.f.send_rc = -EAGAIN;
	finish(&x.f, 0, UPSTREAM_OK, "{\"structuredContent\":{\"n\":1}}", NULL);
	assert_int_equal(x.f.nrefused, 1); /* the second could not be sent */
	assert_int_equal(bridge_gate_inflight(g, "a"), 0);
	bridge_run_free(r);
	bridge_gate_free(g);
	fx_end(&x);
}

static void read_uri(struct cell *cell, json_int_t id, const char *server, const char *uri)
{
	json_t *args = json_pack("{s:s}", "uri", uri);

	cell_line(cell, id, server, args, true);
	json_decref(args);
}

static void test_reads(void **state)
{
	static struct fx x;
	struct bridge_run *r = fx_begin(&x, "r", 16);
	(void)state;

	read_uri(&x.c, 1, "a", "demo://x");
	assert_int_equal(x.f.nsent, 1);
	assert_string_equal(x.f.sent[0].server, "a");
	assert_string_equal(x.f.sent[0].tool, "read demo://x");
	finish(&x.f, 0, UPSTREAM_OK,
	       "{\"contents\":[{\"uri\":\"demo://x\",\"text\":\"hi\"},"
	       "{\"uri\":\"demo://y\",\"blob\":\"aGk=\",\"mimeType\":\"x/y\"}]}",
	       NULL);
	assert_int_equal(x.f.nanswered, 1);
	assert_int_equal(json_array_size(x.f.last_value), 2);
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(x.f.last_value, 0), "text")),
		"hi");
	assert_string_equal(
		json_string_value(json_object_get(json_array_get(x.f.last_value, 1), "blob")),
		"aGk=");
	/* refused: resources off, a server down, a control character */
	read_uri(&x.c, 2, "b", "demo://x");
	assert_int_equal(x.f.last_kind, CELL_ERR_REFUSED);
	assert_string_equal(x.f.last_refusal, "refused: b.read_resource: the policy does not let "
					      "this role read the resources of this server");
	read_uri(&x.c, 3, "down", "demo://x");
	assert_int_equal(x.f.last_kind, CELL_ERR_UNAVAILABLE);
	assert_non_null(strstr(x.f.last_refusal, "down.read_resource is not available"));
	read_uri(&x.c, 4, "a", "demo://x\nForged: 1");
	assert_int_equal(x.f.last_kind, CELL_ERR_REFUSED);
	assert_non_null(strstr(x.f.last_refusal, "control character"));
	assert_int_equal(x.f.nsent, 1);
	/* what comes back is checked: not base64, nothing, not a resource */
	read_uri(&x.c, 5, "a", "demo://x");
	finish(&x.f, 1, UPSTREAM_OK, "{\"contents\":[{\"uri\":\"demo://x\",\"blob\":\"a=b\"}]}",
	       NULL);
	assert_int_equal(x.f.last_kind, CELL_ERR_ERROR);
	assert_non_null(strstr(x.f.last_refusal, "neither text nor base64"));
	read_uri(&x.c, 6, "a", "demo://x");
	finish(&x.f, 2, UPSTREAM_OK, "{\"contents\":[]}", NULL);
	assert_non_null(strstr(x.f.last_refusal, "no contents"));
	read_uri(&x.c, 7, "a", "demo://x");
	finish(&x.f, 3, UPSTREAM_OK, "{\"content\":[]}", NULL);
	assert_non_null(strstr(x.f.last_refusal, "not a resource"));
	assert_int_equal(x.f.nanswered, 1);
	bridge_run_free(r);
	/* a role without the whole server's pattern may not read */
	r = slots_run(x.p, "only", &x.f, &x.c, 16);
	read_uri(&x.c, 1, "a", "demo://x");
	assert_int_equal(x.f.last_kind, CELL_ERR_REFUSED);
	bridge_run_free(r);
	fx_end(&x);
}

/* A tool that declares an output schema must send a structured result that
 * matches it. */
static void test_output_schema_is_checked(void **state)
{
	static struct fx x;
	struct bridge_run *r = fx_begin(&x, "r", 16);
	(void)state;

	for (int i = 1; i <= 3; i++)
		call_a(r, &x.c, i, "a.typed", i);
	finish(&x.f, 0, UPSTREAM_OK, "{\"structuredContent\":{\"n\":7},\"content\":[]}", NULL);
	assert_int_equal(x.f.nanswered, 1);
	assert_int_equal(json_integer_value(json_object_get(x.f.last_value, "n")), 7);
	finish(&x.f, 1, UPSTREAM_OK, "{\"structuredContent\":{\"n\":\"7\"}}", NULL);
	assert_int_equal(x.f.last_kind, CELL_ERR_ERROR);
	assert_non_null(strstr(x.f.last_refusal, "error: a.typed: the result does not match the "
						 "tool's output schema"));
	finish(&x.f, 2, UPSTREAM_OK, "{\"content\":[{\"type\":\"text\",\"text\":\"7\"}]}", NULL);
	assert_non_null(strstr(x.f.last_refusal, "no structured content"));
	assert_int_equal(x.f.nanswered, 1);
	bridge_run_free(r);
	fx_end(&x);
}

/* Messages name the tool as the code called it. */
static void test_refusals_use_the_python_name(void **state)
{
	static struct fx x;
	struct bridge_run *r = fx_begin(&x, "r", 16);
	json_t *bad = load("{\"a\":\"x\",\"b\":1}");
	(void)state;

	cell_line(&x.c, 1, "a.get-sum", bad, false);
	assert_int_equal(x.f.last_kind, CELL_ERR_REFUSED);
	assert_non_null(strstr(x.f.last_refusal, "refused: a.get_sum: invalid arguments"));
	call_a(r, &x.c, 2, "a.get-sum", 1);
	finish(&x.f, 0, UPSTREAM_TIMEOUT, NULL, "timeout");
	assert_non_null(strstr(x.f.last_refusal, "timeout: a.get_sum did not answer"));
	bridge_run_free(r);
	json_decref(bad);
	fx_end(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_catalog_offers_only_allowed_checkable_tools),
		cmocka_unit_test(test_a_server_with_no_tools_is_unavailable),
		cmocka_unit_test(test_check_allows_a_good_call),
		cmocka_unit_test(test_check_refuses_unknown_tools),
		cmocka_unit_test(test_check_refuses_by_policy),
		cmocka_unit_test(test_check_refuses_unusable_schemas),
		cmocka_unit_test(test_check_refuses_bad_arguments),
		cmocka_unit_test(test_the_logged_refusal_holds_nothing_of_the_arguments),
		cmocka_unit_test(test_refusals_are_capped_and_whole_characters),
		cmocka_unit_test(test_result_values),
		cmocka_unit_test(test_result_errors_and_refusals),
		cmocka_unit_test(test_tool_error_text_is_cut_at_a_character),
		cmocka_unit_test(test_run_caps_calls_in_flight),
		cmocka_unit_test(test_run_budget_counts_every_call),
		cmocka_unit_test(test_run_upstream_failures_become_refusals),
		cmocka_unit_test(test_run_result_refusals_name_the_tool),
		cmocka_unit_test(test_run_send_failures),
		cmocka_unit_test(test_run_waiting_is_bounded_and_freed),
		cmocka_unit_test(test_audit_lines_of_calls),
		cmocka_unit_test(test_approvals_gate_the_call),
		cmocka_unit_test(test_calls_are_counted_under_policy_names),
		cmocka_unit_test(test_approvals_through_the_client),
		cmocka_unit_test(test_approvals_claimed_in_the_ledger),
		cmocka_unit_test(test_question_is_escaped_and_bounded),
		cmocka_unit_test(test_gate_shares_slots_in_turn),
		cmocka_unit_test(test_gate_and_own_cap),
		cmocka_unit_test(test_reads),
		cmocka_unit_test(test_output_schema_is_checked),
		cmocka_unit_test(test_refusals_use_the_python_name),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
