/* value.c: what compiling and validating both need of a JSON value: how
 * deep it nests (checked before anything recurses on it) and how a string of
 * it is shown in a message (cut, still UTF-8). */
#include <string.h>

#include "base/utf8.h"
#include "schema/internal.h"

bool schema_json_depth_ok(const json_t *v, unsigned depth)
{
	const char *key;
	json_t *child;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return true;
	if (depth >= APPL_SCHEMA_DEPTH_MAX)
		return false;
	if (json_is_array(v)) {
		json_array_foreach(v, i, child)
			if (!schema_json_depth_ok(child, depth + 1))
				return false;
		return true;
	}
	json_object_foreach((json_t *)v, key, child)
		if (!schema_json_depth_ok(child, depth + 1))
			return false;
	return true;
}

void schema_shown(char *out, size_t outsz, const char *s, size_t max)
{
	size_t len = strlen(s), n = len < max ? len : max;

	if (outsz < 4) {
		if (outsz)
			out[0] = '\0';
		return;
	}
	if (n > outsz - 4)
		n = outsz - 4;
	memcpy(out, s, n);
	out[n] = '\0';
	appl_utf8_trim(out);
	if (n < len)
		memcpy(out + strlen(out), "...", 4);
}
