/* verify_int.h: inside the audit log's checker (verify.h), shared by its
 * files only: verify_dir.c (every log of a directory), verify.c (setting
 * up, the checks made at the end, the report), verify_lines.c (the
 * second pass, line by line), verify_chain.c (the first pass: the files
 * of the chain), verify_head.c (the head and the sealing state, read
 * under the log's lock), verify_rec.c (one line parsed) and
 * verify_seen.c (the files a directory's logs read). Calls go down that
 * list, never up it. */
#ifndef APPL_AUDIT_VERIFY_INT_H
#define APPL_AUDIT_VERIFY_INT_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "audit/format.h"
#include "audit/read.h"
#include "audit/verify.h"
#include "base/err.h"

#define WHY_MAX	  256
#define NOTES_MAX 8

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

struct open_info {
	uint64_t file;
	bool has_prev;
	const char *name, *hash; /* borrowed, when has_prev */
	uint64_t n;
};

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

/* ---- one line (verify_rec.c) ------------------------------------------------- */

/* s is exactly want lower-case hex digits. */
bool audit_hex_valid(const char *s, size_t want);

/* A name in the log's directory: never a path, so a log cannot make the
 * checker read outside that directory. */
bool audit_name_plain(const char *s);

/* Members of o (borrowed): a string, or NULL; a non-negative integer into
 * *out: 0, or -1 when missing or of another type. */
const char *audit_member_str(const json_t *o, const char *key);
int audit_member_u64(const json_t *o, const char *key, uint64_t *out);

/* Parse the reader's current line into c: 0, or -1 with c->why. c->obj is
 * new: audit_rec_clear drops it. */
int audit_rec_parse(struct rec *c, const struct audit_reader *r);
void audit_rec_clear(struct rec *c);

/* The members of a log.open line o: 0, or -1 with why. */
int audit_open_info_parse(const json_t *o, struct open_info *oi, char why[WHY_MAX]);

/* ---- the files a directory's logs read (verify_seen.c) ------------------------ */

/* An empty set (new; audit_seen_free), or NULL when out of memory. */
struct audit_seen *audit_seen_new(void);
void audit_seen_free(struct audit_seen *s);

/* Whether the file st describes (its device and inode) is in s. */
bool audit_seen_has(const struct audit_seen *s, const struct stat *st);

/* Add it: 0, 1 when it was there already, -ENOMEM, or -E2BIG past
 * AUDIT_VERIFY_DIR_FILES_MAX files. */
int audit_seen_add(struct audit_seen *s, const struct stat *st);

/* The file at fd (borrowed) is read by v's log: added to v->o->seen when
 * there is one. 0; 1 when a log before it read that file already; or < 0
 * (err filled). */
int audit_seen_claim(struct verifier *v, int fd);

/* ---- the head and the sealing state (verify_head.c) ------------------------- */

/* The state directory, when the options name one that exists: *sdfd new,
 * or -1. 0 or < 0. */
int audit_verify_state_open(struct verifier *v, int *sdfd);

/* Before anything is read: the head (--head, or the state's for FILE),
 * and the newest file opened under the log's lock. */
int audit_head_find(struct verifier *v, int sdfd, const char *file);

/* --seal FILE, with keys. */
int audit_seal_from_file(struct verifier *v);

/* No head for FILE itself, and FILE is file K of the log at NAME (its
 * name NAME.K): that log's head, which applies only while it is at file K. */
int audit_head_of_rotated(struct verifier *v, int sdfd);

/* ---- the files of the chain (verify_chain.c) ----------------------------------- */

/* Add name (copied) to v->names: 0 or -ENOMEM (err filled). */
int audit_names_push(struct verifier *v, const char *name);

/* Open name in the log's directory: never through a symlink, never a fifo
 * or a device. 0, 1 when it cannot be (why in v->link_error), or < 0. */
int audit_prev_open(struct verifier *v, const char *name, int *fd);

/* The first pass: from the newest file back through `previous` while
 * each step is sound. 0 or < 0. */
int audit_chain_discover(struct verifier *v);

/* ---- line by line (verify_lines.c) --------------------------------------------- */

/* Set v->problem to "FILE:LINE: " and the message (line 0: "FILE: ");
 * returns 1, what a check returns for a problem. */
int audit_verify_problem(struct verifier *v, uint64_t line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The sealer of key kid, or NULL. */
struct sealer *audit_sealer_find(struct verifier *v, const char *kid);

/* One file of the chain, i its place in v->names, every line of it: 0,
 * 1 for a problem, or < 0. */
int audit_verify_file(struct verifier *v, size_t i);

#endif
