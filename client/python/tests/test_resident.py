# SPDX-License-Identifier: Apache-2.0
"""Resident arrays (PROTOCOL.md 3.5): put, get, list, remove, and
c.resident(name) as an op's input or out=, and persist. The exact frames
are checked against a scripted server on a socketpair (what goes in
"in"/"out", which shape keys are left out, when "persist" is sent, how a
reply without a payload for a kept output and a reply whose shapes the
client could not know are read); then the same against a CPU gpuqd of its
own: results identical to the arrays carried, by socket and through
arenas, and the errors; and persisted arrays against a gpuqd with a state
directory, restarted: the same bytes back."""

import asyncio
import doctest
import inspect
import mmap
import os
import socket
import threading

import msgpack
import numpy as np
import pytest

import gpuq
import gpuq.aio
from gpuq import client as gc
from gpuq._arena import Pool

from conftest import Daemon
from test_deadline import ARGS, aio_pair, read_request
from test_lone import PREFIX, frame

RNG = np.random.default_rng(35)
BAD_NAMES = [
    ("", "the name is empty"),
    ("x" * 129, "the name has 129 bytes; at most 128"),
    ("é" * 65, "the name has 130 bytes; at most 128"),
    ("a/b", 'the name contains "/" (byte 1)'),
    ("tab\there", "the name contains a control character (byte 3)"),
    ("nul\0", "the name contains a control character (byte 3)"),
    ("del\x7f", "the name contains a control character (byte 3)"),
    ("c1\x85", "the name contains a control character (byte 2)"),  # U+0085: C2 85
]
NOT_UTF8 = "x" * 200 + "\ud800"  # a lone surrogate: bad_header, before its length counts
GOOD_NAMES = ["a", "x" * 128, "é" * 64, "base vectors (v2)", "\u00a0nbsp", "日本"]


def same(a, b):
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(u, v) for u, v in zip(a, b))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---- the frames, against a scripted server ----

def sent(b):
    """[(header, payload)] of the request frames the client sent so far."""
    b.setblocking(False)
    data = b""
    try:
        while True:
            data += b.recv(1 << 20)
    except BlockingIOError:
        pass
    b.setblocking(True)
    out = []
    while data:
        _, _, _, _, hl, pl = PREFIX.unpack_from(data, 0)
        out.append((msgpack.unpackb(data[20:20 + hl]), data[20 + hl:20 + hl + pl]))
        data = data[20 + hl + pl:]
    return out


def okr(rid, payload=b"", **keys):
    return frame(dict({"id": rid, "status": "ok"}, **keys), payload)


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(20)  # a reply that never comes fails the test instead of hanging it
    c = gc.Client(a, "socketpair")
    c._apply_hello(ARGS)
    yield c, b
    c.close()
    b.close()


def test_put_get_list_remove_frames(pair):
    c, b = pair
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    info = {"name": "a", "bytes": 24, "dtype": "f32", "shape": [2, 3], "device": -1,
            "replaced": False}
    b.sendall(okr(1, info=info))
    assert c.put("a", x) == info
    # converted as an op's input: ints become float64, a view is made contiguous
    b.sendall(okr(2, info=dict(info, dtype="f64", bytes=24, shape=[3])))
    c.put("b", np.arange(6)[::2], access="all")
    y = RNG.random((4, 2))
    b.sendall(okr(3, y.tobytes(), dtype="f64", shape=[4, 2]))
    got = c.get("b")
    assert same(got, y)
    idx = np.arange(6, dtype=np.int64).reshape(3, 2)  # a kept knn index output
    b.sendall(okr(4, idx.tobytes(), dtype="i64", shape=[3, 2]))
    assert same(c.get("i"), idx)
    arrays = [{"name": "a", "owner": 1000, "access": "private", "dtype": "f32", "shape": [2, 3],
               "bytes": 24, "device": -1, "users": 0}]
    stream = b"".join(msgpack.packb(a) for a in arrays)
    b.sendall(okr(5, stream, info={"format": "msgpack-stream", "count": len(arrays)}))
    assert c.list() == arrays
    b.sendall(okr(6, info={"name": "a", "bytes": 24}))
    assert c.remove("a") == {"name": "a", "bytes": 24}
    b.sendall(frame({"id": 7, "status": "error", "code": -28, "error": "not_found",
                     "message": 'no resident array "a"'}))
    with pytest.raises(gpuq.NotFoundError, match='no resident array "a"') as ei:
        c.get("a")
    assert ei.value.code == -28 and ei.value.request_id == 7 and isinstance(ei.value, LookupError)
    frames = sent(b)
    assert frames[0] == ({"id": 1, "op": "put", "dtype": "f32", "shape": [2, 3], "name": "a",
                          "access": "private"}, x.tobytes())
    assert frames[1] == ({"id": 2, "op": "put", "dtype": "f64", "shape": [3], "name": "b",
                          "access": "all"}, np.arange(6.0)[::2].tobytes())
    # get: no dtype, shape or "in" (the array's); list and remove: control requests
    assert [f[0] for f in frames[2:]] == [
        {"id": 3, "op": "get", "name": "b"}, {"id": 4, "op": "get", "name": "i"},
        {"id": 5, "op": "list"}, {"id": 6, "op": "remove", "name": "a"},
        {"id": 7, "op": "get", "name": "a"}]
    assert all(f[1] == b"" for f in frames[2:])


def test_resident_inputs_frames(pair):
    c, b = pair
    q = RNG.random((3, 4)).astype(np.float32)
    dist = RNG.random((3, 2)).astype(np.float32)
    idx = np.array([[0, 1], [2, 0], [1, 2]], np.int64)
    knn = dict(dtype="f32", shape=[3, 2], dtype_b="i64", shape_b=[3, 2])
    b.sendall(okr(1, dist.tobytes() + idx.tobytes(), **knn))
    assert same(c.knn(q, c.resident("base"), 2), (dist, idx))
    # A resident: its shape key left out, dtype the carried input's
    b.sendall(okr(2, dist.tobytes() + idx.tobytes(), **knn))
    c.knn(c.resident("qs"), q, 2, metric="cosine")
    # both resident, dtype= given: sent; the result's shape comes from the reply
    b.sendall(okr(3, dist.tobytes() + idx.tobytes(), **knn))
    assert same(c.knn(c.resident("qs"), c.resident("base"), 2, dtype=np.float32), (dist, idx))
    y = RNG.random((5, 7))
    b.sendall(okr(4, y.tobytes(), dtype="f64", shape=[5, 7]))
    assert same(c.normalize(c.resident("x"), "l2"), y)
    b.sendall(okr(5, y.tobytes(), dtype="f64", shape=[5, 7]))
    assert same(c.pairwise(c.resident("x")), y)  # y=None: x against itself, named twice
    h = RNG.random(6)
    b.sendall(okr(6, h.tobytes(), dtype="f64", shape=[6]))
    pts = np.zeros((2, 3, 2))  # (..., 2): the result takes pts' shape without its last axis
    assert same(c.haversine(c.resident("p"), pts), h.reshape(2, 3))
    b.sendall(okr(7, info={"name": "copy", "bytes": 8, "dtype": "f64", "shape": [1],
                           "device": -1, "replaced": True}))
    assert c.put("copy", c.resident("orig"))["replaced"] is True
    frames = sent(b)
    assert [f[0] for f in frames] == [
        {"id": 1, "op": "knn", "dtype": "f32", "shape": [3, 4], "in": [None, "base"],
         "metric": "euclidean", "k": 2},
        {"id": 2, "op": "knn", "dtype": "f32", "shape_b": [3, 4], "in": ["qs", None],
         "metric": "cosine", "k": 2},
        {"id": 3, "op": "knn", "dtype": "f32", "in": ["qs", "base"], "metric": "euclidean",
         "k": 2},
        {"id": 4, "op": "normalize", "in": ["x"], "method": "l2"},
        {"id": 5, "op": "pairwise", "in": ["x", "x"], "metric": "euclidean"},
        {"id": 6, "op": "haversine", "dtype": "f64", "shape_b": [6, 2], "in": ["p", None],
         "radius": 6371.0088},
        {"id": 7, "op": "put", "name": "copy", "access": "private", "in": ["orig"]},
    ]
    assert [f[1] for f in frames] == [q.tobytes(), q.tobytes(), b"", b"", b"", pts.tobytes(),
                                      b""]


def test_kept_outputs_frames(pair):
    c, b = pair
    x = RNG.random((4, 3))
    b.sendall(okr(1, dtype="f64", shape=[4, 3]))  # kept: no payload for it
    assert c.normalize(x, "l2", out=c.resident("nb"), access="all") is None
    q = RNG.random((2, 3))
    dist = RNG.random((2, 3))
    idx = np.array([[0, 1, 2], [3, 2, 1]], np.int64)
    knn = dict(dtype="f64", shape=[2, 3], dtype_b="i64", shape_b=[2, 3])
    b.sendall(okr(2, dist.tobytes(), **knn))  # the indices kept: the distances come
    d, i = c.knn(q, c.resident("nb"), 3, out=(None, c.resident("idx")))
    assert same(d, dist) and i is None
    b.sendall(okr(3, idx.tobytes(), **knn))  # the distances kept
    o = np.full((2, 3), -1, np.int64)
    d, i = c.knn(q, c.resident("nb"), 3, out=(c.resident("d"), o))
    assert d is None and i is o and same(o, idx)
    b.sendall(okr(4, **knn))
    assert c.knn(q, c.resident("nb"), 3, out=(c.resident("d"), c.resident("i"))) == (None, None)
    b.sendall(okr(5, dtype="f64", shape=[10, 10]))
    assert c.grid((0, 1, 10), (0, 1, 10), out=c.resident("g")) is None
    b.sendall(okr(6, dtype="f64", shape=[4, 3], timing={"total_us": 5.0}))
    v, t = c.normalize(x, out=c.resident("nb"), timing=True)
    assert v is None and t.total_us == 5.0
    b.sendall(okr(7, dtype="f64", shape=[4, 3]))
    assert c.get("nb", out=c.resident("nb2")) is None
    hs = [f[0] for f in sent(b)]
    assert hs[0] == {"id": 1, "op": "normalize", "dtype": "f64", "shape": [4, 3], "method": "l2",
                     "access": "all", "out": ["nb"]}
    assert hs[1]["in"] == [None, "nb"] and hs[1]["out"] == [None, "idx"] and "shape_b" not in hs[1]
    assert hs[2]["out"] == ["d", None] and hs[3]["out"] == ["d", "i"]
    assert hs[4]["out"] == ["g"] and "access" not in hs[4]
    assert hs[5]["out"] == ["nb"] and hs[5]["timing"] is True
    assert hs[6] == {"id": 7, "op": "get", "name": "nb", "out": ["nb2"]}


def test_persist_frames(pair):
    """persist=True is sent as "persist": true by every method that takes it
    (put, get, each op), also where nothing is kept (gpuqd ignores it);
    persist=False (the default) is never sent."""
    c, b = pair
    x = RNG.random((4, 3))
    q = RNG.random((2, 3))
    knn = dict(dtype="f64", shape=[2, 2], dtype_b="i64", shape_b=[2, 2])
    b.sendall(okr(1, info={"name": "p", "bytes": x.nbytes}))
    assert c.put("p", x, persist=True)["name"] == "p"
    b.sendall(okr(2, info={"name": "p2", "bytes": x.nbytes}))
    c.put("p2", x, "all", True)  # the order: put(name, a, access, persist)
    b.sendall(okr(3, info={"name": "p3", "bytes": x.nbytes}))
    c.put("p3", c.resident("p"), persist=np.bool_(True))  # numpy's bool too
    b.sendall(okr(4, dtype="f64", shape=[4, 3]))
    assert c.normalize(x, "l2", out=c.resident("n"), persist=True) is None
    b.sendall(okr(5, **knn))
    assert c.knn(q, c.resident("n"), 2, out=(c.resident("d"), c.resident("i")),
                 persist=True) == (None, None)
    b.sendall(okr(6, dtype="f64", shape=[3, 3]))
    c.grid((0, 1, 3), (0, 1, 3), out=c.resident("g"), persist=True, access="all")
    b.sendall(okr(7, dtype="f64", shape=[2, 2]))
    c.pairwise(q, out=c.resident("pw"), persist=True)
    h = RNG.random(2)
    b.sendall(okr(8, dtype="f64", shape=[2]))
    c.haversine(np.zeros((2, 2)), to=(0, 0), out=c.resident("hv"), persist=True)
    b.sendall(okr(9, dtype="f64", shape=[4, 3]))
    assert c.get("n", out=c.resident("n2"), persist=True) is None
    # nothing kept: sent all the same (the fast path of normalize too)
    b.sendall(okr(10, h.tobytes(), dtype="f64", shape=[2]))
    assert same(c.normalize(np.ones(2), persist=True), h)
    b.sendall(okr(11, h.tobytes(), dtype="f64", shape=[2]))
    assert same(c.normalize(np.ones(2), persist=False), h)
    b.sendall(okr(12, info={"name": "p", "bytes": x.nbytes}))
    c.put("p", x, persist=False)
    frames = [f[0] for f in sent(b)]
    assert frames[0] == {"id": 1, "op": "put", "dtype": "f64", "shape": [4, 3], "name": "p",
                         "access": "private", "persist": True}
    assert frames[1]["access"] == "all" and frames[1]["persist"] is True
    assert frames[2] == {"id": 3, "op": "put", "name": "p3", "access": "private",
                         "persist": True, "in": ["p"]}
    assert frames[3] == {"id": 4, "op": "normalize", "dtype": "f64", "shape": [4, 3],
                         "method": "l2", "persist": True, "out": ["n"]}
    assert frames[4]["out"] == ["d", "i"] and frames[4]["persist"] is True
    assert frames[5]["out"] == ["g"] and frames[5]["access"] == "all" and frames[5]["persist"]
    assert frames[6]["out"] == ["pw"] and frames[6]["persist"] is True
    assert frames[7]["out"] == ["hv"] and frames[7]["persist"] is True
    assert frames[8] == {"id": 9, "op": "get", "name": "n", "persist": True, "out": ["n2"]}
    assert frames[9] == {"id": 10, "op": "normalize", "dtype": "f64", "shape": [2],
                         "method": "sum", "persist": True}
    assert "persist" not in frames[10] and "persist" not in frames[11]
    # not a bool: what gpuqd answers a "persist" of another type, before sending
    for bad in (1, "yes", None, 0.0):
        with pytest.raises(gpuq.BadHeaderError, match='"persist" must be a bool'):
            c.put("p", x, persist=bad)
        with pytest.raises(gpuq.BadHeaderError, match='"persist" must be a bool'):
            c.normalize(x, out=c.resident("n"), persist=bad)
    assert sent(b) == []
    # gpuqd's storage error: StorageError, an OSError; the session goes on
    b.sendall(frame({"id": 13, "status": "error", "code": -29, "error": "storage",
                     "message": 'resident array "p" (out[0]): persist, but gpuqd has no state '
                                'directory (gpuqd --state-dir)'}))
    with pytest.raises(gpuq.StorageError, match="no state directory") as ei:
        c.put("p", x, persist=True)
    assert ei.value.code == -29 and ei.value.name == "storage" and ei.value.request_id == 13
    assert isinstance(ei.value, OSError) and isinstance(ei.value, gpuq.Error)
    b.sendall(okr(14))
    assert c.ping() >= 0


def test_replies_that_do_not_fit(pair):
    c, b = pair
    q = RNG.random((2, 3))
    # a lazy output whose reply says no array: a protocol error, the stream goes on
    b.sendall(okr(1, dtype="f16", shape=[2]))
    with pytest.raises(gpuq.ProtocolError, match="dtype"):
        c.get("x")
    # the caller's out= checked once the reply says the shape
    y = RNG.random((5, 7))
    b.sendall(okr(2, y.tobytes(), dtype="f64", shape=[5, 7]))
    with pytest.raises(gpuq.BadShapeError, match=r"out has shape \(5, 6\)"):
        c.normalize(c.resident("x"), out=np.empty((5, 6)))
    o = np.empty((5, 7), np.float32)  # a cast on the way, as for carried arrays
    b.sendall(okr(3, y.tobytes(), dtype="f64", shape=[5, 7]))
    assert c.normalize(c.resident("x"), out=o) is o
    assert same(o, y.astype(np.float32))
    # a known shape is checked as ever
    b.sendall(okr(4, np.zeros(6).tobytes(), dtype="f64", shape=[2, 3], dtype_b="i64",
                  shape_b=[2, 3]))
    with pytest.raises(gpuq.ProtocolError, match="expected"):
        c.knn(q, c.resident("base"), 2, out=(None, c.resident("i")))
    b.sendall(okr(5))
    assert c.ping() >= 0


def test_arena_frames(pair):
    """Through arenas: names beside arena references in "in" and "out"."""
    c, b = pair
    size = 8 << 20
    fd = os.memfd_create("gpuq-test")
    os.ftruncate(fd, size)
    peer = mmap.mmap(fd, size)  # the scripted server's view of the arena
    c._s.pool = Pool(1 << 30)
    c._s.pool.add(5, os.dup(fd), size)
    os.close(fd)

    def at(ref, dtype, shape):
        arena, off, n = ref
        assert arena == 5
        return np.frombuffer(peer, dtype, int(np.prod(shape)), off).reshape(shape)

    q = c.asarray(RNG.random((3, 4)))
    dist, idx = RNG.random((3, 2)), np.array([[0, 1], [2, 0], [1, 2]], np.int64)
    knn = dict(dtype="f64", shape=[3, 2], dtype_b="i64", shape_b=[3, 2])
    # the reply is sent once the outputs' places are known: a thread plays gpuqd
    seen = []

    def serve(n):
        for _ in range(n):
            h, _ = recv(b)
            seen.append(h)
            out = h.get("out") or []
            if h["op"] == "knn":
                for ref, arr in zip(out, (dist, idx)):
                    if isinstance(ref, list):
                        at(ref, arr.dtype, arr.shape)[...] = arr
                b.sendall(okr(h["id"], b"" if all(isinstance(r, (list, str)) for r in out)
                              else dist.tobytes(), **knn))
            elif h["op"] == "put":
                x = at(h["in"][0], np.float64, h["shape"])
                b.sendall(okr(h["id"], info={"bytes": x.nbytes, "sum": float(x.sum())}))
            elif h["op"] == "normalize" and h.get("shape") is None:
                b.sendall(okr(h["id"], np.ones(6).tobytes(), dtype="f64", shape=[2, 3]))
            else:
                b.sendall(okr(h["id"], dtype="f64", shape=h["shape"]))
    t = threading.Thread(target=serve, args=(5,), daemon=True)
    t.start()
    d, i = c.knn(q, c.resident("base"), 2)
    assert same((d, i), (dist, idx)) and c.in_arena(d) and c.in_arena(i)  # zero-copy
    d, i = c.knn(q, c.resident("base"), 2, out=(None, c.resident("idx")))
    assert same(d, dist) and i is None and c.in_arena(d)
    assert c.normalize(q, out=c.resident("nb")) is None
    big = RNG.random((512, 512))  # 2 MiB: staged through a block of the arena
    assert c.put("big", big) == {"bytes": big.nbytes, "sum": float(big.sum())}
    c.transport = "shm"  # a shape the client cannot know comes by socket even so
    y = c.normalize(c.resident("x"))
    assert same(y, np.ones((2, 3))) and not c.in_arena(y)
    t.join(20)
    h0, h1, h2, h3, h4 = seen
    assert h0["in"][1] == "base" and h0["in"][0][2] == q.nbytes and "shape_b" not in h0
    assert [type(r) for r in h0["out"]] == [list, list]
    assert h1["in"][1] == "base" and isinstance(h1["out"][0], list) and h1["out"][1] == "idx"
    assert isinstance(h2["in"][0], list) and h2["out"] == ["nb"]
    assert h3["op"] == "put" and "out" not in h3 and h3["shape"] == [512, 512]
    assert h4["in"] == ["x"] and "out" not in h4 and "dtype" not in h4
    del d, i, q
    peer.close()


def recv(b, timeout=20):
    """The next request (header, payload) the scripted server gets."""
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
    return msgpack.unpackb(rest[:hl]), rest[hl:]


def test_bad_names_refused_before_sending(pair):
    c, b = pair
    for name, why in BAD_NAMES:
        calls = [
            (lambda: c.put(name, [1.0]), f"name: {why}"),
            (lambda: c.get(name), f"name: {why}"),
            (lambda: c.remove(name), f"name: {why}"),
            (lambda: c.normalize(c.resident(name)), f"in[0]: {why}"),
            (lambda: c.knn([[1.0]], c.resident(name), 1), f"in[1]: {why}"),
            (lambda: c.normalize([1.0], out=c.resident(name)), f"out[0]: {why}"),
            (lambda: c.knn([[1.0]], [[1.0]], 1, out=(None, c.resident(name))), f"out[1]: {why}"),
            (lambda: c.put("ok", c.resident(name)), f"in[0]: {why}"),
        ]
        for call, msg in calls:
            with pytest.raises(gpuq.BadArgumentError) as ei:
                call()
            assert ei.value.message == msg, (name, msg)
    for call, key in [(lambda: c.put(NOT_UTF8, [1.0]), "name"),
                      (lambda: c.remove(NOT_UTF8), "name"),
                      (lambda: c.knn([[1.0]], c.resident(NOT_UTF8), 1), "in"),
                      (lambda: c.normalize([1.0], out=c.resident(NOT_UTF8)), "out")]:
        with pytest.raises(gpuq.BadHeaderError) as ei:
            call()
        assert ei.value.message == f'"{key}" is not valid UTF-8'
    with pytest.raises(gpuq.BadArgumentError, match='access "public" is not private or all'):
        c.put("a", [1.0], access="public")
    with pytest.raises(gpuq.BadArgumentError, match="is a str"):
        c.resident(b"bytes")
    with pytest.raises(gpuq.BadArgumentError, match="is a str"):
        c.get(None)
    with pytest.raises(gpuq.BadShapeError, match="rank 1 or 2"):
        c.put("a", np.zeros((2, 2, 2)))
    with pytest.raises(gpuq.BadShapeError, match="rank 1 or 2"):
        c.put("a", 1.0)
    with pytest.raises(gpuq.BadShapeError):  # a carried input is still checked
        c.knn([1.0, 2.0], c.resident("base"), 1)
    with pytest.raises(gpuq.BadArgumentError, match="tuple of 2"):
        c.knn([[1.0]], c.resident("base"), 1, out=c.resident("d"))
    assert sent(b) == []
    for name in GOOD_NAMES:
        assert gpuq._resident.check_name("name", name) == name


def test_resident_marker():
    r = gpuq.Resident("base")
    assert r == gpuq.Resident("base") and r != gpuq.Resident("other") and r != "base"
    assert len({r, gpuq.Resident("base")}) == 1 and repr(r) == "gpuq.Resident('base')"
    assert gpuq.Client.resident("x") == gpuq.Resident("x")
    for m in ("put", "get", "list", "remove"):
        assert getattr(gpuq.Client, m).__doc__ == getattr(gpuq.aio.AsyncClient, m).__doc__
    assert gpuq.NotFoundError is gpuq.errors.error_class(-28)


def test_aio_frames():
    async def main():
        loop = asyncio.get_running_loop()
        c, b = await aio_pair()
        buf = bytearray()
        q = RNG.random((2, 3))
        t = asyncio.ensure_future(c.put("q", q, access="all"))
        h = await read_request(loop, b, buf)
        assert h == {"id": 1, "op": "put", "dtype": "f64", "shape": [2, 3], "name": "q",
                     "access": "all"}
        await loop.sock_sendall(b, okr(1, info={"name": "q", "bytes": 48}))
        assert (await t)["bytes"] == 48
        t = asyncio.ensure_future(c.knn(q, c.resident("q"), 1, out=(None, c.resident("i"))))
        h = await read_request(loop, b, buf)
        assert h["in"] == [None, "q"] and h["out"] == [None, "i"] and "shape_b" not in h
        d = np.zeros((2, 1))
        await loop.sock_sendall(b, okr(2, d.tobytes(), dtype="f64", shape=[2, 1],
                                       dtype_b="i64", shape_b=[2, 1]))
        got = await t
        assert same(got[0], d) and got[1] is None
        t = asyncio.ensure_future(c.get("q"))
        assert await read_request(loop, b, buf) == {"id": 3, "op": "get", "name": "q"}
        await loop.sock_sendall(b, okr(3, q.tobytes(), dtype="f64", shape=[2, 3]))
        assert same(await t, q)
        t = asyncio.ensure_future(c.list())
        assert await read_request(loop, b, buf) == {"id": 4, "op": "list"}
        await loop.sock_sendall(b, okr(4, info={"format": "msgpack-stream", "count": 0}))
        assert await t == []
        t = asyncio.ensure_future(c.put("q", q, "all", True))
        h = await read_request(loop, b, buf)
        assert h == {"id": 5, "op": "put", "dtype": "f64", "shape": [2, 3], "name": "q",
                     "access": "all", "persist": True}
        await loop.sock_sendall(b, okr(5, info={"name": "q", "bytes": 48}))
        await t
        t = asyncio.ensure_future(c.knn(q, c.resident("q"), 1, out=(None, c.resident("i")),
                                        persist=True))
        h = await read_request(loop, b, buf)
        assert h["out"] == [None, "i"] and h["persist"] is True
        await loop.sock_sendall(b, okr(6, d.tobytes(), dtype="f64", shape=[2, 1],
                                       dtype_b="i64", shape_b=[2, 1]))
        await t
        t = asyncio.ensure_future(c.get("q", out=c.resident("q2"), persist=True))
        assert await read_request(loop, b, buf) == {"id": 7, "op": "get", "name": "q",
                                                    "persist": True, "out": ["q2"]}
        await loop.sock_sendall(b, okr(7, dtype="f64", shape=[2, 3]))
        assert await t is None
        for m in ("normalize", "haversine", "grid", "pairwise", "knn", "put", "get"):
            assert "persist" in inspect.signature(getattr(c, m)).parameters, m
            assert inspect.signature(getattr(c, m)).parameters["persist"].default is False
        with pytest.raises(gpuq.BadArgumentError, match="name: the name is empty"):
            await c.remove("")
        await c.close()
        b.close()
    asyncio.run(asyncio.wait_for(main(), 60))


# ---- against gpuqd ----

@pytest.fixture(scope="module")
def daemon():
    """A gpuqd of this module's own: its resident arrays are these tests' only."""
    d = Daemon()
    yield d
    rc = d.stop()
    assert rc == 0, f"gpuqd exited {rc}: {d.log_text()}"


@pytest.fixture
def c(daemon):
    with gpuq.connect(daemon.path, name="resident") as cl:
        yield cl
        for a in cl.list():  # each test starts with none
            cl.remove(a["name"])
    assert daemon.alive()


@pytest.fixture
def s(daemon):
    """A client that never uses arenas."""
    with gpuq.connect(daemon.path, name="resident-socket", transport="socket") as cl:
        yield cl


CASES = [((1000,), np.float32), ((1000,), np.float64), ((37, 11), np.float32),
         ((37, 11), np.float64), ((1, 1), np.float64), ((600, 512), np.float32)]  # 1.2 MB: staged


@pytest.mark.parametrize("shape,dt", CASES)
def test_put_get_round_trip(c, s, shape, dt):
    x = (RNG.standard_normal(shape) * 1e3).astype(dt)
    x.flat[0] = np.nan  # bytes, not numbers: a NaN comes back as it went
    for cl, name in ((c, "rt"), (s, "rt-socket")):
        info = cl.put(name, x)
        assert info["name"] == name and info["bytes"] == x.nbytes and not info["replaced"]
        assert info["dtype"] == gpuq._convert.NAME[np.dtype(dt)] and info["shape"] == list(shape)
        for other in (c, s):  # any connection reads it
            got = other.get(name)
            assert same(got, x)
    assert c.in_arena(c.asarray(x))
    info = c.put("rt-arena", c.asarray(x))  # an arena array: by reference
    assert same(s.get("rt-arena"), x)


def test_list_shows_them(c, s):
    x = RNG.random((3, 4)).astype(np.float32)
    c.put("list-b", x, access="all")
    c.put("list-a", np.arange(5.0))
    got = {a["name"]: a for a in s.list()}
    assert [a["name"] for a in c.list()] == ["list-a", "list-b"]  # sorted by name
    a, b = got["list-a"], got["list-b"]
    assert (a["owner"], a["access"], a["dtype"], a["shape"], a["bytes"]) == \
        (os.getuid(), "private", "f64", [5], 40)
    assert (b["owner"], b["access"], b["dtype"], b["shape"], b["bytes"]) == \
        (os.getuid(), "all", "f32", [3, 4], 48)
    assert a["device"] == (-1 if c.backend == "cpu" else c.device) and a["users"] == 0
    assert a["persist"] is False and b["persist"] is False  # this gpuqd has no state directory


def test_remove_then_not_found(c):
    c.put("gone", [1.0, 2.0])
    assert c.remove("gone") == {"name": "gone", "bytes": 16}
    for call in (lambda: c.get("gone"), lambda: c.remove("gone"),
                 lambda: c.knn([[1.0, 2.0]], c.resident("gone"), 1),
                 lambda: c.put("copy", c.resident("gone"))):
        with pytest.raises(gpuq.NotFoundError) as ei:
            call()
        assert ei.value.code == -28 and ei.value.name == "not_found"
    assert c.list() == []
    assert c.ping() >= 0  # the session goes on


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_knn_against_resident_equals_carried(c, s, dt):
    base = RNG.random((3000, 24)).astype(dt)
    q = RNG.random((70, 24)).astype(dt)
    c.put("base", base)
    for metric in ("euclidean", "cosine", "cityblock"):
        ref = s.knn(q, base, 9, metric=metric)
        assert same(s.knn(q, s.resident("base"), 9, metric=metric), ref), metric
        assert same(c.knn(c.asarray(q), c.resident("base"), 9, metric=metric), ref), metric
        assert same(s.pairwise(q, s.resident("base"), metric=metric),
                    s.pairwise(q, base, metric=metric)), metric
    # queries resident too: the result's shape from the reply
    c.put("q", q)
    assert same(s.knn(s.resident("q"), s.resident("base"), 4), s.knn(q, base, 4))
    assert same(s.normalize(s.resident("q"), "zscore"), s.normalize(q, "zscore"))
    # a carried input of another dtype: converted by dtype=, else gpuqd refuses
    other = np.float64 if dt == np.float32 else np.float32
    with pytest.raises(gpuq.BadDtypeError):
        s.knn(q.astype(other), s.resident("base"), 3)
    qo = q.astype(other)
    assert same(s.knn(qo, s.resident("base"), 3, dtype=dt), s.knn(qo.astype(dt), base, 3))


def test_kept_outputs_equal_carried(c, s):
    x = RNG.random((500, 16)) + 0.1
    q = RNG.random((40, 16)) + 0.1
    assert c.normalize(x, "l2", out=c.resident("nb")) is None
    nb = s.normalize(x, "l2")
    assert same(c.get("nb"), nb)
    ref = s.knn(q, nb, 5)
    assert same(s.knn(q, s.resident("nb"), 5), ref)
    assert same(c.knn(c.asarray(q), c.resident("nb"), 5), ref)
    # knn keeping its indices, returning its distances; then both kept
    d, i = s.knn(q, s.resident("nb"), 5, out=(None, s.resident("idx")), access="all")
    assert i is None and same(d, ref[0])
    assert same(s.get("idx"), ref[1])
    assert s.knn(q, s.resident("nb"), 5, out=(s.resident("kd"), s.resident("ki"))) == (None, None)
    assert same((s.get("kd"), s.get("ki")), ref)
    listed = {a["name"]: a for a in s.list()}
    assert listed["idx"]["dtype"] == "i64" and listed["idx"]["access"] == "all"
    assert listed["nb"]["access"] == "private"
    # through the arena client, the output kept, the input an arena array
    assert c.normalize(c.asarray(x), "minmax", out=c.resident("mm")) is None
    assert same(s.get("mm"), s.normalize(x, "minmax"))
    # an output name also an input of the request: gpuqd refuses
    with pytest.raises(gpuq.BadArgumentError):
        s.normalize(s.resident("nb"), out=s.resident("nb"))


def test_put_replaces(c, s):
    a, b = RNG.random(10), RNG.random((4, 4)).astype(np.float32)
    assert c.put("r", a)["replaced"] is False
    info = s.put("r", b, access="all")
    assert info["replaced"] is True and info["dtype"] == "f32" and info["shape"] == [4, 4]
    assert same(c.get("r"), b)
    (entry,) = [e for e in c.list() if e["name"] == "r"]
    assert entry["access"] == "all" and entry["bytes"] == 64
    assert c.put("r2", c.resident("r"))["bytes"] == 64  # a copy of a resident array
    assert same(s.get("r2"), b)


def test_bad_names(c):
    x = np.ones(2)
    for name, why in BAD_NAMES:
        with pytest.raises(gpuq.BadArgumentError) as ei:
            c.put(name, x)
        assert ei.value.message == f"name: {why}"
        # gpuqd's own check, past the client's: the same class and message
        with pytest.raises(gpuq.BadArgumentError) as ei:
            c.request("put", x.tobytes(), name=name, dtype="f64", shape=[2])
        assert ei.value.message == f"name: {why}", name
        with pytest.raises(gpuq.BadArgumentError) as ei:
            c.request("knn", x.tobytes(), dtype="f64", shape=[1, 2], metric="euclidean", k=1,
                      **{"in": [None, name]})
        assert ei.value.message == f"in[1]: {why}", name
    # not UTF-8: msgpack cannot send it from Python; gpuqd's answer to such bytes
    bad = b"\x81\xa4name\xa2\xc3\x28"  # {"name": "\xc3\x28"} (a cut sequence)
    head = msgpack.packb({"id": 99, "op": "get"})
    hdr = bytes([head[0] + 1]) + head[1:] + bad[1:]
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(c.path)
    sock.settimeout(20)
    hello = msgpack.packb({"id": 1, "op": "hello", "version": 1})
    for h in (hello, hdr):
        sock.sendall(PREFIX.pack(b"GPUQ", 1, 1, 0, len(h), 0) + h)
    replies = []
    data = b""
    while len(replies) < 2:
        data += sock.recv(1 << 16)
        while len(data) >= 20 and len(data) >= 20 + PREFIX.unpack_from(data)[4]:
            hl = PREFIX.unpack_from(data)[4]
            replies.append(msgpack.unpackb(data[20:20 + hl]))
            data = data[20 + hl:]
    sock.close()
    assert replies[1]["error"] == "bad_header" and replies[1]["id"] == 99
    assert replies[1]["message"] == '"name" is not valid UTF-8'
    for name in GOOD_NAMES:
        assert c.put(name, x)["name"] == name
        assert same(c.get(name), x)
    assert sorted(a["name"] for a in c.list()) == sorted(GOOD_NAMES)


def test_aio(daemon, s):
    base = RNG.random((800, 8)).astype(np.float32)
    q = RNG.random((30, 8)).astype(np.float32)

    async def main():
        async with gpuq.aio.connect(daemon.path, name="resident-aio") as c:
            info = await c.put("aio-base", base)
            assert info["bytes"] == base.nbytes and info["shape"] == [800, 8]
            assert same(await c.get("aio-base"), base)
            ref = s.knn(q, base, 6)
            got = await asyncio.gather(*(c.knn(q, c.resident("aio-base"), 6) for _ in range(20)))
            assert all(same(g, ref) for g in got)
            assert same(await c.knn(await c.asarray(q), c.resident("aio-base"), 6), ref)
            d, i = await c.knn(q, c.resident("aio-base"), 6, out=(None, c.resident("aio-i")))
            assert same(d, ref[0]) and i is None
            assert same(await c.get("aio-i"), ref[1])
            assert [a["name"] for a in await c.list()] == ["aio-base", "aio-i"]
            assert (await c.remove("aio-base"))["bytes"] == base.nbytes
            await c.remove("aio-i")
            with pytest.raises(gpuq.NotFoundError):
                await c.get("aio-base")
    asyncio.run(asyncio.wait_for(main(), 120))


def test_submit_and_doc_examples(c):
    x = RNG.random((20, 3))
    assert c.submit("put", "sub", x).result()["bytes"] == x.nbytes
    assert same(c.submit(c.get, "sub").result(), x)
    futs = [c.submit("knn", x, c.resident("sub"), 2) for _ in range(10)]  # pipelined
    assert all(same(f.result(), c.knn(x, x, 2)) for f in futs)
    for m in ("put", "get"):
        doc = getattr(gpuq.Client, m).__doc__
        test = doctest.DocTestParser().get_doctest(doc, {"c": c, "np": np}, m, None, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.failures == 0 and runner.tries > 0, m
