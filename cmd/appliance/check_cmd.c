/* check_cmd.c: `appliance check` (docs/check.md) and the offline findings
 * `sign` prints (check_cmd.h).
 *
 * Part 1 judges the policy and the machine the way `run` would start with
 * them: the signature without recording the serial, the image, runsc, the
 * cgroups, the servers and their tools against the patterns and roles.
 * Part 2 runs real cells in fresh sandboxes under the policy's limits: what
 * must work, and what must be denied, each judged by probe_judge, a pure
 * function of the cell's result object and of what check's own listeners
 * on the host received.
 */
#define _GNU_SOURCE
#include "check_cmd.h"
#include "cli.h"
#include "proc/confine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "bridge/bridge.h"
#include "cell/cell.h"
#include "engine/confine.h"
#include "engine/engine.h"
#include "gateway/gateway.h"
#include "image/image.h"
#include "json/json.h"
#include "log/log.h"
#include "loop/loop.h"
#include "policy/load.h"
#include "policy/policy.h"
#include "proc/proc.h"
#include "sandbox/runsc.h"
#include "stubs/stubs.h"
#include "upstream/set.h"

#define CHECK_CALLS_MAX	    32	 /* --call options */
#define CHECK_ADDRS_MAX	    16	 /* host addresses tried, per family and kind */
#define CHECK_DEADLINE_MS   3000 /* the deadline probe's, unless the policy's is shorter */
#define CHECK_WHY_MAX	    640	 /* one row's account */
#define CHECK_ROW_MAX	    (CHECK_WHY_MAX + 288) /* a mark, a label and an account */
#define CHECK_LEFT_COLS	    54			  /* the "must work" column, in characters */
#define CHECK_RIGHT_COLS    78			  /* the "must be denied" column */
#define CHECK_REPORT_MAX    4096		  /* the JSON line a probe cell prints */
#define CHECK_MARKER_ENV    "APPLIANCE_CHECK_MARKER"
#define CHECK_MEMCG	    "/sys/fs/cgroup/memory"
#define CHECK_RUN_ID	    "check"
#define CHECK_TOKEN_BYTES   16
#define CHECK_MARK_OK	    "\xe2\x9c\x94" /* ✔ */
#define CHECK_MARK_SURPRISE "\xe2\x9c\x98" /* ✘ */
#define CHECK_ELLIPSIS	    "\xe2\x80\xa6" /* … */
/* A tool name no pattern can spell (a pattern's tool part is A-Z a-z 0-9
 * _ - . /), so only a wildcard entry can decide it. */
#define CHECK_ANY_TOOL " "

static const char check_usage_text[] =
	"usage: appliance check --policy POLICY.sig [--trust-dir DIR] [--cache DIR]\n"
	"                       [--runtime-dir DIR] [--call SERVER.TOOL=JSON]...\n"
	"                       [--server-uids FIRST-LAST]\n"
	"\n"
	"The operator's self-test of a signed policy on this machine, before an MCP\n"
	"client depends on it (docs/check.md). Part 1 checks the signature, trust,\n"
	"expiry and rollback floor as `run` does, without recording the serial; the\n"
	"image against its digest; runsc, its version and platform; the cgroups;\n"
	"then starts every server and checks each tool pattern and role against\n"
	"the tools they list. Part 2 runs real cells in fresh sandboxes under the\n"
	"policy's limits: what must work (arithmetic, printing, asyncio, and each\n"
	"--call, a tool called from a cell through the bridge with those\n"
	"arguments, as the stdio client's role) and what must be denied (the\n"
	"host's network, raw sockets, host files and environment, writes outside\n"
	"/tmp, exec from /tmp, more processes or memory than the limits, running\n"
	"past a 3 s deadline). Prints one line per problem, naming the field, and\n"
	"a table with a row per cell. Exit 1 on any problem or surprise.\n"
	"\n"
	"options:\n"
	"  --policy POLICY.sig      the signed policy to check (required)\n"
	"  --trust-dir DIR          the trusted keys (default /etc/appliance/trusted.d)\n"
	"  --cache DIR              where the image is unpacked (see image verify)\n"
	"  --runtime-dir DIR        runsc's state directory (/run/appliance as root)\n"
	"  --call SERVER.TOOL=JSON  call a tool from a cell with these arguments\n"
	"  --server-uids FIRST-LAST the uids servers take one of their own from, as\n"
	"                           for run (default 81920-86015)\n"
	"  --help, -h               print this text\n"
	"\n"
	"exit status: 0 when nothing was wrong (warnings or not); 1 on any problem\n"
	"or surprise; 2 on a usage error.\n";

void check_help(void)
{
	fputs(check_usage_text, stdout);
}

static int usage(const char *msg)
{
	fprintf(stderr, "appliance check: %s\n%s", msg, check_usage_text);
	return 2;
}

/* ---- the policy document's `tools` entries ------------------------------------ */

/* The policy parsed from bytes known to be the signed ones, with its
 * `tools` patterns (no accessor lists them) sorted for a stable report. */
struct rules {
	json_t *doc;
	struct policy *p;
	const char **pat; /* borrowed from doc */
	bool *read;	  /* the entry's access is "read" */
	size_t n;
};

static void rules_free(struct rules *r)
{
	policy_free(r->p);
	json_decref(r->doc);
	free(r->pat);
	free(r->read);
	memset(r, 0, sizeof(*r));
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int rules_index(struct rules *r, struct appl_err *err)
{
	const json_t *tools = json_object_get(r->doc, "tools");
	const char *pat;
	json_t *v;
	size_t n = json_object_size(tools);

	r->pat = calloc(n ? n : 1, sizeof(*r->pat));
	r->read = calloc(n ? n : 1, sizeof(*r->read));
	if (!r->pat || !r->read)
		return appl_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach((json_t *)tools, pat, v) {
		(void)v;
		r->pat[r->n++] = pat;
	}
	qsort(r->pat, r->n, sizeof(*r->pat), str_cmp);
	for (size_t i = 0; i < r->n; i++) {
		const json_t *access = json_object_get(json_object_get(tools, r->pat[i]), "access");
		r->read[i] =
			json_is_string(access) && strcmp(json_string_value(access), "read") == 0;
	}
	return 0;
}

static int rules_load(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		      struct rules *r, struct appl_err *err)
{
	unsigned char got[POLICY_HASH_BYTES];
	char *buf = NULL;
	size_t len = 0;
	int rc;

	memset(r, 0, sizeof(*r));
	if ((rc = appl_file_read(path, APPL_POLICY_FILE_MAX, &buf, &len, err)) < 0)
		return rc;
	crypto_hash_sha256(got, (const unsigned char *)buf, len);
	/* The findings must be about the bytes that were signed or verified,
	 * not about whatever the file holds by now. */
	if (sodium_memcmp(got, hash, sizeof(got)) != 0)
		rc = appl_err_set(err, -ESTALE, "%s: changed since it was read", path);
	/* Only the patterns are wanted: "/" stands for the file's directory,
	 * whose only use is to resolve the image layout. */
	if (rc == 0)
		rc = policy_parse(buf, len, "/", &r->p, err);
	if (rc == 0 && !(r->doc = appl_json_load(buf, len, APPL_POLICY_FILE_MAX,
						 APPL_POLICY_DEPTH_MAX, "policy", err)))
		rc = err->code;
	free(buf);
	if (rc == 0)
		rc = rules_index(r, err);
	if (rc < 0)
		rules_free(r);
	return rc;
}

/* The server part of pattern pat into out (cap bytes); false when none. */
static bool pattern_server(const char *pat, char *out, size_t cap)
{
	const char *dot = strchr(pat, '.');

	if (!dot || (size_t)(dot - pat) >= cap)
		return false;
	memcpy(out, pat, (size_t)(dot - pat));
	out[dot - pat] = '\0';
	return true;
}

static const char *pattern_tool(const char *pat)
{
	const char *dot = strchr(pat, '.');
	return dot ? dot + 1 : "";
}

static bool pattern_wild(const char *pat)
{
	return strcmp(pattern_tool(pat), "*") == 0;
}

static bool pattern_on(const char *pat, const char *server)
{
	size_t n = strlen(server);
	return strncmp(pat, server, n) == 0 && pat[n] == '.';
}

static bool rules_has_exact(const struct rules *r, const char *pat)
{
	return bsearch(&pat, r->pat, r->n, sizeof(*r->pat), str_cmp) != NULL;
}

/* Whether role may call server.tool for either answer of the server's
 * read-only mark: policy_tool_check decides, so this is the bridge's. */
static bool tool_callable(const struct policy *p, const char *server, const char *tool,
			  const char *role)
{
	return policy_tool_access(p, server, tool, true, role, NULL) ||
	       policy_tool_access(p, server, tool, false, role, NULL);
}

/* Whether role may call some tool that entry i decides: an exact entry its
 * own tool; a wildcard the role's exact patterns on that server that have
 * no entry of their own, and any other tool when the role has the
 * server's wildcard too. */
static bool rule_callable(const struct rules *r, size_t i, const struct policy_role *role)
{
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];

	if (!pattern_server(r->pat[i], server, sizeof(server)))
		return false;
	if (!pattern_wild(r->pat[i]))
		return tool_callable(r->p, server, pattern_tool(r->pat[i]), role->name);
	for (size_t k = 0; k < role->ntools; k++) {
		const char *rp = role->tools[k];

		if (!pattern_on(rp, server))
			continue;
		if (pattern_wild(rp) && tool_callable(r->p, server, CHECK_ANY_TOOL, role->name))
			return true;
		if (!pattern_wild(rp) && !rules_has_exact(r, rp) &&
		    tool_callable(r->p, server, pattern_tool(rp), role->name))
			return true;
	}
	return false;
}

static void notes_emit(const struct rules *r, check_note_fn fn, void *data)
{
	char text[APPL_ERR_MSG_MAX];
	size_t nroles = policy_role_count(r->p);

	if (!policy_client_default_role(r->p) && policy_token_count(r->p) == 0)
		fn(data, CHECK_NOTE_NO_CLIENT,
		   "clients: no default_role and no tokens: no client can call any tool");
	for (size_t k = 0; k < nroles; k++) {
		const struct policy_role *role = policy_role_get(r->p, k);
		bool any = false;

		for (size_t i = 0; i < r->n && !any; i++)
			any = rule_callable(r, i, role);
		if (any)
			continue;
		snprintf(text, sizeof(text),
			 "roles.%s: its patterns match no tools entry that allows it a call: it "
			 "can call nothing",
			 role->name);
		fn(data, CHECK_NOTE_ROLE_IDLE, text);
	}
	for (size_t i = 0; i < r->n; i++) {
		bool used = false;

		for (size_t k = 0; k < nroles && !used; k++)
			used = rule_callable(r, i, policy_role_get(r->p, k));
		if (used)
			continue;
		snprintf(text, sizeof(text), "tools.\"%s\": no role can call a tool through it",
			 r->pat[i]);
		fn(data, CHECK_NOTE_RULE_UNUSED, text);
	}
}

int check_policy_notes(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		       check_note_fn fn, void *data, struct appl_err *err)
{
	struct rules r;
	int rc = rules_load(path, hash, &r, err);

	if (rc < 0)
		return rc;
	notes_emit(&r, fn, data);
	rules_free(&r);
	return 0;
}

/* ---- judging a cell: pure ------------------------------------------------------- */

enum probe_judge {
	JUDGE_STDOUT,	/* must work: ran to its end and printed exactly expect */
	JUDGE_CALL,	/* must work: the tool call returned a value */
	JUDGE_DENIED,	/* must be denied: reached nothing, and the host saw nothing */
	JUDGE_LIMIT,	/* must be denied: refused before passing limit */
	JUDGE_DEADLINE, /* must be denied: stopped at the deadline */
};

struct probe_expect {
	enum probe_judge judge;
	const char *expect;  /* JUDGE_STDOUT */
	unsigned long limit; /* JUDGE_LIMIT: the most the cell may have reached */
	bool memory_stop;    /* JUDGE_LIMIT: a stop for memory is a refusal too */
};

/* What a probe cell says it did: its last line of output,
 * {"reached": BOOL, "detail": STR, "n": INT}. */
struct probe_facts {
	json_t *doc;
	bool reached;
	json_int_t n;
	const char *detail; /* borrowed from doc */
};

static void text_show(const char *s, size_t len, char *out, size_t cap)
{
	bool cut = false;
	size_t n = log_escape(s, len, out, cap, &cut);

	if (cut && n + sizeof(CHECK_ELLIPSIS) <= cap)
		memcpy(out + n, CHECK_ELLIPSIS, sizeof(CHECK_ELLIPSIS));
}

/* What a cell printed, for one line: each line break shown as a return
 * sign, the last one left out. */
static void output_show(const char *s, char *out, size_t cap)
{
	size_t len = strlen(s), o = 0;
	char line[200];

	if (len > 0 && s[len - 1] == '\n')
		len--;
	out[0] = '\0';
	while (len > 0 || o == 0) {
		const char *nl = memchr(s, '\n', len);
		size_t n = nl ? (size_t)(nl - s) : len;

		text_show(s, n, line, sizeof(line));
		o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%s", line,
				      nl ? " \xe2\x8f\x8e " : "");
		if (!nl || o >= cap)
			break;
		len -= n + 1;
		s = nl + 1;
	}
}

/* The traceback's last line: the exception and its message. */
static void error_tail(const char *error, char *out, size_t cap)
{
	size_t len = strlen(error);
	const char *start;

	while (len > 0 && (error[len - 1] == '\n' || error[len - 1] == ' '))
		len--;
	start = memrchr(error, '\n', len);
	start = start ? start + 1 : error;
	text_show(start, len - (size_t)(start - error), out, cap);
}

/* Whether the run ended by itself without raising; why says how it did
 * not. */
static bool result_clean(const json_t *result, char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	const char *error = json_string_value(json_object_get(result, "error"));
	char tail[256] = "";

	if (error)
		error_tail(error, tail, sizeof(tail));
	if (reason || json_is_true(json_object_get(result, "stopped"))) {
		snprintf(why, cap, "stopped (%s)%s%s", reason ? reason : "no reason given",
			 tail[0] ? ": " : "", tail);
		return false;
	}
	if (error) {
		snprintf(why, cap, "the cell raised %s", tail);
		return false;
	}
	return true;
}

static int facts_parse(const json_t *result, struct probe_facts *f, char *why, size_t cap)
{
	static const char *const keys[] = {"reached", "detail", "n", NULL};
	const char *out = json_string_value(json_object_get(result, "stdout"));
	size_t len = out ? strlen(out) : 0;
	const char *line;
	struct appl_err err = {0};
	char shown[160];

	memset(f, 0, sizeof(*f));
	while (len > 0 && out[len - 1] == '\n')
		len--;
	line = out ? memrchr(out, '\n', len) : NULL;
	line = line ? line + 1 : out;
	if (line)
		f->doc = appl_json_load(line, len - (size_t)(line - out), CHECK_REPORT_MAX, 2,
					"report", &err);
	if (!f->doc || !json_is_object(f->doc) ||
	    appl_json_keys_check(f->doc, keys, "report", &err) < 0 ||
	    !json_is_boolean(json_object_get(f->doc, "reached")) ||
	    !json_is_string(json_object_get(f->doc, "detail")) ||
	    !json_is_integer(json_object_get(f->doc, "n"))) {
		text_show(out ? out : "", len, shown, sizeof(shown));
		snprintf(why, cap, "no report from the cell (it printed \"%s\")", shown);
		json_decref(f->doc);
		f->doc = NULL;
		return -1;
	}
	f->reached = json_is_true(json_object_get(f->doc, "reached"));
	f->n = json_integer_value(json_object_get(f->doc, "n"));
	f->detail = json_string_value(json_object_get(f->doc, "detail"));
	return 0;
}

static bool judge_stdout(const struct probe_expect *e, const json_t *result, char *why, size_t cap)
{
	const char *out = json_string_value(json_object_get(result, "stdout"));
	char got[200], want[200];

	if (!result_clean(result, why, cap))
		return false;
	output_show(out ? out : "", got, sizeof(got));
	output_show(e->expect, want, sizeof(want));
	if (out && strcmp(out, e->expect) == 0) {
		snprintf(why, cap, "printed %s", got);
		return true;
	}
	snprintf(why, cap, "printed \"%s\", not \"%s\"", got, want);
	return false;
}

static bool judge_deadline(const json_t *result, char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	json_int_t ms = json_integer_value(json_object_get(result, "duration_ms"));

	if (reason && strcmp(reason, "deadline") == 0 &&
	    json_is_true(json_object_get(result, "stopped"))) {
		snprintf(why, cap, "stopped at the deadline, after %.1f s", (double)ms / 1000.0);
		return true;
	}
	if (result_clean(result, why, cap))
		snprintf(why, cap, "ran to its end: never stopped at the deadline");
	return false;
}

static bool judge_fact(const struct probe_expect *e, const struct probe_facts *f, unsigned arrivals,
		       char *why, size_t cap)
{
	char detail[400];

	/* The cell's words reach the operator's terminal: escaped. */
	text_show(f->detail, strlen(f->detail), detail, sizeof(detail));
	switch (e->judge) {
	case JUDGE_CALL:
		snprintf(why, cap, "%s%s", f->reached ? "returned " : "", detail);
		return f->reached;
	case JUDGE_LIMIT:
		if (f->reached || f->n < 0 || (unsigned long long)f->n > e->limit) {
			snprintf(why, cap, "%s (the limit is %lu)", detail, e->limit);
			return false;
		}
		snprintf(why, cap, "%s", detail);
		return true;
	default:
		if (arrivals > 0) {
			snprintf(why, cap,
				 "check's listener on the host received %u; the cell said: %s",
				 arrivals, detail);
			return false;
		}
		snprintf(why, cap, "%s%s", f->reached ? "reached: " : "", detail);
		return !f->reached;
	}
}

/* Whether result (a cell's result object; borrowed) is what e expects of
 * it, arrivals being how many connections and datagrams check's own
 * listeners received while it ran. why (cap > 0) gets a short account:
 * what happened when as expected, what was surprising when not. Pure. */
static bool probe_judge(const struct probe_expect *e, const json_t *result, unsigned arrivals,
			char *why, size_t cap)
{
	const char *reason = json_string_value(json_object_get(result, "reason"));
	struct probe_facts f;
	bool ok;

	if (!json_is_object(result)) {
		snprintf(why, cap, "no result");
		return false;
	}
	if (e->judge == JUDGE_STDOUT)
		return judge_stdout(e, result, why, cap);
	if (e->judge == JUDGE_DEADLINE)
		return judge_deadline(result, why, cap);
	if (e->judge == JUDGE_LIMIT && e->memory_stop && reason && strcmp(reason, "memory") == 0) {
		snprintf(why, cap, "the sandbox was stopped for memory");
		return true;
	}
	if (!result_clean(result, why, cap) || facts_parse(result, &f, why, cap) < 0)
		return false;
	ok = judge_fact(e, &f, arrivals, why, cap);
	json_decref(f.doc);
	return ok;
}

/* ---- arguments ------------------------------------------------------------------ */

struct check_call {
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	char *tool;
	json_t *args; /* an object */
};

struct check_args {
	const char *policy, *trust_dir, *cache, *run_dir;
	struct check_call calls[CHECK_CALLS_MAX];
	size_t ncalls;
	bool help;
};

static void args_free(struct check_args *a)
{
	for (size_t i = 0; i < a->ncalls; i++) {
		free(a->calls[i].tool);
		json_decref(a->calls[i].args);
	}
	a->ncalls = 0;
}

/* SERVER.TOOL=JSON, the JSON an object. */
static int call_parse(const char *arg, struct check_call *c)
{
	const char *eq = strchr(arg, '='), *dot = strchr(arg, '.');
	struct appl_err err = {0};

	if (!eq || !dot || dot > eq || dot == arg || dot + 1 == eq ||
	    (size_t)(dot - arg) > APPL_POLICY_SERVER_NAME_MAX ||
	    (size_t)(eq - dot - 1) > APPL_UPSTREAM_TOOL_NAME_MAX)
		return usage("--call takes SERVER.TOOL=JSON");
	memcpy(c->server, arg, (size_t)(dot - arg));
	c->server[dot - arg] = '\0';
	c->args = appl_json_load(eq + 1, strlen(eq + 1), APPL_MAX_ARGS_BYTES_CEIL,
				 APPL_RUNNER_VALUE_DEPTH_MAX, "--call", &err);
	if (!c->args)
		fprintf(stderr, "appliance check: %s\n", err.msg);
	if (!c->args || !json_is_object(c->args)) {
		json_decref(c->args);
		c->args = NULL;
		return usage("--call: the arguments must be a JSON object");
	}
	if (!(c->tool = strndup(dot + 1, (size_t)(eq - dot - 1)))) {
		json_decref(c->args);
		c->args = NULL;
		return usage("out of memory");
	}
	return 0;
}

static int option_take(struct check_args *a, int opt)
{
	switch (opt) {
	case 'p':
		a->policy = optarg;
		return 0;
	case 'D':
		a->trust_dir = optarg;
		return 0;
	case 'c':
		a->cache = optarg;
		return 0;
	case 's':
		a->run_dir = optarg;
		return 0;
	case 'h':
		a->help = true;
		return 0;
	case 'u': {
		struct appl_err err = {0};

		if (proc_jail_uids_set(optarg, &err) < 0)
			return usage(err.msg);
		return 0;
	}
	case 'C':
		if (a->ncalls == CHECK_CALLS_MAX)
			return usage("at most 32 --call options");
		if (call_parse(optarg, &a->calls[a->ncalls]) != 0)
			return 2;
		a->ncalls++;
		return 0;
	default:
		/* As for run: keys only from a trust directory, no --trust. */
		return usage("unknown option (check takes keys only from --trust-dir)");
	}
}

static int args_parse(int argc, char **argv, struct check_args *a)
{
	static const struct option opts[] = {
		{"policy", required_argument, NULL, 'p'},
		{"trust-dir", required_argument, NULL, 'D'},
		{"cache", required_argument, NULL, 'c'},
		{"runtime-dir", required_argument, NULL, 's'},
		{"call", required_argument, NULL, 'C'},
		{"server-uids", required_argument, NULL, 'u'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt, rc;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return usage("options must be spelled out in full");
	optind = 1;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1)
		if ((rc = option_take(a, opt)) != 0)
			return rc;
	if (a->help)
		return 0;
	if (!a->policy || optind != argc)
		return usage("needs --policy POLICY.sig and nothing else");
	return 0;
}

/* ---- the report ----------------------------------------------------------------- */

enum mark { MARK_OK, MARK_PROBLEM, MARK_WARNING };

struct probe;

struct check {
	const struct check_args *a;
	struct cli_policy cp;
	bool accepted;
	struct rules rules;
	struct policy_limits lim;
	struct loop *loop;
	struct sandbox_rt *rt;
	struct upstream_set *ups;
	struct engine_confine confine; /* the servers are confined as run confines them */
	struct cli_hide hide;
	struct bridge_tool_in *tools; /* every ready server's tools, borrowed from ups */
	size_t ntools;
	struct bridge_catalog *client; /* what the stdio client's role may call */
	char rootfs[PATH_MAX];
	char rootfs_image[PATH_MAX]; /* "" while none (runsc too old, or no image) */
	bool image_ok;
	struct sandbox_oci_params oci;
	struct cell_limits cell_lim;
	struct bridge_limits blim;
	char marker_dir[PATH_MAX];
	char marker_path[PATH_MAX + 16];
	char token[2 * CHECK_TOKEN_BYTES + 1];
	struct probe *probes;
	size_t nprobes;
	unsigned problems, warnings, surprises;
	int stop_signal;
	uint64_t t0;
};

static void say(struct check *c, enum mark m, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct check *c, enum mark m, const char *fmt, ...)
{
	static const char *const words[] = {"ok      ", "problem ", "warning "};
	va_list ap;

	if (m == MARK_PROBLEM)
		c->problems++;
	if (m == MARK_WARNING)
		c->warnings++;
	fputs(words[m], stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* A name or text from an upstream server, fit for one line of the report. */
static const char *shown(const char *s, char *out, size_t cap)
{
	text_show(s ? s : "", s ? strlen(s) : 0, out, cap);
	return out;
}

static void time_text(int64_t t, char out[POLICY_TIME_STR])
{
	if (policy_sig_time_format(t, out, POLICY_TIME_STR) < 0)
		snprintf(out, POLICY_TIME_STR, "%lld", (long long)t);
}

/* ---- part 1: the policy and the machine ----------------------------------------- */

static void policy_requirements(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct appl_err err = {0};

	if (cli_policy_supported(p, c->a->policy, &err) < 0)
		say(c, MARK_PROBLEM, "policy: %s", err.msg);
	if (policy_http(p)) {
		if (gateway_http_try(p, &err) < 0)
			say(c, MARK_PROBLEM, "http: %s", err.msg);
		else
			say(c, MARK_OK,
			    "http: every listener binds%s (closed again: check serves "
			    "no client)",
			    policy_http(p)->tls_cert ? ", the TLS certificate and key load" : "");
	}
	if (engine_audit_check(p, c->cp.state_dir, &err) < 0)
		say(c, MARK_PROBLEM, "audit.path: %s", err.msg);
	else if (policy_audit_path(p))
		say(c, MARK_OK, "audit.path: %s would be %s as it is (check writes none)",
		    policy_audit_path(p),
		    access(policy_audit_path(p), F_OK) == 0 ? "continued" : "begun");
	/* A call no audit line records must not happen under a policy that
	 * keeps a log: check writes none. */
	if (policy_audit_path(p) && c->a->ncalls > 0)
		say(c, MARK_PROBLEM,
		    "audit.path: the policy keeps an audit log, which check does not write: "
		    "--call would make calls the log does not hold");
}

/* Accept exactly as run does, and never commit: check is not a use. */
static int part_policy(struct check *c)
{
	struct cli_policy_opts o = {.sig = c->a->policy, .trust_dir = c->a->trust_dir};
	struct appl_err err = {0};
	char expires[POLICY_TIME_STR];

	printf("check of %s\n\n", c->a->policy);
	if (cli_policy_accept(&o, &c->cp, &err) < 0) {
		say(c, MARK_PROBLEM, "signature: %s", err.msg);
		return -1;
	}
	c->accepted = true;
	time_text(c->cp.info.expires, expires);
	say(c, MARK_OK,
	    "signature: key %s, serial %llu, deployment %s, expires %s (the serial is not "
	    "recorded)",
	    c->cp.info.keyid_hex, (unsigned long long)c->cp.info.serial, c->cp.info.deployment,
	    expires);
	policy_limits_get(c->cp.policy, &c->lim);
	policy_requirements(c);
	return 0;
}

static void on_note(void *data, enum check_note kind, const char *text)
{
	/* A role that can call nothing is judged against the real tool lists
	 * below (roles.NAME), which says more. */
	if (kind != CHECK_NOTE_ROLE_IDLE)
		say(data, MARK_WARNING, "%s", text);
}

static int part_notes(struct check *c)
{
	char path[PATH_MAX];
	struct appl_err err = {0};

	if (policy_sig_path_policy(c->a->policy, path, sizeof(path), &err) < 0 ||
	    rules_load(path, c->cp.info.hash, &c->rules, &err) < 0) {
		say(c, MARK_PROBLEM, "policy: %s", err.msg);
		return -1;
	}
	notes_emit(&c->rules, on_note, c);
	return 0;
}

static void part_image(struct check *c)
{
	const struct policy *p = c->cp.policy;
	char cache[PATH_MAX];
	struct appl_err err = {0};
	const char *dir = c->a->cache;

	if (!dir && image_cache_default(cache, sizeof(cache), &err) < 0) {
		say(c, MARK_PROBLEM, "image: %s", err.msg);
		return;
	}
	if (image_layout_verify(policy_image_layout(p), policy_image_digest(p), dir ? dir : cache,
				c->rootfs, sizeof(c->rootfs), &err) < 0) {
		say(c, MARK_PROBLEM, "image.digest: %s", err.msg);
		return;
	}
	c->image_ok = true;
	say(c, MARK_OK, "image: %s verified, unpacked at %s", policy_image_digest(p), c->rootfs);
}

static void part_runtime(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct sandbox_rt_config rc = {.runsc = policy_runtime_runsc(p),
				       .state_dir = c->a->run_dir,
				       .platform = policy_runtime_platform(p),
				       .rootless = policy_runtime_rootless(p)};
	struct appl_err err = {0};

	if (!(c->rt = sandbox_rt_open(&rc, &err))) {
		say(c, MARK_PROBLEM, "runtime.runsc: %s", err.msg);
		return;
	}
	say(c, MARK_OK, "runtime: %s %s, platform %s%s", policy_runtime_runsc(p),
	    sandbox_rt_version(c->rt), policy_runtime_platform(p),
	    policy_runtime_rootless(p) ? ", rootless" : "");
	if (!c->image_ok)
		return;
	if (sandbox_rootfs_image(c->rt, c->rootfs, c->rootfs_image, sizeof(c->rootfs_image), &err) <
	    0) {
		say(c, MARK_PROBLEM, "runtime: the rootfs as one image: %s", err.msg);
		c->image_ok = false;
	} else if (c->rootfs_image[0]) {
		say(c, MARK_OK, "rootfs: mounted by the Sentry from %s (no gofer process)",
		    c->rootfs_image);
	} else {
		say(c, MARK_OK,
		    "rootfs: served as a directory through a gofer (this runsc "
		    "mounts no EROFS image)");
	}
}

/* What run needs as root: a memory cgroup of its own per sandbox, made
 * below CHECK_MEMCG/appliance and given the limit (pkg/sandbox). Tried
 * for real with a cgroup of check's own, removed at once. */
static int memcg_try(const struct check *c, char *why, size_t cap)
{
	char dir[PATH_MAX], file[PATH_MAX + 32], val[32];
	unsigned long long limit = ((unsigned long long)c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB)
				   << 20;
	int fd, n, rc = 0;

	snprintf(dir, sizeof(dir), "%s/appliance/check-%ld", CHECK_MEMCG, (long)getpid());
	snprintf(file, sizeof(file), "%s/memory.limit_in_bytes", dir);
	n = snprintf(val, sizeof(val), "%llu", limit);
	if ((rc = appl_mkdir_parents(dir, 0755)) < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST)) {
		snprintf(why, cap, "creating %s: %s", dir, strerror(rc < 0 ? -rc : errno));
		return -1;
	}
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n) {
		snprintf(why, cap, "setting %s: %s", file, strerror(errno));
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	rmdir(dir);
	return rc;
}

static void part_cgroups(struct check *c)
{
	char why[PATH_MAX + 128];

	if (policy_runtime_rootless(c->cp.policy)) {
		say(c, MARK_WARNING,
		    "runtime.rootless: no cgroups in rootless mode: memory is bounded per process "
		    "only (SECURITY.md)");
		return;
	}
	if (geteuid() != 0)
		return; /* refused above */
	if (access(CHECK_MEMCG "/memory.limit_in_bytes", F_OK) < 0) {
		say(c, MARK_WARNING,
		    "cgroups: no cgroup v1 memory hierarchy at %s: runsc's own cgroup still "
		    "limits memory, but a cell that dies of it is reported as exit, not memory",
		    CHECK_MEMCG);
		return;
	}
	if (memcg_try(c, why, sizeof(why)) < 0) {
		say(c, MARK_PROBLEM, "cgroups: %s", why);
		return;
	}
	say(c, MARK_OK, "cgroups: a memory cgroup of %u MiB per sandbox can be made in %s",
	    c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB, CHECK_MEMCG);
}

static void on_stop_signal(int signo, void *data)
{
	struct check *c = data;

	/* probes_run cancels the running cells once the round is over. */
	c->stop_signal = signo;
}

static void on_sigchld(int signo, void *data)
{
	(void)signo;
	(void)data;
	proc_reap_orphans();
}

static int loop_open(struct check *c)
{
	static const int stops[] = {SIGTERM, SIGINT, SIGHUP};
	struct appl_err err = {0};

	if (proc_signals_check(&err) < 0 || !(c->loop = loop_new(&err))) {
		say(c, MARK_PROBLEM, "check: %s", err.msg);
		return -1;
	}
	for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
		if (loop_signal(c->loop, stops[i], on_stop_signal, c, &err) < 0) {
			say(c, MARK_PROBLEM, "check: %s", err.msg);
			return -1;
		}
	if (loop_signal(c->loop, SIGCHLD, on_sigchld, c, &err) < 0) {
		say(c, MARK_PROBLEM, "check: %s", err.msg);
		return -1;
	}
	return 0;
}

static const struct upstream *server_up(const struct check *c, const char *name)
{
	for (size_t i = 0; i < upstream_set_count(c->ups); i++) {
		const struct upstream *u = upstream_set_get(c->ups, i);

		if (strcmp(upstream_name(u), name) == 0)
			return upstream_state(u) == UPSTREAM_READY ? u : NULL;
	}
	return NULL;
}

static int tools_gather(struct check *c)
{
	size_t n = 0;

	for (size_t i = 0; i < upstream_set_count(c->ups); i++)
		n += upstream_tool_count(upstream_set_get(c->ups, i));
	if (!(c->tools = calloc(n ? n : 1, sizeof(*c->tools))))
		return -ENOMEM;
	for (size_t i = 0; i < upstream_set_count(c->ups); i++) {
		const struct upstream *u = upstream_set_get(c->ups, i);

		if (upstream_state(u) != UPSTREAM_READY)
			continue;
		for (size_t j = 0; j < upstream_tool_count(u); j++) {
			const struct upstream_tool *t = upstream_tool_get(u, j);

			c->tools[c->ntools++] = (struct bridge_tool_in){
				upstream_name(u), t->name,	     t->description,
				t->input_schema,  t->read_only_hint, t->output_schema,
				t->task_required};
		}
	}
	return 0;
}

static void server_report(struct check *c, const struct upstream *u)
{
	char why[APPL_ERR_MSG_MAX];

	if (upstream_state(u) == UPSTREAM_READY) {
		say(c, MARK_OK, "servers.%s: started (MCP %s), %zu tools", upstream_name(u),
		    upstream_protocol_version(u), upstream_tool_count(u));
		return;
	}
	say(c, MARK_PROBLEM, "servers.%s: did not start: %s", upstream_name(u),
	    upstream_last_error(u)[0] ? shown(upstream_last_error(u), why, sizeof(why))
				      : "not ready in time");
}

static int part_servers(struct check *c)
{
	struct upstream_opts opts = {.result_max = c->lim.max_result_bytes};
	struct upstream_secrets *secrets = NULL;
	struct appl_err err = {0};

	cli_hide_paths(&c->hide, c->a->policy, c->a->trust_dir, c->cp.state_dir);
	if (engine_confine_prepare(&c->confine, c->cp.policy, c->hide.v, c->a->run_dir, &err) < 0) {
		say(c, MARK_PROBLEM, "servers: %s", err.msg);
		return -1;
	}
	engine_confine_opts(&c->confine, &opts);
	if (cli_secrets_take(c->cp.policy, &secrets, &err) < 0) {
		say(c, MARK_PROBLEM, "servers: %s", err.msg);
		return -1;
	}
	opts.secrets = secrets;
	c->ups = upstream_set_open(c->loop, c->cp.policy, &opts, NULL, NULL, &err);
	upstream_secrets_free(secrets); /* each HTTP upstream holds its own filled copy */
	if (!c->ups) {
		say(c, MARK_PROBLEM, "servers: %s", err.msg);
		return -1;
	}
	for (size_t i = 0; i < upstream_set_count(c->ups); i++)
		server_report(c, upstream_set_get(c->ups, i));
	if (tools_gather(c) < 0) {
		say(c, MARK_PROBLEM, "servers: out of memory");
		return -1;
	}
	return 0;
}

static bool tool_exists(const struct check *c, const char *server, const char *tool)
{
	for (size_t i = 0; i < c->ntools; i++)
		if (strcmp(c->tools[i].server, server) == 0 && strcmp(c->tools[i].name, tool) == 0)
			return true;
	return false;
}

/* How many tools of the (running) server a pattern names; with rule, the
 * tools a `tools` wildcard decides: those without an entry of their own,
 * and for a read entry only those the server marks read-only. */
static size_t pattern_count(const struct check *c, const char *pat, const char *server, bool rule,
			    bool read)
{
	char exact[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2];
	size_t n = 0;

	if (!pattern_wild(pat))
		return tool_exists(c, server, pattern_tool(pat)) ? 1 : 0;
	for (size_t i = 0; i < c->ntools; i++) {
		const struct bridge_tool_in *t = &c->tools[i];

		if (strcmp(t->server, server) != 0)
			continue;
		snprintf(exact, sizeof(exact), "%s.%s", t->server, t->name);
		if (!rule || (!rules_has_exact(&c->rules, exact) && (!read || t->read_only_hint)))
			n++;
	}
	return n;
}

/* path is where the pattern is ("tools.\"x.y\"", "roles.r.tools[0]"). */
static void pattern_judge(struct check *c, const char *path, const char *pat, bool rule, bool read)
{
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	const struct upstream *u;

	if (!pattern_server(pat, server, sizeof(server)) || !(u = server_up(c, server)))
		return; /* a server that did not start is reported as such */
	if (pattern_count(c, pat, server, rule, read) > 0)
		return;
	if (pattern_wild(pat) && rule && upstream_tool_count(u) > 0)
		say(c, MARK_PROBLEM,
		    "%s: admits no tool of server %s: every one of its %zu tools has an entry of "
		    "its own%s",
		    path, server, upstream_tool_count(u),
		    read ? ", or is not marked read-only (annotations.readOnlyHint)" : "");
	else
		say(c, MARK_PROBLEM, "%s: names no tool of server %s", path, server);
}

static void part_patterns(struct check *c)
{
	char path[APPL_POLICY_LABEL_MAX + APPL_POLICY_SERVER_NAME_MAX + APPL_POLICY_TOOL_NAME_MAX +
		  32];

	for (size_t i = 0; i < c->rules.n; i++) {
		snprintf(path, sizeof(path), "tools.\"%s\"", c->rules.pat[i]);
		pattern_judge(c, path, c->rules.pat[i], true, c->rules.read[i]);
	}
	for (size_t k = 0; k < policy_role_count(c->cp.policy); k++) {
		const struct policy_role *r = policy_role_get(c->cp.policy, k);

		for (size_t i = 0; i < r->ntools; i++) {
			snprintf(path, sizeof(path), "roles.%s.tools[%zu] \"%s\"", r->name, i,
				 r->tools[i]);
			pattern_judge(c, path, r->tools[i], false, false);
		}
	}
}

/* The `tools` entry that decides server.tool: its own, else the wildcard. */
static const char *rule_of(const struct check *c, const char *server, const char *tool, char *out,
			   size_t cap)
{
	snprintf(out, cap, "%s.%s", server, tool);
	if (!rules_has_exact(&c->rules, out))
		snprintf(out, cap, "%s.*", server);
	return out;
}

/* A tool a role may call that is not offered (its schema cannot be
 * checked, or its name cannot become Python): a problem when the policy
 * names it, a warning when only a wildcard took it in. Told once. */
static void unoffered_report(struct check *c, const struct bridge_tool_info *info, bool *told)
{
	char rule[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2];
	char name[2 * APPL_UPSTREAM_TOOL_NAME_MAX];

	for (size_t i = 0; i < c->ntools; i++) {
		if (strcmp(c->tools[i].server, info->server) != 0 ||
		    strcmp(c->tools[i].name, info->name) != 0)
			continue;
		if (told[i])
			return;
		told[i] = true;
		break;
	}
	rule_of(c, info->server, info->name, rule, sizeof(rule));
	say(c, pattern_wild(rule) ? MARK_WARNING : MARK_PROBLEM,
	    "tools.\"%s\": %s.%s is not offered: %s", rule, info->server,
	    shown(info->name, name, sizeof(name)), info->why_not);
}

/* Whether role may call the tool, given what its server says of it. */
static bool tool_allowed(const struct check *c, const struct bridge_tool_info *info,
			 const char *role)
{
	for (size_t i = 0; i < c->ntools; i++)
		if (strcmp(c->tools[i].server, info->server) == 0 &&
		    strcmp(c->tools[i].name, info->name) == 0)
			return policy_tool_access(c->cp.policy, info->server, info->name,
						  c->tools[i].read_only_hint, role, NULL);
	return false;
}

static int catalog_of(struct check *c, const char *role, struct bridge_catalog **cat)
{
	struct appl_err err = {0};

	if (bridge_catalog_new(c->cp.policy, role, c->tools, c->ntools, cat, &err) < 0) {
		say(c, MARK_PROBLEM, "roles.%s: %s", role ? role : "(none)", err.msg);
		return -1;
	}
	return 0;
}

static void role_judge(struct check *c, const char *role, bool *told)
{
	struct bridge_catalog *cat;
	struct bridge_tool_info info;
	size_t offered = 0;

	if (catalog_of(c, role, &cat) < 0)
		return;
	for (size_t i = 0; bridge_catalog_info(cat, i, &info) == 0; i++) {
		if (!info.why_not)
			offered++;
		else if (tool_allowed(c, &info, role))
			unoffered_report(c, &info, told);
	}
	if (offered == 0)
		say(c, MARK_PROBLEM, "roles.%s: can call no tool (of the %zu the servers list)",
		    role, c->ntools);
	else
		say(c, MARK_OK, "roles.%s: can call %zu tools", role, offered);
	bridge_catalog_unref(cat);
}

static void part_roles(struct check *c)
{
	const char *client = policy_client_default_role(c->cp.policy);
	bool *told = calloc(c->ntools ? c->ntools : 1, sizeof(*told));

	if (!told) {
		say(c, MARK_PROBLEM, "roles: out of memory");
		return;
	}
	for (size_t k = 0; k < policy_role_count(c->cp.policy); k++)
		role_judge(c, policy_role_get(c->cp.policy, k)->name, told);
	free(told);
	catalog_of(c, client, &c->client);
}

/* ---- part 2: the cells ---------------------------------------------------------- */

struct probe;
typedef int (*probe_setup_fn)(struct check *c, struct probe *p, json_t *params);

struct probe_def {
	const char *label;
	bool deny;
	enum probe_judge judge;
	const char *expect; /* JUDGE_STDOUT */
	const char *code;   /* Python; probes with a setup see its params as P */
	probe_setup_fn setup;
	bool early; /* long-running: started before the others */
};

struct probe {
	const struct probe_def *def;
	const struct check_call *call; /* a --call row; def is then NULL */
	char label[272];
	bool deny;
	struct probe_expect ex;
	uint64_t deadline_ms;
	char *code;
	int fds[2 * CHECK_ADDRS_MAX];
	size_t nfds;
	struct cell *cell;
	struct bridge_run *br;
	bool started, ended, judged, ok;
	char why[CHECK_WHY_MAX];
};

/* What every probe that reports facts starts with: its parameters, from
 * check, hex-encoded so no value is ever pasted into the program, and the
 * report line probe_judge reads. */
static const char prelude_head[] = "import json\n"
				   "P = json.loads(bytes.fromhex(\"";
static const char prelude_tail[] =
	"\").decode())\n"
	"def report(reached, detail, n=0):\n"
	"    print(json.dumps({\"reached\": bool(reached), \"detail\": str(detail)[:300], "
	"\"n\": int(n)}))\n";

static const char code_print[] = "print(\"hello from a cell\")\n"
				 "print(\"caf\\u00e9\", 2, None, sep=\", \", end=\" .\\n\")\n";

static const char code_asyncio[] =
	"import asyncio, time\n"
	"async def nap(i):\n"
	"    await asyncio.sleep(0.3)\n"
	"    return i * i\n"
	"t = time.monotonic()\n"
	"r = await asyncio.gather(*(nap(i) for i in range(5)))\n"
	"print(r, \"together\" if time.monotonic() - t < 1.2 else \"one after another\")\n";

static const char code_tcp_loopback[] =
	"import socket\n"
	"try:\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
	"    s.settimeout(2)\n"
	"    s.connect((\"127.0.0.1\", P[\"port\"]))\n"
	"    report(True, \"connected to 127.0.0.1:%d\" % P[\"port\"])\n"
	"except OSError as e:\n"
	"    report(False, \"%s: %s\" % (type(e).__name__, e.strerror or e))\n";

static const char code_udp_loopback[] =
	"import socket\n"
	"try:\n"
	"    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
	"    s.sendto(b\"appliance check\", (\"127.0.0.1\", P[\"port\"]))\n"
	"    report(False, \"sent, into the cell's own loopback\")\n"
	"except OSError as e:\n"
	"    report(False, \"%s: %s\" % (type(e).__name__, e.strerror or e))\n";

static const char code_tcp_hosts[] =
	"import socket\n"
	"seen, reached = [], False\n"
	"for fam, addr, port in P[\"addrs\"]:\n"
	"    try:\n"
	"        s = socket.socket(socket.AF_INET6 if fam == 6 else socket.AF_INET)\n"
	"        s.settimeout(2)\n"
	"        s.connect((addr, port))\n"
	"        seen.append(\"connected to %s\" % addr)\n"
	"        reached = True\n"
	"    except OSError as e:\n"
	"        seen.append(\"%s: %s\" % (addr, e.strerror or type(e).__name__))\n"
	"report(reached, \"; \".join(seen) or \"the host has no address but loopback\")\n";

static const char code_udp_hosts[] =
	"import socket\n"
	"seen = []\n"
	"for fam, addr, port in P[\"addrs\"]:\n"
	"    try:\n"
	"        s = socket.socket(socket.AF_INET6 if fam == 6 else socket.AF_INET,\n"
	"                          socket.SOCK_DGRAM)\n"
	"        s.sendto(b\"appliance check\", (addr, port))\n"
	"        seen.append(\"%s: sent\" % addr)\n"
	"    except OSError as e:\n"
	"        seen.append(\"%s: %s\" % (addr, e.strerror or type(e).__name__))\n"
	"report(False, \"; \".join(seen) or \"the host has no address but loopback\")\n";

static const char code_interfaces[] =
	"dev = open(\"/proc/net/dev\").read().splitlines()[2:]\n"
	"names = sorted(l.split(\":\")[0].strip() for l in dev if \":\" in l)\n"
	"v4 = [l.split() for l in open(\"/proc/net/route\").read().splitlines()[1:] if "
	"l.strip()]\n"
	"try:\n"
	"    v6 = [l.split() for l in open(\"/proc/net/ipv6_route\").read().splitlines() if "
	"l.strip()]\n"
	"except OSError:\n"
	"    v6 = []\n"
	"default = [r for r in v4 if len(r) > 7 and r[1] == \"00000000\" and r[7] == "
	"\"00000000\"]\n"
	"default += [r for r in v6 if len(r) > 1 and r[0] == \"0\" * 32 and r[1] == \"00\"]\n"
	"others = [n for n in names if n != \"lo\"]\n"
	"report(bool(others or default), \"interfaces: %s; %d routes; default route: %s\"\n"
	"       % (\", \".join(names) or \"none\", len(v4) + len(v6), \"yes\" if default else "
	"\"none\"))\n";

static const char code_raw[] =
	"import socket\n"
	"opened, refused = [], []\n"
	"for name, fam, typ, proto in ((\"raw IPv4\", socket.AF_INET, socket.SOCK_RAW, "
	"socket.IPPROTO_ICMP),\n"
	"                              (\"raw IPv6\", socket.AF_INET6, socket.SOCK_RAW, "
	"socket.IPPROTO_ICMPV6),\n"
	"                              (\"packet\", socket.AF_PACKET, socket.SOCK_RAW, 0x0300)):\n"
	"    try:\n"
	"        socket.socket(fam, typ, proto).close()\n"
	"        opened.append(name)\n"
	"    except OSError as e:\n"
	"        refused.append(\"%s: %s\" % (name, type(e).__name__))\n"
	"report(bool(opened), \"opened \" + \", \".join(opened) if opened else \"; "
	"\".join(refused))\n";

static const char code_host_file[] =
	"import os\n"
	"seen = [p for p in (P[\"dir\"], P[\"path\"]) if os.path.lexists(p)]\n"
	"report(bool(seen), \"visible: \" + \", \".join(seen) if seen else \"%s is not there\" % "
	"P[\"path\"])\n";

static const char code_host_env[] =
	"import os\n"
	"hits = []\n"
	"if P[\"name\"] in os.environ or any(P[\"token\"] in v for v in os.environ.values()):\n"
	"    hits.append(\"os.environ\")\n"
	"for d in os.listdir(\"/proc\"):\n"
	"    if d.isdigit():\n"
	"        try:\n"
	"            with open(\"/proc/%s/environ\" % d, \"rb\") as f:\n"
	"                if P[\"token\"].encode() in f.read():\n"
	"                    hits.append(\"/proc/%s/environ\" % d)\n"
	"        except OSError:\n"
	"            pass\n"
	"report(bool(hits), \"seen in \" + \", \".join(hits) if hits else\n"
	"       \"not seen; the environment holds %s\" % \" \".join(sorted(os.environ)))\n";

static const char code_writes[] =
	"import os\n"
	"wrote, tried = [], 0\n"
	"for top, dirs, files in os.walk(\"/\"):\n"
	"    dirs[:] = [d for d in dirs if os.path.join(top, d) not in (\"/tmp\", \"/proc\", "
	"\"/sys\")]\n"
	"    tried += 1\n"
	"    try:\n"
	"        with open(os.path.join(top, \".appliance-check\"), \"x\") as f:\n"
	"            f.write(\"x\")\n"
	"        wrote.append(top)\n"
	"    except OSError:\n"
	"        pass\n"
	"    if tried >= 5000:\n"
	"        break\n"
	"try:\n"
	"    with open(\"/tmp/.appliance-check\", \"x\") as f:\n"
	"        f.write(\"x\")\n"
	"    tmp = \"while /tmp takes files\"\n"
	"except OSError as e:\n"
	"    tmp = \"and /tmp too (%s)\" % type(e).__name__\n"
	"report(bool(wrote), \"wrote in \" + \", \".join(wrote[:8]) if wrote else\n"
	"       \"refused in all %d directories, %s\" % (tried, tmp))\n";

static const char code_exec[] =
	"import os, shutil, subprocess, sys\n"
	"ran, refused = [], []\n"
	"script, binary = \"/tmp/appliance-check-script\", \"/tmp/appliance-check-python\"\n"
	"with open(script, \"w\") as f:\n"
	"    f.write(\"#!%s\\nprint('ran')\\n\" % sys.executable)\n"
	"tries = [(script, [script])]\n"
	"try:\n"
	"    shutil.copyfile(os.path.realpath(sys.executable), binary)\n"
	"    tries.append((binary, [binary, \"-c\", \"print('ran')\"]))\n"
	"except OSError as e:\n"
	"    refused.append(\"no copy of the interpreter (%s)\" % type(e).__name__)\n"
	"for path, argv in tries:\n"
	"    os.chmod(path, 0o755)\n"
	"    try:\n"
	"        r = subprocess.run(argv, capture_output=True, timeout=10)\n"
	"        ran.append(\"%s (exit %d)\" % (path, r.returncode))\n"
	"    except OSError as e:\n"
	"        refused.append(\"%s: %s\" % (os.path.basename(path), type(e).__name__))\n"
	"report(bool(ran), \"ran \" + \", \".join(ran) if ran else \"; \".join(refused))\n";

/* Threads first (they cost little memory; a forked interpreter costs
 * several MiB inside gVisor, so forks alone would meet the memory limit
 * first), then four of them end and forks take their places until one is
 * refused. RLIMIT_NPROC counts both. */
static const char code_pids[] =
	"import os, threading\n"
	"def tasks():\n"
	"    n = 0\n"
	"    for d in os.listdir(\"/proc\"):\n"
	"        if d.isdigit():\n"
	"            try:\n"
	"                n += len(os.listdir(\"/proc/%s/task\" % d))\n"
	"            except OSError:\n"
	"                pass\n"
	"    return n\n"
	"cap = P[\"pids\"] + 64\n"
	"threading.stack_size(128 << 10)\n"
	"events, threads = [], []\n"
	"while len(threads) < cap:\n"
	"    ev = threading.Event()\n"
	"    t = threading.Thread(target=ev.wait)\n"
	"    try:\n"
	"        t.start()\n"
	"    except RuntimeError:\n"
	"        break\n"
	"    events.append(ev)\n"
	"    threads.append(t)\n"
	"peak = tasks()\n"
	"for ev, t in list(zip(events, threads))[:4]:\n"
	"    ev.set()\n"
	"    t.join()\n"
	"r, w = os.pipe()\n"
	"kids, refused = [], None\n"
	"while len(kids) < cap:\n"
	"    try:\n"
	"        pid = os.fork()\n"
	"    except OSError as e:\n"
	"        refused = \"%s\" % (e.strerror or type(e).__name__)\n"
	"        break\n"
	"    if pid == 0:\n"
	"        os.close(w)\n"
	"        os.read(r, 1)\n"
	"        os._exit(0)\n"
	"    kids.append(pid)\n"
	"peak = max(peak, tasks())\n"
	"os.close(w)\n"
	"for k in kids:\n"
	"    os.waitpid(k, 0)\n"
	"for ev in events:\n"
	"    ev.set()\n"
	"report(refused is None, \"%d threads, %d forks, then refused (%s); at most %d tasks\"\n"
	"       % (len(threads), len(kids), refused, peak), peak)\n";

static const char code_memory[] =
	"chunks, failed = [], False\n"
	"try:\n"
	"    while len(chunks) < P[\"mb\"] + 64:\n"
	"        chunks.append(bytearray(b\"\\x01\") * (1 << 20))\n"
	"except MemoryError:\n"
	"    failed = True\n"
	"n = len(chunks)\n"
	"del chunks\n"
	"report(not failed, (\"MemoryError after %d MiB\" if failed else \"%d MiB, never "
	"refused\") % n, n)\n";

/* A listener of check's own on the host at addr (text), port chosen by
 * the kernel; kept in p until judged. The port, or -1. */
static int listener_open(struct probe *p, int family, int type, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len =
		family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	int fd, port;

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)family;
	if (p->nfds == sizeof(p->fds) / sizeof(p->fds[0]) ||
	    inet_pton(family, addr,
		      family == AF_INET6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
					 : (void *)&((struct sockaddr_in *)&ss)->sin_addr) != 1)
		return -1;
	if ((fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 ||
	    (type == SOCK_STREAM && listen(fd, 8) < 0) ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
		close(fd);
		return -1;
	}
	port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					: ((struct sockaddr_in *)&ss)->sin_port);
	p->fds[p->nfds++] = fd;
	return port;
}

/* Connections and datagrams that reached p's listeners. A connection to a
 * listener is queued by the kernel before connect() returns, a datagram
 * before sendto() does, so once the cell has ended there is nothing more
 * to wait for. */
static unsigned arrivals_count(struct probe *p)
{
	unsigned n = 0;
	char buf[64];

	for (size_t i = 0; i < p->nfds; i++) {
		int type = 0, fd;
		socklen_t len = sizeof(type);

		getsockopt(p->fds[i], SOL_SOCKET, SO_TYPE, &type, &len);
		if (type == SOCK_STREAM) {
			while ((fd = accept4(p->fds[i], NULL, NULL, SOCK_CLOEXEC)) >= 0) {
				close(fd);
				n++;
			}
		} else {
			while (recv(p->fds[i], buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC) >= 0)
				n++;
		}
	}
	return n;
}

static void listeners_close(struct probe *p)
{
	for (size_t i = 0; i < p->nfds; i++)
		close(p->fds[i]);
	p->nfds = 0;
}

static int setup_loopback(struct probe *p, json_t *params, int type)
{
	int port = listener_open(p, AF_INET, type, "127.0.0.1");

	if (port < 0)
		return -errno;
	return json_object_set_new(params, "port", json_integer(port));
}

static int setup_tcp_loopback(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	return setup_loopback(p, params, SOCK_STREAM);
}

static int setup_udp_loopback(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	return setup_loopback(p, params, SOCK_DGRAM);
}

/* Only addresses of this machine's own interfaces, so a packet that got
 * out of the cell would still never leave the host. IPv6 link-local
 * addresses are left out: they need an interface scope. */
static bool address_wanted(const struct ifaddrs *ifa, char *text, size_t cap)
{
	const void *in;

	if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK))
		return false;
	if (ifa->ifa_addr->sa_family == AF_INET) {
		in = &((const struct sockaddr_in *)ifa->ifa_addr)->sin_addr;
	} else if (ifa->ifa_addr->sa_family == AF_INET6) {
		const struct in6_addr *a6 =
			&((const struct sockaddr_in6 *)ifa->ifa_addr)->sin6_addr;

		if (IN6_IS_ADDR_LINKLOCAL(a6) || IN6_IS_ADDR_LOOPBACK(a6))
			return false;
		in = a6;
	} else {
		return false;
	}
	return inet_ntop(ifa->ifa_addr->sa_family, in, text, (socklen_t)cap) != NULL;
}

static int setup_hosts(struct probe *p, json_t *params, int type)
{
	struct ifaddrs *all, *ifa;
	json_t *addrs = json_array();
	char text[INET6_ADDRSTRLEN];
	int port;

	if (!addrs || getifaddrs(&all) < 0) {
		json_decref(addrs);
		return -ENOMEM;
	}
	for (ifa = all; ifa; ifa = ifa->ifa_next) {
		if (!address_wanted(ifa, text, sizeof(text)))
			continue;
		if ((port = listener_open(p, ifa->ifa_addr->sa_family, type, text)) < 0)
			continue; /* a tentative or duplicate address */
		json_array_append_new(addrs, json_pack("[i, s, i]",
						       ifa->ifa_addr->sa_family == AF_INET6 ? 6 : 4,
						       text, port));
	}
	freeifaddrs(all);
	return json_object_set_new(params, "addrs", addrs);
}

static int setup_tcp_hosts(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	return setup_hosts(p, params, SOCK_STREAM);
}

static int setup_udp_hosts(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	return setup_hosts(p, params, SOCK_DGRAM);
}

static int setup_none(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	(void)p;
	(void)params;
	return 0;
}

static int setup_host_file(struct check *c, struct probe *p, json_t *params)
{
	(void)p;
	return json_object_set_new(params, "dir", json_string(c->marker_dir)) ||
	       json_object_set_new(params, "path", json_string(c->marker_path));
}

static int setup_host_env(struct check *c, struct probe *p, json_t *params)
{
	(void)p;
	return json_object_set_new(params, "name", json_string(CHECK_MARKER_ENV)) ||
	       json_object_set_new(params, "token", json_string(c->token));
}

static int setup_pids(struct check *c, struct probe *p, json_t *params)
{
	p->ex.limit = c->lim.pids;
	return json_object_set_new(params, "pids", json_integer(c->lim.pids));
}

static int setup_memory(struct check *c, struct probe *p, json_t *params)
{
	p->ex.limit = c->lim.memory_mb;
	p->ex.memory_stop = true;
	return json_object_set_new(params, "mb", json_integer(c->lim.memory_mb));
}

static int setup_deadline(struct check *c, struct probe *p, json_t *params)
{
	(void)c;
	(void)params;
	if (p->deadline_ms > CHECK_DEADLINE_MS)
		p->deadline_ms = CHECK_DEADLINE_MS;
	snprintf(p->label, sizeof(p->label), "%.1f s deadline", (double)p->deadline_ms / 1000.0);
	return 0;
}

static const struct probe_def probe_defs[] = {
	{"arithmetic", false, JUDGE_STDOUT, "42\n", "print(6*7)\n", NULL, false},
	{"printing", false, JUDGE_STDOUT, "hello from a cell\ncaf\xc3\xa9, 2, None .\n", code_print,
	 NULL, false},
	{"asyncio", false, JUDGE_STDOUT, "[0, 1, 4, 9, 16] together\n", code_asyncio, NULL, false},
	{"TCP to host loopback", true, JUDGE_DENIED, NULL, code_tcp_loopback, setup_tcp_loopback,
	 false},
	{"UDP to host loopback", true, JUDGE_DENIED, NULL, code_udp_loopback, setup_udp_loopback,
	 false},
	{"TCP to host addresses", true, JUDGE_DENIED, NULL, code_tcp_hosts, setup_tcp_hosts, false},
	{"UDP to host addresses", true, JUDGE_DENIED, NULL, code_udp_hosts, setup_udp_hosts, false},
	{"interfaces and routes", true, JUDGE_DENIED, NULL, code_interfaces, setup_none, false},
	{"raw sockets", true, JUDGE_DENIED, NULL, code_raw, setup_none, false},
	{"host files", true, JUDGE_DENIED, NULL, code_host_file, setup_host_file, false},
	{"host environment", true, JUDGE_DENIED, NULL, code_host_env, setup_host_env, false},
	{"writes outside /tmp", true, JUDGE_DENIED, NULL, code_writes, setup_none, false},
	{"exec from /tmp", true, JUDGE_DENIED, NULL, code_exec, setup_none, false},
	{"processes past limits.pids", true, JUDGE_LIMIT, NULL, code_pids, setup_pids, true},
	{"memory past limits.memory_mb", true, JUDGE_LIMIT, NULL, code_memory, setup_memory, true},
	{"deadline", true, JUDGE_DEADLINE, NULL, "while True:\n    pass\n", setup_deadline, true},
};

#define NPROBE_DEFS (sizeof(probe_defs) / sizeof(probe_defs[0]))

static void probe_surprise(struct probe *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* p is judged without running: it could not start. */
static void probe_surprise(struct probe *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->why, sizeof(p->why), fmt, ap);
	va_end(ap);
	p->started = p->ended = p->judged = true;
	p->ok = false;
}

/* body after the prelude with params; NULL params: body alone. */
static char *code_make(const json_t *params, const char *body)
{
	char *text, *hex, *code = NULL;
	size_t len;

	if (!params)
		return strdup(body);
	if (!(text = json_dumps(params, JSON_COMPACT)))
		return NULL;
	len = strlen(text);
	if ((hex = malloc(2 * len + 1))) {
		sodium_bin2hex(hex, 2 * len + 1, (const unsigned char *)text, len);
		if (asprintf(&code, "%s%s%s%s", prelude_head, hex, prelude_tail, body) < 0)
			code = NULL;
	}
	free(hex);
	free(text);
	return code;
}

static void probe_def_init(struct check *c, struct probe *p, const struct probe_def *d)
{
	json_t *params = d->setup ? json_object() : NULL;
	int rc = params ? 0 : -ENOMEM;

	p->def = d;
	p->deny = d->deny;
	p->ex.judge = d->judge;
	p->ex.expect = d->expect;
	p->deadline_ms = c->cell_lim.deadline_ms;
	snprintf(p->label, sizeof(p->label), "%s", d->label);
	if (d->setup && (rc < 0 || (rc = d->setup(c, p, params)) != 0)) {
		probe_surprise(p, "could not be set up: %s", strerror(rc < 0 ? -rc : ENOMEM));
	} else if (!(p->code = code_make(params, d->code))) {
		probe_surprise(p, "out of memory");
	}
	json_decref(params);
}

static bool ident_ok(const char *s)
{
	if (!s || !(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

/* Why server.tool is not among what the stdio client may call. */
static void call_why_not(const struct check *c, const struct check_call *k, char *out, size_t cap)
{
	struct bridge_tool_info info;
	const char *role = policy_client_default_role(c->cp.policy);

	if (!policy_server_find(c->cp.policy, k->server)) {
		snprintf(out, cap, "the policy has no server %s", k->server);
		return;
	}
	if (!server_up(c, k->server)) {
		snprintf(out, cap, "server %s is not running", k->server);
		return;
	}
	for (size_t i = 0; c->client && bridge_catalog_info(c->client, i, &info) == 0; i++)
		if (strcmp(info.server, k->server) == 0 && strcmp(info.name, k->tool) == 0) {
			snprintf(out, cap, "not offered to the stdio client (role %s): %s",
				 role ? role : "none", info.why_not ? info.why_not : "?");
			return;
		}
	snprintf(out, cap, "server %s lists no tool %s", k->server, k->tool);
}

static void probe_call_init(struct check *c, struct probe *p, const struct check_call *k)
{
	const struct stubs *st = c->client ? bridge_catalog_stubs(c->client) : NULL;
	char name[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2], args[96];
	char *text = json_dumps(k->args, JSON_COMPACT), *body = NULL;
	json_t *params = json_pack("{sO}", "args", k->args);

	snprintf(name, sizeof(name), "%s.%s", k->server, k->tool);
	p->call = k;
	p->ex.judge = JUDGE_CALL;
	p->deadline_ms = c->cell_lim.deadline_ms;
	snprintf(p->label, sizeof(p->label), "%s %s", name,
		 text ? shown(text, args, sizeof(args)) : "");
	for (size_t i = 0; st && i < stubs_count(st) && !body; i++)
		if (strcmp(stubs_mcp_name(st, i), name) == 0 && !stubs_why_not(st, i) &&
		    ident_ok(stubs_ns(st, i)) && ident_ok(stubs_fn(st, i)) &&
		    asprintf(&body,
			     "try:\n"
			     "    v = await %s.%s(**P[\"args\"])\n"
			     "    report(True, json.dumps(v, ensure_ascii=False))\n"
			     "except ToolError as e:\n"
			     "    report(False, \"ToolError: %%s\" %% e)\n",
			     stubs_ns(st, i), stubs_fn(st, i)) < 0)
			body = NULL;
	if (!body) {
		char why[CHECK_WHY_MAX];

		call_why_not(c, k, why, sizeof(why));
		probe_surprise(p, "%s", why);
	} else if (!params || !(p->code = code_make(params, body)))
		probe_surprise(p, "out of memory");
	free(body);
	free(text);
	json_decref(params);
}

static void on_probe_done(struct cell *cell, void *data)
{
	(void)cell;
	((struct probe *)data)->ended = true;
}

static void probe_finish(struct probe *p)
{
	bridge_run_free(p->br);
	p->br = NULL;
	cell_free(p->cell);
	p->cell = NULL;
	listeners_close(p);
}

/* As the gateway starts a run: a fresh sandbox, the bridge as the cell's
 * caller before any code runs, then the code. */
static int probe_start(struct check *c, struct probe *p)
{
	struct cell_hooks hooks = {.on_done = on_probe_done, .data = p};
	struct cell_limits lim = c->cell_lim;
	struct appl_err err = {0};
	uint64_t arrival = loop_now_ms();
	struct sandbox *sb;

	lim.deadline_ms = p->deadline_ms;
	p->started = true;
	if (!(sb = sandbox_start(c->rt, &c->oci, &err)) ||
	    !(p->cell = cell_boot(c->loop, sb, &lim, NULL, &err))) {
		probe_surprise(p, "the sandbox did not start: %s", err.msg);
		return -1;
	}
	if (p->call) {
		struct bridge_approvals ap = {.loop = c->loop,
					      .command = policy_approvals_command(c->cp.policy),
					      .timeout_ms = c->lim.approval_timeout_s * 1000u,
					      .max = c->lim.max_approvals,
					      .client = CHECK_RUN_ID};

		if (!(p->br = bridge_run_new(c->client, &c->blim, c->ups, p->cell, CHECK_RUN_ID,
					     &err))) {
			probe_surprise(p, "%s", err.msg);
			probe_finish(p);
			return -1;
		}
		bridge_run_approvals(p->br, &ap);
	}
	if (cell_run(p->cell, p->code, strlen(p->code),
		     p->call ? bridge_catalog_runner_tools(c->client) : NULL, &lim, &hooks, arrival,
		     &err) < 0) {
		probe_surprise(p, "the cell did not start: %s", err.msg);
		probe_finish(p);
		return -1;
	}
	return 0;
}

static void probe_judge_now(struct probe *p)
{
	unsigned arrivals = arrivals_count(p);
	json_t *result = p->cell ? cell_outcome_json(cell_outcome(p->cell)) : NULL;

	p->ok = probe_judge(&p->ex, result, arrivals, p->why, sizeof(p->why));
	p->judged = true;
	json_decref(result);
	probe_finish(p);
}

/* The next probe to start: the long-running ones first. */
static struct probe *probe_next(struct check *c)
{
	for (int early = 1; early >= 0; early--)
		for (size_t i = 0; i < c->nprobes; i++) {
			struct probe *p = &c->probes[i];

			if (!p->started && (p->def ? p->def->early : false) == (bool)early)
				return p;
		}
	return NULL;
}

static unsigned probes_reap(struct check *c)
{
	unsigned running = 0;

	for (size_t i = 0; i < c->nprobes; i++) {
		struct probe *p = &c->probes[i];

		if (p->started && p->ended && !p->judged)
			probe_judge_now(p);
		else if (p->started && !p->judged)
			running++;
	}
	return running;
}

static void probes_cancel(struct check *c)
{
	for (size_t i = 0; i < c->nprobes; i++) {
		struct probe *p = &c->probes[i];

		if (!p->started)
			probe_surprise(p, "not run: stopped by signal %d", c->stop_signal);
		else if (p->cell && !p->ended)
			cell_cancel(p->cell);
	}
}

/* At most limits.cells at once, as run. */
static void probes_run(struct check *c)
{
	unsigned running = 0;
	struct probe *p;
	bool cancelled = false;

	for (;;) {
		running = probes_reap(c);
		while (!c->stop_signal && running < c->lim.cells && (p = probe_next(c)))
			if (probe_start(c, p) == 0)
				running++;
		if (c->stop_signal && !cancelled) {
			probes_cancel(c);
			cancelled = true;
		}
		if (running == 0 && (c->stop_signal || !probe_next(c)))
			break;
		if (loop_run_once(c->loop, -1) < 0)
			break;
	}
}

/* A host file and a variable of check's own environment that no cell may
 * see. */
static int markers_make(struct check *c)
{
	unsigned char raw[CHECK_TOKEN_BYTES];
	int fd;

	randombytes_buf(raw, sizeof(raw));
	sodium_bin2hex(c->token, sizeof(c->token), raw, sizeof(raw));
	if (setenv(CHECK_MARKER_ENV, c->token, 1) < 0)
		return -errno;
	snprintf(c->marker_dir, sizeof(c->marker_dir), "%s",
		 access("/var/tmp", W_OK) == 0 ? "/var/tmp/appliance-check.XXXXXX"
					       : "/tmp/appliance-check.XXXXXX");
	if (!mkdtemp(c->marker_dir)) {
		c->marker_dir[0] = '\0';
		return -errno;
	}
	chmod(c->marker_dir, 0755);
	snprintf(c->marker_path, sizeof(c->marker_path), "%s/marker", c->marker_dir);
	fd = open(c->marker_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || appl_fd_write_all(fd, c->token, strlen(c->token)) < 0) {
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

static int probes_make(struct check *c)
{
	size_t n = NPROBE_DEFS + c->a->ncalls, k = 0;

	if (!(c->probes = calloc(n, sizeof(*c->probes))))
		return -ENOMEM;
	c->nprobes = n;
	/* The rows of the "must work" column: the fixed ones, then the calls. */
	for (size_t i = 0; i < NPROBE_DEFS; i++)
		if (!probe_defs[i].deny)
			probe_def_init(c, &c->probes[k++], &probe_defs[i]);
	for (size_t i = 0; i < c->a->ncalls; i++)
		probe_call_init(c, &c->probes[k++], &c->a->calls[i]);
	for (size_t i = 0; i < NPROBE_DEFS; i++)
		if (probe_defs[i].deny)
			probe_def_init(c, &c->probes[k++], &probe_defs[i]);
	return 0;
}

/* ---- the table ------------------------------------------------------------------ */

/* s cut to cols (> 0) characters of UTF-8, the last an ellipsis when cut;
 * out has room for s. */
static void cols_cut(const char *s, size_t cols, char *out, size_t cap)
{
	size_t n = 0, keep = 0, i;

	for (i = 0; s[i]; i++) {
		if (((unsigned char)s[i] & 0xc0) == 0x80)
			continue;
		if (n == cols - 1)
			keep = i; /* the bytes of the first cols - 1 characters */
		n++;
	}
	if (n <= cols || keep + sizeof(CHECK_ELLIPSIS) > cap) {
		snprintf(out, cap, "%s", s);
		return;
	}
	memcpy(out, s, keep);
	memcpy(out + keep, CHECK_ELLIPSIS, sizeof(CHECK_ELLIPSIS));
}

static size_t cols_of(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static void row_text(const struct probe *p, char *out, size_t cap)
{
	snprintf(out, cap, "%s %s: %s", p->ok ? CHECK_MARK_OK : CHECK_MARK_SURPRISE, p->label,
		 p->why);
}

/* The i-th probe of one column, or NULL. */
static const struct probe *column_get(const struct check *c, bool deny, size_t i)
{
	for (size_t k = 0; k < c->nprobes; k++)
		if (c->probes[k].deny == deny && i-- == 0)
			return &c->probes[k];
	return NULL;
}

static size_t left_width(const struct check *c)
{
	char text[CHECK_ROW_MAX];
	const struct probe *p;
	size_t w = strlen("must work");

	for (size_t i = 0; (p = column_get(c, false, i)); i++) {
		row_text(p, text, sizeof(text));
		if (cols_of(text) > w)
			w = cols_of(text);
	}
	return w < CHECK_LEFT_COLS ? w : CHECK_LEFT_COLS;
}

static void cell_print(const struct probe *p, size_t cols, bool pad)
{
	char text[CHECK_ROW_MAX], cut[CHECK_ROW_MAX] = "";

	if (p) {
		row_text(p, text, sizeof(text));
		cols_cut(text, cols, cut, sizeof(cut));
	}
	fputs(cut, stdout);
	for (size_t n = cols_of(cut); pad && n < cols; n++)
		fputc(' ', stdout);
}

static void table_print(struct check *c)
{
	size_t w = left_width(c);
	const struct probe *l, *r;

	printf("\n%-*s | %s\n", (int)w, "must work", "must be denied");
	for (size_t i = 0; i < w; i++)
		fputc('-', stdout);
	fputs("-+-", stdout);
	for (size_t i = 0; i < CHECK_RIGHT_COLS; i++)
		fputc('-', stdout);
	fputc('\n', stdout);
	for (size_t i = 0;; i++) {
		l = column_get(c, false, i);
		r = column_get(c, true, i);
		if (!l && !r)
			break;
		cell_print(l, w, true);
		fputs(" | ", stdout);
		cell_print(r, CHECK_RIGHT_COLS, false);
		fputc('\n', stdout);
	}
}

/* Every row the table had to cut, and every surprise, in full. */
static void details_print(struct check *c)
{
	char text[CHECK_ROW_MAX];
	bool head = false;

	for (size_t i = 0; i < c->nprobes; i++) {
		const struct probe *p = &c->probes[i];

		if (!p->ok)
			c->surprises++;
		row_text(p, text, sizeof(text));
		if (p->ok && cols_of(text) <= (p->deny ? CHECK_RIGHT_COLS : left_width(c)))
			continue;
		if (!head)
			printf("\nin full:\n");
		head = true;
		printf("%s %s: %s\n", p->ok ? CHECK_MARK_OK : CHECK_MARK_SURPRISE, p->label,
		       p->why);
	}
}

static void part_cells(struct check *c)
{
	int rc;

	engine_limits_split(&c->lim, &c->oci, &c->cell_lim);
	bridge_limits_from_policy(&c->lim, &c->blim);
	c->oci.rootfs = c->rootfs;
	c->oci.rootfs_image = c->rootfs_image[0] ? c->rootfs_image : NULL;
	if ((rc = markers_make(c)) < 0 || (rc = probes_make(c)) < 0) {
		say(c, MARK_PROBLEM, "cells: could not prepare them: %s", strerror(-rc));
		return;
	}
	probes_run(c);
	if (c->stop_signal)
		say(c, MARK_PROBLEM, "check: stopped by signal %d", c->stop_signal);
	table_print(c);
	details_print(c);
}

/* ---- the whole check ------------------------------------------------------------ */

static void check_run(struct check *c)
{
	if (part_policy(c) < 0)
		return;
	if (part_notes(c) < 0)
		return;
	part_image(c);
	part_runtime(c);
	if (c->rt)
		part_cgroups(c);
	if (loop_open(c) < 0)
		return;
	if (part_servers(c) == 0) {
		part_patterns(c);
		part_roles(c);
	}
	if (c->stop_signal) {
		say(c, MARK_PROBLEM, "check: stopped by signal %d", c->stop_signal);
		return;
	}
	/* Cells prove what the machine does with a policy that is right;
	 * until then their rows would only repeat the problems above. */
	if (c->problems || !c->image_ok || !c->rt) {
		printf("\ncells not run: the problems above come first\n");
		return;
	}
	part_cells(c);
}

static void check_done(struct check *c)
{
	for (size_t i = 0; i < c->nprobes; i++) {
		probe_finish(&c->probes[i]);
		free(c->probes[i].code);
	}
	free(c->probes);
	bridge_catalog_unref(c->client);
	upstream_set_free(c->ups);
	engine_confine_release(&c->confine);
	free(c->tools);
	if (c->rt && c->loop)
		sandbox_rt_settle(c->rt);
	sandbox_rt_close(c->rt); /* before the loop: it finishes teardowns from it */
	loop_free(c->loop);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	if (c->marker_dir[0])
		appl_tree_remove(c->marker_dir);
	unsetenv(CHECK_MARKER_ENV);
	rules_free(&c->rules);
	if (c->accepted)
		cli_policy_done(&c->cp);
}

static int check_summary(const struct check *c)
{
	double s = (double)(loop_now_ms() - c->t0) / 1000.0;
	bool bad = c->problems || c->surprises;

	printf("\ncheck %s: %u problem%s, %u surprise%s, %u warning%s; took %.1f s\n",
	       bad ? "failed" : "passed", c->problems, c->problems == 1 ? "" : "s", c->surprises,
	       c->surprises == 1 ? "" : "s", c->warnings, c->warnings == 1 ? "" : "s", s);
	return bad ? 1 : 0;
}

int cmd_check(int argc, char **argv)
{
	struct check_args a;
	struct check c;
	int rc;

	memset(&a, 0, sizeof(a));
	if ((rc = args_parse(argc, argv, &a)) != 0 || a.help) {
		if (a.help && rc == 0)
			check_help();
		args_free(&a);
		return rc;
	}
	memset(&c, 0, sizeof(c));
	c.a = &a;
	c.t0 = loop_now_ms();
	/* The report is the product: only warnings and errors of the parts
	 * go to stderr. */
	log_setup(STDERR_FILENO, LOG_WARN);
	check_run(&c);
	rc = check_summary(&c);
	check_done(&c);
	args_free(&a);
	return rc;
}
