/* cli.h: small helpers shared by the subcommands. */
#ifndef APPL_CMD_CLI_H
#define APPL_CMD_CLI_H

#include <getopt.h>

/* getopt_long accepts any unambiguous prefix of a long option (`--trust`
 * for `--trust-dir`, `--root` for `--rootless`). For a security tool an
 * option must mean exactly what it says: this returns the first argument
 * before "--" that starts with "--" and is not exactly one of opts' names
 * (alone, or followed by '=' for options taking an argument), or NULL when
 * all are exact. Values of options that take one are skipped. */
const char *cli_inexact_option(int argc, char **argv, const struct option *opts);

#endif
