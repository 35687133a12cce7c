/* fuzz_state.c: the requestState reader (pkg/mcp/state.c) on arbitrary
 * text, and on arbitrary state bytes given a valid MAC (so the reading of
 * the questions past the MAC is reached). What decodes must hold its
 * invariants and encode back to the same text. */
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mcp/internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned char key[32] = {7, 7, 7};
static const unsigned char code[32] = {1, 2, 3};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (sodium_init() < 0)
		__builtin_trap();
	return 0;
}

/* What a decoded state must hold, and that it is written back the same. */
static void check(const struct mcp_state *st, const char *text, size_t len)
{
	static char again[MCP_STATE_TEXT_MAX + 1];

	if (st->n > MCP_STATE_Q_MAX)
		__builtin_trap();
	for (size_t i = 0; i < st->n; i++) {
		size_t kl = strnlen(st->q[i].key, sizeof(st->q[i].key));

		if (kl == 0 || kl >= sizeof(st->q[i].key) || st->q[i].was > MCP_STATE_DECLINED)
			__builtin_trap();
	}
	if (mcp_state_encode(st, key, "fuzz", code, again, sizeof(again)) != 0 ||
	    strlen(again) != len || memcmp(again, text, len) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mcp_state st;
	static unsigned char raw[MCP_STATE_RAW_MAX + 64];
	static char text[MCP_STATE_TEXT_MAX + 128];
	crypto_generichash_state h;

	if (mcp_state_decode((const char *)data, size, key, "fuzz", code, &st) == 0)
		check(&st, (const char *)data, size);
	/* the bytes as a state's body, MACed as the writer does */
	if (size + 32 > sizeof(raw))
		return 0;
	memcpy(raw, data, size);
	crypto_generichash_init(&h, key, 32, 32);
	crypto_generichash_update(&h, (const unsigned char *)"appliance-request-state 2",
				  sizeof("appliance-request-state 2"));
	crypto_generichash_update(&h, raw, size);
	crypto_generichash_update(&h, (const unsigned char *)"fuzz", 5);
	crypto_generichash_update(&h, code, 32);
	crypto_generichash_final(&h, raw + size, 32);
	sodium_bin2base64(text, sizeof(text), raw, size + 32,
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	if (mcp_state_decode(text, strlen(text), key, "fuzz", code, &st) == 0)
		check(&st, text, strlen(text));
	return 0;
}
