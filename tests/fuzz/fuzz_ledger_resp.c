/* fuzz_ledger_resp.c: the check of a Redis server's bytes
 * (pkg/ledger/resp.c) on arbitrary streams. The first byte says how the
 * stream is cut into chunks, so a reply split anywhere is tried; the
 * count of replies must not depend on the cut, and a refusal must be one
 * whatever the cut. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The replies in buf[0..len) scanned in chunks of step bytes (0: whole):
 * their count, or -1 when refused. */
static long scan(const char *buf, size_t len, size_t step)
{
	struct ledger_resp s;
	size_t total = 0;
	const char *why = NULL;

	ledger_resp_init(&s);
	for (size_t off = 0; off < len;) {
		size_t n = step && step < len - off ? step : len - off, done = 0;

		if (ledger_resp_scan(&s, buf + off, n, &done, &why) != 0) {
			if (!why)
				__builtin_trap();
			return -1;
		}
		total += done;
		off += n;
	}
	return (long)total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	long whole, cut;

	if (size < 1)
		return 0;
	whole = scan((const char *)data + 1, size - 1, 0);
	cut = scan((const char *)data + 1, size - 1, (size_t)data[0] % 17 + 1);
	if (whole != cut)
		__builtin_trap();
	return 0;
}
