/* environ.h: the process's environment, where the appliance changes it.
 *
 * The environment is process-wide state: this is the one place under pkg/
 * that removes anything from it. Secrets an administrator hands the
 * appliance through its environment (the values of the HTTP servers'
 * headers, docs/upstream.md) are taken out once at start, before any
 * server or sandbox starts, so that no child inherits them and no reader
 * of /proc/PID/environ finds them.
 */
#ifndef APPL_ENGINE_ENVIRON_H
#define APPL_ENGINE_ENVIRON_H

#include <stddef.h>

/* Take variable name out of the environment: on 0, *value is a new
 * NUL-terminated copy of its value in sodium_malloc memory (the caller
 * frees it with sodium_free) and *len its length; the value's bytes in the
 * environment block are zeroed and the variable unset. -ENOENT (*value
 * NULL) when it is not set; -ENOMEM, leaving the environment as it was.
 * Not thread-safe (getenv, unsetenv): call before threads start. */
int engine_env_take(const char *name, char **value, size_t *len);

#endif
