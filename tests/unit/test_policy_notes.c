/* test_policy_notes.c: what `sign` and `check` say about a signed policy
 * without starting anything (pkg/policy/notes.h): each kind of note, a
 * policy with none, and that the notes are only ever about the bytes that
 * were signed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "base/fs.h"
#include "policy/notes.h"

#define DIGEST "sha256:3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c"
#define TOKEN  "4f2a0c8e9b1d7e6a5c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a0918273645"
#define HEAD                                                                                       \
	"{\"policy_version\": 1, \"serial\": 1, \"expires\": \"2099-01-01T00:00:00Z\", "           \
	"\"image\": {\"layout\": \"image\", \"digest\": \"" DIGEST "\"}, "                         \
	"\"servers\": {\"fs\": {\"command\": [\"/usr/bin/true\"]}, "                               \
	"\"gh\": {\"command\": [\"/usr/bin/true\"]}}"

/* Every note told, one per line: "KIND TEXT\n". */
struct heard {
	char text[4096];
	size_t len;
	unsigned n;
};

static void on_note(void *data, enum policy_note kind, const char *text)
{
	struct heard *h = data;
	int n = snprintf(h->text + h->len, sizeof(h->text) - h->len, "%d %s\n", (int)kind, text);

	assert_true(n > 0 && (size_t)n < sizeof(h->text) - h->len);
	h->len += (size_t)n;
	h->n++;
}

struct file {
	char dir[64], path[96];
	unsigned char hash[POLICY_HASH_BYTES];
};

/* HEAD, then rest, written to a fresh file; its hash kept as if signed. */
static void file_write(struct file *f, const char *rest)
{
	char *doc;
	FILE *out;

	snprintf(f->dir, sizeof(f->dir), "/tmp/appliance-notes.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/p.json", f->dir);
	assert_true(asprintf(&doc, "%s%s}", HEAD, rest) > 0);
	assert_non_null(out = fopen(f->path, "w"));
	assert_int_equal(fputs(doc, out) >= 0, 1);
	assert_int_equal(fclose(out), 0);
	crypto_hash_sha256(f->hash, (const unsigned char *)doc, strlen(doc));
	free(doc);
}

static void file_remove(struct file *f)
{
	unlink(f->path);
	rmdir(f->dir);
}

/* The notes of a policy of HEAD and rest. */
static void notes_of(const char *rest, struct heard *h)
{
	struct file f = {.dir = ""};
	struct appl_err err = {0};

	memset(h, 0, sizeof(*h));
	file_write(&f, rest);
	if (policy_notes_check(f.path, f.hash, on_note, h, &err) < 0)
		fail_msg("%s", err.msg);
	file_remove(&f);
}

static void test_none(void **state)
{
	struct heard h;

	(void)state;
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_int_equal(h.n, 0);
	/* tokens are clients too; a role's exact pattern decided by the
	 * server's wildcard uses it */
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.read_file\"]}}, "
		 "\"clients\": {\"tokens\": [{\"name\": \"ci\", \"sha256\": \"" TOKEN "\", "
		 "\"role\": \"r\"}]}",
		 &h);
	assert_int_equal(h.n, 0);
}

static void test_no_client(void **state)
{
	struct heard h;

	(void)state;
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\"]}}",
		 &h);
	assert_string_equal(
		h.text, "0 clients: no default_role and no tokens: no client can call any tool\n");
	/* OAuth access tokens name their role: no note */
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\"]}}, \"http\": {\"listen\": "
		 "[\"127.0.0.1:8080\"], \"oauth\": {\"issuer\": \"https://i.example\", "
		 "\"audience\": \"https://m.example/mcp\", \"jwks_path\": \"/j\"}}",
		 &h);
	assert_int_equal(h.n, 0);
}

static void test_role_idle(void **state)
{
	struct heard h;

	(void)state;
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"idle\": {\"tools\": []}, \"r\": {\"tools\": [\"fs.*\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_string_equal(h.text, "1 roles.idle: its patterns match no tools entry that allows "
				    "it a call: it can call nothing\n");
	/* a pattern with no entry to decide it reaches nothing either */
	notes_of(", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"gh\": {\"tools\": [\"gh.issues\"]}, \"r\": {\"tools\": "
		 "[\"fs.*\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_int_equal(h.n, 1);
	assert_non_null(strstr(h.text, "1 roles.gh: "));
}

static void test_rule_unused(void **state)
{
	struct heard h;

	(void)state;
	/* a write tool only a role without write could reach, and a server
	 * nobody names: the role idles, both entries unused, in order */
	notes_of(", \"tools\": {\"gh.create\": {\"access\": \"write\"}, "
		 "\"fs.*\": {\"access\": \"read\"}, \"fs.rm\": {\"access\": \"write\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\", \"gh.create\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_string_equal(h.text, "2 tools.\"fs.rm\": no role can call a tool through it\n"
				    "2 tools.\"gh.create\": no role can call a tool through it\n");
	/* with write, both are used */
	notes_of(", \"tools\": {\"gh.create\": {\"access\": \"write\"}, "
		 "\"fs.*\": {\"access\": \"read\"}, \"fs.rm\": {\"access\": \"write\"}}, "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\", \"gh.create\"], \"write\": true}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_int_equal(h.n, 0);
}

/* An entry a code tool's program calls through is used, by the roles
 * that may call the code tool; an invoke-only role with a code tool does
 * not idle. A code tool no role may call uses nothing. */
static void test_code_tools_use_entries(void **state)
{
	struct heard h;

	(void)state;
	notes_of(", \"tools\": {\"gh.create\": {\"access\": \"write\"}, "
		 "\"fs.*\": {\"access\": \"read\"}}, "
		 "\"code_tools\": [{\"name\": \"file_it\", \"description\": \"d\", "
		 "\"input_schema\": {\"type\": \"object\"}, \"code\": \"1\", "
		 "\"uses\": [\"gh.create\"], \"access\": \"write\"}], "
		 "\"roles\": {\"inv\": {\"inline\": false, \"write\": true, "
		 "\"code_tools\": [\"file_it\"]}, \"r\": {\"tools\": [\"fs.*\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_int_equal(h.n, 0);
	/* nobody may call the code tool: its entry is unused */
	notes_of(", \"tools\": {\"gh.create\": {\"access\": \"write\"}, "
		 "\"fs.*\": {\"access\": \"read\"}}, "
		 "\"code_tools\": [{\"name\": \"file_it\", \"description\": \"d\", "
		 "\"input_schema\": {\"type\": \"object\"}, \"code\": \"1\", "
		 "\"uses\": [\"gh.create\"], \"access\": \"write\"}], "
		 "\"roles\": {\"r\": {\"tools\": [\"fs.*\"]}}, "
		 "\"clients\": {\"default_role\": \"r\"}",
		 &h);
	assert_string_equal(h.text, "2 tools.\"gh.create\": no role can call a tool through it\n");
}

/* Every kind at once: clients first, then roles, then entries. */
static void test_order(void **state)
{
	struct heard h;

	(void)state;
	notes_of(", \"tools\": {\"gh.*\": {\"access\": \"read\"}}, "
		 "\"roles\": {\"b\": {\"tools\": []}, \"a\": {\"tools\": [\"fs.*\"]}}",
		 &h);
	assert_string_equal(
		h.text,
		"0 clients: no default_role and no tokens: no client can call any tool\n"
		"1 roles.a: its patterns match no tools entry that allows it a call: it can call "
		"nothing\n"
		"1 roles.b: its patterns match no tools entry that allows it a call: it can call "
		"nothing\n"
		"2 tools.\"gh.*\": no role can call a tool through it\n");
}

/* The file changed after it was signed: nothing is said about bytes
 * nobody signed. */
static void test_changed_since_signed(void **state)
{
	struct file f = {.dir = ""};
	struct heard h = {.n = 0};
	struct appl_err err = {0};
	FILE *out;

	(void)state;
	file_write(&f, ", \"tools\": {\"fs.*\": {\"access\": \"read\"}}, "
		       "\"roles\": {\"r\": {\"tools\": [\"fs.*\"]}}");
	assert_non_null(out = fopen(f.path, "a"));
	fputs(" ", out);
	fclose(out);
	assert_int_equal(policy_notes_check(f.path, f.hash, on_note, &h, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "changed since it was read"));
	assert_int_equal(h.n, 0);
	file_remove(&f);
	assert_int_equal(policy_notes_check(f.path, f.hash, on_note, &h, &err), -ENOENT);
	assert_int_equal(h.n, 0);
}

/* Signed bytes that are no policy are refused, not judged. */
static void test_not_a_policy(void **state)
{
	struct file f = {.dir = ""};
	struct policy_notes *n = (struct policy_notes *)&f;
	struct appl_err err = {0};

	(void)state;
	file_write(&f, ", \"surprise\": 1");
	assert_true(policy_notes_load(f.path, f.hash, &n, &err) < 0);
	assert_null(n);
	assert_non_null(strstr(err.msg, "surprise"));
	file_remove(&f);
}

static void test_rules(void **state)
{
	struct file f = {.dir = ""};
	struct policy_notes *n;
	struct appl_err err = {0};

	(void)state;
	file_write(&f, ", \"tools\": {\"gh.create\": {\"access\": \"write\"}, "
		       "\"fs.*\": {\"access\": \"read\"}, \"fs.rm\": {\"access\": \"write\"}}");
	assert_int_equal(policy_notes_load(f.path, f.hash, &n, &err), 0);
	assert_int_equal(policy_notes_rule_count(n), 3);
	assert_string_equal(policy_notes_rule_get(n, 0), "fs.*");
	assert_string_equal(policy_notes_rule_get(n, 1), "fs.rm");
	assert_string_equal(policy_notes_rule_get(n, 2), "gh.create");
	assert_null(policy_notes_rule_get(n, 3));
	assert_true(policy_notes_rule_read(n, 0));
	assert_false(policy_notes_rule_read(n, 1));
	assert_false(policy_notes_rule_read(n, 3));
	assert_true(policy_notes_rule_has(n, "fs.rm"));
	assert_true(policy_notes_rule_has(n, "fs.*"));
	assert_false(policy_notes_rule_has(n, "fs.read"));
	policy_notes_free(n);
	policy_notes_free(NULL);
	file_remove(&f);
}

static void test_patterns(void **state)
{
	char server[8];

	(void)state;
	assert_true(policy_notes_pattern_server("fs.read", server, sizeof(server)));
	assert_string_equal(server, "fs");
	assert_false(policy_notes_pattern_server("fs", server, sizeof(server)));
	assert_false(policy_notes_pattern_server("eightchr.x", server, sizeof(server)));
	assert_string_equal(policy_notes_pattern_tool("fs.a.b"), "a.b");
	assert_string_equal(policy_notes_pattern_tool("fs"), "");
	assert_true(policy_notes_pattern_wild("fs.*"));
	assert_false(policy_notes_pattern_wild("fs.a*"));
	assert_true(policy_notes_pattern_on("fs.x", "fs"));
	assert_false(policy_notes_pattern_on("fsx.x", "fs"));
	assert_false(policy_notes_pattern_on("f.x", "fs"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_none),	     cmocka_unit_test(test_no_client),
		cmocka_unit_test(test_role_idle),    cmocka_unit_test(test_rule_unused),
		cmocka_unit_test(test_order),	     cmocka_unit_test(test_changed_since_signed),
		cmocka_unit_test(test_not_a_policy), cmocka_unit_test(test_rules),
		cmocka_unit_test(test_patterns),     cmocka_unit_test(test_code_tools_use_entries),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
