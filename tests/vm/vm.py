"""vm.py: boot the test VM and drive it over ssh (docs/vm-test.md).

    from vm import VM, step

    with VM(put={"/root/appliance.deb": "build/appliance_1.0_amd64.deb"},
            forward=[8080]) as vm:
        with step("install"):
            vm.run("dpkg -i /root/appliance.deb", timeout=600)
        url = "http://127.0.0.1:%d/" % vm.host_port(8080)

Entering the block makes a fresh disk image from the root scripts/vm-test
keeps (APPL_VM_ROOT; without it, `scripts/vm-test --root` is run to get
one) with the files of `put` in it, boots it under qemu (TCG, no network
out of the guest: only its sshd and the ports of `forward` are reachable,
each from 127.0.0.1 on a free host port) and returns once sshd answers and
`systemctl is-system-running --wait` says running or degraded. Leaving it
powers the guest off (`systemctl poweroff`, then waits for qemu to exit)
and kills qemu only when it does not; an interrupt (SIGINT, SIGTERM,
SIGHUP) kills it at once. qemu also dies with this process (a parent-death
signal), so no VM outlives a test. Standard library only: the host runs
Debian's python3, the guest has none.
"""

import atexit
import contextlib
import ctypes
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GUEST_SSH = 22
# Emulation is slow, and CI has two noisy cores: the boot takes ~20 s when
# idle; the deadline is for a machine that is anything but.
BOOT_TIMEOUT = float(os.environ.get("APPL_VM_BOOT_TIMEOUT", "600"))
POWEROFF_TIMEOUT = 120.0
_PR_SET_PDEATHSIG = 1


class VMError(Exception):
    """The VM did not boot, a command failed (check=True), or timed out."""


class Interrupted(BaseException):
    """SIGTERM or SIGHUP arrived while a VM was up (SIGINT is KeyboardInterrupt)."""


def say(msg):
    print("vm: " + msg, flush=True)


@contextlib.contextmanager
def step(name):
    """Time a step of a test: prints `step NAME: N.N s` (or FAILED)."""
    t = time.monotonic()
    try:
        yield
    except BaseException:
        print("step %s: FAILED after %.1f s" % (name, time.monotonic() - t), flush=True)
        raise
    print("step %s: %.1f s" % (name, time.monotonic() - t), flush=True)


def _ignore_interrupts():
    """From here on the teardown runs to its end (SIGKILL still stops it,
    and qemu with it: the parent-death signal)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)


def _free_port():
    # The port is free now; qemu binds it a moment later. A race lost there
    # makes qemu exit at once, and the boot is tried again on new ports.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent(parent):
    libc = ctypes.CDLL(None, use_errno=True)

    def pre():
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl
            os._exit(1)

    return pre


def _tail(path, lines=40):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _remove_orphans(vmdir):
    """The run directories (a disk image each) of processes that are gone:
    a driver killed with SIGKILL has no chance to remove its own."""
    for name in os.listdir(vmdir):
        m = re.fullmatch(r"run-(\d+)-\w+", name)
        if not m:
            continue
        try:
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(vmdir, name), ignore_errors=True)
        except PermissionError:
            pass


def read_from_disk(disk, path):
    """A file's bytes from a powered-off VM's disk image (debugfs)."""
    r = subprocess.run(["debugfs", "-R", "cat " + path, disk], capture_output=True)
    if r.returncode != 0:
        raise VMError("debugfs cat %s %s: %s" % (disk, path, r.stderr.decode(errors="replace")))
    return r.stdout


def _root():
    root = os.environ.get("APPL_VM_ROOT")
    if root:
        return root
    r = subprocess.run([os.path.join(TOP, "scripts/vm-test"), "--root"],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0 or not r.stdout.strip():
        raise VMError("scripts/vm-test --root failed (exit %d)" % r.returncode)
    return r.stdout.strip().splitlines()[-1]


class VM:
    """One booted guest; see the module's text.

    put:      {guest absolute path: host path}, copied into the disk image
              owned by root with the host file's permission bits
    forward:  guest TCP ports to reach from the host (host_port(port))
    memory:   MiB; cpus: virtual CPUs; disk_size: the image's size (sparse)
    append:   more kernel command line
    keep_disk: leave the image (self.disk) after power-off, for
              read_from_disk(); otherwise it is removed
    """

    def __init__(self, put=None, forward=(), memory=2048, cpus=2, disk_size="3G",
                 append="", keep_disk=False, boot_timeout=BOOT_TIMEOUT):
        self.root = _root()
        self.vmdir = os.environ.get("APPL_VM_DIR") or os.path.dirname(self.root)
        self.put_files = dict(put or {})
        self.forward = [int(p) for p in forward]
        if GUEST_SSH in self.forward:
            raise ValueError("port 22 is the driver's own (ssh)")
        self.memory, self.cpus, self.disk_size = memory, cpus, disk_size
        self.append, self.keep_disk, self.boot_timeout = append, keep_disk, boot_timeout
        self.console_log = os.path.join(self.vmdir, "console.log")
        self.ssh_dir = os.path.join(self.vmdir, "ssh")
        self.times = {}
        self.state = None          # running or degraded, once booted
        self.failed_units = []     # when degraded
        self.ports = {}
        self.rundir = self.disk = None
        self._qemu = None
        self._qemu_err = None
        self._mux = self._mux_dir = None
        self._old_handlers = {}
        for p in (self.console_log, self.vmdir):
            if re.search(r"[,:]", p):
                raise VMError("%s: qemu's options cannot take a path with ',' or ':'" % p)

    # ---- the context ---------------------------------------------------------
    def __enter__(self):
        self._trap_signals()
        try:
            self._make_disk()
            self._boot()
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, Interrupted)):
                _ignore_interrupts()
                say("interrupted: killing qemu")
            self._kill()
            self._cleanup()
            self._restore_signals()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None and issubclass(exc_type, (KeyboardInterrupt, Interrupted)):
                _ignore_interrupts()
                say("interrupted: killing qemu")
                self._kill()
            else:
                self.poweroff()
        finally:
            self._kill()
            self._cleanup()
            self._restore_signals()
        return False

    def _trap_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return

        def raise_interrupted(signum, frame):
            # Once: a second signal (a group's, then a forwarded one) must
            # not break off the teardown the first one started.
            _ignore_interrupts()
            raise Interrupted("signal %d" % signum)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, raise_interrupted)
        self._old_handlers.setdefault(signal.SIGINT, signal.getsignal(signal.SIGINT))

    def _restore_signals(self):
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)
        self._old_handlers = {}

    # ---- the disk image --------------------------------------------------------
    def _make_disk(self):
        t = time.monotonic()
        _remove_orphans(self.vmdir)
        self.rundir = tempfile.mkdtemp(prefix="run-%d-" % os.getpid(), dir=self.vmdir)
        stage = os.path.join(self.rundir, "tree")
        # Hard links: a second of work instead of copying 700 MB. Nothing
        # in stage may be written in place (that would write the cached
        # root): _place unlinks a name before it writes one.
        subprocess.run(["cp", "-al", os.path.join(self.root, "tree"), stage], check=True)
        keys = self.ssh_dir
        self._place(stage, "/root/.ssh/authorized_keys",
                    os.path.join(keys, "id_ed25519.pub"), 0o600, dir_mode=0o700)
        self._place(stage, "/etc/ssh/ssh_host_ed25519_key",
                    os.path.join(keys, "host_ed25519_key"), 0o600)
        self._place(stage, "/etc/ssh/ssh_host_ed25519_key.pub",
                    os.path.join(keys, "host_ed25519_key.pub"), 0o644)
        for remote, local in self.put_files.items():
            self._place(stage, remote, local, None)
        self.disk = os.path.join(self.rundir, "disk.img")
        with open(self.disk, "wb") as f:
            f.truncate(_size(self.disk_size))
        r = subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "vmroot", "-d", stage, self.disk],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise VMError("mkfs.ext4 -d failed: " + r.stderr.strip())
        shutil.rmtree(stage)
        self.times["disk"] = time.monotonic() - t
        say("disk image %.1f s (%s, %d file(s) put)" % (self.times["disk"], self.disk_size,
                                                      len(self.put_files)))

    @staticmethod
    def _place(stage, remote, local, mode, dir_mode=0o755):
        if not remote.startswith("/") or ".." in remote.split("/"):
            raise VMError("put: %r is not an absolute guest path" % remote)
        parts = [p for p in remote.split("/") if p]
        d = stage
        for p in parts[:-1]:
            d = os.path.join(d, p)
            if os.path.islink(d):
                raise VMError("put: %s: /%s is a symbolic link in the guest; name its target"
                              % (remote, os.path.relpath(d, stage)))
            if not os.path.isdir(d):
                os.mkdir(d, dir_mode)
                os.chown(d, 0, 0)
        dest = os.path.join(d, parts[-1])
        if os.path.lexists(dest):
            if os.path.isdir(dest) and not os.path.islink(dest):
                raise VMError("put: %s is a directory in the guest" % remote)
            os.unlink(dest)
        shutil.copyfile(local, dest)
        if mode is None:
            mode = stat.S_IMODE(os.stat(local).st_mode)
        os.chown(dest, 0, 0)
        os.chmod(dest, mode)

    # ---- boot ----------------------------------------------------------------------
    def _qemu_argv(self):
        fwd = "".join(",hostfwd=tcp:127.0.0.1:%d-:%d" % (h, g) for g, h in self.ports.items())
        append = ("root=/dev/vda rw console=ttyS0 systemd.unified_cgroup_hierarchy=1 "
                  "panic=-1 " + self.append).strip()
        return [
            "qemu-system-x86_64", "-machine", "q35", "-accel", "tcg",
            "-m", str(self.memory), "-smp", str(self.cpus),
            "-nodefaults", "-display", "none", "-no-reboot",
            "-kernel", os.path.join(self.root, "vmlinuz"),
            "-initrd", os.path.join(self.root, "initrd.img"),
            "-append", append,
            # ttyS0: the console, kept; ttyS1: vm-ready.service's one line.
            "-serial", "file:" + self.console_log,
            "-serial", "file:" + os.path.join(self.rundir, "events.log"),
            "-drive", "file=%s,if=virtio,format=raw,cache=unsafe" % self.disk,
            "-netdev", "user,id=net0,restrict=on" + fwd,
            "-device", "virtio-net-pci,netdev=net0",
            "-device", "virtio-rng-pci",
        ]

    def _start_qemu(self):
        self.ports = {g: _free_port() for g in [GUEST_SSH] + self.forward}
        self._qemu_err = open(os.path.join(self.rundir, "qemu.err"), "w+")
        self._qemu = subprocess.Popen(
            self._qemu_argv(), stdin=subprocess.DEVNULL, stdout=self._qemu_err,
            stderr=self._qemu_err, start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()))
        atexit.register(self._kill)

    def _boot(self):
        t = time.monotonic()
        deadline = t + self.boot_timeout
        events = os.path.join(self.rundir, "events.log")
        for attempt in range(3):
            self._start_qemu()
            line = self._wait_ready(events, deadline)
            if line is not None:
                break
            err = self._qemu_errors()
            if "host forwarding rule" not in err or attempt == 2:
                raise VMError("qemu exited during boot (%s): %s\n--- console (%s):\n%s"
                              % (self._qemu.returncode, err, self.console_log,
                                 _tail(self.console_log)))
            say("a host port was taken meanwhile; booting again on others")
        if line != "vm-ready ssh=active":
            raise VMError("sshd did not start in the guest (%r)\n--- console (%s):\n%s"
                          % (line, self.console_log, _tail(self.console_log)))
        # sshd is up and the address configured: the first connection is
        # expected to work; a few more tries cover a slow guest.
        for _ in range(5):
            err = self._start_mux()
            if err is None:
                break
            say("ssh: %s; trying again" % err)
            time.sleep(1)
        rc, out, err = self.run("systemctl is-system-running --wait", check=False,
                                timeout=max(30, deadline - time.monotonic()))
        self.state = out.strip()
        if self.state not in ("running", "degraded"):
            raise VMError("the guest is %r (exit %d): %s" % (self.state, rc, err.strip()))
        if self.state == "degraded":
            _, out, _ = self.run("systemctl --failed --plain --no-legend", check=False)
            self.failed_units = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
        self.times["boot"] = time.monotonic() - t
        say("boot to ssh %.1f s: %s%s; ssh on 127.0.0.1:%d%s" % (
            self.times["boot"], self.state,
            " (failed: %s)" % ", ".join(self.failed_units) if self.failed_units else "",
            self.ports[GUEST_SSH],
            "".join(", %d on %d" % (g, h) for g, h in self.ports.items() if g != GUEST_SSH)))

    def _wait_ready(self, events, deadline):
        """The ready line from ttyS1, or None when qemu exited first."""
        while True:
            try:
                with open(events, "rb") as f:
                    for raw in f.read().decode("utf-8", "replace").splitlines():
                        raw = raw.strip()
                        if raw.startswith("vm-ready "):
                            return raw
            except FileNotFoundError:
                pass
            if self._qemu.poll() is not None:
                return None
            if time.monotonic() > deadline:
                raise VMError("no ready line from the guest in %.0f s\n--- console (%s):\n%s"
                              % (self.boot_timeout, self.console_log, _tail(self.console_log)))
            # qemu writes the file; the line is the observable, read again
            # until it is there.
            time.sleep(0.2)

    def _qemu_errors(self):
        if self._qemu_err is None:
            return ""
        self._qemu_err.flush()
        self._qemu_err.seek(0)
        return self._qemu_err.read().strip()

    def _start_mux(self):
        """One ssh connection that every later command rides on (a
        handshake costs a second of emulated CPU). None, or why not."""
        path = os.path.join(self.rundir, "ssh.sock")
        if len(path) > 100:  # a socket's path has 108 bytes at most
            self._mux_dir = tempfile.mkdtemp(prefix="appliance-vm-")
            path = os.path.join(self._mux_dir, "ssh.sock")
        argv = self._ssh_base() + ["-M", "-N", "-f", "-o", "ControlPersist=yes",
                                   "-o", "ControlPath=" + path, "root@127.0.0.1"]
        # -f: ssh goes to the background once logged in; its stderr is a
        # file, so nothing here waits on a pipe it still holds.
        with open(os.path.join(self.rundir, "ssh-master.err"), "w+") as err:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=err, timeout=120)
            err.seek(0)
            text = err.read().strip()
        if r.returncode != 0:
            return text or "exit %d" % r.returncode
        self._mux = path
        return None

    def _stop_mux(self):
        if self._mux:
            subprocess.run(self._ssh_base() + ["-o", "ControlPath=" + self._mux, "-O", "exit",
                                               "root@127.0.0.1"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
            self._mux = None
        if self._mux_dir:
            shutil.rmtree(self._mux_dir, ignore_errors=True)
            self._mux_dir = None

    # ---- power-off, teardown -------------------------------------------------------
    def poweroff(self, timeout=POWEROFF_TIMEOUT):
        """systemctl poweroff, then wait for qemu; kill it after timeout s."""
        if self._qemu is None or self._qemu.poll() is not None:
            return
        t = time.monotonic()
        # The connection may drop before ssh hears back (exit 255): the
        # observable is qemu's exit.
        self.run("systemctl poweroff", check=False, timeout=60)
        try:
            self._qemu.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            say("the guest did not power off in %.0f s: killing qemu" % timeout)
            self._kill()
            return
        self.times["poweroff"] = time.monotonic() - t
        say("power-off %.1f s" % self.times["poweroff"])

    def _kill(self):
        q = self._qemu
        if q is None or q.poll() is not None:
            return
        q.terminate()
        try:
            q.wait(timeout=10)
        except subprocess.TimeoutExpired:
            q.kill()
            q.wait()

    def _cleanup(self):
        # The master exits by itself once qemu is gone (its connection
        # closes); this only makes it quicker.
        try:
            self._stop_mux()
        except (OSError, subprocess.SubprocessError):
            pass
        if self._qemu_err is not None:
            self._qemu_err.close()
            self._qemu_err = None
        if self.rundir and os.path.isdir(self.rundir):
            if self.keep_disk and self.disk and os.path.exists(self.disk):
                shutil.rmtree(os.path.join(self.rundir, "tree"), ignore_errors=True)
            else:
                shutil.rmtree(self.rundir, ignore_errors=True)

    # ---- driving it --------------------------------------------------------------------
    def host_port(self, guest_port):
        """The host port (on 127.0.0.1) that reaches guest_port."""
        try:
            return self.ports[int(guest_port)]
        except KeyError:
            raise KeyError("guest port %s is not forwarded (VM(forward=[...]))" % guest_port)

    def _ssh_base(self):
        k = self.ssh_dir
        return ["ssh", "-F", "/dev/null", "-i", os.path.join(k, "id_ed25519"),
                "-p", str(self.ports[GUEST_SSH]),
                "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "UserKnownHostsFile=" + os.path.join(k, "known_hosts"),
                "-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias=appliance-vm",
                "-o", "ConnectTimeout=30", "-o", "ServerAliveInterval=15",
                "-o", "ServerAliveCountMax=8", "-o", "LogLevel=ERROR"]

    def ssh_argv(self):
        """ssh's argv up to the command, for what run() does not cover. It
        uses the shared connection; without one, ssh connects anew."""
        mux = ["-o", "ControlMaster=no", "-o", "ControlPath=" + self._mux] if self._mux else []
        return self._ssh_base() + mux + ["root@127.0.0.1"]

    def run(self, cmd, check=True, timeout=300, input=None):
        """Run cmd (bash, as root) in the guest: (rc, stdout, stderr) as str.

        timeout bounds the command in the guest (coreutils timeout, then
        KILL 10 s later) and the ssh client here (30 s more). rc 255 is
        ssh's own failure. check: raise VMError unless rc is 0.
        """
        remote = "bash -c " + shlex.quote(cmd)
        if timeout is not None:
            remote = "timeout -k 10 %d %s" % (max(1, int(timeout)), remote)
        t = time.monotonic()
        try:
            r = subprocess.run(self.ssh_argv() + [remote], input=input, capture_output=True,
                               text=True, errors="replace",
                               timeout=None if timeout is None else timeout + 30)
        except subprocess.TimeoutExpired:
            raise VMError("%r: no answer over ssh in %d s" % (cmd, timeout + 30))
        if timeout is not None and r.returncode == 124 and time.monotonic() - t >= timeout:
            raise VMError("%r timed out after %d s in the guest" % (cmd, timeout))
        if check and r.returncode != 0:
            raise VMError("%r exited %d\n--- stdout:\n%s--- stderr:\n%s"
                          % (cmd, r.returncode, r.stdout, r.stderr))
        return r.returncode, r.stdout, r.stderr

    def popen(self, cmd, **kwargs):
        """subprocess.Popen of ssh running cmd in the guest (no timeout)."""
        return subprocess.Popen(self.ssh_argv() + ["bash -c " + shlex.quote(cmd)], **kwargs)

    def put(self, local, remote, mode=None):
        """Copy a host file into the running guest (root's, local's mode by default)."""
        if mode is None:
            mode = stat.S_IMODE(os.stat(local).st_mode)
        q = shlex.quote(remote)
        tmp = shlex.quote(remote + ".put-tmp")
        cmd = ("mkdir -p -- \"$(dirname -- %s)\" && cat > %s && chmod %o %s && mv -f -- %s %s"
               % (q, tmp, mode, tmp, tmp, q))
        with open(local, "rb") as f:
            r = subprocess.run(self.ssh_argv() + [cmd], stdin=f, capture_output=True,
                               timeout=600)
        if r.returncode != 0:
            raise VMError("put %s %s: %s" % (local, remote, r.stderr.decode(errors="replace")))

    def get(self, remote, local):
        """Copy a guest file to the host."""
        with open(local, "wb") as f:
            r = subprocess.run(self.ssh_argv() + ["cat -- " + shlex.quote(remote)], stdout=f,
                               stderr=subprocess.PIPE, timeout=600)
        if r.returncode != 0:
            raise VMError("get %s: %s" % (remote, r.stderr.decode(errors="replace")))


def _size(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", str(text))
    if not m:
        raise ValueError("disk_size: %r is not N, NK, NM or NG" % text)
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


if __name__ == "__main__":
    sys.exit("vm.py is a module: scripts/vm-test runs the tests that use it")
