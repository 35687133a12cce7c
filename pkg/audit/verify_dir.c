/* verify_dir.c: `appliance audit verify DIR`: every log of a directory an
 * operator collected from several appliances (docs/audit.md,
 * "Verification"), each checked as audit_verify checks a file given
 * alone, then whatever else the directory holds, then one line that sums
 * it up.
 *
 * The directory is as untrusted as the logs in it. Its entries are never
 * followed through a symlink (one would check a file outside it, or one
 * log against another's head), at most AUDIT_VERIFY_DIR_LOGS_MAX logs are
 * taken, and no file is read by two logs (verify_seen.c). Nothing in it is
 * passed over unseen: a rotated file that no log reaches, or a head with
 * no log beside it, is what is left when a log's newest file is missing,
 * and is a problem. */
#define _GNU_SOURCE
#include "audit/verify_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum entry_kind { ENTRY_LOG, ENTRY_ROTATED, ENTRY_HEAD, ENTRY_SEAL };

/* Why an entry is a problem, said by its name. */
enum why {
	WHY_NONE,      /* a regular file: none */
	WHY_GONE,      /* removed meanwhile */
	WHY_LINK,      /* a symlink, never followed */
	WHY_DIR,       /* a directory: not recursive */
	WHY_SPECIAL,   /* a fifo, socket or device: a read that may never end */
	WHY_UNSTATED,  /* fstatat failed */
	WHY_UNREACHED, /* a rotated file no log's previous led to */
	WHY_HEAD,      /* NAME.head with no log NAME */
	WHY_SEAL,      /* NAME.seal with no log NAME */
};

static const char *const why_text[] = {
	[WHY_GONE] = "removed while the directory was checked",
	[WHY_LINK] = "a symlink, not followed",
	[WHY_DIR] = "a directory, not read (only the directory given is)",
	[WHY_SPECIAL] = "not a regular file",
	[WHY_UNSTATED] = "cannot be looked at",
	[WHY_UNREACHED] = "a rotated file that no log of this directory reaches through previous",
	[WHY_HEAD] = "head",
	[WHY_SEAL] = "sealing state",
};

struct stray {
	char *name;
	enum why why;
};

struct dir_check {
	const struct audit_verify_opts *o;
	struct appl_err *err;
	FILE *out;
	const char *dir;       /* as given */
	char prefix[PATH_MAX]; /* dir, with a '/' after it unless it ends in one */
	DIR *d;
	struct audit_seen *seen;
	char **logs; /* the logs' names, sorted */
	size_t nlogs;
	struct stray *strays; /* the first AUDIT_VERIFY_DIR_LOGS_MAX, sorted */
	size_t nstrays, strays_more;
	size_t intact, problems;
};

static bool name_ends(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);

	return n >= k && memcmp(name + n - k, suffix, k) == 0;
}

/* What an entry's name makes it: NAME.K (a dot and digits) a rotated
 * file, which its log reaches through previous; NAME.head and NAME.seal
 * the copies of log NAME's head and sealing state; anything else a log's
 * newest file. */
static enum entry_kind entry_kind(const char *name)
{
	size_t len = strlen(name), d = len;

	while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
		d--;
	if (d < len && d > 0 && name[d - 1] == '.')
		return ENTRY_ROTATED;
	if (name_ends(name, ".head"))
		return ENTRY_HEAD;
	if (name_ends(name, ".seal"))
		return ENTRY_SEAL;
	return ENTRY_LOG;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int stray_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stray *)a)->name, ((const struct stray *)b)->name);
}

/* One line "DIR/NAME: why" (the name escaped: it is the directory's). */
static void say(struct dir_check *c, const char *name, const char *why)
{
	char p[AUDIT_SHOWN_MAX], n[AUDIT_SHOWN_MAX];

	fprintf(c->out, "%s%s: %s\n", audit_escape(c->prefix, p), audit_escape(name, n), why);
}

/* ---- the logs ----------------------------------------------------------------- */

/* Every log's name, sorted: 0; 1 when there are too many (said: none is
 * checked, which no reader can miss); or < 0. */
static int logs_list(struct dir_check *c)
{
	char p[AUDIT_SHOWN_MAX];
	struct dirent *e;
	char **logs;

	if (!(c->logs = calloc(AUDIT_VERIFY_DIR_LOGS_MAX, sizeof(*c->logs))))
		return appl_err_set(c->err, -ENOMEM, "out of memory");
	logs = c->logs;
	while ((errno = 0, e = readdir(c->d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    entry_kind(e->d_name) != ENTRY_LOG)
			continue;
		if (c->nlogs == AUDIT_VERIFY_DIR_LOGS_MAX) {
			fprintf(c->out,
				"%s: more than %d logs in one directory: none checked (divide "
				"them among directories)\n",
				audit_escape(c->dir, p), AUDIT_VERIFY_DIR_LOGS_MAX);
			return 1;
		}
		if (!(logs[c->nlogs] = strdup(e->d_name)))
			return appl_err_set(c->err, -ENOMEM, "out of memory");
		c->nlogs++;
	}
	if (errno)
		return appl_err_errno(c->err, -errno, errno, "reading the directory %s", c->dir);
	qsort(logs, c->nlogs, sizeof(*logs), name_cmp);
	return 0;
}

/* An entry's type, not following a symlink: WHY_NONE for a regular file
 * (st filled), else why it is a problem. */
static enum why entry_type(struct dir_check *c, const char *name, struct stat *st)
{
	if (fstatat(dirfd(c->d), name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT || errno == ENAMETOOLONG ? WHY_GONE : WHY_UNSTATED;
	if (S_ISLNK(st->st_mode))
		return WHY_LINK;
	if (S_ISDIR(st->st_mode))
		return WHY_DIR;
	return S_ISREG(st->st_mode) ? WHY_NONE : WHY_SPECIAL;
}

/* DIR/NAME.head or DIR/NAME.seal into path when the directory has it:
 * 1; 0 when it has none; -1 when it is there and no regular file (said). */
static int companion(struct dir_check *c, const char *name, const char *suffix, char path[PATH_MAX])
{
	char entry[NAME_MAX + 1];
	struct stat st;
	enum why why;

	if ((size_t)snprintf(entry, sizeof(entry), "%s%s", name, suffix) >= sizeof(entry))
		return 0; /* longer than a name can be: no such entry */
	if ((size_t)snprintf(path, PATH_MAX, "%s%s", c->prefix, entry) >= PATH_MAX)
		return 0;
	why = entry_type(c, entry, &st);
	if (why == WHY_NONE || why == WHY_GONE)
		return why == WHY_NONE;
	say(c, entry, why_text[why]);
	return -1;
}

/* A log that could not be checked at all: one line, naming the file. */
static void unreadable(struct dir_check *c, const char *name, const struct appl_err *e)
{
	if (strncmp(e->msg, c->prefix, strlen(c->prefix)) == 0)
		fprintf(c->out, "%s\n", e->msg);
	else
		say(c, name, e->msg);
}

/* Log name, as audit_verify checks a file given alone, with its copies of
 * the head and the sealing state when the directory has them. 0, 1 (a
 * problem, said), or < 0 (the directory's check cannot go on). */
static int log_check(struct dir_check *c, const char *name)
{
	struct audit_verify_opts o = *c->o;
	char file[PATH_MAX], head[PATH_MAX], seal[PATH_MAX];
	struct appl_err e = {0};
	struct stat st;
	enum why why;
	int h, s, rc;

	if ((why = entry_type(c, name, &st)) != WHY_NONE) {
		say(c, name, why_text[why]);
		return 1;
	}
	if ((h = companion(c, name, ".head", head)) < 0 ||
	    (s = companion(c, name, ".seal", seal)) < 0)
		return 1;
	if ((size_t)snprintf(file, sizeof(file), "%s%s", c->prefix, name) >= sizeof(file)) {
		say(c, name, "path too long");
		return 1;
	}
	o.head_file = h ? head : NULL;
	o.seal_file = s ? seal : NULL;
	o.in_dir = true;
	o.seen = c->seen;
	rc = audit_verify(file, &o, c->out, &e);
	if (rc == -ENOMEM || rc == -E2BIG)
		*c->err = e;
	else if (rc < 0)
		unreadable(c, name, &e);
	return rc == -ENOMEM || rc == -E2BIG ? rc : rc != 0;
}

/* ---- what else the directory holds -------------------------------------------- */

static bool is_log(const struct dir_check *c, const char *name)
{
	return bsearch(&name, c->logs, c->nlogs, sizeof(*c->logs), name_cmp) != NULL;
}

/* Why entry name (not a log's newest file) is stray, or WHY_NONE. */
static enum why stray_why(struct dir_check *c, const char *name)
{
	enum entry_kind k = entry_kind(name);
	char base[NAME_MAX + 1];
	struct stat st;
	enum why why;

	if (k == ENTRY_HEAD || k == ENTRY_SEAL) {
		/* NAME.head, NAME.seal: NAME is all but the last 5 bytes */
		snprintf(base, sizeof(base), "%.*s", (int)(strlen(name) - 5), name);
		return is_log(c, base) ? WHY_NONE : k == ENTRY_HEAD ? WHY_HEAD : WHY_SEAL;
	}
	why = entry_type(c, name, &st);
	if (why == WHY_GONE)
		return WHY_NONE;
	if (why == WHY_NONE && !audit_seen_has(c->seen, &st))
		return WHY_UNREACHED;
	return why;
}

/* The second look at the directory, once every log is checked (the files
 * they reached are known then). 0 or < 0. */
static int strays_find(struct dir_check *c)
{
	struct dirent *e;
	enum why why;

	if (!(c->strays = calloc(AUDIT_VERIFY_DIR_LOGS_MAX, sizeof(*c->strays))))
		return appl_err_set(c->err, -ENOMEM, "out of memory");
	rewinddir(c->d);
	while ((errno = 0, e = readdir(c->d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    entry_kind(e->d_name) == ENTRY_LOG ||
		    (why = stray_why(c, e->d_name)) == WHY_NONE)
			continue;
		if (c->nstrays == AUDIT_VERIFY_DIR_LOGS_MAX) {
			c->strays_more++;
			continue;
		}
		if (!(c->strays[c->nstrays].name = strdup(e->d_name)))
			return appl_err_set(c->err, -ENOMEM, "out of memory");
		c->strays[c->nstrays++].why = why;
	}
	if (errno)
		return appl_err_errno(c->err, -errno, errno, "reading the directory %s", c->dir);
	qsort(c->strays, c->nstrays, sizeof(*c->strays), stray_cmp);
	return 0;
}

static void strays_say(struct dir_check *c)
{
	char why[NAME_MAX + 128], base[AUDIT_SHOWN_MAX], p[AUDIT_SHOWN_MAX];

	for (size_t i = 0; i < c->nstrays; i++) {
		const struct stray *s = &c->strays[i];

		if (s->why == WHY_HEAD || s->why == WHY_SEAL) {
			snprintf(base, sizeof(base), "%.*s", (int)(strlen(s->name) - 5), s->name);
			snprintf(why, sizeof(why), "a %s with no log %s beside it",
				 why_text[s->why], audit_escape(base, p));
			say(c, s->name, why);
		} else {
			say(c, s->name, why_text[s->why]);
		}
	}
	if (c->strays_more)
		fprintf(c->out, "%s: and %zu more stray files\n", audit_escape(c->dir, p),
			c->strays_more);
}

/* ---- the whole directory ------------------------------------------------------ */

static int dir_open(struct dir_check *c)
{
	size_t n = strlen(c->dir);
	int fd, e;

	if (c->o->head_file || c->o->seal_file)
		return appl_err_set(c->err, -EINVAL,
				    "%s: a directory's logs have their own heads and sealing "
				    "states (NAME.head, NAME.seal): --head and --seal name one "
				    "log's",
				    c->dir);
	if (n == 0 || (size_t)snprintf(c->prefix, sizeof(c->prefix), "%s%s", c->dir,
				       c->dir[n - 1] == '/' ? "" : "/") >= sizeof(c->prefix))
		return appl_err_set(c->err, -ENAMETOOLONG, "%s: not a directory's path", c->dir);
	fd = open(c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(c->d = fdopendir(fd))) {
		e = errno;
		if (fd >= 0)
			close(fd);
		return appl_err_errno(c->err, -e, e, "%s", c->dir);
	}
	if (!(c->seen = audit_seen_new()))
		return appl_err_set(c->err, -ENOMEM, "out of memory");
	return 0;
}

/* Each log in name order, then the strays; 0 or < 0. */
static int dir_walk(struct dir_check *c)
{
	char p[AUDIT_SHOWN_MAX];
	int rc;

	for (size_t i = 0; i < c->nlogs; i++) {
		if ((rc = log_check(c, c->logs[i])) < 0)
			return rc;
		if (rc)
			c->problems++;
		else
			c->intact++;
	}
	if (c->nlogs == 0)
		fprintf(c->out, "%s: no log in this directory\n", audit_escape(c->dir, p));
	if ((rc = strays_find(c)) < 0)
		return rc;
	strays_say(c);
	return 0;
}

static void dir_check_free(struct dir_check *c)
{
	for (size_t i = 0; c->logs && i < c->nlogs; i++)
		free(c->logs[i]);
	free(c->logs);
	for (size_t i = 0; c->strays && i < c->nstrays; i++)
		free(c->strays[i].name);
	free(c->strays);
	audit_seen_free(c->seen);
	if (c->d)
		closedir(c->d);
}

int audit_verify_dir(const char *dir, const struct audit_verify_opts *o, FILE *out,
		     struct appl_err *err)
{
	struct dir_check c = {.o = o, .err = err, .out = out, .dir = dir};
	size_t strays;
	char p[AUDIT_SHOWN_MAX];
	int rc = dir_open(&c);

	if (rc == 0)
		rc = logs_list(&c);
	if (rc == 0)
		rc = dir_walk(&c);
	if (rc == 0) {
		strays = c.nstrays + c.strays_more;
		fprintf(out, "%s: %zu log%s, %zu intact, %zu with problems, %zu stray file%s\n",
			audit_escape(dir, p), c.nlogs, c.nlogs == 1 ? "" : "s", c.intact,
			c.problems, strays, strays == 1 ? "" : "s");
		rc = c.problems || strays || !c.nlogs;
	}
	dir_check_free(&c);
	return rc;
}
