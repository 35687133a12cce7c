"""test_npm_peers.py: the MCP peers from npm (tests/package.json) run here.

The reference servers (server-everything, server-filesystem) and the official
TypeScript SDK client are the peers nobody here wrote. This file proves the
pinned install works on this machine's Node before other tests lean on it:
each server does the handshake and tools/list over plain JSON lines (tool
names and readOnlyHint printed), and tests/mcp-client.mjs (SDK Client +
StdioClientTransport) drives build/toy-server.

The packages come from `scripts/install-deps` (`npm ci` in tests/); Node is
the system one (Node 20 here: none of the pinned packages needs 22).
"""

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading

from harness import main, skip, test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = os.path.join(ROOT, "tests")
MODULES = os.path.join(TESTS, "node_modules")
EVERYTHING = os.path.join(MODULES, "@modelcontextprotocol", "server-everything", "dist",
                          "index.js")
FILESYSTEM = os.path.join(MODULES, "@modelcontextprotocol", "server-filesystem", "dist",
                          "index.js")
CLIENT = os.path.join(TESTS, "mcp-client.mjs")
TOY = os.environ.get("TOY_SERVER") or os.path.join(ROOT, "build", "toy-server")
# The children get a short explicit environment, never ours.
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}


def node():
    path = shutil.which("node", path=ENV["PATH"])
    if not path:
        skip("no node on PATH (scripts/install-deps installs it)")
    return path


def need(path):
    if not os.path.exists(path):
        skip("missing %s (scripts/install-deps runs npm ci in tests/)" % path)


class Peer:
    """A stdio MCP server as a child: JSON lines in, parsed lines out."""

    def __init__(self, argv, cwd=None):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=ENV, cwd=cwd)
        self.lines = queue.Queue()
        self.stderr = []
        self.notifications = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append),
                         daemon=True).start()

    @staticmethod
    def _pump(stream, put):
        for raw in stream:
            put(raw)
        put(None)

    def request(self, rid, method, params=None, timeout=20):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        while True:
            try:
                raw = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError("no answer to %s; stderr: %s" % (
                    method, b"".join(self.stderr[-20:]).decode("utf-8", "replace")))
            if raw is None:
                raise AssertionError("peer closed stdout during %s" % method)
            m = json.loads(raw)
            # Servers may speak first: server-everything sends
            # notifications/tools/list_changed before its initialize answer.
            if "method" in m:
                self.notifications.append(m)
                continue
            assert m.get("id") == rid, m
            assert "error" not in m, m
            return m["result"]

    def notify(self, method):
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
        self.proc.stdin.flush()

    def handshake(self):
        r = self.request(1, "initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test_npm_peers", "version": "1"}})
        self.notify("notifications/initialized")
        return r

    def tools(self):
        tools, cursor, rid = [], None, 2
        while True:
            r = self.request(rid, "tools/list", {"cursor": cursor} if cursor else None)
            tools += r["tools"]
            cursor, rid = r.get("nextCursor"), rid + 1
            if not cursor:
                return tools
            assert rid < 66, "more than 64 pages"

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def show(name, tools):
    for t in tools:
        hint = t.get("annotations", {}).get("readOnlyHint")
        print("#   %s: %s readOnlyHint=%s" % (name, t["name"], hint))


@test
def node_is_new_enough():
    out = subprocess.run([node(), "--version"], capture_output=True, text=True, env=ENV)
    major = int(out.stdout.strip().lstrip("v").split(".")[0])
    print("#   node %s" % out.stdout.strip())
    assert major >= 20, out.stdout  # glob and minimatch (server-filesystem) want 20 or 22+


@test
def server_everything_handshake_and_tools():
    need(EVERYTHING)
    peer = Peer([node(), EVERYTHING, "stdio"])
    try:
        r = peer.handshake()
        assert r["protocolVersion"] == "2025-11-25", r
        assert r["serverInfo"]["name"], r
        tools = peer.tools()
        show("everything", tools)
        names = {t["name"] for t in tools}
        assert {"echo", "get-sum"} <= names, names
        echo = [t for t in tools if t["name"] == "echo"][0]
        assert echo["annotations"]["readOnlyHint"] is True, echo
        r = peer.request(50, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        assert "hi" in r["content"][0]["text"], r
    finally:
        peer.close()


@test
def server_filesystem_handshake_and_tools():
    need(FILESYSTEM)
    with tempfile.TemporaryDirectory() as root:
        with open(os.path.join(root, "hello.txt"), "w") as f:
            f.write("hello from the test\n")
        peer = Peer([node(), FILESYSTEM, root])
        try:
            r = peer.handshake()
            assert r["protocolVersion"] == "2025-11-25", r
            tools = peer.tools()
            show("filesystem", tools)
            hints = {t["name"]: t.get("annotations", {}).get("readOnlyHint") for t in tools}
            assert hints.get("read_text_file") is True, hints
            assert hints.get("write_file") is False, hints
            r = peer.request(50, "tools/call", {
                "name": "read_text_file",
                "arguments": {"path": os.path.join(os.path.realpath(root), "hello.txt")}})
            assert "hello from the test" in r["content"][0]["text"], r
        finally:
            peer.close()


def run_client(*args, timeout=60):
    need(os.path.join(MODULES, "@modelcontextprotocol", "sdk", "package.json"))
    p = subprocess.run([node(), CLIENT, *args], capture_output=True, text=True, env=ENV,
                       timeout=timeout)
    assert p.stdout.strip(), "no output (exit %d): %s" % (p.returncode, p.stderr[-2000:])
    return p.returncode, json.loads(p.stdout)


@test
def sdk_client_drives_the_toy():
    if not os.access(TOY, os.X_OK):
        skip("no %s (make build/toy-server)" % TOY)
    rc, out = run_client(
        "--call", '{"name":"add","arguments":{"a":2,"b":3}}',
        "--call", '{"name":"fail"}',
        "--call", '{"name":"nope"}',
        "--call", '{"name":"write_note","arguments":{"text":"x"}}',
        "--", TOY)
    assert rc == 0, out
    assert out["server"]["name"] == "toy", out
    names = [t["name"] for t in out["tools"]]
    assert len(names) == 11 and names[0] == "add" and names[-1] == "detach", names  # 3 pages
    assert [t["name"] for t in out["tools"] if t["readOnlyHint"] is False] == ["write_note"]
    add, fail, nope, note = out["calls"]
    # the SDK checks structuredContent against add's outputSchema too
    assert add["result"]["structuredContent"] == {"sum": 5}, add
    assert fail["result"]["isError"] is True, fail
    assert nope["error"]["code"] == -32602, nope
    assert note["result"]["content"][0]["text"] == "noted 1 bytes", note


@test
def sdk_client_reports_a_failed_initialize():
    if not os.access(TOY, os.X_OK):
        skip("no %s" % TOY)
    rc, out = run_client("--timeout", "5000", "--", TOY, "--fail-init")
    assert rc == 1 and "fatal" in out and "fail-init" in out["fatal"], out


@test
def sdk_client_refuses_bad_usage():
    need(os.path.join(MODULES, "@modelcontextprotocol", "sdk", "package.json"))
    for args in (["--"], ["--call", "{", "--", "x"], ["--call", "[]", "--", "x"], ["--what"]):
        p = subprocess.run([node(), CLIENT, *args], capture_output=True, text=True, env=ENV)
        assert p.returncode == 2 and "usage" in p.stderr and p.stdout == "", (args, p)


if __name__ == "__main__":
    main()
