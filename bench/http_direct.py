"""http_direct.py URL N [TEXT]: the host-side baseline of row 12.

Speaks the legacy Streamable HTTP transport (2025-11-25) to the MCP server
at URL (tests/integration/mcphttp.py in the benchmark) with no appliance:
POSTs initialize, keeps the Mcp-Session-Id it hands out, POSTs
notifications/initialized, and then sends N sequential tools/call requests
for `echo {text}`, each POSTed on the same keep-alive connection
(http.client) with the Mcp-Session-Id and MCP-Protocol-Version headers and
read to its end before the next. Times the loop with time.perf_counter,
exactly as the cell of row 12 times its loop of `await web.echo(text=...)`,
DELETEs the session and prints one JSON object: {"n", "total_s",
"per_call_us"}, as bench/direct_client.py does for row 6.
"""

import http.client
import json
import sys
import time
import urllib.parse

PROTOCOL = "2025-11-25"


def main():
    if len(sys.argv) not in (3, 4):
        sys.stderr.write("usage: http_direct.py URL N [TEXT]\n")
        return 2
    url, n = urllib.parse.urlsplit(sys.argv[1]), int(sys.argv[2])
    text = sys.argv[3] if len(sys.argv) == 4 else "x"
    if url.scheme != "http":
        sys.stderr.write("http_direct: only http:// URLs\n")
        return 2
    path = url.path or "/"
    conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=60)
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream"}

    def post(obj):
        """POST one message; the answer's JSON-RPC message (JSON or SSE), or
        None for 202 Accepted. The body is always read to its end, so the
        connection is ready for the next request."""
        conn.request("POST", path, json.dumps(obj, separators=(",", ":")), headers)
        r = conn.getresponse()
        body = r.read()
        if r.status == 202:
            return r, None
        if r.status != 200:
            raise SystemExit("http_direct: %s: HTTP %d %r" % (obj.get("method"), r.status,
                                                              body[:300]))
        if (r.getheader("Content-Type") or "").startswith("text/event-stream"):
            for line in body.splitlines():
                if line.startswith(b"data:"):
                    msg = json.loads(line[5:])
                    if msg.get("id") == obj.get("id"):
                        return r, msg
            raise SystemExit("http_direct: no answer on the stream of %s" % obj.get("method"))
        return r, json.loads(body)

    def answer(msg):
        if "error" in msg:
            raise SystemExit("http_direct: error %r" % (msg["error"],))
        return msg["result"]

    r, msg = post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                              "clientInfo": {"name": "bench-http-direct", "version": "1"}}})
    init = answer(msg)
    sid = r.getheader("Mcp-Session-Id")
    if sid:
        headers["Mcp-Session-Id"] = sid
    headers["MCP-Protocol-Version"] = init.get("protocolVersion") or PROTOCOL
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        _, msg = post({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"text": text}}})
        res = answer(msg)
        if res.get("isError"):
            raise SystemExit("http_direct: echo failed: %r" % (res,))
    total = time.perf_counter() - t0
    if sid:
        try:
            conn.request("DELETE", path, headers=headers)
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
    conn.close()
    print(json.dumps({"n": n, "total_s": total, "per_call_us": total / n * 1e6}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
