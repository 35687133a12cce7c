"""conformancekit.py: what the tests running the official conformance suite
share (test_conformance.py against the appliance as a server,
test_conformance_client.py with it as a client): the suite's command, its
environment, and the files of checks expected to fail."""

import os
import re

from gatewaykit import NODE22_BIN


def conformance_bin():
    path = os.path.join(NODE22_BIN, "conformance")
    assert os.path.exists(path), "no %s: run scripts/install-deps" % path
    return path


def suite_env():
    """The environment the suite runs in: Node 22 first on PATH."""
    return dict(os.environ, PATH=NODE22_BIN + ":" + os.environ["PATH"])


def expected_entries(path):
    """The entries of an expected-failures file ('scenario' or
    'scenario:check'), each with its reason; an entry without one is an
    error."""
    entries = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"^\s+-\s+(\S+)\s+#\s*(\S.*)$", line)
            if m:
                entries[m.group(1)] = m.group(2)
            else:
                assert not line.strip().startswith("-"), "an entry without its reason: " + line
    assert entries, "no entries read from " + path
    return entries
