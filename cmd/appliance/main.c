/* main.c: argument parsing and subcommand dispatch only. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/version.h"
#include "image/image.h"
#include "log/log.h"
#include "proc/proc.h"
#include "audit_cmd.h"
#include "cell_cmd.h"
#include "check_cmd.h"
#include "cli.h"
#include "run_cmd.h"
#include "policy_cmds.h"
#include "token_cmd.h"

static const char usage_text[] =
	"usage: appliance COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  image verify --image DIR --digest sha256:HEX [--cache DIR]\n"
	"        check an OCI image layout against its pinned manifest digest,\n"
	"        unpack it into the cache and print the rootfs path\n"
	"  run --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR] [--cache DIR]\n"
	"      [--runtime-dir DIR]\n"
	"        serve run_python to an MCP client on stdin/stdout, as the verified\n"
	"        policy allows (keys only from the trust directory,\n"
	"        default /etc/appliance/trusted.d)\n"
	"  stubs --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR] [--role NAME]\n"
	"        start the policy's servers and print run_python's description and\n"
	"        the stub of every tool the role (default: clients.default_role)\n"
	"        may call, then each tool not offered and why\n"
	"  check --policy POLICY.sig [--trust-dir DIR] [--cache DIR] [--runtime-dir DIR]\n"
	"        [--call SERVER.TOOL=JSON]...\n"
	"        the operator's self-test: judge the policy and this machine as run\n"
	"        would (the serial is not recorded), start the servers and check the\n"
	"        tool patterns and roles against their tools, then run real cells:\n"
	"        what must work and what must be denied (appliance help check)\n"
	"  cell --policy POLICY.sig [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR]\n"
	"       [--cache DIR] [--runtime-dir DIR] FILE|-\n"
	"        run one Python cell (no tools) in a fresh gVisor sandbox, with the\n"
	"        image, runtime and limits of a verified policy, and print its result\n"
	"        as one JSON object\n"
	"  cell --image DIR --digest sha256:HEX [--deadline SECONDS] [--rootless]\n"
	"       [--runsc PATH] [--cache DIR] [--runtime-dir DIR] FILE|-\n"
	"        the same without a policy (for development)\n"
	"  keygen --public FILE --secret FILE\n"
	"        make a signing key pair (minisign format; the secret key is\n"
	"        unencrypted, mode 0600)\n"
	"  sign --secret FILE POLICY\n"
	"        sign POLICY into POLICY.sig (serial from the policy, signed now)\n"
	"  verify [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR] POLICY.sig\n"
	"        check a signed policy (signature, serial, expiry, rollback)\n"
	"        without changing the state directory\n"
	"  audit init [--state-dir DIR] PATH\n"
	"        make the sealing key of the audit log at PATH (the policy's\n"
	"        audit.path) and print it, once, for the auditor to keep\n"
	"  audit verify [--key HEX|@FILE]... [--head FILE] [--state-dir DIR] FILE...\n"
	"        check an audit log: its chain back through rotated files, its\n"
	"        head (from the state, or --head; --head /dev/null: none) and,\n"
	"        with the keys, its seals; exit 1 on the first problem\n"
	"  audit show [--runs] FILE\n"
	"        print an audit log's starts, runs and calls readably\n"
	"  token NAME ROLE\n"
	"        make a bearer token for an HTTP client, print it once and the\n"
	"        clients.tokens entry (its SHA-256) to sign into the policy\n"
	"\n"
	"The rollback floor (the highest serial accepted per deployment) is in\n"
	"/var/lib/appliance as root, and --state-dir is refused there; an ordinary\n"
	"user's is ~/.local/state/appliance unless --state-dir names another.\n"
	"Only keys from the trust directory raise it: a policy checked with\n"
	"--trust PUBKEY is held to it and never moves it.\n"
	"  version   print the version\n"
	"  help [check|token]  print this text, or a command's own\n";

static int usage_error(const char *msg)
{
	fprintf(stderr, "appliance: %s\n%s", msg, usage_text);
	return 2;
}

static int cmd_image_verify(int argc, char **argv)
{
	static const struct option opts[] = {
		{"image", required_argument, NULL, 'i'},
		{"digest", required_argument, NULL, 'd'},
		{"cache", required_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	const char *layout = NULL, *digest = NULL, *cache = NULL;
	char cache_buf[PATH_MAX], rootfs[PATH_MAX];
	struct appl_err err = {0};
	int c;

	if (cli_inexact_option(argc, argv, opts))
		return usage_error("image verify: options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			layout = optarg;
			break;
		case 'd':
			digest = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		default:
			return usage_error("image verify: unknown option");
		}
	}
	if (!layout || !digest || optind != argc)
		return usage_error("image verify: needs --image DIR and --digest sha256:HEX");
	if (!cache) {
		if (image_cache_default(cache_buf, sizeof(cache_buf), &err) < 0)
			return cli_fail(&err);
		cache = cache_buf;
	}
	if (image_layout_verify(layout, digest, cache, rootfs, sizeof(rootfs), &err) < 0)
		return cli_fail(&err);
	printf("%s\n", rootfs);
	return 0;
}

static int cmd_image(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "verify") != 0)
		return usage_error("image: the only subcommand is verify");
	return cmd_image_verify(argc - 1, argv + 1);
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("appliance %s\n", APPL_VERSION);
	return 0;
}

/* Commands with a help text of their own. */
static const struct command_help {
	const char *name;
	void (*print)(void);
} command_helps[] = {
	{"check", check_help},
	{"token", token_help},
};

static int cmd_help(int argc, char **argv)
{
	for (size_t i = 0; argc > 1 && i < sizeof(command_helps) / sizeof(command_helps[0]); i++)
		if (strcmp(argv[1], command_helps[i].name) == 0) {
			command_helps[i].print();
			return 0;
		}
	fputs(usage_text, stdout);
	return 0;
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	bool serves; /* runs sandboxes or servers from an event loop */
} commands[] = {
	{"image", cmd_image, false},	 {"cell", cmd_cell, true},    {"run", cmd_run, true},
	{"version", cmd_version, false}, {"help", cmd_help, false},   {"--help", cmd_help, false},
	{"keygen", cmd_keygen, false},	 {"sign", cmd_sign, false},   {"verify", cmd_verify, false},
	{"stubs", cmd_stubs, true},	 {"audit", cmd_audit, false}, {"check", cmd_check, true},
	{"token", cmd_token, false},
};

/* Process-wide state, set once, here: library code only checks it. */
static int process_setup(const struct command *c)
{
	int rc;

	/* A closed pipe must come back as EPIPE, not kill us mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	if (sodium_init() < 0) {
		fprintf(stderr, "appliance: libsodium failed to initialise\n");
		return -1;
	}
	log_setup(STDERR_FILENO, LOG_INFO);
	if (!c->serves)
		return 0;
	/* Stop signals and SIGCHLD wait for the event loop's signalfd from
	 * this moment; orphaned sandbox processes become ours to reap. */
	if ((rc = proc_process_setup()) < 0) {
		fprintf(stderr, "appliance: process setup: %s\n", strerror(-rc));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage_error("no command given");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (process_setup(&commands[i]) < 0)
			return 1;
		return commands[i].run(argc - 1, argv + 1);
	}
	return usage_error("unknown command");
}
