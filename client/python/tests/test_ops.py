# SPDX-License-Identifier: Apache-2.0
"""Every op, in both dtypes, against numpy/scipy."""

import os

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import gpuq

DTYPES = [np.float32, np.float64]
RTOL = {np.float32: 2e-6, np.float64: 1e-13}
R_EARTH = 6371.0088


def tol(dt):
    return dict(rtol=RTOL[dt], atol=RTOL[dt] * 1e-3)


def ref_normalize(a, method):
    a = np.asarray(a, np.float64)
    if method == "sum":
        return a / a.sum(axis=-1, keepdims=True)
    if method == "l1":
        return a / np.abs(a).sum(axis=-1, keepdims=True)
    if method == "l2":
        return a / np.sqrt((a * a).sum(axis=-1, keepdims=True))
    if method == "minmax":
        lo, hi = a.min(axis=-1, keepdims=True), a.max(axis=-1, keepdims=True)
        return (a - lo) / (hi - lo)
    mean = a.mean(axis=-1, keepdims=True)
    return (a - mean) / a.std(axis=-1, keepdims=True)


def ref_haversine(p, q, r=R_EARTH):
    p, q = np.radians(np.asarray(p, np.float64)), np.radians(np.asarray(q, np.float64))
    dphi = q[..., 0] - p[..., 0]
    dlam = q[..., 1] - p[..., 1]
    h = np.sin(dphi / 2) ** 2 + np.cos(p[..., 0]) * np.cos(q[..., 0]) * np.sin(dlam / 2) ** 2
    return 2 * r * np.arcsin(np.sqrt(h))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("method", ["sum", "l1", "l2", "minmax", "zscore"])
def test_normalize_rows(client, dt, method):
    rng = np.random.default_rng(1)
    a = (rng.random((7, 33)) * 10 - 3).astype(dt)  # mixed signs
    if method == "sum":
        a = np.abs(a) + 0.5  # a row sum near 0 is a cancellation, not a test of gpuq
    y = client.normalize(a, method=method)
    assert y.dtype == dt and y.shape == a.shape
    np.testing.assert_allclose(y, ref_normalize(a, method).astype(dt), **tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
def test_normalize_1d_flat_nd(client, dt):
    rng = np.random.default_rng(2)
    v = (rng.random(1000) + 0.1).astype(dt)
    np.testing.assert_allclose(client.normalize(v), ref_normalize(v, "sum").astype(dt), **tol(dt))
    m = (rng.random((4, 5)) + 0.1).astype(dt)
    flat = client.normalize(m, "l2", flat=True)
    np.testing.assert_allclose(flat, (m / np.linalg.norm(m.astype(np.float64))).astype(dt),
                               **tol(dt))
    cube = (rng.random((3, 4, 5)) + 0.1).astype(dt)  # rows along the last axis
    y = client.normalize(cube, "l1")
    assert y.shape == cube.shape
    np.testing.assert_allclose(y, ref_normalize(cube, "l1").astype(dt), **tol(dt))


@pytest.mark.parametrize("dt", DTYPES)
def test_normalize_on_zero(client, dt):
    a = np.array([[1, 2, 3], [0, 0, 0], [5, 5, 5]], dtype=dt)
    with pytest.raises(gpuq.ZeroNormError):
        client.normalize(a)
    y = client.normalize(a, on_zero="zero")
    np.testing.assert_allclose(y[0], np.array([1, 2, 3]) / 6, **tol(dt))
    assert (y[1] == 0).all()
    y = client.normalize(a, "minmax", on_zero="zero")
    assert (y[2] == 0).all() and (y[1] == 0).all()
    y = client.normalize(a, on_zero="nan")  # the zero row all NaN, the others as before
    assert np.isnan(y[1]).all() and not np.isnan(y[[0, 2]]).any()
    np.testing.assert_allclose(y[0], np.array([1, 2, 3]) / 6, **tol(dt))


def test_normalize_nan_inf_propagate(client):
    y = client.normalize(np.array([[1.0, np.nan, 2.0], [1.0, 2.0, 3.0]]))
    assert np.isnan(y[0]).all()
    np.testing.assert_allclose(y[1], [1 / 6, 2 / 6, 3 / 6])


@pytest.mark.parametrize("dt", DTYPES)
def test_haversine_to(client, dt):
    pts = np.array([[48.8566, 2.3522], [51.5074, -0.1278], [40.7128, -74.0060]], dtype=dt)
    d = client.haversine(pts, to=(30, 101))
    assert d.dtype == dt and d.shape == (3,)
    np.testing.assert_allclose(d, ref_haversine(pts, np.array([30.0, 101.0])).astype(dt),
                               rtol=1e-5 if dt == np.float32 else 1e-12)
    np.testing.assert_allclose(client.haversine(pts, to=(30, 101), radius=1.0),
                               ref_haversine(pts, np.array([30.0, 101.0]), 1.0).astype(dt),
                               rtol=1e-5 if dt == np.float32 else 1e-12)


@pytest.mark.parametrize("dt", DTYPES)
def test_haversine_pair(client, dt):
    rng = np.random.default_rng(3)
    a = np.stack([rng.uniform(-90, 90, 500), rng.uniform(-180, 180, 500)], 1).astype(dt)
    b = np.stack([rng.uniform(-90, 90, 500), rng.uniform(-180, 180, 500)], 1).astype(dt)
    d = client.haversine(a, b)
    assert d.shape == (500,) and d.dtype == dt
    np.testing.assert_allclose(d, ref_haversine(a, b), rtol=1e-4 if dt == np.float32 else 1e-10,
                               atol=1e-2 if dt == np.float32 else 1e-8)
    # (..., 2) in, (...) out
    d3 = client.haversine(a.reshape(5, 100, 2), b.reshape(5, 100, 2))
    assert d3.shape == (5, 100)
    np.testing.assert_array_equal(d3.reshape(-1), d)


@pytest.mark.parametrize("dt", DTYPES)
def test_grid(client, dt):
    g = client.grid(lat=(-10, 20, 7), lon=(100, 110, 5), to=(1, 2), dtype=dt)
    assert g.shape == (7, 5) and g.dtype == dt
    la, lo = np.meshgrid(np.linspace(-10, 20, 7), np.linspace(100, 110, 5), indexing="ij")
    ref = ref_haversine(np.stack([la, lo], -1), np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, ref, rtol=1e-5 if dt == np.float32 else 1e-12)


def test_grid_defaults(client):
    g = client.grid()
    assert g.shape == (1000, 1000) and g.dtype == np.float64
    assert abs(g.min() - 7.807926668862153) < 1e-6
    assert abs(g.max() - 20005.571420651162) < 1e-6
    assert client.grid(lat=(5, 6, 1), lon=(7, 8, 1)).shape == (1, 1)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "cosine", "cityblock"])
def test_pairwise(client, dt, metric):
    rng = np.random.default_rng(4)
    x = rng.random((37, 16)).astype(dt)
    y = rng.random((23, 16)).astype(dt)
    d = client.pairwise(x, y, metric=metric)
    assert d.shape == (37, 23) and d.dtype == dt
    ref = cdist(x.astype(np.float64), y.astype(np.float64), metric)
    np.testing.assert_allclose(d, ref, rtol=1e-4 if dt == np.float32 else 1e-10,
                               atol=1e-5 if dt == np.float32 else 1e-12)


def test_pairwise_aliases_and_self(client):
    rng = np.random.default_rng(5)
    x = rng.random((9, 3))
    ref = cdist(x, x, "cityblock")
    for name in ("cityblock", "manhattan", "cblock", "l1", "CityBlock"):
        np.testing.assert_allclose(client.pairwise(x, x, metric=name), ref, rtol=1e-12)
    np.testing.assert_allclose(client.pairwise(x), cdist(x, x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(client.pairwise(x, metric="sqe"), cdist(x, x, "sqeuclidean"),
                               rtol=1e-12, atol=1e-15)


def _libgpuq_metric_names():
    """Every metric name libgpuq and gpuqctl take, read from the op table's
    source (ops/op_util.c's names, ops/pairwise.c's aliases): name -> metric."""
    import re
    from conftest import REPO
    with open(os.path.join(REPO, "ops", "op_util.c")) as f:
        names = dict(re.findall(r'\[(GPUQ_K_[A-Z]+)\] = "([a-z0-9]+)"', f.read()))
    with open(os.path.join(REPO, "ops", "pairwise.c")) as f:
        src = f.read()
    table = src[src.index("op_metric_aliases[OP_METRIC_NALIASES] = {"):]
    table = table[:table.index("};")]
    aliases = re.findall(r'\{"([a-z0-9]+)", (GPUQ_K_[A-Z]+)\}', table)
    assert set(names.values()) == {"euclidean", "sqeuclidean", "cosine", "manhattan",
                                   "chebyshev", "minkowski"}
    assert len(aliases) >= 3, table
    out = {n: n for n in names.values()}
    out.update({a: names[k] for a, k in aliases})
    return out


def _scipy_metric_names():
    """scipy's names and aliases of the six metrics: name -> gpuq's metric."""
    from scipy.spatial import distance
    canon = {"euclidean": "euclidean", "sqeuclidean": "sqeuclidean", "cosine": "cosine",
             "cityblock": "manhattan", "chebyshev": "chebyshev", "minkowski": "minkowski"}
    info = getattr(distance, "_METRICS", None)  # private; its aka sets
    if info is None:
        pytest.skip("this scipy has no _METRICS")
    return {a: canon[m] for m in canon for a in info[m].aka}


def test_metric_names_of_libgpuq_and_scipy(client):
    """Every name libgpuq/gpuqctl accept and every scipy alias gives its
    metric's bytes, and the request carries the metric's own name."""
    from gpuq import _ops
    names = dict(_libgpuq_metric_names())
    names.update(_scipy_metric_names())
    assert {"cityblock", "l1", "l2", "manhattan", "cblock", "cb", "c", "eu", "e",
            "sqe", "cos"} <= set(names)
    rng = np.random.default_rng(13)
    x, y = rng.random((7, 4)), rng.random((5, 4))
    ref = {m: client.pairwise(x, y, metric=m) for m in set(names.values())}
    refk = {m: client.knn(x, y, 3, metric=m) for m in set(names.values())}
    for name, m in sorted(names.items()):
        for spelled in (name, name.upper()):  # scipy lowercases the name too
            assert _ops.pairwise(x, y, metric=spelled).keys["metric"] == m, spelled
            assert _ops.knn(x, y, 3, metric=spelled).keys["metric"] == m, spelled
            assert client.pairwise(x, y, metric=spelled).tobytes() == ref[m].tobytes(), spelled
            d, i = client.knn(x, y, 3, metric=spelled)
            assert d.tobytes() == refk[m][0].tobytes() and (i == refk[m][1]).all(), spelled
    scipy_name = {"manhattan": "cityblock"}
    for name, m in names.items():
        np.testing.assert_allclose(ref[m], cdist(x, y, scipy_name.get(m, m)), rtol=1e-12,
                                   atol=1e-15)
    for bad in ("mahalanobis", "l3", "", "euclidean ", None, 1):
        with pytest.raises(gpuq.BadArgumentError, match="metric"):
            client.pairwise(x, y, metric=bad)


def test_pairwise_cosine_zero(client):
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    with pytest.raises(gpuq.ZeroNormError):
        client.pairwise(x, x, metric="cosine")
    d = client.pairwise(x, x, metric="cosine", on_zero="zero")
    assert d[0, 0] == 1.0 and d[0, 1] == 1.0 and d[1, 1] == 0.0


def test_pairwise_cosine_zero_nan(client):
    """on_zero="nan": scipy's cdist NaN for a zero vector; knn sorts it last."""
    x = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    d = client.pairwise(x, x, metric="cosine", on_zero="nan")
    with np.errstate(all="ignore"):
        ref = cdist(x, x, "cosine")
    np.testing.assert_array_equal(np.isnan(d), np.isnan(ref))
    np.testing.assert_allclose(d[1:, 1:], ref[1:, 1:], rtol=1e-15, atol=1e-16)
    dist, idx = client.knn(x[1:], x, 3, metric="cosine", on_zero="nan")
    assert (idx[:, 2] == 0).all() and np.isnan(dist[:, 2]).all()
    with pytest.raises(gpuq.BadArgumentError, match="on_zero"):
        client.pairwise(x, x, metric="cosine", on_zero="NaN")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("metric,p", [("chebyshev", None), ("minkowski", 1), ("minkowski", 1.5),
                                      ("minkowski", 3), ("minkowski", 0.5),
                                      ("minkowski", np.inf), ("minkowski", None)])
def test_pairwise_knn_minkowski_chebyshev(client, dt, metric, p):
    """scipy's cdist(x, y, metric, p=p) for both ops, p=None being scipy's 2."""
    rng = np.random.default_rng(31)
    x = rng.standard_normal((17, 9)).astype(dt)
    y = rng.standard_normal((40, 9)).astype(dt)
    kw = {} if p is None else {"p": p}
    ref = cdist(x.astype(np.float64), y.astype(np.float64), metric, **kw)
    r = dict(rtol=2e-7, atol=0) if dt == np.float32 else dict(rtol=1e-14, atol=0)
    d = client.pairwise(x, y, metric, **kw)
    assert d.dtype == dt and d.shape == (17, 40)
    np.testing.assert_allclose(d, ref, **r)
    dist, idx = client.knn(x, y, 5, metric, **kw)
    np.testing.assert_allclose(np.take_along_axis(ref, idx, 1), dist, **r)
    np.testing.assert_allclose(dist, np.sort(ref, axis=1)[:, :5], **r)


def test_minkowski_bad_p(client):
    """Bad p names p, from the client's own check and from gpuqd's (a raw
    request); the session goes on."""
    x = np.ones((2, 3))
    for p in (0, -1, -0.5, float("nan"), -np.inf):
        with pytest.raises(gpuq.BadArgumentError, match=r"p=.*p > 0"):
            client.pairwise(x, x, "minkowski", p=p)
        with pytest.raises(gpuq.BadArgumentError, match=r"p="):
            client.knn(x, x, 1, "minkowski", p=p)
    for metric in ("euclidean", "chebyshev", "cosine"):
        with pytest.raises(gpuq.BadArgumentError, match="minkowski's exponent"):
            client.pairwise(x, x, metric, p=3)
    for p in (True, None.__class__, "three"):
        with pytest.raises(gpuq.BadArgumentError, match="p"):
            client.pairwise(x, x, "minkowski", p=p)
    from gpuq import _ops
    for p, metric in ((0.0, "minkowski"), (-2.0, "minkowski"), (3.0, "euclidean")):
        call = _ops.pairwise(x, x, "minkowski")
        call.keys["p"], call.keys["metric"] = p, metric  # past the client's checks
        with pytest.raises(gpuq.BadArgumentError, match='"?p"?'):
            client._run(call, None)
    assert client.ping() >= 0
    np.testing.assert_allclose(client.pairwise(x, x, "minkowski", p=3), np.zeros((2, 2)))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean", "cosine", "cityblock"])
def test_knn(client, dt, metric):
    rng = np.random.default_rng(6)
    x = rng.random((20, 8)).astype(dt)
    y = rng.random((300, 8)).astype(dt)
    k = 7
    dist, idx = client.knn(x, y, k, metric=metric)
    assert dist.shape == (20, k) and dist.dtype == dt
    assert idx.shape == (20, k) and idx.dtype == np.int64
    ref = cdist(x.astype(np.float64), y.astype(np.float64), metric)
    r = dict(rtol=1e-4, atol=1e-5) if dt == np.float32 else dict(rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dist, np.sort(ref, axis=1)[:, :k], **r)
    np.testing.assert_allclose(np.take_along_axis(ref, idx, 1), dist, **r)
    assert (np.diff(dist, axis=1) >= 0).all()


def test_knn_ties_lowest_index_first(client):
    y = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0], [3.0, 3.0]])
    dist, idx = client.knn(np.zeros((1, 2)), y, 4)
    np.testing.assert_array_equal(idx, [[0, 1, 2, 3]])
    np.testing.assert_array_equal(dist, [[1, 1, 1, 1]])


def test_knn_k_checks(client):
    x = np.zeros((1, 2))
    y = np.ones((3, 2))
    with pytest.raises(gpuq.BadArgumentError, match="more than"):
        client.knn(x, y, 4)
    with pytest.raises(gpuq.BadArgumentError, match="k=0: knn needs k >= 1"):
        client.knn(x, y, 0)
    with pytest.raises(gpuq.BadArgumentError):
        client.knn(x, y, 2.5)
    assert client.ping() >= 0


def test_timing(client):
    y, t = client.normalize([1.0, 2.0, 3.0], timing=True)
    np.testing.assert_allclose(y, [1 / 6, 2 / 6, 3 / 6])
    assert isinstance(t, gpuq.Timing)
    assert t.total_us > 0 and t.kernel_us >= 0 and t.queue_us >= 0
    (d, i), t = client.knn([[0.0]], [[1.0], [2.0]], 1, timing=True)
    assert i[0, 0] == 0 and t.total_us > 0
    r = client.grid(lat=(0, 1, 2), lon=(0, 1, 2), timing=True)
    assert isinstance(r, gpuq.Timed) and r.value.shape == (2, 2)


def test_large_results_by_socket(sock_client):
    # results over the reader's direct-receive threshold, one array and two
    rng = np.random.default_rng(12)
    x = rng.random((20000, 4))
    y = rng.random((100, 4))
    dist, idx = sock_client.knn(x, y, 10)  # 1.6 MB of distances, then 1.6 MB of indices
    ref = cdist(x, y)
    np.testing.assert_allclose(dist, np.sort(ref, axis=1)[:, :10], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.take_along_axis(ref, idx, 1), dist, rtol=1e-12, atol=1e-15)
    d32, i32 = sock_client.knn(x[:4999].astype(np.float32), y.astype(np.float32), 3)
    assert d32.dtype == np.float32 and i32.dtype == np.int64 and i32.shape == (4999, 3)
    np.testing.assert_allclose(d32, dist[:4999, :3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.take_along_axis(ref[:4999], i32, 1), d32, rtol=1e-5, atol=1e-6)
    p = sock_client.pairwise(x[:2000], x[:1500], "sqeuclidean")  # 24 MB
    np.testing.assert_allclose(p, cdist(x[:2000], x[:1500], "sqeuclidean"), rtol=1e-12,
                               atol=1e-15)
