/* layer.c: unpacking one layer while hashing the very bytes unpacked.
 *
 * Hashing a file and then unpacking it would read it twice, and a file that
 * changes in between would be verified in one form and unpacked in another.
 * Here libarchive pulls the blob through src_read, which feeds the hash, so
 * what was hashed is what was unpacked; the caller moves the tree into the
 * cache only after the hash matched.
 */
#include "image/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LAYER_READ_BLOCK (128 * 1024)

struct layer_src {
	int fd;
	uint64_t count;
	uint64_t limit;
	int too_big;
	crypto_hash_sha256_state sha;
	unsigned char buf[LAYER_READ_BLOCK];
};

static ssize_t src_fill(struct layer_src *src)
{
	ssize_t n;

	do
		n = read(src->fd, src->buf, sizeof(src->buf));
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n;
	src->count += (uint64_t)n;
	if (src->count > src->limit) {
		/* More bytes than the manifest said: stop before unpacking them. */
		src->too_big = 1;
		errno = EFBIG;
		return -1;
	}
	crypto_hash_sha256_update(&src->sha, src->buf, (unsigned long long)n);
	return n;
}

static la_ssize_t src_read(struct archive *a, void *data, const void **out)
{
	struct layer_src *src = data;
	ssize_t n = src_fill(src);

	if (n < 0) {
		archive_set_error(a, errno, "reading the layer blob");
		return -1;
	}
	*out = src->buf;
	return n;
}

/* Make an entry name relative and plain: "./a/b/" -> "a/b". Returns 1 for
 * the root entry itself (skipped), 0 when clean, negative when refused. */
static int name_clean(const char *name, char *out, size_t outlen, struct appl_err *err)
{
	size_t len;
	const char *p;

	if (!name)
		return appl_err_set(err, -EINVAL, "entry with no usable name");
	while (name[0] == '.' && name[1] == '/')
		name += 2;
	if (name[0] == '/')
		return appl_err_set(err, -EPERM, "entry %.200s: absolute name", name);
	len = strlen(name);
	while (len > 0 && name[len - 1] == '/')
		len--;
	if (len == 0 || (len == 1 && name[0] == '.'))
		return 1;
	if (len >= outlen || len > APPL_IMAGE_PATH_MAX)
		return appl_err_set(err, -ENAMETOOLONG, "entry %.200s: name too long", name);
	memcpy(out, name, len);
	out[len] = '\0';
	for (p = out; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL) {
		size_t clen = strcspn(p, "/");
		if (clen == 0 || (clen == 1 && p[0] == '.'))
			return appl_err_set(err, -EINVAL, "entry %.200s: empty or '.' component",
					    out);
		if (clen == 2 && p[0] == '.' && p[1] == '.')
			return appl_err_set(err, -EPERM, "entry %.200s: '..' component", out);
		/* OCI whiteouts delete files of lower layers; this store does not
		 * implement them, so it refuses them rather than ignore them. */
		if (clen >= 4 && strncmp(p, ".wh.", 4) == 0)
			return appl_err_set(err, -ENOTSUP, "entry %.200s: whiteout", out);
	}
	return 0;
}

static int entry_type_check(struct archive_entry *e, const char *name, struct appl_err *err)
{
	mode_t type = archive_entry_filetype(e);

	if (archive_entry_mode(e) & (S_ISUID | S_ISGID))
		return appl_err_set(err, -EPERM, "entry %.200s: setuid or setgid bit", name);
	if (archive_entry_hardlink(e))
		return 0;
	if (type == AE_IFREG || type == AE_IFDIR || type == AE_IFLNK)
		return 0;
	return appl_err_set(err, -EPERM, "entry %.200s: device, fifo or socket node", name);
}

/* A hardlink may only name a regular file this image already unpacked:
 * anything else could link a host file (through a symlink, or `..`) into
 * the rootfs, or make a second name for one the sandbox should not have. */
static int hardlink_check(struct archive_entry *e, const struct image_names *regular,
			  const char *name, struct appl_err *err)
{
	char target[APPL_IMAGE_PATH_MAX + 1];
	int rc = name_clean(archive_entry_hardlink(e), target, sizeof(target), err);

	if (rc < 0)
		return appl_err_prefix(err, "hardlink %.200s", name);
	if (rc > 0 || image_names_kind(regular, target) != IMAGE_NAME_REGULAR)
		return appl_err_set(err, -EPERM,
				    "entry %.200s: hardlink to %.200s, not a regular file of "
				    "this image",
				    name, target);
	archive_entry_copy_hardlink(e, target);
	return 0;
}

/* A symlink of the image is only ever meant for the sandbox: an entry whose
 * parent path runs through one would be written wherever it points on the
 * host. libarchive checks this too; this check does not depend on its
 * flags and refuses instead of repairing. */
static int symlink_parent_check(struct image_names *names, char *name, struct appl_err *err)
{
	for (char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
		enum image_name_kind kind;
		*p = '\0';
		kind = image_names_kind(names, name);
		*p = '/';
		if (kind == IMAGE_NAME_SYMLINK)
			return appl_err_set(err, -EPERM, "entry %.200s: written through a symlink",
					    name);
	}
	return 0;
}

static enum image_name_kind entry_kind(struct archive_entry *e)
{
	if (archive_entry_hardlink(e) || archive_entry_filetype(e) == AE_IFREG)
		return IMAGE_NAME_REGULAR;
	if (archive_entry_filetype(e) == AE_IFLNK)
		return IMAGE_NAME_SYMLINK;
	return IMAGE_NAME_OTHER;
}

static int entry_prepare(struct archive_entry *e, struct image_names *regular, struct appl_err *err)
{
	char name[APPL_IMAGE_PATH_MAX + 1];
	int rc;

	rc = name_clean(archive_entry_pathname(e), name, sizeof(name), err);
	if (rc != 0)
		return rc;
	rc = symlink_parent_check(regular, name, err);
	if (rc < 0)
		return rc;
	rc = entry_type_check(e, name, err);
	if (rc < 0)
		return rc;
	if (archive_entry_hardlink(e)) {
		rc = hardlink_check(e, regular, name, err);
		if (rc < 0)
			return rc;
	}
	archive_entry_copy_pathname(e, name);
	if (image_names_set(regular, name, entry_kind(e)) < 0)
		return appl_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int data_copy(struct archive *in, struct archive *out, uint64_t *total, struct appl_err *err)
{
	const void *block;
	size_t size;
	la_int64_t offset;
	int r;

	while ((r = archive_read_data_block(in, &block, &size, &offset)) == ARCHIVE_OK) {
		*total += size;
		if (*total > APPL_IMAGE_UNPACKED_MAX)
			return appl_err_set(err, -EFBIG, "unpacked layer larger than %llu bytes",
					    (unsigned long long)APPL_IMAGE_UNPACKED_MAX);
		if (archive_write_data_block(out, block, size, offset) != ARCHIVE_OK)
			return appl_err_set(err, -EIO, "writing: %.200s",
					    archive_error_string(out));
	}
	if (r != ARCHIVE_EOF)
		return appl_err_set(err, -EIO, "reading: %.200s", archive_error_string(in));
	return 0;
}

static int entries_extract(struct archive *in, struct archive *out, struct image_names *regular,
			   struct appl_err *err)
{
	struct archive_entry *e;
	uint64_t total = 0;
	size_t count = 0;
	int r, rc;

	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		if (++count > APPL_IMAGE_ENTRIES_MAX)
			return appl_err_set(err, -EFBIG, "more than %d entries",
					    APPL_IMAGE_ENTRIES_MAX);
		rc = entry_prepare(e, regular, err);
		if (rc < 0)
			return rc;
		if (rc > 0)
			continue;
		/* libarchive's own checks run here too (symlinks on the way,
		 * `..`, absolute names): any refusal stops the whole layer. */
		if (archive_write_header(out, e) != ARCHIVE_OK)
			return appl_err_set(err, -EPERM, "entry %.200s: %.200s",
					    archive_entry_pathname(e), archive_error_string(out));
		if (archive_entry_size(e) > 0 && (rc = data_copy(in, out, &total, err)) < 0)
			return rc;
		if (archive_write_finish_entry(out) != ARCHIVE_OK)
			return appl_err_set(err, -EIO, "entry %.200s: %.200s",
					    archive_entry_pathname(e), archive_error_string(out));
	}
	if (r != ARCHIVE_EOF)
		return appl_err_set(err, -EINVAL, "not a valid tar stream: %.200s",
				    archive_error_string(in));
	if (archive_write_close(out) != ARCHIVE_OK)
		return appl_err_set(err, -EIO, "finishing: %.200s", archive_error_string(out));
	return 0;
}

static struct archive *reader_new(const struct image_desc *desc, struct layer_src *src)
{
	struct archive *in = archive_read_new();

	if (!in)
		return NULL;
	/* Only tar, and only the compression the media type names. */
	archive_read_support_format_tar(in);
	if (desc->kind == IMAGE_LAYER_TAR_GZIP)
		archive_read_support_filter_gzip(in);
	else
		archive_read_support_filter_none(in);
	if (archive_read_open(in, src, NULL, src_read, NULL) != ARCHIVE_OK) {
		archive_read_free(in);
		return NULL;
	}
	return in;
}

static struct archive *writer_new(void)
{
	struct archive *out = archive_write_disk_new();

	if (!out)
		return NULL;
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_SYMLINKS |
						    ARCHIVE_EXTRACT_SECURE_NODOTDOT |
						    ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
						    ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_UNLINK);
	return out;
}

/* Read what libarchive left unread (tar padding, trailing bytes) through the
 * hash too: the digest covers the whole blob, not only what was unpacked. */
static int src_drain(struct layer_src *src, struct appl_err *err)
{
	ssize_t n;

	while ((n = src_fill(src)) > 0)
		;
	if (n < 0)
		return appl_err_errno(err, src->too_big ? -EFBIG : -EIO, errno,
				      "reading the layer blob");
	return 0;
}

static int src_verify(struct layer_src *src, const struct image_desc *desc, struct appl_err *err)
{
	unsigned char sum[crypto_hash_sha256_BYTES];
	char hex[IMAGE_DIGEST_HEX + 1];

	if (src->count != desc->size)
		return appl_err_set(err, -EBADMSG, "blob sha256:%s: %llu bytes, manifest says %llu",
				    desc->hex, (unsigned long long)src->count,
				    (unsigned long long)desc->size);
	crypto_hash_sha256_final(&src->sha, sum);
	sodium_bin2hex(hex, sizeof(hex), sum, sizeof(sum));
	if (sodium_memcmp(hex, desc->hex, IMAGE_DIGEST_HEX) != 0)
		return appl_err_set(err, -EBADMSG,
				    "blob sha256:%s: content does not match its digest", desc->hex);
	return 0;
}

static int layer_unpack(int fd, const struct image_desc *desc, struct image_names *regular,
			struct layer_src *src, struct appl_err *err)
{
	struct archive *in = NULL, *out = NULL;
	int rc;

	src->fd = fd;
	src->limit = desc->size;
	crypto_hash_sha256_init(&src->sha);
	in = reader_new(desc, src);
	out = writer_new();
	if (!in || !out) {
		rc = appl_err_set(err, -EINVAL, "blob sha256:%s: cannot open as %s", desc->hex,
				  desc->kind == IMAGE_LAYER_TAR_GZIP ? "tar+gzip" : "tar");
		goto out;
	}
	rc = entries_extract(in, out, regular, err);
	if (rc == 0)
		rc = src_drain(src, err);
	if (rc == 0)
		rc = src_verify(src, desc, err);
	else if (src->too_big)
		rc = appl_err_set(err, -EBADMSG, "blob sha256:%s: larger than the manifest says",
				  desc->hex);
	else
		appl_err_prefix(err, "blob sha256:%s", desc->hex);
out:
	if (out)
		archive_write_free(out);
	if (in)
		archive_read_free(in);
	return rc;
}

int image_layer_extract(int fd, const struct image_desc *desc, int dirfd,
			struct image_names *regular, struct appl_err *err)
{
	struct layer_src *src;
	int cwd, rc;

	/* libarchive writes relative to the working directory; move into the
	 * target for the duration and come back. This runs before serving
	 * starts, in a single thread. */
	cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cwd < 0)
		return appl_err_errno(err, -errno, errno, "opening the working directory");
	if (fchdir(dirfd) < 0) {
		rc = appl_err_errno(err, -errno, errno, "entering the unpack directory");
		close(cwd);
		return rc;
	}
	src = malloc(sizeof(*src));
	if (src) {
		memset(src, 0, sizeof(*src));
		rc = layer_unpack(fd, desc, regular, src, err);
		free(src);
	} else {
		rc = appl_err_set(err, -ENOMEM, "out of memory");
	}
	if (fchdir(cwd) < 0 && rc == 0)
		rc = appl_err_errno(err, -errno, errno, "returning to the working directory");
	close(cwd);
	return rc;
}
