/* names.c: what each name unpacked so far holds, so a hardlink can be checked
 * to point at a regular file of the image and a write never goes through a
 * symlink. Open addressing. */
#include "image/internal.h"

#include <stdlib.h>
#include <string.h>

struct name_slot {
	char *name; /* NULL: empty */
	enum image_name_kind kind;
};

struct image_names {
	size_t cap; /* power of two */
	size_t used;
	struct name_slot *slots;
};

struct image_names *image_names_new(void)
{
	struct image_names *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->cap = 1024;
	n->slots = calloc(n->cap, sizeof(*n->slots));
	if (!n->slots) {
		free(n);
		return NULL;
	}
	return n;
}

void image_names_free(struct image_names *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->cap; i++)
		free(n->slots[i].name);
	free(n->slots);
	free(n);
}

static size_t name_hash(const char *s)
{
	size_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static struct name_slot *slot_find(const struct image_names *n, const char *name)
{
	size_t i = name_hash(name) & (n->cap - 1);

	while (n->slots[i].name && strcmp(n->slots[i].name, name) != 0)
		i = (i + 1) & (n->cap - 1);
	return &n->slots[i];
}

static int names_grow(struct image_names *n)
{
	struct image_names bigger = {.cap = n->cap * 2, .used = n->used};

	bigger.slots = calloc(bigger.cap, sizeof(*bigger.slots));
	if (!bigger.slots)
		return -1;
	for (size_t i = 0; i < n->cap; i++)
		if (n->slots[i].name)
			*slot_find(&bigger, n->slots[i].name) = n->slots[i];
	free(n->slots);
	*n = bigger;
	return 0;
}

int image_names_set(struct image_names *n, const char *name, enum image_name_kind kind)
{
	struct name_slot *s;

	if (n->used * 2 >= n->cap && names_grow(n) < 0)
		return -1;
	s = slot_find(n, name);
	if (!s->name) {
		s->name = strdup(name);
		if (!s->name)
			return -1;
		n->used++;
	}
	s->kind = kind;
	return 0;
}

enum image_name_kind image_names_kind(const struct image_names *n, const char *name)
{
	const struct name_slot *s = slot_find(n, name);

	return s->name ? s->kind : IMAGE_NAME_NONE;
}
