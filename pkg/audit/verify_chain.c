/* verify_chain.c: the checker's first pass: from the file given back
 * through each log.open's `previous`, reading only each file's first
 * line. A name of a previous file is a plain name in the same directory,
 * opened without following symlinks, and file indexes fall by one at each
 * step, so no loop can be followed. */
#include "audit/verify_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int audit_names_push(struct verifier *v, const char *name)
{
	if (v->nfiles == v->cap) {
		size_t cap = v->cap ? 2 * v->cap : 16;
		char **p = realloc(v->names, cap * sizeof(*p));

		if (!p)
			return appl_err_set(v->err, -ENOMEM, "out of memory");
		v->names = p;
		v->cap = cap;
	}
	if (!(v->names[v->nfiles] = strdup(name)))
		return appl_err_set(v->err, -ENOMEM, "out of memory");
	v->nfiles++;
	return 0;
}

/* Open name in the log's directory: never through a symlink, never a
 * fifo or a device (a read that never ends). 0, 1 when it cannot be (why
 * in v->link_error: a problem with the log), or < 0. */
int audit_prev_open(struct verifier *v, const char *name, int *fd)
{
	char shown[AUDIT_SHOWN_MAX];
	struct stat st;
	int e;

	*fd = openat(v->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (*fd < 0) {
		e = errno;
		if (e != ENOENT && e != ELOOP && e != ENOTDIR && e != ENXIO && e != EISDIR)
			return appl_err_errno(v->err, -e, e, "%s%s", v->dir, name);
		snprintf(v->link_error, sizeof(v->link_error),
			 "the previous file %s cannot be opened: %s", audit_escape(name, shown),
			 e == ELOOP ? "it is a symlink" : strerror(e));
		return 1;
	}
	if (fstat(*fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(*fd);
		*fd = -1;
		snprintf(v->link_error, sizeof(v->link_error),
			 "the previous file %s is not a regular file", audit_escape(name, shown));
		return 1;
	}
	return 0;
}

/* The first line of the file at fd, when it is a log.open line: 1 with
 * *file, *has_prev and name (the previous file's) filled; 0 when it is
 * not one (the second pass says why); or < 0. */
static int link_read(struct verifier *v, int fd, uint64_t limit, uint64_t *file, bool *has_prev,
		     char name[NAME_MAX + 1])
{
	struct rec *c = &v->recs[0];
	struct open_info oi;
	char why[WHY_MAX];
	int rc;

	if ((rc = audit_reader_init(&v->r, fd, limit)) < 0 || (rc = audit_reader_next(&v->r)) < 0)
		return appl_err_errno(v->err, rc, -rc, "reading %s%s", v->dir,
				      v->names[v->nfiles - 1]);
	if (rc != AUDIT_LINE_OK || audit_rec_parse(c, &v->r) < 0)
		return 0;
	rc = strcmp(c->ev, "log.open") == 0 && audit_open_info_parse(c->obj, &oi, why) == 0;
	if (rc) {
		*file = oi.file;
		*has_prev = oi.has_prev;
		if (oi.has_prev)
			memcpy(name, oi.name, strlen(oi.name) + 1);
	}
	audit_rec_clear(c);
	return rc;
}

/* In a directory's check, each file is read by one log only: a previous
 * file a log before this one read (the two name the same file, or it is
 * a hard link of one of that log's) ends this chain, and the second pass
 * says why. 0, 1 (fd closed), or < 0 (fd closed). Only the first pass
 * claims: the second opens the same files again. */
static int prev_claim(struct verifier *v, int fd, const char *name)
{
	char shown[AUDIT_SHOWN_MAX];
	int rc = audit_seen_claim(v, fd);

	if (rc == 0)
		return 0;
	close(fd);
	if (rc == 1)
		snprintf(v->link_error, sizeof(v->link_error),
			 "the previous file %s was read already, by a log before this one in "
			 "its directory",
			 audit_escape(name, shown));
	return rc;
}

/* The first pass: from the newest file back through `previous` while
 * each step is sound; where it is not, the second pass reports it. File
 * indexes fall by one at each step, so no loop can be followed. */
int audit_chain_discover(struct verifier *v)
{
	char name[NAME_MAX + 1], shown[AUDIT_SHOWN_MAX];
	uint64_t file = 0, expect = 0;
	bool has_prev = false;
	int fd = v->newest_fd, rc;

	for (;;) {
		rc = link_read(v, fd, fd == v->newest_fd ? v->newest_size : UINT64_MAX, &file,
			       &has_prev, name);
		if (fd != v->newest_fd)
			close(fd);
		if (rc <= 0)
			return rc;
		if (expect && file != expect) {
			snprintf(v->link_error, sizeof(v->link_error),
				 "the previous file %s is file %" PRIu64 ", not file %" PRIu64,
				 audit_escape(v->names[v->nfiles - 1], shown), file, expect);
			free(v->names[--v->nfiles]);
			return 0;
		}
		if (!expect)
			v->newest_index = file;
		if (!has_prev || file == 1)
			return 0;
		if (file > AUDIT_VERIFY_FILES_MAX) {
			snprintf(v->link_error, sizeof(v->link_error),
				 "file %" PRIu64 ": more than %d files in one chain, not followed",
				 file, AUDIT_VERIFY_FILES_MAX);
			return 0;
		}
		if ((rc = audit_prev_open(v, name, &fd)) != 0)
			return rc < 0 ? rc : 0;
		if ((rc = prev_claim(v, fd, name)) != 0)
			return rc < 0 ? rc : 0;
		if ((rc = audit_names_push(v, name)) < 0) {
			close(fd);
			return rc;
		}
		expect = file - 1;
	}
}
