/* state.h: the rollback state, one highest accepted policy serial.
 *
 * An attacker who can put files where the appliance reads its policy can
 * put back an old, validly signed one (with a tool it no longer allows, or
 * a key since removed from trust). The appliance therefore keeps, in a
 * directory of its own, the highest serial it has accepted (across all
 * trusted keys: an old policy signed by a second key is no way around it)
 * and the SHA-256 of the policy bytes accepted at that serial, and refuses
 * a lower serial, or the same serial with different bytes.
 *
 * The state file DIR/policy.state is text, written whole (temp file, fsync,
 * rename, fsync of the directory) while DIR/policy.lock is held with
 * flock, so a crash leaves the old state or the new, and two appliances
 * cannot interleave. Its format (docs/signing.md):
 *
 *     appliance-policy-state 1
 *     serial 42
 *     sha256 <64 lower-case hex digits>
 *     key <16 upper-case hex digits: the key id that signed it>
 *     accepted <YYYY-MM-DDTHH:MM:SSZ>
 */
#ifndef APPL_POLICY_STATE_H
#define APPL_POLICY_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "policy/minisign.h"

#define POLICY_HASH_BYTES 32 /* SHA-256 */

struct policy_state {
	bool present; /* false: nothing accepted yet (the other fields are 0) */
	uint64_t serial;
	unsigned char hash[POLICY_HASH_BYTES]; /* of the policy bytes accepted */
	char keyid_hex[POLICY_KEYID_HEX];
	int64_t accepted_at; /* unix seconds */
};

/* The default state directory: /var/lib/appliance as root, else
 * $XDG_STATE_HOME/appliance or ~/.local/state/appliance. */
int policy_state_dir_default(char *out, size_t len, struct appl_err *err);

/* Read the state in dir into st without changing anything (no directory or
 * file is created, no lock taken: the file is only ever replaced whole). A
 * missing directory or file reads as present = false. The directory and
 * file must not be symlinks, must belong to us or to root, and must not be
 * writable by group or others (-EPERM): whoever could write them could
 * reset the serial. A malformed file is -EINVAL. */
int policy_state_read(const char *dir, struct policy_state *st, struct appl_err *err);

/* Judge serial and hash (of the policy bytes) against st. Pure. Returns 0
 * when acceptable (nothing recorded, a higher serial, or the same serial
 * with the same bytes), else -ESTALE with the reason. */
int policy_state_check(const struct policy_state *st, uint64_t serial,
		       const unsigned char hash[POLICY_HASH_BYTES], struct appl_err *err);

/* Accept serial: create dir if needed (0700; see appl_private_dir), take
 * the lock, read and check the state again (another appliance may have
 * moved it on), and record serial, hash, keyid_hex and now when the serial
 * is higher than the one recorded. prev (may be NULL) receives the state
 * found before. Returns 0, -ESTALE (rollback), or another -errno. */
int policy_state_commit(const char *dir, uint64_t serial,
			const unsigned char hash[POLICY_HASH_BYTES], const char *keyid_hex,
			int64_t now, struct policy_state *prev, struct appl_err *err);

/* Replace path with data[0..len) atomically and durably: a temporary file
 * beside it (mode, written, fsync'ed), renamed over path, then the
 * directory fsync'ed. A crash leaves the old file or the new one. */
int policy_file_replace(const char *path, const void *data, size_t len, mode_t mode,
			struct appl_err *err);

#endif
