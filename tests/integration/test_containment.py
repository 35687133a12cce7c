"""test_containment.py: hostile code against the real sandbox.

Each test runs real code through `appliance cell` (real runsc, real image),
as root and as an ordinary user in rootless mode, tries to break one control
for real, and asserts both on the JSON result and on the host afterwards.
"""

import errno
import glob
import json
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

from harness import main, test
import sentry_filter
from cellkit import (IMAGE, LAYOUT, ROOT, cell_argv, descendants, digest, ensure_user, finish_cell,
                     image_with_runner, hidden, in_both_modes, ok_stdout, rootless_files, run_cell,
                     start_cell)

# The data image (test_containment_data.py runs this suite on it) has ten
# times the files for the walk to read, and its runner sets matplotlib's
# two variables in its own environment (docs/images.md).
WALK_S = 60 if IMAGE == "image-data" else 20
RUNNER_ENV = {"MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib"} if IMAGE == "image-data" \
    else {}


def probe(code, mode, deadline=5, env=None):
    """Run code that prints one JSON line; return it decoded."""
    r = run_cell(code, mode, deadline=deadline, env=env)
    return json.loads(ok_stdout(r).strip().splitlines()[-1])


def state_dir(mode):
    if mode == "root":
        return "/run/appliance"
    return os.path.join(ensure_user().pw_dir, ".local", "state", "appliance", "run")


def cache_dir(mode):
    if mode == "root":
        return "/var/cache/appliance/images"
    return os.path.join(ensure_user().pw_dir, ".cache", "appliance", "images")


# ---- what must work ---------------------------------------------------------

@in_both_modes
def ordinary_code_works(mode):
    r = run_cell("""
import asyncio, json, math
async def sq(x):
    await asyncio.sleep(0.01)
    return x * x
vals = await asyncio.gather(*(sq(i) for i in range(10)))
print(json.dumps({"sum": sum(vals), "pi": round(math.pi, 3)}))
print("héllo")
{"answer": 6 * 7, "vals": vals[:3]}
""", mode)
    assert ok_stdout(r) == '{"sum": 285, "pi": 3.142}\nhéllo\n', r
    assert r["result"] == {"answer": 42, "vals": [0, 1, 4]}
    assert r["truncated"] is False and r["calls"] == 0 and r["duration_ms"] > 0


@in_both_modes
def exceptions_come_back_as_traceback_tail(mode):
    r = run_cell("def f():\n    raise ValueError('boom')\nf()\n", mode)
    assert r["stopped"] is False and r["reason"] is None, r
    assert "ValueError: boom" in r["error"] and "runner.py" not in r["error"], r["error"]


# ---- network ----------------------------------------------------------------

NETWORK_PROBE = r"""
import json, socket
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "connected"
    except OSError as e:
        out[name] = "refused:%s" % (e.__class__.__name__,)
def tcp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1.5)
    s.connect((host, port))
def unix(addr):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.5)
    s.connect(addr)
attempt("tcp_host_loopback", lambda: tcp("127.0.0.1", TCP_PORT))
attempt("tcp_public", lambda: tcp("1.1.1.1", 443))
attempt("tcp_public_dns", lambda: tcp("8.8.8.8", 53))
attempt("dns", lambda: socket.getaddrinfo("deb.debian.org", 443))
attempt("unix_abstract", lambda: unix("\0" + ABSTRACT))
attempt("unix_path", lambda: unix(UNIX_PATH))
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"udp-from-cell", ("127.0.0.1", UDP_PORT))
    out["udp_sent"] = True
except OSError as e:
    out["udp_sent"] = False
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
print(json.dumps(out))
"""


@in_both_modes
def network_reaches_nothing_on_the_host(mode):
    token = secrets.token_hex(6)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    tcp.setblocking(False)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0appliance-test-" + token)
    abstract.listen(8)
    abstract.setblocking(False)
    path = "/tmp/appliance-test-%s.sock" % token
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(path)
    os.chmod(path, 0o777)
    unix.listen(8)
    unix.setblocking(False)
    try:
        code = (NETWORK_PROBE.replace("TCP_PORT", str(tcp.getsockname()[1]))
                .replace("UDP_PORT", str(udp.getsockname()[1]))
                .replace("ABSTRACT", repr("appliance-test-" + token))
                .replace("UNIX_PATH", repr(path)))
        out = probe(code, mode)
        for name in ("tcp_host_loopback", "tcp_public", "tcp_public_dns", "dns",
                     "unix_abstract", "unix_path"):
            assert out[name].startswith("refused:"), (name, out)
        assert out["interfaces"] in ([], ["lo"]), out
        # nothing arrived at any host socket
        for s in (tcp, abstract, unix):
            try:
                s.accept()
                raise AssertionError("a connection reached the host")
            except BlockingIOError:
                pass
        try:
            udp.recvfrom(100)
            raise AssertionError("a datagram reached the host")
        except BlockingIOError:
            pass
    finally:
        for s in (tcp, udp, abstract, unix):
            s.close()
        os.unlink(path)


# ---- host files, secrets -------------------------------------------------------

WALK_PROBE = r"""
import json, os
TOKEN = %r
found, names, files = [], [], 0
for top, dirs, fs in os.walk("/", onerror=lambda e: None):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for n in dirs + fs:
        if TOKEN in n:
            found.append(os.path.join(top, n))
        if n in ("runsc", "docker.sock", "docker", "containerd.sock"):
            names.append(os.path.join(top, n))
    for n in fs:
        p = os.path.join(top, n)
        try:
            if os.path.islink(p) or os.path.getsize(p) > (1 << 20):
                continue
            with open(p, "rb") as f:
                files += 1
                if TOKEN.encode() in f.read():
                    found.append(p)
        except OSError:
            pass
env_hits = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for what in ("environ", "cmdline"):
            try:
                with open("/proc/%%s/%%s" %% (pid, what), "rb") as f:
                    if TOKEN.encode() in f.read():
                        env_hits.append(pid + "/" + what)
            except OSError:
                pass
print(json.dumps({"found": found, "names": names, "files": files, "env": env_hits,
                  "environ": dict(os.environ)}))
"""


def walk(mode, token, env=None):
    return probe(WALK_PROBE % token, mode, deadline=WALK_S, env=env)


def bundle_dirs(mode, pid):
    return glob.glob(os.path.join(state_dir(mode), "i-%d-*" % pid, "bundles", "*"))


def makedirs_for(mode, path):
    """Create path's missing directories, owned by the user the appliance runs
    as: it refuses a directory of its own that belongs to someone else."""
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for d in reversed(missing):
        os.mkdir(d, 0o700)
        if mode == "rootless":
            os.chown(d, ensure_user().pw_uid, ensure_user().pw_gid)


@in_both_modes
def host_files_are_invisible(mode):
    token = "marker" + secrets.token_hex(8)
    planted = [os.path.join(ROOT, "tests", "." + token), "/tmp/" + token, "/etc/" + token,
               os.path.join(state_dir(mode), token), os.path.join(cache_dir(mode), token)]
    for p in planted:
        makedirs_for(mode, os.path.dirname(p))
        with open(p, "w") as f:
            f.write(token)
    try:
        # the walk waits until a marker is also in its own bundle directory
        p = start_cell("import time\ntime.sleep(3)\n" + WALK_PROBE % token, mode,
                       deadline=WALK_S + 5)
        deadline = time.time() + 15
        while not bundle_dirs(mode, p.pid) and time.time() < deadline:
            time.sleep(0.05)
        bundle = bundle_dirs(mode, p.pid)
        assert bundle, "no bundle directory appeared"
        marker = os.path.join(bundle[0], token)
        with open(marker, "w") as f:
            f.write(token)
        planted.append(marker)
        out = json.loads(ok_stdout(finish_cell(p)).strip().splitlines()[-1])
    finally:
        for path in planted:
            if os.path.exists(path):
                os.unlink(path)
    assert out["files"] > 500, "the walk read only %d files" % out["files"]
    assert out["found"] == [], out["found"]
    assert out["names"] == [], out["names"]


@in_both_modes
def secrets_in_the_environment_are_nowhere(mode):
    token = "secret" + secrets.token_hex(8)
    out = walk(mode, token, env={"APPLIANCE_TEST_SECRET": token, "AWS_SECRET_ACCESS_KEY": token})
    assert out["found"] == [] and out["env"] == [], out
    # runsc adds HOME=/ when the config sets none; nothing else comes in
    assert out["environ"] in (dict({"PATH": "/usr/bin"}, **RUNNER_ENV),
                              dict({"PATH": "/usr/bin", "HOME": "/"}, **RUNNER_ENV)), out


# ---- writes, exec, identity ----------------------------------------------------

@in_both_modes
def root_is_read_only(mode):
    out = probe(r"""
import json, os
root = [l.split() for l in open("/proc/self/mounts") if l.split()[1] == "/"]
res = {"rdonly": len(root) == 1 and "ro" in root[0][3].split(",")}
for p in ("/x", "/etc/x", "/usr/bin/x", "/runner.py", "/usr/lib/python3.11/os.py"):
    try:
        with open(p, "a") as f:
            f.write("x")
        res[p] = "written"
    except OSError as e:
        res[p] = e.errno
print(json.dumps(res))
""", mode)
    assert out.pop("rdonly") is True, out
    for p, v in out.items():
        assert v in (errno.EROFS, errno.EACCES), (p, v)


def argv_of(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return b""


def tree_with_sentry(pid, timeout=15):
    """The argv of every process below pid, once a runsc-sandbox (the
    Sentry) is among them."""
    deadline, tree = time.time() + timeout, {}
    while time.time() < deadline:
        tree = {k: argv_of(k) for k in descendants(pid)}
        if any(a.startswith(b"runsc-sandbox") for a in tree.values()):
            return tree
        time.sleep(0.05)
    raise AssertionError("no runsc-sandbox below %d: %r" % (pid, tree))


def rootfs_image(mode):
    return os.path.join(cache_dir(mode), digest().replace(":", "-") + ".erofs")


@in_both_modes
def the_root_is_one_image_and_no_gofer_runs(mode):
    """The Sentry mounts the rootfs image itself: while a cell runs, below
    the appliance there are runsc and its sandbox, and no gofer (the host
    process that opens host files for a sandbox). The image is a regular
    file of the user's, beside the unpacked tree in the private cache, and
    a later start uses it as it is."""
    code = "import time\ntime.sleep(3)\nprint(open('/proc/self/mounts').read())"
    p = start_cell(code, mode, deadline=20)
    try:
        seen = list(tree_with_sentry(p.pid).values())
        assert not any(b"gofer" in a.split(b"\0")[0] for a in seen), seen
        assert not any(b"\0gofer\0" in a for a in seen), seen
    finally:
        mounts = ok_stdout(finish_cell(p))
    root = [l.split() for l in mounts.splitlines() if l.split()[1:2] == ["/"]]
    assert len(root) == 1 and root[0][2] == "erofs", mounts
    assert "ro" in root[0][3].split(","), root
    st = os.lstat(rootfs_image(mode))
    assert stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 == 0, oct(st.st_mode)
    want = 0 if mode == "root" else ensure_user().pw_uid
    assert st.st_uid == want, (st.st_uid, want)
    assert ok_stdout(run_cell("print(1)", mode)) == "1\n"
    again = os.lstat(rootfs_image(mode))
    assert (again.st_ino, again.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)


# System calls on host paths that gVisor's filter lets a Sentry make when it
# opens host files itself (directfs), x86_64 numbers.
HOST_FILE_CALLS = {"openat": 257, "mkdirat": 258, "mknodat": 259, "newfstatat": 262,
                   "unlinkat": 263, "renameat": 264, "linkat": 265, "symlinkat": 266,
                   "readlinkat": 267, "fchmodat": 268, "getdents64": 217, "fstatfs": 138,
                   "fgetxattr": 193}
# Arguments to try each with: a host descriptor or AT_FDCWD, the usual open
# flags (O_NOFOLLOW, O_CLOEXEC, O_PATH, O_DIRECTORY, O_CREAT), modes.
FDS, FLAGS = (3, 0xFFFFFF9C), (0, 0o2400000, 0o12400000, 0o2200000, 0o2000101, 0x100, 0x1000)


def sentry_file_calls(mode, extra=()):
    """Boot a cell, read its Sentry's seccomp filters while it runs, and
    return its argv and the host file calls some arguments get through."""
    p = start_cell("import time\ntime.sleep(4)\nprint(1)", mode, deadline=20, extra=extra)
    try:
        deadline = time.time() + 15
        [sentry] = [k for k, a in tree_with_sentry(p.pid).items()
                    if a.startswith(b"runsc-sandbox")]
        # the Sentry installs its one filter program while it starts: poll
        # until it is there (a stack read early would only allow more)
        progs = []
        while time.time() < deadline and not progs:
            progs = sentry_filter.filters(sentry)
            time.sleep(0.05)
        assert progs, "the Sentry never installed a filter"
        argv = argv_of(sentry)
        assert sentry_filter.allowed(progs, 0, (5, 0, 1)), "read must be allowed: emulation broken"
        through = sorted(name for name, nr in HOST_FILE_CALLS.items()
                         if any(sentry_filter.allowed(progs, nr, (fd, a1, fl, a3))
                                for fd in FDS for fl in FLAGS for a1 in (0, 0x1000)
                                for a3 in (0, 0o644, 0x100, 0x1000)))
    finally:
        ok_stdout(finish_cell(p))
    return argv, through


@in_both_modes
def the_sentry_may_not_open_host_files(mode):
    """Every Sentry runs with runsc's --directfs=false, so its own seccomp
    filter refuses the calls that open, create, list or rename host files
    (its root is its EROFS image, no host path is mounted): the filters of a
    running cell's Sentry, read with ptrace and run here on each such call
    with a spread of arguments, let none through. As root, the same reading
    of a Sentry whose runsc was started without the flag (a wrapper that
    drops it) finds them let through, so the reading can tell."""
    argv, through = sentry_file_calls(mode)
    assert b"\0--directfs=false\0" in argv, argv
    assert through == [], through
    if mode != "root":
        return
    d = tempfile.mkdtemp(prefix="appliance-runsc.")
    try:
        wrapper = os.path.join(d, "runsc")
        with open(wrapper, "w") as f:
            f.write('#!/bin/bash\na=()\nfor x in "$@"; do [ "$x" = --directfs=false ] || '
                    'a+=("$x"); done\nexec /usr/bin/runsc "${a[@]}"\n')
        os.chmod(wrapper, 0o755)
        argv, through = sentry_file_calls(mode, ("--runsc", wrapper))
        assert b"--directfs" not in argv, argv
        assert {"openat", "mkdirat", "unlinkat", "renameat"} <= set(through), through
    finally:
        shutil.rmtree(d, ignore_errors=True)


@test
def a_missing_mkfs_erofs_is_named_at_start():
    """With no mkfs.erofs to build the image from a fresh cache, the start
    fails and says what to install; nothing is left half-built. (The tool
    is hidden by an empty, non-executable file bound over it in a mount
    namespace of the test's own.)"""
    cache = tempfile.mkdtemp(prefix="appliance-cache.")
    blank = tempfile.NamedTemporaryFile(prefix="appliance-blank.")
    try:
        argv = hidden("/usr/bin/mkfs.erofs", blank.name, cell_argv("root", 5, ("--cache", cache)))
        r = subprocess.run(argv, input=b"print(1)", capture_output=True, timeout=120)
        assert r.returncode != 0, r
        assert b"mkfs.erofs" in r.stderr and b"erofs-utils" in r.stderr, r.stderr
        assert r.stdout == b"", r.stdout
        left = sorted(os.listdir(cache))
        assert left == [digest().replace(":", "-")], left
    finally:
        blank.close()
        shutil.rmtree(cache, ignore_errors=True)


@test
def a_rootfs_image_that_is_not_a_file_is_refused():
    """Whatever sits at the image's name in the cache must be a regular
    file: a symlink there (to a file of the host) stops the start instead of
    being mounted as the cells' root."""
    cache = tempfile.mkdtemp(prefix="appliance-cache.")
    try:
        os.chmod(cache, 0o700)
        os.symlink("/etc/passwd", os.path.join(cache, digest().replace(":", "-") + ".erofs"))
        r = subprocess.run(cell_argv("root", 5, ("--cache", cache)), input=b"print(1)",
                           capture_output=True, timeout=120)
        assert r.returncode != 0 and r.stdout == b"", r
        assert b"not a regular file" in r.stderr, r.stderr
    finally:
        shutil.rmtree(cache, ignore_errors=True)


@in_both_modes
def tmp_is_writable_up_to_its_cap(mode):
    out = probe(r"""
import json, os
total, err = 0, None
chunk = b"x" * (1 << 20)
try:
    for i in range(64):
        with open("/tmp/f%d" % i, "wb") as f:
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        total += len(chunk)
except OSError as e:
    err = e.errno
print(json.dumps({"total": total, "errno": err}))
""", mode)
    assert out["errno"] == errno.ENOSPC, out
    assert 14 << 20 <= out["total"] <= 16 << 20, out


@in_both_modes
def exec_from_tmp_fails(mode):
    out = probe(r"""
import json, os, shutil, subprocess, sys
shutil.copy(sys.executable, "/tmp/py")
os.chmod("/tmp/py", 0o755)
try:
    subprocess.run(["/tmp/py", "-c", "print(1)"], check=True)
    res = "ran"
except OSError as e:
    res = e.errno
print(json.dumps({"exec": res}))
""", mode)
    assert out["exec"] in (errno.EACCES, errno.EPERM), out


@in_both_modes
def identity_is_nobody_without_capabilities(mode):
    out = probe(r"""
import ctypes, json, os, stat
PR_GET_NO_NEW_PRIVS = 39
nnp = ctypes.CDLL(None).prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
setuid = []
for top, dirs, fs in os.walk("/", onerror=lambda e: None):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for n in fs:
        try:
            if os.lstat(os.path.join(top, n)).st_mode & (stat.S_ISUID | stat.S_ISGID):
                setuid.append(os.path.join(top, n))
        except OSError:
            pass
print(json.dumps({"ids": [os.getuid(), os.geteuid(), os.getgid(), os.getegid()],
                  "groups": os.getgroups(), "setuid": setuid,
                  "caps": {k: status[k].strip() for k in status if k.startswith("Cap")},
                  "nnp": nnp}))
""", mode, deadline=10)
    assert out["ids"] == [65534] * 4 and out["groups"] == [], out
    assert out["setuid"] == [], out["setuid"]
    assert set(out["caps"].values()) == {"0000000000000000"}, out["caps"]
    assert out["nnp"] == 1, out


@in_both_modes
def kernel_is_gvisor_not_the_host(mode):
    out = probe(r"""
import json, os
print(json.dumps({"version": open("/proc/version").read(), "release": os.uname().release}))
""", mode)
    host = os.uname().release
    assert out["release"] != host and host not in out["version"], out
    with open("/proc/version") as f:
        assert out["version"] != f.read()


@in_both_modes
def cells_run_on_systrap_by_default(mode):
    """The sandbox kernel is the tested gVisor on the systrap platform: the
    runsc that boots the cell says so on its command line."""
    p = start_cell("import time\ntime.sleep(4)\nprint('ok')", mode, deadline=20)
    try:
        deadline, lines = time.time() + 15, []
        while time.time() < deadline and not lines:
            for pid in descendants(p.pid):
                try:
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        argv = f.read().split(b"\0")
                except OSError:
                    continue
                if b"run" in argv and any(a.endswith(b"runsc") for a in argv[:1]):
                    lines.append(argv)
            time.sleep(0.05)
        assert lines, "no runsc run process"
        assert all(b"--platform=systrap" in a for a in lines), lines
    finally:
        assert ok_stdout(finish_cell(p)) == "ok\n"
    version = subprocess.run(["/usr/bin/runsc", "--version"], capture_output=True,
                             text=True).stdout
    import re
    m = re.search(r"(?<![0-9])(20[0-9]{6})\.[0-9]+", version.splitlines()[0])
    assert m and int(m.group(1)) >= 20240729, version


# ---- resources -------------------------------------------------------------

def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


MEMORY_PROBE = r"""
import os, time
kids = []
for i in range(CHILDREN):
    pid = os.fork()
    if pid == 0:
        try:
            b = b"\x01" * (EACH << 20)
            time.sleep(1.5)
        except MemoryError:
            os._exit(3)
        os._exit(0)
    kids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids]
print(codes)
"""


@in_both_modes
def memory_stays_within_its_bound(mode):
    memory_mb, allowance_mb, each, children = 256, 192, 200, 4
    # As root the memory cgroup bounds the whole sandbox; rootless, only
    # RLIMIT_AS per process does, so the bound is children x memory_mb.
    bound = (memory_mb + allowance_mb) << 20 if mode == "root" else children * (memory_mb << 20)
    base = mem_available()
    p = start_cell(MEMORY_PROBE.replace("CHILDREN", str(children)).replace("EACH", str(each)),
                   mode, deadline=20)
    low = base
    while p.poll() is None:
        low = min(low, mem_available())
        time.sleep(0.02)
    r = finish_cell(p)
    used = base - low
    slack = 160 << 20  # gVisor's own host memory outside the cgroup, runsc, page cache
    assert used <= bound + slack, "host memory fell by %d MiB (bound %d MiB)" % (
        used >> 20, bound >> 20)
    if mode == "root":
        # 4 x 200 MiB cannot fit under the cgroup. gVisor sizes its memory to
        # the cgroup's limit, so children die inside the sandbox and the run
        # goes on; were gVisor itself over the limit, the sandbox would be
        # killed and the run stopped for memory. Either way not all fit. A
        # sandbox pressed against its cgroup limit can also stall in reclaim
        # until its deadline stops it: the bound above held all the same.
        if r["stopped"]:
            assert r["reason"] in ("memory", "deadline"), r
        else:
            codes = json.loads(ok_stdout(r))
            assert len(codes) == children and any(c != 0 for c in codes), r
    else:
        assert ok_stdout(r).strip() == "[0, 0, 0, 0]", r
    # the sandbox's memory goes back to the host once it is torn down; the
    # host kernel may take its time to free a large sandbox's memory (seen
    # up to about 20 s on a busy machine), so the wait is generous
    back = time.time() + 60
    while mem_available() < base - (96 << 20) and time.time() < back:
        time.sleep(0.25)
    assert mem_available() >= base - (96 << 20), "host memory did not come back: %d MiB short" % (
        (base - mem_available()) >> 20)


@in_both_modes
def memory_error_is_the_codes_own_error(mode):
    r = run_cell("b = bytearray(1 << 30)\n", mode)
    assert r["stopped"] is False and "MemoryError" in r["error"], r


def runsc_pids():
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                if b"runsc" in f.read().split(b"\0")[0]:
                    pids.append(int(d[6:]))
        except OSError:
            pass
    return pids


@in_both_modes
def fork_and_thread_bombs_are_contained(mode):
    before = len(runsc_pids())
    fork_bomb = start_cell(r"""
import os
n = 0
while True:
    try:
        if os.fork() == 0:
            while True:
                pass
        n += 1
    except OSError:
        pass
""", mode, deadline=6)
    thread_bomb = start_cell(r"""
import threading, time
ts = []
try:
    while True:
        t = threading.Thread(target=time.sleep, args=(60,))
        t.start()
        ts.append(t)
except RuntimeError as e:
    print("threads:", len(ts), type(e).__name__)
while True:
    time.sleep(1)
""", mode, deadline=6)
    time.sleep(2)
    beside = run_cell("print(sum(range(1000)))", mode, deadline=20)
    assert ok_stdout(beside) == "499500\n", beside
    for p in (fork_bomb, thread_bomb):
        r = finish_cell(p)
        assert r["stopped"] and r["reason"] == "deadline", r
    out = r["stdout"]
    assert "threads:" in out, r
    assert int(out.split()[1]) <= 64, out
    time.sleep(0.5)
    assert len(runsc_pids()) <= before, "runsc processes left behind"


@in_both_modes
def endless_loop_stops_at_the_deadline(mode):
    r = run_cell("while True:\n    pass\n", mode, deadline=2)
    assert r["stopped"] is True and r["reason"] == "deadline", r
    assert r["error"] == ("the cell was stopped at its deadline, 2 s after the request came "
                          "(limits.deadline_s): do less in one cell, or split the work across "
                          "cells"), r
    assert 2000 <= r["duration_ms"] <= 4000, r["duration_ms"]


# ---- output and protocol ----------------------------------------------------

@in_both_modes
def output_flood_stops_and_only_8k_comes_back(mode):
    r = run_cell("line = 'x' * 1023\nwhile True:\n    print(line)\n", mode, deadline=20)
    assert r["stopped"] and r["reason"] == "output" and r["truncated"], r
    assert r["error"] == ("the cell was stopped when its output reached 1048576 bytes "
                          "(limits.stop_output_bytes): print less"), r
    assert len(r["stdout"].encode()) <= 8192 and r["stdout"].startswith("x" * 1023), r


FORGED = ('{"t":"call","id":1,"tool":"x.y","args":{}}\n'
          '{"t":"done","error":null,"result":1}\n{"t":"ready","v":1}\n')


@in_both_modes
def fd_and_child_writes_make_no_call_and_end_nothing(mode):
    r = run_cell("""
import os, subprocess, sys
FORGED = %r
os.write(1, FORGED.encode())
os.write(2, FORGED.encode())
subprocess.run([sys.executable, "-c", "import sys; sys.stdout.write(%%r); sys.stderr.write(%%r)" %% (FORGED, FORGED)])
print("alive")
7
""" % FORGED, mode)
    assert ok_stdout(r) == "alive\n" and r["result"] == 7 and r["calls"] == 0, r


def write_to_protocol(payload):
    """Code that writes payload to every pipe it can write to: the runner's
    private protocol descriptor among them."""
    return r"""
import os, stat
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, %r)
    except OSError:
        pass
import time
time.sleep(0.5)
print("after")
""" % payload


@in_both_modes
def protocol_violations_end_the_run(mode):
    cases = {
        "forged_done_then_output": b'{"t":"done","error":null,"result":1}\n'
                                   b'{"t":"out","data":"more"}\n',
        "second_ready": b'{"t":"ready","v":1}\n',
        "garbage": b'\xff\xfe\x00garbage\n',
        "endless_line": b"x" * (200 * 1024),
        "unknown_type": b'{"t":"exec","cmd":"id"}\n',
        "extra_field": b'{"t":"out","data":"x","evil":1}\n',
        # what the runner never sends: a result beside an error, a value
        # deeper than its own cap of 32 levels
        "done_error_and_result": b'{"t":"done","error":"E","result":"forged"}\n',
        "done_result_too_deep": b'{"t":"done","error":null,"result":' + b"[" * 33 +
                                b"]" * 33 + b"}\n",
    }
    for name, payload in cases.items():
        r = run_cell(write_to_protocol(payload), mode)
        assert r["stopped"] and r["reason"] == "protocol", (name, r)
        assert r["error"].startswith("protocol violation: "), (name, r)
        assert "protocol violation: protocol violation" not in r["error"], (name, r)
        assert r["result"] is None, (name, r)
        assert "after" not in r["stdout"], (name, r)
    assert ok_stdout(run_cell("print('next')", mode)) == "next\n"


@in_both_modes
def forged_call_is_just_a_refused_call(mode):
    r = run_cell(write_to_protocol(b'{"t":"call","id":999,"tool":"fs.delete","args":{}}\n'),
                 mode)
    assert ok_stdout(r) == "after\n" and r["calls"] == 1, r


# ---- hygiene -----------------------------------------------------------------

@in_both_modes
def each_cell_starts_fresh(mode):
    r = run_cell("open('/tmp/left-behind', 'w').write('x')\nprint('wrote')", mode)
    assert ok_stdout(r) == "wrote\n"
    r = run_cell("import os\nprint(os.path.exists('/tmp/left-behind'))", mode)
    assert ok_stdout(r) == "False\n"


def same_file(pid1, fd1, pid2, fd2):
    """kcmp(2): do two descriptors of two processes name one open file?"""
    import ctypes
    SYS_kcmp, KCMP_FILE = 312, 0
    libc = ctypes.CDLL(None, use_errno=True)
    r = libc.syscall(SYS_kcmp, pid1, pid2, KCMP_FILE, fd1, fd2)
    if r < 0:
        raise OSError(ctypes.get_errno(), "kcmp")
    return r == 0


@in_both_modes
def runsc_holds_no_descriptor_of_the_appliance(mode):
    p = start_cell("import time\ntime.sleep(3)\nprint('ok')", mode, deadline=20)
    try:
        deadline = time.time() + 15
        procs = []
        while time.time() < deadline and len(procs) < 3:
            time.sleep(0.2)
            procs = [k for k in descendants(p.pid) if os.path.exists("/proc/%d/fd" % k)]
        assert procs, "no runsc processes found"
        mine = [int(fd) for fd in os.listdir("/proc/%d/fd" % p.pid)]
        checked, shared = 0, []
        for k in procs:
            try:
                theirs = [int(fd) for fd in os.listdir("/proc/%d/fd" % k)]
            except FileNotFoundError:
                continue
            for fd in theirs:
                for m in mine:
                    try:
                        if same_file(p.pid, m, k, fd):
                            shared.append((k, fd, os.readlink("/proc/%d/fd/%d" % (p.pid, m))))
                        checked += 1
                    except OSError:
                        pass
        assert checked > 0
        assert shared == [], "runsc processes hold the appliance's own files: %r" % shared
    finally:
        r = finish_cell(p)
    assert ok_stdout(r) == "ok\n"


@in_both_modes
def crash_leaves_nothing_and_spares_a_sibling(mode):
    sibling = start_cell("import time\ntime.sleep(8)\nprint('sibling done')", mode,
                         deadline=40)
    victim = start_cell("import time\ntime.sleep(60)", mode, deadline=120)
    pattern = os.path.join(state_dir(mode), "i-%d-*" % victim.pid)
    deadline = time.time() + 20
    while time.time() < deadline:
        dirs = glob.glob(pattern)
        if dirs and glob.glob(os.path.join(dirs[0], "bundles", "*")):
            break
        time.sleep(0.2)
    assert dirs, "the victim's instance directory never appeared"
    time.sleep(1.5)  # let its sandbox boot
    victim.kill()
    victim.wait()
    victim.stdout.close()
    victim.stderr.close()
    # the next start reclaims what the killed one left
    assert ok_stdout(run_cell("print('next')", mode)) == "next\n"
    assert not os.path.exists(dirs[0]), "the crashed instance's directory is still there"
    name = os.path.basename(dirs[0])
    assert not glob.glob("/sys/fs/cgroup/*/appliance/%s" % name), "cgroups left behind"
    leftover = []
    for k in runsc_pids():
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                if name.encode() in f.read():
                    leftover.append(k)
        except OSError:
            pass
    assert leftover == [], "runsc processes of the crashed instance: %r" % leftover
    r = finish_cell(sibling)
    assert ok_stdout(r) == "sibling done\n", r


@in_both_modes
def sigterm_destroys_the_sandbox(mode):
    p = start_cell("import time\ntime.sleep(30)", mode, deadline=60)
    deadline = time.time() + 15
    while not bundle_dirs(mode, p.pid) and time.time() < deadline:
        time.sleep(0.05)
    instance = os.path.dirname(os.path.dirname(bundle_dirs(mode, p.pid)[0]))
    time.sleep(1.5)  # booted and running
    t = time.time()
    p.send_signal(signal.SIGTERM)
    r = finish_cell(p, timeout=20)
    assert time.time() - t < 8, "SIGTERM took %.1f s" % (time.time() - t)
    assert r["stopped"] and r["reason"] == "signal", r
    assert r["error"] == "the run was stopped: appliance cell got signal 15", r
    assert not os.path.exists(instance), "instance directory left behind"
    name = os.path.basename(instance)
    assert not glob.glob("/sys/fs/cgroup/*/appliance/%s" % name), "cgroups left behind"
    for k in runsc_pids():
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                assert name.encode() not in f.read(), "runsc process %d left behind" % k
        except OSError:
            pass


@test
def a_runner_that_never_says_ready_is_a_boot_failure():
    import tempfile
    work = tempfile.mkdtemp(prefix="appliance-boot-test.")
    try:
        layout = os.path.join(work, "layout")
        digest = image_with_runner("import time\ntime.sleep(600)\n", layout)
        t = time.time()
        r = subprocess.run([os.path.join(ROOT, "build", "appliance"), "cell", "--image", layout,
                            "--digest", digest, "--cache", os.path.join(work, "cache"),
                            "--deadline", "60", "-"], input=b"print(1)", capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["stopped"] and out["reason"] == "boot", out
        # the boot timeout (10 s), not the 60 s deadline, ended it
        assert time.time() - t < 30, time.time() - t
    finally:
        subprocess.run(["rm", "-rf", work])


# ---- refusals of the command itself -------------------------------------------

@test
def non_root_without_rootless_is_refused():
    user = ensure_user()
    app, layout = rootless_files()
    r = subprocess.run([app, "cell", "--image", layout, "--digest",
                        digest(), "-"],
                       input=b"print(1)", capture_output=True, user=user.pw_name,
                       group=user.pw_name, extra_groups=[],
                       env={"PATH": "/usr/bin:/bin", "HOME": user.pw_dir})
    assert r.returncode == 1 and r.stdout == b"", r
    assert b"rootless" in r.stderr and r.stderr.count(b"\n") == 1, r.stderr


@test
def another_user_cannot_keep_a_rootless_appliance_from_starting():
    """The runtime directory used to be /tmp/appliance-UID when XDG_RUNTIME_DIR
    was unset: any user could create it first, and the appliance then refused
    to start. Take that name (and the XDG one) as another user: cells run."""
    user = ensure_user()
    taken = ["/tmp/appliance-%d" % user.pw_uid]
    for d in taken:
        subprocess.run(["rm", "-rf", d], check=True)
        os.mkdir(d, 0o700)
        os.chown(d, 65534, 65534)  # nobody's, as another user would leave it
    try:
        r = run_cell("print('started')", "rootless")
        assert ok_stdout(r) == "started\n", r
        assert glob.glob(os.path.join(state_dir("rootless"))), "no runtime directory in HOME"
        for d in taken:
            assert os.listdir(d) == [], d
    finally:
        for d in taken:
            subprocess.run(["rm", "-rf", d])


@test
def rootless_without_home_is_a_one_line_error():
    user = ensure_user()
    app, layout = rootless_files()
    cache = os.path.join(user.pw_dir, ".cache", "appliance", "images")
    r = subprocess.run([app, "cell", "--image", layout, "--digest", digest(), "--rootless",
                        "--cache", cache, "-"], input=b"print(1)",
                       capture_output=True, user=user.pw_name, group=user.pw_name,
                       extra_groups=[], env={"PATH": "/usr/bin:/bin"}, cwd="/")
    assert r.returncode == 1 and r.stdout == b"" and r.stderr.count(b"\n") == 1, r
    assert b"no runtime directory" in r.stderr and b"--runtime-dir" in r.stderr, r.stderr


@test
def runsc_older_than_the_tested_release_is_refused():
    """A runsc that says it is Debian 12's own gVisor (2022-12), or names no
    release at all, is refused before any sandbox starts."""
    work = tempfile.mkdtemp(prefix="appliance-fake-runsc.")
    try:
        os.chmod(work, 0o755)
        for name, says, words in (
                ("old", "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n",
                 (b"is version 0.0~20221219.0", b"older than 20240729.0")),
                ("mute", "nothing to say\n", (b"no gVisor release",))):
            fake = os.path.join(work, name)
            with open(fake, "w") as f:
                f.write("#!/bin/sh\nprintf '%s'\n" % says.replace("\n", "\\n"))
            os.chmod(fake, 0o755)
            r = subprocess.run([os.path.join(ROOT, "build", "appliance"), "cell", "--image",
                                LAYOUT, "--digest", digest(),
                                "--runsc", fake, "-"], input=b"print(1)", capture_output=True)
            assert r.returncode == 1 and r.stdout == b"", r
            assert r.stderr.count(b"\n") == 1 and fake.encode() in r.stderr, r.stderr
            for w in words:
                assert w in r.stderr, (w, r.stderr)
    finally:
        subprocess.run(["rm", "-rf", work])


@test
def bad_digest_or_missing_runsc_is_a_one_line_error():
    app = os.path.join(ROOT, "build", "appliance")
    layout = LAYOUT
    r = subprocess.run([app, "cell", "--image", layout, "--digest", "sha256:" + "1" * 64, "-"],
                       input=b"print(1)", capture_output=True)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"1111" in r.stderr, r
    d = digest()
    r = subprocess.run([app, "cell", "--image", layout, "--digest", d, "--runsc",
                        "/nonexistent/runsc", "-"], input=b"print(1)", capture_output=True)
    assert r.returncode == 1 and b"/nonexistent/runsc" in r.stderr, r


if __name__ == "__main__":
    main()
