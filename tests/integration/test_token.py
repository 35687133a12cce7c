"""test_token.py: `appliance token NAME ROLE`, the bearer token of an HTTP
client and the clients.tokens entry that admits it; and `run`, which refuses
a policy that asks to be served over HTTP until it is.

The entry is signed into a policy and checked with `appliance verify`, so
what the command prints is what the policy parser takes; the hash is checked
here against the token's own text.
"""

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import main, test

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APPLIANCE = os.environ.get("APPLIANCE_BIN") or os.path.join(ROOT, "build", "appliance")
DIGEST = "sha256:" + "0" * 64
TOKEN = re.compile(r"^appliance_([A-Za-z0-9_-]+)$")


class Scratch:
    """An empty private directory, the cwd, HOME and TMPDIR of the command."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="appliance-token.")

    def path(self, name):
        return os.path.join(self.dir, name)

    def run(self, *args):
        env = {"PATH": "/usr/bin:/bin", "HOME": self.dir, "TMPDIR": self.dir}
        return subprocess.run([APPLIANCE, *args], capture_output=True, text=True,
                              cwd=self.dir, env=env)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir)


def token(s, name="ci-bot", role="operator"):
    """Run the command; its token and entry, checked for their form."""
    r = s.run("token", name, role)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    m = TOKEN.match(lines[0])
    assert m, lines[0]
    return lines[0], m.group(1), json.loads(lines[1]), r.stderr


@test
def a_token_is_long_random_and_its_hash_is_printed():
    with Scratch() as s:
        seen = set()
        for _ in range(3):
            tok, body, entry, err = token(s)
            assert len(body) >= 43, body
            # 32 random bytes, base64url without padding
            assert len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) == 32
            assert entry == {"name": "ci-bot", "role": "operator",
                             "sha256": hashlib.sha256(tok.encode()).hexdigest()}, entry
            assert "shown only now" in err, err
            assert tok not in err
            seen.add(tok)
        assert len(seen) == 3, seen


@test
def nothing_lands_on_disk():
    with Scratch() as s:
        token(s)
        assert os.listdir(s.dir) == [], os.listdir(s.dir)


@test
def bad_names_and_roles_are_refused():
    bad = ["", "Ci", "1ci", "-ci", "ci bot", "ci.bot", 'ci"bot', "ci\nbot", "x" * 33]
    with Scratch() as s:
        for name in bad:
            for args, what in (((name, "operator"), "NAME"), (("ci", name), "ROLE")):
                r = s.run("token", *args)
                assert r.returncode == 2, (args, r.returncode, r.stderr)
                assert r.stdout == "", r.stdout
                first = r.stderr.splitlines()[0]
                assert first.startswith("appliance: token: %s " % what), r.stderr
                assert "names are [a-z][a-z0-9_-]*, at most 32 characters" in first, first
        for args in ((), ("ci",), ("ci", "ops", "more")):
            r = s.run("token", *args)
            assert r.returncode == 2 and "needs NAME and ROLE" in r.stderr, (args, r.stderr)
            assert r.stdout == ""
        assert os.listdir(s.dir) == []


@test
def help_token_and_token_help():
    with Scratch() as s:
        for args in (("help", "token"), ("token", "--help")):
            r = s.run(*args)
            assert r.returncode == 0, r.stderr
            assert r.stdout.startswith("usage: appliance token NAME ROLE\n"), r.stdout
            assert "clients.tokens" in r.stdout
        r = s.run("help")
        assert "token NAME ROLE" in r.stdout, r.stdout


def signed(s, doc):
    """doc signed with a fresh key; the paths of the public key and signature."""
    pub, sec = s.path("k.pub"), s.path("k.key")
    if not os.path.exists(pub):
        r = s.run("keygen", "--public", pub, "--secret", sec)
        assert r.returncode == 0, r.stderr
    path = s.path("policy.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    r = s.run("sign", "--secret", sec, path)
    assert r.returncode == 0, r.stderr
    return pub, path + ".sig"


def document(deployment, **parts):
    doc = {"policy_version": 1, "serial": 3, "expires": "2099-01-01T00:00:00Z",
           "deployment": deployment, "image": {"layout": "image", "digest": DIGEST}}
    doc.update(parts)
    return doc


@test
def the_printed_entry_verifies_in_a_signed_policy():
    with Scratch() as s:
        tok, _, entry, _ = token(s, "dash-board_2", "ops")
        other = token(s, "ci", "ops")[2]
        doc = document("t-token-" + os.urandom(6).hex(),
                       roles={"ops": {"tools": []}},
                       clients={"tokens": [entry, other]},
                       http={"listen": ["127.0.0.1:8080"]})
        pub, sig = signed(s, doc)
        r = s.run("verify", "--trust", pub, sig)
        assert r.returncode == 0, r.stderr
        assert entry["sha256"] == hashlib.sha256(tok.encode()).hexdigest()


if __name__ == "__main__":
    main()
