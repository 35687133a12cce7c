#!/usr/bin/env python3
"""MCP 2026-07-28 beside the legacy revisions, on stdio, end to end: the v2
SDK client (tests/mcp-client2.mjs) negotiating auto and pinned, the v1 SDK
client still on 2025-11-25, progress keeping a resetting client waiting,
cancellation in both eras, and raw lines for the per-request rules (mixed
eras, _meta, versions, ids in flight, discover, subscriptions).
"""

import contextlib
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import test, main  # noqa: E402
import gatewaykit as gk  # noqa: E402
from gatewaykit import code, node, run_argv, toy_policy  # noqa: E402

CLIENT2 = os.path.join(gk.ROOT, "tests", "mcp-client2.mjs")
REV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
META = {REV: "2026-07-28", CAPS: {}, "io.modelcontextprotocol/clientInfo":
        {"name": "test_revisions", "version": "0"}}


def counted_argv(sig, counter):
    """`appliance run` through a shell that notes each start in counter, and
    appends each one's stderr to counter.log too (the SDK drops a throwaway
    copy's)."""
    return ["/bin/sh", "-c", 'echo start >> "$0"; exec "$@" 2>> "$0.log"', counter] + \
        run_argv(sig)


def client2(sig, negotiation, calls=(), in_place=False, extra=(), timeout=240):
    """Run mcp-client2.mjs; return (its document, appliance starts, stderr)."""
    with tempfile.NamedTemporaryFile(prefix="appliance-starts.", delete=False) as f:
        counter = f.name
    try:
        argv = [node(), CLIENT2, "--negotiation", negotiation] + (["--in-place"] if in_place
                                                                   else [])
        for c in calls:
            argv += ["--call", json.dumps(c)]
        r = subprocess.run(argv + list(extra) + ["--"] + counted_argv(sig, counter),
                           capture_output=True, timeout=timeout)
        with open(counter) as f:
            starts = f.read().count("start")
        with open(counter + ".log", encoding="utf-8", errors="replace") as f:
            logs = f.read()
    finally:
        os.unlink(counter)
        if os.path.exists(counter + ".log"):
            os.unlink(counter + ".log")
    err = r.stderr.decode("utf-8", "replace") + logs
    assert r.returncode == 0, r.stdout.decode() + err[-4000:]
    return json.loads(r.stdout), starts, err


def structured(call):
    assert "result" in call, call
    return call["result"]["structuredContent"]


ADD = code("r = await toy.add(a=2, b=3)\nprint(r['sum'])")


def check_modern(out):
    assert out["era"] == "modern" and out["version"] == "2026-07-28", out
    assert out["server"]["name"] == "appliance", out
    tool = out["tools"][0]
    assert tool["name"] == "run_python" and "outputSchema" in tool, tool
    assert "toy.add(" in tool["description"], tool
    # the SDK validated structuredContent against the outputSchema
    sc = structured(out["calls"][0])
    assert sc["stdout"] == "5\n" and sc["calls"] == 1 and sc["error"] is None, sc


@test
def the_v2_client_lands_on_2026_07_28_with_auto_on_one_process():
    out, starts, _ = client2(toy_policy(), "auto", [ADD], in_place=True)
    check_modern(out)
    assert starts == 1, starts


@test
def the_v2_client_lands_on_2026_07_28_pinned():
    out, starts, _ = client2(toy_policy(), "2026-07-28", [ADD], in_place=True)
    check_modern(out)
    assert starts == 1, starts
    # the SDK's own transport, pinned too: it probes on a copy of its own
    out, starts, _ = client2(toy_policy(), "2026-07-28", [ADD])
    check_modern(out)
    assert starts == 2, starts


@test
def the_v2_clients_own_transport_probes_on_a_throwaway_copy_and_lands_modern():
    # StdioClientTransport itself always probes server/discover on a second
    # process (the SDK's design, for servers that die on a pre-initialize
    # request); the answer there is a DiscoverResult, so no fallback and no
    # third start.
    out, starts, err = client2(toy_policy(), "auto", [ADD])
    check_modern(out)
    assert starts == 2, starts
    # the copy only answered server/discover: it started no server, no
    # runtime and no sandbox; the tools started once, in the other
    assert err.count("the image, the sandbox runtime and the servers start when the first "
                     "request needs them") == 2, err[-3000:]
    assert err.count("a request needs the tools: starting them") == 1, err[-3000:]
    assert err.count("upstream toy: ready") == 1, err[-3000:]


@test
def legacy_clients_still_land_on_2025_11_25():
    out, starts, err = client2(toy_policy(), "legacy", [ADD])
    assert out["era"] == "legacy" and out["version"] == "2025-11-25", out
    assert structured(out["calls"][0])["stdout"] == "5\n", out
    assert "initialize: revision 2025-11-25" in err, err[-2000:]
    assert starts == 1
    # the v1 SDK client
    r = subprocess.run([node(), gk.CLIENT, "--call", json.dumps(ADD), "--"] +
                       run_argv(toy_policy()), capture_output=True, timeout=180)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, err[-3000:]
    assert "initialize: revision 2025-11-25" in err, err[-2000:]
    v1 = json.loads(r.stdout)
    assert structured(v1["calls"][0])["stdout"] == "5\n", v1


PRINTING = code("import time\nfor i in range(30):\n    print('tick', i)\n    time.sleep(1)\n")
SILENT = code("import time\ntime.sleep(20)\nprint('woke')\n")


@test
def a_30s_printing_cell_outlives_a_12s_timeout_that_resets_on_progress():
    limits = {"deadline_s": 90}
    out, _, _ = client2(toy_policy(limits=limits), "auto", [PRINTING], in_place=True,
                        extra=["--timeout", "12000", "--reset-on-progress"])
    call = out["calls"][0]
    sc = structured(call)
    assert sc["stdout"].count("tick") == 30 and not sc["stopped"], sc
    assert call["ms"] >= 29000, call["ms"]
    prog = call["progress"]
    # on print, at most one per 250 ms, rising, with the output's tail
    assert 10 <= len(prog) <= 200, len(prog)
    assert all(b["progress"] > a["progress"] for a, b in zip(prog, prog[1:])), prog
    assert any("tick 29" in p.get("message", "") for p in prog[-3:]), prog[-3:]
    # the same cell in a client that does not reset: it gives up at 12 s
    out, _, err = client2(toy_policy(limits=limits), "auto", [PRINTING], in_place=True,
                          extra=["--timeout", "12000"])
    call = out["calls"][0]
    assert "error" in call and "timed out" in call["error"]["message"].lower(), call
    assert call["ms"] < 29000, call["ms"]


@test
def a_silent_cell_is_kept_alive_by_the_heartbeat_in_the_legacy_era_too():
    out, _, _ = client2(toy_policy(limits={"deadline_s": 60}), "legacy", [SILENT],
                        extra=["--timeout", "8000", "--reset-on-progress"])
    assert out["era"] == "legacy", out
    call = out["calls"][0]
    assert structured(call)["stdout"] == "woke\n", call
    # nothing printed: the reports are the heartbeat's
    assert len(call["progress"]) >= 5, call["progress"]


@test
def an_aborted_call_is_cancelled_in_both_eras():
    hang = code("import time\ntime.sleep(60)\n")
    for negotiation, in_place in (("auto", True), ("legacy", False)):
        out, _, err = client2(toy_policy(limits={"deadline_s": 90}), negotiation, [hang],
                              in_place=in_place, extra=["--abort-after", "3000"])
        call = out["calls"][0]
        assert "error" in call and call["ms"] < 30000, call
        assert "ended: cancelled" in err and "(cancelled)" in err, err[-3000:]


# ---- raw lines ---------------------------------------------------------------------

def req(s, method, params=None, rid=None, meta=True):
    params = dict(params or {})
    if meta:
        params["_meta"] = dict(META, **(meta if isinstance(meta, dict) else {}))
    if rid is None:
        return s.request(method, params)
    s.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    return None


@test
def both_eras_and_their_rules_on_one_connection():
    with gk.Session(toy_policy()) as s:  # Session opens with a legacy initialize
        # modern and legacy calls side by side, each answered by its own rules
        modern = req(s, "tools/call", code("print(await toy.add(a=1, b=1))"))
        legacy = s.request("tools/call", code("print(await toy.add(a=2, b=2))"))
        assert modern["result"]["resultType"] == "complete", modern
        assert modern["result"]["structuredContent"]["stdout"] == "{'sum': 2}\n", modern
        assert "resultType" not in legacy["result"], legacy
        assert legacy["result"]["structuredContent"]["stdout"] == "{'sum': 4}\n", legacy
        tl = req(s, "tools/list")["result"]
        assert tl["ttlMs"] >= 0 and tl["cacheScope"] == "private", tl
        assert "ttlMs" not in s.request("tools/list")["result"]
        # discover after initialize
        d = req(s, "server/discover")["result"]
        assert "2026-07-28" in d["supportedVersions"], d
        assert d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "appliance", d
        # versions and _meta
        bad = req(s, "tools/list", meta={REV: "2099-01-01"})["error"]
        assert bad["code"] == -32022 and bad["data"]["requested"] == "2099-01-01", bad
        assert "2026-07-28" in bad["data"]["supported"], bad
        miss = s.request("tools/list", {"_meta": {REV: "2026-07-28"}})["error"]
        assert miss["code"] == -32602 and "clientCapabilities" in miss["message"], miss
        assert req(s, "ping")["error"]["code"] == -32601


@contextlib.contextmanager
def raw_stdio():
    """A toy-policy appliance spoken to one line at a time, with nothing
    sent first: yields ask(msg), which sends msg and reads one answer. At
    the end its input closes; the exit status is in the list it yields
    second, once the block is left."""
    proc = subprocess.Popen(run_argv(toy_policy()), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    status = []

    def ask(msg):
        proc.stdin.write(json.dumps(msg).encode() + b"\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())
    try:
        yield ask, status
    finally:
        proc.stdin.close()
        status.append(proc.wait(timeout=60))


@test
def discover_answers_before_initialize_and_legacy_requests_wait_for_it():
    with raw_stdio() as (ask, _):
        d = ask({"jsonrpc": "2.0", "id": "server-discover-probe-1", "method": "server/discover",
                 "params": {"_meta": META}})
        assert d["result"]["resultType"] == "complete", d
        assert d["result"]["capabilities"]["tools"] == {"listChanged": True}, d
        assert d["result"]["cacheScope"] == "public" and "serverInfo" not in d["result"], d
        t = ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert t["error"]["code"] == -32602, t
        t = ask({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": META}})
        assert t["result"]["tools"][0]["name"] == "run_python", t


@test
def a_wrongly_typed_meta_is_refused_and_the_connection_goes_on():
    with raw_stdio() as (ask, status):
        bad = [("2026-07-28", "_meta must be an object"),
               ({REV: 20260728, CAPS: {}}, "protocolVersion (a string)"),
               ({REV: "2026-07-28", CAPS: "{}"}, "clientCapabilities (an object)"),
               (dict(META, **{"io.modelcontextprotocol/clientInfo": "me"}), "clientInfo")]
        for rid, (meta, words) in enumerate(bad, 1):
            e = ask({"jsonrpc": "2.0", "id": rid, "method": "tools/list",
                     "params": {"_meta": meta}})
            assert e["id"] == rid and e["error"]["code"] == -32602, e
            assert words in e["error"]["message"], e
        # refused one by one: the connection serves the next proper request
        t = ask({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": META}})
        assert t["result"]["resultType"] == "complete", t
        assert t["result"]["tools"][0]["name"] == "run_python", t
    assert status == [0], status


@test
def a_reused_id_in_flight_is_refused_and_the_first_answered_once():
    with gk.Session(toy_policy(limits={"deadline_s": 60})) as s:
        slow = code("import time\ntime.sleep(3)\nprint('first')")
        req(s, "tools/call", slow, rid="dup")
        req(s, "tools/call", code("print('second')"), rid="dup")
        s.send({"jsonrpc": "2.0", "id": "dup", "method": "tools/call",
                "params": code("print('third, legacy')")})
        # the two reuses are refused without an id, so the first keeps its one answer
        for n in s.wait_nulls(2):
            assert n["error"]["code"] == -32600 and "in flight" in n["error"]["message"], n
        first = s.wait("dup")
        assert first["result"]["structuredContent"]["stdout"] == "first\n", first
        assert "reusing the id" in s.log(), s.log()
        # answered: the id may be used again, and only one answer came for it
        req(s, "tools/call", code("print('again')"), rid="dup")
        assert s.wait("dup")["result"]["structuredContent"]["stdout"] == "again\n"
        assert len(s.nulls) == 2, s.nulls


@test
def a_listening_client_hears_the_tool_list_change():
    with gk.Session(toy_policy(args=["--list-changed-after", "1"])) as s:
        req(s, "subscriptions/listen", {"notifications": {"toolsListChanged": True}},
            rid="listen:0")
        ack = s.wait_note("notifications/subscriptions/acknowledged")
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen:0"
        assert ack["params"]["notifications"] == {"toolsListChanged": True}, ack
        assert s.cell("print(await toy.add(a=1, b=2))") == "{'sum': 3}\n"
        # the legacy session hears it plain, the stream with its id
        seen = s.wait_notes("notifications/tools/list_changed", 2)
        tagged = [n for n in seen if "params" in n]
        assert len(tagged) == 1, seen
        assert tagged[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == \
            "listen:0", tagged
        assert "toy.late(" in req(s, "tools/list")["result"]["tools"][0]["description"]


if __name__ == "__main__":
    main()
