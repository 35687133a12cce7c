/* test_image.c: the image store, with crafted layouts and hostile layers. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>
#include <cmocka.h>

#include "image/image.h"

/* One entry of a crafted layer. */
struct ent {
	const char *name;
	mode_t type; /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR, AE_IFIFO */
	mode_t perm;
	const char *data;     /* regular file content */
	const char *link;     /* symlink target */
	const char *hardlink; /* hardlink target */
};

struct fixture {
	char dir[512];	  /* scratch root */
	char layout[512]; /* the layout */
	char cache[512];
	char outside[512]; /* a host directory attacks aim at */
	char digest[IMAGE_DIGEST_STR];
	char config_hex[IMAGE_DIGEST_HEX + 1];
	char layer_hex[IMAGE_DIGEST_HEX + 1];
	char manifest_hex[IMAGE_DIGEST_HEX + 1];
};

static void hex_of(const void *buf, size_t len, char *hex)
{
	unsigned char sum[crypto_hash_sha256_BYTES];
	crypto_hash_sha256(sum, buf, len);
	sodium_bin2hex(hex, IMAGE_DIGEST_HEX + 1, sum, sizeof(sum));
}

static void blob_write(struct fixture *f, const void *buf, size_t len, char *hex)
{
	char path[PATH_MAX * 2];
	FILE *fp;

	hex_of(buf, len, hex);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", f->layout, hex);
	fp = fopen(path, "wb");
	assert_non_null(fp);
	assert_int_equal(fwrite(buf, 1, len, fp), len);
	fclose(fp);
}

static size_t tar_make(const struct ent *ents, size_t n, int gzip, char *buf, size_t cap)
{
	struct archive *a = archive_write_new();
	size_t used = 0;

	archive_write_set_format_pax_restricted(a);
	if (gzip)
		archive_write_add_filter_gzip(a);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		size_t dlen = ents[i].data ? strlen(ents[i].data) : 0;
		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_filetype(e, ents[i].type);
		archive_entry_set_perm(e, ents[i].perm ? ents[i].perm : 0644);
		if (ents[i].link)
			archive_entry_set_symlink(e, ents[i].link);
		if (ents[i].hardlink)
			archive_entry_set_hardlink(e, ents[i].hardlink);
		archive_entry_set_size(e, (la_int64_t)dlen);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (dlen)
			assert_int_equal(archive_write_data(a, ents[i].data, dlen), (ssize_t)dlen);
		archive_entry_free(e);
	}
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
	return used;
}

/* Write a layout holding one layer made of ents; fills f->digest. */
static void layout_make(struct fixture *f, const struct ent *ents, size_t n, int gzip)
{
	static char tar[1 << 20];
	char buf[4096], path[PATH_MAX];
	size_t tlen = tar_make(ents, n, gzip, tar, sizeof(tar));
	int len;

	snprintf(path, sizeof(path), "%s/blobs/sha256", f->layout);
	mkdir(f->layout, 0755);
	snprintf(buf, sizeof(buf), "%s/blobs", f->layout);
	mkdir(buf, 0755);
	mkdir(path, 0755);
	blob_write(f, tar, tlen, f->layer_hex);
	len = snprintf(buf, sizeof(buf),
		       "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":"
		       "[\"SECRET=1\"],\"User\":\"0\",\"Cmd\":[\"/bin/sh\"]},\"rootfs\":{\"type\":"
		       "\"layers\",\"diff_ids\":[\"sha256:%s\"]}}",
		       f->layer_hex);
	blob_write(f, buf, (size_t)len, f->config_hex);
	len = snprintf(
		buf, sizeof(buf),
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+"
		"json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
		"\"digest\":\"sha256:%s\",\"size\":%d},\"layers\":[{\"mediaType\":"
		"\"application/vnd.oci.image.layer.v1.tar%s\",\"digest\":\"sha256:%s\","
		"\"size\":%zu}]}",
		f->config_hex, (int)strlen(buf), gzip ? "+gzip" : "", f->layer_hex, tlen);
	blob_write(f, buf, (size_t)len, f->manifest_hex);
	snprintf(f->digest, sizeof(f->digest), "sha256:%s", f->manifest_hex);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char tmpl[] = "/tmp/test_image.XXXXXX";

	assert_non_null(f);
	assert_true(sodium_init() >= 0);
	assert_non_null(mkdtemp(tmpl));
	snprintf(f->dir, sizeof(f->dir), "%s", tmpl);
	snprintf(f->layout, sizeof(f->layout), "%s/layout", tmpl);
	snprintf(f->cache, sizeof(f->cache), "%s/cache", tmpl);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", tmpl);
	mkdir(f->outside, 0755);
	*state = f;
	return 0;
}

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	nftw(f->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static int verify(struct fixture *f, char *rootfs, struct appl_err *err)
{
	static char dummy[PATH_MAX];
	return image_layout_verify(f->layout, f->digest, f->cache, rootfs ? rootfs : dummy,
				   PATH_MAX, err);
}

static int exists(const char *a, const char *b)
{
	char path[PATH_MAX * 2];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", a, b);
	return lstat(path, &st) == 0;
}

static const struct ent good[] = {
	{"./", AE_IFDIR, 0755, NULL, NULL, NULL},
	{"./usr/", AE_IFDIR, 0755, NULL, NULL, NULL},
	{"./usr/bin/", AE_IFDIR, 0755, NULL, NULL, NULL},
	{"./usr/bin/python3.11", AE_IFREG, 0755, "ELF", NULL, NULL},
	{"./usr/bin/python3", AE_IFLNK, 0777, NULL, "python3.11", NULL},
	{"./usr/bin/py-hard", AE_IFREG, 0755, NULL, NULL, "./usr/bin/python3.11"},
	{"./etc/", AE_IFDIR, 0755, NULL, NULL, NULL},
	{"./etc/alt", AE_IFLNK, 0777, NULL, "/usr/bin/python3", NULL},
	{"./tmp/", AE_IFDIR, 01777, NULL, NULL, NULL},
	{"./runner.py", AE_IFREG, 0644, "print(1)\n", NULL, NULL},
};

static void test_good_layout_unpacks(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	char rootfs[PATH_MAX];
	struct stat st;

	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	assert_int_equal(verify(f, rootfs, &err), 0);
	assert_true(exists(rootfs, "runner.py"));
	assert_true(exists(rootfs, "usr/bin/python3"));
	assert_int_equal(stat(f->cache, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	/* sticky /tmp kept; the hardlink shares the inode of its target */
	char p1[PATH_MAX * 2], p2[PATH_MAX * 2];
	snprintf(p1, sizeof(p1), "%s/tmp", rootfs);
	assert_int_equal(stat(p1, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	snprintf(p1, sizeof(p1), "%s/usr/bin/python3.11", rootfs);
	snprintf(p2, sizeof(p2), "%s/usr/bin/py-hard", rootfs);
	struct stat a, b;
	assert_int_equal(stat(p1, &a), 0);
	assert_int_equal(stat(p2, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	/* a second call finds the cache and still checks every blob */
	assert_int_equal(verify(f, rootfs, &err), 0);
}

static void test_uncompressed_layer(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 0);
	assert_int_equal(verify(f, NULL, &err), 0);
}

static void flip_byte(struct fixture *f, const char *hex, long off)
{
	char path[PATH_MAX * 2];
	int fd;
	unsigned char c;

	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", f->layout, hex);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	if (off < 0)
		off = lseek(fd, 0, SEEK_END) + off;
	assert_int_equal(pread(fd, &c, 1, off), 1);
	c ^= 0x01;
	assert_int_equal(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

static long blob_find(struct fixture *f, const char *hex, const char *needle)
{
	static char buf[1 << 20];
	char path[PATH_MAX * 2];
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", f->layout, hex);
	FILE *fp = fopen(path, "rb");
	size_t n = fread(buf, 1, sizeof(buf), fp);
	fclose(fp);
	char *hit = memmem(buf, n, needle, strlen(needle));
	assert_non_null(hit);
	return hit - buf;
}

static void test_edited_manifest_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	flip_byte(f, f->manifest_hex, 20);
	assert_int_equal(verify(f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, f->manifest_hex));
	assert_false(exists(f->cache, "x") || exists(f->cache, f->manifest_hex));
}

static void test_edited_config_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	flip_byte(f, f->config_hex, 5);
	assert_int_equal(verify(f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, f->config_hex));
}

static int cache_has_entries(struct fixture *f)
{
	char cmd[PATH_MAX * 2];
	snprintf(cmd, sizeof(cmd), "%s", f->cache);
	int fd = open(cmd, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return 0;
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int n = 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_edited_layer_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 0);
	/* change a byte of file content: still a valid tar, so it unpacks, but
	 * the hash must catch it and nothing may reach the cache */
	flip_byte(f, f->layer_hex, blob_find(f, f->layer_hex, "print(1)"));
	assert_int_equal(verify(f, NULL, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, f->layer_hex));
	assert_int_equal(cache_has_entries(f), 0);
}

static void test_trailing_bytes_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	char path[PATH_MAX * 2];
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	snprintf(path, sizeof(path), "%s/blobs/sha256/%s", f->layout, f->layer_hex);
	FILE *fp = fopen(path, "ab");
	fputs("extra", fp);
	fclose(fp);
	/* gzip itself may notice the garbage first; either way it is refused */
	assert_true(verify(f, NULL, &err) < 0);
	assert_non_null(strstr(err.msg, f->layer_hex));
	assert_int_equal(cache_has_entries(f), 0);
}

static void test_index_json_ignored(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	char path[PATH_MAX * 2], rootfs[PATH_MAX];
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	/* an index.json that names another manifest changes nothing: the digest
	 * comes from the caller only */
	snprintf(path, sizeof(path), "%s/index.json", f->layout);
	FILE *fp = fopen(path, "w");
	fprintf(fp,
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci."
		"image.manifest.v1+json\",\"digest\":\"sha256:%064d\",\"size\":1}]}",
		0);
	fclose(fp);
	assert_int_equal(verify(f, rootfs, &err), 0);
	assert_non_null(strstr(rootfs, f->manifest_hex));
	/* and a digest that is not in the layout is refused, naming it */
	snprintf(f->digest, sizeof(f->digest), "sha256:%064d", 0);
	assert_int_equal(verify(f, NULL, &err), -ENOENT);
	snprintf(path, sizeof(path),
		 "no manifest with digest sha256:%064d in the image layout %s (its index.json "
		 "names it, but blobs/sha256/%064d is missing)",
		 0, f->layout, 0);
	assert_string_equal(err.msg, path);
}

static void index_write(const struct fixture *f, const char *text)
{
	char path[PATH_MAX * 2];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/index.json", f->layout);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* A digest the layout lacks is refused before anything is unpacked, saying
 * what the layout holds; image_layout_check (run's, before it serves) and
 * image_layout_verify say it alike. */
static void test_missing_manifest_says_what_the_layout_holds(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0}, err2 = {0};
	char index[1024], want[1024], held[IMAGE_DIGEST_STR], wrong[IMAGE_DIGEST_STR];

	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	snprintf(held, sizeof(held), "%s", f->digest);
	assert_int_equal(image_layout_check(f->layout, held, &err), 0);
	snprintf(wrong, sizeof(wrong), "sha256:%064d", 7);
	snprintf(f->digest, sizeof(f->digest), "%s", wrong);
	/* no index.json */
	assert_int_equal(verify(f, NULL, &err), -ENOENT);
	snprintf(want, sizeof(want),
		 "no manifest with digest %s in the image layout %s (it has no index.json)", wrong,
		 f->layout);
	assert_string_equal(err.msg, want);
	/* an index that names the manifest the layout holds */
	snprintf(index, sizeof(index),
		 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci."
		 "image.manifest.v1+json\",\"digest\":\"%s\",\"size\":1}]}",
		 held);
	index_write(f, index);
	assert_int_equal(verify(f, NULL, &err), -ENOENT);
	assert_int_equal(image_layout_check(f->layout, wrong, &err2), -ENOENT);
	snprintf(want, sizeof(want),
		 "no manifest with digest %s in the image layout %s (it holds %s)", wrong,
		 f->layout, held);
	assert_string_equal(err.msg, want);
	assert_string_equal(err2.msg, want);
	/* one it cannot read says none */
	index_write(f, "{\"manifests\": 1}");
	assert_int_equal(verify(f, NULL, &err), -ENOENT);
	snprintf(want, sizeof(want),
		 "no manifest with digest %s in the image layout %s (its index.json names no "
		 "manifest)",
		 wrong, f->layout);
	assert_string_equal(err.msg, want);
	assert_int_equal(cache_has_entries(f), 0);
}

/* The digests an index names, for the message only: malformed entries are
 * skipped, the count goes on past the room given. */
static void test_index_digests(void **state)
{
	char out[2][IMAGE_DIGEST_STR];
	char buf[512];
	int len = snprintf(buf, sizeof(buf),
			   "{\"manifests\":[{\"digest\":\"sha256:%064d\"},{\"digest\":1},\"x\","
			   "{\"digest\":\"sha256:AB\"},{\"digest\":\"sha256:%064d\"},"
			   "{\"digest\":\"sha256:%064d\"}]}",
			   1, 2, 3);

	(void)state;
	assert_int_equal(image_index_digests(buf, (size_t)len, out, 2), 3);
	snprintf(buf, sizeof(buf), "sha256:%064d", 1);
	assert_string_equal(out[0], buf);
	snprintf(buf, sizeof(buf), "sha256:%064d", 2);
	assert_string_equal(out[1], buf);
	assert_int_equal(image_index_digests("[]", 2, out, 2), 0);
	assert_int_equal(image_index_digests("{\"manifests\":[", 14, out, 2), 0);
}

/* init finds the digest through index.json, then checks the layout against
 * it as verify would, unpacking nothing. */
static void test_layout_digest(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	char index[1024], digest[IMAGE_DIGEST_STR];

	layout_make(f, good, sizeof(good) / sizeof(good[0]), 0);
	snprintf(index, sizeof(index),
		 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		 "\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"%s\",\"size\":1}]}",
		 f->digest);
	index_write(f, index);
	assert_int_equal(image_layout_digest(f->layout, digest, &err), 0);
	assert_string_equal(digest, f->digest);
	assert_int_equal(cache_has_entries(f), 0);
	assert_int_equal(image_layout_check_all(f->layout, f->digest, &err), 0);
	/* a layer changed after the index was written is caught */
	flip_byte(f, f->layer_hex, blob_find(f, f->layer_hex, "print(1)"));
	assert_int_equal(image_layout_digest(f->layout, digest, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, f->layer_hex));
	assert_non_null(strstr(err.msg, "image layout "));
	/* an index naming a manifest the layout lacks */
	index_write(f, "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci."
		       "image.manifest.v1+json\",\"digest\":\"sha256:"
		       "0000000000000000000000000000000000000000000000000000000000000000\","
		       "\"size\":1}]}");
	assert_int_equal(image_layout_digest(f->layout, digest, &err), -ENOENT);
	/* no index at all */
	snprintf(index, sizeof(index), "%s/index.json", f->layout);
	unlink(index);
	assert_int_equal(image_layout_digest(f->layout, digest, &err), -ENOENT);
}

static void test_index_parse(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{\"schemaVersion\":1,\"manifests\":[]}",
		"{\"schemaVersion\":2,\"manifests\":[]}",
		"{\"schemaVersion\":2,\"extra\":1,\"manifests\":[]}",
		"{\"schemaVersion\":2,\"mediaType\":\"x\",\"manifests\":[]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
		"config.v1+json\",\"digest\":\"sha256:"
		"0000000000000000000000000000000000000000000000000000000000000000\",\"size\":1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
		"manifest.v1+json\",\"digest\":\"sha256:0\",\"size\":1}]}",
		NULL,
	};
	static const char two[] =
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
		"manifest.v1+json\",\"digest\":\"sha256:"
		"0000000000000000000000000000000000000000000000000000000000000000\",\"size\":1},"
		"{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:"
		"1111111111111111111111111111111111111111111111111111111111111111\",\"size\":1}]}";
	static const char one[] =
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image."
		"manifest.v1+json\",\"digest\":\"sha256:"
		"abcdef0000000000000000000000000000000000000000000000000000000000\",\"size\":406,"
		"\"annotations\":{\"org.opencontainers.image.ref.name\":\"cell\"}}]}";
	struct appl_err err = {0};
	struct image_desc d;
	(void)state;

	for (size_t i = 0; bad[i]; i++)
		assert_int_equal(image_index_parse(bad[i], strlen(bad[i]), &d, &err), -EINVAL);
	assert_int_equal(image_index_parse(two, strlen(two), &d, &err), -EINVAL);
	assert_string_equal(err.msg, "index.json: manifests must name exactly one image, not 2");
	assert_int_equal(image_index_parse(one, strlen(one), &d, &err), 0);
	assert_string_equal(d.hex,
			    "abcdef0000000000000000000000000000000000000000000000000000000000");
	assert_int_equal(d.size, 406);
}

static void test_bad_digests_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	char hex[IMAGE_DIGEST_HEX + 1];
	(void)f;
	assert_int_equal(image_digest_parse("sha256:abc", hex, &err), -EINVAL);
	assert_int_equal(image_digest_parse(
				 "sha512:"
				 "0000000000000000000000000000000000000000000000000000000000000000",
				 hex, &err),
			 -EINVAL);
	assert_int_equal(image_digest_parse(
				 "sha256:"
				 "000000000000000000000000000000000000000000000000000000000000000A",
				 hex, &err),
			 -EINVAL);
	assert_int_equal(
		image_digest_parse(
			"sha256:"
			"00000000000000000000000000000000000000000000000000000000000000000",
			hex, &err),
		-EINVAL);
	assert_int_equal(
		image_digest_parse(
			"sha256:../../../../../../../../../../../../../../../../../etc/passwd", hex,
			&err),
		-EINVAL);
	assert_int_equal(image_digest_parse(
				 "sha256:"
				 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				 hex, &err),
			 0);
}

/* Each hostile layer is refused, nothing lands outside, nothing in the cache. */
static void hostile(struct fixture *f, const struct ent *ents, size_t n, int want,
		    const char *msg_part)
{
	struct appl_err err = {0};
	layout_make(f, ents, n, 1);
	assert_int_equal(verify(f, NULL, &err), want);
	if (msg_part && !strstr(err.msg, msg_part))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg_part);
	assert_int_equal(cache_has_entries(f), 0);
	assert_false(exists(f->outside, "pwned"));
}

static void test_absolute_name_refused(void **state)
{
	struct fixture *f = *state;
	char name[PATH_MAX];
	snprintf(name, sizeof(name), "%s/pwned", f->outside);
	struct ent e[] = {{name, AE_IFREG, 0644, "x", NULL, NULL}};
	hostile(f, e, 1, -EPERM, "absolute");
}

static void test_dotdot_refused(void **state)
{
	struct fixture *f = *state;
	struct ent e[] = {{"a/../../outside/pwned", AE_IFREG, 0644, "x", NULL, NULL}};
	hostile(f, e, 1, -EPERM, "'..'");
}

static void test_symlink_then_write_refused(void **state)
{
	struct fixture *f = *state;
	struct ent e[] = {
		{"d", AE_IFLNK, 0777, NULL, f->outside, NULL},
		{"d/pwned", AE_IFREG, 0644, "x", NULL, NULL},
	};
	hostile(f, e, 2, -EPERM, "through a symlink");
}

static void test_symlink_then_same_name_file(void **state)
{
	struct fixture *f = *state;
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/pwned", f->outside);
	/* a file entry with the name of an earlier symlink must replace the
	 * link, not write through it */
	struct ent e[] = {
		{"s", AE_IFLNK, 0777, NULL, target, NULL},
		{"s", AE_IFREG, 0644, "x", NULL, NULL},
	};
	struct appl_err err = {0};
	char rootfs[PATH_MAX];
	layout_make(f, e, 2, 1);
	assert_int_equal(verify(f, rootfs, &err), 0);
	assert_false(exists(f->outside, "pwned"));
	char p[PATH_MAX * 2];
	struct stat st;
	snprintf(p, sizeof(p), "%s/s", rootfs);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISREG(st.st_mode));
}

static void test_hardlink_out_of_tree_refused(void **state)
{
	struct fixture *f = *state;
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/victim", f->outside);
	FILE *fp = fopen(target, "w");
	fputs("host", fp);
	fclose(fp);
	struct ent abs[] = {{"h", AE_IFREG, 0644, NULL, NULL, target}};
	hostile(f, abs, 1, -EPERM, "hardlink");
	struct ent dots[] = {{"h", AE_IFREG, 0644, NULL, NULL, "../outside/victim"}};
	hostile(f, dots, 1, -EPERM, "hardlink");
	/* through a symlink of the layer itself */
	struct ent via[] = {
		{"l", AE_IFLNK, 0777, NULL, f->outside, NULL},
		{"h", AE_IFREG, 0644, NULL, NULL, "l/victim"},
	};
	hostile(f, via, 2, -EPERM, "not a regular file of this image");
	/* to a name that is a symlink now */
	struct ent relink[] = {
		{"r", AE_IFREG, 0644, "x", NULL, NULL},
		{"r", AE_IFLNK, 0777, NULL, target, NULL},
		{"h", AE_IFREG, 0644, NULL, NULL, "r"},
	};
	hostile(f, relink, 3, -EPERM, "not a regular file of this image");
}

static void test_device_nodes_refused(void **state)
{
	struct fixture *f = *state;
	struct ent chr[] = {{"dev/mem", AE_IFCHR, 0600, NULL, NULL, NULL}};
	hostile(f, chr, 1, -EPERM, "device");
	struct ent blk[] = {{"dev/sda", AE_IFBLK, 0600, NULL, NULL, NULL}};
	hostile(f, blk, 1, -EPERM, "device");
	struct ent fifo[] = {{"fifo", AE_IFIFO, 0600, NULL, NULL, NULL}};
	hostile(f, fifo, 1, -EPERM, "fifo");
}

static void test_setuid_refused(void **state)
{
	struct fixture *f = *state;
	struct ent suid[] = {{"usr/bin/su", AE_IFREG, 04755, "x", NULL, NULL}};
	hostile(f, suid, 1, -EPERM, "setuid");
	struct ent sgid[] = {{"usr/bin/wall", AE_IFREG, 02755, "x", NULL, NULL}};
	hostile(f, sgid, 1, -EPERM, "setgid");
}

static void test_whiteout_refused(void **state)
{
	struct fixture *f = *state;
	struct ent e[] = {{"etc/.wh.passwd", AE_IFREG, 0644, "", NULL, NULL}};
	hostile(f, e, 1, -ENOTSUP, "whiteout");
}

static void test_cache_writable_by_others_refused(void **state)
{
	struct fixture *f = *state;
	struct appl_err err = {0};
	layout_make(f, good, sizeof(good) / sizeof(good[0]), 1);
	mkdir(f->cache, 0777);
	chmod(f->cache, 0777);
	assert_int_equal(verify(f, NULL, &err), -EPERM);
	assert_non_null(strstr(err.msg, "writable"));
}

static void manifest_refused(const char *json, const char *msg_part)
{
	struct image_manifest m;
	struct appl_err err = {0};
	assert_true(image_manifest_parse(json, strlen(json), &m, &err) < 0);
	if (!strstr(err.msg, msg_part))
		fail_msg("message \"%s\" lacks \"%s\"", err.msg, msg_part);
}

#define CFG                                                                                        \
	"\"config\":{\"mediaType\":\"application/"                                                 \
	"vnd.oci.image.config.v1+json\",\"digest\":\"sha256:"                                      \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":10}"
#define LAYER(mt, extra)                                                                           \
	"{\"mediaType\":\"" mt "\",\"digest\":\"sha256:"                                           \
	"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":10" extra "}"
#define TGZ "application/vnd.oci.image.layer.v1.tar+gzip"

static void test_manifest_parse(void **state)
{
	struct image_manifest m;
	struct appl_err err = {0};
	const char *ok = "{\"schemaVersion\":2," CFG ",\"layers\":[" LAYER(TGZ, "") "]}";
	(void)state;
	assert_int_equal(image_manifest_parse(ok, strlen(ok), &m, &err), 0);
	assert_int_equal(m.nlayers, 1);
	assert_int_equal(m.layers[0].kind, IMAGE_LAYER_TAR_GZIP);
	assert_int_equal(m.config.size, 10);
	manifest_refused("{\"schemaVersion\":1," CFG ",\"layers\":[" LAYER(TGZ, "") "]}",
			 "schemaVersion");
	manifest_refused("{\"schemaVersion\":2," CFG ",\"layers\":[" LAYER(TGZ, "") "],\"x\":1}",
			 "manifest.x: unknown key");
	manifest_refused("{\"schemaVersion\":2," CFG
			 ",\"layers\":[" LAYER(TGZ, ",\"urls\":[\"http://x\"]") "]}",
			 "urls: unknown key");
	manifest_refused("{\"schemaVersion\":2," CFG ",\"layers\":[" LAYER(
				 "application/vnd.oci.image.layer.v1.tar+zstd", "") "]}",
			 "unsupported layer type");
	manifest_refused("{\"schemaVersion\":2," CFG ",\"layers\":[]}", "1 to");
	manifest_refused("{\"schemaVersion\":2," CFG "}", "layers: missing");
	manifest_refused("{\"schemaVersion\":2,\"layers\":[" LAYER(TGZ, "") "]}",
			 "config: missing");
	manifest_refused("{\"schemaVersion\":2," CFG ",\"layers\":[{\"mediaType\":\"" TGZ
			 "\",\"digest\":\"sha256:00\",\"size\":1}]}",
			 "digest");
	manifest_refused(
		"{\"schemaVersion\":2," CFG ",\"layers\":[{\"mediaType\":\"" TGZ
		"\",\"digest\":\"sha256:"
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\"size\":-1}]}",
		"size");
	manifest_refused("{\"schemaVersion\":2,\"schemaVersion\":2," CFG
			 ",\"layers\":[" LAYER(TGZ, "") "]}",
			 "duplicate");
	manifest_refused("[1]", "must be a JSON object");
	char many[8192];
	int n = snprintf(many, sizeof(many), "{\"schemaVersion\":2," CFG ",\"layers\":[");
	for (int i = 0; i < APPL_IMAGE_LAYERS_MAX + 1; i++)
		n += snprintf(many + n, sizeof(many) - (size_t)n, "%s" LAYER(TGZ, ""),
			      i ? "," : "");
	snprintf(many + n, sizeof(many) - (size_t)n, "]}");
	manifest_refused(many, "1 to");
}

static void test_config_check(void **state)
{
	struct appl_err err = {0};
	const char *d =
		"\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"";
	char buf[512];
	(void)state;
	snprintf(buf, sizeof(buf),
		 "{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":\"layers\","
		 "\"diff_ids\":[%s]}}",
		 d);
	assert_int_equal(image_config_check(buf, strlen(buf), 1, &err), 0);
	assert_true(image_config_check(buf, strlen(buf), 2, &err) < 0);
	snprintf(buf, sizeof(buf),
		 "{\"os\":\"linux\",\"architecture\":\"arm64\",\"rootfs\":{\"type\":\"layers\","
		 "\"diff_ids\":[%s]}}",
		 d);
	assert_true(image_config_check(buf, strlen(buf), 1, &err) < 0);
	assert_non_null(strstr(err.msg, "architecture"));
}

/* The image's own word on the memory it needs: a label of decimal MiB,
 * within what limits.memory_mb takes; anything else refuses the image. */
static void test_config_memory_label(void **state)
{
	static const char *const bad[] = {
		"\"\"",	  "\"12\"", "\"4097\"", "\"1e3\"",
		"\"-5\"", "192",    "null",	"\"99999999999999999999\""};
	const char *head = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"rootfs\":{\"type\":"
			   "\"layers\",\"diff_ids\":[\"sha256:0123456789abcdef0123456789abcdef01"
			   "23456789abcdef0123456789abcdef\"]}";
	struct image_config info = {.memory_mb_min = 7};
	struct appl_err err = {0};
	char buf[768];
	(void)state;

	snprintf(buf, sizeof(buf), "%s}", head);
	assert_int_equal(image_config_read(buf, strlen(buf), 1, &info, &err), 0);
	assert_int_equal(info.memory_mb_min, 0);
	snprintf(buf, sizeof(buf),
		 "%s,\"config\":{\"Labels\":{\"" IMAGE_LABEL_MEMORY_MIN "\":\"192\","
		 "\"other\":\"x\"}}}",
		 head);
	assert_int_equal(image_config_read(buf, strlen(buf), 1, &info, &err), 0);
	assert_int_equal(info.memory_mb_min, 192);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf),
			 "%s,\"config\":{\"Labels\":{\"" IMAGE_LABEL_MEMORY_MIN "\":%s}}}", head,
			 bad[i]);
		assert_true(image_config_check(buf, strlen(buf), 1, &err) < 0);
		if (!strstr(err.msg, IMAGE_LABEL_MEMORY_MIN))
			fail_msg("%s: %s", bad[i], err.msg);
	}
}

static void file_put(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fputs(text, fp);
	assert_int_equal(fclose(fp), 0);
}

/* The SBOM beside a layout: counted when it describes the pinned image,
 * and each way it can be missing or wrong said apart. */
static void test_sbom_read(void **state)
{
	struct fixture *f = *state;
	const char *hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char path[PATH_MAX + 16], doc[2048], digest[IMAGE_DIGEST_STR], slash[PATH_MAX + 2];
	struct appl_err err = {0};
	struct image_sbom sb;

	snprintf(digest, sizeof(digest), "sha256:%s", hex);
	snprintf(path, sizeof(path), "%s.spdx.json", f->layout);
	assert_int_equal(image_sbom_read(f->layout, digest, &sb, &err), -ENOENT);
	assert_string_equal(sb.path, path);
	snprintf(
		doc, sizeof(doc),
		"{\"spdxVersion\":\"SPDX-2.3\",\"packages\":[{\"SPDXID\":\"SPDXRef-Image\","
		"\"checksums\":[{\"algorithm\":\"SHA256\",\"checksumValue\":\"%s\"}]},"
		"{\"name\":\"libc6\",\"externalRefs\":[{\"referenceType\":\"purl\","
		"\"referenceLocator\":\"pkg:deb/debian/libc6@2.36-9?arch=amd64\"}]},"
		"{\"name\":\"python3-numpy\",\"externalRefs\":[{\"referenceType\":\"purl\","
		"\"referenceLocator\":\"pkg:deb/debian/python3-numpy@1%%3A1.24.2-1?arch=amd64\"}]},"
		"{\"name\":\"not-a-deb\",\"externalRefs\":[{\"referenceType\":\"purl\","
		"\"referenceLocator\":\"pkg:pypi/x@1\"}]}, 7]}",
		hex);
	file_put(path, doc);
	assert_int_equal(image_sbom_read(f->layout, digest, &sb, &err), 0);
	assert_int_equal(sb.packages, 2);
	assert_string_equal(sb.version, "SPDX-2.3");
	snprintf(slash, sizeof(slash), "%s/", f->layout); /* a layout named with a slash */
	assert_int_equal(image_sbom_read(slash, digest, &sb, &err), 0);
	assert_string_equal(sb.path, path);
	/* Another image's SBOM. */
	snprintf(digest, sizeof(digest), "sha256:%064d", 0);
	assert_int_equal(image_sbom_read(f->layout, digest, &sb, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "describes another image"));
	file_put(path, "{\"spdxVersion\":\"SPDX-3.0\",\"packages\":[]}");
	assert_int_equal(image_sbom_read(f->layout, digest, &sb, &err), -EINVAL);
	file_put(path, "not json");
	assert_true(image_sbom_read(f->layout, digest, &sb, &err) < 0);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_layout_unpacks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_uncompressed_layer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edited_manifest_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edited_config_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_edited_layer_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trailing_bytes_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_index_json_ignored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_manifest_says_what_the_layout_holds,
						setup, teardown),
		cmocka_unit_test(test_index_digests),
		cmocka_unit_test_setup_teardown(test_bad_digests_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_layout_digest, setup, teardown),
		cmocka_unit_test(test_index_parse),
		cmocka_unit_test_setup_teardown(test_absolute_name_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dotdot_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_then_write_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_then_same_name_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_out_of_tree_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_nodes_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_setuid_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whiteout_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_writable_by_others_refused, setup,
						teardown),
		cmocka_unit_test(test_manifest_parse),
		cmocka_unit_test(test_config_check),
		cmocka_unit_test(test_config_memory_label),
		cmocka_unit_test_setup_teardown(test_sbom_read, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
