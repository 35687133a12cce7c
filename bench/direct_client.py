"""direct_client.py SERVER N [TEXT]: the host-side baseline of row 6.

Starts the MCP server SERVER (build/toy-server) on pipes, speaks
newline-delimited JSON-RPC 2.0 to it (initialize, notifications/initialized)
and then sends N sequential tools/call requests for `echo {text}`, each
waiting for its answer. Times the loop with time.perf_counter, exactly as
the cell of row 6 times its loop of `await toy.echo(text=...)`, and prints
one JSON object: {"n", "total_s", "per_call_us"}.
"""

import json
import subprocess
import sys
import time


def main():
    if len(sys.argv) not in (3, 4):
        sys.stderr.write("usage: direct_client.py SERVER N [TEXT]\n")
        return 2
    server, n = sys.argv[1], int(sys.argv[2])
    text = sys.argv[3] if len(sys.argv) == 4 else "x"
    p = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    w, rd = p.stdin, p.stdout

    def send(obj):
        w.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")
        w.flush()

    def answer(want):
        while True:
            line = rd.readline()
            if not line:
                raise SystemExit("direct_client: the server closed its output")
            msg = json.loads(line)
            if msg.get("id") == want:
                if "error" in msg:
                    raise SystemExit("direct_client: error %r" % (msg["error"],))
                return msg["result"]

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                     "clientInfo": {"name": "bench-direct", "version": "1"}}})
    answer(0)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": text}}})
        res = answer(i)
        if res.get("isError"):
            raise SystemExit("direct_client: echo failed: %r" % (res,))
    total = time.perf_counter() - t0
    w.close()
    p.wait(timeout=10)
    print(json.dumps({"n": n, "total_s": total, "per_call_us": total / n * 1e6}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
