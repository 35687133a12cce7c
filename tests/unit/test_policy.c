/* test_policy.c: the policy document parser.
 *
 * Data-driven like jansson's suites: every file in tests/data/policy/valid
 * must parse, every file in tests/data/policy/invalid must be refused with
 * exactly the message in its .err sidecar. The examples in policy/ must
 * parse. The tests below cover what a file cannot say: values read back,
 * defaults, layout resolution, caps, and the tool access rules.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <sodium.h>

#include "base/fs.h"
#include "base/limits.h"
#include "policy/policy.h"
#include "policy/serial.h"

#define DATA	"tests/data/policy"
#define DIGEST	"sha256:3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c"
#define HASH1	"4f2a0c8e9b1d7e6a5c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a0918273645"
#define BASEDIR "/etc/appliance"

/* The required fields but the image, ending in a comma. */
#define HEAD_NO_IMAGE                                                                              \
	"{\"policy_version\": 1, \"serial\": 5, \"expires\": \"2027-01-31T00:00:00Z\", "

/* The required fields; tests append the rest (starting with a comma). */
#define HEAD                                                                                       \
	"{\"policy_version\": 1, \"serial\": 5, \"expires\": \"2027-01-31T00:00:00Z\", "           \
	"\"image\": {\"layout\": \"img\", \"digest\": \"" DIGEST "\"}"

static struct policy *parse_str(const char *s, const char *base, struct appl_err *err)
{
	struct policy *p = NULL;
	int rc = policy_parse(s, strlen(s), base, &p, err);

	if (rc < 0)
		assert_null(p);
	else
		assert_non_null(p);
	return p;
}

/* HEAD, then extra, then the closing brace. */
static struct policy *parse_with(const char *extra, struct appl_err *err)
{
	char doc[8192];

	assert_true((size_t)snprintf(doc, sizeof(doc), "%s%s}", HEAD, extra) < sizeof(doc));
	return parse_str(doc, BASEDIR, err);
}

static struct policy *parse_file(const char *path, const char *base, struct appl_err *err)
{
	struct policy *p = NULL;
	char *buf;
	size_t len;

	assert_int_equal(appl_file_read(path, APPL_POLICY_FILE_MAX + 1, &buf, &len, err), 0);
	policy_parse(buf, len, base, &p, err);
	free(buf);
	return p;
}

/* The names in dir ending in suffix, sorted; returns how many (names is a
 * new array of new strings). */
static size_t dir_list(const char *dir, const char *suffix, char ***names)
{
	struct dirent **ents;
	size_t n = 0, slen = strlen(suffix);
	int count = scandir(dir, &ents, NULL, alphasort);

	assert_true(count >= 0);
	*names = calloc((size_t)count + 1, sizeof(char *));
	assert_non_null(*names);
	for (int i = 0; i < count; i++) {
		size_t len = strlen(ents[i]->d_name);
		if (len > slen && strcmp(ents[i]->d_name + len - slen, suffix) == 0)
			(*names)[n++] = strdup(ents[i]->d_name);
		free(ents[i]);
	}
	free(ents);
	return n;
}

static void names_free(char **names)
{
	for (size_t i = 0; names[i]; i++)
		free(names[i]);
	free(names);
}

/* ---- data-driven ---------------------------------------------------------- */

static void test_valid_files(void **state)
{
	char **names, path[512];
	size_t n = dir_list(DATA "/valid", ".json", &names);
	int failed = 0;

	(void)state;
	assert_true(n >= 20);
	for (size_t i = 0; i < n; i++) {
		struct appl_err err = {0};
		snprintf(path, sizeof(path), "%s/valid/%s", DATA, names[i]);
		struct policy *p = parse_file(path, BASEDIR, &err);
		if (!p) {
			print_error("%s: refused: %s\n", path, err.msg);
			failed++;
		}
		policy_free(p);
	}
	names_free(names);
	assert_int_equal(failed, 0);
}

static void test_invalid_files(void **state)
{
	char **names, path[512];
	size_t n = dir_list(DATA "/invalid", ".json", &names);
	int failed = 0;

	(void)state;
	assert_true(n >= 200);
	for (size_t i = 0; i < n; i++) {
		struct appl_err err = {0};
		char *want;
		size_t wlen;

		snprintf(path, sizeof(path), "%s/invalid/%.*s.err", DATA,
			 (int)(strlen(names[i]) - 5), names[i]);
		assert_int_equal(appl_file_read(path, 4096, &want, &wlen, &err), 0);
		while (wlen > 0 && want[wlen - 1] == '\n')
			want[--wlen] = '\0';
		snprintf(path, sizeof(path), "%s/invalid/%s", DATA, names[i]);
		struct policy *p = parse_file(path, BASEDIR, &err);
		if (p) {
			print_error("%s: accepted\n", path);
			failed++;
		} else if (strcmp(err.msg, want) != 0) {
			print_error("%s:\n  got  %s\n  want %s\n", path, err.msg, want);
			failed++;
		} else if (err.code != -EINVAL && err.code != -E2BIG) {
			print_error("%s: code %d\n", path, err.code);
			failed++;
		}
		policy_free(p);
		free(want);
	}
	names_free(names);
	assert_int_equal(failed, 0);
}

/* Every example in policy/ parses; its layout is ../build/image beside it. */
static void test_examples(void **state)
{
	char **names, path[512], dir[PATH_MAX];
	size_t n = dir_list("policy", ".json", &names);

	(void)state;
	assert_non_null(realpath("policy", dir));
	assert_true(n >= 4);
	for (size_t i = 0; i < n; i++) {
		struct appl_err err = {0};
		snprintf(path, sizeof(path), "policy/%s", names[i]);
		struct policy *p = parse_file(path, dir, &err);
		if (!p)
			fail_msg("%s: %s", path, err.msg);
		assert_int_equal(policy_http_used(p), false);
		assert_true(strncmp(policy_image_layout(p), dir, strlen(dir)) == 0);
		assert_string_equal(policy_image_layout(p) + strlen(dir), "/../build/image");
		policy_free(p);
	}
	names_free(names);
}

/* `deployment` names a rollback floor: [a-z][a-z0-9_-]*, at most 64. */
static void test_deployment(void **state)
{
	static const char *const good[] = {"a", "prod", "eu-west_2",
					   "x234567890123456789012345678"
					   "901234567890123456789012345678901234"};
	static const char *const bad[] = {"",
					  "Prod",
					  "1prod",
					  "-a",
					  "a b",
					  "a.b",
					  "a/b",
					  "\u00e9",
					  "x2345678901234567890123456789012345678901234567890"
					  "123456789012345"};
	struct appl_err err = {0};
	char extra[256];
	struct policy *p;
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(extra, sizeof(extra), ", \"deployment\": \"%s\"", good[i]);
		p = parse_with(extra, &err);
		assert_non_null(p);
		assert_string_equal(policy_deployment(p), good[i]);
		policy_free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(extra, sizeof(extra), ", \"deployment\": \"%s\"", bad[i]);
		assert_null(parse_with(extra, &err));
		assert_non_null(strstr(err.msg, "deployment"));
	}
	assert_null(parse_with(", \"deployment\": 5", &err));
	assert_non_null(strstr(err.msg, "deployment: must be a string"));
}

/* ---- values read back ------------------------------------------------------ */

static void test_defaults(void **state)
{
	struct appl_err err = {0};
	struct policy_limits l, d;
	struct policy *p = parse_with("", &err);

	(void)state;
	assert_non_null(p);
	assert_int_equal(policy_serial(p), 5);
	assert_int_equal(policy_expires(p), 1801353600);
	assert_string_equal(policy_image_digest(p), DIGEST);
	assert_string_equal(policy_image_layout(p), BASEDIR "/img");
	assert_string_equal(policy_deployment(p), "default");
	assert_string_equal(policy_runtime_runsc(p), "/usr/bin/runsc");
	assert_string_equal(policy_runtime_platform(p), "systrap");
	assert_false(policy_runtime_rootless(p));
	assert_true(policy_runtime_restore(p));
	policy_limits_get(p, &l);
	assert_int_equal(l.deadline_s, APPL_DEADLINE_S_DEF);
	assert_int_equal(l.max_calls, APPL_MAX_CALLS_DEF);
	assert_int_equal(l.call_timeout_s, APPL_CALL_TIMEOUT_S_DEF);
	assert_int_equal(l.max_args_bytes, APPL_MAX_ARGS_BYTES_DEF);
	assert_int_equal(l.max_result_bytes, APPL_MAX_RESULT_BYTES_DEF);
	assert_int_equal(l.max_output_bytes, APPL_MAX_OUTPUT_BYTES_DEF);
	assert_int_equal(l.stop_output_bytes, APPL_STOP_OUTPUT_BYTES_DEF);
	assert_int_equal(l.memory_mb, APPL_MEMORY_MB_DEF);
	assert_int_equal(l.pids, APPL_PIDS_DEF);
	assert_int_equal(l.nofile, APPL_NOFILE_DEF);
	assert_int_equal(l.tmpfs_mb, APPL_TMPFS_MB_DEF);
	assert_int_equal(l.concurrency, APPL_CONCURRENCY_DEF);
	assert_int_equal(l.cells, APPL_CELLS_DEF);
	assert_int_equal(l.pool, APPL_POOL_DEF);
	assert_int_equal(l.boot_s, 10);
	assert_int_equal(l.audit_seal_lines, APPL_AUDIT_SEAL_LINES_DEF);
	assert_int_equal(l.audit_seal_s, APPL_AUDIT_SEAL_S_DEF);
	assert_int_equal(l.audit_rotate_kb, APPL_AUDIT_ROTATE_KB_DEF);
	assert_int_equal(l.approval_timeout_s, 120);
	assert_int_equal(l.max_approvals, 10);
	assert_int_equal(l.http_connections, 256);
	assert_int_equal(l.http_sessions_per_token, 32);
	assert_int_equal(l.http_cells_per_client, 3); /* one fewer than cells */
	assert_int_equal(l.http_waiting_per_client, 64);
	assert_int_equal(l.http_body_kb, 2048);
	assert_int_equal(l.http_idle_s, 600);
	assert_int_equal(l.http_slow_s, 30);
	assert_int_equal(l.task_ttl_s, 3600);
	assert_int_equal(l.tasks_per_client, 16);
	assert_int_equal(l.files.max_count, 8);
	assert_int_equal(l.files.max_bytes, 1048576);
	assert_int_equal(l.files.max_total_bytes, 4194304);
	assert_null(policy_http(p));
	assert_int_equal(policy_http_tls_check(p, &err), 0);
	assert_false(policy_approvals_used(p));
	assert_null(policy_approvals_command(p));
	policy_limits_default(&d);
	assert_memory_equal(&l, &d, sizeof(l));
	assert_int_equal(policy_server_count(p), 0);
	assert_null(policy_server_get(p, 0));
	assert_null(policy_server_find(p, "toy"));
	assert_false(policy_http_used(p));
	assert_int_equal(policy_role_count(p), 0);
	assert_null(policy_role_get(p, 0));
	assert_null(policy_client_default_role(p));
	assert_int_equal(policy_token_count(p), 0);
	assert_null(policy_token_get(p, 0));
	assert_null(policy_audit_path(p));
	policy_free(p);
}

static void test_limits_read(void **state)
{
	struct appl_err err = {0};
	struct policy_limits l;
	struct policy *p = parse_with(
		", \"limits\": {\"deadline_s\": 11, \"max_calls\": 12, \"call_timeout_s\": 13, "
		"\"max_args_bytes\": 14, \"max_result_bytes\": 15, \"max_output_bytes\": 16, "
		"\"stop_output_bytes\": 17, \"memory_mb\": 18, \"pids\": 19, \"nofile\": 20, "
		"\"tmpfs_mb\": 21, \"concurrency\": 22, \"cells\": 23, \"pool\": 0}",
		&err);

	(void)state;
	assert_non_null(p);
	policy_limits_get(p, &l);
	assert_int_equal(l.deadline_s, 11);
	assert_int_equal(l.max_calls, 12);
	assert_int_equal(l.call_timeout_s, 13);
	assert_int_equal(l.max_args_bytes, 14);
	assert_int_equal(l.max_result_bytes, 15);
	assert_int_equal(l.max_output_bytes, 16);
	assert_int_equal(l.stop_output_bytes, 17);
	assert_int_equal(l.memory_mb, 18);
	assert_int_equal(l.pids, 19);
	assert_int_equal(l.nofile, 20);
	assert_int_equal(l.tmpfs_mb, 21);
	assert_int_equal(l.concurrency, 22);
	assert_int_equal(l.cells, 23);
	assert_int_equal(l.pool, 0);
	policy_free(p);
}

/* One limit at path ("limits" or "limits.files") against its range: min
 * and ceiling accepted, one past either refused with the range in the
 * message. with: other members of its object, after it. */
static void limit_sides(const char *path, const char *name, long min, long ceil, const char *with)
{
	const long vals[] = {min - 1, min, ceil, ceil + 1};
	bool nested = strchr(path, '.') != NULL;

	for (size_t j = 0; j < 4; j++) {
		struct appl_err err = {0};
		char extra[256], want[256];
		struct policy *p;

		snprintf(extra, sizeof(extra), ", \"limits\": {%s\"%s\": %ld%s}%s",
			 nested ? "\"files\": {" : "", name, vals[j], with, nested ? "}" : "");
		p = parse_with(extra, &err);
		if (j == 1 || j == 2) {
			if (!p)
				fail_msg("%s = %ld refused: %s", name, vals[j], err.msg);
			policy_free(p);
			continue;
		}
		snprintf(want, sizeof(want), "%s.%s: must be an integer between %ld and %ld", path,
			 name, min, ceil);
		assert_null(p);
		assert_string_equal(err.msg, want);
	}
}

/* Each limit against the constants of limits.h: min and ceiling accepted,
 * one past either refused with the range in the message. */
static void test_limits_each_side(void **state)
{
	static const struct {
		const char *name;
		long min, ceil;
		const char *with; /* keeps max_output_bytes <= stop_output_bytes */
	} lims[] = {
		{"deadline_s", APPL_DEADLINE_S_MIN, APPL_DEADLINE_S_CEIL, ""},
		{"max_calls", APPL_MAX_CALLS_MIN, APPL_MAX_CALLS_CEIL, ""},
		{"call_timeout_s", APPL_CALL_TIMEOUT_S_MIN, APPL_CALL_TIMEOUT_S_CEIL, ""},
		{"max_args_bytes", APPL_MAX_ARGS_BYTES_MIN, APPL_MAX_ARGS_BYTES_CEIL, ""},
		{"max_result_bytes", APPL_MAX_RESULT_BYTES_MIN, APPL_MAX_RESULT_BYTES_CEIL, ""},
		{"max_output_bytes", APPL_MAX_OUTPUT_BYTES_MIN, APPL_MAX_OUTPUT_BYTES_CEIL,
		 ", \"stop_output_bytes\": 16777216"},
		{"stop_output_bytes", APPL_STOP_OUTPUT_BYTES_MIN, APPL_STOP_OUTPUT_BYTES_CEIL,
		 ", \"max_output_bytes\": 1"},
		{"memory_mb", APPL_MEMORY_MB_MIN, APPL_MEMORY_MB_CEIL, ""},
		{"pids", APPL_PIDS_MIN, APPL_PIDS_CEIL, ""},
		{"nofile", APPL_NOFILE_MIN, APPL_NOFILE_CEIL, ""},
		{"tmpfs_mb", APPL_TMPFS_MB_MIN, APPL_TMPFS_MB_CEIL, ""},
		{"concurrency", APPL_CONCURRENCY_MIN, APPL_CONCURRENCY_CEIL, ""},
		{"cells", APPL_CELLS_MIN, APPL_CELLS_CEIL, ""},
		{"pool", APPL_POOL_MIN, APPL_POOL_CEIL, ""},
		{"boot_s", APPL_BOOT_S_MIN, APPL_BOOT_S_CEIL, ""},
		{"audit_seal_lines", APPL_AUDIT_SEAL_LINES_MIN, APPL_AUDIT_SEAL_LINES_CEIL, ""},
		{"audit_seal_s", APPL_AUDIT_SEAL_S_MIN, APPL_AUDIT_SEAL_S_CEIL, ""},
		{"audit_rotate_kb", APPL_AUDIT_ROTATE_KB_MIN, APPL_AUDIT_ROTATE_KB_CEIL, ""},
		{"approval_timeout_s", APPL_APPROVAL_TIMEOUT_S_MIN, APPL_APPROVAL_TIMEOUT_S_CEIL,
		 ""},
		{"max_approvals", APPL_MAX_APPROVALS_MIN, APPL_MAX_APPROVALS_CEIL, ""},
		{"http_connections", 1, 4096, ""},
		{"http_sessions_per_token", 1, 1024, ""},
		{"http_cells_per_client", 1, 64, ""},
		{"http_waiting_per_client", 1, 1024, ""},
		{"http_body_kb", 64, 4096, ""},
		{"http_idle_s", 10, 86400, ""},
		{"http_slow_s", 1, 600, ""},
		{"task_ttl_s", 60, 86400, ", \"deadline_s\": 1"},
		{"tasks_per_client", 1, 64, ""},
	};

	(void)state;
	assert_int_equal(APPL_NOFILE_MIN, 16);
	assert_int_equal(APPL_POOL_MIN, 0);
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++)
		limit_sides("limits", lims[i].name, lims[i].min, lims[i].ceil, lims[i].with);
}

/* A task must outlive its cell: a ttl below the deadline is refused,
 * naming both; left out, the ttl grows to the deadline and a spare. */
static void test_task_ttl_outlives_the_deadline(void **state)
{
	struct appl_err err = {0};
	struct policy_limits l;
	struct policy *p;

	(void)state;
	p = parse_with(", \"limits\": {\"deadline_s\": 600, \"task_ttl_s\": 599}", &err);
	assert_null(p);
	assert_non_null(
		strstr(err.msg, "limits.task_ttl_s: must be at least limits.deadline_s (600), so"));
	p = parse_with(", \"limits\": {\"deadline_s\": 3600}", &err);
	assert_non_null(p);
	policy_limits_get(p, &l);
	assert_int_equal(l.task_ttl_s, 3660);
	policy_free(p);
	p = parse_with(", \"limits\": {\"deadline_s\": 600, \"task_ttl_s\": 600}", &err);
	assert_non_null(p);
	policy_limits_get(p, &l);
	assert_int_equal(l.task_ttl_s, 600);
	policy_free(p);
}

static void test_output_limits_cross_check(void **state)
{
	struct appl_err err = {0};
	struct policy *p;

	(void)state;
	p = parse_with(", \"limits\": {\"max_output_bytes\": 100, \"stop_output_bytes\": 100}",
		       &err);
	assert_non_null(p);
	policy_free(p);
	p = parse_with(", \"limits\": {\"max_output_bytes\": 101, \"stop_output_bytes\": 100}",
		       &err);
	assert_null(p);
	assert_string_equal(
		err.msg, "limits.max_output_bytes: must not exceed limits.stop_output_bytes (100)");
}

/* limits.files: each limit within its range, max_bytes within
 * max_total_bytes, no other key, and room for their lines in
 * max_runner_lines. */
static void test_files_limits(void **state)
{
	static const struct {
		const char *name;
		long min, ceil;
		const char *with;
	} lims[] = {
		{"max_count", APPL_FILES_MAX_COUNT_MIN, APPL_FILES_MAX_COUNT_CEIL, ""},
		{"max_bytes", APPL_FILES_MAX_BYTES_MIN, APPL_FILES_MAX_BYTES_CEIL,
		 ", \"max_total_bytes\": 5242880"},
		{"max_total_bytes", APPL_FILES_MAX_TOTAL_BYTES_MIN, APPL_FILES_MAX_TOTAL_BYTES_CEIL,
		 ", \"max_bytes\": 1"},
	};
	static const struct {
		const char *files, *want;
	} bad[] = {
		{"[]", "limits.files: must be an object"},
		{"{\"max_bytess\": 1}",
		 "limits.files.max_bytess: unknown key; did you mean max_bytes?"},
		{"{\"types\": [\"image/png\"]}", "limits.files.types: unknown key"},
		{"{\"max_bytes\": 101, \"max_total_bytes\": 100}",
		 "limits.files.max_bytes: must not exceed limits.files.max_total_bytes (100)"},
		{"{\"max_bytes\": 5000000}",
		 "limits.files.max_bytes: must not exceed limits.files.max_total_bytes (4194304)"},
	};
	struct appl_err err = {0};
	struct policy_limits l;
	struct policy *p;
	char extra[256];

	(void)state;
	for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++)
		limit_sides("limits.files", lims[i].name, lims[i].min, lims[i].ceil, lims[i].with);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(extra, sizeof(extra), ", \"limits\": {\"files\": %s}", bad[i].files);
		assert_null(parse_with(extra, &err));
		assert_string_equal(err.msg, bad[i].want);
	}

	/* {} is the defaults; max_count 0 takes no file */
	p = parse_with(
		", \"limits\": {\"files\": {\"max_count\": 0, \"max_total_bytes\": 2000000}}",
		&err);
	assert_non_null(p);
	policy_limits_get(p, &l);
	assert_int_equal(l.files.max_count, 0);
	assert_int_equal(l.files.max_bytes, APPL_FILES_MAX_BYTES_DEF);
	assert_int_equal(l.files.max_total_bytes, 2000000);
	policy_free(p);

	/* the files' lines count in the line budget: 200 calls, 64 spare,
	 * and 4 MiB / 48 KiB + 8 + 129 for the default files */
	p = parse_with(", \"limits\": {\"max_runner_lines\": 486}", &err);
	assert_non_null(p);
	policy_free(p);
	assert_null(parse_with(", \"limits\": {\"max_runner_lines\": 485}", &err));
	assert_string_equal(err.msg, "limits.max_runner_lines: must be at least limits.max_calls "
				     "(200) + 64, and 222 for the files limits.files allows");
	p = parse_with(", \"limits\": {\"max_runner_lines\": 393, \"files\": {\"max_count\": 0, "
		       "\"max_bytes\": 1, \"max_total_bytes\": 1}}",
		       &err);
	assert_non_null(p);
	policy_free(p);
}

/* http_cells_per_client left out follows limits.cells, one below it (at
 * least 1), so one client never holds every slot; a value given wins,
 * within its bounds, even at or above cells. */
static void test_cells_per_client_default_follows_cells(void **state)
{
	static const struct {
		const char *limits;
		unsigned want;
	} cases[] = {
		{"", 3},
		{", \"limits\": {}", 3},
		{", \"limits\": {\"cells\": 1}", 1},
		{", \"limits\": {\"cells\": 2}", 1},
		{", \"limits\": {\"cells\": 8}", 7},
		{", \"limits\": {\"cells\": 64}", 63},
		{", \"limits\": {\"cells\": 4, \"http_cells_per_client\": 4}", 4},
		{", \"limits\": {\"cells\": 2, \"http_cells_per_client\": 64}", 64},
		{", \"limits\": {\"http_cells_per_client\": 1, \"cells\": 8}", 1},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct appl_err err = {0};
		struct policy_limits l;
		struct policy *p = parse_with(cases[i].limits, &err);

		if (!p)
			fail_msg("%s refused: %s", cases[i].limits, err.msg);
		policy_limits_get(p, &l);
		if (l.http_cells_per_client != cases[i].want)
			fail_msg("%s: http_cells_per_client %u, want %u", cases[i].limits,
				 l.http_cells_per_client, cases[i].want);
		policy_free(p);
	}
}

static void test_expires(void **state)
{
	static const struct {
		const char *s;
		int64_t t;
	} ok[] = {
		{"1970-01-01T00:00:00Z", 0},
		{"1969-12-31T23:59:59Z", -1},
		{"0000-01-01T00:00:00Z", -62167219200},
		{"2000-03-01T12:34:56Z", 951914096},
		{"2027-01-31T00:00:00Z", 1801353600},
		{"2028-02-29T23:59:59Z", 1835481599},
		{"9999-12-31T23:59:59Z", 253402300799},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct appl_err err = {0};
		char doc[512];
		snprintf(doc, sizeof(doc),
			 "{\"policy_version\": 1, \"serial\": 1, \"expires\": \"%s\", \"image\": "
			 "{\"layout\": \"/i\", \"digest\": \"" DIGEST "\"}}",
			 ok[i].s);
		struct policy *p = parse_str(doc, NULL, &err);
		if (!p)
			fail_msg("%s: %s", ok[i].s, err.msg);
		assert_int_equal(policy_expires(p), ok[i].t);
		policy_free(p);
	}
}

static void test_layout_resolution(void **state)
{
	static const struct {
		const char *layout, *base, *want;
	} cases[] = {
		{"../build/image", "/work/policy", "/work/policy/../build/image"},
		{"image", "/etc/appliance/", "/etc/appliance/image"},
		{"image", "/", "/image"},
		{"/var/lib/appliance/image", "/etc/appliance", "/var/lib/appliance/image"},
		{"/var/lib/appliance/image", NULL, "/var/lib/appliance/image"},
		{"image", "relative/dir", "relative/dir/image"},
		{"image", "", "image"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct appl_err err = {0};
		char doc[512];
		snprintf(doc, sizeof(doc),
			 "{\"policy_version\": 1, \"serial\": 1, \"expires\": "
			 "\"2027-01-31T00:00:00Z\", \"image\": {\"layout\": \"%s\", \"digest\": "
			 "\"" DIGEST "\"}}",
			 cases[i].layout);
		struct policy *p = parse_str(doc, cases[i].base, &err);
		if (!p)
			fail_msg("%s: %s", cases[i].layout, err.msg);
		assert_string_equal(policy_image_layout(p), cases[i].want);
		policy_free(p);
	}
}

static void test_layout_relative_without_base(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_str(HEAD "}", NULL, &err);

	(void)state;
	assert_null(p);
	assert_int_equal(err.code, -EINVAL);
	assert_string_equal(err.msg,
			    "image.layout: relative, and no policy directory to resolve it");
}

static void test_layout_too_long_resolved(void **state)
{
	struct appl_err err = {0};
	char base[PATH_MAX];
	struct policy *p;

	(void)state;
	memset(base, 'd', sizeof(base) - 4);
	base[0] = '/';
	base[sizeof(base) - 4] = '\0';
	p = parse_str(HEAD "}", base, &err);
	assert_null(p);
	assert_string_equal(err.msg, "image.layout: longer than 4095 bytes once resolved");
}

static void test_servers_read(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file(DATA "/valid/full.json", BASEDIR, &err);
	const struct policy_server *s;

	(void)state;
	assert_non_null(p);
	assert_int_equal(policy_server_count(p), 2);
	assert_true(policy_http_used(p));
	/* sorted by name, whatever the file's order */
	s = policy_server_get(p, 0);
	assert_string_equal(s->name, "remote");
	assert_int_equal(s->kind, POLICY_SERVER_HTTP);
	assert_string_equal(s->url, "https://mcp.example.com/mcp");
	assert_int_equal(s->nheaders, 1);
	assert_string_equal(s->headers[0].name, "Authorization");
	assert_string_equal(s->headers[0].value, "Bearer {env:REMOTE_TOKEN}");
	assert_null(s->argv);
	assert_int_equal(s->argc, 0);
	assert_null(s->cwd);
	s = policy_server_get(p, 1);
	assert_ptr_equal(s, policy_server_find(p, "toy"));
	assert_int_equal(s->kind, POLICY_SERVER_STDIO);
	assert_int_equal(s->argc, 2);
	assert_string_equal(s->argv[0], "/usr/bin/node");
	assert_string_equal(s->argv[1], "/srv/toy/server.js");
	assert_null(s->argv[2]);
	assert_int_equal(s->nenv, 1);
	assert_string_equal(s->env[0], "HOME");
	assert_null(s->env[1]);
	assert_string_equal(s->cwd, "/srv/toy");
	assert_null(s->url);
	assert_null(policy_server_get(p, 2));
	assert_null(policy_server_find(p, "tox"));
	assert_null(policy_server_find(p, NULL));
	assert_int_equal(policy_serial(p), 7);
	assert_string_equal(policy_audit_path(p), "/var/log/appliance/audit.jsonl");
	assert_false(policy_audit_seal(p));
	policy_free(p);
}

/* Which tools the policy names itself (the metrics' tool label): an exact
 * `tools` entry or an exact role pattern, never a wildcard's catch. */
static void test_tool_named(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(
		", \"servers\": {\"fs\": {\"command\": [\"/bin/fs\"]}, \"t\": {\"command\": "
		"[\"/bin/t\"]}}, \"tools\": {\"fs.*\": {\"access\": \"read\"}, \"fs.rm\": "
		"{\"access\": \"write\"}, \"t.*\": {\"access\": \"read\"}}, \"roles\": {\"dev\": "
		"{\"tools\": [\"fs.*\", \"t.list\"]}}",
		&err);
	const char *named;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	named = policy_tool_named(p, "fs", "rm"); /* a `tools` entry */
	assert_non_null(named);
	assert_string_equal(named, "rm");
	assert_string_equal(policy_tool_named(p, "t", "list"), "list"); /* a role's pattern */
	assert_null(policy_tool_named(p, "fs", "read_file"));		/* only fs.* */
	assert_null(policy_tool_named(p, "fs", "*"));
	assert_null(policy_tool_named(p, "f", "s.rm"));
	assert_null(policy_tool_named(p, "t", "lis"));
	assert_null(policy_tool_named(p, "nope", "rm"));
	assert_null(policy_tool_named(p, NULL, "rm"));
	assert_null(policy_tool_named(NULL, "fs", "rm"));
	policy_free(p);
}

/* A role's "sessions": absent none, {} the defaults, each field within
 * its range, nothing else, and never rootless. */
/* image.preload: module names, kept comma-joined for the runner; refused
 * when malformed, repeated, too many, or with no pool to import them in. */
static void test_image_preload(void **state)
{
	static const char *const bad[][2] = {
		{"\"numpy\"", "image.preload: must be an array of 0 to 16 module names"},
		{"[\"numpy\", 1]", "image.preload[1]: must be a module name"},
		{"[\"\"]", "image.preload[0]: must be a module name"},
		{"[\"num py\"]", "image.preload[0]"},
		{"[\"numpy,os\"]", "image.preload[0]"},
		{"[\".numpy\"]", "image.preload[0]"},
		{"[\"numpy.\"]", "image.preload[0]"},
		{"[\"a..b\"]", "image.preload[0]"},
		{"[\"9lives\"]", "image.preload[0]"},
		{"[\"--pooled\"]", "image.preload[0]"},
		{"[\"pandas\", \"pandas\"]", "image.preload[1]: \"pandas\" is named twice"},
		{"[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\","
		 "\"m\",\"n\",\"o\",\"p\",\"q\"]",
		 "image.preload: must be an array of 0 to 16 module names"},
	};
	struct appl_err err = {0};
	char doc[2048];
	struct policy *p;

	(void)state;
	p = parse_str(HEAD_NO_IMAGE
		      "\"image\": {\"layout\": \"img\", \"digest\": \"" DIGEST
		      "\", \"preload\": [\"numpy\", \"pandas\", \"matplotlib.pyplot\", "
		      "\"_x9.y_\"]}}",
		      BASEDIR, &err);
	if (!p)
		fail_msg("%s", err.msg);
	assert_string_equal(policy_image_preload(p), "numpy,pandas,matplotlib.pyplot,_x9.y_");
	policy_free(p);
	p = parse_with("", &err);
	assert_non_null(p);
	assert_null(policy_image_preload(p));
	policy_free(p);
	p = parse_str(HEAD_NO_IMAGE "\"image\": {\"layout\": \"img\", \"digest\": \"" DIGEST
				    "\", \"preload\": []}}",
		      BASEDIR, &err);
	assert_non_null(p);
	assert_null(policy_image_preload(p));
	policy_free(p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(doc, sizeof(doc),
			 HEAD_NO_IMAGE "\"image\": {\"layout\": \"img\", \"digest\": \"" DIGEST
				       "\", \"preload\": %s}}",
			 bad[i][0]);
		assert_null(parse_str(doc, BASEDIR, &err));
		if (!strstr(err.msg, bad[i][1]))
			fail_msg("%s: %s", bad[i][0], err.msg);
	}
	/* No pool: nothing would ever import them. */
	assert_null(parse_str(HEAD_NO_IMAGE
			      "\"image\": {\"layout\": \"img\", \"digest\": \"" DIGEST
			      "\", \"preload\": [\"numpy\"]}, \"limits\": {\"pool\": 0}}",
			      BASEDIR, &err));
	assert_non_null(strstr(err.msg, "image.preload: needs limits.pool of 1 or more"));
}

/* ---- code tools --------------------------------------------------------------- */

/* The valid example of tests/data with its program file in dir (written
 * with body; NULL: none written). */
static struct policy *code_tools_policy(const char *dir, const char *body, struct appl_err *err)
{
	char path[600], progs[512];
	struct policy *p;

	if (body) {
		snprintf(progs, sizeof(progs), "%s/programs", dir);
		mkdir(progs, 0700);
		snprintf(path, sizeof(path), "%s/keep_note.py", progs);
		FILE *f = fopen(path, "w");
		assert_non_null(f);
		fputs(body, f);
		fclose(f);
	}
	p = parse_file(DATA "/valid/code-tools.json", dir, err);
	assert_non_null(p);
	return p;
}

static void test_code_tools_read_back(void **state)
{
	struct appl_err err = {0};
	struct policy *p = code_tools_policy("/nonexistent", NULL, &err);
	const struct policy_code_tool *w, *k;
	unsigned char h[32];
	char hex[65];

	(void)state;
	assert_int_equal(policy_code_tool_count(p), 2);
	/* sorted by name */
	k = policy_code_tool_get(p, 0);
	w = policy_code_tool_get(p, 1);
	assert_string_equal(k->name, "keep-note");
	assert_string_equal(w->name, "weekly_report");
	assert_ptr_equal(policy_code_tool_find(p, "weekly_report"), w);
	assert_null(policy_code_tool_find(p, "weekly"));
	assert_int_equal(w->access, POLICY_ACCESS_READ);
	assert_int_equal(k->access, POLICY_ACCESS_WRITE);
	assert_non_null(w->input);
	assert_non_null(w->output);
	assert_null(k->output);
	assert_non_null(w->example);
	/* an inline program is pinned by its own digest; a file's by the
	 * policy's, and its code is read later */
	crypto_hash_sha256(h, (const unsigned char *)w->code, w->code_len);
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	assert_string_equal(w->sha256, hex);
	assert_null(w->file);
	assert_null(k->code);
	assert_string_equal(k->file, "/nonexistent/programs/keep_note.py");
	assert_int_equal(w->nuses, 2);
	assert_string_equal(w->uses[1], "tickets.*");
	/* roles: inline by default, invoke-only as written */
	assert_true(policy_role_find(p, "reader")->run_python);
	assert_false(policy_role_find(p, "invoker")->run_python);
	assert_int_equal(policy_role_find(p, "editor")->ncode_tools, 1);
	policy_free(p);
}

/* telemetry: the collector and the service name, read back; none without
 * the section. */
static void test_telemetry_read_back(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file(DATA "/valid/telemetry.json", BASEDIR, &err);
	struct policy *none = parse_file(DATA "/valid/code-tools.json", BASEDIR, &err);

	(void)state;
	assert_non_null(p);
	assert_non_null(none);
	assert_string_equal(policy_telemetry_endpoint(p), "http://127.0.0.1:4318");
	assert_string_equal(policy_telemetry_service(p), "appliance-prod.1");
	assert_null(policy_telemetry_endpoint(none));
	assert_null(policy_telemetry_service(none));
	policy_free(p);
	policy_free(none);
	p = parse_with(", \"telemetry\": {\"otlp_endpoint\": \"https://otel.example.com\"}", &err);
	assert_non_null(p);
	assert_string_equal(policy_telemetry_service(p), POLICY_SERVICE_NAME_DEFAULT);
	policy_free(p);
}

static void test_code_tool_allowed(void **state)
{
	struct appl_err err = {0};
	struct policy *p = code_tools_policy("/nonexistent", NULL, &err);
	const struct policy_code_tool *t;

	(void)state;
	assert_int_equal(policy_code_tool_allowed(p, "invoker", "weekly_report", &t), POLICY_OK);
	assert_string_equal(t->name, "weekly_report");
	assert_int_equal(policy_code_tool_allowed(p, "invoker", "keep-note", &t), POLICY_DENY_ROLE);
	assert_int_equal(policy_code_tool_allowed(p, "editor", "keep-note", NULL), POLICY_OK);
	assert_int_equal(policy_code_tool_allowed(p, "reader", "weekly_report", NULL),
			 POLICY_DENY_ROLE);
	assert_int_equal(policy_code_tool_allowed(p, "editor", "nosuch", &t), POLICY_DENY_NO_TOOL);
	assert_null(t);
	assert_int_equal(policy_code_tool_allowed(p, NULL, "weekly_report", NULL),
			 POLICY_DENY_NO_ROLE);
	assert_int_equal(policy_code_tool_allowed(p, "ghost", "weekly_report", NULL),
			 POLICY_DENY_NO_ROLE);
	policy_free(p);
}

/* "*" lists a write tool only for a role that writes. */
static void test_code_tool_star_and_write(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(
		", \"servers\": {\"t\": {\"command\": [\"/bin/t\"]}}, \"tools\": {\"t.*\": "
		"{\"access\": \"write\"}}, \"code_tools\": [{\"name\": \"w\", \"description\": "
		"\"d\", \"input_schema\": {\"type\": \"object\"}, \"code\": \"1\", \"uses\": "
		"[\"t.*\"], \"access\": \"write\"}], \"roles\": {\"r\": {\"tools\": [], "
		"\"code_tools\": [\"*\"]}, \"rw\": {\"tools\": [], \"write\": true, "
		"\"code_tools\": [\"*\"]}}",
		&err);

	(void)state;
	assert_non_null(p);
	assert_int_equal(policy_code_tool_allowed(p, "r", "w", NULL), POLICY_DENY_WRITE);
	assert_int_equal(policy_code_tool_allowed(p, "rw", "w", NULL), POLICY_OK);
	policy_free(p);
}

/* A program calls what its uses name, whatever the role's patterns say;
 * writes only when the tool's access is write, and never under check. */
static void test_code_tool_calls(void **state)
{
	struct appl_err err = {0};
	struct policy *p = code_tools_policy("/nonexistent", NULL, &err);
	struct policy_caller week = {.role = "invoker",
				     .tool = policy_code_tool_find(p, "weekly_report")};
	struct policy_caller note = {.role = "editor",
				     .tool = policy_code_tool_find(p, "keep-note")};
	struct policy_caller dry = note;
	struct policy_caller cell = {.role = "reader"};
	enum policy_access a;

	(void)state;
	dry.no_writes = true;
	/* the invoker's role names no tool at all: the uses decide */
	assert_int_equal(policy_call_check(p, &week, "toy", "add", true, &a), POLICY_OK);
	assert_int_equal(a, POLICY_ACCESS_READ);
	assert_int_equal(policy_call_check(p, &week, "toy", "echo", true, &a), POLICY_DENY_USES);
	assert_int_equal(policy_call_check(p, &week, "toy", "nope", false, &a),
			 POLICY_DENY_UNLISTED);
	/* tickets.* is a write server: a read tool of it is callable, its
	 * writes are not for a read code tool */
	assert_int_equal(policy_call_check(p, &week, "tickets", "list", true, &a), POLICY_OK);
	assert_int_equal(policy_call_check(p, &week, "tickets", "create", false, &a),
			 POLICY_DENY_WRITE);
	assert_int_equal(policy_call_check(p, &note, "toy", "write_note", false, &a), POLICY_OK);
	assert_int_equal(a, POLICY_ACCESS_WRITE);
	assert_int_equal(policy_call_check(p, &dry, "toy", "write_note", false, &a),
			 POLICY_DENY_CHECK);
	assert_int_equal(policy_call_check(p, &dry, "toy", "echo", true, &a), POLICY_OK);
	/* a role's cell as before */
	assert_int_equal(policy_call_check(p, &cell, "toy", "echo", true, &a), POLICY_OK);
	assert_int_equal(policy_call_check(p, &cell, "tickets", "list", true, &a),
			 POLICY_DENY_ROLE);
	/* a code tool's call needs a role of the policy */
	week.role = "ghost";
	assert_int_equal(policy_call_check(p, &week, "toy", "add", true, &a), POLICY_DENY_NO_ROLE);
	assert_non_null(policy_verdict_text(POLICY_DENY_USES));
	assert_non_null(policy_verdict_text(POLICY_DENY_CHECK));
	policy_free(p);
}

/* The program file: read and held to its digest; a changed one is
 * refused with its name and both digests. */
static void test_code_tool_files(void **state)
{
	char dir[] = "/tmp/test-policy-code.XXXXXX", path[600], want[64 * 3];
	struct appl_err err = {0};
	struct policy *p;
	const struct policy_code_tool *k;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* the digest the policy names is ab...ab: any real file differs */
	p = code_tools_policy(dir, "await toy.write_note(text=args['text'])\n", &err);
	assert_int_equal(policy_code_files_read(p, &err), -EBADMSG);
	snprintf(path, sizeof(path), "%s/programs/keep_note.py", dir);
	assert_non_null(strstr(err.msg, path));
	snprintf(want, sizeof(want), "the policy says sha256:%.64s",
		 "abababababababababababababababababababababababababababababababab");
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, "has sha256:"));
	policy_free(p);
	/* no file at all */
	unlink(path);
	p = code_tools_policy(dir, NULL, &err);
	assert_true(policy_code_files_read(p, &err) < 0);
	assert_non_null(strstr(err.msg, "code_tools keep-note: the program"));
	policy_free(p);
	/* the file the digest names: read, and its code is the file's */
	p = code_tools_policy(dir, "x", &err);
	k = policy_code_tool_find(p, "keep-note");
	/* sha256("x") is not ab..ab: the policy is written with that, so
	 * read it with the digest taken from the refusal */
	assert_int_equal(policy_code_files_read(p, &err), -EBADMSG);
	policy_free(p);
	(void)k;
	rmdir(dir);
}

static void test_role_sessions(void **state)
{
	static const char *const bad[][2] = {
		{"[]", "must be an object"},
		{"{\"max\": 0}", "sessions.max"},
		{"{\"max\": 65}", "sessions.max"},
		{"{\"idle_s\": 86401}", "sessions.idle_s"},
		{"{\"max_cells\": 0}", "sessions.max_cells"},
		{"{\"memory_mb\": 63}", "sessions.memory_mb"},
		{"{\"memory_mb\": 65537}", "sessions.memory_mb"},
		{"{\"maxx\": 1}", "did you mean max?"},
	};
	struct appl_err err = {0};
	char doc[1024];
	struct policy *p = parse_with(
		", \"servers\": {\"fs\": {\"command\": [\"/bin/fs\"]}}, \"roles\": {\"a\": "
		"{\"tools\": [\"fs.*\"]}, \"b\": {\"tools\": [\"fs.*\"], \"sessions\": {}}, "
		"\"c\": {\"tools\": [], \"sessions\": {\"max\": 64, \"idle_s\": 1, "
		"\"max_cells\": 100000, \"memory_mb\": 64}}}",
		&err);
	const struct policy_role *r;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	assert_int_equal(policy_role_find(p, "a")->sessions.max, 0);
	r = policy_role_find(p, "b");
	assert_int_equal(r->sessions.max, APPL_SESSION_MAX_DEF);
	assert_int_equal(r->sessions.idle_s, APPL_SESSION_IDLE_S_DEF);
	assert_int_equal(r->sessions.max_cells, APPL_SESSION_MAX_CELLS_DEF);
	assert_int_equal(r->sessions.memory_mb, APPL_SESSION_MEMORY_MB_DEF);
	r = policy_role_find(p, "c");
	assert_int_equal(r->sessions.max, 64);
	assert_int_equal(r->sessions.idle_s, 1);
	assert_int_equal(r->sessions.max_cells, 100000);
	assert_int_equal(r->sessions.memory_mb, 64);
	policy_free(p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(doc, sizeof(doc),
			 ", \"roles\": {\"a\": {\"tools\": [], \"sessions\": %s}}", bad[i][0]);
		assert_null(parse_with(doc, &err));
		if (!strstr(err.msg, bad[i][1]))
			fail_msg("%s: %s", bad[i][0], err.msg);
	}
	assert_null(parse_with(", \"runtime\": {\"rootless\": true}, \"roles\": {\"a\": "
			       "{\"tools\": [], \"sessions\": {}}}",
			       &err));
	assert_non_null(strstr(err.msg, "roles.a.sessions: needs root"));
}

/* A tool entry's "approval", a role's "approve_writes", and which calls
 * they gate. */
static void test_approvals(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(
		", \"servers\": {\"fs\": {\"command\": [\"/bin/fs\"]}, \"t\": {\"command\": "
		"[\"/bin/t\"]}}, \"tools\": {\"fs.*\": {\"access\": \"write\"}, \"fs.rm\": "
		"{\"access\": \"write\", \"approval\": true}, \"t.*\": {\"access\": \"write\", "
		"\"approval\": true}}, \"roles\": {\"dev\": {\"tools\": [\"fs.*\", \"t.*\"], "
		"\"write\": true}, \"ops\": {\"tools\": [\"fs.*\"], \"write\": true, "
		"\"approve_writes\": true}}, \"approvals\": {\"command\": \"/usr/bin/ask\"}, "
		"\"limits\": {\"approval_timeout_s\": 30, \"max_approvals\": 0}",
		&err);
	struct policy_limits l;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	assert_true(policy_approvals_used(p));
	assert_string_equal(policy_approvals_command(p), "/usr/bin/ask");
	policy_limits_get(p, &l);
	assert_int_equal(l.approval_timeout_s, 30);
	assert_int_equal(l.max_approvals, 0);
	/* The exact entry decides for fs.rm; the wildcard for the rest. */
	assert_true(policy_tool_approval(p, "fs", "rm", "dev", POLICY_ACCESS_WRITE));
	assert_false(policy_tool_approval(p, "fs", "write", "dev", POLICY_ACCESS_WRITE));
	assert_true(policy_tool_approval(p, "t", "x", "dev", POLICY_ACCESS_READ));
	/* approve_writes: every write of the role, no read. */
	assert_true(policy_tool_approval(p, "fs", "write", "ops", POLICY_ACCESS_WRITE));
	assert_false(policy_tool_approval(p, "fs", "read", "ops", POLICY_ACCESS_READ));
	assert_false(policy_tool_approval(p, "fs", "write", NULL, POLICY_ACCESS_WRITE));
	policy_free(p);
	assert_null(parse_with(", \"approvals\": {\"command\": \"ask\"}", &err));
	assert_non_null(strstr(err.msg, "approvals.command"));
	assert_null(parse_with(", \"approvals\": {}", &err));
	assert_non_null(strstr(err.msg, "approvals.command"));
	assert_null(parse_with(", \"servers\": {\"fs\": {\"command\": [\"/bin/fs\"]}}, "
			       "\"tools\": {\"fs.*\": {\"access\": \"write\", \"approval\": 1}}",
			       &err));
	assert_non_null(strstr(err.msg, "approval"));
}

static void test_server_confinement(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(
		", \"servers\": {\"a\": {\"command\": [\"/bin/a\"]}, \"b\": {\"command\": "
		"[\"/bin/b\"], \"user\": \"svc_b-1\", \"memory_mb\": 256, \"pids\": 32, "
		"\"network\": false}, \"r\": {\"command\": [\"/bin/r\"], \"user\": \"root\"}}",
		&err);
	const struct policy_server *a, *b;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	a = policy_server_find(p, "a");
	b = policy_server_find(p, "b");
	assert_null(a->user);
	assert_int_equal(a->memory_mb, APPL_UPSTREAM_MEMORY_MB_DEF);
	assert_int_equal(a->pids, APPL_UPSTREAM_PIDS_DEF);
	assert_true(a->network);
	assert_string_equal(b->user, "svc_b-1");
	assert_int_equal(b->memory_mb, 256);
	assert_int_equal(b->pids, 32);
	assert_false(b->network);
	assert_string_equal(policy_server_find(p, "r")->user, "root");
	policy_free(p);
	/* bad values are refused, with the field's path */
	static const char *const bad[][2] = {
		{"\"user\": \"Root\"", "servers.a.user"},
		{"\"user\": \"a b\"", "servers.a.user"},
		{"\"user\": \"\"", "servers.a.user"},
		{"\"user\": \"0123456789012345678901234567890123\"", "servers.a.user"},
		{"\"memory_mb\": 16", "servers.a.memory_mb"},
		{"\"memory_mb\": 1000000", "servers.a.memory_mb"},
		{"\"pids\": 1", "servers.a.pids"},
		{"\"network\": 0", "servers.a.network"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char doc[256];

		snprintf(doc, sizeof(doc),
			 ", \"servers\": {\"a\": {\"command\": [\"/bin/a\"], %s}}", bad[i][0]);
		assert_null(parse_with(doc, &err));
		if (!strstr(err.msg, bad[i][1]))
			fail_msg("%s: %s", bad[i][0], err.msg);
	}
	/* rootless cannot honour a user or a network namespace: refused */
	assert_null(parse_with(", \"runtime\": {\"rootless\": true}, \"servers\": {\"a\": "
			       "{\"command\": [\"/bin/a\"], \"network\": false}}",
			       &err));
	assert_non_null(strstr(err.msg, "servers.a.network"));
	assert_null(parse_with(", \"runtime\": {\"rootless\": true}, \"servers\": {\"a\": "
			       "{\"command\": [\"/bin/a\"], \"user\": \"nobody\"}}",
			       &err));
	assert_non_null(strstr(err.msg, "servers.a.user"));
}

/* servers.NAME.resources and .concurrency, on both kinds of server. */
static void test_server_resources_concurrency(void **state)
{
	struct appl_err err = {0};
	struct policy *p =
		parse_file(DATA "/valid/server-resources-concurrency.json", BASEDIR, &err);
	const struct policy_server *s;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	s = policy_server_find(p, "toy");
	assert_int_equal(s->kind, POLICY_SERVER_STDIO);
	assert_true(s->resources);
	assert_int_equal(s->concurrency, 1);
	s = policy_server_find(p, "remote");
	assert_int_equal(s->kind, POLICY_SERVER_HTTP);
	assert_false(s->resources);
	assert_int_equal(s->concurrency, APPL_SERVER_CONCURRENCY_CEIL);
	policy_free(p);

	/* Left out: no resources, the default concurrency, both kinds. */
	p = parse_with(", \"servers\": {\"a\": {\"command\": [\"/bin/a\"]}, \"h\": {\"url\": "
		       "\"https://h.example/mcp\"}}",
		       &err);
	if (!p)
		fail_msg("%s", err.msg);
	for (size_t i = 0; i < policy_server_count(p); i++) {
		s = policy_server_get(p, i);
		assert_false(s->resources);
		assert_int_equal(s->concurrency, APPL_SERVER_CONCURRENCY_DEF);
	}
	assert_int_equal(APPL_SERVER_CONCURRENCY_DEF, 16);
	policy_free(p);

	/* Both ends of the range are accepted, on an HTTP server too. */
	p = parse_with(", \"servers\": {\"a\": {\"command\": [\"/bin/a\"], \"concurrency\": 1}, "
		       "\"h\": {\"url\": \"https://h.example/mcp\", \"concurrency\": 32, "
		       "\"resources\": true}}",
		       &err);
	if (!p)
		fail_msg("%s", err.msg);
	assert_int_equal(policy_server_find(p, "a")->concurrency, APPL_SERVER_CONCURRENCY_MIN);
	assert_int_equal(policy_server_find(p, "h")->concurrency, APPL_SERVER_CONCURRENCY_CEIL);
	assert_true(policy_server_find(p, "h")->resources);
	policy_free(p);

	/* Bad values are refused with the field's path, on both kinds. */
	static const char *const bad[][2] = {
		{"\"concurrency\": 0", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": 33", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": -1", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": \"4\"", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": 4.0", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": true", "concurrency: must be an integer between 1 and 32"},
		{"\"concurrency\": null", "concurrency: must be an integer between 1 and 32"},
		{"\"resources\": \"yes\"", "resources: must be true or false"},
		{"\"resources\": 1", "resources: must be true or false"},
		{"\"resources\": null", "resources: must be true or false"},
	};
	static const char *const kinds[][2] = {
		{"\"command\": [\"/bin/a\"]", "servers.a."},
		{"\"url\": \"https://h.example/mcp\"", "servers.a."},
	};
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char doc[256], want[128];

			snprintf(doc, sizeof(doc), ", \"servers\": {\"a\": {%s, %s}}", kinds[k][0],
				 bad[i][0]);
			snprintf(want, sizeof(want), "%s%s", kinds[k][1], bad[i][1]);
			assert_null(parse_with(doc, &err));
			if (strcmp(err.msg, want) != 0)
				fail_msg("%s: got %s, want %s", doc, err.msg, want);
			assert_int_equal(err.code, -EINVAL);
		}
	}
}

/* Who may read a server's resources: the server says resources, and the
 * role names the whole server; `tools` and write play no part. */
static void test_resources_allowed(void **state)
{
	static const struct {
		const char *server, *role;
		bool want;
	} cases[] = {
		{"srv", "whole", true},	     /* "srv.*" */
		{"srv", "reader", true},     /* "srv.*" and no write: a read is a read */
		{"srv", "exact", false},     /* only "srv.tool" */
		{"srv", "both", true},	     /* "srv.tool" and "srv.*" */
		{"srv", "other", false},     /* "srvx.*": another server */
		{"srv", "none", false},	     /* no patterns */
		{"srvx", "other", true},     /* an HTTP server with resources */
		{"srvx", "whole", false},    /* "srv.*" is not "srvx.*" */
		{"closed", "closed", false}, /* resources false, even with "closed.*" */
		{"dflt", "dflt", false},     /* resources left out */
		{"ghost", "whole", false},   /* no such server */
		{"srv", "ghost", false},     /* no such role */
		{"srv", NULL, false},	     /* no role */
		{NULL, "whole", false},	     /* no server */
		{"sr", "whole", false},	     /* a prefix of a server */
		{"srv.*", "whole", false},   /* a pattern is not a server name */
		{"", "whole", false},
	};
	struct appl_err err = {0};
	struct policy *p = parse_with(
		", \"servers\": {\"srv\": {\"command\": [\"/bin/srv\"], \"resources\": true}, "
		"\"srvx\": {\"url\": \"https://x.example/mcp\", \"resources\": true}, \"closed\": "
		"{\"command\": [\"/bin/c\"], \"resources\": false}, \"dflt\": {\"command\": "
		"[\"/bin/d\"]}}, \"tools\": {\"srv.tool\": {\"access\": \"write\"}}, \"roles\": "
		"{\"whole\": {\"tools\": [\"srv.*\"], \"write\": true}, \"reader\": {\"tools\": "
		"[\"srv.*\"]}, \"exact\": {\"tools\": [\"srv.tool\"], \"write\": true}, \"both\": "
		"{\"tools\": [\"srv.tool\", \"srv.*\"]}, \"other\": {\"tools\": [\"srvx.*\"]}, "
		"\"none\": {\"tools\": []}, \"closed\": {\"tools\": [\"closed.*\"], \"write\": "
		"true}, \"dflt\": {\"tools\": [\"dflt.*\"]}}",
		&err);

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (policy_resources_allowed(p, cases[i].server, cases[i].role) != cases[i].want)
			fail_msg("case %zu (%s, %s): want %d", i,
				 cases[i].server ? cases[i].server : "NULL",
				 cases[i].role ? cases[i].role : "NULL", cases[i].want);
	assert_false(policy_resources_allowed(NULL, "srv", "whole"));
	policy_free(p);
}

static void test_audit_seal_is_a_boolean(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(", \"audit\": {\"path\": \"/a/log\", \"seal\": true}", &err);

	(void)state;
	assert_non_null(p);
	assert_true(policy_audit_seal(p));
	policy_free(p);
	assert_null(parse_with(", \"audit\": {\"path\": \"/a/log\", \"seal\": 1}", &err));
	assert_non_null(strstr(err.msg, "audit.seal"));
	assert_null(parse_with(", \"audit\": {\"seal\": true}", &err));
	assert_non_null(strstr(err.msg, "audit.path"));
}

/* {name} in audit.path's file name: replaced by the appliance's name, or
 * the policy's default; any other brace refused. */
static void test_audit_path_name(void **state)
{
	static const char *const bad[] = {"/a/{name}/log", "/a/log-{name}-{name}", "/a/log-{x}",
					  "/a/log-{", "/a/{name}}"};
	struct appl_err err = {0};
	struct policy *p = parse_with(", \"audit\": {\"path\": \"/a/log-{name}.jsonl\"}", &err);
	char out[64];

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	assert_int_equal(policy_audit_path_for(p, "r2", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/log-r2.jsonl");
	assert_int_equal(policy_audit_path_for(p, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "/a/log-appliance.jsonl"); /* no deployment named */
	assert_int_equal(policy_audit_path_for(p, "r2", out, 8), -ENAMETOOLONG);
	policy_free(p);
	p = parse_with(", \"audit\": {\"path\": \"/a/log\"}", &err);
	assert_int_equal(policy_audit_path_for(p, "r2", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/log");
	policy_free(p);
	p = parse_with("", &err);
	assert_int_equal(policy_audit_path_for(p, "r2", out, sizeof(out)), -ENOENT);
	policy_free(p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char extra[128];

		snprintf(extra, sizeof(extra), ", \"audit\": {\"path\": \"%s\"}", bad[i]);
		if ((p = parse_with(extra, &err)))
			fail_msg("accepted %s", bad[i]);
		assert_non_null(strstr(err.msg, "a brace only as {name}"));
	}
}

static void test_stdio_only_not_http(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_with(", \"servers\": {\"b\": {\"command\": [\"/bin/b\"]}, \"a\": "
				      "{\"command\": [\"/bin/a\"], \"env\": []}}",
				      &err);

	(void)state;
	assert_non_null(p);
	assert_false(policy_http_used(p));
	assert_string_equal(policy_server_get(p, 0)->name, "a");
	assert_int_equal(policy_server_get(p, 0)->nenv, 0);
	assert_null(policy_server_get(p, 0)->env[0]);
	assert_null(policy_server_get(p, 1)->env);
	policy_free(p);
}

static void test_roles_and_clients_read(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file(DATA "/valid/tokens-two.json", BASEDIR, &err);
	const struct policy_role *r;
	const struct policy_token *t;
	unsigned char h[POLICY_TOKEN_HASH_LEN];

	(void)state;
	assert_non_null(p);
	assert_int_equal(policy_role_count(p), 2);
	r = policy_role_get(p, 0);
	assert_string_equal(r->name, "admin");
	assert_true(r->write);
	assert_int_equal(r->ntools, 1);
	assert_string_equal(r->tools[0], "toy.*");
	assert_null(r->tools[1]);
	r = policy_role_find(p, "reader");
	assert_non_null(r);
	assert_false(r->write);
	assert_int_equal(r->ntools, 2);
	assert_null(policy_role_find(p, "nobody"));
	assert_null(policy_role_find(p, NULL));
	assert_string_equal(policy_client_default_role(p), "reader");
	assert_int_equal(policy_token_count(p), 2);
	t = policy_token_get(p, 1);
	assert_string_equal(t->name, "dash-board_2");
	assert_string_equal(t->role, "reader");
	t = policy_token_get(p, 0);
	assert_string_equal(t->name, "ci");
	assert_string_equal(t->role, "admin");
	for (size_t i = 0; i < sizeof(h); i++) {
		unsigned v;
		assert_int_equal(sscanf(HASH1 + 2 * i, "%2x", &v), 1);
		h[i] = (unsigned char)v;
	}
	assert_memory_equal(t->sha256, h, sizeof(h));
	assert_ptr_equal(policy_token_match(p, h), t);
	h[31] ^= 1;
	assert_null(policy_token_match(p, h));
	assert_null(policy_token_match(p, NULL));
	policy_free(p);
}

static void test_runtime_read(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file(DATA "/valid/rootless-kvm.json", BASEDIR, &err);

	(void)state;
	assert_non_null(p);
	assert_string_equal(policy_runtime_platform(p), "kvm");
	assert_true(policy_runtime_rootless(p));
	assert_false(policy_runtime_restore(p)); /* rootless never restores */
	assert_string_equal(policy_runtime_runsc(p), "/usr/bin/runsc");
	policy_free(p);
	p = parse_with(", \"runtime\": {\"restore\": false}", &err);
	assert_non_null(p);
	assert_false(policy_runtime_restore(p));
	policy_free(p);
	p = parse_with(", \"runtime\": {\"rootless\": true, \"restore\": false}", &err);
	assert_non_null(p);
	assert_false(policy_runtime_restore(p));
	policy_free(p);
	/* restore: true said outright cannot be honoured rootless: refused */
	assert_null(parse_with(", \"runtime\": {\"rootless\": true, \"restore\": true}", &err));
	assert_non_null(strstr(err.msg, "runtime.restore"));
	assert_null(parse_with(", \"runtime\": {\"restore\": 1}", &err));
	assert_non_null(strstr(err.msg, "runtime.restore"));
	p = parse_with(", \"runtime\": {\"platform\": \"ptrace\"}", &err);
	assert_non_null(p);
	assert_string_equal(policy_runtime_platform(p), "ptrace");
	policy_free(p);
	p = parse_with(", \"runtime\": {\"runsc\": \"/opt/gvisor/runsc\"}", &err);
	assert_non_null(p);
	assert_string_equal(policy_runtime_runsc(p), "/opt/gvisor/runsc");
	assert_string_equal(policy_runtime_platform(p), "systrap");
	policy_free(p);
}

static void test_serial_max(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file(DATA "/valid/serial-max.json", BASEDIR, &err);

	(void)state;
	assert_non_null(p);
	assert_true(policy_serial(p) == 9223372036854775807ull);
	policy_free(p);
	/* past int64: jansson refuses the number itself */
	p = parse_str("{\"policy_version\": 1, \"serial\": 9223372036854775808}", BASEDIR, &err);
	assert_null(p);
	assert_true(strncmp(err.msg, "policy: invalid JSON", 20) == 0);
}

/* ---- the document as bytes -------------------------------------------------- */

static void test_size_cap(void **state)
{
	struct appl_err err = {0};
	struct policy *p = NULL;
	size_t len = APPL_POLICY_FILE_MAX + 1;
	char *buf = malloc(len);

	(void)state;
	assert_non_null(buf);
	memset(buf, ' ', len);
	memcpy(buf, HEAD "}", strlen(HEAD "}"));
	assert_int_equal(policy_parse(buf, len, BASEDIR, &p, &err), -EFBIG);
	assert_null(p);
	/* the same bytes one shorter are a policy (trailing spaces) */
	assert_int_equal(policy_parse(buf, len - 1, BASEDIR, &p, &err), 0);
	policy_free(p);
	free(buf);
}

static void test_depth_cap(void **state)
{
	struct appl_err err = {0};
	struct policy *p = NULL;
	char deep[128], deeper[128];

	(void)state;
	/* APPL_POLICY_DEPTH_MAX levels: parsed, then refused; one more: too deep */
	snprintf(deep, sizeof(deep), "{\"a\":%.*s1%.*s}", APPL_POLICY_DEPTH_MAX - 1,
		 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", APPL_POLICY_DEPTH_MAX - 1,
		 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
	snprintf(deeper, sizeof(deeper), "{\"a\":%.*s1%.*s}", APPL_POLICY_DEPTH_MAX,
		 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", APPL_POLICY_DEPTH_MAX,
		 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
	assert_int_equal(policy_parse(deep, strlen(deep), BASEDIR, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "a: unknown key");
	assert_int_equal(policy_parse(deeper, strlen(deeper), BASEDIR, &p, &err), -E2BIG);
	assert_null(p);
}

/* An unknown key names the known one it is a slip of, and only when it is
 * close: a third of the name's length in edits, case and '-' for free. */
static void test_unknown_key_names_the_closest(void **state)
{
	static const struct {
		const char *body, *want;
	} cases[] = {
		{", \"limits\": {\"deadline\": 5}}",
		 "limits.deadline: unknown key; did you mean deadline_s?"},
		{", \"limits\": {\"memory-MB\": 64}}",
		 "limits.memory-MB: unknown key; did you mean memory_mb?"},
		{", \"serail\": 5}", "serail: unknown key; did you mean serial?"},
		{", \"runtime\": {\"rootles\": true}}",
		 "runtime.rootles: unknown key; did you mean rootless?"},
		{", \"limits\": {\"cell\": 2}}", "limits.cell: unknown key; did you mean cells?"},
		{", \"limits\": {\"timeout\": 5}}", "limits.timeout: unknown key"},
		{", \"a\": 1}", "a: unknown key"},
	};
	char doc[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct appl_err err = {0};

		snprintf(doc, sizeof(doc), "%s%s", HEAD, cases[i].body);
		assert_null(parse_str(doc, BASEDIR, &err));
		if (strcmp(err.msg, cases[i].want) != 0)
			fail_msg("%s:\n  got  %s\n  want %s", cases[i].body, err.msg,
				 cases[i].want);
	}
}

/* The serial as `sign --serial` finds it: only the top-level key written
 * "serial", never one inside another object or a string. */
static void test_serial_found_in_the_text(void **state)
{
	static const char doc[] = "{\"x\": {\"serial\": 1}, \"y\": \"\\\"serial\\\": 2\", "
				  "\"z\": [{\"serial\": 3}], \"serial\" :  42 , \"w\": 0}";
	static const struct {
		const char *doc, *want;
	} bad[] = {
		{"{\"a\": 1}", "no top-level serial to replace; add \"serial\": 1 to the policy"},
		{"{\"serial\": \"5\"}",
		 "serial: must be an integer of 1 to 9223372036854775807 to be replaced"},
		{"{\"serial\": 0}",
		 "serial: must be an integer of 1 to 9223372036854775807 to be replaced"},
		{"{\"serial\": 5.0}",
		 "serial: must be an integer of 1 to 9223372036854775807 to be replaced"},
		{"{\"seri\\u0061l\": 5}",
		 "serial: its key is not written plainly as \"serial\"; write it so to have it "
		 "replaced"},
		{"[1]", "no top-level serial to replace; add \"serial\": 1 to the policy"},
	};
	struct appl_err err = {0};
	size_t off, n;
	uint64_t v;

	(void)state;
	assert_int_equal(policy_serial_find(doc, strlen(doc), &off, &n, &v, &err), 0);
	assert_int_equal(v, 42);
	assert_int_equal(n, 2);
	assert_memory_equal(doc + off, "42 ,", 4);
	/* a raw NUL, which jansson would step over after a number, is no JSON */
	static const char nul[] = "{\"serial\": 7\0, \"a\": 1}";
	assert_int_equal(policy_serial_find(nul, sizeof(nul) - 1, &off, &n, &v, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "a NUL byte at offset 12"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(
			policy_serial_find(bad[i].doc, strlen(bad[i].doc), &off, &n, &v, &err),
			-EINVAL);
		assert_string_equal(err.msg, bad[i].want);
	}
}

/* now is the clock or the file's + 1, whichever is higher: two signings in
 * one second never share a serial. */
static void test_serial_pick(void **state)
{
	struct appl_err err = {0};
	uint64_t out;

	(void)state;
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_NOW, 5, 1000, 0, &out, &err), 0);
	assert_int_equal(out, 1000);
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_NOW, 1000, 1000, 0, &out, &err), 0);
	assert_int_equal(out, 1001);
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_NEXT, 5, 1000, 0, &out, &err), 0);
	assert_int_equal(out, 6);
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_SET, 5, 1000, 3, &out, &err), 0);
	assert_int_equal(out, 3);
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_NEXT, INT64_MAX, 0, 0, &out, &err),
			 -ERANGE);
	assert_string_equal(err.msg,
			    "serial: 9223372036854775807 is the highest there is; none follows it");
	assert_int_equal(policy_serial_pick(POLICY_SERIAL_SET, 5, 0, 0, &out, &err), -ERANGE);
}

/* The file keeps every other byte and its mode; a policy that would not be
 * signed, or a symlink, is left as it was. */
static void test_serial_written_in_place(void **state)
{
	char dir[] = "/tmp/test_policy.XXXXXX", path[128], link[128], *text;
	static const char before[] =
		"{\n  \"policy_version\": 1,\n\t\"serial\":7 ,\n  \"expires\": "
		"\"2027-01-31T00:00:00Z\",\n  \"image\": {\"layout\": \"img\", \"digest\": "
		"\"" DIGEST "\"}\n}\n";
	static const char after[] =
		"{\n  \"policy_version\": 1,\n\t\"serial\":1234 ,\n  \"expires\": "
		"\"2027-01-31T00:00:00Z\",\n  \"image\": {\"layout\": \"img\", \"digest\": "
		"\"" DIGEST "\"}\n}\n";
	struct appl_err err = {0};
	uint64_t old, new;
	struct stat st;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/p.json", dir);
	snprintf(link, sizeof(link), "%s/l.json", dir);
	f = fopen(path, "w");
	fputs(before, f);
	fclose(f);
	chmod(path, 0640);
	assert_int_equal(policy_serial_write(path, POLICY_SERIAL_NOW, 0, 1234, &old, &new, &err),
			 0);
	assert_int_equal(old, 7);
	assert_int_equal(new, 1234);
	assert_int_equal(appl_file_read(path, 4096, &text, &len, &err), 0);
	assert_string_equal(text, after);
	free(text);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	/* a symlink is refused, naming what to do */
	assert_int_equal(symlink(path, link), 0);
	assert_int_equal(policy_serial_write(link, POLICY_SERIAL_NEXT, 0, 0, NULL, NULL, &err),
			 -EINVAL);
	unlink(link);
	/* a policy the parser refuses is not touched */
	f = fopen(path, "w");
	fputs("{\"serial\": 3, \"x\": 1}", f);
	fclose(f);
	assert_int_equal(policy_serial_write(path, POLICY_SERIAL_NEXT, 0, 0, NULL, NULL, &err),
			 -EINVAL);
	assert_int_equal(appl_file_read(path, 4096, &text, &len, &err), 0);
	assert_string_equal(text, "{\"serial\": 3, \"x\": 1}");
	free(text);
	unlink(path);
	rmdir(dir);
}

static void test_json_errors(void **state)
{
	static const char *const docs[] = {
		"",
		"{",
		HEAD "} {}",
		HEAD ", \"audit\": {\"path\": \"/a\\u0000b\"}}",
		HEAD ",}",
		"{'policy_version': 1}",
		"\xef\xbb\xbf{}",
		HEAD ", \"limits\": {\"pool\": NaN}}",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		struct appl_err err = {0};
		assert_null(parse_str(docs[i], BASEDIR, &err));
		assert_int_equal(err.code, -EINVAL);
		if (strncmp(err.msg, "policy: invalid JSON", 20) != 0)
			fail_msg("doc %zu: %s", i, err.msg);
	}
}

/* Bytes past len are never read: a policy cut short is refused even when
 * the buffer goes on, and no NUL is needed. */
static void test_not_nul_terminated(void **state)
{
	struct appl_err err = {0};
	struct policy *p = NULL;
	const char *doc = HEAD "}";
	size_t len = strlen(doc);
	char *buf = malloc(len);

	(void)state;
	assert_non_null(buf);
	memcpy(buf, doc, len);
	assert_int_equal(policy_parse(buf, len, BASEDIR, &p, &err), 0);
	policy_free(p);
	assert_int_equal(policy_parse(buf, len - 1, BASEDIR, &p, &err), -EINVAL);
	free(buf);
}

static void test_duplicate_paths(void **state)
{
	static const struct {
		const char *extra, *want;
	} cases[] = {
		{", \"serial\": 6", "serial: duplicate key"},
		{", \"limits\": {\"pool\": 1, \"pids\": 2, \"pool\": 3}",
		 "limits.pool: duplicate key"},
		{", \"servers\": {\"a\": {\"command\": [\"/a\"], \"env\": [\"X\"], \"env\": []}}",
		 "servers.a.env: duplicate key"},
		{", \"clients\": {\"tokens\": [{}, {\"name\": \"x\"}, {\"role\": \"r\", "
		 "\"s\": \"{\\\"role\\\": 1, [\", \"role\": \"q\"}]}",
		 "clients.tokens[2].role: duplicate key"},
		{", \"roles\": {\"r\": {\"tools\": [\"a,b\", \"}\"], \"write\": true, \"write\": "
		 "false}}",
		 "roles.r.write: duplicate key"},
		{", \"tools\": {\"a.\\u0062\": {}, \"a.b\": {}}", "tools.a.b: duplicate key"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct appl_err err = {0};
		assert_null(parse_with(cases[i].extra, &err));
		assert_int_equal(err.code, -EINVAL);
		assert_string_equal(err.msg, cases[i].want);
	}
}

static void test_api_misuse(void **state)
{
	struct appl_err err = {0};
	struct policy *p = (struct policy *)&err;

	(void)state;
	assert_int_equal(policy_parse(HEAD "}", strlen(HEAD "}"), BASEDIR, NULL, &err), -EINVAL);
	assert_int_equal(policy_parse(NULL, 5, BASEDIR, &p, &err), -EINVAL);
	assert_null(p);
	assert_int_equal(policy_parse(NULL, 0, BASEDIR, &p, &err), -EINVAL);
	assert_null(p);
	/* a NULL err is allowed */
	assert_int_equal(policy_parse("[]", 2, BASEDIR, &p, NULL), -EINVAL);
	assert_int_equal(policy_parse("{\"a\":1,\"a\":2}", 13, BASEDIR, &p, NULL), -EINVAL);
	policy_free(NULL);
}

/* ---- tool access -------------------------------------------------------------- */

#define ACCESS_POLICY                                                                              \
	", \"servers\": {\"a\": {\"command\": [\"/bin/a\"]}, \"ab\": {\"command\": "               \
	"[\"/bin/ab\"]}, "                                                                         \
	"\"b\": {\"command\": [\"/bin/b\"]}, \"c\": {\"command\": [\"/bin/c\"]}}, "                \
	"\"tools\": {\"a.*\": {\"access\": \"read\"}, \"a.put\": {\"access\": \"write\"}, "        \
	"\"a.peek\": {\"access\": \"read\"}, \"ab.*\": {\"access\": \"write\"}, "                  \
	"\"b.*\": {\"access\": \"write\"}, \"b.get\": {\"access\": \"read\"}, "                    \
	"\"c.only\": {\"access\": \"write\"}}, "                                                   \
	"\"roles\": {\"reader\": {\"tools\": [\"a.*\", \"b.*\", \"c.*\"]}, "                       \
	"\"writer\": {\"tools\": [\"a.*\", \"b.*\", \"c.*\"], \"write\": true}, "                  \
	"\"narrow\": {\"tools\": [\"a.peek\", \"b.get\"], \"write\": true}, "                      \
	"\"none\": {\"tools\": []}}, \"clients\": {\"default_role\": \"reader\"}"

static void test_tool_access(void **state)
{
	enum { R = POLICY_ACCESS_READ, W = POLICY_ACCESS_WRITE, NA = -1 };
	static const struct {
		const char *server, *tool;
		bool hint;
		const char *role;
		enum policy_verdict want;
		int access;
	} cases[] = {
		/* "a.*": read admits only hinted tools, as reads */
		{"a", "list", true, "reader", POLICY_OK, R},
		{"a", "list", false, "reader", POLICY_DENY_UNLISTED, NA},
		{"a", "list", false, "writer", POLICY_DENY_UNLISTED, NA},
		/* an exact entry wins over the hint, both ways */
		{"a", "put", false, "writer", POLICY_OK, W},
		{"a", "put", true, "writer", POLICY_OK, W},
		{"a", "put", true, "reader", POLICY_DENY_WRITE, NA},
		{"a", "peek", false, "reader", POLICY_OK, R},
		/* "b.*": write admits everything; hinted tools stay reads */
		{"b", "anything", false, "reader", POLICY_DENY_WRITE, NA},
		{"b", "anything", true, "reader", POLICY_OK, R},
		{"b", "anything", false, "writer", POLICY_OK, W},
		{"b", "get", false, "reader", POLICY_OK, R},
		/* c has one exact entry and no wildcard */
		{"c", "only", false, "writer", POLICY_OK, W},
		{"c", "other", true, "writer", POLICY_DENY_UNLISTED, NA},
		/* the role's patterns */
		{"a", "peek", false, "narrow", POLICY_OK, R},
		{"b", "get", true, "narrow", POLICY_OK, R},
		{"a", "list", true, "narrow", POLICY_DENY_ROLE, NA},
		{"ab", "x", false, "writer", POLICY_DENY_ROLE, NA},
		{"a", "list", true, "none", POLICY_DENY_ROLE, NA},
		{"a", "list", true, "ghost", POLICY_DENY_NO_ROLE, NA},
		{"a", "list", true, NULL, POLICY_DENY_NO_ROLE, NA},
		/* names that look like patterns or prefixes */
		{"zz", "x", true, "writer", POLICY_DENY_UNLISTED, NA},
		{"a", "*", false, "writer", POLICY_DENY_UNLISTED, NA},
		{"b", "*", false, "reader", POLICY_DENY_WRITE, NA},
		{"a", "peek.x", false, "writer", POLICY_DENY_UNLISTED, NA},
		{"a", "pee", false, "writer", POLICY_DENY_UNLISTED, NA},
		{"", "a.peek", false, "writer", POLICY_DENY_UNLISTED, NA},
		{"a", "", true, "writer", POLICY_OK, R},
		{NULL, "peek", false, "writer", POLICY_DENY_UNLISTED, NA},
		{"a", NULL, false, "writer", POLICY_DENY_UNLISTED, NA},
	};
	struct appl_err err = {0};
	struct policy *p = parse_with(ACCESS_POLICY, &err);

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum policy_access acc = (enum policy_access)99;
		enum policy_verdict v = policy_tool_check(p, cases[i].server, cases[i].tool,
							  cases[i].hint, cases[i].role, &acc);
		if (v != cases[i].want)
			fail_msg("case %zu (%s.%s, %s): verdict %d, want %d", i, cases[i].server,
				 cases[i].tool, cases[i].role, v, cases[i].want);
		assert_int_equal(policy_tool_access(p, cases[i].server, cases[i].tool,
						    cases[i].hint, cases[i].role, NULL),
				 v == POLICY_OK);
		if (v == POLICY_OK)
			assert_int_equal(acc, cases[i].access);
		else
			assert_int_equal(acc, 99);
	}
	assert_int_equal(policy_tool_check(NULL, "a", "peek", false, "reader", NULL),
			 POLICY_DENY_UNLISTED);
	policy_free(p);
}

static void test_examples_access(void **state)
{
	struct appl_err err = {0};
	struct policy *p = parse_file("policy/filesystem-readonly.json", "/p", &err);
	enum policy_access acc;

	(void)state;
	assert_non_null(p);
	const char *role = policy_client_default_role(p);
	assert_string_equal(role, "reader");
	assert_true(policy_tool_access(p, "files", "read_text_file", false, role, &acc));
	assert_int_equal(acc, POLICY_ACCESS_READ);
	/* a server that calls write_file read-only still does not get it */
	assert_false(policy_tool_access(p, "files", "write_file", true, role, &acc));
	assert_false(policy_tool_access(p, "files", "edit_file", false, role, &acc));
	policy_free(p);
}

/* The complete example of policy/README.md parses and decides as its table
 * says, so the reference cannot drift from the parser. */
static void test_readme_example(void **state)
{
	static const struct {
		const char *server, *tool;
		bool hint;
		enum policy_verdict analyst, operator;
	} rows[] = {
		{"files", "read_text_file", true, POLICY_OK, POLICY_OK},
		{"files", "edit_file", false, POLICY_DENY_UNLISTED, POLICY_DENY_UNLISTED},
		{"files", "write_file", false, POLICY_DENY_WRITE, POLICY_OK},
		{"files", "write_file", true, POLICY_DENY_WRITE, POLICY_OK},
		{"tickets", "search", false, POLICY_OK, POLICY_OK},
		{"tickets", "create", false, POLICY_DENY_ROLE, POLICY_OK},
		{"tickets", "list", true, POLICY_DENY_ROLE, POLICY_OK},
	};
	struct appl_err err = {0};
	struct policy *p = NULL;
	char *md, *start, *end;
	size_t len;

	(void)state;
	assert_int_equal(appl_file_read("policy/README.md", 1u << 20, &md, &len, &err), 0);
	start = strstr(md, "```json\n");
	assert_non_null(start);
	start += 8;
	end = strstr(start, "```");
	assert_non_null(end);
	if (policy_parse(start, (size_t)(end - start), "/etc/appliance", &p, &err) < 0)
		fail_msg("README example: %s", err.msg);
	assert_true(policy_http_used(p));
	assert_non_null(policy_http(p));
	assert_string_equal(policy_http(p)->listen[0].text, "127.0.0.1:8080");
	assert_string_equal(policy_client_default_role(p), "analyst");
	assert_string_equal(policy_token_get(p, 0)->role, "operator");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(policy_tool_check(p, rows[i].server, rows[i].tool, rows[i].hint,
						   "analyst", NULL),
				 rows[i].analyst);
		assert_int_equal(policy_tool_check(p, rows[i].server, rows[i].tool, rows[i].hint,
						   "operator", NULL),
				 rows[i].operator);
	}
	/* Resources: the whole of files for both roles, nothing of tickets. */
	assert_true(policy_resources_allowed(p, "files", "analyst"));
	assert_true(policy_resources_allowed(p, "files", "operator"));
	assert_false(policy_resources_allowed(p, "tickets", "operator"));
	assert_false(policy_resources_allowed(p, "tickets", "analyst"));
	assert_int_equal(policy_server_find(p, "tickets")->concurrency, 4);
	assert_int_equal(policy_server_find(p, "files")->concurrency, APPL_SERVER_CONCURRENCY_DEF);
	policy_free(p);
	free(md);
}

static void test_verdict_text(void **state)
{
	(void)state;
	assert_string_equal(policy_verdict_text(POLICY_OK), "allowed");
	assert_string_equal(policy_verdict_text(POLICY_DENY_UNLISTED), "not allowed by the policy");
	assert_non_null(policy_verdict_text(POLICY_DENY_ROLE));
	assert_non_null(policy_verdict_text(POLICY_DENY_WRITE));
	assert_non_null(policy_verdict_text(POLICY_DENY_NO_ROLE));
	assert_string_equal(policy_verdict_text((enum policy_verdict)77), "not allowed");
}

/* ---- http: serving MCP over HTTP -------------------------------------------- */

/* ", \"http\": {" body "}" parsed; refused (NULL, err filled) or not. */
static struct policy *parse_http(const char *body, struct appl_err *err)
{
	char extra[6144];

	assert_true((size_t)snprintf(extra, sizeof(extra), ", \"http\": {%s}", body) <
		    sizeof(extra));
	return parse_with(extra, err);
}

static void http_refused(const char *body, const char *want)
{
	struct appl_err err = {0};
	struct policy *p = parse_http(body, &err);

	if (p)
		fail_msg("accepted: %s", body);
	if (strcmp(err.msg, want) != 0)
		fail_msg("%s:\n  got  %s\n  want %s", body, err.msg, want);
	assert_int_equal(err.code, -EINVAL);
}

#define TLS                                                                                        \
	"\"tls\": {\"cert\": \"/etc/appliance/tls/cert.pem\", \"key\": "                           \
	"\"/etc/appliance/tls/key.pem\"}"

static void test_http_read(void **state)
{
	struct appl_err err = {0};
	struct policy *p =
		parse_http("\"listen\": [\"127.0.0.1:8080\", \"[::1]:8080\", \"0.0.0.0:8443\", "
			   "\"unix:/run/appliance/mcp.sock\"], \"path\": \"/v1/mcp\", "
			   "\"allowed_origins\": [\"https://app.example\", \"http://[::1]:8080\"], "
			   "\"allowed_hosts\": [\"localhost:8080\", \"mcp.example\"], " TLS,
			   &err);
	const struct policy_http *h;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	h = policy_http(p);
	assert_non_null(h);
	assert_false(policy_http_used(p)); /* that one is about upstreams */
	assert_int_equal(h->nlisten, 4);
	assert_int_equal(h->listen[0].kind, POLICY_LISTEN_INET4);
	assert_string_equal(h->listen[0].text, "127.0.0.1:8080");
	assert_string_equal(h->listen[0].address, "127.0.0.1");
	assert_memory_equal(h->listen[0].addr, "\x7f\0\0\x01", 4);
	assert_int_equal(h->listen[0].port, 8080);
	assert_null(h->listen[0].path);
	assert_true(h->listen[0].local);
	assert_int_equal(h->listen[1].kind, POLICY_LISTEN_INET6);
	assert_string_equal(h->listen[1].address, "::1");
	assert_int_equal(h->listen[1].addr[15], 1);
	assert_int_equal(h->listen[1].port, 8080);
	assert_true(h->listen[1].local);
	assert_int_equal(h->listen[2].kind, POLICY_LISTEN_INET4);
	assert_int_equal(h->listen[2].port, 8443);
	assert_false(h->listen[2].local);
	assert_int_equal(h->listen[3].kind, POLICY_LISTEN_UNIX);
	assert_string_equal(h->listen[3].path, "/run/appliance/mcp.sock");
	assert_string_equal(h->listen[3].address, "");
	assert_int_equal(h->listen[3].port, 0);
	assert_true(h->listen[3].local);
	assert_string_equal(h->path, "/v1/mcp");
	assert_int_equal(h->norigins, 2);
	assert_string_equal(h->origins[0], "https://app.example");
	assert_string_equal(h->origins[1], "http://[::1]:8080");
	assert_null(h->origins[2]);
	assert_int_equal(h->nhosts, 2);
	assert_false(h->hosts_default);
	assert_string_equal(h->hosts[0], "localhost:8080");
	assert_string_equal(h->hosts[1], "mcp.example");
	assert_null(h->hosts[2]);
	assert_string_equal(h->tls_cert, "/etc/appliance/tls/cert.pem");
	assert_string_equal(h->tls_key, "/etc/appliance/tls/key.pem");
	policy_free(p);
}

/* Left out: path /mcp, no origins, the loopback hosts, no TLS. */
static void test_http_defaults(void **state)
{
	static const char *const want[] = {
		"localhost",
		"127.0.0.1",
		"[::1]",
		"localhost:8080",
		"127.0.0.1:8080",
		"[::1]:8080",
		"localhost:9000",
		"127.0.0.1:9000",
		"[::1]:9000",
		"127.0.0.2:9000",
		"[::1]:9000" /* given once */,
	};
	struct appl_err err = {0};
	struct policy *p = parse_http("\"listen\": [\"127.0.0.1:8080\", \"[::1]:8080\", "
				      "\"unix:/run/a.sock\", \"127.0.0.2:9000\", \"[::1]:9000\"]",
				      &err);
	const struct policy_http *h;

	(void)state;
	if (!p)
		fail_msg("%s", err.msg);
	h = policy_http(p);
	assert_string_equal(h->path, "/mcp");
	assert_int_equal(h->norigins, 0);
	assert_null(h->origins[0]);
	assert_null(h->tls_cert);
	assert_null(h->tls_key);
	assert_true(h->hosts_default);
	assert_int_equal(h->nhosts, 10);
	for (size_t i = 0; i < h->nhosts; i++)
		assert_string_equal(h->hosts[i], want[i]);
	assert_null(h->hosts[h->nhosts]);
	assert_int_equal(policy_http_tls_check(p, &err), 0);
	policy_free(p);
	/* a unix socket alone: the bare loopback names */
	p = parse_http("\"listen\": [\"unix:/run/a.sock\"]", &err);
	assert_non_null(p);
	assert_int_equal(policy_http(p)->nhosts, 3);
	policy_free(p);
	/* the most listeners, each on a port of its own: the defaults fit */
	p = parse_http("\"listen\": [\"127.0.0.1:1\", \"127.0.0.2:2\", \"127.0.0.3:3\", "
		       "\"127.0.0.4:4\", \"[::1]:5\", \"127.0.0.6:6\", \"127.0.0.7:7\", "
		       "\"127.0.0.8:65535\"]",
		       &err);
	assert_non_null(p);
	/* 127.0.0.1:1 and [::1]:5 as written are loopback names with a port */
	assert_int_equal(policy_http(p)->nhosts, 3 + 3 * 8 + 6);
	assert_string_equal(policy_http(p)->hosts[3 + 3 * 8 - 1], "[::1]:65535");
	policy_free(p);
}

static void test_http_listen_refused(void **state)
{
	static const char form[] =
		"must be IPV4:PORT, [IPV6]:PORT or unix:/PATH (addresses, not host names)";
	static const char port[] =
		"the port must be 1 to 65535 in decimal, without a sign or leading zeros";
	static const struct {
		const char *addr, *want;
	} cases[] = {
		{"localhost:8080", form},
		{"example.com:443", form},
		{"127.0.0.1", form},
		{"127.1:80", form},
		{"127.0.0.01:80", form},
		{"0x7f.0.0.1:80", form},
		{"256.0.0.1:80", form},
		{"1.2.3.4.5:80", form},
		{" 127.0.0.1:80", form},
		{"::1:8080", form},
		{"[::1]", form},
		{"[::1]8080:", form},
		{"[]:80", form},
		{"[fe80::1%eth0]:80", form},
		{"[::g]:80", form},
		{"", form},
		{"127.0.0.1:0", port},
		{"127.0.0.1:65536", port},
		{"127.0.0.1:08080", port},
		{"127.0.0.1:+80", port},
		{"127.0.0.1:-1", port},
		{"127.0.0.1:", port},
		{"127.0.0.1:80 ", port},
		{"[::1]:99999", port},
		{"[::ffff:127.0.0.1]:80", "write an IPv4 address as IPV4:PORT"},
		{"unix:", "must be an absolute path"},
		{"unix:run/a.sock", "must be an absolute path"},
		{"unix:/run/../a.sock", "must not hold . or .. components"},
		{"unix:/run/a\\tb", "must not hold control characters"},
		{"unix:/123456789012345678901234567890123456789012345678901234567890123456789012"
		 "34567890123456789012345678901234567",
		 "a socket path is at most 107 bytes"},
	};
	char body[512], want[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(body, sizeof(body), "\"listen\": [\"unix:/run/ok\", \"%s\"]",
			 cases[i].addr);
		snprintf(want, sizeof(want), "http.listen[1]: %s", cases[i].want);
		http_refused(body, want);
	}
	/* 107 bytes is a path sun_path holds */
	struct appl_err err = {0};
	struct policy *p = parse_http(
		"\"listen\": [\"unix:/12345678901234567890123456789012345678901234567890123456789"
		"01234567890123456789012345678901234567890123456\"]",
		&err);
	if (!p)
		fail_msg("%s", err.msg);
	assert_int_equal(strlen(policy_http(p)->listen[0].path), 107);
	policy_free(p);
	http_refused("", "http.listen: missing");
	http_refused("\"listen\": []", "http.listen: must be an array of 1 to 8 addresses");
	http_refused("\"listen\": \"127.0.0.1:80\"",
		     "http.listen: must be an array of 1 to 8 addresses");
	http_refused("\"listen\": [\"unix:/1\", \"unix:/2\", \"unix:/3\", \"unix:/4\", "
		     "\"unix:/5\", \"unix:/6\", \"unix:/7\", \"unix:/8\", \"unix:/9\"]",
		     "http.listen: must be an array of 1 to 8 addresses");
	http_refused("\"listen\": [8080]", "http.listen[0]: must be a string");
	http_refused("\"listen\": [\"127.0.0.1:80\", \"127.0.0.1:80\"]",
		     "http.listen[1]: the same address as http.listen[0]");
	http_refused("\"listen\": [\"[::1]:80\", \"[0:0:0:0:0:0:0:1]:80\"]",
		     "http.listen[1]: the same address as http.listen[0]");
	http_refused("\"listen\": [\"unix:/a\", \"127.0.0.1:80\", \"unix:/a\"]",
		     "http.listen[2]: the same address as http.listen[0]");
	http_refused("\"listen\": [\"unix:/a\"], \"port\": 80", "http.port: unknown key");
	assert_null(parse_with(", \"http\": []", &err));
	assert_string_equal(err.msg, "http: must be an object");
	/* the same address on two ports, and two addresses on one, are two */
	p = parse_http("\"listen\": [\"127.0.0.1:80\", \"127.0.0.1:81\", \"127.0.0.2:80\"]", &err);
	assert_non_null(p);
	policy_free(p);
}

/* http.metrics_listen: one address, loopback or a unix socket, none of
 * `listen`; read as `listen` reads its addresses. */
static void test_http_metrics_listen(void **state)
{
	static const char *const ok[] = {"127.0.0.1:9464", "127.9.8.7:1", "[::1]:9464",
					 "unix:/run/appliance/metrics.sock"};
	static const char *const remote[] = {"0.0.0.0:9464", "10.1.2.3:9464", "[::]:9464",
					     "[2001:db8::1]:9464", "128.0.0.1:9464"};
	struct appl_err err = {0};
	char body[512], want[512];
	struct policy *p;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(body, sizeof(body),
			 "\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"%s\"", ok[i]);
		if (!(p = parse_http(body, &err)))
			fail_msg("%s: %s", ok[i], err.msg);
		assert_string_equal(policy_http_metrics_listen(p), ok[i]);
		assert_true(policy_http(p)->metrics->local);
		assert_int_equal(policy_http(p)->nlisten, 1);
		policy_free(p);
	}
	/* not loopback: refused, TLS or not (the listener asks for no token) */
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
		snprintf(body, sizeof(body),
			 "\"listen\": [\"127.0.0.1:8080\"], " TLS ", \"metrics_listen\": \"%s\"",
			 remote[i]);
		snprintf(want, sizeof(want),
			 "http.metrics_listen: %s is not loopback: metrics are served on "
			 "127.0.0.0/8, [::1] or unix:/PATH only (they ask for no token)",
			 remote[i]);
		http_refused(body, want);
	}
	http_refused("\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": [\"127.0.0.1:9464\"]",
		     "http.metrics_listen: must be a string");
	http_refused("\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"localhost:9464\"",
		     "http.metrics_listen: must be IPV4:PORT, [IPV6]:PORT or unix:/PATH "
		     "(addresses, not host names)");
	http_refused("\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"unix:run/m\"",
		     "http.metrics_listen: must be an absolute path");
	http_refused("\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"127.0.0.1:0\"",
		     "http.metrics_listen: the port must be 1 to 65535 in decimal, without a "
		     "sign or leading zeros");
	/* one socket cannot serve both */
	http_refused("\"metrics_listen\": \"[0:0:0:0:0:0:0:1]:80\", \"listen\": [\"unix:/a\", "
		     "\"[::1]:80\"]",
		     "http.metrics_listen: the same address as http.listen[1]");
	http_refused("\"listen\": [\"unix:/run/a\"], \"metrics_listen\": \"unix:/run/a\"",
		     "http.metrics_listen: the same address as http.listen[0]");
	/* none: NULL */
	p = parse_http("\"listen\": [\"127.0.0.1:8080\"]", &err);
	assert_non_null(p);
	assert_null(policy_http_metrics_listen(p));
	assert_null(policy_http(p)->metrics);
	policy_free(p);
	assert_null(policy_http_metrics_listen(NULL));
}

/* What a reload compares: the metrics listener, as an address. */
static void test_http_metrics_same(void **state)
{
	static const char *const bodies[] = {
		"\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"[::1]:9464\"",
		"\"listen\": [\"127.0.0.1:8081\"], \"metrics_listen\": \"[0::1]:9464\"",
		"\"listen\": [\"127.0.0.1:8080\"], \"metrics_listen\": \"[::1]:9465\"",
		"\"listen\": [\"127.0.0.1:8080\"]",
	};
	struct appl_err err = {0};
	struct policy *p[4], *none;

	(void)state;
	for (size_t i = 0; i < 4; i++)
		assert_non_null(p[i] = parse_http(bodies[i], &err));
	assert_non_null(none = parse_with("", &err));
	assert_true(policy_http_metrics_same(p[0], p[1]));
	assert_true(policy_http_metrics_same(p[1], p[0]));
	assert_false(policy_http_metrics_same(p[0], p[2]));
	assert_false(policy_http_metrics_same(p[0], p[3]));
	assert_false(policy_http_metrics_same(none, p[2]));
	assert_true(policy_http_metrics_same(p[3], none));
	assert_true(policy_http_metrics_same(none, none));
	for (size_t i = 0; i < 4; i++)
		policy_free(p[i]);
	policy_free(none);
}

/* Tokens cross a network only inside TLS: a listener other hosts can
 * reach is refused without it. */
static void test_http_needs_tls_off_loopback(void **state)
{
	static const char *const remote[] = {"0.0.0.0:8443", "10.1.2.3:80", "[::]:80",
					     "[2001:db8::1]:443", "128.0.0.1:80"};
	struct appl_err err = {0};
	char body[512], want[512];
	struct policy *p;

	(void)state;
	http_refused("\"listen\": [\"127.0.0.1:8080\", \"[::1]:8080\", \"0.0.0.0:8443\", "
		     "\"unix:/run/appliance/mcp.sock\"]",
		     "http.listen[2]: 0.0.0.0:8443 is not loopback: it needs http.tls");
	for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
		snprintf(body, sizeof(body), "\"listen\": [\"%s\"]", remote[i]);
		snprintf(want, sizeof(want),
			 "http.listen[0]: %s is not loopback: it needs http.tls", remote[i]);
		http_refused(body, want);
		snprintf(body, sizeof(body), "\"listen\": [\"%s\"], " TLS, remote[i]);
		p = parse_http(body, &err);
		if (!p)
			fail_msg("%s: %s", remote[i], err.msg);
		policy_free(p);
	}
	/* all of 127.0.0.0/8 is loopback */
	p = parse_http("\"listen\": [\"127.255.255.254:80\"]", &err);
	assert_non_null(p);
	policy_free(p);
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": {\"cert\": \"/a.pem\"}",
		     "http.tls.key: missing");
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": {\"key\": \"/a.pem\"}",
		     "http.tls.cert: missing");
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": {\"cert\": \"a.pem\", \"key\": \"/k\"}",
		     "http.tls.cert: must be an absolute path");
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": {\"cert\": \"/c\", \"key\": \"/a/./k\"}",
		     "http.tls.key: must not hold . or .. components");
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": {\"cert\": \"/c\", \"key\": \"/k\", "
		     "\"ca\": \"/ca\"}",
		     "http.tls.ca: unknown key");
	http_refused("\"listen\": [\"unix:/a\"], \"tls\": true", "http.tls: must be an object");
}

static void test_http_path(void **state)
{
	static const char *const good[] = {"/", "/mcp", "/a/b-c_d.e~f", "/a.b/c"};
	static const struct {
		const char *path, *want;
	} bad[] = {
		{"", "must start with /"},
		{"mcp", "must start with /"},
		{"/a b", "must be printable ASCII without spaces"},
		{"/a\\tb", "must be printable ASCII without spaces"},
		{"/caf\\u00e9", "must be printable ASCII without spaces"},
		{"/a?x=1", "must not hold ? or #"},
		{"/a#top", "must not hold ? or #"},
		{"/%2e%2e/a", "must not hold % escapes"},
		{"/a/../b", "must not hold .."},
		{"/..", "must not hold .."},
	};
	struct appl_err err = {0};
	char body[512], want[512], longp[300];
	struct policy *p;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"path\": \"%s\"",
			 good[i]);
		p = parse_http(body, &err);
		if (!p)
			fail_msg("%s: %s", good[i], err.msg);
		assert_string_equal(policy_http(p)->path, good[i]);
		policy_free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"path\": \"%s\"",
			 bad[i].path);
		snprintf(want, sizeof(want), "http.path: %s", bad[i].want);
		http_refused(body, want);
	}
	longp[0] = '/';
	memset(longp + 1, 'a', 256);
	longp[257] = '\0';
	snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"path\": \"%s\"", longp);
	http_refused(body, "http.path: longer than 256 bytes");
	longp[256] = '\0';
	snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"path\": \"%s\"", longp);
	p = parse_http(body, &err);
	assert_non_null(p);
	policy_free(p);
	http_refused("\"listen\": [\"unix:/a\"], \"path\": 5", "http.path: must be a string");
}

static void test_http_origins(void **state)
{
	static const char *const good[] = {"https://app.example",      "http://localhost:8080",
					   "https://[::1]:8443",       "http://127.0.0.1",
					   "https://a-b.c9.example:1", "http://x:65535"};
	static const char form[] = "must be an origin: http:// or https://, a lower-case host "
				   "and perhaps :PORT, nothing after";
	static const struct {
		const char *origin, *want;
	} bad[] = {
		{"HTTPS://app.example", form},
		{"https://App.example", form},
		{"https://app.example/", form},
		{"https://app.example/x", form},
		{"https://app.example?x", form},
		{"ftp://app.example", form},
		{"https://", form},
		{"app.example", form},
		{"null", form},
		{"*", form},
		{"https://user@app.example", form},
		{"https://app.example:", form},
		{"https://app.example:0", form},
		{"https://app.example:080", form},
		{"https://app.example:70000", form},
		{"https://[::1", form},
		{"https://[::G]", form},
		{"https://[::A]", form},
		{"https://a b", form},
		{"https://app.example:443",
		 "browsers never send the default port 443: leave it out"},
		{"http://app.example:80", "browsers never send the default port 80: leave it out"},
	};
	struct appl_err err = {0};
	char body[6144], want[512];
	struct policy *p;
	size_t o;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(body, sizeof(body),
			 "\"listen\": [\"unix:/a\"], \"allowed_origins\": [\"%s\"]", good[i]);
		p = parse_http(body, &err);
		if (!p)
			fail_msg("%s: %s", good[i], err.msg);
		assert_string_equal(policy_http(p)->origins[0], good[i]);
		policy_free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body),
			 "\"listen\": [\"unix:/a\"], \"allowed_origins\": [\"https://ok\", \"%s\"]",
			 bad[i].origin);
		snprintf(want, sizeof(want), "http.allowed_origins[1]: %s", bad[i].want);
		http_refused(body, want);
	}
	http_refused("\"listen\": [\"unix:/a\"], \"allowed_origins\": [\"https://a\", "
		     "\"https://a\"]",
		     "http.allowed_origins[1]: also http.allowed_origins[0]");
	http_refused("\"listen\": [\"unix:/a\"], \"allowed_origins\": \"https://a\"",
		     "http.allowed_origins: must be an array of 0 to 32 origins");
	/* 32 is the cap */
	for (size_t n = 32; n <= 33; n++) {
		o = (size_t)snprintf(body, sizeof(body),
				     "\"listen\": [\"unix:/a\"], \"allowed_origins\": [");
		for (size_t i = 0; i < n; i++)
			o += (size_t)snprintf(body + o, sizeof(body) - o, "%s\"https://h%zu\"",
					      i ? ", " : "", i);
		snprintf(body + o, sizeof(body) - o, "]");
		p = parse_http(body, &err);
		if (n == 32) {
			assert_non_null(p);
			assert_int_equal(policy_http(p)->norigins, 32);
			policy_free(p);
		} else {
			assert_null(p);
			assert_string_equal(
				err.msg,
				"http.allowed_origins: must be an array of 0 to 32 origins");
		}
	}
}

static void test_http_hosts(void **state)
{
	static const char form[] =
		"must be a Host value, host or host:port (printable, no / ? # @ , or \\)";
	static const char *const bad[] = {"a b", "a/b",	   "a?b",	 "a#b",	 "u@a",
					  "a,b", "a\\\\b", "caf\\u00e9", "a\\tb"};
	struct appl_err err = {0};
	char body[20000], want[512], longh[300];
	struct policy *p;
	size_t o;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body),
			 "\"listen\": [\"unix:/a\"], \"allowed_hosts\": [\"%s\"]", bad[i]);
		snprintf(want, sizeof(want), "http.allowed_hosts[0]: %s", form);
		http_refused(body, want);
	}
	http_refused("\"listen\": [\"unix:/a\"], \"allowed_hosts\": [\"\"]",
		     "http.allowed_hosts[0]: must not be empty");
	http_refused("\"listen\": [\"unix:/a\"], \"allowed_hosts\": []",
		     "http.allowed_hosts: must be an array of 1 to 64 hosts");
	/* a host name has no case: two spellings are one host */
	http_refused("\"listen\": [\"unix:/a\"], \"allowed_hosts\": [\"MCP.example\", "
		     "\"mcp.EXAMPLE\"]",
		     "http.allowed_hosts[1]: also http.allowed_hosts[0]");
	memset(longh, 'h', 256);
	longh[256] = '\0';
	snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"allowed_hosts\": [\"%s\"]",
		 longh);
	http_refused(body, "http.allowed_hosts[0]: longer than 255 bytes");
	longh[255] = '\0';
	snprintf(body, sizeof(body), "\"listen\": [\"unix:/a\"], \"allowed_hosts\": [\"%s\"]",
		 longh);
	p = parse_http(body, &err);
	assert_non_null(p);
	assert_false(policy_http(p)->hosts_default);
	policy_free(p);
	for (size_t n = 64; n <= 65; n++) {
		o = (size_t)snprintf(body, sizeof(body),
				     "\"listen\": [\"unix:/a\"], \"allowed_hosts\": [");
		for (size_t i = 0; i < n; i++)
			o += (size_t)snprintf(body + o, sizeof(body) - o, "%s\"h%zu:80\"",
					      i ? ", " : "", i);
		snprintf(body + o, sizeof(body) - o, "]");
		p = parse_http(body, &err);
		if (n == 64) {
			assert_non_null(p);
			assert_int_equal(policy_http(p)->nhosts, 64);
			assert_null(policy_http(p)->hosts[64]);
			policy_free(p);
		} else {
			assert_null(p);
			assert_string_equal(
				err.msg, "http.allowed_hosts: must be an array of 1 to 64 hosts");
		}
	}
}

/* A file in dir with mode; returns its path in out. */
static void make_file(const char *dir, const char *name, mode_t mode, char *out, size_t len)
{
	int fd;

	snprintf(out, len, "%s/%s", dir, name);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "pem\n", 4), 4);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static int tls_check_with(const char *cert, const char *key, struct appl_err *err)
{
	char body[1024];
	struct policy *p;
	int rc;

	snprintf(body, sizeof(body),
		 "\"listen\": [\"0.0.0.0:8443\"], \"tls\": {\"cert\": \"%s\", \"key\": \"%s\"}",
		 cert, key);
	p = parse_http(body, err);
	assert_non_null(p);
	memset(err, 0, sizeof(*err));
	rc = policy_http_tls_check(p, err);
	policy_free(p);
	return rc;
}

/* The key must be ours alone: each way it is not is refused and said. */
static void test_http_tls_check(void **state)
{
	static const mode_t open_modes[] = {0640, 0604, 0620, 0602, 0610, 0601, 0644, 0660};
	char dir[] = "/tmp/test_policy_tls.XXXXXX", cert[128], key[128], want[256], missing[160];
	struct appl_err err = {0};

	(void)state;
	assert_non_null(mkdtemp(dir));
	make_file(dir, "cert.pem", 0644, cert, sizeof(cert));
	make_file(dir, "key.pem", 0600, key, sizeof(key));
	assert_int_equal(tls_check_with(cert, key, &err), 0);
	make_file(dir, "key.pem", 0400, key, sizeof(key));
	assert_int_equal(tls_check_with(cert, key, &err), 0);
	for (size_t i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
		assert_int_equal(chmod(key, open_modes[i]), 0);
		assert_int_equal(tls_check_with(cert, key, &err), -EPERM);
		snprintf(want, sizeof(want),
			 "http.tls.key: %s has mode %04o: group or others may read or change it "
			 "(chmod 600)",
			 key, (unsigned)open_modes[i]);
		assert_string_equal(err.msg, want);
	}
	assert_int_equal(chmod(key, 0600), 0);
	/* owned by someone else: as root, give it away; else a file of root's */
	if (geteuid() == 0) {
		assert_int_equal(chown(key, 65534, 65534), 0);
		assert_int_equal(tls_check_with(cert, key, &err), -EPERM);
		snprintf(want, sizeof(want),
			 "http.tls.key: %s belongs to uid 65534, not to the appliance's uid 0",
			 key);
		assert_string_equal(err.msg, want);
		assert_int_equal(chown(key, 0, 0), 0);
	} else {
		assert_int_equal(tls_check_with(cert, "/etc/passwd", &err), -EPERM);
		assert_non_null(strstr(err.msg, "belongs to uid 0"));
	}
	snprintf(missing, sizeof(missing), "%s/none.pem", dir);
	assert_int_equal(tls_check_with(cert, missing, &err), -ENOENT);
	snprintf(want, sizeof(want), "http.tls.key: %s: %s", missing, strerror(ENOENT));
	assert_string_equal(err.msg, want);
	assert_int_equal(tls_check_with(missing, key, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "http.tls.cert: "));
	assert_int_equal(tls_check_with(cert, dir, &err), -EINVAL);
	snprintf(want, sizeof(want), "http.tls.key: %s is not a regular file", dir);
	assert_string_equal(err.msg, want);
	assert_int_equal(tls_check_with(dir, key, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "http.tls.cert: "));
	assert_int_equal(unlink(cert), 0);
	assert_int_equal(unlink(key), 0);
	assert_int_equal(rmdir(dir), 0);
}

/* The names `appliance token` takes are the names the policy takes. */
static void test_label_valid(void **state)
{
	static const char *const good[] = {"a", "ci-bot", "dash-board_2",
					   "x2345678901234567890123456789012"};
	static const char *const bad[] = {"",	 "Ci",	 "1a",
					  "-a",	 "_a",	 "a b",
					  "a.b", "a\"b", "x23456789012345678901234567890123"};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(policy_label_valid(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(policy_label_valid(bad[i], strlen(bad[i])));
	assert_false(policy_label_valid("ab", 3)); /* a NUL is not a name character */
	assert_false(policy_label_valid(NULL, 0));
}

/* An entry as `appliance token` prints it admits the token: the hash of
 * the text a client sends is what policy_token_match finds. */
static void test_token_entry_matches(void **state)
{
	static const char token[] = "appliance_Zm9vYmFyYmF6cXV4cXV1eGZvb2JhcmJhenF1eHF1dXg";
	unsigned char h[crypto_hash_sha256_BYTES];
	char hex[2 * sizeof(h) + 1], extra[1024];
	struct appl_err err = {0};
	struct policy *p;

	(void)state;
	assert_true(sodium_init() >= 0);
	crypto_hash_sha256(h, (const unsigned char *)token, strlen(token));
	sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
	snprintf(extra, sizeof(extra),
		 ", \"roles\": {\"ops\": {\"tools\": []}}, \"clients\": {\"tokens\": "
		 "[{\"name\": \"ci-bot\", \"sha256\": \"%s\", \"role\": \"ops\"}]}",
		 hex);
	p = parse_with(extra, &err);
	if (!p)
		fail_msg("%s", err.msg);
	assert_non_null(policy_token_match(p, h));
	assert_string_equal(policy_token_match(p, h)->name, "ci-bot");
	h[0] ^= 0x80;
	assert_null(policy_token_match(p, h));
	policy_free(p);
}

/* http.oauth: what it holds, its defaults, and each refusal. */
static void test_http_oauth(void **state)
{
#define L  "\"listen\": [\"127.0.0.1:8080\"], "
#define IA "\"issuer\": \"https://login.example\", \"audience\": \"https://mcp.example/mcp\""
	struct appl_err err = {0};
	struct policy *p;
	const struct policy_oauth *o;

	(void)state;
	p = parse_http(L "\"oauth\": {" IA ", \"jwks_path\": \"/etc/appliance/jwks.json\"}", &err);
	if (!p)
		fail_msg("%s", err.msg);
	o = policy_http(p)->oauth;
	assert_non_null(o);
	assert_string_equal(o->issuer, "https://login.example");
	assert_string_equal(o->audience, "https://mcp.example/mcp");
	assert_string_equal(o->jwks_path, "/etc/appliance/jwks.json");
	assert_null(o->jwks_url);
	assert_string_equal(o->role_claim, "appliance_role");
	assert_int_equal(o->skew_s, 60);
	assert_int_equal(o->jwks_refresh_s, 300);
	policy_free(p);
	p = parse_http(L "\"oauth\": {" IA ", \"jwks_url\": \"http://127.0.0.1:9/jwks\", "
			 "\"role_claim\": \"https://example/role\", \"skew_s\": 0, "
			 "\"jwks_refresh_s\": 60}",
		       &err);
	if (!p)
		fail_msg("%s", err.msg);
	o = policy_http(p)->oauth;
	assert_string_equal(o->jwks_url, "http://127.0.0.1:9/jwks");
	assert_string_equal(o->role_claim, "https://example/role");
	assert_int_equal(o->skew_s, 0);
	assert_int_equal(o->jwks_refresh_s, 60);
	policy_free(p);
	p = parse_http(L "\"path\": \"/mcp\"", &err);
	assert_non_null(p);
	assert_null(policy_http(p)->oauth);
	policy_free(p);

	http_refused(L "\"oauth\": {" IA "}",
		     "http.oauth: needs exactly one of jwks_path (a JWK Set file) and jwks_url "
		     "(the authorization server's jwks_uri)");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"/j\", \"jwks_url\": "
		       "\"https://login.example/j\"}",
		     "http.oauth: needs exactly one of jwks_path (a JWK Set file) and jwks_url "
		     "(the authorization server's jwks_uri)");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"/j\", \"jwks_refresh_s\": 600}",
		     "http.oauth.jwks_refresh_s: only with jwks_url (a jwks_path is read at start "
		     "and at each reload)");
	http_refused(L "\"oauth\": {\"audience\": \"https://mcp.example/mcp\", "
		       "\"jwks_path\": \"/j\"}",
		     "http.oauth.issuer: missing");
	http_refused(L "\"oauth\": {\"issuer\": \"https://login.example\", "
		       "\"audience\": \"https://mcp.example/m\\\"cp\", \"jwks_path\": \"/j\"}",
		     "http.oauth.audience: must have no quote, backslash, query or fragment");
	http_refused(L "\"oauth\": {\"issuer\": \"https://login.example\", "
		       "\"audience\": \"https://mcp.example/mcp?x=1\", \"jwks_path\": \"/j\"}",
		     "http.oauth.audience: must have no quote, backslash, query or fragment");
	http_refused(L "\"oauth\": {\"issuer\": \"http://login.example\", "
		       "\"audience\": \"https://mcp.example/mcp\", \"jwks_path\": \"/j\"}",
		     "http.oauth.issuer: http:// only to a loopback address or localhost; use "
		     "https:// for anything else");
	http_refused(L "\"oauth\": {" IA ", \"jwks_url\": \"http://login.example/j\"}",
		     "http.oauth.jwks_url: http:// only to a loopback address or localhost; use "
		     "https:// for anything else");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"j.json\"}",
		     "http.oauth.jwks_path: must be an absolute path");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"/j\", \"role_claim\": \"a b\"}",
		     "http.oauth.role_claim: must be 1 to 64 of A-Z a-z 0-9 _ - . : /");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"/j\", \"skew_s\": 301}",
		     "http.oauth.skew_s: must be an integer between 0 and 300");
	http_refused(L "\"oauth\": {" IA ", \"jwks_path\": \"/j\", \"scopes\": []}",
		     "http.oauth.scopes: unknown key");
#undef IA
#undef L
}

/* What a reload may take: a part read only at start is named, the
 * servers and limits a reload applies are not; servers compare by their
 * configuration as written. */
static void test_reload_restart(void **state)
{
	static const struct {
		const char *extra;
		const char *restart; /* NULL: a reload may take it */
	} cases[] = {
		{", \"limits\": {\"deadline_s\": 9, \"cells\": 2}", NULL},
		{", \"runtime\": {\"platform\": \"ptrace\"}", "runtime"},
		{", \"audit\": {\"path\": \"/var/log/b.jsonl\"}", "audit"},
		{", \"limits\": {\"http_body_kb\": 64}", "limits.http_body_kb"},
		{", \"limits\": {\"audit_seal_s\": 30}", "limits.audit_seal_s"},
		{", \"deployment\": \"other\"", "deployment"},
		{", \"telemetry\": {\"otlp_endpoint\": \"http://127.0.0.1:4318\"}", "telemetry"},
		{", \"http\": {\"listen\": [\"127.0.0.1:8080\"]}", "http"},
	};
	struct appl_err err = {0};
	struct policy *a = parse_with(", \"servers\": {\"s\": {\"command\": [\"/bin/s\"]}}", &err);
	struct policy *same =
		parse_with(", \"servers\": {\"s\": {\"command\": [\"/bin/s\"]}}", &err);
	struct policy *moved =
		parse_with(", \"servers\": {\"s\": {\"command\": [\"/bin/t\"]}}", &err);

	(void)state;
	assert_non_null(a);
	assert_null(policy_reload_restart(a, same));
	assert_true(policy_part_same(a, same, "servers", "s"));
	assert_false(policy_part_same(a, moved, "servers", "s"));
	assert_true(policy_part_same(a, moved, "servers", "absent"));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct policy *b = parse_with(cases[i].extra, &err);
		const char *why;

		assert_non_null(b);
		why = policy_reload_restart(a, b);
		if (cases[i].restart)
			assert_string_equal(why, cases[i].restart);
		else
			assert_null(why);
		policy_free(b);
	}
	policy_free(a);
	policy_free(same);
	policy_free(moved);
}

/* http.oauth may come, change and go at a reload; the rest of http not. */
static void test_reload_http_oauth(void **state)
{
#define H(more) ", \"http\": {\"listen\": [\"127.0.0.1:8080\"]" more "}"
#define OA(iss)                                                                                    \
	", \"oauth\": {\"issuer\": \"" iss "\", \"audience\": \"https://m.example/mcp\", "         \
	"\"jwks_path\": \"/j\"}"
	struct appl_err err = {0};
	struct policy *plain = parse_with(H(""), &err);
	struct policy *a = parse_with(H(OA("https://a.example")), &err);
	struct policy *b = parse_with(H(OA("https://b.example")), &err);
	struct policy *moved = parse_with(
		", \"http\": {\"listen\": [\"127.0.0.1:8081\"]" OA("https://a.example") "}", &err);

	(void)state;
	assert_non_null(plain && a && b && moved);
	assert_null(policy_reload_restart(plain, a));
	assert_null(policy_reload_restart(a, plain));
	assert_null(policy_reload_restart(a, b));
	assert_string_equal(policy_reload_restart(a, moved), "http");
	assert_string_equal(policy_reload_restart(moved, a), "http");
	policy_free(plain);
	policy_free(a);
	policy_free(b);
	policy_free(moved);
#undef OA
#undef H
}

/* A reload boots no sandbox before it commits, so it cannot prove a
 * preload: with one (before or after), any change of the image section
 * is read only at start; without, a new image is a reload's to take. */
static void test_reload_restart_preload(void **state)
{
#define IMG(digest, preload)                                                                       \
	HEAD_NO_IMAGE "\"image\": {\"layout\": \"img\", \"digest\": \"" digest "\"" preload "}}"
#define PRE ", \"preload\": [\"numpy\"]"
	struct appl_err err = {0};
	struct policy *plain = parse_str(IMG(DIGEST, ""), BASEDIR, &err);
	struct policy *plain2 = parse_str(IMG("sha256:" HASH1, ""), BASEDIR, &err);
	struct policy *pre = parse_str(IMG(DIGEST, PRE), BASEDIR, &err);
	struct policy *pre_same = parse_str(IMG(DIGEST, PRE), BASEDIR, &err);
	struct policy *pre2 = parse_str(IMG("sha256:" HASH1, PRE), BASEDIR, &err);
	(void)state;

	assert_non_null(plain && plain2 && pre && pre_same && pre2);
	assert_null(policy_reload_restart(plain, plain2));
	assert_null(policy_reload_restart(pre, pre_same));
	assert_string_equal(policy_reload_restart(pre, pre2), "image (with image.preload)");
	assert_string_equal(policy_reload_restart(plain, pre), "image (with image.preload)");
	assert_string_equal(policy_reload_restart(pre, plain), "image (with image.preload)");
	policy_free(plain);
	policy_free(plain2);
	policy_free(pre);
	policy_free(pre_same);
	policy_free(pre2);
#undef PRE
#undef IMG
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_files),
		cmocka_unit_test(test_invalid_files),
		cmocka_unit_test(test_deployment),
		cmocka_unit_test(test_examples),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_limits_read),
		cmocka_unit_test(test_limits_each_side),
		cmocka_unit_test(test_server_confinement),
		cmocka_unit_test(test_server_resources_concurrency),
		cmocka_unit_test(test_resources_allowed),
		cmocka_unit_test(test_audit_seal_is_a_boolean),
		cmocka_unit_test(test_tool_named),
		cmocka_unit_test(test_approvals),
		cmocka_unit_test(test_output_limits_cross_check),
		cmocka_unit_test(test_task_ttl_outlives_the_deadline),
		cmocka_unit_test(test_files_limits),
		cmocka_unit_test(test_cells_per_client_default_follows_cells),
		cmocka_unit_test(test_expires),
		cmocka_unit_test(test_layout_resolution),
		cmocka_unit_test(test_layout_relative_without_base),
		cmocka_unit_test(test_layout_too_long_resolved),
		cmocka_unit_test(test_servers_read),
		cmocka_unit_test(test_stdio_only_not_http),
		cmocka_unit_test(test_roles_and_clients_read),
		cmocka_unit_test(test_role_sessions),
		cmocka_unit_test(test_code_tools_read_back),
		cmocka_unit_test(test_code_tool_allowed),
		cmocka_unit_test(test_telemetry_read_back),
		cmocka_unit_test(test_code_tool_star_and_write),
		cmocka_unit_test(test_code_tool_calls),
		cmocka_unit_test(test_code_tool_files),
		cmocka_unit_test(test_image_preload),
		cmocka_unit_test(test_reload_restart_preload),
		cmocka_unit_test(test_runtime_read),
		cmocka_unit_test(test_serial_max),
		cmocka_unit_test(test_size_cap),
		cmocka_unit_test(test_depth_cap),
		cmocka_unit_test(test_unknown_key_names_the_closest),
		cmocka_unit_test(test_serial_found_in_the_text),
		cmocka_unit_test(test_serial_pick),
		cmocka_unit_test(test_serial_written_in_place),
		cmocka_unit_test(test_json_errors),
		cmocka_unit_test(test_not_nul_terminated),
		cmocka_unit_test(test_duplicate_paths),
		cmocka_unit_test(test_api_misuse),
		cmocka_unit_test(test_tool_access),
		cmocka_unit_test(test_examples_access),
		cmocka_unit_test(test_readme_example),
		cmocka_unit_test(test_verdict_text),
		cmocka_unit_test(test_http_read),
		cmocka_unit_test(test_http_defaults),
		cmocka_unit_test(test_http_listen_refused),
		cmocka_unit_test(test_http_needs_tls_off_loopback),
		cmocka_unit_test(test_http_metrics_listen),
		cmocka_unit_test(test_http_metrics_same),
		cmocka_unit_test(test_http_path),
		cmocka_unit_test(test_http_origins),
		cmocka_unit_test(test_http_hosts),
		cmocka_unit_test(test_http_tls_check),
		cmocka_unit_test(test_label_valid),
		cmocka_unit_test(test_token_entry_matches),
		cmocka_unit_test(test_reload_restart),
		cmocka_unit_test(test_reload_http_oauth),
		cmocka_unit_test(test_http_oauth),
		cmocka_unit_test(test_audit_path_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
