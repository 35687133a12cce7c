/* audit_cmd.c: `appliance audit init|verify|show`: argument parsing and
 * printing only; the work is in pkg/audit (docs/audit.md). */
#include "audit_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit/format.h"
#include "audit/verify.h"
#include "base/err.h"
#include "base/fs.h"
#include "cli.h"
#include "policy/state.h"

/* A key file holds 64 hex digits and perhaps a newline; anything much
 * longer is not one. */
#define KEY_FILE_MAX 256

static const char audit_help_text[] =
	"usage: appliance audit init [--state-dir DIR] PATH\n"
	"       appliance audit verify [--key HEX|@FILE]... [--head FILE]\n"
	"                              [--seal FILE] [--state-dir DIR] FILE|DIR...\n"
	"       appliance audit show [--runs] [--tool NAME] FILE\n"
	"\n"
	"The audit log a policy's \"audit\": {\"path\": P} asks for (docs/audit.md):\n"
	"init makes its sealing key, verify checks its chain, head and seals, show\n"
	"prints it readably. appliance help audit SUBCOMMAND, or appliance audit\n"
	"SUBCOMMAND --help, says more of each.\n"
	"\n"
	"options:\n"
	"  --state-dir DIR   init, verify: where the log's key and head are kept\n"
	"  --key HEX|@FILE   verify: a sealing key (64 hex digits, or @FILE)\n"
	"  --head FILE       verify: the chain's head from FILE (/dev/null: none)\n"
	"  --seal FILE       verify: the sealing state from FILE (/dev/null: none)\n"
	"  --runs            show: one line per run instead of one per event\n"
	"  --tool NAME       show: only the runs of the code tool NAME\n"
	"  --help, -h        print this text\n"
	"\n"
	"exit status: 0 on success; 1 on a failure, or a problem found in a log;\n"
	"2 on a usage error.\n";

static const char init_help_text[] =
	"usage: appliance audit init [--state-dir DIR] PATH\n"
	"\n"
	"Make the first sealing key of the audit log at PATH (the policy's\n"
	"audit.path exactly as written there: the state is keyed by it), write its\n"
	"sealing state into the state directory (/var/lib/appliance as root), and\n"
	"print its key id and the key, once: give the key to the auditor, who\n"
	"keeps it off this host (audit verify --key needs it). A log that has a\n"
	"sealing key already keeps it: it is never replaced.\n"
	"\n"
	"options:\n"
	"  --state-dir DIR  an ordinary user's state directory (refused as root)\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when the key was made; 1 when it was not, say because the\n"
	"log has one (one line on stderr saying why); 2 on a usage error.\n";

static const char verify_help_text[] =
	"usage: appliance audit verify [--key HEX|@FILE]... [--head FILE]\n"
	"                              [--seal FILE] [--state-dir DIR] FILE|DIR...\n"
	"\n"
	"Check each audit log FILE by the rules of docs/audit.md: the chain of\n"
	"hashes line by line and back through the rotated files it continues, its\n"
	"head, and with keys its seals: against the sealing state beside the head\n"
	"(a log cut after an old seal is behind it) and against the clock (the\n"
	"newest seal of a log being written is never much older than its\n"
	"appliances' audit_seal_s). Prints one line per FILE when all holds, else\n"
	"the first bad line (FILE:LINE) and why. A key on the command line is\n"
	"wiped from it once read.\n"
	"\n"
	"A DIR holds the logs of several appliances, collected: each file in it\n"
	"(no symlink is followed) is a log's newest file, checked as a FILE is,\n"
	"except NAME.K (rotated: its log reaches it), NAME.head and NAME.seal\n"
	"(log NAME's head and sealing state, as --head and --seal give them;\n"
	"without NAME.head, its head is the state's). Then one line:\n"
	"DIR: N logs, N intact, N with problems, N stray files. A DIR of no log\n"
	"fails. --head and --seal name one log's, and are refused with a DIR.\n"
	"\n"
	"options:\n"
	"  --key HEX|@FILE  a sealing key: 64 hex digits, or @FILE (repeatable)\n"
	"  --head FILE      the head to check against, a copy of it (/dev/null: none)\n"
	"  --seal FILE      the sealing state to compare with, a copy of it\n"
	"                   (/dev/null: none); with --head, only this gives one\n"
	"  --state-dir DIR  where the log's head is kept (allowed as root too)\n"
	"  --help, -h       print this text\n"
	"\n"
	"exit status: 0 when every FILE and DIR passed; 1 on a problem in any of\n"
	"them, a log that could not be read, or a DIR of no log; 2 on a usage\n"
	"error.\n";

static const char show_help_text[] =
	"usage: appliance audit show [--runs] [--tool NAME] FILE\n"
	"\n"
	"Print the audit log FILE (this file only, no rotated ones) readably: a\n"
	"line per event (the appliance's starts and stops, runs, tool calls, the\n"
	"ends of runs), or with --runs a line per run: who, when, which code tool\n"
	"if any, which tools, how it ended. With --tool, only the lines of the runs\n"
	"of that code tool (its run.start and the run's later lines) and its\n"
	"refusals; the name must match exactly. Text from the log is escaped. It\n"
	"checks nothing: audit verify does.\n"
	"\n"
	"options:\n"
	"  --runs       one line per run instead of one per event\n"
	"  --tool NAME  only the runs of the code tool NAME (1 to 64 characters of\n"
	"               A-Z a-z 0-9 _ -)\n"
	"  --help, -h   print this text\n"
	"\n"
	"exit status: 0 when the log was printed; 1 when it could not be read; 2 on\n"
	"a usage error.\n";

void audit_help(void)
{
	fputs(audit_help_text, stdout);
}

void audit_init_help(void)
{
	fputs(init_help_text, stdout);
}

void audit_verify_help(void)
{
	fputs(verify_help_text, stdout);
}

void audit_show_help(void)
{
	fputs(show_help_text, stdout);
}

/* ---- init ----------------------------------------------------------------- */

static void init_report(const unsigned char *k0, const char *kid)
{
	char hex[AUDIT_HASH_HEX];

	audit_hex(k0, AUDIT_KEY_BYTES, hex);
	printf("kid %s\nkey %s\n", kid, hex);
	printf("Keep this key off this host: it is shown only once, and `appliance audit verify "
	       "--key` needs it to check the seals.\n");
	fflush(stdout);
	sodium_memzero(hex, sizeof(hex));
}

static int audit_init(int argc, char **argv)
{
	static const struct option opts[] = {
		{"state-dir", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	const char *state_arg = NULL;
	char state[PATH_MAX], kid[AUDIT_KID_HEX];
	struct appl_err err = {0};
	unsigned char *k0;
	int c, rc;

	if (cli_help_wanted(argc, argv, opts))
		return cli_help_print(init_help_text);
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("audit init", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c != 's')
			return cli_usage_cmd("audit init", "unknown option");
		state_arg = optarg;
	}
	if (optind != argc - 1)
		return cli_usage_cmd("audit init", "needs one PATH (the policy's audit.path)");
	/* As root the state is the appliance's own: a sealing key made
	 * anywhere else would be one no appliance uses. */
	if (cli_state_dir(state_arg, state, sizeof(state), &err) < 0)
		return cli_fail_cmd("audit init", &err);
	if (!(k0 = sodium_malloc(AUDIT_KEY_BYTES))) {
		appl_err_set(&err, -ENOMEM, "out of locked memory");
		return cli_fail_cmd("audit init", &err);
	}
	rc = audit_seal_init(state, argv[optind], k0, kid, &err);
	if (rc == 0)
		init_report(k0, kid);
	sodium_free(k0);
	return rc < 0 ? cli_fail_cmd("audit init", &err) : 0;
}

/* ---- verify --------------------------------------------------------------- */

struct verify_args {
	const char *head, *seal, *state_arg;
	unsigned char (*keys)[AUDIT_KEY_BYTES]; /* sodium_allocarray'ed */
	size_t nkeys;
	char state[PATH_MAX];
	bool help; /* --help: print verify_help_text, do nothing else */
};

/* 64 hex digits (either case), then at most white space. */
static int key_hex(const char *s, size_t len, unsigned char out[AUDIT_KEY_BYTES])
{
	size_t got = 0;

	while (len && strchr(" \t\r\n", s[len - 1]))
		len--;
	if (len != 2 * AUDIT_KEY_BYTES)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (!strchr("0123456789abcdefABCDEF", s[i]) || s[i] == '\0')
			return -EINVAL;
	if (sodium_hex2bin(out, AUDIT_KEY_BYTES, s, len, NULL, &got, NULL) != 0 ||
	    got != AUDIT_KEY_BYTES)
		return -EINVAL;
	return 0;
}

/* The key in the file at path, read into locked memory (never a buffer
 * that is grown and freed with the key left in it). */
static int key_file(const char *path, unsigned char out[AUDIT_KEY_BYTES], struct appl_err *err)
{
	char *buf = sodium_malloc(KEY_FILE_MAX + 1);
	ssize_t got = 0, n;
	struct stat st;
	int fd, rc;

	if (!buf)
		return appl_err_set(err, -ENOMEM, "out of locked memory");
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = fd < 0 ? appl_err_errno(err, -errno, errno, "--key @%s", path)
			    : appl_err_set(err, -EINVAL, "--key @%s: not a regular file", path);
		goto out;
	}
	while (got <= KEY_FILE_MAX &&
	       (n = read(fd, buf + got, (size_t)(KEY_FILE_MAX + 1 - got))) > 0)
		got += n;
	rc = got <= KEY_FILE_MAX && key_hex(buf, (size_t)got, out) == 0
		     ? 0
		     : appl_err_set(err, -EINVAL, "--key @%s: not a key file (64 hex digits)",
				    path);
out:
	if (fd >= 0)
		close(fd);
	sodium_free(buf); /* wipes it */
	return rc;
}

/* --key HEX or --key @FILE. A key on the command line is wiped from argv
 * once read, so that it is not left for ps to show for the whole run. */
static int key_take(char *arg, unsigned char out[AUDIT_KEY_BYTES], struct appl_err *err)
{
	int rc;

	if (arg[0] == '@')
		return key_file(arg + 1, out, err);
	rc = key_hex(arg, strlen(arg), out);
	sodium_memzero(arg, strlen(arg));
	return rc < 0 ? appl_err_set(err, rc, "--key: not 64 hex digits (nor @FILE)") : 0;
}

/* A DIR argument: a directory, the path followed as given (it is the
 * operator's; the entries in it are not followed). */
static bool arg_is_dir(const char *arg)
{
	struct stat st;

	return stat(arg, &st) == 0 && S_ISDIR(st.st_mode);
}

static int verify_args_parse(int argc, char **argv, struct verify_args *a)
{
	static const struct option opts[] = {
		{"key", required_argument, NULL, 'k'},
		{"head", required_argument, NULL, 'h'},
		{"seal", required_argument, NULL, 'S'},
		{"state-dir", required_argument, NULL, 's'},
		{NULL, 0, NULL, 0},
	};
	struct appl_err err = {0};
	int c;

	if (cli_help_wanted(argc, argv, opts)) {
		a->help = true;
		return 0;
	}
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("audit verify", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'k':
			if (a->nkeys == AUDIT_VERIFY_KEYS_MAX)
				return cli_usage_cmd("audit verify", "too many --key options");
			if (key_take(optarg, a->keys[a->nkeys++], &err) < 0)
				return cli_usage_cmd("audit verify", err.msg);
			break;
		case 'h':
			a->head = optarg;
			break;
		case 'S':
			a->seal = optarg;
			break;
		case 's':
			a->state_arg = optarg;
			break;
		default:
			return cli_usage_cmd("audit verify", "unknown option");
		}
	}
	if (optind >= argc)
		return cli_usage_cmd("audit verify", "needs at least one FILE or DIR");
	/* Each log of a DIR has its own head and sealing state: one --head
	 * for all of them would check every log but one against another's. */
	for (int i = optind; (a->head || a->seal) && i < argc; i++)
		if (arg_is_dir(argv[i]))
			return cli_usage_cmd("audit verify",
					     "--head and --seal name one log's copies: with a "
					     "DIR, each log's are NAME.head and NAME.seal in it");
	return 0;
}

/* --state-dir is allowed as root here: verify only reads, and a head from
 * elsewhere is no way around anything (--head takes any file anyway). */
static int verify_state(struct verify_args *a, struct appl_err *err)
{
	if (a->state_arg) {
		if (appl_path_join(a->state, sizeof(a->state), a->state_arg, "", "") < 0)
			return appl_err_set(err, -ENAMETOOLONG, "--state-dir: path too long");
		return 0;
	}
	if (policy_state_dir_default(a->state, sizeof(a->state), err) < 0) {
		if (!a->head)
			return -1;
		a->state[0] = '\0'; /* with --head, the state is only for the lock */
	}
	return 0;
}

static int verify_files(struct verify_args *a, int argc, char **argv)
{
	struct audit_verify_opts o = {
		.keys = (const unsigned char(*)[AUDIT_KEY_BYTES])a->keys,
		.nkeys = a->nkeys,
		.head_file = a->head,
		.seal_file = a->seal,
		.state_dir = a->state[0] ? a->state : NULL,
	};
	struct appl_err err = {0};
	int status = 0, rc;

	for (int i = optind; i < argc; i++) {
		if (arg_is_dir(argv[i]))
			rc = audit_verify_dir(argv[i], &o, stdout, &err);
		else
			rc = audit_verify(argv[i], &o, stdout, &err);
		if (rc < 0)
			cli_fail_cmd("audit verify", &err);
		if (rc != 0)
			status = 1;
	}
	return status;
}

static int audit_verify_cmd(int argc, char **argv)
{
	struct verify_args a = {0};
	struct appl_err err = {0};
	int rc;

	a.keys = sodium_allocarray(AUDIT_VERIFY_KEYS_MAX, AUDIT_KEY_BYTES);
	if (!a.keys) {
		appl_err_set(&err, -ENOMEM, "out of locked memory");
		return cli_fail_cmd("audit verify", &err);
	}
	rc = verify_args_parse(argc, argv, &a);
	if (rc == 0 && a.help) {
		sodium_free(a.keys);
		return cli_help_print(verify_help_text);
	}
	if (rc == 0 && verify_state(&a, &err) < 0)
		rc = cli_fail_cmd("audit verify", &err);
	if (rc == 0)
		rc = verify_files(&a, argc, argv);
	sodium_free(a.keys); /* wipes them */
	return rc;
}

/* ---- show ----------------------------------------------------------------- */

static int audit_show_cmd(int argc, char **argv)
{
	static const struct option opts[] = {
		{"runs", no_argument, NULL, 'r'},
		{"tool", required_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	struct audit_show_opts o = {0};
	struct appl_err err = {0};
	int c;

	if (cli_help_wanted(argc, argv, opts))
		return cli_help_print(show_help_text);
	if (cli_inexact_option(argc, argv, opts))
		return cli_usage_cmd("audit show", "options must be spelled out in full");
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			o.runs = true;
			break;
		case 't':
			if (o.tool)
				return cli_usage_cmd("audit show", "--tool is given once");
			if (!audit_tool_name_valid(optarg))
				return cli_usage_cmd("audit show",
						     "--tool: not a code tool's name (1 to 64 "
						     "characters of A-Z a-z 0-9 _ -)");
			o.tool = optarg;
			break;
		default:
			return cli_usage_cmd("audit show",
					     "the options are --runs and --tool NAME");
		}
	}
	if (optind != argc - 1)
		return cli_usage_cmd("audit show", "needs one FILE");
	if (audit_show_with(argv[optind], &o, stdout, &err) < 0)
		return cli_fail_cmd("audit show", &err);
	return 0;
}

int cmd_audit(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int argc, char **argv);
	} subs[] = {
		{"init", audit_init},
		{"verify", audit_verify_cmd},
		{"show", audit_show_cmd},
	};

	if (argc == 2 && cli_help_wanted(argc, argv, NULL))
		return cli_help_print(audit_help_text);
	if (argc < 2)
		return cli_usage_cmd("audit", "needs a subcommand: init, verify or show");
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			return subs[i].run(argc - 1, argv + 1);
	return cli_usage_cmd("audit", "the subcommands are init, verify and show");
}
