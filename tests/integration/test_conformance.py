"""test_conformance.py: the official MCP conformance suite against `appliance run` over HTTP.

`@modelcontextprotocol/conformance` (pinned in tests/node22, run on the Node 22 that
package brings) runs both requirement sets, `--requirements 2025-11-25` and
`--requirements 2026-07-28`, against an appliance serving Streamable HTTP. The suite
sends no token: it talks to authproxy.AuthProxy, which adds one, and the policy's
allowed_hosts and allowed_origins name the proxy's address, as they would a reverse
proxy's. What the appliance is expected to fail is listed, check by check with its
reason, in tests/conformance/expected-REVISION.yml: each entry needs a fixture tool,
prompt or resource of the suite's reference server, or the tasks extension. The suite
itself fails the run on an unexpected failure of a scored scenario and on a stale entry;
this test also holds every scenario the set runs without scoring (server-session-lifecycle,
http-header-validation and the rest) to the same list, and checks that every entry
still fails, so the list stays exact.

Runs as root; needs build/appliance, build/toy-server, build/image and tests/node22.
"""

import glob
import json
import os
import re
import subprocess
import tempfile

from harness import main, test
from authproxy import AuthProxy
from conformancekit import conformance_bin, expected_entries, suite_env
import gatewaykit as gk
import test_http as th

EXPECTED = os.path.join(gk.ROOT, "tests", "conformance", "expected-%s.yml")


def expected(revision):
    return expected_entries(EXPECTED % revision)


def checks(outdir):
    """(scenario, check id, status, message) of every check the suite wrote."""
    found = []
    for d in sorted(glob.glob(os.path.join(outdir, "server-*"))):
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", os.path.basename(d))[len("server-"):]
        with open(os.path.join(d, "checks.json")) as f:
            for c in json.load(f):
                found.append((scenario, c["id"], c["status"], c.get("errorMessage") or ""))
    return found


class Suite:
    """An appliance serving HTTP behind a token-adding proxy."""

    def __init__(self):
        self.proxy = AuthProxy(None, th.ALPHA)
        names = ["localhost:%d" % self.proxy.port, "127.0.0.1:%d" % self.proxy.port]
        self.served = th.Served(http={"allowed_hosts": names,
                                      "allowed_origins": ["http://" + n for n in names]})
        self.proxy.upstream_port = self.served.port

    def run(self, revision):
        out = tempfile.mkdtemp(prefix="appliance-conformance-")
        env = suite_env()
        r = subprocess.run([conformance_bin(), "server", "--url", self.proxy.url(),
                            "--requirements", revision,
                            "--expected-failures", EXPECTED % revision, "-o", out],
                           env=env, capture_output=True, text=True, timeout=900)
        return r, checks(out)

    def close(self):
        self.served.stop()
        self.proxy.close()


def judge(revision, r, found):
    tail = (r.stdout + r.stderr)[-6000:]
    assert found, "the suite wrote no checks:\n" + tail
    want = expected(revision)
    # The suite holds a warning (a SHOULD not met) against the list too.
    failed = [(s, c, m) for s, c, st, m in found if st in ("FAILURE", "WARNING")]
    unexpected = ["%s:%s  %s" % (s, c, m[:160]) for s, c, m in failed
                  if s not in want and "%s:%s" % (s, c) not in want]
    assert not unexpected, "unexpected failures under %s:\n%s" % (revision,
                                                                   "\n".join(unexpected))
    stale = [e for e in want
             if not any(e in (s, "%s:%s" % (s, c)) for s, c, _ in failed)]
    assert not stale, "entries of expected-%s.yml that no longer fail: %s" % (revision, stale)
    assert r.returncode == 0, "the suite failed (exit %d):\n%s" % (r.returncode, tail)
    schema = [(s, st) for s, c, st, _ in found if c == "wire-schema-valid"]
    assert schema and all(st == "SUCCESS" for _, st in schema), schema
    return len(found), len(failed)


@test
def both_requirement_sets_pass_but_for_fixtures_a_gateway_does_not_offer():
    suite = Suite()
    ran = set()
    try:
        for revision in ("2025-11-25", "2026-07-28"):
            r, found = suite.run(revision)
            n, failed = judge(revision, r, found)
            print("  %s: %d checks, %d expected failures" % (revision, n, failed))
            ran |= {s for s, _, _, _ in found}
        # Among what ran: the unscored scenarios the issue names.
        assert {"server-session-lifecycle", "http-header-validation", "server-stateless",
                "caching", "dns-rebinding-protection"} <= ran, sorted(ran)
    finally:
        suite.close()
    assert "Traceback" not in suite.served.log()


if __name__ == "__main__":
    main(globals())
