"""test_approvals.py: a gated write reaches its server only after the
approver program said yes.

server-filesystem serves a scratch directory; `fs.write_file` needs a yes
("approval": true), reads do not. The approver is a small script that keeps
the question it was asked and answers yes, no, or nothing. The files on
disk (the upstream's own state) show whether a call arrived; the audit log
records every question and its outcome, never the arguments.

Asking the MCP client itself (elicitation, InputRequiredResult) is not
served yet: a policy that gates tools without an approver program is
refused at start (test_run.py).

Runs as root; needs build/appliance, build/image and the npm servers.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import main, test
import gatewaykit as gk


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


def fs_policy(d, answer, limits=None):
    root = os.path.join(d, "root")
    os.makedirs(root, exist_ok=True)
    sig = gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})),
                         servers={"fs": {"command": [gk.node(), gk.need(gk.FILESYSTEM), root]}},
                         tools={"fs.*": {"access": "read"},
                                "fs.write_file": {"access": "write", "approval": True}},
                         roles={"w": {"tools": ["fs.*"], "write": True}},
                         clients={"default_role": "w"},
                         approvals={"command": approver(d, answer)},
                         audit={"path": os.path.join(d, "audit.jsonl")})
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
    assert "refused: refused: fs.write_file: no approval: the approver said no" in out, out
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
    r = subprocess.run(gk.run_argv(sig), input=b"", capture_output=True, timeout=60)
    assert r.returncode == 1 and b"approvals.command" in r.stderr, r.stderr
    shutil.rmtree(d)


if __name__ == "__main__":
    main(globals())
