"""nodekit.py: node MCP servers on ports of their own for the integration
tests (the v2 SDK's HTTP server of v2_http_server.mjs, server-everything),
each one's stderr kept line by line for the test to wait on.
"""

import os
import socket
import subprocess
import threading
import time

import gatewaykit as gk
from cellkit import ROOT

V2_SERVER = os.path.join(ROOT, "tests", "integration", "v2_http_server.mjs")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NodeServer:
    """A node MCP server on a port of its own, its stderr kept line by line."""

    def __init__(self, argv, ready, env=None):
        self.argv, self.ready, self.env = argv, ready, env
        self.start()

    def start(self):
        self.err = []
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=self.env)
        self.cv = threading.Condition()
        threading.Thread(target=self._pump, args=(self.proc.stderr,), daemon=True).start()
        out = threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True)
        out.start()
        self.wait(self.ready, 30)

    def _pump(self, stream):
        for raw in stream:
            with self.cv:
                self.err.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self.cv.notify_all()

    def wait(self, text, timeout=20):
        end = time.monotonic() + timeout
        with self.cv:
            while not any(text in line for line in self.err):
                left = end - time.monotonic()
                assert left > 0, "waited for %r; server said:\n%s" % (text, "\n".join(self.err))
                self.cv.wait(left)

    def count(self, text):
        with self.cv:
            return sum(text in line for line in self.err)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def v2_server(port, token=None):
    argv = [gk.node(), V2_SERVER, str(port)] + ([token] if token else [])
    return NodeServer(argv, "listening %d" % port)
