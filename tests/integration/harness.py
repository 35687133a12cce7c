"""harness.py: a tiny TAP-like runner for tests/integration/test_*.py.

    from harness import test, skip, main

    @test
    def ready_comes_first():
        assert ...

    if __name__ == "__main__":
        main()

main() runs the file's tests in definition order and prints one line each,
`ok N - name` or `not ok N - name` (with the failure indented as `# ...`
lines), then `<file stem>: N passed, N failed`, and exits 1 when any failed.
`python3 test_x.py NAME...` runs only the named tests.

skip(reason) marks a test skipped; when CI=true a skip counts as a failure,
so a missing tool or privilege can never turn a CI run green by skipping.
"""

import os
import sys
import traceback

_TESTS = []


class Skip(Exception):
    """Raised by skip(); carries the reason."""


def test(fn):
    """Register fn (no arguments) as a test of the calling file."""
    _TESTS.append(fn)
    return fn


def skip(reason):
    raise Skip(reason)


def _in_ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _report(lines):
    for line in lines.rstrip("\n").splitlines():
        print("#   " + line)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    stem = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "tests"
    chosen = [t for t in _TESTS if not argv or t.__name__ in argv]
    passed = failed = 0
    for n, fn in enumerate(chosen, 1):
        try:
            fn()
        except Skip as e:
            if _in_ci():
                failed += 1
                print("not ok %d - %s # skipped under CI=true: %s" % (n, fn.__name__, e))
            else:
                passed += 1
                print("ok %d - %s # SKIP %s" % (n, fn.__name__, e))
        except BaseException:
            failed += 1
            print("not ok %d - %s" % (n, fn.__name__))
            _report(traceback.format_exc())
        else:
            passed += 1
            print("ok %d - %s" % (n, fn.__name__))
        sys.stdout.flush()
    print("%s: %d passed, %d failed" % (stem, passed, failed))
    sys.exit(1 if failed else 0)
