"""test_image.py: the cell image as built by scripts/build-image, and the
`appliance image verify` command on it.

Expects `make image` to have built build/image and build/image.digest (the
test target does that first). Builds the image once more into an empty
directory to check that the build is reproducible.
"""

import json
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile

from harness import main, test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAYOUT = os.path.join(ROOT, "build", "image")
APPLIANCE = os.path.join(ROOT, "build", "appliance")
EPOCH = int(os.environ.get("SOURCE_DATE_EPOCH", "1704067200"))


def digest():
    with open(os.path.join(ROOT, "build", "image.digest")) as f:
        d = f.read().strip()
    assert d.startswith("sha256:") and len(d) == 71, d
    return d


def blob(hexdigest):
    return os.path.join(LAYOUT, "blobs", "sha256", hexdigest)


_members = None


def members():
    """Every entry of the image's one layer, found through the pinned digest."""
    global _members
    if _members is None:
        with open(blob(digest()[7:])) as f:
            manifest = json.load(f)
        assert len(manifest["layers"]) == 1
        layer = manifest["layers"][0]
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
        with tarfile.open(blob(layer["digest"][7:]), "r:gz") as t:
            _members = {}
            for m in t.getmembers():
                data = t.extractfile(m).read(16) if m.isfile() else None
                _members[os.path.normpath(m.name).lstrip("./") or "."] = (m, data)
    return _members


# What describes the machine that built the image, not the image.
HOST_FILES = ("etc/hostname", "etc/resolv.conf", "etc/hosts", "etc/mailname",
              "etc/machine-id", "var/lib/dbus/machine-id", "var/lib/systemd", "etc/adjtime",
              "etc/apt", "etc/dpkg", "var/lib/apt", "var/lib/dpkg", "var/cache", "var/log")


@test
def build_is_reproducible_on_another_host():
    """A second build as a machine with another hostname and another
    resolver configuration gives the same digest: nothing of the build
    host reaches the image."""
    out = tempfile.mkdtemp(prefix="appliance-image-test.")
    try:
        layout = os.path.join(out, "layout")
        resolv = os.path.join(out, "resolv.conf")
        with open("/etc/resolv.conf") as f:
            real = f.read()
        with open(resolv, "w") as f:  # still resolves: the build fetches packages
            f.write("# another builder\nsearch builder-%d.invalid\noptions timeout:3\n%s"
                    % (os.getpid(), real))
        os.chmod(resolv, 0o644)
        script = ('hostname "another-builder-$$" && mount --bind "$1" /etc/resolv.conf && '
                  'exec "$2" "$3"')
        r = subprocess.run(["unshare", "--uts", "--mount", "--propagation", "private",
                            "/bin/sh", "-c", script, "sh", resolv,
                            os.path.join(ROOT, "scripts", "build-image"), layout],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        last = r.stdout.strip().splitlines()[-1]
        assert last == digest(), f"second build gave {last}, first {digest()}"
        assert sorted(os.listdir(layout)) == ["blobs", "index.json", "oci-layout"]
    finally:
        shutil.rmtree(out)


@test
def no_file_of_the_build_host_is_in_the_layer():
    for name in members():
        for host in HOST_FILES:
            assert name != host and not name.startswith(host + "/"), name


@test
def build_refuses_a_directory_that_is_not_empty():
    out = tempfile.mkdtemp(prefix="appliance-image-test.")
    try:
        open(os.path.join(out, "x"), "w").close()
        r = subprocess.run([os.path.join(ROOT, "scripts", "build-image"), out],
                           capture_output=True, text=True)
        assert r.returncode != 0 and "not empty" in r.stderr, r.stderr
    finally:
        shutil.rmtree(out)


@test
def runner_is_in_the_layer():
    m, data = members()["runner.py"]
    assert m.isfile() and m.mode & 0o777 == 0o644
    with open(os.path.join(ROOT, "images", "cell", "runner.py"), "rb") as f:
        assert f.read(16) == data


@test
def stdlib_pycs_are_hash_based():
    pycs = {n: d for n, (m, d) in members().items() if n.endswith(".pyc")}
    assert len(pycs) > 500, f"only {len(pycs)} pyc files"
    for name, head in pycs.items():
        flags = int.from_bytes(head[4:8], "little")
        # bit 0: hash-based; bit 1 clear: unchecked (source not re-read)
        assert flags == 1, f"{name}: flags {flags}"
    # and each is next to its source, for the image's own interpreter
    assert "usr/lib/python3.11/__pycache__/json.cpython-311.pyc" not in pycs
    assert "usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc" in pycs
    assert "usr/lib/python3.11/asyncio/__pycache__/base_events.cpython-311.pyc" in pycs


@test
def no_tools_shells_or_package_managers():
    banned = {"dpkg", "tar", "sh", "bash", "dash", "apt", "apt-get", "curl", "wget",
              "nc", "busybox", "perl", "su", "mount", "ip", "ping"}
    for name in members():
        base = os.path.basename(name)
        assert base not in banned, name
        assert not base.startswith("dpkg"), name
    bins = sorted(os.path.basename(n) for n in members()
                  if os.path.dirname(n) == "usr/bin")
    assert bins == ["python3", "python3.11"], bins
    for d in ("bin", "sbin", "usr/sbin", "usr/share", "var/lib/dpkg"):
        assert d not in members(), d


@test
def no_setuid_devices_or_foreign_owners():
    for name, (m, _) in members().items():
        assert not m.mode & (stat.S_ISUID | stat.S_ISGID), name
        assert not (m.ischr() or m.isblk() or m.isfifo()), name
        assert m.uid == 0 and m.gid == 0, name
        assert m.mtime == EPOCH, f"{name}: mtime {m.mtime}"


@test
def verify_prints_the_cached_rootfs():
    cache = tempfile.mkdtemp(prefix="appliance-cache-test.")
    try:
        r = subprocess.run([APPLIANCE, "image", "verify", "--image", LAYOUT, "--digest",
                            digest(), "--cache", cache], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        rootfs = r.stdout.strip()
        assert rootfs == os.path.join(cache, "sha256-" + digest()[7:]), rootfs
        assert os.path.isfile(os.path.join(rootfs, "runner.py"))
        assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
        # the unpacked interpreter runs, with the stdlib a cell needs
        r = subprocess.run(["chroot", rootfs, "/usr/bin/python3", "-I", "-c",
                            "import json, asyncio, sys; print(sys.version_info[:2])"],
                           capture_output=True, text=True, env={"PATH": "/usr/sbin:/usr/bin"})
        assert r.stdout.strip() == "(3, 11)", r.stderr
    finally:
        shutil.rmtree(cache)


@test
def verify_refuses_another_digest_with_one_line():
    cache = tempfile.mkdtemp(prefix="appliance-cache-test.")
    try:
        wrong = "sha256:" + "0" * 64
        r = subprocess.run([APPLIANCE, "image", "verify", "--image", LAYOUT, "--digest",
                            wrong, "--cache", cache], capture_output=True, text=True)
        assert r.returncode != 0 and r.stdout == ""
        assert r.stderr == ("appliance: no manifest with digest %s in the image layout %s "
                            "(it holds %s)\n" % (wrong, LAYOUT, digest())), r.stderr
        assert os.listdir(cache) == []
    finally:
        shutil.rmtree(cache)


@test
def verify_refuses_a_tampered_copy():
    work = tempfile.mkdtemp(prefix="appliance-tamper-test.")
    try:
        copy = os.path.join(work, "layout")
        shutil.copytree(LAYOUT, copy)
        with open(blob(digest()[7:])) as f:
            layer = json.load(f)["layers"][0]["digest"][7:]
        path = os.path.join(copy, "blobs", "sha256", layer)
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))
        r = subprocess.run([APPLIANCE, "image", "verify", "--image", copy, "--digest",
                            digest(), "--cache", os.path.join(work, "cache")],
                           capture_output=True, text=True)
        assert r.returncode != 0, r.stdout
        assert layer in r.stderr, r.stderr
        left = os.listdir(os.path.join(work, "cache"))
        assert left == [], left
    finally:
        shutil.rmtree(work)


@test
def fill_policies_says_when_they_already_hold_the_digest():
    """scripts/fill-policies on copies of the examples (it fills the
    policy/ beside its own scripts/): the digest written, then found."""
    top = tempfile.mkdtemp(prefix="appliance-fill-test.")
    try:
        os.mkdir(os.path.join(top, "scripts"))
        script = os.path.join(top, "scripts", "fill-policies")
        shutil.copy(os.path.join(ROOT, "scripts", "fill-policies"), script)
        shutil.copytree(os.path.join(ROOT, "policy"), os.path.join(top, "policy"))
        names = sorted(n for n in os.listdir(os.path.join(top, "policy")) if n.endswith(".json"))
        with open(os.path.join(top, "policy", "extra.json"), "w") as f:
            f.write('{"serial": 1}\n')
        total = len(names) + 1
        d = "sha256:" + "5" * 64

        def fill():
            r = subprocess.run([script, d], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            return r.stderr.splitlines()[-1]

        got = fill()
        assert got == ("fill-policies: wrote %s into %d of %d policies, 1 has no "
                       "image.digest" % (d, len(names), total)), got
        os.remove(os.path.join(top, "policy", "extra.json"))
        got = fill()
        assert got == "fill-policies: all %d policies already hold %s" % (len(names), d), got
        with open(os.path.join(top, "policy", names[0])) as f:
            assert json.load(f)["image"]["digest"] == d
    finally:
        shutil.rmtree(top)


if __name__ == "__main__":
    main()
