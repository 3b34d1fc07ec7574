# SPDX-License-Identifier: Apache-2.0
"""gpuq.aio: the same ops, errors and arenas from asyncio code."""

import asyncio

import numpy as np
import pytest
from scipy.spatial.distance import cdist

import gpuq
import gpuq.aio


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_ops_and_pipelining(gpuqd):
    async def main():
        async with gpuq.aio.connect(gpuqd.path, name="aio") as c:
            assert isinstance(c, gpuq.aio.AsyncClient) and c.backend
            rng = np.random.default_rng(20)
            xs = [rng.random((3, rng.integers(1, 50))) + 0.1 for _ in range(300)]
            ys = await asyncio.gather(*(c.normalize(x, "l2") for x in xs))
            for x, y in zip(xs, ys):
                np.testing.assert_allclose(y, x / np.linalg.norm(x, axis=1, keepdims=True),
                                           rtol=1e-13)
            a, b = rng.random((5, 4)), rng.random((6, 4))
            np.testing.assert_allclose(await c.pairwise(a, b, "cityblock"),
                                       cdist(a, b, "cityblock"), rtol=1e-12)
            d, i = await c.knn(a, b, 3)
            np.testing.assert_array_equal(i, np.argsort(cdist(a, b), axis=1)[:, :3])
            h = await c.haversine([[0.0, 0.0]], to=(0, 90), radius=1.0)
            assert abs(h[0] - np.pi / 2) < 1e-12
            g, t = await c.grid(lat=(0, 1, 3), lon=(0, 1, 4), timing=True)
            assert g.shape == (3, 4) and t.total_us > 0
            fut = await c.submit("normalize", [1.0, 3.0])
            assert (await fut).tolist() == [0.25, 0.75]
            assert await c.ping() > 0
            st = await c.status()
            assert st["backend"] == c.backend
            assert any(s["self"] and s["client"] == "aio" for s in await c.sessions())
            assert "gpuq_requests_total" in await c.metrics()
    run(main())


def test_errors(gpuqd):
    async def main():
        c = await gpuq.aio.connect(gpuqd.path)
        results = await asyncio.gather(c.normalize([0.0, 0.0]), c.normalize([1.0, 1.0]),
                                       c.knn([[0.0]], [[1.0]], 5), return_exceptions=True)
        assert isinstance(results[0], gpuq.ZeroNormError) and results[0].code == -10
        assert results[1].tolist() == [0.5, 0.5]
        assert isinstance(results[2], gpuq.BadArgumentError)
        with pytest.raises(gpuq.BadShapeError):
            await c.pairwise([[1.0]], [[1.0, 2.0]])
        with pytest.raises(gpuq.UnknownOpError):
            await c.request("no_such_op")
        await c.close()
        with pytest.raises(gpuq.ClosedError):
            await c.ping()
    run(main())


def test_cancel_keeps_stream(gpuqd):
    async def main():
        async with gpuq.aio.connect(gpuqd.path) as c:
            t = asyncio.ensure_future(c.grid(lat=(-80, 80, 1500), lon=(-180, 180, 1500)))
            await asyncio.sleep(0)  # sent
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            # its reply is read and dropped; the stream stays in step
            assert (await c.normalize([1.0, 1.0])).tolist() == [0.5, 0.5]
    run(main())


def test_shm(gpuqd):
    async def main():
        async with gpuq.aio.connect(gpuqd.path) as c:
            assert c.shm
            x = await c.asarray(np.random.default_rng(21).random((300, 64)) + 0.1)
            assert c.in_arena(x)
            out = await c.empty(x.shape)
            r = await c.normalize(x, "l1", out=out)
            assert r is out
            np.testing.assert_allclose(out, x / x.sum(axis=1, keepdims=True), rtol=1e-13)
            y = await c.normalize(x, "l1")
            assert c.in_arena(y)
            np.testing.assert_array_equal(y, out)
    run(main())


def test_connect_error():
    async def main():
        with pytest.raises(gpuq.ConnectError, match="directory .* does not exist"):
            await gpuq.aio.connect("/nonexistent-gpuq-dir-x/none.sock")
    run(main())


def test_concurrent_arena_use(gpuqd):
    async def main():
        async with gpuq.aio.connect(gpuqd.path) as c:
            rng = np.random.default_rng(22)
            xs = [rng.random(1 << 17) + 0.5 for _ in range(16)]  # 1 MiB each: staged
            ys = await asyncio.gather(*(c.normalize(x) for x in xs))
            for x, y in zip(xs, ys):
                np.testing.assert_allclose(y, x / x.sum(), rtol=1e-12)
            assert len(c._s.pool.arenas) == 1  # one arena_open, shared
    run(main())
