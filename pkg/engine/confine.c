/* confine.c: what every upstream server is confined by, and the servers of
 * a policy started one by one for `appliance init` (see confine.h,
 * engine.h). */
#define _GNU_SOURCE
#include "engine/confine.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/limits.h"
#include "engine/process.h"
#include "log/log.h"
#include "loop/loop.h"
#include "upstream/upstream.h"
#include "upstream/set.h"
#include "proc/confine.h"
#include "proc/seccomp.h"

static void hide_add(struct engine_confine *c, const char *path)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->hide[i], path) == 0)
			return;
	if (path && path[0] == '/' && c->n < ENGINE_HIDE_MAX)
		c->hide[c->n++] = path;
	c->hide[c->n] = NULL;
}

static void hide_add_copy(struct engine_confine *c, const char *path)
{
	char *dup = c->nowned < ENGINE_HIDE_MAX ? strdup(path) : NULL;

	if (dup) {
		c->owned[c->nowned++] = dup;
		hide_add(c, dup);
	}
}

/* The audit log (log: the caller's buffer, copied) and the rotated files
 * beside it (PATH.N). */
static void hide_audit(struct engine_confine *c, const char *log)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *base = strrchr(log, '/');
	size_t blen;
	struct dirent *e;
	DIR *d;

	hide_add_copy(c, log);
	if (!base || (size_t)(base - log) >= sizeof(dir))
		return;
	memcpy(dir, log, (size_t)(base - log));
	dir[base - log] = '\0';
	base++;
	blen = strlen(base);
	if (!(d = opendir(dir[0] ? dir : "/")))
		return;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, base, blen) == 0 && e->d_name[blen] == '.' &&
		    strspn(e->d_name + blen + 1, "0123456789") == strlen(e->d_name + blen + 1) &&
		    e->d_name[blen + 1] &&
		    appl_path_join(path, sizeof(path), dir, "/", e->d_name) == 0)
			hide_add_copy(c, path);
	closedir(d);
}

int engine_confine_prepare(struct engine_confine *c, const struct policy *p, const char *name,
			   const char *const *extra, const char *run_dir, struct appl_err *err)
{
	const char *const *def = proc_jail_default_masks();
	char log[PATH_MAX];

	if (proc_filter_build(&c->filter, err) < 0 || engine_cgroups_settle(err) < 0)
		return err->code;
	if (geteuid() != 0)
		log_line(
			LOG_WARN, NULL,
			"rootless: upstream servers run as this user, in its cgroup, PID and mount "
			"namespaces and network, so they are not apart from each other or from "
			"the appliance; only the system call filter, no_new_privs, rlimits and a "
			"private HOME confine them");
	else if (proc_jail_reclaim() > 0)
		log_line(LOG_INFO, NULL,
			 "removed the upstream servers' cgroups of appliances no longer running");
	for (size_t i = 0; def[i]; i++)
		hide_add(c, def[i]);
	for (size_t i = 0; extra && extra[i]; i++)
		hide_add(c, extra[i]);
	if (run_dir)
		hide_add(c, run_dir);
	if (policy_audit_path_for(p, name, log, sizeof(log)) == 0)
		hide_audit(c, log);
	return 0;
}

void engine_confine_release(struct engine_confine *c)
{
	proc_filter_free(c->filter);
	for (size_t i = 0; i < c->nowned; i++)
		free(c->owned[i]);
	memset(c, 0, sizeof(*c));
}

void engine_confine_opts(const struct engine_confine *c, struct upstream_opts *o)
{
	o->confine = true;
	o->hide = c->hide;
	o->filter = c->filter;
}

/* Why name is not among the ready servers of s, or NULL when it is (*u set);
 * never naming the server, which found is told apart. buf holds what is
 * made here. */
static const char *server_why(const struct upstream_set *s, const char *name,
			      const struct upstream **u, char *buf, size_t cap)
{
	const char *why, *failed;
	size_t n = strlen(name);

	for (size_t i = 0; (failed = upstream_set_failed(s, i, &why)); i++) {
		if (strcmp(failed, name) != 0)
			continue;
		/* the setup's messages start with "servers.NAME: " */
		if (strncmp(why, "servers.", 8) == 0 && strncmp(why + 8, name, n) == 0 &&
		    strncmp(why + 8 + n, ": ", 2) == 0)
			why += 8 + n + 2;
		return why;
	}
	for (size_t i = 0; i < upstream_set_count(s); i++) {
		*u = upstream_set_get(s, i);
		if (strcmp(upstream_name(*u), name) != 0)
			continue;
		if (upstream_state(*u) == UPSTREAM_READY)
			return NULL;
		snprintf(buf, cap, "it did not start and list its tools: %s",
			 *upstream_last_error(*u) ? upstream_last_error(*u) : "not ready in time");
		return buf;
	}
	return "not started";
}

int engine_servers_try(const struct policy *p, const char *const *hide, engine_found_fn found,
		       void *data, struct appl_err *err)
{
	struct upstream_opts opts = {.result_max = APPL_MAX_RESULT_BYTES_DEF};
	struct engine_confine confine;
	struct upstream_set *s = NULL;
	struct loop *loop;
	int rc = 0;

	memset(&confine, 0, sizeof(confine));
	if (!(loop = loop_new(err)))
		return err->code;
	if ((rc = engine_confine_prepare(&confine, p, NULL, hide, NULL, err)) == 0) {
		engine_confine_opts(&confine, &opts);
		if (!(s = upstream_set_open_each(loop, p, &opts, err)))
			rc = err->code;
	}
	for (size_t i = 0; s && i < policy_server_count(p); i++) {
		const char *name = policy_server_get(p, i)->name, *why;
		const struct upstream *u = NULL;
		char buf[APPL_ERR_MSG_MAX + 64];

		why = server_why(s, name, &u, buf, sizeof(buf));
		found(data, name, why ? NULL : u, why);
	}
	upstream_set_free(s);
	engine_confine_release(&confine);
	loop_free(loop);
	engine_reap_children();
	return rc;
}
