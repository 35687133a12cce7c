/* diff.c: what a reload may change (see policy.h, "comparing two
 * policies"). Pure: both documents are already verified and parsed. */
#include <stdio.h>
#include <string.h>

#include "policy/internal.h"
#include "policy/policy.h"

/* top[key], or top itself for a NULL key; NULL when absent. */
static const json_t *part(const struct policy *p, const char *top, const char *key)
{
	const json_t *v = json_object_get(p->root, top);

	return key && v ? json_object_get(v, key) : v;
}

bool policy_part_same(const struct policy *a, const struct policy *b, const char *top,
		      const char *key)
{
	const json_t *x = part(a, top, key), *y = part(b, top, key);

	return (!x && !y) || (x && y && json_equal(x, y));
}

/* Whether every member of a's `http` but `oauth` is in b's, the same;
 * both absent counts. */
static bool http_members_in(const struct policy *a, const struct policy *b)
{
	const json_t *x = part(a, "http", NULL), *y = part(b, "http", NULL), *v;
	const char *k;

	if (!x || !y)
		return !x && !y;
	json_object_foreach((json_t *)x, k, v)
		if (strcmp(k, "oauth") != 0 && !policy_part_same(a, b, "http", k))
			return false;
	return true;
}

/* The limits read once, by the parts made at start. */
#define RESTART_LIMITS(X)                                                                          \
	X(audit_seal_lines)                                                                        \
	X(audit_seal_s)                                                                            \
	X(audit_rotate_kb)                                                                         \
	X(http_connections)                                                                        \
	X(http_sessions_per_token)                                                                 \
	X(http_body_kb)                                                                            \
	X(http_idle_s)                                                                             \
	X(http_slow_s)

static const char *limit_restart(const struct policy *a, const struct policy *b)
{
#define SAME(f)                                                                                    \
	if (a->limits.f != b->limits.f)                                                            \
		return "limits." #f;
	RESTART_LIMITS(SAME)
#undef SAME
	return NULL;
}

const char *policy_reload_restart(const struct policy *a, const struct policy *b)
{
	/* The sandbox runtime, the audit log, the HTTP front's listeners and
	 * the span exporter are opened once; a reload that changed them would be a policy the
	 * running appliance does not honour. */
	static const char *const tops[] = {"runtime", "audit", "telemetry", "cluster"};
	const char *lim = limit_restart(a, b);

	if (a->version != b->version)
		return "version";
	if (strcmp(a->deployment, b->deployment) != 0)
		return "deployment";
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++)
		if (!policy_part_same(a, b, tops[i], NULL))
			return tops[i];
	/* http.oauth is read again at each reload (its keys too) */
	if (!http_members_in(a, b) || !http_members_in(b, a))
		return "http";
	/* The start proves that each preloaded module imports (it waits for a
	 * warm sandbox); a reload boots none before it commits. */
	if ((a->preload || b->preload) && !policy_part_same(a, b, "image", NULL))
		return "image (with image.preload)";
	return lim;
}
