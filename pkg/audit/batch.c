/* batch.c: one locked write of the audit log: everything queued chained
 * after the head (a new file first when the rotation size would be passed,
 * a seal when one is due), announced in the head, written in one write,
 * and the new head recorded. A failed write leaves nothing of its batch
 * in the file. */
#define _GNU_SOURCE
#include "audit/writer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/fs.h"
#include "metrics/metrics.h"

/* A seal for what is new, when asked for or by lines; and one every
 * seal_s seconds even with nothing new, so that the newest seal of a log
 * being written is never much older than that: a log whose newest seal
 * is old and follows no stop was cut after it, or its sealing stopped,
 * and verify says so (docs/audit.md). */
static bool seal_due(const struct audit *a, const struct batch *bt)
{
	if (!bt->have_st)
		return false;
	if ((uint64_t)audit_now_ms() - bt->st.last_ms >= (uint64_t)a->seal_s * 1000u)
		return true;
	return bt->h.n > bt->st.last_n &&
	       (a->seal_wanted || bt->h.n - bt->st.last_n >= a->seal_lines);
}

static int seal_put(struct audit *a, struct batch *bt)
{
	char t[AUDIT_TIME_LEN + 1], mac[AUDIT_HASH_HEX];
	int64_t ms = audit_now_ms();
	json_t *body;

	audit_time(ms, t);
	audit_seal_mac(bt->st.key, bt->st.kid, bt->st.epoch, bt->h.n + 1, bt->h.hash, t, mac);
	body = json_pack("{ss sI ss}", "kid", bt->st.kid, "epoch", (json_int_t)bt->st.epoch, "mac",
			 mac);
	if (audit_line_put_json(a, &bt->b, &bt->h, "seal", ms, body) < 0)
		return -ENOMEM;
	/* In memory only until the seal line is on disk. */
	bt->st.epoch++;
	audit_ratchet(bt->st.key);
	bt->st_dirty = true;
	bt->st.last_n = bt->h.n;
	bt->st.last_ms = (uint64_t)ms;
	bt->st.last_file = bt->h.file;
	bt->st.last_end = bt->h.bytes;
	memcpy(bt->st.last_hash, bt->h.hash, AUDIT_HASH_HEX);
	return 0;
}

void audit_batch_done(struct batch *bt)
{
	if (bt->fd >= 0)
		close(bt->fd);
	sodium_memzero(&bt->st, sizeof(bt->st));
	free(bt->b.p);
}

void audit_queue_pop(struct audit *a, size_t n)
{
	while (n-- && a->qhead) {
		struct qev *q = a->qhead;

		a->qhead = q->next;
		if (!a->qhead)
			a->qtail = NULL;
		free(q->rest);
		free(q);
		a->qn--;
	}
}

/* Everything queued, chained after the head, in one write; a new file
 * first when it would take this one past the rotation size. */
static int batch_fill(struct audit *a, struct batch *bt)
{
	uint64_t est = bt->b.len;
	int rc;

	for (struct qev *q = a->qhead; q; q = q->next)
		est += strlen(q->rest) + 256;
	if (bt->b.len == 0 && bt->size0 > 0 && bt->h.bytes + est > a->rotate_bytes) {
		bt->rotate = true;
		bt->h.file++;
		bt->h.bytes = 0;
		if ((rc = audit_open_line_put(a, bt)) < 0)
			return rc;
	}
	if (a->failed) {
		rc = audit_line_put_json(a, &bt->b, &bt->h, "resumed", audit_now_ms(),
					 json_pack("{sI ss sI}", "failed_ms",
						   (json_int_t)(audit_now_ms() - a->failed_since),
						   "error", a->why, "dropped",
						   (json_int_t)a->dropped));
		if (rc < 0)
			return rc;
	}
	for (struct qev *q = a->qhead; q; q = q->next, bt->nev++)
		if ((rc = audit_line_put(a, &bt->b, &bt->h, q->ev, q->ms, q->rest)) < 0)
			return rc;
	if (seal_due(a, bt))
		return seal_put(a, bt);
	return 0;
}

static int head_put(struct audit *a, struct audit_head *h, uint64_t gen, bool sync,
		    struct appl_err *err)
{
	int rc;

	h->gen = gen;
	if ((rc = audit_head_write_fd(a->headfd, h, sync)) < 0)
		return audit_fail(a, rc, err, "writing the head of %s: %s", a->path, strerror(-rc));
	return 0;
}

/* Where bt->b goes: the file renamed away first when it rotates, the new
 * one made. */
static int batch_target(struct audit *a, struct batch *bt, struct appl_err *err)
{
	char name[NAME_MAX + 1], old[PATH_MAX];

	if (bt->rotate) {
		if (audit_rotated_name(a, bt->base.file, name, sizeof(name), old, sizeof(old)) < 0)
			return audit_fail(a, -ENAMETOOLONG, err, "%s: too long to rotate", a->path);
		if (fdatasync(bt->fd) < 0 ||
		    renameat2(AT_FDCWD, a->path, AT_FDCWD, old, RENAME_NOREPLACE) < 0)
			return audit_fail(a, -errno, err, "%s: rotating to %s: %s", a->path, old,
					  strerror(errno));
		close(bt->fd);
		bt->fd = -1;
		bt->create = true;
	}
	if (bt->create) {
		bt->fd =
			open(a->path,
			     O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (bt->fd < 0)
			return audit_fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
		bt->size0 = 0;
	}
	return 0;
}

/* Announce bt->b in the head, write it, record the new head; on failure
 * nothing of it stays in the file. */
static int batch_commit(struct audit *a, struct batch *bt, bool sync, struct appl_err *err)
{
	struct audit_head pend = bt->base;
	bool durable = sync || bt->st_dirty;
	int rc;

	if (bt->b.len) {
		pend.pend_file = bt->h.file;
		pend.pend_bytes = bt->h.bytes;
		memcpy(pend.pend_hash, bt->h.hash, AUDIT_HASH_HEX);
		if ((rc = head_put(a, &pend, bt->gen + 1, durable, err)) < 0 ||
		    (rc = batch_target(a, bt, err)) < 0)
			return rc;
		rc = appl_fd_write_all(bt->fd, bt->b.p, bt->b.len);
		if (rc == 0 && durable && fdatasync(bt->fd) < 0)
			rc = -errno;
		if (rc < 0) {
			int e = -rc;

			if (ftruncate(bt->fd, (off_t)bt->size0) < 0)
				return audit_fail(
					a, rc, err,
					"%s: %s (and cutting the failed write back failed)",
					a->path, strerror(e));
			return audit_fail(a, rc, err, "%s: %s", a->path, strerror(e));
		}
	}
	/* The lines are in the file: from here a failure leaves them past the
	 * head, announced, and the next batch adopts them. */
	metrics_add(METRICS_AUDIT_LINES, bt->h.n - bt->base.n, METRICS_L(NULL));
	if (bt->st.last_n > bt->base.n) /* a seal of this batch's, not one adopted */
		metrics_count(METRICS_AUDIT_SEALS, NULL);
	audit_queue_pop(a, bt->nev);
	a->lines += bt->h.n - bt->base.n;
	if (bt->st_dirty) {
		struct appl_err e2 = {0};

		if ((rc = audit_seal_write(a->dfd, a->seal_name, &bt->st, &e2)) < 0)
			return audit_fail(a, rc, err, "%s", e2.msg);
		a->seal_wanted = false;
	}
	if (bt->have_st)
		a->seal_ms = bt->st.last_ms;
	/* Not synced: should this write be lost, the announcement (on disk
	 * when it counts) covers what the batch wrote, and the next writer
	 * adopts it. */
	bt->h.pend_file = 0;
	if ((rc = head_put(a, &bt->h, bt->gen + 2, false, err)) < 0)
		return rc;
	return 0;
}

int audit_lock_take(struct audit *a, struct appl_err *err)
{
	while (flock(a->lockfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return audit_fail(a, -errno, err, "locking the audit state of %s: %s",
					  a->path, strerror(errno));
	return 0;
}

int audit_batch_write(struct audit *a, bool sync, struct appl_err *err)
{
	struct batch bt = {.fd = -1};
	int rc;

	if ((rc = audit_lock_take(a, err)) < 0)
		return rc;
	rc = audit_batch_open(a, &bt, err);
	if (rc == 0)
		rc = batch_fill(a, &bt);
	if (rc == 0)
		rc = batch_commit(a, &bt, sync, err);
	else if (rc == -ENOMEM)
		audit_fail(a, rc, err, "out of memory");
	flock(a->lockfd, LOCK_UN);
	audit_batch_done(&bt);
	return rc;
}
