"""test_data_image.py: the data image (build/image-data: numpy, pandas and
matplotlib from Debian's packages) driven as a user drives it.

A v1 SDK client runs analysis on two tool results and gets a chart back as
an image; image.preload imports modules while a pooled sandbox warms up,
refuses a start when one does not import, and restored sandboxes do not
share numpy's random numbers; the image's own word on the memory it needs
refuses a smaller limits.memory_mb at start and in `check`; a 2 GiB array
is refused and the next cell runs; the SBOM beside the image lists its
packages at the versions apt gives.

Runs as root with runsc; needs build/appliance, build/image-data (make
image-data) and tests/node_modules.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile

from harness import main, test
from pngkit import png_decode
from cellkit import ROOT
import gatewaykit as gk

LAYOUT = os.path.join(ROOT, "build", "image-data")


def data_digest():
    with open(LAYOUT + ".digest") as f:
        return f.read().strip()


def data_policy(limits=None, preload=None, runtime=None, **extra):
    image = {"layout": LAYOUT, "digest": data_digest()}
    if preload is not None:
        image["preload"] = preload
    doc = dict(extra)
    if runtime is not None:
        doc["runtime"] = runtime
    return gk._kit.policy(dict({"deadline_s": 60, "boot_s": 60}, **(limits or {})), image=image,
                          **doc)


def toy_data_policy(limits=None, preload=None, runtime=None):
    return data_policy(limits, preload, runtime,
                       servers={"toy": gk.toy_server()},
                       tools={"toy.*": {"access": "read"}},
                       roles={"r": {"tools": ["toy.*"], "write": False}},
                       clients={"default_role": "r"})


REQUESTS = "".join(json.dumps(m) + "\n" for m in (
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))


def start(sig):
    """`run` over stdio with a client's first requests: the start happens
    at tools/list (docs/decisions.md), and a refused one ends `run`."""
    return subprocess.run(gk.run_argv(sig), input=REQUESTS, capture_output=True, text=True,
                          timeout=300)


def results(sig, *sources):
    out = gk.sdk(sig, [gk.code(src) for src in sources], timeout=600)
    calls = out["calls"]
    assert all("result" in c for c in calls), calls
    return [c["result"] for c in calls]


ANALYSIS = r'''
import io
import pandas as pd
import matplotlib.pyplot as plt

first = await toy.echo(text="region,sales\nnorth,3\nsouth,5\nnorth,4\n")
second = await toy.echo(text="region,sales\nsouth,1\neast,7\n")
df = pd.concat([pd.read_csv(io.StringIO(t)) for t in (first, second)])
sums = df.groupby("region")["sales"].sum().sort_index()
print(sums.to_dict())
fig, ax = plt.subplots(figsize=(4, 3))
ax.bar(sums.index, sums.values)
fig.savefig("/out/sales.png", dpi=50)
'''


@test
def a_dataframe_of_two_tool_results_comes_back_as_sums_and_a_png_chart():
    (res,) = results(toy_data_policy(), ANALYSIS)
    sc = res["structuredContent"]
    assert res["isError"] is False and sc["error"] is None, res
    assert sc["stdout"] == "{'east': 7, 'north': 7, 'south': 6}\n", sc["stdout"]
    images = [c for c in res["content"] if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png", res["content"]
    w, h, colour, _, rows = png_decode(base64.b64decode(images[0]["data"], validate=True))
    assert (w, h, colour) == (200, 150, 6), (w, h, colour)  # 4 x 3 inches at 50 dpi, RGBA
    # not a blank canvas: the bars' colour is in some rows, the white
    # background in others
    assert len({bytes(r) for r in rows}) > 3
    assert [f["name"] for f in sc["files"]] == ["sales.png"], sc["files"]


FONTS = r'''
import os
cfg = os.environ["MPLCONFIGDIR"]
before = {n: os.stat(os.path.join(cfg, n)).st_mtime_ns for n in os.listdir(cfg)}
import matplotlib
import matplotlib.pyplot as plt
plt.figure().savefig("/tmp/x.png")
after = {n: os.stat(os.path.join(cfg, n)).st_mtime_ns for n in os.listdir(cfg)}
probe = os.path.join(matplotlib.get_configdir(), "probe")
open(probe, "w").write("x")
print(matplotlib.get_backend(), matplotlib.get_configdir(), matplotlib.get_cachedir(),
      sorted(before), before == {k: v for k, v in after.items() if k in before})
'''


@test
def the_font_cache_comes_with_the_image_and_the_config_directory_is_writable():
    (res,) = results(toy_data_policy(), FONTS)
    sc = res["structuredContent"]
    assert sc["error"] is None, sc
    backend, cfg, cache, names, unchanged = sc["stdout"].split(" ", 4)
    assert backend == "agg" and cfg == cache == "/tmp/matplotlib", sc["stdout"]
    assert names.startswith("['fontlist-v") and unchanged.strip() == "True", sc["stdout"]


PRELOADED = r'''
import sys
import numpy
print(sorted(m for m in ("numpy", "pandas", "matplotlib.pyplot") if m in sys.modules),
      numpy.random.random())
'''


@test
def preloaded_modules_are_there_before_the_cell_and_each_restored_sandbox_draws_its_own():
    # Two cells, each in its own sandbox restored from the one checkpoint
    # of a warm sandbox that imported numpy: their generators must differ.
    sig = toy_data_policy({"pool": 1}, preload=["numpy", "pandas", "matplotlib.pyplot"],
                          runtime={"restore": True})
    a, b = results(sig, PRELOADED, PRELOADED)
    outs = [r["structuredContent"]["stdout"] for r in (a, b)]
    for out in outs:
        assert out.startswith("['matplotlib.pyplot', 'numpy', 'pandas'] "), outs
    assert outs[0] != outs[1], outs


@test
def a_preloaded_module_that_does_not_import_refuses_the_start_and_check_names_it():
    sig = data_policy({"pool": 1}, preload=["numpy", "no_such_module"])
    r = start(sig)
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("image.preload: the first warm sandbox failed: the runner could not get ready: "
            "preload no_such_module: ModuleNotFoundError: No module named 'no_such_module'"
            in r.stderr), r.stderr
    c = subprocess.run(gk._kit.argv(sig, "check"), capture_output=True, text=True, timeout=300)
    assert c.returncode == 1, c.stdout + c.stderr
    assert ("problem image.preload: a warm sandbox importing numpy,no_such_module failed: "
            "the runner could not get ready: preload no_such_module: ModuleNotFoundError"
            in c.stdout), c.stdout


@test
def a_memory_limit_below_what_the_image_says_it_needs_is_refused_by_run_and_check():
    sig = data_policy({"memory_mb": 128})
    want = ("limits.memory_mb: 128 MiB is less than the 192 MiB a sandbox of this image needs "
            "(the image's config says so, label org.appliance.memory_mb.min): raise "
            "limits.memory_mb to 192 or more")
    r = start(sig)
    assert r.returncode == 1 and want in r.stderr, r.stderr
    c = subprocess.run(gk._kit.argv(sig, "check"), capture_output=True, text=True, timeout=300)
    assert c.returncode == 1 and "problem " + want in c.stdout, c.stdout


BIG = r'''
import numpy
try:
    a = numpy.ones(2 ** 28)  # 2 GiB of float64
    a[::4096] = 2.0
    print("allocated", a.sum())
except MemoryError as e:
    print("MemoryError")
'''


@test
def a_two_gib_array_is_refused_and_the_next_cell_runs():
    big, after = results(toy_data_policy({"memory_mb": 256}), BIG,
                         "import numpy\nprint(int(numpy.arange(10).sum()))")
    sc = big["structuredContent"]
    assert sc["stdout"] == "MemoryError\n" or sc["reason"] == "memory", sc
    assert after["structuredContent"]["stdout"] == "45\n", after


def apt_version(pkg):
    r = subprocess.run(["apt-cache", "show", "--no-all-versions", pkg], capture_output=True,
                       text=True, check=True)
    return next(line.split(": ", 1)[1] for line in r.stdout.splitlines()
                if line.startswith("Version: "))


@test
def the_sbom_lists_the_image_and_its_packages_and_check_reports_it():
    with open(LAYOUT + ".spdx.json") as f:
        doc = json.load(f)
    assert doc["spdxVersion"] == "SPDX-2.3" and doc["dataLicense"] == "CC0-1.0", doc.keys()
    hexd = data_digest().split(":", 1)[1]
    image = doc["packages"][0]
    assert image["checksums"] == [{"algorithm": "SHA256", "checksumValue": hexd}], image
    debs = {p["name"]: p for p in doc["packages"][1:]}
    for name in ("python3-numpy", "python3-pandas", "python3-matplotlib", "libpython3.11-stdlib",
                 "libc6"):
        assert debs[name]["versionInfo"] == apt_version(name), (name, debs.get(name))
        purl = debs[name]["externalRefs"][0]["referenceLocator"]
        assert purl.startswith("pkg:deb/debian/%s@" % name), purl
    # removed whole from the image, so not listed (gcc came as pythran's)
    assert "gcc-12" not in debs and "cpp-12" not in debs, sorted(debs)
    ids = {p["SPDXID"] for p in doc["packages"]}
    assert len(ids) == len(doc["packages"])
    assert {(r["relatedSpdxElement"]) for r in doc["relationships"]
            if r["relationshipType"] == "CONTAINS"} == ids - {"SPDXRef-Image"}
    c = subprocess.run(gk._kit.argv(data_policy(), "check"), capture_output=True, text=True,
                       timeout=300)
    want = "ok      image: %d Debian packages, listed in %s.spdx.json (SPDX-2.3)" % (
        len(debs), LAYOUT)
    assert want in c.stdout, c.stdout


@test
def the_data_image_builds_again_to_the_same_digest():
    """Reproducible: a second build from the same packages and
    SOURCE_DATE_EPOCH gives the same manifest digest and the same SBOM."""
    out = tempfile.mkdtemp(prefix="appliance-image-data.")
    try:
        r = subprocess.run([os.path.join(ROOT, "scripts", "build-image"), "--data",
                            os.path.join(out, "image-data")], capture_output=True, text=True,
                           timeout=1800)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.strip().splitlines()[-1] == data_digest(), (r.stdout, data_digest())
        with open(os.path.join(out, "image-data.spdx.json"), "rb") as f, \
                open(LAYOUT + ".spdx.json", "rb") as g:
            assert f.read() == g.read()
    finally:
        shutil.rmtree(out, True)


if __name__ == "__main__":
    main()
