/* cluster_cmd.c: `appliance cluster-key` (see cluster_cmd.h). */
#include "cluster_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "cli.h"

static const char help_text[] =
	"usage: appliance cluster-key FILE\n"
	"\n"
	"Make the key the replicas of one deployment share and write it to FILE,\n"
	"a new file of mode 0600 (an existing file is never replaced): 32 random\n"
	"bytes as 64 hex digits. Every replica is started with\n"
	"run --cluster-key FILE (a copy of the same file, mode 0600, owned by the\n"
	"appliance's user) and the policy's cluster section; a requestState one\n"
	"replica makes is then taken by any other. Whoever reads the key can make\n"
	"requestStates the replicas believe: keep it as a secret (docs/scale-out.md).\n"
	"\n"
	"options:\n"
	"  --help, -h  print this text\n"
	"\n"
	"exit status: 0 when the key was written; 1 when it could not be; 2 on a\n"
	"usage error.\n";

void cluster_key_help(void)
{
	fputs(help_text, stdout);
}

int cmd_cluster_key(int argc, char **argv)
{
	unsigned char key[32];
	char hex[2 * sizeof(key) + 2];
	int fd, rc;

	if (cli_help_wanted(argc, argv, NULL))
		return cli_help_print(help_text);
	if (argc != 2 || argv[1][0] == '-')
		return cli_usage_cmd("cluster-key", "needs FILE");
	fd = open(argv[1], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "appliance: cluster-key: %s: %s%s\n", argv[1], strerror(errno),
			errno == EEXIST ? " (an existing key is never replaced)" : "");
		return 1;
	}
	randombytes_buf(key, sizeof(key));
	sodium_bin2hex(hex, sizeof(hex), key, sizeof(key));
	sodium_memzero(key, sizeof(key));
	hex[2 * sizeof(key)] = '\n';
	rc = appl_fd_write_all(fd, hex, 2 * sizeof(key) + 1);
	sodium_memzero(hex, sizeof(hex));
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		fprintf(stderr, "appliance: cluster-key: writing %s: %s\n", argv[1], strerror(-rc));
		unlink(argv[1]);
		return 1;
	}
	return 0;
}
