# SPDX-License-Identifier: Apache-2.0
"""An op's progress= callback: sending, queued, running, receiving, in
order, with the bytes still to go; through the socket and through arenas;
sync, Future and asyncio. A gpuqd made slow (GPUQ_TEST_SLOW_MS) runs each
request for SLOW_MS, so "running" must come that long before "receiving"
(the started notice, PROTOCOL.md 4.1, not the reply)."""

import asyncio

import numpy as np
import pytest

import gpuq
import gpuq.aio

SLOW_MS = 150
N = 4 << 20  # f64 elements: 32 MiB each way, more than a socket buffer takes at once


@pytest.fixture
def slow(make_daemon, monkeypatch):
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", str(SLOW_MS))
    return make_daemon()


def l2(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


class Log:
    """The reports one call got."""

    def __init__(self):
        self.got = []

    def __call__(self, p):
        assert isinstance(p, gpuq.Progress)
        self.got.append(p)

    def phases(self):
        out = []
        for p in self.got:
            if not out or out[-1] != p.phase:
                out.append(p.phase)
        return out

    def of(self, phase):
        return [p for p in self.got if p.phase == phase]


def check_socket_log(log, nbytes, first=True):
    """A request of nbytes of input over the socket and as many back; first:
    none before it on the connection (a later one's notice waits for the
    replies before it, PROTOCOL.md 4.1, so it may come after its run)."""
    assert log.phases() == ["sending", "queued", "running", "receiving"], log.got
    times = [p.elapsed_s for p in log.got]
    assert times == sorted(times) and times[0] >= 0
    send = [p.bytes_left for p in log.of("sending")]
    assert send[0] > nbytes and send[0] - nbytes < 4096, send[:3]  # the frame: head + payload
    assert send == sorted(send, reverse=True) and len(send) > 1, send[:5]
    assert all(0 < b for b in send)
    assert [p.bytes_left for p in log.of("queued")] == [None]
    assert [p.bytes_left for p in log.of("running")] == [None]
    recv = [p.bytes_left for p in log.of("receiving")]
    assert recv[0] == nbytes and recv == sorted(recv, reverse=True) and all(recv), recv[:5]
    # running at the start of the run: the slow run lies between it and the reply
    run_t = log.of("running")[0].elapsed_s
    if first:
        assert log.of("receiving")[0].elapsed_s - run_t >= SLOW_MS / 1000 * 0.9, log.got


def test_socket_phases_and_bytes(slow):
    x = np.random.default_rng(1).random(N) + 0.5
    with gpuq.connect(slow.path, transport="socket") as c:
        log = Log()
        y = c.normalize(x, "l2", progress=log)
        np.testing.assert_allclose(y, l2(x), rtol=1e-12)
        check_socket_log(log, x.nbytes)
        # the connection serves on; a call without progress reports nothing
        assert c.normalize([1.0, 3.0]).tolist() == [0.25, 0.75]
        assert len(log.got) == len(log.of("sending")) + 1 + 1 + len(log.of("receiving"))


def test_arena_has_no_receiving(slow):
    x = np.random.default_rng(2).random((64, 4096)) + 0.5
    with gpuq.connect(slow.path, transport="shm") as c:
        log = Log()
        d = c.pairwise(x[:8], x, "euclidean", progress=log)
        ref = np.sqrt(((x[:8, None, :] - x[None, :, :]) ** 2).sum(-1))
        np.testing.assert_allclose(d, ref, rtol=1e-10)
        # inputs and outputs by arena: the frame is its header alone, and
        # nothing comes back in a payload
        assert log.phases() == ["sending", "queued", "running"], log.got
        assert log.of("sending")[0].bytes_left < 4096


def test_error_reply_after_running(slow):
    with gpuq.connect(slow.path) as c:
        log = Log()
        with pytest.raises(gpuq.ZeroNormError):
            c.normalize(np.zeros((2, 3)), progress=log)
        assert log.phases() == ["sending", "queued", "running"], log.got
        assert c.ping() > 0


def test_refused_request_never_runs(gpuqd):
    with gpuq.connect(gpuqd.path) as c:
        log = Log()
        with pytest.raises(gpuq.BadShapeError):  # the client's own check: nothing sent
            c.pairwise([[1.0, 2.0]], [[1.0, 2.0, 3.0]], progress=log)
        assert log.got == []
        with pytest.raises(gpuq.Error) as e:  # gpuqd's: refused before it runs, no notice
            c.pairwise(c.resident("no-such-array"), [[1.0, 2.0]], progress=log)
        assert "no-such-array" in str(e.value)
        assert log.phases() == ["sending", "queued"], log.got
        assert c.ping() > 0


def test_callback_that_raises_fails_the_call(gpuqd):
    class Boom(Exception):
        pass

    calls = []

    def bad(p):
        calls.append(p.phase)
        if p.phase == "queued":
            raise Boom("from the callback")

    with gpuq.connect(gpuqd.path) as c:
        with pytest.raises(Boom):
            c.normalize(np.arange(1.0, 1000.0), progress=bad)
        assert calls == ["sending", "queued"]  # none after it raised
        assert c.normalize([1.0, 1.0]).tolist() == [0.5, 0.5]  # the stream is in step


def test_not_callable(gpuqd):
    with gpuq.connect(gpuqd.path) as c:
        with pytest.raises(gpuq.BadArgumentError, match="progress must be callable"):
            c.normalize([1.0, 2.0], progress="yes")
        assert c.ping() > 0


def test_future_and_pipelined(slow):
    rng = np.random.default_rng(3)
    xs = [rng.random(N // 4) + 0.5 for _ in range(3)]
    with gpuq.connect(slow.path, transport="socket") as c:
        logs = [Log() for _ in xs]
        futs = [c.submit("normalize", x, "l2", progress=lg) for x, lg in zip(xs, logs)]
        for f, x, lg in zip(futs, xs, logs):
            np.testing.assert_allclose(f.result(60), l2(x), rtol=1e-12)
            assert lg.phases() == ["sending", "queued", "running", "receiving"], lg.got
            assert lg.of("receiving")[0].bytes_left == x.nbytes


def test_asyncio(slow):
    rng = np.random.default_rng(4)
    xs = [rng.random(N) + 0.5, rng.random(N // 2) + 0.5]

    async def main():
        async with gpuq.aio.connect(slow.path, transport="socket") as c:
            logs = [Log() for _ in xs]
            ys = await asyncio.gather(*(c.normalize(x, "l2", progress=lg)
                                        for x, lg in zip(xs, logs)))
            for k, (x, y, lg) in enumerate(zip(xs, ys, logs)):
                np.testing.assert_allclose(y, l2(x), rtol=1e-12)
                check_socket_log(lg, x.nbytes, first=k == 0)
            fut = await c.submit("normalize", [1.0, 3.0], progress=logs[0])
            assert (await fut).tolist() == [0.25, 0.75]
            with pytest.raises(gpuq.BadArgumentError):
                await c.normalize([1.0], progress=3)

    asyncio.run(asyncio.wait_for(main(), 120))
