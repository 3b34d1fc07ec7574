#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cpu_peer.py - gpuq's CPU backend beside SciPy and NumPy, same run, same machine.

    bench/cpu_peer.py [--gpuqd PATH] [--rows N] [--dim D] [--reps R] [--quick]

Starts a CPU gpuqd (--gpuqd, default build/server/gpuqd) on a temporary
socket and times, for float32 and float64 inputs:

  - pairwise distances of an N x D array to itself (default 2048 x 512) for
    each metric, gpuq's c.pairwise(x, x, metric) against
    scipy.spatial.distance.cdist(x, x, metric);
  - row-wise normalize of a 4N x D array (sum, l2, zscore), gpuq's
    c.normalize(x, method) against the NumPy expression a user would write.

Each figure is the median of --reps calls (3) after one warm-up call, gpuq's
through the Python client with its default transport (an arena for arrays
this large), so it counts what a user waits for. Every gpuq result is
checked against its peer's (relative error 1e-5 in float32, 1e-12 in
float64); the exit status is 1 when any was wrong or failed, 2 on bad
usage. The table gives both figures, the ratio (gpuq / peer) and whether it
meets issue 31's target (<= 1.0x). --quick: a smaller problem (CI).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "client", "python"))

import numpy as np  # noqa: E402
from scipy.spatial.distance import cdist  # noqa: E402

import benchutil  # noqa: E402
import gpuq  # noqa: E402

METRICS = ("euclidean", "sqeuclidean", "cityblock", "cosine")


def np_normalize(x, method):
    """The NumPy a user writes for gpuq's row-wise normalize."""
    if method == "sum":
        return x / x.sum(axis=1, keepdims=True)
    if method == "l2":
        return x / np.linalg.norm(x, axis=1, keepdims=True)
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)


def median_time(fn, reps):
    fn()  # warm-up (pools, page faults, the arena)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpuqd", default=os.path.join(REPO, "build", "server", "gpuqd"))
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rows, a.dim, a.reps = 256, 64, 1
    if a.rows < 2 or a.dim < 1 or a.reps < 1:
        print("cpu_peer: --rows >= 2, --dim >= 1, --reps >= 1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(1)
    rows, errors = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "gpuqd.sock")
        d = benchutil.start_daemon("cpu_peer", a.gpuqd, "cpu", sock)
        try:
            with gpuq.connect(sock, name="cpu_peer") as c:
                for dt in (np.float32, np.float64):
                    tol = 1e-5 if dt == np.float32 else 1e-12
                    x = (rng.random((a.rows, a.dim)) - 0.3).astype(dt)
                    for m in METRICS:
                        ref = cdist(x, x, m)
                        got = c.pairwise(x, x, metric=m)
                        err = float(np.max(np.abs(got - ref)) / max(np.max(np.abs(ref)), 1e-300))
                        if not err <= tol:
                            print(f"cpu_peer: pairwise {m} {dt.__name__}: relative error {err:.2e}",
                                  file=sys.stderr)
                            errors += 1
                        peer = median_time(lambda: cdist(x, x, m), a.reps)
                        ours = median_time(lambda: c.pairwise(x, x, metric=m), a.reps)
                        rows.append((f"pairwise {m}, {a.rows} x {a.dim}", dt.__name__,
                                     "scipy cdist", peer, ours))
                    y = (rng.random((4 * a.rows, a.dim)) + 0.5).astype(dt)
                    for meth in ("sum", "l2", "zscore"):
                        ref = np_normalize(y.astype(np.float64), meth)
                        got = c.normalize(y, meth)
                        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
                        if not err <= tol:
                            print(f"cpu_peer: normalize {meth} {dt.__name__}: relative error "
                                  f"{err:.2e}", file=sys.stderr)
                            errors += 1
                        peer = median_time(lambda: np_normalize(y, meth), a.reps)
                        ours = median_time(lambda: c.normalize(y, meth), a.reps)
                        rows.append((f"normalize {meth}, {4 * a.rows} x {a.dim}", dt.__name__,
                                     "numpy", peer, ours))
        except gpuq.Error as e:
            print(f"cpu_peer: {e}", file=sys.stderr)
            errors += 1
        finally:
            if not benchutil.stop_daemon("cpu_peer", d):
                errors += 1
    print(f"| work ({os.cpu_count()} CPUs) | dtype | peer | peer's time | gpuq CPU backend | "
          "ratio | target | met |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for what, dt, peer_name, peer, ours in rows:
        r = ours / peer
        print(f"| {what} | {dt} | {peer_name} | {peer * 1e3:.1f} ms | {ours * 1e3:.1f} ms | "
              f"{r:.2f}x | <= 1.0x | {'yes' if r <= 1.0 else 'NO'} |")
    print(f"cpu_peer: {errors} errors" + (" (FAILED)" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
