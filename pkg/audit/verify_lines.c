/* verify_lines.c: the checker's second pass over one file, line by line:
 * the chain (n and prev), log.open against the file before, seals
 * against the keys given, the head against the newest file. A line is
 * judged one line late: a line that is followed by a `torn` line naming
 * its length is a fragment a dying writer left, and no part of the chain. */
#include "audit/verify_int.h"

#include <inttypes.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

int audit_verify_problem(struct verifier *v, uint64_t line, const char *fmt, ...)
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

/* ---- the second pass: one line at a time ------------------------------------ */

static int open_check(struct verifier *v, const struct rec *c)
{
	char why[WHY_MAX], shown[AUDIT_SHOWN_MAX];
	struct open_info oi;

	if (v->file_lines > 0)
		return audit_verify_problem(v, c->lineno,
					    "a log.open line in the middle of a file");
	if (audit_open_info_parse(c->obj, &oi, why) < 0)
		return audit_verify_problem(v, c->lineno, "%s", why);
	if (v->files_done == 0) {
		if (v->link_error[0])
			return audit_verify_problem(v, c->lineno, "%s", v->link_error);
		if (oi.file == 1 && oi.has_prev)
			return audit_verify_problem(v, c->lineno, "file 1 names a previous file");
		if (oi.file != 1)
			return audit_verify_problem(v, c->lineno,
						    "file %" PRIu64
						    " names no previous file: files 1 to %" PRIu64
						    " are missing",
						    oi.file, oi.file - 1);
	} else {
		if (oi.file != v->file_index + 1)
			return audit_verify_problem(
				v, c->lineno, "log.open says file %" PRIu64 ", after file %" PRIu64,
				oi.file, v->file_index);
		if (!oi.has_prev || strcmp(oi.name, v->names[v->nfiles - v->files_done]) != 0)
			return audit_verify_problem(v, c->lineno,
						    "previous does not name the file before it");
		if (oi.n != v->n)
			return audit_verify_problem(v, c->lineno,
						    "previous says %s ends at line %" PRIu64
						    ", but it ends at line %" PRIu64,
						    audit_escape(oi.name, shown), oi.n, v->n);
		if (strcmp(oi.hash, v->hash) != 0)
			return audit_verify_problem(
				v, c->lineno,
				"previous.hash is not the hash of the last line of %s",
				audit_escape(oi.name, shown));
		if (strcmp(oi.hash, c->prev) != 0)
			return audit_verify_problem(v, c->lineno,
						    "previous.hash is not this line's prev");
	}
	v->file_index = oi.file;
	if (v->newest && v->head_state == HEAD_FOUND && v->head.file != oi.file)
		return audit_verify_problem(
			v, c->lineno,
			"the head records file %" PRIu64 ", this is file %" PRIu64 "%s",
			v->head.file, oi.file,
			v->head.file > oi.file ? ": the files after it are missing" : "");
	return 0;
}

static int chain_link(struct verifier *v, const struct rec *c)
{
	if (c->n != v->n + 1) {
		if (v->n == 0)
			return audit_verify_problem(
				v, c->lineno,
				"n is %" PRIu64 ", but the log's first line is line 1", c->n);
		return audit_verify_problem(v, c->lineno,
					    "n is %" PRIu64 " after %" PRIu64
					    ": lines were removed, reordered or repeated",
					    c->n, v->n);
	}
	if (strcmp(c->prev, v->hash) != 0) {
		if (v->n == 0)
			return audit_verify_problem(
				v, c->lineno, "prev is not 64 zeros, as the log's first line's is");
		return audit_verify_problem(
			v, c->lineno,
			"prev is not the hash of line %" PRIu64
			" before it: that line was changed, or this one does not "
			"belong here",
			v->n);
	}
	return 0;
}

struct sealer *audit_sealer_find(struct verifier *v, const char *kid)
{
	for (size_t i = 0; i < v->nsealers; i++)
		if (strcmp(v->sealers[i].kid, kid) == 0)
			return &v->sealers[i];
	return NULL;
}

static int seal_check(struct verifier *v, const struct rec *c)
{
	const char *kid = audit_member_str(c->obj, "kid"), *mac = audit_member_str(c->obj, "mac");
	char want[AUDIT_HASH_HEX];
	struct sealer *s;
	uint64_t epoch;

	if (!audit_hex_valid(kid, AUDIT_KID_HEX - 1))
		return audit_verify_problem(v, c->lineno,
					    "seal: kid: missing, or not 16 lower-case hex digits");
	if (audit_member_u64(c->obj, "epoch", &epoch) < 0)
		return audit_verify_problem(v, c->lineno,
					    "seal: epoch: missing, or not an integer");
	if (!audit_hex_valid(mac, AUDIT_HASH_HEX - 1))
		return audit_verify_problem(v, c->lineno,
					    "seal: mac: missing, or not 64 lower-case hex digits");
	v->seals++;
	if (v->nsealers == 0)
		return 0;
	if (!(s = audit_sealer_find(v, kid)))
		return audit_verify_problem(v, c->lineno, "seal: kid %s is none of the keys given",
					    kid);
	if (epoch != s->epoch)
		return audit_verify_problem(v, c->lineno,
					    "seal: epoch %" PRIu64 " where epoch %" PRIu64
					    " was due: seals were removed or repeated",
					    epoch, s->epoch);
	audit_seal_mac(s->key, kid, epoch, c->n, c->prev, c->t, want);
	if (sodium_memcmp(want, mac, AUDIT_HASH_HEX - 1) != 0)
		return audit_verify_problem(
			v, c->lineno,
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
		return audit_verify_problem(v, c->lineno, "a torn line with no fragment before it");
	if (strcmp(c->ev, "seal") == 0)
		return seal_check(v, c);
	return 0;
}

/* The head against the newest file's lines, as they go by. */
static int head_line(struct verifier *v, const struct rec *c)
{
	if (c->n == v->head.n) {
		if (strcmp(c->hash, v->head.hash) != 0)
			return audit_verify_problem(v, c->lineno,
						    "the head records line %" PRIu64
						    " with another hash: the log was rewritten",
						    c->n);
		if (c->end != v->head.bytes)
			return audit_verify_problem(v, c->lineno,
						    "the head records %" PRIu64
						    " bytes up to line %" PRIu64
						    ", the file has %" PRIu64,
						    v->head.bytes, c->n, c->end);
	} else if (c->n > v->head.n) {
		return audit_verify_problem(v, c->lineno,
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

	if (strcmp(c->ev, "start") == 0 && audit_member_u64(c->obj, "seal_s", &seal_s) == 0 &&
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
		return audit_verify_problem(v, c->lineno, "%s", c->why);
	if (v->file_lines == 0 && strcmp(c->ev, "log.open") != 0)
		return audit_verify_problem(v, c->lineno,
					    "the file's first line is a %s line, not log.open",
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

	return c->obj && strcmp(c->ev, "torn") == 0 &&
	       audit_member_u64(c->obj, "bytes", &bytes) == 0 && p->nl &&
	       bytes == (uint64_t)p->len + 1 && c->n == v->n + 1 && strcmp(c->prev, v->hash) == 0;
}

static void pend_drop(struct verifier *v)
{
	audit_rec_clear(v->pend);
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

	audit_rec_parse(c, &v->r);
	if (v->pend_live && torn_acks(v, c, p)) {
		note(v, p->lineno,
		     "a fragment of %zu bytes that an appliance left when it stopped "
		     "mid-write, acknowledged by the torn line after it",
		     p->len + 1);
		audit_rec_clear(p);
		v->pend_live = false;
		rc = rec_apply(v, c, true);
		audit_rec_clear(c);
		return rc;
	}
	if (v->pend_live && !p->obj && c->obj && strcmp(c->ev, "torn") == 0) {
		rc = audit_verify_problem(
			v, p->lineno,
			"%s; the torn line after it does not acknowledge it (it must say "
			"bytes %zu and chain to line %" PRIu64 ")",
			p->why, p->len + 1, v->n);
		audit_rec_clear(c);
		return rc;
	}
	if ((rc = pend_apply(v)) != 0) {
		audit_rec_clear(c);
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
		rc = audit_verify_problem(
			v, p->lineno,
			"torn: an appliance stopped mid-write (%zu bytes with no newline at "
			"the end)",
			p->len);
		pend_drop(v);
		return rc;
	}
	return pend_apply(v);
}

/* One file of the chain, i its place in names, every line of it. */
int audit_verify_file(struct verifier *v, size_t i)
{
	int fd = v->newest_fd, got, rc;

	v->name = v->names[i];
	v->newest = i == 0;
	v->file_lines = 0;
	/* Opened again by name: a file swapped since the first pass is
	 * judged by what it holds now, like any other. */
	if (!v->newest && (rc = audit_prev_open(v, v->name, &fd)) != 0)
		return rc < 0 ? rc : audit_verify_problem(v, 0, "%s", v->link_error);
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
			rc = audit_verify_problem(v, v->r.lineno, "longer than %d bytes",
						  AUDIT_LINE_MAX);
		break;
	}
	if (rc < 0)
		appl_err_errno(v->err, rc, -rc, "reading %s%s", v->dir, v->name);
	if (rc == 0 && v->file_lines == 0)
		rc = audit_verify_problem(v, 0, "empty: a log file starts with its log.open line");
	pend_drop(v);
	audit_rec_clear(v->cur);
	if (!v->newest)
		close(fd);
	v->files_done++;
	return rc;
}
