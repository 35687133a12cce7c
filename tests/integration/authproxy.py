"""authproxy.py: a loopback relay that adds `Authorization: Bearer TOKEN` to every request.

Peers that send no token (the conformance suite, the Inspector CLI without its header
flag) reach `appliance run` through it, so the appliance itself never needs a token-less
role. Each request gets `Connection: close`, so every connection carries one request
and the header is added to each; everything else, Host and Origin included, passes
byte for byte in both directions, and a client that hangs up closes the upstream side.
"""

import socket
import threading

HEAD_MAX = 64 * 1024


class AuthProxy:
    def __init__(self, upstream_port, token):
        """upstream_port may be None and set later (self.upstream_port)."""
        self.upstream_port = upstream_port
        self.token = token.encode()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path="/mcp"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _rewrite(self, head):
        lines = head.split(b"\r\n")
        kept = [lines[0]]
        for line in lines[1:]:
            name = line.split(b":", 1)[0].strip().lower()
            if name in (b"connection", b"authorization"):
                continue
            kept.append(line)
        kept.append(b"Authorization: Bearer " + self.token)
        kept.append(b"Connection: close")
        return b"\r\n".join(kept)

    def _serve(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk or len(data) > HEAD_MAX:
                conn.close()
                return
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1)
        self.requests += 1
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            conn.close()
            return
        up.sendall(self._rewrite(head) + b"\r\n\r\n" + rest)
        threading.Thread(target=_pump, args=(conn, up), daemon=True).start()
        _pump(up, conn)

    def close(self):
        self.sock.close()


def _pump(src, dst):
    """Copies src to dst until src ends or fails, then closes both."""
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
