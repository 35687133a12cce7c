/* stubs.c: building the names and stubs of a tool list (see stubs.h). */
#include "stubs/stubs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/proto.h"
#include "stubs/internal.h"

#define NAME_CAP APPL_RUNNER_PY_NAME_MAX

struct stubs {
	struct stub_entry *e; /* sorted by ns, then fn */
	size_t n;
	char **unavailable; /* servers not available now, sorted */
	size_t nunavailable;
};

/* ---- checking one tool ------------------------------------------------------------ */

/* A name shown to the model and routed on: UTF-8, no control characters
 * (they could forge a line of a listing or a log). */
static int text_check(const char *what, const char *s, struct appl_err *err)
{
	size_t n = s ? strnlen(s, APPL_RUNNER_TOOL_NAME_MAX + 1) : 0;

	if (n == 0 || n > APPL_RUNNER_TOOL_NAME_MAX)
		return appl_err_set(err, -EINVAL, "tool %s: empty or longer than %u bytes", what,
				    APPL_RUNNER_TOOL_NAME_MAX);
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t len = utf8_next(s + i, n - i, &c);
		if ((c == 0xFFFD && len == 1) || c < 0x20 || (c >= 0x7F && c <= 0x9F))
			return appl_err_set(err, -EINVAL,
					    "tool %s \"%.64s\": not UTF-8, or a control character",
					    what, s);
		i += len;
	}
	return 0;
}

int stubs_tool_check(const struct stubs_tool *t, struct appl_err *err)
{
	int rc;

	if (!t)
		return appl_err_set(err, -EINVAL, "no tool");
	rc = text_check("server", t->server, err);
	if (rc == 0)
		rc = text_check("name", t->name, err);
	if (rc == 0 && strlen(t->server) + 1 + strlen(t->name) > APPL_RUNNER_TOOL_NAME_MAX)
		rc = appl_err_set(err, -EINVAL, "tool \"%.64s.%.64s\": longer than %u bytes",
				  t->server, t->name, APPL_RUNNER_TOOL_NAME_MAX);
	return rc;
}

/* ---- order -------------------------------------------------------------------------- */

static int by_source(const void *a, const void *b)
{
	const struct stub_entry *x = a, *y = b;
	int c = strcmp(x->src->server, y->src->server);

	return c ? c : strcmp(x->src->name, y->src->name);
}

static int by_python(const void *a, const void *b)
{
	const struct stub_entry *x = a, *y = b;
	int c = strcmp(x->ns, y->ns);

	return c ? c : strcmp(x->fn, y->fn);
}

/* ---- names -------------------------------------------------------------------------- */

typedef char pyname[NAME_CAP + 1];

/* Settle the names of e[0..n) as kind: from their servers (NAME_NS) or
 * their tool names (NAME_FN, inside namespace ns). */
static int settle(struct stub_entry **e, size_t n, enum name_kind kind, const char *ns)
{
	const char **orig = calloc(n ? n : 1, sizeof(*orig));
	pyname *bases = calloc(n ? n : 1, sizeof(*bases));
	pyname *out = calloc(n ? n : 1, sizeof(*out));
	int rc = -ENOMEM;

	if (orig && bases && out) {
		for (size_t i = 0; i < n; i++) {
			orig[i] = kind == NAME_NS ? e[i]->src->server : e[i]->src->name;
			name_mangle(orig[i], kind, bases[i]);
		}
		rc = names_settle(orig, bases, n, kind, ns, out);
	}
	for (size_t i = 0; rc == 0 && i < n; i++)
		memcpy(kind == NAME_NS ? e[i]->ns : e[i]->fn, out[i], sizeof(out[i]));
	free(orig);
	free(bases);
	free(out);
	return rc;
}

/* Namespaces: one per distinct server (e is sorted by server), then the
 * tools of each server among themselves. */
static int names_assign(struct stub_entry *e, size_t n)
{
	struct stub_entry **first = calloc(n ? n : 1, sizeof(*first));
	size_t ns = 0;
	int rc;

	if (!first)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(e[i].src->server, e[i - 1].src->server) != 0)
			first[ns++] = &e[i];
	rc = settle(first, ns, NAME_NS, NULL);
	for (size_t i = 0, g = 0; rc == 0 && i < n; i = g) {
		size_t k = 0;
		for (g = i; g < n && strcmp(e[g].src->server, e[i].src->server) == 0; g++) {
			memcpy(e[g].ns, e[i].ns, sizeof(e[g].ns));
			first[k++] = &e[g];
		}
		rc = settle(first, k, NAME_FN, e[i].ns);
	}
	free(first);
	return rc;
}

/* ---- stubs -------------------------------------------------------------------------- */

static size_t docs_total(const struct stub_entry *e, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += strlen(e[i].text);
	return total;
}

/* All stubs travel in one cell line: while they pass
 * APPL_STUBS_DOCS_TOTAL_MAX, those above an even share lose a level of
 * detail. The least detailed stub is far below the share of
 * APPL_RUNNER_TOOLS_MAX tools, so this ends. */
static int docs_budget(struct stub_entry *e, size_t n)
{
	while (n && docs_total(e, n) > APPL_STUBS_DOCS_TOTAL_MAX) {
		size_t share = APPL_STUBS_DOCS_TOTAL_MAX / n;
		bool changed = false;
		for (size_t i = 0; i < n; i++) {
			int rc;
			if (strlen(e[i].text) <= share || e[i].level + 1 >= STUB_LEVELS)
				continue;
			e[i].level++;
			rc = stub_make(&e[i]);
			if (rc < 0)
				return rc;
			changed = true;
		}
		if (!changed)
			return -E2BIG;
	}
	return 0;
}

static int entries_make(struct stub_entry *e, size_t n)
{
	int rc = names_assign(e, n);

	for (size_t i = 0; rc == 0 && i < n; i++) {
		/* both parts checked: at most APPL_RUNNER_TOOL_NAME_MAX bytes */
		size_t len = strlen(e[i].src->server) + 1 + strlen(e[i].src->name) + 1;
		e[i].mcp = malloc(len);
		if (!e[i].mcp)
			return -ENOMEM;
		snprintf(e[i].mcp, len, "%s.%s", e[i].src->server, e[i].src->name);
		if (e[i].src->why_not && !(e[i].why_not = strdup(e[i].src->why_not)))
			return -ENOMEM;
		rc = stub_make(&e[i]);
	}
	return rc == 0 ? docs_budget(e, n) : rc;
}

static int entries_check(const struct stubs_tool *tools, size_t n, struct appl_err *err)
{
	if (n > APPL_RUNNER_TOOLS_MAX)
		return appl_err_set(err, -E2BIG, "%zu tools, more than %u", n,
				    APPL_RUNNER_TOOLS_MAX);
	if (n && !tools)
		return appl_err_set(err, -EINVAL, "no tools given");
	for (size_t i = 0; i < n; i++) {
		int rc = stubs_tool_check(&tools[i], err);
		if (rc < 0)
			return appl_err_prefix(err, "tools[%zu]", i);
	}
	return 0;
}

static int duplicates_check(const struct stub_entry *e, size_t n, struct appl_err *err)
{
	for (size_t i = 1; i < n; i++)
		if (by_source(&e[i - 1], &e[i]) == 0)
			return appl_err_set(err, -EINVAL, "tool \"%.64s.%.64s\" given twice",
					    e[i].src->server, e[i].src->name);
	return 0;
}

int stubs_build(const struct stubs_tool *tools, size_t n, struct stubs **out, struct appl_err *err)
{
	struct stubs *s;
	int rc;

	*out = NULL;
	rc = entries_check(tools, n, err);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s)
		s->e = calloc(n ? n : 1, sizeof(*s->e));
	if (!s || !s->e) {
		free(s);
		return appl_err_set(err, -ENOMEM, "stubs: out of memory");
	}
	s->n = n;
	for (size_t i = 0; i < n; i++)
		s->e[i].src = &tools[i];
	/* Everything below reads the tools in this order only, so the result
	 * is the same whatever order they came in. */
	qsort(s->e, n, sizeof(*s->e), by_source);
	rc = duplicates_check(s->e, n, err);
	if (rc == 0 && (rc = entries_make(s->e, n)) < 0)
		appl_err_set(err, rc, "stubs: %s", rc == -ENOMEM ? "out of memory" : "too large");
	for (size_t i = 0; i < n; i++)
		s->e[i].src = NULL; /* borrowed for the build only */
	if (rc < 0) {
		stubs_free(s);
		return rc;
	}
	qsort(s->e, n, sizeof(*s->e), by_python);
	*out = s;
	return 0;
}

void stubs_free(struct stubs *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		free(s->e[i].mcp);
		free(s->e[i].text);
		free(s->e[i].summary);
		free(s->e[i].signature);
		free(s->e[i].why_not);
		free(s->e[i].returns);
	}
	for (size_t i = 0; i < s->nunavailable; i++)
		free(s->unavailable[i]);
	free(s->unavailable);
	free(s->e);
	free(s);
}

/* ---- accessors ---------------------------------------------------------------------- */

size_t stubs_count(const struct stubs *s)
{
	return s ? s->n : 0;
}

static const struct stub_entry *entry(const struct stubs *s, size_t i)
{
	return s && i < s->n ? &s->e[i] : NULL;
}

const char *stubs_ns(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->ns : NULL;
}

const char *stubs_fn(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->fn : NULL;
}

const char *stubs_mcp_name(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->mcp : NULL;
}

const char *stubs_text(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->text : NULL;
}

const char *stubs_summary(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->summary : NULL;
}

const char *stubs_signature(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->signature : NULL;
}

const char *stubs_why_not(const struct stubs *s, size_t i)
{
	return entry(s, i) ? entry(s, i)->why_not : NULL;
}

const char *stubs_returns(const struct stubs *s, size_t i)
{
	const struct stub_entry *e = entry(s, i);

	return e ? (e->returns ? e->returns : "") : NULL;
}

size_t stubs_offered_count(const struct stubs *s)
{
	size_t n = 0;

	for (size_t i = 0; s && i < s->n; i++)
		n += !s->e[i].why_not;
	return n;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int stubs_set_unavailable(struct stubs *s, const char *const *servers, size_t n)
{
	char **list = calloc(n ? n : 1, sizeof(*list));

	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (!(list[i] = strdup(servers[i]))) {
			while (i--)
				free(list[i]);
			free(list);
			return -ENOMEM;
		}
	qsort(list, n, sizeof(*list), str_cmp);
	for (size_t i = 0; i < s->nunavailable; i++)
		free(s->unavailable[i]);
	free(s->unavailable);
	s->unavailable = list;
	s->nunavailable = n;
	return 0;
}

size_t stubs_unavailable_count(const struct stubs *s)
{
	return s ? s->nunavailable : 0;
}

const char *stubs_unavailable_get(const struct stubs *s, size_t i)
{
	return s && i < s->nunavailable ? s->unavailable[i] : NULL;
}

json_t *stubs_runner_tools(const struct stubs *s, struct appl_err *err)
{
	json_t *arr = json_array();

	if (!arr) {
		appl_err_set(err, -ENOMEM, "stubs: out of memory");
		return NULL;
	}
	for (size_t i = 0; s && i < s->n; i++) {
		const struct stub_entry *e = &s->e[i];
		json_t *t = cell_proto_tool_new(e->mcp, e->ns, e->fn, e->text, err);
		if (t && e->why_not && json_object_set_new(t, "off", json_string(e->why_not)) < 0) {
			json_decref(t);
			t = NULL;
			appl_err_set(err, -ENOMEM, "stubs: out of memory");
		}
		if (!t || json_array_append_new(arr, t) < 0) {
			json_decref(arr);
			if (t)
				appl_err_set(err, -ENOMEM, "stubs: out of memory");
			return NULL;
		}
	}
	return arr;
}
