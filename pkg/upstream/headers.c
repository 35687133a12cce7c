/* headers.c: the header lines of an HTTP upstream's requests (see
 * headers.h, upstream.h): the policy's, each {env:NAME} filled from the
 * secrets taken at start and kept in guarded memory, and ours, with the
 * tool parameters 2026-07-28 mirrors into them (SEP-2243). */
#define _GNU_SOURCE
#include "upstream/headers.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sodium.h>

/* ---- the secrets of the policy's headers ----------------------------------- */

/* The value of one variable the headers name, handed over once at start
 * (upstream_secrets_take). */
struct secret {
	char *name;
	char *value; /* sodium_malloc'd */
	size_t len;
};

struct upstream_secrets {
	struct secret *v;
	size_t n;
};

static const struct secret *secret_find(const struct upstream_secrets *s, const char *name)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strcmp(s->v[i].name, name) == 0)
			return &s->v[i];
	return NULL;
}

/* The next {env:NAME} of a header template at or after p: where it
 * starts, with NAME copied into var (NUL-terminated); NULL when there is
 * none. The policy has checked the template: each is closed, and NAME is a
 * variable name of at most APPL_POLICY_ENV_NAME_MAX bytes. */
static const char *var_next(const char *p, char *var, size_t cap)
{
	static const char open[] = "{env:";
	const char *at = strstr(p, open), *name, *end;

	if (!at || !(end = strchr(name = at + sizeof(open) - 1, '}')) ||
	    (size_t)(end - name) >= cap)
		return NULL;
	memcpy(var, name, (size_t)(end - name));
	var[end - name] = '\0';
	return at;
}

/* The length of the {env:...} at at (var its name). */
static size_t var_len(const char *var)
{
	return strlen("{env:}") + strlen(var);
}

struct take_ctx {
	const char *server, *header;
	upstream_secret_take_fn take;
	void *data;
	struct appl_err *err;
};

/* Take variable var through the caller's function, once: the room for it
 * is made first, so a value once handed over is never lost. */
static int take_one(struct upstream_secrets *s, const char *var, const struct take_ctx *c)
{
	struct secret *v;
	int rc;

	if (secret_find(s, var))
		return 0;
	if (!(v = realloc(s->v, (s->n + 1) * sizeof(*v))))
		return appl_err_set(c->err, -ENOMEM, "out of memory");
	s->v = v;
	v = &s->v[s->n];
	if (!(v->name = strdup(var)))
		return appl_err_set(c->err, -ENOMEM, "out of memory");
	if ((rc = c->take(c->data, var, &v->value, &v->len)) < 0) {
		free(v->name);
		if (rc != -ENOENT)
			return appl_err_set(c->err, -ENOMEM, "out of memory");
		return appl_err_set(c->err, -ENOENT,
				    "servers.%s.headers.%s: the environment has no %s; set it "
				    "where the appliance starts (for the systemd unit, in an "
				    "EnvironmentFile)",
				    c->server, c->header, var);
	}
	s->n++;
	return 0;
}

/* Each variable server srv's headers name, taken into s. */
static int server_take(struct upstream_secrets *s, const struct policy_server *srv,
		       upstream_secret_take_fn take, void *data, struct appl_err *err)
{
	for (size_t k = 0; srv->kind == POLICY_SERVER_HTTP && k < srv->nheaders; k++) {
		struct take_ctx c = {srv->name, srv->headers[k].name, take, data, err};
		const char *at = srv->headers[k].value;
		char var[APPL_POLICY_ENV_NAME_MAX + 1];
		int rc;

		while ((at = var_next(at, var, sizeof(var)))) {
			if ((rc = take_one(s, var, &c)) < 0)
				return rc;
			at += var_len(var);
		}
	}
	return 0;
}

int upstream_secrets_take(const struct policy *p, upstream_secret_take_fn take, void *data,
			  struct upstream_secrets **out, struct appl_err *err)
{
	struct upstream_secrets *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return appl_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < policy_server_count(p); i++) {
		if ((rc = server_take(s, policy_server_get(p, i), take, data, err)) < 0) {
			upstream_secrets_free(s);
			return rc;
		}
	}
	*out = s;
	return 0;
}

void upstream_secrets_wipe(struct upstream_secrets *s)
{
	for (size_t i = 0; s && i < s->n; i++) {
		sodium_free(s->v[i].value);
		free(s->v[i].name);
	}
	if (s) {
		free(s->v);
		s->v = NULL;
		s->n = 0;
	}
}

void upstream_secrets_free(struct upstream_secrets *s)
{
	upstream_secrets_wipe(s);
	free(s);
}

/* The value of variable var, and its length: what s holds, else what the
 * environment has; NULL when neither has it. */
static const char *var_value(const struct upstream_secrets *s, const char *var, size_t *len)
{
	const struct secret *sec = secret_find(s, var);
	const char *v = sec ? sec->value : getenv(var);

	if (v)
		*len = sec ? sec->len : strlen(v);
	return v;
}

char *upstream_header_fill(const struct upstream_secrets *s, const char *server,
			   const struct policy_header *h, struct appl_err *err)
{
	char *out = malloc(UP_HTTP_LINE_MAX), var[APPL_POLICY_ENV_NAME_MAX + 1];
	const char *p = h->value, *at, *val;
	size_t o, lit, vlen;

	if (!out) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	o = (size_t)snprintf(out, UP_HTTP_LINE_MAX, "%s: ", h->name);
	for (;; p = at + var_len(var)) {
		at = var_next(p, var, sizeof(var));
		lit = at ? (size_t)(at - p) : strlen(p);
		if (lit >= UP_HTTP_LINE_MAX - o)
			break;
		memcpy(out + o, p, lit), o += lit;
		if (!at) {
			out[o] = '\0';
			return out;
		}
		if (!(val = var_value(s, var, &vlen))) {
			upstream_header_free(out);
			appl_err_set(err, -ENOENT,
				     "servers.%s.headers.%s: the environment has no %s", server,
				     h->name, var);
			return NULL;
		}
		/* A value that would end the header line or add one is refused:
		 * its bytes are not quoted. */
		if (memchr(val, '\r', vlen) || memchr(val, '\n', vlen) ||
		    vlen >= UP_HTTP_LINE_MAX - o)
			break;
		memcpy(out + o, val, vlen), o += vlen;
	}
	upstream_header_free(out);
	appl_err_set(err, -EINVAL,
		     "servers.%s.headers.%s: the filled value is too long or holds a line break",
		     server, h->name);
	return NULL;
}

void upstream_header_free(char *line)
{
	if (line) {
		sodium_memzero(line, UP_HTTP_LINE_MAX);
		free(line);
	}
}

/* ---- our own header lines ---------------------------------------------------- */

char *upstream_header_value(const char *v, size_t n)
{
	static const char pre[] = "=?base64?", post[] = "?=";
	bool plain = n == 0 || (v[0] != ' ' && v[n - 1] != ' ');
	size_t b64;
	char *out;

	for (size_t i = 0; plain && i < n; i++)
		plain = (unsigned char)v[i] >= 0x20 && (unsigned char)v[i] <= 0x7e;
	if (plain && n >= sizeof(pre) + sizeof(post) - 2 && strncmp(v, pre, sizeof(pre) - 1) == 0 &&
	    memcmp(v + n - (sizeof(post) - 1), post, sizeof(post) - 1) == 0)
		plain = false;
	if (plain)
		return strndup(v, n);
	b64 = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	if (!(out = malloc(sizeof(pre) - 1 + b64 + sizeof(post))))
		return NULL;
	memcpy(out, pre, sizeof(pre) - 1);
	sodium_bin2base64(out + sizeof(pre) - 1, b64, (const unsigned char *)v, n,
			  sodium_base64_VARIANT_ORIGINAL);
	memcpy(out + sizeof(pre) - 1 + strlen(out + sizeof(pre) - 1), post, sizeof(post));
	return out;
}

void upstream_hdrs_add(struct up_hdrs *o, const char *name, const char *value)
{
	char *line;

	if (o->bad || !value || o->n == UP_HTTP_OWN_MAX ||
	    strlen(name) + strlen(value) + 2 > UP_HTTP_LINE_MAX ||
	    /* "Name;" is how libcurl sends a header with an empty value */
	    asprintf(&line, *value ? "%s: %s" : "%s;", name, value) < 0) {
		o->bad = true;
		return;
	}
	o->v[o->n++] = line;
}

void upstream_hdrs_free(struct up_hdrs *o)
{
	for (size_t i = 0; i < o->n; i++)
		free(o->v[i]);
	o->n = 0;
}

/* ---- SEP-2243: tool parameters mirrored into headers ------------------------- */

static bool token_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || strchr("!#$%&'*+-.^_`|~", *s)) || !isascii(*s))
			return false;
	return true;
}

const char *upstream_param_headers_check(const json_t *schema)
{
	const json_t *props = json_object_get(schema, "properties"), *v;
	const char *key, *names[UP_HTTP_PARAMS_MAX];
	size_t n = 0;

	json_object_foreach((json_t *)props, key, v) {
		const json_t *x = json_object_get(v, "x-mcp-header");
		const char *name = json_string_value(x), *type;

		if (!x)
			continue;
		if (!name || !token_ok(name) || strlen(name) > UP_HTTP_PARAM_NAME_MAX)
			return "an x-mcp-header that is not a header name";
		type = json_string_value(json_object_get(v, "type"));
		if (!type || (strcmp(type, "string") != 0 && strcmp(type, "integer") != 0 &&
			      strcmp(type, "boolean") != 0))
			return "an x-mcp-header on a parameter that is not a string, integer or "
			       "boolean";
		for (size_t i = 0; i < n; i++)
			if (strcasecmp(names[i], name) == 0)
				return "two parameters with the same x-mcp-header";
		if (n == UP_HTTP_PARAMS_MAX)
			return "more x-mcp-header parameters than the cap";
		names[n++] = name;
	}
	return NULL;
}

void upstream_param_headers_add(const json_t *schema, const json_t *args, struct up_hdrs *o)
{
	const json_t *v;
	const char *key;

	json_object_foreach((json_t *)json_object_get(schema, "properties"), key, v) {
		const char *name = json_string_value(json_object_get(v, "x-mcp-header"));
		const json_t *a = json_object_get(args, key);
		char hname[sizeof("Mcp-Param-") + UP_HTTP_PARAM_NAME_MAX], num[32], *val = NULL;

		if (!name || !a || json_is_null(a))
			continue;
		snprintf(hname, sizeof(hname), "Mcp-Param-%s", name);
		if (json_is_string(a)) {
			val = upstream_header_value(json_string_value(a), json_string_length(a));
		} else if (json_is_integer(a)) {
			snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(a));
			val = strdup(num);
		} else if (json_is_boolean(a)) {
			val = strdup(json_is_true(a) ? "true" : "false");
		} else {
			continue; /* the schema check let no other type through */
		}
		upstream_hdrs_add(o, hname, val);
		free(val);
	}
}
