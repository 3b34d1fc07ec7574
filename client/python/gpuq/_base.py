# SPDX-License-Identifier: Apache-2.0
"""What gpuq.Client and gpuq.aio.AsyncClient share: the hello's arguments and
what its reply says, the session's attributes, arena bookkeeping that needs
no I/O, and the ops by name. The I/O (blocking or asyncio) is theirs."""

from __future__ import annotations

import os
import socket as _socket
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import msgpack
import numpy as np
from numpy.typing import DTypeLike

from . import _ops, errors
from ._arena import Pool, block_of
from ._ops import Call
from ._resident import Resident
from ._session import TRANSPORTS, Session

PRIORITIES = {"low": "low", "normal": "normal", "high": "high", -1: "low", 0: "normal", 1: "high"}
LEVEL_NAMES = {-1: "low", 0: "normal", 1: "high"}
# The compute requests, by op: the ops and the resident arrays' put and get.
BUILDERS: Dict[str, Callable[..., Call]] = {
    "normalize": _ops.normalize, "haversine": _ops.haversine, "grid": _ops.grid,
    "pairwise": _ops.pairwise, "knn": _ops.knn, "put": _ops.put, "get": _ops.get}


def recv_failure(e: OSError) -> errors.Error:
    """What a failed receive of a reply means (the connection is then
    unusable)."""
    if isinstance(e, (ConnectionResetError, BrokenPipeError)):
        return errors.ClosedError(f"gpuqd closed the connection ({e.strerror})")
    return errors.IoError(f"reading a reply: {e.strerror or e}")


def client_name(name: Optional[str]) -> str:
    """The hello's "client": at most 64 bytes of UTF-8, no NUL (default: the
    program's name)."""
    if name is None:
        base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
        name = base if base and base != "-c" else "python"
    b = str(name).replace("\0", "").encode("utf-8", "replace")[:64]
    return b.decode("utf-8", "ignore")  # cut on a character boundary


def priority_name(p: Any) -> str:
    key = p.lower() if isinstance(p, str) else p
    if isinstance(key, bool) or key not in PRIORITIES:
        raise errors.BadArgumentError(f'priority "{p}" is not low, normal or high (or -1, 0, 1)')
    return PRIORITIES[key]


def hello_keys(name: Optional[str], priority: Any, device: Optional[int]) -> Dict[str, Any]:
    keys: Dict[str, Any] = {"version": 1, "client": client_name(name),
                            "priority": priority_name(priority)}
    if device is not None:
        if isinstance(device, bool) or not isinstance(device, int) or device < -1:
            raise errors.BadArgumentError(f"device {device!r} must be an int >= -1 (-1: any)")
        keys["device"] = device
    return keys


def builder(op: Union[str, Callable]) -> Callable[..., Call]:
    """The request builder of an op given by name or by a client's method."""
    name = op if isinstance(op, str) else getattr(op, "__name__", "")
    b = BUILDERS.get(name)
    if b is None:
        raise errors.UnknownOpError(f'no op "{name}" to submit (normalize, haversine, grid, '
                                    f'pairwise, knn, put or get)')
    return b


def arrays_of(payload: Optional[bytearray]) -> List[Dict[str, Any]]:
    """The list reply's payload: one msgpack map per resident array the
    caller may read, one after the other (PROTOCOL.md 3.5, as sessions)."""
    return sessions_doc(payload)


def sessions_doc(payload: Optional[bytearray]) -> List[Dict[str, Any]]:
    """The sessions reply's payload: a stream of msgpack maps."""
    if not payload:
        return []
    unp = msgpack.Unpacker(raw=False, strict_map_key=False)
    unp.feed(payload)
    return list(unp)


def empty_size(shape: Union[int, Sequence[int]], dtype: DTypeLike) -> Tuple[tuple, np.dtype, int]:
    dt = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return shape, dt, int(np.prod(shape, dtype=np.int64)) * dt.itemsize


class Base:
    """Attributes after the hello: ``info`` (the hello reply's map),
    ``limits``, ``backend`` ("cuda" or "cpu"), ``session`` (its id),
    ``priority`` (the level granted: "low", "normal" or "high"), ``device``,
    ``max_inflight``, ``shm`` (whether gpuqd offers this session
    shared-memory arenas), ``path`` (the socket), ``transport`` and
    ``deadline_ms`` (the default of every op's deadline_ms; settable)."""

    _ANC = _socket.CMSG_SPACE(4 * 4)  # room for the fds of one receive

    def _receive(self) -> int:
        """One receive into the reply reader's buffer; returns the bytes read
        (0: gpuqd closed). File descriptors that come with them (only while
        a reply carrying one is awaited) queue in the session. Raises
        OSError."""
        buf = self._s.reader.target()
        if not self._s.fd_wanted:
            return self._sock.recv_into(buf)
        n, anc, _, _ = self._sock.recvmsg_into([buf], self._ANC, _socket.MSG_CMSG_CLOEXEC)
        for level, typ, data in anc:
            if level == _socket.SOL_SOCKET and typ == _socket.SCM_RIGHTS:
                k = len(data) - len(data) % 4
                self._s.fds.extend(int.from_bytes(data[i:i + 4], sys.byteorder)
                                   for i in range(0, k, 4))
        return n

    def _pump(self, fail: Callable[[BaseException], None]) -> Optional[bool]:
        """One receive, fed to the reply reader: True when bytes were read,
        None when none were there (would block, or interrupted), False when
        the connection failed (fail got the error: it is then unusable)."""
        try:
            n = self._receive()
        except OSError as e:
            return self._take(e, fail)
        return self._take(n, fail)

    def _take(self, n: Union[int, OSError], fail: Callable[[BaseException], None]
              ) -> Optional[bool]:
        """What one receive gave (its byte count, or the OSError it raised),
        fed to the reply reader; returns as _pump does."""
        if type(n) is not int:
            if isinstance(n, (BlockingIOError, InterruptedError)):
                return None
            fail(recv_failure(n))
            return False
        if n == 0:
            fail(errors.ClosedError("gpuqd closed the connection"))
            return False
        try:
            self._s.reader.feed(n)
        except errors.Error as e:
            fail(e)
            return False
        self._s.fed()
        return True

    _s: Session
    _closed: bool
    path: str

    def _init_base(self, path: str, transport: str, shm_min_bytes: int,
                   deadline_ms: Optional[int] = None) -> None:
        self._deadline = 0 if deadline_ms is None else _ops.deadline(deadline_ms)
        self.path = path
        self._s = Session(transport, shm_min_bytes)
        self._closed = False
        self.info: Dict[str, Any] = {}
        self.limits: Dict[str, int] = {}

    def _apply_hello(self, hdr: dict) -> None:
        info = hdr.get("info") or {}
        self.info = info
        self.limits = dict(info.get("limits") or {})
        self._s.info = info
        self._s.max_inflight = max(1, int(self.limits.get("max_inflight", 1)))
        if info.get("arenas") and self.limits.get("session_arena", 0) > 0:
            self._s.pool = Pool(int(self.limits["session_arena"]))

    def _check(self) -> None:
        if self._s.broken is not None:
            raise self._s.broken
        if self._closed:
            raise errors.ClosedError("the connection is closed")

    @property
    def backend(self) -> str:
        return str(self.info.get("backend", ""))

    @property
    def session(self) -> int:
        return int(self.info.get("session", 0))

    @property
    def priority(self) -> str:
        return LEVEL_NAMES.get(self.info.get("priority"), str(self.info.get("priority")))

    @property
    def device(self) -> int:
        return int(self.info.get("device", -1))

    @property
    def max_inflight(self) -> int:
        return self._s.max_inflight

    @property
    def shm(self) -> bool:
        """Whether this session may use shared-memory arenas."""
        return self._s.pool is not None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def transport(self) -> str:
        """How arrays travel: "auto", "socket" or "shm" (see gpuq._session)."""
        return self._s.transport

    @transport.setter
    def transport(self, t: str) -> None:
        if t not in TRANSPORTS:
            raise errors.BadArgumentError(f'transport "{t}" is not auto, socket or shm')
        if t == "shm" and self._s.pool is None:
            raise errors.BadArgumentError("transport shm: gpuqd offers this session no "
                                          "shared-memory arenas")
        self._s.transport = t
        if self._s.pool is not None:
            self._s.pool.refused_at = None

    @property
    def deadline_ms(self) -> Optional[int]:
        """The deadline_ms of an op called without one: milliseconds from
        gpuqd's reading of the request to its reply, else DeadlineExceededError
        (None: no deadline). Set it to change the default (None or 0: none)."""
        return self._deadline or None

    @deadline_ms.setter
    def deadline_ms(self, v: Optional[int]) -> None:
        self._deadline = 0 if v is None else _ops.deadline(v)

    def in_arena(self, a: Any) -> bool:
        """Whether a is an array that this session shares with gpuqd (an op
        sends it by reference when it is C-contiguous)."""
        pool = self._s.pool
        if pool is None or not isinstance(a, np.ndarray):
            return False
        b = block_of(a)
        return b is not None and b.pool is pool and b.arena.open

    @staticmethod
    def resident(name: str) -> Resident:
        """The resident array name (PROTOCOL.md 3.5) as an op's input or
        out=: gpuq.Resident(name). The name is checked where a request
        carries it; whether the array exists, only gpuqd says."""
        return Resident(name)

    def _no_arena(self, shape: tuple, dt: np.dtype, strict: bool, why: str) -> np.ndarray:
        if strict:
            raise errors.TooLargeError(why)
        return np.empty(shape, dt)

    def _arena_refused(self, nbytes: int) -> None:
        """An arena_open of that size failed: AUTO does not ask again for it."""
        if self._s.pool is not None:
            self._s.pool.refused_at = nbytes

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"session {self.session}"
        return f"<{type(self).__module__}.{type(self).__name__} {self.path} {self.backend} {state}>"
