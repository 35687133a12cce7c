/* adopt.c: the first thing every locked write does (audit.h): the head
 * read, the log's file judged against it (cut, removed, continued by
 * someone else: refused), the lines a writer that died left past the head
 * adopted when the head announced them, a torn last line ended and
 * recorded, and at start the last seal its sealing state records found in
 * its place. */
#define _GNU_SOURCE
#include "audit/writer_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

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
		return audit_fail(a, rc, err,
				  "%s: the recorded head of this log is unreadable (%s)", a->path,
				  rc == -EINVAL ? "both slots fail their check" : strerror(-rc));
	return 0;
}

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
		rc = audit_fail(a, -EINVAL, err,
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
		return audit_fail(
			a, -EINVAL, err,
			"%s: %" PRIu64 " bytes past the recorded head (line %" PRIu64
			") that no appliance announced: check it with `appliance audit verify`",
			a->path, want, h->n);
	if (want > AUDIT_TAIL_MAX)
		return audit_fail(a, -EFBIG, err, "%s: %" PRIu64 " bytes past the recorded head",
				  a->path, want);
	if (!(data = malloc(want + 1)))
		return audit_fail(a, -ENOMEM, err, "out of memory");
	got = pread(rfd, data, want, (off_t)off);
	if (got != (ssize_t)want) {
		free(data);
		return audit_fail(a, -EIO, err, "%s: reading past the recorded head failed",
				  a->path);
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
		rc = audit_fail(
			a, -EINVAL, err,
			"%s: the lines past the recorded head are not those announced: check "
			"it with `appliance audit verify`",
			a->path);
	return rc;
}

/* PATH.K (K: file) into out. */
int audit_rotated_name(const struct audit *a, uint64_t file, char *name, size_t nlen, char *path,
		       size_t plen)
{
	if (snprintf(name, nlen, "%s.%" PRIu64, a->base, file) >= (int)nlen ||
	    appl_path_join(path, plen, a->dir_name, "/", name) < 0)
		return -ENAMETOOLONG;
	return 0;
}

/* The first line of file h->file, chained after the file before it. */
int audit_open_line_put(struct audit *a, struct batch *bt)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	json_t *body;

	if (bt->h.file > 1 &&
	    audit_rotated_name(a, bt->h.file - 1, name, sizeof(name), path, sizeof(path)) == 0)
		body = json_pack("{sI s{ss sI ss}}", "file", (json_int_t)bt->h.file, "previous",
				 "name", name, "n", (json_int_t)bt->h.n, "hash", bt->h.hash);
	else
		body = json_pack("{sI sn}", "file", (json_int_t)bt->h.file, "previous");
	return audit_line_put_json(a, &bt->b, &bt->h, "log.open", audit_now_ms(), body);
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
	       audit_rotated_name(a, h->file, name, sizeof(name), path, sizeof(path)) == 0 &&
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

	if (file != cur_file &&
	    audit_rotated_name(a, file, name, sizeof(name), path, sizeof(path)) < 0)
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
	return audit_fail(
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
		return audit_fail(a, rc, err, "out of memory");
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
int audit_batch_open(struct audit *a, struct batch *bt, struct appl_err *err)
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
			return audit_fail(a, rc == -ENOENT ? -ENOKEY : rc, err,
					  "%s: the policy seals this log and it has no sealing key "
					  "(run `appliance audit init %s` first)%s%s",
					  a->path, a->path, rc == -ENOENT ? "" : ": ",
					  rc == -ENOENT ? ""
					  : err		? err->msg
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
		return audit_open_line_put(a, bt);
	}
	if (rfd < 0 && errno == ENOENT)
		return audit_fail(
			a, -ENOENT, err,
			"%s: the audit log was removed (its recorded head is line %" PRIu64
			"); it is never started again in its place",
			a->path, bt->h.n);
	if (rfd < 0)
		return audit_fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
	if (fstat(rfd, &sb) < 0 || !S_ISREG(sb.st_mode))
		rc = audit_fail(a, -EINVAL, err, "%s: not a regular file", a->path);
	else if ((uint64_t)sb.st_size < bt->h.bytes)
		rc = audit_fail(
			a, -ESTALE, err,
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
		return audit_fail(a, -errno, err, "%s: %s", a->path, strerror(errno));
	bt->size0 = (uint64_t)sb.st_size;
	bt->base = bt->h; /* whole lines only: a torn one stays past it */
	if (torn) {
		/* End the fragment, and say what it was, chained after the
		 * last whole line. */
		bt->h.bytes += torn;
		if (audit_buf_add(&bt->b, "\n", 1) < 0)
			return -ENOMEM;
		rc = audit_line_put_json(a, &bt->b, &bt->h, "torn", audit_now_ms(),
					 json_pack("{sI}", "bytes", (json_int_t)torn));
	}
	if (rc == 0 && bt->size0 == 0)
		rc = audit_open_line_put(a, bt); /* a file made, and nothing written yet */
	return rc;
}
