/* cli.c: helpers shared by the subcommands (see cli.h). */
#include "cli.h"

#include <stddef.h>
#include <string.h>

static const struct option *option_find(const char *arg, const struct option *opts)
{
	size_t len = strcspn(arg, "=");

	for (const struct option *o = opts; o->name; o++)
		if (strlen(o->name) == len && strncmp(arg, o->name, len) == 0 &&
		    (arg[len] == '\0' || o->has_arg != no_argument))
			return o;
	return NULL;
}

const char *cli_inexact_option(int argc, char **argv, const struct option *opts)
{
	for (int i = 1; i < argc; i++) {
		const struct option *o;

		if (strcmp(argv[i], "--") == 0)
			return NULL;
		if (strncmp(argv[i], "--", 2) != 0)
			continue;
		o = option_find(argv[i] + 2, opts);
		if (!o)
			return argv[i];
		if (o->has_arg == required_argument && !strchr(argv[i], '='))
			i++; /* its value, which may itself start with "--" */
	}
	return NULL;
}
