# SPDX-License-Identifier: Apache-2.0
"""normalize(a, axis=...) as numpy and scikit-learn mean it, knn with k past
1024, and gpuqd's messages in the user's words (issue 31), through the
sync and asyncio clients."""

import asyncio

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import gpuq
import gpuq.aio


def sk_normalize(a, axis):
    """scikit-learn's normalize(a, norm="l2", axis=axis), in numpy."""
    return a / np.linalg.norm(a, axis=axis, keepdims=True)


def test_axis_columns_as_sklearn(client):
    rng = np.random.default_rng(31)
    a = rng.uniform(-7, 11, (37, 19))
    for axis in (0, -2):
        np.testing.assert_allclose(client.normalize(a, "l2", axis=axis), sk_normalize(a, 0),
                                   rtol=1e-13)
    for axis in (1, -1, None):
        np.testing.assert_array_equal(client.normalize(a, "l2", axis=axis),
                                      client.normalize(a, "l2"))
    # bit for bit the rows of a.T
    np.testing.assert_array_equal(client.normalize(a, "zscore", axis=0),
                                  client.normalize(np.ascontiguousarray(a.T), "zscore").T)
    f = a.astype(np.float32)
    got = client.normalize(f, "minmax", axis=0)
    assert got.dtype == np.float32
    want = (a - a.min(0)) / (a.max(0) - a.min(0))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)
    # a list, and an N-D array along a middle axis
    np.testing.assert_allclose(client.normalize([[1, 2], [3, 2]], "sum", axis=0),
                               [[0.25, 0.5], [0.75, 0.5]], rtol=1e-15)
    b = rng.uniform(0.5, 3, (3, 4, 5))
    np.testing.assert_allclose(client.normalize(b, "l1", axis=1), b / b.sum(1, keepdims=True),
                               rtol=1e-13)
    v = rng.uniform(0.5, 3, 9)
    np.testing.assert_array_equal(client.normalize(v, "l2", axis=0), client.normalize(v, "l2"))


def test_axis_bad(client):
    a = np.ones((3, 4))
    for axis in (2, -3):
        with pytest.raises(gpuq.BadArgumentError, match=f"axis={axis} is out of range"):
            client.normalize(a, axis=axis)
    for axis in (0.5, "0", True):
        with pytest.raises(gpuq.BadArgumentError, match="axis must be an integer"):
            client.normalize(a, axis=axis)
    with pytest.raises(gpuq.BadArgumentError, match="axis or flat"):
        client.normalize(a, flat=True, axis=0)
    # gpuqd's own check, through a resident array whose rank only gpuqd knows
    client.put("shape_axis", a)
    r = client.resident("shape_axis")
    try:
        with pytest.raises(gpuq.BadArgumentError,
                           match=r"axis=2 is out of range for a 2-D array \(0, 1, -1 or -2\)"):
            client.normalize(r, axis=2)
        np.testing.assert_array_equal(client.normalize(r, "sum", axis=0), a / 3)
    finally:
        client.remove("shape_axis")
    assert client.ping() > 0


def test_zero_named(client):
    a = np.arange(1.0, 121.0).reshape(20, 6)
    a[:, 4] = 0.0
    with pytest.raises(gpuq.ZeroNormError, match="column 4 has zero l2 norm"):
        client.normalize(a, "l2", axis=0)
    assert np.isnan(client.normalize(a, "l2", axis=0, on_zero="nan")[:, 4]).all()
    a = np.arange(1.0, 121.0).reshape(20, 6)
    a[12] = 0.0
    with pytest.raises(gpuq.ZeroNormError, match="row 12 has zero l2 norm"):
        client.normalize(a, "l2")
    x, y = np.ones((2, 5)), np.ones((700, 5))
    y[637] = 0.0
    with pytest.raises(gpuq.ZeroNormError, match="y row 637 is a zero vector"):
        client.knn(x, y, 3, "cosine")
    with pytest.raises(gpuq.BadShapeError, match="y has d=4, x has d=3"):
        client.pairwise(np.ones((2, 3)), np.ones((5, 4)))


def test_knn_past_1024(client):
    rng = np.random.default_rng(7)
    x = rng.integers(-2, 3, (3, 3)).astype(np.float64)
    y = rng.integers(-3, 4, (2600, 3)).astype(np.float64)
    y[[0, 5, 1300, 2599], [0, 1, 2, 0]] = np.nan
    full = cdist(x, y, "sqeuclidean")
    order = np.argsort(np.where(np.isnan(full), np.inf, full), axis=1, kind="stable")
    for k in (1025, 2000, 2600):
        d, i = client.knn(x, y, k, "sqeuclidean")
        np.testing.assert_array_equal(i, order[:, :k])
        np.testing.assert_array_equal(d, np.take_along_axis(full, order[:, :k], axis=1))


def test_aio_axis_and_k(gpuqd):
    async def main():
        async with gpuq.aio.connect(gpuqd.path, name="aio-shape") as c:
            a = np.random.default_rng(3).uniform(0.5, 2, (40, 7))
            np.testing.assert_allclose(await c.normalize(a, "l2", axis=0), sk_normalize(a, 0),
                                       rtol=1e-13)
            y = np.arange(3000.0).reshape(1500, 2) % 7
            d, i = await c.knn(y[:2], y, 1100, "manhattan")
            full = cdist(y[:2], y, "cityblock")
            np.testing.assert_array_equal(i, np.argsort(full, axis=1, kind="stable")[:, :1100])
            with pytest.raises(gpuq.BadArgumentError, match="axis=5"):
                await c.normalize(a, axis=5)

    asyncio.run(asyncio.wait_for(main(), 120))
