/* metrics.h: the appliance's counters, gauges and its one histogram, one
 * registry per process, rendered in the Prometheus text exposition format
 * 0.0.4 (docs/metrics.md lists every series).
 *
 * One appliance is one process with one event loop, and every event
 * counted here happens on that loop's thread (the modules that count run
 * nowhere else; libcurl's resolver thread counts nothing): the registry
 * takes no lock.
 *
 * Label values are never text from a client, a cell or an upstream. Each
 * label of a family takes its values either from a fixed list in
 * metrics.c (outcome, reason, code: a value not on the list is counted as
 * "other"), or from the policy (server, tool: the caller passes the
 * policy's own name, or a fixed stand-in such as "_other"). A family
 * keeps at most APPL_METRICS_SERIES_MAX label combinations; a count past
 * that, or one whose values are not exactly its labels (one missing, one
 * too many, an empty one or one over APPL_METRICS_LABEL_MAX bytes), goes
 * to the family's overflow series, whose every label is "_overflow" (a
 * family without labels has its one series only). So no input can grow
 * the registry without end.
 */
#ifndef APPL_METRICS_METRICS_H
#define APPL_METRICS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The families, in the order they are rendered. */
enum metrics_family {
	METRICS_CELLS,		   /* counter {outcome, reason} */
	METRICS_CELL_SECONDS,	   /* histogram, the runs that ran */
	METRICS_TOOL_CALLS,	   /* counter {server, tool, outcome} */
	METRICS_REFUSALS,	   /* counter {reason}: calls refused before they went */
	METRICS_APPROVALS,	   /* counter {outcome} */
	METRICS_LEDGER_CLAIMS,	   /* counter {outcome}: replicas' ledger (docs/scale-out.md) */
	METRICS_POOL_READY,	   /* gauge */
	METRICS_POOL_BOOTS,	   /* counter */
	METRICS_POOL_RESTORES,	   /* counter */
	METRICS_UPSTREAM_RESTARTS, /* counter {server} */
	METRICS_HTTP_REQUESTS,	   /* counter {code} */
	METRICS_AUDIT_LINES,	   /* counter */
	METRICS_AUDIT_SEALS,	   /* counter */
	METRICS_AUDIT_FAILURES,	   /* counter */
	METRICS_RELOADS,	   /* counter {outcome} */
	METRICS_SPANS,		   /* counter {outcome}: sent, lost */
	METRICS_TASKS,		   /* gauge: MCP tasks kept, working or ended */
	METRICS_TASK_BYTES,	   /* gauge: bytes of the tasks' results kept */
	METRICS_POLICY_SERIAL,	   /* gauge */
	METRICS_POLICY_EXPIRY,	   /* gauge */
	METRICS_FAMILIES
};

/* A series' label values, one per label of its family in order, the rest
 * NULL (borrowed; copied when the series is new). */
#define METRICS_LABELS_MAX 3
struct metrics_labels {
	const char *v[METRICS_LABELS_MAX];
};
#define METRICS_L(...) ((struct metrics_labels){{__VA_ARGS__}})

/* Add n to counter f's series l: exactly as many values as the family has
 * labels (none: METRICS_L(NULL)), else the overflow series. Not a
 * counter: nothing. metrics_count adds 1. */
void metrics_add(enum metrics_family f, uint64_t n, struct metrics_labels l);
#define metrics_count(f, ...) metrics_add((f), 1, METRICS_L(__VA_ARGS__))

/* Set gauge f (a family without labels) to v. Not a gauge: nothing. */
void metrics_set(enum metrics_family f, int64_t v);

/* A run ended: counted by outcome and reason, and, when it ran (a sandbox
 * ran its code), ms from its arrival to its answer observed by the
 * histogram. */
void metrics_cell(const char *outcome, const char *reason, bool ran, uint64_t ms);

/* An HTTP answer of the MCP endpoint's listeners, by status. */
void metrics_http(unsigned status);

/* A policy reload: ok (outcome "ok"), or refused ("refused"). */
void metrics_reload(bool ok);

/* The policy in force: its serial, and its expiry in unix seconds. */
void metrics_policy(uint64_t serial, int64_t expires);

/* Every family with a sample, in the text format: *text new (free), *len
 * its bytes. 0, or -ENOMEM / -E2BIG (over APPL_METRICS_TEXT_MAX) with
 * err. */
int metrics_render(char **text, size_t *len, struct appl_err *err);

/* Every series gone, every value 0: for the tests. */
void metrics_reset(void);

#endif
