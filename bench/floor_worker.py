"""floor_worker.py RUNNER_PY: the benchmark's floor (row 5).

A persistent, unsandboxed host Python process that serves cell after cell
over one pipe (its stdin and stdout), with the runner's own code:
images/cell/runner.py is imported as a module from its path (never
modified) and its functions do the work, exactly as in a warm sandbox:

  per cell: a fresh _Channel, stdout/stderr writers and event loop, then
  {"t":"ready","v":1}; block for one `cell` line (_read_cell); start the
  output flusher; _run the code with _cell_globals; say `done`.

The only difference from runner.main() is the end: runner._finish() sends
`done` and calls os._exit(0); here the same steps are taken without the
exit, and the loop goes round for the next cell. The host side speaks
runner protocol v1 (docs/runner-protocol.md) unchanged. EOF on stdin ends
the worker (runner._read_cell exits with status 3, as the runner does).
"""

import asyncio
import importlib.util
import io
import os
import sys
import threading
import traceback


def load_runner(path):
    spec = importlib.util.spec_from_file_location("appliance_runner", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def finish(r, chan, error, value):
    """runner._finish() without its os._exit(0)."""
    try:
        result = None if error is not None else r._result_value(value)
    except BaseException as e:
        error, result = "runner: result not sendable: %s" % type(e).__name__, None
    with chan.lock:
        chan.out_flush()
        chan.send({"t": "done", "error": None if error is None else r._safe_str(error),
                   "result": result})
        chan.closed = True  # also ends this cell's output flusher thread


def serve(r):
    r._malloc_setup()
    rfd, wfd = r._private_fds()
    inbuf = bytearray()
    while True:
        chan = r._Channel(rfd, wfd)
        chan.inbuf = inbuf  # bytes already read past the last cell stay ours
        sys.stdout = r._Out(chan, "<stdout>")
        sys.stderr = r._Out(chan, "<stderr>")
        sys.stdin = io.StringIO("")
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        chan.out_flusher_start()  # as the runner does: before `ready`
        chan.send({"t": "ready", "v": r.PROTOCOL_VERSION})
        try:
            code, tools, _ = r._read_cell(chan)  # exits 3 at EOF: the harness is done
        except r._Fatal as e:
            finish(r, chan, "runner: bad cell message: %s" % e, None)
            chan.out_flusher_go()  # lets the waiting flusher see `closed` and end
        else:
            chan.out_flusher_go()
            try:
                error, value = r._run(code, r._cell_globals(chan, tools), loop)
            except BaseException as e:
                error, value = "runner: internal error: %s" % type(e).__name__, None
            finish(r, chan, error, value)
        inbuf = chan.inbuf
        asyncio.set_event_loop(None)
        loop.close()
        # A runner process has one output flusher; it ends within
        # OUT_FLUSH_S of `done`. Wait for it (before the next `ready`, so
        # outside the host's timing) so that no more than one ever runs.
        for t in threading.enumerate():
            if t.name == "appliance-out":
                t.join()


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: floor_worker.py RUNNER_PY\n")
        return 2
    diag = os.dup(2)  # runner._private_fds points fd 2 at /dev/null
    try:
        serve(load_runner(sys.argv[1]))
    except BaseException:
        os.write(diag, ("floor_worker: " + traceback.format_exc()).encode())
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
