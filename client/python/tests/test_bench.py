# SPDX-License-Identifier: Apache-2.0
"""bench/py_bench.py tells failures from figures (its speed targets are not
checked here: figures of a shared CI machine mean nothing)."""

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO

PEER = os.environ.get("GPUQ_PY_PEER") or os.path.join(REPO, "build", "bench", "gpuq_py_peer")
BENCH = os.path.join(REPO, "bench", "py_bench.py")

pytestmark = pytest.mark.skipif(not os.access(PEER, os.X_OK),
                                reason=f"no {PEER} (cmake --build build --target gpuq_py_peer)")


def run(*args):
    r = subprocess.run([sys.executable, BENCH, "--quick", "--peer", PEER, "--rounds", "2",
                        *args], capture_output=True, text=True, timeout=600)
    rows = [line for line in r.stdout.splitlines() if line.startswith("| ")][1:]
    return r, [[c.strip() for c in line.strip("|").split("|")] for line in rows]


def test_figures(gpuqd):
    r, rows = run("--socket", gpuqd.path, "--large-n", "65536")
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(rows) == 4, r.stdout
    for what, ours, peer, ratio, target, met, errors in rows:
        assert re.match(r"[\d.]+ (us|ms)$", ours) and re.match(r"[\d.]+ (us|ms)$", peer), what
        assert re.match(r"[\d.]+x$", ratio) and errors == "0", what
    assert rows[0][4] == "<= 1.3x" and rows[2][4] == "<= 1.1x"
    assert "py_bench: ok" in r.stdout


def test_refusals_are_errors(make_daemon):
    d = make_daemon("--max-output", "1")  # every result over the limit
    r, rows = run("--socket", d.path, "--large-n", "65536")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED" in r.stdout
    assert all(row[3] == "nanx" or row[1] == "n/a" for row in rows[:1])
    assert int(rows[0][6]) > 0 and int(rows[2][6]) > 0
    assert "too_large" in r.stderr


def test_no_daemon():
    r, _ = run("--socket", "/nonexistent-gpuq-dir/gpuqd.sock")
    assert r.returncode == 2 and "cannot connect to gpuqd" in r.stderr
