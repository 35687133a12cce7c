"""mcphttp.py: a test fixture, an upstream MCP server over HTTP that can misbehave on purpose.

It speaks the legacy Streamable HTTP transport (MCP revision 2025-11-25): `initialize`
hands out a session id in the Mcp-Session-Id header, every later POST must carry it,
a GET opens a stream the server can send notifications on, and DELETE ends the session.
A token (Authorization: Bearer) and HTTPS can be switched on. Besides a well-behaved
`echo`, its tools misbehave: an answer of 20 MiB, a stream that never ends, one that
sends a byte a second, a redirect, the wrong content type, cut JSON, an HTTP 500, and
`grow`, which adds a tool and says so on the GET stream.

Tests start it as a thread in their own process (McpHttp(...).start(), then read .log),
or as a process of its own: `mcphttp.py PORT [TOKEN]` prints `listening PORT` and serves
until killed. Standard library only.
"""

import http.server
import json
import queue
import secrets
import select
import socket
import ssl
import sys
import threading
import time

PROTOCOL = "2025-11-25"
# Errors that only mean the peer went away (or a TLS handshake failed): never a traceback.
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, ssl.SSLError,
        TimeoutError, OSError)
HUGE = 20 * 1024 * 1024


def _tool(name, description, props=None):
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": props or {}},
            "annotations": {"readOnlyHint": True}}


TOOLS = [
    _tool("echo", "Answers with its text.", {"text": {"type": "string"}}),
    _tool("sleep", "Answers \"slept\" over SSE after ms milliseconds.", {"ms": {"type": "integer"}}),
    _tool("huge", "Answers with 20 MiB of x."),
    _tool("endless", "Sends log notifications over SSE for ever, never the answer."),
    _tool("trickle", "Sends its answer over SSE one byte a second."),
    _tool("redirect", "Answers HTTP 302."),
    _tool("wrongtype", "Answers text/html."),
    _tool("badjson", "Answers JSON cut short."),
    _tool("html404", "Answers HTTP 500 with a text/plain body."),
    _tool("grow", "Adds the tool extra and sends tools/list_changed on the GET streams."),
]
EXTRA = _tool("extra", "Answers \"extra\" (listed once grow has been called).")


def _event(obj):
    return b"event: message\ndata: " + json.dumps(obj).encode() + b"\n\n"


def _text(rid, text):
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}


def _error(rid, code, message):
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        err = sys.exc_info()[1]
        if isinstance(err, GONE) or self.fixture._stopping:
            return
        super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mcphttp/1"
    # An answer's head and body go in two writes: with Nagle on, the body
    # would wait for the client's delayed ACK of the head (40 ms a call).
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # no access log on stderr
        pass

    # ---- connection ------------------------------------------------------------

    def setup(self):
        self.fx = self.server.fixture
        if self.fx.ctx is not None:
            self.request.settimeout(10)
            self.request = self.fx.ctx.wrap_socket(self.request, server_side=True)
            self.request.settimeout(None)
        super().setup()
        with self.fx._lock:
            self.fx._conns.add(self)

    def finish(self):
        with self.fx._lock:
            self.fx._conns.discard(self)
        try:
            super().finish()
        except GONE:
            pass
        if self.fx.ctx is not None:  # the plain socket was detached by wrap_socket
            try:
                self.connection.close()
            except OSError:
                pass

    def _gone(self):
        """Whether the client has hung up (or the fixture is stopping)."""
        if self.fx._stopping:
            return True
        sock = self.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not readable:
            return False
        if isinstance(sock, ssl.SSLSocket):
            try:
                sock.setblocking(False)
                try:
                    data = sock.recv(1)
                finally:
                    sock.setblocking(True)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return False
            except (OSError, ValueError):
                return True
            return data == b""
        try:
            data = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            return True
        return data == b""

    def _read_body(self):
        """The request body (Content-Length or chunked), so keep-alive stays in step."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n > 0 else b""

    # ---- answers ---------------------------------------------------------------

    def _send(self, status, body=b"", ctype=None, headers=()):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _json(self, obj, status=200, headers=()):
        self._send(status, json.dumps(obj).encode(), "application/json", headers)

    def _sse_start(self):
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.flush()

    def _write(self, data):
        """Write and flush; False when the client has gone."""
        try:
            self.wfile.write(data)
            self.wfile.flush()
            return True
        except GONE:
            self.close_connection = True
            return False

    # ---- checks ----------------------------------------------------------------

    def _authorized(self):
        if self.fx.token is None:
            return True
        if self.headers.get("Authorization") == "Bearer " + self.fx.token:
            return True
        self.fx._log("unauthorized")
        self._send(401, b"unauthorized\n", "text/plain",
                   [("WWW-Authenticate", 'Bearer realm="mcphttp"')])
        return False

    def _path_ok(self):
        if self.path.split("?", 1)[0] == "/mcp":
            return True
        self.fx._log("404 " + self.path[:80])
        self._send(404, b"not found\n", "text/plain")
        return False

    def _session(self, rid=None):
        """The request's known session id, or None after answering 400 or 404."""
        sid = self.headers.get("Mcp-Session-Id")
        if sid is None:
            self._json(_error(rid, -32000, "Bad Request: Mcp-Session-Id header is required"), 400)
            return None
        with self.fx._lock:
            known = sid in self.fx._sessions
        if not known:
            self.fx._log("404")
            self._json(_error(rid, -32001, "Session not found"), 404)
            return None
        return sid

    def _session_of_request(self):
        """A GET's or DELETE's session, the request read and checked; None
        when it was refused (the refusal sent)."""
        self._read_body()
        if not self._authorized() or not self._path_ok():
            return None
        return self._session()

    # ---- methods ---------------------------------------------------------------

    def do_GET(self):
        sid = self._session_of_request()
        if sid is None:
            return
        if "text/event-stream" not in (self.headers.get("Accept") or ""):
            self._send(406, b"Accept must list text/event-stream\n", "text/plain")
            return
        self.fx._log("GET")
        q = queue.Queue()
        with self.fx._lock:
            self.fx._streams.append((sid, q))
        try:
            self._sse_start()
            last = time.monotonic()
            while not self._gone():
                try:
                    msg = q.get(timeout=0.2)
                except queue.Empty:
                    if time.monotonic() - last >= 2:
                        last = time.monotonic()
                        if not self._write(b": ping\n\n"):
                            break
                    continue
                if msg is None or not self._write(msg):
                    break
        except GONE:
            pass
        finally:
            self.close_connection = True
            with self.fx._lock:
                if (sid, q) in self.fx._streams:
                    self.fx._streams.remove((sid, q))

    def do_DELETE(self):
        sid = self._session_of_request()
        if sid is None:
            return
        self.fx._end_session(sid)
        self.fx._log("DELETE " + sid[:8])
        self._send(200)

    def do_POST(self):
        body = self._read_body()
        if not self._authorized() or not self._path_ok():
            return
        try:
            msg = json.loads(body)
        except ValueError:
            self._json(_error(None, -32700, "Parse error"), 400)
            return
        if not isinstance(msg, dict):
            self._json(_error(None, -32600, "Invalid Request: one JSON-RPC object per POST"), 400)
            return
        method = msg.get("method")
        rid = msg.get("id")
        if method is None:  # a response from the client: we send no requests, so just accept it
            if self._session() is not None:
                self._send(202)
            return
        self.fx._log("POST " + str(method))
        if method == "initialize":
            sid = self.fx.sid if self.fx.sid is not None else secrets.token_hex(16)
            with self.fx._lock:
                self.fx._sessions.add(sid)
            self._json({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": PROTOCOL,
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "mcphttp", "version": "1"}}},
                headers=[("Mcp-Session-Id", sid)])
            return
        sid = self._session(rid)
        if sid is None:
            return
        if "id" not in msg:  # a notification
            if method == "notifications/cancelled":
                cid = (msg.get("params") or {}).get("requestId")
                self.fx._log("cancelled " + (cid if isinstance(cid, str) else json.dumps(cid)))
                with self.fx._lock:
                    ev = self.fx._running.get((sid, json.dumps(cid)))
                if ev is not None:
                    ev.set()
            self._send(202)
            return
        if method == "ping":
            self._json({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/list":
            with self.fx._lock:
                tools = TOOLS + ([EXTRA] if self.fx._grown else [])
            self._json({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            heads = {}
            for k, v in self.headers.items():
                k = k.lower()
                heads[k] = heads[k] + ", " + v if k in heads else v
            self.fx._log("headers " + json.dumps(heads, sort_keys=True))
            self._call(sid, rid, msg.get("params") or {})
        else:
            self._json(_error(rid, -32601, "Method not found: %s" % method))

    # ---- tools -----------------------------------------------------------------

    def _call(self, sid, rid, params):
        name = params.get("name")
        args = params.get("arguments") or {}
        with self.fx._lock:
            grown = self.fx._grown
        if name == "echo":
            self._json(_text(rid, str(args.get("text", ""))))
        elif name == "extra" and grown:
            self._json(_text(rid, "extra"))
        elif name == "grow":
            with self.fx._lock:
                self.fx._grown = True
            self._json(_text(rid, "grown"))
            self.wfile.flush()
            self.fx.notify_tools_changed()
        elif name == "sleep":
            self._sleep(sid, rid, args)
        elif name == "huge":
            self._huge(rid)
        elif name == "endless":
            self._endless()
        elif name == "trickle":
            self._trickle(rid)
        elif name == "redirect":
            self._send(302, headers=[("Location", "http://127.0.0.1:1/elsewhere")])
        elif name == "wrongtype":
            self._send(200, b"<html>hi</html>", "text/html")
        elif name == "badjson":
            self._send(200, b'{"jsonrpc":"2.0","id":not json', "application/json")
        elif name == "html404":
            self._send(500, b"boom", "text/plain")
        else:
            self._json(_error(rid, -32602, "Unknown tool: %s" % name))

    def _sleep(self, sid, rid, args):
        try:
            ms = float(args.get("ms", 1000))
        except (TypeError, ValueError):
            ms = 1000.0
        key = (sid, json.dumps(rid))
        ev = threading.Event()
        with self.fx._lock:
            self.fx._running[key] = ev
        try:
            ok = False
            try:
                self._sse_start()
                deadline = time.monotonic() + ms / 1000.0
                while not ev.is_set() and not self._gone():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        ok = self._write(_event(_text(rid, "slept")))
                        break
                    ev.wait(min(left, 0.02))
            except GONE:
                ok = False
            if not ok:
                self.fx._log("sleep stopped")
        finally:
            with self.fx._lock:
                if self.fx._running.get(key) is ev:
                    del self.fx._running[key]

    def _huge(self, rid):
        head = ('{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"'
                % json.dumps(rid)).encode()
        tail = b'"}]}}'
        chunk = b"x" * (1024 * 1024)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(head) + HUGE + len(tail)))
            self.end_headers()
            self.wfile.write(head)
            for _ in range(HUGE // len(chunk)):
                self.wfile.write(chunk)
            self.wfile.write(tail)
            self.wfile.flush()
        except GONE:
            self.close_connection = True
            self.fx._log("huge stopped")

    def _endless(self):
        ev = _event({"jsonrpc": "2.0", "method": "notifications/message",
                     "params": {"level": "info", "data": "y" * 1024}})
        batch = ev * 64
        try:
            self._sse_start()
            while not self.fx._stopping:
                self.wfile.write(batch)
        except GONE:
            pass
        self.close_connection = True
        self.fx._log("endless stopped")

    def _trickle(self, rid):
        # The answer is padded to a megabyte: at a byte a second it never arrives.
        data = _event(_text(rid, "trickled " + "t" * (1024 * 1024)))
        try:
            self._sse_start()
            for i in range(len(data)):
                if self._gone() or not self._write(data[i:i + 1]):
                    break
                time.sleep(1)
        except GONE:
            pass
        self.close_connection = True
        self.fx._log("trickle stopped")


class McpHttp:
    def __init__(self, port=0, token=None, tls=None, sid=None, bind="127.0.0.1"):
        """token: every request must carry `Authorization: Bearer TOKEN`, else 401.
        tls: None or (certfile, keyfile) to serve HTTPS. sid: None (a random 32-hex id
        per session) or the str handed out as every session's id."""
        self.token = token
        self.sid = sid
        self.bind = bind
        self.ctx = None
        if tls is not None:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(tls[0], tls[1])
        self.log = []
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._sessions = set()
        self._streams = []   # (sid, queue) per open GET stream
        self._running = {}   # (sid, json request id) -> Event, for cancellation
        self._conns = set()  # handlers with an open connection
        self._grown = False
        self._stopping = False
        self._thread = None
        cls = _Server6 if ":" in bind else _Server
        self.httpd = cls((bind, port), _Handler)
        self.httpd.fixture = self
        self.port = self.httpd.server_address[1]

    def url(self, path="/mcp"):
        host = self.bind
        if host in ("", "0.0.0.0"):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = "[%s]" % host
        return "%s://%s:%d%s" % ("https" if self.ctx else "http", host, self.port, path)

    def start(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self):
        self.httpd.serve_forever(poll_interval=0.1)

    def stop(self):
        """Stop serving, close the socket and every open connection."""
        self._stopping = True
        with self._lock:
            for _, q in self._streams:
                q.put(None)
            conns = list(self._conns)
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread = None
        self.httpd.server_close()
        for h in conns:
            try:  # shut the connection down under the handler's feet (a dup, not its socket)
                s = socket.socket(fileno=socket.dup(h.connection.fileno()))
                try:
                    s.shutdown(socket.SHUT_RDWR)
                finally:
                    s.close()
            except (OSError, ValueError):
                pass

    def forget_sessions(self):
        """Drop every session (a restart): an old id gets 404; GET streams end."""
        with self._lock:
            self._sessions.clear()
            for _, q in self._streams:
                q.put(None)

    def _end_session(self, sid):
        with self._lock:
            self._sessions.discard(sid)
            for s, q in self._streams:
                if s == sid:
                    q.put(None)

    def notify_tools_changed(self):
        """Send notifications/tools/list_changed on every open GET stream; return how many."""
        msg = _event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        with self._lock:
            for _, q in self._streams:
                q.put(msg)
            return len(self._streams)

    def _log(self, entry):
        with self._cv:
            self.log.append(entry)
            self._cv.notify_all()

    def wait_log(self, item, timeout=20):
        """Wait for a log entry equal to item (or starting with it, when item ends
        with '*'); return the entry, or raise AssertionError with the log."""
        def match(e):
            return e.startswith(item[:-1]) if item.endswith("*") else e == item
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                for e in self.log:
                    if match(e):
                        return e
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("%r not in the mcphttp log: %r"
                                         % (item, [e[:300] for e in self.log]))
                self._cv.wait(left)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: mcphttp.py PORT [TOKEN]")
    srv = McpHttp(port=int(sys.argv[1]), token=sys.argv[2] if len(sys.argv) == 3 else None)
    print("listening %d" % srv.port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
