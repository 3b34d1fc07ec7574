# SPDX-License-Identifier: Apache-2.0
"""Resident arrays that persist (PROTOCOL.md 3.5, Persistence): put and kept
outputs with persist=True survive a restart of gpuqd on the same state
directory; without one, persist is StorageError; list() says which persist.
(test_resident.py has the rest of resident arrays.)"""

import asyncio
import os

import numpy as np
import pytest

import gpuq
import gpuq.aio

from test_resident import RNG, same


# ---- persistence, against a gpuqd with a state directory ----

def state_files(d):
    """The array files in d's state directory (their names are gpuqd's)."""
    return sorted(f for f in os.listdir(d.state_dir) if f.endswith(".gpuqa"))


def test_persisted_put_survives_a_restart(state_daemon):
    d = state_daemon()
    arrays = {
        "p-f32": (RNG.standard_normal((37, 11)) * 1e3).astype(np.float32),
        "p-f64": RNG.standard_normal(1000),
        "p-big": RNG.random((600, 512)).astype(np.float32),  # 1.2 MB: staged
        "p-日本": np.array([[np.nan, -0.0, np.inf]]),  # bytes, not numbers
    }
    plain = RNG.random(5)
    with gpuq.connect(d.path, deadline_ms=60000) as c, \
            gpuq.connect(d.path, transport="socket", deadline_ms=60000) as s:
        for k, (name, x) in enumerate(arrays.items()):
            cl = (c, s)[k % 2]
            info = cl.put(name, x, "all" if k == 1 else "private", True)
            assert info["bytes"] == x.nbytes and info["replaced"] is False
        c.put("p-arena", c.asarray(arrays["p-f64"]), persist=True)  # by arena reference
        c.put("plain", plain)
        assert len(state_files(d)) == len(arrays) + 1  # one file per persisted array
        before = {a["name"]: a for a in c.list()}
    d.restart()
    with gpuq.connect(d.path, deadline_ms=60000) as c:
        after = {a["name"]: a for a in c.list()}
        assert sorted(after) == sorted(list(arrays) + ["p-arena"])  # "plain" is gone
        for name, x in arrays.items():
            assert same(c.get(name), x), name
            for key in ("owner", "access", "dtype", "shape", "bytes", "device"):
                assert after[name][key] == before[name][key], (name, key)
            assert after[name]["persist"] is True
        assert after["p-f64"]["access"] == "all"
        assert same(c.get("p-arena"), arrays["p-f64"])
        with pytest.raises(gpuq.NotFoundError):
            c.get("plain")
        # usable as any resident array, and removed for good (its file too)
        q = RNG.random((3, 11)).astype(np.float32)
        assert same(c.knn(q, c.resident("p-f32"), 4), c.knn(q, arrays["p-f32"], 4))
        assert c.remove("p-big")["bytes"] == arrays["p-big"].nbytes
        assert len(state_files(d)) == len(arrays)
    d.restart()
    with gpuq.connect(d.path) as c:
        assert "p-big" not in {a["name"] for a in c.list()}
        assert same(c.get("p-日本"), arrays["p-日本"])


def test_persisted_knn_output_survives_a_restart(state_daemon):
    d = state_daemon()
    base = RNG.random((2000, 16)).astype(np.float32)
    q = RNG.random((50, 16)).astype(np.float32)
    with gpuq.connect(d.path, transport="socket", deadline_ms=60000) as s:
        ref = s.knn(q, base, 7, metric="cosine")
        s.put("base", base)  # not persisted: gone after the restart
        assert s.knn(q, s.resident("base"), 7, metric="cosine",
                     out=(s.resident("kd"), s.resident("ki")), persist=True) == (None, None)
        d1, i1 = s.knn(q, s.resident("base"), 7, metric="cosine",
                       out=(None, s.resident("ki-only")), persist=True, access="all")
        assert same(d1, ref[0]) and i1 is None
        assert s.normalize(base, "l2", out=s.resident("nb"), persist=True) is None
        nb = s.normalize(base, "l2")
        assert s.get("kd", out=s.resident("kd-copy"), persist=True) is None
        listed = {a["name"]: a["persist"] for a in s.list()}
        assert listed == {"base": False, "kd": True, "ki": True, "ki-only": True, "nb": True,
                          "kd-copy": True}
    d.restart()
    with gpuq.connect(d.path, deadline_ms=60000) as c:
        got = {a["name"]: a for a in c.list()}
        assert sorted(got) == ["kd", "kd-copy", "ki", "ki-only", "nb"]
        assert got["ki"]["dtype"] == "i64" and got["ki-only"]["access"] == "all"
        assert same((c.get("kd"), c.get("ki")), ref)
        assert same(c.get("ki-only"), ref[1]) and same(c.get("kd-copy"), ref[0])
        assert same(c.get("nb"), nb)
        assert same(c.knn(q, c.resident("nb"), 3), c.knn(q, nb, 3))


def test_persist_without_a_state_directory(state_daemon):
    d = state_daemon(state_dir="")  # gpuqd --state-dir '': persistence off
    x = RNG.random((4, 3))
    with gpuq.connect(d.path, deadline_ms=60000) as c:
        c.put("kept", x)  # without persist: fine
        y = RNG.random((4, 3))
        calls = [
            lambda: c.put("new", x, persist=True),
            lambda: c.put("kept", y, persist=True),  # replacing: the old one stays
            lambda: c.put("copy", c.resident("kept"), persist=True),
            lambda: c.normalize(x, out=c.resident("n"), persist=True),
            lambda: c.knn(x, c.resident("kept"), 2, out=(None, c.resident("i")), persist=True),
            lambda: c.get("kept", out=c.resident("copy"), persist=True),
        ]
        for call in calls:
            with pytest.raises(gpuq.StorageError, match="no state directory") as ei:
                call()
            e = ei.value
            assert e.code == -29 and e.name == "storage" and isinstance(e, OSError)
            assert c.ping() >= 0  # the session goes on
        assert [(a["name"], a["persist"]) for a in c.list()] == [("kept", False)]
        assert same(c.get("kept"), x)
        # a request that keeps nothing: persist is ignored
        assert same(c.normalize(x, persist=True), c.normalize(x))


def test_list_shows_persist(state_daemon):
    d = state_daemon()
    with gpuq.connect(d.path, deadline_ms=60000) as c:
        c.put("a", np.ones(3), persist=True)
        c.put("b", np.ones(3))
        c.grid((0, 1, 4), (0, 1, 4), out=c.resident("g"), persist=True)
        assert [(e["name"], e["persist"]) for e in c.list()] == \
            [("a", True), ("b", False), ("g", True)]
        assert len(state_files(d)) == 2
        # replaced without persist: the file goes, and so does the array at a restart
        assert c.put("a", np.zeros(2))["replaced"] is True
        c.put("b", np.zeros(2), persist=True)
        assert [(e["name"], e["persist"]) for e in c.list()] == \
            [("a", False), ("b", True), ("g", True)]
        assert len(state_files(d)) == 2
    d.restart()
    with gpuq.connect(d.path) as c:
        assert [(e["name"], e["persist"]) for e in c.list()] == [("b", True), ("g", True)]
        assert same(c.get("b"), np.zeros(2))


def test_aio_persist(state_daemon):
    d = state_daemon()
    x = RNG.random((30, 8)).astype(np.float32)

    async def put():
        async with gpuq.aio.connect(d.path, name="resident-aio") as c:
            assert (await c.put("aio-p", x, persist=True))["bytes"] == x.nbytes
            assert await c.normalize(x, out=c.resident("aio-n"), persist=True) is None
            return [(a["name"], a["persist"]) for a in await c.list()]

    async def get():
        async with gpuq.aio.connect(d.path, name="resident-aio") as c:
            return await c.get("aio-p"), await c.get("aio-n")

    assert asyncio.run(asyncio.wait_for(put(), 60)) == [("aio-n", True), ("aio-p", True)]
    d.restart()
    got, n = asyncio.run(asyncio.wait_for(get(), 60))
    assert same(got, x) and n.shape == x.shape and n.dtype == np.float32
