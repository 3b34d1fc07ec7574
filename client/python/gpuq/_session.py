# SPDX-License-Identifier: Apache-2.0
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

Gated input (PROTOCOL.md 3.4): when the staged inputs come to ``GATE_MIN``
bytes or more, the hello said ``gate: true`` and ``GPUQ_GATE`` is ``1``
(gating is opt-in), the request goes out with ``"gate": true`` before its inputs are
copied; the client then copies them in pieces (:func:`piece_bytes`) and
sends a ``ready`` after each (:meth:`Session.gate_run`), so gpuqd uploads
one piece while the next is copied. The ``ready`` requests' replies (after
the request's own) are consumed by its :class:`Gate`: the caller's value
comes once the last of them is in, and a ``ready`` refused (a client bug)
is raised in its place. A copy that fails announces the whole input (so
gpuqd is not left waiting until ``frame_timeout``) and cancels the request.

Results are the same bytes whichever way they went.

Resident arrays (PROTOCOL.md 3.5): a call that names them (``Call.special``)
sends its ``in``/``out`` with one entry per array of the op: the name of a
resident array, else what the carried arrays would send without names (an
arena reference, or nil when they go in the payload); carried inputs all go
the one way or the other, as without names. Such a request is never gated
(gpuqd needs every gated input in an arena). Outputs whose shape comes from
the reply (lazy ones) always come in the reply's payload; their arrays are
made when its header arrives.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from . import _convert as cv
from . import _copy, _wire, errors
from ._arena import Pool, block_of
from ._gate import GATE_MIN, GATE_PIECE, Gate, gate_enabled, piece_bytes  # noqa: F401
from ._ops import Call, Timed, Timing, check_lazy_out
from ._pending import Pending, Resolve
from ._progress import Tracker

SHM_MIN_BYTES = 1 << 20
# A compute request refused busy is sent again (new id) this many times. gpuqd
# counts a request in flight until the write of its reply has completed on its
# side, which can be after the client has read that reply: a client that keeps
# exactly max_inflight requests outstanding may get busy now and then.
BUSY_RETRIES = 1000
TRANSPORTS = ("auto", "socket", "shm")
MISS = object()  # express_reply(): not answered that way


def drop(value: Any, exc: Optional[BaseException]) -> None:
    """The resolve of a request whose answer nobody awaits any more."""


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


NO_ARENA = Plan()  # the socket's plan (never changed)


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
        self.stats = {"gated": 0, "ready": 0}  # gated requests and ready requests sent
        self.rx_progress: Optional[Tracker] = None  # the reply payload being read reports

    # ---- requests ----

    def _new(self, op: str, resolve: Resolve) -> Pending:
        p = Pending(self.next_id, op, resolve)
        self.next_id += 1
        return p

    def control(self, op: str, keys: dict, resolve: Resolve, payload: bytes = b"",
                want_fd: bool = False) -> Tuple[list, Pending]:
        """A non-compute request; its value is (reply header, payload or None)."""
        p = self._new(op, resolve)
        p.control = True
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

    def cancel(self, p: Pending, resolve: Resolve = drop) -> Optional[Tuple[list, Pending]]:
        """Give up request p: its reply (cancelled, or its value if it ends
        first) goes to resolve, and none of its bytes into the caller's
        out= unless the reply is being read now (arena outputs excepted:
        gpuqd may still write those). Returns
        the buffers and queue entry of a cancel request to send (an entry
        the caller must take back with unqueue() if it is not sent), or
        None when gpuqd has nothing to cancel: p was answered, its reply is
        being read, or it waits to be sent again after busy (it is taken out
        of that queue)."""
        if p.cancelled:
            return None
        p.cancelled = True
        p.resolve = resolve
        p.req = None  # a busy reply is not sent again
        try:
            self.retry.remove(p)
        except ValueError:
            pass
        else:
            p.keep = None
            return None
        if p is self._cur or p not in self.pending:
            return None
        if p.call is not None and not p.by_ref_out:  # the reply lands in scratch arrays
            p.dests = [np.empty(d.shape, d.dtype) for d in p.dests]
            p.copies = []
        return self.control("cancel", {"request": p.id}, resolve)

    def full(self) -> bool:
        """Whether max_inflight requests that gpuqd counts in flight await
        their replies: compute requests only (PROTOCOL.md 2: a non-compute
        request, such as ready or cancel, never counts)."""
        if len(self.pending) < self.max_inflight:
            return False
        return sum(not q.control for q in self.pending) >= self.max_inflight

    def unqueue(self, p: Pending) -> None:
        """Take back queue entry p of a request that was never sent."""
        self.pending.remove(p)
        if p.want_fd:
            self.fd_wanted -= 1

    def check_limits(self, call: Call) -> None:
        """What gpuqd would refuse for size, refused before sending (a
        payload over max_payload would also make gpuqd close the connection)."""
        lim = self.info.get("limits")
        if not lim:
            return
        mp, mo = lim.get("max_payload"), lim.get("max_output")
        n = 0
        for x in call.inputs:
            n += x.nbytes
        if mp is not None and n > mp:
            raise errors.TooLargeError(f"input needs {n} bytes, over max_payload {mp}")
        n = 0
        for o in call.outs:
            n += o.nbytes
        if mo is not None and n > mo:
            raise errors.TooLargeError(f"output needs {n} bytes, over max_output {mo}")

    def _small_plain(self, call: Call) -> bool:
        """No array of call lives in an arena and all of them (inputs, each
        counted however often it appears, and outputs) come to less than
        shm_min: what the full plan would send by socket, found cheaply."""
        n = 0
        for x in call.inputs:
            if block_of(x) is not None:
                return False
            n += x.nbytes
        for o, uo in zip(call.outs, call.user_out):
            if uo is not None and block_of(uo) is not None:
                return False
            n += o.nbytes
        return n < self.shm_min

    def plan(self, call: Call) -> Plan:
        self.check_limits(call)
        pool = self.pool
        if pool is None or self.transport == "socket":
            return NO_ARENA
        if self.transport == "auto" and self._small_plain(call):
            return NO_ARENA  # the common small request, decided without the full plan
        # Written for speed (a small request on arena arrays takes this path
        # every time): plain loops, no list built that is not kept.
        lookup = pool.lookup
        inputs, outs = call.inputs, call.outs
        pl = Plan()
        refs = pl.refs = [lookup(x) for x in inputs]
        out_ref = pl.out_ref = [None] * len(outs)
        resident = False
        for r in refs:
            if r is not None:
                resident = True
                break
        for j, uo in enumerate(call.user_out):
            if uo is not None and not outs[j].lazy and cv.receivable(uo, outs[j].dtype):
                r = lookup(uo)
                if r is not None:
                    out_ref[j] = r
                    resident = True
        plain = blocks = 0
        if None in refs:
            seen = set()
            for i, x in enumerate(inputs):
                if refs[i] is None and id(x) not in seen:
                    seen.add(id(x))
                    pl.stage.append(i)
                    plain += x.nbytes
                    blocks += (x.nbytes + 63) // 64 * 64
        for j, o in enumerate(outs):
            b = o.nbytes
            r = out_ref[j]
            if r is not None:
                ref = (r[0], r[1], b)
                for i, x in enumerate(inputs):
                    q = refs[i]
                    if q is not None and _overlaps(ref, ((q[0], q[1], x.nbytes),)):
                        r = out_ref[j] = None  # normalize(x, out=x): the result comes through a block
                        break
            if r is None:
                plain += b
                blocks += (b + 63) // 64 * 64
        pl.use = self.transport == "shm" or resident or plain >= self.shm_min
        if not pl.use:
            return pl
        pl.zero_copy = resident
        pl.blocks = blocks
        return pl

    def compute(self, call: Call, plan: Plan, resolve: Resolve) -> Tuple[list, Pending]:
        """The buffers of a compute request (prefix and header, then the
        payload unless it goes by reference) and its queue entry."""
        if not plan.use:
            bufs, h = self.express(call)
            return bufs, self.adopt(call, h, bufs, resolve, self.outputs(call))
        t0 = time.monotonic()  # the progress callback's elapsed time counts the copies too
        p = self._new(call.op, resolve)
        p.call = call
        h = call.header()
        h["id"] = p.id
        nout = len(call.outs)
        p.results = [None] * nout
        p.copies = []
        p.keep = [call.inputs]  # arena inputs must outlive the request
        jobs: Optional[list] = None  # the copies a gated request makes after it is sent
        if not call.inputs:
            in_refs = None
        elif plan.stage:
            if gate_enabled(self.info) and call.wire_in is None and \
                    sum(call.inputs[i].nbytes for i in plan.stage) >= GATE_MIN:
                jobs = []
            in_refs = self._stage_inputs(call, plan, p, jobs)
        else:  # all of them in arenas already
            in_refs = [(r[0], r[1], x.nbytes) for r, x in zip(plan.refs, call.inputs)]
        # lazy outputs (their size unknown until the reply) come by socket
        out_refs = None if call.lazy else self._arena_outputs(call, plan, p)
        if self.transport == "shm" and ((out_refs is None and not call.lazy) or
                                        (call.inputs and in_refs is None)):
            raise errors.TooLargeError(
                f"shm transport: no arena room for the {plan.blocks} bytes this {call.op} "
                f"needs (session_arena {self.pool.limit if self.pool else 0} bytes, 16 "
                f"arenas at most)")
        if in_refs is not None:
            # tuples pack as msgpack arrays
            h["in"] = in_refs if call.wire_in is None else call.in_entries(in_refs)
            payload: List[memoryview] = []
        else:
            if call.wire_in is not None:
                h["in"] = call.in_entries([None] * len(call.inputs))
            payload = [memoryview(a).cast("B") for a in call.inputs if a.nbytes]
        if out_refs is not None:
            if call.wire_out is not None:
                h["out"] = call.out_entries(out_refs)
            elif out_refs:  # nothing comes back (put): no "out"
                h["out"] = out_refs
            p.by_ref_out = True
        else:
            if call.wire_out is not None:
                h["out"] = call.out_entries([None] * len(call.outs))
            p.copy_out = None
            p.results, p.dests, p.copies = self.outputs(call)
        p.req = h
        if jobs and in_refs is not None:
            p.req = dict(h)  # sent again after busy (its input all copied by then): ungated
            h["gate"] = True
            job_of = {id(x): j for j, (_, x) in enumerate(jobs)}
            ranges = [(x.nbytes, job_of.get(id(x), -1)) for x in call.inputs]
            as_bytes = [(d.reshape(-1).view(np.uint8), x.reshape(-1).view(np.uint8))
                        for d, x in jobs]  # both C-contiguous
            p.gate = Gate(p, resolve, as_bytes, ranges)
            p.resolve = p.gate.on_reply
            self.stats["gated"] += 1
        p.req_payload = payload
        plen = 0
        for b in payload:
            plen += b.nbytes
        payload.insert(0, _wire.encode_head(h, plen))
        self.pending.append(p)
        p.progress = Tracker.begin(call.progress, plen + len(payload[0]), t0)
        return payload, p

    def express(self, call: Call) -> Tuple[list, dict]:
        """A request whose arrays all travel in its payload: its buffers and
        header (id assigned), without a queue entry: adopt() makes one when
        express_reply() does not answer it."""
        rid = self.next_id
        self.next_id = rid + 1
        h = call.header()
        h["id"] = rid
        if call.special:
            if call.wire_in is not None:
                h["in"] = call.in_entries([None] * len(call.inputs))
            if call.wire_out is not None:
                h["out"] = call.out_entries([None] * len(call.outs))
        bufs: List[Any] = [None]
        plen = 0
        for a in call.inputs:
            if a.nbytes:
                bufs.append(memoryview(a).cast("B"))
                plen += a.nbytes
        bufs[0] = _wire.encode_head(h, plen)
        return bufs, h

    def adopt(self, call: Call, h: dict, bufs: list, resolve: Resolve, outs: tuple) -> Pending:
        """The queue entry of a request made by express() (and sent); outs:
        outputs(call)."""
        p = Pending(h["id"], call.op, resolve)
        p.call = call
        p.req = h
        p.req_payload = bufs
        p.results, p.dests, p.copies = outs
        self.pending.append(p)
        p.progress = Tracker.begin(call.progress, sum(map(len, bufs)))  # its reports begin
        return p

    def express_reply(self, call: Call, rid: int, n: int, arrays: tuple) -> Any:
        """n bytes were just received into the idle reader while request rid
        (made by express()) is alone in flight: when they are exactly its
        whole reply, a plain success that matches call, return the op's
        value (its arrays received into arrays: outputs(call)). Otherwise
        MISS, with nothing changed (adopt the request and feed the reader the
        n bytes: it makes the same value, or the error)."""
        if call.special:  # named arrays, lazy outputs, put's info: the general reader
            return MISS
        whole = self.reader.whole(n)
        if whole is None:
            return MISS
        hdr, payload = whole
        outs = call.outs
        o = outs[0]
        if hdr.get("id") != rid or hdr.get("status") != "ok" or hdr.get("dtype") != o.dname \
                or hdr.get("shape") != o.wshape or \
                (len(outs) > 1 and self._mismatch(call, hdr) is not None):
            return MISS
        if (o.nbytes if len(outs) == 1 else sum(x.nbytes for x in outs)) != len(payload):
            return MISS
        results, dests, copies = arrays
        if len(dests) == 1:
            if payload:
                memoryview(dests[0]).cast("B")[:] = payload
        else:
            off = 0
            for d in dests:
                k = d.nbytes
                if k:
                    memoryview(d).cast("B")[:] = payload[off:off + k]
                    off += k
        return self._value(call, hdr, results, copies)

    def ref_reply(self, p: Pending, n: int) -> Any:
        """n bytes were just received into the idle reader while p, a
        request whose outputs go by reference (from compute()), is the only
        one in flight: when they are exactly its whole reply, a plain
        success that matches its call, take p off the queue and return its
        value. Otherwise MISS, with nothing changed (feed the reader the n
        bytes: it makes the same value, or the error). express_reply's twin
        for requests through arenas: a small request on arena arrays then
        costs no more than the same request by socket."""
        whole = self.reader.whole(n)
        if whole is None or not p.by_ref_out or len(self.pending) != 1 or \
                self.pending[0] is not p or p.call.lazy:
            return MISS
        hdr, payload = whole
        if hdr.get("id") != p.id or hdr.get("status") != "ok" or len(payload) or \
                self._mismatch(p.call, hdr) is not None:
            return MISS
        self.pending.popleft()
        res = p.results
        if p.copy_out is not None:
            res = [_copy.copy_of(r) if c else r for r, c in zip(res, p.copy_out)]
        p.keep = None
        return self._value(p.call, hdr, res, p.copies)

    @staticmethod
    def outputs(call: Call) -> Tuple[list, list, list]:
        """Where a reply payload's arrays go (dests), what the value is made
        of (results: the caller's out= when the bytes can land in it, else
        new arrays) and the (received, out=) pairs to copy once answered."""
        uos = call.user_out
        if len(uos) == 1 and uos[0] is None and not call.lazy:  # the usual case
            o = call.outs[0]
            arr = np.empty(o.shape, o.dtype)
            return [arr], [arr], []
        if call.lazy:  # made when the reply's header says their shapes (_lazy_arrays)
            return [None] * len(call.outs), [], []
        return Session._outputs(call)

    @staticmethod
    def _outputs(call: Call) -> Tuple[list, list, list]:
        """outputs(), every output's shape known."""
        uos = call.user_out
        if len(uos) == 1 and uos[0] is None:  # the usual case
            o = call.outs[0]
            arr = np.empty(o.shape, o.dtype)
            return [arr], [arr], []
        results: List[Any] = []
        dests: List[np.ndarray] = []
        copies: List[Tuple[np.ndarray, np.ndarray]] = []
        for o, uo in zip(call.outs, uos):
            if uo is None:
                arr = np.empty(o.shape, o.dtype)
                dests.append(arr)
                results.append(arr)
            elif cv.receivable(uo, o.dtype):
                dests.append(uo.reshape(o.shape))
                results.append(uo)
            else:
                tmp = np.empty(o.shape, o.dtype)
                dests.append(tmp)
                copies.append((tmp, uo))
                results.append(uo)
        return results, dests, copies

    def resend(self) -> Optional[list]:
        """The buffers of the oldest busy-refused request, sent again with a
        new id, or None (none waiting, or max_inflight in flight)."""
        if not self.retry or self.full():
            return None
        p = self.retry.popleft()
        p.id = self.next_id
        self.next_id += 1
        p.req["id"] = p.id
        p.error = None
        p.hdr = None
        body = p.req_payload[1:]
        plen = sum(b.nbytes for b in body)
        self.pending.append(p)
        return [_wire.encode_head(p.req, plen)] + body

    def gate_run(self, p: Pending, send: Callable[[list, int], None]) -> None:
        """Gated request p was just sent: copy its staged input piece by
        piece, and after each piece send (send(buffers, id): a whole frame)
        a ready saying how many input bytes are in place. Once p has its
        reply no ready is sent (busy: the rest is still copied, for the
        request sent again ungated; any other reply: copying stops; a
        cancelled p is announced on, and answered cancelled). When
        something raises (a copy, an interrupt), the whole input is
        announced and p cancelled, best effort, before it propagates."""
        g = p.gate
        try:
            while not g.copied_all() and g.answer is None:
                n = g.step()
                if not g.replied:
                    bufs, q = self._ready(g, n)
                    send(bufs, q.id)
        except BaseException:
            self._gate_abort(p, send)
            raise
        finally:
            g.seal()

    def _ready(self, g: Gate, n: int) -> Tuple[list, Pending]:
        bufs, q = self.control("ready", {"request": g.p.id, "bytes": n}, g.on_ready)
        g.waiting += 1
        g.announced = n
        self.stats["ready"] += 1
        return bufs, q

    def _gate_abort(self, p: Pending, send: Callable[[list, int], None]) -> None:
        """Gated request p failed on this side: announce all of its input
        (gpuqd would otherwise wait for it until frame_timeout, then close
        the connection), and cancel it (its reply is dropped)."""
        g = p.gate
        try:
            if not g.replied and g.announced < g.total and self.broken is None:
                bufs, q = self._ready(g, g.total)
                send(bufs, q.id)
            got = self.cancel(p)
            if got is not None:
                send(got[0], got[1].id)
        except BaseException:  # the stream broke meanwhile: what raised first is what counts
            pass

    def _stage_inputs(self, call: Call, plan: Plan, p: Pending, jobs: Optional[list] = None):
        """The "in" references of call's inputs, those not in an arena
        copied into new blocks; None when there is no room. jobs: where a
        gated request lists its copies (block array, input) instead of
        making them now."""
        refs = list(plan.refs)
        staged = {}
        for i in plan.stage:
            x = call.inputs[i]
            blk = self.pool.alloc(x.nbytes) if x.nbytes else None
            if blk is None:
                return None
            arr = blk.array(x.shape, x.dtype)
            if jobs is None:
                _copy.copy(arr, x, "no")
            else:
                jobs.append((arr, x))
            p.keep.append(arr)
            staged[id(x)] = (blk.arena.id, blk.off)
        for i, x in enumerate(call.inputs):
            if refs[i] is None:
                refs[i] = staged[id(x)]
        return [(r[0], r[1], x.nbytes) for r, x in zip(refs, call.inputs)]

    def _arena_outputs(self, call: Call, plan: Plan, p: Pending):
        uos = call.user_out
        if len(uos) == 1 and uos[0] is None:  # the usual case, in fewer steps
            o = call.outs[0]
            nbytes = o.nbytes
            blk = self.pool.alloc(nbytes) if nbytes else None
            if blk is None:
                p.copy_out = None
                return None
            arr = blk.array(o.shape, o.dtype)
            p.keep.append(arr)
            p.results[0] = arr
            p.copy_out = [not plan.zero_copy]
            return [(blk.arena.id, blk.off, nbytes)]
        refs = []
        p.copy_out = [False] * len(call.outs)
        for j, (o, uo) in enumerate(zip(call.outs, uos)):
            nbytes = o.nbytes
            r = plan.out_ref[j]
            if r is not None:
                refs.append((r[0], r[1], nbytes))
                p.results[j] = uo
                continue
            blk = self.pool.alloc(nbytes) if nbytes else None
            if blk is None:
                p.results = [None] * len(call.outs)
                p.copies = []
                p.copy_out = None
                return None
            arr = blk.array(o.shape, o.dtype)
            p.keep.append(arr)
            refs.append((blk.arena.id, blk.off, nbytes))
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
        if status == "started" and plen == 0 and self.pending and rid == self.pending[0].id:
            # the started notice (PROTOCOL.md 4.1): its request now runs;
            # its reply follows
            q = self.pending[0]
            if q.progress is not None:
                q.progress.report("running")
            self._cur = None
            return []
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
        if p.gate is not None:
            p.gate.replied = True
        self._cur = p
        p.hdr = hdr
        if status != "ok":
            p.error = errors.from_reply(hdr) if status == "error" else errors.ProtocolError(
                f"reply status {status!r}")
            return [memoryview(bytearray(plen))] if plen else []
        call = p.call
        if call is None:
            if plen:
                p.payload = bytearray(plen)
                return [memoryview(p.payload)]
            return []
        bad = self._mismatch(call, hdr)
        if bad is not None:
            return self._bad_reply(p, plen, bad)
        if call.lazy:
            try:
                self._lazy_arrays(p)
            except errors.Error as e:  # the caller's out= does not fit what came
                p.error = e
                return [memoryview(bytearray(plen))] if plen else []
        outs = call.outs
        if p.by_ref_out:
            if plen:
                return self._bad_reply(p, plen, f"payload of {plen} bytes, expected none")
            return []
        want = 0
        for x in outs:
            want += x.nbytes
        if plen != want:
            return self._bad_reply(p, plen, f"payload of {plen} bytes, expected {want}")
        if plen and p.progress is not None:
            p.progress.report("receiving", plen)
            self.rx_progress = p.progress
        return [memoryview(d).cast("B") for d in p.dests if d.nbytes]

    @staticmethod
    def _lazy_arrays(p: Pending) -> None:
        """The arrays a reply's payload goes into, for a call whose lazy
        outputs its header has just resolved (scratch ones when p was
        cancelled: nothing lands in the caller's out=)."""
        call = p.call
        if p.cancelled:
            p.results = [np.empty(o.shape, o.dtype) for o in call.outs]
            p.dests, p.copies = list(p.results), []
            return
        check_lazy_out(call)
        p.results, p.dests, p.copies = Session._outputs(call)

    @staticmethod
    def _mismatch(call: Call, hdr: dict) -> Optional[str]:
        """What in a success reply's header does not match the request's
        outputs, or None. Lazy outputs take their dtype and shape from it."""
        outs = call.outs
        if call.special:
            for o in outs:
                dk, sk = ("dtype", "shape") if o.pos == 0 else ("dtype_b", "shape_b")
                if o.lazy:
                    bad = o.resolve(hdr.get(dk), hdr.get(sk))
                    if bad is not None:
                        return f"{dk}/{sk}: {bad}"
                elif hdr.get(dk) != o.dname or hdr.get(sk) != o.wshape:
                    return (f"{dk} {hdr.get(dk)} {sk} {hdr.get(sk)}, expected {o.dname} "
                            f"{o.wshape}")
            return None
        o = outs[0]
        if hdr.get("dtype") == o.dname and hdr.get("shape") == o.wshape and (
                len(outs) == 1 or (hdr.get("dtype_b") == outs[1].dname and
                                   hdr.get("shape_b") == outs[1].wshape)):
            return None
        return (f"dtype {hdr.get('dtype')} shape {hdr.get('shape')} (dtype_b "
                f"{hdr.get('dtype_b')} shape_b {hdr.get('shape_b')}), expected "
                f"{[(x.dname, x.wshape) for x in outs]}")

    @staticmethod
    def _bad_reply(p: Pending, plen: int, what: str) -> List[memoryview]:
        p.error = errors.ProtocolError(f"{p.op} reply: {what}")
        return [memoryview(bytearray(plen))] if plen else []

    def _on_frame(self) -> None:
        p = self._cur
        self._cur = None
        if p is None:
            return
        self.rx_progress = None
        if p.error is None and p.progress is not None and p.progress.error is not None:
            p.error = p.progress.error  # the caller's progress callback raised
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
            p.keep = None
            p.resolve(None, p.error)
            return
        if p.call is None:
            p.resolve((p.hdr, p.payload, p.fd), None)
            return
        try:
            res = p.results
            if p.copy_out is not None:
                res = [_copy.copy_of(r) if c else r for r, c in zip(res, p.copy_out)]
            value = self._value(p.call, p.hdr, res, p.copies)
        except Exception as e:  # pragma: no cover - a bug here must not kill the reader
            p.keep = None
            p.resolve(None, e)
            return
        p.keep = None
        p.resolve(value, None)

    @staticmethod
    def _value(call: Call, hdr: dict, results: list, copies) -> Any:
        """A successful compute request's value, its arrays received."""
        for src, dst in copies:
            _copy.copy(dst, src.reshape(dst.shape), "same_kind")
        value = (hdr.get("info") or {}) if call.info else call.finish(results)
        if call.timing:
            value = Timed(value, Timing.from_reply(hdr.get("timing")))
        return value

    def fed(self) -> None:
        """After the reader took a receive's bytes: the reply payload still
        coming, to its request's progress callback."""
        t = self.rx_progress
        if t is not None:
            left = self.reader.payload_left()
            if left:
                t.report("receiving", left)

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
            p.keep = None
            p.resolve(None, exc)
