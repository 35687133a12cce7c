/* version_cmd.c: `appliance version` (see version_cmd.h). */
#include "version_cmd.h"

#include <archive.h>
#include <errno.h>
#include <jansson.h>
#include <seccomp.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/err.h"
#include "base/version.h"
#include "cli.h"
#include "http/client.h"
#include "http/front.h"
#include "policy/policy.h"
#include "sandbox/runsc.h"

static const char help_text[] =
	"usage: appliance version\n"
	"       appliance --version\n"
	"       appliance -V\n"
	"\n"
	"Print the appliance's version; then the release of the runsc at\n"
	"" POLICY_RUNSC_DEFAULT " (the one a policy uses when its runtime.runsc names\n"
	"none) and the gVisor platform cells use unless the policy's\n"
	"runtime.platform says otherwise (" POLICY_PLATFORM_DEFAULT "); then each library the\n"
	"appliance runs with and its version, as the library loaded now reports\n"
	"it. For example:\n"
	"\n"
	"  appliance " APPL_VERSION "\n"
	"  runsc " POLICY_RUNSC_DEFAULT ": 0.0~20240729.0, platform " POLICY_PLATFORM_DEFAULT "\n"
	"  jansson 2.14\n"
	"  ...\n"
	"\n"
	"A runsc that is missing, prints no gVisor release or is older than the\n"
	"oldest one this appliance was tested with is said so on its line: cells\n"
	"would not run with it.\n"
	"\n"
	"options:\n"
	"  --help, -h  print this text\n"
	"\n"
	"exit status: 0, also when runsc is missing or unusable; 1 when the output\n"
	"could not be written; 2 on a usage error (an argument other than --help).\n";

void version_help(void)
{
	fputs(help_text, stdout);
}

/* The runsc line: its release, or why there is none. */
static void runsc_print(void)
{
	const char *runsc = POLICY_RUNSC_DEFAULT, *platform = POLICY_PLATFORM_DEFAULT;
	struct sandbox_runsc_version v;
	struct appl_err err = {0};
	int rc;

	rc = sandbox_runsc_version_get(runsc, &v, &err);
	if (rc == -ENOENT)
		printf("runsc %s: not found (cells cannot run), platform %s\n", runsc, platform);
	else if (rc < 0)
		printf("runsc %s: unusable (%s), platform %s\n", runsc, err.msg, platform);
	else if (sandbox_runsc_version_check(&v, runsc, &err) < 0)
		printf("runsc %s: %s, older than %u.%u, the oldest tested (refused), platform %s\n",
		       runsc, v.text, APPL_RUNSC_TESTED_DATE, APPL_RUNSC_TESTED_PATCH, platform);
	else
		printf("runsc %s: %s, platform %s\n", runsc, v.text, platform);
}

static void libraries_print(void)
{
	char curl[128], mhd[64];
	struct appl_err cerr = {0}, merr = {0};
	const struct scmp_version *scmp = seccomp_version();
	const char *archive = archive_version_string();
	const char *archive_prefix = "libarchive ";
	PCRE2_UCHAR pcre[64] = {0};
	int need;

	printf("jansson %s\n", jansson_version_str());
	printf("libsodium %s\n", sodium_version_string());
	/* Loaded here only to be described: run loads libcurl for an HTTP
	 * server and libmicrohttpd for its HTTP front. */
	if (http_client_describe(curl, sizeof(curl), &cerr) == 0)
		printf("libcurl %s\n", curl);
	else
		printf("libcurl: %s\n", cerr.msg);
	if (http_front_describe(mhd, sizeof(mhd), &merr) == 0)
		printf("libmicrohttpd %s\n", mhd);
	else
		printf("libmicrohttpd: %s\n", merr.msg);
	if (scmp)
		printf("libseccomp %u.%u.%u\n", scmp->major, scmp->minor, scmp->micro);
	/* archive_version_string() says "libarchive 3.6.2". */
	if (archive && strncmp(archive, archive_prefix, strlen(archive_prefix)) == 0)
		archive += strlen(archive_prefix);
	printf("libarchive %s\n", archive ? archive : "(unknown)");
	/* Asked for its length first (in code units, the NUL included). */
	need = pcre2_config(PCRE2_CONFIG_VERSION, NULL);
	if (need <= 0 || (size_t)need > sizeof(pcre) / sizeof(pcre[0]) ||
	    pcre2_config(PCRE2_CONFIG_VERSION, pcre) < 0)
		pcre[0] = '\0';
	printf("libpcre2-8 %s\n", pcre[0] ? (const char *)pcre : "(unknown)");
}

int cmd_version(int argc, char **argv)
{
	if (cli_help_wanted(argc, argv, NULL))
		return cli_help_print(help_text);
	if (argc != 1)
		return cli_usage_cmd("version", "takes no arguments");
	printf("appliance %s\n", APPL_VERSION);
	runsc_print();
	libraries_print();
	return fflush(stdout) == EOF ? 1 : 0;
}
