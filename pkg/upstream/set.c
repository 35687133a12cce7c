/* set.c: the upstream servers of a policy (see set.h). */
#include "upstream/set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"

struct upstream_set {
	struct upstream **ups; /* one per stdio server, policy order */
	size_t n;
	upstream_set_changed_fn changed;
	void *data;
	bool opened; /* past the start: changes are told */
	/* upstream_set_open_each: the servers left out, and why. */
	struct {
		char *name, *why;
	} * failed;
	size_t nfailed;
};

static void on_ready(struct upstream *u, void *data)
{
	struct upstream_set *s = data;
	(void)u;

	/* At start the owner builds its view once, after every server had its
	 * chance; later, a server that (re)started changes it. */
	if (s->opened && s->changed)
		s->changed(s->data, "a server (re)started");
}

static void on_tools_changed(struct upstream *u, void *data)
{
	struct upstream_set *s = data;
	(void)u;

	if (s->opened && s->changed)
		s->changed(s->data, "a server's tool list changed");
}

static void on_down(struct upstream *u, const char *why, void *data)
{
	(void)data;
	log_line(LOG_WARN, NULL, "upstream %s stopped: %s", upstream_name(u), why);
}

static const char *set_why(const struct upstream *u, const struct appl_err *werr)
{
	if (werr->code == -ETIMEDOUT)
		return "not ready in time";
	return *upstream_last_error(u) ? upstream_last_error(u) : "not available";
}

/* Keep why server could not be set up; -ENOMEM when it cannot be kept. */
static int failed_add(struct upstream_set *s, const char *server, const char *why)
{
	char *name = strdup(server), *text = strdup(why);

	if (!name || !text) {
		free(name);
		free(text);
		return -ENOMEM;
	}
	s->failed[s->nfailed].name = name;
	s->failed[s->nfailed++].why = text;
	return 0;
}

static struct upstream_set *set_open(struct loop *loop, const struct policy *p,
				     const struct upstream_opts *opts,
				     upstream_set_changed_fn changed, void *data, bool each,
				     struct appl_err *err)
{
	struct upstream_set *s = calloc(1, sizeof(*s));
	struct upstream_hooks hooks = {.on_ready = on_ready,
				       .on_tools_changed = on_tools_changed,
				       .on_down = on_down,
				       .data = s};
	size_t n = policy_server_count(p);

	if (!s || !(s->ups = calloc(n ? n : 1, sizeof(*s->ups))) ||
	    !(s->failed = calloc(n ? n : 1, sizeof(*s->failed)))) {
		upstream_set_free(s);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	s->changed = changed;
	s->data = data;
	for (size_t i = 0; i < n; i++) {
		const struct policy_server *srv = policy_server_get(p, i);
		struct appl_err merr = {0};

		if ((s->ups[s->n] = upstream_new(loop, srv, &hooks, opts, &merr))) {
			s->n++;
			continue;
		}
		/* A server that cannot be set up fails the set, unless each
		 * is to be tried on its own; running out of memory always does. */
		if (each && merr.code != -ENOMEM && failed_add(s, srv->name, merr.msg) == 0)
			continue;
		*err = merr;
		if (each && merr.code != -ENOMEM)
			appl_err_set(err, -ENOMEM, "out of memory");
		upstream_set_free(s);
		return NULL;
	}
	for (size_t i = 0; i < s->n; i++) {
		struct appl_err werr = {0};

		if (upstream_wait_ready(s->ups[i], APPL_UPSTREAM_INIT_TIMEOUT_MS, &werr) < 0)
			/* Why, once (werr repeats the last error). */
			log_line(LOG_WARN, NULL, "upstream %s is not available: %s",
				 upstream_name(s->ups[i]), set_why(s->ups[i], &werr));
	}
	s->opened = true;
	return s;
}

struct upstream_set *upstream_set_open(struct loop *loop, const struct policy *p,
				       const struct upstream_opts *opts,
				       upstream_set_changed_fn changed, void *data,
				       struct appl_err *err)
{
	return set_open(loop, p, opts, changed, data, false, err);
}

struct upstream_set *upstream_set_open_each(struct loop *loop, const struct policy *p,
					    const struct upstream_opts *opts, struct appl_err *err)
{
	return set_open(loop, p, opts, NULL, NULL, true, err);
}

const char *upstream_set_failed(const struct upstream_set *s, size_t i, const char **why)
{
	if (!s || i >= s->nfailed)
		return NULL;
	*why = s->failed[i].why;
	return s->failed[i].name;
}

void upstream_set_free(struct upstream_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		upstream_free(s->ups[i]);
	for (size_t i = 0; i < s->nfailed; i++) {
		free(s->failed[i].name);
		free(s->failed[i].why);
	}
	free(s->failed);
	free(s->ups);
	free(s);
}

size_t upstream_set_count(const struct upstream_set *s)
{
	return s ? s->n : 0;
}

const struct upstream *upstream_set_get(const struct upstream_set *s, size_t i)
{
	return s && i < s->n ? s->ups[i] : NULL;
}

void upstream_set_wake(struct upstream_set *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (upstream_state(s->ups[i]) == UPSTREAM_DOWN) {
			struct appl_err err = {0};

			upstream_start(s->ups[i], &err);
		}
}

static struct upstream *find(const struct upstream_set *s, const char *server)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strcmp(upstream_name(s->ups[i]), server) == 0)
			return s->ups[i];
	return NULL;
}

int upstream_set_call(struct upstream_set *s, const char *server, const char *tool,
		      const json_t *args, unsigned timeout_ms, upstream_result_cb cb, void *ctx,
		      uint64_t *call_id, const char *log_id)
{
	struct upstream *u = find(s, server);
	struct appl_err err = {0};
	int rc;

	if (!u)
		return -EAGAIN;
	rc = upstream_call(u, tool, args, timeout_ms, cb, ctx, call_id, &err);
	if (rc < 0 && rc != -EAGAIN)
		log_line(LOG_WARN, log_id, "calling %s.%s: %s", server, tool, err.msg);
	else if (rc == 0)
		log_line(LOG_DEBUG, log_id, "call %s.%s sent", server, tool);
	return rc;
}

int upstream_set_read(struct upstream_set *s, const char *server, const char *uri,
		      unsigned timeout_ms, upstream_result_cb cb, void *ctx, uint64_t *call_id,
		      const char *log_id)
{
	struct upstream *u = find(s, server);
	int rc;

	if (!u)
		return -EAGAIN;
	rc = upstream_read(u, uri, timeout_ms, cb, ctx, call_id);
	if (rc < 0 && rc != -EAGAIN)
		log_line(LOG_WARN, log_id, "reading a resource of %s: %s", server, strerror(-rc));
	else if (rc == 0)
		log_line(LOG_DEBUG, log_id, "resources/read on %s sent", server);
	return rc;
}

void upstream_set_cancel(struct upstream_set *s, const char *server, uint64_t call_id)
{
	struct upstream *u = find(s, server);

	if (u)
		upstream_call_cancel(u, call_id);
}
