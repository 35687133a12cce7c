/* policy.c: the policy document parser (see policy.h, policy/README.md).
 *
 * Each object of the document has a field table (name, type, required,
 * where the value goes, range or check); one walker refuses unknown keys and
 * missing required ones and dispatches on the type, so a field cannot be
 * accepted without being checked. Tables are walked in order: `servers` comes
 * before `tools` and `roles`, which name servers, and `roles` before
 * `clients`, which names roles, whatever the order of the file.
 */
#include "policy/policy.h"

#include "base/pyname.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/image.h"
#include "json/json.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* A field's path in a message; a longer one is cut, never overflows. */
#define FIELD_PATH_MAX 320
/* A key quoted in a path: long enough for server.tool, short enough that a
 * hostile key cannot crowd the message out. */
#define KEY_SHOWN_MAX 170

struct rule { /* one entry of `tools` */
	const char *pattern;
	enum policy_access access;
	bool approval; /* its calls need a person's yes */
};

/* The default allowed_hosts: three loopback names, bare and with each
 * port, and each inet listen address as written. */
#define HTTP_LOOPBACK_NAMES 3
#define HTTP_DEFAULT_HOSTS                                                                         \
	(HTTP_LOOPBACK_NAMES * (1 + APPL_POLICY_HTTP_LISTEN_MAX) + APPL_POLICY_HTTP_LISTEN_MAX)
#define HTTP_HOST_WITH_PORT 16 /* "localhost:65535", NUL included */
_Static_assert(HTTP_DEFAULT_HOSTS <= APPL_POLICY_HTTP_HOSTS_MAX,
	       "the default allowed_hosts must fit where a given list goes");

/* The `http` section: fixed-size, so parsing it allocates nothing. */
struct http_section {
	struct policy_http pub; /* what policy_http hands out */
	struct policy_listen listen[APPL_POLICY_HTTP_LISTEN_MAX];
	const char *origins[APPL_POLICY_HTTP_ORIGINS_MAX + 1];
	const char *hosts[APPL_POLICY_HTTP_HOSTS_MAX + 1];
	char with_port[HTTP_LOOPBACK_NAMES * APPL_POLICY_HTTP_LISTEN_MAX][HTTP_HOST_WITH_PORT];
};

struct policy {
	json_t *root; /* owns every string the accessors hand out */
	unsigned version;
	uint64_t serial;
	int64_t expires;
	const char *deployment; /* POLICY_DEPLOYMENT_DEFAULT when absent */
	const char *layout_raw; /* as written */
	char *layout;		/* resolved against base_dir */
	const char *digest;
	const char *runsc;
	const char *platform;
	bool rootless;
	bool restore; /* runtime.restore (default true; root only) */
	struct policy_limits limits;
	struct policy_server *servers;
	size_t nservers;
	bool http;
	struct rule *rules;
	size_t nrules;
	struct policy_role *roles;
	size_t nroles;
	const char *default_role;
	struct policy_token *tokens;
	size_t ntokens;
	const char *audit_path;
	bool audit_seal;
	const char *approvals_command;
	struct http_section *serve; /* NULL: no `http` section */
};

struct ctx {
	struct policy *p;
	const char *base_dir;
	struct appl_err *err;
};

enum ftype {
	F_UINT, /* integer in [min, max] into an unsigned */
	F_BOOL, /* true or false into a bool */
	F_STR,	/* string of at most maxlen bytes, passed to check, into a const char * */
	F_FN,	/* anything else: parse does it all */
};

typedef int (*str_check_fn)(const char *s, size_t len, const char *path, struct appl_err *err);
typedef int (*parse_fn)(struct ctx *c, void *base, const json_t *v, const char *path);

struct field {
	const char *name;
	enum ftype type;
	bool required;
	size_t off;		/* F_UINT, F_BOOL, F_STR: where in base */
	unsigned min, max, def; /* F_UINT; def also for F_BOOL */
	const char *sdef;	/* F_STR: the default */
	size_t maxlen;		/* F_STR */
	str_check_fn check;	/* F_STR, optional */
	parse_fn parse;		/* F_FN */
};

static int no_memory(struct ctx *c)
{
	return appl_err_set(c->err, -ENOMEM, "policy: out of memory");
}

static void path_key(char *out, const char *parent, const char *key)
{
	snprintf(out, FIELD_PATH_MAX, "%s%s%.*s", parent, *parent ? "." : "", KEY_SHOWN_MAX, key);
}

static void path_index(char *out, const char *parent, size_t i)
{
	snprintf(out, FIELD_PATH_MAX, "%s[%zu]", parent, i);
}

/* ---- string checks ------------------------------------------------------ */

static bool has_control(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return true;
	return false;
}

/* A "." or ".." component makes a path say something other than what it
 * looks like at a glance; an absolute path in a signed policy has no need
 * of either. */
static bool has_dot_component(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;
		while (j < len && s[j] != '/')
			j++;
		if ((j - i == 1 && s[i] == '.') || (j - i == 2 && s[i] == '.' && s[i + 1] == '.'))
			return true;
		i = j + 1;
	}
	return false;
}

static int abs_path_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0 || s[0] != '/')
		return appl_err_set(err, -EINVAL, "%s: must be an absolute path", path);
	if (has_control(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold control characters", path);
	if (has_dot_component(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold . or .. components", path);
	return 0;
}

/* image.layout may be relative to the policy's directory, ".." included
 * (the examples point at ../build/image). */
static int layout_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0)
		return appl_err_set(err, -EINVAL, "%s: must not be empty", path);
	if (has_control(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold control characters", path);
	return 0;
}

static int digest_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1];

	if (len != IMAGE_DIGEST_STR - 1 || image_digest_parse(s, hex, NULL) < 0)
		return appl_err_set(err, -EINVAL,
				    "%s: must be sha256: followed by 64 lower-case hex digits",
				    path);
	return 0;
}

static const char *const platforms[] = {"systrap", "ptrace", "kvm"};

static int platform_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	(void)len;
	for (size_t i = 0; i < NELEM(platforms); i++)
		if (strcmp(s, platforms[i]) == 0)
			return 0;
	return appl_err_set(err, -EINVAL, "%s: must be \"systrap\", \"ptrace\" or \"kvm\"", path);
}

static bool is_lower(char ch)
{
	return ch >= 'a' && ch <= 'z';
}

static bool is_digit(char ch)
{
	return ch >= '0' && ch <= '9';
}

static bool is_alpha(char ch)
{
	return is_lower(ch) || (ch >= 'A' && ch <= 'Z');
}

/* Server names become Python namespaces in the cell: [a-z][a-z0-9_]*. */
static int server_name_check(const char *s, const char *path, struct appl_err *err)
{
	size_t len = strlen(s);
	bool ok = len >= 1 && len <= APPL_POLICY_SERVER_NAME_MAX && is_lower(s[0]);

	for (size_t i = 1; ok && i < len; i++)
		ok = is_lower(s[i]) || is_digit(s[i]) || s[i] == '_';
	if (!ok)
		return appl_err_set(err, -EINVAL,
				    "%s: server names are [a-z][a-z0-9_]*, at most %d characters",
				    path, APPL_POLICY_SERVER_NAME_MAX);
	if (appl_py_keyword(s))
		return appl_err_set(err, -EINVAL, "%s: a Python keyword cannot name a server",
				    path);
	/* A namespace named `print` or `tools` would hide that name from the
	 * code, and its tools are never offered: refused here, not at run. */
	if (appl_py_reserved(s))
		return appl_err_set(err, -EINVAL,
				    "%s: \"%s\" is a Python builtin or a name the cell already has",
				    path, s);
	return 0;
}

/* [a-z][a-z0-9_-]*, 1 to max bytes: the form of role, client and deployment
 * names. */
static bool label_like(const char *s, size_t len, size_t max)
{
	bool ok = len >= 1 && len <= max && is_lower(s[0]);

	for (size_t i = 1; ok && i < len; i++)
		ok = is_lower(s[i]) || is_digit(s[i]) || s[i] == '_' || s[i] == '-';
	return ok;
}

bool policy_label_valid(const char *s, size_t len)
{
	return s && label_like(s, len, APPL_POLICY_LABEL_MAX);
}

bool policy_deployment_valid(const char *s, size_t len)
{
	return label_like(s, len, APPL_POLICY_DEPLOYMENT_MAX);
}

/* Role and client names: short enough for a log line. */
static int label_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (!label_like(s, len, APPL_POLICY_LABEL_MAX))
		return appl_err_set(err, -EINVAL,
				    "%s: names are [a-z][a-z0-9_-]*, at most %d characters", path,
				    APPL_POLICY_LABEL_MAX);
	return 0;
}

/* A deployment names a rollback floor of its own: short enough for one line
 * of the floor file. */
static int deployment_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (!policy_deployment_valid(s, len))
		return appl_err_set(err, -EINVAL,
				    "%s: a deployment is [a-z][a-z0-9_-]*, at most %d characters",
				    path, APPL_POLICY_DEPLOYMENT_MAX);
	return 0;
}

/* The length of the environment variable name at s[0..len), stopping at the
 * first byte that cannot be in one; 0 when s does not start with one. */
static size_t env_name_span(const char *s, size_t len)
{
	size_t i = 0;

	if (len == 0 || !(is_alpha(s[0]) || s[0] == '_'))
		return 0;
	while (i < len && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '_'))
		i++;
	return i;
}

static int env_name_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len > APPL_POLICY_ENV_NAME_MAX || env_name_span(s, len) != len || len == 0)
		return appl_err_set(err, -EINVAL,
				    "%s: must be an environment variable name "
				    "([A-Za-z_][A-Za-z0-9_]*, at most %d characters)",
				    path, APPL_POLICY_ENV_NAME_MAX);
	return 0;
}

/* http:// or https://, a host, printable ASCII without spaces. No
 * user:password@: credentials in a URL end up in logs; they belong in a
 * header filled from the environment. */
static int url_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	static const char *const schemes[] = {"http://", "https://"};
	size_t start = 0, end;

	for (size_t i = 0; i < NELEM(schemes); i++)
		if (strncmp(s, schemes[i], strlen(schemes[i])) == 0)
			start = strlen(schemes[i]);
	if (start == 0)
		return appl_err_set(err, -EINVAL, "%s: must be an http:// or https:// URL", path);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return appl_err_set(err, -EINVAL,
					    "%s: must be printable ASCII without spaces", path);
	end = start + strcspn(s + start, "/?#");
	if (end == start)
		return appl_err_set(err, -EINVAL, "%s: must name a host", path);
	if (memchr(s + start, '@', end - start))
		return appl_err_set(
			err, -EINVAL,
			"%s: must not hold user:password@ (use a header with {env:NAME})", path);
	return 0;
}

/* Plain http:// goes only to this machine: a literal loopback address
 * (127.0.0.0/8, [::1]) or localhost, which the client pins to 127.0.0.1. */
static bool loopback_host(const char *h, size_t n)
{
	static const char *const names[] = {"localhost", "[::1]"};
	unsigned a, b, c, d;
	char buf[64], tail;

	for (size_t i = 0; i < NELEM(names); i++)
		if (n == strlen(names[i]) && strncasecmp(h, names[i], n) == 0)
			return true;
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, h, n);
	buf[n] = '\0';
	return sscanf(buf, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
	       c < 256 && d < 256;
}

static int server_url_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	int rc = url_check(s, len, path, err);
	const char *host = s + strlen("http://");
	size_t n;

	if (rc < 0 || strncmp(s, "https://", 8) == 0)
		return rc;
	n = strcspn(host, "/?#");
	/* the port, if any, after the host (after the ] of an IPv6 one) */
	for (size_t i = n; i > 0; i--) {
		if (host[i - 1] == ']')
			break;
		if (host[i - 1] == ':') {
			n = i - 1;
			break;
		}
	}
	if (!loopback_host(host, n))
		return appl_err_set(err, -EINVAL,
				    "%s: http:// only to a loopback address or localhost; use "
				    "https:// for anything else",
				    path);
	return 0;
}

/* RFC 9110 token characters. */
static bool is_tchar(char ch)
{
	return is_alpha(ch) || is_digit(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static int header_name_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	bool ok = len >= 1 && len <= APPL_POLICY_HEADER_NAME_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = is_tchar(s[i]);
	if (!ok)
		return appl_err_set(err, -EINVAL, "%s: not an HTTP header name", path);
	return 0;
}

/* Headers that frame the request or the MCP session: the HTTP client sets
 * them, and a policy value could only break or smuggle a request. */
static const char *const reserved_headers[] = {
	"accept",
	"connection",
	"content-length",
	"content-type",
	"host",
	"keep-alive",
	"last-event-id",
	"mcp-method",
	"mcp-name",
	"mcp-protocol-version",
	"mcp-session-id",
	"proxy-connection",
	"te",
	"trailer",
	"transfer-encoding",
	"upgrade",
};

static int header_reserved_check(const char *name, const char *path, struct appl_err *err)
{
	if (strncasecmp(name, "mcp-param-", 10) == 0)
		return appl_err_set(err, -EINVAL, "%s: set by the appliance, not the policy", path);
	for (size_t i = 0; i < NELEM(reserved_headers); i++)
		if (strcasecmp(name, reserved_headers[i]) == 0)
			return appl_err_set(err, -EINVAL,
					    "%s: set by the appliance, not the policy", path);
	return 0;
}

/* A header value is a template: printable ASCII (and tab), where `{` and `}`
 * appear only as {env:NAME}. No CR or LF, which would add headers. */
static int header_value_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	static const char open[] = "{env:";
	size_t i = 0;

	while (i < len) {
		unsigned char ch = (unsigned char)s[i];
		if ((ch < 0x20 && ch != '\t') || ch >= 0x7f)
			return appl_err_set(err, -EINVAL,
					    "%s: must be printable ASCII (control characters and "
					    "non-ASCII bytes are refused)",
					    path);
		if (s[i] == '{') {
			size_t n = 0;
			if (len - i > sizeof(open) - 1 &&
			    memcmp(s + i, open, sizeof(open) - 1) == 0)
				n = env_name_span(s + i + 5, len - i - 5);
			if (n == 0 || n > APPL_POLICY_ENV_NAME_MAX || i + 5 + n >= len ||
			    s[i + 5 + n] != '}')
				return appl_err_set(err, -EINVAL,
						    "%s: { and } only as {env:NAME}, NAME an "
						    "environment variable name",
						    path);
			i += 5 + n + 1;
			continue;
		}
		if (s[i] == '}')
			return appl_err_set(err, -EINVAL,
					    "%s: { and } only as {env:NAME}, NAME an environment "
					    "variable name",
					    path);
		i++;
	}
	return 0;
}

/* A tool name as MCP suggests them; "*" is never one. */
bool policy_tool_name_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > APPL_POLICY_TOOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(is_alpha(s[i]) || is_digit(s[i]) || (s[i] && strchr("_-./", s[i]))))
			return false;
	return true;
}

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

/* ---- the field walker ---------------------------------------------------- */

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

static void fields_default(const struct field *tab, size_t n, void *base)
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
static int fields_parse(struct ctx *c, const json_t *obj, const struct field *tab, size_t n,
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

			path_key(sub, path, key);
			if (near)
				return appl_err_set(c->err, -EINVAL,
						    "%s: unknown key; did you mean %s?", sub, near);
			return appl_err_set(c->err, -EINVAL, "%s: unknown key", sub);
		}
	}
	for (size_t i = 0; i < n; i++) {
		v = json_object_get(obj, tab[i].name);
		path_key(sub, path, tab[i].name);
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
static int array_check(struct ctx *c, const json_t *v, size_t min, size_t max, const char *what,
		       const char *path)
{
	if (!json_is_array(v) || json_array_size(v) < min || json_array_size(v) > max)
		return appl_err_set(c->err, -EINVAL, "%s: must be an array of %zu to %zu %s", path,
				    min, max, what);
	return 0;
}

/* An object of at most max members. */
static int map_check(struct ctx *c, const json_t *v, size_t max, const char *what, const char *path)
{
	if (!json_is_object(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object", path);
	if (json_object_size(v) > max)
		return appl_err_set(c->err, -EINVAL, "%s: at most %zu %s", path, max, what);
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

/* ---- image, runtime, limits, audit ---------------------------------------- */

static const struct field image_fields[] = {
	{.name = "layout",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, layout_raw),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = layout_check},
	{.name = "digest",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, digest),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = digest_check},
};

static int layout_resolve(struct ctx *c, const char *path)
{
	const char *raw = c->p->layout_raw;
	const char *dir = raw[0] == '/' ? "" : c->base_dir;
	size_t dlen, total;

	if (!dir)
		return appl_err_set(c->err, -EINVAL,
				    "%s.layout: relative, and no policy directory to resolve it",
				    path);
	dlen = strlen(dir);
	bool slash = dlen > 0 && dir[dlen - 1] != '/';
	total = dlen + slash + strlen(raw);
	if (total >= PATH_MAX)
		return appl_err_set(c->err, -EINVAL,
				    "%s.layout: longer than %d bytes once resolved", path,
				    PATH_MAX - 1);
	c->p->layout = malloc(total + 1);
	if (!c->p->layout)
		return no_memory(c);
	snprintf(c->p->layout, total + 1, "%s%s%s", dir, slash ? "/" : "", raw);
	return 0;
}

static int image_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	int rc = fields_parse(c, v, image_fields, NELEM(image_fields), base, path);
	return rc < 0 ? rc : layout_resolve(c, path);
}

static const struct field runtime_fields[] = {
	{.name = "runsc",
	 .type = F_STR,
	 .off = offsetof(struct policy, runsc),
	 .sdef = POLICY_RUNSC_DEFAULT,
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
	{.name = "platform",
	 .type = F_STR,
	 .off = offsetof(struct policy, platform),
	 .sdef = POLICY_PLATFORM_DEFAULT,
	 .maxlen = 16,
	 .check = platform_check},
	{.name = "rootless", .type = F_BOOL, .off = offsetof(struct policy, rootless), .def = 0},
	{.name = "restore", .type = F_BOOL, .off = offsetof(struct policy, restore), .def = 1},
};

static int runtime_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	const struct policy *p = base;
	int rc = fields_parse(c, v, runtime_fields, NELEM(runtime_fields), base, path);

	/* Rootless cannot restore: said outright, restore is refused, not
	 * ignored (its default is simply not applied). */
	if (rc == 0 && p->rootless && json_is_true(json_object_get(v, "restore")))
		return appl_err_set(c->err, -EINVAL,
				    "%s.restore: true needs root (the policy is rootless)", path);
	return rc;
}

#define LIMIT(field, NAME)                                                                         \
	{                                                                                          \
		.name = #field, .type = F_UINT, .off = offsetof(struct policy_limits, field),      \
		.min = APPL_##NAME##_MIN, .max = APPL_##NAME##_CEIL, .def = APPL_##NAME##_DEF      \
	}

static const struct field limit_fields[] = {
	LIMIT(deadline_s, DEADLINE_S),
	LIMIT(max_calls, MAX_CALLS),
	LIMIT(call_timeout_s, CALL_TIMEOUT_S),
	LIMIT(max_args_bytes, MAX_ARGS_BYTES),
	LIMIT(max_result_bytes, MAX_RESULT_BYTES),
	LIMIT(max_output_bytes, MAX_OUTPUT_BYTES),
	LIMIT(stop_output_bytes, STOP_OUTPUT_BYTES),
	LIMIT(memory_mb, MEMORY_MB),
	LIMIT(pids, PIDS),
	LIMIT(nofile, NOFILE),
	LIMIT(tmpfs_mb, TMPFS_MB),
	LIMIT(concurrency, CONCURRENCY),
	LIMIT(cells, CELLS),
	LIMIT(pool, POOL),
	LIMIT(max_runner_lines, MAX_RUNNER_LINES),
	LIMIT(audit_seal_lines, AUDIT_SEAL_LINES),
	LIMIT(audit_seal_s, AUDIT_SEAL_S),
	LIMIT(audit_rotate_kb, AUDIT_ROTATE_KB),
	LIMIT(approval_timeout_s, APPROVAL_TIMEOUT_S),
	LIMIT(max_approvals, MAX_APPROVALS),
	LIMIT(http_connections, HTTP_CONNECTIONS),
	LIMIT(http_sessions_per_token, HTTP_SESSIONS_PER_TOKEN),
	LIMIT(http_cells_per_client, HTTP_CELLS_PER_CLIENT),
	LIMIT(http_waiting_per_client, HTTP_WAITING_PER_CLIENT),
	LIMIT(http_body_kb, HTTP_BODY_KB),
	LIMIT(http_idle_s, HTTP_IDLE_S),
	LIMIT(http_slow_s, HTTP_SLOW_S),
};

_Static_assert(APPL_MAX_RUNNER_LINES_DEF >= APPL_MAX_CALLS_CEIL + APPL_RUNNER_LINES_SPARE,
	       "the default line budget must allow the most calls a policy may allow");
/* run_python's longest code, every byte escaped as \u00XX, and room for
 * the JSON-RPC envelope around it. */
_Static_assert(APPL_HTTP_BODY_KB_DEF * 1024ull >= 6ull * APPL_CELL_CODE_MAX + 64 * 1024,
	       "the default request body must hold the longest program, escaped");
_Static_assert(APPL_MAX_OUTPUT_BYTES_DEF <= APPL_STOP_OUTPUT_BYTES_DEF,
	       "the default output kept must not exceed the output that stops a run");

static int limits_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_limits *l = &c->p->limits;
	int rc;

	(void)base;
	rc = fields_parse(c, v, limit_fields, NELEM(limit_fields), l, path);
	if (rc < 0)
		return rc;
	/* Left out, one client's share follows the slots there are, so it
	 * stays below them; a value given is the administrator's. */
	if (!json_object_get(v, "http_cells_per_client"))
		l->http_cells_per_client = APPL_HTTP_CELLS_PER_CLIENT_FOR(l->cells);
	/* Output past the stop line ends the run, so keeping more than that
	 * could never happen: a policy saying so is a mistake. */
	if (l->max_output_bytes > l->stop_output_bytes)
		return appl_err_set(
			c->err, -EINVAL,
			"%s.max_output_bytes: must not exceed %s.stop_output_bytes (%u)", path,
			path, l->stop_output_bytes);
	/* Each call is a line of its own: a budget below the calls allowed
	 * would stop runs the policy means to allow. */
	if (l->max_runner_lines < l->max_calls + APPL_RUNNER_LINES_SPARE)
		return appl_err_set(c->err, -EINVAL,
				    "%s.max_runner_lines: must be at least %s.max_calls (%u) + %u",
				    path, path, l->max_calls, APPL_RUNNER_LINES_SPARE);
	return 0;
}

static const struct field audit_fields[] = {
	{.name = "path",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, audit_path),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
	{.name = "seal", .type = F_BOOL, .off = offsetof(struct policy, audit_seal)},
};

static int audit_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return fields_parse(c, v, audit_fields, NELEM(audit_fields), base, path);
}

static const struct field approvals_fields[] = {
	{.name = "command",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, approvals_command),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
};

static int approvals_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return fields_parse(c, v, approvals_fields, NELEM(approvals_fields), base, path);
}

/* ---- http: serving MCP over HTTP ----------------------------------------- */

/* A port as an HTTP Host or a listen address writes it: 1 to 65535 in
 * decimal, no sign, no leading zero, so one port has one spelling. */
static bool port_parse(const char *s, size_t len, uint16_t *out)
{
	unsigned v = 0;

	if (len == 0 || len > 5 || s[0] == '0')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (!is_digit(s[i]))
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > 65535)
		return false;
	*out = (uint16_t)v;
	return true;
}

/* Exactly four decimal parts of 0 to 255 without leading zeros: inet_aton
 * would also take "127.1" and "0x7f.1", spellings a reader may not know. */
static bool ipv4_parse(const char *s, size_t len, unsigned char out[4])
{
	size_t i = 0;

	for (int part = 0; part < 4; part++) {
		size_t start = i;
		unsigned v = 0;

		while (i < len && is_digit(s[i]) && i - start < 3)
			v = v * 10 + (unsigned)(s[i++] - '0');
		if (i == start || v > 255 || (s[start] == '0' && i - start > 1))
			return false;
		out[part] = (unsigned char)v;
		if (part < 3 && (i >= len || s[i++] != '.'))
			return false;
	}
	return i == len;
}

/* An IPv6 address as inet_pton reads it, from hex digits, colons and dots
 * only (no zone, which names an interface by a name of the day). */
static bool ipv6_parse(const char *s, size_t len, char text[POLICY_LISTEN_ADDRESS_MAX],
		       unsigned char out[16])
{
	if (len == 0 || len >= POLICY_LISTEN_ADDRESS_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(is_digit(s[i]) || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F') || s[i] == ':' || s[i] == '.'))
			return false;
	memcpy(text, s, len);
	text[len] = '\0';
	return inet_pton(AF_INET6, text, out) == 1;
}

static int listen_form_error(const char *path, struct appl_err *err)
{
	return appl_err_set(err, -EINVAL,
			    "%s: must be IPV4:PORT, [IPV6]:PORT or unix:/PATH (addresses, not host "
			    "names)",
			    path);
}

static int listen_unix_parse(const char *s, size_t len, struct policy_listen *l, const char *path,
			     struct appl_err *err)
{
	int rc = abs_path_check(s, len, path, err);

	if (rc < 0)
		return rc;
	if (len > APPL_POLICY_UNIX_PATH_MAX)
		return appl_err_set(err, -EINVAL, "%s: a socket path is at most %d bytes", path,
				    APPL_POLICY_UNIX_PATH_MAX);
	l->kind = POLICY_LISTEN_UNIX;
	l->path = s;
	l->local = true;
	return 0;
}

/* One listen address. A host name is refused: it may resolve to another
 * address tomorrow, and the signed policy must say where it listens. */
static int listen_one_parse(const char *s, size_t len, struct policy_listen *l, const char *path,
			    struct appl_err *err)
{
	struct in6_addr a6;
	const char *colon;
	size_t alen;

	l->text = s;
	if (len >= 5 && memcmp(s, "unix:", 5) == 0)
		return listen_unix_parse(s + 5, len - 5, l, path, err);
	for (alen = len; alen > 0 && s[alen - 1] != ':'; alen--)
		;
	if (alen == 0)
		return listen_form_error(path, err);
	colon = s + --alen;
	if (s[0] == '[') {
		if (alen < 2 || s[alen - 1] != ']' ||
		    !ipv6_parse(s + 1, alen - 2, l->address, l->addr))
			return listen_form_error(path, err);
		/* ::ffff:a.b.c.d is an IPv4 address in disguise: written as
		 * IPv4 it has one spelling, and its loopback test one form. */
		memcpy(&a6, l->addr, sizeof(a6));
		if (IN6_IS_ADDR_V4MAPPED(&a6))
			return appl_err_set(err, -EINVAL, "%s: write an IPv4 address as IPV4:PORT",
					    path);
		l->kind = POLICY_LISTEN_INET6;
		l->local = IN6_IS_ADDR_LOOPBACK(&a6);
	} else {
		if (!ipv4_parse(s, alen, l->addr))
			return listen_form_error(path, err);
		memcpy(l->address, s, alen);
		l->address[alen] = '\0';
		l->kind = POLICY_LISTEN_INET4;
		l->local = l->addr[0] == 127;
	}
	if (!port_parse(colon + 1, len - alen - 1, &l->port))
		return appl_err_set(err, -EINVAL,
				    "%s: the port must be 1 to 65535 in decimal, without a sign or "
				    "leading zeros",
				    path);
	return 0;
}

static bool listen_same(const struct policy_listen *a, const struct policy_listen *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind == POLICY_LISTEN_UNIX)
		return strcmp(a->path, b->path) == 0;
	return a->port == b->port &&
	       memcmp(a->addr, b->addr, a->kind == POLICY_LISTEN_INET4 ? 4 : 16) == 0;
}

static int listen_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct http_section *h = c->p->serve;
	const json_t *e;
	size_t i;
	int rc = array_check(c, v, 1, APPL_POLICY_HTTP_LISTEN_MAX, "addresses", path);

	(void)base;
	if (rc < 0)
		return rc;
	json_array_foreach(v, i, e) {
		struct policy_listen *l = &h->listen[i];
		path_index(sub, path, i);
		if (!json_is_string(e))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", sub);
		if (json_string_length(e) > APPL_POLICY_HTTP_LISTEN_TEXT)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %d bytes", sub,
					    APPL_POLICY_HTTP_LISTEN_TEXT);
		rc = listen_one_parse(json_string_value(e), json_string_length(e), l, sub, c->err);
		if (rc < 0)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (listen_same(l, &h->listen[j]))
				return appl_err_set(c->err, -EINVAL,
						    "%s: the same address as %s[%zu]", sub, path,
						    j);
		h->pub.nlisten++;
	}
	return 0;
}

/* The endpoint's path: compared byte for byte with the request's, so it
 * has one spelling (no %-escapes), and nothing a proxy or a client could
 * read as another path (no .., no query, no fragment). */
static int http_path_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0 || s[0] != '/')
		return appl_err_set(err, -EINVAL, "%s: must start with /", path);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return appl_err_set(err, -EINVAL,
					    "%s: must be printable ASCII without spaces", path);
	if (memchr(s, '?', len) || memchr(s, '#', len))
		return appl_err_set(err, -EINVAL, "%s: must not hold ? or #", path);
	if (memchr(s, '%', len))
		return appl_err_set(err, -EINVAL, "%s: must not hold %% escapes", path);
	if (strstr(s, ".."))
		return appl_err_set(err, -EINVAL, "%s: must not hold ..", path);
	return 0;
}

/* The host of an origin: a lower-case name ([a-z0-9.-]), an IPv4 address
 * or a bracketed IPv6 one in lower case, as browsers serialise them. */
static size_t origin_host_span(const char *s, size_t len)
{
	char text[POLICY_LISTEN_ADDRESS_MAX];
	unsigned char addr[16];
	size_t i = 0;

	if (len > 0 && s[0] == '[') {
		const char *end = memchr(s, ']', len);
		size_t n = end ? (size_t)(end - s) - 1 : 0;
		for (size_t j = 1; j <= n; j++)
			if (s[j] >= 'A' && s[j] <= 'F')
				return 0;
		return end && ipv6_parse(s + 1, n, text, addr) ? n + 2 : 0;
	}
	while (i < len && (is_lower(s[i]) || is_digit(s[i]) || s[i] == '.' || s[i] == '-'))
		i++;
	return i;
}

/* An Origin header value as a browser sends it: scheme, host, and a port
 * only when it is not the scheme's default (a listed https://a:443 would
 * never match what a browser sends). */
static int origin_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	static const struct {
		const char *prefix;
		uint16_t port;
	} schemes[] = {{"http://", 80}, {"https://", 443}};
	size_t start = 0, host;
	uint16_t def = 0, port = 0;

	for (size_t i = 0; i < NELEM(schemes); i++)
		if (len > strlen(schemes[i].prefix) &&
		    memcmp(s, schemes[i].prefix, strlen(schemes[i].prefix)) == 0) {
			start = strlen(schemes[i].prefix);
			def = schemes[i].port;
		}
	host = start ? origin_host_span(s + start, len - start) : 0;
	if (host == 0 || (start + host < len &&
			  (s[start + host] != ':' ||
			   !port_parse(s + start + host + 1, len - start - host - 1, &port))))
		return appl_err_set(err, -EINVAL,
				    "%s: must be an origin: http:// or https://, a lower-case host "
				    "and perhaps :PORT, nothing after",
				    path);
	if (start + host < len && port == def)
		return appl_err_set(err, -EINVAL,
				    "%s: browsers never send the default port %u: leave it out",
				    path, def);
	return 0;
}

/* A Host header value: host or host:port, printable, no part of a URL
 * besides those. */
static int host_value_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0)
		return appl_err_set(err, -EINVAL, "%s: must not be empty", path);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f ||
		    strchr("/?#@,\\", s[i]))
			return appl_err_set(err, -EINVAL,
					    "%s: must be a Host value, host or host:port "
					    "(printable, no / ? # @ , or \\)",
					    path);
	return 0;
}

/* An array of unique strings, each at most maxlen and passing check, into
 * out (room for max and a NULL). Case-insensitive names compare so. */
static int unique_strings_parse(struct ctx *c, const json_t *v, size_t min, size_t max,
				size_t maxlen, const char *what, str_check_fn check, bool nocase,
				const char *path, const char **out, size_t *n)
{
	char sub[FIELD_PATH_MAX];
	const json_t *e;
	size_t i;
	int rc = array_check(c, v, min, max, what, path);

	if (rc < 0)
		return rc;
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		path_index(sub, path, i);
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

static int origins_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;

	(void)base;
	return unique_strings_parse(c, v, 0, APPL_POLICY_HTTP_ORIGINS_MAX,
				    APPL_POLICY_HTTP_ORIGIN_MAX, "origins", origin_check, false,
				    path, h->origins, &h->pub.norigins);
}

/* An empty list would refuse every request (HTTP/1.1 always sends Host):
 * a mistake, not a policy. Host names compare without case. */
static int hosts_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;

	(void)base;
	return unique_strings_parse(c, v, 1, APPL_POLICY_HTTP_HOSTS_MAX, APPL_POLICY_HTTP_HOST_MAX,
				    "hosts", host_value_check, true, path, h->hosts,
				    &h->pub.nhosts);
}

static const struct field tls_fields[] = {
	{.name = "cert",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_http, tls_cert),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
	{.name = "key",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_http, tls_key),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
};

static int tls_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return fields_parse(c, v, tls_fields, NELEM(tls_fields), base, path);
}

static const struct field serve_fields[] = {
	{.name = "listen", .type = F_FN, .required = true, .parse = listen_parse},
	{.name = "path",
	 .type = F_STR,
	 .off = offsetof(struct policy_http, path),
	 .sdef = POLICY_HTTP_PATH_DEFAULT,
	 .maxlen = APPL_POLICY_HTTP_PATH_MAX,
	 .check = http_path_check},
	{.name = "allowed_origins", .type = F_FN, .parse = origins_parse},
	{.name = "allowed_hosts", .type = F_FN, .parse = hosts_parse},
	{.name = "tls", .type = F_FN, .parse = tls_parse},
};

static void host_add(struct http_section *h, const char *s)
{
	for (size_t i = 0; i < h->pub.nhosts; i++)
		if (strcasecmp(h->hosts[i], s) == 0)
			return;
	h->hosts[h->pub.nhosts++] = s;
}

/* Without allowed_hosts, what a client on this host would send: the
 * loopback names, bare and with each port, and the addresses listened on.
 * Anything else is a DNS rebinding page naming our address its own. */
static void hosts_default(struct http_section *h)
{
	static const char *const names[HTTP_LOOPBACK_NAMES] = {"localhost", "127.0.0.1", "[::1]"};
	size_t k = 0;

	for (size_t i = 0; i < NELEM(names); i++)
		host_add(h, names[i]);
	for (size_t i = 0; i < h->pub.nlisten; i++) {
		const struct policy_listen *l = &h->listen[i];
		bool seen = false;
		if (l->kind == POLICY_LISTEN_UNIX)
			continue;
		for (size_t j = 0; j < i; j++)
			seen = seen || (h->listen[j].kind != POLICY_LISTEN_UNIX &&
					h->listen[j].port == l->port);
		for (size_t n = 0; !seen && n < NELEM(names); n++, k++) {
			snprintf(h->with_port[k], HTTP_HOST_WITH_PORT, "%s:%u", names[n],
				 (unsigned)l->port);
			host_add(h, h->with_port[k]);
		}
	}
	for (size_t i = 0; i < h->pub.nlisten; i++)
		if (h->listen[i].kind != POLICY_LISTEN_UNIX)
			host_add(h, h->listen[i].text);
	h->pub.hosts_default = true;
}

/* A listener other hosts can reach carries bearer tokens over the
 * network: never in clear text. */
static int http_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = calloc(1, sizeof(*h));
	int rc;

	(void)base;
	if (!h)
		return no_memory(c);
	c->p->serve = h;
	fields_default(serve_fields, NELEM(serve_fields), &h->pub);
	rc = fields_parse(c, v, serve_fields, NELEM(serve_fields), &h->pub, path);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < h->pub.nlisten; i++)
		if (!h->listen[i].local && !h->pub.tls_key)
			return appl_err_set(c->err, -EINVAL,
					    "%s.listen[%zu]: %s is not loopback: it needs %s.tls",
					    path, i, h->listen[i].text, path);
	if (h->pub.nhosts == 0)
		hosts_default(h);
	h->pub.listen = h->listen;
	h->pub.origins = h->origins;
	h->pub.hosts = h->hosts;
	return 0;
}

/* ---- servers ------------------------------------------------------------- */

/* A NULL-terminated array of the strings of v, each checked; element 0 may
 * have its own check (the command's absolute path). */
static int strings_parse(struct ctx *c, const json_t *v, size_t maxlen, str_check_fn first,
			 str_check_fn rest, const char *path, const char ***out, size_t *n)
{
	char sub[FIELD_PATH_MAX];
	size_t i, count = json_array_size(v);
	const json_t *e;
	const char **arr = calloc(count + 1, sizeof(*arr));

	if (!arr)
		return no_memory(c);
	*out = arr;
	json_array_foreach(v, i, e) {
		str_check_fn check = i == 0 && first ? first : rest;
		int rc = 0;
		path_index(sub, path, i);
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

static int command_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct policy_server *s = base;
	const char **argv = NULL;
	int rc = array_check(c, v, 1, APPL_POLICY_ARGV_MAX, "strings", path);

	if (rc < 0)
		return rc;
	rc = strings_parse(c, v, APPL_POLICY_ARG_MAX, abs_path_check, NULL, path, &argv, &s->argc);
	s->argv = argv;
	return rc;
}

static int env_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_server *s = base;
	const char **env = NULL;
	int rc = array_check(c, v, 0, APPL_POLICY_ENV_MAX, "names", path);

	if (rc < 0)
		return rc;
	rc = strings_parse(c, v, APPL_POLICY_ENV_NAME_MAX, NULL, env_name_check, path, &env,
			   &s->nenv);
	s->env = env;
	if (rc < 0)
		return rc;
	for (size_t i = 1; i < s->nenv; i++) {
		for (size_t j = 0; j < i; j++) {
			if (strcmp(env[i], env[j]) == 0) {
				path_index(sub, path, i);
				return appl_err_set(c->err, -EINVAL, "%s: %s is listed twice", sub,
						    env[i]);
			}
		}
	}
	return 0;
}

static int headers_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_server *s = base;
	struct policy_header *h;
	const char *name;
	json_t *val;
	int rc = map_check(c, v, APPL_POLICY_HEADERS_MAX, "headers", path);

	if (rc < 0)
		return rc;
	h = calloc(json_object_size(v) + 1, sizeof(*h));
	if (!h)
		return no_memory(c);
	s->headers = h;
	json_object_foreach((json_t *)v, name, val) {
		path_key(sub, path, name);
		rc = header_name_check(name, strlen(name), sub, c->err);
		if (rc == 0)
			rc = header_reserved_check(name, sub, c->err);
		if (rc < 0)
			return rc;
		/* HTTP names are case-insensitive; JSON keys are not. */
		for (size_t j = 0; j < s->nheaders; j++)
			if (strcasecmp(name, h[j].name) == 0)
				return appl_err_set(c->err, -EINVAL, "%s: the same header as %s",
						    sub, h[j].name);
		if (!json_is_string(val))
			return appl_err_set(c->err, -EINVAL, "%s: must be a string", sub);
		if (json_string_length(val) > APPL_POLICY_HEADER_VALUE_MAX)
			return appl_err_set(c->err, -EINVAL, "%s: longer than %d bytes", sub,
					    APPL_POLICY_HEADER_VALUE_MAX);
		rc = header_value_check(json_string_value(val), json_string_length(val), sub,
					c->err);
		if (rc < 0)
			return rc;
		h[s->nheaders].name = name;
		h[s->nheaders].value = json_string_value(val);
		s->nheaders++;
	}
	return 0;
}

/* A user name as useradd takes it: [a-z_][a-z0-9_-]*, at most 32. */
static int user_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	size_t i = 0;

	if (len > 0 && (is_lower(s[0]) || s[0] == '_'))
		for (i = 1;
		     i < len && (is_lower(s[i]) || is_digit(s[i]) || s[i] == '_' || s[i] == '-');
		     i++)
			;
	if (len == 0 || len > APPL_POLICY_USER_MAX || i != len)
		return appl_err_set(err, -EINVAL,
				    "%s: must be a user name ([a-z_][a-z0-9_-]*, at most %d "
				    "characters)",
				    path, APPL_POLICY_USER_MAX);
	return 0;
}

/* The fields both kinds of server have, in both tables alike. */
#define SERVER_RESOURCES_FIELD                                                                     \
	{                                                                                          \
		.name = "resources", .type = F_BOOL,                                               \
		.off = offsetof(struct policy_server, resources)                                   \
	}
#define SERVER_CONCURRENCY_FIELD                                                                   \
	{                                                                                          \
		.name = "concurrency", .type = F_UINT,                                             \
		.off = offsetof(struct policy_server, concurrency),                                \
		.min = APPL_SERVER_CONCURRENCY_MIN, .max = APPL_SERVER_CONCURRENCY_CEIL,           \
		.def = APPL_SERVER_CONCURRENCY_DEF                                                 \
	}

static const struct field stdio_fields[] = {
	{.name = "command", .type = F_FN, .required = true, .parse = command_parse},
	{.name = "env", .type = F_FN, .parse = env_parse},
	{.name = "cwd",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, cwd),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
	{.name = "user",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, user),
	 .maxlen = APPL_POLICY_USER_MAX,
	 .check = user_check},
	{.name = "memory_mb",
	 .type = F_UINT,
	 .off = offsetof(struct policy_server, memory_mb),
	 .min = APPL_UPSTREAM_MEMORY_MB_MIN,
	 .max = APPL_UPSTREAM_MEMORY_MB_MAX,
	 .def = APPL_UPSTREAM_MEMORY_MB_DEF},
	{.name = "pids",
	 .type = F_UINT,
	 .off = offsetof(struct policy_server, pids),
	 .min = APPL_UPSTREAM_PIDS_MIN,
	 .max = APPL_UPSTREAM_PIDS_MAX,
	 .def = APPL_UPSTREAM_PIDS_DEF},
	{.name = "network",
	 .type = F_BOOL,
	 .off = offsetof(struct policy_server, network),
	 .def = 1},
	SERVER_RESOURCES_FIELD,
	SERVER_CONCURRENCY_FIELD,
};

static const struct field http_fields[] = {
	{.name = "url",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_server, url),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = server_url_check},
	{.name = "headers", .type = F_FN, .parse = headers_parse},
	{.name = "ca_file",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, ca_file),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = abs_path_check},
	{.name = "proxy",
	 .type = F_STR,
	 .off = offsetof(struct policy_server, proxy),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = url_check},
	SERVER_RESOURCES_FIELD,
	SERVER_CONCURRENCY_FIELD,
};

static int server_parse(struct ctx *c, const char *name, const json_t *v, struct policy_server *s,
			const char *path)
{
	bool cmd, url;
	int rc = server_name_check(name, path, c->err);

	if (rc < 0)
		return rc;
	if (!json_is_object(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be an object", path);
	cmd = json_object_get(v, "command") != NULL;
	url = json_object_get(v, "url") != NULL;
	if (cmd && url)
		return appl_err_set(c->err, -EINVAL,
				    "%s: command (stdio) and url (HTTP) exclude each other", path);
	if (!cmd && !url)
		return appl_err_set(c->err, -EINVAL, "%s: needs command (stdio) or url (HTTP)",
				    path);
	s->name = name;
	if (cmd) {
		s->kind = POLICY_SERVER_STDIO;
		fields_default(stdio_fields, NELEM(stdio_fields), s);
		return fields_parse(c, v, stdio_fields, NELEM(stdio_fields), s, path);
	}
	s->kind = POLICY_SERVER_HTTP;
	c->p->http = true;
	fields_default(http_fields, NELEM(http_fields), s);
	return fields_parse(c, v, http_fields, NELEM(http_fields), s, path);
}

static int server_cmp(const void *a, const void *b)
{
	return strcmp(((const struct policy_server *)a)->name,
		      ((const struct policy_server *)b)->name);
}

/* Does template t name variable var as {env:var}? */
static bool tmpl_names(const char *t, const char *var)
{
	size_t n = strlen(var);

	for (const char *q = t; (q = strstr(q, "{env:")); q++)
		if (strncmp(q + 5, var, n) == 0 && q[5 + n] == '}')
			return true;
	return false;
}

/* A variable an HTTP server's header takes is a credential of that server:
 * the appliance takes it out of its environment at start, so a stdio
 * server's env may not name it too. */
static int secrets_private(struct ctx *c)
{
	const struct policy *p = c->p;

	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *a = &p->servers[i];

		for (size_t k = 0; a->kind == POLICY_SERVER_STDIO && k < a->nenv; k++)
			for (size_t j = 0; j < p->nservers; j++) {
				const struct policy_server *b = &p->servers[j];

				for (size_t h = 0; b->kind == POLICY_SERVER_HTTP && h < b->nheaders;
				     h++)
					if (tmpl_names(b->headers[h].value, a->env[k]))
						return appl_err_set(
							c->err, -EINVAL,
							"servers.%s.env: %s is taken by "
							"servers.%s.headers.%s, and only that "
							"server may have it",
							a->name, a->env[k], b->name,
							b->headers[h].name);
			}
	}
	return 0;
}

static int servers_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *name;
	json_t *sv;
	int rc = map_check(c, v, APPL_POLICY_SERVERS_MAX, "servers", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->servers = calloc(json_object_size(v) + 1, sizeof(*p->servers));
	if (!p->servers)
		return no_memory(c);
	json_object_foreach((json_t *)v, name, sv) {
		/* Counted first, so policy_free sees what a failed parse allocated. */
		struct policy_server *s = &p->servers[p->nservers++];
		path_key(sub, path, name);
		rc = server_parse(c, name, sv, s, sub);
		if (rc < 0)
			return rc;
	}
	qsort(p->servers, p->nservers, sizeof(*p->servers), server_cmp);
	return secrets_private(c);
}

/* ---- tool patterns ------------------------------------------------------- */

/* "server.tool" or "server.*", the server declared in `servers`. */
static int pattern_check(struct ctx *c, const char *pat, const char *path)
{
	const char *dot = strchr(pat, '.');
	char server[APPL_POLICY_SERVER_NAME_MAX + 1];
	size_t n = dot ? (size_t)(dot - pat) : 0;

	if (!dot || n == 0)
		return appl_err_set(c->err, -EINVAL, "%s: must be server.tool or server.*", path);
	if (n > APPL_POLICY_SERVER_NAME_MAX)
		return appl_err_set(c->err, -EINVAL, "%s: no server named %.*s", path,
				    APPL_POLICY_SERVER_NAME_MAX, pat);
	memcpy(server, pat, n);
	server[n] = '\0';
	if (!policy_server_find(c->p, server))
		return appl_err_set(c->err, -EINVAL, "%s: no server named %s", path, server);
	if (strcmp(dot + 1, "*") != 0 && !policy_tool_name_valid(dot + 1))
		return appl_err_set(c->err, -EINVAL,
				    "%s: the tool must be * or 1 to %d of A-Z a-z 0-9 _ - . /",
				    path, APPL_POLICY_TOOL_NAME_MAX);
	return 0;
}

/* 2: pat names exactly server.tool; 1: pat is server.*; 0: neither. The
 * wildcard is tested first, so a tool an upstream calls "*" cannot pass for
 * an exact entry. */
static int pattern_match(const char *pat, const char *server, const char *tool)
{
	size_t n = strlen(server);

	if (strncmp(pat, server, n) != 0 || pat[n] != '.')
		return 0;
	if (strcmp(pat + n + 1, "*") == 0)
		return 1;
	return strcmp(pat + n + 1, tool) == 0 ? 2 : 0;
}

static const char *const access_names[] = {
	[POLICY_ACCESS_READ] = "read",
	[POLICY_ACCESS_WRITE] = "write",
};

static int access_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct rule *r = base;

	for (size_t i = 0; json_is_string(v) && i < NELEM(access_names); i++) {
		if (strcmp(json_string_value(v), access_names[i]) == 0) {
			r->access = (enum policy_access)i;
			return 0;
		}
	}
	return appl_err_set(c->err, -EINVAL, "%s: must be \"read\" or \"write\"", path);
}

static const struct field rule_fields[] = {
	{.name = "access", .type = F_FN, .required = true, .parse = access_parse},
	{.name = "approval", .type = F_BOOL, .off = offsetof(struct rule, approval)},
};

static int tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *pat;
	json_t *rv;
	int rc = map_check(c, v, APPL_POLICY_TOOL_RULES_MAX, "entries", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->rules = calloc(json_object_size(v) + 1, sizeof(*p->rules));
	if (!p->rules)
		return no_memory(c);
	json_object_foreach((json_t *)v, pat, rv) {
		struct rule *r = &p->rules[p->nrules];
		path_key(sub, path, pat);
		rc = pattern_check(c, pat, sub);
		if (rc == 0)
			rc = fields_parse(c, rv, rule_fields, NELEM(rule_fields), r, sub);
		if (rc < 0)
			return rc;
		r->pattern = pat;
		p->nrules++;
	}
	return 0;
}

/* ---- roles and clients ---------------------------------------------------- */

static int role_tools_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy_role *r = base;
	const char **pats = NULL;
	int rc = array_check(c, v, 0, APPL_POLICY_ROLE_TOOLS_MAX, "patterns", path);

	if (rc < 0)
		return rc;
	rc = strings_parse(c, v, APPL_POLICY_SERVER_NAME_MAX + 1 + APPL_POLICY_TOOL_NAME_MAX, NULL,
			   NULL, path, &pats, &r->ntools);
	r->tools = pats;
	for (size_t i = 0; rc == 0 && i < r->ntools; i++) {
		path_index(sub, path, i);
		rc = pattern_check(c, pats[i], sub);
		for (size_t j = 0; rc == 0 && j < i; j++)
			if (strcmp(pats[i], pats[j]) == 0)
				rc = appl_err_set(c->err, -EINVAL, "%s: listed twice", sub);
	}
	return rc;
}

static const struct field role_fields[] = {
	{.name = "tools", .type = F_FN, .required = true, .parse = role_tools_parse},
	{.name = "write", .type = F_BOOL, .off = offsetof(struct policy_role, write), .def = 0},
	{.name = "approve_writes",
	 .type = F_BOOL,
	 .off = offsetof(struct policy_role, approve_writes)},
};

static int role_cmp(const void *a, const void *b)
{
	return strcmp(((const struct policy_role *)a)->name, ((const struct policy_role *)b)->name);
}

static int roles_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	char sub[FIELD_PATH_MAX];
	struct policy *p = c->p;
	const char *name;
	json_t *rv;
	int rc = map_check(c, v, APPL_POLICY_ROLES_MAX, "roles", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->roles = calloc(json_object_size(v) + 1, sizeof(*p->roles));
	if (!p->roles)
		return no_memory(c);
	json_object_foreach((json_t *)v, name, rv) {
		struct policy_role *r = &p->roles[p->nroles++];
		path_key(sub, path, name);
		r->name = name;
		rc = label_check(name, strlen(name), sub, c->err);
		if (rc == 0)
			rc = fields_parse(c, rv, role_fields, NELEM(role_fields), r, sub);
		if (rc < 0)
			return rc;
	}
	qsort(p->roles, p->nroles, sizeof(*p->roles), role_cmp);
	return 0;
}

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
	 .check = label_check},
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
	int rc = array_check(c, v, 0, APPL_POLICY_TOKENS_MAX, "tokens", path);

	(void)base;
	if (rc < 0)
		return rc;
	p->tokens = calloc(json_array_size(v) + 1, sizeof(*p->tokens));
	if (!p->tokens)
		return no_memory(c);
	json_array_foreach(v, i, tv) {
		struct policy_token *t = &p->tokens[i];
		path_index(sub, path, i);
		rc = fields_parse(c, tv, token_fields, NELEM(token_fields), t, sub);
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

static int clients_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return fields_parse(c, v, client_fields, NELEM(client_fields), base, path);
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
	 .check = deployment_check},
	{.name = "image", .type = F_FN, .required = true, .parse = image_parse},
	{.name = "runtime", .type = F_FN, .parse = runtime_parse},
	{.name = "limits", .type = F_FN, .parse = limits_parse},
	{.name = "servers", .type = F_FN, .parse = servers_parse},
	{.name = "tools", .type = F_FN, .parse = tools_parse},
	{.name = "roles", .type = F_FN, .parse = roles_parse},
	{.name = "clients", .type = F_FN, .parse = clients_parse},
	{.name = "audit", .type = F_FN, .parse = audit_parse},
	{.name = "approvals", .type = F_FN, .parse = approvals_parse},
	{.name = "http", .type = F_FN, .parse = http_parse},
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
	fields_default(runtime_fields, NELEM(runtime_fields), p);
	fields_default(top_fields, NELEM(top_fields), p);
	policy_limits_default(&p->limits);
	return p;
}

/* Rootless, the appliance cannot change a server's user or give it a
 * network namespace: a policy asking for either is refused, not ignored. */
static int rootless_check(const struct policy *p, struct appl_err *err)
{
	if (!p->rootless)
		return 0;
	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *s = &p->servers[i];

		if (s->kind == POLICY_SERVER_STDIO && !s->network)
			return appl_err_set(err, -EINVAL,
					    "servers.%s.network: false needs root (the policy is "
					    "rootless)",
					    s->name);
		if (s->kind == POLICY_SERVER_STDIO && s->user)
			return appl_err_set(err, -EINVAL,
					    "servers.%s.user: needs root (the policy is rootless)",
					    s->name);
	}
	return 0;
}

/* Two servers that name one user run as one uid: each could read the
 * other's memory and signal it. A policy that asks for that is refused;
 * leaving user out gives each a uid of its own. */
static int users_apart_check(const struct policy *p, struct appl_err *err)
{
	for (size_t i = 0; i < p->nservers; i++) {
		const struct policy_server *a = &p->servers[i];

		for (size_t k = 0; a->kind == POLICY_SERVER_STDIO && a->user && k < i; k++) {
			const struct policy_server *b = &p->servers[k];

			if (b->kind == POLICY_SERVER_STDIO && b->user &&
			    strcmp(a->user, b->user) == 0)
				return appl_err_set(
					err, -EINVAL,
					"servers.%s.user and servers.%s.user both name %s: servers "
					"that share a user are not apart (each may read the "
					"other's memory); leave user out to give each a user of "
					"its own",
					b->name, a->name, a->user);
		}
	}
	return 0;
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
	rc = fields_parse(&c, root, top_fields, NELEM(top_fields), c.p, "");
	if (rc == 0)
		rc = rootless_check(c.p, err);
	if (rc == 0)
		rc = users_apart_check(c.p, err);
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
	for (size_t i = 0; i < p->nroles; i++)
		free((void *)p->roles[i].tools);
	free(p->roles);
	free(p->rules);
	free(p->tokens);
	free(p->layout);
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

void policy_limits_default(struct policy_limits *l)
{
	fields_default(limit_fields, NELEM(limit_fields), l);
}

void policy_limits_get(const struct policy *p, struct policy_limits *out)
{
	*out = p->limits;
}

size_t policy_server_count(const struct policy *p)
{
	return p->nservers;
}

const struct policy_server *policy_server_get(const struct policy *p, size_t i)
{
	return i < p->nservers ? &p->servers[i] : NULL;
}

const struct policy_server *policy_server_find(const struct policy *p, const char *name)
{
	for (size_t i = 0; name && i < p->nservers; i++)
		if (p->servers[i].name && strcmp(p->servers[i].name, name) == 0)
			return &p->servers[i];
	return NULL;
}

bool policy_http_used(const struct policy *p)
{
	return p->http;
}

/* Resources are not tools: `tools` has no say, and only a role given the
 * whole server ("server.*") may read them, so naming one tool of a server
 * never opens everything else the server holds. */
bool policy_resources_allowed(const struct policy *p, const char *server, const char *role)
{
	const struct policy_server *s;
	const struct policy_role *r;
	size_t n;

	if (!p || !server || !role)
		return false;
	s = policy_server_find(p, server);
	r = policy_role_find(p, role);
	if (!s || !s->resources || !r)
		return false;
	n = strlen(server);
	for (size_t i = 0; i < r->ntools; i++)
		if (strncmp(r->tools[i], server, n) == 0 && strcmp(r->tools[i] + n, ".*") == 0)
			return true;
	return false;
}

size_t policy_role_count(const struct policy *p)
{
	return p->nroles;
}

const struct policy_role *policy_role_get(const struct policy *p, size_t i)
{
	return i < p->nroles ? &p->roles[i] : NULL;
}

const struct policy_role *policy_role_find(const struct policy *p, const char *name)
{
	for (size_t i = 0; name && i < p->nroles; i++)
		if (strcmp(p->roles[i].name, name) == 0)
			return &p->roles[i];
	return NULL;
}

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

const char *policy_audit_path(const struct policy *p)
{
	return p->audit_path;
}

bool policy_audit_seal(const struct policy *p)
{
	return p->audit_seal;
}

const struct policy_http *policy_http(const struct policy *p)
{
	return p && p->serve ? &p->serve->pub : NULL;
}

/* ---- the TLS key on disk (for run) ------------------------------------------ */

static int tls_file_stat(const char *what, const char *file, struct stat *st, struct appl_err *err)
{
	if (stat(file, st) < 0)
		return appl_err_errno(err, -errno, errno, "http.tls.%s: %s", what, file);
	if (!S_ISREG(st->st_mode))
		return appl_err_set(err, -EINVAL, "http.tls.%s: %s is not a regular file", what,
				    file);
	return 0;
}

int policy_http_tls_check(const struct policy *p, struct appl_err *err)
{
	const struct policy_http *h = policy_http(p);
	struct stat st;
	int rc;

	if (!h || !h->tls_key)
		return 0;
	if ((rc = tls_file_stat("cert", h->tls_cert, &st, err)) < 0)
		return rc;
	if ((rc = tls_file_stat("key", h->tls_key, &st, err)) < 0)
		return rc;
	/* Whoever owns the key may change its mode, and whoever may read it
	 * can be this server to every client: only we may do either. */
	if (st.st_uid != geteuid())
		return appl_err_set(err, -EPERM,
				    "http.tls.key: %s belongs to uid %u, not to the appliance's "
				    "uid %u",
				    h->tls_key, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return appl_err_set(err, -EPERM,
				    "http.tls.key: %s has mode %04o: group or others may read or "
				    "change it (chmod 600)",
				    h->tls_key, (unsigned)(st.st_mode & 07777));
	return 0;
}

/* ---- access decisions ------------------------------------------------------ */

/* The entry that decides server.tool: the exact one, else the wildcard. */
static const struct rule *rule_of(const struct policy *p, const char *server, const char *tool)
{
	const struct rule *exact = NULL, *wild = NULL;

	for (size_t i = 0; i < p->nrules; i++) {
		int m = pattern_match(p->rules[i].pattern, server, tool);
		if (m == 2)
			exact = &p->rules[i];
		else if (m == 1)
			wild = &p->rules[i];
	}
	return exact ? exact : wild;
}

/* The tool's access under `tools`, or -1 when no entry admits it. */
static int tool_class(const struct policy *p, const char *server, const char *tool,
		      bool read_only_hint)
{
	const struct rule *r = rule_of(p, server, tool);

	if (!r)
		return -1;
	if (pattern_match(r->pattern, server, tool) == 2)
		return (int)r->access;
	/* Under a wildcard the server's own hint sorts its tools: "read"
	 * admits only what it calls read-only, "write" admits everything but
	 * still counts hinted tools as reads, so read-only roles keep them. */
	if (read_only_hint)
		return POLICY_ACCESS_READ;
	return r->access == POLICY_ACCESS_WRITE ? POLICY_ACCESS_WRITE : -1;
}

static bool role_names(const struct policy_role *r, const char *server, const char *tool)
{
	for (size_t i = 0; i < r->ntools; i++)
		if (pattern_match(r->tools[i], server, tool))
			return true;
	return false;
}

enum policy_verdict policy_tool_check(const struct policy *p, const char *server, const char *tool,
				      bool read_only_hint, const char *role,
				      enum policy_access *access)
{
	const struct policy_role *r;
	int cls;

	if (!p || !server || !tool)
		return POLICY_DENY_UNLISTED;
	r = policy_role_find(p, role);
	if (!r)
		return POLICY_DENY_NO_ROLE;
	cls = tool_class(p, server, tool, read_only_hint);
	if (cls < 0)
		return POLICY_DENY_UNLISTED;
	if (!role_names(r, server, tool))
		return POLICY_DENY_ROLE;
	if (cls == POLICY_ACCESS_WRITE && !r->write)
		return POLICY_DENY_WRITE;
	if (access)
		*access = (enum policy_access)cls;
	return POLICY_OK;
}

int policy_tool_access(const struct policy *p, const char *server, const char *tool,
		       bool read_only_hint, const char *role, enum policy_access *access)
{
	return policy_tool_check(p, server, tool, read_only_hint, role, access) == POLICY_OK;
}

bool policy_tool_approval(const struct policy *p, const char *server, const char *tool,
			  const char *role, enum policy_access access)
{
	const struct policy_role *r;
	const struct rule *rule;

	if (!p || !server || !tool)
		return false;
	r = policy_role_find(p, role);
	rule = rule_of(p, server, tool);
	return (rule && rule->approval) ||
	       (access == POLICY_ACCESS_WRITE && r && r->approve_writes);
}

bool policy_approvals_used(const struct policy *p)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (p->rules[i].approval)
			return true;
	for (size_t i = 0; i < p->nroles; i++)
		if (p->roles[i].approve_writes)
			return true;
	return false;
}

const char *policy_approvals_command(const struct policy *p)
{
	return p->approvals_command;
}

const char *policy_verdict_text(enum policy_verdict v)
{
	static const char *const texts[] = {
		[POLICY_OK] = "allowed",
		[POLICY_DENY_UNLISTED] = "not allowed by the policy",
		[POLICY_DENY_ROLE] = "not allowed for this client's role",
		[POLICY_DENY_WRITE] = "a write tool, and this client's role may only read",
		[POLICY_DENY_NO_ROLE] = "this client has no role in the policy",
	};

	if ((unsigned)v < NELEM(texts) && texts[v])
		return texts[v];
	return "not allowed";
}
