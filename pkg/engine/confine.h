/* confine.h: what every upstream server is confined by (proc/confine.h):
 * the system call filter, and the paths hidden from it: the defaults,
 * extra (NULL-ended; may be NULL: the policy file, trust and state
 * directories), the policy's audit log and its rotated files, run_dir (may
 * be NULL). For every command that starts servers. */
#ifndef APPL_ENGINE_CONFINE_H
#define APPL_ENGINE_CONFINE_H

#include <stddef.h>

#include "base/err.h"
#include "policy/policy.h"

#define ENGINE_HIDE_MAX 56

struct proc_filter;
struct upstream;
struct upstream_opts;
struct engine_confine {
	struct proc_filter *filter;
	const char *hide[ENGINE_HIDE_MAX + 1];
	char *owned[ENGINE_HIDE_MAX]; /* the entries made here */
	size_t n, nowned;
};

/* name: the appliance's (run --name; NULL: the policy's default), whose
 * audit log is hidden from the servers. */
int engine_confine_prepare(struct engine_confine *c, const struct policy *p, const char *name,
			   const char *const *extra, const char *run_dir, struct appl_err *err);
/* Point o at c (which must outlive the servers started with o). */
void engine_confine_opts(const struct engine_confine *c, struct upstream_opts *o);
void engine_confine_release(struct engine_confine *c);

/* `appliance init`: start each server of p (borrowed) once, confined as
 * run confines them (hide: as engine_config's), each on its own, and tell
 * what came of each, in p's order: found(data, name, u, NULL) with u
 * (borrowed for the call) when it listed its tools, else found(data, name,
 * NULL, why). 0 once each was told, or negative with err when none could
 * be tried. */
typedef void (*engine_found_fn)(void *data, const char *name, const struct upstream *u,
				const char *why);
int engine_servers_try(const struct policy *p, const char *const *hide, engine_found_fn found,
		       void *data, struct appl_err *err);

#endif
