"""test_code_tools.py: programs signed in the policy, served as MCP tools
of their own (docs/code-tools.md).

The policy has two code tools over build/toy-server: `sum_two`, read-only,
which adds with toy.add and answers {"total": N} under an output schema;
and `keep_notes`, which writes one note per line of its argument with
toy.write_note, each write needing the approver program's yes. Role
`inv` is invoke-only ("inline": false) and may call only sum_two; role
`both` runs cells too and may call both. The official v1 SDK client
(tests/mcp-client.mjs) is the client: it checks each structured result
against the tool's outputSchema itself. The audit log shows what ran, what
was refused before any sandbox, and every approval.

Runs as root; needs build/appliance, build/image and build/toy-server.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import main, test
import gatewaykit as gk
from cellkit import APPLIANCE
from policykit import START_INPUT

SUM = {
    "name": "sum_two",
    "description": "The sum of two integers, by the toy server.",
    "input_schema": {"type": "object",
                     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"], "additionalProperties": False},
    "output_schema": {"type": "object", "properties": {"total": {"type": "integer"}},
                      "required": ["total"], "additionalProperties": False},
    "code": "r = await toy.add(a=args['a'], b=args['b'])\n{'total': r['sum']}\n",
    "uses": ["toy.add"],
    "example": {"a": 1, "b": 2},
}

NOTES = {
    "name": "keep_notes",
    "description": "Keep each line of text as a note.",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]},
    "output_schema": {"type": "object", "properties": {"kept": {"type": "integer"}},
                      "required": ["kept"]},
    "code": ("n = 0\nfor line in args['text'].splitlines():\n"
             "    await toy.write_note(text=line)\n    n += 1\n{'kept': n}\n"),
    "uses": ["toy.write_note"],
    "access": "write",
}


def scratch():
    d = tempfile.mkdtemp(prefix="appliance-code-tools.")
    os.chmod(d, 0o755)
    return os.path.realpath(d)


def approver(d):
    """A program that counts its questions in d/questions and says yes."""
    path = os.path.join(d, "approver")
    with open(path, "w") as f:
        f.write("#!/bin/sh\ncat >> %s\necho >> %s\necho approve\n"
                % (os.path.join(d, "questions"), os.path.join(d, "questions")))
    os.chmod(path, 0o755)
    return path


def policy(d, code_tools=(SUM, NOTES), role="inv", limits=None):
    return gk._kit.policy(dict({"deadline_s": 60, "pool": 1}, **(limits or {})),
                          servers={"toy": gk.toy_server()},
                          tools={"toy.*": {"access": "read"},
                                 "toy.write_note": {"access": "write", "approval": True}},
                          code_tools=list(code_tools),
                          roles={"inv": {"inline": False, "code_tools": ["sum_two"]},
                                 "both": {"tools": ["toy.echo"], "write": True,
                                          "code_tools": ["*"]}},
                          clients={"default_role": role},
                          approvals={"command": approver(d)},
                          audit={"path": os.path.join(d, "audit.jsonl")})


def events(d, ev=None):
    with open(os.path.join(d, "audit.jsonl")) as f:
        return [e for e in map(json.loads, f) if ev is None or e["ev"] == ev]


def sdk(sig, calls):
    """The v1 SDK client against `appliance run`: its JSON, and the
    appliance's log (the client passes the server's stderr through)."""
    argv = [gk.node(), gk.CLIENT]
    for c in calls:
        argv += ["--call", json.dumps(c)]
    r = subprocess.run(argv + ["--timeout", "60000", "--"] + gk.run_argv(sig),
                       capture_output=True, timeout=240)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-4000:]
    return json.loads(r.stdout), r.stderr.decode()


def text(result):
    return "".join(c["text"] for c in result["content"] if c["type"] == "text")


@test
def an_invoke_only_client_sees_and_calls_only_its_code_tools():
    d = scratch()
    sig = policy(d)
    out, log = sdk(sig, [{"name": "sum_two", "arguments": {"a": 2, "b": 40}},
                         {"name": "sum_two", "arguments": {"a": "two", "b": 40}},
                         {"name": "sum_two", "arguments": {"a": 1}},
                         {"name": "run_python", "arguments": {"code": "print(1)"}},
                         {"name": "keep_notes", "arguments": {"text": "x"}},
                         {"name": "sum_two", "arguments": {"a": 1, "b": 2, "leaky_name_42": 0}}])
    # only its code tool is listed: no run_python, no tool of the other role
    assert [(t["name"], t["readOnlyHint"]) for t in out["tools"]] == [("sum_two", True)], out
    ok, bad_type, missing, cell, other, extra = [c.get("result", c.get("error"))
                                                 for c in out["calls"]]
    # the SDK checked structuredContent against the outputSchema
    assert ok.get("isError") is not True, ok
    assert ok["structuredContent"] == {"total": 42}, ok
    assert json.loads(text(ok)) == {"total": 42}, ok
    # arguments that do not match: a tool error naming the mismatch
    assert bad_type["isError"] is True, bad_type
    assert text(bad_type) == ("sum_two: the arguments do not match its input_schema: "
                              "/a: expected integer, got string"), bad_type
    assert missing["isError"] is True and "input_schema" in text(missing), missing
    assert "required" in text(missing), missing
    # run_python and the other role's tool do not exist for this client
    assert cell["code"] == -32602 and "Unknown tool" in cell["message"], cell
    assert other["code"] == -32602, other
    # two refusals before any sandbox: one run started, one sandbox taken
    starts = events(d, "run.start")
    assert [(e["tool"], e["role"]) for e in starts] == [("sum_two", "inv")], starts
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", starts[0]["program"]), starts
    # a name the client made up is told to the client, never written to the log
    assert extra["isError"] is True and "leaky_name_42" in text(extra), extra
    refused = events(d, "run.refused")
    assert [e["tool"] for e in refused] == ["sum_two"] * 3, refused
    assert refused[0]["reason"] == ("sum_two: the arguments do not match its input_schema "
                                    "(type)"), refused
    assert "leaky_name_42" not in open(os.path.join(d, "audit.jsonl")).read()
    assert len(re.findall(r"run=[0-9a-f]{12}: sandbox ", log)) == 1, log
    ends = events(d, "run.end")
    assert [(e["reason"], e["calls"]) for e in ends] == [("done", 1)], ends
    shutil.rmtree(d)


@test
def the_program_digest_in_the_audit_log_is_the_programs_sha256():
    import hashlib
    d = scratch()
    sig = policy(d)
    sdk(sig, [{"name": "sum_two", "arguments": {"a": 1, "b": 1}}])
    want = "sha256:" + hashlib.sha256(SUM["code"].encode()).hexdigest()
    assert [e["program"] for e in events(d, "run.start")] == [want]
    shutil.rmtree(d)


@test
def a_writing_code_tool_asks_for_each_write_call():
    d = scratch()
    sig = policy(d, role="both")
    out, _ = sdk(sig, [{"name": "keep_notes", "arguments": {"text": "one\ntwo\nthree"}},
                       {"name": "run_python", "arguments": {"code": "print(6*7)"}}])
    names = sorted(t["name"] for t in out["tools"])
    assert names == ["keep_notes", "run_python", "sum_two"], names
    hints = {t["name"]: t["readOnlyHint"] for t in out["tools"]}
    assert hints["keep_notes"] is False and hints["sum_two"] is True, hints
    notes, cell = [c["result"] for c in out["calls"]]
    assert notes.get("isError") is not True, notes
    assert notes["structuredContent"] == {"kept": 3}, notes
    assert cell["structuredContent"]["stdout"] == "42\n", cell
    # one question per write call, each answered by the approver program
    ap = events(d, "approval")
    assert [(a["tool"], a["outcome"], a["by"]) for a in ap] == \
        [("toy.write_note", "approved", "program")] * 3, ap
    questions = [json.loads(q) for q in open(os.path.join(d, "questions")).read().split("\n")
                 if q.strip()]
    assert [q["tool"] for q in questions] == ["write_note"] * 3, questions
    assert all(q["role"] == "both" for q in questions), questions
    sent = [e for e in events(d, "call") if e["tool"] == "toy.write_note"]
    assert [e["outcome"] for e in sent] == ["sent"] * 3, sent
    shutil.rmtree(d)


WRONG = dict(SUM, name="wrong_shape", code="await toy.add(a=args['a'], b=args['b'])\n"
                                          "{'total': 'many'}\n")
RAISES = dict(SUM, name="raises", code="raise ValueError('no sum today')\n")
OUTSIDE = dict(SUM, name="outside", uses=["toy.add"], output_schema={"type": "object"},
               code=("try:\n    await toy.echo(text='hi')\n    r = {'called': True}\n"
                     "except ToolError as e:\n    r = {'kind': e.kind, 'error': str(e)}\nr\n"))


@test
def a_wrong_value_and_an_exception_are_tool_errors_never_passed_on():
    d = scratch()
    sig = policy(d, code_tools=(SUM, NOTES, WRONG, RAISES, OUTSIDE), role="both")
    out, _ = sdk(sig, [{"name": "wrong_shape", "arguments": {"a": 1, "b": 2}},
                       {"name": "raises", "arguments": {"a": 1, "b": 2}},
                       {"name": "outside", "arguments": {"a": 1, "b": 2}},
                       {"name": "run_python", "arguments": {"code": (
                           "try:\n    await toy.add(a=1, b=2)\n"
                           "except ToolError as e:\n    print(e.kind, e)\n")}}])
    wrong, raised, outside, cell = [c["result"] for c in out["calls"]]
    assert wrong["isError"] is True, wrong
    assert text(wrong) == ("wrong_shape: the program's value does not match its output_schema: "
                           "/total: expected integer, got string"), wrong
    assert "structuredContent" not in wrong and "many" not in json.dumps(wrong), wrong
    # the log says the value was not passed on, and why
    by_run = {e["run"]: e.get("tool") for e in events(d, "run.start")}
    ends = {by_run[e["run"]]: e for e in events(d, "run.end")}
    assert ends["wrong_shape"]["value_refused"] == "output_schema", ends
    assert ends["wrong_shape"]["reason"] == "done", ends
    assert ends["raises"]["reason"] == "error" and "value_refused" not in ends["raises"], ends
    assert raised["isError"] is True, raised
    assert text(raised) == "raises: the program raised: ValueError: no sum today", raised
    # a call outside uses is refused as a cell's call outside its role is:
    # the same ToolError kind and form, naming why
    got = outside["structuredContent"]
    assert got["kind"] == "refused", got
    assert got["error"] == "refused: toy.echo: not among the tools this code tool uses", got
    kind, _, why = cell["structuredContent"]["stdout"].strip().partition(" ")
    assert kind == "refused" and why == "refused: toy.add: not allowed for this client's role", \
        cell
    shutil.rmtree(d)


@test
def the_modern_revision_lists_and_calls_code_tools_with_schemas():
    d = scratch()
    sig = policy(d, role="both")
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    with gk.Session(sig) as s:
        legacy = {t["name"]: t for t in s.tools_at_start["result"]["tools"]}
        modern = s.request("tools/list", {"_meta": meta})["result"]
        assert modern["cacheScope"] == "private" and modern["ttlMs"] > 0, modern
        tools = {t["name"]: t for t in modern["tools"]}
        assert sorted(tools) == sorted(legacy) == ["keep_notes", "run_python", "sum_two"]
        assert tools["sum_two"]["inputSchema"] == SUM["input_schema"], tools
        assert tools["sum_two"]["outputSchema"] == SUM["output_schema"], tools
        assert tools["keep_notes"]["annotations"]["readOnlyHint"] is False, tools
        r = s.request("tools/call", {"name": "sum_two", "arguments": {"a": 5, "b": 6},
                                     "_meta": meta})["result"]
        assert r["resultType"] == "complete" and r["structuredContent"] == {"total": 11}, r
        # arguments that are not an object
        r = s.request("tools/call", {"name": "sum_two", "arguments": [1, 2],
                                     "_meta": meta})["result"]
        assert r["isError"] is True and "must be an object" in r["content"][0]["text"], r
    shutil.rmtree(d)


@test
def a_changed_program_file_refuses_the_start_with_both_digests():
    import hashlib
    d = scratch()
    prog = os.path.join(gk.work(), "sum_two.py")
    body = SUM["code"]
    with open(prog, "w") as f:
        f.write(body)
    good = hashlib.sha256(body.encode()).hexdigest()
    tool = dict(SUM, file=prog, sha256=good)
    del tool["code"]
    sig = policy(d, code_tools=(tool, NOTES))
    out, _ = sdk(sig, [{"name": "sum_two", "arguments": {"a": 20, "b": 22}}])
    assert out["calls"][0]["result"]["structuredContent"] == {"total": 42}, out
    # one byte more: the same signed policy no longer starts
    with open(prog, "a") as f:
        f.write("#")
    bad = hashlib.sha256((body + "#").encode()).hexdigest()
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=120)
    err = r.stderr.decode()
    assert r.returncode != 0, err
    assert prog in err and ("sha256:" + good) in err and ("sha256:" + bad) in err, err
    assert "sum_two" in err, err
    os.unlink(prog)
    shutil.rmtree(d)


@test
def a_policy_with_a_bad_code_tool_is_refused_when_signed():
    # a read-only code tool using a write tool: sign says what to change
    bad = dict(SUM, uses=["toy.add", "toy.write_note"])
    doc = {"policy_version": 1, "serial": 1, "expires": "2099-01-01T00:00:00Z",
           "image": {"layout": "/x", "digest": "sha256:" + "0" * 64},
           "servers": {"toy": gk.toy_server()},
           "tools": {"toy.*": {"access": "read"}, "toy.write_note": {"access": "write"}},
           "code_tools": [bad], "roles": {"r": {"tools": []}}}
    path = os.path.join(gk.work(), "bad-code-tool.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([APPLIANCE, "sign", "--secret", os.path.join(gk.work(), "k.key"), path],
                       capture_output=True)
    assert r.returncode == 1, r
    assert ("code_tools[0].uses[1]: toy.write_note is a write tool (`tools` says \"write\"); "
            "a code tool that calls it needs \"access\": \"write\"") in r.stderr.decode(), r


@test
def stubs_prints_the_code_tools_as_a_client_sees_them():
    d = scratch()
    sig = policy(d)
    r = subprocess.run(gk._kit.argv(sig, "stubs"), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "# run_python: not shown to this role (\"inline\": false)" in out, out
    assert "# 1 code tool:" in out, out
    assert "# sum_two (read, program sha256:" in out and "# uses: toy.add" in out, out
    listed = json.loads(out[out.index("{"):out.rindex("}") + 1])
    assert listed["name"] == "sum_two" and listed["outputSchema"] == SUM["output_schema"], listed
    shutil.rmtree(d)


SLOW = dict(SUM, name="slow", uses=["toy.sleep"], output_schema={"type": "object"},
            code="print('working')\nawait toy.sleep(ms=60000)\n{}\n")


@test
def a_code_tool_run_reports_progress_without_its_output_and_is_cancelled_like_a_cell():
    d = scratch()
    sig = policy(d, code_tools=(SUM, NOTES, SLOW), role="both")
    with gk.Session(sig) as s:
        rid = s.start("tools/call", {"name": "slow", "arguments": {"a": 1, "b": 2},
                                     "_meta": {"progressToken": "p1"}})
        note = s.wait_note("notifications/progress", timeout=60)
        assert note is not None, s.log()
        # the sleep call is in flight: the progress counts it, quoting nothing
        deadline = time.time() + 60
        while "1 call" not in json.dumps(s.notes) and time.time() < deadline:
            s.wait_notes("notifications/progress", len([n for n in s.notes if n.get(
                "method") == "notifications/progress"]) + 1, timeout=5)
        assert "1 call" in json.dumps(s.notes), s.notes
        assert "working" not in json.dumps(s.notes), s.notes
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": rid, "reason": "test"}})
        deadline = time.time() + 60
        while time.time() < deadline and not [e for e in events(d, "run.end")
                                              if e["reason"] == "cancelled"]:
            time.sleep(0.2)
    ends = events(d, "run.end")
    assert [(e["reason"], e["answered"]) for e in ends] == [("cancelled", False)], ends
    starts = events(d, "run.start")
    assert [e["tool"] for e in starts] == ["slow"], starts
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
