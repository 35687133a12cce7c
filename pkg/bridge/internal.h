/* internal.h: the bridge's own types, shared by its files only. */
#ifndef APPL_BRIDGE_INTERNAL_H
#define APPL_BRIDGE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/policy.h"
#include "schema/schema.h"
#include "stubs/stubs.h"

struct bridge_entry {
	char *server, *name, *description;
	size_t order; /* position in the caller's list */
	json_t *input_schema;
	struct schema *schema; /* NULL: schema_why says why */
	char *schema_why;
	bool strict; /* undeclared argument names are refused */
	bool name_bad;
	enum policy_verdict verdict;
	enum policy_access access;
	bool approval;		   /* each call needs a person's yes (policy_tool_approval) */
	json_t *output_schema;	   /* NULL: the tool declares none */
	struct schema *out_schema; /* NULL: none, or it cannot be checked */
	char *pyname;		   /* "ns.fn" in the cell; NULL: no name there */
	/* The policy's own text of the tool's name when the policy names it
	 * (policy_tool_named), for the metrics; NULL: it does not. */
	const char *metric_tool;
};

struct bridge_catalog {
	unsigned refs;
	struct bridge_entry *e; /* sorted by server, then name */
	size_t n;
	struct stubs *stubs;
	json_t *runner_tools;
	/* Servers of the policy with no tool in the catalog (down since
	 * start, or listing none): a call of any of their names is told the
	 * server is not available. */
	char **absent;
	size_t nabsent;
	/* Servers whose resources this role may read. */
	char **readable;
	size_t nreadable;
};

bool bridge_catalog_absent(const struct bridge_catalog *c, const char *server);
/* The catalog's copy of server's name when its resources may be read, else NULL. */
const char *bridge_catalog_reader(const struct bridge_catalog *c, const char *server);
/* The Python namespace of server's tools, or NULL when it has none here. */
const char *bridge_catalog_ns(const struct bridge_catalog *c, const char *server);

const struct bridge_entry *bridge_catalog_find(const struct bridge_catalog *c, const char *server,
					       const char *name);
const char *bridge_entry_why_not(const struct bridge_entry *e);

/* A structured result value of e's against its output schema: 0, or -EINVAL
 * with msg saying why (after "the result ..."). No schema, or one that
 * cannot be checked: 0. */
int bridge_output_check(const struct bridge_entry *e, const json_t *value, char *msg, size_t cap);

/* ---- the per-server slots (gate.c) ----------------------------------------- */

struct bridge_gate;
struct bridge_run;

/* What a gate offers a free slot of server to: send r's first call waiting
 * for server, if r has room under its own concurrency and a slot can be
 * taken (gate_take); true when a call left the waiting list (sent, or
 * refused on the way). The run gives it at gate_join, so that the gate, the
 * lower file, reaches runs only through it. */
typedef bool gate_send_fn(struct bridge_run *r, const char *server);

/* r takes part in the turns, offered slots through send_for (0 or -ENOMEM)
 * / no longer does. r and send_for are borrowed until gate_leave. */
int gate_join(struct bridge_gate *g, struct bridge_run *r, gate_send_fn *send_for);
void gate_leave(struct bridge_gate *g, struct bridge_run *r);
/* Take a slot of server: false when all are in use. */
bool gate_take(struct bridge_gate *g, const char *server);
/* Give one back, and hand the free slots to waiting runs in turn. */
void gate_give(struct bridge_gate *g, const char *server);

/* ---- approval questions (approve.c) --------------------------------------- */

struct loop;
struct bridge_ask;

/* The answer: "approved", "declined", "timeout"; from a client also
 * "cancelled" or "unavailable". */
/* claim: the answer's ledger key (bridge_answer_fn), or NULL. */
typedef void (*bridge_ask_cb)(void *data, const char *outcome, const unsigned char *claim);

/* Ask the approver program command (absolute; run with an empty
 * environment, in its own process group) question[0..len) on its stdin;
 * "approve" as the first line of its stdout is a yes, anything else
 * (another word, nothing, its exit) a no, and no answer within timeout_ms
 * a timeout. cb is called once, from the loop, never from inside this
 * call. NULL with err when it could not be started. */
struct bridge_ask *bridge_ask_start(struct loop *loop, const char *command, unsigned timeout_ms,
				    const char *question, size_t len, bridge_ask_cb cb, void *data,
				    struct appl_err *err);

/* Ask the client through k (bridge.h) instead: text is what a person
 * reads, bind the call's binding digest. The same answers, and the same
 * timeout, as a program's; "cancelled" and "unavailable" too. NULL with
 * why (cap bytes) when the client cannot be asked. */
struct bridge_asker;
struct bridge_ask *bridge_ask_client(struct loop *loop, const struct bridge_asker *k,
				     unsigned timeout_ms, const char *text,
				     const unsigned char bind[32], bridge_ask_cb cb, void *data,
				     char *why, size_t cap);

/* Stop asking: the program killed and reaped (or the client's question
 * withdrawn), cb not called. Safe on NULL. */
void bridge_ask_free(struct bridge_ask *q);

/* The question for a call of server.tool with args (an object), as JSON:
 * {run, client, role, server, tool, text, arguments} where text names the
 * server and the tool first, then each argument, escaped (controls and
 * bidirectional characters), values over 200 bytes cut with their size
 * and digest shown; arguments is text's list as an object of strings. New
 * string, or NULL. */
char *bridge_question(const char *run, const char *client, const char *role, const char *server,
		      const char *tool, const json_t *args);

/* The same question as an object (new reference), or NULL. */
json_t *bridge_question_obj(const char *run, const char *client, const char *role,
			    const char *server, const char *tool, const json_t *args);

#endif
