/* internal.h: the check's own state and the steps its files share; for
 * pkg/check's files only. Calls go one way: check.c runs the parts; the
 * parts use report.c to say what they found, servers.c for the running
 * servers, and cells.c (cells.h) for everything that touches the process
 * or the runtime; nothing below calls back up.
 */
#ifndef APPL_CHECK_INTERNAL_H
#define APPL_CHECK_INTERNAL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bridge/bridge.h"
#include "check/check.h"
#include "check/judge.h"
#include "check/listen.h"
#include "engine/engine.h"
#include "gateway/gateway.h"
#include "policy/notes.h"
#include "policy/policy.h"

#define CHECK_WHY_MAX	  640 /* one row's account */
#define CHECK_LABEL_MAX	  272 /* one row's label */
#define CHECK_TOKEN_BYTES 16
#define CHECK_MARKER_ENV  "APPLIANCE_CHECK_MARKER"
#define CHECK_RUN_ID	  "check"

enum check_mark { CHECK_MARK_OK, CHECK_MARK_PROBLEM, CHECK_MARK_WARNING };

struct check;
struct check_probe;

/* Fills params (the probe's parameters, which its code sees as P) and may
 * adjust p's expectation, deadline and label. 0, or a nonzero code: a
 * negative errno, or jansson's -1. */
typedef int (*check_probe_setup_fn)(struct check *c, struct check_probe *p, json_t *params);

/* One fixed probe (probes.c). */
struct check_probe_def {
	const char *label;
	bool deny;
	enum check_judge_kind judge;
	const char *expect; /* CHECK_JUDGE_STDOUT */
	const char *code;   /* Python; probes with a setup see its params as P */
	check_probe_setup_fn setup;
	bool early; /* long-running: started before the others */
};

/* One row of the table: a cell to run and its verdict. */
struct check_probe {
	const struct check_probe_def *def;
	const struct check_call *call; /* a --call row; def is then NULL */
	char label[CHECK_LABEL_MAX];
	bool deny;
	struct check_judge_expect ex;
	uint64_t deadline_ms;
	char *code;
	struct check_listeners lis;
	struct run *run; /* while it runs (NULL once answered) */
	json_t *result;	 /* its result object, once answered with one */
	bool started, ended, judged, ok;
	char why[CHECK_WHY_MAX];
};

struct check {
	const struct check_options *o;
	struct check_policy cp;
	bool accepted;
	struct policy_notes *rules;
	struct policy_limits lim;
	/* The loop, signals, image, runtime, servers and probe runs: the
	 * engine run starts with, opened once the policy is accepted. */
	struct engine *e;
	struct upstream_secrets *secrets;   /* the servers' headers' values */
	char secrets_why[APPL_ERR_MSG_MAX]; /* why they could not be taken; "" */
	bool marker_set;		    /* CHECK_MARKER_ENV is in the environment */
	struct bridge_tool_in *tools;	    /* every ready server's tools, borrowed */
	size_t ntools;
	struct bridge_catalog *client; /* what the stdio client's role may call */
	bool image_ok;
	char marker_dir[PATH_MAX];
	char marker_path[PATH_MAX + 16];
	char token[2 * CHECK_TOKEN_BYTES + 1];
	struct check_probe *probes;
	size_t nprobes;
	struct check_report n;
};

/* report.c: a line of part 1 ("ok      ", "problem ", "warning ", then
 * the text), counted; any other text of the report; and hostile text
 * (a server's name or error) escaped for one line, into out. */
void check_report_say(struct check *c, enum check_mark m, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void check_report_print(struct check *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *check_report_shown(const char *s, char *out, size_t cap);

/* part_policy.c: the signature (-1 when refused: nothing else can be
 * judged), what run requires, the offline notes (-1 when the signed bytes
 * cannot be read again). */
int check_policy_part(struct check *c);
int check_policy_notes_part(struct check *c);

/* machine.c: the image, runsc, the cgroups, the telemetry collector (one
 * span sent, waited for at most CHECK_TELEMETRY_WAIT_MS). */
#define CHECK_TELEMETRY_WAIT_MS 5000u
void check_machine_image(struct check *c);
void check_machine_runtime(struct check *c);
void check_machine_cgroups(struct check *c);
void check_machine_telemetry(struct check *c);

/* servers.c: start the servers and gather their tools (-1 when they could
 * not be started at all); a ready server by name, or NULL. */
int check_servers_part(struct check *c);
const struct upstream *check_servers_up(const struct check *c, const char *name);

/* tools.c: each `tools` and role pattern against the tools listed, then
 * what each role can call; leaves the stdio client's catalog in c. */
void check_tools_patterns(struct check *c);
void check_tools_roles(struct check *c);

/* probes.c: the fixed probes, in the table's order; and a probe's
 * program: body after the prelude that gives it params (borrowed) as P and
 * its report function, or body alone when params is NULL (new string, or
 * NULL on out of memory). */
size_t check_probes_count(void);
const struct check_probe_def *check_probes_get(size_t i);
char *check_probes_code(const json_t *params, const char *body);

/* prepare.c: the marker file and variable; every probe set up (a probe
 * that cannot be is judged at once, with why); a probe judged without
 * running. */
int check_prepare_markers(struct check *c);
int check_prepare_probes(struct check *c);
void check_prepare_surprise(struct check_probe *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* run.c: run the probes, at most limits.cells at once, judging each as it
 * ends; a probe's cell and listeners released. */
void check_run_probes(struct check *c);
/* Start p's cell as a run of the engine's (its answer fills p->result,
 * or p->why; then p->ended). Always 0: a run that could not start is
 * ended with why. */
int check_run_start(struct check *c, struct check_probe *p);
/* The stop signal's account ("signal N"), or NULL while none came. */
const char *check_stopped(const struct check *c);
void check_run_release(struct check_probe *p);

/* warm.c: a warm sandbox of the engine's pool proven frozen while it
 * waits (the kernel's freezer state read back), thawed once a run takes
 * it, and running that run's cell; its row said. Before the probes. */
void check_warm_part(struct check *c);

/* code.c: each code tool's program, in name order: run once with its
 * example (the first role that may call it, write tools refused) and its
 * answer judged, or, without an example or a role, compiled in a sandbox.
 * After the probes; stops at a stop signal. */
void check_code_part(struct check *c);

/* table.c: the table of rows, then every row it had to cut and every
 * surprise in full (counted). */
void check_table_print(struct check *c);
void check_table_details(struct check *c);

#endif
