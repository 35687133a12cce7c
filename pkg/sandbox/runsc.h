/* runsc.h: running cell sandboxes with runsc, one appliance instance's worth.
 *
 * An instance owns a private state directory, held with flock for its whole
 * life: runsc's --root, the bundles, the logs. Another instance (a sibling
 * appliance) has its own and never touches ours; an instance that finds a
 * directory whose lock nobody holds knows its owner crashed, and removes
 * what it left (runsc state, bundles, cgroups).
 */
#ifndef APPL_SANDBOX_RUNSC_H
#define APPL_SANDBOX_RUNSC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "loop/loop.h"
#include "sandbox/ociconfig.h"

struct sandbox_rt;
struct sandbox;

struct sandbox_rt_config {
	const char *runsc;     /* absolute path of runsc; NULL: SANDBOX_RUNSC_DEFAULT */
	const char *state_dir; /* where instances live; NULL: the default for this user */
	const char *platform;  /* gVisor platform; NULL: SANDBOX_PLATFORM_DEFAULT */
	bool rootless;	       /* runsc --rootless (explicit opt-in, weaker) */
};

#define SANDBOX_RUNSC_DEFAULT	 "/usr/bin/runsc"
#define SANDBOX_PLATFORM_DEFAULT "systrap"

/* A gVisor release, as `runsc --version` names it. */
struct sandbox_runsc_version {
	unsigned date;	/* YYYYMMDD */
	unsigned patch; /* the .N after it */
	char text[64];	/* the version as printed ("0.0~20240729.0") */
};

/* Parse the output of `runsc --version`: a first line "runsc version V"
 * where V holds the release as YYYYMMDD.N (Debian prints
 * "0.0~20240729.0", gVisor's own builds "release-20240729.0"). Pure.
 * 0, or -EINVAL. */
int sandbox_runsc_version_parse(const char *out, size_t len, struct sandbox_runsc_version *v);

/* Run `runsc --version` (explicit environment, output capped at
 * APPL_RUNSC_VERSION_OUT_MAX, APPL_RUNSC_VERSION_TIMEOUT_MS at most) and
 * parse it into v. */
int sandbox_runsc_version_get(const char *runsc, struct sandbox_runsc_version *v,
			      struct appl_err *err);

/* 0 when v is at least the release the appliance was tested with
 * (APPL_RUNSC_TESTED_DATE.APPL_RUNSC_TESTED_PATCH in limits.h), else
 * -EPROTONOSUPPORT naming both. */
int sandbox_runsc_version_check(const struct sandbox_runsc_version *v, const char *runsc,
				struct appl_err *err);

/* Open an instance: refuse a non-root caller unless rootless, check runsc
 * (an executable at least the tested release) and the platform (kvm needs
 * a usable /dev/kvm), clean up crashed instances, create and lock our own
 * directory. New object, or NULL with err filled. The instance's names are
 * drawn from libsodium's generator: the caller must have called
 * sodium_init() (cmd/appliance/main.c does, for every command, before it
 * dispatches); this module never changes the process's state itself. */
struct sandbox_rt *sandbox_rt_open(const struct sandbox_rt_config *cfg, struct appl_err *err);

/* The instance's private directory (root's, 0700, removed at close);
 * borrowed. */
const char *sandbox_rt_dir(const struct sandbox_rt *rt);

/* The runsc release in use ("0.0~20240729.0"); borrowed. */
const char *sandbox_rt_version(const struct sandbox_rt *rt);

/* Whether this runsc mounts an EROFS image as a sandbox's root (releases
 * from APPL_RUNSC_EROFS_DATE on, limits.h). */
bool sandbox_rt_erofs(const struct sandbox_rt *rt);

/* The rootfs directory as one EROFS image file beside it (ROOTFS.erofs),
 * for sandbox_oci_params.rootfs_image, when rt's runsc can mount one
 * (sandbox_rt_erofs); else image is "". Built once by SANDBOX_MKFS_EROFS
 * into an unnamed file, linked in under its name when complete, then kept
 * like the directory (the same private cache; never rewritten). Every file
 * keeps its mode and mtime (the image's .pyc files check their sources'
 * mtimes) and is owned by root, as in the layers. 0, or -errno with err
 * filled (mkfs.erofs missing, failed or slower than
 * APPL_MKFS_EROFS_TIMEOUT_MS). */
int sandbox_rootfs_image(const struct sandbox_rt *rt, const char *rootfs, char *image, size_t len,
			 struct appl_err *err);

#define SANDBOX_MKFS_EROFS "/usr/bin/mkfs.erofs"

/* Destroy every sandbox still running, remove the instance directory. */
void sandbox_rt_close(struct sandbox_rt *rt);

/* Boot one sandbox: write its bundle (config.json from p; p->cgroups_path is
 * set by this call when running as root) and start `runsc run`. The runner's
 * stdin and stdout are pipes; stderr and runsc's own log go to the bundle's
 * log file. New object, or NULL with err filled. */
struct sandbox *sandbox_start(struct sandbox_rt *rt, const struct sandbox_oci_params *p,
			      struct appl_err *err);

/* Boot one sandbox as sandbox_start does, but from the checkpoint in the
 * directory image (`runsc restore`; root only, else -ENOTSUP): its runner
 * continues where the checkpointed one stopped, its stdin and stdout are
 * the new sandbox's pipes. p must describe the same rootfs and mounts as
 * the checkpointed sandbox's. New object, or NULL with err filled. */
struct sandbox *sandbox_restore(struct sandbox_rt *rt, const struct sandbox_oci_params *p,
				const char *image, struct appl_err *err);

/* Save sb's whole state to the new directory image (created 0700; it must
 * not exist) with `runsc checkpoint` and wait for it (blocking, at most
 * 5 s). The sandbox ends: runsc run exits, and sb is still the caller's to
 * destroy. 0, or -errno with err filled (-ENOTSUP rootless). */
int sandbox_checkpoint(struct sandbox *sb, const char *image, struct appl_err *err);

/* Freeze (or thaw) every process of sb with its cgroup's freezer: a frozen
 * sandbox uses no CPU at all, and its processes are not told. 0, or -errno
 * with err filled: -ENOTSUP without a freezer (rootless, no hierarchy). */
int sandbox_freeze(struct sandbox *sb, bool frozen, struct appl_err *err);

/* The kernel's own word on a sandbox's freezer, read back from its cgroup
 * (never sb's record of what was asked). */
enum sandbox_freezer_state {
	SANDBOX_THAWED,
	SANDBOX_FREEZING, /* asked to freeze, not every task stopped yet */
	SANDBOX_FROZEN,
};

struct sandbox_freezer {
	enum sandbox_freezer_state state;
	char path[PATH_MAX]; /* the file read */
	char said[48];	     /* what it said: "freezer.state FROZEN", "cgroup.events frozen 1" */
};

/* The state in the text of a freezer's state file: cgroup v1's
 * freezer.state ("THAWED", "FREEZING" or "FROZEN", one line), or v2's
 * cgroup.events, whose "frozen" key is 1 or 0 (v2 says nothing of
 * freezing: sandbox_freezer_read asks cgroup.freeze). Pure. 0, or -EINVAL
 * for anything else. */
int sandbox_freezer_parse(const char *text, bool v2, enum sandbox_freezer_state *state);

/* Read the kernel's freezer state of sb's cgroup (the one sandbox_freeze
 * writes) into out: v1 freezer.state, v2 cgroup.events (FREEZING when
 * cgroup.freeze asks 1 and the kernel does not say frozen yet). 0, or
 * -errno with err filled: -ENOTSUP when sb has no freezer (rootless, no
 * hierarchy). */
int sandbox_freezer_read(const struct sandbox *sb, struct sandbox_freezer *out,
			 struct appl_err *err);

/* Whether a frozen sandbox was killed while frozen: a frozen process cannot
 * die, so the kill waits, pending, until it is thawed. Read from each of its
 * processes' status. false for a sandbox that is not frozen. */
bool sandbox_doomed(const struct sandbox *sb);

/* Descriptors of a running sandbox (borrowed, non-blocking, close-on-exec):
 * to the runner's stdin, from the runner's stdout, and a pidfd that becomes
 * readable when `runsc run` exits. */
int sandbox_fd_in(const struct sandbox *sb);
int sandbox_fd_out(const struct sandbox *sb);
int sandbox_pidfd(const struct sandbox *sb);
const char *sandbox_id(const struct sandbox *sb);

/* 1 when the sandbox hit its memory limit (root only: its memory cgroup
 * counted a failure to charge). Read it before sandbox_destroy. */
int sandbox_oom_killed(const struct sandbox *sb);

/* The memory the sandbox holds now (its processes' anonymous and shared
 * pages, from its memory cgroup), in *out bytes: 0, or -ENOENT where it
 * has no memory cgroup of ours (rootless), -EIO when it cannot be read. */
int sandbox_memory_bytes(const struct sandbox *sb, uint64_t *out);

/* SIGKILL the sandbox now, without waiting or cleaning up: the code stops
 * at once; sandbox_destroy does the rest later. */
void sandbox_kill(struct sandbox *sb);

/* Kill the sandbox and everything of it, delete its runsc state, cgroups and
 * bundle, close its descriptors and free it. Safe on NULL. */
void sandbox_destroy(struct sandbox *sb);

/* Destroy sb without blocking loop: it is killed now, and the rest (reaping
 * runsc, `runsc delete`, cgroups, the bundle) follows from loop as its
 * processes exit. sb is gone for the caller at once. A teardown still under
 * way when the runtime closes is finished by sandbox_rt_close, which must
 * come before loop is freed. */
void sandbox_destroy_async(struct sandbox *sb, struct loop *loop);

/* The runner of sb ended by itself (it said done and exits): a later
 * sandbox_destroy_async lets runsc end on its own, for at most half a
 * second, before it kills it and runs runsc delete as for any other. A
 * runsc run that ended so has removed its state; what a runsc restore
 * leaves is deleted in a batch with other dead sandboxes (no process left
 * in their memory cgroups; root only), one runsc delete for up to 16,
 * within 2 s. A runner that lies (the code forged done) gains that half
 * second at most. */
void sandbox_ending(struct sandbox *sb);

/* Finish now every teardown of rt still under way from a loop (blocking):
 * for an owner about to free that loop. */
void sandbox_rt_settle(struct sandbox_rt *rt);

#endif
