"""test_init.py: `appliance init`, which writes a starting policy from server
commands: the real binary starts the toy server and the npm reference
servers confined as run starts them, and the policy it writes is signed and
judged by `appliance verify` and `appliance check` as it is.

Runs as root (the servers' confinement and the trust directory need it)."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from harness import main, test
from cellkit import APPLIANCE, ROOT, digest
from policykit import Signer
import gatewaykit

_kit = Signer("appliance-init-test.")
LAYOUT = os.path.realpath(os.path.join(ROOT, "build", "image"))
MEMORY = os.path.join(gatewaykit.MODULES, "server-memory", "dist", "index.js")
MONTH = 30 * 86400

USAGE_TAIL = "\n(see appliance help)\n"
UNSUPPORTED = ("appliance: init: left out tool toy.unsupported: its input schema cannot be "
               "checked (unsupported): schema at /unevaluatedProperties: "
               "\"unevaluatedProperties\" is not supported\n")


def init(*args, image=LAYOUT, binary=APPLIANCE):
    argv = [binary, "init", "--deployment", _kit.deployment] + list(args)
    if image:
        argv += ["--image", image]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def toy_arg():
    return "toy=" + gatewaykit.need(gatewaykit.TOY)


def memory_arg():
    return "memory=%s,%s" % (gatewaykit.node(), gatewaykit.need(MEMORY))


def summary(servers, tools, reads, where):
    return ("appliance: init: wrote a policy of %d servers and %d tools (%d reads, %d writes) "
            "to %s; read it, then sign it with appliance sign\n"
            % (servers, tools, reads, tools - reads, where))


def sign_and_verify(path):
    """Sign path as it is; `appliance verify` must accept it."""
    r = subprocess.run([APPLIANCE, "sign", "--secret", os.path.join(_kit.dir(), "k.key"), path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # sign warns about what it can see offline; a policy from init gives it nothing
    assert r.stderr == "", r.stderr
    r = subprocess.run([APPLIANCE, "verify", "--trust-dir",
                        os.path.join(_kit.dir(), "trusted.d"), path + ".sig"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "deployment %s\n" % _kit.deployment in r.stdout, r.stdout
    return path + ".sig"


def fresh(name):
    path = os.path.join(_kit.dir(), name)
    assert not os.path.exists(path), path
    return path


@test
def help_says_what_it_does():
    r = subprocess.run([APPLIANCE, "init", "--help"], capture_output=True, text=True)
    h = subprocess.run([APPLIANCE, "help", "init"], capture_output=True, text=True)
    assert r.returncode == 0 and h.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout == h.stdout, (r.stdout, h.stdout)
    assert r.stdout.startswith(
        "usage: appliance init --server NAME=PROGRAM[,ARG]... [--server ...]\n"
        "                      [--image DIR] [--output FILE] [--deployment NAME]\n"
        "                      [--server-uids FIRST-LAST]\n"), r.stdout
    assert "\\, is a comma inside an argument, \\\\ a\n" in r.stdout, r.stdout


@test
def usage_errors_are_named_and_exit_2():
    cases = [
        ([], "needs --server NAME=PROGRAM[,ARG]... and no other arguments"),
        (["--server", toy_arg(), "extra"],
         "needs --server NAME=PROGRAM[,ARG]... and no other arguments"),
        (["--server", "toy"], "--server toy: must be NAME=PROGRAM[,ARG]..."),
        (["--server", "=/bin/true"], "--server =/bin/true: must be NAME=PROGRAM[,ARG]..."),
        (["--server", "x=/bin/echo,,a"],
         "--server x: an empty argument (two commas in a row, or one at either end)"),
        (["--server", "x=/bin/echo,a,"],
         "--server x: an empty argument (two commas in a row, or one at either end)"),
        (["--server", "x="],
         "--server x: an empty argument (two commas in a row, or one at either end)"),
        (["--server", "x=/bin/echo,a\\b"],
         "--server x: a backslash escapes only a comma (\\,) or a backslash (\\\\)"),
        (["--server", "x=/bin/true", "--server", "x=/bin/false"], "--server x: named twice"),
        (["--server", "x=/bin/echo," + ",".join(["a"] * 64)], "--server x: more than 64 arguments"),
        (["--serv", "x=/bin/true"], "options must be spelled out in full"),
        (["--server", "x=/bin/true", "--server-uids", "5-4"],
         "--server-uids 5-4: the range must lie within 1000-2147483646 and hold at most "
         "1048576 ids"),
        # judged by the policy's own parser, in its words
        (["--server", "Files=/bin/true"],
         "servers.Files: server names are [a-z][a-z0-9_]*, at most 32 characters"),
        (["--server", "x=node,index.js"], "servers.x.command[0]: must be an absolute path"),
        (["--server", "x=/usr/bin/../bin/node"],
         "servers.x.command[0]: must not hold . or .. components"),
    ]
    for args, said in cases:
        r = init(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stdout == "", (args, r.stdout)
        assert r.stderr == "appliance: init: " + said + USAGE_TAIL, (args, r.stderr)
    r = subprocess.run([APPLIANCE, "init", "--deployment", "Prod", "--server", "x=/bin/true",
                        "--image", LAYOUT], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr == (
        "appliance: init: deployment: a deployment is [a-z][a-z0-9_-]*, at most 64 "
        "characters" + USAGE_TAIL), r.stderr


@test
def toy_and_memory_make_a_policy_that_signs_and_checks():
    before = int(time.time())
    out = fresh("toy-memory.json")
    r = init("--server", toy_arg(), "--server", memory_arg(), "--output", out)
    after = int(time.time())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "", r.stdout
    assert r.stderr == UNSUPPORTED + summary(2, 19, 12, out), r.stderr
    assert os.stat(out).st_mode & 0o7777 == 0o644
    text = open(out).read()
    doc = json.loads(text)
    assert text.endswith("}\n"), text[-20:]
    assert doc["policy_version"] == 1 and doc["deployment"] == _kit.deployment, doc
    assert before <= doc["serial"] <= after, (before, doc["serial"], after)
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc["serial"] + MONTH))
    assert doc["expires"] == expires, (doc["expires"], expires)
    assert doc["image"] == {"layout": LAYOUT, "digest": digest()}, doc["image"]
    assert doc["servers"] == {
        "toy": {"command": [gatewaykit.TOY]},
        "memory": {"command": [gatewaykit.node(), MEMORY]}}, doc["servers"]
    tools = doc["tools"]
    # every tool by name, in the order of the command line and of each list
    toy_reads = ["add", "echo", "sleep", "peak", "bytes", "fail", "deep", "probe", "detach"]
    toy_all = ["add", "echo", "sleep", "peak", "bytes", "fail", "write_note", "deep", "probe",
               "detach"]
    mem_writes = ["create_entities", "create_relations", "add_observations", "delete_entities",
                  "delete_observations", "delete_relations"]
    mem_reads = ["read_graph", "search_nodes", "open_nodes"]
    names = ["toy." + t for t in toy_all] + ["memory." + t for t in mem_writes + mem_reads]
    assert list(tools) == names, list(tools)
    assert not any("*" in k for k in tools), tools
    for name, entry in tools.items():
        read = name.split(".", 1)[1] in toy_reads + mem_reads
        assert entry == {"access": "read" if read else "write"}, (name, entry)
    reads = [n for n in names if tools[n]["access"] == "read"]
    assert doc["roles"] == {"reader": {"tools": reads, "write": False},
                            "writer": {"tools": names, "write": True}}, doc["roles"]
    assert doc["clients"] == {"default_role": "reader"}, doc["clients"]
    assert "toy.unsupported" not in text
    sig = sign_and_verify(out)
    c = subprocess.run(_kit.argv(sig, "check"), capture_output=True, text=True, timeout=300)
    assert c.returncode == 0, c.stdout + c.stderr
    assert "check passed: 0 problems, 0 surprises, 0 warnings" in c.stdout, c.stdout
    assert "roles.reader: can call 12 tools" in c.stdout, c.stdout
    assert "roles.writer: can call 19 tools" in c.stdout, c.stdout


@test
def a_comma_in_an_argument_reaches_the_server():
    """server-filesystem serves a directory whose name holds a comma; the
    escaped comma is in its command, and it lists its tools from there."""
    served = gatewaykit.share_with_servers(
        os.path.realpath(tempfile.mkdtemp(prefix="appliance-init-a,b.")))
    try:
        arg = "files=%s,%s,%s" % (gatewaykit.node(), gatewaykit.need(gatewaykit.FILESYSTEM),
                                  served.replace("\\", "\\\\").replace(",", "\\,"))
        r = init("--server", arg)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["servers"]["files"]["command"] == [
            gatewaykit.node(), gatewaykit.FILESYSTEM, served], doc["servers"]
        tools = doc["tools"]
        assert tools["files.read_text_file"] == {"access": "read"}, tools
        assert tools["files.write_file"] == {"access": "write"}, tools
        reads = sum(1 for e in tools.values() if e["access"] == "read")
        assert r.stderr == summary(1, len(tools), reads, "standard output"), r.stderr
        out = fresh("files.json")
        with open(out, "w") as f:
            f.write(r.stdout)
        sign_and_verify(out)
    finally:
        shutil.rmtree(served, ignore_errors=True)


@test
def a_server_that_does_not_start_is_left_out_and_said():
    r = init("--server", "ghost=/nonexistent/ghost-server", "--server", toy_arg(),
             "--server", "quitter=/bin/false")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc["servers"]) == ["toy"], doc["servers"]
    assert all(k.startswith("toy.") for k in doc["tools"]), doc["tools"]
    lines = r.stderr.splitlines(True)
    assert len(lines) == 4, lines
    assert re.fullmatch(
        r"appliance: init: left out server ghost: /nonexistent/ghost-server cannot be run as "
        r"uid \d+ \(its own\), group appliance-upstream: /nonexistent does not exist; "
        r"install it there, or correct the command\n", lines[0]), lines[0]
    assert lines[1] == ("appliance: init: left out server quitter: it did not start and list "
                        "its tools: exited\n"), lines[1]
    assert lines[2] == UNSUPPORTED, lines[2]
    assert lines[3] == summary(1, 10, 9, "standard output"), lines[3]


@test
def when_no_server_starts_nothing_is_written():
    out = os.path.join(_kit.dir(), "none.json")
    r = init("--server", "ghost=/nonexistent/ghost-server", "--server", "quitter=/bin/false",
             "--output", out)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    lines = r.stderr.splitlines(True)
    assert len(lines) == 3, lines
    assert lines[0].startswith("appliance: init: left out server ghost: "), lines[0]
    assert lines[1].startswith("appliance: init: left out server quitter: "), lines[1]
    assert lines[2] == ("appliance: init: no server started, so no policy was written; "
                        "correct what is said above and try again\n"), lines[2]
    assert not os.path.exists(out)


@test
def output_never_replaces_a_file():
    out = os.path.join(_kit.dir(), "taken.json")
    with open(out, "w") as f:
        f.write("mine\n")
    said = ("appliance: init: %s exists, and init never replaces a file: name another with "
            "--output, or move it away\n" % out)
    r = init("--server", toy_arg(), "--output", out)
    assert r.returncode == 1 and r.stdout == "" and r.stderr == said, (r.returncode, r.stderr)
    assert open(out).read() == "mine\n"
    # a dangling symbolic link is a file there too: nothing is made through it
    link, target = os.path.join(_kit.dir(), "link.json"), os.path.join(_kit.dir(), "target")
    os.symlink(target, link)
    r = init("--server", toy_arg(), "--output", link)
    assert r.returncode == 1 and r.stderr == said.replace(out, link), r.stderr
    assert not os.path.lexists(target)
    leftovers = [n for n in os.listdir(_kit.dir()) if ".tmp." in n]
    assert leftovers == [], leftovers


@test
def the_installed_image_is_the_default():
    """A binary in PREFIX/bin takes PREFIX/share/appliance/image and the
    digest of its image.digest; without one, init says so."""
    r = init("--server", toy_arg(), image=None)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout)
    missing = os.path.join(os.path.dirname(APPLIANCE), "../share/appliance/image")
    assert r.stderr == ("appliance: init: no installed image at %s: No such file or directory; "
                        "name an image layout with --image\n" % missing), r.stderr
    prefix = tempfile.mkdtemp(prefix="appliance-init-prefix.")
    try:
        os.makedirs(os.path.join(prefix, "bin"))
        os.makedirs(os.path.join(prefix, "share", "appliance"))
        binary = os.path.join(prefix, "bin", "appliance")
        shutil.copy(APPLIANCE, binary)
        shutil.copytree(LAYOUT, os.path.join(prefix, "share", "appliance", "image"))
        digest_file = os.path.join(prefix, "share", "appliance", "image.digest")
        with open(digest_file, "w") as f:
            f.write(digest() + "\n")
        r = init("--server", toy_arg(), image=None, binary=binary)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["image"] == {"layout": os.path.join(prefix, "share", "appliance", "image"),
                                "digest": digest()}, doc["image"]
        # a digest file that does not match the layout is refused
        with open(digest_file, "w") as f:
            f.write("sha256:" + "0" * 64 + "\n")
        r = init("--server", toy_arg(), image=None, binary=binary)
        assert r.returncode == 1 and r.stdout == "", r.stderr
        assert r.stderr == ("appliance: init: no manifest with digest sha256:%s in the image "
                            "layout %s/share/appliance/image (it holds %s); name an image "
                            "layout with --image\n" % ("0" * 64, prefix, digest())), r.stderr
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


@test
def an_image_layout_is_judged_before_its_digest_is_written():
    bad = tempfile.mkdtemp(prefix="appliance-init-layout.")
    try:
        shutil.copytree(LAYOUT, os.path.join(bad, "image"))
        with open(os.path.join(bad, "image", "index.json"), "w") as f:
            f.write('{"schemaVersion":2,"manifests":[]}')
        r = init("--server", toy_arg(), image=os.path.join(bad, "image"))
        assert r.returncode == 1 and r.stdout == "", r.stderr
        assert r.stderr == ("appliance: init: image layout %s/image: index.json: manifests "
                            "must name exactly one image, not 0\n" % os.path.realpath(bad)), \
            r.stderr
        r = init("--server", toy_arg(), image=os.path.join(bad, "nothing"))
        assert r.returncode == 1 and r.stderr == (
            "appliance: init: --image %s/nothing: No such file or directory\n" % bad), r.stderr
    finally:
        shutil.rmtree(bad, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    finally:
        _kit.cleanup()
