"""test_check.py: `appliance check`, the operator's self-test, against the
real binary, real runsc, the real image and the toy server, with policies
signed for the test. The pure comparison of what a cell did with what was
expected is pkg/check/judge.c's, tested in tests/unit/test_check_judge.c; the
offline notes are pkg/policy/notes.c's (tests/unit/test_policy_notes.c).

Runs as root (the trust directory and the rollback floor are root's)."""

import glob
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import main, skip, test
from cellkit import APPLIANCE, LAYOUT, digest, ensure_user, rootless_files
from policykit import START_INPUT, Signer
import gatewaykit
import tlskit

_kit = gatewaykit._kit  # the toy policies' signer: one trust directory
OK, SURPRISE = "\u2714", "\u2718"


def check(sig, *calls, extra=(), timeout=120):
    """`appliance check` of sig, each call a (name, args) pair; the process
    result with text stdout and stderr."""
    argv = _kit.argv(sig, "check") + list(extra)
    for name, args in calls:
        argv += ["--call", "%s=%s" % (name, json.dumps(args))]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def lines_of(r, word):
    """The report's lines marked word ("ok", "problem", "warning")."""
    return [l[8:] for l in r.stdout.splitlines() if l.startswith(word.ljust(8))]


def table(r):
    """The table as (column, text) rows, column "work" or "deny", read by
    the header's width (a row's text may hold " | " itself)."""
    out = r.stdout.splitlines()
    head = [i for i, l in enumerate(out) if l.startswith("must work")]
    assert head, r.stdout
    width = out[head[0]].index(" | ")
    rows = []
    for l in out[head[0] + 2:]:
        if not l.strip():
            break
        left, right = l[:width].rstrip(), l[width + 3:].rstrip()
        rows += [("work", left)] if left else []
        rows += [("deny", right)] if right else []
    return rows


def in_full(r):
    """The rows printed in full below the table."""
    out = r.stdout.split("\nin full:\n", 1)
    return out[1].split("\n\n", 1)[0].splitlines() if len(out) == 2 else []


def row(r, label):
    """The full text of the row that starts with label (after its mark)."""
    for line in in_full(r) + [t for _, t in table(r)]:
        if line[2:].startswith(label):
            return line
    raise AssertionError("no row %r in:\n%s" % (label, r.stdout))


def problems_only(r, *expected):
    """r failed on exactly these problems (each a prefix) and ran no cell."""
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    got = lines_of(r, "problem")
    assert len(got) == len(expected), (got, expected)
    for want in expected:
        assert any(g.startswith(want) for g in got), (want, got)
    assert "cells not run" in r.stdout and "must work" not in r.stdout, r.stdout


def runsc_under(run_dir):
    """runsc processes working in run_dir (check's --runtime-dir)."""
    found = []
    for d in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"runsc") and any(run_dir.encode() in a for a in argv):
            found.append(int(d.split("/")[2]))
    return found


def left_behind(run_dir, before):
    """What a finished check left: runsc processes, instance directories,
    marker directories."""
    return runsc_under(run_dir), os.listdir(run_dir), markers() - before


def markers():
    return set(glob.glob("/var/tmp/appliance-check.*") + glob.glob("/tmp/appliance-check.*"))


V1_FREEZER = "/sys/fs/cgroup/freezer"


def pool_row_ok():
    """The pool row check prints where the freezer works: the file it read
    and what the kernel said, frozen while waiting and thawed once taken."""
    if os.path.isdir(V1_FREEZER):
        frozen, thawed = "freezer.state FROZEN", "freezer.state THAWED"
    else:
        frozen, thawed = "cgroup.events frozen 1", "cgroup.events frozen 0"
    return ("pool: a warm sandbox waited frozen (%s) and ran its cell once thawed (%s)"
            % (frozen, thawed))


def pool_lines(r):
    """Every line of the report about the pool, marked or not."""
    return [l for l in r.stdout.splitlines() if l[8:].startswith("pool:")]


# ---- a good policy ----------------------------------------------------------------

@test
def help_says_what_it_does():
    for argv in ([APPLIANCE, "check", "--help"], [APPLIANCE, "help", "check"]):
        r = subprocess.run(argv, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "self-test" in r.stdout and "--call SERVER.TOOL=JSON" in r.stdout, r.stdout
        assert "must be denied" in r.stdout or "must work" in r.stdout, r.stdout
    r = subprocess.run([APPLIANCE, "help"], capture_output=True, text=True)
    assert "check --policy" in r.stdout, r.stdout
    for bad in ([], ["--policy"], ["--policy", "x.sig", "--call", "toy.add"],
                ["--policy", "x.sig", "--call", "toy.add=[1]"],
                ["--policy", "x.sig", "--call", "add={}"], ["--pol", "x.sig"],
                ["--policy", "x.sig", "--trust", "k.pub"]):
        r = subprocess.run([APPLIANCE, "check"] + bad, capture_output=True, text=True)
        assert r.returncode == 2, (bad, r.returncode, r.stderr)


@test
def a_good_toy_policy_passes_with_every_row_as_expected():
    before, run_dir = markers(), tempfile.mkdtemp(prefix="appliance-check-run.")
    t = time.time()
    r = check(gatewaykit.toy_policy(), extra=["--runtime-dir", run_dir])
    took = time.time() - t
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines_of(r, "problem") == [], r.stdout
    ok = "\n".join(lines_of(r, "ok"))
    for part in ("signature:", "(the serial is not recorded)", "image: " + digest(),
                 "runtime: /usr/bin/runsc", "platform systrap", "cgroups:",
                 "rootfs: mounted by the Sentry from " + os.path.join(
                     "/var/cache/appliance/images", digest().replace(":", "-") + ".erofs"),
                 "servers.toy: started", "roles.r: can call"):
        assert part in ok, (part, r.stdout)
    # The toy's one tool whose schema cannot be checked came in by a wildcard.
    assert any(w.startswith('tools."toy.*": toy.unsupported is not offered')
               for w in lines_of(r, "warning")), r.stdout
    rows = table(r)
    work = [t for c, t in rows if c == "work"]
    deny = [t for c, t in rows if c == "deny"]
    assert len(work) == 3 and len(deny) == 13, rows
    assert all(t.startswith(OK + " ") for _, t in rows), r.stdout
    assert row(r, "arithmetic").endswith("printed 42"), r.stdout
    for label in ("TCP to host loopback", "UDP to host loopback", "TCP to host addresses",
                  "UDP to host addresses", "interfaces and routes", "raw sockets",
                  "host files", "host environment", "writes outside /tmp", "exec from /tmp",
                  "processes past limits.pids", "memory past limits.memory_mb",
                  "3.0 s deadline"):
        row(r, label)
    assert "interfaces: lo;" in row(r, "interfaces"), r.stdout
    assert "at most 64 tasks" in row(r, "processes") or "at most 6" in row(r, "processes")
    assert "check passed: 0 problems, 0 surprises" in r.stdout, r.stdout
    assert "took" in r.stdout.splitlines()[-1], r.stdout
    # A warm sandbox (limits.pool is 2 by default) read back from the
    # kernel: frozen while it waited, thawed once its run took it.
    assert pool_lines(r) == ["ok      " + pool_row_ok()], r.stdout
    print("# check took %.1f s" % took)
    # Nothing of it is left: its sandboxes, its instance, its marker.
    assert left_behind(run_dir, before) == ([], [], set())
    os.rmdir(run_dir)


@test
def a_call_works_from_a_cell_and_a_failing_one_is_a_surprise():
    r = check(gatewaykit.toy_policy(), ("toy.add", {"a": 2, "b": 3}), ("toy.fail", {}),
              ("toy.write_note", {"text": "x"}))
    assert r.returncode == 1, r.stdout + r.stderr
    assert lines_of(r, "problem") == [], r.stdout
    add = row(r, 'toy.add {"a":2,"b":3}')
    assert add.startswith(OK) and '{"sum": 5}' in add, add
    fail = row(r, "toy.fail {}")
    assert fail.startswith(SURPRISE) and "ToolError" in fail, fail
    note = row(r, 'toy.write_note {"text":"x"}')
    assert note.startswith(SURPRISE) and "not offered" in note and "write" in note, note
    others = [t for _, t in table(r) if "toy.fail" not in t and "toy.write_note" not in t]
    assert others and all(t.startswith(OK) for t in others), r.stdout
    assert "check failed: 0 problems, 2 surprises" in r.stdout, r.stdout


# ---- each mistake, found and named ------------------------------------------------

TOY_TOOLS = {"toy.*": {"access": "read"}, "toy.write_note": {"access": "write"}}


@test
def a_tool_pattern_no_server_has_is_named():
    sig = gatewaykit.policy({"toy": gatewaykit.toy_server()},
                            {"toy.*": {"access": "read"}, "toy.wirte_note": {"access": "write"}},
                            {"r": {"tools": ["toy.*", "toy.ad"], "write": True}}, "r")
    problems_only(check(sig), 'tools."toy.wirte_note": names no tool of server toy',
                  'roles.r.tools[1] "toy.ad": names no tool of server toy')


def toy_tools():
    """The toy server's tools, asked of it: (name, marked read-only)."""
    p = subprocess.Popen([gatewaykit.TOY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)

    def ask(i, method, params):
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                  "params": params}) + "\n")
        p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == i:
                return m["result"]
    ask(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "test_check", "version": "0"}})
    tools, cursor = [], None
    while True:
        page = ask(len(tools) + 2, "tools/list", {"cursor": cursor} if cursor else {})
        tools += page["tools"]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    p.stdin.close()
    p.wait(timeout=10)
    return [(t["name"], t.get("annotations", {}).get("readOnlyHint") is True) for t in tools]


@test
def a_read_wildcard_admitting_nothing_is_named():
    # Every tool the wildcard could admit (a read-only one) has its own
    # entry; what is left (write_note) is no read.
    tools = {"toy." + name: {"access": "read"} for name, ro in toy_tools() if ro}
    assert "toy.write_note" not in tools and "toy.add" in tools, tools
    sig = gatewaykit.policy({"toy": gatewaykit.toy_server()},
                            dict(tools, **{"toy.*": {"access": "read"}}),
                            {"r": {"tools": ["toy.*"]}}, "r")
    problems_only(check(sig), 'tools."toy.*": admits no tool of server toy',
                  # an entry of its own makes this one a problem (a warning under
                  # the wildcard): the policy names a tool it cannot offer
                  'tools."toy.unsupported": toy.unsupported is not offered')


@test
def a_role_that_can_call_nothing_is_named():
    sig = gatewaykit.policy({"toy": gatewaykit.toy_server()}, TOY_TOOLS,
                            {"r": {"tools": ["toy.*"]},
                             "idle": {"tools": ["toy.write_note"], "write": False}}, "r")
    problems_only(check(sig), "roles.idle: can call no tool")


@test
def a_server_whose_command_does_not_exist_is_named():
    sig = gatewaykit.policy({"toy": gatewaykit.toy_server(),
                             "ghost": {"command": ["/nonexistent/ghost-server"]}},
                            dict(TOY_TOOLS, **{"ghost.*": {"access": "read"}}),
                            {"r": {"tools": ["toy.*", "ghost.*"]}}, "r")
    r = check(sig)
    # found before anything starts, as run finds it, and named as run names it
    want = ("servers: servers.ghost: /nonexistent/ghost-server cannot be run as uid ")
    problems_only(r, want)
    line = lines_of(r, "problem")[0]
    assert line.endswith("(its own), group appliance-upstream: /nonexistent does not exist; "
                         "install it there, or correct the command"), line
    run = subprocess.run(_kit.argv(sig), input=START_INPUT.decode(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1 and line[len("servers: "):].split(" uid ")[0] in run.stderr, \
        run.stderr


@test
def what_run_would_refuse_is_named():
    sig = gatewaykit.policy({"toy": gatewaykit.toy_server(),
                             "web": {"url": "https://mcp.example.com/mcp",
                                     "headers": {"Authorization": "Bearer {env:CHECK_NO_VAR}"}}},
                            TOY_TOOLS, {"r": {"tools": ["toy.*"]}}, "r")
    problems_only(check(sig), "servers: servers.web.headers.Authorization: the environment "
                  "has no CHECK_NO_VAR")
    sig = _kit.policy(servers={"toy": gatewaykit.toy_server()}, tools=TOY_TOOLS,
                      roles={"r": {"tools": ["toy.*"]}}, clients={"default_role": "r"},
                      approvals={"command": "/nonexistent/approver"})
    problems_only(check(sig), "policy: %s: approvals.command /nonexistent/approver" % sig)
    audit_dir = tempfile.mkdtemp(prefix="appliance-check-audit.")
    try:
        sig = _kit.policy(servers={"toy": gatewaykit.toy_server()}, tools=TOY_TOOLS,
                          roles={"r": {"tools": ["toy.*"]}}, clients={"default_role": "r"},
                          audit={"path": os.path.join(audit_dir, "audit.jsonl")})
        problems_only(check(sig, ("toy.add", {"a": 1, "b": 1})), "audit.path:")
        assert not os.path.exists(os.path.join(audit_dir, "audit.jsonl"))
    finally:
        shutil.rmtree(audit_dir, True)


@test
def an_expired_policy_is_refused():
    r = check(_kit.policy(expires="2020-01-01T00:00:00Z"))
    assert r.returncode == 1, r.stdout
    got = lines_of(r, "problem")
    assert len(got) == 1 and got[0].startswith("signature: ") and "expired" in got[0], r.stdout
    assert lines_of(r, "ok") == [] and "must work" not in r.stdout, r.stdout


@test
def a_policy_signed_by_an_untrusted_key_is_refused():
    other = Signer("appliance-check-other.")
    try:
        sig = other.policy()
        with open(os.path.join(other.dir(), "trusted.d", "k.pub")) as f:
            keyid = f.readline().split()[-1].upper().zfill(16)
        r = check(sig)  # with the toy signer's trust directory
        assert r.returncode == 1, r.stdout
        got = lines_of(r, "problem")
        assert len(got) == 1 and "not trusted" in got[0] and keyid in got[0], (keyid, r.stdout)
        assert lines_of(r, "ok") == [], r.stdout
    finally:
        other.cleanup()


@test
def a_wrong_image_digest_is_named():
    sig = _kit.policy(image=(LAYOUT, "sha256:" + "ab" * 32))
    r = check(sig)
    assert r.returncode == 1, r.stdout
    got = lines_of(r, "problem")
    want = ("image.digest: no manifest with digest sha256:%s in the image layout %s "
            "(it holds %s)" % ("ab" * 32, LAYOUT, digest()))
    assert got == [want], (want, r.stdout)
    assert "must work" not in r.stdout, r.stdout


# ---- the rollback floor -----------------------------------------------------------

def run_one_cell(sig):
    """`appliance run` of sig, one cell; its stdout."""
    with gatewaykit.Session(sig) as s:
        return s.cell("print(6*7)")


@test
def the_serial_is_not_recorded_and_an_older_one_is_refused_like_run():
    older, middle, newer = _kit.policy(), _kit.policy(), _kit.policy()
    r = check(middle)
    assert r.returncode == 0, r.stdout + r.stderr
    # Had check recorded the middle serial, the older one could not run now.
    assert run_one_cell(older) == "42\n"
    assert run_one_cell(newer) == "42\n"
    r = check(middle)
    run = subprocess.run(_kit.argv(middle), stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 1 and run.stderr.startswith("appliance: "), run.stderr
    refusal = run.stderr.splitlines()[0][len("appliance: "):]
    assert r.returncode == 1 and lines_of(r, "problem") == ["signature: " + refusal], \
        (refusal, r.stdout)


# ---- the warm pool ----------------------------------------------------------------

@test
def a_warm_sandbox_that_cannot_be_frozen_is_a_problem_named():
    """The v1 freezer hierarchy hidden under an empty tmpfs, in a mount
    namespace of check's own: runsc still runs every cell, but no sandbox
    of it has a freezer, so a warm one would wait unfrozen."""
    if not os.path.isdir(V1_FREEZER):
        skip("no cgroup v1 freezer hierarchy to hide (a cgroup v2 host)")
    before, run_dir = markers(), tempfile.mkdtemp(prefix="appliance-check-run.")
    argv = _kit.argv(gatewaykit.toy_policy(), "check") + ["--runtime-dir", run_dir]
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        'mount -t tmpfs none "$1" && shift && exec "$@"', "sh", V1_FREEZER]
                       + argv, capture_output=True, text=True, timeout=180)
    assert r.returncode == 1, r.stdout + r.stderr
    [line] = pool_lines(r)
    assert line.startswith("problem pool: a warm sandbox cannot wait frozen: sandbox "), line
    assert " has no freezer: neither %s/appliance/" % V1_FREEZER in line, line
    assert "/sandbox/freezer.state nor " in line and "can be written" in line, line
    assert line.endswith("mount the cgroup v1 freezer hierarchy at %s, or use cgroup v2"
                         % V1_FREEZER), line
    # only the freezer is missing: every cell still did as expected
    assert lines_of(r, "problem") == [line[8:]], r.stdout
    assert all(t.startswith(OK + " ") for _, t in table(r)), r.stdout
    assert "check failed: 1 problem, 0 surprises" in r.stdout, r.stdout
    assert left_behind(run_dir, before) == ([], [], set())
    os.rmdir(run_dir)
    # and the real hierarchy was never touched: it is there as it was
    with open("/proc/self/mountinfo") as f:
        assert any(l.split()[4] == V1_FREEZER and " - cgroup " in l for l in f), V1_FREEZER


@test
def a_policy_without_a_pool_has_no_freeze_to_prove():
    r = check(gatewaykit.toy_policy(limits={"pool": 0}))
    assert r.returncode == 0, r.stdout + r.stderr
    assert pool_lines(r) == ["        pool: none (limits.pool is 0): every cell boots cold, "
                             "and no sandbox waits frozen"], r.stdout


@test
def the_telemetry_collector_is_sent_one_span_and_one_that_is_down_is_a_warning():
    from otlpkit import Collector
    col = Collector()
    try:
        doc = dict(servers={"toy": gatewaykit.toy_server()}, tools=TOY_TOOLS,
                   roles={"r": {"tools": ["toy.*"]}}, clients={"default_role": "r"})
        r = check(_kit.policy({"pool": 0}, telemetry={"otlp_endpoint": "http://127.0.0.1:%d"
                                                      % col.port}, **doc))
        want = ("telemetry: the collector at http://127.0.0.1:%d/v1/traces took a span "
                "(OTLP/HTTP, JSON)" % col.port)
        assert want in lines_of(r, "ok"), r.stdout + r.stderr
        assert r.returncode == 0, r.stdout + r.stderr
        assert [s["name"] for s in col.spans()] == ["appliance check"], col.bodies
    finally:
        col.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    r = check(_kit.policy({"pool": 0}, telemetry={"otlp_endpoint": "http://127.0.0.1:%d" % dead},
                          **doc))
    warned = [w for w in lines_of(r, "warning") if w.startswith("telemetry:")]
    assert warned and "did not take a span" in warned[0], r.stdout
    assert r.returncode == 0, r.stdout + r.stderr  # a warning: run would start


@test
def rootless_says_its_warm_sandboxes_wait_unfrozen():
    app, layout = rootless_files()
    user = ensure_user()
    home = tempfile.mkdtemp(prefix="appliance-check-rootless.")
    os.chown(home, user.pw_uid, user.pw_gid)
    try:
        sig = _kit.policy({"pool": 1}, image=(layout, digest()), runtime={"rootless": True})
        argv = [app] + _kit.argv(sig, "check")[1:] + [
            "--runtime-dir", os.path.join(home, "rt"), "--cache", os.path.join(home, "cache")]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd="/",
                           env={"PATH": "/usr/bin:/bin", "HOME": user.pw_dir},
                           user=user.pw_uid, group=user.pw_gid, extra_groups=[])
        assert ("runtime.rootless: no cgroups, so no freezer: warm sandboxes (limits.pool 1) "
                "wait unfrozen, each using CPU (docs/pool.md)") in lines_of(r, "warning"), \
            r.stdout + r.stderr
        assert pool_lines(r) == [], r.stdout
        assert r.returncode == 0 and "must work" in r.stdout, r.stdout  # the cells ran
    finally:
        shutil.rmtree(home, True)


# ---- code tools ---------------------------------------------------------------------

OBJECT = {"type": "object"}
INVOKER = {"inline": False, "code_tools": ["*"], "write": True}


def code_tools_policy(code_tools, server=None, invoker=None):
    """The toy (or server) with code_tools, an invoke-only role for them and
    the stdio client's role r."""
    return _kit.policy({"deadline_s": 30}, servers={"toy": server or gatewaykit.toy_server()},
                       tools=TOY_TOOLS, code_tools=code_tools,
                       roles={"inv": invoker or INVOKER, "r": {"tools": ["toy.*"]}},
                       clients={"default_role": "r"})


def recorded_toy(d):
    """The toy behind a shell that appends every line the appliance sends it
    to d/sent (the toy keeps its notes to itself: this is what it was asked)."""
    os.chmod(d, 0o755)  # the server runs as a uid of its own
    sent, script = os.path.join(d, "sent"), os.path.join(d, "toy.sh")
    open(sent, "w").close()
    os.chmod(sent, 0o666)
    with open(script, "w") as f:
        f.write("#!/bin/sh\ntee -a %s | %s\n" % (sent, gatewaykit.need(gatewaykit.TOY)))
    os.chmod(script, 0o755)
    return {"command": [script]}, sent


def read(path):
    with open(path) as f:
        return f.read()


def code_lines(r, word):
    return [l for l in lines_of(r, word) if l.startswith("code_tools.")]


@test
def code_tools_run_their_examples_once_and_make_no_write_call():
    d = tempfile.mkdtemp(prefix="appliance-check-toy.")
    try:
        server, sent = recorded_toy(d)
        sig = code_tools_policy([
            {"name": "sum_it", "description": "Add 2.",
             "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                              "required": ["a"]},
             "output_schema": {"type": "object", "properties": {"total": {"type": "integer"}},
                               "required": ["total"]},
             "code": "r = await toy.add(a=args['a'], b=2)\n{'total': r['sum']}",
             "uses": ["toy.add"], "example": {"a": 3}},
            {"name": "keep-note", "description": "Keep a note.", "input_schema": OBJECT,
             "code": "await toy.echo(text='before the write')\n"
                     "await toy.write_note(text='from the example')\n'written'",
             "uses": ["toy.echo", "toy.write_note"], "access": "write", "example": {}},
            {"name": "long", "description": "A long value.", "input_schema": OBJECT,
             "code": "'\u00e9' * 300", "uses": ["toy.add"], "example": {}},
            {"name": "plain", "description": "No example.", "input_schema": OBJECT,
             "code": "1 / 0\n", "uses": ["toy.add"]}], server=server)
        r = check(sig, timeout=300)
        asked = read(sent)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines_of(r, "problem") == [], r.stdout
    assert "must work" in r.stdout, r.stdout  # after the probes
    assert 'roles.inv: calls no tool itself ("inline": false); it may call 4 code tools' in \
        lines_of(r, "ok"), r.stdout
    assert code_lines(r, "warning") == [], r.stdout
    # in name order
    assert code_lines(r, "ok") == [
        "code_tools.keep-note: the example ran up to a write call, which check does not make "
        "(toy.write_note)",
        # a value's JSON is cut at 120 bytes, never inside a character
        'code_tools.long: the example returned a value (no output_schema): "' +
        "\u00e9" * 59 + "\u2026",
        "code_tools.plain: compiles (no example, so not run)",
        'code_tools.sum_it: the example returned a value that matches output_schema: '
        '{"total":5}'], r.stdout
    # the program's read went out, its write never did
    assert "before the write" in asked and '"add"' in asked, asked
    assert "write_note" not in asked and "from the example" not in asked, asked


@test
def a_code_tool_that_does_not_compile_or_fails_its_example_is_a_problem():
    tools = [
        {"name": "broken", "description": "A syntax error.", "input_schema": OBJECT,
         "code": "x = 1\ndef f(:\n    pass\n", "uses": ["toy.add"]},
        {"name": "mismatch", "description": "Not its output schema.", "input_schema": OBJECT,
         "output_schema": {"type": "object", "properties": {"n": {"type": "integer"}},
                           "required": ["n"]},
         "code": "{'n': 'seven'}", "uses": ["toy.add"], "example": {}},
        {"name": "raises", "description": "Raises.", "input_schema": OBJECT,
         "code": "raise ValueError('no \\x1b[31m')", "uses": ["toy.add"], "example": {}},
        {"name": "unnamed", "description": "No role names it.", "input_schema": OBJECT,
         "code": "'x' * 3", "uses": ["toy.add"], "example": {}}]
    r = check(code_tools_policy(tools, invoker={"inline": False,
                                                "code_tools": ["broken", "mismatch", "raises"]}),
              timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "must work" in r.stdout and "cells not run" not in r.stdout, r.stdout
    assert code_lines(r, "problem") == [
        "code_tools.broken: does not compile: SyntaxError: invalid syntax (line 2)",
        "code_tools.mismatch: the example failed: the program's value does not match its "
        "output_schema: /n: expected integer, got string",
        "code_tools.raises: the example failed: the program raised: ValueError: no "
        "\\x1b[31m"], r.stdout
    assert lines_of(r, "problem") == code_lines(r, "problem"), r.stdout
    assert code_lines(r, "warning") == ["code_tools.unnamed: no role may call it"], r.stdout
    assert code_lines(r, "ok") == [
        "code_tools.unnamed: compiles (no role may call it, so not run)"], r.stdout
    assert "check failed: 3 problems, 0 surprises" in r.stdout, r.stdout


@test
def a_signal_while_a_code_tool_runs_stops_it_and_the_check():
    before, run_dir = markers(), tempfile.mkdtemp(prefix="appliance-check-run.")
    d = tempfile.mkdtemp(prefix="appliance-check-toy.")
    try:
        server, sent = recorded_toy(d)
        sig = code_tools_policy([
            {"name": "slow", "description": "Sleeps.", "input_schema": OBJECT,
             "code": "await toy.sleep(ms=60000)\n1", "uses": ["toy.sleep"], "example": {}},
            {"name": "t2", "description": "Never reached.", "input_schema": OBJECT,
             "code": "2", "uses": ["toy.add"]}], server=server)
        p = subprocess.Popen(_kit.argv(sig, "check") + ["--runtime-dir", run_dir],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 240
        while '"sleep"' not in read(sent):  # the program's call reached the toy
            assert time.time() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    assert p.returncode == 1, (out, err)
    assert "must work" in out, out
    assert [l for l in out.splitlines() if "stopped by" in l] == \
        ["problem check: stopped by signal 15"], out
    assert not [l for l in out.splitlines() if "code_tools." in l], out
    assert left_behind(run_dir, before) == ([], [], set())
    os.rmdir(run_dir)


# ---- stopping -----------------------------------------------------------------------

@test
def a_signal_stops_the_check_and_leaves_nothing_behind():
    before, run_dir = markers(), tempfile.mkdtemp(prefix="appliance-check-run.")
    p = subprocess.Popen(_kit.argv(gatewaykit.toy_policy(), "check") +
                         ["--runtime-dir", run_dir], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not runsc_under(run_dir):  # the warm sandbox, the first, is booting
        assert time.time() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.02)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, (out, err)
    assert "check: stopped by signal 15" in out and "check failed" in out, out
    # the stop is said once, not as a failure of the pool's proof
    assert not [l for l in out.splitlines() if l.startswith("problem pool:")], out
    assert left_behind(run_dir, before) == ([], [], set())
    os.rmdir(run_dir)


def run_refuses(sig, want):
    """`appliance run` of sig refuses to start, saying want."""
    r = subprocess.run(_kit.argv(sig), input=START_INPUT.decode(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and want in r.stderr, (r.returncode, r.stderr[-2000:])


def http_check_policy(port, tls=None):
    token = {"name": "a", "sha256": hashlib.sha256(b"appliance_check-token").hexdigest(),
             "role": "r"}
    http = {"listen": ["127.0.0.1:%d" % port]}
    if tls:
        http["tls"] = tls
    return _kit.policy(servers={"toy": gatewaykit.toy_server()}, tools=TOY_TOOLS,
                       roles={"r": {"tools": ["toy.*"]}}, clients={"tokens": [token]},
                       http=http)


@test
def what_run_refuses_at_start_check_refuses_through_the_same_code():
    # a listener another process holds: run cannot bind it, and check tries
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    try:
        sig = http_check_policy(held.getsockname()[1])
        run_refuses(sig, "Address already in use")
        problems_only(check(sig), "http: ")
        assert "Address already in use" in lines_of(check(sig), "problem")[0]
    finally:
        held.close()
    # a TLS key others may read: run refuses it when it opens the front
    d = tempfile.mkdtemp(prefix="appliance-check-tls.")
    try:
        cert, key = tlskit.ca(d)
        os.chmod(key, 0o640)
        sig = http_check_policy(gatewaykit.free_port(), {"cert": cert, "key": key})
        run_refuses(sig, "has mode 0640")
        r = check(sig)
        problems_only(r, "http: ")
        assert "has mode 0640" in lines_of(r, "problem")[0], r.stdout
        # and once it is right, check opens the front and closes it again
        os.chmod(key, 0o600)
        r = check(sig)
        assert any(l.startswith("http: every listener binds, the TLS certificate and key load")
                   for l in lines_of(r, "ok")), r.stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)
    # an audit log whose directory does not exist, then one that was removed
    # after an appliance wrote it: run refuses both, and so does check,
    # which writes nothing
    d = tempfile.mkdtemp(prefix="appliance-check-audit.")
    try:
        for path, why, before in ((os.path.join(d, "nowhere", "audit.jsonl"),
                                   "the audit log's directory", None),
                                  (os.path.join(d, "audit.jsonl"),
                                   "the audit log was removed", "write, then remove")):
            sig = _kit.policy(servers={"toy": gatewaykit.toy_server()}, tools=TOY_TOOLS,
                              roles={"r": {"tools": ["toy.*"]}}, clients={"default_role": "r"},
                              audit={"path": path})
            if before:
                r = subprocess.run(_kit.argv(sig), input=START_INPUT, capture_output=True,
                                   timeout=120)
                assert r.returncode == 0 and os.path.exists(path), r.stderr[-2000:]
                r = check(sig)
                assert r.returncode == 0, r.stdout
                assert any(l.startswith("audit.path: %s would be continued" % path)
                           for l in lines_of(r, "ok")), r.stdout
                os.unlink(path)
            run_refuses(sig, why)
            r = check(sig)
            problems_only(r, "audit.path: ")
            assert why in lines_of(r, "problem")[0], r.stdout
            assert not os.path.exists(path)
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        _kit.cleanup()
