#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ref_ops.py - numpy/scipy references for the gpuq ops, used by the C tests.

Every array file (inputs and OUT) is raw little-endian float64, C order, no
header (what numpy.fromfile / ndarray.tofile read and write). The reference is
computed in float64 whatever dtype the op under test used; the caller rounds
its inputs to float32 first when it tests float32.

Usage:
  ref_ops.py normalize METHOD ROWS COLS IN OUT
      METHOD: sum | l1 | l2 | minmax | zscore (per row; zscore uses ddof=0).
  ref_ops.py normalize_exact METHOD ROWS COLS IN OUT
      The same, computed exactly: rational arithmetic on the input values (no
      rounding at all), the square roots of l2 and zscore to 50 significant
      digits, each result rounded once to float64 (+-inf where it overflows
      float64). Inputs must be finite; a row with a zero denominator gets NaN.
  ref_ops.py randn_offset N SEED OFFSET OUT
      OUT = OFFSET + numpy.random.default_rng(SEED).standard_normal(N).
  ref_ops.py pairwise METRIC M N D X Y OUT
      METRIC: euclidean | sqeuclidean | cosine | manhattan | chebyshev |
      minkowski:P (scipy.spatial.distance.cdist of X[M][D] and Y[N][D],
      manhattan being cdist's "cityblock", minkowski:P cdist's "minkowski"
      with p=P; OUT is M x N).
  ref_ops.py pairwise_exact METRIC M N D X Y OUT
      The same distances computed exactly: X and Y as integers over one
      power-of-two denominator, integer sums, the square roots of euclidean
      and cosine to 80 significant digits, each result rounded once to
      float64. A zero vector under cosine gets NaN. minkowski:P: each
      |x - y|^P, their sum and its 1/P-th power in 80-digit decimals.
  ref_ops.py knn METRIC M N D K X Y OUT
      k nearest neighbours by cdist (as pairwise): OUT holds the M x N
      distance matrix, then the M x K indices (as float64) of
      argsort(cdist, kind='stable')[:, :K] (ties by lower index, NaN last),
      then the M x K distances in that order.
  ref_ops.py haversine_to N LAT LON RADIUS PTS OUT
      PTS[N][2] = (lat, lon) degrees; OUT[N] = distance to (LAT, LON).
  ref_ops.py haversine_pair N RADIUS A B OUT
      OUT[i] = distance between A[i] and B[i], both [N][2].
  ref_ops.py grid LAT0 LAT1 NLAT LON0 LON1 NLON LAT LON RADIUS OUT
      OUT[NLAT][NLON] = distance from (linspace(LAT0, LAT1, NLAT)[i],
      linspace(LON0, LON1, NLON)[j]) to (LAT, LON).
  ref_ops.py batch JOBS
      Every line of JOBS is one of the calls above (arguments separated by
      tabs, OUT included), run in order in this one process: a test that
      needs many references pays for python and numpy/scipy start-up once.
      A job may read an earlier job's OUT. Stops at the first failing job.

Haversine: d = 2 R asin(min(1, sqrt(a))),
a = sin^2(dphi/2) + cos(phi1) cos(phi2) sin^2(dlambda/2).
Exit status 0 on success, 2 on bad usage.
"""
import sys
from decimal import Context, Decimal, localcontext

import numpy as np

USAGE = __doc__.split("Usage:", 1)[1].split("Haversine:", 1)[0]


def load(path, count, shape=None):
    a = np.fromfile(path, dtype="<f8")
    if a.size != count:
        raise SystemExit("%s: %d values, want %d" % (path, a.size, count))
    return a.reshape(shape) if shape is not None else a


def save(path, a):
    np.ascontiguousarray(a, dtype="<f8").tofile(path)


def normalize(x, method):
    with np.errstate(all="ignore"):
        if method == "sum":
            return x / x.sum(axis=1, keepdims=True)
        if method == "l1":
            return x / np.abs(x).sum(axis=1, keepdims=True)
        if method == "l2":
            return x / np.sqrt((x * x).sum(axis=1, keepdims=True))
        if method == "minmax":
            mn = x.min(axis=1, keepdims=True)
            return (x - mn) / (x.max(axis=1, keepdims=True) - mn)
        if method == "zscore":
            return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, ddof=0, keepdims=True)
    raise SystemExit("unknown method %r" % method)


def normalize_exact_row(x, method):
    """One row, exactly: x as integers X over one power-of-two denominator
    (which cancels in every method), results through 50-digit decimals."""
    if not np.all(np.isfinite(x)):
        raise SystemExit("normalize_exact: non-finite input")
    ratios = [float(v).as_integer_ratio() for v in x]
    k = max(d for _, d in ratios)
    xs = [nu * (k // d) for nu, d in ratios]
    n = len(xs)
    with localcontext(Context(prec=50, Emax=10**7, Emin=-10**7)):
        if method in ("sum", "l1"):
            num, den = xs, sum(xs) if method == "sum" else sum(abs(v) for v in xs)
            if den == 0:
                return [float("nan")] * n
            dd = Decimal(den)
            return [float(Decimal(v) / dd) for v in num]
        if method == "l2":
            q = sum(v * v for v in xs)
            if q == 0:
                return [float("nan")] * n
            r = Decimal(q).sqrt()
            return [float(Decimal(v) / r) for v in xs]
        if method == "minmax":
            lo, hi = min(xs), max(xs)
            if hi == lo:
                return [float("nan")] * n
            dd = Decimal(hi - lo)
            return [float(Decimal(v - lo) / dd) for v in xs]
        if method == "zscore":
            # z_i = (n X_i - S) sqrt(n / Q), Q = sum (n X_j - S)^2
            s = sum(xs)
            dev = [n * v - s for v in xs]
            q = sum(v * v for v in dev)
            if q == 0:
                return [float("nan")] * n
            f = (Decimal(n) / Decimal(q)).sqrt()
            return [float(Decimal(v) * f) for v in dev]
    raise SystemExit("unknown method %r" % method)


def normalize_exact(x, method):
    return np.array([normalize_exact_row(row, method) for row in x], dtype=np.float64)


def exact_ints(*arrays):
    """The values of float64 arrays as Python integers over one common
    power-of-two denominator (which cancels or is divided out exactly):
    sums, differences and products of them are exact."""
    flat = [float(v) for a in arrays for v in np.ravel(a)]
    if not all(np.isfinite(flat)):
        raise SystemExit("exact: non-finite input")
    ratios = [v.as_integer_ratio() for v in flat]
    k = max(d for _, d in ratios)
    ints = [nu * (k // d) for nu, d in ratios]
    out, at = [], 0
    for a in arrays:
        rows, cols = a.shape
        out.append([ints[at + r * cols : at + (r + 1) * cols] for r in range(rows)])
        at += rows * cols
    return out, k


def dec_pow(t, p):
    """t ** p for a Decimal t > 0: halves of integers by powers and one
    square root (fast and exact to the context), other p by Decimal's pow."""
    if (2 * p) % 1 == 0:
        r = t ** int(p)
        return r * t.sqrt() if p % 1 else r
    return t ** p


def pairwise_exact(x, y, metric):
    (xs, ys), k = exact_ints(x, y)
    out = np.empty((len(xs), len(ys)))
    with localcontext(Context(prec=80, Emax=10**7, Emin=-10**7)):
        dk = Decimal(k)
        for i, a in enumerate(xs):
            for j, b in enumerate(ys):
                if metric in ("euclidean", "sqeuclidean"):
                    q = sum((u - v) * (u - v) for u, v in zip(a, b))
                    if metric == "sqeuclidean":
                        out[i, j] = q / (k * k)  # int / int: correctly rounded
                    else:
                        out[i, j] = float(Decimal(q).sqrt() / dk)
                elif metric == "manhattan":
                    out[i, j] = sum(abs(u - v) for u, v in zip(a, b)) / k
                elif metric == "chebyshev":
                    out[i, j] = max(abs(u - v) for u, v in zip(a, b)) / k
                elif metric.startswith("minkowski:"):
                    p = Decimal(metric.split(":", 1)[1])
                    s = sum(dec_pow(Decimal(abs(u - v)) / dk, p) for u, v in zip(a, b) if u != v)
                    out[i, j] = float(s ** (1 / p)) if s else 0.0
                elif metric == "cosine":
                    p = sum(u * v for u, v in zip(a, b))
                    nx = sum(u * u for u in a)
                    ny = sum(v * v for v in b)
                    if nx == 0 or ny == 0:
                        out[i, j] = float("nan")
                    else:
                        out[i, j] = float(1 - Decimal(p) / Decimal(nx * ny).sqrt())
                else:
                    raise SystemExit("unknown metric %r" % metric)
    return out


def cdist_metric(name):
    """cdist's keyword arguments for a METRIC of the usage."""
    if name.startswith("minkowski:"):
        return {"metric": "minkowski", "p": float(name.split(":", 1)[1])}
    return {"metric": {"manhattan": "cityblock"}.get(name, name)}


def haversine(lat1, lon1, lat2, lon2, radius):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp = p2 - p1
    dl = np.radians(lon2) - np.radians(lon1)
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2.0 * radius * np.arcsin(np.minimum(1.0, np.sqrt(a)))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage:" + USAGE)
        return 2
    op, a = argv[1], argv[2:]
    if op == "normalize" and len(a) == 5:
        rows, cols = int(a[1]), int(a[2])
        save(a[4], normalize(load(a[3], rows * cols, (rows, cols)), a[0]))
    elif op == "normalize_exact" and len(a) == 5:
        rows, cols = int(a[1]), int(a[2])
        save(a[4], normalize_exact(load(a[3], rows * cols, (rows, cols)), a[0]))
    elif op == "randn_offset" and len(a) == 4:
        rng = np.random.default_rng(int(a[1]))
        save(a[3], float(a[2]) + rng.standard_normal(int(a[0])))
    elif op == "pairwise" and len(a) == 7:
        m, n, d = int(a[1]), int(a[2]), int(a[3])
        x = load(a[4], m * d, (m, d))
        y = load(a[5], n * d, (n, d))
        from scipy.spatial.distance import cdist  # only here: slow to import

        save(a[6], cdist(x, y, **cdist_metric(a[0])))
    elif op == "knn" and len(a) == 8:
        m, n, d, k = int(a[1]), int(a[2]), int(a[3]), int(a[4])
        x = load(a[5], m * d, (m, d))
        y = load(a[6], n * d, (n, d))
        from scipy.spatial.distance import cdist  # only here: slow to import

        with np.errstate(all="ignore"):
            full = cdist(x, y, **cdist_metric(a[0]))
        order = np.argsort(full, axis=1, kind="stable")[:, :k]
        dist = np.take_along_axis(full, order, axis=1)
        save(a[7], np.concatenate([full.ravel(), order.astype(np.float64).ravel(), dist.ravel()]))
    elif op == "pairwise_exact" and len(a) == 7:
        m, n, d = int(a[1]), int(a[2]), int(a[3])
        x = load(a[4], m * d, (m, d))
        y = load(a[5], n * d, (n, d))
        save(a[6], pairwise_exact(x, y, a[0]))
    elif op == "haversine_to" and len(a) == 6:
        n = int(a[0])
        lat, lon, radius = float(a[1]), float(a[2]), float(a[3])
        p = load(a[4], 2 * n, (n, 2))
        save(a[5], haversine(p[:, 0], p[:, 1], lat, lon, radius))
    elif op == "haversine_pair" and len(a) == 5:
        n, radius = int(a[0]), float(a[1])
        pa = load(a[2], 2 * n, (n, 2))
        pb = load(a[3], 2 * n, (n, 2))
        save(a[4], haversine(pa[:, 0], pa[:, 1], pb[:, 0], pb[:, 1], radius))
    elif op == "batch" and len(a) == 1:
        with open(a[0]) as f:
            for no, line in enumerate(f, 1):
                job = line.rstrip("\n").split("\t")
                if main([argv[0]] + job) != 0:
                    sys.stderr.write("%s:%d: job failed\n" % (a[0], no))
                    return 2
    elif op == "grid" and len(a) == 10:
        lats = np.linspace(float(a[0]), float(a[1]), int(a[2]))
        lons = np.linspace(float(a[3]), float(a[4]), int(a[5]))
        lat, lon, radius = float(a[6]), float(a[7]), float(a[8])
        save(a[9], haversine(lats[:, None], lons[None, :], lat, lon, radius))
    else:
        sys.stderr.write("usage:" + USAGE)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
