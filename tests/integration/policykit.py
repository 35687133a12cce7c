"""policykit.py: signed policies for the integration tests that start the
real appliance: a root-owned scratch directory with a trust directory and a
key, policies signed with rising serials, the argv of `appliance run`, and
the raw MCP messages those tests send.

Each test file makes its own Signer, and each Signer signs for a deployment
of its own (random per run), so their serials never meet in the appliance's
one rollback floor (/var/lib/appliance as root).
"""

import json
import os
import secrets
import shutil
import subprocess
import tempfile

from cellkit import APPLIANCE, ROOT, digest


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# The input of a stdio client that asks for the tools, then goes: over stdio
# the image, the runtime, the audit log and the servers start only when a
# request needs the tools, so a test of what happens at start sends this,
# not nothing (nothing is an appliance that starts none of it).
START_INPUT = "".join(json.dumps(m) + "\n" for m in (
    INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).encode()


def call(i, src):
    """tools/call of run_python with code src, as request id i."""
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "run_python", "arguments": {"code": src}}}


class Signer:
    def __init__(self, prefix):
        self.prefix = prefix
        self.serial = 100
        self.deployment = "t-" + secrets.token_hex(8)
        self._dir = None

    def dir(self):
        """The scratch directory (made on first use): trusted.d/k.pub, k.key."""
        if self._dir is None:
            d = tempfile.mkdtemp(prefix=self.prefix)
            os.chmod(d, 0o755)
            os.mkdir(os.path.join(d, "trusted.d"), 0o755)
            subprocess.run([APPLIANCE, "keygen", "--public", os.path.join(d, "trusted.d", "k.pub"),
                            "--secret", os.path.join(d, "k.key")], check=True,
                           capture_output=True)
            self._dir = d
        return self._dir

    def sign(self, doc):
        """Write doc (its serial set above every earlier one) and sign it;
        returns the signature's path."""
        self.serial += 1
        doc = dict({"deployment": self.deployment}, **doc)
        doc["serial"] = self.serial
        path = os.path.join(self.dir(), "p%d.json" % self.serial)
        with open(path, "w") as f:
            json.dump(doc, f)
        subprocess.run([APPLIANCE, "sign", "--secret", os.path.join(self.dir(), "k.key"), path],
                       check=True, capture_output=True)
        return path + ".sig"

    def policy(self, limits=None, image=None, expires="2099-01-01T00:00:00Z", **extra):
        """A signed policy of the built image (or image = (layout, digest), or
        image = the whole image section as a dict),
        deadline 20 s unless limits say otherwise, and extra top-level keys."""
        if isinstance(image, dict):  # the image section as it is
            section = image
        else:
            layout, dig = image or (os.path.join(ROOT, "build", "image"), digest())
            section = {"layout": layout, "digest": dig}
        doc = {"policy_version": 1, "expires": expires,
               "image": section,
               "limits": dict({"deadline_s": 20}, **(limits or {}))}
        doc.update(extra)
        return self.sign(doc)

    def argv(self, sig, command="run"):
        """`appliance COMMAND --policy sig` with this directory's trust."""
        return [APPLIANCE, command, "--policy", sig,
                "--trust-dir", os.path.join(self.dir(), "trusted.d")]

    def cleanup(self):
        if self._dir:
            shutil.rmtree(self._dir, True)
