"""cellkit.py: running cells through the real `appliance cell`, as root and as
an ordinary user in rootless mode, for the integration tests.

Every cell goes through build/appliance, real runsc and the real image
(build/image, pinned by build/image.digest; build/image-data when
APPL_TEST_IMAGE is "image-data", as test_containment_data.py sets it before
importing this): nothing is mocked.
"""

import atexit
import glob
import json
import os
import pwd
import shutil
import subprocess
import tempfile

from harness import test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APPLIANCE = os.environ.get("APPLIANCE_BIN") or os.path.join(ROOT, "build", "appliance")
IMAGE = os.environ.get("APPL_TEST_IMAGE", "image")
assert IMAGE in ("image", "image-data"), IMAGE
LAYOUT = os.path.join(ROOT, "build", IMAGE)
TEST_USER = "appliance-test"
MODES = ("root", "rootless")


def digest():
    with open(LAYOUT + ".digest") as f:
        return f.read().strip()


def ensure_user():
    """The ordinary user rootless cells run as (created once, as root)."""
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--create-home", "--home-dir",
                        "/var/lib/" + TEST_USER, "--shell", "/usr/sbin/nologin", TEST_USER],
                       check=True)
        return pwd.getpwnam(TEST_USER)


_rootless_copy = None


def rootless_files():
    """The binary and the image, copied where the ordinary user can reach
    them: the checkout may sit below a directory only root may enter."""
    global _rootless_copy
    if _rootless_copy is None:
        d = tempfile.mkdtemp(prefix="appliance-rootless.")
        os.chmod(d, 0o755)
        shutil.copy2(APPLIANCE, os.path.join(d, "appliance"))
        shutil.copytree(LAYOUT, os.path.join(d, "image"))
        for top, dirs, files in os.walk(d):
            for n in dirs:
                os.chmod(os.path.join(top, n), 0o755)
            for n in files:
                os.chmod(os.path.join(top, n), 0o755 if n == "appliance" else 0o644)
        atexit.register(shutil.rmtree, d, True)
        _rootless_copy = (os.path.join(d, "appliance"), os.path.join(d, "image"))
    return _rootless_copy


def cell_argv(mode, deadline=3, extra=()):
    app, layout = rootless_files() if mode == "rootless" else (APPLIANCE, LAYOUT)
    argv = [app, "cell", "--image", layout, "--digest", digest(),
            "--deadline", str(deadline)]
    if mode == "rootless":
        argv.append("--rootless")
    return argv + list(extra) + ["-"]


def cell_env(mode, extra=None):
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
    if mode == "rootless":
        env["HOME"] = ensure_user().pw_dir
    if extra:
        env.update(extra)
    return env


def popen_kwargs(mode):
    if mode != "rootless":
        return {}
    ensure_user()
    return {"user": TEST_USER, "group": TEST_USER, "extra_groups": []}


def start_cell(code, mode="root", deadline=3, env=None, extra=()):
    """Start a cell; returns the Popen (stdin already written and closed)."""
    p = subprocess.Popen(cell_argv(mode, deadline, extra), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=cell_env(mode, env), cwd="/", **popen_kwargs(mode))
    p.stdin.write(code.encode())
    p.stdin.close()
    p.stdin = None  # communicate() must not touch it again
    return p


def finish_cell(p, timeout=120):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, "appliance exited %d: %s" % (p.returncode, err.decode())
    lines = out.decode().splitlines()
    assert len(lines) == 1, "expected one JSON line, got %r" % out
    return json.loads(lines[0])


def run_cell(code, mode="root", deadline=3, env=None, extra=(), timeout=120):
    """Run code as one cell and return its result object."""
    return finish_cell(start_cell(code, mode, deadline, env, extra), timeout)


def ok_stdout(r):
    """The stdout of a cell that must have finished normally."""
    assert r["error"] is None and not r["stopped"] and r["reason"] is None, r
    return r["stdout"]


def in_both_modes(fn):
    """Register fn(mode) as two tests, NAME_root and NAME_rootless."""
    for mode in MODES:
        def t(mode=mode):
            fn(mode)
        t.__name__ = "%s_%s" % (fn.__name__, mode)
        test(t)
    return fn


def descendants(pid):
    """Every process below pid, found through /proc."""
    import glob
    kids = {}
    for d in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            kids.setdefault(int(fields[1]), []).append(int(d.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def alive(pid):
    """Whether pid is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return ") Z " not in f.read()
    except FileNotFoundError:
        return False


def runsc_pids_of(pid):
    """The `runsc run` and `runsc restore` processes pid started (one per
    live sandbox)."""
    found = []
    for k in descendants(pid):
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"runsc") and (b"run" in argv or b"restore" in argv):
            found.append(k)
    return found


def image_with_runner(runner_source, out_dir):
    """A copy of the image whose /runner.py is runner_source: same packing,
    new layer, config and manifest; returns its digest."""
    import gzip
    import hashlib
    import io
    import tarfile
    with open(os.path.join(ROOT, "build", "image.digest")) as f:
        d = f.read().strip()[7:]
    blobs = os.path.join(ROOT, "build", "image", "blobs", "sha256")
    with open(os.path.join(blobs, d)) as f:
        manifest = json.load(f)
    src = os.path.join(blobs, manifest["layers"][0]["digest"][7:])
    raw = io.BytesIO()
    with tarfile.open(src, "r:gz") as tin, tarfile.open(fileobj=raw, mode="w",
                                                         format=tarfile.GNU_FORMAT) as tout:
        for m in tin.getmembers():
            if m.name in ("./runner.py", "runner.py"):
                data = runner_source.encode()
                m.size = len(data)
                tout.addfile(m, io.BytesIO(data))
            else:
                tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
    layer = gzip.compress(raw.getvalue(), mtime=0)
    os.makedirs(os.path.join(out_dir, "blobs", "sha256"))

    def put(data):
        h = hashlib.sha256(data).hexdigest()
        with open(os.path.join(out_dir, "blobs", "sha256", h), "wb") as f:
            f.write(data)
        return h
    lh = put(layer)
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {
        "type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()]}}).encode()
    ch = put(config)
    manifest["config"].update(digest="sha256:" + ch, size=len(config))
    manifest["layers"][0].update(digest="sha256:" + lh, size=len(layer))
    return "sha256:" + put(json.dumps(manifest).encode())


def hidden(path, blank, argv):
    """argv run in a mount namespace of its own in which the file path is
    the empty file blank (bound over it): to see what a program does
    without a tool or library the machine has."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", blank, path] + list(argv)


def system_lib(soname):
    """The file behind a system library's soname (its link resolved)."""
    [path] = {os.path.realpath(p) for p in glob.glob("/usr/lib/*/" + soname)}
    return path


def maps_lib(pid, name):
    """Whether process pid has the library name (e.g. "libcurl") mapped."""
    with open("/proc/%d/maps" % pid) as f:
        return "/%s.so" % name in f.read()
