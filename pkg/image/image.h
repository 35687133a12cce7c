/* image.h: the cell image store. An OCI image layout, pinned by the digest of
 * its manifest, is checked blob by blob and unpacked into a private cache.
 *
 * Trust flows only from the digest the caller passes (which the signed
 * policy carries): the manifest must hash to it, the config and every layer
 * must hash to what that manifest names. index.json never decides anything:
 * it is read only when the layout lacks the pinned manifest, to say which
 * digests it holds instead. The image config's Env, User and Cmd are
 * ignored: the appliance decides those.
 *
 * Blobs are hashed with libsodium: before the functions that read a layout
 * (image_layout_*, image_installed_find) the caller must have called
 * sodium_init() (cmd/appliance/main.c does, for every command, before it
 * dispatches; a test does in its setup). This module never changes the
 * process's state itself.
 */
#ifndef APPL_IMAGE_IMAGE_H
#define APPL_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "base/limits.h"

#define IMAGE_DIGEST_HEX 64
#define IMAGE_DIGEST_STR 72 /* "sha256:" + 64 hex + NUL */

enum image_layer_kind {
	IMAGE_LAYER_TAR,
	IMAGE_LAYER_TAR_GZIP,
};

struct image_desc {
	char hex[IMAGE_DIGEST_HEX + 1]; /* lower-case hex of the sha256 */
	uint64_t size;
	enum image_layer_kind kind; /* layers only */
};

struct image_manifest {
	struct image_desc config;
	size_t nlayers;
	struct image_desc layers[APPL_IMAGE_LAYERS_MAX];
};

/* Check that s is exactly "sha256:" and 64 lower-case hex digits; copy the hex
 * part into hex (IMAGE_DIGEST_HEX + 1 bytes). */
int image_digest_parse(const char *s, char *hex, struct appl_err *err);

/* Parse a manifest blob from buf[0..len) (untrusted; not NUL-terminated) into
 * m. Strict: unknown keys, wrong media types, sizes over the caps, remote
 * `urls` and more than APPL_IMAGE_LAYERS_MAX layers are refused. Pure. */
int image_manifest_parse(const char *buf, size_t len, struct image_manifest *m,
			 struct appl_err *err);

/* Parse an OCI layout's index.json from buf[0..len) (untrusted; not
 * NUL-terminated) into the descriptor of the one image manifest it names.
 * Only tools that choose an image read it (`appliance init`); verifying one
 * never does. Strict about what it reads: schemaVersion 2, exactly one
 * manifest, of the manifest media type. Pure. */
int image_index_parse(const char *buf, size_t len, struct image_desc *manifest,
		      struct appl_err *err);

/* The manifest digests ("sha256:HEX") an OCI index (index.json, untrusted,
 * buf[0..len), not NUL-terminated) names, in order: the first max of them
 * copied into out, the count of all returned. Anything malformed counts as
 * naming none: the result only words a message. Pure. */
size_t image_index_digests(const char *buf, size_t len, char (*out)[IMAGE_DIGEST_STR], size_t max);

/* Check a config blob: a JSON object for linux/amd64 whose rootfs is
 * "layers" with one diff_id per layer, and whose label
 * IMAGE_LABEL_MEMORY_MIN, if it has one, is a whole number of MiB within
 * APPL_MEMORY_MB_MIN..CEIL. Everything else in it is ignored. */
int image_config_check(const char *buf, size_t len, size_t nlayers, struct appl_err *err);

/* What an image says of itself, in its config's labels: the least
 * limits.memory_mb a sandbox of it needs (the data image's interpreter
 * with numpy, pandas and matplotlib imported), 0 when it says nothing. */
#define IMAGE_LABEL_MEMORY_MIN "org.appliance.memory_mb.min"
struct image_config {
	unsigned memory_mb_min;
};

/* image_config_check, and what the config says into *out (may be NULL). */
int image_config_read(const char *buf, size_t len, size_t nlayers, struct image_config *out,
		      struct appl_err *err);

/* The config of the image pinned by digest in the layout at layout_dir,
 * read as image_layout_check reads it (the manifest and the config hashed
 * against what names them; the layers not read): into *out, which may be
 * NULL (image_layout_check). */
int image_layout_config(const char *layout_dir, const char *digest, struct image_config *out,
			struct appl_err *err);

/* Extract one layer from the open descriptor fd (borrowed, read to EOF) into
 * the directory dirfd (borrowed), hashing exactly the bytes that are
 * unpacked; fails unless they hash to desc->hex and number desc->size.
 * Entries are refused (and extraction stops) for: absolute names, `..`,
 * device or fifo or socket nodes, setuid/setgid bits, OCI whiteouts,
 * hardlinks to anything but a regular file of this image, and writes through
 * a symlink. regular is the set of regular files seen so far (across layers);
 * pass the same one for every layer of an image. */
struct image_names;
struct image_names *image_names_new(void);
void image_names_free(struct image_names *names);
int image_layer_extract(int fd, const struct image_desc *desc, int dirfd,
			struct image_names *regular, struct appl_err *err);

/* Verify the layout at layout_dir against digest ("sha256:HEX") and make sure
 * its rootfs is unpacked in cache_dir (created 0700 if absent; refused if
 * another user owns it or others may write to it). On success writes the
 * rootfs path into rootfs (rootfs_len bytes). Every blob is hashed on every
 * call; layers are unpacked only when the cache has no rootfs for the digest.
 */
int image_layout_verify(const char *layout_dir, const char *digest, const char *cache_dir,
			char *rootfs, size_t rootfs_len, struct appl_err *err);

/* The cheap part of image_layout_verify, for a command to run before it
 * serves: the layout holds a manifest that hashes to digest, it parses, and
 * so does its config. The layers are not read. A layout without that
 * manifest is refused with -ENOENT and "no manifest with digest D in the
 * image layout L (it holds D')", as image_layout_verify refuses it. */
int image_layout_check(const char *layout_dir, const char *digest, struct appl_err *err);

/* Check the layout at layout_dir against digest as image_layout_verify
 * does (the manifest, the config and every layer hashed, each against what
 * names it), unpacking nothing. */
int image_layout_check_all(const char *layout_dir, const char *digest, struct appl_err *err);

/* The manifest digest of the layout at layout_dir, found through its
 * index.json (image_index_parse) and then checked as image_layout_check_all
 * checks it: "sha256:HEX" into digest (IMAGE_DIGEST_STR bytes). For a tool
 * writing a policy, which an administrator reads before signing: the
 * appliance itself only ever takes the digest from the signed policy. */
int image_layout_digest(const char *layout_dir, char digest[IMAGE_DIGEST_STR],
			struct appl_err *err);

/* The SBOM beside a layout: the layout's path with this suffix
 * (build/image.spdx.json beside build/image). scripts/build-image writes
 * it, SPDX 2.3 JSON: the image as a package whose checksum is its
 * manifest digest, and each Debian package in it with a pkg:deb purl. */
#define IMAGE_SBOM_SUFFIX ".spdx.json"
struct image_sbom {
	char path[4096 + sizeof(IMAGE_SBOM_SUFFIX)];
	char version[16];  /* spdxVersion, like "SPDX-2.3" */
	unsigned packages; /* the Debian packages it lists */
};

/* Read the SBOM beside layout_dir into *out (out->path is set whatever
 * happens): -ENOENT when there is none; -ESTALE when it describes another
 * image than digest (no package has it as its SHA256 checksum); -EINVAL
 * when it is not SPDX 2 JSON; -EFBIG over APPL_IMAGE_SBOM_MAX. For words
 * in a report: nothing the appliance runs depends on it. */
int image_sbom_read(const char *layout_dir, const char *digest, struct image_sbom *out,
		    struct appl_err *err);

/* Where `make install` puts the cell image, relative to the installed
 * binary: PREFIX/bin/appliance has its layout in PREFIX/share/appliance/image
 * and the layout's digest in PREFIX/share/appliance/image.digest. */
#define IMAGE_INSTALLED_LAYOUT "../share/appliance/image"
#define IMAGE_INSTALLED_DIGEST "../share/appliance/image.digest"

/* The installed image of the running binary (/proc/self/exe): its layout's
 * canonical path into layout (PATH_MAX bytes) and the digest its digest
 * file names into digest, the layout checked against it
 * (image_layout_check_all). -ENOENT when this binary has no installed image
 * beside it. */
int image_installed_find(char *layout, char digest[IMAGE_DIGEST_STR], struct appl_err *err);

/* The default cache directory for this user: /var/cache/appliance/images as
 * root, else $XDG_CACHE_HOME/appliance/images or ~/.cache/appliance/images. */
int image_cache_default(char *out, size_t len, struct appl_err *err);

#endif
