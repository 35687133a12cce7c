/* schema.c: compiling a schema document (see schema.h), and freeing one.
 * This file sits above the compiler (compile.c) and the keywords
 * (keywords.c): it hands the compiler the keyword table, so the two call
 * each other only through that table. */
#include <errno.h>

#include "json/json.h"
#include "schema/internal.h"

int schema_new_draft(const json_t *doc, enum schema_draft dflt, struct schema **out,
		     struct appl_err *err)
{
	struct cc cc = {.err = err, .table = schema_kw_table, .n_table = schema_kw_count};
	struct schema *s;
	int rc;

	*out = NULL;
	if (!doc)
		return appl_err_set(err, -EINVAL, "schema: no document");
	if (dflt != SCHEMA_DRAFT_2020_12 && dflt != SCHEMA_DRAFT_07)
		return appl_err_set(err, -EINVAL, "schema: unknown dialect %d", (int)dflt);
	/* jansson's own recursion is bounded only by its build-time 2048. */
	if (!schema_json_depth_ok(doc, 0))
		return appl_err_set(err, -E2BIG, "schema: nested deeper than %d levels",
				    APPL_SCHEMA_DEPTH_MAX);
	s = calloc(1, sizeof(*s));
	if (!s)
		return appl_err_set(err, -ENOMEM, "schema: out of memory");
	s->doc = json_deep_copy(doc);
	if (!s->doc) {
		free(s);
		return appl_err_set(err, -ENOMEM, "schema: out of memory");
	}
	cc.s = s;
	rc = schema_compile_all(&cc, dflt);
	schema_cc_release(&cc);
	if (rc < 0) {
		schema_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int schema_new(const json_t *doc, struct schema **out, struct appl_err *err)
{
	return schema_new_draft(doc, SCHEMA_DRAFT_2020_12, out, err);
}

int schema_new_buf(const char *buf, size_t len, size_t max_len, struct schema **out,
		   struct appl_err *err)
{
	json_t *doc;
	int rc;

	struct appl_err local = {0};

	*out = NULL;
	doc = appl_json_load(buf, len, max_len, APPL_SCHEMA_DEPTH_MAX, "schema",
			     err ? err : &local);
	if (!doc)
		return err ? err->code : local.code;
	rc = schema_new(doc, out, err);
	json_decref(doc);
	return rc;
}

void schema_free(struct schema *s)
{
	if (!s)
		return;
	schema_arena_free(s);
	for (size_t i = 0; i < s->n_codes; i++)
		pcre2_code_free(s->codes[i]);
	free(s->codes);
	json_decref(s->doc);
	free(s);
}

enum schema_draft schema_draft_get(const struct schema *s)
{
	return s->draft;
}
