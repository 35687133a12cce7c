/* files.c: the files a cell left in /out (see files.h). */
#define _GNU_SOURCE
#include "cell/files.h"

#include <errno.h>
#include <sodium.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/utf8.h"
#include "json/json.h"

struct cell_files {
	struct cell_files_limits lim;
	json_t *list;
	unsigned count; /* files returned */
	size_t total;	/* their bytes */
	/* the file being assembled */
	bool open;
	char *raw;		/* its name as the runner sent it */
	enum cell_file_why why; /* CELL_FILE_KEPT while its data is kept */
	unsigned char *buf;
	size_t len, cap;
};

void cell_files_limits_init(struct cell_files_limits *lim)
{
	lim->max_count = APPL_FILES_MAX_COUNT_DEF;
	lim->max_bytes = APPL_FILES_MAX_BYTES_DEF;
	lim->max_total = APPL_FILES_MAX_TOTAL_BYTES_DEF;
}

struct cell_files *cell_files_new(const struct cell_files_limits *lim)
{
	struct cell_files *f = calloc(1, sizeof(*f));

	if (f && !(f->list = json_array())) {
		free(f);
		return NULL;
	}
	if (f)
		f->lim = *lim;
	return f;
}

static void open_clear(struct cell_files *f)
{
	free(f->raw);
	free(f->buf);
	f->raw = NULL;
	f->buf = NULL;
	f->len = f->cap = 0;
	f->open = false;
}

void cell_files_free(struct cell_files *f)
{
	if (!f)
		return;
	open_clear(f);
	json_decref(f->list);
	free(f);
}

const json_t *cell_files_list(const struct cell_files *f)
{
	return f->list;
}

/* ---- the type, judged from the bytes ------------------------------------------ */

/* Text as a client can show it: UTF-8, no NUL, and no control character
 * but tab, newline, carriage return and form feed. */
static bool is_text(const unsigned char *d, size_t n)
{
	uint32_t cp;

	for (size_t i = 0, k; i < n; i += k) {
		k = appl_utf8_decode(d + i, n - i, &cp);
		if (k == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r' && cp != '\f'))
			return false;
	}
	return true;
}

static bool is_json(const unsigned char *d, size_t n)
{
	json_t *v = appl_json_load((const char *)d, n, n, APPL_JSON_DEPTH_MAX, "file", NULL);

	json_decref(v);
	return v != NULL;
}

/* Two or more non-empty lines, each with the same number of commas, at
 * least one. */
static bool is_csv(const unsigned char *d, size_t n)
{
	size_t lines = 0, want = 0, commas = 0, width = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && d[i] != '\n') {
			commas += d[i] == ',';
			width += d[i] != '\r';
			continue;
		}
		if (width) {
			if (commas == 0 || (lines && commas != want))
				return false;
			want = commas;
			lines++;
		}
		commas = width = 0;
	}
	return lines >= 2;
}

static const struct {
	const char *magic;
	size_t len;
	const char *type;
} signatures[] = {
	{"\x89PNG\r\n\x1a\n", 8, "image/png"},
	{"\xff\xd8\xff", 3, "image/jpeg"},
	{"GIF87a", 6, "image/gif"},
	{"GIF89a", 6, "image/gif"},
};

const char *cell_file_type(const unsigned char *d, size_t n)
{
	for (size_t i = 0; i < sizeof(signatures) / sizeof(signatures[0]); i++)
		if (n >= signatures[i].len &&
		    memcmp(d, signatures[i].magic, signatures[i].len) == 0)
			return signatures[i].type;
	if (n >= 12 && memcmp(d, "RIFF", 4) == 0 && memcmp(d + 8, "WEBP", 4) == 0)
		return "image/webp";
	/* SVG and HTML end here as text/plain: shown, never rendered. */
	if (!is_text(d, n))
		return CELL_FILE_TYPE_OCTETS;
	if (is_json(d, n))
		return "application/json";
	return is_csv(d, n) ? "text/csv" : "text/plain";
}

bool cell_file_type_is_text(const char *type)
{
	return strncmp(type, "text/", 5) == 0 || strcmp(type, "application/json") == 0;
}

/* ---- names ---------------------------------------------------------------------- */

static bool name_char(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

void cell_file_name_safe(const char *name, size_t len, char out[APPL_FILE_NAME_MAX + 1])
{
	const unsigned char *s = (const unsigned char *)name;
	const unsigned char *slash = len ? memrchr(s, '/', len) : NULL;
	size_t i = slash ? (size_t)(slash - s) + 1 : 0, n = 0, k;

	for (; i < len && n < APPL_FILE_NAME_MAX; i += k) {
		/* One '_' per character, not per byte; a byte that starts no
		 * character counts as one. */
		k = appl_utf8_decode(s + i, len - i, NULL);
		k = k ? k : 1;
		if (n == 0 && s[i] == '.')
			continue; /* no hidden file, no "." or ".." */
		out[n++] = k == 1 && name_char(s[i]) ? (char)s[i] : '_';
	}
	out[n] = '\0';
	if (n == 0)
		memcpy(out, "file", sizeof("file"));
}

static bool name_taken(const json_t *list, const char *name)
{
	size_t i;
	json_t *e;

	json_array_foreach(list, i, e) {
		/* Without regard to case: a client may save them side by side
		 * on a file system that has none. */
		if (strcasecmp(json_string_value(json_object_get(e, "name")), name) == 0)
			return true;
	}
	return false;
}

/* An extension longer than this is part of the name for the suffix. */
#define EXT_MAX 16

/* base with "-N" before its extension, cut to fit, into out. */
static void name_numbered(const char *base, unsigned num, char out[APPL_FILE_NAME_MAX + 1])
{
	const char *dot = strrchr(base, '.');
	size_t len = strlen(base);
	size_t ext = dot && dot != base && (size_t)(base + len - dot) <= EXT_MAX
			     ? (size_t)(base + len - dot)
			     : 0;
	char suffix[16];
	int slen = snprintf(suffix, sizeof(suffix), "-%u", num);
	size_t stem = len - ext;

	if (stem + (size_t)slen + ext > APPL_FILE_NAME_MAX)
		stem = APPL_FILE_NAME_MAX - (size_t)slen - ext;
	memcpy(out, base, stem);
	memcpy(out + stem, suffix, (size_t)slen);
	memcpy(out + stem + slen, base + len - ext, ext);
	out[stem + (size_t)slen + ext] = '\0';
}

/* The entry's name: safe, and no other entry's. */
static json_t *name_unique(const struct cell_files *f, const char *raw)
{
	char base[APPL_FILE_NAME_MAX + 1], name[APPL_FILE_NAME_MAX + 1];

	cell_file_name_safe(raw, strlen(raw), base);
	memcpy(name, base, sizeof(name));
	/* The protocol bounds the entries, so this ends within that many. */
	for (unsigned num = 2; name_taken(f->list, name); num++)
		name_numbered(base, num, name);
	return json_string(name);
}

/* ---- entries ---------------------------------------------------------------------- */

static int entry_add(struct cell_files *f, json_t *e, struct appl_err *err)
{
	json_t *name = e ? name_unique(f, f->raw) : NULL;

	if (!name || json_object_set_new(e, "name", name) < 0 ||
	    json_array_append_new(f->list, e) < 0) {
		json_decref(e);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	return 0;
}

static json_t *file_content(const char *type, const unsigned char *d, size_t n)
{
	size_t b64_len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *b64;
	json_t *v;

	if (cell_file_type_is_text(type))
		return json_pack("{s:s%}", "text", n ? (const char *)d : "", n);
	if (!(b64 = malloc(b64_len)))
		return NULL;
	sodium_bin2base64(b64, b64_len, n ? d : (const unsigned char *)"", n,
			  sodium_base64_VARIANT_ORIGINAL);
	v = json_pack("{s:s}", "data", b64);
	free(b64);
	return v;
}

/* The open file is complete and within the limits: its entry. */
static json_t *file_entry(const struct cell_files *f)
{
	const unsigned char *d = f->len ? f->buf : (const unsigned char *)"";
	const char *type = cell_file_type(d, f->len);
	unsigned char hash[crypto_hash_sha256_BYTES];
	char hex[2 * crypto_hash_sha256_BYTES + 1];
	json_t *e = file_content(type, d, f->len);

	crypto_hash_sha256(hash, d, f->len);
	sodium_bin2hex(hex, sizeof(hex), hash, sizeof(hash));
	if (e && json_object_update_new(e, json_pack("{s:I,s:s,s:s}", "bytes", (json_int_t)f->len,
						     "type", type, "sha256", hex)) < 0) {
		json_decref(e);
		e = NULL;
	}
	return e;
}

static json_t *left_out(enum cell_file_why why)
{
	return json_pack("{s:s}", "reason", cell_file_why_name(why));
}

/* The open file ends: its entry, returned or left out. */
static int file_end(struct cell_files *f, struct appl_err *err)
{
	json_t *e = f->why == CELL_FILE_KEPT ? file_entry(f) : left_out(f->why);
	int rc;

	if (f->why == CELL_FILE_KEPT) {
		f->count++;
		f->total += f->len;
	}
	rc = entry_add(f, e, err);
	open_clear(f);
	return rc;
}

/* Keep the chunk, or drop the file's data when it would pass a limit. */
static int chunk_keep(struct cell_files *f, const unsigned char *d, size_t n)
{
	size_t cap;
	unsigned char *buf;

	if (f->why != CELL_FILE_KEPT)
		return 0;
	if (n > f->lim.max_bytes - f->len)
		f->why = CELL_FILE_MAX_BYTES;
	else if (f->len + n > f->lim.max_total - f->total)
		f->why = CELL_FILE_MAX_TOTAL;
	if (f->why != CELL_FILE_KEPT) {
		free(f->buf);
		f->buf = NULL;
		f->len = f->cap = 0;
		return 0;
	}
	if (f->len + n > f->cap) {
		cap = f->cap ? f->cap : 64 * 1024;
		while (cap < f->len + n)
			cap *= 2;
		cap = cap < f->lim.max_bytes ? cap : f->lim.max_bytes;
		if (!(buf = realloc(f->buf, cap)))
			return -ENOMEM;
		f->buf = buf;
		f->cap = cap;
	}
	if (n)
		memcpy(f->buf + f->len, d, n);
	f->len += n;
	return 0;
}

static int file_begin(struct cell_files *f, const json_t *name, struct appl_err *err)
{
	if (json_array_size(f->list) > APPL_RUNNER_FILE_ENTRIES_MAX)
		return appl_err_set(err, -EINVAL, "more file entries than /out may report");
	if (!(f->raw = strdup(json_string_value(name))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	f->open = true;
	f->why = f->count >= f->lim.max_count ? CELL_FILE_MAX_COUNT : CELL_FILE_KEPT;
	return 0;
}

int cell_files_feed(struct cell_files *f, const struct cell_msg *m, struct appl_err *err)
{
	int rc;

	if (m->type != CELL_MSG_FILE)
		return appl_err_set(err, -EINVAL, "not a file entry");
	if (f->open && (m->u.file.why != CELL_FILE_KEPT ||
			strcmp(f->raw, json_string_value(m->u.file.name)) != 0))
		return appl_err_set(err, -EINVAL, "a file entry while another file was open");
	if (!f->open && (rc = file_begin(f, m->u.file.name, err)) < 0)
		return rc;
	if (m->u.file.why != CELL_FILE_KEPT) {
		f->why = m->u.file.why;
		return file_end(f, err);
	}
	if (chunk_keep(f, m->u.file.data, m->u.file.len) < 0)
		return appl_err_set(err, -ENOMEM, "out of memory");
	return m->u.file.more ? 0 : file_end(f, err);
}
