/* gateway.h: `appliance run`: the MCP server over stdio or HTTP, serving
 * run_python from a verified policy. Each call gets a fresh sandbox; at most
 * limits.cells run at once, the rest wait their turn with their deadline
 * already running (it counts from arrival), the clients taking turns for
 * free slots (admit.h). Once the policy has expired no
 * new cell starts. SIGTERM, SIGINT, SIGHUP and the end of the client's
 * input stop every cell and destroy every sandbox (input read from a file
 * is a script: its runs finish first). */
#ifndef APPL_GATEWAY_GATEWAY_H
#define APPL_GATEWAY_GATEWAY_H

#include <stdio.h>

#include "base/err.h"
#include "cell/cell.h"
#include "policy/load.h"
#include "policy/policy.h"
#include "sandbox/ociconfig.h"

struct upstream_secrets;

struct gateway_config {
	const struct policy *policy; /* verified; borrowed */
	const char *cache;	     /* image cache; NULL: the default */
	const char *run_dir;	     /* runsc instances; NULL: the default */
	int in_fd, out_fd;	     /* the client's stdio */
	/* For the audit log (when the policy has one): what was verified, and
	 * the state directory that holds the log's head and keys. */
	const struct policy_verified *verified;
	const char *state_dir;
	/* Paths hidden from the upstream servers besides the defaults and the
	 * audit log (proc/confine.h): the policy file, the trust and state
	 * directories. NULL-ended; may be NULL. */
	const char *const *hide;
	/* The values of the HTTP servers' headers (upstream_secrets_take;
	 * borrowed; may be NULL), wiped once the servers are made. */
	struct upstream_secrets *secrets;
	/* Called once everything checked at start has passed (the image
	 * verified, the sandbox runtime open, the servers started): before
	 * the first request is read over HTTP, before the first request that
	 * needs the tools is answered over stdio (gateway_run). Where `run`
	 * records the policy's serial. Non-zero stops the start with err. May
	 * be NULL. */
	int (*on_started)(void *data, struct appl_err *err);
	void *data;
};

/* Split a policy's limits into what the sandbox gets (oci; rootfs left as
 * it was) and what the run gets (cell): the one mapping from policy limits
 * to the running parts, for `run` and `cell --policy` alike. */
void gateway_limits_split(const struct policy_limits *l, struct sandbox_oci_params *oci,
			  struct cell_limits *cell);

/* Serve until the client goes away or a signal comes. Over HTTP
 * everything starts first; over stdio the image, the sandbox runtime, the
 * audit log, the servers and the pool start when the first request that
 * needs the tools comes (tools/list, tools/call), which waits for them and
 * gets the reason as its error when they fail. Input read from a file ends
 * when its runs have finished. Returns 0, or a negative code with err
 * filled when serving could not start. */
int gateway_run(const struct gateway_config *cfg, struct appl_err *err);

/* `appliance stubs`: start the policy's servers, build what role (NULL:
 * the stdio client's) may call, and write run_python's description, every
 * stub, and each tool not offered with why, to out (secrets as
 * gateway_config.secrets). 0, or negative with err (-EINVAL: no such
 * role). */
/* What every upstream server is confined by (proc/confine.h): the system
 * call filter, and the paths hidden from it: the defaults, extra
 * (NULL-ended; may be NULL: the policy file, trust and state directories),
 * the policy's audit log and its rotated files, run_dir (may be NULL). For
 * `run`, `stubs` and `check` alike. */
#define GATEWAY_HIDE_MAX 56
struct proc_filter;
struct upstream_opts;
struct gateway_confine {
	struct proc_filter *filter;
	const char *hide[GATEWAY_HIDE_MAX + 1];
	char *owned[GATEWAY_HIDE_MAX]; /* the entries made here */
	size_t n, nowned;
};
int gateway_confine_prepare(struct gateway_confine *c, const struct policy *p,
			    const char *const *extra, const char *run_dir, struct appl_err *err);
/* Point o at c (which must outlive the servers started with o). */
void gateway_confine_opts(const struct gateway_confine *c, struct upstream_opts *o);
void gateway_confine_release(struct gateway_confine *c);

int gateway_stubs(const struct policy *policy, const char *role, struct upstream_secrets *secrets,
		  FILE *out, struct appl_err *err);

/* `appliance init`: start each server of p (borrowed) once, confined as run
 * confines them (hide: as extra for gateway_confine_prepare), each on its
 * own, and tell what came of each, in p's order: found(data, name, u, NULL)
 * with u (borrowed for the call) when it listed its tools, else
 * found(data, name, NULL, why) with why it did not (a command that cannot
 * be run as its user, an exit, a timeout...; not naming the server). 0
 * once each was told, or
 * negative with err when none could be tried. */
struct upstream;
typedef void (*gateway_found_fn)(void *data, const char *name, const struct upstream *u,
				 const char *why);
int gateway_servers_try(const struct policy *p, const char *const *hide, gateway_found_fn found,
			void *data, struct appl_err *err);

/* `appliance check`: open the policy's HTTP front as `run` opens it (its
 * TLS certificate and key loaded, every listener bound) and close it again.
 * 0, or what `run` would fail with. */
int gateway_http_try(const struct policy *p, struct appl_err *err);

/* `appliance check`: judge the policy's audit log (state_dir holds its
 * head and keys) as `run` judges it at its start, writing nothing
 * (audit_check). 0 without an audit log. */
int gateway_audit_check(const struct policy *p, const char *state_dir, struct appl_err *err);

#endif
