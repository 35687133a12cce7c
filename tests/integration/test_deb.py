"""test_deb.py: `make deb` and the package it makes (debian/, docs/install.md).

Builds the package once with `make deb` into a temporary DEB_DIR (make runs
with -o on the binary, the toy server and the image digest, so nothing is
rebuilt: the package holds what the build made), then checks its file list
and modes (dpkg-deb -c), its control fields (Depends and Recommends with
versions, the version the binary and debian/changelog say), lintian, and its
maintainer scripts: installed, reinstalled and purged with dpkg into
throwaway roots (dpkg --root, scripts run with DPKG_ROOT), in a mount
namespace where the host's /etc, /var and /usr are read-only, so a script
that reached past DPKG_ROOT would fail instead of touching this machine.
Runs as root.
"""

import atexit
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time

from harness import main, skip, test
from cellkit import APPLIANCE, LAYOUT, ROOT, digest

BUILD = os.path.dirname(os.path.abspath(APPLIANCE))
TOY = os.path.join(BUILD, "toy-server")
UNIT_SRC = os.path.join(ROOT, "dist", "appliance.service")
SYSUSERS_SRC = os.path.join(ROOT, "dist", "appliance.sysusers")
MAN_SRC = os.path.join(ROOT, "docs", "appliance.1")
# The directories postinst makes, with make install's modes.
MADE_DIRS = {"etc/appliance": 0o755, "etc/appliance/trusted.d": 0o755,
             "var/lib/appliance": 0o700}
MADE_RECORD = "var/lib/appliance-package/made"


def read(path, mode="r"):
    with open(path, mode) as f:
        return f.read()


def need_tools():
    if os.geteuid() != 0:
        skip("needs root (dpkg --root, unshare)")
    for t in ("dpkg-buildpackage", "dh", "lintian", "dpkg-deb", "unshare"):
        if not shutil.which(t):
            skip("no %s (scripts/install-deps installs debhelper, dpkg-dev, lintian)" % t)


def version_h():
    return re.search(r'#define APPL_VERSION "([^"]+)"',
                     read(os.path.join(ROOT, "pkg", "base", "version.h"))).group(1)


def limits(name):
    m = re.search(r"#define %s\s+([0-9]+)u" % name,
                  read(os.path.join(ROOT, "pkg", "base", "limits.h")))
    assert m, name
    return int(m.group(1))


def scratch(prefix):
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, True)
    return d


_deb = None


def deb():
    """(path of the .deb, seconds make deb took), built once."""
    global _deb
    if _deb is None:
        need_tools()
        out = scratch("appliance-deb.")
        env = {k: v for k, v in os.environ.items()
               if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
        argv = ["make", "-s", "-C", ROOT, "-o", BUILD + "/appliance", "-o", TOY,
                "-o", LAYOUT + ".digest", "deb", "BUILD=" + BUILD, "IMAGE_LAYOUT=" + LAYOUT,
                "DEB_DIR=" + out]
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        took = time.monotonic() - t0
        assert r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(argv), r.returncode,
                                                         r.stdout[-4000:], r.stderr[-4000:])
        path = os.path.join(out, "appliance_%s_amd64.deb" % version_h())
        assert os.path.isfile(path), (os.listdir(out), r.stdout[-2000:])
        # nothing of the build is left in the tree, and nothing went to ..
        left = [n for n in os.listdir(os.path.join(ROOT, "debian"))
                if n in ("appliance", ".debhelper", "files", "debhelper-build-stamp")
                or n.endswith((".substvars", ".debhelper", ".debhelper.log"))]
        assert left == [], left
        parent = os.path.dirname(ROOT)
        assert not [n for n in os.listdir(parent) if n.startswith("appliance_")], parent
        print("# make deb: %.1f s" % took)
        _deb = (path, took)
    return _deb[0]


def control():
    r = subprocess.run(["dpkg-deb", "-f", deb()], capture_output=True, text=True, check=True)
    fields, key = {}, None
    for line in r.stdout.splitlines():
        if line[:1] in (" ", "\t"):
            fields[key] += "\n" + line
        else:
            key, _, v = line.partition(":")
            fields[key] = v.strip()
    return fields


def relations(field):
    """{package: version constraint or ''} of a Depends-like field; an
    alternative (a | b) keeps its whole text as the key."""
    out = {}
    for item in field.split(","):
        item = item.strip()
        m = re.fullmatch(r"([a-z0-9.+-]+)(?: \((.+)\))?", item)
        if m:
            out[m.group(1)] = m.group(2) or ""
        else:
            out[item] = ""
    return out


# ---- what the package holds ------------------------------------------------

def expected_files():
    """{path: mode} of the files the package holds: make install's with
    PREFIX=/usr and the unit in /lib/systemd/system, the man page compressed,
    and debhelper's copyright, changelog and lintian overrides."""
    files = {"usr/bin/appliance": 0o755,
             "usr/libexec/appliance/toy-server": 0o755,
             "usr/share/appliance/image.digest": 0o644,
             "usr/share/appliance/image.spdx.json": 0o644,
             "lib/systemd/system/appliance.service": 0o644,
             "usr/lib/sysusers.d/appliance.conf": 0o644,
             "usr/share/doc/appliance/copyright": 0o644,
             "usr/share/doc/appliance/changelog.gz": 0o644,
             "usr/share/lintian/overrides/appliance": 0o644}
    for top, _, names in os.walk(LAYOUT):
        for n in names:
            files["usr/share/appliance/image/" +
                  os.path.relpath(os.path.join(top, n), LAYOUT)] = 0o644
    for f in os.listdir(os.path.join(ROOT, "policy")):
        if f.endswith(".json"):
            files["usr/share/appliance/examples/" + f] = 0o644
    if os.path.exists(MAN_SRC):
        files["usr/share/man/man1/appliance.1.gz"] = 0o644
    return files


@test
def the_package_holds_make_installs_files_with_their_modes():
    r = subprocess.run(["dpkg-deb", "-c", deb()], capture_output=True, text=True, check=True)
    files, dirs = {}, {}
    for line in r.stdout.splitlines():
        perm, owner, _size, _date, _time, name = line.split(None, 5)
        name = name[2:].rstrip("/")  # "./usr/bin/appliance"
        assert owner == "root/root", line
        mode = sum(0o400 >> i for i, c in enumerate(perm[1:10]) if c != "-")
        if perm[0] == "d":
            dirs[name] = mode
        else:
            assert perm[0] == "-", line
            files[name] = mode
    want = expected_files()
    assert sorted(files) == sorted(want), "extra: %s\nmissing: %s" % (
        sorted(set(files) - set(want)), sorted(set(want) - set(files)))
    for p, mode in want.items():
        assert files[p] == mode, "%s: %o, want %o" % (p, files[p], mode)
    for p, mode in dirs.items():
        assert mode == 0o755, "%s: %o" % (p, mode)
    # /etc and /var are postinst's, not the package's
    assert not [d for d in dirs if d.split("/")[0] in ("etc", "var")], sorted(dirs)


@test
def the_packaged_files_are_what_was_built():
    d = scratch("appliance-deb-x.")
    subprocess.run(["dpkg-deb", "-x", deb(), d], check=True)
    for f in expected_files():
        if f.startswith("usr/share/appliance/image/"):
            assert read(os.path.join(d, f), "rb") == read(
                os.path.join(LAYOUT, f[len("usr/share/appliance/image/"):]), "rb"), f
    assert read(os.path.join(d, "usr/share/appliance/image.digest")).strip() == digest()
    assert read(os.path.join(d, "usr/lib/sysusers.d/appliance.conf")) == read(SYSUSERS_SRC)
    # the unit is dist/appliance.service with ExecStart= naming /usr/bin
    unit = read(os.path.join(d, "lib/systemd/system/appliance.service"))
    src = read(UNIT_SRC)
    assert unit == src.replace("\nExecStart=/usr/local/bin/appliance ",
                               "\nExecStart=/usr/bin/appliance "), unit
    # the examples name the packaged image and toy server
    for f in os.listdir(os.path.join(d, "usr/share/appliance/examples")):
        text = read(os.path.join(d, "usr/share/appliance/examples", f))
        assert "/usr/share/appliance/image" in text and digest() in text, f
        assert "/usr/local/share/" not in text and "/usr/local/libexec/" not in text, (f, text)
    assert "/usr/libexec/appliance/toy-server" in read(
        os.path.join(d, "usr/share/appliance/examples/toy.json"))
    # stripped by dh_strip, but the same program: it says its version
    r = subprocess.run([os.path.join(d, "usr/bin/appliance"), "--version"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.splitlines()[0] == "appliance " + version_h(), r.stdout


# ---- control fields ----------------------------------------------------------

@test
def one_version_in_the_binary_the_changelog_and_the_package():
    need_tools()
    v = version_h()
    r = subprocess.run(["dpkg-parsechangelog", "-l", os.path.join(ROOT, "debian", "changelog"),
                        "-S", "Version"], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == v, (r.stdout, v)
    f = control()
    assert (f["Package"], f["Version"], f["Architecture"]) == ("appliance", v, "amd64"), f
    assert os.path.basename(deb()) == "appliance_%s_amd64.deb" % v


@test
def depends_name_runsc_and_the_linked_libraries_with_versions():
    dep = relations(control()["Depends"])
    tested = limits("APPL_RUNSC_TESTED_DATE")
    assert dep.get("runsc") == ">= 0.0~%d" % tested, dep
    # what the binary links, from dpkg-shlibdeps, each with a version
    for lib in ("libc6", "libjansson4", "libsodium23", "libarchive13", "libpcre2-8-0",
                "libseccomp2"):
        assert re.fullmatch(r">= [0-9][^ ]*", dep.get(lib, "")), (lib, dep)
    assert "erofs-utils" in dep and "passwd" in dep, dep
    assert "systemd | systemd-standalone-sysusers | systemd-sysusers" in dep, dep
    # the runsc Debian 12 has in bookworm-backports satisfies it
    r = subprocess.run(["dpkg", "--compare-versions", "0.0~20240729.0-4~bpo12+2", "ge",
                        "0.0~%d" % tested])
    assert r.returncode == 0


@test
def the_dlopened_libraries_are_recommended_by_the_names_the_binary_gives():
    f = control()
    rec = relations(f["Recommends"])
    assert set(rec) == {"libcurl4", "libmicrohttpd12", "libhiredis0.14"}, rec
    assert "libcurl" not in f["Depends"] and "libmicrohttpd" not in f["Depends"], f["Depends"]
    # the binary names these packages when it cannot load the library
    src = read(os.path.join(ROOT, "pkg", "http", "client.c")) + \
        read(os.path.join(ROOT, "pkg", "http", "front_drive.c")) + \
        read(os.path.join(ROOT, "pkg", "ledger", "conn.c"))
    named = set(re.findall(r'#define (?:CURL|MHD|LEDGER_HIREDIS)_PACKAGE\s+"([^"]+)"', src))
    assert named == set(rec), (named, rec)
    # neither is linked
    d = scratch("appliance-deb-x.")
    subprocess.run(["dpkg-deb", "-x", deb(), d], check=True)
    r = subprocess.run(["readelf", "-d", os.path.join(d, "usr/bin/appliance")],
                       capture_output=True, text=True, check=True)
    assert "libcurl" not in r.stdout and "libmicrohttpd" not in r.stdout and \
        "libhiredis" not in r.stdout, r.stdout
    # the floors are at least what the symbols files ask for the functions used
    def table(text, name):  # the names in a "#define NAME(X) X(a) X(b) ..." table
        block = text[text.index("#define %s(X)" % name):]
        return re.findall(r"X\((\w+)\)", block[:block.index("/* clang-format on */")])

    fns = {"libcurl4": ["curl_" + n for n in table(src, "CURL_FNS")],
           "libmicrohttpd12": ["MHD_" + n for n in table(
               read(os.path.join(ROOT, "pkg", "http", "front_int.h")), "MHD_FNS")]}
    assert "curl_multi_socket_action" in fns["libcurl4"] and \
        "MHD_start_daemon" in fns["libmicrohttpd12"], fns
    for pkg, names in fns.items():
        symfile = "/var/lib/dpkg/info/%s:amd64.symbols" % pkg
        if not os.path.exists(symfile):
            skip("no %s (scripts/install-deps installs the -dev packages)" % symfile)
        syms = {}
        for line in read(symfile).splitlines():
            m = re.match(r"^ (\w+)@\S+ (\S+)", line)
            if m:
                syms[m.group(1)] = m.group(2)
        floor = rec[pkg].split()[1]
        for n in names:
            assert n in syms, (pkg, n)
            r = subprocess.run(["dpkg", "--compare-versions", floor, "ge", syms[n]])
            assert r.returncode == 0, (pkg, n, syms[n], floor)


@test
def lintian_finds_nothing_not_overridden():
    d = deb()
    r = subprocess.run(["lintian", "-i", d], capture_output=True, text=True, timeout=600)
    tags = [l for l in r.stdout.splitlines() if re.match(r"^[EW]: ", l)]
    assert r.returncode == 0 and tags == [], "exit %d\n%s%s" % (r.returncode, r.stdout,
                                                                  r.stderr)
    # and with everything shown: every info tag is overridden (with why, in
    # debian/appliance.lintian-overrides), and every override is used
    r = subprocess.run(["lintian", "-I", "--pedantic", "--show-overrides", d],
                       capture_output=True, text=True, timeout=600)
    tags = [l for l in r.stdout.splitlines() if re.match(r"^[EWIPX]: ", l)]
    assert r.returncode == 0 and tags == [], "exit %d\n%s%s" % (r.returncode, r.stdout,
                                                                  r.stderr)
    assert "O: appliance: arch-dep-package-has-big-usr-share" in r.stdout, r.stdout


# ---- maintainer scripts, in throwaway roots ------------------------------------

def new_root():
    """An empty root with a dpkg database of its own."""
    r = scratch("appliance-deb-root.")
    os.chmod(r, 0o755)
    for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "etc",
              "var/log"):
        os.makedirs(os.path.join(r, d))
    for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
        open(os.path.join(r, f), "w").close()
    return r


HOST_GUARD = ("set -e; for d in /etc /var /usr; do mount --bind $d $d; "
              "mount -o remount,bind,ro $d; done; ")


def dpkg(root, *args):
    """dpkg on root with its scripts run outside a chroot (DPKG_ROOT=root;
    the root has no shell of its own) and the dependencies it lacks
    forced, in a mount namespace where the host's /etc, /var and /usr are
    read-only: the scripts may write only below root."""
    argv = ["dpkg", "--root=" + root, "--log=" + os.path.join(root, "var/log/dpkg.log"),
            "--force-script-chrootless", "--force-depends", *args]
    before = {p: read(p, "rb") for p in ("/etc/passwd", "/etc/group")}
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        HOST_GUARD + 'exec "$@"', "sh", *argv],
                       capture_output=True, text=True, timeout=300)
    assert {p: read(p, "rb") for p in before} == before, "the host's accounts changed"
    assert r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(argv), r.returncode, r.stdout,
                                                     r.stderr)
    assert "Read-only file system" not in r.stderr, r.stderr
    return r


def mode_of(root, p):
    st = os.lstat(os.path.join(root, p))
    assert stat.S_ISDIR(st.st_mode), p
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def account(root, db, name):
    for line in read(os.path.join(root, "etc", db)).splitlines():
        if line.split(":")[0] == name:
            return line
    return None


@test
def install_makes_the_directories_the_user_and_leaves_the_unit_off():
    root = new_root()
    r = dpkg(root, "-i", deb())
    assert "appliance: warning" not in r.stderr, r.stderr
    for p, mode in MADE_DIRS.items():
        assert mode_of(root, p) == (mode, 0, 0), (p, mode_of(root, p))
        assert os.listdir(os.path.join(root, p)) in ([], ["trusted.d"]), p
    assert sorted(read(os.path.join(root, MADE_RECORD)).split()) == \
        sorted("/" + p for p in MADE_DIRS)
    # systemd-sysusers --root made the servers' user and group
    assert account(root, "passwd", "appliance-upstream"), read(os.path.join(root, "etc/passwd"))
    assert account(root, "group", "appliance-upstream")
    # neither enabled nor started: no wants link, and nothing for
    # deb-systemd-helper to remove but its own state
    assert not os.path.exists(os.path.join(
        root, "etc/systemd/system/multi-user.target.wants/appliance.service"))
    assert os.path.isfile(os.path.join(root, "usr/bin/appliance"))
    # installing again changes none of it, and notes nothing twice
    os.chmod(os.path.join(root, "etc/appliance"), 0o750)  # the administrator's choice
    dpkg(root, "-i", deb())
    assert mode_of(root, "etc/appliance") == (0o750, 0, 0)
    lines = read(os.path.join(root, MADE_RECORD)).split()
    assert len(lines) == len(set(lines)) == 3, lines


@test
def purge_removes_what_the_package_made_and_keeps_keys_policy_floor_and_audit_log():
    root = new_root()
    dpkg(root, "-i", deb())
    keep = {"etc/appliance/trusted.d/admin.pub": "key\n",
            "etc/appliance/policy.json": "{}\n",
            "var/lib/appliance/default.serial": "7\n",
            "var/log/appliance/audit.jsonl": "{}\n"}
    for p, text in keep.items():
        os.makedirs(os.path.dirname(os.path.join(root, p)), exist_ok=True)
        with open(os.path.join(root, p), "w") as f:
            f.write(text)
    os.makedirs(os.path.join(root, "var/cache/appliance/images/sha256-x"))
    os.makedirs(os.path.join(root, "run/appliance/uids"))
    r = dpkg(root, "--purge", "appliance")
    for p, text in keep.items():
        assert read(os.path.join(root, p)) == text, p
    for p in ("etc/appliance/trusted.d", "etc/appliance", "var/lib/appliance",
              "var/log/appliance"):
        assert "kept /%s" % p in r.stderr, r.stderr
    assert not os.path.exists(os.path.join(root, "var/cache/appliance"))
    assert os.path.isdir(os.path.join(root, "run/appliance/uids"))  # left to the next boot
    assert not os.path.exists(os.path.join(root, "var/lib/appliance-package"))
    assert not os.path.exists(os.path.join(root, "usr/bin/appliance"))
    # never the system user: files may still be its
    assert account(root, "passwd", "appliance-upstream")


@test
def purge_of_an_unused_install_leaves_nothing_of_the_package():
    root = new_root()
    before = set()
    for top, dirs, files in os.walk(root):
        before |= {os.path.relpath(os.path.join(top, n), root) for n in dirs + files}
    dpkg(root, "-i", deb())
    os.makedirs(os.path.join(root, "var/log/appliance"))  # LogsDirectory=, empty
    dpkg(root, "--purge", "appliance")
    after = set()
    for top, dirs, files in os.walk(root):
        after |= {os.path.relpath(os.path.join(top, n), root) for n in dirs + files}
    new = sorted(p for p in after - before if not p.startswith("var/lib/dpkg/"))
    # what is left is the accounts (kept on purpose), dpkg's log and
    # deb-systemd-helper's state directory
    allowed = {"etc/passwd", "etc/group", "etc/shadow", "etc/gshadow", "etc/.pwd.lock",
               "var/log/dpkg.log"}
    assert [p for p in new if p not in allowed and not p.startswith("var/lib/systemd")] == [], new


@test
def purge_keeps_directories_the_package_did_not_make():
    root = new_root()
    os.makedirs(os.path.join(root, "etc/appliance"), 0o750)  # the administrator's, empty
    os.chmod(os.path.join(root, "etc/appliance"), 0o750)
    dpkg(root, "-i", deb())
    assert mode_of(root, "etc/appliance") == (0o750, 0, 0)
    assert "/etc/appliance\n" not in read(os.path.join(root, MADE_RECORD))
    dpkg(root, "--purge", "appliance")
    assert mode_of(root, "etc/appliance") == (0o750, 0, 0)
    assert not os.path.exists(os.path.join(root, "etc/appliance/trusted.d"))
    assert not os.path.exists(os.path.join(root, "var/lib/appliance"))


@test
def postinst_warns_when_an_allocator_hands_out_the_servers_uids():
    first, last = limits("APPL_SERVER_UID_FIRST"), limits("APPL_SERVER_UID_LAST")
    post = read(os.path.join(ROOT, "debian", "appliance.postinst"))
    assert "UID_FIRST=%d\n" % first in post and "UID_LAST=%d\n" % last in post
    cases = [
        ("etc/login.defs", "UID_MIN\t\t 1000\nUID_MAX\t\t100000\n", "login.defs UID_MIN-UID_MAX"),
        ("etc/adduser.conf", "FIRST_UID=1000\nLAST_UID=90000\n", "adduser.conf FIRST_UID-LAST_UID"),
        ("etc/subuid", "alice:80000:65536\n", "/etc/subuid's range of alice"),
        ("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nldapuser:x:82000:82000::/:/bin/sh\n",
         "1 passwd entries (ldapuser, ...)"),
    ]
    for path, text, said in cases:
        root = new_root()
        with open(os.path.join(root, path), "w") as f:
            f.write(text)
        r = dpkg(root, "-i", deb())
        assert said in r.stderr and "%d-%d" % (first, last) in r.stderr, (path, r.stderr)
    # Debian 12's own settings hand out none of them
    root = new_root()
    for p in ("etc/login.defs", "etc/adduser.conf"):
        if os.path.exists("/" + p):
            shutil.copy("/" + p, os.path.join(root, p))
    r = dpkg(root, "-i", deb())
    assert "appliance: warning" not in r.stderr, r.stderr


if __name__ == "__main__":
    main()
