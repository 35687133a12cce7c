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
#include "check/internal.h"
#include "image/image.h"
#include "sandbox/runsc.h"

#define CHECK_MEMCG "/sys/fs/cgroup/memory"

void check_machine_image(struct check *c)
{
	struct appl_err err = {0};

	if (engine_image_verify(c->e, &err) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "image.digest: %s", err.msg);
		return;
	}
	c->image_ok = true;
	check_report_say(c, CHECK_MARK_OK, "image: %s verified, unpacked at %s",
			 policy_image_digest(c->cp.policy), engine_rootfs(c->e, NULL));
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
	if (access(CHECK_MEMCG "/memory.limit_in_bytes", F_OK) < 0) {
		check_report_say(c, CHECK_MARK_WARNING,
				 "cgroups: no cgroup v1 memory hierarchy at %s: runsc's own cgroup "
				 "still limits memory, but a cell that dies of it is reported as "
				 "exit, not memory",
				 CHECK_MEMCG);
		return;
	}
	if (memcg_try(c, why, sizeof(why)) < 0) {
		check_report_say(c, CHECK_MARK_PROBLEM, "cgroups: %s", why);
		return;
	}
	check_report_say(c, CHECK_MARK_OK,
			 "cgroups: a memory cgroup of %u MiB per sandbox can be made in %s",
			 c->lim.memory_mb + APPL_GVISOR_ALLOWANCE_MB, CHECK_MEMCG);
}
