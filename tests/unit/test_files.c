/* test_files.c: the files a cell leaves in /out, host side: the type judged
 * from the bytes, safe names, the collector's limits against a runner that
 * keeps to them and one that does not, and the result object's list. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <sodium.h>

#include "cell/cell.h"
#include "cell/files.h"
#include "schema/schema.h"

/* ---- types ----------------------------------------------------------------------- */

#define TYPE(lit) cell_file_type((const unsigned char *)(lit), sizeof(lit) - 1)

static void test_type_signatures(void **state)
{
	(void)state;
	assert_string_equal(TYPE("\x89PNG\r\n\x1a\n\0\0\0\rIHDR"), "image/png");
	assert_string_equal(TYPE("\xff\xd8\xff\xe0\0\x10JFIF"), "image/jpeg");
	assert_string_equal(TYPE("GIF87a\x01\0\x01\0"), "image/gif");
	assert_string_equal(TYPE("GIF89a\x01\0\x01\0"), "image/gif");
	assert_string_equal(TYPE("RIFF\x24\0\0\0WEBPVP8 "), "image/webp");
	/* a signature cut short, or in the wrong place, is no image */
	assert_string_equal(TYPE("\x89PNG\r\n\x1a"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("RIFF\x24\0\0\0WAVE"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("RIFFWEBP"), "text/plain");
	assert_string_equal(TYPE("GIF90a"), "text/plain");
	assert_string_equal(TYPE(" \x89PNG\r\n\x1a\n"), CELL_FILE_TYPE_OCTETS);
	/* an ELF binary, whatever its name will say */
	assert_string_equal(TYPE("\x7f"
				 "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"),
			    CELL_FILE_TYPE_OCTETS);
}

static void test_type_text(void **state)
{
	(void)state;
	assert_string_equal(TYPE(""), "text/plain");
	assert_string_equal(TYPE("hello\n"), "text/plain");
	assert_string_equal(TYPE("tab\there\r\nform\ffeed\n"), "text/plain");
	assert_string_equal(TYPE("caf\xc3\xa9 \xf0\x9f\x99\x82\n"), "text/plain");
	/* SVG and HTML are shown, never rendered */
	assert_string_equal(TYPE("<svg xmlns=\"http://www.w3.org/2000/svg\"><script>x()</script>"
				 "</svg>"),
			    "text/plain");
	assert_string_equal(TYPE("<!DOCTYPE html><html><body onload=x()></body></html>\n"),
			    "text/plain");
	/* not text: NUL, other controls, invalid or overlong UTF-8, a lone
	 * surrogate */
	assert_string_equal(TYPE("a\0b"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("esc\x1b[31m"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("bell\x07"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("\xff\xfe"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("\xc0\xaf"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("\xed\xa0\x80"), CELL_FILE_TYPE_OCTETS);
	assert_string_equal(TYPE("cut \xc3"), CELL_FILE_TYPE_OCTETS);
}

static void test_type_json_and_csv(void **state)
{
	(void)state;
	assert_string_equal(TYPE("{\"a\": [1, 2.5, null]}\n"), "application/json");
	assert_string_equal(TYPE("[1,2]"), "application/json");
	assert_string_equal(TYPE("42\n"), "application/json");
	/* what the strict loader refuses is text */
	assert_string_equal(TYPE("{\"a\":1,\"a\":2}"), "text/plain");
	assert_string_equal(TYPE("[1] [2]"), "text/plain");
	assert_string_equal(TYPE("{\"a\": NaN}"), "text/plain");
	/* CSV: two or more non-empty lines, as many commas each, one at least */
	assert_string_equal(TYPE("a,b,c\n1,2,3\n4,5,6\n"), "text/csv");
	assert_string_equal(TYPE("a,b\r\n1,2\r\n\r\n3,4"), "text/csv");
	assert_string_equal(TYPE("a,b\n1,2,3\n"), "text/plain");
	assert_string_equal(TYPE("a,b\n"), "text/plain");
	assert_string_equal(TYPE("a\nb\n"), "text/plain");
	/* [1,2] on each line is two JSON values: CSV by the rule */
	assert_string_equal(TYPE("[1,2]\n[3,4]\n"), "text/csv");
	assert_true(cell_file_type_is_text("text/csv"));
	assert_true(cell_file_type_is_text("application/json"));
	assert_false(cell_file_type_is_text("image/png"));
	assert_false(cell_file_type_is_text(CELL_FILE_TYPE_OCTETS));
}

/* ---- names ------------------------------------------------------------------------ */

static void safe(const char *in, size_t len, const char *want)
{
	char out[APPL_FILE_NAME_MAX + 1];

	cell_file_name_safe(in, len, out);
	assert_string_equal(out, want);
}

#define SAFE(lit, want) safe(lit, sizeof(lit) - 1, want)

static void test_safe_names(void **state)
{
	char longer[300], cut[APPL_FILE_NAME_MAX + 1];
	(void)state;

	SAFE("plot.png", "plot.png");
	SAFE("../../x.png", "x.png");
	SAFE("/etc/passwd", "passwd");
	SAFE("a/b/", "file");
	SAFE("..", "file");
	SAFE(".hidden", "hidden");
	SAFE("...x", "x");
	SAFE("", "file");
	SAFE("r\xc3\xa9sum\xc3\xa9 (1).csv", "r_sum___1_.csv");
	SAFE("tab\tnl\nnul\0.txt", "tab_nl_nul_.txt");
	SAFE("bad\xff\xfe", "bad__");
	SAFE("a\\b:c*?.txt", "a_b_c__.txt");
	SAFE("-rf", "-rf");
	SAFE("\xef\xbf\xbd.png", "_.png");
	memset(longer, 'n', sizeof(longer));
	memset(cut, 'n', APPL_FILE_NAME_MAX);
	cut[APPL_FILE_NAME_MAX] = '\0';
	safe(longer, sizeof(longer), cut);
}

/* ---- the collector ------------------------------------------------------------------ */

static struct cell_files_limits lim(unsigned count, size_t bytes, size_t total)
{
	return (struct cell_files_limits){
		.max_count = count, .max_bytes = bytes, .max_total = total};
}

static int chunk(struct cell_files *f, const char *name, const void *data, size_t len, bool more)
{
	struct cell_msg m = {.type = CELL_MSG_FILE};
	struct appl_err err = {0};
	int rc;

	m.u.file.name = json_string(name);
	m.u.file.data = (unsigned char *)data;
	m.u.file.len = len;
	m.u.file.more = more;
	rc = cell_files_feed(f, &m, &err);
	json_decref(m.u.file.name);
	return rc;
}

static int left_out(struct cell_files *f, const char *name, enum cell_file_why why)
{
	struct cell_msg m = {.type = CELL_MSG_FILE};
	int rc;

	m.u.file.name = json_string(name);
	m.u.file.why = why;
	rc = cell_files_feed(f, &m, NULL);
	json_decref(m.u.file.name);
	return rc;
}

static const json_t *entry(const struct cell_files *f, size_t i)
{
	const json_t *e = json_array_get(cell_files_list(f), i);

	assert_non_null(e);
	return e;
}

static const char *str(const json_t *e, const char *key)
{
	return json_string_value(json_object_get(e, key));
}

static void sha_hex(const void *d, size_t n, char out[65])
{
	unsigned char h[32];

	crypto_hash_sha256(h, d, n);
	sodium_bin2hex(out, 65, h, 32);
}

static void test_collect_returned(void **state)
{
	struct cell_files_limits l = lim(8, 1024, 4096);
	struct cell_files *f = cell_files_new(&l);
	static const unsigned char png[] = "\x89PNG\r\n\x1a\nrest";
	char hex[65];
	const json_t *e;
	(void)state;

	assert_int_equal(chunk(f, "../../x.png", png, 6, true), 0);
	assert_int_equal(json_array_size(cell_files_list(f)), 0); /* still open */
	assert_int_equal(chunk(f, "../../x.png", png + 6, sizeof(png) - 1 - 6, false), 0);
	assert_int_equal(chunk(f, "t.csv", "a,b\n1,2\n", 8, false), 0);
	assert_int_equal(chunk(f, "empty", NULL, 0, false), 0);
	assert_int_equal(left_out(f, "link", CELL_FILE_SYMLINK), 0);

	e = entry(f, 0);
	assert_string_equal(str(e, "name"), "x.png");
	assert_string_equal(str(e, "type"), "image/png");
	assert_int_equal(json_integer_value(json_object_get(e, "bytes")), sizeof(png) - 1);
	sha_hex(png, sizeof(png) - 1, hex);
	assert_string_equal(str(e, "sha256"), hex);
	assert_string_equal(str(e, "data"), "iVBORw0KGgpyZXN0");
	assert_null(json_object_get(e, "text"));
	assert_null(json_object_get(e, "reason"));

	e = entry(f, 1);
	assert_string_equal(str(e, "type"), "text/csv");
	assert_string_equal(str(e, "text"), "a,b\n1,2\n");
	assert_null(json_object_get(e, "data"));

	e = entry(f, 2);
	assert_string_equal(str(e, "type"), "text/plain");
	assert_string_equal(str(e, "text"), "");
	sha_hex("", 0, hex);
	assert_string_equal(str(e, "sha256"), hex);

	e = entry(f, 3);
	assert_string_equal(str(e, "name"), "link");
	assert_string_equal(str(e, "reason"), "symlink");
	assert_int_equal(json_object_size(e), 2);
	cell_files_free(f);
}

/* Names taken are numbered, without regard to case, before the
 * extension, and kept within the cap. */
static void test_collect_unique_names(void **state)
{
	struct cell_files_limits l = lim(64, 16, 1024);
	struct cell_files *f = cell_files_new(&l);
	char longname[200];
	(void)state;

	assert_int_equal(chunk(f, "a/plot.png", "x", 1, false), 0);
	assert_int_equal(chunk(f, "b/plot.png", "x", 1, false), 0);
	assert_int_equal(left_out(f, "PLOT.png", CELL_FILE_MAX_BYTES), 0);
	assert_int_equal(chunk(f, "..", "x", 1, false), 0);
	assert_int_equal(chunk(f, ".", "x", 1, false), 0);
	assert_int_equal(chunk(f, "plot-2.png", "x", 1, false), 0);
	assert_string_equal(str(entry(f, 0), "name"), "plot.png");
	assert_string_equal(str(entry(f, 1), "name"), "plot-2.png");
	assert_string_equal(str(entry(f, 2), "name"), "PLOT-3.png");
	assert_string_equal(str(entry(f, 3), "name"), "file");
	assert_string_equal(str(entry(f, 4), "name"), "file-2");
	assert_string_equal(str(entry(f, 5), "name"), "plot-2-2.png");

	memset(longname, 'y', sizeof(longname) - 5);
	memcpy(longname + sizeof(longname) - 5, ".txt", 5);
	assert_int_equal(chunk(f, longname, "x", 1, false), 0);
	assert_int_equal(chunk(f, longname, "x", 1, false), 0);
	assert_int_equal(strlen(str(entry(f, 6), "name")), APPL_FILE_NAME_MAX);
	assert_int_equal(strlen(str(entry(f, 7), "name")), APPL_FILE_NAME_MAX);
	assert_non_null(strstr(str(entry(f, 7), "name"), "yy-2"));
	cell_files_free(f);
}

/* A runner that sends past the limits: the host drops and reports. */
static void test_collect_enforces_limits(void **state)
{
	struct cell_files_limits l = lim(2, 10, 15);
	struct cell_files *f = cell_files_new(&l);
	(void)state;

	assert_int_equal(chunk(f, "big", "0123456789", 10, true), 0);
	assert_int_equal(chunk(f, "big", "x", 1, false), 0); /* 11 > max_bytes */
	assert_int_equal(chunk(f, "a", "0123456789", 10, false), 0);
	assert_int_equal(chunk(f, "b", "012345", 6, false), 0); /* 16 > max_total */
	assert_int_equal(chunk(f, "c", "01234", 5, false), 0);	/* fits: 15 */
	assert_int_equal(chunk(f, "d", "", 0, false), 0);	/* a third file */
	assert_string_equal(str(entry(f, 0), "reason"), "max_bytes");
	assert_null(json_object_get(entry(f, 0), "bytes"));
	assert_null(json_object_get(entry(f, 1), "reason"));
	assert_string_equal(str(entry(f, 2), "reason"), "max_total_bytes");
	assert_null(json_object_get(entry(f, 3), "reason"));
	assert_string_equal(str(entry(f, 4), "reason"), "max_count");
	cell_files_free(f);

	/* max_count 0: nothing comes back */
	l = lim(0, 10, 10);
	f = cell_files_new(&l);
	assert_int_equal(chunk(f, "a", "x", 1, false), 0);
	assert_string_equal(str(entry(f, 0), "reason"), "max_count");
	cell_files_free(f);
}

/* A file sent in many chunks past max_bytes is not held meanwhile. */
static void test_collect_drops_as_it_comes(void **state)
{
	struct cell_files_limits l = lim(1, 100, 100);
	struct cell_files *f = cell_files_new(&l);
	static unsigned char block[APPL_RUNNER_FILE_CHUNK_MAX];
	(void)state;

	for (int i = 0; i < 1000; i++)
		assert_int_equal(chunk(f, "flood", block, sizeof(block), true), 0);
	assert_int_equal(chunk(f, "flood", block, 1, false), 0);
	assert_string_equal(str(entry(f, 0), "reason"), "max_bytes");
	cell_files_free(f);
}

static void test_collect_refusals(void **state)
{
	struct cell_files_limits l = lim(8, 100, 100);
	struct cell_files *f = cell_files_new(&l);
	struct cell_msg out = {.type = CELL_MSG_OUT};
	char name[16];
	(void)state;

	assert_int_equal(cell_files_feed(f, &out, NULL), -EINVAL);
	assert_int_equal(chunk(f, "a", "x", 1, true), 0);
	assert_int_equal(chunk(f, "b", "x", 1, false), -EINVAL);
	assert_int_equal(left_out(f, "a", CELL_FILE_FIFO), -EINVAL);
	cell_files_free(f);

	f = cell_files_new(&l);
	for (unsigned i = 0; i <= APPL_RUNNER_FILE_ENTRIES_MAX; i++) {
		snprintf(name, sizeof(name), "s%u", i);
		assert_int_equal(left_out(f, name, CELL_FILE_MAX_COUNT), 0);
	}
	assert_int_equal(left_out(f, "one-more", CELL_FILE_MAX_ENTRIES), -EINVAL);
	cell_files_free(f);
}

/* ---- the result object --------------------------------------------------------------- */

static void test_outcome_lists_files_without_content(void **state)
{
	struct cell_files_limits l = lim(8, 1024, 4096);
	struct cell_files *f = cell_files_new(&l);
	struct cell_outcome o = {.out = "", .calls = 0};
	struct appl_err err = {0};
	struct schema *sc = NULL;
	json_t *obj, *files, *e;
	(void)state;

	assert_int_equal(chunk(f, "x.png", "\x89PNG\r\n\x1a\n", 8, false), 0);
	assert_int_equal(chunk(f, "notes.txt", "hello", 5, false), 0);
	assert_int_equal(left_out(f, "d", CELL_FILE_DIRECTORY), 0);
	o.files = cell_files_list(f);
	obj = cell_outcome_json(&o);
	files = json_object_get(obj, "files");
	assert_int_equal(json_array_size(files), 3);
	e = json_array_get(files, 0);
	assert_string_equal(str(e, "name"), "x.png");
	assert_string_equal(str(e, "type"), "image/png");
	assert_true(json_is_true(json_object_get(e, "returned")));
	assert_int_equal(json_object_size(e), 5); /* name, bytes, type, sha256, returned */
	assert_null(json_object_get(json_array_get(files, 1), "text"));
	e = json_array_get(files, 2);
	assert_true(json_is_false(json_object_get(e, "returned")));
	assert_string_equal(str(e, "reason"), "directory");
	assert_int_equal(schema_new(cell_outcome_schema(), &sc, &err), 0);
	if (schema_validate(sc, obj, &err) != 0)
		fail_msg("the result object does not validate: %s", err.msg);
	json_decref(obj);

	/* no files: an empty list, valid too */
	o.files = NULL;
	obj = cell_outcome_json(&o);
	assert_int_equal(json_array_size(json_object_get(obj, "files")), 0);
	assert_int_equal(schema_validate(sc, obj, &err), 0);
	/* and a made-up reason or a short hash does not */
	json_array_append_new(
		json_object_get(obj, "files"),
		json_pack("{s:s,s:b,s:s}", "name", "a", "returned", 0, "reason", "because"));
	assert_int_not_equal(schema_validate(sc, obj, &err), 0);
	json_array_clear(json_object_get(obj, "files"));
	json_array_append_new(json_object_get(obj, "files"),
			      json_pack("{s:s,s:b,s:i,s:s,s:s}", "name", "a", "returned", 1,
					"bytes", 1, "type", "text/plain", "sha256", "abc"));
	assert_int_not_equal(schema_validate(sc, obj, &err), 0);
	json_decref(obj);
	schema_free(sc);
	cell_files_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_signatures),
		cmocka_unit_test(test_type_text),
		cmocka_unit_test(test_type_json_and_csv),
		cmocka_unit_test(test_safe_names),
		cmocka_unit_test(test_collect_returned),
		cmocka_unit_test(test_collect_unique_names),
		cmocka_unit_test(test_collect_enforces_limits),
		cmocka_unit_test(test_collect_drops_as_it_comes),
		cmocka_unit_test(test_collect_refusals),
		cmocka_unit_test(test_outcome_lists_files_without_content),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
