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

Rows 1 to 8, 11 and 12 run on the system's runsc with the systrap platform (the
appliance's default). With BENCH_BASELINES=1 (the default) rows 1, 2 and 6
run again as 1p, 2p, 6p (the same runsc on ptrace) and 1o, 2o, 6o (Debian
12's own runsc, 20221219.0, on ptrace, under an appliance built to accept
it; scripts/bench fetches and builds both into build/bench-old/).

A row that cannot run shows its error and the others go on. Parameters are
environment variables (scripts/bench lists them). The figures go to stdout
as a table, and to build/bench.json (BENCH_JSON).
"""

import hashlib
import http.client
import io
import json
import os
import platform
import queue
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
    "rows": os.environ.get("BENCH_ROWS", "1,2,3,4,5,6,7,8,9,10,11,12"),
    "fair_calls": env_int("BENCH_FAIR_CALLS", 1000),  # row 10
    "fair_runs": env_int("BENCH_FAIR_RUNS", 3),
    "audit": os.environ.get("BENCH_AUDIT", ""),      # "", "read" or "write": see toy_policy
    "baselines": env_int("BENCH_BASELINES", 1),     # rows 1, 2, 6 on ptrace, old and new runsc
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


def read_digest():
    with open(os.path.join(ROOT, "build", "image.digest")) as f:
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
               "image": {"layout": LAYOUT, "digest": self.digest},
               "runtime": {"runsc": cfg["runsc"], "platform": cfg["platform"]},
               "limits": limits}
        doc.update(extra or {})
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        r = subprocess.run([APPLIANCE, "sign", "--secret", self.key, path], capture_output=True)
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

    def __init__(self, work, sig, name):
        self.conn = LineConn(work.run_argv(sig), os.path.join(work.dir, name + ".stderr"),
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

    def cell(self, code, timeout=120):
        """run_python: (structuredContent, seconds); RowError unless it ran."""
        msg, dt = self.request("tools/call", {"name": "run_python", "arguments": {"code": code}},
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

def spaced_cells(m, n):
    """The warm-up, then n print(1) cells, spacing_s apart: their times."""
    for _ in range(P["warmup"]):
        check_print1(m.cell("print(1)")[0])
        time.sleep(P["spacing_s"])
    times = []
    for i in range(n):
        sc, dt = m.cell("print(1)")
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


# ---- row 8: sustained load ----------------------------------------------------------------------

def row_load(work):
    n, clients = P["load_n"], P["load_clients"]
    m = Mcp(work, work.policy({"pool": P["load_pool"], "cells": clients, "deadline_s": 120}),
            "load")
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

    def attempt(row, what, fn, force=False):
        if row not in ROWS and not force:
            return
        log("row %d: %s" % (row, what))
        t = time.perf_counter()
        try:
            res[row] = fn()
        except RowError as e:
            res[row] = {"error": str(e)}
        except Exception as e:  # a harness fault in one row: show it, go on
            res[row] = {"error": "harness: %s: %s" % (type(e).__name__, e)}
            traceback.print_exc()
        res[row]["seconds"] = time.perf_counter() - t
        if "error" in res[row]:
            log("row %d: ERROR %s" % (row, res[row]["error"]))

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
        attempt(10, "a cell beside a flooding one", lambda: row_fair(work))
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
