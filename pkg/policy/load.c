/* load.c: the verification pipeline and signing (see load.h). */
#include "policy/load.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"

#define SIG_SUFFIX ".sig"

/* Everything one load holds; released by load_done. */
struct load {
	char policy_path[PATH_MAX];
	char base_dir[PATH_MAX]; /* absolute, so image.layout comes out absolute */
	const char *name;	 /* the policy's file name, in policy_path */
	char *sig_buf, *pol_buf;
	size_t sig_len, pol_len;
	struct policy_sig sig;
	struct policy_comment tc;
	struct policy *policy;
};

static void load_done(struct load *l)
{
	free(l->sig_buf);
	free(l->pol_buf);
	policy_free(l->policy);
}

int policy_sig_path_policy(const char *sig_path, char *out, size_t len, struct appl_err *err)
{
	size_t n = strlen(sig_path), s = strlen(SIG_SUFFIX);

	if (n <= s || strcmp(sig_path + n - s, SIG_SUFFIX) != 0 || sig_path[n - s - 1] == '/')
		return appl_err_set(err, -EINVAL, "%s: a signature file name must end in \".sig\"",
				    sig_path);
	if (n - s >= len)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", sig_path);
	memcpy(out, sig_path, n - s);
	out[n - s] = '\0';
	return 0;
}

/* The file name and the absolute directory of path (a lexical split; the
 * directory is only handed to policy_parse to resolve image.layout). */
static int path_split(const char *path, char *dir, size_t dir_len, const char **name,
		      struct appl_err *err)
{
	const char *slash = strrchr(path, '/');
	char cwd[PATH_MAX], head[PATH_MAX];
	size_t n = slash ? (size_t)(slash - path) : 0;

	*name = slash ? slash + 1 : path;
	if (n >= sizeof(head))
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", path);
	memcpy(head, path, n);
	head[n] = '\0';
	if (path[0] == '/') {
		if (appl_path_join(dir, dir_len, n ? head : "/", "", "") < 0)
			return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", path);
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return appl_err_errno(err, -errno, errno, "working directory");
	if (appl_path_join(dir, dir_len, cwd, n ? "/" : "", head) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", path);
	return 0;
}

/* Steps 1 and 2: both files under their caps, the signature's form. */
static int load_read(struct load *l, const char *sig_path, struct appl_err *err)
{
	int rc;

	if ((rc = policy_sig_path_policy(sig_path, l->policy_path, sizeof(l->policy_path), err)) <
		    0 ||
	    (rc = path_split(l->policy_path, l->base_dir, sizeof(l->base_dir), &l->name, err)) < 0)
		return rc;
	if ((rc = appl_file_read(sig_path, APPL_SIGNATURE_FILE_MAX, &l->sig_buf, &l->sig_len,
				 err)) < 0 ||
	    (rc = appl_file_read(l->policy_path, APPL_POLICY_FILE_MAX, &l->pol_buf, &l->pol_len,
				 err)) < 0)
		return rc;
	if ((rc = policy_sig_parse(l->sig_buf, l->sig_len, &l->sig, err)) < 0)
		appl_err_prefix(err, "%s", sig_path);
	return rc;
}

/* Steps 3 to 6: a trusted key, the bytes, the trusted comment. */
static int load_verify(struct load *l, const char *sig_path, const struct policy_trust *trust,
		       struct policy_verified *info, struct appl_err *err)
{
	const struct policy_pubkey *key = policy_trust_find(trust, l->sig.keyid);
	int rc;

	policy_keyid_hex(l->sig.keyid, info->keyid_hex);
	if (!key)
		return appl_err_set(err, -ENOKEY, "%s: signed by key id %s, which is not trusted",
				    sig_path, info->keyid_hex);
	if ((rc = policy_sig_verify(&l->sig, key, l->pol_buf, l->pol_len, err)) < 0 ||
	    (rc = policy_comment_parse(l->sig.comment, l->sig.comment_len, &l->tc, err)) < 0) {
		appl_err_prefix(err, "%s", sig_path);
		return rc;
	}
	memcpy(info->file, l->tc.file, sizeof(info->file));
	info->signed_at = l->tc.signed_at;
	/* The name is signed too: a policy signed for another file (another
	 * appliance's) with a higher serial must not pass for this one. */
	if (strcmp(l->tc.file, l->name) != 0)
		return appl_err_set(err, -EBADMSG,
				    "%s: signed for file \"%s\", not \"%s\"; sign it again under "
				    "its new name, or give it back its old one",
				    sig_path, l->tc.file, l->name);
	return 0;
}

/* Steps 7 to 9: parse, then serial and expiry. */
static int load_judge(struct load *l, int64_t now, struct policy_verified *info,
		      struct appl_err *err)
{
	char when[POLICY_TIME_STR];
	int rc;

	if ((rc = policy_parse(l->pol_buf, l->pol_len, l->base_dir, &l->policy, err)) < 0 ||
	    (rc = policy_code_files_read(l->policy, err)) < 0) {
		appl_err_prefix(err, "%s", l->policy_path);
		return rc;
	}
	info->serial = policy_serial(l->policy);
	info->expires = policy_expires(l->policy);
	snprintf(info->deployment, sizeof(info->deployment), "%s", policy_deployment(l->policy));
	/* The serial in the comment is what a signer saw and meant. */
	if (info->serial != l->tc.serial)
		return appl_err_set(err, -EBADMSG,
				    "%s: serial %" PRIu64 " differs from serial %" PRIu64
				    " in the signature's trusted comment",
				    l->policy_path, info->serial, l->tc.serial);
	if (info->expires <= now) {
		if (policy_sig_time_format(info->expires, when, sizeof(when)) < 0)
			memcpy(when, "(out of range)", 15);
		return appl_err_set(err, -EKEYEXPIRED,
				    "%s: expired at %s; sign it again with a later expires and a "
				    "higher serial",
				    l->policy_path, when);
	}
	return 0;
}

/* Step 10. */
static int load_rollback(const struct load *l, const char *state_dir, int64_t now, bool commit,
			 const struct policy_verified *info, struct appl_err *err)
{
	struct policy_state st;
	int rc;

	if (commit)
		rc = policy_state_commit(state_dir, info->deployment, info->serial, info->hash,
					 info->keyid_hex, now, NULL, err);
	else if ((rc = policy_state_read(state_dir, info->deployment, &st, err)) == 0)
		rc = policy_state_check(&st, info->serial, info->hash, err);
	if (rc < 0)
		appl_err_prefix(err, "%s", l->policy_path);
	return rc;
}

int policy_load(const char *sig_path, const struct policy_trust *trust, const char *state_dir,
		int64_t now, bool commit, struct policy **policy, struct policy_verified *info,
		struct appl_err *err)
{
	struct policy_verified local;
	struct load *l;
	int rc;

	if (policy)
		*policy = NULL;
	if (!info)
		info = &local;
	memset(info, 0, sizeof(*info));
	/* The signature and the paths are large for a stack. */
	l = calloc(1, sizeof(*l));
	if (!l)
		return appl_err_set(err, -ENOMEM, "out of memory");
	if ((rc = load_read(l, sig_path, err)) == 0 &&
	    (rc = load_verify(l, sig_path, trust, info, err)) == 0 &&
	    (rc = load_judge(l, now, info, err)) == 0) {
		if (crypto_hash_sha256(info->hash, (const unsigned char *)l->pol_buf, l->pol_len) !=
		    0)
			rc = appl_err_set(err, -EIO, "SHA-256 failed");
		else if (state_dir)
			rc = load_rollback(l, state_dir, now, commit, info, err);
	}
	if (rc == 0 && policy) {
		*policy = l->policy;
		l->policy = NULL;
	}
	load_done(l);
	free(l);
	return rc;
}

/* ---- signing -------------------------------------------------------------- */

static int sign_write(const struct load *l, const struct policy_seckey *sk, int64_t now,
		      const char *sig_path, struct appl_err *err)
{
	char tc[APPL_TRUSTED_COMMENT_MAX + 1], text[APPL_SIGNATURE_FILE_MAX];
	size_t len;
	int rc;

	if ((rc = policy_comment_format(l->name, policy_serial(l->policy), now, tc, sizeof(tc),
					err)) < 0 ||
	    (rc = policy_sig_create(sk, l->pol_buf, l->pol_len, tc, text, sizeof(text), &len,
				    err)) < 0) {
		appl_err_prefix(err, "%s", l->policy_path);
		return rc;
	}
	return policy_file_replace(sig_path, text, len, 0644, err);
}

static int sign_prepare(struct load *l, const char *policy_path, char *sig_path, size_t sig_len,
			struct appl_err *err)
{
	int rc;

	if (appl_path_join(l->policy_path, sizeof(l->policy_path), policy_path, "", "") < 0 ||
	    appl_path_join(sig_path, sig_len, policy_path, SIG_SUFFIX, "") < 0)
		return appl_err_set(err, -ENAMETOOLONG, "%s: path too long", policy_path);
	if ((rc = path_split(l->policy_path, l->base_dir, sizeof(l->base_dir), &l->name, err)) <
		    0 ||
	    (rc = appl_file_read(policy_path, APPL_POLICY_FILE_MAX, &l->pol_buf, &l->pol_len,
				 err)) < 0)
		return rc;
	/* Sign only what the appliance would accept, and take the serial
	 * from the document itself. */
	if ((rc = policy_parse(l->pol_buf, l->pol_len, l->base_dir, &l->policy, err)) < 0 ||
	    (rc = policy_code_files_read(l->policy, err)) < 0)
		appl_err_prefix(err, "%s", policy_path);
	return rc;
}

int policy_file_sign(const char *policy_path, const struct policy_seckey *sk, int64_t now,
		     char *sig_path, size_t sig_len, struct policy_verified *info,
		     struct appl_err *err)
{
	struct policy_pubkey pk;
	struct load *l;
	int rc;

	if (info)
		memset(info, 0, sizeof(*info));
	l = calloc(1, sizeof(*l));
	if (!l)
		return appl_err_set(err, -ENOMEM, "out of memory");
	rc = sign_prepare(l, policy_path, sig_path, sig_len, err);
	if (rc == 0)
		rc = sign_write(l, sk, now, sig_path, err);
	if (rc == 0 && info) {
		policy_seckey_pubkey(sk, &pk);
		policy_keyid_hex(pk.keyid, info->keyid_hex);
		info->serial = policy_serial(l->policy);
		info->expires = policy_expires(l->policy);
		info->signed_at = now;
		snprintf(info->file, sizeof(info->file), "%s", l->name);
		snprintf(info->deployment, sizeof(info->deployment), "%s",
			 policy_deployment(l->policy));
		if (crypto_hash_sha256(info->hash, (const unsigned char *)l->pol_buf, l->pol_len) !=
		    0)
			rc = appl_err_set(err, -EIO, "SHA-256 failed");
	}
	load_done(l);
	free(l);
	return rc;
}
