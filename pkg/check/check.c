/* check.c: the whole check, part by part (check.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "check/internal.h"
#include "upstream/set.h"

int check_new(const struct check_options *o, struct check **out, struct appl_err *err)
{
	struct check *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c || !(c->cells = check_cells_new())) {
		free(c);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	c->o = o;
	*out = c;
	return 0;
}

static void cells_part(struct check *c)
{
	int rc;

	engine_limits_split(&c->lim, &c->oci, &c->cell_lim);
	bridge_limits_from_policy(&c->lim, &c->blim);
	c->oci.rootfs = c->rootfs;
	c->oci.rootfs_image = c->rootfs_image[0] ? c->rootfs_image : NULL;
	if ((rc = check_prepare_markers(c)) < 0 || (rc = check_prepare_probes(c)) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cells: could not prepare them: %s",
				 strerror(-rc));
		return;
	}
	check_run_probes(c);
	if (check_cells_stopped(c->cells))
		check_report_say(c, CHECK_MARK_PROBLEM, "check: stopped by signal %d",
				 check_cells_stopped(c->cells));
	check_table_print(c);
	check_table_details(c);
}

/* Part 1 up to the servers; -1 when nothing further can be judged. */
static int machine_part(struct check *c)
{
	struct appl_err err = {0};

	if (check_policy_part(c) < 0 || check_policy_notes_part(c) < 0)
		return -1;
	check_machine_image(c);
	check_machine_runtime(c);
	if (check_cells_runtime(c->cells))
		check_machine_cgroups(c);
	if (check_cells_loop_open(c->cells, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "check: %s", err.msg);
		return -1;
	}
	return 0;
}

static void check_all(struct check *c)
{
	int signo;

	if (machine_part(c) < 0)
		return;
	if (check_servers_part(c) == 0) {
		check_tools_patterns(c);
		check_tools_roles(c);
	}
	if ((signo = check_cells_stopped(c->cells))) {
		check_report_say(c, CHECK_MARK_PROBLEM, "check: stopped by signal %d", signo);
		return;
	}
	/* Cells prove what the machine does with a policy that is right;
	 * until then their rows would only repeat the problems above. */
	if (c->n.problems || !c->image_ok || !check_cells_runtime(c->cells)) {
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
	for (size_t i = 0; i < c->nprobes; i++) {
		check_run_release(&c->probes[i]);
		free(c->probes[i].code);
	}
	free(c->probes);
	bridge_catalog_unref(c->client);
	upstream_set_free(c->ups);
	engine_confine_release(&c->confine);
	free(c->tools);
	check_cells_free(c->cells);
	if (c->marker_dir[0])
		appl_tree_remove(c->marker_dir);
	policy_notes_free(c->rules);
	free(c);
}
