/* set.c: the upstream servers of a policy (see set.h). */
#include "upstream/set.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log/log.h"

/* One server, shared by every set that has it: a reload's set takes the
 * servers whose configuration it leaves as it was from the set before, so
 * both hold the same upstream until the older set is freed. */
struct member {
	struct upstream *u;
	unsigned refs; /* the sets that hold it */
	upstream_set_changed_fn changed;
	void *data;
	bool opened; /* past its set's start: changes are told */
};

struct upstream_set {
	struct member **m; /* one per server, policy order */
	size_t n;
	upstream_set_changed_fn changed;
	void *data;
	/* upstream_set_open_each: the servers left out, and why. */
	struct {
		char *name, *why;
	} * failed;
	size_t nfailed;
};

static void on_ready(struct upstream *u, void *data)
{
	struct member *m = data;
	(void)u;

	/* At start the owner builds its view once, after every server had its
	 * chance; later, a server that (re)started changes it. */
	if (m->opened && m->changed)
		m->changed(m->data, "a server (re)started");
}

static void on_tools_changed(struct upstream *u, void *data)
{
	struct member *m = data;
	(void)u;

	if (m->opened && m->changed)
		m->changed(m->data, "a server's tool list changed");
}

static void on_down(struct upstream *u, const char *why, void *data)
{
	(void)data;
	log_line(LOG_WARN, NULL, "upstream %s stopped: %s", upstream_name(u), why);
}

static void member_unref(struct member *m)
{
	if (!m || --m->refs > 0)
		return;
	upstream_free(m->u);
	free(m);
}

/* A server of srv started in loop, held once; NULL with err. */
static struct member *member_new(struct loop *loop, const struct policy_server *srv,
				 const struct upstream_opts *opts, const struct upstream_set *s,
				 struct appl_err *err)
{
	struct member *m = calloc(1, sizeof(*m));
	struct upstream_hooks hooks = {.on_ready = on_ready,
				       .on_tools_changed = on_tools_changed,
				       .on_down = on_down,
				       .data = m};

	if (!m) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	m->refs = 1;
	m->changed = s->changed;
	m->data = s->data;
	if (!(m->u = upstream_new(loop, srv, &hooks, opts, err))) {
		free(m);
		return NULL;
	}
	return m;
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

static struct upstream_set *set_alloc(size_t n, upstream_set_changed_fn changed, void *data)
{
	struct upstream_set *s = calloc(1, sizeof(*s));

	if (!s || !(s->m = calloc(n ? n : 1, sizeof(*s->m))) ||
	    !(s->failed = calloc(n ? n : 1, sizeof(*s->failed)))) {
		upstream_set_free(s);
		return NULL;
	}
	s->changed = changed;
	s->data = data;
	return s;
}

/* Wait for members from..n-1 of s, each at most the start's timeout (they
 * start together, so the wait is the slowest one's); the first that did
 * not come up into *bad (may be NULL: each is logged). */
static void set_wait(struct upstream_set *s, size_t from, struct appl_err *bad)
{
	for (size_t i = from; i < s->n; i++) {
		struct upstream *u = s->m[i]->u;
		struct appl_err werr = {0};

		if (upstream_wait_ready(u, APPL_UPSTREAM_INIT_TIMEOUT_MS, &werr) == 0)
			continue;
		/* Why, once (werr repeats the last error). */
		if (!bad)
			log_line(LOG_WARN, NULL, "upstream %s is not available: %s",
				 upstream_name(u), set_why(u, &werr));
		else if (!bad->code)
			appl_err_set(bad, -EIO, "servers.%s did not start: %s", upstream_name(u),
				     set_why(u, &werr));
	}
}

static void set_opened(struct upstream_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		s->m[i]->opened = true;
}

static struct upstream_set *set_open(struct loop *loop, const struct policy *p,
				     const struct upstream_opts *opts,
				     upstream_set_changed_fn changed, void *data, bool each,
				     struct appl_err *err)
{
	size_t n = policy_server_count(p);
	struct upstream_set *s = set_alloc(n, changed, data);

	if (!s) {
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct policy_server *srv = policy_server_get(p, i);
		struct appl_err merr = {0};

		if ((s->m[s->n] = member_new(loop, srv, opts, s, &merr))) {
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
	set_wait(s, 0, NULL);
	set_opened(s);
	return s;
}

static struct member *member_find(const struct upstream_set *s, const char *server)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (strcmp(upstream_name(s->m[i]->u), server) == 0)
			return s->m[i];
	return NULL;
}

/* Whether a reload must refuse srv: its headers take values from the
 * appliance's environment, which was emptied of them at start. */
static bool needs_secret(const struct policy_server *srv)
{
	for (size_t i = 0; i < srv->nheaders; i++)
		if (strstr(srv->headers[i].value, "{env:"))
			return true;
	return false;
}

struct upstream_set *upstream_set_derive(struct upstream_set *cur, const struct policy *cur_p,
					 const struct policy *p, const struct upstream_opts *opts,
					 struct loop *loop, struct appl_err *err)
{
	size_t n = policy_server_count(p), fresh = 0;
	struct upstream_set *s = set_alloc(n, cur->changed, cur->data);
	struct member **order = s ? calloc(n ? n : 1, sizeof(*order)) : NULL;

	if (!s || !order) {
		free(order);
		upstream_set_free(s);
		appl_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	/* Kept servers first, new ones after, so set_wait sees only these;
	 * the policy's order is put back at the end. */
	for (size_t i = 0; i < n; i++) {
		const struct policy_server *srv = policy_server_get(p, i);
		struct member *m = member_find(cur, srv->name);

		if (m && policy_part_same(cur_p, p, "servers", srv->name)) {
			m->refs++;
			order[i] = s->m[s->n++] = m;
		}
	}
	fresh = s->n;
	for (size_t i = 0; i < n && err->code == 0; i++) {
		const struct policy_server *srv = policy_server_get(p, i);

		if (order[i])
			continue;
		if (needs_secret(srv)) {
			appl_err_set(err, -EINVAL,
				     "servers.%s: its headers take values from the environment, "
				     "which is read only at start: restart the appliance to add or "
				     "change it",
				     srv->name);
			break;
		}
		if ((order[i] = s->m[s->n] = member_new(loop, srv, opts, s, err)))
			s->n++;
	}
	if (err->code == 0)
		set_wait(s, fresh, err);
	if (err->code != 0) {
		free(order);
		upstream_set_free(s);
		return NULL;
	}
	memcpy(s->m, order, n * sizeof(*order));
	free(order);
	set_opened(s);
	return s;
}

size_t upstream_set_started(const struct upstream_set *s, const struct upstream_set *old)
{
	size_t k = 0;

	for (size_t i = 0; s && i < s->n; i++)
		if (member_find(old, upstream_name(s->m[i]->u)) != s->m[i])
			k++;
	return k;
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
		member_unref(s->m[i]);
	for (size_t i = 0; s->failed && i < s->nfailed; i++) {
		free(s->failed[i].name);
		free(s->failed[i].why);
	}
	free(s->failed);
	free(s->m);
	free(s);
}

size_t upstream_set_count(const struct upstream_set *s)
{
	return s ? s->n : 0;
}

const struct upstream *upstream_set_get(const struct upstream_set *s, size_t i)
{
	return s && i < s->n ? s->m[i]->u : NULL;
}

void upstream_set_wake(struct upstream_set *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		if (upstream_state(s->m[i]->u) == UPSTREAM_DOWN) {
			struct appl_err err = {0};

			upstream_start(s->m[i]->u, &err);
		}
}

static struct upstream *find(const struct upstream_set *s, const char *server)
{
	struct member *m = member_find(s, server);

	return m ? m->u : NULL;
}

int upstream_set_call(struct upstream_set *s, const char *server, const char *tool,
		      const json_t *args, unsigned timeout_ms, const char *traceparent,
		      upstream_result_cb cb, void *ctx, uint64_t *call_id, const char *log_id)
{
	struct upstream *u = find(s, server);
	struct appl_err err = {0};
	int rc;

	if (!u)
		return -EAGAIN;
	rc = upstream_call_traced(u, tool, args, timeout_ms, traceparent, cb, ctx, call_id, &err);
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
