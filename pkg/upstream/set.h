/* set.h: every upstream server of a policy, by name: started
 * together, woken when work arrives, called, read and cancelled by server
 * name (pkg/bridge sends each allowed call here, with no owner in between).
 */
#ifndef APPL_UPSTREAM_SET_H
#define APPL_UPSTREAM_SET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "loop/loop.h"
#include "upstream/upstream.h"
#include "policy/policy.h"

struct upstream_set;

/* Told to the owner, from the loop. why is for the log. May be NULL. */
typedef void (*upstream_set_changed_fn)(void *data, const char *why);

/* Start every server of p (borrowed; must outlive the set) in loop,
 * each answer capped at opts->result_max, and run the loop until each is
 * ready or had APPL_UPSTREAM_INIT_TIMEOUT_MS (they start together, so the
 * wait is the slowest one's). A server that does not come up is logged and
 * offers no tools until it does. changed(data) is called whenever a
 * server's tool list may have changed after this returned (a restart, a
 * list_changed). New set, or NULL with err (-ENOMEM, -EMFILE, a bad
 * server). */
struct upstream_set *upstream_set_open(struct loop *loop, const struct policy *p,
				       const struct upstream_opts *opts,
				       upstream_set_changed_fn changed, void *data,
				       struct appl_err *err);

/* upstream_set_open without a changed hook, except that a server that
 * cannot be set up (its command cannot be run as its user, it lies under a
 * hidden path, ...) is left out of the set instead of failing it, with why
 * kept for upstream_set_failed; only running out of memory fails it. For
 * `appliance init`, which reports each server it could not start. */
struct upstream_set *upstream_set_open_each(struct loop *loop, const struct policy *p,
					    const struct upstream_opts *opts, struct appl_err *err);

/* The i-th server upstream_set_open_each left out: its name, and why into
 * *why (both borrowed from s); NULL past the last. */
const char *upstream_set_failed(const struct upstream_set *s, size_t i, const char **why);

/* A reload: a set for p that shares with cur (made for cur_p; borrowed)
 * each server p configures as cur_p did (same name, same settings, so it
 * keeps running and keeps its session) and starts the others (added or
 * changed) in loop, waiting for each to be ready. cur is left as it was:
 * its runs go on calling its servers, and a server it alone holds stops
 * when it is freed. changed is cur's. New set, or NULL with err naming the
 * first server that did not start, or one whose headers need a value from
 * the environment (read only at start). */
struct upstream_set *upstream_set_derive(struct upstream_set *cur, const struct policy *cur_p,
					 const struct policy *p, const struct upstream_opts *opts,
					 struct loop *loop, struct appl_err *err);

/* How many of s's servers old does not run (started for s). */
size_t upstream_set_started(const struct upstream_set *s, const struct upstream_set *old);

/* Stop every server (pending calls are cancelled). Safe on NULL; never
 * from a callback. */
void upstream_set_free(struct upstream_set *s);

size_t upstream_set_count(const struct upstream_set *s);
const struct upstream *upstream_set_get(const struct upstream_set *s, size_t i);

/* Restart each server that is down (work has arrived). */
void upstream_set_wake(struct upstream_set *s);

/* Call server.tool(args) as upstream_call_traced does (traceparent may be
 * NULL), for the run log_id (for log lines; may be NULL). -EAGAIN also
 * when no server has that name. */
int upstream_set_call(struct upstream_set *s, const char *server, const char *tool,
		      const json_t *args, unsigned timeout_ms, const char *traceparent,
		      upstream_result_cb cb, void *ctx, uint64_t *call_id, const char *log_id);

/* Read server's resource at uri as upstream_read does, for the run log_id
 * (for log lines; may be NULL; the uri is never logged). -EAGAIN also when
 * no server has that name. */
int upstream_set_read(struct upstream_set *s, const char *server, const char *uri,
		      unsigned timeout_ms, upstream_result_cb cb, void *ctx, uint64_t *call_id,
		      const char *log_id);

/* upstream_call_cancel on server's upstream, for a call or a read; an
 * unknown name is ignored. */
void upstream_set_cancel(struct upstream_set *s, const char *server, uint64_t call_id);

#endif
