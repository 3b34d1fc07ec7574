# SPDX-License-Identifier: Apache-2.0
"""Cancellation: a cancelled asyncio task, a cancelled future and a
KeyboardInterrupt in a blocking call send gpuqd a ``cancel`` for the request,
and the replies that follow (the request's, the cancel's) are read and
dropped so that the connection stays in step; an interrupt that cuts a frame
short closes the client instead. Exact frames are checked against a scripted
server on a socketpair, behaviour against a CPU gpuqd made slow
(GPUQ_TEST_SLOW_MS)."""

import asyncio
import os
import signal
import socket
import threading
import time

import msgpack
import numpy as np
import pytest

import gpuq
import gpuq.aio
from gpuq import client as gc

from test_deadline import ARGS, aio_pair, read_request
from test_lone import PREFIX, X, Y, frame, ok, requests


def cancelled(rid):
    return frame({"id": rid, "status": "error", "code": -27, "error": "cancelled",
                  "message": "cancelled"})


def cancel_reply(rid, dropped=1, running=0):
    return frame({"id": rid, "status": "ok", "info": {"dropped": dropped, "running": running}})


def recv_request(b, timeout=20):
    """The next request header (and its payload length) the scripted server gets."""
    b.settimeout(timeout)

    def get(n):
        data = b""
        while len(data) < n:
            more = b.recv(n - len(data))
            assert more, "the client closed the connection"
            data += more
        return data
    _, _, _, _, hl, pl = PREFIX.unpack(get(20))
    rest = get(hl + pl)
    b.settimeout(None)
    return msgpack.unpackb(rest[:hl])


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(20)  # a reply that never comes fails the test instead of hanging it
    c = gc.Client(a, "socketpair")
    c._apply_hello(ARGS)
    yield c, b
    c.close()
    b.close()


def interrupt_after(cond, delay=0.2):
    """SIGINT to the main thread once cond() is true, then delay seconds (time
    for it to block); the thread, to join."""
    main = threading.main_thread().ident

    def run():
        end = time.monotonic() + 20
        while not cond() and time.monotonic() < end:
            time.sleep(0.005)
        time.sleep(delay)
        signal.pthread_kill(main, signal.SIGINT)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def serve_then_interrupt(b, seen, before=b""):
    """Read one request into seen, send before, then interrupt the main thread."""
    def cond():
        if not seen:
            seen.append(recv_request(b))
            if before:
                b.sendall(before)
        return True
    return interrupt_after(cond)


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


# ---- the blocking client, scripted ----

def test_cancel_request_takes_no_inflight_room(pair):
    """gpuqd counts compute requests alone in flight (PROTOCOL.md 2): a
    cancel waiting for its reply leaves room for another compute request,
    as a ready does."""
    c, b = pair
    c._s.max_inflight = 2
    f = c.submit("normalize", X)
    assert recv_request(b)["id"] == 1
    assert not c._s.full()
    assert f.cancel()
    assert recv_request(b) == {"id": 2, "op": "cancel", "request": 1}
    assert len(c._s.pending) == 2 and not c._s.full()  # the request and its cancel
    g = c.submit("normalize", X)  # sent at once: no reply read first
    assert recv_request(b)["id"] == 3
    assert c._s.full()  # two compute requests await replies
    b.sendall(ok(1) + cancel_reply(2, 0) + ok(3))
    assert np.array_equal(g.result(), Y)
    assert not c._s.pending


def test_future_cancel(pair):
    c, b = pair
    out = np.full(3, -1.0, np.float32)
    calls = []
    f = c.submit("normalize", X, out=out)
    f.add_done_callback(calls.append)
    assert recv_request(b)["id"] == 1
    assert not f.cancelled() and f.cancel() and f.cancelled() and f.done()
    assert calls == [f]
    with pytest.raises(gpuq.CancelledError):
        f.result()
    assert isinstance(f.exception(), gpuq.CancelledError)
    assert not f.cancel()  # done already
    assert recv_request(b) == {"id": 2, "op": "cancel", "request": 1}
    b.sendall(ok(1) + cancel_reply(2, 0))  # it had finished: dropped, out= untouched
    b.sendall(ok(3))
    assert np.array_equal(c.normalize(X), Y)
    assert np.all(out == -1.0)
    assert [h["id"] for h in requests(b)] == [3]
    f = c.submit("normalize", X)
    b.sendall(ok(4))
    assert np.array_equal(f.result(), Y)
    assert not f.cancel() and not f.cancelled()
    assert [h["id"] for h in requests(b)] == [4]


def test_interrupt_in_a_blocking_call_cancels(pair):
    c, b = pair
    seen = []
    t = serve_then_interrupt(b, seen)
    with pytest.raises(KeyboardInterrupt):
        c.normalize(X)  # the short path, blocked in its receive
    t.join()
    assert seen[0]["id"] == 1
    assert recv_request(b) == {"id": 2, "op": "cancel", "request": 1}
    assert not c.closed
    b.sendall(cancelled(1) + cancel_reply(2))
    b.sendall(ok(3))
    assert np.array_equal(c.normalize(X), Y)  # both replies read and dropped first
    assert [h["id"] for h in requests(b)] == [3]
    # not alone in flight: the general path; only this call's request is cancelled
    f = c.submit("normalize", X)
    seen = []
    t = serve_then_interrupt(b, seen)
    with pytest.raises(KeyboardInterrupt):
        c.normalize(X)
    t.join()
    assert seen[0]["id"] == 4
    assert recv_request(b)["id"] == 5
    assert recv_request(b) == {"id": 6, "op": "cancel", "request": 5}
    b.sendall(ok(4) + cancelled(5) + cancel_reply(6))
    assert np.array_equal(f.result(), Y)
    b.sendall(ok(7))
    assert np.array_equal(c.normalize(X), Y)
    assert not c._s.pending


def test_interrupt_before_a_queued_frame_went_out(pair, monkeypatch):
    """An interrupt between queueing a request and sending its first byte
    (a window of a few bytecodes, forced here): the entry is taken back."""
    c, b = pair
    send = gc.Client._send

    def interrupted_send(self, bufs, rid):
        monkeypatch.setattr(gc.Client, "_send", send)
        raise KeyboardInterrupt
    monkeypatch.setattr(gc.Client, "_send", interrupted_send)
    with pytest.raises(KeyboardInterrupt):
        c.submit("normalize", X)
    assert not c.closed and not c._s.pending and requests(b) == []
    b.sendall(ok(2))
    assert np.array_equal(c.normalize(X), Y)


def test_interrupt_in_future_result_keeps_the_request(pair):
    c, b = pair
    f = c.submit("normalize", X)
    seen = []
    t = serve_then_interrupt(b, seen)
    with pytest.raises(KeyboardInterrupt):
        f.result()
    t.join()
    assert requests(b) == []  # no cancel: the future is the caller's
    b.sendall(ok(1))
    assert np.array_equal(f.result(), Y)


def test_interrupt_mid_send_closes(pair):
    c, b = pair
    big = np.ones(4 << 20)  # 32 MiB: the socket takes a part, then the client waits
    t = interrupt_after(lambda: True, delay=0.3)
    with pytest.raises(KeyboardInterrupt):
        c.normalize(big)
    t.join()
    assert c.closed
    with pytest.raises(gpuq.ClosedError, match="interrupt"):
        c.normalize(X)
    with pytest.raises(gpuq.ClosedError, match="interrupt"):
        c.ping()


def test_interrupt_mid_reply_closes(pair):
    c, b = pair
    seen = []
    t = serve_then_interrupt(b, seen, before=ok(1)[:30])  # half a reply, then nothing
    with pytest.raises(KeyboardInterrupt):
        c.normalize(X)
    t.join()
    assert c.closed
    with pytest.raises(gpuq.ClosedError, match="interrupt"):
        c.normalize(X)


def test_interrupt_mid_reply_in_future_result_closes(pair):
    c, b = pair
    f = c.submit("normalize", X)
    f2 = c.submit("normalize", X)
    calls = []
    f2.add_done_callback(calls.append)
    seen = []
    t = serve_then_interrupt(b, seen, before=ok(1)[:30])
    with pytest.raises(KeyboardInterrupt):
        f.result()
    t.join()
    assert c.closed  # whether bytes were lost cannot be told mid-frame
    with pytest.raises(gpuq.ClosedError, match="interrupt"):
        f.result()
    c.close()  # runs the callbacks of the futures the interrupt failed
    assert calls == [f2] and isinstance(f2.exception(), gpuq.ClosedError)


def test_interrupted_arena_open_closes_its_fd(pair):
    c, b = pair
    c._apply_hello({"info": {"arenas": True, "limits": dict(ARGS["info"]["limits"],
                                                             session_arena=1 << 20)}})
    seen = []
    t = serve_then_interrupt(b, seen)
    with pytest.raises(KeyboardInterrupt):
        c.empty(1000)  # waits for its arena_open's reply
    t.join()
    assert seen[0]["op"] == "arena_open" and not c.closed
    r, w = os.pipe()
    fds = len(os.listdir("/proc/self/fd"))
    socket.send_fds(b, [frame({"id": 1, "status": "ok", "info": {"arena": 1, "size": 1 << 20}})],
                    [r])
    b.sendall(frame({"id": 2, "status": "ok"}))
    c.ping()  # reads the late reply and its fd first
    assert len(os.listdir("/proc/self/fd")) == fds  # the fd that came was closed
    os.close(r)
    os.close(w)


# ---- against gpuqd ----

@pytest.fixture
def slow_daemon(make_daemon, monkeypatch):
    """A CPU gpuqd whose every job takes 500 ms."""
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "500")
    return make_daemon()


def wait_status(c, key, n, seconds=30):
    end = time.monotonic() + seconds
    while True:
        st = c.status()
        if st[key] >= n:
            return st
        assert time.monotonic() < end, st
        time.sleep(0.01)


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


def test_interrupt_against_gpuqd(make_daemon, monkeypatch):
    # jobs long enough that the interrupt, 0.2 s after gpuqd has the request,
    # finds it running however loaded the machine (else it would hit pytest)
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "1500")
    d = make_daemon()
    with gpuq.connect(d.path, transport="socket") as c, gpuq.connect(d.path) as watch:
        t = interrupt_after(lambda: watch.status()["in_flight"] >= 1)
        with pytest.raises(KeyboardInterrupt):
            c.normalize([1.0, 3.0])
        t.join()
        assert not c.closed
        assert c.normalize([1.0, 3.0]).tolist() == [0.25, 0.75]
        assert watch.status()["cancelled"] >= 1
        futs = [c.submit("normalize", [1.0, 1.0]) for _ in range(3)]
        assert futs[2].cancel() and futs[1].cancel()
        assert futs[0].result().tolist() == [0.5, 0.5]
        wait_status(watch, "cancelled", 3)
        assert c.ping() >= 0 and not c._s.pending
