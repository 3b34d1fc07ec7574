# SPDX-License-Identifier: Apache-2.0
"""The short path of a blocking call on arena arrays (_arena_express.py,
Client._express_arena): it is taken when every input lives in the
session's arenas and the one output is new; its request is the full path's
(the same keys and references); its value is the same array in a block of
its own; everything else (a plain input, out=, no room for the output, the
socket transport) goes the full way; an error reply is raised as the full
path raises it; and an interrupt while it waits leaves the request queued
with its output block alive (gpuqd may still write it)."""

import numpy as np
import pytest

import gpuq
from gpuq import _arena_express, _session

from test_cancel import interrupt_after

RNG = np.random.default_rng(2812)


@pytest.fixture
def spy(monkeypatch):
    """spy(client): per call of _arena_express.request on client's session,
    whether it made a request ("made"); per reply(), whether the short path
    answered ("answered")."""
    seen = []
    request, reply = _arena_express.request, _arena_express.reply

    def spy_request(s, call):
        r = request(s, call)
        seen.append((s, "made", r is not None))
        return r

    def spy_reply(s, call, h, n, arr):
        v = reply(s, call, h, n, arr)
        seen.append((s, "answered", v is not _session.MISS))
        return v
    monkeypatch.setattr(_arena_express, "request", spy_request)
    monkeypatch.setattr(_arena_express, "reply", spy_reply)
    return lambda c: {k: [v for s, kk, v in seen if s is c._s and kk == k]
                      for k in ("made", "answered")}


def test_taken_and_equal_to_the_full_path(client, sock_client, spy):
    x = RNG.random(1000).astype(np.float32)
    xa = client.asarray(x)
    for method in ("sum", "l2", "zscore"):
        ref = sock_client.normalize(x, method)
        y = client.normalize(xa, method)
        assert y.dtype == ref.dtype and y.tobytes() == ref.tobytes()
        assert client.in_arena(y)
    a, b = client.asarray(RNG.random((40, 8))), client.asarray(RNG.random((30, 8)))
    d = client.pairwise(a, b, "cityblock")
    assert d.tobytes() == sock_client.pairwise(np.array(a), np.array(b), "cityblock").tobytes()
    assert spy(client)["made"] == [True] * 4 and spy(client)["answered"] == [True] * 4
    assert not client._s.pending


def test_request_is_the_full_paths(client):
    s = client._s
    xa = client.asarray(RNG.random((6, 5)))
    call = gpuq._ops.normalize(xa, "l2", False, "error", None, None, False, None, False, None)
    bufs, h, arr = _arena_express.request(s, call)
    plan = s.plan(call)
    assert plan.use and not plan.stage
    fbufs, p = s.compute(call, plan, lambda v, e: None)
    s.unqueue(p)
    full = dict(p.req)
    assert sorted(h) == sorted(full)
    for k in h:
        if k not in ("id", "out"):
            assert h[k] == full[k], k
    assert h["id"] + 1 == full["id"]
    assert [len(o) for o in h["out"]] == [3] and h["out"][0][2] == full["out"][0][2] == arr.nbytes
    assert len(bufs) == len(fbufs) == 1  # a header only: no payload either way
    assert arr.shape == p.results[0].shape and arr.dtype == p.results[0].dtype
    assert client.in_arena(arr)


def test_not_taken(client, sock_client, spy):
    x = RNG.random(256)
    xa = client.asarray(x)
    ref = sock_client.normalize(x)
    # a plain input; out= (in an arena or not); one input plain of two
    assert client.normalize(x).tobytes() == ref.tobytes()
    o = client.empty(256)
    assert client.normalize(xa, out=o) is o and o.tobytes() == ref.tobytes()
    po = np.empty(256)
    assert client.normalize(xa, out=po) is po and po.tobytes() == ref.tobytes()
    a = RNG.random((9, 4))
    d = client.pairwise(client.asarray(a), a)
    assert d.tobytes() == sock_client.pairwise(a, a).tobytes()
    assert spy(client)["made"] == [False] * 4
    assert not client._s.pending


def test_socket_transport_never_takes_it(gpuqd, spy):
    with gpuq.connect(gpuqd.path) as arenas, gpuq.connect(gpuqd.path, transport="socket") as c:
        xa = arenas.asarray(RNG.random(64))  # another session's arena: by socket here
        assert c.normalize(xa).tobytes() == arenas.normalize(xa).tobytes()
        assert spy(c)["made"] == [False] and spy(arenas)["made"] == [True]


def test_error_reply_and_the_session_serves_on(client, spy):
    z = client.asarray(np.zeros(32))
    with pytest.raises(gpuq.ZeroNormError):
        client.normalize(z, "sum")
    assert spy(client)["made"] == [True] and spy(client)["answered"] == [False]
    assert not client._s.pending
    y = client.normalize(z, "sum", on_zero="zero")
    assert not y.any() and client.in_arena(y)


def test_no_room_falls_back(client, sock_client, spy, monkeypatch):
    x = RNG.random(128)
    xa = client.asarray(x)  # before alloc is patched
    pool = client._s.pool
    alloc = type(pool).alloc
    calls = []

    def alloc_once_refused(self, n):
        calls.append(n)
        return None if len(calls) == 1 else alloc(self, n)
    monkeypatch.setattr(type(pool), "alloc", alloc_once_refused)
    y = client.normalize(xa)  # the full path's block for the output
    assert y.tobytes() == sock_client.normalize(x).tobytes()
    assert spy(client)["made"] == [False] and len(calls) >= 2 and client.in_arena(y)
    assert not client._s.pending


def test_interrupt_keeps_the_output_block(make_daemon, monkeypatch):
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "1500")
    d = make_daemon()
    with gpuq.connect(d.path) as c, gpuq.connect(d.path) as watch:
        xa = c.asarray(np.array([1.0, 3.0]))
        t = interrupt_after(lambda: watch.status()["in_flight"] >= 1)
        with pytest.raises(KeyboardInterrupt):
            c.normalize(xa)  # the short path, waiting for its reply
        t.join()
        assert not c.closed
        q = [p for p in c._s.pending if p.op == "normalize"]
        assert len(q) == 1 and q[0].keep is not None
        kept = [a for a in q[0].keep[1:] if isinstance(a, np.ndarray)]
        assert len(kept) == 1 and c.in_arena(kept[0]) and kept[0].shape == (2,)
        off = c._s.pool.lookup(kept[0])
        del kept
        # the next call does not get that block while gpuqd may still write it
        y = c.normalize(xa)
        assert y.tolist() == [0.25, 0.75] and c._s.pool.lookup(y) != off
        assert not c._s.pending
