# SPDX-License-Identifier: Apache-2.0
"""deadline_ms: on the wire exactly when set (per call, or the client's
default), refused before sending when it is not an int of 0 .. 86400000,
and gpuqd's deadline_exceeded raised as DeadlineExceededError with the
session going on. Wire checks use a scripted server on a socketpair; the
rest a CPU gpuqd made slow (GPUQ_TEST_SLOW_MS)."""

import asyncio
import socket
import time

import msgpack
import numpy as np
import pytest

import gpuq
import gpuq.aio
from gpuq import client as gc

from test_lone import PREFIX, X, Y, frame, ok, requests

ARGS = {"info": {"limits": {"max_inflight": 4, "max_payload": 1 << 30,
                            "max_output": 1 << 30}}}
BAD = [(-1, gpuq.BadArgumentError), (86_400_001, gpuq.BadArgumentError),
       (1.5, TypeError), ("10", TypeError), (True, TypeError), ([5], TypeError)]


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(20)  # a reply that never comes fails the test (IoError) instead of hanging it
    c = gc.Client(a, "socketpair")
    c._apply_hello(ARGS)
    yield c, b
    c.close()
    b.close()


def test_on_the_wire_exactly_when_set(pair):
    c, b = pair
    assert c.deadline_ms is None
    calls = [
        (lambda: c.normalize(X), None),
        (lambda: c.normalize(X, deadline_ms=250), 250),  # the short path (Client._express)
        (lambda: c.normalize(X, deadline_ms=0), None),  # 0: no deadline, nothing sent
        (lambda: c.submit("normalize", X, deadline_ms=86_400_000).result(), 86_400_000),
        (lambda: c.normalize(X, deadline_ms=np.int64(7)), 7),
    ]
    for rid, (call, want) in enumerate(calls, 1):
        b.sendall(ok(rid))
        assert np.array_equal(call(), Y)
        (h,) = requests(b)
        assert h["id"] == rid and h.get("deadline_ms", None) == want, h
        assert ("deadline_ms" in h) == (want is not None)


def test_client_default(pair):
    c, b = pair
    c.deadline_ms = 1000
    assert c.deadline_ms == 1000
    for rid, call in enumerate((lambda: c.normalize(X),  # the default
                                lambda: c.normalize(X, deadline_ms=30),  # its own
                                lambda: c.normalize(X, deadline_ms=0),  # none for this call
                                lambda: c.submit("normalize", X).result()), 1):
        b.sendall(ok(rid))  # one at a time: a reply must not come before its request
        call()
    assert [h.get("deadline_ms") for h in requests(b)] == [1000, 30, None, 1000]
    c.deadline_ms = None
    b.sendall(ok(5))
    c.normalize(X)
    assert "deadline_ms" not in requests(b)[0]
    # set at construction; control requests never carry it
    a2, b2 = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    c2 = gc.Client(a2, "socketpair", deadline_ms=40)
    c2._apply_hello(ARGS)
    assert c2.deadline_ms == 40
    b2.sendall(ok(1))
    c2.normalize(X)
    b2.sendall(frame({"id": 2, "status": "ok"}))
    c2.ping()
    assert [h.get("deadline_ms") for h in requests(b2)] == [40, None]
    c2.close()
    b2.close()


def test_bad_values_refused_before_sending(pair):
    c, b = pair
    for v, cls in BAD:
        for call in (lambda: c.normalize(X, deadline_ms=v),
                     lambda: c.submit("normalize", X, deadline_ms=v),
                     lambda: c.grid(lat=(0, 1, 2), lon=(0, 1, 2), deadline_ms=v)):
            with pytest.raises(cls, match="deadline_ms"):
                call()
        with pytest.raises(cls, match="deadline_ms"):
            c.deadline_ms = v
        with socket.socket(socket.AF_UNIX) as s, pytest.raises(cls, match="deadline_ms"):
            gc.Client(s, "x", deadline_ms=v)
        with pytest.raises(cls, match="deadline_ms"):  # before connecting
            gpuq.connect("/nonexistent-gpuq-dir-x/none.sock", deadline_ms=v)
    assert issubclass(gpuq.BadArgumentError, ValueError)
    assert requests(b) == [] and c.deadline_ms is None
    b.sendall(ok(1))  # nothing was sent, no id was spent: the session goes on
    assert np.array_equal(c.normalize(X), Y)


def test_deadline_exceeded_reply(pair):
    c, b = pair
    b.sendall(frame({"id": 1, "status": "error", "code": -26, "error": "deadline_exceeded",
                     "message": "not finished within deadline_ms 5"}))
    with pytest.raises(gpuq.DeadlineExceededError, match="within deadline_ms 5") as ei:
        c.normalize(X, deadline_ms=5)
    assert ei.value.request_id == 1 and isinstance(ei.value, TimeoutError)
    b.sendall(ok(2))
    assert np.array_equal(c.normalize(X), Y)


async def read_request(loop, b, buf: bytearray) -> dict:
    """The next request header from the scripted server's end."""
    while True:
        if len(buf) >= 20:
            _, _, _, _, hl, pl = PREFIX.unpack_from(buf, 0)
            if len(buf) >= 20 + hl + pl:
                h = msgpack.unpackb(bytes(buf[20:20 + hl]))
                del buf[:20 + hl + pl]
                return h
        data = await loop.sock_recv(b, 1 << 16)
        assert data, "the client closed"
        buf += data


async def aio_pair(**kw):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    b.setblocking(False)
    c = gpuq.aio.AsyncClient(a, "socketpair", **kw)
    c._apply_hello(ARGS)
    return c, b


def test_aio_on_the_wire():
    async def main():
        loop = asyncio.get_running_loop()
        c, b = await aio_pair(deadline_ms=90)
        buf = bytearray()
        seen = []
        for kw, want in (({}, 90), ({"deadline_ms": 5}, 5), ({"deadline_ms": 0}, None)):
            t = asyncio.ensure_future(c.normalize(X, **kw))
            h = await read_request(loop, b, buf)
            seen.append(h.get("deadline_ms"))
            assert ("deadline_ms" in h) == (want is not None)
            await loop.sock_sendall(b, ok(h["id"]))
            assert np.array_equal(await t, Y)
        fut = await c.submit("normalize", X, deadline_ms=3)
        h = await read_request(loop, b, buf)
        seen.append(h.get("deadline_ms"))
        await loop.sock_sendall(b, frame({"id": h["id"], "status": "error", "code": -26,
                                          "error": "deadline_exceeded", "message": "late"}))
        with pytest.raises(gpuq.DeadlineExceededError):
            await fut
        assert seen == [90, 5, None, 3]
        for v, cls in BAD:
            with pytest.raises(cls, match="deadline_ms"):
                await c.normalize(X, deadline_ms=v)
            with pytest.raises(cls, match="deadline_ms"):
                await c.submit("normalize", X, deadline_ms=v)
            with pytest.raises(cls, match="deadline_ms"):
                await gpuq.aio.connect("/nonexistent-gpuq-dir-x/none.sock", deadline_ms=v)
        await asyncio.sleep(0.05)
        with pytest.raises(BlockingIOError):
            b.recv(1)  # nothing more was sent
        await c.close()
        b.close()
    asyncio.run(asyncio.wait_for(main(), 60))


# ---- against gpuqd ----

@pytest.fixture
def slow_daemon(make_daemon, monkeypatch):
    """A CPU gpuqd whose every job takes 300 ms."""
    monkeypatch.setenv("GPUQ_TEST_SLOW_MS", "300")
    return make_daemon()


def test_deadline_exceeded_by_gpuqd(slow_daemon):
    with gpuq.connect(slow_daemon.path, transport="socket") as c:
        t0 = time.monotonic()
        with pytest.raises(gpuq.DeadlineExceededError) as ei:
            c.normalize([1.0, 3.0], deadline_ms=50)
        assert ei.value.code == -26 and ei.value.request_id
        # a running job cannot be stopped: answered when it ends, its result dropped
        assert time.monotonic() - t0 < 30
        assert c.normalize([1.0, 3.0]).tolist() == [0.25, 0.75]  # the session goes on
        assert c.normalize([1.0, 3.0], deadline_ms=60_000).tolist() == [0.25, 0.75]
        c.deadline_ms = 50
        futs = [c.submit("normalize", [1.0, 1.0]) for _ in range(3)]
        for f in futs:
            assert isinstance(f.exception(), gpuq.DeadlineExceededError)
        assert c.normalize([1.0, 1.0], deadline_ms=0).tolist() == [0.5, 0.5]
        assert c.status()["expired"] >= 4


def test_aio_deadline_exceeded_by_gpuqd(slow_daemon):
    async def main():
        async with gpuq.aio.connect(slow_daemon.path, deadline_ms=50) as c:
            assert c.deadline_ms == 50
            rs = await asyncio.gather(c.normalize([1.0, 3.0]), c.normalize([1.0, 3.0]),
                                      return_exceptions=True)
            assert all(isinstance(r, gpuq.DeadlineExceededError) for r in rs), rs
            y = await c.normalize([1.0, 3.0], deadline_ms=60_000)
            assert y.tolist() == [0.25, 0.75]
            assert (await c.status())["expired"] >= 2
    asyncio.run(asyncio.wait_for(main(), 120))
