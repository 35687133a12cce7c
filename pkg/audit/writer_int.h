/* writer_int.h: inside the audit log's writer (audit.h), shared by its
 * files only: audit.c (the queue, its rounds, open and free), batch.c (one
 * locked write: fill, seal, commit), adopt.c (the file judged against its
 * head under the lock, and what a dead writer left adopted) and line.c
 * (the lines themselves). Calls go down that list, never up it. */
#ifndef APPL_AUDIT_WRITER_INT_H
#define APPL_AUDIT_WRITER_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit/audit.h"
#include "audit/format.h"
#include "base/err.h"
#include "loop/loop.h"

#define AUDIT_QUEUE_MAX 4096 /* lines waiting while the log cannot be written */
#define AUDIT_RETRY_MS	1000 /* a failed log is tried again this often */
#define AUDIT_BODY_MAX	(AUDIT_LINE_MAX - 256)
#define AUDIT_TAIL_MAX	(64u << 20) /* lines past the head an open reads */
#define AUDIT_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define AUDIT_EV_MAX	32

/* An event queued for the next batch. */
struct qev {
	struct qev *next;
	char ev[AUDIT_EV_MAX];
	char *rest; /* the members after the five: "}" or ",...}" */
	int64_t ms;
};

/* A batch's bytes: p[0..len), NUL-terminated, in cap allocated. */
struct buf {
	char *p;
	size_t len, cap;
};

struct audit {
	struct loop *loop;
	char *path;
	char *dir_name; /* the log's directory, for rotation */
	char *base;	/* the log's file name */
	bool seal;
	unsigned seal_lines, seal_s;
	uint64_t rotate_bytes;
	int dfd;    /* STATE/audit */
	int lockfd; /* ID.lock */
	int headfd; /* ID.head */
	char seal_name[AUDIT_ID_HEX + 8];
	unsigned char dkey[AUDIT_KEY_BYTES];
	pid_t pid;
	struct qev *qhead, *qtail;
	size_t qn;
	uint64_t dropped;
	bool failed;
	int64_t failed_since;
	char why[512];
	bool seal_wanted; /* audit_seal_now, or the timer */
	bool opened;	  /* the first locked pass (the log judged at start) is done */
	uint64_t lines;	  /* lines this writer put in the log (audit_stats) */
	uint64_t seal_ms; /* the log's newest seal as last seen, unix ms; 0: none */
	char *state_dir;
	struct loop_task task;
	struct loop_timer *seal_timer, *retry_timer;
};

/* One locked write: what it read of the head and the file, and what it
 * adds. */
struct batch {
	struct audit_head h;	/* moves on with every line put in b */
	struct audit_head base; /* the chain as it is on disk before b */
	uint64_t gen;		/* the head's gen as read */
	int fd;			/* the log, O_APPEND; -1 until known */
	uint64_t size0;		/* its size before b */
	bool create;		/* the file at the path is made for b */
	bool rotate;		/* the path is renamed to PATH.base.file first */
	struct buf b;		/* what goes into it */
	struct audit_seal_state st;
	bool have_st, st_dirty; /* st changed: written once the lines are on disk */
	size_t nev;		/* queued events in b */
};

/* ---- lines (line.c) ----------------------------------------------------------- */

/* The clock, in unix ms. */
int64_t audit_now_ms(void);

/* Append s[0..n) to b, NUL-terminated: 0 or -ENOMEM. */
int audit_buf_add(struct buf *b, const char *s, size_t n);

/* The members of body (borrowed, may be NULL) after the five every line
 * has: "}" or ",...}", new (free), or NULL when out of memory. */
char *audit_rest_make(const json_t *body);

/* Append one line for ev at ms to b, chained after h, and move h on.
 * _json takes body (a new reference, may be NULL) and drops it. */
int audit_line_put(struct audit *a, struct buf *b, struct audit_head *h, const char *ev, int64_t ms,
		   const char *rest);
int audit_line_put_json(struct audit *a, struct buf *b, struct audit_head *h, const char *ev,
			int64_t ms, json_t *body);

/* Record why writing failed (for audit_why), fill err (may be NULL) with
 * it too, and return rc. */
int audit_fail(struct audit *a, int rc, struct appl_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* ---- judging the file (adopt.c) ------------------------------------------------- */

/* Under the lock: the head read, the file judged against it, and what a
 * dead writer left adopted. bt->b may get a torn line and a log.open. */
int audit_batch_open(struct audit *a, struct batch *bt, struct appl_err *err);

/* The name and the path of rotated file `file` (PATH.file): 0, or
 * -ENAMETOOLONG. */
int audit_rotated_name(const struct audit *a, uint64_t file, char *name, size_t nlen, char *path,
		       size_t plen);

/* The first line of file bt->h.file, chained after the file before it. */
int audit_open_line_put(struct audit *a, struct batch *bt);

/* ---- one locked write (batch.c) --------------------------------------------------- */

/* Take the log's lock (flock, waiting): 0 or the failure. */
int audit_lock_take(struct audit *a, struct appl_err *err);

/* Under the lock: what is queued written as one batch after the head (a
 * seal when due, a new file when due). 0 or the failure, err filled. */
int audit_batch_write(struct audit *a, bool sync, struct appl_err *err);

/* Release what bt holds (its fd, its buffer; its sealing key wiped). */
void audit_batch_done(struct batch *bt);

/* Drop the first n queued events. */
void audit_queue_pop(struct audit *a, size_t n);

#endif
