/* state.c: a 2026-07-28 requestState, made and read (see internal.h,
 * "state.c"). Pure: the key, the client and the code digest come from the
 * caller, and nothing is looked up before the MAC holds. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "mcp/internal.h"

#define STATE_VERSION 2u
#define STATE_LABEL   "appliance-request-state 2"
#define STATE_MAC     32u
#define STATE_HEAD    (1u + MCP_STATE_NONCE + MCP_STATE_CHAIN + 8u + 1u)
#define STATE_Q_MIN   (32u + 1u + 1u) /* a question: bind, what became of it, key length */

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (56 - 8 * i));
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* The MAC over the state's bytes, the client that must present it and the
 * digest of the code it must come with. */
static void mac_of(const unsigned char *raw, size_t len, const unsigned char key[32],
		   const char *client, const unsigned char code[32], unsigned char out[STATE_MAC])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, key, 32, STATE_MAC);
	crypto_generichash_update(&st, (const unsigned char *)STATE_LABEL, sizeof(STATE_LABEL));
	crypto_generichash_update(&st, raw, len);
	crypto_generichash_update(&st, (const unsigned char *)client, strlen(client) + 1);
	crypto_generichash_update(&st, code, 32);
	crypto_generichash_final(&st, out, STATE_MAC);
}

int mcp_state_encode(const struct mcp_state *st, const unsigned char key[32], const char *client,
		     const unsigned char code[32], char *text, size_t cap)
{
	unsigned char raw[MCP_STATE_RAW_MAX];
	size_t n = STATE_HEAD;

	if (st->n > MCP_STATE_Q_MAX)
		return -E2BIG;
	raw[0] = STATE_VERSION;
	memcpy(raw + 1, st->nonce, MCP_STATE_NONCE);
	memcpy(raw + 1 + MCP_STATE_NONCE, st->chain, MCP_STATE_CHAIN);
	put64(raw + 1 + MCP_STATE_NONCE + MCP_STATE_CHAIN, st->expires_ms);
	raw[STATE_HEAD - 1] = (unsigned char)st->n;
	for (size_t i = 0; i < st->n; i++) {
		const struct mcp_state_q *q = &st->q[i];
		size_t kl = strnlen(q->key, sizeof(q->key));

		if (kl == 0 || kl >= sizeof(q->key) || q->was > MCP_STATE_DECLINED)
			return -EINVAL;
		memcpy(raw + n, q->bind, 32);
		raw[n + 32] = q->was;
		raw[n + 33] = (unsigned char)kl;
		memcpy(raw + n + 34, q->key, kl);
		n += 34 + kl;
	}
	mac_of(raw, n, key, client, code, raw + n);
	n += STATE_MAC;
	if (cap < sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_URLSAFE_NO_PADDING))
		return -ENOBUFS;
	sodium_bin2base64(text, cap, raw, n, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return 0;
}

/* The questions of raw[STATE_HEAD..end): each well formed, keys printable
 * and unique (a duplicate would let one answer stand for two questions). */
static int questions_read(const unsigned char *raw, size_t end, struct mcp_state *out)
{
	size_t n = STATE_HEAD;

	for (size_t i = 0; i < out->n; i++) {
		struct mcp_state_q *q = &out->q[i];
		size_t kl;

		if (end - n < STATE_Q_MIN || raw[n + 32] > MCP_STATE_DECLINED)
			return -EINVAL;
		kl = raw[n + 33];
		if (kl == 0 || kl >= sizeof(q->key) || end - n - STATE_Q_MIN < kl)
			return -EINVAL;
		memcpy(q->bind, raw + n, 32);
		q->was = raw[n + 32];
		memcpy(q->key, raw + n + 34, kl);
		q->key[kl] = '\0';
		for (size_t k = 0; k < kl; k++)
			if (q->key[k] <= 0x20 || q->key[k] >= 0x7f)
				return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (strcmp(out->q[j].key, q->key) == 0)
				return -EINVAL;
		n += STATE_Q_MIN + kl;
	}
	return n == end ? 0 : -EINVAL;
}

int mcp_state_decode(const char *text, size_t len, const unsigned char key[32], const char *client,
		     const unsigned char code[32], struct mcp_state *out)
{
	unsigned char raw[MCP_STATE_RAW_MAX], mac[STATE_MAC];
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	/* the size first: nothing longer than the largest state is decoded */
	if (len > MCP_STATE_TEXT_MAX ||
	    sodium_base642bin(raw, sizeof(raw), text, len, NULL, &n, NULL,
			      sodium_base64_VARIANT_URLSAFE_NO_PADDING) < 0 ||
	    n < STATE_HEAD + STATE_MAC || raw[0] != STATE_VERSION)
		return -EINVAL;
	n -= STATE_MAC;
	/* then the MAC, over the bytes as they came: nothing in them is
	 * believed (the nonce looked up, a bind trusted) before it holds */
	mac_of(raw, n, key, client, code, mac);
	if (sodium_memcmp(mac, raw + n, STATE_MAC) != 0)
		return -EACCES;
	memcpy(out->nonce, raw + 1, MCP_STATE_NONCE);
	memcpy(out->chain, raw + 1 + MCP_STATE_NONCE, MCP_STATE_CHAIN);
	out->expires_ms = get64(raw + 1 + MCP_STATE_NONCE + MCP_STATE_CHAIN);
	out->n = raw[STATE_HEAD - 1];
	if (out->n > MCP_STATE_Q_MAX)
		return -EINVAL;
	return questions_read(raw, n, out);
}

void mcp_state_claim_key(const unsigned char chain[MCP_STATE_CHAIN], const unsigned char bind[32],
			 unsigned char out[32])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, 32);
	crypto_generichash_update(&st, (const unsigned char *)"appliance-claim 1",
				  sizeof("appliance-claim 1"));
	crypto_generichash_update(&st, chain, MCP_STATE_CHAIN);
	crypto_generichash_update(&st, bind, 32);
	crypto_generichash_final(&st, out, 32);
}
