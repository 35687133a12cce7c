/* metrics.c: the registry (see metrics.h): the families and the fixed
 * values of their labels, the series, and the text exposition format. */
#include "metrics/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABELS_MAX METRICS_LABELS_MAX
#define OTHER	   "other"
#define OVERFLOW   "_overflow"

enum kind { COUNTER, GAUGE, HISTOGRAM };

/* The fixed values of each label, "other" last: a value not on its list
 * is counted as "other", so these lists are every value a reader sees. */
static const char *const cell_outcomes[] = {"ok",      "error", "stopped", "not_run",
					    "refused", OTHER,	NULL};
static const char *const cell_reasons[] = {
	"none",	     "deadline",   "output",  "protocol",  "memory",	  "boot",    "exit",
	"cancelled", "internal",   "signal",  "waited",	   "no_result",	  "expired", "audit",
	"busy",	     "host_fault", "session", "arguments", "not_allowed", OTHER,     NULL};
static const char *const call_outcomes[] = {
	"ok",	     "tool_error",  "too_large", "bad_output", "malformed", "timeout", "error",
	"cancelled", "unavailable", "busy",	 "host_fault", "abandoned", OTHER,     NULL};
static const char *const refusal_reasons[] = {"not_allowed", "arguments", "schema", "unavailable",
					      "budget",	     "waiting",	  "audit",  "approval",
					      "host_fault",  OTHER,	  NULL};
static const char *const approval_outcomes[] = {"approved",    "declined", "timeout", "cancelled",
						"unavailable", OTHER,	   NULL};
static const char *const claim_outcomes[] = {"ours", "done", "unknown", "error", OTHER, NULL};
static const char *const http_codes[] = {"200", "202", "204", "400", "401", "403",
					 "404", "405", "406", "409", "413", "415",
					 "429", "500", "503", OTHER, NULL};
static const char *const reload_outcomes[] = {"ok", "refused", OTHER, NULL};
static const char *const span_outcomes[] = {"sent", "lost", OTHER, NULL};

struct family {
	const char *name, *help;
	enum kind kind;
	unsigned nlabels;
	const char *label[LABELS_MAX];
	/* Each label's fixed list; NULL: names from the policy, which the
	 * caller passes. */
	const char *const *values[LABELS_MAX];
	bool init; /* every value of its one label shown from the start, at 0 */
};

static const struct family families[METRICS_FAMILIES] = {
	[METRICS_CELLS] = {"appliance_cells_total",
			   "Runs (run_python calls) ended.",
			   COUNTER,
			   2,
			   {"outcome", "reason"},
			   {cell_outcomes, cell_reasons},
			   false},
	[METRICS_CELL_SECONDS] = {"appliance_cell_duration_seconds",
				  "Time from a run's arrival to its answer, of the runs that ran.",
				  HISTOGRAM,
				  0,
				  {NULL},
				  {NULL},
				  false},
	[METRICS_TOOL_CALLS] = {"appliance_tool_calls_total",
				"Tool calls and resource reads that went to a server, by how they "
				"ended.",
				COUNTER,
				3,
				{"server", "tool", "outcome"},
				{NULL, NULL, call_outcomes},
				false},
	[METRICS_REFUSALS] = {"appliance_tool_refusals_total",
			      "Tool calls the bridge refused before they went.",
			      COUNTER,
			      1,
			      {"reason"},
			      {refusal_reasons},
			      true},
	[METRICS_APPROVALS] = {"appliance_approvals_total",
			       "Approval questions, by their answer.",
			       COUNTER,
			       1,
			       {"outcome"},
			       {approval_outcomes},
			       true},
	[METRICS_LEDGER_CLAIMS] =
		{"appliance_ledger_claims_total",
		 "Approved calls claimed in the ledger replicas share, by what the "
		 "claim found.",
		 COUNTER,
		 1,
		 {"outcome"},
		 {claim_outcomes},
		 false},
	[METRICS_POOL_READY] = {"appliance_pool_ready",
				"Warm sandboxes ready to be taken.",
				GAUGE,
				0,
				{NULL},
				{NULL},
				false},
	[METRICS_POOL_BOOTS] = {"appliance_pool_boots_total",
				"Sandboxes booted.",
				COUNTER,
				0,
				{NULL},
				{NULL},
				false},
	[METRICS_POOL_RESTORES] = {"appliance_pool_restores_total",
				   "Sandboxes restored from a checkpoint.",
				   COUNTER,
				   0,
				   {NULL},
				   {NULL},
				   false},
	[METRICS_UPSTREAM_RESTARTS] = {"appliance_upstream_restarts_total",
				       "Starts of a server after its first.",
				       COUNTER,
				       1,
				       {"server"},
				       {NULL},
				       false},
	[METRICS_HTTP_REQUESTS] = {"appliance_http_requests_total",
				   "Answers of the MCP endpoint's HTTP listeners, by status.",
				   COUNTER,
				   1,
				   {"code"},
				   {http_codes},
				   false},
	[METRICS_AUDIT_LINES] = {"appliance_audit_lines_total",
				 "Lines written to the audit log.",
				 COUNTER,
				 0,
				 {NULL},
				 {NULL},
				 false},
	[METRICS_AUDIT_SEALS] = {"appliance_audit_seals_total",
				 "Seals written to the audit log.",
				 COUNTER,
				 0,
				 {NULL},
				 {NULL},
				 false},
	[METRICS_AUDIT_FAILURES] = {"appliance_audit_write_failures_total",
				    "Failed attempts to write the audit log.",
				    COUNTER,
				    0,
				    {NULL},
				    {NULL},
				    false},
	[METRICS_RELOADS] = {"appliance_reloads_total",
			     "Policy reloads, by outcome.",
			     COUNTER,
			     1,
			     {"outcome"},
			     {reload_outcomes},
			     true},
	[METRICS_SPANS] = {"appliance_spans_total",
			   "Spans for the telemetry collector, by outcome: sent (it took them) "
			   "or lost (the queue was full, the export failed).",
			   COUNTER,
			   1,
			   {"outcome"},
			   {span_outcomes},
			   false},
	[METRICS_TASKS] = {"appliance_tasks",
			   "MCP tasks kept for their clients, working or ended (not those gone).",
			   GAUGE,
			   0,
			   {NULL},
			   {NULL},
			   false},
	[METRICS_TASK_BYTES] = {"appliance_task_result_bytes",
				"Bytes of the results MCP tasks keep for their clients.",
				GAUGE,
				0,
				{NULL},
				{NULL},
				false},
	[METRICS_POLICY_SERIAL] = {"appliance_policy_serial",
				   "The serial of the policy in force.",
				   GAUGE,
				   0,
				   {NULL},
				   {NULL},
				   false},
	[METRICS_POLICY_EXPIRY] = {"appliance_policy_expiry_timestamp_seconds",
				   "When the policy in force expires, in unix seconds.",
				   GAUGE,
				   0,
				   {NULL},
				   {NULL},
				   false},
};

/* The histogram's upper bounds, in ms (rendered in seconds). */
static const uint64_t bucket_ms[] = {10,   25,	  50,	 100,	250,	500,	1000,  2500,
				     5000, 10000, 30000, 60000, 120000, 300000, 600000};
#define NBUCKETS (sizeof(bucket_ms) / sizeof(bucket_ms[0]))

struct series {
	uint64_t value;
	char label[LABELS_MAX][APPL_METRICS_LABEL_MAX + 1];
};

struct state {
	struct series **s;
	size_t n, cap;
	uint64_t overflow; /* the overflow series */
	uint64_t total;	   /* a counter without labels */
	int64_t gauge;
	bool set; /* the gauge has a value */
};

static struct state states[METRICS_FAMILIES];
static uint64_t hist_le[NBUCKETS], hist_count, hist_sum_ms;
static bool inited;

/* ---- counting ------------------------------------------------------------------ */

/* Label k's value of family fam for v: the fixed list's own text of it
 * (OTHER when it is not there), or for a policy label v itself when it
 * fits; NULL: overflow. */
static const char *value_of(const struct family *fam, unsigned k, const char *v)
{
	const char *const *list = fam->values[k];
	size_t i;

	if (!v)
		return NULL;
	if (!list)
		return v[0] && strnlen(v, APPL_METRICS_LABEL_MAX + 1) <= APPL_METRICS_LABEL_MAX
			       ? v
			       : NULL;
	for (i = 0; list[i] && strcmp(list[i], v) != 0; i++)
		;
	return list[i] ? list[i] : OTHER;
}

static struct series *series_find(const struct state *s, unsigned n, const char *const *v)
{
	for (size_t i = 0; i < s->n; i++) {
		unsigned k = 0;

		while (k < n && strcmp(s->s[i]->label[k], v[k]) == 0)
			k++;
		if (k == n)
			return s->s[i];
	}
	return NULL;
}

/* A new series, or NULL when the family is full or memory is short. */
static struct series *series_new(struct state *s, unsigned n, const char *const *v)
{
	struct series *x;

	if (s->n >= APPL_METRICS_SERIES_MAX)
		return NULL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct series **p = realloc(s->s, cap * sizeof(*p));

		if (!p)
			return NULL;
		s->s = p;
		s->cap = cap;
	}
	if (!(x = calloc(1, sizeof(*x))))
		return NULL;
	for (unsigned k = 0; k < n; k++)
		memcpy(x->label[k], v[k], strlen(v[k]) + 1); /* value_of checked the length */
	s->s[s->n++] = x;
	return x;
}

/* Add n to f's series v (NULL: its overflow series). */
static void count(enum metrics_family f, const char *const *v, uint64_t n)
{
	const struct family *fam = &families[f];
	struct state *s = &states[f];
	struct series *x = NULL;

	if (fam->nlabels == 0) {
		s->total += n;
		return;
	}
	if (v && !(x = series_find(s, fam->nlabels, v)))
		x = series_new(s, fam->nlabels, v);
	if (x)
		x->value += n;
	else
		s->overflow += n;
}

/* The families whose values are all known show each at 0 from the start,
 * so a rate over them is defined before the first event. */
static void init_once(void)
{
	if (inited)
		return;
	inited = true;
	for (unsigned f = 0; f < METRICS_FAMILIES; f++) {
		const struct family *fam = &families[f];

		for (size_t i = 0; fam->init && fam->values[0][i]; i++)
			if (strcmp(fam->values[0][i], OTHER) != 0)
				count((enum metrics_family)f, &fam->values[0][i], 0);
	}
}

/* The family's labels from l: true when exactly its first nlabels values
 * are there, each one it can count under (v: what is counted). */
static bool labels_take(const struct family *fam, const struct metrics_labels *l, const char **v)
{
	for (unsigned k = 0; k < LABELS_MAX; k++) {
		if ((k < fam->nlabels) != (l->v[k] != NULL))
			return false;
		if (k < fam->nlabels && !(v[k] = value_of(fam, k, l->v[k])))
			return false;
	}
	return true;
}

void metrics_add(enum metrics_family f, uint64_t n, struct metrics_labels l)
{
	const char *v[LABELS_MAX] = {NULL};

	if ((unsigned)f >= METRICS_FAMILIES || families[f].kind != COUNTER)
		return;
	init_once();
	count(f, labels_take(&families[f], &l, v) ? v : NULL, n);
}

void metrics_set(enum metrics_family f, int64_t v)
{
	if ((unsigned)f >= METRICS_FAMILIES || families[f].kind != GAUGE)
		return;
	states[f].gauge = v;
	states[f].set = true;
}

void metrics_cell(const char *outcome, const char *reason, bool ran, uint64_t ms)
{
	metrics_count(METRICS_CELLS, outcome, reason);
	if (!ran)
		return;
	for (size_t i = 0; i < NBUCKETS; i++)
		if (ms <= bucket_ms[i])
			hist_le[i]++;
	hist_count++;
	hist_sum_ms += ms;
}

void metrics_http(unsigned status)
{
	char code[16];

	snprintf(code, sizeof(code), "%u", status);
	metrics_count(METRICS_HTTP_REQUESTS, code);
}

void metrics_reload(bool ok)
{
	metrics_count(METRICS_RELOADS, ok ? "ok" : "refused");
}

void metrics_policy(uint64_t serial, int64_t expires)
{
	/* Serials are at most INT64_MAX (policy.c); the format's values are
	 * floats anyway. */
	metrics_set(METRICS_POLICY_SERIAL, serial > INT64_MAX ? INT64_MAX : (int64_t)serial);
	metrics_set(METRICS_POLICY_EXPIRY, expires);
}

void metrics_reset(void)
{
	for (unsigned f = 0; f < METRICS_FAMILIES; f++) {
		for (size_t i = 0; i < states[f].n; i++)
			free(states[f].s[i]);
		free(states[f].s);
		memset(&states[f], 0, sizeof(states[f]));
	}
	memset(hist_le, 0, sizeof(hist_le));
	hist_count = hist_sum_ms = 0;
	inited = false;
}

/* ---- the text format -------------------------------------------------------------- */

struct out {
	char *p;
	size_t len, cap;
	int rc; /* the first failure; nothing is added after it */
};

static void out_grow(struct out *o, size_t need)
{
	size_t cap = o->cap ? o->cap : 4096;
	char *p;

	if (need > APPL_METRICS_TEXT_MAX) {
		o->rc = -E2BIG;
		return;
	}
	while (cap < need)
		cap *= 2;
	if (cap > APPL_METRICS_TEXT_MAX)
		cap = APPL_METRICS_TEXT_MAX;
	if (!(p = realloc(o->p, cap))) {
		o->rc = -ENOMEM;
		return;
	}
	o->p = p;
	o->cap = cap;
}

static void out_bytes(struct out *o, const char *s, size_t n)
{
	if (o->rc == 0 && o->len + n + 1 > o->cap)
		out_grow(o, o->len + n + 1);
	if (o->rc)
		return;
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s)
{
	out_bytes(o, s, strlen(s));
}

static void out_u64(struct out *o, uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "%" PRIu64, v);
	out_str(o, b);
}

/* A text escaped as the format asks: backslash and newline (HELP), and
 * the double quote too (a label value). Other control bytes and bytes
 * past ASCII become '?', so the page is one line per sample in ASCII
 * whatever a caller passed. */
static void out_escaped(struct out *o, const char *s, bool quote)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\')
			out_str(o, "\\\\");
		else if (c == '\n')
			out_str(o, "\\n");
		else if (c == '"' && quote)
			out_str(o, "\\\"");
		else if (c < 0x20 || c >= 0x7f)
			out_str(o, "?");
		else
			out_bytes(o, s, 1);
	}
}

/* ms as seconds, exactly: "0.025", "1", "2.5". */
static void out_seconds(struct out *o, uint64_t ms)
{
	char b[32];
	int n = snprintf(b, sizeof(b), "%" PRIu64 ".%03u", ms / 1000, (unsigned)(ms % 1000));

	while (n > 0 && b[n - 1] == '0')
		b[--n] = '\0';
	if (n > 0 && b[n - 1] == '.')
		b[--n] = '\0';
	out_str(o, b);
}

static void out_head(struct out *o, const struct family *fam)
{
	static const char *const kinds[] = {
		[COUNTER] = "counter", [GAUGE] = "gauge", [HISTOGRAM] = "histogram"};

	out_str(o, "# HELP ");
	out_str(o, fam->name);
	out_str(o, " ");
	out_escaped(o, fam->help, false);
	out_str(o, "\n# TYPE ");
	out_str(o, fam->name);
	out_str(o, " ");
	out_str(o, kinds[fam->kind]);
	out_str(o, "\n");
}

/* name{l1="v1",...} value; v NULL: every label "_overflow". */
static void out_sample(struct out *o, const struct family *fam,
		       const char (*v)[APPL_METRICS_LABEL_MAX + 1], uint64_t value)
{
	out_str(o, fam->name);
	for (unsigned k = 0; k < fam->nlabels; k++) {
		out_str(o, k ? "," : "{");
		out_str(o, fam->label[k]);
		out_str(o, "=\"");
		out_escaped(o, v ? v[k] : OVERFLOW, true);
		out_str(o, "\"");
	}
	out_str(o, fam->nlabels ? "} " : " ");
	out_u64(o, value);
	out_str(o, "\n");
}

static void render_counter(struct out *o, enum metrics_family f)
{
	const struct family *fam = &families[f];
	const struct state *s = &states[f];

	if (fam->nlabels && s->n == 0 && s->overflow == 0)
		return;
	out_head(o, fam);
	if (!fam->nlabels) {
		out_sample(o, fam, NULL, s->total);
		return;
	}
	for (size_t i = 0; i < s->n; i++)
		out_sample(o, fam, s->s[i]->label, s->s[i]->value);
	if (s->overflow)
		out_sample(o, fam, NULL, s->overflow);
}

static void render_gauge(struct out *o, enum metrics_family f)
{
	char b[24];

	if (!states[f].set)
		return;
	out_head(o, &families[f]);
	snprintf(b, sizeof(b), " %" PRId64 "\n", states[f].gauge);
	out_str(o, families[f].name);
	out_str(o, b);
}

static void render_histogram(struct out *o, enum metrics_family f)
{
	const char *name = families[f].name;

	out_head(o, &families[f]);
	for (size_t i = 0; i <= NBUCKETS; i++) {
		out_str(o, name);
		out_str(o, "_bucket{le=\"");
		if (i < NBUCKETS)
			out_seconds(o, bucket_ms[i]);
		else
			out_str(o, "+Inf");
		out_str(o, "\"} ");
		out_u64(o, i < NBUCKETS ? hist_le[i] : hist_count);
		out_str(o, "\n");
	}
	out_str(o, name);
	out_str(o, "_sum ");
	out_seconds(o, hist_sum_ms);
	out_str(o, "\n");
	out_str(o, name);
	out_str(o, "_count ");
	out_u64(o, hist_count);
	out_str(o, "\n");
}

int metrics_render(char **text, size_t *len, struct appl_err *err)
{
	static void (*const render[])(struct out *, enum metrics_family) = {
		[COUNTER] = render_counter, [GAUGE] = render_gauge, [HISTOGRAM] = render_histogram};
	struct out o = {0};

	init_once();
	out_grow(&o, 1);
	for (unsigned f = 0; f < METRICS_FAMILIES && o.rc == 0; f++)
		render[families[f].kind](&o, (enum metrics_family)f);
	*text = NULL;
	*len = 0;
	if (o.rc) {
		free(o.p);
		if (o.rc == -E2BIG)
			return appl_err_set(err, o.rc, "metrics: the page is over %u bytes",
					    APPL_METRICS_TEXT_MAX);
		return appl_err_set(err, o.rc, "metrics: out of memory");
	}
	o.p[o.len] = '\0';
	*text = o.p;
	*len = o.len;
	return 0;
}
