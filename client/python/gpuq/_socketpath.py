"""Finding gpuqd's socket, as libgpuq and gpuqctl do.

``$GPUQ_SOCKET`` alone when it is set and not empty; else
``$XDG_RUNTIME_DIR/gpuq/gpuqd.sock`` (when ``XDG_RUNTIME_DIR`` is set and
not empty), then the system socket ``/run/gpuq/gpuqd.sock``: the first
that accepts a connection is used. When none does, :class:`ConnectError`
names every path tried, why it failed and what to do about it.
"""

from __future__ import annotations

import errno
import os
import socket as _socket
import stat
from typing import List, Mapping, Optional, Tuple

from . import errors

SYSTEM_SOCKET = "/run/gpuq/gpuqd.sock"


def candidates(env: Optional[Mapping[str, str]] = None) -> List[str]:
    """The socket paths to try, in order."""
    env = os.environ if env is None else env
    s = env.get("GPUQ_SOCKET")
    if s:
        return [s]
    paths = []
    xdg = env.get("XDG_RUNTIME_DIR")
    if xdg:
        paths.append(os.path.join(xdg, "gpuq", "gpuqd.sock"))
    paths.append(SYSTEM_SOCKET)
    return paths


def diagnose(path: str, err: OSError) -> str:
    """Why connecting to path failed, and the next step, in one line."""
    e = err.errno
    if e == errno.ENOENT:
        d = os.path.dirname(path) or "."
        if not os.path.isdir(d):
            return (f"the directory {d} does not exist (is gpuqd running? start it with "
                    f"`systemctl start gpuqd.socket` or `gpuqd`)")
        return ("no such file (is gpuqd running? start it with `systemctl start gpuqd.socket` "
                "or `gpuqd`)")
    if e == errno.ECONNREFUSED:
        try:
            st = os.stat(path)
            if not stat.S_ISSOCK(st.st_mode):
                return "not a socket (a file of another kind is in the way)"
        except OSError:
            pass
        return ("connection refused: a stale socket, nothing listens on it (gpuqd exited or "
                "was killed); start gpuqd again (`systemctl restart gpuqd.socket` or `gpuqd`)")
    if e in (errno.EACCES, errno.EPERM):
        return ("permission denied: join group gpuq (`sudo usermod -aG gpuq $USER`, then log "
                "in again) or ask the admin for access to this socket")
    if e == errno.ENOTDIR:
        return "a path component is not a directory"
    if e == errno.ENAMETOOLONG or isinstance(err, _TooLong):
        return "the path is too long for a Unix socket (108 bytes at most)"
    if e == errno.EAGAIN:
        return "gpuqd's listen queue is full: it is overloaded; retry"
    return os.strerror(e) if e else str(err)


class _TooLong(OSError):
    pass


def _connect_one(path: str, timeout: Optional[float]) -> _socket.socket:
    if len(os.fsencode(path)) >= 108:
        raise _TooLong(errno.ENAMETOOLONG, os.strerror(errno.ENAMETOOLONG))
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
    first candidate that answers. Raises ConnectError naming every try."""
    paths = [os.fspath(path)] if path is not None else candidates(env)
    tried: List[Tuple[str, int, str]] = []
    for p in paths:
        try:
            return _connect_one(p, timeout), p
        except OSError as e:
            tried.append((p, e.errno or 0, diagnose(p, e)))
    envmap = os.environ if env is None else env
    if path is not None:
        how = "the socket given"
    elif envmap.get("GPUQ_SOCKET"):
        how = "$GPUQ_SOCKET (only that one is tried when it is set)"
    else:
        how = "$GPUQ_SOCKET is not set; tried the per-user then the system socket"
    lines = [f"cannot reach gpuqd ({how}):"]
    lines += [f"  {p}: {why}" for p, _, why in tried]
    raise errors.ConnectError("\n".join(lines), attempts=tried)
