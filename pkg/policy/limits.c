/* limits.c: the `limits` section. Every limit is one row of a table
 * made from limits.h by one macro: the policy may set a limit only within
 * APPL_<NAME>_MIN..APPL_<NAME>_CEIL, and gets APPL_<NAME>_DEF without it. */
#include "policy/internal.h"

#include <errno.h>

#define LIMIT(field, NAME)                                                                         \
	{                                                                                          \
		.name = #field, .type = F_UINT, .off = offsetof(struct policy_limits, field),      \
		.min = APPL_##NAME##_MIN, .max = APPL_##NAME##_CEIL, .def = APPL_##NAME##_DEF      \
	}

#define FILES_LIMIT(field, NAME)                                                                   \
	{                                                                                          \
		.name = #field, .type = F_UINT,                                                    \
		.off = offsetof(struct policy_files_limits, field),                                \
		.min = APPL_FILES_##NAME##_MIN, .max = APPL_FILES_##NAME##_CEIL,                   \
		.def = APPL_FILES_##NAME##_DEF                                                     \
	}

static const struct field files_fields[] = {
	FILES_LIMIT(max_count, MAX_COUNT),
	FILES_LIMIT(max_bytes, MAX_BYTES),
	FILES_LIMIT(max_total_bytes, MAX_TOTAL_BYTES),
};

static int files_parse(struct ctx *c, void *base, const json_t *v, const char *path);

static const struct field limit_fields[] = {
	LIMIT(deadline_s, DEADLINE_S),
	LIMIT(max_calls, MAX_CALLS),
	LIMIT(call_timeout_s, CALL_TIMEOUT_S),
	LIMIT(max_args_bytes, MAX_ARGS_BYTES),
	LIMIT(max_result_bytes, MAX_RESULT_BYTES),
	LIMIT(max_output_bytes, MAX_OUTPUT_BYTES),
	LIMIT(stop_output_bytes, STOP_OUTPUT_BYTES),
	LIMIT(memory_mb, MEMORY_MB),
	LIMIT(pids, PIDS),
	LIMIT(nofile, NOFILE),
	LIMIT(tmpfs_mb, TMPFS_MB),
	LIMIT(concurrency, CONCURRENCY),
	LIMIT(cells, CELLS),
	LIMIT(pool, POOL),
	LIMIT(boot_s, BOOT_S),
	LIMIT(max_runner_lines, MAX_RUNNER_LINES),
	LIMIT(audit_seal_lines, AUDIT_SEAL_LINES),
	LIMIT(audit_seal_s, AUDIT_SEAL_S),
	LIMIT(audit_rotate_kb, AUDIT_ROTATE_KB),
	LIMIT(approval_timeout_s, APPROVAL_TIMEOUT_S),
	LIMIT(max_approvals, MAX_APPROVALS),
	LIMIT(http_connections, HTTP_CONNECTIONS),
	LIMIT(http_sessions_per_token, HTTP_SESSIONS_PER_TOKEN),
	LIMIT(http_cells_per_client, HTTP_CELLS_PER_CLIENT),
	LIMIT(http_waiting_per_client, HTTP_WAITING_PER_CLIENT),
	LIMIT(http_body_kb, HTTP_BODY_KB),
	LIMIT(http_idle_s, HTTP_IDLE_S),
	LIMIT(http_slow_s, HTTP_SLOW_S),
	LIMIT(http_drain_s, HTTP_DRAIN_S),
	LIMIT(task_ttl_s, TASK_TTL_S),
	LIMIT(tasks_per_client, TASKS_PER_CLIENT),
	{.name = "files", .type = F_FN, .parse = files_parse},
};

_Static_assert(APPL_MAX_RUNNER_LINES_DEF >= APPL_MAX_CALLS_CEIL + APPL_RUNNER_LINES_SPARE,
	       "the default line budget must allow the most calls a policy may allow");
/* run_python's longest code, every byte escaped as \u00XX, and room for
 * the JSON-RPC envelope around it. */
_Static_assert(APPL_HTTP_BODY_KB_DEF * 1024ull >= 6ull * APPL_CELL_CODE_MAX + 64 * 1024,
	       "the default request body must hold the longest program, escaped");
_Static_assert(APPL_MAX_OUTPUT_BYTES_DEF <= APPL_STOP_OUTPUT_BYTES_DEF,
	       "the default output kept must not exceed the output that stops a run");
_Static_assert(APPL_FILES_MAX_BYTES_DEF <= APPL_FILES_MAX_TOTAL_BYTES_DEF,
	       "the default largest file must fit the default total");
/* Each file returned costs at most twice its bytes in run_python's answer
 * (text whose every byte escapes to two, or base64 at four for three), and
 * less than 512 bytes of envelope. */
_Static_assert(2ull * APPL_FILES_MAX_TOTAL_BYTES_CEIL + 512ull * APPL_FILES_MAX_COUNT_CEIL +
			       APPL_RUN_ANSWER_BASE_MAX <=
		       APPL_RPC_ANSWER_MAX,
	       "the most files a policy may allow must fit run_python's answer");
_Static_assert(APPL_MAX_RUNNER_LINES_DEF >=
		       APPL_MAX_CALLS_CEIL + APPL_RUNNER_LINES_SPARE +
			       APPL_FILES_LINES(APPL_FILES_MAX_COUNT_CEIL,
						APPL_FILES_MAX_TOTAL_BYTES_CEIL),
	       "the default line budget must allow the most calls and files a policy may allow");

/* `files` inside limits: an object ({} for the defaults). */
static int files_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_files_limits *f = &((struct policy_limits *)base)->files;
	int rc = policy_fields_parse(c, v, files_fields, NELEM(files_fields), f, path);

	if (rc < 0)
		return rc;
	/* A file larger than all of them together could never come back. */
	if (f->max_bytes > f->max_total_bytes)
		return appl_err_set(c->err, -EINVAL,
				    "%s.max_bytes: must not exceed %s.max_total_bytes (%u)", path,
				    path, f->max_total_bytes);
	return 0;
}

static unsigned files_lines(const struct policy_files_limits *f)
{
	return APPL_FILES_LINES(f->max_count, f->max_total_bytes);
}

int policy_limits_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_limits *l = &c->p->limits;
	int rc;

	(void)base;
	rc = policy_fields_parse(c, v, limit_fields, NELEM(limit_fields), l, path);
	if (rc < 0)
		return rc;
	/* Left out, one client's share follows the slots there are, so it
	 * stays below them; a value given is the administrator's. */
	if (!json_object_get(v, "http_cells_per_client"))
		l->http_cells_per_client = APPL_HTTP_CELLS_PER_CLIENT_FOR(l->cells);
	/* Output past the stop line ends the run, so keeping more than that
	 * could never happen: a policy saying so is a mistake. */
	if (l->max_output_bytes > l->stop_output_bytes)
		return appl_err_set(
			c->err, -EINVAL,
			"%s.max_output_bytes: must not exceed %s.stop_output_bytes (%u)", path,
			path, l->stop_output_bytes);
	/* Each call is a line of its own, and so is each piece of a file: a
	 * budget below what the policy allows would stop the runs it means
	 * to allow. */
	/* A task's run must be able to reach its deadline before the task
	 * expires: left out, the ttl grows to allow it, with a spare. */
	if (!json_object_get(v, "task_ttl_s") &&
	    l->task_ttl_s < l->deadline_s + APPL_TASK_TTL_SPARE_S)
		l->task_ttl_s = l->deadline_s + APPL_TASK_TTL_SPARE_S;
	if (l->task_ttl_s < l->deadline_s)
		return appl_err_set(c->err, -EINVAL,
				    "%s.task_ttl_s: must be at least %s.deadline_s (%u), so a task "
				    "outlives its cell",
				    path, path, l->deadline_s);
	if (l->max_runner_lines < l->max_calls + APPL_RUNNER_LINES_SPARE + files_lines(&l->files))
		return appl_err_set(c->err, -EINVAL,
				    "%s.max_runner_lines: must be at least %s.max_calls (%u) + %u, "
				    "and %u for the files %s.files allows",
				    path, path, l->max_calls, APPL_RUNNER_LINES_SPARE,
				    files_lines(&l->files), path);
	return 0;
}

/* ---- accessors ----------------------------------------------------------- */

void policy_limits_default(struct policy_limits *l)
{
	policy_fields_default(limit_fields, NELEM(limit_fields), l);
	policy_fields_default(files_fields, NELEM(files_fields), &l->files);
}

void policy_limits_get(const struct policy *p, struct policy_limits *out)
{
	*out = p->limits;
}
