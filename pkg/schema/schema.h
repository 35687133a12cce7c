/* schema.h: JSON Schema validation of tool arguments, on jansson.
 *
 * Every tool call's arguments are checked against the tool's input schema
 * before any upstream sees them. The schema itself comes from the upstream
 * (tools/list), so it is untrusted too: it is compiled once (references
 * resolved, patterns compiled, every keyword's form checked, every cap of
 * limits.h "schema" applied) and then used for many validations.
 *
 * Dialects: 2020-12 by default; draft-07 when the root's "$schema" names it.
 * What is supported, and how patterns differ from ECMA-262: docs/schema.md.
 *
 * Fails closed. A schema this validator cannot check completely is refused
 * when it is compiled, never half-applied: a remote "$ref", "$dynamicRef",
 * "$recursiveRef", "unevaluatedProperties"/"unevaluatedItems", an unknown
 * "$schema", a keyword of the other dialect, a "$ref" cycle that makes no
 * progress through the instance, or a pattern PCRE2 cannot compile is
 * -ENOTSUP. Nothing is ever fetched.
 *
 * Thread safety: a compiled schema is never written after schema_new, so
 * schema_validate may run on one schema from several threads at once.
 */
#ifndef APPL_SCHEMA_SCHEMA_H
#define APPL_SCHEMA_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

#include "base/err.h"

struct schema;

/* Which dialect a compiled schema follows. */
enum schema_draft {
	SCHEMA_DRAFT_2020_12 = 1,
	SCHEMA_DRAFT_07 = 2,
};

/* Compile doc (borrowed: a deep copy is kept, so the caller may change or
 * free doc afterwards). On success *out is new (schema_free it) and 0 is
 * returned. On failure *out is NULL, err says where in the schema and why,
 * and the code is:
 *   -ENOTSUP  a feature this validator refuses (see above);
 *   -EINVAL   a malformed schema (a keyword of the wrong form, a local
 *             "$ref" that resolves to nothing, a duplicate "$id");
 *   -E2BIG    a cap of limits.h "schema" was passed;
 *   -ENOMEM. */
int schema_new(const json_t *doc, struct schema **out, struct appl_err *err);

/* As schema_new, with dflt as the dialect of a document whose root has no
 * "$schema" (schema_new uses SCHEMA_DRAFT_2020_12). */
int schema_new_draft(const json_t *doc, enum schema_draft dflt, struct schema **out,
		     struct appl_err *err);

/* Parse buf[0..len) (not NUL-terminated, untrusted) as one JSON document with
 * the strict loader (size cap max_len, depth APPL_SCHEMA_DEPTH_MAX, duplicate
 * keys refused), then compile it as schema_new does. *out is new. */
int schema_new_buf(const char *buf, size_t len, size_t max_len, struct schema **out,
		   struct appl_err *err);

/* Free s and everything it owns; s may be NULL. */
void schema_free(struct schema *s);

/* The dialect s was compiled under. */
enum schema_draft schema_draft_get(const struct schema *s);

/* Validate instance (borrowed) against s (borrowed). Returns 0 when it is
 * valid. Otherwise err holds one line of at most APPL_TOOL_ERROR_MAX
 * characters naming the instance path and the keyword
 * ("/b: expected number, got string"), quoting names of properties but
 * never the values of the arguments, and the code is:
 *   -EINVAL   the instance does not validate;
 *   -E2BIG    a cap was reached (instance too deep, too many subschemas
 *             evaluated, too many values compared, regex work): treat it
 *             as a refusal, never as valid;
 *   -ENOMEM. */
int schema_validate(const struct schema *s, const json_t *instance, struct appl_err *err);

/* As schema_validate; on -EINVAL *keyword (may be NULL) is also set to the
 * name of the keyword that failed, as a schema writes it ("required",
 * "type", ...; "false" for a false schema; static), which holds nothing of
 * the instance; NULL when valid, on a cap, or when none can be named. */
int schema_validate_kw(const struct schema *s, const json_t *instance, struct appl_err *err,
		       const char **keyword);

#endif
