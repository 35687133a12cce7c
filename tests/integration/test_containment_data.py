"""test_containment_data.py: the containment suite (test_containment.py:
network, host files, /proc, escapes, limits), root and rootless, run on the
data image (build/image-data) instead of the cell image, and what the data
stack's own native code tries: numpy, pandas and matplotlib reaching the
network, the host's files, or writing outside /tmp and /out.

The same tests, the same `appliance cell`, the same runsc settings and
seccomp filters: only cellkit's image differs (APPL_TEST_IMAGE, set before
cellkit is imported). Runs as root with runsc; needs build/image-data.
"""

import json
import os
import secrets
import socket
import threading

os.environ["APPL_TEST_IMAGE"] = "image-data"

from harness import main  # noqa: E402
from cellkit import IMAGE, in_both_modes  # noqa: E402
import test_containment  # noqa: E402  (registers the whole suite, on this image)

assert IMAGE == "image-data", IMAGE

DATA_PROBE = r"""
import json
import numpy, pandas
import matplotlib.pyplot as plt
HOST, PORT, MARKER = %r, %d, %r
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "done"
    except Exception as e:
        out[name] = type(e).__name__
attempt("read_csv_url", lambda: pandas.read_csv("http://%%s:%%d/x.csv" %% (HOST, PORT)))
attempt("read_json_url", lambda: pandas.read_json("http://127.0.0.1:%%d/x" %% PORT))
attempt("fromfile_host", lambda: numpy.fromfile(MARKER, dtype=numpy.uint8))
attempt("read_csv_host", lambda: pandas.read_csv(MARKER))
attempt("save_usr", lambda: numpy.save("/usr/lib/x.npy", numpy.arange(3)))
attempt("to_csv_etc", lambda: pandas.DataFrame({"a": [1]}).to_csv("/etc/x.csv"))
attempt("savefig_root", lambda: plt.figure().savefig("/x.png"))
attempt("memmap_usr", lambda: numpy.memmap("/usr/m.bin", dtype="uint8", mode="w+", shape=(8,)))
attempt("save_tmp", lambda: numpy.save("/tmp/x.npy", numpy.arange(3)))
attempt("savefig_out", lambda: plt.figure().savefig("/out/x.png"))
print(json.dumps(out))
"""


def outward_address():
    """This host's address toward the world (no packet is sent), or loopback."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.1", 9))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


@in_both_modes
def the_data_stack_reaches_no_network_and_writes_only_tmp_and_out(mode):
    token = secrets.token_hex(8)
    marker = "/var/tmp/appliance-data-probe-" + token
    with open(marker, "w") as f:
        f.write("region,secret\nnorth,%s\n" % token)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("0.0.0.0", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    accepted, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                accepted.append(listener.accept())
            except OSError:
                pass
    t = threading.Thread(target=accept)
    t.start()
    try:
        out = test_containment.probe(
            DATA_PROBE % (outward_address(), listener.getsockname()[1], marker), mode,
            deadline=60)
    finally:
        stop.set()
        t.join()
        listener.close()
        os.unlink(marker)
    assert accepted == [], accepted
    assert out["read_csv_url"] != "done" and out["read_json_url"] != "done", out
    assert out["fromfile_host"] == out["read_csv_host"] == "FileNotFoundError", out
    for name in ("save_usr", "to_csv_etc", "savefig_root", "memmap_usr"):
        assert out[name] != "done", (name, out)
    assert out["save_tmp"] == out["savefig_out"] == "done", out
    assert token not in json.dumps(out)


if __name__ == "__main__":
    main()
