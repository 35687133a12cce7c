/* fuzz_audit_adopt.c: the audit writer (pkg/audit/adopt.c, through
 * audit_open) opening a log whose bytes past the recorded head are
 * hostile: what a dead writer left, or what someone who can write the
 * file put there.
 *
 * Input: the bytes past the head. The log holds a log.open line, the head
 * records it and announces a batch of exactly the input's length, ending
 * in the hash of the input's last line, so the writer reads every byte
 * (adoption, torn lines, seal lines of its own key). Besides ASan/UBSan
 * findings it traps when an open succeeds on a file that does not then
 * hold one chain ending where the head says, or fails without a message.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/audit.h"
#include "base/fs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], state[96], path[128], headp[256];
static char first[AUDIT_LINE_MAX];
static size_t first_len;

static void check(int ok)
{
	if (!ok)
		__builtin_trap();
}

static void setup(void)
{
	struct audit_config cfg = {0};
	struct appl_err err = {0};
	char id[AUDIT_ID_HEX], *buf;
	size_t len;
	struct audit *a;

	if (dir[0])
		return;
	check(sodium_init() >= 0);
	snprintf(dir, sizeof(dir), "/tmp/fuzz-audit-adopt.XXXXXX");
	check(mkdtemp(dir) != NULL);
	snprintf(state, sizeof(state), "%s/state", dir);
	snprintf(path, sizeof(path), "%s/audit.log", dir);
	check(mkdir(state, 0700) == 0);
	cfg = (struct audit_config){.path = path,
				    .state_dir = state,
				    .seal_lines = 1000,
				    .seal_s = 3600,
				    .rotate_bytes = 1u << 30};
	a = audit_open(NULL, &cfg, &err); /* log.open, and the head */
	check(a != NULL);
	audit_free(a);
	check(appl_file_read(path, sizeof(first), &buf, &len, &err) == 0);
	memcpy(first, buf, len);
	first_len = len;
	free(buf);
	audit_state_id(path, id);
	snprintf(headp, sizeof(headp), "%s/audit/%s.head", state, id);
}

/* The hash of the last whole line of data, or "" when it has none. */
static void last_hash(const uint8_t *data, size_t size, char out[AUDIT_HASH_HEX])
{
	const uint8_t *end = data + size, *nl = NULL, *start;

	for (const uint8_t *p = data; p < end; p++)
		if (*p == '\n')
			nl = p;
	memset(out, '0', AUDIT_HASH_HEX - 1);
	out[AUDIT_HASH_HEX - 1] = '\0';
	if (!nl)
		return;
	for (start = nl; start > data && start[-1] != '\n'; start--)
		;
	audit_line_hash((const char *)start, (size_t)(nl - start), out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct audit_config cfg = {.path = path,
				   .state_dir = state,
				   .seal_lines = 1000,
				   .seal_s = 3600,
				   .rotate_bytes = 1u << 30};
	struct appl_err err = {0};
	struct audit_head h = {.gen = 2, .file = 1, .n = 1};
	struct audit *a;
	struct stat st;
	int fd;

	setup();
	if (size > 1u << 16)
		return 0;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0);
	check(appl_fd_write_all(fd, first, first_len) == 0);
	check(size == 0 || appl_fd_write_all(fd, data, size) == 0);
	close(fd);
	audit_line_hash(first, first_len - 1, h.hash);
	h.bytes = first_len;
	h.pend_file = 1;
	h.pend_bytes = first_len + size;
	last_hash(data, size, h.pend_hash);
	fd = open(headp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	check(fd >= 0 && audit_head_write_fd(fd, &h, false) == 0);
	close(fd);
	a = audit_open(NULL, &cfg, &err);
	if (!a) {
		check(err.msg[0] != '\0');
		return 0;
	}
	audit_event(a, "x", NULL);
	check(audit_flush(a, false) == 0);
	audit_free(a);
	/* What the head now records is where the file ends. */
	fd = open(headp, O_RDONLY | O_CLOEXEC);
	check(fd >= 0 && audit_head_read_fd(fd, &h) == 0);
	close(fd);
	check(stat(path, &st) == 0 && (uint64_t)st.st_size == h.bytes && h.pend_file == 0);
	return 0;
}
