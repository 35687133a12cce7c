"""test_inspector.py: the official MCP Inspector's CLI against `appliance run` over HTTP.

The Inspector 2.x (npm @modelcontextprotocol/inspector, under tests/node22 with the
Node 22 it needs) runs one request per process, as a CI job would:

    inspector --cli http://127.0.0.1:PORT/mcp --transport http \\
        --header "Authorization: Bearer TOKEN" --protocol-era legacy|modern|auto \\
        --format json --method tools/list
    ... --method tools/call --tool-name run_python --tool-arg "code=print(...)"

With each token it lists one tool, run_python, whose description names that role's tools
only; it runs cells calling toy tools in the legacy era (initialize and a session) and in
the 2026-07-28 era (server/discover, then stateless POSTs carrying Mcp-Method and
Mcp-Name), and the appliance's log shows the revision each run spoke; a cell that fails
comes back as its result with the CLI's exit status 5. Without a token, or with a wrong
one, it is told it needs authorization (exit 3) and never gets in.

Runs as root; needs build/appliance, build/toy-server, build/image and tests/node22
(scripts/install-deps). A missing Inspector or Node 22 fails the test, never skips it.
"""

import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import main, test
import gatewaykit as gk
from test_http import ALPHA, BETA, Served

NODE22_BIN = gk.NODE22_BIN
INSPECTOR = os.path.join(NODE22_BIN, "inspector")
_ENV = {}


def inspector_env():
    """PATH with Node 22 first and a private HOME (the Inspector keeps ~/.mcp-inspector)."""
    if _ENV:
        return _ENV
    for path in (INSPECTOR, os.path.join(NODE22_BIN, "node")):
        assert os.path.exists(path), (
            "missing %s: the MCP Inspector and its Node 22 come from tests/node22 "
            "(run scripts/install-deps)" % path)
    home = tempfile.mkdtemp(prefix="appliance-inspector-home.")
    atexit.register(shutil.rmtree, home, True)
    env = dict(os.environ, PATH=NODE22_BIN + os.pathsep + os.environ.get("PATH", ""),
               HOME=home, NO_COLOR="1")
    for k in ("MCP_CATALOG_PATH", "MCP_CLIENT_CONFIG_PATH", "MCP_OAUTH_CALLBACK_URL"):
        env.pop(k, None)
    r = subprocess.run(["node", "--version"], capture_output=True, env=env, timeout=30)
    version = r.stdout.decode().strip()
    assert r.returncode == 0 and version.startswith("v"), (version, r.stderr.decode())
    assert int(version[1:].split(".")[0]) >= 22, (
        "the Inspector needs Node 22, but PATH gives node %s" % version)
    r = subprocess.run([INSPECTOR, "--cli", "--version"], capture_output=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
    _ENV.update(env, _VERSION=r.stdout.decode().strip())
    return _ENV


def inspector(served, *args, token=ALPHA, era=None, want=0):
    """Run the Inspector CLI once against served; return (its JSON, its stderr)."""
    env = inspector_env()
    argv = [INSPECTOR, "--cli", "http://127.0.0.1:%d/mcp" % served.port, "--transport",
            "http", "--format", "json", "--connect-timeout", "30000"]
    if token:
        argv += ["--header", "Authorization: Bearer " + token]
    if era:
        argv += ["--protocol-era", era]
    argv += list(args)
    env = dict((k, v) for k, v in env.items() if not k.startswith("_"))
    try:
        r = subprocess.run(argv, capture_output=True, env=env, timeout=120)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("the Inspector took over 120 s: %s\nstderr: %s\nlog:\n%s" % (
            args, (e.stderr or b"").decode()[-3000:], served.log()[-4000:]))
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == want, "exit %d (wanted %d) for %s\nstdout: %s\nstderr: %s\n" \
        "log:\n%s" % (r.returncode, want, args, out[-3000:], err[-3000:], served.log()[-4000:])
    # --format json: the result as one JSON object on stdout, an error as one on stderr
    got = {}
    try:
        if out.strip():
            got.update(json.loads(out))
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if last.startswith('{"error"'):
            got.update(json.loads(last))
    except ValueError:
        raise AssertionError("not JSON from the Inspector: %r\nstderr: %s" % (out, err))
    assert got, "nothing from the Inspector\nstderr: %s" % err
    return got, err


def wait_count(served, text, n, timeout=10):
    """Wait until text is in the appliance's log at least n times."""
    deadline = time.time() + timeout
    while served.log().count(text) < n:
        assert time.time() < deadline, "%r not %d times in the log:\n%s" % (
            text, n, served.log()[-4000:])
        time.sleep(0.05)


def cell_output(got):
    result = got["result"]
    assert result.get("isError") is False, got
    sc = result["structuredContent"]
    # the text block carries the same object, for clients that read only content
    assert [c["type"] for c in result["content"]] == ["text"], got
    assert json.loads(result["content"][0]["text"]) == sc, got
    assert sc["error"] is None and sc["stopped"] is False, sc
    return sc


@test
def the_inspector_lists_run_python_naming_each_tokens_tools():
    env = inspector_env()
    assert env["_VERSION"] == "2.12.0", "Inspector %s, tests expect 2.12.0" % env["_VERSION"]
    s = Served()
    try:
        # the default era of an ad-hoc URL is legacy; modern speaks 2026-07-28
        for era in (None, "modern"):
            for token, mine, other in ((ALPHA, "toy.add(", "toy.echo("),
                                       (BETA, "toy.echo(", "toy.add(")):
                got, _ = inspector(s, "--method", "tools/list", token=token, era=era)
                tools = got["result"]["tools"]
                assert [t["name"] for t in tools] == ["run_python"], (era, tools)
                desc = tools[0]["description"]
                assert mine in desc and other not in desc, (era, token == ALPHA, desc)
                assert "toy.write_note(" not in desc, desc  # not allowed by the policy
                schema = tools[0]["inputSchema"]
                # code, and a session's arguments (code is left out with end)
                assert sorted(schema["properties"]) == ["code", "end", "session"], schema
                assert "required" not in schema and not schema["additionalProperties"], schema
                assert schema["properties"]["code"]["type"] == "string", schema
        wait_count(s, "alpha: initialize: revision 2025-11-25", 1)
        wait_count(s, "beta: initialize: revision 2025-11-25", 1)
        assert ALPHA not in s.log() and BETA not in s.log()
    finally:
        s.stop()


@test
def the_inspector_runs_cells_in_both_eras_and_the_log_names_the_revision():
    s = Served()
    code_ = "print((await toy.add(a=2, b=3))['sum'])"
    try:
        for era, revision in (("legacy", "2025-11-25"), ("modern", "2026-07-28"),
                              ("auto", "2026-07-28")):
            line = "run_python: %d bytes of code (alpha, %s)" % (len(code_), revision)
            before = s.log().count(line)
            tasks = s.log().count("alpha: task ")
            got, _ = inspector(s, "--method", "tools/call", "--tool-name", "run_python",
                               "--tool-arg", "code=" + code_, era=era)
            sc = cell_output(got)
            assert sc["stdout"] == "5\n" and sc["calls"] == 1, (era, sc)
            wait_count(s, line, before + 1)
            if revision == "2026-07-28":
                # the Inspector declares the tasks extension, which the
                # appliance offers: the call was a task (made, completed),
                # polled to its inlined result, which has no related-task
                # _meta (the taskId is beside it)
                wait_count(s, "alpha: task ", tasks + 2)
                assert "io.modelcontextprotocol/related-task" not in \
                    got["result"].get("_meta", {}), got
            else:
                assert s.log().count("alpha: task ") == tasks, s.log()[-2000:]
        # a program of several lines, verbatim as JSON, for the other token
        prog = ("r = await toy.echo(text='from the inspector')\n"
                "print(r)\n"
                "await toy.add(a=1, b=1)\n")
        for era, revision in (("legacy", "2025-11-25"), ("modern", "2026-07-28")):
            got, _ = inspector(s, "--method", "tools/call", "--tool-name", "run_python",
                               "--tool-args-json", json.dumps({"code": prog}), token=BETA,
                               era=era, want=5)
            # toy.add is not beta's: the cell fails there, after the echo was printed, and
            # the CLI says so by its exit status (5) beside the result
            assert got["error"]["code"] == "tool_is_error", (era, got)
            result = got["result"]
            assert result["isError"] is True, (era, got)
            sc = result["structuredContent"]
            assert sc["stdout"] == "from the inspector\n", (era, sc)
            # a stand-in: the bridge refuses it, naming the role's limit
            assert sc["error"].endswith("ToolError: refused: toy.add: not allowed for this "
                                        "client's role"), (era, sc)
            wait_count(s, "run_python: %d bytes of code (beta, %s)" % (len(prog), revision), 1)
        assert ALPHA not in s.log() and BETA not in s.log()
    finally:
        s.stop()


@test
def the_inspector_without_a_good_token_is_told_it_needs_authorization():
    s = Served()
    try:
        for token in (None, "appliance_not-a-token"):
            for era in ("legacy", "modern"):
                # --stored-auth-only: never start an interactive OAuth login
                got, _ = inspector(s, "--method", "tools/list", "--stored-auth-only",
                                   token=token, era=era, want=3)
                assert got["error"]["code"] == "auth_required", (token, era, got)
        wait_count(s, "http: refused 401 (token)", 4)
        assert "initialize: revision" not in s.log(), s.log()
    finally:
        s.stop()


if __name__ == "__main__":
    main(globals())
