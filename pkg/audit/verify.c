/* verify.c: checking an audit log (see verify.h and docs/audit.md,
 * "Verification"): setting up, the two passes in order, the rules judged
 * once every line is read (the sealing state, the newest seal's age, the
 * head), and the report.
 *
 * verify reads in two passes. The first (verify_chain.c) follows the chain
 * of files back from the one given, reading only each file's first line
 * (log.open) to learn the name of the file before it; the second
 * (verify_lines.c) reads every file, oldest first, line by line, and
 * stops at the first rule broken.
 */
#define _GNU_SOURCE
#include "audit/verify_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/limits.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

_Static_assert(sizeof(ZERO_HASH) == AUDIT_HASH_HEX, "ZERO_HASH is one hash");

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
		return audit_verify_problem(
			v, 0,
			"no sealing state %s beside the head: it was removed, and without "
			"it a log cut after an old seal is not seen (%s names a copy; an "
			"empty one%s checks without)",
			audit_escape(v->seal_where, shown),
			v->o->in_dir ? "NAME.seal beside the log" : "--seal FILE",
			v->o->in_dir ? "" : ", /dev/null,");
	if (v->seal_src == SEAL_BAD)
		return audit_verify_problem(
			v, 0,
			"the sealing state %s is not one: it was edited, or is another "
			"file",
			audit_escape(v->seal_where, shown));
	if (v->seal_src != SEAL_FOUND)
		return 0;
	if (!(s = audit_sealer_find(v, st->kid)))
		return audit_verify_problem(
			v, 0, "the sealing state %s is of key %s, none of the keys given",
			audit_escape(v->seal_where, shown), st->kid);
	if (st->epoch > s->epoch) {
		epochs_say(s->epoch, st->epoch - 1, gap, sizeof(gap));
		if (s->epoch == 0)
			return audit_verify_problem(
				v, 0,
				"the log was cut: it has no seal of key %s, and its sealing "
				"state %s is at epoch %" PRIu64 ": %s, and the lines sealed, "
				"are missing",
				st->kid, audit_escape(v->seal_where, shown), st->epoch, gap);
		return audit_verify_problem(
			v, 0,
			"the log was cut after line %" PRIu64 ", its last seal of key %s "
			"(epoch %" PRIu64 "), and its sealing state %s is at epoch %" PRIu64
			": %s, and the lines sealed, are missing",
			s->last_n, st->kid, s->epoch - 1, audit_escape(v->seal_where, shown),
			st->epoch, gap);
	}
	if (st->epoch < s->epoch)
		return audit_verify_problem(
			v, 0,
			"the sealing state %s is at epoch %" PRIu64 ", behind the log's last "
			"seal (epoch %" PRIu64 ", line %" PRIu64 "): it was put back from an "
			"older copy",
			audit_escape(v->seal_where, shown), st->epoch, s->epoch - 1, s->last_n);
	if (sodium_memcmp(st->key, s->key, AUDIT_KEY_BYTES) != 0)
		return audit_verify_problem(
			v, 0,
			"the sealing state %s holds a key that is not key %s's of epoch "
			"%" PRIu64 ": it was replaced",
			audit_escape(v->seal_where, shown), st->kid, st->epoch);
	if (st->last_n != s->last_n)
		return audit_verify_problem(
			v, 0,
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
	return audit_verify_problem(
		v, 0,
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
		return audit_verify_problem(
			v, 0,
			"no seal of the key%s given: the log was never sealed with %s, "
			"or its seals were removed",
			v->nsealers == 1 ? "" : "s", v->nsealers == 1 ? "it" : "them");
	switch (v->head_state) {
	case HEAD_FOUND:
		if (v->n < v->head.n)
			return audit_verify_problem(
				v, v->last_lineno,
				"the tail was cut: the log ends at line %" PRIu64
				", the head records line %" PRIu64,
				v->n, v->head.n);
		return 0;
	case HEAD_MISSING:
		if (!v->o->state_dir)
			return audit_verify_problem(v, 0,
						    "no head: no --head, and no state directory");
		return audit_verify_problem(v, 0,
					    "no head recorded for %s in %s (%s names one; an empty "
					    "one%s checks without)",
					    audit_escape(v->real, shown), v->o->state_dir,
					    v->o->in_dir ? "a copy as NAME.head beside the log"
							 : "--head FILE",
					    v->o->in_dir ? "" : ", /dev/null,");
	case HEAD_BAD:
		return audit_verify_problem(
			v, 0,
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
		if ((rc = audit_verify_file(v, i)) != 0)
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
	else if (v->o->in_dir)
		snprintf(head, sizeof(head), "head not checked (%s is empty)",
			 audit_escape(v->head_where, d));
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

	if (!audit_name_plain(base))
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
	if (audit_names_push(v, base) < 0)
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
	audit_rec_clear(&v->recs[0]);
	audit_rec_clear(&v->recs[1]);
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
		rc = audit_verify_state_open(v, &sdfd);
	if (rc == 0)
		rc = audit_head_find(v, sdfd, file);
	if (rc == 0)
		rc = audit_seal_from_file(v);
	if (rc == 0)
		rc = audit_chain_discover(v);
	if (rc == 0)
		rc = audit_head_of_rotated(v, sdfd);
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
