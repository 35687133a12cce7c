/* verify_seen.c: the files the logs of one directory have read
 * (audit_verify_dir), by device and inode, so that no file is read twice:
 * not a rotated file two logs' `previous` both name, nor one file under
 * two names (a hard link). An open-addressing table, grown at half full,
 * of at most AUDIT_VERIFY_DIR_FILES_MAX files. */
#include "audit/verify_int.h"

#include <errno.h>
#include <stdlib.h>

struct seen_slot {
	uint64_t dev, ino;
	bool used;
};

struct audit_seen {
	struct seen_slot *slots;
	size_t cap, n; /* cap a power of two */
};

struct audit_seen *audit_seen_new(void)
{
	return calloc(1, sizeof(struct audit_seen));
}

void audit_seen_free(struct audit_seen *s)
{
	if (!s)
		return;
	free(s->slots);
	free(s);
}

/* splitmix64's finaliser: inode numbers are dense, the table's index is
 * their low bits. */
static uint64_t seen_mix(uint64_t dev, uint64_t ino)
{
	uint64_t x = ino ^ (dev * 0x9e3779b97f4a7c15u);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

static struct seen_slot *seen_slot(struct seen_slot *slots, size_t cap, uint64_t dev, uint64_t ino)
{
	size_t i = (size_t)seen_mix(dev, ino) & (cap - 1);

	while (slots[i].used && (slots[i].dev != dev || slots[i].ino != ino))
		i = (i + 1) & (cap - 1);
	return &slots[i];
}

static int seen_grow(struct audit_seen *s)
{
	size_t cap = s->cap ? 2 * s->cap : 64;
	struct seen_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i].used)
			*seen_slot(slots, cap, s->slots[i].dev, s->slots[i].ino) = s->slots[i];
	free(s->slots);
	s->slots = slots;
	s->cap = cap;
	return 0;
}

bool audit_seen_has(const struct audit_seen *s, const struct stat *st)
{
	return s->cap &&
	       seen_slot(s->slots, s->cap, (uint64_t)st->st_dev, (uint64_t)st->st_ino)->used;
}

int audit_seen_add(struct audit_seen *s, const struct stat *st)
{
	struct seen_slot *slot;
	int rc;

	if (audit_seen_has(s, st))
		return 1;
	if (s->n == AUDIT_VERIFY_DIR_FILES_MAX)
		return -E2BIG;
	if (2 * (s->n + 1) > s->cap && (rc = seen_grow(s)) < 0)
		return rc;
	slot = seen_slot(s->slots, s->cap, (uint64_t)st->st_dev, (uint64_t)st->st_ino);
	slot->dev = (uint64_t)st->st_dev;
	slot->ino = (uint64_t)st->st_ino;
	slot->used = true;
	s->n++;
	return 0;
}

int audit_seen_claim(struct verifier *v, int fd)
{
	struct stat st;
	int rc;

	if (!v->o->seen)
		return 0;
	if (fstat(fd, &st) < 0)
		return appl_err_errno(v->err, -errno, errno, "%s%s", v->dir, v->names[0]);
	rc = audit_seen_add(v->o->seen, &st);
	if (rc == -E2BIG)
		return appl_err_set(v->err, rc, "the logs of the directory read more than %d files",
				    AUDIT_VERIFY_DIR_FILES_MAX);
	if (rc < 0)
		return appl_err_set(v->err, rc, "out of memory");
	return rc;
}
