/* main.c: argument parsing and subcommand dispatch only. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "image/image.h"
#include "log/log.h"
#include "engine/process.h"
#include "proc/proc.h"
#include "audit_cmd.h"
#include "cell_cmd.h"
#include "check_cmd.h"
#include "cli.h"
#include "init_cmd.h"
#include "run_cmd.h"
#include "status_cmd.h"
#include "policy_cmds.h"
#include "token_cmd.h"
#include "cluster_cmd.h"
#include "version_cmd.h"

static const char usage_text[] =
	"usage: appliance COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  image verify --image DIR --digest sha256:HEX [--cache DIR]\n"
	"        check an OCI image layout against its pinned manifest digest,\n"
	"        unpack it into the cache and print the rootfs path\n"
	"  run --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR] [--cache DIR]\n"
	"      [--runtime-dir DIR] [--server-uids FIRST-LAST] [--name NAME]\n"
	"      [--admin-dir DIR]\n"
	"        serve run_python to an MCP client on stdin/stdout, as the verified\n"
	"        policy allows (keys only from the trust directory,\n"
	"        default /etc/appliance/trusted.d)\n"
	"  status [--name NAME] [--pid PID] [--json] [--admin-dir DIR]\n"
	"        show each running appliance: its policy, servers, cells, pool,\n"
	"        HTTP sessions and audit log, read from its admin socket\n"
	"  reload [--name NAME] [--pid PID] [--admin-dir DIR]\n"
	"        ask each running appliance to read its policy again\n"
	"  stubs --policy POLICY.sig [--trust-dir DIR] [--state-dir DIR] [--role NAME]\n"
	"        [--server-uids FIRST-LAST]\n"
	"        start the policy's servers and print run_python's description and\n"
	"        the stub of every tool the role (default: clients.default_role)\n"
	"        may call, then each tool not offered and why\n"
	"  check --policy POLICY.sig [--trust-dir DIR] [--cache DIR] [--runtime-dir DIR]\n"
	"        [--call SERVER.TOOL=JSON]... [--server-uids FIRST-LAST]\n"
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
	"  init --server NAME=PROGRAM[,ARG]... [--image DIR] [--output FILE]\n"
	"       [--deployment NAME] [--server-uids FIRST-LAST]\n"
	"        start each server once, confined as run would, and write a\n"
	"        starting policy (unsigned) naming its command and every tool it\n"
	"        lists, with a reading and a writing role\n"
	"  keygen --public FILE --secret FILE\n"
	"        make a signing key pair (minisign format; the secret key is\n"
	"        unencrypted, mode 0600)\n"
	"  sign --secret FILE [--serial now|next|N] POLICY\n"
	"        sign POLICY into POLICY.sig (serial from the policy, or written\n"
	"        into it first with --serial; signed now)\n"
	"  verify [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR] POLICY.sig\n"
	"        check a signed policy (signature, serial, expiry, rollback)\n"
	"        without changing the state directory\n"
	"  audit init [--state-dir DIR] PATH\n"
	"        make the sealing key of the audit log at PATH (the policy's\n"
	"        audit.path) and print it, once, for the auditor to keep\n"
	"  audit verify [--key HEX|@FILE]... [--head FILE] [--seal FILE]\n"
	"               [--state-dir DIR] FILE...\n"
	"        check an audit log: its chain back through rotated files, its\n"
	"        head (from the state, or --head; --head /dev/null: none) and,\n"
	"        with the keys, its seals; exit 1 on the first problem\n"
	"  audit show [--runs] [--tool NAME] FILE\n"
	"        print an audit log's starts, runs and calls readably, or only\n"
	"        the runs of one code tool\n"
	"  token NAME ROLE\n"
	"        make a bearer token for an HTTP client, print it once and the\n"
	"        clients.tokens entry (its SHA-256) to sign into the policy\n"
	"  cluster-key FILE\n"
	"        make the key the replicas of a deployment share (a new file,\n"
	"        mode 0600), for run --cluster-key\n"
	"  version (or --version, -V)\n"
	"        print the versions of the appliance, of runsc (and the platform\n"
	"        it would use) and of the libraries it runs with\n"
	"  help [COMMAND [SUBCOMMAND]] (or COMMAND [SUBCOMMAND] --help, -h)\n"
	"        print this text, or a command's own: its options and exit status\n"
	"\n"
	"Options are spelled out in full: an abbreviation such as --trust for\n"
	"--trust-dir is refused.\n"
	"\n"
	"The rollback floor (the highest serial accepted per deployment) is in\n"
	"/var/lib/appliance as root, and --state-dir is refused there; an ordinary\n"
	"user's is $XDG_STATE_HOME/appliance (else ~/.local/state/appliance)\n"
	"unless --state-dir names another.\n"
	"Only keys from the trust directory raise it: a policy checked with\n"
	"--trust PUBKEY is held to it and never moves it.\n"
	"\n"
	"exit status: 0 on success; 1 on a refusal or failure (said on stderr),\n"
	"or a problem found by check or audit verify; 2 on a usage error.\n"
	"See appliance(1).\n";

static const char image_help_text[] =
	"usage: appliance image verify --image DIR --digest sha256:HEX [--cache DIR]\n"
	"\n"
	"Check the OCI image layout in DIR against the manifest digest given (never\n"
	"against its index.json): the manifest, the config and every layer, each\n"
	"layer unpacked while it is hashed and hostile entries refused, into a\n"
	"private cache. Prints the path of the unpacked root filesystem. A layout\n"
	"without that manifest is refused saying which digests its index.json\n"
	"names. verify is the only subcommand. An ordinary user's default cache is\n"
	"$XDG_CACHE_HOME/appliance/images, else ~/.cache/appliance/images.\n"
	"\n"
	"options:\n"
	"  --image DIR          the OCI image layout to check\n"
	"  --digest sha256:HEX  the manifest digest the image is pinned to\n"
	"  --cache DIR          where to unpack it (/var/cache/appliance/images as root)\n"
	"  --help, -h           print this text\n"
	"\n"
	"exit status: 0 when the image verified (its rootfs path on stdout), 1 when\n"
	"it did not (one line on stderr saying why), 2 on a usage error.\n";

static const char help_help_text[] =
	"usage: appliance help [COMMAND [SUBCOMMAND]]\n"
	"       appliance COMMAND [SUBCOMMAND] --help\n"
	"       appliance --help\n"
	"\n"
	"Print the general usage, or COMMAND's own text: its synopsis, what each of\n"
	"its options does and its exit status. The commands are image, run, status,\n"
	"reload, stubs, check, cell, init, keygen, sign, verify, audit, token,\n"
	"cluster-key, version and help; image has the subcommand verify, audit\n"
	"the subcommands init, verify and show.\n"
	"-h is the same as --help.\n"
	"\n"
	"options:\n"
	"  --help, -h  print this text (appliance help help, appliance help --help)\n"
	"\n"
	"exit status: 0; 2 when there is no such command or subcommand.\n";

static int usage_error(const char *msg)
{
	fprintf(stderr, "appliance: %s\n%s", msg, usage_text);
	return 2;
}

static void image_help(void)
{
	fputs(image_help_text, stdout);
}

static void help_help(void)
{
	fputs(help_help_text, stdout);
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

	if (cli_help_wanted(argc, argv, opts))
		return cli_help_print(image_help_text);
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
	if (argc == 2 && cli_help_wanted(argc, argv, NULL))
		return cli_help_print(image_help_text);
	if (argc < 2 || strcmp(argv[1], "verify") != 0)
		return usage_error("image: the only subcommand is verify");
	return cmd_image_verify(argc - 1, argv + 1);
}

static int cmd_help(int argc, char **argv);

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	bool serves;	    /* runs sandboxes or servers from an event loop */
	void (*help)(void); /* its own help text */
} commands[] = {
	{"image", cmd_image, false, image_help},
	{"cell", cmd_cell, true, cell_help},
	{"run", cmd_run, true, run_help},
	{"status", cmd_status, false, status_help},
	{"reload", cmd_reload, false, reload_help},
	{"version", cmd_version, false, version_help},
	{"--version", cmd_version, false, version_help},
	{"-V", cmd_version, false, version_help},
	{"help", cmd_help, false, help_help},
	{"--help", cmd_help, false, help_help},
	{"-h", cmd_help, false, help_help},
	{"keygen", cmd_keygen, false, keygen_help},
	{"sign", cmd_sign, false, sign_help},
	{"verify", cmd_verify, false, verify_help},
	{"stubs", cmd_stubs, true, stubs_help},
	{"audit", cmd_audit, false, audit_help},
	{"check", cmd_check, true, check_help},
	{"token", cmd_token, false, token_help},
	{"cluster-key", cmd_cluster_key, false, cluster_key_help},
	{"init", cmd_init, true, init_help},
};

/* The subcommands with a help text of their own. */
static const struct subcommand_help {
	const char *command, *name;
	void (*print)(void);
} subcommand_helps[] = {
	{"image", "verify", image_help},
	{"audit", "init", audit_init_help},
	{"audit", "verify", audit_verify_help},
	{"audit", "show", audit_show_help},
};

static const struct command *command_find(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(name, commands[i].name) == 0)
			return &commands[i];
	return NULL;
}

/* help, help COMMAND, help COMMAND SUBCOMMAND. A name not found is a usage
 * error (2), so a script that asks for a command this build lacks can tell. */
static int cmd_help(int argc, char **argv)
{
	struct appl_err err = {0};
	const struct command *c;

	if (argc < 2)
		return cli_help_print(usage_text);
	if (cli_help_wanted(argc, argv, NULL))
		return cli_help_print(help_help_text);
	if (!(c = command_find(argv[1]))) {
		appl_err_set(
			&err, -EINVAL,
			"no command \"%.*s\" (the commands: image, run, status, reload, stubs, "
			"check, cell, init, keygen, sign, verify, audit, token, cluster-key, "
			"version, "
			"help)",
			64, argv[1]);
		return cli_usage_cmd("help", err.msg);
	}
	if (argc == 2) {
		c->help();
		return 0;
	}
	if (argc > 3)
		return cli_usage_cmd("help", "takes a COMMAND and at most one SUBCOMMAND");
	for (size_t i = 0; i < sizeof(subcommand_helps) / sizeof(subcommand_helps[0]); i++)
		if (strcmp(subcommand_helps[i].command, argv[1]) == 0 &&
		    strcmp(subcommand_helps[i].name, argv[2]) == 0) {
			subcommand_helps[i].print();
			return 0;
		}
	appl_err_set(&err, -EINVAL, "%s has no subcommand \"%.*s\"", argv[1], 64, argv[2]);
	return cli_usage_cmd("help", err.msg);
}

/* Process-wide state, set once (engine/process.h): library code only
 * checks it. */
static int process_setup(const struct command *c)
{
	char why[128];

	if (engine_process_setup(c->serves, why, sizeof(why)) < 0) {
		fprintf(stderr, "appliance: %s\n", why);
		return -1;
	}
	log_setup(STDERR_FILENO, LOG_INFO);
	return 0;
}

int main(int argc, char **argv)
{
	const struct command *c;

	if (argc >= 1 && proc_init_wanted(argv[0]))
		return engine_init_main(argc, argv);
	if (argc < 2)
		return usage_error("no command given");
	if (!(c = command_find(argv[1])))
		return usage_error("unknown command");
	if (process_setup(c) < 0)
		return 1;
	return c->run(argc - 1, argv + 1);
}
