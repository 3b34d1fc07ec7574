# SPDX-License-Identifier: Apache-2.0
"""Gated input (PROTOCOL.md 3.4): a staged request's input copied piece by
piece after the request went out, each piece announced by a ``ready``
request, so that gpuqd moves piece k to the device while piece k+1 is
copied. The session (_session.py) decides when a request is gated and
sends the frames; this module plans the pieces and holds the caller's
answer until the request and every ``ready`` are answered.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

import numpy as np

from . import _copy

if TYPE_CHECKING:  # pragma: no cover
    from ._session import Pending

Resolve = Callable[[Any, Optional[BaseException]], None]

# Gated input: staged inputs of GATE_MIN bytes or more are copied after the
# request is sent, in pieces of GATE_PIECE bytes (at least 1/16 of them: a
# ready costs a frame and a reply, so a very large input has at most 16).
GATE_MIN = 2 << 20
GATE_PIECE = 4 << 20


def piece_bytes(staged: int) -> int:
    """Bytes of one piece of a gated request's staged input of that many
    bytes: GATE_PIECE, or 1/16 of the input rounded up to a multiple of 64
    when that is more (the last piece is what is left)."""
    sixteenth = (staged + 15) // 16
    return max(GATE_PIECE, (sixteenth + 63) // 64 * 64)


def gate_enabled(info: dict) -> bool:
    """Whether requests may be gated: the hello said ``gate: true`` and the
    environment's GPUQ_GATE (read at each request) is 1 (opt-in)."""
    return info.get("gate") is True and os.environ.get("GPUQ_GATE", "").strip() == "1"


class Gate:
    """A gated request's staged input, copied piece by piece after the
    request went out, and the ``ready`` requests that announce it.

    The request's resolve is held here until its answer (on_reply) is in,
    no more ready will be sent (seal) and every ready sent has its reply
    (on_ready): only then does the caller get the value, or the first
    ready's error instead (a ready refused is a client bug)."""

    __slots__ = ("p", "resolve", "jobs", "done", "ranges", "piece", "total", "next",
                 "announced", "replied", "answer", "sealed", "waiting", "ready_error")

    def __init__(self, p: Pending, resolve: Resolve, jobs: List[Tuple[np.ndarray, np.ndarray]],
                 ranges: List[Tuple[int, int]]):
        self.p: Optional[Pending] = p  # until sealed
        self.resolve: Optional[Resolve] = resolve  # the caller's, until called
        self.jobs = jobs  # per staged input: (its block, the input), both as 1-D bytes
        self.done = [0] * len(jobs)  # bytes of each job copied
        self.ranges = ranges  # per "in" range: (its bytes, its job; -1: in an arena already)
        self.total = sum(n for n, _ in ranges)
        self.piece = piece_bytes(sum(d.nbytes for d, _ in jobs))
        self.next = 0  # the job the next piece starts in
        self.announced = 0  # bytes the last ready sent said
        self.replied = False  # the request's reply came (busy included)
        self.answer: Optional[Tuple[Any, Optional[BaseException]]] = None
        self.sealed = False  # no ready will be sent any more
        self.waiting = 0  # readies sent and not answered
        self.ready_error: Optional[BaseException] = None

    def copied_all(self) -> bool:
        return self.next >= len(self.jobs)

    def step(self) -> int:
        """Copy the next piece (through _copy.copy); returns the input bytes
        now in place: the "in" ranges' bytes before the first one not yet
        copied (a range in an arena already counts from the start)."""
        left = self.piece
        while left and self.next < len(self.jobs):
            j = self.next
            d, s = self.jobs[j]
            at = self.done[j]
            k = min(left, d.nbytes - at)
            _copy.copy(d[at:at + k], s[at:at + k], "no")
            self.done[j] = at + k
            left -= k
            if at + k == d.nbytes:
                self.next += 1
        return self.in_place()

    def in_place(self) -> int:
        n = 0
        for length, j in self.ranges:
            if j >= 0 and self.done[j] < length:
                return n + self.done[j]
            n += length
        return n

    def on_reply(self, value: Any, exc: Optional[BaseException]) -> None:
        self.answer = (value, exc)
        self._settle()

    def on_ready(self, value: Any, exc: Optional[BaseException]) -> None:
        self.waiting -= 1
        if exc is not None and self.ready_error is None:
            self.ready_error = exc
        self._settle()

    def seal(self) -> None:
        self.sealed = True
        self.jobs = []  # the blocks stay alive through the request's keep
        self.p = None  # no cycle (p.gate): p and its results go when the caller drops them
        self._settle()

    def _settle(self) -> None:
        if self.answer is None or not self.sealed or self.waiting or self.resolve is None:
            return
        resolve, self.resolve = self.resolve, None
        (value, exc), self.answer = self.answer, None  # the value is the caller's alone
        err = self.ready_error
        if err is not None and err is not exc:
            if exc is not None:
                err.__context__ = exc
            value, exc = None, err
        resolve(value, exc)
