/* store.c: verifying an image layout and keeping its rootfs in the cache. */
#define _GNU_SOURCE
#include "image/internal.h"
#include "base/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_BLOCK (128 * 1024)

/* Blobs are opened by their hex name only (never a name from the layout),
 * not through a symlink, and must be regular files: a fifo would hang us. */
static int blob_open(int blobs, const char *hex, struct appl_err *err)
{
	struct stat st;
	int fd = openat(blobs, hex, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "blob sha256:%s", hex);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return appl_err_set(err, -EINVAL, "blob sha256:%s: not a regular file", hex);
	}
	return fd;
}

/* Hash the blob named hex, at most max bytes; keep its bytes in *buf when buf
 * is not NULL (a malloc'ed copy, NUL after them). */
static int blob_hash(int blobs, const char *hex, uint64_t max, char **buf, size_t *len,
		     struct appl_err *err)
{
	crypto_hash_sha256_state sha;
	unsigned char block[STORE_BLOCK], sum[crypto_hash_sha256_BYTES];
	char got[IMAGE_DIGEST_HEX + 1];
	uint64_t total = 0;
	char *data = NULL;
	ssize_t n;
	int fd, rc = 0;

	fd = blob_open(blobs, hex, err);
	if (fd < 0)
		return fd;
	if (buf && !(data = malloc(max + 1))) {
		rc = appl_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	crypto_hash_sha256_init(&sha);
	while ((n = read(fd, block, sizeof(block))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = appl_err_errno(err, -errno, errno, "blob sha256:%s", hex);
			goto out;
		}
		if (total + (uint64_t)n > max) {
			rc = appl_err_set(err, -EFBIG, "blob sha256:%s: larger than %llu bytes",
					  hex, (unsigned long long)max);
			goto out;
		}
		if (data)
			memcpy(data + total, block, (size_t)n);
		total += (uint64_t)n;
		crypto_hash_sha256_update(&sha, block, (unsigned long long)n);
	}
	crypto_hash_sha256_final(&sha, sum);
	sodium_bin2hex(got, sizeof(got), sum, sizeof(sum));
	if (sodium_memcmp(got, hex, IMAGE_DIGEST_HEX) != 0) {
		rc = appl_err_set(err, -EBADMSG,
				  "blob sha256:%s: content does not match its digest", hex);
		goto out;
	}
	if (data) {
		data[total] = '\0';
		*buf = data;
		*len = (size_t)total;
		data = NULL;
	} else if (len) {
		*len = (size_t)total;
	}
out:
	free(data);
	close(fd);
	return rc;
}

static int desc_hash(int blobs, const struct image_desc *d, char **buf, struct appl_err *err)
{
	size_t len = 0;
	int rc = blob_hash(blobs, d->hex, d->size, buf, &len, err);

	if (rc == 0 && len != d->size) {
		if (buf) {
			free(*buf);
			*buf = NULL;
		}
		return appl_err_set(err, -EBADMSG, "blob sha256:%s: %zu bytes, manifest says %llu",
				    d->hex, len, (unsigned long long)d->size);
	}
	return rc;
}

/* How many of the digests index.json names a message lists. */
#define INDEX_SHOWN 3

/* What the layout holds instead, in words: from index.json, which is read
 * only here, for the message, and never decides anything. */
static void index_words(int layout, const char *hex, char *out, size_t out_len)
{
	char held[INDEX_SHOWN][IMAGE_DIGEST_STR], *buf = NULL;
	size_t len, n = 0, used;
	int fd = openat(layout, "index.json",
			O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);

	if (fd < 0 && errno == ENOENT) {
		snprintf(out, out_len, "it has no index.json");
		return;
	}
	if (fd >= 0 && appl_fd_read(fd, APPL_IMAGE_INDEX_MAX, "index.json", &buf, &len, NULL) == 0)
		n = image_index_digests(buf, len, held, INDEX_SHOWN);
	if (fd >= 0)
		close(fd);
	free(buf);
	for (size_t i = 0; i < n && i < INDEX_SHOWN; i++)
		if (strcmp(held[i] + 7, hex) == 0) {
			snprintf(out, out_len,
				 "its index.json names it, but blobs/sha256/%s is missing", hex);
			return;
		}
	if (n == 0) {
		snprintf(out, out_len, "its index.json names no manifest");
		return;
	}
	used = (size_t)snprintf(out, out_len, "it holds %s", held[0]);
	for (size_t i = 1; i < n && i < INDEX_SHOWN && used < out_len; i++)
		used += (size_t)snprintf(out + used, out_len - used, ", %s", held[i]);
	if (n > INDEX_SHOWN && used < out_len)
		snprintf(out + used, out_len - used, " and %zu more", n - INDEX_SHOWN);
}

static int manifest_load(int layout, int blobs, const char *layout_dir, const char *hex,
			 struct image_manifest *m, struct image_config *info, struct appl_err *err)
{
	char *buf = NULL, *config = NULL, held[INDEX_SHOWN * (IMAGE_DIGEST_STR + 2) + 96];
	size_t len = 0;
	int rc;

	rc = blob_hash(blobs, hex, APPL_IMAGE_MANIFEST_MAX, &buf, &len, err);
	if (rc == -ENOENT) {
		index_words(layout, hex, held, sizeof(held));
		return appl_err_set(err, rc,
				    "no manifest with digest sha256:%s in the image layout %s (%s)",
				    hex, layout_dir, held);
	}
	if (rc < 0)
		return rc == -EBADMSG ? appl_err_set(err, rc,
						     "manifest sha256:%s: content does not "
						     "match the pinned digest",
						     hex)
				      : rc;
	rc = image_manifest_parse(buf, len, m, err);
	free(buf);
	if (rc < 0)
		return rc;
	rc = desc_hash(blobs, &m->config, &config, err);
	if (rc == 0)
		rc = image_config_read(config, m->config.size, m->nlayers, info, err);
	free(config);
	return rc;
}

static int layers_unpack(int blobs, const struct image_manifest *m, const char *dir,
			 struct appl_err *err)
{
	struct image_names *names = image_names_new();
	int dirfd, rc = 0;

	if (!names)
		return appl_err_set(err, -ENOMEM, "out of memory");
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (dirfd < 0)
		rc = appl_err_errno(err, -errno, errno, "%s", dir);
	for (size_t i = 0; rc == 0 && i < m->nlayers; i++) {
		int fd = blob_open(blobs, m->layers[i].hex, err);
		if (fd < 0) {
			rc = fd;
			break;
		}
		rc = image_layer_extract(fd, &m->layers[i], dirfd, names, err);
		close(fd);
	}
	if (rc == 0 && fchmod(dirfd, 0755) < 0)
		rc = appl_err_errno(err, -errno, errno, "%s", dir);
	if (dirfd >= 0)
		close(dirfd);
	image_names_free(names);
	return rc;
}

static int cache_fill(int blobs, const struct image_manifest *m, const char *cache,
		      const char *final, struct appl_err *err)
{
	char tmp[PATH_MAX];
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s/.unpack-XXXXXX", cache) >= (int)sizeof(tmp))
		return appl_err_set(err, -ENAMETOOLONG, "cache path too long");
	if (!mkdtemp(tmp))
		return appl_err_errno(err, -errno, errno, "cache %s", cache);
	rc = layers_unpack(blobs, m, tmp, err);
	if (rc == 0 && rename(tmp, final) < 0) {
		/* Another instance unpacked the same digest first: use theirs. */
		if (errno != EEXIST && errno != ENOTEMPTY)
			rc = appl_err_errno(err, -errno, errno, "cache %s", final);
	}
	if (rc < 0 || access(tmp, F_OK) == 0)
		appl_tree_remove(tmp);
	return rc;
}

static int layers_check(int blobs, const struct image_manifest *m, struct appl_err *err)
{
	for (size_t i = 0; i < m->nlayers; i++) {
		int rc = desc_hash(blobs, &m->layers[i], NULL, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Open the layout and its blob directory; both descriptors new. */
static int layout_open(const char *layout_dir, const char *digest, char *hex, int *layout,
		       int *blobs, struct appl_err *err)
{
	int rc;

	*layout = *blobs = -1;
	if ((rc = image_digest_parse(digest, hex, err)) < 0)
		return rc;
	*layout = open(layout_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*layout < 0 && errno == ENOENT)
		return appl_err_set(err, -ENOENT,
				    "image layout %s does not exist: name an OCI image layout "
				    "(make image builds build/image; make install puts one in "
				    "PREFIX/share/appliance/image)",
				    layout_dir);
	if (*layout < 0)
		return appl_err_errno(err, -errno, errno, "image layout %s", layout_dir);
	*blobs = openat(*layout, "blobs/sha256", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*blobs < 0 && errno == ENOENT)
		rc = appl_err_set(
			err, -ENOENT,
			"image layout %s: not an OCI image layout (it has no blobs/sha256)",
			layout_dir);
	else if (*blobs < 0)
		rc = appl_err_errno(err, -errno, errno, "image layout %s: blobs/sha256",
				    layout_dir);
	if (*blobs < 0) {
		close(*layout);
		*layout = -1;
		return rc;
	}
	return 0;
}

int image_layout_check(const char *layout_dir, const char *digest, struct appl_err *err)
{
	return image_layout_config(layout_dir, digest, NULL, err);
}

int image_layout_config(const char *layout_dir, const char *digest, struct image_config *out,
			struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1];
	struct image_manifest m;
	int layout, blobs, rc;

	if ((rc = layout_open(layout_dir, digest, hex, &layout, &blobs, err)) < 0)
		return rc;
	rc = manifest_load(layout, blobs, layout_dir, hex, &m, out, err);
	close(blobs);
	close(layout);
	return rc;
}

int image_layout_check_all(const char *layout_dir, const char *digest, struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1];
	struct image_manifest m;
	int layout, blobs, rc;

	if ((rc = layout_open(layout_dir, digest, hex, &layout, &blobs, err)) < 0)
		return rc;
	if ((rc = manifest_load(layout, blobs, layout_dir, hex, &m, NULL, err)) == 0 &&
	    (rc = layers_check(blobs, &m, err)) < 0)
		appl_err_prefix(err, "image layout %s", layout_dir);
	close(blobs);
	close(layout);
	return rc;
}

int image_layout_digest(const char *layout_dir, char digest[IMAGE_DIGEST_STR], struct appl_err *err)
{
	struct image_desc d;
	char path[PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	int rc;

	if (appl_path_join(path, sizeof(path), layout_dir, "/index.json", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "image layout %s: path too long",
				    layout_dir);
	if ((rc = appl_file_read(path, APPL_IMAGE_INDEX_MAX, &buf, &len, err)) < 0)
		return rc;
	rc = image_index_parse(buf, len, &d, err);
	free(buf);
	if (rc < 0) {
		appl_err_prefix(err, "image layout %s", layout_dir);
		return rc;
	}
	snprintf(digest, IMAGE_DIGEST_STR, "sha256:%s", d.hex);
	return image_layout_check_all(layout_dir, digest, err);
}

/* A digest file: "sha256:HEX", a newline after it or not. */
static int digest_file_read(const char *path, char digest[IMAGE_DIGEST_STR], struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1], *buf = NULL;
	size_t len = 0;
	int rc;

	if ((rc = appl_file_read(path, IMAGE_DIGEST_STR + 1, &buf, &len, err)) < 0)
		return rc;
	if (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	rc = strlen(buf) == len ? image_digest_parse(buf, hex, err)
				: appl_err_set(err, -EINVAL, "a NUL byte");
	free(buf);
	if (rc < 0)
		return appl_err_prefix(err, "%s", path);
	snprintf(digest, IMAGE_DIGEST_STR, "sha256:%s", hex);
	return 0;
}

int image_installed_find(char *layout, char digest[IMAGE_DIGEST_STR], struct appl_err *err)
{
	char exe[PATH_MAX], path[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int rc;

	if (n < 0)
		return appl_err_errno(err, -errno, errno, "/proc/self/exe");
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')))
		slash[1] = '\0';
	if (appl_path_join(path, sizeof(path), exe, IMAGE_INSTALLED_LAYOUT, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", exe);
	if (!realpath(path, layout))
		return appl_err_errno(err, -errno, errno, "no installed image at %s", path);
	if (appl_path_join(path, sizeof(path), exe, IMAGE_INSTALLED_DIGEST, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", exe);
	if ((rc = digest_file_read(path, digest, err)) < 0)
		return rc;
	return image_layout_check_all(layout, digest, err);
}

int image_layout_verify(const char *layout_dir, const char *digest, const char *cache_dir,
			char *rootfs, size_t rootfs_len, struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1], final[PATH_MAX];
	struct image_manifest m;
	struct stat st;
	int layout, blobs, rc;

	if ((rc = layout_open(layout_dir, digest, hex, &layout, &blobs, err)) < 0)
		return rc;
	if ((rc = manifest_load(layout, blobs, layout_dir, hex, &m, NULL, err)) < 0)
		goto out;
	if ((rc = appl_private_dir(cache_dir, "cache", err)) < 0)
		goto out;
	if (snprintf(final, sizeof(final), "%s/sha256-%s", cache_dir, hex) >= (int)sizeof(final)) {
		rc = appl_err_set(err, -ENAMETOOLONG, "cache path too long");
		goto out;
	}
	if (lstat(final, &st) == 0 && S_ISDIR(st.st_mode))
		rc = layers_check(blobs, &m, err);
	else
		rc = cache_fill(blobs, &m, cache_dir, final, err);
	if (rc == 0 && snprintf(rootfs, rootfs_len, "%s", final) >= (int)rootfs_len)
		rc = appl_err_set(err, -ENAMETOOLONG, "rootfs path too long");
out:
	close(blobs);
	close(layout);
	return rc;
}

int image_cache_default(char *out, size_t len, struct appl_err *err)
{
	if (geteuid() != 0)
		return appl_user_dir(out, len, "XDG_CACHE_HOME", ".cache", "appliance/images",
				     "cache directory", "--cache", err);
	if (appl_path_join(out, len, "/var/cache/appliance/images", "", "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "cache path too long");
	return 0;
}
