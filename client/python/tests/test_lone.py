# SPDX-License-Identifier: Apache-2.0
"""The blocking client's short path for a request alone in flight
(Client._express, Session.express_reply): a whole plain success in the first receive is taken there;
every other reply (split over receives, an error, a mismatch, a wrong id,
bytes beyond the frame, a header the short path does not read) goes through
the general reader with the same result or error as before. A scripted
server on a socketpair sends exactly the bytes each case needs."""

import socket
import struct
import threading

import msgpack
import numpy as np
import pytest

import gpuq
from gpuq import _session, _wire, client as gc

PREFIX = struct.Struct("<4sBBHIQ")


def frame(hdr, payload=b"", raw_header=None):
    h = raw_header if raw_header is not None else msgpack.packb(hdr)
    return PREFIX.pack(b"GPUQ", 1, 2, 0, len(h), len(payload)) + h + payload


@pytest.fixture
def pair(monkeypatch):
    """(client, server socket, taken): taken lists, per receive the short
    path was offered, whether it took the reply."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    c = gc.Client(a, "socketpair")
    c._apply_hello({"info": {"limits": {"max_inflight": 4, "max_payload": 1 << 30,
                                        "max_output": 1 << 30}}})
    taken = []
    orig = _session.Session.express_reply

    def express_reply(self, call, rid, n, outs):
        r = orig(self, call, rid, n, outs)
        taken.append(r is not _session.MISS)
        return r
    monkeypatch.setattr(_session.Session, "express_reply", express_reply)
    yield c, b, taken
    c.close()
    b.close()


X = np.array([1.0, 3.0, 4.0], np.float32)
Y = (X / X.sum()).astype(np.float32)


def ok(rid, y=Y, **extra):
    h = {"id": rid, "status": "ok", "dtype": "f32", "shape": [len(y)]}
    h.update(extra)
    return frame(h, y.tobytes())


def requests(b):
    """The request headers the client sent so far."""
    b.setblocking(False)
    data = b""
    try:
        while True:
            data += b.recv(1 << 16)
    except BlockingIOError:
        pass
    b.setblocking(True)
    out = []
    while data:
        _, _, _, _, hl, pl = PREFIX.unpack_from(data, 0)
        out.append(msgpack.unpackb(data[20:20 + hl]))
        data = data[20 + hl + pl:]
    return out


def test_whole_reply_taken_by_the_short_path(pair):
    c, b, taken = pair
    for rid in (1, 2, 3):
        b.sendall(ok(rid))  # there before the client reads: one receive brings it all
        y = c.normalize(X)
        assert y.dtype == np.float32 and np.array_equal(y, Y)
    assert taken == [True, True, True]
    assert [h["id"] for h in requests(b)] == [1, 2, 3]


def test_split_reply_goes_through_the_reader(pair):
    c, b, taken = pair
    f = ok(1)
    b.sendall(f[:30])
    t = threading.Timer(0.05, lambda: b.sendall(f[30:]))
    t.start()
    y = c.normalize(X)
    t.join()
    assert np.array_equal(y, Y) and taken == [False]


def test_error_reply(pair):
    c, b, taken = pair
    b.sendall(frame({"id": 1, "status": "error", "code": -10, "error": "zero_norm",
                     "message": "sum is 0"}))
    with pytest.raises(gpuq.ZeroNormError, match="sum is 0"):
        c.normalize(X)
    b.sendall(ok(2))  # the session goes on, by the short path again
    assert np.array_equal(c.normalize(X), Y)
    assert taken == [False, True]


def test_mismatched_reply(pair):
    c, b, taken = pair
    b.sendall(ok(1, y=np.zeros(4, np.float32)))  # 4 values for a request of 3
    with pytest.raises(gpuq.ProtocolError, match=r"normalize reply: dtype f32 shape \[4\]"):
        c.normalize(X)
    b.sendall(frame({"id": 2, "status": "ok", "dtype": "f64", "shape": [3]},
                    Y.astype(np.float64).tobytes()))
    with pytest.raises(gpuq.ProtocolError, match="dtype f64"):
        c.normalize(X)
    # the same byte count as expected, but another shape or dtype
    b.sendall(ok(3))
    with pytest.raises(gpuq.ProtocolError, match=r"shape \[3\].*expected \[\('f32', \[1, 3\]\)"):
        c.normalize(X.reshape(1, 3))
    b.sendall(frame({"id": 4, "status": "ok", "dtype": "i64", "shape": [1]}, bytes(8)))
    with pytest.raises(gpuq.ProtocolError, match="dtype i64"):
        c.normalize(np.ones(2, np.float32))
    b.sendall(ok(5))  # the stream stayed in step
    assert np.array_equal(c.normalize(X), Y)
    assert taken == [False, False, False, False, True]


def test_wrong_id_breaks_the_connection(pair):
    c, b, taken = pair
    b.sendall(ok(7))
    with pytest.raises(gpuq.ProtocolError, match="reply id 7, expected 1"):
        c.normalize(X)
    with pytest.raises(gpuq.ProtocolError):
        c.normalize(X)  # the stream is out of step: every later call fails
    assert taken == [False]


def test_bytes_beyond_the_frame(pair):
    c, b, taken = pair
    b.sendall(ok(1) + ok(99))  # a second reply to no request
    with pytest.raises(gpuq.ProtocolError, match="reply id 99|to no request"):
        c.normalize(X)
        c.normalize(X)
    assert taken[0] is False


def test_header_the_short_path_does_not_read(pair):
    c, b, taken = pair
    # an integer key: the general reader accepts it (strict_map_key=False)
    h = msgpack.packb({"id": 1, "status": "ok", "dtype": "f32", "shape": [3], 5: "x"})
    b.sendall(frame(None, Y.tobytes(), raw_header=h))
    assert np.array_equal(c.normalize(X), Y)
    assert taken == [False]


def test_timing_and_out_through_the_short_path(pair):
    c, b, taken = pair
    b.sendall(ok(1, timing={"queue_us": 1.5, "kernel_us": 2.0, "total_us": 9.0}))
    y, t = c.normalize(X, timing=True)
    assert np.array_equal(y, Y) and t.kernel_us == 2.0 and t.total_us == 9.0
    out = np.full(3, -1.0, np.float64)  # float32 result cast into a float64 out=
    b.sendall(ok(2))
    r = c.normalize(X, out=out)
    assert r is out and np.array_equal(out, Y.astype(np.float64))
    strided = np.full(6, -1.0, np.float32)[::2]  # out= of the result's type, not contiguous
    b.sendall(ok(3))
    r = c.normalize(X, out=strided)
    assert r is strided and np.array_equal(strided, Y)
    same = np.empty(3, np.float32)  # out= the bytes land in as they come
    b.sendall(ok(4))
    assert c.normalize(X, out=same) is same and np.array_equal(same, Y)
    ro = np.empty(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(gpuq.BadArgumentError, match="read-only"):
        c.normalize(X, out=ro)  # refused before sending
    assert taken == [True, True, True, True]
    assert [h.get("timing") for h in requests(b)] == [True, None, None, None]


def test_not_alone_no_short_path(pair):
    c, b, taken = pair
    f1 = c.submit("normalize", X)  # in flight: the next blocking call is not alone
    b.sendall(ok(1) + ok(2))
    assert np.array_equal(c.normalize(X), Y)
    assert np.array_equal(f1.result(), Y)
    assert taken == []


def test_reader_whole():
    got = []
    r = _wire.Reader(lambda h, n: got.append(h) or ([memoryview(bytearray(n))] if n else []),
                     lambda: None)
    f = ok(1)
    t = r.target()
    t[:len(f)] = f
    hdr, payload = r.whole(len(f))
    assert hdr["id"] == 1 and bytes(payload) == Y.tobytes()
    assert r.whole(len(f) - 1) is None  # short of the frame
    r.feed(len(f))  # whole() took nothing: the reader parses the same bytes
    assert [h["id"] for h in got] == [1]
    t = r.target()
    bad = b"XPUQ" + f[4:]
    t[:len(bad)] = bad
    assert r.whole(len(bad)) is None
    with pytest.raises(gpuq.ProtocolError, match="prefix"):
        r.feed(len(bad))
