"""Finding gpuqd's socket as libgpuq does, and saying why when none answers."""

import errno
import os
import socket
import subprocess
import sys
import tempfile

import pytest

import gpuq
from gpuq import _socketpath

from conftest import PKG_ROOT


def test_candidates_order():
    c = _socketpath.candidates
    assert c({"GPUQ_SOCKET": "/x/s.sock", "XDG_RUNTIME_DIR": "/run/user/7"}) == ["/x/s.sock"]
    assert c({"GPUQ_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/7"}) == [
        "/run/user/7/gpuq/gpuqd.sock", "/run/gpuq/gpuqd.sock"]
    assert c({"XDG_RUNTIME_DIR": ""}) == ["/run/gpuq/gpuqd.sock"]
    assert c({}) == ["/run/gpuq/gpuqd.sock"]


def test_gpuq_socket_alone(gpuqd, monkeypatch):
    monkeypatch.setenv("GPUQ_SOCKET", gpuqd.path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/nonexistent-xdg")
    with gpuq.connect() as c:
        assert c.path == gpuqd.path and c.ping() >= 0
    # set but dead: only it is tried (the next step is named)
    monkeypatch.setenv("GPUQ_SOCKET", gpuqd.path + ".none")
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect()
    e = ei.value
    assert [p for p, _, _ in e.attempts] == [gpuqd.path + ".none"]
    assert "$GPUQ_SOCKET" in str(e) and "no such file" in str(e)
    assert "systemctl start gpuqd.socket" in str(e) and "`gpuqd`" in str(e)
    assert isinstance(e, ConnectionError) and isinstance(e, gpuq.Error)


def test_xdg_then_system(gpuqd, monkeypatch):
    with tempfile.TemporaryDirectory() as xdg:
        os.mkdir(os.path.join(xdg, "gpuq"))
        os.symlink(gpuqd.path, os.path.join(xdg, "gpuq", "gpuqd.sock"))
        monkeypatch.delenv("GPUQ_SOCKET", raising=False)
        monkeypatch.setenv("XDG_RUNTIME_DIR", xdg)
        with gpuq.connect() as c:  # the per-user socket answers first
            assert c.path == os.path.join(xdg, "gpuq", "gpuqd.sock")
        os.unlink(os.path.join(xdg, "gpuq", "gpuqd.sock"))
        if os.path.exists(_socketpath.SYSTEM_SOCKET):
            pytest.skip("a system gpuqd socket exists on this machine")
        with pytest.raises(gpuq.ConnectError) as ei:
            gpuq.connect()
        paths = [p for p, _, _ in ei.value.attempts]
        assert paths == [os.path.join(xdg, "gpuq", "gpuqd.sock"), "/run/gpuq/gpuqd.sock"]
        msg = str(ei.value)
        assert "per-user then the system socket" in msg
        for p in paths:
            assert p in msg


def test_system_socket_found_after_xdg(gpuqd, monkeypatch):
    # The fallback to the system path, with the system path pointed at our
    # daemon (the real /run/gpuq is left alone).
    monkeypatch.setattr(_socketpath, "SYSTEM_SOCKET", gpuqd.path)
    monkeypatch.delenv("GPUQ_SOCKET", raising=False)
    with tempfile.TemporaryDirectory() as xdg:
        monkeypatch.setenv("XDG_RUNTIME_DIR", xdg)  # no gpuq/ in it
        with gpuq.connect() as c:
            assert c.path == gpuqd.path


def test_missing_directory():
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect("/nonexistent-gpuq-test-dir/gpuqd.sock")
    msg = str(ei.value)
    assert "the directory /nonexistent-gpuq-test-dir does not exist" in msg
    assert "permission" not in msg
    assert ei.value.attempts[0][1] == errno.ENOENT


def test_stale_socket():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "gpuqd.sock")
        s = socket.socket(socket.AF_UNIX)
        s.bind(p)  # bound, never listening: what a killed daemon leaves
        s.close()
        with pytest.raises(gpuq.ConnectError, match="stale socket") as ei:
            gpuq.connect(p)
        assert ei.value.attempts[0][1] == errno.ECONNREFUSED
        os.unlink(p)
        with open(p, "w"):
            pass
        with pytest.raises(gpuq.ConnectError, match="not a socket"):
            gpuq.connect(p)


def test_permission_denied_message():
    why = _socketpath.diagnose("/run/gpuq/gpuqd.sock", PermissionError(errno.EACCES, "denied"))
    assert "join group gpuq" in why and "usermod -aG gpuq" in why


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another user")
def test_permission_denied_for_real(make_daemon):
    from test_errors import as_nobody_ok
    if not as_nobody_ok():
        pytest.skip(f"user nobody cannot read {PKG_ROOT}")
    d = make_daemon(socket_mode="0600")
    os.chmod(d.dir, 0o755)
    code = ("import gpuq, sys\n"
            "try:\n    gpuq.connect(sys.argv[1])\nexcept gpuq.ConnectError as e:\n"
            "    print(e); sys.exit(0)\n"
            "sys.exit(1)\n")
    r = subprocess.run([sys.executable, "-c", code, d.path], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PKG_ROOT), user=65534, group=65534,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "permission denied: join group gpuq" in r.stdout
