/* oauth.c: the HTTP front as an OAuth 2.1 resource server (docs/http.md,
 * OAuth): JWT access tokens of the authorization server the policy names
 * (`http.oauth`), checked by pkg/oauth against its keys, each turned into a
 * principal named by its subject and holding the role its claim names; and
 * the resource's metadata (RFC 9728) for clients to find that server.
 *
 * A principal outlives the token that made it: sessions, runs and tasks
 * point at it, so it is kept (at most GW_OAUTH_PRINCIPALS_MAX) until the
 * appliance stops. What the policy says (the issuer, the audience, the
 * keys) is a configuration a reload replaces whole. */
#define _GNU_SOURCE
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fs.h"
#include "engine/engine.h"
#include "gateway/internal.h"
#include "http/front.h"
#include "http/client.h"
#include "mcp/http.h"
#include "oauth/oauth.h"

#define GW_OAUTH_BUCKETS	1024u
#define GW_OAUTH_PRINCIPALS_MAX 16384u /* subjects and roles, over the process's life */
#define GW_OAUTH_CLIENT_PREFIX	"oauth:"
#define GW_OAUTH_FETCH_MS	10000u /* one fetch of a jwks_url */
#define GW_OAUTH_RETRY_MS	30000u /* after a failed fetch, and between early ones */
#define GW_OAUTH_WELL_KNOWN	"/.well-known/oauth-protected-resource"

struct oauth_principal {
	struct mcp_principal p; /* p.client is client; p.role role, or NULL */
	char client[sizeof(GW_OAUTH_CLIENT_PREFIX) + OAUTH_SUBJECT_MAX];
	char role[OAUTH_ROLE_MAX + 1];
	struct oauth_principal *next; /* in its bucket */
};

/* What one policy's http.oauth says, with its keys. */
struct gateway_oauth_conf {
	char *issuer, *audience, *role_claim, *jwks_url;
	unsigned skew_s, refresh_s;
	struct oauth_jwks *jwks;
	bool keys_kept; /* the running one's keys (the same jwks_url), once used */
	char *doc;	/* the resource's metadata */
	char challenge[APPL_HTTP_CHALLENGE_MAX];
	char paths[2][APPL_POLICY_URL_MAX + sizeof(GW_OAUTH_WELL_KNOWN)];
	struct http_front_resource res;
};

struct gateway_oauth {
	struct gateway *gw;
	struct gateway_oauth_conf *conf; /* NULL: the policy has no http.oauth */
	struct oauth_principal *buckets[GW_OAUTH_BUCKETS];
	size_t nprincipals;
	unsigned char hkey[crypto_shorthash_KEYBYTES];
	struct log_rate rate; /* refused tokens logged */
	/* a jwks_url fetched again: refresh_s after the last success,
	 * GW_OAUTH_RETRY_MS after a failure, early for an unknown kid */
	struct http_client *client;
	struct http_call *call;
	struct loop_timer *timer;
	char *got;
	size_t got_len;
	uint64_t tried_ms;
};

/* ---- the configuration ------------------------------------------------------------- */

void gateway_oauth_conf_free(struct gateway_oauth_conf *c)
{
	if (!c)
		return;
	oauth_jwks_free(c->jwks);
	free(c->issuer);
	free(c->audience);
	free(c->role_claim);
	free(c->jwks_url);
	free(c->doc);
	free(c);
}

/* The metadata's paths and the challenge's URL, from the audience (RFC
 * 9728 3.1: the well-known name goes between the host and the path). */
static int resource_make(struct gateway_oauth_conf *c, struct appl_err *err)
{
	const char *host = strstr(c->audience, "://") + 3;
	size_t origin = (size_t)(host - c->audience) + strcspn(host, "/");
	const char *path = c->audience + origin;
	bool bare = !*path || strcmp(path, "/") == 0;
	json_t *doc = json_pack("{ss s[s] s[s]}", "resource", c->audience, "authorization_servers",
				c->issuer, "bearer_methods_supported", "header");

	if (!doc || !(c->doc = json_dumps(doc, JSON_COMPACT))) {
		json_decref(doc);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	json_decref(doc);
	snprintf(c->paths[0], sizeof(c->paths[0]), "%s%s", GW_OAUTH_WELL_KNOWN, bare ? "" : path);
	snprintf(c->paths[1], sizeof(c->paths[1]), "%s", GW_OAUTH_WELL_KNOWN);
	snprintf(c->challenge, sizeof(c->challenge), "resource_metadata=\"%.*s%s\"", (int)origin,
		 c->audience, c->paths[0]);
	c->res = (struct http_front_resource){.challenge = c->challenge,
					      .doc = c->doc,
					      .doc_len = strlen(c->doc),
					      .paths = {c->paths[0], bare ? NULL : c->paths[1]}};
	return 0;
}

static int keys_take(struct gateway_oauth_conf *c, const char *buf, size_t len, const char *from,
		     struct appl_err *err)
{
	struct oauth_jwks *ks;

	if (oauth_jwks_parse(buf, len, &ks, err) < 0)
		return appl_err_set(err, err->code, "http.oauth: the keys of %s: %s", from,
				    err->msg);
	oauth_jwks_free(c->jwks);
	c->jwks = ks;
	log_line(LOG_INFO, NULL, "oauth: %zu key%s from %s (%zu skipped)", oauth_jwks_count(ks),
		 oauth_jwks_count(ks) == 1 ? "" : "s", from, oauth_jwks_skipped(ks));
	return 0;
}

static struct http_request jwks_request(const char *url)
{
	static const char *const headers[] = {"Accept: application/json", NULL};

	return (struct http_request){.method = "GET",
				     .url = url,
				     .headers = headers,
				     .connect_timeout_ms = GW_OAUTH_FETCH_MS,
				     .timeout_ms = GW_OAUTH_FETCH_MS,
				     .body_max = OAUTH_JWKS_MAX};
}

/* The keys at once: a file read, or a URL fetched while the loop waits
 * (at start, or at a reload that names another URL). */
static int keys_load(struct gateway_oauth_conf *c, const struct policy_oauth *po,
		     struct appl_err *err)
{
	struct http_request req = jwks_request(po->jwks_url);
	char *buf = NULL;
	size_t len = 0;
	long status = 0;
	int rc;

	if (po->jwks_path)
		rc = appl_file_read(po->jwks_path, OAUTH_JWKS_MAX, &buf, &len, err);
	else if ((rc = http_fetch_once(&req, &status, &buf, &len, err)) == 0 && status != 200)
		rc = appl_err_set(err, -EPROTO, "HTTP status %ld", status);
	if (rc < 0)
		return appl_err_set(err, rc, "http.oauth.%s: %s: %s",
				    po->jwks_path ? "jwks_path" : "jwks_url",
				    po->jwks_path ? po->jwks_path : po->jwks_url, err->msg);
	rc = keys_take(c, buf, len, po->jwks_path ? po->jwks_path : po->jwks_url, err);
	free(buf);
	return rc;
}

static char *dup_or(const char *s, bool *bad)
{
	char *d = s ? strdup(s) : NULL;

	*bad = *bad || (s && !d);
	return d;
}

int gateway_oauth_conf_make(const struct gateway_oauth *o, const struct policy *p,
			    struct gateway_oauth_conf **out, struct appl_err *err)
{
	const struct policy_http *ph = policy_http(p);
	const struct policy_oauth *po = ph ? ph->oauth : NULL;
	const struct gateway_oauth_conf *was = o ? o->conf : NULL;
	struct gateway_oauth_conf *c;
	bool bad = false;

	*out = NULL;
	if (!po)
		return 0;
	if (!(c = calloc(1, sizeof(*c))))
		return appl_err_set(err, -ENOMEM, "out of memory");
	c->issuer = dup_or(po->issuer, &bad);
	c->audience = dup_or(po->audience, &bad);
	c->role_claim = dup_or(po->role_claim, &bad);
	c->jwks_url = dup_or(po->jwks_url, &bad);
	c->skew_s = po->skew_s;
	c->refresh_s = po->jwks_refresh_s;
	if (bad || resource_make(c, err) < 0) {
		gateway_oauth_conf_free(c);
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	/* The same URL keeps its keys (and its refresh goes on): a reload
	 * does not wait on the authorization server. */
	if (po->jwks_url && was && was->jwks_url && strcmp(was->jwks_url, po->jwks_url) == 0 &&
	    was->jwks)
		c->keys_kept = true;
	else if (keys_load(c, po, err) < 0) {
		gateway_oauth_conf_free(c);
		return err->code;
	}
	*out = c;
	return 0;
}

/* ---- principals -------------------------------------------------------------------- */

static size_t bucket_of(const struct gateway_oauth *o, const char *client, const char *role)
{
	unsigned char h[crypto_shorthash_BYTES];
	char key[sizeof(((struct oauth_principal *)0)->client) + OAUTH_ROLE_MAX + 2];
	int n = snprintf(key, sizeof(key), "%s%c%s", client, 0, role);
	uint64_t v = 0;

	/* keyed: a client choosing subjects cannot fill one bucket */
	crypto_shorthash(h, (const unsigned char *)key, n > 0 ? (size_t)n : 0, o->hkey);
	memcpy(&v, h, sizeof(v));
	return (size_t)(v % GW_OAUTH_BUCKETS);
}

/* The principal of subject with role (made the first time), or NULL when
 * GW_OAUTH_PRINCIPALS_MAX are held already or memory ran out. */
static const struct mcp_principal *principal_get(struct gateway_oauth *o, const char *subject,
						 const char *role)
{
	char client[sizeof(((struct oauth_principal *)0)->client)];
	struct oauth_principal *op;
	size_t b;

	snprintf(client, sizeof(client), "%s%s", GW_OAUTH_CLIENT_PREFIX, subject);
	b = bucket_of(o, client, role);
	for (op = o->buckets[b]; op; op = op->next)
		if (strcmp(op->client, client) == 0 && strcmp(op->role, role) == 0)
			return op->p.role ? &op->p : NULL;
	if (o->nprincipals >= GW_OAUTH_PRINCIPALS_MAX || !(op = calloc(1, sizeof(*op))))
		return NULL;
	memcpy(op->client, client, sizeof(client));
	snprintf(op->role, sizeof(op->role), "%s", role);
	op->p = (struct mcp_principal){.client = op->client, .role = op->role};
	op->next = o->buckets[b];
	o->buckets[b] = op;
	o->nprincipals++;
	return &op->p;
}

/* After a reload: a principal whose role left the policy may do nothing
 * more; its sessions and tasks end, as a removed token's do. One whose
 * role came back is served again. */
static void principals_recheck(struct gateway_oauth *o)
{
	struct gateway *gw = o->gw;

	for (size_t b = 0; b < GW_OAUTH_BUCKETS; b++)
		for (struct oauth_principal *op = o->buckets[b]; op; op = op->next) {
			bool has = policy_role_find(gw->policy, op->role) != NULL;

			if (has || !op->p.role) {
				op->p.role = has ? op->role : NULL;
				continue;
			}
			mcp_http_principal_end(gw->http, &op->p, "its role left the policy");
			mcp_server_client_tasks_end(gw->srv, op->client, "reload");
			engine_sessions_end_client(gw->e, op->client, "reload");
			op->p.role = NULL;
		}
}

/* ---- the front's hooks --------------------------------------------------------------- */

static void refresh_now(struct gateway_oauth *o);

static void refused(struct gateway_oauth *o, const char *what, const char *why)
{
	unsigned dropped = 0;

	if (!log_rate_allow(&o->rate, loop_now_ms(), &dropped))
		return;
	if (dropped)
		log_line(LOG_WARN, NULL, "oauth: %u refusal lines dropped", dropped);
	log_line(LOG_INFO, NULL, "oauth: refused a token: %s%s", what, why);
}

const struct mcp_principal *gateway_oauth_bearer(void *data, const char *tok, size_t len,
						 unsigned *status)
{
	struct gateway_oauth *o = ((struct gateway *)data)->oauth;
	const struct gateway_oauth_conf *c = o ? o->conf : NULL;
	struct oauth_token t;
	struct appl_err err = {0};
	const struct mcp_principal *p;

	*status = 401;
	if (!c || !c->jwks)
		return NULL;
	struct oauth_rules rules = {.issuer = c->issuer,
				    .audience = c->audience,
				    .role_claim = c->role_claim,
				    .skew_s = c->skew_s,
				    .now = (int64_t)time(NULL)};
	if (oauth_jwt_verify(c->jwks, tok, len, &rules, &t, &err) < 0) {
		/* a key the server added since the last fetch */
		if (c->jwks_url && strstr(err.msg, "kid"))
			refresh_now(o);
		refused(o, "", err.msg);
		return NULL;
	}
	if (!t.role[0] || !policy_role_find(o->gw->policy, t.role)) {
		*status = 403;
		refused(o, t.role[0] ? "its role is not one of the policy's" : "it names no role",
			"");
		return NULL;
	}
	if (!(p = principal_get(o, t.subject, t.role)))
		refused(o, "too many subjects since the start, or out of memory", "");
	return p;
}

const struct http_front_resource *gateway_oauth_resource(void *data)
{
	struct gateway_oauth *o = ((struct gateway *)data)->oauth;

	return o && o->conf ? &o->conf->res : NULL;
}

/* ---- a jwks_url fetched again ---------------------------------------------------------- */

static void refresh_arm(struct gateway_oauth *o, uint64_t ms)
{
	if (o->timer)
		loop_timer_set(o->timer, ms);
}

static int on_data(void *ctx, const char *buf, size_t len)
{
	struct gateway_oauth *o = ctx;
	char *nb;

	if (len > OAUTH_JWKS_MAX - o->got_len || !(nb = realloc(o->got, o->got_len + len + 1)))
		return -EMSGSIZE;
	memcpy(nb + o->got_len, buf, len);
	o->got = nb;
	o->got_len += len;
	return 0;
}

static int on_head(void *ctx, const struct http_head *h)
{
	(void)ctx;
	return h->status == 200 ? 0 : -EPROTO;
}

/* The fetch ended: new keys for the configuration that asked, when it is
 * still the one in force and its URL the same; else they are dropped. A
 * failure keeps the keys there were. */
static void on_done(void *ctx, int rc, const char *why)
{
	struct gateway_oauth *o = ctx;
	struct gateway_oauth_conf *c = o->conf;
	struct appl_err err = {0};

	o->call = NULL;
	if (rc == 0 && c && c->jwks_url && keys_take(c, o->got, o->got_len, c->jwks_url, &err) < 0)
		rc = err.code, why = err.msg;
	if (rc < 0)
		log_line(LOG_WARN, NULL,
			 "oauth: the keys at %s could not be fetched again (%s); the ones held "
			 "stay, next try in %u s",
			 c && c->jwks_url ? c->jwks_url : "?", why, GW_OAUTH_RETRY_MS / 1000u);
	free(o->got);
	o->got = NULL;
	o->got_len = 0;
	if (c && c->jwks_url)
		refresh_arm(o, rc < 0 ? GW_OAUTH_RETRY_MS : (uint64_t)c->refresh_s * 1000u);
}

static void refresh_start(struct gateway_oauth *o)
{
	static const struct http_call_hooks hooks = {
		.on_head = on_head, .on_data = on_data, .done = on_done};
	const struct gateway_oauth_conf *c = o->conf;
	struct http_request req;
	struct appl_err err = {0};

	if (!c || !c->jwks_url || o->call)
		return;
	req = jwks_request(c->jwks_url);
	o->tried_ms = loop_now_ms();
	if ((!o->client && http_client_new(o->gw->loop, &o->client, &err) < 0) ||
	    http_call_start(o->client, &req, &hooks, o, &o->call, &err) < 0) {
		log_line(LOG_WARN, NULL, "oauth: could not fetch the keys again: %s", err.msg);
		refresh_arm(o, GW_OAUTH_RETRY_MS);
	}
}

static void on_timer(void *data)
{
	refresh_start(data);
}

/* A token named a key the set lacks: fetch again now, unless a fetch
 * began less than GW_OAUTH_RETRY_MS ago (a client sending made-up kids
 * must not make us hammer the server). */
static void refresh_now(struct gateway_oauth *o)
{
	if (!o->call && loop_now_ms() - o->tried_ms >= GW_OAUTH_RETRY_MS)
		refresh_start(o);
}

/* ---- in force ------------------------------------------------------------------------ */

void gateway_oauth_conf_use(struct gateway *gw, struct gateway_oauth_conf *c)
{
	struct gateway_oauth *o = gw->oauth;
	struct gateway_oauth_conf *was = o->conf;

	if (c && c->keys_kept && was) {
		c->jwks = was->jwks;
		was->jwks = NULL;
	}
	if (o->call && !(c && c->keys_kept)) {
		http_call_cancel(o->call);
		o->call = NULL;
		free(o->got);
		o->got = NULL;
		o->got_len = 0;
	}
	o->conf = c;
	gateway_oauth_conf_free(was);
	if (!c || !c->jwks_url)
		refresh_arm(o, 0);
	else if (!c->keys_kept)
		refresh_arm(o, (uint64_t)c->refresh_s * 1000u);
	principals_recheck(o);
}

int gateway_oauth_open(struct gateway *gw, struct appl_err *err)
{
	struct gateway_oauth *o = calloc(1, sizeof(*o));
	struct gateway_oauth_conf *c;

	if (!o)
		return appl_err_set(err, -ENOMEM, "out of memory");
	o->gw = gw;
	crypto_shorthash_keygen(o->hkey);
	if (!(o->timer = loop_timer_new(gw->loop, on_timer, o, err)) ||
	    gateway_oauth_conf_make(NULL, gw->policy, &c, err) < 0) {
		loop_timer_free(o->timer);
		free(o);
		return err->code;
	}
	gw->oauth = o;
	gateway_oauth_conf_use(gw, c);
	return 0;
}

void gateway_oauth_close(struct gateway *gw)
{
	struct gateway_oauth *o = gw->oauth;

	if (!o)
		return;
	loop_timer_free(o->timer);
	http_client_free(o->client); /* its call with it */
	free(o->got);
	gateway_oauth_conf_free(o->conf);
	for (size_t b = 0; b < GW_OAUTH_BUCKETS; b++)
		while (o->buckets[b]) {
			struct oauth_principal *op = o->buckets[b];

			o->buckets[b] = op->next;
			free(op);
		}
	sodium_memzero(o->hkey, sizeof(o->hkey));
	free(o);
	gw->oauth = NULL;
}
