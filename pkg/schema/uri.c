/* uri.c: RFC 3986 reference resolution and JSON pointers, for "$id" and
 * "$ref". Only strings are handled here: nothing is ever fetched. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "schema/internal.h"

struct span {
	const char *p;
	size_t len;
	bool has;
};

struct uri {
	struct span scheme, auth, path, query, frag;
};

/* Split s into its five components (RFC 3986 appendix B, by hand). */
static void uri_parse(const char *s, struct uri *u)
{
	const char *p = s, *q;

	memset(u, 0, sizeof(*u));
	if (isalpha((unsigned char)*p)) {
		for (q = p + 1; isalnum((unsigned char)*q) || *q == '+' || *q == '-' || *q == '.';
		     q++)
			;
		if (*q == ':') {
			u->scheme = (struct span){p, (size_t)(q - p), true};
			p = q + 1;
		}
	}
	if (p[0] == '/' && p[1] == '/') {
		p += 2;
		q = p + strcspn(p, "/?#");
		u->auth = (struct span){p, (size_t)(q - p), true};
		p = q;
	}
	q = p + strcspn(p, "?#");
	u->path = (struct span){p, (size_t)(q - p), true};
	p = q;
	if (*p == '?') {
		q = p + 1 + strcspn(p + 1, "#");
		u->query = (struct span){p + 1, (size_t)(q - p - 1), true};
		p = q;
	}
	if (*p == '#')
		u->frag = (struct span){p + 1, strlen(p + 1), true};
}

struct buf {
	char *s;
	size_t len, cap;
	bool over;
};

static void buf_put(struct buf *b, const char *p, size_t n)
{
	if (b->over || n >= b->cap - b->len) {
		b->over = true;
		return;
	}
	memcpy(b->s + b->len, p, n);
	b->len += n;
	b->s[b->len] = '\0';
}

/* Drop the last segment of out, and the '/' before it (RFC 3986 5.2.4). */
static void out_pop_segment(struct buf *out)
{
	while (out->len > 0 && out->s[out->len - 1] != '/')
		out->len--;
	if (out->len > 0)
		out->len--;
	out->s[out->len] = '\0';
}

/* RFC 3986 5.2.4 on in[0..len), which it may scribble on; appends to out. */
static void remove_dots(char *in, size_t len, struct buf *out)
{
	size_t i = 0;

	while (i < len) {
		size_t rest = len - i;
		char *p = in + i;

		if (rest >= 3 && !memcmp(p, "../", 3)) {
			i += 3;
		} else if (rest >= 2 && !memcmp(p, "./", 2)) {
			i += 2;
		} else if (rest >= 3 && !memcmp(p, "/./", 3)) {
			i += 2;
		} else if (rest == 2 && !memcmp(p, "/.", 2)) {
			p[1] = '/';
			i += 1;
		} else if (rest >= 4 && !memcmp(p, "/../", 4)) {
			i += 3;
			out_pop_segment(out);
		} else if (rest == 3 && !memcmp(p, "/..", 3)) {
			p[2] = '/';
			i += 2;
			out_pop_segment(out);
		} else if ((rest == 1 && p[0] == '.') || (rest == 2 && !memcmp(p, "..", 2))) {
			i = len;
		} else {
			size_t n = 1;
			while (n < rest && p[n] != '/')
				n++;
			buf_put(out, p, n);
			i += n;
		}
	}
}

/* Path of the target: ref's own, or merged with base's (RFC 3986 5.2.3). */
static int target_path(const struct uri *b, const struct uri *r, struct buf *out)
{
	char tmp[APPL_SCHEMA_URI_MAX];
	struct buf t = {tmp, 0, sizeof(tmp), false};

	tmp[0] = '\0';
	if (r->path.len > 0 && r->path.p[0] == '/') {
		buf_put(&t, r->path.p, r->path.len);
	} else if (b->auth.has && b->path.len == 0) {
		buf_put(&t, "/", 1);
		buf_put(&t, r->path.p, r->path.len);
	} else {
		size_t keep = b->path.len;
		while (keep > 0 && b->path.p[keep - 1] != '/')
			keep--;
		buf_put(&t, b->path.p, keep);
		buf_put(&t, r->path.p, r->path.len);
	}
	if (t.over)
		return -E2BIG;
	remove_dots(tmp, t.len, out);
	return 0;
}

static void put_span(struct buf *o, const char *pre, const struct span *s)
{
	if (!s->has)
		return;
	buf_put(o, pre, strlen(pre));
	buf_put(o, s->p, s->len);
}

int schema_uri_resolve(const char *base, const char *ref, char *out, size_t outsz)
{
	struct uri b, r;
	struct buf o = {out, 0, outsz, false};
	char path[APPL_SCHEMA_URI_MAX];
	struct buf pb = {path, 0, sizeof(path), false};
	const struct uri *from;

	if (outsz == 0)
		return -E2BIG;
	out[0] = path[0] = '\0';
	uri_parse(base, &b);
	uri_parse(ref, &r);
	/* With a scheme or an authority, the reference carries its own path;
	 * else it is taken from, or merged with, the base's. */
	from = (r.scheme.has || r.auth.has) ? &r : &b;
	if (from == &r) {
		char tmp[APPL_SCHEMA_URI_MAX];
		if (r.path.len >= sizeof(tmp))
			return -E2BIG;
		memcpy(tmp, r.path.p, r.path.len);
		remove_dots(tmp, r.path.len, &pb);
	} else if (r.path.len == 0) {
		buf_put(&pb, b.path.p, b.path.len);
	} else if (target_path(&b, &r, &pb) < 0) {
		return -E2BIG;
	}
	put_span(&o, "", r.scheme.has ? &r.scheme : &b.scheme);
	if (r.scheme.has || b.scheme.has)
		buf_put(&o, ":", 1);
	put_span(&o, "//", from == &r ? &r.auth : &b.auth);
	buf_put(&o, path, pb.len);
	if (from == &r || r.path.len > 0 || r.query.has)
		put_span(&o, "?", &r.query);
	else
		put_span(&o, "?", &b.query);
	put_span(&o, "#", &r.frag);
	return (o.over || pb.over) ? -E2BIG : 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

int schema_pct_decode(const char *in, size_t len, char *out, size_t outsz)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)in[i];
		if (c == '%') {
			if (i + 2 >= len)
				return -EINVAL;
			int hi = hexval((unsigned char)in[i + 1]);
			int lo = hexval((unsigned char)in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = hi * 16 + lo;
			i += 2;
		}
		/* A NUL would cut the name short: reject it rather than look up
		 * something other than what the reference says. */
		if (c == 0 || o + 1 >= outsz)
			return c == 0 ? -EINVAL : -E2BIG;
		out[o++] = (char)c;
	}
	if (o >= outsz)
		return -E2BIG;
	out[o] = '\0';
	return 0;
}

/* One pointer token, unescaped (~1 is '/', ~0 is '~'); NULL when malformed. */
static const char *ptr_token(const char *p, char *tok, size_t toksz, size_t *toklen)
{
	size_t n = 0;

	for (; *p && *p != '/'; p++) {
		char c = *p;
		if (c == '~') {
			if (p[1] != '0' && p[1] != '1')
				return NULL;
			c = p[1] == '0' ? '~' : '/';
			p++;
		}
		if (n + 1 >= toksz)
			return NULL;
		tok[n++] = c;
	}
	tok[n] = '\0';
	*toklen = n;
	return p;
}

static const json_t *ptr_index(const json_t *arr, const char *tok, size_t len)
{
	size_t idx = 0;

	if (len == 0 || (len > 1 && tok[0] == '0'))
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)tok[i]) || idx > (SIZE_MAX - 9) / 10)
			return NULL;
		idx = idx * 10 + (size_t)(tok[i] - '0');
	}
	return json_array_get(arr, idx);
}

const json_t *schema_pointer_get(const json_t *root, const char *ptr)
{
	char tok[APPL_SCHEMA_URI_MAX];
	const json_t *cur = root;

	if (*ptr && *ptr != '/')
		return NULL;
	while (cur && *ptr == '/') {
		size_t len;
		ptr = ptr_token(ptr + 1, tok, sizeof(tok), &len);
		if (!ptr)
			return NULL;
		if (json_is_object(cur))
			cur = json_object_getn(cur, tok, len);
		else if (json_is_array(cur))
			cur = ptr_index(cur, tok, len);
		else
			cur = NULL;
	}
	return cur;
}
