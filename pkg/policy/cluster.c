/* cluster.c: the `cluster` section: what replicas of one deployment share
 * (docs/scale-out.md). Only the ledger's address is in the policy; the key
 * the replicas share is the operator's (`run --cluster-key`), never here. */
#include "policy/internal.h"

#include <errno.h>
#include <string.h>

/* redis://HOST:PORT[/DB] or unix:/PATH: printable, no spaces, and no
 * user:password@ (a secret in a signed file every replica's reader sees). */
static int ledger_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	static const char redis[] = "redis://", unix_[] = "unix:/";
	bool is_redis = strncmp(s, redis, sizeof(redis) - 1) == 0;

	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return appl_err_set(err, -EINVAL,
					    "%s: must be printable ASCII without spaces", path);
	if (!is_redis && strncmp(s, unix_, sizeof(unix_) - 1) != 0)
		return appl_err_set(err, -EINVAL,
				    "%s: must be redis://HOST:PORT[/DB] or unix:/PATH (a Redis "
				    "server's socket)",
				    path);
	if (is_redis && (len == sizeof(redis) - 1 || s[sizeof(redis) - 1] == '/'))
		return appl_err_set(err, -EINVAL, "%s: must name a host", path);
	if (memchr(s, '@', len))
		return appl_err_set(
			err, -EINVAL,
			"%s: must not hold user:password@ (no secret goes in the policy)", path);
	return 0;
}

static const struct field cluster_fields[] = {
	{.name = "ledger",
	 .type = F_STR,
	 .required = true,
	 .off = offsetof(struct policy, ledger),
	 .maxlen = APPL_POLICY_URL_MAX,
	 .check = ledger_check},
};

int policy_cluster_parse(struct ctx *c, void *base, const json_t *v, const char *path)
{
	return policy_fields_parse(c, v, cluster_fields, NELEM(cluster_fields), base, path);
}

const char *policy_cluster_ledger(const struct policy *p)
{
	return p ? p->ledger : NULL;
}
