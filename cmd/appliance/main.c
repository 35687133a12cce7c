/* main.c: argument parsing and subcommand dispatch only. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/err.h"
#include "base/fs.h"
#include "cell/oneshot.h"
#include "image/image.h"
#include "policy_cmds.h"

#define APPLIANCE_VERSION "0.1.0"

static const char usage_text[] =
	"usage: appliance COMMAND [ARGS]\n"
	"\n"
	"commands:\n"
	"  image verify --image DIR --digest sha256:HEX [--cache DIR]\n"
	"        check an OCI image layout against its pinned manifest digest,\n"
	"        unpack it into the cache and print the rootfs path\n"
	"  cell --image DIR --digest sha256:HEX [--deadline SECONDS] [--rootless]\n"
	"       [--cache DIR] [--runtime-dir DIR] [--runsc PATH] FILE|-\n"
	"        run one Python cell (no tools) in a fresh gVisor sandbox and print\n"
	"        its result as one JSON object\n"
	"  keygen --public FILE --secret FILE\n"
	"        make a signing key pair (minisign format; the secret key is\n"
	"        unencrypted, mode 0600)\n"
	"  sign --secret FILE POLICY\n"
	"        sign POLICY into POLICY.sig (serial from the policy, signed now)\n"
	"  verify [--trust PUBKEY | --trust-dir DIR] [--state-dir DIR] POLICY.sig\n"
	"        check a signed policy (signature, serial, expiry, rollback)\n"
	"        without changing the state directory\n"
	"  version   print the version\n"
	"  help      print this text\n";

static int fail(const struct appl_err *err)
{
	fprintf(stderr, "appliance: %s\n", err->msg[0] ? err->msg : "failed");
	return 1;
}

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
			return fail(&err);
		cache = cache_buf;
	}
	if (image_layout_verify(layout, digest, cache, rootfs, sizeof(rootfs), &err) < 0)
		return fail(&err);
	printf("%s\n", rootfs);
	return 0;
}

static int cmd_image(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "verify") != 0)
		return usage_error("image: the only subcommand is verify");
	return cmd_image_verify(argc - 1, argv + 1);
}

static int code_read(const char *arg, char **code, size_t *len, struct appl_err *err)
{
	if (strcmp(arg, "-") == 0)
		return appl_fd_read(STDIN_FILENO, APPL_CELL_CODE_MAX, "standard input", code, len,
				    err);
	return appl_file_read(arg, APPL_CELL_CODE_MAX, code, len, err);
}

static int deadline_parse(const char *s, uint64_t *ms)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < 1 || v > APPL_DEADLINE_S_CEIL)
		return -1;
	*ms = v * 1000ull;
	return 0;
}

static int cell_print(json_t *result)
{
	if (json_dumpf(result, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF ||
	    fflush(stdout) == EOF) {
		fprintf(stderr, "appliance: writing the result failed\n");
		return 1;
	}
	return 0;
}

static int cmd_cell(int argc, char **argv)
{
	static const struct option opts[] = {
		{"image", required_argument, NULL, 'i'},
		{"digest", required_argument, NULL, 'd'},
		{"deadline", required_argument, NULL, 't'},
		{"rootless", no_argument, NULL, 'r'},
		{"cache", required_argument, NULL, 'c'},
		{"state", required_argument, NULL, 's'},
		{"runsc", required_argument, NULL, 'x'},
		{NULL, 0, NULL, 0},
	};
	struct cell_oneshot o;
	struct appl_err err = {0};
	json_t *result = NULL;
	char *code = NULL;
	int c, rc;

	cell_oneshot_init(&o);
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'i':
			o.image = optarg;
			break;
		case 'd':
			o.digest = optarg;
			break;
		case 't':
			if (deadline_parse(optarg, &o.lim.deadline_ms) < 0)
				return usage_error(
					"cell: --deadline takes whole seconds, 1 to 3600");
			break;
		case 'r':
			o.rootless = true;
			break;
		case 'c':
			o.cache = optarg;
			break;
		case 's':
			o.run_dir = optarg;
			break;
		case 'x':
			o.runsc = optarg;
			break;
		default:
			return usage_error("cell: unknown option");
		}
	}
	if (!o.image || !o.digest || optind != argc - 1)
		return usage_error("cell: needs --image DIR, --digest sha256:HEX and FILE or -");
	if (code_read(argv[optind], &code, &o.code_len, &err) < 0)
		return fail(&err);
	o.code = code;
	rc = cell_oneshot_run(&o, &result, &err);
	free(code);
	if (rc < 0)
		return fail(&err);
	rc = cell_print(result);
	json_decref(result);
	return rc;
}

static int cmd_version(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	printf("appliance %s\n", APPLIANCE_VERSION);
	return 0;
}

static int cmd_help(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fputs(usage_text, stdout);
	return 0;
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"image", cmd_image}, {"cell", cmd_cell},     {"version", cmd_version},
	{"help", cmd_help},   {"--help", cmd_help},   {"keygen", cmd_keygen},
	{"sign", cmd_sign},   {"verify", cmd_verify},
};

int main(int argc, char **argv)
{
	/* A closed pipe must come back as EPIPE, not kill us mid-cleanup. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2)
		return usage_error("no command given");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].run(argc - 1, argv + 1);
	return usage_error("unknown command");
}
