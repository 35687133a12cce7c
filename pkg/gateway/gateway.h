/* gateway.h: `appliance run`: the MCP server over stdio or HTTP, serving
 * run_python from a verified policy on the engine (engine/engine.h): each
 * call becomes a run (run/run.h) with a fresh sandbox; at most
 * limits.cells run at once, the rest wait their turn with their deadline
 * already running (it counts from arrival), the clients taking turns for
 * free slots (run/admit.h). Once the policy has expired no new cell
 * starts. SIGHUP reads the policy again (gateway_reload, internal.h).
 * SIGTERM, SIGINT and the end of the client's
 * input stop every cell and destroy every sandbox (input read from a file
 * is a script: its runs finish first). */
#ifndef APPL_GATEWAY_GATEWAY_H
#define APPL_GATEWAY_GATEWAY_H

#include <stdio.h>

#include "base/err.h"
#include "policy/load.h"
#include "policy/policy.h"

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
	/* A reload (SIGHUP, or the admin socket): read the policy file again
	 * and hold it to everything a start checks of it (signature, trust,
	 * expiry, the rollback floor without moving it, the image layout):
	 * 0 with *handle (released with release), *policy and *verified
	 * (borrowed from it); or negative with err. commit moves the floor
	 * (0, or negative with err). NULL load: reloads are refused. */
	int (*load)(void *data, void **handle, const struct policy **policy,
		    const struct policy_verified **verified, struct appl_err *err);
	int (*commit)(void *data, void *handle, struct appl_err *err);
	void (*release)(void *data, void *handle);
	void *data;
	/* The admin socket (docs/operating.md): the signed policy's path, for
	 * the status; the directory (NULL: admin_dir_default); NAME (NULL:
	 * the policy's deployment, or "appliance" where it names none). */
	const char *policy_path;
	const char *admin_dir;
	const char *admin_name;
	/* Replicas (docs/scale-out.md): the file of the key they share (NULL:
	 * none; needed with the policy's cluster section), and listen
	 * addresses replacing the policy's http.listen (nlisten of them;
	 * 0: the policy's). */
	const char *cluster_key;
	const char *const *listen;
	size_t nlisten;
};

/* Serve until the client goes away or a signal comes. Over HTTP
 * everything starts first; over stdio the image, the sandbox runtime, the
 * audit log, the servers and the pool start when the first request that
 * needs the tools comes (tools/list, tools/call), which waits for them and
 * gets the reason as its error when they fail. Input read from a file ends
 * when its runs have finished. Returns 0, or a negative code with err
 * filled when serving could not start. */
int gateway_run(const struct gateway_config *cfg, struct appl_err *err);

/* `appliance check`: open the policy's HTTP front as `run` opens it (its
 * TLS certificate and key loaded, every listener bound) and close it again.
 * 0, or what `run` would fail with. */
int gateway_http_try(const struct policy *p, struct appl_err *err);

#endif
