# SPDX-License-Identifier: Apache-2.0
"""Fixtures: a real gpuqd on a temporary socket.

The daemon is $GPUQD (ctest passes the build's), else build/server/gpuqd in
the repository (gpuqctl likewise $GPUQCTL, else build/client/cli/gpuqctl); its backend is $GPUQ_TEST_DEVICE (cpu by default; ctest's
gpu-labelled run says cuda). Without a GPU a cuda run exits 77 (ctest:
skipped) unless GPUQ_REQUIRE_GPU=1, like the C end-to-end suites.
Each daemon is stopped with SIGTERM at teardown and must exit 0. A daemon
has no state directory (--state-dir '': persist refused) unless a test
gives it one (state_daemon: a tmp_path it can restart on), so that no test
writes into /var/lib/gpuq.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PKG_ROOT))
sys.path.insert(0, PKG_ROOT)  # the package from the tree, not an installed one

GPUQD = os.environ.get("GPUQD") or os.path.join(REPO, "build", "server", "gpuqd")
# gpuqctl, whose diagnoses the Python client's must equal (test_socket_search)
GPUQCTL = os.environ.get("GPUQCTL") or os.path.join(REPO, "build", "client", "cli", "gpuqctl")
DEVICE = os.environ.get("GPUQ_TEST_DEVICE", "cpu")


def pytest_sessionstart(session):
    if DEVICE != "cpu" and os.environ.get("GPUQ_REQUIRE_GPU") != "1" and \
            not os.path.exists("/dev/nvidiactl"):
        sys.stderr.write("no GPU (/dev/nvidiactl) and GPUQ_REQUIRE_GPU!=1: skipped (exit 77)\n")
        sys.stderr.flush()
        os._exit(77)
    if not os.access(GPUQD, os.X_OK):
        pytest.exit(f"no gpuqd at {GPUQD} (build it, or set GPUQD)", returncode=2)


class Daemon:
    """One gpuqd process on its own socket."""

    def __init__(self, args=(), config: str = None, socket_mode: str = None,
                 state_dir: str = ""):
        self.dir = tempfile.mkdtemp(prefix="gpuq-py-")
        self.path = os.path.join(self.dir, "gpuqd.sock")
        self.log = os.path.join(self.dir, "gpuqd.log")
        self.state_dir = state_dir
        cmd = [GPUQD, "--device", DEVICE, "--socket", self.path, "--log-level", "warn",
               "--state-dir", state_dir]
        if config is not None:
            cfg = os.path.join(self.dir, "gpuqd.conf")
            with open(cfg, "w") as f:
                f.write(config)
            cmd += ["--config", cfg]
        if socket_mode is not None:
            cmd += ["--socket-mode", socket_mode]
        cmd += list(args)
        self.cmd = cmd
        self._logf = open(self.log, "wb")
        self._start()

    def _start(self) -> None:
        """Start self.cmd and wait until its socket accepts a connection."""
        self.proc = subprocess.Popen(self.cmd, stdout=self._logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gpuqd exited {self.proc.returncode}: {self.log_text()}")
            if os.path.exists(self.path):
                s = socket.socket(socket.AF_UNIX)
                try:
                    s.connect(self.path)
                    break
                except OSError:
                    pass
                finally:
                    s.close()
            if time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"gpuqd did not listen within 30 s: {self.log_text()}")
            time.sleep(0.02)

    def restart(self) -> None:
        """Stop gpuqd (SIGTERM; it must exit 0) and start it again with the same
        arguments: the same socket, config and state directory. Its log goes
        on in the same file."""
        rc = self.stop()
        assert rc == 0, f"gpuqd exited {rc}: {self.log_text()}"
        # the old socket file may outlive the process: wait for the new one
        # (a connection to a stale file is refused, so _start does not take it)
        self._logf = open(self.log, "ab")
        self._start()

    def log_text(self) -> str:
        if not self._logf.closed:  # closed once stopped
            self._logf.flush()
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("gpuqd did not exit within 30 s of SIGTERM")
        self._logf.close()
        return self.proc.returncode

    def alive(self) -> bool:
        return self.proc.poll() is None


@pytest.fixture(scope="session")
def gpuqd():
    """The shared daemon (default settings)."""
    d = Daemon()
    yield d
    rc = d.stop()
    assert rc == 0, f"gpuqd exited {rc}: {d.log_text()}"


@pytest.fixture
def make_daemon():
    """A factory of daemons with their own settings, stopped after the test."""
    made = []

    def make(*args, **kw):
        d = Daemon(args, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        rc = d.stop()
        assert rc == 0, f"gpuqd {d.path} exited {rc}: {d.log_text()}"


@pytest.fixture
def state_daemon(tmp_path):
    """A factory of daemons with a state directory (--state-dir; default a
    fresh folder of tmp_path), for persist: d.restart() stops one and starts
    it again on the same socket and state directory. Stopped after the
    test; each must exit 0."""
    made = []

    def make(*args, state_dir: str = None, **kw):
        if state_dir is None:  # gpuqd never makes its state directory
            state_dir = str(tmp_path / f"state{len(made)}")
            os.makedirs(state_dir)
        d = Daemon(args, state_dir=state_dir, **kw)
        made.append(d)
        return d

    yield make
    for d in made:
        rc = d.stop()
        assert rc == 0, f"gpuqd {d.path} exited {rc}: {d.log_text()}"


@pytest.fixture
def client(gpuqd):
    import gpuq
    with gpuq.connect(gpuqd.path, name="pytest") as c:
        yield c
    assert gpuqd.alive()


@pytest.fixture
def sock_client(gpuqd):
    """A client that never uses arenas (the reference transport)."""
    import gpuq
    with gpuq.connect(gpuqd.path, name="pytest-socket", transport="socket") as c:
        yield c
