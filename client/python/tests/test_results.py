# SPDX-License-Identifier: Apache-2.0
"""The result cache (gpuq/_results.py) behind _copy.copy_of.

copy_of's arrays equal np.copyto's byte for byte around MIN_BYTES, for 2-D,
strided, byte-swapped and structured arrays, and are plain writable
C-contiguous ndarrays; a buffer whose arrays are all garbage is reused by
the next result of its size (exact size first, a larger one up to twice
it), never while a view of it lives; free bytes never exceed
GPUQ_RESULT_CACHE, what does not fit is unmapped, and 0 gives np.empty
arrays; a buffer freed on a thread that holds the cache's lock does not
hang; results of gpuqd through the arena hit the cache; a child after fork
starts with an empty cache and its writes do not reach the parent.
"""

import gc
import os
import threading
import time

import numpy as np
import pytest

import gpuq
from gpuq import _copy, _results

RNG = np.random.default_rng(41)
MIN = _copy.MIN_BYTES
PAGE = _results.PAGE


@pytest.fixture
def cache(monkeypatch):
    """A fresh cache with GPUQ_RESULT_CACHE as the test sets it (set_cap)."""

    def set_cap(value):
        if value is None:
            monkeypatch.delenv("GPUQ_RESULT_CACHE", raising=False)
        else:
            monkeypatch.setenv("GPUQ_RESULT_CACHE", str(value))
        gc.collect()
        _results.reset()
        return _results.stats()

    set_cap(None)
    yield set_cap
    monkeypatch.delenv("GPUQ_RESULT_CACHE", raising=False)
    gc.collect()
    _results.reset()


def check_copy(src):
    """copy_of(src) against np.copyto into np.empty: the same bytes, and a
    plain writable C-contiguous ndarray of src's shape and dtype."""
    want = np.empty(src.shape, src.dtype)
    np.copyto(want, src)
    got = _copy.copy_of(src)
    assert isinstance(got, np.ndarray) and type(got) is np.ndarray
    assert got.shape == src.shape and got.dtype == src.dtype
    assert got.flags.c_contiguous and got.flags.writeable and got.flags.aligned
    assert got.tobytes() == want.tobytes()
    return got


def region_of(a):
    """The mapping behind a cached result, or None."""
    b = a.base
    while isinstance(b, np.ndarray):
        b = b.base
    return b.region[0] if isinstance(b, _results.Buffer) else None


def release(*_):
    gc.collect()
    return _results.stats()


@pytest.mark.parametrize("nbytes", [MIN - 1, MIN, MIN + 1, 3 * MIN + 7])
def test_copy_of_equals_copyto(cache, nbytes):
    src = RNG.integers(0, 256, nbytes, dtype=np.uint8)
    got = check_copy(src)
    assert (region_of(got) is not None) == (nbytes >= MIN)
    assert got.flags.owndata == (nbytes < MIN)
    got[:] = 0  # writable, and its own memory
    assert src.any() and not got.any()


def test_copy_of_shapes_and_dtypes(cache):
    a = RNG.random((1000, 300))  # 2-D float64, 2.3 MiB
    for src in (a, a[:, ::2], a[::-1], a.astype(">f8"), a.astype(np.float32).T,
                (a[:1, :] * 1e4).repeat(1000, 0).astype(np.int32)):
        got = check_copy(src)
        assert region_of(got) is not None
        got[-1, -1] = 42
        assert got[-1, -1] == 42
    rec = np.zeros(MIN // 12 + 3, [("a", "<f4"), ("b", "<i8")])
    rec["a"], rec["b"] = RNG.random(rec.shape), RNG.integers(-9, 9, rec.shape)
    got = check_copy(rec)
    assert region_of(got) is not None and (got["b"] == rec["b"]).all()
    assert _copy.copy_of(np.zeros((0, 1 << 20))).shape == (0, 1 << 20)


def test_released_buffer_is_reused(cache):
    st0 = _results.stats()
    a, b = RNG.random(MIN // 8 + 1), RNG.random(MIN // 8 + 1)
    r = check_copy(a)
    mm, addr = region_of(r), r.ctypes.data
    size = (a.nbytes + PAGE - 1) // PAGE * PAGE
    assert len(mm) == size and addr % PAGE == 0
    st = _results.stats()
    assert st["misses"] == st0["misses"] + 1 and st["free_bytes"] == 0
    del r
    st = release()
    assert st["free_bytes"] == size and st["free_regions"] == 1
    r2 = check_copy(b)  # the same memory, b's bytes (none of a's left over)
    assert r2.ctypes.data == addr and region_of(r2) is mm
    st = _results.stats()
    assert st["hits"] == st0["hits"] + 1 and st["free_bytes"] == 0
    # a view outlives its parent: the memory stays valid and is not reused
    v = r2[5:105]
    w = v.reshape(10, 10)[::2]
    del r2
    st = release()
    assert st["free_regions"] == 0
    r3 = check_copy(a)
    assert r3.ctypes.data != addr
    v[:] = -1.5
    assert (w == -1.5).all() and (v == -1.5).all() and v.base is not None
    assert not mm.closed
    del v
    assert release()["free_regions"] == 0  # w still holds it
    del w
    st = release()
    assert st["free_regions"] == 1 and st["free_bytes"] == size
    del r3
    assert release()["free_regions"] == 2


def test_size_match(cache):
    m = 4 * MIN
    big, small = _copy.copy_of(np.ones(m, np.uint8)), _copy.copy_of(np.ones(m // 2, np.uint8))
    big_mm, small_mm = region_of(big), region_of(small)
    del big, small
    st = release()
    assert st["free_regions"] == 2 and st["free_bytes"] == m + m // 2
    h = st["hits"]
    r = check_copy(np.zeros(m // 2 - 3, np.uint8))  # the same page-rounded size: the small one
    assert region_of(r) is small_mm
    r2 = check_copy(np.zeros(m // 2 + PAGE, np.uint8))  # larger, up to 2x: the big one
    assert region_of(r2) is big_mm and len(r2.base.region[0]) == m
    del r, r2
    release()
    r = check_copy(np.zeros(m // 2 - PAGE, np.uint8))  # the smallest that fits
    assert region_of(r) is small_mm
    r2 = check_copy(np.zeros(m // 2 - 2 * PAGE, np.uint8))  # the big one: more than 2x
    st = _results.stats()
    assert region_of(r2) is not big_mm and st["hits"] == h + 3 and st["free_regions"] == 1
    del r, r2
    st = release()
    assert st["free_bytes"] == m + m // 2 + m // 2 - 2 * PAGE


def test_cap_unmaps_what_does_not_fit(cache):
    cap = 3 * MIN + PAGE
    assert cache(cap)["cap"] == cap
    rs = [check_copy(RNG.random(MIN // 8)) for _ in range(5)]
    mms = [region_of(r) for r in rs]
    del rs
    st = release()
    assert st["free_regions"] == 3 and st["free_bytes"] == 3 * MIN <= cap
    assert st["unmapped"] == 2 and sum(m.closed for m in mms) == 2
    big = check_copy(RNG.random(cap // 8 + 1))  # more than the cap: never kept
    big_mm = region_of(big)
    del big
    st = release()
    assert big_mm.closed and st["unmapped"] == 3 and st["free_bytes"] == 3 * MIN
    # reset drops the free regions (unmapped) and reads the setting again
    assert cache(None)["cap"] == _results.DEFAULT_CAP
    assert all(m.closed for m in mms)
    assert cache("12x")["cap"] == _results.DEFAULT_CAP


def test_cap_zero_is_np_empty(cache, client):
    assert cache(0)["cap"] == 0
    for src in (RNG.random(MIN // 8 + 1), RNG.random((800, 300))):
        for _ in range(2):
            got = check_copy(src)
            assert got.flags.owndata and got.base is None
    x = (RNG.random(1 << 20) * 9 - 2).astype(np.float32)
    y = client.normalize(x)
    assert y.flags.owndata and not client.in_arena(y)
    st = _results.stats()
    assert st["hits"] == st["misses"] == st["free_bytes"] == 0


def test_free_while_lock_held_does_not_hang(cache):
    """A result freed on a thread inside the cache's lock (garbage collected
    during take()) is filed later, without waiting for the lock."""
    c = _results._Cache(4 * MIN)  # a cache of its own: a hang keeps no other test waiting
    r = c.take(MIN).array((MIN,), np.dtype(np.uint8))
    mm = region_of(r)
    done = []

    def inside():
        nonlocal r
        with c.lock:
            del r  # give_back on the thread that holds the lock
        done.append((c.free_bytes, len(c._returned)))

    t = threading.Thread(target=inside, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "give_back waited for a lock its own thread held"
    assert done == [(0, 1)]  # left for the next call to file
    r2 = c.take(MIN)
    assert r2.region[0] is mm and c.hits == 1 and not c._returned


def test_threads(cache):
    cache(6 * MIN)
    srcs = [RNG.integers(0, 256, n, dtype=np.uint8) for n in (MIN, MIN + 1, 2 * MIN, 3 * MIN)]
    errors = []

    def work(k):
        try:
            held = []
            for i in range(60):
                s = srcs[(i + k) % len(srcs)]
                r = _copy.copy_of(s)
                if r.tobytes() != s.tobytes():
                    errors.append("wrong bytes")
                held.append(r)
                if len(held) > 2:
                    del held[i % 3]
                if i % 7 == 0:
                    gc.collect()
        except BaseException as e:
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts) and not errors, errors
    st = release()
    c = _results._current()
    assert st["hits"] + st["misses"] == 4 * 60 and st["hits"] > 0
    assert st["free_bytes"] <= 6 * MIN and not c._returned
    assert st["free_bytes"] == sum(len(r[0]) for v in c.free.values() for r in v)
    assert c.sizes == sorted(c.free) and all(c.free.values())


def normalized(x):
    ref = x.astype(np.float64) / x.sum(dtype=np.float64)
    return ref


def close(y, ref):
    return y.dtype == np.float32 and y.shape == ref.shape and \
        np.max(np.abs(y - ref) / np.abs(ref)) <= 1e-6


def test_daemon_results_hit_the_cache(cache, client):
    assert client.shm and client.transport == "auto"
    x = (RNG.random(1 << 20) * 9 - 2).astype(np.float32)  # 4 MiB, mixed signs
    ref = normalized(x)
    y = client.normalize(x)
    assert close(y, ref) and not client.in_arena(y) and region_of(y) is not None
    st = _results.stats()
    addr = y.ctypes.data
    del y
    gc.collect()
    y = client.normalize(x)
    st2 = _results.stats()
    assert close(y, ref) and y.ctypes.data == addr
    assert st2["hits"] == st["hits"] + 1 and st2["misses"] == st["misses"]
    # the way a loop calls: the last result lives while the next is made
    for _ in range(4):
        y = client.normalize(x)
        assert close(y, ref)
    st3 = _results.stats()
    assert st3["hits"] >= st2["hits"] + 3 and st3["misses"] <= st2["misses"] + 1


def wait_child(pid, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            return st
        time.sleep(0.02)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the child hung")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork beside threads (3.12+)
def test_forked_child_has_its_own_cache(cache, gpuqd, client):
    x = (RNG.random(1 << 20) * 9 - 2).astype(np.float32)
    ref = normalized(x)
    kept = client.normalize(x)
    kept_bytes = kept.tobytes()
    spare = client.normalize(x)
    del spare
    st = release()
    assert st["free_regions"] == 1 and close(kept, ref)
    pid = os.fork()
    if pid == 0:  # the child: no pytest from here on, only an exit status
        code = 1
        try:
            s = _results.stats()
            code = 2 if (s["free_bytes"], s["hits"], s["misses"]) != (0, 0, 0) else 3
            if code == 3 and kept.tobytes() == kept_bytes:
                kept[:] = 0  # private: the parent's stays as it was
                del kept
                gc.collect()  # the parent's buffer: unmapped here, not recycled
                s = _results.stats()
                code = 4 if s["free_bytes"] != 0 else 5
            if code == 5:
                with gpuq.connect(gpuqd.path) as c:
                    for _ in range(3):
                        y = c.normalize(x)
                        code = 5 if close(y, ref) and region_of(y) is not None else 6
                s = _results.stats()
                if code == 5 and s["misses"] == 2 and s["hits"] == 1:
                    code = 0
        finally:
            os._exit(code)
    for _ in range(3):  # the parent calls on meanwhile
        y = client.normalize(x)
        assert close(y, ref)
    st = wait_child(pid)
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, os.WEXITSTATUS(st)
    assert kept.tobytes() == kept_bytes and not region_of(kept).closed
