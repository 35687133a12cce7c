"""test_policy_cell.py: `appliance cell --policy` takes everything from a
verified policy: keygen, sign, verify, then cells whose limits come from the
policy, and every way a policy is refused before any cell runs."""

import json
import os
import shutil
import subprocess
import secrets
import tempfile
import time

from harness import main, test
from cellkit import APPLIANCE, ensure_user, rootless_files, digest, TEST_USER
from policykit import START_INPUT

_work = None
_keyids = {}


def work():
    """A root-owned scratch directory with a trust directory and a key."""
    global _work
    if _work is None:
        _work = tempfile.mkdtemp(prefix="appliance-policy-test.")
        os.chmod(_work, 0o755)
        os.mkdir(os.path.join(_work, "trusted.d"), 0o755)
        for k, pub in (("k1", os.path.join(_work, "trusted.d", "k1.pub")),
                       ("k2", os.path.join(_work, "k2.pub"))):
            out = app(["keygen", "--public", pub, "--secret",
                       os.path.join(_work, k + ".key")]).stdout.decode()
            _keyids[k] = out.split("key id ")[1].split()[0]
    return _work


def app(args, code=None, check=True, **kw):
    r = subprocess.run([APPLIANCE] + args, input=code.encode() if code else None,
                       capture_output=True, **kw)
    if check:
        assert r.returncode == 0, (args, r.stderr.decode())
    return r


def fresh_deployment():
    """A deployment of this run alone: its rollback floor starts empty in the
    appliance's one floor (/var/lib/appliance as root)."""
    return "t-" + secrets.token_hex(8)


def write_policy(name, serial, limits=None, expires="2099-01-01T00:00:00Z", key="k1",
                 layout=None, rootless=False, deployment=None, image_digest=None,
                 platform=None):
    path = os.path.join(work(), name)
    doc = {"policy_version": 1, "serial": serial, "expires": expires,
           "deployment": deployment or fresh_deployment(),
           "image": {"layout": layout or os.path.join(os.path.dirname(APPLIANCE), "image"),
                     "digest": image_digest or digest()},
           "runtime": dict({"rootless": rootless}, **({"platform": platform} if platform else {}))}
    if limits:
        doc["limits"] = limits
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    app(["sign", "--secret", os.path.join(work(), key + ".key"), path])
    os.chmod(path, 0o644)
    os.chmod(path + ".sig", 0o644)
    return path + ".sig"


def trust_args():
    return ["--trust-dir", os.path.join(work(), "trusted.d")]


def cell(sig, code, check_ran=True, extra=(), trust=None):
    r = app(["cell", "--policy", sig] + (trust or trust_args()) + list(extra) + ["-"],
            code=code, check=False)
    if check_ran:
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)
    return r


def refused(r, *words):
    assert r.returncode == 1 and r.stdout == b"", r
    assert r.stderr.count(b"\n") == 1, r.stderr
    for w in words:
        assert w.encode() in r.stderr, (w, r.stderr)


def floor_serial(deployment):
    """What `verify` reports as the deployment's floor, through a policy of
    that deployment at serial 1 (refused or not, it names the floor)."""
    sig = write_policy("probe-%s.json" % deployment, 1, deployment=deployment)
    r = app(["verify"] + trust_args() + [sig], check=False)
    if r.returncode == 0:
        if b"no serial accepted yet" in r.stdout:
            return 0
        return int(r.stdout.split(b"highest accepted serial ")[1].split()[0])
    return int(r.stderr.split(b"lower than serial ")[1].split(b",")[0])


@test
def limits_come_from_the_policy():
    sig = write_policy("limits.json", 5, {"deadline_s": 2, "memory_mb": 64})
    r = cell(sig, "while True:\n    pass\n")
    assert r["reason"] == "deadline" and 2000 <= r["duration_ms"] <= 4000, r
    r = cell(sig, "b = bytearray(128 << 20)\n")
    assert "MemoryError" in r["error"] and not r["stopped"], r
    r = cell(sig, "b = bytearray(4 << 20)\nprint(len(b))\n")
    assert r["stdout"] == "4194304\n", r


@test
def output_caps_come_from_the_policy():
    sig = write_policy("output.json", 5, {"max_output_bytes": 100, "stop_output_bytes": 1000})
    r = cell(sig, "while True:\n    print('y' * 99)\n")
    assert r["reason"] == "output" and len(r["stdout"]) <= 100 and r["truncated"], r
    assert r["error"] == ("the cell was stopped when its output reached 1000 bytes "
                          "(limits.stop_output_bytes): print less"), r


@test
def flags_cannot_widen_a_policy():
    sig = write_policy("flags.json", 5, {"deadline_s": 2})
    for extra in (["--deadline", "60"], ["--image", "/tmp"], ["--rootless"],
                  ["--digest", digest()], ["--runsc", "/bin/true"]):
        r = cell(sig, "print(1)", check_ran=False, extra=extra)
        assert r.returncode == 2 and b"--policy excludes" in r.stderr, (extra, r.stderr)


@test
def rollback_and_same_serial_new_content_are_refused():
    dep = fresh_deployment()
    assert cell(write_policy("roll.json", 7, deployment=dep), "print(7)")["stdout"] == "7\n"
    r = cell(write_policy("roll.json", 6, deployment=dep), "print(6)", check_ran=False)
    refused(r, "rollback refused", "serial 6")
    r = cell(write_policy("roll.json", 7, {"deadline_s": 9}, deployment=dep), "print(7)",
             check_ran=False)
    refused(r, "different content")
    # an older policy signed by a second trusted key cannot replay either
    shutil.copy(os.path.join(work(), "k2.pub"), os.path.join(work(), "trusted.d", "k2.pub"))
    try:
        r = cell(write_policy("roll.json", 6, key="k2", deployment=dep), "print(6)",
                 check_ran=False)
        refused(r, "rollback refused")
        assert cell(write_policy("roll.json", 8, key="k2", deployment=dep),
                    "print(8)")["stdout"] == "8\n"
    finally:
        os.unlink(os.path.join(work(), "trusted.d", "k2.pub"))


@test
def no_command_line_moves_the_floor_as_root():
    """The attack: a newer policy is accepted; the older one is then refused,
    but was accepted with any fresh --state-dir. As root the floor is fixed,
    and every command refuses the option, saying why."""
    dep = fresh_deployment()
    assert cell(write_policy("fixed.json", 20, deployment=dep), "print(1)")["stdout"] == "1\n"
    old = write_policy("fixed.json", 19, deployment=dep)
    fresh = tempfile.mkdtemp(prefix="fresh-floor.", dir=work())
    for argv in (["cell", "--policy", old] + trust_args() + ["--state-dir", fresh, "-"],
                 ["run", "--policy", old] + trust_args() + ["--state-dir", fresh],
                 ["stubs", "--policy", old] + trust_args() + ["--state-dir", fresh],
                 ["verify"] + trust_args() + ["--state-dir", fresh, old]):
        r = app(argv, code="print(1)", check=False)
        assert r.returncode == 1 and r.stdout == b"", (argv, r)
        assert b"--state-dir is refused as root" in r.stderr, (argv, r.stderr)
        assert b"/var/lib/appliance" in r.stderr, r.stderr
    assert os.listdir(fresh) == []
    refused(cell(old, "print(1)", check_ran=False), "rollback refused", "serial 19")
    assert floor_serial(dep) == 20
    # the floor and its parents are root's and not writable by others
    for d in ("/", "/var", "/var/lib", "/var/lib/appliance"):
        st = os.lstat(d)
        assert st.st_uid == 0 and not (st.st_mode & 0o022), d
    assert os.lstat("/var/lib/appliance").st_mode & 0o777 == 0o700


@test
def a_key_named_on_the_command_line_never_raises_the_floor():
    """The attack: `cell --policy --trust PUBKEY` took a key from any file and
    committed its serial, so whoever could run it could raise a deployment's
    floor to the maximum and lock the real policy out."""
    dep = fresh_deployment()
    evil_pub = os.path.join(work(), "evil.pub")
    if not os.path.exists(evil_pub):
        app(["keygen", "--public", evil_pub, "--secret", os.path.join(work(), "evil.key")])
    huge = write_policy("evil.json", 2**62, deployment=dep, key="evil")
    r = cell(huge, "print('ran')", trust=["--trust", evil_pub])
    assert r["stdout"] == "ran\n", r  # checked against the floor, and run
    assert floor_serial(dep) == 0  # but never recorded
    assert cell(write_policy("real.json", 5, deployment=dep), "print(5)")["stdout"] == "5\n"
    assert floor_serial(dep) == 5
    # held to the floor all the same
    low = write_policy("evil.json", 4, deployment=dep, key="evil")
    refused(cell(low, "print(1)", check_ran=False, trust=["--trust", evil_pub]),
            "rollback refused", "serial 4")
    # and the trusted key file itself, named with --trust, commits nothing either
    k1 = os.path.join(work(), "trusted.d", "k1.pub")
    assert cell(write_policy("real.json", 9, deployment=dep), "print(9)",
                trust=["--trust", k1])["stdout"] == "9\n"
    assert floor_serial(dep) == 5


def serve_nothing(sig):
    """`appliance run` on a client that closes its input at once."""
    return subprocess.run([APPLIANCE, "run", "--policy", sig] + trust_args(), input=START_INPUT,
                          capture_output=True, timeout=120)


@test
def a_policy_that_fails_at_start_records_nothing():
    """The attack: `run` with a policy whose image digest is wrong failed at
    start, yet had already committed its serial, locking out the policy
    that works."""
    dep = fresh_deployment()
    good = write_policy("start-good.json", 30, deployment=dep)
    bad = write_policy("start-bad.json", 31, deployment=dep, image_digest="sha256:" + "ab" * 32)
    r = cell(bad, "print(1)", check_ran=False)
    refused(r, "abab")
    r = serve_nothing(bad)
    assert r.returncode == 1 and b"abab" in r.stderr, r.stderr
    assert floor_serial(dep) == 0
    assert cell(good, "print(30)")["stdout"] == "30\n"
    assert floor_serial(dep) == 30
    # run records a policy once it serves
    serving = write_policy("start-good.json", 32, deployment=dep)
    r = serve_nothing(serving)
    assert r.returncode == 0, r.stderr
    assert floor_serial(dep) == 32
    # stubs only reads: it is held to the floor and never moves it
    r = app(["stubs", "--policy", write_policy("start-good.json", 33, deployment=dep)] +
            trust_args(), check=False)
    assert r.returncode == 0, r.stderr
    assert floor_serial(dep) == 32


@test
def the_kvm_platform_without_a_usable_dev_kvm_is_refused_at_start():
    """Refused before any sandbox boots, and not recorded: a regular file
    bind-mounted over /dev/kvm in a private mount namespace stands for a
    machine without it."""
    dep = fresh_deployment()
    sig = write_policy("kvm.json", 3, deployment=dep, platform="kvm")
    fake = os.path.join(work(), "not-kvm")
    open(fake, "w").close()
    script = ('[ -e /dev/kvm ] && mount --bind "$1" /dev/kvm; shift; exec "$@"')
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                        script, "sh", fake, APPLIANCE, "cell", "--policy", sig] + trust_args() +
                       ["-"], input=b"print(1)", capture_output=True, timeout=120)
    refused(r, "runtime platform kvm: /dev/kvm")
    assert floor_serial(dep) == 0
    # ptrace stays selectable
    r = cell(write_policy("ptrace.json", 4, deployment=dep, platform="ptrace"), "print('p')")
    assert r["stdout"] == "p\n", r


@test
def deployments_do_not_block_each_other():
    a, b = fresh_deployment(), fresh_deployment()
    assert cell(write_policy("dep-a.json", 500, deployment=a), "print('a')")["stdout"] == "a\n"
    assert cell(write_policy("dep-b.json", 3, deployment=b), "print('b')")["stdout"] == "b\n"
    refused(cell(write_policy("dep-a.json", 499, deployment=a), "print(1)", check_ran=False),
            "rollback refused")
    assert (floor_serial(a), floor_serial(b)) == (500, 3)


@test
def expired_untrusted_and_tampered_policies_are_refused():
    r = cell(write_policy("old.json", 5, expires="2020-01-01T00:00:00Z"), "print(1)",
             check_ran=False)
    assert r.returncode == 1 and b"expire" in r.stderr, r.stderr
    r = cell(write_policy("other.json", 5, key="k2"), "print(1)", check_ran=False)
    assert r.returncode == 1 and _keyids["k2"].encode() in r.stderr, r.stderr
    sig = write_policy("tampered.json", 5, {"deadline_s": 2})
    with open(sig[:-4], "r+") as f:
        body = f.read().replace('"deadline_s": 2', '"deadline_s": 3')
        f.seek(0)
        f.write(body)
    r = cell(sig, "print(1)", check_ran=False)
    assert r.returncode == 1 and b"does not match" in r.stderr, r.stderr


@test
def a_trust_directory_others_can_write_is_refused():
    sig = write_policy("trustdir.json", 5)
    d = os.path.join(work(), "trusted.d")
    os.chmod(d, 0o777)
    try:
        r = cell(sig, "print(1)", check_ran=False)
        assert r.returncode == 1 and d.encode() in r.stderr, r.stderr
    finally:
        os.chmod(d, 0o755)


def as_test_user(args, code):
    pw = ensure_user()
    return subprocess.run([rootless_files()[0]] + args, input=code.encode(), capture_output=True,
                          user=TEST_USER, group=TEST_USER, extra_groups=[],
                          env={"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir})


@test
def a_non_root_appliance_needs_rootless_in_the_policy():
    layout = rootless_files()[1]
    trust = os.path.join(work(), "trusted.d")
    pw = ensure_user()
    state = tempfile.mkdtemp(prefix="user-state.", dir=work())
    os.chown(state, pw.pw_uid, pw.pw_gid)
    os.chmod(state, 0o700)
    for rootless in (False, True):
        # the same serial both times: the refused policy must not have been
        # recorded, or it would now block the right one
        sig = write_policy("user%d.json" % rootless, 5, layout=layout, rootless=rootless)
        r = as_test_user(["cell", "--policy", sig, "--trust-dir", trust, "--state-dir", state,
                          "-"], "print('u')")
        if rootless:
            assert r.returncode == 0, r.stderr
            assert json.loads(r.stdout)["stdout"] == "u\n"
        else:
            want = ("appliance: %s: not running as root, and the policy does not opt in to "
                    "the weaker rootless mode (runtime.rootless); run it as root, or set "
                    "runtime.rootless to true and sign it again (SECURITY.md says what that "
                    "mode gives up)\n" % sig)
            assert r.returncode == 1 and r.stderr.decode() == want, (want, r.stderr)


if __name__ == "__main__":
    try:
        main()
    finally:
        if _work:
            shutil.rmtree(_work, True)
