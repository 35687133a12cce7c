"""test_metrics.py: GET /metrics on the policy's http.metrics_listen.

`appliance run` serves MCP over HTTP with a metrics listener on loopback; the official
SDK client runs cells (one fine, one that raises, one that calls a hostile server's tool
and prints text shaped like samples) and the scraped page counts them, passes
`promtool check metrics` with no complaint, holds no text of a client, a cell or a
server, and Debian's own Prometheus server scrapes it until its query API answers with
the cells. A listener off loopback is refused at start, and so is one whose port is in
use; one on a unix socket serves curl --unix-socket, GET and HEAD of /metrics only.

Runs as root; needs build/appliance, build/toy-server, build/image, the npm packages,
prometheus and promtool (scripts/install-deps).
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from harness import main, test
import gatewaykit as gk
from gatewaykit import free_port
from cellkit import ROOT, digest

TOKEN = "appliance_test-token-metrics-0123456789"

# A server whose tool names and answers are made to forge samples: quotes,
# braces, a backslash, a newline (a name with a control character is never
# taken), and text shaped like the format. Its one tool a cell can call is
# `hi"}{x="1"} 2\`, which the cell knows as evil.hi_x_1_2.
EVIL_SERVER = r'''
import json, sys
SCHEMA = {"type": "object", "properties": {}}
HINT = {"readOnlyHint": True}
TOOLS = [{"name": 'hi"}{x="1"} 2\\', "inputSchema": SCHEMA, "annotations": HINT},
         {"name": 'pwned\nappliance_cells_total{outcome="pwned"} 999', "inputSchema": SCHEMA,
          "annotations": HINT}]
FORGED = 'appliance_tool_calls_total{server="evil",tool="pwned",outcome="ok"} 999\n}"{\\'
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method = m.get("method")
    if method == "initialize":
        result = {"protocolVersion": m["params"]["protocolVersion"],
                  "capabilities": {"tools": {}},
                  "serverInfo": {"name": 'evil"} 1', "version": "1"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": FORGED}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''

# Every label value the page may hold: the fixed lists of pkg/metrics and the
# names this policy gives (docs/metrics.md).
ALLOWED = {
    "outcome": {"ok", "error", "stopped", "not_run", "refused", "tool_error", "too_large",
                "bad_output", "malformed", "timeout", "cancelled", "unavailable", "busy",
                "host_fault", "abandoned", "approved", "declined", "other", "_overflow"},
    "reason": {"none", "deadline", "output", "protocol", "memory", "boot", "exit", "cancelled",
               "internal", "signal", "waited", "no_result", "expired", "audit", "busy",
               "host_fault", "not_allowed", "arguments", "schema", "unavailable", "budget",
               "waiting", "approval", "timeout", "other", "_overflow"},
    "server": {"toy", "evil", "_overflow"},
    "tool": {"add", "_other", "_read", "_overflow"},
    "code": {"200", "202", "204", "400", "401", "403", "404", "405", "406", "409", "413",
             "415", "429", "500", "503", "other"},
    "le": None,  # the histogram's bounds, numbers
}

SAMPLE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"(?:,|$)')


def evil_server(d):
    """The hostile server's script in d (which the servers' user may read)."""
    path = os.path.join(d, "evil_server.py")
    with open(path, "w") as f:
        f.write(EVIL_SERVER)
    os.chmod(path, 0o644)
    return {"command": ["/usr/bin/python3", path]}


def metrics_doc(port, metrics_listen, d):
    tokens = [{"name": "alpha", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
               "role": "adder"}]
    return dict(limits={"deadline_s": 60},
                servers={"toy": gk.toy_server(), "evil": evil_server(d)},
                tools={"toy.*": {"access": "read"}, "evil.*": {"access": "read"}},
                roles={"adder": {"tools": ["toy.add", "evil.*"]}},
                clients={"tokens": tokens},
                http={"listen": ["127.0.0.1:%d" % port], "metrics_listen": metrics_listen})


def metrics_policy(port, metrics_listen, d):
    return gk._kit.policy(**metrics_doc(port, metrics_listen, d))


def signed_as_is(extra):
    """A policy signed with Debian's stock minisign and the kit's key: unlike
    `appliance sign`, minisign checks nothing of what it signs, so a policy
    `run` must refuse can reach it."""
    kit = gk._kit
    kit.serial += 1
    doc = {"policy_version": 1, "deployment": kit.deployment, "serial": kit.serial,
           "expires": "2099-01-01T00:00:00Z",
           "image": {"layout": os.path.join(ROOT, "build", "image"), "digest": digest()}}
    doc.update(extra)
    name = "p%d.json" % kit.serial
    path = os.path.join(kit.dir(), name)
    with open(path, "w") as f:
        json.dump(doc, f)
    comment = "file:%s serial:%d signed:%s" % (name, kit.serial,
                                               time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    r = subprocess.run([need("minisign"), "-S", "-s", os.path.join(kit.dir(), "k.key"), "-m",
                        path, "-t", comment, "-x", path + ".sig"], input=b"",
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return path + ".sig"


class Served(gk.Logged):
    """`appliance run` serving HTTP and metrics."""

    def __init__(self, metrics_listen=None):
        self.dir = tempfile.mkdtemp(prefix="appliance-metrics.")
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.mport = free_port()
        self.metrics_listen = metrics_listen or "127.0.0.1:%d" % self.mport
        super().__init__(metrics_policy(self.port, self.metrics_listen, self.dir))
        self.wait_log("serving metrics at %s/metrics" % self.metrics_listen)
        self.wait_log("serving MCP over HTTP at 127.0.0.1:%d/mcp" % self.port)

    def client(self, *codes):
        argv = [gk.node(), gk.CLIENT, "--timeout", "120000", "--url",
                "http://127.0.0.1:%d/mcp" % self.port, "--token", TOKEN]
        for c in codes:
            argv += ["--call", json.dumps(gk.code(c))]
        r = subprocess.run(argv, capture_output=True, timeout=300)
        assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()[-3000:]
        return [c["result"]["structuredContent"] for c in json.loads(r.stdout)["calls"]]

    def scrape(self, method="GET", path="/metrics", headers=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.mport, path),
                                     method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict((k.lower(), v) for k, v in e.headers.items()), e.read()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        shutil.rmtree(self.dir, True)
        assert rc == 0, "exit %d; log:\n%s" % (rc, self.log())


def samples(text):
    """{(name, ((label, value), ...)): value} of a page, every line checked to
    be a comment or a sample, and every label value one the page may hold."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample: %r" % line
        labels = tuple(LABEL.findall(m.group(2) or ""))
        for k, v in labels:
            assert k in ALLOWED, (k, line)
            assert ALLOWED[k] is None or v in ALLOWED[k], "label %s=%r in %r" % (k, v, line)
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(got, name, **labels):
    return got.get((name, tuple(labels.items())), 0)


def promtool_check(page):
    r = subprocess.run([need("promtool"), "check", "metrics"], input=page,
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), (
        r.returncode, r.stdout.decode(), r.stderr.decode())


def need(tool):
    path = shutil.which(tool)
    assert path, "no %s on PATH (scripts/install-deps installs prometheus)" % tool
    return path


HOSTILE = """r = await evil.hi_x_1_2()
print(r)
print('appliance_cells_total{outcome="pwned",reason="none"} 999')
try:
    await toy.echo(text='x')
except ToolError as e:
    print('echo:', e.kind)
"""


@test
def metrics_count_what_a_client_did_and_never_quote_it():
    s = Served()
    try:
        st, hd, body = s.scrape()
        assert st == 200, (st, body)
        before = samples(body.decode())
        assert value(before, "appliance_policy_serial") == gk._kit.serial, before
        assert value(before, "appliance_policy_expiry_timestamp_seconds") == 4070908800
        ok, raised, hostile = s.client("print((await toy.add(a=20, b=22))['sum'])",
                                       "raise ValueError('boom')", HOSTILE)
        assert ok["stdout"] == "42\n" and ok["error"] is None, ok
        assert "ValueError" in raised["error"], raised
        assert "pwned" in hostile["stdout"] and "echo: refused" in hostile["stdout"], hostile
        st, hd, body = s.scrape()
        assert st == 200, (st, body)
        assert hd["content-type"] == "text/plain; version=0.0.4; charset=utf-8", hd
        page = body.decode()
        got = samples(page)
        assert value(got, "appliance_cells_total", outcome="ok", reason="none") == 2, page
        assert value(got, "appliance_cells_total", outcome="error", reason="none") == 1, page
        assert value(got, "appliance_cell_duration_seconds_count") == 3, page
        assert value(got, "appliance_tool_calls_total", server="toy", tool="add",
                     outcome="ok") == 1, page
        # a tool a wildcard let in is counted under "_other", never by its name
        assert value(got, "appliance_tool_calls_total", server="evil", tool="_other",
                     outcome="ok") == 1, page
        assert value(got, "appliance_tool_refusals_total", reason="not_allowed") == 1, page
        assert value(got, "appliance_http_requests_total", code="200") >= 3, page
        assert value(got, "appliance_pool_boots_total") + \
            value(got, "appliance_pool_restores_total") >= 3, page
        assert ("appliance_pool_ready", ()) in got, page
        # nothing of the server's names, its answers or the cell's output:
        # samples() held every label to its list; no sample forged either
        for text in ("pwned", "hi_x", 'hi"', "999", 'x="1"', "\\"):
            assert text not in page, (text, page)
        assert all(name.startswith("appliance_") for name, _ in got), got
        promtool_check(body)
        prometheus_reads(s, got)
    finally:
        s.stop()


def prometheus_reads(s, got):
    """Debian's Prometheus scrapes the listener until its query API answers
    with the cells the page counted."""
    d = tempfile.mkdtemp(prefix="appliance-prometheus.")
    port = free_port()
    cfg = os.path.join(d, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: appliance\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % s.mport)
    log = open(os.path.join(d, "log"), "wb")
    p = subprocess.Popen([need("prometheus"), "--config.file=" + cfg,
                          "--storage.tsdb.path=" + os.path.join(d, "data"),
                          "--web.listen-address=127.0.0.1:%d" % port],
                         stdout=log, stderr=subprocess.STDOUT, cwd=d)
    want = {"ok": value(got, "appliance_cells_total", outcome="ok", reason="none"),
            "error": value(got, "appliance_cells_total", outcome="error", reason="none")}
    url = "http://127.0.0.1:%d/api/v1/query?query=appliance_cells_total" % port
    seen, deadline = None, time.time() + 120
    try:
        while True:
            assert p.poll() is None, open(os.path.join(d, "log")).read()[-3000:]
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    seen = json.load(r)
            except (OSError, ValueError):
                seen = None
            cells = {}
            for row in (seen or {}).get("data", {}).get("result", []):
                cells[row["metric"].get("outcome")] = float(row["value"][1])
            if all(cells.get(k, 0) == v for k, v in want.items()):
                break
            assert time.time() < deadline, (seen, want,
                                             open(os.path.join(d, "log")).read()[-3000:])
            time.sleep(0.2)
        assert all(row["metric"]["job"] == "appliance" for row in seen["data"]["result"]), seen
    finally:
        p.terminate()
        p.wait(timeout=60)
        log.close()
        shutil.rmtree(d, True)


@test
def a_metrics_listener_off_loopback_is_refused_at_start():
    d = tempfile.mkdtemp(prefix="appliance-metrics.")
    try:
        os.chmod(d, 0o755)
        for addr in ("0.0.0.0:9464", "[::]:9464", "10.1.2.3:9464"):
            sig = signed_as_is(metrics_doc(free_port(), addr, d))
            r = subprocess.run(gk.run_argv(sig), stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=60)
            err = r.stderr.decode()
            assert r.returncode == 1, (r.returncode, err)
            assert ("http.metrics_listen: %s is not loopback: metrics are served on "
                    "127.0.0.0/8, [::1] or unix:/PATH only" % addr) in err, err
            assert "serving" not in err, err
    finally:
        shutil.rmtree(d, True)


@test
def a_metrics_port_in_use_refuses_the_start_by_name():
    d = tempfile.mkdtemp(prefix="appliance-metrics.")
    taken = socket.socket()
    try:
        os.chmod(d, 0o755)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        addr = "127.0.0.1:%d" % taken.getsockname()[1]
        r = subprocess.run(gk.run_argv(metrics_policy(free_port(), addr, d)),
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=180)
        err = r.stderr.decode()
        assert r.returncode == 1, (r.returncode, err)
        assert "http.metrics_listen: listen on %s: Address already in use" % addr in err, err
        assert "serving metrics" not in err, err
    finally:
        taken.close()
        shutil.rmtree(d, True)


@test
def a_unix_socket_serves_get_and_head_of_metrics_only():
    sock_dir = tempfile.mkdtemp(prefix="appliance-msock.")
    path = os.path.join(sock_dir, "metrics.sock")
    s = Served("unix:" + path)
    curl = need("curl")

    def ask(*args):
        r = subprocess.run([curl, "-sS", "--unix-socket", path, "-o", "/dev/stdout",
                            "-w", "\n%{http_code}", *args], capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr.decode()
        body, _, code = r.stdout.decode().rpartition("\n")
        return int(code), body

    try:
        assert oct(os.stat(path).st_mode & 0o777) == "0o660"
        code, body = ask("http://localhost/metrics")
        assert code == 200, (code, body)
        assert value(samples(body), "appliance_policy_serial") == gk._kit.serial, body
        promtool_check(body.encode())
        code, body = ask("-I", "http://localhost/metrics")
        assert code == 200 and "content-type: text/plain; version=0.0.4" in body.lower(), body
        assert "# HELP" not in body, body
        for args, want in ((["-X", "POST", "-d", "x"], 405), (["-X", "DELETE"], 405),
                           ([], 404), (["-H", "Host: evil.example"], 403),
                           (["-H", "Origin: http://localhost"], 403),
                           (["-H", "Authorization: Bearer x"], 401)):
            where = "http://localhost/metrics" if want != 404 else "http://localhost/mcp"
            code, body = ask(*args, where)
            assert code == want, (args, code, body)
    finally:
        s.stop()
        shutil.rmtree(sock_dir, True)
    assert not os.path.exists(path)


if __name__ == "__main__":
    main()
