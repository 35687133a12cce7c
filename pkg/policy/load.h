/* load.h: from a signature file to a policy the appliance may use.
 *
 * `appliance run --policy /etc/appliance/policy.json.sig` names the
 * signature; the policy is the file beside it, the same path without
 * ".sig". policy_load checks them in minisign's order, and nothing of the
 * policy is parsed before its bytes are known to be signed:
 *
 *  1. size caps: the signature file at most APPL_SIGNATURE_FILE_MAX bytes,
 *     the policy at most APPL_POLICY_FILE_MAX (-EFBIG);
 *  2. the signature file's form (-EINVAL) and algorithm: only "ED",
 *     Ed25519 over BLAKE2b-512; legacy "Ed" is refused (-EPROTONOSUPPORT);
 *  3. its key id is one of the trusted keys (-ENOKEY, naming the key id);
 *  4. the signature covers the policy's raw bytes (-EBADMSG);
 *  5. the global signature covers the trusted comment (-EBADMSG);
 *  6. the trusted comment is "file:NAME serial:N signed:RFC3339" (-EINVAL)
 *     and NAME is the policy's file name (-EBADMSG: a policy signed for
 *     another file, say staging.json, is not this one);
 *  7. only now the policy is parsed (policy_parse, its errors), and the
 *     programs of its code tools kept in files are read and held to their
 *     digests (policy_code_files_read);
 *  8. the policy's serial equals the trusted comment's (-EBADMSG);
 *  9. it has not expired: expires > now (-EKEYEXPIRED);
 * 10. with a state directory, no rollback against the floor of the
 *     policy's deployment (state.h; -ESTALE).
 *
 * Every message is one line that starts with the file it is about.
 */
#ifndef APPL_POLICY_LOAD_H
#define APPL_POLICY_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "policy/minisign.h"
#include "policy/policy.h"
#include "policy/state.h"
#include "policy/trust.h"

/* What was verified; for printing and for the audit log. */
struct policy_verified {
	char keyid_hex[POLICY_KEYID_HEX]; /* as minisign prints it */
	uint64_t serial;
	int64_t expires;   /* unix seconds, UTC */
	int64_t signed_at; /* from the trusted comment */
	char file[APPL_POLICY_NAME_MAX + 1];
	char deployment[APPL_POLICY_DEPLOYMENT_MAX + 1]; /* whose floor it is held to */
	unsigned char hash[POLICY_HASH_BYTES];		 /* SHA-256 of the policy bytes */
};

/* Verify sig_path (and the policy beside it) against trust (borrowed) at
 * time now (unix seconds). If state_dir is non-NULL, refuse a rollback
 * against it: with commit false nothing on disk is changed (what `appliance
 * verify` does); with commit true the serial is recorded under the lock
 * (what `run` and `cell --policy` do). With state_dir NULL there is no
 * rollback check at all (commit is ignored).
 *
 * On success *policy (may be NULL when the caller wants only the verdict)
 * is the parsed policy, new (policy_free). info (may be NULL) is zeroed and
 * then filled as far as the checks got, so a refusal can still show the key
 * id. Returns 0 or the negative code of the first check that failed (list
 * above), with err filled. Needs libsodium initialised (the process's
 * main does it before any command; minisign.h).
 *
 * Typical use:
 *
 *     struct policy_trust *trust;
 *     if (policy_trust_dir_load(POLICY_TRUST_DIR_DEFAULT, &trust, &err) < 0 ||
 *         policy_load(sig_path, trust, state_dir, time(NULL), true, &policy,
 *                     &info, &err) < 0)
 *             ... print err.msg, refuse to start ...
 *     policy_trust_free(trust);
 */
int policy_load(const char *sig_path, const struct policy_trust *trust, const char *state_dir,
		int64_t now, bool commit, struct policy **policy, struct policy_verified *info,
		struct appl_err *err);

/* Sign the policy at policy_path with sk (borrowed): the policy must parse
 * (policy_parse), its serial goes into the trusted comment "file:NAME
 * serial:N signed:NOW", and the signature file is written (atomically,
 * mode 0644) to policy_path + ".sig", whose path goes into sig_path
 * (sig_len bytes). info (may be NULL) describes what was signed. An expired
 * policy is signed all the same: the caller may warn (info->expires).
 * Needs libsodium initialised (minisign.h). */
int policy_file_sign(const char *policy_path, const struct policy_seckey *sk, int64_t now,
		     char *sig_path, size_t sig_len, struct policy_verified *info,
		     struct appl_err *err);

/* The policy path for sig_path: sig_path without its ".sig" (-EINVAL when
 * it does not end in ".sig" or nothing named is left). */
int policy_sig_path_policy(const char *sig_path, char *out, size_t len, struct appl_err *err);

#endif
