/* internal.h: shared between the files of pkg/image only. */
#ifndef APPL_IMAGE_INTERNAL_H
#define APPL_IMAGE_INTERNAL_H

#include "image/image.h"

enum image_name_kind {
	IMAGE_NAME_NONE,    /* not seen */
	IMAGE_NAME_OTHER,   /* directory */
	IMAGE_NAME_REGULAR, /* regular file (or hardlink to one) */
	IMAGE_NAME_SYMLINK,
};

/* Record what name now holds. Returns -1 when out of memory. */
int image_names_set(struct image_names *n, const char *name, enum image_name_kind kind);

/* What name was last recorded as. */
enum image_name_kind image_names_kind(const struct image_names *n, const char *name);

#endif
