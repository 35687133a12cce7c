/* draft.c: a policy written from scratch (see draft.h). */
#define _GNU_SOURCE
#include "policy/draft.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/minisign.h"

struct policy_draft {
	json_t *root;  /* policy_version to servers, in the order written */
	json_t *tools; /* "SERVER.TOOL" -> {"access": ...}, borrowed from root */
};

struct policy_draft *policy_draft_new(const struct policy_draft_head *h)
{
	struct policy_draft *d = calloc(1, sizeof(*d));
	char expires[POLICY_TIME_STR];

	if (!d || policy_sig_time_format(h->expires, expires, sizeof(expires)) < 0) {
		free(d);
		return NULL;
	}
	d->root = json_pack("{s:i, s:I, s:s, s:s, s:{s:s, s:s}, s:{}, s:{}}", "policy_version", 1,
			    "serial", (json_int_t)h->serial, "expires", expires, "deployment",
			    h->deployment, "image", "layout", h->layout, "digest", h->digest,
			    "servers", "tools");
	if (!d->root) {
		free(d);
		return NULL;
	}
	d->tools = json_object_get(d->root, "tools");
	return d;
}

void policy_draft_free(struct policy_draft *d)
{
	if (!d)
		return;
	json_decref(d->root);
	free(d);
}

int policy_draft_server_add(struct policy_draft *d, const char *name, const char *const *argv,
			    size_t argc)
{
	json_t *cmd = json_array();

	for (size_t i = 0; cmd && i < argc; i++)
		if (json_array_append_new(cmd, json_string(argv[i])) < 0) {
			json_decref(cmd);
			cmd = NULL;
		}
	if (!cmd || json_object_set_new(json_object_get(d->root, "servers"), name,
					json_pack("{s:o}", "command", cmd)) < 0)
		return -ENOMEM;
	return 0;
}

void policy_draft_server_remove(struct policy_draft *d, const char *name)
{
	size_t n = strlen(name);
	const char *pat;
	json_t *entry;
	void *tmp;

	json_object_del(json_object_get(d->root, "servers"), name);
	json_object_foreach_safe(d->tools, tmp, pat, entry)
		if (strncmp(pat, name, n) == 0 && pat[n] == '.')
			json_object_del(d->tools, pat);
}

static char *pattern_new(const char *server, const char *tool)
{
	char *pat;

	return asprintf(&pat, "%s.%s", server, tool) < 0 ? NULL : pat;
}

int policy_draft_tool_add(struct policy_draft *d, const char *server, const char *tool,
			  enum policy_access access)
{
	char *pat = pattern_new(server, tool);
	int rc = -ENOMEM;

	if (pat &&
	    json_object_set_new(d->tools, pat,
				json_pack("{s:s}", "access",
					  access == POLICY_ACCESS_READ ? "read" : "write")) == 0)
		rc = 0;
	free(pat);
	return rc;
}

void policy_draft_tool_remove(struct policy_draft *d, const char *server, const char *tool)
{
	char *pat = pattern_new(server, tool);

	if (pat)
		json_object_del(d->tools, pat);
	free(pat);
}

/* roles and clients, from the tools as they are now. */
static int roles_add(json_t *doc, const json_t *tools)
{
	json_t *reads = json_array(), *all = json_array(), *entry;
	const char *pat;
	int rc = 0;

	json_object_foreach((json_t *)tools, pat, entry) {
		const char *access = json_string_value(json_object_get(entry, "access"));

		if (json_array_append_new(all, json_string(pat)) < 0 ||
		    (strcmp(access, "read") == 0 &&
		     json_array_append_new(reads, json_string(pat)) < 0))
			rc = -ENOMEM;
	}
	if (rc == 0 &&
	    (!reads || !all ||
	     json_object_set_new(doc, "roles",
				 json_pack("{s:{s:O, s:b}, s:{s:O, s:b}}", POLICY_DRAFT_READER,
					   "tools", reads, "write", 0, POLICY_DRAFT_WRITER, "tools",
					   all, "write", 1)) < 0 ||
	     json_object_set_new(doc, "clients",
				 json_pack("{s:s}", "default_role", POLICY_DRAFT_READER)) < 0))
		rc = -ENOMEM;
	json_decref(reads);
	json_decref(all);
	return rc;
}

char *policy_draft_text(const struct policy_draft *d, size_t *len, struct policy **p,
			struct appl_err *err)
{
	json_t *doc = json_copy(d->root);
	struct policy *parsed = NULL;
	char *text = NULL, *line;

	if (!doc || roles_add(doc, d->tools) < 0 || !(text = json_dumps(doc, JSON_INDENT(2)))) {
		json_decref(doc);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	json_decref(doc);
	*len = strlen(text);
	if (!(line = realloc(text, *len + 2))) {
		free(text);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	text = line;
	memcpy(text + (*len)++, "\n", 2);
	if (policy_parse(text, *len, NULL, &parsed, err) < 0) {
		free(text);
		return NULL;
	}
	if (p)
		*p = parsed;
	else
		policy_free(parsed);
	return text;
}
