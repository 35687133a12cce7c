"""test_gateway.py: `appliance run` with upstream MCP servers, end to end.

Cells call the tools of real upstream servers through the host-side bridge:
the reference servers from npm (server-everything, server-filesystem) and
build/toy-server (tests/toy/README.md). The client is either the official
TypeScript SDK (tests/mcp-client.mjs) or raw JSON-RPC lines (Session below),
which can send requests concurrently and sees every notification. Each check
asserts the values the code printed; a refusal must reach the code as
ToolError and leave the session (and the cell) usable.

Runs as root with runsc in root mode (the policy's default runtime); needs
build/appliance, build/image, build/toy-server and tests/node_modules.
"""

import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time

from harness import main, test
from policykit import Signer
from cellkit import ROOT

from gatewaykit import (EVERYTHING, FILESYSTEM, TOY, Session, _kit, code, everything_server,  # noqa: F401
                        need, node, policy, run_argv, sdk, server_dir, toy_policy, toy_server,
                        work)

# What a cell uses to report each attempt: the value, or the ToolError's text.
ATTEMPT = """
import json, time
out = {}
async def attempt(label, coro):
    try:
        out[label] = {"ok": await coro}
    except ToolError as e:
        out[label] = {"err": str(e), "type": type(e).__name__, "kind": e.kind}
"""

# The runner's protocol channel, taken from a tool function's closure: its
# call() sends any tool name, as hostile code would.
CHANNEL = """
def channel(fn):
    for c in fn.__closure__:
        if hasattr(c.cell_contents, "call"):
            return c.cell_contents
    raise RuntimeError("no channel in the closure")
"""


def refused(entry, *parts, prefix="refused: "):
    assert "err" in entry, entry
    msg = entry["err"]
    assert msg.startswith(prefix), msg
    for p in parts:
        assert p in msg, (p, msg)
    return msg


# ---- server-everything through the official SDK client ---------------------------

_everything = {}


def everything_session():
    """One SDK session with server-everything, shared by the tests that
    check its parts: echo, get-sum, get-structured-content, a gather, the
    tools helper, and the server's environment."""
    if not _everything:
        env = {"SECRET_TOKEN": "xyz-secret-%s" % secrets.token_hex(4),
               "LISTED_VAR": "listed-%s" % secrets.token_hex(4)}
        sig = policy({"everything": everything_server(env=["LISTED_VAR"])},
                     {"everything.*": {"access": "read"}},
                     {"r": {"tools": ["everything.*"], "write": False}}, "r")
        calls = [
            code('print(await everything.echo(message="hi"))'),
            code("r = await everything.get_sum(a=2, b=3)\n"
                 "print(type(r).__name__)\nprint(r)\n"
                 "s = await everything.get_structured_content(location=\"Chicago\")\n"
                 "print(type(s).__name__, s['conditions'], s['temperature'])\n"
                 "img = await everything.get_tiny_image()\n"
                 "print(type(img).__name__, [b['type'] for b in img], img[1]['mimeType'])"),
            code("import json\n"
                 "r = await asyncio.gather(*(everything.echo(message='m%d' % i)"
                 " for i in range(8)))\n"
                 "print(json.dumps(r))"),
            code("import json\n"
                 "found = tools.search('sum')\n"
                 "print(json.dumps({'search': list(found), 'printed': str(found),\n"
                 "  'describe': tools.describe('everything.get-sum'),\n"
                 "  'by_python_name': tools.describe('everything.get_sum'),\n"
                 "  'by_function': tools.describe(everything.get_sum),\n"
                 "  'none': str(tools.search('no-such-tool-anywhere'))}))"),
            code("import json\n"
                 "env = json.loads(await everything.get_env())\n"
                 "print(json.dumps(env))"),
            code(ATTEMPT + "await attempt('extra', everything.echo(message='x', extra=1))\n"
                 "await attempt('no_params', everything.get_env(x=1))\n"
                 "await attempt('bad_type', everything.get_sum(a='2', b=3))\n"
                 "await attempt('missing', everything.echo())\n"
                 "await attempt('after', everything.echo(message='still'))\n"
                 "print(json.dumps(out))"),
        ]
        out = sdk(sig, calls, env=env)
        _everything.update(out=out, env=env)
    return _everything


def sdk_stdout(call):
    assert "result" in call, call
    res = call["result"]
    assert res["isError"] is False, res
    sc = res["structuredContent"]
    assert sc["error"] is None and not sc["stopped"] and not sc["truncated"], sc
    return sc["stdout"]


@test
def the_sdk_client_calls_server_everything_tools():
    out = everything_session()["out"]
    assert out["server"]["name"] == "appliance", out["server"]
    assert [t["name"] for t in out["tools"]] == ["run_python"], out["tools"]
    desc = out["tools"][0]["description"]
    for name in ("everything.echo(", "everything.get_sum(", "everything.get_structured_content("):
        assert name in desc, (name, desc)
    # write tools are not offered to a read-only role (only named, with the
    # reason), and names are mangled
    assert "toggle_simulated_logging(" not in desc and "get-sum" not in desc, desc
    assert ("everything.toggle_simulated_logging  # not offered: not allowed by the "
            "policy\n") in desc, desc
    echo, structured, gathered = out["calls"][:3]
    assert sdk_stdout(echo) == "Echo: hi\n", echo
    kind, total, weather, image = sdk_stdout(structured).splitlines()
    assert kind == "str" and total == "The sum of 2 and 3 is 5.", (kind, total)
    assert weather == "dict Light rain / drizzle 36", weather
    # not all text: the content blocks themselves
    assert image == "list ['text', 'image', 'text'] image/png", image
    assert json.loads(sdk_stdout(gathered)) == ["Echo: m%d" % i for i in range(8)], gathered
    assert all(c["result"]["structuredContent"]["calls"] == n
               for c, n in zip(out["calls"][:3], (1, 3, 8))), out["calls"][:3]


@test
def undeclared_argument_names_are_refused():
    # server-everything's schemas declare properties and say nothing else
    # about names (no additionalProperties): the bridge refuses other names
    got = json.loads(sdk_stdout(everything_session()["out"]["calls"][5]))
    assert got["extra"]["err"] == \
        "refused: everything.echo: 'extra' is not a parameter of this tool", got
    assert got["no_params"]["err"] == \
        "refused: everything.get_env: 'x' is not a parameter of this tool", got
    refused(got["bad_type"], "everything.get_sum:", "/a", "number")
    refused(got["missing"], "everything.echo:", "message")
    assert got["after"] == {"ok": "Echo: still"}, got


# ---- server-filesystem, read tools only --------------------------------------------

@test
def a_read_only_role_reads_files_and_cannot_write():
    root = server_dir("appliance-fs.")
    with open(os.path.join(root, "hello.txt"), "w") as f:
        f.write("hello from the gateway test\n")
    sig = policy({"fs": {"command": [node(), need(FILESYSTEM), root]}},
                 {"fs.*": {"access": "read"}}, {"r": {"tools": ["fs.*"], "write": False}}, "r")
    target = os.path.join(root, "new.txt")
    with Session(sig) as s:
        desc = s.description()
        assert "fs.read_text_file(" in desc and "fs.list_directory(" in desc, desc
        for w in ("write_file", "edit_file", "move_file", "create_directory"):
            # named only as not offered, with the reason: no signature
            assert "fs.%s(" % w not in desc, (w, desc)
            assert "fs.%s  # not offered: not allowed by the policy\n" % w in desc, (w, desc)
        got = s.cell_json(ATTEMPT + CHANNEL + """
await attempt("list", fs.list_directory(path=%r))
await attempt("read", fs.read_text_file(path=%r))
await attempt("stand_in", fs.write_file(path=%r, content="pwned"))
await attempt("write", channel(fs.read_text_file).call("fs.write_file", "fs.write_file",
                                                       {"path": %r, "content": "pwned"}))
await attempt("after", fs.read_text_file(path=%r))
print(json.dumps(out))
""" % (root, os.path.join(root, "hello.txt"), target, target, os.path.join(root, "hello.txt")))
        # server-filesystem answers with structuredContent {"content": text}
        assert got["list"]["ok"] == {"content": "[FILE] hello.txt"}, got
        assert got["read"]["ok"] == {"content": "hello from the gateway test\n"}, got
        # the stand-in and a forged call are refused alike, by the bridge
        refused(got["stand_in"], "fs.write_file", "not allowed")
        refused(got["write"], "fs.write_file", "not allowed")
        assert got["after"]["ok"] == {"content": "hello from the gateway test\n"}, got
        assert not os.path.exists(target), "write_file reached the server"
        assert os.listdir(root) == ["hello.txt"], os.listdir(root)
        # the session goes on
        assert s.cell("print(len(await fs.list_allowed_directories()) > 0)") == "True\n"


# ---- refusals ------------------------------------------------------------------------

@test
def a_tool_outside_the_role_is_neither_offered_nor_callable():
    with Session(toy_policy(role_tools=["toy.add"])) as s:
        desc = s.description()
        assert "toy.add(" in desc and "toy.echo(" not in desc and "toy.sleep(" not in desc, desc
        assert ("toy.echo  # not offered: not allowed for this client's role\n" in desc), desc
        got = s.cell_json(ATTEMPT + CHANNEL + """
out["names"] = sorted(k for k in vars(toy) if not k.startswith("_"))
out["has_echo"] = hasattr(toy, "echo")
chan = channel(toy.add)
await attempt("stand_in", toy.echo(text="a"))
await attempt("forged", chan.call("toy.echo", "x", {"text": "a"}))
await attempt("after_forged", toy.add(a=1, b=2))
await attempt("nonexistent", chan.call("toy.no_such_tool", "x", {}))
await attempt("other_server", chan.call("fs.read_text_file", "x", {"path": "/etc/passwd"}))
await attempt("no_dot", chan.call("add", "x", {"a": 1, "b": 2}))
await attempt("unsupported", chan.call("toy.unsupported", "x", {}))
await attempt("after", toy.add(a=2, b=2))
print(json.dumps(out))
""")
        # the others are stand-ins: names whose calls the bridge refuses
        assert "add" in got["names"] and "echo" in got["names"], got
        msg = refused(got["stand_in"], "toy.echo: not allowed for this client's role")
        assert got["stand_in"]["kind"] == "refused", got
        msg = refused(got["forged"], "toy.echo")
        assert "no such tool" in msg or "not allowed" in msg, msg
        assert got["after_forged"] == {"ok": {"sum": 3}}, got
        for k, tool in (("nonexistent", "toy.no_such_tool"), ("other_server", "fs.read_text_file"),
                        ("no_dot", "add"), ("unsupported", "toy.unsupported")):
            msg = refused(got[k], tool + ":")
            assert "no such tool" in msg or "not allowed" in msg, (k, msg)
        assert got["after"] == {"ok": {"sum": 4}}, got
        # a later cell in the same session
        assert s.cell("print(await toy.add(a=20, b=22))") == "{'sum': 42}\n"


@test
def refusals_reach_the_code_as_tool_errors_and_the_session_goes_on():
    limits = {"call_timeout_s": 1, "max_result_bytes": 1000}
    with Session(toy_policy(write=False, limits=limits)) as s:
        desc = s.description()
        assert "toy.echo(" in desc and "toy.write_note(" not in desc, desc
        assert "toy.write_note  # not offered: " in desc, desc
        got = s.cell_json(ATTEMPT + CHANNEL + """
n = [0]
async def then_add():
    n[0] += 1
    return (await toy.add(a=n[0], b=100))["sum"]
checks = [
    ("bad_type", lambda: toy.add(a="x", b=1)),
    ("extra", lambda: toy.add(a=1, b=2, c=3)),
    ("missing", lambda: toy.add(a=1)),
    ("oversized_args", lambda: toy.echo(text="x" * 20000)),
    ("args_at_cap", lambda: toy.echo(text="y" * (16384 - len('{"text":""}')))),
    ("args_over_cap", lambda: toy.echo(text="y" * (16385 - len('{"text":""}')))),
    ("write", lambda: channel(toy.add).call("toy.write_note", "x", {"text": "n"})),
    ("slow", lambda: toy.sleep(ms=3000)),
    ("oversized_result", lambda: toy.bytes(n=5000)),
    ("result_under_cap", lambda: toy.bytes(n=500)),
    ("tool_error", lambda: toy.fail()),
    ("too_deep", lambda: toy.deep(depth=40)),
    ("deep_33", lambda: toy.deep(depth=33)),
    ("deep_32", lambda: toy.deep(depth=32)),
    ("deep_ok", lambda: toy.deep(depth=3)),
]
for label, make in checks:
    t = time.monotonic()
    await attempt(label, make())
    out[label]["s"] = round(time.monotonic() - t, 2)
    out[label]["next"] = await then_add()
out["has_write_note"] = hasattr(toy, "write_note")
print(json.dumps(out))
""")
        labels = ("bad_type", "extra", "missing", "oversized_args", "args_at_cap",
                  "args_over_cap", "write", "slow", "oversized_result", "result_under_cap",
                  "tool_error", "too_deep", "deep_33", "deep_32", "deep_ok")
        nexts = [got[k]["next"] for k in labels]
        assert nexts == list(range(101, 101 + len(labels))), got  # each next call worked
        refused(got["bad_type"], "refused: toy.add: ", "/a", "integer", prefix="")
        msg = refused(got["extra"], "toy.add:")
        assert '"c"' in msg or "'c'" in msg, msg
        refused(got["missing"], "toy.add:", "b")
        refused(got["oversized_args"], "toy.echo:", "16384")
        # arguments of exactly the cap pass (the echo's result is then over
        # max_result_bytes: refused, not cut); one byte more is refused
        msg = refused(got["args_at_cap"], "over the cap of 1000")
        assert "16384" not in msg and "argument" not in msg, msg
        refused(got["args_over_cap"], "toy.echo:", "16385 bytes", "16384")
        assert got["has_write_note"] is True, got  # a stand-in, refused by the bridge
        refused(got["write"], "toy.write_note:", "write")
        refused(got["slow"], "toy.sleep", prefix="timeout: ")
        assert 0.8 <= got["slow"]["s"] < 2.5, got["slow"]
        refused(got["oversized_result"], "1000")
        assert got["result_under_cap"]["ok"] == ("abcdefghijklmnopqrstuvwxyz0123456789" * 14)[:500]
        assert got["tool_error"]["err"] == "fail: this tool always fails", got["tool_error"]
        refused(got["too_deep"], "32")
        refused(got["deep_33"], "32")
        assert json.dumps(got["deep_32"]["ok"]) == '{"d": ' * 31 + '{"v": 0' + "}" * 32
        assert got["deep_ok"]["ok"] == {"d": {"d": {"v": 0}}}, got["deep_ok"]
        for k in ("bad_type", "slow", "tool_error", "too_deep"):
            assert got[k]["type"] == "ToolError", got[k]
        kinds = {k: got[k]["kind"] for k in ("bad_type", "write", "slow", "tool_error",
                                              "oversized_result", "too_deep")}
        assert kinds == {"bad_type": "refused", "write": "refused", "slow": "timeout",
                         "tool_error": "error", "oversized_result": "refused",
                         "too_deep": "refused"}, kinds
        # the upstream kept working after the timed-out call, in a later cell too
        got = s.cell_json("import json\n"
                          "print(json.dumps([await toy.add(a=1, b=1),"
                          " await toy.echo(text='z \u00e9 \u2713 \U0001f600'),"
                          " await toy.sleep(ms=10)]))")
        assert got == [{"sum": 2}, "z \u00e9 \u2713 \U0001f600", {"slept_ms": 10}], got


@test
def result_refusals_name_the_tool_like_every_other_refusal():
    # docs/bridge.md: every refusal starts with "refused: server.tool: ",
    # the result cap and the depth cap included.
    with Session(toy_policy(limits={"max_result_bytes": 1000})) as s:
        got = s.cell_json(ATTEMPT + """
await attempt("big", toy.bytes(n=5000))
await attempt("deep", toy.deep(depth=40))
print(json.dumps(out))
""")
        refused(got["big"], "over the cap of 1000", prefix="refused: toy.bytes: ")
        refused(got["deep"], "32", prefix="refused: toy.deep: ")


@test
def the_call_budget_counts_every_call_and_each_cell_gets_its_own():
    with Session(toy_policy(limits={"max_calls": 3})) as s:
        src = ATTEMPT + """
await attempt("one", toy.add(a=1, b=1))
await attempt("refused", toy.add(a="x", b=1))
await attempt("three", toy.add(a=3, b=3))
await attempt("four", toy.add(a=4, b=4))
await attempt("five", toy.echo(text="e"))
print(json.dumps(out))
"""
        for _ in range(2):  # the second cell has a budget of its own
            got = s.cell_json(src)
            assert got["one"] == {"ok": {"sum": 2}}, got
            refused(got["refused"], "toy.add:", "integer")
            assert got["three"] == {"ok": {"sum": 6}}, got
            refused(got["four"], "toy.add:", "budget")
            refused(got["five"], "toy.echo:", "budget")
        assert s.cell("print(await toy.echo(text='fresh'))") == "fresh\n"


# ---- concurrency -----------------------------------------------------------------------

PEAK = """
import json
await toy.peak()
r = await asyncio.gather(*(toy.sleep(ms=50) for _ in range(100)))
print(json.dumps({"n": len(r), "all": all(x == {"slept_ms": 50} for x in r),
                  "peak": await toy.peak()}))
"""


@test
def at_most_concurrency_calls_are_in_flight():
    for limits, peak in (({}, 16), ({"concurrency": 4}, 4)):
        with Session(toy_policy(limits=limits)) as s:
            got = s.cell_json(PEAK)
            held = got["peak"].pop("held")
            assert got == {"n": 100, "all": True, "peak": {"peak": peak}}, (limits, got)
            assert 1 <= held <= peak + 1, (limits, held)  # the sleeps, and the peak call


@test
def two_cells_at_once_see_only_their_own_output_and_results():
    src = """
import json
tok = %r
got = []
for rnd in range(3):
    sleeps = [toy.sleep(ms=1200) for _ in range(8)] if rnd == 0 else []
    r = await asyncio.gather(*sleeps,
                             *(toy.echo(text="%%s-%%d-%%d" %% (tok, rnd, i)) for i in range(20)))
    got += [x for x in r if isinstance(x, str)]
print(tok)
print(json.dumps(got))
"""
    with Session(toy_policy(limits={"cells": 2})) as s:
        toks = ["A" + secrets.token_hex(8), "B" + secrets.token_hex(8)]
        ids = [s.start_cell(src % t) for t in toks]
        results = [s.result(i) for i in ids]
        for tok, r in zip(toks, results):
            assert r["error"] is None and not r["stopped"], r
            first, rest = r["stdout"].split("\n", 1)
            assert first == tok, r["stdout"]
            expect = ["%s-%d-%d" % (tok, rnd, i) for rnd in range(3) for i in range(20)]
            assert json.loads(rest) == expect, r["stdout"]
            assert r["calls"] == 68, r
        # both cells' sleeps were at the server at once (8 each): they overlapped
        peak = s.cell("print((await toy.peak())['peak'])")
        assert int(peak) > 8, peak


@test
def calls_in_flight_when_a_cell_ends_are_cancelled_upstream():
    with Session(toy_policy()) as s:
        # the cell ends (normally, then by raising) with sleeps at the server
        ended = s.cell("tasks = [asyncio.create_task(toy.sleep(ms=5000)) for _ in range(5)]\n"
                       "await asyncio.sleep(0.5)\nprint('ended')")
        assert ended == "ended\n", ended
        r = s.result(s.start_cell("async def boom():\n"
                                  "    await asyncio.sleep(0.5)\n"
                                  "    raise ValueError('boom')\n"
                                  "await asyncio.gather(boom(), *(toy.sleep(ms=5000)"
                                  " for _ in range(3)))"))
        assert r["calls"] == 3 and "ValueError: boom" in r["error"], r
        # peak() resets to the sleeps in flight now: none, so they were
        # cancelled (notifications/cancelled), not left to run their 5 s
        got = s.cell("await toy.peak()\nprint((await toy.peak())['peak'])")
        assert got == "0\n", got
        assert s.log().count("toy: cancelled a sleep of 5000 ms") == 8, s.log()


# ---- the tools helper ------------------------------------------------------------------

@test
def tools_search_and_describe_give_the_stubs():
    out = everything_session()["out"]
    got = json.loads(sdk_stdout(out["calls"][3]))
    stub = got["describe"]
    assert "async def get_sum(" in stub and "everything.get-sum" in stub, stub
    assert got["by_python_name"] == stub and got["by_function"] == stub, got
    assert got["search"] and got["search"][0] == stub, got["search"]
    assert all("sum" in s.lower() for s in got["search"]), got["search"]
    assert "async def get_sum(" in got["printed"], got["printed"]
    assert got["none"] == "(no tool matches)", got["none"]


# ---- an upstream that dies -------------------------------------------------------------

@test
def a_dead_upstream_is_unavailable_then_restarted():
    with Session(toy_policy(args=["--die-after", "2"])) as s:
        got = s.cell_json(ATTEMPT + """
await attempt("one", toy.add(a=1, b=1))
await attempt("two", toy.echo(text="two"))
await attempt("dies", toy.add(a=3, b=3))
await asyncio.sleep(1.5)  # the restart backoff starts at 0.5 s
await attempt("restarted", toy.add(a=4, b=4))
print(json.dumps(out))
""")
        assert got["one"] == {"ok": {"sum": 2}} and got["two"] == {"ok": "two"}, got
        msg = refused(got["dies"], "toy.add", prefix="upstream_unavailable")
        # no host detail: no path, pid, signal or exit status
        assert not re.search(r"[/0-9]|signal|status|exit|toy-server", msg), msg
        assert got["restarted"] == {"ok": {"sum": 8}}, got
        # a later cell: the restarted server answers (its second call)
        assert s.cell("print(await toy.echo(text='back'))") == "back\n"


# ---- tools/list_changed ----------------------------------------------------------------

@test
def a_changed_upstream_tool_list_reaches_the_client():
    with Session(toy_policy(args=["--list-changed-after", "1"])) as s:
        desc = s.description()
        assert "toy.late" not in desc and "toy.add(" in desc, desc
        assert s.cell("print(await toy.add(a=1, b=2))\nprint(hasattr(toy, 'late'))") == \
            "{'sum': 3}\nFalse\n"
        note = s.wait_note("notifications/tools/list_changed")
        assert note is not None, "no notifications/tools/list_changed; log:\n" + s.log()
        assert note == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}, note
        desc = s.description()
        assert "toy.late(" in desc, desc
        assert s.cell("print(await toy.late())") == "late: listed after tools/list_changed\n"


# ---- the upstream's environment ----------------------------------------------------------

@test
def the_upstream_gets_only_the_environment_the_policy_names():
    session = everything_session()
    got = json.loads(sdk_stdout(session["out"]["calls"][4]))
    assert "SECRET_TOKEN" not in got, sorted(got)
    assert session["env"]["SECRET_TOKEN"] not in json.dumps(got), sorted(got)
    assert got["LISTED_VAR"] == session["env"]["LISTED_VAR"], sorted(got)
    assert got["PATH"] == "/usr/local/bin:/usr/bin:/bin", got["PATH"]
    assert set(got) <= {"PATH", "HOME", "TMPDIR", "LISTED_VAR"}, sorted(got)
    # HOME and TMPDIR: the server's private directory, not the appliance's
    assert got["HOME"] == got["TMPDIR"] and got["HOME"].startswith(
        "/tmp/appliance-upstream-everything."), got["HOME"]
    assert got["HOME"] != os.environ.get("HOME"), got["HOME"]


def stubs_argv(sig, *extra):
    return _kit.argv(sig, "stubs") + list(extra)


@test
def appliance_stubs_prints_what_a_role_sees():
    sig = policy({"toy": toy_server()},
                 {"toy.*": {"access": "read"}, "toy.write_note": {"access": "write"}},
                 {"r": {"tools": ["toy.*"], "write": False},
                  "w": {"tools": ["toy.*"], "write": True}}, "r")
    r = subprocess.run(stubs_argv(sig), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # the description, as run_python shows it to the client's role
    assert out.startswith("# role: r\n"), out[:200]
    assert "Run Python code in a fresh sandbox" in out
    assert 'toy.add(a: int, b: int) -> {"sum": int}  # Add two integers.' in out
    # every offered tool's stub (its output schema the return type), and
    # each tool not offered with why, its stand-in's stub too
    assert '# toy.add\nasync def add(*, a: int, b: int) -> {"sum": int}:' in out, out
    assert "# not offered: toy.write_note: a write tool, and this client's role may only read" in out
    assert "# not offered: toy.unsupported: its input schema cannot be checked (unsupported)" in out
    assert "async def write_note(*, " not in out
    assert ("# toy.write_note\nasync def write_note(**kwargs: Any) -> NoReturn:\n"
            '    """Not offered here: a write tool, and this client\'s role may only read.') in out
    # another role's view
    r = subprocess.run(stubs_argv(sig, "--role", "w"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# role: w\n")
    assert "async def write_note(*, text: str):" in r.stdout
    # a role the policy does not have; an abbreviated option
    r = subprocess.run(stubs_argv(sig, "--role", "nobody"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and 'no role "nobody"' in r.stderr, (r.returncode, r.stderr)
    assert r.stdout == ""
    r = subprocess.run(stubs_argv(sig, "--ro", "w"), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "spelled out in full" in r.stderr, r.stderr


if __name__ == "__main__":
    try:
        main()
    finally:
        _kit.cleanup()
