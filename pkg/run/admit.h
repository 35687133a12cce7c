/* admit.h: which waiting run gets a free cell slot. Pure bookkeeping: no
 * loop, no sandbox, no clock (the caller's timers keep each run's deadline,
 * which counts from arrival, waiting included).
 *
 * At most `cells` runs hold a slot. Each run belongs to a principal (the
 * client its token maps to; stdio is one principal), and a principal holds
 * at most `per_principal` slots (0: no cap of its own). A run that finds no
 * slot it may take waits. When slots free, the principals with a run
 * waiting are offered one each in turn (round robin), starting after the
 * principal served last; a principal at its own cap is passed over, and
 * within one principal runs start in the order they came. A principal that
 * joins takes its place at the end of the round, just before the one
 * served last. So a client that sends a burst of runs cannot make another
 * wait behind all of them: the other starts when the next slot frees (at
 * once, when the burst's client is at its cap and a slot is free).
 */
#ifndef APPL_RUN_ADMIT_H
#define APPL_RUN_ADMIT_H

#include <stdbool.h>

struct run_queue;
struct run_ticket; /* one run, waiting or holding a slot */

/* A queue for cells slots (at least 1), per_principal of them at most for
 * one principal (0: no such cap). NULL on -ENOMEM. */
struct run_queue *run_queue_new(unsigned cells, unsigned per_principal);
/* New counts (a reload): a lower one is reached as runs leave; call
 * run_queue_next after. */
void run_queue_limits(struct run_queue *q, unsigned cells, unsigned per_principal);

/* Every ticket must have left first. Safe on NULL. */
void run_queue_free(struct run_queue *q);

/* A run of principal (copied) arrives: it waits at the end of its
 * principal's line until run_queue_next hands it a slot. data is the
 * caller's, given back by run_ticket_data. A new ticket, freed by
 * run_queue_leave; NULL on -ENOMEM. */
struct run_ticket *run_queue_join(struct run_queue *q, const char *principal, void *data);

/* The next run to start (round robin, above), now counted as holding a
 * slot; NULL when no slot is free or no waiting run may take one. Call it
 * until NULL whenever a run joined or left. Borrowed. */
struct run_ticket *run_queue_next(struct run_queue *q);

/* The run is gone, waiting (cancelled, or past its deadline) or holding a
 * slot (ended): its place or slot is free, and t is freed. Safe on NULL. */
void run_queue_leave(struct run_queue *q, struct run_ticket *t);

/* Runs waiting (principal NULL: of every principal). */
unsigned run_queue_waiting(const struct run_queue *q, const char *principal);
/* Runs holding a slot (principal NULL: of every principal). */
unsigned run_queue_running(const struct run_queue *q, const char *principal);

void *run_ticket_data(const struct run_ticket *t);
/* Whether t holds a slot (else it waits). */
bool run_ticket_running(const struct run_ticket *t);

#endif
