"""cluster.py: bench row 20 (bench/harness.py runs it): cells/s through
HAProxy in front of 1, 2 and 3 replicas, and the balancer's added latency
per request, each against a baseline measured in the same run straight to
one replica.

One cluster (tests/cluster/clusterkit.py: a Redis ledger, the writes
server, three replicas r1..r3 of one policy with pool 2 and 8 cells each,
HAProxy from tests/cluster/haproxy.cfg.in with its request log off) serves
every stage, so every stage has the same three processes alive; only
HAProxy's backend changes (it is restarted with r1, then r1 r2, then all
three, and waits until it sees each up).

  throughput  tests/cluster/loadgen.mjs, BENCH_CLUSTER_CLIENTS v2 SDK
              clients (one token each), closed loop, print() cells only,
              BENCH_CLUSTER_S seconds per stage after a short warm-up:
              straight to r1, through HAProxy with 1, 2 and 3 replicas, and
              straight to r1 again; the baseline is the mean of the two
              straight stages, so that a drift over the row (the machine
              warming, the pools settling) does not pass for the
              balancer's doing. cells/s counts the cells answered ok.
  latency     BENCH_CLUSTER_PROBES 2026-07-28 server/discover POSTs (the MCP
              endpoint, a body, an answer, no cell) on one keep-alive
              connection straight to r1 and one through HAProxy (backend r1
              alone), sent in turn, one at a time: the difference of their
              medians is what the balancer adds to a request.

On one host the replicas share its cores: more replicas cannot make more
cells per second here, and the rows show what the balancer and the extra
processes cost, not how the cluster scales.
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
import clusterkit  # noqa: E402

REVISION = "2026-07-28"
WARMUP_S = 3.0


class ClusterBenchError(Exception):
    """The row could not be measured; its text is the row's error."""


def loadgen(cluster, url, seconds, clients, tag):
    """One closed-loop stage: the load generator's summary."""
    r = subprocess.run([clusterkit.node(), clusterkit.LOADGEN, "--url", url,
                        "--tokens", cluster.tokens_file, "--clients", str(clients),
                        "--duration", str(seconds), "--write-every", "0", "--tag", tag],
                       capture_output=True, text=True, env=clusterkit.ENV,
                       timeout=seconds + 180)
    if r.returncode != 0:
        raise ClusterBenchError("loadgen exited %d: %s" % (r.returncode, r.stderr.strip()[-300:]))
    out = json.loads(r.stdout)
    if out["failed"] or not out["ok"]:
        raise ClusterBenchError("loadgen: %d of %d cells failed: %s" % (
            out["failed"], out["requests"], json.dumps(out["reasons"])[:300]))
    return out


def stage(cluster, url, seconds, clients, tag):
    """A warm-up (not counted: the pools refill, the clients connect), then
    the measured stage."""
    loadgen(cluster, url, WARMUP_S, clients, tag + "w")
    out = loadgen(cluster, url, seconds, clients, tag)
    return {"cells_per_s": out["cells_per_s"], "cells": out["ok"], "retryable": out["retryable"],
            "seconds": out["seconds"], "latency_ms": out["latency_ms"]["ok"]}


def discover_times(cluster, n):
    """n server/discover round trips each way, in turn: (direct, via) in
    seconds."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": REVISION,
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    headers = {"Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "Authorization": "Bearer " + cluster.tokens[0], "Host": clusterkit.HOST,
               "Mcp-Method": "server/discover", "MCP-Protocol-Version": REVISION}
    conns = {"direct": http.client.HTTPConnection(clusterkit.HOST, cluster.ports["r1"],
                                                  timeout=30),
             "via": http.client.HTTPConnection(clusterkit.HOST, cluster.ports["front"],
                                               timeout=30)}
    times = {"direct": [], "via": []}
    try:
        for i in range(n + 10):  # the first ten of each open connections: not counted
            for way in ("direct", "via") if i % 2 else ("via", "direct"):
                t0 = time.perf_counter()
                conns[way].request("POST", "/mcp", body, headers)
                r = conns[way].getresponse()
                data = r.read()
                dt = time.perf_counter() - t0
                if r.status != 200 or b"supportedVersions" not in data:
                    raise ClusterBenchError("server/discover %s: %d %s" % (
                        way, r.status, data[:200].decode("utf-8", "replace")))
                if i >= 10:
                    times[way].append(dt)
    except (OSError, http.client.HTTPException) as e:
        raise ClusterBenchError("server/discover: %s: %s" % (type(e).__name__, e)) from None
    finally:
        for c in conns.values():
            c.close()
    return times["direct"], times["via"]


def row(seconds=12.0, clients=6, probes=500, appliance=None, log=lambda line: None):
    """Row 20's figures (module docstring)."""
    if appliance:
        clusterkit.APPLIANCE = appliance
    lacking = clusterkit.missing()
    if lacking:
        raise ClusterBenchError("; ".join(lacking))
    cluster = clusterkit.Cluster(replicas=3, clients=clients, haproxy_log=False, say=log)
    out = {"clients": clients, "stage_s": seconds}
    try:
        cluster.start(behind=["r1"])
        log("straight to r1, %d clients, %g s" % (clients, seconds))
        first = stage(cluster, cluster.replica_url("r1"), seconds, clients, "d1")
        direct, via = discover_times(cluster, probes)
        out["probe"] = {"n": probes, "direct_ms": [t * 1e3 for t in direct],
                        "via_ms": [t * 1e3 for t in via]}
        out["via"] = {}
        for n in (1, 2, 3):
            if n > 1:
                cluster.start_haproxy(cluster.names[:n])
            log("through haproxy, %d replica%s" % (n, "s" if n > 1 else ""))
            out["via"][str(n)] = stage(cluster, cluster.url, seconds, clients, "h%d" % n)
        log("straight to r1 again")
        last = stage(cluster, cluster.replica_url("r1"), seconds, clients, "d2")
        out["direct_stages"] = [first, last]
        out["direct"] = {"cells_per_s": (first["cells_per_s"] + last["cells_per_s"]) / 2,
                         "cells": first["cells"] + last["cells"],
                         "latency_ms": {k: (first["latency_ms"][k] + last["latency_ms"][k]) / 2
                                        for k in ("p50", "p95")}}
    except clusterkit.ClusterError as e:
        raise ClusterBenchError(str(e)) from None
    finally:
        status = cluster.stop()
        cluster.cleanup()
    bad = {k: v for k, v in status.items() if v not in (0, None)}
    if bad:
        raise ClusterBenchError("exit statuses: %s" % bad)
    p = out["probe"]
    p["direct_median_ms"] = statistics.median(p["direct_ms"])
    p["via_median_ms"] = statistics.median(p["via_ms"])
    p["added_ms"] = p["via_median_ms"] - p["direct_median_ms"]
    return out


if __name__ == "__main__":
    # By hand: python3 bench/cluster.py (as root); the figures as JSON.
    figures = row(log=lambda line: print(line, file=sys.stderr, flush=True))
    for k in ("direct_ms", "via_ms"):
        figures["probe"].pop(k)
    print(json.dumps(figures, indent=1))
