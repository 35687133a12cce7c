/* verify.c: checking an audit log (see verify.h and
 * docs/audit.md, "Verification").
 *
 * verify reads in two passes. The first follows the chain of files back
 * from the one given, reading only each file's first line (log.open) to
 * learn the name of the file before it; the second reads every file,
 * oldest first, line by line, and stops at the first rule broken. A line
 * is judged one line late: a line that is followed by a `torn` line naming
 * its length is a fragment a dying writer left, whatever it holds, and is
 * no part of the chain.
 */
#define _GNU_SOURCE
#include "audit/verify.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit/read.h"
#include "base/fs.h"
#include "base/limits.h"
#include "log/log.h"

#define WHY_MAX	  256
#define NOTES_MAX 8
#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

_Static_assert(sizeof(ZERO_HASH) == AUDIT_HASH_HEX, "ZERO_HASH is one hash");

/* ---- small checks ---------------------------------------------------------- */

static bool hex_is(const char *s, size_t want)
{
	return s && strlen(s) == want && strspn(s, "0123456789abcdef") == want;
}

/* A name in the log's directory: never a path, so a log cannot make the
 * checker read outside that directory. */
static bool name_plain(const char *s)
{
	return s && s[0] && strlen(s) <= NAME_MAX && !strchr(s, '/') && strcmp(s, ".") != 0 &&
	       strcmp(s, "..") != 0;
}

static const char *str_member(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* A non-negative integer member: 0, or -1 when missing or of another type. */
static int u64_member(const json_t *o, const char *key, uint64_t *out)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* ---- one line, parsed ------------------------------------------------------- */

struct rec {
	uint64_t lineno, end; /* its physical number, the offset after it */
	size_t len;	      /* without the newline */
	bool nl;	      /* ended by a newline */
	json_t *obj;	      /* new; NULL: not a log line, why says why */
	uint64_t n;
	const char *prev, *t, *ev; /* borrowed from obj */
	char hash[AUDIT_HASH_HEX];
	char why[WHY_MAX];
};

static void rec_clear(struct rec *c)
{
	json_decref(c->obj);
	c->obj = NULL;
}

__attribute__((format(printf, 2, 3))) static int rec_fail(struct rec *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	rec_clear(c);
	return -1;
}

/* The five members every line has, each of its type. */
static int rec_common(struct rec *c)
{
	uint64_t pid;

	if (u64_member(c->obj, "n", &c->n) < 0 || c->n == 0)
		return rec_fail(c, "n: missing, or not a positive integer");
	c->prev = str_member(c->obj, "prev");
	if (!hex_is(c->prev, AUDIT_HASH_HEX - 1))
		return rec_fail(c, "prev: missing, or not 64 lower-case hex digits");
	c->t = str_member(c->obj, "t");
	if (!audit_time_valid(c->t))
		return rec_fail(c, "t: missing, or not a time YYYY-MM-DDTHH:MM:SS.mmmZ");
	c->ev = str_member(c->obj, "ev");
	if (!c->ev || !c->ev[0])
		return rec_fail(c, "ev: missing, or not a string");
	if (u64_member(c->obj, "pid", &pid) < 0 || pid == 0)
		return rec_fail(c, "pid: missing, or not a positive integer");
	return 0;
}

/* Parse the reader's current line into c: 0, or -1 with c->why. */
static int rec_parse(struct rec *c, const struct audit_reader *r)
{
	char shown[AUDIT_SHOWN_MAX];
	json_error_t jerr;

	c->lineno = r->lineno;
	c->end = r->off;
	c->len = r->line_len;
	c->nl = r->nl;
	c->obj = NULL;
	audit_line_hash(r->line, r->line_len, c->hash);
	/* Duplicate keys are refused: a reader and the writer must never
	 * disagree about what a line says. No JSON_DECODE_ANY: an object or
	 * an array only, and the array is refused below. */
	c->obj = json_loadb(r->line, r->line_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!c->obj)
		return rec_fail(c, "not a log line: not JSON (column %d: %s)", jerr.column,
				audit_escape(jerr.text, shown));
	if (!json_is_object(c->obj))
		return rec_fail(c, "not a log line: not a JSON object");
	return rec_common(c);
}

/* ---- log.open --------------------------------------------------------------- */

struct open_info {
	uint64_t file;
	bool has_prev;
	const char *name, *hash; /* borrowed, when has_prev */
	uint64_t n;
};

static int open_parse(const json_t *o, struct open_info *oi, char why[WHY_MAX])
{
	const json_t *p = json_object_get(o, "previous");

	memset(oi, 0, sizeof(*oi));
	if (u64_member(o, "file", &oi->file) < 0 || oi->file == 0)
		return snprintf(why, WHY_MAX, "log.open: file: missing, or not a positive integer"),
		       -1;
	if (json_is_null(p))
		return 0;
	if (!json_is_object(p))
		return snprintf(why, WHY_MAX,
				"log.open: previous: missing, or not null or an object"),
		       -1;
	oi->name = str_member(p, "name");
	oi->hash = str_member(p, "hash");
	if (!name_plain(oi->name))
		return snprintf(why, WHY_MAX,
				"log.open: previous.name: missing, or not a plain file name (no "
				"'/', not . or ..)"),
		       -1;
	if (u64_member(p, "n", &oi->n) < 0 || oi->n == 0)
		return snprintf(why, WHY_MAX,
				"log.open: previous.n: missing, or not a positive integer"),
		       -1;
	if (!hex_is(oi->hash, AUDIT_HASH_HEX - 1))
		return snprintf(
			       why, WHY_MAX,
			       "log.open: previous.hash: missing, or not 64 lower-case hex digits"),
		       -1;
	oi->has_prev = true;
	return 0;
}

/* ---- the checker ------------------------------------------------------------ */

struct sealer {
	char kid[AUDIT_KID_HEX];
	uint64_t epoch;			    /* of the next seal of this key */
	unsigned char key[AUDIT_KEY_BYTES]; /* k(epoch) */
	uint64_t last_n;		    /* the line of its last seal; 0: none yet */
};

enum seal_source {
	SEAL_UNSOUGHT, /* no keys, or a head given by --head without --seal */
	SEAL_MISSING,  /* the state has the head and no sealing state: a problem */
	SEAL_BAD,      /* not a sealing state: a problem */
	SEAL_WAIVED,   /* --seal names an empty file */
	SEAL_FOUND,
};

enum head_state {
	HEAD_MISSING,	  /* none recorded: a problem */
	HEAD_BAD,	  /* no valid slot: a problem */
	HEAD_WAIVED,	  /* --head names an empty file */
	HEAD_FOUND,	  /* applies to the newest file */
	HEAD_NOT_CURRENT, /* the log has moved on: the file given was rotated */
};

struct verifier {
	const struct audit_verify_opts *o;
	struct appl_err *err;
	/* the files: FILE's directory as given ("" or ending in '/'), open;
	 * names[0] the newest (FILE's base name), names[nfiles-1] the oldest */
	char dir[PATH_MAX];
	char real[PATH_MAX]; /* the newest file's absolute path, its directory resolved */
	int dfd, newest_fd;
	uint64_t newest_size;  /* seen under the lock */
	uint64_t newest_index; /* from its log.open; 0 when it has none */
	char **names;
	size_t nfiles, cap;
	char link_error[WHY_MAX]; /* why the oldest file's previous was not followed */
	/* the head */
	enum head_state head_state;
	struct audit_head head;
	char head_where[PATH_MAX + 64]; /* for messages */
	/* the file being read */
	const char *name;
	size_t files_done;
	bool newest;
	uint64_t file_index, file_lines;
	/* the chain so far */
	uint64_t n, last_lineno;
	char hash[AUDIT_HASH_HEX];
	/* seals */
	struct sealer *sealers; /* sodium_allocarray'ed: wiped when freed */
	size_t nsealers;
	uint64_t seals, sealed_n;
	char sealed_t[AUDIT_TIME_LEN + 1];
	bool prev_stop;	      /* the line before is a stop */
	bool sealed_stop;     /* the newest seal follows a stop: the log may rest */
	uint64_t seal_s_seen; /* the largest seal_s of the start lines so far */
	uint64_t sealed_s;    /* ... of those the newest seal covers */
	enum seal_source seal_src;
	struct audit_seal_state *sst;	/* sodium_malloc'ed: holds a key */
	char seal_where[PATH_MAX + 64]; /* for messages */
	/* the line read one line ago, judged once the next is seen */
	struct rec recs[2];
	struct rec *cur, *pend;
	bool pend_live;
	/* what is said */
	char problem[APPL_ERR_MSG_MAX];
	char notes[NOTES_MAX][APPL_ERR_MSG_MAX];
	size_t nnotes, notes_more;
	struct audit_reader r;
};

/* "FILE:LINE: " (or "FILE: " for line 0) of the file being read, into
 * out, its name escaped (a previous file's name is the log's). */
static void where(const struct verifier *v, uint64_t line, char *out, size_t len)
{
	char d[AUDIT_SHOWN_MAX], n[AUDIT_SHOWN_MAX];

	if (line)
		snprintf(out, len, "%s%s:%" PRIu64 ": ", audit_escape(v->dir, d),
			 audit_escape(v->name, n), line);
	else
		snprintf(out, len, "%s%s: ", audit_escape(v->dir, d), audit_escape(v->name, n));
}

__attribute__((format(printf, 3, 4))) static int problem(struct verifier *v, uint64_t line,
							 const char *fmt, ...)
{
	char at[2 * AUDIT_SHOWN_MAX + 32];
	size_t n;
	va_list ap;

	where(v, line, at, sizeof(at));
	n = strnlen(at, sizeof(v->problem) - 1);
	memcpy(v->problem, at, n);
	va_start(ap, fmt);
	vsnprintf(v->problem + n, sizeof(v->problem) - n, fmt, ap);
	va_end(ap);
	return 1;
}

__attribute__((format(printf, 3, 4))) static void note(struct verifier *v, uint64_t line,
						       const char *fmt, ...)
{
	char at[2 * AUDIT_SHOWN_MAX + 32], *out;
	size_t n;
	va_list ap;

	if (v->nnotes == NOTES_MAX) {
		v->notes_more++;
		return;
	}
	out = v->notes[v->nnotes++];
	where(v, line, at, sizeof(at));
	n = (size_t)snprintf(out, APPL_ERR_MSG_MAX, "%snote: ", at);
	if (n >= APPL_ERR_MSG_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(out + n, APPL_ERR_MSG_MAX - n, fmt, ap);
	va_end(ap);
}

/* ---- the files of the chain ------------------------------------------------- */

static int names_push(struct verifier *v, const char *name)
{
	if (v->nfiles == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 16;
		char **p = realloc(v->names, cap * sizeof(*p));

		if (!p)
			return appl_err_set(v->err, -ENOMEM, "out of memory");
		v->names = p;
		v->cap = cap;
	}
	if (!(v->names[v->nfiles] = strdup(name)))
		return appl_err_set(v->err, -ENOMEM, "out of memory");
	v->nfiles++;
	return 0;
}

/* Open name in the log's directory: never through a symlink, never a
 * fifo or a device (a read that never ends). 0, 1 when it cannot be (why
 * in v->link_error: a problem with the log), or < 0. */
static int prev_open(struct verifier *v, const char *name, int *fd)
{
	char shown[AUDIT_SHOWN_MAX];
	struct stat st;
	int e;

	*fd = openat(v->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0) {
		e = errno;
		if (e != ENOENT && e != ELOOP && e != ENOTDIR && e != ENXIO && e != EISDIR)
			return appl_err_errno(v->err, -e, e, "%s%s", v->dir, name);
		snprintf(v->link_error, sizeof(v->link_error),
			 "the previous file %s cannot be opened: %s", audit_escape(name, shown),
			 e == ELOOP ? "it is a symlink" : strerror(e));
		return 1;
	}
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		snprintf(v->link_error, sizeof(v->link_error),
			 "the previous file %s is not a regular file", audit_escape(name, shown));
		return 1;
	}
	return 0;
}

/* The first line of the file at fd, when it is a log.open line: 1 with
 * *file, *has_prev and name (the previous file's) filled; 0 when it is
 * not one (the second pass says why); or < 0. */
static int link_read(struct verifier *v, int fd, uint64_t limit, uint64_t *file, bool *has_prev,
		     char name[NAME_MAX + 1])
{
	struct rec *c = &v->recs[0];
	struct open_info oi;
	char why[WHY_MAX];
	int rc;

	if ((rc = audit_reader_init(&v->r, fd, limit)) < 0 || (rc = audit_reader_next(&v->r)) < 0)
		return appl_err_errno(v->err, rc, -rc, "reading %s%s", v->dir,
				      v->names[v->nfiles - 1]);
	if (rc != AUDIT_LINE_OK || rec_parse(c, &v->r) < 0)
		return 0;
	rc = strcmp(c->ev, "log.open") == 0 && open_parse(c->obj, &oi, why) == 0;
	if (rc) {
		*file = oi.file;
		*has_prev = oi.has_prev;
		if (oi.has_prev)
			memcpy(name, oi.name, strlen(oi.name) + 1);
	}
	rec_clear(c);
	return rc;
}

/* The first pass: from the newest file back through `previous` while
 * each step is sound; where it is not, the second pass reports it. File
 * indexes fall by one at each step, so no loop can be followed. */
static int chain_discover(struct verifier *v)
{
	char name[NAME_MAX + 1], shown[AUDIT_SHOWN_MAX];
	uint64_t file = 0, expect = 0;
	bool has_prev = false;
	int fd = v->newest_fd, rc;

	for (;;) {
		rc = link_read(v, fd, fd == v->newest_fd ? v->newest_size : UINT64_MAX, &file,
			       &has_prev, name);
		if (fd != v->newest_fd)
			close(fd);
		if (rc <= 0)
			return rc;
		if (expect && file != expect) {
			snprintf(v->link_error, sizeof(v->link_error),
				 "the previous file %s is file %" PRIu64 ", not file %" PRIu64,
				 audit_escape(v->names[v->nfiles - 1], shown), file, expect);
			free(v->names[--v->nfiles]);
			return 0;
		}
		if (!expect)
			v->newest_index = file;
		if (!has_prev || file == 1)
			return 0;
		if (file > AUDIT_VERIFY_FILES_MAX) {
			snprintf(v->link_error, sizeof(v->link_error),
				 "file %" PRIu64 ": more than %d files in one chain, not followed",
				 file, AUDIT_VERIFY_FILES_MAX);
			return 0;
		}
		if ((rc = prev_open(v, name, &fd)) != 0)
			return rc < 0 ? rc : 0;
		if ((rc = names_push(v, name)) < 0) {
			close(fd);
			return rc;
		}
		expect = file - 1;
	}
}

/* ---- the head --------------------------------------------------------------- */

/* A shared lock on the log's ID.lock, when it can be opened (never made
 * here): writers hold it exclusively around each append, so under it the
 * head and the file's size are one writer's whole batch. -1: no lock. */
static int lock_take(int sdfd, const char *id)
{
	char name[AUDIT_ID_HEX + 8];
	int fd, rc;

	snprintf(name, sizeof(name), "%s.lock", id);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	do
		rc = flock(fd, LOCK_SH);
	while (rc < 0 && errno == EINTR);
	if (rc < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int newest_open(struct verifier *v)
{
	struct stat st;
	int e;

	if (v->newest_fd >= 0)
		return 0;
	v->newest_fd = openat(v->dfd, v->names[0], O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (v->newest_fd < 0) {
		e = errno;
		return appl_err_errno(v->err, -e, e, "%s%s%s", v->dir, v->names[0],
				      e == ELOOP ? ": a symlink (give the log's own path)" : "");
	}
	if (fstat(v->newest_fd, &st) < 0)
		return appl_err_errno(v->err, -errno, errno, "%s%s", v->dir, v->names[0]);
	if (!S_ISREG(st.st_mode))
		return appl_err_set(v->err, -EINVAL, "%s%s: not a regular file", v->dir,
				    v->names[0]);
	v->newest_size = (uint64_t)st.st_size;
	return 0;
}

/* The head in fd into v: found, bad, or (empty) missing or waived. */
static int head_take(struct verifier *v, int fd, enum head_state empty, const char *what)
{
	int rc = audit_head_read_fd(fd, &v->head);

	if (rc == 0)
		v->head_state = HEAD_FOUND;
	else if (rc == -ENOENT)
		v->head_state = empty;
	else if (rc == -EINVAL)
		v->head_state = HEAD_BAD;
	else
		return appl_err_errno(v->err, rc, -rc, "reading the head %s", what);
	return 0;
}

/* A sealing state's bytes from fd into v: found, bad, or when empty,
 * `empty`. */
static int seal_take(struct verifier *v, int fd, enum seal_source empty, const char *what)
{
	char buf[AUDIT_SEAL_FILE_MAX + 1];
	ssize_t got;

	do
		got = read(fd, buf, sizeof(buf));
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return appl_err_errno(v->err, -errno, errno, "reading the sealing state %s", what);
	if (got == 0)
		v->seal_src = empty;
	else
		v->seal_src =
			audit_seal_parse(buf, (size_t)got, v->sst) == 0 ? SEAL_FOUND : SEAL_BAD;
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

/* With keys: the state's sealing state beside the head id, read under
 * the same lock as the head, so that the two agree with each other. */
static int seal_load(struct verifier *v, int sdfd, const char *id)
{
	char name[AUDIT_ID_HEX + 8];
	int fd, rc;

	if (!v->nsealers || v->o->seal_file)
		return 0;
	snprintf(name, sizeof(name), "%s.seal", id);
	snprintf(v->seal_where, sizeof(v->seal_where), "%s/audit/%s", v->o->state_dir, name);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		v->seal_src = SEAL_MISSING;
		return 0;
	}
	if (fd < 0)
		return appl_err_errno(v->err, -errno, errno, "the sealing state %s", v->seal_where);
	rc = seal_take(v, fd, SEAL_BAD, v->seal_where);
	close(fd);
	return rc;
}

/* --seal FILE, with keys. */
static int seal_from_file(struct verifier *v)
{
	int fd, rc;

	if (!v->nsealers || !v->o->seal_file)
		return 0;
	snprintf(v->seal_where, sizeof(v->seal_where), "%s", v->o->seal_file);
	fd = open(v->o->seal_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(v->err, -errno, errno, "--seal %s", v->o->seal_file);
	rc = seal_take(v, fd, SEAL_WAIVED, v->o->seal_file);
	close(fd);
	return rc;
}

/* The state's head of the log at path, read (and, with open_newest, the
 * newest file opened and its size taken, and the sealing state read)
 * under the log's lock: 1 when the state has a head file for path, 0 when
 * it has none, or < 0. */
static int head_load(struct verifier *v, int sdfd, const char *path, bool open_newest)
{
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	int fd, lfd, rc;

	audit_state_id(path, id);
	snprintf(name, sizeof(name), "%s.head", id);
	fd = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
			       ? 0
			       : appl_err_errno(v->err, -errno, errno, "the head %s/audit/%s",
						v->o->state_dir, name);
	snprintf(v->head_where, sizeof(v->head_where), "%s/audit/%s", v->o->state_dir, name);
	lfd = lock_take(sdfd, id);
	rc = open_newest ? newest_open(v) : 0;
	if (rc == 0)
		rc = head_take(v, fd, HEAD_MISSING, v->head_where);
	if (rc == 0 && open_newest)
		rc = seal_load(v, sdfd, id);
	if (lfd >= 0)
		close(lfd);
	close(fd);
	return rc < 0 ? rc : 1;
}

/* The log's path: FILE as given when absolute (the writer keys the state
 * by the policy's path), and FILE with its directory resolved. */
static size_t head_paths(const struct verifier *v, const char *file, const char *paths[2])
{
	size_t n = 0;

	if (file[0] == '/')
		paths[n++] = file;
	if (n == 0 || strcmp(file, v->real) != 0)
		paths[n++] = v->real;
	return n;
}

/* --head FILE: read under the log's lock when the state has one. */
static int head_from_file(struct verifier *v, int sdfd, const char *file)
{
	const char *paths[2];
	char id[AUDIT_ID_HEX];
	int fd, lfd = -1, rc;

	for (size_t i = 0, n = head_paths(v, file, paths); sdfd >= 0 && lfd < 0 && i < n; i++) {
		audit_state_id(paths[i], id);
		lfd = lock_take(sdfd, id);
	}
	snprintf(v->head_where, sizeof(v->head_where), "%s", v->o->head_file);
	fd = open(v->o->head_file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		rc = appl_err_errno(v->err, -errno, errno, "--head %s", v->o->head_file);
	else
		rc = newest_open(v);
	if (rc == 0)
		rc = head_take(v, fd, HEAD_WAIVED, v->o->head_file);
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	return rc;
}

static int state_open(struct verifier *v, int *sdfd)
{
	struct appl_err e = {0};
	int rc;

	*sdfd = -1;
	if (!v->o->state_dir)
		return 0;
	rc = audit_state_open(v->o->state_dir, false, sdfd, &e);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		*v->err = e;
		return rc;
	}
	return 0;
}

/* Before anything is read: the head, and the newest file opened under its
 * lock. */
static int head_find(struct verifier *v, int sdfd, const char *file)
{
	const char *paths[2];
	int rc = 0;

	v->head_state = HEAD_MISSING;
	if (v->o->head_file)
		return head_from_file(v, sdfd, file);
	for (size_t i = 0, n = head_paths(v, file, paths); sdfd >= 0 && rc == 0 && i < n; i++)
		rc = head_load(v, sdfd, paths[i], true);
	if (rc < 0)
		return rc;
	return newest_open(v);
}

/* No head for FILE itself, and FILE is NAME.K, file K of its chain: a
 * rotated file of the log at NAME, whose head applies to it only while
 * it is that log's current file. */
static int head_of_rotated(struct verifier *v, int sdfd)
{
	char path[PATH_MAX], num[24];
	const char *dot = strrchr(v->real, '.');
	int rc;

	if (v->head_state != HEAD_MISSING || sdfd < 0 || v->o->head_file || !dot ||
	    v->newest_index == 0)
		return 0;
	snprintf(num, sizeof(num), "%" PRIu64, v->newest_index);
	if (strcmp(dot + 1, num) != 0 || (size_t)(dot - v->real) >= sizeof(path) || dot[-1] == '/')
		return 0;
	memcpy(path, v->real, (size_t)(dot - v->real));
	path[dot - v->real] = '\0';
	if ((rc = head_load(v, sdfd, path, false)) <= 0)
		return rc;
	if (v->head_state == HEAD_FOUND && v->head.file > v->newest_index) {
		v->head_state = HEAD_NOT_CURRENT;
		snprintf(v->head_where, sizeof(v->head_where), "%s", path);
	}
	return 0;
}

/* ---- the second pass: one line at a time ------------------------------------ */

static int open_check(struct verifier *v, const struct rec *c)
{
	char why[WHY_MAX], shown[AUDIT_SHOWN_MAX];
	struct open_info oi;

	if (v->file_lines > 0)
		return problem(v, c->lineno, "a log.open line in the middle of a file");
	if (open_parse(c->obj, &oi, why) < 0)
		return problem(v, c->lineno, "%s", why);
	if (v->files_done == 0) {
		if (v->link_error[0])
			return problem(v, c->lineno, "%s", v->link_error);
		if (oi.file == 1 && oi.has_prev)
			return problem(v, c->lineno, "file 1 names a previous file");
		if (oi.file != 1)
			return problem(v, c->lineno,
				       "file %" PRIu64
				       " names no previous file: files 1 to %" PRIu64
				       " are missing",
				       oi.file, oi.file - 1);
	} else {
		if (oi.file != v->file_index + 1)
			return problem(v, c->lineno,
				       "log.open says file %" PRIu64 ", after file %" PRIu64,
				       oi.file, v->file_index);
		if (!oi.has_prev || strcmp(oi.name, v->names[v->nfiles - v->files_done]) != 0)
			return problem(v, c->lineno, "previous does not name the file before it");
		if (oi.n != v->n)
			return problem(v, c->lineno,
				       "previous says %s ends at line %" PRIu64
				       ", but it ends at line %" PRIu64,
				       audit_escape(oi.name, shown), oi.n, v->n);
		if (strcmp(oi.hash, v->hash) != 0)
			return problem(v, c->lineno,
				       "previous.hash is not the hash of the last line of %s",
				       audit_escape(oi.name, shown));
		if (strcmp(oi.hash, c->prev) != 0)
			return problem(v, c->lineno, "previous.hash is not this line's prev");
	}
	v->file_index = oi.file;
	if (v->newest && v->head_state == HEAD_FOUND && v->head.file != oi.file)
		return problem(v, c->lineno,
			       "the head records file %" PRIu64 ", this is file %" PRIu64 "%s",
			       v->head.file, oi.file,
			       v->head.file > oi.file ? ": the files after it are missing" : "");
	return 0;
}

static int chain_link(struct verifier *v, const struct rec *c)
{
	if (c->n != v->n + 1) {
		if (v->n == 0)
			return problem(v, c->lineno,
				       "n is %" PRIu64 ", but the log's first line is line 1",
				       c->n);
		return problem(v, c->lineno,
			       "n is %" PRIu64 " after %" PRIu64
			       ": lines were removed, reordered or repeated",
			       c->n, v->n);
	}
	if (strcmp(c->prev, v->hash) != 0) {
		if (v->n == 0)
			return problem(v, c->lineno,
				       "prev is not 64 zeros, as the log's first line's is");
		return problem(v, c->lineno,
			       "prev is not the hash of line %" PRIu64
			       " before it: that line was changed, or this one does not "
			       "belong here",
			       v->n);
	}
	return 0;
}

static struct sealer *sealer_find(struct verifier *v, const char *kid)
{
	for (size_t i = 0; i < v->nsealers; i++)
		if (strcmp(v->sealers[i].kid, kid) == 0)
			return &v->sealers[i];
	return NULL;
}

static int seal_check(struct verifier *v, const struct rec *c)
{
	const char *kid = str_member(c->obj, "kid"), *mac = str_member(c->obj, "mac");
	char want[AUDIT_HASH_HEX];
	struct sealer *s;
	uint64_t epoch;

	if (!hex_is(kid, AUDIT_KID_HEX - 1))
		return problem(v, c->lineno, "seal: kid: missing, or not 16 lower-case hex digits");
	if (u64_member(c->obj, "epoch", &epoch) < 0)
		return problem(v, c->lineno, "seal: epoch: missing, or not an integer");
	if (!hex_is(mac, AUDIT_HASH_HEX - 1))
		return problem(v, c->lineno, "seal: mac: missing, or not 64 lower-case hex digits");
	v->seals++;
	if (v->nsealers == 0)
		return 0;
	if (!(s = sealer_find(v, kid)))
		return problem(v, c->lineno, "seal: kid %s is none of the keys given", kid);
	if (epoch != s->epoch)
		return problem(v, c->lineno,
			       "seal: epoch %" PRIu64 " where epoch %" PRIu64
			       " was due: seals were removed or repeated",
			       epoch, s->epoch);
	audit_seal_mac(s->key, kid, epoch, c->n, c->prev, c->t, want);
	if (sodium_memcmp(want, mac, AUDIT_HASH_HEX - 1) != 0)
		return problem(v, c->lineno,
			       "seal: the mac does not verify (kid %s, epoch %" PRIu64
			       "): the lines before it were changed, or the seal is forged",
			       kid, epoch);
	/* One ratchet per seal: each seal's key comes from the last one's,
	 * never from k0 again. */
	audit_ratchet(s->key);
	s->epoch++;
	s->last_n = c->n;
	v->sealed_n = c->n;
	memcpy(v->sealed_t, c->t, sizeof(v->sealed_t));
	v->sealed_stop = v->prev_stop;
	v->sealed_s = v->seal_s_seen;
	return 0;
}

static int event_check(struct verifier *v, const struct rec *c, bool acked)
{
	if (strcmp(c->ev, "torn") == 0 && !acked)
		return problem(v, c->lineno, "a torn line with no fragment before it");
	if (strcmp(c->ev, "seal") == 0)
		return seal_check(v, c);
	return 0;
}

/* The head against the newest file's lines, as they go by. */
static int head_line(struct verifier *v, const struct rec *c)
{
	if (c->n == v->head.n) {
		if (strcmp(c->hash, v->head.hash) != 0)
			return problem(v, c->lineno,
				       "the head records line %" PRIu64
				       " with another hash: the log was rewritten",
				       c->n);
		if (c->end != v->head.bytes)
			return problem(v, c->lineno,
				       "the head records %" PRIu64 " bytes up to line %" PRIu64
				       ", the file has %" PRIu64,
				       v->head.bytes, c->n, c->end);
	} else if (c->n > v->head.n) {
		return problem(v, c->lineno,
			       "lines past the recorded head: it ends at line %" PRIu64
			       ", this is line %" PRIu64,
			       v->head.n, c->n);
	}
	return 0;
}

/* What a start line says of how often its appliance seals, and whether
 * this line is a stop: the newest seal's age is judged by them. */
static void start_take(struct verifier *v, const struct rec *c)
{
	uint64_t seal_s;

	if (strcmp(c->ev, "start") == 0 && u64_member(c->obj, "seal_s", &seal_s) == 0 &&
	    seal_s > v->seal_s_seen)
		v->seal_s_seen = seal_s;
	v->prev_stop = strcmp(c->ev, "stop") == 0;
}

/* A whole line, in the chain. */
static int rec_apply(struct verifier *v, const struct rec *c, bool acked)
{
	char shown[AUDIT_SHOWN_MAX];
	int rc;

	if (!c->obj)
		return problem(v, c->lineno, "%s", c->why);
	if (v->file_lines == 0 && strcmp(c->ev, "log.open") != 0)
		return problem(v, c->lineno, "the file's first line is a %s line, not log.open",
			       audit_escape(c->ev, shown));
	if (strcmp(c->ev, "log.open") == 0 && (rc = open_check(v, c)) != 0)
		return rc;
	if ((rc = chain_link(v, c)) != 0 || (rc = event_check(v, c, acked)) != 0)
		return rc;
	if (v->newest && v->head_state == HEAD_FOUND && (rc = head_line(v, c)) != 0)
		return rc;
	start_take(v, c);
	v->n = c->n;
	memcpy(v->hash, c->hash, sizeof(v->hash));
	v->last_lineno = c->lineno;
	v->file_lines++;
	return 0;
}

/* Whether c is a torn line owning up to p as its fragment: p's length
 * with its newline, and chained to the line before p. */
static bool torn_acks(const struct verifier *v, const struct rec *c, const struct rec *p)
{
	uint64_t bytes;

	return c->obj && strcmp(c->ev, "torn") == 0 && u64_member(c->obj, "bytes", &bytes) == 0 &&
	       p->nl && bytes == (uint64_t)p->len + 1 && c->n == v->n + 1 &&
	       strcmp(c->prev, v->hash) == 0;
}

static void pend_drop(struct verifier *v)
{
	rec_clear(v->pend);
	v->pend_live = false;
}

static int pend_apply(struct verifier *v)
{
	int rc = v->pend_live ? rec_apply(v, v->pend, false) : 0;

	pend_drop(v);
	return rc;
}

/* The reader's line: judge the one before it, now that this one is
 * known, and hold this one. */
static int line_take(struct verifier *v)
{
	struct rec *c = v->cur, *p = v->pend, *t;
	int rc;

	rec_parse(c, &v->r);
	if (v->pend_live && torn_acks(v, c, p)) {
		note(v, p->lineno,
		     "a fragment of %zu bytes that an appliance left when it stopped "
		     "mid-write, acknowledged by the torn line after it",
		     p->len + 1);
		rec_clear(p);
		v->pend_live = false;
		rc = rec_apply(v, c, true);
		rec_clear(c);
		return rc;
	}
	if (v->pend_live && !p->obj && c->obj && strcmp(c->ev, "torn") == 0) {
		rc = problem(v, p->lineno,
			     "%s; the torn line after it does not acknowledge it (it must say "
			     "bytes %zu and chain to line %" PRIu64 ")",
			     p->why, p->len + 1, v->n);
		rec_clear(c);
		return rc;
	}
	if ((rc = pend_apply(v)) != 0) {
		rec_clear(c);
		return rc;
	}
	t = v->pend;
	v->pend = c;
	v->cur = t;
	v->pend_live = true;
	return 0;
}

/* The end of a file: its last line judged. */
static int file_end(struct verifier *v)
{
	const struct rec *p = v->pend;
	int rc;

	if (v->pend_live && !p->nl) {
		rc = problem(v, p->lineno,
			     "torn: an appliance stopped mid-write (%zu bytes with no newline at "
			     "the end)",
			     p->len);
		pend_drop(v);
		return rc;
	}
	return pend_apply(v);
}

/* One file of the chain, i its place in names, every line of it. */
static int file_check(struct verifier *v, size_t i)
{
	int fd = v->newest_fd, got, rc;

	v->name = v->names[i];
	v->newest = i == 0;
	v->file_lines = 0;
	/* Opened again by name: a file swapped since the first pass is
	 * judged by what it holds now, like any other. */
	if (!v->newest && (rc = prev_open(v, v->name, &fd)) != 0)
		return rc < 0 ? rc : problem(v, 0, "%s", v->link_error);
	rc = audit_reader_init(&v->r, fd, v->newest ? v->newest_size : UINT64_MAX);
	while (rc == 0) {
		got = audit_reader_next(&v->r);
		if (got == AUDIT_LINE_OK) {
			rc = line_take(v);
			continue;
		}
		if (got < 0)
			rc = got;
		else if (got == AUDIT_LINE_EOF)
			rc = file_end(v);
		else if ((rc = pend_apply(v)) == 0)
			rc = problem(v, v->r.lineno, "longer than %d bytes", AUDIT_LINE_MAX);
		break;
	}
	if (rc < 0)
		appl_err_errno(v->err, rc, -rc, "reading %s%s", v->dir, v->name);
	if (rc == 0 && v->file_lines == 0)
		rc = problem(v, 0, "empty: a log file starts with its log.open line");
	pend_drop(v);
	rec_clear(v->cur);
	if (!v->newest)
		close(fd);
	v->files_done++;
	return rc;
}

/* "the seal of epoch 3" or "the seals of epochs 3 to 7", into out. */
static void epochs_say(uint64_t from, uint64_t to, char *out, size_t len)
{
	if (from == to)
		snprintf(out, len, "the seal of epoch %" PRIu64, from);
	else
		snprintf(out, len, "the seals of epochs %" PRIu64 " to %" PRIu64, from, to);
}

/* The log against the sealing state (docs/audit.md, rule 6). Its epoch
 * cannot be set back by whoever holds the host: the key beside it is
 * that epoch's, checked here against k0, and the keys before it are
 * gone. So a log whose last seal is behind it was cut after that seal. */
static int seal_state_check(struct verifier *v)
{
	const struct audit_seal_state *st = v->sst;
	char gap[96], shown[AUDIT_SHOWN_MAX];
	struct sealer *s;

	if (v->seal_src == SEAL_MISSING)
		return problem(v, 0,
			       "no sealing state %s beside the head: it was removed, and without "
			       "it a log cut after an old seal is not seen (--seal FILE names a "
			       "copy; an empty one, /dev/null, checks without)",
			       audit_escape(v->seal_where, shown));
	if (v->seal_src == SEAL_BAD)
		return problem(v, 0,
			       "the sealing state %s is not one: it was edited, or is another "
			       "file",
			       audit_escape(v->seal_where, shown));
	if (v->seal_src != SEAL_FOUND)
		return 0;
	if (!(s = sealer_find(v, st->kid)))
		return problem(v, 0, "the sealing state %s is of key %s, none of the keys given",
			       audit_escape(v->seal_where, shown), st->kid);
	if (st->epoch > s->epoch) {
		epochs_say(s->epoch, st->epoch - 1, gap, sizeof(gap));
		if (s->epoch == 0)
			return problem(v, 0,
				       "the log was cut: it has no seal of key %s, and its sealing "
				       "state %s is at epoch %" PRIu64
				       ": %s, and the lines sealed, "
				       "are missing",
				       st->kid, audit_escape(v->seal_where, shown), st->epoch, gap);
		return problem(v, 0,
			       "the log was cut after line %" PRIu64 ", its last seal of key %s "
			       "(epoch %" PRIu64 "), and its sealing state %s is at epoch %" PRIu64
			       ": %s, and the lines sealed, are missing",
			       s->last_n, st->kid, s->epoch - 1, audit_escape(v->seal_where, shown),
			       st->epoch, gap);
	}
	if (st->epoch < s->epoch)
		return problem(
			v, 0,
			"the sealing state %s is at epoch %" PRIu64 ", behind the log's last "
			"seal (epoch %" PRIu64 ", line %" PRIu64 "): it was put back from an "
			"older copy",
			audit_escape(v->seal_where, shown), st->epoch, s->epoch - 1, s->last_n);
	if (sodium_memcmp(st->key, s->key, AUDIT_KEY_BYTES) != 0)
		return problem(v, 0,
			       "the sealing state %s holds a key that is not key %s's of epoch "
			       "%" PRIu64 ": it was replaced",
			       audit_escape(v->seal_where, shown), st->kid, st->epoch);
	if (st->last_n != s->last_n)
		return problem(v, 0,
			       "the sealing state %s records the last seal at line %" PRIu64
			       ", the log's is line %" PRIu64,
			       audit_escape(v->seal_where, shown), st->last_n, s->last_n);
	return 0;
}

/* The newest seal's age (docs/audit.md, rule 7): an appliance writing
 * the log seals at least every seal_s seconds, idle or not, and seals
 * its stop. A newest seal older than that which follows no stop means
 * the lines after it were cut (seals of later epochs cannot be made by
 * whoever took the host later), or sealing stopped. */
static int seal_age_check(struct verifier *v)
{
	uint64_t late_ms = (2 * v->sealed_s + APPL_AUDIT_SEAL_LATE_S) * 1000u;
	int64_t now = v->o->now_ms, t;
	struct timespec ts;

	if (!v->nsealers || !v->sealed_n || !v->sealed_s || v->sealed_stop ||
	    audit_time_ms(v->sealed_t, &t) < 0)
		return 0;
	if (!now) {
		clock_gettime(CLOCK_REALTIME, &ts);
		now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	}
	if (now - t <= (int64_t)late_ms)
		return 0;
	return problem(v, 0,
		       "sealing stopped: the newest seal, line %" PRIu64 " (%s), is %" PRId64
		       " s old and follows no stop line, and appliances writing this log seal "
		       "at least every %" PRIu64 " s (their start lines say): the log was cut "
		       "after it, or its appliance stopped sealing (killed, or its host went "
		       "down: its next start seals again)",
		       v->sealed_n, v->sealed_t, (now - t) / 1000, v->sealed_s);
}

/* Rule 4 at the end, and a head that could not be had. */
static int end_check(struct verifier *v)
{
	char shown[AUDIT_SHOWN_MAX];
	int rc;

	v->name = v->names[0];
	if ((rc = seal_state_check(v)) != 0 || (rc = seal_age_check(v)) != 0)
		return rc;
	/* A key given and not one seal of it: the seals may have been cut
	 * out along with what they sealed. */
	if (v->nsealers && !v->sealed_n)
		return problem(v, 0,
			       "no seal of the key%s given: the log was never sealed with %s, "
			       "or its seals were removed",
			       v->nsealers == 1 ? "" : "s", v->nsealers == 1 ? "it" : "them");
	switch (v->head_state) {
	case HEAD_FOUND:
		if (v->n < v->head.n)
			return problem(v, v->last_lineno,
				       "the tail was cut: the log ends at line %" PRIu64
				       ", the head records line %" PRIu64,
				       v->n, v->head.n);
		return 0;
	case HEAD_MISSING:
		if (!v->o->state_dir)
			return problem(v, 0, "no head: no --head, and no state directory");
		return problem(v, 0,
			       "no head recorded for %s in %s (--head FILE names one; an "
			       "empty one, /dev/null, checks without)",
			       audit_escape(v->real, shown), v->o->state_dir);
	case HEAD_BAD:
		return problem(v, 0,
			       "the head %s has no valid slot: it was edited, or is not a head "
			       "file",
			       v->head_where);
	default:
		return 0;
	}
}

/* The second pass, oldest file first. */
static int chain_check(struct verifier *v)
{
	int rc;

	for (size_t i = v->nfiles; i-- > 0;)
		if ((rc = file_check(v, i)) != 0)
			return rc;
	return end_check(v);
}

static void report(const struct verifier *v, FILE *out)
{
	char d[AUDIT_SHOWN_MAX], nm[AUDIT_SHOWN_MAX], head[PATH_MAX + 128], seals[192];

	if (v->head_state == HEAD_FOUND)
		snprintf(head, sizeof(head), "head matches (line %" PRIu64 ")", v->head.n);
	else if (v->head_state == HEAD_NOT_CURRENT)
		snprintf(head, sizeof(head),
			 "head not checked (this is file %" PRIu64 " of the log at %s, which is at "
			 "file %" PRIu64 ")",
			 v->newest_index, audit_escape(v->head_where, d), v->head.file);
	else
		snprintf(head, sizeof(head), "head not checked (the --head file is empty)");
	if (v->nsealers && v->sealed_n && v->seal_src == SEAL_FOUND)
		snprintf(seals, sizeof(seals),
			 "sealed through line %" PRIu64
			 " (%s), sealing state matches (epoch %" PRIu64 ")",
			 v->sealed_n, v->sealed_t, v->sst->epoch);
	else if (v->nsealers && v->sealed_n)
		snprintf(seals, sizeof(seals),
			 "sealed through line %" PRIu64 " (%s), sealing state not checked",
			 v->sealed_n, v->sealed_t);
	else if (v->seals && !v->nsealers)
		snprintf(seals, sizeof(seals), "%" PRIu64 " seal%s not checked (no --key)",
			 v->seals, v->seals == 1 ? "" : "s");
	else
		snprintf(seals, sizeof(seals), "no seals");
	fprintf(out, "%s%s: %" PRIu64 " lines in %zu file%s, chain intact, %s, %s\n",
		audit_escape(v->dir, d), audit_escape(v->names[0], nm), v->n, v->nfiles,
		v->nfiles == 1 ? "" : "s", head, seals);
	for (size_t i = 0; i < v->nnotes; i++)
		fprintf(out, "%s\n", v->notes[i]);
	if (v->notes_more)
		fprintf(out, "%s%s: note: %zu more notes\n", audit_escape(v->dir, d),
			audit_escape(v->names[0], nm), v->notes_more);
}

/* ---- setting up ------------------------------------------------------------- */

static int sealers_make(struct verifier *v)
{
	const struct audit_verify_opts *o = v->o;

	if (o->nkeys == 0)
		return 0;
	if (o->nkeys > AUDIT_VERIFY_KEYS_MAX)
		return appl_err_set(v->err, -E2BIG, "more than %d keys", AUDIT_VERIFY_KEYS_MAX);
	v->sealers = sodium_allocarray(o->nkeys, sizeof(*v->sealers));
	if (!v->sealers)
		return appl_err_set(v->err, -ENOMEM, "out of locked memory for the keys");
	for (size_t i = 0; i < o->nkeys; i++) {
		audit_kid(o->keys[i], v->sealers[i].kid);
		v->sealers[i].epoch = 0;
		v->sealers[i].last_n = 0;
		memcpy(v->sealers[i].key, o->keys[i], AUDIT_KEY_BYTES);
	}
	v->nsealers = o->nkeys;
	if (!(v->sst = sodium_malloc(sizeof(*v->sst))))
		return appl_err_set(v->err, -ENOMEM, "out of locked memory for the sealing state");
	return 0;
}

/* FILE's directory (open, and resolved), its name, the keys. */
static int verifier_setup(struct verifier *v, const char *file)
{
	const char *slash = strrchr(file, '/'), *base = slash ? slash + 1 : file;
	size_t dlen = slash ? (size_t)(slash - file) + 1 : 0;
	char rdir[PATH_MAX];

	if (!name_plain(base))
		return appl_err_set(v->err, -EINVAL, "%s: not the path of a file", file);
	if (dlen >= sizeof(v->dir))
		return appl_err_set(v->err, -ENAMETOOLONG, "%s: path too long", file);
	memcpy(v->dir, file, dlen);
	v->dir[dlen] = '\0';
	v->dfd = open(dlen ? v->dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->dfd < 0 || !realpath(dlen ? v->dir : ".", rdir))
		return appl_err_errno(v->err, -errno, errno, "%s: its directory", file);
	if (appl_path_join(v->real, sizeof(v->real), rdir, strcmp(rdir, "/") ? "/" : "", base) < 0)
		return appl_err_set(v->err, -ENAMETOOLONG, "%s: path too long", file);
	if (names_push(v, base) < 0)
		return -ENOMEM;
	return sealers_make(v);
}

static void verifier_free(struct verifier *v)
{
	if (v->dfd >= 0)
		close(v->dfd);
	if (v->newest_fd >= 0)
		close(v->newest_fd);
	for (size_t i = 0; i < v->nfiles; i++)
		free(v->names[i]);
	free(v->names);
	if (v->sealers)
		sodium_free(v->sealers); /* wipes the keys */
	if (v->sst)
		sodium_free(v->sst);
	rec_clear(&v->recs[0]);
	rec_clear(&v->recs[1]);
	free(v);
}

int audit_verify(const char *file, const struct audit_verify_opts *o, FILE *out,
		 struct appl_err *err)
{
	struct verifier *v = calloc(1, sizeof(*v));
	int rc, sdfd = -1;

	if (!v)
		return appl_err_set(err, -ENOMEM, "out of memory");
	v->o = o;
	v->err = err;
	v->dfd = v->newest_fd = -1;
	v->cur = &v->recs[0];
	v->pend = &v->recs[1];
	memcpy(v->hash, ZERO_HASH, sizeof(v->hash));
	rc = verifier_setup(v, file);
	if (rc == 0)
		rc = state_open(v, &sdfd);
	if (rc == 0)
		rc = head_find(v, sdfd, file);
	if (rc == 0)
		rc = seal_from_file(v);
	if (rc == 0)
		rc = chain_discover(v);
	if (rc == 0)
		rc = head_of_rotated(v, sdfd);
	if (rc == 0)
		rc = chain_check(v);
	if (rc == 0)
		report(v, out);
	else if (rc == 1)
		fprintf(out, "%s\n", v->problem);
	if (sdfd >= 0)
		close(sdfd);
	verifier_free(v);
	return rc;
}
