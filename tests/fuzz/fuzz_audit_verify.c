/* fuzz_audit_verify.c: the audit log's checker and printer
 * (pkg/audit/verify*.c, show.c) on hostile files.
 *
 * Input: a mode byte, then bytes cut at the first "\xff\xfd" (never in
 * UTF-8 text): what follows it is the head file (--head); without it the
 * head is /dev/null (none). What comes before is cut at the first
 * "\xff\xfe": before it audit.log.1, after it audit.log, which is checked
 * (without one, audit.log alone). Mode bit 0: the seals are checked with
 * the fixed key the seed corpus is sealed with; bit 1: a state directory
 * is given; bit 2: the head goes into that state as audit.log's ID.head
 * (with an ID.lock) rather than --head; bit 3: audit.log.1 is the file
 * checked (a rotated file, judged by audit.log's head). The head part may
 * hold "\xff\xfc": what follows is a sealing state, the state's ID.seal
 * with bit 4, else --seal; the clock is fixed, an hour after the seed
 * corpus's first line. Besides ASan/UBSan findings it traps when a
 * result breaks the contract of verify.h: a code other than 0, 1 or a
 * negative one with a message; a problem reported on more than one line;
 * or anything printed that is not printable text, from verify or show.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/verify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], state[96], path[128], path1[128], head[128], shead[256], slock[256];
static char seal[128], sseal[256];

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

static void setup(void)
{
	char id[AUDIT_ID_HEX];
	int fd;

	if (dir[0])
		return;
	check(sodium_init() >= 0);
	snprintf(dir, sizeof(dir), "/tmp/fuzz-audit.XXXXXX");
	check(mkdtemp(dir) != NULL);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(path, sizeof(path), "%s/audit.log", dir);
	snprintf(path1, sizeof(path1), "%s/audit.log.1", dir);
	snprintf(head, sizeof(head), "%s/head", dir);
	snprintf(seal, sizeof(seal), "%s/seal", dir);
	check(audit_state_open(state, true, &fd, NULL) == 0);
	close(fd);
	audit_state_id(path, id);
	snprintf(shead, sizeof(shead), "%s/audit/%s.head", state, id);
	snprintf(slock, sizeof(slock), "%s/audit/%s.lock", state, id);
	snprintf(sseal, sizeof(sseal), "%s/audit/%s.seal", state, id);
}

static void put(const char *p, const uint8_t *b, size_t n)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	check(fd >= 0);
	check(n == 0 || write(fd, b, n) == (ssize_t)n);
	close(fd);
}

/* Printable text, lines ending in '\n' (UTF-8 from the log passes). */
static void printable(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		check(s[i] == '\n' || ((unsigned char)s[i] >= 0x20 && s[i] != 0x7f));
	check(len == 0 || s[len - 1] == '\n');
}

static void verify_once(const char *file, const struct audit_verify_opts *o)
{
	struct appl_err err = {0};
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	int rc;

	check(f != NULL);
	rc = audit_verify(file, o, f, &err);
	fclose(f);
	check(rc == 0 || rc == 1 || (rc < 0 && err.msg[0]));
	printable(out, len);
	if (rc == 1)
		check(len > 0 && memchr(out, '\n', len) == out + len - 1);
	if (rc == 0)
		check(strstr(out, "chain intact") != NULL);
	free(out);
}

static void show_once(void)
{
	struct appl_err err = {0};
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	check(f != NULL);
	check(audit_show(path, f, &err) == 0);
	fclose(f);
	printable(out, len);
	free(out);
	out = NULL;
	len = 0;
	f = open_memstream(&out, &len);
	check(f != NULL);
	check(audit_show_runs(path, f, &err) == 0);
	fclose(f);
	printable(out, len);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned char key[1][AUDIT_KEY_BYTES] = {{
		7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
		7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
	}};
	struct audit_verify_opts o = {.now_ms = 1796137200000};
	const uint8_t *h, *r, *sl = NULL;
	uint8_t mode;
	size_t logs, hlen = 0;

	if (size < 1)
		return 0;
	setup();
	mode = data[0];
	o.keys = mode & 1 ? key : NULL;
	o.nkeys = mode & 1 ? 1 : 0;
	o.state_dir = mode & 2 ? state : NULL;
	data++, size--;
	h = memmem(data, size, "\xff\xfd", 2);
	logs = h ? (size_t)(h - data) : size;
	unlink(shead);
	unlink(slock);
	unlink(sseal);
	if (h) {
		hlen = size - logs - 2;
		sl = memmem(h + 2, hlen, "\xff\xfc", 2);
	}
	if (sl) {
		put(mode & 16 ? sseal : seal, sl + 2, hlen - (size_t)(sl - h - 2) - 2);
		o.seal_file = mode & 16 ? NULL : seal;
		hlen = (size_t)(sl - h - 2);
	}
	if (h && (mode & 4)) {
		put(shead, h + 2, hlen);
		put(slock, NULL, 0);
		o.state_dir = state;
	} else if (h) {
		put(head, h + 2, hlen);
		o.head_file = head;
	} else {
		o.head_file = "/dev/null";
	}
	r = memmem(data, logs, "\xff\xfe", 2);
	if (r) {
		put(path1, data, (size_t)(r - data));
		put(path, r + 2, logs - (size_t)(r - data) - 2);
	} else {
		unlink(path1);
		put(path, data, logs);
	}
	verify_once(r && (mode & 8) ? path1 : path, &o);
	show_once();
	return 0;
}
