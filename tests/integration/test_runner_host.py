"""test_runner_host.py: images/cell/runner.py over pipes, with no sandbox.

Runs the runner with the host's /usr/bin/python3 exactly as the sandbox does
(-I -S -B, env PATH=/usr/bin) and plays the host side of runner protocol v1
(docs/runner-protocol.md). Every runner line is parsed as strictly as the
host's C parser does (duplicate keys, NaN, 64-bit range, surrogates, NUL), so
a value-safety slip fails here before it trips a violation in production.
"""

import json
import os
import random
import select
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUNNER = os.path.join(TOP, "images", "cell", "runner.py")
PYTHON = "/usr/bin/python3"
LINE_MAX = 128 * 1024
TOY = [{"tool": "toy.add", "ns": "toy", "fn": "add", "doc": "add(a, b) -> a + b"},
       {"tool": "toy.echo", "ns": "toy", "fn": "echo"}]


def _no_constants(name):
    raise AssertionError("non-strict JSON constant %s on the wire" % name)


def _no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys %r" % keys
    return dict(pairs)


def _check_strict(v, depth=0):
    """What jansson with appl_json_load would refuse."""
    assert depth < 64, "nested too deep"
    if type(v) is int:
        assert -(1 << 63) <= v < (1 << 63), "integer out of 64-bit range"
    elif type(v) is str:
        assert "\x00" not in v, "NUL in string"
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in v), "lone surrogate"
    elif type(v) is dict:
        for k, x in v.items():
            _check_strict(k, depth)
            _check_strict(x, depth + 1)
    elif type(v) is list:
        for x in v:
            _check_strict(x, depth + 1)


def strict_loads(line):
    assert len(line) <= LINE_MAX, "line of %d bytes" % len(line)
    assert b"\x00" not in line, "raw NUL"
    text = line.decode("utf-8")  # strict: invalid UTF-8 fails
    v = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
    _check_strict(v)
    assert type(v) is dict and type(v.get("t")) is str, "not a message object"
    return v


class Runner:
    """One runner process and the host side of its pipes."""

    def __init__(self, *args):
        self.p = subprocess.Popen([PYTHON, "-I", "-S", "-B", RUNNER] + list(args),
                                  stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env={"PATH": "/usr/bin"}, cwd="/")
        self.buf = b""

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            f.close()

    def line(self, timeout=20):
        """The next line (bytes), or None at EOF."""
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, "timed out waiting for the runner; have %r" % self.buf[:200]
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                assert not self.buf, "partial line at EOF: %r" % self.buf[:200]
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def msg(self, timeout=20):
        line = self.line(timeout)
        assert line is not None, "runner closed its stdout; stderr: %r" % self.p.stderr.read()
        return strict_loads(line)

    def send(self, obj):
        self.p.stdin.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        self.p.stdin.flush()

    def start(self, code, tools=TOY):
        assert self.msg() == {"t": "ready", "v": 1}
        self.send({"t": "cell", "code": code, "tools": list(tools)})

    def until_done(self, answer=None):
        """Read to done; answer(call) returns the result message fields.
        Returns (printed text, calls, done message)."""
        out, calls, last_id = [], [], 0
        while True:
            m = self.msg()
            if m["t"] == "out":
                assert set(m) == {"t", "data"} and type(m["data"]) is str
                out.append(m["data"])
            elif m["t"] in ("call", "read"):
                assert set(m) == ({"t", "id", "tool", "args"} if m["t"] == "call"
                                  else {"t", "id", "server", "uri"}), m
                assert type(m["id"]) is int and m["id"] > last_id, "ids must rise"
                last_id = m["id"]
                calls.append(m)
                if answer:
                    self.send(dict({"t": "result", "id": m["id"]}, **answer(m)))
            elif m["t"] == "done":
                assert set(m) == {"t", "error", "result"}
                return "".join(out), calls, m
            else:
                raise AssertionError("unexpected message %r" % m)


def run_cell(code, answer=None, tools=TOY):
    r = Runner()
    try:
        r.start(code, tools)
        out, calls, done = r.until_done(answer)
        assert r.line() is None, "bytes after done"
        assert r.p.wait(timeout=20) == 0, "runner exit status"
        return out, calls, done
    finally:
        r.close()


def add(call):
    a = call["args"]
    return {"ok": a["a"] + a["b"]}


def limits_h():
    """Every #define APPL_NAME value of pkg/base/limits.h whose value is an
    integer expression, evaluated (u suffixes dropped; names resolved)."""
    import re
    vals = {}
    with open(os.path.join(TOP, "pkg", "base", "limits.h")) as f:
        for line in f:
            m = re.match(r"#define\s+(APPL_[A-Z0-9_]+)\s+(.+?)\s*(/\*.*)?$", line)
            if not m:
                continue
            expr = re.sub(r"\b(\d+)u?(ll)?\b", r"\1", m.group(2))
            for name, v in vals.items():
                expr = re.sub(r"\b%s\b" % name, str(v), expr)
            try:
                vals[m.group(1)] = int(eval(expr, {"__builtins__": {}}))
            except Exception:
                pass
    return vals


@test
def runner_caps_are_the_hosts():
    """The runner's copies of the host's caps (each marked with the name of
    its constant in limits.h) hold the same values: a cap changed on one
    side only would make honest runs violations, or let more through."""
    import re
    host = limits_h()
    seen = 0
    with open(RUNNER) as f:
        for line in f:
            m = re.match(r"([A-Z_]+) = (.+?)\s+# (APPL_[A-Z0-9_]+):", line)
            if not m:
                continue
            ours = eval(m.group(2), {"__builtins__": {}})
            assert m.group(3) in host, "%s names %s, not in limits.h" % (m.group(1), m.group(3))
            assert ours == host[m.group(3)], "%s = %r, %s = %r" % (
                m.group(1), ours, m.group(3), host[m.group(3)])
            seen += 1
    assert seen >= 6, "only %d caps found in runner.py" % seen


@test
def ready_is_the_first_line():
    r = Runner()
    try:
        assert r.line() == b'{"t":"ready","v":1}'
    finally:
        r.close()


# What a cell sees of its runner's warm-up: asyncio imported before its
# code ran, without the code naming it (the name is built, so the runner's
# scan for "asyncio" in the code does not import it).
WARMED = "import sys\nprint('async' + 'io' in sys.modules)\n"


@test
def a_pooled_runner_warms_up_before_it_says_ready():
    # cold: ready at once, nothing imported for code that does not need it
    r = Runner()
    try:
        r.start(WARMED)
        assert r.until_done()[0] == "False\n"
    finally:
        r.close()
    # pooled: the warm-up is over when ready comes, so a cell never lands on
    # a runner still warming up
    r = Runner("--pooled")
    try:
        r.start(WARMED)
        assert r.until_done()[0] == "True\n"
    finally:
        r.close()


PRELOADED = "import sys\nprint([m for m in ('csv', 'json.decoder', 'wave') if m in sys.modules])"


@test
def a_pooled_runner_preloads_modules_or_says_fail_instead_of_ready():
    # Without --preload, csv and wave are not imported ahead (the control).
    for args, want in ((["--pooled"], "['json.decoder']\n"),
                       (["--pooled", "--preload=csv,wave"], "['csv', 'json.decoder', 'wave']\n")):
        r = Runner(*args)
        try:
            assert r.msg() == {"t": "ready", "v": 1}
            r.send({"t": "cell", "code": PRELOADED, "tools": []})
            out, _, done = r.until_done()
            assert out == want and done["error"] is None, (args, out, done)
        finally:
            r.close()
    # The first module that does not import: `fail` with its error, instead
    # of ready, and the runner exits; nothing the imports print comes out.
    r = Runner("--pooled", "--preload=csv,no_such_module_x,wave")
    try:
        assert r.msg() == {"t": "fail", "error": "preload no_such_module_x: ModuleNotFoundError: "
                                                 "No module named 'no_such_module_x'"}
        assert r.line() is None
        assert r.p.wait(10) == 1
    finally:
        r.close()


@test
def wake_before_the_cell_reseeds_and_says_ready_again():
    r = Runner("--pooled")
    try:
        assert r.msg() == {"t": "ready", "v": 1}
        for _ in range(2):
            r.p.stdin.write(b'{"t":"wake"}\n')
            r.p.stdin.flush()
            assert r.msg() == {"t": "ready", "v": 1}
        r.send({"t": "cell", "code": "print(6 * 7)", "tools": []})
        out, _, done = r.until_done()
        assert out == "42\n" and done["error"] is None, (out, done)
    finally:
        r.close()


@test
def print_is_captured_as_out():
    out, _, done = run_cell("import sys\nprint('hello', 42)\nprint('to err', file=sys.stderr)\n"
                            "sys.stdout.write('w')\n_ = sys.stdout.buffer.write(b'\\xffb')\n")
    assert out == "hello 42\nto err\nw\ufffdb", out
    assert done["error"] is None and done["result"] is None


@test
def big_output_is_batched():
    r = Runner()
    try:
        r.start("for i in range(20000):\n    print(i)\n")
        outs = []
        while True:
            m = r.msg()
            if m["t"] == "done":
                break
            outs.append(m["data"])
        text = "".join(outs)
        assert text == "".join("%d\n" % i for i in range(20000))
        assert len(outs) < 100, "%d out messages for 20000 prints" % len(outs)
    finally:
        r.close()


@test
def fd_writes_are_invisible():
    forged = '{"t":"done","error":null,"result":666}\\n'
    out, calls, done = run_cell("import os\nos.write(1, b'%s')\nos.write(2, b'err')\n"
                                "os.write(0, b'x') if False else None\n7" % forged)
    assert done == {"t": "done", "error": None, "result": 7}, done
    assert out == "" and calls == []


@test
def child_process_output_is_invisible():
    # The interpreter itself is the child: the cell image has no shell.
    code = ("import subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', 'import os, sys; print(\"forged\"); '\n"
            "                'print(\"forged\", file=sys.stderr); os.write(1, b\"x\\\\n\")'])\n"
            "r = subprocess.run([sys.executable, '-c', 'import os; print(os.listdir(\"/proc/self/fd\"))'],\n"
            "                   close_fds=False, capture_output=True, text=True)\n"
            "sorted(int(x) for x in r.stdout.strip('[]\\n').replace(\"'\", '').split(', '))\n")
    out, _, done = run_cell(code)
    assert done["error"] is None, done["error"]
    assert out == "", out
    # The protocol descriptors are close-on-exec: a child sees only 0-2 and
    # the pipe/dir fds of its own (listdir opens one for /proc/self/fd).
    assert all(fd < 5 for fd in done["result"]), done["result"]


@test
def final_expression_is_the_result():
    _, _, done = run_cell("x = 2\n{'a': [x, 3.5, None, True], 'b': 'c'}")
    assert done["result"] == {"a": [2, 3.5, None, True], "b": "c"}, done
    _, _, done = run_cell("x = 2")
    assert done["result"] is None
    _, _, done = run_cell("{1, 2}")  # not JSON: its repr
    assert done["result"] == "{1, 2}", done


@test
def top_level_await_calls_a_tool():
    out, calls, done = run_cell("import asyncio\nawait asyncio.sleep(0)\nprint('before')\n"
                                "r = await toy.add(a=1, b=2)\nr * 10", answer=add)
    assert calls == [{"t": "call", "id": 1, "tool": "toy.add", "args": {"a": 1, "b": 2}}]
    assert done["result"] == 30 and done["error"] is None, done
    assert out == "before\n"


@test
def asyncio_run_in_plain_code_works():
    code = ("import asyncio\nasync def main():\n    return await toy.add(a=2, b=3)\n"
            "v = asyncio.run(main())\nw = asyncio.run(main())\nv + w")
    _, calls, done = run_cell(code, answer=add)
    assert done["result"] == 10, done
    assert [c["id"] for c in calls] == [1, 2]


@test
def gather_of_50_calls_answered_out_of_order():
    r = Runner()
    try:
        r.start("import asyncio\n"
                "rs = await asyncio.gather(*(toy.echo(i=i) for i in range(50)))\n"
                "print('got', len(rs))\nrs")
        calls = [r.msg() for _ in range(50)]
        assert all(c["t"] == "call" for c in calls), calls
        assert len({c["id"] for c in calls}) == 50
        random.Random(7).shuffle(calls)
        for c in calls:
            r.send({"t": "result", "id": c["id"], "ok": {"echo": c["args"]["i"]}})
        out, more, done = r.until_done()
        assert more == [] and out == "got 50\n"
        assert done["result"] == [{"echo": i} for i in range(50)], done
    finally:
        r.close()


@test
def error_result_raises_tool_error():
    code = ("try:\n    await toy.add(a=1, b=2)\nexcept ToolError as e:\n    m = str(e)\n"
            "m, issubclass(ToolError, Exception)")
    _, _, done = run_cell(code, answer=lambda c: {"error": "not allowed for role",
                                                  "kind": "refused"})
    assert done["result"] == ["not allowed for role", True], done
    _, _, done = run_cell("await toy.add(a=1, b=2)",
                          answer=lambda c: {"error": "nope", "kind": "error"})
    assert done["error"].endswith("ToolError: nope"), done
    assert "runner.py" not in done["error"]


@test
def tool_error_says_what_happened_and_to_which_tool():
    code = ("try:\n    await toy.add(a=1, b=2)\nexcept ToolError as e:\n"
            "    r = [e.kind, e.tool, e.mcp_tool, str(e)]\nr")
    for kind in ("refused", "error", "timeout", "unavailable", "declined"):
        _, _, done = run_cell(code, answer=lambda c: {"error": "why", "kind": kind})
        assert done["result"] == [kind, "toy.add", "toy.add", "why"], done
    # a kind the runner does not know, or none, is the host breaking the protocol
    for extra in ({"kind": "fatal"}, {}, {"kind": 1}):
        _, _, done = run_cell(code, answer=lambda c: dict({"error": "why"}, **extra))
        assert done["error"].startswith("runner: host protocol error"), (extra, done)
    # the runner's own refusal has the fields too
    _, calls, done = run_cell("try:\n    await toy.echo(s='x' * 200000)\n"
                              "except ToolError as e:\n    r = [e.kind, e.tool]\nr")
    assert calls == [] and done["result"] == ["refused", "toy.echo"], done


READER = [{"tool": "files.read", "ns": "files", "fn": "read"},
          {"tool": "files.write", "ns": "files", "fn": "write",
           "doc": "async def write(**kwargs: Any) -> NoReturn:\n    \"\"\"Not offered here: no.\"\"\"\n",
           "off": "a write tool, and this role may only read"},
          {"server": "gone", "ns": "gone"}]


@test
def read_resource_sends_a_read_and_returns_text_or_bytes():
    answers = {"t://text": [{"text": "hello"}], "t://blob": [{"blob": "AAEC"}],
               "t://both": [{"text": "a"}, {"blob": "YQ=="}]}
    code = ("r = []\nfor u in ('t://text', 't://blob', 't://both'):\n"
            "    r.append(repr(await files.read_resource(u)))\n"
            "r.append(repr(await gone.read_resource('t://text')))\nr")
    _, calls, done = run_cell(code, tools=READER,
                              answer=lambda c: {"ok": answers[c["uri"]]})
    assert done["result"] == ["'hello'", "b'\\x00\\x01\\x02'", "['a', b'a']", "'hello'"], done
    assert [(c["t"], c["server"], c["uri"]) for c in calls] == [
        ("read", "files", "t://text"), ("read", "files", "t://blob"),
        ("read", "files", "t://both"), ("read", "gone", "t://text")], calls
    # its refusal is a ToolError naming the reader
    code = ("try:\n    await files.read_resource('t://x')\nexcept ToolError as e:\n"
            "    r = [e.kind, e.tool, e.mcp_tool]\nr")
    _, _, done = run_cell(code, tools=READER,
                          answer=lambda c: {"error": "no", "kind": "refused"})
    assert done["result"] == ["refused", "files.read_resource", "files"], done
    # a URI that is not a str is the code's mistake: nothing is sent
    _, calls, done = run_cell("await files.read_resource(b'x')", tools=READER)
    assert calls == [] and "TypeError" in done["error"], done
    _, calls, done = run_cell("await files.read_resource('')", tools=READER)
    assert calls == [] and "ToolError" in done["error"], done
    # a host answer of another shape is an error, not a crash
    _, _, done = run_cell("await files.read_resource('t://x')", tools=READER,
                          answer=lambda c: {"ok": [{"blob": "%%%"}]})
    assert "ToolError: error: the host sent a read result" in done["error"], done


@test
def stand_ins_are_called_and_listed_last():
    code = ("s = tools.search('')\nt = [x.split('(')[0] for x in s]\n"
            "try:\n    await files.write(x=1)\nexcept ToolError as e:\n"
            "    t.append(e.kind)\nt.append(repr(tools))\nt")
    _, calls, done = run_cell(code, tools=READER,
                              answer=lambda c: {"error": "refused: files.write: no",
                                                "kind": "refused"})
    # the stand-in's call still goes to the host, which refuses it
    assert [c["tool"] for c in calls] == ["files.write"], calls
    assert done["result"][:2] == ["async def read", "async def write"], done
    assert done["result"][2] == "refused", done
    assert "1 tools, 1 not offered" in done["result"][3], done
    # and a name search finds it after the offered ones
    _, _, done = run_cell("[x.split('(')[0] for x in tools.search('files')]", tools=READER)
    assert done["result"] == ["async def read", "async def write"], done


@test
def tool_misuse_fails_in_the_cell():
    _, calls, done = run_cell("await toy.add(1, 2)")
    assert calls == [] and "keyword arguments only" in done["error"], done
    _, calls, done = run_cell("await toy.add(a={1, 2})")
    assert calls == [] and "TypeError" in done["error"] and "not JSON" in done["error"]
    _, calls, done = run_cell("try:\n    await toy.echo(s='x' * 200000)\n"
                              "except ToolError as e:\n    r = str(e)\nr")
    assert calls == [] and done["result"].startswith("refused: toy.echo: arguments too large"), done
    _, _, done = run_cell("toy")
    assert done["result"] == "<tools toy: add, echo>", done


def not_awaited(name):
    return "%s(...) was not awaited: write await %s(...)" % (name, name)


def not_awaited_warning(name):
    return ("RuntimeWarning: %s(...) was not awaited, so the call was not made:"
            " write await %s(...)\n" % (name, name))


@test
def a_final_tool_call_not_awaited_is_the_error_and_never_sent():
    out, calls, done = run_cell("toy.add(a=1, b=2)", answer=add)
    assert calls == [] and out == "", (calls, out)
    assert done == {"t": "done", "error": not_awaited("toy.add"), "result": None}, done
    _, calls, done = run_cell("[toy.add(a=1, b=2), toy.echo(s='x'), toy.add(a=2, b=3)]",
                              answer=add)
    assert calls == [] and done["result"] is None, done
    assert done["error"] == not_awaited("toy.add") + "\n" + not_awaited("toy.echo"), done
    _, calls, done = run_cell("{'r': toy.read_resource('file:///x')}")
    assert calls == [] and done["error"] == not_awaited("toy.read_resource"), done
    # An error the code raised stays the error.
    _, _, done = run_cell("x = toy.add(a=1, b=2)\nraise KeyError(x is None)")
    assert done["error"].endswith("KeyError: False"), done


@test
def a_tool_call_dropped_or_left_unawaited_is_a_warning_line():
    # Dropped at once, five times: one line, where it happened; the run goes on.
    out, calls, done = run_cell("for i in range(5):\n    toy.add(a=i, b=1)\nprint('next')\n"
                                "await toy.add(a=1, b=1)", answer=add)
    assert out == not_awaited_warning("toy.add") + "next\n", repr(out)
    assert [c["args"] for c in calls] == [{"a": 1, "b": 1}] and done["result"] == 2, done
    # Left in a name (the function keeps the globals alive) or a container.
    out, calls, done = run_cell("def f():\n    pass\nx = toy.add(a=1, b=2)\n"
                                "d = {'k': toy.read_resource('file:///x')}\nprint('end')\n7")
    assert out == ("end\n" + not_awaited_warning("toy.add")
                   + not_awaited_warning("toy.read_resource")), repr(out)
    assert calls == [] and done == {"t": "done", "error": None, "result": 7}, done
    # The code's own coroutines keep Python's warning, at the line that dropped one.
    out, _, done = run_cell("async def f():\n    return 1\nf()\n3")
    assert out.startswith("<cell>:3: RuntimeWarning: coroutine 'f' was never awaited\n"), out
    assert done["result"] == 3, done


@test
def a_missing_tool_names_the_closest_and_how_to_list_them():
    fs = [{"tool": "fs." + n, "ns": "fs", "fn": n}
          for n in ("list_directory", "list_allowed_directories", "directory_tree",
                    "read_file", "read_text_file", "write_file")]
    want = {
        "fs.list_dir": "fs has no tool 'list_dir'; did you mean fs.list_directory?",
        "fs.list_directories": ("fs has no tool 'list_directories'; did you mean "
                                "fs.list_directory, fs.list_allowed_directories or "
                                "fs.directory_tree?"),
        "fs.frob": ("fs has no tool 'frob'; it has fs.directory_tree, "
                    "fs.list_allowed_directories, fs.list_directory, fs.read_file, "
                    "fs.read_text_file, and 1 more;"),
        "toy.nope": "toy has no tool 'nope'; it has toy.add and toy.echo;",
    }
    for code, head in want.items():
        _, _, done = run_cell(code, tools=TOY + fs)
        ns = code.split(".")[0]
        last = done["error"].splitlines()[-1]
        assert last == ('AttributeError: %s print(tools.search("%s.")) shows all its tools'
                        % (head, ns)), last
    _, _, done = run_cell("[hasattr(toy, 'nope'), hasattr(toy, '_x')]")
    assert done["result"] == [False, False], done


@test
def unsafe_values_are_made_safe():
    code = ("print('a\\udcffb\\x00c')\n"
            "r = await toy.echo(v=[float('nan'), 2**64, 'x\\ud800'])\n"
            "[float('nan'), float('inf'), -float('inf'), 2**63 - 1, 2**63, -2**63, -2**63 - 1,\n"
            " 'a\\ud800b', 'a\\x00b', {1: 'x', '1': 'y', None: 'n', 2.5: 'f'},\n"
            " 10**5000 > 0, len(str(2**200)), r]")
    out, calls, done = run_cell(code, answer=lambda c: {"ok": c["args"]})
    assert out == "a\ufffdb\ufffdc\n", repr(out)
    assert calls[0]["args"] == {"v": ["NaN", "18446744073709551616", "x\ufffd"]}, calls
    res = done["result"]
    assert res[:9] == ["NaN", "Infinity", "-Infinity", 2**63 - 1, str(2**63), -2**63,
                       str(-2**63 - 1), "a\ufffdb", "a\ufffdb"], res
    assert res[9] == {"1": "x", "1~2": "y", "null": "n", "2.5": "f"}, res[9]
    assert res[12] == {"v": ["NaN", "18446744073709551616", "x\ufffd"]}
    _, _, done = run_cell("10**5000")
    assert done["result"].startswith("0x"), done["result"][:20]


@test
def deep_and_big_results_stay_in_caps():
    _, _, done = run_cell("x = []\nfor _ in range(100):\n    x = [x]\nx")
    assert done["result"].startswith("[[[[") and done["error"] is None  # repr, not JSON
    _, _, done = run_cell("l = []\nl.append(l)\nl")
    assert done["result"] == "[[...]]", done
    _, _, done = run_cell("'\\x01' * 100000")
    assert "result cut" in done["result"], done["result"][-60:]
    assert len(json.dumps(done["result"], ensure_ascii=False).encode()) <= 64 * 1024
    _, _, done = run_cell("class A:\n    def __repr__(self):\n        raise ValueError\nA()")
    assert done["result"].startswith("<A object; repr() failed"), done


@test
def traceback_tail_in_done_error():
    _, _, done = run_cell("x = 1\ndef f():\n    raise ValueError('boom')\nf()")
    err = done["error"]
    assert err.endswith("ValueError: boom"), err
    assert 'File "<cell>", line 3, in f' in err and "raise ValueError('boom')" in err, err
    assert "runner.py" not in err and done["result"] is None
    _, _, done = run_cell("def f(n):\n    return f(n + 1)\nf(0)")
    err = done["error"]
    assert len(err) <= 2048 and err.endswith("maximum recursion depth exceeded"), err[-200:]
    _, _, done = run_cell("import asyncio\nasync def f():\n    raise KeyError(1)\n"
                          "await asyncio.gather(f(), f())")
    assert done["error"].startswith("Traceback (most recent call last):\n  File \"<cell>\", line 4"), done
    assert "base_events" not in done["error"] and done["error"].endswith("KeyError: 1")
    _, _, done = run_cell("import json\njson.loads('{')")
    assert 'json/decoder.py' in done["error"], done  # frames under the cell's stay
    _, _, done = run_cell("raise ValueError('m' * 10000)")
    assert len(done["error"]) <= 2048 and done["error"].startswith("ValueError: mmm")
    _, _, done = run_cell("x = (")
    assert done["error"].startswith('  File "<cell>", line 1'), done
    assert "SyntaxError" in done["error"] and "ast.py" not in done["error"], done
    _, _, done = run_cell("x = 1\0")
    assert "ValueError" in done["error"] or "SyntaxError" in done["error"], done


@test
def system_exit_is_an_end():
    _, _, done = run_cell("import sys\nprint('x')\nsys.exit(0)\nprint('y')")
    assert done == {"t": "done", "error": None, "result": None}, done
    _, _, done = run_cell("import sys\nsys.exit(3)")
    assert done["error"].endswith("SystemExit: 3"), done


@test
def exits_right_after_done():
    r = Runner()
    try:
        # A task left running and a thread printing must not speak after done.
        r.start("import asyncio, threading, time\n"
                "def spam():\n    while True:\n        print('late')\n        time.sleep(0.001)\n"
                "threading.Thread(target=spam, daemon=True).start()\n"
                "asyncio.get_running_loop().create_task(asyncio.sleep(100))\n"
                "await asyncio.sleep(0.05)\n'end'")
        while True:
            m = r.msg()
            if m["t"] == "done":
                break
            assert m["t"] == "out"
        assert m["result"] == "end"
        assert r.line() is None, "bytes after done"
        assert r.p.wait(timeout=10) == 0
    finally:
        r.close()


@test
def a_kept_runner_runs_the_next_cell_in_the_same_interpreter():
    r = Runner()
    try:
        assert r.msg() == {"t": "ready", "v": 1}
        r.send({"t": "cell", "keep": True, "tools": list(TOY),
                "code": "x = 41\ndef f():\n    raise ValueError('from cell one')\n"
                        "import threading, time\n"
                        "threading.Thread(target=lambda: (time.sleep(0.3), print('late')),"
                        " daemon=True).start()"})
        out, _, done = r.until_done()
        assert done["error"] is None and out == "", (out, done)
        # between cells nothing is said: the thread's print waits for the next cell
        ready, _, _ = select.select([r.p.stdout.fileno()], [], [], 1.0)
        assert not ready, "the runner spoke between cells"
        r.send({"t": "cell", "keep": True, "tools": [],
                "code": "print(x + 1)\n'toy' in globals()"})
        out, calls, done = r.until_done(add)
        assert "42\n" in out and "late\n" in out, out
        assert done["result"] is False and done["error"] is None, done
        # a traceback through an earlier cell's function shows that cell's line
        r.send({"t": "cell", "keep": True, "tools": list(TOY), "code": "f()"})
        out, calls, done = r.until_done(add)
        assert "raise ValueError('from cell one')" in done["error"], done
        assert 'File "<cell 3>", line 1' in done["error"], done
        r.send({"t": "cell", "tools": list(TOY), "code": "await toy.add(a=x, b=1)"})
        out, calls, done = r.until_done(add)
        assert done["result"] == 42 and calls[0]["id"] == 1, (done, calls)
        # without keep the runner exits after done
        assert r.line() is None and r.p.wait(timeout=10) == 0
    finally:
        r.close()
    r = Runner()
    try:
        assert r.msg() == {"t": "ready", "v": 1}
        r.send({"t": "cell", "keep": False, "tools": [], "code": "1"})
        _, _, done = r.until_done()
        assert done["error"].startswith("runner: bad cell message"), done
    finally:
        r.close()


@test
def bad_cell_message_ends_the_run():
    bad_tools = [[{"tool": "x.y", "ns": "print", "fn": "y"}],
                 [{"tool": "x.y", "ns": "x", "fn": "class"}],
                 [{"tool": "x.y", "ns": "x", "fn": "y", "extra": 1}],
                 [{"tool": "x.y", "ns": "x", "fn": "y"}, {"tool": "x.z", "ns": "x", "fn": "y"}],
                 [{"tool": "x.y", "ns": "x", "fn": "read_resource"}],
                 [{"tool": "xy", "ns": "x", "fn": "y"}],
                 [{"tool": "x.y", "ns": "x", "fn": "y", "off": 1}]]
    for tools in bad_tools:
        _, _, done = run_cell("1", tools=tools)
        assert done["error"].startswith("runner: bad cell message"), (tools, done)


@test
def bad_files_limits_end_the_run():
    limits = {"max_count": 8, "max_bytes": 100, "max_total_bytes": 1000}
    for bad in ({"max_count": 65}, {"max_bytes": 0}, {"max_bytes": 2000},
                {"max_total_bytes": 5 * 1024 * 1024 + 1}, {"max_count": True},
                {"max_count": 1.0}, {"extra": 1}):
        r = Runner()
        try:
            assert r.msg() == {"t": "ready", "v": 1}
            r.send({"t": "cell", "code": "1", "tools": [], "files": dict(limits, **bad)})
            _, _, done = r.until_done()
            assert done["error"].startswith("runner: bad cell message: files:"), (bad, done)
        finally:
            r.close()


def runner_module():
    """runner.py as a module of this process, for its functions alone."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("appliance_runner", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class FileChannel:
    """What _send_out_files needs of a channel; every line strictly checked."""

    def __init__(self, files):
        self.files = files
        self.lines = []

    def send(self, msg):
        line = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode()
        self.lines.append(strict_loads(line))

    def out_flush(self):
        pass


@test
def out_files_are_sent_within_the_limits_and_out_is_emptied():
    """_send_out_files on a directory of the host: chunks, the order, every
    reason, names that are not UTF-8, and the emptying (deep, without
    rights, never through a link)."""
    import base64
    import shutil
    import tempfile
    runner = runner_module()
    top = tempfile.mkdtemp(prefix="appliance-out-test.")
    out, keep = os.path.join(top, "out"), os.path.join(top, "keep")
    try:
        os.mkdir(out)
        os.mkdir(keep)
        open(os.path.join(keep, "k"), "w").write("k")
        big = os.urandom(runner.FILE_CHUNK * 2 + 5)
        open(os.path.join(out, "a.bin"), "wb").write(big)
        open(os.path.join(out, "b.txt"), "w").write("b" * 100)
        open(os.path.join(out, "c.txt"), "w").write("c" * 10)
        open(os.path.join(out, "empty"), "w").close()
        open(os.path.join(os.fsencode(out), b"n\xff.txt"), "w").write("x")
        os.mkfifo(os.path.join(out, "fifo"))
        os.symlink(keep, os.path.join(out, "link"))
        deep = os.path.join(out, "dir", *["d"] * 100)
        os.makedirs(deep)
        open(os.path.join(deep, "f"), "w").write("f")
        os.chmod(os.path.join(out, "dir", "d"), 0)
        runner.OUT_DIR = out
        chan = FileChannel((3, len(big), len(big) + 50))
        runner._send_out_files(chan)
        sent = [(m["t"], m["name"], m.get("why"), m.get("more")) for m in chan.lines]
        assert sent == [("file", "a.bin", None, True), ("file", "a.bin", None, True),
                        ("file", "a.bin", None, False), ("skip", "b.txt", "max_total_bytes", None),
                        ("file", "c.txt", None, False), ("skip", "dir", "directory", None),
                        ("file", "empty", None, False), ("skip", "fifo", "fifo", None),
                        ("skip", "link", "symlink", None), ("skip", "n\ufffd.txt", "max_count", None)], sent
        data = b"".join(base64.b64decode(m["data"]) for m in chan.lines[:3])
        assert data == big and len(base64.b64decode(chan.lines[0]["data"])) == runner.FILE_CHUNK
        assert chan.lines[6]["data"] == "", chan.lines[6]
        assert os.listdir(out) == [] and os.listdir(keep) == ["k"], os.listdir(out)

        # past the entries looked at: one more is reported, then no more
        for i in range(runner.FILE_ENTRIES_MAX + 5):
            open(os.path.join(out, "f%03d" % i), "w").close()
        chan = FileChannel((0, 1, 1))
        runner._send_out_files(chan)
        assert len(chan.lines) == runner.FILE_ENTRIES_MAX + 1, len(chan.lines)
        assert chan.lines[-1] == {"t": "skip", "name": "f128", "why": "max_entries"}
        assert {m["why"] for m in chan.lines[:-1]} == {"max_count"}
        assert os.listdir(out) == []

        # no limits given (a cell line without files): nothing is taken
        open(os.path.join(out, "stay"), "w").close()
        chan = FileChannel(None)
        runner._send_out_files(chan)
        assert chan.lines == [] and os.listdir(out) == ["stay"]
    finally:
        shutil.rmtree(top, True)


@test
def unknown_result_id_ends_the_run():
    r = Runner()
    try:
        r.start("await toy.add(a=1, b=2)")
        call = r.msg()
        assert call["t"] == "call"
        r.send({"t": "result", "id": call["id"] + 5, "ok": 1})
        _, _, done = r.until_done()
        assert done["error"].startswith("runner: host protocol error"), done
    finally:
        r.close()


@test
def host_hangup_exits_quietly():
    r = Runner()
    try:
        assert r.msg()["t"] == "ready"
        r.p.stdin.close()
        assert r.line() is None
        assert r.p.wait(timeout=10) == 3
    finally:
        r.close()


STUBBED = [{"tool": "everything.get-sum", "ns": "everything", "fn": "get_sum",
            "doc": 'async def get_sum(*, a: int, b: int = 5):\n    """Adds two numbers."""\n'},
           {"tool": "everything.echo", "ns": "everything", "fn": "echo",
            "doc": 'async def echo(*, message: str):\n    """Echoes the SUM back."""\n'},
           {"tool": "fs.read", "ns": "fs", "fn": "read"}]


@test
def tools_search_finds_stubs_in_the_cell():
    code = ("r = tools.search('SUM')\n"
            "print(r)\n"
            "[type(r).__mro__[1].__name__, len(r), tools.search('adds two') == [r[0]],\n"
            " len(tools.search('')), tools.search('nothing like it'),\n"
            " str(tools.search('nothing like it')), tools.search('FS.READ')]")
    out, calls, done = run_cell(code, tools=STUBBED)
    assert calls == [] and done["error"] is None, done
    res = done["result"]
    # name matches (get-sum) before matches in the stub text only (echo)
    assert res[0:3] == ["list", 2, True], res
    assert res[3] == 3 and res[4] == [] and res[5] == "(no tool matches)", res
    assert res[6] == ["async def read(**kwargs): ...  # fs.read, MCP tool fs.read\n"], res
    assert out == STUBBED[0]["doc"] + "\n" + STUBBED[1]["doc"] + "\n", repr(out)


@test
def tools_describe_by_mcp_name_python_name_or_function():
    code = ("[tools.describe('everything.get-sum'), tools.describe('everything.get_sum'),\n"
            " tools.describe(everything.echo), repr(tools)]")
    _, _, done = run_cell(code, tools=STUBBED)
    res = done["result"]
    assert res[0] == res[1] == STUBBED[0]["doc"], res
    assert res[2] == STUBBED[1]["doc"], res
    assert res[3] == "<tools: search(text), describe(name); 3 tools>", res
    _, _, done = run_cell("tools.describe('everything.nope')", tools=STUBBED)
    assert "LookupError: no tool named 'everything.nope'" in done["error"], done
    _, _, done = run_cell("tools.describe(3)", tools=STUBBED)
    assert "TypeError" in done["error"], done
    _, _, done = run_cell("tools.search(None)", tools=STUBBED)
    assert "TypeError" in done["error"], done


@test
def tools_is_there_without_tools_and_reserved():
    _, _, done = run_cell("repr(tools), tools.search('')", tools=[])
    assert done["result"] == ["<tools: search(text), describe(name); 0 tools>", []], done
    _, _, done = run_cell("1", tools=[{"tool": "tools.x", "ns": "tools", "fn": "x"}])
    assert done["error"].startswith("runner: bad cell message"), done
    assert "reserved" in done["error"], done



def run_line(**fields):
    """One cell from a cell line with these fields (code and tools at
    least); returns done."""
    r = Runner()
    try:
        assert r.msg() == {"t": "ready", "v": 1}
        r.send(dict({"t": "cell"}, **fields))
        _, _, done = r.until_done()
        assert r.line() is None, "bytes after done"
        assert r.p.wait(timeout=20) == 0, "runner exit status"
        return done
    finally:
        r.close()


@test
def args_of_the_cell_line_are_the_global_args():
    """A code tool's arguments (the cell line's `args`) are a plain dict
    named args; a line without them leaves the name undefined."""
    done = run_line(code='args["a"] + args["b"]', tools=[], args={"a": 2, "b": 40})
    assert done == {"t": "done", "error": None, "result": 42}, done
    value = {"s": "caf\u00e9 \"}\n", "l": [1, 2.5, None, True, False], "o": {"x": {}},
             "big": (1 << 63) - 1}
    done = run_line(code="[type(args).__name__, sorted({type(v).__name__ for v in "
                         "args.values()}), args]", tools=list(TOY), args=value)
    assert done["result"] == ["dict", ["dict", "int", "list", "str"], value], done
    done = run_line(code="args == {}", tools=[], args={})
    assert done["result"] is True, done
    done = run_line(code="args", tools=list(TOY))
    assert "NameError: name 'args' is not defined" in done["error"], done
    done = run_line(code="'args' in globals()", tools=[])
    assert done["result"] is False, done


@test
def args_not_an_object_is_a_bad_cell_message():
    for bad in ([], [1], "a", 1, 1.5, None, True):
        done = run_line(code="1", tools=[], args=bad)
        assert done["error"] == "runner: bad cell message: cell args is not an object", (
            bad, done)
    # and no namespace may take the name
    done = run_line(code="1", tools=[{"tool": "args.x", "ns": "args", "fn": "x"}])
    assert done["error"].startswith("runner: bad cell message"), done
    assert "reserved" in done["error"], done
    done = run_line(code="1", tools=[{"server": "args", "ns": "args"}])
    assert "reserved" in done["error"], done
    # a function may be called args under its namespace
    done = run_line(code="repr(toy)", tools=[{"tool": "toy.args", "ns": "toy", "fn": "args"}],
                    args={"a": 1})
    assert done["result"] == "<tools toy: args>", done


@test
def a_kept_runner_takes_the_args_of_each_cell_line():
    r = Runner()
    try:
        assert r.msg() == {"t": "ready", "v": 1}

        def cell(code, **fields):
            r.send(dict({"t": "cell", "keep": True, "tools": [], "code": code}, **fields))
            return r.until_done()[2]

        assert cell("args['n']", args={"n": 1})["result"] == 1
        done = cell("args")
        assert "NameError" in done["error"], done
        assert cell("args['n']", args={"n": 2})["result"] == 2
        assert cell("args['m'] = 3\nargs", args={"n": 2})["result"] == {"n": 2, "m": 3}
        # a value of the code's own stays when a line brings none...
        assert cell("args = 'mine'\nargs")["result"] == "mine"
        assert cell("args")["result"] == "mine"
        # ...and args a line brings replace it
        assert cell("args", args={"n": 4})["result"] == {"n": 4}
        r.send({"t": "cell", "tools": [], "code": "'args' in globals()"})
        assert r.until_done()[2]["result"] is False
        assert r.line() is None and r.p.wait(timeout=10) == 0
    finally:
        r.close()


if __name__ == "__main__":
    main()
