/* test_cgroup.c: the hierarchy and the appliance's subtree (pkg/cgroup):
 * /proc/self/cgroup's unified line; the layout decided for cgroup v1, v2
 * under a systemd unit, v2 from the root cgroup, and none; settling a
 * subtree (the appliance moved into its leaf, controllers handed down),
 * refused when the start cgroup holds other processes or lacks the
 * controllers; cgroups made below it; memory.events read by key; the kill
 * of a cgroup's processes without cgroup.kill. The hierarchy is a fake
 * tree of plain files in a temporary directory: what is checked is what
 * the code writes where, which is what the kernel acts on. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include "cgroup/cgroup.h"

#define UNIT "/system.slice/appliance.service"

static char root[64];

/* root/rel/file holding text (directories made as needed). */
static void put(const char *rel, const char *file, const char *text)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s%s", root, rel);
	assert_int_equal(appl_mkdir_parents(dir, 0755), 0);
	if (mkdir(dir, 0755) < 0)
		assert_int_equal(errno, EEXIST);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	fclose(f);
}

static const char *get(const char *rel, const char *file)
{
	static char buf[512];
	char path[PATH_MAX + 64];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s%s/%s", root, rel, file);
	if (!(f = fopen(path, "r")))
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/appl-cg-XXXXXX");
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	appl_tree_remove(root);
	return 0;
}

/* A v2 host decided as a unit's process in UNIT would see it. */
static void unit_host(struct cg_host *h, const char *procs, const char *controllers)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	put(UNIT, "cgroup.controllers", controllers);
	put(UNIT, "cgroup.procs", procs ? procs : pid);
	put(UNIT, "cgroup.subtree_control", "");
	put(UNIT "/supervisor", "cgroup.procs", "");
	assert_int_equal(cg_host_decide(h, root, true, false, "0::" UNIT "\n", NULL), 0);
}

static void test_self_parse(void **state)
{
	char out[PATH_MAX];
	(void)state;

	assert_int_equal(cg_self_parse("0::" UNIT "\n", out, sizeof(out)), 0);
	assert_string_equal(out, UNIT);
	/* A hybrid host lists the v1 hierarchies first. */
	assert_int_equal(cg_self_parse("4:memory:/x\n1:name=systemd:/y\n0::/z/w", out, 64), 0);
	assert_string_equal(out, "/z/w");
	assert_int_equal(cg_self_parse("4:memory:/x\n", out, sizeof(out)), -ENOENT);
	assert_int_equal(cg_self_parse("", out, sizeof(out)), -ENOENT);
	assert_int_equal(cg_self_parse("0::relative\n", out, sizeof(out)), -EINVAL);
	assert_int_equal(cg_self_parse("0::\n", out, sizeof(out)), -EINVAL);
	assert_int_equal(cg_self_parse("0::/abcdef\n", out, 4), -ENAMETOOLONG);
}

static void test_decide(void **state)
{
	struct cg_host h;
	struct appl_err err = {0};
	char dir[PATH_MAX];
	(void)state;

	/* v1: the memory hierarchy is there, the unified one is not root. */
	assert_int_equal(cg_host_decide(&h, "/sys/fs/cgroup", false, true, "0::/\n", NULL), 0);
	assert_int_equal(h.kind, CG_V1);
	assert_int_equal(cg_path(&h, dir, "cells"), -ENOTSUP);
	assert_false(cg_ours(&h, 0));
	assert_int_equal(cg_host_decide(&h, "/sys/fs/cgroup", false, false, NULL, NULL), 0);
	assert_int_equal(h.kind, CG_NONE);
	/* v2 under a unit: the unit's cgroup is the subtree. */
	assert_int_equal(cg_host_decide(&h, "/sys/fs/cgroup", true, false, "0::" UNIT "\n", NULL),
			 0);
	assert_int_equal(h.kind, CG_V2);
	assert_string_equal(h.subtree, UNIT);
	assert_false(h.settled);
	assert_int_equal(cg_path(&h, dir, "cells/i/c"), 0);
	assert_string_equal(dir, "/sys/fs/cgroup" UNIT "/cells/i/c");
	/* v2 started in the root cgroup: below it, never the root itself. */
	assert_int_equal(cg_host_decide(&h, "/sys/fs/cgroup", true, false, "0::/\n", NULL), 0);
	assert_string_equal(h.subtree, "/appliance");
	assert_int_equal(cg_path(&h, dir, NULL), 0);
	assert_string_equal(dir, "/sys/fs/cgroup/appliance");
	/* Only root makes cgroups of its own; rootless, nothing is settled. */
	assert_true(cg_ours(&h, 0));
	assert_false(cg_ours(&h, 1000));
	/* v2 with no unified line is an error, said. */
	assert_int_equal(cg_host_decide(&h, "/sys/fs/cgroup", true, false, "1:cpu:/\n", &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "/proc/self/cgroup"));
}

static void test_settle_a_unit(void **state)
{
	struct cg_host h;
	struct appl_err err = {0};
	char pid[32];
	(void)state;

	unit_host(&h, NULL, "cpuset cpu io memory pids\n");
	assert_int_equal(cg_settle(&h, getpid(), &err), 0);
	assert_true(h.settled);
	snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	assert_string_equal(get(UNIT "/supervisor", "cgroup.procs"), pid);
	assert_string_equal(get(UNIT, "cgroup.subtree_control"), "+memory +pids +cpu");
	/* Once: a second call writes nothing. */
	put(UNIT, "cgroup.subtree_control", "untouched");
	assert_int_equal(cg_settle(&h, getpid(), &err), 0);
	assert_string_equal(get(UNIT, "cgroup.subtree_control"), "untouched");
}

static void test_settle_without_cpu(void **state)
{
	struct cg_host h;
	(void)state;

	unit_host(&h, NULL, "memory pids\n");
	assert_int_equal(cg_settle(&h, getpid(), NULL), 0);
	assert_string_equal(get(UNIT, "cgroup.subtree_control"), "+memory +pids");
}

static void test_settle_refuses_a_shared_cgroup(void **state)
{
	struct cg_host h;
	struct appl_err err = {0};
	char procs[64];
	(void)state;

	snprintf(procs, sizeof(procs), "1234\n%ld\n999\n", (long)getpid());
	unit_host(&h, procs, "cpu memory pids\n");
	assert_int_equal(cg_settle(&h, getpid(), &err), -EBUSY);
	assert_false(h.settled);
	assert_non_null(strstr(err.msg, "holds 2 other processes"));
	assert_non_null(strstr(err.msg, "systemd-run --scope -p Delegate=yes"));
	/* Nothing was moved or turned on. */
	assert_string_equal(get(UNIT "/supervisor", "cgroup.procs"), "");
	assert_string_equal(get(UNIT, "cgroup.subtree_control"), "");
}

static void test_settle_refuses_without_delegation(void **state)
{
	struct cg_host h;
	struct appl_err err = {0};
	(void)state;

	unit_host(&h, NULL, "cpu io\n");
	assert_int_equal(cg_settle(&h, getpid(), &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no memory controller"));
	assert_non_null(strstr(err.msg, "Delegate=yes"));
	assert_string_equal(get(UNIT "/supervisor", "cgroup.procs"), "");
	/* "memory" inside another word is not the controller. */
	unit_host(&h, NULL, "nomemory pids\n");
	assert_int_equal(cg_settle(&h, getpid(), &err), -ENOENT);
}

static void test_settle_at_the_root(void **state)
{
	struct cg_host h;
	(void)state;

	put("", "cgroup.controllers", "cpu memory pids\n");
	put("", "cgroup.subtree_control", "");
	put("/appliance", "cgroup.subtree_control", "");
	assert_int_equal(cg_host_decide(&h, root, true, false, "0::/\n", NULL), 0);
	assert_int_equal(cg_settle(&h, getpid(), NULL), 0);
	assert_true(h.settled);
	assert_string_equal(get("", "cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(get("/appliance", "cgroup.subtree_control"), "+memory +pids +cpu");
	/* Nothing moved: the root may hold processes. */
	assert_null(get("/appliance/supervisor", "cgroup.procs"));
}

static void test_make_hands_down_each_level(void **state)
{
	struct cg_host h;
	struct appl_err err = {0};
	char dir[PATH_MAX];
	(void)state;

	unit_host(&h, NULL, "cpu memory pids\n");
	assert_int_equal(cg_make(&h, "cells/i", true, dir, &err), -ENOTSUP);
	assert_int_equal(cg_settle(&h, getpid(), NULL), 0);
	put(UNIT "/cells", "cgroup.subtree_control", "");
	put(UNIT "/cells/i", "cgroup.subtree_control", "");
	put(UNIT "/cells/i/c1", "cgroup.subtree_control", "");
	assert_int_equal(cg_make(&h, "cells/i/c1", true, dir, &err), 0);
	assert_true(strlen(dir) > strlen(root));
	assert_string_equal(dir + strlen(root), UNIT "/cells/i/c1");
	assert_string_equal(get(UNIT "/cells", "cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(get(UNIT "/cells/i", "cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(get(UNIT "/cells/i/c1", "cgroup.subtree_control"),
			    "+memory +pids +cpu");
	/* A level whose controls cannot be written is an error, said. */
	assert_int_equal(cg_make(&h, "servers/s1", false, dir, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "servers/cgroup.subtree_control"));
	/* A leaf hands nothing down: a process is to join it. */
	put(UNIT "/servers", "cgroup.subtree_control", "");
	put(UNIT "/servers/s1", "cgroup.subtree_control", "");
	assert_int_equal(cg_make(&h, "servers/s1", false, dir, &err), 0);
	assert_string_equal(get(UNIT "/servers", "cgroup.subtree_control"), "+memory +pids +cpu");
	assert_string_equal(get(UNIT "/servers/s1", "cgroup.subtree_control"), "");
}

static void test_read_key(void **state)
{
	char dir[PATH_MAX];
	unsigned long long v = 0;
	(void)state;

	put("/x", "memory.events", "low 0\nhigh 0\nmax_x 9\nmax 3\noom 1\noom_kill 2\n");
	snprintf(dir, sizeof(dir), "%s/x", root);
	assert_int_equal(cg_read_key(dir, "memory.events", "max", &v), 0);
	assert_int_equal(v, 3);
	assert_int_equal(cg_read_key(dir, "memory.events", "oom_kill", &v), 0);
	assert_int_equal(v, 2);
	assert_int_equal(cg_read_key(dir, "memory.events", "oom_group_kill", &v), -ENOENT);
	assert_int_equal(cg_read_key(dir, "memory.nothing", "max", &v), -ENOENT);
}

static void test_kill_without_cgroup_kill(void **state)
{
	char dir[PATH_MAX], procs[32];
	bool left = false;
	int status;
	pid_t child = fork();
	(void)state;

	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	snprintf(procs, sizeof(procs), "%ld\n", (long)child);
	put("/s", "cgroup.procs", procs);
	snprintf(dir, sizeof(dir), "%s/s", root);
	assert_int_equal(cg_kill(dir, 1, &left), 1);
	assert_true(left); /* one round, and it was still listed */
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGKILL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_self_parse),
		cmocka_unit_test(test_decide),
		cmocka_unit_test_setup_teardown(test_settle_a_unit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_settle_without_cpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_settle_refuses_a_shared_cgroup, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_settle_refuses_without_delegation, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_settle_at_the_root, setup, teardown),
		cmocka_unit_test_setup_teardown(test_make_hands_down_each_level, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill_without_cgroup_kill, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
