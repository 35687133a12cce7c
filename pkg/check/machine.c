/* machine.c: part 1's judgement of this machine: the image against its
 * digest, runsc and how it mounts the rootfs, the memory cgroups
 * (internal.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "cgroup/cgroup.h"
#include "check/internal.h"
#include "engine/process.h"
#include "image/image.h"
#include "sandbox/runsc.h"
#include "trace/trace.h"

#define CHECK_MEMCG "/sys/fs/cgroup/memory"

/* The SBOM beside the layout: what the image holds, in a line. */
static void sbom_part(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct appl_err err = {0};
	struct image_sbom sb;
	int rc = image_sbom_read(policy_image_layout(p), policy_image_digest(p), &sb, &err);

	if (rc == 0)
		check_report_say(c, CHECK_MARK_OK, "image: %u Debian packages, listed in %s (%s)",
				 sb.packages, sb.path, sb.version);
	else if (rc == -ENOENT)
		check_report_say(c, CHECK_MARK_WARNING,
				 "image: no SBOM beside the layout (%s): what the image holds is "
				 "not listed; scripts/build-image writes one beside each image",
				 sb.path);
	else
		check_report_say(c, CHECK_MARK_PROBLEM, "image: the SBOM: %s", err.msg);
}

void check_machine_image(struct check *c)
{
	struct appl_err err = {0};

	if (engine_image_verify(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "image.digest: %s", err.msg);
		return;
	}
	/* What the image says it needs is the policy's limit to change. */
	if (engine_image_needs(c->cp.policy, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "%s", err.msg);
		return;
	}
	c->image_ok = true;
	check_report_say(c, CHECK_MARK_OK, "image: %s verified, unpacked at %s",
			 policy_image_digest(c->cp.policy), engine_rootfs(c->e, NULL));
	sbom_part(c);
}

/* Whether the verified rootfs can be handed to runsc as one image. */
static void rootfs_part(struct check *c)
{
	struct appl_err err = {0};
	const char *image = NULL;

	if (engine_rootfs_mount(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "runtime: the rootfs as one image: %s",
				 err.msg);
		c->image_ok = false;
		return;
	}
	engine_rootfs(c->e, &image);
	if (image)
		check_report_say(c, CHECK_MARK_OK,
				 "rootfs: mounted by the Sentry from %s (no gofer process)", image);
	else
		check_report_say(c, CHECK_MARK_OK,
				 "rootfs: served as a directory through a gofer (this runsc "
				 "mounts no EROFS image)");
}

void check_machine_runtime(struct check *c)
{
	const struct policy *p = c->cp.policy;
	struct appl_err err = {0};

	if (engine_runtime_open(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "runtime.runsc: %s", err.msg);
		return;
	}
	check_report_say(c, CHECK_MARK_OK, "runtime: %s %s, platform %s%s", policy_runtime_runsc(p),
			 sandbox_rt_version(engine_runtime(c->e)), policy_runtime_platform(p),
			 policy_runtime_rootless(p) ? ", rootless" : "");
	if (c->image_ok)
		rootfs_part(c);
}

/* What run needs as root: a memory cgroup of its own per sandbox, made
 * below CHECK_MEMCG/appliance and given the limit (pkg/sandbox). Tried
 * for real with a cgroup of check's own, removed at once. */
static int memcg_try(const struct check *c, char *why, size_t cap)
{
	char dir[PATH_MAX], file[PATH_MAX + 32], val[32];
	unsigned long long limit = ((unsigned long long)c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB)
				   << 20;
	int fd, n, rc = 0;

	snprintf(dir, sizeof(dir), "%s/appliance/check-%ld", CHECK_MEMCG, (long)getpid());
	snprintf(file, sizeof(file), "%s/memory.limit_in_bytes", dir);
	n = snprintf(val, sizeof(val), "%llu", limit);
	if ((rc = appl_mkdir_parents(dir, 0755)) < 0 || (mkdir(dir, 0755) < 0 && errno != EEXIST)) {
		snprintf(why, cap, "creating %s: %s", dir, strerror(rc < 0 ? -rc : errno));
		return -1;
	}
	fd = open(file, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, val, (size_t)n) != n) {
		snprintf(why, cap, "setting %s: %s", file, strerror(errno));
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	rmdir(dir);
	return rc;
}

/* v2: the subtree made the appliance's (this process moved into its
 * leaf, the controllers handed down), then a cgroup of check's own below
 * it given a sandbox's memory limit and a pids limit (servers have one),
 * removed at once. */
static int subtree_try(const struct check *c, char *why, size_t cap)
{
	char dir[PATH_MAX], rel[64], val[32];
	unsigned long long limit = ((unsigned long long)c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB)
				   << 20;
	struct appl_err err = {0};
	int rc;

	snprintf(rel, sizeof(rel), "cells/check-%ld", (long)getpid());
	snprintf(val, sizeof(val), "%llu", limit);
	if (engine_cgroups_settle(&err) < 0 || cg_make(cg_host(), rel, false, dir, &err) < 0) {
		snprintf(why, cap, "%s", err.msg);
		return -1;
	}
	rc = cg_write(dir, "memory.max", val, &err) < 0 ||
			     cg_write(dir, "memory.swap.max", "0", &err) < 0 ||
			     cg_write(dir, "pids.max", "64", &err) < 0
		     ? -1
		     : 0;
	if (rc < 0)
		snprintf(why, cap, "%s", err.msg);
	rmdir(dir);
	return rc;
}

static void cgroups_v2(struct check *c)
{
	const struct cg_host *h = cg_host();
	char why[PATH_MAX + 256];

	if (subtree_try(c, why, sizeof(why)) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cgroups: cgroup v2: %s", why);
		return;
	}
	check_report_say(c, CHECK_MARK_OK,
			 "cgroups: cgroup v2; the appliance's subtree is %s%s (this process in "
			 "its leaf supervisor); a sandbox's memory cgroup of %u MiB and a "
			 "server's pids limit can be set in it",
			 h->mount, h->subtree, c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB);
}

void check_machine_cgroups(struct check *c)
{
	char why[PATH_MAX + 128];

	if (policy_runtime_rootless(c->cp.policy)) {
		check_report_say(c, CHECK_MARK_WARNING,
				 "runtime.rootless: no cgroups in rootless mode: memory is bounded "
				 "per process only (SECURITY.md)");
		return;
	}
	if (geteuid() != 0)
		return; /* refused above */
	if (cg_host()->kind == CG_V2) {
		cgroups_v2(c);
		return;
	}
	if (access(CHECK_MEMCG "/memory.limit_in_bytes", F_OK) < 0) {
		check_report_say(c, CHECK_MARK_WARNING,
				 "cgroups: neither cgroup v2 nor a cgroup v1 memory hierarchy at "
				 "%s: runsc's own cgroup still limits memory, but a cell that dies "
				 "of it is reported as exit, not memory",
				 CHECK_MEMCG);
		return;
	}
	if (memcg_try(c, why, sizeof(why)) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cgroups: cgroup v1: %s", why);
		return;
	}
	check_report_say(c, CHECK_MARK_OK,
			 "cgroups: cgroup v1; a memory cgroup of %u MiB per sandbox can be "
			 "made in %s",
			 c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB, CHECK_MEMCG);
}

/* With `telemetry`: one span sent to the collector the way run sends its
 * spans, and whether it took it. A collector that does not is a warning:
 * run starts all the same, and only loses its spans. */
void check_machine_telemetry(struct check *c)
{
	struct trace_config tc = {.endpoint = policy_telemetry_endpoint(c->cp.policy),
				  .service_name = policy_telemetry_service(c->cp.policy)};
	struct appl_err err = {0};
	struct tracer *t = NULL;

	if (!tc.endpoint)
		return;
	if (tracer_new(engine_loop(c->e), &tc, &t, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "telemetry: %s", err.msg);
		return;
	}
	trace_span_end(trace_span_start(t, NULL, "appliance check", TRACE_INTERNAL));
	tracer_flush(t, CHECK_TELEMETRY_WAIT_MS);
	if (tracer_exported(t) == 1)
		check_report_say(c, CHECK_MARK_OK,
				 "telemetry: the collector at %s/v1/traces took a span (OTLP/HTTP, "
				 "JSON)",
				 tc.endpoint);
	else
		check_report_say(
			c, CHECK_MARK_WARNING,
			"telemetry: the collector at %s/v1/traces did not take a span "
			"within %u s (the log says why): run would lose its spans, and run "
			"its cells all the same",
			tc.endpoint, CHECK_TELEMETRY_WAIT_MS / 1000);
	tracer_free(t);
}
