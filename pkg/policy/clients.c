/* clients.c: the `clients` section: the role a stdio client gets, and the
 * bearer tokens of HTTP clients, known only by their SHA-256 and matched
 * in constant time. Tokens name roles, so this is read after `roles`. */
#include "policy/internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

static int role_ref_check(struct ctx *c, const char *role, const char *path)
{
	if (!policy_role_find(c->p, role))
		return appl_err_set(c->err, -EINVAL, "%s: no role named %.*s", path,
				    APPL_POLICY_LABEL_MAX, role);
	return 0;
}

static int default_role_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	(void)base;
	if (!json_is_string(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be a string", path);
	int rc = role_ref_check(c, json_string_value(v), path);
	if (rc == 0)
		c->p->default_role = json_string_value(v);
	return rc;
}

static int unhex(char ch)
{
	if (is_digit(ch))
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

static int token_hash_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_token *t = base;
	const char *s = json_is_string(v) ? json_string_value(v) : "";
	bool ok = json_is_string(v) && json_string_length(v) == 2 * POLICY_TOKEN_HASH_LEN;

	for (size_t i = 0; ok && i < POLICY_TOKEN_HASH_LEN; i++) {
		int hi = unhex(s[2 * i]), lo = unhex(s[2 * i + 1]);
		ok = hi >= 0 && lo >= 0;
		if (ok)
			t->sha256[i] = (unsigned char)(hi << 4 | lo);
	}
	if (!ok)
		return appl_err_set(c->err, -EINVAL, "%s: must be 64 lower-case hex digits", path);
	return 0;
}

static int token_role_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_token *t = base;

	if (!json_is_string(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be a string", path);
	int rc = role_ref_check(c, json_string_value(v), path);
	if (rc == 0)
		t->role = json_string_value(v);
	return rc;
}

static const struct field token_fields[] = {
	{.name = "name",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_token, name),
	 .maxlen = APPL_POLICY_LABEL_MAX,
	 .check = policy_label_check},
	{.name = "sha256", .type = F_FN, .required = true, .parse = token_hash_parse},
	{.name = "role", .type = F_FN, .required = true, .parse = token_role_parse},
};

/* Names are what the audit log records and hashes what picks the role: two
 * tokens sharing either would make a log line or a role ambiguous. */
static int token_unique_check(struct ctx *c, size_t i, const char *path)
{
	const struct policy_token *t = &c->p->tokens[i];

	for (size_t j = 0; j < i; j++) {
		const struct policy_token *u = &c->p->tokens[j];
		if (strcmp(t->name, u->name) == 0)
			return appl_err_set(c->err, -EINVAL,
					    "%s[%zu].name: also the name of %s[%zu]", path, i, path,
					    j);
		if (memcmp(t->sha256, u->sha256, sizeof(t->sha256)) == 0)
			return appl_err_set(c->err, -EINVAL,
					    "%s[%zu].sha256: also the hash of %s[%zu]", path, i,
					    path, j);
	}
	return 0;
}

static int tokens_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const json_t *tv;
	size_t i;
	int rc = policy_array_check(c, v, 0, APPL_POLICY_TOKENS_MAX, "tokens", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->tokens = calloc(json_array_size(v) + 1, sizeof(*p->tokens));
	if (!p->tokens)
		return policy_ctx_nomem(c);
	json_array_foreach(v, i, tv) {
		struct policy_token *t = &p->tokens[i];
		policy_path_index(sub, path, i);
		rc = policy_fields_parse(c, tv, token_fields, NELEM(token_fields), t, sub);
		if (rc < 0)
			return rc;
		rc = token_unique_check(c, i, path);
		if (rc < 0)
			return rc;
		p->ntokens++;
	}
	return 0;
}

static const struct field client_fields[] = {
	{.name = "default_role", .type = F_FN, .parse = default_role_parse},
	{.name = "tokens", .type = F_FN, .parse = tokens_parse},
};

int policy_clients_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_fields_parse(c, v, client_fields, NELEM(client_fields), base, path);
}

/* ---- accessors ----------------------------------------------------------- */

const char *policy_client_default_role(const struct policy *p)
{
	return p->default_role;
}

size_t policy_token_count(const struct policy *p)
{
	return p->ntokens;
}

const struct policy_token *policy_token_get(const struct policy *p, size_t i)
{
	return i < p->ntokens ? &p->tokens[i] : NULL;
}

const struct policy_token *policy_token_match(const struct policy *p, const unsigned char *sha256)
{
	const struct policy_token *found = NULL;

	for (size_t i = 0; sha256 && i < p->ntokens; i++)
		if (sodium_memcmp(p->tokens[i].sha256, sha256, POLICY_TOKEN_HASH_LEN) == 0)
			found = &p->tokens[i];
	return found;
}
