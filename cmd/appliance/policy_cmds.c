/* policy_cmds.c: keygen, sign and verify: argument parsing and printing
 * only; the work is in pkg/policy (docs/signing.md). */
#include "policy_cmds.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/err.h"
#include "cli.h"
#include "policy/load.h"
#include "policy/minisign.h"
#include "policy/notes.h"
#include "policy/serial.h"
#include "policy/state.h"
#include "policy/trust.h"

static void time_text(int64_t t, char out[POLICY_TIME_STR])
{
	if (policy_sig_time_format(t, out, POLICY_TIME_STR) < 0)
		snprintf(out, POLICY_TIME_STR, "%" PRId64, t);
}

static const char keygen_help_text[] =
	"usage: appliance keygen --public FILE --secret FILE\n"
	"\n"
	"Make an Ed25519 signing key pair in minisign's format and print its key\n"
	"id. The public key (mode 0644) is the one to install in the trust\n"
	"directory, /etc/appliance/trusted.d, owned by root; the secret key is\n"
	"written unencrypted, mode 0600: keep it offline. Neither file may exist\n"
	"already: an old key is never replaced.\n"
	"\n"
	"options:\n"
	"  --public FILE  where to write the public key\n"
	"  --secret FILE  where to write the secret key\n"
	"  --help, -h     print this text\n"
	"\n"
	"exit status: 0 when both files were written; 1 when they were not (one\n"
	"line on stderr saying why); 2 on a usage error.\n";

static const char sign_help_text[] =
	"usage: appliance sign --secret FILE [--serial now|next|N] POLICY\n"
	"\n"
	"Sign the policy document POLICY into POLICY.sig, a minisign signature\n"
	"whose trusted comment holds the file's name, the policy's serial and the\n"
	"time of signing (now). The policy must parse; one that has expired is\n"
	"signed all the same, with a warning. Warns on stderr about what can be\n"
	"seen offline: no default role and no token, a role that can call\n"
	"nothing, a tools entry no role can use.\n"
	"\n"
	"With --serial, the policy's top-level serial is first rewritten in\n"
	"POLICY (only its digits change; the file is replaced atomically and\n"
	"keeps its mode): now is the seconds since 1970 UTC, or the file's serial\n"
	"+ 1 where that is higher, so two signings in one second never share a\n"
	"serial; next is the file's serial + 1; N is that number.\n"
	"\n"
	"options:\n"
	"  --secret FILE  the secret key to sign with (not readable by group or others)\n"
	"  --serial now|next|N\n"
	"                 write this serial into POLICY before signing it\n"
	"  --help, -h     print this text\n"
	"\n"
	"exit status: 0 when POLICY.sig was written (warnings or not); 1 when it\n"
	"was not (one line on stderr saying why); 2 on a usage error.\n";

static const char verify_help_text[] =
	"usage: appliance verify [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR]\n"
	"                        POLICY.sig\n"
	"\n"
	"Check a signed policy as run would, without changing anything: the\n"
	"signature and its trusted comment, the policy itself, its expiry and the\n"
	"rollback floor of its deployment. Prints the key id, serial, deployment,\n"
	"signing and expiry times, and the highest serial accepted so far. The\n"
	"policy is the file POLICY.sig was made from, beside it without .sig.\n"
	"\n"
	"options:\n"
	"  --trust PUBKEY   check with this one public key instead of a trust directory\n"
	"  --trust-dir DIR  check with the keys in DIR (default /etc/appliance/trusted.d)\n"
	"  --state-dir DIR  an ordinary user's rollback state (refused as root)\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when the policy would be accepted; 1 when it would be\n"
	"refused (one line on stderr saying why); 2 on a usage error.\n";

void keygen_help(void)
{
	fputs(keygen_help_text, stdout);
}

void sign_help(void)
{
	fputs(sign_help_text, stdout);
}

void verify_help(void)
{
	fputs(verify_help_text, stdout);
}

/* ---- keygen --------------------------------------------------------------- */

int cmd_keygen(int argc, char **argv)
{
	static const struct option opts[] = {
		{"public", required_argument, NULL, 'p'},
		{"secret", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	const char *pub = NULL, *sec = NULL;
	struct appl_err err = {0};
	struct policy_pubkey pk;
	char hex[POLICY_KEYID_HEX];
	int c;

	if (cli_help_wanted(argc, argv, opts))
		return cli_help_print(keygen_help_text);
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("keygen", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			pub = optarg;
		else if (c == 's')
			sec = optarg;
		else
			return cli_usage_cmd("keygen", "unknown option");
	}
	if (!pub || !sec || optind != argc)
		return cli_usage_cmd("keygen", "needs --public FILE and --secret FILE");
	if (policy_keypair_write(pub, sec, &pk, &err) < 0)
		return cli_fail_cmd("keygen", &err);
	policy_keyid_hex(pk.keyid, hex);
	printf("key id %s\npublic key %s\nsecret key %s (unencrypted: keep it offline)\n", hex, pub,
	       sec);
	return 0;
}

/* ---- sign ----------------------------------------------------------------- */

static int sign_report(const char *sig_path, const struct policy_verified *info, int64_t now)
{
	char expires[POLICY_TIME_STR];

	time_text(info->expires, expires);
	printf("signed %s\nkey id %s\nserial %" PRIu64 "\nexpires %s\n", sig_path, info->keyid_hex,
	       info->serial, expires);
	if (info->expires <= now)
		fprintf(stderr,
			"appliance: sign: warning: the policy expired at %s; the "
			"appliance will refuse it\n",
			expires);
	return 0;
}

static void sign_note(void *data, enum policy_note kind, const char *text)
{
	(void)data;
	(void)kind;
	fprintf(stderr, "appliance: sign: warning: %s\n", text);
}

/* What can be seen without the servers: a policy under which nobody can
 * call anything is signed all the same (an administrator may stage one),
 * but not silently. The bytes judged are the ones just signed. */
static void sign_warn(const char *policy_path, const struct policy_verified *info)
{
	struct appl_err err = {0};

	if (policy_notes_check(policy_path, info->hash, sign_note, NULL, &err) < 0)
		fprintf(stderr, "appliance: sign: warning: the policy was not checked: %s\n",
			err.msg);
}

/* --serial's value: now, next, or a decimal number without sign or
 * leading zero. */
static int serial_arg(const char *s, enum policy_serial_how *how, uint64_t *n)
{
	uint64_t v = 0;

	if (strcmp(s, "now") == 0 || strcmp(s, "next") == 0) {
		*how = s[1] == 'o' ? POLICY_SERIAL_NOW : POLICY_SERIAL_NEXT;
		return 0;
	}
	if (s[0] < '1' || s[0] > '9')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (POLICY_SERIAL_MAX - (uint64_t)(*s - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*how = POLICY_SERIAL_SET;
	*n = v;
	return 0;
}

/* sign --serial: the serial written into the file before it is signed. */
static int sign_serial(const char *policy, enum policy_serial_how how, uint64_t given, int64_t now,
		       struct appl_err *err)
{
	uint64_t old, new;

	if (policy_serial_write(policy, how, given, now, &old, &new, err) < 0)
		return err->code;
	if (old != new)
		printf("wrote serial %" PRIu64 " into %s (it was %" PRIu64 ")\n", new, policy, old);
	return 0;
}

int cmd_sign(int argc, char **argv)
{
	static const struct option opts[] = {
		{"secret", required_argument, NULL, 's'},
		{"serial", required_argument, NULL, 'n'},
		{NULL, 0, NULL, 0},
	};
	const char *sec = NULL;
	struct appl_err err = {0};
	struct policy_seckey *sk;
	struct policy_verified info;
	char sig_path[PATH_MAX];
	int64_t now = (int64_t)time(NULL);
	enum policy_serial_how how = POLICY_SERIAL_NOW;
	uint64_t given = 0;
	bool serial = false;
	int c, rc;

	if (cli_help_wanted(argc, argv, opts))
		return cli_help_print(sign_help_text);
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("sign", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			sec = optarg;
		else if (c == 'n' && serial_arg(optarg, &how, &given) == 0)
			serial = true;
		else if (c == 'n')
			return cli_usage_cmd("sign", "--serial takes now, next or a number of 1 to "
						     "9223372036854775807");
		else
			return cli_usage_cmd("sign", "unknown option");
	}
	if (!sec || optind != argc - 1)
		return cli_usage_cmd("sign", "needs --secret FILE and one POLICY");
	if (policy_seckey_file_read(sec, &sk, &err) < 0)
		return cli_fail_cmd("sign", &err);
	/* The key is read first: a key that cannot sign must not leave the
	 * file with a serial no signature carries. */
	if (serial && sign_serial(argv[optind], how, given, now, &err) < 0) {
		policy_seckey_free(sk);
		return cli_fail_cmd("sign", &err);
	}
	rc = policy_file_sign(argv[optind], sk, now, sig_path, sizeof(sig_path), &info, &err);
	policy_seckey_free(sk);
	if (rc < 0)
		return cli_fail_cmd("sign", &err);
	rc = sign_report(sig_path, &info, now);
	sign_warn(argv[optind], &info);
	return rc;
}

/* ---- verify --------------------------------------------------------------- */

struct verify_args {
	const char *trust_file, *trust_dir, *state_dir, *sig_path;
	char state_buf[PATH_MAX];
	bool help; /* --help: print verify_help_text, do nothing else */
};

static int verify_args_parse(int argc, char **argv, struct verify_args *a)
{
	static const struct option opts[] = {
		{"trust", required_argument, NULL, 't'},
		{"trust-dir", required_argument, NULL, 'd'},
		{"state-dir", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	int c;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("verify", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 't')
			a->trust_file = optarg;
		else if (c == 'd')
			a->trust_dir = optarg;
		else if (c == 's')
			a->state_dir = optarg;
		else
			return cli_usage_cmd("verify", "unknown option");
	}
	if (a->trust_file && a->trust_dir)
		return cli_usage_cmd("verify", "--trust and --trust-dir exclude each other");
	if (optind != argc - 1)
		return cli_usage_cmd("verify", "needs one POLICY.sig");
	a->sig_path = argv[optind];
	return 0;
}

static void verify_report(const struct verify_args *a, const struct policy_verified *info,
			  const struct policy_state *st)
{
	char expires[POLICY_TIME_STR], signed_at[POLICY_TIME_STR];

	time_text(info->expires, expires);
	time_text(info->signed_at, signed_at);
	printf("verified %s\nkey id %s\nserial %" PRIu64 "\ndeployment %s\nsigned %s\nexpires %s\n",
	       a->sig_path, info->keyid_hex, info->serial, info->deployment, signed_at, expires);
	if (!st->present)
		printf("rollback ok: no serial accepted yet for deployment %s in %s\n",
		       info->deployment, a->state_dir);
	else
		printf("rollback ok: highest accepted serial %" PRIu64 " for deployment %s in %s\n",
		       st->serial, info->deployment, a->state_dir);
}

int cmd_verify(int argc, char **argv)
{
	struct verify_args a = {0};
	struct appl_err err = {0};
	struct policy_trust *trust = NULL;
	struct policy_verified info;
	struct policy_state st;
	int rc;

	if ((rc = verify_args_parse(argc, argv, &a)) != 0)
		return rc;
	if (a.help)
		return cli_help_print(verify_help_text);
	if (cli_state_dir(a.state_dir, a.state_buf, sizeof(a.state_buf), &err) < 0)
		return cli_fail_cmd("verify", &err);
	a.state_dir = a.state_buf;
	if (cli_policy_files_check(a.sig_path, &err) < 0 ||
	    cli_trust_load(a.trust_file, a.trust_dir, &trust, &err) < 0)
		return cli_fail_cmd("verify", &err);
	/* commit false: verify judges the rollback but never moves it. */
	rc = policy_load(a.sig_path, trust, a.state_dir, (int64_t)time(NULL), false, NULL, &info,
			 &err);
	cli_untrusted_hint(a.trust_file, a.trust_dir, rc, &err);
	policy_trust_free(trust);
	if (rc < 0 || policy_state_read(a.state_dir, info.deployment, &st, &err) < 0)
		return cli_fail_cmd("verify", &err);
	verify_report(&a, &info, &st);
	return 0;
}
