/* roles.h: what each role of the policy sees: its catalog (bridge.h), built
 * from every server's last tool list, and run_python's description made
 * from it. Built on first use, rebuilt when a server (re)starts or changes
 * its list; a run holds a reference to the catalog current when it was
 * admitted, so its cell's functions and the bridge's checks agree for its
 * whole life. */
#ifndef APPL_ENGINE_ROLES_H
#define APPL_ENGINE_ROLES_H

#include "base/err.h"
#include "bridge/bridge.h"
#include "policy/policy.h"

struct engine_roles;
struct upstream_set;

struct engine_roles_config {
	const struct policy *policy;	 /* borrowed, as all of these */
	const struct policy_limits *lim; /* what the description states */
	/* role's description changed: its clients are told. May be NULL. */
	void (*changed)(void *data, const char *role);
	void *data;
};

/* NULL with err (-ENOMEM). */
struct engine_roles *engine_roles_new(const struct engine_roles_config *cfg, struct appl_err *err);
/* Safe on NULL. */
void engine_roles_free(struct engine_roles *r);

/* The servers whose tool lists are read from now on (borrowed). */
void engine_roles_servers(struct engine_roles *r, struct upstream_set *ups);

/* The upstream set's hook: a server (re)started or changed its list
 * (why, for the log): every role's view again. data is the roles. */
void engine_roles_changed(void *data, const char *why);

/* role's description (NULL role: one that may call nothing), and its
 * catalog in *cat (borrowed; valid until the next change). NULL with err
 * when it could not be built. */
const char *engine_roles_view(struct engine_roles *r, const char *role, struct bridge_catalog **cat,
			      struct appl_err *err);

/* The catalog of tool's program (a code tool of the policy; borrowed)
 * when a client of role calls it: what `uses` allows (policy_call_check).
 * Built on first use and rebuilt with the roles; borrowed. NULL with err
 * when it could not be built. */
struct bridge_catalog *engine_roles_tool_view(struct engine_roles *r, const char *role,
					      const struct policy_code_tool *tool,
					      struct appl_err *err);

/* A reload: every role of the policy built now (and the role that may
 * call nothing), so one that cannot be built refuses the policy. 0, or
 * negative with err naming the role. */
int engine_roles_build(struct engine_roles *r, struct appl_err *err);

/* A reload: for each role old had built, now's changed hook is called
 * when now shows it another run_python description (or has it not), or
 * lists other tools (run_python or not, code tools added, removed or
 * changed). */
void engine_roles_compare(const struct engine_roles *old, struct engine_roles *now);

#endif
