/* cluster.c: one replica of several (docs/scale-out.md): the key they
 * share (requestStates any of them accepts), and the ledger in Redis
 * through which an approval makes at most one call over all of them, and
 * through which a replay gets back the result of a call another replica
 * made. Results are sealed in the ledger with a key derived from the
 * shared one, so whoever reads Redis learns nothing of them and cannot
 * hand a replica a result no replica stored. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge/bridge.h"
#include "engine/engine.h"
#include "gateway/internal.h"
#include "json/json.h"
#include "ledger/ledger.h"
#include "mcp/session.h"

#define CLUSTER_KEY_HEX	 64u
#define CLUSTER_BOX_INFO "appliance-ledger-box 1"
/* A stored result nests like an MCP result from a server: the same cap the
 * upstream client holds a server's answer to. */
#define CLUSTER_VALUE_DEPTH 64u

struct gateway_cluster {
	struct gateway *gw;
	struct ledger *ledger;
	unsigned char box[crypto_secretbox_KEYBYTES];
	struct bridge_ledger hooks;
};

/* One claim in flight: the bridge's callback, until the ledger answers. */
struct claim {
	struct gateway_cluster *c;
	struct ledger_req *req;
	bridge_claim_cb cb;
	void *data;
};

/* ---- the key ------------------------------------------------------------------------ */

/* The key at path (64 hex digits, a file of the appliance's user, mode
 * 0600 or tighter) into key. 0, or negative with err. */
static int key_read(const char *path, unsigned char key[32], struct appl_err *err)
{
	char buf[CLUSTER_KEY_HEX + 2];
	struct stat st;
	ssize_t n;
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "--cluster-key: %s", path);
	/* whoever may read it may forge a requestState any replica takes */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 077)) {
		close(fd);
		return appl_err_set(err, -EPERM,
				    "--cluster-key: %s must be a regular file of the appliance's "
				    "user with no permission for group or others (chmod 600)",
				    path);
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n != CLUSTER_KEY_HEX || sodium_hex2bin(key, 32, buf, (size_t)n, NULL, &len, NULL) < 0 ||
	    len != 32) {
		sodium_memzero(buf, sizeof(buf));
		return appl_err_set(
			err, -EINVAL,
			"--cluster-key: %s must hold 64 hex digits (appliance cluster-key "
			"FILE makes one)",
			path);
	}
	sodium_memzero(buf, sizeof(buf));
	return 0;
}

/* ---- the bridge's ledger -------------------------------------------------------------- */

/* A stored value opened: nonce, then the sealed compact JSON of a result.
 * NULL when it does not open (not ours, or altered) or does not parse. */
static json_t *value_open(const struct gateway_cluster *c, const unsigned char *v, size_t len)
{
	size_t plen;
	unsigned char *plain;
	json_t *j = NULL;
	struct appl_err err = {0};

	if (len < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES)
		return NULL;
	plen = len - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES;
	if (!(plain = malloc(plen + 1)))
		return NULL;
	if (crypto_secretbox_open_easy(plain, v + crypto_secretbox_NONCEBYTES,
				       len - crypto_secretbox_NONCEBYTES, v, c->box) == 0)
		j = appl_json_load((const char *)plain, plen, LEDGER_VALUE_MAX, CLUSTER_VALUE_DEPTH,
				   "a ledger value", &err);
	free(plain);
	return j;
}

static void on_claimed(void *data, enum ledger_claim outcome, const void *value, size_t len)
{
	struct claim *cl = data;
	json_t *result = NULL;
	enum bridge_claim said = BRIDGE_CLAIM_ERROR;

	if (outcome == LEDGER_CLAIMED)
		said = BRIDGE_CLAIM_OURS;
	else if (outcome == LEDGER_TAKEN && !value)
		said = BRIDGE_CLAIM_UNKNOWN;
	else if (outcome == LEDGER_TAKEN && !(result = value_open(cl->c, value, len))) {
		log_line(LOG_WARN, NULL,
			 "ledger: a stored result that does not open with this cluster key: the "
			 "call is not made again");
		said = BRIDGE_CLAIM_UNKNOWN;
	} else if (outcome == LEDGER_TAKEN)
		said = BRIDGE_CLAIM_DONE;
	else
		log_line(LOG_WARN, NULL, "ledger: a claim failed: %.*s", (int)len,
			 (const char *)value);
	cl->cb(cl->data, said, result);
	json_decref(result);
	free(cl);
}

/* Long enough for any replay of the run to find the claim: the state
 * lives the question's timeout and 2 s, and a replay begun then runs up to
 * its deadline. */
static unsigned claim_ttl_ms(const struct gateway *gw)
{
	unsigned long long ms =
		((unsigned long long)gw->lim->approval_timeout_s + gw->lim->deadline_s + 62u) *
		1000u;

	return ms > LEDGER_TTL_MS_MAX ? LEDGER_TTL_MS_MAX : (unsigned)ms;
}

static void *claim_start(void *l, const unsigned char key[32], bridge_claim_cb cb, void *data)
{
	struct gateway_cluster *c = l;
	struct claim *cl = calloc(1, sizeof(*cl));
	struct appl_err err = {0};

	if (!cl)
		return NULL;
	*cl = (struct claim){.c = c, .cb = cb, .data = data};
	if (ledger_claim(c->ledger, key, 32, claim_ttl_ms(c->gw), on_claimed, cl, &cl->req, &err) <
	    0) {
		log_line(LOG_WARN, NULL, "ledger: %s", err.msg);
		free(cl);
		return NULL;
	}
	return cl;
}

static void claim_cancel(void *l, void *handle)
{
	struct gateway_cluster *c = l;
	struct claim *cl = handle;

	ledger_req_cancel(c->ledger, cl->req);
	free(cl);
}

static void on_put(void *data, bool ok, const char *why)
{
	(void)data;
	if (!ok)
		log_line(LOG_WARN, NULL,
			 "ledger: a made call's result was not stored (%s): a replay elsewhere "
			 "will not make it again, and cannot give its result",
			 why);
}

static void result_put(void *l, const unsigned char key[32], const json_t *result)
{
	struct gateway_cluster *c = l;
	char *text = json_dumps(result, JSON_COMPACT);
	size_t tlen = text ? strlen(text) : 0;
	size_t vlen = crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + tlen;
	unsigned char *v = text ? malloc(vlen) : NULL;
	struct appl_err err = {0};

	if (v) {
		randombytes_buf(v, crypto_secretbox_NONCEBYTES);
		crypto_secretbox_easy(v + crypto_secretbox_NONCEBYTES, (unsigned char *)text, tlen,
				      v, c->box);
		if (ledger_put(c->ledger, key, 32, v, vlen, on_put, NULL, NULL, &err) < 0)
			on_put(NULL, false, err.msg);
	} else {
		on_put(NULL, false, "out of memory");
	}
	free(v);
	free(text);
}

/* ---- start and stop ------------------------------------------------------------------ */

int gateway_cluster_open(struct gateway *gw, struct appl_err *err)
{
	const char *url = policy_cluster_ledger(gw->policy), *path = gw->cfg->cluster_key;
	struct gateway_cluster *c;
	unsigned char key[32];

	if (!url && !path)
		return 0;
	if (!url || !path)
		return appl_err_set(err, -EINVAL,
				    url ? "the policy's cluster section needs --cluster-key FILE "
					  "(the key every replica holds)"
					: "--cluster-key: the policy has no cluster section (its "
					  "ledger)");
	if (!policy_http(gw->policy))
		return appl_err_set(
			err, -EINVAL,
			"cluster: replicas serve HTTP (the policy has no http section)");
	if (key_read(path, key, err) < 0)
		return err->code;
	if (!(c = calloc(1, sizeof(*c)))) {
		sodium_memzero(key, sizeof(key));
		return appl_err_set(err, -ENOMEM, "out of memory");
	}
	crypto_generichash(c->box, sizeof(c->box), (const unsigned char *)CLUSTER_BOX_INFO,
			   sizeof(CLUSTER_BOX_INFO), key, sizeof(key));
	if (ledger_new(gw->loop, url, &c->ledger, err) < 0) {
		sodium_memzero(key, sizeof(key));
		sodium_memzero(c->box, sizeof(c->box));
		free(c);
		return appl_err_set(err, err->code, "cluster.ledger: %s", err->msg);
	}
	mcp_server_cluster_key(gw->srv, key);
	sodium_memzero(key, sizeof(key));
	c->gw = gw;
	c->hooks = (struct bridge_ledger){
		.claim = claim_start, .cancel = claim_cancel, .put = result_put, .l = c};
	engine_ledger(gw->e, &c->hooks);
	gw->cluster = c;
	log_line(LOG_INFO, NULL, "a replica: requestStates under the cluster key, ledger at %s",
		 url);
	return 0;
}

void gateway_cluster_close(struct gateway *gw)
{
	struct gateway_cluster *c = gw->cluster;

	if (!c)
		return;
	if (gw->e)
		engine_ledger(gw->e, NULL);
	ledger_free(c->ledger);
	sodium_memzero(c->box, sizeof(c->box));
	free(c);
	gw->cluster = NULL;
}
