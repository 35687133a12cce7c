/* serial.h: a policy's serial rewritten in its own text, for `appliance
 * sign --serial`. Only the bytes of the one value change: the rest of the
 * file (its order, spacing and comments of layout) is the administrator's
 * and stays byte for byte as written, as scripts/fill-policies leaves it
 * for image.digest.
 */
#ifndef APPL_POLICY_SERIAL_H
#define APPL_POLICY_SERIAL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* The highest serial a policy may carry (policy/README.md). */
#define POLICY_SERIAL_MAX ((uint64_t)INT64_MAX)

/* How the new serial is chosen. */
enum policy_serial_how {
	POLICY_SERIAL_NOW,  /* seconds since 1970 UTC, or the file's + 1 where higher */
	POLICY_SERIAL_NEXT, /* the file's + 1 */
	POLICY_SERIAL_SET,  /* a number given */
};

/* Find the value of the top-level key written "serial" in buf[0..len)
 * (not NUL-terminated): its bytes are buf[*off, *off + *n), its value
 * *value. Pure. -EINVAL when buf is not an object, has no such key, or
 * its value is not a decimal integer of 1 to POLICY_SERIAL_MAX; err says
 * which. */
int policy_serial_find(const char *buf, size_t len, size_t *off, size_t *n, uint64_t *value,
		       struct appl_err *err);

/* The serial how chooses, from the file's cur, now (seconds since 1970)
 * and given (POLICY_SERIAL_SET's). -ERANGE past POLICY_SERIAL_MAX. */
int policy_serial_pick(enum policy_serial_how how, uint64_t cur, int64_t now, uint64_t given,
		       uint64_t *out, struct appl_err *err);

/* Rewrite the serial of the policy file at path as how chooses (above),
 * keeping every other byte and the file's mode; the file is replaced
 * atomically (policy_file_replace), and not at all when the serial stays.
 * A symlink is refused: the file itself would be replaced by a copy.
 * *old and *new (may be NULL) receive the serials. The text written must
 * read back with that serial and parse as a policy (policy_parse), or
 * nothing is written. */
int policy_serial_write(const char *path, enum policy_serial_how how, uint64_t given, int64_t now,
			uint64_t *old, uint64_t *new, struct appl_err *err);

#endif
