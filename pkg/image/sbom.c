/* sbom.c: the SBOM beside an image layout (see image.h, image_sbom_read). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "image/image.h"
#include "json/json.h"

/* Whether package pkg's checksums hold SHA256 hex. */
static bool checksum_is(const json_t *pkg, const char *hex)
{
	const json_t *sums = json_object_get(pkg, "checksums"), *s;
	size_t i;

	json_array_foreach(sums, i, s) {
		const char *alg = json_string_value(json_object_get(s, "algorithm"));
		const char *val = json_string_value(json_object_get(s, "checksumValue"));

		if (alg && val && strcmp(alg, "SHA256") == 0 && strcmp(val, hex) == 0)
			return true;
	}
	return false;
}

/* Whether package pkg is a Debian package: a purl of type deb. */
static bool is_deb(const json_t *pkg)
{
	const json_t *refs = json_object_get(pkg, "externalRefs"), *r;
	size_t i;

	json_array_foreach(refs, i, r) {
		const char *type = json_string_value(json_object_get(r, "referenceType"));
		const char *loc = json_string_value(json_object_get(r, "referenceLocator"));

		if (type && loc && strcmp(type, "purl") == 0 && strncmp(loc, "pkg:deb/", 8) == 0)
			return true;
	}
	return false;
}

int image_sbom_read(const char *layout_dir, const char *digest, struct image_sbom *out,
		    struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1], *buf = NULL;
	size_t len = 0, dlen = strlen(layout_dir), i;
	const json_t *pkgs, *pkg;
	bool described = false;
	json_t *root;
	int rc;

	memset(out, 0, sizeof(*out));
	while (dlen > 1 && layout_dir[dlen - 1] == '/')
		dlen--;
	if (snprintf(out->path, sizeof(out->path), "%.*s%s", (int)dlen, layout_dir,
		     IMAGE_SBOM_SUFFIX) >= (int)sizeof(out->path))
		return appl_err_set(err, -ENAMETOOLONG, "%s%s: path too long", layout_dir,
				    IMAGE_SBOM_SUFFIX);
	if (image_digest_parse(digest, hex, err) < 0)
		return err->code;
	if ((rc = appl_file_read(out->path, APPL_IMAGE_SBOM_MAX, &buf, &len, err)) < 0)
		return rc;
	root = appl_json_load(buf, len, APPL_IMAGE_SBOM_MAX, APPL_JSON_DEPTH_MAX, out->path, err);
	free(buf);
	if (!root)
		return err->code ? err->code : -EINVAL;
	if (!json_is_object(root) || !json_is_string(json_object_get(root, "spdxVersion")) ||
	    strncmp(json_string_value(json_object_get(root, "spdxVersion")), "SPDX-2.", 7) != 0 ||
	    !json_is_array(pkgs = json_object_get(root, "packages"))) {
		json_decref(root);
		return appl_err_set(err, -EINVAL,
				    "%s: not an SPDX 2 JSON document with a packages array",
				    out->path);
	}
	snprintf(out->version, sizeof(out->version), "%s",
		 json_string_value(json_object_get(root, "spdxVersion")));
	json_array_foreach(pkgs, i, pkg) {
		if (!json_is_object(pkg))
			continue;
		described |= checksum_is(pkg, hex);
		out->packages += is_deb(pkg);
	}
	json_decref(root);
	if (!described)
		return appl_err_set(err, -ESTALE,
				    "%s describes another image: no package of it has the "
				    "checksum sha256:%s",
				    out->path, hex);
	return 0;
}
