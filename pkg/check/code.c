/* code.c: part 2's run of each code tool's program (internal.h;
 * docs/check.md). A tool with an example runs its program once with it,
 * as a client of the first role that may call the tool would, through
 * check's own catalog of its uses (no_writes: every write tool refused),
 * and its answer is judged: a value (it passed output_schema), the first
 * write call refused, or a failure. A tool without an example, or one no
 * role may call, is only compiled, in a sandbox of its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"
#include "check/text.h"
#include "loop/loop.h"

#define CODE_SHOWN_MAX 120 /* bytes of a value's JSON shown in its line */
#define CODE_LINE_MAX  (4 * CHECK_WHY_MAX + 8)

/* Compiles args["src"] as the runner compiles a cell and prints one line:
 * "compiled", or what the compiler said. */
static const char compile_code[] =
	"import ast\n"
	"try:\n"
	"    compile(args['src'], '<%s>' % args['name'], 'exec',\n"
	"            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)\n"
	"    print('compiled')\n"
	"except SyntaxError as e:\n"
	"    print('SyntaxError: %s (line %s)' % (str(e.msg).replace('\\n', ' '), e.lineno))\n";

/* One run, waited for. */
struct code_wait {
	struct run *run; /* until answered */
	bool answered, is_error;
	json_t *result; /* the program's value, or the compile cell's result object */
	char why[CHECK_WHY_MAX];
};

static void code_answer(void *data, const json_t *result, bool is_error, const char *text,
			const json_t *files)
{
	struct code_wait *w = data;

	(void)files;
	w->run = NULL; /* freed by the engine once this returns */
	w->answered = true;
	w->is_error = is_error;
	if (result)
		w->result = json_incref((json_t *)result);
	else
		snprintf(w->why, sizeof(w->why), "%s",
			 text ? text : "the run ended without a result");
}

/* The run started (w->run, or answered at once), waited for on the loop.
 * -1 when a stop signal came first: the run is cancelled, unanswered. */
static int code_wait(struct check *c, struct code_wait *w)
{
	if (!w->run && !w->answered) {
		snprintf(w->why, sizeof(w->why), "the run could not start");
		w->answered = true;
	}
	while (!w->answered && !check_stopped(c))
		if (loop_run_once(engine_loop(c->e), -1) < 0)
			break;
	if (w->answered)
		return 0;
	if (w->run)
		run_cancel(w->run); /* no answer comes after this */
	w->run = NULL;
	if (check_stopped(c))
		return -1;
	snprintf(w->why, sizeof(w->why), "the run was not answered: the event loop failed");
	return 0;
}

/* s[0..len) escaped for one line, at most max bytes of it (cut at a
 * character's start, an ellipsis then), into out (CODE_LINE_MAX). */
static const char *code_shown(const char *s, size_t len, size_t max, char *out)
{
	size_t n = len;
	bool cut = false;

	if (n > max) {
		for (n = max; n && ((unsigned char)s[n] & 0xc0) == 0x80; n--)
			;
		cut = true;
	}
	check_text_show(s, n, out, CODE_LINE_MAX - sizeof(CHECK_TEXT_ELLIPSIS));
	if (cut)
		memcpy(out + strlen(out), CHECK_TEXT_ELLIPSIS, sizeof(CHECK_TEXT_ELLIPSIS));
	return out;
}

/* The write tool a refusal names: "...refused: NAME: " then the verdict's
 * text at at. 0 and name, or -1. */
static int refused_tool(const char *text, const char *at, char *name, size_t cap)
{
	const char *from = NULL, *p;

	for (p = text; (p = strstr(p, "refused: ")) && p < at; p++)
		from = p + strlen("refused: ");
	if (!from || at - from < 3 || strncmp(at - 2, ": ", 2) != 0 ||
	    (size_t)(at - 2 - from) >= cap || memchr(from, ' ', (size_t)(at - 2 - from)))
		return -1;
	memcpy(name, from, (size_t)(at - 2 - from));
	name[at - 2 - from] = '\0';
	return 0;
}

static void example_value(struct check *c, const struct policy_code_tool *t, const json_t *v)
{
	char *json = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	char shown[CODE_LINE_MAX];

	check_report_say(
		c, CHECK_MARK_OK, "code_tools.%s: the example returned a value %s: %s", t->name,
		t->output_schema ? "that matches output_schema" : "(no output_schema)",
		json ? code_shown(json, strlen(json), CODE_SHOWN_MAX, shown) : "(out of memory)");
	free(json);
}

static void example_judge(struct check *c, const struct policy_code_tool *t,
			  const struct code_wait *w)
{
	const char *text = w->result ? "the run failed without a text" : w->why;
	const char *at = strstr(text, policy_verdict_text(POLICY_DENY_CHECK));
	char tool[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2];
	char shown[CODE_LINE_MAX];
	size_t n = strlen(t->name);

	/* The run's failures name the tool first: the line has already. */
	if (strncmp(text, t->name, n) == 0 && strncmp(text + n, ": ", 2) == 0)
		text += n + 2;
	if (w->result && !w->is_error)
		example_value(c, t, w->result);
	else if (at && refused_tool(text, at, tool, sizeof(tool)) == 0)
		check_report_say(c, CHECK_MARK_OK,
				 "code_tools.%s: the example ran up to a write call, which check "
				 "does not make (%s)",
				 t->name, code_shown(tool, strlen(tool), sizeof(tool), shown));
	else if (at)
		check_report_say(c, CHECK_MARK_OK,
				 "code_tools.%s: the example ran up to a write call, which check "
				 "does not make",
				 t->name);
	else
		check_report_say(c, CHECK_MARK_PROBLEM, "code_tools.%s: the example failed: %s",
				 t->name, code_shown(text, strlen(text), CHECK_WHY_MAX, shown));
}

/* t's program run with its example as a client of role, through check's
 * catalog of its uses; judged. -1 when a stop signal came. */
static int example_run(struct check *c, const struct policy_code_tool *t, const char *role)
{
	struct code_wait w = {0};
	struct run_client client = {
		.name = CHECK_RUN_ID, .role = role, .answer = code_answer, .c = &w};
	struct policy_caller who = {.role = role, .tool = t, .no_writes = true};
	struct bridge_catalog *cat = NULL;
	struct appl_err err = {0};
	int rc;

	/* Without the servers' tools (none ran) the program has no tools. */
	if (bridge_catalog_for(c->cp.policy, &who, c->tools, c->tools ? c->ntools : 0, &cat, &err) <
	    0) {
		check_report_say(c, CHECK_MARK_PROBLEM,
				 "code_tools.%s: its tools could not be listed: %s", t->name,
				 err.msg);
		return 0;
	}
	w.run = engine_run_program(c->e, t, t->example, &client, cat);
	bridge_catalog_unref(cat); /* the run holds its own reference */
	if ((rc = code_wait(c, &w)) == 0)
		example_judge(c, t, &w);
	json_decref(w.result);
	return rc;
}

/* The last line of a cell's error: the exception, or why it stopped. */
static const char *last_line(const char *s, size_t *len)
{
	size_t n = strlen(s), b;

	while (n && s[n - 1] == '\n')
		n--;
	for (b = n; b && s[b - 1] != '\n'; b--)
		;
	*len = n - b;
	return s + b;
}

static void compile_judge(struct check *c, const struct policy_code_tool *t,
			  const struct code_wait *w, const char *unrun)
{
	const char *out = json_string_value(json_object_get(w->result, "stdout"));
	const char *why = json_string_value(json_object_get(w->result, "error"));
	char shown[CODE_LINE_MAX];
	size_t n = out ? strcspn(out, "\n") : 0;

	if (out && strcmp(out, "compiled\n") == 0) {
		check_report_say(c, CHECK_MARK_OK, "code_tools.%s: compiles (%s)", t->name, unrun);
		return;
	}
	if (out && strncmp(out, "SyntaxError: ", 13) == 0 && out[n] == '\n' && !out[n + 1]) {
		check_report_say(c, CHECK_MARK_PROBLEM, "code_tools.%s: does not compile: %s",
				 t->name, code_shown(out, n, CHECK_WHY_MAX, shown));
		return;
	}
	if (why)
		why = last_line(why, &n);
	else
		n = strlen(why = w->result ? "the cell printed something else" : w->why);
	check_report_say(c, CHECK_MARK_PROBLEM,
			 "code_tools.%s: could not be compiled in a sandbox: %s", t->name,
			 code_shown(why, n, CHECK_WHY_MAX, shown));
}

/* t's program compiled in a sandbox (a cell of no role, the program its
 * args), never run; unrun says why. -1 when a stop signal came. */
static int compile_run(struct check *c, const struct policy_code_tool *t, const char *unrun)
{
	struct code_wait w = {0};
	json_t *args = json_pack("{s:s%, s:s}", "src", t->code ? t->code : "", t->code_len, "name",
				 t->name);
	struct run_client client = {
		.name = CHECK_RUN_ID, .answer = code_answer, .c = &w, .args = args};
	int rc;

	if (!args) {
		check_report_say(c, CHECK_MARK_PROBLEM, "code_tools.%s: out of memory", t->name);
		return 0;
	}
	w.run = engine_run_new(c->e, compile_code, sizeof(compile_code) - 1, &client, 0,
			       APPL_RUNS_WAITING_MAX);
	json_decref(args); /* the run holds its own reference */
	if ((rc = code_wait(c, &w)) == 0)
		compile_judge(c, t, &w, unrun);
	json_decref(w.result);
	return rc;
}

/* The first role (in the policy's order) that may call t, or NULL. */
static const char *caller_role(const struct check *c, const struct policy_code_tool *t)
{
	for (size_t k = 0; k < policy_role_count(c->cp.policy); k++) {
		const char *role = policy_role_get(c->cp.policy, k)->name;

		if (policy_code_tool_allowed(c->cp.policy, role, t->name, NULL) == POLICY_OK)
			return role;
	}
	return NULL;
}

void check_code_part(struct check *c)
{
	size_t n = policy_code_tool_count(c->cp.policy);

	if (n)
		check_report_print(c, "\n");
	for (size_t i = 0; i < n && !check_stopped(c); i++) {
		const struct policy_code_tool *t = policy_code_tool_get(c->cp.policy, i);
		const char *role = t->example ? caller_role(c, t) : NULL;
		int rc;

		if (t->example && !role)
			check_report_say(c, CHECK_MARK_WARNING,
					 "code_tools.%s: no role may call it", t->name);
		if (role)
			rc = example_run(c, t, role);
		else
			rc = compile_run(c, t,
					 t->example ? "no role may call it, so not run"
						    : "no example, so not run");
		if (rc < 0)
			break;
	}
}
