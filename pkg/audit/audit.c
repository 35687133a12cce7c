/* audit.c: the audit log's writer (see audit.h, docs/audit.md). */
#define _GNU_SOURCE
#include "audit/audit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "loop/loop.h"

#define AUDIT_QUEUE_MAX 4096 /* lines waiting while the log cannot be written */
#define AUDIT_RETRY_MS	1000 /* a failed log is tried again this often */
#define AUDIT_BODY_MAX	(AUDIT_LINE_MAX - 256)
#define AUDIT_TAIL_MAX	(64u << 20) /* lines past the head an open reads */
#define AUDIT_ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define AUDIT_EV_MAX	32

struct qev {
	struct qev *next;
	char ev[AUDIT_EV_MAX];
	char *rest; /* the members after the five: "}" or ",...}" */
	int64_t ms;
};

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
	char *state_dir;
	struct loop_task task;
	struct loop_timer *seal_timer, *retry_timer;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- building lines ---------------------------------------------------------- */

static int buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap)))
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* The members of body after the five every line has. */
static char *rest_of(const json_t *body)
{
	char *s, *r;
	size_t n;

	if (!body || json_object_size(body) == 0)
		return strdup("}");
	s = json_dumps(body, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!s)
		return NULL;
	n = strlen(s);
	if (n > AUDIT_BODY_MAX) { /* callers cap what they give; this is the backstop */
		free(s);
		if (asprintf(&r, ",\"oversize\":%zu}", n) < 0)
			return NULL;
		return r;
	}
	s[0] = ',';
	return s;
}

/* Append one line for ev to b, chained after h, and move h on. */
static int line_put(struct audit *a, struct buf *b, struct audit_head *h, const char *ev,
		    int64_t ms, const char *rest)
{
	char t[AUDIT_TIME_LEN + 1], head[256];
	size_t start = b->len;
	int n;

	audit_time(ms, t);
	n = snprintf(head, sizeof(head),
		     "{\"n\":%" PRIu64 ",\"prev\":\"%s\",\"t\":\"%s\",\"ev\":\"%s\",\"pid\":%ld",
		     h->n + 1, h->hash, t, ev, (long)a->pid);
	if (buf_add(b, head, (size_t)n) < 0 || buf_add(b, rest, strlen(rest)) < 0)
		return -ENOMEM;
	audit_line_hash(b->p + start, b->len - start, h->hash);
	h->n++;
	h->bytes += b->len - start + 1;
	return buf_add(b, "\n", 1);
}

static int line_put_json(struct audit *a, struct buf *b, struct audit_head *h, const char *ev,
			 int64_t ms, json_t *body)
{
	char *rest = rest_of(body);
	int rc = rest ? line_put(a, b, h, ev, ms, rest) : -ENOMEM;

	free(rest);
	json_decref(body);
	return rc;
}

/* ---- the state: lock, head, seal ----------------------------------------------- */

static int fail(struct audit *a, int rc, struct appl_err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Record why writing failed (for audit_why) and fill err too. */
static int fail(struct audit *a, int rc, struct appl_err *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(a->why, sizeof(a->why), fmt, ap);
	va_end(ap);
	if (err)
		appl_err_set(err, rc, "%s", a->why);
	return rc;
}

static int head_load(struct audit *a, struct audit_head *h, struct appl_err *err)
{
	/* No head file (audit_check, before any appliance wrote): nothing
	 * recorded yet. */
	int rc = a->headfd < 0 ? -ENOENT : audit_head_read_fd(a->headfd, h);

	if (rc == -ENOENT) {
		memset(h, 0, sizeof(*h));
		memcpy(h->hash, AUDIT_ZERO_HASH, AUDIT_HASH_HEX);
		return 1; /* nothing recorded yet */
	}
	if (rc < 0)
		return fail(a, rc, err, "%s: the recorded head of this log is unreadable (%s)",
			    a->path, rc == -EINVAL ? "both slots fail their check" : strerror(-rc));
	return 0;
}

/* ---- judging the file against the head ------------------------------------------ */

/* What a line past the head must be: JSON whose n and prev continue h. A
 * log adopted without any head (the state was lost) starts where its
 * first line, a log.open, says. */
static int tail_line(struct audit *a, const char *line, size_t len, struct audit_head *h,
		     bool relaxed, struct audit_seal_state *st, bool *st_dirty,
		     struct appl_err *err)
{
	json_error_t je;
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	json_int_t n = json_integer_value(json_object_get(o, "n"));
	const char *prev = json_string_value(json_object_get(o, "prev"));
	const char *ev = json_string_value(json_object_get(o, "ev"));
	const char *kid = json_string_value(json_object_get(o, "kid"));
	bool first = relaxed && h->n == 0;
	int rc = 0;

	if (!json_is_object(o) || !prev || !ev || n < 1 ||
	    (!first && ((uint64_t)n != h->n + 1 || strcmp(prev, h->hash) != 0)) ||
	    (first && strcmp(ev, "log.open") != 0))
		rc = fail(a, -EINVAL, err,
			  "%s: the line after line %" PRIu64 " of the recorded head does not "
			  "continue the chain: check it with `appliance audit verify`",
			  a->path, h->n);
	if (rc == 0 && first) {
		json_int_t file = json_integer_value(json_object_get(o, "file"));

		h->file = file > 0 ? (uint64_t)file : 1;
	}
	if (rc == 0 && st && strcmp(ev, "seal") == 0 && kid && strcmp(kid, st->kid) == 0 &&
	    json_integer_value(json_object_get(o, "epoch")) == (json_int_t)st->epoch) {
		/* A writer stopped between sealing and ratcheting: the key
		 * of that epoch is spent. */
		st->epoch++;
		audit_ratchet(st->key);
		st->last_n = (uint64_t)n;
		st->last_file = h->file;
		st->last_end = h->bytes + len + 1;
		audit_line_hash(line, len, st->last_hash);
		*st_dirty = true;
	}
	json_decref(o);
	if (rc == 0) {
		h->n = (uint64_t)n;
		audit_line_hash(line, len, h->hash);
		h->bytes += len + 1;
	}
	return rc;
}

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

/* The bytes of the log past the head (size in all): what a dead writer
 * wrote and did not record. Taken only when the head announced them (or
 * there is no head at all); a torn last line's length goes to *torn. */
static int tail_adopt(struct audit *a, struct batch *bt, int rfd, uint64_t size, bool fresh,
		      uint64_t *torn, struct appl_err *err)
{
	struct audit_head *h = &bt->h;
	uint64_t off = h->bytes, want = size - h->bytes;
	char *data, *p, *end;
	ssize_t got;
	int rc = 0;

	if (!fresh && (h->pend_file != h->file || size > h->pend_bytes))
		return fail(a, -EINVAL, err,
			    "%s: %" PRIu64 " bytes past the recorded head (line %" PRIu64
			    ") that no appliance announced: check it with `appliance audit verify`",
			    a->path, want, h->n);
	if (want > AUDIT_TAIL_MAX)
		return fail(a, -EFBIG, err, "%s: %" PRIu64 " bytes past the recorded head", a->path,
			    want);
	if (!(data = malloc(want + 1)))
		return fail(a, -ENOMEM, err, "out of memory");
	got = pread(rfd, data, want, (off_t)off);
	if (got != (ssize_t)want) {
		free(data);
		return fail(a, -EIO, err, "%s: reading past the recorded head failed", a->path);
	}
	p = data;
	end = data + want;
	while (rc == 0 && p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl) {
			*torn = (uint64_t)(end - p) + 1;
			break;
		}
		rc = tail_line(a, p, (size_t)(nl - p), h, fresh, bt->have_st ? &bt->st : NULL,
			       &bt->st_dirty, err);
		p = nl + 1;
	}
	free(data);
	/* What ends in whole lines must be the whole batch announced, its last
	 * line the one announced; a torn write may stop anywhere before. A
	 * power loss that kept a prefix of whole lines is refused too: it
	 * cannot be told from lines someone else wrote. */
	if (rc == 0 && !fresh && !*torn &&
	    (h->bytes != h->pend_bytes || strcmp(h->hash, h->pend_hash) != 0))
		rc = fail(a, -EINVAL, err,
			  "%s: the lines past the recorded head are not those announced: check "
			  "it with `appliance audit verify`",
			  a->path);
	return rc;
}

/* PATH.K (K: file) into out. */
static int rotated_name(const struct audit *a, uint64_t file, char *name, size_t nlen, char *path,
			size_t plen)
{
	if (snprintf(name, nlen, "%s.%" PRIu64, a->base, file) >= (int)nlen ||
	    appl_path_join(path, plen, a->dir_name, "/", name) < 0)
		return -ENAMETOOLONG;
	return 0;
}

/* The first line of file h->file, chained after the file before it. */
static int open_line(struct audit *a, struct batch *bt)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	json_t *body;

	if (bt->h.file > 1 &&
	    rotated_name(a, bt->h.file - 1, name, sizeof(name), path, sizeof(path)) == 0)
		body = json_pack("{sI s{ss sI ss}}", "file", (json_int_t)bt->h.file, "previous",
				 "name", name, "n", (json_int_t)bt->h.n, "hash", bt->h.hash);
	else
		body = json_pack("{sI sn}", "file", (json_int_t)bt->h.file, "previous");
	return line_put_json(a, &bt->b, &bt->h, "log.open", now_ms(), body);
}

/* An announced batch that starts a new file: did it get as far as
 * renaming the old one (or is there no old one)? Then the path is the
 * new file. */
static bool new_file_begun(struct audit *a, const struct audit_head *h)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	struct stat sb;

	if (h->file == 0)
		return h->pend_file == 1;
	return h->pend_file == h->file + 1 &&
	       rotated_name(a, h->file, name, sizeof(name), path, sizeof(path)) == 0 &&
	       lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size == h->bytes;
}

/* The hash of the line that ends at byte end of the log's file number
 * file (the one at the path, or a rotated one): 0, or -ESTALE when no
 * whole line ends there. */
static int line_hash_at(struct audit *a, uint64_t file, uint64_t cur_file, uint64_t end,
			char hash[AUDIT_HASH_HEX])
{
	char name[NAME_MAX + 1], path[PATH_MAX], *buf, *nl;
	uint64_t want = end < AUDIT_LINE_MAX + 1 ? end : AUDIT_LINE_MAX + 1;
	int fd, rc = -ESTALE;

	if (file != cur_file && rotated_name(a, file, name, sizeof(name), path, sizeof(path)) < 0)
		return -ESTALE;
	fd = open(file == cur_file ? a->path : path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || want == 0)
		goto out;
	if (!(buf = malloc(want))) {
		rc = -ENOMEM;
		goto out;
	}
	if (pread(fd, buf, want, (off_t)(end - want)) == (ssize_t)want && buf[want - 1] == '\n') {
		nl = memrchr(buf, '\n', want - 1);
		if (nl || want == end) {
			nl = nl ? nl + 1 : buf;
			audit_line_hash(nl, (size_t)(buf + want - 1 - nl), hash);
			rc = 0;
		}
	}
	free(buf);
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

static int cut_refuse(struct audit *a, const struct batch *bt, struct appl_err *err,
		      const char *what)
{
	char id[AUDIT_ID_HEX];

	audit_state_id(a->path, id);
	return fail(
		a, -ESTALE, err,
		"%s: the audit log was cut: its sealing state records the seal of epoch %" PRIu64
		" at line %" PRIu64 ", %s. Keep both for the auditor (`appliance audit "
		"verify --key` names what is missing); to begin a new log, move the log, its "
		"rotated files and %s/audit/%s.* aside and run `appliance audit init`",
		a->path, bt->st.epoch - 1, bt->st.last_n, what, a->state_dir, id);
}

/* At start: the log must still hold the last seal its sealing state
 * records, at its place. Whoever cut the log back past it (the seals
 * after an old one removed, the rest renumbered, rechained and the head
 * rewritten) left a state ahead of the log: such a log is refused, never
 * sealed on from an epoch that would hide the gap. */
static int seal_place_check(struct audit *a, const struct batch *bt, struct appl_err *err)
{
	const struct audit_seal_state *st = &bt->st;
	char hash[AUDIT_HASH_HEX], what[128];
	int rc;

	if (!bt->have_st || st->last_n == 0)
		return 0; /* nothing sealed yet */
	if (st->last_n > bt->h.n) {
		snprintf(what, sizeof(what), "and the log ends at line %" PRIu64, bt->h.n);
		return cut_refuse(a, bt, err, what);
	}
	if (st->last_file == 0)
		return 0; /* a state of version 1, which kept no place */
	rc = st->last_file > bt->h.file ||
			     (st->last_file == bt->h.file && st->last_end > bt->h.bytes)
		     ? -ESTALE
		     : line_hash_at(a, st->last_file, bt->h.file, st->last_end, hash);
	if (rc == -ENOMEM)
		return fail(a, rc, err, "out of memory");
	if (rc < 0 || strcmp(hash, st->last_hash) != 0) {
		snprintf(what, sizeof(what),
			 "and the log does not hold that seal where it was (file %" PRIu64
			 ", ending at byte %" PRIu64 ")",
			 st->last_file, st->last_end);
		return cut_refuse(a, bt, err, what);
	}
	return 0;
}

/* Under the lock: the head, the file judged against it, and what a dead
 * writer left. bt->b may get a torn line and a log.open. */
static int batch_open(struct audit *a, struct batch *bt, struct appl_err *err)
{
	struct stat sb;
	uint64_t torn = 0;
	int fresh, rc = 0, rfd;

	if ((fresh = head_load(a, &bt->h, err)) < 0)
		return fresh;
	bt->gen = bt->h.gen;
	if (a->seal) {
		if ((rc = a->dfd < 0 ? -ENOENT
				     : audit_seal_read(a->dfd, a->seal_name, &bt->st, err)) < 0)
			return fail(a, rc == -ENOENT ? -ENOKEY : rc, err,
				    "%s: the policy seals this log and it has no sealing key "
				    "(run `appliance audit init %s` first)%s%s",
				    a->path, a->path, rc == -ENOENT ? "" : ": ",
				    rc == -ENOENT ? ""
				    : err	  ? err->msg
						  : "");
		bt->have_st = true;
	}
	if (!fresh && new_file_begun(a, &bt->h)) {
		bt->h.file = bt->h.pend_file;
		bt->h.bytes = 0;
	}
	rfd = open(a->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (rfd < 0 && errno == ENOENT && (fresh || bt->h.bytes == 0)) {
		if (bt->h.file == 0)
			bt->h.file = 1;
		if (!a->opened && (rc = seal_place_check(a, bt, err)) < 0)
			return rc;
		bt->base = bt->h;
		bt->create = true;
		return open_line(a, bt);
	}
	if (rfd < 0 && errno == ENOENT)
		return fail(a, -ENOENT, err,
			    "%s: the audit log was removed (its recorded head is line %" PRIu64
			    "); it is never started again in its place",
			    a->path, bt->h.n);
	if (rfd < 0)
		return fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
	if (fstat(rfd, &sb) < 0 || !S_ISREG(sb.st_mode))
		rc = fail(a, -EINVAL, err, "%s: not a regular file", a->path);
	else if ((uint64_t)sb.st_size < bt->h.bytes)
		rc = fail(a, -ESTALE, err,
			  "%s: the audit log was cut: %lld bytes, its recorded head says %" PRIu64
			  " (line %" PRIu64 ")",
			  a->path, (long long)sb.st_size, bt->h.bytes, bt->h.n);
	else if ((uint64_t)sb.st_size > bt->h.bytes)
		rc = tail_adopt(a, bt, rfd, (uint64_t)sb.st_size, fresh, &torn, err);
	close(rfd);
	if (rc < 0)
		return rc;
	if (bt->h.file == 0)
		bt->h.file = 1;
	if (!a->opened && (rc = seal_place_check(a, bt, err)) < 0)
		return rc;
	bt->fd = open(a->path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
	if (bt->fd < 0)
		return fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
	bt->size0 = (uint64_t)sb.st_size;
	bt->base = bt->h; /* whole lines only: a torn one stays past it */
	if (torn) {
		/* End the fragment, and say what it was, chained after the
		 * last whole line. */
		bt->h.bytes += torn;
		if (buf_add(&bt->b, "\n", 1) < 0)
			return -ENOMEM;
		rc = line_put_json(a, &bt->b, &bt->h, "torn", now_ms(),
				   json_pack("{sI}", "bytes", (json_int_t)torn));
	}
	if (rc == 0 && bt->size0 == 0)
		rc = open_line(a, bt); /* a file made, and nothing written yet */
	return rc;
}

/* A seal for what is new, when asked for or by lines; and one every
 * seal_s seconds even with nothing new, so that the newest seal of a log
 * being written is never much older than that: a log whose newest seal
 * is old and follows no stop was cut after it, or its sealing stopped,
 * and verify says so (docs/audit.md). */
static bool seal_due(const struct audit *a, const struct batch *bt)
{
	if (!bt->have_st)
		return false;
	if ((uint64_t)now_ms() - bt->st.last_ms >= (uint64_t)a->seal_s * 1000u)
		return true;
	return bt->h.n > bt->st.last_n &&
	       (a->seal_wanted || bt->h.n - bt->st.last_n >= a->seal_lines);
}

static int seal_put(struct audit *a, struct batch *bt)
{
	char t[AUDIT_TIME_LEN + 1], mac[AUDIT_HASH_HEX];
	int64_t ms = now_ms();
	json_t *body;

	audit_time(ms, t);
	audit_seal_mac(bt->st.key, bt->st.kid, bt->st.epoch, bt->h.n + 1, bt->h.hash, t, mac);
	body = json_pack("{ss sI ss}", "kid", bt->st.kid, "epoch", (json_int_t)bt->st.epoch, "mac",
			 mac);
	if (line_put_json(a, &bt->b, &bt->h, "seal", ms, body) < 0)
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

static void batch_done(struct batch *bt)
{
	if (bt->fd >= 0)
		close(bt->fd);
	sodium_memzero(&bt->st, sizeof(bt->st));
	free(bt->b.p);
}

static void queue_pop(struct audit *a, size_t n)
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
		if ((rc = open_line(a, bt)) < 0)
			return rc;
	}
	if (a->failed) {
		rc = line_put_json(a, &bt->b, &bt->h, "resumed", now_ms(),
				   json_pack("{sI ss sI}", "failed_ms",
					     (json_int_t)(now_ms() - a->failed_since), "error",
					     a->why, "dropped", (json_int_t)a->dropped));
		if (rc < 0)
			return rc;
	}
	for (struct qev *q = a->qhead; q; q = q->next, bt->nev++)
		if ((rc = line_put(a, &bt->b, &bt->h, q->ev, q->ms, q->rest)) < 0)
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
		return fail(a, rc, err, "writing the head of %s: %s", a->path, strerror(-rc));
	return 0;
}

/* Where bt->b goes: the file renamed away first when it rotates, the new
 * one made. */
static int batch_target(struct audit *a, struct batch *bt, struct appl_err *err)
{
	char name[NAME_MAX + 1], old[PATH_MAX];

	if (bt->rotate) {
		if (rotated_name(a, bt->base.file, name, sizeof(name), old, sizeof(old)) < 0)
			return fail(a, -ENAMETOOLONG, err, "%s: too long to rotate", a->path);
		if (fdatasync(bt->fd) < 0 ||
		    renameat2(AT_FDCWD, a->path, AT_FDCWD, old, RENAME_NOREPLACE) < 0)
			return fail(a, -errno, err, "%s: rotating to %s: %s", a->path, old,
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
			return fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
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
				return fail(a, rc, err,
					    "%s: %s (and cutting the failed write back failed)",
					    a->path, strerror(e));
			return fail(a, rc, err, "%s: %s", a->path, strerror(e));
		}
	}
	/* The lines are in the file: from here a failure leaves them past the
	 * head, announced, and the next batch adopts them. */
	queue_pop(a, bt->nev);
	if (bt->st_dirty) {
		struct appl_err e2 = {0};

		if ((rc = audit_seal_write(a->dfd, a->seal_name, &bt->st, &e2)) < 0)
			return fail(a, rc, err, "%s", e2.msg);
		a->seal_wanted = false;
	}
	/* Not synced: should this write be lost, the announcement (on disk
	 * when it counts) covers what the batch wrote, and the next writer
	 * adopts it. */
	bt->h.pend_file = 0;
	if ((rc = head_put(a, &bt->h, bt->gen + 2, false, err)) < 0)
		return rc;
	return 0;
}

static int lock_take(struct audit *a, struct appl_err *err)
{
	while (flock(a->lockfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return fail(a, -errno, err, "locking the audit state of %s: %s", a->path,
				    strerror(errno));
	return 0;
}

static int write_locked(struct audit *a, bool sync, struct appl_err *err)
{
	struct batch bt = {.fd = -1};
	int rc;

	if ((rc = lock_take(a, err)) < 0)
		return rc;
	rc = batch_open(a, &bt, err);
	if (rc == 0)
		rc = batch_fill(a, &bt);
	if (rc == 0)
		rc = batch_commit(a, &bt, sync, err);
	else if (rc == -ENOMEM)
		fail(a, rc, err, "out of memory");
	flock(a->lockfd, LOCK_UN);
	batch_done(&bt);
	return rc;
}

/* ---- the queue and its rounds ------------------------------------------------------ */

static void failed_now(struct audit *a)
{
	if (!a->failed) {
		a->failed = true;
		a->failed_since = now_ms();
	}
	if (a->retry_timer)
		loop_timer_set(a->retry_timer, AUDIT_RETRY_MS);
}

int audit_flush(struct audit *a, bool sync)
{
	int rc;

	if (!a->qhead && !a->seal_wanted && !a->failed)
		return 0;
	rc = write_locked(a, sync, NULL);
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
	if (!(q->rest = rest_of(body))) {
		free(q);
		a->dropped++;
		return;
	}
	snprintf(q->ev, sizeof(q->ev), "%s", ev);
	q->ms = now_ms();
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
		rc = lock_take(a, err);
	/* The judgment audit_open's first pass makes, and nothing written. */
	if (rc == 0)
		rc = batch_open(a, &bt, err);
	if (rc == 0 && bt.create && faccessat(AT_FDCWD, a->dir_name, W_OK | X_OK, AT_EACCESS) < 0)
		rc = appl_err_errno(err, -errno, errno, "%s: the log cannot be made in %s", a->path,
				    a->dir_name);
	if (a->lockfd >= 0)
		flock(a->lockfd, LOCK_UN);
	batch_done(&bt);
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
		rc = write_locked(a, true, err);
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
	queue_pop(a, a->qn);
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
