# SPDX-License-Identifier: Apache-2.0
"""Finding gpuqd's socket, as libgpuq and gpuqctl do (client/lib/sockpath.c).

``$GPUQ_SOCKET`` alone when it is set and not empty; else
``$XDG_RUNTIME_DIR/gpuq/gpuqd.sock`` (when ``XDG_RUNTIME_DIR`` is set and
not empty), then the system socket ``/run/gpuq/gpuqd.sock``: the first
that accepts a connection is used. When none does, :class:`ConnectError`
says, in libgpuq's words, every path tried, what was wrong there and what
to do: the message is the one gpuqctl prints after ``gpuqctl: io: `` for
the same environment (client/python/tests/test_socket_search.py compares
them).

``GPUQ_TEST_SYSTEM_SOCKET_DIR`` is a test hook, not a setting (as in
proto/socket_path.h): when set and not empty it stands for ``/run/gpuq``,
so tests reach the system path's fall-through without root and without
touching a real ``/run/gpuq``.
"""

from __future__ import annotations

import errno
import os
import socket as _socket
import stat
from typing import List, Mapping, Optional, Tuple

from . import errors

# proto/socket_path.h
SOCKET_ENV = "GPUQ_SOCKET"
SOCKET_FILE = "gpuqd.sock"
SOCKET_USER_SUBDIR = "gpuq"
SYSTEM_SOCKET_DIR = "/run/gpuq"
SYSTEM_SOCKET = SYSTEM_SOCKET_DIR + "/" + SOCKET_FILE
TEST_SYSTEM_SOCKET_DIR_ENV = "GPUQ_TEST_SYSTEM_SOCKET_DIR"

# client/lib/sockpath.h: bytes of one path, NUL included (a longer one is a bad
# argument); sun_path's size (108) less the NUL: the longest a connect takes.
_SOCKPATH_LEN = 256
_SUN_PATH_MAX = 107

_HINT_START = "is gpuqd running? `systemctl start gpuqd.socket` or `gpuqd`"


def system_socket_dir(env: Optional[Mapping[str, str]] = None) -> str:
    """/run/gpuq, unless the test hook GPUQ_TEST_SYSTEM_SOCKET_DIR names
    another directory."""
    env = os.environ if env is None else env
    return env.get(TEST_SYSTEM_SOCKET_DIR_ENV) or SYSTEM_SOCKET_DIR


def candidates(env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The socket paths to try, in order."""
    env = os.environ if env is None else env
    s = env.get(SOCKET_ENV)
    if s:
        return [s]
    paths = []
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        paths.append(f"{xdg}/{SOCKET_USER_SUBDIR}/{SOCKET_FILE}")
    paths.append(f"{system_socket_dir(env)}/{SOCKET_FILE}")
    return paths


def _dir_of(path: str) -> str:
    i = path.rfind("/")
    return "." if i < 0 else "/" if i == 0 else path[:i]


def diagnose(path: str, err: OSError) -> Tuple[str, bool]:
    """What a failed connect to path means, in libgpuq's words
    (sockpath_diagnose), and whether the path was simply absent."""
    e = err.errno
    if e == errno.ENOENT:
        d = _dir_of(path)
        try:
            os.stat(d)
        except FileNotFoundError:
            return f"directory {d} does not exist", True
        except OSError:
            pass
        return "no such file", True
    if e == errno.ENOTDIR:
        return "a parent of it is not a directory", True
    if e == errno.ECONNREFUSED:
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                return "not a socket", False
        except OSError:
            pass
        return "stale socket (no gpuqd listens; remove it or restart gpuqd)", False
    if e in (errno.EACCES, errno.EPERM):
        return ("permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, "
                "then log in again)"), False
    if e == errno.ENAMETOOLONG:
        return f"path too long for a Unix socket (at most {_SUN_PATH_MAX} bytes)", False
    if e:
        return os.strerror(e), False
    return str(err) or type(err).__name__, False  # a timeout (Python's own)


def _connect_one(path: str, timeout: Optional[float]) -> _socket.socket:
    if len(os.fsencode(path)) > _SUN_PATH_MAX:
        raise OSError(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(None)
    except BaseException:
        s.close()
        raise
    return s


def open_socket(path: Optional[str] = None, timeout: Optional[float] = None,
                env: Optional[Mapping[str, str]] = None) -> Tuple[_socket.socket, str]:
    """A connected socket and its path: path itself when given, else the
    first candidate that answers. Raises ConnectError naming every try
    (BadArgumentError for a path longer than libgpuq takes)."""
    envmap = os.environ if env is None else env
    from_env = path is None and bool(envmap.get(SOCKET_ENV))
    paths = [os.fspath(path)] if path is not None else candidates(envmap)
    for p in paths:
        if len(os.fsencode(p)) >= _SOCKPATH_LEN:
            raise errors.BadArgumentError(f"socket path too long: {p[:200]}...")
    tried: List[Tuple[str, int, str]] = []
    all_absent = True
    for p in paths:
        try:
            return _connect_one(p, timeout), p
        except OSError as e:
            why, absent = diagnose(p, e)
            all_absent = all_absent and absent
            tried.append((p, e.errno or 0, why))
    head = (f"cannot connect to gpuqd at ${SOCKET_ENV} (the only path tried while it is set): "
            if from_env else "cannot connect to gpuqd: ")
    msg = head + "; ".join(f"{p}: {why}" for p, _, why in tried)
    # Only when there is nothing at all: a socket that exists but refuses
    # says what to do itself, and gpuqd is probably running then.
    if all_absent:
        msg += "; " + _HINT_START
    raise errors.ConnectError(msg, attempts=tried)
