/* ociconfig.c: the OCI runtime config of one cell sandbox (see ociconfig.h). */
#include "sandbox/ociconfig.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MIB	   (1024ll * 1024)
#define NOFILE_MIN 16

void sandbox_oci_params_init(struct sandbox_oci_params *p)
{
	memset(p, 0, sizeof(*p));
	p->memory_mb = APPL_MEMORY_MB_DEF;
	p->pids = APPL_PIDS_DEF;
	p->nofile = APPL_NOFILE_DEF;
	p->tmpfs_mb = APPL_TMPFS_MB_DEF;
}

/* image.preload's names, comma-joined, at their longest. */
#define PRELOAD_TEXT_MAX (APPL_PRELOAD_MAX * (APPL_PRELOAD_NAME_MAX + 1))

/* An absolute path with no "." or ".." component, printable ASCII only:
 * the rootfs is what runsc serves to the sandbox, so a path that walks
 * elsewhere would serve some other tree. */
static int path_check(const char *what, const char *path, struct appl_err *err)
{
	size_t len = path ? strnlen(path, APPL_SANDBOX_PATH_MAX + 1) : 0;
	const char *c;

	if (len == 0 || len > APPL_SANDBOX_PATH_MAX || path[0] != '/')
		return appl_err_set(err, -EINVAL, "%s: not an absolute path of at most %u bytes",
				    what, APPL_SANDBOX_PATH_MAX);
	/* Printable ASCII only: the appliance names its own directories, and a
	 * byte jansson would refuse as UTF-8 is caught here with a clear error. */
	for (c = path; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
			return appl_err_set(err, -EINVAL, "%s: control or non-ASCII byte in path",
					    what);
	for (c = path; c; c = strchr(c + 1, '/')) {
		size_t n = strcspn(c + 1, "/");
		if ((n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return appl_err_set(err, -EINVAL, "%s: \".\" or \"..\" in path", what);
	}
	return 0;
}

/* The runner's argument: module names and the commas between them, and
 * nothing a shell or the runner could read as more. */
static int preload_check(const char *names, struct appl_err *err)
{
	size_t len = strnlen(names, PRELOAD_TEXT_MAX + 1);

	if (len == 0 || len > PRELOAD_TEXT_MAX ||
	    strspn(names, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,") !=
		    len)
		return appl_err_set(err, -EINVAL,
				    "preload: not module names joined by commas, at most %u bytes",
				    (unsigned)PRELOAD_TEXT_MAX);
	return 0;
}

static int range_check(const char *what, unsigned v, unsigned lo, unsigned hi, struct appl_err *err)
{
	if (v < lo || v > hi)
		return appl_err_set(err, -EINVAL, "%s is %u, not within %u to %u", what, v, lo, hi);
	return 0;
}

static int params_check(const struct sandbox_oci_params *p, struct appl_err *err)
{
	int rc = path_check("rootfs", p->rootfs, err);

	if (rc == 0 && p->rootfs_image)
		rc = path_check("rootfs_image", p->rootfs_image, err);
	if (rc == 0 && p->cgroups_path)
		rc = path_check("cgroups_path", p->cgroups_path, err);
	if (rc == 0)
		rc = range_check("memory_mb", p->memory_mb, APPL_MEMORY_MB_MIN, APPL_MEMORY_MB_CEIL,
				 err);
	if (rc == 0)
		rc = range_check("pids", p->pids, 1, APPL_PIDS_CEIL, err);
	if (rc == 0)
		rc = range_check("nofile", p->nofile, NOFILE_MIN, APPL_NOFILE_CEIL, err);
	if (rc == 0)
		rc = range_check("tmpfs_mb", p->tmpfs_mb, 1, APPL_TMPFS_MB_CEIL, err);
	if (rc == 0 && p->preload)
		rc = preload_check(p->preload, err);
	return rc;
}

static json_t *rlimit_new(const char *type, json_int_t value)
{
	/* soft == hard: the code cannot raise its own limit back up */
	return json_pack("{s:s, s:I, s:I}", "type", type, "hard", value, "soft", value);
}

static json_t *rlimits_new(const struct sandbox_oci_params *p)
{
	/* gVisor enforces these inside its own kernel, rootless or not. */
	return json_pack(
		"[o, o, o, o, o]", rlimit_new("RLIMIT_AS", p->memory_mb * MIB),
		rlimit_new("RLIMIT_NPROC", p->pids), rlimit_new("RLIMIT_NOFILE", p->nofile),
		rlimit_new("RLIMIT_FSIZE", p->tmpfs_mb * MIB), rlimit_new("RLIMIT_CORE", 0));
}

static json_t *capabilities_new(void)
{
	/* Every set empty, ambient included: uid 65534 gains nothing by exec. */
	return json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective", "inheritable",
			 "permitted", "ambient");
}

static json_t *process_new(const struct sandbox_oci_params *p)
{
	/* -I: ignore PYTHON* variables and the user site, no script directory on
	 * sys.path; -S: no site module (nothing imported from site-packages);
	 * -B: no .pyc writes (the root is read-only anyway). The environment is
	 * exactly PATH: nothing of the host's reaches the code. A pooled runner
	 * is told so (SANDBOX_POOLED_ARG): it warms up before it says ready. */
	json_t *args =
		json_pack("[s, s, s, s, s]", SANDBOX_PYTHON, "-I", "-S", "-B", SANDBOX_RUNNER);

	if (args && p->pooled && json_array_append_new(args, json_string(SANDBOX_POOLED_ARG)) < 0) {
		json_decref(args);
		args = NULL;
	}
	if (args && p->pooled && p->preload) {
		char arg[sizeof(SANDBOX_PRELOAD_ARG) + PRELOAD_TEXT_MAX];

		snprintf(arg, sizeof(arg), "%s%s", SANDBOX_PRELOAD_ARG, p->preload);
		if (json_array_append_new(args, json_string(arg)) < 0) {
			json_decref(args);
			args = NULL;
		}
	}
	return json_pack("{s:b, s:{s:i, s:i, s:[]}, s:o, s:[s], s:s, s:o, s:o, s:b}", "terminal", 0,
			 "user", "uid", SANDBOX_UID, "gid", SANDBOX_GID, "additionalGids", "args",
			 args, "env", "PATH=/usr/bin", "cwd", "/", "capabilities",
			 capabilities_new(), "rlimits", rlimits_new(p), "noNewPrivileges", 1);
}

static json_t *mount_new(const char *dest, const char *type, json_t *options)
{
	return json_pack("{s:s, s:s, s:s, s:o}", "destination", dest, "type", type, "source", type,
			 "options", options);
}

/* No bind mount of anything from the host: the sandbox sees the rootfs and
 * file systems gVisor makes up in its own memory. */
static json_t *mounts_new(const struct sandbox_oci_params *p)
{
	char tmp_size[32], dev_size[32];

	snprintf(tmp_size, sizeof(tmp_size), "size=%um", p->tmpfs_mb);
	snprintf(dev_size, sizeof(dev_size), "size=%uk", APPL_SANDBOX_DEV_TMPFS_KB);
	/* /tmp is noexec: it stops planted files being run, not code (the
	 * interpreter can run anything); gVisor is the boundary that matters.
	 * /out is a second tmpfs like it, whose files the runner sends the
	 * host when the cell ends (the host cannot read gVisor's memory). */
	return json_pack(
		"[o, o, o, o]",
		mount_new("/proc", "proc", json_pack("[s, s, s]", "nosuid", "nodev", "noexec")),
		mount_new("/tmp", "tmpfs",
			  json_pack("[s, s, s, s, s]", "nosuid", "nodev", "noexec", "mode=1777",
				    tmp_size)),
		mount_new("/out", "tmpfs",
			  json_pack("[s, s, s, s, s]", "nosuid", "nodev", "noexec", "mode=1777",
				    tmp_size)),
		mount_new("/dev", "tmpfs",
			  json_pack("[s, s, s, s]", "nosuid", "noexec", "mode=755", dev_size)));
}

static json_t *namespaces_new(void)
{
	return json_pack("[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type", "ipc",
			 "type", "uts", "type", "mount", "type", "network");
}

/* As root only: the memory cgroup covers the whole sandbox (the code's
 * processes and gVisor's own kernel and file proxy, hence the allowance),
 * and the CPU quota is one CPU. No pids entry, ever (see ociconfig.h). */
static json_t *resources_new(const struct sandbox_oci_params *p)
{
	json_int_t mem = ((json_int_t)p->memory_mb + APPL_GVISOR_ALLOWANCE_MB) * MIB;

	return json_pack("{s:{s:I}, s:{s:I, s:I}}", "memory", "limit", mem, "cpu", "quota",
			 (json_int_t)APPL_SANDBOX_CPU_PERIOD_US, "period",
			 (json_int_t)APPL_SANDBOX_CPU_PERIOD_US);
}

static json_t *linux_new(const struct sandbox_oci_params *p)
{
	json_t *lx = json_pack("{s:o}", "namespaces", namespaces_new());

	if (!lx || p->rootless)
		return lx;
	if (json_object_set_new(lx, "resources", resources_new(p)) < 0 ||
	    (p->cgroups_path &&
	     json_object_set_new(lx, "cgroupsPath", json_string(p->cgroups_path)) < 0)) {
		json_decref(lx);
		return NULL;
	}
	return lx;
}

json_t *sandbox_ociconfig_new(const struct sandbox_oci_params *p, struct appl_err *err)
{
	json_t *cfg;

	if (params_check(p, err) < 0)
		return NULL;
	/* json_pack's "o" steals even on failure, and a NULL from a failed
	 * inner pack fails the outer one: one check covers every allocation. */
	cfg = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process",
			process_new(p), "root", "path", p->rootfs, "readonly", 1, "hostname",
			SANDBOX_HOSTNAME, "mounts", mounts_new(p), "linux", linux_new(p));
	/* runsc's rootfs hint: the Sentry mounts the image file read-only as
	 * its root, with no overlay and no gofer process for it. root.path
	 * stays, as the spec requires one. */
	if (cfg && p->rootfs_image &&
	    json_object_set_new(cfg, "annotations",
				json_pack("{s:s, s:s}", "dev.gvisor.spec.rootfs.source",
					  p->rootfs_image, "dev.gvisor.spec.rootfs.type",
					  "erofs")) < 0) {
		json_decref(cfg);
		cfg = NULL;
	}
	if (!cfg)
		appl_err_set(err, -ENOMEM, "OCI config: out of memory");
	return cfg;
}
