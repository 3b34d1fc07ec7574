"""Cancellation from asyncio: a cancelled task, or a cancelled future of
submit(), sends gpuqd a ``cancel`` for the request, and the replies that
follow (the request's, the cancel's) are read and dropped so that the
connection stays in step. Exact frames are checked against a scripted
server on a socketpair, behaviour against a CPU gpuqd made slow
(GPUQ_TEST_SLOW_MS)."""

import asyncio

import numpy as np
import pytest

import gpuq
import gpuq.aio
from test_deadline import aio_pair, read_request
from test_lone import X, Y, frame, ok


def cancelled(rid):
    return frame({"id": rid, "status": "error", "code": -27, "error": "cancelled",
                  "message": "cancelled"})


def cancel_reply(rid, dropped=1, running=0):
    return frame({"id": rid, "status": "ok", "info": {"dropped": dropped, "running": running}})


@pytest.fixture
# ---- asyncio, scripted ----

def test_aio_task_cancel_sends_cancel_and_drops_its_replies():
    async def main():
        loop = asyncio.get_running_loop()
        c, b = await aio_pair()
        buf = bytearray()
        out = np.full(3, -1.0, np.float32)
        t = asyncio.ensure_future(c.normalize(X, out=out))
        h = await read_request(loop, b, buf)
        assert (h["id"], h["op"]) == (1, "normalize")
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        h = await read_request(loop, b, buf)
        assert h == {"id": 2, "op": "cancel", "request": 1}
        # the request had finished first: its result comes, and is dropped
        await loop.sock_sendall(b, ok(1) + cancel_reply(2, 0))
        t = asyncio.ensure_future(c.normalize(X))
        h = await read_request(loop, b, buf)
        assert h["id"] == 3
        await loop.sock_sendall(b, ok(3))
        assert np.array_equal(await t, Y)
        assert np.all(out == -1.0)  # the dropped reply wrote nothing into out=
        # dropped in gpuqd this time: answered cancelled
        t = asyncio.ensure_future(c.normalize(X))
        h = await read_request(loop, b, buf)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        assert await read_request(loop, b, buf) == {"id": 5, "op": "cancel", "request": 4}
        await loop.sock_sendall(b, cancelled(4) + cancel_reply(5))
        t = asyncio.ensure_future(c.ping())
        assert (await read_request(loop, b, buf))["id"] == 6
        await loop.sock_sendall(b, frame({"id": 6, "status": "ok"}))
        await t
        assert not c._s.pending and c._s.broken is None
        await c.close()
        b.close()
    asyncio.run(asyncio.wait_for(main(), 60))


def test_aio_wait_for_and_submit_future_cancel():
    async def main():
        loop = asyncio.get_running_loop()
        c, b = await aio_pair()
        buf = bytearray()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(c.normalize(X), 0.05)
        assert (await read_request(loop, b, buf))["id"] == 1
        assert await read_request(loop, b, buf) == {"id": 2, "op": "cancel", "request": 1}
        fut = await c.submit("normalize", X)
        assert (await read_request(loop, b, buf))["id"] == 3
        fut.cancel()
        assert await read_request(loop, b, buf) == {"id": 4, "op": "cancel", "request": 3}
        await loop.sock_sendall(b, cancelled(1) + cancel_reply(2) + cancelled(3) +
                                cancel_reply(4))
        t = asyncio.ensure_future(c.normalize(X))
        assert (await read_request(loop, b, buf))["id"] == 5
        await loop.sock_sendall(b, ok(5))
        assert np.array_equal(await t, Y)
        # a submit future that is answered is not cancelled by anything
        fut = await c.submit("normalize", X)
        assert (await read_request(loop, b, buf))["id"] == 6
        await loop.sock_sendall(b, ok(6))
        assert np.array_equal(await fut, Y)
        await asyncio.sleep(0.05)
        with pytest.raises(BlockingIOError):
            b.recv(1)
        await c.close()
        b.close()
    asyncio.run(asyncio.wait_for(main(), 60))


def test_aio_cancel_before_sending_sends_nothing():
    async def main():
        loop = asyncio.get_running_loop()
        c, b = await aio_pair()
        c._s.max_inflight = 1
        buf = bytearray()
        t1 = asyncio.ensure_future(c.normalize(X))
        t2 = asyncio.ensure_future(c.normalize(X))  # waits for t1's slot: not sent
        assert (await read_request(loop, b, buf))["id"] == 1
        t2.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t2
        await loop.sock_sendall(b, ok(1))
        assert np.array_equal(await t1, Y)
        await asyncio.sleep(0.05)
        with pytest.raises(BlockingIOError):
            b.recv(1)  # no cancel: t2 never went out
        await c.close()
        b.close()
    asyncio.run(asyncio.wait_for(main(), 60))


# ---- against gpuqd ----

@pytest.fixture
def slow_daemon(make_daemon, monkeypatch):
    """A CPU gpuqd whose every job takes 500 ms."""
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "500")
    return make_daemon()


def test_aio_cancel_against_gpuqd(slow_daemon):
    async def main():
        async with gpuq.aio.connect(slow_daemon.path, transport="socket") as c, \
                gpuq.aio.connect(slow_daemon.path) as watch:  # c's replies come in order
            t = asyncio.ensure_future(c.normalize([1.0, 3.0]))
            while (await watch.status())["in_flight"] < 1:  # sent and read by gpuqd
                await asyncio.sleep(0.005)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            # queued behind it: cancelled through the future submit() gave
            futs = [await c.submit("normalize", [1.0, 1.0]) for _ in range(3)]
            futs[1].cancel()
            futs[2].cancel()
            assert (await futs[0]).tolist() == [0.5, 0.5]
            assert (await c.normalize([1.0, 3.0])).tolist() == [0.25, 0.75]
            st = await c.status()
            assert st["cancelled"] >= 3, st
            assert not c._s.pending and c._s.broken is None
    asyncio.run(asyncio.wait_for(main(), 120))


