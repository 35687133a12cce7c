/* policy_info.c: the policy a status shows (internal.h). */
#include "gateway/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gateway_policy_info_set(struct gateway_policy_info *info, const char *path,
			     const struct policy_verified *v, int64_t loaded_at)
{
	char abs[PATH_MAX];

	memset(info, 0, sizeof(*info));
	if (path)
		snprintf(info->path, sizeof(info->path), "%s", realpath(path, abs) ? abs : path);
	if (v) {
		info->serial = v->serial;
		snprintf(info->deployment, sizeof(info->deployment), "%s", v->deployment);
		snprintf(info->key_id, sizeof(info->key_id), "%s", v->keyid_hex);
		info->expires = v->expires;
	}
	info->loaded_at = loaded_at;
}

/* RFC 3339 UTC, or null for a time that cannot be written. */
static json_t *time_json(int64_t t)
{
	char s[POLICY_TIME_STR];

	return policy_sig_time_format(t, s, sizeof(s)) == 0 ? json_string(s) : json_null();
}

json_t *gateway_policy_info_json(const struct gateway_policy_info *info)
{
	return json_pack("{ss sI ss ss so so}", "path", info->path, "serial",
			 (json_int_t)info->serial, "deployment", info->deployment, "key_id",
			 info->key_id, "expires", time_json(info->expires), "loaded_at",
			 time_json(info->loaded_at));
}
