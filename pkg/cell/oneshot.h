/* oneshot.h: run one cell with no tools, start to finish (`appliance cell`).
 * Verifies the image, opens a sandbox instance, runs the cell in an event
 * loop that also watches SIGTERM, SIGINT and SIGHUP, and tears everything
 * down before returning. */
#ifndef APPL_CELL_ONESHOT_H
#define APPL_CELL_ONESHOT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "cell/cell.h"
#include "sandbox/ociconfig.h"

struct cell_oneshot {
	const char *image;    /* OCI layout directory */
	const char *digest;   /* pinned manifest digest */
	const char *cache;    /* NULL: image_cache_default */
	const char *run_dir;  /* runsc instances; NULL: the runtime's default */
	const char *runsc;    /* NULL: the default path */
	const char *platform; /* NULL: SANDBOX_PLATFORM_DEFAULT (systrap) */
	bool rootless;
	struct sandbox_oci_params oci; /* limits of the sandbox (rootfs is set here) */
	struct cell_limits lim;	       /* limits of the run */
	const char *code;	       /* borrowed */
	size_t code_len;
	/* Called once the runtime is open and the image verified, before the
	 * sandbox boots (`cell --policy` records the serial here); non-zero
	 * stops the run with err. May be NULL. */
	int (*on_started)(void *data, struct appl_err *err);
	void *data;
};

/* Fill o with the defaults of limits.h (image, digest and code unset). */
void cell_oneshot_init(struct cell_oneshot *o);

/* Run o. On success *result is the cell's result object (new reference);
 * failing to run at all (bad image, no runsc, not root) returns a negative
 * code with err filled. A signal ends the run with reason "signal". */
int cell_oneshot_run(const struct cell_oneshot *o, json_t **result, struct appl_err *err);

#endif
