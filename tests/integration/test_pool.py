"""test_pool.py: the warm pool of `appliance run` (docs/pool.md), against real
runsc and the real image: sandboxes booted ahead of need, used once, replaced
after a run, replaced when killed while idle, retried with a growing backoff
when they fail to boot, and all destroyed at shutdown.

Each appliance gets a private --runtime-dir, so its instance directory
(i-PID-RAND/ with runsc/ and bundles/) can be inspected. A pooled sandbox is
counted as ready when its `runsc run` process is below the appliance, its
gVisor sandbox process has started the application, and its whole process
tree has used no CPU for a while: a booting sandbox burns CPU, a ready one
waits for its cell line and uses none.
"""

import glob
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import main, test
from policykit import INIT, INITIALIZED, Signer, call
from cellkit import (APPLIANCE, ROOT, descendants, digest, ensure_user, image_with_runner,
                     rootless_files, runsc_pids_of)

_kit = Signer("appliance-pool-test.")
TOOLS_LIST = {"jsonrpc": "2.0", "id": "tools", "method": "tools/list"}


def work():
    return _kit.dir()


def policy(limits=None, image=None, **extra):
    """A freshly signed policy with a serial above every earlier one; image is
    (layout, digest), the built image by default; extra top-level keys."""
    return _kit.policy(limits, image=image, **extra)


class Appliance:
    """One `appliance run` with a private runtime directory, spoken to with raw
    JSON-RPC lines; its stderr goes to a file that can be read at any time."""

    def __init__(self, sig, extra=()):
        self.runtime = tempfile.mkdtemp(prefix="rt.", dir=work())
        self.errpath = os.path.join(self.runtime + ".stderr")
        self.errfile = open(self.errpath, "wb")
        self.p = subprocess.Popen(
            _kit.argv(sig) + ["--runtime-dir", self.runtime] + list(extra), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errfile)
        self.pid = self.p.pid
        self.started = time.time()
        self.answers = queue.Queue()
        self.kept = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.answers.put(json.loads(line))
        self.answers.put(None)

    def send(self, *msgs):
        for m in msgs:
            self.p.stdin.write(json.dumps(m).encode() + b"\n")
        self.p.stdin.flush()

    def answer(self, i, timeout=60):
        """The answer with id i (others that arrive first are kept)."""
        deadline = time.time() + timeout
        while i not in self.kept:
            left = deadline - time.time()
            assert left > 0, "no answer to %r within %d s" % (i, timeout)
            try:
                a = self.answers.get(timeout=left)
            except queue.Empty:
                continue
            assert a is not None, "the appliance closed its output: %s" % self.stderr()
            self.kept[a.get("id")] = a
        return self.kept.pop(i)

    def initialize(self):
        """initialize, then tools/list as clients do: over stdio that starts
        the runtime, the servers and the pool."""
        self.send(INIT, INITIALIZED, TOOLS_LIST)
        assert self.answer(0)["result"]["protocolVersion"] == "2025-11-25"
        assert "result" in self.answer("tools", 180)

    def run(self, i, src, timeout=60):
        """Run src as call id i; returns (structuredContent, seconds)."""
        t = time.time()
        self.send(call(i, src))
        a = self.answer(i, timeout)
        return a["result"]["structuredContent"], time.time() - t

    def stderr(self):
        with open(self.errpath, "rb") as f:
            return f.read().decode(errors="replace")

    def instance(self):
        """Its instance directory (i-PID-RAND), or None when there is none."""
        found = glob.glob(os.path.join(self.runtime, "i-%d-*" % self.pid))
        assert len(found) <= 1, found
        return found[0] if found else None

    def bundles(self):
        return sorted(os.listdir(os.path.join(self.instance(), "bundles")))

    def close(self, timeout=20):
        """End of input; returns the exit status."""
        self.p.stdin.close()
        return self.p.wait(timeout=timeout)

    def stop(self):
        """Whatever happened, leave nothing running."""
        if self.p.poll() is None:
            try:
                self.p.stdin.close()
            except OSError:
                pass
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.errfile.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def ok(sc, stdout):
    assert sc["error"] is None and sc["stopped"] is False and sc["reason"] is None, sc
    assert sc["stdout"] == stdout, sc


# ---- the processes of a sandbox ------------------------------------------------

def stat_fields(pid):
    """/proc/pid/stat from the state on (field 3), or None when pid is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read()
    except OSError:
        return None


def snapshot(pids):
    """pid -> cmdline, to tell later whether the same processes still live."""
    return {k: cmdline(k) for k in pids if cmdline(k) is not None}


def still_alive(snap):
    """Those of a snapshot still running (not gone, not a zombie, same cmdline)."""
    alive = []
    for k, argv in snap.items():
        f = stat_fields(k)
        if f and f[0] != "Z" and cmdline(k) == argv:
            alive.append(k)
    return alive


def tree_cpu(pid):
    """CPU ticks used so far by pid and every process below it."""
    total = 0
    for k in [pid] + descendants(pid):
        f = stat_fields(k)
        if f:
            total += int(f[11]) + int(f[12])
    return total


def has_started(pid):
    """Whether the sandbox of `runsc run` pid runs its application: its
    runsc-sandbox process exists and has a child (the traced stub)."""
    for k in descendants(pid):
        argv = cmdline(k) or b""
        if argv.startswith(b"runsc-sandbox") and descendants(k):
            return True
    return False


QUIET_S = 0.8  # a sandbox whose tree used no CPU this long is waiting


def wait_ready(app, n, timeout=20, exclude=()):
    """Wait until exactly n sandboxes below app are booted and idle (none of
    them in exclude); returns their `runsc run` pids."""
    deadline = time.time() + timeout
    quiet_since, last = {}, {}
    while time.time() < deadline:
        pids = sorted(runsc_pids_of(app.pid))
        now = time.time()
        for k in pids:
            cpu = tree_cpu(k)
            if k not in last or cpu > last[k] + 1 or not has_started(k):
                quiet_since[k] = now
            last[k] = cpu
        if (len(pids) == n and not set(pids) & set(exclude) and
                all(now - quiet_since[k] >= QUIET_S for k in pids)):
            return pids
        time.sleep(0.1)
    raise AssertionError("not %d ready sandboxes within %d s: runsc %r, stderr: %s"
                         % (n, timeout, runsc_pids_of(app.pid), app.stderr()))


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("%s: not within %d s" % (what, timeout))


def cgroup_dir(pid, controller):
    """The directory of pid's cgroup in a v1 controller, or None."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                _, ctl, path = line.rstrip("\n").split(":", 2)
                if controller in ctl.split(","):
                    return "/sys/fs/cgroup/%s%s" % (controller, path)
    except OSError:
        pass
    return None


def freezer_state(pid):
    d = cgroup_dir(pid, "freezer")
    try:
        with open(os.path.join(d, "freezer.state")) as f:
            return f.read().strip()
    except (OSError, TypeError):
        return None


def cpuacct_usage(pid):
    with open(os.path.join(cgroup_dir(pid, "cpuacct"), "cpuacct.usage")) as f:
        return int(f.read())


def cpuacct_reads(pid, n):
    out = []
    for _ in range(n):
        out.append(cpuacct_usage(pid))
        time.sleep(0.1)
    return out


def cgroups_of(instance_name):
    """The cgroup directories of an instance, in every controller."""
    return (glob.glob("/sys/fs/cgroup/*/appliance/" + instance_name) +
            glob.glob("/sys/fs/cgroup/appliance/" + instance_name))


# ---- the tests -------------------------------------------------------------------

@test
def the_pool_refills_after_use_and_a_warm_cell_is_fast():
    with Appliance(policy({"pool": 0})) as cold_app:
        cold_app.initialize()
        sc, cold = cold_app.run(1, "print('cold')")
        ok(sc, "cold\n")
        assert cold_app.close() == 0
    with Appliance(policy({"pool": 2})) as app:
        app.initialize()
        before = wait_ready(app, 2)
        assert len(app.bundles()) == 2, app.bundles()
        sc, first = app.run(1, "print('warm')")
        ok(sc, "warm\n")
        # the used sandbox is destroyed, one new one boots: two again
        gone = wait_for(lambda: [k for k in before if k not in runsc_pids_of(app.pid)], 10,
                        "the used sandbox is destroyed")
        assert len(gone) == 1, (before, gone)
        after = wait_ready(app, 2, timeout=20, exclude=gone)
        kept = set(before) & set(after)
        assert len(kept) == 1, (before, after)
        # the used one's bundle goes with its (batched) runsc delete
        wait_for(lambda: len(app.bundles()) == 2, 10, "two bundles, the pooled sandboxes'")
        sc, warm = app.run(2, "print('warm again')")
        ok(sc, "warm again\n")
        assert app.close() == 0
    print("# cold cell %.3f s, warm cells %.3f s and %.3f s" % (cold, first, warm))
    assert warm < cold / 3, (warm, cold)
    assert first < cold / 3, (first, cold)


@test
def a_pooled_sandbox_killed_from_outside_is_replaced():
    with Appliance(policy({"pool": 1})) as app:
        app.initialize()
        [old] = wait_ready(app, 1)
        [old_bundle] = app.bundles()
        old_tree = snapshot([old] + descendants(old))
        assert len(old_tree) >= 3, old_tree  # runsc run, gofer, sandbox, ...
        os.kill(old, signal.SIGKILL)
        [new] = wait_ready(app, 1, timeout=20, exclude=[old])
        assert new != old
        assert "an idle sandbox ended" in app.stderr() and "replacing it" in app.stderr(), \
            app.stderr()
        # the killed one is cleaned up: its processes and its bundle
        wait_for(lambda: not still_alive(old_tree), 10, "the killed sandbox's processes end")
        assert old_bundle not in app.bundles() and len(app.bundles()) == 1, app.bundles()
        sc, t = app.run(1, "print(6 * 7)")
        ok(sc, "42\n")
        assert t < 1.0, "the replacement was not used: %.3f s" % t
        # the same when the gVisor sandbox process dies, not `runsc run`
        [old] = wait_ready(app, 1, exclude=[new])
        old_tree = snapshot([old] + descendants(old))
        [sandbox] = [k for k, argv in old_tree.items() if argv.startswith(b"runsc-sandbox")]
        # an idle pooled sandbox is frozen, and a frozen process cannot die:
        # the kill waits until the sandbox is taken, which sees it pending
        # and gives the run another sandbox
        assert freezer_state(sandbox) == "FROZEN", freezer_state(sandbox)
        os.kill(sandbox, signal.SIGKILL)
        sc, t = app.run(2, "print(7 * 7)")
        ok(sc, "49\n")
        assert app.stderr().count("an idle sandbox ended") == 2, app.stderr()
        assert "it was killed while frozen" in app.stderr(), app.stderr()
        wait_for(lambda: not still_alive(old_tree), 10, "the killed sandbox's processes end")
        wait_ready(app, 1, timeout=20, exclude=[old])
        wait_for(lambda: len(app.bundles()) == 1, 10, "one bundle, the replacement's")
        assert app.close() == 0


@test
def an_idle_pooled_sandbox_is_frozen_and_thawed_when_taken():
    with Appliance(policy({"pool": 1})) as app:
        app.initialize()
        [runsc] = wait_ready(app, 1)
        [sandbox] = [k for k in descendants(runsc)
                     if (cmdline(k) or b"").startswith(b"runsc-sandbox")]
        assert freezer_state(sandbox) == "FROZEN", freezer_state(sandbox)
        # restored or booted, a pooled Sentry opens no host file itself
        # (test_containment: the_sentry_may_not_open_host_files)
        assert b"\0--directfs=false\0" in cmdline(sandbox), cmdline(sandbox)
        # frozen, its processes use no CPU at all: the cgroup's counter stands
        used = cpuacct_usage(sandbox)
        wait_for(lambda: cpuacct_reads(sandbox, 5) == [used] * 5, 10,
                 "five reads of a frozen sandbox's CPU counter, all the same")
        sc, t = app.run(1, "import os\nprint(os.getpid() > 0)")
        ok(sc, "True\n")
        print("# a cell on a thawed sandbox answered in %.1f ms" % (t * 1e3))
        assert app.close() == 0


CELL = """
import builtins, json, os, sys
previous = %r
mine = %r
home = os.path.expanduser("~")
places = ["/tmp/token", os.path.join(home, "token"), "/token"]
found = []
for path in places:
    try:
        with open(path) as f:
            found.append([path, f.read()])
    except OSError:
        pass
for k, v in os.environ.items():
    if any(t in v for t in previous):
        found.append(["env " + k, v])
if hasattr(builtins, "_pool_token"):
    found.append(["builtins", builtins._pool_token])
if "_pool_token_mod" in sys.modules:
    found.append(["sys.modules", sys.modules["_pool_token_mod"]])
wrote = []
for path in places:
    try:
        with open(path, "w") as f:
            f.write(mine)
        wrote.append(path)
    except OSError:
        pass
os.environ["POOL_TOKEN"] = mine
builtins._pool_token = mine
sys.modules["_pool_token_mod"] = mine
print(json.dumps({"found": found, "wrote": wrote, "check": open("/tmp/token").read()}))
"""


@test
def two_cells_never_share_a_sandbox():
    tokens, used = [], []
    with Appliance(policy({"pool": 2})) as app:
        app.initialize()
        for i in range(5):
            ready = wait_ready(app, 2)
            token = secrets.token_hex(16)
            sc, t = app.run(i + 1, CELL % (tokens, token))
            assert sc["error"] is None and not sc["stopped"], sc
            out = json.loads(sc["stdout"])
            # nothing any earlier cell left behind is seen
            assert out["found"] == [], (i, out)
            assert "/tmp/token" in out["wrote"] and out["check"] == token, out
            # the cell ran in one of the pooled sandboxes, which is gone now
            gone = wait_for(lambda: [k for k in ready if k not in runsc_pids_of(app.pid)], 10,
                            "the used sandbox is destroyed")
            assert len(gone) == 1, (ready, gone)
            assert t < 1.0, "cell %d did not take a warm sandbox: %.3f s" % (i, t)
            used.append(gone[0])
            tokens.append(token)
        assert app.close() == 0
    assert len(set(used)) == 5, used


def shut_down_a_full_pool(how):
    with Appliance(policy({"pool": 2})) as app:
        app.initialize()
        sandboxes = wait_ready(app, 2)
        inst = app.instance()
        name = os.path.basename(inst)
        assert len(app.bundles()) == 2
        assert len(os.listdir(os.path.join(inst, "runsc"))) > 0
        assert cgroups_of(name), "no cgroup for %s while the pool is up" % name
        tree = snapshot(descendants(app.pid))
        assert len(tree) >= 6 and all(k in tree for k in sandboxes), tree
        t = time.time()
        if how == "eof":
            app.p.stdin.close()
        else:
            app.p.send_signal(signal.SIGTERM)
        rc = app.p.wait(timeout=20)
        took = time.time() - t
        assert rc == 0, (rc, app.stderr())
        assert took < 8, took
        assert still_alive(tree) == [], still_alive(tree)
        assert os.listdir(app.runtime) == [], os.listdir(app.runtime)
        assert cgroups_of(name) == [], cgroups_of(name)
        print("# shutdown by %s with a full pool: %.2f s" % (how, took))


@test
def shutdown_with_a_full_pool_leaves_nothing_behind_at_end_of_input():
    shut_down_a_full_pool("eof")


@test
def shutdown_with_a_full_pool_leaves_nothing_behind_on_sigterm():
    shut_down_a_full_pool("sigterm")


@test
def a_signal_while_the_pool_boots_at_start_leaves_nothing_behind():
    # SIGTERM the moment the first pooled sandbox is spawned, while the
    # appliance is still starting (it boots the pool before it serves): it must
    # still stop every sandbox and remove its instance, as on any other SIGTERM.
    # Three tries, since the signal may also land once serving began.
    for attempt in range(3):
        with Appliance(policy({"pool": 4})) as app:
            app.send(INIT, INITIALIZED, TOOLS_LIST)
            deadline = time.time() + 20
            while not runsc_pids_of(app.pid) and time.time() < deadline:
                pass
            assert runsc_pids_of(app.pid), app.stderr()
            app.p.send_signal(signal.SIGTERM)
            rc = app.p.wait(timeout=20)
            left = os.listdir(app.runtime)
            cgroups = cgroups_of("i-%d-*" % app.pid)
            bundles = [sorted(os.listdir(os.path.join(app.runtime, d, "bundles")))
                       for d in left]
            if left:
                reclaim(app.runtime)
            what = (attempt, rc, left, bundles, cgroups)
            assert left == [], "instance left behind: %r" % (what,)
            assert cgroups == [], "cgroups left behind: %r" % (what,)
            assert rc == 0, "the appliance died of the signal: %r" % (what,)


def reclaim(runtime):
    """Clean up what a dead appliance left in runtime: the next instance there
    removes it (runsc state, bundles, cgroups) as it starts."""
    r = subprocess.run([APPLIANCE, "cell", "--image", os.path.join(ROOT, "build", "image"),
                        "--digest", digest(), "--runtime-dir", runtime, "-"], input=b"pass",
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and os.listdir(runtime) == [], (r, os.listdir(runtime))


@test
def a_burst_larger_than_the_pool_completes_within_the_deadlines():
    with Appliance(policy({"pool": 1, "cells": 4, "deadline_s": 30})) as app:
        app.initialize()
        wait_ready(app, 1)
        t = time.time()
        app.send(*[call(i, "import time\ntime.sleep(0.3)\nprint('cell %d')" % i)
                   for i in range(1, 7)])
        for i in range(1, 7):
            a = app.answer(i, timeout=40)
            assert a["result"]["isError"] is False, a
            ok(a["result"]["structuredContent"], "cell %d\n" % i)
        took = time.time() - t
        print("# 6 cells at once, pool 1, 4 slots: %.2f s" % took)
        assert took < 30, took
        # afterwards the pool is full again and nothing else runs (the used
        # sandboxes' bundles go when their teardown, runsc delete, is over)
        wait_ready(app, 1, timeout=20)
        wait_for(lambda: len(app.bundles()) == 1, 10, "one bundle, the pooled sandbox's")
        assert app.close() == 0


CHECKPOINTED = "pool: a warm sandbox checkpointed in "
NOT_READY = "the sandbox did not become ready within 5000 ms (limits.boot_s): "
BOOT_FAILED = re.compile(r" pool: a warm sandbox failed to boot \((\d+) in a row\): "
                         r"(.*); next try in (\d+) ms")


@test
def a_sandbox_that_never_says_ready_is_dropped_at_the_boot_timeout():
    layout = os.path.join(work(), "never-ready")
    dig = image_with_runner("import time\ntime.sleep(600)\n", layout)
    # limits.boot_s is the policy's: half the default of 10 s
    sig = policy({"pool": 1, "deadline_s": 30, "boot_s": 5}, image=(layout, dig))
    with Appliance(sig, extra=["--cache", os.path.join(work(), "cache")]) as app:
        app.initialize()
        [first] = wait_for(lambda: runsc_pids_of(app.pid), 20, "the pooled sandbox boots")
        booted = time.time()
        first_tree = snapshot([first] + descendants(first))
        # a run finds no ready sandbox, boots its own, which fails the same way
        t = time.time()
        app.send(call(1, "print(1)"))
        seen = {}  # failure number -> (when it was logged, its match)

        def failures():
            for m in BOOT_FAILED.finditer(app.stderr()):
                seen.setdefault(int(m.group(1)), (time.time(), m))
            return seen
        wait_for(lambda: 1 in failures(), 15, "the first failed boot is logged")
        first_at = seen[1][0] - booted
        assert 4 <= first_at <= 9, first_at
        assert seen[1][1].group(2).startswith(NOT_READY), seen[1][1].group(0)
        wait_for(lambda: not still_alive(first_tree), 10, "the failed sandbox's processes end")
        a = app.answer(1, timeout=20)
        answered = time.time() - t
        res = a["result"]
        assert res["isError"] is True, a
        sc = res["structuredContent"]
        assert sc["stopped"] is True and sc["reason"] == "boot", sc
        assert sc["error"].startswith(NOT_READY), sc
        assert 4 <= answered <= 9, answered
        # the second pooled boot starts after the backoff and fails at its timeout
        wait_for(lambda: 2 in failures(), 20, "the second failed boot is logged")
        gap = seen[2][0] - seen[1][0]
        waits = [int(seen[k][1].group(3)) for k in (1, 2)]
        print("# failed boots logged at %.1f s and %.1f s; backoffs %r ms; the run "
              "answered after %.1f s" % (first_at, first_at + gap, waits, answered))
        assert waits == [500, 1000], waits
        assert 5 <= gap <= 9, gap
        assert app.close() == 0
        assert app.p.returncode == 0


RANDOM_CELL = """
import json, os, random, secrets
print(json.dumps({"random": random.random(), "urandom": os.urandom(16).hex(),
                  "secrets": secrets.token_hex(16), "hash": hash("appliance")}))
"""


@test
def restored_sandboxes_draw_different_random_numbers():
    # every pooled and cold sandbox is a copy of one checkpointed memory
    # image; the runner reseeds on waking, and the kernel's randomness is
    # each sandbox's own
    with Appliance(policy({"pool": 2, "cells": 4})) as app:
        app.initialize()
        wait_ready(app, 2)
        assert CHECKPOINTED in app.stderr(), app.stderr()
        assert all(b"restore" in cmdline(k).split(b"\0") for k in runsc_pids_of(app.pid))
        draws = []
        for i in range(1, 4):  # two pooled, then one cold or refilled
            sc, _ = app.run(i, RANDOM_CELL)
            draws.append(json.loads(sc["stdout"]))
        # and two at once, so that at least one of them is made cold
        app.send(call(10, RANDOM_CELL), call(11, RANDOM_CELL), call(12, RANDOM_CELL))
        for i in (10, 11, 12):
            draws.append(json.loads(app.answer(i)["result"]["structuredContent"]["stdout"]))
        for key in ("random", "urandom", "secrets"):
            values = [d[key] for d in draws]
            assert len(set(values)) == len(values), (key, values)
        # what stays shared, as SECURITY.md says: the interpreter's hash seed
        assert len({d["hash"] for d in draws}) == 1, draws
        assert app.close() == 0


@test
def a_runsc_that_cannot_checkpoint_leaves_the_pool_booting():
    wrapper = os.path.join(work(), "runsc-no-checkpoint")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = checkpoint ]; then\n'
                '    echo "checkpoint refused by the test" >&2; exit 1\n  fi\ndone\n'
                'exec /usr/bin/runsc "$@"\n')
    os.chmod(wrapper, 0o755)
    sig = policy({"pool": 1}, runtime={"runsc": wrapper})
    with Appliance(sig) as app:
        app.initialize()
        wait_for(lambda: "no checkpoint to restore sandboxes from" in app.stderr(), 20,
                 "the failed checkpoint is logged")
        [k] = wait_ready(app, 1)
        assert b"run" in cmdline(k).split(b"\0"), cmdline(k)
        assert CHECKPOINTED not in app.stderr()
        sc, _ = app.run(1, "print(6 * 7)")
        ok(sc, "42\n")
        assert app.close() == 0


FORGE_DONE_AND_SPIN = r"""
import os, stat
for fd in range(3, 64):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b'{"t":"done","error":null,"result":"forged"}\n')
    except OSError:
        pass
while True:
    pass
"""


def runsc_state(app):
    """What runsc keeps in the instance's --root (one entry or more per
    container it still knows)."""
    return sorted(os.listdir(os.path.join(app.instance(), "runsc")))


@test
def after_done_runsc_cleans_up_itself_and_a_forged_done_buys_no_time():
    with Appliance(policy({"pool": 1})) as app:
        app.initialize()
        [k] = wait_ready(app, 1)
        # an honest cell: its runner exits after done and runsc ends on its
        # own (what runsc restore leaves behind, a batched delete removes)
        tree = snapshot([k] + descendants(k))
        [bundle] = app.bundles()
        sc, _ = app.run(1, "print('honest')")
        ok(sc, "honest\n")
        wait_for(lambda: not still_alive(tree), 10, "the honest sandbox's processes end")
        wait_for(lambda: bundle not in app.bundles(), 10, "its bundle is removed")
        assert not [e for e in runsc_state(app) if bundle in e], runsc_state(app)
        # a cell that forges done and spins: the host ends the run at the
        # forged done, and the spinning sandbox is killed soon after (its
        # deadline no longer runs: only the teardown's bound stops it)
        [k] = wait_ready(app, 1, exclude=[k])
        tree = snapshot([k] + descendants(k))
        [bundle] = app.bundles()
        sc, _ = app.run(2, FORGE_DONE_AND_SPIN)
        assert sc["result"] == "forged", sc
        wait_for(lambda: not still_alive(tree), 10, "the spinning sandbox's processes end")
        wait_for(lambda: bundle not in app.bundles(), 10, "its bundle is removed")
        assert not [e for e in runsc_state(app) if bundle in e], runsc_state(app)
        assert app.close() == 0


@test
def dead_restored_sandboxes_are_deleted_together_and_soon():
    """runsc restore, unlike runsc run, leaves its container's state when it
    ends by itself. Dead sandboxes wait for one runsc delete together (at
    most 2 s after the first): fewer deletes than cells, every cell's state
    deleted while the appliance runs on, and the last ones at its exit."""
    log = os.path.join(work(), "runsc-deletes.log")
    wrapper = os.path.join(work(), "runsc-logging-deletes")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = delete ]; then\n'
                '    echo "$*" >> %s; break\n  fi\ndone\nexec /usr/bin/runsc "$@"\n' % log)
    os.chmod(wrapper, 0o755)

    def deletes():
        try:
            with open(log) as f:
                return [line.split() for line in f]
        except FileNotFoundError:
            return []

    def deleted():
        return {w for argv in deletes() for w in argv}

    with Appliance(policy({"pool": 1}, runtime={"runsc": wrapper})) as app:
        app.initialize()
        wait_ready(app, 1)
        seen = set(re.findall(r"sandbox (cell-[0-9]+-[0-9a-f]+)", app.stderr()))
        for i in range(6):
            sc, _ = app.run(i + 1, "print(%d)" % i)
            ok(sc, "%d\n" % i)
        ids = set(re.findall(r"sandbox (cell-[0-9]+-[0-9a-f]+)", app.stderr())) - seen
        assert len(ids) == 6, (ids, app.stderr())
        wait_for(lambda: ids <= deleted(), 15, "each cell's sandbox is deleted")
        batches = [argv for argv in deletes() if ids & set(argv)]
        assert len(batches) < len(ids) and max(len(ids & set(b)) for b in batches) >= 2, batches
        wait_for(lambda: not [e for e in runsc_state(app) for i in ids if i in e], 10,
                 "their runsc state is gone")
        wait_for(lambda: not ids & set(app.bundles()), 10, "their bundles are removed")
        for i in ids:
            assert not glob.glob("/sys/fs/cgroup/*/appliance/*/%s" % i), i
        sc, _ = app.run(7, "print(7)")
        ok(sc, "7\n")
        [last] = set(re.findall(r"sandbox (cell-[0-9]+-[0-9a-f]+)", app.stderr())) - seen - ids
        inst = os.path.basename(app.instance())
        assert app.close() == 0
    # the last one, still waiting for its batch, was deleted before the exit
    assert last in deleted(), (last, deletes())
    assert not glob.glob("/sys/fs/cgroup/*/appliance/%s" % inst), inst


@test
def pool_zero_never_boots_ahead():
    # restoring, the appliance boots one template at start, saves it, and
    # ends it: nothing waits for a cell
    with Appliance(policy({"pool": 0})) as app:
        app.initialize()
        wait_for(lambda: CHECKPOINTED in app.stderr(), 20, "the template is saved")
        wait_for(lambda: runsc_pids_of(app.pid) == [] and app.bundles() == [], 10,
                 "the template's sandbox is gone")
        sc, _ = app.run(1, "print('cold')")
        ok(sc, "cold\n")
        wait_for(lambda: runsc_pids_of(app.pid) == [] and app.bundles() == [], 10,
                 "the run's sandbox is gone")
        time.sleep(2)
        assert runsc_pids_of(app.pid) == [] and app.bundles() == []
        assert app.close() == 0
    # not restoring, nothing boots before a run at all
    with Appliance(policy({"pool": 0}, runtime={"restore": False})) as app:
        app.initialize()
        time.sleep(3)
        assert CHECKPOINTED not in app.stderr(), app.stderr()
        assert runsc_pids_of(app.pid) == []
        assert app.bundles() == []
        sc, _ = app.run(1, "print('cold')")
        ok(sc, "cold\n")
        time.sleep(2)
        # nothing is booted after a run either
        assert runsc_pids_of(app.pid) == []
        assert app.bundles() == []
        assert app.close() == 0


@test
def a_rootless_appliance_pools_sandboxes_and_calls_tools():
    """The weaker mode end to end: an ordinary user runs `appliance run` with a
    pool and an upstream server; warm cells call tools; nothing is left."""
    app, layout = rootless_files()
    toy = os.path.join(os.path.dirname(app), "toy-server")
    if not os.path.exists(toy):
        subprocess.run(["install", "-m", "0755", os.path.join(ROOT, "build", "toy-server"), toy],
                       check=True)
    user = ensure_user()
    home = tempfile.mkdtemp(prefix="appliance-rootless-run.")
    os.chown(home, user.pw_uid, user.pw_gid)
    sig = _kit.policy({"pool": 1, "deadline_s": 30}, image=(layout, digest()),
                      runtime={"rootless": True}, servers={"toy": {"command": [toy]}},
                      tools={"toy.*": {"access": "read"}},
                      roles={"r": {"tools": ["toy.*"], "write": False}},
                      clients={"default_role": "r"})
    # an ordinary user's floor is that user's own, which it may name
    argv = [app] + _kit.argv(sig)[1:] + ["--state-dir", os.path.join(home, "state")]
    runtime = os.path.join(home, "rt")
    # without XDG_RUNTIME_DIR an ordinary user names where its admin socket goes
    admin = os.path.join(home, "admin")
    p = subprocess.Popen(argv + ["--runtime-dir", runtime, "--cache", os.path.join(home, "cache"),
                                 "--admin-dir", admin],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd="/", env={"PATH": "/usr/bin:/bin",
                                                               "HOME": user.pw_dir},
                         user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    try:
        def send(m):
            p.stdin.write(json.dumps(m).encode() + b"\n")
            p.stdin.flush()
        send(INIT)
        send(INITIALIZED)
        send(TOOLS_LIST)
        assert json.loads(p.stdout.readline())["id"] == 0
        assert json.loads(p.stdout.readline())["id"] == "tools"
        deadline = time.time() + 30
        while len(runsc_pids_of(p.pid)) < 1 and time.time() < deadline:
            time.sleep(0.2)
        assert runsc_pids_of(p.pid), "no pooled sandbox"
        for pid in runsc_pids_of(p.pid):
            with open("/proc/%d/status" % pid) as f:
                uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
            assert int(uid) == user.pw_uid, "runsc runs as uid %s" % uid
        time.sleep(2)  # the pooled runner's warm-up
        for i in (1, 2):
            send(call(i, "import asyncio\n"
                         "print(await asyncio.gather(toy.add(a=%d, b=1), toy.echo(text='e')))\n"
                         "try:\n    await toy.write_note(text='n')\n"
                         "except ToolError as e:\n    print('no write_note', e.kind)" % i))
            a = json.loads(p.stdout.readline())
            sc = a["result"]["structuredContent"]
            assert a["id"] == i and sc["error"] is None, a
            assert sc["stdout"] == "[{'sum': %d}, 'e']\nno write_note refused\n" % (i + 1), sc
            time.sleep(2)  # the pool refills
        below = descendants(p.pid)
        assert len(below) >= 3, below  # the toy server, a pooled runsc and its children
        # its admin socket serves its own user
        st = subprocess.run([app, "status", "--json", "--admin-dir", admin], capture_output=True,
                            text=True, timeout=60, cwd="/", env={"PATH": "/usr/bin:/bin"},
                            user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        assert st.returncode == 0, st
        [mine] = json.loads(st.stdout)
        assert mine["pid"] == p.pid and mine["servers"][0]["state"] == "ready", mine
        p.stdin.close()
        assert p.wait(timeout=20) == 0, p.stderr.read().decode()
        log = p.stderr.read().decode()
        # rootless says what it cannot do for the servers
        assert "rootless: upstream servers run as this user" in log, log
        assert "confined: runs as the appliance's own user (rootless)" in log, log
        deadline = time.time() + 5  # a zombie of init's may take a moment
        while [k for k in below if os.path.exists("/proc/%d" % k)] and time.time() < deadline:
            time.sleep(0.1)
        alive = [k for k in below if os.path.exists("/proc/%d" % k)]
        assert alive == [], "left behind: %s" % alive
        assert os.listdir(runtime) == [], os.listdir(runtime)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        shutil.rmtree(home, True)


if __name__ == "__main__":
    try:
        main()
    finally:
        _kit.cleanup()
