/* test_audit.c: the audit log's writer (pkg/audit/audit.c, batch.c,
 * adopt.c, line.c): one chain across opens, processes and files; the head
 * kept; seals whose epochs run on through a crash between sealing and
 * ratcheting; a torn tail acknowledged; a cut, removed or
 * foreign-continued log refused; a failed write leaving nothing behind,
 * and the log resuming after it. */
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "audit/audit.h"
#include "audit/format.h"
#include "base/fs.h"
#include "metrics/metrics.h"

struct env {
	char dir[64];	/* the log's directory */
	char state[80]; /* the state directory */
	char path[96];	/* the log */
	struct audit_config cfg;
};

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	assert_int_equal(sodium_init() >= 0, 1);
	snprintf(e->dir, sizeof(e->dir), "/tmp/appliance-audit-unit.XXXXXX");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->state, sizeof(e->state), "%s/state", e->dir);
	assert_int_equal(mkdir(e->state, 0700), 0);
	snprintf(e->path, sizeof(e->path), "%s/audit.jsonl", e->dir);
	e->cfg = (struct audit_config){.path = e->path,
				       .state_dir = e->state,
				       .seal_lines = 1000,
				       .seal_s = 3600,
				       .rotate_bytes = 1u << 30};
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	appl_tree_remove(e->dir);
	free(e);
	return 0;
}

static struct audit *open_ok(struct env *e)
{
	struct appl_err err = {0};
	struct audit *a = audit_open(NULL, &e->cfg, &err);

	if (!a)
		fail_msg("audit_open: %s", err.msg);
	return a;
}

static void event(struct audit *a, const char *ev, int i)
{
	json_t *b = json_pack("{si}", "i", i);

	audit_event(a, ev, b);
	json_decref(b);
}

/* The lines of file, each checked to continue the one before (from *n and
 * prev, which move on); returns how many, and the events in evs. */
static size_t chain_check(const char *file, uint64_t *n, char prev[AUDIT_HASH_HEX], json_t *evs)
{
	char *data, *p, *nl;
	size_t len, count = 0;
	struct appl_err err = {0};

	assert_int_equal(appl_file_read(file, 1u << 26, &data, &len, &err), 0);
	for (p = data; (nl = memchr(p, '\n', (size_t)(data + len - p))); p = nl + 1) {
		json_error_t je;
		json_t *o = json_loadb(p, (size_t)(nl - p), 0, &je);

		if (!o)
			fail_msg("%s: line %zu is not JSON: %s", file, count + 1, je.text);
		assert_int_equal(json_integer_value(json_object_get(o, "n")), (json_int_t)(*n + 1));
		assert_string_equal(json_string_value(json_object_get(o, "prev")), prev);
		audit_line_hash(p, (size_t)(nl - p), prev);
		(*n)++;
		count++;
		if (evs)
			json_array_append(evs, o);
		json_decref(o);
	}
	assert_true(p == data + len); /* nothing after the last newline */
	free(data);
	return count;
}

static size_t chain_all(const char *file, json_t *evs)
{
	char prev[AUDIT_HASH_HEX];
	uint64_t n = 0;

	memset(prev, '0', AUDIT_HASH_HEX - 1);
	prev[AUDIT_HASH_HEX - 1] = '\0';
	return chain_check(file, &n, prev, evs);
}

static const char *ev_name(json_t *evs, size_t i)
{
	return json_string_value(json_object_get(json_array_get(evs, i), "ev"));
}

static void head_get(struct env *e, struct audit_head *h)
{
	char id[AUDIT_ID_HEX], path[256], *buf;
	size_t len;
	struct appl_err err = {0};

	audit_state_id(e->path, id);
	snprintf(path, sizeof(path), "%s/audit/%s.head", e->state, id);
	assert_int_equal(appl_file_read(path, 4096, &buf, &len, &err), 0);
	assert_int_equal(audit_head_parse(buf, len, h), 0);
	free(buf);
}

/* A writer killed after writing its batch and before recording it: the
 * head's newest slot (the batch recorded) made unreadable, so the one
 * before it, which announced the batch, is the head. */
static void head_drop_newest(struct env *e)
{
	char id[AUDIT_ID_HEX], path[256], slot[AUDIT_HEAD_SLOT];
	struct audit_head h;
	int fd;

	audit_state_id(e->path, id);
	snprintf(path, sizeof(path), "%s/audit/%s.head", e->state, id);
	head_get(e, &h);
	assert_int_equal(h.pend_file, 0);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, slot, sizeof(slot), (off_t)(h.gen % 2) * AUDIT_HEAD_SLOT),
			 AUDIT_HEAD_SLOT);
	slot[0] = 'X';
	assert_int_equal(pwrite(fd, slot, sizeof(slot), (off_t)(h.gen % 2) * AUDIT_HEAD_SLOT),
			 AUDIT_HEAD_SLOT);
	close(fd);
	head_get(e, &h);
	assert_true(h.pend_file > 0); /* the announcement */
}

/* The value of the metrics' sample `name` (a family without labels). */
static uint64_t metric(const char *name)
{
	struct appl_err err = {0};
	char *text, want[128], *at;
	uint64_t v;
	size_t len;

	assert_int_equal(metrics_render(&text, &len, &err), 0);
	snprintf(want, sizeof(want), "\n%s ", name);
	at = strstr(text, want);
	assert_non_null(at);
	v = strtoull(at + strlen(want), NULL, 10);
	free(text);
	return v;
}

static void test_one_chain_across_opens_with_its_head(void **state)
{
	struct env *e = *state;
	struct audit_head h;
	json_t *evs = json_array();
	struct stat st;
	struct audit *a = open_ok(e);

	for (int i = 0; i < 5; i++)
		event(a, "x", i);
	assert_int_equal(audit_flush(a, true), 0);
	audit_free(a);
	a = open_ok(e);
	event(a, "y", 0);
	audit_free(a); /* writes what is queued */
	assert_int_equal(chain_all(e->path, evs), 7);
	assert_string_equal(ev_name(evs, 0), "log.open");
	assert_true(json_is_null(json_object_get(json_array_get(evs, 0), "previous")));
	assert_string_equal(ev_name(evs, 6), "y");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(evs, 3), "i")), 2);
	head_get(e, &h);
	assert_int_equal(h.n, 7);
	assert_int_equal(h.file, 1);
	assert_int_equal(stat(e->path, &st), 0);
	assert_int_equal(h.bytes, (uint64_t)st.st_size);
	assert_int_equal(st.st_mode & 0777, 0600);
	json_decref(evs);
}

static void test_three_processes_make_one_chain(void **state)
{
	struct env *e = *state;
	json_t *evs = json_array();
	pid_t kids[3];
	int per[3] = {0, 0, 0};

	audit_free(open_ok(e)); /* the file exists before they race */
	for (int k = 0; k < 3; k++) {
		kids[k] = fork();
		assert_true(kids[k] >= 0);
		if (kids[k] == 0) {
			struct appl_err err = {0};
			struct audit *a = audit_open(NULL, &e->cfg, &err);

			for (int i = 0; a && i < 200; i++) {
				event(a, "w", k);
				if (audit_flush(a, i % 7 == 0) < 0)
					_exit(2);
			}
			audit_free(a);
			_exit(a ? 0 : 1);
		}
	}
	for (int k = 0; k < 3; k++) {
		int status;

		assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	assert_int_equal(chain_all(e->path, evs), 601);
	for (size_t i = 1; i < json_array_size(evs); i++)
		per[json_integer_value(json_object_get(json_array_get(evs, i), "i"))]++;
	assert_int_equal(per[0], 200);
	assert_int_equal(per[1], 200);
	assert_int_equal(per[2], 200);
	json_decref(evs);
}

static void test_rotation_names_the_previous_file(void **state)
{
	struct env *e = *state;
	char old[160], prev[AUDIT_HASH_HEX];
	json_t *evs = json_array(), *first;
	struct stat st;
	uint64_t n = 0;
	struct audit *a;

	e->cfg.rotate_bytes = 2048;
	a = open_ok(e);
	for (int i = 0; i < 60; i++) {
		event(a, "r", i);
		assert_int_equal(audit_flush(a, false), 0);
	}
	audit_free(a);
	memset(prev, '0', AUDIT_HASH_HEX - 1);
	prev[AUDIT_HASH_HEX - 1] = '\0';
	for (int k = 1;; k++) {
		snprintf(old, sizeof(old), "%s.%d", e->path, k);
		if (stat(old, &st) < 0)
			break;
		assert_true(st.st_size <= 2048);
		chain_check(old, &n, prev, NULL);
	}
	assert_true(n > 0); /* it rotated */
	chain_check(e->path, &n, prev, evs);
	first = json_array_get(evs, 0);
	assert_string_equal(ev_name(evs, 0), "log.open");
	assert_true(json_integer_value(json_object_get(first, "file")) >= 2);
	assert_non_null(json_object_get(json_object_get(first, "previous"), "hash"));
	assert_int_equal(n, 61 + json_integer_value(json_object_get(first, "file")) - 1);
	json_decref(evs);
}

/* Rotate, and be killed before the head records it: the batch that began
 * file 2 announced and never recorded. */
static void rotate_then_kill(struct env *e)
{
	char old[160];
	struct audit *a;

	e->cfg.rotate_bytes = 1024;
	snprintf(old, sizeof(old), "%s.1", e->path);
	a = open_ok(e);
	for (int i = 0; access(old, F_OK) != 0; i++) {
		assert_true(i < 100);
		event(a, "r", i);
		assert_int_equal(audit_flush(a, false), 0);
	}
	audit_free(a);
	head_drop_newest(e);
}

/* After the restart the files make one chain, file 2 begun by a log.open
 * that names file 1. */
static void two_files_check(struct env *e)
{
	char old[160], prev[AUDIT_HASH_HEX];
	json_t *evs = json_array();
	uint64_t n = 0;
	struct audit *a = open_ok(e);

	event(a, "after", 0);
	audit_free(a);
	snprintf(old, sizeof(old), "%s.1", e->path);
	memset(prev, '0', AUDIT_HASH_HEX - 1);
	prev[AUDIT_HASH_HEX - 1] = '\0';
	chain_check(old, &n, prev, NULL);
	chain_check(e->path, &n, prev, evs);
	assert_string_equal(ev_name(evs, 0), "log.open");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(evs, 0), "file")), 2);
	assert_string_equal(ev_name(evs, json_array_size(evs) - 1), "after");
	json_decref(evs);
}

static void test_rotation_killed_after_the_rename(void **state)
{
	struct env *e = *state;

	rotate_then_kill(e);
	assert_int_equal(unlink(e->path), 0); /* the new file not made yet */
	two_files_check(e);
}

static void test_rotation_killed_after_making_the_file(void **state)
{
	struct env *e = *state;

	rotate_then_kill(e);
	assert_int_equal(truncate(e->path, 0), 0); /* made, nothing written */
	two_files_check(e);
}

static void test_rotation_killed_after_writing(void **state)
{
	struct env *e = *state;

	rotate_then_kill(e); /* written, not recorded: adopted */
	two_files_check(e);
}

/* The seal lines of evs: epochs from 0 without a gap, each MAC right. */
static unsigned seals_check(json_t *evs, const unsigned char k0[AUDIT_KEY_BYTES], const char *kid)
{
	unsigned char key[AUDIT_KEY_BYTES];
	unsigned epochs = 0;

	for (size_t i = 0; i < json_array_size(evs); i++) {
		json_t *o = json_array_get(evs, i);
		char mac[AUDIT_HASH_HEX];

		if (strcmp(ev_name(evs, i), "seal") != 0)
			continue;
		assert_int_equal(json_integer_value(json_object_get(o, "epoch")), epochs);
		assert_string_equal(json_string_value(json_object_get(o, "kid")), kid);
		audit_key_at(k0, epochs, key);
		audit_seal_mac(key, kid, epochs,
			       (uint64_t)json_integer_value(json_object_get(o, "n")),
			       json_string_value(json_object_get(o, "prev")),
			       json_string_value(json_object_get(o, "t")), mac);
		assert_string_equal(json_string_value(json_object_get(o, "mac")), mac);
		epochs++;
	}
	return epochs;
}

static void file_copy(const char *from, const char *to)
{
	char *buf;
	size_t len;
	struct appl_err err = {0};
	int fd;

	assert_int_equal(appl_file_read(from, 1u << 20, &buf, &len, &err), 0);
	fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(appl_fd_write_all(fd, buf, len), 0);
	close(fd);
	free(buf);
}

static void test_seals_ratchet_and_survive_a_crash_before_the_ratchet(void **state)
{
	struct env *e = *state;
	unsigned char k0[AUDIT_KEY_BYTES];
	char kid[AUDIT_KID_HEX], id[AUDIT_ID_HEX], seal[256], keep_s[280];
	struct appl_err err = {0};
	json_t *evs = json_array();
	struct audit_seal_state st;
	struct audit *a;
	int dfd;

	metrics_reset();
	e->cfg.seal = true;
	e->cfg.seal_lines = 4;
	assert_null(audit_open(NULL, &e->cfg, &err)); /* no sealing key yet */
	assert_int_equal(err.code, -ENOKEY);
	assert_non_null(strstr(err.msg, "audit init"));
	assert_int_equal(access(e->path, F_OK), -1); /* nothing was started */
	assert_int_equal(audit_seal_init(e->state, e->path, k0, kid, &err), 0);
	{
		unsigned char again[AUDIT_KEY_BYTES];
		char kid2[AUDIT_KID_HEX];

		/* A sealing key is never replaced, and a log is named absolutely. */
		assert_int_equal(audit_seal_init(e->state, e->path, again, kid2, &err), -EEXIST);
		assert_int_equal(audit_seal_init(e->state, "relative", again, kid2, &err), -EINVAL);
	}
	a = open_ok(e);
	for (int i = 0; i < 9; i++) {
		event(a, "s", i);
		assert_int_equal(audit_flush(a, false), 0);
	}
	audit_free(a);
	/* A crash after the seal line was written and before the ratchet and
	 * the head: the sealing state from before it put back, and the head
	 * that announced the batch. */
	audit_state_id(e->path, id);
	snprintf(seal, sizeof(seal), "%s/audit/%s.seal", e->state, id);
	snprintf(keep_s, sizeof(keep_s), "%s.keep", seal);
	file_copy(seal, keep_s);
	a = open_ok(e);
	for (int i = 0; i < 4; i++)
		event(a, "s", 100 + i);
	assert_int_equal(audit_flush(a, false), 0); /* 4 lines: a seal with them */
	audit_free(a);
	file_copy(keep_s, seal);
	head_drop_newest(e);
	a = open_ok(e);
	for (int i = 0; i < 8; i++) {
		event(a, "s", 200 + i);
		assert_int_equal(audit_flush(a, false), 0);
	}
	audit_seal_now(a);
	audit_free(a);
	chain_all(e->path, evs);
	assert_true(seals_check(evs, k0, kid) >= 5);
	assert_int_equal(audit_state_open(e->state, false, &dfd, &err), 0);
	snprintf(seal, sizeof(seal), "%s.seal", id);
	assert_int_equal(audit_seal_read(dfd, seal, &st, &err), 0);
	assert_int_equal(st.epoch, seals_check(evs, k0, kid));
	assert_string_equal(ev_name(evs, json_array_size(evs) - 1), "seal");
	/* every line and seal counted once, those adopted after the crash
	 * when they were written */
	assert_int_equal(metric("appliance_audit_lines_total"), json_array_size(evs));
	assert_int_equal(metric("appliance_audit_seals_total"), seals_check(evs, k0, kid));
	close(dfd);
	json_decref(evs);
}

static void test_a_torn_tail_is_ended_and_recorded(void **state)
{
	struct env *e = *state;
	json_t *evs = json_array();
	struct audit *a = open_ok(e);
	char *data, frag[64];
	size_t len, cut;
	struct appl_err err = {0};
	struct stat st;
	int fd;

	event(a, "x", 1);
	assert_int_equal(audit_flush(a, false), 0);
	assert_int_equal(stat(e->path, &st), 0);
	event(a, "x", 2);
	audit_free(a);
	/* Killed mid-write: the second line cut after 20 bytes, its batch
	 * announced and never recorded. */
	head_drop_newest(e);
	cut = (size_t)st.st_size + 20;
	assert_int_equal(appl_file_read(e->path, 1u << 20, &data, &len, &err), 0);
	memcpy(frag, data + st.st_size, 20);
	frag[20] = '\0';
	free(data);
	assert_int_equal(truncate(e->path, (off_t)cut), 0);
	a = open_ok(e);
	event(a, "x", 3);
	audit_free(a);
	/* Lines: log.open, x, the fragment, torn, x. */
	assert_int_equal(appl_file_read(e->path, 1u << 20, &data, &len, &err), 0);
	{
		char *fr = data + st.st_size, *torn = fr + 21;
		json_t *o;

		assert_memory_equal(fr, frag, 20);
		assert_int_equal(fr[20], '\n');
		o = json_loadb(torn, (size_t)(strchr(torn, '\n') - torn), 0, NULL);
		assert_string_equal(json_string_value(json_object_get(o, "ev")), "torn");
		assert_int_equal(json_integer_value(json_object_get(o, "bytes")), 21);
		assert_int_equal(json_integer_value(json_object_get(o, "n")), 3);
		json_decref(o);
		/* Without the fragment the rest is one chain. */
		memmove(fr, fr + 21, len - (size_t)st.st_size - 21);
		len -= 21;
		fd = open(e->path, O_WRONLY | O_TRUNC);
		assert_int_equal(appl_fd_write_all(fd, data, len), 0);
		close(fd);
	}
	free(data);
	assert_int_equal(chain_all(e->path, evs), 4);
	assert_string_equal(ev_name(evs, 2), "torn");
	json_decref(evs);
}

/* audit_open refuses e's log with code and why, and audit_check (what
 * `appliance check` asks) judges it the same, first. */
static void expect_refused(struct env *e, int code, const char *why)
{
	struct appl_err err = {0}, cerr = {0};
	struct audit *a;

	assert_int_equal(audit_check(&e->cfg, &cerr), code);
	a = audit_open(NULL, &e->cfg, &err);
	assert_null(a);
	assert_int_equal(err.code, code);
	if (!strstr(err.msg, why))
		fail_msg("\"%s\" does not say \"%s\"", err.msg, why);
	assert_string_equal(cerr.msg, err.msg);
}

static size_t entries(const char *dir)
{
	DIR *d = opendir(dir);
	size_t n = 0;

	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
	closedir(d);
	return n;
}

/* audit_check makes and writes nothing: not the log, not the state, not
 * the key; a log that could start passes, before and after a writer. */
static void test_check_judges_as_open_and_writes_nothing(void **state)
{
	struct env *e = *state;
	struct appl_err err = {0};
	struct audit *a;
	struct stat st, st2;

	assert_int_equal(audit_check(&e->cfg, &err), 0);
	assert_int_equal(entries(e->state), 0);
	assert_int_equal(access(e->path, F_OK), -1);
	a = open_ok(e);
	event(a, "x", 1);
	audit_free(a);
	assert_int_equal(stat(e->path, &st), 0);
	assert_int_equal(audit_check(&e->cfg, &err), 0);
	assert_int_equal(stat(e->path, &st2), 0);
	assert_int_equal(st.st_size, st2.st_size);
	/* a sealing policy without its key: both refuse, saying what to run */
	e->cfg.seal = true;
	expect_refused(e, -ENOKEY, "appliance audit init");
	e->cfg.seal = false;
	/* its directory gone */
	snprintf(e->path, sizeof(e->path), "%s/nowhere/audit.jsonl", e->dir);
	expect_refused(e, -ENOENT, "the audit log's directory");
}

/* A line that continues the chain after h, as anyone could write it. */
static void forged_append(struct env *e, const struct audit_head *h)
{
	char line[512];
	int fd = open(e->path, O_WRONLY | O_APPEND);

	snprintf(line, sizeof(line),
		 "{\"n\":%" PRIu64 ",\"prev\":\"%s\",\"t\":\"x\",\"ev\":\"x\",\"pid\":1}\n",
		 h->n + 1, h->hash);
	assert_int_equal(appl_fd_write_all(fd, line, strlen(line)), 0);
	close(fd);
}

static void test_a_cut_removed_or_foreign_log_is_refused(void **state)
{
	struct env *e = *state;
	struct audit *a = open_ok(e);
	struct stat st;
	struct audit_head h;

	for (int i = 0; i < 3; i++)
		event(a, "x", i);
	audit_free(a);
	assert_int_equal(stat(e->path, &st), 0);
	assert_int_equal(truncate(e->path, st.st_size - 5), 0);
	expect_refused(e, -ESTALE, "was cut");
	assert_int_equal(truncate(e->path, st.st_size), 0); /* same size, back */
	/* Lines that continue the chain, appended by someone who can write the
	 * file: no appliance announced them, so none takes them (a seal would
	 * cover them next). */
	head_get(e, &h);
	forged_append(e, &h);
	expect_refused(e, -EINVAL, "no appliance announced");
	assert_int_equal(truncate(e->path, st.st_size), 0);
	/* Announced, but other lines than those announced. */
	a = open_ok(e);
	event(a, "y", 0);
	audit_free(a);
	head_drop_newest(e);
	assert_int_equal(truncate(e->path, st.st_size), 0);
	forged_append(e, &h);
	expect_refused(e, -EINVAL, "not those announced");
	assert_int_equal(unlink(e->path), 0);
	expect_refused(e, -ENOENT, "was removed");
	assert_int_equal(access(e->path, F_OK), -1); /* never started again in its place */
}

/* Both slots of the head set to h (so neither older one is taken). */
static void head_set(struct env *e, struct audit_head *h)
{
	char id[AUDIT_ID_HEX], path[256];
	int fd;

	audit_state_id(e->path, id);
	snprintf(path, sizeof(path), "%s/audit/%s.head", e->state, id);
	assert_true((fd = open(path, O_RDWR)) >= 0);
	for (h->gen = 1000; h->gen < 1002; h->gen++)
		assert_int_equal(audit_head_write_fd(fd, h, false), 0);
	close(fd);
}

/* Made-up lines are longer than the writer's, so that the log reaches
 * past where the last seal ended. */
#define MADE_UP_PAD                                                                                \
	"................................................................................"         \
	"................................................................................"

/* What whoever took the host makes of a sealed log: the lines up to its
 * first seal kept, every later seal and every `drop` line removed, the
 * rest renumbered and rechained, lines made up until there are at least
 * `lines`, and the head rewritten to match. */
static void cut_after_first_seal(struct env *e, const char *drop, uint64_t lines)
{
	struct audit_head h = {.file = 1};
	json_t *evs = json_array();
	bool sealed = false;
	char *line;
	int fd;

	chain_all(e->path, evs);
	memset(h.hash, '0', AUDIT_HASH_HEX - 1);
	memcpy(h.pend_hash, h.hash, AUDIT_HASH_HEX);
	assert_true((fd = open(e->path, O_WRONLY | O_TRUNC)) >= 0);
	for (size_t i = 0; i < json_array_size(evs) || h.n < lines; i++) {
		json_t *o = i < json_array_size(evs)
				    ? json_incref(json_array_get(evs, i))
				    : json_pack("{si ss}", "made_up", (int)i, "pad", MADE_UP_PAD);
		const char *ev = json_string_value(json_object_get(o, "ev"));

		if (ev && sealed && (strcmp(ev, "seal") == 0 || strcmp(ev, drop) == 0)) {
			json_decref(o);
			continue;
		}
		sealed = sealed || (ev && strcmp(ev, "seal") == 0);
		json_object_set_new(o, "n", json_integer((json_int_t)++h.n));
		json_object_set_new(o, "prev", json_string(h.hash));
		line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		audit_line_hash(line, strlen(line), h.hash);
		assert_int_equal(appl_fd_write_all(fd, line, strlen(line)), 0);
		assert_int_equal(appl_fd_write_all(fd, "\n", 1), 0);
		h.bytes += strlen(line) + 1;
		free(line);
		json_decref(o);
	}
	close(fd);
	head_set(e, &h);
	json_decref(evs);
}

static void file_same(const char *path, const char *want, size_t want_len)
{
	struct appl_err err = {0};
	char *buf;
	size_t len;

	assert_int_equal(appl_file_read(path, 1u << 20, &buf, &len, &err), 0);
	assert_int_equal(len, want_len);
	assert_memory_equal(buf, want, len);
	free(buf);
}

/* A sealing state ahead of the log is a log cut back past its last
 * seal: the start is refused and nothing is written, where before the
 * appliance went on and sealed nothing until the log grew past the
 * state's count. */
static void test_a_log_cut_behind_its_sealing_state_is_refused(void **state)
{
	struct env *e = *state;
	unsigned char k0[AUDIT_KEY_BYTES];
	char kid[AUDIT_KID_HEX], *cut;
	struct appl_err err = {0};
	struct audit_head h;
	struct audit *a;
	size_t len;

	e->cfg.seal = true;
	e->cfg.seal_lines = 4;
	assert_int_equal(audit_seal_init(e->state, e->path, k0, kid, &err), 0);
	a = open_ok(e);
	for (int i = 0; i < 12; i++) {
		event(a, i % 3 ? "read" : "write_note", i);
		assert_int_equal(audit_flush(a, false), 0);
	}
	audit_seal_now(a);
	audit_free(a);
	head_get(e, &h);
	cut_after_first_seal(e, "write_note", 0);
	assert_int_equal(appl_file_read(e->path, 1u << 20, &cut, &len, &err), 0);
	expect_refused(e, -ESTALE,
		       "the audit log was cut: its sealing state records the seal of "
		       "epoch ");
	expect_refused(e, -ESTALE, ", and the log ends at line ");
	expect_refused(e, -ESTALE, "`appliance audit verify --key` names what is missing");
	file_same(e->path, cut, len); /* nothing written */
	free(cut);
	/* as many lines as before, or more: the state's last seal is not
	 * where it was */
	cut_after_first_seal(e, "write_note", h.n + 3);
	expect_refused(e, -ESTALE,
		       "and the log does not hold that seal where it was (file 1, "
		       "ending at byte ");
}

/* Idle, with nothing new to seal, a log is sealed all the same once
 * seal_s has passed since its last seal, so that the newest seal of a log
 * being written is never much older than that. */
static void test_an_idle_log_is_sealed_every_seal_s(void **state)
{
	struct env *e = *state;
	unsigned char k0[AUDIT_KEY_BYTES];
	char kid[AUDIT_KID_HEX], id[AUDIT_ID_HEX], name[AUDIT_ID_HEX + 8];
	struct audit_seal_state st;
	struct appl_err err = {0};
	json_t *evs = json_array();
	size_t lines;
	struct audit *a;
	int dfd;

	e->cfg.seal = true;
	assert_int_equal(audit_seal_init(e->state, e->path, k0, kid, &err), 0);
	a = open_ok(e);
	event(a, "x", 0);
	audit_seal_now(a);
	assert_int_equal(audit_flush(a, false), 0);
	lines = chain_all(e->path, NULL);
	audit_seal_now(a); /* nothing new, not due: nothing written */
	assert_int_equal(audit_flush(a, false), 0);
	assert_int_equal(chain_all(e->path, NULL), lines);
	/* seal_s (3600 s) since the last seal */
	audit_state_id(e->path, id);
	snprintf(name, sizeof(name), "%s.seal", id);
	assert_int_equal(audit_state_open(e->state, false, &dfd, &err), 0);
	assert_int_equal(audit_seal_read(dfd, name, &st, &err), 0);
	st.last_ms -= 3600 * 1000;
	assert_int_equal(audit_seal_write(dfd, name, &st, &err), 0);
	audit_seal_now(a); /* as the timer does */
	assert_int_equal(audit_flush(a, false), 0);
	assert_int_equal(chain_all(e->path, evs), lines + 1);
	assert_string_equal(ev_name(evs, lines), "seal");
	assert_string_equal(ev_name(evs, lines - 1), "seal");
	assert_int_equal(seals_check(evs, k0, kid), 3); /* at open, after x, idle */
	audit_free(a);
	close(dfd);
	json_decref(evs);
}

static void test_a_directory_others_can_write_is_refused(void **state)
{
	struct env *e = *state;

	assert_int_equal(chmod(e->dir, 0775), 0);
	expect_refused(e, -EPERM, "not be writable by group or others");
	assert_int_equal(chmod(e->dir, 01777), 0); /* sticky, as /tmp */
	audit_free(open_ok(e));
	assert_int_equal(chmod(e->dir, 0700), 0);
}

static void test_a_failed_write_leaves_nothing_and_the_log_resumes(void **state)
{
	struct env *e = *state;
	char away[128];
	json_t *evs = json_array(), *b = json_pack("{ss}", "what", "must not be written");
	struct audit *a;

	metrics_reset();
	a = open_ok(e);
	event(a, "before", 0);
	assert_int_equal(audit_flush(a, true), 0);
	snprintf(away, sizeof(away), "%s.away", e->path);
	assert_int_equal(rename(e->path, away), 0);
	event(a, "queued", 1);
	assert_true(audit_flush(a, false) < 0);
	assert_false(audit_ok(a));
	assert_non_null(strstr(audit_why(a), "removed"));
	/* A sync event that cannot be written is taken back. */
	assert_true(audit_event_sync(a, "sync", b) < 0);
	assert_int_equal(rename(away, e->path), 0);
	assert_int_equal(audit_flush(a, false), 0);
	assert_true(audit_ok(a));
	audit_free(a);
	assert_int_equal(chain_all(e->path, evs), 4);
	assert_int_equal(metric("appliance_audit_lines_total"), 4);
	assert_int_equal(metric("appliance_audit_write_failures_total"), 2);
	assert_int_equal(metric("appliance_audit_seals_total"), 0);
	assert_string_equal(ev_name(evs, 1), "before");
	assert_string_equal(ev_name(evs, 2), "resumed");
	assert_non_null(strstr(json_string_value(json_object_get(json_array_get(evs, 2), "error")),
			       "removed"));
	assert_string_equal(ev_name(evs, 3), "queued");
	json_decref(b);
	json_decref(evs);
}

static void test_a_head_both_slots_bad_is_refused(void **state)
{
	struct env *e = *state;
	char id[AUDIT_ID_HEX], head[256];
	int fd;

	audit_free(open_ok(e));
	audit_state_id(e->path, id);
	snprintf(head, sizeof(head), "%s/audit/%s.head", e->state, id);
	fd = open(head, O_WRONLY);
	for (int slot = 0; slot < 2; slot++) /* both slots fail their check */
		assert_int_equal(
			pwrite(fd, "appliance-audit-head 1 junk\n", 28, slot * AUDIT_HEAD_SLOT),
			28);
	close(fd);
	expect_refused(e, -EINVAL, "head");
}

static void test_head_slots_round_trip_and_a_torn_slot_falls_back(void **state)
{
	struct audit_head h = {.gen = 7, .file = 2, .n = 99, .bytes = 12345}, got;
	char buf[2 * AUDIT_HEAD_SLOT];
	(void)state;

	memset(h.hash, 'a', AUDIT_HASH_HEX - 1);
	h.hash[AUDIT_HASH_HEX - 1] = '\0';
	audit_head_encode(&h, buf + AUDIT_HEAD_SLOT); /* gen 7: slot 1 */
	h.gen = 6;
	h.n = 98;
	audit_head_encode(&h, buf);
	assert_int_equal(audit_head_parse(buf, sizeof(buf), &got), 0);
	assert_int_equal(got.gen, 7);
	assert_int_equal(got.n, 99);
	buf[AUDIT_HEAD_SLOT + 30] ^= 1; /* the newer slot torn */
	assert_int_equal(audit_head_parse(buf, sizeof(buf), &got), 0);
	assert_int_equal(got.gen, 6);
	buf[30] ^= 1;
	assert_int_equal(audit_head_parse(buf, sizeof(buf), &got), -EINVAL);
	assert_int_equal(audit_head_parse(buf, 0, &got), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_chain_across_opens_with_its_head, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_three_processes_make_one_chain, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation_names_the_previous_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation_killed_after_the_rename, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation_killed_after_making_the_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rotation_killed_after_writing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_seals_ratchet_and_survive_a_crash_before_the_ratchet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_log_cut_behind_its_sealing_state_is_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_idle_log_is_sealed_every_seal_s, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_torn_tail_is_ended_and_recorded, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_cut_removed_or_foreign_log_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_a_failed_write_leaves_nothing_and_the_log_resumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_judges_as_open_and_writes_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_directory_others_can_write_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_head_both_slots_bad_is_refused, setup,
						teardown),
		cmocka_unit_test(test_head_slots_round_trip_and_a_torn_slot_falls_back),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
