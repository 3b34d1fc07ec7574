"""One connection's protocol state, shared by the blocking and asyncio clients.

The session numbers requests, keeps the queue of those awaiting a reply
(replies come in request order, PROTOCOL.md section 2), decides how each
compute request's arrays travel, and turns reply frames into return
values or exceptions. It does no I/O: the clients send the buffers it
returns, receive into ``session.reader.target()``, and report received file
descriptors (``session.fds``).

How arrays travel (``transport``):

* ``"socket"``: in the request's payload, results in the reply's.
* ``"auto"`` (default): an input that lives in an arena of this session
  (``Client.empty``/``Client.asarray``, or a view of one) goes by reference;
  so do the others then, copied into arena blocks for the request
  ("staged"), and the results are written into the arena: into the
  caller's ``out=`` when it lives there too, else into new arena arrays
  that are returned as they are (zero-copy both ways). Plain arrays whose
  inputs and results come to ``shm_min`` bytes (1 MiB) or more are staged
  too, with the results copied out of the arena, as libgpuq's blocking
  calls do. No arena offered, or no room: the socket.
* ``"shm"``: always by arena; no room is an error (``TooLargeError``).

Results are the same bytes whichever way they went.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from . import _convert as cv
from . import _wire, errors
from ._arena import Pool
from ._ops import Call, Timed, Timing

SHM_MIN_BYTES = 1 << 20
# A compute request refused busy is sent again (new id) this many times. gpuqd
# counts a request in flight until the write of its reply has completed on its
# side, which can be after the client has read that reply: a client that keeps
# exactly max_inflight requests outstanding may get busy now and then.
BUSY_RETRIES = 1000
TRANSPORTS = ("auto", "socket", "shm")

Resolve = Callable[[Any, Optional[BaseException]], None]


class Pending:
    """A request sent (or being sent) and not yet answered."""

    __slots__ = ("id", "op", "call", "resolve", "results", "dests", "copies", "copy_out",
                 "keep", "by_ref_out", "hdr", "error", "payload", "want_fd", "fd", "req",
                 "req_payload", "tries")

    def __init__(self, rid: int, op: str, resolve: Resolve, call: Optional[Call] = None):
        self.id = rid
        self.op = op
        self.call = call
        self.resolve = resolve
        self.results: List[Optional[np.ndarray]] = []
        self.dests: List[np.ndarray] = []  # where the reply payload goes, in order
        self.copies: List[Tuple[np.ndarray, np.ndarray]] = []  # (from, to) once answered
        self.copy_out: List[bool] = []  # results[j] must leave its (staging) arena block
        self.keep: List[Any] = []  # staged blocks and inputs, alive until answered
        self.by_ref_out = False
        self.hdr: Optional[dict] = None
        self.error: Optional[BaseException] = None
        self.payload: Optional[bytearray] = None
        self.want_fd = False
        self.fd: Optional[int] = None
        self.req: Optional[dict] = None  # the compute request's header, kept to send it again
        self.req_payload: List[memoryview] = []
        self.tries = 0


def _byteviews(arrays) -> List[memoryview]:
    return [memoryview(a).cast("B") for a in arrays if a.nbytes]


def _overlaps(ref, refs) -> bool:
    a, off, n = ref
    return any(r[0] == a and off < r[1] + r[2] and r[1] < off + n for r in refs)


class Plan:
    """How one compute request's arrays travel (see the module text)."""

    __slots__ = ("use", "refs", "stage", "out_ref", "blocks", "zero_copy")

    def __init__(self):
        self.use = False  # through arenas at all
        self.refs: List[Optional[Tuple[int, int]]] = []  # per input: (arena, offset) or None
        self.stage: List[int] = []  # inputs to copy into blocks (indices, duplicates removed)
        self.out_ref: List[Optional[Tuple[int, int]]] = []  # per output: caller's arena out
        self.blocks = 0  # bytes of arena blocks the request needs
        self.zero_copy = False  # results may stay in the arena (the caller uses arenas)


class Session:
    def __init__(self, transport: str = "auto", shm_min: int = SHM_MIN_BYTES):
        if transport not in TRANSPORTS:
            raise errors.BadArgumentError(f'transport "{transport}" is not auto, socket or shm')
        self.transport = transport
        self.shm_min = shm_min
        self.pending: collections.deque = collections.deque()
        self.next_id = 1
        self.reader = _wire.Reader(self._on_head, self._on_frame)
        self.pool: Optional[Pool] = None
        self.fds: collections.deque = collections.deque()
        self.fd_wanted = 0  # arena_open requests awaiting their reply
        self.broken: Optional[BaseException] = None
        self.info: dict = {}
        self.max_inflight = 1
        self._cur: Optional[Pending] = None
        self.retry: collections.deque = collections.deque()  # busy, to be sent again

    # ---- requests ----

    def _new(self, op: str, resolve: Resolve, call: Optional[Call] = None) -> Pending:
        p = Pending(self.next_id, op, resolve, call)
        self.next_id += 1
        return p

    def control(self, op: str, keys: dict, resolve: Resolve, payload: bytes = b"",
                want_fd: bool = False) -> Tuple[list, Pending]:
        """A non-compute request; its value is (reply header, payload or None)."""
        p = self._new(op, resolve)
        h = {"id": p.id, "op": op}
        h.update(keys)
        bufs = [_wire.encode_head(h, len(payload))]
        if payload:
            bufs.append(payload)
        p.want_fd = want_fd
        self.pending.append(p)
        if want_fd:
            self.fd_wanted += 1
        return bufs, p

    def plan(self, call: Call) -> Plan:
        pl = Plan()
        pool = self.pool
        n_in = len(call.inputs)
        pl.refs = [None] * n_in
        pl.out_ref = [None] * len(call.outs)
        if pool is None or self.transport == "socket":
            return pl
        pl.refs = [pool.lookup(x) for x in call.inputs]
        for j, (o, uo) in enumerate(zip(call.outs, call.user_out)):
            if uo is not None and cv.receivable(uo, o.dtype):
                pl.out_ref[j] = pool.lookup(uo)
        resident = any(r is not None for r in pl.refs) or any(r is not None for r in pl.out_ref)
        seen = set()
        plain = 0
        for i, (x, r) in enumerate(zip(call.inputs, pl.refs)):
            if r is None and id(x) not in seen:
                seen.add(id(x))
                pl.stage.append(i)
                plain += x.nbytes
        out_bytes = [int(np.prod(o.shape)) * o.dtype.itemsize for o in call.outs]
        in_refs = [(r[0], r[1], x.nbytes) for r, x in zip(pl.refs, call.inputs) if r is not None]
        for j, r in enumerate(pl.out_ref):
            if r is not None and _overlaps((r[0], r[1], out_bytes[j]), in_refs):
                pl.out_ref[j] = None  # normalize(x, out=x): the result comes through a block
        out_plain = sum(b for b, r in zip(out_bytes, pl.out_ref) if r is None)
        pl.use = self.transport == "shm" or resident or plain + out_plain >= self.shm_min
        if not pl.use:
            return pl
        pl.zero_copy = resident
        pl.blocks = sum(((call.inputs[i].nbytes + 63) // 64 * 64 for i in pl.stage)) + \
            sum((b + 63) // 64 * 64 for b, r in zip(out_bytes, pl.out_ref) if r is None)
        return pl

    def compute(self, call: Call, plan: Plan, resolve: Resolve) -> Tuple[list, Pending]:
        """The buffers of a compute request (prefix and header, then the
        payload unless it goes by reference) and its queue entry."""
        p = self._new(call.op, resolve, call)
        h = call.header()
        h["id"] = p.id
        nout = len(call.outs)
        p.results = [None] * nout
        p.copy_out = [False] * nout
        in_refs = self._stage_inputs(call, plan, p) if plan.use and call.inputs else None
        out_refs = self._arena_outputs(call, plan, p, in_refs or []) if plan.use else None
        if self.transport == "shm" and (out_refs is None or (call.inputs and in_refs is None)):
            raise errors.TooLargeError(
                f"shm transport: no arena room for the {plan.blocks} bytes this {call.op} needs "
                f"(session_arena {self.pool.limit if self.pool else 0} bytes, 16 arenas at most)")
        if in_refs is not None:
            h["in"] = [list(r) for r in in_refs]
            payload: List[memoryview] = []
        else:
            payload = _byteviews(call.inputs)
        if out_refs is not None:
            h["out"] = [list(r) for r in out_refs]
            p.by_ref_out = True
        else:
            p.copies = []
            p.copy_out = [False] * nout
            for j, (o, uo) in enumerate(zip(call.outs, call.user_out)):
                if uo is not None and cv.receivable(uo, o.dtype):
                    p.dests.append(uo.reshape(o.shape))
                    p.results[j] = uo
                elif uo is not None:
                    tmp = np.empty(o.shape, o.dtype)
                    p.dests.append(tmp)
                    p.copies.append((tmp, uo))
                    p.results[j] = uo
                else:
                    arr = np.empty(o.shape, o.dtype)
                    p.dests.append(arr)
                    p.results[j] = arr
        p.keep.append(call.inputs)
        p.req = h
        p.req_payload = payload
        plen = sum(len(b) for b in payload)
        bufs = [_wire.encode_head(h, plen)] + payload
        self.pending.append(p)
        return bufs, p

    def resend(self) -> Optional[list]:
        """The buffers of the oldest busy-refused request, sent again with a
        new id, or None (none waiting, or max_inflight in flight)."""
        if not self.retry or len(self.pending) >= self.max_inflight:
            return None
        p = self.retry.popleft()
        p.id = self.next_id
        self.next_id += 1
        p.req["id"] = p.id
        p.error = None
        p.hdr = None
        plen = sum(len(b) for b in p.req_payload)
        self.pending.append(p)
        return [_wire.encode_head(p.req, plen)] + p.req_payload

    def _stage_inputs(self, call: Call, plan: Plan, p: Pending):
        refs = list(plan.refs)
        staged = {}
        for i in plan.stage:
            x = call.inputs[i]
            blk = self.pool.alloc(x.nbytes) if x.nbytes else None
            if blk is None:
                return None
            arr = blk.array(x.shape, x.dtype)
            np.copyto(arr, x)
            p.keep.append(arr)
            staged[id(x)] = self.pool.lookup(arr)
        for i, x in enumerate(call.inputs):
            if refs[i] is None:
                refs[i] = staged[id(x)]
        return [(r[0], r[1], x.nbytes) for r, x in zip(refs, call.inputs)]

    def _arena_outputs(self, call: Call, plan: Plan, p: Pending, in_refs):
        refs = []
        for j, (o, uo) in enumerate(zip(call.outs, call.user_out)):
            nbytes = int(np.prod(o.shape)) * o.dtype.itemsize
            r = plan.out_ref[j]
            if r is not None:
                refs.append((r[0], r[1], nbytes))
                p.results[j] = uo
                continue
            blk = self.pool.alloc(nbytes) if nbytes else None
            if blk is None:
                p.results = [None] * len(call.outs)
                p.copies = []
                return None
            arr = blk.array(o.shape, o.dtype)
            p.keep.append(arr)
            r = self.pool.lookup(arr)
            refs.append((r[0], r[1], nbytes))
            if uo is not None:
                p.copies.append((arr, uo))
                p.results[j] = uo
            else:
                p.results[j] = arr
                p.copy_out[j] = not plan.zero_copy
        return refs

    # ---- replies ----

    def _on_head(self, hdr: dict, plen: int) -> List[memoryview]:
        rid = hdr.get("id")
        status = hdr.get("status")
        if not self.pending:
            if status == "error":  # e.g. a timeout reply before the server closes
                self.broken = errors.from_reply(hdr)
                self._cur = None
                return [memoryview(bytearray(plen))]
            raise errors.ProtocolError(f"a reply (id {rid}) to no request")
        p = self.pending[0]
        if rid != p.id and not (rid == 0 and status == "error"):
            raise errors.ProtocolError(f"reply id {rid}, expected {p.id} (replies come in order)")
        self.pending.popleft()
        if p.want_fd:
            self.fd_wanted -= 1
        self._cur = p
        p.hdr = hdr
        if status != "ok":
            p.error = errors.from_reply(hdr) if status == "error" else errors.ProtocolError(
                f"reply status {status!r}")
            return [memoryview(bytearray(plen))] if plen else []
        if p.call is None:
            if plen:
                p.payload = bytearray(plen)
                return [memoryview(p.payload)]
            return []
        bad = self._check_reply(p, hdr, plen)
        if bad:
            p.error = errors.ProtocolError(f"{p.op} reply: {bad}")
            return [memoryview(bytearray(plen))] if plen else []
        return _byteviews(p.dests)

    def _check_reply(self, p: Pending, hdr: dict, plen: int) -> str:
        outs = p.call.outs
        for o, dk, sk in zip(outs, ("dtype", "dtype_b"), ("shape", "shape_b")):
            if cv.WIRE.get(hdr.get(dk)) != o.dtype or tuple(hdr.get(sk) or ()) != o.shape:
                return (f"{dk} {hdr.get(dk)} {sk} {hdr.get(sk)}, expected {cv.NAME[o.dtype]} "
                        f"{list(o.shape)}")
        want = 0 if p.by_ref_out else sum(d.nbytes for d in p.dests)
        if plen != want:
            return f"payload of {plen} bytes, expected {want}"
        return ""

    def _on_frame(self) -> None:
        p = self._cur
        self._cur = None
        if p is None:
            return
        if p.error is None and p.want_fd:
            if self.fds:
                p.fd = self.fds.popleft()
            else:
                p.error = errors.ProtocolError(f"{p.op} reply carried no file descriptor")
        if p.error is not None:
            if isinstance(p.error, errors.BusyError) and p.req is not None and \
                    p.tries < BUSY_RETRIES:
                p.tries += 1
                self.retry.append(p)
                return
            p.keep = []
            p.resolve(None, p.error)
            return
        if p.call is None:
            p.resolve((p.hdr, p.payload, p.fd), None)
            return
        try:
            for src, dst in p.copies:
                np.copyto(dst, src.reshape(dst.shape), casting="same_kind")
            res = [np.array(r) if c else r for r, c in zip(p.results, p.copy_out)]
            value = p.call.finish(res)
            if p.call.timing:
                value = Timed(value, Timing.from_reply(p.hdr.get("timing")))
        except Exception as e:  # pragma: no cover - a bug here must not kill the reader
            p.keep = []
            p.resolve(None, e)
            return
        p.keep = []
        p.resolve(value, None)

    def fail_all(self, exc: BaseException) -> None:
        """The stream is gone: every request still waiting gets exc."""
        if self.broken is None:
            self.broken = exc
        waiting = ([self._cur] if self._cur else []) + list(self.pending) + list(self.retry)
        self._cur = None
        self.pending.clear()
        self.retry.clear()
        self.fd_wanted = 0
        for p in waiting:
            p.keep = []
            p.resolve(None, exc)
