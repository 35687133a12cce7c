/* test_confine.c: an upstream server's jail, tried for real (as root): a
 * shell started in it reports who it is and what it can see, and the
 * test checks each answer against what the jail promised. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/fs.h"
#include "base/limits.h"
#include "proc/confine.h"
#include "engine/process.h"
#include "proc/proc.h"
#include "proc/seccomp.h"

/* What the shell prints, one KEY=VALUE a line. */
static const char SCRIPT[] =
	"echo uid=$(id -u)\n"
	"echo groups=$(id -G)\n"
	"echo dir=$(ls -A \"$1\" | wc -l)\n"
	"echo file=$(wc -c < \"$2\")\n"
	"echo beside=$(cat \"$3\")\n"
	"echo $(grep ^CapEff: /proc/self/status | tr -d '\\t ')\n"
	"echo $(grep ^CapBnd: /proc/self/status | tr -d '\\t ')\n"
	"echo $(grep ^NoNewPrivs: /proc/self/status | tr -d '\\t ')\n"
	"echo $(grep ^Seccomp: /proc/self/status | tr -d '\\t ')\n"
	"echo $(grep ^Umask: /proc/self/status | tr -d '\\t ')\n"
	"echo cgroups=$(grep -c upstream-confine /proc/self/cgroup)\n"
	"echo ifaces=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ,)\n"
	"echo home=$HOME tmp=$TMPDIR\n"
	"echo pid=$$\n"
	"[ -d \"/proc/$4\" ] && echo seesparent=yes || echo seesparent=no\n"
	"echo init=$(tr '\\0' ' ' < /proc/1/environ 2>/dev/null | wc -c)\n"
	"echo initcmd=$(tr '\\0' ' ' < /proc/1/cmdline)\n"
	"echo initcap=$(grep ^CapEff: /proc/1/status | tr -d '\\tCapEf: ')\n"
	"echo initnnp=$(grep ^NoNewPrivs: /proc/1/status | tr -d '\\tNoNewPrivs: ')\n"
	"touch \"$HOME/x\" && echo homewrite=ok\n"
	"setsid sh -c 'echo $$ > \"$HOME/escapee\"; exec sleep 300' </dev/null >/dev/null 2>&1 &\n"
	"while [ ! -s \"$HOME/escapee\" ]; do :; done\n"
	/* a shell whose fork fails gives up: the counting is in a subshell */
	"(i=0; while [ $i -lt 12 ]; do sleep 30 & echo $! >> \"$HOME/forks\"; i=$((i+1)); done)"
	" 2>/dev/null\n"
	"echo forks=$(wc -l < \"$HOME/forks\")\n"
	"echo end=1\n";

struct env {
	char dir[64];	  /* the test's scratch */
	char secret[128]; /* a directory to hide, with a file in it */
	char key[128];	  /* a file to hide */
	char beside[128]; /* a file beside the hidden one: stays */
	struct proc_filter *filter;
};

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct appl_err err = {0};
	char path[192];

	snprintf(e->dir, sizeof(e->dir), "/tmp/appliance-confine-test.XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	assert_int_equal(chmod(e->dir, 0755), 0);
	snprintf(e->secret, sizeof(e->secret), "%s/secret", e->dir);
	assert_int_equal(mkdir(e->secret, 0755), 0);
	snprintf(path, sizeof(path), "%s/key.pub", e->secret);
	write_file(path, "a key\n");
	snprintf(e->key, sizeof(e->key), "%s/policy.sig", e->dir);
	write_file(e->key, "signed\n");
	chmod(e->key, 0644);
	snprintf(e->beside, sizeof(e->beside), "%s/data.txt", e->dir);
	write_file(e->beside, "served\n");
	chmod(e->beside, 0644);
	assert_int_equal(proc_filter_build(&e->filter, &err), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	proc_filter_free(e->filter);
	appl_tree_remove(e->dir);
	free(e);
	return 0;
}

/* Run SCRIPT in j; its output (new). */
static char *run_in(struct proc_jail *j, const struct env *e, pid_t *running)
{
	char home_env[PATH_MAX + 8], tmp_env[PATH_MAX + 8];
	char self[24];
	char *argv[] = {"/bin/sh",
			"-c",
			(char *)SCRIPT,
			"sh",
			(char *)e->secret,
			(char *)e->key,
			(char *)e->beside,
			self,
			NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", home_env, tmp_env, NULL};
	struct proc_spec spec = {
		.path = "/bin/sh", .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
	struct appl_err err = {0};
	char *out = calloc(1, 8192);
	size_t got = 0;
	ssize_t n;
	int p[2], pidfd;
	pid_t pid;

	snprintf(self, sizeof(self), "%ld", (long)getpid());
	snprintf(home_env, sizeof(home_env), "HOME=%s", proc_jail_home(j));
	snprintf(tmp_env, sizeof(tmp_env), "TMPDIR=%s", proc_jail_home(j));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	spec.fds[1] = p[1];
	spec.confine = proc_jail_confine(j);
	if (proc_spawn(&spec, &pid, &pidfd, &err) < 0)
		fail_msg("%s", err.msg);
	close(p[1]);
	while ((n = read(p[0], out + got, 8191 - got)) > 0 && got < 8191) {
		got += (size_t)n;
		if (strstr(out, "end=1\n"))
			break;
	}
	close(p[0]);
	close(pidfd);
	if (running) {
		*running = pid;
		return out;
	}
	proc_kill_group(pid);
	proc_wait(pid);
	return out;
}

static const char *field(const char *out, const char *key, char *buf, size_t cap)
{
	const char *at = strstr(out, key);
	size_t n;

	if (!at)
		fail_msg("no %s in:\n%s", key, out);
	at += strlen(key);
	n = strcspn(at, "\n");
	snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), at);
	return buf;
}

static void test_the_jail_holds(void **state)
{
	struct env *e = *state;
	const char *masks[] = {e->secret, e->key, "/nonexistent/appliance-mask", NULL};
	struct proc_jail_spec s = {.name = "confine",
				   .memory_mb = 128,
				   .pids = 8,
				   .network = false,
				   .masks = masks,
				   .filter = e->filter};
	struct appl_err err = {0};
	struct proc_jail *j;
	char buf[256], want[64], path[PATH_MAX];
	struct group *gr;
	pid_t pid_of_run;
	long uid;
	char *out;

	if (proc_jail_new(&s, &j, &err) < 0)
		fail_msg("%s", err.msg);
	out = run_in(j, e, &pid_of_run);
	/* a uid of its own from the range, its own gid and the servers' group */
	uid = strtol(field(out, "uid=", buf, sizeof(buf)), NULL, 10);
	assert_true(uid >= APPL_SERVER_UID_FIRST && uid <= APPL_SERVER_UID_LAST);
	assert_non_null(gr = getgrnam(APPL_UPSTREAM_USER));
	snprintf(want, sizeof(want), "%ld %u", uid, (unsigned)gr->gr_gid);
	assert_string_equal(field(out, "groups=", buf, sizeof(buf)), want);
	/* its own PID namespace: the shell is pid 2 under its init, sees
	 * nothing of the host's processes, and cannot read its init */
	assert_string_equal(field(out, "pid=", buf, sizeof(buf)), "2");
	assert_string_equal(field(out, "seesparent=", buf, sizeof(buf)), "no");
	assert_string_equal(field(out, "init=", buf, sizeof(buf)), "0");
	/* the init is a fresh image, "appliance-server-init SERVER", with no
	 * capability and nothing to regain one with */
	assert_string_equal(field(out, "initcmd=", buf, sizeof(buf)), "appliance-server-init 2");
	assert_string_equal(field(out, "initcap=", buf, sizeof(buf)), "0000000000000000");
	assert_string_equal(field(out, "initnnp=", buf, sizeof(buf)), "1");
	/* hidden: the directory empty, the file empty; beside it untouched */
	assert_string_equal(field(out, "dir=", buf, sizeof(buf)), "0");
	assert_string_equal(field(out, "file=", buf, sizeof(buf)), "0");
	assert_string_equal(field(out, "beside=", buf, sizeof(buf)), "served");
	/* no capabilities, none to regain; the filter on */
	assert_string_equal(field(out, "CapEff:", buf, sizeof(buf)), "0000000000000000");
	assert_string_equal(field(out, "CapBnd:", buf, sizeof(buf)), "0000000000000000");
	assert_string_equal(field(out, "NoNewPrivs:", buf, sizeof(buf)), "1");
	assert_string_equal(field(out, "Seccomp:", buf, sizeof(buf)), "2");
	/* what it makes stays its group's: the uid may differ next time */
	assert_string_equal(field(out, "Umask:", buf, sizeof(buf)), "0007");
	/* its own cgroup(s); only loopback */
	assert_string_not_equal(field(out, "cgroups=", buf, sizeof(buf)), "0");
	assert_string_equal(field(out, "ifaces=", buf, sizeof(buf)), "lo,");
	/* HOME and TMPDIR its own, and writable */
	assert_non_null(strstr(out, "homewrite=ok"));
	/* the pids limit holds: twelve sleeps asked, fewer than 8 got */
	assert_true(strtol(field(out, "forks=", buf, sizeof(buf)), NULL, 10) < 8);
	/* the escapee (setsid, out of the group) and the sleeps end with the
	 * shell: its init follows it, and the kernel kills what is left in
	 * the namespace, so the jail's cgroup has nothing left to kill */
	snprintf(path, sizeof(path), "%s/escapee", proc_jail_home(j));
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(WEXITSTATUS(proc_wait(pid_of_run)), 0);
	assert_int_equal(proc_jail_kill(j), 0);
	free(out);
	/* the private directory goes with the jail */
	snprintf(path, sizeof(path), "%s", proc_jail_home(j));
	proc_jail_free(j);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_root_and_bad_users(void **state)
{
	struct env *e = *state;
	const char *masks[] = {e->secret, NULL};
	struct proc_jail_spec s = {.name = "confine",
				   .user = "root",
				   .memory_mb = 128,
				   .pids = 64,
				   .network = true,
				   .masks = masks,
				   .filter = e->filter};
	struct appl_err err = {0};
	struct proc_jail *j;
	char buf[256];
	char *out;

	/* root when asked, but without a capability */
	if (proc_jail_new(&s, &j, &err) < 0)
		fail_msg("%s", err.msg);
	out = run_in(j, e, NULL);
	assert_string_equal(field(out, "uid=", buf, sizeof(buf)), "0");
	assert_string_equal(field(out, "CapEff:", buf, sizeof(buf)), "0000000000000000");
	assert_string_equal(field(out, "dir=", buf, sizeof(buf)), "0");
	/* the host's network */
	assert_string_not_equal(field(out, "ifaces=", buf, sizeof(buf)), "lo,");
	free(out);
	proc_jail_free(j);
	/* a user the machine does not have is an error, not a fallback */
	s.user = "appliance-no-such-user";
	assert_int_equal(proc_jail_new(&s, &j, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "appliance-no-such-user"));
}

/* Two jails at once never share a uid, and a jail's uid is free again
 * once it is gone. */
static void test_each_jail_a_uid_of_its_own(void **state)
{
	struct env *e = *state;
	struct proc_jail_spec s = {
		.name = "apart", .memory_mb = 128, .pids = 8, .network = true, .filter = e->filter};
	struct proc_jail *a, *b;
	struct appl_err err = {0};
	char want[64];

	if (proc_jail_new(&s, &a, &err) < 0 || proc_jail_new(&s, &b, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_not_equal(proc_jail_who(a), proc_jail_who(b));
	snprintf(want, sizeof(want), "%s", proc_jail_who(b));
	proc_jail_free(b);
	/* the same name searches from the same place: b's uid again */
	if (proc_jail_new(&s, &b, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(proc_jail_who(b), want);
	proc_jail_free(b);
	proc_jail_free(a);
}

/* A range of one uid: the second jail finds none, and says what to do. */
static void test_a_full_range_is_refused_with_the_way_out(void **state)
{
	struct env *e = *state;
	struct proc_jail_spec s = {
		.name = "full", .memory_mb = 128, .pids = 8, .network = true, .filter = e->filter};
	struct proc_jail *a, *b;
	struct appl_err err = {0};
	char range[64];

	snprintf(range, sizeof(range), "%u-%u", APPL_SERVER_UID_LAST, APPL_SERVER_UID_LAST);
	assert_int_equal(proc_jail_uids_set(range, &err), 0);
	if (proc_jail_new(&s, &a, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(proc_jail_new(&s, &b, &err), -EAGAIN);
	assert_non_null(strstr(err.msg, "no free uid in"));
	assert_non_null(strstr(err.msg, "--server-uids"));
	proc_jail_free(a);
	snprintf(range, sizeof(range), "%u-%u", APPL_SERVER_UID_FIRST, APPL_SERVER_UID_LAST);
	assert_int_equal(proc_jail_uids_set(range, &err), 0);
	/* what a range must be */
	assert_int_equal(proc_jail_uids_set("500-600", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "within 1000-"));
	assert_int_equal(proc_jail_uids_set("90000-80000", &err), -EINVAL);
	assert_int_equal(proc_jail_uids_set("80000", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "FIRST-LAST"));
	assert_int_equal(proc_jail_uids_set("80000-", &err), -EINVAL);
	assert_int_equal(proc_jail_uids_set("-1-5", &err), -EINVAL);
	assert_int_equal(proc_jail_uids_set("1000-99999999999", &err), -EINVAL);
}

/* The probe tries the command and its cwd as the jail's user. */
static void test_the_probe_finds_what_would_start_nothing(void **state)
{
	struct env *e = *state;
	struct proc_jail_spec s = {
		.name = "probe", .memory_mb = 128, .pids = 8, .network = true, .filter = e->filter};
	char closed[160], prog[192], script[192], why[APPL_ERR_MSG_MAX];
	struct appl_err err = {0};
	struct proc_jail *j;

	if (proc_jail_new(&s, &j, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(proc_jail_probe(j, "/bin/sh", "/", why, sizeof(why)), PROC_PROBE_OK);
	assert_int_equal(proc_jail_probe(j, "/bin/sh", NULL, why, sizeof(why)), PROC_PROBE_OK);
	/* missing */
	assert_int_equal(proc_jail_probe(j, "/nonexistent/x", NULL, why, sizeof(why)),
			 PROC_PROBE_COMMAND_MISSING);
	assert_string_equal(why, "/nonexistent does not exist");
	/* in a directory only root may search (as under /root) */
	snprintf(closed, sizeof(closed), "%s/closed", e->dir);
	assert_int_equal(mkdir(closed, 0700), 0);
	snprintf(prog, sizeof(prog), "%s/prog", closed);
	write_file(prog, "#!/bin/sh\nexit 0\n");
	assert_int_equal(chmod(prog, 0755), 0);
	assert_int_equal(proc_jail_probe(j, prog, NULL, why, sizeof(why)), PROC_PROBE_COMMAND);
	assert_non_null(strstr(why, "it may not search"));
	assert_non_null(strstr(why, "mode 0700"));
	/* searchable, but not executable */
	assert_int_equal(chmod(closed, 0755), 0);
	assert_int_equal(chmod(prog, 0644), 0);
	assert_int_equal(proc_jail_probe(j, prog, NULL, why, sizeof(why)), PROC_PROBE_COMMAND);
	assert_non_null(strstr(why, "it may not execute"));
	/* a script it may execute but not read */
	assert_int_equal(chmod(prog, 0711), 0);
	assert_int_equal(proc_jail_probe(j, prog, NULL, why, sizeof(why)), PROC_PROBE_COMMAND);
	assert_non_null(strstr(why, "is a script (#!) it may not read"));
	/* a script whose interpreter is missing */
	snprintf(script, sizeof(script), "%s/script", closed);
	write_file(script, "#!/nonexistent/python9 -u\n");
	assert_int_equal(chmod(script, 0755), 0);
	assert_int_equal(proc_jail_probe(j, script, NULL, why, sizeof(why)),
			 PROC_PROBE_COMMAND_MISSING);
	assert_non_null(strstr(why, "the interpreter its first line (#!) names"));
	assert_non_null(strstr(why, "/nonexistent"));
	/* a chain of scripts four deep, each naming the next: followed to its end */
	for (int i = 4; i >= 1; i--) {
		char next[192], text[256];

		snprintf(prog, sizeof(prog), "%s/chain%d", closed, i);
		snprintf(next, sizeof(next), "%s/chain%d", closed, i + 1);
		snprintf(text, sizeof(text), "#!%s\n", i == 4 ? "/bin/sh" : next);
		write_file(prog, text);
		assert_int_equal(chmod(prog, 0755), 0);
	}
	snprintf(prog, sizeof(prog), "%s/chain1", closed);
	assert_int_equal(proc_jail_probe(j, prog, NULL, why, sizeof(why)), PROC_PROBE_OK);
	/* the cwd: missing, not a directory, closed */
	assert_int_equal(proc_jail_probe(j, "/bin/sh", "/srv/appliance-none", why, sizeof(why)),
			 PROC_PROBE_CWD_MISSING);
	assert_string_equal(why, "/srv/appliance-none does not exist");
	assert_int_equal(proc_jail_probe(j, "/bin/sh", script, why, sizeof(why)), PROC_PROBE_CWD);
	assert_non_null(strstr(why, "is not a directory"));
	assert_int_equal(chmod(closed, 0700), 0);
	assert_int_equal(proc_jail_probe(j, "/bin/sh", closed, why, sizeof(why)), PROC_PROBE_CWD);
	assert_non_null(strstr(why, "it may not search"));
	proc_jail_free(j);
}

/* Each step of a start reports its own failure: a cwd that is missing is
 * not a program that is missing. */
static void test_each_step_says_what_failed(void **state)
{
	struct env *e = *state;
	struct proc_jail_spec s = {
		.name = "steps", .memory_mb = 128, .pids = 8, .network = true, .filter = e->filter};
	char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
	struct proc_spec spec = {.path = "/bin/true",
				 .argv = argv,
				 .envp = envp,
				 .fds = {-1, -1, -1},
				 .cwd = "/srv/appliance-none"};
	struct appl_err err = {0};
	struct proc_jail *j;
	pid_t pid;
	int pidfd;

	if (proc_jail_new(&s, &j, &err) < 0)
		fail_msg("%s", err.msg);
	spec.confine = proc_jail_confine(j);
	assert_int_equal(proc_spawn(&spec, &pid, &pidfd, &err), -ENOENT);
	assert_string_equal(err.msg, "changing to its directory /srv/appliance-none: No such "
				     "file or directory");
	spec.cwd = NULL;
	spec.path = "/nonexistent/prog";
	assert_int_equal(proc_spawn(&spec, &pid, &pidfd, &err), -ENOENT);
	assert_string_equal(err.msg, "executing /nonexistent/prog: No such file or directory");
	proc_jail_free(j);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_the_jail_holds, setup, teardown),
		cmocka_unit_test_setup_teardown(test_root_and_bad_users, setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_jail_a_uid_of_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_full_range_is_refused_with_the_way_out,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_probe_finds_what_would_start_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_each_step_says_what_failed, setup, teardown),
	};

	/* A confined child's init is this binary again (proc.h). */
	if (argc >= 1 && proc_init_wanted(argv[0]))
		return engine_init_main(argc, argv);
	if (geteuid() != 0) {
		fprintf(stderr, "test_confine: needs root\n");
		return getenv("CI") ? 1 : 0; /* a user's machine without root: nothing to try */
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
