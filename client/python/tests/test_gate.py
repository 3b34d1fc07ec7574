# SPDX-License-Identifier: Apache-2.0
"""Gated input (PROTOCOL.md 3.4): a staged request of GATE_MIN bytes or more
goes out with "gate": true before its input is copied, and a ``ready``
follows each copied piece.

The piece plan is checked alone (piece sizes, the bytes each ready
announces for every layout of staged and arena inputs, the copied bytes);
then against a CPU gpuqd: results byte-identical to the ungated path
(GPUQ_GATE=0) and close to numpy's float64 at piece boundaries and around
GATE_MIN, for one and two inputs (staged, in the arena, the same array
twice), blocking and asyncio; exact counts of gated requests and readies
(none for GPUQ_GATE=0, a small input, a hello without gate); the bytes the
readies announce; a refused ready raised from the call; a copy that fails
(the whole input announced, the request cancelled, the session goes on);
and a gated request refused busy, sent again ungated.
"""

import asyncio
import gc
import weakref

import numpy as np
import pytest

import gpuq
import gpuq.aio
from gpuq import _session
from gpuq._session import GATE_MIN, GATE_PIECE, Gate, Pending, Session, piece_bytes

RNG = np.random.default_rng(34)
P = GATE_PIECE
MiB = 1 << 20


@pytest.fixture(autouse=True)
def gate_env(monkeypatch):
    monkeypatch.setenv("GPUQ_GATE", "1")  # gating is opt-in


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def pieces_of(staged):
    return -(-staged // piece_bytes(staged))


# ---- the plan alone ----

def test_piece_bytes():
    assert piece_bytes(GATE_MIN) == P
    assert piece_bytes(16 * P) == P
    assert piece_bytes(16 * P + 1) == P + 64  # 1/16, rounded up to 64 bytes
    assert piece_bytes(100 * MiB) == 6553600
    for n in (GATE_MIN, 16 * P + 1, 1000 * MiB + 3, (1 << 34) + 17):
        k = piece_bytes(n)
        assert k % 64 == 0 and k >= P and 16 * k >= n and pieces_of(n) <= 16, n


def run_gate(layout):
    """layout: per input, (nbytes, "staged" | "arena" | "again": the staged
    array of the input before). Returns the bytes announced after each piece,
    and whether every staged block ended equal to its input."""
    jobs, ranges = [], []
    for nbytes, how in layout:
        if how == "staged":
            src = RNG.integers(0, 256, nbytes, dtype=np.uint8)
            jobs.append((np.zeros(nbytes, np.uint8), src))
            ranges.append((nbytes, len(jobs) - 1))
        elif how == "again":
            ranges.append((nbytes, len(jobs) - 1))
        else:
            ranges.append((nbytes, -1))
    g = Gate(Pending(1, "pairwise", _session.drop), _session.drop, jobs, ranges)
    said = []
    while not g.copied_all():
        said.append(g.step())
    return said, all(d.tobytes() == s.tobytes() for d, s in jobs)


@pytest.mark.parametrize("layout,want", [
    ([(10 * MiB, "staged")], [4 * MiB, 8 * MiB, 10 * MiB]),
    ([(8 * MiB, "staged")], [4 * MiB, 8 * MiB]),
    ([(8 * MiB + 4, "staged")], [4 * MiB, 8 * MiB, 8 * MiB + 4]),
    ([(8 * MiB - 4, "staged")], [4 * MiB, 8 * MiB - 4]),
    # A staged, B in the arena: B's bytes come with the last ready
    ([(10 * MiB, "staged"), (MiB, "arena")], [4 * MiB, 8 * MiB, 11 * MiB]),
    # A in the arena: ready from the start, announced with B's first piece
    ([(MiB, "arena"), (10 * MiB, "staged")], [5 * MiB, 9 * MiB, 11 * MiB]),
    # both staged: a piece that spans A's end and B's start
    ([(5 * MiB, "staged"), (6 * MiB, "staged")], [4 * MiB, 8 * MiB, 11 * MiB]),
    # the same array as A and B (pairwise(x, x)): staged once, B ready with A
    ([(6 * MiB, "staged"), (6 * MiB, "again")], [4 * MiB, 12 * MiB]),
])
def test_ready_bytes(layout, want):
    said, copied = run_gate(layout)
    assert said == want and copied


def test_at_most_sixteen_pieces():
    n = 100 * MiB + 8
    said, copied = run_gate([(n, "staged")])
    k = piece_bytes(n)
    assert said == [min(n, (i + 1) * k) for i in range(16)] and copied


# ---- against gpuqd ----

def sizes(item):
    """Element counts of 1-D inputs: k pieces less an element, k, k and an
    element; around GATE_MIN; and (float32) one of more than 16 pieces
    (1/16 each)."""
    out = [k * P // item + d for k in (1, 3) for d in (-1, 0, 1)]
    out += [GATE_MIN // item + d for d in (-1, 0, 1)]
    return out + ([(16 * P + 3 * MiB) // item + 1] if item == 4 else [])


def ready_log(monkeypatch):
    """The (request, bytes) of every ready sent: Session._ready as it is, logging."""
    log = []
    orig = Session._ready

    def logged(self, g, n):
        log.append((g.p.id, n))
        return orig(self, g, n)
    monkeypatch.setattr(Session, "_ready", logged)
    return log


def check_gated(c, log, before, staged, total):
    """One gated request since before (c._s.stats then): its readies as
    planned, the last one announcing all total input bytes."""
    st = c._s.stats
    if staged < GATE_MIN:
        assert st == before and not log
        return
    k = pieces_of(staged)
    assert st["gated"] == before["gated"] + 1 and st["ready"] == before["ready"] + k
    assert len(log) == k and len({r for r, _ in log}) == 1
    said = [n for _, n in log]
    assert said == sorted(set(said)) and said[-1] == total
    log.clear()


def l2_ref(x):
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.sum(x64 * x64))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_normalize_gated_equals_ungated(client, monkeypatch, dt):
    assert client.info.get("gate") is True, "gpuqd's hello has no gate: true"
    log = ready_log(monkeypatch)
    item = np.dtype(dt).itemsize
    tol = 1e-5 if dt == np.float32 else 1e-12
    for n in sizes(item):
        x = RNG.normal(size=n).astype(dt)  # either sign: a piece read early shows
        before = dict(client._s.stats)
        got = client.normalize(x, "l2")
        check_gated(client, log, before, x.nbytes, x.nbytes)
        np.testing.assert_allclose(got, l2_ref(x), rtol=tol, atol=tol * 1e-3)
        monkeypatch.setenv("GPUQ_GATE", "0")
        before = dict(client._s.stats)
        ref = client.normalize(x, "l2")
        assert client._s.stats == before and not log
        monkeypatch.setenv("GPUQ_GATE", "1")
        assert not client.in_arena(got) and same(got, ref), n
    assert not client._s.pending


def pairwise_ref(x, y):
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    d2 = ((x64[:, None, :] - y64[None, :, :]) ** 2).sum(-1)
    return np.sqrt(d2)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_pairwise_gated_equals_ungated(client, monkeypatch, dt):
    """One big input (A or B), staged or in the arena beside a staged one,
    and the same array as both."""
    log = ready_log(monkeypatch)
    item = np.dtype(dt).itemsize
    d = 16
    tol = 1e-5 if dt == np.float32 else 1e-12
    for rows in (2 * P // (d * item) - 1, 4 * P // (d * item) + 1):
        big = RNG.normal(size=(rows, d)).astype(dt)
        small = RNG.normal(size=(3, d)).astype(dt)
        small_a = client.asarray(small)
        cases = [  # (x, y, staged bytes)
            (big, small, big.nbytes + small.nbytes),
            (small, big, big.nbytes + small.nbytes),
            (big, small_a, big.nbytes),  # A staged, B in the arena
            (small_a, big, big.nbytes),  # A in the arena, B staged
        ]
        for x, y, staged in cases:
            before = dict(client._s.stats)
            got = client.pairwise(x, y)
            check_gated(client, log, before, staged, x.nbytes + y.nbytes)
            np.testing.assert_allclose(got, pairwise_ref(np.asarray(x), np.asarray(y)),
                                       rtol=tol, atol=tol)
            monkeypatch.setenv("GPUQ_GATE", "0")
            ref = client.pairwise(x, y)
            monkeypatch.setenv("GPUQ_GATE", "1")
            assert same(np.asarray(got), np.asarray(ref)), (rows, x.shape, y.shape)
    # the same array as A and B: staged once, both announced
    x = RNG.normal(size=(64, P // (64 * item) + 1)).astype(dt)
    before = dict(client._s.stats)
    got = client.pairwise(x, x)
    check_gated(client, log, before, x.nbytes, 2 * x.nbytes)
    monkeypatch.setenv("GPUQ_GATE", "0")
    assert same(got, client.pairwise(x, x))


def test_haversine_one_big_input(client, sock_client, monkeypatch):
    log = ready_log(monkeypatch)
    n = 3 * P // 16 + 1
    a = np.stack([RNG.uniform(-90, 90, n), RNG.uniform(-180, 180, n)], 1)
    before = dict(client._s.stats)
    got = client.haversine(a, to=(12.5, -70.25))
    check_gated(client, log, before, a.nbytes, a.nbytes)
    assert same(got, sock_client.haversine(a, to=(12.5, -70.25)))


def test_counts(client, monkeypatch):
    x16 = RNG.normal(size=(16 * MiB) // 4).astype(np.float32)
    x1 = RNG.normal(size=MiB // 4).astype(np.float32)  # staged (1 MiB in, 1 out), not gated
    st = client._s.stats
    g0, r0 = st["gated"], st["ready"]
    client.normalize(x16)
    assert (st["gated"], st["ready"]) == (g0 + 1, r0 + 4)
    y = client.normalize(x1)
    assert (st["gated"], st["ready"]) == (g0 + 1, r0 + 4) and not client.in_arena(y)
    monkeypatch.setenv("GPUQ_GATE", "0")
    client.normalize(x16)
    assert (st["gated"], st["ready"]) == (g0 + 1, r0 + 4)
    monkeypatch.setenv("GPUQ_GATE", "1")
    f = [client.submit("normalize", x16) for _ in range(3)]  # pipelined, each gated
    ref = client.normalize(x16)
    assert all(same(a.result(), ref) for a in f)
    assert (st["gated"], st["ready"]) == (g0 + 5, r0 + 20)
    assert not client._s.pending


def test_nothing_left_behind(client):
    """A gated call leaves no cycle: its result, request and gate go with
    the last reference, without the cyclic collector (a result kept would
    also miss the result cache, and a block kept the arena)."""
    x = RNG.normal(size=(8 * MiB) // 4).astype(np.float32)
    client.normalize(x)
    gc.collect()
    gc.disable()
    try:
        before = client._s.stats["ready"]
        y = client.normalize(x)
        assert client._s.stats["ready"] == before + 2
        w = weakref.ref(y)
        del y
        assert w() is None
        assert not [o for o in gc.get_objects() if isinstance(o, (Gate, Pending))]
    finally:
        gc.enable()


@pytest.mark.parametrize("hello", [None, False, 1, "true"])
def test_no_gate_in_hello(client, monkeypatch, hello):
    if hello is None:
        monkeypatch.delitem(client._s.info, "gate", raising=False)
    else:
        monkeypatch.setitem(client._s.info, "gate", hello)
    x = RNG.normal(size=(16 * MiB) // 8)
    before = dict(client._s.stats)
    got = client.normalize(x, "l2")
    assert client._s.stats == before
    np.testing.assert_allclose(got, l2_ref(x), rtol=1e-12)


def test_refused_ready_is_raised(client, monkeypatch):
    """A ready gpuqd refuses (over the input: a client bug) is raised from
    the call, after the request's own reply; the session goes on."""
    orig = Session._ready
    bad = []

    def first_over(self, g, n):
        if not bad:  # a ready over the input first, then the right one
            b1, q1 = orig(self, g, g.total + 64)
            bad.append(q1.id)
            b2, q2 = orig(self, g, n)
            return b1 + b2, q2
        return orig(self, g, n)
    monkeypatch.setattr(Session, "_ready", first_over)
    x = RNG.normal(size=(8 * MiB) // 4).astype(np.float32)
    with pytest.raises(gpuq.BadArgumentError, match="over") as e:
        client.normalize(x)
    assert e.value.request_id == bad[0]
    monkeypatch.setattr(Session, "_ready", orig)
    np.testing.assert_allclose(client.normalize(x, "l2"), l2_ref(x), rtol=1e-5, atol=1e-9)
    assert not client._s.pending and client._s.broken is None


def failing_second_step(monkeypatch, exc):
    orig = Gate.step
    calls = []

    def failing(self):
        calls.append(1)
        if len(calls) == 2:
            raise exc("copy failed (test)")
        return orig(self)
    monkeypatch.setattr(Gate, "step", failing)
    return orig


@pytest.mark.parametrize("exc", [MemoryError, KeyboardInterrupt])
def test_copy_fails_midway(client, monkeypatch, exc):
    """A copy that raises (or a Ctrl-C in it): the whole input is announced
    and the request cancelled (gpuqd is not left waiting until
    frame_timeout); the error propagates and the session goes on."""
    log = ready_log(monkeypatch)
    orig = failing_second_step(monkeypatch, exc)
    x = RNG.normal(size=(16 * MiB) // 4).astype(np.float32)
    with pytest.raises(exc):
        client.normalize(x)
    assert [n for _, n in log] == [P, x.nbytes] and not client.closed
    monkeypatch.setattr(Gate, "step", orig)
    np.testing.assert_allclose(client.normalize(x, "l2"), l2_ref(x), rtol=1e-5, atol=1e-9)
    assert client.ping() >= 0 and not client._s.pending and client._s.broken is None
    assert client.status()["cancelled"] >= 1


def test_aio_copy_fails_midway(gpuqd, monkeypatch):
    log = ready_log(monkeypatch)

    async def main():
        async with gpuq.aio.connect(gpuqd.path) as c:
            orig = failing_second_step(monkeypatch, MemoryError)
            x = RNG.normal(size=(16 * MiB) // 4).astype(np.float32)
            with pytest.raises(MemoryError):
                await c.normalize(x)
            assert [n for _, n in log] == [P, x.nbytes]
            monkeypatch.setattr(Gate, "step", orig)
            np.testing.assert_allclose(await c.normalize(x, "l2"), l2_ref(x), rtol=1e-5,
                                       atol=1e-9)
            assert await c.ping() >= 0 and not c._s.pending and c._s.broken is None
    asyncio.run(asyncio.wait_for(main(), 60))


def test_busy_is_sent_again_ungated(make_daemon, monkeypatch):
    """A gated request refused busy (the client believes in more room than
    gpuqd gives) goes again, ungated, its input copied whole by then."""
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "300")
    d = make_daemon("--max-inflight", "1")
    with gpuq.connect(d.path) as c:
        c._s.max_inflight = 2  # the readies take no room under it
        xs = [RNG.normal(size=(4 * MiB) // 4 + k).astype(np.float32) for k in range(2)]
        f = [c.submit("normalize", x, "l2") for x in xs]
        for fut, x in zip(f, xs):
            np.testing.assert_allclose(fut.result(), l2_ref(x), rtol=1e-5, atol=1e-9)
        assert c.status()["errors"].get("busy", 0) >= 1
        assert c._s.stats["gated"] == 2 and not c._s.pending and not c._s.retry


# ---- asyncio ----

def test_aio_gated(gpuqd, monkeypatch):
    log = ready_log(monkeypatch)

    async def main():
        async with gpuq.aio.connect(gpuqd.path) as c:
            assert c.info.get("gate") is True
            st = c._s.stats
            for n in (P // 4 - 1, 4 * P // 4 + 1, GATE_MIN // 4 - 1):
                x = RNG.normal(size=n).astype(np.float32)
                before = dict(st)
                got = await c.normalize(x, "l2")
                check_gated(c, log, before, x.nbytes, x.nbytes)
                np.testing.assert_allclose(got, l2_ref(x), rtol=1e-5, atol=1e-9)
                monkeypatch.setenv("GPUQ_GATE", "0")
                before = dict(st)
                ref = await c.normalize(x, "l2")
                assert st == before and not log
                monkeypatch.setenv("GPUQ_GATE", "1")
                assert same(got, ref), n
            # concurrent gated calls, pipelined
            xs = [RNG.normal(size=(8 * MiB) // 8 + k) for k in range(4)]
            before = dict(st)
            outs = await asyncio.gather(*(c.normalize(x, "l2") for x in xs))
            for x, y in zip(xs, outs):
                np.testing.assert_allclose(y, l2_ref(x), rtol=1e-12)
            assert st["gated"] == before["gated"] + 4
            assert st["ready"] == before["ready"] + sum(pieces_of(x.nbytes) for x in xs)
            # a hello without gate: never gated
            monkeypatch.delitem(c._s.info, "gate")
            before = dict(st)
            await c.normalize(xs[0])
            assert st == before and not c._s.pending
    asyncio.run(asyncio.wait_for(main(), 120))
