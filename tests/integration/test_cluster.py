"""test_cluster.py: the short cluster demo (scripts/cluster-demo), three
replicas behind HAProxy sharing a Redis ledger and a cluster key, 30 s of
load from v2 SDK clients with approved writes among their cells, one replica
SIGKILLed a third of the way in. Every write the clients were told was made
reached the writes server once and only once, and nothing else failed.

Runs as root; needs build/appliance, build/image, redis-server, haproxy and
the npm packages (scripts/install-deps).
"""

import glob
import os
import re
import subprocess

from harness import main, test
from cellkit import ROOT

DEMO = os.path.join(ROOT, "scripts", "cluster-demo")
LINE = re.compile(r"^cluster-demo: (\d+) replicas, (\d+) requests, (\d+) ok, (\d+) retryable, "
                  r"(\d+) approved writes, (\d+) duplicated, (\d+) lost$")


@test
def three_replicas_one_killed_every_approved_write_made_once():
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8",
           "CLUSTER_DURATION": "30", "CLUSTER_CLIENTS": "6"}
    r = subprocess.run([DEMO], capture_output=True, text=True, env=env, timeout=900)
    out = r.stdout + r.stderr[-3000:]
    assert r.returncode == 0, out
    lines = r.stdout.strip().splitlines()
    m = LINE.match(lines[-1])
    assert m, out
    assert sum(1 for line in lines if line.startswith("cluster-demo: ") and
               "replicas," in line) == 1, out
    replicas, requests, ok, retryable, writes, duplicated, lost = map(int, m.groups())
    assert replicas == 3, out
    assert requests >= 50, out
    assert writes >= 5, out
    assert ok >= 0.8 * requests, out
    assert (duplicated, lost) == (0, 0), out
    assert ok + retryable == requests, "requests failed:\n" + out  # no other outcome
    # the kill happened, and the balancer saw it
    assert re.search(r"r2 killed \(SIGKILL\)", r.stdout), out
    assert "haproxy marks r2 DOWN" in r.stdout, out
    # the replicas' logs checked, and nothing of the cluster left behind:
    # its directory (sockets, logs, keys) and any process naming it
    assert "appliance audit verify" in r.stdout and "PROBLEM" not in r.stdout, out
    where = re.search(r"^cluster-demo: in (/\S+)$", r.stdout, re.M)
    assert where, out
    assert not os.path.exists(where.group(1)), out
    mark = where.group(1).encode()
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                assert mark not in f.read(), "%s still runs: %s" % (d, out)
        except OSError:
            pass


if __name__ == "__main__":
    main()
