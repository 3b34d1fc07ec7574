# SPDX-License-Identifier: Apache-2.0
"""Drive every gpuqctl form against a running gpuqd and compare with numpy/scipy.

usage: ctl_check.py GPUQCTL SOCKET WORKDIR

Exits 0 when every check passes; otherwise prints each failure and exits 1.
Tolerances are the issue's: normalize 1e-6 relative (float32), pairwise 1e-5
(float32), haversine and grid 1e-9 relative (float64); float64 everywhere else
1e-12.
"""
import json
import os
import subprocess
import sys

import numpy as np
from scipy.spatial.distance import cdist

CTL, SOCK, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
R = 6371.0088
failures = []
rng = np.random.default_rng()


def run(*args, expect_ok=True):
    p = subprocess.run([CTL, "--socket", SOCK, *args], capture_output=True, text=True, timeout=120)
    if expect_ok and p.returncode != 0:
        failures.append(f"gpuqctl {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
    return p


def path(name):
    return os.path.join(WORK, name)


def rel(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if out.shape != ref.shape:
        return np.inf
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


def check(name, out_path, ref, dtype, tol):
    try:
        out = np.load(out_path)
    except Exception as e:  # noqa: BLE001 - report any load failure
        failures.append(f"{name}: cannot load output: {e}")
        return
    if out.dtype != dtype:
        failures.append(f"{name}: output dtype {out.dtype}, want {dtype}")
    e = rel(out, ref)
    if not e <= tol:
        failures.append(f"{name}: rel err {e:g} > {tol:g}")


def hav(lat1, lon1, lat2, lon2, r=R):
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(lon2) - np.radians(lon1)
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * r * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


def norm_ref(x, method, flat):
    x = x.astype(np.float64)
    shape = x.shape
    rows = x.reshape(1, -1) if (flat or x.ndim == 1) else x
    if method == "sum":
        out = rows / rows.sum(axis=1, keepdims=True)
    elif method == "l1":
        out = rows / np.abs(rows).sum(axis=1, keepdims=True)
    elif method == "l2":
        out = rows / np.sqrt((rows ** 2).sum(axis=1, keepdims=True))
    elif method == "minmax":
        mn, mx = rows.min(axis=1, keepdims=True), rows.max(axis=1, keepdims=True)
        out = (rows - mn) / (mx - mn)
    else:
        out = (rows - rows.mean(axis=1, keepdims=True)) / rows.std(axis=1, keepdims=True)
    return out.reshape(shape)


for dt, tol_n, tol_p, tol_h in ((np.float32, 1e-6, 1e-5, 1e-6), (np.float64, 1e-12, 1e-12, 1e-9)):
    tag = np.dtype(dt).name
    # normalize: 1-D, 2-D row-wise, 2-D flat
    for method in ("sum", "l1", "l2", "minmax", "zscore"):
        for shape, flat in (((1000,), False), ((13, 29), False), ((13, 29), True)):
            x = rng.uniform(0.5, 10, size=shape).astype(dt)
            np.save(path("in.npy"), x)
            args = ["normalize", "--method", method, path("in.npy"), "-o", path("out.npy")]
            if flat:
                args.insert(1, "--flat")
            if run(*args).returncode == 0:
                check(f"normalize {method} {shape} flat={flat} {tag}", path("out.npy"),
                      norm_ref(x, method, flat), dt, tol_n)
    # haversine to a point
    pts = np.column_stack([rng.uniform(-90, 90, 777), rng.uniform(-180, 180, 777)]).astype(dt)
    np.save(path("pts.npy"), pts)
    if run("distance", "haversine", "--to", "30,101", path("pts.npy"), "-o", path("h.npy")).returncode == 0:
        p64 = pts.astype(np.float64)
        check(f"haversine to {tag}", path("h.npy"), hav(p64[:, 0], p64[:, 1], 30.0, 101.0), dt, tol_h)
    if run("distance", "haversine", "--to", "-10.5,20", "--radius", "1000", path("pts.npy"),
           "-o", path("h.npy")).returncode == 0:
        p64 = pts.astype(np.float64)
        check(f"haversine radius {tag}", path("h.npy"),
              hav(p64[:, 0], p64[:, 1], -10.5, 20.0, 1000.0), dt, tol_h)
    # haversine pairwise by row
    pts2 = np.column_stack([rng.uniform(-90, 90, 777), rng.uniform(-180, 180, 777)]).astype(dt)
    np.save(path("pts2.npy"), pts2)
    if run("distance", "haversine", path("pts.npy"), path("pts2.npy"), "-o", path("h2.npy")).returncode == 0:
        a, b = pts.astype(np.float64), pts2.astype(np.float64)
        check(f"haversine pair {tag}", path("h2.npy"), hav(a[:, 0], a[:, 1], b[:, 0], b[:, 1]), dt, tol_h)
    # pairwise
    # cityblock and l1, l2: scipy's and scikit-learn's names (aliases on the wire)
    for metric in ("euclidean", "sqeuclidean", "cosine", "manhattan", "cityblock", "l1", "l2"):
        X = rng.uniform(-1, 1, (41, 7)).astype(dt)
        Y = rng.uniform(-1, 1, (23, 7)).astype(dt)
        np.save(path("X.npy"), X)
        np.save(path("Y.npy"), Y)
        if run("distance", "pairwise", "--metric", metric, path("X.npy"), path("Y.npy"),
               "-o", path("D.npy")).returncode == 0:
            check(f"pairwise {metric} {tag}", path("D.npy"),
                  cdist(X.astype(np.float64), Y.astype(np.float64),
                        {"manhattan": "cityblock", "l1": "cityblock", "l2": "euclidean"}.get(metric, metric)),
                  dt, tol_p)
    # chebyshev and minkowski (--p; inf is chebyshev), pairwise and knn
    for metric, extra, kw in (("chebyshev", [], {}), ("minkowski", ["--p", "3"], {"p": 3}),
                              ("minkowski", ["--p", "0.5"], {"p": 0.5}),
                              ("minkowski", ["--p", "inf"], {"p": np.inf}),
                              ("minkowski", [], {"p": 2})):
        X = rng.uniform(-1, 1, (41, 7)).astype(dt)
        Y = rng.uniform(-1, 1, (23, 7)).astype(dt)
        np.save(path("X.npy"), X)
        np.save(path("Y.npy"), Y)
        ref = cdist(X.astype(np.float64), Y.astype(np.float64), metric, **kw)
        name = f"{metric} {' '.join(extra)} {tag}"
        if run("distance", "pairwise", "--metric", metric, *extra, path("X.npy"), path("Y.npy"),
               "-o", path("D.npy")).returncode == 0:
            check(f"pairwise {name}", path("D.npy"), ref, dt, tol_p)
        if run("distance", "knn", "--k", "23", "--metric", metric, *extra, path("X.npy"),
               path("Y.npy"), "-o", path("KD.npy"), "-i", path("KI.npy")).returncode == 0:
            KD, KI = np.load(path("KD.npy")), np.load(path("KI.npy"))
            if KI.shape != (41, 23) or not (np.sort(KI, axis=1) == np.arange(23)).all():
                failures.append(f"knn {name}: indices {KI.shape} not a permutation")
            elif not (np.abs(KD - np.take_along_axis(ref, KI, axis=1)) <= tol_p * (1 + ref.max())).all() \
                    or not (np.diff(KD.astype(np.float64), axis=1) >= 0).all():
                failures.append(f"knn {name}: distances not those of their indices, sorted")
    # cosine with a zero row: --on-zero nan gives NaN (scipy's), zero gives 1
    X = rng.uniform(-1, 1, (5, 3)).astype(dt)
    X[2] = 0
    np.save(path("Xz.npy"), X)
    if run("distance", "pairwise", "--metric", "cosine", "--on-zero", "nan", path("Xz.npy"),
           path("Xz.npy"), "-o", path("D.npy")).returncode == 0:
        D = np.load(path("D.npy"))
        with np.errstate(all="ignore"):
            ref = cdist(X.astype(np.float64), X.astype(np.float64), "cosine")
        ok = ~np.isnan(ref)
        if not (np.isnan(D) == ~ok).all() or not np.isnan(D[2]).all() or \
                not (np.abs(D[ok] - ref[ok]) <= tol_p).all():
            failures.append(f"cosine --on-zero nan {tag}: not scipy's NaN and values")
    if run("distance", "pairwise", "--metric", "cosine", "--on-zero", "zero", path("Xz.npy"),
           path("Xz.npy"), "-o", path("D.npy")).returncode == 0:
        if not (np.load(path("D.npy"))[2] == 1).all():
            failures.append(f"cosine --on-zero zero {tag}: the zero row's distances are not 1")
    # knn: distances and int64 indices against a stable argsort of cdist;
    # m*k odd (f32 indices start 4 bytes off 8), X row 0 equals Y rows 0 and
    # 500 (an exact tie: lower index first); no --metric means euclidean
    for metric in ("euclidean", "sqeuclidean", "cosine", "manhattan", None):
        X = rng.uniform(-1, 1, (41, 7)).astype(dt)
        Y = rng.uniform(-1, 1, (1000, 7)).astype(dt)
        Y[500] = Y[0]
        X[0] = Y[0]
        np.save(path("X.npy"), X)
        np.save(path("Y.npy"), Y)
        margs = ["--metric", metric] if metric else []
        name = f"knn {metric or 'default'} {tag}"
        if run("distance", "knn", "--k", "5", *margs, path("X.npy"), path("Y.npy"),
               "-o", path("KD.npy"), "-i", path("KI.npy")).returncode != 0:
            continue
        full = cdist(X.astype(np.float64), Y.astype(np.float64),
                     {"manhattan": "cityblock", None: "euclidean"}.get(metric, metric))
        order = np.argsort(full, axis=1, kind="stable")[:, :5]
        ref_d = np.take_along_axis(full, order, axis=1)
        KD, KI = np.load(path("KD.npy")), np.load(path("KI.npy"))
        if KD.dtype != dt or KI.dtype != np.int64 or KD.shape != (41, 5) or KI.shape != (41, 5):
            failures.append(f"{name}: outputs {KD.dtype} {KD.shape}, {KI.dtype} {KI.shape}")
            continue
        tol = tol_p * (1 + np.abs(ref_d))
        got_full = np.take_along_axis(full, KI, axis=1)
        if not (np.abs(KD - ref_d) <= tol).all():
            failures.append(f"{name}: distances off by {np.abs(KD - ref_d).max():g}")
        # an index other than the reference's only at a near-tie
        if not ((KI == order) | (np.abs(got_full - ref_d) <= 2 * tol)).all():
            failures.append(f"{name}: indices {KI[KI != order][:5]}, want {order[KI != order][:5]}")
        if list(KI[0, :2]) != [0, 500] or KD[0, 0] != KD[0, 1]:
            failures.append(f"{name}: row 0 starts {KI[0, :2]}, want the tie [0, 500]")

# grid, both dtypes and the default size
for dflag, dt, tol in (("f32", np.float32, 1e-6), ("f64", np.float64, 1e-9)):
    if run("distance", "grid", "--lat", "-45:60:61", "--lon", "10:170:83", "--to", "30,101",
           "--dtype", dflag, "-o", path("g.npy")).returncode == 0:
        la, lo = np.meshgrid(np.linspace(-45, 60, 61), np.linspace(10, 170, 83), indexing="ij")
        check(f"grid {dflag}", path("g.npy"), hav(la, lo, 30.0, 101.0), dt, tol)
if run("distance", "grid", "--lat", "-90:90:1000", "--lon", "-180:180:1000", "--to", "30,101",
       "-o", path("g.npy")).returncode == 0:
    la, lo = np.meshgrid(np.linspace(-90, 90, 1000), np.linspace(-180, 180, 1000), indexing="ij")
    check("grid default 1000x1000 f64", path("g.npy"), hav(la, lo, 30.0, 101.0), np.float64, 1e-9)

# ping and status
p = run("ping", "--count", "3")
if p.returncode == 0 and p.stdout.count("\n") < 3:
    failures.append(f"ping --count 3 printed too little: {p.stdout!r}")
p = run("--json", "status")
if p.returncode == 0:
    try:
        st = json.loads(p.stdout)
        for key in ("version", "uptime_s", "backend", "sessions", "in_flight", "requests", "errors"):
            if key not in st:
                failures.append(f"status --json lacks {key}")
    except ValueError as e:
        failures.append(f"status --json is not JSON: {e}: {p.stdout[:200]!r}")
p = run("status")
if p.returncode == 0 and "backend" not in p.stdout:
    failures.append(f"status (human) lacks backend: {p.stdout[:200]!r}")

# errors: one readable line on stderr, non-zero exit
# int64 is converted to float64 as the Python client converts it
ints = np.arange(1, 11, dtype=np.int64)
np.save(path("ints.npy"), ints)
run("normalize", "--method", "l2", path("ints.npy"), "-o", path("o.npy"))
check("int64 npy", path("o.npy"), norm_ref(ints.astype(np.float64), "l2", False), np.float64,
      1e-12)
np.save(path("zeros.npy"), np.zeros(8))
p = run("normalize", path("zeros.npy"), "-o", path("o.npy"), expect_ok=False)
if p.returncode == 0 or "zero_norm" not in p.stderr:
    failures.append(f"zero-sum normalize: exit {p.returncode}, stderr {p.stderr!r}")
# a Fortran-order array is transposed into C order, never read as C order
fort = rng.random((3, 4))
np.save(path("fortran.npy"), np.asfortranarray(fort))
run("normalize", "--method", "l2", path("fortran.npy"), "-o", path("o.npy"))
check("Fortran-order npy", path("o.npy"), norm_ref(fort, "l2", False), np.float64, 1e-12)
np.save(path("badlat.npy"), np.array([[95.0, 10.0]]))
p = run("distance", "haversine", "--to", "0,0", path("badlat.npy"), "-o", path("o.npy"), expect_ok=False)
if p.returncode == 0 or "out_of_range" not in p.stderr:
    failures.append(f"lat 95: exit {p.returncode}, stderr {p.stderr!r}")
p = run("distance", "pairwise", "--metric", "mahalanobis", path("X.npy"), path("Y.npy"), "-o",
        path("o.npy"), expect_ok=False)
if p.returncode == 0:
    failures.append("unknown metric accepted")
# bad p: the server's bad_argument naming p (exit 1), or a usage error (exit 2)
for args, code, text in ((["--metric", "minkowski", "--p", "0"], 1, "p=0"),
                         (["--metric", "minkowski", "--p", "-1.5"], 1, "p=-1.5"),
                         (["--metric", "minkowski", "--p", "nan"], 1, "p=nan"),
                         (["--metric", "euclidean", "--p", "3"], 1, '"p"'),
                         (["--p", "3"], 1, '"p"'),
                         (["--metric", "minkowski", "--p", "three"], 2, "--p"),
                         (["--metric", "cosine", "--on-zero", "inf"], 2, "on-zero")):
    p = run("distance", "pairwise", *args, path("X.npy"), path("Y.npy"), "-o", path("o.npy"),
            expect_ok=False)
    if p.returncode != code or text not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
        failures.append(f"pairwise {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
    p = run("distance", "knn", "--k", "2", *args, path("X.npy"), path("Y.npy"), "-o",
            path("KD.npy"), "-i", path("KI.npy"), expect_ok=False)
    if p.returncode != code or text not in p.stderr:
        failures.append(f"knn {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
run("ping")  # and gpuqd still serves
# knn: --k is required (usage, exit 2); k > n is the server's bad_argument (exit 1)
p = run("distance", "knn", path("X.npy"), path("Y.npy"), "-o", path("KD.npy"), "-i", path("KI.npy"),
        expect_ok=False)
if p.returncode != 2 or "--k" not in p.stderr:
    failures.append(f"knn without --k: exit {p.returncode}, stderr {p.stderr!r}")
p = run("distance", "knn", "--k", "1001", path("X.npy"), path("Y.npy"), "-o", path("KD.npy"),
        "-i", path("KI.npy"), expect_ok=False)
if p.returncode != 1 or "bad_argument" not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
    failures.append(f"knn k > n: exit {p.returncode}, stderr {p.stderr!r}")
p = run("distance", "knn", "--k", "3", path("X.npy"), path("Y.npy"), "-o", path("KD.npy"),
        expect_ok=False)
if p.returncode != 2:
    failures.append(f"knn without -i: exit {p.returncode}, stderr {p.stderr!r}")
# --priority: the levels by name or as -1, 0, 1 (global or after the command);
# anything else is a usage error (exit 2) naming the value
for where, val in (("global", "high"), ("global", "-1"), ("command", "normal"), ("command", "1")):
    args = ["--priority", val, "ping"] if where == "global" else ["ping", "--priority", val]
    run(*args)
for val in ("-5", "5", "2", "urgent"):
    for args in (["--priority", val, "ping"], ["ping", "--priority", val]):
        p = run(*args, expect_ok=False)
        if p.returncode != 2 or f"bad priority '{val}'" not in p.stderr:
            failures.append(f"gpuqctl {' '.join(args)}: exit {p.returncode}, stderr {p.stderr!r}")
p = subprocess.run([CTL, "--socket", os.path.join(WORK, "nope.sock"), "ping"], capture_output=True, text=True)
if p.returncode == 0 or len(p.stderr.strip().splitlines()) != 1:
    failures.append(f"missing socket: exit {p.returncode}, stderr {p.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"ctl_check: {len(failures)} failures")
sys.exit(1 if failures else 0)
