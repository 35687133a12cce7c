/* trust.c: trust directories and key files (see trust.h). */
#define _GNU_SOURCE
#include "policy/trust.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"

struct policy_trust {
	size_t n;
	struct policy_pubkey keys[APPL_TRUST_KEYS_MAX];
	char names[APPL_TRUST_KEYS_MAX][NAME_MAX + 1]; /* for messages */
};

static struct policy_trust *trust_new(struct appl_err *err)
{
	struct policy_trust *t = calloc(1, sizeof(*t));

	if (!t)
		appl_err_set(err, -ENOMEM, "out of memory");
	return t;
}

void policy_trust_free(struct policy_trust *t)
{
	free(t);
}

size_t policy_trust_count(const struct policy_trust *t)
{
	return t->n;
}

const struct policy_pubkey *policy_trust_find(const struct policy_trust *t,
					      const unsigned char keyid[POLICY_KEYID_BYTES])
{
	for (size_t i = 0; i < t->n; i++)
		if (memcmp(t->keys[i].keyid, keyid, POLICY_KEYID_BYTES) == 0)
			return &t->keys[i];
	return NULL;
}

static int trust_add(struct policy_trust *t, const struct policy_pubkey *pk, const char *name,
		     const char *dir, struct appl_err *err)
{
	char hex[POLICY_KEYID_HEX];

	/* Two files with one key id: one of them is not what its name says,
	 * and a signature could not tell which key is meant. */
	for (size_t i = 0; i < t->n; i++) {
		if (memcmp(t->keys[i].keyid, pk->keyid, POLICY_KEYID_BYTES) != 0)
			continue;
		policy_keyid_hex(pk->keyid, hex);
		return appl_err_set(err, -EEXIST,
				    "trust directory %s: key id %s is in both %s and %s", dir, hex,
				    t->names[i], name);
	}
	if (t->n == APPL_TRUST_KEYS_MAX)
		return appl_err_set(err, -E2BIG, "trust directory %s: more than %u keys", dir,
				    APPL_TRUST_KEYS_MAX);
	t->keys[t->n] = *pk;
	/* Only for messages: a long name may be cut. */
	snprintf(t->names[t->n], sizeof(t->names[0]), "%s", name);
	t->n++;
	return 0;
}

static int abs_path(const char *dir, char *abs, size_t len, struct appl_err *err)
{
	char cwd[PATH_MAX];

	if (dir[0] == '/') {
		if (appl_path_join(abs, len, dir, "", "") < 0)
			return appl_err_set(err, -ENAMETOOLONG, "trust directory: path too long");
		return 0;
	}
	if (!getcwd(cwd, sizeof(cwd)))
		return appl_err_errno(err, -errno, errno, "trust directory: working directory");
	if (appl_path_join(abs, len, cwd, "/", dir) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "trust directory: path too long");
	return 0;
}

/* ---- the keys in it ------------------------------------------------------- */

static bool is_key_name(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".pub") == 0;
}

static int key_fd_check(int fd, const char *path, uid_t owner, struct appl_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return appl_err_errno(err, -errno, errno, "trust key %s", path);
	if (!S_ISREG(st.st_mode))
		return appl_err_set(err, -EPERM, "trust key %s: not a regular file", path);
	if (st.st_uid != owner && owner == 0)
		return appl_err_set(err, -EPERM,
				    "trust key %s: owned by uid %u, not root; chown root %s", path,
				    (unsigned)st.st_uid, path);
	if (st.st_uid != owner)
		return appl_err_set(err, -EPERM,
				    "trust key %s: owned by uid %u, not the required owner", path,
				    (unsigned)st.st_uid);
	if (st.st_mode & (S_IWGRP | S_IWOTH))
		return appl_err_set(err, -EPERM,
				    "trust key %s: writable by group or others; chmod go-w %s",
				    path, path);
	return 0;
}

static int trust_key_add(int dfd, const char *dir, const char *name, uid_t owner,
			 struct policy_trust *t, struct appl_err *err)
{
	char path[PATH_MAX], *buf = NULL;
	struct policy_pubkey pk;
	size_t len;
	int fd = -1, rc;

	if (appl_path_join(path, sizeof(path), dir, "/", name) < 0)
		return appl_err_set(err, -ENAMETOOLONG, "trust directory %s: name too long", dir);
	/* O_NONBLOCK: a fifo named like a key must not hang the start. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ELOOP)
		return appl_err_set(err, -EPERM, "trust key %s: a symlink (refused)", path);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "trust key %s", path);
	rc = key_fd_check(fd, path, owner, err);
	if (rc == 0)
		rc = appl_fd_read(fd, APPL_KEY_FILE_MAX, path, &buf, &len, err);
	close(fd);
	if (rc == 0 && (rc = policy_pubkey_parse(buf, len, &pk, err)) < 0)
		appl_err_prefix(err, "trust key %s", path);
	free(buf);
	if (rc == 0)
		rc = trust_add(t, &pk, name, dir, err);
	return rc;
}

static int trust_dir_scan(int dfd, const char *dir, uid_t owner, struct policy_trust *t,
			  struct appl_err *err)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	unsigned entries = 0;
	int rc = 0;

	if (!d) {
		close(dfd);
		return appl_err_errno(err, -errno, errno, "trust directory %s", dir);
	}
	for (errno = 0; rc == 0 && (de = readdir(d)) != NULL; errno = 0) {
		/* A huge directory must not stall the start for ever. */
		if (++entries > APPL_TRUST_ENTRIES_MAX)
			rc = appl_err_set(err, -E2BIG, "trust directory %s: more than %u entries",
					  dir, APPL_TRUST_ENTRIES_MAX);
		else if (is_key_name(de->d_name))
			rc = trust_key_add(dirfd(d), dir, de->d_name, owner, t, err);
	}
	if (rc == 0 && errno != 0)
		rc = appl_err_errno(err, -errno, errno, "trust directory %s", dir);
	closedir(d);
	if (rc == 0 && t->n == 0)
		rc = appl_err_set(err, -ENOKEY,
				  "trust directory %s: no key (*.pub) in it; put the public key "
				  "of the policy's signer there",
				  dir);
	return rc;
}

int policy_trust_dir_load_owner(const char *dir, uid_t owner, struct policy_trust **out,
				struct appl_err *err)
{
	char abs[PATH_MAX];
	struct policy_trust *t;
	int fd = -1, rc;

	*out = NULL;
	if ((rc = abs_path(dir, abs, sizeof(abs), err)) < 0 ||
	    (rc = appl_dir_open_strict(abs, owner, false, "trust directory", &fd, err)) < 0)
		return rc;
	t = trust_new(err);
	if (!t) {
		close(fd);
		return -ENOMEM;
	}
	rc = trust_dir_scan(fd, abs, owner, t, err);
	if (rc < 0) {
		policy_trust_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int policy_trust_dir_load(const char *dir, struct policy_trust **out, struct appl_err *err)
{
	return policy_trust_dir_load_owner(dir, 0, out, err);
}

int policy_trust_file_load(const char *path, struct policy_trust **out, struct appl_err *err)
{
	struct policy_trust *t;
	struct policy_pubkey pk;
	char *buf;
	size_t len;
	int rc;

	*out = NULL;
	if ((rc = appl_file_read(path, APPL_KEY_FILE_MAX, &buf, &len, err)) < 0)
		return rc;
	rc = policy_pubkey_parse(buf, len, &pk, err);
	free(buf);
	if (rc < 0) {
		appl_err_prefix(err, "%s", path);
		return rc;
	}
	if (!(t = trust_new(err)))
		return -ENOMEM;
	if ((rc = trust_add(t, &pk, path, path, err)) < 0) {
		policy_trust_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

/* ---- secret keys ---------------------------------------------------------- */

static int seckey_fd_check(int fd, const char *path, struct appl_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return appl_err_errno(err, -errno, errno, "%s", path);
	if (!S_ISREG(st.st_mode))
		return appl_err_set(err, -EINVAL, "%s: not a regular file", path);
	/* Like ssh with private keys: a key others could read is no secret. */
	if (st.st_mode & (S_IRWXG | S_IRWXO))
		return appl_err_set(err, -EPERM,
				    "secret key %s: group or others have access (mode %04o); "
				    "chmod 600 it",
				    path, (unsigned)(st.st_mode & 07777));
	if (st.st_size > (off_t)APPL_KEY_FILE_MAX)
		return appl_err_set(err, -EFBIG, "secret key %s: more than the cap of %u bytes",
				    path, APPL_KEY_FILE_MAX);
	return 0;
}

/* Read fd to its end into buf (cap bytes; one more is room to see an
 * overlong file). */
static int read_capped(int fd, char *buf, size_t cap, size_t *len)
{
	size_t have = 0;

	for (;;) {
		ssize_t n = read(fd, buf + have, cap + 1 - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > cap)
			return -EFBIG;
	}
	*len = have;
	return 0;
}

int policy_seckey_file_read(const char *path, struct policy_seckey **out, struct appl_err *err)
{
	char *buf;
	size_t len = 0;
	int fd = -1, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "secret key %s", path);
	if ((rc = seckey_fd_check(fd, path, err)) < 0) {
		close(fd);
		return rc;
	}
	buf = sodium_malloc(APPL_KEY_FILE_MAX + 1);
	if (!buf) {
		close(fd);
		return appl_err_set(err, -ENOMEM, "no memory for a secret key");
	}
	rc = read_capped(fd, buf, APPL_KEY_FILE_MAX, &len);
	close(fd);
	if (rc < 0)
		appl_err_errno(err, rc, -rc, "secret key %s", path);
	else if ((rc = policy_seckey_parse(buf, len, out, err)) < 0)
		appl_err_prefix(err, "%s", path);
	sodium_free(buf);
	return rc;
}

/* Create path (which must not exist) with mode and exactly these bytes,
 * on disk before we return; on failure nothing is left behind. */
static int file_create(const char *path, mode_t mode, const char *buf, size_t len,
		       struct appl_err *err)
{
	int fd = -1, rc;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0 && errno == EEXIST)
		return appl_err_set(err, -EEXIST, "%s exists; a key file is never replaced", path);
	if (fd < 0)
		return appl_err_errno(err, -errno, errno, "%s", path);
	/* The umask may only have narrowed the mode; make it exact. */
	rc = fchmod(fd, mode) < 0 ? -errno : 0;
	if (rc == 0)
		rc = appl_fd_write_all(fd, buf, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc < 0) {
		unlink(path);
		return appl_err_errno(err, rc, -rc, "%s", path);
	}
	return 0;
}

static int keypair_files(const char *pub_path, const char *sec_path, const struct policy_seckey *sk,
			 struct policy_pubkey *pk, struct appl_err *err)
{
	char pub[APPL_KEY_FILE_MAX], *sec = NULL;
	size_t pub_len, sec_len;
	int rc;

	if ((rc = policy_pubkey_format(pk, pub, sizeof(pub), &pub_len, err)) < 0 ||
	    (rc = policy_seckey_format(sk, &sec, &sec_len, err)) < 0)
		return rc;
	rc = file_create(sec_path, 0600, sec, sec_len, err);
	sodium_free(sec);
	if (rc < 0)
		return rc;
	if ((rc = file_create(pub_path, 0644, pub, pub_len, err)) < 0)
		unlink(sec_path);
	return rc;
}

int policy_keypair_write(const char *pub_path, const char *sec_path, struct policy_pubkey *pk,
			 struct appl_err *err)
{
	struct policy_seckey *sk;
	struct policy_pubkey pub;
	int rc;

	if (strcmp(pub_path, sec_path) == 0)
		return appl_err_set(err, -EINVAL, "the public and secret key paths are the same");
	/* Fail before a key is made when the public path is taken. */
	if (access(pub_path, F_OK) == 0)
		return appl_err_set(err, -EEXIST, "%s exists; a key file is never replaced",
				    pub_path);
	if ((rc = policy_seckey_generate(&sk, &pub, err)) < 0)
		return rc;
	rc = keypair_files(pub_path, sec_path, sk, &pub, err);
	policy_seckey_free(sk);
	if (rc == 0 && pk)
		*pk = pub;
	return rc;
}
