# SPDX-License-Identifier: Apache-2.0
"""Errors: one class per protocol error name, raised with the server's code
and message, and the daemon (and the session, where the protocol keeps it)
still serving afterwards."""

import asyncio
import concurrent.futures
import os
import re
import select
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import gpuq
from gpuq import errors

from conftest import PKG_ROOT, REPO

BUILTIN = {
    "bad_header": ValueError, "unknown_op": ValueError, "bad_argument": ValueError,
    "bad_dtype": TypeError, "bad_shape": ValueError, "empty": ValueError,
    "out_of_range": ValueError, "zero_norm": ZeroDivisionError, "too_large": ValueError,
    "size_mismatch": ValueError, "timeout": TimeoutError, "closed": ConnectionError,
    "io": ConnectionError, "protocol": ConnectionError, "deadline_exceeded": TimeoutError,
    "cancelled": concurrent.futures.CancelledError, "not_found": LookupError,
    "storage": OSError,
}


def protocol_errors():
    """(code, name) of every row of PROTOCOL.md's error table."""
    with open(os.path.join(REPO, "proto", "PROTOCOL.md")) as f:
        text = f.read()
    sec = text[text.index("## 5. Error codes"):text.index("## 6.")]
    return [(int(c), n) for c, n in re.findall(r"^\|\s*(-\d+)\s*\|\s*`(\w+)`", sec, re.M)]


def test_a_class_per_protocol_error():
    rows = protocol_errors()
    assert len(rows) == 29
    for code, name in rows:
        cls = errors.error_class(code)
        assert cls is not gpuq.Error, name
        assert issubclass(cls, gpuq.Error) and cls.code == code and cls.name == name
        camel = "".join(w.capitalize() for w in name.split("_")) + "Error"
        assert getattr(gpuq, camel if name != "io" else "IoError") is cls, camel
        assert errors.error_class(name=name) is cls
        if name in BUILTIN:
            assert issubclass(cls, BUILTIN[name])
        e = errors.from_reply({"id": 7, "status": "error", "error": name, "message": "m"})
        assert type(e) is cls and e.code == code and e.request_id == 7 and str(e) == f"{name}: m"
    e = errors.from_reply({"id": 1, "status": "error", "code": -99, "error": "later",
                           "message": "x"})
    assert type(e) is gpuq.Error and e.code == -99 and e.name == "later"
    assert issubclass(gpuq.ConnectError, gpuq.Error) and issubclass(gpuq.ConnectError,
                                                                    ConnectionError)


def test_deadline_and_cancelled_classes():
    d, c = gpuq.DeadlineExceededError, gpuq.CancelledError
    assert (d.code, d.name, c.code, c.name) == (-26, "deadline_exceeded", -27, "cancelled")
    assert issubclass(d, TimeoutError) and not issubclass(d, gpuq.TimeoutError)
    # an Exception (concurrent.futures'), never asyncio's: a server's "cancelled"
    # must not look like the awaiting task being cancelled
    assert issubclass(c, concurrent.futures.CancelledError) and issubclass(c, Exception)
    assert not issubclass(c, asyncio.CancelledError)
    for cls in (d, c):
        assert cls.__module__ == "gpuq" and cls.__doc__
        assert cls.__name__ in gpuq.__all__ and cls.__name__ in errors.__all__


def test_storage_error_class():
    st = gpuq.StorageError
    assert (st.code, st.name) == (-29, "storage") and errors.error_class(-29) is st
    assert issubclass(st, OSError) and issubclass(st, gpuq.Error)
    assert not issubclass(st, ConnectionError)  # not the connection's fault: it goes on
    assert st.__module__ == "gpuq" and st.__doc__ and "persist" in st.__doc__
    assert st.__name__ in gpuq.__all__ and st.__name__ in errors.__all__
    e = errors.from_reply({"id": 3, "status": "error", "code": -29, "error": "storage",
                           "message": "disk full"})
    assert type(e) is st and str(e) == "storage: disk full" and e.errno is None


def test_errors_pickle():
    import pickle
    e = pickle.loads(pickle.dumps(gpuq.ZeroNormError("row 0", request_id=4)))
    assert type(e) is gpuq.ZeroNormError and e.request_id == 4 and e.message == "row 0"


def test_server_errors_keep_the_session(client):
    cases = [
        (gpuq.ZeroNormError, lambda: client.normalize([0.0, 0.0])),
        (gpuq.EmptyError, lambda: client.normalize(np.empty((0,)))),
        (gpuq.EmptyError, lambda: client.grid(lat=(0, 1, 0))),
        (gpuq.OutOfRangeError, lambda: client.haversine([[91.0, 0.0]], to=(0, 0))),
        (gpuq.OutOfRangeError, lambda: client.haversine([[np.nan, 0.0]], to=(0, 0))),
        (gpuq.OutOfRangeError, lambda: client.haversine([[1.0, 0.0]], to=(95, 0))),
        (gpuq.OutOfRangeError, lambda: client.normalize(np.array([1e300, -1e300, 1e-300]))),
        (gpuq.BadArgumentError, lambda: client.knn([[0.0]], [[1.0]], 2)),
        (gpuq.UnknownOpError, lambda: client.request("no_such_op")),
        (gpuq.BadHeaderError, lambda: client.request("ping", bogus=1)),
        (gpuq.BadArgumentError, lambda: client.request("ping", method="sum")),
        (gpuq.BadDtypeError, lambda: client.request("normalize", b"\0" * 8, dtype="i32",
                                                    shape=[2])),
        (gpuq.BadShapeError, lambda: client.request("pairwise", b"\0" * 40, dtype="f64",
                                                    shape=[1, 2], shape_b=[1, 3],
                                                    metric="euclidean")),
        (gpuq.SizeMismatchError, lambda: client.request("normalize", b"\0" * 16, dtype="f64",
                                                        shape=[3])),
        (gpuq.BadArgumentError, lambda: client.request("hello", version=1)),  # a second hello
    ]
    for cls, call in cases:
        with pytest.raises(cls) as ei:
            call()
        e = ei.value
        assert type(e) is cls and e.code == cls.code and e.name == cls.name and e.message
        assert e.request_id and e.request_id > 0
        assert client.ping() >= 0, cls  # the session goes on
    np.testing.assert_allclose(client.normalize([1.0, 3.0]), [0.25, 0.75])
    st = client.status()
    assert st["errors"]["zero_norm"] >= 1


def test_error_in_a_pipeline(client):
    futs = [client.submit("normalize", [1.0, 1.0]), client.submit("normalize", [0.0, 0.0]),
            client.submit("normalize", [1.0, 3.0])]
    assert futs[2].result().tolist() == [0.25, 0.75]
    assert isinstance(futs[1].exception(), gpuq.ZeroNormError)
    with pytest.raises(gpuq.ZeroNormError):
        futs[1].result()
    assert futs[0].result().tolist() == [0.5, 0.5]


def test_too_large_output_keeps_session(make_daemon):
    d = make_daemon("--max-output", "1K")
    with gpuq.connect(d.path) as c:
        assert c.limits["max_output"] == 1024
        with pytest.raises(gpuq.TooLargeError, match="over max_output 1024"):
            c.grid(lat=(0, 1, 100), lon=(0, 1, 100))
        with pytest.raises(gpuq.TooLargeError):  # the server's own check
            c.request("grid", lat=[0, 1, 100], lon=[0, 1, 100])
        assert c.grid(lat=(0, 1, 4), lon=(0, 1, 4)).shape == (4, 4)


def test_too_large_payload(make_daemon):
    d = make_daemon("--max-payload", "1K")
    with gpuq.connect(d.path, transport="socket") as c:
        # refused before sending, as gpuqd would: the connection stays
        with pytest.raises(gpuq.TooLargeError, match="over max_payload 1024"):
            c.normalize(np.ones(1000))
        assert c.normalize(np.ones(100)).tolist() == [0.01] * 100
        # sent anyway (raw): gpuqd refuses, then closes the connection
        with pytest.raises(gpuq.TooLargeError):
            c.request("normalize", b"\0" * 8000, dtype="f64", shape=[1000])
        with pytest.raises(gpuq.ClosedError):
            c.ping()
    with gpuq.connect(d.path) as c2:  # the daemon serves on
        assert c2.normalize([1.0, 1.0]).tolist() == [0.5, 0.5]


def connect_retry(path, seconds=10):
    """gpuq.connect, retried while gpuqd still counts a session that just closed."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return gpuq.connect(path)
        except gpuq.BusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_busy_over_max_sessions(make_daemon):
    d = make_daemon("--max-sessions", "1")
    with connect_retry(d.path) as c:  # the fixture's probe may still count
        with pytest.raises(gpuq.BusyError, match="sessions open") as ei:
            gpuq.connect(d.path)
        assert ei.value.code == -13
        assert c.ping() >= 0
    with connect_retry(d.path) as c:
        assert c.ping() >= 0


def test_no_hello_and_version(gpuqd):
    s = socket.socket(socket.AF_UNIX)
    s.connect(gpuqd.path)
    c = gpuq.Client(s, gpuqd.path)  # no hello said
    with pytest.raises(gpuq.NoHelloError):
        c.request("ping")
    with pytest.raises(gpuq.VersionError):
        c.request("hello", version=2)
    hdr, _ = c.request("hello", version=1, client="raw")
    assert hdr["info"]["version"] == 1
    c.request("ping")
    c.close()




def test_bad_prefix_is_protocol_error(gpuqd):
    with gpuq.connect(gpuqd.path) as c:
        c._sock.sendall(b"XPUQ" + bytes(16))  # a broken frame, as a broken client would send
        with pytest.raises(gpuq.ProtocolError):
            c.ping()
        with pytest.raises((gpuq.ProtocolError, gpuq.ClosedError)):
            c.ping()
    with gpuq.connect(gpuqd.path) as c:
        assert c.ping() >= 0


def test_server_timeout(make_daemon):
    d = make_daemon("--hello-timeout", "1")
    s = socket.socket(socket.AF_UNIX)
    s.connect(d.path)
    c = gpuq.Client(s, d.path)
    # Once gpuqd's timeout reply is there (not after a fixed sleep: a loaded
    # machine may fire the timer late, and the hello would then be in time).
    assert select.select([s], [], [], 60)[0], "no timeout reply within 60 s"
    with pytest.raises((gpuq.TimeoutError, gpuq.ClosedError)) as ei:
        c.request("hello", version=1)
    assert isinstance(ei.value, gpuq.TimeoutError), ei.value  # the reply gpuqd left is read
    assert "hello" in ei.value.message
    c.close()


def test_future_timeout(make_daemon):
    d = make_daemon()
    with gpuq.connect(d.path) as c:
        # the last of four in one session's order: an H200 runs one such grid
        # in about as long as submit takes to return, so one alone could be in
        fs = [c.submit("grid", lat=(-80, 80, 3000), lon=(-180, 180, 3000)) for _ in range(4)]
        with pytest.raises(gpuq.TimeoutError, match="still in flight"):
            fs[-1].result(timeout=0.0001)
        for f in fs:
            assert f.result(timeout=60).shape == (3000, 3000)


def test_shutting_down(make_daemon):
    d = make_daemon()
    a = gpuq.connect(d.path, transport="socket")
    b = gpuq.connect(d.path)
    # Replies of 72 MB that a does not read yet keep its session (and the
    # daemon) up after the shutdown, on any backend.
    big = [a.submit("grid", lat=(-80, 80, 3000), lon=(-180, 180, 3000)) for _ in range(2)]
    # Both accepted before the shutdown (else a loaded machine may see it
    # first and refuse them); their unread replies keep them in flight.
    deadline = time.monotonic() + 60
    while b.status()["in_flight"] < 2:
        assert time.monotonic() < deadline, b.status()
        time.sleep(0.01)
    info = b.shutdown()
    assert "sessions" in info
    with pytest.raises(gpuq.ShuttingDownError):
        a.ping()  # sent after the shutdown: refused
    for f in big:  # what was accepted is answered
        assert f.result().shape == (3000, 3000)
    a.close()
    b.close()
    d.proc.wait(30)
    assert d.proc.returncode == 0


def as_nobody_ok() -> bool:
    """Whether a process of user nobody can import the package from the tree."""
    r = subprocess.run([sys.executable, "-c", "import gpuq"], capture_output=True,
                       env=dict(os.environ, PYTHONPATH=PKG_ROOT), user=65534, group=65534,
                       timeout=60)
    return r.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")
def test_permission_denied_for_non_admin(make_daemon):
    if not as_nobody_ok():
        pytest.skip(f"user nobody cannot read {PKG_ROOT}")
    d = make_daemon(socket_mode="0666")
    os.chmod(d.dir, 0o755)
    code = ("import gpuq, sys\n"
            "c = gpuq.connect(sys.argv[1])\n"
            "assert not c.info['admin']\n"
            "try:\n    c.shutdown()\nexcept gpuq.PermissionDeniedError as e:\n"
            "    print('denied', e.code, e.message); c.ping(); sys.exit(0)\n"
            "sys.exit(1)\n")
    r = subprocess.run([sys.executable, "-c", code, d.path], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PKG_ROOT), user=65534, group=65534,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("denied -18")
    assert d.alive()
