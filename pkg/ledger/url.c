/* url.c: the ledger's URL (see url.h). */
#include "ledger/url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

/* A decimal number in [lo, hi] spanning exactly [s, end): no sign, no
 * leading zero, no overflow. */
static bool decimal(const char *s, const char *end, unsigned lo, unsigned hi, unsigned *out)
{
	unsigned long v = 0;

	if (s == end || end - s > 10 || (*s == '0' && end - s > 1))
		return false;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned long)(*s - '0');
	}
	if (v < lo || v > hi)
		return false;
	*out = (unsigned)v;
	return true;
}

/* Characters of a name or an IPv4 address: what DNS allows, and nothing
 * the URL's other parts use (an '@' would be userinfo). */
static bool host_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '.'))
			return false;
	}
	return n > 0;
}

static int parse_unix(const char *path, struct ledger_url *u, struct appl_err *err)
{
	size_t n = strlen(path);

	if (path[0] != '/')
		return appl_err_set(err, -EINVAL, "ledger URL: unix: needs an absolute path");
	if (n > LEDGER_PATH_MAX)
		return appl_err_set(err, -EINVAL, "ledger URL: the socket path is over %u bytes",
				    LEDGER_PATH_MAX);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
			return appl_err_set(err, -EINVAL,
					    "ledger URL: a control character in the path");
	u->unix_socket = true;
	memcpy(u->path, path, n + 1);
	return 0;
}

/* HOST: "[v6]" or a name or IPv4 address, up to the ':' before the port. */
static int parse_host(const char *s, const char **rest, struct ledger_url *u, struct appl_err *err)
{
	const char *end;
	unsigned char a[16];

	if (*s == '[') {
		if (!(end = strchr(s, ']')) || (size_t)(end - s - 1) > LEDGER_HOST_MAX)
			return appl_err_set(err, -EINVAL, "ledger URL: an unclosed [address]");
		memcpy(u->host, s + 1, (size_t)(end - s - 1));
		u->host[end - s - 1] = '\0';
		if (inet_pton(AF_INET6, u->host, a) != 1)
			return appl_err_set(err, -EINVAL, "ledger URL: not an IPv6 address in []");
		u->literal = true;
		*rest = end + 1;
		return 0;
	}
	if (!(end = strchr(s, ':')))
		return appl_err_set(err, -EINVAL, "ledger URL: HOST:PORT, the port is missing");
	if ((size_t)(end - s) > LEDGER_HOST_MAX || !host_chars(s, (size_t)(end - s)))
		return appl_err_set(err, -EINVAL,
				    "ledger URL: the host is not a name or an address (no "
				    "user:password@, which this client never takes from a URL)");
	memcpy(u->host, s, (size_t)(end - s));
	u->host[end - s] = '\0';
	u->literal = inet_pton(AF_INET, u->host, a) == 1;
	*rest = end;
	return 0;
}

static int parse_redis(const char *s, struct ledger_url *u, struct appl_err *err)
{
	const char *p = s, *slash;
	int rc;

	if ((rc = parse_host(s, &p, u, err)) < 0)
		return rc;
	if (*p != ':')
		return appl_err_set(err, -EINVAL, "ledger URL: HOST:PORT, the port is missing");
	p++;
	slash = strchr(p, '/');
	if (!decimal(p, slash ? slash : p + strlen(p), 1, 65535, &u->port))
		return appl_err_set(err, -EINVAL, "ledger URL: the port is not 1 to 65535");
	if (slash && !decimal(slash + 1, slash + 1 + strlen(slash + 1), 0, LEDGER_DB_MAX, &u->db))
		return appl_err_set(err, -EINVAL, "ledger URL: the database is not 0 to %u",
				    LEDGER_DB_MAX);
	return 0;
}

int ledger_url_parse(const char *url, struct ledger_url *u, struct appl_err *err)
{
	memset(u, 0, sizeof(*u));
	if (!url || strnlen(url, LEDGER_URL_MAX + 1) > LEDGER_URL_MAX)
		return appl_err_set(err, -EINVAL, "ledger URL: missing or over %u bytes",
				    LEDGER_URL_MAX);
	if (strncmp(url, "unix:", 5) == 0)
		return parse_unix(url + 5, u, err);
	if (strncmp(url, "redis://", 8) == 0)
		return parse_redis(url + 8, u, err);
	if (strncmp(url, "rediss://", 9) == 0)
		return appl_err_set(err, -EINVAL,
				    "ledger URL: TLS (rediss://) is not supported: keep the "
				    "ledger on a private network or a Unix socket");
	return appl_err_set(err, -EINVAL, "ledger URL: not redis://HOST:PORT[/DB] or unix:/PATH");
}
