/* internal.h: the bridge's own types, shared by its files only. */
#ifndef APPL_BRIDGE_INTERNAL_H
#define APPL_BRIDGE_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "policy/policy.h"
#include "schema/schema.h"
#include "stubs/stubs.h"

struct bridge_entry {
	char *server, *name, *description;
	size_t order; /* position in the caller's list */
	json_t *input_schema;
	struct schema *schema; /* NULL: schema_why says why */
	char *schema_why;
	bool strict; /* undeclared argument names are refused */
	bool name_bad;
	enum policy_verdict verdict;
	enum policy_access access;
};

struct bridge_catalog {
	unsigned refs;
	struct bridge_entry *e; /* sorted by server, then name */
	size_t n;
	struct stubs *stubs;
	json_t *runner_tools;
};

const struct bridge_entry *bridge_catalog_find(const struct bridge_catalog *c, const char *server,
					       const char *name);
const char *bridge_entry_why_not(const struct bridge_entry *e);

#endif
