/* check.h: `appliance check`, the operator's self-test of a signed policy
 * on this machine (docs/check.md).
 *
 * Part 1 judges the policy and the machine the way `run` would start with
 * them: the signature without recording the serial, the image, runsc, the
 * cgroups, the servers and their tools against the patterns and roles.
 * Part 2 runs real cells in fresh sandboxes under the policy's limits: what
 * must work, and what must be denied, each judged by check_judge_result
 * (judge.h) from the cell's result and from what check's own listeners on
 * the host received; then each code tool's program once with the policy's
 * example, no write call made (code.c), or compiled when it has none.
 *
 * The report is the product: it is handed, piece by piece, to the
 * caller's print hook (cmd/ writes it to stdout); nothing here prints.
 * What a command line must decide (which keys are trusted, whether the
 * policy may run here, taking the servers' secrets out of the environment)
 * is asked of the caller through hooks, so check judges with exactly the
 * code `run` starts with.
 */
#ifndef APPL_CHECK_CHECK_H
#define APPL_CHECK_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "base/limits.h"
#include "policy/load.h"
#include "policy/policy.h"

struct upstream_secrets;

#define CHECK_CALLS_MAX 32 /* --call options */

/* A tool to call from a cell, through the bridge, as the stdio client's
 * role: server.tool with args. The caller's; borrowed by check. */
struct check_call {
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	char *tool;
	json_t *args; /* an object */
};

/* The accepted policy, as the accept hook hands it over: every pointer
 * borrowed from the caller until check_free. */
struct check_policy {
	const struct policy *policy;
	const struct policy_verified *info;
	const char *state_dir;	 /* the rollback floor's and the audit log's keys */
	const char *const *hide; /* NULL-ended: paths the servers must not see */
};

struct check_hooks {
	void *data; /* passed to print and accept */
	/* A piece of the report, text ready to be written as it is (it may
	 * hold several lines; nothing is owed after the call). */
	void (*print)(void *data, const char *text);
	/* Verify and judge the signed policy as `run` does, without
	 * recording its serial: fill out, or return negative with err. */
	int (*accept)(void *data, struct check_policy *out, struct appl_err *err);
	/* What `run` requires of a policy on this machine before anything
	 * starts (path: the signature file). May be NULL: nothing more. */
	int (*supported)(const struct policy *p, const char *path, struct appl_err *err);
	/* Take the values the HTTP servers' headers name out of the
	 * environment into *out (new; upstream_secrets_take) before the
	 * servers start; check frees them once the servers hold their
	 * copies. May be NULL: none. */
	int (*secrets_take)(const struct policy *p, struct upstream_secrets **out,
			    struct appl_err *err);
};

struct check_options {
	const char *policy;		/* the signature file (required) */
	const char *trust_dir;		/* NULL: the default */
	const char *cache;		/* the image cache; NULL: image_cache_default */
	const char *run_dir;		/* runsc's state directory; NULL: the default */
	const struct check_call *calls; /* ncalls of them, at most CHECK_CALLS_MAX */
	size_t ncalls;
	struct check_hooks hooks; /* print and accept required */
};

/* What the report counted: part 1's problems and warnings, and the cells
 * that did not do what was expected of them. */
struct check_report {
	unsigned problems, warnings, surprises;
};

/* One check; opaque. */
struct check;

/* A check of o (borrowed, with everything it points at, until check_free).
 * New *out; 0, or -ENOMEM with err. Nothing starts yet. */
int check_new(const struct check_options *o, struct check **out, struct appl_err *err);

/* Run every part in order, handing the report to o->hooks.print, and count
 * what it found into *r. Part 2's cells run only when part 1 found no
 * problem. SIGTERM, SIGINT and SIGHUP (blocked by the caller for the
 * loop's signalfd) stop it: running cells are cancelled, those not started
 * are reported as not run, and the stop counts as a problem. The summary
 * line is the caller's to print. */
void check_run(struct check *c, struct check_report *r);

/* Stop and remove everything the check started: sandboxes, the runtime
 * instance, the servers, the marker directory and variable. Safe on NULL. */
void check_free(struct check *c);

#endif
