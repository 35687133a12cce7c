"""test_sessions.py: sessions, an interpreter kept between cells (docs/sessions.md).

An HTTP appliance whose roles allow sessions serves v1 SDK clients
(tests/mcp-live.mjs). A cell run with session "new" returns a handle; the next cell
given the handle runs in the same interpreter (its variables are there) while between
the two the session's sandbox is frozen, as its freezer cgroup says. Another token's
client presenting the handle gets word for word what a handle that never existed gets.
Each way a session ends is acted out and its reason word checked in the next cell's
refusal: end, idle, max_cells, memory, died, reload (its role changed), closed (the
client's MCP session ended). The role's max refuses one more "new", never by ending
another's session. The audit log has the session's start and end and never its handle.

Runs as root; needs build/appliance, build/toy-server, build/image and the npm packages.
"""

import glob
import json
import os
import re
import subprocess

from harness import main, test
from cellkit import APPLIANCE
from livekit import Client, Live, TOKEN, text

OTHER = "appliance_test-token-sessions-other-0123"
SESSIONS = {"max": 2, "idle_s": 600, "memory_mb": 64}
SHORT = {"max": 1, "idle_s": 2, "max_cells": 2}
NEVER = "0123456789abcdef0123456789abcdef"


def policy(live, q_sessions=None):
    return live.doc(roles={"r": {"tools": ["toy.*"], "sessions": SESSIONS},
                           "q": {"tools": ["toy.*"], "sessions": q_sessions or SHORT}},
                    tokens=(("ops", TOKEN, "r"), ("other", OTHER, "q")))


class Appliance:
    """Live serving policy(), with a client for each token; ended and cleaned
    up on leaving."""

    def __enter__(self):
        self.live = Live()
        self.clients = []
        try:
            self.live.start(policy(self.live))
            self.clients = [Cells(self.live), Cells(self.live, OTHER)]
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.live, self.clients[0], self.clients[1]

    def __exit__(self, kind, value, tb):
        for c in self.clients:
            c.c.close()
        self.live.cleanup()


class Cells:
    """A connected client and its calls, numbered."""

    def __init__(self, live, token=TOKEN):
        self.c = Client(live.port, token)
        self.n = 0

    def call(self, **args):
        self.n += 1
        self.c.send({"op": "call", "id": self.n, "name": "run_python", "arguments": args})
        return self.c.answer(self.n)

    def ok(self, **args):
        r = self.call(**args)
        assert not r.get("isError"), r
        return r["structuredContent"]

    def refused(self, **args):
        r = self.call(**args)
        assert r.get("isError") and "structuredContent" not in r, r
        return text(r)


def sandbox_of_last_run(live):
    """The sandbox the newest run ran in, from the appliance's log."""
    found = re.findall(r"run=[0-9a-f]+: sandbox (cell-[0-9a-z-]+)", live.log())
    assert found, live.log()
    return found[-1]


def freezer_state(live, sandbox):
    paths = glob.glob("/sys/fs/cgroup/freezer/appliance/i-%d-*/%s/sandbox/freezer.state"
                      % (live.proc.pid, sandbox))
    assert len(paths) == 1, (sandbox, paths)
    with open(paths[0]) as f:
        return f.read().strip()


@test
def a_client_keeps_its_variables_between_cells_and_no_other_token_can_use_them():
    with Appliance() as (live, a, b):
        listed = a.c.list()
        assert "session: \"new\"" in listed["description"], listed["description"]
        first = a.call(code="import json; x = 41", session="new")
        h = first["structuredContent"]["session"]
        assert re.fullmatch(r"[0-9a-f]{32}", h), first
        assert "session_ended" not in first["structuredContent"], first
        assert 'pass session: "%s"' % h in text(first), text(first)
        # between cells the kept sandbox is frozen
        sb = sandbox_of_last_run(live)
        assert freezer_state(live, sb) == "FROZEN", sb
        st = subprocess.run([APPLIANCE, "status", "--json", "--pid", str(live.proc.pid)],
                            capture_output=True, text=True, timeout=60)
        assert st.returncode == 0, st.stderr
        assert json.loads(st.stdout)[0]["sessions"] == {"open": 1, "frozen": 1}, st.stdout
        second = a.ok(code="print(x + 1)\njson.dumps([x])", session=h)
        assert second["stdout"] == "42\n" and second["result"] == "[41]", second
        assert sandbox_of_last_run(live) == sb
        assert freezer_state(live, sb) == "FROZEN"
        # another principal is told what it would be told of a handle never made
        theirs = b.refused(code="print(x)", session=h)
        never = b.refused(code="print(x)", session=NEVER)
        assert theirs == never, (theirs, never)
        assert "no such session" in theirs, theirs
        # and the session is untouched by that
        assert a.ok(code="x", session=h)["result"] == 41
        # bad arguments are a tool error that says what to send
        assert "end needs the session's handle" in a.refused(session="new", end=True)
        assert "end takes no code" in a.refused(code="1", session=h, end=True)
        assert "session must be a string" in a.refused(code="1", session=7)
        # files a session's cell leaves in /out come back with it, and /out is
        # empty for its next cell (what it keeps under /tmp stays)
        wrote = a.call(code="open('/out/a.txt', 'w').write('A')\n"
                            "open('/tmp/kept.txt', 'w').write('K')", session=h)
        assert [f["name"] for f in wrote["structuredContent"]["files"]] == ["a.txt"], wrote
        assert any(c.get("resource", {}).get("text") == "A" for c in wrote["content"]), wrote
        after = a.ok(code="import os\nprint(os.listdir('/out'), open('/tmp/kept.txt').read())",
                     session=h)
        assert after["stdout"] == "[] K\n" and after["files"] == [], after
        # a fresh cell (no session) does not see x
        fresh = a.ok(code="print('x' in globals())")
        assert fresh["stdout"] == "False\n" and "session" not in fresh, fresh
        ended = a.ok(session=h, end=True)
        assert ended["session_ended"] == "end", ended
        gone = a.refused(code="print(x)", session=h)
        assert "ended (end)" in gone, gone
        # the audit log: the session's start and end, its digest on each cell, no handle
        with open(live.audit) as f:
            log = f.read()
        assert h not in log
        starts = live.audit_lines("session.start")
        digest = starts[-1]["session"]
        assert starts[-1]["client"] == "ops" and starts[-1]["role"] == "r", starts
        runs = [e for e in live.audit_lines("run.start") if e.get("session") == digest]
        assert len(runs) == 5, runs
        end = live.audit_lines("session.end")[-1]
        assert end["session"] == digest and end["reason"] == "end" and end["cells"] == 5, end
        live.stop()


@test
def each_end_of_a_session_is_told_with_its_reason():
    with Appliance() as (live, a, b):
        # max: the role holds two; a third is refused, the two go on
        h1 = a.ok(code="v = 1", session="new")["session"]
        h2 = a.ok(code="v = 2", session="new")["session"]
        full = a.refused(code="v = 3", session="new")
        assert "holds its most sessions already (sessions.max 2)" in full, full
        assert a.ok(code="v", session=h2)["result"] == 2
        # memory: more than memory_mb held after a cell ends the session
        big = a.ok(code="b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
                   session=h1)
        assert big["session_ended"] == "memory", big
        assert "ended (memory)" in a.refused(code="v", session=h1)
        # died: the interpreter went away
        died = a.call(code="import os; os._exit(0)", session=h2)
        assert died["structuredContent"]["session_ended"] == "died", died
        assert "ended (died)" in a.refused(code="v", session=h2)
        # max_cells (2 for role q), then idle (2 s)
        h3 = b.ok(code="w = 1", session="new")["session"]
        assert b.ok(code="w", session=h3)["session_ended"] == "max_cells"
        assert "ended (max_cells)" in b.refused(code="w", session=h3)
        h4 = b.ok(code="w = 1", session="new")["session"]
        live.wait_log("ended: idle after 1 cells")
        assert "ended (idle)" in b.refused(code="w", session=h4)
        # reload: role q's rules change, its session ends; role r's does not
        h5 = b.ok(code="w = 5", session="new")["session"]
        h6 = a.ok(code="v = 6", session="new")["session"]
        live.sign(policy(live, dict(SHORT, idle_s=60)))
        live.reload("reloaded")
        assert "ended (reload)" in b.refused(code="w", session=h5)
        assert a.ok(code="v", session=h6)["result"] == 6
        # closed: the client's MCP session ends, and the sessions bound to it with it
        a.c.send({"op": "terminate"})
        a.c.next(lambda m: m["op"] == "terminate")
        live.wait_log("ended: closed after 2 cells")
        reasons = [e["reason"] for e in live.audit_lines("session.end")]
        for why in ("memory", "died", "max_cells", "idle", "reload", "closed"):
            assert why in reasons, (why, reasons)
        live.stop()


@test
def a_rootless_policy_with_sessions_is_refused_at_start():
    live = Live()
    try:
        doc = policy(live)
        doc["runtime"] = {"rootless": True}
        doc["servers"]["toy"]["network"] = True  # a server rootless may run
        with open(live.path, "w") as f:
            json.dump(doc, f)
        # signing checks the policy first: it refuses to sign one that cannot start
        r = subprocess.run([APPLIANCE, "sign", "--secret", os.path.join(live.dir, "k.key"),
                            live.path], capture_output=True, text=True, timeout=120)
        assert r.returncode != 0, r.stdout + r.stderr
        assert "roles.q.sessions: needs root (the policy is rootless" in r.stdout + r.stderr, \
            r.stdout + r.stderr
    finally:
        live.cleanup()


if __name__ == "__main__":
    main()
