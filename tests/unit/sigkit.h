/* sigkit.h: helpers for the policy signature tests (test_minisign.c,
 * test_trust.c, test_state.c, test_load.c). Included after cmocka.h. */
#ifndef APPL_TESTS_SIGKIT_H
#define APPL_TESTS_SIGKIT_H

#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

#define KIT_UNUSED __attribute__((unused))

/* The group setup of every test that includes this: the library relies on
 * its process having initialised libsodium (cmd/appliance's main does), so
 * a test process does it before its first test. */
KIT_UNUSED static int kit_sodium_setup(void **state)
{
	(void)state;
	return sodium_init() < 0 ? -1 : 0;
}

/* A key made with libsodium directly, so tests can sign what our own
 * signer never would (another algorithm, any comment). */
struct kit_key {
	unsigned char keyid[8];
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	unsigned char sk[crypto_sign_SECRETKEYBYTES];
};

KIT_UNUSED static void kit_key_new(struct kit_key *k)
{
	assert_int_equal(sodium_init() < 0, 0);
	randombytes_buf(k->keyid, sizeof(k->keyid));
	assert_int_equal(crypto_sign_keypair(k->pk, k->sk), 0);
}

/* A public key file for k. */
KIT_UNUSED static size_t kit_pub_text(const struct kit_key *k, char *out, size_t len)
{
	unsigned char raw[42];
	char b64[sodium_base64_ENCODED_LEN(42, sodium_base64_VARIANT_ORIGINAL)];
	int n;

	memcpy(raw, "Ed", 2);
	memcpy(raw + 2, k->keyid, 8);
	memcpy(raw + 10, k->pk, 32);
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw), sodium_base64_VARIANT_ORIGINAL);
	n = snprintf(out, len, "untrusted comment: test key\n%s\n", b64);
	assert_true(n > 0 && (size_t)n < len);
	return (size_t)n;
}

/* A signature file over msg by k with algorithm alg ("ED" hashes the
 * message first, anything else signs it as it is) and trusted comment tc. */
KIT_UNUSED static size_t kit_forge(char *out, size_t len, const char *alg, const struct kit_key *k,
				   const void *msg, size_t msg_len, const char *tc)
{
	unsigned char raw[74], hash[64], global[64], covered[64 + 1024];
	char b64a[sodium_base64_ENCODED_LEN(74, sodium_base64_VARIANT_ORIGINAL)];
	char b64b[sodium_base64_ENCODED_LEN(64, sodium_base64_VARIANT_ORIGINAL)];
	size_t tc_len = strlen(tc);
	int n;

	assert_true(tc_len <= 1024);
	memcpy(raw, alg, 2);
	memcpy(raw + 2, k->keyid, 8);
	if (memcmp(alg, "ED", 2) == 0) {
		assert_int_equal(crypto_generichash(hash, 64, msg, msg_len, NULL, 0), 0);
		assert_int_equal(crypto_sign_detached(raw + 10, NULL, hash, 64, k->sk), 0);
	} else {
		assert_int_equal(crypto_sign_detached(raw + 10, NULL, msg, msg_len, k->sk), 0);
	}
	memcpy(covered, raw + 10, 64);
	memcpy(covered + 64, tc, tc_len);
	assert_int_equal(crypto_sign_detached(global, NULL, covered, 64 + tc_len, k->sk), 0);
	sodium_bin2base64(b64a, sizeof(b64a), raw, sizeof(raw), sodium_base64_VARIANT_ORIGINAL);
	sodium_bin2base64(b64b, sizeof(b64b), global, sizeof(global),
			  sodium_base64_VARIANT_ORIGINAL);
	n = snprintf(out, len, "untrusted comment: forged\n%s\ntrusted comment: %s\n%s\n", b64a, tc,
		     b64b);
	assert_true(n > 0 && (size_t)n < len);
	return (size_t)n;
}

/* A new private directory under /tmp (its parents: root-owned, sticky /tmp). */
KIT_UNUSED static char *kit_tmpdir(void)
{
	char *dir = strdup("/tmp/appl-sigtest.XXXXXX");

	assert_non_null(dir);
	assert_non_null(mkdtemp(dir));
	return dir;
}

KIT_UNUSED static void kit_tmpdir_free(char *dir)
{
	appl_tree_remove(dir);
	free(dir);
}

/* dir/name, in a static buffer of four rotating slots. */
KIT_UNUSED static const char *kit_path(const char *dir, const char *name)
{
	static char buf[4][4096];
	static unsigned slot;
	char *out = buf[slot++ % 4];

	assert_int_equal(appl_path_join(out, 4096, dir, "/", name), 0);
	return out;
}

KIT_UNUSED static void kit_write(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

/* A minimal valid policy (policy/README.md) with this serial and expiry. */
KIT_UNUSED static size_t kit_policy(char *out, size_t len, uint64_t serial, const char *expires)
{
	int n = snprintf(out, len,
			 "{\"policy_version\": 1, \"serial\": %" PRIu64 ", \"expires\": \"%s\",\n"
			 " \"image\": {\"layout\": \"image\", \"digest\": \"sha256:%064d\"}}\n",
			 serial, expires, 0);

	assert_true(n > 0 && (size_t)n < len);
	return (size_t)n;
}

#endif
