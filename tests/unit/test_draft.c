/* test_draft.c: a policy written from scratch (pkg/policy/draft.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/draft.h"

#define DIGEST "sha256:f39ae11fef39ecad255e0871dd4896d15d039560ab146ec8be399814860b6f6a"

static const struct policy_draft_head head = {
	.serial = 1796525463,
	.expires = 1796525463 + 30 * 86400,
	.deployment = "default",
	.layout = "/usr/local/share/appliance/image",
	.digest = DIGEST,
};

static const char *const files_argv[] = {"/usr/bin/node", "/opt/fs/index.js", "/srv/a,b"};
static const char *const toy_argv[] = {"/usr/libexec/toy"};

static struct policy_draft *draft_two(void)
{
	struct policy_draft *d = policy_draft_new(&head);

	assert_non_null(d);
	assert_int_equal(policy_draft_server_add(d, "files", files_argv, 3), 0);
	assert_int_equal(policy_draft_server_add(d, "toy", toy_argv, 1), 0);
	assert_int_equal(policy_draft_tool_add(d, "files", "read_text_file", POLICY_ACCESS_READ),
			 0);
	assert_int_equal(policy_draft_tool_add(d, "files", "write_file", POLICY_ACCESS_WRITE), 0);
	assert_int_equal(policy_draft_tool_add(d, "toy", "add", POLICY_ACCESS_READ), 0);
	return d;
}

/* The text, word for word: what an administrator reads before signing. */
static void test_text(void **state)
{
	static const char want[] = "{\n"
				   "  \"policy_version\": 1,\n"
				   "  \"serial\": 1796525463,\n"
				   "  \"expires\": \"2027-01-05T02:51:03Z\",\n"
				   "  \"deployment\": \"default\",\n"
				   "  \"image\": {\n"
				   "    \"layout\": \"/usr/local/share/appliance/image\",\n"
				   "    \"digest\": \"" DIGEST "\"\n"
				   "  },\n"
				   "  \"servers\": {\n"
				   "    \"files\": {\n"
				   "      \"command\": [\n"
				   "        \"/usr/bin/node\",\n"
				   "        \"/opt/fs/index.js\",\n"
				   "        \"/srv/a,b\"\n"
				   "      ]\n"
				   "    },\n"
				   "    \"toy\": {\n"
				   "      \"command\": [\n"
				   "        \"/usr/libexec/toy\"\n"
				   "      ]\n"
				   "    }\n"
				   "  },\n"
				   "  \"tools\": {\n"
				   "    \"files.read_text_file\": {\n"
				   "      \"access\": \"read\"\n"
				   "    },\n"
				   "    \"files.write_file\": {\n"
				   "      \"access\": \"write\"\n"
				   "    },\n"
				   "    \"toy.add\": {\n"
				   "      \"access\": \"read\"\n"
				   "    }\n"
				   "  },\n"
				   "  \"roles\": {\n"
				   "    \"reader\": {\n"
				   "      \"tools\": [\n"
				   "        \"files.read_text_file\",\n"
				   "        \"toy.add\"\n"
				   "      ],\n"
				   "      \"write\": false\n"
				   "    },\n"
				   "    \"writer\": {\n"
				   "      \"tools\": [\n"
				   "        \"files.read_text_file\",\n"
				   "        \"files.write_file\",\n"
				   "        \"toy.add\"\n"
				   "      ],\n"
				   "      \"write\": true\n"
				   "    }\n"
				   "  },\n"
				   "  \"clients\": {\n"
				   "    \"default_role\": \"reader\"\n"
				   "  }\n"
				   "}\n";
	struct policy_draft *d = draft_two();
	struct appl_err err = {0};
	struct policy *p = NULL;
	enum policy_access access;
	size_t len;
	char *text;
	(void)state;

	text = policy_draft_text(d, &len, &p, &err);
	assert_non_null(text);
	assert_string_equal(text, want);
	assert_int_equal(len, strlen(want));
	/* and the policy says what the roles are for */
	assert_non_null(p);
	assert_string_equal(policy_client_default_role(p), POLICY_DRAFT_READER);
	assert_int_equal(policy_tool_check(p, "files", "read_text_file", false, "reader", &access),
			 POLICY_OK);
	assert_int_equal(access, POLICY_ACCESS_READ);
	/* an exact entry: a lying hint changes nothing */
	assert_int_equal(policy_tool_check(p, "files", "write_file", true, "reader", &access),
			 POLICY_DENY_ROLE);
	assert_int_equal(policy_tool_check(p, "files", "write_file", true, "writer", &access),
			 POLICY_OK);
	assert_int_equal(access, POLICY_ACCESS_WRITE);
	assert_int_equal(policy_tool_check(p, "files", "edit_file", false, "writer", &access),
			 POLICY_DENY_UNLISTED);
	policy_free(p);
	free(text);
	policy_draft_free(d);
}

static void test_remove(void **state)
{
	struct policy_draft *d = draft_two();
	struct appl_err err = {0};
	struct policy *p = NULL;
	size_t len;
	char *text;
	(void)state;

	policy_draft_tool_remove(d, "toy", "add");
	policy_draft_tool_remove(d, "toy", "no_such_tool");
	policy_draft_server_remove(d, "files");
	text = policy_draft_text(d, &len, &p, &err);
	assert_non_null(text);
	assert_null(strstr(text, "files"));
	assert_null(strstr(text, "toy.add"));
	assert_int_equal(policy_server_count(p), 1);
	/* roles that can call nothing are still written, and still parse */
	assert_non_null(strstr(text, "\"tools\": []"));
	policy_free(p);
	free(text);
	policy_draft_free(d);
}

/* What the parser refuses, the draft gives back with the parser's words. */
static void test_refused(void **state)
{
	static const char *const relative[] = {"node", "x.js"};
	struct policy_draft_head h = head;
	struct policy_draft *d;
	struct appl_err err = {0};
	size_t len;
	(void)state;

	d = policy_draft_new(&h);
	assert_int_equal(policy_draft_server_add(d, "files", relative, 2), 0);
	assert_null(policy_draft_text(d, &len, NULL, &err));
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.msg, "servers.files.command[0]: must be an absolute path");
	policy_draft_free(d);

	h.deployment = "Prod";
	d = policy_draft_new(&h);
	assert_null(policy_draft_text(d, &len, NULL, &err));
	assert_string_equal(err.msg,
			    "deployment: a deployment is [a-z][a-z0-9_-]*, at most 64 characters");
	policy_draft_free(d);
}

static void test_tool_name_valid(void **state)
{
	char long_name[APPL_POLICY_TOOL_NAME_MAX + 2];
	(void)state;

	assert_true(policy_tool_name_valid("read_text_file"));
	assert_true(policy_tool_name_valid("a.b/c-d"));
	assert_false(policy_tool_name_valid(""));
	assert_false(policy_tool_name_valid("*"));
	assert_false(policy_tool_name_valid("get sum"));
	assert_false(policy_tool_name_valid("caf\xc3\xa9"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_false(policy_tool_name_valid(long_name));
	long_name[sizeof(long_name) - 2] = '\0';
	assert_true(policy_tool_name_valid(long_name));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_remove),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_tool_name_valid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
