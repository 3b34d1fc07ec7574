#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cpu_vs_scipy.py - issue 31's CPU table: gpuq's CPU backend against SciPy and NumPy, one run.

    /usr/bin/python3 bench/cpu_vs_scipy.py [--build DIR | --gpuqd PATH] [--reps N]
        [--rows M] [--dim D] [--norm-rows R] [--norm-cols C] [--flat N]
        [--only pairwise|normalize] [--quick]

Starts its own `gpuqd --device cpu` (DIR/server/gpuqd; DIR defaults to
build/) on a temporary socket, connects with the Python client of
client/python, and times in this one process:

  - pairwise x vs y, both M x D (default 2048 x 512), float32 and float64,
    for every metric the daemon takes (euclidean, sqeuclidean, cosine,
    cityblock, and chebyshev / minkowski p=3 when the client knows them),
    gpuq's c.pairwise(x, y, metric) against scipy.spatial.distance.cdist(x, y);
  - normalize, for every method (sum, l1, l2, minmax, zscore), of an R x C
    array row by row (default 4096 x 4096) and of an N-vector as one row
    (default 16M), float32 and float64, against the NumPy expression a user
    writes (x / np.linalg.norm(x, axis=1, keepdims=True), ...).

Each time is the best of --reps calls (5) after one warm-up call, gpuq's
through the client's default transport (an arena for arrays this large),
so it counts what a user waits for. Every gpuq result is checked against
a float64 NumPy/SciPy reference: relative error at most 1e-5 in float32 and
1e-12 in float64 (the README's "Accuracy" bounds; gpuq's CPU backend sums in
double). A call of 2 s or more is timed once (scipy's minkowski takes tens
of seconds). Prints one table (op, dtype, gpuq s, peer s, ratio gpuq/peer,
issue 31's target <= 1.0x and whether it is met), "cpu_vs_scipy: K of N
rows meet the target" and "cpu_vs_scipy: N errors"; the exit status is 1 when a result was wrong or a
call failed, 2 on bad usage. --quick: small sizes, one rep (ctest).
"""

from __future__ import annotations

import argparse
import inspect
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
from gpuq import _ops  # noqa: E402

WHO = "cpu_vs_scipy"
BASE_METRICS = ("euclidean", "sqeuclidean", "cosine", "cityblock")
METHODS = ("sum", "l1", "l2", "minmax", "zscore")
SLOW_S = 2.0
TARGET = 1.0  # issue 31: gpuq's time at most the peer's


def metrics():
    """(gpuq metric, gpuq kwargs, cdist kwargs) for each metric the client knows."""
    out = [(m, {}, {}) for m in BASE_METRICS]
    known = getattr(_ops, "METRICS", {})
    if "chebyshev" in known:
        out.append(("chebyshev", {}, {}))
    if "minkowski" in known and "p" in inspect.signature(_ops.pairwise).parameters:
        out.append(("minkowski", {"p": 3.0}, {"p": 3.0}))
    return out


def np_normalize(x, method, axis):
    """The NumPy a user writes for gpuq's normalize (axis 1: rows; None: flat)."""
    kd = axis is not None
    if method == "sum":
        return x / x.sum(axis=axis, keepdims=kd)
    if method == "l1":
        return x / np.abs(x).sum(axis=axis, keepdims=kd)
    if method == "l2":
        return x / np.linalg.norm(x, axis=axis, keepdims=kd)
    if method == "minmax":
        lo = x.min(axis=axis, keepdims=kd)
        return (x - lo) / (x.max(axis=axis, keepdims=kd) - lo)
    return (x - x.mean(axis=axis, keepdims=kd)) / x.std(axis=axis, keepdims=kd)


def best_time(fn, reps):
    """(best time, first result): the best of reps calls after a warm-up call
    (pools, page faults, the arena). A call of SLOW_S or more is timed once,
    its warm-up being that one call: at that length a first call's extra
    cost is noise, and minkowski in scipy takes tens of seconds."""
    t = time.perf_counter()
    first = fn()
    best = time.perf_counter() - t
    if best >= SLOW_S:
        return best, first
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best, first


def rel_err(got, ref):
    got = np.asarray(got, dtype=np.float64)
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    return float(np.max(np.abs(got - ref))) / scale


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="build directory holding server/gpuqd (default: build/)")
    ap.add_argument("--gpuqd", default=None, help="the gpuqd binary (overrides --build)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--norm-rows", type=int, default=4096)
    ap.add_argument("--norm-cols", type=int, default=4096)
    ap.add_argument("--flat", type=int, default=1 << 24)
    ap.add_argument("--only", choices=("pairwise", "normalize"), default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.rows, a.dim, a.norm_rows, a.norm_cols, a.flat, a.reps = 200, 37, 300, 129, 10007, 1
    if min(a.rows, a.dim, a.norm_rows, a.norm_cols, a.flat, a.reps) < 1:
        print(f"{WHO}: every size and --reps must be >= 1", file=sys.stderr)
        return 2
    gpuqd = a.gpuqd or os.path.join(a.build, "server", "gpuqd")
    if not os.access(gpuqd, os.X_OK):
        print(f"{WHO}: no gpuqd at {gpuqd} (--build DIR or --gpuqd PATH)", file=sys.stderr)
        return 2
    rng = np.random.default_rng(31)
    table, errors = [], 0

    def check(what, dt, got, ref):
        nonlocal errors
        tol = 1e-5 if dt == np.float32 else 1e-12
        e = rel_err(got, ref)
        if not e <= tol:
            print(f"{WHO}: {what} {dt.__name__}: relative error {e:.2e} > {tol:g}",
                  file=sys.stderr)
            errors += 1

    with tempfile.TemporaryDirectory() as tmp:
        sock = os.path.join(tmp, "gpuqd.sock")
        d = benchutil.start_daemon(WHO, gpuqd, "cpu", sock)
        try:
            with gpuq.connect(sock, name=WHO) as c:
                for dt in (np.float32, np.float64):
                    if a.only in (None, "pairwise"):
                        x = (rng.random((a.rows, a.dim)) - 0.3).astype(dt)
                        y = (rng.random((a.rows, a.dim)) - 0.3).astype(dt)
                        for m, gk, sk in metrics():
                            # cdist computes in float64 whatever the input dtype: its
                            # result is the float64 reference too
                            peer, ref = best_time(lambda: cdist(x, y, m, **sk), a.reps)
                            ours, got = best_time(lambda: c.pairwise(x, y, metric=m, **gk),
                                                  a.reps)
                            check(f"pairwise {m}", dt, got, ref)
                            table.append((f"pairwise {m} {a.rows}x{a.dim}", dt.__name__,
                                          ours, "scipy", peer))
                    if a.only in (None, "normalize"):
                        z2 = (rng.random((a.norm_rows, a.norm_cols)) + 0.25).astype(dt)
                        z1 = (rng.random(a.flat) + 0.25).astype(dt)
                        for meth in METHODS:
                            for z, axis, shape in ((z2, 1, f"{a.norm_rows}x{a.norm_cols}"),
                                                   (z1, None, f"{a.flat}")):
                                ours, got = best_time(lambda: c.normalize(z, meth), a.reps)
                                check(f"normalize {meth} {shape}", dt, got,
                                      np_normalize(z.astype(np.float64), meth, axis))
                                peer, _ = best_time(lambda: np_normalize(z, meth, axis), a.reps)
                                table.append((f"normalize {meth} {shape}", dt.__name__, ours,
                                              "numpy", peer))
        except gpuq.Error as e:
            print(f"{WHO}: {e}", file=sys.stderr)
            errors += 1
        finally:
            if not benchutil.stop_daemon(WHO, d):
                errors += 1
    print(f"{WHO}: {os.cpu_count()} CPUs, best of {a.reps} (one call when it takes "
          f"{SLOW_S:g} s or more)")
    print(f"| {'op':<34} | dtype   | gpuq s   | peer   | peer s   | ratio | target | met |")
    print(f"|{'-' * 36}|---------|----------|--------|----------|-------|--------|-----|")
    missed = 0
    for what, dt, ours, peer_name, peer in table:
        r = ours / peer
        missed += r > TARGET
        print(f"| {what:<34} | {dt:<7} | {ours:8.4f} | {peer_name:<6} | {peer:8.4f} | "
              f"{r:5.2f} | <= {TARGET:.1f}x | {'yes' if r <= TARGET else 'NO':<3} |")
    print(f"{WHO}: {len(table) - missed} of {len(table)} rows meet the target")
    print(f"{WHO}: {errors} errors" + (" (FAILED)" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
