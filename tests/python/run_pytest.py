#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/python/run_pytest.py - run the Python client's pytest suite, or say
why it cannot run.

  run_pytest.py PYTEST_ARGS...   python -m pytest PYTEST_ARGS (this python)
  run_pytest.py --self-test      check the skip below (no pytest needed)

test_python (tests/python/CMakeLists.txt) runs pytest with GPUQ_PYTHON,
which configure picked for numpy and scipy alone. When that python cannot
import pytest or msgpack (a build made without tests/dev.sh, on a host
without python3-pytest), the suite cannot run: this exits 77, which the
test's SKIP_RETURN_CODE makes ctest report as Skipped (never Passed), and
says which module is missing and what to install, as the GPU tests say
"no GPU". Anything else is pytest's own exit status.
"""
import os
import subprocess
import sys
import tempfile

SKIP = 77
NEEDED = ("pytest", "msgpack")


def missing():
    """The modules of NEEDED this python cannot import, with the reason."""
    out = []
    for name in NEEDED:
        try:
            __import__(name)
        except ImportError as e:
            out.append(f"{name} ({e})")
    return out


def self_test():
    """A python whose pytest import fails: exit 77 and the reason; never 0."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "pytest.py"), "w") as f:
            f.write("raise ImportError(\"No module named 'pytest' (self-test)\")\n")
        env = dict(os.environ, PYTHONPATH=d, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "-q", d], env=env,
                           capture_output=True, text=True, timeout=60)
    why = p.stdout + p.stderr
    if p.returncode != SKIP or "pytest" not in why or "skipped" not in why:
        print(f"run_pytest self-test: FAILED: exit {p.returncode}, output {why!r}")
        return 1
    print(f"run_pytest self-test: OK (exit {SKIP}: {why.strip()})")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    lack = missing()
    if lack:
        print(f"test_python skipped (exit {SKIP}): {sys.executable} cannot import "
              f"{', '.join(lack)}; apt-get install python3-pytest python3-msgpack, or "
              "configure with -DGPUQ_PYTHON=<a python that has them>", file=sys.stderr)
        return SKIP
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "pytest"] + argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
