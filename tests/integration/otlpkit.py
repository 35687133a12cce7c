"""otlpkit.py: a stand-in for an OpenTelemetry collector on loopback: it
answers every OTLP/HTTP POST with 200 and keeps what it was sent.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Collector:
    """A loopback OTLP/HTTP receiver: each POST body to /v1/traces, kept."""

    def __init__(self):
        self.bodies = []
        self.paths = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                outer.paths.append((self.path, self.headers.get("Content-Type")))
                outer.bodies.append(body.decode())
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self):
        out = []
        for b in self.bodies:
            for rs in json.loads(b)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out += ss["spans"]
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()
