"""harness.py: `make bench` (scripts/bench runs it as root).

Every row is measured in the same run by this one harness, at the client
side with time.perf_counter:

  1  warm cell: print(1) as run_python over MCP stdio to `appliance run`,
     policy limits.pool = 2, cells spaced so the pool refills
  2  the same with limits.pool = 0 (every cell boots cold)
  3  baseline: one bare `runsc run` of a fresh OCI bundle of the same image
     per cell (the same runner doing print(1)), no appliance
  4  baseline: one `docker run --rm --runtime=runsc --network=none` of the
     same image per cell, on a private dockerd this harness starts and stops
  5  floor: a persistent unsandboxed host Python worker serving cell after
     cell over one pipe with the runner's own code (bench/floor_worker.py);
     5s the same with cells spaced like rows 1 and 2
  6  tool-call overhead: 1000 sequential `await toy.echo(text="x")` in one
     cell, timed inside the cell, against the same calls sent to
     build/toy-server directly by bench/direct_client.py
  7  parallel calls: one cell gathering 100 toy.sleep(ms=50) calls
  8  sustained load: 200 cells, 4 in flight on one MCP connection to one
     appliance with limits.cells = 4
  9  memory: the appliance's idle RSS (pool 0 and pool 2) and the host
     memory per warm pooled sandbox
 10  fairness: the per-call time of 1000 sequential toy.echo calls in one
     cell beside an idle cell, and (10f) beside a cell that floods its
     protocol descriptor with empty `out` lines (its line budget raised to
     the ceiling so that it floods throughout); the ratio is the target
 11  row 1 over Streamable HTTP, run right after it: the same pool, spacing
     and cells, each a 2026-07-28 stateless tools/call POSTed with a bearer
     token on one keep-alive connection, timed from sending the POST to
     reading the answer's SSE event
 12  row 6 over an HTTP upstream: 1000 sequential `await web.echo(text="x")`
     in one cell, `web` being tests/integration/mcphttp.py (a legacy-revision
     Streamable HTTP server in pure Python, Nagle off: see WEB_SERVER) named
     by its URL in the policy, against the same calls POSTed to the same
     server on one keep-alive connection by bench/http_direct.py
 13  arrival-rate sweep: row 1's cells (pool 2, print(1) as run_python over
     MCP stdio) sent open loop on one connection at a steady 0.5, 1 and 2
     cells/s (BENCH_SWEEP_RATES, BENCH_SWEEP_N cells each: each sent on
     schedule whether or not the one before has answered, so requests
     overlap), then a burst of BENCH_BURST sent at once; limits.cells =
     the burst, so none waits for admission. p50, p95, and each p95 over
     row 1's p95 (row 1: cells 1.5 s apart, one at a time: "idle")
 14  sustained maximum: the highest steady open-loop rate whose p95 stays
     within a bound (BENCH_P95_BOUND_MS; default max(2 x row 1's p95,
     50 ms)), found by doubling or halving from 1 cell/s, then bisecting
     (geometric midpoints), BENCH_PROBE_N cells per probe, within a time
     budget (BENCH_SEARCH_S); beside row 8's cells/s (closed loop, 4 in
     flight, latency unbounded)
 15  CPU-seconds (user+sys) per cell. Each appliance of this row runs under
     a small reaper (CPU_WRAPPER: a child subreaper that reaps every
     descendant to the last), whose RUSAGE_CHILDREN once the appliance has
     exited is the exact CPU time of the appliance and of every process
     below it (runsc run, gofer, sandbox, systrap stubs, runsc delete),
     however they were reaped. Total per cell: a pool-2 appliance serving
     BENCH_CPU_N print(1) cells spacing_s apart, minus one of the same pool
     living as long with no cell, / cells (the cell, its sandbox's
     teardown, the replacement's boot, the MCP path). Boot only: the
     sandboxes' CPU from the instance's cpuacct cgroup (runsc makes
     /appliance/i-PID-...; usage in ns, sampled every 0.1 s) at the moment
     its rate falls to the idle rate, plus the processes outside it (the
     appliance, runsc run; /proc, clock ticks), pool 2 minus pool 0, / 2,
     over BENCH_CPU_BOOTS pairs of short zero-cell runs; their teardown at
     exit from the same runs (rusage minus the last look). Also: an idle
     pooled sandbox's CPU per second, and each cell's refill (its answer
     until the cgroups are idle again: wall and CPU)
 16  answers from a stdio server: dropped (over the result cap) and kept,
     in MB/s against cat of the same bytes through a pipe; a cell's small
     calls alone and beside a cell gathering huge answers
 17  a process that only answers server/discover: the CPU (CPU_WRAPPER:
     the appliance and all below it) of `appliance run` over stdio whose
     input is a file holding one server/discover, against the same with a
     tools/list after it (which starts the servers and the pool), and
     whether any server or sandbox started for the first
 20  replicas behind HAProxy (bench/cluster.py, tests/cluster/): cells/s of
     BENCH_CLUSTER_CLIENTS closed-loop v2 SDK clients (print() cells) through
     HAProxy in front of 1, 2 and 3 replicas of one policy, against the same
     load straight to one replica before and after (the baseline, their
     mean); and what the balancer adds to one request: server/discover
     POSTs straight and through HAProxy in turn, the difference of the
     medians. On one host the replicas share its cores: on 2 cores the row
     shows the balancer's and the extra processes' overhead, not scale

Rows 1 to 8, 11 to 15 run on the system's runsc with the systrap platform (the
appliance's default). With BENCH_BASELINES=1 (the default) rows 1, 2 and 6
run again as 1p, 2p, 6p (the same runsc on ptrace) and 1o, 2o, 6o (Debian
12's own runsc, 20221219.0, on ptrace, under an appliance built to accept
it; scripts/bench fetches and builds both into build/bench-old/).

A row that cannot run shows its error and the others go on. Parameters are
environment variables (scripts/bench lists them). The figures go to stdout
as a table, and to build/bench.json (BENCH_JSON).
"""

import fcntl
import glob
import hashlib
import http.client
import io
import json
import os
import platform
import queue
import re
import secrets
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
# BENCH_APPLIANCE: another build to measure with the same harness (say, an
# earlier commit's, for a before-and-after figure).
APPLIANCE = os.environ.get("BENCH_APPLIANCE") or os.path.join(ROOT, "build", "appliance")
LAYOUT = os.path.join(ROOT, "build", "image")
TOY = os.path.join(ROOT, "build", "toy-server")
RUNNER = os.path.join(ROOT, "images", "cell", "runner.py")
FLOOR_WORKER = os.path.join(ROOT, "bench", "floor_worker.py")
DIRECT_CLIENT = os.path.join(ROOT, "bench", "direct_client.py")
HTTP_DIRECT = os.path.join(ROOT, "bench", "http_direct.py")
MCPHTTP = os.path.join(ROOT, "tests", "integration", "mcphttp.py")
HOST_PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
RUNSC = "/usr/bin/runsc"
PLATFORM = "systrap"
# Baselines for rows 1, 2 and 6 (BENCH_BASELINES=1): the same runsc on
# ptrace, and Debian 12's own runsc (gVisor 20221219.0) on ptrace, run by an
# appliance built to accept it (scripts/bench makes both: build/bench-old/).
OLD_DIR = os.path.join(ROOT, "build", "bench-old")
OLD_RUNSC = os.path.join(OLD_DIR, "runsc", "usr", "bin", "runsc")
OLD_APPLIANCE = os.path.join(OLD_DIR, "appliance")
MAIN = {"key": "", "name": "runsc %s, systrap", "appliance": APPLIANCE, "runsc": RUNSC,
        "platform": PLATFORM}
BASELINES = [
    {"key": "p", "name": "runsc %s, ptrace", "appliance": APPLIANCE, "runsc": RUNSC,
     "platform": "ptrace"},
    {"key": "o", "name": "runsc %s, ptrace", "appliance": OLD_APPLIANCE, "runsc": OLD_RUNSC,
     "platform": "ptrace"},
]
# Rows 8b and 15b (BENCH_BOOTED=1): rows 8 and 15 with runtime.restore
# false, every sandbox booted as before restoring existed (idle pooled ones
# are still frozen), beside the restoring rows in the same run.
BOOTED = {"runtime": {"runsc": RUNSC, "platform": PLATFORM, "restore": False}}
# Rows 8c and 15c (BENCH_BEFORE, a commit; 0: skip): rows 8 and 15 by the
# code as it was before the warm-path work, with its own image, which
# scripts/bench builds from this clone's history into build/bench-before/.
BEFORE_DIR = os.path.join(ROOT, "build", "bench-before")
BEFORE_SRC = os.path.join(BEFORE_DIR, "src")
BEFORE = {"key": "c", "name": "the code before (%s)", "appliance":
          os.path.join(BEFORE_SRC, "build", "appliance"), "runsc": RUNSC, "platform": PLATFORM,
          "layout": os.path.join(BEFORE_SRC, "build", "image"),
          "digest_file": os.path.join(BEFORE_SRC, "build", "image.digest")}
PROTOCOL = "2025-11-25"
MIB = 1024 * 1024


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else default


P = {
    "n": env_int("BENCH_N", 20),                     # cells for rows 1-4 and 11
    "floor_n": env_int("BENCH_FLOOR_N", 200),        # cells for row 5
    "warmup": env_int("BENCH_WARMUP", 1),            # uncounted cells before rows 1-5, 11
    "spacing_s": env_float("BENCH_SPACING", 1.5),    # between cells of rows 1, 2, 11
    "settle_s": env_float("BENCH_SETTLE", 3.0),      # after initialize, before the first cell
    "calls": env_int("BENCH_CALLS", 1000),           # row 6
    "call_runs": env_int("BENCH_CALL_RUNS", 3),      # row 6 cells (and direct runs)
    "gather": env_int("BENCH_GATHER", 100),          # row 7
    "gather_ms": env_int("BENCH_GATHER_MS", 50),
    "gather_runs": env_int("BENCH_GATHER_RUNS", 3),
    "load_n": env_int("BENCH_LOAD_N", 200),          # row 8
    "load_clients": env_int("BENCH_LOAD_CLIENTS", 4),
    # the policy default: 100 calls go 16 at a time
    "gather_concurrency": env_int("BENCH_GATHER_CONCURRENCY", 16),
    "load_pool": env_int("BENCH_LOAD_POOL", 2),
    "docker": env_int("BENCH_DOCKER", 1),
    "rows": os.environ.get("BENCH_ROWS",
                           "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20"),
    "sweep_n": env_int("BENCH_SWEEP_N", 30),          # row 13: cells per rate
    "sweep_rates": [float(x) for x in os.environ.get("BENCH_SWEEP_RATES", "0.5,1,2")
                    .replace(" ", "").split(",") if x],
    "burst": env_int("BENCH_BURST", 20),              # row 13: cells sent at once
    "p95_bound_ms": env_float("BENCH_P95_BOUND_MS", 0.0),  # row 14; 0: max(2x row 1, 50)
    "probe_n": env_int("BENCH_PROBE_N", 20),          # row 14: cells per probe
    "search_s": env_float("BENCH_SEARCH_S", 240.0),   # row 14: time budget of the search
    "cpu_n": env_int("BENCH_CPU_N", 30),              # row 15: cells of the batch
    "cpu_boots": env_int("BENCH_CPU_BOOTS", 3),
    "booted": env_int("BENCH_BOOTED", 1),            # rows 8b, 15b: restore off
    "before": os.environ.get("BENCH_BEFORE", "7fc0a11"),  # rows 8c, 15c: that commit's code
    "fair_calls": env_int("BENCH_FAIR_CALLS", 1000),  # row 10
    "fair_runs": env_int("BENCH_FAIR_RUNS", 3),
    "audit": os.environ.get("BENCH_AUDIT", ""),      # "", "read" or "write": see toy_policy
    "baselines": env_int("BENCH_BASELINES", 1),     # rows 1, 2, 6 on ptrace, old and new runsc
    "cluster_s": env_float("BENCH_CLUSTER_S", 12.0),        # row 20: seconds a stage
    "cluster_clients": env_int("BENCH_CLUSTER_CLIENTS", 6),  # row 20: clients in flight
    "cluster_probes": env_int("BENCH_CLUSTER_PROBES", 500),  # row 20: requests each way
    "json": os.environ.get("BENCH_JSON", os.path.join(ROOT, "build", "bench.json")),
}
ROWS = {int(x) for x in P["rows"].replace(" ", "").split(",") if x}


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


class RowError(Exception):
    """A row could not be measured; its text is shown in the row."""


def stats(xs):
    """Median and p95 (nearest rank) of a list of seconds, in ms."""
    if not xs:
        return None
    s = sorted(xs)
    p95 = s[max(0, min(len(s) - 1, -(-95 * len(s) // 100) - 1))]
    return {"n": len(s), "median_ms": statistics.median(s) * 1e3, "p95_ms": p95 * 1e3,
            "min_ms": s[0] * 1e3, "max_ms": s[-1] * 1e3}


def read_digest(path=os.path.join(ROOT, "build", "image.digest")):
    with open(path) as f:
        return f.read().strip()


# ---- processes, memory -------------------------------------------------------------

def proc_kb(pid, key, name="status"):
    try:
        with open("/proc/%d/%s" % (pid, name)) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def meminfo_kb(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def all_ppids():
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rfind(")") + 2:].split()
        out[int(d)] = int(rest[1])
    return out


def descendants(pid):
    ppids = all_ppids()
    kids = {}
    for p, pp in ppids.items():
        kids.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return "?"


def tree_memory(pid):
    """The appliance's own VmRSS, and the sum of RSS and PSS of every process
    below it (runsc, gofer, sandbox and its ptrace stubs), in kB."""
    kids = descendants(pid)
    rss = sum(proc_kb(k, "VmRSS") or 0 for k in kids)
    pss = sum(proc_kb(k, "Pss", "smaps_rollup") or 0 for k in kids)
    names = {}
    for k in kids:
        names[comm(k)] = names.get(comm(k), 0) + 1
    return {"appliance_rss_kb": proc_kb(pid, "VmRSS"), "children": len(kids),
            "children_rss_kb": rss, "children_pss_kb": pss, "children_by_name": names,
            "mem_available_kb": meminfo_kb("MemAvailable")}


# ---- line-based peers: appliance run (MCP) and the floor worker ----------------------

class LineConn:
    """A child on pipes speaking one JSON object per line. A reader thread
    parses every line the child writes; messages whose `id` someone waits
    for go to that waiter, the rest to one queue. Both rows that compare
    (1 and 5) go through this same class."""

    def __init__(self, argv, stderr_path, env=None):
        self.stderr_path = stderr_path
        self.errf = open(stderr_path, "wb")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.errf, env=env)
        self.q = queue.Queue()
        self.waiters = {}
        self.wlock = threading.Lock()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        rd = self.p.stdout
        while True:
            line = rd.readline()
            if not line:
                break
            now = time.perf_counter()
            try:
                msg = json.loads(line)
            except ValueError:
                msg = {"_bad_line": line[:200].decode("utf-8", "replace")}
            rid = msg.get("id") if isinstance(msg, dict) else None
            w = self.waiters.pop(rid, None) if isinstance(rid, (int, str)) else None
            (w or self.q).put((now, msg))
        self.q.put((time.perf_counter(), None))
        for w in list(self.waiters.values()):
            w.put((time.perf_counter(), None))

    def send(self, obj):
        data = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        with self.wlock:
            t = time.perf_counter()
            self.p.stdin.write(data)
            self.p.stdin.flush()
        return t

    def get(self, timeout):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise RowError("no answer within %.0f s" % timeout) from None

    def stderr_tail(self, n=3):
        try:
            self.errf.flush()
            with open(self.stderr_path, "rb") as f:
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
            return " | ".join(lines[-n:])
        except OSError:
            return ""

    def close(self, timeout=30):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.t.join(timeout=5)
        self.errf.close()
        return self.p.returncode


class Work:
    """A private directory: a throwaway signing key in a root-owned trust
    directory, policies with rising serials for a deployment of this run
    alone (its floor in the appliance's one rollback floor)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="appliance-bench.")
        os.chmod(self.dir, 0o755)
        self.trust = os.path.join(self.dir, "trusted.d")
        os.mkdir(self.trust, 0o755)
        self.key = os.path.join(self.dir, "k.key")
        subprocess.run([APPLIANCE, "keygen", "--public", os.path.join(self.trust, "k.pub"),
                        "--secret", self.key], check=True, capture_output=True)
        self.serial = 0
        self.deployment = "bench-" + secrets.token_hex(8)
        self.digest = read_digest()
        self.cfg_of = {}  # signature path -> the configuration it runs on

    def policy(self, limits, extra=None, cfg=MAIN):
        self.serial += 1
        path = os.path.join(self.dir, "p%d.json" % self.serial)
        doc = {"policy_version": 1, "serial": self.serial, "expires": "2099-01-01T00:00:00Z",
               "deployment": self.deployment,
               "image": {"layout": cfg.get("layout", LAYOUT),
                         "digest": read_digest(cfg["digest_file"]) if "digest_file" in cfg
                         else self.digest},
               "runtime": {"runsc": cfg["runsc"], "platform": cfg["platform"]},
               "limits": limits}
        doc.update(extra or {})
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        r = subprocess.run([cfg["appliance"], "sign", "--secret", self.key, path],
                           capture_output=True)
        if r.returncode != 0:
            raise RowError("sign: %s" % r.stderr.decode().strip())
        self.cfg_of[path + ".sig"] = cfg
        return path + ".sig"

    def run_argv(self, sig):
        return [self.cfg_of[sig]["appliance"], "run", "--policy", sig, "--trust-dir", self.trust]

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class Mcp:
    """An MCP stdio client of one `appliance run`."""

    def __init__(self, work, sig, name, wrap=None):
        # wrap: a path; the appliance runs under CPU_WRAPPER (row 15), which
        # writes the CPU time of it and of all below it there once all exit
        argv = work.run_argv(sig)
        if wrap:
            argv = [HOST_PY, "-I", "-S", "-c", CPU_WRAPPER, wrap] + argv
        self.conn = LineConn(argv, os.path.join(work.dir, name + ".stderr"),
                             env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"})
        self.next_id = 0
        self.idlock = threading.Lock()
        try:
            r = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                            "clientInfo": {"name": "bench", "version": "1"}},
                             timeout=60)
        except RowError as e:
            self.close()
            raise RowError("appliance run did not initialize (%s): %s"
                           % (e, self.conn.stderr_tail())) from None
        if "result" not in r[0]:
            raise RowError("initialize: %s" % json.dumps(r[0].get("error")))
        self.conn.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    @property
    def pid(self):
        return self.conn.p.pid

    def request(self, method, params, timeout=120):
        """Send one request, wait for its answer: (msg, seconds)."""
        with self.idlock:
            self.next_id += 1
            rid = self.next_id
        w = queue.Queue()
        self.conn.waiters[rid] = w
        t0 = self.conn.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            t1, msg = w.get(timeout=timeout)
        except queue.Empty:
            self.conn.waiters.pop(rid, None)
            raise RowError("%s: no answer within %.0f s" % (method, timeout)) from None
        if msg is None:
            raise RowError("appliance run exited (status %s): %s"
                           % (self.conn.p.poll(), self.conn.stderr_tail()))
        return msg, t1 - t0

    def send_cell(self, code, q):
        """Send one run_python call without waiting: its answer goes to the
        queue q as (time read, msg). Returns (id, time sent)."""
        with self.idlock:
            self.next_id += 1
            rid = self.next_id
        self.conn.waiters[rid] = q
        t0 = self.conn.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                             "params": {"name": "run_python", "arguments": {"code": code}}})
        return rid, t0

    def cell(self, code, timeout=120, **more):
        """run_python: (structuredContent, seconds); RowError unless it ran.
        more: further arguments (a session's)."""
        msg, dt = self.request("tools/call", {"name": "run_python",
                                              "arguments": dict({"code": code}, **more)},
                               timeout)
        return ran(msg), dt

    def close(self):
        return self.conn.close()


def ran(msg):
    """A run_python answer's structuredContent; RowError unless it ran."""
    if "error" in msg:
        raise RowError("tools/call: %s" % json.dumps(msg["error"]))
    res = msg["result"]
    sc = res.get("structuredContent") or {}
    if res.get("isError"):
        why = sc.get("error") or sc.get("reason") or json.dumps(res)[:300]
        raise RowError("cell failed: %s" % why.strip().splitlines()[-1][:300])
    return sc


def check_print1(sc):
    if sc.get("stdout") != "1\n":
        raise RowError("print(1) gave %r" % (sc,))


# ---- rows 1, 2, 9 and 11: warm and cold cells, idle memory, HTTP ------------------------

def spaced_cells(m, n, code="print(1)"):
    """The warm-up, then n cells of code (which must print 1 and nothing
    else), spacing_s apart: their times."""
    for _ in range(P["warmup"]):
        check_print1(m.cell(code)[0])
        time.sleep(P["spacing_s"])
    times = []
    for i in range(n):
        sc, dt = m.cell(code)
        check_print1(sc)
        times.append(dt)
        if i + 1 < n:
            time.sleep(P["spacing_s"])
    return times


def row_cells(work, pool, n, cfg=MAIN):
    """n spaced print(1) cells through one appliance with limits.pool; the
    appliance's memory idle before the first cell and after the last."""
    sig = work.policy({"pool": pool, "deadline_s": 60}, cfg=cfg)
    m = Mcp(work, sig, "pool%d%s" % (pool, cfg["key"]))
    try:
        # Over stdio the image, runtime and pool start with the first
        # tools request (docs/decisions.md); row 9's idle figures need them.
        m.request("tools/list", {}, 120)
        time.sleep(P["settle_s"])  # the pool (if any) boots
        mem_idle = tree_memory(m.pid)
        times = spaced_cells(m, n)
        time.sleep(P["settle_s"])
        mem_after = tree_memory(m.pid)
    finally:
        rc = m.close()
    return {"times": times, "mem_idle": mem_idle, "mem_after": mem_after, "exit": rc}


HTTP_REVISION = "2026-07-28"


class HttpMcp:
    """A Streamable HTTP client of one `appliance run` whose policy has an
    `http` section on a free loopback port and one token: stateless
    2026-07-28 tools/call POSTs on one keep-alive connection, as a real
    client sends them, each answered on an SSE stream."""

    def __init__(self, work, limits, name):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.token = "appliance_bench-" + secrets.token_hex(16)
        sig = work.policy(limits, {
            "roles": {"bench": {"tools": []}},
            "clients": {"tokens": [{"name": "bench", "role": "bench",
                                    "sha256": hashlib.sha256(self.token.encode()).hexdigest()}]},
            "http": {"listen": ["127.0.0.1:%d" % self.port]}})
        self.stderr_path = os.path.join(work.dir, name + ".stderr")
        self.errf = open(self.stderr_path, "wb")
        self.p = subprocess.Popen(work.run_argv(sig), stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=self.errf,
                                  env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                       "LC_ALL": "C.UTF-8"})
        self.next_id = 0
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        ready = "serving MCP over HTTP at 127.0.0.1:%d/mcp" % self.port
        deadline = time.time() + 60
        while ready not in self.stderr_tail(1000):
            if self.p.poll() is not None or time.time() > deadline:
                tail = self.stderr_tail()
                self.close()
                raise RowError("appliance run did not serve HTTP: %s" % tail)
            time.sleep(0.05)

    def stderr_tail(self, n=3):
        self.errf.flush()
        with open(self.stderr_path, "rb") as f:
            return " | ".join(f.read().decode("utf-8", "replace").strip().splitlines()[-n:])

    def cell(self, code):
        """run_python: (structuredContent, seconds from sending the POST to
        reading the answer's event); RowError unless it ran."""
        self.next_id += 1
        rid = self.next_id
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": code},
            "_meta": {"io.modelcontextprotocol/protocolVersion": HTTP_REVISION,
                      "io.modelcontextprotocol/clientCapabilities": {}}}},
                          separators=(",", ":"))
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream",
                   "Authorization": "Bearer " + self.token, "Mcp-Method": "tools/call",
                   "Mcp-Name": "run_python", "MCP-Protocol-Version": HTTP_REVISION}
        msg = None
        try:
            t0 = time.perf_counter()
            self.conn.request("POST", "/mcp", body, headers)
            r = self.conn.getresponse()
            if r.status != 200:
                raise RowError("POST /mcp: %d %s" % (r.status, r.read()[:300].decode("utf-8",
                                                                                     "replace")))
            while msg is None:
                line = r.readline()
                if not line:
                    raise RowError("the answer (%s) ended without the call's event"
                                   % r.getheader("Content-Type"))
                if line.startswith(b"data: "):
                    m = json.loads(line[len(b"data: "):])
                    if m.get("id") == rid and ("result" in m or "error" in m):
                        msg = m
            t1 = time.perf_counter()
            r.read()  # the end of the stream: the connection serves the next cell
        except (OSError, http.client.HTTPException) as e:
            raise RowError("POST /mcp: %s: %s (%s)" % (type(e).__name__, e,
                                                       self.stderr_tail())) from None
        return ran(msg), t1 - t0

    def close(self):
        self.conn.close()
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.errf.close()
        return self.p.returncode


def row_http(work, n):
    """Row 1's cells (pool 2, the same spacing and count) over Streamable HTTP."""
    m = HttpMcp(work, {"pool": 2, "deadline_s": 60}, "http")
    try:
        time.sleep(P["settle_s"])  # the pool boots
        times = spaced_cells(m, n)
    finally:
        rc = m.close()
    return {"times": times, "exit": rc}


# ---- row 18: the cells of a session ---------------------------------------------------------

def session_memory_mib(pid, log_path):
    """What the newest sandbox of appliance pid holds (anonymous and shared
    pages of its memory cgroup, as the appliance measures a session), MiB."""
    with open(log_path, encoding="utf-8", errors="replace") as f:
        found = re.findall(r"run=[0-9a-f]+: sandbox (cell-[0-9a-z-]+)", f.read())
    if not found:
        return None
    v1 = glob.glob("/sys/fs/cgroup/memory/appliance/i-%d-*/%s/memory.stat" % (pid, found[-1]))
    v2 = glob.glob("/sys/fs/cgroup/**/i-%d-*/%s/memory.stat" % (pid, found[-1]), recursive=True)
    for path, keys in ((v1, ("total_rss", "total_shmem")), (v2, ("anon", "shmem"))):
        if path:
            with open(path[0]) as f:
                kv = dict(line.split() for line in f if line.strip())
            return sum(int(kv.get(k, 0)) for k in keys) / MIB
    return None


def row_session(work, n):
    """A session made by one cell, then n spaced print(x) cells in it: each
    thaws the session's frozen sandbox, runs in the kept interpreter and
    freezes it again. Beside them, what the frozen session holds."""
    sig = work.policy({"pool": 2, "deadline_s": 60},
                      {"roles": {"s": {"tools": [], "sessions": {"max_cells": 100000}}},
                       "clients": {"default_role": "s"}})
    m = Mcp(work, sig, "session")
    try:
        time.sleep(P["settle_s"])  # the pool boots
        sc, _ = m.cell("x = 1", session="new")
        handle = sc.get("session")
        if not handle:
            raise RowError("no session handle in %r" % (sc,))
        time.sleep(P["spacing_s"])
        frozen_mib = session_memory_mib(m.pid, m.conn.stderr_path)
        times = []
        for i in range(P["warmup"] + n):
            sc, dt = m.cell("print(x)", session=handle)
            if sc.get("stdout") != "1\n" or sc.get("session_ended"):
                raise RowError("a session cell gave %r" % (sc,))
            if i >= P["warmup"]:
                times.append(dt)
            time.sleep(P["spacing_s"])
    finally:
        rc = m.close()
    return {"times": times, "frozen_mib": frozen_mib, "exit": rc}


# ---- row 19: the data image ----------------------------------------------------------------

DATA_LAYOUT = os.path.join(ROOT, "build", "image-data")
DATA = dict(MAIN, key="d", layout=DATA_LAYOUT, digest_file=DATA_LAYOUT + ".digest")
PRELOAD = ["numpy", "pandas", "matplotlib.pyplot"]
# The same program in the sandbox and on the host: a frame of a million rows
# made once, then its groupby-sum timed inside, five times, the mean printed
# in ms (the cell's and the MCP round trip's costs left out of the ratio).
GROUPBY = r"""
import time, numpy, pandas
rng = numpy.random.default_rng(7)
df = pandas.DataFrame({"k": rng.integers(0, 1000, 1_000_000), "v": rng.random(1_000_000)})
df.groupby("k")["v"].sum()
t = time.perf_counter()
for _ in range(5):
    s = df.groupby("k")["v"].sum()
print(round((time.perf_counter() - t) / 5 * 1000, 3))
"""


# The runner's malloc settings (images/cell/runner.py, _malloc_setup), for
# a host baseline that allocates as the cell does.
MALLOC = """
import ctypes
_libc = ctypes.CDLL(None)
_libc.mallopt(-8, 1)
_libc.mallopt(-3, 32 << 20)
_libc.mallopt(-1, 128 << 20)
"""


def warm_sandbox_kb(work, cfg, preload=None):
    """PSS of the sandboxes of an appliance with pool 2, idle, per sandbox."""
    extra = {}
    if preload:
        extra["image"] = {"layout": cfg["layout"], "digest": read_digest(cfg["digest_file"]),
                          "preload": preload}
    m = Mcp(work, work.policy({"pool": 2, "deadline_s": 60}, extra, cfg=cfg),
            "mem%s%d" % (cfg["key"], bool(preload)))
    try:
        m.request("tools/list", {}, 120)  # over stdio the pool starts with the tools
        time.sleep(P["settle_s"] * 2)
        mem = tree_memory(m.pid)
    finally:
        m.close()
    return mem["children_pss_kb"] / 2


def row_data(work, n):
    """The data image: warm print(1); a warm `import pandas` without and with
    image.preload; a groupby over a million rows in the sandbox against the
    same program on the host; memory per warm sandbox beside the cell
    image's; the image's size and build time."""
    digest = read_digest(DATA["digest_file"])
    out = {}
    plain = work.policy({"pool": 2, "deadline_s": 120}, cfg=DATA)
    pre = work.policy({"pool": 2, "deadline_s": 120},
                      {"image": {"layout": DATA_LAYOUT, "digest": digest, "preload": PRELOAD}},
                      cfg=DATA)
    m = Mcp(work, plain, "data")
    try:
        time.sleep(P["settle_s"])
        out["print1"] = spaced_cells(m, n)
        out["import"] = spaced_cells(m, n, "import pandas\nprint(1)")
    finally:
        m.close()
    m = Mcp(work, pre, "datapre")
    try:
        time.sleep(P["settle_s"])
        out["import_pre"] = spaced_cells(m, n, "import pandas\nprint(1)")
        inner = []
        for _ in range(max(3, n // 5)):
            sc, _ = m.cell(GROUPBY)
            inner.append(float(sc["stdout"]))
        out["groupby_cell_ms"] = inner
    finally:
        m.close()
    for key, prog in (("groupby_host_ms", GROUPBY), ("groupby_host_tuned_ms", MALLOC + GROUPBY)):
        host = []
        for _ in range(max(3, n // 5)):
            r = subprocess.run(["/usr/bin/python3", "-c", prog], capture_output=True,
                               text=True, timeout=300)
            if r.returncode != 0:
                raise RowError("the host's groupby: %s (scripts/install-deps installs "
                               "python3-pandas)" % r.stderr.strip()[-300:])
            host.append(float(r.stdout.split()[-1]))
        out[key] = host
    out["sandbox_kb"] = warm_sandbox_kb(work, DATA, PRELOAD)
    out["sandbox_kb_plain"] = warm_sandbox_kb(work, DATA)
    out["sandbox_kb_cell"] = warm_sandbox_kb(work, MAIN)
    blobs = os.path.join(DATA_LAYOUT, "blobs", "sha256")
    out["packed_mib"] = sum(os.path.getsize(os.path.join(blobs, b)) for b in os.listdir(blobs)) / MIB
    try:
        with open(DATA_LAYOUT + ".seconds") as f:
            out["build_s"] = int(f.read().strip())
    except (OSError, ValueError):
        out["build_s"] = None
    out["times"] = out["print1"]
    return out


# ---- row 20: replicas behind HAProxy ----------------------------------------------------

def row_cluster():
    """bench/cluster.py's figures (its docstring says how)."""
    import cluster  # bench/cluster.py, beside this file
    try:
        return cluster.row(P["cluster_s"], P["cluster_clients"], P["cluster_probes"],
                           APPLIANCE, log=lambda line: log("row 20: " + line))
    except cluster.ClusterBenchError as e:
        raise RowError(str(e)) from None


# ---- row 3: bare runsc run of a fresh bundle per cell -----------------------------------

def rootfs_path(digest):
    r = subprocess.run([APPLIANCE, "image", "verify", "--image", LAYOUT, "--digest", digest],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RowError("image verify: %s" % r.stderr.strip())
    return r.stdout.strip().splitlines()[-1]


def oci_config(rootfs):
    """The appliance's own cell config (pkg/sandbox/ociconfig.c, as root, with
    the default limits), without a cgroupsPath."""
    def rl(t, v):
        return {"type": t, "hard": v, "soft": v}
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": 65534, "gid": 65534, "additionalGids": []},
            "args": ["/usr/bin/python3.11", "-I", "-S", "-B", "/runner.py"],
            "env": ["PATH=/usr/bin"], "cwd": "/",
            "capabilities": {k: [] for k in ("bounding", "effective", "inheritable",
                                              "permitted", "ambient")},
            "rlimits": [rl("RLIMIT_AS", 256 * MIB), rl("RLIMIT_NPROC", 64),
                        rl("RLIMIT_NOFILE", 64), rl("RLIMIT_FSIZE", 16 * MIB),
                        rl("RLIMIT_CORE", 0)],
            "noNewPrivileges": True},
        "root": {"path": rootfs, "readonly": True},
        "hostname": "cell",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "nodev", "noexec"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "noexec", "mode=1777", "size=16m"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "noexec", "mode=755", "size=64k"]}],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network")],
            "resources": {"memory": {"limit": (256 + 192) * MIB},
                          "cpu": {"quota": 100000, "period": 100000}}},
    }


def runner_cell(conn, code="print(1)", timeout=60):
    """Runner protocol v1 on a LineConn: wait for ready, send the cell, read
    to done. Returns (stdout, done, t_sent, t_done)."""
    t, msg = conn.get(timeout)
    if msg is None or msg.get("t") != "ready":
        raise RowError("expected ready, got %r (%s)" % (msg, conn.stderr_tail()))
    t0 = conn.send({"t": "cell", "code": code, "tools": []})
    out = []
    while True:
        t1, msg = conn.get(timeout)
        if msg is None:
            raise RowError("the runner went away before done (%s)" % conn.stderr_tail())
        if msg.get("t") == "out":
            out.append(msg["data"])
        elif msg.get("t") == "done":
            if msg.get("error"):
                raise RowError("cell error: %s" % msg["error"].splitlines()[-1])
            return "".join(out), msg, t0, t1


def row_runsc(n, digest):
    rootfs = rootfs_path(digest)
    base = tempfile.mkdtemp(prefix="appliance-bench-runsc.")
    answer, total = [], []
    try:
        for i in range(P["warmup"] + n):
            t_start = time.perf_counter()
            bundle = os.path.join(base, "b%d" % i)
            os.mkdir(bundle, 0o700)
            with open(os.path.join(bundle, "config.json"), "w") as f:
                json.dump(oci_config(rootfs), f)
            argv = [RUNSC, "--root=" + os.path.join(base, "runsc"), "--network=none",
                    "--platform=" + PLATFORM, "--log=" + os.path.join(bundle, "runsc.log"),
                    "--log-format=text", "run", "--bundle", bundle, "bench-%d-%d" % (os.getpid(), i)]
            conn = LineConn(argv, os.path.join(bundle, "stderr"))
            try:
                out, _, t0, t1 = runner_cell(conn)
            finally:
                rc = conn.close()
            if out != "1\n":
                raise RowError("runsc run printed %r" % out)
            if rc != 0:
                raise RowError("runsc run exited %s: %s" % (rc, conn.stderr_tail()))
            shutil.rmtree(bundle)
            t_end = time.perf_counter()
            if i >= P["warmup"]:
                answer.append(t1 - t_start)
                total.append(t_end - t_start)
    finally:
        # `runsc run` deletes its container when it ends; one left by a
        # failed iteration is removed here.
        root = "--root=" + os.path.join(base, "runsc")
        r = subprocess.run([RUNSC, root, "list", "-quiet"], capture_output=True, text=True)
        for cid in r.stdout.split():
            subprocess.run([RUNSC, root, "delete", "-force", cid], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    return {"times": answer, "total": total, "rootfs": rootfs}


# ---- row 4: docker run --runtime=runsc on a private dockerd ---------------------------------

def docker_archive(path, digest):
    """The OCI layout as a `docker save` archive (docker 20.10 cannot load an
    OCI layout): manifest.json, the config blob and each layer blob as-is
    (docker load decompresses gzip layers and checks them against diff_ids)."""
    def blob(d):
        return os.path.join(LAYOUT, "blobs", "sha256", d.split(":", 1)[1])
    with open(blob(digest)) as f:
        man = json.load(f)
    cfg = man["config"]["digest"].split(":", 1)[1]
    layers = [layer["digest"].split(":", 1)[1] for layer in man["layers"]]
    entry = [{"Config": cfg + ".json", "RepoTags": ["appliance-bench:latest"],
              "Layers": [h + "/layer.tar" for h in layers]}]
    with tarfile.open(path, "w") as tar:
        data = json.dumps(entry).encode()
        ti = tarfile.TarInfo("manifest.json")
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
        tar.add(blob("sha256:" + cfg), cfg + ".json")
        for h in layers:
            tar.add(blob("sha256:" + h), h + "/layer.tar")


class Dockerd:
    """A dockerd of our own: private data root, exec root, pidfile and unix
    socket under one temporary directory, the runsc runtime registered. It
    never touches a system dockerd, and is stopped by its own pid."""

    def __init__(self):
        self.dockerd = shutil.which("dockerd") or "/usr/bin/dockerd"
        self.docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else shutil.which("docker")
        if not os.path.exists(self.dockerd):
            raise RowError("dockerd not installed (scripts/bench installs docker.io; "
                           "BENCH_DOCKER=0 skips it)")
        if not self.docker:
            raise RowError("no docker client")
        self.dir = tempfile.mkdtemp(prefix="abd.", dir="/tmp")  # short: socket paths
        os.chmod(self.dir, 0o711)
        self.sock = os.path.join(self.dir, "docker.sock")
        self.pidfile = os.path.join(self.dir, "dockerd.pid")
        cfg = os.path.join(self.dir, "daemon.json")
        with open(cfg, "w") as f:
            json.dump({"runtimes": {"runsc": {"path": RUNSC, "runtimeArgs": [
                "--network=none", "--platform=" + PLATFORM]}}}, f)
        # dockerd makes /run/docker/plugins whatever its exec root: ours to
        # remove afterwards only when it was not there before.
        self.made_run_docker = not os.path.exists("/run/docker")
        self.log = os.path.join(self.dir, "dockerd.log")
        self.logf = open(self.log, "wb")
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DOCKER_HOST": "unix://" + self.sock,
                    "DOCKER_CONFIG": os.path.join(self.dir, "client")}
        argv = [self.dockerd, "--config-file", cfg, "--data-root", os.path.join(self.dir, "data"),
                "--exec-root", os.path.join(self.dir, "exec"), "--pidfile", self.pidfile,
                "--host", "unix://" + self.sock, "--iptables=false", "--ip6tables=false",
                "--ip-forward=false", "--ip-masq=false", "--bridge=none",
                "--userland-proxy=false", "--exec-opt", "native.cgroupdriver=cgroupfs"]
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.logf,
                                  stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.p.poll() is not None:
                raise RowError("dockerd exited %s: %s" % (self.p.returncode, self.log_tail()))
            if os.path.exists(self.sock) and self.cli("version").returncode == 0:
                return
            time.sleep(0.3)
        raise RowError("dockerd did not answer within 60 s: %s" % self.log_tail())

    def log_tail(self, n=3):
        try:
            with open(self.log, "rb") as f:
                lines = f.read().decode("utf-8", "replace").strip().splitlines()
            return " | ".join(lines[-n:])
        except OSError:
            return ""

    def cli(self, *args, **kw):
        return subprocess.run([self.docker] + list(args), capture_output=True, env=self.env, **kw)

    def version(self):
        r = self.cli("info", "--format", "{{.ServerVersion}} {{.Driver}}")
        return r.stdout.decode().strip()

    def stop(self):
        pid = self.p.pid
        if self.p.poll() is None:
            os.kill(pid, signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self.p.wait()
        # Shims and sandboxes left by our containerd, found by our directory.
        for p in list(all_ppids()):
            try:
                with open("/proc/%d/cmdline" % p, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if self.dir.encode() in cmd and p != os.getpid():
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.5)
        with open("/proc/self/mounts") as f:
            mnts = [line.split()[1] for line in f]
        for m in sorted((m for m in mnts if m.startswith(self.dir + "/")), key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True)
        self.logf.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.made_run_docker:
            for d in ("/run/docker/plugins", "/run/docker"):
                try:
                    os.rmdir(d)  # only when empty
                except OSError:
                    pass


def row_docker(n, digest):
    d = Dockerd()
    try:
        arch = os.path.join(d.dir, "image.tar")
        docker_archive(arch, digest)
        with open(arch, "rb") as f:
            r = d.cli("load", stdin=f)
        if r.returncode != 0:
            raise RowError("docker load: %s" % r.stderr.decode().strip())
        ver = d.version().split()
        info = {"server_version": ver[0] if ver else "?",
                "storage_driver": ver[1] if len(ver) > 1 else "?",
                "load": r.stdout.decode().strip()}
        argv = [d.docker, "run", "--rm", "-i", "--runtime=runsc", "--network=none",
                "--read-only", "--user", "65534:65534", "--cap-drop", "ALL",
                "--security-opt", "no-new-privileges", "--tmpfs", "/tmp:size=16m,noexec,nosuid,nodev",
                "--memory", "448m", "--cpus", "1", "appliance-bench:latest",
                "/usr/bin/python3.11", "-I", "-S", "-B", "/runner.py"]
        answer, total = [], []
        for i in range(P["warmup"] + n):
            t_start = time.perf_counter()
            conn = LineConn(argv, os.path.join(d.dir, "run.stderr"), env=d.env)
            try:
                out, _, t0, t1 = runner_cell(conn)
            finally:
                rc = conn.close()
            t_end = time.perf_counter()
            if out != "1\n" or rc != 0:
                raise RowError("docker run: %r, exit %s: %s" % (out, rc, conn.stderr_tail()))
            if i >= P["warmup"]:
                answer.append(t1 - t_start)
                total.append(t_end - t_start)
        info.update({"times": answer, "total": total})
        return info
    finally:
        d.stop()


# ---- row 5: the floor ------------------------------------------------------------------------

def row_floor(work, n, spacing=0.0):
    """Cells back to back (row 5), or spaced like rows 1 and 2 (row 5s): a
    worker that waited 1.5 s meets cold CPU caches, as a pooled runner does."""
    conn = LineConn([HOST_PY, "-I", "-S", "-B", FLOOR_WORKER, RUNNER],
                    os.path.join(work.dir, "floor.stderr"))
    times = []
    try:
        for i in range(P["warmup"] + n):
            if spacing and i:
                time.sleep(spacing)
            out, _, t0, t1 = runner_cell(conn)
            if out != "1\n":
                raise RowError("floor worker printed %r" % out)
            if i >= P["warmup"]:
                times.append(t1 - t0)
    finally:
        conn.close()
    return {"times": times, "python": subprocess.run([HOST_PY, "--version"], capture_output=True,
                                                     text=True).stdout.strip()}


# ---- rows 6 and 7: tool calls ------------------------------------------------------------------

def toy_policy(work, limits, cfg=MAIN):
    """The toy's tools as the server marks them (readOnlyHint: reads, the
    rest writes), or with BENCH_AUDIT=read|write toy.echo as that access
    and an audit log (a fresh one per policy, in the work directory): a
    write's call line is on disk before the call goes."""
    extra = {"servers": {"toy": {"command": [TOY]}},
             "tools": {"toy.*": {"access": "write"}},
             "roles": {"dev": {"tools": ["toy.*"], "write": True}},
             "clients": {"default_role": "dev"}}
    if P["audit"]:
        # An exact entry: echo's own readOnlyHint would make it a read.
        extra["tools"]["toy.echo"] = {"access": P["audit"]}
        extra["audit"] = {"path": os.path.join(work.dir, "audit-%d.jsonl" % (work.serial + 1))}
    return work.policy(limits, extra, cfg)


ECHO_CELL = """import time
n = %d
r = await toy.echo(text="x")
t0 = time.perf_counter()
for _ in range(n):
    await toy.echo(text="x")
dt = time.perf_counter() - t0
print(dt / n * 1e6)
{"per_call_us": dt / n * 1e6, "first": r}
"""

GATHER_CELL = """import time
t0 = time.perf_counter()
r = await asyncio.gather(*(toy.sleep(ms=%d) for _ in range(%d)), return_exceptions=True)
dt = time.perf_counter() - t0
bad = [repr(x) for x in r if isinstance(x, BaseException)]
print(dt)
{"wall_s": dt, "ok": len(r) - len(bad), "failed": len(bad), "first_error": bad[:1]}
"""


def direct_runs(argv, runs, timeout):
    """Per-call times (us) of `runs` runs of a direct client (no appliance)."""
    per = []
    for _ in range(runs):
        r = subprocess.run([HOST_PY] + argv, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise RowError("%s: %s" % (os.path.basename(argv[0]),
                                       r.stderr.strip() or r.stdout.strip()))
        per.append(json.loads(r.stdout)["per_call_us"])
    return per


def row_direct(n, runs):
    return direct_runs([DIRECT_CLIENT, TOY, str(n)], runs, 300)


def rows_tools(work, results, cfg=MAIN, want=None):
    """Rows 6 and 7 (those of want that were selected) on one appliance,
    filed in results under the row number and cfg's key ("6", "6p")."""
    want = ROWS & (want or {6, 7})
    n = P["calls"]
    limits = {"pool": 2, "deadline_s": 300, "max_calls": min(10000, n + 10),
              "concurrency": P["gather_concurrency"]}
    m = Mcp(work, toy_policy(work, limits, cfg), "toy" + cfg["key"])
    k6, k7 = ("6" + cfg["key"], "7" + cfg["key"]) if cfg["key"] else (6, 7)
    try:
        if 6 in want:
            try:
                cell_us, e2e = [], []
                for _ in range(P["call_runs"]):
                    sc, dt = m.cell(ECHO_CELL % n, timeout=600)
                    cell_us.append(float(sc["result"]["per_call_us"]))
                    e2e.append(dt)
                    time.sleep(P["spacing_s"])
                direct = row_direct(n, P["call_runs"])
                results[k6] = {"cell_per_call_us": cell_us, "direct_per_call_us": direct,
                               "cell_end_to_end_s": e2e, "calls": n,
                               "overhead_us": statistics.median(cell_us) - statistics.median(direct)}
            except RowError as e:
                results[k6] = {"error": str(e)}
        if 7 in want:
            try:
                walls, e2e = [], []
                for _ in range(P["gather_runs"]):
                    sc, dt = m.cell(GATHER_CELL % (P["gather_ms"], P["gather"]), timeout=120)
                    res = sc["result"]
                    if res["ok"] != P["gather"]:
                        raise RowError("%d of %d calls failed: %s"
                                       % (res["failed"], P["gather"], res["first_error"]))
                    walls.append(float(res["wall_s"]))
                    e2e.append(dt)
                    time.sleep(P["spacing_s"])
                results[k7] = {"times": walls, "cell_end_to_end_s": e2e,
                               "calls": P["gather"], "ms": P["gather_ms"],
                               "concurrency": limits["concurrency"]}
            except RowError as e:
                results[k7] = {"error": str(e)}
    finally:
        m.close()


# ---- row 12: tool calls to an HTTP upstream ------------------------------------------------------

WEB_ECHO_CELL = ECHO_CELL.replace("toy.echo", "web.echo")

class WebServer:
    """tests/integration/mcphttp.py as a child process on a free loopback
    port (it prints `listening PORT`), stopped by its own pid."""

    def __init__(self, work):
        argv = [HOST_PY, MCPHTTP, "0"]
        self.stderr_path = os.path.join(work.dir, "mcphttp.stderr")
        self.errf = open(self.stderr_path, "wb")
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=self.errf, cwd=ROOT)
        ready, _, _ = select.select([self.p.stdout], [], [], 30)
        line = self.p.stdout.readline() if ready else b""
        if not line.startswith(b"listening "):
            self.close()
            with open(self.stderr_path, "rb") as f:
                tail = f.read().decode("utf-8", "replace").strip().splitlines()[-3:]
            raise RowError("mcphttp.py did not start (%r): %s" % (line[:100], " | ".join(tail)))
        self.port = int(line.split()[1])
        self.url = "http://127.0.0.1:%d/mcp" % self.port

    def close(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        self.errf.close()


def row_http_direct(url, n, runs):
    return direct_runs([HTTP_DIRECT, url, str(n)], runs, 600)


def row_web(work):
    """Row 12: row 6's loop of echo calls, to mcphttp.py over HTTP (the
    policy names it `web` by its URL, its tools reads), against
    bench/http_direct.py's calls to the same server."""
    n = P["calls"]
    limits = {"pool": 2, "deadline_s": 300, "max_calls": min(10000, n + 10),
              "concurrency": P["gather_concurrency"]}
    srv = WebServer(work)
    try:
        sig = work.policy(limits, {"servers": {"web": {"url": srv.url}},
                                   "tools": {"web.*": {"access": "read"}},
                                   "roles": {"web": {"tools": ["web.*"], "write": False}},
                                   "clients": {"default_role": "web"}})
        m = Mcp(work, sig, "web")
        try:
            cell_us, e2e, first = [], [], None
            for _ in range(P["call_runs"]):
                sc, dt = m.cell(WEB_ECHO_CELL % n, timeout=900)
                cell_us.append(float(sc["result"]["per_call_us"]))
                first = sc["result"].get("first")
                e2e.append(dt)
                time.sleep(P["spacing_s"])
            direct = row_http_direct(srv.url, n, P["call_runs"])
        finally:
            m.close()
    finally:
        srv.close()
    return {"cell_per_call_us": cell_us, "direct_per_call_us": direct,
            "cell_end_to_end_s": e2e, "calls": n, "first": first,
            "server": "mcphttp.py",
            "overhead_us": statistics.median(cell_us) - statistics.median(direct)}


# ---- row 10: one cell beside a flooding one ------------------------------------------------------

# A cell that writes empty `out` lines to its protocol descriptor without
# end (whole lines, each write small enough never to be split).
FLOOD_CELL = r"""
import os, stat
def fifo(fd):
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False
fds = [fd for fd in range(3, 64) if fifo(fd)]
burst = b'{"t":"out","data":""}\n' * 180
t = __import__("time").monotonic()
while __import__("time").monotonic() - t < SECONDS:
    for fd in fds:
        try:
            os.write(fd, burst)
        except OSError:
            pass
"""

IDLE_CELL = "import time\ntime.sleep(SECONDS)\n"


def row_fair(work):
    """The same victim cell (sequential toy.echo calls, timed inside it) beside
    an idle cell and beside one flooding its protocol descriptor, on one
    appliance; the flooder's line budget is raised to the ceiling so that it
    floods for the whole measurement rather than being stopped at once."""
    n, seconds = P["fair_calls"], 8
    limits = {"pool": 2, "cells": 4, "deadline_s": 120, "max_calls": n + 10,
              "max_runner_lines": 1000000}
    try:
        sig = toy_policy(work, limits)
    except RowError:  # a build that does not know the line budget
        limits.pop("max_runner_lines")
        sig = toy_policy(work, limits)
    m = Mcp(work, sig, "fair")
    out = {"idle": [], "flood": [], "flood_stopped": [], "covered": []}
    try:
        time.sleep(P["settle_s"])
        for _ in range(P["fair_runs"]):
            for kind, neighbour in (("idle", IDLE_CELL), ("flood", FLOOD_CELL)):
                code = neighbour.replace("SECONDS", str(seconds))
                box = {}

                def neighbour_run(code=code, box=box):
                    box["msg"], _ = m.request("tools/call", {"name": "run_python",
                                                             "arguments": {"code": code}},
                                              timeout=120)
                th = threading.Thread(target=neighbour_run)
                th.start()
                time.sleep(0.2)  # the neighbour is running (and flooding)
                sc, victim_s = m.cell(ECHO_CELL % n, timeout=300)
                out[kind].append(float(sc["result"]["per_call_us"]))
                th.join()
                if kind == "flood":
                    res = (box.get("msg") or {}).get("result") or {}
                    fsc = res.get("structuredContent") or {}
                    out["flood_stopped"].append(fsc.get("reason"))
                    # the flood lasted past the victim's end (its own budget
                    # or the SECONDS ended it), or the figure is not one
                    out["covered"].append(fsc.get("duration_ms", 0) / 1e3 > 0.2 + victim_s)
                time.sleep(P["spacing_s"])
    finally:
        m.close()
    out["ratio"] = statistics.median(out["flood"]) / statistics.median(out["idle"])
    out["calls"] = n
    return out


# ---- row 16: upstream answers, kept and dropped --------------------------------------------------

BYTES_SEQ_CELL = """import time
try:
    await toy.bytes(n=%d)  # the server builds this size's answer once; not counted
except ToolError:
    pass
t0 = time.perf_counter()
kept = 0
for _ in range(%d):
    try:
        kept += len(await toy.bytes(n=%d)) > 0
    except ToolError as e:
        assert "over the cap" in str(e), e
dt = time.perf_counter() - t0
{"wall_s": dt, "kept": kept}
"""

BYTES_GATHER_CELL = """import time
try:
    await toy.bytes(n=%d)
except ToolError:
    pass
t0 = time.perf_counter()
r = await asyncio.gather(*(toy.bytes(n=%d) for _ in range(%d)), return_exceptions=True)
dt = time.perf_counter() - t0
{"wall_s": dt, "refused": sum(isinstance(x, ToolError) and "over the cap" in str(x) for x in r)}
"""

ADD_CELL = """import time
t0 = time.perf_counter()
ok = 0
for i in range(%d):
    ok += (await toy.add(a=i, b=1)) == {"sum": i + 1}
{"wall_s": time.perf_counter() - t0, "ok": ok}
"""


def toy_answers(n, size):
    """The requests for n `bytes` answers of size to the toy, and the time
    the toy takes to answer them all to `cat > /dev/null` (its answers kept
    in a file too, for the cat baseline)."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "1"}}},
             {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
               "params": {"name": "bytes", "arguments": {"n": size}}} for i in range(n)]
    return "".join(json.dumps(x) + "\n" for x in lines).encode()


def piped_mb_s(argv, stdin_bytes, nbytes):
    """MB/s of argv's output (nbytes) read by cat into /dev/null, through a
    pipe of the size the appliance asks for its servers' output."""
    rfd, wfd = os.pipe()
    try:
        fcntl.fcntl(rfd, fcntl.F_SETPIPE_SZ, MIB)
    except OSError:
        pass
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        src = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=wfd,
                               stderr=subprocess.DEVNULL)
        cat = subprocess.Popen(["cat"], stdin=rfd, stdout=null)
        os.close(wfd)
        os.close(rfd)
        src.stdin.write(stdin_bytes)
        src.stdin.close()
        cat.wait()
        src.wait()
    return nbytes / (time.perf_counter() - t0) / 1e6


def row_upstream(work):
    """How fast answers from a stdio server are read: dropped ones (over the
    result cap, read and thrown away as they come) and kept ones, against
    `cat` of the same bytes through a pipe and the toy's own pace; then a
    cell's small calls alone and beside a cell gathering huge answers from
    the same server."""
    # 16 answers: the toy queues at most 16 of the largest (tests/toy/README.md)
    n, big, kept_size = 16, 16 * MIB, MIB - 4096
    out = {"n": n, "big": big, "kept_size": kept_size}
    req = toy_answers(n, big)
    path = os.path.join(work.dir, "answers.jsonl")
    with open(path, "wb") as f:
        p = subprocess.run([TOY], input=req, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        f.write(p.stdout)
    nbytes = os.path.getsize(path)
    per = nbytes / n  # an answer (the small initialize answer is in nbytes too)
    out["cat_mb_s"] = [piped_mb_s(["cat"] + [path] * 4, b"", 4 * nbytes) for _ in range(3)]
    out["toy_mb_s"] = [piped_mb_s([TOY], req, nbytes) for _ in range(3)]
    limits = {"pool": 2, "cells": 4, "deadline_s": 300, "max_calls": 1000,
              "max_result_bytes": MIB}
    m = Mcp(work, toy_policy(work, limits), "upstream")
    try:
        time.sleep(P["settle_s"])
        for key, code, size in (("dropped", BYTES_SEQ_CELL % (big, n, big), big),
                                ("kept", BYTES_SEQ_CELL % (kept_size, n, kept_size), kept_size)):
            out[key + "_mb_s"] = []
            for _ in range(3):
                sc, _ = m.cell(code, timeout=300)
                r = sc["result"]
                if (r["kept"] == n) != (key == "kept"):
                    raise RowError("%s: %d of %d kept" % (key, r["kept"], n))
                out[key + "_mb_s"].append(n * (per if size == big else size) / r["wall_s"] / 1e6)
        out["gathered_mb_s"] = []
        for _ in range(3):
            sc, _ = m.cell(BYTES_GATHER_CELL % (big, big, 4 * n), timeout=300)
            if sc["result"]["refused"] != 4 * n:
                raise RowError("gathered: %s" % sc["result"])
            out["gathered_mb_s"].append(4 * n * per / sc["result"]["wall_s"] / 1e6)
        # a cell's small calls alone, then beside 200 huge answers gathered
        out["alone_s"], out["beside_s"] = [], []
        for _ in range(3):
            sc, _ = m.cell(ADD_CELL % 100, timeout=120)
            out["alone_s"].append(sc["result"]["wall_s"])
            q = queue.Queue()
            m.send_cell(BYTES_GATHER_CELL % (big, big, 200), q)
            time.sleep(0.5)  # the gather is under way
            sc, _ = m.cell(ADD_CELL % 100, timeout=300)
            if sc["result"]["ok"] != 100:
                raise RowError("beside: %s" % sc["result"])
            out["beside_s"].append(sc["result"]["wall_s"])
            q.get(timeout=300)
    finally:
        m.close()
    return out


# ---- row 17: a process that only answers server/discover -----------------------------------------

DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list",
              "params": {"_meta": DISCOVER["params"]["_meta"]}}


def scripted_cpu(work, sig, name, requests):
    """CPU seconds (user+sys) of `appliance run` and everything below it
    (CPU_WRAPPER), its input a file of requests read to its end; with its
    answers and its log."""
    path = os.path.join(work.dir, name)
    with open(path + ".in", "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in requests))
    argv = [HOST_PY, "-I", "-S", "-c", CPU_WRAPPER, path + ".ru"] + work.run_argv(sig)
    with open(path + ".in", "rb") as i, open(path + ".out", "wb") as o, \
            open(path + ".err", "wb") as e:
        r = subprocess.run(argv, stdin=i, stdout=o, stderr=e, timeout=300,
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"})
    with open(path + ".err", encoding="utf-8", errors="replace") as f:
        log_text = f.read()
    if r.returncode != 0:
        raise RowError("%s: exit %d: %s" % (name, r.returncode, log_text[-400:]))
    with open(path + ".ru") as f:
        ru = json.load(f)
    with open(path + ".out") as f:
        answers = [json.loads(x) for x in f if x.strip()]
    if len(answers) != len(requests) or any("result" not in a for a in answers):
        raise RowError("%s: answers %s" % (name, answers))
    return ru["user_s"] + ru["sys_s"], log_text


def row_discover(work):
    """The CPU of an appliance whose input is one server/discover (what a
    client's second, disposable connection asks) against one that must also
    answer tools/list (the servers and the pool started), and whether any
    sandbox or server started for the first."""
    sig = toy_policy(work, {"pool": 2})
    out = {"runs": P["call_runs"] * 3, "discover_cpu_s": [], "tools_cpu_s": [],
           "discover_started": 0}
    for i in range(out["runs"]):
        cpu, text = scripted_cpu(work, sig, "discover%d" % i, [DISCOVER])
        out["discover_cpu_s"].append(cpu)
        # the pool and the servers log as they start
        if "pool:" in text or "upstream " in text:
            out["discover_started"] += 1
        cpu, text = scripted_cpu(work, sig, "tools%d" % i, [DISCOVER, TOOLS_LIST])
        if "upstream toy: ready" not in text:
            raise RowError("tools/list without the toy started: %s" % text[-400:])
        out["tools_cpu_s"].append(cpu)
    return out


# ---- row 8: sustained load ----------------------------------------------------------------------

def row_load(work, extra=None, cfg=MAIN):
    n, clients = P["load_n"], P["load_clients"]
    m = Mcp(work, work.policy({"pool": P["load_pool"], "cells": clients, "deadline_s": 120},
                              extra, cfg), "load")
    lat, errors = [], []
    lock = threading.Lock()
    left = [n]

    def client():
        while True:
            with lock:
                if left[0] <= 0 or errors:
                    return
                left[0] -= 1
            try:
                sc, dt = m.cell("print(1)", timeout=300)
                check_print1(sc)
            except RowError as e:
                with lock:
                    errors.append(str(e))
                return
            with lock:
                lat.append(dt)

    try:
        time.sleep(P["settle_s"])
        t0 = time.perf_counter()
        ts = [threading.Thread(target=client) for _ in range(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
        mem = tree_memory(m.pid)
    finally:
        m.close()
    if errors:
        raise RowError("%d of %d cells done, then: %s" % (len(lat), n, errors[0]))
    return {"times": lat, "wall_s": wall, "cells_per_s": len(lat) / wall, "clients": clients,
            "pool": P["load_pool"], "mem_after": mem}


# ---- rows 13 and 14: open-loop arrival rates ------------------------------------------------

def open_loop(m, offsets, timeout=300):
    """print(1) cells sent on one connection at t0 + each offset (seconds),
    whether or not earlier ones have answered, then every answer awaited.
    Returns (latencies in send order, the latest send behind its schedule
    in seconds)."""
    q = queue.Queue()
    sent = {}
    late = 0.0
    t0 = time.perf_counter() + 0.01
    for off in offsets:
        d = t0 + off - time.perf_counter()
        if d > 0:
            time.sleep(d)
        rid, ts = m.send_cell("print(1)", q)
        sent[rid] = ts
        late = max(late, ts - (t0 + off))
    lat = {}
    deadline = time.perf_counter() + timeout
    while len(lat) < len(sent):
        try:
            t1, msg = q.get(timeout=max(0.1, deadline - time.perf_counter()))
        except queue.Empty:
            raise RowError("%d of %d cells unanswered after %.0f s"
                           % (len(sent) - len(lat), len(sent), timeout)) from None
        if msg is None:
            raise RowError("appliance run exited (status %s): %s"
                           % (m.conn.p.poll(), m.conn.stderr_tail()))
        check_print1(ran(msg))
        lat[msg["id"]] = t1 - sent[msg["id"]]
    return [lat[r] for r in sorted(lat)], late


def rate_policy(work):
    """Row 1's policy (pool 2), with room for the burst in flight."""
    return work.policy({"pool": 2, "cells": max(4, min(64, P["burst"])), "deadline_s": 60})


def pool_log(work, name):
    """What the appliance of a row said about its pool: whether its sandboxes
    were restored, and whether idle ones could not be frozen."""
    try:
        with open(os.path.join(work.dir, name + ".stderr"), errors="replace") as f:
            text = f.read()
    except OSError:
        return "no log"
    said = ["restored" if "sandboxes are restored from it" in text else "booted"]
    if "idle sandboxes are not frozen" in text:
        said.append("NOT frozen")
    if "no checkpoint to restore sandboxes from" in text:
        said.append("checkpoint failed")
    return ", ".join(said)


def row_sweep(work):
    n = P["sweep_n"]
    m = Mcp(work, rate_policy(work), "sweep")
    rates = []
    try:
        time.sleep(P["settle_s"])  # the pool boots
        for _ in range(P["warmup"]):
            check_print1(m.cell("print(1)")[0])
            time.sleep(P["spacing_s"])
        for rate in P["sweep_rates"]:
            log("row 13: %d cells at %g cells/s" % (n, rate))
            lat, late = open_loop(m, [i / rate for i in range(n)])
            rates.append({"rate": rate, "times": lat, "late_ms": late * 1e3,
                          "stats": stats(lat)})
            time.sleep(P["settle_s"])  # the pool refills before the next rate
        log("row 13: a burst of %d" % P["burst"])
        lat, late = open_loop(m, [0.0] * P["burst"])
        burst = {"n": P["burst"], "times": lat, "late_ms": late * 1e3, "stats": stats(lat)}
    finally:
        rc = m.close()
    return {"rates": rates, "burst": burst, "exit": rc, "pool_log": pool_log(work, "sweep")}


def p95_bound(res):
    """Row 14's bound in ms and how it was chosen."""
    if P["p95_bound_ms"] > 0:
        return P["p95_bound_ms"], "BENCH_P95_BOUND_MS"
    st = (res.get(1) or {}).get("stats") or (stats(res[1]["times"]) if res.get(1) and
                                             res[1].get("times") else None)
    if not st:
        return 50.0, "50 ms floor (row 1 not measured)"
    return max(2 * st["p95_ms"], 50.0), "max(2 x row 1 p95 = %.1f ms, 50 ms)" % (2 * st["p95_ms"])


def row_maxrate(work, bound_ms, how):
    """Doubling (or halving) from 1 cell/s to bracket the bound, then
    geometric bisection; each probe BENCH_PROBE_N cells, open loop, after
    the pool has refilled; no probe started that would end past the budget."""
    pn = P["probe_n"]
    m = Mcp(work, rate_policy(work), "maxrate")
    probes = []
    t_end = time.perf_counter() + P["search_s"]

    def fits(rate):
        return time.perf_counter() + pn / rate + P["settle_s"] <= t_end

    def probe(rate):
        log("row 14: %d cells at %.3g cells/s" % (pn, rate))
        lat, late = open_loop(m, [i / rate for i in range(pn)])
        st = stats(lat)
        ok = st["p95_ms"] <= bound_ms
        probes.append({"rate": rate, "times": lat, "stats": st, "late_ms": late * 1e3,
                       "ok": ok})
        time.sleep(P["settle_s"])
        return ok

    lo = hi = None
    try:
        time.sleep(P["settle_s"])
        for _ in range(P["warmup"]):
            check_print1(m.cell("print(1)")[0])
            time.sleep(P["spacing_s"])
        r = 1.0
        if probe(r):
            lo = r
            while r < 32 and fits(2 * r):
                r *= 2
                if probe(r):
                    lo = r
                else:
                    hi = r
                    break
        else:
            hi = r
            while r > 0.25 and fits(r / 2):
                r /= 2
                if probe(r):
                    lo = r
                    break
                hi = r
        for _ in range(3):  # bisect: the bracket shrinks to 2^(1/8), 9%
            if lo is None or hi is None:
                break
            mid = (lo * hi) ** 0.5
            if not fits(mid):
                break
            if probe(mid):
                lo = mid
            else:
                hi = mid
    finally:
        rc = m.close()
    best = max((p for p in probes if p["ok"]), key=lambda p: p["rate"], default=None)
    return {"bound_ms": bound_ms, "bound_how": how, "probes": probes, "rate": lo,
            "fail_rate": hi, "times": best["times"] if best else [], "exit": rc}


# ---- row 15: CPU per cell ---------------------------------------------------------------------

# The reaper of row 15: a child subreaper (so that every descendant that
# outlives its parent is reparented to it, not to init) that starts the
# appliance, reaps every child until none is left, and writes the CPU time
# of all of them (RUSAGE_CHILDREN: each reaped process's own time and that
# of the processes it reaped) to the file argv[1]. Its own time is not in it.
CPU_WRAPPER = r"""
import ctypes, json, os, resource, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit("bench reaper: prctl: %s" % os.strerror(ctypes.get_errno()))
out, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
main, others = None, 0
while True:
    try:
        p, st, ru = os.wait4(-1, 0)
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if p == pid:
        main = {"status": os.waitstatus_to_exitcode(st), "user_s": ru.ru_utime,
                "sys_s": ru.ru_stime}
    else:
        others += 1
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(out + ".tmp", "w") as f:
    json.dump({"appliance": main, "stragglers": others, "user_s": ru.ru_utime,
               "sys_s": ru.ru_stime}, f)
os.rename(out + ".tmp", out)
sys.exit(main["status"] if main and main["status"] >= 0 else 1)
"""
CPUACCT = "/sys/fs/cgroup/cpuacct"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """utime+stime+cutime+cstime of a live process, in seconds (in clock
    ticks: each field rounded down)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return 0.0
    return sum(int(x) for x in s[s.rfind(")") + 2:].split()[11:15]) / CLK_TCK


def in_appliance_cgroup(pid):
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            return ":/appliance/" in f.read()
    except OSError:
        return False


class CpuRun:
    """One appliance of row 15 under CPU_WRAPPER. Samples the cpuacct usage
    of its instance cgroup (/appliance/i-PID-..., every sandbox's and
    gofer's CPU in ns, kept in the parent when a sandbox's own cgroup is
    removed) every 0.1 s; close() gives the exact rusage of everything."""

    def __init__(self, work, pool, name, extra=None, cfg=MAIN):
        self.out = os.path.join(work.dir, name + ".rusage.json")
        self.stale = set(self._instances())  # left by others: never this one's
        self.t0 = time.perf_counter()
        self.m = Mcp(work, work.policy({"pool": pool, "deadline_s": 60}, extra, cfg), name,
                     wrap=self.out)
        kids = [k for k, pp in all_ppids().items() if pp == self.m.pid]
        if len(kids) != 1:
            self.m.close()
            raise RowError("the reaper has %d children, not 1" % len(kids))
        self.apid = kids[0]
        self.samples = []  # (seconds since start, cgroup usage s or None)
        self.stop = threading.Event()
        self.th = threading.Thread(target=self._sample, daemon=True)
        self.th.start()

    @staticmethod
    def _instances():
        try:
            return [d for d in os.listdir(os.path.join(CPUACCT, "appliance"))
                    if d.startswith("i-")]
        except OSError:
            return []

    def cg(self):
        names = [d for d in self._instances()
                 if d.startswith("i-%d-" % self.apid) and d not in self.stale]
        if not names:
            return 0.0 if os.path.isdir(CPUACCT) else None
        try:
            with open(os.path.join(CPUACCT, "appliance", names[0], "cpuacct.usage")) as f:
                return int(f.read()) / 1e9
        except OSError:
            return None

    def _sample(self):
        while not self.stop.is_set():
            self.samples.append((time.perf_counter() - self.t0, self.cg()))
            self.stop.wait(0.1)

    def outside(self):
        """CPU so far of the processes below the reaper outside the appliance's
        cgroups: the appliance, runsc run, anything they reaped."""
        pids = [self.apid] + descendants(self.apid)
        return sum(proc_cpu(k) for k in pids if not in_appliance_cgroup(k))

    def until(self, t):
        d = self.t0 + t - time.perf_counter()
        if d > 0:
            time.sleep(d)

    def close(self):
        self.stop.set()
        self.th.join()
        self.end = {"t": time.perf_counter() - self.t0, "cg": self.cg(),
                    "outside": self.outside()}
        self.m.close()
        self.wall = time.perf_counter() - self.t0
        try:
            with open(self.out) as f:
                ru = json.load(f)
        except (OSError, ValueError):
            raise RowError("the reaper wrote no rusage (%s)" % self.m.conn.stderr_tail()) from None
        ru["cpu_s"] = ru["user_s"] + ru["sys_s"]
        self.ru = ru
        return ru


def idle_rate(samples, t_from):
    """Least-squares slope (CPU s per s) of the cgroup samples after t_from."""
    xs = [(t, u) for t, u in samples if t >= t_from and u is not None]
    if len(xs) < 5:
        return None
    mt = statistics.fmean(t for t, _ in xs)
    mu = statistics.fmean(u for _, u in xs)
    den = sum((t - mt) ** 2 for t, _ in xs)
    return sum((t - mt) * (u - mu) for t, u in xs) / den if den else None


def quiet_from(samples, t_from, t_to, rate, win=0.5):
    """The first cgroup sample (t, u) in [t_from, t_to] from which the next
    win seconds use no more than twice the idle rate plus 5% of a core: the
    moment a boot (the runner's warm-up after ready included) is over."""
    xs = [(t, u) for t, u in samples if t_from <= t <= t_to and u is not None]
    thr = 2 * rate + 0.05
    for i, (t, u) in enumerate(xs):
        later = next(((t2, u2) for t2, u2 in xs[i + 1:] if t2 >= t + win), None)
        if later is None:
            return None
        if (later[1] - u) / (later[0] - t) <= thr:
            return (t, u)
    return None


def row_cpu(work, extra=None, cfg=MAIN):
    """Row 15 (see the docstring). The runs, each its own appliance under
    CPU_WRAPPER: BENCH_CPU_BOOTS pairs of pool 0 and pool 2 serving no cell
    for a short life (the boot at start, the teardown at exit); pool 2
    serving no cell for the batch's length (the baseline); the batch."""
    n, sp, settle = P["cpu_n"], P["spacing_s"], P["settle_s"]
    short = settle + 3.0
    dur = settle + n * sp + settle  # the batch: its last replacement has booted
    pairs = []
    for k in range(P["cpu_boots"]):
        pair = {}
        for pool in (0, 2):
            log("row 15: pool %d, no cell, %.0f s (%d of %d)" % (pool, short, k + 1,
                                                                P["cpu_boots"]))
            r = CpuRun(work, pool, "cpu-p%d-short%d" % (pool, k), extra, cfg)
            r.until(short)
            r.close()
            pair[pool] = r
        pairs.append(pair)
    log("row 15: pool 2, no cell, %.0f s" % dur)
    lg = CpuRun(work, 2, "cpu-p2-long", extra, cfg)
    lg.until(dur)
    lg.close()
    log("row 15: pool 2, %d cells %.1f s apart, %.0f s" % (n, sp, dur))
    bt = CpuRun(work, 2, "cpu-p2-cells", extra, cfg)
    lat, answered = [], []
    try:
        for i in range(n):
            bt.until(settle + i * sp)
            sc, dt = bt.m.cell("print(1)")
            check_print1(sc)
            lat.append(dt)
            answered.append(time.perf_counter() - bt.t0)
        bt.until(dur)
    finally:
        bt.close()

    runs = {"p2_long": lg, "p2_cells": bt}
    for k, pair in enumerate(pairs):
        runs["p0_short%d" % k], runs["p2_short%d" % k] = pair[0], pair[2]
    for k, v in runs.items():
        if v.ru["appliance"] is None or v.ru["appliance"]["status"] != 0:
            raise RowError("%s: the appliance exited %s" % (k, v.ru["appliance"]))
    out = {"cells": n, "spacing_s": sp, "times": lat, "batch_s": bt.wall,
           "rusage": {k: v.ru for k, v in runs.items()},
           "stragglers": sum(v.ru["stragglers"] for v in runs.values())}
    mean = statistics.fmean
    # total per cell, exact: the batch over the baseline of the same pool and length
    out["total_ms"] = (bt.ru["cpu_s"] - lg.ru["cpu_s"]) / n * 1e3
    out["total_user_ms"] = (bt.ru["user_s"] - lg.ru["user_s"]) / n * 1e3
    out["total_sys_ms"] = (bt.ru["sys_s"] - lg.ru["sys_s"]) / n * 1e3
    # an appliance with no sandbox, start to exit
    out["startup_ms"] = mean(p[0].ru["cpu_s"] for p in pairs) * 1e3
    # an idle pooled sandbox, per second: exact (pool 2 living two lengths),
    # and the slope of the cgroup (its sandbox and gofer only)
    out["idle_ms_per_s"] = mean((lg.ru["cpu_s"] - p[2].ru["cpu_s"]) / (lg.end["t"] - p[2].end["t"])
                                for p in pairs) / 2 * 1e3
    slope = idle_rate(lg.samples, 2 * settle)
    out["idle_cg_ms_per_s"] = slope / 2 * 1e3 if slope is not None else None
    if slope is None or not lg.end["cg"]:
        out["no_cgroup"] = "no cpuacct cgroup %s/appliance/i-PID-...: boot and teardown not split" \
            % CPUACCT
        return out
    out["total_cg_ms"] = (bt.end["cg"] - lg.end["cg"]) / n * 1e3
    # boot only, at start: the cgroup when the two boots are over, plus what
    # the processes outside it (the appliance, runsc run) used over pool 0's;
    # teardown at exit: what the appliance and everything below it used after
    # the last look (rusage - cgroup - outside), over pool 0's
    boots, boot_cg, walls, tear = [], [], [], []
    for p in pairs:
        q = quiet_from(p[2].samples, 0.0, p[2].end["t"], slope)
        if q is None:
            continue
        # pool 0's cgroup holds what both runs share: the template that a
        # restoring appliance boots and checkpoints at start, whatever its pool
        extra = p[2].end["outside"] - p[0].end["outside"]
        base = p[0].end["cg"] or 0.0
        boots.append((q[1] - base + extra) / 2)
        boot_cg.append((q[1] - base) / 2)
        walls.append(q[0])
        tear.append(((p[2].ru["cpu_s"] - p[2].end["cg"] - p[2].end["outside"])
                     - (p[0].ru["cpu_s"] - base - p[0].end["outside"])) / 2)
    if boots:
        out["boot_runs"] = len(boots)
        out["boot_ms"] = mean(boots) * 1e3
        out["boot_ms_each"] = [b * 1e3 for b in boots]
        out["boot_cg_ms"] = mean(boot_cg) * 1e3
        out["boot_outside_ms"] = out["boot_ms"] - out["boot_cg_ms"]
        out["boot_wall_s"] = mean(walls)  # from the reaper's start, both pooled sandboxes
        out["teardown_ms"] = mean(tear) * 1e3
        out["teardown_ms_each"] = [t * 1e3 for t in tear]
    # each cell's refill, from its answer to the cgroups' return to idle: the
    # used sandbox's end in its cgroup and the replacement's boot in its own
    refills = []
    for i, ta in enumerate(answered):
        t_next = (settle + (i + 1) * sp) if i + 1 < n else dur
        u_a = [u for t, u in bt.samples if t <= ta and u is not None]
        q = quiet_from(bt.samples, ta, t_next, slope)
        if u_a and q:
            refills.append((q[0] - ta, q[1] - u_a[-1]))
    out["refills_measured"] = len(refills)
    if refills:
        out["refill_wall_ms"] = statistics.median(w for w, _ in refills) * 1e3
        out["refill_cg_ms"] = statistics.median(c for _, c in refills) * 1e3
    return out


# ---- machine, table, targets ---------------------------------------------------------------------

def baselines(work, res):
    """Rows 1, 2 and 6 again on each baseline configuration, filed as "1p",
    "2p", "6p" (this runsc on ptrace) and "1o", "2o", "6o" (the old one)."""
    for cfg in BASELINES:
        k = cfg["key"]
        missing = [f for f in (cfg["appliance"], cfg["runsc"]) if not os.path.exists(f)]
        for row in (1, 2, 6):
            if row not in ROWS:
                continue
            key = "%d%s" % (row, k)
            if missing:
                res[key] = {"error": "%s missing (scripts/bench makes it)" % missing[0]}
                continue
            log("row %s: %s, %s" % (key, "tool calls" if row == 6 else "cells",
                                    cfg["name"] % runsc_release(cfg["runsc"])))
            t = time.perf_counter()
            try:
                if row == 6:
                    rows_tools(work, res, cfg, {6})
                else:
                    res[key] = row_cells(work, 2 if row == 1 else 0, P["n"], cfg)
            except RowError as e:
                res[key] = {"error": str(e)}
            res.setdefault(key, {"error": "not run"})
            res[key]["seconds"] = time.perf_counter() - t
            if "error" in res[key]:
                log("row %s: ERROR %s" % (key, res[key]["error"]))


def runsc_release(path):
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "?"
    first = out.splitlines()[0] if out else "?"
    return first.replace("runsc version ", "")


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break

    def out(argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
            return r.stdout.strip().splitlines()[0] if r.stdout.strip() else "?"
        except OSError:
            return "?"
    commit = out(["git", "rev-parse", "--short", "HEAD"])
    if subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "pkg", "cmd", "images"],
                      cwd=ROOT).returncode != 0:
        commit += " (+ uncommitted changes in pkg/cmd/images)"
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "os": out(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
            "mem_total_mib": meminfo_kb("MemTotal") // 1024,
            "runsc": out([RUNSC, "--version"]), "platform": PLATFORM,
            "runsc_old": runsc_release(OLD_RUNSC) if os.path.exists(OLD_RUNSC) else None,
            "python_host": out([HOST_PY, "--version"]),
            "appliance_commit": commit, "image_digest": read_digest(),
            "loadavg_start": loadavg(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def fmt_ms(v):
    if v is None:
        return "-"
    if v < 10:
        return "%.2f" % v
    return "%.1f" % v if v < 100 else "%.0f" % v


def main():
    if os.geteuid() != 0:
        sys.exit("bench: run as root (scripts/bench)")
    for f in (APPLIANCE, TOY, os.path.join(ROOT, "build", "image.digest")):
        if not os.path.exists(f):
            sys.exit("bench: %s missing: run make bench" % f)
    t_begin = time.perf_counter()
    info = machine()
    digest = info["image_digest"]
    res = {}
    work = Work()

    def attempt(row, what, fn, force=False, key=None):
        if row not in ROWS and not force:
            return
        key = row if key is None else key
        log("row %s: %s" % (key, what))
        t = time.perf_counter()
        try:
            res[key] = fn()
        except RowError as e:
            res[key] = {"error": str(e)}
        except Exception as e:  # a harness fault in one row: show it, go on
            res[key] = {"error": "harness: %s: %s" % (type(e).__name__, e)}
            traceback.print_exc()
        res[key]["seconds"] = time.perf_counter() - t
        if "error" in res[key]:
            log("row %s: ERROR %s" % (key, res[key]["error"]))

    def booted(row, what, fn):
        if P["booted"]:
            attempt(row, what + ", every sandbox booted (runtime.restore false)", fn,
                    key="%db" % row)

    def before(row, what, fn):
        if row not in ROWS or P["before"] == "0":
            return
        key = "%dc" % row
        made = os.path.join(BEFORE_DIR, "commit")
        try:
            with open(made) as f:
                commit = f.read().strip()
        except OSError:
            res[key] = {"error": "%s missing: scripts/bench builds commit %s there"
                        % (made, P["before"])}
            log("row %s: ERROR %s" % (key, res[key]["error"]))
            return
        attempt(row, "%s, by the code before (commit %s)" % (what, commit[:12]), fn, key=key)
        res[key]["commit"] = commit

    try:
        # Rows 1 and 2 also give row 9's idle figures; with only 9 selected
        # the two appliances start, idle, and run no cell.
        for row, pool in ((1, 2), (2, 0)):
            if ROWS & {row, 9}:
                attempt(row, "%s cells (pool %d)" % ("warm" if pool else "cold", pool),
                        lambda pool=pool, row=row: row_cells(work, pool,
                                                             P["n"] if row in ROWS else 0),
                        force=True)
            if row == 1:  # beside row 1, before the cold cells
                attempt(11, "warm cells over Streamable HTTP (pool 2)",
                        lambda: row_http(work, P["n"]))
        attempt(3, "bare runsc run per cell", lambda: row_runsc(P["n"], digest))
        if P["docker"]:
            attempt(4, "docker run --runtime=runsc per cell", lambda: row_docker(P["n"], digest))
        elif 4 in ROWS:
            res[4] = {"error": "skipped (BENCH_DOCKER=0)"}
        attempt(5, "floor: persistent host worker", lambda: row_floor(work, P["floor_n"]))
        if 5 in ROWS:
            log("row 5s: floor, cells spaced %.1f s" % P["spacing_s"])
            try:
                res["5s"] = row_floor(work, P["n"], P["spacing_s"])
            except RowError as e:
                res["5s"] = {"error": str(e)}
        if ROWS & {6, 7}:
            log("rows 6, 7: tool calls through the toy server")
            t = time.perf_counter()
            try:
                rows_tools(work, res)
            except RowError as e:
                for r in ROWS & {6, 7}:
                    res[r] = {"error": str(e)}
            for r in ROWS & {6, 7}:
                res.setdefault(r, {"error": "not run"})
                res[r]["seconds"] = time.perf_counter() - t
                if "error" in res[r]:
                    log("row %d: ERROR %s" % (r, res[r]["error"]))
        attempt(12, "tool calls to an HTTP upstream (mcphttp.py)", lambda: row_web(work))
        attempt(8, "sustained load", lambda: row_load(work))
        booted(8, "sustained load", lambda: row_load(work, BOOTED))
        attempt(13, "arrival-rate sweep (open loop, pool 2)", lambda: row_sweep(work))
        if 14 in ROWS:
            bound, how = p95_bound(res)
            log("row 14: p95 bound %.1f ms (%s)" % (bound, how))
            attempt(14, "sustained maximum rate", lambda: row_maxrate(work, bound, how))
        attempt(15, "CPU per cell", lambda: row_cpu(work))
        booted(15, "CPU per cell", lambda: row_cpu(work, BOOTED))
        before(8, "sustained load", lambda: row_load(work, None, BEFORE))
        before(15, "CPU per cell", lambda: row_cpu(work, None, BEFORE))
        attempt(10, "a cell beside a flooding one", lambda: row_fair(work))
        attempt(16, "upstream answers: dropped and kept MB/s, against cat",
                lambda: row_upstream(work))
        attempt(17, "a stdio appliance that only answers server/discover",
                lambda: row_discover(work))
        attempt(18, "a session's cells (thawed, run, frozen again)",
                lambda: row_session(work, P["n"]))
        attempt(19, "the data image: cells, imports, a groupby against the host, memory",
                lambda: row_data(work, P["n"]))
        attempt(20, "replicas behind HAProxy: cells/s with 1, 2, 3, the balancer's latency",
                row_cluster)
        if P["baselines"]:
            baselines(work, res)
    finally:
        work.cleanup()
    report(info, res, time.perf_counter() - t_begin)


def report(info, res, total_s):
    mem_p2 = (res.get(1) or {}).get("mem_idle")
    mem_p0 = (res.get(2) or {}).get("mem_idle")
    rows = []  # (key, label, stats or None, note)

    def add(key, label, r, times_key="times", note=""):
        if r is None:
            return
        if "error" in r:
            rows.append((key, label, None, "ERROR: " + r["error"]))
            return
        st = stats(r[times_key])
        r["stats" if times_key == "times" else "stats_" + times_key] = st
        rows.append((key, label, st, note))

    n = P["n"]
    add("1", "warm cell, print(1), pool 2, MCP stdio", res.get(1) if 1 in ROWS else None,
        note="spaced %.1f s" % P["spacing_s"])
    add("11", "warm cell, print(1), pool 2, Streamable HTTP", res.get(11),
        note="spaced %.1f s, one keep-alive connection" % P["spacing_s"])
    add("2", "cold cell, print(1), pool 0, MCP stdio", res.get(2) if 2 in ROWS else None,
        note="spaced %.1f s" % P["spacing_s"])
    add("3", "bare runsc run + runner, to answer", res.get(3),
        note="fresh bundle per cell")
    if res.get(3) and "error" not in res[3]:
        add("3'", "  same, to exit and bundle removed", res[3], "total")
    add("4", "docker run --runtime=runsc, to answer", res.get(4),
        note="dockerd %s, %s" % (res[4].get("server_version"), res[4].get("storage_driver"))
        if res.get(4) and "error" not in res[4] else "")
    if res.get(4) and "error" not in res[4]:
        add("4'", "  same, to docker run exit (--rm)", res[4], "total")
    add("5", "floor: host worker, one pipe, runner.py", res.get(5), note="unsandboxed")
    add("5s", "  same, cells spaced like rows 1 and 2", res.get("5s"),
        note="spaced %.1f s" % P["spacing_s"])
    r18 = res.get(18)
    if r18 and "error" not in r18 and r18["times"]:
        st18 = stats(r18["times"])
        ratios = []
        for key, name in (("5s", "row 5s"), (1, "row 1")):
            base = (res.get(key) or {}).get("stats")
            if base:
                ratios.append("%.1fx %s (p95 %.1fx)" % (st18["median_ms"] / base["median_ms"],
                                                       name, st18["p95_ms"] / base["p95_ms"]))
        note = "spaced %.1f s; %s; frozen session holds %s MiB" % (
            P["spacing_s"], ", ".join(ratios) or "no baseline row",
            "%.1f" % r18["frozen_mib"] if r18.get("frozen_mib") is not None else "?")
    else:
        note = ""
    add("18", "session cell, print(x), frozen between, stdio", r18, note=note)
    r19 = res.get(19)
    if r19 is not None and "error" in r19:
        rows.append(("19", "data image", None, "ERROR: " + r19["error"]))
    elif r19 is not None:
        st1 = (res.get(1) or {}).get("stats") if 1 in ROWS else None
        add("19", "data image: warm cell, print(1), pool 2", r19,
            note=("%.1fx row 1" % (stats(r19["print1"])["median_ms"] / st1["median_ms"]))
            if st1 else "")
        add("19a", "  warm `import pandas`, no preload", r19, "import")
        add("19b", "  warm `import pandas`, preload numpy, pandas, pyplot", r19, "import_pre")
        cell, host = (statistics.median(r19[k]) for k in ("groupby_cell_ms", "groupby_host_ms"))
        rows.append(("19c", "  groupby-sum, 1M rows, in the cell", {
            "median_ms": cell, "p95_ms": max(r19["groupby_cell_ms"]),
            "n": len(r19["groupby_cell_ms"])}, "%.2fx the host's default (19d)" % (cell / host)))
        tuned = statistics.median(r19["groupby_host_tuned_ms"])
        rows.append(("19d", "  same program, host python3, unsandboxed", {
            "median_ms": host, "p95_ms": max(r19["groupby_host_ms"]),
            "n": len(r19["groupby_host_ms"])}, "glibc's default malloc"))
        rows.append(("19d'", "  same, with the runner's malloc settings", {
            "median_ms": tuned, "p95_ms": max(r19["groupby_host_tuned_ms"]),
            "n": len(r19["groupby_host_tuned_ms"])},
            "the cell is %.2fx this (goal <= 1.5x)" % (cell / tuned)))
        rows.append(("19e", "  PSS per warm sandbox: data + preload / data / cell image",
                     None, "%.1f / %.1f / %.1f MiB" % (
                         r19["sandbox_kb"] / 1024, r19["sandbox_kb_plain"] / 1024,
                         r19["sandbox_kb_cell"] / 1024)))
        rows.append(("19f", "  image: packed size, build time", None, "%.0f MiB, %s" % (
            r19["packed_mib"], "%d s" % r19["build_s"] if r19["build_s"] else "?")))
    r20 = res.get(20)
    if r20 is not None:
        label = ("via HAProxy, on %d cores: overhead, not scale" % info["cores"]
                 if info["cores"] <= 2 else "via HAProxy, one host of %d cores" % info["cores"])
        if "error" in r20:
            rows.append(("20", label, None, "ERROR: " + r20["error"]))
        else:
            base = r20["direct"]["cells_per_s"]

            def lat(st, n):
                return {"median_ms": st["p50"], "p95_ms": st["p95"], "n": n}
            rows.append(("20", label, None, "%d clients, print() cells, %g s a stage; 3 replicas"
                         " alive throughout" % (r20["clients"], r20["stage_s"])))
            d1, d2 = r20["direct_stages"]
            rows.append(("20a", "  straight to one replica (baseline), cells/s",
                         lat(r20["direct"]["latency_ms"], r20["direct"]["cells"]),
                         "%.2f cells/s (mean of %.2f before, %.2f after)" % (
                             base, d1["cells_per_s"], d2["cells_per_s"])))
            for i, k in enumerate(("1", "2", "3")):
                v = r20["via"][k]
                rows.append(("20" + "bcd"[i], "  through HAProxy, %s replica%s, cells/s" % (
                    k, "s" if k != "1" else ""), lat(v["latency_ms"], v["cells"]),
                    "%.2f cells/s, %.2fx baseline" % (v["cells_per_s"], v["cells_per_s"] / base)))
            pr = r20["probe"]
            rows.append(("20e", "  HAProxy's added latency per request",
                         {"median_ms": pr["added_ms"], "p95_ms": None, "n": pr["n"]},
                         "server/discover: %.3f ms through, %.3f ms straight (medians)" % (
                             pr["via_median_ms"], pr["direct_median_ms"])))
    def add6(key, r6, what, direct="  same, host client direct to toy-server",
             direct_note="bench/direct_client.py"):
        if r6 is None:
            return
        if "error" in r6:
            rows.append((key, what, None, "ERROR: " + r6["error"]))
            return
        c = statistics.median(r6["cell_per_call_us"]) / 1e3
        d = statistics.median(r6["direct_per_call_us"]) / 1e3
        rows.append((key, what, {"median_ms": c, "p95_ms": max(r6["cell_per_call_us"]) / 1e3,
                                 "n": len(r6["cell_per_call_us"])},
                     "%d calls/cell; p95 col = worst cell" % r6["calls"]))
        rows.append((key + "d", direct,
                     {"median_ms": d, "p95_ms": max(r6["direct_per_call_us"]) / 1e3,
                      "n": len(r6["direct_per_call_us"])}, direct_note))
        rows.append((key + "-", "  overhead per call (cell - direct)",
                     {"median_ms": c - d, "p95_ms": None, "n": None}, ""))

    add6("6", res.get(6), "tool call toy.echo, per call in cell")
    # row 12 right below row 6: the same loop, over HTTP instead of stdio
    add6("12", res.get(12), "tool call web.echo over HTTP, per call in cell",
         "  direct HTTP client, per call", "bench/http_direct.py, %s"
         % (res[12].get("server", "") if res.get(12) else ""))
    add("7", "gather %d x toy.sleep(ms=%d), wall in cell" % (P["gather"], P["gather_ms"]),
        res.get(7), note="concurrency %s" % (res[7].get("concurrency") if res.get(7) else ""))
    r10 = res.get(10)
    if r10 is not None:
        if "error" in r10:
            rows.append(("10", "victim per call beside an idle cell", None, "ERROR: " + r10["error"]))
        else:
            for key, kind, what in (("10", "idle", "an idle cell"), ("10f", "flood", "a flooding cell")):
                rows.append((key, "victim toy.echo per call beside " + what,
                             {"median_ms": statistics.median(r10[kind]) / 1e3,
                              "p95_ms": max(r10[kind]) / 1e3, "n": len(r10[kind])},
                             "%d calls/cell; p95 col = worst cell%s" % (
                                 r10["calls"], "" if kind == "idle" or all(r10["covered"])
                                 else "; the flood ended before the victim")))
    r8 = res.get(8)
    add("8", "load: %d cells, %d in flight, latency" % (P["load_n"], P["load_clients"]), r8,
        note=("%.2f cells/s, pool %d" % (r8["cells_per_s"], r8["pool"]))
        if r8 and "error" not in r8 else "")

    r8b = res.get("8b")
    add("8b", "load, as row 8, every sandbox booted", r8b,
        note=("%.2f cells/s, runtime.restore false" % r8b["cells_per_s"])
        if r8b and "error" not in r8b else "")

    r8c = res.get("8c")
    add("8c", "load, as row 8, by the code before", r8c,
        note=("%.2f cells/s, commit %s" % (r8c["cells_per_s"], r8c["commit"][:12]))
        if r8c and "error" not in r8c else "")

    p95_1 = (res[1].get("stats") or {}).get("p95_ms") if res.get(1) and 1 in ROWS else None

    def vs1(st):
        return ("p95 %.1fx row 1's" % (st["p95_ms"] / p95_1)) if st and p95_1 else ""

    r13 = res.get(13)
    if r13 is not None:
        if "error" in r13:
            rows.append(("13", "sweep: open-loop rates, pool 2", None, "ERROR: " + r13["error"]))
        else:
            for i, rr in enumerate(r13["rates"]):
                rows.append(("13" + "abcdefgh"[i], "sweep: %g cells/s open loop, pool 2" % rr["rate"],
                             rr["stats"], "%s; sends <= %.1f ms late" % (vs1(rr["stats"]),
                                                                         rr["late_ms"])))
            b = r13["burst"]
            rows.append(("13" + "abcdefgh"[len(r13["rates"])],
                         "sweep: burst of %d sent at once, pool 2" % b["n"], b["stats"],
                         "%s; cells %d; pool: %s" % (vs1(b["stats"]), max(4, min(64, P["burst"])),
                                                     r13.get("pool_log", "?"))))
    r14 = res.get(14)
    if r14 is not None:
        if "error" in r14:
            rows.append(("14", "max steady rate within the p95 bound", None,
                         "ERROR: " + r14["error"]))
        else:
            r14["stats"] = stats(r14["times"])
            rows.append(("14", "max steady rate, p95 <= %.1f ms" % r14["bound_ms"], r14["stats"],
                         "%s cells/s (%s fails)%s" % (
                             "%.2f" % r14["rate"] if r14["rate"] else "none",
                             "%.2f" % r14["fail_rate"] if r14["fail_rate"] else "no rate",
                             "; row 8: %.2f cells/s" % r8["cells_per_s"]
                             if r8 and "error" not in r8 else "")))
    r15 = res.get(15)

    def ms_or_q(r, k):
        return "%.0f" % r[k] if k in r else "?"

    def cpu_row(key, what, tail):
        r = res.get(key)
        if r is not None:
            rows.append((str(key), "CPU per warm cell, " + what, None,
                         "ERROR: " + r["error"] if "error" in r else
                         "%.0f ms CPU per cell, boot %s ms%s" % (r["total_ms"], ms_or_q(r, "boot_ms"),
                                                                 tail(r))))
    cpu_row(15, "all processes", lambda r: ": see row 15 below")
    cpu_row("15b", "every sandbox booted",
            lambda r: ", refill %s ms in cgroups" % ms_or_q(r, "refill_cg_ms"))
    cpu_row("15c", "by the code before", lambda r: ", commit %s" % r["commit"][:12])

    names = {cfg["key"]: cfg["name"] % (info["runsc_old"] if cfg["runsc"] == OLD_RUNSC
                                         else info["runsc"].replace("runsc version ", ""))
             for cfg in BASELINES}
    for cfg in BASELINES:
        k = cfg["key"]
        add("1" + k, "warm cell, pool 2: " + names[k], res.get("1" + k))
        add("2" + k, "cold cell, pool 0: " + names[k], res.get("2" + k))
        add6("6" + k, res.get("6" + k), "tool call: " + names[k])

    out = []
    w = out.append
    w("appliance benchmark (make bench)")
    w("  cpu: %s, %d cores, %d MiB; kernel %s; %s" % (info["cpu"], info["cores"],
                                                    info["mem_total_mib"], info["kernel"], info["os"]))
    w("  runsc: %s, platform %s (baselines: the same on ptrace; %s on ptrace); host python: %s"
      % (info["runsc"], info["platform"], info["runsc_old"] or "no old runsc",
         info["python_host"]))
    w("  appliance %s, image %s" % (info["appliance_commit"], info["image_digest"][:19] + "..."))
    info["loadavg_end"] = loadavg()
    w("  load average at start %s, at end %s (other work on the machine skews every row)"
      % (info["loadavg_start"], info["loadavg_end"]))
    w("  cells per row %d (floor %d, load %d), warm-up %d, spacing %.1f s" % (
        n, P["floor_n"], P["load_n"], P["warmup"], P["spacing_s"]))
    w("")
    w("%-4s %-46s %5s %10s %10s  %s" % ("row", "what", "n", "median ms", "p95 ms", "note"))
    w("-" * 104)
    for key, label, st, note in rows:
        if st is None:
            w("%-4s %-46s %5s %10s %10s  %s" % (key, label, "", "", "", note))
        else:
            w("%-4s %-46s %5s %10s %10s  %s" % (key, label, st["n"] if st["n"] else "",
                                               fmt_ms(st["median_ms"]), fmt_ms(st["p95_ms"]), note))

    # row 9: memory
    w("")
    w("row 9: memory")
    mem = {}
    if mem_p0 or mem_p2:
        for name, m in (("pool 0", mem_p0), ("pool 2", mem_p2)):
            if m:
                w("  appliance idle VmRSS, %s: %.1f MiB; below it %d processes, RSS %.1f MiB, "
                  "PSS %.1f MiB %s" % (name, m["appliance_rss_kb"] / 1024, m["children"],
                                       m["children_rss_kb"] / 1024, m["children_pss_kb"] / 1024,
                                       json.dumps(m["children_by_name"], sort_keys=True)))
        for name, r in (("pool 0", res.get(2)), ("pool 2", res.get(1))):
            if r and "mem_after" in r and r["times"]:
                w("  appliance VmRSS after %d cells, %s: %.1f MiB" % (
                    len(r["times"]), name, r["mem_after"]["appliance_rss_kb"] / 1024))
        if mem_p0 and mem_p2:
            per_pss = (mem_p2["children_pss_kb"] - mem_p0["children_pss_kb"]) / 2 / 1024
            per_rss = (mem_p2["children_rss_kb"] - mem_p0["children_rss_kb"]) / 2 / 1024
            per_avail = (mem_p0["mem_available_kb"] - mem_p2["mem_available_kb"]) / 2 / 1024
            mem = {"per_warm_sandbox_pss_mib": per_pss, "per_warm_sandbox_rss_mib": per_rss,
                   "per_warm_sandbox_memavailable_mib": per_avail}
            if mem_p2["children"] == 0:
                w("  per warm sandbox: no pooled sandbox seen with pool 2 (warm pool not active)")
            else:
                w("  per warm sandbox (pool 2 - pool 0, / 2): PSS %.1f MiB, RSS sum %.1f MiB, "
                  "MemAvailable drop %.1f MiB" % (per_pss, per_rss, per_avail))
        idle = [m["appliance_rss_kb"] / 1024 for m in (mem_p0, mem_p2) if m]
        mem["idle_rss_mib"] = max(idle) if idle else None
    else:
        w("  (not measured: %s)" % ((res.get(1) or {}).get("error") or
                                     (res.get(2) or {}).get("error") or
                                     "rows 1, 2 and 9 not selected"))

    # rows 13 to 15
    if r13 and "error" not in r13 or r14 and "error" not in r14:
        w("")
        w("rows 13, 14: open-loop arrival rates (pool 2, cells %d, one MCP stdio connection)"
          % max(4, min(64, P["burst"])))
        if p95_1:
            w("  row 1 (one at a time, %.1f s apart): median %s ms, p95 %s ms" % (
                P["spacing_s"], fmt_ms(res[1]["stats"]["median_ms"]), fmt_ms(p95_1)))
    if r14 and "error" not in r14:
        w("  row 14 bound: p95 <= %.1f ms (%s); probes of %d cells:" % (
            r14["bound_ms"], r14["bound_how"], P["probe_n"]))
        for pr in r14["probes"]:
            w("    %6.3f cells/s  median %7s  p95 %7s ms  %s" % (
                pr["rate"], fmt_ms(pr["stats"]["median_ms"]), fmt_ms(pr["stats"]["p95_ms"]),
                "pass" if pr["ok"] else "over"))
        w("  search: %.0f s" % r14["seconds"])
    if r15 is not None and "error" not in r15:
        w("")
        w("row 15: CPU (user+sys) of the appliance and everything below it, exact (rusage)")

        def ms(k, fmt="%.0f ms"):
            return fmt % r15[k] if r15.get(k) is not None else "n/a"
        w("  per warm cell: %s (user %s, sys %s): %d print(1) cells %.1f s apart, minus a pool-2"
          % (ms("total_ms"), ms("total_user_ms"), ms("total_sys_ms"), r15["cells"],
             r15["spacing_s"]))
        w("    appliance with no cell living as long (%.1f s); in the sandboxes' cgroups: %s"
          % (r15["batch_s"], ms("total_cg_ms")))
        st = stats(r15["times"])
        w("    wall: median %s ms to the answer, p95 %s ms; one cell every %.1f s (%.0f%% of a"
          " core)" % (fmt_ms(st["median_ms"]), fmt_ms(st["p95_ms"]), r15["spacing_s"],
                      r15["total_ms"] / 10 / r15["spacing_s"]))
        if r15.get("no_cgroup"):
            w("  " + r15["no_cgroup"])
        w("  boot only, one pooled sandbox to ready and through the runner's warm-up: %s"
          % ms("boot_ms"))
        if "boot_ms" in r15:
            w("    (mean of %d starts of pool 2 over pool 0: %s; %s in its cgroup, %s in runsc"
              " run and the appliance;" % (r15["boot_runs"], ", ".join(
                  "%.0f" % b for b in r15["boot_ms_each"]), ms("boot_cg_ms"),
                  ms("boot_outside_ms")))
            w("    both pooled sandboxes booted %s s after the reaper started)"
              % ms("boot_wall_s", "%.2f"))
        w("  teardown of a pooled sandbox at exit: %s; per cell over boot + teardown: %s"
          % (ms("teardown_ms"), "%+.0f ms" % (r15["total_ms"] - r15["boot_ms"] -
                                              r15["teardown_ms"]) if "boot_ms" in r15 else "n/a"))
        w("  refill after a cell, from its answer until the cgroups are idle again: %s wall,"
          " %s CPU in them (median of %s)" % (ms("refill_wall_ms"), ms("refill_cg_ms"),
                                             r15.get("refills_measured")))
        w("  an idle pooled sandbox: %s per second (its cgroup alone: %s); appliance with"
          " pool 0, start to exit: %s" % (ms("idle_ms_per_s", "%.1f ms"),
                                          ms("idle_cg_ms_per_s", "%.1f ms"), ms("startup_ms")))
        if r15["stragglers"]:
            w("  (%d processes outlived the appliance and were reaped by the reaper)"
              % r15["stragglers"])

    r16 = res.get(16)
    if r16 is not None:
        w("")
        if "error" in r16:
            w("row 16: answers from a stdio server: ERROR: %s" % r16["error"])
        else:
            m = {k: statistics.median(r16[k]) for k in
                 ("cat_mb_s", "toy_mb_s", "dropped_mb_s", "gathered_mb_s", "kept_mb_s",
                  "alone_s", "beside_s")}
            w("row 16: answers from a stdio server, MB/s (median of 3; %d answers of %d MiB,"
              " %d answers of %d KiB)" % (r16["n"], r16["big"] // MIB, r16["n"],
                                          r16["kept_size"] // 1024))
            w("  cat of the same bytes through a pipe:            %7.0f MB/s" % m["cat_mb_s"])
            w("  the toy server answering them, read by cat:      %7.0f MB/s" % m["toy_mb_s"])
            w("  appliance, dropped (over the cap), one at a time: %6.0f MB/s (%.2fx cat)"
              % (m["dropped_mb_s"], m["dropped_mb_s"] / m["cat_mb_s"]))
            w("  appliance, dropped, 16 in flight:                %7.0f MB/s (%.2fx cat)"
              % (m["gathered_mb_s"], m["gathered_mb_s"] / m["cat_mb_s"]))
            w("  appliance, kept (into the cell), one at a time:  %7.1f MB/s"
              % m["kept_mb_s"])
            w("  another cell's 100 small calls: alone %.0f ms, beside 200 gathered answers"
              " of 16 MiB %.0f ms" % (m["alone_s"] * 1e3, m["beside_s"] * 1e3))

    r17 = res.get(17)
    if r17 is not None:
        w("")
        if "error" in r17:
            w("row 17: a process that only answers server/discover: ERROR: %s" % r17["error"])
        else:
            d = statistics.median(r17["discover_cpu_s"]) * 1e3
            t = statistics.median(r17["tools_cpu_s"]) * 1e3
            w("row 17: CPU of a stdio appliance, start to exit, its input a file (median of %d;"
              " toy server, pool 2)" % r17["runs"])
            w("  server/discover only:                %7.1f ms CPU (target < 50 ms); servers or"
              " sandboxes started in %d of %d" % (d, r17["discover_started"], r17["runs"]))
            w("  server/discover, then tools/list:    %7.1f ms CPU (everything started)" % t)
            w("  ratio:                               %7.3fx" % (d / t))

    # ratios and targets
    def med(k):
        r = res.get(k)
        return r["stats"]["median_ms"] if r and "stats" in r and r["stats"] else None

    r1, r2, r3, r4, r5 = med(1), med(2), med(3), med(4), med(5)
    ratios = {}
    w("")
    w("ratios (medians)")

    def ratio(name, a, b, fmt="%.2fx"):
        v = a / b if a is not None and b else None
        ratios[name] = v
        w("  %-46s %s" % (name, fmt % v if v is not None else "n/a"))
        return v

    def field(k, f):
        r = res.get(k)
        return r.get(f) if r and "error" not in r else None
    ratio("load cells/s, restored (8) / booted (8b)", field(8, "cells_per_s"),
          field("8b", "cells_per_s"))
    ratio("CPU per warm cell, restored (15) / booted (15b)", field(15, "total_ms"),
          field("15b", "total_ms"))
    ratio("load cells/s, now (8) / the code before (8c)", field(8, "cells_per_s"),
          field("8c", "cells_per_s"))
    ratio("CPU per warm cell, now (15) / the code before (15c)", field(15, "total_ms"),
          field("15c", "total_ms"))
    ratio("warm over HTTP (11) / over stdio (1)", med(11), r1)

    def per_call(k, side):
        r = res.get(k)
        xs = (r or {}).get(side + "_per_call_us")
        return statistics.median(xs) if xs else None

    ratio("tool call in cell, HTTP (12) / stdio (6)", per_call(12, "cell"), per_call(6, "cell"))
    ratio("direct client, HTTP (12d) / stdio (6d)", per_call(12, "direct"),
          per_call(6, "direct"))
    ratio("warm (1) / floor (5)", r1, r5)
    ratio("warm (1) / spaced floor (5s)", r1, med("5s"))
    ratio("cold (2) / warm (1)", r2, r1)
    ratio("bare runsc (3) / warm (1)", r3, r1)
    ratio("docker (4) / warm (1)", r4, r1)
    ratio("cold (2) / bare runsc (3)", r2, r3)
    ratio("docker (4) / bare runsc (3)", r4, r3)
    ratio("warm, new runsc ptrace (1p) / systrap (1)", med("1p"), r1)
    ratio("warm, old runsc ptrace (1o) / systrap (1)", med("1o"), r1)
    ratio("cold, new runsc ptrace (2p) / systrap (2)", med("2p"), r2)
    ratio("cold, old runsc ptrace (2o) / systrap (2)", med("2o"), r2)
    ratio("warm, old runsc ptrace (1o) / floor (5)", med("1o"), r5)
    if r13 and "error" not in r13:
        for rr in r13["rates"]:
            ratio("p95 at %g cells/s (13) / row 1 p95" % rr["rate"], rr["stats"]["p95_ms"], p95_1)
        ratio("p95 of a burst of %d (13) / row 1 p95" % r13["burst"]["n"],
              r13["burst"]["stats"]["p95_ms"], p95_1)
    if r14 and "error" not in r14:
        ratio("max rate within bound (14) / row 8 cells/s", r14["rate"],
              r8["cells_per_s"] if r8 and "error" not in r8 else None)
    r20 = res.get(20)
    if r20 and "error" not in r20:
        for i, k in enumerate(("1", "2", "3")):
            ratio("cells/s via HAProxy, %s replica%s (20%s) / straight (20a)" % (
                k, "s" if k != "1" else "", "bcd"[i]), r20["via"][k]["cells_per_s"],
                r20["direct"]["cells_per_s"])
        ratio("request via HAProxy / straight (20e, medians)", r20["probe"]["via_median_ms"],
              r20["probe"]["direct_median_ms"])
    ratios["victim beside flood / beside idle (10f / 10)"] = (res.get(10) or {}).get("ratio")
    w("  %-46s %s" % ("victim beside flood / beside idle (10f / 10)",
                      "%.2fx" % ratios["victim beside flood / beside idle (10f / 10)"]
                      if ratios["victim beside flood / beside idle (10f / 10)"] else "n/a"))

    def overhead(k):
        r = res.get(k)
        return r["overhead_us"] / 1e3 if r and "overhead_us" in r else None

    for k, what in ((6, "systrap"), (12, "HTTP upstream"), ("6p", "new runsc ptrace"),
                    ("6o", "old runsc ptrace")):
        v = overhead(k)
        ratios["row %s overhead ms" % k] = v
        w("  %-46s %s" % ("tool-call overhead, %s (%s)" % (what, k),
                          "%.3f ms" % v if v is not None else "n/a"))

    targets = []

    def target(name, ok, value):
        status = "n/a " if ok is None else ("pass" if ok else "MISS")
        targets.append({"target": name, "status": status.strip(), "value": value})
        w("  [%s] %-44s %s" % (status, name, value))

    w("")
    w("targets")
    target("row 1 median <= 10 ms", None if r1 is None else r1 <= 10,
           "%s ms" % fmt_ms(r1) if r1 is not None else "n/a")
    v = ratios["warm (1) / floor (5)"]
    target("row 1 <= 3x row 5", None if v is None else v <= 3, "%.1fx" % v if v else "n/a")
    v = ratios["bare runsc (3) / warm (1)"]
    target("row 1 >= 20x faster than row 3", None if v is None else v >= 20,
           "%.1fx" % v if v else "n/a")
    v = ratios["docker (4) / warm (1)"]
    target("row 1 >= 50x faster than row 4", None if v is None else v >= 50,
           "%.1fx" % v if v else "n/a")
    ov = res[6]["overhead_us"] / 1e3 if res.get(6) and "overhead_us" in res[6] else None
    target("row 6 overhead <= 0.3 ms per call", None if ov is None else ov <= 0.3,
           "%.3f ms" % ov if ov is not None else "n/a")
    fr = ratios["victim beside flood / beside idle (10f / 10)"]
    target("row 10f <= 3x row 10", None if fr is None else fr <= 3,
           "%.2fx" % fr if fr else "n/a")
    g = med(7)
    target("row 7 < 0.5 s", None if g is None else g < 500,
           "%.3f s" % (g / 1e3) if g is not None else "n/a")
    idle = mem.get("idle_rss_mib")
    target("idle RSS < 10 MiB", None if idle is None else idle < 10,
           "%.1f MiB" % idle if idle is not None else "n/a")
    w("")
    w("whole run: %.0f s; figures in %s" % (total_s, os.path.relpath(P["json"], ROOT)))
    print("\n".join(out))

    doc = {"machine": info, "params": P, "rows": {str(k): v for k, v in res.items()},
           "memory": mem, "ratios": ratios, "targets": targets, "seconds": total_s,
           "table": [{"row": k, "what": label, "stats": st, "note": note}
                     for k, label, st, note in rows]}
    os.makedirs(os.path.dirname(P["json"]), exist_ok=True)
    tmp = P["json"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, P["json"])


if __name__ == "__main__":
    main()
