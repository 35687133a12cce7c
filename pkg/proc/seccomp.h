/* seccomp.h: the system call filter of upstream MCP servers.
 *
 * An upstream server is a Node or Python program that reads arguments a
 * hostile cell chose. It runs under a deny list (docs/seccomp.md): every
 * system call is allowed except the kernel's riskiest entry points and
 * those that would reach other processes, the mounts, the kernel's
 * keyrings or its modules. A deny list rather than an allow list, because
 * such servers need a broad surface and an allow list that misses one call
 * breaks a server in a way an operator cannot debug.
 *
 * The filter is built once in the parent with libseccomp (which may
 * allocate and fail) and installed in the forked child with one prctl on
 * memory built beforehand (which may do neither).
 */
#ifndef APPL_PROC_SECCOMP_H
#define APPL_PROC_SECCOMP_H

#include "base/err.h"

struct proc_filter; /* a compiled BPF program, ready to install */

/* Build the deny list for the native architecture (another architecture's
 * system calls kill the process, and so do x32 calls on x86_64). System
 * calls newer than libseccomp's table get ENOSYS, as on a kernel without
 * them, so no new entry point passes unjudged. 0 with *out (new; free with
 * proc_filter_free), or -errno with err: a name libseccomp does not know is
 * an error (fail closed). */
int proc_filter_build(struct proc_filter **out, struct appl_err *err);

/* Free f (owned); safe on NULL. */
void proc_filter_free(struct proc_filter *f);

/* In a forked child, after PR_SET_NO_NEW_PRIVS, before exec: install f
 * (borrowed). Async-signal-safe: no allocation, one prctl to check
 * no_new_privs and one to install. 0, -EPERM when no_new_privs is not set
 * (a filter over a setuid program could make it fail in ways it does not
 * expect, which is why the kernel asks for it), or -errno from the kernel. */
int proc_filter_install(const struct proc_filter *f);

/* The names of the system calls the filter refuses whatever their
 * arguments, NULL-ended (static), for docs and tests. All get EPERM except
 * clone3, which gets ENOSYS. */
const char *const *proc_filter_denied(void);

#endif
