"""test_http_upstream.py: remote upstream servers over Streamable HTTP.

Three servers nobody here wrote or that misbehave on purpose stand behind
`appliance run`:
- a v2 SDK server (@modelcontextprotocol/server 2.4, tests/integration/
  v2_http_server.mjs) in stateless, 2026-07-28-only mode;
- server-everything in its streamableHttp mode (a legacy session);
- mcphttp.py, a legacy server of ours with hostile tools, TLS and a token.
Each test drives the appliance as its MCP client does (gatewaykit.Session)
and waits on what it can observe: an answer, a log line of a server, a
notification.
"""

import json
import os
import socket
import subprocess
import tempfile
import threading
import time

import gatewaykit as gk
from cellkit import ROOT, hidden, maps_lib, system_lib
from harness import main, test
from mcphttp import McpHttp
import tlskit
from policykit import START_INPUT
from nodekit import NodeServer, free_port, v2_server


def everything_http(port):
    return NodeServer([gk.node(), gk.need(gk.EVERYTHING), "streamableHttp"],
                      "listening on port %d" % port, env=dict(os.environ, PORT=str(port)))


def http_policy(servers, tools, limits=None, **extra):
    return gk._kit.policy(dict({"deadline_s": 30}, **(limits or {})), servers=servers,
                          tools=tools, roles={"r": {"tools": ["%s.*" % n for n in servers],
                                                    "write": False}},
                          clients={"default_role": "r"}, **extra)


# ---- a 2026-07-28 server, stateless ---------------------------------------------------

V2_TOOLS = {"v2.*": {"access": "read"}, "v2.grow": {"access": "read"},
            "v2.extra": {"access": "read"}}


@test
def a_2026_server_is_spoken_to_statelessly_with_its_headers():
    port = free_port()
    srv = v2_server(port, token="v2-secret")
    try:
        sig = http_policy({"v2": {"url": "http://127.0.0.1:%d/mcp" % port,
                                  "headers": {"Authorization": "Bearer {env:V2_TOKEN}"}}},
                          V2_TOOLS)
        with gk.Session(sig, env=dict(os.environ, V2_TOKEN="v2-secret")) as s:
            assert "ready: protocol 2026-07-28, 4 tools" in s.log(), s.log()
            out = s.cell("import asyncio\n"
                               "print(await asyncio.gather(v2.add(a=2, b=3), v2.echo(text='hi'),"
                               " *[v2.add(a=i, b=0) for i in range(10)]))")
            assert out.strip() == str(["5", "hi"] + [str(i) for i in range(10)]), out
        # no initialize, and every request named itself in its headers
        assert srv.count("request initialize") == 0, srv.err
        assert srv.count("request server/discover mcp-method=server/discover") >= 1, srv.err
        assert srv.count("request tools/call mcp-method=tools/call mcp-name=add") == 11, srv.err
        assert srv.count("unauthorized") == 0, srv.err
    finally:
        srv.stop()


@test
def a_2026_list_change_reaches_the_client_and_the_next_cell():
    port = free_port()
    srv = v2_server(port)
    try:
        sig = http_policy({"v2": {"url": "http://localhost:%d/mcp" % port}}, V2_TOOLS)
        with gk.Session(sig) as s:
            srv.wait("request subscriptions/listen")
            s.cell("print(await v2.grow())")
            s.wait_note("notifications/tools/list_changed")
            out = s.cell("print(await v2.extra())")
            assert out.strip() == "extra", out
    finally:
        srv.stop()


@test
def a_call_past_its_timeout_is_cancelled_upstream_by_closing_its_stream():
    port = free_port()
    srv = v2_server(port)
    try:
        sig = http_policy({"v2": {"url": "http://127.0.0.1:%d/mcp" % port}}, V2_TOOLS,
                          limits={"call_timeout_s": 1})
        with gk.Session(sig) as s:
            out = s.cell("try:\n    await v2.sleep(ms=20000)\n"
                               "except ToolError as e:\n    print('E', e)")
            assert out.startswith("E timeout: v2.sleep did not answer"), out
            srv.wait("cancelled sleep")
    finally:
        srv.stop()


@test
def a_call_in_flight_when_its_cell_ends_is_cancelled_upstream():
    port = free_port()
    srv = v2_server(port)
    try:
        sig = http_policy({"v2": {"url": "http://127.0.0.1:%d/mcp" % port}}, V2_TOOLS,
                          limits={"deadline_s": 3, "call_timeout_s": 60})
        with gk.Session(sig) as s:
            r = s.result(s.start_cell("await v2.sleep(ms=50000)"))
            assert r["stopped"] and r["reason"] == "deadline", r
            srv.wait("cancelled sleep")
    finally:
        srv.stop()


@test
def a_2026_server_restarted_serves_again():
    port = free_port()
    srv = v2_server(port)
    try:
        sig = http_policy({"v2": {"url": "http://127.0.0.1:%d/mcp" % port}}, V2_TOOLS)
        with gk.Session(sig) as s:
            s.cell("print(await v2.add(a=1, b=1))")
            srv.stop()
            out = s.cell("try:\n    print(await v2.add(a=1, b=2))\n"
                               "except ToolError as e:\n    print('E', e)")
            assert out.startswith("E upstream_unavailable"), out
            srv.start()
            # the upstream waits out its backoff, then the next call starts it
            for _ in range(40):
                out = s.cell("try:\n    print(await v2.add(a=2, b=2))\n"
                                   "except ToolError as e:\n    print('E', e)")
                if out.strip() == "4":
                    break
                assert out.startswith("E upstream_unavailable"), out
            assert out.strip() == "4", (out, s.log())
    finally:
        srv.stop()


# ---- server-everything, a legacy session ----------------------------------------------

@test
def server_everything_over_http_through_a_session():
    port = free_port()
    srv = everything_http(port)
    try:
        sig = http_policy({"ev": {"url": "http://127.0.0.1:%d/mcp" % port}},
                          {"ev.*": {"access": "read"}})
        with gk.Session(sig) as s:
            assert "upstream ev: ready: protocol 2025-11-25" in s.log(), s.log()
            out = s.cell("import asyncio\n"
                               "print(await ev.echo(message='over http'))\n"
                               "print(len(await asyncio.gather("
                               "*[ev.get_sum(a=i, b=1) for i in range(16)])))")
            assert out.split("\n")[:2] == ["Echo: over http", "16"], out
            # the server restarted: our session is gone (404), a new one is made
            srv.stop()
            srv.start()
            out = s.cell("print(await ev.echo(message='again'))")
            assert out.strip() == "Echo: again", (out, s.log())
    finally:
        srv.stop()


# ---- our legacy server: sessions, events, cancellation ---------------------------------

LEGACY_TOOLS = {"lg.*": {"access": "read"}}


def legacy_policy(srv, limits=None, **server):
    return http_policy({"lg": dict({"url": srv.url()}, **server)}, LEGACY_TOOLS, limits=limits)


@test
def a_legacy_session_hears_list_changes_survives_a_restart_and_is_deleted_at_the_end():
    srv = McpHttp().start()
    try:
        with gk.Session(legacy_policy(srv)) as s:
            srv.wait_log("GET")
            assert s.cell("print(await lg.grow())") == "grown\n"
            s.wait_note("notifications/tools/list_changed")
            assert s.cell("print(await lg.extra())") == "extra\n"
            # the server forgot us (as after a restart): 404, a new session, the call again
            srv.forget_sessions()
            assert s.cell("print(await lg.echo(text='again'))") == "again\n"
            log = list(srv.log)
            assert log.count("POST initialize") == 2 and "404" in log, log
        srv.wait_log("DELETE *")
    finally:
        srv.stop()


@test
def a_legacy_call_past_its_timeout_is_cancelled_by_notification():
    srv = McpHttp().start()
    try:
        with gk.Session(legacy_policy(srv, limits={"call_timeout_s": 1})) as s:
            out = s.cell("try:\n    await lg.sleep(ms=30000)\n"
                         "except ToolError as e:\n    print('E', e)")
            assert out.startswith("E timeout: lg.sleep did not answer"), out
            srv.wait_log("cancelled *")
            srv.wait_log("sleep stopped")
    finally:
        srv.stop()


# ---- hostile servers ---------------------------------------------------------------------

HOSTILE = """
import asyncio, json, time
async def one(name):
    t0 = time.monotonic()
    try:
        await getattr(lg, name)()
        return name, "returned", 0
    except ToolError as e:
        return name, str(e)[:160], round(time.monotonic() - t0, 1)
rows = await asyncio.gather(*[one(n) for n in
    ["huge", "endless", "trickle", "redirect", "wrongtype", "badjson", "html404"]])
rows.append(("echo", await lg.echo(text="still here"), 0))
print(json.dumps(rows))
"""


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


@test
def hostile_answers_each_become_a_tool_error_within_the_timeout():
    srv = McpHttp().start()
    try:
        with gk.Session(legacy_policy(srv, limits={"call_timeout_s": 5})) as s:
            rows = {name: (why, secs) for name, why, secs in
                    json.loads(s.cell(HOSTILE))}
            hwm = rss_kib(s.proc.pid)
            log = s.log()
        expect = {
            "huge": "over the cap",
            "endless": "over the cap",
            "trickle": "timeout: lg.trickle did not answer",
            "redirect": "redirect",
            "wrongtype": "neither JSON nor an event stream",
            "badjson": "the server's answer was refused",
            "html404": "HTTP error status",
        }
        for name, text in expect.items():
            why, secs = rows[name]
            assert text in why, (name, why, log)
            assert secs < 15, (name, secs)
        assert rows["echo"][0] == "still here", rows
        # 20 MiB answers and an endless stream were cut at their caps, not kept
        assert hwm < 256 * 1024, hwm
        assert "upstream lg: down" not in log, log
    finally:
        srv.stop()


@test
def a_ten_megabyte_session_id_is_refused_and_the_others_serve():
    srv = McpHttp(sid="s" * (10 * 1024 * 1024)).start()
    try:
        sig = http_policy({"lg": {"url": srv.url()}, "toy": gk.toy_server()},
                          {"lg.*": {"access": "read"}, "toy.*": {"access": "read"}})
        with gk.Session(sig) as s:
            assert "upstream lg is not available" in s.log(), s.log()
            out = s.cell("try:\n    await lg.echo(text='x')\n"
                         "except ToolError as e:\n    print(e)")
            assert out.startswith("upstream_unavailable"), out
            assert s.cell("print((await toy.add(a=1, b=2))['sum'])") == "3\n"
    finally:
        srv.stop()


# ---- TLS ---------------------------------------------------------------------------------------

@test
def tls_upstreams_are_verified_against_their_ca_file():
    d = tempfile.mkdtemp(prefix="appliance-http-tls.")
    os.chmod(d, 0o755)
    authority = tlskit.ca(d)
    other_ca = tlskit.ca(d, "other-ca")
    good = tlskit.leaf(d, "good", authority)
    cases = [
        ("good", good, authority[0], None),
        ("system roots", good, None, "TLS"),
        ("another CA", good, other_ca[0], "TLS"),
        ("expired", tlskit.leaf(d, "old", authority, expired=True), authority[0], "TLS"),
        ("another name", tlskit.leaf(d, "elsewhere", authority, san="DNS:elsewhere.example"),
         authority[0], "TLS"),
    ]
    for label, pair, ca_file, refused in cases:
        srv = McpHttp(tls=pair).start()
        try:
            server = {"url": srv.url()}
            if ca_file:
                server["ca_file"] = ca_file
            with gk.Session(http_policy({"lg": server}, LEGACY_TOOLS)) as s:
                if refused is None:
                    assert s.cell("print(await lg.echo(text='tls'))") == "tls\n", label
                    assert srv.url().startswith("https://")
                else:
                    log = s.log()
                    assert "upstream lg is not available" in log, (label, log)
                    assert "certificate" in log or "TLS" in log, (label, log)
                    assert "POST initialize" not in srv.log, (label, srv.log)
        finally:
            srv.stop()


@test
def a_policy_proxy_is_where_requests_go_and_the_environments_is_not():
    """The policy's proxy gets the request (in absolute form, for an http://
    server); http_proxy in the appliance's environment is ignored."""
    srv = McpHttp().start()
    got, seen = [], threading.Event()
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)

    def accept():
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            with c:
                got.append(c.recv(4096).split(b"\r\n", 1)[0])
                seen.set()

    threading.Thread(target=accept, daemon=True).start()
    proxy = "http://127.0.0.1:%d" % lsock.getsockname()[1]
    try:
        # named by the environment only: not used, the server is reached
        env = dict(os.environ, http_proxy=proxy, HTTP_PROXY=proxy, all_proxy=proxy)
        with gk.Session(legacy_policy(srv), env=env) as s:
            assert s.cell("print(await lg.echo(text='direct'))") == "direct\n"
        assert not got, got
        # named by the policy: the request goes to the proxy
        with gk.Session(legacy_policy(srv, proxy=proxy)) as s:
            assert seen.wait(20), s.log()
            assert "upstream lg is not available" in s.log(), s.log()
        assert got[0].startswith(b"POST " + srv.url().encode() + b" HTTP/1.1"), got
    finally:
        lsock.close()
        srv.stop()


# ---- the credential in a header ------------------------------------------------------

@test
def a_header_token_from_the_environment_reaches_only_the_server():
    port = free_port()
    token = "tok-" + os.urandom(12).hex()
    srv = v2_server(port, token=token)
    audit = os.path.join(tempfile.mkdtemp(prefix="appliance-http-audit."), "audit.log")
    try:
        sig = http_policy({"v2": {"url": "http://127.0.0.1:%d/mcp" % port,
                                  "headers": {"Authorization": "Bearer {env:V2_TOKEN}"}}},
                          V2_TOOLS, audit={"path": audit})
        env = dict(os.environ, V2_TOKEN=token)
        with gk.Session(sig, env=env) as s:
            out = s.cell("import os, sys\n"
                         "print(sorted(os.environ))\n"
                         "print(await v2.echo(text='x'))\n"
                         "try:\n    await v2.add(a='not a number', b=1)\n"
                         "except ToolError as e:\n    print(e)")
            assert "x" in out and token not in out, out
            # gone from the appliance's environment block
            with open("/proc/%d/environ" % s.proc.pid, "rb") as f:
                assert token.encode() not in f.read()
            assert srv.count("unauthorized") == 0, srv.err
            log = b"".join(s.stderr).decode("utf-8", "replace")
        assert token not in log, log
        with open(audit, "rb") as f:
            assert token.encode() not in f.read()
        stubs = subprocess.run(gk._kit.argv(sig, "stubs"), env=env, capture_output=True)
        assert stubs.returncode == 0, stubs.stderr
        assert b"v2.echo" in stubs.stdout and token.encode() not in stubs.stdout + stubs.stderr
        # a wrong token: the server says 401, and nobody hears either value
        env["V2_TOKEN"] = "wrong-" + token
        with gk.Session(sig, env=env) as s:
            log = b"".join(s.stderr).decode("utf-8", "replace")
            assert "refused our credentials" in log, log
            out = s.cell("try:\n    await v2.echo(text='x')\n"
                         "except ToolError as e:\n    print(e)")
            assert out.startswith("upstream_unavailable"), out
            log = b"".join(s.stderr).decode("utf-8", "replace")
        assert token not in log and token not in out, log
    finally:
        srv.stop()


@test
def a_header_naming_an_unset_variable_refuses_the_start_by_name():
    sig = http_policy({"web": {"url": "https://mcp.example.invalid/mcp",
                               "headers": {"Authorization": "Bearer {env:NO_SUCH_TOKEN_VAR}"}}},
                      {"web.*": {"access": "read"}})
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_TOKEN_VAR"}
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, env=env)
    assert r.returncode == 1, r
    assert r.stderr.decode().endswith(
        "servers.web.headers.Authorization: the environment has no NO_SUCH_TOKEN_VAR; set it "
        "where the appliance starts (for the systemd unit, in an EnvironmentFile)\n"), r.stderr


@test
def a_ca_file_or_a_filled_header_that_cannot_be_used_refuses_the_start():
    sig = http_policy({"web": {"url": "https://mcp.example.invalid/mcp",
                               "ca_file": "/nonexistent/ca.pem"}}, {"web.*": {"access": "read"}})
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True)
    assert r.returncode == 1 and b"servers.web.ca_file /nonexistent/ca.pem" in r.stderr, r.stderr
    # a value that would end the header line, or add another, is not sent
    sig = http_policy({"web": {"url": "https://mcp.example.invalid/mcp",
                               "headers": {"Authorization": "Bearer {env:WEB_TOKEN}"}}},
                      {"web.*": {"access": "read"}})
    env = dict(os.environ, WEB_TOKEN="abc\r\nX-Injected: 1")
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, env=env)
    assert r.returncode == 1, r
    assert b"servers.web.headers.Authorization: the filled value is too long or holds a " \
        b"line break" in r.stderr, r.stderr
    assert b"X-Injected" not in r.stderr, r.stderr


@test
def libcurl_is_loaded_only_for_an_http_server():
    """libcurl is not linked: the first HTTP server loads it at start. An
    appliance with only a stdio server never maps it (nor libmicrohttpd,
    which only the HTTP front loads: test_http); one with an HTTP
    server maps it and serves through it; with libcurl unloadable (an empty
    file bound over it in a mount namespace of the test's own) the start is
    refused, naming the server and the library."""
    sig = http_policy({"toy": gk.toy_server()}, {"toy.*": {"access": "read"}})
    with gk.Session(sig) as s:
        assert s.cell("print(await toy.echo(text='stdio'))") == "stdio\n"
        assert not maps_lib(s.proc.pid, "libcurl"), "libcurl mapped with no HTTP server"
        assert not maps_lib(s.proc.pid, "libmicrohttpd"), "libmicrohttpd mapped over stdio"
    srv = McpHttp().start()
    blank = tempfile.NamedTemporaryFile(prefix="appliance-blank.")
    try:
        with gk.Session(legacy_policy(srv)) as s:
            assert s.cell("print(await lg.echo(text='http'))") == "http\n"
            assert maps_lib(s.proc.pid, "libcurl")
        argv = hidden(system_lib("libcurl.so.4"), blank.name, gk.run_argv(legacy_policy(srv)))
        r = subprocess.run(argv, input=START_INPUT, capture_output=True, timeout=60)
        assert r.returncode == 1, r
        assert b"servers.lg: libcurl.so.4 could not be loaded" in r.stderr, r.stderr
        assert b"; install the Debian package libcurl4\n" in r.stderr, r.stderr
    finally:
        blank.close()
        srv.stop()


@test
def a_stdio_server_may_not_take_an_http_servers_variable():
    sig_err = None
    try:
        http_policy({"web": {"url": "https://mcp.example.invalid/mcp",
                             "headers": {"Authorization": "Bearer {env:WEB_TOKEN}"}},
                     "toy": gk.toy_server(env=["WEB_TOKEN"])},
                    {"web.*": {"access": "read"}, "toy.*": {"access": "read"}})
    except subprocess.CalledProcessError as e:  # sign checks the policy as run does
        sig_err = e.stderr.decode()
    assert sig_err and "servers.toy.env: WEB_TOKEN is taken by servers.web.headers." \
        "Authorization" in sig_err, sig_err


# ---- a server that is not there -------------------------------------------------------

@test
def an_unreachable_server_at_start_leaves_the_others_serving():
    dead = free_port()  # nothing listens there
    sig = http_policy({"dead": {"url": "http://127.0.0.1:%d/mcp" % dead},
                       "toy": gk.toy_server()},
                      {"dead.*": {"access": "read"}, "toy.*": {"access": "read"}})
    with gk.Session(sig) as s:
        assert "upstream dead is not available" in s.log(), s.log()
        assert s.cell("print((await toy.add(a=1, b=2))['sum'])") == "3\n"
        # no tool of it, only its name among those not available now
        desc = s.description()
        assert not [ln for ln in desc.splitlines() if ln.startswith("dead.")], desc
        assert "Servers not available now (" in desc and "): dead.\n" in desc, desc
        # its namespace is there all the same: any name is a call, and a ToolError
        out = s.cell("import time\nt0 = time.monotonic()\n"
                     "try:\n    await dead.never_listed(x=1)\n"
                     "except ToolError as e:\n    print(e)\n"
                     "print(time.monotonic() - t0 < 5)")
        assert out == ("upstream_unavailable: the server of dead.never_listed is not "
                       "available\nTrue\n"), out


if __name__ == "__main__":
    try:
        main()
    finally:
        gk._kit.cleanup()
