/* servers.c: part 1's start of the policy's servers by the engine, as run
 * starts them, and the tools they list (internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check/internal.h"
#include "upstream/upstream.h"
#include "upstream/set.h"

const struct upstream *check_servers_up(const struct check *c, const char *name)
{
	struct upstream_set *ups = engine_servers(c->e);

	for (size_t i = 0; ups && i < upstream_set_count(ups); i++) {
		const struct upstream *u = upstream_set_get(ups, i);

		if (strcmp(upstream_name(u), name) == 0)
			return upstream_state(u) == UPSTREAM_READY ? u : NULL;
	}
	return NULL;
}

static int tools_gather(struct check *c)
{
	struct upstream_set *ups = engine_servers(c->e);
	size_t n = 0;

	for (size_t i = 0; i < upstream_set_count(ups); i++)
		n += upstream_tool_count(upstream_set_get(ups, i));
	if (!(c->tools = calloc(n ? n : 1, sizeof(*c->tools))))
		return -ENOMEM;
	for (size_t i = 0; i < upstream_set_count(ups); i++) {
		const struct upstream *u = upstream_set_get(ups, i);

		if (upstream_state(u) != UPSTREAM_READY)
			continue;
		for (size_t j = 0; j < upstream_tool_count(u); j++) {
			const struct upstream_tool *t = upstream_tool_get(u, j);

			c->tools[c->ntools++] = (struct bridge_tool_in){
				upstream_name(u), t->name,	     t->description,
				t->input_schema,  t->read_only_hint, t->output_schema};
		}
	}
	return 0;
}

static void server_report(struct check *c, const struct upstream *u)
{
	char why[APPL_ERR_MSG_MAX];

	if (upstream_state(u) == UPSTREAM_READY) {
		check_report_say(c, CHECK_MARK_OK, "servers.%s: started (MCP %s), %zu tools",
				 upstream_name(u), upstream_protocol_version(u),
				 upstream_tool_count(u));
		return;
	}
	check_report_say(c, CHECK_MARK_PROBLEM, "servers.%s: did not start: %s", upstream_name(u),
			 upstream_last_error(u)[0]
				 ? check_report_shown(upstream_last_error(u), why, sizeof(why))
				 : "not ready in time");
}

int check_servers_part(struct check *c)
{
	struct appl_err err = {0};
	struct upstream_set *ups;

	/* Started by the engine as run starts them: confined, with the
	 * secrets their headers name (wiped once each holds its copy). */
	if (c->secrets_why[0]) {
		check_report_say(c, CHECK_MARK_PROBLEM, "servers: %s", c->secrets_why);
		return -1;
	}
	if (engine_servers_open(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "servers: %s", err.msg);
		return -1;
	}
	ups = engine_servers(c->e);
	for (size_t i = 0; i < upstream_set_count(ups); i++)
		server_report(c, upstream_set_get(ups, i));
	if (tools_gather(c) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "servers: out of memory");
		return -1;
	}
	return 0;
}
