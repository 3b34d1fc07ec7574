# SPDX-License-Identifier: Apache-2.0
"""The blocking client: gpuq.connect() and gpuq.Client.

A Client is one connection (one session) to gpuqd. Its op methods send a
request and wait for the reply; ``submit()`` sends one and returns a
:class:`Future` at once, so many requests can be in flight (pipelined, up to
the server's ``max_inflight``; replies come in request order). A Client may
be shared by threads: one lock serializes its socket, and whichever thread
waits reads the replies of all.

Failures: a server error reply raises its :mod:`gpuq.errors` class and the
connection stays usable; a broken stream (the server closed it, a socket
error, a malformed reply) fails every request still waiting and every later
call with the error that broke it.

Interrupts: a KeyboardInterrupt (Ctrl-C) in a blocking op sends gpuqd a
``cancel`` for its request (best effort: only when the socket takes it at
once) and propagates; the client stays usable, a later call reading and
dropping the two replies (the request's, the cancel's). In
``Future.result()`` it leaves the request in flight, as ``timeout=`` does.
Where the interrupt cut a frame short (a request partly sent, or a reply
partly received: the client cannot tell what it lost), the client closes
itself instead and every later call raises ClosedError saying so.
``Future.cancel()`` cancels a submitted request.
"""

from __future__ import annotations

import os
import select
import socket as _socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _base
from . import _convert as cv
from . import _arena_express, _copy, _docs, _ops, _progress, _socketpath, errors
from ._ops import EARTH_RADIUS_KM, Call, KnnResult, Result
from ._progress import ProgressFn
from ._resident import Resident, check_name
from ._future import Future
from ._session import MISS, SHM_MIN_BYTES, Pending, Plan, drop

# An op's input: an array (anything NumPy reads), or a resident array by name;
# its out=: an array to write into, a resident array's name to keep it under,
# or None.
Input = Union[ArrayLike, Resident]
Output = Optional[Union[np.ndarray, Resident]]

_SEND_FLAGS = getattr(_socket, "MSG_DONTWAIT", 0) | getattr(_socket, "MSG_NOSIGNAL", 0)


def _close_fd(value: Any, exc: Optional[BaseException]) -> None:
    """The resolve of an arena_open whose caller was interrupted."""
    if value is not None and value[2] is not None:
        os.close(value[2])


class Client(_base.Base):
    __doc__ = "A session with gpuqd; make one with :func:`gpuq.connect`.\n\n    " + \
        _base.Base.__doc__

    def __init__(self, sock: _socket.socket, path: str, transport: str = "auto",
                 shm_min_bytes: int = SHM_MIN_BYTES, deadline_ms: Optional[int] = None):
        self._sock = sock
        self._init_base(path, transport, shm_min_bytes, deadline_ms)
        self._lock = threading.RLock()
        self._ready: List[Future] = []
        self._sending = False  # a frame is partly sent
        self._txp = None  # the progress reports of the compute request being sent
        # What an interrupt must know to leave the stream in step
        # (_interrupted): a frame may be partly sent (_tx); bytes may have been
        # received that the reader has not taken (_rx, with reader.arm()); the
        # id of the newest frame sent whole (_sent: frames of higher ids were
        # queued but not sent); the header of a short-path request sent and
        # not queued (_x).
        self._tx = False
        self._rx = False
        self._sent = 0
        self._x: Optional[dict] = None
        self._xkeep: Any = None  # what _x's request must keep alive (its arena blocks)

    def _hello(self, name: Optional[str], priority: Any, device: Optional[int]) -> None:
        hdr, _, _ = self._control("hello", _base.hello_keys(name, priority, device))
        self._apply_hello(hdr)

    def close(self) -> None:
        """Close the connection. Requests still in flight fail with
        ClosedError; arrays in arenas stay valid (they are no longer shared)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                if self._s.pool is not None:
                    self._s.pool.close()
                try:
                    self._sock.close()
                finally:
                    self._s.fail_all(errors.ClosedError("the client closed the connection"))
                    while self._s.fds:
                        os.close(self._s.fds.popleft())
        self._run_callbacks()  # also those of futures an interrupt failed (_close_interrupted)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            if not self._closed:
                self._sock.close()
        except Exception:
            pass

    # ---- I/O ----

    def _break(self, exc: BaseException) -> None:
        if self._s.broken is None:
            self._s.broken = exc
        try:
            self._sock.close()
        except OSError:
            pass
        self._s.fail_all(self._s.broken)
        if self._s.pool is not None:
            self._s.pool.close()

    def _recv_once(self) -> None:
        """One receive into the reader (blocks until bytes come)."""
        self._s.reader.arm()
        self._rx = True
        self._pump(self._break)
        self._rx = False

    def _resend(self) -> None:
        """Send again what was refused busy (never in the middle of a frame)."""
        while not self._sending and self._s.broken is None:
            bufs = self._s.resend()
            if bufs is None:
                return
            self._send(bufs, self._s.pending[-1].id)

    def _wait(self, fut: Future, timeout: Optional[float]) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            try:
                while not fut._done:
                    self._resend()
                    if fut._done:
                        break
                    if self._s.broken is not None or self._closed:
                        break
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        r = select.select([self._sock], [], [], max(0.0, left))[0] \
                            if left > 0 else []
                        if not r:
                            raise errors.TimeoutError(f"no reply to request {fut.id} within "
                                                      f"{timeout} s (it is still in flight)")
                    self._recv_once()
            except KeyboardInterrupt:  # the request stays in flight, as on a timeout
                self._interrupted(None)
                raise
        self._run_callbacks()

    # ---- interrupts and cancellation (the lock held) ----

    def _interrupted(self, first: Optional[int]) -> None:
        """A KeyboardInterrupt came out of an I/O step. When it cut a frame
        short (a frame partly sent, or bytes received that the reader never
        took), the stream is out of step and the client closes itself: every
        later call raises ClosedError saying so. Otherwise it stays usable:
        frames queued but not sent are taken back, a short-path request in
        flight is queued (its reply to be dropped), and this call's compute
        requests (ids from first on; None: none) are cancelled in gpuqd,
        best effort, their replies to be read and dropped by later calls."""
        s = self._s
        if s.broken is not None or self._closed:
            return
        try:
            if self._tx or (self._rx and not s.reader.untouched()):
                self._close_interrupted()
                return
            self._rx = False
            while s.pending and s.pending[-1].id > self._sent:
                s.unqueue(s.pending[-1])
            x, self._x = self._x, None
            keep, self._xkeep = self._xkeep, None
            if x is not None and all(p.id != x["id"] for p in s.pending):
                q = Pending(x["id"], x["op"], drop)
                q.keep = keep  # gpuqd may still write its arena output
                s.pending.append(q)
            if first is not None:
                for p in list(s.pending) + list(s.retry):
                    if p.id >= first and p.op in _base.BUILDERS:
                        self._cancel(p)
        except KeyboardInterrupt:  # another one, in here
            self._close_interrupted()

    def _close_interrupted(self) -> None:
        self._tx = self._rx = False
        self._x = self._xkeep = None
        self._break(errors.ClosedError("an interrupt (KeyboardInterrupt) cut a frame short, "
                                       "so the client closed the connection; connect again"))
        self._closed = True
        while self._s.fds:
            os.close(self._s.fds.popleft())

    def _cancel(self, p: Pending) -> None:
        """Give up request p; gpuqd gets a cancel for it if the socket takes
        one at once (a cancel never waits for room in it)."""
        if self._s.broken is not None or self._closed:
            return
        got = self._s.cancel(p)
        if got is None:
            return
        bufs, q = got
        self._tx = True
        try:
            n = self._sock.sendmsg(bufs, (), _SEND_FLAGS)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as e:
            n = e
        if n == 0:
            self._s.unqueue(q)
        else:
            self._send_rest(bufs, n)
            self._sent = q.id
        self._tx = False

    def _run_callbacks(self) -> None:
        while self._ready:
            f = self._ready.pop(0)
            cbs, f._callbacks = f._callbacks, []
            for cb in cbs:
                cb(f)

    def _send(self, bufs: List[Any], rid: int) -> None:
        """Send the buffers of frame rid whole. While the socket is full,
        replies are read (gpuqd stops reading a session whose replies pile up
        unread)."""
        self._tx = True
        try:  # the usual case: it all fits in the socket's buffer at once
            n = self._sock.sendmsg(bufs, (), _SEND_FLAGS)
        except OSError as e:
            n = e
        self._send_rest(bufs, n)
        self._sent = rid
        self._tx = False

    def _send_next(self, bufs: List[Any], rid: int) -> None:
        """_send, refused (OSError) while an interrupted send left a frame
        partly sent: a frame after it would put the stream out of step
        (_interrupted then closes the client)."""
        if self._tx:
            raise OSError("a frame is partly sent")
        self._send(bufs, rid)

    def _send_rest(self, bufs: List[Any], n: Union[int, OSError]) -> None:
        """After a first sendmsg of bufs that sent n bytes (or raised n),
        send the rest."""
        if type(n) is not int:
            if not isinstance(n, (BlockingIOError, InterruptedError)):
                self._hung_up(n)
                return
            n = 0
        elif n == sum(map(len, bufs)):  # bytes, and memoryviews of format "B"
            return
        views = []
        for b in bufs:  # what is left of the frame
            v = memoryview(b) if not isinstance(b, memoryview) else b
            if n >= v.nbytes:
                n -= v.nbytes
                continue
            views.append(v[n:] if n else v)
            n = 0
        self._sending = True
        try:
            self._send_views(views)
        finally:
            self._sending = False

    def _send_views(self, views: List[memoryview]) -> None:
        while views:
            try:
                n = self._sock.sendmsg(views, (), _SEND_FLAGS)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self._hung_up(e)
                return
            while n and views:
                k = min(n, len(views[0]))
                n -= k
                views[0] = views[0][k:]
                if not len(views[0]):
                    views.pop(0)
            if views and self._txp is not None:
                self._txp.report("sending", sum(map(len, views)))
            if views:
                rd = [self._sock] if self._s.pending else []
                r, _, _ = select.select(rd, [self._sock], [])
                if r:
                    self._recv_once()
                    if self._s.broken is not None:
                        raise self._s.broken

    def _hung_up(self, e: OSError) -> None:
        """A send failed: gpuqd may have closed after leaving a reply (busy
        over max_sessions, a timeout). Read what is there; requests it does
        not answer fail with ClosedError."""
        try:
            self._sock.settimeout(1.0)
            while self._s.broken is None:
                self._recv_once()
        except OSError:
            pass
        self._break(errors.ClosedError(f"gpuqd closed the connection ({e.strerror or e})"))

    def _control(self, op: str, keys: Optional[dict] = None, want_fd: bool = False,
                 payload: bytes = b"") -> Tuple[dict, Optional[bytearray], Optional[int]]:
        fut = Future(self)
        with self._lock:
            self._check()
            try:
                bufs, p = self._s.control(op, keys or {}, fut._set, payload, want_fd)
                fut.id = p.id
                self._send(bufs, p.id)
            except KeyboardInterrupt:
                self._interrupted(None)
                raise
        try:
            return fut.result()
        except KeyboardInterrupt:
            if want_fd:  # the reply may still come with an arena's fd: close it then
                p.resolve = _close_fd
            raise

    # ---- compute requests ----

    def _ensure_room(self, nbytes: int) -> None:
        pool = self._s.pool
        if pool is None or nbytes <= 0 or pool.has_room(nbytes):
            return
        size = pool.want(nbytes)
        if size is None:
            return
        for ask in ((size, nbytes) if size > nbytes else (size,)):  # the extra may not fit
            try:
                hdr, _, fd = self._control("arena_open", {"size": ask}, want_fd=True)
            except (errors.TooLargeError, errors.BusyError, errors.NoMemoryError):
                continue
            info = hdr.get("info") or {}
            try:
                pool.add(int(info["arena"]), fd, int(info["size"]))
            except (OSError, ValueError, KeyError):  # cannot map it: give it back
                self._arena_refused(nbytes)
                try:
                    self._control("arena_close", {"arena": int(info.get("arena", 0))})
                except errors.Error:
                    pass
            return
        self._arena_refused(nbytes)

    def _start(self, call: Call, resolve, plan: Optional[Plan] = None) -> Pending:
        """Send a compute request (the lock held): first make room under
        max_inflight (reading replies), and an arena when it needs one.
        plan: the request's, when made already."""
        s = self._s
        if s.retry or s.full():
            self._check()
            if s.retry:
                self._resend()
            while s.full() and s.broken is None:
                self._recv_once()
                self._resend()
            plan = None
        if s.broken is not None or self._closed:
            self._check()
        if plan is None:
            plan = s.plan(call)
        if plan.use and plan.blocks:
            self._ensure_room(plan.blocks)
        bufs, p = s.compute(call, plan, resolve)
        self._txp = p.progress
        try:
            self._send(bufs, p.id)
        finally:
            self._txp = None
        if p.progress is not None:
            p.progress.report("queued")
        if p.gate is not None:  # its input is copied now, announced piece by piece
            s.gate_run(p, self._send_next)
        return p

    def _express(self, call: Call, resolve) -> Any:
        """A request alone on the connection whose arrays go by socket (the
        blocking ops' usual case), in the fewest steps: sent, and when the
        first receive brings its whole reply as a plain success, answered
        here (Session.express_reply). Anything else (a partial send or
        receive, an error reply, a broken connection) queues it for the
        general reader, which resolve then tells; returns MISS then."""
        s = self._s
        bufs, h = s.express(call)
        outs = s.outputs(call)
        return self._short(bufs, h, None,
                           lambda n: s.express_reply(call, h["id"], n, outs),
                           lambda: s.adopt(call, h, bufs, resolve, outs))

    def _express_arena(self, call: Call, resolve) -> Any:
        """_express for a request whose inputs all live in this session's
        arenas and whose one output is new (_arena_express.py): None when
        that does not apply (nothing sent), else what _express returns."""
        s = self._s
        made = _arena_express.request(s, call)
        if made is None:
            return None
        bufs, h, arr = made
        return self._short(bufs, h, (call.inputs, arr),
                           lambda n: _arena_express.reply(s, call, h, n, arr),
                           lambda: _arena_express.adopt(s, call, h, bufs, arr, resolve))

    def _short(self, bufs: list, h: dict, keep: Any, answer: Callable[[int], Any],
               adopt: Callable[[], Any]) -> Any:
        """The short paths' send and first receive of request h (its frame
        bufs, not queued): its value when answer(bytes received) gives one
        (not MISS); otherwise adopt() queues it for the general reader and
        MISS is returned. keep: what an interrupt must keep alive with it
        (arena blocks gpuqd may still write)."""
        self._tx = True
        try:
            n = self._sock.sendmsg(bufs, (), _SEND_FLAGS)
        except OSError as e:
            n = e
        got: Any = None
        if n == sum(map(len, bufs)):
            self._sent = h["id"]
            self._x, self._xkeep = h, keep  # sent, not queued: an interrupt queues it
            self._tx = False
            got = self._receive_now()
            if type(got) is int and got:
                v = answer(got)
                if v is not MISS:
                    self._x = self._xkeep = None
                    self._rx = False
                    return v
        adopt()
        self._x = self._xkeep = None
        if got is None:
            self._send_rest(bufs, n)
            self._sent = h["id"]
            self._tx = False
        else:
            self._take(got, self._break)
            self._rx = False
        return MISS

    def _receive_now(self):
        """The first receive of a reply on the short paths: the reader
        armed, what _receive got (bytes in, or None), or the OSError."""
        self._s.reader.arm()
        self._rx = True
        try:
            return self._receive()
        except OSError as e:
            return e

    def _express_ref(self, call: Call, plan: Plan, resolve) -> Any:
        """A request alone on the connection (none queued or to be sent
        again) that goes through arenas: sent (queued, as _start does), and when the first receive brings its
        whole reply as a plain success, answered here (Session.ref_reply).
        Otherwise the bytes go to the general reader, which resolve then
        tells; returns MISS then."""
        s = self._s
        if plan.blocks:
            self._ensure_room(plan.blocks)
        bufs, p = s.compute(call, plan, resolve)
        self._send(bufs, p.id)
        if p.gate is not None:  # its readies' replies follow its own: the general reader
            s.gate_run(p, self._send_next)
            return MISS
        if not s.pending or s.pending[0] is not p:
            return MISS  # answered (or its reply begun) while a large send read replies
        got = self._receive_now()
        if type(got) is int and got:
            v = s.ref_reply(p, got)
            if v is not MISS:
                self._rx = False
                return v
        self._take(got, self._break)
        self._rx = False
        return MISS

    def _run(self, call: Call, deadline_ms: Optional[int],
             progress: Optional[ProgressFn] = None) -> Any:
        """submit + result, without a Future: the blocking ops' path."""
        call.deadline_ms = self._deadline if deadline_ms is None else _ops.deadline(deadline_ms)
        call.progress = _progress.check(progress)
        box: List[Any] = []
        with self._lock:
            s = self._s
            first = s.next_id
            try:
                plan = None
                if not s.pending and not s.retry and s.broken is None and not self._closed \
                        and call.progress is None:  # progress: the general reader reports
                    def done(value: Any, exc: Optional[BaseException]) -> None:
                        box.extend((value, exc))
                    v = self._express_arena(call, done)
                    if v is None:  # the full plan
                        plan = s.plan(call)
                        v = self._express(call, done) if not plan.use else \
                            self._express_ref(call, plan, done)
                    if v is not MISS:
                        return v
                else:
                    self._start(call, lambda v, e: box.extend((v, e)), plan)
                while not box:
                    if s.broken is not None or self._closed:
                        self._check()
                    if s.retry:
                        self._resend()
                    self._recv_once()
            except KeyboardInterrupt:  # Ctrl-C: cancel the request, keep the stream in step
                self._interrupted(first)
                raise
        if self._ready:
            self._run_callbacks()
        if box[1] is not None:
            raise box[1]
        return box[0]

    def submit(self, op: Union[str, Callable], *args: Any, deadline_ms: Optional[int] = None,
               progress: Optional[ProgressFn] = None, **kwargs: Any) -> Future:
        """Send an op and return a Future at once: submit("normalize", a,
        method="l2") is normalize(a, method="l2") without the wait. Keep
        many in flight; replies come in order. When max_inflight requests
        are already in flight, submit first reads the oldest reply.
        Future.cancel() cancels the request in gpuqd."""
        call = _base.builder(op)(*args, **kwargs)
        call.deadline_ms = self._deadline if deadline_ms is None else _ops.deadline(deadline_ms)
        call.progress = _progress.check(progress)
        fut = Future(self)
        with self._lock:
            first = self._s.next_id
            try:
                p = self._start(call, fut._set)
            except KeyboardInterrupt:  # no Future to get it with: cancel it
                self._interrupted(first)
                raise
            fut.id = p.id
            if not fut._done:
                fut._p = p
        return fut

    # ---- arrays in shared memory ----

    def empty(self, shape: Union[int, Sequence[int]], dtype: DTypeLike = np.float64, *,
              strict: bool = False) -> np.ndarray:
        """An uninitialized array that lives in this session's shared arena:
        passed to an op (as input or out=), its bytes are not sent; gpuqd
        reads and writes it in place. Without arenas (gpuqd offers none, or
        its quota is full) a plain numpy.empty, unless strict=True
        (TooLargeError)."""
        shape, dt, nbytes = _base.empty_size(shape, dtype)
        pool = self._s.pool
        if pool is None:
            return self._no_arena(shape, dt, strict, "gpuqd offers this session no "
                                                     "shared-memory arenas")
        if nbytes == 0:
            return np.empty(shape, dt)
        with self._lock:
            self._check()
            self._ensure_room(nbytes)
            blk = pool.alloc(nbytes)
        if blk is None:
            return self._no_arena(shape, dt, strict, f"no arena room for {nbytes} bytes "
                                                     f"(session_arena {pool.limit}, 16 arenas)")
        return blk.array(shape, dt)

    def asarray(self, a: ArrayLike, dtype: DTypeLike = None, *, strict: bool = False
                ) -> np.ndarray:
        """a copied into this session's arena (a itself when it already lives
        there with that dtype). dtype=None converts as the ops do (float32
        and float64 kept, integers to float64, ...)."""
        arr = cv.asarray(a, "a")
        dt = cv.natural(arr, "a") if dtype is None else np.dtype(dtype)
        if self.in_arena(arr) and arr.dtype == dt:
            return arr
        out = self.empty(arr.shape, dt, strict=strict)
        _copy.copy(out, arr, "unsafe" if dtype is None else "same_kind")
        return out

    # ---- the ops ----

    def normalize(self, a: Input, method: str = "sum", flat: bool = False, *,
                  on_zero: str = "error", dtype: DTypeLike = None, out: Output = None,
                  timing: bool = False, deadline_ms: Optional[int] = None,
                  access: Optional[str] = None, persist: bool = False,
                  axis: Optional[int] = None, progress: Optional[ProgressFn] = None) -> Result:
        return self._run(_ops.normalize(a, method, flat, on_zero, dtype, out, timing, access,
                                        persist, axis), deadline_ms, progress)

    def haversine(self, a: Input, b: Optional[Input] = None, *,
                  to: Optional[Tuple[float, float]] = None, radius: float = EARTH_RADIUS_KM,
                  dtype: DTypeLike = None, out: Output = None, timing: bool = False,
                  deadline_ms: Optional[int] = None, access: Optional[str] = None,
                  persist: bool = False, progress: Optional[ProgressFn] = None) -> Result:
        return self._run(_ops.haversine(a, b, to, radius, dtype, out, timing, access, persist),
                         deadline_ms, progress)

    def grid(self, lat: Tuple[float, float, int] = (-90.0, 90.0, 1000),
             lon: Tuple[float, float, int] = (-180.0, 180.0, 1000), *,
             to: Tuple[float, float] = (30.0, 101.0), radius: float = EARTH_RADIUS_KM,
             dtype: DTypeLike = np.float64, out: Output = None, timing: bool = False,
             deadline_ms: Optional[int] = None, access: Optional[str] = None,
             persist: bool = False, progress: Optional[ProgressFn] = None) -> Result:
        return self._run(_ops.grid(lat, lon, to, radius, dtype, out, timing, access, persist),
                         deadline_ms, progress)

    def pairwise(self, x: Input, y: Optional[Input] = None, metric: str = "euclidean",
                 *, p: Optional[float] = None, on_zero: str = "error",
                 dtype: DTypeLike = None, out: Output = None,
                 timing: bool = False, deadline_ms: Optional[int] = None,
                 access: Optional[str] = None, persist: bool = False,
                 progress: Optional[ProgressFn] = None) -> Result:
        return self._run(_ops.pairwise(x, y, metric, on_zero, dtype, out, timing, access,
                                       persist, p), deadline_ms, progress)

    def knn(self, x: Input, y: Input, k: int, metric: str = "euclidean", *,
            p: Optional[float] = None, on_zero: str = "error", dtype: DTypeLike = None,
            out: Optional[Tuple[Output, Output]] = None, timing: bool = False,
            deadline_ms: Optional[int] = None,
            access: Optional[str] = None, persist: bool = False,
            progress: Optional[ProgressFn] = None) -> KnnResult:
        return self._run(_ops.knn(x, y, k, metric, on_zero, dtype, out, timing, access,
                                  persist, p), deadline_ms, progress)

    normalize.__doc__ = _docs.NORMALIZE
    haversine.__doc__ = _docs.HAVERSINE
    grid.__doc__ = _docs.GRID
    pairwise.__doc__ = _docs.PAIRWISE
    knn.__doc__ = _docs.KNN

    # ---- resident arrays (PROTOCOL.md 3.5) ----

    def put(self, name: str, a: Input, access: str = "private", persist: bool = False, *,
            dtype: DTypeLike = None, deadline_ms: Optional[int] = None) -> Dict[str, Any]:
        return self._run(_ops.put(name, a, access, persist, dtype), deadline_ms)

    def get(self, name: str, *, out: Output = None, access: Optional[str] = None,
            persist: bool = False, deadline_ms: Optional[int] = None) -> Optional[np.ndarray]:
        return self._run(_ops.get(name, out, access, persist=persist), deadline_ms)

    def list(self) -> List[Dict[str, Any]]:
        return _base.arrays_of(self._control("list")[1])

    def remove(self, name: str) -> Dict[str, Any]:
        return self._control("remove", {"name": check_name("name", name)})[0].get("info") or {}

    put.__doc__ = _docs.PUT
    get.__doc__ = _docs.GET
    list.__doc__ = _docs.LIST
    remove.__doc__ = _docs.REMOVE

    # ---- the daemon ----

    def ping(self) -> float:
        """One round trip; returns its time in seconds."""
        t0 = time.perf_counter()
        self._control("ping")
        return time.perf_counter() - t0

    def status(self) -> Dict[str, Any]:
        """The daemon's status map (PROTOCOL.md 3.3 "status"): version,
        backend, devices, state, sessions, in_flight, staging, arenas,
        requests and errors by name, bytes in and out, ..."""
        return self._control("status")[0].get("info") or {}

    def sessions(self) -> List[Dict[str, Any]]:
        """Open sessions, one map each (all for an admin, else your own
        uid's); ``self`` marks this one."""
        return _base.sessions_doc(self._control("sessions")[1])

    def metrics(self) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        _, payload, _ = self._control("metrics")
        return bytes(payload or b"").decode("utf-8")

    def drain(self) -> Dict[str, Any]:
        """(admin) Accept no new sessions; gpuqd exits once the open ones close."""
        return self._control("drain")[0].get("info") or {}

    def shutdown(self) -> Dict[str, Any]:
        """(admin) As SIGTERM: answer what was accepted, then exit."""
        return self._control("shutdown")[0].get("info") or {}

    def kill_session(self, session: int) -> Dict[str, Any]:
        """(admin) Close another session now."""
        return self._control("kill_session", {"session": _ops._uint("session", session)})[0] \
            .get("info") or {}

    def set_limit(self, name: str, value: int) -> Dict[str, Any]:
        """(admin) Set a limit (max_inflight, session_staging, ...) until
        gpuqd restarts or reloads; returns {"old": ..., "value": ...}."""
        return self._control("set_limit", {"limit": str(name),
                                           "value": _ops._uint("value", value)})[0] \
            .get("info") or {}

    def request(self, op: str, payload: bytes = b"", **keys: Any
                ) -> Tuple[Dict[str, Any], Optional[bytes]]:
        """A raw request, for ops this client has no method for: the header
        {"op": op, **keys} (id added) and payload bytes as given; returns
        the reply header and its payload (or None). Server errors raise."""
        hdr, pl, fd = self._control(op, keys, payload=bytes(payload))
        if fd is not None:
            os.close(fd)
        return hdr, (bytes(pl) if pl is not None else None)


def connect(socket: Optional[str] = None, priority: Union[str, int] = "normal",
            device: Optional[int] = None, name: Optional[str] = None, *,
            transport: str = "auto", shm_min_bytes: int = SHM_MIN_BYTES,
            timeout: Optional[float] = None, deadline_ms: Optional[int] = None) -> Client:
    """Connect to gpuqd and say hello; returns a :class:`Client` (a context
    manager: ``with gpuq.connect() as c: ...``).

    socket: the socket's path; None finds it as libgpuq does:
    ``$GPUQ_SOCKET`` alone when set, else ``$XDG_RUNTIME_DIR/gpuq/gpuqd.sock``
    then ``/run/gpuq/gpuqd.sock``, the first that answers. When none does,
    :class:`gpuq.ConnectError` (a ConnectionError) names each path tried,
    why it failed and what to do.
    priority: "low", "normal" or "high" (or -1, 0, 1); gpuqd may grant less
    (see ``Client.priority``). device: the GPU index, None for any. name:
    the client name gpuqd shows in its logs and ``gpuqctl sessions``
    (default: the program's name).
    transport: "auto", "socket" or "shm" (how arrays travel; see
    ``Client.empty``). timeout: seconds for the connect itself.
    deadline_ms: the default deadline of every op (see ``Client.deadline_ms``;
    None: none); an op's own deadline_ms= overrides it, 0 turning it off.
    """
    _base.hello_keys(name, priority, device)  # bad arguments before connecting
    if deadline_ms is not None:
        _ops.deadline(deadline_ms)
    sock, path = _socketpath.open_socket(socket, timeout)
    try:
        c = Client(sock, path, transport, shm_min_bytes, deadline_ms)
        c._hello(name, priority, device)
    except BaseException:
        sock.close()
        raise
    if transport == "shm" and not c.shm:
        c.close()
        raise errors.BadArgumentError("transport shm: gpuqd offers this session no shared-memory "
                                      "arenas (session_arena 0)")
    return c
