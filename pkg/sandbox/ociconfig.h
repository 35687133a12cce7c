/* ociconfig.h: the OCI runtime config (config.json) of one cell sandbox.
 *
 * Pure code: builds the document with jansson, never by pasting strings, so
 * no path or value can add a field. The config holds exactly what DESIGN.md
 * section 4 and docs/runner-protocol.md describe: a read-only root, fresh
 * proc, tmpfs /tmp, /out and /dev, no bind mount from the host, uid and gid 65534
 * with no groups, env exactly PATH=/usr/bin, every capability set empty,
 * noNewPrivileges, rlimits, new pid/ipc/uts/mount/network namespaces, and
 * (as root only) a memory and CPU cgroup. Never a pids cgroup: gVisor's own
 * host threads count against it, and a fork loop would kill the sandbox
 * from the outside (RLIMIT_NPROC is enforced inside gVisor instead).
 */
#ifndef APPL_SANDBOX_OCICONFIG_H
#define APPL_SANDBOX_OCICONFIG_H

#include <jansson.h>
#include <stdbool.h>

#include "base/err.h"

#define SANDBOX_UID	    65534 /* nobody, inside the sandbox's own view */
#define SANDBOX_GID	    65534
#define SANDBOX_HOSTNAME    "cell"
#define SANDBOX_PYTHON	    "/usr/bin/python3.11"
#define SANDBOX_RUNNER	    "/runner.py"
#define SANDBOX_POOLED_ARG  "--pooled"	 /* runner.py's POOLED_ARG */
#define SANDBOX_PRELOAD_ARG "--preload=" /* runner.py's PRELOAD_ARG, then the names */

struct sandbox_oci_params {
	const char *rootfs;	  /* absolute path of the verified rootfs; borrowed */
	const char *rootfs_image; /* the same tree as one EROFS image file that
				   * the Sentry mounts as / itself (no gofer), or
				   * NULL to serve the directory through a gofer;
				   * borrowed */
	unsigned memory_mb;	  /* RLIMIT_AS; as root also the memory cgroup, plus
				   * APPL_GVISOR_ALLOWANCE_MB for gVisor itself */
	unsigned pids;		  /* RLIMIT_NPROC (processes and threads) */
	unsigned nofile;	  /* RLIMIT_NOFILE */
	unsigned tmpfs_mb;	  /* size of /tmp, and of /out; also RLIMIT_FSIZE */
	bool rootless;		  /* runsc --rootless: no cgroups at all */
	bool pooled;		  /* the runner warms up before it says ready */
	const char *preload;	  /* modules a pooled runner imports as it warms
				   * up, comma-joined (image.preload), or NULL;
				   * borrowed */
	const char *cgroups_path; /* linux.cgroupsPath when root, or NULL; borrowed */
};

/* Fill p with the defaults of limits.h (rootfs, rootfs_image and
 * cgroups_path NULL). */
void sandbox_oci_params_init(struct sandbox_oci_params *p);

/* The config for p (borrowed). Every limit must lie within limits.h's range
 * (memory APPL_MEMORY_MB_MIN..CEIL, pids and nofile 1..CEIL with nofile at
 * least 16 for the interpreter and the runner's private descriptors, tmpfs
 * 1..CEIL); rootfs, rootfs_image and cgroups_path are absolute, at most
 * APPL_SANDBOX_PATH_MAX bytes of printable ASCII, without "." or ".."
 * components; preload holds only ASCII letters, digits, '_', '.' and ','.
 * Returns a new reference, or NULL with err filled (-EINVAL, -ENOMEM). */
json_t *sandbox_ociconfig_new(const struct sandbox_oci_params *p, struct appl_err *err);

#endif
