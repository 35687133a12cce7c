/* token_cmd.c: `appliance token` (see token_cmd.h). */
#include "token_cmd.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/fs.h"
#include "base/limits.h"
#include "cli.h"
#include "policy/policy.h"

/* The token's text: the prefix and base64url of the random bytes, no
 * padding (a bearer token is sent as it is, and '=' is one more thing a
 * client could strip). */
#define TOKEN_TEXT_MAX                                                                             \
	(sizeof(TOKEN_PREFIX) - 1 +                                                                \
	 sodium_base64_ENCODED_LEN(TOKEN_RANDOM_BYTES, sodium_base64_VARIANT_URLSAFE_NO_PADDING))

/* Both lines: the token, and the entry with two names and the hash. */
#define TOKEN_OUT_MAX (TOKEN_TEXT_MAX + 2 * APPL_POLICY_LABEL_MAX + 2 * POLICY_TOKEN_HASH_LEN + 64)

static const char help_text[] =
	"usage: appliance token NAME ROLE\n"
	"\n"
	"Make a bearer token for an HTTP client and print it, once, then the\n"
	"clients.tokens entry that gives it ROLE:\n"
	"\n"
	"  appliance_...\n"
	"  {\"name\": \"NAME\", \"sha256\": \"HEX\", \"role\": \"ROLE\"}\n"
	"\n"
	"The policy holds only the SHA-256 of the token, so the token cannot be\n"
	"shown again: hand it to the client now (it sends it as\n"
	"\"Authorization: Bearer TOKEN\"), put the entry in the policy and sign\n"
	"it. NAME and ROLE are [a-z][a-z0-9_-]*, at most 32 characters; NAME is\n"
	"what the audit log records, ROLE must be a role of the policy. Nothing\n"
	"is written to disk.\n"
	"\n"
	"options:\n"
	"  --help, -h  print this text\n"
	"\n"
	"exit status: 0 when the token was printed; 1 when it could not be\n"
	"written; 2 on a usage error (NAME or ROLE not a name a policy takes).\n";

void token_help(void)
{
	fputs(help_text, stdout);
}

/* The policy's own rule for role and client names, so an entry printed here
 * is one the policy takes. The name is quoted cut, its control characters
 * replaced (appl_err_set does both). */
static int name_check(const char *what, const char *s)
{
	struct appl_err err = {0};

	if (policy_label_valid(s, strlen(s)))
		return 0;
	appl_err_set(&err, -EINVAL,
		     "%s \"%.*s\": names are [a-z][a-z0-9_-]*, at most %d characters", what,
		     APPL_POLICY_LABEL_MAX + 8, s, APPL_POLICY_LABEL_MAX);
	return cli_usage_cmd("token", err.msg);
}

/* Make the token and both lines in out (sodium memory: locked, kept out of
 * core dumps, wiped when freed). Returns the length written. */
static size_t token_make(char *out, const char *name, const char *role)
{
	unsigned char raw[TOKEN_RANDOM_BYTES], hash[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	size_t plen = sizeof(TOKEN_PREFIX) - 1, tlen;
	int n;

	memcpy(out, TOKEN_PREFIX, plen);
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(out + plen, TOKEN_OUT_MAX - plen, raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	tlen = strlen(out);
	/* The hash of the text exactly as the client sends it, which is what
	 * the server hashes before policy_token_match. */
	crypto_hash_sha256(hash, (const unsigned char *)out, tlen);
	sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
	n = snprintf(out + tlen, TOKEN_OUT_MAX - tlen,
		     "\n{\"name\": \"%s\", \"sha256\": \"%s\", \"role\": \"%s\"}\n", name, hex,
		     role);
	return n > 0 && (size_t)n < TOKEN_OUT_MAX - tlen ? tlen + (size_t)n : 0;
}

int cmd_token(int argc, char **argv)
{
	char *out;
	size_t len;
	int rc;

	if (cli_help_wanted(argc, argv, NULL))
		return cli_help_print(help_text);
	if (argc != 3)
		return cli_usage_cmd("token", "needs NAME and ROLE");
	if ((rc = name_check("NAME", argv[1])) != 0 || (rc = name_check("ROLE", argv[2])) != 0)
		return rc;
	out = sodium_malloc(TOKEN_OUT_MAX);
	if (!out) {
		fprintf(stderr, "appliance: token: out of memory\n");
		return 1;
	}
	len = token_make(out, argv[1], argv[2]);
	/* Written past stdio, so no copy of the token stays in its buffer. */
	rc = len ? appl_fd_write_all(STDOUT_FILENO, out, len) : -EOVERFLOW;
	sodium_free(out);
	if (rc < 0) {
		fprintf(stderr, "appliance: token: writing the token: %s\n", strerror(-rc));
		return 1;
	}
	fprintf(stderr, "appliance: token: the token is shown only now; the policy keeps only its "
			"SHA-256\n");
	return 0;
}
