"""test_smoke.py: the VM is what the stage promises (docs/vm-test.md).

Checks, each printed with what it saw: /sys/fs/cgroup is cgroup2fs, PID 1
is systemd, the root cgroup offers memory and pids, runsc is gVisor
20240729 or later and runs /bin/true on systrap and on ptrace, and a unit
with Delegate=yes gets memory and pids. Then two experiments on cgroup v2
delegation and runsc, whose results are printed and never fail the test:
they are observations for the appliance's cgroup v2 support, not
promises of the VM.

Run by scripts/vm-test (make vm-test); exit 0 when every check holds.
"""

import filecmp
import json
import os
import re
import shlex
import socket
import sys
import tempfile
import time

from vm import VM, VMError, step

RUNSC_TESTED = 20240729
CG = "/sys/fs/cgroup"


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def show(label, text):
    lines = text.rstrip("\n").splitlines() or [""]
    print("  %s: %s" % (label, lines[0]))
    for ln in lines[1:]:
        print("  %s  %s" % (" " * len(label), ln))


def guest_wait_for(vm, path, pattern, timeout=60):
    """Wait in the guest until a line of path matches pattern (grep -E)."""
    vm.run("until grep -qE %s %s 2>/dev/null; do sleep 0.2; done"
           % (shlex.quote(pattern), shlex.quote(path)), timeout=timeout)


def timed_guest(vm, cmd, timeout=300):
    """(rc, out, err, seconds measured in the guest) of cmd."""
    rc, out, err = vm.run(
        's=$(date +%%s%%N); %s; rc=$?; e=$(date +%%s%%N); echo "elapsed-ns $((e - s))" >&2; '
        "exit $rc" % cmd, check=False, timeout=timeout)
    m = re.search(r"elapsed-ns (\d+)\s*$", err)
    secs = int(m.group(1)) / 1e9 if m else float("nan")
    err = err[:m.start()] if m else err
    return rc, out, err, secs


def driver(vm, put_text):
    """vm.py's own promises: a file put in the image, put/get, a forwarded port."""
    with step("driver"):
        _, out, _ = vm.run("stat -c '%U %a' /root/smoke/put.txt && cat /root/smoke/put.txt")
        expect(out == "root 644\n" + put_text, "the file put in the image: %r" % out)
        with tempfile.TemporaryDirectory() as d:
            src, back = os.path.join(d, "src"), os.path.join(d, "back")
            with open(src, "wb") as f:
                f.write(os.urandom(100000))
            vm.put(src, "/root/smoke/sub/blob", mode=0o600)
            _, out, _ = vm.run("stat -c '%U %a %s' /root/smoke/sub/blob")
            expect(out.strip() == "root 600 100000", "vm.put: %r" % out)
            vm.get("/root/smoke/sub/blob", back)
            expect(filecmp.cmp(src, back, shallow=False), "vm.get gave other bytes")
        # A guest service on a forwarded port, read from the host.
        vm.run("systemd-run --unit=fwd systemd-socket-activate -l 8080 -a --inetd "
               "cat /root/smoke/put.txt")
        vm.run("until ss -Hltn 'sport = :8080' | grep -q .; do sleep 0.2; done", timeout=60)
        with socket.create_connection(("127.0.0.1", vm.host_port(8080)), timeout=60) as c:
            got = b""
            while True:
                b = c.recv(4096)
                if not b:
                    break
                got += b
        expect(got.decode() == put_text, "port 8080 through the host's %d: %r"
               % (vm.host_port(8080), got))
        print("  put in the image, put, get, guest 8080 on host %d: ok" % vm.host_port(8080))


def checks(vm):
    with step("cgroup2"):
        _, out, _ = vm.run("stat -fc %T /sys/fs/cgroup")
        show("stat -fc %T /sys/fs/cgroup", out)
        expect(out.strip() == "cgroup2fs", "/sys/fs/cgroup is %r, not cgroup2fs" % out.strip())

    with step("pid1"):
        _, out, _ = vm.run("readlink /proc/1/exe; cat /proc/1/comm; systemctl --version | head -n1")
        show("PID 1 (exe, comm, version)", out)
        exe, comm = out.splitlines()[:2]
        expect(comm == "systemd" and exe.endswith("/systemd"), "PID 1 is %s (%s)" % (exe, comm))

    with step("controllers"):
        _, out, _ = vm.run("cat %s/cgroup.controllers" % CG)
        show("/sys/fs/cgroup/cgroup.controllers", out)
        have = out.split()
        expect("memory" in have and "pids" in have, "root controllers: %s" % out.strip())

    with step("runsc version"):
        _, out, _ = vm.run("runsc --version")
        show("runsc --version", out)
        m = re.search(r"(\d{8})\.\d+", out.splitlines()[0])
        expect(m and int(m.group(1)) >= RUNSC_TESTED,
               "runsc is older than %d: %s" % (RUNSC_TESTED, out.splitlines()[0]))

    # --network=none as the appliance runs it: runsc's default network
    # would set up NAT with iptables, which the guest does not have.
    for platform in ("systrap", "ptrace"):
        with step("runsc do " + platform):
            t = time.monotonic()
            cmd = "runsc --network=none --platform=%s do /bin/true" % platform
            rc, out, err, secs = timed_guest(vm, cmd, timeout=180)
            print("  %s: exit %d, %.2f s in the guest (%.2f s with ssh)"
                  % (cmd, rc, secs, time.monotonic() - t))
            expect(rc == 0, "runsc do on %s failed: %s" % (platform, (out + err).strip()))

    with step("delegated unit"):
        vm.run("systemd-run -p Delegate=yes --unit=probe sleep 100")
        path = CG + "/system.slice/probe.service/cgroup.controllers"
        _, out, _ = vm.run("cat " + path)
        show(path, out)
        expect("memory" in out.split() and "pids" in out.split(),
               "the delegated unit's controllers: %s" % out.strip())


# ---- experiment A: a delegated unit's process moves itself into a leaf ---------
EXP_A = r"""
cg=/sys/fs/cgroup/system.slice/probe-leaf.service
exec >/run/exp-a.log 2>&1
say() { echo "$*"; }
say "process cgroup: $(cat /proc/self/cgroup)"
say "unit controllers: $(cat $cg/cgroup.controllers)"
say "unit subtree_control before: [$(cat $cg/cgroup.subtree_control)]"
if echo "+memory +pids" > $cg/cgroup.subtree_control; then
	say "subtree_control written with the process still in the unit's cgroup: ok"
else
	say "subtree_control written with the process still in the unit's cgroup: refused (above)"
fi
mkdir $cg/leaf && say "mkdir leaf: ok"
echo 0 > $cg/leaf/cgroup.procs && say "moved itself: $(cat /proc/self/cgroup)"
echo "+memory +pids" > $cg/cgroup.subtree_control && say "+memory +pids into the unit's subtree_control: ok"
say "unit subtree_control after: [$(cat $cg/cgroup.subtree_control)]"
mkdir $cg/cells && say "mkdir cells: ok"
say "cells controllers: [$(cat $cg/cells/cgroup.controllers)]"
echo 64M > $cg/cells/memory.max && say "64M into cells/memory.max: ok"
say "cells/memory.max: $(cat $cg/cells/memory.max 2>&1)"
echo 32 > $cg/cells/pids.max && say "32 into cells/pids.max: ok"
say "cells/pids.max: $(cat $cg/cells/pids.max 2>&1)"
say done
exec sleep 1000
"""


def experiment_a(vm):
    cg = CG + "/system.slice/probe-leaf.service"
    vm.run("cat > /root/exp-a.sh", input=EXP_A)
    vm.run("systemd-run -p Delegate=yes --unit=probe-leaf bash /root/exp-a.sh")
    guest_wait_for(vm, "/run/exp-a.log", "^done$")
    _, out, _ = vm.run("cat /run/exp-a.log")
    show("experiment A (in probe-leaf.service)", out)
    # Does systemd leave the delegated subtree alone across a reload?
    vm.run("systemctl daemon-reload")
    _, out, _ = vm.run("echo \"unit subtree_control: [$(cat %s/cgroup.subtree_control)]\"; "
                       "echo \"cells/memory.max: $(cat %s/cells/memory.max)\"; "
                       "echo \"leaf procs: $(cat %s/leaf/cgroup.procs)\"" % (cg, cg, cg))
    show("after systemctl daemon-reload", out)


# ---- experiment B: runsc run with cgroupsPath inside a delegated unit ----------
HOLD_B = r"""
cg=/sys/fs/cgroup/system.slice/probe2.service
exec >/run/exp-b.log 2>&1
mkdir $cg/main && echo 0 > $cg/main/cgroup.procs
echo "+memory +pids" > $cg/cgroup.subtree_control
mkdir -p $cg/cells/x
echo "+memory +pids" > $cg/cells/cgroup.subtree_control
echo "+memory +pids" > $cg/cells/x/cgroup.subtree_control
echo "probe2 subtree_control: [$(cat $cg/cgroup.subtree_control)]"
echo "cells subtree_control: [$(cat $cg/cells/cgroup.subtree_control)]"
echo "cells/x subtree_control: [$(cat $cg/cells/x/cgroup.subtree_control)]"
echo ready
exec sleep 1000
"""

# The processes in the cgroup CG/$1, by argv[0] (their comm is runsc's
# re-executed "exe"), or by comm when they have no argv.
SANDBOX_PROCS = r"""
for pid in $(cat /sys/fs/cgroup/$1/cgroup.procs); do
	a=$(tr '\0' '\n' < /proc/$pid/cmdline | head -n 1)
	echo "$pid ${a:-(no argv; comm $(cat /proc/$pid/comm))}"
done
"""

# subtree_control of the cgroups above the unit, which are systemd's.
ABOVE = ("for c in / /system.slice; do echo \"$c: subtree_control [$(cat /sys/fs/cgroup$c/"
         "cgroup.subtree_control)]\"; done")


def runsc_bundle(vm, bundle, cgroups_path, limit):
    """A bundle whose process sleeps, root the guest's / read-only."""
    vm.run("mkdir -p %s && cd %s && rm -f config.json && runsc spec -- /bin/sleep 1000"
           % (bundle, bundle))
    _, out, _ = vm.run("cat %s/config.json" % bundle)
    spec = json.loads(out)
    spec["root"] = {"path": "/", "readonly": True}
    spec["process"]["terminal"] = False
    linux = spec.setdefault("linux", {})
    linux["cgroupsPath"] = cgroups_path
    linux["resources"] = {"memory": {"limit": limit}, "pids": {"limit": 64}}
    vm.run("cat > %s/config.json" % bundle, input=json.dumps(spec, indent=1))


def runsc_case(vm, cid, unit, path, limit):
    base = CG + "/system.slice/" + unit
    sb = CG + path
    bundle = "/root/bundle-" + cid
    runsc_bundle(vm, bundle, path, limit)
    _, out, _ = vm.run(ABOVE)
    show("above the unit, before", out)
    # The sandbox outlives the command: its output goes to a file, or it
    # would hold the ssh session open.
    rc, _, _, secs = timed_guest(
        vm, "runsc --root /run/rs --network=none --platform=systrap run --detach "
        "--bundle %s %s </dev/null >/run/runsc-%s.out 2>&1" % (bundle, cid, cid), timeout=180)
    print("  B %s: runsc run --detach, cgroupsPath %s, memory.limit %d: exit %d, %.2f s"
          % (cid, path, limit, rc, secs))
    _, out, _ = vm.run("cat /run/runsc-%s.out" % cid, check=False)
    if out.strip():
        show("runsc said", out.strip())
    chain = [sb]
    while chain[-1] != base:
        chain.append(chain[-1].rsplit("/", 1)[0])
    _, out, _ = vm.run("; ".join(
        "if [ -d %s ]; then echo \"%s: procs [$(cat %s/cgroup.procs | tr '\\n' ' ')] "
        "controllers [$(cat %s/cgroup.controllers)] subtree_control "
        "[$(cat %s/cgroup.subtree_control)]\"; else echo '%s: absent'; fi"
        % (q, q[len(CG):], q, q, q, q[len(CG):]) for q in reversed(chain)), check=False)
    show("the unit's subtree after runsc", out)
    _, out, _ = vm.run(ABOVE)
    show("above the unit, after", out)
    if rc != 0:
        return
    _, out, _ = vm.run("echo \"memory.max: $(cat %s/memory.max)\"; "
                       "echo \"pids.max: $(cat %s/pids.max)\"" % (sb, sb), check=False)
    show("the sandbox's limits", out)
    _, out, _ = vm.run("bash -s %s" % path[1:], input=SANDBOX_PROCS, check=False)
    show("processes in the sandbox's cgroup", out)
    _, out, _ = vm.run("runsc --root /run/rs state %s" % cid, check=False)
    m = re.search(r'"status":\s*"(\w+)"', out)
    print("  runsc state: %s" % (m.group(1) if m else out.strip()[:200]))

    # Freeze it through cgroup v2's freezer, then thaw.
    rc, out, err = vm.run(
        "echo 1 > %s/cgroup.freeze && timeout 30 sh -c 'until grep -qx \"frozen 1\" "
        "%s/cgroup.events; do sleep 0.1; done'; echo \"wait for frozen 1: exit $?\"; "
        "grep frozen %s/cgroup.events; "
        "for p in $(cat %s/cgroup.procs); do echo \"$p $(grep '^State' /proc/$p/status)\"; done"
        % (sb, sb, sb, sb), check=False, timeout=60)
    show("echo 1 > cgroup.freeze", (out + err).strip())
    rc, out, err = vm.run(
        "echo 0 > %s/cgroup.freeze && timeout 30 sh -c 'until grep -qx \"frozen 0\" "
        "%s/cgroup.events; do sleep 0.1; done'; echo \"wait for frozen 0: exit $?\"; "
        "runsc --root /run/rs exec %s /bin/true && echo 'runsc exec /bin/true after thaw: ok'"
        % (sb, sb, cid), check=False, timeout=120)
    show("echo 0 > cgroup.freeze", (out + err).strip())

    rc, out, err = vm.run(
        "runsc --root /run/rs delete --force %s; echo \"delete: exit $?\"; " % cid +
        "; ".join("[ -d %s ] && echo '%s: left' || echo '%s: gone'"
                  % (q, q[len(CG):], q[len(CG):]) for q in chain),
        check=False, timeout=120)
    show("after runsc delete --force", (out + err).strip())


def experiment_b(vm):
    vm.run("cat > /root/exp-b.sh", input=HOLD_B)
    vm.run("systemd-run -p Delegate=yes --unit=probe2 bash /root/exp-b.sh")
    guest_wait_for(vm, "/run/exp-b.log", "^ready$")
    _, out, _ = vm.run("cat /run/exp-b.log")
    show("B: probe2.service prepared", out)
    # The parents made, +memory +pids enabled down to cells/x.
    runsc_case(vm, "x1", "probe2.service", "/system.slice/probe2.service/cells/x/sandbox",
               256 << 20)
    # Nothing made below probe2.service: does runsc make other/y, and
    # enable controllers on the way?
    runsc_case(vm, "y1", "probe2.service", "/system.slice/probe2.service/other/y/sandbox",
               128 << 20)
    # The unit's own process still in the unit's cgroup, which then cannot
    # enable controllers for a child (no internal processes).
    vm.run("systemd-run -p Delegate=yes --unit=probe3 sleep 1000")
    runsc_case(vm, "z1", "probe3.service", "/system.slice/probe3.service/sandbox", 128 << 20)


def run_all(vm, put_text):
    """True when a check failed; the experiments only print."""
    failed = False
    try:
        driver(vm, put_text)
        checks(vm)
    except (AssertionError, VMError) as e:
        print("FAILED: %s" % e)
        failed = True
    for name, fn in (("experiment A", experiment_a), ("experiment B", experiment_b)):
        try:
            with step(name):
                fn(vm)
        except Exception as e:  # an observation, never the test's result
            print("  %s did not finish: %s" % (name, e))
    vm.run("systemctl stop fwd.service probe.service probe-leaf.service probe2.service "
           "probe3.service", check=False)
    return failed


def main():
    put_text = "put in the disk image\n"
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as put:
        put.write(put_text)
        put.flush()
        os.chmod(put.name, 0o644)
        with VM(put={"/root/smoke/put.txt": put.name}, forward=[8080]) as vm:
            failed = run_all(vm, put_text)
    print("test_smoke: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
