/* part_policy.c: part 1's judgement of the signed policy itself: the
 * signature as run accepts it, what run requires of the policy on this
 * machine, and the notes that need no server (internal.h). */
#include <stdio.h>
#include <unistd.h>

#include "check/internal.h"
#include "gateway/gateway.h"
#include "policy/load.h"
#include "policy/notes.h"

static void time_text(int64_t t, char out[POLICY_TIME_STR])
{
	if (policy_sig_time_format(t, out, POLICY_TIME_STR) < 0)
		snprintf(out, POLICY_TIME_STR, "%lld", (long long)t);
}

static void policy_http_part(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct appl_err err = {0};

	if (!policy_http(p))
		return;
	if (gateway_http_try(p, &err) < 0)
		check_report_say(c, CHECK_MARK_PROBLEM, "http: %s", err.msg);
	else
		check_report_say(c, CHECK_MARK_OK,
				 "http: every listener binds%s (closed again: check serves "
				 "no client)",
				 policy_http(p)->tls_cert ? ", the TLS certificate and key load"
							  : "");
}

static void policy_requirements(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct appl_err err = {0};
	char log[PATH_MAX];

	if (c->o->hooks.supported && c->o->hooks.supported(p, c->o->policy, &err) < 0)
		check_report_say(c, CHECK_MARK_PROBLEM, "policy: %s", err.msg);
	policy_http_part(c);
	if (engine_audit_check(p, c->cp.state_dir, &err) < 0)
		check_report_say(c, CHECK_MARK_PROBLEM, "audit.path: %s", err.msg);
	else if (policy_audit_path_for(p, NULL, log, sizeof(log)) == 0)
		check_report_say(c, CHECK_MARK_OK,
				 "audit.path: %s would be %s as it is (check writes none)", log,
				 access(log, F_OK) == 0 ? "continued" : "begun");
	/* A call no audit line records must not happen under a policy that
	 * keeps a log: check writes none. */
	if (policy_audit_path(p) && c->o->ncalls > 0)
		check_report_say(c, CHECK_MARK_PROBLEM,
				 "audit.path: the policy keeps an audit log, which check does not "
				 "write: --call would make calls the log does not hold");
}

int check_policy_part(struct check *c)
{
	struct appl_err err = {0};
	char expires[POLICY_TIME_STR];
	const struct policy_verified *info;

	check_report_print(c, "check of %s\n\n", c->o->policy);
	/* Accepted exactly as run accepts, and never committed: check is not
	 * a use of the policy. */
	if (c->o->hooks.accept(c->o->hooks.data, &c->cp, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "signature: %s", err.msg);
		return -1;
	}
	c->accepted = true;
	info = c->cp.info;
	time_text(info->expires, expires);
	check_report_say(c, CHECK_MARK_OK,
			 "signature: key %s, serial %llu, deployment %s, expires %s (the serial "
			 "is not recorded)",
			 info->keyid_hex, (unsigned long long)info->serial, info->deployment,
			 expires);
	policy_limits_get(c->cp.policy, &c->lim);
	policy_requirements(c);
	return 0;
}

static void on_note(void *data, enum policy_note kind, const char *text)
{
	/* A role that can call nothing is judged against the real tool lists
	 * below (roles.NAME), which says more. */
	if (kind != POLICY_NOTE_ROLE_IDLE)
		check_report_say(data, CHECK_MARK_WARNING, "%s", text);
}

int check_policy_notes_part(struct check *c)
{
	char path[PATH_MAX];
	struct appl_err err = {0};

	if (policy_sig_path_policy(c->o->policy, path, sizeof(path), &err) < 0 ||
	    policy_notes_load(path, c->cp.info->hash, &c->rules, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "policy: %s", err.msg);
		return -1;
	}
	policy_notes_emit(c->rules, on_note, c);
	return 0;
}
