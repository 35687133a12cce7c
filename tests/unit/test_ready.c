/* test_ready.c: readiness (pkg/engine/ready.h): the judgement, part by
 * part, in its order, and what the pool says of its last boot
 * (pkg/pool/pool.h: pool_last_boot, pool_cell_ended), which readiness
 * goes by. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "engine/ready.h"
#include "loop/loop.h"
#include "pool/pool.h"

#define NOW 1800000000

/* Everything well: a started appliance, its policy valid for an hour,
 * its image verified, its log writable, its two servers ready, a sandbox
 * ready. */
static struct engine_ready_facts well(void)
{
	return (struct engine_ready_facts){.started = true,
					   .policy = true,
					   .image = true,
					   .audit_ok = true,
					   .now = NOW,
					   .expires = NOW + 3600,
					   .servers = 2,
					   .servers_ready = 2,
					   .sandbox_ready = true,
					   .last_boot = POOL_BOOT_OK};
}

static void expect(const struct engine_ready_facts *f, const char *word)
{
	const char *got = engine_ready_judge(f);

	if (!word)
		assert_null(got);
	else
		assert_string_equal(got ? got : "(ready)", word);
}

static void test_ready_when_all_is_well(void **state)
{
	struct engine_ready_facts f = well();
	(void)state;

	expect(&f, NULL);
	f.servers = f.servers_ready = 0; /* a policy without servers */
	expect(&f, NULL);
}

/* Each part that fails, alone, gives its word. */
static void test_each_part_has_its_word(void **state)
{
	struct engine_ready_facts f;
	(void)state;

	f = well(), f.stopping = true, expect(&f, "stopping");
	f = well(), f.started = false, expect(&f, "starting");
	f = well(), f.policy = false, expect(&f, "policy");
	f = well(), f.expires = NOW, expect(&f, "expired"); /* at the second it names */
	f = well(), f.expires = NOW + 1, expect(&f, NULL);
	f = well(), f.image = false, expect(&f, "image");
	f = well(), f.audit_ok = false, expect(&f, "audit");
	f = well(), f.servers_ready = 1, expect(&f, "servers");
	f = well(), f.servers_ready = 0, expect(&f, "servers");
}

/* A sandbox can be had when one is ready, or the last boot worked (the
 * pool emptied by runs is refilling; with limits.pool 0 nothing is kept).
 * No boot finished yet: starting; the last failed and none is ready:
 * sandbox. */
static void test_sandbox(void **state)
{
	struct engine_ready_facts f = well();
	(void)state;

	f.sandbox_ready = false;
	expect(&f, NULL);
	f.last_boot = POOL_BOOT_NONE;
	expect(&f, "starting");
	f.last_boot = POOL_BOOT_FAILED;
	expect(&f, "sandbox");
	f.sandbox_ready = true; /* one ready, though a later boot failed */
	expect(&f, NULL);
}

/* The first failing part in the order of ready.h is the one said: a
 * stopping appliance says so whatever else, an expired policy before a
 * dead server. */
static void test_first_word_wins(void **state)
{
	struct engine_ready_facts f = {.stopping = true, .last_boot = POOL_BOOT_FAILED};
	(void)state;

	expect(&f, "stopping");
	f.stopping = false;
	expect(&f, "starting");
	f = well();
	f.expires = 0;
	f.servers_ready = 0;
	f.last_boot = POOL_BOOT_FAILED;
	f.sandbox_ready = false;
	expect(&f, "expired");
	f.expires = NOW + 1;
	expect(&f, "servers");
	f.servers_ready = 2;
	expect(&f, "sandbox");
}

/* The pool's last boot, as the owner reports its cells' ends: a boot that
 * failed, a cell whose code ran (so it booted); other ends say nothing of
 * the boot (a deadline, a cancel, a protocol violation by the code). */
static void test_pool_last_boot(void **state)
{
	struct appl_err err = {0};
	struct loop *loop = loop_new(&err);
	struct sandbox_oci_params oci;
	struct cell_limits lim;
	struct pool *p;
	(void)state;

	assert_non_null(loop);
	sandbox_oci_params_init(&oci);
	cell_limits_init(&lim);
	/* size 0, no restore: nothing is booted until pool_fill */
	p = pool_new(loop, NULL, &oci, &lim, 0, false, &err);
	assert_non_null(p);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_NONE);
	pool_cell_ended(p, CELL_DEADLINE);
	pool_cell_ended(p, CELL_CANCELLED);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_NONE);
	pool_cell_ended(p, CELL_BOOT);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_FAILED);
	pool_cell_ended(p, CELL_PROTOCOL);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_FAILED);
	pool_cell_ended(p, CELL_RAN);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_OK);
	pool_cell_ended(p, CELL_MEMORY);
	assert_int_equal(pool_last_boot(p), POOL_BOOT_OK);
	assert_null(pool_ready(p));
	pool_free(p);
	assert_int_equal(pool_last_boot(NULL), POOL_BOOT_NONE);
	pool_cell_ended(NULL, CELL_BOOT);
	loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ready_when_all_is_well),
		cmocka_unit_test(test_each_part_has_its_word),
		cmocka_unit_test(test_sandbox),
		cmocka_unit_test(test_first_word_wins),
		cmocka_unit_test(test_pool_last_boot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
