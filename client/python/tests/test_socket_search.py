# SPDX-License-Identifier: Apache-2.0
"""Finding gpuqd's socket as libgpuq does, and saying why when none answers."""

import errno
import os
import socket
import subprocess
import sys

import pytest

import gpuq
from gpuq import _socketpath

from conftest import GPUQCTL, PKG_ROOT


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
    assert str(e) == ("cannot connect to gpuqd at $GPUQ_SOCKET (the only path tried while it "
                      f"is set): {gpuqd.path}.none: no such file; "
                      "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`")
    assert isinstance(e, ConnectionError) and isinstance(e, gpuq.Error)


def test_xdg_then_system(gpuqd, monkeypatch, tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "gpuq").mkdir(parents=True)
    os.symlink(gpuqd.path, xdg / "gpuq" / "gpuqd.sock")
    sysdir = tmp_path / "sys"  # stands for /run/gpuq (the test hook)
    monkeypatch.delenv("GPUQ_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    monkeypatch.setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", str(sysdir))
    with gpuq.connect() as c:  # the per-user socket answers first
        assert c.path == f"{xdg}/gpuq/gpuqd.sock"
    os.unlink(xdg / "gpuq" / "gpuqd.sock")
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect()
    paths = [p for p, _, _ in ei.value.attempts]
    assert paths == [f"{xdg}/gpuq/gpuqd.sock", f"{sysdir}/gpuqd.sock"]
    assert str(ei.value) == (
        f"cannot connect to gpuqd: {xdg}/gpuq/gpuqd.sock: no such file; "
        f"{sysdir}/gpuqd.sock: directory {sysdir} does not exist; "
        "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`")


def test_system_socket_found_after_xdg(gpuqd, monkeypatch, tmp_path):
    # The fall-through to the system path, with the test hook pointing it at
    # our daemon's directory (the real /run/gpuq is left alone).
    monkeypatch.delenv("GPUQ_SOCKET", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no gpuq/ in it
    monkeypatch.setenv("GPUQ_TEST_SYSTEM_SOCKET_DIR", gpuqd.dir)
    with gpuq.connect() as c:
        assert c.path == gpuqd.path
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    with gpuq.connect() as c:
        assert c.path == gpuqd.path


def test_system_dir_hook():
    c = _socketpath.candidates
    assert c({"GPUQ_TEST_SYSTEM_SOCKET_DIR": "/t/s"}) == ["/t/s/gpuqd.sock"]
    assert c({"GPUQ_TEST_SYSTEM_SOCKET_DIR": "", "XDG_RUNTIME_DIR": "/x"}) == [
        "/x/gpuq/gpuqd.sock", "/run/gpuq/gpuqd.sock"]
    assert c({"GPUQ_TEST_SYSTEM_SOCKET_DIR": "/t/s", "GPUQ_SOCKET": "/e.sock"}) == ["/e.sock"]


def test_missing_directory():
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect("/nonexistent-gpuq-test-dir/gpuqd.sock")
    assert str(ei.value) == (
        "cannot connect to gpuqd: /nonexistent-gpuq-test-dir/gpuqd.sock: directory "
        "/nonexistent-gpuq-test-dir does not exist; "
        "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`")
    assert ei.value.attempts[0][1] == errno.ENOENT


def test_stale_socket(tmp_path):
    p = str(tmp_path / "gpuqd.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(p)  # bound, never listening: what a killed daemon leaves
    s.close()
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect(p)
    # a socket that is there but refuses: no "is gpuqd running?" hint
    assert str(ei.value) == (f"cannot connect to gpuqd: {p}: stale socket (no gpuqd listens; "
                             "remove it or restart gpuqd)")
    assert ei.value.attempts[0][1] == errno.ECONNREFUSED
    os.unlink(p)
    open(p, "w").close()
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect(p)
    assert str(ei.value) == f"cannot connect to gpuqd: {p}: not a socket"


def test_path_too_long(tmp_path):
    p = "/tmp/" + "x" * 120 + "/gpuqd.sock"
    with pytest.raises(gpuq.ConnectError) as ei:
        gpuq.connect(p)
    assert str(ei.value) == (f"cannot connect to gpuqd: {p}: path too long for a Unix socket "
                             "(at most 107 bytes)")
    with pytest.raises(gpuq.BadArgumentError, match="socket path too long"):
        gpuq.connect("/tmp/" + "x" * 300)


def test_permission_denied_message():
    why, absent = _socketpath.diagnose("/run/gpuq/gpuqd.sock",
                                       PermissionError(errno.EACCES, "denied"))
    assert why == ("permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, "
                   "then log in again)")
    assert not absent


# ---- the same words as gpuqctl (libgpuq's sockpath.c) ----

def _ctl_message(env, socket=None):
    """What gpuqctl says when it cannot connect, after its 'gpuqctl: io: '."""
    cmd = [GPUQCTL] + (["--socket", socket] if socket else []) + ["ping"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 3, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuqctl: io: "), r.stderr
    return lines[0][len("gpuqctl: io: "):]


def _py_message(env, socket=None):
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        gpuq.connect(socket)
    except gpuq.ConnectError as e:
        return str(e)
    finally:
        os.environ.clear()
        os.environ.update(old)
    raise AssertionError("connected")


@pytest.fixture
def parity_dirs(tmp_path):
    """A layout with every case: xdg/ (no gpuq/ in it), have/gpuq/ (empty),
    stale/gpuq/gpuqd.sock (bound, nobody listens), file/gpuq/gpuqd.sock (a
    regular file), notdir (a file where a directory should be)."""
    for d in ("xdg", "have/gpuq", "stale/gpuq", "file/gpuq"):
        (tmp_path / d).mkdir(parents=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "stale/gpuq/gpuqd.sock"))
    s.close()
    (tmp_path / "file/gpuq/gpuqd.sock").write_text("")
    (tmp_path / "notdir").write_text("")
    return tmp_path


@pytest.mark.skipif(not os.access(GPUQCTL, os.X_OK), reason=f"no gpuqctl at {GPUQCTL}")
@pytest.mark.parametrize("case", [
    "missing_dirs", "missing_socket", "stale_then_missing", "no_xdg", "env_missing",
    "env_missing_dir", "env_stale", "env_not_socket", "env_notdir", "env_too_long",
    "given_missing", "given_stale"])
def test_same_message_as_gpuqctl(parity_dirs, case):
    t = str(parity_dirs)
    base = {k: v for k, v in os.environ.items()
            if k not in ("GPUQ_SOCKET", "XDG_RUNTIME_DIR", "GPUQ_TEST_SYSTEM_SOCKET_DIR")}
    base["GPUQ_TEST_SYSTEM_SOCKET_DIR"] = f"{t}/sys"  # absent
    socket_arg = None
    env = dict(base)
    if case == "missing_dirs":
        env["XDG_RUNTIME_DIR"] = f"{t}/xdg"
    elif case == "missing_socket":
        env["XDG_RUNTIME_DIR"] = f"{t}/have"
        env["GPUQ_TEST_SYSTEM_SOCKET_DIR"] = f"{t}/have/gpuq"
    elif case == "stale_then_missing":
        env["XDG_RUNTIME_DIR"] = f"{t}/stale"
    elif case == "no_xdg":
        pass
    elif case == "env_missing":
        env["XDG_RUNTIME_DIR"] = f"{t}/stale"  # not tried while GPUQ_SOCKET is set
        env["GPUQ_SOCKET"] = f"{t}/have/gpuq/gpuqd.sock"
    elif case == "env_missing_dir":
        env["GPUQ_SOCKET"] = f"{t}/nothere/gpuqd.sock"
    elif case == "env_stale":
        env["GPUQ_SOCKET"] = f"{t}/stale/gpuq/gpuqd.sock"
    elif case == "env_not_socket":
        env["GPUQ_SOCKET"] = f"{t}/file/gpuq/gpuqd.sock"
    elif case == "env_notdir":
        env["GPUQ_SOCKET"] = f"{t}/notdir/gpuqd.sock"
    elif case == "env_too_long":
        env["GPUQ_SOCKET"] = f"{t}/" + "y" * 120 + ".sock"
    elif case == "given_missing":
        env["GPUQ_SOCKET"] = f"{t}/stale/gpuq/gpuqd.sock"  # a given path wins
        socket_arg = f"{t}/have/gpuq/gpuqd.sock"
    elif case == "given_stale":
        socket_arg = f"{t}/stale/gpuq/gpuqd.sock"
    want = _ctl_message(env, socket_arg)
    assert "cannot connect to gpuqd" in want
    assert _py_message(env, socket_arg) == want


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
