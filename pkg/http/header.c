/* header.c: the pure header judges (see header.h). */
#include "http/header.h"

#include <errno.h>
#include <string.h>

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* a[0..alen) equals the NUL-terminated b ignoring ASCII case. */
static bool eq_nocase(const char *a, size_t alen, const char *b)
{
	size_t blen = strlen(b);

	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

static bool in_list(const char *v, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] && eq_nocase(v, len, list[i]))
			return true;
	return false;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static void trim(const char **v, size_t *len)
{
	while (*len && is_ows(**v)) {
		(*v)++;
		(*len)--;
	}
	while (*len && is_ows((*v)[*len - 1]))
		(*len)--;
}

static bool is_token68(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

int http_header_bearer(const char *v, size_t len, const char **tok, size_t *toklen)
{
	size_t i = 6, start, end;

	if (len < 8 || !eq_nocase(v, 6, "bearer") || v[6] != ' ')
		return -EINVAL;
	while (i < len && v[i] == ' ')
		i++;
	start = i;
	while (i < len && is_token68(v[i]))
		i++;
	while (i < len && v[i] == '=')
		i++;
	end = i;
	while (i < len && is_ows(v[i]))
		i++;
	if (i != len || end == start || end - start > HTTP_TOKEN_MAX)
		return -EINVAL;
	*tok = v + start;
	*toklen = end - start;
	return 0;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

bool http_header_host_allowed(const char *v, size_t len, const char *const *list, size_t n)
{
	size_t host = len, i;

	if (len == 0)
		return false;
	if (v[0] == '[') {
		const char *close = memchr(v, ']', len);

		if (!close)
			return false;
		host = (size_t)(close - v) + 1;
	} else {
		const char *colon = memchr(v, ':', len);

		if (colon)
			host = (size_t)(colon - v);
	}
	if (host == 0)
		return false;
	for (i = 0; i < host; i++)
		if ((unsigned char)v[i] <= ' ' || v[i] == 0x7f)
			return false;
	if (host < len) {
		size_t digits = len - host - 1;

		if (v[host] != ':' || digits == 0 || digits > 5)
			return false;
		for (i = host + 1; i < len; i++)
			if (!is_digit(v[i]))
				return false;
	}
	/* An entry with a port is a Host value as sent: the whole value must
	 * match. An entry without one names the host on any port. */
	for (i = 0; i < n; i++) {
		const char *e = list[i];
		bool has_port = e[0] == '[' ? strstr(e, "]:") != NULL : strchr(e, ':') != NULL;

		if (has_port ? in_list(v, len, &list[i], 1) : in_list(v, host, &list[i], 1))
			return true;
	}
	return false;
}

bool http_header_origin_allowed(const char *v, size_t len, const char *const *list, size_t n)
{
	return len > 0 && in_list(v, len, list, n);
}

bool http_header_content_json(const char *v, size_t len)
{
	const char *semi = memchr(v, ';', len);
	size_t type = semi ? (size_t)(semi - v) : len;

	trim(&v, &type);
	return eq_nocase(v, type, "application/json");
}

/* Whether the parameters p[0..len) (";a=b;q=0.5") set q to zero. */
static bool q_zero(const char *p, size_t len)
{
	while (len) {
		const char *semi = memchr(p, ';', len);
		size_t one = semi ? (size_t)(semi - p) : len;
		const char *q = p;
		size_t qlen = one;

		trim(&q, &qlen);
		if (qlen >= 2 && lower(q[0]) == 'q' && q[1] == '=') {
			size_t i = 2;

			if (i < qlen && q[i] == '0') {
				i++;
				if (i < qlen && q[i] == '.')
					for (i++; i < qlen && q[i] == '0'; i++)
						;
				if (i == qlen)
					return true;
			}
		}
		if (!semi)
			break;
		len -= one + 1;
		p = semi + 1;
	}
	return false;
}

static unsigned accept_one(const char *r, size_t len)
{
	const char *semi = memchr(r, ';', len);
	size_t type = semi ? (size_t)(semi - r) : len;
	const char *t = r;

	trim(&t, &type);
	if (semi && q_zero(semi + 1, len - (size_t)(semi - r) - 1))
		return 0;
	if (eq_nocase(t, type, "*/*"))
		return HTTP_ACCEPT_JSON | HTTP_ACCEPT_SSE;
	if (eq_nocase(t, type, "application/*") || eq_nocase(t, type, "application/json"))
		return HTTP_ACCEPT_JSON;
	if (eq_nocase(t, type, "text/*") || eq_nocase(t, type, "text/event-stream"))
		return HTTP_ACCEPT_SSE;
	return 0;
}

unsigned http_header_accept(const char *v, size_t len)
{
	unsigned got = 0;

	while (len) {
		const char *comma = memchr(v, ',', len);
		size_t one = comma ? (size_t)(comma - v) : len;

		got |= accept_one(v, one);
		if (!comma)
			break;
		len -= one + 1;
		v = comma + 1;
	}
	return got;
}
