# SPDX-License-Identifier: Apache-2.0
"""Inputs as NumPy users pass them: converted right, or refused clearly."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import gpuq


def test_lists_and_ints_are_float64(client):
    y = client.normalize([[1, 2, 3], [4, 5, 6]])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, np.array([[1, 2, 3], [4, 5, 6]]) / [[6], [15]])
    d = client.pairwise(np.arange(6, dtype=np.int32).reshape(3, 2), [[0, 0]])
    assert d.dtype == np.float64
    np.testing.assert_allclose(d[:, 0], np.hypot([0, 2, 4], [1, 3, 5]))
    assert client.normalize(np.array([True, False, True])).tolist() == [0.5, 0.0, 0.5]
    assert client.normalize(np.array([1, 3], dtype=np.uint64)).dtype == np.float64


def test_float16_becomes_float32(client):
    a = np.array([1, 2, 5], dtype=np.float16)
    y = client.normalize(a)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [0.125, 0.25, 0.625])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_big_endian(client, dt):
    a = np.array([[1, 2, 3, 4], [10, 20, 30, 45]], dtype=np.dtype(dt).newbyteorder(">"))
    assert a.dtype.byteorder == ">"
    y = client.normalize(a, "l2")
    assert y.dtype == np.dtype(dt) and y.dtype.byteorder in "=<"
    ref = a.astype(np.float64) / np.linalg.norm(a.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    pts = np.array([[48.8566, 2.3522]], dtype=">f8")
    assert abs(client.haversine(pts, to=(30, 101))[0] - 8127.32480494) < 1e-6


def test_non_contiguous_views(client):
    rng = np.random.default_rng(7)
    base = rng.random((40, 30)) + 0.1
    for view in (base[::3, ::2], base.T, base[5:9, 3:20], np.asfortranarray(base),
                 base[:, ::-1]):
        assert not view.flags.c_contiguous or view is base.T
        np.testing.assert_allclose(client.normalize(view, "l1"),
                                   view / view.sum(axis=1, keepdims=True), rtol=1e-13)
    x, y = base[::2, :8], base[1::2, ::3][:, :8]
    np.testing.assert_allclose(client.pairwise(x, y, "cosine"), cdist(x, y, "cosine"),
                               rtol=1e-10, atol=1e-14)
    pts = np.stack([rng.uniform(-90, 90, 100), rng.uniform(-180, 180, 100)], 1)
    cols = np.asfortranarray(pts)
    np.testing.assert_array_equal(client.haversine(cols, to=(1, 2)),
                                  client.haversine(pts, to=(1, 2)))


def test_mixed_dtypes_promote(client):
    x = np.random.default_rng(8).random((4, 3)).astype(np.float32)
    y = np.random.default_rng(9).random((5, 3))
    d = client.pairwise(x, y)
    assert d.dtype == np.float64
    np.testing.assert_allclose(d, cdist(x.astype(np.float64), y), rtol=1e-12)
    assert client.pairwise(x, x.astype(np.float16)).dtype == np.float32
    assert client.pairwise(x, np.ones((2, 3), np.int8)).dtype == np.float64


def test_dtype_argument(client):
    a = np.array([1.0, 2.0, 5.0])
    y = client.normalize(a, dtype=np.float32)
    assert y.dtype == np.float32
    assert client.normalize([1, 2], dtype="f64").dtype == np.float64
    g = client.grid(lat=(0, 1, 3), lon=(0, 1, 3), dtype="f32")
    assert g.dtype == np.float32
    with pytest.raises(gpuq.BadDtypeError, match="float32 or float64"):
        client.normalize(a, dtype=np.int64)
    with pytest.raises(gpuq.BadDtypeError):
        client.grid(dtype=np.int32)


@pytest.mark.parametrize("bad, match", [
    (np.array([1 + 2j, 3 + 0j]), "complex"),
    (np.array(["a", "b"]), "strings"),
    (np.array([1, "x"], dtype=object), "Python objects"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), "datetimes"),
])
def test_refused_types(client, bad, match):
    with pytest.raises(gpuq.BadDtypeError, match=match) as ei:
        client.normalize(bad)
    assert isinstance(ei.value, TypeError) and ei.value.code == -6


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="long double is double here")
def test_longdouble_refused(client):
    with pytest.raises(gpuq.BadDtypeError, match="lose precision"):
        client.normalize(np.array([1, 2], dtype=np.longdouble))
    assert client.normalize(np.array([1, 2], dtype=np.longdouble), dtype=np.float64)[0] == 1 / 3


def test_refused_shapes(client):
    with pytest.raises(gpuq.BadShapeError, match="scalar"):
        client.normalize(3.0)
    with pytest.raises(gpuq.BadShapeError, match="NumPy can read"):
        client.normalize([[1, 2], [3]])
    with pytest.raises(gpuq.BadShapeError, match=r"\(n, 2\)"):
        client.haversine([[1, 2, 3]], to=(0, 0))
    with pytest.raises(gpuq.BadShapeError, match="same shape"):
        client.haversine([[1, 2]], [[1, 2], [3, 4]])
    with pytest.raises(gpuq.BadShapeError, match="2-D"):
        client.pairwise([1, 2, 3], [[1, 2, 3]])
    with pytest.raises(gpuq.BadShapeError, match="y has d=2, x has d=3"):
        client.pairwise([[1, 2, 3]], [[1, 2]])
    with pytest.raises(gpuq.BadArgumentError):
        client.haversine([[1, 2]])  # neither b nor to
    with pytest.raises(gpuq.BadArgumentError):
        client.haversine([[1, 2]], [[1, 2]], to=(0, 0))


def test_out_argument(client):
    a = np.array([[1.0, 3.0], [2.0, 2.0]])
    out = np.empty_like(a)
    r = client.normalize(a, out=out)
    assert r is out
    np.testing.assert_allclose(out, [[0.25, 0.75], [0.5, 0.5]])
    # a non-contiguous, big-endian out is filled through a copy
    big = np.zeros((2, 4), dtype=">f8")
    client.normalize(a, out=big[:, ::2])
    np.testing.assert_allclose(big[:, ::2], out)
    assert (big[:, 1::2] == 0).all()
    # in place
    b = a.copy()
    client.normalize(b, out=b)
    np.testing.assert_array_equal(b, out)
    # float32 result into a float64 out: a safe cast
    o64 = np.empty(2)
    client.normalize(np.array([1, 3], np.float32), out=o64)
    np.testing.assert_allclose(o64, [0.25, 0.75])
    dist, idx = np.empty((1, 2)), np.empty((1, 2), np.int64)
    rd, ri = client.knn([[0.0]], [[3.0], [1.0], [2.0]], 2, out=(dist, idx))
    assert rd is dist and ri is idx and idx.tolist() == [[1, 2]]
    with pytest.raises(gpuq.BadShapeError):
        client.normalize(a, out=np.empty(4))
    with pytest.raises(gpuq.BadDtypeError):
        client.normalize(a, out=np.empty((2, 2), np.int64))
    with pytest.raises(gpuq.BadArgumentError):
        client.normalize(a, out=[[0, 0], [0, 0]])
    ro = np.empty((2, 2))
    ro.flags.writeable = False
    with pytest.raises(gpuq.BadArgumentError, match="read-only"):
        client.normalize(a, out=ro)


def test_argument_checks(client):
    with pytest.raises(gpuq.BadArgumentError, match='method "max" is not sum, l1, l2, minmax'):
        client.normalize([1.0], method="max")
    with pytest.raises(gpuq.BadArgumentError, match="metric"):
        client.pairwise([[1.0]], [[1.0]], metric="hamming")
    with pytest.raises(gpuq.BadArgumentError, match="on_zero"):
        client.normalize([1.0], on_zero="NaN")
    with pytest.raises(gpuq.BadArgumentError, match="radius"):
        client.haversine([[0, 0]], to=(0, 0), radius=-1)
    with pytest.raises(gpuq.BadArgumentError, match=r"\(lat, lon\)"):
        client.haversine([[0, 0]], to=(0, 0, 0))
    with pytest.raises(gpuq.BadArgumentError, match="lat n"):
        client.grid(lat=(0, 1, -1))
    assert client.ping() >= 0  # nothing was sent wrong; the session goes on
