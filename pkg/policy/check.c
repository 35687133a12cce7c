/* check.c: checks of the document's strings that more than one section
 * uses, or that the document's own fields use (paths, names, the digest,
 * the platform); each gets the string, its length and its field's path. */
#include "policy/internal.h"

#include <errno.h>
#include <string.h>

#include "image/image.h"

static bool has_control(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return true;
	return false;
}

/* A "." or ".." component makes a path say something other than what it
 * looks like at a glance; an absolute path in a signed policy has no need
 * of either. */
static bool has_dot_component(const char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;
		while (j < len && s[j] != '/')
			j++;
		if ((j - i == 1 && s[i] == '.') || (j - i == 2 && s[i] == '.' && s[i + 1] == '.'))
			return true;
		i = j + 1;
	}
	return false;
}

int policy_abs_path_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0 || s[0] != '/')
		return appl_err_set(err, -EINVAL, "%s: must be an absolute path", path);
	if (has_control(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold control characters", path);
	if (has_dot_component(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold . or .. components", path);
	return 0;
}

/* image.layout may be relative to the policy's directory, ".." included
 * (the examples point at ../build/image). */
int policy_layout_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (len == 0)
		return appl_err_set(err, -EINVAL, "%s: must not be empty", path);
	if (has_control(s, len))
		return appl_err_set(err, -EINVAL, "%s: must not hold control characters", path);
	return 0;
}

int policy_digest_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	char hex[IMAGE_DIGEST_HEX + 1];

	if (len != IMAGE_DIGEST_STR - 1 || image_digest_parse(s, hex, NULL) < 0)
		return appl_err_set(err, -EINVAL,
				    "%s: must be sha256: followed by 64 lower-case hex digits",
				    path);
	return 0;
}

static const char *const platforms[] = {"systrap", "ptrace", "kvm"};

int policy_platform_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	(void)len;
	for (size_t i = 0; i < NELEM(platforms); i++)
		if (strcmp(s, platforms[i]) == 0)
			return 0;
	return appl_err_set(err, -EINVAL, "%s: must be \"systrap\", \"ptrace\" or \"kvm\"", path);
}

/* [a-z][a-z0-9_-]*, 1 to max bytes: the form of role, client and deployment
 * names. */
static bool label_like(const char *s, size_t len, size_t max)
{
	bool ok = len >= 1 && len <= max && is_lower(s[0]);

	for (size_t i = 1; ok && i < len; i++)
		ok = is_lower(s[i]) || is_digit(s[i]) || s[i] == '_' || s[i] == '-';
	return ok;
}

bool policy_label_valid(const char *s, size_t len)
{
	return s && label_like(s, len, APPL_POLICY_LABEL_MAX);
}

bool policy_deployment_valid(const char *s, size_t len)
{
	return label_like(s, len, APPL_POLICY_DEPLOYMENT_MAX);
}

/* Role and client names: short enough for a log line. */
int policy_label_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (!label_like(s, len, APPL_POLICY_LABEL_MAX))
		return appl_err_set(err, -EINVAL,
				    "%s: names are [a-z][a-z0-9_-]*, at most %d characters", path,
				    APPL_POLICY_LABEL_MAX);
	return 0;
}

/* A deployment names a rollback floor of its own: short enough for one line
 * of the floor file. */
int policy_deployment_check(const char *s, size_t len, const char *path, struct appl_err *err)
{
	if (!policy_deployment_valid(s, len))
		return appl_err_set(err, -EINVAL,
				    "%s: a deployment is [a-z][a-z0-9_-]*, at most %d characters",
				    path, APPL_POLICY_DEPLOYMENT_MAX);
	return 0;
}

/* A tool name as MCP suggests them; "*" is never one. */
bool policy_tool_name_valid(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > APPL_POLICY_TOOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(is_alpha(s[i]) || is_digit(s[i]) || (s[i] && strchr("_-./", s[i]))))
			return false;
	return true;
}
