/* process.h: the process-wide state of the appliance, in one place.
 *
 * The environment, every child's exit status and libsodium's global state
 * belong to the whole process: a library module that changed them would
 * race every other one (an unsetenv against a getenv, a waitpid(-1) that
 * takes a status another module waits for). So main sets the process up
 * through this file, secrets leave the environment through it, check's
 * marker enters and leaves it through it, children are reaped here, and
 * the init of a server's PID namespace (the appliance's binary started
 * again) runs from here. Nothing else under pkg/ makes these calls
 * (scripts/shape checks it).
 */
#ifndef APPL_ENGINE_PROCESS_H
#define APPL_ENGINE_PROCESS_H

#include <stdbool.h>
#include <stddef.h>

/* Set the process up for a command, once, first thing in main: SIGPIPE
 * ignored (a closed pipe comes back as EPIPE), libsodium initialised, and
 * for a command that serves (serves) the stop signals and SIGCHLD blocked
 * for the event loop's signalfd and this process a child subreaper
 * (proc_process_setup). 0, or -1 with why (cap bytes) saying what failed. */
int engine_process_setup(bool serves, char *why, size_t cap);

/* Take variable name out of the environment: on 0, *value is a new
 * NUL-terminated copy of its value in sodium_malloc memory (the caller
 * frees it with sodium_free) and *len its length; the value's bytes in the
 * environment block are zeroed and the variable unset, so no child
 * inherits it and no reader of /proc/PID/environ finds it. -ENOENT (*value
 * NULL) when it is not set; -ENOMEM, leaving the environment as it was.
 * Not thread-safe (getenv, unsetenv): call before threads start. */
int engine_env_take(const char *name, char **value, size_t *len);

/* As root on cgroup v2, make the cgroup this process started in the
 * appliance's subtree (pkg/cgroup: this process moved into its leaf,
 * the controllers handed down), before the first sandbox or server is
 * made; once, and nothing as another user or on cgroup v1. 0, or -errno
 * with err saying what to do. */
struct appl_err;
int engine_cgroups_settle(struct appl_err *err);

/* Put name=value into this process's own environment (check's marker: a
 * value no cell may ever see), and take it out again. 0 or negative
 * errno. Not thread-safe. */
int engine_env_set(const char *name, const char *value);
void engine_env_unset(const char *name);

/* Reap every child that has ended: at the end of a command, after its
 * servers and sandboxes were stopped, so none is left a zombie. */
void engine_reap_children(void);

/* The init of a server's PID namespace (proc_confine.pid_ns): main runs it
 * when proc_init_wanted(argv[0]) says it was started as one. It reaps
 * every child of the namespace, passes SIGTERM, SIGINT, SIGHUP, SIGQUIT,
 * SIGUSR1 and SIGUSR2 on to the server (argv[1], its pid) and returns the
 * server's status (128 + the signal for one) when it ends. */
int engine_init_main(int argc, char **argv);

#endif
