# SPDX-License-Identifier: Apache-2.0
"""The short path of a request on arena arrays (Client._express_arena).

A blocking call whose inputs all live in this session's arenas and whose
one output is a new array (``c.normalize(c.asarray(x))``, the usual small
call on arena arrays) needs none of the full plan's work
(Session.plan/compute: staging, gating, out= and overlap checks, a queue
entry made before the send): its header names the inputs where they are
and a new block of an arena for the output, and a whole plain success
reply is its value. That is Session.express/express_reply's shape for
socket requests, so a small request on arena arrays costs no more than the
same request by socket. The request and its value are the full path's, to
the byte: the header has the same keys (``in``, ``out`` references), the
result is the same array in the same block. Anything else (no room for the
output block, an input not in an arena, an error reply, a partial receive)
goes the full way: :func:`request` returns None before anything is sent,
or :func:`adopt` queues the request sent for the general reader.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from . import _wire
from ._ops import Call
from ._pending import Pending, Resolve
from ._session import MISS


def request(s, call: Call) -> Optional[Tuple[List[bytes], dict, np.ndarray]]:
    """(buffers, header, output array) of call by reference on Session s,
    its id taken, or None when the short path does not apply (nothing taken
    then: the full plan decides)."""
    pool = s.pool
    if pool is None or s.transport == "socket" or call.special or call.lazy or \
            call.progress is not None or len(call.outs) != 1 or call.user_out[0] is not None \
            or not call.inputs:
        return None
    o = call.outs[0]
    nbytes = o.nbytes
    if not nbytes:
        return None
    lookup = pool.lookup
    refs = []
    for x in call.inputs:
        r = lookup(x)
        if r is None:
            return None
        refs.append((r[0], r[1], x.nbytes))  # tuples pack as msgpack arrays
    s.check_limits(call)  # as plan() does first
    blk = pool.alloc(nbytes)
    if blk is None:
        return None  # the full path opens an arena for it, or sends by socket
    arr = blk.array(o.shape, o.dtype)
    rid = s.next_id
    s.next_id = rid + 1
    h = call.header()
    h["id"] = rid
    h["in"] = refs
    h["out"] = [(blk.arena.id, blk.off, nbytes)]
    return [_wire.encode_head(h, 0)], h, arr


def reply(s, call: Call, h: dict, n: int, arr: np.ndarray) -> Any:
    """n bytes were just received into the idle reader while the request of
    header h (from request()) is alone in flight and not queued: when they
    are exactly its whole reply, a plain success that matches call, its
    value (arr, the output block, is the result). Otherwise MISS, nothing
    changed (adopt() it, then feed the reader the n bytes)."""
    whole = s.reader.whole(n)
    if whole is None or s.pending:
        return MISS
    hdr, payload = whole
    if hdr.get("id") != h["id"] or hdr.get("status") != "ok" or len(payload) or \
            s._mismatch(call, hdr) is not None:
        return MISS
    return s._value(call, hdr, [arr], ())


def adopt(s, call: Call, h: dict, bufs: list, arr: np.ndarray, resolve: Resolve) -> Pending:
    """The queue entry of a request made by request() (and sent), as
    Session.compute would have made it: its arrays kept until answered,
    its result the output block (a busy refusal sends it again as it was)."""
    p = Pending(h["id"], call.op, resolve)
    p.call = call
    p.req = h
    p.req_payload = bufs
    p.results = [arr]
    p.copies = []
    p.copy_out = [False]  # the result stays in its block, as the full path's
    p.by_ref_out = True
    p.keep = [call.inputs, arr]
    s.pending.append(p)
    return p
