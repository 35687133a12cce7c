"""test_http.py: `appliance run` serving MCP Streamable HTTP to clients with tokens.

A policy with an `http` section listens on a loopback port; two tokens name two roles
that may call different toy tools. Raw requests (http.client) check the refusals, the
legacy session bound to its token and the 2026-07-28 stateless requests, with run_python
answered on an SSE stream; the v2 SDK client speaks it in both eras with a token; a
client that hangs up mid-cell has its cell cancelled, and SIGTERM ends everything.

Runs as root; needs build/appliance, build/toy-server, build/image and the npm packages.
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import main, test
from cellkit import alive, descendants, hidden, maps_lib, system_lib
import gatewaykit as gk
from gatewaykit import free_port
from policykit import START_INPUT

CLIENT2 = os.path.join(gk.ROOT, "tests", "mcp-client2.mjs")
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}
ALPHA, BETA = "appliance_test-token-alpha-0123456789", "appliance_test-token-beta-9876543210"


def many_token(i):
    return "appliance_test-token-many-%02d-0123456789abcdef" % i


def http_policy(port, limits=None, gate=False, audit=None, many=0, http=None):
    tokens = [{"name": "alpha", "sha256": hashlib.sha256(ALPHA.encode()).hexdigest(),
               "role": "adder"},
              {"name": "beta", "sha256": hashlib.sha256(BETA.encode()).hexdigest(),
               "role": "echoer"}]
    tokens += [{"name": "many-%02d" % i, "role": "echoer",
                "sha256": hashlib.sha256(many_token(i).encode()).hexdigest()}
               for i in range(many)]
    tools = {"toy.*": {"access": "read"}}
    extra = {"audit": {"path": audit}} if audit else {}
    if gate:
        tools["toy.write_note"] = {"access": "write", "approval": True}
    return gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})),
                          servers={"toy": gk.toy_server()},
                          tools=tools,
                          roles={"adder": {"tools": ["toy.add", "toy.write_note"],
                                           "write": True},
                                 "echoer": {"tools": ["toy.echo"]}},
                          clients={"tokens": tokens},
                          http=dict({"listen": ["127.0.0.1:%d" % port]}, **(http or {})),
                          **extra)


class Served(gk.Served):
    """`appliance run` serving HTTP; its log kept."""

    def __init__(self, limits=None, gate=False, audit=None, many=0, http=None):
        port = free_port()
        super().__init__(http_policy(port, limits, gate, audit, many, http), port)

    def post(self, body, token=ALPHA, sid=None, accept="application/json, text/event-stream"):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=90)
        headers = {"Content-Type": "application/json", "Accept": accept}
        if token:
            headers["Authorization"] = "Bearer " + token
        if sid:
            headers["Mcp-Session-Id"] = sid
        headers.update(standard_headers(body))
        c.request("POST", "/mcp", json.dumps(body), headers)
        r = c.getresponse()
        data = r.read().decode()
        c.close()
        return r.status, dict((k.lower(), v) for k, v in r.getheaders()), data


def standard_headers(body):
    """The headers a 2026-07-28 request carries: what its body says."""
    params = body.get("params") or {}
    meta = params.get("_meta") or {}
    if "io.modelcontextprotocol/protocolVersion" not in meta:
        return {}
    h = {"MCP-Protocol-Version": meta["io.modelcontextprotocol/protocolVersion"],
         "Mcp-Method": body["method"]}
    if "name" in params or "uri" in params:
        h["Mcp-Name"] = params.get("name", params.get("uri"))
    return h


def raw_post(port, body, token=ALPHA):
    """The bytes of a POST of body, for a socket the test holds itself."""
    data = json.dumps(body).encode()
    head = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1:%d" % port, "Authorization: Bearer " + token,
            "Content-Type: application/json", "Accept: application/json, text/event-stream",
            "Content-Length: %d" % len(data)]
    head += ["%s: %s" % kv for kv in standard_headers(body).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def sse_messages(text):
    return [json.loads(line[len("data: "):]) for line in text.splitlines()
            if line.startswith("data: ")]


def call(code_, id_=1, meta=True):
    params = {"name": "run_python", "arguments": {"code": code_}}
    if meta:
        params["_meta"] = MODERN
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


@test
def tokens_decide_who_may_ask_and_what_each_sees():
    s = Served()
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN}}
        st, hd, _ = s.post(body, token=None)
        assert st == 401 and "bearer" in hd.get("www-authenticate", "").lower(), (st, hd)
        st, _, _ = s.post(body, token="appliance_not-a-token")
        assert st == 401, st
        st, _, a = s.post(body, token=ALPHA)
        assert st == 200, (st, a)
        desc_a = json.loads(a)["result"]["tools"][0]["description"]
        _, _, b = s.post(body, token=BETA)
        desc_b = json.loads(b)["result"]["tools"][0]["description"]
        assert "toy.add(" in desc_a and "toy.echo(" not in desc_a, desc_a
        assert "toy.echo(" in desc_b and "toy.add(" not in desc_b, desc_b
        # what the front refuses before any MCP
        st, _, _ = s.post(body, accept="application/json")
        assert st == 406, st
        assert ALPHA not in s.log() and BETA not in s.log()
    finally:
        s.stop()


def raw_exchange(port, lines, body=b""):
    """Sends a request head (lines, Host and the token added unless given)
    and body on a socket of its own; the response's bytes until its head
    ends (or the server closes)."""
    names = {ln.split(":", 1)[0].lower() for ln in lines[1:]}
    head = list(lines)
    if "host" not in names:
        head.append("Host: 127.0.0.1:%d" % port)
    if "authorization" not in names:
        head.append("Authorization: Bearer " + ALPHA)
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    got = b""
    try:
        try:
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        except OSError:
            pass  # refused mid-body: the answer may be there all the same
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(65536)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    finally:
        sock.close()
    return got.decode("latin-1")


@test
def every_refusal_gets_its_status_before_any_mcp():
    s = Served(limits={"http_body_kb": 64})
    try:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                           "params": {"_meta": MODERN}}).encode()
        post = ["POST /mcp HTTP/1.1", "Content-Type: application/json",
                "Accept: application/json, text/event-stream",
                "MCP-Protocol-Version: 2026-07-28", "Mcp-Method: tools/list"]
        length = ["Content-Length: %d" % len(body)]
        # the control: this request, as it is, is served
        assert raw_exchange(s.port, post + length, body).startswith("HTTP/1.1 200"), s.log()
        cases = [
            ("a foreign Origin", post + length + ["Origin: http://evil.example"], body, 403),
            ("a foreign Host (DNS rebinding)", post + length + ["Host: evil.example"], body, 403),
            ("a wrong content type",
             [l if not l.startswith("Content-Type") else "Content-Type: text/plain"
              for l in post] + length, body, 415),
            ("an Accept without the event stream",
             [l if not l.startswith("Accept") else "Accept: application/json"
              for l in post] + length, body, 406),
            ("an unknown method", ["PUT /mcp HTTP/1.1"] + post[1:] + length, body, 405),
            ("another path", ["POST /other HTTP/1.1"] + post[1:] + length, body, 404),
        ]
        # the path is the request's target as sent, byte for byte: libmicrohttpd
        # would decode %xx (a %00 ending the path) and cut the query first
        cases += [("the path %r" % target, ["POST %s HTTP/1.1" % target] + post[1:] + length,
                   body, 404)
                  for target in ("/mcp%00", "/mcp%2F", "/MCP", "/mcp/", "/mcp?x", "/mcp?",
                                 "/%6dcp", "//mcp", "/./mcp", "/mcp\0x")]
        cases += [
            ("headers over the cap", post + length + ["X-Filler: " + "a" * 20000], body, 431),
        ]
        for what, lines, data, status in cases:
            got = raw_exchange(s.port, lines, data)
            assert got.startswith("HTTP/1.1 %d" % status), (what, got[:200])
        # a body over the cap, announced with Expect: refused before it is sent
        got = raw_exchange(s.port, post + ["Content-Length: %d" % (1 << 20),
                                           "Expect: 100-continue"])
        assert got.startswith("HTTP/1.1 413"), got[:200]
        assert "100 Continue" not in got, got[:200]
        # and a body over the cap, sent whole: 413 as well
        big = b"[" + b"0," * (70 * 1024) + b"0]"
        got = raw_exchange(s.port, post + ["Content-Length: %d" % len(big)], big)
        assert got.startswith("HTTP/1.1 413"), got[:200]
        assert ALPHA not in s.log()
    finally:
        s.stop()


def post_bytes(port, data, sid=None, version="2026-07-28"):
    """A POST of data as it is, with a token; the status and the body."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer " + ALPHA,
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": version}
    if sid:
        headers["Mcp-Session-Id"] = sid
    c.request("POST", "/mcp", data, headers)
    r = c.getresponse()
    text = r.read().decode()
    c.close()
    return r.status, text


@test
def a_post_that_is_no_message_gets_400_in_both_eras():
    """A POST's body is one JSON-RPC request, notification or response: an
    empty body gets a parse error, a message with neither method nor result
    nor error an invalid request with its id, each with 400 (not 202, which
    says a message was taken; not 500 for a real-number id), in a legacy
    session and without one."""
    s = Served()
    try:
        st, hd, text = s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "raw", "version": "0"}}})
        assert st == 200, (st, text)
        sid = hd["mcp-session-id"]
        for era, kw in (("2026-07-28", {}), ("legacy", {"sid": sid, "version": "2025-11-25"})):
            for data, code, id_ in ((b"", -32700, None), (b"\r\n", -32700, None),
                                    (b'{"jsonrpc":"2.0","id":5}', -32600, 5),
                                    (b'{"jsonrpc":"2.0","id":"x"}', -32600, "x"),
                                    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', -32600,
                                     None)):
                st, text = post_bytes(s.port, data, **kw)
                assert st == 400, (era, data, st, text)
                err = json.loads(text)
                assert err["error"]["code"] == code and err["id"] == id_, (era, data, err)
            # a notification is still accepted
            note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
            st, text = post_bytes(s.port, note, **kw)
            assert (st, text) == (202, ""), (era, st, text)
        # the session and the appliance serve on
        st, _, text = s.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, sid=sid)
        assert st == 200 and json.loads(text)["result"]["tools"], (st, text)
    finally:
        s.stop()


@test
def every_authentication_is_in_the_audit_log_and_no_token_is():
    d = tempfile.mkdtemp(prefix="appliance-http-audit.")
    os.chmod(d, 0o755)
    path = os.path.join(d, "audit.jsonl")
    s = Served(audit=path)
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": MODERN}}
        assert s.post(body, token="appliance_wrong")[0] == 401
        assert s.post(body, token=BETA)[0] == 200
    finally:
        s.stop()
    raw = open(path).read()
    auth = [e for e in map(json.loads, raw.splitlines()) if e["ev"] == "auth"]
    assert [(a.get("client"), a["outcome"]) for a in auth] == [
        (None, "refused"), ("beta", "accepted")], auth
    assert all(a["peer"].startswith("127.0.0.1:") for a in auth), auth
    assert ALPHA not in raw and BETA not in raw and "appliance_wrong" not in raw
    shutil.rmtree(d)


@test
def a_legacy_session_runs_cells_and_belongs_to_its_token():
    s = Served()
    try:
        st, hd, text = s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "raw", "version": "0"}}})
        assert st == 200 and json.loads(text)["result"]["protocolVersion"] == "2025-11-25", text
        sid = hd["mcp-session-id"]
        st, _, _ = s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=sid)
        assert st == 202, st
        st, hd, text = s.post(call("print((await toy.add(a=2, b=3))['sum'])", 2, meta=False),
                              sid=sid)
        assert st == 200 and hd["content-type"].startswith("text/event-stream"), (st, hd)
        done = sse_messages(text)[-1]
        assert done["id"] == 2 and done["result"]["structuredContent"]["stdout"] == "5\n", done
        # another token naming it: not found
        st, _, _ = s.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, token=BETA,
                          sid=sid)
        assert st == 404, st
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
        c.request("DELETE", "/mcp", headers={"Authorization": "Bearer " + ALPHA,
                                             "Mcp-Session-Id": sid})
        assert c.getresponse().status == 200
        c.close()
        st, _, _ = s.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, sid=sid)
        assert st == 404, st
    finally:
        s.stop()


@test
def libmicrohttpd_is_loaded_only_for_the_http_front():
    """libmicrohttpd is not linked: the HTTP front loads it at start (an
    appliance on stdio never maps it: test_http_upstream). Serving HTTP, it
    is mapped and answers; with it unloadable (an empty file bound over it
    in a mount namespace of the test's own) the start is refused, naming
    the library."""
    s = Served()
    try:
        assert maps_lib(s.proc.pid, "libmicrohttpd")
        st, _, text = s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "raw", "version": "0"}}})
        assert st == 200 and json.loads(text)["result"]["protocolVersion"] == "2025-11-25", text
    finally:
        s.stop()
    blank = tempfile.NamedTemporaryFile(prefix="appliance-blank.")
    try:
        argv = hidden(system_lib("libmicrohttpd.so.12"), blank.name,
                      gk.run_argv(http_policy(free_port())))
        r = subprocess.run(argv, input=START_INPUT, capture_output=True, timeout=60)
        assert r.returncode == 1, r
        assert b"http: libmicrohttpd.so.12 could not be loaded" in r.stderr, r.stderr
        assert b"; install the Debian package libmicrohttpd12\n" in r.stderr, r.stderr
    finally:
        blank.close()


@test
def the_v2_sdk_client_runs_cells_over_http_in_both_eras():
    s = Served()
    try:
        for era in ("legacy", "2026-07-28"):
            argv = [gk.node(), CLIENT2, "--negotiation", era, "--url",
                    "http://127.0.0.1:%d/mcp" % s.port, "--token", BETA, "--call",
                    json.dumps({"name": "run_python", "arguments": {
                        "code": "print(await toy.echo(text='over http'))"}})]
            r = subprocess.run(argv, capture_output=True, timeout=180)
            assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-3000:]
            out = json.loads(r.stdout)
            assert out["version"] == ("2025-11-25" if era == "legacy" else era), out
            got = out["calls"][0]["result"]["structuredContent"]["stdout"]
            assert "over http" in got, (era, out["calls"])
    finally:
        s.stop()


@test
def the_v1_sdk_client_runs_cells_over_http():
    s = Served()
    try:
        argv = [gk.node(), os.path.join(gk.ROOT, "tests", "mcp-client.mjs"), "--timeout",
                "120000", "--url", "http://127.0.0.1:%d/mcp" % s.port, "--token", ALPHA,
                "--call", json.dumps({"name": "run_python", "arguments": {
                    "code": "print((await toy.add(a=20, b=22))['sum'])"}})]
        r = subprocess.run(argv, capture_output=True, timeout=180)
        assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-3000:]
        out = json.loads(r.stdout)
        assert [t["name"] for t in out["tools"]] == ["run_python"], out
        assert out["calls"][0]["result"]["structuredContent"]["stdout"] == "42\n", out
    finally:
        s.stop()


@test
def approvals_reach_the_http_client_in_both_eras():
    s = Served(gate=True)
    note = ("try:\n    print(await toy.write_note(text='n'))\n"
            "except ToolError as e:\n    print('refused:', e)")
    try:
        for era in ("legacy", "2026-07-28"):
            for answer, want in (("accept", "noted"), ("decline", "no approval")):
                argv = [gk.node(), CLIENT2, "--negotiation", era, "--url",
                        "http://127.0.0.1:%d/mcp" % s.port, "--token", ALPHA, "--elicit",
                        answer, "--call",
                        json.dumps({"name": "run_python", "arguments": {"code": note}})]
                r = subprocess.run(argv, capture_output=True, timeout=180)
                assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-3000:]
                out = json.loads(r.stdout)
                got = out["calls"][0]["result"]["structuredContent"]["stdout"]
                assert want in got, (era, answer, got)
                assert [e["answer"] for e in out["elicitations"]] == [answer], out
                assert out["elicitations"][0]["message"].startswith("toy.write_note"), out
    finally:
        s.stop()


@test
def fifty_clients_at_once_each_get_their_own_answer_and_a_slow_one_holds_nothing():
    s = Served(limits={"http_slow_s": 3}, many=50)
    results = {}

    def one(i):
        code_ = "print(await toy.echo(text='client %d'))" % i
        try:
            st, _, text = s.post(call(code_, i), token=many_token(i))
            results[i] = (st, sse_messages(text)[-1] if st == 200 else text)
        except Exception as e:  # noqa: BLE001 - reported below
            results[i] = (None, repr(e))

    try:
        # a client sending its request a byte at a time, beside the others
        slow = socket.create_connection(("127.0.0.1", s.port))
        slow.sendall(b"P")
        threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        slow.settimeout(30)
        try:
            for b in b"OST /mcp HTTP/1.1\r\n":
                slow.sendall(bytes([b]))
                time.sleep(1)
            dropped = slow.recv(1) == b""
        except (BrokenPipeError, ConnectionResetError):
            dropped = True
        slow.close()
    finally:
        s.stop()
    assert dropped, "a client trickling a byte a second was not dropped"
    assert sorted(results) == list(range(50)), sorted(results)
    for i, (st, msg) in results.items():
        assert st == 200, (i, st, msg)
        assert msg["id"] == i, (i, msg)
        # each answer is its own client's: no crosstalk
        assert msg["result"]["structuredContent"]["stdout"] == "client %d\n" % i, (i, msg)


LOG_LINE = re.compile(r"^(\S+) appliance\[\d+\] \w+ run=([0-9a-f]+): (.*)$")


def run_events(log):
    """The runs in an appliance's log: each run's client (from its
    `run_python:` line), and every line about a run in order, as (time in
    seconds, run id, text)."""
    clients, events = {}, []
    for line in log.splitlines():
        m = LOG_LINE.match(line)
        if not m:
            continue
        stamp, rid, text = m.groups()
        t = time.mktime(time.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S")) + float(stamp[19:-1])
        got = re.match(r"run_python: \d+ bytes of code \((\S+), ", text)
        if got:
            clients[rid] = got.group(1)
        events.append((t, rid, text))
    return clients, events


def starts(log):
    """The client of each run that got a sandbox, in the order they got one."""
    clients, events = run_events(log)
    return [clients[rid] for _, rid, text in events if text.startswith("sandbox ")]


def burst(s, n, code_):
    """n runs of code_ from alpha, each on a connection of its own (held
    open: a connection closed cancels its run), once every one has arrived."""
    before = s.log().count("run_python: ")
    socks = []
    for i in range(n):
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(raw_post(s.port, call(code_, 100 + i)))
        socks.append(sock)
    deadline = time.time() + 60
    while s.log().count("run_python: ") < before + n:
        assert time.time() < deadline, s.log()
        time.sleep(0.02)
    return socks


@test
def one_clients_burst_leaves_a_slot_and_another_clients_cell_starts_at_once():
    """With the defaults (4 cells, and one client's share one fewer), alpha
    sends 16 cells that sleep: 3 run, 13 wait. beta's print() takes the
    slot left at once, while alpha's cells still wait (first come, first
    served would start all of alpha's first: about 20 s). A
    waiting run whose client hangs up is cancelled without a sandbox, and
    the others that wait past their deadline (counted from arrival) end
    then, never started."""
    deadline_s = 15
    s = Served(limits={"deadline_s": deadline_s})
    socks = []
    try:
        socks = burst(s, 16, "import asyncio\nawait asyncio.sleep(5)")
        t0 = time.time()
        st, _, text = s.post(call("print('beta')", 1), token=BETA)
        waited = time.time() - t0
        assert st == 200, (st, text)
        answer = sse_messages(text)[-1]["result"]
        assert answer["structuredContent"]["stdout"] == "beta\n", (waited, answer)
        order = starts(s.log())
        print("beta's print answered after %.1f s; sandboxes in order: %s" % (waited, order))
        # beta's cell started while alpha's still waited, and alpha never
        # held more than its share
        assert "beta" in order and order.index("beta") < 15, order
        clients, events = run_events(s.log())
        held = 0
        for _, rid, text in events:
            if clients.get(rid) == "alpha" and text.startswith("sandbox "):
                held += 1
                assert held <= 3, events
            elif clients.get(rid) == "alpha" and text.startswith("ended: "):
                held -= 1
        # a waiting run whose client hangs up: cancelled, never started
        socks[-1].close()
        s.wait_log("ended without a run: cancelled while it waited for a free slot")
        clients, events = run_events(s.log())
        gone = [rid for _, rid, text in events if "cancelled while it waited" in text]
        assert len(gone) == 1, events
        assert not [e for e in events if e[1] == gone[0] and e[2].startswith("sandbox ")]
        # the rest that still wait end at their deadline, counted from arrival
        s.wait_log("the run waited for a free slot until its deadline passed", timeout=60)
        clients, events = run_events(s.log())
        arrived = {rid: t for t, rid, text in events if text.startswith("run_python: ")}
        expired = [(t, rid) for t, rid, text in events if "until its deadline passed" in text]
        for t, rid in expired:
            assert deadline_s - 0.1 <= t - arrived[rid] < deadline_s + 5, (t - arrived[rid])
            assert not [e for e in events if e[1] == rid and e[2].startswith("sandbox ")]
    finally:
        for sock in socks:
            sock.close()
        s.stop()


@test
def freed_slots_go_to_the_clients_in_turn():
    """With a share as large as the slots (an explicit http_cells_per_client
    wins over the default), alpha's burst holds all 4; the first slot that
    frees goes to beta, who waited less long than alpha's other runs but
    whose turn it is."""
    s = Served(limits={"http_cells_per_client": 4})
    socks = []
    try:
        socks = burst(s, 8, "import asyncio\nawait asyncio.sleep(5)")
        st, _, text = s.post(call("print('beta')", 1), token=BETA)
        assert st == 200, (st, text)
        order = starts(s.log())
        assert order[:5] == ["alpha"] * 4 + ["beta"], order
    finally:
        for sock in socks:
            sock.close()
        s.stop()


@test
def a_client_that_hangs_up_mid_cell_has_its_cell_cancelled_and_sigterm_ends_the_rest():
    s = Served()
    try:
        sleeper = call("import asyncio\nawait asyncio.sleep(50)")
        sock = socket.create_connection(("127.0.0.1", s.port))
        sock.sendall(raw_post(s.port, sleeper))
        s.wait_log("run_python: ")
        s.wait_log("sandbox ")
        sock.close()
        s.wait_log("(cancelled)")
        # a second cell left running when the appliance is told to stop
        holder = socket.create_connection(("127.0.0.1", s.port))
        holder.sendall(raw_post(s.port, sleeper))
        deadline = time.time() + 60
        while s.log().count("sandbox ") < 2:
            assert time.time() < deadline, s.log()
            time.sleep(0.05)
        below = descendants(s.proc.pid)
        assert below, "no sandbox processes under the appliance"
        # SIGTERM drains (it would wait for the cell); a second stops at once
        s.proc.send_signal(signal.SIGTERM)
        s.wait_log("signal 15: draining")
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=60) == 0, s.log()
    finally:
        s.stop()
    holder.close()
    assert "signal 15: stopping" in s.log(), s.log()
    deadline = time.time() + 10  # a zombie of init's may take a moment
    while [p for p in below if alive(p)] and time.time() < deadline:
        time.sleep(0.1)
    assert [p for p in below if alive(p)] == [], "left behind: %s" % below


if __name__ == "__main__":
    main(globals())
