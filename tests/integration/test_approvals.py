"""test_approvals.py: a gated write reaches its server only after a
person said yes: the approver program's, or the MCP client's.

server-filesystem serves a scratch directory; `fs.write_file` needs a yes
("approval": true), reads do not. The approver is a small script that keeps
the question it was asked and answers yes, no, or nothing. Without one, the
client is asked: the v2 SDK's client (tests/mcp-client2.mjs --elicit) in
the legacy era (elicitation/create) and pinned to 2026-07-28
(InputRequiredResult, which the SDK fulfils and retries itself), and raw
requests for requestStates that are tampered with or replayed. The files on
disk (the upstream's own state) show whether a call arrived; the audit log
records every question and its outcome, never the arguments.

Runs as root; needs build/appliance, build/image and the npm servers.
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
from policykit import START_INPUT


def scratch():
    d = tempfile.mkdtemp(prefix="appliance-approvals.")
    os.chmod(d, 0o755)
    return os.path.realpath(d)


def approver(d, answer):
    """A program that keeps its question in d/question.json and prints
    answer (None: never answers)."""
    path = os.path.join(d, "approver-%s" % (answer or "silent"))
    tail = 'printf "%s\\n"\n' % answer if answer else "exec sleep 60\n"
    with open(path, "w") as f:
        f.write("#!/bin/sh\ncat > %s\n%s" % (os.path.join(d, "question.json"), tail))
    os.chmod(path, 0o755)
    return path


def fs_policy(d, answer, limits=None, program=True):
    """The policy; program=False names no approver program (the client is
    asked)."""
    root = os.path.join(d, "root")
    os.makedirs(root, exist_ok=True)
    gk.share_with_servers(root)  # the server writes here, as its group
    extra = {"approvals": {"command": approver(d, answer)}} if program else {}
    sig = gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})),
                         servers={"fs": {"command": [gk.node(), gk.need(gk.FILESYSTEM), root]}},
                         tools={"fs.*": {"access": "read"},
                                "fs.write_file": {"access": "write", "approval": True}},
                         roles={"w": {"tools": ["fs.*"], "write": True}},
                         clients={"default_role": "w"},
                         audit={"path": os.path.join(d, "audit.jsonl")}, **extra)
    return sig, root


def audit_events(d, ev):
    with open(os.path.join(d, "audit.jsonl")) as f:
        return [e for e in map(json.loads, f) if e["ev"] == ev]


WRITE = """
try:
    await fs.write_file(path=%r, content="hello")
    print("written")
except ToolError as e:
    print("refused:", e)
"""


@test
def a_yes_lets_the_write_through_and_the_question_names_the_tool_first():
    d = scratch()
    sig, root = fs_policy(d, "approve")
    target = os.path.join(root, "a.txt")
    qpath = os.path.join(d, "question.json")
    with gk.Session(sig) as s:
        assert s.cell(WRITE % target) == "written\n"
        q = json.load(open(qpath))
        assert q["text"].startswith("fs.write_file\n  path: "), q
        assert q["arguments"] == {"path": json.dumps(target), "content": '"hello"'}, q
        # a read is not gated: nobody is asked
        os.unlink(qpath)
        assert "hello" in s.cell("print(await fs.read_text_file(path=%r))" % target)
        assert not os.path.exists(qpath)
    assert open(target).read() == "hello"
    ap = audit_events(d, "approval")
    assert [(a["tool"], a["outcome"], a["by"]) for a in ap] == [
        ("fs.write_file", "approved", "program")], ap
    sent = [e for e in audit_events(d, "call") if e["tool"] == "fs.write_file"]
    assert [e["outcome"] for e in sent] == ["sent"], sent
    shutil.rmtree(d)


@test
def the_question_is_escaped_and_long_values_are_cut_with_their_digest():
    d = scratch()
    sig, root = fs_policy(d, "deny")
    target = os.path.join(root, "b.txt")
    with gk.Session(sig) as s:
        out = s.cell("""
try:
    await fs.write_file(path=%r, content="\\x1b[2J\\u202eevil" + "x" * 1000)
except ToolError as e:
    print("refused:", e)
""" % target)
    assert "refused: declined: fs.write_file: no approval: the approver said no" in out, out
    q = json.load(open(os.path.join(d, "question.json")))
    assert (q["server"], q["tool"], q["client"], q["role"]) == ("fs", "write_file", "stdio", "w")
    assert q["text"].startswith("fs.write_file\n"), q["text"]
    assert "\x1b" not in q["text"] and "\u202e" not in q["text"], q["text"]
    # JSON's \u001B with its backslash escaped; the bidi override as bytes
    assert "\\x5cu001B[2J" in q["text"] and "\\xe2\\x80\\xae" in q["text"], q["text"]
    cut = re.search(r"\.\.\. \((\d+) bytes, blake2b [0-9a-f]{16}\)$", q["arguments"]["content"])
    assert cut and int(cut.group(1)) > 1000, q
    assert q["arguments"]["path"] == json.dumps(target), q
    assert not os.path.exists(target), "a refused write reached the server"
    raw = open(os.path.join(d, "audit.jsonl")).read()
    assert "evil" not in raw and "xxxx" not in raw
    assert [a["outcome"] for a in audit_events(d, "approval")] == ["declined"]
    shutil.rmtree(d)


@test
def no_answer_in_time_is_a_no():
    d = scratch()
    sig, root = fs_policy(d, None, {"approval_timeout_s": 2})
    target = os.path.join(root, "c.txt")
    with gk.Session(sig) as s:
        out = s.cell(WRITE % target)
    assert "no approval: no answer within 2 s" in out, out
    assert not os.path.exists(target)
    assert [a["outcome"] for a in audit_events(d, "approval")] == ["timeout"]
    shutil.rmtree(d)


GATHER = """
import asyncio
rs = await asyncio.gather(*[fs.write_file(path=%r + "/g%%d.txt" %% i, content="g")
                            for i in range(3)], return_exceptions=True)
print(json.dumps(["ok" if not isinstance(r, Exception) else str(r) for r in rs]))
"""


@test
def three_gathered_writes_are_each_asked_for_up_to_the_runs_limit():
    d = scratch()
    sig, root = fs_policy(d, "approve")
    with gk.Session(sig) as s:
        got = json.loads(s.cell("import json\n" + GATHER % root))
    assert got == ["ok", "ok", "ok"], got
    assert sorted(os.listdir(root)) == ["g0.txt", "g1.txt", "g2.txt"]
    d2 = scratch()
    sig, root2 = fs_policy(d2, "approve", {"max_approvals": 1})
    with gk.Session(sig) as s:
        got = json.loads(s.cell("import json\n" + GATHER % root2))
    assert got.count("ok") == 1, got
    assert sum("asked 1 times, its limit" in g for g in got) == 2, got
    assert len(os.listdir(root2)) == 1
    assert sorted(a["outcome"] for a in audit_events(d2, "approval")) == [
        "approved", "unavailable", "unavailable"]
    shutil.rmtree(d)
    shutil.rmtree(d2)


@test
def an_approver_that_cannot_run_is_refused_at_start():
    d = scratch()
    sig, _ = fs_policy(d, "approve")
    os.chmod(os.path.join(d, "approver-approve"), 0o644)
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode == 1 and b"approvals.command" in r.stderr, r.stderr
    shutil.rmtree(d)


CLIENT2 = os.path.join(gk.ROOT, "tests", "mcp-client2.mjs")
ERAS = ("legacy", "2026-07-28")


def client2(sig, negotiation, codes, elicit=None, timeout=240):
    """mcp-client2.mjs running each code as a run_python call; its document."""
    argv = [gk.node(), CLIENT2, "--negotiation", negotiation, "--timeout", "120000"]
    for src in codes:
        argv += ["--call", json.dumps({"name": "run_python", "arguments": {"code": src}})]
    if elicit:
        argv += ["--elicit", elicit]
    r = subprocess.run(argv + ["--"] + gk.run_argv(sig), capture_output=True, timeout=timeout)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0, r.stdout.decode() + err[-4000:]
    return json.loads(r.stdout)


def printed(call):
    assert "result" in call, call
    return call["result"]["structuredContent"]["stdout"]


@test
def the_client_is_asked_in_both_eras_and_only_accept_with_approve_true_is_a_yes():
    answers = ["accept", "decline", "cancel", "false"]
    for era in ERAS:
        d = scratch()
        sig, root = fs_policy(d, None, program=False)
        targets = [os.path.join(root, "%s.txt" % a) for a in answers]
        out = client2(sig, era, [WRITE % t for t in targets], elicit=",".join(answers))
        assert out["version"] == ("2025-11-25" if era == "legacy" else era), out
        got = [printed(c) for c in out["calls"]]
        assert got[0] == "written\n", got
        assert "no approval: the person asked said no" in got[1], got
        assert "no approval: the question was cancelled" in got[2], got
        assert "no approval: the person asked said no" in got[3], got
        # the upstream's own state: only the approved write arrived
        assert sorted(os.listdir(root)) == ["accept.txt"], os.listdir(root)
        e = out["elicitations"]
        assert [x["answer"] for x in e] == answers, e
        assert all(x["message"].startswith("fs.write_file\n  path: ") for x in e), e
        assert all(x["mode"] == "form" for x in e), e
        ap = audit_events(d, "approval")
        assert [(a["outcome"], a["by"]) for a in ap] == [
            ("approved", "client"), ("declined", "client"), ("cancelled", "client"),
            ("declined", "client")], (era, ap)
        shutil.rmtree(d)


@test
def a_client_without_elicitation_gets_no_and_the_write_never_arrives():
    for era in ERAS:
        d = scratch()
        sig, root = fs_policy(d, None, program=False)
        out = client2(sig, era, [WRITE % os.path.join(root, "n.txt")])
        got = printed(out["calls"][0])
        assert "no approval: the client cannot be asked" in got, got
        assert os.listdir(root) == []
        assert [a["outcome"] for a in audit_events(d, "approval")] == ["unavailable"]
        shutil.rmtree(d)


@test
def three_gathered_writes_are_each_asked_of_the_client():
    for era in ERAS:
        d = scratch()
        sig, root = fs_policy(d, None, program=False)
        out = client2(sig, era, ["import json\n" + GATHER % root], elicit="accept")
        got = json.loads(printed(out["calls"][0]))
        assert got == ["ok", "ok", "ok"], (era, got)
        assert sorted(os.listdir(root)) == ["g0.txt", "g1.txt", "g2.txt"]
        assert len(out["elicitations"]) == 3, out["elicitations"]
        assert [a["outcome"] for a in audit_events(d, "approval")] == ["approved"] * 3
        shutil.rmtree(d)


@test
def the_approver_program_decides_even_when_the_client_could_be_asked():
    for answer, expect in (("approve", ["p.txt"]), ("deny", [])):
        d = scratch()
        sig, root = fs_policy(d, answer)
        out = client2(sig, "2026-07-28", [WRITE % os.path.join(root, "p.txt")], elicit="accept")
        assert out["elicitations"] == [], out
        assert os.listdir(root) == expect, (answer, os.listdir(root))
        assert [a["by"] for a in audit_events(d, "approval")] == ["program"]
        shutil.rmtree(d)


MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
          "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}
YES = {"action": "accept", "content": {"approve": True}}


def raw_call(s, src, **extra):
    params = {"name": "run_python", "arguments": {"code": src}, "_meta": MODERN}
    params.update(extra)
    return s.request("tools/call", params, timeout=120)


@test
def a_tampered_or_replayed_request_state_is_refused():
    d = scratch()
    sig, root = fs_policy(d, None, program=False)
    target = os.path.join(root, "r.txt")
    src = WRITE % target
    with gk.Session(sig) as s:
        first = raw_call(s, src)["result"]
        assert first["resultType"] == "input_required", first
        (key, q), = first["inputRequests"].items()
        assert q["method"] == "elicitation/create" and q["params"]["mode"] == "form", q
        state = first["requestState"]
        answers = {key: YES}
        # one character of the MAC changed; the nonce changed; other code
        bad = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        for st, code_ in ((bad, src), ("B" + state[1:] if state[0] != "B" else "C" + state[1:],
                                         src), (state, src + "\n")):
            a = raw_call(s, code_, requestState=st, inputResponses=answers)
            assert a["error"]["code"] == -32602 and "requestState refused" in \
                a["error"]["message"], a
        assert not os.path.exists(target), "a refused retry let the write through"
        done = raw_call(s, src, requestState=state, inputResponses=answers)["result"]
        assert done["resultType"] == "complete", done
        assert done["structuredContent"]["stdout"] == "written\n", done
        # the same state again: used up, and nothing is written twice
        os.unlink(target)
        a = raw_call(s, src, requestState=state, inputResponses=answers)
        assert a["error"]["code"] == -32602 and "already used" in a["error"]["message"], a
        assert not os.path.exists(target)
    assert [a["outcome"] for a in audit_events(d, "approval")] == ["approved"]
    shutil.rmtree(d)


@test
def the_deadline_runs_while_a_cell_waits_and_its_answer_is_kept_for_the_retry():
    d = scratch()
    sig, root = fs_policy(d, None, {"deadline_s": 3, "approval_timeout_s": 60}, program=False)
    src = WRITE % os.path.join(root, "slow.txt")
    with gk.Session(sig) as s:
        first = raw_call(s, src)["result"]
        assert first["resultType"] == "input_required", first
        deadline = time.time() + 60
        while "ended: deadline" not in s.log():
            assert time.time() < deadline, s.log()
            time.sleep(0.2)
        (key, _), = first["inputRequests"].items()
        done = raw_call(s, src, requestState=first["requestState"],
                        inputResponses={key: YES})["result"]
        assert done["resultType"] == "complete", done
        assert done["structuredContent"]["stopped"] and \
            done["structuredContent"]["reason"] == "deadline", done
    assert os.listdir(root) == []
    assert [a["outcome"] for a in audit_events(d, "approval")] == ["cancelled"]
    shutil.rmtree(d)


@test
def a_client_that_never_retries_leaves_no_cell_behind():
    d = scratch()
    sig, root = fs_policy(d, None, {"approval_timeout_s": 2}, program=False)
    with gk.Session(sig) as s:
        first = raw_call(s, WRITE % os.path.join(root, "late.txt"))["result"]
        assert first["resultType"] == "input_required", first
        deadline = time.time() + 60
        while "did not come back with its input" not in s.log():
            assert time.time() < deadline, s.log()
            time.sleep(0.2)
        (key, _), = first["inputRequests"].items()
        a = raw_call(s, WRITE % os.path.join(root, "late.txt"),
                     requestState=first["requestState"], inputResponses={key: YES})
        assert a["error"]["code"] == -32602, a
    assert os.listdir(root) == []
    assert [a["outcome"] for a in audit_events(d, "approval")] == ["timeout"]
    shutil.rmtree(d)


if __name__ == "__main__":
    main(globals())
