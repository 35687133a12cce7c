"""test_run.py: `appliance run` as an MCP server on stdio, driven by the
official TypeScript SDK client (tests/mcp-client.mjs) and by raw JSON-RPC
lines, with policies signed for the test."""

import json
import os
import re
import subprocess
import time

from harness import main, test
from cellkit import APPLIANCE, ROOT, digest, runsc_pids_of
from policykit import INIT, INITIALIZED, START_INPUT, Signer, call

_kit = Signer("appliance-run-test.")
CLIENT = os.path.join(ROOT, "tests", "mcp-client.mjs")


def work():
    return _kit.dir()


def policy(limits=None, expires="2099-01-01T00:00:00Z", extra=None):
    """A freshly signed policy with a serial above every earlier one."""
    return _kit.policy(limits, expires=expires, **(extra or {}))


def run_argv(sig):
    return _kit.argv(sig)


def sdk(sig, calls, timeout=120):
    argv = ["node", CLIENT]
    for c in calls:
        argv += ["--call", json.dumps(c)]
    r = subprocess.run(argv + ["--timeout", "60000", "--"] + run_argv(sig), capture_output=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout)


def code(src):
    return {"name": "run_python", "arguments": {"code": src}}


@test
def the_sdk_client_lists_and_runs_cells():
    out = sdk(policy(), [code("import asyncio, json\n"
                              "async def f(x):\n    return x * 2\n"
                              "print(json.dumps(await asyncio.gather(*(f(i) for i in range(4)))))\n"
                              "{'ok': True}"),
                         code("raise KeyError('k')"),
                         code("while True:\n    pass"),
                         {"name": "run_python", "arguments": {"code": 5}},
                         {"name": "run_python", "arguments": {"code": "1", "extra": 1}},
                         {"name": "shell", "arguments": {}}])
    assert out["server"]["name"] == "appliance"
    assert [t["name"] for t in out["tools"]] == ["run_python"]
    ok, raised, loop, bad, extra, unknown = out["calls"]
    assert ok["result"]["isError"] is False
    assert ok["result"]["structuredContent"]["stdout"] == "[0, 2, 4, 6]\n"
    assert ok["result"]["structuredContent"]["result"] == {"ok": True}
    assert json.loads(ok["result"]["content"][0]["text"]) == ok["result"]["structuredContent"]
    assert raised["result"]["isError"] is True
    assert "KeyError" in raised["result"]["structuredContent"]["error"]
    assert loop["result"]["isError"] is True
    assert loop["result"]["structuredContent"]["reason"] == "deadline"
    assert bad["result"]["isError"] is True and extra["result"]["isError"] is True
    assert unknown["error"]["code"] == -32602


def raw_session(sig, lines, wait=0.0, read_until=None, timeout=60):
    """Send lines to `appliance run`, then read answers until read_until(list)
    says enough (or EOF); returns the parsed answers."""
    p = subprocess.Popen(run_argv(sig), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    for line in lines:
        p.stdin.write((line if isinstance(line, str) else json.dumps(line)).encode() + b"\n")
    p.stdin.flush()
    answers, deadline = [], time.time() + timeout
    while time.time() < deadline and (read_until is None or not read_until(answers)):
        line = p.stdout.readline()
        if not line:
            break
        answers.append(json.loads(line))
    time.sleep(wait)
    p.stdin.close()
    p.wait(timeout=30)
    p.stdout.close()
    p.stderr.close()
    return answers, p


def by_id(answers):
    return {json.dumps(a.get("id")): a for a in answers}


@test
def malformed_input_gets_json_rpc_errors_and_serving_goes_on():
    lines = [INIT, INITIALIZED, "not json", '{"jsonrpc":"2.0","id":1,"method":"ping","x":1}',
             "[" + json.dumps(call(2, "print(1)")) + "]", '{"jsonrpc":"1.0","id":3,"method":"ping"}',
             {"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe"},
             {"jsonrpc": "2.0", "id": 7, "method": "ping"}, {"jsonrpc": "2.0", "id": "five",
                                                            "method": "tools/list"},
             call(6, "print('still here')")]
    answers, _ = raw_session(policy(), lines,
                             read_until=lambda a: any(x.get("id") == 6 for x in a))
    ids = by_id(answers)
    assert ids["0"]["result"]["protocolVersion"] == "2025-11-25"
    nulls = [a for a in answers if a.get("id") is None]
    assert [a["error"]["code"] for a in nulls] == [-32700, -32600], nulls
    assert ids["1"]["error"]["code"] == -32600
    assert ids["3"]["error"]["code"] == -32600
    assert ids["4"]["error"]["code"] == -32601
    assert ids["7"]["result"] == {}
    assert ids['"five"']["result"]["tools"][0]["name"] == "run_python"
    assert ids["6"]["result"]["structuredContent"]["stdout"] == "still here\n"


@test
def two_cells_at_once_see_only_their_own_output():
    src = "import time\nfor i in range(5):\n    print('%s', i)\n    time.sleep(0.1)\n"
    answers, _ = raw_session(policy({"cells": 2}), [INIT, INITIALIZED, call("a", src % "A"),
                                                     call("b", src % "B")],
                             read_until=lambda a: len(a) >= 3)
    ids = by_id(answers)
    a = ids['"a"']["result"]["structuredContent"]["stdout"]
    b = ids['"b"']["result"]["structuredContent"]["stdout"]
    assert a == "".join("A %d\n" % i for i in range(5)), a
    assert b == "".join("B %d\n" % i for i in range(5)), b


@test
def waiting_runs_are_capped():
    calls = [call("long", "import time\ntime.sleep(20)")]
    calls += [call(i, "print(%d)" % i) for i in range(70)]

    def refusals(answers):
        return [a for a in answers if a.get("result", {}).get("isError") and
                "too many runs" in a["result"]["content"][0]["text"]]
    answers, _ = raw_session(policy({"cells": 1, "deadline_s": 30}),
                             [INIT, INITIALIZED] + calls,
                             read_until=lambda a: len(refusals(a)) >= 6, timeout=30)
    refused = refusals(answers)
    # one runs, 64 wait their turn, the other 6 are refused at once
    assert len(refused) == 6, answers
    assert sorted(a["id"] for a in refused) == list(range(64, 70)), refused


@test
def cancellation_stops_the_cell_and_its_sandbox():
    sig = policy({"pool": 0})  # so the only sandbox is the cancelled cell's
    p = subprocess.Popen(run_argv(sig), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    for m in (INIT, INITIALIZED, call(1, "import time\ntime.sleep(60)")):
        p.stdin.write(json.dumps(m).encode() + b"\n")
    p.stdin.flush()
    assert json.loads(p.stdout.readline())["id"] == 0
    deadline = time.time() + 20
    while not runsc_pids_of(p.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert runsc_pids_of(p.pid), "no sandbox started"
    time.sleep(1)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                              "params": {"requestId": 1, "reason": "test"}}).encode() + b"\n")
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode() + b"\n")
    p.stdin.flush()
    # the cancelled call gets no answer; the ping does
    assert json.loads(p.stdout.readline()) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    deadline = time.time() + 10
    while runsc_pids_of(p.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not runsc_pids_of(p.pid), "the cancelled cell's sandbox is still there"
    p.stdin.close()
    assert p.wait(timeout=20) == 0
    p.stdout.close()
    p.stderr.close()


@test
def end_of_input_destroys_every_sandbox():
    sig = policy({"cells": 2})
    p = subprocess.Popen(run_argv(sig), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    for m in (INIT, INITIALIZED, call(1, "import time\ntime.sleep(60)"),
              call(2, "import time\ntime.sleep(60)")):
        p.stdin.write(json.dumps(m).encode() + b"\n")
    p.stdin.flush()
    deadline = time.time() + 20
    while len(runsc_pids_of(p.pid)) < 2 and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1)
    t = time.time()
    p.stdin.close()
    assert p.wait(timeout=20) == 0
    assert time.time() - t < 10
    left = [d for d in os.listdir("/run/appliance") if d.startswith("i-%d-" % p.pid)]
    assert left == [], left
    p.stdout.close()
    p.stderr.close()


@test
def an_expired_policy_stops_new_cells():
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 10))
    p = subprocess.Popen(run_argv(policy(expires=soon)), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def ask(m):
        p.stdin.write(json.dumps(m).encode() + b"\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())
    assert ask(INIT)["id"] == 0
    p.stdin.write(json.dumps(INITIALIZED).encode() + b"\n")
    assert ask(call(1, "print(1)"))["result"]["isError"] is False
    time.sleep(max(0.0, calendar_seconds(soon) - time.time() + 1))
    late = ask(call(2, "print(2)"))["result"]
    assert late["isError"] is True and "expired" in late["content"][0]["text"], late
    p.stdin.close()
    p.wait(timeout=20)
    p.stdout.close()
    p.stderr.close()
    # a policy that expired before the start is refused outright
    r = subprocess.run(run_argv(policy(expires="2020-01-01T00:00:00Z")), input=START_INPUT,
                       capture_output=True)
    assert r.returncode == 1 and b"expire" in r.stderr, r.stderr


def calendar_seconds(rfc3339):
    import calendar
    return calendar.timegm(time.strptime(rfc3339, "%Y-%m-%dT%H:%M:%SZ"))


@test
def run_takes_keys_only_from_a_trust_directory():
    sig = policy()
    r = subprocess.run([APPLIANCE, "run", "--policy", sig, "--trust",
                        os.path.join(work(), "trusted.d", "k.pub")], input=START_INPUT,
                       capture_output=True)
    assert r.returncode == 2 and b"spelled out" in r.stderr, r.stderr
    d = os.path.join(work(), "trusted.d")
    os.chmod(d, 0o777)
    try:
        r = subprocess.run(run_argv(sig), input=START_INPUT, capture_output=True)
        assert r.returncode == 1 and d.encode() in r.stderr, r.stderr
    finally:
        os.chmod(d, 0o755)


@test
def an_approver_that_cannot_run_is_refused():
    doc = {"approvals": {"command": "/nonexistent/approver"}}
    sig = policy(extra=doc)
    r = subprocess.run(run_argv(sig), input=b"", capture_output=True)
    want = ("appliance: %s: approvals.command /nonexistent/approver: No such file or directory; "
            "install the approver there, or name the one meant and sign the policy again\n"
            % sig)
    assert r.returncode == 1 and r.stderr.decode() == want, (want, r.stderr)


@test
def a_wrong_image_digest_is_refused_before_serving():
    """The layout is asked for the pinned manifest before the start is
    announced, and the refusal says which digest the layout holds."""
    layout = os.path.join(ROOT, "build", "image")
    wrong = "sha256:" + "ab" * 32
    sig = _kit.policy(image=(layout, wrong))
    r = subprocess.run(run_argv(sig), input=b"", capture_output=True, timeout=60)
    with open(os.path.join(ROOT, "build", "image.digest")) as f:
        held = f.read().strip()
    want = ("appliance: %s: no manifest with digest %s in the image layout %s (it holds %s)\n"
            % (sig, wrong, layout, held))
    assert r.returncode == 1 and r.stderr.decode() == want, (want, r.stderr)
    # a layout that is not there says what one is and where one comes from
    missing = os.path.join(work(), "no-such-image")
    sig = _kit.policy(image=(missing, held))
    r = subprocess.run(run_argv(sig), input=b"", capture_output=True, timeout=60)
    want = ("appliance: %s: image layout %s does not exist: name an OCI image layout (make image "
            "builds build/image; make install puts one in PREFIX/share/appliance/image)\n"
            % (sig, missing))
    assert r.returncode == 1 and r.stderr.decode() == want, (want, r.stderr)


def ids(out):
    """Answers (bytes, one per line) by their id."""
    return {a.get("id"): a for a in map(json.loads, out.splitlines())}


def scripted(sig, lines, stdin=None):
    """`appliance run` reading lines from a file (the last one without its
    newline), to its end: (exit status, answers by id, stderr)."""
    path = os.path.join(work(), "script-%d.jsonl" % time.monotonic_ns())
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(x) for x in lines))
    with open(stdin or path, "rb") as f:
        r = subprocess.run(run_argv(sig), stdin=f, capture_output=True, timeout=120)
    os.unlink(path)
    return r.returncode, ids(r.stdout), r.stderr.decode()


@test
def a_script_read_from_a_file_runs_to_its_end_and_exits_0():
    # the slow run is still in flight when the file ends: it finishes and
    # is answered, and so is the last line, which has no newline
    rc, ans, err = scripted(policy(), [INIT, INITIALIZED,
                                       call(1, "import asyncio\nawait asyncio.sleep(1)\n"
                                               "print('slow')"),
                                       call(2, "print(6 * 7)")])
    assert rc == 0, err
    assert ans[1]["result"]["structuredContent"]["stdout"] == "slow\n", ans
    assert ans[2]["result"]["structuredContent"]["stdout"] == "42\n", ans
    assert re.search(r"end of the input file: [12] runs? in flight", err), err
    assert "client closed" not in err and "cancelled" not in err, err


@test
def dev_null_is_an_empty_input_and_starts_nothing():
    rc, ans, err = scripted(policy(), [], stdin=os.devnull)
    assert rc == 0 and ans == {}, (rc, ans, err)
    assert "end of the input file: 0 runs in flight" in err, err
    assert "starting them" not in err and "runsc" not in err, err


DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}


@test
def a_process_that_only_answers_discover_starts_no_server_and_no_sandbox():
    toy = {"toy": {"command": [os.path.join(ROOT, "build", "toy-server")]}}
    sig = policy({"pool": 2}, extra={"servers": toy, "tools": {"toy.*": {"access": "read"}},
                                     "roles": {"r": {"tools": ["toy.*"]}},
                                     "clients": {"default_role": "r"}})
    rc, ans, err = scripted(sig, [DISCOVER])
    assert rc == 0 and "2026-07-28" in ans[1]["result"]["supportedVersions"], (ans, err)
    assert "upstream" not in err and "pool" not in err and "starting them" not in err, err
    # the same with a tools/list after it: now everything starts
    rc, ans, err = scripted(sig, [DISCOVER, dict(DISCOVER, id=2, method="tools/list")])
    assert rc == 0 and ans[2]["result"]["tools"][0]["name"] == "run_python", (ans, err)
    assert "a request needs the tools: starting them" in err, err
    assert "upstream toy: ready" in err, err


@test
def a_start_that_fails_answers_the_clients_first_request_with_why():
    # refused before serving (the policy has expired): the first request,
    # initialize, gets the reason that stderr gives
    r = subprocess.run(run_argv(policy(expires="2020-01-01T00:00:00Z")), input=START_INPUT,
                       capture_output=True, timeout=60)
    why = r.stderr.decode().splitlines()[-1]
    assert r.returncode == 1 and why.startswith("appliance: "), r.stderr
    first = json.loads(r.stdout.splitlines()[0])
    assert first["id"] == 0 and first["error"] == {
        "code": -32603, "message": "the appliance could not start: " + why[len("appliance: "):]
    }, first
    assert len(r.stdout.splitlines()) == 1, r.stdout
    # refused when the tools start (a runtime that is not there): initialize
    # was answered, the request that needed the tools gets the reason
    sig = policy(extra={"runtime": {"runsc": "/nonexistent/runsc"}})
    r = subprocess.run(run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    ans = ids(r.stdout)
    assert r.returncode == 1 and "result" in ans[0], (ans, r.stderr)
    assert ans[1]["error"] == {
        "code": -32603, "message": "the appliance could not start: runsc /nonexistent/runsc: "
                                   "No such file or directory"}, ans
    assert r.stderr.decode().endswith(
        "appliance: runsc /nonexistent/runsc: No such file or directory\n"), r.stderr


@test
def cell_reads_its_code_from_a_file_or_dev_null():
    argv = [APPLIANCE, "cell", "--image", os.path.join(ROOT, "build", "image"), "--digest",
            digest(), "-"]
    path = os.path.join(work(), "cell.py")
    with open(path, "w") as f:
        f.write("print(6 * 7)")
    with open(path, "rb") as f:
        r = subprocess.run(argv, stdin=f, capture_output=True, timeout=120)
    assert r.returncode == 0 and json.loads(r.stdout)["stdout"] == "42\n", r
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["stdout"] == "" and out["error"] is None, r


if __name__ == "__main__":
    try:
        main()
    finally:
        _kit.cleanup()
