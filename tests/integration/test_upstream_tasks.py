"""test_upstream_tasks.py: a cell's call of an upstream tool that runs only
as an MCP task (execution.taskSupport "required"): the appliance asks for a
task, polls it at the server's interval, and hands the cell its result,
over stdio and over Streamable HTTP; a call given up (the cell's deadline,
the call's timeout) cancels the task at the server (tasks/cancel).

The server is tests/integration/task_server.mjs, on the v1 TypeScript
SDK's task support, which logs each status its task store is told."""
import os
import re
import time

import gatewaykit as gk
from harness import main, test
from nodekit import NodeServer, free_port

TASK_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "task_server.mjs")
CALL = """
try:
    print(await %s.slow(ms=%d, text=%r))
except ToolError as e:
    print("refused:", e.kind, e)
"""


def policy(servers, limits=None):
    tools = {}
    for name in servers:
        tools["%s.*" % name] = {"access": "read"}
    return gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})), servers=servers,
                          tools=tools, roles={"r": {"tools": list(tools), "write": False}},
                          clients={"default_role": "r"})


def stdio_server():
    return {"command": [gk.node(), gk.need(TASK_SERVER)]}


def http_server():
    port = free_port()
    return port, NodeServer([gk.node(), gk.need(TASK_SERVER), "--http", str(port)],
                            "listening %d" % port)


def wait_log(s, pattern, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = re.search(pattern, s.log())
        if m:
            return m
        time.sleep(0.2)
    raise AssertionError("no %r in the log:\n%s" % (pattern, s.log()))


@test
def a_task_only_tool_is_offered_and_its_result_comes_back_over_stdio():
    with gk.Session(policy({"ts": stdio_server()})) as s:
        assert "ts.slow(" in s.description(), s.description()
        out = s.cell(CALL % ("ts", 1500, "over stdio"))
        assert out.strip() == "slow: over stdio after 1500 ms", out
        # the server made one task, and it ran to its result
        made = wait_log(s, r"task-server: task made ([0-9a-f]{32})").group(1)
        assert "task-server: task result %s" % made in s.log(), s.log()


@test
def a_task_only_tool_over_http_returns_its_result_and_a_timeout_cancels_the_task():
    port, srv = http_server()
    try:
        sig = policy({"th": {"url": "http://127.0.0.1:%d/mcp" % port}}, {"call_timeout_s": 3})
        with gk.Session(sig) as s:
            out = s.cell(CALL % ("th", 800, "over http"))
            assert out.strip() == "slow: over http after 800 ms", out
            assert srv.count("task made") == 1 and srv.count("task result") == 1, srv.err
            # polled at the server's interval, not once: tasks/get came more than once
            out = s.cell(CALL % ("th", 60000, "too slow"))
            assert out.startswith("refused: timeout"), out
            srv.wait("cancelled")
            assert srv.count("task result") == 1, srv.err
            assert "cancelled the task of a call of slow" in s.log(), s.log()
    finally:
        srv.stop()


@test
def a_cell_deadline_cancels_the_upstream_task():
    sig = policy({"ts": stdio_server()}, {"deadline_s": 6, "call_timeout_s": 60})
    with gk.Session(sig) as s:
        r = s.result(s.start_cell(CALL % ("ts", 60000, "past the deadline")))
        assert r["reason"] == "deadline" and r["calls"] == 1, r
        made = wait_log(s, r"task-server: task made ([0-9a-f]{32})").group(1)
        wait_log(s, "task-server: task status %s cancelled" % made)
        assert "task-server: task result" not in s.log(), s.log()


if __name__ == "__main__":
    main()
