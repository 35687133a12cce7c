"""cold_steps.py: where a cold cell's time goes, step by step, with the
appliance's own sandbox config (bench/harness.py's copy of it).

    python3 bench/cold_steps.py [N]

For N rounds each (interleaved, so load drifts hit every variant alike), it
times from `runsc run` to the first byte the process sends, and prints the
median and p95 per variant:
  pass      python3 -I -S -c pass: runsc boot plus interpreter start
  imports   python3 -I -S -c 'import <the runner's imports>' (minus asyncio)
  asyncio   the same plus asyncio
  ready     the runner itself, to its `ready` line (imports, loop, thread,
            warm-up)
and the same `ready` under runsc flag variants the appliance could use.
Bundle preparation (config.json) is timed on its own.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

IMPORTS = ("ast builtins ctypes fcntl io json keyword linecache math os re resource sys "
           "threading time traceback").split()


def variants():
    py = ["/usr/bin/python3.11", "-I", "-S", "-B"]
    say = "import os; os.write(1, b'x\\n')"
    base = ["--network=none", "--platform=" + os.environ.get("PLATFORM", "systrap")]
    return [
        ("pass", base, py + ["-c", say]),
        ("imports", base, py + ["-c", "import %s; %s" % (", ".join(IMPORTS), say)]),
        ("asyncio", base, py + ["-c", "import %s, asyncio; %s" % (", ".join(IMPORTS), say)]),
        ("ready", base, py + ["/runner.py"]),
        ("ready --overlay2=none", base + ["--overlay2=none"], py + ["/runner.py"]),
        ("ready --cpu-num-from-quota", base + ["--cpu-num-from-quota"], py + ["/runner.py"]),
    ]


def one(base, flags, args, rootfs, i):
    bundle = os.path.join(base, "b%d" % i)
    t0 = time.perf_counter()
    os.mkdir(bundle, 0o700)
    cfg = harness.oci_config(rootfs)
    cfg["process"]["args"] = args
    with open(os.path.join(bundle, "config.json"), "w") as f:
        json.dump(cfg, f)
    t_bundle = time.perf_counter() - t0
    argv = [harness.RUNSC, "--root=" + os.path.join(base, "runsc")] + flags + [
        "--log=" + os.path.join(bundle, "runsc.log"), "run", "--bundle", bundle,
        "steps-%d-%d" % (os.getpid(), i)]
    t1 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    first = p.stdout.read(1)
    t_first = time.perf_counter() - t1
    p.stdin.close()
    p.kill()
    p.wait()
    subprocess.run([harness.RUNSC, "--root=" + os.path.join(base, "runsc"), "delete", "-force",
                    "steps-%d-%d" % (os.getpid(), i)], capture_output=True)
    shutil.rmtree(bundle, ignore_errors=True)
    if not first:
        raise SystemExit("no output from %s" % " ".join(argv))
    return t_bundle, t_first


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    with open(os.path.join(harness.ROOT, "build", "image.digest")) as f:
        rootfs = harness.rootfs_path(f.read().strip())
    base = tempfile.mkdtemp(prefix="appliance-cold-steps.")
    vs = variants()
    times = {name: [] for name, _, _ in vs}
    bundles = []
    try:
        i = 0
        for _ in range(n + 1):  # the first round warms caches and is dropped
            for name, flags, args in vs:
                tb, tf = one(base, flags, args, rootfs, i)
                i += 1
                if i > len(vs):
                    times[name].append(tf)
                    bundles.append(tb)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print("cold path steps, %d rounds (runsc run to the first byte out), ms" % n)
    print("  %-28s %8s %8s" % ("variant", "median", "p95"))
    for name, _, _ in vs:
        t = sorted(times[name])
        print("  %-28s %8.0f %8.0f" % (name, statistics.median(t) * 1000,
                                       t[min(len(t) - 1, int(len(t) * 0.95))] * 1000))
    print("  bundle preparation (config.json): median %.2f ms" % (statistics.median(bundles) * 1000))


if __name__ == "__main__":
    main()
