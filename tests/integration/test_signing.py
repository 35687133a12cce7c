"""test_signing.py: `appliance keygen`, `sign` and `verify`, and signatures
that go both ways between the appliance and Debian's stock `minisign`
(installed by scripts/install-deps).

Runs as root in CI (a trust directory must belong to root); the tests that
need root skip otherwise, and a skip is a failure under CI=true. verify
never writes the rollback floor; each policy here names a deployment of its
own, so what the floor holds for others never matters.
"""

import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import tempfile
import time

from harness import main, skip, test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APPLIANCE = os.path.join(ROOT, "build", "appliance")
DIGEST = "sha256:" + "0" * 64


def policy_text(serial, expires="2099-01-01T00:00:00Z", pad="", deployment="default"):
    return ('{"policy_version": 1, "serial": %d, "expires": "%s", "deployment": "%s",\n'
            ' "image": {"layout": "image", "digest": "%s"}}\n%s'
            % (serial, expires, deployment, DIGEST, pad))


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def minisign():
    path = shutil.which("minisign")
    if not path:
        skip("minisign is not installed (scripts/install-deps)")
    return path


class Work:
    """A private temporary directory with a policy in it."""

    def __init__(self, serial=3, **kw):
        self.dir = tempfile.mkdtemp(prefix="appliance-signing.")
        self.policy = self.path("policy.json")
        self.sig = self.policy + ".sig"
        self.deployment = "t-" + secrets.token_hex(8)
        self.write_policy(serial, **kw)

    def path(self, name):
        return os.path.join(self.dir, name)

    def write_policy(self, serial, **kw):
        with open(self.policy, "w") as f:
            f.write(policy_text(serial, deployment=self.deployment, **kw))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir)


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True)


def appliance(*args):
    return run(APPLIANCE, *args)


def keygen(w, name="k"):
    pub, sec = w.path(name + ".pub"), w.path(name + ".key")
    r = appliance("keygen", "--public", pub, "--secret", sec)
    assert r.returncode == 0, r.stderr
    return pub, sec


def verify(w, *trust):
    return appliance("verify", *(trust or ()), w.sig)


def refused(r, *words):
    """r failed with one line on stderr that contains every word."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("appliance: verify: "), r.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])


def keyid_of(pub):
    """The key id in pub's comment, as the appliance prints it: minisign
    0.11 writes it without leading zeros, newer versions with them."""
    with open(pub) as f:
        return f.readline().split()[-1].zfill(16)


def minisign_keygen(w, name="m"):
    pub, sec = w.path(name + ".pub"), w.path(name + ".key")
    r = run(minisign(), "-G", "-W", "-p", pub, "-s", sec)
    assert r.returncode == 0, r.stderr
    return pub, sec


def minisign_sign(w, sec, comment=None, *extra):
    comment = comment or "file:policy.json serial:3 signed:" + now_rfc3339()
    r = run(minisign(), "-S", *extra, "-s", sec, "-m", w.policy, "-t", comment, "-x", w.sig)
    assert r.returncode == 0, r.stderr


def minisign_verify(w, pub, *extra):
    return run(minisign(), "-V", *extra, "-p", pub, "-m", w.policy, "-x", w.sig)


def flip_last_byte(path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[-1] = ord(" ") if data[-1] != ord(" ") else ord("\n")
    with open(path, "wb") as f:
        f.write(bytes(data))


def ensure_test_user():
    """The ordinary user of the rootless tests (cellkit makes it)."""
    from cellkit import ensure_user
    return ensure_user().pw_name


def user_appliance():
    """The binary, copied where the ordinary user can run it."""
    from cellkit import rootless_files
    return rootless_files()[0]


# ---- the appliance alone ------------------------------------------------------

@test
def keygen_sign_verify():
    with Work() as w:
        pub, sec = keygen(w)
        assert stat.S_IMODE(os.stat(sec).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(pub).st_mode) == 0o644
        r = appliance("sign", "--secret", sec, w.policy)
        assert r.returncode == 0, r.stderr
        with open(w.sig) as f:
            lines = f.read().splitlines()
        assert len(lines) == 4 and lines[2].startswith(
            "trusted comment: file:policy.json serial:3 signed:"), lines
        r = verify(w, "--trust", pub)
        assert r.returncode == 0, r.stderr
        assert "key id " + keyid_of(pub) in r.stdout, r.stdout
        assert "serial 3" in r.stdout and "expires 2099-01-01T00:00:00Z" in r.stdout
        assert "deployment " + w.deployment in r.stdout, r.stdout
        assert "no serial accepted yet for deployment %s in /var/lib/appliance" % w.deployment \
            in r.stdout, r.stdout


@test
def keygen_never_replaces_a_key():
    with Work() as w:
        pub, sec = keygen(w)
        with open(sec) as f:
            before = f.read()
        r = appliance("keygen", "--public", w.path("other.pub"), "--secret", sec)
        assert r.returncode == 1 and "exists" in r.stderr, r.stderr
        with open(sec) as f:
            assert f.read() == before
        assert not os.path.exists(w.path("other.pub"))


@test
def sign_refuses_an_open_secret_key_and_warns_on_expiry():
    with Work(expires="2020-01-01T00:00:00Z") as w:
        _, sec = keygen(w)
        os.chmod(sec, 0o644)
        r = appliance("sign", "--secret", sec, w.policy)
        assert r.returncode == 1 and "chmod 600" in r.stderr, r.stderr
        os.chmod(sec, 0o600)
        r = appliance("sign", "--secret", sec, w.policy)
        assert r.returncode == 0 and "expired" in r.stderr, r.stderr


# ---- what sign warns of ---------------------------------------------------------

WARNING = "appliance: sign: warning: "


def sign_doc(w, sec, **parts):
    """Sign w's policy made of parts (servers, tools, roles, clients) with
    the binary under test; the result, which must have succeeded."""
    doc = {"policy_version": 1, "serial": 3, "expires": "2099-01-01T00:00:00Z",
           "deployment": w.deployment, "image": {"layout": "image", "digest": DIGEST}}
    doc.update(parts)
    with open(w.policy, "w") as f:
        json.dump(doc, f)
    r = run(os.environ.get("APPLIANCE_BIN") or APPLIANCE, "sign", "--secret", sec, w.policy)
    assert r.returncode == 0 and "signed " in r.stdout, (r.stdout, r.stderr)
    return r


def warnings_of(r):
    return [l[len(WARNING):] for l in r.stderr.splitlines() if l.startswith(WARNING)]


SERVERS = {"fs": {"command": ["/usr/bin/true"]}, "db": {"command": ["/usr/bin/true"]}}


@test
def sign_warns_when_no_client_could_call_anything():
    with Work() as w:
        pub, sec = keygen(w)
        tools = {"fs.*": {"access": "read"}}
        roles = {"reader": {"tools": ["fs.*"]}}
        r = sign_doc(w, sec, servers=SERVERS, tools=tools, roles=roles)
        assert warnings_of(r) == ["clients: no default_role and no tokens: no client can call "
                                  "any tool"], r.stderr
        assert verify(w, "--trust", pub).returncode == 0  # signed all the same
        token = {"name": "ci", "sha256": "ab" * 32, "role": "reader"}
        r = sign_doc(w, sec, servers=SERVERS, tools=tools, roles=roles,
                     clients={"tokens": [token]})
        assert warnings_of(r) == [], r.stderr
        r = sign_doc(w, sec, servers=SERVERS, tools=tools, roles=roles,
                     clients={"default_role": "reader"})
        assert r.stderr == "", r.stderr


@test
def sign_warns_of_a_role_that_can_call_nothing_and_an_entry_no_role_uses():
    with Work() as w:
        pub, sec = keygen(w)
        r = sign_doc(w, sec, servers=dict(SERVERS, kv={"command": ["/usr/bin/true"]}),
                     tools={"fs.*": {"access": "read"}, "fs.write": {"access": "write"},
                            "db.query": {"access": "read"}, "kv.*": {"access": "write"}},
                     roles={"reader": {"tools": ["fs.*"]},
                            # a write entry without write, a tool no entry allows
                            "idle": {"tools": ["fs.write", "db.other"]},
                            "empty": {"tools": []},
                            "writer": {"tools": ["fs.write", "kv.get"], "write": True}},
                     clients={"default_role": "reader"})
        assert warnings_of(r) == [
            "roles.empty: its patterns match no tools entry that allows it a call: it can "
            "call nothing",
            "roles.idle: its patterns match no tools entry that allows it a call: it can "
            "call nothing",
            'tools."db.query": no role can call a tool through it',
        ], r.stderr
        # kv.* is used: writer's kv.get has no entry of its own, so the
        # wildcard decides it; fs.write is writer's.
        assert verify(w, "--trust", pub).returncode == 0


# ---- interoperability with minisign -------------------------------------------

@test
def appliance_signature_verifies_with_minisign():
    with Work() as w:
        pub, sec = keygen(w)
        assert appliance("sign", "--secret", sec, w.policy).returncode == 0
        for extra in ([], ["-H"]):  # -H: prehashed signatures only
            r = minisign_verify(w, pub, *extra)
            assert r.returncode == 0, r.stderr
            assert "Trusted comment: file:policy.json serial:3 signed:" in r.stdout, r.stdout


@test
def minisign_signature_verifies_with_appliance():
    with Work() as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec)
        r = verify(w, "--trust", pub)
        assert r.returncode == 0, r.stderr
        assert "key id " + keyid_of(pub) in r.stdout, r.stdout


@test
def secret_keys_cross_over():
    with Work() as w:
        # minisign signs with the appliance's secret key ...
        pub, sec = keygen(w)
        minisign_sign(w, sec)
        assert verify(w, "--trust", pub).returncode == 0
        r = run(minisign(), "-R", "-s", sec, "-p", w.path("again.pub"))
        assert r.returncode == 0, r.stderr
        with open(pub) as a, open(w.path("again.pub")) as b:
            assert a.read().splitlines()[1] == b.read().splitlines()[1]
        # ... and the appliance with minisign's
        mpub, msec = minisign_keygen(w)
        r = appliance("sign", "--secret", msec, w.policy)
        assert r.returncode == 0, r.stderr
        assert minisign_verify(w, mpub).returncode == 0


@test
def tampered_policy_refused():
    with Work() as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec)
        flip_last_byte(w.policy)
        r = verify(w, "--trust", pub)
        refused(r)
        assert r.stderr == ("appliance: verify: %s: signature does not match the file: it was "
                            "changed, or another key with the same key id signed it; a policy "
                            "must be signed again after every change\n" % w.sig), r.stderr
        assert minisign_verify(w, pub).returncode != 0


@test
def tampered_trusted_comment_refused():
    with Work(serial=4) as w:
        pub, sec = keygen(w)
        assert appliance("sign", "--secret", sec, w.policy).returncode == 0
        # the policy's bytes stay; only the signed comment is edited
        with open(w.sig) as f:
            text = f.read()
        with open(w.sig, "w") as f:
            f.write(text.replace("serial:4", "serial:3"))
        refused(verify(w, "--trust", pub), "trusted comment")
        assert minisign_verify(w, pub).returncode != 0


@test
def comment_serial_must_match():
    with Work(serial=3) as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec, "file:policy.json serial:4 signed:" + now_rfc3339())
        refused(verify(w, "--trust", pub), "differs")
        # minisign's own default comment is not of the fixed form
        r = run(minisign(), "-S", "-s", sec, "-m", w.policy, "-x", w.sig)
        assert r.returncode == 0, r.stderr
        refused(verify(w, "--trust", pub), "file:NAME serial:N")


@test
def legacy_signature_refused():
    with Work() as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec, None, "-l")
        # minisign itself still accepts it unless told -H
        assert minisign_verify(w, pub).returncode == 0
        assert minisign_verify(w, pub, "-H").returncode != 0
        refused(verify(w, "--trust", pub), "legacy")


@test
def untrusted_key_refused():
    with Work() as w:
        pub, _ = keygen(w, "trusted")
        other_pub, other_sec = minisign_keygen(w, "other")
        minisign_sign(w, other_sec)
        r = verify(w, "--trust", pub)
        refused(r)
        assert r.stderr == ("appliance: verify: %s: signed by key id %s, which is not trusted; "
                            "name the signer's public key with --trust\n"
                            % (w.sig, keyid_of(other_pub))), r.stderr


@test
def expired_refused():
    with Work(expires="2020-01-01T00:00:00Z") as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec)
        r = verify(w, "--trust", pub)
        refused(r)
        assert r.stderr == ("appliance: verify: %s: expired at 2020-01-01T00:00:00Z; sign it "
                            "again with a later expires and a higher serial\n" % w.policy), r.stderr


@test
def rollback_judged_without_changing_state():
    """An ordinary user's floor (which that user may name with --state-dir),
    written as the appliance writes it: verify judges against it and never
    changes it."""
    user = pwd.getpwnam(ensure_test_user())
    with Work(serial=3) as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec)
        os.chmod(w.dir, 0o755)
        state = w.path("state")
        os.mkdir(state, 0o700)
        floor = os.path.join(state, "policy.state")
        text = ("appliance-policy-state 2\n%s 5 %s %s 2025-01-31T12:00:00Z\n"
                % (w.deployment, "ab" * 32, keyid_of(pub)))
        with open(floor, "w") as f:
            f.write(text)
        os.chmod(floor, 0o600)
        os.chown(state, user.pw_uid, user.pw_gid)
        os.chown(floor, user.pw_uid, user.pw_gid)
        for name in ("policy.json", "policy.json.sig", os.path.basename(pub)):
            os.chmod(w.path(name), 0o644)
        before = os.stat(floor)

        def user_verify():
            return subprocess.run([user_appliance(), "verify", "--trust", pub, "--state-dir",
                                   state, w.sig], capture_output=True, text=True,
                                  user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                                  env={"PATH": "/usr/bin:/bin", "HOME": user.pw_dir}, cwd="/")
        r = user_verify()
        refused(r)
        assert r.stderr == ("appliance: verify: %s: rollback refused: serial 3 is lower than "
                            "serial 5, already accepted; sign the policy again with a higher "
                            "serial\n" % w.policy), r.stderr
        # serial 5 with other bytes than those accepted
        w.write_policy(5)
        minisign_sign(w, sec, "file:policy.json serial:5 signed:" + now_rfc3339())
        refused(user_verify(), "different content")
        w.write_policy(6)
        minisign_sign(w, sec, "file:policy.json serial:6 signed:" + now_rfc3339())
        r = user_verify()
        assert r.returncode == 0, r.stderr
        assert "highest accepted serial 5 for deployment " + w.deployment in r.stdout, r.stdout
        after = os.stat(floor)
        assert (before.st_mtime_ns, before.st_ino) == (after.st_mtime_ns, after.st_ino)
        with open(floor) as f:
            assert f.read() == text
        assert sorted(os.listdir(state)) == ["policy.state"]


@test
def verify_as_root_takes_no_state_directory():
    if os.geteuid() != 0:
        skip("the fixed floor is root's")
    with Work() as w:
        pub, sec = keygen(w)
        assert appliance("sign", "--secret", sec, w.policy).returncode == 0
        fresh = w.path("fresh")
        r = appliance("verify", "--trust", pub, "--state-dir", fresh, w.sig)
        refused(r)
        assert r.stderr == ("appliance: verify: --state-dir is refused as root: the rollback "
                            "floor is always /var/lib/appliance, so that no command line can "
                            "point the appliance at a fresh, empty one; leave --state-dir out\n"
                            ), r.stderr
        assert not os.path.exists(fresh)


# ---- the trust directory -------------------------------------------------------

def trust_dir(w, pub):
    d = w.path("trusted.d")
    os.mkdir(d)
    os.chmod(d, 0o755)
    key = os.path.join(d, "admin.pub")
    shutil.copy(pub, key)
    os.chmod(key, 0o644)
    return d, key


@test
def trust_directory_rules():
    if os.geteuid() != 0:
        skip("a trust directory must belong to root")
    with Work() as w:
        pub, sec = minisign_keygen(w)
        minisign_sign(w, sec)
        d, key = trust_dir(w, pub)
        assert verify(w, "--trust-dir", d).returncode == 0
        os.chmod(d, 0o757)
        r = verify(w, "--trust-dir", d)
        refused(r)
        assert r.stderr == ("appliance: verify: trust directory: %s is writable by group or "
                            "others; chmod go-w %s\n" % (d, d)), r.stderr
        os.chmod(d, 0o755)
        os.chmod(key, 0o666)
        r = verify(w, "--trust-dir", d)
        refused(r)
        assert r.stderr == ("appliance: verify: trust key %s: writable by group or others; "
                            "chmod go-w %s\n" % (key, key)), r.stderr
        os.chmod(key, 0o644)
        os.chown(key, 65534, 65534)
        r = verify(w, "--trust-dir", d)
        refused(r)
        assert r.stderr == ("appliance: verify: trust key %s: owned by uid 65534, not root; "
                            "chown root %s\n" % (key, key)), r.stderr
        os.chown(key, 0, 0)
        os.chown(d, 65534, 65534)
        r = verify(w, "--trust-dir", d)
        refused(r)
        assert r.stderr == ("appliance: verify: trust directory: %s is owned by uid 65534, not "
                            "root; chown root %s\n" % (d, d)), r.stderr
        os.chown(d, 0, 0)
        link = w.path("link.d")
        os.symlink(d, link)
        refused(verify(w, "--trust-dir", link), link, "symlink")
        os.chmod(w.dir, 0o777)
        refused(verify(w, "--trust-dir", d), w.dir, "writable by group or others")
        os.chmod(w.dir, 0o700)
        assert verify(w, "--trust-dir", d).returncode == 0


# ---- sign --serial --------------------------------------------------------------------

@test
def sign_writes_the_serial_into_the_file_and_nothing_else():
    with Work(serial=3) as w:
        pub, sec = keygen(w)
        with open(w.policy) as f:
            before = f.read()
        os.chmod(w.policy, 0o640)
        r = appliance("sign", "--secret", sec, "--serial", "next", w.policy)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("wrote serial 4 into %s (it was 3)\n" % w.policy), r.stdout
        with open(w.policy) as f:
            assert f.read() == before.replace('"serial": 3,', '"serial": 4,')
        assert stat.S_IMODE(os.stat(w.policy).st_mode) == 0o640
        assert "serial 4" in verify(w, "--trust", pub).stdout
        # now: the clock, or the file's + 1 when two signings share a second
        first = int(time.time())
        serials = []
        for _ in range(2):
            r = appliance("sign", "--secret", sec, "--serial", "now", w.policy)
            assert r.returncode == 0, r.stderr
            with open(w.policy) as f:
                serials.append(json.load(f)["serial"])
        assert first <= serials[0] <= int(time.time()) + 1 and serials[1] > serials[0], serials
        r = appliance("sign", "--secret", sec, "--serial", "42", w.policy)
        assert r.returncode == 0 and "serial 42" in verify(w, "--trust", pub).stdout, r.stderr


@test
def sign_refuses_a_serial_it_cannot_write():
    with Work() as w:
        _, sec = keygen(w)
        for value in ("later", "0", "07", "-1", "9223372036854775808"):
            r = appliance("sign", "--secret", sec, "--serial", value, w.policy)
            assert r.returncode == 2 and r.stderr.startswith(
                "appliance: sign: --serial takes now, next or a number of 1 to "
                "9223372036854775807\n"), (value, r.stderr)
        text = '{"policy_version": 1, "serial": "3"}\n'
        with open(w.policy, "w") as f:
            f.write(text)
        r = appliance("sign", "--secret", sec, "--serial", "next", w.policy)
        assert r.returncode == 1 and r.stderr == (
            "appliance: sign: %s: serial: must be an integer of 1 to 9223372036854775807 to be "
            "replaced\n" % w.policy), r.stderr
        with open(w.policy, "w") as f:
            f.write(text.replace('"serial": "3"', '"version": 3'))
        r = appliance("sign", "--secret", sec, "--serial", "now", w.policy)
        assert r.returncode == 1 and r.stderr == (
            'appliance: sign: %s: no top-level serial to replace; add "serial": 1 to the '
            'policy\n' % w.policy), r.stderr
        with open(w.policy) as f:
            assert f.read() == text.replace('"serial": "3"', '"version": 3')
        assert not os.path.exists(w.sig)


# ---- what a refusal says to do ---------------------------------------------------

@test
def an_unsigned_policy_or_a_missing_signature_says_how_to_sign():
    with Work() as w:
        sign = "`appliance sign --secret KEY %s`" % w.policy
        for argv in (["verify", w.policy], ["run", "--policy", w.policy]):
            r = appliance(*argv)
            want = ("%s is the unsigned policy; sign it with %s, which writes %s, and pass "
                    "that\n" % (w.policy, sign, w.sig))
            assert r.returncode == 1 and r.stderr.endswith(": " + want), (argv, r.stderr)
        r = appliance("verify", w.sig)
        assert r.stderr == ("appliance: verify: %s: no such file; sign the policy with %s\n"
                            % (w.sig, sign)), r.stderr
        pub, sec = keygen(w)
        assert appliance("sign", "--secret", sec, w.policy).returncode == 0
        r = appliance("verify", "--trust", pub, w.policy)
        assert r.stderr == ("appliance: verify: %s is the unsigned policy; pass its signature, "
                            "%s\n" % (w.policy, w.sig)), r.stderr
        os.rename(w.policy, w.path("other.json"))
        r = appliance("verify", "--trust", pub, w.sig)
        assert r.stderr == ("appliance: verify: %s: no such file; the policy %s signs must be "
                            "beside it, under the name it was signed with\n"
                            % (w.policy, w.sig)), r.stderr
        # and a signed pair renamed together was signed for the old name
        os.rename(w.sig, w.path("other.json.sig"))
        r = appliance("verify", "--trust", pub, w.path("other.json.sig"))
        assert r.stderr == ('appliance: verify: %s: signed for file "policy.json", not '
                            '"other.json"; sign it again under its new name, or give it back '
                            'its old one\n' % w.path("other.json.sig")), r.stderr


@test
def an_unknown_key_names_the_one_meant():
    with Work() as w:
        _, sec = keygen(w)
        with open(w.policy, "w") as f:
            f.write(policy_text(3, deployment=w.deployment)[:-2]
                    + ', "limits": {"deadline": 5}}\n')
        r = appliance("sign", "--secret", sec, w.policy)
        assert r.returncode == 1 and r.stderr == (
            "appliance: sign: %s: limits.deadline: unknown key; did you mean deadline_s?\n"
            % w.policy), r.stderr


@test
def a_missing_or_empty_trust_directory_says_what_to_do():
    if os.geteuid() != 0:
        skip("a trust directory must belong to root")
    with Work() as w:
        pub, sec = keygen(w)
        assert appliance("sign", "--secret", sec, w.policy).returncode == 0
        missing = w.path("nowhere.d")
        r = verify(w, "--trust-dir", missing)
        assert r.stderr == ("appliance: verify: trust directory %s does not exist: check "
                            "--trust-dir, or make it (root's, not writable by group or others) "
                            "and put the public key of the policy's signer there\n" % missing), \
            r.stderr
        # the default one, with /etc/appliance out of sight
        script = ('if [ -e /etc/appliance ]; then mount -t tmpfs none /etc/appliance; fi; '
                  'exec "$@"')
        r = run("unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh",
                APPLIANCE, "run", "--policy", w.sig)
        assert r.stderr == ("appliance: trust directory /etc/appliance/trusted.d does not exist: "
                            "`make install` makes it; put the public key of the policy's signer "
                            "there, or name another directory with --trust-dir DIR\n"), r.stderr
        empty = w.path("empty.d")
        os.mkdir(empty, 0o755)
        r = verify(w, "--trust-dir", empty)
        assert r.stderr == ("appliance: verify: trust directory %s: no key (*.pub) in it; put "
                            "the public key of the policy's signer there\n" % empty), r.stderr
        other_pub, _ = keygen(w, "other")
        shutil.copy(other_pub, os.path.join(empty, "other.pub"))
        r = verify(w, "--trust-dir", empty)
        assert r.stderr == ("appliance: verify: %s: signed by key id %s, which is not trusted; "
                            "put the signer's public key in %s, or sign with a key that is "
                            "there\n" % (w.sig, keyid_of(pub), empty)), r.stderr


@test
def options_are_exact_and_trust_sources_exclusive():
    with Work() as w:
        r = appliance("verify", "--trust", "a", "--trust-dir", "b", w.sig)
        assert r.returncode == 2, r.stderr
        # an abbreviated option is not taken for another one
        for args in (["verify", "--trust-d", w.dir, w.sig], ["sign", "--sec", "k", w.policy],
                     ["keygen", "--pub", "a", "--secret", "b"]):
            r = appliance(*args)
            assert r.returncode == 2 and "spelled out in full" in r.stderr, (args, r.stderr)


if __name__ == "__main__":
    main()
