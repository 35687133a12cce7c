"""gatewaykit.py: `appliance run` with upstream servers for the integration
tests: signed policies naming build/toy-server and the npm reference
servers, the official SDK client (tests/mcp-client.mjs), and Session, raw
JSON-RPC lines that can overlap requests and see every notification.
"""

import json
import os
import pwd
import queue
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from policykit import Signer
from cellkit import ROOT

CLIENT = os.path.join(ROOT, "tests", "mcp-client.mjs")
TOY = os.path.join(ROOT, "build", "toy-server")
MODULES = os.path.join(ROOT, "tests", "node_modules", "@modelcontextprotocol")
EVERYTHING = os.path.join(MODULES, "server-everything", "dist", "index.js")
# The peers that need Node 22 (the conformance suite, the Inspector), with that node.
NODE22_BIN = os.path.join(ROOT, "tests", "node22", "node_modules", ".bin")
FILESYSTEM = os.path.join(MODULES, "server-filesystem", "dist", "index.js")

# ---- policies ------------------------------------------------------------------

_kit = Signer("appliance-gateway-test.")


def work():
    """A private directory with a trust dir and a signing key (made once)."""
    return _kit.dir()


UPSTREAM_USER = "appliance-upstream"


def upstream_user():
    """The uid and gid servers run as by default, the user made as the
    appliance makes it when it is missing."""
    try:
        pw = pwd.getpwnam(UPSTREAM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home",
                        "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                        UPSTREAM_USER], check=True)
        pw = pwd.getpwnam(UPSTREAM_USER)
    return pw.pw_uid, pw.pw_gid


# The uids servers take one of their own from (pkg/base/limits.h).
SERVER_UIDS = range(81920, 86016)


def share_with_servers(d):
    """Give directory d to the servers' group, as docs/upstream.md says to:
    each server runs as a uid of its own with the group appliance-upstream
    besides, so the group may read and write it, and what a server makes
    there stays in the group (setgid)."""
    os.chown(d, 0, upstream_user()[1])
    os.chmod(d, 0o2775)
    return d


def server_dir(prefix="appliance-served."):
    """A directory a confined server may write (its group's)."""
    return share_with_servers(os.path.realpath(tempfile.mkdtemp(prefix=prefix)))


def jail_processes(appliance_pid, server):
    """The processes of one server of appliance_pid, as the host sees them:
    {host pid: (pid in the server's own namespace, comm)}, found by the
    server's cgroup (upstream-NAME-PID-N)."""
    mark = "upstream-%s-%d-" % (server, appliance_pid)
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % entry) as f:
                if mark not in f.read():
                    continue
            with open("/proc/%s/status" % entry) as f:
                status = dict(line.split(":", 1) for line in f.read().splitlines()
                              if ":" in line)
        except OSError:
            continue
        found[int(entry)] = (int(status["NSpid"].split()[-1]), status["Name"].strip())
    return found


def node():
    path = shutil.which("node")
    assert path, "no node on PATH (scripts/install-deps installs it)"
    return os.path.realpath(path)


def need(path):
    assert os.path.exists(path), "missing %s (make build/toy-server; npm ci in tests/)" % path
    return path


def toy_server(*args, env=None):
    srv = {"command": [need(TOY), *args]}
    if env:
        srv["env"] = env
    return srv


def everything_server(env=None):
    srv = {"command": [node(), need(EVERYTHING), "stdio"]}
    if env:
        srv["env"] = env
    return srv


def policy(servers, tools, roles, role, limits=None):
    """A freshly signed policy (serial above every earlier one) whose stdio
    client gets role."""
    return _kit.policy(dict({"deadline_s": 30}, **(limits or {})), servers=servers, tools=tools,
                       roles=roles, clients={"default_role": role})


def toy_policy(role_tools=("toy.*",), write=False, limits=None, args=()):
    """The toy as server `toy`: every tool allowed by `tools` (the reads by
    the wildcard, write_note as a write), role `r` with role_tools."""
    return policy({"toy": toy_server(*args)},
                  {"toy.*": {"access": "read"}, "toy.write_note": {"access": "write"}},
                  {"r": {"tools": list(role_tools), "write": write}}, "r", limits)


def run_argv(sig):
    return _kit.argv(sig)


def code(src):
    return {"name": "run_python", "arguments": {"code": src}}


def sdk(sig, calls, env=None, timeout=180):
    """tests/mcp-client.mjs against `appliance run`; env (a dict) is added to
    the appliance's environment through /usr/bin/env (the SDK gives its
    child only a short default environment)."""
    argv = [node(), CLIENT]
    for c in calls:
        argv += ["--call", json.dumps(c)]
    wrap = ["/usr/bin/env"] + ["%s=%s" % kv for kv in sorted(env.items())] if env else []
    r = subprocess.run(argv + ["--timeout", "60000", "--"] + wrap + run_argv(sig),
                       capture_output=True, timeout=timeout)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-4000:]
    return json.loads(r.stdout)


# ---- serving HTTP ----------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Logged:
    """`appliance run` with policy sig (and extra arguments), no client on its
    stdio, its stderr kept (log()) and waited on (wait_log)."""

    WAIT_S = 120  # wait_log's default

    def __init__(self, sig, extra=()):
        self.proc = subprocess.Popen(run_argv(sig) + list(extra), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.lines = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace"))

    def log(self):
        return "".join(self.lines)

    def wait_log(self, text, timeout=None):
        deadline = time.time() + (timeout or self.WAIT_S)
        while text not in self.log():
            assert self.proc.poll() is None, "appliance exited; log:\n" + self.log()
            assert time.time() < deadline, "no %r in the log:\n%s" % (text, self.log())
            time.sleep(0.05)


class Served(Logged):
    """`appliance run` of sig serving HTTP on 127.0.0.1:port (the policy's
    listener), with extra arguments; its log kept, its start awaited."""

    WAIT_S = 60

    def __init__(self, sig, port, extra=(), timeout=60):
        super().__init__(sig, extra)
        self.port = port
        self.wait_log("serving MCP over HTTP at 127.0.0.1:%d/mcp" % port, timeout)

    def stop(self, drain=False):
        """SIGTERM: over HTTP the appliance drains (its runs in flight
        end first); unless drain, SIGINT right after stops it at once."""
        self.proc.send_signal(signal.SIGTERM)
        if not drain and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        rc = self.proc.wait(timeout=60)
        assert rc == 0, "exit %d; log:\n%s" % (rc, self.log())


# ---- a raw JSON-RPC session ------------------------------------------------------

class Session:
    """`appliance run` as a child spoken to in JSON lines. A reader thread
    queues what comes out; answers are matched by id, notifications kept in
    order in self.notes. Requests may overlap (start() then wait())."""

    def __init__(self, sig, env=None):
        self.proc = subprocess.Popen(run_argv(sig), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.lines = queue.Queue()
        self.answers = {}
        self.nulls = []  # answers with id null, in order
        self.notes = []
        self.stderr = []
        self.next_id = 1
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append),
                         daemon=True).start()
        init = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                           "clientInfo": {"name": "test_gateway",
                                                          "version": "0"}})
        assert init["result"]["capabilities"]["tools"]["listChanged"] is True, init
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # then tools/list, as MCP clients do: over stdio it is what starts
        # the image, the runtime, the audit log, the servers and the pool
        self.tools_at_start = self.request("tools/list", timeout=180)
        assert "result" in self.tools_at_start, self.tools_at_start

    @staticmethod
    def _pump(stream, put):
        for raw in stream:
            put(raw)
        put(None)

    def log(self):
        # the reader ends the list with None when the appliance closed stderr
        return b"".join(x for x in self.stderr[-41:] if x is not None).decode("utf-8", "replace")

    def send(self, msg):
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()

    def start(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def _read_one(self, deadline):
        try:
            raw = self.lines.get(timeout=max(0.01, deadline - time.time()))
        except queue.Empty:
            return False
        assert raw is not None, "appliance closed stdout; its log:\n" + self.log()
        m = json.loads(raw)
        if "id" in m and m["id"] is None and "method" not in m:
            self.nulls.append(m)
        elif "id" in m and "method" not in m:
            self.answers[m["id"]] = m
        else:
            self.notes.append(m)
        return True

    def wait(self, rid, timeout=90):
        deadline = time.time() + timeout
        while rid not in self.answers:
            assert time.time() < deadline, "no answer to %r; log:\n%s" % (rid, self.log())
            self._read_one(deadline)
        return self.answers.pop(rid)

    def wait_note(self, method, timeout=10):
        """The first notification named method (read until it comes)."""
        deadline = time.time() + timeout
        while True:
            for n in self.notes:
                if n.get("method") == method:
                    return n
            if time.time() >= deadline:
                return None
            self._read_one(deadline)

    def wait_notes(self, method, n, timeout=10):
        """The first n notifications named method (read until they came)."""
        deadline = time.time() + timeout
        while True:
            got = [m for m in self.notes if m.get("method") == method]
            if len(got) >= n:
                return got[:n]
            assert time.time() < deadline, "%d of %d %s; log:\n%s" % (
                len(got), n, method, self.log())
            self._read_one(deadline)

    def wait_nulls(self, n, timeout=30):
        """The first n answers with id null (read until they came)."""
        deadline = time.time() + timeout
        while len(self.nulls) < n:
            assert time.time() < deadline, "%d null-id answers; log:\n%s" % (
                len(self.nulls), self.log())
            self._read_one(deadline)
        return self.nulls[:n]

    def request(self, method, params=None, timeout=90):
        return self.wait(self.start(method, params), timeout)

    def description(self):
        tools = self.request("tools/list")["result"]["tools"]
        assert [t["name"] for t in tools] == ["run_python"], tools
        return tools[0]["description"]

    def start_cell(self, src):
        return self.start("tools/call", {"name": "run_python", "arguments": {"code": src}})

    def result(self, rid, timeout=90):
        a = self.wait(rid, timeout)
        assert "result" in a, a
        return a["result"]["structuredContent"]

    def cell(self, src):
        """Run src; its stdout, the cell having ended normally."""
        r = self.result(self.start_cell(src))
        assert r["error"] is None and not r["stopped"] and not r["truncated"], \
            "%r\nlog:\n%s" % (r, self.log())
        return r["stdout"]

    def cell_json(self, src):
        """Run src, which prints one JSON document; that document."""
        return json.loads(self.cell(src))

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        rc = self.proc.wait(timeout=30)
        assert rc == 0, "appliance exited %d; log:\n%s" % (rc, self.log())

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.close()
        else:
            self.proc.kill()
            self.proc.wait()
