# SPDX-License-Identifier: Apache-2.0
"""gpuq for asyncio: ``await gpuq.aio.connect()`` gives an :class:`AsyncClient`.

The same ops, arguments and errors as :class:`gpuq.Client`, as coroutines::

    async with gpuq.aio.connect() as c:
        y = await c.normalize(x, method="l2")
        ys = await asyncio.gather(*(c.normalize(b) for b in batches))  # pipelined

Each op sends its request at once and awaits the reply, so concurrent
calls are pipelined on the one connection (up to the server's
``max_inflight``; beyond it a call waits for a reply before it sends).
The socket is read by a reader callback of the event loop and written
without blocking it.

Cancelling a task while it awaits an op (``task.cancel()``,
``asyncio.wait_for`` running out), or cancelling the future ``submit()``
returned, sends gpuqd a ``cancel`` for the request (queued behind what is
being written; nothing waits for it): gpuqd drops it if it has not started,
else discards its result. Its reply (``cancelled``, or the result when it
ended first) and the cancel's own are read and dropped, so the connection
stays in step. The reply is not written into the caller's ``out=`` unless
it was already being received, or the array is in an arena (gpuqd may
write it).
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket as _socket
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _base
from . import _convert as cv
from . import _copy, _docs, _ops, _progress, _socketpath, errors
from ._ops import EARTH_RADIUS_KM, Call, KnnResult, Result
from ._progress import ProgressFn, Tracker
from ._resident import Resident, check_name
from ._session import SHM_MIN_BYTES, Pending

__all__ = ["connect", "AsyncClient"]

Input = Union[ArrayLike, Resident]  # as gpuq.client's
Output = Optional[Union[np.ndarray, Resident]]

_NOSIGNAL = getattr(_socket, "MSG_NOSIGNAL", 0)
_IOV = 512


class AsyncClient(_base.Base):
    __doc__ = "A session with gpuqd for asyncio code; make one with " \
        ":func:`gpuq.aio.connect`.\n\n    " + _base.Base.__doc__

    def __init__(self, sock: _socket.socket, path: str, transport: str = "auto",
                 shm_min_bytes: int = SHM_MIN_BYTES, deadline_ms: Optional[int] = None):
        self._init_base(path, transport, shm_min_bytes, deadline_ms)
        self._loop = asyncio.get_running_loop()
        sock.setblocking(False)
        self._sock = sock
        self._fd = sock.fileno()
        self._out: collections.deque = collections.deque()
        self._writing = False
        # progress= reports of the frames queued: the stream offset at which
        # each such frame ends, bytes queued and bytes sent so far
        self._txp: collections.deque = collections.deque()  # (end, Tracker)
        self._queued = 0
        self._flushed = 0
        self._slot_waiters: collections.deque = collections.deque()
        self._arena_lock = asyncio.Lock()
        self._loop.add_reader(self._fd, self._on_readable)

    async def _hello(self, name: Optional[str], priority: Any, device: Optional[int]) -> None:
        hdr, _, _ = await self._control("hello", _base.hello_keys(name, priority, device))
        self._apply_hello(hdr)

    async def close(self) -> None:
        """Close the connection; requests still in flight fail with ClosedError."""
        self._shut(errors.ClosedError("the client closed the connection"))
        self._closed = True

    def _shut(self, exc: BaseException) -> None:
        if self._s.broken is None:
            self._s.broken = exc
        if self._fd >= 0:
            self._loop.remove_reader(self._fd)
            if self._writing:
                self._loop.remove_writer(self._fd)
                self._writing = False
            self._fd = -1
            self._sock.close()
        self._out.clear()
        self._s.fail_all(self._s.broken)
        if self._s.pool is not None:
            self._s.pool.close()
        while self._s.fds:
            os.close(self._s.fds.popleft())
        self._wake_slots()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # ---- I/O, driven by the loop ----

    def _on_readable(self) -> None:
        for _ in range(64):  # then let other callbacks run
            if self._fd < 0:
                return
            if not self._pump(self._shut):
                return
            while True:  # frames are queued whole: a resend can go at any time
                bufs = self._s.resend()
                if bufs is None:
                    break
                self._write(bufs)

    def _write(self, bufs: List[Any], progress: Optional[Tracker] = None) -> None:
        """Queue a whole frame; it goes out in order, whoever awaits what.
        progress: its request's reports (sending, then queued once written)."""
        views = [b if isinstance(b, memoryview) else memoryview(b) for b in bufs]
        self._out.extend(views)
        for v in views:
            self._queued += v.nbytes
        if progress is not None:
            self._txp.append((self._queued, progress))
        if not self._writing:
            self._flush()

    def _sent(self, n: int) -> None:
        """n more bytes went out: the progress of the frames they belong to."""
        self._flushed += n
        txp = self._txp
        while txp and txp[0][0] <= self._flushed:
            txp.popleft()[1].report("queued")
        if txp and n:
            end, t = txp[0]
            t.report("sending", end - self._flushed)

    def _flush(self) -> None:
        out = self._out
        while out:
            views = [out[i] for i in range(min(len(out), _IOV))]
            try:
                n = self._sock.sendmsg(views, (), _NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                if not self._writing:
                    self._loop.add_writer(self._fd, self._flush)
                    self._writing = True
                return
            except OSError as e:
                # gpuqd closed; a reply it left (busy, timeout) is still read,
                # then EOF fails what is waiting.
                out.clear()
                self._txp.clear()
                self._loop.call_later(1.0, self._shut, errors.ClosedError(
                    f"gpuqd closed the connection ({e.strerror or e})"))
                break
            if self._txp:
                self._sent(n)
            else:
                self._flushed += n
            while n:
                k = min(n, len(out[0]))
                n -= k
                if k == len(out[0]):
                    out.popleft()
                else:
                    out[0] = out[0][k:]
        if self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False

    def _resolver(self, fut: asyncio.Future) -> Callable[[Any, Optional[BaseException]], None]:
        def resolve(value: Any, exc: Optional[BaseException]) -> None:
            if not fut.done():
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(value)
            self._wake_slots()
        return resolve

    def _drop(self, value: Any, exc: Optional[BaseException]) -> None:
        """The resolve of a given-up request (and of its cancel)."""
        self._wake_slots()

    def _cancel(self, p: Pending) -> None:
        """Cancel request p in gpuqd, best effort; its reply is dropped."""
        if self._fd < 0:
            return
        got = self._s.cancel(p, self._drop)
        if got is not None:
            self._write(got[0])

    def _wake_slots(self) -> None:
        while self._slot_waiters:
            w = self._slot_waiters.popleft()
            if not w.done():
                w.set_result(None)
                break

    async def _control(self, op: str, keys: Optional[dict] = None, want_fd: bool = False,
                       payload: bytes = b"") -> Tuple[dict, Optional[bytearray], Optional[int]]:
        self._check()
        fut = self._loop.create_future()
        bufs, _ = self._s.control(op, keys or {}, self._resolver(fut), payload, want_fd)
        self._write(bufs)
        return await fut

    async def _ensure_room(self, nbytes: int) -> None:
        pool = self._s.pool
        if pool is None or nbytes <= 0 or pool.has_room(nbytes):
            return
        async with self._arena_lock:  # one arena_open at a time: concurrent calls share it
            if not pool.has_room(nbytes):
                await self._open_arena(pool, nbytes)

    async def _open_arena(self, pool, nbytes: int) -> None:
        size = pool.want(nbytes)
        if size is None:
            return
        for ask in ((size, nbytes) if size > nbytes else (size,)):  # the extra may not fit
            try:
                hdr, _, fd = await self._control("arena_open", {"size": ask}, want_fd=True)
            except (errors.TooLargeError, errors.BusyError, errors.NoMemoryError):
                continue
            info = hdr.get("info") or {}
            try:
                pool.add(int(info["arena"]), fd, int(info["size"]))
            except (OSError, ValueError, KeyError):  # cannot map it: give it back
                self._arena_refused(nbytes)
                try:
                    await self._control("arena_close", {"arena": int(info.get("arena", 0))})
                except errors.Error:
                    pass
            return
        self._arena_refused(nbytes)

    async def _submit(self, call: Call) -> Tuple[asyncio.Future, Pending]:
        self._check()
        s = self._s
        while s.full():
            w = self._loop.create_future()
            self._slot_waiters.append(w)
            await w
            self._check()
        plan = s.plan(call)
        if plan.use and plan.blocks:
            await self._ensure_room(plan.blocks)
            self._check()
        fut = self._loop.create_future()
        bufs, p = s.compute(call, plan, self._resolver(fut))
        self._write(bufs, p.progress)
        if p.gate is not None:  # its input is copied now, announced piece by piece
            s.gate_run(p, lambda b, rid: self._write(b))
        return fut, p

    async def _run(self, call: Call, deadline_ms: Optional[int],
                   progress: Optional[ProgressFn] = None) -> Any:
        call.deadline_ms = self._deadline if deadline_ms is None else _ops.deadline(deadline_ms)
        call.progress = _progress.check(progress)
        fut, p = await self._submit(call)
        try:
            return await fut
        except asyncio.CancelledError:  # the awaiting task, not gpuq.CancelledError
            self._cancel(p)
            raise

    async def submit(self, op: Union[str, Callable], *args: Any,
                     deadline_ms: Optional[int] = None, progress: Optional[ProgressFn] = None,
                     **kwargs: Any) -> asyncio.Future:
        """Send an op now; returns an asyncio.Future of its value (await it
        later). ``await c.submit("normalize", a)`` is sent once this returns.
        Cancelling the future cancels the request in gpuqd."""
        call = _base.builder(op)(*args, **kwargs)
        call.deadline_ms = self._deadline if deadline_ms is None else _ops.deadline(deadline_ms)
        call.progress = _progress.check(progress)
        fut, p = await self._submit(call)
        fut.add_done_callback(lambda f: self._cancel(p) if f.cancelled() else None)
        return fut

    # ---- arrays in shared memory ----

    async def empty(self, shape: Union[int, Sequence[int]], dtype: DTypeLike = np.float64, *,
                    strict: bool = False) -> np.ndarray:
        """As Client.empty: an array in this session's shared arena (or a
        plain one when there is none and strict is False)."""
        shape, dt, nbytes = _base.empty_size(shape, dtype)
        pool = self._s.pool
        if pool is None:
            return self._no_arena(shape, dt, strict, "gpuqd offers this session no "
                                                     "shared-memory arenas")
        if nbytes == 0:
            return np.empty(shape, dt)
        self._check()
        await self._ensure_room(nbytes)
        blk = pool.alloc(nbytes)
        if blk is None:
            return self._no_arena(shape, dt, strict, f"no arena room for {nbytes} bytes "
                                                     f"(session_arena {pool.limit}, 16 arenas)")
        return blk.array(shape, dt)

    async def asarray(self, a: ArrayLike, dtype: DTypeLike = None, *, strict: bool = False
                      ) -> np.ndarray:
        """As Client.asarray: a copied into this session's arena."""
        arr = cv.asarray(a, "a")
        dt = cv.natural(arr, "a") if dtype is None else np.dtype(dtype)
        if self.in_arena(arr) and arr.dtype == dt:
            return arr
        out = await self.empty(arr.shape, dt, strict=strict)
        _copy.copy(out, arr, "unsafe" if dtype is None else "same_kind")
        return out

    # ---- the ops ----

    async def normalize(self, a: Input, method: str = "sum", flat: bool = False, *,
                        on_zero: str = "error", dtype: DTypeLike = None, out: Output = None,
                        timing: bool = False, deadline_ms: Optional[int] = None,
                        access: Optional[str] = None, persist: bool = False,
                        axis: Optional[int] = None,
                        progress: Optional[ProgressFn] = None) -> Result:
        return await self._run(_ops.normalize(a, method, flat, on_zero, dtype, out, timing,
                                              access, persist, axis), deadline_ms, progress)

    async def haversine(self, a: Input, b: Optional[Input] = None, *,
                        to: Optional[Tuple[float, float]] = None,
                        radius: float = EARTH_RADIUS_KM, dtype: DTypeLike = None,
                        out: Output = None, timing: bool = False,
                        deadline_ms: Optional[int] = None,
                        access: Optional[str] = None, persist: bool = False,
                        progress: Optional[ProgressFn] = None) -> Result:
        return await self._run(_ops.haversine(a, b, to, radius, dtype, out, timing, access,
                                              persist), deadline_ms, progress)

    async def grid(self, lat: Tuple[float, float, int] = (-90.0, 90.0, 1000),
                   lon: Tuple[float, float, int] = (-180.0, 180.0, 1000), *,
                   to: Tuple[float, float] = (30.0, 101.0), radius: float = EARTH_RADIUS_KM,
                   dtype: DTypeLike = np.float64, out: Output = None, timing: bool = False,
                   deadline_ms: Optional[int] = None, access: Optional[str] = None,
                   persist: bool = False, progress: Optional[ProgressFn] = None) -> Result:
        return await self._run(_ops.grid(lat, lon, to, radius, dtype, out, timing, access,
                                         persist), deadline_ms, progress)

    async def pairwise(self, x: Input, y: Optional[Input] = None,
                       metric: str = "euclidean", *, p: Optional[float] = None,
                       on_zero: str = "error",
                       dtype: DTypeLike = None, out: Output = None, timing: bool = False,
                       deadline_ms: Optional[int] = None,
                       access: Optional[str] = None, persist: bool = False,
                       progress: Optional[ProgressFn] = None) -> Result:
        return await self._run(_ops.pairwise(x, y, metric, on_zero, dtype, out, timing, access,
                                             persist, p), deadline_ms, progress)

    async def knn(self, x: Input, y: Input, k: int, metric: str = "euclidean", *,
                  p: Optional[float] = None, on_zero: str = "error", dtype: DTypeLike = None,
                  out: Optional[Tuple[Output, Output]] = None, timing: bool = False,
                  deadline_ms: Optional[int] = None,
                  access: Optional[str] = None, persist: bool = False,
                  progress: Optional[ProgressFn] = None) -> KnnResult:
        return await self._run(_ops.knn(x, y, k, metric, on_zero, dtype, out, timing, access,
                                        persist, p), deadline_ms, progress)

    normalize.__doc__ = _docs.NORMALIZE
    haversine.__doc__ = _docs.HAVERSINE
    grid.__doc__ = _docs.GRID
    pairwise.__doc__ = _docs.PAIRWISE
    knn.__doc__ = _docs.KNN

    # ---- resident arrays (PROTOCOL.md 3.5) ----

    async def put(self, name: str, a: Input, access: str = "private", persist: bool = False,
                  *, dtype: DTypeLike = None,
                  deadline_ms: Optional[int] = None) -> Dict[str, Any]:
        return await self._run(_ops.put(name, a, access, persist, dtype), deadline_ms)

    async def get(self, name: str, *, out: Output = None, access: Optional[str] = None,
                  persist: bool = False,
                  deadline_ms: Optional[int] = None) -> Optional[np.ndarray]:
        return await self._run(_ops.get(name, out, access, persist=persist), deadline_ms)

    async def list(self) -> List[Dict[str, Any]]:
        return _base.arrays_of((await self._control("list"))[1])

    async def remove(self, name: str) -> Dict[str, Any]:
        hdr = (await self._control("remove", {"name": check_name("name", name)}))[0]
        return hdr.get("info") or {}

    put.__doc__ = _docs.PUT
    get.__doc__ = _docs.GET
    list.__doc__ = _docs.LIST
    remove.__doc__ = _docs.REMOVE

    # ---- the daemon ----

    async def ping(self) -> float:
        """One round trip; returns its time in seconds."""
        t0 = self._loop.time()
        await self._control("ping")
        return self._loop.time() - t0

    async def status(self) -> Dict[str, Any]:
        """The daemon's status map (see Client.status)."""
        return (await self._control("status"))[0].get("info") or {}

    async def sessions(self) -> List[Dict[str, Any]]:
        """Open sessions, one map each (see Client.sessions)."""
        return _base.sessions_doc((await self._control("sessions"))[1])

    async def metrics(self) -> str:
        """The Prometheus text exposition."""
        _, payload, _ = await self._control("metrics")
        return bytes(payload or b"").decode("utf-8")

    async def request(self, op: str, payload: bytes = b"", **keys: Any
                      ) -> Tuple[Dict[str, Any], Optional[bytes]]:
        """A raw request (see Client.request)."""
        hdr, pl, fd = await self._control(op, keys, payload=bytes(payload))
        if fd is not None:
            os.close(fd)
        return hdr, (bytes(pl) if pl is not None else None)


class _Connecting:
    """What connect() returns: await it, or use it with ``async with``."""

    def __init__(self, coro):
        self._coro = coro
        self._client: Optional[AsyncClient] = None

    def __await__(self):
        return self._coro.__await__()

    async def __aenter__(self) -> AsyncClient:
        self._client = await self._coro
        return self._client

    async def __aexit__(self, *exc) -> None:
        if self._client is not None:
            await self._client.close()


async def _connect(socket, priority, device, name, transport, shm_min_bytes, timeout,
                   deadline_ms):
    _base.hello_keys(name, priority, device)  # bad arguments before connecting
    if deadline_ms is not None:
        _ops.deadline(deadline_ms)
    sock, path = _socketpath.open_socket(socket, timeout)
    try:
        c = AsyncClient(sock, path, transport, shm_min_bytes, deadline_ms)
    except BaseException:
        sock.close()
        raise
    try:
        await c._hello(name, priority, device)
    except BaseException:
        c._shut(errors.ClosedError("connect failed"))
        raise
    if transport == "shm" and not c.shm:
        await c.close()
        raise errors.BadArgumentError("transport shm: gpuqd offers this session no shared-memory "
                                      "arenas (session_arena 0)")
    return c


def connect(socket: Optional[str] = None, priority: Union[str, int] = "normal",
            device: Optional[int] = None, name: Optional[str] = None, *,
            transport: str = "auto", shm_min_bytes: int = SHM_MIN_BYTES,
            timeout: Optional[float] = None, deadline_ms: Optional[int] = None) -> _Connecting:
    """As gpuq.connect, for asyncio: ``c = await gpuq.aio.connect()`` or
    ``async with gpuq.aio.connect() as c:``."""
    return _Connecting(_connect(socket, priority, device, name, transport, shm_min_bytes,
                                timeout, deadline_ms))
