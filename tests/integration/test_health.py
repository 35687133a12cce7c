"""test_health.py: /healthz and /readyz on the HTTP front of `appliance run`
(docs/http.md, "Health and readiness").

The probes need no token and say one word: /healthz that the event loop
turns, /readyz whether a run could be served now (200 "ready") or what is
missing (503 and `servers`, `expired`, `sandbox`, ...). They pass the
front's Host and Origin checks like the endpoint, make no session, write
no audit line, and leave the endpoint needing its token. Every wait is on
what a probe answers or what the log says, with generous deadlines.

Runs as root; needs build/appliance, build/toy-server and build/image.
"""

import hashlib
import http.client
import json
import os
import signal
import socket
import tempfile
import threading
import time

from harness import main, test
from cellkit import image_with_runner, runsc_pids_of
import gatewaykit as gk

TOKEN = "appliance_test-token-health-0123456789"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}


def stamp(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class Served(gk.Served):
    """`appliance run` on a loopback port with the toy as server `toy` and
    one token. limits, expires, image (layout, digest: with a cache of its
    own), audit (its path), runtime: the policy's."""

    def __init__(self, limits=None, expires=None, image=None, audit=None, runtime=None):
        port = gk.free_port()
        extra = {"audit": {"path": audit}} if audit else {}
        if runtime:
            extra["runtime"] = runtime
        token = {"name": "probe-test", "role": "r",
                 "sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}
        sig = gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})), image=image,
                             expires=expires or "2099-01-01T00:00:00Z",
                             servers={"toy": gk.toy_server()},
                             tools={"toy.*": {"access": "read"}},
                             roles={"r": {"tools": ["toy.*"]}},
                             clients={"tokens": [token]},
                             http={"listen": ["127.0.0.1:%d" % port]}, **extra)
        cache = ["--cache", os.path.join(gk.work(), "cache")] if image else []
        super().__init__(sig, port, cache, timeout=120)

    def wait(self, cond, timeout, what):
        """Until cond() is true (returned), failing after timeout s."""
        deadline = time.time() + timeout
        while True:
            got = cond()
            if got:
                return got
            assert self.proc.poll() is None, "appliance exited; log:\n" + self.log()
            assert time.time() < deadline, "%s: not within %d s; log:\n%s" % (
                what, timeout, self.log()[-6000:])
            time.sleep(0.1)

    def get(self, path, method="GET", headers=None, body=None):
        """(status, headers with lower-case names, body) of one request."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request(method, path, body, headers or {})
            r = c.getresponse()
            data = r.read().decode()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data
        finally:
            c.close()

    def ready(self):
        st, _, body = self.get("/readyz")
        return st, body

    def wait_ready(self, want, timeout=120):
        """Until /readyz answers want ((status, body)); returns it."""
        return self.wait(lambda: self.ready() == want and want, timeout,
                         "/readyz answering %r" % (want,))

    def cell(self, code):
        """A run of code over MCP with the token: the result's structuredContent."""
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": code},
                           "_meta": MODERN}}
        st, _, text = self.get("/mcp", "POST", {
            "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
            "Mcp-Name": "run_python"}, json.dumps(body))
        assert st == 200, (st, text)
        msgs = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: ")]
        return msgs[-1]["result"]["structuredContent"]


@test
def probes_need_no_token_pass_the_host_check_and_leave_no_trace():
    audit = tempfile.mktemp(prefix="audit.", suffix=".jsonl", dir=gk.work())
    s = Served(audit=audit)
    try:
        s.wait_ready((200, "ready\n"))
        # What the probes said so far (a readiness change) is in s.lines
        # once a line said after it is: a refused Host is logged.
        mark = len(s.lines)
        assert s.get("/healthz", headers={"Host": "evil.example"})[0] == 403
        s.wait(lambda: any("refused" in ln for ln in s.lines[mark:]), 30,
               "the refusal's log line")
        before = len(s.lines)
        for _ in range(20):
            st, hd, body = s.get("/healthz")
            assert (st, body) == (200, "ok\n"), (st, body)
            assert hd["content-type"].startswith("text/plain"), hd
            assert hd["cache-control"] == "no-store", hd
            assert s.ready() == (200, "ready\n")
        # HEAD: the same status, no body
        st, hd, body = s.get("/readyz", "HEAD")
        assert (st, body) == (200, ""), (st, body)
        # other methods: 405, naming the two
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            st, hd, _ = s.get("/healthz", method)
            assert st == 405 and hd.get("allow") == "GET, HEAD", (method, st, hd)
        # the front's DNS-rebinding defence holds for them as for the endpoint
        for path in ("/healthz", "/readyz", "/mcp"):
            assert s.get(path, headers={"Host": "evil.example"})[0] == 403, path
            assert s.get(path, headers={"Origin": "http://evil.example"})[0] == 403, path
        # only the exact path: no query, no escape, no prefix
        for path in ("/healthz?x", "/readyz/", "/%72eadyz", "/Healthz", "/health"):
            assert s.get(path)[0] == 404, path
        # a body is held for nobody
        st, _, _ = s.get("/readyz", "GET", {"Content-Length": "2"}, "{}")
        assert st == 413, st
        # the endpoint still needs its token
        st, hd, _ = s.get("/mcp", "POST", {"Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream"},
                          "{}")
        assert st == 401 and "bearer" in hd.get("www-authenticate", "").lower(), (st, hd)
        # not one log line per probe (the refusals above have theirs; the
        # pool may still be warming up meanwhile)
        said = [ln for ln in s.lines[before:]
                if ("http" in ln and "refused" not in ln) or "readiness" in ln
                or "session" in ln or "auth" in ln]
        assert said == [], said
    finally:
        s.stop()
    events = [json.loads(ln) for ln in open(audit)]
    auth = [e for e in events if e["ev"] == "auth"]
    assert [a["outcome"] for a in auth] == ["refused"], auth  # the POST above, only


@test
def a_dead_server_is_servers_until_its_restart_and_probes_alone_bring_it_back():
    """The toy's processes killed: /readyz says `servers` (the name is not
    said). No run is sent: a probe starts a server that is down once its
    backoff has passed (upstream_set_wake), so a balancer that sends no
    work to an unready appliance still sees it come back."""
    s = Served()
    try:
        s.wait_ready((200, "ready\n"))
        procs = gk.jail_processes(s.proc.pid, "toy")
        assert procs, "no toy process found"
        killed = 0
        for pid in procs:
            try:  # one of the jail's may have ended since it was listed
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        assert killed, "every toy process had ended before the kill: %r" % procs
        s.wait_ready((503, "servers\n"), 60)
        assert "toy" not in s.get("/readyz")[2]

        s.wait(lambda: s.ready() == (200, "ready\n"), 120, "the toy restarted by probes")
        assert "bytes of code" not in s.log(), "a run was sent"
        assert s.cell("print((await toy.add(a=2, b=3))['sum'])")["stdout"] == "5\n"
        assert "readiness: servers" in s.log() and "readiness: ready" in s.log(), s.log()
    finally:
        s.stop()


@test
def an_expired_policy_is_expired():
    # the start (image, servers, a boot) has this long; then the policy expires
    s = Served(limits={"pool": 0}, expires=stamp(time.time() + 40))
    try:
        assert s.ready()[1] in ("ready\n", "starting\n"), s.ready()
        s.wait_ready((503, "expired\n"), 90)
        assert s.get("/healthz")[:1] == (200,)
        st, _, _ = s.get("/mcp", "POST", {"Content-Type": "application/json"}, "{}")
        assert st == 401, st
    finally:
        s.stop()


@test
def with_no_pool_a_boot_at_start_decides_and_is_not_kept():
    """limits.pool 0: a sandbox is booted at start to see that one can be,
    then destroyed; /readyz is 200 after it. With an image whose runner
    never says ready every boot fails: `sandbox`."""
    for restore in (False, True):
        s = Served(limits={"pool": 0}, runtime={"restore": restore})
        try:
            s.wait_ready((200, "ready\n"))
            s.wait(lambda: not runsc_pids_of(s.proc.pid), 60, "no sandbox kept")
            assert s.cell("print(7)")["stdout"] == "7\n"
            assert s.ready() == (200, "ready\n")
        finally:
            s.stop()
    layout = tempfile.mkdtemp(prefix="never-ready.", dir=gk.work())
    os.rmdir(layout)
    dig = image_with_runner("import time\ntime.sleep(600)\n", layout)
    for restore in (False, True):
        s = Served(limits={"pool": 0, "boot_s": 2}, image=(layout, dig),
                   runtime={"restore": restore})
        try:
            s.wait_ready((503, "sandbox\n"), 60)
            st, _, text = s.get("/readyz")
            assert text == "sandbox\n", text
        finally:
            s.stop()



@test
def sigterm_drains_not_ready_new_work_elsewhere_the_run_in_flight_answered():
    """The first SIGTERM over HTTP: /readyz says `stopping` at once, a new
    run or session gets 503 with Retry-After (a balancer sends it to
    another replica), the run in flight goes on to its answer, and the
    appliance then stops by itself (exit 0, `stop` reason signal 15)."""
    audit = tempfile.mktemp(prefix="audit.", suffix=".jsonl", dir=gk.work())
    s = Served(audit=audit)
    got = {}
    try:
        s.wait_ready((200, "ready\n"))
        worker = threading.Thread(target=lambda: got.update(
            r=s.cell("await toy.sleep(ms=12000)\nprint('finished')")))
        worker.start()
        s.wait(lambda: "sandbox " in s.log().partition("run_python: ")[2], 60,
               "the run's sandbox")
        s.proc.send_signal(signal.SIGTERM)
        s.wait(lambda: "signal 15: draining" in s.log(), 30, "the drain's log line")
        assert s.ready() == (503, "stopping\n"), s.ready()
        assert s.get("/healthz")[:3:2] == (200, "ok\n")
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_python", "arguments": {"code": "print(1)"},
                           "_meta": MODERN}}
        st, hd, text = s.get("/mcp", "POST", {
            "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
            "Mcp-Name": "run_python"}, json.dumps(body))
        assert (st, text, hd.get("retry-after")) == (503, "draining\n", "1"), (st, text, hd)
        init = {"jsonrpc": "2.0", "id": 3, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}
        st, _, text = s.get("/mcp", "POST", {
            "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream"}, json.dumps(init))
        assert (st, text) == (503, "draining\n"), (st, text)
        worker.join(90)
        assert got.get("r", {}).get("stdout") == "finished\n", got
        assert s.proc.wait(timeout=60) == 0, s.log()
    finally:
        if s.proc.poll() is None:
            s.stop()
    assert "drained: no run in flight" in s.log(), s.log()
    events = [json.loads(ln) for ln in open(audit)]
    ends = [e for e in events if e["ev"] == "run.end"]
    assert [e["reason"] for e in ends] == ["done"], ends
    assert events[-1]["ev"] == "stop" and events[-1]["reason"] == "signal 15", events[-1]


@test
def a_drain_ends_at_http_drain_s_and_zero_stops_at_once():
    """Runs still in flight when limits.http_drain_s has passed are stopped
    (run.end `shutdown`); with 0 the first SIGTERM stops at once."""
    audit = tempfile.mktemp(prefix="audit.", suffix=".jsonl", dir=gk.work())
    s = Served(limits={"http_drain_s": 2}, audit=audit)
    try:
        s.wait_ready((200, "ready\n"))
        sock = socket.create_connection(("127.0.0.1", s.port))
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "run_python",
                                      "arguments": {"code": "await toy.sleep(ms=50000)"},
                                      "_meta": MODERN}})
        sock.sendall(("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                      "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                      "Accept: application/json, text/event-stream\r\n"
                      "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n"
                      "Mcp-Name: run_python\r\nContent-Length: %d\r\n\r\n%s"
                      % (s.port, TOKEN, len(body), body)).encode())
        s.wait(lambda: "sandbox " in s.log().partition("run_python: ")[2], 60,
               "the run's sandbox")
        s.proc.send_signal(signal.SIGTERM)
        s.wait(lambda: "within 2 s" in s.log(), 30, "the drain's log line")
        assert s.proc.wait(timeout=60) == 0, s.log()
        sock.close()
    finally:
        if s.proc.poll() is None:
            s.stop()
    assert "1 runs still in flight after limits.http_drain_s: stopping" in s.log(), s.log()
    events = [json.loads(ln) for ln in open(audit)]
    ends = [e for e in events if e["ev"] == "run.end"]
    assert [e["reason"] for e in ends] == ["shutdown"], ends
    assert events[-1]["ev"] == "stop" and events[-1]["reason"] == "signal 15", events[-1]

    s = Served(limits={"http_drain_s": 0})
    try:
        s.wait_ready((200, "ready\n"))
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=60) == 0, s.log()
    finally:
        if s.proc.poll() is None:
            s.stop()
    assert "signal 15: stopping" in s.log() and "draining" not in s.log(), s.log()


if __name__ == "__main__":
    main()
