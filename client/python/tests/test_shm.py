# SPDX-License-Identifier: Apache-2.0
"""Shared-memory arenas: zero-copy arrays, results identical to the socket's,
no array byte on the socket, and a transparent fallback without arenas."""

import gc

import numpy as np
import pytest

import gpuq

RNG = np.random.default_rng(30)


def my_bytes(c):
    """(bytes_in, bytes_out) gpuqd counted for this session."""
    s = next(s for s in c.sessions() if s["self"])
    return s["bytes_in"], s["bytes_out"]


def op_cases(dt):
    x = (RNG.random((257, 33)) + 0.1).astype(dt)
    y = (RNG.random((129, 33)) + 0.1).astype(dt)
    pts = np.stack([RNG.uniform(-90, 90, 1000), RNG.uniform(-180, 180, 1000)], 1).astype(dt)
    pts2 = np.stack([RNG.uniform(-90, 90, 1000), RNG.uniform(-180, 180, 1000)], 1).astype(dt)
    return [
        ("normalize", (x,), {"method": "zscore"}),
        ("normalize", (x,), {"method": "l2", "flat": True}),
        ("haversine", (pts,), {"to": (10, 20)}),
        ("haversine", (pts, pts2), {}),
        ("pairwise", (x, y), {"metric": "cosine"}),
        ("pairwise", (x,), {"metric": "sqeuclidean"}),
        ("knn", (x, y, 5), {"metric": "cityblock"}),
        ("grid", (), {"lat": (-10, 10, 100), "lon": (0, 50, 70), "dtype": dt}),
    ]


def same(a, b):
    if isinstance(a, tuple):
        return all(same(u, v) for u, v in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_arena_results_identical_to_socket(client, sock_client, dt):
    assert client.shm and client.transport == "auto"
    for op, args, kw in op_cases(dt):
        ref = getattr(sock_client, op)(*args, **kw)
        # inputs in the arena; results come back as arena arrays
        shared = tuple(client.asarray(a) if isinstance(a, np.ndarray) else a for a in args)
        got = getattr(client, op)(*shared, **kw)
        assert same(got, ref), op
        for g in (got if isinstance(got, tuple) and shared else (got,) if shared else ()):
            assert client.in_arena(g), op
        if op == "grid":  # no input: the result goes to the arena only with out=
            o = client.empty(ref.shape, ref.dtype)
            assert getattr(client, op)(*args, out=o, **kw) is o and same(o, ref)
        # plain inputs, forced through the arena (staged in and out)
        client.transport = "shm"
        try:
            got2 = getattr(client, op)(*args, **kw)
        finally:
            client.transport = "auto"
        assert same(got2, ref), op
        for g in (got2 if isinstance(got2, tuple) else (got2,)):
            assert not client.in_arena(g), op  # copied out of the staging block


def test_no_array_byte_on_the_socket(gpuqd):
    # staging off (shm_min_bytes huge): only the arrays' own arena makes this pass
    with gpuq.connect(gpuqd.path, shm_min_bytes=1 << 62) as client:
        _no_array_byte(client)


def _no_array_byte(client):
    n = 1 << 20
    x = client.asarray(RNG.random(n) + 0.5)
    y = client.empty(n)
    client.normalize(x, out=y)  # opens nothing more: the warm-up
    b0 = my_bytes(client)
    r = client.normalize(x, out=y)
    b1 = my_bytes(client)
    assert r is y
    np.testing.assert_allclose(y, x / x.sum(), rtol=1e-12)
    # the request and reply frames only (and the sessions query's own bytes)
    assert b1[0] - b0[0] < 1024 and b1[1] - b0[1] < 4096, (b0, b1)
    # the same through the socket moves the array both ways
    client.transport = "socket"
    try:
        client.normalize(x, out=y)
    finally:
        client.transport = "auto"
    b2 = my_bytes(client)
    assert b2[0] - b1[0] >= 8 * n and b2[1] - b1[1] >= 8 * n


def test_large_plain_arrays_are_staged(client, sock_client):
    x = RNG.random((512, 512)) + 0.1  # 2 MiB in, 2 MiB out: over shm_min_bytes
    b0 = my_bytes(client)
    y = client.normalize(x, "l2")
    b1 = my_bytes(client)
    assert not client.in_arena(y)
    assert b1[0] - b0[0] < 1024, "the input went by socket"
    assert same(y, sock_client.normalize(x, "l2"))
    small = client.normalize(x[:4], "l2")  # 16 KiB: the socket
    assert same(small, sock_client.normalize(x[:4], "l2"))


def test_mixed_and_views(client, sock_client):
    x = client.asarray(RNG.random((300, 16)))
    y = RNG.random((40, 16))  # plain: staged beside x
    assert same(client.pairwise(x, y), sock_client.pairwise(np.asarray(x), y))
    v = x[10:200]  # a C-contiguous view of an arena array goes by reference too
    assert client.in_arena(v)
    assert same(client.normalize(v), sock_client.normalize(np.array(v)))
    w = x[:, ::2]  # not contiguous: converted (copied), results the same
    assert same(client.normalize(w, "minmax"), sock_client.normalize(np.array(w), "minmax"))
    # out= in place, in the arena: the result goes through a block, then into x
    ref = sock_client.normalize(np.array(x), "l1")
    assert client.normalize(x, "l1", out=x) is x
    assert same(x, ref)
    # a plain out with an arena input
    o = np.empty((300, 16))
    client.normalize(x, out=o)
    assert same(o, sock_client.normalize(np.array(x)))
    # knn outputs in the arena
    dist, idx = client.empty((300, 3)), client.empty((300, 3), np.int64)
    rd, ri = client.knn(x, y, 3, out=(dist, idx))
    assert rd is dist and ri is idx
    assert same((dist, idx), sock_client.knn(np.array(x), y, 3))
    # float32 arena array from asarray(dtype=)
    x32 = client.asarray(np.array(x), dtype=np.float32)
    assert x32.dtype == np.float32 and client.in_arena(x32)
    assert same(client.normalize(x32), sock_client.normalize(np.array(x32)))


def test_blocks_are_reused(client):
    for _ in range(50):
        a = client.asarray(RNG.random(1 << 18))
        client.normalize(a)
        del a
        gc.collect()
    assert len(client._s.pool.arenas) == 1
    st = client.status()
    assert st["arenas"] >= 1


def test_arrays_outlive_the_client(gpuqd, sock_client):
    with gpuq.connect(gpuqd.path) as c:
        x = c.asarray([[1.0, 3.0]])
        y = c.normalize(x)
    assert not c.in_arena(x)
    np.testing.assert_array_equal(y, [[0.25, 0.75]])  # still readable
    assert sock_client.normalize(x).tolist() == [[0.25, 0.75]]  # sent by socket now
    with gpuq.connect(gpuqd.path) as c2:
        assert not c2.in_arena(x)
        assert c2.normalize(x).tolist() == [[0.25, 0.75]]


def test_no_arenas_fallback(make_daemon):
    d = make_daemon(config="[limits]\nsession_arena = 0\n")
    with gpuq.connect(d.path) as c:
        assert not c.shm and c.info["arenas"] is False
        x = c.empty((1000, 300))
        assert type(x) is np.ndarray and not c.in_arena(x)
        x[...] = RNG.random(x.shape) + 0.1
        y = c.normalize(c.asarray(x), "l2")  # 2.4 MB: by socket, transparently
        np.testing.assert_allclose(y, x / np.linalg.norm(x, axis=1, keepdims=True), rtol=1e-13)
        with pytest.raises(gpuq.TooLargeError):
            c.empty(10, strict=True)
        with pytest.raises(gpuq.BadArgumentError, match="no shared-memory arenas"):
            c.transport = "shm"
    with pytest.raises(gpuq.BadArgumentError, match="no shared-memory arenas"):
        gpuq.connect(d.path, transport="shm")


def test_arena_quota_fallback(make_daemon):
    d = make_daemon(config="[limits]\nsession_arena = 4M\n")
    with gpuq.connect(d.path) as c, gpuq.connect(d.path, transport="socket") as s:
        assert c.shm and c.limits["session_arena"] == 4 << 20
        big = c.empty(1 << 20)  # 8 MiB: over the quota, a plain array
        assert not c.in_arena(big)
        with pytest.raises(gpuq.TooLargeError):
            c.empty(1 << 20, strict=True)
        small = c.empty(1 << 16)
        assert c.in_arena(small)
        x = RNG.random(1 << 20) + 0.5  # staging would need 16 MiB: the socket
        assert same(c.normalize(x), s.normalize(x))
        c.transport = "shm"
        with pytest.raises(gpuq.TooLargeError, match="shm transport"):
            c.normalize(x)
        assert c.ping() >= 0
