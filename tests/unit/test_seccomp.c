/* test_seccomp.c: the upstream servers' system call filter refuses, for
 * real, what it lists (and the tricks around it), lets ordinary work go on,
 * and fails closed when libseccomp does not know a name. Each attempt runs
 * in a forked child with its own mount namespace and a tmpfs of its own, so
 * a refusal that failed lands nowhere; the results come back over a pipe.
 * Runs as root: root could do every refused thing otherwise, which the
 * control test shows. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "proc/seccomp.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define POISON	     (-1L) /* every argument: each call fails harmlessly unfiltered */
#define HIGH32	     (1UL << 32)
#define SETUP_FAILED (-100000) /* a result below this: the child's setup step */
#define RESULTS_MAX  128
#define NODE_WAIT_MS 30000 /* a generous bound; the test waits on the answer */
/* Numbers past libseccomp's table that some kernel implements (up to
 * file_setattr, 6.17): each must get ENOSYS from the filter. */
#define KNOWN_KERNEL_LAST 469

extern char **environ;

static struct proc_filter *filter;
static char scratch[] = "/tmp/appl-seccomp-XXXXXX"; /* a tmpfs in each child */
static char mnt_dir[64], file_path[64];
static long peek_me = 0x5ecc0de;
static union {
	struct file_handle fh;
	unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
} handle;

/* ---- a libseccomp that has not heard of one name ------------------------------- */

static const char *pretend_unknown;

/* Interposed over libseccomp's own (the executable's definition wins): with
 * pretend_unknown set, that name resolves as libseccomp resolves a name it
 * does not know. */
int seccomp_syscall_resolve_name(const char *name)
{
	static int (*real)(const char *);

	if (pretend_unknown && strcmp(name, pretend_unknown) == 0)
		return __NR_SCMP_ERROR;
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "seccomp_syscall_resolve_name");
	return real ? real(name) : __NR_SCMP_ERROR;
}

/* ---- attempts: 0 when the call succeeded, else the errno it got ---------------- */

struct attempt {
	const char *name;
	int (*fn)(long arg);
	long arg;
	int want; /* under the filter */
};

static int result(long rc)
{
	return rc < 0 ? errno : 0;
}

static int try_mount_tmpfs(long arg)
{
	(void)arg;
	if (mount("appl-test", mnt_dir, "tmpfs", 0, "size=64k") < 0)
		return errno;
	umount2(mnt_dir, MNT_DETACH);
	return 0;
}

/* In a child of its own, so a namespace that came to be changes nothing
 * for the attempts after it. */
static int try_unshare(long flags)
{
	int status;
	pid_t pid = fork();

	if (pid == 0)
		_exit(unshare((int)flags) < 0 ? errno & 0xff : 0);
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
}

/* clone as fork does, with flags added; a child that came to be exits. */
static int try_clone(long flags)
{
	long pid = syscall(SYS_clone, (unsigned long)flags | SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

static int try_clone3(long arg)
{
	struct clone_args ca = {.exit_signal = SIGCHLD};
	long pid = syscall(SYS_clone3, &ca, sizeof(ca));

	(void)arg;
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	waitpid((pid_t)pid, NULL, 0);
	return 0;
}

/* The parent is the test process: attached, it stops until detached. */
static int try_ptrace_parent(long arg)
{
	pid_t parent = getppid();

	(void)arg;
	if (ptrace(PTRACE_ATTACH, parent, 0, 0) < 0)
		return errno;
	waitpid(parent, NULL, __WALL);
	ptrace(PTRACE_DETACH, parent, 0, 0);
	return 0;
}

static int try_vm_readv_parent(long arg)
{
	long got = 0;
	struct iovec local = {&got, sizeof(got)}, remote = {&peek_me, sizeof(peek_me)};

	(void)arg;
	return result(process_vm_readv(getppid(), &local, 1, &remote, 1, 0));
}

static int try_fd(long fd)
{
	if (fd < 0)
		return errno;
	close((int)fd);
	return 0;
}

static int try_bpf(long arg)
{
	union bpf_attr a;

	(void)arg;
	memset(&a, 0, sizeof(a));
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = a.value_size = 4;
	a.max_entries = 1;
	return try_fd(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a)));
}

static int try_keyctl(long arg)
{
	(void)arg;
	return result(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0));
}

static int try_io_uring(long arg)
{
	struct io_uring_params p;

	(void)arg;
	memset(&p, 0, sizeof(p));
	return try_fd(syscall(SYS_io_uring_setup, 4, &p));
}

/* socket as raw registers: the kernel reads only the lower 32 bits of
 * domain and type, so callers may set bits above them. */
static int try_socket_raw(unsigned long domain, unsigned long type)
{
	return try_fd(syscall(SYS_socket, domain, type, 0));
}

static int try_netlink(long high)
{
	return try_socket_raw((unsigned long)high | AF_NETLINK, SOCK_RAW);
}

static int try_packet(long arg)
{
	(void)arg;
	return try_socket_raw(AF_PACKET, SOCK_RAW);
}

/* The obsolete (AF_INET, SOCK_PACKET) the kernel turns into a packet
 * socket; arg adds type flags. */
static int try_inet_packet(long flags)
{
	return try_socket_raw(AF_INET, SOCK_PACKET | (unsigned long)flags);
}

static int try_socket(long domain)
{
	return try_socket_raw((unsigned long)domain, SOCK_STREAM | SOCK_CLOEXEC);
}

/* A pty of our own: the slave's descriptor, or -errno. */
static int pty_slave(int *master)
{
	char name[64];
	int s;

	*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (*master < 0)
		return -errno;
	if (grantpt(*master) < 0 || unlockpt(*master) < 0 ||
	    ptsname_r(*master, name, sizeof(name)) != 0 ||
	    (s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
		int e = errno;
		close(*master);
		return -e;
	}
	return s;
}

/* ioctl on a fresh pty with request arg (its upper half may be set). */
static int try_pty_ioctl(long request)
{
	char c = 'x';
	struct winsize ws;
	void *p = (unsigned long)request == TIOCGWINSZ ? (void *)&ws : (void *)&c;
	int m, s = pty_slave(&m), rc;

	if (s < 0)
		return -s;
	rc = result(syscall(SYS_ioctl, s, (unsigned long)request, p));
	close(s);
	close(m);
	return rc;
}

static int try_setns(long arg)
{
	int fd = open("/proc/self/ns/uts", O_RDONLY | O_CLOEXEC), rc;

	(void)arg;
	if (fd < 0)
		return errno;
	rc = result(setns(fd, CLONE_NEWUTS));
	close(fd);
	return rc;
}

static int try_open_by_handle(long arg)
{
	int dir = open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	(void)arg;
	if (dir < 0)
		return errno;
	rc = try_fd(open_by_handle_at(dir, &handle.fh, O_RDONLY | O_CLOEXEC));
	close(dir);
	return rc;
}

static int try_name_to_handle(long arg)
{
	union {
		struct file_handle fh;
		unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
	} h;
	int mount_id;

	(void)arg;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	return result(name_to_handle_at(AT_FDCWD, file_path, &h.fh, &mount_id, 0));
}

static int try_init_module(long arg)
{
	(void)arg;
	return result(syscall(SYS_init_module, "", 0UL, ""));
}

/* kexec_load with flags no kernel takes: EINVAL where it is reached. */
static int try_kexec_load(long arg)
{
	(void)arg;
	return result(syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xdead0000UL));
}

static int try_poison(long nr)
{
	return result(syscall(nr, POISON, POISON, POISON, POISON, POISON, POISON));
}

/* ---- ordinary work ---------------------------------------------------------------- */

static int wait_ok(pid_t pid)
{
	int status;

	if (pid < 0)
		return errno;
	if (waitpid(pid, &status, 0) != pid)
		return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : ECHILD;
}

static int try_fork(long arg)
{
	pid_t pid = fork();

	(void)arg;
	if (pid == 0)
		_exit(0);
	return wait_ok(pid);
}

static void *thread_main(void *p)
{
	return p;
}

static int try_thread(long arg)
{
	static int token;
	pthread_t t;
	void *back = NULL;
	int rc = pthread_create(&t, NULL, thread_main, &token);

	(void)arg;
	if (rc != 0)
		return rc;
	pthread_join(t, &back);
	return back == &token ? 0 : EINVAL;
}

static int try_file_rw(long arg)
{
	char path[96], got[4] = {0};
	int fd, rc = 0;

	(void)arg;
	snprintf(path, sizeof(path), "%s/rw", scratch);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	if (write(fd, "abc", 3) != 3 || pread(fd, got, 3, 0) != 3)
		rc = errno ? errno : EIO;
	else if (memcmp(got, "abc", 3) != 0)
		rc = EIO;
	close(fd);
	unlink(path);
	return rc;
}

/* argv run by fork and execve (the filter passes through exec). */
static int run_exec(char *const argv[])
{
	pid_t pid = fork();

	if (pid == 0) {
		execve(argv[0], argv, environ);
		_exit(127);
	}
	return wait_ok(pid);
}

static int try_exec_true(long arg)
{
	char *const argv[] = {"/bin/true", NULL};

	(void)arg;
	return run_exec(argv);
}

/* The program exec'ed still runs under the filter. */
static int try_exec_status(long arg)
{
	char *const argv[] = {"/bin/grep", "-q", "^Seccomp:\t2$", "/proc/self/status", NULL};

	(void)arg;
	return run_exec(argv);
}

/* A Python server's usual work: asyncio, a subprocess (posix_spawn or
 * vfork, pidfds), threads, a socketpair. */
static int try_python(long arg)
{
	char *const argv[] = {"/usr/bin/python3", "-I", "-c",
			      "import asyncio, socket, threading\n"
			      "async def main():\n"
			      "    p = await asyncio.create_subprocess_exec('/bin/true')\n"
			      "    assert await p.wait() == 0\n"
			      "    r, w = socket.socketpair()\n"
			      "    w.send(b'x')\n"
			      "    assert r.recv(1) == b'x'\n"
			      "    await asyncio.to_thread(lambda: None)\n"
			      "asyncio.run(main())\n",
			      NULL};

	(void)arg;
	return run_exec(argv);
}

/* posix_spawn tries clone3 first: on ENOSYS glibc falls back to clone. */
static int try_posix_spawn(long arg)
{
	char *const argv[] = {"/bin/true", NULL};
	pid_t pid;
	int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);

	(void)arg;
	return rc ? rc : wait_ok(pid);
}

/* Whether /proc/self/status says the filter mode (2). */
static int try_status(long want)
{
	char buf[4096], line[32];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return EIO;
	buf[n] = '\0';
	snprintf(line, sizeof(line), "\nSeccomp:\t%ld\n", want);
	return strstr(buf, line) ? 0 : ENOENT;
}

/* ---- running attempts in a child --------------------------------------------------- */

/* The child's own mount namespace and a tmpfs on the scratch directory,
 * holding a file and a mount point; a handle for the file. Returns 0 or
 * the failing step (1..). */
static int child_setup(void)
{
	int fd, mount_id;

	if (setsid() < 0)
		return 1;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 2;
	if (mount("appl-scratch", scratch, "tmpfs", 0, "size=1m,mode=0700") < 0)
		return 3;
	if (mkdir(mnt_dir, 0700) < 0)
		return 4;
	fd = open(file_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return 5;
	close(fd);
	handle.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, file_path, &handle.fh, &mount_id, 0) < 0)
		return 6;
	return 0;
}

static void __attribute__((noreturn))
child_main(int out, bool filtered, bool nnp, const struct attempt *a, size_t n)
{
	int rc = child_setup();

	if (rc == 0 && nnp && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		rc = 7;
	if (rc == 0 && filtered && proc_filter_install(filter) < 0)
		rc = 8;
	if (rc) {
		rc = SETUP_FAILED - rc;
		if (write(out, &rc, sizeof(rc)) < 0)
			_exit(2);
		_exit(1);
	}
	for (size_t i = 0; i < n; i++) {
		rc = a[i].fn(a[i].arg);
		if (write(out, &rc, sizeof(rc)) != sizeof(rc))
			_exit(2);
	}
	_exit(0);
}

/* Run the attempts in a child; res[i] is attempt i's result. Returns the
 * child's wait status. */
static int run_attempts(bool filtered, bool nnp, const struct attempt *a, size_t n, int *res)
{
	int p[2], status;
	size_t have = 0;
	pid_t pid;

	assert_true(n <= RESULTS_MAX);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		child_main(p[1], filtered, nnp, a, n);
	}
	close(p[1]);
	while (have < n * sizeof(int)) {
		ssize_t got = read(p[0], (char *)res + have, n * sizeof(int) - have);

		if (got <= 0)
			break;
		have += (size_t)got;
		if (have >= sizeof(int) && res[0] < SETUP_FAILED + 1)
			fail_msg("the child's setup failed at step %d", SETUP_FAILED - res[0]);
	}
	close(p[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (have != n * sizeof(int))
		fail_msg("the child reported %zu of %zu results (status %#x)", have / sizeof(int),
			 n, status);
	return status;
}

static const char *errno_name(int e)
{
	return e == 0 ? "ok" : strerrorname_np(e) ? strerrorname_np(e) : "?";
}

/* Every attempt got what it wants under the filter (want), or, for the
 * control, what control[i] says. */
static void check(const struct attempt *a, size_t n, const int *res, const int *want)
{
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		int w = want ? want[i] : a[i].want;

		if (res[i] != w) {
			print_error("%s (%ld): got %s, want %s\n", a[i].name, a[i].arg,
				    errno_name(res[i]), errno_name(w));
			bad++;
		}
	}
	assert_int_equal(bad, 0);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static const struct attempt attacks[] = {
	{"mount_tmpfs", try_mount_tmpfs, 0, EPERM},
	{"unshare_newns", try_unshare, CLONE_NEWNS, EPERM},
	{"unshare_newuser", try_unshare, CLONE_NEWUSER, EPERM},
	{"clone_newuser", try_clone, CLONE_NEWUSER, EPERM},
	{"clone_newns", try_clone, CLONE_NEWNS, EPERM},
	{"clone_newpid", try_clone, CLONE_NEWPID, EPERM},
	{"clone_newnet", try_clone, CLONE_NEWNET, EPERM},
	{"clone_newipc", try_clone, CLONE_NEWIPC, EPERM},
	{"clone_newuts", try_clone, CLONE_NEWUTS, EPERM},
	{"clone_newcgroup", try_clone, CLONE_NEWCGROUP, EPERM},
	{"clone_newtime", try_clone, CLONE_NEWTIME, EPERM},
	{"clone_newuser_high_bits", try_clone, (long)(HIGH32 | CLONE_NEWUSER), EPERM},
	{"clone3", try_clone3, 0, ENOSYS},
	{"ptrace_attach_parent", try_ptrace_parent, 0, EPERM},
	{"process_vm_readv_parent", try_vm_readv_parent, 0, EPERM},
	{"bpf", try_bpf, 0, EPERM},
	{"keyctl", try_keyctl, 0, EPERM},
	{"io_uring_setup", try_io_uring, 0, EPERM},
	{"socket_netlink", try_netlink, 0, EPERM},
	{"socket_netlink_high_bits", try_netlink, (long)HIGH32, EPERM},
	{"socket_packet", try_packet, 0, EPERM},
	{"socket_inet_sock_packet", try_inet_packet, 0, EPERM},
	{"socket_inet_sock_packet_cloexec", try_inet_packet, SOCK_CLOEXEC, EPERM},
	{"ioctl_tiocsti", try_pty_ioctl, TIOCSTI, EPERM},
	{"ioctl_tiocsti_high_bits", try_pty_ioctl, (long)(HIGH32 | TIOCSTI), EPERM},
	{"ioctl_tioclinux", try_pty_ioctl, TIOCLINUX, EPERM},
	{"setns", try_setns, 0, EPERM},
	{"open_by_handle_at", try_open_by_handle, 0, EPERM},
	{"name_to_handle_at", try_name_to_handle, 0, EPERM},
	{"init_module", try_init_module, 0, EPERM},
	{"kexec_load", try_kexec_load, 0, EPERM},
};

static const struct attempt ordinary[] = {
	{"fork", try_fork, 0, 0},
	{"pthread_create", try_thread, 0, 0},
	{"socket_inet", try_socket, AF_INET, 0},
	{"socket_inet6", try_socket, AF_INET6, 0},
	{"socket_unix", try_socket, AF_UNIX, 0},
	{"open_read_write", try_file_rw, 0, 0},
	{"execve_true", try_exec_true, 0, 0},
	{"execve_keeps_the_filter", try_exec_status, 0, 0},
	{"posix_spawn", try_posix_spawn, 0, 0},
	{"python_asyncio_subprocess", try_python, 0, 0},
	{"ioctl_tiocgwinsz", try_pty_ioctl, TIOCGWINSZ, 0},
	{"status_says_filter", try_status, 2, 0},
};

static void test_attacks_are_refused(void **state)
{
	int res[RESULTS_MAX];
	int status;
	(void)state;

	status = run_attempts(true, true, attacks, N(attacks), res);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	check(attacks, N(attacks), res, NULL);
}

/* The same attacks without the filter, as root: each that is harmless to
 * let succeed does, so the refusals above are the filter's. */
static void test_control_without_the_filter(void **state)
{
	static const char *const succeed[] = {
		"mount_tmpfs",
		"unshare_newns",
		"unshare_newuser",
		"clone_newuser",
		"clone_newns",
		"clone_newuser_high_bits",
		"socket_netlink",
		"socket_netlink_high_bits",
		"socket_packet",
		"socket_inet_sock_packet",
		"ioctl_tiocsti",
		"ioctl_tiocsti_high_bits",
		"setns",
		"open_by_handle_at",
		"name_to_handle_at",
		"keyctl",
		"process_vm_readv_parent",
		"clone3",
	};
	const struct attempt *a = attacks;
	struct attempt some[N(succeed)];
	int res[RESULTS_MAX], want[N(succeed)];
	(void)state;

	assert_int_equal(geteuid(), 0);
	for (size_t i = 0; i < N(succeed); i++) {
		size_t j = 0;

		while (strcmp(a[j].name, succeed[i]) != 0)
			j++;
		some[i] = a[j];
		want[i] = 0;
	}
	run_attempts(false, true, some, N(some), res);
	check(some, N(some), res, want);
}

static void test_ordinary_work_goes_on(void **state)
{
	int res[RESULTS_MAX];
	(void)state;

	run_attempts(true, true, ordinary, N(ordinary), res);
	check(ordinary, N(ordinary), res, NULL);
}

/* Every name the filter lists, called with arguments that make each fail
 * harmlessly when it is reached: EPERM (clone3 ENOSYS) from the filter,
 * and something else from the kernel itself. */
static void test_every_denied_name_is_refused(void **state)
{
	/* Refused by the kernel's own policy before it looks at arguments
	 * on some hosts (lockdown, sysctls): the control may say EPERM. */
	static const char *const host_may_refuse[] = {"kexec_load", "kexec_file_load",
						      "init_module", "finit_module"};
	const char *const *names = proc_filter_denied();
	struct attempt a[RESULTS_MAX] = {{0}};
	int res[RESULTS_MAX], ctl[RESULTS_MAX];
	size_t n = 0;
	(void)state;

	for (; names[n]; n++) {
		int nr = seccomp_syscall_resolve_name(names[n]);

		assert_true(n < RESULTS_MAX && nr >= 0);
		a[n] = (struct attempt){names[n], try_poison, nr,
					strcmp(names[n], "clone3") ? EPERM : ENOSYS};
	}
	assert_true(n >= 45);
	run_attempts(true, true, a, n, res);
	check(a, n, res, NULL);
	run_attempts(false, true, a, n, ctl);
	for (size_t i = 0; i < n; i++) {
		bool may = false;

		for (size_t j = 0; j < N(host_may_refuse); j++)
			may |= strcmp(a[i].name, host_may_refuse[j]) == 0;
		if (ctl[i] == a[i].want && !may)
			fail_msg("%s: the kernel itself says %s", a[i].name, errno_name(ctl[i]));
	}
}

/* The highest number libseccomp names for this architecture. */
static int table_last(void)
{
	int last = -1;

	for (int nr = 0; nr < 1024; nr++) {
		char *s = seccomp_syscall_resolve_num_arch(seccomp_arch_native(), nr);

		if (s)
			last = nr;
		free(s);
	}
	return last;
}

/* Calls newer than libseccomp's table get ENOSYS, even where the kernel
 * has them; the last call it names still reaches the kernel. */
static void test_calls_past_the_table_get_enosys(void **state)
{
	int last = table_last(), res[RESULTS_MAX], ctl[RESULTS_MAX], implemented = 0;
	struct attempt a[RESULTS_MAX] = {{0}};
	size_t n = 0;
	(void)state;

	assert_true(last > 400);
	a[n++] = (struct attempt){"table_last", try_poison, last, 0};
	for (int nr = last + 1; nr <= KNOWN_KERNEL_LAST || nr == last + 1; nr++)
		a[n++] = (struct attempt){"past_table", try_poison, nr, ENOSYS};
	run_attempts(false, true, a, n, ctl);
	a[0].want = ctl[0];
	assert_int_not_equal(ctl[0], ENOSYS); /* futex_requeue and its kin exist */
	run_attempts(true, true, a, n, res);
	check(a, n, res, NULL);
	for (size_t i = 1; i < n; i++)
		implemented += ctl[i] != ENOSYS;
	print_message("%d calls past the table (%d) exist in this kernel, ENOSYS under the "
		      "filter\n",
		      implemented, last);
}

/* The kernel asks for no_new_privs; so does install, even for root, and
 * a refused install leaves the child unfiltered. */
static void test_install_needs_no_new_privs(void **state)
{
	int p[2], rc[2] = {0, 0};
	pid_t pid;
	(void)state;

	assert_int_equal(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		rc[0] = proc_filter_install(filter);
		rc[1] = try_status(0);
		_exit(write(p[1], rc, sizeof(rc)) == sizeof(rc) ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], rc, sizeof(rc)), sizeof(rc));
	close(p[0]);
	assert_int_equal(wait_ok(pid), 0);
	assert_int_equal(rc[0], -EPERM);
	assert_int_equal(rc[1], 0);
	assert_int_equal(proc_filter_install(NULL), -EINVAL);
}

static void test_unknown_name_fails_closed(void **state)
{
	struct appl_err err = {0};
	struct proc_filter *f = (struct proc_filter *)&err;
	(void)state;

	pretend_unknown = "kcmp";
	assert_int_equal(proc_filter_build(&f, &err), -ENOENT);
	pretend_unknown = NULL;
	assert_null(f);
	assert_non_null(strstr(err.msg, "kcmp"));
	/* the same build with the name known works */
	assert_int_equal(proc_filter_build(&f, &err), 0);
	assert_non_null(f);
	proc_filter_free(f);
	proc_filter_free(NULL);
}

#if defined(__x86_64__)
/* Wait status of a filtered child that runs fn (which should not return). */
static int killed_by(void (*fn)(void), bool filtered)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka's handlers would catch a fault here and run the rest of
		 * the suite in this child: a kernel without i386 emulation
		 * answers int 0x80 with SIGSEGV, which must end the child. */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		signal(SIGSYS, SIG_DFL);
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    (filtered && proc_filter_install(filter) < 0))
			_exit(3);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return status;
}

/* mount through the x32 numbers, which the kernel decodes by the bit. */
static void x32_mount(void)
{
	syscall(0x40000000L | SYS_mount, "none", "/", "tmpfs", 0L, NULL);
}

/* getpid through the i386 entry point (number 20 there). */
static void i386_getpid(void)
{
	long rc = 20;

	__asm__ volatile("int $0x80" : "+a"(rc) : : "memory");
	_exit(rc == getpid() ? 0 : 4);
}

/* A deny list written for one ABI must not be walked around through
 * another: other architectures' and x32's calls kill the process. */
static void test_other_abis_are_killed(void **state)
{
	int ctl, st;
	(void)state;

	st = killed_by(x32_mount, true);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS);
	ctl = killed_by(i386_getpid, false);
	st = killed_by(i386_getpid, true);
	assert_true(WIFSIGNALED(st));
	/* Where the kernel serves int 0x80 at all, the filter is what kills. */
	if (WIFEXITED(ctl) && WEXITSTATUS(ctl) == 0)
		assert_int_equal(WTERMSIG(st), SIGSYS);
}
#endif

/* ---- a real Node server under the filter ------------------------------------------ */

struct node {
	pid_t pid;
	int in, out;
	char buf[1 << 16];
	size_t len;
};

static void node_start(struct node *nd, const char *script, const char *dir)
{
	char *const argv[] = {"/usr/bin/node", (char *)script, (char *)dir, NULL};
	char *const envp[] = {"PATH=/usr/bin:/bin", "HOME=/tmp", NULL};
	int in[2], out[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	nd->pid = fork();
	assert_true(nd->pid >= 0);
	if (nd->pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 ||
		    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || proc_filter_install(filter) < 0)
			_exit(126);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	nd->in = in[1];
	nd->out = out[0];
	nd->len = 0;
}

static void node_send(struct node *nd, const char *line)
{
	size_t len = strlen(line);

	assert_int_equal(write(nd->in, line, len), (ssize_t)len);
	assert_int_equal(write(nd->in, "\n", 1), 1);
}

/* The next line holding want (earlier lines are dropped), waiting on the
 * server's output up to NODE_WAIT_MS. */
static void node_expect(struct node *nd, const char *want)
{
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char *nl = memchr(nd->buf, '\n', nd->len);
		struct pollfd pfd = {nd->out, POLLIN, 0};
		long ms;
		ssize_t got;

		if (nl) {
			*nl = '\0';
			bool hit = strstr(nd->buf, want) != NULL;
			nd->len -= (size_t)(nl + 1 - nd->buf);
			memmove(nd->buf, nl + 1, nd->len);
			if (hit)
				return;
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t1);
		ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= NODE_WAIT_MS || poll(&pfd, 1, (int)(NODE_WAIT_MS - ms)) <= 0)
			fail_msg("no line with %s from the server", want);
		got = read(nd->out, nd->buf + nd->len, sizeof(nd->buf) - 1 - nd->len);
		if (got <= 0)
			fail_msg("the server ended before a line with %s", want);
		nd->len += (size_t)got;
	}
}

/* server-filesystem lists its tools and reads a file (libuv's file system
 * work: io_uring, when it tries it, is refused and it falls back). */
static void test_node_server_works_under_the_filter(void **state)
{
	const char *script =
		"tests/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
	char dir[] = "/tmp/appl-seccomp-node-XXXXXX", path[96], call[256];
	struct node nd;
	int fd, status;
	(void)state;

	if (access("/usr/bin/node", X_OK) < 0 || access(script, R_OK) < 0) {
		if (getenv("CI") && strcmp(getenv("CI"), "true") == 0)
			fail_msg("node or %s is missing (scripts/install-deps)", script);
		skip();
	}
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/note.txt", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "filtered-hello", 14), 14);
	close(fd);
	node_start(&nd, script, dir);
	node_send(&nd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
		       "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
		       "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
	node_expect(&nd, "\"id\":1");
	node_send(&nd, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	node_send(&nd, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	node_expect(&nd, "read_text_file");
	snprintf(call, sizeof(call),
		 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
		 "\"name\":\"read_text_file\",\"arguments\":{\"path\":\"%s\"}}}",
		 path);
	node_send(&nd, call);
	node_expect(&nd, "filtered-hello");
	close(nd.in);
	assert_int_equal(waitpid(nd.pid, &status, 0), nd.pid);
	close(nd.out);
	unlink(path);
	rmdir(dir);
	assert_true(WIFEXITED(status) || (WIFSIGNALED(status) && WTERMSIG(status) != SIGSYS));
}

static void test_denied_list_is_the_documented_one(void **state)
{
	const char *const *names = proc_filter_denied();
	size_t n = 0;
	bool clone3 = false, ptrace = false;
	(void)state;

	for (; names[n]; n++) {
		clone3 |= strcmp(names[n], "clone3") == 0;
		ptrace |= strcmp(names[n], "ptrace") == 0;
	}
	assert_true(clone3 && ptrace);
	/* The list is static: the same pointer every time. */
	assert_ptr_equal(names, proc_filter_denied());
}

/* ---- setup ------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	struct appl_err err = {0};
	(void)state;

	if (!mkdtemp(scratch))
		return -1;
	snprintf(mnt_dir, sizeof(mnt_dir), "%s/m", scratch);
	snprintf(file_path, sizeof(file_path), "%s/f", scratch);
	if (proc_filter_build(&filter, &err) < 0) {
		fprintf(stderr, "proc_filter_build: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	proc_filter_free(filter);
	rmdir(scratch);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attacks_are_refused),
		cmocka_unit_test(test_control_without_the_filter),
		cmocka_unit_test(test_ordinary_work_goes_on),
		cmocka_unit_test(test_every_denied_name_is_refused),
		cmocka_unit_test(test_calls_past_the_table_get_enosys),
		cmocka_unit_test(test_install_needs_no_new_privs),
		cmocka_unit_test(test_unknown_name_fails_closed),
		cmocka_unit_test(test_denied_list_is_the_documented_one),
#if defined(__x86_64__)
		cmocka_unit_test(test_other_abis_are_killed),
#endif
		cmocka_unit_test(test_node_server_works_under_the_filter),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
