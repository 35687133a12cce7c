"""test_fairness.py: no cell, client or upstream can starve the rest.

Each test reproduces an attack on the one event loop and asserts the outcome
that matters, never a wall-clock bound (bench row 10 measures the cost):

- a cell that floods its protocol descriptor with lines that count toward
  no other cap (empty `out` lines, calls for tools that do not exist) is
  stopped as a protocol violation with its reason, while a cell beside it
  makes all its calls and the client is answered;
- a cell that gathers calls whose answers are far over the result cap gets
  each refused, while the shared upstream stays up (the same process), is
  never sent more calls than its slots, and another cell's calls to it all
  succeed;
- a client line over the message cap gets a JSON-RPC error carrying its id,
  and the session, the run in flight included, goes on.

Runs as root; needs build/appliance, build/image and build/toy-server.
"""

import re

from harness import main, test
from gatewaykit import Session, toy_policy

# Code that writes lines straight to the runner's protocol descriptor (the
# pipe to the host among its descriptors), without end.
FLOOD = r"""
import os, stat
fds = [fd for fd in range(3, 64) if _is_fifo(fd)]
template = %r
per = 4096 // (len(template) + 8)  # a write this small is never split
i = 1
while True:
    burst = b"".join(template.replace(b"ID", str(i + k).encode()) for k in range(per))
    i += per
    for fd in fds:
        try:
            os.write(fd, burst)
        except OSError:
            pass
"""

FIFO = r"""
import os, stat
def _is_fifo(fd):
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False
"""

VICTIM = """
ok = 0
for i in range(100):
    r = await toy.echo(text="v%d" % i)
    ok += r == "v%d" % i
print(ok)
"""


def flood(line):
    return FIFO + FLOOD % line


def stopped_for_lines(r, or_not_reading=False):
    """Stopped as a protocol violation for its line budget (or, for calls
    whose refusals it never reads, for the full queue of results)."""
    assert r["stopped"] and r["reason"] == "protocol", r
    why = r"more than \d+ protocol lines in one run"
    if or_not_reading:
        why += r"|the runner stopped reading its results"
    assert re.search(why, r["error"]), r


def flood_beside(line, or_not_reading=False):
    sig = toy_policy(limits={"cells": 4, "deadline_s": 60})
    with Session(sig) as s:
        flooder = s.start_cell(flood(line))
        victim = s.start_cell(VICTIM)
        # the client is served meanwhile
        pong = s.request("ping", timeout=60)
        assert pong.get("result") == {}, pong
        v = s.result(victim)
        f = s.result(flooder)
        assert v["error"] is None and not v["stopped"], v
        assert v["stdout"] == "100\n", v
        assert v["calls"] == 100, v
        stopped_for_lines(f, or_not_reading)
        # and the appliance goes on serving new cells
        assert s.cell("print('after')") == "after\n"


@test
def a_cell_flooding_empty_output_lines_is_stopped_and_starves_no_one():
    flood_beside(b'{"t":"out","data":""}\n')


@test
def a_cell_flooding_calls_for_unknown_tools_is_stopped_and_starves_no_one():
    flood_beside(b'{"t":"call","id":ID,"tool":"nope.nothing","args":{}}\n', or_not_reading=True)


HUGE = """
import asyncio
res = await asyncio.gather(*(toy.bytes(n=16 * 1024 * 1024) for _ in range(%d)),
                           return_exceptions=True)
refused = [r for r in res if isinstance(r, ToolError) and "over the cap" in str(r)]
print(len(refused), len(res))
"""

STEADY = """
ok = 0
for i in range(100):
    r = await toy.add(a=i, b=1)
    ok += r == {"sum": i + 1}
print(ok)
"""


@test
def huge_answers_beside_small_calls_keep_the_shared_upstream_up():
    # One cell gathers 200 answers of 16 MiB, 16 in flight (the defaults
    # of limits.concurrency and servers.toy.concurrency), each far over the
    # result cap; another cell makes 100 small calls to the same server. The
    # toy queues what it has answered and gives up past 16 of the largest
    # answers (tests/toy/README.md): an appliance that sends it more calls
    # than its slots while it still writes an answer nobody reads, or that
    # reads slower than it writes, has it exit, and the small calls fail.
    n = 200
    sig = toy_policy(limits={"cells": 4, "deadline_s": 300, "max_calls": n + 10})
    with Session(sig) as s:
        s.cell("await toy.peak()")
        hog = s.start_cell(HUGE % n)
        steady = s.start_cell(STEADY)
        st = s.result(steady, timeout=300)
        assert st["error"] is None and st["stdout"] == "100\n", st
        h = s.result(hog, timeout=300)
        assert h["error"] is None and h["stdout"] == "%d %d\n" % (n, n), h
        # the server never went down: no restart, no unavailable call
        log = s.log()
        assert "upstream toy: down" not in log and "upstream_unavailable" not in log, log
        peak = s.cell_json("print(__import__('json').dumps(await toy.peak()))")
        # the most calls the server held at once (this one came alone): its
        # slots, the calls whose answers were being dropped included
        assert peak["held"] <= 16, peak


@test
def a_client_line_over_the_cap_gets_its_error_and_the_session_goes_on():
    with Session(toy_policy()) as s:
        slow = s.start_cell("import time\ntime.sleep(1)\nprint('slept')")
        head = b'{"jsonrpc":"2.0","id":4242,"method":"tools/call","params":{"name":' \
               b'"run_python","arguments":{"code":"'
        big = head + b"x" * (4 * 1024 * 1024 + 4096) + b'"}}}\n'
        s.proc.stdin.write(big)
        s.proc.stdin.flush()
        err = s.wait(4242)
        assert err["error"]["code"] == -32600, err
        assert "longer than the cap" in err["error"]["message"], err
        r = s.result(slow)
        assert r["stdout"] == "slept\n" and r["error"] is None, r
        assert s.request("ping")["result"] == {}
        assert "dropped a message longer than the cap" in s.log()


if __name__ == "__main__":
    main()
