"""test_model_view.py: what a model sees of the upstream tools, and that code
written from it alone works.

The run_python description (and `appliance stubs`) is all a model reads
before it writes code, so each check here reads it the way a model would and
then runs that code against real servers (server-filesystem, server-memory,
server-everything) through `appliance run`:

- a tool's outputSchema is its stub's return annotation (`-> {"content": str}`)
  and the value the code gets is that dict;
- a tool upstream that the role may not call is a stand-in, listed with its
  reason under "Not offered here" and by tools.search, that raises ToolError
  of kind "refused" (a write under a reading role; a tool that needs MCP
  tasks under a writing role);
- a server that is down keeps its namespace: its calls raise kind
  "unavailable" and the description names it;
- a resource_link a tool returned can be followed with
  `await ns.read_resource(uri)` (str for text, bytes for a blob) where the
  policy says "resources": true, and is refused where it does not;
- servers.NAME.concurrency 1 makes gathered calls to server-memory (not safe
  under concurrent calls) all land;
- ToolError's kind, tool (the Python name) and mcp_tool (the MCP name).

Two sessions (one reading role, one writing role) are shared by the tests
that check their parts: each runs once, when a test first needs it, and
keeps what it saw; cells print JSON and the tests assert its values.

Runs as root with runsc in root mode; needs build/appliance, build/image and
tests/node_modules.
"""

import ast
import json
import os
import secrets
import subprocess

from harness import main, test

import gatewaykit as gk

MEMORY = os.path.join(gk.MODULES, "server-memory", "dist", "index.js")

READ_ONLY = "a write tool, and this client's role may only read"
NOT_OFFERED = 'Not offered here (%d; calling one raises ToolError of kind "refused" saying why):'

# What a cell uses to report each attempt: the value, or the ToolError's fields.
ATTEMPT = """
import json
out = {}
def fields(e):
    return {"type": type(e).__name__, "kind": e.kind, "tool": e.tool,
            "mcp_tool": e.mcp_tool, "str": str(e)}
async def attempt(label, coro):
    try:
        out[label] = {"ok": await coro}
    except ToolError as e:
        out[label] = {"err": fields(e)}
"""


def err(entry, kind, tool, mcp_tool, *parts):
    """entry is a ToolError of kind with these names, its text holding parts."""
    assert "err" in entry, entry
    e = entry["err"]
    assert e["type"] == "ToolError", e
    assert (e["kind"], e["tool"], e["mcp_tool"]) == (kind, tool, mcp_tool), e
    for p in parts:
        assert p in e["str"], (p, e)
    return e["str"]


def lines_of(description, prefix):
    return [ln for ln in description.splitlines() if ln.startswith(prefix)]


def section(description, head):
    """The lines after the line starting with head, up to the next one not
    shaped `ns.fn  # ...`."""
    lines = description.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith(head)]
    assert len(starts) == 1, (head, description[-3000:])
    out = []
    for ln in lines[starts[0] + 1:]:
        if "  # " not in ln or " " in ln.split("  # ")[0]:
            break
        out.append(ln)
    return lines[starts[0]], out


def signature(line):
    """A description line `ns.fn(params) -> T  # summary` read as Python, as a
    model would: (ns, the function's ast node)."""
    call = line.split("  # ", 1)[0]
    ns, rest = call.split(".", 1)
    tree = ast.parse("async def %s: ..." % rest)
    fn = tree.body[0]
    assert isinstance(fn, ast.AsyncFunctionDef), line
    return ns, fn


def _once(cache, make):
    """make()'s result, made once; a failure is kept and raised again, so a
    broken session fails each test that needs it without starting again."""
    if "value" not in cache and "error" not in cache:
        try:
            cache["value"] = make()
        except BaseException as e:
            cache["error"] = e
    if "error" in cache:
        raise cache["error"]
    return cache["value"]


# ---- the reading role: files, everything (resources), a server that is down --------

_reader = {}


def reader_policy():
    """(sig, root, text): server-filesystem over a fresh root holding a.txt,
    server-everything with resources, and `down`, which exits at once; every
    tool of files and everything allowed (the unmarked ones as writes), for a
    role that may not write."""
    root = gk.server_dir("appliance-model-view.")
    text = "first line %s\nsecond line\n" % secrets.token_hex(6)
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write(text)
    servers = {"files": {"command": [gk.node(), gk.need(gk.FILESYSTEM), root]},
               "everything": dict(gk.everything_server(), resources=True),
               "down": {"command": ["/bin/false"]}}
    tools = {"files.*": {"access": "write"}, "everything.*": {"access": "write"}}
    roles = {"r": {"tools": ["files.*", "everything.*", "down.*"], "write": False}}
    return gk.policy(servers, tools, roles, "r"), root, text


def code_from_description(description, root):
    """The code a model writes for "print a.txt" from the description only:
    the function's required parameters from its signature, the key to take
    from its return annotation."""
    [line] = lines_of(description, "files.read_text_file(")
    ns, fn = signature(line)
    args = fn.args.args + fn.args.kwonlyargs
    required = [a.arg for a in fn.args.args[:len(fn.args.args) - len(fn.args.defaults)]]
    required += [a.arg for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is None]
    assert required == ["path"], (required, line)
    assert [a.arg for a in args] == ["path", "tail", "head"], line
    ret = fn.returns
    assert isinstance(ret, ast.Dict), line
    keys = [k.value for k in ret.keys]
    vals = [ast.unparse(v) for v in ret.values]
    assert (keys, vals) == (["content"], ["str"]), line
    return line, ("r = await %s.%s(path=%r)\nprint(r[%r], end='')\n"
                  % (ns, fn.name, os.path.join(root, "a.txt"), keys[0]))


READER_PROBE = ATTEMPT + """
import base64
new = %(new)r
await attempt("write_file", files.write_file(path=new, content="x"))
await attempt("research_as_write", everything.simulate_research_query(topic="x"))
out["search_write"] = list(tools.search("write"))
out["describe_write_file"] = tools.describe("files.write_file")

out["down_namespace"] = {"callable": callable(down.anything), "callable2": callable(down.other)}
await attempt("down_anything", down.anything())
await attempt("down_other", down.other(x=1))

links = await everything.get_resource_links(count=2)
out["links"] = links
read = []
for block in links:
    if isinstance(block, dict) and block.get("type") == "resource_link":
        v = await everything.read_resource(block["uri"])
        read.append({"uri": block["uri"], "type": type(v).__name__,
                     "text": v.decode() if isinstance(v, bytes) else v})
out["read"] = read
await attempt("files_resource", files.read_resource("file://" + new))

await attempt("sum", everything.get_sum(a=2, b=3))
await attempt("sum_bad", everything.get_sum(a="x", b=1))
await attempt("reference_bad",
              everything.get_resource_reference(resourceType="Text", resourceId=0))
await attempt("structured", everything.get_structured_content(location="Chicago"))
print(json.dumps(out))
"""


# A tool name a model might guess for server-filesystem's list_directory.
MISSPELT = """
import json
try:
    files.list_dir
except AttributeError as e:
    print(json.dumps(str(e)))
"""


def reader():
    """The reading role's session, once: its description, the output of code
    written from it, one probe cell's JSON, what a misspelt tool raises and
    the result of a call not awaited."""
    def make():
        sig, root, text = reader_policy()
        new = os.path.join(root, "new.txt")
        with gk.Session(sig) as s:
            description = s.description()
            line, src = code_from_description(description, root)
            first = s.cell(src)
            probe = s.cell_json(READER_PROBE % {"new": new})
            misspelt = s.cell_json(MISSPELT)
            unawaited = s.result(s.start_cell("files.read_text_file(path=%r)"
                                              % os.path.join(root, "a.txt")))
        return {"root": root, "text": text, "description": description,
                "line": line, "first": first, "probe": probe,
                "new_exists": os.path.exists(new), "misspelt": misspelt,
                "unawaited": unawaited}
    return _once(_reader, make)


# ---- the writing role: memory at concurrency 1, everything ---------------------------

_writer = {}


def writer_env(mem):
    return dict(os.environ, MEMORY_FILE_PATH=os.path.join(mem, "memory.jsonl"))


def writer_policy():
    """(sig, mem): server-memory at concurrency 1 keeping its graph in a
    fresh directory, and server-everything, for a role that may write."""
    mem = gk.server_dir("appliance-model-view-mem.")
    servers = {"memory": {"command": [gk.node(), gk.need(MEMORY)], "env": ["MEMORY_FILE_PATH"],
                          "concurrency": 1},
               "everything": gk.everything_server()}
    tools = {"memory.*": {"access": "write"}, "everything.*": {"access": "write"}}
    roles = {"w": {"tools": ["memory.*", "everything.*"], "write": True}}
    return gk.policy(servers, tools, roles, "w"), mem


WRITER_PROBE = ATTEMPT + """
await attempt("research", everything.simulate_research_query(topic="x"))
out["search_research"] = list(tools.search("research"))
await attempt("memory_resource", memory.read_resource("memory://graph"))
made = await asyncio.gather(*[
    memory.create_entities(entities=[{"name": "e%d" % i, "entityType": "t",
                                      "observations": ["o%d" % i]}])
    for i in range(5)])
out["made"] = made
out["graph"] = await memory.read_graph()
print(json.dumps(out))
"""


def writer():
    def make():
        sig, mem = writer_policy()
        with gk.Session(sig, env=writer_env(mem)) as s:
            description = s.description()
            probe = s.cell_json(WRITER_PROBE)
        with open(os.path.join(mem, "memory.jsonl")) as f:
            saved = [json.loads(ln) for ln in f if ln.strip()]
        return {"description": description, "probe": probe,
                "saved": saved}
    return _once(_writer, make)


# ---- the tests -------------------------------------------------------------------------

@test
def code_written_from_the_description_alone_works_the_first_time():
    r = reader()
    # the line announces the dict the tool returns, and parses as a signature
    assert r["line"].startswith(
        'files.read_text_file(path: str, tail: float = ..., head: float = ...) '
        '-> {"content": str}  # Read the complete contents of a file'), r["line"]
    # the code made from it (r["content"], no type probing) printed the file
    assert r["first"] == r["text"], (r["first"], r["text"])
    # structured content is the value, as annotated, elsewhere too
    st = r["probe"]["structured"]["ok"]
    assert set(st) == {"temperature", "conditions", "humidity"}, st
    assert ('everything.get_structured_content(location: Literal["New York", "Chicago", '
            '"Los Angeles"]) -> {"temperature": float, "conditions": str, "humidity": float}'
            in r["description"]), r["description"]
    # a tool without an outputSchema has no annotation, and returns its text
    [line] = lines_of(r["description"], "everything.get_sum(")
    assert line.startswith("everything.get_sum(a: float, b: float)  # "), line
    assert r["probe"]["sum"] == {"ok": "The sum of 2 and 3 is 5."}, r["probe"]["sum"]


@test
def a_write_tool_under_a_reading_role_is_a_stand_in_that_refuses():
    r = reader()
    p = r["probe"]
    msg = err(p["write_file"], "refused", "files.write_file", "files.write_file", READ_ONLY)
    assert msg == "refused: files.write_file: " + READ_ONLY, msg
    assert not r["new_exists"], "the refused write reached the server"
    # a task-only tool under this role is refused as a write first
    err(p["research_as_write"], "refused", "everything.simulate_research_query",
        "everything.simulate-research-query", READ_ONLY)
    # the description lists each stand-in with its reason
    head, stand_ins = section(r["description"], "Not offered here (")
    assert head == NOT_OFFERED % len(stand_ins), head
    expect = ["everything.gzip_file_as_resource", "everything.simulate_research_query",
              "everything.toggle_simulated_logging", "everything.toggle_subscriber_updates",
              "files.create_directory", "files.edit_file", "files.move_file", "files.write_file"]
    assert stand_ins == ["%s  # not offered: %s" % (n, READ_ONLY) for n in expect], stand_ins
    # none of them is among the tools offered
    offered = [ln.split("(", 1)[0] for ln in r["description"].splitlines()
               if ln.startswith(("files.", "everything.")) and "(" in ln.split("  # ")[0]]
    assert "files.read_text_file" in offered and not set(expect) & set(offered), offered
    # tools.search and tools.describe show its stub, saying so
    stubs = [t for t in p["search_write"] if t.startswith("async def write_file(")]
    assert len(stubs) == 1, p["search_write"]
    stub = stubs[0]
    assert stub.startswith("async def write_file(**kwargs: Any) -> NoReturn:\n"), stub
    assert "Not offered here: %s." % READ_ONLY in stub, stub
    assert 'MCP tool "files.write_file"' in stub and 'kind "refused"' in stub, stub
    assert p["describe_write_file"] == stub, p["describe_write_file"]


@test
def a_tool_that_needs_tasks_is_offered_under_a_writing_role_and_answers():
    w = writer()
    p = w["probe"]
    # the call went as an MCP task, polled to its end: its report is the value
    assert "ok" in p["research"], p["research"]
    assert "# Research Report: x" in p["research"]["ok"], p["research"]
    # nothing stands in for it: every tool of the role is offered
    assert not lines_of(w["description"], "Not offered here ("), w["description"]
    assert lines_of(w["description"], "everything.simulate_research_query(topic: str"), \
        w["description"]
    # the writes are offered to this role
    assert lines_of(w["description"], "memory.create_entities(entities: list[dict[str, Any]])"
                    ' -> {"entities": list[dict[str, Any]]}  # '), w["description"]
    stubs = [t for t in p["search_research"] if t.startswith("async def simulate_research_query(")]
    assert len(stubs) == 1, p["search_research"]
    assert "Not offered here" not in stubs[0], stubs[0]
    assert 'MCP tool "everything.simulate-research-query"' in stubs[0], stubs[0]


@test
def a_server_that_is_down_keeps_its_namespace_and_says_unavailable():
    r = reader()
    p = r["probe"]
    assert p["down_namespace"] == {"callable": True, "callable2": True}, p["down_namespace"]
    for label, name in (("down_anything", "down.anything"), ("down_other", "down.other")):
        err(p[label], "unavailable", name, name, name, "not available")
    lines = lines_of(r["description"], "Servers not available now")
    assert lines == ["Servers not available now (none of their tools could be listed; a call of "
                     'theirs raises ToolError of kind "unavailable"): down.'], lines
    assert not lines_of(r["description"], "down."), r["description"]


@test
def a_resource_link_is_followed_to_bytes_and_to_text():
    p = reader()["probe"]
    links = [b for b in p["links"] if b.get("type") == "resource_link"]
    assert [b["uri"] for b in links] == ["demo://resource/dynamic/blob/1",
                                         "demo://resource/dynamic/text/2"], p["links"]
    blob, text = p["read"]
    assert blob["uri"] == "demo://resource/dynamic/blob/1" and blob["type"] == "bytes", blob
    assert blob["text"].startswith("Resource 1: This is a base64 blob created at "), blob
    assert text["uri"] == "demo://resource/dynamic/text/2" and text["type"] == "str", text
    assert text["text"].startswith("Resource 2: This is a plaintext resource created at "), text


@test
def resources_of_a_server_without_resources_true_are_refused():
    p = reader()["probe"]
    # a read goes to a server, not a tool: e.mcp_tool is the server's name
    msg = err(p["files_resource"], "refused", "files.read_resource", "files")
    assert msg == ("refused: files.read_resource: the policy does not let this role read the "
                   "resources of this server"), msg
    w = writer()["probe"]
    err(w["memory_resource"], "refused", "memory.read_resource", "memory",
        "the policy does not let this role read the resources of this server")


@test
def gathered_creates_all_land_at_concurrency_one():
    w = writer()
    p = w["probe"]
    # each call returned the dict its annotation announces
    assert [[e["name"] for e in m["entities"]] for m in p["made"]] == \
        [["e%d" % i] for i in range(5)], p["made"]
    names = sorted(e["name"] for e in p["graph"]["entities"])
    assert names == ["e0", "e1", "e2", "e3", "e4"], p["graph"]
    saved = sorted(e["name"] for e in w["saved"] if e.get("type") == "entity")
    assert saved == names, w["saved"]


@test
def tool_errors_name_the_python_name_and_their_kind():
    p = reader()["probe"]
    # refused by the appliance (bad arguments): the Python name, and the MCP one
    msg = err(p["sum_bad"], "refused", "everything.get_sum", "everything.get-sum")
    assert msg.startswith("refused: everything.get_sum: "), msg
    assert "get-sum" not in msg, msg
    # the tool's own error (isError), with its text
    msg = err(p["reference_bad"], "error", "everything.get_resource_reference",
              "everything.get-resource-reference")
    assert "Invalid resourceId: 0. Must be a finite positive integer." in msg, msg


@test
def a_misspelt_or_unawaited_tool_says_what_to_write():
    r = reader()
    assert r["misspelt"] == ("files has no tool 'list_dir'; did you mean files.list_directory? "
                             'print(tools.search("files.")) shows all its tools'), r["misspelt"]
    u = r["unawaited"]
    # never sent: no call, and the value is the fix, as the error
    assert u["error"] == ("files.read_text_file(...) was not awaited: "
                          "write await files.read_text_file(...)"), u
    assert u["calls"] == 0 and u["result"] is None and not u["stopped"], u


@test
def appliance_stubs_prints_the_description_and_every_stub():
    # the sessions' descriptions, then the same policies signed again (the
    # appliance refuses a serial lower than one it has accepted)
    r, w = reader(), writer()
    sig, _, _ = reader_policy()
    out = subprocess.run(gk._kit.argv(sig, "stubs"), env=dict(os.environ), capture_output=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-4000:]
    text = out.stdout.decode()
    # the description the session saw, whole
    assert "# run_python's description:\n\n" + r["description"] in text, text[:4000]
    # every stub: the offered ones with their annotations, the stand-ins saying why
    assert ('async def read_text_file(*, path: str, tail: float = ..., head: float = ...) '
            '-> {"content": str}:\n' in text), text
    assert 'Returns: {"content": str}, the tool\'s structured result.' in text, text
    assert "# files.write_file\nasync def write_file(**kwargs: Any) -> NoReturn:\n" \
        '    """Not offered here: %s.\n' % READ_ONLY in text, text
    offered = int(text.split("\nTools (", 1)[1].split(")", 1)[0])
    stand_ins = len(section(r["description"], "Not offered here (")[1])
    assert "\n# %d tool stubs:\n" % (offered + stand_ins) in text, (offered, stand_ins)
    assert text.count("\nasync def ") == offered + stand_ins, text
    assert "# not offered: files.write_file: %s\n" % READ_ONLY in text, text

    sig, mem = writer_policy()
    out = subprocess.run(gk._kit.argv(sig, "stubs"), env=writer_env(mem),
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr.decode()[-4000:]
    text = out.stdout.decode()
    assert "# run_python's description:\n\n" + w["description"] in text, text[:4000]
    assert ("# everything.simulate-research-query\n"
            "async def simulate_research_query(*, topic: str") in text, text
    assert ('async def read_graph() -> {"entities": list[dict[str, Any]], '
            '"relations": list[dict[str, Any]]}:\n') in text, text
    assert "# not offered: everything.simulate-research-query" not in text, text


if __name__ == "__main__":
    main()
