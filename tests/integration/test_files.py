"""test_files.py: files a cell leaves in /out, end to end.

A cell writes files under /out; when it ends, its runner sends them to the
host, which enforces limits.files itself, judges each file's type from its
bytes, makes each name safe, and returns each file as a content item of the
answer: an image as ImageContent, text as an embedded resource with its
text, anything else as one with its bytes. Files over the limits, and
entries that are not regular files, are listed in structuredContent.files
and not returned. The client here is the official TypeScript SDK
(tests/mcp-client.mjs), which also checks the result against run_python's
outputSchema; `appliance cell` prints only the list.

Runs as root with runsc (rootless too, for `appliance cell`); needs
build/appliance, build/image and tests/node_modules.
"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile

from harness import main, test
from pngkit import png_decode
from cellkit import in_both_modes, ok_stdout, run_cell
import gatewaykit as gk

# A PNG made with the standard library, 3x2 pixels of one colour.
PNG_CODE = r'''
import struct, zlib

def png(width, height, rgb):
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))
'''

# The runner's protocol descriptor for writing (docs/runner-protocol.md,
# Transport: 62 and 63 under the default RLIMIT_NOFILE of 64).
FORGE_CODE = r'''
import base64, json, os

def forge(msg):
    line = memoryview(json.dumps(msg).encode() + b"\n")
    while line:
        line = line[os.write(63, line):]
'''

RICH = PNG_CODE + FORGE_CODE + r'''
with open("/out/plot.png", "wb") as f:
    f.write(png(3, 2, (255, 128, 0)))
with open("/out/data.csv", "w") as f:
    f.write("x,y\n1,2\n3,4\n")
with open("/out/notes.svg", "w") as f:
    f.write('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>\n')
# The first bytes of an ELF binary, under a name that climbs out and claims
# to be an image, in a file line the code forges itself.
with open("/usr/bin/python3.11", "rb") as f:
    elf = f.read(64)
forge({"t": "file", "name": "../../x.png", "data": base64.b64encode(elf).decode(),
       "more": False})
print("written")
'''


def one_call(sig, src):
    """The SDK client's result of one run_python call."""
    out = gk.sdk(sig, [gk.code(src)])
    call = out["calls"][0]
    assert "result" in call, call
    return call["result"]


def policy(limits=None, **extra):
    return gk._kit.policy(dict({"deadline_s": 30}, **(limits or {})), **extra)


@test
def files_come_back_as_images_text_and_bytes_to_the_sdk_client():
    res = one_call(policy(), RICH)
    assert res["isError"] is False, res
    sc = res["structuredContent"]
    assert sc["stdout"] == "written\n" and sc["error"] is None, sc
    content = res["content"]
    assert [c["type"] for c in content] == ["text", "resource", "resource", "resource",
                                            "image"], content
    assert json.loads(content[0]["text"]) == sc

    # the forged ELF: a safe name, bytes by their content, never an image
    elf = content[1]["resource"]
    blob = base64.b64decode(elf["blob"], validate=True)
    assert elf["mimeType"] == "application/octet-stream" and blob[:4] == b"\x7fELF", elf
    assert "text" not in elf
    assert elf["uri"] == "appliance://out/%s/x.png" % hashlib.sha256(blob).hexdigest(), elf

    csv = content[2]["resource"]
    assert csv["mimeType"] == "text/csv" and csv["text"] == "x,y\n1,2\n3,4\n", csv
    assert csv["uri"].endswith("/data.csv") and "blob" not in csv, csv
    # an SVG is text to be read, never an image to be rendered
    svg = content[3]["resource"]
    assert svg["mimeType"] == "text/plain" and svg["text"].startswith("<svg"), svg

    image = content[4]
    assert image["mimeType"] == "image/png", image
    w, h, colour, filters, rows = png_decode(base64.b64decode(image["data"], validate=True))
    pixels = b"".join(rows)
    assert (w, h, colour) == (3, 2, 2) and pixels == bytes((255, 128, 0)) * 6, (w, h, pixels)
    assert filters == [0, 0], filters  # filter type None, as the cell wrote it

    listed = sc["files"]
    assert [(f["name"], f["type"], f["returned"]) for f in listed] == [
        ("x.png", "application/octet-stream", True), ("data.csv", "text/csv", True),
        ("notes.svg", "text/plain", True), ("plot.png", "image/png", True)], listed
    assert listed[3]["bytes"] == len(base64.b64decode(image["data"]))
    assert listed[3]["sha256"] == hashlib.sha256(base64.b64decode(image["data"])).hexdigest()
    assert all(set(f) == {"name", "bytes", "type", "sha256", "returned"} for f in listed)


@test
def files_past_the_limits_and_entries_that_are_not_files_are_listed_not_returned():
    src = r'''
import os
os.makedirs("/out/dir/sub")
open("/out/dir/sub/f", "w").write("x")
os.symlink("/etc/passwd", "/out/link")
os.mkfifo("/out/fifo")
open("/out/a.txt", "w").write("a" * 600)
open("/out/b.bin", "wb").write(b"\0" * 2000)
open("/out/c.txt", "w").write("c" * 1000)
open("/out/d.txt", "w").write("d" * 100)
open("/out/e.txt", "w").write("e")
'''
    res = one_call(policy({"files": {"max_count": 2, "max_bytes": 1000,
                                     "max_total_bytes": 1500}}), src)
    assert res["isError"] is False, res
    listed = {f["name"]: f for f in res["structuredContent"]["files"]}
    assert [f["name"] for f in res["structuredContent"]["files"]] == [
        "a.txt", "b.bin", "c.txt", "d.txt", "dir", "e.txt", "fifo", "link"], listed
    assert listed["a.txt"]["returned"] and listed["d.txt"]["returned"], listed
    want = {"b.bin": "max_bytes", "c.txt": "max_total_bytes", "dir": "directory",
            "e.txt": "max_count", "fifo": "fifo", "link": "symlink"}
    for name, reason in want.items():
        assert listed[name] == {"name": name, "returned": False, "reason": reason}, listed[name]
    texts = [c["resource"]["text"] for c in res["content"][1:]]
    assert texts == ["a" * 600, "d" * 100], [t[:10] for t in texts]


@test
def a_runner_that_sends_past_the_limits_is_held_to_them_by_the_host():
    # The code forges what an honest runner never sends: a file over
    # max_bytes, and more files than max_count.
    src = FORGE_CODE + r'''
big = base64.b64encode(b"x" * 48 * 1024).decode()
for i in range(3):
    forge({"t": "file", "name": "big", "data": big, "more": i < 2})
for name in ("one", "two", "three"):
    forge({"t": "file", "name": name, "data": base64.b64encode(b"hi").decode(), "more": False})
forge({"t": "skip", "name": "/etc/../nothing", "why": "fifo"})
'''
    res = one_call(policy({"files": {"max_count": 2, "max_bytes": 100000,
                                     "max_total_bytes": 100000}}), src)
    files = res["structuredContent"]["files"]
    assert [(f["name"], f["returned"], f.get("reason")) for f in files] == [
        ("big", False, "max_bytes"), ("one", True, None), ("two", True, None),
        ("three", False, "max_count"), ("nothing", False, "fifo")], files
    assert len(res["content"]) == 3, res["content"]


@test
def a_forged_file_line_out_of_order_ends_the_run_as_a_protocol_violation():
    src = FORGE_CODE + r'''
forge({"t": "file", "name": "a", "data": "QQ==", "more": True})
forge({"t": "skip", "name": "b", "why": "fifo"})
import time
time.sleep(5)
'''
    res = one_call(policy(), src)
    sc = res["structuredContent"]
    assert res["isError"] is True and sc["reason"] == "protocol", sc
    assert "while another file's chunks said more follow" in sc["error"], sc
    assert sc["files"] == [] and len(res["content"]) == 1, res


@test
def max_count_zero_returns_no_file_and_says_so():
    src = 'open("/out/a.txt", "w").write("a")\n'
    res = one_call(policy({"files": {"max_count": 0}}), src)
    assert res["structuredContent"]["files"] == [
        {"name": "a.txt", "returned": False, "reason": "max_count"}], res
    assert len(res["content"]) == 1


@test
def the_runner_empties_out_without_following_links():
    # The runner's own function, called by the code with a channel of its
    # own: what it sends, and /out afterwards (a cell of a session would
    # find it so).
    src = r'''
import json, os, sys
runner = sys.modules["__main__"]
d = "/out"
for i in range(200):
    d = os.path.join(d, "d%03d" % i)
os.makedirs(d)
open(os.path.join(d, "deep"), "w").write("x")
os.makedirs("/tmp/keep")
open("/tmp/keep/k", "w").write("k")
os.symlink("/tmp/keep", "/out/d000/link")
os.chmod("/out/d000/d001", 0o500)
open("/out/top.txt", "w").write("top")

class Channel:
    files = (8, 100, 100)
    lines = []
    def send(self, m):
        self.lines.append(m)
    def out_flush(self):
        pass

chan = Channel()
runner._send_out_files(chan)
print(json.dumps({"left": os.listdir("/out"), "kept": os.listdir("/tmp/keep"),
                  "sent": chan.lines}))
'''
    res = one_call(policy(), src)
    got = json.loads(res["structuredContent"]["stdout"])
    assert got["left"] == [] and got["kept"] == ["k"], got
    assert got["sent"] == [{"t": "skip", "name": "d000", "why": "directory"},
                           {"t": "file", "name": "top.txt", "data": "dG9w", "more": False}], got
    # and the run's own turn found /out empty
    assert res["structuredContent"]["files"] == [], res


@test
def each_file_returned_is_in_the_audit_log():
    d = tempfile.mkdtemp(prefix="appliance-files-audit.")
    try:
        log = os.path.join(d, "audit.log")
        src = PNG_CODE + r'''
import os
open("/out/p.png", "wb").write(png(1, 1, (0, 0, 0)))
open("/out/t.txt", "w").write("hello")
os.mkdir("/out/d")
'''
        res = one_call(policy(audit={"path": log}), src)
        assert res["isError"] is False, res
        with open(log) as f:
            evs = [json.loads(line) for line in f]
        files = [e for e in evs if e["ev"] == "run.file"]
        end = [e for e in evs if e["ev"] == "run.end"][-1]
        listed = res["structuredContent"]["files"]
        assert [(e["name"], e["bytes"], e["type"], e["sha256"]) for e in files] == [
            (f["name"], f["bytes"], f["type"], f["sha256"]) for f in listed if f["returned"]]
        assert [e["name"] for e in files] == ["p.png", "t.txt"], files
        assert all(e["run"] == end["run"] for e in files) and end["files"] == 2, end
        assert files[1]["sha256"] == hashlib.sha256(b"hello").hexdigest(), files
    finally:
        shutil.rmtree(d, True)


BIG = r'''
import hashlib, json, os
# 2.5 MiB of text whose every byte escapes to two, and 2.5 MiB of bytes
open("/out/quotes.txt", "w").write('"\\' * (1280 * 1024))
data = os.urandom(2560 * 1024)
open("/out/noise.bin", "wb").write(data)
print(hashlib.sha256(data).hexdigest())
'''
CEILINGS = {"files": {"max_count": 64, "max_bytes": 5 * 1024 * 1024,
                      "max_total_bytes": 5 * 1024 * 1024}}
TOKEN = "appliance_test-token-files-0123456789"


def big_checked(res):
    assert res["isError"] is False, res["structuredContent"]
    sc = res["structuredContent"]
    assert [(f["name"], f["returned"]) for f in sc["files"]] == [
        ("noise.bin", True), ("quotes.txt", True)], sc["files"]
    blob = base64.b64decode(res["content"][1]["resource"]["blob"], validate=True)
    assert hashlib.sha256(blob).hexdigest() == sc["stdout"].strip() == sc["files"][0]["sha256"]
    assert res["content"][2]["resource"]["text"] == '"\\' * (1280 * 1024)


@test
def the_most_files_a_policy_allows_reach_a_client_over_stdio_and_http():
    # 5 MiB of files, 7.5 MiB in the answer: more than any request may be
    big_checked(one_call(policy(CEILINGS), BIG))
    port = gk.free_port()
    token = {"name": "files", "sha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
             "role": "nothing"}
    sig = policy(CEILINGS, roles={"nothing": {"tools": []}}, clients={"tokens": [token]},
                 http={"listen": ["127.0.0.1:%d" % port]})
    s = gk.Served(sig, port)
    try:
        r = subprocess.run([gk.node(), gk.CLIENT, "--timeout", "120000", "--url",
                            "http://127.0.0.1:%d/mcp" % port, "--token", TOKEN,
                            "--call", json.dumps(gk.code(BIG))], capture_output=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout.decode()[-3000:] + r.stderr.decode()[-3000:]
        big_checked(json.loads(r.stdout)["calls"][0]["result"])
    finally:
        s.stop()


@in_both_modes
def appliance_cell_prints_the_list_and_never_the_content(mode):
    src = 'open("/out/secret.bin", "wb").write(bytes(range(256)) * 4)\nprint("ok")\n'
    r = run_cell(src, mode=mode, deadline=20)
    assert ok_stdout(r) == "ok\n", r
    assert r["files"] == [{"name": "secret.bin", "bytes": 1024,
                           "type": "application/octet-stream",
                           "sha256": hashlib.sha256(bytes(range(256)) * 4).hexdigest(),
                           "returned": True}], r


if __name__ == "__main__":
    main()
