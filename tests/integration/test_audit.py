"""test_audit.py: the audit log of real appliances, and attacks on it.

- every run and every call is recorded (who, which tool, outcome, sizes),
  code and arguments only as digests keyed with the installation's key;
- the log is checked twice: by `appliance audit verify`, and by this file's
  own reading of docs/audit.md (BLAKE2b from Python's hashlib), so the
  document is enough for another tool;
- tampering with a real sealed log: a byte edited, a line deleted, two
  swapped, the tail cut, a line spliced from another log, the head edited,
  a seal forged, the chain recomputed after an edit: each is detected;
- three appliances writing one log at once make one chain;
- a torn last line (an appliance killed mid-write: its batch announced
  in the head and cut short in the file, as a kill leaves them) is
  reported, and the next start continues after it with a `torn` line;
  lines someone appended, even chained, are taken by no appliance;
- a run cut short by the appliance's stop still gets its run.end;
- a log on a full tmpfs: write tools' calls refused (every one that went
  is on record as sent, every other as refused), no new cell, the client
  told why; the log resumes once there is room; the same for a log on a
  file system remounted read-only (root ignores file modes);
- a refusal's reason in the log holds nothing of the arguments (names,
  values, URIs), while the cell is told the detail;
- call.end records a tool error, a JSON-RPC error and a timeout, with ms;
- an idle sealing appliance seals its last lines within audit_seal_s;
- a log removed or cut is refused at start, and so is a sealing policy
  without its key; rotation by size is followed by verify;
- a sealed log cut after its first seal (later seals and write_note lines
  deleted, renumbered, rechained, head rewritten) fails verify --key,
  which names the missing epochs, and the next start is refused;
- two replicas' sealed logs (one rotated) collected into one directory
  with their heads and sealing states are checked by `verify DIR`, each
  on its own line and then summed up; a cut tail in one fails the
  directory while the other stays intact; a log whose newest file is
  missing leaves its rotated file and copies stray.

Runs as root; needs build/appliance, build/image and build/toy-server.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from cellkit import APPLIANCE
from harness import main, test
import gatewaykit as gk
from policykit import START_INPUT

STATE = "/var/lib/appliance"  # POLICY_STATE_DIR: the tests run as root
ZERO = "0" * 64


def tmpdir():
    d = tempfile.mkdtemp(prefix="appliance-audit-test.")
    os.chmod(d, 0o755)
    return d


def audit_policy(path, seal=False, limits=None, write=True, resources=False, tools=None):
    """The toy as server `toy` (reads, and write_note as a write; its
    resources readable when resources, and tools added to the policy's),
    role r, and the audit log at path."""
    audit = {"path": path}
    if seal:
        audit["seal"] = True
    toy = gk.toy_server()
    if resources:
        toy["resources"] = True
    return gk._kit.policy(dict({"deadline_s": 60}, **(limits or {})),
                          servers={"toy": toy},
                          tools=dict({"toy.*": {"access": "read"},
                                      "toy.write_note": {"access": "write"}}, **(tools or {})),
                          roles={"r": {"tools": ["toy.*"], "write": write}},
                          clients={"default_role": "r"}, audit=audit)


def state_id(path):
    return hashlib.blake2b(path.encode(), digest_size=32).hexdigest()[:32]


def head_path(path):
    return os.path.join(STATE, "audit", state_id(path) + ".head")


def install_key():
    with open(os.path.join(STATE, "audit.key")) as f:
        return bytes.fromhex(f.read().strip())


def h(data):
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def chain(path):
    """The log at path read by docs/audit.md alone: each line an object
    whose n and prev continue the line before. Returns the events."""
    out, prev, n = [], ZERO, 0
    for raw in lines_of(path):
        ev = json.loads(raw)
        assert list(ev)[:5] == ["n", "prev", "t", "ev", "pid"], ev
        if out or ev["ev"] != "log.open" or ev["previous"] is None:
            assert ev["n"] == n + 1 and ev["prev"] == prev, (ev, n, prev)
        n, prev = ev["n"], h(raw)
        out.append(ev)
    return out


def verify(*args):
    r = subprocess.run([APPLIANCE, "audit", "verify", *args], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout + r.stderr


def init_seal(path):
    r = subprocess.run([APPLIANCE, "audit", "init", path], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    keys = re.findall(r"\b[0-9a-f]{64}\b", r.stdout)
    assert len(keys) == 1, r.stdout
    return keys[0]


CALLS = """
SECRET_CODE_MARKER = 1
print(await toy.echo(text="SECRET_ARG_MARKER"))
await toy.write_note(text="a note")
try:
    await toy.echo(text=5)
except ToolError as e:
    print("refused:", e)
"""


def run_cells(sig, n=1, src=CALLS):
    with gk.Session(sig) as s:
        for _ in range(n):
            out = s.cell(src)
            assert "SECRET_ARG_MARKER" in out, out
        return s.proc.pid


@test
def every_run_and_call_is_recorded_without_code_or_arguments():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    pid = run_cells(audit_policy(log))
    raw = open(log, "rb").read()
    assert b"SECRET_CODE_MARKER" not in raw and b"SECRET_ARG_MARKER" not in raw, raw
    evs = chain(log)
    names = [e["ev"] for e in evs]
    assert names == ["log.open", "start", "run.start", "call", "call.end", "call", "call.end",
                     "call", "run.end", "stop"], names
    assert all(e["pid"] == pid for e in evs)
    start, rs = evs[1], evs[2]
    assert start["image"].startswith("sha256:") and start["policy"].startswith("sha256:")
    assert start["serial"] > 0 and start["runsc"] and start["seal"] is False, start
    assert rs["client"] == "stdio" and rs["role"] == "r" and rs["revision"] == "2025-11-25"
    key = install_key()
    code = CALLS.encode()
    assert rs["code_bytes"] == len(code)
    assert rs["code"] == hashlib.blake2b(code, digest_size=32, key=key).hexdigest()
    assert rs["code"] != h(code), "the digest must be keyed"
    echo, note, bad = evs[3], evs[5], evs[7]
    assert (echo["tool"], echo["access"], echo["outcome"]) == ("toy.echo", "read", "sent")
    args = json.dumps({"text": "SECRET_ARG_MARKER"}, separators=(",", ":")).encode()
    assert echo["args"] == hashlib.blake2b(args, digest_size=32, key=key).hexdigest()
    assert echo["args_bytes"] == len(args)
    assert (note["tool"], note["access"], note["outcome"]) == ("toy.write_note", "write", "sent")
    assert bad["outcome"] == "refused", bad
    assert bad["reason"] == ("refused: toy.echo: the arguments do not match the tool's "
                             "input schema (type)"), bad
    end = evs[4]
    assert end["outcome"] == "ok" and end["result_bytes"] > 0 and end["id"] == echo["id"]
    re_ = evs[8]
    assert re_["reason"] == "done" and re_["calls"] == 3 and re_["answered"] is True, re_
    assert evs[9]["reason"] == "client closed" and evs[9]["runs"] == 1
    assert all(e["run"] == rs["run"] for e in evs[2:9])
    rc, out = verify(log)
    assert rc == 0 and "chain intact" in out, out
    shutil.rmtree(d)


def sealed_log():
    """A sealed log written by two appliance sessions: its directory, path,
    key and policy."""
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    key = init_seal(log)
    sig = audit_policy(log, seal=True, limits={"audit_seal_lines": 4})
    run_cells(sig, 2)
    run_cells(sig, 1)
    return d, log, key, sig


class Sealed:
    """A sealed log made once, and its key."""
    made = None

    @classmethod
    def get(cls):
        if cls.made is None:
            cls.made = sealed_log()[:3]
        return cls.made


def tampered(edit):
    """A copy of the sealed log and its head, edit(lines) applied to the
    copy's lines (a list of bytes, changed in place); its verdict."""
    d, log, key = Sealed.get()
    w = tmpdir()
    copy, head = os.path.join(w, "audit.jsonl"), os.path.join(w, "head")
    shutil.copy(head_path(log), head)
    lines = lines_of(log)
    edit(lines, head)
    with open(copy, "wb") as f:
        f.write(b"".join(x + b"\n" for x in lines))
    rc, out = verify("--key", key, "--head", head, copy)
    shutil.rmtree(w)
    return rc, out


def rechain(lines, start):
    """What an attacker who can write the file does after an edit: every
    hash from line start on recomputed (seals left as they were)."""
    for i in range(max(start, 1), len(lines)):
        ev = json.loads(lines[i])
        ev["n"] = json.loads(lines[i - 1])["n"] + 1
        ev["prev"] = h(lines[i - 1])
        lines[i] = json.dumps(ev, separators=(",", ":")).encode()


def head_rewrite(head, lines, path_bytes):
    """A head naming the last of lines, as the attacker would write it."""
    last = json.loads(lines[-1])
    body = "appliance-audit-head 1 %d 1 %d %d %s 0 0 %s " % (10 ** 6, last["n"], path_bytes,
                                                           h(lines[-1]), ZERO)
    slot = (body + h(body.encode())[:16] + "\n").encode().ljust(512, b"\0")
    with open(head, "wb") as f:
        f.write(slot)


@test
def a_real_sealed_log_verifies_and_every_tampering_is_detected():
    d, log, key = Sealed.get()
    evs = chain(log)
    seals = [e for e in evs if e["ev"] == "seal"]
    assert len(seals) >= 3 and [s["epoch"] for s in seals] == list(range(len(seals))), seals
    rc, out = verify("--key", key, log)
    assert rc == 0 and "sealed through line %d" % seals[-1]["n"] in out, out
    rc, out = verify(log)
    assert rc == 0, out  # seals counted, not checked, without the key

    first_run = next(i for i, x in enumerate(lines_of(log)) if b'"ev":"run.start"' in x)

    def byte_edited(lines, head):
        lines[first_run] = lines[first_run].replace(b'"stdio"', b'"stdiO"')
    rc, out = tampered(byte_edited)
    assert rc == 1 and ":%d:" % (first_run + 2) in out, out

    def deleted(lines, head):
        del lines[4]
    assert tampered(deleted)[0] == 1

    def swapped(lines, head):
        lines[4], lines[5] = lines[5], lines[4]
    assert tampered(swapped)[0] == 1

    def cut(lines, head):
        del lines[-2:]
    rc, out = tampered(cut)
    assert rc == 1 and "cut" in out, out

    def spliced(lines, head):
        other = lines_of(os.path.join(tmp_other_log(), "audit.jsonl"))
        lines[6] = other[2]
    assert tampered(spliced)[0] == 1

    def head_edited(lines, head):
        with open(head, "r+b") as f:
            data = bytearray(f.read())
            for slot in (0, 512):  # a digit of N changed in every slot
                if data[slot:slot + 21] != b"appliance-audit-head ":
                    continue
                i = data.index(b" ", slot + 30)
                data[i + 1] = ord("9") if data[i + 1] != ord("9") else ord("8")
            f.seek(0)
            f.write(bytes(data))
    rc, out = tampered(head_edited)
    assert rc == 1 and "head" in out, out

    def head_earlier(lines, head):  # a valid head that names an earlier line
        head_rewrite(head, lines[:-3], sum(len(x) + 1 for x in lines[:-3]))
    rc, out = tampered(head_earlier)
    assert rc == 1 and "head" in out, out

    def seal_forged(lines, head):
        i = max(k for k, x in enumerate(lines) if b'"ev":"seal"' in x)
        ev = json.loads(lines[i])
        ev["mac"] = h(b"forged")
        lines[i] = json.dumps(ev, separators=(",", ":")).encode()
        rechain(lines, i + 1)
        head_rewrite(head, lines, sum(len(x) + 1 for x in lines))
    rc, out = tampered(seal_forged)
    assert rc == 1 and "seal" in out, out

    # Whoever can write the file and the head can recompute the chain; the
    # seals before the edit still give it away.
    def rewritten(lines, head):
        lines[first_run] = lines[first_run].replace(b'"stdio"', b'"other"')
        rechain(lines, first_run + 1)
        head_rewrite(head, lines, sum(len(x) + 1 for x in lines))
    rc, out = tampered(rewritten)
    assert rc == 1 and "seal" in out, out
    # ... and without the key, that rewrite passes the chain and head checks:
    # this is what sealing is for.

    def seals_removed(lines, head):  # every seal cut out, the chain recomputed
        lines[:] = [x for x in lines if b'"ev":"seal"' not in x]
        rechain(lines, 1)
        head_rewrite(head, lines, sum(len(x) + 1 for x in lines))
    rc, out = tampered(seals_removed)
    assert rc == 1 and "no seal of the key given" in out, out


@test
def a_log_cut_after_its_first_seal_fails_verify_and_refuses_the_start():
    """Root's cut: the lines to the first seal kept, every later seal and
    every write_note line deleted, the rest renumbered and rechained, the
    head rewritten. The chain, the head and the seal left all check; the
    sealing state, whose epoch root cannot set back, does not."""
    d, log, key, sig = sealed_log()
    rc, out = verify("--key", key, log)
    assert rc == 0 and "sealing state matches" in out, out
    lines = lines_of(log)
    epochs = sum(b'"ev":"seal"' in x for x in lines)
    first = next(i for i, x in enumerate(lines) if b'"ev":"seal"' in x)
    kept = lines[:first + 1] + [x for x in lines[first + 1:]
                                if b'"ev":"seal"' not in x and b'"toy.write_note"' not in x]
    rechain(kept, first + 1)
    cut = b"".join(x + b"\n" for x in kept)
    with open(log, "wb") as f:
        f.write(cut)
    head_rewrite(head_path(log), kept, len(cut))
    rc, out = verify("--key", key, log)
    assert rc == 1, out
    assert ("the log was cut after line %d, its last seal of key " % (first + 1)) in out, out
    assert ("is at epoch %d: the seals of epochs 1 to %d, and the lines sealed, are missing"
            % (epochs, epochs - 1)) in out, out
    rc, out = verify(log)  # without the key, nothing tells
    assert rc == 0, out
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"the audit log was cut: its sealing state records the " \
        b"seal of epoch %d at line " % (epochs - 1) in r.stderr, r.stderr
    assert b"appliance audit verify --key" in r.stderr, r.stderr
    assert open(log, "rb").read() == cut  # nothing sealed on top of the cut
    shutil.rmtree(d)


_other = []


def tmp_other_log():
    if not _other:
        d = tmpdir()
        run_cells(audit_policy(os.path.join(d, "audit.jsonl")))
        _other.append(d)
    return _other[0]


@test
def three_appliances_writing_one_log_make_one_chain():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log)
    sessions = [gk.Session(sig) for _ in range(3)]
    rids = [(s, s.start_cell(CALLS)) for s in sessions for _ in range(2)]
    for s, rid in rids:
        r = s.result(rid)
        assert r["error"] is None, r
    for s in sessions:
        s.close()
    evs = chain(log)
    assert len({e["pid"] for e in evs}) == 3
    assert sum(e["ev"] == "run.start" for e in evs) == 6
    assert sum(e["ev"] == "call" for e in evs) == 18
    assert sum(e["ev"] == "stop" for e in evs) == 3
    rc, out = verify(log)
    assert rc == 0, out
    shutil.rmtree(d)


def head_drop_newest(log):
    """What a kill between writing a batch and recording it leaves: the
    head's newest slot unwritten, so the slot that announced the batch is
    the head (docs/audit.md)."""
    path = head_path(log)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        gens = {off: int(data[off:off + 64].split(b" ")[2]) for off in (0, 512)
                if data[off:off + 21] == b"appliance-audit-head "}
        newest = max(gens, key=gens.get)
        data[newest] = ord("X")
        f.seek(0)
        f.write(bytes(data))


@test
def a_torn_last_line_is_reported_and_the_next_start_continues_after_it():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log)
    run_cells(sig)
    # Killed while writing its last batch (the stop line): 20 bytes of it
    # on disk, the batch announced in the head and never recorded.
    data = open(log, "rb").read()
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    fragment = data[last:last + 20]
    head_drop_newest(log)
    with open(log, "r+b") as f:
        f.truncate(last + 20)
    rc, out = verify(log)
    assert rc == 1 and "torn" in out, out
    run_cells(sig)
    evs = chain_with_torn(log, fragment)
    torn = [e for e in evs if e["ev"] == "torn"]
    assert len(torn) == 1 and torn[0]["bytes"] == len(fragment) + 1, torn
    rc, out = verify(log)
    assert rc == 0 and "torn" in out, out
    # A SIGKILL while serving leaves a chain that verifies (no stop line).
    s = gk.Session(sig)
    s.cell("print(1)")
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait()
    assert chain_with_torn(log, fragment)[-1]["ev"] == "run.end"
    rc, out = verify(log)
    assert rc == 0, out
    # Lines that continue the chain, appended by whoever can write the
    # file, are taken by no appliance: none announced them.
    lines = lines_of(log)
    forged = json.dumps({"n": json.loads(lines[-1])["n"] + 1, "prev": h(lines[-1]),
                         "t": "2026-01-01T00:00:00.000Z", "ev": "stop", "pid": 1,
                         "reason": "forged", "runs": 0}, separators=(",", ":")).encode()
    with open(log, "ab") as f:
        f.write(forged + b"\n")
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"no appliance announced" in r.stderr, r.stderr
    rc, out = verify(log)
    assert rc == 1 and "head" in out, out
    shutil.rmtree(d)


def chain_with_torn(path, fragment):
    """chain() of a log holding one acknowledged fragment."""
    lines = lines_of(path)
    i = lines.index(fragment)
    ev = json.loads(lines[i + 1])
    assert ev["ev"] == "torn" and ev["prev"] == h(lines[i - 1]), ev
    d = tmpdir()
    p = os.path.join(d, "x")
    with open(p, "wb") as f:
        f.write(b"".join(x + b"\n" for k, x in enumerate(lines) if k != i))
    try:
        return chain(p)
    finally:
        shutil.rmtree(d)


@test
def a_removed_or_cut_log_and_a_seal_without_its_key_are_refused_at_start():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log)
    run_cells(sig)
    data = open(log, "rb").read()
    with open(log, "wb") as f:
        f.write(data[:data.rindex(b"\n", 0, len(data) - 1) + 1])
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"was cut" in r.stderr, r.stderr
    os.unlink(log)
    r = subprocess.run(gk.run_argv(sig), input=START_INPUT, capture_output=True, timeout=60)
    assert r.returncode != 0 and b"was removed" in r.stderr, r.stderr
    other = os.path.join(d, "sealed.jsonl")
    r = subprocess.run(gk.run_argv(audit_policy(other, seal=True)), input=START_INPUT,
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and b"audit init" in r.stderr, r.stderr
    assert not os.path.exists(other)
    # `appliance cell` writes no log, so it refuses a policy that has one.
    r = subprocess.run(gk._kit.argv(sig, "cell") + ["-"], input=b"print(1)",
                       capture_output=True, timeout=60)
    assert r.returncode != 0 and b"audit log" in r.stderr, r.stderr
    shutil.rmtree(d)


@test
def a_full_disk_stops_new_cells_and_write_calls_until_there_is_room():
    d = tmpdir()
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", mnt], check=True)
    try:
        log = os.path.join(mnt, "audit.jsonl")
        filler = os.path.join(mnt, "filler")
        sig = audit_policy(log)
        with gk.Session(sig) as s:
            # A cell that calls, waits for the disk to fill, then tries
            # writes: each one's line must be on disk before it goes. (A
            # failed batch is cut back, which frees tmpfs pages, so a few
            # may still find room; the refused ones pile up in the queue
            # until no batch fits.)
            rid = s.start_cell("""
import time
print(await toy.echo(text="before"))
time.sleep(6)
ok = refused = 0
for i in range(60):
    try:
        await toy.write_note(text="during")
        ok += 1
    except ToolError as e:
        if "the audit log cannot be written" in str(e):
            refused += 1
print("writes", ok, refused)
time.sleep(8)
""")
            wait_for(lambda: b'"toy.echo","role":"r","access":"read"' in open(log, "rb").read(),
                     "the first call's line")
            fill(filler)
            needle = "refused: toy.write_note: the audit log cannot be written"
            wait_for(lambda: sum(needle in x.decode("utf-8", "replace")
                                 for x in list(s.stderr) if x) >= 20, "write calls refused")
            fill(filler, append=True)  # what cutting failed batches back freed
            r = s.request("tools/call", gk.code("print(1)"))
            assert r["result"]["isError"] is True, r
            text = r["result"]["content"][0]["text"]
            assert "audit log cannot be written" in text and "No space left" in text, text
            os.unlink(filler)
            out = s.result(rid)["stdout"]
            ok, refused = map(int, re.search(r"writes (\d+) (\d+)", out).groups())
            assert refused >= 20 and ok + refused == 60, out
            assert s.cell("print(2)") == "2\n"
        evs = chain(log)
        names = [e["ev"] for e in evs]
        assert "resumed" in names, names
        res = evs[names.index("resumed")]
        assert "No space left" in res["error"], res
        notes = [e for e in evs if e["ev"] == "call" and e["tool"] == "toy.write_note"]
        # every write that went is on record as sent, every other as refused
        assert sum(e["outcome"] == "sent" for e in notes) == ok, notes
        assert sum(e["outcome"] == "refused" for e in notes) == refused, notes
        rc, out = verify(log)
        assert rc == 0, out
    finally:
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(d)


def wait_for(cond, what, timeout=60):
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "waited for %s" % what
        time.sleep(0.05)


def fill(path, append=False):
    """Write path until the file system is full."""
    with open(path, "ab" if append else "wb", buffering=0) as f:
        try:
            while f.write(b"\0" * 4096):
                pass
        except OSError as e:
            assert e.errno == 28, e


MARKED = r"""
import json
seen = []


async def attempt(f, *a, **kw):
    try:
        await f(*a, **kw)
        seen.append(["ok", ""])
    except ToolError as e:
        seen.append([e.kind, str(e)])

await attempt(toy.echo, text="a", SECRETKEY_MARKER=1)             # an undeclared name
await attempt(toy.echo, text={"SECRETKEY_MARKER": "SECRETVAL_MARKER"})  # the wrong type
await attempt(toy.sleep, ms="SECRETVAL_MARKER")
await attempt(toy.echo, text="SECRETVAL_MARKER" * 80)             # over max_args_bytes
await attempt(toy.write_note, text="SECRETVAL_MARKER")            # a yes nobody can give
await attempt(toy.read_resource, "toy://SECRETVAL_MARKER")        # sent: the toy has none
await attempt(toy.read_resource, "toy://SECRETVAL_MARKER\x7f")    # a control character
for i in range(5):                                                # past the budget of 10
    await attempt(toy.echo, text="SECRETVAL_MARKER")
print(json.dumps(seen))
"""


@test
def refusals_in_the_log_hold_nothing_of_the_arguments():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log, resources=True, limits={"max_args_bytes": 1024, "max_calls": 10},
                       tools={"toy.write_note": {"access": "write", "approval": True}})
    with gk.Session(sig) as s:
        seen = json.loads(s.cell(MARKED))
    # the cell is told what was wrong, names and all
    assert seen[0][0] == "refused" and 'property "SECRETKEY_MARKER" is not allowed' in \
        seen[0][1], seen
    assert seen[1][0] == "refused" and "/text: expected string" in seen[1][1], seen
    assert seen[2][0] == "refused" and "/ms: expected integer" in seen[2][1], seen
    assert seen[3][0] == "refused" and "over the cap of 1024" in seen[3][1], seen
    assert seen[4][0] == "declined", seen
    assert seen[5][0] == "error", seen
    assert seen[6][0] == "refused", seen
    assert [k for k, _ in seen[7:]] == ["ok", "ok", "ok", "refused", "refused"], seen
    assert "budget exhausted" in seen[-1][1], seen
    raw = open(log, "rb").read()
    assert b"MARKER" not in raw, [x for x in lines_of(log) if b"MARKER" in x]
    evs = chain(log)
    reasons = [e["reason"] for e in evs if e["ev"] == "call" and e["outcome"] == "refused"]
    schema = "the arguments do not match the tool's input schema"
    assert reasons[:3] == ["refused: toy.echo: %s (additionalProperties)" % schema,
                           "refused: toy.echo: %s (type)" % schema,
                           "refused: toy.sleep: %s (type)" % schema], reasons
    assert "over the cap of 1024" in reasons[3] and "no approval" in reasons[4], reasons
    assert "control character" in reasons[5] and "budget exhausted" in reasons[6], reasons
    assert len(reasons) == 7, reasons  # past the budget, only its first refusal
    read = [e for e in evs if e.get("method") == "resources/read"]
    assert len(read) == 2 and all(e["args_bytes"] > 0 for e in read), read
    rc, out = verify(log)
    assert rc == 0, out
    shutil.rmtree(d)


ENDS = """
import json
out = {}
for name, call in [("fail", lambda: toy.fail()), ("slept", lambda: toy.sleep(ms=300)),
                   ("late", lambda: toy.sleep(ms=8000)),
                   ("read", lambda: toy.read_resource("toy://none"))]:
    try:
        await call()
        out[name] = "ok"
    except ToolError as e:
        out[name] = e.kind
print(json.dumps(out))
"""


@test
def call_ends_record_errors_timeouts_and_how_long_each_took():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log, resources=True, limits={"call_timeout_s": 1})
    with gk.Session(sig) as s:
        seen = json.loads(s.cell(ENDS))
    assert seen == {"fail": "error", "slept": "ok", "late": "timeout", "read": "error"}, seen
    evs = chain(log)
    sent = {e["id"]: e for e in evs if e["ev"] == "call"}
    ends = [e for e in evs if e["ev"] == "call.end"]
    assert [sent[e["id"]]["tool"] for e in ends] == ["toy.fail", "toy.sleep", "toy.sleep",
                                                      "toy"], ends
    fail, slept, late, read = ends
    # the tool's own isError; a JSON-RPC error (the toy serves no resources)
    assert fail["outcome"] == "tool_error" and fail["result_bytes"] > 0, fail
    assert read["outcome"] == "error" and read["result_bytes"] == 0, read
    assert sent[read["id"]]["method"] == "resources/read", sent[read["id"]]
    assert slept["outcome"] == "ok" and slept["ms"] >= 300, slept
    # the call's timeout (1 s) ends it before its 8 s are up
    assert late["outcome"] == "timeout" and late["ms"] >= 1000 and late["result_bytes"] == 0, \
        late
    assert all(isinstance(e["ms"], int) and e["ms"] >= 0 for e in ends), ends
    rc, out = verify(log)
    assert rc == 0, out
    shutil.rmtree(d)


@test
def an_idle_appliance_seals_its_last_lines_within_audit_seal_s():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    key = init_seal(log)
    # a seal by lines would take a million: only the timer (or the stop) seals
    sig = audit_policy(log, seal=True, limits={"audit_seal_s": 2,
                                                "audit_seal_lines": 1000000})

    def seal_after(n):
        return next((e for e in map(json.loads, lines_of(log))
                     if e["ev"] == "seal" and e["n"] > n), None)

    with gk.Session(sig) as s:
        for epoch in range(2):
            s.cell("print(1)")
            # run.end is on disk before the answer leaves
            end = [e for e in map(json.loads, lines_of(log)) if e["ev"] == "run.end"][-1]
            wait_for(lambda: seal_after(end["n"]), "a seal after line %d" % end["n"])
            seal = seal_after(end["n"])
            assert seal["n"] == end["n"] + 1, (end, seal)  # nothing else while idle
            rc, out = verify("--key", key, log)
            assert rc == 0 and "sealed through line %d" % seal["n"] in out, out
        assert s.proc.poll() is None  # sealed while running, not by the stop
    evs = chain(log)
    seals = [e for e in evs if e["ev"] == "seal"]
    assert [e["epoch"] for e in seals] == list(range(len(seals))), seals
    assert evs[-1]["ev"] == "seal" and evs[-2]["ev"] == "stop", evs[-2:]
    rc, out = verify("--key", key, log)
    assert rc == 0 and "sealed through line %d" % evs[-1]["n"] in out, out
    shutil.rmtree(d)


def remount(mnt, mode):
    """Remount mnt ro or rw; a remount ro waits out a batch being written
    (EBUSY while the log is open for writing)."""
    deadline = time.time() + 30
    while True:
        r = subprocess.run(["mount", "-o", "remount," + mode, mnt], capture_output=True,
                           text=True)
        if r.returncode == 0:
            return
        assert time.time() < deadline, r.stderr
        time.sleep(0.01)


@test
def a_read_only_log_stops_new_cells_and_calls_until_it_can_be_written():
    d = tmpdir()
    mnt = os.path.join(d, "mnt")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mnt], check=True)
    try:
        log = os.path.join(mnt, "audit.jsonl")
        sig = audit_policy(log, limits={"max_calls": 5000})
        with gk.Session(sig) as s:
            # Writes until one is refused, then reads until one goes again:
            # the test makes the log read-only and then writable under it.
            rid = s.start_cell("""
import time
print(await toy.echo(text="before"))
writes = 0
while writes < 2000:
    try:
        await toy.write_note(text="during")
        writes += 1
    except ToolError as e:
        print("write refused:", e)
        break
    time.sleep(0.02)
reads, why = 0, ""
while reads < 2000:
    try:
        await toy.echo(text="after")
        break
    except ToolError as e:
        reads += 1
        why = str(e)
    time.sleep(0.05)
print("reads refused", reads, why)
""")
            wait_for(lambda: b'"tool":"toy.write_note"' in open(log, "rb").read(),
                     "the first write's line")
            remount(mnt, "ro")
            needle = "refused: toy.echo: the audit log cannot be written"
            wait_for(lambda: sum(needle in x.decode("utf-8", "replace")
                                 for x in list(s.stderr) if x) >= 3, "reads refused")
            r = s.request("tools/call", gk.code("print(1)"))
            assert r["result"]["isError"] is True, r
            text = r["result"]["content"][0]["text"]
            assert "audit log cannot be written" in text and "Read-only" in text, text
            remount(mnt, "rw")
            out = s.result(rid)["stdout"]
            assert "write refused: refused: toy.write_note: the audit log cannot be " \
                "written" in out, out
            reads = int(re.search(r"reads refused (\d+) ", out).group(1))
            assert reads >= 3 and "the audit log cannot be written" in out, out
            assert s.cell("print(2)") == "2\n"
        evs = chain(log)
        names = [e["ev"] for e in evs]
        assert names.count("resumed") == 1, names
        res = evs[names.index("resumed")]
        assert "Read-only" in res["error"] and res["dropped"] == 0, res
        # the refused cell and every refused call are on record
        assert sum(e["ev"] == "run.refused" for e in evs) == 1, names
        echoes = [e for e in evs if e["ev"] == "call" and e["tool"] == "toy.echo"]
        assert sum(e["outcome"] == "refused" for e in echoes) == reads, echoes
        assert evs[-1]["ev"] == "stop", evs[-1]
        rc, out = verify(log)
        assert rc == 0 and "chain intact" in out, out
    finally:
        subprocess.run(["umount", "-l", mnt])
        shutil.rmtree(d)


@test
def a_run_the_stop_cut_short_ends_in_the_log_too():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    s = gk.Session(audit_policy(log))
    s.start_cell("import time\ntime.sleep(60)\n")
    wait_for(lambda: b'"ev":"run.start"' in open(log, "rb").read(), "the run's start")
    s.close()
    evs = chain(log)
    assert [e["ev"] for e in evs[-2:]] == ["run.end", "stop"], evs[-3:]
    assert evs[-2]["reason"] == "shutdown" and evs[-2]["answered"] is False, evs[-2]
    assert evs[-1]["reason"] == "client closed", evs[-1]
    shutil.rmtree(d)


@test
def rotation_starts_a_new_file_that_names_the_old_one():
    d = tmpdir()
    log = os.path.join(d, "audit.jsonl")
    sig = audit_policy(log, limits={"audit_rotate_kb": 16})
    with gk.Session(sig) as s:
        while not os.path.exists(log + ".1"):
            s.cell(CALLS)
        s.cell(CALLS)
    first = lines_of(log)[0]
    ev = json.loads(first)
    old = lines_of(log + ".1")
    assert ev["ev"] == "log.open" and ev["file"] == 2, ev
    assert ev["previous"] == {"name": "audit.jsonl.1", "n": json.loads(old[-1])["n"],
                              "hash": h(old[-1])}, ev
    assert ev["prev"] == h(old[-1])
    assert os.path.getsize(log + ".1") <= 16 * 1024
    rc, out = verify(log)
    assert rc == 0 and "2 files" in out, out
    shutil.rmtree(d)


@test
def a_directory_of_replicas_logs_is_checked_log_by_log():
    col = tmpdir()
    keys, made = [], []
    for name, rotate in (("a.jsonl", True), ("b.jsonl", False)):
        d = tmpdir()
        made.append(d)
        log = os.path.join(d, name)
        keys += ["--key", init_seal(log)]
        limits = {"audit_seal_lines": 4, "audit_rotate_kb": 16 if rotate else 65536}
        with gk.Session(audit_policy(log, seal=True, limits=limits)) as s:
            s.cell(CALLS)
            while rotate and not os.path.exists(log + ".1"):
                s.cell(CALLS)
        # as docs/audit.md says to collect them: the log's files under
        # their own names, its head and sealing state renamed NAME.head
        # and NAME.seal
        for f in os.listdir(d):
            if f == name or f.startswith(name + "."):
                shutil.copy(os.path.join(d, f), col)
        sid = os.path.join(STATE, "audit", state_id(log))
        shutil.copy(sid + ".head", os.path.join(col, name + ".head"))
        shutil.copy(sid + ".seal", os.path.join(col, name + ".seal"))
    assert os.path.exists(os.path.join(col, "a.jsonl.1"))
    rc, out = verify(*keys, col)
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 3, out
    for line, name in zip(lines, ("a.jsonl", "b.jsonl")):
        assert re.fullmatch(re.escape(os.path.join(col, name)) +
                            r": \d+ lines in \d+ files?, chain intact, head matches \(line \d+\), "
                            r"sealed through line \d+ \(\S+\), sealing state matches "
                            r"\(epoch \d+\)", line), out
    assert " in 1 file," not in lines[0], out  # a.jsonl reached its rotated file
    assert lines[2] == "%s: 2 logs, 2 intact, 0 with problems, 0 stray files" % col, out
    # one --head for a directory of logs, each with its own: a usage error
    rc, out = verify("--head", "/dev/null", col)
    assert rc == 2, out
    # b's tail cut: b fails, a is still intact, and so is the directory's verdict
    b = os.path.join(col, "b.jsonl")
    cut = lines_of(b)[:-1]
    with open(b, "wb") as f:
        f.write(b"".join(x + b"\n" for x in cut))
    rc, out = verify(*keys, col)
    lines = out.splitlines()
    assert rc == 1 and len(lines) == 3, out
    assert lines[0].startswith(os.path.join(col, "a.jsonl") + ": ") and "intact" in lines[0], out
    assert lines[1].startswith(b + ":") and "cut" in lines[1], out
    assert lines[2] == "%s: 2 logs, 1 intact, 1 with problems, 0 stray files" % col, out
    # a's newest file missing: what is left of it is stray, said by name
    os.unlink(os.path.join(col, "a.jsonl"))
    left = sorted(f for f in os.listdir(col) if f.startswith("a.jsonl."))
    rc, out = verify(*keys, col)
    assert rc == 1, out
    assert ("%s/a.jsonl.1: a rotated file that no log of this directory reaches through "
            "previous" % col) in out, out
    assert "%s/a.jsonl.head: a head with no log a.jsonl beside it" % col in out, out
    assert out.splitlines()[-1] == ("%s: 1 log, 0 intact, 1 with problems, %d stray files" %
                                    (col, len(left))), out
    for d in made + [col]:
        shutil.rmtree(d)


if __name__ == "__main__":
    try:
        main(globals())
    finally:
        if Sealed.made:
            shutil.rmtree(Sealed.made[0], True)
        for x in _other:
            shutil.rmtree(x, True)
