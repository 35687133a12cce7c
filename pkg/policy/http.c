/* http.c: the `http` section, serving MCP over HTTP: listen addresses
 * (addresses only, never host names), the endpoint's path, the allowed
 * origins and hosts, and TLS; and the check `run` makes of the TLS key on
 * disk. The section is fixed-size: parsing it allocates one block. */
#include "policy/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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
	int rc = policy_abs_path_check(s, len, path, err);

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
	int rc = policy_array_check(c, v, 1, APPL_POLICY_HTTP_LISTEN_MAX, "addresses", path);

	(void)base;
	if (rc < 0)
		return rc;
	json_array_foreach(v, i, e) {
		struct policy_listen *l = &h->listen[i];
		policy_path_index(sub, path, i);
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

/* The metrics listener: one address, reachable from this host only, as
 * it asks for no token (docs/metrics.md). That it is none of `listen` is
 * checked once both are read (policy_http_parse). */
static int metrics_listen_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;
	int rc;

	(void)base;
	if (!json_is_string(v))
		return appl_err_set(c->err, -EINVAL, "%s: must be a string", path);
	if (json_string_length(v) > APPL_POLICY_HTTP_LISTEN_TEXT)
		return appl_err_set(c->err, -EINVAL, "%s: longer than %d bytes", path,
				    APPL_POLICY_HTTP_LISTEN_TEXT);
	rc = listen_one_parse(json_string_value(v), json_string_length(v), &h->metrics, path,
			      c->err);
	if (rc < 0)
		return rc;
	if (!h->metrics.local)
		return appl_err_set(c->err, -EINVAL,
				    "%s: %s is not loopback: metrics are served on 127.0.0.0/8, "
				    "[::1] or unix:/PATH only (they ask for no token)",
				    path, h->metrics.text);
	h->pub.metrics = &h->metrics;
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

static int origins_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;

	(void)base;
	return policy_strings_unique_parse(c, v, 0, APPL_POLICY_HTTP_ORIGINS_MAX,
					   APPL_POLICY_HTTP_ORIGIN_MAX, "origins", origin_check,
					   false, path, h->origins, &h->pub.norigins);
}

/* An empty list would refuse every request (HTTP/1.1 always sends Host):
 * a mistake, not a policy. Host names compare without case. */
static int hosts_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;

	(void)base;
	return policy_strings_unique_parse(c, v, 1, APPL_POLICY_HTTP_HOSTS_MAX,
					   APPL_POLICY_HTTP_HOST_MAX, "hosts", host_value_check,
					   true, path, h->hosts, &h->pub.nhosts);
}

static const struct field tls_fields[] = {
	{.name = "cert",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_http, tls_cert),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
	{.name = "key",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy_http, tls_key),
	 .maxlen = APPL_POLICY_PATH_MAX,
	 .check = policy_abs_path_check},
};

static int tls_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_fields_parse(c, v, tls_fields, NELEM(tls_fields), base, path);
}

static int oauth_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = c->p->serve;
	int rc;

	(void)base;
	if ((rc = policy_oauth_parse(c, &h->oauth, v, path)) < 0)
		return rc;
	h->pub.oauth = &h->oauth;
	return 0;
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
	{.name = "metrics_listen", .type = F_FN, .parse = metrics_listen_parse},
	{.name = "oauth", .type = F_FN, .parse = oauth_parse},
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
int policy_http_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	struct http_section *h = calloc(1, sizeof(*h));
	int rc;

	(void)base;
	if (!h)
		return policy_ctx_nomem(c);
	c->p->serve = h;
	policy_fields_default(serve_fields, NELEM(serve_fields), &h->pub);
	rc = policy_fields_parse(c, v, serve_fields, NELEM(serve_fields), &h->pub, path);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < h->pub.nlisten; i++)
		if (!h->listen[i].local && !h->pub.tls_key)
			return appl_err_set(c->err, -EINVAL,
					    "%s.listen[%zu]: %s is not loopback: it needs %s.tls",
					    path, i, h->listen[i].text, path);
	for (size_t i = 0; h->pub.metrics && i < h->pub.nlisten; i++)
		if (listen_same(&h->metrics, &h->listen[i]))
			return appl_err_set(c->err, -EINVAL,
					    "%s.metrics_listen: the same address as %s.listen[%zu]",
					    path, path, i);
	if (h->pub.nhosts == 0)
		hosts_default(h);
	h->pub.listen = h->listen;
	h->pub.origins = h->origins;
	h->pub.hosts = h->hosts;
	return 0;
}

const struct policy_http *policy_http(const struct policy *p)
{
	return p && p->serve ? &p->serve->pub : NULL;
}

const char *policy_http_metrics_listen(const struct policy *p)
{
	const struct policy_http *h = policy_http(p);

	return h && h->metrics ? h->metrics->text : NULL;
}

bool policy_http_metrics_same(const struct policy *a, const struct policy *b)
{
	const struct policy_http *ha = policy_http(a), *hb = policy_http(b);
	const struct policy_listen *la = ha ? ha->metrics : NULL, *lb = hb ? hb->metrics : NULL;

	return la && lb ? listen_same(la, lb) : la == lb;
}

int policy_http_listen_check(const struct policy *p, const char *addr, struct appl_err *err)
{
	const struct policy_http *h = policy_http(p);
	struct policy_listen l;

	if (!h)
		return appl_err_set(err, -EINVAL, "--listen: the policy has no http section");
	if (h->hosts_default)
		return appl_err_set(
			err, -EINVAL,
			"--listen: the policy must name http.allowed_hosts (its default "
			"is made of the policy's own listen addresses)");
	if (strlen(addr) > APPL_POLICY_HTTP_LISTEN_TEXT)
		return appl_err_set(err, -EINVAL, "--listen: longer than %d bytes",
				    APPL_POLICY_HTTP_LISTEN_TEXT);
	if (listen_one_parse(addr, strlen(addr), &l, "--listen", err) < 0)
		return err->code;
	if (!l.local && !h->tls_key)
		return appl_err_set(err, -EINVAL,
				    "--listen: %s is not loopback: it needs http.tls in the policy",
				    addr);
	return 0;
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
