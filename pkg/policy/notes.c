/* notes.c: the findings about a signed policy that need no server and no
 * sandbox (notes.h). */
#include "policy/notes.h"

#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/limits.h"
#include "json/json.h"

/* A tool name no pattern can spell (a pattern's tool part is A-Z a-z 0-9
 * _ - . /), so only a wildcard entry can decide it. */
#define NOTES_ANY_TOOL " "

/* The policy parsed from bytes known to be the signed ones, with its
 * `tools` patterns sorted for a stable report. */
struct policy_notes {
	json_t *doc;
	struct policy *p;
	const char **pat; /* borrowed from doc */
	bool *read;	  /* the entry's access is "read" */
	size_t n;
};

void policy_notes_free(struct policy_notes *n)
{
	if (!n)
		return;
	policy_free(n->p);
	json_decref(n->doc);
	free(n->pat);
	free(n->read);
	free(n);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int notes_index(struct policy_notes *r, struct appl_err *err)
{
	const json_t *tools = json_object_get(r->doc, "tools");
	const char *pat;
	json_t *v;
	size_t n = json_object_size(tools);

	r->pat = calloc(n ? n : 1, sizeof(*r->pat));
	r->read = calloc(n ? n : 1, sizeof(*r->read));
	if (!r->pat || !r->read)
		return appl_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach((json_t *)tools, pat, v) {
		(void)v;
		r->pat[r->n++] = pat;
	}
	qsort(r->pat, r->n, sizeof(*r->pat), str_cmp);
	for (size_t i = 0; i < r->n; i++) {
		const json_t *access = json_object_get(json_object_get(tools, r->pat[i]), "access");
		r->read[i] =
			json_is_string(access) && strcmp(json_string_value(access), "read") == 0;
	}
	return 0;
}

/* The document in buf, known to be the signed one, parsed twice: as a
 * policy for its rules, and as JSON for its `tools` keys. */
static int notes_parse(const char *buf, size_t len, struct policy_notes *r, struct appl_err *err)
{
	int rc;

	/* Only the patterns are wanted: "/" stands for the file's directory,
	 * whose only use is to resolve the image layout. */
	if ((rc = policy_parse(buf, len, "/", &r->p, err)) < 0)
		return rc;
	if (!(r->doc = appl_json_load(buf, len, APPL_POLICY_FILE_MAX, APPL_POLICY_DEPTH_MAX,
				      "policy", err)))
		return err->code;
	return notes_index(r, err);
}

int policy_notes_load(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		      struct policy_notes **out, struct appl_err *err)
{
	unsigned char got[POLICY_HASH_BYTES];
	struct policy_notes *r;
	char *buf = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!(r = calloc(1, sizeof(*r))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	if ((rc = appl_file_read(path, APPL_POLICY_FILE_MAX, &buf, &len, err)) < 0) {
		free(r);
		return rc;
	}
	crypto_hash_sha256(got, (const unsigned char *)buf, len);
	/* The findings must be about the bytes that were signed or verified,
	 * not about whatever the file holds by now. */
	if (sodium_memcmp(got, hash, sizeof(got)) != 0)
		rc = appl_err_set(err, -ESTALE, "%s: changed since it was read", path);
	if (rc == 0)
		rc = notes_parse(buf, len, r, err);
	free(buf);
	if (rc < 0) {
		policy_notes_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

bool policy_notes_pattern_server(const char *pat, char *out, size_t cap)
{
	const char *dot = strchr(pat, '.');

	if (!dot || (size_t)(dot - pat) >= cap)
		return false;
	memcpy(out, pat, (size_t)(dot - pat));
	out[dot - pat] = '\0';
	return true;
}

const char *policy_notes_pattern_tool(const char *pat)
{
	const char *dot = strchr(pat, '.');
	return dot ? dot + 1 : "";
}

bool policy_notes_pattern_wild(const char *pat)
{
	return strcmp(policy_notes_pattern_tool(pat), "*") == 0;
}

bool policy_notes_pattern_on(const char *pat, const char *server)
{
	size_t n = strlen(server);
	return strncmp(pat, server, n) == 0 && pat[n] == '.';
}

size_t policy_notes_rule_count(const struct policy_notes *n)
{
	return n->n;
}

const char *policy_notes_rule_get(const struct policy_notes *n, size_t i)
{
	return i < n->n ? n->pat[i] : NULL;
}

bool policy_notes_rule_read(const struct policy_notes *n, size_t i)
{
	return i < n->n && n->read[i];
}

bool policy_notes_rule_has(const struct policy_notes *n, const char *pat)
{
	return bsearch(&pat, n->pat, n->n, sizeof(*n->pat), str_cmp) != NULL;
}

/* Whether who may call server.tool for either answer of the server's
 * read-only mark: policy_call_check decides, so this is the bridge's. */
static bool tool_callable(const struct policy *p, const char *server, const char *tool,
			  const struct policy_caller *who)
{
	return policy_call_check(p, who, server, tool, true, NULL) == POLICY_OK ||
	       policy_call_check(p, who, server, tool, false, NULL) == POLICY_OK;
}

/* Whether who, with its patterns pats[0..n) (a role's tools, a code
 * tool's uses), may call some tool that entry i decides: an exact entry
 * its own tool; a wildcard the exact patterns on that server that have no
 * entry of their own, and any other tool when who has the server's
 * wildcard too. */
static bool rule_callable(const struct policy_notes *r, size_t i, const char *const *pats, size_t n,
			  const struct policy_caller *who)
{
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];

	if (!policy_notes_pattern_server(r->pat[i], server, sizeof(server)))
		return false;
	if (!policy_notes_pattern_wild(r->pat[i]))
		return tool_callable(r->p, server, policy_notes_pattern_tool(r->pat[i]), who);
	for (size_t k = 0; k < n; k++) {
		const char *rp = pats[k];

		if (!policy_notes_pattern_on(rp, server))
			continue;
		if (policy_notes_pattern_wild(rp) &&
		    tool_callable(r->p, server, NOTES_ANY_TOOL, who))
			return true;
		if (!policy_notes_pattern_wild(rp) && !policy_notes_rule_has(r, rp) &&
		    tool_callable(r->p, server, policy_notes_pattern_tool(rp), who))
			return true;
	}
	return false;
}

/* Whether role's cells, or the program of a code tool some role may
 * call, may call through entry i. */
static bool rule_used(const struct policy_notes *r, size_t i, const struct policy_role *role)
{
	struct policy_caller who = {.role = role->name};

	if (role->run_python && rule_callable(r, i, role->tools, role->ntools, &who))
		return true;
	for (size_t k = 0; k < policy_code_tool_count(r->p); k++) {
		const struct policy_code_tool *t = policy_code_tool_get(r->p, k);

		who.tool = t;
		if (policy_code_tool_allowed(r->p, role->name, t->name, NULL) == POLICY_OK &&
		    rule_callable(r, i, t->uses, t->nuses, &who))
			return true;
	}
	return false;
}

static void roles_emit(const struct policy_notes *r, policy_note_fn fn, void *data)
{
	char text[APPL_ERR_MSG_MAX];
	size_t nroles = policy_role_count(r->p);

	for (size_t k = 0; k < nroles; k++) {
		const struct policy_role *role = policy_role_get(r->p, k);
		bool any = false;

		for (size_t i = 0; i < r->n && !any; i++)
			any = rule_used(r, i, role);
		if (any)
			continue;
		snprintf(text, sizeof(text),
			 "roles.%s: its patterns match no tools entry that allows it a call: it "
			 "can call nothing",
			 role->name);
		fn(data, POLICY_NOTE_ROLE_IDLE, text);
	}
}

static void rules_emit(const struct policy_notes *r, policy_note_fn fn, void *data)
{
	char text[APPL_ERR_MSG_MAX];
	size_t nroles = policy_role_count(r->p);

	for (size_t i = 0; i < r->n; i++) {
		bool used = false;

		for (size_t k = 0; k < nroles && !used; k++)
			used = rule_used(r, i, policy_role_get(r->p, k));
		if (used)
			continue;
		snprintf(text, sizeof(text), "tools.\"%s\": no role can call a tool through it",
			 r->pat[i]);
		fn(data, POLICY_NOTE_RULE_UNUSED, text);
	}
}

void policy_notes_emit(const struct policy_notes *n, policy_note_fn fn, void *data)
{
	const struct policy_http *h = policy_http(n->p);

	/* OAuth access tokens name their role themselves */
	if (!policy_client_default_role(n->p) && policy_token_count(n->p) == 0 && !(h && h->oauth))
		fn(data, POLICY_NOTE_NO_CLIENT,
		   "clients: no default_role and no tokens: no client can call any tool");
	roles_emit(n, fn, data);
	rules_emit(n, fn, data);
}

int policy_notes_check(const char *path, const unsigned char hash[POLICY_HASH_BYTES],
		       policy_note_fn fn, void *data, struct appl_err *err)
{
	struct policy_notes *n;
	int rc = policy_notes_load(path, hash, &n, err);

	if (rc < 0)
		return rc;
	policy_notes_emit(n, fn, data);
	policy_notes_free(n);
	return 0;
}
