/* tools.c: part 1's judgement of the `tools` entries and the roles against
 * the tools the servers really list (internal.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"
#include "upstream/upstream.h"

static bool tool_exists(const struct check *c, const char *server, const char *tool)
{
	for (size_t i = 0; i < c->ntools; i++)
		if (strcmp(c->tools[i].server, server) == 0 && strcmp(c->tools[i].name, tool) == 0)
			return true;
	return false;
}

/* How many tools of the (running) server a pattern names; with rule, the
 * tools a `tools` wildcard decides: those without an entry of their own,
 * and for a read entry only those the server marks read-only. */
static size_t pattern_count(const struct check *c, const char *pat, const char *server, bool rule,
			    bool read)
{
	char exact[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2];
	size_t n = 0;

	if (!policy_notes_pattern_wild(pat))
		return tool_exists(c, server, policy_notes_pattern_tool(pat)) ? 1 : 0;
	for (size_t i = 0; i < c->ntools; i++) {
		const struct bridge_tool_in *t = &c->tools[i];

		if (strcmp(t->server, server) != 0)
			continue;
		snprintf(exact, sizeof(exact), "%s.%s", t->server, t->name);
		if (!rule ||
		    (!policy_notes_rule_has(c->rules, exact) && (!read || t->read_only_hint)))
			n++;
	}
	return n;
}

/* path is where the pattern is ("tools.\"x.y\"", "roles.r.tools[0]"). */
static void pattern_judge(struct check *c, const char *path, const char *pat, bool rule, bool read)
{
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	const struct upstream *u;

	if (!policy_notes_pattern_server(pat, server, sizeof(server)) ||
	    !(u = check_servers_up(c, server)))
		return; /* a server that did not start is reported as such */
	if (pattern_count(c, pat, server, rule, read) > 0)
		return;
	if (policy_notes_pattern_wild(pat) && rule && upstream_tool_count(u) > 0)
		check_report_say(c, CHECK_MARK_PROBLEM,
				 "%s: admits no tool of server %s: every one of its %zu tools has "
				 "an entry of its own%s",
				 path, server, upstream_tool_count(u),
				 read ? ", or is not marked read-only (annotations.readOnlyHint)"
				      : "");
	else
		check_report_say(c, CHECK_MARK_PROBLEM, "%s: names no tool of server %s", path,
				 server);
}

void check_tools_patterns(struct check *c)
{
	char path[APPL_POLICY_LABEL_MAX + APPL_POLICY_SERVER_NAME_MAX + APPL_POLICY_TOOL_NAME_MAX +
		  32];

	for (size_t i = 0; i < policy_notes_rule_count(c->rules); i++) {
		const char *pat = policy_notes_rule_get(c->rules, i);

		snprintf(path, sizeof(path), "tools.\"%s\"", pat);
		pattern_judge(c, path, pat, true, policy_notes_rule_read(c->rules, i));
	}
	for (size_t k = 0; k < policy_role_count(c->cp.policy); k++) {
		const struct policy_role *r = policy_role_get(c->cp.policy, k);

		for (size_t i = 0; i < r->ntools; i++) {
			snprintf(path, sizeof(path), "roles.%s.tools[%zu] \"%s\"", r->name, i,
				 r->tools[i]);
			pattern_judge(c, path, r->tools[i], false, false);
		}
	}
}

/* The `tools` entry that decides server.tool: its own, else the wildcard. */
static const char *rule_of(const struct check *c, const char *server, const char *tool, char *out,
			   size_t cap)
{
	snprintf(out, cap, "%s.%s", server, tool);
	if (!policy_notes_rule_has(c->rules, out))
		snprintf(out, cap, "%s.*", server);
	return out;
}

/* A tool a role may call that is not offered (its schema cannot be
 * checked, or its name cannot become Python): a problem when the policy
 * names it, a warning when only a wildcard took it in. Told once. */
static void unoffered_report(struct check *c, const struct bridge_tool_info *info, bool *told)
{
	char rule[APPL_POLICY_SERVER_NAME_MAX + APPL_UPSTREAM_TOOL_NAME_MAX + 2];
	char name[2 * APPL_UPSTREAM_TOOL_NAME_MAX];

	for (size_t i = 0; i < c->ntools; i++) {
		if (strcmp(c->tools[i].server, info->server) != 0 ||
		    strcmp(c->tools[i].name, info->name) != 0)
			continue;
		if (told[i])
			return;
		told[i] = true;
		break;
	}
	rule_of(c, info->server, info->name, rule, sizeof(rule));
	check_report_say(c,
			 policy_notes_pattern_wild(rule) ? CHECK_MARK_WARNING : CHECK_MARK_PROBLEM,
			 "tools.\"%s\": %s.%s is not offered: %s", rule, info->server,
			 check_report_shown(info->name, name, sizeof(name)), info->why_not);
}

/* Whether role may call the tool, given what its server says of it. */
static bool tool_allowed(const struct check *c, const struct bridge_tool_info *info,
			 const char *role)
{
	for (size_t i = 0; i < c->ntools; i++)
		if (strcmp(c->tools[i].server, info->server) == 0 &&
		    strcmp(c->tools[i].name, info->name) == 0)
			return policy_tool_access(c->cp.policy, info->server, info->name,
						  c->tools[i].read_only_hint, role, NULL);
	return false;
}

static int catalog_of(struct check *c, const char *role, struct bridge_catalog **cat)
{
	struct appl_err err = {0};

	if (bridge_catalog_new(c->cp.policy, role, c->tools, c->ntools, cat, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "roles.%s: %s", role ? role : "(none)",
				 err.msg);
		return -1;
	}
	return 0;
}

/* How many code tools role may call. */
static size_t code_tools_of(const struct check *c, const char *role)
{
	size_t n = 0;

	for (size_t i = 0; i < policy_code_tool_count(c->cp.policy); i++)
		n += policy_code_tool_allowed(c->cp.policy, role,
					      policy_code_tool_get(c->cp.policy, i)->name,
					      NULL) == POLICY_OK;
	return n;
}

/* A role that names no tool and calls code tools (an invoke-only one, or
 * one whose cells only compute): nothing to call directly, by design. */
static bool role_code_only(struct check *c, const struct policy_role *r)
{
	size_t n;

	if (r->ntools || !r->ncode_tools)
		return false;
	n = code_tools_of(c, r->name);
	check_report_say(c, CHECK_MARK_OK, "roles.%s: calls no tool %s; it may call %zu code tools",
			 r->name, r->run_python ? "from its cells" : "itself (\"inline\": false)",
			 n);
	return true;
}

static void role_judge(struct check *c, const char *role, bool *told)
{
	struct bridge_catalog *cat;
	struct bridge_tool_info info;
	size_t offered = 0;

	if (role_code_only(c, policy_role_find(c->cp.policy, role)) ||
	    catalog_of(c, role, &cat) < 0)
		return;
	for (size_t i = 0; bridge_catalog_info(cat, i, &info) == 0; i++) {
		if (!info.why_not)
			offered++;
		else if (tool_allowed(c, &info, role))
			unoffered_report(c, &info, told);
	}
	if (offered == 0)
		check_report_say(c, CHECK_MARK_PROBLEM,
				 "roles.%s: can call no tool (of the %zu the servers list)", role,
				 c->ntools);
	else
		check_report_say(c, CHECK_MARK_OK, "roles.%s: can call %zu tools", role, offered);
	bridge_catalog_unref(cat);
}

void check_tools_roles(struct check *c)
{
	const char *client = policy_client_default_role(c->cp.policy);
	bool *told = calloc(c->ntools ? c->ntools : 1, sizeof(*told));

	if (!told) {
		check_report_say(c, CHECK_MARK_PROBLEM, "roles: out of memory");
		return;
	}
	for (size_t k = 0; k < policy_role_count(c->cp.policy); k++)
		role_judge(c, policy_role_get(c->cp.policy, k)->name, told);
	free(told);
	catalog_of(c, client, &c->client);
}
