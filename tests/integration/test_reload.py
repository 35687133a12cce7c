"""test_reload.py: `appliance run` takes a new signed policy without a restart.

An HTTP appliance serves a policy file that the test signs again in place; SIGHUP
reads it again. A v1 SDK client (tests/mcp-live.mjs) stays connected across a reload
that adds a server and a tool: it is told the list changed, lists again and calls the
new tool, while a cell that started before the reload ends normally under the policy it
started with. Reloads that must fail (a lower serial, a bad signature, an expired
policy, a wrong image digest, a server that cannot start, a field read only at start)
are each refused with their reason in the log and the audit log; the old tools go on
working and the rollback floor stays where it was. A changed limits.files reaches the
next cell without a pool refill.

Runs as root; needs build/appliance, build/toy-server, build/image and the npm packages.
"""

import hashlib
import json
import os
import subprocess

from harness import main, test
import gatewaykit as gk
from cellkit import APPLIANCE
from livekit import Client, Live, TOKEN, post, text

# A cell that runs until the test drops a marker the toy can see, then
# prints what it had: it starts before the reload and ends after it.
WAITER = """
import time
while True:
    seen = await toy.probe(paths=[%r])
    if "absent" not in json.dumps(seen):
        break
    time.sleep(0.2)
print("old policy: echo", await toy.echo(text="still here"))
"""


@test
def a_connected_client_sees_a_reload_that_adds_a_server_and_a_cell_in_flight_keeps_its_policy():
    live = Live()
    client = None
    try:
        live.start(live.doc())
        floor0 = live.floor()
        client = Client(live.port)
        before = client.list()
        assert "toy_echo" in before["description"] or "echo" in before["description"], before
        assert "other" not in before["description"], before["description"]
        mark = os.path.join(live.share, "go")
        client.cell("w", "import json\n" + WAITER % mark)
        live.wait_log("run_python:")
        live.sign(live.doc(servers={"toy": gk.toy_server(), "other": gk.toy_server()},
                           roles={"r": {"tools": ["toy.*", "other.*"]}}))
        line = live.reload("reloaded")
        assert "1 server started" in line, line
        # the client is told, lists again, and the new server's tools are there
        client.next(lambda m: m["op"] == "list_changed")
        after = client.list()
        assert after["description"] != before["description"]
        assert "other" in after["description"], after["description"]
        client.cell("n", "print(await other.add(a=2, b=3))")
        got = client.answer("n")
        assert "5" in text(got), json.dumps(got)
        # the cell admitted before the reload ends normally, under the old policy
        with open(mark, "w") as f:
            f.write("go")
        os.chmod(mark, 0o644)
        old = client.answer("w")
        assert not old.get("isError"), old
        assert "old policy: echo" in text(old) and "still here" in text(old), old
        assert live.floor() == live.kit.serial and live.floor() > floor0
        ok = live.audit_lines("reload")[-1]
        assert ok["outcome"] == "ok" and ok["by"] == "SIGHUP" and ok["servers_started"] == 1, ok
        assert live.metric('appliance_reloads_total{outcome="ok"}') == 1
        assert live.metric("appliance_policy_serial") == live.kit.serial
        live.stop()
    finally:
        if client:
            client.close()
        live.cleanup()


@test
def refused_reloads_change_nothing_and_say_why():
    live = Live()
    try:
        good = live.doc()
        live.start(good)
        floor0 = live.floor()
        bad_key = os.path.join(live.dir, "other.key")
        subprocess.run([APPLIANCE, "keygen", "--public", os.path.join(live.dir, "other.pub"),
                        "--secret", bad_key], check=True, capture_output=True)
        bogus_digest = "sha256:" + "0" * 64
        cases = [
            ("a lower serial", live.doc(serial=floor0 - 1), None, "serial"),
            ("a key not trusted", live.doc(), bad_key, "trust"),
            ("an expired policy", live.doc(expires="2020-01-01T00:00:00Z"), None, "expire"),
            ("a wrong image digest",
             live.doc(image=(os.path.join(gk.ROOT, "build", "image"), bogus_digest)), None,
             "image"),
            ("a server that cannot start",
             live.doc(servers={"toy": gk.toy_server(), "gone": {"command": ["/nonexistent/x"]}}),
             None, "gone"),
            ("a listener changed", dict(live.doc(), http={"listen": ["127.0.0.1:%d" % gk.free_port()]}),
             None, "http"),
        ]
        for what, doc, key, word in cases:
            live.sign(doc, key)
            line = live.reload("reload refused")
            assert word in line.lower(), (what, line)
            refused = live.audit_lines("reload")[-1]
            assert refused["outcome"] == "refused" and word in refused["reason"].lower(), \
                (what, refused)
            assert live.floor() == floor0, what
        assert live.metric('appliance_reloads_total{outcome="refused"}') == len(cases)
        assert live.metric('appliance_reloads_total{outcome="ok"}') in (None, 0)
        assert live.metric("appliance_policy_serial") == floor0
        # still serving the first policy
        client = Client(live.port)
        try:
            client.cell("x", "print(await toy.add(a=40, b=2))")
            assert "42" in text(client.answer("x")), live.log()
        finally:
            client.close()
        live.stop()
    finally:
        live.cleanup()


@test
def a_changed_sandbox_limit_drains_the_pool_and_the_next_cell_has_it():
    live = Live()
    client = None
    probe = ("import resource\n"
             "print('as_mib', resource.getrlimit(resource.RLIMIT_AS)[0] // 2**20)")
    try:
        live.start(live.doc(limits={"memory_mb": 256}))
        client = Client(live.port)
        client.cell("a", probe)
        before = text(client.answer("a"))
        live.sign(live.doc(limits={"memory_mb": 384}))
        line = live.reload("reloaded")
        assert "the pool is filled again" in line, line
        client.cell("b", probe)
        after = text(client.answer("b"))
        assert "as_mib 256" in before and "as_mib 384" in after, (before, after)
        assert live.audit_lines("reload")[-1]["pool"] is True
        live.stop()
    finally:
        if client:
            client.close()
        live.cleanup()


@test
def a_reload_changes_what_comes_back_from_out_for_the_next_cell():
    """limits.files goes to the runner in the cell line: a reload that changes
    it keeps the pool, and the next cell has it."""
    live = Live()
    client = None
    files = "for n in 'abc':\n    open('/out/%s.txt' % n, 'w').write(n)\n"
    try:
        live.start(live.doc(limits={"files": {"max_count": 3}}))
        client = Client(live.port)
        client.cell("a", files)
        before = client.answer("a")
        live.sign(live.doc(limits={"files": {"max_count": 1}}))
        line = live.reload("reloaded")
        assert "the pool is filled again" not in line, line
        client.cell("b", files)
        after = client.answer("b")
        got = [[f.get("reason") for f in r["structuredContent"]["files"]] for r in (before, after)]
        assert got == [[None, None, None], [None, "max_count", "max_count"]], got
        assert [len(r["content"]) for r in (before, after)] == [4, 2], (before, after)
        assert live.audit_lines("reload")[-1]["pool"] is False
        live.stop()
    finally:
        if client:
            client.close()
        live.cleanup()


@test
def a_token_taken_out_ends_its_sessions_and_is_refused_from_the_next_request():
    live = Live()
    try:
        live.start(live.doc())
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "0"}}}
        st, sid, _ = post(live.port, init, TOKEN)
        assert st == 200 and sid, st
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        assert post(live.port, listing, TOKEN, sid)[0] == 200
        other = "appliance_test-token-other-0123456789"
        doc = live.doc()
        doc["clients"] = {"tokens": [{"name": "ops2", "role": "r",
                                      "sha256": hashlib.sha256(other.encode()).hexdigest()}]}
        live.sign(doc)
        live.reload("reloaded")
        live.wait_log("ops: its token is no longer in the policy: 1 session and 0 tasks ended")
        assert post(live.port, listing, TOKEN, sid)[0] == 401
        assert post(live.port, init, TOKEN)[0] == 401
        assert post(live.port, init, other)[0] == 200
        live.stop()
    finally:
        live.cleanup()

def code_tool(name, code, file=None):
    """A code tool over the toy: {a, b} in, {total} out."""
    t = {"name": name, "description": "Sum a and b, by the toy.",
         "input_schema": {"type": "object", "required": ["a", "b"],
                          "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
         "output_schema": {"type": "object", "required": ["total"],
                           "properties": {"total": {"type": "integer"}}},
         "uses": ["toy.add"]}
    if file:
        t.update(file=file, sha256=hashlib.sha256(code.encode()).hexdigest())
    else:
        t["code"] = code
    return t


@test
def a_reload_changes_a_code_tool_and_the_client_is_told():
    live = Live()
    client = None
    prog = os.path.join(live.dir, "sum.py")
    v1 = "{'total': (await toy.add(a=args['a'], b=args['b']))['sum']}\n"
    v2 = "{'total': (await toy.add(a=args['a'], b=args['b']))['sum'] + 100}\n"
    role = {"r": {"tools": ["toy.*"], "code_tools": ["*"]}}
    try:
        with open(prog, "w") as f:
            f.write(v1)
        live.start(live.doc(roles=role, code_tools=[code_tool("sum", v1, prog)]))
        client = Client(live.port)
        assert client.list()["tools"] == ["run_python", "sum"]
        client.send({"op": "call", "id": "a", "name": "sum", "arguments": {"a": 1, "b": 2}})
        assert client.answer("a")["structuredContent"] == {"total": 3}
        # the program's file changes under a signed policy: its reload is
        # refused, naming the file and both digests (sign itself would
        # have refused to sign it so)
        live.sign(live.doc(roles=role, code_tools=[code_tool("sum", v1, prog)]))
        with open(prog, "w") as f:
            f.write(v2)
        line = live.reload("reload refused")
        assert prog in line and hashlib.sha256(v2.encode()).hexdigest() in line, line
        client.send({"op": "call", "id": "b", "name": "sum", "arguments": {"a": 1, "b": 2}})
        assert client.answer("b")["structuredContent"] == {"total": 3}
        # signed with the new digest, and a second tool: taken, and told
        live.sign(live.doc(roles=role, code_tools=[code_tool("sum", v2, prog),
                                                   code_tool("sum_inline", v1)]))
        live.reload("reloaded")
        client.next(lambda m: m["op"] == "list_changed")
        assert client.list()["tools"] == ["run_python", "sum", "sum_inline"]
        client.send({"op": "call", "id": "c", "name": "sum", "arguments": {"a": 1, "b": 2}})
        assert client.answer("c")["structuredContent"] == {"total": 103}
        # arguments that do not pass: refused before a sandbox, and counted
        client.send({"op": "call", "id": "d", "name": "sum", "arguments": {"a": "1", "b": 2}})
        bad = client.answer("d")
        assert bad["isError"] is True and "input_schema" in text(bad), bad
        assert live.metric('appliance_cells_total{outcome="refused",reason="arguments"}') == 1
        starts = [e for e in live.audit_lines("run.start") if e.get("tool") == "sum"]
        assert [e["program"] for e in starts] == [
            "sha256:" + hashlib.sha256(v.encode()).hexdigest() for v in (v1, v1, v2)], starts
        live.stop()
    finally:
        if client:
            client.close()
        live.cleanup()


if __name__ == "__main__":
    main()
