"""test_status.py: the admin socket, `appliance status` and `appliance reload`.

An HTTP-mode appliance with the toy server and an audit log holds one cell running
(it sleeps) while `appliance status --json` is checked field by field; stdio
appliances started with one --name are all listed, and --name and --pid pick among
them; nothing that matches is exit 1; a user who is not root is refused by the server
itself even on a socket anyone may open; `appliance reload` reaches the socket and
reports the reload's outcome; the socket is gone after a clean stop.

Runs as root; needs build/appliance, build/toy-server and build/image. Every wait is
on something the test can see (a log line, a status), with a generous deadline.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

from harness import main, test
from cellkit import APPLIANCE, digest, ensure_user, rootless_files
import gatewaykit as gk

ALPHA, BETA = "appliance_status-token-alpha-0123456789", "appliance_status-token-beta-98765"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientCapabilities": {}}
LIMITS = {"deadline_s": 120, "cells": 3, "pool": 1}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$")


# A peer that sends a status request and prints all it gets back.
RAW_PEER = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
try:
    s.sendall(b'{"op":"status"}\\n')
except BrokenPipeError:
    pass
got = b""
while True:
    try:
        chunk = s.recv(4096)
    except ConnectionResetError:  # its end, with the request left unread
        break
    if not chunk:
        break
    got += chunk
sys.stdout.write(got.decode())
"""


def admin_dir():
    d = tempfile.mkdtemp(prefix="appliance-admin.")
    os.chmod(d, 0o755)
    return d


def http_policy(port, audit):
    tokens = [{"name": "alpha", "role": "r", "sha256": hashlib.sha256(ALPHA.encode()).hexdigest()},
              {"name": "beta", "role": "r", "sha256": hashlib.sha256(BETA.encode()).hexdigest()}]
    return gk._kit.policy(LIMITS, servers={"toy": gk.toy_server()},
                          tools={"toy.*": {"access": "read"}}, roles={"r": {"tools": ["toy.*"]}},
                          clients={"tokens": tokens},
                          http={"listen": ["127.0.0.1:%d" % port]}, audit={"path": audit})


class Proc:
    """An appliance run process, its stderr kept."""

    def __init__(self, argv, stdin=subprocess.DEVNULL, **kw):
        self.proc = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, **kw)
        self.pid = self.proc.pid
        self.lines = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace"))

    def log(self):
        return "".join(self.lines)

    def wait_log(self, text, timeout=90):
        deadline = time.time() + timeout
        while text not in self.log():
            assert self.proc.poll() is None, "appliance exited; log:\n" + self.log()
            assert time.time() < deadline, "no %r in the log:\n%s" % (text, self.log())
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            if sig is None:
                self.proc.stdin.close()
            else:
                self.proc.send_signal(sig)
        rc = self.proc.wait(timeout=90)
        assert rc == 0, "exit %d; log:\n%s" % (rc, self.log())


def served(d, name=None):
    """An HTTP appliance with its admin socket in d; (proc, port, audit path, sig)."""
    port = gk.free_port()
    audit = os.path.join(d, "audit.jsonl")
    sig = http_policy(port, audit)
    argv = gk.run_argv(sig) + ["--admin-dir", d] + (["--name", name] if name else [])
    p = Proc(argv)
    p.wait_log("serving MCP over HTTP at 127.0.0.1:%d/mcp" % port)
    return p, port, audit, sig


def stdio(d, sig, name):
    """A stdio appliance that only waits for its client: its socket opens at once."""
    p = Proc(gk.run_argv(sig) + ["--admin-dir", d, "--name", name], stdin=subprocess.PIPE)
    p.wait_log("admin socket: ")
    return p


def as_user(argv, user):
    if not user:
        return argv
    return ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + argv


def appliance(*args, user=None, timeout=60):
    return subprocess.run(as_user([APPLIANCE, *args], user), capture_output=True, text=True,
                          timeout=timeout)


def status(d, *args):
    r = appliance("status", "--json", "--admin-dir", d, *args)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    return json.loads(r.stdout)


def wait_status(d, pid, ok, what, timeout=120):
    """The status of pid once ok(status) holds."""
    deadline = time.time() + timeout
    while True:
        st = [s for s in status(d, "--pid", str(pid)) if s["pid"] == pid]
        assert len(st) == 1, st
        if ok(st[0]):
            return st[0]
        assert time.time() < deadline, "no %s; last status:\n%s" % (what, json.dumps(st, indent=2))
        time.sleep(0.2)


def post(port, body, token, sid=None):
    """The raw bytes of a POST (a socket the test holds itself)."""
    data = json.dumps(body).encode()
    head = ["POST /mcp HTTP/1.1", "Host: 127.0.0.1:%d" % port, "Authorization: Bearer " + token,
            "Content-Type: application/json", "Accept: application/json, text/event-stream",
            "Content-Length: %d" % len(data)]
    if sid:
        head.append("Mcp-Session-Id: " + sid)
    params = body.get("params") or {}
    if "io.modelcontextprotocol/protocolVersion" in (params.get("_meta") or {}):
        head += ["MCP-Protocol-Version: 2026-07-28", "Mcp-Method: " + body["method"]]
        if "name" in params:
            head.append("Mcp-Name: " + params["name"])
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def legacy_session(port, token):
    """A legacy session of token's (initialize); its id."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "status-test", "version": "0"}}}
    s.sendall(post(port, init, token))
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        assert chunk, got
        got += chunk
    s.close()
    m = re.search(rb"(?im)^mcp-session-id: *(\S+)", got)
    assert got.startswith(b"HTTP/1.1 200") and m, got[:300]
    return m.group(1).decode()


def hold_cell(port, token):
    """A run_python call whose cell sleeps, its stream left open: the socket."""
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "run_python", "_meta": MODERN,
                       "arguments": {"code": "import time\ntime.sleep(100)"}}}
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(post(port, call, token))
    return s


@test
def status_shows_a_running_cell_field_by_field():
    d = admin_dir()
    p, port, audit, sig = served(d)
    holder = None
    try:
        sid = legacy_session(port, ALPHA)
        holder = hold_cell(port, ALPHA)
        st = wait_status(d, p.pid, lambda s: s["cells"]["in_flight"] == 1 and
                         s["audit"]["lines"] > 0, "cell in flight")
        assert list(st) == ["name", "pid", "policy", "uptime_s", "servers", "cells", "pool",
                            "sessions", "http", "audit"], list(st)
        # name: the policy's deployment (no --name); pid: the process
        assert st["name"] == gk._kit.deployment and st["pid"] == p.pid, st
        pol = st["policy"]
        assert pol["path"] == os.path.realpath(sig), pol
        assert pol["serial"] == gk._kit.serial and pol["deployment"] == gk._kit.deployment, pol
        assert re.fullmatch(r"[0-9A-F]{16}", pol["key_id"]), pol
        assert pol["expires"] == "2099-01-01T00:00:00Z" and ISO.match(pol["loaded_at"]), pol
        assert isinstance(st["uptime_s"], int) and 0 <= st["uptime_s"] < 600, st
        [srv] = st["servers"]
        assert srv == {"name": "toy", "state": "ready", "revision": "2025-11-25", "tools": 11,
                       "restarts": 0, "last_error": None}, srv
        cells = st["cells"]
        assert cells == {"in_flight": 1, "waiting": 0, "slots": LIMITS["cells"],
                         "by_client": {"alpha": {"in_flight": 1, "waiting": 0}}}, cells
        pool = st["pool"]
        assert pool["size"] == LIMITS["pool"], pool
        assert pool["ready"] + pool["booting"] <= pool["size"], pool
        assert 0 <= pool["frozen"] <= pool["ready"], pool
        assert st["sessions"] == {"open": 0, "frozen": 0}, st["sessions"]
        assert st["http"] == {"listen": ["127.0.0.1:%d" % port],
                              "sessions": {"alpha": 1, "beta": 0}}, st["http"]
        a = st["audit"]
        assert a["path"] == audit and a["lines"] > 0 and a["ok"] is True, a
        assert a["last_seal"] is None, a  # the policy does not seal
        # no token, nor its hash, anywhere in what status prints
        r = appliance("status", "--admin-dir", d)
        j = appliance("status", "--json", "--admin-dir", d)
        for out in (r.stdout, j.stdout):
            for secret in (ALPHA, BETA, hashlib.sha256(ALPHA.encode()).hexdigest(), sid):
                assert secret not in out, secret
        # the text form says the same things
        assert r.returncode == 0 and r.stderr == "", r.stderr
        for text in ("%s[%d]: up " % (gk._kit.deployment, p.pid), "serial %d" % gk._kit.serial,
                     "toy: ready, revision 2025-11-25, 11 tools, 0 restarts",
                     "1 in flight, 0 waiting, 3 slots", "alpha: 1 in flight",
                     "sessions: alpha 1 beta 0", "sessions 0 open (0 frozen)", audit + ": "):
            assert text in r.stdout, (text, r.stdout)
    finally:
        if holder:
            holder.close()
        p.stop()
    # the socket is removed at a clean end
    assert [f for f in os.listdir(d) if f.endswith(".sock")] == [], os.listdir(d)
    shutil.rmtree(d)


@test
def processes_sharing_a_name_are_all_listed_and_picked_by_name_and_pid():
    d = admin_dir()
    sig = gk.toy_policy()
    procs = [stdio(d, sig, "shared"), stdio(d, sig, "shared"), stdio(d, sig, "other")]
    try:
        every = status(d)
        assert sorted((s["name"], s["pid"]) for s in every) == sorted(
            [("shared", procs[0].pid), ("shared", procs[1].pid), ("other", procs[2].pid)]), every
        # over stdio nothing has started yet: no server, no cell, the pool to come
        for s in every:
            assert s["servers"] == [] and s["cells"]["in_flight"] == 0, s
            assert s["http"] is None and s["audit"] is None, s
        shared = status(d, "--name", "shared")
        assert sorted(s["pid"] for s in shared) == sorted([procs[0].pid, procs[1].pid]), shared
        one = status(d, "--name", "shared", "--pid", str(procs[1].pid))
        assert [s["pid"] for s in one] == [procs[1].pid], one
        # nothing that matches: exit 1, one line saying so
        for args in (["--name", "nosuch"], ["--pid", str(procs[2].pid), "--name", "shared"]):
            r = appliance("status", "--admin-dir", d, *args)
            assert r.returncode == 1 and r.stdout == "", (args, r)
            assert len(r.stderr.splitlines()) == 1 and "no appliance is running" in \
                r.stderr, (args, r.stderr)
        r = appliance("reload", "--admin-dir", d, "--name", "nosuch")
        assert r.returncode == 1 and "no appliance is running" in r.stderr, r
        # a usage error is 2
        for args in (["--name", "a.b"], ["--pid", "0"], ["--pid", "x"], ["extra"]):
            r = appliance("status", "--admin-dir", d, *args)
            assert r.returncode == 2, (args, r)
        # a socket nobody serves (a process that died) is skipped, and said
        ghost = socket.socket(socket.AF_UNIX)
        ghost.bind(os.path.join(d, "shared.999999.sock"))
        ghost.close()
        r = appliance("status", "--json", "--admin-dir", d, "--name", "shared")
        assert r.returncode == 0, r
        assert len(json.loads(r.stdout)) == 2, r.stdout
        assert "shared[999999]: nobody answers" in r.stderr and "skipped" in r.stderr, r.stderr
    finally:
        for p in procs:
            p.stop(None)
    assert sorted(os.listdir(d)) == ["shared.999999.sock"], os.listdir(d)
    shutil.rmtree(d)


@test
def a_user_who_is_not_root_is_refused_by_the_server_itself():
    d = admin_dir()
    p = stdio(d, gk.toy_policy(), "guarded")
    try:
        [path] = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".sock")]
        st = os.lstat(path)
        assert st.st_uid == 0 and st.st_mode & 0o7777 == 0o600, oct(st.st_mode)
        # as made, the kernel keeps the user out
        r = appliance("status", "--admin-dir", d, user=65534)
        assert r.returncode == 1 and r.stdout == "", r
        assert len(r.stderr.splitlines()) == 1 and "permission denied" in r.stderr, r.stderr
        # a socket anyone may open: the server refuses all the same
        os.chmod(path, 0o666)
        for cmd in ("status", "reload"):
            r = appliance(cmd, "--admin-dir", d, user=65534)
            assert r.returncode == 1 and r.stdout == "", (cmd, r)
            lines = r.stderr.splitlines()
            assert len(lines) == 1, (cmd, r.stderr)
            assert lines[0] == ("appliance: %s: guarded[%d]: refused: uid 65534 may not use "
                                "this admin socket (only root)" % (cmd, p.pid)), lines
        # and the raw socket gets one line, then its end (perhaps before its
        # request went: the server does not wait for it)
        out = subprocess.run(as_user(["/usr/bin/python3", "-c", RAW_PEER, path], 65534),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out
        assert json.loads(out.stdout) == {"ok": False, "op": None, "error":
                                          "refused: uid 65534 may not use this admin socket "
                                          "(only root)"}, out.stdout
        assert out.stdout.count("\n") == 1, out.stdout
        p.wait_log("admin: refused: uid 65534")
        # root is still served
        assert [s["pid"] for s in status(d)] == [p.pid]
    finally:
        p.stop(None)
    shutil.rmtree(d)


@test
def reload_over_the_socket_takes_the_policy_or_says_why_not():
    d = admin_dir()
    p, port, audit, sig = served(d, "reloading")
    early = stdio(d, gk.toy_policy(), "early")
    try:
        before = status(d, "--name", "reloading")[0]["policy"]
        r = appliance("reload", "--admin-dir", d, "--name", "reloading")
        assert r.returncode == 0 and r.stdout == "reloading[%d]: reloaded\n" % p.pid, r
        after = status(d, "--name", "reloading")[0]["policy"]
        assert after["serial"] == before["serial"] and after["path"] == before["path"], after
        assert after["loaded_at"] >= before["loaded_at"], (before, after)
        # a signature that does not verify: refused, with why, and serving goes on
        with open(sig, "rb") as f:
            good = f.read()
        with open(sig, "wb") as f:
            f.write(good.replace(b"\n", b"\nx", 1))
        r = appliance("reload", "--admin-dir", d, "--name", "reloading")
        assert r.returncode == 1, r
        assert r.stdout.startswith("reloading[%d]: not reloaded: " % p.pid), r
        with open(sig, "wb") as f:
            f.write(good)
        with open(audit) as f:
            reloads = [e for e in map(json.loads, f) if e["ev"] == "reload"]
        assert [e["outcome"] for e in reloads] == ["ok", "refused"], reloads
        assert all(e["by"] == "uid 0 pid %d" % int(e["by"].split()[-1]) for e in reloads)
        assert reloads[1]["reason"] and r.stdout.endswith(reloads[1]["reason"] + "\n"), \
            (reloads, r.stdout)
        # over stdio, before the first request starts anything, there is nothing to reload
        r = appliance("reload", "--admin-dir", d, "--name", "early")
        assert r.returncode == 1 and "has not started yet" in r.stdout, r
        assert [s["pid"] for s in status(d, "--name", "reloading")] == [p.pid]
    finally:
        early.stop(None)
        p.stop()
    shutil.rmtree(d)


@test
def a_rootless_appliance_serves_its_own_user_from_its_runtime_directory():
    user = ensure_user()
    app, layout = rootless_files()
    home = tempfile.mkdtemp(prefix="appliance-admin-rootless.")
    os.chmod(home, 0o755)
    state, runtime = os.path.join(home, "state"), os.path.join(home, "run")
    for x in (state, runtime):
        os.mkdir(x, 0o700)
        os.chown(x, user.pw_uid, user.pw_gid)
    sig = gk._kit.policy(image=(layout, digest()), runtime={"rootless": True})
    argv = [app] + gk._kit.argv(sig)[1:] + ["--state-dir", state, "--name", "mine"]
    env = {"PATH": "/usr/bin:/bin", "HOME": user.pw_dir}
    kw = dict(user=user.pw_uid, group=user.pw_gid, extra_groups=[], cwd="/")
    # no XDG_RUNTIME_DIR: refused before anything starts, saying what to do
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60, env=env, **kw)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, r
    assert "XDG_RUNTIME_DIR is not set" in r.stderr and "--admin-dir" in r.stderr, r.stderr
    # with one: $XDG_RUNTIME_DIR/appliance/NAME.PID.sock, the user's own
    env["XDG_RUNTIME_DIR"] = runtime
    p = Proc(argv, stdin=subprocess.PIPE, env=env, **kw)
    try:
        p.wait_log("admin socket: ")
        d = os.path.join(runtime, "appliance")
        path = os.path.join(d, "mine.%d.sock" % p.pid)
        st = os.lstat(path)
        assert st.st_uid == user.pw_uid and st.st_mode & 0o7777 == 0o600, oct(st.st_mode)
        # served to its user (status finds the directory the same way) and to root
        mine = subprocess.run([app, "status", "--json"], capture_output=True, text=True,
                              timeout=60, env=env, **kw)
        assert mine.returncode == 0, mine
        assert [s["pid"] for s in json.loads(mine.stdout)] == [p.pid], mine.stdout
        assert [s["pid"] for s in status(d)] == [p.pid]
        # another user is refused by the server, whatever the socket's mode
        for x in (runtime, d):
            os.chmod(x, 0o755)
        os.chmod(path, 0o666)
        r = appliance("status", "--admin-dir", d, user=65534)
        assert r.returncode == 1 and r.stderr.splitlines() == [
            "appliance: status: mine[%d]: refused: uid 65534 may not use this admin socket "
            "(only root and uid %d)" % (p.pid, user.pw_uid)], r
    finally:
        p.stop(None)
    assert not os.path.exists(path)
    shutil.rmtree(home)


@test
def a_bad_name_or_admin_dir_stops_run_before_it_starts():
    sig = gk.toy_policy()
    r = subprocess.run(gk.run_argv(sig) + ["--name", "../etc"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "--name" in r.stderr, r
    d = admin_dir()
    os.chmod(d, 0o777)  # anyone could swap the socket: refused
    r = subprocess.run(gk.run_argv(sig) + ["--admin-dir", d], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "admin directory" in r.stderr, r
    assert os.listdir(d) == [], os.listdir(d)
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
