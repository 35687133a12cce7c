"""test_traces.py: the spans of what the appliance does, sent to an
OpenTelemetry collector over OTLP/HTTP (JSON), as the policy's `telemetry`
says (docs/operating.md, Traces).

A receiver on loopback stands in for the collector and keeps every request
to /v1/traces. One cell with two tool calls, under a client's traceparent,
must come out as one trace with the client's trace id: the request's span
below the client's, the run's below it, the wait for a sandbox, the cell
and each call below the run; the call's traceparent reaches an HTTP
upstream as its header and in _meta. No span carries the code, an
argument, a result, what the code printed or a token. With the collector
down, cells run all the same and the log says spans were lost.

Runs as root; needs build/appliance, build/image, build/toy-server and the
npm packages.
"""

import json
import os
import re
import socket

from harness import main, test
import gatewaykit as gk
from nodekit import free_port, v2_server
from otlpkit import Collector

CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = "00-%s-%s-01" % (CLIENT_TRACE, CLIENT_SPAN)
SECRET = "s3cr3t-value-7d1f"


def attrs(span):
    return {a["key"]: list(a["value"].values())[0] for a in span.get("attributes", [])}


def toy_policy(endpoint, servers=None, tools=None):
    servers = servers or {"toy": gk.toy_server()}
    return gk._kit.policy({"deadline_s": 60, "pool": 1}, servers=servers,
                          tools=tools or {"toy.*": {"access": "read"}},
                          roles={"r": {"tools": ["%s.*" % name for name in servers]}},
                          clients={"default_role": "r"},
                          telemetry={"otlp_endpoint": endpoint, "service_name": "appliance-test"})


CELL = ("r = await toy.add(a=40, b=2)\n"
        "e = await toy.echo(text=%r)\n"
        "print('printed-%s', r, e)\n" % (SECRET, SECRET))


@test
def one_cell_with_two_calls_is_one_trace_under_the_clients_span():
    col = Collector()
    try:
        sig = toy_policy("http://127.0.0.1:%d" % col.port)
        with gk.Session(sig) as s:
            r = s.request("tools/call", {"name": "run_python", "arguments": {"code": CELL},
                                         "_meta": {"traceparent": TRACEPARENT}})
            out = r["result"]["structuredContent"]["stdout"]
            assert "42" in out and SECRET in out, r
        # a clean exit sends what is held
        assert col.paths and all(p == ("/v1/traces", "application/json") for p in col.paths)
        spans = col.spans()
        by_name = {}
        for sp in spans:
            by_name.setdefault(sp["name"], []).append(sp)
        req = by_name["tools/call run_python"][0]
        run = by_name["run run_python"][0]
        calls = [sp for sp in spans if sp["name"].startswith("tools/call toy.")]
        assert req["traceId"] == CLIENT_TRACE and req["parentSpanId"] == CLIENT_SPAN, req
        assert req["kind"] == 2, req
        assert run["traceId"] == CLIENT_TRACE and run["parentSpanId"] == req["spanId"], run
        for name in ("sandbox", "cell"):
            (child,) = [sp for sp in by_name[name] if sp["traceId"] == CLIENT_TRACE]
            assert child["parentSpanId"] == run["spanId"], child
        assert len(calls) == 2, [sp["name"] for sp in spans]
        for c in calls:
            assert c["traceId"] == CLIENT_TRACE and c["parentSpanId"] == run["spanId"], c
            assert c["kind"] == 3, c
            a = attrs(c)
            assert a["appliance.server"] == "toy" and a["mcp.method.name"] == "tools/call", a
            assert a["appliance.call.outcome"] == "ok" and int(a["appliance.call.result_bytes"]) > 0
        ra = attrs(run)
        assert ra["appliance.run.outcome"] == "ok" and ra["appliance.run.calls"] == "2", ra
        assert ra["appliance.client"] == "stdio" and ra["appliance.role"] == "r", ra
        ma = attrs(req)
        assert ma["mcp.method.name"] == "tools/call" and ma["mcp.protocol.version"] == "2025-11-25"
        # the other requests (initialize, tools/list) are spans of their own
        assert "initialize" in by_name and "tools/list" in by_name, sorted(by_name)
        # the resource names the service
        res = json.loads(col.bodies[0])["resourceSpans"][0]["resource"]
        assert attrs(res)["service.name"] == "appliance-test", res
        # nothing the code wrote, sent or printed is in any span
        every = "".join(col.bodies)
        for forbidden in (SECRET, "printed-", "await toy", "toy.add(a=40"):
            assert forbidden not in every, forbidden
    finally:
        col.close()


@test
def an_approval_wait_is_a_span_below_its_call():
    col = Collector()
    d = gk.work()
    approver = os.path.join(d, "approver-yes")
    with open(approver, "w") as f:
        f.write("#!/bin/sh\ncat > /dev/null\necho approve\n")
    os.chmod(approver, 0o755)
    try:
        sig = gk._kit.policy({"deadline_s": 60, "pool": 1}, servers={"toy": gk.toy_server()},
                             tools={"toy.*": {"access": "read"},
                                    "toy.write_note": {"access": "write", "approval": True}},
                             roles={"w": {"tools": ["toy.*"], "write": True}},
                             clients={"default_role": "w"}, approvals={"command": approver},
                             telemetry={"otlp_endpoint": "http://localhost:%d" % col.port})
        with gk.Session(sig) as s:
            assert "kept" in s.cell("await toy.write_note(text=%r)\nprint('kept')" % SECRET)
        spans = col.spans()
        (call,) = [sp for sp in spans if sp["name"] == "tools/call toy.write_note"]
        (ap,) = [sp for sp in spans if sp["name"] == "approval"]
        assert ap["parentSpanId"] == call["spanId"] and ap["traceId"] == call["traceId"], ap
        assert attrs(ap) == {"appliance.approval.by": "program",
                             "appliance.approval.outcome": "approved"}, ap
        assert attrs(call)["appliance.call.outcome"] == "ok", call
        assert SECRET not in "".join(col.bodies)
    finally:
        col.close()


@test
def a_resource_read_is_a_span_that_names_the_server_not_the_uri():
    col = Collector()
    try:
        sig = toy_policy("http://127.0.0.1:%d" % col.port,
                         servers={"toy": dict(gk.toy_server(), resources=True)})
        with gk.Session(sig) as s:
            out = s.cell("try:\n    await toy.read_resource('toy://%s')\n"
                         "except ToolError as e:\n    print('refused', e.kind)\n" % SECRET)
            assert out.startswith("refused"), out
        (read,) = [sp for sp in col.spans() if sp["name"].startswith("resources/read")]
        assert read["name"] == "resources/read toy", read
        a = attrs(read)
        assert a["mcp.method.name"] == "resources/read" and "gen_ai.tool.name" not in a, a
        assert a["appliance.call.outcome"] != "ok" and read["status"]["code"] == 2, read
        assert SECRET not in "".join(col.bodies)
    finally:
        col.close()


@test
def an_http_upstream_gets_the_calls_trace_context():
    col = Collector()
    port = free_port()
    srv = v2_server(port)
    try:
        sig = toy_policy("http://127.0.0.1:%d" % col.port,
                         servers={"v2": {"url": "http://127.0.0.1:%d/mcp" % port}},
                         tools={"v2.*": {"access": "read"}})
        with gk.Session(sig) as s:
            r = s.request("tools/call", {"name": "run_python",
                                         "arguments": {"code": "print(await v2.add(a=1, b=2))"},
                                         "_meta": {"traceparent": TRACEPARENT}})
            assert r["result"]["structuredContent"]["stdout"].strip() == "3", r
        (call,) = [sp for sp in col.spans() if sp["name"].startswith("tools/call v2.")]
        want = "00-%s-%s-01" % (CLIENT_TRACE, call["spanId"])
        lines = [l for l in srv.err if "mcp-name=add" in l]
        assert len(lines) == 1, srv.err
        assert ("traceparent=" + want) in lines[0], lines
        assert ("meta-traceparent=" + want) in lines[0], lines
    finally:
        srv.stop()
        col.close()


@test
def with_the_collector_down_cells_run_and_the_loss_is_logged():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed once out of the with: nobody listens
    sig = toy_policy("http://127.0.0.1:%d" % dead)
    with gk.Session(sig) as s:
        for _ in range(3):
            assert "42" in s.cell("print(await toy.add(a=40, b=2))")
    log = "".join(x.decode("utf-8", "replace") for x in s.stderr if x is not None)
    assert re.search(r"traces: \d+ spans lost: the collector at http://127\.0\.0\.1:%d/v1/traces "
                     r"could not be reached" % dead, log), log
    assert re.search(r"traces: 0 spans sent, \d+ lost", log), log


@test
def a_policy_with_a_plain_http_collector_off_the_host_is_refused():
    doc_dir = gk.work()
    path = os.path.join(doc_dir, "telemetry-remote.json")
    with open(path, "w") as f:
        json.dump({"policy_version": 1, "serial": 1, "expires": "2099-01-01T00:00:00Z",
                   "image": {"layout": "/x", "digest": "sha256:" + "0" * 64},
                   "telemetry": {"otlp_endpoint": "http://collector.example.com:4318"}}, f)
    import subprocess
    from cellkit import APPLIANCE
    r = subprocess.run([APPLIANCE, "sign", "--secret", os.path.join(doc_dir, "k.key"), path],
                       capture_output=True)
    assert r.returncode == 1, r
    assert "telemetry.otlp_endpoint: http:// only to a loopback address" in r.stderr.decode(), r


if __name__ == "__main__":
    main()
