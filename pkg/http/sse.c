/* sse.c: the event-stream reader (see sse.h). Bytes go through a UTF-8
 * decoder into the line being read; a line's end hands it to its field, and
 * an empty line dispatches the event. */
#include "http/sse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SSE_BUF_START 256u /* the first size of a buffer that grows */

/* U+FFFD, which stands for each invalid UTF-8 sequence, and the BOM. */
static const char replacement[] = "\xef\xbf\xbd";
static const char bom[] = "\xef\xbb\xbf";

/* A buffer of len bytes in cap, which grows up to max, never past it. */
struct sse_buf {
	char *b;
	size_t len, cap, max;
};

struct sse {
	struct sse_limits lim;
	sse_event_fn on_event;
	void *ctx;
	struct sse_buf line; /* the line being read, without its end */
	struct sse_buf data; /* the data buffer: each data value and an LF */
	struct sse_buf type; /* the event type buffer, NUL-terminated */
	/* The decoder (the WHATWG Encoding standard's): the bytes of the
	 * character begun, how many it needs (0: none begun), and the range
	 * its next byte must lie in. */
	unsigned char seq[4];
	unsigned seq_len, seq_need;
	unsigned char lo, hi;
	bool started;  /* a character was read: a BOM is now a character */
	bool after_cr; /* the last character was a CR: an LF now ends nothing */
	bool in_cb;    /* on_event is running */
	bool ended;    /* sse_end was called */
	int failed;    /* the code p failed with, 0 while it has not */
	const char *why;
	char id[SSE_ID_MAX + 1];      /* the last event ID buffer */
	char last_id[SSE_ID_MAX + 1]; /* its value at the last empty line */
	uint64_t retry_ms;
};

static int fail(struct sse *p, int code, const char *why)
{
	p->failed = code;
	p->why = why;
	return code;
}

/* Room for need bytes in b: 0, or -ENOMEM. The callers check their cap
 * first, so need never passes b->max. */
static int reserve(struct sse_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : SSE_BUF_START;
	char *nb;

	if (need <= b->cap)
		return 0;
	if (need > b->max)
		return -ENOMEM;
	while (cap < need)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	nb = realloc(b->b, cap);
	if (!nb)
		return -ENOMEM;
	b->b = nb;
	b->cap = cap;
	return 0;
}

static void drop(struct sse_buf *b)
{
	free(b->b);
	b->b = NULL;
	b->len = b->cap = 0;
}

static int set_data(struct sse *p, const char *v, size_t len)
{
	struct sse_buf *d = &p->data;

	/* The event will dispatch at least this value and what is before it
	 * (the LF after it may be the one removed): past the cap, no later
	 * line can bring it back. */
	if (d->len + len > p->lim.event_max)
		return fail(p, -EMSGSIZE, "an event's data longer than the cap");
	if (reserve(d, d->len + len + 2) < 0) /* the LF, and the NUL at dispatch */
		return fail(p, -ENOMEM, "out of memory");
	memcpy(d->b + d->len, v, len);
	d->len += len;
	d->b[d->len++] = '\n';
	return 0;
}

static int set_type(struct sse *p, const char *v, size_t len)
{
	struct sse_buf *t = &p->type;

	if (reserve(t, len + 1) < 0)
		return fail(p, -ENOMEM, "out of memory");
	memcpy(t->b, v, len);
	t->b[len] = '\0';
	t->len = len;
	return 0;
}

static int set_id(struct sse *p, const char *v, size_t len)
{
	/* The standard ignores an id with a NUL; it could not be sent back in a
	 * header either. */
	if (memchr(v, '\0', len))
		return 0;
	if (len > SSE_ID_MAX)
		return fail(p, -EMSGSIZE, "an id longer than the cap");
	memcpy(p->id, v, len);
	p->id[len] = '\0';
	return 0;
}

/* Only ASCII digits set the time; anything else (nothing, a sign, a space)
 * is ignored. A number past 64 bits saturates: "wait very long" stays so. */
static int set_retry(struct sse *p, const char *v, size_t len)
{
	uint64_t ms = 0;

	if (len == 0)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned char)v[i] - (unsigned)'0';

		if (d > 9)
			return 0;
		ms = ms > (UINT64_MAX - d) / 10 ? UINT64_MAX : ms * 10 + d;
	}
	p->retry_ms = ms;
	return 0;
}

static const struct {
	const char *name;
	size_t len;
	int (*set)(struct sse *p, const char *v, size_t len);
} fields[] = {
	{"data", 4, set_data},
	{"event", 5, set_type},
	{"id", 2, set_id},
	{"retry", 5, set_retry},
};

static int dispatch(struct sse *p)
{
	struct sse_buf *d = &p->data, *t = &p->type;
	const char *type = t->len ? t->b : "message";

	memcpy(p->last_id, p->id, strlen(p->id) + 1);
	if (d->len) {
		d->b[--d->len] = '\0'; /* the last LF goes */
		if (!memchr(type, '\0', t->len)) {
			p->in_cb = true;
			p->on_event(p->ctx, type, d->b, d->len, p->last_id);
			p->in_cb = false;
		}
	}
	d->len = 0;
	t->len = 0;
	return 0;
}

/* A whole line: dispatch, a comment, or "name[:[ ]value]". */
static int line_end(struct sse *p)
{
	const char *l = p->line.b, *colon, *v;
	size_t n = p->line.len, name, vlen;

	p->line.len = 0;
	if (n == 0)
		return dispatch(p);
	if (l[0] == ':')
		return 0;
	colon = memchr(l, ':', n);
	name = colon ? (size_t)(colon - l) : n;
	v = colon ? colon + 1 : l + n;
	vlen = colon ? n - name - 1 : 0;
	if (vlen && v[0] == ' ') {
		v++;
		vlen--;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
		if (name == fields[i].len && memcmp(l, fields[i].name, name) == 0)
			return fields[i].set(p, v, vlen);
	return 0;
}

/* Decoded text: one character, or a run of them with no CR or LF. */
static int put(struct sse *p, const char *s, size_t n)
{
	struct sse_buf *l = &p->line;
	bool after_cr = p->after_cr;

	p->started = true;
	p->after_cr = false;
	if (n == 1 && (s[0] == '\r' || s[0] == '\n')) {
		if (s[0] == '\n' && after_cr)
			return 0; /* the LF of a CRLF, maybe in the next chunk */
		p->after_cr = s[0] == '\r';
		return line_end(p);
	}
	/* Refused as soon as the line passes the cap: its bytes past the cap
	 * are never held. */
	if (n > p->lim.line_max - l->len)
		return fail(p, -EMSGSIZE, "a line longer than the cap");
	if (reserve(l, l->len + n) < 0)
		return fail(p, -ENOMEM, "out of memory");
	memcpy(l->b + l->len, s, n);
	l->len += n;
	return 0;
}

/* One byte of a non-ASCII character, or one read while none is begun. */
static int decode(struct sse *p, unsigned char c)
{
	int rc;

	if (p->seq_need == 0) {
		if (c < 0x80)
			return put(p, (const char *)&c, 1);
		if (c >= 0xc2 && c <= 0xdf)
			p->seq_need = 2;
		else if (c >= 0xe0 && c <= 0xef)
			p->seq_need = 3;
		else if (c >= 0xf0 && c <= 0xf4)
			p->seq_need = 4;
		else
			return put(p, replacement, 3);
		/* These ranges leave out overlong forms, surrogates and code
		 * points past U+10FFFF. */
		p->lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
		p->hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
		p->seq[0] = c;
		p->seq_len = 1;
		return 0;
	}
	if (c < p->lo || c > p->hi) {
		/* The character is cut short: U+FFFD for it, then c afresh. */
		p->seq_need = 0;
		rc = put(p, replacement, 3);
		return rc ? rc : decode(p, c);
	}
	p->lo = 0x80;
	p->hi = 0xbf;
	p->seq[p->seq_len++] = c;
	if (p->seq_len < p->seq_need)
		return 0;
	p->seq_need = 0;
	if (!p->started && p->seq_len == 3 && memcmp(p->seq, bom, 3) == 0) {
		p->started = true;
		return 0;
	}
	return put(p, (const char *)p->seq, p->seq_len);
}

/* The bytes at s that are ASCII but neither CR nor LF (the common case: they
 * go into the line together). */
static size_t ascii_run(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len && (unsigned char)s[i] < 0x80 && s[i] != '\r' && s[i] != '\n')
		i++;
	return i;
}

int sse_feed(struct sse *p, const char *buf, size_t len)
{
	size_t i = 0, run;
	int rc = 0;

	if (p->in_cb)
		return -EBUSY;
	if (p->failed)
		return p->failed;
	if (p->ended)
		return -EPIPE;
	while (i < len && rc == 0) {
		run = p->seq_need ? 0 : ascii_run(buf + i, len - i);
		if (run) {
			rc = put(p, buf + i, run);
			i += run;
		} else {
			rc = decode(p, (unsigned char)buf[i++]);
		}
	}
	return rc;
}

int sse_end(struct sse *p)
{
	if (p->in_cb)
		return -EBUSY;
	if (p->failed)
		return p->failed;
	/* What no empty line ended is discarded, and its memory with it. */
	p->ended = true;
	p->seq_need = 0;
	drop(&p->line);
	drop(&p->data);
	drop(&p->type);
	return 0;
}

int sse_new(const struct sse_limits *lim, sse_event_fn on_event, void *ctx, struct sse **out,
	    struct appl_err *err)
{
	struct sse_limits l = lim ? *lim : (struct sse_limits){0};
	struct sse *p;

	*out = NULL;
	if (!l.line_max)
		l.line_max = SSE_LINE_MAX_DEF;
	if (!l.event_max)
		l.event_max = SSE_EVENT_MAX_DEF;
	if (!on_event)
		return appl_err_set(err, -EINVAL, "sse: no event hook");
	if (l.line_max > SSE_LIMIT_CEIL || l.event_max > SSE_LIMIT_CEIL)
		return appl_err_set(err, -EINVAL, "sse: a cap above %u bytes", SSE_LIMIT_CEIL);
	p = calloc(1, sizeof(*p));
	if (!p)
		return appl_err_set(err, -ENOMEM, "sse: out of memory");
	p->lim = l;
	p->on_event = on_event;
	p->ctx = ctx;
	p->line.max = l.line_max;
	p->type.max = l.line_max + 1;
	p->data.max = l.event_max + 2;
	*out = p;
	return 0;
}

void sse_free(struct sse *p)
{
	if (!p)
		return;
	drop(&p->line);
	drop(&p->data);
	drop(&p->type);
	free(p);
}

const char *sse_last_id(const struct sse *p)
{
	return p->last_id;
}

uint64_t sse_retry_ms(const struct sse *p)
{
	return p->retry_ms;
}

const char *sse_why(const struct sse *p)
{
	return p->failed ? p->why : NULL;
}
