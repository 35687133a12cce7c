/* audit.c: the audit log's writer (see audit.h, docs/audit.md): the
 * queue and its rounds, the checks of the log's directory and state made
 * at open, and open and free. What one locked write does is batch.c's. */
#define _GNU_SOURCE
#include "audit/writer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/format.h"

/* ---- the queue and its rounds ------------------------------------------------------ */

static void failed_now(struct audit *a)
{
	if (!a->failed) {
		a->failed = true;
		a->failed_since = audit_now_ms();
	}
	if (a->retry_timer)
		loop_timer_set(a->retry_timer, AUDIT_RETRY_MS);
}

int audit_flush(struct audit *a, bool sync)
{
	int rc;

	if (!a->qhead && !a->seal_wanted && !a->failed)
		return 0;
	rc = audit_batch_write(a, sync, NULL);
	if (rc < 0) {
		failed_now(a);
		return rc;
	}
	a->failed = false;
	a->dropped = 0;
	a->why[0] = '\0';
	return 0;
}

static void on_round(void *data)
{
	audit_flush(data, false);
}

static void on_retry(void *data)
{
	struct audit *a = data;

	if (a->failed)
		audit_flush(a, false);
}

static void on_seal_timer(void *data)
{
	struct audit *a = data;

	a->seal_wanted = a->seal;
	audit_flush(a, false);
	loop_timer_set(a->seal_timer, (uint64_t)a->seal_s * 1000u);
}

void audit_event(struct audit *a, const char *ev, const json_t *body)
{
	struct qev *q;

	if (a->qn >= AUDIT_QUEUE_MAX || !(q = calloc(1, sizeof(*q)))) {
		a->dropped++;
		return;
	}
	if (!(q->rest = audit_rest_make(body))) {
		free(q);
		a->dropped++;
		return;
	}
	snprintf(q->ev, sizeof(q->ev), "%s", ev);
	q->ms = audit_now_ms();
	if (a->qtail)
		a->qtail->next = q;
	else
		a->qhead = q;
	a->qtail = q;
	a->qn++;
	if (a->loop)
		loop_defer(a->loop, &a->task);
}

int audit_event_sync(struct audit *a, const char *ev, const json_t *body)
{
	struct qev *last;
	int rc;

	if (a->qn >= AUDIT_QUEUE_MAX)
		return -ENOBUFS;
	audit_event(a, ev, body);
	last = a->qtail;
	if ((rc = audit_flush(a, true)) == 0)
		return 0;
	/* Not on disk: the event did not happen, so it must not be written
	 * later either. */
	if (last && a->qtail == last) {
		struct qev **pp = &a->qhead, *prev = NULL;

		while (*pp != last) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		*pp = NULL;
		a->qtail = prev;
		a->qn--;
		free(last->rest);
		free(last);
	}
	return rc;
}

void audit_seal_now(struct audit *a)
{
	a->seal_wanted = a->seal;
}

bool audit_ok(const struct audit *a)
{
	return !a->failed;
}

void audit_stats(const struct audit *a, struct audit_stats *out)
{
	*out = (struct audit_stats){
		.path = a->path, .lines = a->lines, .seal_ms = a->seal_ms, .ok = !a->failed};
}

const char *audit_why(const struct audit *a)
{
	return a->why[0] ? a->why : "the audit log cannot be written";
}

void audit_digest_of(const struct audit *a, const void *data, size_t len, char out[AUDIT_HASH_HEX])
{
	audit_digest(a->dkey, data, len, out);
}

/* ---- open and free ------------------------------------------------------------------- */

static int state_files(struct audit *a, const struct audit_config *cfg, struct appl_err *err)
{
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	int rc;

	if ((rc = audit_install_key(cfg->state_dir, true, a->dkey, err)) < 0 ||
	    (rc = audit_state_open(cfg->state_dir, true, &a->dfd, err)) < 0)
		return rc;
	audit_state_id(cfg->path, id);
	snprintf(a->seal_name, sizeof(a->seal_name), "%s.seal", id);
	snprintf(name, sizeof(name), "%s.lock", id);
	a->lockfd = openat(a->dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a->lockfd < 0)
		return appl_err_errno(err, -errno, errno, "audit state %s", name);
	snprintf(name, sizeof(name), "%s.head", id);
	a->headfd = openat(a->dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a->headfd < 0)
		return appl_err_errno(err, -errno, errno, "audit state %s", name);
	return 0;
}

/* The log's directory: whoever else could write it could swap the log or
 * its rotated files for others (unless the sticky bit keeps them to their
 * own names, as in /tmp). */
static int dir_check(const struct audit *a, struct appl_err *err)
{
	struct stat st;

	if (stat(a->dir_name, &st) < 0)
		return appl_err_errno(err, -errno, errno, "%s: the audit log's directory", a->path);
	if (!S_ISDIR(st.st_mode))
		return appl_err_set(err, -ENOTDIR, "%s: %s is not a directory", a->path,
				    a->dir_name);
	if ((st.st_uid != 0 && st.st_uid != geteuid()) ||
	    ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX)))
		return appl_err_set(err, -EPERM,
				    "%s: its directory %s must belong to root or to us and not be "
				    "writable by group or others",
				    a->path, a->dir_name);
	return 0;
}

static int names_split(struct audit *a, const char *path, struct appl_err *err)
{
	const char *slash = strrchr(path, '/');

	if (path[0] != '/' || !slash || !slash[1])
		return appl_err_set(err, -EINVAL, "%s: the audit log's path must be absolute",
				    path);
	a->path = strdup(path);
	a->base = strdup(slash + 1);
	a->dir_name = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	if (!a->path || !a->base || !a->dir_name)
		return appl_err_set(err, -ENOMEM, "out of memory");
	return dir_check(a, err);
}

/* state_files for a look only: nothing is made, and what is missing (the
 * state directory, the key, the lock, the head: a log no appliance wrote
 * yet) is left -1, as `run` would start it. */
static int state_look(struct audit *a, const struct audit_config *cfg, struct appl_err *err)
{
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	int rc = audit_install_key(cfg->state_dir, false, a->dkey, err);

	if (rc < 0 && rc != -ENOENT)
		return rc;
	if ((rc = audit_state_open(cfg->state_dir, false, &a->dfd, err)) == -ENOENT)
		a->dfd = -1;
	else if (rc < 0)
		return rc;
	audit_state_id(cfg->path, id);
	snprintf(a->seal_name, sizeof(a->seal_name), "%s.seal", id);
	for (int i = 0; a->dfd >= 0 && i < 2; i++) {
		int *fd = i ? &a->headfd : &a->lockfd;

		snprintf(name, sizeof(name), "%s.%s", id, i ? "head" : "lock");
		*fd = openat(a->dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (*fd < 0 && errno != ENOENT)
			return appl_err_errno(err, -errno, errno, "audit state %s", name);
	}
	return 0;
}

int audit_check(const struct audit_config *cfg, struct appl_err *err)
{
	struct audit *a = calloc(1, sizeof(*a));
	struct batch bt = {.fd = -1};
	int rc;

	if (!a)
		return appl_err_set(err, -ENOMEM, "out of memory");
	a->dfd = a->lockfd = a->headfd = -1;
	a->pid = getpid();
	a->seal = cfg->seal;
	if (!(a->state_dir = strdup(cfg->state_dir)))
		rc = appl_err_set(err, -ENOMEM, "out of memory");
	else
		rc = names_split(a, cfg->path, err);
	if (rc == 0)
		rc = state_look(a, cfg, err);
	if (rc == 0 && a->lockfd >= 0)
		rc = audit_lock_take(a, err);
	/* The judgment audit_open's first pass makes, and nothing written. */
	if (rc == 0)
		rc = audit_batch_open(a, &bt, err);
	if (rc == 0 && bt.create && faccessat(AT_FDCWD, a->dir_name, W_OK | X_OK, AT_EACCESS) < 0)
		rc = appl_err_errno(err, -errno, errno, "%s: the log cannot be made in %s", a->path,
				    a->dir_name);
	if (a->lockfd >= 0)
		flock(a->lockfd, LOCK_UN);
	audit_batch_done(&bt);
	audit_free(a);
	return rc;
}

struct audit *audit_open(struct loop *loop, const struct audit_config *cfg, struct appl_err *err)
{
	struct audit *a = calloc(1, sizeof(*a));
	int rc;

	if (!a) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	a->dfd = a->lockfd = a->headfd = -1;
	a->loop = loop;
	a->pid = getpid();
	a->seal = cfg->seal;
	a->seal_lines = cfg->seal_lines ? cfg->seal_lines : 1;
	a->seal_s = cfg->seal_s ? cfg->seal_s : 1;
	a->rotate_bytes = cfg->rotate_bytes;
	loop_task_init(&a->task, on_round, a);
	if (!(a->state_dir = strdup(cfg->state_dir))) {
		free(a);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	rc = names_split(a, cfg->path, err);
	if (rc == 0)
		rc = state_files(a, cfg, err);
	/* The first locked pass judges the file and starts or continues it. */
	if (rc == 0)
		rc = audit_batch_write(a, true, err);
	a->opened = true;
	if (rc == 0 && loop &&
	    (!(a->retry_timer = loop_timer_new(loop, on_retry, a, err)) ||
	     (cfg->seal && (!(a->seal_timer = loop_timer_new(loop, on_seal_timer, a, err)) ||
			    loop_timer_set(a->seal_timer, (uint64_t)a->seal_s * 1000u) < 0))))
		rc = err->code ? err->code : -ENOMEM;
	if (rc < 0) {
		a->qhead = NULL;
		audit_free(a);
		return NULL;
	}
	return a;
}

void audit_free(struct audit *a)
{
	if (!a)
		return;
	if ((a->qhead || a->seal_wanted) && a->lockfd >= 0)
		audit_flush(a, true);
	audit_queue_pop(a, a->qn);
	if (a->loop)
		loop_task_cancel(a->loop, &a->task);
	loop_timer_free(a->seal_timer);
	loop_timer_free(a->retry_timer);
	if (a->dfd >= 0)
		close(a->dfd);
	if (a->lockfd >= 0)
		close(a->lockfd);
	if (a->headfd >= 0)
		close(a->headfd);
	sodium_memzero(a->dkey, sizeof(a->dkey));
	free(a->path);
	free(a->state_dir);
	free(a->base);
	free(a->dir_name);
	free(a);
}
