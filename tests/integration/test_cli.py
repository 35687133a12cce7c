"""test_cli.py: the command line as a new user meets it: `--version`, `-V`
and `version`; `help COMMAND`, `COMMAND --help` and `-h` for every command;
and the man page, docs/appliance.1.

The options are not listed here by hand: they are read from the parsers
themselves. Every parser in cmd/appliance/*.c has a `static const struct
option NAME[] = {...}` table whose entries spell each long option without
its dashes ({"trust-dir", required_argument, ...}); the table is tied to its
command by the function it is in (PARSERS below, which must name every
table found, and no table that is gone). Every string literal of those files
is scanned too, for each "--name" it mentions, so that no message names an
option that does not exist or that the man page leaves out. Each option must
appear in that command's own help text and in its section of the man page,
and the checker is run against the man page with each option taken out, to
show that it would notice.

`audit show --tool NAME` is run on a log written here line by line (no
appliance has run a code tool yet to write one): it keeps exactly the lines
of that code tool's runs, with and without --runs, and a NAME that is no
code tool's name is a usage error.

Needs only the built binary (APPLIANCE_BIN, else build/appliance), groff and
man: no image, no sandbox.
"""

import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import main, skip, test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APPLIANCE = os.environ.get("APPLIANCE_BIN") or os.path.join(ROOT, "build", "appliance")
CMD_DIR = os.path.join(ROOT, "cmd", "appliance")
MAN = os.path.join(ROOT, "docs", "appliance.1")
RUNSC = "/usr/bin/runsc"  # POLICY_RUNSC_DEFAULT
LIBRARIES = ("jansson", "libsodium", "libcurl", "libmicrohttpd", "libseccomp", "libarchive",
             "libpcre2-8")

# Every command and subcommand with a help text of its own.
COMMANDS = ("image", "image verify", "cell", "run", "status", "reload", "stubs", "check",
            "init", "keygen", "sign", "verify", "audit", "audit init", "audit verify",
            "audit show", "token", "cluster-key", "version", "help")

# (file, function, table) of each option table -> the command it parses.
PARSERS = {
    ("main.c", "cmd_image_verify", "opts"): "image verify",
    ("cell_cmd.c", "args_parse", "opts"): "cell",
    ("run_cmd.c", "args_parse", "opts"): "run",
    ("run_cmd.c", "args_parse", "stubs_opts"): "stubs",
    ("status_cmd.c", "args_parse", "status_opts"): "status",
    ("status_cmd.c", "args_parse", "reload_opts"): "reload",
    ("check_cmd.c", "args_parse", "opts"): "check",
    ("init_cmd.c", "args_parse", "opts"): "init",
    ("policy_cmds.c", "cmd_keygen", "opts"): "keygen",
    ("policy_cmds.c", "cmd_sign", "opts"): "sign",
    ("policy_cmds.c", "verify_args_parse", "opts"): "verify",
    ("audit_cmd.c", "audit_init", "opts"): "audit init",
    ("audit_cmd.c", "verify_args_parse", "opts"): "audit verify",
    ("audit_cmd.c", "audit_show_cmd", "opts"): "audit show",
}

# Long options every command takes without a table entry (cli_help_wanted),
# and the top-level spelling of `version`.
UNIVERSAL = ("help",)
TOP_LEVEL = ("version",)


def run(*args, env=None):
    return subprocess.run([APPLIANCE, *args], capture_output=True, text=True, timeout=60,
                          env=env or {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


def sources():
    return sorted(glob.glob(os.path.join(CMD_DIR, "*.c")))


def option_tables():
    """{command: [long option names]}, read from the struct option tables."""
    found = {}
    table = re.compile(r"static const struct option (\w+)\[\] = \{(.*?)\{NULL, 0, NULL, 0\}",
                       re.S)
    entry = re.compile(r'\{"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument')
    for path in sources():
        src = open(path).read()
        for m in table.finditer(src):
            funcs = re.findall(r"^(?:static )?int (\w+)\(", src[:m.start()], re.M)
            key = (os.path.basename(path), funcs[-1] if funcs else None, m.group(1))
            assert key in PARSERS, "an option table PARSERS does not know: %s" % (key,)
            found[PARSERS[key]] = entry.findall(m.group(2))
    missing = set(PARSERS.values()) - set(found)
    assert not missing, "PARSERS names tables that are gone: %s" % sorted(missing)
    return found


def literal_options():
    """Every --name mentioned in a C string literal of cmd/appliance."""
    token = re.compile(r'/\*.*?\*/|//[^\n]*|\'(?:[^\'\\\n]|\\.)*\'|"((?:[^"\\\n]|\\.)*)"', re.S)
    names = set()
    for path in sources():
        for m in token.finditer(open(path).read()):
            if m.group(1) is not None:
                names.update(re.findall(r"(?<![\w-])--([a-z][a-z0-9-]*)", m.group(1)))
    return names


def mentions(text, name):
    return re.search(r"(?<![\w-])--%s(?![\w-])" % re.escape(name), text) is not None


def help_text(cmd):
    """COMMAND --help, COMMAND -h and help COMMAND: one text, or a failure."""
    words = cmd.split()
    got = []
    for args in (words + ["--help"], words + ["-h"], ["help"] + words):
        r = run(*args)
        assert r.returncode == 0, (args, r.returncode, r.stderr)
        assert r.stderr == "", (args, r.stderr)
        got.append(r.stdout)
    assert got[0] == got[1] == got[2], (cmd, got)
    return got[0]


def man_source_text(src):
    """The man page's source with the escapes that matter here undone, so
    `\\-\\-trust\\-dir` reads --trust-dir."""
    src = re.sub(r"\\f[BIRP]|\\&|\\c", "", src)
    return src.replace("\\-", "-")


def man_sections(src):
    """{.SS title: its text} of the man page's source."""
    out, title = {}, None
    for line in man_source_text(src).splitlines():
        m = re.match(r'\.S[SH] "?([^"]*)"?$', line)
        if m:
            title = m.group(1) if line.startswith(".SS") else None
            if title:
                out[title] = ""
            continue
        if title:
            out[title] += line + "\n"
    return out


def man_render(src_path, width="300n"):
    """The page as text, lines long enough that no option is broken."""
    r = subprocess.run(["groff", "-man", "-Tascii", "-rLL=" + width, "-P-cbou", src_path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def man_missing(rendered, sections, tables):
    """What the man page lacks: (command, option) pairs not in the command's
    section, and option names not in the rendered page at all."""
    lacking = []
    for cmd, names in tables.items():
        for name in list(names) + list(UNIVERSAL):
            if not mentions(sections.get(cmd, ""), name):
                lacking.append((cmd, name))
    everything = set(n for names in tables.values() for n in names)
    everything |= literal_options() | set(UNIVERSAL) | set(TOP_LEVEL)
    lacking += [(None, n) for n in sorted(everything) if not mentions(rendered, n)]
    return lacking


def need(tool):
    if not shutil.which(tool):
        skip("no %s (scripts/install-deps should install it)" % tool)


def appl_version():
    with open(os.path.join(ROOT, "pkg", "base", "version.h")) as f:
        return re.search(r'#define APPL_VERSION "([^"]+)"', f.read()).group(1)


# ---- version ----------------------------------------------------------------------

@test
def version_flags_print_the_appliance_runsc_and_libraries():
    outs = []
    for flag in ("--version", "-V", "version"):
        r = run(flag)
        assert r.returncode == 0, (flag, r.returncode, r.stderr)
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2], outs
    lines = outs[0].splitlines()
    assert lines[0] == "appliance " + appl_version(), lines
    runsc = [ln for ln in lines if ln.startswith("runsc ")]
    assert len(runsc) == 1 and runsc[0].startswith("runsc %s: " % RUNSC), lines
    assert runsc[0].endswith(", platform systrap"), runsc
    if os.access(RUNSC, os.X_OK):
        said = subprocess.run([RUNSC, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
        m = re.match(r"runsc version (\S+)", said)
        if m:
            assert (" %s, " % m.group(1)) in runsc[0] or (" %s," % m.group(1)) in runsc[0], \
                (runsc, said)
    for lib in LIBRARIES:
        got = [ln for ln in lines if ln.startswith(lib + " ")]
        assert len(got) == 1 and re.match(r"%s \d+\.\d+" % re.escape(lib), got[0]), (lib, lines)


@test
def version_says_so_when_runsc_is_missing():
    """/usr/bin hidden under an empty tmpfs in a mount namespace of its own:
    no runsc, and still exit 0 with the other lines."""
    if os.geteuid() != 0:
        skip("needs root for a mount namespace")
    need("unshare")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
                        'mount -t tmpfs none /usr/bin && exec "$0" --version', APPLIANCE],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("appliance "), lines
    assert "runsc %s: not found (cells cannot run), platform systrap" % RUNSC in lines, lines
    for lib in LIBRARIES:
        assert any(ln.startswith(lib + " ") for ln in lines), (lib, lines)


@test
def version_takes_no_arguments():
    r = run("version", "extra")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert "takes no arguments" in r.stderr, r.stderr


# ---- help -------------------------------------------------------------------------

@test
def every_command_has_its_own_help():
    for cmd in COMMANDS:
        text = help_text(cmd)
        first = "usage: appliance " + cmd.split()[0]
        assert text.startswith(first), (cmd, text)
        assert "\nexit status: " in text, (cmd, text)
        assert "--help, -h" in text, (cmd, text)
        for line in text.splitlines():
            assert len(line) <= 80, (cmd, line)
    # the only subcommand of image is its own help; audit's names the three
    assert help_text("image") == help_text("image verify")
    audit = help_text("audit")
    for sub in ("init", "verify", "show"):
        assert "appliance audit %s " % sub in audit, audit
    # the texts the other tests rely on
    assert "self-test" in help_text("check")
    assert help_text("token").startswith("usage: appliance token NAME ROLE\n")


@test
def help_alone_prints_the_general_usage():
    outs = [run(*args) for args in (["help"], ["--help"], ["-h"])]
    for r in outs:
        assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
    text = outs[0].stdout
    assert text.startswith("usage: appliance COMMAND [ARGS]\n"), text
    for cmd in COMMANDS:
        assert re.search(r"^  %s\b" % re.escape(cmd), text, re.M), (cmd, text)
    assert "check --policy" in text and "token NAME ROLE" in text, text
    assert "--version" in text and "exit status" in text, text


@test
def help_for_an_unknown_command_is_a_usage_error():
    for args, said in ((["help", "nosuch"], 'no command "nosuch"'),
                       (["help", "audit", "nosuch"], 'audit has no subcommand "nosuch"'),
                       (["help", "run", "extra"], 'run has no subcommand "extra"'),
                       (["help", "audit", "init", "extra"], "at most one SUBCOMMAND")):
        r = run(*args)
        assert r.returncode == 2, (args, r.returncode, r.stderr)
        assert r.stdout == "", (args, r.stdout)
        assert r.stderr.startswith("appliance: help: ") and said in r.stderr, (args, r.stderr)
    r = run("nosuch")
    assert r.returncode == 2 and "unknown command" in r.stderr, r.stderr
    r = run()
    assert r.returncode == 2 and "no command given" in r.stderr, r.stderr


@test
def help_is_not_taken_from_an_option_value():
    """`--state-dir --help` names a directory: no help, the usual usage error
    (run needs --policy), and an abbreviation is still refused."""
    r = run("run", "--state-dir", "--help")
    assert r.returncode == 2 and "needs --policy" in r.stderr, (r.returncode, r.stderr)
    assert r.stdout == "", r.stdout
    r = run("run", "--pol", "x.sig")
    assert r.returncode == 2 and "spelled out in full" in r.stderr, r.stderr
    r = run("run", "--policy", "x.sig", "--help")
    assert r.returncode == 0 and r.stdout == help_text("run"), r.stderr


# ---- options, help texts and the man page -------------------------------------------

@test
def every_long_option_is_in_its_help_and_the_man_page():
    tables = option_tables()
    pairs = [(cmd, n) for cmd, names in tables.items() for n in names]
    names = set(n for _, n in pairs)
    # a scan that found next to nothing would prove nothing
    assert len(pairs) >= 30 and len(names) >= 15, (len(pairs), sorted(names))
    # every --name a message or usage text mentions is a real option
    literal = literal_options()
    assert len(literal) >= 15, sorted(literal)
    unknown = literal - names - set(UNIVERSAL) - set(TOP_LEVEL)
    assert not unknown, "strings name options no parser takes: %s" % sorted(unknown)
    for cmd, name in pairs:
        assert mentions(help_text(cmd), name), (cmd, name)
    # audit's own help lists what its subcommands take
    audit = help_text("audit")
    for cmd, name in pairs:
        if cmd.startswith("audit "):
            assert mentions(audit, name), (cmd, name)
    need("groff")
    src = open(MAN).read()
    lacking = man_missing(man_render(MAN), man_sections(src), tables)
    assert lacking == [], "missing from docs/appliance.1: %s" % lacking


@test
def the_man_page_check_notices_a_missing_option():
    """Each option taken out of a copy of the man page, in turn: the check
    above must name it."""
    need("groff")
    tables = option_tables()
    src = open(MAN).read()
    names = sorted(set(n for ns in tables.values() for n in ns))
    d = tempfile.mkdtemp(prefix="appliance-cli.")
    try:
        copy = os.path.join(d, "appliance.1")
        for name in names:
            spelled = "\\-\\-" + name.replace("-", "\\-")
            # only whole options: --trust, not the start of --trust-dir
            cut = re.sub(re.escape(spelled) + r"(?![\w\\])(?!\\-)", "\\-\\-gone", src)
            assert cut != src, name
            with open(copy, "w") as f:
                f.write(cut)
            lacking = man_missing(man_render(copy), man_sections(cut), tables)
            assert (None, name) in lacking, (name, lacking)
            assert any(n == name for c, n in lacking if c), (name, lacking)
    finally:
        shutil.rmtree(d)


@test
def the_man_page_renders_without_warnings():
    need("groff")
    r = subprocess.run(["groff", "-man", "-ww", "-z", MAN], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", (r.returncode, r.stderr)
    need("man")
    r = subprocess.run(["man", "-l", MAN], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "MANWIDTH": "80", "LANG": "C.UTF-8"})
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert "APPLIANCE(1)" in r.stdout and "SYNOPSIS" in r.stdout, r.stdout[:500]
    assert "EXIT STATUS" in r.stdout and "SEE ALSO" in r.stdout


@test
def the_man_page_covers_every_command_its_version_files_and_environment():
    src = open(MAN).read()
    sections = man_sections(src)
    for cmd in COMMANDS:
        if cmd in ("image", "audit"):
            continue  # their subcommands have the sections
        assert cmd in sections, (cmd, sorted(sections))
        assert mentions(sections[cmd], "help"), cmd
    th = re.search(r'^\.TH APPLIANCE 1 \S+ "appliance ([^"]+)"', src, re.M)
    assert th and th.group(1) == appl_version(), th and th.group(0)
    text = man_source_text(src)
    for part in ("EXIT STATUS", "ENVIRONMENT", "FILES", "SEE ALSO"):
        assert re.search(r"^\.SH %s$" % part, text, re.M), part
    for path in ("/etc/appliance/trusted.d", "/etc/appliance/policy.json.sig",
                 "/var/lib/appliance", "PREFIX/share/appliance", "appliance.service",
                 "/var/cache/appliance/images", "/run/appliance"):
        assert path in text, path
    # every variable the code reads by name (getenv, and the XDG names
    # appl_user_dir is given) is in ENVIRONMENT
    env = text.split("\n.SH ENVIRONMENT\n", 1)[1].split("\n.SH ", 1)[0]
    names = set()
    for path in glob.glob(os.path.join(ROOT, "pkg", "*", "*.c")) + sources():
        code = open(path).read()
        names.update(re.findall(r'getenv\("([A-Z_]+)"\)', code))
        names.update(re.findall(r'appl_user_dir\([^;]*?"(XDG_[A-Z_]+)"', code, re.S))
    assert {"HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CACHE_HOME"} <= names, names
    for name in sorted(names):
        assert re.search(r"^\.B %s$" % name, env, re.M), name


# ---- audit show --tool ----------------------------------------------------------------

PROGRAM = "sha256:" + hashlib.sha256(b"print('summary')\n").hexdigest()


def audit_log(path, events):
    """events ((ev, {members}), ...) written as a log by docs/audit.md:
    the five members first, each line chained to the one before."""
    prev, out = "0" * 64, []
    for n, (ev, members) in enumerate(events, 1):
        line = json.dumps(dict({"n": n, "prev": prev, "t": "2026-12-01T14:00:%02d.000Z" % n,
                                "ev": ev, "pid": 4242}, **members),
                          separators=(",", ":")).encode()
        prev = hashlib.blake2b(line, digest_size=32).hexdigest()
        out.append(line + b"\n")
    with open(path, "wb") as f:
        f.writelines(out)


def a_start(run, **more):
    return ("run.start", dict({"run": run, "client": "alice", "role": "analyst",
                               "revision": "2026-07-28", "code": "0" * 64,
                               "code_bytes": 17}, **more))


def a_call(run, tool, id=1):
    return [("call", {"run": run, "id": id, "tool": tool, "role": "analyst",
                      "access": "read", "args": "0" * 64, "args_bytes": 12,
                      "outcome": "sent"}),
            ("call.end", {"run": run, "id": id, "tool": tool, "outcome": "ok",
                          "result_bytes": 40, "ms": 3})]


def a_end(run):
    return ("run.end", {"run": run, "reason": "done", "ms": 90, "calls": 1,
                        "out_bytes": 8, "files": 0, "answered": True})


def shown(path, *args):
    r = run("audit", "show", *args, path)
    assert r.returncode == 0 and r.stderr == "", (args, r.returncode, r.stderr)
    return [ln.split("  ", 1)[1] for ln in r.stdout.splitlines()]


@test
def audit_show_tool_keeps_exactly_the_lines_of_that_code_tools_runs():
    """A code tool's run (summarize) interleaved with a run_python run and
    a run of another code tool, among the log's other lines: --tool keeps
    the run.start (with its tool and program), the run's calls and end,
    and the tool's refusal, nothing else."""
    tool, py, other = "aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"
    events = [("log.open", {"file": 1, "previous": None}),
              ("start", {"deployment": "prod", "key": "0123456789ABCDEF", "serial": 7,
                         "policy": "sha256:" + "1" * 64, "image": "sha256:" + "2" * 64,
                         "runsc": "runsc", "version": "0.9", "seal": False, "seal_s": 300}),
              ("auth", {"client": "alice", "peer": "unix", "outcome": "accepted"}),
              a_start(tool, tool="summarize", program=PROGRAM),
              a_start(py),
              a_start(other, tool="summarize_all", program=PROGRAM),
              *a_call(py, "toy.echo"), *a_call(tool, "toy.echo"), *a_call(other, "toy.echo"),
              a_end(py), a_end(tool), a_end(other),
              ("run.refused", {"run": "dddddddddddd", "client": "bob", "tool": "summarize",
                               "reason": "queue full"}),
              ("run.refused", {"run": "eeeeeeeeeeee", "client": "bob", "reason": "queue full"}),
              ("stop", {"reason": "client closed", "runs": 5})]
    d = tempfile.mkdtemp(prefix="appliance-cli.")
    try:
        log = os.path.join(d, "audit.log")
        audit_log(log, events)
        every = shown(log)
        assert len(every) == len(events), every
        start = ("run %s: client alice, role analyst, revision 2026-07-28, code 17 bytes, "
                 "tool summarize (program %s)" % (tool, PROGRAM))
        assert start in every, every
        assert ("run %s: client alice, role analyst, revision 2026-07-28, code 17 bytes"
                % py) in every, every
        assert "run dddddddddddd refused: client bob, tool summarize: queue full" in every
        want = [start,
                "  run %s call 1: toy.echo (read), 12 argument bytes: sent" % tool,
                "  run %s call 1: toy.echo: ok in 3 ms, 40 result bytes" % tool,
                "run %s end: done after 90 ms, 1 calls, 8 output bytes, 0 files, "
                "answered yes" % tool,
                "run dddddddddddd refused: client bob, tool summarize: queue full"]
        assert shown(log, "--tool", "summarize") == want, shown(log, "--tool", "summarize")
        assert shown(log, "--tool=summarize") == want
        assert shown(log, "--tool", "summarize_all")[0].endswith("tool summarize_all (program %s)"
                                                                 % PROGRAM)
        assert len(shown(log, "--tool", "summarize_all")) == 4
        assert shown(log, "--tool", "Summarize") == [] and shown(log, "--tool", "summ") == []
        runs = shown(log, "--runs", "--tool", "summarize")
        assert runs == ["run %s (tool summarize): client alice, role analyst, 2026-07-28, 17 "
                        "code bytes: toy.echo x1; 0 refused, 0 failed; done after 90 ms, 8 "
                        "output bytes, answered yes" % tool,
                        "run dddddddddddd (tool summarize): (no start recorded): no calls; 0 "
                        "refused, 0 failed; refused: queue full"], runs
        every_run = shown(log, "--runs")
        assert len(every_run) == 5 and every_run[1].startswith("run %s: client" % py), every_run
        # names no code tool can have, and the option spelled short: usage errors
        for args in (["--tool", ""], ["--tool", "a.b"], ["--tool", "x" * 65],
                     ["--tool", "sum mary"], ["--tool=a/b"], ["--tool", "a", "--tool", "b"],
                     ["--too", "summarize"], ["--tool"]):
            r = run("audit", "show", *args, log)
            assert r.returncode == 2 and r.stdout == "", (args, r.returncode, r.stdout)
            assert r.stderr.startswith("appliance: audit show: "), (args, r.stderr)
        r = run("audit", "show", "--tool", "a.b", log)
        assert "not a code tool's name" in r.stderr, r.stderr
        assert shown(log, "--tool", "x" * 64) == []
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
