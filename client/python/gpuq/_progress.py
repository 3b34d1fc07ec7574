# SPDX-License-Identifier: Apache-2.0
"""An op's progress= callback: where one request is, as gpuqctl's progress
line says it (PROTOCOL.md 4.1 for the "started" notice that marks running).

The phases come in this order, each at most once except the byte counts of
"sending" and "receiving", which come again as the bytes go:

  sending    the request is being written to the socket; bytes_left: the
             bytes of its frame still to write (arena inputs are not sent)
  queued     all of it is written; gpuqd has it or is reading it
  running    gpuqd handed it to its device (the started notice)
  receiving  the reply's payload is coming; bytes_left: its bytes still to
             read (a reply with no payload, or by arena, has no such phase)

The callback runs on the thread (or in the event loop) that drives the
connection, between its reads and writes: keep it short. One that raises
gets no more reports, and the call fails with what it raised (after the
reply has been read, so the connection stays usable).
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional

from . import errors

PHASES = ("sending", "queued", "running", "receiving")
_RANK = {p: k for k, p in enumerate(PHASES)}


class Progress(NamedTuple):
    """One report to an op's progress= callback."""

    phase: str  # one of PHASES
    elapsed_s: float  # since the request was made
    bytes_left: Optional[int] = None  # sending/receiving: bytes still to go


ProgressFn = Callable[[Progress], object]


def check(fn: Optional[ProgressFn]) -> Optional[ProgressFn]:
    """An op's progress= argument: None or a callable (BadArgumentError)."""
    if fn is not None and not callable(fn):
        raise errors.BadArgumentError(f"progress must be callable, not {type(fn).__name__}")
    return fn


class Tracker:
    """One request's reports: phases only forward (a notice read while the
    request's own payload is still being written does not bring "queued"
    after "running"), and a callback that raised is not called again."""

    __slots__ = ("fn", "t0", "rank", "error")

    def __init__(self, fn: ProgressFn):
        self.fn = fn
        self.t0 = time.monotonic()
        self.rank = -1
        self.error: Optional[BaseException] = None

    @classmethod
    def begin(cls, fn: Optional[ProgressFn], bytes_left: int,
              t0: Optional[float] = None) -> Optional["Tracker"]:
        """A request's tracker, its "sending" reported with bytes_left to
        write (None without a callback); t0: when the call began (now)."""
        if fn is None:
            return None
        t = cls(fn)
        if t0 is not None:
            t.t0 = t0
        t.report("sending", bytes_left)
        return t

    def report(self, phase: str, bytes_left: Optional[int] = None) -> None:
        rank = _RANK[phase]
        if self.error is not None or rank < self.rank:
            return
        self.rank = rank
        try:
            self.fn(Progress(phase, time.monotonic() - self.t0, bytes_left))
        except Exception as e:  # the call fails with it once its reply is in
            self.error = e
