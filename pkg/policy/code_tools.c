/* code_tools.c: the `code_tools` section (docs/code-tools.md): programs
 * signed in the policy and served as MCP tools of their own, each with its
 * schemas compiled, its uses checked against `tools`, and its program
 * pinned by SHA-256; and policy_code_files_read, which reads the programs
 * kept in files. Read after `tools` (the uses are held to it) and before
 * `roles` (which name code tools). */
#include "policy/internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/utf8.h"
#include "schema/schema.h"

/* ---- fields ------------------------------------------------------------------ */

bool policy_code_tool_name_valid(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return len >= 1 && len <= APPL_CODE_TOOL_NAME_MAX;
}

static int name_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	const char *s = json_string_value(v);

	if (!s || !policy_code_tool_name_valid(s, json_string_length(v)))
		return appl_err_set(c->err, -EINVAL,
				    "%s: must be 1 to %d of A-Z a-z 0-9 _ - (the MCP tool's name)",
				    path, APPL_CODE_TOOL_NAME_MAX);
	if (strcmp(s, "run_python") == 0)
		return appl_err_set(c->err, -EINVAL,
				    "%s: run_python is the appliance's own tool; choose another "
				    "name",
				    path);
	t->pub.name = s;
	return 0;
}

/* An MCP tool's schema: an object whose root says "type": "object", that
 * the project's validator compiles completely. */
static int schema_parse(struct ctx *c, const json_t *v, const char *path, struct schema **out)
{
	struct appl_err serr = {0};
	int rc;
	const char *type = json_string_value(json_object_get(v, "type"));

	if (!json_is_object(v) || !type || strcmp(type, "object") != 0)
		return appl_err_set(c->err, -EINVAL,
				    "%s: must be a JSON Schema object with \"type\": \"object\" "
				    "(MCP's tool schemas describe an object)",
				    path);
	rc = schema_new(v, out, &serr);
	if (rc == -ENOMEM)
		return policy_ctx_nomem(c);
	if (rc < 0)
		return appl_err_set(c->err, -EINVAL, "%s: %s: %s", path,
				    rc == -ENOTSUP
					    ? "not supported by the validator (docs/schema.md)"
					    : "not a valid schema",
				    serr.msg);
	return 0;
}

static int input_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	int rc = schema_parse(c, v, path, &t->input);

	t->pub.input_schema = v;
	t->pub.input = t->input;
	return rc;
}

static int output_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	int rc = schema_parse(c, v, path, &t->output);

	t->pub.output_schema = v;
	t->pub.output = t->output;
	return rc;
}

/* The example must be arguments the tool takes: input_schema is read
 * first (the table's order). */
static int example_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	struct appl_err verr = {0};

	if (!json_is_object(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object (the arguments)", path);
	if (t->input && schema_validate(t->input, v, &verr) < 0)
		return appl_err_set(c->err, -EINVAL, "%s: does not match input_schema: %s", path,
				    verr.msg);
	t->pub.example = v;
	return 0;
}

static int code_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;

	if (!json_is_string(v) || json_string_length(v) == 0)
		return appl_err_set(c->err, -EINVAL, "%s: must be the program (a string)", path);
	if (json_string_length(v) > APPL_CELL_CODE_MAX)
		return appl_err_set(c->err, -EINVAL, "%s: longer than %u bytes", path,
				    APPL_CELL_CODE_MAX);
	t->pub.code = json_string_value(v);
	t->pub.code_len = json_string_length(v);
	return 0;
}

static int file_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	int rc;

	if (!json_is_string(v) || json_string_length(v) > APPL_POLICY_PATH_MAX)
		return appl_err_set(c->err, -EINVAL, "%s: must be a path of at most %d bytes", path,
				    APPL_POLICY_PATH_MAX);
	rc = policy_layout_check(json_string_value(v), json_string_length(v), path, c->err);
	if (rc == 0)
		rc = policy_path_resolve(c, json_string_value(v), path, &t->file);
	t->pub.file = t->file;
	return rc;
}

static int sha256_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct code_tool *t = base;
	const char *s = json_string_value(v);
	bool ok = s && json_string_length(v) == 64;

	for (size_t i = 0; ok && i < 64; i++)
		ok = is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'f');
	if (!ok)
		return appl_err_set(c->err, -EINVAL,
				    "%s: must be the file's SHA-256, 64 lower-case hex digits "
				    "(sha256sum prints it)",
				    path);
	memcpy(t->pub.sha256, s, 65);
	return 0;
}

static int access_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_access_parse(c, v, path, &((struct code_tool *)base)->pub.access);
}

/* The `tools` entry that decides a use "server.tool" or "server.*" (its
 * form checked: policy_pattern_check), or NULL. */
static const struct rule *use_rule(const struct policy *p, const char *pat)
{
	const char *dot = strchr(pat, '.');
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];

	memcpy(server, pat, (size_t)(dot - pat));
	server[dot - pat] = '\0';
	return policy_rule_of(p, server, dot + 1);
}

/* Each use a pattern a `tools` entry allows: "server.*" only under a
 * "server.*" entry (which alone says what the server's unnamed tools
 * are); a read code tool uses no tool `tools` names as a write. */
static int use_check(struct ctx *c, const struct code_tool *t, const char *pat, const char *path)
{
	const char *tool = strchr(pat, '.') + 1;
	const struct rule *r = use_rule(c->p, pat);

	/* a wildcard use must meet a wildcard entry, not an exact one */
	if (!r || (strcmp(tool, "*") == 0 && strcmp(strchr(r->pattern, '.') + 1, "*") != 0))
		return appl_err_set(c->err, -EINVAL,
				    "%s: no `tools` entry allows %s; add one (a program may call "
				    "only what `tools` allows)",
				    path, pat);
	if (t->pub.access == POLICY_ACCESS_READ && r->access == POLICY_ACCESS_WRITE &&
	    strcmp(strchr(r->pattern, '.') + 1, "*") != 0)
		return appl_err_set(c->err, -EINVAL,
				    "%s: %s is a write tool (`tools` says \"write\"); a code tool "
				    "that calls it needs \"access\": \"write\"",
				    path, pat);
	return 0;
}

static int uses_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct code_tool *t = base;
	int rc = policy_array_check(c, v, 0, APPL_CODE_TOOL_USES_MAX, "patterns", path);

	if (rc < 0)
		return rc;
	rc = policy_strings_parse(c, v, APPL_POLICY_SERVER_NAME_MAX + 1 + APPL_POLICY_TOOL_NAME_MAX,
				  NULL, NULL, path, &t->uses, &t->pub.nuses);
	t->pub.uses = t->uses;
	for (size_t i = 0; rc == 0 && i < t->pub.nuses; i++) {
		policy_path_index(sub, path, i);
		rc = policy_pattern_check(c, t->uses[i], sub);
		if (rc == 0)
			rc = use_check(c, t, t->uses[i], sub);
		for (size_t j = 0; rc == 0 && j < i; j++)
			if (strcmp(t->uses[i], t->uses[j]) == 0)
				rc = appl_err_set(c->err, -EINVAL, "%s: listed twice", sub);
	}
	return rc;
}

/* In this order: access before uses (which it judges), input_schema before
 * example (which must match it). */
static const struct field tool_fields[] = {
	{.name = "name", .type = F_FN, .required = true, .parse = name_parse},
	{.name = "description",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct code_tool, pub.description),
	 .maxlen = APPL_CODE_TOOL_DESC_MAX},
	{.name = "input_schema", .type = F_FN, .required = true, .parse = input_parse},
	{.name = "output_schema", .type = F_FN, .parse = output_parse},
	{.name = "example", .type = F_FN, .parse = example_parse},
	{.name = "code", .type = F_FN, .parse = code_parse},
	{.name = "file", .type = F_FN, .parse = file_parse},
	{.name = "sha256", .type = F_FN, .parse = sha256_parse},
	{.name = "access", .type = F_FN, .parse = access_parse},
	{.name = "uses", .type = F_FN, .required = true, .parse = uses_parse},
};

/* ---- one tool, whole ------------------------------------------------------------- */

/* The SHA-256 of buf[0..len) in lower-case hex, into out. */
static void sha256_hex(const char *buf, size_t len, char out[65])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, (const unsigned char *)buf, len);
	sodium_bin2hex(out, 65, h, sizeof(h));
}

/* A program in the policy or in a file, never both; a file with its hash. */
static int program_check(struct ctx *c, struct code_tool *t, const char *path)
{
	if (!t->pub.code == !t->file)
		return appl_err_set(c->err, -EINVAL,
				    "%s: needs the program as \"code\" (a string) or as \"file\" "
				    "with its \"sha256\", one of the two",
				    path);
	if (t->file && !t->pub.sha256[0])
		return appl_err_set(c->err, -EINVAL,
				    "%s.sha256: missing (the file's SHA-256 pins the program; "
				    "sha256sum prints it)",
				    path);
	if (!t->file && t->pub.sha256[0])
		return appl_err_set(c->err, -EINVAL,
				    "%s.sha256: only with \"file\" (a program in the policy is "
				    "signed as it is)",
				    path);
	if (t->pub.code)
		sha256_hex(t->pub.code, t->pub.code_len, t->pub.sha256);
	return 0;
}

/* A write code tool must be able to write: one of its uses is a write
 * entry of `tools`, or a server's tools under a "write" wildcard. */
static int write_check(struct ctx *c, const struct code_tool *t, const char *path)
{
	for (size_t i = 0; t->pub.access == POLICY_ACCESS_WRITE && i < t->pub.nuses; i++) {
		const struct rule *r = use_rule(c->p, t->uses[i]);

		if (r && r->access == POLICY_ACCESS_WRITE)
			return 0;
	}
	if (t->pub.access == POLICY_ACCESS_WRITE)
		return appl_err_set(c->err, -EINVAL,
				    "%s.access: \"write\", but none of its uses is a write tool in "
				    "`tools`; leave access out (read)",
				    path);
	return 0;
}

static int tool_cmp(const void *a, const void *b)
{
	return strcmp(((const struct code_tool *)a)->pub.name,
		      ((const struct code_tool *)b)->pub.name);
}

int policy_code_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const json_t *e;
	size_t i;
	int rc = policy_array_check(c, v, 0, APPL_CODE_TOOLS_MAX, "code tools", path);

	(void)base;
	if (rc < 0)
		return rc;
	if (!(p->code_tools = calloc(json_array_size(v) + 1, sizeof(*p->code_tools))))
		return policy_ctx_nomem(c);
	json_array_foreach(v, i, e) {
		struct code_tool *t = &p->code_tools[p->ncode_tools++];

		policy_path_index(sub, path, i);
		rc = policy_fields_parse(c, e, tool_fields, NELEM(tool_fields), t, sub);
		if (rc == 0)
			rc = program_check(c, t, sub);
		if (rc == 0)
			rc = write_check(c, t, sub);
		for (size_t j = 0; rc == 0 && j < i; j++)
			if (strcmp(p->code_tools[j].pub.name, t->pub.name) == 0)
				rc = appl_err_set(c->err, -EINVAL, "%s.name: %s is named twice",
						  sub, t->pub.name);
		if (rc < 0)
			return rc;
	}
	qsort(p->code_tools, p->ncode_tools, sizeof(*p->code_tools), tool_cmp);
	return 0;
}

void policy_code_tools_free(struct policy *p)
{
	for (size_t i = 0; i < p->ncode_tools; i++) {
		struct code_tool *t = &p->code_tools[i];

		free(t->file);
		free(t->code);
		free(t->uses);
		schema_free(t->input);
		schema_free(t->output);
	}
	free(p->code_tools);
}

/* ---- the programs in files ----------------------------------------------------------- */

static int file_read(struct code_tool *t, struct appl_err *err)
{
	char hex[sizeof(t->pub.sha256)];
	size_t len;
	int rc = appl_file_read(t->file, APPL_CELL_CODE_MAX, &t->code, &len, err);

	if (rc < 0)
		return appl_err_prefix(err, "code_tools %s: the program", t->pub.name);
	sha256_hex(t->code, len, hex);
	if (strcmp(hex, t->pub.sha256) != 0)
		return appl_err_set(err, -EBADMSG,
				    "code_tools %s: the program %s has sha256:%s, the policy says "
				    "sha256:%s; if the change is meant, put the new digest in the "
				    "policy and sign it again",
				    t->pub.name, t->file, hex, t->pub.sha256);
	if (len == 0 || memchr(t->code, '\0', len) || appl_utf8_prefix(t->code, len) != len)
		return appl_err_set(err, -EINVAL,
				    "code_tools %s: the program %s must be UTF-8 text without NUL "
				    "bytes, not empty",
				    t->pub.name, t->file);
	t->pub.code = t->code;
	t->pub.code_len = len;
	return 0;
}

int policy_code_files_read(struct policy *p, struct appl_err *err)
{
	for (size_t i = 0; i < p->ncode_tools; i++) {
		struct code_tool *t = &p->code_tools[i];
		int rc;

		if (!t->file || t->code)
			continue;
		if ((rc = file_read(t, err)) < 0)
			return rc;
	}
	return 0;
}

/* ---- accessors ------------------------------------------------------------------------- */

size_t policy_code_tool_count(const struct policy *p)
{
	return p->ncode_tools;
}

const struct policy_code_tool *policy_code_tool_get(const struct policy *p, size_t i)
{
	return i < p->ncode_tools ? &p->code_tools[i].pub : NULL;
}

const struct policy_code_tool *policy_code_tool_find(const struct policy *p, const char *name)
{
	for (size_t i = 0; name && i < p->ncode_tools; i++)
		if (strcmp(p->code_tools[i].pub.name, name) == 0)
			return &p->code_tools[i].pub;
	return NULL;
}
