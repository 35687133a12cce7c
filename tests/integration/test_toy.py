"""test_toy.py: the toy MCP server (build/toy-server) over pipes, plain JSON lines.

The toy is the upstream the appliance's own tests lean on, so its behaviour
is pinned here first: the handshake and version negotiation, tools/list
paging, every tool, sleeps that overlap and are answered out of order, the
in-flight peak, cancellation, and each command-line option.
"""

import json
import os
import queue
import subprocess
import threading
import time

from harness import main, skip, test

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# TOY_SERVER points the tests at another build (an ASan one, say).
TOY = os.environ.get("TOY_SERVER") or os.path.join(ROOT, "build", "toy-server")
VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


class Toy:
    """build/toy-server as a child; lines in, parsed lines out (a reader
    thread feeds a queue, so a test can wait with a timeout)."""

    def __init__(self, *args):
        if not os.access(TOY, os.X_OK):
            skip("no %s (make build/toy-server)" % TOY)
        self.proc = subprocess.Popen(
            [TOY, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        self.err_thread = threading.Thread(target=self._read_err, daemon=True)
        self.err_thread.start()
        self.next_id = 100

    def _read(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def _read_err(self):
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace"))

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        self.send_raw(json.dumps(msg).encode() + b"\n")

    def recv(self, timeout=5.0):
        raw = self.lines.get(timeout=timeout)
        if raw is None:
            raise EOFError("toy closed stdout")
        assert raw.endswith(b"\n"), raw[:200]
        return json.loads(raw)

    def nothing_for(self, seconds):
        try:
            raw = self.lines.get(timeout=seconds)
        except queue.Empty:
            return
        raise AssertionError("unexpected line: %r" % (raw[:200],))

    def request(self, method, params=None, rid=None):
        if rid is None:
            rid = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def call(self, method, params=None):
        rid = self.request(method, params)
        r = self.recv()
        assert r.get("id") == rid, r
        return r

    def tool(self, name, arguments=None):
        params = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        r = self.call("tools/call", params)
        assert "result" in r, r
        return r["result"]

    def init(self, version="2025-11-25"):
        r = self.call("initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "test_toy", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.err_thread.join(timeout=5)
        # under TOY_SERVER=build/asan/toy-server, a leak or a bad access fails the test
        assert not any("Sanitizer" in line or "runtime error" in line
                       for line in self.stderr), "".join(self.stderr)[-3000:]
        return self.proc.returncode


def with_toy(*args):
    def deco(fn):
        def run():
            toy = Toy(*args)
            try:
                fn(toy)
            finally:
                rc = toy.close()
            assert rc in (0, 3), rc  # 3: --die-after fired
        run.__name__ = fn.__name__
        return test(run)
    return deco


def list_all(toy):
    tools, cursor, pages = [], None, 0
    while True:
        r = toy.call("tools/list", {"cursor": cursor} if cursor else None)["result"]
        pages += 1
        assert len(r["tools"]) <= 4, r
        tools += r["tools"]
        cursor = r.get("nextCursor")
        if not cursor:
            return tools, pages
        assert pages < 10


def text_of(result):
    assert result["content"][0]["type"] == "text", result
    return result["content"][0]["text"]


@with_toy()
def handshake_and_version_negotiation(toy):
    r = toy.init("2025-11-25")["result"]
    assert r["protocolVersion"] == "2025-11-25", r
    assert r["capabilities"]["tools"]["listChanged"] is True
    assert r["serverInfo"]["name"] == "toy"
    assert toy.call("ping")["result"] == {}
    # a second initialize is refused
    assert toy.call("initialize", {"protocolVersion": "2025-11-25"})["error"]["code"] == -32600


@test
def every_version_is_answered_as_asked_and_others_get_the_latest():
    for asked, answered in [(v, v) for v in VERSIONS] + [("1999-01-01", VERSIONS[0])]:
        toy = Toy()
        try:
            assert toy.init(asked)["result"]["protocolVersion"] == answered, asked
        finally:
            toy.close()


@with_toy()
def tools_before_initialize_are_refused(toy):
    assert toy.call("ping")["result"] == {}  # ping is allowed at any time
    assert toy.call("tools/list")["error"]["code"] == -32600
    assert toy.call("initialize", {})["error"]["code"] == -32602


@with_toy()
def tools_list_is_paged_by_cursor(toy):
    toy.init()
    tools, pages = list_all(toy)
    names = [t["name"] for t in tools]
    assert names == ["add", "echo", "sleep", "peak", "bytes", "fail", "write_note",
                     "unsupported", "deep", "probe", "detach"], names
    assert pages == 3, pages
    for t in tools:
        assert t["inputSchema"]["type"] == "object", t
        read_only = t["annotations"]["readOnlyHint"]
        assert read_only is (t["name"] != "write_note"), t
    unsupported = [t for t in tools if t["name"] == "unsupported"][0]
    assert unsupported["inputSchema"]["unevaluatedProperties"] is False
    for bad in ["x", "0", "99", "", "-4", 4]:
        r = toy.call("tools/list", {"cursor": bad})
        assert r["error"]["code"] == -32602, (bad, r)


@with_toy()
def each_tool_answers(toy):
    toy.init()
    r = toy.tool("add", {"a": 2, "b": 3})
    assert r["structuredContent"] == {"sum": 5}, r
    assert json.loads(text_of(r)) == {"sum": 5}
    assert "isError" not in r
    assert text_of(toy.tool("echo", {"text": "h\u00e9llo \"q\"\n"})) == "h\u00e9llo \"q\"\n"
    assert len(text_of(toy.tool("bytes", {"n": 0}))) == 0
    assert text_of(toy.tool("bytes", {"n": 40})) == ("abcdefghijklmnopqrstuvwxyz0123456789abcd")
    r = toy.tool("fail", {})
    assert r["isError"] is True and "fails" in text_of(r), r
    assert text_of(toy.tool("write_note", {"text": "abc"})) == "noted 3 bytes"
    assert "reached" in text_of(toy.tool("unsupported", {"x": "y"}))
    r = toy.tool("deep", {"depth": 5})
    v, depth = r["structuredContent"], 1
    while "d" in v:
        v, depth = v["d"], depth + 1
    assert v == {"v": 0} and depth == 5, r
    assert toy.tool("sleep", {"ms": 0})["structuredContent"] == {"slept_ms": 0}
    assert toy.tool("peak")["structuredContent"]["peak"] == 1


@with_toy()
def bad_arguments_are_tool_errors_and_unknown_tools_protocol_errors(toy):
    toy.init()
    for name, args in [("add", {"a": 1}), ("add", {"a": 1, "b": 2.5}), ("add", {"a": "1", "b": 2}),
                       ("add", {"a": 1, "b": 2, "c": 3}), ("echo", {}), ("echo", []),
                       ("sleep", {"ms": 60001}), ("sleep", {"ms": -1}),
                       ("bytes", {"n": 16777217}), ("deep", {"depth": 0}),
                       ("deep", {"depth": 1001}), ("fail", {"x": 1}),
                       ("add", {"a": 9223372036854775807, "b": 1})]:
        r = toy.tool(name, args)
        assert r.get("isError") is True, (name, args, r)
    r = toy.call("tools/call", {"name": "nope", "arguments": {}})
    assert r["error"]["code"] == -32602, r
    r = toy.call("tools/call", {"name": "late", "arguments": {}})
    assert r["error"]["code"] == -32602, r  # not listed yet, so not callable
    assert toy.call("tools/call")["error"]["code"] == -32602
    assert toy.call("resources/list")["error"]["code"] == -32601


@with_toy()
def sleeps_overlap_and_answer_out_of_order(toy):
    toy.init()
    t0 = time.monotonic()
    for rid, ms in (("a", 600), ("b", 100), ("c", 350)):
        toy.request("tools/call", {"name": "sleep", "arguments": {"ms": ms}}, rid=rid)
    # an instant call is not held up behind the sleeps
    r = toy.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    assert r["result"]["structuredContent"] == {"sum": 2}
    order = [toy.recv()["id"] for _ in range(3)]
    elapsed = time.monotonic() - t0
    assert order == ["b", "c", "a"], order
    assert 0.55 <= elapsed < 1.0, elapsed  # in parallel: not 1.05 s in a row
    # three sleeps and the add, then the peak call itself, held alone
    assert toy.tool("peak")["structuredContent"] == {"peak": 3, "held": 4}
    assert toy.tool("peak")["structuredContent"] == {"peak": 0, "held": 1}  # reset


@with_toy()
def a_call_is_held_until_its_answer_is_wholly_written(toy):
    toy.init()
    toy.tool("peak")
    # two answers of 8 MiB that the client does not read yet: a pipe takes
    # neither whole, so both calls are still held when the peak call comes
    for rid in ("x", "y"):
        toy.request("tools/call", {"name": "bytes", "arguments": {"n": 8 * 1024 * 1024}},
                    rid=rid)
    toy.request("tools/call", {"name": "peak", "arguments": {}}, rid="p")
    got = {}
    for _ in range(3):
        r = toy.recv(timeout=30)
        got[r["id"]] = r
    assert len(got["x"]["result"]["content"][0]["text"]) == 8 * 1024 * 1024
    assert got["p"]["result"]["structuredContent"] == {"peak": 0, "held": 3}, got["p"]
    # it reset to the three held then; once they are written, to this one
    assert toy.tool("peak")["structuredContent"] == {"peak": 0, "held": 3}
    assert toy.tool("peak")["structuredContent"] == {"peak": 0, "held": 1}


@with_toy()
def cancelled_calls_get_no_answer(toy):
    toy.init()
    toy.request("tools/call", {"name": "sleep", "arguments": {"ms": 300}}, rid=0)
    toy.request("tools/call", {"name": "sleep", "arguments": {"ms": 300}}, rid="keep")
    toy.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 0, "reason": "test"}})
    # a cancel for an unknown id is ignored, and so is one with a string "0"
    toy.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": "0"}})
    r = toy.recv()
    assert r["id"] == "keep", r
    toy.nothing_for(0.5)
    assert toy.tool("peak")["structuredContent"] == {"peak": 2, "held": 2}
    assert toy.call("ping")["result"] == {}


@with_toy()
def bad_lines_get_json_rpc_errors(toy):
    toy.init()
    toy.send_raw(b"not json\n")
    r = toy.recv()
    assert r["id"] is None and r["error"]["code"] == -32700, r
    toy.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
    r = toy.recv()
    assert r["id"] is None and r["error"]["code"] == -32600, r
    toy.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"ping","x":1}\n')
    r = toy.recv()
    assert r["id"] == 7 and r["error"]["code"] == -32600, r
    toy.send_raw(b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}\n')
    r = toy.recv()
    assert r["id"] is None and r["error"]["code"] == -32600, r
    # a line past the toy's cap (4 MiB) is refused once, then work goes on
    toy.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"' +
                 b"x" * (4 * 1024 * 1024 + 10) + b'"}}\n')
    r = toy.recv()
    assert r["id"] is None and r["error"]["code"] == -32600, r
    # responses from the client are ignored (the toy sends no requests)
    toy.send({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert toy.call("ping")["result"] == {}


@with_toy()
def large_results_reach_a_slow_reader(toy):
    toy.init()
    n = 3 * 1024 * 1024
    big = toy.request("tools/call", {"name": "bytes", "arguments": {"n": n}})
    time.sleep(0.3)  # the pipe fills: the toy must queue, not block or drop
    ping = toy.request("ping")
    got = {}
    for _ in range(2):
        r = toy.recv(timeout=10)
        got[r["id"]] = r["result"]
    assert got[ping] == {}
    assert got[big]["content"][0]["text"] == ("abcdefghijklmnopqrstuvwxyz0123456789" * n)[:n]


@with_toy("--die-after", "2")
def die_after_exits_on_the_next_call(toy):
    toy.init()
    toy.tool("echo", {"text": "1"})
    toy.tool("echo", {"text": "2"})
    toy.request("tools/call", {"name": "echo", "arguments": {"text": "3"}})
    try:
        r = toy.recv()
        raise AssertionError("answered after --die-after: %r" % (r,))
    except EOFError:
        pass
    assert toy.proc.wait(timeout=5) == 3


@with_toy("--list-changed-after", "1")
def list_changed_after_n_calls(toy):
    toy.init()
    tools, _ = list_all(toy)
    assert "late" not in [t["name"] for t in tools]
    rid = toy.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    assert toy.recv()["id"] == rid
    n = toy.recv()
    assert n == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, n
    tools, pages = list_all(toy)
    assert [t["name"] for t in tools][-1] == "late" and pages == 3
    assert "listed" in text_of(toy.tool("late", {}))
    toy.tool("echo", {"text": "again"})
    toy.nothing_for(0.2)  # sent once


@with_toy("--fail-init")
def fail_init_refuses_initialize(toy):
    r = toy.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                "clientInfo": {"name": "t", "version": "1"}})
    assert r["error"]["code"] == -32603, r
    assert toy.call("tools/list")["error"]["code"] == -32600


@test
def closing_stdin_ends_the_server():
    toy = Toy()
    toy.init()
    toy.request("tools/call", {"name": "sleep", "arguments": {"ms": 60000}})
    t0 = time.monotonic()
    assert toy.close() == 0
    assert time.monotonic() - t0 < 2
    assert any("stdin closed" in line for line in toy.stderr), toy.stderr


@test
def a_client_that_stops_reading_ends_the_server():
    if not os.access(TOY, os.X_OK):
        skip("no %s" % TOY)
    p = subprocess.Popen([TOY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    try:
        p.stdout.close()  # stdin stays open: the server must notice stdout alone
        assert p.wait(timeout=5) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stdin.close()


@test
def bad_options_are_refused():
    if not os.access(TOY, os.X_OK):
        skip("no %s" % TOY)
    for args in (["--die-after"], ["--die-after", "x"], ["--die-after", "-1"], ["--what"]):
        p = subprocess.run([TOY, *args], stdin=subprocess.DEVNULL, capture_output=True)
        assert p.returncode == 2 and b"usage" in p.stderr and p.stdout == b"", (args, p)


if __name__ == "__main__":
    main()
