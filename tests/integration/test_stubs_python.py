"""test_stubs_python.py: every stub pkg/stubs makes is inert Python.

build/tests/test_stubs (tests/unit/test_stubs.c) writes the stubs of a big
varied sample (hostile names and descriptions, random schemas with $ref
cycles, enums, unions, defaults) when STUBS_SAMPLE_OUT names a file. Each
stub is parsed and compiled by this interpreter (Debian's /usr/bin/python3,
the cell's Python version), and checked:

- it is exactly one `async def` whose body is only its docstring, and
  nothing in it can run: no call, import, attribute or name other than the
  type names a stub uses;
- its signature is keyword-only, follows the schema (identifier properties,
  required ones first and without a default, optional ones with one) and
  ends in **kwargs exactly when the schema leaves names open;
- its docstring, as Python reads it back, holds the MCP name and the
  description's text unchanged (escaping is faithful, not lossy);
- defining it (annotations and defaults evaluated, no builtins but types)
  works, and inspect.signature agrees with the AST.
"""

import ast
import inspect
import json
import keyword
import os
import re
import subprocess
import sys
import tempfile
import typing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, skip, test  # noqa: E402

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(TOP, "build", "tests", "test_stubs")
PROPS_MAX = 256          # APPL_STUBS_PROPS_MAX
NAME_MAX = 64            # APPL_RUNNER_PY_NAME_MAX
TEXT_MAX = 16 * 1024     # APPL_STUBS_TEXT_MAX
TYPE_NAMES = {"Any", "Literal", "Never", "NoReturn", "int", "str", "float", "bool", "list",
              "dict"}

_SAMPLE = []


def sample():
    """The records, made once per run."""
    if _SAMPLE:
        return _SAMPLE
    if not os.access(BIN, os.X_OK):
        skip("%s is not built (make build/tests/test_stubs)" % BIN)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "sample.jsonl")
        r = subprocess.run([BIN], env={"STUBS_SAMPLE_OUT": out, "PATH": "/usr/bin"},
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        with open(out, encoding="utf-8") as f:
            _SAMPLE.extend(json.loads(line) for line in f)
    assert len(_SAMPLE) >= 500, len(_SAMPLE)
    return _SAMPLE


def is_param(name):
    return (name.isascii() and name.isidentifier() and not keyword.iskeyword(name)
            and len(name) <= NAME_MAX)


def resolve(root, s):
    """Local $ref chains, as pkg/stubs follows them (None when it cannot)."""
    for _ in range(17):
        if not isinstance(s, dict) or not isinstance(s.get("$ref"), str):
            return s
        ref = s["$ref"]
        if not (ref == "#" or ref.startswith("#/")):
            return None
        cur = root
        for seg in ref[2:].split("/") if ref != "#" else []:
            seg = seg.replace("~1", "/").replace("~0", "~")
            if isinstance(cur, dict) and seg in cur:
                cur = cur[seg]
            elif isinstance(cur, list) and seg.isdigit() and int(seg) < len(cur):
                cur = cur[int(seg)]
            else:
                return None
        s = cur
    return None


def expected_params(schema):
    """(ordered [(name, required)], open): what the signature must follow."""
    obj = resolve(schema, schema)
    if not isinstance(obj, dict):
        return [], True
    props = obj.get("properties")
    props = props if isinstance(props, dict) else {}
    req = obj.get("required") if isinstance(obj.get("required"), list) else []
    req = [r for r in req[:PROPS_MAX] if isinstance(r, str)]
    names = list(props)[:PROPS_MAX]
    order = [(n, True) for n in names if n in req]
    order += [(n, True) for i, n in enumerate(req) if n not in props and n not in req[:i]]
    order += [(n, False) for n in names if n not in req]
    ap = obj.get("additionalProperties")
    if len(props) > PROPS_MAX or "patternProperties" in obj:
        open_ = True
    elif "properties" not in obj:
        open_ = ap is not False
    else:
        open_ = ap is True or isinstance(ap, dict)
    return order, open_


def subsequence(small, big):
    it = iter(big)
    return all(x in it for x in small)


def check_inert(rec, tree):
    assert len(tree.body) == 1, "%d statements" % len(tree.body)
    fn = tree.body[0]
    assert isinstance(fn, ast.AsyncFunctionDef) and fn.name == rec["fn"], ast.dump(fn)[:200]
    assert not fn.decorator_list
    if rec.get("why_not") is not None:
        assert ast.unparse(fn.returns) == "NoReturn", ast.dump(fn)[:200]
    elif rec["output"] is None:
        assert fn.returns is None and rec["returns"] == ""
    else:
        # the annotation is the one line's too, and only data: a dict of
        # quoted keys or a type
        assert rec["returns"] and ast.unparse(fn.returns) == ast.unparse(
            ast.parse(rec["returns"], mode="eval").body), (rec["returns"], rec["text"][:300])
        assert rec["signature"].endswith(" -> " + rec["returns"]), rec["signature"]
        for node in ast.walk(fn.returns):
            if isinstance(node, ast.Dict):
                assert all(isinstance(k, ast.Constant) and type(k.value) is str
                           for k in node.keys), ast.dump(node)[:200]
                obj = resolve(rec["output"], rec["output"])
                assert [k.value for k in node.keys] == list(obj["properties"]), rec["returns"]
    assert len(fn.body) == 1 and isinstance(fn.body[0], ast.Expr)
    assert isinstance(fn.body[0].value, ast.Constant) and type(fn.body[0].value.value) is str
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.Call, ast.Import, ast.ImportFrom, ast.Attribute,
                                     ast.Lambda, ast.NamedExpr, ast.Await)), ast.dump(node)
        if isinstance(node, ast.Name):
            assert node.id in TYPE_NAMES, "name %r in %s" % (node.id, rec["mcp"])
    return fn


def check_signature(rec, fn):
    a = fn.args
    if rec.get("why_not") is not None:
        # a stand-in: a name and its reason, nothing of the tool's schema
        assert not a.kwonlyargs and a.kwarg.arg == "kwargs", ast.dump(fn)[:200]
        return
    assert not a.posonlyargs and not a.args and a.vararg is None
    order, open_ = expected_params(rec["schema"])
    named = [n for n, _ in order if is_param(n)]
    got = [x.arg for x in a.kwonlyargs]
    assert subsequence(got, named), (got, named)
    required = dict(order)
    defaults = [d is not None for d in a.kw_defaults]
    assert defaults == sorted(defaults), "required after optional: %s" % got
    for name, has_default in zip(got, defaults):
        assert has_default == (not required[name]), (name, rec["mcp"])
    want_kwargs = open_ or len(got) < len(order)
    assert (a.kwarg is not None) == want_kwargs, (rec["mcp"], got, order, open_)
    if a.kwarg is not None:
        assert a.kwarg.arg.startswith("kwargs") and a.kwarg.arg not in got


def check_define(rec, fn):
    ns = {"__builtins__": {}, "Any": typing.Any, "Literal": typing.Literal,
          "Never": typing.Never, "NoReturn": typing.NoReturn, "int": int, "str": str, "float": float, "bool": bool,
          "list": list, "dict": dict}
    exec(compile(rec["text"], "<stub>", "exec"), ns)
    sig = inspect.signature(ns[rec["fn"]])
    assert [p.name for p in sig.parameters.values()] == (
        [x.arg for x in fn.args.kwonlyargs] + ([fn.args.kwarg.arg] if fn.args.kwarg else []))
    assert inspect.iscoroutinefunction(ns[rec["fn"]])


def check_docstring(rec, fn):
    doc = ast.get_docstring(fn, clean=False)
    assert doc is not None
    if rec.get("why_not") is not None:
        assert doc.startswith("Not offered here: not \"allowed\""), doc[:200]
        assert "\u202e" not in rec["text"] and "\\u202e" in rec["text"], rec["text"]
        assert doc.count("\n") == 3, doc  # the reason is one line
        assert 'raises ToolError (kind "refused")' in doc
        return
    if len(rec["mcp"]) <= 60:
        assert 'MCP tool "%s"' % rec["mcp"] in doc, (rec["mcp"], doc[:300])
    assert "called as: await %s.%s(...)" % (rec["ns"], rec["fn"]) in doc
    desc = rec["description"]
    if desc is None:
        return
    lines = [ln.strip(" \t") for ln in re.split(r"\r\n|\r|\n", desc.strip(" \t\r\n"))]
    first = lines[0] if lines else ""
    if len(first) <= 30:
        assert doc.startswith(first), (first, doc[:200])
    if len(desc) < 600:
        for ln in lines:
            assert ln in doc, (ln, doc)


def check_one_liners(rec, fn):
    summary, sig = rec["summary"], rec["signature"]
    assert "\n" not in summary and len(summary.encode()) <= 160
    assert all(c >= " " and c != "\x7f" for c in summary + sig)
    if rec["returns"]:
        sig = sig[:-len(" -> " + rec["returns"])]
    assert sig.startswith("%s.%s(" % (rec["ns"], rec["fn"])) and sig.endswith(")")
    if rec.get("why_not") is not None:
        assert sig.endswith("(...)") and summary.startswith("not offered: "), (sig, summary)
        return
    inside = sig[len(rec["ns"]) + len(rec["fn"]) + 2:-1]
    if inside.endswith("...") and not inside.endswith("= ..."):
        return  # cut to the line cap
    src = "def f(%s%s): pass" % ("*, " if inside and not inside.startswith("**") else "",
                                 inside)
    listed = ast.parse(src).body[0].args
    assert [x.arg for x in listed.kwonlyargs] == [x.arg for x in fn.args.kwonlyargs]


@test
def every_stub_parses_and_compiles():
    for rec in sample():
        assert len(rec["text"].encode()) <= TEXT_MAX
        try:
            tree = ast.parse(rec["text"])
            compile(rec["text"], "<stub>", "exec", dont_inherit=True)
        except SyntaxError as e:
            raise AssertionError("%s: %s\n%s" % (rec["mcp"], e, rec["text"])) from None
        check_inert(rec, tree)


@test
def signatures_follow_the_schemas():
    for rec in sample():
        fn = ast.parse(rec["text"]).body[0]
        try:
            check_signature(rec, fn)
            check_define(rec, fn)
            check_one_liners(rec, fn)
        except AssertionError as e:
            raise AssertionError("%s: %s\n%s\nschema %s" % (
                rec["mcp"], e, rec["text"][:3000], json.dumps(rec["schema"])[:2000])) from None


@test
def docstrings_carry_the_text_faithfully():
    for rec in sample():
        fn = ast.parse(rec["text"]).body[0]
        try:
            check_docstring(rec, fn)
        except AssertionError as e:
            raise AssertionError("%s: %s\n%s" % (rec["mcp"], e, rec["text"][:3000])) from None


@test
def names_are_unique_and_sorted():
    recs = sample()
    keys = [(r["ns"], r["fn"]) for r in recs]
    assert keys == sorted(keys, key=lambda k: (k[0].encode(), k[1].encode()))
    assert len(set(keys)) == len(keys)
    assert len({r["mcp"] for r in recs}) == len(recs)
    assert len({r["ns"] for r in recs}) == 3, {r["ns"] for r in recs}
    assert all(is_param(r["fn"]) and not r["fn"].startswith("__") for r in recs)


if __name__ == "__main__":
    main()
