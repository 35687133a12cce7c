/* access.c: the decisions made from a parsed policy: whether a role may
 * call a tool (and with what access), whether a call needs a person's
 * yes, and whether a role may read a server's resources. */
#include "policy/internal.h"

#include <string.h>

/* The entry that decides server.tool: the exact one, else the wildcard. */
const struct rule *policy_rule_of(const struct policy *p, const char *server, const char *tool)
{
	const struct rule *exact = NULL, *wild = NULL;

	for (size_t i = 0; i < p->nrules; i++) {
		int m = policy_pattern_match(p->rules[i].pattern, server, tool);
		if (m == 2)
			exact = &p->rules[i];
		else if (m == 1)
			wild = &p->rules[i];
	}
	return exact ? exact : wild;
}

/* The tool's access under `tools`, or -1 when no entry admits it. */
static int tool_class(const struct policy *p, const char *server, const char *tool,
		      bool read_only_hint)
{
	const struct rule *r = policy_rule_of(p, server, tool);

	if (!r)
		return -1;
	if (policy_pattern_match(r->pattern, server, tool) == 2)
		return (int)r->access;
	/* Under a wildcard the server's own hint sorts its tools: "read"
	 * admits only what it calls read-only, "write" admits everything but
	 * still counts hinted tools as reads, so read-only roles keep them. */
	if (read_only_hint)
		return POLICY_ACCESS_READ;
	return r->access == POLICY_ACCESS_WRITE ? POLICY_ACCESS_WRITE : -1;
}

static bool role_names(const struct policy_role *r, const char *server, const char *tool)
{
	for (size_t i = 0; i < r->ntools; i++)
		if (policy_pattern_match(r->tools[i], server, tool))
			return true;
	return false;
}

enum policy_verdict policy_tool_check(const struct policy *p, const char *server, const char *tool,
				      bool read_only_hint, const char *role,
				      enum policy_access *access)
{
	const struct policy_role *r;
	int cls;

	if (!p || !server || !tool)
		return POLICY_DENY_UNLISTED;
	r = policy_role_find(p, role);
	if (!r)
		return POLICY_DENY_NO_ROLE;
	cls = tool_class(p, server, tool, read_only_hint);
	if (cls < 0)
		return POLICY_DENY_UNLISTED;
	if (!role_names(r, server, tool))
		return POLICY_DENY_ROLE;
	if (cls == POLICY_ACCESS_WRITE && !r->write)
		return POLICY_DENY_WRITE;
	if (access)
		*access = (enum policy_access)cls;
	return POLICY_OK;
}

int policy_tool_access(const struct policy *p, const char *server, const char *tool,
		       bool read_only_hint, const char *role, enum policy_access *access)
{
	return policy_tool_check(p, server, tool, read_only_hint, role, access) == POLICY_OK;
}

bool policy_tool_approval(const struct policy *p, const char *server, const char *tool,
			  const char *role, enum policy_access access)
{
	const struct policy_role *r;
	const struct rule *rule;

	if (!p || !server || !tool)
		return false;
	r = policy_role_find(p, role);
	rule = policy_rule_of(p, server, tool);
	return (rule && rule->approval) ||
	       (access == POLICY_ACCESS_WRITE && r && r->approve_writes);
}

const char *policy_tool_named(const struct policy *p, const char *server, const char *tool)
{
	const char *pat = NULL;

	if (!p || !server || !tool)
		return NULL;
	for (size_t i = 0; !pat && i < p->nrules; i++)
		if (policy_pattern_match(p->rules[i].pattern, server, tool) == 2)
			pat = p->rules[i].pattern;
	for (size_t i = 0; !pat && i < p->nroles; i++)
		for (size_t k = 0; !pat && k < p->roles[i].ntools; k++)
			if (policy_pattern_match(p->roles[i].tools[k], server, tool) == 2)
				pat = p->roles[i].tools[k];
	return pat ? pat + strlen(server) + 1 : NULL;
}

bool policy_approvals_used(const struct policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].approval)
			return true;
	for (size_t i = 0; i < p->nroles; i++)
		if (p->roles[i].approve_writes)
			return true;
	return false;
}

const char *policy_verdict_text(enum policy_verdict v)
{
	static const char *const texts[] = {
		[POLICY_OK] = "allowed",
		[POLICY_DENY_UNLISTED] = "not allowed by the policy",
		[POLICY_DENY_ROLE] = "not allowed for this client's role",
		[POLICY_DENY_WRITE] = "a write tool, and this client's role may only read",
		[POLICY_DENY_NO_ROLE] = "this client has no role in the policy",
		[POLICY_DENY_USES] = "not among the tools this code tool uses",
		[POLICY_DENY_NO_TOOL] = "no such code tool",
		[POLICY_DENY_CHECK] = "a write tool, and appliance check makes no write call",
	};

	if ((unsigned)v < NELEM(texts) && texts[v])
		return texts[v];
	return "not allowed";
}

/* Resources are not tools: `tools` has no say, and only a role given the
 * whole server ("server.*") may read them, so naming one tool of a server
 * never opens everything else the server holds. */
bool policy_resources_allowed(const struct policy *p, const char *server, const char *role)
{
	const struct policy_server *s;
	const struct policy_role *r;
	size_t n;

	if (!p || !server || !role)
		return false;
	s = policy_server_find(p, server);
	r = policy_role_find(p, role);
	if (!s || !s->resources || !r)
		return false;
	n = strlen(server);
	for (size_t i = 0; i < r->ntools; i++)
		if (strncmp(r->tools[i], server, n) == 0 && strcmp(r->tools[i] + n, ".*") == 0)
			return true;
	return false;
}

/* ---- code tools --------------------------------------------------------------- */

static bool role_lists(const struct policy_role *r, const char *name)
{
	for (size_t i = 0; i < r->ncode_tools; i++)
		if (strcmp(r->code_tools[i], "*") == 0 || strcmp(r->code_tools[i], name) == 0)
			return true;
	return false;
}

enum policy_verdict policy_code_tool_allowed(const struct policy *p, const char *role,
					     const char *name, const struct policy_code_tool **out)
{
	const struct policy_code_tool *t = NULL;
	const struct policy_role *r;

	for (size_t i = 0; name && i < p->ncode_tools; i++)
		if (strcmp(p->code_tools[i].pub.name, name) == 0)
			t = &p->code_tools[i].pub;
	if (out)
		*out = t;
	if (!(r = policy_role_find(p, role)))
		return POLICY_DENY_NO_ROLE;
	if (!t)
		return POLICY_DENY_NO_TOOL;
	if (!role_lists(r, name))
		return POLICY_DENY_ROLE;
	if (t->access == POLICY_ACCESS_WRITE && !r->write)
		return POLICY_DENY_WRITE;
	return POLICY_OK;
}

static bool uses_name(const struct policy_code_tool *t, const char *server, const char *tool)
{
	for (size_t i = 0; i < t->nuses; i++)
		if (policy_pattern_match(t->uses[i], server, tool))
			return true;
	return false;
}

/* A code tool's program: the tool's class under `tools` as for a cell;
 * then its uses in place of the role's patterns, its access in place of
 * the role's write. The role played its part when the tool was called
 * (policy_code_tool_allowed). */
enum policy_verdict policy_call_check(const struct policy *p, const struct policy_caller *caller,
				      const char *server, const char *tool, bool read_only_hint,
				      enum policy_access *access)
{
	const struct policy_code_tool *t = caller ? caller->tool : NULL;
	int cls;

	if (!t)
		return policy_tool_check(p, server, tool, read_only_hint,
					 caller ? caller->role : NULL, access);
	if (!p || !server || !tool)
		return POLICY_DENY_UNLISTED;
	if (!policy_role_find(p, caller->role))
		return POLICY_DENY_NO_ROLE;
	cls = tool_class(p, server, tool, read_only_hint);
	if (cls < 0)
		return POLICY_DENY_UNLISTED;
	if (!uses_name(t, server, tool))
		return POLICY_DENY_USES;
	if (cls == POLICY_ACCESS_WRITE && t->access != POLICY_ACCESS_WRITE)
		return POLICY_DENY_WRITE;
	if (cls == POLICY_ACCESS_WRITE && caller->no_writes)
		return POLICY_DENY_CHECK;
	if (access)
		*access = (enum policy_access)cls;
	return POLICY_OK;
}

bool policy_call_resources(const struct policy *p, const struct policy_caller *caller,
			   const char *server)
{
	const struct policy_code_tool *t = caller ? caller->tool : NULL;
	const struct policy_server *s;

	if (!t)
		return policy_resources_allowed(p, server, caller ? caller->role : NULL);
	s = server ? policy_server_find(p, server) : NULL;
	if (!s || !s->resources || !policy_role_find(p, caller->role))
		return false;
	for (size_t i = 0; i < t->nuses; i++)
		if (policy_pattern_match(t->uses[i], server, "*") == 1)
			return true;
	return false;
}
