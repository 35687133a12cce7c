/* server_check.c: checks of what a server entry names: its own name (a
 * Python namespace in the cell), environment variables, URLs, HTTP
 * headers and the user it runs as. Each refuses what would let a policy
 * value break or smuggle something past the appliance. */
#include "policy/internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/pyname.h"

/* Server names become Python namespaces in the cell: [a-z][a-z0-9_]*. */
int policy_server_name_check(const char *s, const char *path, struct appl_err *err)
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

int policy_env_name_check(const char *s, size_t len, const char *path, struct appl_err *err)
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
int policy_url_check(const char *s, size_t len, const char *path, struct appl_err *err)
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

int policy_server_url_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	int rc = policy_url_check(s, len, path, err);
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

int policy_header_name_check(const char *s, size_t len, const char *path, struct appl_err *err)
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

int policy_header_reserved_check(const char *name, const char *path, struct appl_err *err)
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
int policy_header_value_check(const char *s, size_t len, const char *path, struct appl_err *err)
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

/* A user name as useradd takes it: [a-z_][a-z0-9_-]*, at most 32. */
int policy_user_check(const char *s, size_t len, const char *path, struct appl_err *err)
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
