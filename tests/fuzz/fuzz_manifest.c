/* fuzz_manifest.c: the OCI manifest, config and index parsers on arbitrary
 * bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image_manifest m;
	struct image_desc d;
	struct appl_err err = {0};
	char hex[IMAGE_DIGEST_HEX + 1], held[2][IMAGE_DIGEST_STR];

	if (image_manifest_parse((const char *)data, size, &m, &err) == 0) {
		/* a manifest that parses stays within the caps */
		if (m.nlayers == 0 || m.nlayers > APPL_IMAGE_LAYERS_MAX ||
		    m.config.size > APPL_IMAGE_CONFIG_MAX)
			__builtin_trap();
	}
	struct image_config info;

	/* a label that is read lies within what limits.memory_mb takes */
	if (image_config_read((const char *)data, size, 1, &info, &err) == 0 &&
	    info.memory_mb_min != 0 &&
	    (info.memory_mb_min < APPL_MEMORY_MB_MIN || info.memory_mb_min > APPL_MEMORY_MB_CEIL))
		__builtin_trap();
	/* every digest copied out is one image_digest_parse accepts */
	size_t n = image_index_digests((const char *)data, size, held, 2);
	for (size_t i = 0; i < n && i < 2; i++)
		if (image_digest_parse(held[i], hex, &err) < 0)
			__builtin_trap();
	/* init's strict reading: one manifest, whose digest parses */
	if (image_index_parse((const char *)data, size, &d, &err) == 0) {
		char dg[IMAGE_DIGEST_STR + 8];

		snprintf(dg, sizeof(dg), "sha256:%s", d.hex);
		if (image_digest_parse(dg, hex, &err) < 0 || d.size > APPL_IMAGE_MANIFEST_MAX)
			__builtin_trap();
	}
	if (size < 80) {
		char s[80];
		for (size_t i = 0; i < size; i++)
			s[i] = (char)data[i];
		s[size] = '\0';
		image_digest_parse(s, hex, &err);
	}
	return 0;
}
