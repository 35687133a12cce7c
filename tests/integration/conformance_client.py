#!/usr/bin/python3
"""conformance_client.py: the appliance as the client of the MCP conformance
suite's client scenarios (tests/integration/test_conformance_client.py).

The suite runs `--command` through a shell with the URL of its scenario
server appended as the last argument, and puts the scenario's name in
MCP_CONFORMANCE_SCENARIO, the spec revision it serves in
MCP_CONFORMANCE_PROTOCOL_VERSION and, for some scenarios, what the client is
to do in MCP_CONFORMANCE_CONTEXT (JSON: {"name": ..., "toolCalls": [...]}).

This writes a signed policy naming that URL as server `s`, every tool
allowed (`s.*` as a write, role `r` may write), starts `appliance run` on
stdio (gatewaykit.Session) and runs one cell that does what the scenario
asks: it reads the tool list from `tools.search("")` and calls the tools the
scenario wants. What the cell printed goes to stdout, the appliance's log
tail to stderr; the last line on stdout is "conformance_client: ok" when the
cell ran to its end.

    conformance_client.py URL
"""

import atexit
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gatewaykit as gk  # noqa: E402

# The cell's prelude: the tools it sees, by MCP name ("s.add_numbers"), each
# with its Python function, read from the stubs tools.search("") returns
# (each says 'MCP tool "s.NAME", called as: await ns.fn(...)').
PRELUDE = r'''
import json, re
def _seen():
    out = {}
    for stub in tools.search(""):
        m = re.search(r'MCP tool "(.+?)", called as: await (\w+)\.(\w+)\(', stub)
        if m:
            out[m.group(1)] = getattr(globals()[m.group(2)], m.group(3))
    return out
SEEN = _seen()
print("tools:", sorted(SEEN))
async def call(name, args):
    try:
        r = await SEEN[name](**args)
        print("call", name, "->", json.dumps(r)[:300])
    except (ToolError, KeyError) as e:
        print("call", name, "failed:", type(e).__name__, str(e)[:300])
'''


class Session(gk.Session):
    def log(self):
        # the stderr tail, also once the appliance has exited (its pump has
        # then queued a None)
        return b"".join(x for x in self.stderr[-40:] if x).decode("utf-8", "replace")


def calls_cell(calls):
    """A cell that lists the tools and makes calls, [(MCP name, arguments)],
    one after the other."""
    return PRELUDE + "".join("await call(%r, json.loads(%r))\n" % ("s." + name, json.dumps(args))
                             for name, args in calls)


# ---- what each scenario asks ---------------------------------------------------------

def just_list(ctx):
    """initialize, request-metadata, json-schema-ref-no-deref: connect and
    list the tools."""
    return []


def tools_call(ctx):
    return [("add_numbers", {"a": 2, "b": 3})]


def sse_retry(ctx):
    return [("test_reconnection", {})]


def standard_headers(ctx):
    """Every tool the server lists (Mcp-Name of each, a hyphen in one)."""
    return [("test_headers", {}), ("my-hyphenated-tool", {})]


def context_calls(ctx):
    """http-custom-headers: the calls MCP_CONFORMANCE_CONTEXT names. An
    argument given as null is left out, as a caller with no value for it
    would: the suite's test_custom_headers_null passes verbose: null against
    its own schema's "type": "boolean", which the appliance's validation
    refuses before sending (and its check holds null and not provided
    alike)."""
    return [(c["name"], {k: v for k, v in (c.get("arguments") or {}).items() if v is not None})
            for c in ctx.get("toolCalls", [])]


# http-invalid-tool-headers: each tool the server lists, with arguments that
# fit its schema. A client is to drop the ones whose x-mcp-header is invalid;
# the cell calls whatever the appliance offers, so each one it did not drop
# shows as called.
INVALID_TOOL_ARGS = {
    "valid_tool": {"region": "us-west1"},
    "invalid_empty_header": {"value": "v"},
    "invalid_object_header": {"data": {"k": "v"}},
    "invalid_array_header": {"items": ["a"]},
    "invalid_null_header": {"nil": None},
    "invalid_number_header": {"score": 1.5},
    "invalid_duplicate_same_case": {"field1": "a", "field2": "b"},
    "invalid_duplicate_diff_case": {"field1": "a", "field2": "b"},
    "invalid_space_in_name": {"value": "v"},
    "invalid_colon_in_name": {"value": "v"},
    "invalid_non_ascii_name": {"value": "v"},
    "invalid_control_char_name": {"value": "v"},
}


def invalid_tool_headers(ctx):
    return list(INVALID_TOOL_ARGS.items())


def mrtr(ctx):
    """sep-2322-client-request-state: its four tools. The first two answer
    input_required (the appliance answers no input requests: those calls
    fail); the other two check that a call carries no other call's state
    and that a result without resultType is complete."""
    return [("test_mrtr_echo_state", {}), ("test_mrtr_no_state", {}),
            ("test_mrtr_unrelated", {}), ("test_mrtr_no_result_type", {})]


SCENARIOS = {
    "initialize": just_list,
    "request-metadata": just_list,
    "json-schema-ref-no-deref": just_list,
    "tools_call": tools_call,
    "sse-retry": sse_retry,
    "http-standard-headers": standard_headers,
    "http-custom-headers": context_calls,
    "http-invalid-tool-headers": invalid_tool_headers,
    "sep-2322-client-request-state": mrtr,
}


def json_schema_preservation(ctx):
    """json-schema-2020-12-preservation asks the client to echo the focal
    tool's inputSchema back through json_schema_echo. The cell is given
    Python stubs, not JSON schemas, so it has no schema to echo: it lists
    the tools and prints the focal tool's stub."""
    return PRELUDE + "print(tools.describe('s.json_schema_2020_12_tool'))\n"


CELLS = {"json-schema-2020-12-preservation": json_schema_preservation}


def main():
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    ctx = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario in CELLS:
        src = CELLS[scenario](ctx)
    elif scenario in SCENARIOS:
        src = calls_cell(SCENARIOS[scenario](ctx))
    else:
        print("conformance_client: no such scenario here: %r" % scenario, file=sys.stderr)
        return 2
    atexit.register(gk._kit.cleanup)
    sig = gk._kit.policy({"deadline_s": 30}, servers={"s": {"url": url}},
                         tools={"s.*": {"access": "write"}},
                         roles={"r": {"tools": ["s.*"], "write": True}},
                         clients={"default_role": "r"})
    with Session(sig) as s:
        try:
            sys.stdout.write(s.cell(src))
        finally:
            sys.stderr.write(s.log())
    print("conformance_client: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
