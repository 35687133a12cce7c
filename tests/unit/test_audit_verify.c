/* test_audit_verify.c: the audit log's checker and printer
 * (pkg/audit/verify*.c), on logs built here by hand with format.c's
 * primitives: an intact log, then each way one can be tampered with (a
 * byte edited, a line deleted, lines swapped, the tail cut, lines past
 * the head, a line from another log, the head edited, seals forged, with
 * an epoch gap or an unknown key), a log cut after an old seal (against
 * the sealing state, and against the clock), torn lines, rotation and
 * the files it names, input that is no log at all, a directory of logs
 * (each checked, then the stray files, then the sum; symlinks not
 * followed, no file read twice, NAME.head and NAME.seal copies used),
 * `show` knowing every event the writer puts in a log, and `show --tool`
 * keeping the lines of one code tool's runs. Each case checks the exit
 * code and what is said. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "audit/format.h"
#include "audit/verify.h"
#include "base/fs.h"

#define T0	"2026-12-01T14:00:00.000Z"
#define PID	4242
#define BUF_MAX (256u * 1024)

struct fix {
	char tmp[64];
	char state[128]; /* tmp/state */
	char dir[128];	 /* tmp/log: the log's directory */
	char path[192];	 /* dir/audit.log: the log */
	unsigned char k0[AUDIT_KEY_BYTES];
	const char *seal_file; /* --seal, for the next checks */
	int64_t now_ms;	       /* the clock of the next checks; 0: the real one */
	char out[8192];	       /* what the last check said */
};

/* A chain being built: its lines go into a buffer, one per file. */
struct chain {
	uint64_t n;
	char hash[AUDIT_HASH_HEX];
	uint64_t file; /* the index of the file being built */
	unsigned char key[AUDIT_KEY_BYTES];
	char kid[AUDIT_KID_HEX];
	uint64_t epoch;
	uint64_t seal_n; /* the line of the last seal */
	unsigned t;	 /* seconds after T0 */
};

struct lbuf {
	char *p;
	size_t len;
};

static int fix_setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	int fd;

	assert_non_null(f);
	assert_true(sodium_init() >= 0);
	snprintf(f->tmp, sizeof(f->tmp), "/tmp/appl-auditv.XXXXXX");
	assert_non_null(mkdtemp(f->tmp));
	snprintf(f->state, sizeof(f->state), "%s/state", f->tmp);
	snprintf(f->dir, sizeof(f->dir), "%s/log", f->tmp);
	assert_int_equal(mkdir(f->dir, 0700), 0);
	snprintf(f->path, sizeof(f->path), "%s/audit.log", f->dir);
	assert_int_equal(audit_state_open(f->state, true, &fd, NULL), 0);
	close(fd);
	memset(f->k0, 7, sizeof(f->k0));
	*state = f;
	return 0;
}

static int fix_teardown(void **state)
{
	struct fix *f = *state;

	appl_tree_remove(f->tmp);
	free(f);
	return 0;
}

/* ---- building logs ------------------------------------------------------- */

static void lbuf_add(struct lbuf *b, const char *s, size_t n)
{
	if (!b->p)
		assert_non_null(b->p = malloc(BUF_MAX));
	assert_true(b->len + n <= BUF_MAX);
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void chain_init(struct chain *c, const unsigned char *k0)
{
	memset(c, 0, sizeof(*c));
	memset(c->hash, '0', AUDIT_HASH_HEX - 1);
	if (k0) {
		memcpy(c->key, k0, AUDIT_KEY_BYTES);
		audit_kid(k0, c->kid);
	}
}

static void time_of(const struct chain *c, char t[AUDIT_TIME_LEN + 1])
{
	audit_time(1796133600000 + (int64_t)c->t * 1000, t); /* T0 */
}

/* One well-formed line: the five members, then rest ("" or ",..."). */
static void line_add(struct lbuf *b, struct chain *c, const char *ev, const char *rest)
{
	char line[2 * AUDIT_LINE_MAX], t[AUDIT_TIME_LEN + 1];
	int n;

	time_of(c, t);
	n = snprintf(line, sizeof(line),
		     "{\"n\":%" PRIu64 ",\"prev\":\"%s\",\"t\":\"%s\",\"ev\":\"%s\",\"pid\":%d%s}",
		     c->n + 1, c->hash, t, ev, PID, rest);
	assert_true(n > 0 && (size_t)n < sizeof(line));
	audit_line_hash(line, (size_t)n, c->hash);
	c->n++;
	c->t++;
	lbuf_add(b, line, (size_t)n);
	lbuf_add(b, "\n", 1);
}

/* The first line of file c->file + 1, continuing prev_name (NULL: none). */
static void open_add(struct lbuf *b, struct chain *c, const char *prev_name)
{
	char rest[512];

	c->file++;
	if (prev_name)
		snprintf(rest, sizeof(rest),
			 ",\"file\":%" PRIu64 ",\"previous\":{\"name\":\"%s\",\"n\":%" PRIu64
			 ",\"hash\":\"%s\"}",
			 c->file, prev_name, c->n, c->hash);
	else
		snprintf(rest, sizeof(rest), ",\"file\":%" PRIu64 ",\"previous\":null", c->file);
	line_add(b, c, "log.open", rest);
}

/* A seal of epoch (the next one, unless forced), with the chain's key. */
static void seal_add_as(struct lbuf *b, struct chain *c, uint64_t epoch, bool forge)
{
	char rest[256], mac[AUDIT_HASH_HEX], t[AUDIT_TIME_LEN + 1];

	time_of(c, t);
	audit_seal_mac(c->key, c->kid, epoch, c->n + 1, c->hash, t, mac);
	if (forge)
		mac[0] = mac[0] == 'a' ? 'b' : 'a';
	snprintf(rest, sizeof(rest), ",\"kid\":\"%s\",\"epoch\":%" PRIu64 ",\"mac\":\"%s\"", c->kid,
		 epoch, mac);
	line_add(b, c, "seal", rest);
	audit_ratchet(c->key);
	c->epoch = epoch + 1;
	c->seal_n = c->n;
}

static void seal_add(struct lbuf *b, struct chain *c)
{
	seal_add_as(b, c, c->epoch, false);
}

/* An ordinary run: start, a call sent and ended, the end. */
static void run_add(struct lbuf *b, struct chain *c)
{
	line_add(b, c, "run.start",
		 ",\"run\":\"0123456789ab\",\"client\":\"alice\",\"role\":\"analyst\","
		 "\"revision\":\"2026-07-28\",\"code\":\"" T0 "\",\"code_bytes\":512");
	line_add(b, c, "call",
		 ",\"run\":\"0123456789ab\",\"id\":1,\"tool\":\"github.search\",\"role\":"
		 "\"analyst\",\"access\":\"read\",\"args\":\"x\",\"args_bytes\":20,"
		 "\"outcome\":\"sent\"");
	line_add(b, c, "call.end",
		 ",\"run\":\"0123456789ab\",\"id\":1,\"tool\":\"github.search\",\"outcome\":"
		 "\"ok\",\"result_bytes\":2048,\"ms\":120");
	line_add(b, c, "run.end",
		 ",\"run\":\"0123456789ab\",\"reason\":\"done\",\"ms\":1500,\"calls\":1,"
		 "\"out_bytes\":12,\"answered\":true");
}

/* A log of one file: log.open, start, a run, stop (7 lines). */
static void log_build(struct lbuf *b, struct chain *c)
{
	open_add(b, c, NULL);
	line_add(b, c, "start",
		 ",\"deployment\":\"prod\",\"key\":\"0123456789ABCDEF\",\"serial\":7,"
		 "\"version\":\"0.9\",\"seal\":false");
	run_add(b, c);
	line_add(b, c, "stop", ",\"reason\":\"client closed\",\"runs\":1");
}

static void file_put(const char *path, const struct lbuf *b)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(appl_fd_write_all(fd, b->p, b->len), 0);
	close(fd);
}

/* The head of the log at path, as the writer keeps it, in gen's slot. */
static void head_put_gen(struct fix *f, const char *path, const struct chain *c, uint64_t bytes,
			 uint64_t gen)
{
	struct audit_head h = {.gen = gen, .file = c->file, .n = c->n, .bytes = bytes};
	char id[AUDIT_ID_HEX], name[512];
	int fd;

	memcpy(h.hash, c->hash, AUDIT_HASH_HEX);
	audit_state_id(path, id);
	snprintf(name, sizeof(name), "%s/audit/%s.head", f->state, id);
	fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(audit_head_write_fd(fd, &h, false), 0);
	close(fd);
}

static void head_put(struct fix *f, const struct chain *c, uint64_t bytes)
{
	head_put_gen(f, f->path, c, bytes, 1);
}

/* The sealing state a writer leaves after c's seals: the key of the
 * next epoch, and where the last seal is. */
static void seal_state_put(struct fix *f, const struct chain *c)
{
	struct audit_seal_state st = {.epoch = c->epoch, .last_n = c->seal_n, .last_file = 1};
	char id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	struct appl_err err = {0};
	int dfd;

	memcpy(st.kid, c->kid, AUDIT_KID_HEX);
	memcpy(st.key, c->key, AUDIT_KEY_BYTES);
	memset(st.last_hash, '0', AUDIT_HASH_HEX - 1);
	audit_state_id(f->path, id);
	snprintf(name, sizeof(name), "%s.seal", id);
	assert_int_equal(audit_state_open(f->state, false, &dfd, &err), 0);
	assert_int_equal(audit_seal_write(dfd, name, &st, &err), 0);
	close(dfd);
}

/* The log at f->path, from b, with its head. */
static void log_put(struct fix *f, const struct lbuf *b, const struct chain *c)
{
	file_put(f->path, b);
	head_put(f, c, b->len);
}

/* [start, len) of line k (0-based) of b, newline included. */
static void line_span(const struct lbuf *b, size_t k, size_t *start, size_t *len)
{
	size_t s = 0;

	for (size_t i = 0; i < k; i++) {
		char *nl = memchr(b->p + s, '\n', b->len - s);
		assert_non_null(nl);
		s = (size_t)(nl - b->p) + 1;
	}
	*start = s;
	*len = (size_t)((char *)memchr(b->p + s, '\n', b->len - s) - (b->p + s)) + 1;
}

static void line_delete(struct lbuf *b, size_t k)
{
	size_t s, n;

	line_span(b, k, &s, &n);
	memmove(b->p + s, b->p + s + n, b->len - s - n);
	b->len -= n;
}

static void lines_swap(struct lbuf *b, size_t k)
{
	size_t s1, n1, s2, n2;
	char tmp[AUDIT_LINE_MAX + 1];

	line_span(b, k, &s1, &n1);
	line_span(b, k + 1, &s2, &n2);
	memcpy(tmp, b->p + s1, n1);
	memmove(b->p + s1, b->p + s2, n2);
	memcpy(b->p + s1 + n2, tmp, n1);
}

/* Replace the first `from` in line k with `to`, of the same length. */
static void line_edit(struct lbuf *b, size_t k, const char *from, const char *to)
{
	size_t s, n;
	char *at;

	assert_int_equal(strlen(from), strlen(to));
	line_span(b, k, &s, &n);
	at = memmem(b->p + s, n, from, strlen(from));
	assert_non_null(at);
	memcpy(at, to, strlen(to));
}

/* ---- checking ------------------------------------------------------------ */

static int check_with(struct fix *f, const char *file, const char *head_file,
		      const unsigned char (*keys)[AUDIT_KEY_BYTES], size_t nkeys)
{
	struct audit_verify_opts o = {.keys = keys,
				      .nkeys = nkeys,
				      .head_file = head_file,
				      .state_dir = f->state,
				      .seal_file = f->seal_file,
				      .now_ms = f->now_ms};
	struct appl_err err = {0};
	FILE *out = fmemopen(f->out, sizeof(f->out) - 1, "w");
	int rc;

	assert_non_null(out);
	memset(f->out, 0, sizeof(f->out));
	rc = audit_verify(file, &o, out, &err);
	fclose(out);
	if (rc < 0)
		snprintf(f->out, sizeof(f->out), "error: %s", err.msg);
	return rc;
}

static int check(struct fix *f)
{
	return check_with(f, f->path, NULL, NULL, 0);
}

static int check_keyed(struct fix *f)
{
	const unsigned char(*keys)[AUDIT_KEY_BYTES] =
		(const unsigned char(*)[AUDIT_KEY_BYTES])f->k0;

	return check_with(f, f->path, NULL, keys, 1);
}

/* What was said contains want. */
static void said(const struct fix *f, const char *want)
{
	if (!strstr(f->out, want))
		fail_msg("output\n%s\ndoes not contain\n%s", f->out, want);
}

/* The problem is on line `line` of the log's file `name`. */
static void problem_at(const struct fix *f, const char *name, unsigned line, const char *want)
{
	char at[512];

	snprintf(at, sizeof(at), "%s/%s:%u: ", f->dir, name, line);
	said(f, at);
	said(f, want);
	if (strchr(f->out, '\n') != f->out + strlen(f->out) - 1)
		fail_msg("more than one line said:\n%s", f->out);
}

/* ---- intact -------------------------------------------------------------- */

static void test_intact(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char want[1024], cwd[4096];
	int rc;

	chain_init(&c, NULL);
	log_build(&b, &c);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 0);
	snprintf(want, sizeof(want),
		 "%s: 7 lines in 1 file, chain intact, head matches (line 7), no seals\n", f->path);
	assert_string_equal(f->out, want);
	/* relative to the working directory: the head is found all the same */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(f->dir), 0);
	rc = check_with(f, "audit.log", NULL, NULL, 0);
	assert_int_equal(chdir(cwd), 0);
	assert_int_equal(rc, 0);
	assert_string_equal(f->out, "audit.log: 7 lines in 1 file, chain intact, head matches "
				    "(line 7), no seals\n");
	free(b.p);
}

/* ---- tampering ----------------------------------------------------------- */

static void test_byte_edited(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_edit(&b, 3, "github.search", "github.seArch"); /* line 4: the call */
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 5, "prev is not the hash of line 4 before it");
	free(b.p);
}

static void test_byte_edited_breaking_json(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_edit(&b, 2, "\"run\":", "\"run\';");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 3, "not a log line: not JSON");
	free(b.p);
}

static void test_line_deleted(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_delete(&b, 3);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 4, "n is 5 after 3: lines were removed, reordered or repeated");
	free(b.p);
}

static void test_lines_swapped(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	lines_swap(&b, 3);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 4, "n is 5 after 3");
	free(b.p);
}

/* The last lines gone, chain and all: only the head can tell. */
static void test_tail_cut(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	size_t s, n;

	chain_init(&c, NULL);
	log_build(&b, &c);
	head_put(f, &c, b.len);
	line_span(&b, 5, &s, &n);
	b.len = s; /* lines 6 and 7 cut */
	file_put(f->path, &b);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 5,
		   "the tail was cut: the log ends at line 5, the head records line 7");
	free(b.p);
}

static void test_lines_past_head(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	log_put(f, &b, &c);
	line_add(&b, &c, "stop", ",\"reason\":\"signal 15\",\"runs\":0");
	file_put(f->path, &b);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8,
		   "lines past the recorded head: it ends at line 7, this is line 8");
	free(b.p);
}

/* A line of another log with the same n: its prev is another chain's. */
static void test_line_spliced(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0}, other = {0};
	struct chain c, oc;
	size_t s, n, os, on;

	chain_init(&c, NULL);
	log_build(&b, &c);
	chain_init(&oc, NULL);
	oc.t = 99;
	log_build(&other, &oc);
	line_span(&b, 3, &s, &n);
	line_span(&other, 3, &os, &on);
	assert_int_equal(n, on);
	memcpy(b.p + s, other.p + os, n);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 4, "prev is not the hash of line 3 before it");
	free(b.p);
	free(other.p);
}

/* A rewritten log, chain and all recomputed: the head's hash differs. */
static void test_rewritten_chain(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0}, forged = {0};
	struct chain c, fc;

	chain_init(&c, NULL);
	log_build(&b, &c);
	head_put(f, &c, b.len);
	chain_init(&fc, NULL);
	fc.t = 1; /* other times, same shape */
	log_build(&forged, &fc);
	file_put(f->path, &forged);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 7, "the head records line 7 with another hash");
	free(b.p);
	free(forged.p);
}

static void test_head_edited(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char id[AUDIT_ID_HEX], name[512], slot[2 * AUDIT_HEAD_SLOT];
	int fd;

	chain_init(&c, NULL);
	log_build(&b, &c);
	log_put(f, &b, &c); /* gen 1: slot 1 only */
	audit_state_id(f->path, id);
	snprintf(name, sizeof(name), "%s/audit/%s.head", f->state, id);
	fd = open(name, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, slot, sizeof(slot), 0), (ssize_t)sizeof(slot));
	/* say line 6 is the last: the check no longer matches */
	char *at = memmem(slot + AUDIT_HEAD_SLOT, AUDIT_HEAD_SLOT, " 7 ", 3);
	assert_non_null(at);
	at[1] = '6';
	assert_int_equal(pwrite(fd, slot, sizeof(slot), 0), (ssize_t)sizeof(slot));
	close(fd);
	assert_int_equal(check(f), 1);
	said(f, ": the head ");
	said(f, "has no valid slot: it was edited, or is not a head file");
	free(b.p);
}

/* The newer slot edited, the older one valid: the older head holds, and
 * the lines after it are past it. */
static void test_head_older_slot(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char id[AUDIT_ID_HEX], name[512];
	int fd;

	chain_init(&c, NULL);
	open_add(&b, &c, NULL); /* log_build's lines, with the head after line 6 */
	line_add(&b, &c, "start",
		 ",\"deployment\":\"prod\",\"key\":\"0123456789ABCDEF\",\"serial\":7,"
		 "\"version\":\"0.9\",\"seal\":false");
	run_add(&b, &c);
	head_put_gen(f, f->path, &c, b.len, 2);
	line_add(&b, &c, "stop", ",\"reason\":\"client closed\",\"runs\":1");
	head_put_gen(f, f->path, &c, b.len, 3);
	file_put(f->path, &b);
	assert_int_equal(check(f), 0); /* gen 3 is the head */
	said(f, "head matches (line 7)");
	audit_state_id(f->path, id);
	snprintf(name, sizeof(name), "%s/audit/%s.head", f->state, id);
	fd = open(name, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "X", 1, AUDIT_HEAD_SLOT + 30), 1); /* gen 3's slot */
	close(fd);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 7, "lines past the recorded head: it ends at line 6");
	free(b.p);
}

static void test_no_head(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char want[1024];

	chain_init(&c, NULL);
	log_build(&b, &c);
	file_put(f->path, &b);
	assert_int_equal(check(f), 1);
	snprintf(want, sizeof(want), "%s: no head recorded for %s in %s", f->path, f->path,
		 f->state);
	said(f, want);
	/* --head /dev/null: checked without one, and said so */
	assert_int_equal(check_with(f, f->path, "/dev/null", NULL, 0), 0);
	said(f, "7 lines in 1 file, chain intact, head not checked (the --head file is empty)");
	/* --head FILE: that head */
	head_put(f, &c, b.len);
	{
		char id[AUDIT_ID_HEX], name[512];

		audit_state_id(f->path, id);
		snprintf(name, sizeof(name), "%s/audit/%s.head", f->state, id);
		assert_int_equal(check_with(f, f->path, name, NULL, 0), 0);
		said(f, "head matches (line 7)");
	}
	/* a --head that cannot be read is an error, not a problem */
	assert_true(check_with(f, f->path, "/nonexistent/head", NULL, 0) < 0);
	said(f, "error: --head /nonexistent/head: No such file or directory");
	free(b.p);
}

/* ---- seals --------------------------------------------------------------- */

static void sealed_build(struct lbuf *b, struct chain *c, const unsigned char *k0)
{
	chain_init(c, k0);
	log_build(b, c);
	seal_add(b, c); /* line 8, epoch 0 */
	run_add(b, c);
	seal_add(b, c); /* line 13, epoch 1 */
}

static void test_seal_verified(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char t[AUDIT_TIME_LEN + 1], want[256];

	sealed_build(&b, &c, f->k0);
	line_add(&b, &c, "stop", ",\"reason\":\"client closed\",\"runs\":1");
	log_put(f, &b, &c);
	seal_state_put(f, &c);
	assert_int_equal(check_keyed(f), 0);
	c.t = 12;
	time_of(&c, t);
	snprintf(want, sizeof(want),
		 "14 lines in 1 file, chain intact, head matches (line 14), sealed through "
		 "line 13 (%s), sealing state matches (epoch 2)\n",
		 t);
	said(f, want);
	/* without the key: counted, not checked */
	assert_int_equal(check(f), 0);
	said(f, "head matches (line 14), 2 seals not checked (no --key)\n");
	free(b.p);
}

/* Every seal cut out, with or without what it sealed: with the key, that
 * is a problem; without it, nothing says the log was ever sealed. */
static void test_seals_removed(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	log_put(f, &b, &c);
	seal_state_put(f, &c); /* epoch 0: nothing sealed yet */
	assert_int_equal(check_keyed(f), 1);
	said(f, "no seal of the key given: the log was never sealed with it, or its seals were "
		"removed");
	assert_int_equal(check(f), 0);
	said(f, "no seals\n");
	free(b.p);
}

static void test_seal_forged(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	seal_add(&b, &c);
	run_add(&b, &c);
	seal_add_as(&b, &c, 1, true);
	log_put(f, &b, &c);
	assert_int_equal(check_keyed(f), 1);
	problem_at(f, "audit.log", 13, "seal: the mac does not verify (kid ");
	said(f, ", epoch 1): the lines before it were changed, or the seal is forged");
	free(b.p);
}

/* A log rewritten from some line on, chain recomputed, by whoever holds
 * the host's key of now: the seal before, of an older key, fails. */
static void test_seal_rewritten_with_later_key(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	audit_ratchet(c.key); /* the key of epoch 1, used for epoch 0 */
	seal_add_as(&b, &c, 0, false);
	log_put(f, &b, &c);
	assert_int_equal(check_keyed(f), 1);
	problem_at(f, "audit.log", 8, "seal: the mac does not verify");
	free(b.p);
}

static void test_seal_epoch_gap(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	seal_add(&b, &c);
	run_add(&b, &c);
	audit_ratchet(c.key); /* a seal of epoch 1 removed */
	seal_add_as(&b, &c, 2, false);
	log_put(f, &b, &c);
	assert_int_equal(check_keyed(f), 1);
	problem_at(f, "audit.log", 13,
		   "seal: epoch 2 where epoch 1 was due: seals were removed or repeated");
	free(b.p);
}

static void test_seal_first_epoch_not_zero(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	audit_ratchet(c.key);
	seal_add_as(&b, &c, 1, false);
	log_put(f, &b, &c);
	assert_int_equal(check_keyed(f), 1);
	problem_at(f, "audit.log", 8, "seal: epoch 1 where epoch 0 was due");
	free(b.p);
}

static void test_seal_unknown_kid(void **state)
{
	struct fix *f = *state;
	unsigned char other[AUDIT_KEY_BYTES];
	struct lbuf b = {0};
	struct chain c;

	memset(other, 9, sizeof(other));
	sealed_build(&b, &c, other);
	log_put(f, &b, &c);
	seal_state_put(f, &c);
	assert_int_equal(check_keyed(f), 1);
	problem_at(f, "audit.log", 8, "seal: kid ");
	said(f, " is none of the keys given");
	/* both keys given: each seal checks with its own */
	{
		unsigned char keys[2][AUDIT_KEY_BYTES];

		memcpy(keys[0], f->k0, AUDIT_KEY_BYTES);
		memcpy(keys[1], other, AUDIT_KEY_BYTES);
		assert_int_equal(check_with(f, f->path, NULL, (const unsigned char(*)[32])keys, 2),
				 0);
		said(f, "sealed through line 13");
	}
	free(b.p);
}

static void test_seal_malformed(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, f->k0);
	log_build(&b, &c);
	line_add(&b, &c, "seal", ",\"kid\":\"abc\",\"epoch\":0,\"mac\":\"00\"");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1); /* even without --key */
	problem_at(f, "audit.log", 8, "seal: kid: missing, or not 16 lower-case hex digits");
	free(b.p);
}

/* ---- a log cut after an old seal ----------------------------------------- */

/* The log as it was: seals of epochs 0, 1 and 2 (lines 8, 13, 18), its
 * sealing state at epoch 3. Then what whoever took the host makes of it:
 * the lines to the first seal kept, the later seals (which it cannot
 * make again) and some lines removed, the rest renumbered and rechained,
 * the head rewritten. The chain, the head and every seal left check;
 * the sealing state, whose epoch cannot be set back, does not. */
static void test_cut_after_an_old_seal(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0}, cut = {0};
	struct chain c, k;

	sealed_build(&b, &c, f->k0);
	run_add(&b, &c);
	seal_add(&b, &c); /* line 18, epoch 2 */
	log_put(f, &b, &c);
	seal_state_put(f, &c);
	assert_int_equal(check_keyed(f), 0);
	said(f, "sealed through line 18");
	said(f, "sealing state matches (epoch 3)\n");
	chain_init(&k, f->k0);
	log_build(&cut, &k);
	seal_add(&cut, &k); /* line 8, epoch 0 */
	run_add(&cut, &k);
	log_put(f, &cut, &k);
	assert_int_equal(check_keyed(f), 1);
	said(f, ": the log was cut after line 8, its last seal of key ");
	said(f, " (epoch 0), and its sealing state ");
	said(f, " is at epoch 3: the seals of epochs 1 to 2, and the lines sealed, are "
		"missing\n");
	/* without the key nothing can tell */
	assert_int_equal(check(f), 0);
	/* every seal cut out */
	free(cut.p);
	cut = (struct lbuf){0};
	chain_init(&k, f->k0);
	log_build(&cut, &k);
	log_put(f, &cut, &k);
	assert_int_equal(check_keyed(f), 1);
	said(f, " is at epoch 3: the seals of epochs 0 to 2, and the lines sealed, are missing");
	free(cut.p);
	free(b.p);
}

/* The sealing state itself: removed, edited, put back from an older
 * copy, replaced by another key's; and --seal naming a copy, or none. */
static void test_sealing_state_tampered(void **state)
{
	struct fix *f = *state;
	unsigned char other[AUDIT_KEY_BYTES];
	char id[AUDIT_ID_HEX], path[512];
	struct lbuf b = {0};
	struct chain c, old, o;

	sealed_build(&b, &c, f->k0);
	log_put(f, &b, &c);
	audit_state_id(f->path, id);
	snprintf(path, sizeof(path), "%s/audit/%s.seal", f->state, id);
	/* none beside the head */
	assert_int_equal(check_keyed(f), 1);
	said(f, "no sealing state ");
	said(f, " beside the head: it was removed");
	f->seal_file = "/dev/null";
	assert_int_equal(check_keyed(f), 0);
	said(f, "sealed through line 13 (");
	said(f, "), sealing state not checked\n");
	f->seal_file = NULL;
	/* a copy given with --seal */
	seal_state_put(f, &c);
	f->seal_file = path;
	assert_int_equal(check_with(f, f->path, "/dev/null",
				    (const unsigned char(*)[AUDIT_KEY_BYTES])f->k0, 1),
			 0);
	said(f, "sealing state matches (epoch 2)\n");
	f->seal_file = NULL;
	/* edited */
	file_put(path, &(struct lbuf){.p = "appliance-audit-seal 2\nxyz\n", .len = 27});
	assert_int_equal(check_keyed(f), 1);
	said(f, " is not one: it was edited, or is another file");
	/* an older copy (the state after the first seal) */
	chain_init(&old, f->k0);
	audit_ratchet(old.key);
	old.epoch = 1;
	old.seal_n = 8;
	memcpy(old.kid, c.kid, sizeof(old.kid));
	seal_state_put(f, &old);
	assert_int_equal(check_keyed(f), 1);
	said(f, " is at epoch 1, behind the log's last seal (epoch 1, line 13): it was put back "
		"from an older copy");
	/* the right epoch with a key of its own */
	old = c;
	memset(old.key, 1, sizeof(old.key));
	seal_state_put(f, &old);
	assert_int_equal(check_keyed(f), 1);
	said(f, " holds a key that is not key ");
	said(f, "'s of epoch 2: it was replaced");
	/* a new key made for the log (audit init again, after the state was
	 * removed) */
	memset(other, 9, sizeof(other));
	chain_init(&o, other);
	seal_state_put(f, &o);
	assert_int_equal(check_keyed(f), 1);
	said(f, ", none of the keys given");
	free(b.p);
}

/* The clock: an appliance seals at least every seal_s seconds (its start
 * line says how many), idle or not, and seals its stop. A newest seal
 * older than twice that and a minute, with no stop before it, means the
 * lines after it were cut or sealing stopped; the sealing state cannot
 * tell (it was taken back with the cut, or a copy away from the host). */
static void test_the_newest_seal_is_too_old(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	int64_t sealed;

	chain_init(&c, f->k0);
	open_add(&b, &c, NULL);
	line_add(&b, &c, "start", ",\"deployment\":\"prod\",\"seal\":true,\"seal_s\":300");
	run_add(&b, &c);
	seal_add(&b, &c); /* line 7, at T0 + 6 s */
	run_add(&b, &c);  /* unsealed lines after it */
	log_put(f, &b, &c);
	seal_state_put(f, &c);
	sealed = 1796133600000 + 6000;
	f->now_ms = sealed + (2 * 300 + 60) * 1000;
	assert_int_equal(check_keyed(f), 0);
	f->now_ms += 1000;
	assert_int_equal(check_keyed(f), 1);
	said(f, ": sealing stopped: the newest seal, line 7 (2026-12-01T14:00:06.000Z), is 661 s "
		"old and follows no stop line, and appliances writing this log seal at least "
		"every 300 s (their start lines say): the log was cut after it, or its appliance "
		"stopped sealing");
	/* a log that rests after a sealed stop is never too old */
	line_add(&b, &c, "stop", ",\"reason\":\"client closed\",\"runs\":2");
	seal_add(&b, &c);
	log_put(f, &b, &c);
	seal_state_put(f, &c);
	f->now_ms = sealed + 86400000LL * 365;
	assert_int_equal(check_keyed(f), 0);
	/* without the key a seal's time proves nothing: not judged */
	assert_int_equal(check(f), 0);
	free(b.p);
}

/* ---- torn lines ---------------------------------------------------------- */

static void test_torn_tail(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	head_put(f, &c, b.len);
	lbuf_add(&b, "{\"n\":8,\"prev\":\"ab", 17);
	file_put(f->path, &b);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8,
		   "torn: an appliance stopped mid-write (17 bytes with no newline at the end)");
	free(b.p);
}

/* What the next writer does with it: a newline, then a torn line chained
 * to the last whole line. */
static void test_torn_acknowledged(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char want[1024];

	chain_init(&c, NULL);
	log_build(&b, &c);
	lbuf_add(&b, "{\"n\":8,\"prev\":\"ab\n", 18);
	line_add(&b, &c, "torn", ",\"bytes\":18");
	line_add(&b, &c, "start", ",\"seal\":false");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 0);
	snprintf(want, sizeof(want),
		 "%s: 9 lines in 1 file, chain intact, head matches (line 9), no seals\n"
		 "%s:8: note: a fragment of 18 bytes that an appliance left when it stopped "
		 "mid-write, acknowledged by the torn line after it\n",
		 f->path, f->path);
	assert_string_equal(f->out, want);
	free(b.p);
}

/* Cut right before its newline, a whole line is a fragment too. */
static void test_torn_whole_line(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c, lost;

	chain_init(&c, NULL);
	log_build(&b, &c);
	lost = c;
	line_add(&b, &lost, "stop", ",\"reason\":\"x\",\"runs\":0"); /* not in the chain */
	c.t = lost.t;
	{
		char rest[64];
		size_t s, n;

		line_span(&b, 7, &s, &n);
		snprintf(rest, sizeof(rest), ",\"bytes\":%zu", n);
		line_add(&b, &c, "torn", rest);
	}
	log_put(f, &b, &c);
	assert_int_equal(check(f), 0);
	said(f, "8 lines in 1 file, chain intact");
	said(f, ":8: note: a fragment of ");
	free(b.p);
}

static void test_torn_wrong_bytes(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	lbuf_add(&b, "{\"n\":8,\"prev\":\"ab\n", 18);
	line_add(&b, &c, "torn", ",\"bytes\":17");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8, "the torn line after it does not acknowledge it");
	free(b.p);
}

static void test_torn_without_fragment(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_add(&b, &c, "torn", ",\"bytes\":18");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8, "a torn line with no fragment before it");
	free(b.p);
}

/* ---- rotation ------------------------------------------------------------ */

/* audit.log.1 (file 1) and audit.log (file 2). */
static void rotated_build(struct fix *f, struct chain *c, struct lbuf *b2)
{
	struct lbuf b1 = {0};
	char p1[256];

	chain_init(c, NULL);
	log_build(&b1, c);
	snprintf(p1, sizeof(p1), "%s.1", f->path);
	file_put(p1, &b1);
	open_add(b2, c, "audit.log.1");
	run_add(b2, c);
	log_put(f, b2, c);
	free(b1.p);
}

static void test_rotation(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char p1[256], want[1024];

	rotated_build(f, &c, &b);
	assert_int_equal(check(f), 0);
	said(f, "12 lines in 2 files, chain intact, head matches (line 12), no seals\n");
	/* the rotated file alone: its chain, and the head is not its own */
	snprintf(p1, sizeof(p1), "%s.1", f->path);
	assert_int_equal(check_with(f, p1, NULL, NULL, 0), 0);
	snprintf(want, sizeof(want),
		 "%s: 7 lines in 1 file, chain intact, head not checked (this is file 1 of the "
		 "log at %s, which is at file 2), no seals\n",
		 p1, f->path);
	assert_string_equal(f->out, want);
	free(b.p);
}

static void test_rotation_edited_previous(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0}, b1 = {0};
	struct chain c;
	char p1[256];

	rotated_build(f, &c, &b);
	snprintf(p1, sizeof(p1), "%s.1", f->path);
	{
		struct chain c1;

		chain_init(&c1, NULL);
		log_build(&b1, &c1);
		line_edit(&b1, 1, "prod", "test");
		file_put(p1, &b1);
	}
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log.1", 3, "prev is not the hash of line 2 before it");
	free(b.p);
	free(b1.p);
}

static void test_rotation_missing_previous(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char p1[256];

	rotated_build(f, &c, &b);
	snprintf(p1, sizeof(p1), "%s.1", f->path);
	assert_int_equal(unlink(p1), 0);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1,
		   "the previous file audit.log.1 cannot be opened: No such file or directory");
	/* a symlink in its place is not followed */
	assert_int_equal(symlink("audit.log", p1), 0);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1,
		   "the previous file audit.log.1 cannot be opened: it is a symlink");
	free(b.p);
}

/* previous names no file of the directory, or the file itself (a loop). */
static void test_rotation_bad_names(void **state)
{
	static const char *const bad[] = {"../log/audit.log.1", "..", ".", "", "/etc/passwd"};
	struct fix *f = *state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct lbuf b = {0};
		struct chain c;

		chain_init(&c, NULL);
		c.file = 1;
		c.n = 7;
		open_add(&b, &c, bad[i]);
		log_put(f, &b, &c);
		assert_int_equal(check(f), 1);
		problem_at(f, "audit.log", 1, "previous.name: missing, or not a plain file name");
		free(b.p);
	}
	{
		struct lbuf b = {0};
		struct chain c;

		chain_init(&c, NULL);
		c.file = 1;
		c.n = 7;
		open_add(&b, &c, "audit.log");
		log_put(f, &b, &c);
		assert_int_equal(check(f), 1);
		problem_at(f, "audit.log", 1, "the previous file audit.log is file 2, not file 1");
		free(b.p);
	}
}

/* A chain that does not start at file 1, or a file index repeated. */
static void test_rotation_index(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	c.file = 2;
	open_add(&b, &c, NULL); /* file 3, previous null */
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1, "file 3 names no previous file: files 1 to 2 are missing");
	free(b.p);
}

static void test_head_wrong_file(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	rotated_build(f, &c, &b);
	c.file = 3;
	head_put(f, &c, b.len);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1,
		   "the head records file 3, this is file 2: the files after it are missing");
	free(b.p);
}

/* ---- not a log at all ---------------------------------------------------- */

static void test_overlong_line(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char *pad = malloc(AUDIT_LINE_MAX + 1), rest[AUDIT_LINE_MAX + 64];

	assert_non_null(pad);
	chain_init(&c, NULL);
	log_build(&b, &c);
	memset(pad, 'x', AUDIT_LINE_MAX);
	pad[AUDIT_LINE_MAX - 200] = '\0';
	snprintf(rest, sizeof(rest), ",\"pad\":\"%s\"", pad);
	line_add(&b, &c, "resumed", rest); /* just under the cap */
	log_put(f, &b, &c);
	assert_int_equal(check(f), 0);
	pad[AUDIT_LINE_MAX - 200] = 'x';
	pad[AUDIT_LINE_MAX] = '\0';
	snprintf(rest, sizeof(rest), ",\"pad\":\"%s\"", pad);
	line_add(&b, &c, "resumed", rest);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 9, "longer than 8192 bytes");
	free(pad);
	free(b.p);
}

static void test_garbage(void **state)
{
	static const char bin[] = "\x00\x01\xff\xfe{\"n\":1}\x1b[2J\x7f";
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	log_build(&b, &c);
	lbuf_add(&b, bin, sizeof(bin) - 1);
	lbuf_add(&b, "\n", 1);
	line_add(&b, &c, "stop", ",\"reason\":\"x\",\"runs\":0");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8, "not a log line: not JSON");
	/* what is said is one printable line */
	for (const char *p = f->out; *p; p++)
		assert_true(*p == '\n' || ((unsigned char)*p >= 0x20 && *p != 0x7f));
	/* a binary file from its first byte */
	b.len = 0;
	lbuf_add(&b, bin, sizeof(bin) - 1);
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1, "torn: an appliance stopped mid-write");
	/* an empty file */
	b.len = 0;
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	said(f, "audit.log: empty: a log file starts with its log.open line");
	free(b.p);
}

static void test_not_an_object(void **state)
{
	static const struct {
		const char *line, *why;
	} cases[] = {
		{"[1,2,3]", "not a log line: not a JSON object"},
		{"\"text\"", "not a log line: not JSON"},
		{"42", "not a log line: not JSON"},
		{"null", "not a log line: not JSON"},
		{"{}", "n: missing, or not a positive integer"},
		{"{\"n\":8} {}", "not a log line: not JSON"},
	};
	struct fix *f = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lbuf b = {0};
		struct chain c;

		chain_init(&c, NULL);
		log_build(&b, &c);
		head_put(f, &c, b.len);
		lbuf_add(&b, cases[i].line, strlen(cases[i].line));
		lbuf_add(&b, "\n", 1);
		file_put(f->path, &b);
		assert_int_equal(check(f), 1);
		problem_at(f, "audit.log", 8, cases[i].why);
		free(b.p);
	}
}

/* Each common member of the wrong type or form, and a duplicate key. */
static void test_wrong_types(void **state)
{
	static const struct {
		const char *from, *to, *why;
	} cases[] = {
		{"\"n\":5", "\"n\":\"5\"", "n: missing, or not a positive integer"},
		{"\"n\":5", "\"n\":5.0", "n: missing, or not a positive integer"},
		{"\"n\":5", "\"n\":-5", "n: missing, or not a positive integer"},
		{"\"prev\":\"", "\"prev\":1,\"x\":\"",
		 "prev: missing, or not 64 lower-case hex digits"},
		{"\"t\":\"2026", "\"t\":\"1926", NULL}, /* a time, if an odd one */
		{"\"t\":\"2026-12-01T", "\"t\":\"2026-12-01 ", "t: missing, or not a time"},
		{"\"ev\":\"call.end\"", "\"ev\":7", "ev: missing, or not a string"},
		{"\"pid\":4242", "\"pid\":true", "pid: missing, or not a positive integer"},
		{"\"pid\":4242", "\"pid\":4242,\"pid\":1", "not JSON"},
		{"\"n\":5", "\"N\":5", "n: missing"},
	};
	struct fix *f = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lbuf b = {0}, e = {0};
		struct chain c;
		size_t s, n;
		char *at;

		chain_init(&c, NULL);
		log_build(&b, &c);
		/* line 5 rewritten (its length may change): the head is moot */
		line_span(&b, 4, &s, &n);
		at = memmem(b.p + s, n, cases[i].from, strlen(cases[i].from));
		assert_non_null(at);
		lbuf_add(&e, b.p, (size_t)(at - b.p));
		lbuf_add(&e, cases[i].to, strlen(cases[i].to));
		lbuf_add(&e, at + strlen(cases[i].from),
			 b.len - (size_t)(at - b.p) - strlen(cases[i].from));
		log_put(f, &e, &c);
		if (!cases[i].why) {
			assert_int_equal(check(f), 1);
			problem_at(f, "audit.log", 6, "prev is not the hash of line 5");
		} else {
			assert_int_equal(check(f), 1);
			problem_at(f, "audit.log", 5, cases[i].why);
		}
		free(b.p);
		free(e.p);
	}
}

/* The first line must be log.open, and only a first line may be. */
static void test_log_open_place(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;

	chain_init(&c, NULL);
	line_add(&b, &c, "start", ",\"seal\":false");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 1, "the file's first line is a start line, not log.open");
	free(b.p);
	b = (struct lbuf){0};
	chain_init(&c, NULL);
	log_build(&b, &c);
	line_add(&b, &c, "log.open", ",\"file\":1,\"previous\":null");
	log_put(f, &b, &c);
	assert_int_equal(check(f), 1);
	problem_at(f, "audit.log", 8, "a log.open line in the middle of a file");
	free(b.p);
}

static void test_not_a_file(void **state)
{
	struct fix *f = *state;

	assert_true(check_with(f, f->dir, NULL, NULL, 0) < 0);
	said(f, "not a regular file");
	assert_true(check_with(f, "/nonexistent/audit.log", NULL, NULL, 0) < 0);
	said(f, "No such file or directory");
}

/* ---- a directory of logs ------------------------------------------------- */

static int check_dir_with(struct fix *f, const char *dir, const char *head_file,
			  const unsigned char (*keys)[AUDIT_KEY_BYTES], size_t nkeys)
{
	struct audit_verify_opts o = {.keys = keys,
				      .nkeys = nkeys,
				      .head_file = head_file,
				      .state_dir = f->state,
				      .now_ms = f->now_ms};
	struct appl_err err = {0};
	FILE *out = fmemopen(f->out, sizeof(f->out) - 1, "w");
	int rc;

	assert_non_null(out);
	memset(f->out, 0, sizeof(f->out));
	rc = audit_verify_dir(dir, &o, out, &err);
	fclose(out);
	if (rc < 0)
		snprintf(f->out, sizeof(f->out), "error: %s", err.msg);
	return rc;
}

static int check_dir(struct fix *f)
{
	return check_dir_with(f, f->dir, NULL, NULL, 0);
}

/* f->dir/name, and (with_head) its head in the state, as its writer left
 * it for a log at that path. */
static void dir_log_put(struct fix *f, const char *name, const struct lbuf *b,
			const struct chain *c, bool with_head)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	file_put(path, b);
	if (with_head)
		head_put_gen(f, path, c, b->len, 1);
}

/* f->dir/name: a head as an operator copies one from a replica's
 * STATE/audit/ID.head (renamed NAME.head). */
static void head_copy_put(struct fix *f, const char *name, const struct chain *c, uint64_t bytes)
{
	struct audit_head h = {.gen = 1, .file = c->file, .n = c->n, .bytes = bytes};
	char path[256];
	int fd;

	memcpy(h.hash, c->hash, AUDIT_HASH_HEX);
	snprintf(path, sizeof(path), "%s/%s", f->dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(audit_head_write_fd(fd, &h, false), 0);
	close(fd);
}

/* f->dir/name: a copy of the sealing state c's writer leaves. */
static void seal_copy_put(struct fix *f, const char *name, const struct chain *c)
{
	struct audit_seal_state st = {.epoch = c->epoch, .last_n = c->seal_n, .last_file = 1};
	struct appl_err err = {0};
	int dfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(dfd >= 0);
	memcpy(st.kid, c->kid, AUDIT_KID_HEX);
	memcpy(st.key, c->key, AUDIT_KEY_BYTES);
	memset(st.last_hash, '0', AUDIT_HASH_HEX - 1);
	assert_int_equal(audit_seal_write(dfd, name, &st, &err), 0);
	close(dfd);
}

/* Exactly what was said, with DIR for f->dir in want. */
static void said_exactly(const struct fix *f, const char *want)
{
	char full[8192], *o = full;

	for (const char *p = want; *p; p++) {
		if (strncmp(p, "DIR", 3) == 0) {
			o += snprintf(o, sizeof(full) - (size_t)(o - full), "%s", f->dir);
			p += 2;
		} else {
			*o++ = *p;
		}
		assert_true((size_t)(o - full) < sizeof(full) - 1);
	}
	*o = '\0';
	assert_string_equal(f->out, full);
}

/* Two replicas' logs, each with its head where its writer keeps it:
 * each reported as a file given alone, in name order, then the sum. */
static void test_dir_two_intact(void **state)
{
	struct fix *f = *state;
	struct lbuf a = {0}, b = {0};
	struct chain ca, cb;

	chain_init(&ca, NULL);
	log_build(&a, &ca);
	chain_init(&cb, NULL);
	log_build(&b, &cb);
	run_add(&b, &cb);
	dir_log_put(f, "b.jsonl", &b, &cb, true);
	dir_log_put(f, "a.jsonl", &a, &ca, true);
	assert_int_equal(check_dir(f), 0);
	said_exactly(f, "DIR/a.jsonl: 7 lines in 1 file, chain intact, head matches (line 7), "
			"no seals\n"
			"DIR/b.jsonl: 11 lines in 1 file, chain intact, head matches (line 11), "
			"no seals\n"
			"DIR: 2 logs, 2 intact, 0 with problems, 0 stray files\n");
	/* the directory given with a '/' after it: one, not two */
	{
		char dir[256];

		snprintf(dir, sizeof(dir), "%s/", f->dir);
		assert_int_equal(check_dir_with(f, dir, NULL, NULL, 0), 0);
		said(f, "/a.jsonl: 7 lines");
		assert_null(strstr(f->out, "//"));
	}
	/* one head for every log of a directory is refused */
	assert_true(check_dir_with(f, f->dir, "/dev/null", NULL, 0) < 0);
	said(f, "--head and --seal name one log's");
	free(a.p);
	free(b.p);
}

/* One log's tail cut: it is reported, the other is still intact, and the
 * directory fails. */
static void test_dir_one_cut(void **state)
{
	struct fix *f = *state;
	struct lbuf a = {0}, b = {0};
	struct chain ca, cb;
	char path[256];

	chain_init(&ca, NULL);
	log_build(&a, &ca);
	chain_init(&cb, NULL);
	log_build(&b, &cb);
	dir_log_put(f, "a.jsonl", &a, &ca, true);
	dir_log_put(f, "b.jsonl", &b, &cb, true);
	line_delete(&b, 6);
	snprintf(path, sizeof(path), "%s/b.jsonl", f->dir);
	file_put(path, &b);
	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR/a.jsonl: 7 lines in 1 file, chain intact, head matches (line 7), "
			"no seals\n"
			"DIR/b.jsonl:6: the tail was cut: the log ends at line 6, the head "
			"records line 7\n"
			"DIR: 2 logs, 1 intact, 1 with problems, 0 stray files\n");
	free(a.p);
	free(b.p);
}

/* A directory of no log fails, saying so; so does one of more logs than
 * the bound, at once, before any is read. */
static void test_dir_empty(void **state)
{
	struct fix *f = *state;
	char path[256];

	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR: no log in this directory\n"
			"DIR: 0 logs, 0 intact, 0 with problems, 0 stray files\n");
	for (int i = 0; i <= AUDIT_VERIFY_DIR_LOGS_MAX; i++) {
		snprintf(path, sizeof(path), "%s/log-%d", f->dir, i);
		file_put(path, &(struct lbuf){.p = "", .len = 0});
	}
	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR: more than 4096 logs in one directory: none checked (divide them "
			"among directories)\n");
	/* not a directory */
	assert_true(check_dir_with(f, "/nonexistent", NULL, NULL, 0) < 0);
	said(f, "error: /nonexistent: No such file or directory");
}

/* A symlink is never followed: not as a log, not as a head, not as a
 * rotated file; and a subdirectory is not read. */
static void test_dir_symlink(void **state)
{
	struct fix *f = *state;
	struct lbuf a = {0}, b = {0};
	struct chain ca, cb;
	char path[256];

	chain_init(&ca, NULL);
	log_build(&a, &ca);
	dir_log_put(f, "a.jsonl", &a, &ca, true);
	chain_init(&cb, NULL);
	log_build(&b, &cb);
	dir_log_put(f, "b.jsonl", &b, &cb, true);
	snprintf(path, sizeof(path), "%s/c.jsonl", f->dir);
	assert_int_equal(symlink("a.jsonl", path), 0);
	snprintf(path, sizeof(path), "%s/b.jsonl.head", f->dir);
	assert_int_equal(symlink(f->path, path), 0);
	snprintf(path, sizeof(path), "%s/a.jsonl.7", f->dir);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	snprintf(path, sizeof(path), "%s/sub", f->dir);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR/a.jsonl: 7 lines in 1 file, chain intact, head matches (line 7), "
			"no seals\n"
			"DIR/b.jsonl.head: a symlink, not followed\n"
			"DIR/c.jsonl: a symlink, not followed\n"
			"DIR/sub: a directory, not read (only the directory given is)\n"
			"DIR/a.jsonl.7: a symlink, not followed\n"
			"DIR: 4 logs, 1 intact, 3 with problems, 1 stray file\n");
	free(a.p);
	free(b.p);
}

/* Rotated files are reached through previous, never taken as logs; one
 * that no log reaches is a stray (its log's newest file is missing); and
 * no file is read twice: not through two logs' previous, not under two
 * names. */
static void test_dir_rotated(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	char p1[256], other[256];

	rotated_build(f, &c, &b); /* audit.log.1, audit.log */
	assert_int_equal(check_dir(f), 0);
	said_exactly(f, "DIR/audit.log: 12 lines in 2 files, chain intact, head matches (line "
			"12), no seals\n"
			"DIR: 1 log, 1 intact, 0 with problems, 0 stray files\n");
	/* another log continuing the same file: it is read by the first only */
	snprintf(other, sizeof(other), "%s/other.log", f->dir);
	file_put(other, &b);
	head_put_gen(f, other, &c, b.len, 1);
	/* and a second name of the first log's newest file */
	snprintf(p1, sizeof(p1), "%s/zz.log", f->dir);
	assert_int_equal(link(f->path, p1), 0);
	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR/audit.log: 12 lines in 2 files, chain intact, head matches (line "
			"12), no seals\n"
			"DIR/other.log:1: the previous file audit.log.1 was read already, by a "
			"log before this one in its directory\n"
			"DIR/zz.log: a log before it in this directory read this file already "
			"(through previous, or under another name)\n"
			"DIR: 3 logs, 1 intact, 2 with problems, 0 stray files\n");
	/* the newest file gone: its rotated file is left over, and said */
	assert_int_equal(unlink(other), 0);
	assert_int_equal(unlink(p1), 0);
	assert_int_equal(unlink(f->path), 0);
	assert_int_equal(check_dir(f), 1);
	said_exactly(f, "DIR: no log in this directory\n"
			"DIR/audit.log.1: a rotated file that no log of this directory reaches "
			"through previous\n"
			"DIR: 0 logs, 0 intact, 0 with problems, 1 stray file\n");
	free(b.p);
}

/* NAME.head, an operator's copy of the replica's head, is the log's head
 * (before the state's), as --head FILE would be; empty, it says none;
 * NAME.seal likewise the sealing state; and keys of several replicas
 * check each log's seals (a key no log has is fine). */
static void test_dir_head_copy(void **state)
{
	struct fix *f = *state;
	unsigned char keys[3][AUDIT_KEY_BYTES];
	struct lbuf a = {0}, b = {0};
	struct chain ca, cb, old;
	char path[256];

	memset(keys[0], 7, AUDIT_KEY_BYTES);
	memset(keys[1], 9, AUDIT_KEY_BYTES);
	memset(keys[2], 11, AUDIT_KEY_BYTES);
	chain_init(&ca, NULL);
	log_build(&a, &ca);
	dir_log_put(f, "a.jsonl", &a, &ca, false);
	assert_int_equal(check_dir(f), 1);
	said(f, "/a.jsonl: no head recorded for ");
	said(f, " (a copy as NAME.head beside the log names one; an empty one checks without)\n");
	/* the copy, and not the state's (here an older one) */
	old = ca;
	old.n = 3;
	snprintf(path, sizeof(path), "%s/a.jsonl", f->dir);
	head_put_gen(f, path, &old, 100, 1);
	head_copy_put(f, "a.jsonl.head", &ca, a.len);
	assert_int_equal(check_dir(f), 0);
	said(f, "/a.jsonl: 7 lines in 1 file, chain intact, head matches (line 7), no seals\n");
	/* empty: none */
	snprintf(path, sizeof(path), "%s/a.jsonl.head", f->dir);
	file_put(path, &(struct lbuf){.p = "", .len = 0});
	assert_int_equal(check_dir(f), 0);
	said(f, "chain intact, head not checked (");
	said(f, "/a.jsonl.head is empty), no seals\n");
	/* one that is not this log's: a problem of that log */
	old = ca;
	old.n = 5;
	head_copy_put(f, "a.jsonl.head", &old, a.len);
	assert_int_equal(check_dir(f), 1);
	said(f, "/a.jsonl:5: ");
	said(f, ": 1 log, 0 intact, 1 with problems, 0 stray files\n");
	assert_int_equal(unlink(path), 0);

	/* sealed logs of two replicas, each with its own key, their heads and
	 * sealing states copied beside them */
	free(a.p);
	a = (struct lbuf){0};
	sealed_build(&a, &ca, keys[0]);
	line_add(&a, &ca, "stop", ",\"reason\":\"client closed\",\"runs\":1");
	dir_log_put(f, "a.jsonl", &a, &ca, false);
	head_copy_put(f, "a.jsonl.head", &ca, a.len);
	seal_copy_put(f, "a.jsonl.seal", &ca);
	sealed_build(&b, &cb, keys[1]);
	dir_log_put(f, "b.jsonl", &b, &cb, false);
	head_copy_put(f, "b.jsonl.head", &cb, b.len);
	seal_copy_put(f, "b.jsonl.seal", &cb);
	assert_int_equal(
		check_dir_with(f, f->dir, NULL, (const unsigned char(*)[AUDIT_KEY_BYTES])keys, 3),
		0);
	said(f, "/a.jsonl: 14 lines in 1 file, chain intact, head matches (line 14), sealed "
		"through line 13 (");
	said(f, "), sealing state matches (epoch 2)\n");
	said(f, "/b.jsonl: 13 lines in 1 file, chain intact, head matches (line 13), sealed "
		"through line 13 (");
	said(f, ": 2 logs, 2 intact, 0 with problems, 0 stray files\n");
	/* with the head copied and not the sealing state: not checked, as with --head */
	snprintf(path, sizeof(path), "%s/b.jsonl.seal", f->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(
		check_dir_with(f, f->dir, NULL, (const unsigned char(*)[AUDIT_KEY_BYTES])keys, 3),
		0);
	said(f, "(line 13), sealed through line 13 (");
	said(f, "), sealing state not checked\n");
	/* a head and a sealing state with no log of their name */
	seal_copy_put(f, "gone.jsonl.seal", &cb);
	head_copy_put(f, "gone.jsonl.head", &cb, b.len);
	assert_int_equal(
		check_dir_with(f, f->dir, NULL, (const unsigned char(*)[AUDIT_KEY_BYTES])keys, 3),
		1);
	said(f, "/gone.jsonl.head: a head with no log gone.jsonl beside it\n");
	said(f, "/gone.jsonl.seal: a sealing state with no log gone.jsonl beside it\n");
	said(f, ": 2 logs, 2 intact, 0 with problems, 2 stray files\n");
	free(a.p);
	free(b.p);
}

/* ---- show ---------------------------------------------------------------- */

static void test_show(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	struct appl_err err = {0};
	char out[8192] = {0};
	FILE *o;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_add(&b, &c, "call",
		 ",\"run\":\"0123456789ab\",\"id\":2,\"tool\":\"fs.write\\u001b[2J\",\"role\":"
		 "\"analyst\",\"access\":\"write\",\"args\":\"x\",\"args_bytes\":9,\"outcome\":"
		 "\"refused\",\"reason\":\"not allowed for role analyst\"");
	line_add(&b, &c, "future.event", ",\"run\":\"0123456789ab\"");
	line_add(&b, &c, "approval",
		 ",\"run\":\"0123456789ab\",\"id\":3,\"tool\":\"fs.write\",\"role\":\"analyst\","
		 "\"by\":\"program\",\"outcome\":\"declined\",\"ms\":40");
	line_add(&b, &c, "run.end", ",\"run\":7,\"reason\":null");
	line_add(&b, &c, "run.file",
		 ",\"run\":\"0123456789ab\",\"name\":\"plot.png\",\"bytes\":1234,\"type\":"
		 "\"image/png\",\"sha256\":\"ab12\"");
	line_add(&b, &c, "run.end",
		 ",\"run\":\"f\",\"reason\":\"done\",\"ms\":1,\"calls\":0,\"out_bytes\":0,"
		 "\"files\":2");
	lbuf_add(&b, "garbage\n{\"n\":1", 14);
	file_put(f->path, &b);
	o = fmemopen(out, sizeof(out) - 1, "w");
	assert_non_null(o);
	assert_int_equal(audit_show(f->path, o, &err), 0);
	fclose(o);
	if (!strstr(out, T0 "  log file 1\n") ||
	    !strstr(out, "  appliance start: pid 4242, deployment prod, serial 7, version 0.9, "
			 "seal no\n") ||
	    !strstr(out, "  run 0123456789ab: client alice, role analyst, revision 2026-07-28, "
			 "code 512 bytes\n") ||
	    !strstr(out, "    run 0123456789ab call 1: github.search (read), 20 argument "
			 "bytes: sent\n") ||
	    !strstr(out, "    run 0123456789ab call 1: github.search: ok in 120 ms, 2048 result "
			 "bytes\n") ||
	    !strstr(out, "  run 0123456789ab end: done after 1500 ms, 1 calls, 12 output bytes, "
			 "answered yes\n") ||
	    !strstr(out, "  appliance stop: pid 4242, client closed, 1 runs\n") ||
	    !strstr(out, "    run 0123456789ab call 2: fs.write\\x1b[2J (write), 9 argument "
			 "bytes: refused: not allowed for role analyst\n") ||
	    !strstr(out, "  future.event (an event this version does not know)\n") ||
	    !strstr(out, "    run 0123456789ab call 3: fs.write: approval declined (program) after "
			 "40 ms\n") ||
	    !strstr(out, "  run 7 end: none after ? ms, ? calls, ? output bytes\n") ||
	    !strstr(out, "    run 0123456789ab file plot.png: 1234 bytes, image/png, sha256 "
			 "ab12\n") ||
	    !strstr(out, "  run f end: done after 1 ms, 0 calls, 0 output bytes, 2 files\n") ||
	    !strstr(out, "line 14: not a log line (7 bytes)\n") ||
	    !strstr(out, "line 15: not a log line (6 bytes)\nline 15: no newline at the end"))
		fail_msg("show said:\n%s", out);
	assert_true(audit_show("/nonexistent", stdout, &err) < 0);
	free(b.p);
}

static void test_show_runs(void **state)
{
	struct fix *f = *state;
	struct lbuf b = {0};
	struct chain c;
	struct appl_err err = {0};
	char out[8192] = {0};
	FILE *o;

	chain_init(&c, NULL);
	log_build(&b, &c);
	line_add(&b, &c, "run.start",
		 ",\"run\":\"bbbbbbbbbbbb\",\"client\":\"bob\",\"role\":null,\"revision\":"
		 "\"2025-11-25\",\"code\":\"x\",\"code_bytes\":3");
	line_add(&b, &c, "call",
		 ",\"run\":\"bbbbbbbbbbbb\",\"id\":1,\"tool\":\"fs.write\\u001b\",\"outcome\":"
		 "\"refused\",\"reason\":\"no\"");
	line_add(&b, &c, "run.refused",
		 ",\"run\":\"cccccccccccc\",\"client\":\"bob\",\"reason\":\"too many\"");
	file_put(f->path, &b);
	o = fmemopen(out, sizeof(out) - 1, "w");
	assert_non_null(o);
	assert_int_equal(audit_show_runs(f->path, o, &err), 0);
	fclose(o);
	/* One line per run, in order; a run with no end says so; strings
	 * escaped. */
	if (!strstr(out, "  run 0123456789ab: client alice, role analyst, 2026-07-28, 512 code "
			 "bytes: github.search x1; 0 refused, 0 failed; done after 1500 ms, 12 "
			 "output bytes, answered yes\n") ||
	    !strstr(out, "  run bbbbbbbbbbbb: client bob, role none, 2025-11-25, 3 code bytes: "
			 "fs.write\\x1b x1; 1 refused, 0 failed; no end recorded\n") ||
	    !strstr(out, "  run cccccccccccc: (no start recorded): no calls; 0 refused, 0 "
			 "failed; refused: too many\n"))
		fail_msg("show --runs said:\n%s", out);
	assert_true(audit_show_runs("/nonexistent", stdout, &err) < 0);
	free(b.p);
}

/* ---- show --tool --------------------------------------------------------- */

#define PROG "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define RUN_WHO_OF(id, tool)                                                                       \
	",\"run\":\"" id "\",\"client\":\"alice\",\"role\":\"analyst\",\"revision\":"              \
	"\"2026-07-28\",\"code\":\"x\",\"code_bytes\":300" tool
#define E65 "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

/* A log with a run of the code tool summarize among a run_python run, a
 * log's other lines, refusals of it and of other tools, and runs that
 * only look like its: a name differing in case, one with an escape in it, a
 * run id too long to follow, and an id a later run_python run takes. */
static void tool_log_build(struct lbuf *b, struct chain *c)
{
	log_build(b, c); /* t 0..6 */
	line_add(b, c, "run.start",
		 RUN_WHO_OF("aaaaaaaaaaaa", ",\"tool\":\"summarize\",\"program\":\"" PROG "\""));
	line_add(b, c, "run.start", RUN_WHO_OF("bbbbbbbbbbbb", ""));
	line_add(
		b, c, "call",
		",\"run\":\"aaaaaaaaaaaa\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		"\"args_bytes\":20,\"outcome\":\"sent\"");
	line_add(
		b, c, "call",
		",\"run\":\"bbbbbbbbbbbb\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		"\"args_bytes\":21,\"outcome\":\"sent\"");
	line_add(b, c, "approval",
		 ",\"run\":\"aaaaaaaaaaaa\",\"id\":2,\"tool\":\"fs.write\",\"by\":\"client\","
		 "\"outcome\":\"approved\",\"ms\":30");
	line_add(b, c, "call",
		 ",\"run\":\"aaaaaaaaaaaa\",\"id\":2,\"tool\":\"fs.write\",\"access\":\"write\","
		 "\"args_bytes\":9,\"outcome\":\"sent\"");
	line_add(b, c, "call.end",
		 ",\"run\":\"aaaaaaaaaaaa\",\"id\":1,\"tool\":\"github.search\",\"outcome\":\"ok\","
		 "\"result_bytes\":100,\"ms\":50");
	line_add(b, c, "call.end",
		 ",\"run\":\"bbbbbbbbbbbb\",\"id\":1,\"tool\":\"github.search\",\"outcome\":\"ok\","
		 "\"result_bytes\":101,\"ms\":51");
	line_add(
		b, c, "run.file",
		",\"run\":\"aaaaaaaaaaaa\",\"name\":\"out.csv\",\"bytes\":10,\"type\":\"text/csv\","
		"\"sha256\":\"ab12\"");
	line_add(b, c, "run.end",
		 ",\"run\":\"aaaaaaaaaaaa\",\"reason\":\"done\",\"ms\":900,\"calls\":2,\"out_"
		 "bytes\":5,"
		 "\"files\":1,\"answered\":true");
	/* a call still going when its run ended ends after the run.end */
	line_add(b, c, "call.end",
		 ",\"run\":\"aaaaaaaaaaaa\",\"id\":2,\"tool\":\"fs.write\",\"outcome\":"
		 "\"abandoned\","
		 "\"result_bytes\":0,\"ms\":1");
	line_add(b, c, "run.end",
		 ",\"run\":\"bbbbbbbbbbbb\",\"reason\":\"done\",\"ms\":800,\"calls\":1,\"out_"
		 "bytes\":3,"
		 "\"files\":0,\"answered\":true"); /* t 18 */
	line_add(b, c, "run.refused",
		 ",\"run\":\"cccccccccccc\",\"client\":\"bob\",\"tool\":\"summarize\",\"reason\":"
		 "\"queue full\"");
	line_add(b, c, "run.refused",
		 ",\"run\":\"dddddddddddd\",\"client\":\"bob\",\"tool\":\"summarize2\",\"reason\":"
		 "\"queue full\"");
	line_add(b, c, "run.refused",
		 ",\"run\":\"ffffffffffff\",\"client\":\"bob\",\"reason\":\"policy expired\"");
	line_add(b, c, "run.start",
		 RUN_WHO_OF("111111111111", ",\"tool\":\"Summarize\",\"program\":\"" PROG "\""));
	line_add(
		b, c, "call",
		",\"run\":\"111111111111\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		"\"args_bytes\":1,\"outcome\":\"sent\"");
	line_add(b, c, "run.start",
		 RUN_WHO_OF("222222222222",
			    ",\"tool\":\"summarize\\u001b\",\"program\":\"" PROG "\""));
	line_add(
		b, c, "call",
		",\"run\":\"222222222222\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		"\"args_bytes\":2,\"outcome\":\"sent\""); /* t 25 */
	line_add(b, c, "run.start",
		 RUN_WHO_OF(E65, ",\"tool\":\"summarize\",\"program\":\"" PROG "\""));
	line_add(b, c, "call",
		 ",\"run\":\"" E65 "\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		 "\"args_bytes\":3,\"outcome\":\"sent\"");
	line_add(b, c, "run.start",
		 RUN_WHO_OF("333333333333", ",\"tool\":\"summarize\",\"program\":\"" PROG "\""));
	line_add(b, c, "run.start", RUN_WHO_OF("333333333333", ""));
	line_add(
		b, c, "call",
		",\"run\":\"333333333333\",\"id\":1,\"tool\":\"github.search\",\"access\":\"read\","
		"\"args_bytes\":4,\"outcome\":\"sent\"");
	line_add(b, c, "stop", ",\"reason\":\"client closed\",\"runs\":6"); /* t 31 */
	lbuf_add(b, "garbage\n", 8);
}

static void show_to(const char *path, const struct audit_show_opts *opts, char *out, size_t cap)
{
	struct appl_err err = {0};
	FILE *o;

	memset(out, 0, cap);
	o = fmemopen(out, cap - 1, "w");
	assert_non_null(o);
	assert_int_equal(audit_show_with(path, opts, o, &err), 0);
	fclose(o);
}

#define AT(s)		       "2026-12-01T14:00:" #s ".000Z  "
#define WHO		       "client alice, role analyst, revision 2026-07-28, code 300 bytes"
#define SUMMARIZE_START(s, id) AT(s) "run " id ": " WHO ", tool summarize (program " PROG ")\n"

static void test_show_tool(void **state)
{
	struct fix *f = *state;
	struct audit_show_opts opts = {.tool = "summarize"};
	struct appl_err err = {0};
	struct lbuf b = {0};
	struct chain c;
	char out[16384];

	chain_init(&c, NULL);
	tool_log_build(&b, &c);
	file_put(f->path, &b);
	/* every line: a code tool's run.start names the tool and its program,
	 * a run_python run's names none; a refusal names the tool */
	show_to(f->path, &(struct audit_show_opts){0}, out, sizeof(out));
	if (!strstr(out, SUMMARIZE_START(07, "aaaaaaaaaaaa")) ||
	    !strstr(out, AT(08) "run bbbbbbbbbbbb: " WHO "\n") ||
	    !strstr(out,
		    AT(20) "run dddddddddddd refused: client bob, tool summarize2: queue full\n") ||
	    !strstr(out, AT(21) "run ffffffffffff refused: client bob: policy expired\n") ||
	    !strstr(out,
		    AT(24) "run 222222222222: " WHO ", tool summarize\\x1b (program " PROG ")\n") ||
	    !strstr(out, "line 33: not a log line (7 bytes)\n"))
		fail_msg("show said:\n%s", out);
	/* --tool summarize: exactly the lines of its runs, in order, and its
	 * refusal; the run whose id is too long to follow is said to be */
	show_to(f->path, &opts, out, sizeof(out));
	assert_string_equal(
		out,
		SUMMARIZE_START(07, "aaaaaaaaaaaa") AT(
			09) "  run aaaaaaaaaaaa call 1: github.search (read), 20 argument "
			    "bytes: sent\n" AT(
				    11) "  run aaaaaaaaaaaa call 2: fs.write: "
					"approval approved (client) after 30 "
					"ms\n" AT(
						12) "  run aaaaaaaaaaaa call "
						    "2: fs.write (write), 9 "
						    "argument bytes: "
						    "sent\n" AT(
							    13) "  run "
								"aaaaaaaaa"
								"aaa call "
								"1: "
								"github."
								"search: "
								"ok in 50 "
								"ms, 100 "
								"result "
								"bytes"
								"\n" AT(15) "  run aaaaaaaaaaaa "
									    "file out.csv: 10 "
									    "bytes, text/csv, "
									    "sha256 ab12\n" AT(
										    16) "run "
											"aaaaaaaaaa"
											"aa end: "
											"done "
											"after 900 "
											"ms, 2 "
											"calls, 5 "
											"output "
											"bytes, 1 "
											"files, "
											"answered "
											"yes\n" AT(17) "  run aaaaaaaaaaaa call 2: fs.write: abandoned in 1 ms, 0 result bytes\n" AT(
												19) "run cccccccccccc refused: client bob, tool summarize: queue full\n" SUMMARIZE_START(26,
																							 E65)
												SUMMARIZE_START(
													28,
													"333333333333") "(1 runs of summarize past the first 100000, or with a run id longer than 64 "
															"bytes: their later lines not shown)\n");
	/* --runs --tool summarize: a line for each of those runs, naming it */
	opts.runs = true;
	show_to(f->path, &opts, out, sizeof(out));
	assert_string_equal(
		out,
		AT(07) "run aaaaaaaaaaaa (tool summarize): client alice, role analyst, 2026-07-28, "
		       "300 code bytes: github.search x1, fs.write x1; 0 refused, 1 failed; done "
		       "after 900 ms, 5 output bytes, answered yes\n" AT(
			       19) "run cccccccccccc (tool summarize): (no start recorded): no "
				   "calls; 0 refused, "
				   "0 failed; refused: queue full\n" AT(
					   26) "run " E65 " (tool summarize): client alice, role "
					       "analyst, 2026-07-28, 300 code "
					       "bytes: no calls; 0 refused, 0 failed; no end "
					       "recorded\n" AT(
						       28) "run 333333333333 (tool summarize): "
							   "client alice, role analyst, "
							   "2026-07-28, "
							   "300 code bytes: no calls; 0 refused, 0 "
							   "failed; no end recorded\n"
							   "(1 runs of summarize past the first "
							   "100000, or with a run id longer than "
							   "64 "
							   "bytes: their later lines not shown)\n");
	/* --runs alone names the tool of each run that had one */
	show_to(f->path, &(struct audit_show_opts){.runs = true}, out, sizeof(out));
	if (!strstr(out, AT(08) "run bbbbbbbbbbbb: client alice") ||
	    !strstr(out, AT(20) "run dddddddddddd (tool summarize2): (no start recorded)") ||
	    !strstr(out, AT(22) "run 111111111111 (tool Summarize): client alice"))
		fail_msg("show --runs said:\n%s", out);
	/* a tool no run had: nothing; a name no code tool has: refused */
	opts = (struct audit_show_opts){.tool = "summ"};
	show_to(f->path, &opts, out, sizeof(out));
	assert_string_equal(out, "");
	assert_true(audit_tool_name_valid("a") && audit_tool_name_valid("Sum_2-x"));
	assert_true(audit_tool_name_valid(
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")); /* 64 */
	for (const char *const *bad =
		     (const char *const[]){
			     "", "a.b", "a b", "s\xc3\xa9", "a/b",
			     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
			     NULL};
	     *bad; bad++) {
		assert_false(audit_tool_name_valid(*bad));
		opts.tool = *bad;
		assert_true(audit_show_with(f->path, &opts, stdout, &err) < 0);
		assert_non_null(strstr(err.msg, "not a code tool's name"));
	}
	free(b.p);
}

/* The events the sources write: the literal after the logger in every
 * call of audit_event, audit_event_sync (the callers) and line_put_json
 * (the writer's own lines) in pkg/'s .c files, added to evs. */
static void source_events(const char *path, json_t *evs)
{
	static const char *const calls[] = {"audit_event(", "audit_event_sync(", "line_put_json("};
	struct appl_err err = {0};
	char *data, *p, *q, *end;
	size_t len;

	assert_int_equal(appl_file_read(path, 1u << 22, &data, &len, &err), 0);
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		for (p = data; (p = strstr(p, calls[i])); p++) {
			/* a definition or a call with a variable has no literal
			 * before its first ')' */
			q = strpbrk(p, "\")");
			if (!q || *q != '"' || !(end = strchr(q + 1, '"')))
				continue;
			json_array_append_new(evs, json_stringn(q + 1, (size_t)(end - q - 1)));
		}
	free(data);
}

/* Every event the writer puts in a log has a form in `show` (none is
 * printed as "an event this version does not know"), and every event
 * the sources write is in the list show is held to. */
static void test_show_knows_every_writer_event(void **state)
{
	struct fix *f = *state;
	json_t *evs = json_array();
	struct appl_err err = {0};
	char out[8192] = {0}, path[1024];
	struct lbuf b = {0};
	struct chain c;
	struct dirent *de, *fe;
	DIR *pkg, *mod;
	size_t i, n = 0;
	FILE *o;

	for (i = 0; audit_events[i]; i++)
		if (!audit_show_knows(audit_events[i]))
			fail_msg("the writer's event %s has no form in audit show",
				 audit_events[i]);
	assert_non_null(pkg = opendir("pkg")); /* the tests run from the top directory */
	while ((de = readdir(pkg))) {
		snprintf(path, sizeof(path), "pkg/%s", de->d_name);
		if (de->d_name[0] == '.' || !(mod = opendir(path)))
			continue;
		while ((fe = readdir(mod))) {
			size_t l = strlen(fe->d_name);

			snprintf(path, sizeof(path), "pkg/%s/%s", de->d_name, fe->d_name);
			if (l > 2 && strcmp(fe->d_name + l - 2, ".c") == 0)
				source_events(path, evs);
		}
		closedir(mod);
	}
	closedir(pkg);
	for (i = 0; i < json_array_size(evs); i++) {
		const char *ev = json_string_value(json_array_get(evs, i)), *const * k;

		for (k = audit_events; *k && strcmp(*k, ev) != 0; k++)
			;
		if (!*k)
			fail_msg("the sources write the event %s, which audit_events does not list",
				 ev);
		n++;
	}
	assert_true(n >= 13); /* the scan found the callers */
	json_decref(evs);
	/* auth lines as the HTTP front's token check writes them */
	chain_init(&c, NULL);
	open_add(&b, &c, NULL);
	line_add(&b, &c, "auth",
		 ",\"client\":\"alice\",\"peer\":\"127.0.0.1:40000\",\"outcome\":\"accepted\"");
	line_add(&b, &c, "auth",
		 ",\"peer\":\"unix\",\"outcome\":\"refused\",\"refusals_dropped\":3");
	file_put(f->path, &b);
	o = fmemopen(out, sizeof(out) - 1, "w");
	assert_non_null(o);
	assert_int_equal(audit_show(f->path, o, &err), 0);
	fclose(o);
	if (!strstr(out, "  auth accepted: client alice, peer 127.0.0.1:40000\n") ||
	    !strstr(out, "  auth refused: peer unix, 3 refusals not written before\n") ||
	    strstr(out, "does not know"))
		fail_msg("show said:\n%s", out);
	free(b.p);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, fix_setup, fix_teardown)
	const struct CMUnitTest tests[] = {
		T(test_intact),
		T(test_byte_edited),
		T(test_byte_edited_breaking_json),
		T(test_line_deleted),
		T(test_lines_swapped),
		T(test_tail_cut),
		T(test_lines_past_head),
		T(test_line_spliced),
		T(test_rewritten_chain),
		T(test_head_edited),
		T(test_head_older_slot),
		T(test_no_head),
		T(test_seal_verified),
		T(test_seals_removed),
		T(test_seal_forged),
		T(test_seal_rewritten_with_later_key),
		T(test_seal_epoch_gap),
		T(test_seal_first_epoch_not_zero),
		T(test_seal_unknown_kid),
		T(test_seal_malformed),
		T(test_cut_after_an_old_seal),
		T(test_sealing_state_tampered),
		T(test_the_newest_seal_is_too_old),
		T(test_torn_tail),
		T(test_torn_acknowledged),
		T(test_torn_whole_line),
		T(test_torn_wrong_bytes),
		T(test_torn_without_fragment),
		T(test_rotation),
		T(test_rotation_edited_previous),
		T(test_rotation_missing_previous),
		T(test_rotation_bad_names),
		T(test_rotation_index),
		T(test_head_wrong_file),
		T(test_overlong_line),
		T(test_garbage),
		T(test_not_an_object),
		T(test_wrong_types),
		T(test_log_open_place),
		T(test_not_a_file),
		T(test_dir_two_intact),
		T(test_dir_one_cut),
		T(test_dir_empty),
		T(test_dir_symlink),
		T(test_dir_rotated),
		T(test_dir_head_copy),
		T(test_show),
		T(test_show_runs),
		T(test_show_tool),
		T(test_show_knows_every_writer_event),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
