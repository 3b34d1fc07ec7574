# SPDX-License-Identifier: Apache-2.0
"""Plain arrays staged through the arena with threaded copies (gpuq/_copy.py).

The copy itself equals np.copyto for odd sizes, offsets, dtypes and
layouts; staged results equal the socket's byte for byte at the copy's
chunk boundaries (a whole number of chunks, one element less, one more)
and for a size that gives each of four threads several chunks, for inputs
(one, two) and outputs (one, two, a caller's out=, contiguous or not); a
child after fork stages with threads of its own; and a small request on
arena arrays takes the short path and frees nothing it should keep.
"""

import os

import numpy as np
import pytest

import gpuq
from gpuq import _copy

RNG = np.random.default_rng(28)
CH = _copy.CHUNK_MIN  # slices are multiples of it (of CHUNK at most)


@pytest.fixture
def four_threads(monkeypatch):
    """The copy pool restarted with four threads (the caller counted)."""
    monkeypatch.setenv("GPUQ_COPY_THREADS", "4")
    old = _copy._pool
    _copy._forget_pool()
    if old is not None:
        old.shutdown(wait=True)
    yield
    new = _copy._pool
    monkeypatch.delenv("GPUQ_COPY_THREADS")
    _copy._forget_pool()
    if new is not None:
        new.shutdown(wait=True)


def same(a, b):
    if isinstance(a, tuple):
        return all(same(u, v) for u, v in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def at_boundaries(itemsize, ks=(4, 8, 9)):
    """Element counts whose bytes lie at slice boundaries (k of CHUNK_MIN:
    with 4 threads, 4 such are the threshold and a slice of CHUNK_MIN each,
    8 two slices of CHUNK_MIN for each thread, 9 a short last slice): k
    slices less an element, k, k and an element; and one of many 2 MiB
    slices for each thread, with a short last one."""
    out = [k * CH // itemsize + d for k in ks for d in (-1, 0, 1)]
    return out + [(3 * 4 * _copy.CHUNK + CH // 2) // itemsize + 3]


def counted_helpers(monkeypatch):
    """Count the slices the pool's threads (not the caller) copy: _Job.helper
    as it is, counting."""
    seen = []

    def helper(job, casting):
        with job.cv:
            if job.closed:
                return
            job.active += 1
        try:
            for d, s in job.it:
                np.copyto(d, s, casting=casting)
                seen.append(1)
        except BaseException as e:
            job.error = e
        finally:
            with job.cv:
                job.active -= 1
                if job.active == 0:
                    job.cv.notify()

    monkeypatch.setattr(_copy._Job, "helper", helper)
    return seen


# ---- the copy itself ----

@pytest.mark.parametrize("nbytes", [0, 1, 63, _copy.MIN_BYTES - 1, _copy.MIN_BYTES,
                                    _copy.MIN_BYTES + 1, 9 * CH - 1, 9 * CH, 9 * CH + 1,
                                    8 * _copy.CHUNK + 12345])
@pytest.mark.parametrize("offs", [(0, 0), (1, 0), (0, 3), (7, 63)])
def test_copy_equals_copyto_bytes(four_threads, nbytes, offs):
    src_buf = RNG.integers(0, 256, nbytes + 64, dtype=np.uint8)
    dst_buf = np.full(nbytes + 128, 0xA5, np.uint8)
    want = dst_buf.copy()
    src = src_buf[offs[0]:offs[0] + nbytes]
    dst = dst_buf[offs[1]:offs[1] + nbytes]
    np.copyto(want[offs[1]:offs[1] + nbytes], src)
    _copy.copy(dst, src)
    assert dst_buf.tobytes() == want.tobytes()


def test_copy_layouts_and_casts(four_threads):
    a = RNG.random((1100, 300))  # 2.6 MB of float64
    for src, dst_dt, casting in [
        (a, np.float64, "no"),
        (a, np.float32, "same_kind"),
        (a.astype(np.float32), np.float64, "same_kind"),
        (a[:, ::2], np.float64, "same_kind"),  # strided source: split by rows
        (a[::-1], np.float64, "same_kind"),
        ((a * 100).astype(np.int64), np.float64, "unsafe"),
    ]:
        want = np.empty(src.shape, dst_dt)
        np.copyto(want, src, casting=casting)
        got = np.empty(src.shape, dst_dt)
        _copy.copy(got, src, casting)
        assert got.tobytes() == want.tobytes()
        # a strided destination
        big = np.zeros((src.shape[0], 2 * src.shape[1]), dst_dt)
        _copy.copy(big[:, 1::2], src, casting)
        assert big[:, 1::2].tobytes() == want.tobytes() and not big[:, 0::2].any()
    # what np.copyto refuses, copy refuses the same way
    with pytest.raises(TypeError):
        _copy.copy(np.empty(a.shape, np.int64), a, "same_kind")
    # one row of many bytes (cannot be split by rows): still the right bytes
    row = RNG.random((1, 400000))
    out = np.empty((1, 400000))
    _copy.copy(out[:, ::-1], row)
    assert out[:, ::-1].tobytes() == row.tobytes()
    assert _copy._nthreads == 4 and _copy._pool is not None


def test_copy_threads_take_slices(four_threads, monkeypatch):
    seen = counted_helpers(monkeypatch)
    src = RNG.random(8 << 20 >> 3 << 3)  # 64 MiB
    dst = np.empty_like(src)
    for _ in range(20):
        _copy.copy(dst, src)
        if seen:
            break
    assert dst.tobytes() == src.tobytes()
    assert seen, "no thread of the pool copied a slice"


def test_slice_sizes():
    assert _copy.slice_bytes(64 << 20, 8) == _copy.CHUNK
    assert _copy.slice_bytes(4 << 20, 8) == CH
    assert _copy.slice_bytes(9 * CH, 4) == CH
    assert _copy.slice_bytes(24 * CH + 5, 4) == 3 * CH
    assert _copy.slice_bytes(1 << 30, 1) == _copy.CHUNK


def test_copy_threads_setting(monkeypatch):
    for v, want in [("1", 1), ("7", 7), ("64", 64)]:
        monkeypatch.setenv("GPUQ_COPY_THREADS", v)
        assert _copy.threads() == want
    cpus = len(os.sched_getaffinity(0))
    for v in ("0", "65", "x", "", "-3"):
        monkeypatch.setenv("GPUQ_COPY_THREADS", v)
        assert _copy.threads() == max(1, min(16, cpus - 2))


# ---- staged requests against the socket ----

@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_staged_equals_socket_at_chunk_boundaries(four_threads, client, sock_client, dt):
    item = np.dtype(dt).itemsize
    for n in at_boundaries(item):
        x = (RNG.random(n) * 9 - 2).astype(dt)
        ref = sock_client.normalize(x, "zscore")
        got = client.normalize(x, "zscore")
        assert not client.in_arena(got) and same(got, ref), n
        # a caller's out=, plain and contiguous: received straight into it
        o = np.full(n, 7, dt)
        assert client.normalize(x, "zscore", out=o) is o and same(o, ref), n
        # a strided out= (copied into from the arena block, by rows)
        o2 = np.zeros((n, 2), dt)
        client.normalize(x.reshape(n, 1), "zscore", flat=True, out=o2[:, 1:])
        assert o2[:, 1].tobytes() == ref.tobytes() and not o2[:, 0].any(), n
    assert _copy._nthreads == 4


def test_two_inputs_and_two_outputs_at_chunk_boundaries(four_threads, client, sock_client):
    for n in at_boundaries(16, ks=(4, 9)):  # haversine: 16 bytes a point, two inputs
        a = np.stack([RNG.uniform(-90, 90, n), RNG.uniform(-180, 180, n)], 1)
        b = np.stack([RNG.uniform(-90, 90, n), RNG.uniform(-180, 180, n)], 1)
        assert same(client.haversine(a, b), sock_client.haversine(a, b)), n
    y = RNG.random((8, 2)).astype(np.float32)
    for m in at_boundaries(4, ks=(4, 9)):  # knn, k 1: distances 4 bytes a row, indices 8
        x = RNG.random((m, 2)).astype(np.float32)
        ref = sock_client.knn(x, y, 1)
        assert same(client.knn(x, y, 1), ref), m
        d, i = np.empty((m, 1), np.float32), np.empty((m, 1), np.int64)
        assert same(client.knn(x, y, 1, out=(d, i)), ref), m


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork beside threads (3.12+)
def test_forked_child_stages(four_threads, gpuqd, client, sock_client):
    x = RNG.random(3 * _copy.CHUNK // 8 + 5)
    ref = sock_client.normalize(x)
    assert same(client.normalize(x), ref)  # the parent's pool is up
    assert _copy._pool is not None
    parent_pool = _copy._pool
    pid = os.fork()
    if pid == 0:  # the child: no pytest from here on, only an exit status
        code = 1
        try:
            ok = _copy._pool is None  # the parent's threads are not here
            with gpuq.connect(gpuqd.path) as c:
                for _ in range(3):
                    ok = ok and same(c.normalize(x), ref)
            ok = ok and _copy._pool is not None and _copy._pool is not parent_pool
            code = 0 if ok else 3
        finally:
            os._exit(code)
    for _ in range(3):  # the parent calls on meanwhile
        assert same(client.normalize(x), ref)
    _, st = os.waitpid(pid, 0)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, st


# ---- small requests on arena arrays ----

def test_small_arena_requests_short_path(client, sock_client):
    x = RNG.random(1024).astype(np.float32)
    xa = client.asarray(x)
    ref = sock_client.normalize(x)
    pool = client._s.pool
    for _ in range(200):
        y = client.normalize(xa)
        assert client.in_arena(y) and same(y, ref)
        assert not client._s.pending
    held = [client.normalize(xa) for _ in range(20)]  # each result its own block
    offs = {pool.lookup(h) for h in held}
    assert len(offs) == 20 and all(same(h, ref) for h in held)
    del held, y
    # out= in the arena, and a view of an arena array
    o = client.empty(1024, np.float32)
    assert client.normalize(xa, out=o) is o and same(o, ref)
    v = client.asarray(RNG.random(2048))[100:1124]
    assert client.in_arena(v) and same(client.normalize(v), sock_client.normalize(np.array(v)))
    # an error reply on the short path, and the connection serves on
    with pytest.raises(gpuq.ZeroNormError):
        client.normalize(client.asarray(np.zeros(16)), "sum")
    assert same(client.normalize(xa), ref)
