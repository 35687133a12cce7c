/* manifest.c: parsing of the OCI manifest and config blobs (pure). */
#include "image/image.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "json/json.h"

#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG   "application/vnd.oci.image.config.v1+json"
#define MT_INDEX    "application/vnd.oci.image.index.v1+json"

static const struct {
	const char *media_type;
	enum image_layer_kind kind;
} layer_types[] = {
	{"application/vnd.oci.image.layer.v1.tar", IMAGE_LAYER_TAR},
	{"application/vnd.oci.image.layer.v1.tar+gzip", IMAGE_LAYER_TAR_GZIP},
};

int image_digest_parse(const char *s, char *hex, struct appl_err *err)
{
	static const char prefix[] = "sha256:";

	if (!s || strncmp(s, prefix, sizeof(prefix) - 1) != 0)
		return appl_err_set(err, -EINVAL, "digest must be sha256:<64 hex digits>");
	s += sizeof(prefix) - 1;
	for (size_t i = 0; i < IMAGE_DIGEST_HEX; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return appl_err_set(err, -EINVAL,
					    "digest must be sha256:<64 lower-case hex digits>");
	}
	if (s[IMAGE_DIGEST_HEX] != '\0')
		return appl_err_set(err, -EINVAL, "digest must be sha256:<64 hex digits>");
	memcpy(hex, s, IMAGE_DIGEST_HEX);
	hex[IMAGE_DIGEST_HEX] = '\0';
	return 0;
}

/* One descriptor: {mediaType, digest, size[, annotations]}. `urls` is not
 * accepted: every blob must come from the layout itself. */
static int desc_parse(const json_t *d, const char *path, uint64_t max_size, struct image_desc *out,
		      const char **media_type, struct appl_err *err)
{
	static const char *const keys[] = {"mediaType", "digest", "size", "annotations", NULL};
	const json_t *mt, *dg, *sz, *an;
	json_int_t size;

	if (!json_is_object(d))
		return appl_err_set(err, -EINVAL, "%s: must be an object", path);
	int rc = appl_json_keys_check(d, keys, path, err);

	if (rc < 0)
		return rc;
	mt = json_object_get(d, "mediaType");
	dg = json_object_get(d, "digest");
	sz = json_object_get(d, "size");
	an = json_object_get(d, "annotations");
	if (!json_is_string(mt))
		return appl_err_set(err, -EINVAL, "%s.mediaType: must be a string", path);
	if (!json_is_string(dg) || image_digest_parse(json_string_value(dg), out->hex, err) < 0)
		return appl_err_set(err, -EINVAL, "%s.digest: must be sha256:<64 hex digits>",
				    path);
	if (!json_is_integer(sz))
		return appl_err_set(err, -EINVAL, "%s.size: must be an integer", path);
	size = json_integer_value(sz);
	if (size < 0 || (uint64_t)size > max_size)
		return appl_err_set(err, -EFBIG, "%s.size: must be between 0 and %llu", path,
				    (unsigned long long)max_size);
	if (an && !json_is_object(an))
		return appl_err_set(err, -EINVAL, "%s.annotations: must be an object", path);
	out->size = (uint64_t)size;
	*media_type = json_string_value(mt);
	return 0;
}

static int layer_kind(const char *media_type, enum image_layer_kind *kind)
{
	for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++) {
		if (strcmp(media_type, layer_types[i].media_type) == 0) {
			*kind = layer_types[i].kind;
			return 0;
		}
	}
	return -ENOTSUP;
}

static int layers_parse(const json_t *layers, struct image_manifest *m, struct appl_err *err)
{
	size_t i;
	const json_t *d;

	if (!json_is_array(layers))
		return appl_err_set(err, -EINVAL, "manifest.layers: must be an array");
	if (json_array_size(layers) == 0 || json_array_size(layers) > APPL_IMAGE_LAYERS_MAX)
		return appl_err_set(err, -EINVAL, "manifest.layers: must hold 1 to %d layers",
				    APPL_IMAGE_LAYERS_MAX);
	json_array_foreach(layers, i, d) {
		char path[64];
		const char *mt;

		snprintf(path, sizeof(path), "manifest.layers[%zu]", i);
		int rc = desc_parse(d, path, APPL_IMAGE_LAYER_MAX, &m->layers[i], &mt, err);

		if (rc < 0)
			return rc;
		if (layer_kind(mt, &m->layers[i].kind) < 0)
			return appl_err_set(err, -ENOTSUP, "%s.mediaType: unsupported layer type",
					    path);
	}
	m->nlayers = json_array_size(layers);
	return 0;
}

static int manifest_check(const json_t *root, struct image_manifest *m, struct appl_err *err)
{
	static const char *const keys[] = {"schemaVersion", "mediaType",   "config",
					   "layers",	    "annotations", NULL};
	const json_t *v;
	const char *mt;

	if (!json_is_object(root))
		return appl_err_set(err, -EINVAL, "manifest: must be a JSON object");
	int rc = appl_json_keys_check(root, keys, "manifest", err);

	if (rc < 0)
		return rc;
	v = json_object_get(root, "schemaVersion");
	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return appl_err_set(err, -EINVAL, "manifest.schemaVersion: must be 2");
	v = json_object_get(root, "mediaType");
	if (v && !(json_is_string(v) && strcmp(json_string_value(v), MT_MANIFEST) == 0))
		return appl_err_set(err, -EINVAL, "manifest.mediaType: must be %s", MT_MANIFEST);
	v = json_object_get(root, "annotations");
	if (v && !json_is_object(v))
		return appl_err_set(err, -EINVAL, "manifest.annotations: must be an object");
	v = json_object_get(root, "config");
	if (!v)
		return appl_err_set(err, -EINVAL, "manifest.config: missing");
	rc = desc_parse(v, "manifest.config", APPL_IMAGE_CONFIG_MAX, &m->config, &mt, err);
	if (rc < 0)
		return rc;
	if (strcmp(mt, MT_CONFIG) != 0)
		return appl_err_set(err, -EINVAL, "manifest.config.mediaType: must be %s",
				    MT_CONFIG);
	v = json_object_get(root, "layers");
	if (!v)
		return appl_err_set(err, -EINVAL, "manifest.layers: missing");
	return layers_parse(v, m, err);
}

int image_manifest_parse(const char *buf, size_t len, struct image_manifest *m,
			 struct appl_err *err)
{
	json_t *root;
	int rc;

	memset(m, 0, sizeof(*m));
	root = appl_json_load(buf, len, APPL_IMAGE_MANIFEST_MAX, APPL_JSON_DEPTH_MAX, "manifest",
			      err);
	if (!root)
		return err ? err->code : -EINVAL;
	rc = manifest_check(root, m, err);
	json_decref(root);
	if (rc < 0)
		memset(m, 0, sizeof(*m));
	return rc;
}

/* index.json: {schemaVersion 2, mediaType?, manifests: [one manifest
 * descriptor], annotations?}. A layout of several images would leave the
 * choice to us: refused. */
static int index_check(const json_t *root, struct image_desc *out, struct appl_err *err)
{
	static const char *const keys[] = {"schemaVersion", "mediaType", "manifests", "annotations",
					   NULL};
	const json_t *v;
	const char *mt;
	int rc;

	if (!json_is_object(root))
		return appl_err_set(err, -EINVAL, "index.json: must be a JSON object");
	if ((rc = appl_json_keys_check(root, keys, "index.json", err)) < 0)
		return rc;
	v = json_object_get(root, "schemaVersion");
	if (!json_is_integer(v) || json_integer_value(v) != 2)
		return appl_err_set(err, -EINVAL, "index.json: schemaVersion must be 2");
	v = json_object_get(root, "mediaType");
	if (v && !(json_is_string(v) && strcmp(json_string_value(v), MT_INDEX) == 0))
		return appl_err_set(err, -EINVAL, "index.json: mediaType must be %s", MT_INDEX);
	v = json_object_get(root, "annotations");
	if (v && !json_is_object(v))
		return appl_err_set(err, -EINVAL, "index.json: annotations must be an object");
	v = json_object_get(root, "manifests");
	if (!json_is_array(v) || json_array_size(v) != 1)
		return appl_err_set(err, -EINVAL,
				    "index.json: manifests must name exactly one image, not %zu",
				    json_is_array(v) ? json_array_size(v) : 0);
	rc = desc_parse(json_array_get(v, 0), "index.json: manifests[0]", APPL_IMAGE_MANIFEST_MAX,
			out, &mt, err);
	if (rc == 0 && strcmp(mt, MT_MANIFEST) != 0)
		return appl_err_set(err, -EINVAL, "index.json: manifests[0].mediaType must be %s",
				    MT_MANIFEST);
	return rc;
}

int image_index_parse(const char *buf, size_t len, struct image_desc *manifest,
		      struct appl_err *err)
{
	json_t *root;
	int rc;

	memset(manifest, 0, sizeof(*manifest));
	root = appl_json_load(buf, len, APPL_IMAGE_INDEX_MAX, APPL_JSON_DEPTH_MAX, "index.json",
			      err);
	if (!root)
		return err->code;
	rc = index_check(root, manifest, err);
	json_decref(root);
	if (rc < 0)
		memset(manifest, 0, sizeof(*manifest));
	return rc;
}

static int string_is(const json_t *obj, const char *key, const char *want)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

static int config_fields_check(const json_t *root, size_t nlayers, struct appl_err *err)
{
	const json_t *rootfs, *ids, *id;
	size_t i;

	if (!json_is_object(root))
		return appl_err_set(err, -EINVAL, "config: must be a JSON object");
	if (!string_is(root, "os", "linux"))
		return appl_err_set(err, -EINVAL, "config.os: must be \"linux\"");
	if (!string_is(root, "architecture", "amd64"))
		return appl_err_set(err, -EINVAL, "config.architecture: must be \"amd64\"");
	rootfs = json_object_get(root, "rootfs");
	if (!json_is_object(rootfs) || !string_is(rootfs, "type", "layers"))
		return appl_err_set(err, -EINVAL, "config.rootfs.type: must be \"layers\"");
	ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(ids) || json_array_size(ids) != nlayers)
		return appl_err_set(err, -EINVAL,
				    "config.rootfs.diff_ids: must hold one digest per layer");
	json_array_foreach(ids, i, id) {
		char hex[IMAGE_DIGEST_HEX + 1];
		if (!json_is_string(id) || image_digest_parse(json_string_value(id), hex, err) < 0)
			return appl_err_set(err, -EINVAL,
					    "config.rootfs.diff_ids[%zu]: must be a sha256 digest",
					    i);
	}
	return 0;
}

/* config.config.Labels[IMAGE_LABEL_MEMORY_MIN]: absent, or the decimal
 * MiB an image says a sandbox needs, within what limits.memory_mb takes. */
static int memory_label_read(const json_t *root, unsigned *mb, struct appl_err *err)
{
	const json_t *cfg = json_object_get(root, "config");
	const json_t *labels = json_is_object(cfg) ? json_object_get(cfg, "Labels") : NULL;
	const json_t *v =
		json_is_object(labels) ? json_object_get(labels, IMAGE_LABEL_MEMORY_MIN) : NULL;
	const char *s = json_string_value(v);
	unsigned long n = 0;

	*mb = 0;
	if (!v)
		return 0;
	for (size_t i = 0; s && s[i] && n <= APPL_MEMORY_MB_CEIL; i++)
		n = s[i] >= '0' && s[i] <= '9' ? n * 10 + (unsigned long)(s[i] - '0') : ULONG_MAX;
	if (!s || !s[0] || n < APPL_MEMORY_MB_MIN || n > APPL_MEMORY_MB_CEIL)
		return appl_err_set(err, -EINVAL,
				    "config.config.Labels.\"%s\": must be a whole number of MiB "
				    "from %d to %d, as a string",
				    IMAGE_LABEL_MEMORY_MIN, APPL_MEMORY_MB_MIN,
				    APPL_MEMORY_MB_CEIL);
	*mb = (unsigned)n;
	return 0;
}

int image_config_read(const char *buf, size_t len, size_t nlayers, struct image_config *out,
		      struct appl_err *err)
{
	struct image_config info = {0};
	json_t *root;
	int rc;

	root = appl_json_load(buf, len, APPL_IMAGE_CONFIG_MAX, APPL_JSON_DEPTH_MAX, "config", err);
	if (!root)
		return err ? err->code : -EINVAL;
	rc = config_fields_check(root, nlayers, err);
	if (rc == 0)
		rc = memory_label_read(root, &info.memory_mb_min, err);
	json_decref(root);
	if (rc == 0 && out)
		*out = info;
	return rc;
}

int image_config_check(const char *buf, size_t len, size_t nlayers, struct appl_err *err)
{
	return image_config_read(buf, len, nlayers, NULL, err);
}

size_t image_index_digests(const char *buf, size_t len, char (*out)[IMAGE_DIGEST_STR], size_t max)
{
	const json_t *manifests, *d;
	json_t *root;
	size_t i, n = 0;

	root = appl_json_load(buf, len, APPL_IMAGE_INDEX_MAX, APPL_JSON_DEPTH_MAX, "index.json",
			      NULL);
	if (!root)
		return 0;
	manifests = json_is_object(root) ? json_object_get(root, "manifests") : NULL;
	json_array_foreach(manifests, i, d) {
		const json_t *dg = json_is_object(d) ? json_object_get(d, "digest") : NULL;
		char hex[IMAGE_DIGEST_HEX + 1];

		if (!json_is_string(dg) || image_digest_parse(json_string_value(dg), hex, NULL) < 0)
			continue;
		if (n < max)
			snprintf(out[n], IMAGE_DIGEST_STR, "sha256:%s", hex);
		n++;
	}
	json_decref(root);
	return n;
}
