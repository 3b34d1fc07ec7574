#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""check_example.py - what an example of examples/ wrote, checked apart from
the example's own checks (tests/examples/CMakeLists.txt runs it after the
example, in the example's scratch directory, through run_example.sh --check).

    check_example.py knn FILE.npz          # embedding_search.py --save
    check_example.py grid FILE.npy LAT,LON # geo_grid_map.py --save-grid
    check_example.py png FILE.png W H      # geo_grid_map.py's map
    check_example.py pipeline DIR          # pipeline.sh's .npy files
    check_example.py --self-test           # each check fails on a planted error

knn: every returned distance is scipy's float64 cdist of the returned row
(within 2e-5), the k returned are the k smallest (within 2e-5: near-ties
may come in either order), ascending, distinct, in range. grid: numpy's
float64 haversine of the same mesh within 1e-9 relative. png: the PNG
signature, an IHDR of W x H, 8-bit RGB(A), and a picture, not a blank (at
least 64 distinct colours, decoded with matplotlib). Exit 0 when all hold,
else 1 naming what does not.
"""

import struct
import sys
import tempfile
import zlib

import numpy as np
from scipy.spatial.distance import cdist

R_KM = 6371.0088


class Bad(Exception):
    pass


def check_knn(x, y, dist, idx, metric, tol=2e-5):
    """Returns how many rows have exactly scipy's ids; raises Bad otherwise."""
    if dist.shape != idx.shape or dist.shape[0] != x.shape[0]:
        raise Bad(f"knn: dist {dist.shape}, idx {idx.shape} for {x.shape[0]} queries")
    ref = cdist(x.astype(np.float64), y.astype(np.float64), metric)
    k = idx.shape[1]
    exact = 0
    for i in range(len(idx)):
        row = idx[i]
        if row.min() < 0 or row.max() >= len(y) or len(set(row.tolist())) != k:
            raise Bad(f"knn: query {i}: ids {row.tolist()} out of range or repeated")
        want = np.sort(ref[i], kind="stable")[:k]
        if np.abs(ref[i, row] - dist[i]).max() > tol:
            raise Bad(f"knn: query {i}: distances {dist[i].tolist()} are not scipy's "
                      f"{ref[i, row].tolist()} of rows {row.tolist()}")
        if np.abs(want - dist[i]).max() > tol:
            raise Bad(f"knn: query {i}: {dist[i].tolist()} are not the {k} smallest "
                      f"{want.tolist()}")
        if np.any(np.diff(dist[i]) < 0):
            raise Bad(f"knn: query {i}: not ascending: {dist[i].tolist()}")
        exact += np.array_equal(row, np.argsort(ref[i], kind="stable")[:k])
    return exact


def haversine_km(lat, lon, to):
    p1, l1 = np.radians(lat), np.radians(lon)
    p2, l2 = np.radians(to[0]), np.radians(to[1])
    a = np.sin((p2 - p1) / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin((l2 - l1) / 2) ** 2
    return 2 * R_KM * np.arcsin(np.sqrt(a))


def check_close(what, got, want, rtol=1e-9):
    if got.shape != want.shape:
        raise Bad(f"{what}: shape {got.shape}, want {want.shape}")
    err = np.abs(got - want) / np.maximum(np.abs(want), 1.0)
    if not np.all(np.isfinite(got)) or err.max() > rtol:
        j = int(np.nanargmax(err))
        raise Bad(f"{what}: element {j}: {got.flat[j]!r}, numpy {want.flat[j]!r}")
    return float(err.max())


def cmd_knn(path):
    z = np.load(path)
    exact = check_knn(z["queries"], z["base"], z["dist"], z["idx"], "cosine")
    print(f"knn: {len(z['idx'])} queries x k {z['idx'].shape[1]} agree with scipy cdist "
          f"(cosine, float64), {exact} with identical ids")


def cmd_grid(path, to):
    g = np.load(path)
    lat = np.linspace(-90, 90, g.shape[0])
    lon = np.linspace(-180, 180, g.shape[1])
    err = check_close("grid", g, haversine_km(lat[:, None], lon[None, :], to))
    print(f"grid: {g.shape[0]} x {g.shape[1]} agrees with numpy's haversine "
          f"(max relative difference {err:.1e})")


def cmd_png(path, width, height):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise Bad(f"png: {path} has no PNG signature")
    length, tag = struct.unpack(">I4s", data[8:16])
    if tag != b"IHDR" or length != 13:
        raise Bad(f"png: first chunk {tag!r}, not IHDR")
    w, h, depth, colour = struct.unpack(">IIBB", data[16:26])
    if (w, h) != (width, height) or depth != 8 or colour not in (2, 6):
        raise Bad(f"png: {w} x {h}, depth {depth}, colour type {colour}; "
                  f"want {width} x {height} 8-bit RGB(A)")
    if zlib.crc32(data[12:29]) != struct.unpack(">I", data[29:33])[0]:
        raise Bad("png: IHDR's CRC is wrong")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image
    img = matplotlib.image.imread(path)
    colours = len(np.unique((img[..., :3] * 255).round().reshape(-1, 3), axis=0))
    if img.shape[:2] != (height, width) or colours < 64:
        raise Bad(f"png: decoded {img.shape}, {colours} colours: not a map")
    print(f"png: {w} x {h} RGB{'A' if colour == 6 else ''}, {len(data)} bytes, "
          f"{colours} colours")


def cmd_pipeline(d):
    places, km = np.load(f"{d}/places.npy"), np.load(f"{d}/km.npy")
    err = check_close("pipeline km", km, haversine_km(places[:, 0], places[:, 1],
                                                      (48.8566, 2.3522)))
    print(f"pipeline: {len(km)} km to Paris agree with numpy's haversine ({err:.1e})")
    exact = check_knn(np.load(f"{d}/queries.npy"), np.load(f"{d}/base.npy"),
                      np.load(f"{d}/dist.npy"), np.load(f"{d}/idx.npy"), "cosine")
    print(f"pipeline: knn agrees with scipy cdist (cosine, float64), {exact} identical ids")


def self_test():
    """Each check must fail on a planted error (else it could not fail)."""
    rng = np.random.default_rng(1)
    y = rng.standard_normal((50, 8))
    x = rng.standard_normal((5, 8))
    ref = cdist(x, y, "cosine")
    idx = np.argsort(ref, axis=1, kind="stable")[:, :3]
    dist = np.take_along_axis(ref, idx, 1).astype(np.float32)
    assert check_knn(x, y, dist, idx, "cosine") == 5
    planted = {
        "a wrong distance": (lambda d, i: d.__setitem__((1, 1), d[1, 1] + 1e-3)),
        "a skipped neighbour": (lambda d, i: (i.__setitem__((2, 2), np.argsort(ref[2])[3]),
                                              d.__setitem__((2, 2), ref[2, i[2, 2]]))),
        "a repeated id": (lambda d, i: (i.__setitem__((0, 1), i[0, 0]),
                                        d.__setitem__((0, 1), d[0, 0]))),
    }
    for what, plant in planted.items():
        d, i = dist.copy(), idx.copy()
        plant(d, i)
        try:
            check_knn(x, y, d, i, "cosine")
        except Bad:
            continue
        raise AssertionError(f"check_knn passed {what}")
    with tempfile.TemporaryDirectory() as tmp:
        lat, lon = np.linspace(-90, 90, 19), np.linspace(-180, 180, 37)
        g = haversine_km(lat[:, None], lon[None, :], (10, 20))
        np.save(f"{tmp}/g.npy", g)
        cmd_grid(f"{tmp}/g.npy", (10, 20))
        g[3, 4] *= 1 + 1e-7
        np.save(f"{tmp}/g.npy", g)
        try:
            cmd_grid(f"{tmp}/g.npy", (10, 20))
            raise AssertionError("cmd_grid passed a wrong element")
        except Bad:
            pass
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=(3, 2), dpi=100)
        plt.imshow(g)
        fig.savefig(f"{tmp}/m.png")
        plt.close(fig)
        cmd_png(f"{tmp}/m.png", 300, 200)
        for w, h in ((301, 200), (300, 199)):
            try:
                cmd_png(f"{tmp}/m.png", w, h)
                raise AssertionError("cmd_png passed a wrong size")
            except Bad:
                pass
        with open(f"{tmp}/m.png", "r+b") as f:
            f.write(b"GIF89a")
        try:
            cmd_png(f"{tmp}/m.png", 300, 200)
            raise AssertionError("cmd_png passed a GIF signature")
        except Bad:
            pass
    print("self-test ok")


def main(argv):
    try:
        if argv == ["--self-test"]:
            self_test()
        elif len(argv) == 2 and argv[0] == "knn":
            cmd_knn(argv[1])
        elif len(argv) == 3 and argv[0] == "grid":
            cmd_grid(argv[1], tuple(float(v) for v in argv[2].split(",")))
        elif len(argv) == 4 and argv[0] == "png":
            cmd_png(argv[1], int(argv[2]), int(argv[3]))
        elif len(argv) == 2 and argv[0] == "pipeline":
            cmd_pipeline(argv[1])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (Bad, OSError, KeyError) as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
