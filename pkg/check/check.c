/* check.c: the whole check, part by part (check.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "check/internal.h"
#include "engine/process.h"
#include "upstream/upstream.h"

int check_new(const struct check_options *o, struct check **out, struct appl_err *err)
{
	struct check *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return appl_err_set(err, -ENOMEM, "out of memory");
	c->o = o;
	*out = c;
	return 0;
}

static void cells_part(struct check *c)
{
	struct appl_err err = {0};
	int rc;

	if (engine_cells_open(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cells: %s", err.msg);
		return;
	}
	check_warm_part(c);
	if ((rc = check_prepare_markers(c)) < 0 || (rc = check_prepare_probes(c)) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cells: could not prepare them: %s",
				 strerror(-rc));
		return;
	}
	check_run_probes(c);
	if (check_stopped(c))
		check_report_say(c, CHECK_MARK_PROBLEM, "check: stopped by %s", check_stopped(c));
	check_table_print(c);
	check_table_details(c);
	if (check_stopped(c))
		return;
	check_code_part(c);
	if (check_stopped(c))
		check_report_say(c, CHECK_MARK_PROBLEM, "check: stopped by %s", check_stopped(c));
}

/* The engine run starts with, on the accepted policy: its loop and
 * signals now, each part as the check comes to it. */
static int engine_part(struct check *c)
{
	struct engine_config ec = {.policy = c->cp.policy,
				   .cache = c->o->cache,
				   .run_dir = c->o->run_dir,
				   .hide = c->cp.hide,
				   .verified = c->cp.info,
				   .state_dir = c->cp.state_dir};
	struct appl_err err = {0};

	/* Secrets that cannot be taken fail the servers' part, not the rest. */
	if (c->o->hooks.secrets_take &&
	    c->o->hooks.secrets_take(c->cp.policy, &c->secrets, &err) < 0) {
		snprintf(c->secrets_why, sizeof(c->secrets_why), "%s", err.msg);
		err = (struct appl_err){0};
	}
	ec.secrets = c->secrets;
	if (!(c->e = engine_open(&ec, &err))) {
		check_report_say(c, CHECK_MARK_PROBLEM, "check: %s", err.msg);
		return -1;
	}
	return 0;
}

/* Part 1 up to the servers; -1 when nothing further can be judged. */
static int machine_part(struct check *c)
{
	if (check_policy_part(c) < 0 || check_policy_notes_part(c) < 0 || engine_part(c) < 0)
		return -1;
	check_machine_image(c);
	check_machine_runtime(c);
	if (engine_runtime(c->e))
		check_machine_cgroups(c);
	check_machine_telemetry(c);
	return 0;
}

static void check_all(struct check *c)
{
	if (machine_part(c) < 0)
		return;
	if (check_servers_part(c) == 0) {
		check_tools_patterns(c);
		check_tools_roles(c);
	}
	if (check_stopped(c)) {
		check_report_say(c, CHECK_MARK_PROBLEM, "check: stopped by %s", check_stopped(c));
		return;
	}
	/* Cells prove what the machine does with a policy that is right;
	 * until then their rows would only repeat the problems above. */
	if (c->n.problems || !c->image_ok || !engine_runtime(c->e)) {
		check_report_print(c, "\ncells not run: the problems above come first\n");
		return;
	}
	cells_part(c);
}

void check_run(struct check *c, struct check_report *r)
{
	check_all(c);
	*r = c->n;
}

void check_free(struct check *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nprobes; i++)
		check_run_release(&c->probes[i]);
	/* Every run stopped, the sandboxes, servers and runtime down, every
	 * child reaped: before the probes' code and results go. */
	engine_close(c->e);
	for (size_t i = 0; i < c->nprobes; i++) {
		json_decref(c->probes[i].result);
		free(c->probes[i].code);
	}
	free(c->probes);
	bridge_catalog_unref(c->client);
	upstream_secrets_free(c->secrets);
	free(c->tools);
	if (c->marker_set)
		engine_env_unset(CHECK_MARKER_ENV);
	if (c->marker_dir[0])
		appl_tree_remove(c->marker_dir);
	policy_notes_free(c->rules);
	free(c);
}
