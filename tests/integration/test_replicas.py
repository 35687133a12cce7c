"""test_replicas.py: two replicas of one deployment (docs/scale-out.md):
one signed policy with a `cluster` section, one cluster key, one Redis as
the ledger, each replica on its own --listen port. A requestState one
replica made is taken by the other, which runs the cell again with the
answers it carries; the approved write is made once over both, whichever
replica is asked again, and its result comes back from the ledger. A
state forged or for other code is refused by both; a ledger that does not
answer means the approved call is not made.

The upstream is the filesystem server writing into one directory both
replicas' servers share, so a write shows as a file. Every wait is on a
log line or an answer. Runs as root; needs build/appliance, build/image,
the npm servers and Debian's redis-server.
"""

import hashlib
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from harness import main, test
import gatewaykit as gk
from cellkit import APPLIANCE

TOKEN = "appliance_test-token-replicas-0123456789"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
          "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}
YES = {"action": "accept", "content": {"approve": True}}
WRITE = """
try:
    r = await fs.write_file(path=%r, content="hello")
    print("written")
except ToolError as e:
    print("refused:", e)
"""


class Redis:
    """redis-server on a unix socket of its own, nothing saved."""

    def __init__(self, d):
        self.sock = os.path.join(d, "redis.sock")
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", self.sock, "--unixsocketperm",
             "700", "--save", "", "--appendonly", "no", "--dir", d],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while not os.path.exists(self.sock):
            assert self.proc.poll() is None and time.time() < deadline, "no redis"
            time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class Replica(gk.Logged):
    def __init__(self, sig, key, port, name):
        self.port = port
        super().__init__(sig, ["--cluster-key", key, "--listen", "127.0.0.1:%d" % port,
                               "--name", name])
        self.wait_log("serving MCP over HTTP at 127.0.0.1:%d/mcp" % port, 120)

    def call(self, src, **extra):
        params = {"name": "run_python", "arguments": {"code": src}, "_meta": MODERN}
        params.update(extra)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": params})
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            c.request("POST", "/mcp", body, {
                "Authorization": "Bearer " + TOKEN, "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream", "Host": "mcp.test",
                "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
                "Mcp-Name": "run_python"})
            r = c.getresponse()
            text = r.read().decode()
        finally:
            c.close()
        assert r.status == 200, (r.status, text)
        msgs = [json.loads(ln[6:]) for ln in text.splitlines() if ln.startswith("data: ")]
        return msgs[-1] if msgs else json.loads(text)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=60) == 0, self.log()


def setup():
    d = tempfile.mkdtemp(prefix="appliance-replicas.")
    os.chmod(d, 0o755)
    root = os.path.join(d, "root")
    os.makedirs(root)
    os.makedirs(os.path.join(d, "logs"))
    gk.share_with_servers(root)
    redis = Redis(d)
    key = os.path.join(d, "cluster.key")
    r = subprocess.run([APPLIANCE, "cluster-key", key], capture_output=True, text=True)
    assert r.returncode == 0 and oct(os.stat(key).st_mode & 0o777) == "0o600", r
    r = subprocess.run([APPLIANCE, "cluster-key", key], capture_output=True, text=True)
    assert r.returncode == 1 and "never replaced" in r.stderr, r
    token = {"name": "agent", "role": "w", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest()}
    sig = gk._kit.policy({"deadline_s": 60, "approval_timeout_s": 60},
                         servers={"fs": {"command": [gk.node(), gk.need(gk.FILESYSTEM), root]}},
                         tools={"fs.*": {"access": "read"},
                                "fs.write_file": {"access": "write", "approval": True}},
                         roles={"w": {"tools": ["fs.*"], "write": True}},
                         clients={"tokens": [token]},
                         http={"listen": ["127.0.0.1:1"], "allowed_hosts": ["mcp.test"]},
                         audit={"path": os.path.join(d, "logs", "audit-{name}.jsonl")},
                         cluster={"ledger": "unix:" + redis.sock})
    return d, root, redis, key, sig


def answer(first):
    (k, q), = first["inputRequests"].items()
    assert q["method"] == "elicitation/create", q
    return {k: YES}


@test
def a_state_made_by_one_replica_is_taken_by_another_and_the_write_is_made_once():
    d, root, redis, key, sig = setup()
    a = b = None
    try:
        a = Replica(sig, key, gk.free_port(), "ra")
        b = Replica(sig, key, gk.free_port(), "rb")
        target = os.path.join(root, "once.txt")
        src = WRITE % target
        first = a.call(src)["result"]
        assert first["resultType"] == "input_required", first
        state, answers = first["requestState"], answer(first)
        # forged, for other code, without its answer: refused by the other replica
        bad = state[:-2] + ("A" if state[-2] != "A" else "B") + state[-1]
        for st, code, ans in ((bad, src, answers), (state, src + "\n", answers),
                              (state, src, {})):
            e = b.call(code, requestState=st, inputResponses=ans)
            assert e["error"]["code"] == -32602, e
        assert not os.path.exists(target)
        # the other replica replays the cell with the answer the state carries
        done = b.call(src, requestState=state, inputResponses=answers)["result"]
        assert done["structuredContent"]["stdout"] == "written\n", done
        b.wait_log("a requestState made elsewhere: the run is replayed here")
        assert os.path.exists(target)
        os.unlink(target)
        # again on the same replica: replayed, the write's result from the ledger
        again = b.call(src, requestState=state, inputResponses=answers)["result"]
        assert again["structuredContent"]["stdout"] == "written\n", again
        b.wait_log("approved and made before (the ledger): its result again")
        # the run still parked on the first replica resumes: its yes is used up
        parked = a.call(src, requestState=state, inputResponses=answers)["result"]
        assert parked["structuredContent"]["stdout"] == "written\n", parked
        a.wait_log("approved and made before (the ledger): its result again")
        assert not os.path.exists(target), "a replica made the approved write a second time"
        # a ledger that does not answer: the approved call is not made
        redis.stop()
        other = os.path.join(root, "never.txt")
        first = a.call(WRITE % other)["result"]
        out = b.call(WRITE % other, requestState=first["requestState"],
                     inputResponses=answer(first))["result"]
        assert "the ledger the replicas share did not answer" in \
            out["structuredContent"]["stdout"], out
        assert not os.path.exists(other)
    finally:
        for r in (a, b):
            if r and r.proc.poll() is None:
                r.stop()
        if redis.proc.poll() is None:
            redis.stop()
    # a log per replica ({name}), both intact, one write sent over both
    logs = os.path.join(d, "logs")
    assert sorted(os.listdir(logs)) == ["audit-ra.jsonl", "audit-rb.jsonl"], os.listdir(logs)
    v = subprocess.run([APPLIANCE, "audit", "verify", logs], capture_output=True, text=True)
    assert v.returncode == 0 and "2 logs, 2 intact" in v.stdout, (v.stdout, v.stderr)
    evs = [json.loads(ln) for f in os.listdir(logs) for ln in open(os.path.join(logs, f))]
    sent = [e for e in evs if e["ev"] == "call" and e["outcome"] == "sent" and
            e["tool"] == "fs.write_file"]
    assert len(sent) == 1, sent
    shutil.rmtree(d, True)


@test
def a_replica_is_refused_its_start_without_what_the_cluster_needs():
    d, root, redis, key, sig = setup()
    try:
        cases = [([], "needs --cluster-key FILE"),
                 (["--cluster-key", os.path.join(d, "absent")], "--cluster-key"),
                 (["--cluster-key", key, "--listen", "10.1.2.3:80"], "needs http.tls"),
                 (["--cluster-key", key, "--listen", "localhost:80"], "--listen"),
                 (["--cluster-key", key], "chmod 600")]
        for extra, said in cases:
            if said == "chmod 600":
                os.chmod(key, 0o640)
            p = subprocess.run(gk.run_argv(sig) + extra, capture_output=True, text=True,
                               timeout=120)
            assert p.returncode != 0 and said in p.stderr, (extra, p.stderr[-2000:])
    finally:
        redis.stop()
        shutil.rmtree(d, True)


@test
def the_kubernetes_recipe_in_the_docs_has_the_shape_it_claims():
    """No Kubernetes schema validator is packaged in Debian 12: the YAML of
    docs/scale-out.md is parsed and held to what the text says of it."""
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, "docs", "scale-out.md")).read()
    block = text[text.index("    apiVersion: apps/v1"):]
    block = block[:block.index("\n\n", block.index("kind: Service"))]
    docs = list(yaml.safe_load_all("\n".join(ln[4:] for ln in block.splitlines())))
    dep, svc = docs
    assert (dep["apiVersion"], dep["kind"], svc["kind"]) == ("apps/v1", "Deployment", "Service")
    spec = dep["spec"]["template"]["spec"]
    assert "runtimeClassName" not in spec
    assert spec["terminationGracePeriodSeconds"] > 30  # above limits.http_drain_s
    (c,) = spec["containers"]
    assert c["args"][:1] == ["run"] and "--cluster-key" in c["args"], c["args"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    port = c["ports"][0]["containerPort"]
    assert c["readinessProbe"]["httpGet"]["port"] == port == svc["spec"]["ports"][0]["targetPort"]
    secret = [v for v in spec["volumes"] if "secret" in v][0]
    assert secret["secret"]["defaultMode"] == 0o400, secret
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert mounts[secret["name"]]["readOnly"] is True
    assert dep["spec"]["selector"]["matchLabels"] == dep["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]


if __name__ == "__main__":
    main()
