"""test_tasks.py: run_python as an MCP task, from real SDK clients, in both eras.

tests/tasks-client.mjs drives the appliance: the v1 TypeScript SDK's task runtime
(client.experimental.tasks) in the 2025-11-25 era, over stdio and over HTTP with a
token, and the v2 SDK's transports (it has no task runtime) sending raw 2026-07-28
requests that declare the tasks extension. Each era runs a 70 s cell as a task, polls
it and sees its progress change, and gets its result; a task cancelled mid-run loses
its sandbox and the audit log's run.end says it was cancelled, unanswered, and by
whom; a second token can neither read nor cancel the first's task (the same error as
an id nobody made) and the task still completes. Approvals inside a task: the legacy
era holds the elicitation/create until tasks/result and sends it there (raw lines,
then the v1 SDK), the 2026-07-28 era lists it in tasks/get's inputRequests and takes
the answer by tasks/update.

Runs as root; needs build/appliance, build/toy-server, build/image and the npm packages.
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

from harness import main, test
from cellkit import descendants
import gatewaykit as gk
from gatewaykit import free_port

TASKS_CLIENT = os.path.join(gk.ROOT, "tests", "tasks-client.mjs")
MODERN = "2026-07-28"
EXTENSION = "io.modelcontextprotocol/tasks"
RELATED = "io.modelcontextprotocol/related-task"
ALPHA, BETA = "appliance_test-token-alpha-0123456789", "appliance_test-token-beta-9876543210"
TASK_ID = re.compile(r"^[0-9a-f]{32}$")

# A 70 s cell: a line every 5 s, flushed, so each poll sees more of it.
TICKS = 14
LONG = ("import time\n"
        "for i in range(%d):\n"
        "    print('tick %%d' %% i, flush=True)\n"
        "    time.sleep(5)\n"
        "print('done', flush=True)\n" % TICKS)
LONG_OUT = "".join("tick %d\n" % i for i in range(TICKS)) + "done\n"
# A cell that says it runs, then waits to be cancelled.
HANG = "import time\nprint('started', flush=True)\ntime.sleep(100)\n"


# ---- policies ----------------------------------------------------------------------

def scratch():
    d = tempfile.mkdtemp(prefix="appliance-tasks.")
    os.chmod(d, 0o755)
    return os.path.realpath(d)


def stdio_policy(d, limits=None):
    """The toy as server `toy` for the stdio client, its audit log in d."""
    return gk._kit.policy(dict({"deadline_s": 120}, **(limits or {})),
                          servers={"toy": gk.toy_server()},
                          tools={"toy.*": {"access": "read"}},
                          roles={"r": {"tools": ["toy.*"]}},
                          clients={"default_role": "r"},
                          audit={"path": os.path.join(d, "audit.jsonl")})


def http_policy(port, d, limits=None):
    """Serving HTTP on port to two tokens, alpha and beta (two clients of
    the same role), its audit log in d."""
    tokens = [{"name": name, "sha256": hashlib.sha256(tok.encode()).hexdigest(), "role": "r"}
              for name, tok in (("alpha", ALPHA), ("beta", BETA))]
    return gk._kit.policy(dict({"deadline_s": 120}, **(limits or {})),
                          servers={"toy": gk.toy_server()},
                          tools={"toy.*": {"access": "read"}},
                          roles={"r": {"tools": ["toy.*"]}},
                          clients={"tokens": tokens},
                          http={"listen": ["127.0.0.1:%d" % port]},
                          audit={"path": os.path.join(d, "audit.jsonl")})


class Served(gk.Served):
    """`appliance run` serving HTTP to alpha and beta, its audit log in d."""

    def __init__(self, d, limits=None):
        port = free_port()
        super().__init__(http_policy(port, d, limits), port)
        self.url = "http://127.0.0.1:%d/mcp" % port

    def post(self, body, token=ALPHA, headers=None):
        """A raw POST of body; (status, parsed answer or the text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": "Bearer " + token}
        h.update(headers or {})
        c.request("POST", "/mcp", json.dumps(body), h)
        r = c.getresponse()
        text = r.read().decode()
        c.close()
        try:
            return r.status, json.loads(text)
        except ValueError:
            return r.status, text


def approvals_policy(d, limits=None, port=None):
    """server-filesystem on d/root, its write_file needing a yes, asked of
    the client (no approver program) — test_approvals.py's fs_policy; with
    port, served over HTTP to alpha instead of stdio."""
    root = os.path.join(d, "root")
    os.makedirs(root, exist_ok=True)
    gk.share_with_servers(root)
    if port:
        extra = {"clients": {"tokens": [{"name": "alpha", "role": "w", "sha256":
                                         hashlib.sha256(ALPHA.encode()).hexdigest()}]},
                 "http": {"listen": ["127.0.0.1:%d" % port]}}
    else:
        extra = {"clients": {"default_role": "w"}}
    sig = gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})),
                         servers={"fs": {"command": [gk.node(), gk.need(gk.FILESYSTEM), root]}},
                         tools={"fs.*": {"access": "read"},
                                "fs.write_file": {"access": "write", "approval": True}},
                         roles={"w": {"tools": ["fs.*"], "write": True}},
                         audit={"path": os.path.join(d, "audit.jsonl")}, **extra)
    return sig, root


class Eliciting(gk.Session):
    """gatewaykit's raw Session, its initialize declaring form elicitation
    (a legacy client is asked only when it says it can be)."""

    def request(self, method, params=None, timeout=90):
        if method == "initialize":
            params = dict(params, capabilities={"elicitation": {"form": {}}})
        return super().request(method, params, timeout)


WRITE = """
try:
    await fs.write_file(path=%r, content="hello")
    print("written")
except ToolError as e:
    print("refused:", e)
"""


def modern_meta(extension=True):
    caps = {"elicitation": {"form": {}}}
    if extension:
        caps["extensions"] = {EXTENSION: {}}
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps}


# ---- the client --------------------------------------------------------------------

class TasksClient:
    """tests/tasks-client.mjs as a child: its stderr kept line by line (the
    stdio appliance's log passes through it), its stdin held open for
    --hold; document() waits for the one JSON document it prints."""

    def __init__(self, sdk, action="run", code=None, sig=None, url=None, token=None,
                 extra=()):
        argv = [gk.node(), TASKS_CLIENT, "--sdk", sdk, "--action", action,
                "--timeout", "150000"]
        if code is not None:
            argv += ["--code", code]
        argv += list(extra)
        argv += ["--url", url, "--token", token] if url else ["--"] + gk.run_argv(sig)
        self.started = time.time()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.err = []
        self.err_done = False
        self.cv = threading.Condition()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.proc.stderr:
            with self.cv:
                self.err.append(raw.decode("utf-8", "replace"))
                self.cv.notify_all()
        with self.cv:
            self.err_done = True
            self.cv.notify_all()

    def log(self):
        with self.cv:
            return "".join(self.err)

    def wait_err(self, pattern, timeout=120):
        """The first match of pattern (a regex) on the client's stderr."""
        end = time.time() + timeout
        rx = re.compile(pattern, re.M)
        with self.cv:
            while True:
                m = rx.search("".join(self.err))
                if m:
                    return m
                assert not self.err_done, "client gone before %r; stderr:\n%s" % (
                    pattern, "".join(self.err)[-4000:])
                assert time.time() < end, "no %r in:\n%s" % (pattern, "".join(self.err)[-4000:])
                self.cv.wait(0.2)

    def task_id(self, timeout=120):
        return self.wait_err(r"^tasks-client: task ([0-9a-f]+) ", timeout).group(1)

    def document(self, timeout=240):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        out = self.proc.stdout.read()  # to its end: the client exits after printing
        self.proc.wait(timeout=timeout)
        self.ms = (time.time() - self.started) * 1000
        assert self.proc.returncode == 0, "exit %d: %s\nstderr:\n%s" % (
            self.proc.returncode, out.decode()[-3000:], self.log()[-4000:])
        return json.loads(out)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def tasks_client(*args, **kw):
    c = TasksClient(*args, **kw)
    try:
        return c.document(), c
    finally:
        c.kill()


# ---- what the appliance and its audit log say about a run ---------------------------

def run_of(log, client, task_id):
    """The run id of the task task_id (its log line `CLIENT: task ID8… made`
    comes right before the run's first) and its sandbox's name."""
    made = "%s: task %s… made" % (client, task_id[:8])
    assert made in log, "no %r in the log:\n%s" % (made, log[-4000:])
    m = re.search(r"run=([0-9a-f]{12}): run_python: ", log[log.index(made):])
    assert m, log[-4000:]
    run = m.group(1)
    box = re.search(r"run=%s: sandbox (\S+)" % run, log)
    assert box, log[-4000:]
    return run, box.group(1)


def sandbox_traces(appliance_pid, box):
    """What is left of sandbox box under the appliance: its processes (by
    their command lines, which name it), its runsc state and its bundle."""
    left = []
    instances = [p for p in os.listdir("/run/appliance") if p.startswith("i-%d-" % appliance_pid)]
    assert instances, "no /run/appliance/i-%d-*: nothing to look in" % appliance_pid
    for k in descendants(appliance_pid):
        try:
            with open("/proc/%d/cmdline" % k, "rb") as f:
                if box.encode() in f.read():
                    left.append("pid %d" % k)
        except OSError:
            pass
    for inst in instances:
        base = os.path.join("/run/appliance", inst)
        for sub in ("runsc", "bundles"):
            try:
                left += [os.path.join(sub, n) for n in os.listdir(os.path.join(base, sub))
                         if box in n]
            except FileNotFoundError:
                pass
    return left


def wait_sandbox_gone(appliance_pid, box, timeout=30):
    end = time.time() + timeout
    while sandbox_traces(appliance_pid, box):
        assert time.time() < end, "sandbox %s still there: %s" % (
            box, sandbox_traces(appliance_pid, box))
        time.sleep(0.1)


def audit(d, ev, timeout=30):
    """The audit log's lines of event ev (waited for: at least one)."""
    end = time.time() + timeout
    while True:
        try:
            with open(os.path.join(d, "audit.jsonl")) as f:
                got = [e for e in map(json.loads, f) if e["ev"] == ev]
        except FileNotFoundError:
            got = []
        if got or time.time() >= end:
            return got
        time.sleep(0.1)


def run_end(d, run, timeout=30):
    end = time.time() + timeout
    while True:
        got = [e for e in audit(d, "run.end", 1) if e["run"] == run]
        if got:
            assert len(got) == 1, got
            return got[0]
        assert time.time() < end, "no run.end for %s in the audit log" % run
        time.sleep(0.1)


def assert_cancelled(log, d, appliance_pid, client, task_id):
    """The task's run ended cancelled: the log says so, its sandbox is gone,
    the audit's run.end says cancelled, unanswered, and who."""
    run, box = run_of(log, client, task_id)
    assert re.search(r"run=%s: ended: cancelled" % run, log), log[-4000:]
    assert "%s: task %s… cancelled by its client" % (client, task_id[:8]) in log, log[-4000:]
    wait_sandbox_gone(appliance_pid, box)
    end = run_end(d, run)
    assert end["reason"] == "cancelled", end
    assert end["answered"] is False, end
    assert end["cancelled_by"] == client, end
    return run, box


# ---- what a client saw -------------------------------------------------------------

def working_messages(doc):
    return [s["statusMessage"] for s in doc["statuses"] if s["status"] == "working"]


def printed_counts(messages):
    """The `N bytes printed` of each progress text, in order."""
    out = []
    for m in messages:
        got = re.search(r"(\d+) bytes printed", m or "")
        assert got, "no progress text: %r" % m
        out.append(int(got.group(1)))
    return out


def assert_seen_progress(doc):
    """The polls saw the cell at work: at least two different progress texts,
    its output growing, then completed."""
    statuses = [s["status"] for s in doc["statuses"]]
    assert statuses[-1] == "completed", statuses
    assert set(statuses[:-1]) == {"working"}, statuses
    msgs = working_messages(doc)
    assert len(set(msgs)) >= 2, msgs
    counts = printed_counts(msgs)
    assert counts == sorted(counts) and counts[-1] > counts[0], counts
    assert any("output so far: tick 0\n" in m for m in msgs), msgs
    assert any("tick %d\n" % (TICKS // 2) in m for m in msgs), msgs


def assert_long_result(result):
    sc = result["structuredContent"]
    assert sc["stdout"] == LONG_OUT, sc
    assert sc["error"] is None and not sc["stopped"] and sc["reason"] is None, sc
    assert sc["duration_ms"] >= (TICKS - 1) * 5000, sc
    assert result["isError"] is False, result


# ---- the tests ---------------------------------------------------------------------

@test
def a_v1_sdk_client_runs_a_70_s_cell_as_a_task_over_stdio_and_sees_its_progress():
    d = scratch()
    doc, c = tasks_client("v1", code=LONG, sig=stdio_policy(d), extra=["--ttl", "600000"])
    assert doc["era"] == "2025-11-25", doc["era"]
    assert doc["capabilities"]["tasks"] == {"list": {}, "cancel": {},
                                            "requests": {"tools": {"call": {}}}}, doc
    assert doc["tools"] == [{"name": "run_python",
                             "execution": {"taskSupport": "optional"}}], doc["tools"]
    # answered at once with a working task: the ttl asked for (within
    # deadline_s + 60 s .. limits.task_ttl_s), a poll interval
    t = doc["created"]
    assert TASK_ID.match(t["taskId"]) and t["status"] == "working", t
    assert t["ttl"] == 600000 and t["pollInterval"] == 500, t
    listed = doc["listed"]["result"]["tasks"]
    assert [(x["taskId"], x["status"]) for x in listed] == [(t["taskId"], "working")], listed
    # polled every pollInterval (the SDK's loop) for the 70 s
    assert len(doc["statuses"]) >= 30, doc["statuses"]
    assert_seen_progress(doc)
    # notifications/progress for the call's token, about the task
    prog = doc["progress"]
    assert len(prog) >= 10, prog
    assert all(p["_meta"] == {RELATED: {"taskId": t["taskId"]}} for p in prog), prog
    assert len({p["message"] for p in prog}) >= 2, prog
    assert [p["progress"] for p in prog] == sorted(p["progress"] for p in prog), prog
    # tasks/result: the CallToolResult, naming its task
    assert_long_result(doc["result"])
    assert doc["result"]["_meta"][RELATED] == {"taskId": t["taskId"]}, doc["result"]
    assert doc["error"] is None, doc["error"]
    assert doc["final"]["status"] == "completed", doc["final"]
    log = c.log()
    run, _ = run_of(log, "stdio", t["taskId"])
    assert "stdio: task %s… completed" % t["taskId"][:8] in log, log[-3000:]
    end = run_end(d, run)
    assert end["reason"] == "done" and "cancelled_by" not in end, end
    print("# v1 over stdio: %d tasks/get, %d progress notifications, %d distinct texts, "
          "%.1f s in all" % (len(doc["statuses"]), len(prog), len(set(working_messages(doc))),
                             c.ms / 1000))
    shutil.rmtree(d)


@test
def a_v2_client_runs_a_70_s_cell_as_a_2026_07_28_task_over_http_and_polls_it():
    d = scratch()
    s = Served(d)
    try:
        doc, c = tasks_client("v2", code=LONG, url=s.url, token=ALPHA)
        assert doc["era"] == MODERN and doc["capabilities"]["extensions"] == {EXTENSION: {}}, doc
        t = doc["created"]
        assert t["resultType"] == "task" and t["status"] == "working", t
        assert TASK_ID.match(t["taskId"]) and t["ttlMs"] == 3600 * 1000, t
        assert t["pollIntervalMs"] == 500, t
        assert "pollInterval" not in t and "ttl" not in t, t
        assert len(doc["statuses"]) >= 30, doc["statuses"]
        assert_seen_progress(doc)
        # polled at pollIntervalMs, not faster: 500 ms while the task is
        # young (10 s), then 2 s
        gaps = [b["ms"] - a["ms"] for a, b in zip(doc["statuses"], doc["statuses"][1:])]
        assert min(gaps) >= 450 and gaps[-1] >= 1900, gaps
        assert sum(g < 1900 for g in gaps) <= 25, gaps
        # the completed task carries the result itself
        final = doc["final"]
        assert final["status"] == "completed" and final["taskId"] == t["taskId"], final
        assert final["resultType"] == "complete", final
        assert_long_result(final["result"])
        assert doc["unrelated"] == [], doc["unrelated"]
        log = s.log()
        run, _ = run_of(log, "alpha", t["taskId"])
        assert "alpha: task %s… completed" % t["taskId"][:8] in log, log[-3000:]
        assert run_end(d, run)["reason"] == "done"
        print("# v2 over HTTP: %d tasks/get, %d distinct texts, %.1f s in all" % (
            len(doc["statuses"]), len(set(working_messages(doc))), c.ms / 1000))
    finally:
        s.stop()
    shutil.rmtree(d)


@test
def a_v1_task_cancelled_mid_run_loses_its_sandbox_and_the_audit_names_who():
    d = scratch()
    c = TasksClient("v1", "cancel", HANG, sig=stdio_policy(d),
                    extra=["--marker", "started", "--hold"])
    try:
        task_id = c.task_id()
        c.wait_err(r"^tasks-client: cancelled %s$" % task_id)
        c.wait_err(r"^tasks-client: holding$")
        # the client still holds the appliance (its child): look at it
        app = [k for k in descendants(c.proc.pid)
               if open("/proc/%d/comm" % k).read().strip() == "appliance"]
        assert len(app) == 1, app
        assert_cancelled(c.log(), d, app[0], "stdio", task_id)
        doc = c.document()
    finally:
        c.kill()
    # tasks/cancel answered with the task, cancelled, saying who
    cancel = doc["cancel"]["result"]
    assert cancel["taskId"] == task_id and cancel["status"] == "cancelled", cancel
    assert cancel["statusMessage"] == "cancelled by stdio", cancel
    # it had been seen running, and is cancelled from then on
    msgs = working_messages(doc)
    assert any("output so far: started\n" in m for m in msgs), msgs
    assert doc["statuses"][-1]["status"] == "cancelled", doc["statuses"]
    assert doc["final"]["status"] == "cancelled", doc["final"]
    assert doc["final"]["statusMessage"] == "cancelled by stdio", doc["final"]
    # the SDK's stream ends in an error, and there is no result
    assert doc["result"] is None and "cancelled" in doc["error"]["message"], doc
    after = doc["after"]["error"]
    assert after["code"] == -32602 and "cancelled by stdio" in after["message"], after
    # 2025-11-25: a task that ended cannot be cancelled
    again = doc["again"]["error"]
    assert again["code"] == -32602 and "ended already" in again["message"], again
    shutil.rmtree(d)


@test
def a_v2_task_cancelled_over_http_loses_its_sandbox_and_the_audit_names_the_token():
    d = scratch()
    s = Served(d)
    try:
        doc, _ = tasks_client("v2", "cancel", HANG, url=s.url, token=ALPHA,
                              extra=["--marker", "started"])
        task_id = doc["created"]["taskId"]
        # 2026-07-28: tasks/cancel is a bare acknowledgement
        ack = doc["cancel"]["result"]
        assert ack.keys() <= {"_meta", "resultType"} and ack["resultType"] == "complete", ack
        assert any("output so far: started\n" in m for m in working_messages(doc)), doc
        final = doc["final"]
        assert final["status"] == "cancelled" and final["resultType"] == "complete", final
        assert final["statusMessage"] == "cancelled by alpha", final
        assert "result" not in final, final
        # 2026-07-28: cancelling it again is acknowledged the same
        assert doc["again"]["result"].keys() <= {"_meta", "resultType"}, doc["again"]
        assert_cancelled(s.log(), d, s.proc.pid, "alpha", task_id)
    finally:
        s.stop()
    shutil.rmtree(d)


# Long enough for the other token's probes to find it running.
SHORT = "import time\nprint('a', flush=True)\ntime.sleep(20)\nprint('b')\n"


@test
def a_second_token_can_neither_read_nor_cancel_the_first_tokens_tasks():
    d = scratch()
    s = Served(d)
    mine = []
    try:
        # alpha: a task in each era, running
        mine = [TasksClient("v1", code=SHORT, url=s.url, token=ALPHA),
                TasksClient("v2", code=SHORT, url=s.url, token=ALPHA)]
        legacy_id, modern_id = [c.task_id() for c in mine]
        # beta, through each SDK: every method on alpha's task gets what an
        # id nobody made gets
        probe1, _ = tasks_client("v1", "probe", url=s.url, token=BETA,
                                 extra=["--task-id", legacy_id])
        for method in ("get", "result", "cancel"):
            theirs, unknown = probe1["probes"]["theirs"][method], probe1["probes"]["unknown"][method]
            assert "error" in theirs and theirs == unknown, (method, theirs, unknown)
            assert theirs["error"]["code"] == -32602, theirs
            assert "Task not found" in theirs["error"]["message"], theirs
        assert probe1["probes"]["list"] == {"result": {"tasks": []}}, probe1["probes"]["list"]
        probe2, _ = tasks_client("v2", "probe", url=s.url, token=BETA,
                                 extra=["--task-id", modern_id])
        for method in ("get", "update", "cancel"):
            theirs, unknown = probe2["probes"]["theirs"][method], probe2["probes"]["unknown"][method]
            assert "error" in theirs and theirs == unknown, (method, theirs, unknown)
            assert theirs["error"]["code"] == -32602, theirs
            assert theirs["error"]["message"] == "Task not found", theirs
        # raw: beta on the legacy task in the other era, alpha on both (the
        # tasks are the token's, not a connection's); Mcp-Name, when given,
        # must name the task
        for tid in (legacy_id, modern_id):
            get = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get",
                   "params": {"taskId": tid, "_meta": modern_meta()}}
            hdr = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tasks/get", "Mcp-Name": tid}
            st_b, b = s.post(get, BETA, hdr)
            unknown = dict(get, params=dict(get["params"], taskId="0" * 32))
            st_u, u = s.post(unknown, BETA, dict(hdr, **{"Mcp-Name": "0" * 32}))
            assert (st_b, b) == (st_u, u) and b["error"]["message"] == "Task not found", (b, u)
            st_a, a = s.post(get, ALPHA, hdr)
            assert st_a == 200 and a["result"]["status"] == "working", (st_a, a)
            st, bad = s.post(get, ALPHA, dict(hdr, **{"Mcp-Name": "0" * 32}))
            assert st == 400 and "Mcp-Name" in bad["error"]["message"], (st, bad)
        # alpha's tasks ran on to their ends
        docs = [c.document() for c in mine]
        for doc in docs:
            assert doc["statuses"][-1]["status"] == "completed", doc["statuses"]
            assert doc["cancel"] is None and doc["error"] is None, doc
        assert docs[0]["result"]["structuredContent"]["stdout"] == "a\nb\n", docs[0]["result"]
        assert docs[1]["final"]["result"]["structuredContent"]["stdout"] == "a\nb\n", docs[1]
        log = s.log()
        assert "ended: cancelled" not in log and "cancelled by" not in log, log[-3000:]
        assert "beta: task" not in log, log[-3000:]
        assert [e["reason"] for e in audit(d, "run.end")] == ["done", "done"]
    finally:
        for c in mine:
            c.kill()
        s.stop()
    shutil.rmtree(d)


@test
def a_legacy_tasks_question_waits_for_tasks_result_and_goes_with_it():
    d = scratch()
    sig, root = approvals_policy(d)
    target = os.path.join(root, "a.txt")
    with Eliciting(sig) as s:
        r = s.request("tools/call", {"name": "run_python", "arguments": {"code": WRITE % target},
                                     "task": {"ttl": 1000}})
        task = r["result"]["task"]
        tid = task["taskId"]
        # the ttl asked for is raised to the deadline (60 s) and 60 s more
        assert task["status"] == "working" and task["ttl"] == 120000, task
        end = time.time() + 60
        while True:
            g = s.request("tasks/get", {"taskId": tid})["result"]
            if g["status"] != "working":
                break
            assert time.time() < end, g
            time.sleep(0.2)
        assert g["status"] == "input_required", g
        # held: nothing was sent before the client asks for the result
        assert not [n for n in s.notes if n.get("method") == "elicitation/create"], s.notes
        rid = s.start("tasks/result", {"taskId": tid})
        ask = s.wait_note("elicitation/create", timeout=30)
        assert ask, "no elicitation/create; log:\n" + s.log()
        assert ask["params"]["_meta"] == {RELATED: {"taskId": tid}}, ask
        assert "fs.write_file" in ask["params"]["message"], ask
        assert rid not in s.answers and not os.path.exists(target)
        s.send({"jsonrpc": "2.0", "id": ask["id"],
                "result": {"action": "accept", "content": {"approve": True}}})
        done = s.wait(rid, 60)["result"]
        assert done["structuredContent"]["stdout"] == "written\n", done
        assert done["_meta"][RELATED] == {"taskId": tid}, done
        assert s.request("tasks/get", {"taskId": tid})["result"]["status"] == "completed"
        # a ttl above limits.task_ttl_s (3600 s by default) is cut to it
        r = s.request("tools/call", {"name": "run_python", "arguments": {"code": "print(1)"},
                                     "task": {"ttl": 10 ** 9}})
        assert r["result"]["task"]["ttl"] == 3600 * 1000, r
    assert open(target).read() == "hello"
    ap = audit(d, "approval")
    assert [(a["tool"], a["outcome"], a["by"]) for a in ap] == [
        ("fs.write_file", "approved", "client")], ap
    shutil.rmtree(d)


def assert_v1_answered(doc, target):
    tid = doc["created"]["taskId"]
    # the SDK saw input_required and went to tasks/result, where the question came
    assert "input_required" in [s["status"] for s in doc["statuses"]], doc["statuses"]
    assert len(doc["elicitations"]) == 1, doc["elicitations"]
    e = doc["elicitations"][0]
    assert e["_meta"] == {RELATED: {"taskId": tid}} and "fs.write_file" in e["message"], e
    assert doc["result"]["structuredContent"]["stdout"] == "written\n", doc["result"]
    assert doc["result"]["_meta"][RELATED] == {"taskId": tid}, doc["result"]
    assert doc["final"]["status"] == "completed", doc["final"]
    assert open(target).read() == "hello"


@test
def a_legacy_tasks_question_that_timed_out_unsent_is_not_sent_later():
    """A question held for tasks/result that ends (no answer within
    limits.approval_timeout_s) before the client asked for the result: the
    client never got it, so nothing withdraws it, and tasks/result does not
    bring it afterwards (its answer could change nothing: the call was
    refused already)."""
    d = scratch()
    sig, root = approvals_policy(d, {"approval_timeout_s": 2})
    target = os.path.join(root, "t.txt")
    code_ = WRITE % target + "import time\ntime.sleep(4)\nprint('after')\n"
    with Eliciting(sig) as s:
        r = s.request("tools/call", {"name": "run_python", "arguments": {"code": code_},
                                     "task": {}})
        tid = r["result"]["task"]["taskId"]
        seen, end = [], time.time() + 60
        while seen[-2:] != ["input_required", "working"]:
            g = s.request("tasks/get", {"taskId": tid})["result"]
            if not seen or seen[-1] != g["status"]:
                seen.append(g["status"])
            assert g["status"] in ("working", "input_required") and time.time() < end, seen
            time.sleep(0.1)
        # the question timed out; the run goes on
        done = s.request("tasks/result", {"taskId": tid}, timeout=60)["result"]
        out = done["structuredContent"]["stdout"]
        assert "no approval: no answer within 2 s" in out and out.endswith("after\n"), out
        sent = [n for n in s.notes if n.get("method") in ("elicitation/create",
                                                           "notifications/cancelled")]
        assert sent == [], "a question the client never had: %s" % json.dumps(sent)
    assert not os.path.exists(target)
    assert [a["outcome"] for a in audit(d, "approval")] == ["timeout"]
    shutil.rmtree(d)


@test
def the_v1_sdk_answers_a_tasks_question_it_gets_through_tasks_result():
    # over stdio
    d = scratch()
    sig, root = approvals_policy(d)
    target = os.path.join(root, "b.txt")
    doc, _ = tasks_client("v1", code=WRITE % target, sig=sig, extra=["--elicit", "accept"])
    assert_v1_answered(doc, target)
    assert [a["outcome"] for a in audit(d, "approval")] == ["approved"]
    shutil.rmtree(d)
    # over HTTP: the question comes on tasks/result's SSE stream, the
    # answer is a POST of its own
    d = scratch()
    port = free_port()
    sig, root = approvals_policy(d, port=port)
    s = gk.Served(sig, port)
    try:
        target = os.path.join(root, "b.txt")
        doc, _ = tasks_client("v1", code=WRITE % target, url="http://127.0.0.1:%d/mcp" % port,
                              token=ALPHA, extra=["--elicit", "accept"])
        assert_v1_answered(doc, target)
    finally:
        s.stop()
    assert [(a["outcome"], a["by"]) for a in audit(d, "approval")] == [("approved", "client")]
    shutil.rmtree(d)


@test
def a_2026_07_28_tasks_question_is_in_input_requests_and_tasks_update_answers_it():
    d = scratch()
    sig, root = approvals_policy(d)
    target = os.path.join(root, "c.txt")
    # over stdio, through the v2 SDK's stdio transport
    doc, _ = tasks_client("v2", code=WRITE % target, sig=sig, extra=["--elicit", "accept"])
    statuses = [s["status"] for s in doc["statuses"]]
    assert "input_required" in statuses and statuses[-1] == "completed", statuses
    assert len(doc["elicitations"]) == 1, doc["elicitations"]
    e = doc["elicitations"][0]
    assert e["method"] == "elicitation/create" and "fs.write_file" in e["message"], e
    assert doc["error"] is None, doc["error"]
    assert doc["final"]["result"]["structuredContent"]["stdout"] == "written\n", doc["final"]
    assert open(target).read() == "hello"
    assert [(a["outcome"], a["by"]) for a in audit(d, "approval")] == [("approved", "client")]
    shutil.rmtree(d)


@test
def without_the_extension_a_2026_07_28_call_is_no_task_and_tasks_methods_are_refused():
    d = scratch()
    with gk.Session(stdio_policy(d)) as s:
        plain = s.request("tools/call", {"name": "run_python",
                                         "arguments": {"code": "print(6 * 7)"},
                                         "_meta": modern_meta(extension=False)})["result"]
        assert plain["resultType"] == "complete", plain
        assert plain["structuredContent"]["stdout"] == "42\n", plain
        made = s.request("tools/call", {"name": "run_python", "arguments": {"code": "print(1)"},
                                        "_meta": modern_meta()})["result"]
        assert made["resultType"] == "task", made
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            r = s.request(method, {"taskId": made["taskId"], "inputResponses": {},
                                   "_meta": modern_meta(extension=False)})
            assert r["error"]["code"] == -32021, r
            assert r["error"]["data"] == {"requiredCapabilities": {"extensions": {
                EXTENSION: {}}}}, r
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
