/* trust.h: which public keys may sign a policy, and the key files.
 *
 * `appliance run` takes keys only from a trust directory. The directory,
 * each of its parents and each key file in it must belong to root and must
 * not be writable by group or others (a parent may be writable by others
 * only when it has the sticky bit, like /tmp), and no component may be a
 * symlink: whoever could write any of them could add a key of their own,
 * and an agent that can edit its own MCP configuration must not be able to
 * point the appliance at such a directory. The rules are sshd's StrictModes.
 *
 * Every "*.pub" file in the directory is a minisign public key; names
 * starting with '.' and names not ending in ".pub" are ignored; a "*.pub"
 * entry that is not a regular file is refused. Two files with the same key
 * id are refused (which key would be meant?), and so is a directory with no
 * key. Every refusal names the path that is wrong.
 *
 * `verify` and `cell` may instead trust one key file given on the command
 * line (policy_trust_file_load): that is for an administrator checking a
 * signature, so no ownership is required of it.
 */
#ifndef APPL_POLICY_TRUST_H
#define APPL_POLICY_TRUST_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"
#include "policy/minisign.h"

#define POLICY_TRUST_DIR_DEFAULT "/etc/appliance/trusted.d"

struct policy_trust; /* opaque: a set of public keys */

/* Load the trust directory dir (absolute or relative to the working
 * directory) under the rules above, with root as the required owner. New
 * *out (policy_trust_free) or -EPERM (ownership, mode or symlink), -ENOENT,
 * -ENOKEY (no key), -EEXIST (a key id twice), -E2BIG (over
 * APPL_TRUST_KEYS_MAX keys or APPL_TRUST_ENTRIES_MAX entries), -EINVAL (a
 * bad key file). */
int policy_trust_dir_load(const char *dir, struct policy_trust **out, struct appl_err *err);

/* The same with owner (instead of root) as the required owner of the
 * directory and its keys; parents may belong to root or owner. For tests
 * that do not run as root; `run` uses policy_trust_dir_load. */
int policy_trust_dir_load_owner(const char *dir, uid_t owner, struct policy_trust **out,
				struct appl_err *err);

/* Trust the one public key file at path (no ownership rules). New *out. */
int policy_trust_file_load(const char *path, struct policy_trust **out, struct appl_err *err);

/* Safe on NULL. */
void policy_trust_free(struct policy_trust *t);

/* The number of keys (at least 1 in a loaded set). */
size_t policy_trust_count(const struct policy_trust *t);

/* The key with this key id, or NULL; borrowed from t. */
const struct policy_pubkey *policy_trust_find(const struct policy_trust *t,
					      const unsigned char keyid[POLICY_KEYID_BYTES]);

/* Read the secret key file at path into a new *out (sodium_malloc memory;
 * the file's bytes are read into such memory too and wiped). Refuses a file
 * that group or others may read or write (-EPERM), as ssh does with private
 * keys, and what policy_seckey_parse refuses. Needs libsodium
 * initialised (by the process's main; minisign.h). */
int policy_seckey_file_read(const char *path, struct policy_seckey **out, struct appl_err *err);

/* Make a new key pair and write it: the secret key to sec_path (mode 0600,
 * unencrypted minisign format) and the public key to pub_path (mode 0644).
 * Neither file may exist already (-EEXIST: an old key is never replaced);
 * when writing the second fails the first is removed. pk (may be NULL)
 * receives the public key. Needs libsodium
 * initialised (minisign.h). */
int policy_keypair_write(const char *pub_path, const char *sec_path, struct policy_pubkey *pk,
			 struct appl_err *err);

#endif
