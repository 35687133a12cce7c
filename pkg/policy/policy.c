/* policy.c: the policy document (see policy.h, policy/README.md): its
 * top-level table, its small sections (image, runtime, audit, approvals),
 * parsing and freeing, and the accessors of those.
 *
 * The top-level table is walked in order: `servers` comes before `tools`
 * and `roles`, which name servers, and `roles` before `clients`, which
 * names roles, whatever the order of the file. The sections' own tables
 * live in their files (limits.c, servers.c, roles.c, clients.c, http.c).
 */
#define _GNU_SOURCE
#include "policy/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

/* ---- RFC 3339 ------------------------------------------------------------ */

static bool is_leap(long y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned month_days(long y, unsigned m)
{
	static const unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

/* Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar
 * (H. Hinnant's days_from_civil). Pure arithmetic: no TZ, no locale. */
static int64_t days_from_civil(long y, unsigned m, unsigned d)
{
	y -= m <= 2;
	long era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return (int64_t)era * 146097 + (int64_t)doe - 719468;
}

/* The number in the n decimal digits at s (the caller checked they are). */
static unsigned num(const char *s, size_t n)
{
	unsigned v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	return v;
}

/* Exactly YYYY-MM-DDTHH:MM:SSZ: the one RFC 3339 form that names a UTC
 * second, so a time has one spelling (no offsets, no fractions, no lower
 * case t or z). -EINVAL for another form, -ERANGE for a date or time that
 * does not exist (Feb 30, 24:00, a leap second). */
static int rfc3339_parse(const char *s, size_t len, int64_t *out)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:ddZ";
	unsigned y, mo, d, h, mi, sec;

	if (len != sizeof(shape) - 1)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if (shape[i] == 'd' ? !is_digit(s[i]) : s[i] != shape[i])
			return -EINVAL;
	y = num(s, 4);
	mo = num(s + 5, 2);
	d = num(s + 8, 2);
	h = num(s + 11, 2);
	mi = num(s + 14, 2);
	sec = num(s + 17, 2);
	if (mo < 1 || mo > 12 || d < 1 || d > month_days((long)y, mo) || h > 23 || mi > 59 ||
	    sec > 59)
		return -ERANGE;
	*out = days_from_civil((long)y, mo, d) * 86400 + (int64_t)h * 3600 + mi * 60 + sec;
	return 0;
}

/* ---- top-level scalars ---------------------------------------------------- */

static int serial_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	(void)base;
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return appl_err_set(c->err, -EINVAL, "%s: must be a positive integer", path);
	c->p->serial = (uint64_t)json_integer_value(v);
	return 0;
}

static int expires_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	int rc;

	(void)base;
	if (!json_is_string(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be a string", path);
	rc = rfc3339_parse(json_string_value(v), json_string_length(v), &c->p->expires);
	if (rc == -ERANGE)
		return appl_err_set(c->err, -EINVAL, "%s: no such date or time", path);
	if (rc < 0)
		return appl_err_set(c->err, -EINVAL,
				    "%s: must be a UTC time like 2027-01-31T00:00:00Z", path);
	return 0;
}

/* ---- image, runtime, audit, approvals ------------------------------------ */

/* A module name as `import` takes it: dotted ASCII identifiers. Keywords
 * are left to the start, where the import itself fails and says so. */
static bool module_name_ok(const char *s, size_t len)
{
	bool start = true;

	for (size_t i = 0; i < len; i++) {
		char ch = s[i];

		if (ch == '.') {
			if (start)
				return false;
			start = true;
		} else if (ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			   (!start && ch >= '0' && ch <= '9')) {
			start = false;
		} else {
			return false;
		}
	}
	return len > 0 && !start;
}

/* image.preload: the modules a pooled runner imports as it warms up, kept
 * as one comma-joined string, the form the runner is given them in. */
static int preload_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	size_t total = 0, i, j;
	const json_t *e;

	(void)base;
	if (policy_array_check(c, v, 0, APPL_PRELOAD_MAX, "module names", path) < 0)
		return -EINVAL;
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		size_t len = json_string_length(e);

		if (!s || len > APPL_PRELOAD_NAME_MAX || strlen(s) != len ||
		    !module_name_ok(s, len))
			return appl_err_set(
				c->err, -EINVAL,
				"%s[%zu]: must be a module name as import takes "
				"it (like \"pandas\" or \"matplotlib.pyplot\"), at most "
				"%d bytes",
				path, i, APPL_PRELOAD_NAME_MAX);
		for (j = 0; j < i; j++)
			if (json_equal(json_array_get(v, j), e))
				return appl_err_set(c->err, -EINVAL,
						    "%s[%zu]: \"%s\" is named twice", path, i, s);
		total += len + 1;
	}
	if (json_array_size(v) == 0)
		return 0;
	if (!(c->p->preload = malloc(total)))
		return policy_ctx_nomem(c);
	total = 0;
	json_array_foreach(v, i, e) {
		if (i)
			c->p->preload[total++] = ',';
		memcpy(c->p->preload + total, json_string_value(e), json_string_length(e));
		total += json_string_length(e);
	}
	c->p->preload[total] = '\0';
	return 0;
}

static const struct field image_fields[] = {
	{.name = "layout",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, layout_raw),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_layout_check},
	{.name = "digest",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, digest),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_digest_check},
	{.name = "preload", .type = F_FN, .parse = preload_parse},
};

static int image_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	int rc = policy_fields_parse(c, v, image_fields, NELEM(image_fields), base, path);

	policy_path_key(sub, path, "layout");
	return rc < 0 ? rc : policy_path_resolve(c, c->p->layout_raw, sub, &c->p->layout);
}

/* A module is preloaded only by a runner that warms up, and only pooled
 * runners do: with no pool it would be accepted and never imported. */
static int preload_check(const struct policy *p, struct appl_err *err)
{
	if (p->preload && p->limits.pool == 0)
		return appl_err_set(err, -EINVAL,
				    "image.preload: needs limits.pool of 1 or more (modules are "
				    "imported while a pooled sandbox warms up; with no pool every "
				    "cell boots cold and would import nothing)");
	return 0;
}

static const struct field runtime_fields[] = {
	{.name = "runsc",
	 .type = F_STR,
	 .off = offsetof(struct policy, runsc),
	 .sdef = POLICY_RUNSC_DEFAULT,
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
	{.name = "platform",
	 .type = F_STR,
	 .off = offsetof(struct policy, platform),
	 .sdef = POLICY_PLATFORM_DEFAULT,
	 .maxlen = 16,
	 .check = policy_platform_check},
	{.name = "rootless", .type = F_BOOL, .off = offsetof(struct policy, rootless), .def = 0},
	{.name = "restore", .type = F_BOOL, .off = offsetof(struct policy, restore), .def = 1},
};

static int runtime_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	const struct policy *p = base;
	int rc = policy_fields_parse(c, v, runtime_fields, NELEM(runtime_fields), base, path);

	/* Rootless cannot restore: said outright, restore is refused, not
	 * ignored (its default is simply not applied). */
	if (rc == 0 && p->rootless && json_is_true(json_object_get(v, "restore")))
		return appl_err_set(c->err, -EINVAL,
				    "%s.restore: true needs root (the policy is rootless)", path);
	return rc;
}

/* An absolute path whose file name may hold {name} once, replaced by the
 * appliance's name (run --name): replicas on one host each write a log of
 * their own. No other brace: a path has one reading. */
static int audit_path_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	const char *base = memrchr(s, '/', len), *at = memmem(s, len, POLICY_AUDIT_NAME, 6);
	size_t braces = 0;
	int rc = policy_abs_path_check(s, len, path, err);

	for (size_t i = 0; i < len; i++)
		braces += s[i] == '{' || s[i] == '}';
	if (rc == 0 && (braces > 2 || (braces && (!at || at < base))))
		return appl_err_set(
			err, -EINVAL,
			"%s: a brace only as {name}, once, in the file name (replaced by "
			"run --name)",
			path);
	return rc;
}

static const struct field audit_fields[] = {
	{.name = "path",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, audit_path),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = audit_path_check},
	{.name = "seal", .type = F_BOOL, .off = offsetof(struct policy, audit_seal)},
};

static int audit_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_fields_parse(c, v, audit_fields, NELEM(audit_fields), base, path);
}

static const struct field approvals_fields[] = {
	{.name = "command",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, approvals_command),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
};

static int approvals_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_fields_parse(c, v, approvals_fields, NELEM(approvals_fields), base, path);
}

/* A service name: what a collector files the spans under. */
static int service_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	for (size_t i = 0; i < len; i++)
		if (!is_alpha(s[i]) && !is_digit(s[i]) && !strchr("._-", s[i]))
			return appl_err_set(err, -EINVAL, "%s: 1 to 64 of A-Z a-z 0-9 . _ -", path);
	return len ? 0 : appl_err_set(err, -EINVAL, "%s: 1 to 64 of A-Z a-z 0-9 . _ -", path);
}

static const struct field telemetry_fields[] = {
	{.name = "otlp_endpoint",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, otlp_endpoint),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = policy_server_url_check},
	{.name = "service_name",
	 .type = F_STR,
	 .off = offsetof(struct policy, service_name),
	 .sdef = POLICY_SERVICE_NAME_DEFAULT,
	 .maxlen = 64,
	 .check = service_check},
};

/* `telemetry`: where spans go (docs/operating.md, Traces). */
static int telemetry_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	const char *ep;
	int rc;

	policy_fields_default(telemetry_fields, NELEM(telemetry_fields), base);
	rc = policy_fields_parse(c, v, telemetry_fields, NELEM(telemetry_fields), base, path);
	ep = c->p->otlp_endpoint;
	/* /v1/traces is put after it: a query or fragment would end up before */
	policy_path_key(sub, path, "otlp_endpoint");
	if (rc == 0 && strpbrk(ep, "?#"))
		return appl_err_set(c->err, -EINVAL,
				    "%s: the collector's base URL, without ? or # (/v1/traces is "
				    "put after it)",
				    sub);
	return rc;
}

/* ---- the document ---------------------------------------------------------- */

static const struct field top_fields[] = {
	{.name = "policy_version",
	 .type = F_UINT,
	 .required = true,
	 .off = offsetof(struct policy, version),
	 .min = 1,
	 .max = 1},
	{.name = "serial", .type = F_FN, .required = true, .parse = serial_parse},
	{.name = "expires", .type = F_FN, .required = true, .parse = expires_parse},
	{.name = "deployment",
	 .type = F_STR,
	 .off = offsetof(struct policy, deployment),
	 .sdef = POLICY_DEPLOYMENT_DEFAULT,
	 .maxlen = APPL_POLICY_DEPLOYMENT_MAX,
	 .check = policy_deployment_check},
	{.name = "image", .type = F_FN, .required = true, .parse = image_parse},
	{.name = "runtime", .type = F_FN, .parse = runtime_parse},
	{.name = "limits", .type = F_FN, .parse = policy_limits_parse},
	{.name = "servers", .type = F_FN, .parse = policy_servers_parse},
	{.name = "tools", .type = F_FN, .parse = policy_tools_parse},
	{.name = "code_tools", .type = F_FN, .parse = policy_code_tools_parse},
	{.name = "roles", .type = F_FN, .parse = policy_roles_parse},
	{.name = "clients", .type = F_FN, .parse = policy_clients_parse},
	{.name = "audit", .type = F_FN, .parse = audit_parse},
	{.name = "approvals", .type = F_FN, .parse = approvals_parse},
	{.name = "http", .type = F_FN, .parse = policy_http_parse},
	{.name = "telemetry", .type = F_FN, .parse = telemetry_parse},
	{.name = "cluster", .type = F_FN, .parse = policy_cluster_parse},
};

/* jansson reports a repeated key by its line and column; the rule here is
 * that a message names the field. jansson stops right after the repeated
 * key, and the bytes before that point are valid JSON, so a walk over them
 * that tracks the open objects and arrays finds the key's path. */
struct frame {
	bool object;
	bool want_key;
	const char *key;
	size_t klen;
	size_t index;
};

static void dup_path(const char *buf, size_t pos, char *out, size_t outlen)
{
	struct frame st[APPL_POLICY_DEPTH_MAX + 1] = {0};
	size_t depth = 0, i = 0, o = 0;

	out[0] = '\0';
	while (i < pos) {
		struct frame *top = depth ? &st[depth - 1] : NULL;
		char ch = buf[i++];
		if ((ch == '{' || ch == '[') && depth < NELEM(st)) {
			st[depth++] = (struct frame){.object = ch == '{', .want_key = ch == '{'};
		} else if ((ch == '}' || ch == ']') && depth) {
			depth--;
		} else if (ch == ',' && top) {
			top->want_key = top->object;
			top->index++;
		} else if (ch == ':' && top) {
			top->want_key = false;
		} else if (ch == '"') {
			size_t start = i;
			while (i < pos && buf[i] != '"')
				i += buf[i] == '\\' ? 2 : 1;
			if (top && top->object && top->want_key) {
				top->key = buf + start;
				top->klen = (i < pos ? i : pos) - start;
			}
			i++;
		}
	}
	for (size_t d = 0; d < depth && o < outlen; d++) {
		int n;
		if (st[d].object)
			n = snprintf(out + o, outlen - o, "%s%.*s", d ? "." : "",
				     (int)(st[d].klen < 64 ? st[d].klen : 64),
				     st[d].key ? st[d].key : "");
		else
			n = snprintf(out + o, outlen - o, "[%zu]", st[d].index);
		if (n < 0)
			break;
		o += (size_t)n;
	}
}

/* appl_json_load refused buf; when the reason is a repeated key, say where. */
static void dup_explain(const char *buf, size_t len, struct appl_err *err)
{
	char path[FIELD_PATH_MAX];
	json_error_t jerr;
	json_t *v;

	if (!err || !strstr(err->msg, "duplicate object key"))
		return;
	v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (v) {
		json_decref(v);
		return;
	}
	if (json_error_code(&jerr) != json_error_duplicate_key || jerr.position <= 0 ||
	    (size_t)jerr.position > len)
		return;
	dup_path(buf, (size_t)jerr.position, path, sizeof(path));
	if (path[0])
		appl_err_set(err, -EINVAL, "%s: duplicate key", path);
}

static struct policy *policy_new(void)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	policy_fields_default(runtime_fields, NELEM(runtime_fields), p);
	policy_fields_default(top_fields, NELEM(top_fields), p);
	policy_limits_default(&p->limits);
	return p;
}

int policy_parse(const char *buf, size_t len, const char *base_dir, struct policy **out,
		 struct appl_err *err)
{
	struct ctx c = {.base_dir = base_dir, .err = err};
	json_t *root;
	int rc;

	if (!out)
		return appl_err_set(err, -EINVAL, "policy: no place for the result");
	*out = NULL;
	if (!buf && len)
		return appl_err_set(err, -EINVAL, "policy: no bytes");
	root = appl_json_load(buf ? buf : "", len, APPL_POLICY_FILE_MAX, APPL_POLICY_DEPTH_MAX,
			      "policy", err);
	if (!root) {
		dup_explain(buf ? buf : "", len, err);
		return err && err->code ? err->code : -EINVAL;
	}
	if (!json_is_object(root)) {
		json_decref(root);
		return appl_err_set(err, -EINVAL, "policy: must be a JSON object");
	}
	c.p = policy_new();
	if (!c.p) {
		json_decref(root);
		return appl_err_set(err, -ENOMEM, "policy: out of memory");
	}
	c.p->root = root;
	rc = policy_fields_parse(&c, root, top_fields, NELEM(top_fields), c.p, "");
	if (rc == 0)
		rc = policy_servers_confine_check(c.p, err);
	if (rc == 0)
		rc = policy_roles_sessions_check(c.p, err);
	if (rc == 0)
		rc = preload_check(c.p, err);
	if (rc < 0) {
		policy_free(c.p);
		return rc;
	}
	*out = c.p;
	return 0;
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nservers; i++) {
		free((void *)p->servers[i].argv);
		free((void *)p->servers[i].env);
		free((void *)p->servers[i].headers);
	}
	free(p->servers);
	for (size_t i = 0; i < p->nroles; i++) {
		free((void *)p->roles[i].tools);
		free((void *)p->roles[i].code_tools);
	}
	policy_code_tools_free(p);
	free(p->roles);
	free(p->rules);
	free(p->tokens);
	free(p->layout);
	free(p->preload);
	free(p->serve);
	json_decref(p->root);
	free(p);
}

/* ---- accessors ------------------------------------------------------------ */

uint64_t policy_serial(const struct policy *p)
{
	return p->serial;
}

const char *policy_deployment(const struct policy *p)
{
	return p->deployment;
}

int64_t policy_expires(const struct policy *p)
{
	return p->expires;
}

const char *policy_image_layout(const struct policy *p)
{
	return p->layout;
}

const char *policy_image_digest(const struct policy *p)
{
	return p->digest;
}

const char *policy_image_preload(const struct policy *p)
{
	return p->preload;
}

const char *policy_runtime_runsc(const struct policy *p)
{
	return p->runsc;
}

const char *policy_runtime_platform(const struct policy *p)
{
	return p->platform;
}

bool policy_runtime_rootless(const struct policy *p)
{
	return p->rootless;
}

bool policy_runtime_restore(const struct policy *p)
{
	return p->restore && !p->rootless;
}

const char *policy_audit_path(const struct policy *p)
{
	return p->audit_path;
}

const char *policy_default_name(const struct policy *p)
{
	return strcmp(p->deployment, POLICY_DEPLOYMENT_DEFAULT) == 0 ? "appliance" : p->deployment;
}

int policy_audit_path_for(const struct policy *p, const char *name, char *out, size_t cap)
{
	const char *at = p->audit_path ? strstr(p->audit_path, POLICY_AUDIT_NAME) : NULL;
	int n;

	if (!p->audit_path)
		return -ENOENT;
	if (!name)
		name = policy_default_name(p);
	n = at ? snprintf(out, cap, "%.*s%s%s", (int)(at - p->audit_path), p->audit_path, name,
			  at + strlen(POLICY_AUDIT_NAME))
	       : snprintf(out, cap, "%s", p->audit_path);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

bool policy_audit_seal(const struct policy *p)
{
	return p->audit_seal;
}

const char *policy_approvals_command(const struct policy *p)
{
	return p->approvals_command;
}

const char *policy_telemetry_endpoint(const struct policy *p)
{
	return p->otlp_endpoint;
}

const char *policy_telemetry_service(const struct policy *p)
{
	return p->otlp_endpoint ? p->service_name : NULL;
}
