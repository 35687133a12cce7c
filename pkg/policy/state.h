/* state.h: the rollback floor, the highest policy serial accepted for each
 * deployment.
 *
 * An attacker who can put files where the appliance reads its policy can
 * put back an old, validly signed one (with a tool it no longer allows, or
 * a key since removed from trust). The appliance therefore keeps, in a
 * directory of its own, the highest serial it has accepted for each
 * deployment (a policy's signed `deployment` name, "default" when it has
 * none), across all trusted keys, so an old policy signed by a second key
 * is no way around it, together with the SHA-256 of the policy bytes
 * accepted at that serial. It refuses a lower serial, or the same serial
 * with different bytes.
 *
 * As root the floor lives only in POLICY_STATE_DIR, fixed at build time:
 * whoever writes the MCP client's command line is the party the floor
 * guards against, and any empty directory they could name would be a fresh
 * floor. The directory and every parent are judged like the trust
 * directory's (appl_dir_open_strict): a parent an ordinary user owns could
 * have the floor renamed away. An ordinary user's floor is that user's own
 * and that user can reset it.
 *
 * The file DIR/policy.state is text, written whole (a temporary file
 * beside it, fsync, rename, fsync of the directory) while DIR/policy.lock
 * is held with flock, so a crash leaves the old floor or the new, and two
 * appliances cannot interleave. Its format (docs/signing.md):
 *
 *     appliance-policy-state 2
 *     <deployment> <serial> <sha256: 64 lower-case hex> <key id: 16 upper-case hex> <YYYY-MM-DDTHH:MM:SSZ>
 *     ...
 *
 * one line per deployment, in strictly increasing byte order of the names,
 * at most APPL_POLICY_DEPLOYMENTS_MAX. A file of the earlier format 1 (one
 * serial, the default deployment's) is read as such and rewritten as
 * format 2 at the next commit.
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

/* The floor as root; nothing on the command line can move it. */
#ifndef POLICY_STATE_DIR
#define POLICY_STATE_DIR "/var/lib/appliance"
#endif

/* One deployment's entry. */
struct policy_state {
	bool present; /* false: nothing accepted yet (the other fields are 0) */
	uint64_t serial;
	unsigned char hash[POLICY_HASH_BYTES]; /* of the policy bytes accepted */
	char keyid_hex[POLICY_KEYID_HEX];
	int64_t accepted_at; /* unix seconds */
};

/* The state directory: POLICY_STATE_DIR as root, else
 * $XDG_STATE_HOME/appliance or ~/.local/state/appliance. */
int policy_state_dir_default(char *out, size_t len, struct appl_err *err);

/* Read deployment's entry of the floor in dir into st without changing
 * anything (nothing created, no lock taken: the file is only ever replaced
 * whole). A missing directory or file, or no line for deployment, reads as
 * present = false. dir and its parents must pass appl_dir_open_strict with
 * the effective uid as owner; the file must not be a symlink, must belong
 * to us or to root and must not be writable by group or others (-EPERM):
 * whoever could write them could reset the floor. A malformed file is
 * -EINVAL, never read as empty. */
int policy_state_read(const char *dir, const char *deployment, struct policy_state *st,
		      struct appl_err *err);

/* Judge serial and hash (of the policy bytes) against st. Pure. Returns 0
 * when acceptable (nothing recorded, a higher serial, or the same serial
 * with the same bytes), else -ESTALE with the reason. */
int policy_state_check(const struct policy_state *st, uint64_t serial,
		       const unsigned char hash[POLICY_HASH_BYTES], struct appl_err *err);

/* Accept serial for deployment: open dir as policy_state_read does,
 * creating what is missing (0700), take the lock, read and check the floor
 * again (another appliance may have moved it on), and record serial, hash,
 * keyid_hex and now when the serial is higher than the one recorded. prev
 * (may be NULL) receives the entry found before. Returns 0, -ESTALE
 * (rollback), -ENOSPC (APPL_POLICY_DEPLOYMENTS_MAX deployments recorded
 * already), or another -errno. */
int policy_state_commit(const char *dir, const char *deployment, uint64_t serial,
			const unsigned char hash[POLICY_HASH_BYTES], const char *keyid_hex,
			int64_t now, struct policy_state *prev, struct appl_err *err);

/* Replace path with data[0..len) atomically and durably: a temporary file
 * beside it (mode, written, fsync'ed), renamed over path, then the
 * directory fsync'ed. A crash leaves the old file or the new one. */
int policy_file_replace(const char *path, const void *data, size_t len, mode_t mode,
			struct appl_err *err);

/* The same for a path that must not exist: the temporary file is linked to
 * path instead, so an existing file (or one made meanwhile) is never
 * replaced: -EEXIST ("PATH exists"). */
int policy_file_create(const char *path, const void *data, size_t len, mode_t mode,
		       struct appl_err *err);

#endif
