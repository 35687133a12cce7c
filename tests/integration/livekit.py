"""livekit.py: `appliance run` serving HTTP from one policy file that a test signs
again in place (and reloads with SIGHUP), and tests/mcp-live.mjs, the v1 SDK client
kept connected while the test acts (test_reload, test_sessions).
"""

import hashlib
import http.client
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import gatewaykit as gk
from cellkit import APPLIANCE, digest
from policykit import Signer

LIVE = os.path.join(gk.ROOT, "tests", "mcp-live.mjs")
TOKEN = "appliance_test-token-reload-0123456789"
FLOOR = "/var/lib/appliance/policy.state"


class Live:
    """One policy file, signed again in place for each reload, served over HTTP."""

    def __init__(self):
        self.kit = Signer("appliance-reload-test.")
        self.dir = self.kit.dir()
        self.path = os.path.join(self.dir, "live.json")
        self.share = gk.server_dir()  # the cell's marker lives here, readable by the toy
        self.audit = os.path.join(tempfile.mkdtemp(prefix="appliance-reload-audit."), "a.log")
        self.port = gk.free_port()
        self.mport = gk.free_port()
        self.lines = []
        self.proc = None

    def doc(self, servers=None, roles=None, serial=None, expires="2099-01-01T00:00:00Z",
            image=None, limits=None, tokens=(("ops", TOKEN, "r"),), **extra):
        servers = servers or {"toy": gk.toy_server()}
        roles = roles or {"r": {"tools": ["toy.*"]}}
        layout, dig = image or (os.path.join(gk.ROOT, "build", "image"), digest())
        if serial is None:
            self.kit.serial += 1
            serial = self.kit.serial
        d = {"policy_version": 1, "expires": expires, "deployment": self.kit.deployment,
             "serial": serial, "image": {"layout": layout, "digest": dig},
             "limits": dict({"deadline_s": 120, "max_calls": 2000, "pool": 1},
                            **(limits or {})),
             "servers": servers,
             "tools": {"%s.*" % s: {"access": "read"} for s in servers},
             "roles": roles,
             "clients": {"tokens": [{"name": name, "role": role,
                                     "sha256": hashlib.sha256(token.encode()).hexdigest()}
                                    for name, token, role in tokens]},
             "http": {"listen": ["127.0.0.1:%d" % self.port],
                      "metrics_listen": "127.0.0.1:%d" % self.mport},
             "audit": {"path": self.audit}}
        d.update(extra)
        return d

    def sign(self, doc, key=None):
        with open(self.path, "w") as f:
            json.dump(doc, f)
        subprocess.run([APPLIANCE, "sign", "--secret", key or os.path.join(self.dir, "k.key"),
                        self.path], check=True, capture_output=True)

    def start(self, doc):
        self.sign(doc)
        self.proc = subprocess.Popen(self.kit.argv(self.path + ".sig"), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        threading.Thread(target=self._pump, daemon=True).start()
        self.wait_log("serving MCP over HTTP at 127.0.0.1:%d/mcp" % self.port)

    def _pump(self):
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace"))

    def log(self):
        return "".join(self.lines)

    def wait_log(self, text, timeout=120, since=0):
        deadline = time.time() + timeout
        while text not in "".join(self.lines[since:]):
            assert self.proc.poll() is None, "appliance exited; log:\n" + self.log()
            assert time.time() < deadline, "no %r in the log:\n%s" % (text, self.log())
            time.sleep(0.05)

    def reload(self, expect):
        """SIGHUP, then wait for expect ("reloaded" or "reload refused") in
        the log; the line that says it."""
        mark = len(self.lines)
        self.proc.send_signal(signal.SIGHUP)
        self.wait_log(expect, since=mark)
        return [l for l in self.lines[mark:] if expect in l][-1]

    def audit_lines(self, ev):
        with open(self.audit) as f:
            lines = [json.loads(l) for l in f]
        found = [e for e in lines if e.get("ev") == ev]
        assert found, "no %s line in the audit log: %s" % (ev, lines[-5:])
        return found

    def metric(self, line_start):
        """The value of the /metrics sample whose line starts with line_start."""
        c = http.client.HTTPConnection("127.0.0.1", self.mport, timeout=30)
        c.request("GET", "/metrics")
        page = c.getresponse().read().decode()
        c.close()
        for line in page.splitlines():
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        return None

    def floor(self):
        with open(FLOOR) as f:
            for line in f:
                if line.startswith(self.kit.deployment + " "):
                    return int(line.split()[1])
        return None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self.proc.wait(timeout=60)
            assert rc == 0, "exit %d; log:\n%s" % (rc, self.log())

    def cleanup(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.kit.cleanup()
        shutil.rmtree(self.share, True)
        shutil.rmtree(os.path.dirname(self.audit), True)


class Client:
    """tests/mcp-live.mjs: the v1 SDK client, connected while the test acts."""

    def __init__(self, port, token=TOKEN):
        self.proc = subprocess.Popen([gk.node(), LIVE, "--url", "http://127.0.0.1:%d/mcp" % port,
                                      "--token", token], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._pump, daemon=True).start()
        assert self.next(lambda m: m["op"] in ("ready", "fatal"))["op"] == "ready"

    def _pump(self):
        for raw in self.proc.stdout:
            self.q.put(json.loads(raw))
        self.q.put(None)

    def send(self, obj):
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()

    def next(self, want, timeout=180):
        """The first message (kept ones first) that want accepts."""
        for i, m in enumerate(self.seen):
            if want(m):
                return self.seen.pop(i)
        deadline = time.time() + timeout
        while True:
            m = self.q.get(timeout=max(0.1, deadline - time.time()))
            assert m is not None, "the client ended: " + self.proc.stderr.read().decode()[-2000:]
            if want(m):
                return m
            self.seen.append(m)

    def list(self):
        self.send({"op": "list"})
        m = self.next(lambda m: m["op"] == "list")
        assert "result" in m, m
        return m["result"]

    def cell(self, cid, src):
        self.send({"op": "call", "id": cid, "name": "run_python", "arguments": {"code": src}})

    def answer(self, cid):
        m = self.next(lambda m: m["op"] == "call" and m.get("id") == cid)
        assert "result" in m, m
        return m["result"]

    def close(self):
        try:
            self.send({"op": "close"})
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def text(result):
    return "".join(c.get("text", "") for c in result["content"])


def post(port, body, token, sid=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Authorization": "Bearer " + token, "MCP-Protocol-Version": "2025-11-25"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    c.request("POST", "/mcp", json.dumps(body), headers)
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, r.getheader("Mcp-Session-Id"), data
