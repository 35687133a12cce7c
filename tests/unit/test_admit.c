/* test_admit.c: which waiting run gets a free cell slot (pkg/run/admit.h):
 * round robin between principals, first come first served within one, each
 * principal held to its cap; runs that leave while waiting. No clock: the
 * order is the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/limits.h"
#include "run/admit.h"

#define RUNS_MAX 64

/* A run is named by its principal and its number within it: "A3". */
struct fx {
	struct run_queue *q;
	struct run_ticket *t[RUNS_MAX];
	char name[RUNS_MAX][8];
	size_t n;
};

static size_t join(struct fx *fx, const char *principal)
{
	unsigned k = 1;
	size_t i = fx->n++;

	assert_true(i < RUNS_MAX);
	for (size_t j = 0; j < i; j++)
		k += fx->name[j][0] == principal[0];
	snprintf(fx->name[i], sizeof(fx->name[i]), "%s%u", principal, k);
	fx->t[i] = run_queue_join(fx->q, principal, fx->name[i]);
	assert_non_null(fx->t[i]);
	assert_false(run_ticket_running(fx->t[i]));
	return i;
}

static void join_n(struct fx *fx, const char *principal, unsigned n)
{
	while (n--)
		join(fx, principal);
}

/* Every run started now, in order, separated by spaces ("" for none). */
static const char *started(struct fx *fx)
{
	static char out[512];
	struct run_ticket *t;
	size_t o = 0;

	out[0] = '\0';
	while ((t = run_queue_next(fx->q))) {
		assert_true(run_ticket_running(t));
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", o ? " " : "",
				      (const char *)run_ticket_data(t));
		assert_true(o < sizeof(out));
	}
	return out;
}

static void leave(struct fx *fx, const char *name)
{
	for (size_t i = 0; i < fx->n; i++)
		if (fx->t[i] && strcmp(fx->name[i], name) == 0) {
			run_queue_leave(fx->q, fx->t[i]);
			fx->t[i] = NULL;
			return;
		}
	fail_msg("no run %s", name);
}

static void fx_done(struct fx *fx)
{
	for (size_t i = 0; i < fx->n; i++)
		run_queue_leave(fx->q, fx->t[i]);
	assert_int_equal(run_queue_waiting(fx->q, NULL), 0);
	assert_int_equal(run_queue_running(fx->q, NULL), 0);
	run_queue_free(fx->q);
}

/* The defaults (4 slots, 3 per client) and one client sending 16 cells:
 * it holds 3, and another client's cell takes the fourth at once, ahead
 * of the 13 still waiting. */
static void test_a_burst_leaves_a_slot_for_another_client(void **state)
{
	struct fx fx = {.q = run_queue_new(APPL_CELLS_DEF, APPL_HTTP_CELLS_PER_CLIENT_DEF)};

	(void)state;
	assert_int_equal(APPL_HTTP_CELLS_PER_CLIENT_DEF, 3);
	join_n(&fx, "A", 16);
	assert_string_equal(started(&fx), "A1 A2 A3");
	assert_int_equal(run_queue_running(fx.q, "A"), 3);
	assert_int_equal(run_queue_waiting(fx.q, "A"), 13);
	join(&fx, "B");
	assert_string_equal(started(&fx), "B1");
	assert_int_equal(run_queue_running(fx.q, NULL), 4);
	/* the burst goes on in its order as its own cells end */
	leave(&fx, "A2");
	assert_string_equal(started(&fx), "A4");
	leave(&fx, "B1");
	assert_string_equal(started(&fx), "");
	join(&fx, "B");
	assert_string_equal(started(&fx), "B2");
	fx_done(&fx);
}

/* With a cap that does not help (as many per client as there are slots),
 * freed slots still go round: each client with a run waiting gets the
 * next one in turn, newcomers at the end of the round. */
static void test_freed_slots_go_round_the_clients(void **state)
{
	struct fx fx = {.q = run_queue_new(2, 2)};

	(void)state;
	join_n(&fx, "A", 4);
	assert_string_equal(started(&fx), "A1 A2");
	join_n(&fx, "B", 3);
	join(&fx, "C");
	assert_string_equal(started(&fx), "");
	leave(&fx, "A1");
	assert_string_equal(started(&fx), "B1");
	leave(&fx, "A2");
	assert_string_equal(started(&fx), "C1");
	leave(&fx, "B1");
	assert_string_equal(started(&fx), "A3");
	leave(&fx, "C1"); /* C has nothing left: out of the round */
	assert_string_equal(started(&fx), "B2");
	leave(&fx, "A3");
	assert_string_equal(started(&fx), "A4");
	leave(&fx, "B2");
	assert_string_equal(started(&fx), "B3");
	fx_done(&fx);
}

/* A client that joins while others wait goes to the end of the round: the
 * ones already waiting are served first. */
static void test_a_newcomer_waits_its_turn(void **state)
{
	struct fx fx = {.q = run_queue_new(1, 0)};

	(void)state;
	join_n(&fx, "A", 2);
	assert_string_equal(started(&fx), "A1");
	join(&fx, "B");
	join(&fx, "C");
	leave(&fx, "A1");
	assert_string_equal(started(&fx), "B1");
	join(&fx, "D");
	leave(&fx, "B1");
	assert_string_equal(started(&fx), "C1");
	leave(&fx, "C1");
	assert_string_equal(started(&fx), "A2");
	leave(&fx, "A2");
	assert_string_equal(started(&fx), "D1");
	fx_done(&fx);
}

/* One principal (stdio) with no cap of its own: first come, first served,
 * all the slots its. */
static void test_one_principal_is_first_come_first_served(void **state)
{
	struct fx fx = {.q = run_queue_new(2, 0)};

	(void)state;
	join_n(&fx, "S", 5);
	assert_string_equal(started(&fx), "S1 S2");
	leave(&fx, "S2");
	assert_string_equal(started(&fx), "S3");
	leave(&fx, "S1");
	leave(&fx, "S3");
	assert_string_equal(started(&fx), "S4 S5");
	fx_done(&fx);
}

/* A waiting run that leaves (cancelled, or its deadline passed) is never
 * handed a slot, and the turn stays where it was. */
static void test_runs_that_leave_while_waiting(void **state)
{
	struct fx fx = {.q = run_queue_new(1, 0)};

	(void)state;
	join_n(&fx, "A", 3);
	join(&fx, "B");
	join(&fx, "C");
	assert_string_equal(started(&fx), "A1");
	leave(&fx, "A2"); /* the middle of A's line */
	leave(&fx, "B1"); /* B's only run: B is out of the round */
	assert_int_equal(run_queue_waiting(fx.q, NULL), 2);
	assert_int_equal(run_queue_waiting(fx.q, "B"), 0);
	leave(&fx, "A1");
	assert_string_equal(started(&fx), "C1");
	leave(&fx, "C1");
	assert_string_equal(started(&fx), "A3");
	leave(&fx, "A3");
	assert_string_equal(started(&fx), "");
	/* a queue emptied and used again */
	join(&fx, "C");
	assert_string_equal(started(&fx), "C2");
	fx_done(&fx);
}

/* The slots bound every client together; a client at its cap waits even
 * with slots free, and no one is started twice. */
static void test_caps_hold(void **state)
{
	struct fx fx = {.q = run_queue_new(3, 1)};

	(void)state;
	join_n(&fx, "A", 3);
	assert_string_equal(started(&fx), "A1");
	join_n(&fx, "B", 2);
	join_n(&fx, "C", 2);
	join_n(&fx, "D", 2);
	assert_string_equal(started(&fx), "B1 C1");
	assert_int_equal(run_queue_running(fx.q, NULL), 3);
	assert_int_equal(run_queue_waiting(fx.q, NULL), 6);
	leave(&fx, "A1");
	assert_string_equal(started(&fx), "D1");
	leave(&fx, "C1");
	assert_string_equal(started(&fx), "A2");
	fx_done(&fx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_a_burst_leaves_a_slot_for_another_client),
		cmocka_unit_test(test_freed_slots_go_round_the_clients),
		cmocka_unit_test(test_a_newcomer_waits_its_turn),
		cmocka_unit_test(test_one_principal_is_first_come_first_served),
		cmocka_unit_test(test_runs_that_leave_while_waiting),
		cmocka_unit_test(test_caps_hold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
