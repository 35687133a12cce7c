"""test_install.py: `make install` and `make uninstall` into a DESTDIR, and the
files they put there: the binary, the cell image and its digest, the man page,
the systemd unit (dist/appliance.service, ExecStart= naming PREFIX) and the
servers' sysusers.d entry, and /etc/appliance/trusted.d and /var/lib/appliance
with the owner and mode `run` demands (docs/install.md).

The installed image must verify against the installed digest; a cell must run
from the installed binary, image and trust directory; the installed unit must
pass `systemd-analyze verify` with nothing to say; and `appliance run`, started
as the unit starts it, must serve a cell over HTTP under the unit's sandboxing
directives. There is no systemd as PID 1 here, so those directives are
emulated (unshare, mount, setpriv, seccomp through libseccomp): every one the
unit names must be one the emulation knows. `make uninstall` removes what
install put there and keeps keys, policies and state.

make runs with `-o` on the binary and the image digest, so nothing is rebuilt:
the test installs what the build made (APPLIANCE_BIN's directory as BUILD,
build/image as the layout). Runs as root.
"""

import atexit
import errno
import hashlib
import http.client
import inspect
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time

from harness import main, skip, test
from cellkit import APPLIANCE, LAYOUT, ROOT, digest

BUILD = os.path.dirname(os.path.abspath(APPLIANCE))
TOY = os.environ.get("TOY_SERVER") or os.path.join(ROOT, "build", "toy-server")
UNIT_SRC = os.path.join(ROOT, "dist", "appliance.service")
SYSUSERS_SRC = os.path.join(ROOT, "dist", "appliance.sysusers")
MAN_SRC = os.path.join(ROOT, "docs", "appliance.1")
POLICY_SIG = "/etc/appliance/policy.json.sig"


# ---- make install / uninstall ----------------------------------------------------

def make(target, destdir, prefix="/usr", check=True, data=""):
    """`make -s TARGET` at the top with this DESTDIR and PREFIX; the binary and
    the image digest are taken as they are (-o), never rebuilt. The data
    image only when data names its layout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    argv = ["make", "-s", "-C", ROOT, "-o", BUILD + "/appliance", "-o", BUILD + "/toy-server",
            "-o", LAYOUT + ".digest",
            target, "BUILD=" + BUILD, "IMAGE_LAYOUT=" + LAYOUT, "DATA_IMAGE_LAYOUT=" + data,
            "DESTDIR=" + destdir, "PREFIX=" + prefix]
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(argv), r.returncode, r.stdout,
                                                         r.stderr)
    return r


def scratch(prefix, where=None):
    d = tempfile.mkdtemp(prefix=prefix, dir=where)
    os.chmod(d, 0o755)
    atexit.register(shutil.rmtree, d, True)
    return d


_installed = None


def installed():
    """One install with PREFIX=/usr, made once. Below /run, not /tmp: the
    emulated unit has a private /tmp (PrivateTmp=) and hides /home and /root
    (ProtectHome=), and must still see it."""
    global _installed
    if _installed is None:
        where = "/run" if os.access("/run", os.W_OK) else None
        d = scratch("appliance-install-test.", where)
        make("install", d)
        _installed = d
    return _installed


def tree(d):
    """{relative path: (type, mode, uid, gid)} of everything below d."""
    out = {}
    for top, dirs, files in os.walk(d):
        for n in dirs + files:
            p = os.path.join(top, n)
            st = os.lstat(p)
            kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "?"
            out[os.path.relpath(p, d)] = (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)
    return out


def layout_files(layout=None):
    """The image layout's files, relative to it."""
    layout = layout or LAYOUT
    out = []
    for top, _, files in os.walk(layout):
        out += [os.path.relpath(os.path.join(top, n), layout) for n in files]
    return sorted(out)


def expected(prefix="usr"):
    """{relative path: mode} of the files make install puts in DESTDIR."""
    files = {prefix + "/bin/appliance": 0o755,
             prefix + "/libexec/appliance/toy-server": 0o755,
             prefix + "/share/appliance/image.digest": 0o644,
             prefix + "/share/appliance/image.spdx.json": 0o644,
             prefix + "/lib/systemd/system/appliance.service": 0o644,
             prefix + "/lib/sysusers.d/appliance.conf": 0o644}
    for f in layout_files():
        files[prefix + "/share/appliance/image/" + f] = 0o644
    for f in sorted(os.listdir(os.path.join(ROOT, "policy"))):
        if f.endswith(".json"):
            files[prefix + "/share/appliance/examples/" + f] = 0o644
    if os.path.exists(MAN_SRC):
        files[prefix + "/share/man/man1/appliance.1"] = 0o644
    return files


# The directories install makes itself, with their modes; their parents (usr,
# usr/share, ...) are the packager's.
OWN_DIRS = {"etc/appliance": 0o755, "etc/appliance/trusted.d": 0o755,
            "var/lib/appliance": 0o700, "usr/share/appliance": 0o755,
            "usr/share/appliance/image": 0o755, "usr/share/appliance/examples": 0o755,
            "usr/libexec/appliance": 0o755}


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def unit_text(exec_path):
    """dist/appliance.service with ExecStart= naming exec_path."""
    src = read(UNIT_SRC)
    new = re.sub(r"(?m)^ExecStart=/usr/local/bin/appliance ", "ExecStart=%s " % exec_path, src)
    assert new != src, "no ExecStart=/usr/local/bin/appliance in " + UNIT_SRC
    return new


@test
def install_puts_every_file_in_place_with_its_mode():
    d = installed()
    got = tree(d)
    want = expected()
    files = {p: v for p, v in got.items() if v[0] == "f"}
    assert sorted(files) == sorted(want), \
        "extra: %s\nmissing: %s" % (sorted(set(files) - set(want)), sorted(set(want) - set(files)))
    for p, mode in want.items():
        assert files[p][1:] == (mode, 0, 0), "%s: mode %o uid %d gid %d, want %o root:root" % (
            p, files[p][1], files[p][2], files[p][3], mode)
    for p, mode in OWN_DIRS.items():
        assert got.get(p) == ("d", mode, 0, 0), (p, got.get(p))
    for p, v in got.items():
        assert v[0] in "df", (p, v)
        if v[0] == "d":
            assert not v[1] & 0o022, "%s is writable by group or others: %o" % (p, v[1])
        if p.startswith("usr/share/appliance/image/") and v[0] == "d":
            assert v[1] == 0o755, (p, oct(v[1]))
    assert os.listdir(os.path.join(d, "etc/appliance/trusted.d")) == []
    assert os.listdir(os.path.join(d, "var/lib/appliance")) == []
    # what was installed is what was built
    assert read(os.path.join(d, "usr/bin/appliance"), "rb") == read(APPLIANCE, "rb")
    for f in layout_files():
        assert read(os.path.join(d, "usr/share/appliance/image", f), "rb") == \
            read(os.path.join(LAYOUT, f), "rb"), f
    assert read(os.path.join(d, "usr/share/appliance/image.digest")).strip() == digest()
    if os.path.exists(MAN_SRC):
        assert read(os.path.join(d, "usr/share/man/man1/appliance.1"), "rb") == \
            read(MAN_SRC, "rb")
    assert read(os.path.join(d, "usr/lib/sysusers.d/appliance.conf")) == read(SYSUSERS_SRC)
    # the unit names the installed binary, and is otherwise dist/appliance.service
    unit = read(os.path.join(d, "usr/lib/systemd/system/appliance.service"))
    assert unit == unit_text("/usr/bin/appliance"), unit
    assert re.findall(r"(?m)^ExecStart=.*$", unit) == [
        "ExecStart=/usr/bin/appliance run --policy " + POLICY_SIG], unit


@test
def prefix_decides_every_path_and_the_units_execstart():
    d = scratch("appliance-install-prefix.")
    make("install", d, prefix="/opt/appl")
    files = {p for p, v in tree(d).items() if v[0] == "f"}
    assert files == set(expected("opt/appl")), sorted(files ^ set(expected("opt/appl")))
    unit = read(os.path.join(d, "opt/appl/lib/systemd/system/appliance.service"))
    assert "\nExecStart=/opt/appl/bin/appliance run --policy %s\n" % POLICY_SIG in unit, unit
    # installing again over it changes nothing and leaves no temporary behind
    before = tree(d)
    make("install", d, prefix="/opt/appl")
    assert tree(d) == before
    for bad in ("opt/appl", "/opt/my appl", "/opt/a|b"):
        r = make("install", d, prefix=bad, check=False)
        assert r.returncode != 0 and "PREFIX" in r.stderr, (bad, r.stderr)
    assert tree(d) == before


@test
def the_installed_image_verifies_against_the_installed_digest():
    d = installed()
    app = os.path.join(d, "usr/bin/appliance")
    image = os.path.join(d, "usr/share/appliance/image")
    dig = read(os.path.join(d, "usr/share/appliance/image.digest")).strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", dig), dig
    cache = scratch("appliance-install-cache.")
    os.chmod(cache, 0o700)
    r = subprocess.run([app, "image", "verify", "--image", image, "--digest", dig,
                        "--cache", cache], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rootfs = r.stdout.strip().splitlines()[-1]
    assert rootfs.startswith(cache + "/") and os.path.isdir(rootfs), r.stdout
    r = subprocess.run([app, "image", "verify", "--image", image, "--digest",
                        "sha256:" + "0" * 64, "--cache", cache],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)


def analyze(*args):
    if not shutil.which("systemd-analyze"):
        skip("no systemd-analyze (scripts/install-deps installs systemd)")
    return subprocess.run(["systemd-analyze", *args], capture_output=True, text=True,
                          timeout=120)


@test
def the_installed_unit_passes_systemd_analyze_verify():
    d = installed()
    # The unit names /usr/bin/appliance, which this machine does not have:
    # verify a copy naming the installed binary (systemd-analyze checks that
    # it is executable). --man=no: the man page is in DESTDIR, not in man's path.
    app = os.path.join(d, "usr/bin/appliance")
    unit = read(os.path.join(d, "usr/lib/systemd/system/appliance.service"))
    check = scratch("appliance-install-unit.")
    path = os.path.join(check, "appliance.service")
    with open(path, "w") as f:
        f.write(unit.replace("\nExecStart=/usr/bin/appliance ", "\nExecStart=%s " % app))
    r = analyze("verify", "--man=no", path)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", \
        "exit %d\n%s%s" % (r.returncode, r.stdout, r.stderr)
    # verify only warns (exit 0) about a directive it does not take; the
    # silence above is what says there is none
    with open(path, "a") as f:
        f.write("ProtectProc=nonsense\n")
    r = analyze("verify", "--man=no", path)
    assert "ProtectProc" in r.stderr, (r.returncode, r.stdout, r.stderr)
    # and the exposure systemd itself sees stays where docs/install.md says
    with open(path, "w") as f:
        f.write(unit.replace("\nExecStart=/usr/bin/appliance ", "\nExecStart=%s " % app))
    r = analyze("security", "--offline=yes", "--no-pager", path)
    m = re.search(r"Overall exposure level for appliance.service: ([0-9.]+)", r.stdout)
    assert m, r.stdout[-2000:] + r.stderr
    assert float(m.group(1)) <= 4.5, r.stdout


# ---- signed policies against the installed tree -------------------------------------

_key = None


def key():
    """A key in the installed trust directory (made once); its secret half."""
    global _key
    d = installed()
    if _key is None:
        sec = os.path.join(d, "test-admin.key")
        r = subprocess.run([APPLIANCE, "keygen", "--public",
                            os.path.join(d, "etc/appliance/trusted.d/test.pub"),
                            "--secret", sec], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        _key = sec
    return _key


_serial = [100]


def signed(doc):
    """doc, in a deployment of its own (the floor is the machine's), signed."""
    d = installed()
    _serial[0] += 1
    doc = dict({"policy_version": 1, "serial": _serial[0], "expires": "2099-01-01T00:00:00Z",
                "deployment": "t-install-" + secrets.token_hex(6),
                "image": {"layout": os.path.join(d, "usr/share/appliance/image"),
                          "digest": read(os.path.join(d, "usr/share/appliance/image.digest"))
                          .strip()},
                "limits": {"deadline_s": 30}}, **doc)
    path = os.path.join(d, "policy-%d.json" % _serial[0])
    with open(path, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([APPLIANCE, "sign", "--secret", key(), path], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    return path + ".sig"


@test
def a_cell_runs_from_the_installed_binary_image_and_trust_directory():
    d = installed()
    sig = signed({})
    r = subprocess.run([os.path.join(d, "usr/bin/appliance"), "cell", "--policy", sig,
                        "--trust-dir", os.path.join(d, "etc/appliance/trusted.d"), "-"],
                       input="print(6 * 7)", capture_output=True, text=True, timeout=180,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd="/")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["stdout"] == "42\n" and res["error"] is None, res


def readme_using_it():
    """The command lines of README's "Using it", as written."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("\n## Using it\n", 1)[1].split("\n## ", 1)[0]
    lines, started = [], False
    for ln in section.splitlines():
        if ln.startswith("    ") and ln.strip():
            started = True
            lines.append(ln.strip())
        elif started:
            break
    assert len(lines) >= 4 and lines[-1].startswith("appliance run "), lines
    return lines


@test
def readme_using_it_works_line_by_line_after_install():
    # An install as README's own (PREFIX=/usr/local), seen where it would be:
    # a private mount namespace binds the DESTDIR's /usr/local, /etc/appliance
    # and /var/lib/appliance over the machine's, so nothing of the machine's
    # own is read or changed; each README line then runs as written, in an
    # empty working directory, the last one (run) with an MCP session on stdin.
    d = scratch("appliance-readme-test.", "/run" if os.access("/run", os.W_OK) else None)
    make("install", d, prefix="/usr/local")
    lines = readme_using_it()
    made = []
    for target in ("/etc/appliance", "/var/lib/appliance"):
        if not os.path.isdir(target):
            os.makedirs(target, 0o755)
            made.append(target)
    try:
        work = scratch("appliance-readme-work.")
        session = "\n".join(json.dumps(m) for m in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "readme", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_python", "arguments": {"code": "print(6 * 7)"}}})) + "\n"
        steps = "\n".join(lines[:-1])
        script = ("set -eu\n"
                  "for p in /usr/local /etc/appliance /var/lib/appliance; do\n"
                  "    mount --bind %s\"$p\" \"$p\"\n"
                  "done\n"
                  "cd %s\n{\n%s\n} >&2\n"  # what the lines print is not the session's
                  "{ cat; sleep 60; } | %s\n") % (shlex.quote(d), shlex.quote(work), steps,
                                                   lines[-1])
        # stdin stays open until the answer is read (the reader below); the
        # sleep only keeps the pipe open, and the process group is killed then
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                              script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env={"PATH": "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"})
        try:
            p.stdin.write(session)
            p.stdin.close()
            answers = {}
            for raw in p.stdout:
                msg = json.loads(raw)
                if "id" in msg:
                    answers[msg["id"]] = msg
                if 2 in answers:
                    break
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            err = p.stderr.read()
            p.wait(timeout=60)
        assert 2 in answers, (lines, err[-3000:])
        sc = answers[2]["result"]["structuredContent"]
        assert sc["stdout"] == "42\n" and sc["error"] is None, (sc, err[-2000:])
        # what the lines made is where README says, in the install's tree
        assert os.path.exists(os.path.join(d, "etc/appliance/trusted.d/admin.pub"))
        assert os.path.exists(os.path.join(d, "etc/appliance/policy.json.sig"))
    finally:
        for target in made:
            os.rmdir(target)


@test
def the_installed_examples_name_what_is_installed_and_their_servers_start():
    # Every program an installed example names is there: below the install's
    # PREFIX (the toy server) in its tree, the reference servers where
    # scripts/install-deps put them. And the server-everything example, signed
    # as it is, starts its servers and lists their tools.
    d = installed()
    ex = os.path.join(d, "usr/share/appliance/examples")
    names = sorted(f for f in os.listdir(ex) if f.endswith(".json"))
    assert names == sorted(f for f in os.listdir(os.path.join(ROOT, "policy"))
                           if f.endswith(".json")), names
    programs = 0
    for name in names:
        with open(os.path.join(ex, name)) as f:
            doc = json.load(f)
        assert doc["image"]["layout"] == "/usr/share/appliance/image", (name, doc["image"])
        assert doc["image"]["digest"] == digest(), name
        for srv in doc.get("servers", {}).values():
            for arg in srv["command"][:2]:
                if arg.startswith("/usr/share/") or arg.startswith("/usr/libexec/"):
                    arg = d + arg
                if arg.startswith("/"):
                    assert os.path.isfile(arg), (name, arg)
                    programs += 1
    assert programs >= 5, programs  # node and three servers, the toy server
    with open(os.path.join(ex, "everything.json")) as f:
        doc = json.load(f)
    doc["image"] = {"layout": os.path.join(d, "usr/share/appliance/image"), "digest": digest()}
    doc.pop("audit", None)
    doc.pop("serial", None)
    mem = scratch("appliance-example-mem.")
    __import__("gatewaykit").share_with_servers(mem)
    r = subprocess.run([APPLIANCE, "stubs", "--policy", signed(doc), "--trust-dir",
                        os.path.join(d, "etc/appliance/trusted.d")], capture_output=True,
                       text=True, timeout=180,
                       env={"PATH": "/usr/bin:/bin", "MEMORY_FILE_PATH": mem + "/m.jsonl"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "everything.echo(" in r.stdout and "memory.create_entities(" in r.stdout, r.stdout


# ---- the unit's sandboxing, emulated --------------------------------------------------

def _seccomp_stage():
    """Run as `python3 -c SOURCE SPEC -- ARGV...`: load each seccomp filter of
    SPEC (libseccomp through ctypes; one filter per directive, as systemd
    loads them), then exec ARGV. SPEC: [{"default": ACTION, "rules":
    [[ACTION, SYSCALL, [[ARG, OP, A, B], ...]], ...]}, ...]; ACTION "allow",
    "kill" or "errno:N"."""
    import ctypes
    import json
    import os
    import sys

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)

    class Cmp(ctypes.Structure):
        _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                    ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]

    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(Cmp)]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    ops = {"ne": 1, "lt": 2, "le": 3, "eq": 4, "ge": 5, "gt": 6, "masked_eq": 7}

    def action(a):
        if a == "allow":
            return 0x7fff0000
        if a == "kill":
            return 0x80000000  # SCMP_ACT_KILL_PROCESS, systemd's default
        return 0x00050000 | int(a.split(":")[1])

    spec = json.loads(sys.argv[1])
    assert sys.argv[2] == "--"
    for f in spec:
        ctx = lib.seccomp_init(action(f["default"]))
        assert ctx, "seccomp_init"
        lib.seccomp_attr_set(ctx, 3, 0)  # SCMP_FLTATR_CTL_NNP off, as systemd
        for act, name, cmps in f["rules"]:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue  # not a system call of this architecture
            arr = (Cmp * max(1, len(cmps)))(*[Cmp(c[0], ops[c[1]], c[2], c[3]) for c in cmps])
            rc = lib.seccomp_rule_add_array(ctx, action(act), nr, len(cmps), arr)
            if rc < 0 and rc != -17:
                raise SystemExit("seccomp rule %s %s: %d" % (act, name, rc))
        rc = lib.seccomp_load(ctx)
        if rc < 0:
            raise SystemExit("seccomp_load: %d" % rc)
    os.execv(sys.argv[3], sys.argv[3:])


CAPS = ("chown dac_override dac_read_search fowner fsetid kill setgid setuid setpcap "
        "linux_immutable net_bind_service net_broadcast net_admin net_raw ipc_lock ipc_owner "
        "sys_module sys_rawio sys_chroot sys_ptrace sys_pacct sys_admin sys_boot sys_nice "
        "sys_resource sys_time sys_tty_config mknod lease audit_write audit_control setfcap "
        "mac_override mac_admin syslog wake_alarm block_suspend audit_read perfmon bpf "
        "checkpoint_restore").split()
FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16, "AF_PACKET": 17}
CLONE_FLAGS = {"cgroup": 0x02000000, "ipc": 0x08000000, "net": 0x40000000, "mnt": 0x00020000,
               "pid": 0x20000000, "user": 0x10000000, "uts": 0x04000000, "time": 0x00000080}
# Keys that set no sandboxing (or, KillMode=mixed and ExecReload, that the
# test acts out by sending SIGTERM, and SIGHUP, to the main process only).
NOT_SANDBOXING = {"Type", "ExecStart", "ExecReload", "KillMode", "Restart", "RestartSec", "TimeoutStopSec",
                  "StateDirectoryMode", "CacheDirectoryMode", "RuntimeDirectoryMode",
                  "LogsDirectoryMode", "RuntimeDirectoryPreserve",
                  # cgroup v2 only (this machine has v1): proven in the VM stage
                  # (tests/vm/test_appliance.py), nothing to emulate here
                  "Delegate"}
EXEC_DIRS = {"StateDirectory": "/var/lib", "CacheDirectory": "/var/cache",
             "RuntimeDirectory": "/run", "LogsDirectory": "/var/log"}
YES = {"NoNewPrivileges", "PrivateTmp", "PrivateDevices", "PrivateIPC", "ProtectKernelTunables",
       "ProtectKernelModules", "ProtectKernelLogs", "ProtectClock", "ProtectHostname",
       "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID", "ProtectControlGroups",
       "MemoryDenyWriteExecute", "PrivateUsers", "PrivateNetwork"}


def service_section(text):
    """The [Service] section's settings: {key: [values in order]}."""
    out, section = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            k, _, v = line.partition("=")
            out.setdefault(k, []).append(v)
    return out


def syscall_set(names):
    """The system calls of a SystemCallFilter= list, groups expanded by
    systemd-analyze itself."""
    out = set()
    for n in names:
        if not n.startswith("@"):
            out.add(n)
            continue
        r = analyze("syscall-filter", n)
        assert r.returncode == 0, r.stderr
        for line in r.stdout.splitlines()[1:]:
            line = line.strip()
            if line and not line.startswith("#"):
                out |= syscall_set([line]) if line.startswith("@") else {line}
    return out


def seccomp_spec(s):
    """The filters systemd loads for the settings s."""
    eperm = "errno:%d" % errno.EPERM
    spec = []

    def deny(names, act=eperm):
        spec.append({"default": "allow", "rules": [[act, n, []] for n in sorted(names)]})

    if s.get("SystemCallArchitectures") == ["native"]:
        spec.append({"default": "allow", "rules": []})  # the native ABI only
    if "SystemCallFilter" in s:
        err = s.get("SystemCallErrorNumber", [None])[-1]
        act = "errno:%d" % getattr(errno, err) if err else "kill"
        for line in s["SystemCallFilter"]:
            names = syscall_set(line.lstrip("~").split())
            if line.startswith("~"):
                deny(names, act)
            else:  # what systemd itself always allows, to exec the service
                names |= {"execve", "exit", "exit_group", "rt_sigreturn", "brk", "mmap",
                          "arch_prctl", "futex", "getrlimit"}
                spec.append({"default": act, "rules": [["allow", n, []] for n in sorted(names)]})
    if s.get("MemoryDenyWriteExecute") == ["yes"]:
        spec.append({"default": "allow", "rules": [
            [eperm, "mmap", [[2, "masked_eq", 6, 6]]],
            [eperm, "mprotect", [[2, "masked_eq", 4, 4]]],
            [eperm, "pkey_mprotect", [[2, "masked_eq", 4, 4]]],
            [eperm, "shmat", [[2, "masked_eq", 0o100000, 0o100000]]]]})
    if "RestrictNamespaces" in s:
        allowed = set(" ".join(s["RestrictNamespaces"]).split())
        rules = [["errno:%d" % errno.ENOSYS, "clone3", []]]
        for name, flag in CLONE_FLAGS.items():
            if name not in allowed:
                rules += [[eperm, "unshare", [[0, "masked_eq", flag, flag]]],
                          [eperm, "clone", [[0, "masked_eq", flag, flag]]],
                          [eperm, "setns", [[1, "masked_eq", flag, flag]]]]
        spec.append({"default": "allow", "rules": rules})
    if s.get("LockPersonality") == ["yes"]:
        spec.append({"default": "allow", "rules": [[eperm, "personality", [[0, "ne", 0, 0]]]]})
    if s.get("RestrictRealtime") == ["yes"]:
        spec.append({"default": "allow", "rules": [
            [eperm, "sched_setscheduler", [[1, "eq", p, 0]]] for p in (1, 2, 6)]})
    if s.get("RestrictSUIDSGID") == ["yes"]:
        rules = []
        for bit in (0o4000, 0o2000):
            for call, arg in (("chmod", 1), ("fchmod", 1), ("fchmodat", 2), ("mkdir", 1),
                              ("mkdirat", 2), ("mknod", 1), ("mknodat", 2), ("creat", 1)):
                rules.append([eperm, call, [[arg, "masked_eq", bit, bit]]])
            rules.append([eperm, "open", [[1, "masked_eq", 0o100, 0o100],
                                          [2, "masked_eq", bit, bit]]])
            rules.append([eperm, "openat", [[2, "masked_eq", 0o100, 0o100],
                                            [3, "masked_eq", bit, bit]]])
        spec.append({"default": "allow", "rules": rules})
    if "RestrictAddressFamilies" in s:
        allowed = {FAMILIES[f] for f in " ".join(s["RestrictAddressFamilies"]).split()}
        noaf = "errno:%d" % errno.EAFNOSUPPORT
        rules = [[noaf, "socket", [[0, "eq", f, 0]]] for f in range(46) if f not in allowed]
        spec.append({"default": "allow", "rules": rules + [[noaf, "socket", [[0, "ge", 46, 0]]]]})
    if s.get("ProtectClock") == ["yes"]:
        deny(syscall_set(["@clock"]))
    if s.get("ProtectKernelModules") == ["yes"]:
        deny(syscall_set(["@module"]))
    if s.get("ProtectKernelLogs") == ["yes"]:
        deny({"syslog"})
    if s.get("ProtectHostname") == ["yes"]:
        deny({"sethostname", "setdomainname"})
    return spec


def emulated(s, argv, tag):
    """argv as systemd would start it with the [Service] settings s: a
    private mount namespace set up by a shell script, then the bounding set
    and no_new_privs (setpriv), then the seccomp filters. Returns (argv,
    the cgroups made outside the namespace, to remove afterwards)."""
    unknown = set(s) - NOT_SANDBOXING - set(EXEC_DIRS) - YES - {
        "CapabilityBoundingSet", "ProtectSystem", "ProtectHome", "ProtectProc", "ProcSubset",
        "ReadWritePaths", "UMask", "RestrictAddressFamilies", "RestrictNamespaces",
        "SystemCallArchitectures", "SystemCallFilter", "SystemCallErrorNumber"}
    assert not unknown, "the emulation does not know %s: teach it (docs/install.md)" % unknown
    for k in YES:
        assert s.get(k, ["yes"]) == ["yes"], (k, s[k])
    one = {k: v[-1] for k, v in s.items()}
    q = shlex.quote
    sh = ["set -e", "X=$(mktemp -d /tmp/appliance-emu.XXXXXX)",
          'mount -t tmpfs -o mode=755 tmpfs "$X"; : > "$X/none"; chmod 000 "$X/none"']
    undo = []
    drop = set()

    def hide(path):  # InaccessiblePaths=, as ProtectHome= and the others use it
        sh.append('if [ -d %s ]; then mount -t tmpfs -o ro,mode=000 tmpfs %s; '
                  'elif [ -e %s ]; then mount --bind "$X/none" %s; fi' % ((q(path),) * 4))

    ns = ["unshare", "--mount", "--propagation", "private"]
    if one.get("PrivateUsers") == "yes":
        ns[1:1] = ["--user", "--map-user=0", "--map-group=0"]
    ns += ["--uts"] if one.get("ProtectHostname") == "yes" else []
    ns += ["--ipc"] if one.get("PrivateIPC") == "yes" else []
    ns += ["--net"] if one.get("PrivateNetwork") == "yes" else []
    procopts = []
    if one.get("ProtectProc", "default") != "default":
        procopts.append("hidepid=" + one["ProtectProc"])
    if one.get("ProcSubset") == "pid":
        procopts.append("subset=pid")
    if procopts:
        sh.append("mount -t proc -o nosuid,nodev,noexec,%s proc /proc" % ",".join(procopts))
    if one.get("PrivateDevices") == "yes":
        drop |= {"mknod", "sys_rawio"}
        sh += ['mkdir "$X/dev"; mount -t tmpfs -o mode=755,nosuid,noexec tmpfs "$X/dev"',
               'for n in null zero full random urandom tty; do : > "$X/dev/$n"; '
               'mount --bind /dev/$n "$X/dev/$n"; done',
               'mkdir "$X/dev/pts" "$X/dev/shm" "$X/dev/mqueue"',
               'mount --bind /dev/pts "$X/dev/pts"; ln -s pts/ptmx "$X/dev/ptmx"',
               'mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$X/dev/shm"',
               'mount -t mqueue mqueue "$X/dev/mqueue"',
               'ln -s /proc/self/fd "$X/dev/fd"',
               'for i in 0:stdin 1:stdout 2:stderr; do '
               'ln -s /proc/self/fd/${i%:*} "$X/dev/${i#*:}"; done',
               'mount --move "$X/dev" /dev']
        devcg = "/sys/fs/cgroup/devices"
        if os.path.exists(devcg + "/devices.deny"):  # DevicePolicy=closed, cgroups v1
            cg = "%s/appliance-emu-%s" % (devcg, tag)
            sh += ["mkdir %s; echo a > %s/devices.deny" % (cg, cg),
                   "for r in 'c 1:3 rwm' 'c 1:5 rwm' 'c 1:7 rwm' 'c 1:8 rwm' 'c 1:9 rwm' "
                   "'c 5:0 rwm' 'c 5:2 rwm' 'c 136:* rw'; do echo \"$r\" > %s/devices.allow; "
                   "done" % cg, "echo $$ > %s/cgroup.procs" % cg]
            undo.append(cg)
    if one.get("ProtectKernelTunables") == "yes":
        for p in ("/proc/sys", "/proc/sysrq-trigger", "/proc/acpi", "/proc/apm", "/proc/asound",
                  "/proc/bus", "/proc/fs", "/proc/irq", "/proc/latency_stats", "/proc/mtrr",
                  "/proc/scsi", "/proc/timer_list"):
            sh.append("if [ -e %s ]; then mount --bind %s %s; mount -o remount,bind,ro %s; fi"
                      % (p, p, p, p))
        hide("/proc/kallsyms")
        hide("/proc/kcore")
        sh.append("mount -o remount,bind,ro /sys")  # its own mount: cgroupfs stays writable
    if one.get("ProtectKernelModules") == "yes":
        drop.add("sys_module")
        hide("/lib/modules")
        hide("/usr/lib/modules")
    if one.get("ProtectKernelLogs") == "yes":
        drop.add("syslog")
        hide("/proc/kmsg")
        hide("/dev/kmsg")
    if one.get("ProtectClock") == "yes":
        drop |= {"sys_time", "wake_alarm"}
    if one.get("ProtectControlGroups") == "yes":
        sh.append("for m in $(awk '$5 ~ \"^/sys/fs/cgroup\" {print $5}' /proc/self/mountinfo); "
                  "do mount -o remount,bind,ro $m; done")
    rw = []
    for k, base in EXEC_DIRS.items():
        for name in " ".join(s.get(k, [])).split():
            path = os.path.join(base, name)
            if k != "LogsDirectory" and not os.path.exists(path):
                os.makedirs(path, 0o700)  # systemd makes them; the appliance would too
            rw.append(path)
    rw += " ".join(s.get("ReadWritePaths", [])).split()
    sh.append('umount "$X"; rmdir "$X"')
    ps = one.get("ProtectSystem", "no")
    if ps != "no":
        sel = {"strict": '$5 !~ "^/(proc|sys|dev)(/|$)"', "full": '$5 ~ "^/(usr|boot|efi|etc)"',
               "yes": '$5 ~ "^/(usr|boot|efi)"'}[ps]
        if ps != "strict":
            for p in ("/usr", "/boot", "/efi") + (("/etc",) if ps == "full" else ()):
                sh.append("if [ -d %s ]; then mount --bind %s %s; fi" % (p, p, p))
        sh.append("for m in $(awk '%s {print $5}' /proc/self/mountinfo); do "
                  "mount -o remount,bind,ro $m 2>/dev/null || true; done" % sel)
    if one.get("PrivateTmp") == "yes":
        sh += ["mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /tmp",
               "mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs /var/tmp"]
    for p in rw:
        p = p.lstrip("-")
        sh.append("if [ -e %s ]; then mount --bind %s %s; mount -o remount,bind,rw %s; fi"
                  % ((q(p),) * 4))
    if one.get("ProtectHome", "no") == "yes":
        for p in ("/home", "/root", "/run/user"):
            hide(p)
    elif one.get("ProtectHome", "no") != "no":
        raise AssertionError("the emulation knows ProtectHome=yes only")
    if "UMask" in one:
        sh.append("umask " + one["UMask"])
    caps = set(CAPS)
    if "CapabilityBoundingSet" in s:
        caps = {c.lower()[4:] for c in " ".join(s["CapabilityBoundingSet"]).split()}
    caps -= drop
    tail = ["setpriv", "--inh-caps", "-all",
            "--bounding-set", "-all" + "".join(",+" + c for c in sorted(caps))]
    if one.get("NoNewPrivileges") == "yes":
        tail.append("--no-new-privs")
    tail.append("--")
    spec = seccomp_spec(s)
    if spec:
        tail += ["/usr/bin/python3", "-c",
                 inspect.getsource(_seccomp_stage) + "\n_seccomp_stage()\n",
                 json.dumps(spec), "--"]
    sh.append("exec " + " ".join(q(a) for a in tail + list(argv)))
    return ns + ["/bin/sh", "-c", "\n".join(sh)], undo


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TOKEN = "appliance_install-test-token-0123456789abcdef"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}


def http_call(port, code):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": code}, "_meta": MODERN}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/mcp", json.dumps(body), {
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + TOKEN, "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "run_python"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    assert r.status == 200, (r.status, data)
    msgs = [json.loads(x[6:]) for x in data.splitlines() if x.startswith("data: ")] or \
        [json.loads(data)]
    res = [m for m in msgs if m.get("id") == 1]
    assert res and "result" in res[0], data
    return res[0]["result"]["structuredContent"]


def status(pid):
    with open("/proc/%d/status" % pid) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


@test
def the_unit_as_emulated_serves_a_cell_over_http_and_stops_on_sigterm():
    if not os.path.exists(TOY):
        raise AssertionError("missing %s (make build/toy-server)" % TOY)
    d = installed()
    unit = read(os.path.join(d, "usr/lib/systemd/system/appliance.service"))
    s = service_section(unit)
    argv = shlex.split(s["ExecStart"][-1])
    assert argv == ["/usr/bin/appliance", "run", "--policy", POLICY_SIG], argv
    # The toy server where the emulated unit still sees it and its user may run it.
    toy = os.path.join(d, "toy-server")
    shutil.copy2(TOY, toy)
    os.chmod(toy, 0o755)
    port = free_port()
    sig = signed({"servers": {"toy": {"command": [toy], "network": False}},
                  "tools": {"toy.*": {"access": "read"}},
                  "roles": {"r": {"tools": ["toy.*"]}},
                  "clients": {"tokens": [{"name": "t", "role": "r",
                                          "sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
                  "http": {"listen": ["127.0.0.1:%d" % port]}})
    # As ExecStart= says, with the installed binary, this test's policy and
    # the installed trust directory in place of /etc/appliance's.
    argv = [os.path.join(d, "usr/bin/appliance"), "run", "--policy", sig,
            "--trust-dir", os.path.join(d, "etc/appliance/trusted.d")]
    full, cgroups = emulated(s, argv, secrets.token_hex(4))
    p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, cwd="/")
    lines = []
    threading.Thread(target=lambda: lines.extend(x.decode("utf-8", "replace")
                                                 for x in p.stderr), daemon=True).start()
    detached = None
    try:
        end = time.time() + 90
        while "serving MCP over HTTP at 127.0.0.1:%d" % port not in "".join(lines):
            assert p.poll() is None, "exited %d:\n%s" % (p.returncode, "".join(lines))
            assert time.time() < end, "not serving:\n" + "".join(lines)
            time.sleep(0.05)
        # the process serving is the appliance itself, confined as the unit says
        st = status(p.pid)
        assert os.readlink("/proc/%d/exe" % p.pid) == argv[0], os.readlink("/proc/%d/exe" % p.pid)
        want = 0
        for c in " ".join(s["CapabilityBoundingSet"]).split():
            want |= 1 << CAPS.index(c.lower()[4:])
        assert int(st["CapBnd"], 16) == want, (st["CapBnd"], hex(want))
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
        with open("/proc/%d/mountinfo" % p.pid) as f:
            mounts = {m.split()[4]: m.split()[5] for m in f}
        assert mounts["/"].startswith("ro"), mounts["/"]
        assert mounts.get("/tmp", "").startswith("rw"), mounts
        assert mounts.get("/var/lib/appliance", "").startswith("rw"), mounts
        # syslog(2) is outside SystemCallFilter=: gVisor must still be the one
        # to answer the cell (SystemCallErrorNumber=EPERM), not a kill.
        res = http_call(port, "import ctypes\n"
                              "size = ctypes.CDLL(None).syscall(103, 10, 0, 0)\n"
                              "a = await toy.add(a=40, b=2)\n"
                              "print(a['sum'], size > 0, (await toy.detach())['pid'])\n")
        assert res["error"] is None and not res["stopped"], (res, "".join(lines))
        total, size_ok, detached = res["stdout"].split()
        assert (total, size_ok) == ("42", "True"), res
        # its pid in the server's own namespace; the host's is found by its cgroup
        inside = int(detached)
        mine = __import__("gatewaykit").jail_processes(p.pid, "toy")
        detached = [k for k, (ns, _) in mine.items() if ns == inside]
        assert len(detached) == 1, (inside, mine)
        detached = detached[0]
        # ExecReload=: SIGHUP to the main process; the policy is read again,
        # held to its checks and taken, inside the unit's sandbox
        assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"], s["ExecReload"]
        p.send_signal(signal.SIGHUP)
        end = time.time() + 120
        while "reloaded: serial" not in "".join(lines):
            assert p.poll() is None, "exited %d:\n%s" % (p.returncode, "".join(lines))
            assert "reload refused" not in "".join(lines), "".join(lines)
            assert time.time() < end, "no reload:\n" + "".join(lines)
            time.sleep(0.05)
        # KillMode=mixed: SIGTERM to the main process alone
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0, "exit %d after SIGTERM:\n%s" % (p.returncode,
                                                                        "".join(lines))
        time.sleep(0.2)
        assert not os.path.exists("/proc/%d" % detached), \
            "the server's detached child %d outlived the appliance" % detached
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if detached and os.path.exists("/proc/%d" % detached):
            os.kill(detached, signal.SIGKILL)
        for cg in cgroups:  # empty once the last of its processes is gone
            for _ in range(200):
                try:
                    os.rmdir(cg)
                    break
                except OSError as e:
                    if e.errno != errno.EBUSY:
                        break
                    time.sleep(0.05)


# ---- uninstall ---------------------------------------------------------------------------

@test
def install_puts_the_data_image_beside_the_cell_image_and_uninstall_removes_it():
    data = os.path.join(ROOT, "build", "image-data")
    d = scratch("appliance-install-data.")
    make("install", d, data=data)
    share = os.path.join(d, "usr", "share", "appliance")
    got = sorted(os.path.relpath(os.path.join(top, n), os.path.join(share, "image-data"))
                 for top, _, names in os.walk(os.path.join(share, "image-data")) for n in names)
    assert got == layout_files(data), got
    for name in ("image-data.digest", "image-data.spdx.json"):
        with open(os.path.join(share, name), "rb") as f, \
                open(os.path.join(ROOT, "build", name), "rb") as g:
            assert f.read() == g.read(), name
        assert os.stat(os.path.join(share, name)).st_mode & 0o7777 == 0o644
    make("uninstall", d, data=data)
    assert not os.path.exists(share), os.listdir(share)


@test
def uninstall_removes_what_install_put_and_keeps_keys_policies_and_state():
    d = scratch("appliance-uninstall-test.")
    make("install", d)
    keep = {"etc/appliance/trusted.d/admin.pub": "untrusted comment: a key\n",
            "etc/appliance/policy.json": "{}\n", "etc/appliance/policy.json.sig": "sig\n",
            "var/lib/appliance/policy.state": "appliance-policy-state 2\n"}
    for p, text in keep.items():
        with open(os.path.join(d, p), "w") as f:
            f.write(text)
    make("uninstall", d)
    left = tree(d)
    files = sorted(p for p, v in left.items() if v[0] == "f")
    assert files == sorted(keep), files
    for p, text in keep.items():
        assert read(os.path.join(d, p)) == text, p
    for p in expected():
        assert p not in left, p
    assert "usr/share/appliance" not in left, sorted(left)
    for p in ("etc/appliance/trusted.d", "etc/appliance", "var/lib/appliance"):
        assert left[p][0] == "d", p
    # once they are empty, the directories install made go too; the parents
    # (usr/bin, usr/lib/systemd/system, ...) are not install's to remove
    for p in keep:
        os.unlink(os.path.join(d, p))
    make("uninstall", d)
    left = tree(d)
    assert all(v[0] == "d" for v in left.values()), left
    for p in OWN_DIRS:
        assert p not in left, p
    # and again: nothing left to do is no error
    make("uninstall", d)
    assert tree(d) == left


if __name__ == "__main__":
    main()
