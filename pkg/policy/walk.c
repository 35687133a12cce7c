/* walk.c: the field walker (see internal.h).
 *
 * Each object of the document has a field table (name, type, required,
 * where the value goes, range or check); one walker refuses unknown keys and
 * missing required ones and dispatches on the type, so a field cannot be
 * accepted without being checked. Every message starts with the path of the
 * field it is about. The array helpers here are the walker's for lists:
 * sizes checked before anything is allocated, each element checked.
 */
#include "policy/internal.h"

#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A key quoted in a path: long enough for server.tool, short enough that a
 * hostile key cannot crowd the message out. */
#define KEY_SHOWN_MAX 170

int policy_ctx_nomem(struct ctx *c)
{
	return appl_err_set(c->err, -ENOMEM, "policy: out of memory");
}

void policy_path_key(char *out, const char *parent, const char *key)
{
	snprintf(out, FIELD_PATH_MAX, "%s%s%.*s", parent, *parent ? "." : "", KEY_SHOWN_MAX, key);
}

void policy_path_index(char *out, const char *parent, size_t i)
{
	snprintf(out, FIELD_PATH_MAX, "%s[%zu]", parent, i);
}

static const struct field *field_find(const struct field *tab, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tab[i].name, name) == 0)
			return &tab[i];
	return NULL;
}

/* Keys longer than this get no suggestion: the distance table is on the
 * stack, and no field name comes close to it. */
#define SUGGEST_KEY_MAX 40

/* A case difference, or '-' for '_', is no slip worth counting. */
static int key_fold(char ch)
{
	return ch == '-' ? '_' : tolower((unsigned char)ch);
}

/* The Levenshtein distance between a and b, SIZE_MAX when either is longer
 * than SUGGEST_KEY_MAX. */
static size_t key_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[SUGGEST_KEY_MAX + 1];

	if (la > SUGGEST_KEY_MAX || lb > SUGGEST_KEY_MAX)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag + (key_fold(a[i - 1]) != key_fold(b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

/* The name in tab closest to an unknown key, when it is close enough to be
 * a slip (at most a third of the name's length in edits, and at least one
 * allowed), else NULL: "deadline" for deadline_s, never "a" for cells. */
static const char *field_closest(const struct field *tab, size_t n, const char *key)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (size_t i = 0; i < n; i++) {
		size_t d = key_distance(key, tab[i].name), len = strlen(tab[i].name);

		if (d <= (len >= 6 ? len / 3 : 1) && d < best_d) {
			best = tab[i].name;
			best_d = d;
		}
	}
	return best;
}

void policy_fields_default(const struct field *tab, size_t n, void *base)
{
	for (size_t i = 0; i < n; i++) {
		char *at = (char *)base + tab[i].off;
		if (tab[i].type == F_UINT)
			*(unsigned *)at = tab[i].def;
		else if (tab[i].type == F_BOOL)
			*(bool *)at = tab[i].def != 0;
		else if (tab[i].type == F_STR)
			*(const char **)at = tab[i].sdef;
	}
}

static int field_parse(struct ctx *c, const struct field *f, void *base, const json_t *v,
		       const char *path)
{
	char *at = (char *)base + f->off;

	switch (f->type) {
	case F_UINT: {
		json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
		if (n < (json_int_t)f->min || n > (json_int_t)f->max) {
			if (f->min == f->max)
				return appl_err_set(c->err, -EINVAL, "%s: must be %u", path,
						    f->min);
			return appl_err_set(c->err, -EINVAL,
					    "%s: must be an integer between %u and %u", path,
					    f->min, f->max);
		}
		*(unsigned *)at = (unsigned)n;
		return 0;
	}
	case F_BOOL:
		if (!json_is_boolean(v))
			return appl_err_set(c->err, -EINVAL, "%s: must be true or false", path);
		*(bool *)at = json_is_true(v);
		return 0;
	case F_STR: {
		if (!json_is_string(v))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", path);
		size_t len = json_string_length(v);
		if (len > f->maxlen)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %zu bytes", path,
					    f->maxlen);
		int rc = f->check ? f->check(json_string_value(v), len, path, c->err) : 0;
		if (rc < 0)
			return rc;
		*(const char **)at = json_string_value(v);
		return 0;
	}
	case F_FN:
		return f->parse(c, base, v, path);
	}
	return appl_err_set(c->err, -EINVAL, "%s: internal error: unknown field type", path);
}

/* obj must be an object holding only keys of tab and every required one;
 * each value is parsed by its field, in table order. */
int policy_fields_parse(struct ctx *c, const json_t *obj, const struct field *tab, size_t n,
			void *base, const char *path)
{
	char sub[FIELD_PATH_MAX];
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object", path);
	json_object_foreach((json_t *)obj, key, v) {
		if (!field_find(tab, n, key)) {
			const char *near = field_closest(tab, n, key);

			policy_path_key(sub, path, key);
			if (near)
				return appl_err_set(c->err, -EINVAL,
						    "%s: unknown key; did you mean %s?", sub, near);
			return appl_err_set(c->err, -EINVAL, "%s: unknown key", sub);
		}
	}
	for (size_t i = 0; i < n; i++) {
		v = json_object_get(obj, tab[i].name);
		policy_path_key(sub, path, tab[i].name);
		if (!v) {
			if (tab[i].required)
				return appl_err_set(c->err, -EINVAL, "%s: missing", sub);
			continue;
		}
		int rc = field_parse(c, &tab[i], base, v, sub);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* An array of at most max elements; what names its contents in the message. */
int policy_array_check(struct ctx *c, const json_t *v, size_t min, size_t max, const char *what,
		       const char *path)
{
	if (!json_is_array(v) || json_array_size(v) < min || json_array_size(v) > max)
		return appl_err_set(c->err, -EINVAL, "%s: must be an array of %zu to %zu %s", path,
				    min, max, what);
	return 0;
}

/* An object of at most max members. */
int policy_map_check(struct ctx *c, const json_t *v, size_t max, const char *what, const char *path)
{
	if (!json_is_object(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object", path);
	if (json_object_size(v) > max)
		return appl_err_set(c->err, -EINVAL, "%s: at most %zu %s", path, max, what);
	return 0;
}

/* A NULL-terminated array of the strings of v, each checked; element 0 may
 * have its own check (the command's absolute path). */
int policy_strings_parse(struct ctx *c, const json_t *v, size_t maxlen, str_check_fn first,
			 str_check_fn rest, const char *path, const char ***out, size_t *n)
{
	char sub[FIELD_PATH_MAX];
	size_t i, count = json_array_size(v);
	const json_t *e;
	const char **arr = calloc(count + 1, sizeof(*arr));

	if (!arr)
		return policy_ctx_nomem(c);
	*out = arr;
	json_array_foreach(v, i, e) {
		str_check_fn check = i == 0 && first ? first : rest;
		int rc = 0;
		policy_path_index(sub, path, i);
		if (!json_is_string(e))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", sub);
		if (json_string_length(e) > maxlen)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %zu bytes", sub,
					    maxlen);
		if (check)
			rc = check(json_string_value(e), json_string_length(e), sub, c->err);
		if (rc < 0)
			return rc;
		arr[i] = json_string_value(e);
	}
	*n = count;
	return 0;
}

/* An array of unique strings, each at most maxlen and passing check, into
 * out (room for max and a NULL). Case-insensitive names compare so. */
int policy_strings_unique_parse(struct ctx *c, const json_t *v, size_t min, size_t max,
				size_t maxlen, const char *what, str_check_fn check, bool nocase,
				const char *path, const char **out, size_t *n)
{
	char sub[FIELD_PATH_MAX];
	const json_t *e;
	size_t i;
	int rc = policy_array_check(c, v, min, max, what, path);

	if (rc < 0)
		return rc;
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		policy_path_index(sub, path, i);
		if (!json_is_string(e))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", sub);
		if (json_string_length(e) > maxlen)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %zu bytes", sub,
					    maxlen);
		rc = check(s, json_string_length(e), sub, c->err);
		if (rc < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (nocase ? strcasecmp(s, out[j]) == 0 : strcmp(s, out[j]) == 0)
				return appl_err_set(c->err, -EINVAL, "%s: also %s[%zu]", sub, path,
						    j);
		out[i] = s;
		(*n)++;
	}
	return 0;
}

/* raw (a path as written) joined to the policy's directory unless it is
 * absolute, into *out (new): lexically, nothing is looked up. */
int policy_path_resolve(struct ctx *c, const char *raw, const char *path, char **out)
{
	const char *dir = raw[0] == '/' ? "" : c->base_dir;
	size_t dlen, total;
	bool slash;

	if (!dir)
		return appl_err_set(c->err, -EINVAL,
				    "%s: relative, and no policy directory to resolve it", path);
	dlen = strlen(dir);
	slash = dlen > 0 && dir[dlen - 1] != '/';
	total = dlen + slash + strlen(raw);
	if (total >= PATH_MAX)
		return appl_err_set(c->err, -EINVAL, "%s: longer than %d bytes once resolved", path,
				    PATH_MAX - 1);
	if (!(*out = malloc(total + 1)))
		return policy_ctx_nomem(c);
	snprintf(*out, total + 1, "%s%s%s", dir, slash ? "/" : "", raw);
	return 0;
}
