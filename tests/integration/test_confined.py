"""test_confined.py: the upstream servers' confinement, seen from inside.

The toy server's `probe` tool (tests/toy/README.md) reports who it runs as, what it
may do and what it can see; each test starts `appliance run` with a policy, has a cell
call the probe, and checks the report against what the appliance promises
(docs/upstream.md, Confinement): an unprivileged user without capabilities, the
system call filter, a cgroup of its own, the appliance's secrets hidden, loopback only
when the policy says `network: false`, and the whole tree, escapees included, gone
with the appliance. server-memory runs under the same confinement and keeps its
graph in a directory its user owns.

Runs as root; needs build/appliance, build/toy-server, build/image and the npm servers.
"""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

from harness import main, test
from cellkit import alive
from policykit import APPLIANCE, START_INPUT
import gatewaykit as gk

MEMORY = os.path.join(gk.ROOT, "tests", "node_modules", "@modelcontextprotocol",
                      "server-memory", "dist", "index.js")


def probe_policy(server=None, audit=None):
    srv = gk.toy_server()
    srv.update(server or {})
    extra = {"audit": {"path": audit}} if audit else {}
    return gk._kit.policy({"deadline_s": 60}, servers={"toy": srv},
                          tools={"toy.*": {"access": "read"}},
                          roles={"r": {"tools": ["toy.*"]}}, clients={"default_role": "r"},
                          **extra)


def probe(s, **args):
    return s.cell_json("import json\nprint(json.dumps(await toy.probe(**%r)))" % (args,))


def cgroup_limits(lines):
    """The memory and pids limits of the toy's cgroup, read from the host
    (v1 or v2) while it exists."""
    limits = {}
    for line in lines:
        path = line.split(":", 2)[2]
        if "upstream-toy-" not in path:
            continue
        for base, name in (("/sys/fs/cgroup/memory" + path, "memory.limit_in_bytes"),
                           ("/sys/fs/cgroup/pids" + path, "pids.max"),
                           ("/sys/fs/cgroup" + path, "memory.max"),
                           ("/sys/fs/cgroup" + path, "pids.max")):
            if os.path.exists(os.path.join(base, name)):
                limits[name.split(".")[0]] = open(os.path.join(base, name)).read().strip()
    return limits


@test
def a_confined_server_has_no_privileges_and_cannot_see_the_appliances_secrets():
    d = tempfile.mkdtemp(prefix="appliance-confined.")
    os.chmod(d, 0o755)
    audit = os.path.join(d, "audit.jsonl")
    sig = probe_policy({"memory_mb": 96, "pids": 40}, audit=audit)
    trust = os.path.join(gk.work(), "trusted.d")
    beside = os.path.join(os.path.dirname(sig), "beside.txt")
    with open(beside, "w") as f:
        f.write("not a secret\n")
    os.chmod(beside, 0o644)
    os.chmod(os.path.dirname(sig), 0o755)  # so the server could reach it if not hidden
    with gk.Session(sig) as s:
        got = probe(s, paths=[trust, sig, sig[:-len(".sig")], audit, beside, "/etc/appliance"])
        limits = cgroup_limits(got["cgroup"])
        log = s.log()
    # a uid of its own from the range, its gid the same number, and the
    # servers' group besides
    assert got["uid"] in gk.SERVER_UIDS and got["gid"] == got["uid"], got
    assert got["groups"] == [gk.upstream_user()[1]], got
    assert got["cap_eff"] == "0000000000000000" and got["cap_bnd"] == "0000000000000000", got
    assert got["no_new_privs"] == 1 and got["seccomp"] == 2, got
    denied = got["denied"]
    assert denied.pop("clone3") == "ENOSYS", got["denied"]
    assert all(v == "EPERM" for v in denied.values()), denied
    assert any("upstream-toy-" in line for line in got["cgroup"]), got["cgroup"]
    # the limits the policy gave, as the kernel holds them
    assert limits == {"memory": str(96 << 20), "pids": "40"}, (limits, got["cgroup"])
    home = got["env"]["HOME"]
    assert home.startswith("/tmp/appliance-upstream-toy.") and got["env"]["TMPDIR"] == home, \
        got["env"]
    paths = got["paths"]
    for hidden in (trust, sig, audit):
        assert paths[hidden] == "empty", (hidden, paths)
    if os.path.exists(sig[:-len(".sig")]):
        assert paths[sig[:-len(".sig")]] == "empty", paths
    if os.path.exists("/etc/appliance"):
        assert paths["/etc/appliance"] == "empty", paths
    assert paths[beside] == "readable", paths
    assert ("confined: runs as uid %d (its own), group appliance-upstream" % got["uid"]
            in log), log
    # the private directory goes with the appliance
    assert not os.path.exists(os.path.dirname(home)), home
    shutil.rmtree(d)


@test
def network_false_leaves_the_server_only_its_own_loopback():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    target = "127.0.0.1:%d" % listener.getsockname()[1]
    try:
        with gk.Session(probe_policy()) as s:
            host = probe(s, connect=[target])
        with gk.Session(probe_policy({"network": False})) as s:
            alone = probe(s, connect=[target])
    finally:
        listener.close()
    assert host["connect"][target] == "ok", host
    assert len(host["interfaces"]) >= 1, host
    assert alone["interfaces"] == ["lo"], alone
    assert alone["connect"][target] == "ECONNREFUSED", alone


@test
def a_server_that_detaches_dies_with_the_appliance():
    with gk.Session(probe_policy()) as s:
        inside = s.cell_json("import json\nprint(json.dumps(await toy.detach()))")["pid"]
        # the pid it reports is its own namespace's; the host's, by its cgroup
        mine = gk.jail_processes(s.proc.pid, "toy")
        pid = [k for k, (ns, _) in mine.items() if ns == inside]
        assert len(pid) == 1, (inside, mine)
        pid = pid[0]
        assert alive(pid), pid
    deadline = time.time() + 30
    while alive(pid):
        assert time.time() < deadline, "the detached child %d outlived the appliance" % pid
        time.sleep(0.05)


def jail_cgroups(pid):
    """The cgroup directories of the upstream servers of appliance pid."""
    found = []
    for base in ("/sys/fs/cgroup/memory/appliance", "/sys/fs/cgroup/pids/appliance",
                 "/sys/fs/cgroup/appliance.upstreams"):
        if os.path.isdir(base):
            found += [os.path.join(base, d) for d in os.listdir(base)
                      if d.startswith("upstream-toy-%d-" % pid)]
    return found


@test
def a_killed_appliances_server_cgroups_are_removed_by_the_next_start():
    sig = probe_policy()
    s = gk.Session(sig)
    try:
        left = jail_cgroups(s.proc.pid)
        assert left, "no cgroup of the toy server of %d" % s.proc.pid
        servers = set()
        for d in left:
            with open(os.path.join(d, "cgroup.procs")) as f:
                servers |= {int(x) for x in f.read().split()}
        assert servers, left
    finally:
        s.proc.kill()
        s.proc.wait()
    deadline = time.time() + 30
    while [k for k in servers if alive(k)]:
        assert time.time() < deadline, "the toy server outlived its appliance"
        time.sleep(0.05)
    # nothing of the killed appliance removes them
    assert all(os.path.isdir(d) for d in left), left
    with gk.Session(sig) as s2:
        assert not [d for d in left if os.path.exists(d)], left
        assert "of appliances no longer running" in s2.log(), s2.log()
        mine = jail_cgroups(s2.proc.pid)
        assert mine, "the new appliance's server has no cgroup"
    assert not [d for d in mine if os.path.exists(d)], mine


@test
def root_only_when_the_policy_says_so_and_even_then_without_capabilities():
    with gk.Session(probe_policy({"user": "root"})) as s:
        got = probe(s)
        log = s.log()
    assert got["uid"] == 0 and got["cap_eff"] == "0000000000000000", got
    assert got["seccomp"] == 2 and got["no_new_privs"] == 1, got
    assert "runs as root (servers.toy.user)" in log, log
    # a user the machine does not have: the appliance does not start
    r = subprocess.run(gk.run_argv(probe_policy({"user": "appliance-nobody-here"})),
                       input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"no user appliance-nobody-here" in r.stderr, r.stderr


@test
def a_server_whose_program_is_hidden_is_refused_at_start():
    # a program kept in the trust directory would not exist for the server
    hidden = os.path.join(gk.work(), "trusted.d", "toy-server")
    sig = probe_policy({"command": [hidden]})
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"which is hidden from servers" in r.stderr, r.stderr
    # and a cwd there too
    sig = probe_policy({"cwd": os.path.join(gk.work(), "trusted.d")})
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"which is hidden from servers" in r.stderr, r.stderr


@test
def server_memory_works_confined_and_keeps_its_graph_where_its_user_may_write():
    gk.need(MEMORY)
    store = gk.server_dir("appliance-memory.")
    path = os.path.join(store, "graph.jsonl")
    sig = gk._kit.policy({"deadline_s": 60},
                         servers={"mem": {"command": [gk.node(), MEMORY],
                                          "env": ["MEMORY_FILE_PATH"]}},
                         tools={"mem.*": {"access": "write"}},
                         roles={"w": {"tools": ["mem.*"], "write": True}},
                         clients={"default_role": "w"})
    env = dict(os.environ, MEMORY_FILE_PATH=path)
    with gk.Session(sig, env=env) as s:
        got = s.cell_json("""
import json
await mem.create_entities(entities=[{"name": "cell", "entityType": "test",
                                     "observations": ["made under the filter"]}])
g = await mem.read_graph()
print(json.dumps(g))
""")
    names = [e["name"] for e in got["entities"]]
    assert names == ["cell"], got
    st = os.stat(path)
    assert st.st_uid in gk.SERVER_UIDS and st.st_gid == gk.upstream_user()[1], st
    assert "made under the filter" in open(path).read()
    shutil.rmtree(store)


def two_servers_policy(hostile=None, victim=None):
    """toy (the victim, given TOY_SECRET) and hostile (no network, limits of
    its own), under one policy."""
    srv = gk.toy_server()
    servers = {"toy": dict(srv, env=["TOY_SECRET"], **(victim or {})),
               "hostile": dict(srv, network=False, memory_mb=96, pids=40, **(hostile or {}))}
    return gk._kit.policy({"deadline_s": 60}, servers=servers,
                          tools={"toy.*": {"access": "read"}, "hostile.*": {"access": "read"}},
                          roles={"r": {"tools": ["toy.*", "hostile.*"]}},
                          clients={"default_role": "r"})


@test
def a_hostile_server_reaches_neither_another_server_nor_the_appliance():
    secret = "s3cret-%d" % os.getpid()
    env = dict(os.environ, TOY_SECRET=secret)
    with gk.Session(two_servers_policy(), env=env) as s:
        victim = probe(s)
        procs = gk.jail_processes(s.proc.pid, "toy")
        # the victim's server and its init, as the host numbers them
        targets = [str(k) for k in procs] + [str(s.proc.pid)]
        assert procs, "no process of the toy server"
        got = s.cell_json("import json\nprint(json.dumps(await hostile.probe(pids=%r)))"
                          % (targets,))
    # the secret is there to take: the victim has it
    assert victim["env"].get("TOY_SECRET") == secret, victim["env"]
    for pid in targets:
        r = got["reach"][pid]
        # environ, maps, mem (read and write) and kill(pid, 0): nothing
        assert r["environ"] != "ok" and r["maps"] != "ok" and r["mem"] != "ok", (pid, r)
        assert "mem_read" not in r and "mem_write" not in r, (pid, r)
        assert r["kill"] != "ok", (pid, r)
    # each its own uid, both from the range
    assert got["uid"] != victim["uid"], (got["uid"], victim["uid"])
    assert {got["uid"], victim["uid"]} <= set(gk.SERVER_UIDS), (got["uid"], victim["uid"])
    # it sees its own init and its own process, nothing of the host's
    seen = got["processes"]
    assert seen.get("1", "").split() == ["appliance-server-init", "2"], seen
    others = {k: v for k, v in seen.items() if k != "1"}
    assert others and all(v.startswith(gk.TOY) for v in others.values()), seen
    assert not any(secret in v or "appliance run" in v for v in seen.values()), seen


@test
def a_server_its_user_cannot_start_is_refused_at_start_and_by_check():
    closed = tempfile.mkdtemp(prefix="appliance-closed.")  # 0700, as /root is
    prog = os.path.join(closed, "toy-server")
    shutil.copy2(gk.TOY, prog)
    os.chmod(prog, 0o755)
    try:
        cases = [({"command": [prog]},
                  "servers.toy: %s cannot be run as uid " % prog,
                  "it may not search %s (owner uid 0, group 0, mode 0700); give that user "
                  "access (the group appliance-upstream, or o+x on the directories)" % closed),
                 ({"cwd": "/srv/appliance-none"},
                  "servers.toy: its cwd /srv/appliance-none cannot be entered as uid ",
                  "/srv/appliance-none does not exist; create it, or change "
                  "servers.toy.cwd")]
        for server, head, tail in cases:
            sig = probe_policy(server)
            r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
            err = r.stderr.decode()
            assert r.returncode == 1 and head in err and tail in err, err
            assert "(its own), group appliance-upstream" in err, err
            c = subprocess.run(gk._kit.argv(sig, "check"), capture_output=True, timeout=600)
            out = c.stdout.decode()
            assert c.returncode == 1 and head in out and tail in out, out
    finally:
        shutil.rmtree(closed)


@test
def two_servers_naming_one_user_are_refused():
    doc = {"policy_version": 1, "serial": 1, "expires": "2099-01-01T00:00:00Z",
           "image": {"layout": "/nonexistent", "digest": "sha256:" + "0" * 64},
           "limits": {"deadline_s": 20},
           "servers": {"a": dict(gk.toy_server(), user="nobody"),
                       "b": dict(gk.toy_server(), user="nobody")}}
    with tempfile.TemporaryDirectory(prefix="appliance-users.") as d:
        path = os.path.join(d, "p.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = subprocess.run([APPLIANCE, "sign", "--secret",
                            os.path.join(gk._kit.dir(), "k.key"), path],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r
    assert ("servers.a.user and servers.b.user both name nobody: servers that share a "
            "user are not apart") in r.stderr, r.stderr

@test
def a_server_that_passes_the_check_but_cannot_exec_is_named_once_by_its_step():
    d = tempfile.mkdtemp(prefix="appliance-junk.")
    os.chmod(d, 0o755)
    junk = os.path.join(d, "junk-server")
    with open(junk, "wb") as f:
        f.write(b"\x7fELF not a program at all\n")  # executable, and no format the kernel knows
    os.chmod(junk, 0o755)
    try:
        sig = probe_policy({"command": [junk]})
        with gk.Session(sig) as s:
            log = s.log()
    finally:
        shutil.rmtree(d)
    lines = [l for l in log.splitlines() if "upstream toy is not available" in l]
    assert len(lines) == 1, log
    # the step that failed, in its own words, and the reason once
    assert lines[0].endswith("upstream toy is not available: could not start: executing %s: "
                             "Exec format error" % junk), lines[0]
    assert lines[0].count("Exec format error") == 1, lines[0]


if __name__ == "__main__":
    main(globals())
