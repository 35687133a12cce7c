/* fuzz_signature.c: the signature, public key, secret key and trusted
 * comment parsers (pkg/policy/minisign.c) on arbitrary bytes. Every parser
 * sees every input; what parses must hold its invariants, and a parsed
 * signature is also run through verification against a fixed key. */
#include <sodium.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "policy/minisign.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the appliance's main does before any command: the verification and
 * secret key code relies on it. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (sodium_init() < 0)
		__builtin_trap();
	return 0;
}

static void sig_case(const char *buf, size_t size)
{
	static const struct policy_pubkey key = {.keyid = {1, 2, 3, 4, 5, 6, 7, 8}};
	struct appl_err err = {0};
	struct policy_sig sig;
	struct policy_comment tc;

	if (policy_sig_parse(buf, size, &sig, &err) != 0)
		return;
	if (sig.comment_len > APPL_TRUSTED_COMMENT_MAX || sig.comment[sig.comment_len] != '\0' ||
	    memchr(sig.comment, '\n', sig.comment_len))
		__builtin_trap();
	policy_sig_verify(&sig, &key, buf, size, &err);
	if (policy_comment_parse(sig.comment, sig.comment_len, &tc, &err) == 0 &&
	    (tc.file[0] == '\0' || strchr(tc.file, '/') || strchr(tc.file, ' ')))
		__builtin_trap();
}

static void pubkey_case(const char *buf, size_t size)
{
	struct appl_err err = {0};
	struct policy_pubkey pk, back;
	char text[APPL_KEY_FILE_MAX];
	size_t len;

	if (policy_pubkey_parse(buf, size, &pk, &err) != 0)
		return;
	/* what parses formats back to something that parses to the same key */
	if (policy_pubkey_format(&pk, text, sizeof(text), &len, &err) != 0 ||
	    policy_pubkey_parse(text, len, &back, &err) != 0 || memcmp(&pk, &back, sizeof(pk)) != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct appl_err err = {0};
	struct policy_seckey *sk = NULL;
	struct policy_comment tc;
	int64_t t;

	sig_case(buf, size);
	pubkey_case(buf, size);
	if (policy_seckey_parse(buf, size, &sk, &err) == 0)
		policy_seckey_free(sk);
	policy_comment_parse(buf, size, &tc, &err);
	policy_sig_time_parse(buf, size, &t);
	return 0;
}
