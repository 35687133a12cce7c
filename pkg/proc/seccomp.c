/* seccomp.c: the deny list of upstream MCP servers (see seccomp.h and
 * docs/seccomp.md), compiled by libseccomp into classic BPF. */
#define _GNU_SOURCE
#include "proc/seccomp.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fs.h"
#include "log/log.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* The kernel refuses a longer program; libseccomp's is far shorter. */
#define FILTER_BYTES_MAX (BPF_MAXINSNS * sizeof(struct sock_filter))
/* Native system call numbers libseccomp's table is searched for. */
#define TABLE_SCAN_END 1024
/* x86_64's x32 calls start here; below it, a number past the table is a
 * native call newer than libseccomp. */
#define X32_SYSCALL_BIT 0x40000000u

struct proc_filter {
	unsigned short len;
	struct sock_filter insns[];
};

/* Refused whatever the arguments, and with which errno. Debugging and
 * reaching other processes (ptrace, process_vm_*, pidfd_getfd, kcmp); the
 * mount table and the root (mount, the new mount API, pivot_root, chroot);
 * namespaces (unshare, setns); the kernel's code and its riskiest parsers
 * (bpf, modules, kexec, io_uring, userfaultfd, perf); the kernel's
 * keyrings, which may hold other users' secrets; files by handle, past
 * every directory permission (open_by_handle_at); and the host's state
 * (quotas, swap, reboot, accounting, I/O ports, the clock). clone3 gets
 * ENOSYS: its flags sit in memory a filter cannot read, and on ENOSYS
 * glibc falls back to clone, whose flags it can (below). */
#define DENIED(X)                                                                                  \
	X(ptrace, EPERM)                                                                           \
	X(process_vm_readv, EPERM)                                                                 \
	X(process_vm_writev, EPERM)                                                                \
	X(pidfd_getfd, EPERM)                                                                      \
	X(kcmp, EPERM)                                                                             \
	X(mount, EPERM)                                                                            \
	X(umount2, EPERM)                                                                          \
	X(pivot_root, EPERM)                                                                       \
	X(chroot, EPERM)                                                                           \
	X(fsopen, EPERM)                                                                           \
	X(fsconfig, EPERM)                                                                         \
	X(fsmount, EPERM)                                                                          \
	X(fspick, EPERM)                                                                           \
	X(open_tree, EPERM)                                                                        \
	X(move_mount, EPERM)                                                                       \
	X(mount_setattr, EPERM)                                                                    \
	X(unshare, EPERM)                                                                          \
	X(setns, EPERM)                                                                            \
	X(bpf, EPERM)                                                                              \
	X(kexec_load, EPERM)                                                                       \
	X(kexec_file_load, EPERM)                                                                  \
	X(init_module, EPERM)                                                                      \
	X(finit_module, EPERM)                                                                     \
	X(delete_module, EPERM)                                                                    \
	X(keyctl, EPERM)                                                                           \
	X(add_key, EPERM)                                                                          \
	X(request_key, EPERM)                                                                      \
	X(userfaultfd, EPERM)                                                                      \
	X(perf_event_open, EPERM)                                                                  \
	X(io_uring_setup, EPERM)                                                                   \
	X(io_uring_enter, EPERM)                                                                   \
	X(io_uring_register, EPERM)                                                                \
	X(open_by_handle_at, EPERM)                                                                \
	X(name_to_handle_at, EPERM)                                                                \
	X(quotactl, EPERM)                                                                         \
	X(quotactl_fd, EPERM)                                                                      \
	X(swapon, EPERM)                                                                           \
	X(swapoff, EPERM)                                                                          \
	X(reboot, EPERM)                                                                           \
	X(acct, EPERM)                                                                             \
	X(lookup_dcookie, EPERM)                                                                   \
	X(iopl, EPERM)                                                                             \
	X(ioperm, EPERM)                                                                           \
	X(vhangup, EPERM)                                                                          \
	X(settimeofday, EPERM)                                                                     \
	X(clock_settime, EPERM)                                                                    \
	X(clock_adjtime, EPERM)                                                                    \
	X(adjtimex, EPERM)                                                                         \
	X(clone3, ENOSYS)

#define DENY_NAME(name, e)  #name,
#define DENY_ERRNO(name, e) e,
static const char *const denied_names[] = {DENIED(DENY_NAME) NULL};
static const int denied_errno[] = {DENIED(DENY_ERRNO)};
_Static_assert(sizeof(denied_names) / sizeof(denied_names[0]) ==
		       sizeof(denied_errno) / sizeof(denied_errno[0]) + 1,
	       "one errno per name");

/* clone with any of these makes a namespace: a new user namespace gives
 * its creator every capability over it, and with them the kernel code
 * behind those capabilities. Ordinary threads and fork set none. */
static const unsigned long clone_ns_flags[] = {
	CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
	CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP, CLONE_NEWTIME,
};

/* TIOCSTI pushes bytes into a terminal's input, as if typed there (into
 * whatever shell reads it); TIOCLINUX can do the same on a console. */
static const unsigned long ioctl_denied[] = {TIOCSTI, TIOCLINUX};

/* Netlink reaches the kernel's configuration interfaces (routes, firewall,
 * audit, and many more parsers); packet sockets see and forge raw frames. */
static const int socket_denied[] = {AF_NETLINK, AF_PACKET};

const char *const *proc_filter_denied(void)
{
	return denied_names;
}

static int rule_fail(struct appl_err *err, int rc, const char *what)
{
	return appl_err_set(err, rc, "seccomp: a rule for %s: %s", what, strerror(-rc));
}

static int add_denied(scmp_filter_ctx ctx, struct appl_err *err)
{
	for (size_t i = 0; denied_names[i]; i++) {
		int nr = seccomp_syscall_resolve_name(denied_names[i]);
		int rc;

		/* A name libseccomp does not know would leave the call open:
		 * refuse to build rather than run without that rule. */
		if (nr == __NR_SCMP_ERROR)
			return appl_err_set(err, -ENOENT, "seccomp: libseccomp does not know %s",
					    denied_names[i]);
		/* A known call this architecture lacks (iopl on arm64): the
		 * kernel has no entry point to close. */
		if (nr < 0)
			continue;
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(denied_errno[i]), nr, 0);
		if (rc < 0)
			return rule_fail(err, rc, denied_names[i]);
	}
	return 0;
}

/* Which argument of clone holds the flags: the first, but s390 swaps the
 * first two. */
static unsigned clone_flags_arg(void)
{
	uint32_t arch = seccomp_arch_native();

	return arch == SCMP_ARCH_S390 || arch == SCMP_ARCH_S390X ? 1 : 0;
}

static int add_clone(scmp_filter_ctx ctx, struct appl_err *err)
{
	unsigned arg = clone_flags_arg();

	for (size_t i = 0; i < sizeof(clone_ns_flags) / sizeof(clone_ns_flags[0]); i++) {
		struct scmp_arg_cmp cmp =
			SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, clone_ns_flags[i], clone_ns_flags[i]);
		int rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
						&cmp);

		if (rc < 0)
			return rule_fail(err, rc, "clone");
	}
	return 0;
}

/* ioctl's request and socket's domain and type are 32-bit in the kernel,
 * which drops the upper half of the register: a comparison of all 64 bits
 * would let TIOCSTI through with a bit set above them. Only the lower
 * half is compared. */
#define LOW32 0xffffffffu

static int add_ioctl(scmp_filter_ctx ctx, struct appl_err *err)
{
	for (size_t i = 0; i < sizeof(ioctl_denied) / sizeof(ioctl_denied[0]); i++) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
					  SCMP_A1(SCMP_CMP_MASKED_EQ, LOW32, ioctl_denied[i]));

		if (rc < 0)
			return rule_fail(err, rc, "ioctl");
	}
	return 0;
}

static int add_socket(scmp_filter_ctx ctx, struct appl_err *err)
{
	int rc;

	for (size_t i = 0; i < sizeof(socket_denied) / sizeof(socket_denied[0]); i++) {
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, socket_denied[i]));
		if (rc < 0)
			return rule_fail(err, rc, "socket");
	}
	/* The kernel still turns the obsolete (AF_INET, SOCK_PACKET) into a
	 * packet socket; the type's low four bits are its kind, the rest
	 * flags (SOCK_CLOEXEC). */
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
			      SCMP_A0(SCMP_CMP_MASKED_EQ, LOW32, AF_INET),
			      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xfu, SOCK_PACKET));
	return rc < 0 ? rule_fail(err, rc, "socket") : 0;
}

static int ctx_build(scmp_filter_ctx *out, struct appl_err *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	if (!ctx)
		return appl_err_set(err, -ENOMEM, "seccomp: out of memory");
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (rc < 0) {
		appl_err_set(err, rc, "seccomp: the bad-architecture action: %s", strerror(-rc));
		goto fail;
	}
	/* A binary tree: every call of the server passes the filter. */
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0) {
		appl_err_set(err, rc, "seccomp: the optimisation level: %s", strerror(-rc));
		goto fail;
	}
	if ((rc = add_denied(ctx, err)) < 0 || (rc = add_clone(ctx, err)) < 0 ||
	    (rc = add_ioctl(ctx, err)) < 0 || (rc = add_socket(ctx, err)) < 0)
		goto fail;
	*out = ctx;
	return 0;
fail:
	seccomp_release(ctx);
	return rc;
}

/* libseccomp 2.5.4 exports only to a descriptor: a memfd, read back. */
static int ctx_export(scmp_filter_ctx ctx, char **buf, size_t *len, struct appl_err *err)
{
	int fd = memfd_create("proc-filter", MFD_CLOEXEC);
	int rc;

	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "seccomp: memfd_create");
	rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0) {
		appl_err_set(err, rc, "seccomp: export: %s", strerror(-rc));
	} else if (lseek(fd, 0, SEEK_SET) < 0) {
		rc = appl_err_errno(err, -errno, errno, "seccomp: lseek");
	} else {
		rc = appl_fd_read(fd, FILTER_BYTES_MAX, "seccomp filter", buf, len, err);
		if (rc == 0 && (*len == 0 || *len % sizeof(struct sock_filter))) {
			free(*buf);
			*buf = NULL;
			rc = appl_err_set(err, -EINVAL, "seccomp: an export of %zu bytes", *len);
		}
	}
	close(fd);
	return rc;
}

/* The highest native number libseccomp can name, or -1 when this
 * architecture's numbers are not known to be dense below TABLE_SCAN_END
 * (then nothing past the table is refused). */
static int table_last(uint32_t arch)
{
	int last = -1;

	if (arch != SCMP_ARCH_X86_64 && arch != SCMP_ARCH_AARCH64 && arch != SCMP_ARCH_RISCV64)
		return -1;
	for (int nr = 0; nr < TABLE_SCAN_END; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(arch, nr);

		if (name)
			last = nr;
		free(name);
	}
	return last;
}

/* Ahead of libseccomp's program (whose jumps are relative): a native call
 * numbered past the table, below the x32 range, gets ENOSYS. A deny list
 * only refuses what it names, and a newer kernel's calls (open_tree_attr,
 * 6.15, another door into the mount API) are unknown to it; ENOSYS is what
 * an older kernel says, so programs fall back as they would there.
 * Anything else goes on to the program with the accumulator zeroed, as a
 * program starts. */
#define PRELUDE_LEN 7

static void prelude_fill(struct sock_filter *p, uint32_t arch, uint32_t last)
{
	const struct sock_filter prelude[PRELUDE_LEN] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, last, 0, 2),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, X32_SYSCALL_BIT, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_LD | BPF_W | BPF_IMM, 0),
	};

	memcpy(p, prelude, sizeof(prelude));
}

static int filter_make(const char *bpf, size_t len, struct proc_filter **out, struct appl_err *err)
{
	uint32_t arch = seccomp_arch_native();
	int last = table_last(arch);
	size_t n = len / sizeof(struct sock_filter), pre = last >= 0 ? PRELUDE_LEN : 0;
	struct proc_filter *f;

	if (n + pre > BPF_MAXINSNS)
		return appl_err_set(err, -E2BIG, "seccomp: a filter of %zu instructions", n + pre);
	f = calloc(1, sizeof(*f) + (n + pre) * sizeof(struct sock_filter));
	if (!f)
		return appl_err_set(err, -ENOMEM, "seccomp: out of memory");
	if (pre)
		prelude_fill(f->insns, arch, (uint32_t)last);
	memcpy(f->insns + pre, bpf, len);
	f->len = (unsigned short)(n + pre);
	log_line(LOG_DEBUG, NULL, "seccomp: a filter of %u instructions, calls past %d get ENOSYS",
		 f->len, last);
	*out = f;
	return 0;
}

int proc_filter_build(struct proc_filter **out, struct appl_err *err)
{
	scmp_filter_ctx ctx = NULL;
	char *bpf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	rc = ctx_build(&ctx, err);
	if (rc < 0)
		return rc;
	rc = ctx_export(ctx, &bpf, &len, err);
	seccomp_release(ctx);
	if (rc == 0)
		rc = filter_make(bpf, len, out, err);
	free(bpf);
	return rc;
}

void proc_filter_free(struct proc_filter *f)
{
	free(f);
}

int proc_filter_install(const struct proc_filter *f)
{
	struct sock_fprog prog;
	int nnp;

	if (!f)
		return -EINVAL;
	nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
	if (nnp < 0)
		return -errno;
	if (nnp != 1)
		return -EPERM;
	/* The kernel copies the program and never writes it. */
	prog.len = f->len;
	prog.filter = (struct sock_filter *)f->insns;
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		return -errno;
	return 0;
}
