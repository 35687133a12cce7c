"""test_policy_cell.py: `appliance cell --policy` takes everything from a
verified policy: keygen, sign, verify, then cells whose limits come from the
policy, and every way a policy is refused before any cell runs."""

import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import main, test
from cellkit import APPLIANCE, ensure_user, rootless_files, digest, TEST_USER

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


def write_policy(name, serial, limits=None, expires="2099-01-01T00:00:00Z", key="k1",
                 layout=None, rootless=False):
    path = os.path.join(work(), name)
    doc = {"policy_version": 1, "serial": serial, "expires": expires,
           "image": {"layout": layout or os.path.join(os.path.dirname(APPLIANCE), "image"),
                     "digest": digest()},
           "runtime": {"rootless": rootless}}
    if limits:
        doc["limits"] = limits
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    app(["sign", "--secret", os.path.join(work(), key + ".key"), path])
    os.chmod(path, 0o644)
    os.chmod(path + ".sig", 0o644)
    return path + ".sig"


def cell(sig, code, state, check_ran=True, extra=()):
    r = app(["cell", "--policy", sig, "--trust-dir", os.path.join(work(), "trusted.d"),
             "--state-dir", state] + list(extra) + ["-"], code=code, check=False)
    if check_ran:
        assert r.returncode == 0, r.stderr.decode()
        return json.loads(r.stdout)
    return r


def fresh_state():
    return tempfile.mkdtemp(prefix="state.", dir=work())


@test
def limits_come_from_the_policy():
    sig = write_policy("limits.json", 5, {"deadline_s": 2, "memory_mb": 64})
    state = fresh_state()
    r = cell(sig, "while True:\n    pass\n", state)
    assert r["reason"] == "deadline" and 2000 <= r["duration_ms"] <= 4000, r
    r = cell(sig, "b = bytearray(128 << 20)\n", state)
    assert "MemoryError" in r["error"] and not r["stopped"], r
    r = cell(sig, "b = bytearray(4 << 20)\nprint(len(b))\n", state)
    assert r["stdout"] == "4194304\n", r


@test
def output_caps_come_from_the_policy():
    sig = write_policy("output.json", 5, {"max_output_bytes": 100, "stop_output_bytes": 1000})
    r = cell(sig, "while True:\n    print('y' * 99)\n", fresh_state())
    assert r["reason"] == "output" and len(r["stdout"]) <= 100 and r["truncated"], r


@test
def flags_cannot_widen_a_policy():
    sig = write_policy("flags.json", 5, {"deadline_s": 2})
    for extra in (["--deadline", "60"], ["--image", "/tmp"], ["--rootless"],
                  ["--digest", digest()], ["--runsc", "/bin/true"]):
        r = cell(sig, "print(1)", fresh_state(), check_ran=False, extra=extra)
        assert r.returncode == 2 and b"--policy excludes" in r.stderr, (extra, r.stderr)


@test
def rollback_and_same_serial_new_content_are_refused():
    state = fresh_state()
    assert cell(write_policy("roll.json", 7), "print(7)", state)["stdout"] == "7\n"
    r = cell(write_policy("roll.json", 6), "print(6)", state, check_ran=False)
    assert r.returncode == 1 and r.stdout == b"", r
    assert b"serial" in r.stderr, r.stderr
    r = cell(write_policy("roll.json", 7, {"deadline_s": 9}), "print(7)", state, check_ran=False)
    assert r.returncode == 1 and b"7" in r.stderr, r.stderr
    # an older policy signed by a second trusted key cannot replay either
    shutil.copy(os.path.join(work(), "k2.pub"), os.path.join(work(), "trusted.d", "k2.pub"))
    try:
        r = cell(write_policy("roll.json", 6, key="k2"), "print(6)", state, check_ran=False)
        assert r.returncode == 1 and b"serial" in r.stderr, r.stderr
        assert cell(write_policy("roll.json", 8, key="k2"), "print(8)", state)["stdout"] == "8\n"
    finally:
        os.unlink(os.path.join(work(), "trusted.d", "k2.pub"))


@test
def expired_untrusted_and_tampered_policies_are_refused():
    state = fresh_state()
    r = cell(write_policy("old.json", 5, expires="2020-01-01T00:00:00Z"), "print(1)", state,
             check_ran=False)
    assert r.returncode == 1 and b"expire" in r.stderr, r.stderr
    r = cell(write_policy("other.json", 5, key="k2"), "print(1)", state, check_ran=False)
    assert r.returncode == 1 and _keyids["k2"].encode() in r.stderr, r.stderr
    sig = write_policy("tampered.json", 5, {"deadline_s": 2})
    with open(sig[:-4], "r+") as f:
        body = f.read().replace('"deadline_s": 2', '"deadline_s": 3')
        f.seek(0)
        f.write(body)
    r = cell(sig, "print(1)", state, check_ran=False)
    assert r.returncode == 1 and b"does not match" in r.stderr, r.stderr


@test
def a_trust_directory_others_can_write_is_refused():
    sig = write_policy("trustdir.json", 5)
    d = os.path.join(work(), "trusted.d")
    os.chmod(d, 0o777)
    try:
        r = cell(sig, "print(1)", fresh_state(), check_ran=False)
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
            assert r.returncode == 1 and b"rootless" in r.stderr, r.stderr


if __name__ == "__main__":
    try:
        main()
    finally:
        if _work:
            shutil.rmtree(_work, True)
