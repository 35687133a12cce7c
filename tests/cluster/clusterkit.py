"""clusterkit.py: appliance replicas behind HAProxy, for scripts/cluster-demo
and bench/cluster.py (docs/scale-out.md, "Trying it").

A Cluster lives in a fresh directory of its own and starts, in order:

  redis-server   the ledger the replicas share, on a unix socket in the
                 directory (no TCP port), --save '' --appendonly no;
  writes_server  tests/cluster/writes_server.mjs, the upstream whose `record`
                 tool counts every write it is sent (GET /counts);
  replicas       `appliance run` r1..rN, one signed policy for all of them
                 (cluster.ledger, the writes server as `w`, a role `writer`
                 whose writes need the client's yes, one token per client),
                 one shared cluster key, each with its own --listen port,
                 --name, runtime and admin directories; audit logs
                 audit/{name}.jsonl;
  haproxy        tests/cluster/haproxy.cfg.in filled in: one frontend, the
                 replicas as its backend, health-checked on /readyz.

Readiness is waited for on what can be seen: each replica's "serving MCP over
HTTP" line and its /readyz, then HAProxy's own view of every server (show stat
on its runtime socket), never a sleep. stop() ends everything it started,
each process by its pid (a replica with SIGTERM, which drains, then SIGKILL
if it outlives its drain), removes what a killed replica left (its sandboxes,
its admin socket) and the directory unless keep.
"""

import glob
import hashlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
APPLIANCE = os.environ.get("APPLIANCE_BIN") or os.path.join(ROOT, "build", "appliance")
LAYOUT = os.path.join(ROOT, "build", "image")
WRITES_SERVER = os.path.join(HERE, "writes_server.mjs")
LOADGEN = os.path.join(HERE, "loadgen.mjs")
HAPROXY_TEMPLATE = os.path.join(HERE, "haproxy.cfg.in")
SDK_CLIENT = os.path.join(ROOT, "tests", "node_modules", "@modelcontextprotocol", "client")
REDIS = "/usr/bin/redis-server"
HAPROXY = "/usr/sbin/haproxy"
RUNSC = "/usr/bin/runsc"
# The Host the balancer's checks send, and the one its clients send with a
# port: allowed_hosts lists the name without a port, which matches any.
HOST = "127.0.0.1"
ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}


class ClusterError(Exception):
    """Something the cluster needs is missing, or a part did not start."""


def node():
    path = shutil.which("node")
    if not path:
        raise ClusterError("no node on PATH (scripts/install-deps installs it)")
    return os.path.realpath(path)


def missing():
    """What the cluster needs and this machine lacks, as one line each."""
    out = []
    if os.geteuid() != 0:
        out.append("run it as root: the appliance runs runsc as root")
    for path, how in ((APPLIANCE, "make"), (LAYOUT + ".digest", "make image"),
                      (os.path.join(LAYOUT, "index.json"), "make image"),
                      (SDK_CLIENT, "scripts/install-deps (npm ci in tests/)"),
                      (REDIS, "scripts/install-deps (Debian's redis-server)"),
                      (HAPROXY, "scripts/install-deps (Debian's haproxy)"),
                      (RUNSC, "scripts/install-deps")):
        if not os.path.exists(path):
            out.append("%s is missing: %s" % (os.path.relpath(path, ROOT)
                                              if path.startswith(ROOT) else path, how))
    if not shutil.which("node"):
        out.append("node is missing: scripts/install-deps")
    if os.path.exists(APPLIANCE) and not appliance_has("--cluster-key", "--listen"):
        out.append("%s has no run --cluster-key: an older build (make)" % APPLIANCE)
    return out


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(port, path, timeout=5.0):
    """(status, body text) of GET path on 127.0.0.1:port; OSError when
    nothing answers."""
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": HOST})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    except http.client.HTTPException as e:
        raise OSError(str(e)) from None
    finally:
        conn.close()


def wait_for(what, check, timeout, proc=None, log_path=None):
    """Poll check() until it returns a true value (returned); ClusterError
    when timeout passes or proc exits first."""
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            raise ClusterError("%s: the process exited (status %s)%s" % (
                what, proc.returncode, tail(log_path)))
        if time.monotonic() > deadline:
            raise ClusterError("%s: not within %.0f s%s" % (what, timeout, tail(log_path)))
        time.sleep(0.05)


def tail(path, n=5):
    if not path:
        return ""
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return "; its log (%s) ends:\n  %s" % (path, "\n  ".join(lines[-n:]))


def appliance_has(*words):
    """Whether `appliance help run` names every one of words (an older build
    has no cluster options)."""
    r = subprocess.run([APPLIANCE, "help", "run"], capture_output=True, text=True)
    return all(w in r.stdout + r.stderr for w in words)


class Cluster:
    """N replicas behind HAProxy in a private directory (module docstring).
    limits: the policy's limits; clients: how many tokens to make (one per
    load generator client); say: a function given each progress line."""

    def __init__(self, replicas=3, limits=None, clients=8, keep=False, say=None,
                 haproxy_log=True):
        self.n = replicas
        self.names = ["r%d" % (i + 1) for i in range(replicas)]
        self.limits = dict({"deadline_s": 60, "cells": 8, "pool": 2,
                            "approval_timeout_s": 5, "http_drain_s": 15}, **(limits or {}))
        self.clients = clients
        self.keep = keep
        self.say = say or (lambda line: None)
        self.haproxy_log = haproxy_log
        self.dir = tempfile.mkdtemp(prefix="appliance-cluster.")
        os.chmod(self.dir, 0o755)
        self.procs = {}   # name -> Popen, in the order started
        self.logs = {}    # name -> its stderr file
        self.ports = {}   # replica name -> port; also "front", "writes"
        self.killed = {}  # replica name -> pid, SIGKILLed
        self.reclaimed = set()  # killed replicas whose leftovers are gone
        self.audit_dir = os.path.join(self.dir, "audit")
        os.mkdir(self.audit_dir, 0o755)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # ---- keys, tokens, policy -------------------------------------------------------

    def _keys(self):
        trust = self.path("trusted.d")
        os.mkdir(trust, 0o755)
        subprocess.run([APPLIANCE, "keygen", "--public", os.path.join(trust, "k.pub"),
                        "--secret", self.path("k.key")], check=True, capture_output=True)
        self.trust = trust
        # the key every replica shares (64 hex digits, mode 0600)
        self.cluster_key = self.path("cluster.key")
        r = subprocess.run([APPLIANCE, "cluster-key", self.cluster_key], capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise ClusterError("appliance cluster-key: %s" % r.stderr.strip())
        # one token per client: the appliance's per-client limits (cells in
        # flight, questions waiting) are then each client's own
        self.tokens = ["appliance_cluster-%02d-%s" % (i, secrets.token_hex(16))
                       for i in range(self.clients)]
        self.tokens_file = self.path("tokens")
        fd = os.open(self.tokens_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(t + "\n" for t in self.tokens))

    def _policy(self):
        """The one signed policy every replica serves."""
        with open(LAYOUT + ".digest") as f:
            digest = f.read().strip()
        doc = {
            "policy_version": 1, "serial": 1, "deployment": self.deployment,
            "expires": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400)),
            "image": {"layout": LAYOUT, "digest": digest},
            "limits": self.limits,
            "servers": {"w": {"url": "http://%s:%d/mcp" % (HOST, self.ports["writes"])}},
            "tools": {"w.record": {"access": "write"}},
            "roles": {"writer": {"tools": ["w.*"], "write": True, "approve_writes": True}},
            "clients": {"tokens": [
                {"name": "c%02d" % i, "role": "writer",
                 "sha256": hashlib.sha256(t.encode()).hexdigest()}
                for i, t in enumerate(self.tokens)]},
            # each replica's --listen replaces listen; the balancer sends its
            # own port in Host, which a name without a port matches
            "http": {"listen": ["%s:%d" % (HOST, self.ports[self.names[0]])],
                     "allowed_hosts": [HOST, "localhost"]},
            "cluster": {"ledger": "unix:" + self.path("redis.sock")},
            # {name}: each replica's --name, a log each
            "audit": {"path": os.path.join(self.audit_dir, "{name}.jsonl")},
        }
        path = self.path("policy.json")
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        r = subprocess.run([APPLIANCE, "sign", "--secret", self.path("k.key"), "--serial", "now",
                            path], capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterError("appliance sign: %s" % r.stderr.strip())
        return path + ".sig"

    # ---- processes ---------------------------------------------------------------------

    def _spawn(self, name, argv, **kw):
        log = self.path(name + ".log")
        with open(log, "wb") as errf:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stderr=errf,
                                 stdout=kw.pop("stdout", subprocess.DEVNULL),
                                 env=kw.pop("env", ENV), start_new_session=True, **kw)
        self.procs[name] = p
        self.logs[name] = log
        return p

    def _start_redis(self):
        sock = self.path("redis.sock")
        p = self._spawn("redis", [REDIS, "--port", "0", "--unixsocket", sock,
                                  "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                                  "--dir", self.dir, "--daemonize", "no"])

        def pong():
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(1)
                    s.connect(sock)
                    s.sendall(b"PING\r\n")
                    return s.recv(64).startswith(b"+PONG")
            except OSError:
                return False
        wait_for("redis-server", pong, 20, p, self.logs["redis"])
        self.say("redis-server (the ledger) on unix:%s" % sock)

    def _start_writes(self):
        # node finds the SDK in tests/node_modules, above the script
        p = self._spawn("writes", [node(), WRITES_SERVER, "0"], stdout=subprocess.PIPE)
        line = p.stdout.readline().decode().split()
        p.stdout.close()
        if len(line) != 2 or line[0] != "listening":
            p.wait(timeout=10)
            raise ClusterError("writes_server did not start%s" % tail(self.logs["writes"]))
        self.ports["writes"] = int(line[1])
        self.say("writes server (tests/cluster/writes_server.mjs) on %s:%d"
                 % (HOST, self.ports["writes"]))

    def _replica_argv(self, name, sig):
        own = self.path(name)
        os.makedirs(os.path.join(own, "run"), 0o700, exist_ok=True)
        # its own runtime directory: what it leaves when killed is found
        # there (_reclaim); its own admin directory, for the same reason
        return [APPLIANCE, "run", "--policy", sig, "--trust-dir", self.trust, "--name", name,
                "--cluster-key", self.cluster_key, "--listen", "%s:%d" % (HOST, self.ports[name]),
                "--runtime-dir", os.path.join(own, "run"), "--admin-dir", own]

    def _start_replicas(self):
        sig = self._policy()
        for name in self.names:
            self._spawn(name, self._replica_argv(name, sig))
        for name in self.names:
            self.wait_replica(name)
        self.say("%d replicas (appliance run --name r1..r%d) on %s" % (
            self.n, self.n, ", ".join("%s:%d" % (HOST, self.ports[n]) for n in self.names)))

    def wait_replica(self, name, timeout=120):
        """A replica's start: its log line, then /readyz 200."""
        line = "serving MCP over HTTP at %s:%d/mcp" % (HOST, self.ports[name])

        def serving():
            with open(self.logs[name], "rb") as f:
                return line.encode() in f.read()

        def ready():
            try:
                return http_get(self.ports[name], "/readyz") == (200, "ready\n")
            except OSError:
                return False
        wait_for(name + " serving", serving, timeout, self.procs[name], self.logs[name])
        wait_for(name + " ready (/readyz)", ready, timeout, self.procs[name], self.logs[name])

    def haproxy_config(self, names):
        with open(HAPROXY_TEMPLATE) as f:
            t = string.Template(f.read())
        return t.substitute(
            dir=self.dir, front=self.ports["front"], host=HOST,
            log="log stderr format short local0 info" if self.haproxy_log else "# no log",
            servers="\n".join("\tserver %s %s:%d" % (n, HOST, self.ports[n]) for n in names))

    def start_haproxy(self, names=None):
        """HAProxy in front of names (default every replica); waits until it
        sees each of them up."""
        names = list(names or self.names)
        self.stop_one("haproxy", signal.SIGUSR1)
        self.ports.setdefault("front", free_port())
        cfg = self.path("haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(self.haproxy_config(names))
        r = subprocess.run([HAPROXY, "-c", "-q", "-f", cfg], capture_output=True, text=True)
        if r.returncode != 0:
            raise ClusterError("haproxy -c: %s" % (r.stdout + r.stderr).strip())
        p = self._spawn("haproxy", [HAPROXY, "-db", "-f", cfg])
        wait_for("haproxy: every replica up", lambda: set(self.up()) >= set(names), 30, p,
                 self.logs["haproxy"])
        self.say("haproxy %s (tests/cluster/haproxy.cfg.in) on %s:%d, backend %s, all up" % (
            subprocess.run([HAPROXY, "-v"], capture_output=True, text=True).stdout.split()[2],
            HOST, self.ports["front"], " ".join(names)))

    def haproxy_stat(self):
        """HAProxy's `show stat` of the backend's servers: name -> status
        ("UP", "DOWN", "UP 1/2", ...); {} when it does not answer."""
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(self.path("haproxy.sock"))
                s.sendall(b"show stat\n")
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
        except OSError:
            return {}
        lines = data.decode().splitlines()
        if not lines or not lines[0].startswith("# "):
            return {}
        head = lines[0][2:].split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(head, line.split(",")))
            if row.get("pxname") == "replicas" and row.get("svname") not in ("BACKEND", None):
                out[row["svname"]] = row.get("status", "")
        return out

    def up(self):
        return [n for n, st in self.haproxy_stat().items() if st == "UP"]

    def start(self, behind=None):
        """Everything, in order, HAProxy in front of the replicas named in
        behind (default all); on a failure what started is stopped."""
        try:
            self.deployment = "cluster-" + secrets.token_hex(6)
            for name in self.names:
                self.ports[name] = free_port()
            self._keys()
            self._start_redis()
            self._start_writes()
            self._start_replicas()
            self.start_haproxy(behind)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def url(self):
        return "http://%s:%d/mcp" % (HOST, self.ports["front"])

    def replica_url(self, name):
        return "http://%s:%d/mcp" % (HOST, self.ports[name])

    def kill(self, name):
        """SIGKILL replica name: its runs in flight are lost."""
        p = self.procs[name]
        self.killed[name] = p.pid
        p.send_signal(signal.SIGKILL)
        p.wait()

    def log_count(self, text):
        """Lines of the replicas' logs holding text, all replicas together."""
        n = 0
        for name in self.names:
            try:
                with open(self.logs[name], "rb") as f:
                    n += f.read().count(text.encode())
            except (KeyError, OSError):
                pass
        return n

    def counts(self):
        status, body = http_get(self.ports["writes"], "/counts")
        if status != 200:
            raise ClusterError("GET /counts: %d %s" % (status, body[:200]))
        return json.loads(body)

    # ---- the end -----------------------------------------------------------------------

    def stop_one(self, name, sig=signal.SIGTERM, timeout=30):
        """Stop one process by its pid: sig (None: it was sent already),
        then SIGKILL after timeout. Returns its exit status (None when it
        was never started)."""
        p = self.procs.get(name)
        if p is None:
            return None
        if p.poll() is None:
            try:
                if sig is not None:
                    p.send_signal(sig)
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def _reclaim(self, name, pid):
        """What a SIGKILLed replica left: its sandboxes (the pool's, frozen,
        outlive it), their cgroups and runsc state, and its admin socket.
        The appliance reclaims an instance whose lock is free when it opens
        its runtime directory, so one throwaway `appliance cell` there does
        it, with the appliance's own code."""
        with open(LAYOUT + ".digest") as f:
            digest = f.read().strip()
        subprocess.run([APPLIANCE, "cell", "--image", LAYOUT, "--digest", digest,
                        "--runtime-dir", os.path.join(self.path(name), "run"), "-"],
                       input=b"pass\n", capture_output=True, env=ENV, timeout=120)
        sock = os.path.join(self.path(name), "%s.%d.sock" % (name, pid))
        if os.path.exists(sock):
            os.unlink(sock)

    def strays(self):
        """Processes still running whose command line names this cluster's
        directory (none once stop() is done): [(pid, command)]."""
        out = []
        mark = self.dir.encode()
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if mark in cmd:
                out.append((int(d[6:]), cmd.replace(b"\0", b" ").decode("utf-8", "replace")[:200]))
        return out

    def stop(self, drain_s=None):
        """Stop everything this cluster started, newest first: HAProxy, the
        replicas (SIGTERM: each drains; SIGKILL once drain_s, default
        limits.http_drain_s + 10, has passed), the writes server, Redis.
        Returns {name: exit status}."""
        drain_s = drain_s if drain_s is not None else self.limits["http_drain_s"] + 10
        out = {}
        out["haproxy"] = self.stop_one("haproxy", signal.SIGUSR1)  # its soft stop
        # all drain at once; a second SIGTERM would stop a replica at once
        live = [n for n in self.names if n in self.procs and self.procs[n].poll() is None]
        for n in live:
            self.procs[n].send_signal(signal.SIGTERM)
        for n in self.names:
            out[n] = self.stop_one(n, None, drain_s)
        for n, pid in self.killed.items():
            if n not in self.reclaimed:
                self._reclaim(n, pid)
                self.reclaimed.add(n)
        out["writes"] = self.stop_one("writes")
        out["redis"] = self.stop_one("redis")
        return out

    def cleanup(self):
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    def audit_verify(self):
        """`appliance audit verify` over the replicas' log directory: (exit
        status, its output)."""
        r = subprocess.run([APPLIANCE, "audit", "verify", self.audit_dir], capture_output=True,
                           text=True)
        return r.returncode, (r.stdout + r.stderr).strip()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    # By hand: start a cluster, print its URL and directory, stop it on
    # Ctrl-C or SIGTERM (the directory is kept: its logs).
    signal.signal(signal.SIGTERM, _interrupt)
    c = Cluster(keep=True, say=lambda line: print(line, flush=True))
    try:
        c.start()
        print("front %s, tokens in %s; Ctrl-C stops it" % (c.url, c.tokens_file), flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("stopped: %s; kept %s" % (c.stop(), c.dir), file=sys.stderr)
