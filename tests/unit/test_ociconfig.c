/* test_ociconfig.c: the cell sandbox's OCI config, property by property. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "json/json.h"
#include "sandbox/ociconfig.h"

#define MIB (1024ll * 1024)

static json_t *config(int rootless)
{
	struct sandbox_oci_params p;
	struct appl_err err = {0};
	json_t *cfg;

	sandbox_oci_params_init(&p);
	p.rootfs = "/var/lib/appliance/rootfs/abc";
	p.rootless = rootless;
	cfg = sandbox_ociconfig_new(&p, &err);
	if (!cfg)
		fail_msg("config refused: %s", err.msg);
	return cfg;
}

static json_t *at(json_t *v, const char *path)
{
	char key[64];

	/* "process.user.uid": one object key per dot */
	while (v && *path) {
		size_t n = strcspn(path, ".");
		assert_true(n < sizeof(key));
		memcpy(key, path, n);
		key[n] = '\0';
		v = json_object_get(v, key);
		path += n + (path[n] == '.');
	}
	assert_non_null(v);
	return v;
}

static void test_process_identity(void **state)
{
	json_t *cfg = config(0);
	json_t *args = at(cfg, "process.args");
	(void)state;

	assert_int_equal(json_integer_value(at(cfg, "process.user.uid")), 65534);
	assert_int_equal(json_integer_value(at(cfg, "process.user.gid")), 65534);
	assert_int_equal(json_array_size(at(cfg, "process.user.additionalGids")), 0);
	assert_int_equal(json_object_size(at(cfg, "process.user")), 3);
	assert_true(json_is_true(at(cfg, "process.noNewPrivileges")));
	assert_true(json_is_false(at(cfg, "process.terminal")));
	assert_string_equal(json_string_value(at(cfg, "process.cwd")), "/");
	assert_int_equal(json_array_size(args), 5);
	assert_string_equal(json_string_value(json_array_get(args, 0)), "/usr/bin/python3.11");
	assert_string_equal(json_string_value(json_array_get(args, 1)), "-I");
	assert_string_equal(json_string_value(json_array_get(args, 2)), "-S");
	assert_string_equal(json_string_value(json_array_get(args, 4)), "/runner.py");
	assert_string_equal(json_string_value(at(cfg, "hostname")), "cell");
	json_decref(cfg);
}

/* A pooled runner is told so in its argv, and nothing else changes. */
static void test_pooled_runner_argument(void **state)
{
	struct sandbox_oci_params p;
	struct appl_err err = {0};
	json_t *plain = config(0), *pooled, *args;
	(void)state;

	sandbox_oci_params_init(&p);
	p.rootfs = "/var/lib/appliance/rootfs/abc";
	p.pooled = true;
	pooled = sandbox_ociconfig_new(&p, &err);
	assert_non_null(pooled);
	args = at(pooled, "process.args");
	assert_int_equal(json_array_size(args), 6);
	assert_string_equal(json_string_value(json_array_get(args, 4)), "/runner.py");
	assert_string_equal(json_string_value(json_array_get(args, 5)), "--pooled");
	json_array_remove(args, 5);
	assert_true(json_equal(plain, pooled));
	json_decref(plain);
	json_decref(pooled);
}

/* image.preload reaches a pooled runner as one argument after --pooled, a
 * cold one never; anything but names and commas is refused. */
static void test_preload_argument(void **state)
{
	static const char *const bad[] = {"",	    "numpy pandas", "numpy;id",
					  "a,$(x)", "--pooled=x",   "numpy\n"};
	struct sandbox_oci_params p;
	struct appl_err err = {0};
	json_t *cfg, *args;
	(void)state;

	sandbox_oci_params_init(&p);
	p.rootfs = "/var/lib/appliance/rootfs/abc";
	p.preload = "numpy,pandas,matplotlib.pyplot";
	cfg = sandbox_ociconfig_new(&p, &err);
	assert_non_null(cfg);
	assert_int_equal(json_array_size(at(cfg, "process.args")), 5); /* not pooled: none */
	json_decref(cfg);
	p.pooled = true;
	cfg = sandbox_ociconfig_new(&p, &err);
	assert_non_null(cfg);
	args = at(cfg, "process.args");
	assert_int_equal(json_array_size(args), 7);
	assert_string_equal(json_string_value(json_array_get(args, 5)), "--pooled");
	assert_string_equal(json_string_value(json_array_get(args, 6)),
			    "--preload=numpy,pandas,matplotlib.pyplot");
	json_decref(cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		p.preload = bad[i];
		assert_null(sandbox_ociconfig_new(&p, &err));
		assert_non_null(strstr(err.msg, "preload"));
	}
}

static void test_env_is_exactly_path(void **state)
{
	json_t *cfg = config(0);
	json_t *env = at(cfg, "process.env");
	(void)state;

	assert_int_equal(json_array_size(env), 1);
	assert_string_equal(json_string_value(json_array_get(env, 0)), "PATH=/usr/bin");
	json_decref(cfg);
}

static void test_capabilities_empty(void **state)
{
	static const char *const sets[] = {"bounding", "effective", "inheritable", "permitted",
					   "ambient"};
	json_t *cfg = config(0);
	json_t *caps = at(cfg, "process.capabilities");
	(void)state;

	assert_int_equal(json_object_size(caps), 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *set = json_object_get(caps, sets[i]);
		assert_true(json_is_array(set));
		assert_int_equal(json_array_size(set), 0);
	}
	json_decref(cfg);
}

static json_int_t rlimit(json_t *cfg, const char *type)
{
	json_t *rl = at(cfg, "process.rlimits");
	json_t *e;
	size_t i;

	json_array_foreach(rl, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "type")), type) == 0) {
			json_int_t hard = json_integer_value(json_object_get(e, "hard"));
			/* soft == hard: the code cannot raise a limit back up */
			assert_int_equal(hard, json_integer_value(json_object_get(e, "soft")));
			return hard;
		}
	}
	fail_msg("no %s", type);
	return -1;
}

static void test_rlimits(void **state)
{
	struct sandbox_oci_params p;
	json_t *cfg;
	(void)state;

	sandbox_oci_params_init(&p);
	p.rootfs = "/r";
	p.memory_mb = 300;
	p.pids = 10;
	p.nofile = 20;
	p.tmpfs_mb = 5;
	cfg = sandbox_ociconfig_new(&p, NULL);
	assert_non_null(cfg);
	assert_int_equal(json_array_size(at(cfg, "process.rlimits")), 5);
	assert_int_equal(rlimit(cfg, "RLIMIT_AS"), 300 * MIB);
	assert_int_equal(rlimit(cfg, "RLIMIT_NPROC"), 10);
	assert_int_equal(rlimit(cfg, "RLIMIT_NOFILE"), 20);
	assert_int_equal(rlimit(cfg, "RLIMIT_FSIZE"), 5 * MIB);
	assert_int_equal(rlimit(cfg, "RLIMIT_CORE"), 0);
	json_decref(cfg);

	cfg = config(0); /* defaults */
	assert_int_equal(rlimit(cfg, "RLIMIT_AS"), APPL_MEMORY_MB_DEF * MIB);
	assert_int_equal(rlimit(cfg, "RLIMIT_NPROC"), APPL_PIDS_DEF);
	assert_int_equal(rlimit(cfg, "RLIMIT_NOFILE"), APPL_NOFILE_DEF);
	json_decref(cfg);
}

static int has_option(json_t *mount, const char *opt)
{
	json_t *o;
	size_t i;

	json_array_foreach(json_object_get(mount, "options"), i, o)
		if (strcmp(json_string_value(o), opt) == 0)
			return 1;
	return 0;
}

static void test_root_and_mounts(void **state)
{
	json_t *cfg = config(0);
	json_t *mounts = at(cfg, "mounts");
	json_t *m;
	size_t i;
	(void)state;

	assert_string_equal(json_string_value(at(cfg, "root.path")),
			    "/var/lib/appliance/rootfs/abc");
	assert_true(json_is_true(at(cfg, "root.readonly")));
	assert_int_equal(json_array_size(mounts), 4);
	json_array_foreach(mounts, i, m) {
		const char *type = json_string_value(json_object_get(m, "type"));
		const char *dest = json_string_value(json_object_get(m, "destination"));
		/* no bind mount from the host, in any spelling */
		assert_true(strcmp(type, "proc") == 0 || strcmp(type, "tmpfs") == 0);
		assert_false(has_option(m, "bind") || has_option(m, "rbind"));
		assert_string_equal(json_string_value(json_object_get(m, "source")), type);
		assert_true(has_option(m, "nosuid") && has_option(m, "noexec"));
		/* /out holds the files the cell hands back: a tmpfs like /tmp */
		if (strcmp(dest, "/tmp") == 0 || strcmp(dest, "/out") == 0) {
			assert_true(has_option(m, "nodev"));
			assert_true(has_option(m, "mode=1777"));
			assert_true(has_option(m, "size=16m"));
		} else {
			assert_true(strcmp(dest, "/proc") == 0 || strcmp(dest, "/dev") == 0);
		}
	}
	json_decref(cfg);
}

static void test_namespaces(void **state)
{
	static const char *const want[] = {"pid", "ipc", "uts", "mount", "network"};
	json_t *cfg = config(1);
	json_t *ns = at(cfg, "linux.namespaces");
	(void)state;

	/* the same in both modes; no path, so each is new and not the host's */
	assert_int_equal(json_array_size(ns), 5);
	for (size_t i = 0; i < 5; i++) {
		json_t *e = json_array_get(ns, i);
		assert_string_equal(json_string_value(json_object_get(e, "type")), want[i]);
		assert_int_equal(json_object_size(e), 1);
	}
	json_decref(cfg);
}

static void test_resources_only_as_root(void **state)
{
	json_t *cfg = config(0);
	json_t *res = at(cfg, "linux.resources");
	(void)state;

	assert_int_equal(json_integer_value(at(res, "memory.limit")),
			 (APPL_MEMORY_MB_DEF + APPL_GVISOR_ALLOWANCE_MB) * MIB);
	assert_int_equal(json_integer_value(at(res, "cpu.quota")),
			 json_integer_value(at(res, "cpu.period")));
	/* never a pids cgroup: gVisor's own threads would count against it */
	assert_null(json_object_get(res, "pids"));
	assert_int_equal(json_object_size(res), 2);
	assert_null(json_object_get(at(cfg, "linux"), "cgroupsPath"));
	json_decref(cfg);

	cfg = config(1);
	assert_null(json_object_get(at(cfg, "linux"), "resources"));
	assert_null(json_object_get(at(cfg, "linux"), "cgroupsPath"));
	assert_int_equal(json_object_size(at(cfg, "linux")), 1);
	json_decref(cfg);
}

static void test_cgroups_path(void **state)
{
	struct sandbox_oci_params p;
	json_t *cfg;
	(void)state;

	sandbox_oci_params_init(&p);
	p.rootfs = "/r";
	p.cgroups_path = "/appliance/cell-7";
	cfg = sandbox_ociconfig_new(&p, NULL);
	assert_string_equal(json_string_value(at(cfg, "linux.cgroupsPath")), "/appliance/cell-7");
	json_decref(cfg);
	p.rootless = true; /* rootless has no cgroups at all */
	cfg = sandbox_ociconfig_new(&p, NULL);
	assert_null(json_object_get(at(cfg, "linux"), "cgroupsPath"));
	json_decref(cfg);
}

/* With an image, runsc's rootfs hint names it and nothing else: the
 * Sentry mounts it read-only as /, with no overlay to write into. The
 * directory stays the spec's root.path. Without one, no annotations. */
static void test_rootfs_image(void **state)
{
	static const char *const hint[] = {"dev.gvisor.spec.rootfs.source",
					   "dev.gvisor.spec.rootfs.type", NULL};
	struct sandbox_oci_params p;
	json_t *cfg, *ann;
	(void)state;

	sandbox_oci_params_init(&p);
	p.rootfs = "/c/sha256-ab";
	p.rootfs_image = "/c/sha256-ab.erofs";
	cfg = sandbox_ociconfig_new(&p, NULL);
	ann = json_object_get(cfg, "annotations");
	assert_int_equal(appl_json_keys_check(ann, hint, "", NULL), 0);
	assert_int_equal(json_object_size(ann), 2);
	assert_string_equal(json_string_value(json_object_get(ann, hint[0])), "/c/sha256-ab.erofs");
	assert_string_equal(json_string_value(json_object_get(ann, hint[1])), "erofs");
	assert_string_equal(json_string_value(at(cfg, "root.path")), "/c/sha256-ab");
	assert_true(json_is_true(at(cfg, "root.readonly")));
	json_decref(cfg);
	p.rootfs_image = NULL;
	cfg = sandbox_ociconfig_new(&p, NULL);
	assert_null(json_object_get(cfg, "annotations"));
	json_decref(cfg);
}

static void test_top_level_keys(void **state)
{
	static const char *const allowed[] = {"ociVersion", "process", "root", "hostname",
					      "mounts",	    "linux",   NULL};
	json_t *cfg = config(0);
	(void)state;

	assert_int_equal(appl_json_keys_check(cfg, allowed, "", NULL), 0);
	assert_int_equal(json_object_size(cfg), 6);
	json_decref(cfg);
}

static void refused(struct sandbox_oci_params *p, const char *needle)
{
	struct appl_err err = {0};

	assert_null(sandbox_ociconfig_new(p, &err));
	assert_int_equal(err.code, -EINVAL);
	if (!strstr(err.msg, needle))
		fail_msg("\"%s\" lacks \"%s\"", err.msg, needle);
	sandbox_oci_params_init(p);
	p->rootfs = "/r";
}

static void test_refusals(void **state)
{
	struct sandbox_oci_params p;
	json_t *cfg;
	(void)state;

	sandbox_oci_params_init(&p);
	refused(&p, "rootfs: not an absolute path"); /* NULL */
	p.rootfs = "relative/root";
	refused(&p, "rootfs: not an absolute path");
	p.rootfs = "";
	refused(&p, "rootfs: not an absolute path");
	p.rootfs = "/var/../etc";
	refused(&p, "\"..\" in path");
	p.rootfs = "/var/./x";
	refused(&p, "\"..\" in path");
	p.rootfs = "/var/x/..";
	refused(&p, "\"..\" in path");
	p.rootfs = "/var/x\n";
	refused(&p, "control or non-ASCII");
	p.rootfs = "/var/\xff";
	refused(&p, "control or non-ASCII");
	p.rootfs_image = "image.erofs";
	refused(&p, "rootfs_image: not an absolute path");
	p.rootfs_image = "/c/../etc/x.erofs";
	refused(&p, "\"..\" in path");
	p.cgroups_path = "cell";
	refused(&p, "cgroups_path: not an absolute path");
	p.memory_mb = APPL_MEMORY_MB_MIN - 1;
	refused(&p, "memory_mb is");
	p.memory_mb = APPL_MEMORY_MB_CEIL + 1;
	refused(&p, "memory_mb is");
	p.pids = 0;
	refused(&p, "pids is 0");
	p.pids = APPL_PIDS_CEIL + 1;
	refused(&p, "pids is");
	p.nofile = 15;
	refused(&p, "nofile is 15");
	p.nofile = APPL_NOFILE_CEIL + 1;
	refused(&p, "nofile is");
	p.tmpfs_mb = 0;
	refused(&p, "tmpfs_mb is 0");
	p.tmpfs_mb = APPL_TMPFS_MB_CEIL + 1;
	refused(&p, "tmpfs_mb is");
	/* dots inside a name are fine */
	p.rootfs = "/var/lib/a..b/.c/d.";
	cfg = sandbox_ociconfig_new(&p, NULL);
	assert_non_null(cfg);
	json_decref(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_process_identity),
		cmocka_unit_test(test_pooled_runner_argument),
		cmocka_unit_test(test_preload_argument),
		cmocka_unit_test(test_env_is_exactly_path),
		cmocka_unit_test(test_capabilities_empty),
		cmocka_unit_test(test_rlimits),
		cmocka_unit_test(test_root_and_mounts),
		cmocka_unit_test(test_namespaces),
		cmocka_unit_test(test_resources_only_as_root),
		cmocka_unit_test(test_cgroups_path),
		cmocka_unit_test(test_rootfs_image),
		cmocka_unit_test(test_top_level_keys),
		cmocka_unit_test(test_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
